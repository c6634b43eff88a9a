//! Incremental request parser: RESP multibulk and inline (telnet-style) commands.
//!
//! The parser keeps its progress between reads (how many arguments of the
//! current multibulk are still missing, the length of the bulk being read), so
//! bytes are scanned once however the input is split. Arguments are recorded
//! as spans into the query buffer: handlers see slices of it, never copies.
//!
//! A bulk argument of [`PROTO_MBULK_BIG_ARG`] bytes or more that is not yet
//! complete is given a buffer of its exact size, and later reads go straight
//! into it, so a 512 MB value is neither copied nor reallocated on the way in.

use crate::util::parse_i64;
use std::io;
use std::mem::MaybeUninit;

/// Longest inline command, or header line, accepted without a newline.
pub const PROTO_INLINE_MAX_SIZE: usize = 64 * 1024;
/// Bulk arguments at least this long are read into a buffer of their own.
pub const PROTO_MBULK_BIG_ARG: usize = 32 * 1024;
/// Size of one read from a socket.
pub const PROTO_IOBUF_LEN: usize = 16 * 1024;
/// Most bytes one read takes into a big argument's buffer.
pub const PROTO_READ_MAX: usize = 256 * 1024;
/// Largest multibulk count accepted (Redis's INT_MAX).
pub const PROTO_MAX_MULTIBULK_LEN: i64 = i32::MAX as i64;
/// Before AUTH, Redis bounds requests much harder.
const UNAUTH_MAX_MULTIBULK_LEN: i64 = 10;
const UNAUTH_MAX_BULK_LEN: i64 = 16384;
/// Never preallocate more argument slots than this from an untrusted count.
const ARGV_PREALLOC_MAX: usize = 1024;

/// A malformed request. The client gets `-ERR Protocol error: …` and is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    TooBigInline,
    UnbalancedQuotes,
    TooBigMbulkCount,
    InvalidMultibulkLen,
    UnauthenticatedMultibulkLen,
    TooBigBulkCount,
    ExpectedDollar(u8),
    InvalidBulkLen,
    UnauthenticatedBulkLen,
}

impl ProtocolError {
    /// The error text Redis 7.0 sends for this condition, as bytes: an
    /// unexpected byte is echoed as it came (Redis's `%c`).
    pub fn message_bytes(&self) -> Vec<u8> {
        match self {
            ProtocolError::ExpectedDollar(c) => {
                let mut out = b"ERR Protocol error: expected '$', got '".to_vec();
                out.push(*c);
                out.push(b'\'');
                out
            }
            other => other.message().into_bytes(),
        }
    }

    /// The error text Redis 7.0 sends for this condition (for logs: a
    /// byte that is not ASCII shows as a character).
    pub fn message(&self) -> String {
        let what = match self {
            ProtocolError::TooBigInline => "too big inline request".to_string(),
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request".to_string(),
            ProtocolError::TooBigMbulkCount => "too big mbulk count string".to_string(),
            ProtocolError::InvalidMultibulkLen => "invalid multibulk length".to_string(),
            ProtocolError::UnauthenticatedMultibulkLen => {
                "unauthenticated multibulk length".to_string()
            }
            ProtocolError::TooBigBulkCount => "too big bulk count string".to_string(),
            ProtocolError::ExpectedDollar(c) => format!("expected '$', got '{}'", *c as char),
            ProtocolError::InvalidBulkLen => "invalid bulk length".to_string(),
            ProtocolError::UnauthenticatedBulkLen => "unauthenticated bulk length".to_string(),
        };
        format!("ERR Protocol error: {}", what)
    }
}

/// The longest argument taken, whatever `proto-max-bulk-len` allows: keys,
/// hash fields and set and sorted-set members are stored with a 32-bit
/// length (see `db/entry.rs`). Redis has no such bound, but needs 4 GiB
/// for one argument to meet it.
pub const ARG_LEN_MAX: usize = u32::MAX as usize;

/// Limits that apply while parsing, taken from the configuration and the
/// client's authentication state.
#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    pub max_bulk_len: i64,
    pub authenticated: bool,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_bulk_len: 512 * 1024 * 1024,
            authenticated: true,
        }
    }
}

/// Where one argument lives: in the query buffer, or in `owned`.
#[derive(Clone, Copy, Debug)]
enum Span {
    Buf { start: usize, len: usize },
    Owned(usize),
}

/// A client's query buffer together with the parser state.
#[derive(Debug, Default)]
pub struct QueryBuffer {
    buf: Vec<u8>,
    /// First byte not yet consumed by the parser.
    pos: usize,
    /// Start of the command being parsed (kept on compaction).
    cmd_start: usize,
    /// Arguments still missing from the current multibulk (0: none started).
    mbulk_left: i64,
    /// Length of the bulk being read, or -1 when its `$` header is next.
    bulk_len: i64,
    spans: Vec<Span>,
    owned: Vec<Vec<u8>>,
    /// Exact-size buffer of a big bulk argument still being read.
    big: Option<Vec<u8>>,
    ready: bool,
    /// An empty line came in (a replica's sign of life while it loads).
    empty_line: bool,
    /// A big argument was started since [`QueryBuffer::take_big_seen`].
    big_seen: bool,
}

impl QueryBuffer {
    pub fn new() -> QueryBuffer {
        QueryBuffer {
            bulk_len: -1,
            ..Default::default()
        }
    }

    /// Whether an empty line (`\n` or `\r\n`) was skipped since the last
    /// call.
    pub fn take_empty_line(&mut self) -> bool {
        std::mem::take(&mut self.empty_line)
    }

    /// Whether a big argument (one read into a buffer of its own) was
    /// started since the last call: the loop reads such a client's input
    /// straight into that buffer.
    pub fn take_big_seen(&mut self) -> bool {
        std::mem::take(&mut self.big_seen)
    }

    /// Is a big argument being read (more of it to come)?
    pub fn reading_big(&self) -> bool {
        self.big.is_some()
    }

    /// Bytes held: pending input plus any big argument being read. This is
    /// what `client-query-buffer-limit` bounds.
    pub fn len(&self) -> usize {
        self.buf.len() + self.big.as_ref().map_or(0, |b| b.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What Redis's CLIENT LIST `qbuf` shows: the whole buffer, the running
    /// command included; while a big argument is read, that argument's bytes
    /// and what came after (Redis reads it into a buffer of its own, with
    /// the headers before it trimmed off).
    pub fn shown_len(&self) -> usize {
        match &self.big {
            Some(big) => big.len() + self.buf.len() - self.pos,
            None => self.buf.len(),
        }
    }

    /// Bytes allocated for the buffer (CLIENT LIST `qbuf` and memory stats).
    pub fn capacity(&self) -> usize {
        self.buf.capacity() + self.big.as_ref().map_or(0, |b| b.capacity())
    }

    /// Give the buffer back when it holds nothing (an idle client: Redis's
    /// clientsCronResizeQueryBuffer frees it after 2 idle seconds). Returns
    /// whether anything was freed.
    pub fn release_if_empty(&mut self) -> bool {
        if self.buf.is_empty() && self.big.is_none() && self.buf.capacity() > 4 * 1024 {
            self.buf = Vec::new();
            self.pos = 0;
            self.cmd_start = 0;
            return true;
        }
        false
    }

    /// Bytes received but not yet parsed.
    pub fn unparsed(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Is there anything for the parser to look at: bytes not parsed yet,
    /// or a big argument being read (perhaps complete)?
    pub fn has_input(&self) -> bool {
        self.unparsed() > 0 || self.big.is_some()
    }

    /// The input after the last parsed command, when the parser stands
    /// between commands (for a look ahead: see [`leading_keys`]).
    pub fn ahead(&self) -> Option<&[u8]> {
        (self.mbulk_left == 0 && !self.ready && self.big.is_none()).then(|| &self.buf[self.pos..])
    }

    /// Read once into the buffer with `read` (a socket's read, given the
    /// spare memory to fill). Returns the number of bytes read (0 at end of
    /// stream) and the number of bytes that were asked for, so the caller
    /// can tell a short read (socket drained) from a full one. `read` must
    /// return how many bytes at the start of the memory it initialised.
    pub fn read_with(
        &mut self,
        read: impl FnOnce(&mut [MaybeUninit<u8>]) -> io::Result<usize>,
    ) -> io::Result<(usize, usize)> {
        let target = self.read_target();
        let spare = target.spare_capacity_mut();
        // Bounded so that reading a 500 MB argument is spread over many
        // turns of the loop instead of copying it all in one.
        let want = spare.len().min(PROTO_READ_MAX);
        let n = read(&mut spare[..want])?.min(want);
        // SAFETY: `read` initialised the first `n` bytes of the spare
        // capacity (its contract).
        unsafe { target.set_len(target.len() + n) };
        Ok((n, want))
    }

    /// Append bytes as if they had been read (used by tests and replay).
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let target = self.read_target();
            let room = target.capacity() - target.len();
            let n = room.min(data.len());
            target.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
    }

    /// The vector the next read goes into, with spare capacity: the big
    /// argument buffer (never beyond its exact size) or the query buffer.
    fn read_target(&mut self) -> &mut Vec<u8> {
        if let Some(big) = self.big.as_mut() {
            if big.len() < big.capacity() {
                return self.big.as_mut().unwrap();
            }
        }
        if self.buf.capacity() - self.buf.len() < PROTO_IOBUF_LEN {
            self.compact();
            self.buf.reserve(PROTO_IOBUF_LEN);
        }
        &mut self.buf
    }

    /// Drop consumed bytes from the front of the buffer, keeping the command
    /// being parsed (its spans are shifted along).
    pub fn compact(&mut self) {
        if self.mbulk_left == 0 && !self.ready {
            // Between commands (empty ones like `*0` included): nothing
            // before `pos` is needed any more.
            self.cmd_start = self.pos;
        }
        let keep_from = self.cmd_start;
        if keep_from == 0 {
            return;
        }
        if keep_from == self.buf.len() {
            self.buf.clear();
        } else {
            self.buf.copy_within(keep_from.., 0);
            self.buf.truncate(self.buf.len() - keep_from);
        }
        self.pos -= keep_from;
        self.cmd_start -= keep_from;
        for span in &mut self.spans {
            if let Span::Buf { start, .. } = span {
                *start -= keep_from;
            }
        }
        // An idle client should not keep a large buffer around.
        if self.buf.is_empty() && self.buf.capacity() > 4 * PROTO_IOBUF_LEN {
            self.buf = Vec::new();
        }
    }

    /// Parse until one command is complete. Returns `Ok(true)` when a command
    /// is ready (see [`argv`](Self::argv)), `Ok(false)` when more input is
    /// needed.
    pub fn parse(&mut self, limits: ParseLimits) -> Result<bool, ProtocolError> {
        if self.ready {
            return Ok(true);
        }
        loop {
            if self.mbulk_left == 0 {
                if self.pos >= self.buf.len() {
                    return Ok(false);
                }
                self.cmd_start = self.pos;
                if self.buf[self.pos] == b'*' {
                    match self.parse_multibulk_header(limits)? {
                        None => return Ok(false),
                        Some(n) if n <= 0 => continue,
                        Some(n) => {
                            self.mbulk_left = n;
                            self.bulk_len = -1;
                            self.spans.reserve((n as usize).min(ARGV_PREALLOC_MAX));
                        }
                    }
                } else {
                    match self.parse_inline()? {
                        None => return Ok(false),
                        Some(false) => continue,
                        Some(true) => {
                            self.ready = true;
                            return Ok(true);
                        }
                    }
                }
            }
            if !self.parse_bulks(limits)? {
                return Ok(false);
            }
            self.ready = true;
            return Ok(true);
        }
    }

    /// Find the `\r\n` ending a header line that starts at `pos`.
    fn header_end(&self) -> Option<usize> {
        let rest = &self.buf[self.pos..];
        let cr = rest.iter().position(|&b| b == b'\r')?;
        if cr + 1 < rest.len() {
            Some(self.pos + cr)
        } else {
            None
        }
    }

    fn parse_multibulk_header(
        &mut self,
        limits: ParseLimits,
    ) -> Result<Option<i64>, ProtocolError> {
        let Some(cr) = self.header_end() else {
            if self.buf.len() - self.pos > PROTO_INLINE_MAX_SIZE {
                return Err(ProtocolError::TooBigMbulkCount);
            }
            return Ok(None);
        };
        let n = parse_i64(&self.buf[self.pos + 1..cr]).ok_or(ProtocolError::InvalidMultibulkLen)?;
        if n > PROTO_MAX_MULTIBULK_LEN {
            return Err(ProtocolError::InvalidMultibulkLen);
        }
        if !limits.authenticated && n > UNAUTH_MAX_MULTIBULK_LEN {
            return Err(ProtocolError::UnauthenticatedMultibulkLen);
        }
        self.pos = cr + 2;
        Ok(Some(n))
    }

    /// Parse one inline line. `Some(true)`: a command is ready; `Some(false)`:
    /// the line was empty; `None`: no full line yet.
    fn parse_inline(&mut self) -> Result<Option<bool>, ProtocolError> {
        let rest = &self.buf[self.pos..];
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            if rest.len() > PROTO_INLINE_MAX_SIZE {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        // The limit holds however the line arrived: in one read with its
        // newline, or split across many.
        if nl > PROTO_INLINE_MAX_SIZE {
            return Err(ProtocolError::TooBigInline);
        }
        let mut line = &rest[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        if line.is_empty() {
            self.pos += nl + 1;
            self.empty_line = true;
            return Ok(Some(false));
        }
        let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
        self.pos += nl + 1;
        if args.is_empty() {
            return Ok(Some(false));
        }
        for arg in args {
            self.spans.push(Span::Owned(self.owned.len()));
            self.owned.push(arg);
        }
        Ok(Some(true))
    }

    /// Read the bulks of the current multibulk. Returns true when all are in.
    fn parse_bulks(&mut self, limits: ParseLimits) -> Result<bool, ProtocolError> {
        while self.mbulk_left > 0 {
            if self.bulk_len < 0 {
                if self.pos >= self.buf.len() {
                    return Ok(false);
                }
                if self.buf[self.pos] != b'$' {
                    return Err(ProtocolError::ExpectedDollar(self.buf[self.pos]));
                }
                let Some(cr) = self.header_end() else {
                    if self.buf.len() - self.pos > PROTO_INLINE_MAX_SIZE {
                        return Err(ProtocolError::TooBigBulkCount);
                    }
                    return Ok(false);
                };
                let n =
                    parse_i64(&self.buf[self.pos + 1..cr]).ok_or(ProtocolError::InvalidBulkLen)?;
                if n < 0 || n > limits.max_bulk_len || n as u64 > ARG_LEN_MAX as u64 {
                    return Err(ProtocolError::InvalidBulkLen);
                }
                if !limits.authenticated && n > UNAUTH_MAX_BULK_LEN {
                    return Err(ProtocolError::UnauthenticatedBulkLen);
                }
                self.pos = cr + 2;
                self.bulk_len = n;
                let need = n as usize + 2;
                if n as usize >= PROTO_MBULK_BIG_ARG && self.buf.len() - self.pos < need {
                    // Give this argument a buffer of its exact size and move
                    // what has already arrived of it there.
                    let mut big = Vec::with_capacity(need);
                    big.extend_from_slice(&self.buf[self.pos..]);
                    self.buf.truncate(self.pos);
                    self.big = Some(big);
                    self.big_seen = true;
                }
            }
            let need = self.bulk_len as usize + 2;
            if let Some(big) = self.big.as_mut() {
                if big.len() < need {
                    return Ok(false);
                }
                let mut big = self.big.take().unwrap();
                big.truncate(need - 2);
                self.spans.push(Span::Owned(self.owned.len()));
                self.owned.push(big);
            } else {
                if self.buf.len() - self.pos < need {
                    return Ok(false);
                }
                self.spans.push(Span::Buf {
                    start: self.pos,
                    len: need - 2,
                });
                self.pos += need;
            }
            self.bulk_len = -1;
            self.mbulk_left -= 1;
        }
        Ok(true)
    }

    /// Number of arguments of the ready command.
    pub fn argc(&self) -> usize {
        self.spans.len()
    }

    /// Fill `out` with the arguments of the ready command.
    pub fn argv<'a>(&'a self, out: &mut Vec<&'a [u8]>) {
        out.clear();
        for span in &self.spans {
            out.push(match *span {
                Span::Buf { start, len } => &self.buf[start..start + len],
                Span::Owned(i) => &self.owned[i],
            });
        }
    }

    /// Fill `out` with the arguments of the ready command, as [`argv`]
    /// does, and move the big arguments (read into buffers of their own)
    /// into `big`, so that a handler can keep one without copying it.
    ///
    /// # Safety
    /// The slices are given a lifetime they do not have. The caller must
    /// stop using them before this buffer is parsed, consumed or compacted
    /// again, and before the buffers moved into `big` are dropped or
    /// changed (moving a `Vec` does not move its heap buffer, so moving
    /// them is fine).
    pub unsafe fn argv_detached(&mut self, out: &mut Vec<&'static [u8]>, big: &mut Vec<Vec<u8>>) {
        out.clear();
        for span in &self.spans {
            let arg: &[u8] = match *span {
                Span::Buf { start, len } => &self.buf[start..start + len],
                Span::Owned(i) => &self.owned[i],
            };
            // SAFETY: see the function's contract.
            out.push(unsafe { std::slice::from_raw_parts(arg.as_ptr(), arg.len()) });
        }
        for v in &mut self.owned {
            if v.len() >= PROTO_MBULK_BIG_ARG {
                big.push(std::mem::take(v));
            }
        }
    }

    /// Forget the ready command; the next `parse` starts after it.
    pub fn consume(&mut self) {
        self.spans.clear();
        self.owned.clear();
        // A command of a hundred thousand arguments leaves no megabytes of
        // bookkeeping behind it (Redis frees its argv after each command).
        if self.spans.capacity() > ARGV_PREALLOC_MAX {
            self.spans = Vec::new();
        }
        if self.owned.capacity() > ARGV_PREALLOC_MAX {
            self.owned = Vec::new();
        }
        self.ready = false;
        self.cmd_start = self.pos;
    }
}

/// A RESP length line (`<digits>\r\n`) at `buf[i..]`: its value and where
/// what follows starts; `None` when it is not one, or not all there.
fn length_line(buf: &[u8], mut i: usize) -> Option<(usize, usize)> {
    let mut n: usize = 0;
    let start = i;
    while let Some(&c) = buf.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        n = n.checked_mul(10)?.checked_add((c - b'0') as usize)?;
        i += 1;
    }
    if i == start || buf.get(i..i + 2) != Some(b"\r\n") {
        return None;
    }
    Some((n, i + 2))
}

/// The second argument (the key, for most commands) of each complete
/// multibulk command at the start of `buf`, into `out` (at most its
/// length): the loop prefetches their buckets before running a pipeline.
/// Stops at the first command that is not a complete multibulk of two or
/// more arguments. Only a hint: nothing is checked beyond what it reads.
pub fn leading_keys<'a>(buf: &'a [u8], out: &mut [&'a [u8]]) -> usize {
    let mut i = 0;
    let mut n = 0;
    while n < out.len() && buf.get(i) == Some(&b'*') {
        let Some((argc, mut at)) = length_line(buf, i + 1) else {
            break;
        };
        if argc < 2 {
            break;
        }
        for a in 0..argc {
            if buf.get(at) != Some(&b'$') {
                return n;
            }
            let Some((len, start)) = length_line(buf, at + 1) else {
                return n;
            };
            // (A length near usize::MAX must not wrap past the check.)
            let Some(end) = start
                .checked_add(len)
                .filter(|&e| e.checked_add(2).is_some_and(|t| t <= buf.len()))
            else {
                return n;
            };
            if a == 1 {
                out[n] = &buf[start..end];
            }
            at = end + 2;
        }
        n += 1;
        i = at;
    }
    n
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Split an inline command line into arguments with Redis's `sdssplitargs`
/// rules: double quotes with C escapes (`\n`, `\xHH`, …), single quotes with
/// `\'`, and a closing quote that must be followed by a space or the end.
/// Returns `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut p = 0;
    let at = |i: usize| -> u8 { line.get(i).copied().unwrap_or(0) };
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(args);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if inq {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && hex_val(at(p + 2)).is_some()
                    && hex_val(at(p + 3)).is_some()
                {
                    cur.push(hex_val(at(p + 2))? * 16 + hex_val(at(p + 3))?);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    _ => cur.push(c),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(q: &mut QueryBuffer) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut cmds = Vec::new();
        while q.parse(ParseLimits::default())? {
            let mut v = Vec::new();
            q.argv(&mut v);
            cmds.push(v.iter().map(|a| a.to_vec()).collect());
            q.consume();
        }
        q.compact();
        Ok(cmds)
    }

    #[test]
    fn leading_keys_are_the_second_argument_of_complete_commands() {
        let buf = b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$1\r\nv\r\n\
*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$2\r\nk3\r\n";
        let mut out = [&[][..]; 8];
        // PING has no key: the look ahead stops there.
        assert_eq!(leading_keys(buf, &mut out), 2);
        assert_eq!(&out[..2], &[&b"k1"[..], &b"key"[..]]);
        // At most `out.len()`; an incomplete command ends it.
        let mut one = [&[][..]; 1];
        assert_eq!(leading_keys(buf, &mut one), 1);
        assert_eq!(leading_keys(b"*2\r\n$3\r\nGET\r\n$2\r\nk", &mut out), 0);
        assert_eq!(leading_keys(b"GET k\r\n", &mut out), 0);
        assert_eq!(
            leading_keys(b"*2\r\n$99999999999999999999999\r\n", &mut out),
            0
        );
        assert_eq!(
            leading_keys(b"*2\r\n$18446744073709551615\r\nx", &mut out),
            0
        );
        // A length that ends exactly at usize::MAX once added to where it
        // starts (27): no wrap, no slice past the buffer.
        let near_max = format!("*2\r\n$3\r\nGET\r\n${}\r\nx", usize::MAX - 27);
        assert_eq!(leading_keys(near_max.as_bytes(), &mut out), 0);
        let near_max = format!("*2\r\n$3\r\nGET\r\n${}\r\nx", usize::MAX - 28);
        assert_eq!(leading_keys(near_max.as_bytes(), &mut out), 0);
    }

    #[test]
    fn the_look_ahead_starts_between_commands_only() {
        let mut q = QueryBuffer::new();
        q.feed(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n*2\r\n$3\r\nGE");
        assert!(q.parse(ParseLimits::default()).unwrap());
        // A parsed command not yet consumed: no look ahead.
        assert!(q.ahead().is_none());
        q.consume();
        let mut out = [&[][..]; 4];
        assert_eq!(leading_keys(q.ahead().unwrap(), &mut out), 1);
        assert_eq!(out[0], b"b");
    }

    #[test]
    fn parses_multibulk_and_inline() {
        let mut q = QueryBuffer::new();
        q.feed(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset \"a b\" 'c\\'d'\r\n");
        let cmds = parse_all(&mut q).unwrap();
        assert_eq!(cmds.len(), 3);
        assert_eq!(cmds[0], vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(cmds[1], vec![b"PING".to_vec()]);
        assert_eq!(
            cmds[2],
            vec![b"set".to_vec(), b"a b".to_vec(), b"c'd".to_vec()]
        );
    }

    #[test]
    fn rejects_bad_lengths() {
        let mut q = QueryBuffer::new();
        q.feed(b"*abc\r\n");
        assert_eq!(parse_all(&mut q), Err(ProtocolError::InvalidMultibulkLen));
        let mut q = QueryBuffer::new();
        q.feed(b"*1\r\n$-5\r\n");
        assert_eq!(parse_all(&mut q), Err(ProtocolError::InvalidBulkLen));
        let mut q = QueryBuffer::new();
        q.feed(b"*1\r\nfoo\r\n");
        assert_eq!(parse_all(&mut q), Err(ProtocolError::ExpectedDollar(b'f')));
        let mut q = QueryBuffer::new();
        q.feed(b"set \"abc\n");
        assert_eq!(parse_all(&mut q), Err(ProtocolError::UnbalancedQuotes));
    }

    #[test]
    fn no_argument_is_longer_than_4_gib_whatever_the_limit_says() {
        let limits = ParseLimits {
            max_bulk_len: i64::MAX,
            authenticated: true,
        };
        let mut q = QueryBuffer::new();
        q.feed(b"*2\r\n$3\r\nGET\r\n$4294967296\r\n");
        assert_eq!(q.parse(limits), Err(ProtocolError::InvalidBulkLen));
        // One byte less is taken (and waits for its bytes).
        let mut q = QueryBuffer::new();
        q.feed(b"*2\r\n$3\r\nGET\r\n$4294967295\r\n");
        assert_eq!(q.parse(limits), Ok(false));
    }

    #[test]
    fn big_argument_gets_its_own_buffer() {
        let mut q = QueryBuffer::new();
        let val = vec![b'x'; 100_000];
        let mut msg = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", val.len()).into_bytes();
        msg.extend_from_slice(&val[..10]);
        q.feed(&msg);
        assert!(!q.take_big_seen());
        assert!(!q.parse(ParseLimits::default()).unwrap());
        assert!(q.reading_big());
        assert!(q.take_big_seen());
        assert!(!q.take_big_seen());
        let mut rest = val[10..].to_vec();
        rest.extend_from_slice(b"\r\n*1\r\n$4\r\nPING\r\n");
        q.feed(&rest);
        let cmds = parse_all(&mut q).unwrap();
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[0][2], val);
        assert_eq!(cmds[1], vec![b"PING".to_vec()]);
        assert!(!q.reading_big());
        assert!(!q.take_big_seen());
    }

    #[test]
    fn small_and_whole_arguments_are_not_big() {
        let mut q = QueryBuffer::new();
        // Below the size, or all there when its header is parsed: no
        // buffer of its own.
        let small = vec![b'x'; PROTO_MBULK_BIG_ARG - 1];
        let whole = vec![b'y'; PROTO_MBULK_BIG_ARG * 2];
        for val in [&small, &whole] {
            let mut msg = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", val.len()).into_bytes();
            msg.extend_from_slice(val);
            msg.extend_from_slice(b"\r\n");
            q.feed(&msg);
            assert_eq!(parse_all(&mut q).unwrap()[0][2], *val);
            assert!(!q.take_big_seen());
        }
    }

    #[test]
    fn inline_line_over_the_limit_is_refused_even_with_its_newline() {
        let mut q = QueryBuffer::new();
        let mut line = vec![b'a'; PROTO_INLINE_MAX_SIZE + 1];
        line.extend_from_slice(b"\r\n");
        q.feed(&line);
        assert_eq!(
            q.parse(ParseLimits::default()),
            Err(ProtocolError::TooBigInline)
        );
        let mut q = QueryBuffer::new();
        let mut line = b"SET k ".to_vec();
        line.resize(PROTO_INLINE_MAX_SIZE - 2, b'v');
        line.extend_from_slice(b"\r\n");
        q.feed(&line);
        assert_eq!(q.parse(ParseLimits::default()), Ok(true));
    }

    #[test]
    fn detached_big_arguments_keep_their_buffer() {
        let mut q = QueryBuffer::new();
        let val = vec![b'x'; PROTO_MBULK_BIG_ARG * 2];
        let mut msg = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", val.len()).into_bytes();
        msg.extend_from_slice(&val[..10]);
        q.feed(&msg);
        assert!(!q.parse(ParseLimits::default()).unwrap());
        let mut rest = val[10..].to_vec();
        rest.extend_from_slice(b"\r\n");
        q.feed(&rest);
        assert!(q.parse(ParseLimits::default()).unwrap());
        let (mut argv, mut big) = (Vec::new(), Vec::new());
        // SAFETY: argv is used only before the buffer is touched again.
        unsafe { q.argv_detached(&mut argv, &mut big) };
        assert_eq!(big.len(), 1);
        assert_eq!(argv[2].as_ptr(), big[0].as_ptr());
        assert_eq!(argv[2], &val[..]);
        assert_eq!(argv[0], b"SET");
        argv.clear();
        q.consume();
    }

    #[test]
    fn empty_commands_are_skipped_and_compacted() {
        let mut q = QueryBuffer::new();
        q.feed(b"*0\r\n\r\n*-1\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET");
        let cmds = parse_all(&mut q).unwrap();
        assert_eq!(cmds, vec![vec![b"PING".to_vec()]]);
        q.feed(b"\r\n$1\r\nk\r\n");
        let cmds = parse_all(&mut q).unwrap();
        assert_eq!(cmds, vec![vec![b"GET".to_vec(), b"k".to_vec()]]);
        assert_eq!(q.len(), 0);
    }
}
