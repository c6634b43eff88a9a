//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (Redis's eval.c and
//! script.c).
//!
//! The interpreter, its sandbox and the conversions are `crate::scripting`;
//! here a script is checked against the server before it runs (its shebang
//! flags against a read-only replica, a disk error, `maxmemory`, `*_RO`),
//! and its `redis.call`s run as Redis's script client: through `call`,
//! past the client gates, with the checks Redis applies to a command from
//! a script. Replication is by effects: the EVAL itself is never
//! propagated, the writes it makes are, as one MULTI/EXEC unit when there
//! are several (the feed's execution unit of the EVAL holds them).
//!
//! A script runs to its end on the loop thread: there is no `-BUSY` for
//! other clients while a long one runs, so SCRIPT KILL always finds none;
//! past `busy-reply-threshold` it is logged as slow, and a SIGTERM/SIGINT
//! stops it so that the server can shut down.

use super::*;
use crate::protocol::reply::Proto;
use crate::scripting::{Host, Ldb, LdbIo, RunOptions, ScriptFlags, REPL_AOF, REPL_REPLICA};
use crate::state::client::LdbMode;

const ERR_NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// EVAL script numkeys [key ...] [arg ...]
pub fn eval(c: &mut Ctx, argv: &[&[u8]]) {
    eval_generic(c, argv, Source::Body, Mode::ReadWrite);
}

/// EVAL_RO: as EVAL, but the script may not write.
pub fn eval_ro(c: &mut Ctx, argv: &[&[u8]]) {
    eval_generic(c, argv, Source::Body, Mode::ReadOnly);
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]: a script from the cache.
pub fn evalsha(c: &mut Ctx, argv: &[&[u8]]) {
    eval_generic(c, argv, Source::Sha, Mode::ReadWrite);
}

/// EVALSHA_RO: as EVALSHA, but the script may not write.
pub fn evalsha_ro(c: &mut Ctx, argv: &[&[u8]]) {
    eval_generic(c, argv, Source::Sha, Mode::ReadOnly);
}

/// What EVAL's first argument is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Body,
    Sha,
}

/// The `_RO` variants refuse scripts that may write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    ReadWrite,
    ReadOnly,
}

/// The family's one implementation (Redis's evalGenericCommand).
fn eval_generic(c: &mut Ctx, argv: &[&[u8]], source: Source, mode: Mode) {
    // MONITOR shows the EVAL before the commands it runs.
    if !c.srv.monitors.is_empty() {
        monitor::feed_monitors(c.srv, c.cl, c.cl.db, argv);
    }
    if source == Source::Sha && argv[1].len() != 40 {
        return c.cl.reply.error(ERR_NOSCRIPT);
    }
    if c.cl.ldb != LdbMode::Off {
        if source == Source::Sha {
            return c
                .cl
                .reply
                .error("ERR Please use EVAL instead of EVALSHA for debugging");
        }
        return debug_session(c, argv, mode);
    }
    eval_checked(c, argv, source, mode, None);
}

/// EVAL once the debugger, if any, is set up: the arguments checked, the
/// script compiled and run.
fn eval_checked(c: &mut Ctx, argv: &[&[u8]], source: Source, mode: Mode, ldb: Option<&mut Ldb>) {
    let Some(numkeys) = parse_i64(argv[2]) else {
        return c.cl.reply.error(ERR_NOT_INT);
    };
    if numkeys > argv.len() as i64 - 3 {
        return c
            .cl
            .reply
            .error("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return c.cl.reply.error("ERR Number of keys can't be negative");
    }
    let sha = match source {
        Source::Sha => String::from_utf8_lossy(argv[1]).to_ascii_lowercase(),
        Source::Body => match c.srv.scripts.create(argv[1]) {
            Ok(sha) => sha,
            Err(e) => return c.cl.reply.error(&e),
        },
    };
    let Some(flags) = c.srv.scripts.get(sha.as_bytes()).map(|s| s.flags) else {
        return c.cl.reply.error(ERR_NOSCRIPT);
    };
    if let Err(e) = refused_before_run(c.srv, c.cl, flags, mode) {
        return c.cl.reply.error(&e);
    }
    let numkeys = numkeys as usize;
    let (keys, args) = argv[3..].split_at(numkeys);
    run_script(c, &sha, flags, mode, keys, args, ldb);
}

// ---- The Lua debugger (SCRIPT DEBUG) ----

/// A debugged EVAL (Redis's evalGenericCommandWithDebugging): in a forked
/// child that talks to the client and exits (YES; the parent closes its
/// side of the connection), or here, with the server waiting (SYNC). The
/// client is closed after the session.
fn debug_session(c: &mut Ctx, argv: &[&[u8]], mode: Mode) {
    let forked = c.cl.ldb == LdbMode::Fork;
    if forked {
        // SAFETY: getpid has no memory effects.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork; the child runs only the session and `_exit`s, the
        // parent goes on as before.
        let pid = unsafe { libc::fork() };
        if pid == -1 {
            let e = std::io::Error::last_os_error();
            c.cl.ldb = LdbMode::Off;
            return c.cl.reply.error(&format!(
                "ERR Fork() failed: can't run EVAL in debugging mode: {}",
                crate::config::os_error_text(&e)
            ));
        }
        if pid > 0 {
            c.srv.ldb_children.push(pid);
            c.cl.ldb = LdbMode::Off;
            c.cl.close_asap = true;
            return;
        }
        // The child: the server's shutdown signals are the parent's. It
        // dies with the parent, as the background children do: one that
        // outlived a killed server would keep its listening sockets, and a
        // restarted server could not bind them.
        // SAFETY: plain signal dispositions in a single-threaded child;
        // prctl/getppid have no memory effects.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
        tracing::warn!("Redis forked for debugging eval");
    } else {
        tracing::warn!("Redis synchronous debugging eval session started");
    }
    let threshold = c.srv.config.busy_reply_threshold;
    let limit = std::time::Duration::from_millis(if threshold > 0 {
        threshold as u64
    } else {
        5000
    });
    let mut ldb = Ldb::new(Box::new(SocketIo { fd: c.cl.fd }), argv[1], limit);
    eval_checked(c, argv, Source::Body, mode, Some(&mut ldb));
    ldb.end();
    if forked {
        // The reply, straight to the socket, and the child is done: none of
        // the loop's work (AOF, replicas) is the child's.
        let reply = c.cl.reply.take_bytes();
        SocketIo { fd: c.cl.fd }.write_all(&reply);
        tracing::warn!("Lua debugging session child exiting");
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    tracing::warn!("Redis synchronous debugging eval session ended");
    c.cl.ldb = LdbMode::Off;
    c.cl.close_after_reply = true;
}

/// The debugging client's socket, read and written directly (it is off
/// the event loop's engines meanwhile: see SCRIPT DEBUG).
struct SocketIo {
    fd: std::os::fd::RawFd,
}

impl SocketIo {
    /// Wait for `events` on the socket, up to `timeout_ms` (-1: for ever).
    fn wait(&self, events: libc::c_short, timeout_ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd,
            events,
            revents: 0,
        };
        loop {
            // SAFETY: one pollfd, ours.
            let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
            if n >= 0 {
                return n > 0;
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return false;
            }
        }
    }
}

impl LdbIo for SocketIo {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            // SAFETY: reading into `buf`, within its length.
            let n =
                unsafe { libc::read(self.fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock => {
                    self.wait(libc::POLLIN, -1);
                }
                std::io::ErrorKind::Interrupted => {}
                _ => return Err(e),
            }
        }
    }

    fn write_all(&mut self, mut data: &[u8]) {
        // As Redis's connSendTimeout: 5 seconds for the client to take it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !data.is_empty() {
            // SAFETY: sending from `data`, within its length.
            let n = unsafe {
                libc::send(
                    self.fd,
                    data.as_ptr() as *const libc::c_void,
                    data.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n > 0 {
                data = &data[n as usize..];
                continue;
            }
            let e = std::io::Error::last_os_error();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match e.kind() {
                std::io::ErrorKind::Interrupted => {}
                std::io::ErrorKind::WouldBlock if !left.is_zero() => {
                    self.wait(libc::POLLOUT, left.as_millis().max(1) as i32);
                }
                // Gone or stuck: the next read finds out.
                _ => return,
            }
        }
    }
}

/// Reap the children of finished debugging sessions (from the cron).
pub fn reap_debug_sessions(srv: &mut Server) {
    srv.ldb_children.retain(|&pid| {
        let mut status = 0;
        // SAFETY: waitpid on our own child, non-blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        r == 0
    });
}

/// Kill the debugging sessions still running (at shutdown, as Redis's
/// ldbKillForkedSessions).
pub fn kill_debug_sessions(srv: &mut Server) {
    for pid in std::mem::take(&mut srv.ldb_children) {
        tracing::warn!("Killing debugging session {pid}");
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
    }
}

/// Why a script may not start (Redis's scriptPrepareForRun): the checks a
/// command's flags get, made from what the script declares.
fn refused_before_run(
    srv: &Server,
    caller: &ClientState,
    flags: ScriptFlags,
    mode: Mode,
) -> Result<(), String> {
    let running_stale = srv.master.is_syncing() && !srv.config.replica_serve_stale_data;
    let obey = caller.must_obey();
    if flags.compat {
        if running_stale {
            return Err(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                    .into(),
            );
        }
        return Ok(());
    }
    if running_stale && !flags.allow_stale {
        return Err("MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script.".into());
    }
    if !flags.no_writes {
        if srv.master.target.is_some() && srv.config.replica_read_only && !obey {
            return Err("READONLY Can not run script with write flag on readonly replica".into());
        }
        if !obey {
            if crate::state::snapshot::writes_refused(srv) {
                return Err("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.".into());
            }
            if srv.aof_write_error().is_some() {
                return Err(format!("MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {}", srv.aof.last_write_error));
            }
        }
        if mode == Mode::ReadOnly {
            return Err("ERR Can not execute a script with write flag using *_ro command.".into());
        }
        if srv.master.target.is_none() && !srv.enough_good_replicas() {
            return Err("NOREPLICAS Not enough good replicas to write.".into());
        }
    }
    if over_maxmemory(srv) && !(flags.allow_oom || flags.no_writes) {
        return Err("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into());
    }
    Ok(())
}

fn over_maxmemory(srv: &Server) -> bool {
    srv.config.maxmemory > 0 && srv.used_memory() as u64 > srv.config.maxmemory
}

/// Run the cached script `sha` for the calling client.
fn run_script(
    c: &mut Ctx,
    sha: &str,
    flags: ScriptFlags,
    mode: Mode,
    keys: &[&[u8]],
    args: &[&[u8]],
    ldb: Option<&mut Ldb>,
) {
    // The engine leaves the server while it runs the script, whose
    // commands need the server (INFO inside a script sees a placeholder).
    let mut engine = std::mem::replace(&mut c.srv.scripts, crate::scripting::Engine::placeholder());
    let run = Run {
        eval: true,
        name: sha,
        argv: &[],
        keys,
        function_counts: (
            c.srv.functions.library_count(),
            c.srv.functions.function_count(),
        ),
    };
    with_script_host(c, flags, mode, run, |host, options, out| {
        engine.run(sha, keys, args, options, host, out, ldb)
    });
    c.srv.scripts = engine;
}

/// Which script runs: an EVAL'd one (by SHA1) or a function (by name).
struct Run<'a> {
    eval: bool,
    name: &'a str,
    /// The command that runs it.
    argv: &'a [&'a [u8]],
    /// The keys it declared.
    keys: &'a [&'a [u8]],
    /// Libraries and functions loaded (FUNCTION STATS, while a function
    /// runs with the libraries taken out of the server).
    function_counts: (usize, usize),
}

/// Run `body` with a host for `redis.call` (the script client, set up as
/// Redis sets up its script client for a run), the run's options, and the
/// caller's reply. While it runs, `Server::script_run` says what runs.
fn with_script_host(
    c: &mut Ctx,
    flags: ScriptFlags,
    mode: Mode,
    run: Run,
    body: impl FnOnce(&mut dyn Host, RunOptions, &mut crate::protocol::reply::Reply),
) {
    let mut client = match c.srv.script_client.take() {
        Some(client) => client,
        None => {
            let id = c.srv.next_client_id;
            c.srv.next_client_id += 1;
            let mut client =
                ClientState::new(id, -1, "lua".into(), String::new(), false, true, true);
            // Blocking commands answer at once inside a script.
            client.deny_blocking = true;
            Box::new(client)
        }
    };
    // The script starts in its caller's database; a SELECT inside it is
    // its own. It runs as its caller's user.
    client.db = c.cl.db;
    client.user = c.cl.user;
    if client.user_name != c.cl.user_name {
        client.user_name = c.cl.user_name.clone();
    }
    // Refusals are logged with the caller's client line (Redis's
    // script_caller); only a restricted user can be refused.
    let caller_info =
        if c.cl.user != crate::state::acl::NO_USER && !c.srv.acl.user(c.cl.user).unrestricted {
            Some(c.cl.info_line())
        } else {
            None
        };
    let verbosity = match c.srv.config.loglevel.as_str() {
        "debug" => 0,
        "verbose" => 1,
        "notice" => 2,
        _ => 3,
    };
    let read_only = mode == Mode::ReadOnly || (!flags.compat && flags.no_writes);
    let threshold = c.srv.config.busy_reply_threshold.max(0) as u64;
    let options = RunOptions {
        verbosity,
        slow_after: (threshold > 0).then(|| std::time::Duration::from_millis(threshold)),
    };
    let mut host = ScriptHost {
        obey: c.cl.must_obey(),
        srv: c.srv,
        client: &mut client,
        read_only,
        allow_oom: !flags.compat && flags.allow_oom,
        oom_at_start: false,
        write_dirty: false,
        read_called: false,
        repl: REPL_AOF | REPL_REPLICA,
        caller_info,
    };
    host.oom_at_start = over_maxmemory(host.srv);
    host.srv.script_run = Some(crate::state::ScriptRun {
        eval: run.eval,
        name: run.name.to_string(),
        argv: run.argv.iter().map(|a| a.to_vec()).collect(),
        started: std::time::Instant::now(),
        write_dirty: false,
        from_master: host.obey,
        killed: false,
        function_counts: run.function_counts,
    });
    body(&mut host, options, &mut c.cl.reply);
    let read_called = host.read_called;
    c.srv.script_run = None;
    // A script that read anything lets a tracking caller cache every key
    // it declared (Redis 7.0 remembers the script caller's keys, not those
    // of the commands inside).
    if read_called && c.cl.tracking.as_ref().is_some_and(|t| t.remembers_reads()) {
        c.srv.tracking_remember_keys(c.cl, run.keys.iter().copied());
    }
    client.reply.clear();
    client.reply.error_codes.clear();
    c.srv.script_client = Some(client);
}

/// The script client's view of the server, for `redis.call`.
struct ScriptHost<'a> {
    srv: &'a mut Server,
    client: &'a mut ClientState,
    /// The caller must be obeyed (our master, the AOF).
    obey: bool,
    /// EVAL_RO, or a script declared `no-writes`.
    read_only: bool,
    /// It ran a read-only command (a tracking caller then caches the
    /// script's declared keys).
    read_called: bool,
    allow_oom: bool,
    /// Over `maxmemory` when the script started.
    oom_at_start: bool,
    /// A write command ran: later writes may not be refused for the
    /// server's state (the script cannot be half applied).
    write_dirty: bool,
    /// Where writes propagate (`redis.set_repl`).
    repl: i32,
    /// The caller's CLIENT LIST line, for the ACL log (None when its user
    /// may run anything).
    caller_info: Option<String>,
}

impl ScriptHost<'_> {
    /// Why a command from the script is refused (Redis's scriptCall checks).
    fn refusal(&mut self, cmd: &'static CommandSpec, argv: &[&[u8]]) -> Option<String> {
        let argc = argv.len() as i32;
        if (cmd.arity > 0 && argc != cmd.arity) || argc < -cmd.arity {
            return Some("Wrong number of args calling Redis command from script".into());
        }
        if cmd.flags & NOSCRIPT != 0 && !self.srv.script_disable_deny {
            return Some("This Redis command is not allowed from script".into());
        }
        let srv = &*self.srv;
        if srv.master.is_syncing() && !srv.config.replica_serve_stale_data && cmd.flags & STALE == 0
        {
            return Some("Can not execute the command on a stale replica".into());
        }
        if let Some(info) = &self.caller_info {
            let lua = crate::state::acl::LogContext::Lua;
            let user = self.client.user;
            if let Err(denial) =
                super::acl::check_user(self.srv, user, cmd, argv, lua, || info.clone())
            {
                return Some(super::acl::script_denial_error(denial));
            }
        }
        let srv = &*self.srv;
        if self.read_only && cmd.flags & (WRITE | MAY_REPLICATE) != 0 {
            return Some("Write commands are not allowed from read-only scripts.".into());
        }
        if cmd.flags & WRITE != 0 && !self.write_dirty {
            if srv.master.target.is_some() && srv.config.replica_read_only && !self.obey {
                return Some("-READONLY You can't write against a read only replica.".into());
            }
            if crate::state::snapshot::writes_refused(srv) {
                return Some(format!("-{ERR_MISCONF}"));
            }
            if let Some(e) = srv.aof_write_error() {
                return Some(format!("-{e}"));
            }
            if !srv.enough_good_replicas() {
                return Some("-NOREPLICAS Not enough good replicas to write.".into());
            }
        }
        if !self.allow_oom
            && !self.obey
            && !self.write_dirty
            && self.oom_at_start
            && cmd.flags & DENYOOM != 0
        {
            return Some(format!("-{ERR_OOM}"));
        }
        None
    }
}

impl Host for ScriptHost<'_> {
    fn call(&mut self, argv: &[&[u8]], resp: u8) -> Result<Vec<u8>, String> {
        // Clients cannot send such an argument (the parser refuses it); a
        // script can build one.
        if argv.iter().any(|a| a.len() > crate::protocol::ARG_LEN_MAX) {
            let e = format!(
                "ERR an argument is longer than {} bytes",
                crate::protocol::ARG_LEN_MAX
            );
            count_script_error(self.srv, &e);
            return Err(e);
        }
        let Some(cmd) = lookup_command(argv[0]).and_then(|base| base.resolve(argv).ok()) else {
            let e = "Unknown Redis command called from script".to_string();
            count_script_error(self.srv, &e);
            return Err(e);
        };
        if let Some(e) = self.refusal(cmd, argv) {
            // Counted now, as Redis's scriptCall does (whether or not the
            // script catches it): an error reply, the command rejected.
            count_script_error(self.srv, &e);
            stats_of(self.srv, cmd).rejected_calls += 1;
            return Err(e);
        }
        if cmd.flags & READONLY != 0 {
            self.read_called = true;
        }
        if cmd.flags & WRITE != 0 {
            self.write_dirty = true;
            if let Some(run) = self.srv.script_run.as_mut() {
                run.write_dirty = true;
            }
        }
        self.client.reply.proto = if resp == 3 {
            Proto::Resp3
        } else {
            Proto::Resp2
        };
        self.client.last_cmd = cmd.name;
        // `redis.set_repl`: REPL_NONE, this command's effects go nowhere;
        // REPL_AOF or REPL_REPLICA, to that consumer only.
        let silent = self.repl & (REPL_AOF | REPL_REPLICA) == 0;
        let to = match self.repl & (REPL_AOF | REPL_REPLICA) {
            REPL_AOF => crate::state::feed::TO_AOF,
            REPL_REPLICA => crate::state::feed::TO_REPLICAS,
            _ => crate::state::feed::TO_ALL,
        };
        if silent {
            self.srv.feed.suspend();
        } else {
            self.srv.feed.set_target(to);
        }
        let errors_before = self.client.reply.errors;
        call(self.srv, self.client, cmd, argv, false);
        if silent {
            self.srv.feed.resume();
        } else {
            self.srv.feed.set_target(crate::state::feed::TO_ALL);
        }
        // The command's own error replies count, as any client's.
        self.srv.stats.total_error_replies += self.client.reply.errors - errors_before;
        self.srv
            .stats
            .count_errors(&mut self.client.reply.error_codes);
        Ok(self.client.reply.take_bytes())
    }

    fn set_repl(&mut self, flags: i32) {
        self.repl = flags;
    }

    fn acl_check_cmd(&self, argv: &[&[u8]]) -> Option<bool> {
        let cmd = lookup_command(argv[0]).and_then(|base| base.resolve(argv).ok())?;
        if self.client.user == crate::state::acl::NO_USER {
            return Some(true);
        }
        let user = self.srv.acl.user(self.client.user);
        Some(super::acl::check_command(user, cmd, argv).is_ok())
    }

    fn interrupt(&mut self) -> Option<&'static str> {
        let stopping = |srv: &Server| {
            srv.shutdown.is_some() || srv.stop_signal.load(std::sync::atomic::Ordering::Relaxed)
        };
        if stopping(self.srv) {
            return Some("Script killed: the server is shutting down");
        }
        if let Some(pump) = self.srv.busy_pump {
            // SAFETY: the event loop set the pump for the command running
            // now (this script) and clears it when the command returns; it
            // touches only the loop's sockets, never `srv`'s borrow here.
            unsafe { (*pump).serve(self.srv) };
        }
        if stopping(self.srv) {
            return Some("Script killed: the server is shutting down");
        }
        self.srv
            .script_run
            .as_ref()
            .filter(|r| r.killed)
            .map(|_| "Script killed by user with SCRIPT KILL...")
    }
}

/// Count an error `redis.call` met before the command ran (Redis's
/// afterErrorReply: the code after a leading `-`, else ERR).
fn count_script_error(srv: &mut Server, e: &str) {
    srv.stats.total_error_replies += 1;
    let code = e
        .strip_prefix('-')
        .map_or("ERR", crate::protocol::reply::error_code);
    srv.stats.count_errors(&mut vec![code.to_string()]);
}

/// SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP
pub fn script(c: &mut Ctx, argv: &[&[u8]]) {
    match subcommand(c) {
        "help" => reply_help(c, SCRIPT_HELP),
        "load" => match c.srv.scripts.create(argv[2]) {
            Ok(sha) => c.cl.reply.bulk(sha.as_bytes()),
            Err(e) => c.cl.reply.error(&e),
        },
        "exists" => {
            c.cl.reply.array(argv.len() - 2);
            for sha in &argv[2..] {
                let found = c.srv.scripts.get(sha).is_some();
                c.cl.reply.int(found as i64);
            }
        }
        "flush" => {
            if argv.len() == 3 && !eq_ic(argv[2], "sync") && !eq_ic(argv[2], "async") {
                return c
                    .cl
                    .reply
                    .error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            if argv.len() > 3 {
                return c
                    .cl
                    .reply
                    .error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            c.srv.scripts.reset();
            c.cl.reply.ok();
        }
        "debug" => {
            if !c.cl.reply.is_empty() {
                return c
                    .cl
                    .reply
                    .error("ERR SCRIPT DEBUG must be called outside a pipeline");
            }
            let mode = if eq_ic(argv[2], "no") {
                LdbMode::Off
            } else if eq_ic(argv[2], "yes") {
                LdbMode::Fork
            } else if eq_ic(argv[2], "sync") {
                LdbMode::Sync
            } else {
                return c.cl.reply.error("ERR Use SCRIPT DEBUG YES/SYNC/NO");
            };
            if mode != LdbMode::Off && c.cl.is_tls {
                // The session reads and writes the socket itself.
                return c
                    .cl
                    .reply
                    .error("ERR SCRIPT DEBUG is not available on TLS connections");
            }
            if mode != LdbMode::Off && c.cl.fd < 0 {
                return c
                    .cl
                    .reply
                    .error("ERR SCRIPT DEBUG needs a client connection");
            }
            c.cl.ldb = mode;
            // The loop takes the socket off io_uring before the EVAL.
            c.cl.ldb_detach = mode != LdbMode::Off;
            c.cl.reply.ok();
        }
        _ => kill_script(c, true),
    }
}

/// SCRIPT KILL (`eval`) and FUNCTION KILL, read while a script runs past
/// `busy-reply-threshold` (Redis's scriptKill).
fn kill_script(c: &mut Ctx, eval: bool) {
    let Some(run) = c.srv.script_run.as_mut() else {
        return c
            .cl
            .reply
            .error("NOTBUSY No scripts in execution right now.");
    };
    if run.from_master {
        return c.cl.reply.error("UNKILLABLE The busy script was sent by a master instance in the context of replication and cannot be killed.");
    }
    if run.write_dirty {
        return c.cl.reply.error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
    }
    if eval && !run.eval {
        return c.cl.reply.error(ERR_BUSY_FUNCTION);
    }
    if !eval && run.eval {
        return c.cl.reply.error(ERR_BUSY_SCRIPT);
    }
    run.killed = true;
    c.cl.reply.ok();
}

/// What other clients get while an EVAL runs too long.
pub const ERR_BUSY_SCRIPT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// What other clients get while a function runs too long.
pub const ERR_BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

/// FCALL function numkeys [key ...] [arg ...]
pub fn fcall(c: &mut Ctx, argv: &[&[u8]]) {
    fcall_generic(c, argv, Mode::ReadWrite);
}

/// FCALL_RO: as FCALL, for functions flagged `no-writes`.
pub fn fcall_ro(c: &mut Ctx, argv: &[&[u8]]) {
    fcall_generic(c, argv, Mode::ReadOnly);
}

/// Redis's fcallCommandGeneric.
fn fcall_generic(c: &mut Ctx, argv: &[&[u8]], mode: Mode) {
    if !c.srv.monitors.is_empty() {
        monitor::feed_monitors(c.srv, c.cl, c.cl.db, argv);
    }
    let Some(flags) = c.srv.functions.get(argv[1]).map(|f| f.flags) else {
        return c.cl.reply.error("ERR Function not found");
    };
    let Some(numkeys) = parse_i64(argv[2]) else {
        return c.cl.reply.error("ERR Bad number of keys provided");
    };
    if numkeys > argv.len() as i64 - 3 {
        return c
            .cl
            .reply
            .error("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return c.cl.reply.error("ERR Number of keys can't be negative");
    }
    if let Err(e) = refused_before_run(c.srv, c.cl, flags, mode) {
        return c.cl.reply.error(&e);
    }
    let name = String::from_utf8_lossy(argv[1]).into_owned();
    let (keys, args) = argv[3..].split_at(numkeys as usize);
    let function_counts = (
        c.srv.functions.library_count(),
        c.srv.functions.function_count(),
    );
    let mut functions = std::mem::replace(
        &mut c.srv.functions,
        crate::scripting::functions::Functions::placeholder(),
    );
    let run = Run {
        eval: false,
        name: &name,
        argv,
        keys,
        function_counts,
    };
    with_script_host(c, flags, mode, run, |host, options, out| {
        functions.call(&name, keys, args, options, host, out)
    });
    c.srv.functions = functions;
}

/// FUNCTION LOAD | DELETE | FLUSH | LIST | STATS | KILL | DUMP | RESTORE | HELP
pub fn function(c: &mut Ctx, argv: &[&[u8]]) {
    use crate::scripting::functions::RestorePolicy;
    let syntax_error = |c: &mut Ctx| subcommand_syntax_error(c, argv, "FUNCTION");
    match subcommand(c) {
        "help" => reply_help(c, FUNCTION_HELP),
        "load" => {
            let mut replace = false;
            for arg in &argv[2..argv.len() - 1] {
                if eq_ic(arg, "replace") {
                    replace = true;
                } else {
                    return c.cl.reply.error(&format!(
                        "ERR Unknown option given: {}",
                        String::from_utf8_lossy(arg)
                    ));
                }
            }
            match c.srv.functions.load(argv[argv.len() - 1], replace) {
                Ok(name) => {
                    c.dirty(1);
                    c.cl.reply.bulk(name.as_bytes());
                }
                Err(e) => c.cl.reply.error(&e),
            }
        }
        "delete" => match c.srv.functions.delete(argv[2]) {
            Ok(()) => {
                c.dirty(1);
                c.cl.reply.ok();
            }
            Err(e) => c.cl.reply.error(&e),
        },
        "flush" => {
            if argv.len() > 3 {
                return syntax_error(c);
            }
            if argv.len() == 3 && !eq_ic(argv[2], "sync") && !eq_ic(argv[2], "async") {
                return c
                    .cl
                    .reply
                    .error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            c.srv.functions.flush();
            c.dirty(1);
            c.cl.reply.ok();
        }
        "list" => function_list(c, argv),
        "stats" => {
            // While an EVAL script runs the stats are refused with the
            // busy error an EVAL gets (Redis's functionStatsCommand).
            if c.srv.script_run.as_ref().is_some_and(|r| r.eval) {
                return c.cl.reply.error(ERR_BUSY_SCRIPT);
            }
            c.cl.reply.map(2);
            c.cl.reply.bulk(b"running_script");
            match c.srv.script_run.as_ref().filter(|r| !r.eval) {
                None => c.cl.reply.null(),
                Some(run) => {
                    c.cl.reply.map(3);
                    c.cl.reply.bulk(b"name");
                    c.cl.reply.bulk(run.name.as_bytes());
                    c.cl.reply.bulk(b"command");
                    c.cl.reply.array(run.argv.len());
                    for a in &run.argv {
                        c.cl.reply.bulk(a);
                    }
                    c.cl.reply.bulk(b"duration_ms");
                    c.cl.reply.int(run.started.elapsed().as_millis() as i64);
                }
            }
            c.cl.reply.bulk(b"engines");
            c.cl.reply.map(1);
            c.cl.reply.bulk(b"LUA");
            c.cl.reply.map(2);
            let (libraries, functions) = match c.srv.script_run.as_ref() {
                Some(run) => run.function_counts,
                None => (
                    c.srv.functions.library_count(),
                    c.srv.functions.function_count(),
                ),
            };
            c.cl.reply.bulk(b"libraries_count");
            c.cl.reply.int(libraries as i64);
            c.cl.reply.bulk(b"functions_count");
            c.cl.reply.int(functions as i64);
        }
        "dump" => {
            let payload = crate::persistence::rdb::functions_payload(
                &c.srv.functions.codes(),
                c.srv.config.rdbcompression,
            );
            c.cl.reply.bulk(&payload);
        }
        "restore" => {
            if argv.len() > 4 {
                return syntax_error(c);
            }
            let policy = match argv.get(3) {
                None => RestorePolicy::Append,
                Some(p) if eq_ic(p, "append") => RestorePolicy::Append,
                Some(p) if eq_ic(p, "replace") => RestorePolicy::Replace,
                Some(p) if eq_ic(p, "flush") => RestorePolicy::Flush,
                Some(_) => {
                    return c.cl.reply.error("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
                }
            };
            let result = crate::persistence::rdb::parse_functions_payload(
                argv[2],
                c.srv.skip_checksum_validation,
            )
            .and_then(|codes| c.srv.functions.restore(&codes, policy));
            match result {
                Ok(()) => {
                    c.dirty(1);
                    c.cl.reply.ok();
                }
                Err(e) => c.cl.reply.error(&e),
            }
        }
        _ => kill_script(c, false),
    }
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
fn function_list(c: &mut Ctx, argv: &[&[u8]]) {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        if !with_code && eq_ic(argv[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && eq_ic(argv[i], "libraryname") {
            if i >= argv.len() - 1 {
                return c.cl.reply.error("ERR library name argument was not given");
            }
            i += 1;
            pattern = Some(argv[i]);
        } else {
            return c.cl.reply.error(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(argv[i])
            ));
        }
        i += 1;
    }
    let functions = &c.srv.functions;
    let libs: Vec<_> = functions
        .libraries()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), true)))
        .collect();
    let out = &mut c.cl.reply;
    out.array(libs.len());
    for lib in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = crate::scripting::functions::flag_names(&f.flags);
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
}

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

/// The flags EVAL, EVALSHA and FCALL (and their `_RO` forms) are checked
/// with before they run: those the script declares, when it declares any
/// (Redis's evalGetCommandFlags and fcallGetCommandFlags), else the
/// command's own.
pub fn script_command_flags(srv: &Server, cmd: &CommandSpec, argv: &[&[u8]]) -> u32 {
    let Some(&first) = argv.get(1) else {
        return cmd.flags;
    };
    let flags = match cmd.name {
        "eval" | "eval_ro" => match srv.scripts.get(crate::util::sha1_hex(first).as_bytes()) {
            Some(script) => Some(script.flags),
            None => crate::scripting::parse_shebang(first).ok().map(|(f, _)| f),
        },
        "evalsha" | "evalsha_ro" => srv.scripts.get(first).map(|s| s.flags),
        "fcall" | "fcall_ro" => srv.functions.get(first).map(|f| f.flags),
        _ => None,
    };
    match flags {
        Some(f) if !f.compat => flags_from_script(cmd.flags, f),
        _ => cmd.flags,
    }
}

/// A command's flags with what a script declares (Redis's
/// scriptFlagsToCmdFlags).
fn flags_from_script(mut flags: u32, script: ScriptFlags) -> u32 {
    flags &= !(STALE | DENYOOM | WRITE);
    if !(script.allow_oom || script.no_writes) {
        flags |= DENYOOM;
    }
    if !script.no_writes {
        flags |= WRITE;
    }
    if script.allow_stale {
        flags |= STALE;
    }
    flags & !MAY_REPLICATE
}
