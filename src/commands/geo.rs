//! Geo commands (Redis's geo.c): GEOADD, GEODIST, GEOHASH, GEOPOS, and the
//! searches GEOSEARCH, GEOSEARCHSTORE and the GEORADIUS family.
//!
//! A geo set is a plain sorted set whose scores are 52-bit geohashes (the
//! arithmetic is in `db::geohash`). GEOADD turns coordinates into scores
//! and runs ZADD, and propagates as that ZADD, as Redis does by rewriting
//! its argv. Every search goes through one engine, `georadius_generic`,
//! parameterised by the command's [`Form`] the way Redis's georadiusGeneric
//! is by its flags: arguments are parsed in Redis's order (so the same
//! error wins), the nine geohash boxes around the centre are scanned as
//! score ranges of the sorted set, the matches are sorted, then replied or
//! stored.
//!
//! Results come out in Redis's order even among equal distances: a full
//! sort is glibc's qsort (a stable top-down merge sort), a partial one
//! (COUNT below the number of matches) is Redis's pqsort, both ported as
//! they are rather than replaced by the standard library's sorts.

use std::borrow::Cow;

use super::keys::store_result;
use super::zset::{build_zset, pick};
use super::*;
use crate::db::geohash::{self, Shape, ShapeKind};
use crate::db::ZSet;
use crate::protocol::reply::{format_fixed_point, format_printf_f};
use crate::protocol::Reply;

type GeoError = Cow<'static, str>;

const ERR_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
const ERR_MEMBER: &str = "ERR could not decode requested zset member";
/// Decimals of a distance reply (Redis's addReplyDoubleDistance).
const DISTANCE_DECIMALS: u32 = 4;

/// A unit's size in meters (Redis's extractUnitOrReply).
fn parse_unit(arg: &[u8]) -> Result<f64, GeoError> {
    const UNITS: [(&str, f64); 4] = [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)];
    UNITS
        .iter()
        .find(|(name, _)| eq_ic(arg, name))
        .map(|&(_, meters)| meters)
        .ok_or(Cow::Borrowed(ERR_UNIT))
}

/// `longitude latitude` within the storable range (Redis's
/// extractLongLatOrReply): `[longitude, latitude]`.
fn parse_long_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], GeoError> {
    let x = parse_f64(lon).ok_or(ERR_NOT_FLOAT)?;
    let y = parse_f64(lat).ok_or(ERR_NOT_FLOAT)?;
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&x)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&y)
    {
        return Err(format!(
            "ERR invalid longitude,latitude pair {},{}",
            format_printf_f(x, 6),
            format_printf_f(y, 6)
        )
        .into());
    }
    Ok([x, y])
}

/// `radius unit` (Redis's extractDistanceOrReply): the radius and the
/// unit's size in meters.
fn parse_radius(radius: &[u8], unit: &[u8]) -> Result<(f64, f64), GeoError> {
    let r = parse_f64(radius).ok_or("ERR need numeric radius")?;
    if r < 0.0 {
        return Err("ERR radius cannot be negative".into());
    }
    Ok((r, parse_unit(unit)?))
}

/// `width height unit` (Redis's extractBoxOrReply): the box and the unit's
/// size in meters.
fn parse_box(width: &[u8], height: &[u8], unit: &[u8]) -> Result<(ShapeKind, f64), GeoError> {
    let w = parse_f64(width).ok_or("ERR need numeric width")?;
    let h = parse_f64(height).ok_or("ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err("ERR height or width cannot be negative".into());
    }
    let kind = ShapeKind::Box {
        width: w,
        height: h,
    };
    Ok((kind, parse_unit(unit)?))
}

/// Where a member of the set lies (Redis's longLatFromMember).
fn member_position(z: &ZSet, member: &[u8]) -> Option<[f64; 2]> {
    z.score(member).and_then(geohash::decode_score)
}

/// `GEOADD key [NX | XX] [CH] longitude latitude member [longitude latitude member ...]`
///
/// Reply: integer, the members added (with CH, added or moved).
/// Runs as `ZADD key [options] score member ...`, and is propagated so.
pub fn geoadd(c: &mut Ctx, argv: &[&[u8]]) {
    let (mut nx, mut xx) = (false, false);
    let mut longidx = 2;
    while longidx < argv.len() {
        let opt = argv[longidx];
        if eq_ic(opt, "nx") {
            nx = true;
        } else if eq_ic(opt, "xx") {
            xx = true;
        } else if !eq_ic(opt, "ch") {
            // CH is ZADD's to handle.
            break;
        }
        longidx += 1;
    }
    if !(argv.len() - longidx).is_multiple_of(3) || (xx && nx) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let elements = (argv.len() - longidx) / 3;
    let mut zadd: Vec<Vec<u8>> = Vec::with_capacity(longidx + elements * 2);
    zadd.push(b"zadd".to_vec());
    zadd.extend(argv[1..longidx].iter().map(|a| a.to_vec()));
    for triple in argv[longidx..].chunks_exact(3) {
        let [lon, lat] = match parse_long_lat(triple[0], triple[1]) {
            Ok(xy) => xy,
            Err(e) => return c.cl.reply.error(&e),
        };
        // In range, so it encodes.
        let score = geohash::score_of(lon, lat).unwrap_or(0);
        zadd.push(score.to_string().into_bytes());
        zadd.push(triple[2].to_vec());
    }
    let refs: Vec<&[u8]> = zadd.iter().map(|a| a.as_slice()).collect();
    super::zset::zadd(c, &refs);
    c.propagate_as(zadd);
}

/// `GEODIST key member1 member2 [M | KM | FT | MI]`
///
/// Reply: bulk string, the distance with four decimals; null when the key
/// or either member is missing.
pub fn geodist(c: &mut Ctx, argv: &[&[u8]]) {
    let mut to_meters = 1.0;
    if argv.len() == 5 {
        to_meters = match parse_unit(argv[4]) {
            Ok(m) => m,
            Err(e) => return c.cl.reply.error(&e),
        };
    } else if argv.len() > 5 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let z = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.null(),
        Typed::Found(z) => z,
    };
    match (member_position(z, argv[2]), member_position(z, argv[3])) {
        (Some(a), Some(b)) => {
            let d = geohash::distance(a[0], a[1], b[0], b[1]) / to_meters;
            c.cl.reply
                .bulk(format_fixed_point(d, DISTANCE_DECIMALS).as_bytes());
        }
        _ => c.cl.reply.null(),
    }
}

/// The set at `key` for a read, `Err` after a WRONGTYPE reply.
fn geo_read<'s>(
    srv: &'s mut crate::state::Server,
    out: &mut Reply,
    db: usize,
    key: &[u8],
) -> Result<Option<&'s ZSet>, ()> {
    match lookup_typed(srv, db, key, true, pick) {
        Typed::WrongType => {
            out.error(ERR_WRONGTYPE);
            Err(())
        }
        Typed::Missing => Ok(None),
        Typed::Found(z) => Ok(Some(z)),
    }
}

/// `GEOHASH key [member [member ...]]`
///
/// Reply: array of 11-character standard geohash strings, null for a
/// missing member.
pub fn geohash(c: &mut Ctx, argv: &[&[u8]]) {
    let Ok(z) = geo_read(c.srv, &mut c.cl.reply, c.cl.db, argv[1]) else {
        return;
    };
    let out = &mut c.cl.reply;
    out.array(argv.len() - 2);
    for member in &argv[2..] {
        match z.and_then(|z| member_position(z, member)) {
            Some(xy) => out.bulk(&geohash::geohash_string(xy)),
            None => out.null(),
        }
    }
}

/// `GEOPOS key [member [member ...]]`
///
/// Reply: array of `[longitude, latitude]` pairs, a null array for a
/// missing member.
pub fn geopos(c: &mut Ctx, argv: &[&[u8]]) {
    let Ok(z) = geo_read(c.srv, &mut c.cl.reply, c.cl.db, argv[1]) else {
        return;
    };
    let out = &mut c.cl.reply;
    out.array(argv.len() - 2);
    for member in &argv[2..] {
        match z.and_then(|z| member_position(z, member)) {
            Some([lon, lat]) => {
                out.array(2);
                out.human_double(lon);
                out.human_double(lat);
            }
            None => out.null_array(),
        }
    }
}

/// Which search command runs (Redis's RADIUS_* and GEOSEARCH* flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS (`store`) and GEORADIUS_RO: `key longitude latitude radius unit`.
    Radius { store: bool },
    /// GEORADIUSBYMEMBER (`store`) and GEORADIUSBYMEMBER_RO: `key member radius unit`.
    RadiusByMember { store: bool },
    /// GEOSEARCH: `key`, then FROM… and BY… options.
    Search,
    /// GEOSEARCHSTORE: `destination source`, then GEOSEARCH's options and
    /// STOREDIST as a flag.
    SearchStore,
}

impl Form {
    fn source_index(self) -> usize {
        match self {
            Form::SearchStore => 2,
            _ => 1,
        }
    }

    /// Where the options begin.
    fn options_index(self) -> usize {
        match self {
            Form::Radius { .. } => 6,
            Form::RadiusByMember { .. } => 5,
            Form::Search => 2,
            Form::SearchStore => 3,
        }
    }

    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    /// Takes `STORE key` and `STOREDIST key`.
    fn takes_store_key(self) -> bool {
        matches!(
            self,
            Form::Radius { store: true } | Form::RadiusByMember { store: true }
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search.
struct Search<'a> {
    shape: Shape,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    sort: Sort,
    /// Stop at `count` matches instead of finding the nearest ones.
    any: bool,
    /// At most this many results; 0 for all.
    count: usize,
    /// The key to store the results at.
    store: Option<&'a [u8]>,
    /// Store distances (in the unit) as scores instead of geohashes.
    storedist: bool,
}

/// Parse a search's arguments as Redis's georadiusGeneric does, checking
/// each as it comes (the centre member is looked up in `z` on the way), so
/// the same error wins.
fn parse_search<'a>(
    argv: &[&'a [u8]],
    form: Form,
    z: Option<&ZSet>,
) -> Result<Search<'a>, GeoError> {
    let mut s = Search {
        shape: Shape {
            center: [0.0, 0.0],
            conversion: 0.0,
            kind: ShapeKind::Radius(0.0),
        },
        withdist: false,
        withhash: false,
        withcoord: false,
        sort: Sort::None,
        any: false,
        count: 0,
        store: None,
        storedist: false,
    };
    match form {
        Form::Radius { .. } => {
            s.shape.center = parse_long_lat(argv[2], argv[3])?;
            let (r, conversion) = parse_radius(argv[4], argv[5])?;
            (s.shape.kind, s.shape.conversion) = (ShapeKind::Radius(r), conversion);
        }
        Form::RadiusByMember { .. } => {
            // Without the set there is nothing to search: only the options
            // are parsed, for the reply's form.
            if let Some(z) = z {
                s.shape.center = member_position(z, argv[2]).ok_or(ERR_MEMBER)?;
                let (r, conversion) = parse_radius(argv[3], argv[4])?;
                (s.shape.kind, s.shape.conversion) = (ShapeKind::Radius(r), conversion);
            }
        }
        Form::Search => {}
        Form::SearchStore => s.store = Some(argv[1]),
    }

    let (mut frommember, mut fromlonlat, mut byradius, mut bybox) = (false, false, false, false);
    let mut i = form.options_index();
    while i < argv.len() {
        let arg = argv[i];
        // Arguments after this one.
        let left = argv.len() - i - 1;
        if eq_ic(arg, "withdist") {
            s.withdist = true;
        } else if eq_ic(arg, "withhash") {
            s.withhash = true;
        } else if eq_ic(arg, "withcoord") {
            s.withcoord = true;
        } else if eq_ic(arg, "any") {
            s.any = true;
        } else if eq_ic(arg, "asc") {
            s.sort = Sort::Asc;
        } else if eq_ic(arg, "desc") {
            s.sort = Sort::Desc;
        } else if eq_ic(arg, "count") && left >= 1 {
            let n = parse_i64(argv[i + 1]).ok_or(ERR_NOT_INT)?;
            if n <= 0 {
                return Err("ERR COUNT must be > 0".into());
            }
            s.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 1;
        } else if (eq_ic(arg, "store") || eq_ic(arg, "storedist"))
            && left >= 1
            && form.takes_store_key()
        {
            s.store = Some(argv[i + 1]);
            s.storedist = eq_ic(arg, "storedist");
            i += 1;
        } else if eq_ic(arg, "storedist") && form == Form::SearchStore {
            s.storedist = true;
        } else if eq_ic(arg, "frommember") && left >= 1 && form.is_search() && !fromlonlat {
            if let Some(z) = z {
                s.shape.center = member_position(z, argv[i + 1]).ok_or(ERR_MEMBER)?;
            }
            frommember = true;
            i += 1;
        } else if eq_ic(arg, "fromlonlat") && left >= 2 && form.is_search() && !frommember {
            s.shape.center = parse_long_lat(argv[i + 1], argv[i + 2])?;
            fromlonlat = true;
            i += 2;
        } else if eq_ic(arg, "byradius") && left >= 2 && form.is_search() && !bybox {
            let (r, conversion) = parse_radius(argv[i + 1], argv[i + 2])?;
            (s.shape.kind, s.shape.conversion) = (ShapeKind::Radius(r), conversion);
            byradius = true;
            i += 2;
        } else if eq_ic(arg, "bybox") && left >= 3 && form.is_search() && !byradius {
            let (kind, conversion) = parse_box(argv[i + 1], argv[i + 2], argv[i + 3])?;
            (s.shape.kind, s.shape.conversion) = (kind, conversion);
            bybox = true;
            i += 3;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }

    if s.store.is_some() && (s.withdist || s.withhash || s.withcoord) {
        let what = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )
        .into());
    }
    // Redis names the command as the client spelled it.
    let name = || String::from_utf8_lossy(argv[0]);
    if form.is_search() && !(frommember || fromlonlat) {
        return Err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            name()
        )
        .into());
    }
    if form.is_search() && !(byradius || bybox) {
        return Err(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
            name()
        )
        .into());
    }
    if s.any && s.count == 0 {
        return Err("ERR the ANY argument requires COUNT argument".into());
    }
    Ok(s)
}

/// A match: where it is, how far from the centre (meters), its score and
/// its member (borrowed from the set).
#[derive(Clone, Copy)]
struct Point<'z> {
    lon: f64,
    lat: f64,
    dist: f64,
    score: f64,
    member: &'z [u8],
}

/// The members of `z` inside `shape`, box by box in score order (Redis's
/// membersOfAllNeighbors); with a `limit` (ANY), stop once that many are
/// found.
fn points_in_shape<'z>(z: &'z ZSet, shape: &Shape, limit: usize) -> Vec<Point<'z>> {
    let boxes = shape.search_boxes();
    let mut points = Vec::new();
    let full = |n: usize| n > 0 && limit > 0 && n >= limit;
    let mut last_processed = 0;
    for (i, b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        // For huge radii adjacent neighbours can be the same box: Redis
        // skips one equal to the box it searched last, though never
        // compares with the centre box (its "last" starts at 0, read as
        // "none").
        if last_processed != 0 && *b == boxes[last_processed] {
            continue;
        }
        if full(points.len()) {
            break;
        }
        let (min, max) = b.score_range();
        z.visit_score_range(min as f64, max as f64, |score, member| {
            if let Some(xy) = geohash::decode_score(score) {
                if let Some(dist) = shape.distance_if_within(xy) {
                    points.push(Point {
                        lon: xy[0],
                        lat: xy[1],
                        dist,
                        score,
                        member: member.bytes(),
                    });
                }
            }
            !full(points.len())
        });
        last_processed = i;
    }
    points
}

/// Redis's sort_gp_asc: -1, 0 or 1 (and -1 whenever a NaN is involved).
fn cmp_asc(a: &Point, b: &Point) -> i32 {
    if a.dist > b.dist {
        1
    } else if a.dist == b.dist {
        0
    } else {
        -1
    }
}

fn cmp_desc(a: &Point, b: &Point) -> i32 {
    -cmp_asc(a, b)
}

/// glibc's qsort (msort.c): top-down merge sort, halves of `n / 2` and the
/// rest, taking from the left on ties; `tmp` is scratch space.
fn merge_sort<T: Copy>(v: &mut [T], tmp: &mut Vec<T>, cmp: fn(&T, &T) -> i32) {
    if v.len() <= 1 {
        return;
    }
    let (left, right) = v.split_at_mut(v.len() / 2);
    merge_sort(left, tmp, cmp);
    merge_sort(right, tmp, cmp);
    tmp.clear();
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        if cmp(&left[i], &right[j]) <= 0 {
            tmp.push(left[i]);
            i += 1;
        } else {
            tmp.push(right[j]);
            j += 1;
        }
    }
    // What is left of the right half is already in place.
    tmp.extend_from_slice(&left[i..]);
    let merged = tmp.len();
    v[..merged].copy_from_slice(tmp);
}

/// Redis's pqsort.c: Bentley & McIlroy's quicksort that only recurses into
/// partitions overlapping positions `lrange..=rrange`, which end up sorted.
fn pqsort<T>(v: &mut [T], cmp: fn(&T, &T) -> i32, lrange: usize, rrange: usize) {
    pqsort_part(v, 0, v.len(), cmp, lrange, rrange);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: fn(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

/// Swap the `n` elements at `a` with the `n` at `b` (ranges apart).
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for k in 0..n {
        v.swap(a + k, b + k);
    }
}

/// Sort the `n` elements at `a` of `v` (pqsort.c's _pqsort, positions as
/// indices into the whole slice).
fn pqsort_part<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: fn(&T, &T) -> i32,
    lrange: usize,
    rrange: usize,
) {
    // Does the part `[lo, lo + len)` reach into `lrange..=rrange`?
    let wanted = |lo: usize, len: usize| {
        let hi = lo + len;
        !((lrange < lo && rrange < lo) || (lrange >= hi && rrange >= hi))
    };
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) > 0 {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(&v[pc], &v[a]);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && wanted(a, r) {
            pqsort_part(v, a, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 && wanted(pn - r, r) {
            // Iterate rather than recurse, as pqsort.c does.
            a = pn - r;
            n = r;
            continue;
        }
        return;
    }
}

/// Put the first `wanted` points in `sort` order as Redis does: all of
/// them with qsort, only the first `wanted` with pqsort.
fn sort_points(points: &mut [Point], sort: Sort, wanted: usize) {
    let cmp = match sort {
        Sort::None => return,
        Sort::Asc => cmp_asc,
        Sort::Desc => cmp_desc,
    };
    if wanted == points.len() {
        let mut tmp = Vec::with_capacity(points.len());
        merge_sort(points, &mut tmp, cmp);
    } else if wanted > 0 {
        pqsort(points, cmp, 0, wanted - 1);
    }
}

/// Reply with the points: each a member, or an array of the member and
/// what was asked for (distance in the unit, geohash, coordinates, in that
/// order whatever the order of the options).
fn reply_points(out: &mut Reply, points: &[Point], s: &Search) {
    let options = s.withdist as usize + s.withhash as usize + s.withcoord as usize;
    out.array(points.len());
    for p in points {
        if options > 0 {
            out.array(options + 1);
        }
        out.bulk(p.member);
        if s.withdist {
            let dist = p.dist / s.shape.conversion;
            out.bulk(format_fixed_point(dist, DISTANCE_DECIMALS).as_bytes());
        }
        if s.withhash {
            out.int(geohash::c_double_to_i64(p.score));
        }
        if s.withcoord {
            out.array(2);
            out.human_double(p.lon);
            out.human_double(p.lat);
        }
    }
}

/// The engine behind every search (Redis's georadiusGeneric).
fn georadius_generic(c: &mut Ctx, argv: &[&[u8]], form: Form) {
    let db = c.cl.db;
    let Ok(z) = geo_read(c.srv, &mut c.cl.reply, db, argv[form.source_index()]) else {
        return;
    };
    let s = match parse_search(argv, form, z) {
        Ok(s) => s,
        Err(e) => return c.cl.reply.error(&e),
    };
    let event = if form.is_search() {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    let Some(z) = z else {
        // No set: an empty result, which a store turns into deleting its
        // destination.
        match s.store {
            Some(dst) => {
                if store_result(c, dst, None, NotifyFlags::ZSET, event) {
                    c.dirty(1);
                }
                c.cl.reply.int(0);
            }
            None => c.cl.reply.array(0),
        }
        return;
    };

    // COUNT wants the nearest ones (ANY, any ones): ascending unless told.
    let mut sort = s.sort;
    if s.count != 0 && sort == Sort::None && !s.any {
        sort = Sort::Asc;
    }
    let mut points = points_in_shape(z, &s.shape, if s.any { s.count } else { 0 });
    if points.is_empty() && s.store.is_none() {
        return c.cl.reply.array(0);
    }
    let returned = if s.count == 0 {
        points.len()
    } else {
        points.len().min(s.count)
    };
    sort_points(&mut points, sort, returned);
    let points = &points[..returned];

    let Some(dst) = s.store else {
        return reply_points(&mut c.cl.reply, points, &s);
    };
    let items: Vec<(Vec<u8>, f64)> = points
        .iter()
        .map(|p| {
            let score = if s.storedist {
                p.dist / s.shape.conversion
            } else {
                p.score
            };
            (p.member.to_vec(), score)
        })
        .collect();
    let result = (!items.is_empty()).then(|| build_zset(c, &items));
    let changed = store_result(c, dst, result, NotifyFlags::ZSET, event);
    if returned > 0 {
        c.dirty(returned as u64);
    } else if changed {
        c.dirty(1);
    }
    c.cl.reply.int(returned as i64);
}

/// `GEORADIUS key longitude latitude radius <M | KM | FT | MI> [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC] [STORE key |
/// STOREDIST key]`
///
/// Reply: array of members (or of arrays with the WITH… fields); with
/// STORE or STOREDIST, integer, the number of members stored.
pub fn georadius(c: &mut Ctx, argv: &[&[u8]]) {
    georadius_generic(c, argv, Form::Radius { store: true });
}

/// `GEORADIUS_RO key longitude latitude radius <M | KM | FT | MI>
/// [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC]`
///
/// Reply: as GEORADIUS without STORE.
pub fn georadius_ro(c: &mut Ctx, argv: &[&[u8]]) {
    georadius_generic(c, argv, Form::Radius { store: false });
}

/// `GEORADIUSBYMEMBER key member radius <M | KM | FT | MI> [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC] [STORE key |
/// STOREDIST key]`
///
/// Reply: as GEORADIUS.
pub fn georadiusbymember(c: &mut Ctx, argv: &[&[u8]]) {
    georadius_generic(c, argv, Form::RadiusByMember { store: true });
}

/// `GEORADIUSBYMEMBER_RO key member radius <M | KM | FT | MI> [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC | DESC]`
///
/// Reply: as GEORADIUS without STORE.
pub fn georadiusbymember_ro(c: &mut Ctx, argv: &[&[u8]]) {
    georadius_generic(c, argv, Form::RadiusByMember { store: false });
}

/// `GEOSEARCH key <FROMMEMBER member | FROMLONLAT longitude latitude>
/// <BYRADIUS radius <M | KM | FT | MI> | BYBOX width height <M | KM | FT |
/// MI>> [ASC | DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]`
///
/// Reply: array of members (or of arrays with the WITH… fields).
pub fn geosearch(c: &mut Ctx, argv: &[&[u8]]) {
    georadius_generic(c, argv, Form::Search);
}

/// `GEOSEARCHSTORE destination source <FROMMEMBER member | FROMLONLAT
/// longitude latitude> <BYRADIUS radius <M | KM | FT | MI> | BYBOX width
/// height <M | KM | FT | MI>> [ASC | DESC] [COUNT count [ANY]] [STOREDIST]`
///
/// Reply: integer, the number of members stored at `destination`.
pub fn geosearchstore(c: &mut Ctx, argv: &[&[u8]]) {
    georadius_generic(c, argv, Form::SearchStore);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(dist: f64, member: &'static [u8]) -> Point<'static> {
        Point {
            lon: 0.0,
            lat: 0.0,
            dist,
            score: 0.0,
            member,
        }
    }

    fn members<'a>(points: &[Point<'a>]) -> Vec<&'a [u8]> {
        points.iter().map(|p| p.member).collect()
    }

    #[test]
    fn full_sort_keeps_equal_distances_in_scan_order() {
        let mut v = vec![
            point(2.0, b"a"),
            point(1.0, b"b"),
            point(2.0, b"c"),
            point(1.0, b"d"),
        ];
        sort_points(&mut v, Sort::Asc, 4);
        assert_eq!(members(&v), [&b"b"[..], b"d", b"a", b"c"]);
        sort_points(&mut v, Sort::Desc, 4);
        assert_eq!(members(&v), [&b"a"[..], b"c", b"b", b"d"]);
    }

    #[test]
    fn partial_sort_puts_the_nearest_first() {
        let dists: Vec<f64> = (0..200).map(|i| ((i * 7919) % 200) as f64).collect();
        let mut v: Vec<Point> = dists.iter().map(|&d| point(d, b"m")).collect();
        sort_points(&mut v, Sort::Asc, 10);
        let firsts: Vec<f64> = v[..10].iter().map(|p| p.dist).collect();
        assert_eq!(firsts, (0..10).map(|i| i as f64).collect::<Vec<_>>());
        let mut v: Vec<Point> = dists.iter().map(|&d| point(d, b"m")).collect();
        sort_points(&mut v, Sort::Desc, 3);
        let firsts: Vec<f64> = v[..3].iter().map(|p| p.dist).collect();
        assert_eq!(firsts, [199.0, 198.0, 197.0]);
    }

    #[test]
    fn sorts_survive_nan_distances() {
        let mut v: Vec<Point> = (0..50)
            .map(|i| point(if i % 3 == 0 { f64::NAN } else { i as f64 }, b"m"))
            .collect();
        sort_points(&mut v, Sort::Asc, 5);
        sort_points(&mut v, Sort::Desc, 50);
        assert_eq!(v.len(), 50);
    }

    #[test]
    fn invalid_coordinates_are_reported_like_redis() {
        let e = parse_long_lat(b"200", b"100").unwrap_err();
        assert_eq!(
            e,
            "ERR invalid longitude,latitude pair 200.000000,100.000000"
        );
        assert_eq!(parse_long_lat(b"x", b"1").unwrap_err(), ERR_NOT_FLOAT);
        assert_eq!(
            parse_long_lat(b"180", b"-85.05112878").unwrap(),
            [180.0, -85.05112878]
        );
    }

    #[test]
    fn units_are_case_insensitive() {
        assert_eq!(parse_unit(b"KM").unwrap(), 1000.0);
        assert_eq!(parse_unit(b"mi").unwrap(), 1609.34);
        assert_eq!(parse_unit(b"yd").unwrap_err(), ERR_UNIT);
    }
}
