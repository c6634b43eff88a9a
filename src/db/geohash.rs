//! Geohash arithmetic for the geo commands (Redis's geohash.c,
//! geohash_helper.c and the math of geo.c), pure functions over `f64`s.
//!
//! A point is stored as a sorted set member whose score is a 52-bit
//! geohash: longitude and latitude are each scaled to a 26-bit integer over
//! their range (longitude −180..180, latitude ±85.05112878, the Web
//! Mercator limits) and their bits interleaved, latitude in the even bits.
//! Points close on the map are then close in score, so a search area is
//! covered by nine geohash boxes (the one holding the centre and its eight
//! neighbours, at a precision chosen from the radius), each a contiguous
//! score range of the sorted set; every candidate in them is then checked
//! against the exact shape.
//!
//! Everything here repeats Redis's floating-point operations in Redis's
//! order (no reassociation, no fused multiply-add, the same libm calls), so
//! scores, decoded coordinates and distances are bit-identical with
//! redis-server's. Where Redis relies on a C conversion whose result for
//! out-of-range values is the x86-64 instruction's (a user's ZADD may give
//! a "geo" member any score), the helpers spell that result out.

use std::f64::consts::PI;

/// Bits per coordinate of a stored score (26 * 2 = 52 bits).
pub const STEP_MAX: u8 = 26;
/// The Web Mercator limits: no point can be stored beyond them.
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Earth's quadratic mean radius for WGS-84, as Redis has it.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
/// Half the Mercator projection's width: radii double up to it to choose
/// the precision of the search boxes.
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians (Redis's `D_R`, computed the same way).
const D_R: f64 = PI / 180.0;
/// The standard geohash alphabet (GEOHASH replies).
const BASE32: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
/// Characters of a GEOHASH reply: 52 bits give ten, the eleventh is "0".
pub const GEOHASH_STRING_LEN: usize = 11;

/// A geohash: `step` bits of each coordinate, interleaved in `bits`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    /// Redis's HASHISZERO: a box excluded from a search.
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The score range `[min, max)` of the members inside this box (Redis's
    /// scoresOfGeoHashBox): the prefix aligned to 52 bits, and the next one.
    pub fn score_range(&self) -> (u64, u64) {
        let next = HashBits {
            bits: self.bits.wrapping_add(1),
            step: self.step,
        };
        (self.align_52bits(), next.align_52bits())
    }

    /// The hash as a 52-bit score prefix (Redis's geohashAlign52Bits).
    pub fn align_52bits(&self) -> u64 {
        let shift = 52u32.saturating_sub(self.step as u32 * 2);
        self.bits.checked_shl(shift).unwrap_or(0)
    }
}

/// A coordinate interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    fn is_zero(&self) -> bool {
        self.min == 0.0 && self.max == 0.0
    }
}

/// The longitude range scores encode.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
/// The latitude range scores encode.
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};
/// The latitude range of standard geohash strings.
const STANDARD_LAT_RANGE: Range = Range {
    min: -90.0,
    max: 90.0,
};

/// The rectangle a geohash stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// The eight boxes around a geohash, at its precision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Neighbors {
    pub north: HashBits,
    pub east: HashBits,
    pub west: HashBits,
    pub south: HashBits,
    pub north_east: HashBits,
    pub south_east: HashBits,
    pub north_west: HashBits,
    pub south_west: HashBits,
}

/// Interleave the low 32 bits of `x` (even positions) and `y` (odd).
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let mut x = xlo as u64;
    let mut y = ylo as u64;
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// Undo `interleave64`: the even bits in the low half, the odd bits in the
/// high half.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let mut x = interleaved;
    let mut y = interleaved >> 1;
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// Encode a point at `step` bits per coordinate over the given ranges
/// (Redis's geohashEncode); `None` outside the ranges or the Mercator
/// limits, or for a step outside 1..=32.
pub fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<HashBits> {
    if step > 32 || step == 0 || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    // Fixed point at `step` bits (2^step is exact as a double).
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// Encode a point over the stored ranges (Redis's geohashEncodeWGS84).
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, step)
}

/// The score GEOADD stores for a point already checked to be in range.
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode_wgs84(longitude, latitude, STEP_MAX).map(|h| h.align_52bits())
}

/// The rectangle of a geohash over the given ranges (Redis's geohashDecode).
pub fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    let step = hash.step as u32;
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    // Redis divides by 2^step as an unsigned long long turned double, and
    // adds one in 32-bit unsigned arithmetic (which wraps).
    let div = 1u64.checked_shl(step).unwrap_or(0) as f64;
    Some(Area {
        latitude: Range {
            min: lat_range.min + (ilato as f64 * 1.0 / div) * lat_scale,
            max: lat_range.min + (ilato.wrapping_add(1) as f64 * 1.0 / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 * 1.0 / div) * long_scale,
            max: long_range.min + (ilono.wrapping_add(1) as f64 * 1.0 / div) * long_scale,
        },
    })
}

/// The centre of a geohash's rectangle over the stored ranges, clamped to
/// them (Redis's geohashDecodeToLongLatWGS84): `[longitude, latitude]`.
pub fn decode_to_long_lat(hash: HashBits) -> Option<[f64; 2]> {
    let area = decode(LONG_RANGE, LAT_RANGE, hash)?;
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some([lon, lat])
}

/// C's `(uint64_t)d` as x86-64 compiles it: exact for 0 ≤ d < 2^64;
/// a negative value goes through a signed conversion and wraps; anything
/// else the instruction cannot represent gives 2^63 (or 0 from 2^64 up).
pub fn c_double_to_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9223372036854775808.0;
    if d >= TWO_63 {
        (c_double_to_i64(d - TWO_63) as u64) ^ (1 << 63)
    } else {
        c_double_to_i64(d) as u64
    }
}

/// C's `(long long)d` on x86-64: truncation toward zero, and `i64::MIN`
/// (the instruction's "integer indefinite") for NaN and out-of-range values.
pub fn c_double_to_i64(d: f64) -> i64 {
    const TWO_63: f64 = 9223372036854775808.0;
    if d.is_nan() || !(-TWO_63..TWO_63).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// The point a sorted set score stands for (Redis's decodeGeohash): any
/// score decodes, clamped into the stored ranges.
pub fn decode_score(score: f64) -> Option<[f64; 2]> {
    decode_to_long_lat(HashBits {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    })
}

/// Move a hash one box east (`d > 0`) or west (`d < 0`), wrapping around.
fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let width = 64u32.saturating_sub(hash.step as u32 * 2);
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64.checked_shr(width).unwrap_or(0);
    if d > 0 {
        x = x.wrapping_add(zz.wrapping_add(1));
    } else {
        x |= zz;
        x = x.wrapping_sub(zz.wrapping_add(1));
    }
    x &= 0xaaaaaaaaaaaaaaaau64.checked_shr(width).unwrap_or(0);
    hash.bits = x | y;
}

/// Move a hash one box north (`d > 0`) or south (`d < 0`), wrapping around.
fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let width = 64u32.saturating_sub(hash.step as u32 * 2);
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64.checked_shr(width).unwrap_or(0);
    if d > 0 {
        y = y.wrapping_add(zz.wrapping_add(1));
    } else {
        y |= zz;
        y = y.wrapping_sub(zz.wrapping_add(1));
    }
    y &= 0x5555555555555555u64.checked_shr(width).unwrap_or(0);
    hash.bits = x | y;
}

/// The eight boxes around `hash` (Redis's geohashNeighbors).
pub fn neighbors(hash: HashBits) -> Neighbors {
    let moved = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: moved(1, 0),
        west: moved(-1, 0),
        south: moved(0, -1),
        north: moved(0, 1),
        north_west: moved(-1, 1),
        north_east: moved(1, 1),
        south_east: moved(1, -1),
        south_west: moved(-1, -1),
    }
}

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// The precision of the nine search boxes for a radius at a latitude
/// (Redis's geohashEstimateStepsByRadius).
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return STEP_MAX;
    }
    let mut range_meters = range_meters;
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    // Make sure the range is included in most of the base cases.
    step -= 2;
    // Wider boxes towards the poles, where meridians converge.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u8
}

/// Distance in meters between two points of the same longitude.
pub fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// Great-circle distance in meters by the haversine formula (Redis's
/// geohashGetDistance, with its shortcut for equal longitudes).
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The form of a search area.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeKind {
    /// Points within `radius` (in the shape's unit) of the centre.
    Radius(f64),
    /// Points within an axis-aligned box of `width` × `height` (in the
    /// shape's unit) centred on the centre.
    Box { width: f64, height: f64 },
}

/// A search area (Redis's GeoShape): its centre `[longitude, latitude]`,
/// its size in a unit, and that unit's size in meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub center: [f64; 2],
    pub conversion: f64,
    pub kind: ShapeKind,
}

impl Shape {
    /// The shape's extent in degrees, `[min_lon, min_lat, max_lon, max_lat]`
    /// (Redis's geohashBoundingBox): longitudes are widened at the edge
    /// nearer the pole, where a meter spans more of them.
    pub fn bounding_box(&self) -> [f64; 4] {
        let [longitude, latitude] = self.center;
        let (height, width) = match self.kind {
            ShapeKind::Radius(r) => (self.conversion * r, self.conversion * r),
            ShapeKind::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        let long_delta = if latitude < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            longitude - long_delta,
            latitude - lat_delta,
            longitude + long_delta,
            latitude + lat_delta,
        ]
    }

    /// The boxes that cover the shape, in the order Redis searches them
    /// (Redis's geohashCalculateAreasByShapeWGS84 and
    /// membersOfAllNeighbors): the centre's box, then north, south, east,
    /// west, north-east, north-west, south-east, south-west. Boxes the
    /// shape cannot reach are zero.
    pub fn search_boxes(&self) -> [HashBits; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let [longitude, latitude] = self.center;
        let radius_meters = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;

        let mut steps = estimate_steps_by_radius(radius_meters, latitude);
        let at_step = |steps: u8| {
            let hash =
                encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or_default();
            let area = decode(LONG_RANGE, LAT_RANGE, hash).unwrap_or_default();
            (hash, neighbors(hash), area)
        };
        let (mut hash, mut nb, mut area) = at_step(steps);

        // Near a box's edge the estimated step can leave part of the shape
        // outside the neighbours: then use boxes twice as large.
        let side = |h: HashBits| decode(LONG_RANGE, LAT_RANGE, h).unwrap_or_default();
        let decrease_step = side(nb.north).latitude.max < max_lat
            || side(nb.south).latitude.min > min_lat
            || side(nb.east).longitude.max < max_lon
            || side(nb.west).longitude.min > min_lon;
        if steps > 1 && decrease_step {
            steps -= 1;
            (hash, nb, area) = at_step(steps);
        }

        // Leave out the neighbours the shape does not reach.
        if steps >= 2 {
            let zero = HashBits::default();
            if area.latitude.min < min_lat {
                (nb.south, nb.south_west, nb.south_east) = (zero, zero, zero);
            }
            if area.latitude.max > max_lat {
                (nb.north, nb.north_east, nb.north_west) = (zero, zero, zero);
            }
            if area.longitude.min < min_lon {
                (nb.west, nb.south_west, nb.north_west) = (zero, zero, zero);
            }
            if area.longitude.max > max_lon {
                (nb.east, nb.south_east, nb.north_east) = (zero, zero, zero);
            }
        }
        [
            hash,
            nb.north,
            nb.south,
            nb.east,
            nb.west,
            nb.north_east,
            nb.north_west,
            nb.south_east,
            nb.south_west,
        ]
    }

    /// The distance in meters from the centre to the point at
    /// `[longitude, latitude]` when the point lies inside the shape
    /// (Redis's geoWithinShape after decoding).
    pub fn distance_if_within(&self, point: [f64; 2]) -> Option<f64> {
        let [x1, y1] = self.center;
        let [x2, y2] = point;
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(x1, y1, x2, y2);
                // As Redis: only a distance beyond the radius is outside
                // (a NaN one, from rounding at antipodes, is inside).
                if d > r * self.conversion {
                    None
                } else {
                    Some(d)
                }
            }
            ShapeKind::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                // The latitude test is cheaper, so it goes first.
                if lat_distance(y2, y1) > height_m / 2.0 {
                    return None;
                }
                if distance(x2, y2, x1, y2) > width_m / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, x2, y2))
            }
        }
    }
}

/// The standard 11-character geohash of a point (GEOHASH's reply): Redis
/// re-encodes the point over latitude ±90 (its own scores use the Mercator
/// limits), and pads the 52 bits with a final "0".
pub fn geohash_string(point: [f64; 2]) -> [u8; GEOHASH_STRING_LEN] {
    let bits =
        encode(LONG_RANGE, STANDARD_LAT_RANGE, point[0], point[1], STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; GEOHASH_STRING_LEN];
    for (i, c) in out.iter_mut().enumerate().take(GEOHASH_STRING_LEN - 1) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = BASE32[idx as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Palermo and Catania, the Redis documentation's examples.
    const PALERMO: [f64; 2] = [13.361389, 38.115556];
    const CATANIA: [f64; 2] = [15.087269, 37.502669];

    #[test]
    fn scores_match_redis_for_the_documented_cities() {
        assert_eq!(score_of(PALERMO[0], PALERMO[1]), Some(3479099956230698));
        assert_eq!(score_of(CATANIA[0], CATANIA[1]), Some(3479447370796909));
    }

    #[test]
    fn decoding_a_score_gives_redis_coordinates() {
        let [lon, lat] = decode_score(3479099956230698.0).unwrap();
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
    }

    #[test]
    fn encode_then_decode_stays_within_one_box() {
        for &(lon, lat) in &[
            (0.0, 0.0),
            (-179.999, -85.0),
            (179.999, 85.0),
            (12.5, -33.25),
            (LONG_MAX, LAT_MAX),
            (LONG_MIN, LAT_MIN),
        ] {
            let score = score_of(lon, lat).unwrap();
            let [dlon, dlat] = decode_score(score as f64).unwrap();
            assert!((dlon - lon).abs() < 1e-5, "{lon} -> {dlon}");
            assert!((dlat - lat).abs() < 1e-5, "{lat} -> {dlat}");
        }
    }

    #[test]
    fn points_outside_the_mercator_limits_do_not_encode() {
        assert_eq!(score_of(0.0, 85.06), None);
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(encode_wgs84(0.0, 0.0, 0), None);
    }

    #[test]
    fn palermo_catania_distance_matches_redis() {
        let p = decode_score(3479099956230698.0).unwrap();
        let c = decode_score(3479447370796909.0).unwrap();
        let d = distance(p[0], p[1], c[0], c[1]);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        assert_eq!(format!("{:.4}", d / 1000.0), "166.2742");
    }

    #[test]
    fn same_longitude_distance_is_the_latitude_arc() {
        assert_eq!(distance(10.0, 1.0, 10.0, 2.0), lat_distance(1.0, 2.0));
        assert_eq!(distance(10.0, 1.0, 10.0, 1.0), 0.0);
    }

    #[test]
    fn geohash_strings_match_redis() {
        let p = decode_score(3479099956230698.0).unwrap();
        assert_eq!(&geohash_string(p), b"sqc8b49rny0");
        let c = decode_score(3479447370796909.0).unwrap();
        assert_eq!(&geohash_string(c), b"sqdtr74hyu0");
    }

    #[test]
    fn neighbors_wrap_around_the_antimeridian() {
        let h = encode_wgs84(179.9, 0.0, 4).unwrap();
        let east = neighbors(h).east;
        let area = decode(LONG_RANGE, LAT_RANGE, east).unwrap();
        assert_eq!(area.longitude.min, -180.0);
    }

    #[test]
    fn box_score_ranges_cover_their_prefix() {
        let h = HashBits {
            bits: 0b101010,
            step: 3,
        };
        let (min, max) = h.score_range();
        assert_eq!(min, 0b101010 << 46);
        assert_eq!(max, 0b101011 << 46);
    }

    #[test]
    fn steps_shrink_with_the_radius_and_near_the_poles() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
        let equator = estimate_steps_by_radius(1000.0, 0.0);
        assert_eq!(estimate_steps_by_radius(1000.0, 70.0), equator - 1);
        assert_eq!(estimate_steps_by_radius(1000.0, -85.0), equator - 2);
    }

    #[test]
    fn radius_search_boxes_contain_the_centre() {
        let shape = Shape {
            center: PALERMO,
            conversion: 1000.0,
            kind: ShapeKind::Radius(200.0),
        };
        let boxes = shape.search_boxes();
        let centre = score_of(PALERMO[0], PALERMO[1]).unwrap();
        let (min, max) = boxes[0].score_range();
        assert!(min <= centre && centre < max);
        let c = decode_score(3479447370796909.0).unwrap();
        assert!(shape.distance_if_within(c).is_some());
        let small = Shape {
            kind: ShapeKind::Radius(100.0),
            ..shape
        };
        assert!(small.distance_if_within(c).is_none());
    }

    #[test]
    fn box_shape_checks_each_axis() {
        let shape = Shape {
            center: [0.0, 0.0],
            conversion: 1000.0,
            kind: ShapeKind::Box {
                width: 200.0,
                height: 100.0,
            },
        };
        // About 89 km east: inside the 100 km half-width.
        assert!(shape.distance_if_within([0.8, 0.0]).is_some());
        // About 89 km north: outside the 50 km half-height.
        assert!(shape.distance_if_within([0.0, 0.8]).is_none());
    }

    #[test]
    fn c_conversions_follow_x86_semantics() {
        assert_eq!(c_double_to_u64(5.9), 5);
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(1e19), 10000000000000000000);
        assert_eq!(c_double_to_u64(1e30), 0);
        assert_eq!(c_double_to_i64(1e30), i64::MIN);
        assert_eq!(c_double_to_i64(-2.5), -2);
    }
}
