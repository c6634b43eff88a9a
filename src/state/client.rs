//! What the server knows about one client, apart from its socket and query
//! buffer (which the event loop keeps): selected database, reply buffer,
//! authentication, blocking, transaction, subscriptions.

use std::os::fd::RawFd;
use std::time::Instant;

use crate::protocol::{Proto, Reply};

/// Everything about a client that command handlers may read or change. The
/// query buffer is kept outside so that handlers can borrow arguments from it
/// while writing replies here.
/// How a client's EVAL is debugged (SCRIPT DEBUG).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LdbMode {
    Off,
    /// YES: in a forked child; the dataset's changes are thrown away.
    Fork,
    /// SYNC: in the server, which waits; changes are kept.
    Sync,
}

pub struct ClientState {
    pub id: u64,
    /// Selected database.
    pub db: usize,
    pub reply: Reply,
    pub name: Option<Vec<u8>>,
    /// Logged in with AUTH or HELLO (whether it must be: `Acl::auth_required`).
    pub authenticated: bool,
    /// The ACL user it runs as, and that user's name (CLIENT LIST `user`).
    pub user: crate::state::acl::UserId,
    pub user_name: std::sync::Arc<[u8]>,
    /// Peer address (`ip:port`, or the socket path for unix clients).
    pub addr: String,
    pub laddr: String,
    pub fd: RawFd,
    pub is_unix: bool,
    /// Connected from 127.0.0.1, ::1 or the unix socket (Redis's
    /// `islocalClient`): what protected mode and the `local` gates accept.
    pub is_local: bool,
    pub created: Instant,
    /// Last time the client sent a command (for `timeout` and CLIENT LIST idle).
    pub last_interaction: Instant,
    /// Lower-case name of the last command run (CLIENT LIST `cmd`).
    pub last_cmd: &'static str,
    /// Close once the pending replies are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Close as soon as possible, without writing (CLIENT KILL).
    pub close_asap: bool,
    /// Bytes of the reply (see `Reply::len`) already written to the socket.
    pub sent: usize,
    /// Query buffer size, copied in for CLIENT LIST while the client runs.
    pub qbuf_len: usize,
    pub qbuf_free: usize,
    /// Set while the client waits in a blocking command (BLPOP, …).
    pub blocked: Option<Blocked>,
    /// CLIENT TRACKING settings, when on.
    pub tracking: Option<super::tracking::ClientTracking>,
    /// The master's view of this client once it is a replica.
    pub repl: Option<super::replication::ReplicaLink>,
    /// The master asked for an ACK (REPLCONF GETACK) during this command.
    pub ack_requested: bool,
    /// Replication offset just past this client's last write (WAIT).
    pub woff: i64,
    /// CLIENT NO-EVICT ON.
    pub no_evict: bool,
    /// The reply buffer's size and its recent peak (CLIENT LIST `rbs`,
    /// `rbp`), which the cron resizes.
    pub rbuf: ReplyBufSize,
    /// The error count when the last call was accounted (so that EXEC is
    /// not counted as failed for its commands' errors).
    pub errors_accounted: u64,
    /// The master's transaction so far (MULTI and queued commands), counted
    /// in the offset at its EXEC or DISCARD.
    pub master_multi_bytes: Vec<u8>,
    /// Since when the pending output has been past the soft limit.
    pub obuf_soft_since: Option<Instant>,
    /// Big bulk arguments of the running command, read into buffers of
    /// their own: a handler may take one to store it without copying (SET
    /// of a 500 MB value). The argument's slice still points into the
    /// buffer afterwards, so the buffer must outlive the command (it does:
    /// it now belongs to the keyspace entry the handler made).
    pub big_args: Vec<Vec<u8>>,
    /// Inside MULTI: the commands queued for EXEC.
    pub multi: Option<MultiState>,
    /// The last transaction's buffers, emptied, for the next MULTI.
    pub spare_multi: MultiState,
    /// This client's slot in the server's slab (and its mio token).
    pub slot: usize,
    /// Keys this client WATCHes, as (database, key).
    pub watched: Vec<super::watch::WatchedKey>,
    /// A watched key was touched: the next EXEC fails (Redis's DIRTY_CAS).
    pub dirty_cas: bool,
    /// Subscribed channels (SUBSCRIBE), patterns (PSUBSCRIBE, in the order
    /// given, as Redis keeps them) and shard channels (SSUBSCRIBE).
    pub channels: std::collections::HashSet<Vec<u8>>,
    pub patterns: Vec<Vec<u8>>,
    pub shard_channels: std::collections::HashSet<Vec<u8>>,
    /// Receives every command the server runs (MONITOR).
    pub monitor: bool,
    /// A replica of this server, or our master's link (replication).
    pub kind: ClientKind,
    /// Queued in the server's pending writes.
    pub pending_write: bool,
    /// SCRIPT DEBUG YES or SYNC: the next EVAL is debugged.
    pub ldb: LdbMode,
    /// The event loop must move the socket off io_uring before the
    /// debugging session reads it directly (set by SCRIPT DEBUG).
    pub ldb_detach: bool,
    /// A TLS connection (the debugger reads the socket itself, so it is
    /// not offered there).
    pub is_tls: bool,
    /// Running the commands of an EXEC, or replaying the AOF: blocking
    /// commands answer at once instead of blocking (Redis's
    /// CLIENT_DENY_BLOCKING).
    pub deny_blocking: bool,
    /// Replies waiting for the AOF (`appendfsync always`): (reply position,
    /// AOF offset that must be on disk before the bytes up to that
    /// position are sent), in order.
    pub holds: std::collections::VecDeque<(usize, u64)>,
    /// Reply bytes already released by satisfied holds.
    pub released: usize,
    /// Listed in the AOF's held clients.
    pub aof_held: bool,
    /// CLIENT REPLY OFF: replies are dropped (pushes still arrive).
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the current command's reply is dropped; the
    /// next command's when `reply_skip_next`.
    pub reply_skip: bool,
    pub reply_skip_next: bool,
}

/// What role a connection plays; with subscriptions, it decides the
/// client's output-buffer class and what CLIENT LIST/KILL TYPE see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientKind {
    #[default]
    Normal,
    /// A replica attached with SYNC/PSYNC.
    Replica,
    /// The link to our master.
    Master,
}

/// A transaction being queued (between MULTI and EXEC).
#[derive(Debug, Default)]
pub struct MultiState {
    /// Queued commands: (command table index, end offset of each of its
    /// arguments in `args`).
    pub commands: Vec<(usize, std::ops::Range<usize>)>,
    /// End offsets in `args` of every queued argument, in order.
    pub arg_ends: Vec<usize>,
    /// Every queued argument back to back, copied out of the query buffer
    /// (one growing buffer, not an allocation per argument).
    pub args: Vec<u8>,
    /// How many were queued (CLIENT LIST `multi`; EXEC moves the commands
    /// out while it runs them).
    pub queued: usize,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    pub errored: bool,
    /// Bytes held by the queued arguments (CLIENT LIST `multi-mem`).
    pub mem: usize,
    /// Flags of every queued command, OR-ed (EXEC is refused as a write
    /// when it would run one).
    pub flags: u32,
    /// Flags some queued command lacks, OR-ed (Redis's cmd_inv_flags: EXEC
    /// is refused on a stale replica, or while loading, when one queued
    /// command may not run then).
    pub inv_flags: u32,
}

/// Buffers a finished transaction leaves for the next one to reuse.
const MULTI_KEEP_BYTES: usize = 64 * 1024;

impl MultiState {
    /// Empty, keeping the buffers' capacity for the next MULTI unless they
    /// grew large.
    pub fn recycle(mut self) -> MultiState {
        if self.args.capacity() > MULTI_KEEP_BYTES {
            return MultiState::default();
        }
        self.commands.clear();
        self.arg_ends.clear();
        self.args.clear();
        self.queued = 0;
        self.errored = false;
        self.mem = 0;
        self.flags = 0;
        self.inv_flags = 0;
        self
    }
}

/// Redis's reply chunk (PROTO_REPLY_CHUNK_BYTES): a new client's reply
/// buffer size, and the most the cron grows it to.
pub const REPLY_CHUNK_BYTES: usize = 16 * 1024;
/// The least the cron shrinks a reply buffer to (PROTO_REPLY_MIN_BYTES).
pub const REPLY_MIN_BYTES: usize = 1024;

/// The size a client's reply buffer is kept at between turns, and the most
/// it held since the peak was last reset (Redis's `buf_usable_size`,
/// `buf_peak`). A turn's output larger than that still goes out in one
/// piece; the buffer comes back to this size once it is written.
#[derive(Debug, Clone, Copy)]
pub struct ReplyBufSize {
    pub size: usize,
    pub peak: usize,
    pub peak_reset_ms: i64,
}

/// What the cron did to a reply buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Resized {
    Kept,
    Shrunk,
    Expanded,
}

impl ReplyBufSize {
    pub fn new(now_ms: i64) -> ReplyBufSize {
        ReplyBufSize {
            size: REPLY_CHUNK_BYTES,
            peak: 0,
            peak_reset_ms: now_ms,
        }
    }

    /// Note that `held` bytes of output are waiting (the buffer holds at
    /// most its size of them; the rest would be Redis's reply list).
    pub fn note_held(&mut self, held: usize) {
        self.peak = self.peak.max(held.min(self.size));
    }

    /// Redis's clientsCronResizeOutputBuffer: shrink to the peak when it
    /// used less than half, double (up to a chunk) when it was full; then,
    /// every `peak_reset_every` ms (never when negative), forget the peak.
    /// `held` is what the buffer holds now.
    pub fn cron_resize(&mut self, held: usize, now_ms: i64, peak_reset_every: i64) -> Resized {
        let half = self.size / 2;
        let double = self.size * 2;
        let mut resized = Resized::Kept;
        if half >= REPLY_MIN_BYTES && self.peak < half {
            self.size = REPLY_MIN_BYTES.max(self.peak + 1);
            resized = Resized::Shrunk;
        } else if double < REPLY_CHUNK_BYTES * 2 && self.peak == self.size {
            self.size = REPLY_CHUNK_BYTES.min(double);
            resized = Resized::Expanded;
        }
        if peak_reset_every >= 0 && now_ms - self.peak_reset_ms >= peak_reset_every {
            self.peak = held.min(self.size);
            self.peak_reset_ms = now_ms;
        }
        resized
    }
}

/// What a blocked client waits for.
#[derive(Debug, Clone)]
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
    /// The command, re-run when one of the keys gets data.
    pub argv: Vec<Vec<u8>>,
    pub deadline: Option<Instant>,
    /// Waiting for a sorted set (BZPOP*) rather than a list.
    pub zset: bool,
    /// Waiting for stream entries (XREAD, XREADGROUP BLOCK).
    pub stream: bool,
    /// Held back by CLIENT PAUSE (no keys): the command runs from scratch,
    /// checks and all, once the pause ends.
    pub postponed: bool,
    /// WAIT: (replication offset to reach, replicas wanted).
    pub wait: Option<(i64, i64)>,
    /// SHUTDOWN: until the server exits, or the shutdown is cancelled.
    pub shutdown: bool,
}

impl ClientState {
    pub fn new(
        id: u64,
        fd: RawFd,
        addr: String,
        laddr: String,
        is_unix: bool,
        is_local: bool,
        authenticated: bool,
    ) -> ClientState {
        let now = Instant::now();
        // The reply buffer is allocated at its size up front, as Redis's
        // is, so what a client is weighed at does not move with each reply.
        let mut reply = Reply::new(Proto::Resp2);
        reply.buf.reserve_exact(REPLY_CHUNK_BYTES);
        ClientState {
            id,
            db: 0,
            reply,
            name: None,
            authenticated,
            user: crate::state::acl::DEFAULT_USER,
            user_name: b"default".as_slice().into(),
            addr,
            laddr,
            fd,
            is_unix,
            is_local,
            created: now,
            last_interaction: now,
            last_cmd: "NULL",
            close_after_reply: false,
            close_asap: false,
            sent: 0,
            qbuf_len: 0,
            qbuf_free: 0,
            blocked: None,
            tracking: None,
            repl: None,
            ack_requested: false,
            woff: 0,
            no_evict: false,
            rbuf: ReplyBufSize::new(crate::util::unix_time_ms()),
            errors_accounted: 0,
            master_multi_bytes: Vec::new(),
            obuf_soft_since: None,
            big_args: Vec::new(),
            multi: None,
            spare_multi: MultiState::default(),
            slot: usize::MAX,
            watched: Vec::new(),
            dirty_cas: false,
            channels: Default::default(),
            patterns: Vec::new(),
            shard_channels: Default::default(),
            monitor: false,
            kind: ClientKind::Normal,
            pending_write: false,
            deny_blocking: false,
            ldb: LdbMode::Off,
            ldb_detach: false,
            is_tls: false,
            holds: Default::default(),
            released: 0,
            aof_held: false,
            reply_off: false,
            reply_skip: false,
            reply_skip_next: false,
        }
    }

    /// Subscriptions of every kind (what makes RESP2 subscribed mode).
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    /// The class whose `client-output-buffer-limit` applies (Redis's
    /// `getClientType`: monitors count as replicas).
    pub fn output_class(&self) -> crate::config::ClientClass {
        use crate::config::ClientClass;
        // A MONITOR is a normal client here, as Redis's getClientType
        // ("normal clients including MONITOR clients").
        if self.kind == ClientKind::Replica {
            ClientClass::Replica
        } else if self.subscriptions() > 0 {
            ClientClass::PubSub
        } else {
            ClientClass::Normal
        }
    }

    /// The output-buffer limit that holds for this client: its class's,
    /// except that a replica's hard limit is never under
    /// `repl-backlog-size` (Redis ignores a smaller one: a partial sync
    /// would succeed and the replica be dropped at once, and its part of
    /// the shared buffer costs the backlog's memory anyway).
    pub fn output_limit(&self, config: &crate::config::Config) -> crate::config::BufferLimit {
        let mut limit = config.client_output_buffer_limit[self.output_class() as usize];
        if self.kind == ClientKind::Replica && limit.hard > 0 {
            limit.hard = limit.hard.max(config.repl_backlog_size);
        }
        limit
    }

    /// The name CLIENT LIST TYPE / CLIENT KILL TYPE match.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            ClientKind::Master => "master",
            ClientKind::Replica => "replica",
            ClientKind::Normal if self.subscriptions() > 0 => "pubsub",
            ClientKind::Normal => "normal",
        }
    }

    /// Never closed by `timeout` (Redis's clientsCronHandleTimeout):
    /// replicas, monitors, masters, blocked and subscribed clients.
    pub fn timeout_exempt(&self) -> bool {
        self.kind != ClientKind::Normal
            || self.monitor
            || self.blocked.is_some()
            || self.subscriptions() > 0
    }

    /// CLIENT LIST's `flags` field, letters in Redis's order.
    pub fn flags_string(&self) -> String {
        let mut f = String::new();
        if self.kind == ClientKind::Replica {
            f.push('S');
        } else if self.monitor {
            f.push('O');
        }
        if self.kind == ClientKind::Master {
            f.push('M');
        }
        if self.subscriptions() > 0 {
            f.push('P');
        }
        if self.multi.is_some() {
            f.push('x');
        }
        if self.blocked.is_some() {
            f.push('b');
        }
        if let Some(t) = &self.tracking {
            f.push('t');
            if t.broken_redirect {
                f.push('R');
            }
            if t.bcast {
                f.push('B');
            }
        }
        if self.dirty_cas {
            f.push('d');
        }
        if self.close_after_reply {
            f.push('c');
        }
        if self.close_asap {
            f.push('A');
        }
        if self.is_unix {
            f.push('U');
        }
        if self.no_evict {
            f.push('e');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// Take the buffer that argument `arg` (a slice of the running
    /// command's argv) lives in, if it was read into one of its own (see
    /// `big_args`).
    pub fn take_big_arg(&mut self, arg: &[u8]) -> Option<Vec<u8>> {
        let pos = self
            .big_args
            .iter()
            .position(|v| v.as_ptr() == arg.as_ptr() && v.len() == arg.len())?;
        Some(self.big_args.swap_remove(pos))
    }

    /// Has the pending output overcome `limit`: past its hard bytes, or
    /// past its soft bytes for its seconds (Redis's
    /// `checkClientOutputBufferLimits`)? Remembers when the soft limit was
    /// first passed, and forgets it once the output is back under it.
    /// Output held for this client: its replies, and for a replica how far
    /// behind the shared stream it is (Redis counts a replica's part of the
    /// replication buffer).
    pub fn output_used(&self) -> u64 {
        (self.pending_output() + self.stream_behind()) as u64
    }

    /// A replica: bytes of the shared stream not yet sent to it.
    pub fn stream_behind(&self) -> usize {
        self.repl
            .as_ref()
            .and_then(|l| l.stream)
            .map_or(0, |s| s.behind())
    }

    /// On our master's client: bytes of its stream received but not yet
    /// applied (what is in the query buffer, a transaction still queued, a
    /// command held back by CLIENT PAUSE), as Redis's read_reploff runs
    /// ahead of reploff.
    pub fn unapplied_master_bytes(&self) -> usize {
        let held = self.blocked.as_ref().map_or(0, |b| {
            let header = |n: usize| n.to_string().len() + 3;
            header(b.argv.len())
                + b.argv
                    .iter()
                    .map(|a| header(a.len()) + a.len() + 2)
                    .sum::<usize>()
        });
        self.qbuf_len + self.master_multi_bytes.len() + held
    }

    /// Memory the pending output takes: the reply buffer as allocated and
    /// this client's share of the values it holds by reference (a
    /// replica's place in the shared replication buffer costs nothing of
    /// its own).
    pub fn output_memory(&self) -> usize {
        crate::memory::allocation_size(self.reply.buf.capacity()) + self.reply.shared_memory()
    }

    pub fn output_limit_reached(
        &mut self,
        limit: crate::config::BufferLimit,
        now: Instant,
    ) -> bool {
        let used = self.output_used();
        if limit.hard > 0 && used >= limit.hard {
            return true;
        }
        if limit.soft > 0 && used >= limit.soft {
            // As Redis: the first sighting only starts the clock, and the
            // limit counts as reached once it has lasted more than its seconds.
            let Some(since) = self.obuf_soft_since else {
                self.obuf_soft_since = Some(now);
                return false;
            };
            return now.duration_since(since).as_secs() > limit.soft_secs;
        }
        self.obuf_soft_since = None;
        false
    }

    /// Hold the reply produced so far until the AOF is durable up to
    /// `aof_offset` (nothing to hold when it already is and nothing earlier
    /// is held).
    pub fn hold_until(&mut self, aof_offset: u64, durable: u64) {
        let len = self.reply.len();
        if aof_offset <= durable && self.holds.is_empty() {
            return;
        }
        if self.holds.back().is_some_and(|&(r, _)| r >= len) {
            return;
        }
        self.holds.push_back((len, aof_offset));
    }

    /// How far the reply may be written with the AOF durable up to
    /// `durable`: everything when nothing is held.
    pub fn write_limit(&mut self, durable: u64) -> usize {
        while let Some(&(r, a)) = self.holds.front() {
            if a > durable {
                break;
            }
            self.released = r;
            self.holds.pop_front();
        }
        if self.holds.is_empty() {
            self.released = 0;
            self.reply.len()
        } else {
            self.released.max(self.sent)
        }
    }

    /// Bytes of reply not yet written.
    /// Queue this client (by its slot and id) to be written before the
    /// loop sleeps, once.
    pub fn queue_write(&mut self, pending_writes: &mut Vec<(usize, u64)>) {
        if !std::mem::replace(&mut self.pending_write, true) {
            pending_writes.push((self.slot, self.id));
        }
    }

    /// Must this client be obeyed whatever the server's state (Redis's
    /// mustObeyClient): our master's stream, or an AOF being replayed.
    pub fn must_obey(&self) -> bool {
        self.kind == ClientKind::Master || self.id == 0
    }

    pub fn pending_output(&self) -> usize {
        self.reply.len() - self.sent
    }

    /// Of the pending output, the memory the client holds itself: values
    /// shared with the keyspace are not copied into a reply, so a slow
    /// reader of big values costs a slot per reply, not the value (what
    /// a turn of a client that does not read is measured in).
    pub fn output_held(&self) -> usize {
        self.reply.owned_from(self.sent)
    }

    /// Is there anything to write: replies, a dump file going to a replica
    /// with sendfile (which is not output held in memory, so it counts
    /// against no limit), or the stream to an online replica.
    pub fn wants_write(&self) -> bool {
        use super::replication::ReplicaPhase;
        self.pending_output() > 0
            || self.repl.as_ref().is_some_and(|l| match l.phase {
                ReplicaPhase::SendBulk { .. } => true,
                ReplicaPhase::Online => l.stream.is_some_and(|s| s.behind() > 0),
                _ => false,
            })
    }

    /// Run as no user: anything is allowed (the AOF loader, the master).
    pub fn set_superuser(&mut self) {
        self.user = crate::state::acl::NO_USER;
        self.user_name = b"(superuser)".as_slice().into();
    }

    /// One line of CLIENT LIST / CLIENT INFO, with Redis's field names.
    pub fn info_line(&self) -> String {
        self.info_line_running(&[])
    }

    /// Bytes of the arguments a blocked client keeps (Redis's
    /// `argv_len_sum`, CLIENT LIST `argv-mem`).
    fn kept_argv_len(&self) -> (usize, usize) {
        self.blocked.as_ref().map_or((0, 0), |b| {
            (b.argv.iter().map(|a| a.len()).sum(), b.argv.len())
        })
    }

    /// CLIENT LIST's line for the client running `argv` now (its arguments
    /// count in `argv-mem` and `tot-mem`, as Redis's do while a command runs).
    pub fn info_line_running(&self, argv: &[&[u8]]) -> String {
        let now = Instant::now();
        let flags = self.flags_string();
        let (multi, multi_mem) = match &self.multi {
            Some(m) => (m.queued as i64, m.mem),
            None => (-1, 0),
        };
        let name = self
            .name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        // Redis's view of pending output: up to one reply chunk in the
        // client's own buffer (`obl`), the rest in list nodes (`oll` nodes
        // holding `omem` bytes).
        let running_len: usize = argv.iter().map(|a| a.len()).sum();
        let running_mem = running_len + std::mem::size_of::<usize>() * argv.len();
        let argv_len = running_len + self.kept_argv_len().0;
        let pending = self.pending_output();
        let obl = pending.min(self.rbuf.size);
        let oll = (pending - obl).div_ceil(REPLY_CHUNK_BYTES);
        // A replica's part of the shared replication buffer counts too.
        let omem = pending - obl + self.stream_behind();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_interaction).as_secs(),
            flags,
            self.db,
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
            multi,
            self.qbuf_len,
            self.qbuf_free,
            argv_len,
            multi_mem,
            self.rbuf.size,
            self.rbuf.peak,
            obl,
            oll,
            omem,
            self.memory() + running_mem,
            self.last_cmd,
            String::from_utf8_lossy(&self.user_name),
            self.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            if self.reply.is_resp3() { 3 } else { 2 },
        )
    }

    /// Bytes this client holds as Redis counts them: its state, query
    /// buffer, pending output, a queued transaction, and what its
    /// subscriptions and watched keys cost (CLIENT LIST `tot-mem` and what
    /// client eviction weighs, as Redis's getClientMemoryUsage). A value
    /// queued by reference counts in full, as the copy Redis would hold:
    /// the client holds it for as long as it does not read, whatever
    /// becomes of the key, and a client that never reads must be found.
    pub fn memory(&self) -> usize {
        self.memory_besides_output()
            + crate::memory::allocation_size(self.reply.buf.capacity())
            + self.reply.shared_len()
    }

    /// [`memory`](Self::memory) with values queued by reference at this
    /// client's share of them: what its buffers add to used memory (INFO
    /// `mem_clients_*`, whose sum is inside `used_memory`).
    pub fn memory_held(&self) -> usize {
        self.memory_besides_output() + self.output_memory()
    }

    fn memory_besides_output(&self) -> usize {
        /// Bookkeeping per subscription or watched key, beside its name.
        const PER_NAME: usize = 16;
        let names = |it: &mut dyn Iterator<Item = usize>| it.map(|n| n + PER_NAME).sum::<usize>();
        self.qbuf_len
            + self.qbuf_free
            + self.stream_behind()
            + std::mem::size_of::<ClientState>()
            + self.multi.as_ref().map_or(0, |m| m.mem)
            + names(&mut self.channels.iter().map(|c| c.len()))
            + names(&mut self.patterns.iter().map(|p| p.len()))
            + names(&mut self.shard_channels.iter().map(|c| c.len()))
            + names(&mut self.watched.iter().map(|w| w.key.len()))
            + {
                let (len, argc) = self.kept_argv_len();
                len + std::mem::size_of::<usize>() * argc
            }
            + self.tracking.as_ref().map_or(0, |t| {
                // A BTreeSet element: the prefix's bytes, its Vec and a
                // share of the tree's node.
                names(&mut t.prefixes.iter().map(|p| p.len() + 24))
            })
    }
}
