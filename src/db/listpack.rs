//! Redis's listpack, byte for byte (Redis's listpack.c): the node format of
//! streams and of lists (see `quicklist`), kept as Redis keeps it so that a
//! node goes to and comes from an RDB file as it is, a list splits into the
//! nodes Redis's would and compresses as Redis's does, and a value costs
//! what it costs in Redis.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 = unknown),
//! the elements, and 0xFF. Each element is an encoding byte (with data),
//! then its length again as a "backlen" of 1–5 bytes read from its end, so
//! the list can be walked both ways. Strings that read as integers are
//! stored as integers, as Redis's lpAppend does.
//!
//! Positions are byte offsets of an element's first byte. Accessors assume
//! a well-formed listpack: one that comes from outside (an RDB file) is
//! checked with [`validate`] first.

/// One element's value: an integer the listpack holds as one, or a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpVal<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl LpVal<'_> {
    /// The integer (a string element is not one: 0).
    pub fn int(&self) -> i64 {
        match self {
            LpVal::Int(v) => *v,
            LpVal::Str(s) => crate::util::parse_i64(s).unwrap_or(0),
        }
    }

    /// The bytes, with an integer formatted in decimal.
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            LpVal::Int(v) => v.to_string().into_bytes(),
            LpVal::Str(s) => s.to_vec(),
        }
    }

    /// Does the element hold these bytes?
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        match self {
            LpVal::Str(s) => *s == b,
            LpVal::Int(v) => crate::util::parse_i64(b) == Some(*v),
        }
    }
}

const HEADER: usize = 6;
const EOF: u8 = 0xFF;

/// A new, empty listpack.
pub fn new() -> Vec<u8> {
    let mut lp = Vec::with_capacity(64);
    lp.extend_from_slice(&7u32.to_le_bytes());
    lp.extend_from_slice(&0u16.to_le_bytes());
    lp.push(EOF);
    lp
}

/// Position of the first element (the end marker when empty).
pub fn first(_lp: &[u8]) -> usize {
    HEADER
}

/// Is `pos` the end marker?
pub fn at_end(lp: &[u8], pos: usize) -> bool {
    lp[pos] == EOF
}

/// Number of elements (counted when the header says "unknown").
pub fn len(lp: &[u8]) -> usize {
    let n = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    if n != 65535 {
        return n;
    }
    let mut pos = HEADER;
    let mut count = 0;
    while lp[pos] != EOF {
        pos = next(lp, pos);
        count += 1;
    }
    count
}

/// (encoding+data length, value) of the element at `pos`.
fn decode(lp: &[u8], pos: usize) -> (usize, LpVal<'_>) {
    let b = lp[pos];
    let le = |n: usize| -> u64 {
        let mut v = 0u64;
        for i in 0..n {
            v |= (lp[pos + 1 + i] as u64) << (8 * i);
        }
        v
    };
    let sign = |v: u64, bits: u32| -> i64 {
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    };
    if b & 0x80 == 0 {
        (1, LpVal::Int((b & 0x7F) as i64))
    } else if b & 0xC0 == 0x80 {
        let n = (b & 0x3F) as usize;
        (1 + n, LpVal::Str(&lp[pos + 1..pos + 1 + n]))
    } else if b & 0xE0 == 0xC0 {
        let v = (((b & 0x1F) as u64) << 8) | lp[pos + 1] as u64;
        (2, LpVal::Int(sign(v, 13)))
    } else if b & 0xF0 == 0xE0 {
        let n = (((b & 0x0F) as usize) << 8) | lp[pos + 1] as usize;
        (2 + n, LpVal::Str(&lp[pos + 2..pos + 2 + n]))
    } else {
        match b {
            0xF1 => (3, LpVal::Int(sign(le(2), 16))),
            0xF2 => (4, LpVal::Int(sign(le(3), 24))),
            0xF3 => (5, LpVal::Int(sign(le(4), 32))),
            0xF4 => (9, LpVal::Int(le(8) as i64)),
            _ => {
                // 0xF0: 32-bit string length.
                let n = le(4) as usize;
                (5 + n, LpVal::Str(&lp[pos + 5..pos + 5 + n]))
            }
        }
    }
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// The backlen of an element whose encoding takes `l` bytes: its bytes
/// (read from the last one backwards) and how many there are.
fn backlen_bytes(l: usize) -> ([u8; 5], usize) {
    let n = backlen_size(l);
    let mut out = [0u8; 5];
    // The first byte holds the highest bits and no continuation flag.
    for (i, b) in out[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i);
        *b = ((l >> shift) & 127) as u8 | if i == 0 { 0 } else { 128 };
    }
    (out, n)
}

fn push_backlen(out: &mut Vec<u8>, l: usize) {
    let (bytes, n) = backlen_bytes(l);
    out.extend_from_slice(&bytes[..n]);
}

/// The value at `pos`.
pub fn get(lp: &[u8], pos: usize) -> LpVal<'_> {
    decode(lp, pos).1
}

/// The element at `pos` and the position after it, in one pass (the two
/// commonest encodings, a 7-bit integer and a string under 64 bytes, first:
/// list reads walk elements with this).
#[inline]
pub fn get_and_skip(lp: &[u8], pos: usize) -> (LpVal<'_>, usize) {
    let b = lp[pos];
    if b & 0xC0 == 0x80 {
        // 1 + n < 128 bytes of encoding: a one-byte backlen.
        let n = (b & 0x3F) as usize;
        return (LpVal::Str(&lp[pos + 1..pos + 1 + n]), pos + n + 2);
    }
    if b & 0x80 == 0 {
        return (LpVal::Int((b & 0x7F) as i64), pos + 2);
    }
    let (n, v) = decode(lp, pos);
    (v, pos + n + backlen_size(n))
}

/// The position after the element at `pos`.
pub fn next(lp: &[u8], pos: usize) -> usize {
    let (n, _) = decode(lp, pos);
    pos + n + backlen_size(n)
}

/// An integer's encoding (Redis's lpEncodeIntegerGetType): its bytes
/// (at most 9) and how many there are.
fn int_encoding(v: i64) -> ([u8; 9], usize) {
    let mut out = [0u8; 9];
    let n = if (0..=127).contains(&v) {
        out[0] = v as u8;
        1
    } else if (-4096..=4095).contains(&v) {
        let u = if v < 0 { (1i64 << 13) + v } else { v } as u64;
        out[0] = (u >> 8) as u8 | 0xC0;
        out[1] = (u & 0xFF) as u8;
        2
    } else {
        let (tag, bytes) = if (-32768..=32767).contains(&v) {
            (0xF1, 2)
        } else if (-8388608..=8388607).contains(&v) {
            (0xF2, 3)
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            (0xF3, 4)
        } else {
            (0xF4, 8)
        };
        out[0] = tag;
        out[1..1 + bytes].copy_from_slice(&(v as u64).to_le_bytes()[..bytes]);
        1 + bytes
    };
    (out, n)
}

/// The encoding (with backlen) of an integer.
fn encode_int(v: i64, out: &mut Vec<u8>) {
    let (bytes, n) = int_encoding(v);
    out.extend_from_slice(&bytes[..n]);
    push_backlen(out, n);
}

/// The encoding (with backlen) of a string, as an integer when it reads as one.
fn encode_str(s: &[u8], out: &mut Vec<u8>) {
    if let Some(v) = crate::util::parse_i64(s) {
        return encode_int(v, out);
    }
    let start = out.len();
    let n = s.len();
    if n < 64 {
        out.push(0x80 | n as u8);
    } else if n < 4096 {
        out.push(0xE0 | (n >> 8) as u8);
        out.push((n & 0xFF) as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
    let l = out.len() - start;
    push_backlen(out, l);
}

fn set_header(lp: &mut [u8], count_delta: isize) {
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let n = u16::from_le_bytes([lp[4], lp[5]]);
    if n != 65535 {
        let m = n as isize + count_delta;
        let m = if m >= 65535 { 65535 } else { m as u16 };
        lp[4..6].copy_from_slice(&m.to_le_bytes());
    }
}

/// Append an integer.
pub fn push_int(lp: &mut Vec<u8>, v: i64) {
    lp.pop();
    encode_int(v, lp);
    lp.push(EOF);
    set_header(lp, 1);
}

/// Append a string (as an integer when it reads as one).
pub fn push_str(lp: &mut Vec<u8>, s: &[u8]) {
    lp.pop();
    encode_str(s, lp);
    lp.push(EOF);
    set_header(lp, 1);
}

/// Replace the element at `pos` with an integer (Redis's
/// lpReplaceInteger); the elements after it move when its size changes.
pub fn replace_int(lp: &mut Vec<u8>, pos: usize, v: i64) {
    let old_end = next(lp, pos);
    let mut enc = Vec::with_capacity(11);
    encode_int(v, &mut enc);
    lp.splice(pos..old_end, enc);
    set_header(lp, 0);
}

/// Where an insertion goes relative to an element (Redis's `LP_BEFORE` /
/// `LP_AFTER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    Before,
    After,
}

/// How Redis's lpEncodeGetType stores a string: as an integer when it reads
/// as one (lpStringToInt64, which is string2ll), else as a string.
enum Encoding {
    /// The integer encoding's bytes (at most 9) and their count.
    Int([u8; 9], usize),
    Str,
}

fn encoding_of(s: &[u8]) -> (Encoding, usize) {
    if let Some(v) = crate::util::parse_i64(s) {
        let (bytes, n) = int_encoding(v);
        return (Encoding::Int(bytes, n), n);
    }
    let n = s.len();
    let header = if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    };
    (Encoding::Str, header + n)
}

/// Write an element (encoding, data, backlen) into `dst`, which is exactly
/// its size.
fn write_element(dst: &mut [u8], enc: &Encoding, enc_len: usize, s: &[u8]) {
    match enc {
        Encoding::Int(bytes, n) => dst[..*n].copy_from_slice(&bytes[..*n]),
        Encoding::Str => {
            let n = s.len();
            let header = if n < 64 {
                dst[0] = 0x80 | n as u8;
                1
            } else if n < 4096 {
                dst[0] = 0xE0 | (n >> 8) as u8;
                dst[1] = (n & 0xFF) as u8;
                2
            } else {
                dst[0] = 0xF0;
                dst[1..5].copy_from_slice(&(n as u32).to_le_bytes());
                5
            };
            dst[header..header + n].copy_from_slice(s);
        }
    }
    let (backlen, n) = backlen_bytes(enc_len);
    dst[enc_len..].copy_from_slice(&backlen[..n]);
}

/// Bytes `s` takes as an element (encoding, data and backlen).
pub fn element_bytes(s: &[u8]) -> usize {
    let (_, enc_len) = encoding_of(s);
    enc_len + backlen_size(enc_len)
}

/// Set the header's total and move its count by `delta` (an unknown count,
/// 65535, stays unknown, as lpInsert leaves it).
fn update_header(lp: &mut [u8], delta: isize) {
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let n = u16::from_le_bytes([lp[4], lp[5]]);
    if n != 65535 {
        let m = (n as isize + delta).clamp(0, 65535) as u16;
        lp[4..6].copy_from_slice(&m.to_le_bytes());
    }
}

/// Open `n` bytes at `pos`, growing the buffer by exactly what is missing:
/// list nodes and small collections live here, and doubling would waste
/// up to half of each.
fn open_gap(lp: &mut Vec<u8>, pos: usize, n: usize) {
    let old = lp.len();
    if lp.capacity() - old < n {
        lp.reserve_exact(n);
    }
    lp.resize(old + n, 0);
    lp.copy_within(pos..old, pos + n);
}

/// Insert `s` before the element at `pos` (or at the end marker), or after
/// the element at `pos`: Redis's lpInsertString. Returns the new element's
/// position.
pub fn insert(lp: &mut Vec<u8>, pos: usize, s: &[u8], at: Where) -> usize {
    let pos = match at {
        Where::Before => pos,
        Where::After => skip(lp, pos),
    };
    let (enc, enc_len) = encoding_of(s);
    let n = enc_len + backlen_size(enc_len);
    open_gap(lp, pos, n);
    write_element(&mut lp[pos..pos + n], &enc, enc_len, s);
    update_header(lp, 1);
    pos
}

/// Add `s` at the end (lpAppend).
pub fn append(lp: &mut Vec<u8>, s: &[u8]) {
    let eof = lp.len() - 1;
    insert(lp, eof, s, Where::Before);
}

/// Add `s` at the head (lpPrepend).
pub fn prepend(lp: &mut Vec<u8>, s: &[u8]) {
    insert(lp, HEADER, s, Where::Before);
}

/// Replace the element at `pos` with `s` (lpReplace); it keeps `pos`.
pub fn replace(lp: &mut Vec<u8>, pos: usize, s: &[u8]) {
    let old_end = skip(lp, pos);
    let (enc, enc_len) = encoding_of(s);
    let n = enc_len + backlen_size(enc_len);
    let old_n = old_end - pos;
    if n > old_n {
        open_gap(lp, old_end, n - old_n);
    } else if n < old_n {
        lp.drain(pos + n..old_end);
    }
    write_element(&mut lp[pos..pos + n], &enc, enc_len, s);
    update_header(lp, 0);
}

/// Remove the element at `pos` (lpDelete): the position of the element
/// that followed it, `None` when it was the last.
pub fn delete(lp: &mut Vec<u8>, pos: usize) -> Option<usize> {
    let end = skip(lp, pos);
    delete_span(lp, pos, end);
    (lp[pos] != EOF).then_some(pos)
}

/// Remove the element at `pos`, which ends at `end` (from [`get_and_skip`]).
pub fn delete_span(lp: &mut Vec<u8>, pos: usize, end: usize) {
    lp.drain(pos..end);
    update_header(lp, -1);
}

/// Remove `num` elements starting with the one at `pos` (fewer when the
/// end comes first): Redis's lpDeleteRangeWithEntry.
pub fn delete_range_at(lp: &mut Vec<u8>, pos: usize, num: usize) {
    let mut tail = pos;
    let mut deleted = 0;
    while deleted < num && lp[tail] != EOF {
        tail = skip(lp, tail);
        deleted += 1;
    }
    lp.drain(pos..tail);
    update_header(lp, -(deleted as isize));
}

/// Remove `num` elements from index `index` (negative: from the tail):
/// Redis's lpDeleteRange.
pub fn delete_range(lp: &mut Vec<u8>, index: i64, num: usize) {
    if num == 0 {
        return;
    }
    let Some(pos) = seek(lp, index) else {
        return;
    };
    delete_range_at(lp, pos, num);
}

/// The position just past the element at `pos` (lpSkip).
pub fn skip(lp: &[u8], pos: usize) -> usize {
    next(lp, pos)
}

/// The element after the one at `pos`, `None` at the end (lpNext).
pub fn next_element(lp: &[u8], pos: usize) -> Option<usize> {
    let p = skip(lp, pos);
    (lp[p] != EOF).then_some(p)
}

/// The element before the one at `pos` (or before the end marker), `None`
/// at the first (lpPrev): read its backlen backwards.
pub fn prev(lp: &[u8], pos: usize) -> Option<usize> {
    if pos <= HEADER {
        return None;
    }
    let mut p = pos - 1;
    let mut size = 0usize;
    let mut shift = 0;
    loop {
        size |= ((lp[p] & 127) as usize) << shift;
        if lp[p] & 128 == 0 || p == 0 {
            break;
        }
        shift += 7;
        p -= 1;
    }
    Some(pos - backlen_size(size) - size)
}

/// The first element, `None` when empty (lpFirst).
pub fn first_element(lp: &[u8]) -> Option<usize> {
    (lp[HEADER] != EOF).then_some(HEADER)
}

/// The last element, `None` when empty (lpLast).
pub fn last_element(lp: &[u8]) -> Option<usize> {
    prev(lp, lp.len() - 1)
}

/// The element at `index` (negative: from the tail), walking from the
/// nearer end as Redis's lpSeek does.
pub fn seek(lp: &[u8], index: i64) -> Option<usize> {
    let numele = u16::from_le_bytes([lp[4], lp[5]]);
    let (forward, mut index) = if numele != 65535 {
        let n = numele as i64;
        let i = if index < 0 { n + index } else { index };
        if i < 0 || i >= n {
            return None;
        }
        if i > n / 2 {
            (false, i - n)
        } else {
            (true, i)
        }
    } else {
        (index >= 0, index)
    };
    if forward {
        let mut ele = first_element(lp);
        while index > 0 {
            ele = next_element(lp, ele?);
            index -= 1;
        }
        ele
    } else {
        let mut ele = last_element(lp);
        while index < -1 {
            ele = prev(lp, ele?);
            index += 1;
        }
        ele
    }
}

/// Does the element at `pos` equal `s` (lpCompare: an integer element
/// equals the strings that read as it)?
pub fn compare(lp: &[u8], pos: usize, s: &[u8]) -> bool {
    get(lp, pos).eq_bytes(s)
}

/// `first` followed by `second`, in whichever buffer is larger (lpMerge).
pub fn merge(mut first: Vec<u8>, mut second: Vec<u8>) -> Vec<u8> {
    let count = (len(&first) + len(&second)).min(65535) as u16;
    let mut merged = if first.len() >= second.len() {
        first.pop();
        first.extend_from_slice(&second[HEADER..]);
        first
    } else {
        let body = &first[HEADER..first.len() - 1];
        second.splice(HEADER..HEADER, body.iter().copied());
        second
    };
    merged[4..6].copy_from_slice(&count.to_le_bytes());
    update_header(&mut merged, 0);
    merged
}

/// Redis's lpRepr, as DEBUG LISTPACK and DEBUG QUICKLIST print it
/// (addresses are offsets from the listpack's start here).
pub fn repr(lp: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = format!("{{total bytes {}}} {{num entries {}}}\n", lp.len(), len(lp));
    let mut p = first_element(lp);
    let mut index = 0;
    while let Some(pos) = p {
        let (enc_size, value) = decode(lp, pos);
        let header_bytes = match lp[pos] {
            b if b & 0x80 == 0 => 1,
            b if b & 0xC0 == 0x80 => 1,
            b if b & 0xE0 == 0xC0 => 1,
            b if b & 0xF0 == 0xE0 => 2,
            0xF0 => 5,
            _ => 1,
        };
        let back = backlen_size(enc_size);
        let _ = write!(
            out,
            "{{\n\taddr: 0x{:08x},\n\tindex: {:2},\n\toffset: {:1},\n\thdr+entrylen+backlen: {:2},\n\thdrlen: {:3},\n\tbacklen: {:2},\n\tpayload: {:1}\n\tbytes: ",
            pos,
            index,
            pos,
            enc_size + back,
            header_bytes,
            back,
            enc_size - header_bytes
        );
        for b in &lp[pos..pos + enc_size + back] {
            let _ = write!(out, "{b:02x}|");
        }
        let text = value.to_vec();
        let shown = &text[..text.len().min(40)];
        let _ = write!(
            out,
            "\n\t[str]{}{}\n}}\n",
            String::from_utf8_lossy(shown),
            if text.len() > 40 { "..." } else { "" }
        );
        index += 1;
        p = next_element(lp, pos);
    }
    out.push_str("{end}\n\n");
    out
}

/// Bytes in use (the header's total).
pub fn bytes(lp: &[u8]) -> usize {
    lp.len()
}

/// Check a listpack from outside (Redis's lpValidateIntegrity, deep):
/// header total, every element's encoding inside the buffer and its backlen
/// right, the count when the header has one, the end marker last.
pub fn validate(lp: &[u8]) -> bool {
    if lp.len() < HEADER + 1 {
        return false;
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() || lp[lp.len() - 1] != EOF {
        return false;
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    let mut pos = HEADER;
    let mut count = 0usize;
    while pos < lp.len() - 1 {
        let Some(size) = element_size(&lp[..lp.len() - 1], pos) else {
            return false;
        };
        let bl = backlen_size(size);
        let end = pos + size + bl;
        if end > lp.len() - 1 {
            return false;
        }
        // The backlen, read backwards from its last byte.
        let mut val: u64 = 0;
        let mut shift = 0;
        let mut p = end - 1;
        loop {
            val |= ((lp[p] & 127) as u64) << shift;
            if lp[p] & 128 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 || p == 0 {
                return false;
            }
            p -= 1;
        }
        if val as usize != size || end - p != bl {
            return false;
        }
        pos = end;
        count += 1;
    }
    pos == lp.len() - 1 && (declared == 65535 || declared == count)
}

/// Size of the encoding and data at `pos`, if it fits in `lp`.
fn element_size(lp: &[u8], pos: usize) -> Option<usize> {
    let b = *lp.get(pos)?;
    let at = |i: usize| lp.get(pos + i).copied();
    let size = if b & 0x80 == 0 {
        1
    } else if b & 0xC0 == 0x80 {
        1 + (b & 0x3F) as usize
    } else if b & 0xE0 == 0xC0 {
        2
    } else if b & 0xF0 == 0xE0 {
        2 + ((((b & 0x0F) as usize) << 8) | at(1)? as usize)
    } else {
        match b {
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            0xF4 => 9,
            0xF0 => {
                let n = u32::from_le_bytes([at(1)?, at(2)?, at(3)?, at(4)?]) as usize;
                5usize.checked_add(n)?
            }
            _ => return None,
        }
    };
    if pos.checked_add(size)? > lp.len() {
        return None;
    }
    Some(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_in_every_encoding_and_validate() {
        let mut lp = new();
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            -32768,
            32767,
            8388607,
            -8388608,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ];
        for &v in &ints {
            push_int(&mut lp, v);
        }
        let long = vec![b'x'; 5000];
        let strs: [&[u8]; 5] = [b"", b"abc", &[b'y'; 100], &long, b"007"];
        for s in strs {
            push_str(&mut lp, s);
        }
        push_str(&mut lp, b"-42");
        assert!(validate(&lp));
        assert_eq!(len(&lp), ints.len() + strs.len() + 1);
        let mut pos = first(&lp);
        for &v in &ints {
            assert_eq!(get(&lp, pos), LpVal::Int(v));
            pos = next(&lp, pos);
        }
        for s in strs {
            assert_eq!(get(&lp, pos), LpVal::Str(s));
            pos = next(&lp, pos);
        }
        assert_eq!(get(&lp, pos), LpVal::Int(-42));
        pos = next(&lp, pos);
        assert!(at_end(&lp, pos));
        // Replacing with a wider integer moves what follows.
        let p1 = next(&lp, first(&lp));
        replace_int(&mut lp, p1, 1 << 40);
        assert!(validate(&lp));
        assert_eq!(get(&lp, p1), LpVal::Int(1 << 40));
        assert_eq!(get(&lp, next(&lp, p1)), LpVal::Int(128));
    }

    #[test]
    fn damaged_listpacks_are_refused() {
        let mut lp = new();
        push_str(&mut lp, b"hello");
        push_int(&mut lp, 1000);
        for cut in 0..lp.len() {
            assert!(!validate(&lp[..cut]));
        }
        for i in 0..lp.len() {
            for bit in 0..8 {
                let mut bad = lp.clone();
                bad[i] ^= 1 << bit;
                // Never panics; usually refused.
                let _ = validate(&bad);
            }
        }
    }
}
