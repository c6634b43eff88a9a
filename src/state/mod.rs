//! The server's state: databases, configuration, statistics, the client
//! slab, the propagation feed and snapshot scheduling. Command handlers work
//! on it; the event loop (`server`) owns it and drives it. Nothing here does
//! I/O on sockets or knows the command table.

pub mod acl;
pub mod aof;
pub mod aof_uring;
pub mod client;
pub mod evict;
pub mod failover;
pub mod feed;
pub mod latency;
pub mod master;
pub mod migrate;
pub mod pubsub;
pub mod rdma_sync;
pub mod replica_keys;
pub mod replication;
pub mod snapshot;
pub mod tracking;
pub mod watch;

use std::time::{Duration, Instant};

use mio::net::TcpListener;
use tracing::warn;

use crate::config::Config;
use crate::db::Db;
use crate::util::{random_hex, random_u64, unix_time_ms, Rng};

/// How often a reply buffer's peak is forgotten by default (Redis's
/// REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME), in ms.
pub const REPLY_BUFFER_PEAK_RESET_MS: i64 = 5000;
pub use client::{Blocked, ClientKind, ClientState, MultiState};
pub use feed::{Feed, FeedCursor};
pub use tracking::{ClientTracking, Tracking};

/// Counters reported by INFO stats.
#[derive(Default, Debug)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub total_net_input_bytes: u64,
    pub total_net_output_bytes: u64,
    /// The share of the two above that is replication traffic: read from
    /// this replica's master, written to this master's replicas.
    pub net_repl_input_bytes: u64,
    pub net_repl_output_bytes: u64,
    pub rejected_connections: u64,
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
    pub expire_cycle_cpu_ms: u64,
    pub evicted_keys: u64,
    /// Time used memory stayed over `maxmemory` (eviction running or
    /// failing): the closed spells, in µs, and the start of the current one.
    pub eviction_exceeded_us: u64,
    pub eviction_exceeded_since: Option<std::time::Instant>,
    /// Clients disconnected by `maxmemory-clients`.
    pub evicted_clients: u64,
    /// Reply buffers the cron made smaller / bigger.
    pub reply_buffer_shrinks: u64,
    pub reply_buffer_expands: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub total_error_replies: u64,
    pub total_reads_processed: u64,
    pub total_writes_processed: u64,
    /// Failed AUTH/HELLO AUTH attempts (Redis's `acl_access_denied_auth`).
    pub acl_access_denied_auth: u64,
    /// Commands refused by ACL rules: the command, a key, a channel.
    pub acl_access_denied_cmd: u64,
    pub acl_access_denied_key: u64,
    pub acl_access_denied_channel: u64,
    /// Error replies by code, in name order (INFO errorstats).
    pub errorstats: std::collections::BTreeMap<String, u64>,
    /// Clients closed for overcoming their output buffer limit.
    pub client_output_buffer_limit_disconnections: u64,
    /// Replicas served a full synchronisation, PSYNCs continued, PSYNCs
    /// that asked to continue and could not.
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// Ring of (ops, input bytes, output bytes) per second samples.
    pub inst_ops: InstantMetric,
    pub inst_input: InstantMetric,
    pub inst_output: InstantMetric,
    pub inst_repl_input: InstantMetric,
    pub inst_repl_output: InstantMetric,
}

impl Stats {
    /// Move the error codes a reply collected into INFO errorstats.
    #[inline]
    pub fn count_errors(&mut self, codes: &mut Vec<String>) {
        // After every command: the test alone stays on the command's path.
        if !codes.is_empty() {
            self.count_error_codes(codes);
        }
    }

    #[inline(never)]
    fn count_error_codes(&mut self, codes: &mut Vec<String>) {
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

pub use crate::config::ShutdownFlags;

/// A replica's full sync loaded aside from the old dataset (Redis's
/// `diskless_load_tempDb` and `temp_functions_lib_ctx`).
pub struct LoadAside {
    pub dbs: Vec<Db>,
    pub functions: crate::scripting::functions::Functions,
    /// The old dataset serves reads meanwhile (Redis's async loading):
    /// only when the master's history is the one this replica had, so that
    /// the old dataset is an earlier point of the same data. Otherwise
    /// clients get -LOADING as in any load.
    pub serving: bool,
}

/// A shutdown waiting for lagging replicas (Redis's shutdown_mstime):
/// writes are paused meanwhile; it completes when every replica has
/// acknowledged the whole stream, or at `deadline` (`shutdown-timeout`).
#[derive(Clone, Copy, Debug)]
pub struct ShutdownWait {
    pub flags: ShutdownFlags,
    pub deadline: Instant,
}

/// CLIENT PAUSE: until `end_ms` (unix ms), every command (`all`) or only
/// those that may write or replicate is held back.
#[derive(Debug, Clone, Copy)]
pub struct ClientPause {
    pub all: bool,
    pub end_ms: i64,
}

/// A script or function being run.
#[derive(Debug)]
pub struct ScriptRun {
    /// EVAL (else FCALL): which KILL may stop it.
    pub eval: bool,
    /// The script's SHA1 or the function's name.
    pub name: String,
    /// The command that runs it (FUNCTION STATS).
    pub argv: Vec<Vec<u8>>,
    pub started: std::time::Instant,
    /// It wrote: it cannot be killed without half applying it.
    pub write_dirty: bool,
    /// Run for our master (or the AOF): never killed.
    pub from_master: bool,
    /// SCRIPT KILL / FUNCTION KILL asked it to stop.
    pub killed: bool,
    /// Libraries and functions loaded (FUNCTION STATS while a function
    /// runs: the libraries are out of the server meanwhile).
    pub function_counts: (usize, usize),
}

/// What serves other clients while a script runs too long: implemented by
/// the event loop (it owns the sockets), called from the script's hook.
pub trait BusyPump {
    /// Read what the other clients sent; answer `-BUSY`, or run what may
    /// run meanwhile (SCRIPT KILL, FUNCTION KILL, SHUTDOWN, …).
    fn serve(&mut self, srv: &mut Server);
}

/// State shared by all command handlers.
pub struct Server {
    pub config: Config,
    pub dbs: Vec<Db>,
    /// Client slab; the index is the client's slot (and mio token). A
    /// client being served is taken out of its slot meanwhile.
    pub clients: Vec<Option<Box<ClientState>>>,
    free_slots: Vec<usize>,
    pub connected_clients: usize,
    pub next_client_id: u64,
    pub stats: Stats,
    /// ACL users and the ACL log.
    pub acl: acl::Acl,
    /// Changes since the last save.
    pub dirty: u64,
    pub start: Instant,
    pub start_unix_ms: i64,
    /// Time of the command being run (ms since the epoch): read when the
    /// loop wakes and again before any command that follows
    /// [`Self::clock_is_stale`] (a script or a transaction runs at one time).
    pub now_ms: i64,
    /// `util::cycles` ticks when `now_ms` was read, and when the last
    /// command ended: their distance says whether `now_ms` needs reading
    /// again without reading the clock.
    pub now_read_at: u64,
    /// The monotonic clock read with `now_ms`: what a client's last
    /// interaction is stamped with (one clock read a turn rather than one
    /// a read from a client).
    pub now_instant: Instant,
    pub last_command_end: u64,
    pub run_id: String,
    pub replid: String,
    pub rng: Rng,
    /// A shutdown asked for (SHUTDOWN, a signal), for the loop to start.
    pub shutdown: Option<ShutdownFlags>,
    /// A shutdown a signal asked for, started by the next cron run (Redis's
    /// shutdown_asap: DEBUG PAUSE-CRON holds it, SHUTDOWN ABORT cancels it).
    pub shutdown_asap: Option<ShutdownFlags>,
    /// A shutdown started that waits for replicas.
    pub shutdown_wait: Option<ShutdownWait>,
    /// The cron's frequency now: `hz`, raised with many clients while
    /// `dynamic-hz` is on (INFO's hz; configured_hz is the option).
    pub hz: i64,
    /// Errors our master's stream or the AOF met when applied here (INFO's
    /// unexpected_error_replies).
    pub unexpected_error_replies: u64,
    pub active_expire_enabled: bool,
    /// DEBUG PAUSE-CRON: periodic work is skipped (a test hook).
    pub cron_paused: bool,
    /// DEBUG REPLYBUFFER PEAK-RESET-TIME: how often (ms) a reply buffer's
    /// peak is forgotten; negative: never.
    pub reply_buffer_peak_reset_ms: i64,
    /// DEBUG REPLYBUFFER RESIZING: the cron resizes reply buffers.
    pub reply_buffer_resizing: bool,
    /// MIGRATE's kept connections to target instances.
    pub migrate_sockets: migrate::MigrateSockets,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may run `noscript` commands
    /// (Redis's test hook).
    pub script_disable_deny: bool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE and FUNCTION RESTORE take
    /// payloads whatever their CRC-64.
    pub skip_checksum_validation: bool,
    /// Writes on their way to the AOF and replicas.
    pub feed: Feed,
    pub peak_memory: usize,
    /// Eviction's candidate pool and progress (`maxmemory`).
    pub evictor: evict::Evictor,
    /// Memory in use when the server started serving (`used_memory_startup`).
    pub startup_memory: usize,
    pub lastsave_unix: i64,
    /// Background saves and their status.
    pub snapshot: snapshot::SnapshotState,
    /// A dump being loaded at startup (commands get -LOADING meanwhile).
    pub loading: Option<snapshot::AsyncLoad>,
    /// An AOF command is being replayed (Redis's `server.loading` as the
    /// commands see it): no key expires, and a TTL in the past is set
    /// rather than deleting the key.
    pub replaying_aof: bool,
    /// The dataset (and function libraries) a replica builds aside from
    /// its old one (`repl-diskless-load swapdb`); swapped in once complete,
    /// dropped if the load fails, so that the old one is still there.
    pub loading_aside: Option<LoadAside>,
    pub rdb_last_load_keys: u64,
    pub rdb_last_load_expired: u64,
    /// The Lua interpreter and the script cache (EVAL, SCRIPT).
    pub scripts: crate::scripting::Engine,
    /// Function libraries (FUNCTION, FCALL).
    pub functions: crate::scripting::functions::Functions,
    /// The client scripts run their commands as (Redis's lua client);
    /// made on the first script.
    pub script_client: Option<Box<ClientState>>,
    /// The script (EVAL or FCALL) running now, if any: SCRIPT KILL,
    /// FUNCTION KILL and FUNCTION STATS look at it.
    pub script_run: Option<ScriptRun>,
    /// Set by the event loop around each command it runs: how a script
    /// running past `busy-reply-threshold` serves the other clients
    /// (`-BUSY`, SCRIPT KILL, SHUTDOWN NOSAVE) without returning to it.
    pub busy_pump: Option<*mut dyn BusyPump>,
    /// Children running forked debugging sessions (SCRIPT DEBUG YES):
    /// reaped by the cron, killed at shutdown.
    pub ldb_children: Vec<libc::pid_t>,
    /// Commands run now come from clients served while a script is busy:
    /// only those allowed when busy may run.
    pub serving_busy: bool,
    /// EXEC is running its commands: nothing forks now, BGSAVE,
    /// BGREWRITEAOF and `appendonly yes` are scheduled (Redis's in_exec).
    pub in_exec: bool,
    /// Set by SIGTERM/SIGINT as they arrive (the loop also hears them as
    /// events): a script running long checks it to stop.
    pub stop_signal: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Clients to close at the next opportunity (CLIENT KILL, timeouts), as
    /// (slot, client id) so a slot reused in between is left alone.
    pub to_close: Vec<(usize, u64)>,
    pub cron_loops: u64,
    pub executable: String,
    /// Blocked clients per (db, key), in the order they blocked.
    /// Streams that got entries (or lost a group) this turn while clients
    /// wait on them: their XREAD/XREADGROUP run again.
    pub ready_streams: Vec<(usize, Vec<u8>)>,
    /// Keys with waiters written since they were last served, in the order
    /// written: served in that order (Redis's ready_keys), before keys made
    /// ready otherwise (FLUSHALL, SWAPDB, …: found by a scan).
    pub ready_keys: Vec<(usize, Vec<u8>)>,
    pub blocked_keys: std::collections::HashMap<
        (usize, Vec<u8>),
        std::collections::VecDeque<u64>,
        foldhash::fast::RandomState,
    >,
    /// Blocked clients by deadline.
    pub block_deadlines: std::collections::BTreeSet<(Instant, u64)>,
    pub blocked_clients: usize,
    /// Slot of each client id.
    pub client_slots: std::collections::HashMap<u64, usize, foldhash::fast::RandomState>,
    /// Clients just unblocked: their reply must be written and their
    /// buffered input processed.
    pub unblocked: Vec<(usize, u64)>,
    /// Client-side caching: who may cache which key.
    pub tracking: Tracking,
    /// Replication, master side: backlog, offset, replicas.
    pub repl: replication::Replication,
    /// Replication, replica side: the link to our master.
    pub master: master::MasterState,
    /// How hard `tracking_limit_used_slots` tries next (it grows each time
    /// the table stays over its limit).
    pub tracking_effort: u32,
    /// CLIENT PAUSE in effect (it may have run out: see `clients_paused`).
    pub client_pause: Option<ClientPause>,
    /// A FAILOVER under way (its writes are paused).
    pub failover: failover::Failover,
    /// Clients whose command waits for the pause to end, in arrival order.
    pub postponed: Vec<u64>,
    /// Largest query/reply buffers seen recently (INFO clients).
    pub recent_max_input: usize,
    pub recent_max_output: usize,
    /// Budgets for log lines that clients can trigger at will.
    pub log_limits: LogLimits,
    /// When to accept again after accepting stopped at an error that
    /// leaves the connection queued (out of descriptors or memory): the
    /// listeners are edge-triggered, so nothing else would wake them.
    pub accept_retry_at: Option<Instant>,
    /// TCP listeners bound by CONFIG SET port, for the loop to swap in.
    pub new_tcp_listeners: Option<Vec<TcpListener>>,
    /// The TCP listeners open now, with their addresses (kept by the loop,
    /// read when CONFIG SET changes `bind` or `port`).
    pub tcp_listeners: Vec<(std::net::SocketAddr, std::os::fd::RawFd)>,
    /// The same for `tls-port`.
    pub new_tls_listeners: Option<Vec<TcpListener>>,
    pub tls_listeners: Vec<(std::net::SocketAddr, std::os::fd::RawFd)>,
    /// The engine serving client sockets (INFO's `multiplexing_api`).
    pub io_engine: crate::config::IoEngine,
    /// TLS configurations in force (while `tls-port`, `tls-replication` or
    /// `tls-cluster` is set): new TLS connections use them.
    pub tls: Option<crate::tls::TlsContext>,
    /// Pub/Sub subscriptions.
    pub pubsub: pubsub::PubSub,
    /// The append-only file.
    pub aof: aof::Aof,
    /// Clients whose output grew outside their own turn, as (slot, id):
    /// written before the loop sleeps.
    pub pending_writes: Vec<(usize, u64)>,
    /// Push messages for the client running the current command (it is
    /// out of the slab meanwhile); appended after its reply.
    pub self_pushes: Vec<u8>,
    /// Does the running client speak RESP3 (how to encode `self_pushes`)?
    pub current_resp3: bool,
    /// Watched keys and their watchers.
    pub watched_keys: watch::WatchedKeys,
    /// Id of the client whose command is running (0 outside commands).
    pub current_client: u64,
    /// Keys its own clients gave a TTL on a writable replica, with a bit per
    /// database they may be in: the master knows nothing of them, so the
    /// replica expires them itself (Redis's slaveKeysWithExpire).
    pub replica_keys_with_expire: replica_keys::ReplicaKeysWithExpire,
    /// Keys changed outside the handler's reach (a lazy expiry inside a
    /// lookup) that the running client watches: applied to it when its
    /// command returns.
    pub deferred_touches: Vec<(usize, Vec<u8>)>,
    /// Clients in MONITOR mode, by id.
    pub monitors: Vec<u64>,
    /// SLOWLOG entries, newest first, and the next entry id.
    pub slowlog: std::collections::VecDeque<SlowlogEntry>,
    pub slowlog_next_id: u64,
    /// Per-command call statistics (INFO commandstats), by position in
    /// the command table (grown on first use), and by `container|sub` name
    /// for subcommands.
    pub command_stats: Vec<CommandStats>,
    pub subcommand_stats: std::collections::HashMap<&'static str, CommandStats>,
    /// Latency spikes by event (LATENCY, `latency-monitor-threshold`).
    pub latency: latency::LatencyMonitor,
}

/// One SLOWLOG entry (Redis's slowlogEntry).
#[derive(Debug, Clone)]
pub struct SlowlogEntry {
    pub id: u64,
    pub time_unix: i64,
    pub duration_us: u64,
    /// At most 32 arguments, each at most 128 bytes, as Redis keeps them.
    pub argv: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// INFO commandstats counters of one command, and its latency histogram
/// (INFO latencystats, LATENCY HISTOGRAM), made on its first call while
/// `latency-tracking` is on.
#[derive(Debug, Default, Clone)]
pub struct CommandStats {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    pub latency_histogram: Option<Box<crate::util::hdr::HdrHistogram>>,
}

/// One [`RateLimit`](crate::logging::RateLimit) per kind of client-triggered
/// log line.
#[derive(Debug)]
pub struct LogLimits {
    pub auth: crate::logging::RateLimit,
    pub protocol: crate::logging::RateLimit,
    pub denied: crate::logging::RateLimit,
    /// Accepting a connection failed (out of descriptors, say).
    pub accept: crate::logging::RateLimit,
    /// A replica applying its master's writes while it cannot persist.
    pub disk_error: crate::logging::RateLimit,
}

impl Default for LogLimits {
    fn default() -> Self {
        let per_sec = |n| crate::logging::RateLimit::new(n, Duration::from_secs(1));
        LogLimits {
            auth: per_sec(5),
            protocol: per_sec(5),
            denied: per_sec(5),
            accept: per_sec(1),
            disk_error: crate::logging::RateLimit::new(1, Duration::from_secs(10)),
        }
    }
}

impl Server {
    pub fn new(config: Config) -> Server {
        crate::db::table::set_growth_guard(evict::table_growth_allowed);
        crate::util::cycles::init();
        crate::scripting::offer_deprecated_api(config.lua_enable_deprecated_api);
        let seed = random_u64();
        let dbs = (0..config.databases).map(|i| Db::new(i, seed)).collect();
        let now = unix_time_ms();
        let mut srv = Server {
            config,
            dbs,
            loading_aside: None,
            scripts: crate::scripting::Engine::new(),
            functions: crate::scripting::functions::Functions::new(),
            script_client: None,
            stop_signal: Default::default(),
            script_run: None,
            busy_pump: None,
            ldb_children: Vec::new(),
            serving_busy: false,
            in_exec: false,
            clients: Vec::new(),
            free_slots: Vec::new(),
            connected_clients: 0,
            next_client_id: 1,
            stats: Stats::default(),
            acl: acl::Acl::new(acl::User::new_default()),
            dirty: 0,
            start: Instant::now(),
            start_unix_ms: now,
            now_ms: now,
            now_read_at: crate::util::cycles::now(),
            now_instant: Instant::now(),
            last_command_end: 0,
            run_id: random_hex(40),
            replid: random_hex(40),
            rng: Rng::new(seed.rotate_left(17)),
            shutdown: None,
            shutdown_asap: None,
            shutdown_wait: None,
            hz: 0,
            unexpected_error_replies: 0,
            active_expire_enabled: true,
            cron_paused: false,
            reply_buffer_peak_reset_ms: REPLY_BUFFER_PEAK_RESET_MS,
            reply_buffer_resizing: true,
            migrate_sockets: Default::default(),
            script_disable_deny: false,
            skip_checksum_validation: false,
            feed: Feed::default(),
            peak_memory: 0,
            evictor: evict::Evictor::default(),
            startup_memory: 0,
            lastsave_unix: now / 1000,
            snapshot: Default::default(),
            loading: None,
            replaying_aof: false,
            rdb_last_load_keys: 0,
            rdb_last_load_expired: 0,
            to_close: Vec::new(),
            cron_loops: 0,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            ready_streams: Vec::new(),
            ready_keys: Vec::new(),
            blocked_keys: Default::default(),
            tracking: Tracking::default(),
            repl: replication::Replication::default(),
            master: master::MasterState::default(),
            tracking_effort: 0,
            client_pause: None,
            failover: Default::default(),
            postponed: Vec::new(),
            block_deadlines: Default::default(),
            blocked_clients: 0,
            client_slots: Default::default(),
            unblocked: Vec::new(),
            recent_max_input: 0,
            recent_max_output: 0,
            log_limits: LogLimits::default(),
            accept_retry_at: None,
            new_tcp_listeners: None,
            tcp_listeners: Vec::new(),
            new_tls_listeners: None,
            tls_listeners: Vec::new(),
            io_engine: crate::config::IoEngine::Epoll,
            tls: None,
            pubsub: Default::default(),
            aof: aof::Aof::new(),
            pending_writes: Vec::new(),
            self_pushes: Vec::new(),
            current_resp3: false,
            watched_keys: Default::default(),
            current_client: 0,
            replica_keys_with_expire: Default::default(),
            deferred_touches: Vec::new(),
            monitors: Vec::new(),
            slowlog: Default::default(),
            slowlog_next_id: 0,
            command_stats: Vec::new(),
            subcommand_stats: Default::default(),
            latency: Default::default(),
        };
        srv.apply_lazyfree_config();
        srv.update_growth_ceiling();
        srv.hz = srv.config.hz;
        srv
    }

    /// The cron's frequency for this many clients (Redis's serverCron):
    /// `hz`, doubled while there are more than
    /// [`MAX_CLIENTS_PER_CLOCK_TICK`] clients per tick, up to
    /// [`MAX_HZ`], when `dynamic-hz` is on.
    pub fn update_hz(&mut self) {
        /// Redis's MAX_CLIENTS_PER_CLOCK_TICK and CONFIG_MAX_HZ.
        const MAX_CLIENTS_PER_CLOCK_TICK: i64 = 200;
        const MAX_HZ: i64 = 500;
        let mut hz = self.config.hz.max(1);
        if self.config.dynamic_hz {
            let clients = self.connected_clients as i64;
            while clients / hz > MAX_CLIENTS_PER_CLOCK_TICK {
                hz *= 2;
                if hz > MAX_HZ {
                    hz = MAX_HZ;
                    break;
                }
            }
        }
        self.hz = hz;
    }

    /// Hand the `lazyfree-lazy-server-del` setting down to the databases
    /// (at startup and after CONFIG SET).
    pub fn apply_lazyfree_config(&mut self) {
        let mode = crate::db::FreeMode::lazy_if(self.config.lazyfree_lazy_server_del);
        for db in &mut self.dbs {
            db.server_del = mode;
        }
    }

    /// The pause in effect now, if any (one whose end has passed is over).
    /// A shutdown waiting for replicas pauses writes as well (Redis's
    /// PAUSE_DURING_SHUTDOWN), whatever CLIENT UNPAUSE says.
    pub fn clients_paused(&self) -> Option<ClientPause> {
        let user = self.client_pause.filter(|p| p.end_ms >= self.now_ms);
        // A shutdown waiting for replicas and a failover pause writes too.
        let internal =
            self.shutdown_wait.is_some() || self.failover.state != failover::FailoverState::None;
        if internal && !user.is_some_and(|p| p.all) {
            return Some(ClientPause {
                all: false,
                end_ms: i64::MAX,
            });
        }
        user
    }

    /// May expired keys be deleted now? Not while clients are paused (the
    /// dataset stays as it is: a failover may be under way), nor on a
    /// replica; reads treat expired keys as missing without deleting them.
    /// Remember a key that a client of this writable replica (not its
    /// master) gave a TTL, so that the replica's cron expires it (Redis's
    /// rememberSlaveKeyWithExpire; databases above 63 are not tracked).
    pub fn remember_replica_key_with_expire(&mut self, db: usize, key: &[u8]) {
        if self.master.target.is_none() || self.config.replica_read_only || self.master_is_running()
        {
            return;
        }
        self.replica_keys_with_expire.remember(db, key);
    }

    /// The time to stamp a client's interaction with: the turn's, read
    /// again when commands have run for long enough since.
    pub fn interaction_time(&mut self) -> Instant {
        if self.clock_is_stale() {
            self.update_time();
        }
        self.now_instant
    }

    /// Has a command run for long enough since `now_ms` was read that the
    /// next one must read it again? Redis reads the clock before every
    /// command; reading it again only after 100 µs of commands keeps that
    /// to the millisecond at no cost to a pipeline of quick ones.
    #[inline]
    pub fn clock_is_stale(&self) -> bool {
        crate::util::cycles::elapsed_us(self.now_read_at, self.last_command_end) >= 100
    }

    /// Does a command's deadline `when` (ms) delete its key at once rather
    /// than set a TTL? Not while an AOF is replayed, nor on a replica, which
    /// waits for its master's DEL (Redis's checkAlreadyExpired).
    pub fn already_expired(&self, when: i64) -> bool {
        when <= unix_time_ms() && !self.replaying_aof && self.master.target.is_none()
    }

    pub fn may_delete_expired(&self) -> bool {
        // A replica leaves expiry to its master's DELs.
        self.clients_paused().is_none() && self.master.target.is_none()
    }

    /// Refresh the cached time and the access clock of new entries.
    pub fn update_time(&mut self) {
        self.now_ms = unix_time_ms();
        self.now_read_at = crate::util::cycles::now();
        self.now_instant = Instant::now();
        // New entries start with the clock the policy keeps: an LRU time,
        // or an LFU time with the initial counter.
        let lfu = self.config.maxmemory_policy.is_lfu();
        let word = if lfu {
            crate::db::entry::lfu_initial_word(self.now_ms)
        } else {
            crate::db::entry::lru_clock(self.now_ms)
        };
        crate::db::entry::set_lru_clock(word, lfu);
    }

    /// Does anything consume propagated writes? Callers skip building a
    /// rewritten command (and copying its values) when nothing does.
    pub fn propagating(&self) -> bool {
        self.feed.active()
    }

    /// Add a write to the execution unit in progress (Redis's
    /// `alsoPropagate`), for persistence and replicas.
    pub fn propagate(&mut self, db: usize, argv: &[&[u8]]) {
        self.feed.also_propagate(db, argv);
    }

    /// Propagate to the consumers in `to` only (`feed::TO_*`), and to none
    /// when a script's `redis.set_repl` already left none of them.
    pub fn propagate_only_to(&mut self, db: usize, argv: &[&[u8]], to: u8) {
        if let Some(before) = self.feed.narrow_target(to) {
            self.feed.also_propagate(db, argv);
            self.feed.restore_target(before);
        }
    }

    /// A replica's full sync loads aside while the old dataset serves
    /// (INFO `async_loading`).
    pub fn async_loading(&self) -> bool {
        self.loading_aside.as_ref().is_some_and(|a| a.serving)
    }

    /// Hand the iteration's propagated writes to every consumer of the
    /// feed, then forget them.
    pub fn flush_feed(&mut self) {
        if !self.feed.has_pending() {
            return;
        }
        let aof_takes_stream = self.feed_aof();
        self.feed_replication();
        self.feed.flush_taps();
        if aof_takes_stream {
            self.feed.swap_stream(&mut self.aof.buf);
        }
        self.feed.clear();
        // Before any reply of this iteration is written (see before_sleep).
        self.flush_aof();
    }

    /// Bytes allocated by this thread right now: cheap enough to check before
    /// every write command against `maxmemory`.
    pub fn used_memory(&self) -> usize {
        crate::memory::used_memory()
    }

    /// The slab index the next inserted client will get.
    pub fn vacant_slot(&self) -> usize {
        self.free_slots
            .last()
            .copied()
            .unwrap_or(self.clients.len())
    }

    /// Give a new client a slot (the one [`vacant_slot`](Self::vacant_slot) named).
    pub fn insert_client(&mut self, client: ClientState) -> usize {
        self.connected_clients += 1;
        let id = client.id;
        let mut boxed = Box::new(client);
        let slot = self.vacant_slot();
        boxed.slot = slot;
        if slot < self.clients.len() {
            self.free_slots.pop();
            self.clients[slot] = Some(boxed);
        } else {
            self.clients.push(Some(boxed));
        }
        self.client_slots.insert(id, slot);
        slot
    }

    /// Free a client's slot; the caller has already detached it from
    /// everything it took part in (blocking, watches, subscriptions).
    pub fn remove_client(&mut self, idx: usize) -> Option<Box<ClientState>> {
        let c = self.clients.get_mut(idx)?.take()?;
        self.free_slots.push(idx);
        self.connected_clients -= 1;
        self.client_slots.remove(&c.id);
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
        if let Some(l) = st.repl.as_mut() {
            l.stream = None;
        }
    }

    /// The soft output limit also counts time while nothing is added (a
    /// paused client runs no commands): check it once per cron tick.
    /// Size each reply buffer to what its client has lately needed
    /// (Redis's clientsCronResizeOutputBuffer): an idle client's shrinks
    /// to 1 KB, a busy one's grows back to 16 KB.
    pub fn resize_reply_buffers_cron(&mut self) {
        if !self.reply_buffer_resizing {
            return;
        }
        let now_ms = self.now_ms;
        let reset_every = self.reply_buffer_peak_reset_ms;
        for c in self.clients.iter_mut().flatten() {
            let held = c.pending_output();
            match c.rbuf.cron_resize(held, now_ms, reset_every) {
                client::Resized::Kept => {}
                client::Resized::Shrunk => {
                    self.stats.reply_buffer_shrinks += 1;
                    if c.reply.buf.len() <= c.rbuf.size {
                        c.reply.buf.shrink_to(c.rbuf.size);
                    }
                }
                client::Resized::Expanded => {
                    self.stats.reply_buffer_expands += 1;
                    let len = c.reply.buf.len();
                    c.reply.buf.reserve_exact(c.rbuf.size.saturating_sub(len));
                }
            }
        }
    }

    pub fn check_output_limits_cron(&mut self, now: Instant) {
        let limits = self.config.client_output_buffer_limit;
        if limits.iter().all(|l| l.soft == 0 && l.hard == 0) {
            return;
        }
        let mut over = Vec::new();
        for (i, c) in self.clients.iter_mut().enumerate() {
            if let Some(c) = c {
                let limit = c.output_limit(&self.config);
                if c.output_used() > 0 && c.output_limit_reached(limit, now) {
                    over.push(i);
                }
            }
        }
        for i in over {
            if let Some(mut c) = self.clients[i].take() {
                self.close_for_output_limit(&mut c);
                self.to_close.push((i, c.id));
                self.clients[i] = Some(c);
            }
        }
    }

    /// Find a client's slab index by id.
    pub fn client_index(&self, id: u64) -> Option<usize> {
        self.client_slots.get(&id).copied()
    }

    /// Client `id`, if it is in the slab (the one running a command is not).
    pub fn client_by_id(&self, id: u64) -> Option<&ClientState> {
        self.clients.get(self.client_index(id)?)?.as_deref()
    }

    /// Take client `id` out of the slab to work on it with the server at
    /// hand; put it back with `self.clients[slot] = Some(client)`.
    pub fn take_client(&mut self, id: u64) -> Option<(usize, Box<ClientState>)> {
        let slot = self.client_index(id)?;
        let client = self.clients.get_mut(slot)?.take()?;
        Some((slot, client))
    }

    /// Close client `id` at the next opportunity (it runs nothing more).
    pub fn close_client_asap(&mut self, id: u64) {
        let Some(slot) = self.client_index(id) else {
            return;
        };
        if let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_deref_mut()) {
            c.close_asap = true;
        }
        self.to_close.push((slot, id));
    }

    /// Client `id`, mutably, if it is in the slab.
    pub fn client_by_id_mut(&mut self, id: u64) -> Option<&mut ClientState> {
        let slot = self.client_index(id)?;
        self.clients.get_mut(slot)?.as_deref_mut()
    }
}
