//! Replication, master side (Redis's replication.c): PSYNC and SYNC, the
//! backlog, full synchronisation from a snapshot, the command stream.
//!
//! All replicas receive one stream: the propagation feed's units, with the
//! `SELECT`s of one shared cursor, so that a byte offset means the same
//! thing to every replica and to the backlog. `offset` counts every byte
//! ever added (Redis's master_repl_offset); the backlog keeps the last
//! `repl-backlog-size` of them, so a replica that reconnects with PSYNC
//! and an offset still inside it continues from there (+CONTINUE) instead
//! of starting over.
//!
//! A full synchronisation is disk-based: a forked child writes the dump
//! (with the replication id and offset in its aux fields, as Redis does),
//! and the replicas that asked meanwhile get `+FULLRESYNC <id> <offset>`
//! at once. The stream from that offset on is kept per replica while the
//! child works and while the file is sent; the file goes out with sendfile
//! as the replica's socket drains (the loop's write path), and then the
//! kept stream (`bulk_sent`), after which the replica is online and gets
//! the stream as it is produced. A replica that can read the file over RDMA
//! is offered it instead (`rdma_sync.rs`), with this path as the fallback. Replicas that ask while some other child runs
//! wait for the next snapshot.

use std::collections::VecDeque;
use std::io::Read;
use std::time::Instant;

use tracing::{info, warn};

use super::client::ClientKind;
use super::feed::FeedCursor;
use super::{ClientState, Server};
use crate::util::random_hex;

/// How much of the dump is queued to a replica's output at a time.
const BULK_CHUNK: usize = 1 << 20;

/// What a replica link is doing (Redis's SLAVE_STATE_*).
#[derive(Debug)]
pub enum ReplicaPhase {
    /// Waits for a snapshot to be started for it.
    WaitBgsaveStart,
    /// Its snapshot is being written; the stream since is kept.
    WaitBgsaveEnd,
    /// The dump is being sent: `remaining` bytes of `file` to go.
    SendBulk { file: std::fs::File, remaining: u64 },
    /// A diskless transfer: the child's bytes are passed on as they come.
    Streaming,
    /// The whole diskless transfer is out; the stream starts with its
    /// first REPLCONF ACK (it cannot tell bytes after the end mark apart).
    WaitFirstAck,
    /// The dump is offered over RDMA; the replica reads it (its
    /// `REPLCONF rdma-*` messages drive the transfer).
    RdmaTransfer(Box<super::rdma_sync::RdmaServe>),
    /// Synchronised: receives the stream as it is produced.
    Online,
}

/// The master's view of one replica (kept in its `ClientState`).
#[derive(Debug)]
pub struct ReplicaLink {
    pub phase: ReplicaPhase,
    /// REPLCONF listening-port / ip-address.
    pub listening_port: u16,
    pub announced_ip: Option<String>,
    /// REPLCONF capa psync2 (understands `+CONTINUE <new id>`).
    pub capa_psync2: bool,
    /// REPLCONF capa eof (takes a diskless `$EOF:` transfer).
    pub capa_eof: bool,
    /// REPLCONF capa rdma (can read its dump over RDMA).
    pub capa_rdma: bool,
    /// Came with SYNC: gets the payload without +FULLRESYNC.
    pub old_sync: bool,
    /// The offset its snapshot was taken at.
    pub initial_offset: i64,
    /// Its last REPLCONF ACK: offset and when.
    pub ack_offset: i64,
    pub ack_time: Instant,
    /// Its place in the shared stream, from its snapshot's offset (or the
    /// PSYNC offset) on; none while it waits for a snapshot to start, and
    /// for an `rdb-only` replica. Sent once it is online.
    pub stream: Option<StreamRef>,
    /// REPLCONF rdb-only 1: the dump only, then the link is closed.
    pub rdb_only: bool,
    /// REPLCONF rdb-filter-only: what its dump leaves out.
    pub filter: RdbFilter,
    /// It acknowledged before this side saw the end of the diskless
    /// transfer (it had read the end mark first): online at that end.
    pub acked_early: bool,
    /// During a diskless transfer: its output still to send when last
    /// looked at, and since when that has not changed (it reads nothing).
    pub stalled_at: usize,
    pub stalled_since: Instant,
    /// Its diskless transfer's child still runs: a failure of that child
    /// drops it, even once every byte is out (Redis keeps such a replica
    /// in WAIT_BGSAVE_END until its child ends); a later child's does not.
    pub child_running: bool,
}

impl Default for ReplicaLink {
    /// A link as REPLCONF first configures it, before PSYNC.
    fn default() -> ReplicaLink {
        ReplicaLink {
            phase: ReplicaPhase::WaitBgsaveStart,
            listening_port: 0,
            announced_ip: None,
            capa_psync2: false,
            capa_eof: false,
            capa_rdma: false,
            old_sync: false,
            initial_offset: 0,
            ack_offset: 0,
            ack_time: Instant::now(),
            stream: None,
            rdb_only: false,
            filter: RdbFilter::default(),
            acked_early: false,
            stalled_at: 0,
            stalled_since: Instant::now(),
            child_running: false,
        }
    }
}

/// What a replica's dump leaves out (REPLCONF rdb-filter-only, Redis's
/// SLAVE_REQ_RDB_EXCLUDE_*): replicas share a snapshot only when they ask
/// for the same. A filtered dump is sent diskless, never written as the
/// server's dump file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RdbFilter {
    pub exclude_data: bool,
    pub exclude_functions: bool,
}

impl RdbFilter {
    pub fn any(&self) -> bool {
        self.exclude_data || self.exclude_functions
    }
}

impl ReplicaLink {
    pub fn state_name(&self) -> &'static str {
        match self.phase {
            // As Redis: a diskless transfer is the child's work (the
            // replica waits for the BGSAVE to end), and once it ended the
            // replica is online, its stream held until its first ACK.
            ReplicaPhase::WaitBgsaveStart
            | ReplicaPhase::WaitBgsaveEnd
            | ReplicaPhase::Streaming => "wait_bgsave",
            ReplicaPhase::SendBulk { .. } | ReplicaPhase::RdmaTransfer(_) => "send_bulk",
            ReplicaPhase::Online | ReplicaPhase::WaitFirstAck => "online",
        }
    }
}

/// Bytes of a block at least (Redis's PROTO_REPLY_CHUNK_BYTES).
pub const BLOCK_BYTES: usize = 16 * 1024;
/// What a block costs beside its bytes (Redis counts its list node and
/// block header in `mem_total_replication_buffers`).
pub const BLOCK_OVERHEAD: usize = 64;
/// Blocks trimmed at most per call (Redis's
/// REPL_BACKLOG_TRIM_BLOCKS_PER_CALL): freeing what a slow replica held
/// goes on over the next calls and cron ticks instead of stalling one.
pub const TRIM_BLOCKS_PER_CALL: usize = 64;

/// The replication buffer that the backlog and every replica share (Redis
/// 7's replication buffer blocks): the stream in blocks, from the oldest
/// byte that a replica has still to be sent or the backlog must keep, to
/// the newest. Replicas hold a position in it instead of a copy, so two
/// replicas cost what one does, and the backlog keeps at least the last
/// `repl-backlog-size` bytes, more while a replica still needs them (and a
/// replica that reconnects may continue from any of them).
#[derive(Debug)]
pub struct Backlog {
    blocks: VecDeque<Block>,
    /// The stream offset just before the first byte held (the first byte
    /// is Redis's repl_backlog_first_byte_offset, `start + 1`).
    start: i64,
    /// Bytes held (Redis's repl_backlog_histlen).
    pub histlen: usize,
    /// Memory the blocks take (Redis's repl_buffer_mem).
    pub mem: usize,
}

/// A block of the stream: `data.len()` bytes after offset `start`, room
/// for `data.capacity()`; only the last block is ever appended to.
#[derive(Debug)]
struct Block {
    start: i64,
    data: Vec<u8>,
}

impl Block {
    fn end(&self) -> i64 {
        self.start + self.data.len() as i64
    }

    fn memory(&self) -> usize {
        self.data.capacity() + BLOCK_OVERHEAD
    }
}

impl Backlog {
    /// An empty backlog whose next byte follows offset `end`.
    pub fn new(end: i64) -> Backlog {
        Backlog {
            blocks: VecDeque::new(),
            start: end,
            histlen: 0,
            mem: 0,
        }
    }

    /// The offset of the last byte held.
    pub fn end(&self) -> i64 {
        self.start + self.histlen as i64
    }

    /// Add bytes at the end. A new block takes at least 16 KB and at most
    /// a sixteenth of the backlog's `size` (unless that is under 16 KB), so
    /// that a big write does not make a block no one can free while a
    /// replica needs its last bytes. True when a block was added.
    fn append(&mut self, mut bytes: &[u8], size: usize) -> bool {
        let mut added = false;
        if let Some(tail) = self.blocks.back_mut() {
            let room = tail.data.capacity() - tail.data.len();
            let n = room.min(bytes.len());
            tail.data.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            self.histlen += n;
        }
        while !bytes.is_empty() {
            let largest = (size / 16).max(BLOCK_BYTES);
            let want = bytes.len().max(BLOCK_BYTES).min(largest);
            // The allocation's whole size class is room to fill.
            let mut data = Vec::with_capacity(crate::memory::allocation_size(want));
            let n = data.capacity().min(bytes.len());
            data.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            let block = Block {
                start: self.end(),
                data,
            };
            self.mem += block.memory();
            self.histlen += n;
            self.blocks.push_back(block);
            added = true;
        }
        added
    }

    /// Free blocks from the front (at most `max_blocks`) while the backlog
    /// holds more than `size` without them and no replica still needs
    /// them: `keep_from` is the lowest offset a replica has been sent up
    /// to. The last block always stays (Redis's
    /// incrementalTrimReplicationBacklog).
    pub fn trim(&mut self, size: usize, keep_from: i64, max_blocks: usize) {
        let mut trimmed = 0;
        while self.histlen > size && trimmed < max_blocks && self.blocks.len() > 1 {
            let first = &self.blocks[0];
            if keep_from < first.end() || self.histlen - first.data.len() <= size {
                break;
            }
            self.histlen -= first.data.len();
            self.mem -= first.memory();
            self.start = first.end();
            self.blocks.pop_front();
            trimmed += 1;
        }
    }

    /// Is the stream after offset `pos` still all here?
    pub fn holds_from(&self, pos: i64) -> bool {
        (self.start..=self.end()).contains(&pos)
    }

    /// Up to `max` slices of the stream after offset `pos`, in order, of
    /// `bytes` at most (none when `pos` is the end or no longer held).
    pub fn slices_from(&self, pos: i64, max: usize, mut bytes: usize) -> Vec<std::io::IoSlice<'_>> {
        let mut out = Vec::new();
        if !self.holds_from(pos) {
            return out;
        }
        let first = self.blocks.partition_point(|b| b.end() <= pos);
        for b in self.blocks.iter().skip(first).take(max) {
            let from = (pos - b.start).max(0) as usize;
            let to = b.data.len().min(from.saturating_add(bytes));
            if from < to {
                out.push(std::io::IoSlice::new(&b.data[from..to]));
                bytes -= to - from;
            }
            if bytes == 0 {
                break;
            }
        }
        out
    }

    /// A copy of the stream after offset `pos` (tests).
    #[cfg(test)]
    fn copy_from(&self, pos: i64) -> Vec<u8> {
        self.slices_from(pos, usize::MAX, usize::MAX)
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect()
    }
}

/// A replica's place in the shared stream: it has been sent everything up
/// to offset `sent`, and the stream it knows of ends at `end` (what it is
/// behind counts as its output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamRef {
    pub sent: i64,
    pub end: i64,
}

impl StreamRef {
    pub fn behind(&self) -> usize {
        (self.end - self.sent).max(0) as usize
    }
}

/// The server's replication state.
#[derive(Debug)]
pub struct Replication {
    /// The previous replication id and the offset up to which it is valid
    /// (after a promotion); all zeros / -1 when none.
    pub replid2: String,
    pub second_offset: i64,
    /// Bytes ever added to the stream (master_repl_offset).
    pub offset: i64,
    pub backlog: Option<Backlog>,
    /// The stream's database selection, shared by all replicas.
    pub cursor: FeedCursor,
    /// Replica client ids, in the order they attached.
    pub replicas: Vec<u64>,
    /// Since when there is no replica (for `repl-backlog-ttl`).
    pub no_replicas_since: Option<Instant>,
    /// The running snapshot child was started for replicas.
    pub rdb_for_replicas: bool,
    /// A dump file was written for replicas while `rdb-del-sync-files` was
    /// on (Redis's RDBGeneratedByReplication): removed once no replica
    /// needs it, if the server has no persistence.
    pub rdb_generated_for_sync: bool,
    /// Cron ticks, for the ping period.
    pub cron_seconds: u64,
    /// The feed is attached for the backlog (on a master; a replica's
    /// backlog gets its master's stream instead).
    pub feeds_backlog: bool,
    /// Clients whose writes are in this turn's stream (their WAIT offset
    /// moves to its end).
    pub writers: Vec<u64>,
    /// Clients blocked in WAIT.
    pub waiting: Vec<u64>,
    /// Ask the replicas for an ACK before the loop sleeps.
    pub want_acks: bool,
    /// An ACK came in: WAITs are looked at once the replica that sent it
    /// is back in the client table (it counts only from there).
    pub acks_arrived: bool,
    /// The running snapshot streams to replicas through this pipe.
    pub rdb_pipe: Option<std::fs::File>,
    /// Counts the pipes made, so the loop registers a new one even when it
    /// reuses the old one's fd number.
    pub rdb_pipe_generation: u64,
    /// The RDMA device opened at start, if any (full syncs over RDMA).
    pub rdma: Option<crate::rdma::DeviceHandle>,
    pub rdma_stats: crate::rdma::RdmaStats,
    /// The stream goes to replicas no further than the AOF has made
    /// durable what it carries (as replies wait): each entry is a stream
    /// offset and the AOF offset it waits for.
    pub stream_holds: VecDeque<(i64, u64)>,
    /// With holds pending: the stream may go out up to here.
    pub stream_released: i64,
    /// A replica moved on in the stream or went away this turn: the
    /// buffer's front may be freed before the loop sleeps.
    pub trim_wanted: bool,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            backlog: None,
            cursor: FeedCursor::default(),
            replicas: Vec::new(),
            no_replicas_since: Some(Instant::now()),
            rdb_for_replicas: false,
            rdb_generated_for_sync: false,
            cron_seconds: 0,
            feeds_backlog: false,
            writers: Vec::new(),
            waiting: Vec::new(),
            want_acks: false,
            acks_arrived: false,
            rdb_pipe: None,
            rdb_pipe_generation: 0,
            rdma: None,
            rdma_stats: Default::default(),
            stream_holds: VecDeque::new(),
            stream_released: 0,
            trim_wanted: false,
        }
    }
}

impl Replication {
    /// How far the stream may go to replicas with the AOF durable up to
    /// `durable`.
    pub fn stream_limit(&mut self, durable: u64) -> i64 {
        while let Some(&(offset, aof)) = self.stream_holds.front() {
            if aof > durable {
                return self.stream_released;
            }
            self.stream_released = offset;
            self.stream_holds.pop_front();
        }
        self.offset
    }

    /// The offset of the first byte in the backlog (Redis's
    /// repl_backlog_first_byte_offset).
    pub fn backlog_first_offset(&self) -> i64 {
        match &self.backlog {
            Some(b) => self.offset - b.histlen as i64 + 1,
            None => 0,
        }
    }
}

/// Is `offset` (the next byte the replica wants) servable from the
/// backlog for a replica that knew `replid` (Redis's
/// masterTryPartialResynchronization checks)?
fn can_continue(srv: &Server, replid: &str, offset: i64) -> bool {
    let r = &srv.repl;
    let id_ok = replid.eq_ignore_ascii_case(&srv.replid)
        || (replid.eq_ignore_ascii_case(&r.replid2) && offset <= r.second_offset);
    let Some(b) = &r.backlog else {
        return false;
    };
    // (The offset comes from the peer: i64::MIN must not overflow.)
    id_ok && b.holds_from(offset.saturating_sub(1))
}

impl Server {
    /// Bytes for the replication stream (the feed's units, a PING): into
    /// the buffer that the backlog and every replica share. Online
    /// replicas are queued to be written; every replica with a place in
    /// the stream is held to its output limit by how far behind it is.
    pub fn append_to_replication(&mut self, bytes: &[u8]) {
        let size = self.config.repl_backlog_size.max(1) as usize;
        let Some(backlog) = self.repl.backlog.as_mut() else {
            return;
        };
        let added_block = backlog.append(bytes, size);
        self.replication_grew(bytes.len(), added_block);
    }

    /// `len` bytes were added to the backlog (`added_block`: in a new
    /// block): they count in the offset, every replica's stream ends
    /// after them, online replicas are written them, and the backlog
    /// is trimmed to its size.
    fn replication_grew(&mut self, len: usize, added_block: bool) {
        if len == 0 {
            return;
        }
        self.repl.offset += len as i64;
        let end = self.repl.offset;
        for i in 0..self.repl.replicas.len() {
            let id = self.repl.replicas[i];
            let Some(slot) = self.client_index(id) else {
                continue;
            };
            let Some(c) = self.clients[slot].as_deref_mut() else {
                continue;
            };
            let Some(link) = c.repl.as_mut() else {
                continue;
            };
            let Some(stream) = link.stream.as_mut() else {
                continue;
            };
            stream.end = end;
            if matches!(link.phase, ReplicaPhase::Online) {
                c.queue_write(&mut self.pending_writes);
            }
            self.enforce_output_limit(slot, id);
        }
        if added_block {
            self.trim_replication_buffer(TRIM_BLOCKS_PER_CALL);
        }
    }

    /// An online replica was written all the stream it may have until the
    /// AOF catches up: written again when it does.
    pub fn note_stream_held(&mut self, c: &mut ClientState) {
        if !c.aof_held {
            c.aof_held = true;
            self.aof.held_clients.push((c.slot, c.id));
        }
    }

    /// Memory the shared replication buffer takes (Redis's
    /// `mem_total_replication_buffers`).
    pub fn replication_buffers_memory(&self) -> usize {
        self.repl.backlog.as_ref().map_or(0, |b| b.mem)
    }

    /// Free the front of the shared buffer that neither the backlog (its
    /// `repl-backlog-size`) nor any replica needs, `max_blocks` at most.
    /// Not while a replica is out of the client table (running a command):
    /// its place would not be seen.
    pub fn trim_replication_buffer(&mut self, max_blocks: usize) {
        let size = self.config.repl_backlog_size.max(1) as usize;
        let Some(b) = self.repl.backlog.as_ref() else {
            return;
        };
        if b.histlen <= size {
            return;
        }
        let mut keep_from = b.end();
        for &id in &self.repl.replicas {
            let Some(c) = self.client_by_id(id) else {
                return;
            };
            if let Some(s) = c.repl.as_ref().and_then(|l| l.stream) {
                keep_from = keep_from.min(s.sent);
            }
        }
        if let Some(b) = self.repl.backlog.as_mut() {
            b.trim(size, keep_from, max_blocks);
        }
    }

    /// The feed's units for this iteration, into the replication stream.
    pub fn feed_replication(&mut self) {
        // A replica's backlog and replicas get its master's stream as it
        // came (`master_stream_applied`), not what it propagates.
        if !self.repl.feeds_backlog {
            self.repl.writers.clear();
            return;
        }
        let before = self.repl.offset;
        // Straight into the backlog's blocks: a turn's writes are not
        // gathered in a buffer of their own first.
        if let Some(backlog) = self.repl.backlog.as_mut() {
            let size = self.config.repl_backlog_size.max(1) as usize;
            let (mut added, mut len) = (false, 0);
            let cursor = &mut self.repl.cursor;
            cursor.for_each_piece(&self.feed, super::feed::TO_REPLICAS, |piece| {
                added |= backlog.append(piece, size);
                len += piece.len();
            });
            self.replication_grew(len, added);
        }
        let offset = self.repl.offset;
        // The AOF took these writes just before: until they are written
        // (or, under `always`, synced), replicas do not get them either.
        let appended = self.aof.appended;
        let durable = self.aof_durable();
        // (What the AOF released meanwhile goes from the list first.)
        self.repl.stream_limit(durable);
        if offset > before && appended > durable {
            if self.repl.stream_holds.is_empty() {
                self.repl.stream_released = before;
            }
            self.repl.stream_holds.push_back((offset, appended));
        }
        for id in std::mem::take(&mut self.repl.writers) {
            if let Some(c) = self.client_by_id_mut(id) {
                c.woff = offset;
            }
        }
    }

    /// Every replica in the slab with its link, in the order they attached.
    pub fn replica_links(&self) -> impl Iterator<Item = (&ClientState, &ReplicaLink)> {
        self.repl.replicas.iter().filter_map(|&id| {
            let c = self.client_by_id(id)?;
            Some((c, c.repl.as_ref()?))
        })
    }

    /// Online replicas whose last ACK is at most `min-replicas-max-lag`
    /// seconds old (Redis's repl_good_slaves_count).
    pub fn good_replicas(&self) -> usize {
        let max_lag = self.config.min_replicas_max_lag.max(0) as u64;
        self.replica_links()
            .filter(|(_, l)| {
                matches!(l.phase, ReplicaPhase::Online) && l.ack_time.elapsed().as_secs() <= max_lag
            })
            .count()
    }

    /// May a write run under `min-replicas-to-write` / `-max-lag`?
    pub fn enough_good_replicas(&self) -> bool {
        let (to_write, max_lag) = (
            self.config.min_replicas_to_write,
            self.config.min_replicas_max_lag,
        );
        self.master.target.is_some()
            || to_write == 0
            || max_lag == 0
            || self.good_replicas() >= to_write as usize
    }

    /// Online replicas that acknowledged `offset` (WAIT's count).
    pub fn replicas_acked(&self, offset: i64) -> i64 {
        self.replica_links()
            .filter(|(_, l)| matches!(l.phase, ReplicaPhase::Online) && l.ack_offset >= offset)
            .count() as i64
    }

    /// Has every replica acknowledged the whole stream (Redis's
    /// isReadyToShutdown)? A shutdown waits for that, up to
    /// `shutdown-timeout`.
    pub fn replicas_caught_up(&self) -> bool {
        self.replica_links()
            .all(|(_, l)| l.ack_offset == self.repl.offset)
    }

    /// Before the loop sleeps: if a WAIT needs them, ask every replica for
    /// an ACK (through the stream, as Redis: REPLCONF GETACK *). Not while
    /// clients are paused (as Redis): the request would move the offset a
    /// failover waits for its target to reach; it goes once they resume.
    pub fn request_acks(&mut self) {
        if self.clients_paused().is_some() {
            return;
        }
        if std::mem::take(&mut self.repl.want_acks) {
            self.send_getack();
        }
    }

    /// REPLCONF GETACK * to every replica now, after the writes made so
    /// far (a shutdown asks before it pauses writes, as Redis's).
    pub fn send_getack(&mut self) {
        if self.repl.replicas.is_empty() || self.master.target.is_some() {
            return;
        }
        self.flush_feed();
        self.append_to_replication(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
    }

    /// PSYNC replid offset / SYNC from `client`: continue from the backlog
    /// when possible, else start (or join) a full synchronisation.
    pub fn replica_sync(
        &mut self,
        client: &mut ClientState,
        psync: Option<(&str, i64)>,
        capa_psync2: bool,
    ) {
        if let Some((replid, offset)) = psync {
            if can_continue(self, replid, offset) {
                self.continue_replica(client, offset, capa_psync2);
                return;
            }
            if replid != "?" {
                self.stats.sync_partial_err += 1;
            }
        }
        self.stats.sync_full += 1;
        // Fewer, bigger segments from here on (non critical if refused).
        if self.config.repl_disable_tcp_nodelay && !client.is_unix {
            crate::net::set_nodelay(client.fd, false);
        }
        // The first replica gets a fresh history: a new replication id and
        // a backlog from here on.
        if self.repl.backlog.is_none() {
            self.replid = random_hex(40);
            self.repl.replid2 = "0".repeat(40);
            self.repl.second_offset = -1;
            self.ensure_backlog();
        }
        let link = client.repl.get_or_insert_default();
        link.capa_psync2 = capa_psync2;
        link.old_sync = psync.is_none();
        link.phase = ReplicaPhase::WaitBgsaveStart;
        link.ack_time = Instant::now();
        self.attach_replica(client);
        // Join a snapshot already being written for other replicas: same
        // offset, so the same place in the stream (which that replica
        // keeps in the buffer; an `rdb-only` one keeps none).
        let (filter, rdb_only) = client
            .repl
            .as_ref()
            .map(|l| (l.filter, l.rdb_only))
            .unwrap_or_default();
        let donor = self.replica_links().find_map(|(_, l)| {
            (matches!(l.phase, ReplicaPhase::WaitBgsaveEnd)
                && l.filter == filter
                && (l.stream.is_some() || rdb_only))
                .then_some(l.initial_offset)
        });
        if let (Some(offset), true) = (donor, self.repl.rdb_for_replicas) {
            self.begin_full_sync(client, offset);
            return;
        }
        // A diskless sync may wait a little for more replicas to share it,
        // unless `repl-diskless-sync-max-replicas` of them already wait
        // (this one is out of the slab, so not among the links).
        // Only a replica that takes a diskless transfer waits: one without
        // `capa eof` (a plain SYNC or PSYNC, an older replica) gets a
        // snapshot to disk at once (Redis's syncCommand, case 3).
        let eof = client
            .repl
            .as_ref()
            .is_some_and(|l| l.capa_eof && !self.wants_rdma(l.capa_rdma));
        let waiting = 1 + self.replicas_waiting_for_snapshot();
        let delayed = self.config.repl_diskless_sync
            && eof
            && self.config.repl_diskless_sync_delay > 0
            && !self.enough_replicas_waiting(waiting);
        if self.snapshot.child.is_none() && self.aof.rewrite.is_none() && !delayed {
            self.start_replication_snapshot(Some(client));
        }
    }

    /// A replica is listed (it was not yet).
    fn attach_replica(&mut self, client: &mut ClientState) {
        client.kind = ClientKind::Replica;
        if !self.repl.replicas.contains(&client.id) {
            self.repl.replicas.push(client.id);
        }
        self.repl.no_replicas_since = None;
    }

    /// +CONTINUE: the replica gets the stream from `offset` on (its place
    /// in the shared buffer) and is online.
    fn continue_replica(&mut self, client: &mut ClientState, offset: i64, capa_psync2: bool) {
        let link = client.repl.get_or_insert_default();
        link.phase = ReplicaPhase::Online;
        link.ack_time = Instant::now();
        link.stream = Some(StreamRef {
            sent: offset - 1,
            end: self.repl.offset,
        });
        if capa_psync2 {
            client
                .reply
                .raw(format!("+CONTINUE {}\r\n", self.replid).as_bytes());
        } else {
            client.reply.raw(b"+CONTINUE\r\n");
        }
        let missing = (self.repl.offset - offset + 1).max(0) as usize;
        self.attach_replica(client);
        self.stats.sync_partial_ok += 1;
        info!(
            "Partial resynchronization request from {} accepted. Sending {missing} bytes of backlog starting from offset {offset}.",
            client.addr
        );
    }

    /// +FULLRESYNC for a replica whose snapshot is taken at `offset`.
    fn begin_full_sync(&mut self, client: &mut ClientState, offset: i64) {
        let streaming = self.repl.rdb_pipe.is_some();
        let Some(link) = client.repl.as_mut() else {
            return;
        };
        link.phase = if streaming {
            ReplicaPhase::Streaming
        } else {
            ReplicaPhase::WaitBgsaveEnd
        };
        link.initial_offset = offset;
        link.child_running = streaming;
        if !link.rdb_only {
            link.stream = Some(StreamRef {
                sent: offset,
                end: self.repl.offset,
            });
        }
        if !link.old_sync {
            client
                .reply
                .raw(format!("+FULLRESYNC {} {offset}\r\n", self.replid).as_bytes());
        }
    }

    /// Fork a snapshot for every replica waiting for one (`current` is the
    /// one running PSYNC, out of the slab). The stream written so far goes
    /// to the backlog first, so the snapshot and the offset agree.
    pub fn start_replication_snapshot(&mut self, mut current: Option<&mut ClientState>) {
        self.flush_feed();
        // The next stream bytes start with a SELECT for every replica.
        self.repl.cursor = FeedCursor::default();
        // The replicas waiting for a snapshot: what each asks to leave out,
        // and whether it can take a diskless (`$EOF:`) transfer (not one
        // that reads its dump over RDMA, which needs the file).
        let waiting: Vec<(RdbFilter, bool)> = self
            .repl
            .replicas
            .iter()
            .filter_map(|&id| {
                let c = current
                    .as_deref()
                    .filter(|c| c.id == id)
                    .or_else(|| self.client_by_id(id))?;
                let l = c.repl.as_ref()?;
                matches!(l.phase, ReplicaPhase::WaitBgsaveStart)
                    .then(|| (l.filter, l.capa_eof && !self.wants_rdma(l.capa_rdma)))
            })
            .collect();
        // This snapshot is for those that ask what the first of them (the
        // one running PSYNC, if any) asks; the others get the next one.
        let wanted = current
            .as_deref()
            .and_then(|c| c.repl.as_ref())
            .map(|l| l.filter)
            .or_else(|| waiting.first().map(|&(f, _)| f))
            .unwrap_or_default();
        let all_eof = waiting
            .iter()
            .filter(|&&(f, _)| f == wanted)
            .all(|&(_, eof)| eof);
        // A filtered dump is never the server's dump file: diskless only
        // (PSYNC refuses a filter without `capa eof`); a replica that
        // reads its dump over RDMA, from the file, gets the whole dump.
        let filter = if all_eof {
            wanted
        } else {
            RdbFilter::default()
        };
        let mut pipe = None;
        if (self.config.repl_diskless_sync || filter.any()) && all_eof {
            match super::snapshot::transfer_pipe() {
                Ok((read, write)) => {
                    let mark = random_hex(40).into_bytes();
                    pipe = Some((read, (write, mark)));
                }
                Err(e) => warn!("Can't create the pipe for a diskless transfer: {e}"),
            }
        }
        let (read_end, child_end) = match pipe {
            Some((r, w)) => (Some(r), Some(w)),
            None => (None, None),
        };
        if let Err(e) = super::snapshot::bgsave_with(self, child_end, filter) {
            warn!("Can't start the snapshot for replicas: {e}");
            return;
        }
        let diskless = read_end.is_some();
        if !diskless && self.config.rdb_del_sync_files {
            self.repl.rdb_generated_for_sync = true;
        }
        self.repl.rdb_pipe_generation += u64::from(read_end.is_some());
        self.repl.rdb_pipe = read_end;
        self.repl.rdb_for_replicas = true;
        let offset = self.repl.offset;
        let waiting: Vec<u64> = self.repl.replicas.clone();
        for id in waiting {
            if let Some(c) = current.as_deref_mut().filter(|c| c.id == id) {
                if c.repl.as_ref().is_some_and(|l| {
                    matches!(l.phase, ReplicaPhase::WaitBgsaveStart) && l.filter == wanted
                }) {
                    self.begin_full_sync(c, offset);
                }
                continue;
            }
            let Some((slot, mut c)) = self.take_client(id) else {
                continue;
            };
            if c.repl.as_ref().is_some_and(|l| {
                matches!(l.phase, ReplicaPhase::WaitBgsaveStart) && l.filter == wanted
            }) {
                self.begin_full_sync(&mut c, offset);
                c.queue_write(&mut self.pending_writes);
            }
            self.clients[slot] = Some(c);
        }
        info!(
            "Starting BGSAVE for SYNC with target: {}",
            if diskless { "replicas sockets" } else { "disk" }
        );
    }

    /// The snapshot child ended: replicas waiting for it get the file, or,
    /// if it failed, are dropped; replicas that arrived meanwhile get the
    /// next snapshot.
    pub fn replication_snapshot_done(&mut self, ok: bool) {
        if !std::mem::take(&mut self.repl.rdb_for_replicas) {
            self.start_pending_replication_snapshot();
            return;
        }
        if !ok {
            // A failed child drops the replicas it was for: those waiting
            // for its dump or still receiving it, and those that have all
            // of it but wait for their first ACK (Redis frees its
            // WAIT_BGSAVE_END replicas). Replicas that synced from an
            // earlier child and are loading its dump are left alone.
            self.repl.rdb_pipe = None;
            self.drop_replicas_where(|l| match l.phase {
                ReplicaPhase::Streaming | ReplicaPhase::WaitBgsaveEnd => true,
                ReplicaPhase::WaitFirstAck => l.child_running,
                _ => false,
            });
        }
        self.replication_child_ended();
        if self.repl.rdb_pipe.is_some() || !ok {
            // A diskless transfer: what is left in the pipe still goes out
            // (`refill_bulk`).
            self.start_pending_replication_snapshot();
            return;
        }
        let path = self.config.dir.join(&self.config.dbfilename);
        for id in self.repl.replicas.clone() {
            let Some((slot, mut c)) = self.take_client(id) else {
                continue;
            };
            let waiting = c
                .repl
                .as_ref()
                .is_some_and(|l| matches!(l.phase, ReplicaPhase::WaitBgsaveEnd));
            if waiting {
                let opened = if ok {
                    std::fs::File::open(&path).and_then(|f| Ok((f.metadata()?.len(), f)))
                } else {
                    Err(std::io::Error::other("BGSAVE child returned an error"))
                };
                let rdma = c
                    .repl
                    .as_ref()
                    .is_some_and(|l| self.wants_rdma(l.capa_rdma));
                if rdma && ok {
                    match self.offer_rdma(&path) {
                        Ok((serve, line)) => {
                            c.reply.raw(line.as_bytes());
                            if let Some(l) = c.repl.as_mut() {
                                l.phase = ReplicaPhase::RdmaTransfer(serve);
                            }
                            c.queue_write(&mut self.pending_writes);
                            self.clients[slot] = Some(c);
                            continue;
                        }
                        Err(e) => {
                            self.repl.rdma_stats.fallbacks += 1;
                            warn!(
                                "Can't offer the dump over RDMA to replica {} ({e}): sending it over TCP",
                                c.addr
                            );
                        }
                    }
                }
                match opened {
                    Ok((len, file)) => {
                        c.reply.raw(format!("${len}\r\n").as_bytes());
                        if let Some(l) = c.repl.as_mut() {
                            l.phase = ReplicaPhase::SendBulk {
                                file,
                                remaining: len,
                            };
                        }
                        c.queue_write(&mut self.pending_writes);
                    }
                    Err(e) => {
                        warn!("SYNC failed for replica {}: {e}", c.addr);
                        c.close_asap = true;
                        self.to_close.push((slot, id));
                    }
                }
            }
            self.clients[slot] = Some(c);
        }
        self.start_pending_replication_snapshot();
    }

    /// Start a snapshot for replicas that have waited for one, when no
    /// child runs.
    pub fn start_pending_replication_snapshot(&mut self) {
        // Not while a diskless transfer still has bytes to pass on.
        if self.snapshot.child.is_some()
            || self.aof.rewrite.is_some()
            || self.repl.rdb_pipe.is_some()
        {
            return;
        }
        let delay = if self.config.repl_diskless_sync {
            std::time::Duration::from_secs(self.config.repl_diskless_sync_delay.max(0) as u64)
        } else {
            std::time::Duration::ZERO
        };
        let longest_wait = self
            .replica_links()
            .filter(|(_, l)| matches!(l.phase, ReplicaPhase::WaitBgsaveStart))
            .map(|(_, l)| l.ack_time.elapsed())
            .max();
        let waiting = self.replicas_waiting_for_snapshot();
        if longest_wait.is_some_and(|w| w >= delay) || self.enough_replicas_waiting(waiting) {
            self.start_replication_snapshot(None);
        }
    }

    /// Replicas (in the slab) waiting for a snapshot to start.
    fn replicas_waiting_for_snapshot(&self) -> usize {
        self.replica_links()
            .filter(|(_, l)| matches!(l.phase, ReplicaPhase::WaitBgsaveStart))
            .count()
    }

    /// Do `waiting` replicas make a diskless sync start without waiting
    /// out its delay (`repl-diskless-sync-max-replicas`)?
    fn enough_replicas_waiting(&self, waiting: usize) -> bool {
        let max = self.config.repl_diskless_sync_max_replicas;
        max > 0 && waiting as i64 >= max
    }

    /// Remove a dump written only to feed replicas, in a server without
    /// persistence, once no replica needs it (Redis's
    /// removeRDBUsedToSyncReplicas, from the cron).
    fn remove_rdb_used_to_sync_replicas(&mut self) {
        if !self.config.rdb_del_sync_files {
            self.repl.rdb_generated_for_sync = false;
            return;
        }
        if !self.repl.rdb_generated_for_sync || !self.persistence_disabled() {
            return;
        }
        let needed = self.replica_links().any(|(_, l)| {
            matches!(
                l.phase,
                ReplicaPhase::WaitBgsaveStart
                    | ReplicaPhase::WaitBgsaveEnd
                    | ReplicaPhase::SendBulk { .. }
                    | ReplicaPhase::RdmaTransfer(_)
            )
        });
        if needed || self.snapshot.child.is_some() {
            return;
        }
        let path = self.config.dir.join(&self.config.dbfilename);
        if path.exists() {
            info!("Removing the RDB file used to feed replicas in a persistence-less instance");
            if let Err(e) = std::fs::remove_file(&path) {
                warn!("Can't remove {}: {e}", path.display());
            }
        }
        self.repl.rdb_generated_for_sync = false;
    }

    /// No save points and no AOF (Redis's allPersistenceDisabled).
    pub fn persistence_disabled(&self) -> bool {
        super::snapshot::save_points(self).is_empty() && !self.config.appendonly
    }

    /// Before the loop sleeps: pass a diskless transfer on. (A dump file
    /// goes to its replicas with sendfile as their sockets drain, in the
    /// loop's write path, and ends in `bulk_sent`.)
    pub fn refill_bulk(&mut self) {
        self.pass_on_diskless();
    }

    /// The whole dump file is out to a replica: it is online, and gets the
    /// stream from its snapshot's offset on (or, with `rdb-only`, is closed
    /// once its output is written).
    pub fn bulk_sent(&mut self, c: &mut ClientState) {
        let Some(link) = c.repl.as_mut() else {
            return;
        };
        if link.rdb_only {
            c.close_after_reply = true;
            link.phase = ReplicaPhase::Online;
            return;
        }
        link.phase = ReplicaPhase::Online;
        link.ack_time = Instant::now();
        info!("Synchronization with replica {} succeeded", c.addr);
    }

    /// A diskless transfer: pass the child's bytes on to the replicas it is
    /// for, as fast as the slowest of them takes them (nothing is read
    /// while one has a chunk queued; the child then waits on the pipe).
    fn pass_on_diskless(&mut self) {
        if self.repl.rdb_pipe.is_none() {
            return;
        }
        let targets: Vec<(usize, u64)> = self
            .repl
            .replicas
            .iter()
            .filter_map(|&id| {
                let slot = self.client_index(id)?;
                let c = self.clients.get(slot)?.as_ref()?;
                matches!(c.repl.as_ref()?.phase, ReplicaPhase::Streaming).then_some((slot, id))
            })
            .collect();
        if targets.is_empty() {
            // Every replica it was for is gone: stop the child.
            info!("Diskless rdb transfer, last replica dropped, killing fork child.");
            self.stop_replication_child();
            return;
        }
        let room = targets.iter().all(|&(slot, _)| {
            self.clients[slot]
                .as_ref()
                .is_some_and(|c| c.pending_output() < BULK_CHUNK)
        });
        if !room {
            return;
        }
        let mut buf = vec![0u8; BULK_CHUNK];
        let read = match self.repl.rdb_pipe.as_mut() {
            Some(p) => p.read(&mut buf),
            None => return,
        };
        match read {
            Ok(0) => {
                self.repl.rdb_pipe = None;
                for &(slot, _) in &targets {
                    let Some(mut c) = self.clients[slot].take() else {
                        continue;
                    };
                    let early = c.repl.as_mut().is_some_and(|l| {
                        l.phase = ReplicaPhase::WaitFirstAck;
                        // `repl-timeout` counts from here once the child
                        // ended (it may have before its last bytes went).
                        l.ack_time = Instant::now();
                        std::mem::take(&mut l.acked_early)
                    });
                    if early {
                        self.replica_acked(&mut c);
                        c.queue_write(&mut self.pending_writes);
                    }
                    self.clients[slot] = Some(c);
                }
                info!(
                    "Diskless rdb transfer, done reading from pipe, {} replicas still up.",
                    targets.len()
                );
                // Replicas that arrived meanwhile get the next snapshot.
                if self.snapshot.child.is_none() {
                    self.start_pending_replication_snapshot();
                }
            }
            Ok(n) => {
                for &(slot, _) in &targets {
                    if let Some(c) = self.clients[slot].as_deref_mut() {
                        c.reply.raw(&buf[..n]);
                        c.queue_write(&mut self.pending_writes);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                warn!("Diskless rdb transfer: reading from the child: {e}");
                // Nobody reads the pipe any more: the child would block on
                // it for ever, holding the one child slot.
                self.stop_replication_child();
                self.drop_replicas_where(|l| matches!(l.phase, ReplicaPhase::Streaming));
            }
        }
    }

    /// The first ACK after a diskless transfer: the replica is online, and
    /// gets the stream from its snapshot's offset on.
    pub fn replica_acked(&mut self, client: &mut ClientState) {
        let Some(link) = client.repl.as_mut() else {
            return;
        };
        if matches!(link.phase, ReplicaPhase::Streaming) {
            link.acked_early = true;
            return;
        }
        if !matches!(link.phase, ReplicaPhase::WaitFirstAck) {
            return;
        }
        link.phase = ReplicaPhase::Online;
        info!("Synchronization with replica {} succeeded", client.addr);
    }

    /// Kill the snapshot child (whoever it was for) without a failure
    /// report: its pipe is closed and no child runs for replicas after.
    pub fn stop_replication_child(&mut self) {
        self.repl.rdb_pipe = None;
        super::snapshot::kill_child(self);
        self.replication_child_ended();
    }

    /// The snapshot child made for replicas ended, or was stopped: the
    /// replicas of its diskless transfer that have all of it are online
    /// from now on as Redis counts (`repl-timeout` runs from here until
    /// their first ACK), and no child runs for replicas.
    pub fn replication_child_ended(&mut self) {
        self.repl.rdb_for_replicas = false;
        let ids = self.repl.replicas.clone();
        for id in ids {
            let Some(l) = self.client_by_id_mut(id).and_then(|c| c.repl.as_mut()) else {
                continue;
            };
            if std::mem::take(&mut l.child_running) && matches!(l.phase, ReplicaPhase::WaitFirstAck)
            {
                l.ack_time = Instant::now();
            }
        }
    }

    /// Close the replicas whose link matches.
    fn drop_replicas_where(&mut self, pick: impl Fn(&ReplicaLink) -> bool) {
        let doomed: Vec<u64> = self
            .replica_links()
            .filter(|(_, l)| pick(l))
            .map(|(c, _)| {
                warn!(
                    "SYNC failed for replica {}: the snapshot child failed",
                    c.addr
                );
                c.id
            })
            .collect();
        for id in doomed {
            self.close_client_asap(id);
        }
    }

    /// A replica went away.
    pub fn detach_replica(&mut self, client: &mut ClientState) {
        let Some(link) = client.repl.take() else {
            return;
        };
        self.repl.replicas.retain(|&id| id != client.id);
        self.repl.trim_wanted = true;
        // The dump being written to disk for it alone is no use now: stop
        // it, unless save points make it a save worth finishing (Redis's
        // freeClient and anyOtherSlaveWaitRdb).
        if matches!(link.phase, ReplicaPhase::WaitBgsaveEnd)
            && self.snapshot.child.is_some()
            && !self.snapshot.child_to_socket
            && super::snapshot::save_points(self).is_empty()
            && !self
                .replica_links()
                .any(|(_, l)| matches!(l.phase, ReplicaPhase::WaitBgsaveEnd))
        {
            info!("No replica waits for the dump any more: stopping its child");
            super::snapshot::abort_child(self);
        }
        if self.repl.replicas.is_empty() {
            self.repl.no_replicas_since = Some(Instant::now());
        }
        info!("Connection with replica {} lost.", client.addr);
    }

    /// Once a second (Redis's replicationCron, master part): PING the
    /// replicas every `repl-ping-replica-period`, a newline to those
    /// waiting for their snapshot, drop replicas silent past `repl-timeout`,
    /// free the backlog after `repl-backlog-ttl` without replicas.
    pub fn replication_cron(&mut self) {
        self.repl.cron_seconds += 1;
        // A failover first: it may make this server a replica now.
        self.failover_cron();
        // Replicas that waited for another child (an AOF rewrite) to end.
        self.start_pending_replication_snapshot();
        self.remove_rdb_used_to_sync_replicas();
        let period = self.config.repl_ping_replica_period.max(1) as u64;
        // A replica's stream is its master's: it adds nothing of its own.
        let master = self.master.target.is_none();
        // Not while a failover waits for a replica to acknowledge the
        // offset: a PING would move it (Redis's manual_failover_in_progress).
        let failing_over = self.failover.state != super::failover::FailoverState::None;
        if master
            && !failing_over
            && !self.repl.replicas.is_empty()
            && self.repl.cron_seconds.is_multiple_of(period)
        {
            self.append_to_replication(b"*1\r\n$4\r\nPING\r\n");
        }
        let timeout = std::time::Duration::from_secs(self.config.repl_timeout.max(1) as u64);
        let now = Instant::now();
        for id in self.repl.replicas.clone() {
            let Some(slot) = self.client_index(id) else {
                continue;
            };
            let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_deref_mut()) else {
                continue;
            };
            let pending = c.pending_output();
            let Some(link) = c.repl.as_mut() else {
                continue;
            };
            match link.phase {
                // A diskless transfer goes as fast as its slowest replica
                // reads: one that has taken nothing for `repl-timeout`
                // would hold the others and the child for ever (Redis's
                // repl_last_partial_write).
                ReplicaPhase::Streaming => {
                    if pending == 0 || pending != link.stalled_at {
                        link.stalled_at = pending;
                        link.stalled_since = now;
                    } else if now.duration_since(link.stalled_since) > timeout {
                        warn!("Disconnecting timedout replica (full sync): {}", c.addr);
                        c.close_asap = true;
                        self.to_close.push((slot, id));
                    }
                }
                // Newlines keep the link alive while the replica waits,
                // or reads its dump over RDMA (nothing else flows on TCP).
                ReplicaPhase::WaitBgsaveStart
                | ReplicaPhase::WaitBgsaveEnd
                | ReplicaPhase::RdmaTransfer(_) => {
                    c.reply.raw(b"\n");
                    c.queue_write(&mut self.pending_writes);
                }
                // A SYNC replica never sends ACKs (Redis spares it too).
                // One that has its whole diskless transfer and loads it
                // counts as online once the child ended: its empty lines
                // while it loads, or its first ACK, keep it.
                ReplicaPhase::Online | ReplicaPhase::WaitFirstAck
                    if !link.old_sync
                        && !link.child_running
                        && now.duration_since(link.ack_time) > timeout =>
                {
                    warn!(
                        "Disconnecting timedout replica (streaming sync): {}",
                        c.addr
                    );
                    c.close_asap = true;
                    self.to_close.push((slot, id));
                }
                _ => {}
            }
        }
        // What replicas that went or caught up no longer hold, and what a
        // smaller `repl-backlog-size` leaves out, is freed faster here.
        self.trim_replication_buffer(10 * TRIM_BLOCKS_PER_CALL);
        self.rdma_serve_cron();
        let ttl = self.config.repl_backlog_ttl;
        if self.master.target.is_some() {
            self.replica_cron();
            return;
        }
        if let Some(since) = self.repl.no_replicas_since {
            if ttl > 0 && self.repl.backlog.is_some() && since.elapsed().as_secs() >= ttl as u64 {
                // As Redis: a new history, as nothing can continue the old.
                self.replid = random_hex(40);
                self.repl.replid2 = "0".repeat(40);
                self.repl.second_offset = -1;
                self.repl.backlog = None;
                if std::mem::take(&mut self.repl.feeds_backlog) {
                    self.feed.detach();
                }
                info!("Replication backlog freed after {ttl} seconds without connected replicas.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_keeps_its_size_and_what_replicas_need() {
        let mut b = Backlog::new(100);
        assert!(b.holds_from(100));
        assert!(!b.holds_from(99));
        // Blocks of 16 KB (a size class of it) at least.
        let chunk: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        assert!(b.append(&chunk, 16 * 1024));
        assert_eq!(b.histlen, chunk.len());
        assert_eq!(b.end(), 100 + chunk.len() as i64);
        assert_eq!(b.copy_from(100), chunk);
        assert_eq!(b.copy_from(100 + 39_990), chunk[39_990..]);
        assert!(b.copy_from(b.end()).is_empty());
        assert!(b.blocks.len() >= 2);
        // A replica still at 100 keeps everything.
        b.trim(16 * 1024, 100, usize::MAX);
        assert_eq!(b.histlen, chunk.len());
        // Once it moved on, the backlog keeps at least its size, whole
        // blocks, and at least one block.
        let mem = b.mem;
        b.trim(16 * 1024, b.end(), usize::MAX);
        assert!(b.histlen >= 16 * 1024 && b.histlen < chunk.len());
        assert!(b.mem < mem);
        let first = b.end() - b.histlen as i64;
        assert!(b.holds_from(first) && !b.holds_from(first - 1));
        assert_eq!(b.copy_from(first), chunk[(first - 100) as usize..]);
        b.trim(0, b.end(), usize::MAX);
        assert_eq!(b.blocks.len(), 1);
    }

    #[test]
    fn a_big_write_is_cut_into_blocks_of_a_sixteenth_of_the_backlog() {
        let mut b = Backlog::new(0);
        let big = vec![7u8; 1 << 20];
        b.append(&big, 1 << 20);
        assert!(b.blocks.iter().all(|x| x.data.capacity() < 80 * 1024));
        assert_eq!(b.copy_from(0), big);
        // Small writes fill the last block before a new one is made.
        let mut small = Backlog::new(0);
        assert!(small.append(b"abc", 1 << 20));
        assert!(!small.append(b"def", 1 << 20));
        assert_eq!(small.copy_from(1), b"bcdef");
    }
}
