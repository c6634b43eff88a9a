//! LZF, the compression Redis uses for strings in RDB files and for the
//! interior nodes of lists (`list-compress-depth`): the compressor is
//! Redis's lzf_c.c as Redis builds it (`HLOG` 16, `VERY_FAST`, hash slots
//! holding positions), so that a string or list node compresses to the
//! same bytes here as in Redis and a DUMP payload is the same; and the
//! decompressor, which checks every reference against its input and output.
//!
//! One difference: Redis's hash table is left uninitialised on the stack,
//! so a stale slot can now and then offer a match that a clean table would
//! not; ours starts clean on every call (a generation number per slot, so
//! that starting clean costs nothing for a short input).

use std::cell::RefCell;

/// Longest back reference (length field 7 + 255, plus 2).
const MAX_REF: usize = (1 << 8) + (1 << 3);
/// Farthest back reference.
const MAX_OFF: usize = 1 << 13;
/// Longest literal run.
const MAX_LIT: usize = 1 << 5;
/// log2 of the hash table's slots (Redis's `HLOG`).
const HASH_LOG: u32 = 16;
const HASH_SIZE: usize = 1 << HASH_LOG;

/// The compressor's hash table: the last position seen for each hash of
/// three bytes, valid only when its generation is the current call's.
struct HashTable {
    pos: Vec<usize>,
    generation: Vec<u32>,
    current: u32,
}

impl HashTable {
    /// Start a call: every slot reads as empty.
    fn begin(&mut self) {
        if self.pos.is_empty() {
            self.pos = vec![0; HASH_SIZE];
            self.generation = vec![0; HASH_SIZE];
        }
        self.current = self.current.wrapping_add(1);
        if self.current == 0 {
            // Wrapped: old generations could read as current again.
            self.generation.fill(0);
            self.current = 1;
        }
    }

    fn get(&self, slot: usize) -> Option<usize> {
        (self.generation[slot] == self.current).then(|| self.pos[slot])
    }

    fn set(&mut self, slot: usize, pos: usize) {
        self.pos[slot] = pos;
        self.generation[slot] = self.current;
    }
}

thread_local! {
    static TABLE: RefCell<HashTable> = const {
        RefCell::new(HashTable {
            pos: Vec::new(),
            generation: Vec::new(),
            current: 0,
        })
    };
}

/// Redis's `FRST`: the hash's first two bytes.
#[inline]
fn first(input: &[u8], i: usize) -> u32 {
    (input[i] as u32) << 8 | input[i + 1] as u32
}

/// Redis's `NEXT`: shift the third byte in (older bytes stay in the top bits).
#[inline]
fn next(h: u32, input: &[u8], i: usize) -> u32 {
    h << 8 | input[i + 2] as u32
}

/// Redis's `IDX` for `VERY_FAST`.
#[inline]
fn slot(h: u32) -> usize {
    ((h >> (3 * 8 - HASH_LOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HASH_SIZE - 1)
}

/// Compress `input` into at most `out_len` bytes, as Redis's
/// `lzf_compress(input, len, out, out_len)`: `None` where that returns 0
/// (the input or the room is empty, or the output would not fit).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if input.is_empty() || out_len == 0 {
        return None;
    }
    TABLE.with(|t| compress_with(&mut t.borrow_mut(), input, out_len))
}

fn compress_with(table: &mut HashTable, input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    table.begin();
    let in_len = input.len();
    // Every write below is at an index the checks before it keep under
    // `out_len`, as in lzf_c.c; `op` may point one or two past the end
    // between writes (a reserved control byte not yet written).
    let mut out = vec![0u8; out_len];
    let mut ip = 0usize;
    let mut op = 1usize; // the first literal run's control byte is out[0]
    let mut lit = 0usize;
    let mut hval = if in_len >= 2 { first(input, 0) } else { 0 };
    while ip + 2 < in_len {
        hval = next(hval, input, ip);
        let h = slot(hval);
        let reference = table.get(h);
        table.set(h, ip);
        let matched = reference.filter(|&r| {
            r > 0
                && r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        });
        if let Some(r) = matched {
            let off = ip - r - 1;
            let maxlen = (in_len - ip - 2).min(MAX_REF);
            if op + 3 + 1 >= out_len && op - usize::from(lit == 0) + 3 + 1 >= out_len {
                return None;
            }
            // Close the literal run (or take back its unused control byte).
            if lit > 0 {
                out[op - lit - 1] = (lit - 1) as u8;
            } else {
                op -= 1;
            }
            let mut len = 2usize;
            let mut unrolled_mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        unrolled_mismatch = true;
                        break;
                    }
                }
            }
            if !unrolled_mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2; // now the match length minus 2, as the format stores it
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1; // start a new run
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            // VERY_FAST: hash the last two positions of the match.
            ip -= 2;
            hval = first(input, ip);
            hval = next(hval, input, ip);
            table.set(slot(hval), ip);
            ip += 1;
            hval = next(hval, input, ip);
            table.set(slot(hval), ip);
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            push_literal(&mut out, &mut op, &mut lit, input[ip]);
            ip += 1;
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        push_literal(&mut out, &mut op, &mut lit, input[ip]);
        ip += 1;
    }
    if lit > 0 {
        out[op - lit - 1] = (lit - 1) as u8;
    } else {
        op -= 1;
    }
    out.truncate(op);
    Some(out)
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

/// Append one literal byte to the run being written; a full run gets its
/// length byte (written in the slot left before it) and a new run starts.
#[inline(always)]
fn push_literal(out: &mut [u8], op: &mut usize, lit: &mut usize, byte: u8) {
    *lit += 1;
    out[*op] = byte;
    *op += 1;
    if *lit == MAX_LIT {
        out[*op - *lit - 1] = (*lit - 1) as u8;
        *lit = 0;
        *op += 1;
    }
}

#[cfg(test)]
mod tests {
    /// Redis's own output (DUMP payloads from redis-server 7.0.15), byte for byte.
    #[test]
    fn compresses_exactly_as_redis() {
        let unhex = |parts: &[&str]| -> Vec<u8> {
            let s: String = parts.concat();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let a100 = vec![b'a'; 100];
        let text = [
            "The quick brown fox jumps over the lazy dog. ".repeat(7),
            "Pack my box with five dozen liquor jugs!".to_string(),
        ]
        .concat()
        .into_bytes();
        let items: Vec<u8> = (0..200)
            .flat_map(|i| format!("{i:05}-item,").into_bytes())
            .collect();
        let cases: [(&[u8], Vec<u8>); 3] = [
            (&a100, unhex(&["016161e05700016161"])),
            (
                &text,
                unhex(&[
                    "1f54686520717569636b2062726f776e20666f78206a756d7073206f7665722074201e0a6c617a79",
                    "20646f672e2054200de0ff2c032e2050612135036d7920622132087769746820666976652128097a",
                    "656e206c6971756f72214902677321",
                ]),
            ),
            (
                &items,
                unhex(&[
                    "0130302000052d6974656d2c2008013031e0010a0032e0010a0033e0010a0034e0010a0035e0010a",
                    "0036e0010a0037e0010a0038e0010a0039e0000a0031e0016d0031e0016d0031e0016d0031e0016d",
                    "0031e0016d0031e0016d0031e0016d0031e0016d0031e0016d0031e0016d0032e0016d0032e0016d",
                    "0032e0016d0032e0016d0032e0016d0032e0016d0032e0016d0032e0016d0032e0016d0032e0016d",
                    "0033e0016d0033e0016d0033e0016d0033e0016d0033e0016d0033e0016d0033e0016d0033e0016d",
                    "0033e0016d0033e0016d0034e0016d0034e0016d0034e0016d0034e0016d0034e0016d0034e0016d",
                    "0034e0016d0034e0016d0034e0016d0034e0016d0035e0016d0035e0016d0035e0016d0035e0016d",
                    "0035e0016d0035e0016d0035e0016d0035e0016d0035e0016d0035e0016d0036e0016d0036e0016d",
                    "0036e0016d0036e0016d0036e0016d0036e0016d0036e0016d0036e0016d0036e0016d0036e0016d",
                    "0037e0016d0037e0016d0037e0016d0037e0016d0037e0016d0037e0016d0037e0016d0037e0016d",
                    "0037e0016d0037e0016d0038e0016d0038e0016d0038e0016d0038e0016d0038e0016d0038e0016d",
                    "0038e0016d0038e0016d0038e0016d0038e0016d0039e0016d0039e0016d0039e0016d0039e0016d",
                    "0039e0016d0039e0016d0039e0016d0039e0016d0039e0016d0039e0006d0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b0031e4014b",
                    "0031e4014b0031844b016d2c",
                ]),
            ),
        ];
        for (input, expected) in cases {
            let got = super::compress(input, input.len() - 4).expect("compressible");
            assert_eq!(got, expected);
            assert_eq!(super::decompress(&got, input.len()).unwrap(), input);
        }
        // Too little room: nothing, as lzf_compress returns 0.
        assert!(super::compress(&a100, 8).is_none());
        assert!(super::compress(b"abc", 0).is_none());
        assert!(super::compress(b"", 10).is_none());
    }

    #[test]
    fn round_trips() {
        let mut rng = 12345u64;
        for size in [21usize, 100, 1000, 70_000] {
            let repetitive: Vec<u8> = (0..size).map(|i| b"abcdefgh"[i % 5]).collect();
            let c = super::compress(&repetitive, size).expect("compressible");
            // A short input keeps its first bytes literal (no match can
            // start at position 0), so only longer ones halve.
            assert!(size < 100 || c.len() < size / 2);
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
