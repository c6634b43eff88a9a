//! The command table and dispatcher.
//!
//! Every command is one line of [`COMMANDS`]: Redis 7.0's description of it
//! (`meta`, generated from Redis's command JSON: arity, flags, key specs,
//! docs) and its handler; a container (CONFIG, CLIENT, …) lists the
//! subcommands it implements. `execute` looks the command up and resolves
//! its subcommand, applies the checks Redis applies before running anything
//! (unknown command or subcommand, arity, authentication, memory limit),
//! runs the handler, and hands the effective command to `propagate` when it
//! wrote to the keyspace.
//!
//! Handlers receive a [`Ctx`] (server state, the calling client) and the
//! arguments as slices of the query buffer.

pub mod acl;
pub mod args;
pub mod bitmap;
pub mod blocking;
pub mod command;
pub mod config_cmd;
pub mod connection;
pub mod digest;
pub mod expire;
pub mod geo;
pub mod hash;
pub mod hyperloglog;
pub mod info;
pub mod keys;
pub mod latency;
pub mod list;
pub mod lolwut;
pub mod lookup;
pub mod memory;
pub mod meta;
pub mod migrate;
pub mod monitor;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod stream;
pub mod string;
pub mod table;
pub mod transaction;
pub mod zset;

use std::collections::HashMap;
use std::sync::OnceLock;

pub use crate::config::NotifyFlags;
use crate::db::entry::lru_clock;
use crate::db::{Entry, ValueRef};
use crate::state::{ClientState, Server};
pub use crate::util::{glob_match, parse_f64, parse_i64};

pub use args::*;
pub use lookup::*;
pub use table::{CommandSpec, COMMANDS};

// Command flags: Redis's CMD_* (set from its JSON, `meta::redis70`).
pub const WRITE: u32 = 1 << 0;
pub const READONLY: u32 = 1 << 1;
pub const DENYOOM: u32 = 1 << 2;
pub const MODULE: u32 = 1 << 3;
pub const ADMIN: u32 = 1 << 4;
pub const PUBSUB: u32 = 1 << 5;
pub const NOSCRIPT: u32 = 1 << 6;
pub const BLOCKING: u32 = 1 << 7;
pub const LOADING: u32 = 1 << 8;
pub const STALE: u32 = 1 << 9;
pub const SKIP_MONITOR: u32 = 1 << 10;
pub const SKIP_SLOWLOG: u32 = 1 << 11;
pub const ASKING: u32 = 1 << 12;
pub const FAST: u32 = 1 << 13;
pub const NO_AUTH: u32 = 1 << 14;
pub const MAY_REPLICATE: u32 = 1 << 15;
pub const SENTINEL: u32 = 1 << 16;
pub const ONLY_SENTINEL: u32 = 1 << 17;
pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
pub const PROTECTED: u32 = 1 << 19;
pub const NO_ASYNC_LOADING: u32 = 1 << 20;
/// Refused inside MULTI.
pub const NO_MULTI: u32 = 1 << 21;
/// Keys are not all at fixed positions (computed from the key specs).
pub const MOVABLE_KEYS: u32 = 1 << 22;
pub const ALLOW_BUSY: u32 = 1 << 23;
/// May delete any number of expired keys it meets (SCAN, RANDOMKEY):
/// their DELs are propagated unwrapped.
pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 24;

/// The flags COMMAND INFO shows, in Redis's order (the others are hidden,
/// as Redis hides them).
pub const FLAG_NAMES: &[(u32, &str)] = &[
    (WRITE, "write"),
    (READONLY, "readonly"),
    (DENYOOM, "denyoom"),
    (MODULE, "module"),
    (ADMIN, "admin"),
    (PUBSUB, "pubsub"),
    (NOSCRIPT, "noscript"),
    (BLOCKING, "blocking"),
    (LOADING, "loading"),
    (STALE, "stale"),
    (SKIP_MONITOR, "skip_monitor"),
    (SKIP_SLOWLOG, "skip_slowlog"),
    (ASKING, "asking"),
    (FAST, "fast"),
    (NO_AUTH, "no_auth"),
    (NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (NO_ASYNC_LOADING, "no_async_loading"),
    (NO_MULTI, "no_multi"),
    (MOVABLE_KEYS, "movablekeys"),
    (ALLOW_BUSY, "allow_busy"),
];

// Error replies shared by many commands (Redis's shared.* objects).
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_NAN_OR_INF: &str = "ERR increment would produce NaN or Infinity";
pub const ERR_NO_SUCH_KEY: &str = "ERR no such key";
pub const ERR_DB_INDEX: &str = "ERR DB index is out of range";
pub const ERR_SAME_OBJECT: &str = "ERR source and destination objects are the same";
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
pub const ERR_STRING_TOO_LONG: &str =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
pub const ERR_MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// What a handler works with.
pub struct Ctx<'a> {
    pub srv: &'a mut Server,
    pub cl: &'a mut ClientState,
    pub cmd: &'static CommandSpec,
    /// Number of keyspace changes made by this command.
    dirty: u64,
    /// The command to propagate instead of argv (Redis's rewriteClientCommandVector).
    rewrite: Option<Vec<Vec<u8>>>,
    /// Suppress propagating this command (its effect was propagated otherwise).
    no_propagate: bool,
    /// Propagate even without changes (FLUSHDB on an empty database).
    force_propagate: bool,
    /// Propagate to these consumers only (`feed::TO_*`; 0: all).
    propagate_to: u8,
    /// Re-running a blocked client's command because a key got data.
    pub retry: bool,
}

impl<'a> Ctx<'a> {
    /// Count changes to the keyspace; a write command with changes is propagated.
    pub fn dirty(&mut self, n: u64) {
        self.dirty += n;
    }

    /// Give `key` in `db` a TTL for this client (Redis's setExpire with a
    /// client: a writable replica remembers the key to expire it itself).
    pub fn set_expire(&mut self, db: usize, key: &[u8], when_ms: i64) {
        self.srv.dbs[db].set_expire(key, when_ms);
        self.srv.remember_replica_key_with_expire(db, key);
    }

    /// Put `entry` in `db` with its TTL, if any, for this client.
    pub fn put_key(&mut self, db: usize, entry: crate::db::Entry, ttl: Option<i64>) {
        let key = ttl.map(|_| entry.key().to_vec());
        self.srv.dbs[db].put(entry, ttl);
        if let Some(key) = key {
            self.srv.remember_replica_key_with_expire(db, &key);
        }
    }

    /// Propagate `argv` instead of the command as the client sent it.
    pub fn propagate_as(&mut self, argv: Vec<Vec<u8>>) {
        self.rewrite = Some(argv);
    }

    /// Propagate this command even if it changed nothing.
    pub fn force_propagation(&mut self) {
        self.force_propagate = true;
    }

    /// Propagate this command, changed or not, to the replicas only
    /// (Redis's forceCommandPropagation with PROPAGATE_REPL: PUBLISH).
    pub fn force_propagation_to_replicas(&mut self) {
        self.force_propagate = true;
        self.propagate_to = crate::state::feed::TO_REPLICAS;
    }

    /// Propagate nothing for this command (its effects went out separately).
    pub fn prevent_propagation(&mut self) {
        self.no_propagate = true;
    }

    /// Delete a key whose new expiry time is already past, propagating the
    /// deletion (DEL, or UNLINK with lazyfree-lazy-expire) in place of the
    /// command, as Redis does for EXPIRE and GETEX.
    pub fn delete_already_expired(&mut self, key: &[u8]) {
        let mode = crate::db::FreeMode::lazy_if(self.srv.config.lazyfree_lazy_expire);
        self.srv.dbs[self.cl.db].delete_with(key, mode);
        let del: &[u8] = if self.srv.config.lazyfree_lazy_expire {
            b"UNLINK"
        } else {
            b"DEL"
        };
        self.propagate_as(vec![del.to_vec(), key.to_vec()]);
    }

    pub fn db_index(&self) -> usize {
        self.cl.db
    }

    /// Publish a keyspace event for `key` in the client's database
    /// (Redis's notifyKeyspaceEvent); `class` is a `NotifyFlags` bit.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        if self.srv.config.notify_keyspace_events.wants(class) {
            self.srv
                .notify_keyspace_event(class, event, key, self.cl.db);
        }
    }

    /// `key` in the client's database changed: clients WATCHing it fail
    /// their EXEC, clients caching it are told (Redis's signalModifiedKey).
    #[inline]
    pub fn signal_modified(&mut self, key: &[u8]) {
        let db = self.cl.db;
        self.srv.signal_modified_key(Some(self.cl), db, key);
    }

    /// A key changed: signal watchers and publish the event (the pair
    /// Redis's handlers call after every write).
    #[inline]
    pub fn modified(&mut self, key: &[u8], class: u32, event: &str) {
        self.signal_modified(key);
        self.notify(class, event, key);
    }

    /// The time the command runs at: read as it started, and for a script
    /// or a transaction, as it started (what expiry is judged by).
    pub fn now_ms(&self) -> i64 {
        self.srv.now_ms
    }

    /// The clock itself, read now (Redis's `mstime()`): what a relative
    /// TTL is added to and a remaining TTL measured from, so a key that a
    /// long script or transaction sets with PX lives its time from when it
    /// was set, and PTTL there counts down as in Redis.
    pub fn clock_ms(&self) -> i64 {
        crate::util::unix_time_ms()
    }
}

type CommandMap = HashMap<&'static [u8], &'static CommandSpec, foldhash::fast::RandomState>;

/// The command table as clients name it: every command under its own name,
/// unless `rename-command` gave it another one (or none).
static MAP: OnceLock<CommandMap> = OnceLock::new();

fn command_map() -> &'static CommandMap {
    MAP.get_or_init(|| COMMANDS.iter().map(|c| (c.name.as_bytes(), c)).collect())
}

/// Apply `rename-command` lines before the first command runs (once per
/// process, from main). An empty new name disables the command. Errors name
/// an unknown command, as Redis refuses to start on one.
pub fn install_renames(renames: &[(String, String)]) -> Result<(), String> {
    if renames.is_empty() {
        return Ok(());
    }
    let mut map: CommandMap = COMMANDS.iter().map(|c| (c.name.as_bytes(), c)).collect();
    for (from, to) in renames {
        let from_lc = from.to_ascii_lowercase();
        let Some(spec) = map.remove(from_lc.as_bytes()) else {
            return Err(format!("No such command in rename-command: {from}"));
        };
        if to.is_empty() {
            continue;
        }
        let to_lc = to.to_ascii_lowercase();
        if to_lc.len() > MAX_COMMAND_NAME {
            return Err(format!(
                "Target command name is longer than {MAX_COMMAND_NAME} bytes: {to}"
            ));
        }
        if map.contains_key(to_lc.as_bytes()) {
            return Err(format!("Target command name already exists: {to}"));
        }
        // The table lives for the whole process: leaking the new name once
        // at startup is what gives it the table's 'static lifetime.
        map.insert(Box::leak(to_lc.into_boxed_str()).as_bytes(), spec);
    }
    MAP.set(map)
        .map_err(|_| "rename-command applied after the command table was in use".to_string())
}

/// Longest command name the lookup's stack buffer takes.
const MAX_COMMAND_NAME: usize = 32;

/// The name last found and what it named (as the map says: a renamed
/// command is found by its new name only): a pipeline repeats its
/// command, and a comparison costs less than hashing the name.
#[derive(Clone, Copy)]
struct LastLookup {
    name: [u8; MAX_COMMAND_NAME],
    len: usize,
    spec: Option<&'static CommandSpec>,
}

thread_local! {
    static LAST_LOOKUP: std::cell::Cell<LastLookup> = const {
        std::cell::Cell::new(LastLookup {
            name: [0; MAX_COMMAND_NAME],
            len: 0,
            spec: None,
        })
    };
}

/// Find a command by name, case-insensitively.
pub fn lookup_command(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut buf = [0u8; MAX_COMMAND_NAME];
    if name.len() > buf.len() {
        return None;
    }
    let last = LAST_LOOKUP.get();
    if last.spec.is_some() && name.eq_ignore_ascii_case(&last.name[..last.len]) {
        return last.spec;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let spec = command_map().get(&buf[..name.len()]).copied();
    if spec.is_some() {
        LAST_LOOKUP.set(LastLookup {
            name: buf,
            len: name.len(),
            spec,
        });
    }
    spec
}

/// A command named as COMMAND INFO, COMMAND DOCS and LATENCY HISTOGRAM
/// name them: `get`, or `config|get` for a subcommand (Redis's
/// lookupCommandBySds).
pub fn lookup_command_by_full_name(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut parts = name.splitn(3, |&b| b == b'|');
    let base = lookup_command(parts.next()?)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(base),
        (Some(sub), None) if !base.subcommands.is_empty() => {
            let argv: [&[u8]; 2] = [base.name.as_bytes(), sub];
            base.resolve(&argv).ok().filter(|s| !std::ptr::eq(*s, base))
        }
        _ => None,
    }
}

/// "POST" or "Host:" where a command name belongs: an HTTP request sent
/// to the port (a browser made to post to it, a proxy, a health check).
fn is_http_header(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
}

/// Cross-protocol scripting: an HTTP request whose body would be run as
/// commands. The connection is closed at once, without a reply (nothing
/// it was owing either), and the event is logged at most once a minute
/// (Redis's securityWarningCommand).
fn cross_protocol_attack(client: &mut ClientState) {
    static LOGGED_AT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);
    let now = crate::util::unix_time_ms() / 1000;
    let last = LOGGED_AT.load(std::sync::atomic::Ordering::Relaxed);
    if last == i64::MIN || (now - last).abs() > 60 {
        LOGGED_AT.store(now, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!("Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. Connection aborted.");
    }
    client.close_asap = true;
}

/// Redis's unknown-command error, with up to 128 bytes of arguments,
/// byte for byte as the client sent them (cut at a NUL, as Redis's C
/// string formats cut them).
fn unknown_command_error(argv: &[&[u8]]) -> Vec<u8> {
    let mut args: Vec<u8> = Vec::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let a = c_bytes(a);
        args.push(b'\'');
        args.extend_from_slice(&a[..a.len().min(room)]);
        args.extend_from_slice(b"' ");
    }
    let name = c_bytes(argv[0]);
    let mut out = b"ERR unknown command '".to_vec();
    out.extend_from_slice(&name[..name.len().min(128)]);
    out.extend_from_slice(b"', with args beginning with: ");
    out.extend_from_slice(&args);
    out
}

pub fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// Run one command for `client`.
pub fn execute(srv: &mut Server, client: &mut ClientState, argv: &[&[u8]]) {
    execute_with(srv, client, argv, false);
}

/// Commands a RESP2 client may send while subscribed.
const SUBSCRIBED_MODE_COMMANDS: &[&str] = &[
    "ping",
    "subscribe",
    "ssubscribe",
    "unsubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "quit",
    "reset",
];

/// Commands that run at once inside MULTI instead of being queued.
const MULTI_CONTROL: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// Why a command was refused before it ran; inside MULTI a refusal
/// makes EXEC fail (Redis's flagTransaction).
fn refusal(
    srv: &mut Server,
    client: &ClientState,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
) -> Option<String> {
    let argc = argv.len() as i32;
    if (cmd.arity > 0 && argc != cmd.arity) || argc < -cmd.arity {
        return Some(arity_error(cmd.name));
    }
    // A script's declared flags stand for EVAL's and FCALL's own.
    let own_flags = command_flags(srv, cmd, argv);
    // The master's stream is obeyed, whatever would stop a client; only a
    // write this replica cannot persist is weighed (Redis's processCommand
    // with replica-ignore-disk-write-errors).
    if client.kind == crate::state::ClientKind::Master {
        let queued = match (&client.multi, cmd.name) {
            (Some(m), "exec") => m.flags,
            _ => 0,
        };
        let is_write = (own_flags | queued) & WRITE != 0;
        if (is_write || cmd.name == "ping")
            && (crate::state::snapshot::writes_refused(srv) || srv.aof_write_error().is_some())
        {
            if !srv.config.replica_ignore_disk_write_errors && cmd.name != "ping" {
                panic!("Replica was unable to write command to disk.");
            }
            if srv
                .log_limits
                .disk_error
                .allow(std::time::Instant::now())
                .is_some()
            {
                tracing::warn!(
                    "Replica is applying a command even though it is unable to write to disk."
                );
            }
        }
        return None;
    }
    if let Some(option) = protected_command_refused(srv, client, cmd) {
        // Checked before authentication, as Redis does.
        return Some(format!(
            "ERR {} command not allowed. If the {option} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
            if cmd.name == "debug" { "DEBUG" } else { "MODULE" }
        ));
    }
    if !client.authenticated && cmd.flags & NO_AUTH == 0 && srv.acl.auth_required() {
        return Some(ERR_NOAUTH.into());
    }
    if client.multi.is_some() && cmd.flags & NO_MULTI != 0 {
        return Some("ERR Command not allowed inside a transaction".into());
    }
    let context = if client.multi.is_some() {
        crate::state::acl::LogContext::Multi
    } else {
        crate::state::acl::LogContext::Toplevel
    };
    if let Err(denial) = acl::check_client(srv, client, cmd, argv, context) {
        return Some(acl::denial_error(denial, cmd));
    }
    // EXEC is judged by what it would run.
    let (queued_flags, queued_lack) = match (&client.multi, cmd.name) {
        (Some(m), "exec") => (m.flags, m.inv_flags),
        _ => (0, 0),
    };
    let flags = own_flags | queued_flags;
    if srv.config.maxmemory > 0 {
        // Every command makes room first, reads too (Redis's
        // performEvictions in processCommand); only writes that may grow
        // memory, and anything queued in MULTI, are refused when it can't.
        let out_of_memory = srv.perform_evictions() == crate::state::evict::Eviction::Fail;
        let queued =
            client.multi.is_some() && !matches!(cmd.name, "exec" | "discard" | "quit" | "reset");
        if out_of_memory && (flags & DENYOOM != 0 || queued) {
            return Some(ERR_OOM.into());
        }
    }
    if flags & WRITE != 0 || cmd.name == "ping" {
        if crate::state::snapshot::writes_refused(srv) {
            return Some(ERR_MISCONF.into());
        }
        if let Some(e) = srv.aof_write_error() {
            return Some(e);
        }
    }
    if flags & WRITE != 0 && !srv.enough_good_replicas() {
        return Some("NOREPLICAS Not enough good replicas to write.".into());
    }
    if flags & WRITE != 0 && srv.master.target.is_some() && srv.config.replica_read_only {
        return Some("READONLY You can't write against a read only replica.".into());
    }
    if client.subscriptions() > 0
        && !client.reply.is_resp3()
        && !SUBSCRIBED_MODE_COMMANDS.contains(&cmd.name)
    {
        return Some(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            cmd.name
        ));
    }
    // A replica whose link is down answers only what may be stale, when
    // replica-serve-stale-data says so.
    if srv.master.is_syncing()
        && !srv.config.replica_serve_stale_data
        && (own_flags & STALE == 0 || queued_lack & STALE != 0)
    {
        return Some(
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                .into(),
        );
    }
    // A replica only talks replication (REPLCONF ACK, PING), so that it
    // cannot slip past what is refused to it, such as a pause; a MONITOR
    // is one for Redis (CLIENT_SLAVE) and is refused the same.
    if (client.kind == crate::state::ClientKind::Replica || client.monitor)
        && own_flags & (WRITE | READONLY | MAY_REPLICATE) != 0
    {
        return Some("ERR Replica can't interact with the keyspace".into());
    }
    // Async loading (a replica's swapdb) serves all but what it cannot.
    let refused_while_loading = if srv.async_loading() {
        (cmd.flags | queued_flags) & NO_ASYNC_LOADING != 0
    } else {
        cmd.flags & LOADING == 0 || queued_lack & LOADING != 0
    };
    // Clients served while a script replayed from the AOF runs long are
    // told the dataset is loading, as Redis (its loading flag is up).
    let loading = srv.loading.is_some() || (srv.serving_busy && srv.replaying_aof);
    if loading && refused_while_loading {
        return Some("LOADING Redis is loading the dataset in memory".into());
    }
    // While a script runs past its time limit, the clients served meanwhile
    // may run only what is allowed when busy; inside MULTI the refusal
    // fails the transaction, and a refused EXEC aborts it, as Redis's
    // rejectCommand.
    if srv.serving_busy && cmd.flags & ALLOW_BUSY == 0 {
        let eval = srv.script_run.as_ref().is_none_or(|r| r.eval);
        return Some(
            if eval {
                scripting::ERR_BUSY_SCRIPT
            } else {
                scripting::ERR_BUSY_FUNCTION
            }
            .into(),
        );
    }
    None
}

/// The flags a command is checked with: its own, or for EVAL and FCALL
/// those of the script they run.
pub fn command_flags(srv: &Server, cmd: &'static CommandSpec, argv: &[&[u8]]) -> u32 {
    if cmd.flags & NOSCRIPT != 0
        && matches!(
            cmd.name,
            "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro"
        )
    {
        return scripting::script_command_flags(srv, cmd, argv);
    }
    cmd.flags
}

/// Must CLIENT PAUSE hold this command back? Every command under a pause
/// of ALL, those that may write or replicate (EXEC judged by what it
/// queued) under WRITE; replicas are never held (Redis's processCommand).
fn held_by_pause(
    srv: &Server,
    client: &ClientState,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
) -> bool {
    let Some(pause) = srv.clients_paused() else {
        return false;
    };
    if client.kind == crate::state::client::ClientKind::Replica {
        return false;
    }
    let queued = match (&client.multi, cmd.name) {
        (Some(m), "exec") => m.flags,
        _ => 0,
    };
    pause.all || (command_flags(srv, cmd, argv) | queued) & (WRITE | MAY_REPLICATE) != 0
}

/// Run one command; `retry` when re-running a blocked client's command.
/// This is Redis's processCommand (checks, MULTI queueing) and call()
/// (execution, propagation, statistics, slow log, MONITOR) in one.
pub fn execute_with(srv: &mut Server, client: &mut ClientState, argv: &[&[u8]], retry: bool) {
    if argv.is_empty() {
        return;
    }
    if is_http_header(argv[0]) {
        return cross_protocol_attack(client);
    }
    let errors_before = client.reply.errors;
    let reply_mark = client.reply.mark();
    let found = lookup_command(argv[0]);
    let is_client_command = found.is_some_and(|c| c.name == "client");
    let resolved = found.map(|base| (base, base.resolve(argv)));
    // Before the command: keys dropped from a full tracking table and keys
    // evicted to make room change things this client may watch or cache.
    // It is the running client meanwhile (out of the client table), and
    // hears of them before its reply, as in Redis, where the command has
    // not started yet.
    let outer = enter_client(srv, client);
    if srv.tracking.clients > 0 {
        srv.tracking_limit_used_slots();
    }
    let refused = match &resolved {
        Some((_, Ok(cmd))) => {
            client.last_cmd = cmd.name;
            refusal(srv, client, cmd, argv)
        }
        // As Redis's lookupCommand: no command, CLIENT LIST's cmd=NULL.
        _ => {
            client.last_cmd = "NULL";
            None
        }
    };
    if outer {
        leave_client(srv, client);
        flush_own_messages(srv, client);
    }
    match resolved {
        None => reject_bytes(client, &unknown_command_error(argv)),
        Some((_, Err(e))) => reject_bytes(client, &e),
        Some((base, Ok(cmd))) => {
            if let Some(err) = refused {
                stats_of(srv, cmd).rejected_calls += 1;
                if cmd.name == "exec" {
                    // Redis's execCommandAbort: the transaction is gone.
                    // The errors Redis words itself (rejectCommandFormat:
                    // arity, ACL defaults, subscribed context, replicas)
                    // carry no code there, so none shows after "because of".
                    transaction::discard_transaction(srv, client);
                    let err = err.strip_prefix("ERR ").unwrap_or(&err);
                    client.reply.error(&format!(
                        "EXECABORT Transaction discarded because of: {err}"
                    ));
                    if !srv.monitors.is_empty() {
                        monitor::feed_monitors(srv, client, client.db, argv);
                    }
                } else {
                    reject(client, &err);
                }
            } else if !retry && held_by_pause(srv, client, cmd, argv) {
                blocking::postpone(srv, client, argv);
            } else if client.multi.is_some() && !MULTI_CONTROL.contains(&cmd.name) {
                let flags = command_flags(srv, cmd, argv);
                transaction::queue(client, base, argv, flags);
            } else {
                call(srv, client, cmd, argv, retry);
            }
        }
    }
    finish_command(
        srv,
        client,
        argv,
        is_client_command,
        errors_before,
        reply_mark,
    );
}

/// A command refused before it ran: its error, and inside MULTI a failed
/// transaction (Redis's rejectCommand and flagTransaction).
fn reject(client: &mut ClientState, err: &str) {
    reject_bytes(client, err.as_bytes());
}

fn reject_bytes(client: &mut ClientState, err: &[u8]) {
    client.reply.error_bytes(err);
    if let Some(m) = client.multi.as_mut() {
        m.errored = true;
    }
}

/// What follows every command, run or refused: CLIENT CACHING's reset,
/// the client's own invalidations, error counts, CLIENT REPLY OFF/SKIP,
/// and messages the command published to its own client.
fn finish_command(
    srv: &mut Server,
    client: &mut ClientState,
    argv: &[&[u8]],
    is_client_command: bool,
    errors_before: u64,
    reply_mark: crate::protocol::reply::ReplyMark,
) {
    // The master gets no replies, except the ACK its GETACK asked for (with
    // the offset before the GETACK); its command counts in the offset once
    // it has run (not while a pause holds it).
    if client.kind == crate::state::ClientKind::Master {
        if client.reply.errors > errors_before {
            propagated_command_failed(srv, client, argv, &reply_mark, "master");
        }
        client.reply.error_codes.clear();
        client.reply.rollback(reply_mark);
        if std::mem::take(&mut client.ack_requested) {
            let ack = srv.ack_bytes();
            client.reply.raw(&ack);
        }
        if client.blocked.is_none() {
            // A transaction counts when it ends (EXEC or DISCARD): one cut
            // short by a lost link is not in the offset, so PSYNC resends it.
            let mut raw = std::mem::take(&mut client.master_multi_bytes);
            crate::state::feed::encode_command(argv, &mut raw);
            if client.multi.is_some() {
                client.master_multi_bytes = raw;
            } else {
                srv.master_stream_applied(&raw);
            }
        }
        return;
    }
    // A replica's link carries its stream, never replies: a command it
    // sends that answers anything (SYNC's and PSYNC's answers, and the
    // stream an ACK releases, are not replies) disconnects it, as Redis's
    // _addReplyToBufferOrList; an error is logged first, as afterErrorReply.
    if client.kind == crate::state::ClientKind::Replica
        && !matches!(client.last_cmd, "sync" | "psync")
        && (client.reply.errors > errors_before
            || (client.last_cmd != "replconf" && client.reply.wrote_since(&reply_mark)))
    {
        if client.reply.errors > errors_before {
            propagated_command_failed(srv, client, argv, &reply_mark, "replica");
        }
        client.reply.error_codes.clear();
        client.reply.rollback(reply_mark);
        let name = if client.last_cmd == "NULL" {
            "<unknown>"
        } else {
            client.last_cmd
        };
        tracing::warn!(
            "Replica generated a reply to command '{name}', disconnecting it: {}",
            client.info_line()
        );
        client.close_asap = true;
        srv.to_close.push((client.slot, client.id));
        return;
    }
    // CLIENT CACHING covers the one command (or transaction) after it.
    if client.multi.is_none() && !is_client_command {
        if let Some(t) = client.tracking.as_mut() {
            t.caching = false;
        }
    }
    if srv.current_client == 0 {
        srv.tracking_flush_pending(client);
    }
    srv.stats.total_error_replies +=
        (client.reply.errors - errors_before).saturating_sub(client.reply.uncounted);
    client.reply.uncounted = 0;
    srv.stats.count_errors(&mut client.reply.error_codes);
    // CLIENT REPLY OFF/SKIP, as the flags stand after the command (so the
    // +OK of CLIENT REPLY ON is sent); then SKIP moves on to the next one.
    if client.reply_off || client.reply_skip {
        client.reply.rollback(reply_mark);
    }
    client.reply_skip = std::mem::take(&mut client.reply_skip_next);
    // Messages for this client published while it ran come after its reply.
    if !srv.self_pushes.is_empty() && srv.current_client == 0 {
        client.reply.raw(&srv.self_pushes);
        srv.self_pushes.clear();
    }
}

/// Make `client` the running one, unless a command is running already (a
/// script's); true when it did, and `leave_client` must follow.
fn enter_client(srv: &mut Server, client: &ClientState) -> bool {
    let outer = srv.current_client == 0;
    if outer {
        srv.current_client = client.id;
        srv.current_resp3 = client.reply.is_resp3();
    }
    outer
}

/// `client` is no longer running: changes to keys it watches, noted while
/// it was out of the client table, now reach it.
#[inline]
fn leave_client(srv: &mut Server, client: &mut ClientState) {
    srv.current_client = 0;
    if srv.deferred_touches.is_empty() {
        return;
    }
    for (db, key) in std::mem::take(&mut srv.deferred_touches) {
        srv.touch_watched_key(Some(client), db, &key);
    }
}

/// Messages for `client` produced before its command runs (invalidations
/// of keys evicted or dropped from the tracking table): its own are sent
/// now, ahead of its reply.
fn flush_own_messages(srv: &mut Server, client: &mut ClientState) {
    srv.tracking_flush_pending(client);
    if !srv.self_pushes.is_empty() {
        client.reply.raw(&srv.self_pushes);
        srv.self_pushes.clear();
    }
}

/// Execute a command that passed every check (Redis's call()): run the
/// handler inside an execution unit of the propagation feed, propagate its
/// effect, count it, log it if slow, show it to MONITORs.
pub fn call(
    srv: &mut Server,
    client: &mut ClientState,
    cmd: &'static CommandSpec,
    argv: &[&[u8]],
    retry: bool,
) {
    // Counted as Redis's call() counts: every command that runs (a script's
    // and a transaction's included, MULTI and EXEC themselves too), once
    // (not again when a blocked one is served); not one refused, queued in
    // MULTI or held by a pause.
    // What an AOF being loaded runs is not counted either (Redis runs it
    // without call()), except the commands an EXEC in it runs; its
    // commands have no statistics, slow log or latency samples (Redis's
    // CMD_CALL_NONE for them).
    let replayed = srv.replaying_aof;
    let counted = !retry && (!replayed || srv.in_exec);
    let errors_before = client.reply.errors;
    let reply_before = client.reply.len();
    let started = crate::util::cycles::now();
    let outer = enter_client(srv, client);
    let mut ctx = Ctx {
        srv,
        cl: client,
        cmd,
        dirty: 0,
        rewrite: None,
        no_propagate: false,
        force_propagate: false,
        propagate_to: 0,
        retry,
    };
    let db = ctx.cl.db;
    ctx.srv.feed.begin_unit();
    if cmd.flags & TOUCHES_ARBITRARY_KEYS != 0 {
        ctx.srv.feed.unwrap_unit();
    }
    (cmd.handler)(&mut ctx, argv);
    let (dirty, rewrite, no_propagate, force, propagate_to) = (
        ctx.dirty,
        ctx.rewrite,
        ctx.no_propagate,
        ctx.force_propagate,
        ctx.propagate_to,
    );
    srv.dirty += dirty;
    // A write to keys others wait on: they are served in the order the
    // keys were written (Redis's ready_keys list), and a stream's waiters
    // look again (the one place streams are signalled).
    if dirty > 0 && cmd.flags & WRITE != 0 && !srv.blocked_keys.is_empty() {
        signal_ready_keys(srv, db, cmd, argv);
    }
    // A tracking client may now cache the keys this read returned (a
    // read-only script's keys count once it reads: see scripting.rs).
    if cmd.flags & READONLY != 0
        && client
            .tracking
            .as_ref()
            .is_some_and(|t| t.remembers_reads())
        && !matches!(cmd.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
    {
        let keys = meta::get_keys(cmd.meta, argv);
        srv.tracking_remember_keys(client, keys.iter().map(|&(pos, _)| argv[pos]));
    }
    // A read that may replicate (PFCOUNT caching its result in the key) is
    // propagated when it changed something, as Redis's call() does.
    if (dirty > 0 || force)
        && cmd.flags & (WRITE | MAY_REPLICATE) != 0
        && !no_propagate
        && srv.propagating()
    {
        // Its WAIT will count replicas that have this turn's stream.
        if srv.repl.feeds_backlog && srv.repl.writers.last() != Some(&client.id) {
            srv.repl.writers.push(client.id);
        }
        let refs: Vec<&[u8]>;
        let argv = match &rewrite {
            Some(rewritten) => {
                refs = rewritten.iter().map(|a| a.as_slice()).collect();
                &refs[..]
            }
            None => argv,
        };
        match propagate_to {
            0 => srv.propagate(db, argv),
            to => srv.propagate_only_to(db, argv, to),
        }
    }
    srv.feed.end_unit();
    let ended = crate::util::cycles::now();
    srv.last_command_end = ended;
    let duration_us = crate::util::cycles::elapsed_us(started, ended);
    let served = retry && client.reply.len() != reply_before;
    // The latency monitor sees every run, a blocking one included; serving
    // a blocked client is its own event (Redis's updateStatsOnUnblock).
    let latency_event = match (retry, cmd.flags & FAST != 0) {
        (true, _) => served.then_some("command-unblocking"),
        (false, true) => Some("fast-command"),
        (false, false) => Some("command"),
    };
    // Counted once it has run (an INFO does not count itself).
    if counted {
        srv.stats.total_commands_processed += 1;
    }
    if let Some(event) = latency_event.filter(|_| !replayed) {
        srv.latency_add_sample_if_needed(event, duration_us / 1000);
    }
    // A blocked command is accounted when it is served (or times out).
    if (client.blocked.is_none() || served) && !replayed {
        let tracking = srv.config.latency_tracking;
        let stats = stats_of(srv, cmd);
        stats.calls += 1;
        stats.usec += duration_us;
        // Errors a nested call already accounted (a command inside EXEC)
        // are not the outer command's failure, as Redis's
        // incrCommandStatsOnError remembers the count across calls.
        if client.reply.errors > errors_before.max(client.errors_accounted) {
            stats.failed_calls += 1;
        }
        client.errors_accounted = client.reply.errors;
        if tracking {
            let ns = i64::try_from(duration_us.saturating_mul(1000)).unwrap_or(i64::MAX);
            crate::state::latency::record_command_latency(&mut stats.latency_histogram, ns);
        }
        if cmd.flags & SKIP_SLOWLOG == 0 {
            slowlog::push_if_slow(srv, client, argv, duration_us);
        }
    }
    // A blocked command is shown once, when it first runs.
    if !srv.monitors.is_empty() && cmd.flags & (ADMIN | SKIP_MONITOR) == 0 && !retry {
        // In the database the client has after the command (Redis's
        // call(): `SELECT 2` shows as `[2 …]`).
        monitor::feed_monitors(srv, client, client.db, argv);
    }
    if outer {
        leave_client(srv, client);
    }
}

/// Signal the stream keys of `argv` that blocked readers wait on.
fn signal_ready_keys(srv: &mut Server, db: usize, cmd: &'static CommandSpec, argv: &[&[u8]]) {
    // Stream writes that give a waiter nothing new are not signals (Redis
    // signals XADD, XGROUP DESTROY and a key made or replaced): a waiter
    // looking again would see, after XGROUP SETID, entries it was not
    // woken for, and its consumer's seen-time would move.
    const QUIET_STREAM_WRITES: &[&str] = &[
        "xdel",
        "xtrim",
        "xsetid",
        "xack",
        "xclaim",
        "xautoclaim",
        "xreadgroup",
        "xgroup|setid",
        "xgroup|createconsumer",
        "xgroup|delconsumer",
    ];
    for (pos, _) in meta::get_keys(cmd.meta, argv) {
        let slot = (db, argv[pos].to_vec());
        if !srv.blocked_keys.contains_key(&slot) {
            continue;
        }
        let holds_stream = matches!(
            srv.dbs[db].main.get(argv[pos]).map(|e| e.value()),
            Some(ValueRef::Boxed(crate::db::Value::Stream(_)))
        );
        if holds_stream {
            if QUIET_STREAM_WRITES.contains(&cmd.name) {
                continue;
            }
            if !srv.ready_streams.contains(&slot) {
                srv.ready_streams.push(slot.clone());
            }
        }
        if !srv.ready_keys.contains(&slot) {
            srv.ready_keys.push(slot);
        }
    }
}

/// The position of a command in the table (every spec lives in COMMANDS:
/// its index is its offset there).
pub fn spec_index(cmd: &'static CommandSpec) -> usize {
    (cmd as *const CommandSpec as usize - COMMANDS.as_ptr() as usize)
        / std::mem::size_of::<CommandSpec>()
}

/// The counters a call is accounted to: the command's own, kept by its
/// place in the table, or for a subcommand its `container|sub` counters.
pub(crate) fn stats_of<'s>(
    srv: &'s mut Server,
    cmd: &'static CommandSpec,
) -> &'s mut crate::state::CommandStats {
    if cmd.name.contains('|') {
        return srv.subcommand_stats.entry(cmd.name).or_default();
    }
    let idx = spec_index(cmd);
    if srv.command_stats.len() <= idx {
        srv.command_stats
            .resize(COMMANDS.len().max(idx + 1), Default::default());
    }
    &mut srv.command_stats[idx]
}

/// The counters of a command, if it has any yet (read-only twin of
/// `stats_of`).
pub fn command_stats_of<'s>(
    srv: &'s Server,
    cmd: &'static CommandSpec,
) -> Option<&'s crate::state::CommandStats> {
    if cmd.name.contains('|') {
        return srv.subcommand_stats.get(cmd.name);
    }
    srv.command_stats.get(spec_index(cmd))
}

/// Every command and subcommand with counters, by full name in name order
/// (INFO commandstats and latencystats, LATENCY HISTOGRAM).
pub fn all_command_stats(srv: &Server) -> Vec<(&'static str, &crate::state::CommandStats)> {
    let mut all: Vec<(&'static str, &crate::state::CommandStats)> = COMMANDS
        .iter()
        .zip(srv.command_stats.iter())
        .map(|(spec, st)| (spec.name, st))
        .chain(srv.subcommand_stats.iter().map(|(n, st)| (*n, st)))
        .collect();
    all.sort_by_key(|(n, _)| *n);
    all
}

/// Run a command on behalf of an in-process caller (tests, tools). The
/// reply bytes are returned in the client's protocol.
pub fn execute_detached(srv: &mut Server, client: &mut ClientState, argv: &[&[u8]]) -> Vec<u8> {
    srv.update_time();
    execute(srv, client, argv);
    client.reply.take_bytes()
}

/// A command from our master (`to` "master") or the AOF being loaded
/// (`to` "AOF-loading-client") failed here though it succeeded where it
/// was written: log it and, as `propagation-error-behavior` says, stop
/// (Redis's afterErrorReply for those clients). A replica stops only while
/// read-only (a writable one may have diverged on purpose); the AOF
/// loader only with `panic`.
fn propagated_command_failed(
    srv: &mut Server,
    client: &ClientState,
    argv: &[&[u8]],
    since: &crate::protocol::reply::ReplyMark,
    to: &str,
) {
    use crate::config::PropagationErrorBehavior as Behavior;
    let error = client.reply.error_since(since).unwrap_or_default();
    let error = &error[..error.len().min(4096)];
    let name = lookup_command(argv[0]).map_or("<unknown>", |c| c.name);
    let from = match to {
        "master" => "replica",
        "replica" => "master",
        _ => "server",
    };
    tracing::warn!(
        "== CRITICAL == This {from} is sending an error to its {to}: '{error}' after processing the command '{name}'"
    );
    srv.unexpected_error_replies += 1;
    let behavior = srv.config.propagation_error_behavior;
    let panic_in_replica = to == "master"
        && srv.config.replica_read_only
        && matches!(behavior, Behavior::Panic | Behavior::PanicOnReplicas);
    let panic_in_aof = to == "AOF-loading-client" && behavior == Behavior::Panic;
    if panic_in_replica || panic_in_aof {
        panic!(
            "This {from} panicked sending an error to its {to} after processing the command '{name}'"
        );
    }
}

/// Run one command read from an AOF (Redis's loadSingleAppendOnlyFile):
/// no authentication, memory or MISCONF gates, inside MULTI the commands
/// are queued as they were; the reply is thrown away.
pub fn replay_aof_command(
    srv: &mut Server,
    client: &mut ClientState,
    argv: &[&[u8]],
) -> Result<(), String> {
    let Some(base) = lookup_command(argv[0]) else {
        return Err(format!(
            "Unknown command '{}'",
            String::from_utf8_lossy(argv[0])
        ));
    };
    let cmd = base
        .resolve(argv)
        .map_err(|e| String::from_utf8_lossy(&e).into_owned())?;
    let errors_before = client.reply.errors;
    let mark = client.reply.mark();
    if client.multi.is_some() && cmd.name != "exec" {
        transaction::queue(client, base, argv, cmd.flags);
    } else {
        call(srv, client, cmd, argv, false);
    }
    if client.reply.errors > errors_before {
        propagated_command_failed(srv, client, argv, &mark, "AOF-loading-client");
    }
    client.reply.clear();
    client.reply.error_codes.clear();
    Ok(())
}

/// Detach a client that is going away from everything it takes part in
/// (blocking, watched keys, subscriptions, MONITOR), before its slot is
/// freed.
pub fn detach_client(srv: &mut Server, client: &mut ClientState) {
    blocking::unblock(srv, client);
    srv.unwatch_all(client);
    client.multi = None;
    pubsub::unsubscribe_everything(srv, client);
    srv.monitors.retain(|&id| id != client.id);
    srv.disable_tracking(client);
    srv.detach_replica(client);
    if srv.master.client_id == Some(client.id) {
        tracing::info!("Connection with master lost.");
        srv.master.stream_db = client.db;
        srv.master.link_lost();
        // An established link is tried again at once, not after the retry
        // pause (Redis's replicationHandleMasterDisconnection: waiting
        // risks the master's backlog moving past our offset).
        if let Some((host, port)) = &srv.master.target {
            tracing::info!("Reconnecting to MASTER {host}:{port}");
            srv.master.retry_at = std::time::Instant::now();
        }
    }
}

/// DEBUG (which can stop the loop or reload the dataset) and MODULE LOAD,
/// LOADEX and UNLOAD run only where their `enable-*-command` option allows
/// (Redis's CMD_PROTECTED): the option's name when this client is refused.
fn protected_command_refused(
    srv: &Server,
    client: &ClientState,
    cmd: &CommandSpec,
) -> Option<&'static str> {
    if cmd.flags & PROTECTED == 0 {
        return None;
    }
    // DEBUG and MODULE LOAD/LOADEX/UNLOAD, each behind its own option.
    let (gate, option) = if cmd.name == "debug" {
        (srv.config.enable_debug_command, "enable-debug-command")
    } else {
        (srv.config.enable_module_command, "enable-module-command")
    };
    (!gate.allows(client.is_local)).then_some(option)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_found_case_insensitively() {
        for c in COMMANDS {
            assert_eq!(
                lookup_command(c.name.to_uppercase().as_bytes())
                    .unwrap()
                    .name,
                c.name
            );
        }
        assert!(lookup_command(b"nosuchcommand").is_none());
    }
}
