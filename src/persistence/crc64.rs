//! CRC-64 with the Jones polynomial, reflected, as Redis's crc64.c computes
//! it for the RDB trailer (check value of "123456789": 0xe9c6d914c4b8d9ca).

const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const fn make_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut j = 0;
        while j < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            j += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Slicing-by-8 tables (as Redis's crcspeed): `TABLES[k][b]` is the CRC of
/// byte `b` followed by `k` zero bytes, so eight bytes are folded per step
/// with eight independent lookups instead of eight dependent ones.
const fn make_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    t[0] = make_table();
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = make_tables();

/// Continue a CRC over `data`: by carry-less multiplication where the CPU
/// has it (about ten times the tables' speed over a dump's megabytes), by
/// the tables for short runs and elsewhere.
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= clmul::MIN_LEN && clmul::available() {
        // SAFETY: the CPU has PCLMULQDQ (checked just above).
        return unsafe { clmul::crc64(crc, data) };
    }
    crc64_tables(crc, data)
}

/// `crc64` by the slicing-by-8 tables.
fn crc64_tables(mut crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(w);
        let x = crc ^ u64::from_le_bytes(bytes);
        crc = t[7][(x & 0xff) as usize]
            ^ t[6][((x >> 8) & 0xff) as usize]
            ^ t[5][((x >> 16) & 0xff) as usize]
            ^ t[4][((x >> 24) & 0xff) as usize]
            ^ t[3][((x >> 32) & 0xff) as usize]
            ^ t[2][((x >> 40) & 0xff) as usize]
            ^ t[1][((x >> 48) & 0xff) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    for &b in words.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// `x^n mod P`, in the reflected bit order the CRC works in (the
/// coefficient of `x^63` in bit 0).
#[cfg(target_arch = "x86_64")]
const fn x_pow_mod(n: u32) -> u64 {
    // The polynomial in the normal order: x^64 + NORMAL.
    const NORMAL: u64 = POLY.reverse_bits();
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        let carry = r >> 63;
        r <<= 1;
        if carry == 1 {
            r ^= NORMAL;
        }
        i += 1;
    }
    r.reverse_bits()
}

/// The CRC by folding 128-bit blocks with carry-less multiplication (as in
/// Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ").
///
/// The CRC of a message M is `M(x)·x^64 mod P`, and with the CRC's bit order
/// (a byte's bit 0 is its highest power) a 16-byte block loaded little endian
/// holds its polynomial with the first 8 bytes as the high half. Folding an
/// accumulator A over the next D bits is `A·x^D + B`: its first half times
/// `x^(64+D)`, its second times `x^D`, each reduced to 64 bits first. A
/// carry-less product of two 64-bit reflected values is the product times x
/// in 128 bits, so the constants are `x^(63+D) mod P` and `x^(D-1) mod P`.
/// What is left in the end, 128 bits congruent to the message, goes through
/// the tables (whose CRC of 16 bytes from 0 is their polynomial times x^64
/// mod P), and then the bytes after the last whole block.
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::*;

    /// Shorter runs go through the tables.
    pub const MIN_LEN: usize = 64;

    /// Folding by one block (D = 128).
    const K128: (u64, u64) = (super::x_pow_mod(191), super::x_pow_mod(127));
    /// Folding each of four accumulators by four blocks (D = 512).
    const K512: (u64, u64) = (super::x_pow_mod(575), super::x_pow_mod(511));

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("pclmulqdq")
    }

    #[inline]
    #[target_feature(enable = "pclmulqdq,sse2")]
    unsafe fn fold(a: __m128i, k: __m128i, b: __m128i) -> __m128i {
        // The low lane holds the first 8 bytes (the higher powers).
        let first = _mm_clmulepi64_si128::<0x00>(a, k);
        let second = _mm_clmulepi64_si128::<0x11>(a, k);
        _mm_xor_si128(_mm_xor_si128(first, second), b)
    }

    #[inline]
    unsafe fn load(p: &[u8], at: usize) -> __m128i {
        debug_assert!(at + 16 <= p.len());
        // SAFETY: the 16 bytes are inside `p` (every caller stays below its length).
        unsafe { _mm_loadu_si128(p.as_ptr().add(at) as *const __m128i) }
    }

    /// # Safety
    /// The CPU must have PCLMULQDQ; `data` must be at least 64 bytes long.
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub unsafe fn crc64(crc: u64, data: &[u8]) -> u64 {
        assert!(data.len() >= MIN_LEN);
        let k128 = _mm_set_epi64x(K128.1 as i64, K128.0 as i64);
        let k512 = _mm_set_epi64x(K512.1 as i64, K512.0 as i64);
        let blocks = data.len() / 16;
        // SAFETY (every load): block indexes stay below `blocks`.
        let mut acc = unsafe {
            [
                // The running CRC is added to the message's next 8 bytes.
                _mm_xor_si128(load(data, 0), _mm_set_epi64x(0, crc as i64)),
                load(data, 16),
                load(data, 32),
                load(data, 48),
            ]
        };
        let mut i = 4;
        while i + 4 <= blocks {
            for (j, a) in acc.iter_mut().enumerate() {
                *a = unsafe { fold(*a, k512, load(data, (i + j) * 16)) };
            }
            i += 4;
        }
        let mut x = unsafe { fold(acc[0], k128, acc[1]) };
        x = unsafe { fold(x, k128, acc[2]) };
        x = unsafe { fold(x, k128, acc[3]) };
        while i < blocks {
            x = unsafe { fold(x, k128, load(data, i * 16)) };
            i += 1;
        }
        let mut rest = [0u8; 16];
        // SAFETY: `rest` is 16 bytes.
        unsafe { _mm_storeu_si128(rest.as_mut_ptr() as *mut __m128i, x) };
        let crc = super::crc64_tables(0, &rest);
        super::crc64_tables(crc, &data[blocks * 16..])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_redis_check_value() {
        assert_eq!(super::crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn eight_at_a_time_equals_byte_at_a_time() {
        let table = super::make_table();
        let slow = |mut crc: u64, data: &[u8]| {
            for &b in data {
                crc = table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
            }
            crc
        };
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 131 % 251) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 1000] {
            for split in [0, 3, len / 2] {
                let split = split.min(len);
                let a = super::crc64(super::crc64(0, &data[..split]), &data[split..len]);
                assert_eq!(a, slow(0, &data[..len]), "len {len} split {split}");
            }
        }
    }

    /// The carry-less path against the tables: every length from its
    /// minimum through a few rounds of four blocks and tails, with running
    /// CRCs of every kind (0, all ones, one from real data), at offsets that
    /// break the alignment.
    #[test]
    fn folding_equals_the_tables() {
        let data: Vec<u8> = (0..5100u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
            .collect();
        for init in [0, u64::MAX, super::crc64_tables(0, b"kvstore")] {
            for len in (0..400).chain([1000, 4093, 4096, 4999]) {
                for off in [0, 1, 7] {
                    let d = &data[off..off + len];
                    assert_eq!(
                        super::crc64(init, d),
                        super::crc64_tables(init, d),
                        "len {len} off {off} init {init:x}"
                    );
                }
            }
        }
        // A message in pieces of all sizes gives the CRC of the whole.
        let mut crc = 0;
        let mut at = 0;
        for piece in [3, 64, 65, 200, 1, 1000, 17] {
            crc = super::crc64(crc, &data[at..at + piece]);
            at += piece;
        }
        assert_eq!(crc, super::crc64_tables(0, &data[..at]));
    }
}
