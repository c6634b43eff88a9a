//! Decoders for the compact encodings found in dumps: listpack, ziplist,
//! zipmap and intset blobs, each checked against its own length fields so a
//! corrupt blob is an error, never an out-of-bounds read.

use std::borrow::Cow;

/// Decode a listpack into its elements (integers as decimal strings).
pub(super) fn listpack_items(lp: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, String> {
    let bad = |what: &str| Err(format!("Listpack integrity check failed: {what}"));
    if lp.len() < 7 {
        return bad("too short");
    }
    let total = u32::from_le_bytes(lp[0..4].try_into().unwrap()) as usize;
    if total != lp.len() {
        return bad("size header does not match");
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let Some(&b) = lp.get(p) else {
            return bad("missing end marker");
        };
        if b == 0xFF {
            break;
        }
        let get = |from: usize, n: usize| {
            lp.get(from..from + n)
                .ok_or("Listpack integrity check failed: truncated entry")
        };
        let (item, size): (Cow<[u8]>, usize) = if b & 0x80 == 0 {
            (int((b & 0x7f) as i64), 1)
        } else if b & 0xC0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (Cow::Borrowed(get(p + 1, n)?), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let v = (((b & 0x1f) as u16) << 8)
                | *lp
                    .get(p + 1)
                    .ok_or("Listpack integrity check failed: truncated entry")?
                    as u16;
            let v = ((v << 3) as i16 >> 3) as i64;
            (int(v), 2)
        } else if b & 0xF0 == 0xE0 {
            let n = (((b & 0x0f) as usize) << 8)
                | *lp
                    .get(p + 1)
                    .ok_or("Listpack integrity check failed: truncated entry")?
                    as usize;
            (Cow::Borrowed(get(p + 2, n)?), 2 + n)
        } else {
            match b {
                0xF0 => {
                    let n = u32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()) as usize;
                    (Cow::Borrowed(get(p + 5, n)?), 5 + n)
                }
                0xF1 => (
                    int(i16::from_le_bytes(get(p + 1, 2)?.try_into().unwrap()).into()),
                    3,
                ),
                0xF2 => {
                    let b3 = get(p + 1, 3)?;
                    let v = (((b3[0] as u32) | (b3[1] as u32) << 8 | (b3[2] as u32) << 16) << 8)
                        as i32
                        >> 8;
                    (int(v.into()), 4)
                }
                0xF3 => (
                    int(i32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()).into()),
                    5,
                ),
                0xF4 => (
                    int(i64::from_le_bytes(get(p + 1, 8)?.try_into().unwrap())),
                    9,
                ),
                _ => return bad("unknown entry encoding"),
            }
        };
        let backlen = if size < 128 {
            1
        } else if size < 16384 {
            2
        } else if size < 2097152 {
            3
        } else if size < 268435456 {
            4
        } else {
            5
        };
        out.push(item);
        p += size + backlen;
    }
    Ok(out)
}

/// An integer element as its decimal text.
fn int<'a>(v: i64) -> Cow<'a, [u8]> {
    Cow::Owned(v.to_string().into_bytes())
}

/// Decode a ziplist (pre-7.0 compact encoding) into its elements.
pub(super) fn ziplist_items(zl: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let bad = |what: &str| Err(format!("Ziplist integrity check failed: {what}"));
    if zl.len() < 11 {
        return bad("too short");
    }
    if u32::from_le_bytes(zl[0..4].try_into().unwrap()) as usize != zl.len() {
        return bad("size header does not match");
    }
    // As Redis's ziplistValidateIntegrity (deep): every entry's prevlen is
    // the previous entry's size, the tail offset names the last entry, the
    // end marker is the last byte, and the count matches the header's.
    let tail = u32::from_le_bytes(zl[4..8].try_into().unwrap()) as usize;
    let header_count = u16::from_le_bytes(zl[8..10].try_into().unwrap());
    let mut out = Vec::new();
    let mut p = 10;
    let mut prev: Option<(usize, usize)> = None; // (offset, size)
    loop {
        let Some(&first) = zl.get(p) else {
            return bad("missing end marker");
        };
        if first == 0xFF {
            break;
        }
        let start = p;
        // prevlen: 1 byte, or 0xFE and 4 more.
        let prevlen = if first == 0xFE {
            let b = zl
                .get(p + 1..p + 5)
                .ok_or("Ziplist integrity check failed: truncated entry")?;
            u32::from_le_bytes(b.try_into().unwrap()) as usize
        } else {
            first as usize
        };
        if prevlen != prev.map_or(0, |(_, size)| size) {
            return bad("entry's previous length does not match");
        }
        p += if first == 0xFE { 5 } else { 1 };
        let get = |from: usize, n: usize| {
            zl.get(from..from + n)
                .ok_or("Ziplist integrity check failed: truncated entry")
        };
        let Some(&enc) = zl.get(p) else {
            return bad("truncated entry");
        };
        let (item, size): (Vec<u8>, usize) = match enc >> 6 {
            0 => {
                let n = (enc & 0x3f) as usize;
                (get(p + 1, n)?.to_vec(), 1 + n)
            }
            1 => {
                let n = (((enc & 0x3f) as usize) << 8)
                    | *zl
                        .get(p + 1)
                        .ok_or("Ziplist integrity check failed: truncated entry")?
                        as usize;
                (get(p + 2, n)?.to_vec(), 2 + n)
            }
            2 => {
                let n = u32::from_be_bytes(get(p + 1, 4)?.try_into().unwrap()) as usize;
                (get(p + 5, n)?.to_vec(), 5 + n)
            }
            _ => match enc {
                0xC0 => (
                    i16::from_le_bytes(get(p + 1, 2)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    3,
                ),
                0xD0 => (
                    i32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    5,
                ),
                0xE0 => (
                    i64::from_le_bytes(get(p + 1, 8)?.try_into().unwrap())
                        .to_string()
                        .into_bytes(),
                    9,
                ),
                0xF0 => {
                    let b = get(p + 1, 3)?;
                    let v = (((b[0] as u32) | (b[1] as u32) << 8 | (b[2] as u32) << 16) << 8)
                        as i32
                        >> 8;
                    (v.to_string().into_bytes(), 4)
                }
                0xFE => (
                    (*zl.get(p + 1)
                        .ok_or("Ziplist integrity check failed: truncated entry")?
                        as i8)
                        .to_string()
                        .into_bytes(),
                    2,
                ),
                0xF1..=0xFD => (((enc & 0x0f) - 1).to_string().into_bytes(), 1),
                _ => return bad("unknown entry encoding"),
            },
        };
        out.push(item);
        p += size;
        prev = Some((start, p - start));
    }
    if p != zl.len() - 1 {
        return bad("end marker before the end");
    }
    if tail != prev.map_or(10, |(offset, _)| offset) {
        return bad("tail offset does not name the last entry");
    }
    if header_count != u16::MAX && header_count as usize != out.len() {
        return bad("entry count does not match the header");
    }
    Ok(out)
}

/// Decode a zipmap (the oldest compact hash encoding) into field, value, …,
/// with the checks of Redis's zipmapValidateIntegrity: the last byte is the
/// end marker, every length stays inside the blob, a length under 254 is
/// in its one-byte form (a five-byte one is refused, as Redis 7.0.15's fix
/// for CVE-2026-25243), the map is not empty, and the header's count, when
/// it is not 254 ("count them"), is the number of pairs.
pub(super) fn zipmap_items(zm: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let bad = || Err("Zipmap integrity check failed".to_string());
    if zm.len() < 2 || zm[zm.len() - 1] != 0xFF {
        return bad();
    }
    let mut out = Vec::new();
    let mut p = 1;
    // A length, in one byte below 254 or 254 and four bytes (a length
    // that would fit in one is refused).
    let read_len = |p: &mut usize| -> Option<usize> {
        let b = *zm.get(*p)?;
        if b < 254 {
            *p += 1;
            Some(b as usize)
        } else if b == 254 {
            let n = u32::from_le_bytes(zm.get(*p + 1..*p + 5)?.try_into().ok()?) as usize;
            *p += 5;
            (n >= 254).then_some(n)
        } else {
            None
        }
    };
    while zm[p] != 0xFF {
        let Some(klen) = read_len(&mut p) else {
            return bad();
        };
        let Some(key) = zm.get(p..p + klen) else {
            return bad();
        };
        p += klen;
        let Some(vlen) = read_len(&mut p) else {
            return bad();
        };
        let Some(&free) = zm.get(p) else { return bad() };
        p += 1;
        let Some(val) = zm.get(p..p + vlen) else {
            return bad();
        };
        p += vlen + free as usize;
        out.push(key.to_vec());
        out.push(val.to_vec());
        // The next entry (or the end marker) must be inside the blob.
        if p >= zm.len() {
            return bad();
        }
    }
    let pairs = out.len() / 2;
    if pairs == 0 || (zm[0] != 254 && zm[0] as usize != pairs) {
        return bad();
    }
    Ok(out)
}

/// Decode an intset into its integers, as stored.
pub(super) fn intset_ints(is: &[u8]) -> Result<Vec<i64>, String> {
    if is.len() < 8 {
        return Err("Intset integrity check failed: too short".into());
    }
    let width = u32::from_le_bytes(is[0..4].try_into().unwrap()) as usize;
    let n = u32::from_le_bytes(is[4..8].try_into().unwrap()) as usize;
    if !matches!(width, 2 | 4 | 8) || is.len() != 8 + width * n {
        return Err("Intset integrity check failed: bad encoding or size".into());
    }
    Ok((0..n)
        .map(|i| {
            let b = &is[8 + i * width..8 + (i + 1) * width];
            match width {
                2 => i16::from_le_bytes(b.try_into().unwrap()) as i64,
                4 => i32::from_le_bytes(b.try_into().unwrap()) as i64,
                _ => i64::from_le_bytes(b.try_into().unwrap()),
            }
        })
        .collect())
}
