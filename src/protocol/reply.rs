//! Reply encoding for RESP2 and RESP3.
//!
//! Handlers never build protocol bytes by hand: they call the typed methods on
//! [`Reply`], which choose the RESP2 or RESP3 form according to the protocol the
//! client negotiated with HELLO. A RESP3 map becomes a flat array in RESP2, a
//! double becomes a bulk string, and a null becomes `$-1` or `*-1` as Redis does.

use std::io::{IoSlice, Write};
use std::sync::Arc;

/// Protocol version negotiated by HELLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// An output buffer that encodes replies for one client.
///
/// Replies are bytes in `buf`, except long string values, which are held
/// by reference (`shared`: the offset in `buf` where each goes, and the
/// bytes) and written from where they live, so a 100 MB GET is never
/// copied. The bytes to send are `buf` with each shared piece spliced in
/// at its offset; [`len`](Reply::len) counts both.
/// The code INFO errorstats counts an error under (Redis's
/// afterErrorReply): the word before a space within its first 31 bytes,
/// else ERR. `msg` is the error without its leading `-`.
pub fn error_code(msg: &str) -> &str {
    let head = &msg.as_bytes()[..msg.len().min(31)];
    head.iter()
        .position(|&b| b == b' ')
        .map_or("ERR", |p| &msg[..p])
}

#[derive(Debug)]
pub struct Reply {
    pub buf: Vec<u8>,
    pub proto: Proto,
    /// Error replies written so far (INFO `total_error_replies`).
    pub errors: u64,
    /// Codes of the errors written since the dispatcher last took them
    /// (`ERR`, `WRONGTYPE`, …: INFO errorstats).
    pub error_codes: Vec<String>,
    /// Of `errors`, those already counted in the error statistics when
    /// they first happened (a script passing on its command's error).
    pub uncounted: u64,
    shared: Vec<(usize, Arc<Vec<u8>>)>,
    shared_len: usize,
    /// Where writing has got to among the shared pieces, so each write
    /// starts there instead of rescanning a reply of a million pieces.
    cursor: Cursor,
}

/// A position in a reply with shared pieces: the first piece not entirely
/// written, the offset in `buf` of the text before it, and that text's
/// position in the whole stream.
#[derive(Debug, Default, Clone, Copy)]
struct Cursor {
    piece: usize,
    at: usize,
    pos: usize,
}

/// A point in a reply to go back to (CLIENT REPLY OFF/SKIP drop what a
/// command added). Only valid while nothing after it has been written.
#[derive(Debug, Clone, Copy)]
pub struct ReplyMark {
    buf: usize,
    shared: usize,
    shared_len: usize,
}

impl Default for Reply {
    fn default() -> Self {
        Reply::new(Proto::Resp2)
    }
}

impl Reply {
    pub fn new(proto: Proto) -> Reply {
        Reply {
            buf: Vec::new(),
            proto,
            errors: 0,
            error_codes: Vec::new(),
            uncounted: 0,
            shared: Vec::new(),
            shared_len: 0,
            cursor: Cursor::default(),
        }
    }

    /// Bytes of reply held, shared pieces included.
    pub fn len(&self) -> usize {
        self.buf.len() + self.shared_len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by reference (not in `buf`).
    pub fn shared_len(&self) -> usize {
        self.shared_len
    }

    /// The memory the shared pieces cost this reply: the list of pieces,
    /// and each piece's bytes split evenly among everything holding them
    /// (the keyspace, other clients' replies, this one again), so a value
    /// queued to many clients counts once among them all and a value
    /// deleted meanwhile counts in full. Past the first pieces the rest is
    /// estimated from them, so the cost of asking stays bounded.
    pub fn shared_memory(&self) -> usize {
        const SAMPLED: usize = 128;
        let list = self.shared.capacity() * std::mem::size_of::<(usize, Arc<Vec<u8>>)>();
        let (mut share, mut seen) = (0usize, 0usize);
        for (_, data) in self.shared.iter().take(SAMPLED) {
            share += data.len() / Arc::strong_count(data);
            seen += data.len();
        }
        if self.shared.len() > SAMPLED && seen > 0 {
            share = (share as u128 * self.shared_len as u128 / seen as u128) as usize;
        }
        list + share
    }

    /// Forget every reply (all written, or the client is going away).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.shared.clear();
        self.shared_len = 0;
        self.cursor = Cursor::default();
    }

    /// All the bytes in order, as one vector (tests and in-process callers).
    pub fn take_bytes(&mut self) -> Vec<u8> {
        if self.shared.is_empty() {
            return std::mem::take(&mut self.buf);
        }
        let mut out = Vec::with_capacity(self.len());
        let mut at = 0;
        for (off, bytes) in &self.shared {
            out.extend_from_slice(&self.buf[at..*off]);
            out.extend_from_slice(bytes);
            at = *off;
        }
        out.extend_from_slice(&self.buf[at..]);
        self.clear();
        out
    }

    /// Move the write cursor past every shared piece that ends at or
    /// before stream position `from` (which only grows between clears).
    pub fn seek(&mut self, from: usize) {
        let c = &mut self.cursor;
        while let Some((off, bytes)) = self.shared.get(c.piece) {
            let piece_end = c.pos + (off - c.at) + bytes.len();
            if piece_end > from {
                break;
            }
            c.pos = piece_end;
            c.at = *off;
            c.piece += 1;
        }
    }

    /// Memory this reply holds itself from stream position `from` on (at or
    /// after the cursor): its own text, and a slot for each shared piece,
    /// but not the shared values, which live elsewhere anyway.
    pub fn owned_from(&self, from: usize) -> usize {
        const SLOT: usize = std::mem::size_of::<(usize, Arc<Vec<u8>>)>();
        let Cursor {
            mut piece,
            mut at,
            mut pos,
        } = self.cursor;
        let slots = |piece: usize| self.shared.len().saturating_sub(piece) * SLOT;
        while let Some((off, bytes)) = self.shared.get(piece) {
            let text_end = pos + (off - at);
            if from <= text_end {
                break;
            }
            let piece_end = text_end + bytes.len();
            if from < piece_end {
                // Inside this piece: all the text after it is unsent.
                return self.buf.len() - off + slots(piece);
            }
            (pos, at, piece) = (piece_end, *off, piece + 1);
        }
        let buf_at = (at + from.saturating_sub(pos)).min(self.buf.len());
        self.buf.len() - buf_at + slots(piece)
    }

    /// The bytes from stream position `from` on (at or after the cursor,
    /// see [`seek`](Reply::seek)), as at most `max` slices for one `writev`.
    pub fn io_slices<'a>(&'a self, from: usize, max: usize, out: &mut Vec<IoSlice<'a>>) {
        out.clear();
        let Cursor {
            piece,
            mut at,
            mut pos,
        } = self.cursor;
        let add = |bytes: &'a [u8], pos: &mut usize, out: &mut Vec<IoSlice<'a>>| {
            let end = *pos + bytes.len();
            if end > from && !bytes.is_empty() {
                out.push(IoSlice::new(&bytes[from.saturating_sub(*pos)..]));
            }
            *pos = end;
        };
        for (off, bytes) in &self.shared[piece.min(self.shared.len())..] {
            add(&self.buf[at..*off], &mut pos, out);
            add(bytes, &mut pos, out);
            at = *off;
            if out.len() >= max {
                out.truncate(max);
                return;
            }
        }
        add(&self.buf[at..], &mut pos, out);
        out.truncate(max);
    }

    /// A bulk string whose bytes are held by reference until written.
    pub fn bulk_shared(&mut self, data: &Arc<Vec<u8>>) {
        self.header(b'$', data.len() as i64);
        self.shared.push((self.buf.len(), Arc::clone(data)));
        self.shared_len += data.len();
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn is_resp3(&self) -> bool {
        self.proto == Proto::Resp3
    }

    fn header(&mut self, prefix: u8, n: i64) {
        self.buf.push(prefix);
        let mut tmp = itoa_buf();
        let s = fmt_i64(&mut tmp, n);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A status reply; `s` must not contain CR or LF.
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply. `msg` is the full text, e.g. `ERR syntax error` or
    /// `WRONGTYPE ...`. Newlines are replaced by spaces, as Redis does, so a
    /// message can never break the protocol.
    pub fn error(&mut self, msg: &str) {
        self.error_bytes(msg.as_bytes());
    }

    /// An error whose text holds bytes of the client's arguments as they
    /// came (Redis prints them with `%s`, whatever their encoding).
    pub fn error_bytes(&mut self, msg: &[u8]) {
        self.errors += 1;
        self.error_codes
            .push(error_code(&String::from_utf8_lossy(msg)).to_string());
        self.buf.push(b'-');
        for &b in msg {
            self.buf
                .push(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply already counted in the error statistics (Redis's
    /// ERR_REPLY_FLAG_NO_STATS_UPDATE): it still fails the command.
    pub fn error_uncounted(&mut self, msg: &str) {
        let codes = self.error_codes.len();
        self.error(msg);
        self.error_codes.truncate(codes);
        self.uncounted += 1;
    }

    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }

    pub fn bulk(&mut self, data: &[u8]) {
        let n = data.len();
        if n <= 16 {
            // A small value (most GETs): one check for room, and no
            // library calls for the header or the copy.
            self.buf.reserve(23);
            if n < 10 {
                self.buf
                    .extend_from_slice(&[b'$', b'0' + n as u8, b'\r', b'\n']);
            } else {
                self.buf
                    .extend_from_slice(&[b'$', b'1', b'0' + (n - 10) as u8, b'\r', b'\n']);
            }
            crate::util::push_small(&mut self.buf, data);
            self.buf.extend_from_slice(b"\r\n");
            return;
        }
        // A big payload gets exactly the room it needs: doubling the buffer
        // for a 100 MB value would hold 200 MB per reply.
        if data.len() >= BIG_BULK {
            self.buf.reserve_exact(data.len() + 32);
        }
        self.header(b'$', data.len() as i64);
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `n` (GET of an integer value).
    pub fn bulk_i64(&mut self, n: i64) {
        let mut tmp = itoa_buf();
        let s = fmt_i64(&mut tmp, n);
        let len = s.len();
        self.header(b'$', len as i64);
        let mut tmp2 = itoa_buf();
        self.buf.extend_from_slice(fmt_i64(&mut tmp2, n));
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Null bulk string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.is_resp3() {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// Null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        if self.is_resp3() {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// A map of `n` pairs: `%n` in RESP3, an array of 2n items in RESP2.
    pub fn map(&mut self, n: usize) {
        if self.is_resp3() {
            self.header(b'%', n as i64);
        } else {
            self.header(b'*', 2 * n as i64);
        }
    }

    /// A set of `n` items: `~n` in RESP3, an array in RESP2.
    pub fn set(&mut self, n: usize) {
        if self.is_resp3() {
            self.header(b'~', n as i64);
        } else {
            self.header(b'*', n as i64);
        }
    }

    /// Where the reply ends now.
    pub fn mark(&self) -> ReplyMark {
        ReplyMark {
            buf: self.buf.len(),
            shared: self.shared.len(),
            shared_len: self.shared_len,
        }
    }

    /// Has anything been written since `mark`?
    pub fn wrote_since(&self, mark: &ReplyMark) -> bool {
        let now = self.mark();
        (now.buf, now.shared, now.shared_len) != (mark.buf, mark.shared, mark.shared_len)
    }

    /// The text of the first error reply written since `mark` (for a log
    /// line: an error inside an aggregate is found at a line start).
    pub fn error_since(&self, mark: &ReplyMark) -> Option<String> {
        let text = self.buf.get(mark.buf..)?;
        let mut at = 0;
        while at < text.len() {
            let end = text[at..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .map_or(text.len(), |i| at + i);
            if text[at] == b'-' {
                return Some(String::from_utf8_lossy(&text[at + 1..end]).into_owned());
            }
            at = end + 2;
        }
        None
    }

    /// Drop everything added since `mark`.
    pub fn rollback(&mut self, mark: ReplyMark) {
        self.buf.truncate(mark.buf);
        self.shared.truncate(mark.shared);
        self.shared_len = mark.shared_len;
    }

    /// Bytes already encoded in this client's protocol (a pub/sub message
    /// built once for many subscribers).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes already encoded, held by reference until written (a long
    /// pub/sub message going to many subscribers).
    pub fn raw_shared(&mut self, bytes: &Arc<Vec<u8>>) {
        self.shared.push((self.buf.len(), Arc::clone(bytes)));
        self.shared_len += bytes.len();
    }

    /// A push message header (`>n` in RESP3, array in RESP2).
    pub fn push(&mut self, n: usize) {
        if self.is_resp3() {
            self.header(b'>', n as i64);
        } else {
            self.header(b'*', n as i64);
        }
    }

    /// A double: `,x` in RESP3, a bulk string in RESP2. Formatted like
    /// Redis's `%.17g` so that values round-trip exactly.
    pub fn double(&mut self, d: f64) {
        let s = format_double(d);
        if self.is_resp3() {
            self.buf.push(b',');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    /// A double in Redis's human form (addReplyHumanLongDouble: `%.17f`
    /// without trailing zeros): `,x` in RESP3, a bulk string in RESP2.
    pub fn human_double(&mut self, d: f64) {
        let s = format_human_double(d);
        if self.is_resp3() {
            self.buf.push(b',');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    pub fn boolean(&mut self, b: bool) {
        if self.is_resp3() {
            self.buf
                .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }

    /// A verbatim string (`=len\r\ntxt:...`) in RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, text: &[u8]) {
        if self.is_resp3() {
            self.header(b'=', text.len() as i64 + 4);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// A verbatim string of format `fmt` (three bytes, e.g. `txt`, `mkd`):
    /// `=len\r\nfmt:…` in RESP3, a bulk string in RESP2.
    pub fn verbatim_with(&mut self, fmt: &[u8], text: &[u8]) {
        if self.is_resp3() {
            self.header(b'=', text.len() as i64 + 4);
            let mut f = [b' '; 3];
            for (d, s) in f.iter_mut().zip(fmt) {
                *d = *s;
            }
            self.buf.extend_from_slice(&f);
            self.buf.push(b':');
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// A big number: `(digits` in RESP3, a bulk string in RESP2.
    pub fn big_number(&mut self, digits: &[u8]) {
        if self.is_resp3() {
            self.buf.push(b'(');
            self.buf.extend_from_slice(digits);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(digits);
        }
    }

    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }

    pub fn write_fmt_bulk(&mut self, args: std::fmt::Arguments) {
        let mut s = Vec::new();
        let _ = s.write_fmt(args);
        self.bulk(&s);
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;

    #[test]
    fn shared_pieces_are_spliced_in_order() {
        let mut r = Reply::new(Proto::Resp2);
        r.ok();
        let big = Arc::new(b"hello".to_vec());
        r.bulk_shared(&big);
        r.int(7);
        r.bulk_shared(&big);
        let whole = b"+OK\r\n$5\r\nhello\r\n:7\r\n$5\r\nhello\r\n".to_vec();
        assert_eq!(r.len(), whole.len());
        for from in 0..=whole.len() {
            r.seek(from);
            let mut slices = Vec::new();
            r.io_slices(from, 64, &mut slices);
            let joined: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
            assert_eq!(joined, &whole[from..], "from {from}");
            // With fewer slices allowed, a prefix of the same bytes.
            r.io_slices(from, 1, &mut slices);
            assert!(slices.len() <= 1);
            let first: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
            assert!(whole[from..].starts_with(&first));
            assert_eq!(first.is_empty(), from == whole.len());
        }
        // What the reply holds itself: text and one slot per piece, never
        // the shared values.
        let slot = std::mem::size_of::<(usize, Arc<Vec<u8>>)>();
        let mut fresh = Reply::new(Proto::Resp2);
        fresh.ok();
        fresh.bulk_shared(&big);
        fresh.int(7);
        fresh.bulk_shared(&big);
        assert_eq!(fresh.owned_from(0), whole.len() - 10 + 2 * slot);
        // Past "+OK\r\n$5\r\n", inside the first value: the text after it.
        let after_first = b"\r\n:7\r\n$5\r\n\r\n".len();
        assert_eq!(fresh.owned_from(11), after_first + 2 * slot);
        fresh.seek(11);
        assert_eq!(fresh.owned_from(11), after_first + 2 * slot);
        // Past the first value: one piece left.
        fresh.seek(14);
        assert_eq!(fresh.owned_from(14), after_first + slot);
        fresh.seek(whole.len());
        assert_eq!(fresh.owned_from(whole.len()), 0);
        assert_eq!(r.take_bytes(), whole);
        assert!(r.is_empty());
    }
}

/// Bulk replies at least this long reserve exactly their size.
const BIG_BULK: usize = 1 << 20;

/// Buffer large enough for any i64 in decimal.
pub type ItoaBuf = [u8; 20];

pub fn itoa_buf() -> ItoaBuf {
    [0u8; 20]
}

/// Format `n` in decimal into `buf`, returning the used tail of it.
pub fn fmt_i64(buf: &mut ItoaBuf, n: i64) -> &[u8] {
    let mut pos = buf.len();
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        pos -= 1;
        buf[pos] = b'-';
    }
    &buf[pos..]
}

/// Format a double the way Redis's `addReplyDouble` does (`%.17g`), with
/// `inf`, `-inf` and `nan` spelled as Redis spells them.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d.is_nan() {
        return "nan".into();
    }
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL-terminated.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            c"%.17g".as_ptr(),
            d,
        )
    };
    if n > 0 && (n as usize) < buf.len() {
        return String::from_utf8_lossy(&buf[..n as usize]).into_owned();
    }
    format_g(d, 17)
}

/// Room for `%.<prec>f` of any double with up to 17 decimals: 309
/// integer digits, a sign, the point and the decimals.
const PRINTF_F_MAX: usize = 400;

/// A double as C's `printf("%.<prec>f")` writes it (`inf`, `nan`, and every
/// integer digit of a huge value), for error texts and replies that Redis
/// formats that way.
pub fn format_printf_f(d: f64, prec: usize) -> String {
    let prec = prec.min(17);
    let mut buf = [0u8; PRINTF_F_MAX];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL-terminated; the
    // format takes an int precision and a double.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            c"%.*f".as_ptr(),
            prec as libc::c_int,
            d,
        )
    };
    if n > 0 && (n as usize) < buf.len() {
        String::from_utf8_lossy(&buf[..n as usize]).into_owned()
    } else {
        format!("{d:.prec$}")
    }
}

/// A double as Redis's ld2string(LD_STR_HUMAN) writes it: `%.17f` with
/// trailing zeros (and a trailing point) removed, `-0` as `0`, infinities
/// as `inf`/`-inf`.
pub fn format_human_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut s = format_printf_f(d, 17);
    if s.contains('.') {
        let kept = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(kept);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A double with exactly `digits` decimals, as Redis's fixedpoint_d2string
/// writes it (GEODIST and WITHDIST use four): the value times 10^digits
/// rounded half to even (`llrint`, whose out-of-range result is
/// `i64::MIN`), then the point put back in.
pub fn format_fixed_point(d: f64, digits: u32) -> String {
    let digits = digits.clamp(1, 17) as usize;
    if d == 0.0 {
        return format!("0.{}", "0".repeat(digits));
    }
    const TWO_63: f64 = 9223372036854775808.0;
    let scaled = (d * 10f64.powi(digits as i32)).round_ties_even();
    let v = if scaled.is_nan() || !(-TWO_63..TWO_63).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    let mut text = v.unsigned_abs().to_string();
    if text.len() <= digits {
        text = format!("{}{text}", "0".repeat(digits + 1 - text.len()));
    }
    text.insert(text.len() - digits, '.');
    if v < 0 {
        text.insert(0, '-');
    }
    text
}

/// `printf("%.<prec>g")`, shared by INCRBYFLOAT (`%.17Lg` then trimmed) and
/// double replies.
pub fn format_g(d: f64, prec: usize) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let exp = d.abs().log10().floor() as i32;
    // Use scientific formatting to find the exponent after rounding.
    let sci = format!("{:.*e}", prec.saturating_sub(1), d);
    let (mant, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(exp);
    if e < -4 || e >= prec as i32 {
        let mant = trim_zeros(mant);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", mant, sign, e.abs())
    } else {
        let decimals = (prec as i32 - 1 - e).max(0) as usize;
        let s = format!("{:.*}", decimals, d);
        trim_zeros(&s).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        let t = s.trim_end_matches('0');
        t.trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_strings_of_every_small_length_are_framed() {
        let data: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for n in 0..=data.len() {
            let mut r = Reply::new(Proto::Resp2);
            r.ok();
            r.bulk(&data[..n]);
            r.bulk(b"");
            let mut want = format!("+OK\r\n${n}\r\n").into_bytes();
            want.extend_from_slice(&data[..n]);
            want.extend_from_slice(b"\r\n$0\r\n\r\n");
            assert_eq!(r.buf, want, "{n} bytes");
        }
    }

    #[test]
    fn formats_doubles_like_printf_g17() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(10.5), "10.5");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_g(5.0e3, 17), "5000");
    }

    #[test]
    fn formats_human_doubles_like_redis() {
        assert_eq!(
            format_human_double(13.361389338970184),
            "13.36138933897018433"
        );
        assert_eq!(format_human_double(2.0), "2");
        assert_eq!(format_human_double(-0.0), "0");
        assert_eq!(format_human_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_printf_f(200.0, 6), "200.000000");
        assert_eq!(format_printf_f(-0.0, 6), "-0.000000");
    }

    #[test]
    fn formats_fixed_point_with_four_decimals() {
        assert_eq!(format_fixed_point(0.0, 4), "0.0000");
        assert_eq!(format_fixed_point(0.775, 4), "0.7750");
        assert_eq!(format_fixed_point(0.0005, 4), "0.0005");
        assert_eq!(format_fixed_point(166274.15156960033, 4), "166274.1516");
        assert_eq!(format_fixed_point(-1.5, 4), "-1.5000");
    }

    #[test]
    fn maps_flatten_in_resp2() {
        let mut r = Reply::new(Proto::Resp2);
        r.map(2);
        assert_eq!(r.buf, b"*4\r\n");
        let mut r = Reply::new(Proto::Resp3);
        r.map(2);
        r.null();
        assert_eq!(r.buf, b"%2\r\n_\r\n");
    }

    #[test]
    fn formats_integers() {
        let mut b = itoa_buf();
        assert_eq!(fmt_i64(&mut b, i64::MIN), b"-9223372036854775808");
        assert_eq!(fmt_i64(&mut b, 0), b"0");
    }
}
