//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO (Redis's bitops.c).
//!
//! A bitmap is a plain string value; bit 0 is the most significant bit of
//! the first byte. Writes pad the string with zero bytes up to the highest
//! bit they touch, in place (the value becomes a "raw" string as in Redis).
//! The counting and searching kernels live in `db::bitops`; this file
//! parses arguments, applies ranges and handles keys, replies and events
//! exactly as Redis 7.0 does (including its order of checks, which decides
//! which error a bad call gets).

use super::string::{compact_string, string_bytes, string_len, unshare_string};
use super::*;
use crate::db::bitops::{self, BitOp, Overflow};
use crate::protocol::Reply;

const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const ERR_BIT_VALUE: &str = "ERR bit is not an integer or out of range";
const ERR_BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// A bit offset argument (Redis's getBitOffsetFromArgument): a
/// non-negative integer whose byte lies below `proto-max-bulk-len` (a
/// master or the AOF is obeyed past it). With `field_bits` > 0 (BITFIELD),
/// `#N` means the N-th field of that width.
fn bit_offset(c: &Ctx, arg: &[u8], field_bits: u32) -> Result<u64, &'static str> {
    let by_field = field_bits > 0 && arg.first() == Some(&b'#');
    let digits = if by_field { &arg[1..] } else { arg };
    let mut offset = parse_i64(digits).ok_or(ERR_BIT_OFFSET)?;
    if by_field {
        offset = offset.wrapping_mul(field_bits as i64);
    }
    if offset < 0 || (!c.cl.must_obey() && (offset >> 3) >= c.srv.config.proto_max_bulk_len) {
        return Err(ERR_BIT_OFFSET);
    }
    Ok(offset as u64)
}

/// How the string under a bit write came to be (Redis's `dirty` out
/// parameter of lookupStringForBitCommand).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Padded {
    /// The key was created (all zeros): a write whatever the bits.
    Created,
    /// The string grew to reach the bit: a write whatever the bits.
    Grown,
    /// It was long enough: a write only if a bit changes.
    Untouched,
}

/// Redis's lookupStringForBitCommand: the string at `key`, created or
/// padded with zeros so that bit `maxbit` exists, handed to `apply` with
/// the client's reply. `None` (WRONGTYPE replied) when the key holds
/// another type. A created key is announced (`new`) at once, as Redis's
/// dbAdd does, whether or not `apply` then changes anything.
fn with_bits_for_write<R>(
    c: &mut Ctx,
    key: &[u8],
    maxbit: u64,
    apply: impl FnOnce(&mut [u8], &mut Reply, Padded) -> R,
) -> Option<R> {
    let db = c.cl.db;
    let need = (maxbit >> 3) as usize + 1;
    let padded = match lookup_write(c.srv, db, key) {
        None => Padded::Created,
        // Fast path: a string inside its entry, long enough already,
        // changes in place (one lookup, no copy out to a buffer and back).
        Some(e) if matches!(e.value(), ValueRef::Str(s) if s.len() >= need) => {
            let bytes = e.inline_bytes_mut()?;
            return Some(apply(bytes, &mut c.cl.reply, Padded::Untouched));
        }
        Some(e) => match string_len(e) {
            None => {
                c.cl.reply.error(ERR_WRONGTYPE);
                return None;
            }
            Some(n) if n < need => Padded::Grown,
            Some(_) => Padded::Untouched,
        },
    };
    if padded == Padded::Created {
        // Zeroed pages come straight from the kernel, so a far bit costs
        // only the pages it touches; the bits are set before the string
        // becomes the value (which moves it, without a copy when long).
        let mut bits = vec![0u8; need];
        let r = apply(&mut bits, &mut c.cl.reply, padded);
        c.srv.dbs[db].set(Entry::from_vec(key, bits, true), false);
        c.notify(NotifyFlags::NEW, "new", key);
        return Some(r);
    }
    let d = &mut c.srv.dbs[db];
    let buf = unshare_string(d, key, need);
    if buf.len() < need {
        buf.resize(need, 0);
    }
    let r = apply(buf, &mut c.cl.reply, padded);
    compact_string(d, key);
    Some(r)
}

/// `SETBIT key offset value` — the bit's previous value.
pub fn setbit(c: &mut Ctx, argv: &[&[u8]]) {
    let offset = match bit_offset(c, argv[2], 0) {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    let on = match parse_i64(argv[3]) {
        Some(v) if v & !1 == 0 => v as u8,
        _ => return c.cl.reply.error(ERR_BIT_VALUE),
    };
    let key = argv[1];
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7) as u8;
    let written = with_bits_for_write(c, key, offset, |buf, reply, padded| {
        let old = (buf[byte] >> shift) & 1;
        reply.int(old as i64);
        // A new or grown string is a write even when the bit was already
        // what was asked (Redis counts and propagates it).
        let changed = padded != Padded::Untouched || old != on;
        if changed {
            buf[byte] = (buf[byte] & !(1 << shift)) | (on << shift);
        }
        changed
    });
    if written == Some(true) {
        c.modified(key, NotifyFlags::STRING, "setbit");
        c.dirty(1);
    }
}

/// `GETBIT key offset` — 0 or 1; bits past the end read as 0.
pub fn getbit(c: &mut Ctx, argv: &[&[u8]]) {
    let offset = match bit_offset(c, argv[2], 0) {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    let Some(e) = lookup_read(c.srv, c.cl.db, argv[1]) else {
        return c.cl.reply.int(0);
    };
    let Some(s) = string_bytes(e) else {
        return c.cl.reply.error(ERR_WRONGTYPE);
    };
    let bit = s
        .get((offset >> 3) as usize)
        .map_or(0, |b| (b >> (7 - (offset & 7))) & 1);
    c.cl.reply.int(bit as i64)
}

/// A BITCOUNT/BITPOS range resolved to bytes: `first..=last` with masks
/// of the bits of the first and last byte that lie outside a BIT range.
struct ByteRange {
    first: usize,
    last: usize,
    /// Bits of byte `first` before the range (high bits).
    first_out: u8,
    /// Bits of byte `last` after the range (low bits).
    last_out: u8,
}

/// Clamp `start..=end` (negative counts from the end) to a string of
/// `len` bytes, in bytes or (`in_bits`) bits; `None` for an empty range.
/// The same arithmetic as Redis's BITCOUNT and BITPOS.
fn resolve_range(len: usize, mut start: i64, mut end: i64, in_bits: bool) -> Option<ByteRange> {
    let total = if in_bits {
        (len as i64) << 3
    } else {
        len as i64
    };
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    if in_bits {
        Some(ByteRange {
            first: (start >> 3) as usize,
            last: (end >> 3) as usize,
            first_out: !(0xffu8 >> (start & 7)),
            last_out: ((1u16 << (7 - (end & 7))) - 1) as u8,
        })
    } else {
        Some(ByteRange {
            first: start as usize,
            last: end as usize,
            first_out: 0,
            last_out: 0,
        })
    }
}

/// BYTE or BIT, the unit of a BITCOUNT/BITPOS range.
fn parse_unit(arg: &[u8]) -> Result<bool, &'static str> {
    if eq_ic(arg, "bit") {
        Ok(true)
    } else if eq_ic(arg, "byte") {
        Ok(false)
    } else {
        Err(ERR_SYNTAX)
    }
}

/// `BITCOUNT key [start end [BYTE|BIT]]` — bits set in the range.
///
/// As in Redis 7.0, a missing key answers 0 before the range is parsed.
pub fn bitcount(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(e) = lookup_read(c.srv, c.cl.db, argv[1]) else {
        return c.cl.reply.int(0);
    };
    let Some(s) = string_bytes(e) else {
        return c.cl.reply.error(ERR_WRONGTYPE);
    };
    let range = match argv.len() {
        2 => resolve_range(s.len(), 0, -1, false),
        4 | 5 => {
            let (start, end) = match (arg_i64(argv[2]), arg_i64(argv[3])) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
            };
            if start < 0 && end < 0 && start > end {
                return c.cl.reply.int(0);
            }
            let in_bits = match argv.get(4).map(|a| parse_unit(a)) {
                None => false,
                Some(Ok(b)) => b,
                Some(Err(e)) => return c.cl.reply.error(e),
            };
            resolve_range(s.len(), start, end, in_bits)
        }
        _ => return c.cl.reply.error(ERR_SYNTAX),
    };
    let Some(r) = range else {
        return c.cl.reply.int(0);
    };
    let mut count = bitops::popcount(&s[r.first..=r.last]);
    count -= (s[r.first] & r.first_out).count_ones() as u64;
    count -= (s[r.last] & r.last_out).count_ones() as u64;
    c.cl.reply.int(count as i64)
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]` — the first bit equal to
/// `bit` in the range, or -1.
///
/// A missing key is all zeros: 0 for a clear bit, -1 for a set one.
/// Without an explicit end the string counts as padded with zeros on the
/// right, so a search for 0 in all-ones bytes answers the bit past the end;
/// with one, it answers -1.
pub fn bitpos(c: &mut Ctx, argv: &[&[u8]]) {
    let bit = match parse_i64(argv[2]) {
        Some(0) => false,
        Some(1) => true,
        Some(_) => return c.cl.reply.error("ERR The bit argument must be 1 or 0."),
        None => return c.cl.reply.error(ERR_NOT_INT),
    };
    let Some(e) = lookup_read(c.srv, c.cl.db, argv[1]) else {
        return c.cl.reply.int(if bit { -1 } else { 0 });
    };
    let Some(s) = string_bytes(e) else {
        return c.cl.reply.error(ERR_WRONGTYPE);
    };
    let mut end_given = false;
    let range = match argv.len() {
        3 => resolve_range(s.len(), 0, -1, false),
        4..=6 => {
            let start = match arg_i64(argv[3]) {
                Ok(v) => v,
                Err(e) => return c.cl.reply.error(e),
            };
            let in_bits = match argv.get(5).map(|a| parse_unit(a)) {
                None => false,
                Some(Ok(b)) => b,
                Some(Err(e)) => return c.cl.reply.error(e),
            };
            let end = match argv.get(4) {
                Some(a) => match arg_i64(a) {
                    Ok(v) => {
                        end_given = true;
                        v
                    }
                    Err(e) => return c.cl.reply.error(e),
                },
                None => i64::MAX,
            };
            resolve_range(s.len(), start, end, in_bits)
        }
        _ => return c.cl.reply.error(ERR_SYNTAX),
    };
    let Some(r) = range else {
        return c.cl.reply.int(-1);
    };
    // Bits outside a BIT range are forced to the value not searched for.
    let hide = |b: u8, out: u8| if bit { b & !out } else { b | out };
    let mut window: Vec<u8>;
    let bytes: &[u8] = if r.first_out | r.last_out != 0 {
        window = s[r.first..=r.last].to_vec();
        let n = window.len();
        window[0] = hide(window[0], r.first_out);
        window[n - 1] = hide(window[n - 1], r.last_out);
        &window
    } else {
        &s[r.first..=r.last]
    };
    let pos = bitops::bitpos(bytes, bit);
    if end_given && !bit && pos == (bytes.len() as i64) << 3 {
        return c.cl.reply.int(-1);
    }
    if pos == -1 {
        return c.cl.reply.int(-1);
    }
    c.cl.reply.int(pos + ((r.first as i64) << 3))
}

/// `BITOP AND|OR|XOR|NOT destkey key [key ...]` — the length of the
/// result, stored at `destkey` (deleted when every source is empty).
/// Missing sources read as empty strings.
pub fn bitop(c: &mut Ctx, argv: &[&[u8]]) {
    let op = match argv[1] {
        a if eq_ic(a, "and") => BitOp::And,
        a if eq_ic(a, "or") => BitOp::Or,
        a if eq_ic(a, "xor") => BitOp::Xor,
        a if eq_ic(a, "not") => BitOp::Not,
        _ => return c.cl.reply.error(ERR_SYNTAX),
    };
    if op == BitOp::Not && argv.len() != 4 {
        return c
            .cl
            .reply
            .error("ERR BITOP NOT must be called with a single source key.");
    }
    let db = c.cl.db;
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(argv.len() - 3);
    for key in &argv[3..] {
        match lookup_read(c.srv, db, key) {
            None => srcs.push(Vec::new()),
            Some(e) => match string_bytes(e) {
                Some(s) => srcs.push(s.into_owned()),
                None => return c.cl.reply.error(ERR_WRONGTYPE),
            },
        }
    }
    let views: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
    let result = bitops::bitop(op, &views);
    drop(srcs);
    let (dest, len) = (argv[2], result.len());
    if len > 0 {
        let existed = lookup_write(c.srv, db, dest).is_some();
        c.srv.dbs[db].set(Entry::from_vec(dest, result, true), false);
        if !existed {
            c.notify(NotifyFlags::NEW, "new", dest);
        }
        c.modified(dest, NotifyFlags::STRING, "set");
        c.dirty(1);
    } else if c.srv.dbs[db].delete(dest) {
        c.modified(dest, NotifyFlags::GENERIC, "del");
        c.dirty(1);
    }
    c.cl.reply.int(len as i64)
}

/// One BITFIELD operation, parsed before any runs.
struct FieldOp {
    kind: FieldOpKind,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

enum FieldOpKind {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// A field type, `i1`..`i64` or `u1`..`u63`.
fn parse_field_type(arg: &[u8]) -> Result<(bool, u32), &'static str> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(ERR_BITFIELD_TYPE),
    };
    // Redis reads the width as a C string: it stops at a NUL byte.
    let digits = &arg[1..];
    let digits = &digits[..digits.iter().position(|&b| b == 0).unwrap_or(digits.len())];
    match parse_i64(digits) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(ERR_BITFIELD_TYPE),
    }
}

/// Parse BITFIELD's operations (every error is found before anything runs).
fn parse_bitfield(c: &Ctx, argv: &[&[u8]]) -> Result<Vec<FieldOp>, &'static str> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < argv.len() {
        let remaining = argv.len() - j - 1;
        let sub = argv[j];
        let is_get = eq_ic(sub, "get") && remaining >= 2;
        let is_write = (eq_ic(sub, "set") || eq_ic(sub, "incrby")) && remaining >= 3;
        if eq_ic(sub, "overflow") && remaining >= 1 {
            overflow = match argv[j + 1] {
                a if eq_ic(a, "wrap") => Overflow::Wrap,
                a if eq_ic(a, "sat") => Overflow::Sat,
                a if eq_ic(a, "fail") => Overflow::Fail,
                _ => return Err("ERR Invalid OVERFLOW type specified"),
            };
            j += 2;
            continue;
        }
        if !is_get && !is_write {
            return Err(ERR_SYNTAX);
        }
        let (signed, bits) = parse_field_type(argv[j + 1])?;
        let offset = bit_offset(c, argv[j + 2], bits)?;
        let kind = if is_get {
            FieldOpKind::Get
        } else {
            let n = arg_i64(argv[j + 3])?;
            if eq_ic(sub, "set") {
                FieldOpKind::Set(n)
            } else {
                FieldOpKind::IncrBy(n)
            }
        };
        ops.push(FieldOp {
            kind,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if is_get { 3 } else { 4 };
    }
    Ok(ops)
}

/// Run one SET or INCRBY on `buf`, replying with its result (the old value
/// for SET, the new one for INCRBY, null when OVERFLOW FAIL refuses it).
/// Returns whether the field changed, `None` when the write was refused.
fn run_field_write(buf: &mut [u8], reply: &mut Reply, op: &FieldOp) -> Option<bool> {
    let (arg, incr) = match op.kind {
        FieldOpKind::Set(v) => (v, false),
        FieldOpKind::IncrBy(v) => (v, true),
        FieldOpKind::Get => unreachable!("reads are not writes"),
    };
    let fits = |r: Result<u64, Option<u64>>| match r {
        Ok(v) | Err(Some(v)) => Some(v),
        Err(None) => None,
    };
    let (old, new, answer) = if op.signed {
        let old = bitops::get_signed(buf, op.offset, op.bits);
        let r = if incr {
            bitops::add_signed(old, arg, op.bits, op.overflow)
        } else {
            bitops::add_signed(arg, 0, op.bits, op.overflow)
        };
        let r = r.map(|v| v as u64).map_err(|e| e.map(|v| v as u64));
        let Some(new) = fits(r) else {
            reply.null();
            return None;
        };
        let answer = if incr { new as i64 } else { old };
        (old as u64, new, answer)
    } else {
        let old = bitops::get_unsigned(buf, op.offset, op.bits);
        let r = if incr {
            bitops::add_unsigned(old, arg, op.bits, op.overflow)
        } else {
            bitops::add_unsigned(arg as u64, 0, op.bits, op.overflow)
        };
        let Some(new) = fits(r) else {
            reply.null();
            return None;
        };
        let answer = if incr { new as i64 } else { old as i64 };
        (old, new, answer)
    };
    reply.int(answer);
    bitops::set_bits(buf, op.offset, op.bits, new);
    let mask = if op.bits == 64 {
        u64::MAX
    } else {
        (1 << op.bits) - 1
    };
    Some(old & mask != new & mask)
}

fn reply_field_get(reply: &mut Reply, bytes: &[u8], op: &FieldOp) {
    if op.signed {
        reply.int(bitops::get_signed(bytes, op.offset, op.bits));
    } else {
        reply.int(bitops::get_unsigned(bytes, op.offset, op.bits) as i64);
    }
}

/// `BITFIELD key [GET type offset] [SET type offset value]
/// [INCRBY type offset increment] [OVERFLOW WRAP|SAT|FAIL] ...` — an array
/// with one reply per GET/SET/INCRBY, in order.
pub fn bitfield(c: &mut Ctx, argv: &[&[u8]]) {
    bitfield_generic(c, argv, false);
}

/// `BITFIELD_RO key [GET type offset ...]` — BITFIELD restricted to GET.
pub fn bitfield_ro(c: &mut Ctx, argv: &[&[u8]]) {
    bitfield_generic(c, argv, true);
}

fn bitfield_generic(c: &mut Ctx, argv: &[&[u8]], read_only: bool) {
    let ops = match parse_bitfield(c, argv) {
        Ok(ops) => ops,
        Err(e) => return c.cl.reply.error(e),
    };
    let key = argv[1];
    let writes = ops.iter().filter(|op| !matches!(op.kind, FieldOpKind::Get));
    let Some(highest) = writes.map(|op| op.offset + op.bits as u64 - 1).max() else {
        // Only reads: a missing key reads as zeros.
        let bytes = match lookup_read(c.srv, c.cl.db, key) {
            None => None,
            Some(e) => match string_bytes(e) {
                Some(s) => Some(s),
                None => return c.cl.reply.error(ERR_WRONGTYPE),
            },
        };
        c.cl.reply.array(ops.len());
        for op in &ops {
            reply_field_get(&mut c.cl.reply, bytes.as_deref().unwrap_or(&[]), op);
        }
        return;
    };
    if read_only {
        return c
            .cl
            .reply
            .error("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let changes = with_bits_for_write(c, key, highest, |buf, reply, padded| {
        reply.array(ops.len());
        let mut changes = 0;
        for op in &ops {
            match op.kind {
                FieldOpKind::Get => reply_field_get(reply, buf, op),
                _ => {
                    // Redis counts a refused (FAIL) write as no change, but
                    // any applied one on a created or grown string as one.
                    if let Some(changed) = run_field_write(buf, reply, op) {
                        if changed || padded != Padded::Untouched {
                            changes += 1;
                        }
                    }
                }
            }
        }
        changes
    });
    if let Some(n) = changes.filter(|&n| n > 0) {
        c.modified(key, NotifyFlags::STRING, "setbit");
        c.dirty(n);
    }
}
