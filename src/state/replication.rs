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
    /// Stream produced while it synchronises, sent after the dump.
    pub pending: Vec<u8>,
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
            pending: Vec::new(),
            rdb_only: false,
            filter: RdbFilter::default(),
            acked_early: false,
            stalled_at: 0,
            stalled_since: Instant::now(),
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

/// The last `size` bytes of the stream, as a ring.
#[derive(Debug)]
pub struct Backlog {
    buf: Vec<u8>,
    /// Where the next byte goes.
    head: usize,
    /// Bytes held (at most `buf.len()`).
    pub histlen: usize,
}

impl Backlog {
    pub fn new(size: usize) -> Backlog {
        Backlog {
            buf: vec![0; size.max(1)],
            head: 0,
            histlen: 0,
        }
    }

    pub fn size(&self) -> usize {
        self.buf.len()
    }

    fn append(&mut self, mut bytes: &[u8]) {
        let size = self.buf.len();
        if bytes.len() > size {
            bytes = &bytes[bytes.len() - size..];
        }
        let first = bytes.len().min(size - self.head);
        self.buf[self.head..self.head + first].copy_from_slice(&bytes[..first]);
        let rest = &bytes[first..];
        self.buf[..rest.len()].copy_from_slice(rest);
        self.head = (self.head + bytes.len()) % size;
        self.histlen = (self.histlen + bytes.len()).min(size);
    }

    /// The last `len` bytes held.
    fn tail(&self, len: usize) -> Vec<u8> {
        let size = self.buf.len();
        let len = len.min(self.histlen);
        let start = (self.head + size - len) % size;
        let mut out = Vec::with_capacity(len);
        if start + len <= size {
            out.extend_from_slice(&self.buf[start..start + len]);
        } else {
            out.extend_from_slice(&self.buf[start..]);
            out.extend_from_slice(&self.buf[..len - (size - start)]);
        }
        out
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
        }
    }
}

impl Replication {
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
    let first = r.offset - b.histlen as i64 + 1;
    id_ok && offset >= first && offset <= r.offset + 1
}

impl Server {
    /// Bytes for the replication stream (the feed's units, a PING): into
    /// the backlog and to every replica, kept for those still syncing.
    pub fn append_to_replication(&mut self, bytes: &[u8]) {
        let Some(backlog) = self.repl.backlog.as_mut() else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        backlog.append(bytes);
        self.repl.offset += bytes.len() as i64;
        for i in 0..self.repl.replicas.len() {
            let id = self.repl.replicas[i];
            let Some(slot) = self.client_index(id) else {
                continue;
            };
            let Some(link) = self.clients[slot]
                .as_deref_mut()
                .and_then(|c| c.repl.as_mut())
            else {
                continue;
            };
            match link.phase {
                ReplicaPhase::WaitBgsaveStart => {}
                ReplicaPhase::Online => self.push_output(slot, id, bytes),
                // Kept until its snapshot is through; it counts against
                // its output limit.
                _ => {
                    link.pending.extend_from_slice(bytes);
                    self.enforce_output_limit(slot, id);
                }
            }
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
        let mut bytes = Vec::new();
        let mut cursor = std::mem::take(&mut self.repl.cursor);
        cursor.append(&self.feed, super::feed::TO_REPLICAS, &mut bytes);
        self.repl.cursor = cursor;
        self.append_to_replication(&bytes);
        let offset = self.repl.offset;
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
    /// an ACK (through the stream, as Redis: REPLCONF GETACK *).
    pub fn request_acks(&mut self) {
        if std::mem::take(&mut self.repl.want_acks)
            && !self.repl.replicas.is_empty()
            && self.master.target.is_none()
        {
            self.append_to_replication(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
        }
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
        // offset, same kept stream.
        let filter = client.repl.as_ref().map(|l| l.filter).unwrap_or_default();
        let donor = self.replica_links().find_map(|(_, l)| {
            (matches!(l.phase, ReplicaPhase::WaitBgsaveEnd) && l.filter == filter)
                .then(|| (l.initial_offset, l.pending.clone()))
        });
        if let (Some((offset, pending)), true) = (donor, self.repl.rdb_for_replicas) {
            let link = client.repl.as_mut().expect("set above");
            link.pending = pending;
            self.begin_full_sync(client, offset);
            return;
        }
        // A diskless sync may wait a little for more replicas to share it,
        // unless `repl-diskless-sync-max-replicas` of them already wait
        // (this one is out of the slab, so not among the links).
        let waiting = 1 + self.replicas_waiting_for_snapshot();
        let delayed = self.config.repl_diskless_sync
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

    /// +CONTINUE: the replica gets the backlog from `offset` on and is
    /// online.
    fn continue_replica(&mut self, client: &mut ClientState, offset: i64, capa_psync2: bool) {
        let link = client.repl.get_or_insert_default();
        link.phase = ReplicaPhase::Online;
        link.ack_time = Instant::now();
        if capa_psync2 {
            client
                .reply
                .raw(format!("+CONTINUE {}\r\n", self.replid).as_bytes());
        } else {
            client.reply.raw(b"+CONTINUE\r\n");
        }
        let missing = (self.repl.offset - offset + 1).max(0) as usize;
        if let Some(b) = &self.repl.backlog {
            let bytes = b.tail(missing);
            client.reply.raw(&bytes);
        }
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
        // A filtered dump is never the server's dump file: diskless only;
        // a replica that cannot take one gets the whole dump.
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
        if self.repl.rdb_pipe.is_some() || !ok {
            // A diskless transfer: what is left in the pipe still goes out
            // (`refill_bulk`); a failed one drops its replicas.
            if !ok {
                self.repl.rdb_pipe = None;
                self.drop_replicas_where(|p| {
                    matches!(
                        p,
                        ReplicaPhase::Streaming
                            | ReplicaPhase::WaitFirstAck
                            | ReplicaPhase::WaitBgsaveEnd
                    )
                });
            }
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

    /// The whole dump file is out to a replica: it gets the stream kept
    /// meanwhile and is online (or, with `rdb-only`, is closed once its
    /// output is written).
    pub fn bulk_sent(&mut self, c: &mut ClientState) {
        let Some(link) = c.repl.as_mut() else {
            return;
        };
        if link.rdb_only {
            c.close_after_reply = true;
            link.phase = ReplicaPhase::Online;
            return;
        }
        let pending = std::mem::take(&mut link.pending);
        c.reply.raw(&pending);
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
            self.repl.rdb_pipe = None;
            super::snapshot::kill_child(self);
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
                self.repl.rdb_pipe = None;
                // Nobody reads the pipe any more: the child would block on
                // it for ever, holding the one child slot.
                super::snapshot::kill_child(self);
                self.drop_replicas_where(|p| matches!(p, ReplicaPhase::Streaming));
            }
        }
    }

    /// The first ACK after a diskless transfer: the stream kept for the
    /// replica goes out and it is online.
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
        let pending = std::mem::take(&mut link.pending);
        link.phase = ReplicaPhase::Online;
        client.reply.raw(&pending);
        info!("Synchronization with replica {} succeeded", client.addr);
    }

    /// Close the replicas whose phase matches.
    fn drop_replicas_where(&mut self, pick: impl Fn(&ReplicaPhase) -> bool) {
        let doomed: Vec<u64> = self
            .replica_links()
            .filter(|(_, l)| pick(&l.phase))
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
                ReplicaPhase::Online
                    if !link.old_sync && now.duration_since(link.ack_time) > timeout =>
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
        // CONFIG SET repl-backlog-size: the backlog takes the new size,
        // keeping the most recent bytes it can (Redis's resizeReplicationBacklog).
        let size = self.config.repl_backlog_size.max(1) as usize;
        if let Some(b) = self.repl.backlog.as_mut() {
            if b.size() != size {
                let kept = b.tail(b.histlen.min(size));
                let mut resized = Backlog::new(size);
                resized.append(&kept);
                *b = resized;
            }
        }
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
    fn the_backlog_keeps_the_last_bytes() {
        let mut b = Backlog::new(8);
        b.append(b"abcdef");
        assert_eq!(b.tail(3), b"def");
        b.append(b"ghij");
        assert_eq!(b.histlen, 8);
        assert_eq!(b.tail(8), b"cdefghij");
        b.append(b"0123456789ABC");
        assert_eq!(b.tail(8), b"56789ABC");
    }
}
