//! The event loop and the server-wide state.
//!
//! One thread owns everything: the listeners, every client, every database.
//! mio (epoll, edge-triggered) tells us which sockets are ready; for each
//! readable client we read, run every complete command in the buffer, and
//! write the replies straight away, so a request/response costs one read and
//! one write. A client socket is registered for reads only; interest in
//! writability is added just while a reply could not be written in full (the
//! socket buffer is full) and dropped once it drains, so ACKs of a healthy
//! connection never wake the loop. The cron (at `hz`) runs active expiry,
//! idle timeouts, incremental rehashing and statistics.

pub mod client;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use tracing::{debug, info, warn};

use crate::commands;
use crate::config::{ClientClass, Config};
use crate::db::Db;
use crate::protocol::ParseLimits;
pub use client::{is_loopback_peer, Blocked, Client, ClientState, Conn};

/// Tokens at the top of the range are listeners and signals; clients use
/// their slab index.
const SIGNAL_TOKEN: Token = Token(usize::MAX - 1);
const LISTENER_TOKEN_BASE: usize = usize::MAX - 64;
/// Reads of one client per loop turn before others get their turn.
const MAX_READS_PER_TURN: usize = 16;
/// Bytes read from one client per loop turn: a 500 MB value arrives over
/// hundreds of turns, each a few milliseconds of copying and page faults,
/// instead of stalling everybody else while it is read.
const MAX_READ_BYTES_PER_TURN: usize = 1 << 20;
/// Pieces handed to one writev (replies holding shared values).
const IOVECS_PER_WRITE: usize = 64;
/// Keep at most this much reply buffer capacity around on an idle client.
const REPLY_BUF_KEEP: usize = 64 * 1024;
/// A client with this much output not yet taken by its socket runs no more
/// commands (and is not read from) until the output drains: a client that
/// sends 50 GETs of a 100 MB value and never reads makes one reply, not a
/// 5 GB buffer and a stalled loop.
const OUTPUT_PAUSE_BYTES: usize = 256 * 1024;
/// Time the cron spends on incremental rehashing per database.
const CRON_REHASH_BUDGET: Duration = Duration::from_millis(1);

/// Counters reported by INFO stats.
#[derive(Default, Debug)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub total_net_input_bytes: u64,
    pub total_net_output_bytes: u64,
    pub rejected_connections: u64,
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
    pub expire_cycle_cpu_ms: u64,
    pub evicted_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub total_error_replies: u64,
    pub total_reads_processed: u64,
    pub total_writes_processed: u64,
    /// Failed AUTH/HELLO AUTH attempts (Redis's `acl_access_denied_auth`).
    pub acl_access_denied_auth: u64,
    /// Error replies by code, in name order (INFO errorstats).
    pub errorstats: std::collections::BTreeMap<String, u64>,
    /// Clients closed for overcoming their output buffer limit.
    pub client_output_buffer_limit_disconnections: u64,
    /// Ring of (ops, input bytes, output bytes) per second samples.
    pub inst_ops: InstantMetric,
    pub inst_input: InstantMetric,
    pub inst_output: InstantMetric,
}

impl Stats {
    /// Move the error codes a reply collected into INFO errorstats.
    pub fn count_errors(&mut self, codes: &mut Vec<String>) {
        for code in codes.drain(..) {
            *self.errorstats.entry(code).or_insert(0) += 1;
        }
    }
}

/// Redis's instantaneous metric: a rate averaged over the last samples.
#[derive(Default, Debug)]
pub struct InstantMetric {
    samples: [f64; 16],
    idx: usize,
    last_value: u64,
    last_time: Option<Instant>,
}

impl InstantMetric {
    pub fn sample(&mut self, value: u64, now: Instant) {
        if let Some(t) = self.last_time {
            let dt = now.duration_since(t).as_secs_f64();
            if dt > 0.0 {
                self.samples[self.idx] = (value - self.last_value) as f64 / dt;
                self.idx = (self.idx + 1) % self.samples.len();
            }
        }
        self.last_value = value;
        self.last_time = Some(now);
    }

    pub fn rate(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }
}

/// A small, fast PRNG (xorshift64*) for RANDOMKEY and expiry sampling.
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

fn random_hex(n: usize) -> String {
    let mut s = String::with_capacity(n);
    while s.len() < n {
        s.push_str(&format!("{:016x}", random_u64()));
    }
    s.truncate(n);
    s
}

pub fn unix_time_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How the server was asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    Default,
    Save,
    NoSave,
}

/// A command written to the keyspace, as it is fed to persistence and
/// replicas: the database it applies to and its effective arguments.
pub type Propagated = (usize, Vec<Vec<u8>>);

/// State shared by all command handlers.
pub struct Server {
    pub config: Config,
    pub dbs: Vec<Db>,
    /// Client slab; the index is the client's mio token.
    pub clients: Vec<Option<Box<Client>>>,
    free_slots: Vec<usize>,
    pub connected_clients: usize,
    pub next_client_id: u64,
    pub stats: Stats,
    /// Changes since the last save.
    pub dirty: u64,
    pub start: Instant,
    pub start_unix_ms: i64,
    /// Time of the command being run (ms since the epoch), refreshed per batch.
    pub now_ms: i64,
    pub run_id: String,
    pub replid: String,
    pub rng: Rng,
    pub shutdown: Option<ShutdownMode>,
    pub active_expire_enabled: bool,
    /// Where propagated writes go. `None` while nothing consumes them (no AOF,
    /// no replicas yet); tests turn it on to observe propagation.
    pub propagated: Option<Vec<Propagated>>,
    pub peak_memory: usize,
    pub lastsave_unix: i64,
    /// Background saves and their status.
    pub snapshot: crate::persistence::snapshot::SnapshotState,
    /// A dump being loaded at startup (commands get -LOADING meanwhile).
    pub loading: Option<crate::persistence::snapshot::AsyncLoad>,
    pub rdb_last_load_keys: u64,
    pub rdb_last_load_expired: u64,
    /// Clients to close at the next opportunity (CLIENT KILL, timeouts), as
    /// (slot, client id) so a slot reused in between is left alone.
    pub to_close: Vec<(usize, u64)>,
    pub cron_loops: u64,
    pub executable: String,
    /// Clients with input left unread after their turn.
    pending_reads: Vec<usize>,
    /// Blocked clients per (db, key), in the order they blocked.
    pub blocked_keys: std::collections::HashMap<(usize, Vec<u8>), std::collections::VecDeque<u64>>,
    /// Blocked clients by deadline.
    pub block_deadlines: std::collections::BTreeSet<(Instant, u64)>,
    pub blocked_clients: usize,
    /// Slot of each client id.
    pub client_slots: std::collections::HashMap<u64, usize>,
    /// Clients just unblocked: their reply must be written and their
    /// buffered input processed.
    pub unblocked: Vec<(usize, u64)>,
    /// Largest query/reply buffers seen recently (INFO clients).
    pub recent_max_input: usize,
    pub recent_max_output: usize,
    /// Budgets for log lines that clients can trigger at will.
    pub log_limits: LogLimits,
    /// TCP listeners bound by CONFIG SET port, for the loop to swap in.
    pub new_tcp_listeners: Option<Vec<TcpListener>>,
}

/// One [`RateLimit`](crate::logging::RateLimit) per kind of client-triggered
/// log line.
#[derive(Debug)]
pub struct LogLimits {
    pub auth: crate::logging::RateLimit,
    pub protocol: crate::logging::RateLimit,
    pub denied: crate::logging::RateLimit,
}

impl Default for LogLimits {
    fn default() -> Self {
        let per_sec = |n| crate::logging::RateLimit::new(n, Duration::from_secs(1));
        LogLimits {
            auth: per_sec(5),
            protocol: per_sec(5),
            denied: per_sec(5),
        }
    }
}

impl Server {
    pub fn new(config: Config) -> Server {
        let seed = random_u64();
        let dbs = (0..config.databases).map(|i| Db::new(i, seed)).collect();
        let now = unix_time_ms();
        let mut srv = Server {
            config,
            dbs,
            clients: Vec::new(),
            free_slots: Vec::new(),
            connected_clients: 0,
            next_client_id: 1,
            stats: Stats::default(),
            dirty: 0,
            start: Instant::now(),
            start_unix_ms: now,
            now_ms: now,
            run_id: random_hex(40),
            replid: random_hex(40),
            rng: Rng::new(seed.rotate_left(17)),
            shutdown: None,
            active_expire_enabled: true,
            propagated: None,
            peak_memory: 0,
            lastsave_unix: now / 1000,
            snapshot: Default::default(),
            loading: None,
            rdb_last_load_keys: 0,
            rdb_last_load_expired: 0,
            to_close: Vec::new(),
            cron_loops: 0,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            pending_reads: Vec::new(),
            blocked_keys: Default::default(),
            block_deadlines: Default::default(),
            blocked_clients: 0,
            client_slots: Default::default(),
            unblocked: Vec::new(),
            recent_max_input: 0,
            recent_max_output: 0,
            log_limits: LogLimits::default(),
            new_tcp_listeners: None,
        };
        srv.apply_lazyfree_config();
        srv
    }

    /// Hand the `lazyfree-lazy-server-del` setting down to the databases
    /// (at startup and after CONFIG SET).
    pub fn apply_lazyfree_config(&mut self) {
        let mode = crate::db::FreeMode::lazy_if(self.config.lazyfree_lazy_server_del);
        for db in &mut self.dbs {
            db.server_del = mode;
        }
    }

    /// Refresh the cached time and the access clock of new entries.
    pub fn update_time(&mut self) {
        self.now_ms = unix_time_ms();
        crate::db::entry::set_lru_clock(commands::lru_clock(self.now_ms));
    }

    /// Does anything consume propagated writes? Callers skip building a
    /// rewritten command (and copying its values) when nothing does.
    pub fn propagating(&self) -> bool {
        self.propagated.is_some()
    }

    /// Record a write for persistence and replicas.
    pub fn propagate(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        if let Some(log) = self.propagated.as_mut() {
            log.push((db, argv));
        }
    }

    /// Bytes allocated by this thread right now: cheap enough to check before
    /// every write command against `maxmemory`.
    pub fn used_memory(&self) -> usize {
        crate::memory::used_memory()
    }

    /// Run a command on behalf of an in-process caller (tests, replay). The
    /// reply bytes are returned in the client's protocol.
    pub fn execute_detached(&mut self, client: &mut ClientState, argv: &[&[u8]]) -> Vec<u8> {
        self.update_time();
        commands::execute(self, client, argv);
        client.reply.take_bytes()
    }

    /// The slab index the next inserted client will get.
    fn vacant_slot(&self) -> usize {
        self.free_slots
            .last()
            .copied()
            .unwrap_or(self.clients.len())
    }

    fn insert_client(&mut self, client: Client) -> usize {
        self.connected_clients += 1;
        let id = client.st.id;
        let boxed = Some(Box::new(client));
        let slot = if let Some(i) = self.free_slots.pop() {
            self.clients[i] = boxed;
            i
        } else {
            self.clients.push(boxed);
            self.clients.len() - 1
        };
        self.client_slots.insert(id, slot);
        slot
    }

    fn remove_client(&mut self, idx: usize) -> Option<Box<Client>> {
        let mut c = self.clients.get_mut(idx)?.take()?;
        self.free_slots.push(idx);
        self.connected_clients -= 1;
        self.client_slots.remove(&c.st.id);
        commands::blocking::unblock(self, &mut c.st);
        Some(c)
    }

    /// Close a client that overcame its output buffer limit, logged as Redis
    /// logs it; its buffer is freed at once since nothing more is written.
    pub fn close_for_output_limit(&mut self, st: &mut ClientState) {
        warn!(
            "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
            st.info_line()
        );
        self.stats.client_output_buffer_limit_disconnections += 1;
        st.close_asap = true;
        st.reply.clear();
        st.reply.buf = Vec::new();
        st.sent = 0;
    }

    /// The soft output limit also counts time while nothing is added (a
    /// paused client runs no commands): check it once per cron tick.
    fn check_output_limits_cron(&mut self, now: Instant) {
        let limit = self.config.client_output_buffer_limit[ClientClass::Normal as usize];
        if limit.soft == 0 && limit.hard == 0 {
            return;
        }
        let mut over = Vec::new();
        for (i, c) in self.clients.iter_mut().enumerate() {
            if let Some(c) = c {
                if c.st.pending_output() > 0 && c.st.output_limit_reached(limit, now) {
                    over.push(i);
                }
            }
        }
        for i in over {
            if let Some(mut c) = self.clients[i].take() {
                self.close_for_output_limit(&mut c.st);
                self.to_close.push((i, c.st.id));
                self.clients[i] = Some(c);
            }
        }
    }

    /// Find a client's slab index by id.
    pub fn client_index(&self, id: u64) -> Option<usize> {
        self.client_slots.get(&id).copied()
    }

    /// Cron: active expiry, rehashing, timeouts, metrics.
    fn cron(&mut self) {
        self.cron_loops += 1;
        self.update_time();
        let now = Instant::now();
        self.stats
            .inst_ops
            .sample(self.stats.total_commands_processed, now);
        self.stats
            .inst_input
            .sample(self.stats.total_net_input_bytes, now);
        self.stats
            .inst_output
            .sample(self.stats.total_net_output_bytes, now);
        let used = self.used_memory();
        if used > self.peak_memory {
            self.peak_memory = used;
        }
        if self.loading.is_none() {
            if self.active_expire_enabled {
                commands::expire::active_expire_cycle(self);
            }
            crate::persistence::snapshot::cron(self);
        }
        if self.config.activerehashing {
            for db in &mut self.dbs {
                if db.main.is_rehashing() || db.expires.is_rehashing() {
                    db.rehash_for(CRON_REHASH_BUDGET);
                }
            }
        }
        self.check_output_limits_cron(now);
        if self.config.timeout > 0 {
            let limit = Duration::from_secs(self.config.timeout as u64);
            for (i, c) in self.clients.iter().enumerate() {
                if let Some(c) = c {
                    if now.duration_since(c.st.last_interaction) > limit {
                        debug!(client = %c.st.addr, "closing idle client");
                        self.to_close.push((i, c.st.id));
                    }
                }
            }
        }
        // Decay the recent maxima every few seconds, as Redis's sampling does.
        if self
            .cron_loops
            .is_multiple_of((self.config.hz as u64 * 5).max(1))
        {
            self.recent_max_input = 0;
            self.recent_max_output = 0;
        }
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// The event loop: owns the poller, the listeners and the [`Server`].
pub struct EventLoop {
    poll: Poll,
    listeners: Vec<Listener>,
    _signals: Signals,
    pub srv: Server,
    argv_scratch: Vec<&'static [u8]>,
}

impl EventLoop {
    /// Bind the listeners named by the configuration.
    pub fn bind(config: Config) -> io::Result<EventLoop> {
        let poll = Poll::new()?;
        let mut listeners: Vec<Listener> = bind_tcp_listeners(&config)?
            .into_iter()
            .map(Listener::Tcp)
            .collect();
        if !config.unixsocket.is_empty() {
            let _ = std::fs::remove_file(&config.unixsocket);
            let l = UnixListener::bind(&config.unixsocket)?;
            if config.unixsocketperm != 0 {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(
                    &config.unixsocket,
                    std::fs::Permissions::from_mode(config.unixsocketperm),
                )?;
            }
            info!("Listening on unix socket {}", config.unixsocket);
            listeners.push(Listener::Unix(l));
        }
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no listener: set port or unixsocket",
            ));
        }
        for (i, l) in listeners.iter_mut().enumerate() {
            let token = Token(LISTENER_TOKEN_BASE + i);
            match l {
                Listener::Tcp(l) => poll.registry().register(l, token, Interest::READABLE)?,
                Listener::Unix(l) => poll.registry().register(l, token, Interest::READABLE)?,
            }
        }
        let mut signals = Signals::new([SIGTERM, SIGINT])?;
        poll.registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        Ok(EventLoop {
            poll,
            listeners,
            _signals: signals,
            srv: Server::new(config),
            argv_scratch: Vec::new(),
        })
    }

    /// Replace the TCP listeners (CONFIG SET port): the new ones were bound
    /// by the command, so nothing here can fail but registration, which is
    /// logged. Unix listeners stay.
    fn swap_tcp_listeners(&mut self, tcp: Vec<TcpListener>) {
        let old = std::mem::take(&mut self.listeners);
        let mut keep = Vec::new();
        for mut l in old {
            let _ = match &mut l {
                Listener::Tcp(l) => self.poll.registry().deregister(l),
                Listener::Unix(l) => self.poll.registry().deregister(l),
            };
            if let Listener::Unix(_) = l {
                keep.push(l);
            }
        }
        let mut listeners: Vec<Listener> = tcp.into_iter().map(Listener::Tcp).collect();
        listeners.extend(keep);
        for (i, l) in listeners.iter_mut().enumerate() {
            let token = Token(LISTENER_TOKEN_BASE + i);
            let res = match l {
                Listener::Tcp(l) => self.poll.registry().register(l, token, Interest::READABLE),
                Listener::Unix(l) => self.poll.registry().register(l, token, Interest::READABLE),
            };
            if let Err(e) = res {
                warn!("Registering a listener after CONFIG SET port: {e}");
            }
        }
        self.listeners = listeners;
    }

    /// The TCP port actually bound (useful with `--port 0` in tests).
    pub fn local_port(&self) -> Option<u16> {
        self.listeners.iter().find_map(|l| match l {
            Listener::Tcp(l) => l.local_addr().ok().map(|a| a.port()),
            Listener::Unix(_) => None,
        })
    }

    /// Serve until SHUTDOWN or a signal.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now();
        info!("Ready to accept connections");
        loop {
            let now = Instant::now();
            if now >= next_cron {
                self.srv.cron();
                let period = Duration::from_millis(1000 / self.srv.config.hz.max(1) as u64);
                next_cron = now + period;
            }
            self.close_marked();
            if let Some(tcp) = self.srv.new_tcp_listeners.take() {
                self.swap_tcp_listeners(tcp);
            }
            if let Some(mode) = self.srv.shutdown {
                if self.shutdown(mode) {
                    return Ok(());
                }
            }
            if self.srv.loading.is_some() {
                match crate::persistence::snapshot::continue_loading(&mut self.srv) {
                    Ok(_) => {}
                    Err(e) => return Err(io::Error::other(e)),
                }
            }
            commands::blocking::expire_blocked(&mut self.srv, Instant::now());
            self.resume_unblocked();
            let mut wake = next_cron;
            if let Some(&(deadline, _)) = self.srv.block_deadlines.first() {
                wake = wake.min(deadline);
            }
            let timeout = if self.srv.pending_reads.is_empty()
                && self.srv.unblocked.is_empty()
                && self.srv.loading.is_none()
            {
                wake.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            self.srv.update_time();
            self.resume_unblocked();
            for idx in std::mem::take(&mut self.srv.pending_reads) {
                self.handle_client(idx, true, false, false);
            }
            for event in events.iter() {
                match event.token() {
                    SIGNAL_TOKEN => {
                        warn!("Received SIGTERM/SIGINT scheduling shutdown...");
                        self.srv.shutdown = Some(ShutdownMode::Default);
                    }
                    Token(t) if t >= LISTENER_TOKEN_BASE => self.accept(t - LISTENER_TOKEN_BASE),
                    Token(idx) => self.handle_client(
                        idx,
                        event.is_readable() || event.is_read_closed() || event.is_error(),
                        event.is_writable(),
                        event.is_read_closed(),
                    ),
                }
            }
        }
    }

    fn accept(&mut self, li: usize) {
        loop {
            let accepted = match &self.listeners[li] {
                Listener::Tcp(l) => l.accept().map(|(s, a)| {
                    let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                    let _ = s.set_nodelay(true);
                    set_keepalive(s.as_raw_fd(), self.srv.config.tcp_keepalive);
                    (
                        Conn::Tcp(s),
                        a.to_string(),
                        laddr,
                        false,
                        is_loopback_peer(&a),
                    )
                }),
                Listener::Unix(l) => l.accept().map(|(s, _)| {
                    let path = self.srv.config.unixsocket.clone();
                    (Conn::Unix(s), format!("{path}:0"), path, true, true)
                }),
            };
            let (mut conn, addr, laddr, is_unix, is_local) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("Accepting client connection: {e}");
                    return;
                }
            };
            self.srv.stats.total_connections_received += 1;
            if self.srv.connected_clients as i64 >= self.srv.config.maxclients {
                reject_connection(&conn, b"-ERR max number of clients reached\r\n");
                self.srv.stats.rejected_connections += 1;
                continue;
            }
            // Protected mode (Redis's clientAcceptHandler): while the default
            // user has no password, only local clients are served, whatever
            // `bind` says.
            if self.srv.config.protected_mode && self.srv.config.requirepass.is_empty() && !is_local
            {
                reject_connection(&conn, PROTECTED_MODE_DENIED);
                self.srv.stats.rejected_connections += 1;
                if let Some(skipped) = self.srv.log_limits.denied.allow(Instant::now()) {
                    warn!(
                        client = %addr,
                        "Refused a non-local connection: protected mode is on and no password is set{}",
                        crate::logging::suppressed_note(skipped)
                    );
                }
                continue;
            }
            let id = self.srv.next_client_id;
            self.srv.next_client_id += 1;
            let authenticated = self.srv.config.requirepass.is_empty();
            let st = ClientState::new(id, conn.fd(), addr, laddr, is_unix, is_local, authenticated);
            // Register under the slot the client is about to take.
            let idx = self.srv.vacant_slot();
            let interest = Interest::READABLE;
            let reg = match &mut conn {
                Conn::Tcp(s) => self.poll.registry().register(s, Token(idx), interest),
                Conn::Unix(s) => self.poll.registry().register(s, Token(idx), interest),
            };
            if let Err(e) = reg {
                warn!("Registering client: {e}");
                continue;
            }
            let slot = self.srv.insert_client(Client {
                conn,
                query: crate::protocol::QueryBuffer::new(),
                st,
                write_interest: false,
                input_paused: false,
                peer_closed: false,
            });
            debug_assert_eq!(slot, idx);
            debug!(client = id, "Accepted connection");
        }
    }

    /// Read, execute and reply for one client.
    fn handle_client(&mut self, idx: usize, readable: bool, writable: bool, read_closed: bool) {
        let Some(mut client) = self.srv.clients.get_mut(idx).and_then(|c| c.take()) else {
            return;
        };
        let mut close = false;
        if writable && client.st.pending_output() > 0 {
            close |= !self.write_client(idx, &mut client);
        }
        // A paused client is served again once its output has drained.
        let resume = client.input_paused && client.st.pending_output() < OUTPUT_PAUSE_BYTES;
        if resume {
            client.input_paused = false;
        }
        // A FIN reported once must be remembered: the read that sees it
        // may come turns later (read budget, pause), with no new event.
        client.peer_closed |= read_closed;
        let mut read_ok = true;
        if (readable || resume) && !close && !client.st.close_after_reply && !client.input_paused {
            let peer_closed = client.peer_closed;
            read_ok = self.read_client(idx, &mut client, peer_closed);
        }
        // Replies to commands that arrived with the peer's FIN are still
        // written (best effort) before the connection is closed.
        if !close && client.st.pending_output() > 0 {
            close |= !self.write_client(idx, &mut client);
        }
        close |= !read_ok;
        if client.st.close_after_reply && client.st.pending_output() == 0 {
            close = true;
        }
        close |= client.st.close_asap;
        self.srv.clients[idx] = Some(client);
        if close {
            self.close_client(idx);
        }
    }

    /// Write the replies of clients that were just unblocked and run the
    /// commands they sent while blocked.
    fn resume_unblocked(&mut self) {
        while !self.srv.unblocked.is_empty() {
            for (idx, id) in std::mem::take(&mut self.srv.unblocked) {
                // The slot may have been reused since: only resume the same client.
                let same = self
                    .srv
                    .clients
                    .get(idx)
                    .and_then(|c| c.as_ref())
                    .is_some_and(|c| c.st.id == id);
                let Some(mut client) = same.then(|| self.srv.clients[idx].take()).flatten() else {
                    continue;
                };
                let mut close = false;
                if client.st.blocked.is_none() && client.query.unparsed() > 0 {
                    close |= self.run_buffered(idx, &mut client).is_none();
                }
                if client.st.pending_output() > 0 {
                    close |= !self.write_client(idx, &mut client);
                }
                close |= client.st.close_asap
                    || (client.st.close_after_reply && client.st.pending_output() == 0);
                self.srv.clients[idx] = Some(client);
                if close {
                    self.close_client(idx);
                }
            }
        }
    }

    /// Read what the socket has and execute the complete commands. Returns
    /// false when the client must be closed.
    fn read_client(&mut self, idx: usize, client: &mut Client, read_closed: bool) -> bool {
        // Input left over from a pause runs before anything new is read.
        if client.query.unparsed() > 0 {
            match self.run_buffered(idx, client) {
                None => return false,
                Some(false) => return true,
                Some(true) => {}
            }
        }
        let mut turn_bytes = 0;
        for _ in 0..MAX_READS_PER_TURN {
            if turn_bytes >= MAX_READ_BYTES_PER_TURN {
                break;
            }
            let (n, want) = match client.query.read_from_fd(client.conn.fd()) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    debug!(client = %client.st.addr, "Reading from client: {e}");
                    return false;
                }
            };
            if n == 0 {
                return self.finish_after_eof(idx, client);
            }
            self.srv.stats.total_reads_processed += 1;
            self.srv.stats.total_net_input_bytes += n as u64;
            turn_bytes += n;
            client.st.last_interaction = Instant::now();
            match self.run_buffered(idx, client) {
                None => return false,
                Some(false) => return true,
                Some(true) => {}
            }
            if client.query.len() as u64 > self.srv.config.client_query_buffer_limit {
                warn!(client = %client.st.addr, "Closing client that reached max query buffer length");
                return false;
            }
            // A short read means the socket is drained; with edge-triggered
            // polling a new edge will come with new data, so we spare the
            // read() that would only return EAGAIN. A pending FIN is the
            // exception: it will not raise another edge.
            if n < want && !read_closed {
                return true;
            }
        }
        // Fairness: others get their turn, this client continues next turn
        // (once: an event for it in the same turn must not queue it twice).
        if !self.srv.pending_reads.contains(&idx) {
            self.srv.pending_reads.push(idx);
        }
        true
    }

    /// The peer shut down its side: it has sent all it will. Its buffered
    /// commands still run and their replies are still written (a pipeline
    /// sent with `nc -N` gets every answer), then the connection closes.
    /// Returns false when it must close right away.
    fn finish_after_eof(&mut self, idx: usize, client: &mut Client) -> bool {
        match self.run_buffered(idx, client) {
            None => false,
            // Paused: the end of the stream is seen again once resumed.
            Some(_) if client.input_paused => true,
            Some(_) => {
                client.st.close_after_reply = true;
                true
            }
        }
    }

    /// Run the buffered commands, handing replies to the socket whenever
    /// they pass [`OUTPUT_PAUSE_BYTES`]. `Some(true)`: go on reading;
    /// `Some(false)`: stop reading for now (the output is stuck and the
    /// client paused, or it accepts no more input); `None`: close it.
    fn run_buffered(&mut self, idx: usize, client: &mut Client) -> Option<bool> {
        loop {
            if !self.process_input(client) {
                return Some(false);
            }
            if client.st.close_asap {
                return None;
            }
            if client.st.pending_output() < OUTPUT_PAUSE_BYTES {
                return Some(true);
            }
            if !self.write_client(idx, client) {
                return None;
            }
            if client.st.pending_output() >= OUTPUT_PAUSE_BYTES {
                // Resumed by the writable event that drains it.
                client.input_paused = true;
                return Some(false);
            }
        }
    }

    /// Parse and run every complete command in the query buffer, until the
    /// client's pending output passes [`OUTPUT_PAUSE_BYTES`]. Returns false
    /// when the client stops accepting input (QUIT, protocol error).
    fn process_input(&mut self, client: &mut Client) -> bool {
        let limits = |c: &Client, srv: &Server| ParseLimits {
            max_bulk_len: srv.config.proto_max_bulk_len,
            authenticated: c.st.authenticated,
        };
        loop {
            if client.st.close_after_reply
                || client.st.close_asap
                || client.st.blocked.is_some()
                || self.srv.shutdown.is_some()
                || client.st.pending_output() >= OUTPUT_PAUSE_BYTES
            {
                break;
            }
            match client.query.parse(limits(client, &self.srv)) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    let msg = e.message();
                    if let Some(skipped) = self.srv.log_limits.protocol.allow(Instant::now()) {
                        warn!(
                            client = %client.st.addr,
                            "{msg}{}",
                            crate::logging::suppressed_note(skipped)
                        );
                    }
                    client.st.reply.error(&msg);
                    self.srv.stats.total_error_replies += 1;
                    self.srv
                        .stats
                        .count_errors(&mut client.st.reply.error_codes);
                    client.st.close_after_reply = true;
                    break;
                }
            }
            client.st.qbuf_len = client.query.unparsed();
            client.st.qbuf_free = client.query.capacity().saturating_sub(client.query.len());
            let mut argv = std::mem::take(&mut self.argv_scratch);
            // SAFETY: the slices are used only while the command runs and
            // dropped (`argv.clear()`) before the query buffer is touched
            // again; the big-argument buffers outlive them (they are
            // dropped after, or taken into the keyspace by the handler).
            unsafe {
                client
                    .query
                    .argv_detached(&mut argv, &mut client.st.big_args)
            };
            let dirty = self.srv.dirty;
            commands::execute(&mut self.srv, &mut client.st, &argv);
            argv.clear();
            client.st.big_args.clear();
            if self.srv.dirty != dirty && !self.srv.blocked_keys.is_empty() {
                commands::blocking::serve_blocked(&mut self.srv);
            }
            self.argv_scratch = argv;
            client.query.consume();
            if !self.check_output_limits(&mut client.st) {
                break;
            }
        }
        client.query.compact();
        let qlen = client.query.capacity();
        if qlen > self.srv.recent_max_input {
            self.srv.recent_max_input = qlen;
        }
        !client.st.close_after_reply
    }

    /// Enforce `client-output-buffer-limit` (normal class) after a reply
    /// was added. Returns false when the client is to be closed.
    fn check_output_limits(&mut self, st: &mut ClientState) -> bool {
        let limit = self.srv.config.client_output_buffer_limit[ClientClass::Normal as usize];
        // The default (0 0 0) costs nothing per command, not even a clock read.
        if limit.hard == 0 && limit.soft == 0 {
            return true;
        }
        if !st.output_limit_reached(limit, Instant::now()) {
            return true;
        }
        self.srv.close_for_output_limit(st);
        false
    }

    /// Write pending output. Returns false when the client must be closed.
    fn write_client(&mut self, idx: usize, client: &mut Client) -> bool {
        let st = &mut client.st;
        let out = st.pending_output();
        if out > self.srv.recent_max_output {
            self.srv.recent_max_output = out;
        }
        while st.sent < st.reply.len() {
            let n = if st.reply.shared_len() == 0 {
                let rest = &st.reply.buf[st.sent..];
                // SAFETY: writing from a valid slice to a socket we own.
                unsafe {
                    libc::write(
                        client.conn.fd(),
                        rest.as_ptr() as *const libc::c_void,
                        rest.len(),
                    )
                }
            } else {
                // Shared values are written from where they live.
                st.reply.seek(st.sent);
                let mut slices = Vec::new();
                st.reply.io_slices(st.sent, IOVECS_PER_WRITE, &mut slices);
                // SAFETY: IoSlice is ABI-compatible with iovec; every slice
                // borrows the reply, which outlives the call.
                unsafe {
                    libc::writev(
                        client.conn.fd(),
                        slices.as_ptr() as *const libc::iovec,
                        slices.len() as libc::c_int,
                    )
                }
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        self.resume_if_drained(idx, client);
                        if !client.write_interest {
                            client.write_interest = true;
                            return self.set_interest(
                                idx,
                                client,
                                Interest::READABLE | Interest::WRITABLE,
                            );
                        }
                        return true;
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        debug!(client = %st.addr, "Writing to client: {e}");
                        return false;
                    }
                }
            }
            self.srv.stats.total_writes_processed += 1;
            self.srv.stats.total_net_output_bytes += n as u64;
            st.sent += n as usize;
        }
        st.reply.clear();
        st.sent = 0;
        // Drained: whatever time over the soft output limit starts anew.
        st.obuf_soft_since = None;
        if st.reply.buf.capacity() > REPLY_BUF_KEEP {
            st.reply.buf = Vec::new();
        }
        // Drained by a write no writable event asked for (writable interest
        // is dropped just below): no event will come to resume a paused
        // client, so queue it for the next turn here.
        self.resume_if_drained(idx, client);
        if client.write_interest {
            client.write_interest = false;
            return self.set_interest(idx, client, Interest::READABLE);
        }
        true
    }

    /// A paused client whose output fell below the pause threshold is
    /// served again from the next turn (its buffered input, then its
    /// socket, which it was not read from meanwhile).
    fn resume_if_drained(&mut self, idx: usize, client: &mut Client) {
        if client.input_paused && client.st.pending_output() < OUTPUT_PAUSE_BYTES {
            client.input_paused = false;
            if !self.srv.pending_reads.contains(&idx) {
                self.srv.pending_reads.push(idx);
            }
        }
    }

    /// Change what the client's socket is polled for. False if that failed.
    fn set_interest(&mut self, idx: usize, client: &mut Client, interest: Interest) -> bool {
        let res = match &mut client.conn {
            Conn::Tcp(s) => self.poll.registry().reregister(s, Token(idx), interest),
            Conn::Unix(s) => self.poll.registry().reregister(s, Token(idx), interest),
        };
        if let Err(e) = &res {
            warn!(client = %client.st.addr, "Changing poll interest: {e}");
        }
        res.is_ok()
    }

    fn close_client(&mut self, idx: usize) {
        if let Some(mut c) = self.srv.remove_client(idx) {
            let _ = match &mut c.conn {
                Conn::Tcp(s) => self.poll.registry().deregister(s),
                Conn::Unix(s) => self.poll.registry().deregister(s),
            };
            debug!(client = c.st.id, "Client closed connection");
        }
    }

    fn close_marked(&mut self) {
        for (idx, id) in std::mem::take(&mut self.srv.to_close) {
            if self
                .srv
                .clients
                .get(idx)
                .and_then(|c| c.as_ref())
                .is_some_and(|c| c.st.id == id)
            {
                self.close_client(idx);
            }
        }
    }

    /// Stop the server: a final snapshot when save points are configured
    /// (or SAVE was given), unless NOSAVE. Returns false when the snapshot
    /// failed and the server keeps running, as Redis does.
    fn shutdown(&mut self, mode: ShutdownMode) -> bool {
        warn!("User requested shutdown...");
        use crate::persistence::snapshot;
        snapshot::kill_child(&mut self.srv);
        let save = match mode {
            ShutdownMode::NoSave => false,
            ShutdownMode::Save => true,
            ShutdownMode::Default => !snapshot::save_points(&self.srv).is_empty(),
        };
        if save {
            info!("Saving the final RDB snapshot before exiting.");
            if let Err(e) = snapshot::save(&mut self.srv) {
                warn!("Error trying to save the DB, can't exit: {e}");
                self.srv.shutdown = None;
                return false;
            }
        }
        for idx in 0..self.srv.clients.len() {
            self.close_client(idx);
        }
        if !self.srv.config.unixsocket.is_empty() {
            let _ = std::fs::remove_file(&self.srv.config.unixsocket);
        }
        if !self.srv.config.pidfile.is_empty() {
            let _ = std::fs::remove_file(&self.srv.config.pidfile);
        }
        warn!("kvstore is now ready to exit, bye bye...");
        true
    }
}

/// Redis 7.0's reply to a client refused by protected mode, word for word
/// (tools and people search for this text).
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Tell a connection we will not serve it why (best effort: one
/// non-blocking write), before it is dropped and so closed.
fn reject_connection(conn: &Conn, msg: &[u8]) {
    // SAFETY: writing from a valid slice to a socket we own.
    unsafe { libc::write(conn.fd(), msg.as_ptr() as *const libc::c_void, msg.len()) };
}

/// Listen on `port` at every `bind` address (none when the port is 0).
pub fn bind_tcp_listeners(config: &Config) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    if config.port == 0 {
        return Ok(listeners);
    }
    for addr in &config.bind {
        let addr = addr.trim_start_matches('-');
        let sa: SocketAddr = if addr.contains(':') && !addr.starts_with('[') {
            format!("[{addr}]:{}", config.port).parse()
        } else {
            format!("{addr}:{}", config.port).parse()
        }
        .or_else(|_| {
            (addr, config.port)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address"))
        })?;
        let l = bind_tcp(sa, config.tcp_backlog as i32)?;
        info!("Listening on {}", l.local_addr()?);
        listeners.push(l);
    }
    Ok(listeners)
}

fn bind_tcp(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    // SAFETY: re-issuing listen() on a bound socket to apply our backlog.
    unsafe { libc::listen(std_listener.as_raw_fd(), backlog.max(1)) };
    Ok(TcpListener::from_std(std_listener))
}

fn set_keepalive(fd: i32, interval: i64) {
    if interval <= 0 {
        return;
    }
    let on: libc::c_int = 1;
    let idle: libc::c_int = interval as libc::c_int;
    let intvl: libc::c_int = (interval / 3).max(1) as libc::c_int;
    let cnt: libc::c_int = 3;
    let sz = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt with valid pointers to ints on our own socket.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            &on as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            &idle as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            &intvl as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            &cnt as *const _ as *const libc::c_void,
            sz,
        );
    }
}
