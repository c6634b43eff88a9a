//! Bit-level operations on string values: the kernels behind BITCOUNT,
//! BITPOS, BITOP and BITFIELD (Redis's bitops.c).
//!
//! A string is a bit array whose bit 0 is the most significant bit of its
//! first byte. Every kernel here is pure (bytes in, answer out) so that the
//! commands only parse and apply, and the kernels can be checked against a
//! bit-by-bit model.
//!
//! Speed: counting and searching go a 64-bit word at a time. Counting uses
//! the CPU's `popcnt` instruction when it has one (detected at run time: the
//! default x86-64 target does not assume it), which is several times faster
//! than the table and SWAR tricks Redis uses; BITOP combines whole words.

/// Bits set in `bytes`.
pub fn popcount(bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has just been found to support `popcnt`.
            return unsafe { popcount_popcnt(bytes) };
        }
    }
    popcount_words(bytes)
}

/// The portable kernel: four independent words per step, so the CPU can
/// overlap their (SWAR) counts.
#[inline(always)]
fn popcount_words(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(32);
    let (mut a, mut b, mut c, mut d) = (0u64, 0u64, 0u64, 0u64);
    for ch in &mut chunks {
        let w = |i: usize| u64::from_ne_bytes(ch[i..i + 8].try_into().unwrap());
        a += w(0).count_ones() as u64;
        b += w(8).count_ones() as u64;
        c += w(16).count_ones() as u64;
        d += w(24).count_ones() as u64;
    }
    let mut rest = chunks.remainder().chunks_exact(8);
    for ch in &mut rest {
        a += u64::from_ne_bytes(ch.try_into().unwrap()).count_ones() as u64;
    }
    for &byte in rest.remainder() {
        b += byte.count_ones() as u64;
    }
    a + b + c + d
}

/// # Safety
/// The CPU must support `popcnt`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn popcount_popcnt(bytes: &[u8]) -> u64 {
    popcount_words(bytes)
}

/// Position of the first bit equal to `bit` in `bytes`, as Redis's
/// redisBitpos: when there is no such bit, -1 when looking for a 1, and
/// the position just past the end when looking for a 0 (the string is
/// taken as padded with zeros on the right).
pub fn bitpos(bytes: &[u8], bit: bool) -> i64 {
    let skip_byte = if bit { 0u8 } else { 0xff };
    let skip_word = if bit { 0u64 } else { u64::MAX };
    let mut i = 0;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        if u64::from_ne_bytes(w.try_into().unwrap()) != skip_word {
            break;
        }
        i += 8;
    }
    while i < bytes.len() {
        let b = bytes[i];
        if b != skip_byte {
            let lead = if bit {
                b.leading_zeros()
            } else {
                (!b).leading_zeros()
            };
            return (i as i64) * 8 + lead as i64;
        }
        i += 1;
    }
    if bit {
        -1
    } else {
        bytes.len() as i64 * 8
    }
}

/// BITOP's operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// The result of BITOP over `srcs`: as long as the longest source, shorter
/// ones read as padded with zeros. NOT takes exactly one source.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![0u8; maxlen];
    let Some((first, rest)) = srcs.split_first() else {
        return out;
    };
    out[..first.len()].copy_from_slice(first);
    if op == BitOp::Not {
        combine(&mut out, &[], |a, _| !a);
        return out;
    }
    for src in rest {
        match op {
            BitOp::And => combine(&mut out, src, |a, b| a & b),
            BitOp::Or => combine(&mut out, src, |a, b| a | b),
            BitOp::Xor => combine(&mut out, src, |a, b| a ^ b),
            BitOp::Not => unreachable!("NOT has one source"),
        }
    }
    out
}

/// `out[i] = f(out[i], src[i])` over all of `out`, a word at a time; past
/// the end of `src` its bytes read as zero.
#[inline(always)]
fn combine(out: &mut [u8], src: &[u8], f: impl Fn(u64, u64) -> u64) {
    let n = out.len();
    let (head, tail) = out.split_at_mut(n - n % 8);
    for (i, w) in head.chunks_exact_mut(8).enumerate() {
        let a = u64::from_ne_bytes((&*w).try_into().unwrap());
        let b = match src.get(i * 8..i * 8 + 8) {
            Some(s) => u64::from_ne_bytes(s.try_into().unwrap()),
            None => {
                // The source ends inside this word: pad it with zeros.
                let mut word = [0u8; 8];
                let part = src.get(i * 8..).unwrap_or(&[]);
                word[..part.len()].copy_from_slice(part);
                u64::from_ne_bytes(word)
            }
        };
        w.copy_from_slice(&f(a, b).to_ne_bytes());
    }
    let base = head.len();
    for (j, byte) in tail.iter_mut().enumerate() {
        let b = src.get(base + j).copied().unwrap_or(0);
        *byte = f(*byte as u64, b as u64) as u8;
    }
}

/// Read `bits` (1..=64) bits at bit `offset` as an unsigned integer; bits
/// past the end of `bytes` read as zero.
pub fn get_unsigned(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    let mut value = 0u64;
    for i in 0..bits as u64 {
        let pos = offset + i;
        let byte = bytes.get((pos >> 3) as usize).copied().unwrap_or(0);
        value = (value << 1) | ((byte >> (7 - (pos & 7))) & 1) as u64;
    }
    value
}

/// Read `bits` bits at `offset` as a two's complement signed integer.
pub fn get_signed(bytes: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(bytes, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Write the low `bits` bits of `value` at bit `offset`. The caller has
/// made `bytes` long enough.
pub fn set_bits(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let bitval = (value >> (bits as u64 - 1 - i)) & 1;
        let pos = offset + i;
        let byte = &mut bytes[(pos >> 3) as usize];
        let shift = 7 - (pos & 7);
        *byte = (*byte & !(1 << shift)) | ((bitval as u8) << shift);
    }
}

/// What BITFIELD does when a SET or INCRBY leaves the field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// `value + incr` in an unsigned field of `bits` (1..=63) bits:
/// `Ok(result)` when it fits, otherwise `Err(Some(r))` with the wrapped or
/// saturated result, or `Err(None)` for FAIL (Redis's
/// checkUnsignedBitfieldOverflow).
pub fn add_unsigned(value: u64, incr: i64, bits: u32, ow: Overflow) -> Result<u64, Option<u64>> {
    let max = (1u64 << bits) - 1;
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let limit = if value > max || (incr > 0 && incr > maxincr) {
        max
    } else if incr < 0 && incr < minincr {
        0
    } else {
        return Ok(value.wrapping_add(incr as u64));
    };
    Err(match ow {
        Ow::Wrap => Some(value.wrapping_add(incr as u64) & max),
        Ow::Sat => Some(limit),
        Ow::Fail => None,
    })
}

use Overflow as Ow;

/// `value + incr` in a signed field of `bits` (1..=64) bits, as
/// [`add_unsigned`] (Redis's checkSignedBitfieldOverflow).
pub fn add_signed(value: i64, incr: i64, bits: u32, ow: Overflow) -> Result<i64, Option<i64>> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let limit = if value > max
        || (bits != 64 && incr > maxincr)
        || (value >= 0 && incr > 0 && incr > maxincr)
    {
        max
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        min
    } else {
        return Ok(value.wrapping_add(incr));
    };
    Err(match ow {
        Ow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let mask = u64::MAX << bits;
                if c & (1 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            Some(c as i64)
        }
        Ow::Sat => Some(limit),
        Ow::Fail => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bit_at(bytes: &[u8], pos: usize) -> bool {
        bytes
            .get(pos / 8)
            .is_some_and(|b| b & (0x80 >> (pos % 8)) != 0)
    }

    #[test]
    fn bitpos_of_missing_bits_follows_redis() {
        assert_eq!(bitpos(&[0, 0, 0], true), -1);
        assert_eq!(bitpos(&[0xff, 0xff], false), 16);
        assert_eq!(bitpos(&[0xff, 0xf0], false), 12);
        assert_eq!(bitpos(&[], false), 0);
        assert_eq!(bitpos(&[], true), -1);
    }

    #[test]
    fn bitfield_reads_across_bytes() {
        let mut b = vec![0u8; 2];
        set_bits(&mut b, 7, 5, 23);
        assert_eq!(b, [0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&b, 7, 5), 23);
        assert_eq!(get_signed(&b, 7, 5), 23 - 32);
        assert_eq!(get_unsigned(&b, 100, 8), 0);
    }

    #[test]
    fn overflow_rules_match_redis() {
        assert_eq!(add_unsigned(250, 10, 8, Ow::Wrap), Err(Some(4)));
        assert_eq!(add_unsigned(250, 10, 8, Ow::Sat), Err(Some(255)));
        assert_eq!(add_unsigned(250, 10, 8, Ow::Fail), Err(None));
        assert_eq!(add_unsigned(5, -10, 8, Ow::Sat), Err(Some(0)));
        assert_eq!(add_unsigned(5, -10, 8, Ow::Wrap), Err(Some(251)));
        assert_eq!(add_signed(120, 10, 8, Ow::Wrap), Err(Some(-126)));
        assert_eq!(add_signed(-120, -10, 8, Ow::Sat), Err(Some(-128)));
        assert_eq!(add_signed(i64::MAX, 1, 64, Ow::Sat), Err(Some(i64::MAX)));
        assert_eq!(add_signed(i64::MAX, 1, 64, Ow::Wrap), Err(Some(i64::MIN)));
        assert_eq!(add_signed(i64::MIN, -1, 64, Ow::Fail), Err(None));
        assert_eq!(add_signed(-5, 3, 4, Ow::Fail), Ok(-2));
    }

    proptest! {
        #[test]
        fn popcount_matches_a_bit_by_bit_count(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let model: u64 = (0..bytes.len() * 8).filter(|&p| bit_at(&bytes, p)).count() as u64;
            prop_assert_eq!(popcount(&bytes), model);
            prop_assert_eq!(popcount_words(&bytes), model);
        }

        #[test]
        fn bitpos_matches_a_bit_by_bit_scan(bytes in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()], 0..80), bit: bool) {
            let model = (0..bytes.len() * 8).find(|&p| bit_at(&bytes, p) == bit)
                .map_or(if bit { -1 } else { bytes.len() as i64 * 8 }, |p| p as i64);
            prop_assert_eq!(bitpos(&bytes, bit), model);
        }

        #[test]
        fn bitop_matches_a_bytewise_model(srcs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..4), op in 0..4u8) {
            let op = [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not][op as usize];
            let srcs: Vec<&[u8]> = if op == BitOp::Not { vec![&srcs[0]] } else { srcs.iter().map(|s| s.as_slice()).collect() };
            let maxlen = srcs.iter().map(|s| s.len()).max().unwrap();
            let model: Vec<u8> = (0..maxlen).map(|i| {
                let at = |s: &[u8]| s.get(i).copied().unwrap_or(0);
                let mut v = at(srcs[0]);
                if op == BitOp::Not { return !v; }
                for s in &srcs[1..] {
                    v = match op { BitOp::And => v & at(s), BitOp::Or => v | at(s), _ => v ^ at(s) };
                }
                v
            }).collect();
            prop_assert_eq!(bitop(op, &srcs), model);
        }

        #[test]
        fn bitfield_set_then_get_round_trips(len in 1usize..20, off in 0u64..80, bits in 1u32..=64, value: u64) {
            let mut bytes = vec![0u8; len + 9];
            let off = off.min(len as u64 * 8);
            set_bits(&mut bytes, off, bits, value);
            let mask = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
            prop_assert_eq!(get_unsigned(&bytes, off, bits), value & mask);
            // Other bits are untouched.
            let mut again = bytes.clone();
            set_bits(&mut again, off, bits, 0);
            for p in 0..(len + 9) * 8 {
                if (p as u64) < off || p as u64 >= off + bits as u64 {
                    prop_assert!(!bit_at(&again, p));
                }
            }
        }

        #[test]
        fn signed_add_agrees_with_wide_arithmetic(bits in 1u32..=64, value: i64, incr: i64) {
            let max = if bits == 64 { i64::MAX as i128 } else { (1i128 << (bits - 1)) - 1 };
            let min = -max - 1;
            let v = (value as i128).clamp(min, max);
            let sum = v + incr as i128;
            let r = add_signed(v as i64, incr, bits, Ow::Sat);
            if sum > max { prop_assert_eq!(r, Err(Some(max as i64))); }
            else if sum < min { prop_assert_eq!(r, Err(Some(min as i64))); }
            else { prop_assert_eq!(r, Ok(sum as i64)); }
            let m = 1i128 << bits;
            let wrapped = ((sum - min).rem_euclid(m) + min) as i64;
            match add_signed(v as i64, incr, bits, Ow::Wrap) {
                Ok(x) | Err(Some(x)) => prop_assert_eq!(x, wrapped),
                Err(None) => prop_assert!(false),
            }
        }

        #[test]
        fn unsigned_add_agrees_with_wide_arithmetic(bits in 1u32..=63, value: u64, incr: i64) {
            let max = (1u128 << bits) - 1;
            let v = (value as u128).min(max);
            let sum = v as i128 + incr as i128;
            let r = add_unsigned(v as u64, incr, bits, Ow::Sat);
            if sum > max as i128 { prop_assert_eq!(r, Err(Some(max as u64))); }
            else if sum < 0 { prop_assert_eq!(r, Err(Some(0))); }
            else { prop_assert_eq!(r, Ok(sum as u64)); }
            let wrapped = sum.rem_euclid(max as i128 + 1) as u64;
            match add_unsigned(v as u64, incr, bits, Ow::Wrap) {
                Ok(x) | Err(Some(x)) => prop_assert_eq!(x, wrapped),
                Err(None) => prop_assert!(false),
            }
        }
    }
}
