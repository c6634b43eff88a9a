//! Small helpers every layer uses (Redis's util.c): number parsing with
//! Redis's exact rules, C `long double` arithmetic, glob matching, random
//! numbers, the wall clock, and a file's last close left to a thread (as
//! Redis's bio close jobs); and, in submodules, the pure structures of
//! latency reporting (`hdr`: HDR histograms, `sparkline`: ASCII graphs).
//!
//! This is the bottom layer: it imports nothing from the crate.

use std::fs::File;
use std::mem::MaybeUninit;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub mod child_info;
pub mod der;
pub mod hdr;
pub mod lzf;
pub mod pkcs8;
pub mod sparkline;

// ---- integers ----

/// C's `atoi` as glibc has it, which Redis uses where it reads a count
/// loosely: `strtol` (leading white space, a sign, the digits up to the
/// first other byte, saturating at the `long` limits; 0 for no digits),
/// then cut to an `int`'s low 32 bits.
pub fn c_atoi(s: &[u8]) -> i32 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    // The magnitude saturates one past i64::MAX so that -2^63 is exact.
    let mut n: i128 = 0;
    while let Some(d) = s.get(i).filter(|b| b.is_ascii_digit()) {
        n = (n * 10 + (d - b'0') as i128).min(1 << 63);
        i += 1;
    }
    let long = if neg {
        (-n).max(i64::MIN as i128)
    } else {
        n.min(i64::MAX as i128)
    };
    long as i64 as i32
}

/// Parse a signed decimal the way Redis's `string2ll` does: no spaces, no
/// `+`, no leading zeros, no overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' {
        (true, &s[1..])
    } else {
        (false, s)
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

// ---- doubles ----

/// C's `strtod` over the whole argument: the value and whether it was out
/// of range (`ERANGE`: overflow to ±HUGE_VAL or underflow). `None` when the
/// argument is not entirely a number (or holds a NUL).
pub fn strtod(arg: &[u8]) -> Option<(f64, bool)> {
    if arg.contains(&0) {
        return None;
    }
    let c = std::ffi::CString::new(arg).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is NUL-terminated and strtod leaves `end` inside it;
    // errno is this thread's own.
    let (v, erange) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(c.as_ptr(), &mut end);
        (v, *libc::__errno_location() == libc::ERANGE)
    };
    let used = end as usize - c.as_ptr() as usize;
    (used == arg.len()).then_some((v, erange))
}

/// A double argument as Redis's `getDoubleFromObject` reads it: the whole
/// string, no leading space, no NaN, and no overflow to infinity or
/// underflow to zero ("inf" spelled out is fine).
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || arg[0].is_ascii_whitespace() {
        return None;
    }
    // Plain decimal text: Rust's parser, correctly rounded as strtod is,
    // without a C string to make. Anything else (inf, hex, a value that
    // overflows or underflows: strtod's ERANGE rules) goes to strtod.
    if arg.len() <= 40
        && arg
            .iter()
            .all(|&b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
    {
        if let Some(v) = std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        {
            if v.is_finite() && v != 0.0 {
                return Some(v);
            }
        }
    }
    let (v, erange) = strtod(arg)?;
    if v.is_nan() || (erange && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

/// A double as Redis prints a percentile (`%f`, then trimDoubleString:
/// trailing zeroes and a trailing point removed): `99.9`, `50`.
pub fn format_percentile(p: f64) -> String {
    let mut s = format!("{p:.6}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    s
}

// ---- long double (Redis computes INCRBYFLOAT and timeouts in it) ----

extern "C" {
    fn kvstore_ld_add(
        cur: *const libc::c_char,
        cur_len: usize,
        incr: *const libc::c_char,
        incr_len: usize,
        out: *mut libc::c_char,
        out_len: usize,
    ) -> libc::c_int;
    fn kvstore_ld_scaled_ceil(
        s: *const libc::c_char,
        len: usize,
        scale: libc::c_double,
        out: *mut libc::c_longlong,
    ) -> libc::c_int;
}

/// Why a long double computation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDoubleError {
    /// An operand is not a valid float (Redis's `string2ld` refused it).
    NotAFloat,
    /// The result is NaN or infinite, or does not fit the target type.
    OutOfRange,
}

/// Add two decimal strings in C long double and print the sum as Redis's
/// `ld2string` does (`%.17Lf`, trailing zeroes trimmed): INCRBYFLOAT and
/// HINCRBYFLOAT results byte-identical to Redis's.
pub fn ld_add(cur: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, LongDoubleError> {
    let mut out = vec![0u8; 5 * 1024 + 64];
    let (cp, cl) = match cur {
        Some(s) => (s.as_ptr() as *const libc::c_char, s.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: all pointers are valid for the lengths given; the C side
    // never writes more than out.len() bytes.
    let n = unsafe {
        kvstore_ld_add(
            cp,
            cl,
            incr.as_ptr() as *const libc::c_char,
            incr.len(),
            out.as_mut_ptr() as *mut libc::c_char,
            out.len(),
        )
    };
    match n {
        -1 | -2 => Err(LongDoubleError::NotAFloat),
        n if n <= 0 => Err(LongDoubleError::OutOfRange),
        n => {
            out.truncate(n as usize);
            Ok(out)
        }
    }
}

/// `ceill(value * scale)` of a decimal string parsed as a long double, as
/// Redis turns a timeout in seconds into milliseconds. `OutOfRange` when
/// the value is infinite or the result does not fit an i64.
pub fn ld_scaled_ceil(arg: &[u8], scale: f64) -> Result<i64, LongDoubleError> {
    let mut out: libc::c_longlong = 0;
    // SAFETY: `arg` is valid for its length; `out` is a valid pointer.
    let rc = unsafe {
        kvstore_ld_scaled_ceil(
            arg.as_ptr() as *const libc::c_char,
            arg.len(),
            scale,
            &mut out,
        )
    };
    match rc {
        0 => Ok(out),
        -1 => Err(LongDoubleError::NotAFloat),
        _ => Err(LongDoubleError::OutOfRange),
    }
}

// ---- glob patterns ----

/// Glob-style pattern matching with Redis's `stringmatchlen` rules:
/// `*`, `?`, `[abc]`, `[^a-z]`, and `\` escapes. Like Redis, `*` does not
/// match the empty string here; KEYS and SCAN treat a lone `*` as "all".
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    glob_match_impl(pattern, string, nocase, &mut skip_longer, 0)
}

/// Nested `*` deeper than this never match (Redis's protection against
/// abusive patterns such as `*?` repeated 50,000 times).
const GLOB_MAX_NESTING: usize = 1000;

fn glob_match_impl(
    mut p: &[u8],
    mut s: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    if nesting > GLOB_MAX_NESTING {
        return false;
    }
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if glob_match_impl(&p[1..], s, nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    // A failed match of the rest cannot succeed on a shorter
                    // suffix either: stop, keeping matching linear-ish.
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                let c = s[0];
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == c {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let (cc, start, end) = if nocase {
                            (
                                c.to_ascii_lowercase(),
                                start.to_ascii_lowercase(),
                                end.to_ascii_lowercase(),
                            )
                        } else {
                            (c, start, end)
                        };
                        if cc >= start && cc <= end {
                            matched = true;
                        }
                        p = &p[2..];
                    } else if eq(p[0], c) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // Unterminated class: the pattern ends here.
                    return s.is_empty();
                }
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0]) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0]) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

// ---- random numbers ----

/// A small, fast PRNG (xorshift64*) for RANDOMKEY, sampling and table seeds.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    /// An independent generator seeded from this one (for use while the
    /// server's own generator cannot be borrowed).
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Byte-slice equality without a call to `memcmp` for keys of up to 16
/// bytes (most keys): two overlapping word loads per side. Longer slices
/// go to the library compare.
#[inline(always)]
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap());
    let half = |s: &[u8], at: usize| u32::from_ne_bytes(s[at..at + 4].try_into().unwrap());
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => (half(a, 0) ^ half(b, 0)) | (half(a, n - 4) ^ half(b, n - 4)) == 0,
        8..=16 => (word(a, 0) ^ word(b, 0)) | (word(a, n - 8) ^ word(b, n - 8)) == 0,
        _ => a == b,
    }
}

/// `buf.extend_from_slice(src)` without a call to `memcpy` for up to 16
/// bytes (a small value's reply): see [`copy_small`]. Longer slices, or a
/// buffer without the room, go to the library copy.
#[inline(always)]
pub fn push_small(buf: &mut Vec<u8>, src: &[u8]) {
    let n = src.len();
    let spare = buf.spare_capacity_mut();
    if n > 16 || spare.len() < n {
        buf.extend_from_slice(src);
        return;
    }
    copy_small(&mut spare[..n], src);
    // SAFETY: copy_small wrote all of the first `n` spare bytes.
    unsafe { buf.set_len(buf.len() + n) };
}

/// Copy `src` into `dst` (the same length) without a call to `memcpy`
/// when it is at most 16 bytes long: two overlapping stores of the widest
/// word that fits, as [`bytes_eq`] loads. Longer slices go to the library
/// copy. Every byte of `dst` is written.
#[inline(always)]
pub fn copy_small(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n);
    if n > 16 {
        dst.write_copy_of_slice(src);
        return;
    }
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr().cast::<u8>());
    // SAFETY: `dst` and `src` both hold `n` bytes (checked above), so every
    // store below lands in `dst` and every load in `src`; they cannot
    // overlap (`dst` is borrowed mutably while `src` is borrowed shared).
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                *d = *s;
                *d.add(n / 2) = *s.add(n / 2);
                *d.add(n - 1) = *s.add(n - 1);
            }
            4..=7 => {
                let (a, b) = (
                    s.cast::<u32>().read_unaligned(),
                    s.add(n - 4).cast::<u32>().read_unaligned(),
                );
                d.cast::<u32>().write_unaligned(a);
                d.add(n - 4).cast::<u32>().write_unaligned(b);
            }
            _ => {
                let (a, b) = (
                    s.cast::<u64>().read_unaligned(),
                    s.add(n - 8).cast::<u64>().read_unaligned(),
                );
                d.cast::<u64>().write_unaligned(a);
                d.add(n - 8).cast::<u64>().write_unaligned(b);
            }
        }
    }
}

/// Hint that the cache line at `p` will be read soon (a batch of lookups
/// starts its cache misses together instead of one after another).
#[inline(always)]
pub fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the
    // address, and reads nothing into the program.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Random bytes from the kernel (seeds, run ids).
pub fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: getrandom writes at most buf.len() bytes into buf.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n != 8 {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        return t.as_nanos() as u64 ^ (std::process::id() as u64) << 32;
    }
    u64::from_ne_bytes(buf)
}

/// `n` random hex digits (run ids, replication ids).
/// Append `bytes` quoted as Redis's `sdscatrepr` does (MONITOR lines,
/// CONFIG REWRITE values, AOF manifest names).
pub fn cat_repr(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// `s` quoted as Redis's `sdscatrepr` does.
pub fn repr(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    cat_repr(&mut out, s.as_bytes());
    // Only ASCII comes out: every other byte is escaped.
    String::from_utf8_lossy(&out).into_owned()
}

/// A replication id as Redis makes them: 40 hex digits
/// (CONFIG_RUN_ID_SIZE).
pub fn is_replication_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

pub fn random_hex(n: usize) -> String {
    let mut s = String::with_capacity(n);
    while s.len() < n {
        s.push_str(&format!("{:016x}", random_u64()));
    }
    s.truncate(n);
    s
}

/// The SHA-1 of `data` in lower-case hex (Redis names scripts by it:
/// EVALSHA, SCRIPT LOAD, `redis.sha1hex`).
pub fn sha1_hex(data: &[u8]) -> String {
    hex(&sha1(data))
}

/// Lower-case hex of `bytes`.
/// Standard base64 (with or without `=` padding) to bytes; `None` on a
/// character outside the alphabet.
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in text.iter().take_while(|&&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `data` padded as SHA-1 and SHA-256 read it: a 1 bit, zeros, and the
/// length in bits, to a whole number of 64-byte blocks.
fn md_padded(data: &[u8]) -> Vec<u8> {
    let bit_len = (data.len() as u64).wrapping_mul(8);
    let mut msg = Vec::with_capacity(data.len() + 72);
    msg.extend_from_slice(data);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    msg
}

/// The SHA-256 of `data` (FIPS 180-4); ACL passwords are kept as its hex.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let msg = md_padded(data);
    let mut w = [0u32; 64];
    for block in msg.chunks_exact(64) {
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, v) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(v);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, v) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// The SHA-1 of `data`.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let msg = md_padded(data);
    let mut w = [0u32; 80];
    for block in msg.chunks_exact(64) {
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, &wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

// ---- time ----

/// A cheap monotonic clock for timing commands (INFO commandstats, the
/// slow log): the CPU's invariant time-stamp counter where the CPU has one
/// (two clock reads per command are a tenth of a pipelined command's cost
/// through `clock_gettime`), `Instant` otherwise. Ticks convert to
/// microseconds with a rate measured once against the monotonic clock.
pub mod cycles {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// The clock in use: microseconds per tick as a 32.32 fixed-point
    /// factor (a multiply per reading instead of a float division), and
    /// whether ticks are the TSC's (else nanoseconds since `epoch`).
    #[derive(Clone, Copy)]
    struct Clock {
        us_per_tick_q32: u64,
        tsc: bool,
    }

    fn clock() -> Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        *CLOCK.get_or_init(|| match calibrate() {
            Some(rate) => Clock {
                us_per_tick_q32: ((1u64 << 32) as f64 / rate).round().max(1.0) as u64,
                tsc: true,
            },
            None => Clock {
                us_per_tick_q32: (1u64 << 32) / 1000,
                tsc: false,
            },
        })
    }

    #[cfg(target_arch = "x86_64")]
    fn calibrate() -> Option<f64> {
        let flags = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let flags = flags.lines().find(|l| l.starts_with("flags"))?;
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        if !(has("constant_tsc") && has("nonstop_tsc")) {
            return None;
        }
        let (t0, c0) = (Instant::now(), rdtsc());
        while t0.elapsed() < Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let (dt, dc) = (t0.elapsed(), rdtsc().wrapping_sub(c0));
        let rate = dc as f64 / dt.as_secs_f64() / 1e6;
        (rate > 0.0).then_some(rate)
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn calibrate() -> Option<f64> {
        None
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn rdtsc() -> u64 {
        // SAFETY: RDTSC has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline]
    fn rdtsc() -> u64 {
        0
    }

    fn epoch() -> Instant {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }

    /// Pick the clock (and calibrate it) now rather than on the first
    /// command.
    pub fn init() {
        let _ = clock();
        let _ = epoch();
    }

    /// A point in time, in ticks.
    #[inline]
    pub fn now() -> u64 {
        if clock().tsc {
            rdtsc()
        } else {
            epoch().elapsed().as_nanos() as u64
        }
    }

    /// Microseconds between two `now()` readings.
    #[inline]
    pub fn elapsed_us(start: u64, end: u64) -> u64 {
        let ticks = end.saturating_sub(start);
        ((u128::from(ticks) * u128::from(clock().us_per_tick_q32)) >> 32) as u64
    }
}

/// Close the last descriptor of a removed or replaced file on a thread
/// (`thread` names it), where freeing the file's blocks does not hold up
/// the caller: truncating a large file takes tens of milliseconds, and on
/// a filesystem mounted with `discard` each free waits for the device.
/// Where no thread can be started, the file is closed here.
pub fn close_in_background(file: File, thread: &str) {
    let _ = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || drop(file));
}

/// rename(2) `from` over `to`, leaving the freeing of the file it replaces
/// to [`close_in_background`] (held open across the rename, the replaced
/// file is freed when that descriptor closes), as Redis closes the old
/// dump in a bio job after a replica renames the one it received.
pub fn rename_replacing_in_background(from: &Path, to: &Path, thread: &str) -> std::io::Result<()> {
    let replaced = File::open(to).ok();
    std::fs::rename(from, to)?;
    if let Some(file) = replaced {
        close_in_background(file, thread);
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub fn unix_time_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_small_appends_as_extend_from_slice() {
        let src: Vec<u8> = (1..=40).collect();
        for room in [0, 3, 16, 64] {
            for n in 0..=src.len() {
                let mut a = Vec::with_capacity(room);
                a.extend_from_slice(b"ab");
                let mut b = a.clone();
                push_small(&mut a, &src[..n]);
                b.extend_from_slice(&src[..n]);
                assert_eq!(a, b, "{n} bytes with room for {room}");
            }
        }
    }

    #[test]
    fn copy_small_writes_every_byte_as_copy_from_slice() {
        let src: Vec<u8> = (1..=40).collect();
        for n in 0..=src.len() {
            let mut dst = [MaybeUninit::new(0xEEu8); 48];
            copy_small(&mut dst[4..4 + n], &src[..n]);
            // SAFETY: every byte was initialized by MaybeUninit::new, and
            // copy_small only stores initialized bytes.
            let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
            assert_eq!(&got[4..4 + n], &src[..n], "{n} bytes");
            assert!(
                got[..4].iter().chain(&got[4 + n..]).all(|&b| b == 0xEE),
                "{n} bytes: no store outside"
            );
        }
    }

    #[test]
    fn the_tick_clock_measures_microseconds() {
        use std::time::{Duration, Instant};
        cycles::init();
        let (t0, c0) = (Instant::now(), cycles::now());
        std::thread::sleep(Duration::from_millis(30));
        let (c1, real) = (cycles::now(), t0.elapsed().as_micros() as u64);
        let us = cycles::elapsed_us(c0, c1);
        // Within 2% (and a scheduling tick) of the system clock.
        assert!(
            us.abs_diff(real) <= real / 50 + 200,
            "{us} µs against {real}"
        );
        assert_eq!(cycles::elapsed_us(c1, c0), 0);
    }

    #[test]
    fn renaming_with_the_replaced_file_closed_elsewhere_is_still_a_rename() {
        let dir = std::env::temp_dir().join(format!("kvstore-rename-{}", random_hex(8)));
        std::fs::create_dir_all(&dir).unwrap();
        let (from, to) = (dir.join("new"), dir.join("cur"));
        std::fs::write(&to, b"old").unwrap();
        let reader = File::open(&to).unwrap();
        std::fs::write(&from, b"new").unwrap();
        rename_replacing_in_background(&from, &to, "test-close").unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"new");
        assert!(!from.exists());
        // The replaced file is intact for whoever still has it open.
        let mut old = String::new();
        std::io::Read::read_to_string(&mut &reader, &mut old).unwrap();
        assert_eq!(old, "old");
        // Nothing to replace: a plain rename.
        std::fs::write(&from, b"again").unwrap();
        std::fs::remove_file(&to).unwrap();
        rename_replacing_in_background(&from, &to, "test-close").unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"again");
        // A missing source is an error, and the target stays.
        assert!(rename_replacing_in_background(&from, &to, "test-close").is_err());
        assert_eq!(std::fs::read(&to).unwrap(), b"again");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn c_atoi_reads_as_glibc() {
        for (s, n) in [
            (&b"12"[..], 12),
            (b"1.5", 1),
            (b" \t\x0b+7x", 7),
            (b"-3", -3),
            (b"abc", 0),
            (b"", 0),
            (b"- 1", 0),
            (b"1\x002", 1),
            // strtol saturates at the long limits, then the int keeps the
            // low 32 bits.
            (b"9223372036854775807", -1),
            (b"99999999999999999999", -1),
            (b"-9223372036854775808", 0),
            (b"-99999999999999999999", 0),
            (b"4294967297", 1),
            (b"2147483648", i32::MIN),
        ] {
            assert_eq!(c_atoi(s), n, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn percentiles_print_like_trimmed_percent_f() {
        assert_eq!(format_percentile(50.0), "50");
        assert_eq!(format_percentile(99.9), "99.9");
        assert_eq!(format_percentile(100.0), "100");
        assert_eq!(format_percentile(0.0), "0");
        assert_eq!(format_percentile(12.3456789), "12.345679");
        assert_eq!(format_percentile(0.0000001), "0");
    }

    #[test]
    fn sha256_matches_known_digests() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // Redis's acl.tcl: the hash of "passwd4".
        assert_eq!(
            hex(&sha256(b"passwd4")),
            "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"
        );
        let long = vec![b'a'; 1_000];
        assert_eq!(
            hex(&sha256(&long)),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    #[test]
    fn sha1_matches_known_digests() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        // Redis's own example: SCRIPT LOAD "return 1".
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
        let long = vec![b'a'; 1_000_000];
        assert_eq!(sha1_hex(&long), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    }

    #[test]
    fn abusive_glob_nesting_never_matches() {
        // Redis's regression: `*?` 50,000 times against 50,000 `a`s.
        let key = vec![b'a'; 50_000];
        let pattern = b"*?".repeat(50_000);
        assert!(!glob_match(&pattern, &key, false));
        // Nesting within the limit still matches.
        let pattern = b"*?".repeat(500);
        assert!(glob_match(&pattern, &key, false));
    }

    #[test]
    fn bytes_eq_matches_slice_equality() {
        let mut rng = Rng::new(7);
        for _ in 0..100_000 {
            let r = rng.next_u64();
            let (la, lb) = ((r % 24) as usize, ((r >> 8) % 24) as usize);
            let lb = if r & (1 << 20) != 0 { la } else { lb };
            let mut a: Vec<u8> = (0..la).map(|_| (rng.next_u64() % 3) as u8).collect();
            let b: Vec<u8> = if r & (1 << 21) != 0 {
                a.clone()
            } else {
                (0..lb).map(|_| (rng.next_u64() % 3) as u8).collect()
            };
            assert_eq!(bytes_eq(&a, &b), a == b, "{a:?} {b:?}");
            if let Some(x) = a.last_mut() {
                *x ^= 1;
                assert_eq!(bytes_eq(&a, &b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn glob_patterns() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*", b"usr:1", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"*a*", b"a", false));
        assert!(!glob_match(b"a*", b"", false));
        assert!(!glob_match(b"*", b"", false));
        assert!(!glob_match(
            b"*a*a*a*a*a*a*a*a*a*a*a*b",
            &[b'a'; 200],
            false
        ));
        assert!(glob_match(b"", b"", false));
    }

    #[test]
    fn doubles_follow_get_double_from_object() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"1e-310").map(|v| v > 0.0), Some(true));
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b"1e-400"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1 "), None);
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b""), None);
    }

    #[test]
    fn long_double_matches_redis() {
        assert_eq!(ld_add(Some(b"10.50"), b"0.1").unwrap(), b"10.6");
        assert_eq!(ld_add(Some(b"5.0e3"), b"2.0e2").unwrap(), b"5200");
        assert_eq!(ld_add(None, b"3").unwrap(), b"3");
        assert_eq!(ld_add(Some(b"abc"), b"1"), Err(LongDoubleError::NotAFloat));
        assert_eq!(ld_add(Some(b"1"), b" 1"), Err(LongDoubleError::NotAFloat));
        assert_eq!(ld_add(Some(b"1"), b"inf"), Err(LongDoubleError::OutOfRange));
        assert_eq!(ld_scaled_ceil(b"0.1", 1000.0), Ok(100));
        assert_eq!(ld_scaled_ceil(b"0.0001", 1000.0), Ok(1));
        assert_eq!(ld_scaled_ceil(b"-2", 1000.0), Ok(-2000));
        assert_eq!(
            ld_scaled_ceil(b"x", 1000.0),
            Err(LongDoubleError::NotAFloat)
        );
        assert_eq!(
            ld_scaled_ceil(b"inf", 1000.0),
            Err(LongDoubleError::OutOfRange)
        );
        assert_eq!(
            ld_scaled_ceil(b"1e30", 1000.0),
            Err(LongDoubleError::OutOfRange)
        );
    }

    #[test]
    fn string2ll_is_strict() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }
}
