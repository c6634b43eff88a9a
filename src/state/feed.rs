//! The propagation feed: what the AOF and replicas receive.
//!
//! As in Redis 7.0, a command does not write its effects out directly. Each
//! effect (the command's own argv, possibly rewritten — `SET … PXAT` for a
//! relative expiry, `DEL` for a lazily expired key found on the way) is added
//! to the *execution unit* in progress (`also_propagate`). When the unit ends
//! (the top-level command, or the whole EXEC, returns), its ops move to the
//! iteration's stream, wrapped in `MULTI`/`EXEC` when there is more than one
//! op so that a consumer applies them atomically. Each op is RESP-encoded
//! once, here; consumers copy bytes.
//!
//! The stream carries no `SELECT`s: every segment is tagged with its
//! database, and each consumer (the AOF, the replica stream) keeps its own
//! [`FeedCursor`] and gets `SELECT n` only when the database changes for it
//! (a fresh replica and a rewritten AOF start from different selections).
//!
//! Nothing is encoded while no consumer is attached: `active()` is false and
//! callers skip building rewritten argv at all.

use std::mem::MaybeUninit;

use crate::protocol::reply::{fmt_i64, itoa_buf};

/// Who an op goes to (Redis's PROPAGATE_AOF / PROPAGATE_REPL): a script's
/// `redis.set_repl` may send its writes to one of them only.
pub const TO_AOF: u8 = 1;
pub const TO_REPLICAS: u8 = 2;
pub const TO_ALL: u8 = TO_AOF | TO_REPLICAS;

/// One consumer's position in the database space of the stream.
#[derive(Debug, Default, Clone)]
pub struct FeedCursor {
    /// The database the consumer's stream has selected; `None` before the
    /// first `SELECT` (so the first segment always gets one).
    pub selected_db: Option<usize>,
}

impl FeedCursor {
    /// Append the iteration's stream meant for a consumer of kind `to`
    /// (`TO_AOF`, `TO_REPLICAS`) to `out`, with a `SELECT` before every
    /// segment whose database differs from the one this consumer has.
    pub fn append(&mut self, feed: &Feed, to: u8, out: &mut Vec<u8>) {
        self.for_each_piece(feed, to, |piece| out.extend_from_slice(piece));
    }

    /// The same bytes as [`append`](FeedCursor::append), handed to `put` a
    /// piece at a time (a `SELECT`, a run of the stream), for a consumer
    /// that stores them elsewhere than in one buffer (the replication
    /// backlog's blocks) and so need not gather them first.
    pub fn for_each_piece(&mut self, feed: &Feed, to: u8, mut put: impl FnMut(&[u8])) {
        let mut start = 0;
        let mut select = Vec::new();
        for &(db, end, target) in feed.complete_segments() {
            if target & to == 0 {
                start = end;
                continue;
            }
            if self.selected_db != Some(db) {
                select.clear();
                encode_select(db, &mut select);
                put(&select);
                self.selected_db = Some(db);
            }
            put(&feed.stream[start..end]);
            start = end;
        }
    }
}

/// An in-process consumer (tests, tools): the bytes it was fed.
#[derive(Debug, Default)]
pub struct FeedTap {
    pub cursor: FeedCursor,
    pub bytes: Vec<u8>,
}

/// The most the stream and its segment list keep between turns (the AOF
/// buffer too, once written: it trades buffers with the stream).
pub(super) const FEED_KEEP_BYTES: usize = 64 << 10;
const FEED_KEEP_SEGMENTS: usize = 1024;

/// Give an emptied byte buffer of a big turn (the stream, the AOF buffer,
/// an io_uring batch) back to the allocator; `shrink_to` would keep its
/// first 64 KB. Memory that no client or buffer explains confuses
/// `maxmemory` accounting (Redis's "slave buffer are counted correctly"),
/// and Redis's flushAppendOnlyFile frees its written aof_buf likewise.
pub(super) fn release_if_big(buf: &mut Vec<u8>) {
    debug_assert!(buf.is_empty());
    if buf.capacity() > FEED_KEEP_BYTES {
        *buf = Vec::new();
    }
}

/// The feed of one loop iteration.
#[derive(Debug, Default)]
pub struct Feed {
    /// Consumers attached (AOF, replicas, taps).
    consumers: usize,
    /// Nothing is fed while positive (replaying the AOF into memory must
    /// not append it to itself).
    suspended: u32,
    /// How many of `segments` belong to complete units; the ones after
    /// them are the ops of the unit in progress, encoded straight into the
    /// stream's tail (and wrapped in place when it ends with several; see
    /// [`Feed::unit_start`]).
    complete: usize,
    /// Where ops added now go (`TO_ALL` but inside a script that said
    /// otherwise with `redis.set_repl`).
    target: u8,
    /// Depth of nested execution: EXEC runs its commands inside one unit.
    nesting: u32,
    /// The unit in progress is not wrapped in MULTI/EXEC however many ops
    /// it has (SCAN and RANDOMKEY run directly: their lazy-expiry DELs are
    /// independent, as Redis's CMD_TOUCHES_ARBITRARY_KEYS).
    unwrapped: bool,
    /// Complete units, ready for consumers, then the unit in progress.
    stream: Vec<u8>,
    /// (database, end offset in `stream`, targets) of each segment of the
    /// complete units, then of each op of the unit in progress.
    segments: Vec<(usize, usize, u8)>,
    /// In-process consumers.
    pub taps: Vec<FeedTap>,
}

impl Feed {
    /// Does anyone consume the feed?
    #[inline]
    pub fn active(&self) -> bool {
        self.consumers > 0 && self.suspended == 0
    }

    /// Stop feeding until `resume`.
    pub fn suspend(&mut self) {
        self.suspended += 1;
    }

    pub fn resume(&mut self) {
        self.suspended = self.suspended.saturating_sub(1);
    }

    /// A consumer starts reading the feed (the AOF is turned on, a replica
    /// attaches).
    pub fn attach(&mut self) {
        self.consumers += 1;
    }

    /// A consumer stops reading the feed.
    pub fn detach(&mut self) {
        self.consumers = self.consumers.saturating_sub(1);
    }

    /// Attach an in-process tap; its bytes accumulate in `taps[i].bytes`
    /// each time the stream is [flushed](Feed::flush_taps).
    pub fn add_tap(&mut self) -> usize {
        self.attach();
        self.taps.push(FeedTap::default());
        self.taps.len() - 1
    }

    /// An execution unit starts (a command from a client, a whole EXEC,
    /// one active-expiry deletion).
    #[inline]
    pub fn begin_unit(&mut self) {
        self.nesting += 1;
    }

    /// The unit in progress (begun at the outermost level) is never wrapped.
    pub fn unwrap_unit(&mut self) {
        if self.nesting == 1 {
            self.unwrapped = true;
        }
    }

    /// The unit ends: at the outermost level its ops become a segment of
    /// the stream (wrapped in MULTI/EXEC when there are several).
    #[inline]
    pub fn end_unit(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
        if self.nesting == 0 {
            if self.unit_in_progress() {
                self.commit_unit();
            }
            // A SCAN that deleted nothing leaves no unwrapped unit behind
            // for the next EXEC.
            self.unwrapped = false;
        }
    }

    /// Add one op to the unit in progress (Redis's `alsoPropagate`). Outside
    /// any unit (cron work) it is a unit of its own.
    pub fn also_propagate(&mut self, db: usize, argv: &[&[u8]]) {
        if !self.active() {
            return;
        }
        encode_command(argv, &mut self.stream);
        self.segments
            .push((db, self.stream.len(), self.target_now()));
        if self.nesting == 0 {
            self.commit_unit();
        }
    }

    /// Send the ops added from now on to `to` only (`TO_ALL` restores).
    pub fn set_target(&mut self, to: u8) {
        self.target = if to == TO_ALL { 0 } else { to };
    }

    /// Send the ops added from now on only where they went and to `to`;
    /// returns the target to [restore](Feed::restore_target) after, or
    /// `None` (nothing changed) when nowhere is left.
    pub fn narrow_target(&mut self, to: u8) -> Option<u8> {
        let narrowed = self.target_now() & to;
        if narrowed == 0 {
            return None;
        }
        let before = self.target;
        self.target = narrowed;
        Some(before)
    }

    pub fn restore_target(&mut self, before: u8) {
        self.target = before;
    }

    /// Where an op added now goes (0 stands for all, the default).
    fn target_now(&self) -> u8 {
        if self.target == 0 {
            TO_ALL
        } else {
            self.target
        }
    }

    fn commit_unit(&mut self) {
        let unwrapped = std::mem::take(&mut self.unwrapped);
        let first = self.complete;
        // One op (nearly every unit), or independent ops: a segment each,
        // where they already are. (They used to wait in a list of their
        // own and be copied over here; reading back the entry just pushed
        // stalled each write on a store the CPU could not forward: about
        // 5 ns of 0.47 µs a request, SET at P=16 under `everysec`.)
        if self.segments.len() - first > 1 && !unwrapped {
            // MULTI takes the first op's database (its SELECT comes before
            // the MULTI) and EXEC the last one's, as Redis does, so no
            // SELECT is inserted between the last op and EXEC. MULTI and
            // EXEC go to everyone, as Redis's.
            const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
            const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";
            let start = self.unit_start();
            self.stream.splice(start..start, MULTI.iter().copied());
            for op in &mut self.segments[first..] {
                op.1 += MULTI.len();
            }
            let first_db = self.segments[first].0;
            self.segments
                .insert(first, (first_db, start + MULTI.len(), TO_ALL));
            self.stream.extend_from_slice(EXEC);
            let last_db = self.segments[self.segments.len() - 1].0;
            self.segments.push((last_db, self.stream.len(), TO_ALL));
        }
        self.complete = self.segments.len();
    }

    /// Has the unit in progress added ops?
    fn unit_in_progress(&self) -> bool {
        self.segments.len() > self.complete
    }

    /// The segments of the complete units.
    fn complete_segments(&self) -> &[(usize, usize, u8)] {
        &self.segments[..self.complete]
    }

    /// Where the unit in progress starts in `stream`: where the segments of
    /// the complete units end.
    fn unit_start(&self) -> usize {
        self.complete_segments().last().map_or(0, |s| s.1)
    }

    /// Is there anything for consumers?
    pub fn has_pending(&self) -> bool {
        self.complete > 0
    }

    /// The whole stream, when it is exactly what a consumer of kind `to`
    /// whose cursor is `cursor` would append: no unit in progress, every
    /// segment meant for it and in the database it has selected (so no
    /// `SELECT` goes between). The caller may then take the bytes with
    /// [`swap_stream`](Feed::swap_stream) once every other consumer has
    /// copied them, instead of copying them too.
    pub fn whole_stream_for(&self, to: u8, cursor: &FeedCursor) -> Option<usize> {
        if self.unit_in_progress() || self.complete == 0 {
            return None;
        }
        let db = cursor.selected_db?;
        self.segments
            .iter()
            .all(|&(d, _, target)| d == db && target & to != 0)
            .then_some(self.stream.len())
    }

    /// Exchange the stream's bytes with `buf`'s (an empty buffer whose
    /// capacity the stream keeps). Only after [`whole_stream_for`]
    /// (Feed::whole_stream_for) and before [`clear`](Feed::clear).
    pub fn swap_stream(&mut self, buf: &mut Vec<u8>) {
        debug_assert!(buf.is_empty() && !self.unit_in_progress());
        std::mem::swap(&mut self.stream, buf);
    }

    /// Give the stream to the in-process taps.
    pub fn flush_taps(&mut self) {
        let mut taps = std::mem::take(&mut self.taps);
        for tap in &mut taps {
            tap.cursor.append(self, TO_ALL, &mut tap.bytes);
        }
        self.taps = taps;
    }

    /// Forget the iteration's stream once every consumer has its copy. A
    /// unit still in progress (the feed is flushed inside EXEC by WAIT, by
    /// BGREWRITEAOF) keeps its ops, moved to the front.
    pub fn clear(&mut self) {
        let done = self.unit_start();
        self.segments.drain(..self.complete);
        self.complete = 0;
        if !self.segments.is_empty() {
            self.stream.drain(..done);
            for op in &mut self.segments {
                op.1 -= done;
            }
            return;
        }
        self.stream.clear();
        release_if_big(&mut self.stream);
        if self.segments.capacity() > FEED_KEEP_SEGMENTS {
            self.segments = Vec::new();
        }
    }
}

/// RESP array of bulk strings.
pub fn encode_command(argv: &[&[u8]], out: &mut Vec<u8>) {
    let mut total = 3 + decimal_len(argv.len());
    for a in argv {
        total += 5 + decimal_len(a.len()) + a.len();
    }
    // Every write command propagates through here: with the exact size
    // known, the bytes are placed in the spare capacity rather than
    // appended piece by piece, and the lengths are formatted on the stack
    // (allocating a string for each was most of the AOF's CPU under
    // `everysec`). A big value is copied once, never zeroed first.
    out.reserve(total);
    let spare = &mut out.spare_capacity_mut()[..total];
    let mut at = put_header(spare, 0, b'*', argv.len());
    for a in argv {
        at = put_header(spare, at, b'$', a.len());
        crate::util::copy_small(&mut spare[at..at + a.len()], a);
        at += a.len();
        spare[at].write(b'\r');
        spare[at + 1].write(b'\n');
        at += 2;
    }
    assert_eq!(at, total);
    // SAFETY: the `total` bytes after the length were all written above
    // (every position from 0 to `at`, which is `total`).
    unsafe { out.set_len(out.len() + total) };
}

/// Digits of `n` in decimal.
#[inline(always)]
fn decimal_len(n: usize) -> usize {
    match n {
        0..=9 => 1,
        10..=99 => 2,
        100..=999 => 3,
        _ => n.ilog10() as usize + 1,
    }
}

/// `tag`, `n` in decimal and CRLF at `at`; returns where they end. The
/// digits are placed where they go rather than formatted with
/// `reply::fmt_i64` and copied: measured, that copy made an encoding twice
/// as slow (32 ns a `SET` against 15).
#[inline(always)]
fn put_header(buf: &mut [MaybeUninit<u8>], at: usize, tag: u8, n: usize) -> usize {
    let digits = decimal_len(n);
    buf[at].write(tag);
    let mut v = n;
    for i in (at + 1..at + 1 + digits).rev() {
        buf[i].write(b'0' + (v % 10) as u8);
        v /= 10;
    }
    let end = at + 1 + digits;
    buf[end].write(b'\r');
    buf[end + 1].write(b'\n');
    end + 2
}

fn encode_select(db: usize, out: &mut Vec<u8>) {
    let mut digits = itoa_buf();
    let n = fmt_i64(&mut digits, db as i64);
    encode_command(&[b"SELECT", n], out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A feed with one consumer.
    fn attached() -> Feed {
        let mut f = Feed::default();
        f.attach();
        f
    }

    /// One unit of one op.
    fn unit_of(f: &mut Feed, db: usize, argv: &[&[u8]]) {
        f.begin_unit();
        f.also_propagate(db, argv);
        f.end_unit();
    }

    fn fed(feed: &Feed, cursor: &mut FeedCursor) -> Vec<u8> {
        let mut out = Vec::new();
        cursor.append(feed, TO_ALL, &mut out);
        out
    }

    #[test]
    fn commands_encode_as_resp_arrays_with_exact_lengths() {
        let long = vec![b'x'; 12_345];
        let mut out = b"prefix".to_vec();
        encode_command(&[b"SET", b"", &long], &mut out);
        let mut want = b"prefix*3\r\n$3\r\nSET\r\n$0\r\n\r\n$12345\r\n".to_vec();
        want.extend_from_slice(&long);
        want.extend_from_slice(b"\r\n");
        assert_eq!(out, want);
        let twelve: Vec<&[u8]> = vec![b"a"; 12];
        out.clear();
        encode_command(&twelve, &mut out);
        assert!(out.starts_with(b"*12\r\n$1\r\na\r\n"));
        assert_eq!(out.len(), 5 + 12 * 7);
        for n in (0..=1001).chain([4090, 5000, 12_345]) {
            let arg = vec![b'y'; n];
            out.clear();
            encode_command(&[b"SET", &arg], &mut out);
            let mut want = format!("*2\r\n$3\r\nSET\r\n${n}\r\n").into_bytes();
            want.extend_from_slice(&arg);
            want.extend_from_slice(b"\r\n");
            assert_eq!(out, want, "an argument of {n} bytes");
        }
        for count in [1, 9, 10, 11, 99, 100, 101] {
            let argv: Vec<&[u8]> = vec![b"z"; count];
            out.clear();
            encode_command(&argv, &mut out);
            let mut want = format!("*{count}\r\n").into_bytes();
            for _ in 0..count {
                want.extend_from_slice(b"$1\r\nz\r\n");
            }
            assert_eq!(out, want, "{count} arguments");
        }
        out.clear();
        encode_select(15, &mut out);
        assert_eq!(out, b"*2\r\n$6\r\nSELECT\r\n$2\r\n15\r\n");
    }

    #[test]
    fn the_whole_stream_is_handed_over_only_where_a_copy_would_equal_it() {
        let db0 = FeedCursor {
            selected_db: Some(0),
        };
        let mut f = attached();
        for argv in [&[&b"SET"[..], b"k", b"v"][..], &[b"DEL", b"k"]] {
            f.begin_unit();
            f.also_propagate(0, argv);
            f.end_unit();
        }
        let copy = fed(&f, &mut db0.clone());
        assert_eq!(f.whole_stream_for(TO_AOF, &db0), Some(copy.len()));
        // A consumer that needs a SELECT first gets a copy.
        assert_eq!(f.whole_stream_for(TO_AOF, &FeedCursor::default()), None);
        let db1 = FeedCursor {
            selected_db: Some(1),
        };
        assert_eq!(f.whole_stream_for(TO_AOF, &db1), None);
        let mut buf = Vec::with_capacity(100);
        f.swap_stream(&mut buf);
        assert_eq!(buf, copy);
        f.clear();
        assert!(!f.has_pending());
        // The feed goes on with the buffer it got back.
        f.begin_unit();
        f.also_propagate(0, &[b"INCR", b"n"]);
        f.end_unit();
        assert_eq!(
            fed(&f, &mut db0.clone()),
            b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"
        );
        // An op in another database needs a SELECT in the middle.
        f.begin_unit();
        f.also_propagate(3, &[b"DEL", b"x"]);
        f.end_unit();
        assert_eq!(f.whole_stream_for(TO_AOF, &db0), None);
        f.clear();
        // An op for the replicas only (a script's `redis.set_repl`).
        f.begin_unit();
        let before = f.narrow_target(TO_REPLICAS);
        f.also_propagate(0, &[b"SET", b"r", b"1"]);
        if let Some(before) = before {
            f.restore_target(before);
        }
        f.end_unit();
        assert_eq!(f.whole_stream_for(TO_AOF, &db0), None);
        assert!(f.whole_stream_for(TO_REPLICAS, &db0).is_some());
        f.clear();
        // A unit still in progress (WAIT inside EXEC) stays in the feed.
        f.begin_unit();
        f.also_propagate(0, &[b"SET", b"a", b"1"]);
        f.end_unit();
        f.begin_unit();
        f.also_propagate(0, &[b"INCR", b"a"]);
        assert_eq!(f.whole_stream_for(TO_AOF, &db0), None);
        // Nothing to hand over.
        let mut empty = attached();
        assert_eq!(empty.whole_stream_for(TO_AOF, &db0), None);
        empty.clear();
    }

    #[test]
    fn nothing_is_encoded_without_consumers() {
        let mut f = Feed::default();
        f.begin_unit();
        f.also_propagate(0, &[b"SET", b"k", b"v"]);
        f.end_unit();
        assert!(!f.has_pending());
    }

    #[test]
    fn single_op_units_are_not_wrapped_and_select_is_per_consumer() {
        let mut f = attached();
        unit_of(&mut f, 0, &[b"SET", b"k", b"v"]);
        unit_of(&mut f, 3, &[b"DEL", b"k"]);
        let mut a = FeedCursor::default();
        assert_eq!(
            fed(&f, &mut a),
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
        );
        let mut b = FeedCursor {
            selected_db: Some(3),
        };
        let out = fed(&f, &mut b);
        assert!(out.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3"));
        assert_eq!(b.selected_db, Some(3));
    }

    #[test]
    fn pieces_are_the_appended_bytes_cut_where_a_select_goes() {
        let mut f = attached();
        unit_of(&mut f, 0, &[b"SET", b"a", b"1"]);
        unit_of(&mut f, 0, &[b"SET", b"b", b"2"]);
        // A script's write meant for the AOF only: not a replica's piece.
        let before = f.narrow_target(TO_AOF).expect("the AOF is a target");
        unit_of(&mut f, 0, &[b"SET", b"aof", b"only"]);
        f.restore_target(before);
        unit_of(&mut f, 2, &[b"DEL", b"c"]);
        for to in [TO_REPLICAS, TO_AOF] {
            let mut gathered = Vec::new();
            FeedCursor::default().append(&f, to, &mut gathered);
            let mut pieces: Vec<Vec<u8>> = Vec::new();
            let mut cursor = FeedCursor::default();
            cursor.for_each_piece(&f, to, |p| pieces.push(p.to_vec()));
            assert_eq!(pieces.concat(), gathered);
            assert_eq!(cursor.selected_db, Some(2));
            let selects = pieces
                .iter()
                .filter(|p| p.starts_with(b"*2\r\n$6\r\nSELECT"))
                .count();
            assert_eq!(selects, 2);
            let aof_only = gathered.windows(4).any(|w| w == b"only");
            assert_eq!(aof_only, to == TO_AOF);
        }
    }

    #[test]
    fn a_flush_inside_a_unit_keeps_its_ops_for_the_next_one() {
        let mut f = attached();
        f.also_propagate(0, &[b"SET", b"a", b"1"]);
        f.begin_unit();
        f.also_propagate(0, &[b"INCR", b"a"]);
        // WAIT inside EXEC flushes what is complete.
        let mut c = FeedCursor::default();
        assert_eq!(
            fed(&f, &mut c),
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
        f.clear();
        assert!(!f.has_pending());
        f.also_propagate(0, &[b"INCR", b"b"]);
        f.end_unit();
        assert_eq!(
            fed(&f, &mut c),
            b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*2\r\n$4\r\nINCR\r\n$1\r\nb\r\n*1\r\n$4\r\nEXEC\r\n"
        );
        f.clear();
        // A single op after a wrapped unit, in another database.
        f.begin_unit();
        f.also_propagate(2, &[b"DEL", b"x"]);
        f.end_unit();
        assert_eq!(
            fed(&f, &mut c),
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*2\r\n$3\r\nDEL\r\n$1\r\nx\r\n"
        );
    }

    #[test]
    fn an_unwrapped_unit_without_ops_leaves_the_next_unit_wrapped() {
        let mut f = attached();
        f.begin_unit();
        f.unwrap_unit();
        f.end_unit();
        f.begin_unit();
        f.also_propagate(0, &[b"DEL", b"k"]);
        f.also_propagate(0, &[b"INCR", b"k"]);
        f.end_unit();
        let mut c = FeedCursor {
            selected_db: Some(0),
        };
        assert!(fed(&f, &mut c).starts_with(b"*1\r\n$5\r\nMULTI\r\n"));
    }

    #[test]
    fn a_unit_wrapped_after_a_complete_one_is_wrapped_where_it_starts() {
        let mut f = attached();
        f.also_propagate(0, &[b"SET", b"a", b"1"]);
        f.begin_unit();
        f.also_propagate(3, &[b"DEL", b"k"]);
        f.set_target(TO_REPLICAS);
        f.also_propagate(4, &[b"INCR", b"k"]);
        f.set_target(TO_ALL);
        // Only the complete unit is there for consumers while this one runs.
        let mut c = FeedCursor::default();
        let mut out = Vec::new();
        c.append(&f, TO_AOF, &mut out);
        assert_eq!(
            out,
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
        );
        assert_eq!(
            f.whole_stream_for(TO_AOF, &c),
            None,
            "a unit is in progress"
        );
        f.end_unit();
        out.clear();
        let mut c = FeedCursor::default();
        c.append(&f, TO_AOF, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n4\r\n*1\r\n$4\r\nEXEC\r\n"
        );
        let mut out = Vec::new();
        FeedCursor::default().append(&f, TO_REPLICAS, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n4\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n*1\r\n$4\r\nEXEC\r\n"
        );
        f.clear();
        assert!(!f.has_pending());
    }

    #[test]
    fn a_unit_of_several_ops_is_wrapped_in_multi_exec() {
        let mut f = attached();
        f.begin_unit();
        f.also_propagate(1, &[b"DEL", b"k"]);
        f.begin_unit();
        f.also_propagate(1, &[b"INCR", b"k"]);
        f.end_unit();
        assert!(!f.has_pending(), "nested units commit with the outer one");
        f.end_unit();
        let mut c = FeedCursor {
            selected_db: Some(1),
        };
        assert_eq!(
            fed(&f, &mut c),
            b"*1\r\n$5\r\nMULTI\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n*1\r\n$4\r\nEXEC\r\n"
        );
        f.clear();
        assert!(!f.has_pending());
    }
}
