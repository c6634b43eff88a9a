//! Configuration: one table of every option (name, default, whether it can be
//! changed at run time, how it parses and prints), serving the config file,
//! the command line, CONFIG GET, CONFIG SET and CONFIG REWRITE alike.
//!
//! The file syntax is redis.conf's: `name arg arg…` per line, `#` comments,
//! quoted arguments with the same rules as inline commands. The command line
//! is `kvstore [file] [--name value …]`, as redis-server takes it.

use std::path::{Path, PathBuf};

use crate::protocol::split_args;

/// Every setting, typed. Options that later subsystems use are already
/// parsed and validated here so that config files written for Redis load.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: Vec<String>,
    /// The address outgoing replication connections come from ("": any).
    pub bind_source_addr: String,
    pub port: u16,
    pub unixsocket: String,
    pub unixsocketperm: u32,
    pub tcp_backlog: i64,
    pub tcp_keepalive: i64,
    pub timeout: i64,
    pub hz: i64,
    /// Milliseconds a script runs before it is reported slow (Redis's
    /// busy-reply-threshold, alias lua-time-limit); 0 never.
    pub busy_reply_threshold: i64,
    pub databases: usize,
    pub requirepass: String,
    pub maxclients: i64,
    pub maxmemory: u64,
    pub maxmemory_policy: MaxmemoryPolicy,
    pub lfu_log_factor: i64,
    pub lfu_decay_time: i64,
    pub maxmemory_samples: i64,
    pub maxmemory_eviction_tenacity: i64,
    /// Bytes, or (negative) a percentage of `maxmemory`; 0 is off.
    pub maxmemory_clients: i64,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: u64,
    pub loglevel: String,
    pub logfile: String,
    pub dir: PathBuf,
    pub dbfilename: String,
    pub save: String,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appendfsync: FsyncPolicy,
    pub appenddirname: String,
    pub auto_aof_rewrite_percentage: i64,
    pub auto_aof_rewrite_min_size: u64,
    pub aof_load_truncated: bool,
    pub aof_use_rdb_preamble: bool,
    pub no_appendfsync_on_rewrite: bool,
    pub aof_timestamp_enabled: bool,
    pub activerehashing: bool,
    pub active_expire_effort: i64,
    pub lazyfree_lazy_expire: bool,
    pub lazyfree_lazy_user_del: bool,
    pub lazyfree_lazy_user_flush: bool,
    pub stop_writes_on_bgsave_error: bool,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    pub hash_max_listpack_entries: i64,
    pub hash_max_listpack_value: i64,
    pub list_max_listpack_size: i64,
    /// `list-compress-depth`: list nodes kept uncompressed at each end (0: none compressed).
    pub list_compress_depth: i64,
    pub set_max_intset_entries: i64,
    pub zset_max_listpack_entries: i64,
    pub stream_node_max_bytes: u64,
    /// A sparse HyperLogLog grows to at most this many bytes, then becomes dense.
    pub hll_sparse_max_bytes: usize,
    pub stream_node_max_entries: i64,
    pub zset_max_listpack_value: i64,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: i64,
    /// Milliseconds from which the latency monitor records an event (0: off).
    pub latency_monitor_threshold: i64,
    /// Per-command latency histograms (INFO latencystats, LATENCY HISTOGRAM).
    pub latency_tracking: bool,
    /// Percentiles INFO latencystats reports, each in [0, 100].
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// Most keys the client-tracking table remembers (0: no limit).
    pub tracking_table_max_keys: u64,
    pub notify_keyspace_events: NotifyFlags,
    pub pidfile: String,
    /// Run in the background (Redis's daemonize: fork, setsid, standard
    /// streams to /dev/null), unless a supervisor runs the process.
    pub daemonize: bool,
    pub protected_mode: bool,
    /// Who may change protected configs (`dir`, `dbfilename`) at run time.
    pub enable_protected_configs: Gate,
    /// Who may run DEBUG.
    pub enable_debug_command: Gate,
    /// Who may run MODULE (there are no modules: the gate is kept for configs
    /// written for Redis).
    pub enable_module_command: Gate,
    /// `rename-command old new` lines, in order (`new` empty: disabled).
    pub rename_commands: Vec<(String, String)>,
    /// `user <name> <rule>…` lines, in order: ACL users made at startup.
    pub users: Vec<Vec<Vec<u8>>>,
    /// The ACL file (ACL LOAD / SAVE); empty: none.
    pub aclfile: String,
    /// Entries ACL LOG keeps.
    pub acllog_max_len: i64,
    /// New users get every channel (`allchannels`) or none
    /// (`resetchannels`, Redis 7.0's default).
    pub acl_pubsub_default_all: bool,
    /// Output buffer limits per client class (normal, replica, pubsub).
    pub client_output_buffer_limit: [BufferLimit; 3],
    pub lazyfree_lazy_eviction: bool,
    pub lazyfree_lazy_server_del: bool,
    pub replica_lazy_flush: bool,
    /// Replication backlog size in bytes, seconds it outlives the last
    /// replica, master PING period, link timeout (seconds).
    pub repl_backlog_size: u64,
    pub repl_backlog_ttl: i64,
    pub repl_ping_replica_period: i64,
    pub repl_timeout: i64,
    /// `replicaof host port` from the configuration.
    pub replicaof: Option<(String, u16)>,
    /// Credentials for the master (`masterauth`, `masteruser`).
    pub masterauth: String,
    pub masteruser: String,
    /// A replica refuses writes from its clients.
    pub replica_read_only: bool,
    /// A replica with its link down still answers (possibly stale) reads.
    pub replica_serve_stale_data: bool,
    pub replica_ignore_maxmemory: bool,
    /// Writes need this many replicas acknowledging within this many
    /// seconds (0: no such rule).
    pub min_replicas_to_write: i64,
    pub min_replicas_max_lag: i64,
    /// Full syncs stream the snapshot to replicas instead of writing the
    /// dump first; seconds to wait for more replicas before starting one.
    pub repl_diskless_sync: bool,
    /// Full syncs over RDMA with replicas that can (when a device exists).
    pub repl_rdma: bool,
    /// How a replica loads a full sync: `disabled` and `on-empty-db` in
    /// place of its dataset (clients get -LOADING), `swapdb` aside while
    /// the old dataset goes on serving. The dump is always written to a
    /// temporary file; it is loaded from there as it arrives when that
    /// costs the old dataset nothing (it is empty, or `swapdb`), else once
    /// it is complete.
    pub repl_diskless_load: String,
    pub repl_diskless_sync_delay: i64,
    /// Microseconds a snapshot child sleeps per key (a test knob, as Redis's).
    pub rdb_key_save_delay: i64,
    pub key_load_delay: i64,
    /// Bytes of a dump loaded between two turns of the event loop.
    pub loading_process_events_interval_bytes: i64,
    /// Path of the config file the server was started with, if any.
    pub config_file: Option<PathBuf>,
    /// `repl-diskless-sync-max-replicas`: a diskless sync starts as soon as
    /// this many replicas wait for it, without waiting out the delay (0: no
    /// such count).
    pub repl_diskless_sync_max_replicas: i64,
    /// `repl-disable-tcp-nodelay`: a replica's socket sends in bigger
    /// segments (TCP_NODELAY off) from its full sync on.
    pub repl_disable_tcp_nodelay: bool,
    /// `rdb-del-sync-files`: without any persistence, the dump files a
    /// full sync wrote (on the master) or received (on a replica) are
    /// removed once used.
    pub rdb_del_sync_files: bool,
    /// `replica-priority` (INFO's slave_priority; Sentinel promotes the
    /// lowest non-zero one).
    pub replica_priority: i64,
    /// `replica-announced`: Sentinel lists this replica (INFO's
    /// replica_announced).
    pub replica_announced: bool,
    /// Address and port a replica tells its master (REPLCONF ip-address,
    /// listening-port) instead of its own; empty / 0: its own.
    pub replica_announce_ip: String,
    pub replica_announce_port: u16,
    /// A replica applies its master's writes even while it cannot persist
    /// them (no: it stops with a crash report, as Redis).
    pub replica_ignore_disk_write_errors: bool,
    /// What a replica or the AOF loader does when a propagated command fails.
    pub propagation_error_behavior: PropagationErrorBehavior,
    /// How a SIGINT / SIGTERM shuts the server down (SHUTDOWN's flags).
    pub shutdown_on_sigint: ShutdownFlags,
    pub shutdown_on_sigterm: ShutdownFlags,
    /// Seconds a shutdown waits for lagging replicas (0: it doesn't).
    pub shutdown_timeout: i64,
    /// `dynamic-hz`: the cron runs faster with many clients.
    pub dynamic_hz: bool,
    /// `jemalloc-bg-thread`: jemalloc purges from its own thread.
    pub jemalloc_bg_thread: bool,
    /// `disable-thp`: turn transparent huge pages off for the process when
    /// the kernel has them `always` on.
    pub disable_thp: bool,
    /// `oom-score-adj` and its three values (master, replica, background
    /// child).
    pub oom_score_adj: OomScoreAdj,
    pub oom_score_adj_values: [i32; 3],
    /// `supervised`: how the server tells a supervisor it is ready.
    pub supervised: SupervisedMode,
    /// `io-engine`: how client sockets are served.
    pub io_engine: IoEngine,
    /// `set-proc-title` and the title's template.
    pub set_proc_title: bool,
    pub proc_title_template: String,
    /// `crash-log-enabled`: a panic writes a crash report to the log.
    pub crash_log_enabled: bool,
    /// `crash-memcheck-enabled` (kvstore runs no memory test on a crash).
    pub crash_memcheck_enabled: bool,
    /// `use-exit-on-panic`: a panic ends the process with exit(1) once its
    /// report is written (test harnesses; else it ends as a panic does).
    pub use_exit_on_panic: bool,
    /// `lua-enable-deprecated-api`: offer scripts `setfenv`, `getfenv` and
    /// `newproxy`, which Redis withholds since CVE-2025-46818.
    pub lua_enable_deprecated_api: bool,
    /// `watchdog-period` (ms, 0 off): Redis's software watchdog, a stack
    /// trace in the log whenever the event loop is stuck this long.
    pub watchdog_period: i64,
    /// Options of features this build does not have, kept as values
    /// (see their entries in [`OPTIONS`]).
    pub sanitize_dump_payload: String,
    pub aof_disable_auto_gc: bool,
    pub aof_rewrite_incremental_fsync: bool,
    pub rdb_save_incremental_fsync: bool,
    pub always_show_logo: bool,
    pub ignore_warnings: String,
    pub io_threads: i64,
    pub io_threads_do_reads: bool,
    /// CPU lists (`0-3,8,10-14:2`) for the main thread, background
    /// threads, AOF rewrite and snapshot children (empty: no pinning).
    pub server_cpulist: String,
    pub bio_cpulist: String,
    pub aof_rewrite_cpulist: String,
    pub bgsave_cpulist: String,
    /// `socket-mark-id`: SO_MARK of the listening sockets (0: none).
    pub socket_mark_id: u32,
    /// Logging to syslog as well (`syslog-enabled`, `-ident`, `-facility`).
    pub syslog_enabled: bool,
    pub syslog_ident: String,
    pub syslog_facility: String,
    /// Active defragmentation (this build has none: `activedefrag` stays no).
    pub defrag: DefragConfig,
    /// Cluster options (this build has no cluster mode: kept as values).
    pub cluster: ClusterConfig,
    /// The `tls-*` options.
    pub tls: TlsConfig,
}

/// The `active-defrag-*` tunables: values only, as in a Redis built
/// without defragmentation support.
#[derive(Clone, Debug, Default)]
pub struct DefragConfig {
    pub enabled: bool,
    pub ignore_bytes: u64,
    pub threshold_lower: i64,
    pub threshold_upper: i64,
    pub cycle_min: i64,
    pub cycle_max: i64,
    pub max_scan_fields: i64,
}

/// Whether TLS clients must show a certificate (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsAuthClients {
    No,
    #[default]
    Yes,
    /// A certificate is checked when one is shown.
    Optional,
}

/// The `tls-*` options (see `crate::tls`, which builds the TLS
/// configurations from them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// The port TLS clients connect to (0: none).
    pub port: u16,
    pub cert_file: String,
    pub key_file: String,
    pub key_file_pass: String,
    pub client_cert_file: String,
    pub client_key_file: String,
    pub client_key_file_pass: String,
    pub dh_params_file: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: TlsAuthClients,
    pub protocols: String,
    pub ciphers: String,
    pub ciphersuites: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: i64,
    pub session_cache_timeout: i64,
    pub replication: bool,
    pub cluster: bool,
}

impl TlsConfig {
    /// TLS is in use: something listens or connects with it, so its
    /// certificates must load (Redis's applyTlsCfg condition).
    pub fn in_use(&self) -> bool {
        self.port != 0 || self.replication || self.cluster
    }
}

/// The `cluster-*` options. kvstore has no cluster mode (`cluster-enabled
/// yes` is refused at startup); the rest are values that configs written
/// for Redis may set.
#[derive(Clone, Debug, Default)]
pub struct ClusterConfig {
    pub enabled: bool,
    pub config_file: String,
    pub node_timeout: i64,
    pub port: i64,
    pub announce_ip: String,
    pub announce_hostname: String,
    pub announce_port: i64,
    pub announce_bus_port: i64,
    pub announce_tls_port: i64,
    pub preferred_endpoint_type: String,
    pub replica_validity_factor: i64,
    pub migration_barrier: i64,
    pub allow_replica_migration: bool,
    pub require_full_coverage: bool,
    pub replica_no_failover: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub link_sendbuf_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            bind: vec![],
            bind_source_addr: String::new(),
            port: 0,
            unixsocket: String::new(),
            unixsocketperm: 0,
            tcp_backlog: 0,
            tcp_keepalive: 0,
            timeout: 0,
            hz: 0,
            busy_reply_threshold: 0,
            databases: 0,
            requirepass: String::new(),
            maxclients: 0,
            maxmemory: 0,
            maxmemory_policy: MaxmemoryPolicy::NoEviction,
            lfu_log_factor: 0,
            lfu_decay_time: 0,
            maxmemory_samples: 0,
            maxmemory_eviction_tenacity: 0,
            maxmemory_clients: 0,
            proto_max_bulk_len: 0,
            client_query_buffer_limit: 0,
            loglevel: String::new(),
            logfile: String::new(),
            dir: PathBuf::new(),
            dbfilename: String::new(),
            save: String::new(),
            appendonly: false,
            appendfilename: String::new(),
            appendfsync: FsyncPolicy::Everysec,
            appenddirname: String::new(),
            auto_aof_rewrite_percentage: 0,
            auto_aof_rewrite_min_size: 0,
            aof_load_truncated: false,
            aof_use_rdb_preamble: false,
            no_appendfsync_on_rewrite: false,
            aof_timestamp_enabled: false,
            activerehashing: false,
            active_expire_effort: 0,
            lazyfree_lazy_expire: false,
            lazyfree_lazy_user_del: false,
            lazyfree_lazy_user_flush: false,
            stop_writes_on_bgsave_error: false,
            rdbcompression: false,
            rdbchecksum: false,
            hash_max_listpack_entries: 0,
            hash_max_listpack_value: 0,
            list_max_listpack_size: 0,
            list_compress_depth: 0,
            set_max_intset_entries: 0,
            zset_max_listpack_entries: 0,
            stream_node_max_bytes: 0,
            hll_sparse_max_bytes: 0,
            stream_node_max_entries: 0,
            zset_max_listpack_value: 0,
            slowlog_log_slower_than: 0,
            slowlog_max_len: 0,
            latency_monitor_threshold: 0,
            latency_tracking: false,
            latency_tracking_info_percentiles: Vec::new(),
            tracking_table_max_keys: 0,
            notify_keyspace_events: NotifyFlags(0),
            pidfile: String::new(),
            daemonize: false,
            protected_mode: false,
            enable_protected_configs: Gate::No,
            enable_debug_command: Gate::No,
            enable_module_command: Gate::No,
            rename_commands: Vec::new(),
            users: Vec::new(),
            aclfile: String::new(),
            acllog_max_len: 128,
            acl_pubsub_default_all: false,
            client_output_buffer_limit: [BufferLimit::default(); 3],
            lazyfree_lazy_eviction: false,
            lazyfree_lazy_server_del: false,
            replica_lazy_flush: false,
            repl_backlog_size: 0,
            repl_backlog_ttl: 0,
            repl_ping_replica_period: 0,
            repl_timeout: 0,
            replicaof: None,
            masterauth: String::new(),
            masteruser: String::new(),
            replica_read_only: true,
            replica_serve_stale_data: true,
            replica_ignore_maxmemory: true,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 0,
            repl_diskless_sync: true,
            repl_rdma: true,
            repl_diskless_load: String::new(),
            repl_diskless_sync_delay: 5,
            rdb_key_save_delay: 0,
            key_load_delay: 0,
            loading_process_events_interval_bytes: 2 * 1024 * 1024,
            config_file: None,
            repl_diskless_sync_max_replicas: 0,
            repl_disable_tcp_nodelay: false,
            rdb_del_sync_files: false,
            replica_priority: 0,
            replica_announced: true,
            replica_announce_ip: String::new(),
            replica_announce_port: 0,
            replica_ignore_disk_write_errors: false,
            propagation_error_behavior: PropagationErrorBehavior::Ignore,
            shutdown_on_sigint: ShutdownFlags::default(),
            shutdown_on_sigterm: ShutdownFlags::default(),
            shutdown_timeout: 0,
            dynamic_hz: true,
            jemalloc_bg_thread: true,
            disable_thp: true,
            oom_score_adj: OomScoreAdj::No,
            oom_score_adj_values: [0; 3],
            supervised: SupervisedMode::No,
            io_engine: IoEngine::IoUring,
            set_proc_title: true,
            proc_title_template: String::new(),
            crash_log_enabled: true,
            use_exit_on_panic: false,
            lua_enable_deprecated_api: false,
            watchdog_period: 0,
            crash_memcheck_enabled: true,
            sanitize_dump_payload: String::new(),
            aof_disable_auto_gc: false,
            aof_rewrite_incremental_fsync: true,
            rdb_save_incremental_fsync: true,
            always_show_logo: false,
            ignore_warnings: String::new(),
            io_threads: 1,
            io_threads_do_reads: false,
            server_cpulist: String::new(),
            bio_cpulist: String::new(),
            aof_rewrite_cpulist: String::new(),
            bgsave_cpulist: String::new(),
            socket_mark_id: 0,
            syslog_enabled: false,
            syslog_ident: String::new(),
            syslog_facility: String::new(),
            defrag: DefragConfig::default(),
            cluster: ClusterConfig::default(),
            tls: TlsConfig::default(),
        };
        for opt in OPTIONS {
            (opt.set)(&mut c, opt.default).expect("option defaults are valid");
        }
        c
    }
}

/// Who may use a dangerous facility (`enable-debug-command`,
/// `enable-protected-configs`, `enable-module-command`): nobody, everybody,
/// or only clients on a loopback address or the unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    No,
    Yes,
    Local,
}

impl Gate {
    fn parse(v: &str) -> Result<Gate, String> {
        match v.to_ascii_lowercase().as_str() {
            "no" => Ok(Gate::No),
            "yes" => Ok(Gate::Yes),
            "local" => Ok(Gate::Local),
            _ => Err("argument(s) must be one of the following: no, yes, local".into()),
        }
    }

    fn name(self) -> String {
        match self {
            Gate::No => "no",
            Gate::Yes => "yes",
            Gate::Local => "local",
        }
        .into()
    }

    /// Does the gate let a client through? `local`: the client connected
    /// from a loopback address or the unix socket.
    pub fn allows(self, local: bool) -> bool {
        match self {
            Gate::No => false,
            Gate::Yes => true,
            Gate::Local => local,
        }
    }
}

/// The classes `client-output-buffer-limit` distinguishes, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientClass {
    Normal = 0,
    Replica = 1,
    PubSub = 2,
}

/// One class's output buffer limit: closed at once past `hard` bytes, or
/// after staying past `soft` bytes for `soft_secs` seconds (0 = no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

fn format_buffer_limits(limits: &[BufferLimit; 3]) -> String {
    let names = ["normal", "slave", "pubsub"];
    names
        .iter()
        .zip(limits)
        .map(|(n, l)| format!("{n} {} {} {}", l.hard, l.soft, l.soft_secs))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parse `<class> <hard> <soft> <soft seconds>` groups (Redis's syntax and
/// error texts); classes not named keep their limits.
fn parse_buffer_limits(v: &str, limits: &mut [BufferLimit; 3]) -> Result<(), String> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    // No groups at all is no change, as in Redis.
    if !parts.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut out = *limits;
    for group in parts.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => ClientClass::Normal,
            "slave" | "replica" => ClientClass::Replica,
            "pubsub" => ClientClass::PubSub,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        let hard = parse_memory(group[1]).map_err(|_| bad())?;
        let soft = parse_memory(group[2]).map_err(|_| bad())?;
        let soft_secs: u64 = group[3].parse().map_err(|_| bad())?;
        out[class as usize] = BufferLimit {
            hard,
            soft,
            soft_secs,
        };
    }
    *limits = out;
    Ok(())
}

/// A file name that must not be a path (`dbfilename`, `appendfilename`).
fn base_name(v: &str, what: &str) -> Result<String, String> {
    if v.contains('/') || v.contains('\\') {
        return Err(format!("{what} can't be a path, just a filename"));
    }
    Ok(v.to_string())
}

/// An I/O error as Redis words it (`strerror`), without Rust's "(os error N)".
pub fn os_error_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `io-engine`: how client sockets are served: completions of an io_uring
/// (multishot receives, one submission of every send a turn), or epoll
/// readiness with a read and a write per client. `io_uring` falls back to
/// epoll where the kernel does not allow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoEngine {
    IoUring,
    Epoll,
}

impl IoEngine {
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::IoUring => "io_uring",
            IoEngine::Epoll => "epoll",
        }
    }
}

/// `appendfsync`: when the AOF is synced to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before any reply that reflects the write.
    Always,
    /// Once a second, on a background thread.
    Everysec,
    /// When the kernel decides.
    No,
}

impl FsyncPolicy {
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::Everysec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

/// `oom-score-adj`: whether the server sets its own OOM score (Redis's
/// setOOMScoreAdj), and how `oom-score-adj-values` are read: added to the
/// score the process started with (`relative`, alias `yes`), or as they
/// are (`absolute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OomScoreAdj {
    No,
    Relative,
    Absolute,
}

impl OomScoreAdj {
    fn parse(v: &str) -> Result<OomScoreAdj, String> {
        match v.to_ascii_lowercase().as_str() {
            "no" => Ok(OomScoreAdj::No),
            "yes" | "relative" => Ok(OomScoreAdj::Relative),
            "absolute" => Ok(OomScoreAdj::Absolute),
            _ => {
                Err("argument(s) must be one of the following: no, yes, relative, absolute".into())
            }
        }
    }

    /// As CONFIG GET shows it: Redis names `relative` by its first name, `yes`.
    pub fn name(self) -> &'static str {
        match self {
            OomScoreAdj::No => "no",
            OomScoreAdj::Relative => "yes",
            OomScoreAdj::Absolute => "absolute",
        }
    }
}

/// What the server is, for `oom-score-adj-values` (its order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OomClass {
    Master = 0,
    Replica = 1,
    BackgroundChild = 2,
}

/// `oom-score-adj-values`: three scores in [-2000, 2000] (Redis's
/// setConfigOOMScoreAdjValuesOption and its messages).
fn parse_oom_values(v: &str) -> Result<[i32; 3], String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    let mut out = [0i32; 3];
    for (slot, w) in out.iter_mut().zip(&words) {
        match strtoll_whole(w).filter(|n| (-2000..=2000).contains(n)) {
            Some(n) => *slot = n as i32,
            None => {
                return Err(
                    "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into(),
                )
            }
        }
    }
    if out[OomClass::Replica as usize] < out[OomClass::Master as usize]
        || out[OomClass::BackgroundChild as usize] < out[OomClass::Replica as usize]
    {
        tracing::warn!("The oom-score-adj-values configuration may not work for non-privileged processes! Please consult the documentation.");
    }
    Ok(out)
}

/// A number as C's strtoll reads a whole word (leading spaces, a sign,
/// digits to the end; out of range saturates), as Redis reads each of the
/// `oom-score-adj-values`.
fn strtoll_whole(w: &str) -> Option<i64> {
    let t = w.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match digits.parse::<i64>() {
        Ok(n) if neg => -n,
        Ok(n) => n,
        Err(_) if neg => i64::MIN,
        Err(_) => i64::MAX,
    })
}

/// `propagation-error-behavior`: what a replica (for its master's stream)
/// or the AOF loader does when a command it applies fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropagationErrorBehavior {
    /// Log it and go on.
    Ignore,
    /// Stop with a crash report, a replica (while read-only) or the AOF
    /// loader alike.
    Panic,
    /// Stop a read-only replica; the AOF loader goes on.
    PanicOnReplicas,
}

impl PropagationErrorBehavior {
    const NAMES: [(&'static str, PropagationErrorBehavior); 3] = [
        ("ignore", PropagationErrorBehavior::Ignore),
        ("panic", PropagationErrorBehavior::Panic),
        (
            "panic-on-replicas",
            PropagationErrorBehavior::PanicOnReplicas,
        ),
    ];

    fn parse(v: &str) -> Result<PropagationErrorBehavior, String> {
        let name = parse_enum(v, &Self::NAMES.map(|(n, _)| n))?;
        Ok(Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(PropagationErrorBehavior::Ignore, |(_, b)| *b))
    }

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("ignore", |(n, _)| n)
    }
}

/// `supervised`: how a supervisor learns the server is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SupervisedMode {
    No,
    /// Stop with SIGSTOP once initialised (upstart's `expect stop`).
    Upstart,
    /// sd_notify messages on $NOTIFY_SOCKET (READY=1, STOPPING=1, STATUS=).
    Systemd,
    /// Upstart when $UPSTART_JOB is set, else systemd when $NOTIFY_SOCKET is.
    Auto,
}

impl SupervisedMode {
    const NAMES: [(&'static str, SupervisedMode); 4] = [
        ("upstart", SupervisedMode::Upstart),
        ("systemd", SupervisedMode::Systemd),
        ("auto", SupervisedMode::Auto),
        ("no", SupervisedMode::No),
    ];

    fn parse(v: &str) -> Result<SupervisedMode, String> {
        let name = parse_enum(v, &Self::NAMES.map(|(n, _)| n))?;
        Ok(Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(SupervisedMode::No, |(_, m)| *m))
    }

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("no", |(n, _)| n)
    }
}

/// SHUTDOWN's flags, also those a signal's shutdown takes
/// (`shutdown-on-sigint`, `shutdown-on-sigterm`): Redis's SHUTDOWN_* bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownFlags(u8);

impl ShutdownFlags {
    /// Save a final snapshot even without save points.
    pub const SAVE: u8 = 1;
    /// No final snapshot even with save points.
    pub const NOSAVE: u8 = 2;
    /// Don't wait for lagging replicas.
    pub const NOW: u8 = 4;
    /// Exit even when the final snapshot fails.
    pub const FORCE: u8 = 8;
    /// The names in Redis's enum order (`default` is no flag).
    const NAMES: [(&'static str, u8); 5] = [
        ("default", 0),
        ("save", Self::SAVE),
        ("nosave", Self::NOSAVE),
        ("now", Self::NOW),
        ("force", Self::FORCE),
    ];

    pub const fn new(bits: u8) -> ShutdownFlags {
        ShutdownFlags(bits)
    }

    pub fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }

    /// These flags plus `flag`.
    pub fn with(self, flag: u8) -> ShutdownFlags {
        ShutdownFlags(self.0 | flag)
    }

    /// These flags without `flag`.
    pub fn without(self, flag: u8) -> ShutdownFlags {
        ShutdownFlags(self.0 & !flag)
    }

    /// Space-separated names, each adding its flag (Redis's multi-argument
    /// enum), SAVE and NOSAVE not together.
    fn parse(v: &str) -> Result<ShutdownFlags, String> {
        let words: Vec<&str> = v.split_whitespace().collect();
        let bad = || {
            let names: Vec<&str> = Self::NAMES.iter().map(|(n, _)| *n).collect();
            format!(
                "argument(s) must be one of the following: {}",
                names.join(", ")
            )
        };
        if words.is_empty() {
            return Err(bad());
        }
        let mut bits = 0;
        for w in words {
            let (_, bit) = Self::NAMES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(w))
                .ok_or_else(bad)?;
            bits |= bit;
        }
        if bits & Self::SAVE != 0 && bits & Self::NOSAVE != 0 {
            return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
        }
        Ok(ShutdownFlags(bits))
    }

    /// As CONFIG GET shows them (Redis's configEnumGetName with bit flags).
    pub fn names(self) -> String {
        if self.0 == 0 {
            return "default".into();
        }
        let names: Vec<&str> = Self::NAMES
            .iter()
            .filter(|(_, bit)| *bit != 0 && self.0 & bit != 0)
            .map(|(n, _)| *n)
            .collect();
        names.join(" ")
    }
}

/// A cluster-announce-hostname (Redis's isValidAnnouncedHostname).
fn valid_hostname(v: &str) -> Result<String, String> {
    /// Redis's NET_HOST_STR_LEN.
    const MAX_HOSTNAME: usize = 256;
    if v.len() >= MAX_HOSTNAME {
        return Err(format!(
            "Hostnames must be less than {MAX_HOSTNAME} characters"
        ));
    }
    if !v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        return Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into());
    }
    Ok(v.to_string())
}

/// `notify-keyspace-events`: which keyspace events are published, as
/// Redis's NOTIFY_* bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifyFlags(pub u32);

impl NotifyFlags {
    pub const KEYSPACE: u32 = 1 << 0; // K
    pub const KEYEVENT: u32 = 1 << 1; // E
    pub const GENERIC: u32 = 1 << 2; // g
    pub const STRING: u32 = 1 << 3; // $
    pub const LIST: u32 = 1 << 4; // l
    pub const SET: u32 = 1 << 5; // s
    pub const HASH: u32 = 1 << 6; // h
    pub const ZSET: u32 = 1 << 7; // z
    pub const EXPIRED: u32 = 1 << 8; // x
    pub const EVICTED: u32 = 1 << 9; // e
    pub const STREAM: u32 = 1 << 10; // t
    pub const KEY_MISS: u32 = 1 << 11; // m
    pub const MODULE: u32 = 1 << 13; // d
    pub const NEW: u32 = 1 << 14; // n
    /// `A`: every class but key-miss and new.
    pub const ALL: u32 = Self::GENERIC
        | Self::STRING
        | Self::LIST
        | Self::SET
        | Self::HASH
        | Self::ZSET
        | Self::EXPIRED
        | Self::EVICTED
        | Self::STREAM
        | Self::MODULE;

    /// Redis's keyspaceEventsStringToFlags: letters are case-sensitive,
    /// anything else is an error.
    pub fn parse(v: &str) -> Result<NotifyFlags, String> {
        let mut f = 0;
        for ch in v.chars() {
            f |= match ch {
                'A' => Self::ALL,
                'g' => Self::GENERIC,
                '$' => Self::STRING,
                'l' => Self::LIST,
                's' => Self::SET,
                'h' => Self::HASH,
                'z' => Self::ZSET,
                'x' => Self::EXPIRED,
                'e' => Self::EVICTED,
                'K' => Self::KEYSPACE,
                'E' => Self::KEYEVENT,
                't' => Self::STREAM,
                'm' => Self::KEY_MISS,
                'd' => Self::MODULE,
                'n' => Self::NEW,
                _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
            };
        }
        Ok(NotifyFlags(f))
    }

    /// Is anything published for events of `class`?
    #[inline]
    pub fn wants(self, class: u32) -> bool {
        self.0 & class != 0 && self.0 & (Self::KEYSPACE | Self::KEYEVENT) != 0
    }
}

impl std::fmt::Display for NotifyFlags {
    /// Redis's keyspaceEventsFlagsToString, letter order included (`n` is
    /// only written when not every `A` class is set, as in Redis).
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let f = self.0;
        let mut s = String::new();
        if f & Self::ALL == Self::ALL {
            s.push('A');
        } else {
            for (bit, ch) in [
                (Self::GENERIC, 'g'),
                (Self::STRING, '$'),
                (Self::LIST, 'l'),
                (Self::SET, 's'),
                (Self::HASH, 'h'),
                (Self::ZSET, 'z'),
                (Self::EXPIRED, 'x'),
                (Self::EVICTED, 'e'),
                (Self::STREAM, 't'),
                (Self::MODULE, 'd'),
                (Self::NEW, 'n'),
            ] {
                if f & bit != 0 {
                    s.push(ch);
                }
            }
        }
        for (bit, ch) in [
            (Self::KEYSPACE, 'K'),
            (Self::KEYEVENT, 'E'),
            (Self::KEY_MISS, 'm'),
        ] {
            if f & bit != 0 {
                s.push(ch);
            }
        }
        out.write_str(&s)
    }
}

/// How an option's value is written and read.
pub struct OptionSpec {
    pub name: &'static str,
    pub default: &'static str,
    /// Can CONFIG SET change it while running?
    pub mutable: bool,
    /// A protected config: CONFIG SET only where `enable-protected-configs`
    /// allows it (it can make the server write files elsewhere).
    pub protected: bool,
    /// The value is several words written unquoted (`save 3600 1`, `bind a b`).
    pub multi_arg: bool,
    pub get: fn(&Config) -> String,
    pub set: fn(&mut Config, &str) -> Result<(), String>,
    /// One-line description, used in the shipped kvstore.conf.
    pub doc: &'static str,
    /// The option's older name, still accepted (e.g. `hash-max-ziplist-entries`).
    pub alias: Option<&'static str>,
}

/// `replicaof <host> <port>` (empty: none).
fn parse_replicaof(v: &str) -> Result<Option<(String, u16)>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    match words.as_slice() {
        [] => Ok(None),
        [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => Ok(None),
        [host, port] => {
            let port = port
                .parse::<u16>()
                .map_err(|_| "Invalid master port".to_string())?;
            Ok(Some((host.to_string(), port)))
        }
        _ => Err("wrong number of arguments".into()),
    }
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// An integer option, parsed as Redis's string2ll does (no sign but `-`,
/// no leading zeros, no spaces) and checked against its range.
fn parse_int(v: &str, min: i64, max: i64) -> Result<i64, String> {
    let n = crate::util::parse_i64(v.as_bytes())
        .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
    bounded(n, min, max)
}

/// `n` when within `min..=max`, else Redis's numericBoundaryCheck error.
fn bounded<T: PartialOrd + std::fmt::Display>(n: T, min: T, max: T) -> Result<T, String> {
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// A memory amount read exactly as Redis's `memtoull` reads it: digits,
/// then a unit (`b`, `k` = 1000, `kb` = 1024, `m`, `mb`, `g`, `gb`, any
/// case) or none. No digits read as 0 (so `""` and `"k"` are 0); a number
/// too big for 64 bits saturates and the unit then multiplies with
/// wrap-around, as C's strtoull and unsigned arithmetic do there.
fn memtoull(v: &str) -> Option<u64> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let mul: u64 = match v[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    // Redis copies the digits into a 128-byte buffer first.
    if digits >= 128 {
        return None;
    }
    let n = if digits == 0 {
        0
    } else {
        v[..digits].parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(n.wrapping_mul(mul))
}

/// Parse a memory amount the way Redis's `memtoull` does: `1gb` = 2^30,
/// `1g` = 10^9, `1kb` = 1024, `1k` = 1000; plain numbers are bytes.
pub fn parse_memory(v: &str) -> Result<u64, String> {
    memtoull(v).ok_or_else(|| "argument must be a memory value".to_string())
}

/// A memory option whose Redis type is unsigned (size_t, unsigned long
/// long): the amount is compared with the bounds as an unsigned number.
fn memory_in_range(v: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = parse_memory(v)?;
    bounded(n, min, max)
}

/// A memory option whose Redis type is signed (long long, off_t): the
/// amount is read as unsigned, then compared as signed, so 2^63 and above
/// are below the minimum, as in Redis's numericBoundaryCheck.
fn signed_memory_in_range(v: &str, min: i64, max: i64) -> Result<i64, String> {
    let n = parse_memory(v)? as i64;
    bounded(n, min, max)
}

/// One of `allowed` (any case), which the error lists in the order given:
/// Redis's order for that option.
fn parse_enum(v: &str, allowed: &[&str]) -> Result<String, String> {
    let lower = v.to_ascii_lowercase();
    if allowed.contains(&lower.as_str()) {
        Ok(lower)
    } else {
        Err(format!(
            "argument(s) must be one of the following: {}",
            allowed.join(", ")
        ))
    }
}

/// What happens when `maxmemory` is reached (Redis's maxmemory-policy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    #[default]
    NoEviction,
}

impl MaxmemoryPolicy {
    /// Every policy, in the order Redis lists them in its error.
    pub const ALL: [MaxmemoryPolicy; 8] = [
        Self::VolatileLru,
        Self::VolatileLfu,
        Self::VolatileRandom,
        Self::VolatileTtl,
        Self::AllkeysLru,
        Self::AllkeysLfu,
        Self::AllkeysRandom,
        Self::NoEviction,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::VolatileLru => "volatile-lru",
            Self::VolatileLfu => "volatile-lfu",
            Self::VolatileRandom => "volatile-random",
            Self::VolatileTtl => "volatile-ttl",
            Self::AllkeysLru => "allkeys-lru",
            Self::AllkeysLfu => "allkeys-lfu",
            Self::AllkeysRandom => "allkeys-random",
            Self::NoEviction => "noeviction",
        }
    }

    /// Whether entries keep LFU counters instead of LRU times.
    pub fn is_lfu(self) -> bool {
        matches!(self, Self::VolatileLfu | Self::AllkeysLfu)
    }

    pub fn is_lru(self) -> bool {
        matches!(self, Self::VolatileLru | Self::AllkeysLru)
    }

    /// Whether any key may be evicted, or only keys with a TTL.
    pub fn all_keys(self) -> bool {
        matches!(
            self,
            Self::AllkeysLru | Self::AllkeysLfu | Self::AllkeysRandom
        )
    }
}

impl std::fmt::Display for MaxmemoryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Validate a `save` value: pairs of seconds and changes, or "".
fn parse_save(v: &str) -> Result<String, String> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    if !parts.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    for p in &parts {
        if p.parse::<u64>().is_err() {
            return Err("Invalid save parameters".into());
        }
    }
    Ok(parts.join(" "))
}

/// Validate `latency-tracking-info-percentiles` as Redis does: the value
/// split at each single space (so doubled spaces make empty, invalid
/// words), each word a double (C's strtod, whole word) in [0, 100]; an
/// empty value means no percentiles.
fn parse_percentiles(v: &str) -> Result<Vec<f64>, String> {
    if v.is_empty() {
        return Ok(Vec::new());
    }
    v.split(' ')
        .map(|word| {
            let p = crate::util::parse_f64(word.as_bytes()).ok_or_else(|| {
                "Invalid latency-tracking-info-percentiles parameters".to_string()
            })?;
            if !(0.0..=100.0).contains(&p) {
                return Err(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                        .to_string(),
                );
            }
            Ok(p)
        })
        .collect()
}

/// `latency-tracking-info-percentiles` as CONFIG GET shows it: `50 99 99.9`.
fn format_percentiles(ps: &[f64]) -> String {
    let words: Vec<String> = ps
        .iter()
        .map(|&p| crate::util::format_percentile(p))
        .collect();
    words.join(" ")
}

/// Mark an option protected.
const fn protected(mut o: OptionSpec) -> OptionSpec {
    o.protected = true;
    o
}

/// Mark an option as taking several words.
const fn multi_arg(mut o: OptionSpec) -> OptionSpec {
    o.multi_arg = true;
    o
}

/// Give an option its older alias.
const fn aliased(mut o: OptionSpec, alias: &'static str) -> OptionSpec {
    o.alias = Some(alias);
    o
}

macro_rules! opt {
    ($name:literal, $default:literal, $mutable:expr, $doc:literal, |$c:ident| $get:expr, |$c2:ident, $v:ident| $set:expr) => {
        OptionSpec {
            name: $name,
            default: $default,
            mutable: $mutable,
            doc: $doc,
            alias: None,
            protected: false,
            multi_arg: false,
            get: |$c: &Config| $get,
            set: |$c2: &mut Config, $v: &str| {
                $set;
                Ok(())
            },
        }
    };
}

/// Every option the server knows, in the order kvstore.conf documents them.
pub static OPTIONS: &[OptionSpec] = &[
    multi_arg(opt!(
        "bind",
        "* -::*",
        true,
        "Addresses to listen on, space separated: `*` is any IPv4 address, `::*` any IPv6 one, a leading `-` marks an address the host may lack. The default listens everywhere, as Redis's does; protected mode refuses clients from outside the host while no password is set.",
        |c| c.bind.join(" "),
        |c, v| c.bind = v.split_whitespace().map(String::from).collect()
    )),
    opt!(
        "bind-source-addr",
        "",
        true,
        "The local address a replica connects to its master from (empty: the kernel's choice).",
        |c| c.bind_source_addr.clone(),
        |c, v| c.bind_source_addr = v.to_string()
    ),
    opt!(
        "port",
        "6379",
        true,
        "TCP port (0 disables TCP).",
        |c| c.port.to_string(),
        |c, v| c.port = parse_int(v, 0, 65535)? as u16
    ),
    opt!(
        "unixsocket",
        "",
        false,
        "Path of a unix socket to listen on as well (empty: none).",
        |c| c.unixsocket.clone(),
        |c, v| c.unixsocket = v.to_string()
    ),
    opt!(
        "unixsocketperm",
        "0",
        false,
        "Octal permissions of the unix socket (0: umask default).",
        |c| format!("{:o}", c.unixsocketperm),
        |c, v| c.unixsocketperm = u32::from_str_radix(v, 8)
            .map_err(|_| "argument couldn't be parsed into an integer".to_string())?
    ),
    opt!(
        "tcp-backlog",
        "511",
        false,
        "listen() backlog.",
        |c| c.tcp_backlog.to_string(),
        |c, v| c.tcp_backlog = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "tcp-keepalive",
        "300",
        true,
        "TCP keepalive interval in seconds (0: off).",
        |c| c.tcp_keepalive.to_string(),
        |c, v| c.tcp_keepalive = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "timeout",
        "0",
        true,
        "Close a client after this many idle seconds (0: never).",
        |c| c.timeout.to_string(),
        |c, v| c.timeout = parse_int(v, 0, i32::MAX as i64)?
    ),
    aliased(
        opt!(
            "busy-reply-threshold",
            "5000",
            true,
            "Milliseconds after which a running script is logged as slow (and a termination signal stops it); 0 never.",
            |c| c.busy_reply_threshold.to_string(),
            |c, v| c.busy_reply_threshold = parse_int(v, 0, i64::MAX)?
        ),
        "lua-time-limit",
    ),
    opt!(
        "hz",
        "10",
        true,
        "Background task frequency (expiry, timeouts, stats), 1-500.",
        |c| c.hz.to_string(),
        |c, v| c.hz = parse_int(v, 0, i32::MAX as i64)?.clamp(1, 500)
    ),
    opt!(
        "databases",
        "16",
        false,
        "Number of databases (SELECT 0..n-1).",
        |c| c.databases.to_string(),
        |c, v| c.databases = parse_int(v, 1, i32::MAX as i64)? as usize
    ),
    opt!(
        "requirepass",
        "",
        true,
        "Password clients must AUTH with (empty: none).",
        |c| c.requirepass.clone(),
        |c, v| c.requirepass = v.to_string()
    ),
    opt!(
        "maxclients",
        "10000",
        true,
        "Maximum simultaneous clients.",
        |c| c.maxclients.to_string(),
        |c, v| c.maxclients = parse_int(v, 1, u32::MAX as i64)?
    ),
    opt!(
        "maxmemory",
        "0",
        true,
        "Memory limit in bytes (0: none); see maxmemory-policy.",
        |c| c.maxmemory.to_string(),
        |c, v| c.maxmemory = parse_memory(v)?
    ),
    opt!(
        "maxmemory-policy",
        "noeviction",
        true,
        "What to do at maxmemory: evict keys by this policy, or (noeviction) refuse writes with an OOM error.",
        |c| c.maxmemory_policy.name().to_string(),
        |c, v| {
            let names: Vec<&str> = MaxmemoryPolicy::ALL.iter().map(|p| p.name()).collect();
            let name = parse_enum(v, &names)?;
            c.maxmemory_policy = MaxmemoryPolicy::ALL
                .into_iter()
                .find(|p| p.name() == name)
                .unwrap_or_default()
        }
    ),
    opt!(
        "lfu-log-factor",
        "10",
        true,
        "How slowly LFU counters grow: a key needs about factor * counter hits per increment.",
        |c| c.lfu_log_factor.to_string(),
        |c, v| c.lfu_log_factor = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "lfu-decay-time",
        "1",
        true,
        "Every this many minutes of idleness an LFU counter drops by one (0: never).",
        |c| c.lfu_decay_time.to_string(),
        |c, v| c.lfu_decay_time = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "maxmemory-samples",
        "5",
        true,
        "Keys sampled per eviction.",
        |c| c.maxmemory_samples.to_string(),
        |c, v| c.maxmemory_samples = parse_int(v, 1, i32::MAX as i64)?
    ),
    opt!(
        "maxmemory-eviction-tenacity",
        "10",
        true,
        "Effort spent evicting per write, 0-100.",
        |c| c.maxmemory_eviction_tenacity.to_string(),
        |c, v| c.maxmemory_eviction_tenacity = parse_int(v, 0, 100)?
    ),
    opt!(
        "maxmemory-clients",
        "0",
        true,
        "Memory all normal and pub/sub clients may hold together, in bytes or as a percentage of maxmemory (\"10%\"); past it the biggest clients are disconnected (0: no limit).",
        |c| if c.maxmemory_clients < 0 {
            format!("{}%", -c.maxmemory_clients)
        } else {
            c.maxmemory_clients.to_string()
        },
        |c, v| {
            // Redis's numericParseString: a memory value (read unsigned,
            // kept signed), else "N%" (stored negative); then its
            // numericBoundaryCheck: a negative value is a percentage, at
            // most 100.
            let n = match memtoull(v) {
                Some(n) => n as i64,
                None => match v.strip_suffix('%').and_then(|p| crate::util::parse_i64(p.as_bytes())) {
                    Some(p) if p >= 0 => -p,
                    _ => return Err("argument must be a memory or percent value".into()),
                },
            };
            if n < -100 {
                return Err("percentage argument must be less or equal to 100".into());
            }
            c.maxmemory_clients = n
        }
    ),
    opt!(
        "proto-max-bulk-len",
        "512mb",
        true,
        "Largest bulk string a client may send.",
        |c| c.proto_max_bulk_len.to_string(),
        |c, v| c.proto_max_bulk_len = signed_memory_in_range(v, 1024 * 1024, i64::MAX)?
    ),
    opt!(
        "client-query-buffer-limit",
        "1gb",
        true,
        "Largest query buffer of one client; beyond it the client is closed.",
        |c| c.client_query_buffer_limit.to_string(),
        |c, v| c.client_query_buffer_limit = memory_in_range(v, 1024 * 1024, i64::MAX as u64)?
    ),
    opt!(
        "loglevel",
        "notice",
        true,
        "debug, verbose, notice or warning.",
        |c| c.loglevel.clone(),
        |c, v| c.loglevel = parse_enum(v, &["debug", "verbose", "notice", "warning"])?
    ),
    opt!(
        "logfile",
        "",
        false,
        "Log file path (empty: standard output).",
        |c| c.logfile.clone(),
        |c, v| c.logfile = v.to_string()
    ),
    protected(opt!(
        "dir",
        "./",
        true,
        "Working directory for data files; it must exist. Protected: CONFIG SET only with enable-protected-configs.",
        |c| c.dir.display().to_string(),
        |c, v| c.dir = absolute_dir(v)?
    )),
    protected(opt!(
        "dbfilename",
        "dump.rdb",
        true,
        "Snapshot file name, in dir (a name, not a path). Protected like dir.",
        |c| c.dbfilename.clone(),
        |c, v| c.dbfilename = base_name(v, "dbfilename")?
    )),
    opt!(
        "rdb-key-save-delay",
        "0",
        true,
        "Microseconds a background save sleeps per key (for tests; 0: none).",
        |c| c.rdb_key_save_delay.to_string(),
        |c, v| c.rdb_key_save_delay = parse_int(v, i32::MIN as i64, i32::MAX as i64)?
    ),
    opt!(
        "key-load-delay",
        "0",
        true,
        "Microseconds loading a dump or the AOF waits per key (for tests; a negative -N waits 1 µs once in N keys; 0: none).",
        |c| c.key_load_delay.to_string(),
        |c, v| c.key_load_delay = parse_int(v, i32::MIN as i64, i32::MAX as i64)?
    ),
    opt!(
        "loading-process-events-interval-bytes",
        "2097152",
        true,
        "Bytes of a dump loaded at startup or from a master between two turns of the event loop, which serves clients (-LOADING) meanwhile.",
        |c| c.loading_process_events_interval_bytes.to_string(),
        |c, v| c.loading_process_events_interval_bytes = parse_int(v, 1024, i32::MAX as i64)?
    ),
    multi_arg(opt!(
        "save",
        "3600 1 300 100 60 10000",
        true,
        "Snapshot save points: pairs of <seconds> <changes> (\"\" disables).",
        |c| c.save.clone(),
        |c, v| c.save = parse_save(v)?
    )),
    opt!(
        "appendonly",
        "no",
        true,
        "Append-only file persistence (Redis 7's multi-part AOF in appenddirname).",
        |c| yes_no(c.appendonly),
        |c, v| c.appendonly = parse_bool(v)?
    ),
    opt!(
        "appenddirname",
        "appendonlydir",
        false,
        "Directory (inside dir) of the append-only files and their manifest.",
        |c| c.appenddirname.clone(),
        |c, v| c.appenddirname = base_name(v, "appenddirname")?
    ),
    opt!(
        "auto-aof-rewrite-percentage",
        "100",
        true,
        "Rewrite the AOF when it grew this much (percent) since the last rewrite; 0 = never.",
        |c| c.auto_aof_rewrite_percentage.to_string(),
        |c, v| c.auto_aof_rewrite_percentage = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "auto-aof-rewrite-min-size",
        "64mb",
        true,
        "No automatic AOF rewrite below this size.",
        |c| c.auto_aof_rewrite_min_size.to_string(),
        |c, v| c.auto_aof_rewrite_min_size = signed_memory_in_range(v, 0, i64::MAX)? as u64
    ),
    opt!(
        "aof-load-truncated",
        "yes",
        true,
        "Load an AOF whose last command was cut short by a crash (the tail is removed).",
        |c| yes_no(c.aof_load_truncated),
        |c, v| c.aof_load_truncated = parse_bool(v)?
    ),
    opt!(
        "aof-use-rdb-preamble",
        "yes",
        true,
        "Write the AOF base as an RDB image (yes) or as commands (no).",
        |c| yes_no(c.aof_use_rdb_preamble),
        |c, v| c.aof_use_rdb_preamble = parse_bool(v)?
    ),
    opt!(
        "no-appendfsync-on-rewrite",
        "no",
        true,
        "Skip fsync of the AOF while a rewrite or BGSAVE child runs.",
        |c| yes_no(c.no_appendfsync_on_rewrite),
        |c, v| c.no_appendfsync_on_rewrite = parse_bool(v)?
    ),
    opt!(
        "aof-timestamp-enabled",
        "no",
        true,
        "Write a #TS:<unix time> annotation in the AOF each second there are writes.",
        |c| yes_no(c.aof_timestamp_enabled),
        |c, v| c.aof_timestamp_enabled = parse_bool(v)?
    ),
    opt!(
        "appendfilename",
        "appendonly.aof",
        false,
        "Base name of the append-only files.",
        |c| c.appendfilename.clone(),
        |c, v| c.appendfilename = base_name(v, "appendfilename")?
    ),
    opt!(
        "appendfsync",
        "everysec",
        true,
        "always, everysec or no.",
        |c| c.appendfsync.name().to_string(),
        |c, v| {
            c.appendfsync = match parse_enum(v, &["everysec", "always", "no"])?.as_str() {
                "always" => FsyncPolicy::Always,
                "everysec" => FsyncPolicy::Everysec,
                _ => FsyncPolicy::No,
            }
        }
    ),
    opt!(
        "activerehashing",
        "yes",
        true,
        "Spend cron time finishing table resizes.",
        |c| yes_no(c.activerehashing),
        |c, v| c.activerehashing = parse_bool(v)?
    ),
    opt!(
        "active-expire-effort",
        "1",
        true,
        "Effort of the active expiry cycle, 1-10.",
        |c| c.active_expire_effort.to_string(),
        |c, v| c.active_expire_effort = parse_int(v, 1, 10)?
    ),
    opt!(
        "lazyfree-lazy-eviction",
        "no",
        true,
        "Free evicted values in the background.",
        |c| yes_no(c.lazyfree_lazy_eviction),
        |c, v| c.lazyfree_lazy_eviction = parse_bool(v)?
    ),
    opt!(
        "lazyfree-lazy-expire",
        "no",
        true,
        "Free expired values in the background and propagate expirations as UNLINK.",
        |c| yes_no(c.lazyfree_lazy_expire),
        |c, v| c.lazyfree_lazy_expire = parse_bool(v)?
    ),
    opt!(
        "lazyfree-lazy-server-del",
        "no",
        true,
        "Free values a command replaces (SET over a big set, RENAME onto a key) in the background.",
        |c| yes_no(c.lazyfree_lazy_server_del),
        |c, v| c.lazyfree_lazy_server_del = parse_bool(v)?
    ),
    opt!(
        "lazyfree-lazy-user-del",
        "no",
        true,
        "Make DEL behave like UNLINK (large values freed in the background).",
        |c| yes_no(c.lazyfree_lazy_user_del),
        |c, v| c.lazyfree_lazy_user_del = parse_bool(v)?
    ),
    opt!(
        "lazyfree-lazy-user-flush",
        "no",
        true,
        "Make FLUSHALL/FLUSHDB default to ASYNC.",
        |c| yes_no(c.lazyfree_lazy_user_flush),
        |c, v| c.lazyfree_lazy_user_flush = parse_bool(v)?
    ),
    aliased(
        opt!(
            "replica-lazy-flush",
            "no",
            true,
            "A replica empties its dataset in the background before a full sync.",
            |c| yes_no(c.replica_lazy_flush),
            |c, v| c.replica_lazy_flush = parse_bool(v)?
        ),
        "slave-lazy-flush",
    ),
    opt!(
        "stop-writes-on-bgsave-error",
        "yes",
        true,
        "Refuse writes while the last background save failed.",
        |c| yes_no(c.stop_writes_on_bgsave_error),
        |c, v| c.stop_writes_on_bgsave_error = parse_bool(v)?
    ),
    opt!(
        "rdbcompression",
        "yes",
        true,
        "LZF-compress strings in snapshots.",
        |c| yes_no(c.rdbcompression),
        |c, v| c.rdbcompression = parse_bool(v)?
    ),
    opt!(
        "rdbchecksum",
        "yes",
        false,
        "Write and verify the CRC64 trailer of snapshots.",
        |c| yes_no(c.rdbchecksum),
        |c, v| c.rdbchecksum = parse_bool(v)?
    ),
    aliased(
        opt!(
            "hash-max-listpack-entries",
            "512",
            true,
            "Hashes with at most this many fields stay compact.",
            |c| c.hash_max_listpack_entries.to_string(),
            |c, v| c.hash_max_listpack_entries = parse_int(v, 0, i64::MAX)?
        ),
        "hash-max-ziplist-entries",
    ),
    aliased(
        opt!(
            "hash-max-listpack-value",
            "64",
            true,
            "Hashes whose fields and values are at most this long stay compact.",
            |c| c.hash_max_listpack_value.to_string(),
            |c, v| c.hash_max_listpack_value = memory_in_range(v, 0, i64::MAX as u64)? as i64
        ),
        "hash-max-ziplist-value",
    ),
    aliased(
        opt!(
            "list-max-listpack-size",
            "-2",
            true,
            "List node size: negative = -1..-5 for 4..64 KB, positive = entries.",
            |c| c.list_max_listpack_size.to_string(),
            |c, v| c.list_max_listpack_size = parse_int(v, i32::MIN as i64, i32::MAX as i64)?
        ),
        "list-max-ziplist-size",
    ),
    opt!(
        "list-compress-depth",
        "0",
        true,
        "List nodes kept uncompressed at each end; the others are LZF-compressed (0: none).",
        |c| c.list_compress_depth.to_string(),
        |c, v| c.list_compress_depth = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "set-max-intset-entries",
        "512",
        true,
        "Integer sets with at most this many members stay compact.",
        |c| c.set_max_intset_entries.to_string(),
        |c, v| c.set_max_intset_entries = parse_int(v, 0, i64::MAX)?
    ),
    opt!(
        "hll-sparse-max-bytes",
        "3000",
        true,
        "A sparse HyperLogLog grows to at most this many bytes, then becomes dense.",
        |c| c.hll_sparse_max_bytes.to_string(),
        |c, v| c.hll_sparse_max_bytes = memory_in_range(v, 0, i64::MAX as u64)? as usize
    ),
    opt!(
        "stream-node-max-bytes",
        "4kb",
        true,
        "A stream node (a listpack of entries) grows to at most this many bytes.",
        |c| c.stream_node_max_bytes.to_string(),
        |c, v| c.stream_node_max_bytes = memory_in_range(v, 0, i64::MAX as u64)?
    ),
    opt!(
        "stream-node-max-entries",
        "100",
        true,
        "A stream node holds at most this many entries (0: no limit).",
        |c| c.stream_node_max_entries.to_string(),
        |c, v| c.stream_node_max_entries = parse_int(v, 0, i64::MAX)?
    ),
    aliased(
        opt!(
            "zset-max-listpack-entries",
            "128",
            true,
            "Sorted sets with at most this many members stay compact.",
            |c| c.zset_max_listpack_entries.to_string(),
            |c, v| c.zset_max_listpack_entries = parse_int(v, 0, i64::MAX)?
        ),
        "zset-max-ziplist-entries",
    ),
    aliased(
        opt!(
            "zset-max-listpack-value",
            "64",
            true,
            "Sorted sets whose members are at most this long stay compact.",
            |c| c.zset_max_listpack_value.to_string(),
            |c, v| c.zset_max_listpack_value = memory_in_range(v, 0, i64::MAX as u64)? as i64
        ),
        "zset-max-ziplist-value",
    ),
    opt!(
        "slowlog-log-slower-than",
        "10000",
        true,
        "Slow log threshold in microseconds.",
        |c| c.slowlog_log_slower_than.to_string(),
        |c, v| c.slowlog_log_slower_than = parse_int(v, -1, i64::MAX)?
    ),
    opt!(
        "acllog-max-len",
        "128",
        true,
        "Entries the ACL log keeps (ACL LOG).",
        |c| c.acllog_max_len.to_string(),
        |c, v| c.acllog_max_len = parse_int(v, 0, i64::MAX)?
    ),
    opt!(
        "acl-pubsub-default",
        "resetchannels",
        true,
        "Channels a new ACL user may use: resetchannels (none) or allchannels.",
        |c| if c.acl_pubsub_default_all { "allchannels" } else { "resetchannels" }.to_string(),
        |c, v| c.acl_pubsub_default_all = parse_enum(v, &["allchannels", "resetchannels"])? == "allchannels"
    ),
    opt!(
        "aclfile",
        "",
        false,
        "The ACL file users are loaded from at start and by ACL LOAD, and saved to by ACL SAVE (empty: users come from user lines).",
        |c| c.aclfile.clone(),
        |c, v| c.aclfile = v.to_string()
    ),
    opt!(
        "slowlog-max-len",
        "128",
        true,
        "Slow log length.",
        |c| c.slowlog_max_len.to_string(),
        |c, v| c.slowlog_max_len = parse_int(v, 0, i64::MAX)?
    ),
    opt!(
        "latency-monitor-threshold",
        "0",
        true,
        "Latency monitor threshold in milliseconds (0 disables the monitor).",
        |c| c.latency_monitor_threshold.to_string(),
        |c, v| c.latency_monitor_threshold = parse_int(v, 0, i64::MAX)?
    ),
    opt!(
        "latency-tracking",
        "yes",
        true,
        "Per-command latency histograms (INFO latencystats, LATENCY HISTOGRAM).",
        |c| yes_no(c.latency_tracking),
        |c, v| c.latency_tracking = parse_bool(v)?
    ),
    multi_arg(opt!(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        true,
        "Percentiles INFO latencystats reports (\"\" for none).",
        |c| format_percentiles(&c.latency_tracking_info_percentiles),
        |c, v| c.latency_tracking_info_percentiles = parse_percentiles(v)?
    )),
    aliased(
        multi_arg(opt!(
            "replicaof",
            "",
            false,
            "Start as a replica of <host> <port> (REPLICAOF changes it at run time).",
            |c| c
                .replicaof
                .as_ref()
                .map_or(String::new(), |(h, p)| format!("{h} {p}")),
            |c, v| c.replicaof = parse_replicaof(v)?
        )),
        "slaveof"
    ),
    opt!(
        "masterauth",
        "",
        true,
        "Password to AUTH with on the master.",
        |c| c.masterauth.clone(),
        |c, v| c.masterauth = v.to_string()
    ),
    opt!(
        "masteruser",
        "",
        true,
        "User to AUTH as on the master (with masterauth).",
        |c| c.masteruser.clone(),
        |c, v| c.masteruser = v.to_string()
    ),
    aliased(
        opt!(
            "replica-read-only",
            "yes",
            true,
            "A replica refuses writes from its clients (READONLY).",
            |c| yes_no(c.replica_read_only),
            |c, v| c.replica_read_only = parse_bool(v)?
        ),
        "slave-read-only"
    ),
    aliased(
        opt!(
            "replica-serve-stale-data",
            "yes",
            true,
            "A replica whose link to its master is down still answers reads (no: MASTERDOWN).",
            |c| yes_no(c.replica_serve_stale_data),
            |c, v| c.replica_serve_stale_data = parse_bool(v)?
        ),
        "slave-serve-stale-data"
    ),
    aliased(
        opt!(
            "replica-ignore-maxmemory",
            "yes",
            true,
            "A replica never evicts: it mirrors its master, whose evictions arrive as DELs.",
            |c| yes_no(c.replica_ignore_maxmemory),
            |c, v| c.replica_ignore_maxmemory = parse_bool(v)?
        ),
        "slave-ignore-maxmemory"
    ),
    aliased(
        opt!(
            "min-replicas-to-write",
            "0",
            true,
            "Refuse writes (NOREPLICAS) unless this many replicas acknowledged within min-replicas-max-lag (0: off).",
            |c| c.min_replicas_to_write.to_string(),
            |c, v| c.min_replicas_to_write = parse_int(v, 0, i32::MAX as i64)?
        ),
        "min-slaves-to-write"
    ),
    aliased(
        opt!(
            "min-replicas-max-lag",
            "10",
            true,
            "Seconds since its last ACK within which a replica counts for min-replicas-to-write.",
            |c| c.min_replicas_max_lag.to_string(),
            |c, v| c.min_replicas_max_lag = parse_int(v, 0, i32::MAX as i64)?
        ),
        "min-slaves-max-lag"
    ),
    opt!(
        "repl-diskless-sync",
        "yes",
        true,
        "A full sync streams the snapshot to replicas (\"$EOF:\" transfer) instead of writing the dump first.",
        |c| yes_no(c.repl_diskless_sync),
        |c, v| c.repl_diskless_sync = parse_bool(v)?
    ),
    opt!(
        "tls-port",
        "0",
        true,
        "TCP port for TLS clients (0: none); it listens on the `bind` addresses, as `port` does.",
        |c| c.tls.port.to_string(),
        |c, v| c.tls.port = parse_int(v, 0, 65535)? as u16
    ),
    opt!(
        "tls-cert-file",
        "",
        true,
        "PEM certificate chain this server shows its TLS clients (and a master, when no tls-client-cert-file is set). CONFIG SET of any tls- file reloads them all.",
        |c| c.tls.cert_file.clone(),
        |c, v| c.tls.cert_file = v.to_string()
    ),
    opt!(
        "tls-key-file",
        "",
        true,
        "PEM private key of tls-cert-file (PKCS#8, PKCS#1 or SEC1; an encrypted PKCS#8 key needs tls-key-file-pass).",
        |c| c.tls.key_file.clone(),
        |c, v| c.tls.key_file = v.to_string()
    ),
    opt!(
        "tls-key-file-pass",
        "",
        true,
        "Passphrase of an encrypted tls-key-file.",
        |c| c.tls.key_file_pass.clone(),
        |c, v| c.tls.key_file_pass = v.to_string()
    ),
    opt!(
        "tls-client-cert-file",
        "",
        true,
        "PEM certificate this server shows a master it replicates over TLS (empty: tls-cert-file).",
        |c| c.tls.client_cert_file.clone(),
        |c, v| c.tls.client_cert_file = v.to_string()
    ),
    opt!(
        "tls-client-key-file",
        "",
        true,
        "Private key of tls-client-cert-file.",
        |c| c.tls.client_key_file.clone(),
        |c, v| c.tls.client_key_file = v.to_string()
    ),
    opt!(
        "tls-client-key-file-pass",
        "",
        true,
        "Passphrase of an encrypted tls-client-key-file.",
        |c| c.tls.client_key_file_pass.clone(),
        |c, v| c.tls.client_key_file_pass = v.to_string()
    ),
    opt!(
        "tls-dh-params-file",
        "",
        true,
        "Kept for Redis configs: key exchange is always ECDHE (X25519, P-256, P-384), so DH parameters are not used; a file named here must still be readable.",
        |c| c.tls.dh_params_file.clone(),
        |c, v| c.tls.dh_params_file = v.to_string()
    ),
    opt!(
        "tls-ca-cert-file",
        "",
        true,
        "PEM certificates of the authorities that sign client and master certificates.",
        |c| c.tls.ca_cert_file.clone(),
        |c, v| c.tls.ca_cert_file = v.to_string()
    ),
    opt!(
        "tls-ca-cert-dir",
        "",
        true,
        "A directory of PEM authority certificates (every file in it that holds certificates).",
        |c| c.tls.ca_cert_dir.clone(),
        |c, v| c.tls.ca_cert_dir = v.to_string()
    ),
    opt!(
        "tls-auth-clients",
        "yes",
        true,
        "yes: TLS clients must show a certificate signed by a tls-ca-cert authority; optional: one shown is checked; no: none asked for.",
        |c| match c.tls.auth_clients {
            TlsAuthClients::No => "no",
            TlsAuthClients::Yes => "yes",
            TlsAuthClients::Optional => "optional",
        }
        .to_string(),
        |c, v| {
            c.tls.auth_clients = match parse_enum(v, &["no", "yes", "optional"])?.as_str() {
                "no" => TlsAuthClients::No,
                "yes" => TlsAuthClients::Yes,
                _ => TlsAuthClients::Optional,
            }
        }
    ),
    opt!(
        "tls-protocols",
        "",
        true,
        "TLS versions allowed, space separated: TLSv1.2 and TLSv1.3 (empty: both; TLSv1 and TLSv1.1 are not offered).",
        |c| c.tls.protocols.clone(),
        |c, v| c.tls.protocols = v.to_string()
    ),
    opt!(
        "tls-ciphers",
        "",
        true,
        "TLSv1.2 cipher list in OpenSSL's syntax (names such as ECDHE-RSA-AES256-GCM-SHA384, keywords such as DEFAULT, HIGH, AESGCM, CHACHA20, ! and - to remove); empty: all ECDHE AEAD suites.",
        |c| c.tls.ciphers.clone(),
        |c, v| c.tls.ciphers = v.to_string()
    ),
    opt!(
        "tls-ciphersuites",
        "",
        true,
        "TLSv1.3 suites, colon separated: TLS_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256 (empty: all three).",
        |c| c.tls.ciphersuites.clone(),
        |c, v| c.tls.ciphersuites = v.to_string()
    ),
    opt!(
        "tls-prefer-server-ciphers",
        "no",
        true,
        "Pick the cipher by this server's order of preference rather than the client's.",
        |c| yes_no(c.tls.prefer_server_ciphers),
        |c, v| c.tls.prefer_server_ciphers = parse_bool(v)?
    ),
    opt!(
        "tls-session-caching",
        "yes",
        true,
        "Let TLS clients resume sessions (a cache of tls-session-cache-size sessions).",
        |c| yes_no(c.tls.session_caching),
        |c, v| c.tls.session_caching = parse_bool(v)?
    ),
    opt!(
        "tls-session-cache-size",
        "20480",
        true,
        "Sessions the TLS session cache holds.",
        |c| c.tls.session_cache_size.to_string(),
        |c, v| c.tls.session_cache_size = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "tls-session-cache-timeout",
        "300",
        true,
        "Seconds a cached TLS session may be resumed.",
        |c| c.tls.session_cache_timeout.to_string(),
        |c, v| c.tls.session_cache_timeout = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "tls-replication",
        "no",
        true,
        "A replica connects to its master over TLS (the master's tls-port), showing tls-client-cert-file (or tls-cert-file) and checking the master's certificate against tls-ca-cert.",
        |c| yes_no(c.tls.replication),
        |c, v| c.tls.replication = parse_bool(v)?
    ),
    opt!(
        "tls-cluster",
        "no",
        true,
        "Cluster option (kept): TLS on the cluster bus.",
        |c| yes_no(c.tls.cluster),
        |c, v| c.tls.cluster = parse_bool(v)?
    ),
    opt!(
        "repl-rdma",
        "yes",
        true,
        "Full syncs over RDMA with replicas that offer it (REPLCONF capa rdma), when this server has an RDMA device; a replica offers it only when this is yes and it has a device.",
        |c| yes_no(c.repl_rdma),
        |c, v| c.repl_rdma = parse_bool(v)?
    ),
    opt!(
        "repl-diskless-load",
        "disabled",
        true,
        "How a replica loads a full sync: disabled / on-empty-db (in place; clients get LOADING) or swapdb (aside, while the old dataset serves reads). The dump is loaded from its temporary file as it arrives when the dataset is empty or with swapdb, else once it is complete.",
        |c| c.repl_diskless_load.clone(),
        |c, v| {
            let v = v.to_ascii_lowercase();
            if !["disabled", "on-empty-db", "swapdb"].contains(&v.as_str()) {
                return Err("argument(s) must be one of the following: disabled, on-empty-db, swapdb".into());
            }
            c.repl_diskless_load = v
        }
    ),
    opt!(
        "repl-diskless-sync-delay",
        "5",
        true,
        "Seconds a diskless full sync waits for more replicas to join it.",
        |c| c.repl_diskless_sync_delay.to_string(),
        |c, v| c.repl_diskless_sync_delay = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "repl-backlog-size",
        "1048576",
        true,
        "Bytes of the replication stream kept for replicas that reconnect (PSYNC).",
        |c| c.repl_backlog_size.to_string(),
        |c, v| c.repl_backlog_size = signed_memory_in_range(v, 1, i64::MAX)? as u64
    ),
    opt!(
        "repl-backlog-ttl",
        "3600",
        true,
        "Seconds the backlog is kept after the last replica left (0: forever).",
        |c| c.repl_backlog_ttl.to_string(),
        |c, v| c.repl_backlog_ttl = parse_int(v, 0, i64::MAX)?
    ),
    aliased(
        opt!(
            "repl-ping-replica-period",
            "10",
            true,
            "Seconds between the PINGs a master sends its replicas.",
            |c| c.repl_ping_replica_period.to_string(),
            |c, v| c.repl_ping_replica_period = parse_int(v, 1, i32::MAX as i64)?
        ),
        "repl-ping-slave-period",
    ),
    opt!(
        "repl-timeout",
        "60",
        true,
        "Seconds without news after which a replication link is dropped.",
        |c| c.repl_timeout.to_string(),
        |c, v| c.repl_timeout = parse_int(v, 1, i32::MAX as i64)?
    ),
    opt!(
        "tracking-table-max-keys",
        "1000000",
        true,
        "Most keys the CLIENT TRACKING invalidation table remembers; past it, keys are forgotten and their clients told (0: no limit).",
        |c| c.tracking_table_max_keys.to_string(),
        |c, v| c.tracking_table_max_keys = parse_int(v, 0, i64::MAX)? as u64
    ),
    opt!(
        "notify-keyspace-events",
        "",
        true,
        "Keyspace notification classes: K E g $ l s h z x e t m d n, A for g$lshzxetd.",
        |c| c.notify_keyspace_events.to_string(),
        |c, v| c.notify_keyspace_events = NotifyFlags::parse(v)?
    ),
    opt!(
        "pidfile",
        "",
        false,
        "Write the process id to this file (empty: none).",
        |c| c.pidfile.clone(),
        |c, v| c.pidfile = v.to_string()
    ),
    opt!(
        "protected-mode",
        "yes",
        true,
        "While no password is set, refuse clients that are not on 127.0.0.1, ::1 or the unix socket.",
        |c| yes_no(c.protected_mode),
        |c, v| c.protected_mode = parse_bool(v)?
    ),
    opt!(
        "enable-protected-configs",
        "no",
        false,
        "Allow CONFIG SET of protected configs (dir, dbfilename): no, yes, or local (loopback/unix clients).",
        |c| c.enable_protected_configs.name(),
        |c, v| c.enable_protected_configs = Gate::parse(v)?
    ),
    opt!(
        "enable-debug-command",
        "no",
        false,
        "Allow DEBUG: no, yes, or local (loopback/unix clients).",
        |c| c.enable_debug_command.name(),
        |c, v| c.enable_debug_command = Gate::parse(v)?
    ),
    opt!(
        "enable-module-command",
        "no",
        false,
        "Allow MODULE: no, yes, or local (kvstore loads no modules).",
        |c| c.enable_module_command.name(),
        |c, v| c.enable_module_command = Gate::parse(v)?
    ),
    multi_arg(opt!(
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        true,
        "Per class <class> <hard> <soft> <soft-seconds>: a client past hard bytes of pending output, or past soft bytes for soft-seconds, is closed (0: no limit).",
        |c| format_buffer_limits(&c.client_output_buffer_limit),
        |c, v| parse_buffer_limits(v, &mut c.client_output_buffer_limit)?
    )),
    opt!(
        "repl-diskless-sync-max-replicas",
        "0",
        true,
        "A diskless full sync starts as soon as this many replicas wait for it, without waiting out repl-diskless-sync-delay (0: only the delay counts).",
        |c| c.repl_diskless_sync_max_replicas.to_string(),
        |c, v| c.repl_diskless_sync_max_replicas = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "repl-disable-tcp-nodelay",
        "no",
        true,
        "yes: a replica's socket sends fewer, bigger segments (TCP_NODELAY off) from its full sync on: less bandwidth, more replication delay.",
        |c| yes_no(c.repl_disable_tcp_nodelay),
        |c, v| c.repl_disable_tcp_nodelay = parse_bool(v)?
    ),
    opt!(
        "rdb-del-sync-files",
        "no",
        true,
        "Without save points and AOF, remove the dump a full sync wrote (master) or received (replica) once it is used.",
        |c| yes_no(c.rdb_del_sync_files),
        |c, v| c.rdb_del_sync_files = parse_bool(v)?
    ),
    aliased(
        opt!(
            "replica-priority",
            "100",
            true,
            "Replica priority for Sentinel's promotion (INFO slave_priority): lower first, 0 never.",
            |c| c.replica_priority.to_string(),
            |c, v| c.replica_priority = parse_int(v, 0, i32::MAX as i64)?
        ),
        "slave-priority",
    ),
    opt!(
        "replica-announced",
        "yes",
        true,
        "no: Sentinel leaves this replica out of its replica lists (INFO replica_announced).",
        |c| yes_no(c.replica_announced),
        |c, v| c.replica_announced = parse_bool(v)?
    ),
    aliased(
        opt!(
            "replica-announce-ip",
            "",
            true,
            "Address a replica tells its master (REPLCONF ip-address) instead of the one it connects from (empty: that one).",
            |c| c.replica_announce_ip.clone(),
            |c, v| c.replica_announce_ip = v.to_string()
        ),
        "slave-announce-ip",
    ),
    aliased(
        opt!(
            "replica-announce-port",
            "0",
            true,
            "Port a replica tells its master (REPLCONF listening-port) instead of its own (0: its own).",
            |c| c.replica_announce_port.to_string(),
            |c, v| c.replica_announce_port = parse_int(v, 0, 65535)? as u16
        ),
        "slave-announce-port",
    ),
    opt!(
        "replica-ignore-disk-write-errors",
        "no",
        true,
        "yes: a replica applies its master's writes even while it cannot persist them; no: it stops with a crash report.",
        |c| yes_no(c.replica_ignore_disk_write_errors),
        |c, v| c.replica_ignore_disk_write_errors = parse_bool(v)?
    ),
    opt!(
        "propagation-error-behavior",
        "ignore",
        true,
        "When a replicated or AOF-loaded command fails: ignore (log it), panic (a read-only replica and the AOF loader stop), panic-on-replicas.",
        |c| c.propagation_error_behavior.name().to_string(),
        |c, v| c.propagation_error_behavior = PropagationErrorBehavior::parse(v)?
    ),
    multi_arg(opt!(
        "shutdown-on-sigint",
        "default",
        true,
        "SHUTDOWN flags of the shutdown SIGINT starts: default, or any of save|nosave, now (don't wait for replicas), force (exit despite errors).",
        |c| c.shutdown_on_sigint.names(),
        |c, v| c.shutdown_on_sigint = ShutdownFlags::parse(v)?
    )),
    multi_arg(opt!(
        "shutdown-on-sigterm",
        "default",
        true,
        "SHUTDOWN flags of the shutdown SIGTERM starts (as shutdown-on-sigint).",
        |c| c.shutdown_on_sigterm.names(),
        |c, v| c.shutdown_on_sigterm = ShutdownFlags::parse(v)?
    )),
    opt!(
        "shutdown-timeout",
        "10",
        true,
        "Seconds a shutdown (without NOW) waits for lagging replicas to acknowledge everything, writes paused meanwhile (0: no wait).",
        |c| c.shutdown_timeout.to_string(),
        |c, v| c.shutdown_timeout = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "dynamic-hz",
        "yes",
        true,
        "Run the cron faster while there are many clients: hz doubles while clients/hz exceeds 200, up to 500 (INFO hz vs configured_hz).",
        |c| yes_no(c.dynamic_hz),
        |c, v| c.dynamic_hz = parse_bool(v)?
    ),
    opt!(
        "jemalloc-bg-thread",
        "yes",
        true,
        "jemalloc purges unused pages from its own background thread.",
        |c| yes_no(c.jemalloc_bg_thread),
        |c, v| c.jemalloc_bg_thread = parse_bool(v)?
    ),
    opt!(
        "disable-thp",
        "yes",
        false,
        "Turn transparent huge pages off for this process (prctl) when the kernel has them set to always.",
        |c| yes_no(c.disable_thp),
        |c, v| c.disable_thp = parse_bool(v)?
    ),
    opt!(
        "oom-score-adj",
        "no",
        true,
        "Set the process's OOM score from oom-score-adj-values: no, yes/relative (added to the starting score), absolute.",
        |c| c.oom_score_adj.name().to_string(),
        |c, v| c.oom_score_adj = OomScoreAdj::parse(v)?
    ),
    multi_arg(opt!(
        "oom-score-adj-values",
        "0 200 800",
        true,
        "OOM scores of a master, a replica and a background child (snapshot, AOF rewrite), each -2000..2000.",
        |c| c
            .oom_score_adj_values
            .map(|v| v.to_string())
            .join(" "),
        |c, v| c.oom_score_adj_values = parse_oom_values(v)?
    )),
    opt!(
        "io-engine",
        "io_uring",
        false,
        "How client sockets are served: io_uring (multishot receives and one submission of a turn's sends; epoll where the kernel does not allow it) or epoll.",
        |c| c.io_engine.name().to_string(),
        |c, v| {
            c.io_engine = match parse_enum(v, &["io_uring", "epoll"])?.as_str() {
                "epoll" => IoEngine::Epoll,
                _ => IoEngine::IoUring,
            }
        }
    ),
    opt!(
        "supervised",
        "no",
        false,
        "Tell a supervisor when ready: no, upstart (SIGSTOP), systemd (sd_notify on $NOTIFY_SOCKET), auto (by environment).",
        |c| c.supervised.name().to_string(),
        |c, v| c.supervised = SupervisedMode::parse(v)?
    ),
    opt!(
        "set-proc-title",
        "yes",
        false,
        "Show proc-title-template as the process's command line (ps); within the length of the original command line.",
        |c| yes_no(c.set_proc_title),
        |c, v| c.set_proc_title = parse_bool(v)?
    ),
    opt!(
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        true,
        "Process title; variables {title} {listen-addr} {server-mode} {port} {tls-port} {unixsocket} {config-file}.",
        |c| c.proc_title_template.clone(),
        |c, v| {
            if !c.valid_proc_title_template(v) {
                return Err("template format is invalid or contains unknown variables".into());
            }
            c.proc_title_template = v.to_string()
        }
    ),
    opt!(
        "crash-log-enabled",
        "yes",
        true,
        "A crash (a panic) writes a crash report (message, location, backtrace) to the log.",
        |c| yes_no(c.crash_log_enabled),
        |c, v| c.crash_log_enabled = parse_bool(v)?
    ),
    opt!(
        "use-exit-on-panic",
        "no",
        false,
        "A panic ends the process with exit(1) after its crash report (for test harnesses).",
        |c| yes_no(c.use_exit_on_panic),
        |c, v| c.use_exit_on_panic = parse_bool(v)?
    ),
    opt!(
        "lua-enable-deprecated-api",
        "no",
        false,
        "Offer scripts Lua's setfenv, getfenv and newproxy, withheld by default: with them a script can leave code behind (a __gc handler) that runs later inside another user's script (CVE-2025-46818).",
        |c| yes_no(c.lua_enable_deprecated_api),
        |c, v| c.lua_enable_deprecated_api = parse_bool(v)?
    ),
    opt!(
        "watchdog-period",
        "0",
        true,
        "Milliseconds the event loop may be stuck before a stack trace is logged (Redis's software watchdog); 0 off.",
        |c| c.watchdog_period.to_string(),
        |c, v| c.watchdog_period = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "crash-memcheck-enabled",
        "yes",
        true,
        "Redis runs a memory test after a crash report; kvstore has no such test, the value is kept.",
        |c| yes_no(c.crash_memcheck_enabled),
        |c, v| c.crash_memcheck_enabled = parse_bool(v)?
    ),
    opt!(
        "sanitize-dump-payload",
        "no",
        true,
        "no, yes or clients. kvstore always validates RESTORE and RDB payloads in full, whatever this says.",
        |c| c.sanitize_dump_payload.clone(),
        |c, v| c.sanitize_dump_payload = parse_enum(v, &["no", "yes", "clients"])?
    ),
    opt!(
        "aof-disable-auto-gc",
        "no",
        true,
        "Keep the history AOF files a rewrite leaves (no: they are deleted).",
        |c| yes_no(c.aof_disable_auto_gc),
        |c, v| c.aof_disable_auto_gc = parse_bool(v)?
    ),
    opt!(
        "aof-rewrite-incremental-fsync",
        "yes",
        true,
        "fsync the file an AOF rewrite writes every 4 MB.",
        |c| yes_no(c.aof_rewrite_incremental_fsync),
        |c, v| c.aof_rewrite_incremental_fsync = parse_bool(v)?
    ),
    opt!(
        "rdb-save-incremental-fsync",
        "yes",
        true,
        "fsync a snapshot being written every 4 MB.",
        |c| yes_no(c.rdb_save_incremental_fsync),
        |c, v| c.rdb_save_incremental_fsync = parse_bool(v)?
    ),
    opt!(
        "always-show-logo",
        "no",
        false,
        "Log a startup banner even when the log is not a terminal.",
        |c| yes_no(c.always_show_logo),
        |c, v| c.always_show_logo = parse_bool(v)?
    ),
    opt!(
        "ignore-warnings",
        "",
        true,
        "Startup warnings to silence (Redis's ARM64-COW-BUG); kvstore makes no such check.",
        |c| c.ignore_warnings.clone(),
        |c, v| c.ignore_warnings = v.to_string()
    ),
    opt!(
        "io-threads",
        "1",
        false,
        "1-128. kvstore serves every client from its event loop thread: above 1 is accepted and logged, with no effect.",
        |c| c.io_threads.to_string(),
        |c, v| c.io_threads = parse_int(v, 1, 128)?
    ),
    opt!(
        "io-threads-do-reads",
        "no",
        false,
        "Read and parse on I/O threads (there are none: see io-threads).",
        |c| yes_no(c.io_threads_do_reads),
        |c, v| c.io_threads_do_reads = parse_bool(v)?
    ),
    opt!(
        "server_cpulist",
        "",
        false,
        "CPUs for the event loop thread, as 0-3,8,10-14:2 (empty: any).",
        |c| c.server_cpulist.clone(),
        |c, v| c.server_cpulist = v.to_string()
    ),
    opt!(
        "bio_cpulist",
        "",
        false,
        "CPUs for the background threads (lazy free, AOF fsync, unlinks).",
        |c| c.bio_cpulist.clone(),
        |c, v| c.bio_cpulist = v.to_string()
    ),
    opt!(
        "aof_rewrite_cpulist",
        "",
        false,
        "CPUs for the AOF rewrite child.",
        |c| c.aof_rewrite_cpulist.clone(),
        |c, v| c.aof_rewrite_cpulist = v.to_string()
    ),
    opt!(
        "bgsave_cpulist",
        "",
        false,
        "CPUs for the snapshot child (BGSAVE, full syncs).",
        |c| c.bgsave_cpulist.clone(),
        |c, v| c.bgsave_cpulist = v.to_string()
    ),
    opt!(
        "socket-mark-id",
        "0",
        false,
        "SO_MARK of the listening sockets, for routing and filtering (needs CAP_NET_ADMIN; 0: none).",
        |c| c.socket_mark_id.to_string(),
        |c, v| c.socket_mark_id = parse_int(v, 0, u32::MAX as i64)? as u32
    ),
    opt!(
        "syslog-enabled",
        "no",
        false,
        "Send log lines to syslog as well.",
        |c| yes_no(c.syslog_enabled),
        |c, v| c.syslog_enabled = parse_bool(v)?
    ),
    opt!(
        "syslog-ident",
        "redis",
        false,
        "syslog identity.",
        |c| c.syslog_ident.clone(),
        |c, v| c.syslog_ident = v.to_string()
    ),
    opt!(
        "syslog-facility",
        "local0",
        false,
        "syslog facility: user or local0-local7.",
        |c| c.syslog_facility.clone(),
        |c, v| c.syslog_facility = parse_enum(
            v,
            &["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]
        )?
    ),
    opt!(
        "activedefrag",
        "no",
        true,
        "Active defragmentation: not in this build (as Redis without its modified jemalloc), only no.",
        |c| yes_no(c.defrag.enabled),
        |c, v| {
            if parse_bool(v)? {
                return Err(ERR_NO_DEFRAG.into());
            }
            c.defrag.enabled = false
        }
    ),
    opt!(
        "active-defrag-ignore-bytes",
        "100mb",
        true,
        "Defragmentation tunable (kept; see activedefrag): least wasted bytes worth defragmenting.",
        |c| c.defrag.ignore_bytes.to_string(),
        |c, v| c.defrag.ignore_bytes = memory_in_range(v, 1, i64::MAX as u64)?
    ),
    opt!(
        "active-defrag-threshold-lower",
        "10",
        true,
        "Defragmentation tunable (kept): least fragmentation percentage to start.",
        |c| c.defrag.threshold_lower.to_string(),
        |c, v| c.defrag.threshold_lower = parse_int(v, 0, 1000)?
    ),
    opt!(
        "active-defrag-threshold-upper",
        "100",
        true,
        "Defragmentation tunable (kept): fragmentation percentage of the most effort.",
        |c| c.defrag.threshold_upper.to_string(),
        |c, v| c.defrag.threshold_upper = parse_int(v, 0, 1000)?
    ),
    opt!(
        "active-defrag-cycle-min",
        "1",
        true,
        "Defragmentation tunable (kept): least CPU percentage.",
        |c| c.defrag.cycle_min.to_string(),
        |c, v| c.defrag.cycle_min = parse_int(v, 1, 99)?
    ),
    opt!(
        "active-defrag-cycle-max",
        "25",
        true,
        "Defragmentation tunable (kept): most CPU percentage.",
        |c| c.defrag.cycle_max.to_string(),
        |c, v| c.defrag.cycle_max = parse_int(v, 1, 99)?
    ),
    opt!(
        "active-defrag-max-scan-fields",
        "1000",
        true,
        "Defragmentation tunable (kept): values with more fields are scanned apart.",
        |c| c.defrag.max_scan_fields.to_string(),
        |c, v| c.defrag.max_scan_fields = parse_int(v, 1, i64::MAX)?
    ),
    opt!(
        "cluster-enabled",
        "no",
        false,
        "Cluster mode: not supported by kvstore, only no.",
        |c| yes_no(c.cluster.enabled),
        |c, v| {
            if parse_bool(v)? {
                return Err("cluster mode is not supported by kvstore: cluster-enabled must be no".into());
            }
            c.cluster.enabled = false
        }
    ),
    opt!(
        "cluster-config-file",
        "nodes.conf",
        false,
        "Cluster option (kept; no cluster mode): the cluster's state file.",
        |c| c.cluster.config_file.clone(),
        |c, v| c.cluster.config_file = v.to_string()
    ),
    opt!(
        "cluster-port",
        "0",
        false,
        "Cluster option (kept): cluster bus port (0: port + 10000).",
        |c| c.cluster.port.to_string(),
        |c, v| c.cluster.port = parse_int(v, 0, 65535)?
    ),
    opt!(
        "cluster-node-timeout",
        "15000",
        true,
        "Cluster option (kept): milliseconds before a node counts as failing.",
        |c| c.cluster.node_timeout.to_string(),
        |c, v| c.cluster.node_timeout = parse_int(v, 0, i64::MAX)?
    ),
    opt!(
        "cluster-announce-ip",
        "",
        true,
        "Cluster option (kept): address announced to the cluster.",
        |c| c.cluster.announce_ip.clone(),
        |c, v| c.cluster.announce_ip = v.to_string()
    ),
    opt!(
        "cluster-announce-hostname",
        "",
        true,
        "Cluster option (kept): hostname announced to the cluster.",
        |c| c.cluster.announce_hostname.clone(),
        |c, v| c.cluster.announce_hostname = valid_hostname(v)?
    ),
    opt!(
        "cluster-announce-port",
        "0",
        true,
        "Cluster option (kept): client port announced to the cluster.",
        |c| c.cluster.announce_port.to_string(),
        |c, v| c.cluster.announce_port = parse_int(v, 0, 65535)?
    ),
    opt!(
        "cluster-announce-bus-port",
        "0",
        true,
        "Cluster option (kept): bus port announced to the cluster.",
        |c| c.cluster.announce_bus_port.to_string(),
        |c, v| c.cluster.announce_bus_port = parse_int(v, 0, 65535)?
    ),
    opt!(
        "cluster-announce-tls-port",
        "0",
        true,
        "Cluster option (kept): TLS port announced to the cluster.",
        |c| c.cluster.announce_tls_port.to_string(),
        |c, v| c.cluster.announce_tls_port = parse_int(v, 0, 65535)?
    ),
    opt!(
        "cluster-preferred-endpoint-type",
        "ip",
        true,
        "Cluster option (kept): ip, hostname or unknown-endpoint.",
        |c| c.cluster.preferred_endpoint_type.clone(),
        |c, v| c.cluster.preferred_endpoint_type =
            parse_enum(v, &["ip", "hostname", "unknown-endpoint"])?
    ),
    aliased(
        opt!(
            "cluster-replica-validity-factor",
            "10",
            true,
            "Cluster option (kept): how stale a replica may be to fail over.",
            |c| c.cluster.replica_validity_factor.to_string(),
            |c, v| c.cluster.replica_validity_factor = parse_int(v, 0, i32::MAX as i64)?
        ),
        "cluster-slave-validity-factor",
    ),
    opt!(
        "cluster-migration-barrier",
        "1",
        true,
        "Cluster option (kept): replicas a master keeps before one migrates.",
        |c| c.cluster.migration_barrier.to_string(),
        |c, v| c.cluster.migration_barrier = parse_int(v, 0, i32::MAX as i64)?
    ),
    opt!(
        "cluster-allow-replica-migration",
        "yes",
        true,
        "Cluster option (kept): replicas may migrate to orphaned masters.",
        |c| yes_no(c.cluster.allow_replica_migration),
        |c, v| c.cluster.allow_replica_migration = parse_bool(v)?
    ),
    opt!(
        "cluster-require-full-coverage",
        "yes",
        true,
        "Cluster option (kept): refuse queries while a slot is uncovered.",
        |c| yes_no(c.cluster.require_full_coverage),
        |c, v| c.cluster.require_full_coverage = parse_bool(v)?
    ),
    aliased(
        opt!(
            "cluster-replica-no-failover",
            "no",
            true,
            "Cluster option (kept): this replica never fails over automatically.",
            |c| yes_no(c.cluster.replica_no_failover),
            |c, v| c.cluster.replica_no_failover = parse_bool(v)?
        ),
        "cluster-slave-no-failover",
    ),
    opt!(
        "cluster-allow-reads-when-down",
        "no",
        true,
        "Cluster option (kept): serve reads while the cluster is down.",
        |c| yes_no(c.cluster.allow_reads_when_down),
        |c, v| c.cluster.allow_reads_when_down = parse_bool(v)?
    ),
    opt!(
        "cluster-allow-pubsubshard-when-down",
        "yes",
        true,
        "Cluster option (kept): serve sharded pub/sub while the cluster is down.",
        |c| yes_no(c.cluster.allow_pubsubshard_when_down),
        |c, v| c.cluster.allow_pubsubshard_when_down = parse_bool(v)?
    ),
    opt!(
        "cluster-link-sendbuf-limit",
        "0",
        true,
        "Cluster option (kept): bytes a cluster bus link may buffer (0: no limit).",
        |c| c.cluster.link_sendbuf_limit.to_string(),
        |c, v| c.cluster.link_sendbuf_limit = parse_memory(v)?
    ),
    opt!(
        "daemonize",
        "no",
        false,
        "Run in the background: fork, detach from the terminal, standard streams to /dev/null, a PID file (pidfile, or /var/run/redis.pid).",
        |c| yes_no(c.daemonize),
        |c, v| c.daemonize = parse_bool(v)?
    ),
];

/// Redis's refusal of `activedefrag yes` when built without its modified
/// jemalloc (config.c's isValidActiveDefrag), word for word.
pub const ERR_NO_DEFRAG: &str = "Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution";

fn absolute_dir(v: &str) -> Result<PathBuf, String> {
    let p = Path::new(v);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| e.to_string())?.join(p)
    };
    // Normalise "./" and the like without requiring the directory to exist yet.
    let mut out = PathBuf::new();
    for comp in abs.components() {
        match comp {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Test knobs CONFIG GET shows only when named exactly, never for a
/// pattern (Redis's HIDDEN_CONFIG).
pub const HIDDEN_OPTIONS: &[&str] = &[
    "key-load-delay",
    "rdb-key-save-delay",
    "use-exit-on-panic",
    "lua-enable-deprecated-api",
    "watchdog-period",
    "loading-process-events-interval-bytes",
];

/// Options redis-server 7.0 does not have.
pub const KVSTORE_ONLY_OPTIONS: &[&str] = &["io-engine", "repl-rdma"];

pub fn find_option(name: &str) -> Option<&'static OptionSpec> {
    let lower = name.to_ascii_lowercase();
    OPTIONS
        .iter()
        .find(|o| o.name == lower || o.alias == Some(lower.as_str()))
}

impl Config {
    /// Build the configuration from `kvstore [file] [--name value …]`.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut config = Config::default();
        // The first `save` line of the file and command line replaces the
        // defaults; more of them add their points.
        let mut save_seen = false;
        let mut rest = args;
        if let Some(first) = rest.first() {
            if !first.starts_with("--") {
                let text = std::fs::read_to_string(first)
                    .map_err(|e| format!("Fatal error, can't open config file '{first}': {e}"))?;
                config.config_file = Some(absolute_dir(first)?);
                config.apply_text_loading(&text, &mut save_seen)?;
                rest = &rest[1..];
            }
        }
        let text = command_line_options(rest);
        config.apply_text_loading(&text, &mut save_seen)?;
        Ok(config)
    }

    /// Apply redis.conf-style text on top of the current values.
    pub fn apply_text(&mut self, text: &str) -> Result<(), String> {
        self.apply_text_loading(text, &mut false)
    }

    /// Apply config text, `save_seen` saying whether a `save` line came
    /// already (then this one adds its points, as Redis reads a file).
    fn apply_text_loading(&mut self, text: &str, save_seen: &mut bool) -> Result<(), String> {
        for (lineno, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let args = split_args(line.as_bytes()).ok_or_else(|| {
                format!(
                    "Bad directive or wrong number of arguments at line {}: {line}",
                    lineno + 1
                )
            })?;
            if args.is_empty() {
                continue;
            }
            // Values are text here: a byte sequence that is not UTF-8 (a
            // file name, say) is refused rather than read as another name.
            let Ok(mut values) = args
                .iter()
                .map(|a| String::from_utf8(a.clone()))
                .collect::<Result<Vec<String>, _>>()
            else {
                return Err(format!(
                    "Invalid argument at line {}: {line}\nAn argument is not valid UTF-8",
                    lineno + 1
                ));
            };
            let name = values.remove(0);
            // `rename-command <command> <new name>` may repeat; the command
            // table applies the renames at startup (an empty name disables).
            if name.eq_ignore_ascii_case("rename-command") {
                let [from, to] = values.as_slice() else {
                    return Err(format!(
                        "Bad directive or wrong number of arguments at line {}: {line}",
                        lineno + 1
                    ));
                };
                self.rename_commands.push((from.clone(), to.clone()));
                continue;
            }
            // `user <name> [rule …]` may repeat: the users are made once the
            // command table is ready (commands::acl); a name given twice is
            // refused there, as Redis refuses it.
            if name.eq_ignore_ascii_case("user") && args.len() >= 2 {
                self.users.push(args[1..].to_vec());
                continue;
            }
            // Redis's report: the line, then what is wrong with it.
            let fail = |err: &str| {
                format!(
                    "Reading the configuration file, at line {}\n>>> '{line}'\n{err}",
                    lineno + 1
                )
            };
            let opt = find_option(&name)
                .ok_or_else(|| fail("Bad directive or wrong number of arguments"))?;
            let arity_ok = match opt.name {
                // (`replicaof ""`: none, as the default config file says.)
                "replicaof" => values.len() == 2 || values == [""],
                _ => opt.multi_arg || values.len() == 1,
            };
            if !arity_ok {
                return Err(fail("wrong number of arguments"));
            }
            // `save` may appear several times and accumulates: the first
            // replaces the defaults, `save ""` empties the list.
            let value = if opt.name == "save" {
                let points = values.join(" ");
                let mut all = if *save_seen && !points.is_empty() {
                    std::mem::take(&mut self.save)
                } else {
                    String::new()
                };
                *save_seen = true;
                if !all.is_empty() && !points.is_empty() {
                    all.push(' ');
                }
                all + &points
            } else {
                values.join(" ")
            };
            (opt.set)(self, &value).map_err(|e| fail(&e))?;
        }
        Ok(())
    }

    /// Expand a `proc-title-template` (Redis's expandProcTitleTemplate):
    /// `{name}` is a variable, `{{` a literal brace, the result trimmed of
    /// spaces; `None` for an unknown variable or an unclosed brace.
    pub fn expand_proc_title(&self, template: &str, title: &str) -> Option<String> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            if after.is_empty() {
                return None;
            }
            if let Some(more) = after.strip_prefix('{') {
                out.push('{');
                rest = more;
                continue;
            }
            let close = after.find('}')?;
            out.push_str(&self.proc_title_variable(&after[..close], title)?);
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        Some(out.trim_matches(' ').to_string())
    }

    /// One variable of the title (Redis's redisProcTitleGetVariable; this
    /// server has no cluster or sentinel mode).
    fn proc_title_variable(&self, name: &str, title: &str) -> Option<String> {
        Some(match name {
            "title" => title.to_string(),
            "listen-addr" if self.port != 0 => format!(
                "{}:{}",
                self.bind.first().map_or("*", String::as_str),
                self.port
            ),
            "listen-addr" if self.tls.port != 0 => format!(
                "{}:{}",
                self.bind.first().map_or("*", String::as_str),
                self.tls.port
            ),
            "listen-addr" => format!("unixsocket:{}", self.unixsocket),
            "server-mode" => String::new(),
            "config-file" => self
                .config_file
                .as_ref()
                .map_or("-".to_string(), |p| p.display().to_string()),
            "port" => self.port.to_string(),
            "tls-port" => self.tls.port.to_string(),
            "unixsocket" => self.unixsocket.clone(),
            _ => return None,
        })
    }

    /// Redis's validateProcTitleTemplate: it expands (with an empty title)
    /// to something not empty.
    pub fn valid_proc_title_template(&self, template: &str) -> bool {
        self.expand_proc_title(template, "")
            .is_some_and(|t| !t.is_empty())
    }

    /// CONFIG GET value of an option.
    pub fn get(&self, name: &str) -> Option<String> {
        find_option(name).map(|o| (o.get)(self))
    }

    /// CONFIG REWRITE: rewrite the config file as Redis's rewriteConfig
    /// does. Comments and the lines of options kvstore doesn't know stay
    /// where they are (unparsable lines and unknown directives become
    /// `# ??? …` comments, as Redis turns them); every option already in
    /// the file is rewritten in place, its first line reused and any more
    /// blanked; options not in the file are appended after a `# Generated
    /// by CONFIG REWRITE` line when they differ from their default; runs of
    /// empty lines shrink to one. Each option is written in its Redis type's
    /// format (`maxmemory 100mb`, `dbfilename "dump.rdb"`, one `save` line
    /// per pair, one `client-output-buffer-limit` line per class).
    pub fn rewrite(&self, users: &[Vec<u8>]) -> Result<(), String> {
        self.rewrite_with(false, users)
    }

    /// CONFIG REWRITE, or with `force_all` every option written even at its
    /// default (DEBUG CONFIG-REWRITE-FORCE-ALL, Redis's test of the
    /// writer: the file must load back to the same configuration).
    /// `users` are the ACL users as `user …` lines: they replace the file's
    /// own, unless users come from an ACL file (then the file keeps none,
    /// as Redis's rewriteConfigUserOption).
    pub fn rewrite_with(&self, force_all: bool, users: &[Vec<u8>]) -> Result<(), String> {
        let Some(path) = &self.config_file else {
            return Err("The server is running without a config file".into());
        };
        let old = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("Rewriting config file: {e}")),
        };
        let mut state = RewriteState::read(&old);
        let defaults = Config::default();
        for opt in OPTIONS {
            for (line, force) in self.rewrite_lines(opt, &defaults) {
                state.rewrite_line(opt.name, line, force || force_all);
            }
            state.processed.insert(opt.name);
        }
        if self.aclfile.is_empty() {
            for line in users {
                state.rewrite_line("user", String::from_utf8_lossy(line).into_owned(), true);
            }
        }
        state.processed.insert("user");
        let content = state.content();
        write_atomically(path, content.as_bytes())
            .map_err(|e| format!("Rewriting config file: {e}"))
    }

    /// The lines an option is rewritten as, each with whether it must be
    /// written even where the file doesn't have the option yet (it differs
    /// from its default). No lines: the option must not appear at all.
    fn rewrite_lines(&self, opt: &OptionSpec, defaults: &Config) -> Vec<(String, bool)> {
        let name = opt.name;
        let value = (opt.get)(self);
        let force = value != (opt.get)(defaults);
        let line = |v: &str| format!("{name} {v}");
        let (lines, force) = match name {
            // Redis always writes `dir`, absolute: a file without it would
            // start elsewhere with another dataset.
            "dir" => {
                let abs = std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
                (
                    vec![line(&crate::util::repr(&abs.display().to_string()))],
                    true,
                )
            }
            "save" if value.is_empty() => (vec!["save \"\"".to_string()], true),
            "save" => {
                let words: Vec<&str> = value.split_whitespace().collect();
                let lines = words.chunks(2).map(|pair| line(&pair.join(" "))).collect();
                (lines, true)
            }
            // Left out at the default, `* -::*` (Redis's too).
            "bind" if value == "* -::*" => (Vec::new(), false),
            "bind" if value.is_empty() => (vec![line("\"\"")], true),
            "bind" => (vec![line(&value)], true),
            "notify-keyspace-events" => (vec![line(&crate::util::repr(&value))], !value.is_empty()),
            "client-output-buffer-limit" => {
                // One line per class, each forced on its own.
                let classes = ["normal", "replica", "pubsub"];
                return classes
                    .iter()
                    .zip(self.client_output_buffer_limit.iter())
                    .zip(defaults.client_output_buffer_limit.iter())
                    .map(|((class, l), d)| {
                        let text = format!(
                            "{class} {} {} {}",
                            format_memory(l.hard),
                            format_memory(l.soft),
                            l.soft_secs
                        );
                        let differs =
                            (l.hard, l.soft, l.soft_secs) != (d.hard, d.soft, d.soft_secs);
                        (line(&text), differs)
                    })
                    .collect();
            }
            // Redis always writes it; an empty list as "" (else the default
            // would apply).
            "latency-tracking-info-percentiles" if value.is_empty() => (vec![line("\"\"")], true),
            "latency-tracking-info-percentiles" => (vec![line(&value)], true),
            // A master has no replicaof line (Redis removes it).
            "replicaof" if value.is_empty() => (Vec::new(), false),
            // Strings Redis leaves out when unset (NULL by default).
            "unixsocket"
            | "pidfile"
            | "requirepass"
            | "replica-announce-ip"
            | "cluster-announce-ip"
            | "cluster-announce-hostname"
            | "server_cpulist"
            | "bio_cpulist"
            | "aof_rewrite_cpulist"
            | "bgsave_cpulist"
                if value.is_empty() =>
            {
                (Vec::new(), false)
            }
            _ if QUOTED_OPTIONS.contains(&name) => (vec![line(&crate::util::repr(&value))], force),
            _ if MEMORY_OPTIONS.contains(&name) => {
                let text = match value.parse::<u64>() {
                    Ok(bytes) => format_memory(bytes),
                    Err(_) => value,
                };
                (vec![line(&text)], force)
            }
            _ if opt.multi_arg => {
                let words: Vec<String> = value.split_whitespace().map(quote).collect();
                (vec![line(&words.join(" "))], force)
            }
            _ => (vec![line(&quote(&value))], force),
        };
        lines.into_iter().map(|l| (l, force)).collect()
    }
}

/// Options Redis writes in its memory notation (`100mb`, `1gb`).
const MEMORY_OPTIONS: &[&str] = &[
    "maxmemory",
    "maxmemory-clients",
    "auto-aof-rewrite-min-size",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "hash-max-listpack-value",
    "zset-max-listpack-value",
    "repl-backlog-size",
    "hll-sparse-max-bytes",
    "active-defrag-ignore-bytes",
    "cluster-link-sendbuf-limit",
];

/// String options Redis always writes quoted (its sdscatrepr).
const QUOTED_OPTIONS: &[&str] = &[
    "unixsocket",
    "logfile",
    "dbfilename",
    "appenddirname",
    "appendfilename",
    "pidfile",
    "requirepass",
    "replica-announce-ip",
    "cluster-announce-ip",
    "cluster-announce-hostname",
    "cluster-config-file",
    "syslog-ident",
    "ignore-warnings",
    "proc-title-template",
    "server_cpulist",
    "bio_cpulist",
    "aof_rewrite_cpulist",
    "bgsave_cpulist",
];

/// Directives a config file may hold that are not options (Redis keeps
/// them as they are when rewriting).
const NON_OPTION_DIRECTIVES: &[&str] = &[
    "include",
    "rename-command",
    "user",
    "loadmodule",
    "sentinel",
];

/// The line Redis adds before the options it appends.
const REWRITE_SIGNATURE: &str = "# Generated by CONFIG REWRITE";

/// A config file being rewritten (Redis's rewriteConfigState).
struct RewriteState {
    lines: Vec<String>,
    /// Option name → the lines it still has in the old file, in order.
    option_lines: std::collections::HashMap<String, std::collections::VecDeque<usize>>,
    /// Options rewritten: their unused old lines are blanked at the end.
    processed: std::collections::HashSet<&'static str>,
    needs_signature: bool,
}

impl RewriteState {
    fn read(old: &str) -> RewriteState {
        let mut state = RewriteState {
            lines: Vec::new(),
            option_lines: Default::default(),
            processed: Default::default(),
            needs_signature: true,
        };
        // Redis splits on \n and trims each line; a final newline leaves
        // one empty line, which the empty-run rule then absorbs.
        if old.is_empty() {
            return state;
        }
        for raw in old.split('\n') {
            let line = raw.trim_matches(|c| matches!(c, '\r' | '\n' | '\t' | ' '));
            if line.is_empty() || line.starts_with('#') {
                if line == REWRITE_SIGNATURE {
                    state.needs_signature = false;
                }
                state.lines.push(line.to_string());
                continue;
            }
            let name = split_args(line.as_bytes()).and_then(|args| {
                args.first()
                    .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            });
            let option = name.as_deref().and_then(|n| {
                find_option(n)
                    .map(|o| o.name.to_string())
                    .or_else(|| NON_OPTION_DIRECTIVES.contains(&n).then(|| n.to_string()))
            });
            match option {
                Some(option) => {
                    state
                        .option_lines
                        .entry(option)
                        .or_default()
                        .push_back(state.lines.len());
                    state.lines.push(line.to_string());
                }
                None => state.lines.push(format!("# ??? {line}")),
            }
        }
        state
    }

    /// Redis's rewriteConfigRewriteLine: reuse the option's next old line,
    /// or append (after the signature) when `force`.
    fn rewrite_line(&mut self, option: &str, line: String, force: bool) {
        if let Some(slots) = self.option_lines.get_mut(option) {
            if let Some(at) = slots.pop_front() {
                self.lines[at] = line;
                return;
            }
        }
        if !force {
            return;
        }
        if self.needs_signature {
            self.lines.push(REWRITE_SIGNATURE.to_string());
            self.needs_signature = false;
        }
        self.lines.push(line);
    }

    /// The new file: unused lines of rewritten options blanked, runs of
    /// empty lines made one.
    fn content(mut self) -> String {
        for (option, slots) in &self.option_lines {
            if self.processed.contains(option.as_str()) {
                for &at in slots {
                    self.lines[at].clear();
                }
            }
        }
        let mut out = String::new();
        let mut was_empty = false;
        for line in &self.lines {
            if line.is_empty() {
                if was_empty {
                    continue;
                }
                was_empty = true;
            } else {
                was_empty = false;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Write `path` through a temporary file, fsync'd, then renamed over it
/// (Redis's rewriteConfigOverwriteFile).
fn write_atomically(path: &std::path::Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Bytes in Redis's config notation: `1gb`, `100mb`, `64kb`, else a plain
/// number (its rewriteConfigFormatMemory).
fn format_memory(bytes: u64) -> String {
    const KB: u64 = 1 << 10;
    const MB: u64 = 1 << 20;
    const GB: u64 = 1 << 30;
    match bytes {
        0 => "0".to_string(),
        b if b % GB == 0 => format!("{}gb", b / GB),
        b if b % MB == 0 => format!("{}mb", b / MB),
        b if b % KB == 0 => format!("{}kb", b / KB),
        b => b.to_string(),
    }
}

/// One `name value` line of a config file; several-word options are written
/// as separate words, as redis.conf has them.
fn config_line(opt: &OptionSpec, value: &str) -> String {
    if opt.multi_arg && !value.is_empty() {
        let words: Vec<String> = value.split_whitespace().map(quote).collect();
        return format!("{} {}\n", opt.name, words.join(" "));
    }
    format!("{} {}\n", opt.name, quote(value))
}

/// Quote a value for a config line when it needs it.
/// The command line's options as config lines, built as redis-server
/// builds them: `--name` starts a line (the rest of that argument may hold
/// its value too: `"--port 6380"`), later arguments are its values, quoted
/// (so `--proc-title-template --my--title` keeps `--my--title` as a value
/// while the option still wants one), and an argument without `--` that
/// starts nothing is a value of the line before. `--save` with nothing
/// after it (or followed by another option) means `save ""`.
fn command_line_options(args: &[String]) -> String {
    let mut text = String::new();
    let mut handled_last = true;
    for (j, arg) in args.iter().enumerate() {
        let next_is_option = args.get(j + 1).is_some_and(|a| a.starts_with("--"));
        let last = j + 1 == args.len();
        if handled_last && arg.starts_with("--") {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&arg[2..]);
            text.push(' ');
            let words = split_args(arg.as_bytes()).map_or(0, |w| w.len());
            if words == 1 {
                // Only a name: a value is expected next.
                handled_last = false;
                if arg.eq_ignore_ascii_case("--save") && (last || next_is_option) {
                    text.push_str("\"\"");
                    handled_last = true;
                } else if arg.eq_ignore_ascii_case("--sentinel") && next_is_option {
                    handled_last = true;
                }
            } else {
                handled_last = true;
            }
        } else {
            text.push_str(&crate::util::repr(arg));
            text.push(' ');
            handled_last = true;
        }
    }
    text.push('\n');
    text
}

fn quote(v: &str) -> String {
    if !v.is_empty()
        && !v
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == b'"' || b == b'\'' || b == b'\\')
    {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Render the shipped kvstore.conf: every option with its default and a comment.
pub fn default_config_text() -> String {
    let mut out = String::from(
        "# kvstore configuration file (redis.conf syntax).\n#\n# Start with: kvstore /path/to/kvstore.conf [--option value ...]\n# Memory units: 1k = 1000, 1kb = 1024, 1m = 1000000, 1mb = 1048576, 1g, 1gb.\n# Every option kvstore knows is listed below with its default value.\n\n",
    );
    for opt in OPTIONS {
        out.push_str(&format!(
            "# {}\n{}\n",
            opt.doc,
            config_line(opt, opt.default)
        ));
    }
    out.push_str(
        "# Rename a command, or disable it with an empty name (may repeat):\n# rename-command CONFIG \"\"\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_redis() {
        let c = Config::default();
        assert_eq!(c.port, 6379);
        assert_eq!(c.proto_max_bulk_len, 512 * 1024 * 1024);
        assert_eq!(c.client_query_buffer_limit, 1 << 30);
        assert_eq!(c.save, "3600 1 300 100 60 10000");
        assert_eq!(c.databases, 16);
    }

    #[test]
    fn command_line_overrides_file_syntax() {
        let args: Vec<String> = ["--port", "7000", "--save", "", "--maxmemory", "1mb"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = Config::from_args(&args).unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.save, "");
        assert_eq!(c.maxmemory, 1 << 20);
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1k"), Ok(1000));
        assert_eq!(parse_memory("1KB"), Ok(1024));
        assert_eq!(parse_memory("2gb"), Ok(2 << 30));
        assert!(parse_memory("-1").is_err());
        assert!(parse_memory("abc").is_err());
        // As Redis's memtoull: no digits are 0, a unit alone too; spaces,
        // fractions and signs are errors; an overflowing number saturates
        // and the unit wraps it.
        assert_eq!(parse_memory(""), Ok(0));
        assert_eq!(parse_memory("k"), Ok(0));
        assert_eq!(parse_memory("1B"), Ok(1));
        assert!(parse_memory("1.5mb").is_err());
        assert!(parse_memory(" 1").is_err());
        assert!(parse_memory("+1").is_err());
        assert_eq!(parse_memory("99999999999999999999"), Ok(u64::MAX));
        assert_eq!(
            parse_memory("99999999999999999999kb"),
            Ok(u64::MAX.wrapping_mul(1024))
        );
        assert!(parse_memory(&"1".repeat(128)).is_err());
    }

    #[test]
    fn output_buffer_limits_parse_and_print_as_redis() {
        let mut c = Config::default();
        assert_eq!(
            c.get("client-output-buffer-limit").unwrap(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        c.apply_text("client-output-buffer-limit normal 10mb 5mb 10\nclient-output-buffer-limit replica 1gb 0 0\n")
            .unwrap();
        assert_eq!(
            c.client_output_buffer_limit[ClientClass::Normal as usize],
            BufferLimit {
                hard: 10 << 20,
                soft: 5 << 20,
                soft_secs: 10
            }
        );
        assert_eq!(
            c.client_output_buffer_limit[ClientClass::Replica as usize].hard,
            1 << 30
        );
        let mut limits = c.client_output_buffer_limit;
        assert!(parse_buffer_limits("normal 1 2", &mut limits).is_err());
        assert!(parse_buffer_limits("normal 1 2 3 bogus 1 2 3", &mut limits).is_err());
        // A failed group leaves every class as it was.
        assert_eq!(limits, c.client_output_buffer_limit);
    }

    #[test]
    fn file_names_are_not_paths_and_renames_accumulate() {
        let mut c = Config::default();
        for bad in ["../x.rdb", "/tmp/x.rdb", "dir/x.rdb"] {
            let err = c.apply_text(&format!("dbfilename \"{bad}\"")).unwrap_err();
            assert!(
                err.contains("dbfilename can't be a path, just a filename"),
                "{err}"
            );
        }
        c.apply_text("rename-command CONFIG \"\"\nrename-command flushall nuke\n")
            .unwrap();
        assert_eq!(
            c.rename_commands,
            vec![
                ("CONFIG".to_string(), String::new()),
                ("flushall".to_string(), "nuke".to_string())
            ]
        );
        assert!(c.apply_text("rename-command CONFIG").is_err());
    }

    #[test]
    fn gates_allow_local_clients_only_when_local() {
        let mut c = Config::default();
        assert_eq!(c.enable_debug_command, Gate::No);
        assert!(!c.enable_debug_command.allows(true));
        c.apply_text("enable-debug-command local").unwrap();
        assert!(c.enable_debug_command.allows(true));
        assert!(!c.enable_debug_command.allows(false));
        assert!(c.apply_text("enable-debug-command maybe").is_err());
    }

    #[test]
    fn shipped_config_file_is_current() {
        let shipped =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/kvstore.conf")).unwrap();
        assert_eq!(
            shipped,
            default_config_text(),
            "regenerate kvstore.conf: kvstore --print-default-config > kvstore.conf"
        );
        let mut c = Config::default();
        c.apply_text(&shipped).unwrap();
    }
}
