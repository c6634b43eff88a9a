//! LZF, the compression Redis uses for strings in RDB files: a greedy
//! compressor (3-byte hash matches, back references up to 8 KiB away and 264
//! bytes long) and the decompressor.

/// Longest back reference (length field 7 + 255, plus 2).
const MAX_REF: usize = 264;
/// Farthest back reference.
const MAX_OFF: usize = 8192;
/// Longest literal run.
const MAX_LIT: usize = 32;
const HASH_BITS: u32 = 14;

fn hash3(b: &[u8]) -> usize {
    let v = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
    (v.wrapping_mul(2654435761) >> (32 - HASH_BITS)) as usize
}

fn push_literals(out: &mut Vec<u8>, mut lit: &[u8]) {
    while !lit.is_empty() {
        let n = lit.len().min(MAX_LIT);
        out.push((n - 1) as u8);
        out.extend_from_slice(&lit[..n]);
        lit = &lit[n..];
    }
}

/// Compress `input`; `None` unless the result is shorter than `max_out`.
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    let mut out = Vec::with_capacity(max_out.min(n));
    // A hash table sized to the input (most strings are short): allocating
    // and clearing 16K slots per 100-byte value would dominate SAVE.
    let bits = (usize::BITS - n.leading_zeros()).clamp(4, HASH_BITS);
    let mut table = vec![usize::MAX; 1 << bits];
    let (mut i, mut lit_start) = (0usize, 0usize);
    while i + 2 < n {
        let h = hash3(&input[i..]) & ((1 << bits) - 1);
        let cand = table[h];
        table[h] = i;
        if cand != usize::MAX && i - cand <= MAX_OFF && input[cand..cand + 3] == input[i..i + 3] {
            let max = (n - i).min(MAX_REF);
            let mut len = 3;
            while len < max && input[cand + len] == input[i + len] {
                len += 1;
            }
            push_literals(&mut out, &input[lit_start..i]);
            let off = i - cand - 1;
            let l = len - 2;
            if l < 7 {
                out.push(((off >> 8) as u8) | ((l as u8) << 5));
            } else {
                out.push(((off >> 8) as u8) | (7 << 5));
                out.push((l - 7) as u8);
            }
            out.push(off as u8);
            i += len;
            lit_start = i;
            if out.len() >= max_out {
                return None;
            }
        } else {
            i += 1;
        }
    }
    push_literals(&mut out, &input[lit_start..]);
    if out.len() < max_out {
        Some(out)
    } else {
        None
    }
}

/// Decompress `input` into exactly `out_len` bytes; `None` if the data is
/// malformed or does not produce that length.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    // A length the input cannot expand to is corrupt: refuse it before
    // allocating (each input byte yields at most MAX_REF output bytes).
    if out_len > input.len().saturating_mul(MAX_REF) {
        return None;
    }
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // Literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            let lit = input.get(i..i + n)?;
            if out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            // Back reference.
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            if back > out.len() || out.len() + len > out_len {
                return None;
            }
            let start = out.len() - back;
            if back >= len {
                out.extend_from_within(start..start + len);
            } else if back == 1 {
                // A run of one repeated byte.
                let b = out[start];
                out.resize(out.len() + len, b);
            } else {
                for k in 0..len {
                    let b = out[start + k];
                    out.push(b);
                }
            }
        }
    }
    if out.len() == out_len {
        Some(out)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips() {
        let mut rng = 12345u64;
        for size in [21usize, 100, 1000, 70_000] {
            let repetitive: Vec<u8> = (0..size).map(|i| b"abcdefgh"[i % 5]).collect();
            let c = super::compress(&repetitive, size).expect("compressible");
            assert!(c.len() < size / 2);
            assert_eq!(super::decompress(&c, size).unwrap(), repetitive);
            let noise: Vec<u8> = (0..size)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            if let Some(c) = super::compress(&noise, size + 100) {
                assert_eq!(super::decompress(&c, size).unwrap(), noise);
            }
        }
    }

    #[test]
    fn literal_and_backref() {
        // "abcabcabc": literal "abc" then a back reference of length 6, distance 3.
        let data = [2, b'a', b'b', b'c', (4 << 5) as u8, 2];
        assert_eq!(super::decompress(&data, 9).unwrap(), b"abcabcabc");
        assert!(super::decompress(&data, 10).is_none());
        assert!(super::decompress(&[0xe0, 0xff], 3).is_none());
        // An absurd announced length is refused without allocating it.
        assert!(super::decompress(&data, usize::MAX / 2).is_none());
    }
}
