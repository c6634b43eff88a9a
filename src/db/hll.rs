//! HyperLogLog, byte for byte as Redis 7.0 keeps it (redis/src/hyperloglog.c).
//!
//! A HyperLogLog is an ordinary string value, so what Redis writes (RDB,
//! DUMP, or a GET of the string) must read here and the reverse: the layout
//! below is Redis's, and every operation that changes it (adding, promoting
//! sparse to dense, merging) produces the bytes Redis would.
//!
//! ```text
//! +------+---+-----+----------+---------------------------------+
//! | HYLL | E | N/U | card (8) | registers: dense or sparse      |
//! +------+---+-----+----------+---------------------------------+
//! ```
//!
//! `E` is 0 (dense) or 1 (sparse); `card` is the last cardinality computed,
//! little endian, valid while the top bit of its last byte is clear (PFADD
//! sets that bit when it changes a register; PFCOUNT recomputes and stores).
//!
//! There are 16384 registers ([`HLL_REGISTERS`]), each the longest run of
//! zeros (plus one) seen in the 50 hash bits that did not pick the register.
//!
//! - **Dense**: 16384 6-bit registers packed from the least significant bit
//!   up, 12288 bytes; the string is exactly [`HLL_DENSE_SIZE`] long.
//! - **Sparse**: run-length opcodes, for HLLs with few non-zero registers.
//!   `00xxxxxx` ZERO: xxxxxx+1 zero registers (1–64); `01xxxxxx yyyyyyyy`
//!   XZERO: 14-bit length+1 zero registers (1–16384); `1vvvvvxx` VAL: xx+1
//!   registers (1–4) of value vvvvv+1 (1–32). A register that needs a value
//!   above 32, or a sparse body that would grow past `hll-sparse-max-bytes`,
//!   promotes the HLL to dense.
//!
//! Redis reads its strings with a NUL past the end (sds); an XZERO cut off
//! by the end of a corrupted string reads that NUL as its second byte. The
//! readers here do the same ([`op_at`]), so a corrupted HLL is refused, or
//! accepted, exactly where Redis refuses or accepts it, without ever reading
//! past the string.
//!
//! The cardinality is Otmar Ertl's improved estimator over the register
//! histogram ("New cardinality estimation algorithms for HyperLogLog
//! sketches", arXiv:1702.01284), computed with the same floating-point
//! operations in the same order as Redis, so counts agree exactly.

/// Bits of the hash that select a register.
pub const HLL_P: u32 = 14;
/// Bits of the hash whose run of zeros is counted.
pub const HLL_Q: usize = 64 - HLL_P as usize;
/// Number of registers.
pub const HLL_REGISTERS: usize = 1 << HLL_P;
const HLL_P_MASK: u64 = HLL_REGISTERS as u64 - 1;
/// Bits per dense register.
const HLL_BITS: usize = 6;
const HLL_REGISTER_MAX: u8 = (1 << HLL_BITS) - 1;
/// Size of the header every HLL starts with.
pub const HLL_HDR_SIZE: usize = 16;
/// Size of a dense HLL string (header and packed registers).
pub const HLL_DENSE_SIZE: usize = HLL_HDR_SIZE + (HLL_REGISTERS * HLL_BITS).div_ceil(8);
/// `hll-sparse-max-bytes` by default.
pub const SPARSE_MAX_BYTES_DEFAULT: usize = 3000;

const MAGIC: &[u8; 4] = b"HYLL";
const ENCODING_OFFSET: usize = 4;
const CARD_OFFSET: usize = 8;
/// The last byte of the cached cardinality; its top bit marks it stale.
const CARD_LAST: usize = CARD_OFFSET + 7;
const CACHE_STALE_BIT: u8 = 1 << 7;
const ENCODING_DENSE: u8 = 0;
const ENCODING_SPARSE: u8 = 1;

const SPARSE_XZERO_BIT: u8 = 0x40;
const SPARSE_VAL_BIT: u8 = 0x80;
const SPARSE_OP_MASK: u8 = 0xc0;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;

/// Redis's seed for MurmurHash64A in PFADD.
const HASH_SEED: u64 = 0xadc8_3b19;
/// 0.5 / ln(2), the estimator's constant for m → ∞.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Which representation an HLL string uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    /// The name PFDEBUG ENCODING replies with.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// Why a string cannot be used as a HyperLogLog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HllError {
    /// Not an HLL at all: too short, wrong magic or encoding, or a dense
    /// one of the wrong size (Redis: WRONGTYPE Key is not a valid
    /// HyperLogLog string value).
    NotHll,
    /// The header is an HLL's but the sparse registers do not cover exactly
    /// 16384 registers (Redis: INVALIDOBJ Corrupted HLL object detected).
    Corrupt,
}

/// Check the header of `s` as Redis's isHLLObjectOrReply does (the sparse
/// body is checked when it is read).
pub fn validate(s: &[u8]) -> Result<Encoding, HllError> {
    if s.len() < HLL_HDR_SIZE || &s[..4] != MAGIC {
        return Err(HllError::NotHll);
    }
    match s[ENCODING_OFFSET] {
        ENCODING_DENSE if s.len() == HLL_DENSE_SIZE => Ok(Encoding::Dense),
        ENCODING_SPARSE => Ok(Encoding::Sparse),
        // Above ENCODING_MAX, or dense of the wrong size.
        _ => Err(HllError::NotHll),
    }
}

/// A new, empty HLL as PFADD and PFMERGE create it: sparse, one XZERO
/// covering every register, cached cardinality 0 (valid).
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HLL_HDR_SIZE + 2 * HLL_REGISTERS.div_ceil(SPARSE_XZERO_MAX_LEN));
    s.extend_from_slice(MAGIC);
    s.push(ENCODING_SPARSE);
    s.resize(HLL_HDR_SIZE, 0);
    let mut left = HLL_REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        s.extend_from_slice(&xzero_op(run));
        left -= run;
    }
    s
}

// ---- the cached cardinality ----

/// The cached cardinality, if it is valid.
pub fn cached_cardinality(s: &[u8]) -> Option<u64> {
    let card: [u8; 8] = s.get(CARD_OFFSET..CARD_OFFSET + 8)?.try_into().ok()?;
    (card[7] & CACHE_STALE_BIT == 0).then(|| u64::from_le_bytes(card))
}

/// Store a freshly computed cardinality (as Redis does, even one whose top
/// bit is set: such a cache reads back as stale).
pub fn store_cardinality(s: &mut [u8], card: u64) {
    if let Some(c) = s.get_mut(CARD_OFFSET..CARD_OFFSET + 8) {
        c.copy_from_slice(&card.to_le_bytes());
    }
}

/// Mark the cached cardinality stale (a register changed).
pub fn invalidate_cache(s: &mut [u8]) {
    if let Some(b) = s.get_mut(CARD_LAST) {
        *b |= CACHE_STALE_BIT;
    }
}

// ---- hashing ----

/// MurmurHash64A as Redis has it (endian-neutral: 8-byte blocks read
/// little endian).
pub fn murmurhash64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element updates and the value it offers: the length of
/// the run of zeros (plus one) in the hash bits above the register index
/// (Redis's hllPatLen), 1 to 51.
pub fn pattern_len(element: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(element, HASH_SEED);
    let index = (hash & HLL_P_MASK) as usize;
    // The guard bit bounds the count at Q+1.
    let rest = (hash >> HLL_P) | (1u64 << HLL_Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---- dense registers ----

/// Dense register `i` of the packed `regs`. The last register's second
/// byte is past the array (Redis reads its string's NUL there): its bits
/// are never used, so it reads as 0.
#[inline]
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * HLL_BITS / 8;
    let fb = (i * HLL_BITS) & 7;
    let b0 = regs.get(byte).copied().unwrap_or(0) as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & HLL_REGISTER_MAX as u32) as u8
}

/// Set dense register `i` of `regs` to `val` (at most 63).
#[inline]
fn dense_set_raw(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * HLL_BITS / 8;
    let fb = (i * HLL_BITS) & 7;
    let fb8 = 8 - fb;
    let v = val as u32;
    let max = HLL_REGISTER_MAX as u32;
    if let Some(b) = regs.get_mut(byte) {
        *b &= !((max << fb) as u8);
        *b |= (v << fb) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((max >> fb8) as u8);
        *b |= (v >> fb8) as u8;
    }
}

/// Raise dense register `i` to `count` if it is lower (Redis's
/// hllDenseSet); true when it changed.
#[inline]
fn dense_set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set_raw(regs, i, count);
        true
    } else {
        false
    }
}

/// Four dense registers from the three bytes that pack them.
#[inline]
fn unpack_quad(b: &[u8]) -> [u8; 4] {
    let w = b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16;
    let m = HLL_REGISTER_MAX as u32;
    [
        (w & m) as u8,
        (w >> 6 & m) as u8,
        (w >> 12 & m) as u8,
        (w >> 18 & m) as u8,
    ]
}

// ---- sparse opcodes ----

#[inline]
fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len as u8 - 1)) | SPARSE_VAL_BIT
}

#[inline]
fn zero_op(len: usize) -> u8 {
    (len - 1) as u8
}

#[inline]
fn xzero_op(len: usize) -> [u8; 2] {
    let l = len - 1;
    [(l >> 8) as u8 | SPARSE_XZERO_BIT, (l & 0xff) as u8]
}

/// One sparse opcode, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Zero(usize),
    XZero(usize),
    /// Value, run length.
    Val(u8, usize),
}

impl Op {
    /// Registers covered.
    #[inline]
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }

    /// Bytes taken.
    #[inline]
    fn size(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }
}

/// The opcode at `p` (which must be inside `s`). An XZERO whose second
/// byte would lie past the end reads it as 0, as Redis reads its string's
/// terminating NUL.
#[inline]
fn op_at(s: &[u8], p: usize) -> Op {
    let b = s[p];
    match b & SPARSE_OP_MASK {
        0 => Op::Zero((b & 0x3f) as usize + 1),
        SPARSE_XZERO_BIT => {
            let lo = s.get(p + 1).copied().unwrap_or(0) as usize;
            Op::XZero((((b & 0x3f) as usize) << 8 | lo) + 1)
        }
        _ => Op::Val(((b >> 2) & 0x1f) + 1, (b & 0x3) as usize + 1),
    }
}

/// Walk the runs of a sparse HLL (`s` is the whole string): `f(first,
/// len, value)` for each run, in order. Fails as Redis does when a run
/// would pass the last register or the runs cover fewer than all of them;
/// `f` has then seen the runs before the bad one.
fn for_each_run(s: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
    let mut idx = 0;
    let mut p = HLL_HDR_SIZE;
    while p < s.len() {
        let op = op_at(s, p);
        let len = op.span();
        if len + idx > HLL_REGISTERS {
            return Err(HllError::Corrupt);
        }
        let value = match op {
            Op::Val(v, _) => v,
            _ => 0,
        };
        f(idx, len, value);
        idx += len;
        p += op.size();
    }
    if idx == HLL_REGISTERS {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// Convert a sparse HLL to dense in place (Redis's hllSparseToDense). The
/// header, cached cardinality included, is kept. Returns whether it
/// converted (false: already dense); a corrupt sparse body is left as it is.
pub fn to_dense(hll: &mut Vec<u8>) -> Result<bool, HllError> {
    match validate(hll)? {
        Encoding::Dense => return Ok(false),
        Encoding::Sparse => {}
    }
    let mut dense = vec![0u8; HLL_DENSE_SIZE];
    dense[..HLL_HDR_SIZE].copy_from_slice(&hll[..HLL_HDR_SIZE]);
    dense[ENCODING_OFFSET] = ENCODING_DENSE;
    let regs = &mut dense[HLL_HDR_SIZE..];
    for_each_run(hll, |first, len, value| {
        if value != 0 {
            for i in first..first + len {
                dense_set_raw(regs, i, value);
            }
        }
    })?;
    *hll = dense;
    Ok(true)
}

/// Raise register `index` of a sparse HLL to `count` if it is lower,
/// editing the opcodes in place exactly as Redis's hllSparseSet does, so
/// the bytes come out the same; promotes to dense when `count` is above 32
/// or the sparse string would grow past `sparse_max_bytes`. True when a
/// register changed.
fn sparse_set(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote_and_set(hll, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let mut end = hll.len();
    let mut p = HLL_HDR_SIZE;
    let mut first = 0usize;
    let mut prev = None;
    let mut span = 0usize;
    while p < end {
        let op = op_at(hll, p);
        span = op.span();
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += op.size();
        first += span;
    }
    if span == 0 || p >= end {
        return Err(HllError::Corrupt);
    }
    let op = op_at(hll, p);
    let next = Some(p + op.size()).filter(|&n| n < end);

    // Step 2: the cases that change the opcode where it is.
    let simple = match op {
        // A: the register already holds as much.
        Op::Val(old, _) if old >= count => return Ok(false),
        // B, C: a one-register run becomes one VAL.
        Op::Val(_, 1) | Op::Zero(1) => {
            hll[p] = val_op(count, 1);
            true
        }
        _ => false,
    };
    if !simple {
        // D: split the run into (before, VAL, after), at most 5 bytes.
        let mut seq = [0u8; 5];
        let mut n = 0;
        let last = first + span - 1;
        let push_zero = |seq: &mut [u8; 5], n: &mut usize, len: usize| {
            if len > SPARSE_ZERO_MAX_LEN {
                seq[*n..*n + 2].copy_from_slice(&xzero_op(len));
                *n += 2;
            } else {
                seq[*n] = zero_op(len);
                *n += 1;
            }
        };
        match op {
            Op::Zero(_) | Op::XZero(_) => {
                if index != first {
                    push_zero(&mut seq, &mut n, index - first);
                }
                seq[n] = val_op(count, 1);
                n += 1;
                if index != last {
                    push_zero(&mut seq, &mut n, last - index);
                }
            }
            Op::Val(cur, _) => {
                if index != first {
                    seq[n] = val_op(cur, index - first);
                    n += 1;
                }
                seq[n] = val_op(count, 1);
                n += 1;
                if index != last {
                    seq[n] = val_op(cur, last - index);
                    n += 1;
                }
            }
        }
        // Step 3: put the sequence in place of the old opcode.
        let delta = n as isize - op.size() as isize;
        if delta > 0 && end + delta as usize > sparse_max_bytes {
            return promote_and_set(hll, index, count);
        }
        let new_end = (end as isize + delta) as usize;
        if delta > 0 {
            hll.resize(new_end, 0);
        }
        if let Some(next) = next {
            hll.copy_within(next..end, (next as isize + delta) as usize);
        }
        // An XZERO cut off by the end (its second byte was the NUL) loses
        // the sequence's last byte, as in Redis.
        for (k, &b) in seq[..n].iter().enumerate() {
            if p + k < new_end {
                hll[p + k] = b;
            }
        }
        hll.truncate(new_end);
        end = new_end;
    }

    // Step 4: merge adjacent VALs of the same value, scanning up to five
    // opcodes from the one before the change.
    let mut p = prev.unwrap_or(HLL_HDR_SIZE);
    let mut scan = 5;
    while p < end && scan > 0 {
        scan -= 1;
        let b = hll[p];
        if b & SPARSE_OP_MASK == SPARSE_XZERO_BIT {
            p += 2;
            continue;
        }
        if b & SPARSE_OP_MASK == 0 {
            p += 1;
            continue;
        }
        if p + 1 < end && hll[p + 1] & SPARSE_VAL_BIT != 0 {
            if let (Op::Val(v1, l1), Op::Val(v2, l2)) = (op_at(hll, p), op_at(hll, p + 1)) {
                if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                    hll[p + 1] = val_op(v1, l1 + l2);
                    hll.remove(p);
                    end -= 1;
                    // Try the merged run with the one after it.
                    continue;
                }
            }
        }
        p += 1;
    }
    invalidate_cache(hll);
    Ok(true)
}

/// Promote a sparse HLL to dense and set the register there.
fn promote_and_set(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    to_dense(hll)?;
    Ok(dense_set(&mut hll[HLL_HDR_SIZE..], index, count))
}

/// Raise register `index` to `count` if it is lower, in either encoding
/// (a sparse HLL may be promoted). True when a register changed; the
/// cached cardinality is marked stale by a sparse change only, as in Redis
/// (PFADD and PFMERGE mark it themselves).
pub fn set_register(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    match validate(hll)? {
        Encoding::Dense => Ok(dense_set(&mut hll[HLL_HDR_SIZE..], index, count)),
        Encoding::Sparse => sparse_set(hll, index, count, sparse_max_bytes),
    }
}

/// Add an element (Redis's hllAdd). True when a register changed; a
/// sparse HLL whose opcodes do not reach the element's register is
/// `Corrupt`.
pub fn add(hll: &mut Vec<u8>, element: &[u8], sparse_max_bytes: usize) -> Result<bool, HllError> {
    let (index, count) = pattern_len(element);
    set_register(hll, index, count, sparse_max_bytes)
}

// ---- counting ----

/// Register histogram: how many registers hold each value.
type Histogram = [u32; 64];

/// Four partial histograms summed at the end: consecutive registers
/// mostly hold the same few values, and counting them into one table
/// would wait on the previous increment of the same counter.
struct Histo4([[u32; 64]; 4]);

impl Histo4 {
    fn new() -> Self {
        Histo4([[0; 64]; 4])
    }

    #[inline]
    fn add4(&mut self, r: [u8; 4]) {
        for (t, v) in self.0.iter_mut().zip(r) {
            t[(v & 63) as usize] += 1;
        }
    }

    fn sum(&self) -> Histogram {
        let mut h = [0u32; 64];
        for t in &self.0 {
            for (a, b) in h.iter_mut().zip(t) {
                *a += b;
            }
        }
        h
    }
}

fn dense_histogram(regs: &[u8]) -> Histogram {
    let mut h = Histo4::new();
    for b in regs.chunks_exact(3) {
        h.add4(unpack_quad(b));
    }
    h.sum()
}

fn sparse_histogram(hll: &[u8]) -> Result<Histogram, HllError> {
    let mut h = [0u32; 64];
    for_each_run(hll, |_, len, value| h[value as usize] += len as u32)?;
    Ok(h)
}

/// Redis's hllSigma (Ertl).
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

/// Redis's hllTau (Ertl). Redis's `pow(1 - x, 2)` is compiled as a
/// multiplication, as here.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// C's llroundl on x86-64: half away from zero; a value out of range
/// (infinity, NaN) gives LLONG_MIN, as the x87 conversion does.
fn llround(x: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    let r = x.round();
    if r.is_nan() || !(-LIMIT..LIMIT).contains(&r) {
        i64::MIN
    } else {
        r as i64
    }
}

/// The estimate from a register histogram (the end of Redis's hllCount).
fn estimate(h: &Histogram) -> u64 {
    let m = HLL_REGISTERS as f64;
    let mut z = m * tau((m - h[HLL_Q + 1] as f64) / m);
    for j in (1..=HLL_Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    llround(ALPHA_INF * m * m / z) as u64
}

/// The estimated cardinality of one HLL (not its cache). Like Redis's,
/// it can be any 64-bit pattern for a crafted HLL.
pub fn count(hll: &[u8]) -> Result<u64, HllError> {
    let h = match validate(hll)? {
        Encoding::Dense => dense_histogram(&hll[HLL_HDR_SIZE..]),
        Encoding::Sparse => sparse_histogram(hll)?,
    };
    Ok(estimate(&h))
}

/// One byte per register: the union of HLLs being merged (PFCOUNT of
/// several keys, PFMERGE), Redis's HLL_RAW registers.
pub struct Registers(pub [u8; HLL_REGISTERS]);

impl Default for Registers {
    fn default() -> Self {
        Registers([0; HLL_REGISTERS])
    }
}

impl Registers {
    /// Take each register's maximum with `hll`'s (Redis's hllMerge).
    pub fn merge(&mut self, hll: &[u8]) -> Result<(), HllError> {
        match validate(hll)? {
            Encoding::Dense => {
                let regs = &hll[HLL_HDR_SIZE..];
                for (b, m) in regs.chunks_exact(3).zip(self.0.chunks_exact_mut(4)) {
                    for (m, v) in m.iter_mut().zip(unpack_quad(b)) {
                        *m = (*m).max(v);
                    }
                }
                Ok(())
            }
            Encoding::Sparse => {
                let max = &mut self.0;
                for_each_run(hll, |first, len, value| {
                    if value != 0 {
                        for m in &mut max[first..first + len] {
                            *m = (*m).max(value);
                        }
                    }
                })
            }
        }
    }

    /// Raise `hll`'s registers to these (PFMERGE's write into its
    /// destination): register by register in order, so a sparse one comes
    /// out, or is promoted, exactly as in Redis. The cache is not touched.
    pub fn write_into(&self, hll: &mut Vec<u8>, sparse_max_bytes: usize) -> Result<(), HllError> {
        if validate(hll)? == Encoding::Dense {
            let regs = &mut hll[HLL_HDR_SIZE..];
            for (i, &v) in self.0.iter().enumerate() {
                dense_set(regs, i, v);
            }
            return Ok(());
        }
        for (i, &v) in self.0.iter().enumerate() {
            if v != 0 {
                set_register(hll, i, v, sparse_max_bytes)?;
            }
        }
        Ok(())
    }

    /// The estimated cardinality of the union.
    pub fn count(&self) -> u64 {
        let mut h = Histo4::new();
        for word in self.0.chunks_exact(8) {
            if u64::from_ne_bytes(word.try_into().unwrap_or([1; 8])) == 0 {
                h.0[0][0] += 8;
            } else {
                h.add4([word[0], word[1], word[2], word[3]]);
                h.add4([word[4], word[5], word[6], word[7]]);
            }
        }
        estimate(&h.sum())
    }
}

// ---- debugging ----

/// Every register of a dense HLL, in order (PFDEBUG GETREG).
pub fn dense_registers(hll: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let regs = hll.get(HLL_HDR_SIZE..).unwrap_or(&[]);
    (0..HLL_REGISTERS).map(move |i| dense_get(regs, i))
}

/// The opcodes of a sparse HLL as PFDEBUG DECODE shows them: `z:N`
/// (ZERO), `Z:N` (XZERO), `v:VALUE,N`, space-separated, read without
/// checking that they make sense.
pub fn decode_sparse(hll: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut p = HLL_HDR_SIZE;
    while p < hll.len() {
        let op = op_at(hll, p);
        let _ = match op {
            Op::Zero(n) => write!(out, "z:{n} "),
            Op::XZero(n) => write!(out, "Z:{n} "),
            Op::Val(v, n) => write!(out, "v:{v},{n} "),
        };
        p += op.size();
    }
    out.truncate(out.trim_end_matches(' ').len());
    out
}

/// Elements PFSELFTEST adds to check the estimate.
const SELF_TEST_ELEMENTS: u64 = 10_000_000;
/// Rounds of random register writes PFSELFTEST checks.
const SELF_TEST_CYCLES: usize = 1000;

/// A small xorshift generator for the self-test's random values.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Redis's PFSELFTEST: random values written to every dense register read
/// back unchanged, without disturbing their neighbours; then 10 million
/// distinct elements go into a dense and a sparse HLL together, which must
/// agree, stay sparse while small, and estimate each power of ten within
/// six standard errors. The error is Redis's TESTFAILED message.
pub fn self_test(sparse_max_bytes: usize, seed: u64) -> Result<(), String> {
    self_test_with(sparse_max_bytes, seed, SELF_TEST_ELEMENTS)
}

fn self_test_with(sparse_max_bytes: usize, seed: u64, elements: u64) -> Result<(), String> {
    let mut rng = XorShift(seed | 1);
    let mut dense = vec![0u8; HLL_DENSE_SIZE];
    dense[..4].copy_from_slice(MAGIC);
    let mut expected = [0u8; HLL_REGISTERS];
    for _ in 0..SELF_TEST_CYCLES {
        let regs = &mut dense[HLL_HDR_SIZE..];
        for (i, e) in expected.iter_mut().enumerate() {
            let r = (rng.next() & HLL_REGISTER_MAX as u64) as u8;
            *e = r;
            dense_set_raw(regs, i, r);
        }
        for (i, &e) in expected.iter().enumerate() {
            let got = dense_get(regs, i);
            if got != e {
                return Err(format!(
                    "TESTFAILED Register {i} should be {e} but is {got}"
                ));
            }
        }
    }

    dense[HLL_HDR_SIZE..].fill(0);
    let mut sparse = new_sparse();
    let relerr = 1.04 / (HLL_REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = rng.next();
    for j in 1..=elements {
        let ele = (j ^ seed).to_le_bytes();
        let (index, count) = pattern_len(&ele);
        dense_set(&mut dense[HLL_HDR_SIZE..], index, count);
        let _ = set_register(&mut sparse, index, count, sparse_max_bytes);
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max_bytes / 2 && validate(&sparse) != Ok(Encoding::Sparse) {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = count_or_zero(&dense);
        if card != count_or_zero(&sparse) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - card as i64).unsigned_abs();
        let mut maxerr = (relerr * 6.0 * checkpoint as f64).ceil() as u64;
        // Collisions make a large error likely enough at 10 elements.
        if j == 10 {
            maxerr = 1;
        }
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

fn count_or_zero(hll: &[u8]) -> u64 {
    count(hll).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = SPARSE_MAX_BYTES_DEFAULT;

    fn header(encoding: u8) -> Vec<u8> {
        let mut s = MAGIC.to_vec();
        s.push(encoding);
        s.resize(HLL_HDR_SIZE, 0);
        s
    }

    fn sparse_with(body: &[u8]) -> Vec<u8> {
        let mut s = header(ENCODING_SPARSE);
        s.extend_from_slice(body);
        s
    }

    fn all_registers(hll: &[u8]) -> Vec<u8> {
        let mut r = Registers::default();
        r.merge(hll).unwrap();
        r.0.to_vec()
    }

    fn filled(n: usize) -> Vec<u8> {
        let mut h = new_sparse();
        for i in 0..n {
            add(&mut h, format!("element:{i}").as_bytes(), MAX).unwrap();
        }
        h
    }

    #[test]
    fn murmurhash64a_matches_reference_values() {
        // Redis's C function, compiled and run with seed 0xadc83b19.
        assert_eq!(murmurhash64a(b"", HASH_SEED), 0xd8dfea6585bc9732);
        assert_eq!(murmurhash64a(b"a", HASH_SEED), 0x53d2470a9b43b1a7);
        assert_eq!(
            murmurhash64a(b"hello world!", HASH_SEED),
            0x0fc444011f57220c
        );
        assert_eq!(
            murmurhash64a(b"0123456789abcdefXYZ", HASH_SEED),
            0x0301094724c4601e
        );
        // 0x...b1a7: register 0x31a7, then bits 0x53d2470a9b43b1a7 >> 14,
        // whose lowest set bit is bit 1.
        assert_eq!(pattern_len(b"a"), (0x31a7, 2));
    }

    #[test]
    fn new_hll_is_one_xzero_with_a_valid_zero_cache() {
        let h = new_sparse();
        assert_eq!(h.len(), 18);
        assert_eq!(&h[16..], &[0x7f, 0xff]);
        assert_eq!(cached_cardinality(&h), Some(0));
        assert_eq!(count(&h), Ok(0));
        assert_eq!(decode_sparse(&h), "Z:16384");
    }

    #[test]
    fn sparse_set_splits_runs_as_redis_does() {
        let mut h = new_sparse();
        assert_eq!(set_register(&mut h, 1000, 2, MAX), Ok(true));
        assert_eq!(set_register(&mut h, 1020, 3, MAX), Ok(true));
        assert_eq!(set_register(&mut h, 1021, 3, MAX), Ok(true));
        assert_eq!(decode_sparse(&h), "Z:1000 v:2,1 z:19 v:3,2 Z:15362");
        assert_eq!(set_register(&mut h, 1021, 2, MAX), Ok(false));
        assert_eq!(cached_cardinality(&h), None);
    }

    #[test]
    fn sparse_and_dense_agree_on_registers_and_count() {
        for n in [0, 1, 10, 100, 500, 1000] {
            let sparse = filled(n);
            assert_eq!(validate(&sparse), Ok(Encoding::Sparse));
            let mut dense = sparse.clone();
            assert_eq!(to_dense(&mut dense), Ok(true));
            assert_eq!(dense.len(), HLL_DENSE_SIZE);
            assert_eq!(all_registers(&sparse), all_registers(&dense));
            assert_eq!(
                dense_registers(&dense).collect::<Vec<_>>(),
                all_registers(&sparse)
            );
            assert_eq!(count(&sparse), count(&dense));
            let est = count(&dense).unwrap() as f64;
            assert!(
                (est - n as f64).abs() <= n as f64 * 0.05 + 1.0,
                "{n}: {est}"
            );
        }
    }

    #[test]
    fn sparse_is_promoted_past_the_size_limit() {
        let mut h = new_sparse();
        let mut i = 0;
        while validate(&h) == Ok(Encoding::Sparse) {
            assert!(h.len() <= MAX);
            add(&mut h, format!("e{i}").as_bytes(), MAX).unwrap();
            i += 1;
        }
        assert_eq!(h.len(), HLL_DENSE_SIZE);
        assert!(i > 500, "promoted after {i}");
    }

    #[test]
    fn a_value_above_32_promotes_to_dense() {
        let mut h = new_sparse();
        assert_eq!(set_register(&mut h, 7, 33, MAX), Ok(true));
        assert_eq!(validate(&h), Ok(Encoding::Dense));
        assert_eq!(dense_registers(&h).nth(7), Some(33));
    }

    #[test]
    fn dense_registers_round_trip_without_touching_neighbours() {
        let mut regs = vec![0u8; HLL_DENSE_SIZE - HLL_HDR_SIZE];
        for i in 0..HLL_REGISTERS {
            dense_set_raw(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..HLL_REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8);
        }
    }

    #[test]
    fn headers_that_are_not_hll_are_refused() {
        assert_eq!(validate(b""), Err(HllError::NotHll));
        assert_eq!(validate(b"HYLL"), Err(HllError::NotHll));
        assert_eq!(validate(&new_sparse()[..15]), Err(HllError::NotHll));
        let mut h = new_sparse();
        h[0] = b'X';
        assert_eq!(validate(&h), Err(HllError::NotHll));
        let mut h = new_sparse();
        h[4] = 2;
        assert_eq!(validate(&h), Err(HllError::NotHll));
        let mut h = new_sparse();
        h[4] = ENCODING_DENSE;
        assert_eq!(validate(&h), Err(HllError::NotHll));
        assert_eq!(count(&h), Err(HllError::NotHll));
    }

    #[test]
    fn sparse_bodies_not_covering_every_register_are_corrupt() {
        // Too few registers, too many, and runs past the end.
        for body in [
            &[0x7f, 0xfe][..],
            &[0x7f, 0xff, 0x00][..],
            &[0x7f, 0xff, 0xff][..],
            &[][..],
            &[0x7f][..],
        ] {
            let h = sparse_with(body);
            assert_eq!(count(&h), Err(HllError::Corrupt), "{body:?}");
            assert!(Registers::default().merge(&h).is_err());
            let mut d = h.clone();
            assert_eq!(to_dense(&mut d), Err(HllError::Corrupt));
            assert_eq!(d, h, "a failed conversion changes nothing");
        }
    }

    #[test]
    fn huge_runs_of_opcodes_do_not_overflow() {
        let mut body = Vec::new();
        for _ in 0..131_072 + 1000 {
            body.extend_from_slice(&xzero_op(SPARSE_XZERO_MAX_LEN));
        }
        body.push(0xff);
        let h = sparse_with(&body);
        assert_eq!(count(&h), Err(HllError::Corrupt));
        let mut d = h.clone();
        assert_eq!(to_dense(&mut d), Err(HllError::Corrupt));
    }

    #[test]
    fn truncated_xzero_reads_a_zero_byte_like_redis() {
        // XZERO whose low byte is missing: (0x3f << 8 | 0) + 1 = 16129.
        let h = sparse_with(&[0x7f]);
        assert_eq!(decode_sparse(&h), "Z:16129");
        // 255 zeros then a truncated XZERO covering the other 16129.
        let h = sparse_with(&[0x40, 0xfe, 0x7f]);
        assert_eq!(count(&h), Ok(0));
        let mut h2 = h.clone();
        assert_eq!(set_register(&mut h2, 300, 1, MAX), Ok(true));
        let mut d = h.clone();
        assert_eq!(to_dense(&mut d), Ok(true));
    }

    #[test]
    fn setting_a_register_no_opcode_covers_is_corrupt() {
        let mut h = sparse_with(&[0x00]);
        assert_eq!(set_register(&mut h, 5, 1, MAX), Err(HllError::Corrupt));
        let mut h = header(ENCODING_SPARSE);
        assert_eq!(set_register(&mut h, 0, 1, MAX), Err(HllError::Corrupt));
    }

    #[test]
    fn promoting_a_corrupt_sparse_hll_fails() {
        // Covers register 0 only, so the promotion (value 40) sees it short.
        let mut h = sparse_with(&[0x00]);
        assert_eq!(set_register(&mut h, 0, 40, MAX), Err(HllError::Corrupt));
    }

    #[test]
    fn random_corruption_never_panics() {
        let mut rng = XorShift(0x1234_5678);
        let base = filled(300);
        for _ in 0..3000 {
            let mut h = base.clone();
            for _ in 0..(rng.next() % 5 + 1) {
                let pos = (rng.next() as usize) % h.len();
                h[pos] = rng.next() as u8;
            }
            if rng.next().is_multiple_of(4) {
                let cut = (rng.next() as usize) % h.len();
                h.truncate(cut);
            }
            let _ = count(&h);
            let _ = decode_sparse(&h);
            let _ = Registers::default().merge(&h);
            let mut d = h.clone();
            let _ = to_dense(&mut d);
            let mut a = h.clone();
            for i in 0..20 {
                if add(&mut a, format!("x{i}").as_bytes(), MAX).is_err() {
                    break;
                }
            }
        }
    }

    #[test]
    fn cache_reads_back_and_its_top_bit_marks_it_stale() {
        let mut h = new_sparse();
        store_cardinality(&mut h, 12345);
        assert_eq!(cached_cardinality(&h), Some(12345));
        invalidate_cache(&mut h);
        assert_eq!(cached_cardinality(&h), None);
        assert_eq!(cached_cardinality(b"HYLL"), None);
    }

    #[test]
    fn estimate_of_saturated_registers_is_out_of_range_as_in_redis() {
        // All registers at 51: the estimator divides by zero, and Redis's
        // llroundl gives LLONG_MIN.
        let mut h = header(ENCODING_DENSE);
        h.resize(HLL_DENSE_SIZE, 0);
        for i in 0..HLL_REGISTERS {
            dense_set_raw(&mut h[HLL_HDR_SIZE..], i, 51);
        }
        assert_eq!(count(&h), Ok(1u64 << 63));
    }

    #[test]
    fn union_counts_like_a_merged_hll() {
        let a = filled(2000);
        let mut b = new_sparse();
        for i in 1000..4000 {
            add(&mut b, format!("element:{i}").as_bytes(), MAX).unwrap();
        }
        let mut r = Registers::default();
        r.merge(&a).unwrap();
        r.merge(&b).unwrap();
        let mut merged = new_sparse();
        to_dense(&mut merged).unwrap();
        for (i, &v) in r.0.iter().enumerate() {
            set_register(&mut merged, i, v, MAX).unwrap();
        }
        assert_eq!(r.count(), count(&merged).unwrap());
        let est = r.count() as f64;
        assert!((est - 4000.0).abs() < 200.0, "{est}");
    }

    #[test]
    fn self_test_passes() {
        // Redis's 10 million elements take long in a debug build.
        assert_eq!(self_test_with(MAX, 42, 100_000), Ok(()));
        assert_eq!(self_test_with(0, 7, 1000), Ok(()));
    }
}
