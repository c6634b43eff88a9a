//! Connection and server commands: PING, HELLO, AUTH, SELECT, CLIENT, INFO,
//! CONFIG, COMMAND, DEBUG, FLUSH*, SWAPDB, SHUTDOWN and friends.

use std::fmt::Write as _;
use std::time::Duration;

use super::keys::{encoding_name, reply_help, subcommand};
use super::*;
use crate::config::{find_option, OPTIONS};
use crate::db::FreeMode;
use crate::memory;
use crate::protocol::Proto;
use crate::state::ShutdownMode;
use crate::{KVSTORE_VERSION, REDIS_VERSION};

/// `PING [message]`
pub fn ping(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 2 {
        return c.cl.reply.error(&arity_error("ping"));
    }
    if argv.len() == 2 {
        c.cl.reply.bulk(argv[1]);
    } else {
        c.cl.reply.simple("PONG");
    }
}

/// `ECHO message`
pub fn echo(c: &mut Ctx, argv: &[&[u8]]) {
    c.cl.reply.bulk(argv[1]);
}

/// `QUIT` — OK, then the connection is closed.
pub fn quit(c: &mut Ctx, _argv: &[&[u8]]) {
    c.cl.reply.ok();
    c.cl.close_after_reply = true;
}

/// `RESET` — back to a fresh connection's state.
pub fn reset(c: &mut Ctx, _argv: &[&[u8]]) {
    c.cl.db = 0;
    c.cl.reply.proto = Proto::Resp2;
    c.cl.name = None;
    c.cl.authenticated = c.srv.config.requirepass.is_empty();
    c.cl.reply.simple("RESET");
}

/// Check a password for `user` against `requirepass` (the default user).
fn check_password(c: &Ctx, user: &[u8], pass: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    let required = c.srv.config.requirepass.as_bytes();
    required.is_empty() || required == pass
}

const ERR_WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// `AUTH [username] password`
pub fn auth(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 3 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let (user, pass): (&[u8], &[u8]) = if argv.len() == 2 {
        if c.srv.config.requirepass.is_empty() {
            return c.cl.reply.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        (b"default", argv[1])
    } else {
        (argv[1], argv[2])
    };
    if check_password(c, user, pass) {
        c.cl.authenticated = true;
        c.cl.reply.ok();
    } else {
        auth_failed(c, user);
    }
}

/// Count and log (within the log budget) a failed authentication.
fn auth_failed(c: &mut Ctx, user: &[u8]) {
    c.srv.stats.acl_access_denied_auth += 1;
    if let Some(skipped) = c.srv.log_limits.auth.allow(std::time::Instant::now()) {
        tracing::warn!(
            client = %c.cl.addr,
            "Failed AUTH attempt for user '{}'{}",
            String::from_utf8_lossy(user),
            crate::logging::suppressed_note(skipped)
        );
    }
    c.cl.reply.error(ERR_WRONGPASS);
}

/// Client names may hold only printable ASCII without spaces.
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`
pub fn hello(c: &mut Ctx, argv: &[&[u8]]) {
    let mut ver = 0;
    let mut j = 1;
    if argv.len() >= 2 {
        match parse_i64(argv[1]) {
            Some(v) => ver = v,
            None => {
                return c
                    .cl
                    .reply
                    .error("ERR Protocol version is not an integer or out of range")
            }
        }
        j = 2;
        if !(2..=3).contains(&ver) {
            return c.cl.reply.error("NOPROTO unsupported protocol version");
        }
    }
    let mut creds = None;
    let mut name = None;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if eq_ic(argv[j], "auth") && more >= 2 {
            creds = Some((argv[j + 1], argv[j + 2]));
            j += 3;
        } else if eq_ic(argv[j], "setname") && more >= 1 {
            name = Some(argv[j + 1]);
            j += 2;
        } else {
            return c.cl.reply.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(argv[j])
            ));
        }
    }
    if let Some((user, pass)) = creds {
        if !check_password(c, user, pass) {
            return auth_failed(c, user);
        }
        c.cl.authenticated = true;
    }
    if !c.cl.authenticated {
        return c.cl.reply.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = name {
        if !valid_client_name(n) {
            return c
                .cl
                .reply
                .error("ERR Client names cannot contain spaces, newlines or special characters.");
        }
        c.cl.name = if n.is_empty() { None } else { Some(n.to_vec()) };
    }
    if ver == 3 {
        c.cl.reply.proto = Proto::Resp3;
    } else if ver == 2 {
        c.cl.reply.proto = Proto::Resp2;
    }
    let out = &mut c.cl.reply;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if out.is_resp3() { 3 } else { 2 });
    out.bulk(b"id");
    out.int(c.cl.id as i64);
    let out = &mut c.cl.reply;
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
}

/// A database index as SWAPDB takes it: `msg` for a non-integer or
/// out-of-int-range argument, as Redis's getIntFromObjectOrReply does.
fn parse_db_index(c: &Ctx, arg: &[u8], msg: &'static str) -> Result<usize, &'static str> {
    let n = parse_i64(arg)
        .filter(|n| *n >= i32::MIN as i64 && *n <= i32::MAX as i64)
        .ok_or(msg)?;
    if n < 0 || n as usize >= c.srv.dbs.len() {
        return Err(ERR_DB_INDEX);
    }
    Ok(n as usize)
}

/// `SELECT index`
pub fn select(c: &mut Ctx, argv: &[&[u8]]) {
    match super::keys::db_index_arg(c, argv[1]) {
        Ok(i) => {
            c.cl.db = i;
            c.cl.reply.ok();
        }
        Err(e) => c.cl.reply.error(e),
    }
}

/// `SWAPDB index1 index2`
pub fn swapdb(c: &mut Ctx, argv: &[&[u8]]) {
    let a = match parse_db_index(c, argv[1], "ERR invalid first DB index") {
        Ok(a) => a,
        Err(e) => return c.cl.reply.error(e),
    };
    let b = match parse_db_index(c, argv[2], "ERR invalid second DB index") {
        Ok(b) => b,
        Err(e) => return c.cl.reply.error(e),
    };
    if a != b {
        c.srv.dbs.swap(a, b);
        c.srv.dbs[a].id = a;
        c.srv.dbs[b].id = b;
    }
    c.dirty(1);
    c.cl.reply.ok();
}

/// `DBSIZE`
pub fn dbsize(c: &mut Ctx, _argv: &[&[u8]]) {
    let n = c.srv.dbs[c.cl.db].len();
    c.cl.reply.int(n as i64);
}

/// Parse the optional ASYNC|SYNC of FLUSHDB/FLUSHALL; without it,
/// `lazyfree-lazy-user-flush` decides.
fn flush_flags(c: &Ctx, argv: &[&[u8]]) -> Result<FreeMode, &'static str> {
    match argv.len() {
        1 => Ok(FreeMode::lazy_if(c.srv.config.lazyfree_lazy_user_flush)),
        2 if eq_ic(argv[1], "sync") => Ok(FreeMode::Sync),
        2 if eq_ic(argv[1], "async") => Ok(FreeMode::Lazy),
        _ => Err(ERR_SYNTAX),
    }
}

/// `FLUSHDB [ASYNC | SYNC]` — ASYNC swaps in an empty table at once and
/// leaves freeing the old one to the lazyfree thread.
pub fn flushdb(c: &mut Ctx, argv: &[&[u8]]) {
    let mode = match flush_flags(c, argv) {
        Ok(m) => m,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let n = c.srv.dbs[db].len() as u64;
    c.srv.dbs[db].clear_with(mode);
    c.dirty(n);
    c.force_propagation();
    c.cl.reply.ok();
}

/// `FLUSHALL [ASYNC | SYNC]`
pub fn flushall(c: &mut Ctx, argv: &[&[u8]]) {
    let mode = match flush_flags(c, argv) {
        Ok(m) => m,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut n = 0;
    for d in &mut c.srv.dbs {
        n += d.len() as u64;
        d.clear_with(mode);
    }
    // Like Redis: a running background save is stale now, and with save
    // points configured the (empty) dataset is saved right away.
    crate::state::snapshot::kill_child(c.srv);
    if !crate::state::snapshot::save_points(c.srv).is_empty() {
        let _ = crate::state::snapshot::save(c.srv);
    }
    c.dirty(n + 1);
    c.cl.reply.ok();
}

/// `TIME` — seconds and microseconds.
pub fn time(c: &mut Ctx, _argv: &[&[u8]]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    c.cl.reply.array(2);
    c.cl.reply.bulk(now.as_secs().to_string().as_bytes());
    c.cl.reply.bulk(now.subsec_micros().to_string().as_bytes());
}

/// `SAVE` — write the snapshot now (blocking, as in Redis).
pub fn save(c: &mut Ctx, _argv: &[&[u8]]) {
    match crate::state::snapshot::save(c.srv) {
        Ok(()) => c.cl.reply.ok(),
        Err(e) if e.contains("in progress") => c.cl.reply.error(&format!("ERR {e}")),
        Err(_) => c.cl.reply.error("ERR"),
    }
}

/// `BGSAVE [SCHEDULE]` — snapshot in a forked child while the loop serves.
pub fn bgsave(c: &mut Ctx, argv: &[&[u8]]) {
    let schedule = match argv.len() {
        1 => false,
        2 if eq_ic(argv[1], "schedule") => true,
        _ => return c.cl.reply.error(ERR_SYNTAX),
    };
    if c.srv.snapshot.child.is_some() {
        if schedule {
            c.srv.snapshot.scheduled = true;
            return c.cl.reply.simple("Background saving scheduled");
        }
        return c.cl.reply.error("ERR Background save already in progress");
    }
    match crate::state::snapshot::bgsave(c.srv) {
        Ok(()) => c.cl.reply.simple("Background saving started"),
        Err(e) => c.cl.reply.error(&format!("ERR {e}")),
    }
}

/// `LASTSAVE` — Unix time of the last successful save (startup until then).
pub fn lastsave(c: &mut Ctx, _argv: &[&[u8]]) {
    c.cl.reply.int(c.srv.lastsave_unix);
}

// ---- CLIENT ----

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "HELP",
    "    Prints this help.",
];

fn client_type_known(t: &[u8]) -> bool {
    ["normal", "master", "replica", "slave", "pubsub"]
        .iter()
        .any(|n| eq_ic(t, n))
}

/// `CLIENT ID|INFO|LIST|KILL|GETNAME|SETNAME|NO-EVICT|HELP`
pub fn client(c: &mut Ctx, argv: &[&[u8]]) {
    let subs = [
        ("id", 2),
        ("info", 2),
        ("list", -2),
        ("kill", -3),
        ("getname", 2),
        ("setname", 3),
        ("no-evict", 3),
        ("unblock", -3),
        ("help", 2),
    ];
    let Some(sub) = subcommand(c, argv, &subs) else {
        return;
    };
    match sub {
        "help" => reply_help(c, CLIENT_HELP),
        "id" => c.cl.reply.int(c.cl.id as i64),
        "info" => {
            let line = c.cl.info_line() + "\n";
            c.cl.reply.verbatim(line.as_bytes());
        }
        "getname" => match c.cl.name.clone() {
            Some(n) => c.cl.reply.bulk(&n),
            None => c.cl.reply.null(),
        },
        "setname" => {
            let n = argv[2];
            if !valid_client_name(n) {
                return c.cl.reply.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            c.cl.name = if n.is_empty() { None } else { Some(n.to_vec()) };
            c.cl.reply.ok();
        }
        "no-evict" => {
            if eq_ic(argv[2], "on") || eq_ic(argv[2], "off") {
                c.cl.reply.ok();
            } else {
                c.cl.reply.error(ERR_SYNTAX);
            }
        }
        "list" => client_list(c, argv),
        "unblock" => {
            if argv.len() > 4 {
                return c.cl.reply.error(&arity_error("client|unblock"));
            }
            super::blocking::client_unblock(c, argv)
        }
        _ => client_kill(c, argv),
    }
}

fn client_list(c: &mut Ctx, argv: &[&[u8]]) {
    let mut ids: Option<Vec<u64>> = None;
    let mut j = 2;
    while j < argv.len() {
        if eq_ic(argv[j], "type") && j + 1 < argv.len() {
            if !client_type_known(argv[j + 1]) {
                return c.cl.reply.error(&format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(argv[j + 1])
                ));
            }
            // Every client is a normal client until replication exists.
            if !eq_ic(argv[j + 1], "normal") {
                ids = Some(Vec::new());
            }
            j += 2;
        } else if eq_ic(argv[j], "id") && j + 1 < argv.len() {
            let mut list = Vec::new();
            j += 1;
            while j < argv.len() {
                match parse_i64(argv[j]) {
                    Some(n) if n > 0 => list.push(n as u64),
                    _ => return c.cl.reply.error("ERR Invalid client ID"),
                }
                j += 1;
            }
            ids = Some(list);
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    let mut text = String::new();
    let mut lines: Vec<(u64, String)> = Vec::new();
    lines.push((c.cl.id, c.cl.info_line()));
    for other in c.srv.clients.iter().flatten() {
        lines.push((other.id, other.info_line()));
    }
    lines.sort_by_key(|(id, _)| *id);
    for (id, line) in lines {
        if let Some(ids) = &ids {
            if !ids.contains(&id) {
                continue;
            }
        }
        text.push_str(&line);
        text.push('\n');
    }
    c.cl.reply.verbatim(text.as_bytes());
}

fn client_kill(c: &mut Ctx, argv: &[&[u8]]) {
    let old_form = argv.len() == 3;
    let (mut addr, mut laddr, mut id, mut skipme) = (None, None, None, !old_form);
    let mut type_filter: Option<bool> = None; // Some(true): matches normal clients
    if old_form {
        addr = Some(argv[2]);
    } else {
        let mut i = 2;
        while i < argv.len() {
            let more = i + 1 < argv.len();
            if !more {
                return c.cl.reply.error(ERR_SYNTAX);
            }
            let v = argv[i + 1];
            if eq_ic(argv[i], "id") {
                match parse_i64(v) {
                    Some(n) if n >= 1 => id = Some(n as u64),
                    _ => return c.cl.reply.error("ERR client-id should be greater than 0"),
                }
            } else if eq_ic(argv[i], "type") {
                if !client_type_known(v) {
                    return c.cl.reply.error(&format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(v)
                    ));
                }
                type_filter = Some(eq_ic(v, "normal"));
            } else if eq_ic(argv[i], "addr") {
                addr = Some(v);
            } else if eq_ic(argv[i], "laddr") {
                laddr = Some(v);
            } else if eq_ic(argv[i], "user") {
                if v != b"default" {
                    return c.cl.reply.error(&format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(v)
                    ));
                }
            } else if eq_ic(argv[i], "skipme") {
                if eq_ic(v, "yes") {
                    skipme = true;
                } else if eq_ic(v, "no") {
                    skipme = false;
                } else {
                    return c.cl.reply.error(ERR_SYNTAX);
                }
            } else {
                return c.cl.reply.error(ERR_SYNTAX);
            }
            i += 2;
        }
    }
    let matches = |st: &crate::state::ClientState| -> bool {
        addr.is_none_or(|a| a == st.addr.as_bytes())
            && laddr.is_none_or(|a| a == st.laddr.as_bytes())
            && id.is_none_or(|i| i == st.id)
            && type_filter.unwrap_or(true)
    };
    let mut killed = 0;
    for (idx, other) in c.srv.clients.iter().enumerate() {
        if let Some(other) = other {
            if matches(other) {
                c.srv.to_close.push((idx, other.id));
                killed += 1;
            }
        }
    }
    let kill_self = !skipme && matches(c.cl);
    if kill_self {
        killed += 1;
    }
    if old_form {
        if killed == 0 {
            c.cl.reply.error("ERR No such client");
        } else {
            c.cl.reply.ok();
        }
    } else {
        c.cl.reply.int(killed);
    }
    if kill_self {
        c.cl.close_after_reply = true;
    }
}

// ---- CONFIG ----

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// `CONFIG GET|SET|RESETSTAT|REWRITE|HELP`
pub fn config(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(sub) = subcommand(
        c,
        argv,
        &[
            ("get", -3),
            ("set", -4),
            ("resetstat", 2),
            ("rewrite", 2),
            ("help", 2),
        ],
    ) else {
        return;
    };
    match sub {
        "help" => reply_help(c, CONFIG_HELP),
        "get" => {
            let mut pairs: Vec<(String, String)> = Vec::new();
            let mut seen: Vec<&str> = Vec::new();
            for pattern in &argv[2..] {
                let literal = !pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
                for opt in OPTIONS {
                    for name in std::iter::once(opt.name).chain(opt.alias) {
                        if seen.contains(&name) {
                            continue;
                        }
                        if glob_match(pattern, name.as_bytes(), true) {
                            seen.push(name);
                            // A literal name is echoed as the client typed it.
                            let shown = if literal {
                                String::from_utf8_lossy(pattern).into_owned()
                            } else {
                                name.to_string()
                            };
                            pairs.push((shown, (opt.get)(&c.srv.config)));
                        }
                    }
                }
            }
            c.cl.reply.map(pairs.len());
            for (n, v) in pairs {
                c.cl.reply.bulk(n.as_bytes());
                c.cl.reply.bulk(v.as_bytes());
            }
        }
        "set" => config_set(c, argv),
        "resetstat" => {
            c.srv.stats = Default::default();
            c.cl.reply.ok();
        }
        _ => match c.srv.config.rewrite() {
            Ok(()) => c.cl.reply.ok(),
            Err(e) => {
                tracing::warn!("CONFIG REWRITE failed: {e}");
                c.cl.reply.error(&format!("ERR {e}"));
            }
        },
    }
}

fn config_set(c: &mut Ctx, argv: &[&[u8]]) {
    if !argv.len().is_multiple_of(2) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let backup = c.srv.config.clone();
    let mut seen: Vec<&str> = Vec::new();
    for pair in argv[2..].chunks(2) {
        let name = String::from_utf8_lossy(pair[0]).to_string();
        let Some(opt) = find_option(&name) else {
            c.srv.config = backup;
            return c.cl.reply.error(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        };
        let fail = |why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
        };
        if seen.contains(&opt.name) {
            c.srv.config = backup;
            return c.cl.reply.error(&fail("duplicate parameter"));
        }
        seen.push(opt.name);
        if !opt.mutable {
            c.srv.config = backup;
            return c.cl.reply.error(&fail("can't set immutable config"));
        }
        // Protected configs decide where the server writes files: only
        // where `enable-protected-configs` lets this client change them.
        if opt.protected && !backup.enable_protected_configs.allows(c.cl.is_local) {
            c.srv.config = backup;
            return c.cl.reply.error(&fail("can't set protected config"));
        }
        let value = String::from_utf8_lossy(pair[1]).to_string();
        if let Err(why) = (opt.set)(&mut c.srv.config, &value) {
            c.srv.config = backup;
            return c.cl.reply.error(&fail(&why));
        }
    }
    // Like Redis's chdir: the directory must exist; nothing is created.
    if c.srv.config.dir != backup.dir {
        if let Err(e) = std::env::set_current_dir(&c.srv.config.dir) {
            let msg = format!(
                "ERR CONFIG SET failed (possibly related to argument 'dir') - {}",
                crate::config::os_error_text(&e)
            );
            c.srv.config = backup;
            return c.cl.reply.error(&msg);
        }
    }
    // A new port is listened on before the reply (Redis's changeListenPort):
    // a port that cannot be bound leaves everything as it was.
    if c.srv.config.port != backup.port {
        match crate::net::bind_tcp_listeners(&c.srv.config) {
            Ok(listeners) => c.srv.new_tcp_listeners = Some(listeners),
            Err(e) => {
                tracing::warn!("Failed listening on port {}: {e}", c.srv.config.port);
                c.srv.config = backup;
                return c.cl.reply.error(
                    "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.",
                );
            }
        }
    }
    c.srv.apply_lazyfree_config();
    if c.srv.config.loglevel != backup.loglevel {
        crate::logging::set_level(&c.srv.config.loglevel);
    }
    c.cl.reply.ok();
}

// ---- INFO ----

fn info_section_server(srv: &crate::state::Server, out: &mut String) {
    let uptime = srv.start.elapsed().as_secs();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let uname = uname();
    let _ = write!(
        out,
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nkvstore_version:{KVSTORE_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{uname}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{now_us}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\n",
        std::process::id(),
        srv.run_id,
        srv.config.port,
        uptime / 86400,
        srv.config.hz,
        srv.config.hz,
        lru_clock(srv.now_ms),
        srv.executable,
        srv.config.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
    );
}

fn uname() -> String {
    // SAFETY: uname fills a zeroed struct.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let f = |s: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(s.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

fn info_section_clients(srv: &crate::state::Server, out: &mut String) {
    let _ = write!(
        out,
        "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:{}\r\nclient_recent_max_output_buffer:{}\r\nblocked_clients:{}\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n",
        srv.connected_clients,
        srv.config.maxclients,
        srv.recent_max_input,
        srv.recent_max_output,
        srv.blocked_clients,
    );
}

fn info_section_memory(srv: &mut crate::state::Server, out: &mut String) {
    let stats = memory::allocator_stats();
    let used = stats.allocated;
    if used > srv.peak_memory {
        srv.peak_memory = used;
    }
    let rss = memory::rss_bytes();
    let peak = srv.peak_memory;
    let overhead: usize = srv
        .dbs
        .iter()
        .map(|d| d.main.overhead_bytes() + d.expires.overhead_bytes())
        .sum::<usize>()
        + srv
            .clients
            .iter()
            .flatten()
            .map(|c| c.qbuf_len + c.qbuf_free + c.reply.buf.capacity())
            .sum::<usize>();
    let dataset = used.saturating_sub(overhead);
    let total = memory::total_system_memory();
    let frag = if used > 0 {
        rss as f64 / used as f64
    } else {
        0.0
    };
    let h = memory::bytes_to_human;
    let _ = write!(
        out,
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\nused_memory_startup:0\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{}\r\nallocator_active:{}\r\nallocator_resident:{}\r\ntotal_system_memory:{total}\r\ntotal_system_memory_human:{}\r\nused_memory_lua:0\r\nused_memory_vm_eval:0\r\nused_memory_lua_human:0B\r\nused_memory_scripts_eval:0\r\nnumber_of_cached_scripts:0\r\nnumber_of_functions:0\r\nnumber_of_libraries:0\r\nused_memory_vm_functions:0\r\nused_memory_vm_total:0\r\nused_memory_vm_total_human:0B\r\nused_memory_functions:0\r\nused_memory_scripts:0\r\nused_memory_scripts_human:0B\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:{}\r\nmem_fragmentation_ratio:{frag:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:0\r\nmem_replication_backlog:0\r\nmem_total_replication_buffers:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:0\r\nmem_cluster_links:0\r\nmem_aof_buffer:0\r\nmem_allocator:jemalloc-5.3.0\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
        h(used),
        h(rss),
        h(peak),
        if peak > 0 { used as f64 * 100.0 / peak as f64 } else { 0.0 },
        if used > 0 { dataset as f64 * 100.0 / used as f64 } else { 0.0 },
        stats.allocated,
        stats.active,
        stats.resident,
        h(total),
        srv.config.maxmemory,
        h(srv.config.maxmemory as usize),
        srv.config.maxmemory_policy,
        if stats.allocated > 0 { stats.active as f64 / stats.allocated as f64 } else { 0.0 },
        stats.active.saturating_sub(stats.allocated),
        if stats.active > 0 { stats.resident as f64 / stats.active as f64 } else { 0.0 },
        stats.resident.saturating_sub(stats.active),
        if stats.resident > 0 { rss as f64 / stats.resident as f64 } else { 0.0 },
        rss as i64 - stats.resident as i64,
        rss as i64 - used as i64,
        crate::db::lazyfree::pending_objects(),
        crate::db::lazyfree::freed_objects(),
    );
}

/// The loading_* fields INFO shows while a dump loads.
fn loading_fields(srv: &crate::state::Server) -> String {
    let Some(l) = &srv.loading else {
        return String::new();
    };
    let total = l.map.len().max(1);
    let done = l.state.loaded_bytes();
    let elapsed = l.state.started().elapsed().as_secs_f64();
    let perc = done as f64 * 100.0 / total as f64;
    let eta = if done > 0 {
        (elapsed * (total - done) as f64 / done as f64) as u64
    } else {
        1
    };
    let start = crate::util::unix_time_ms() / 1000 - elapsed as i64;
    format!("loading_start_time:{start}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:0\r\nloading_loaded_bytes:{done}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n")
}

fn info_section_persistence(srv: &crate::state::Server, out: &mut String) {
    let _ = write!(
        out,
        "# Persistence\r\nloading:{}\r\nasync_loading:0\r\n{}current_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_rewrites_consecutive_failures:0\r\naof_last_write_status:ok\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
        srv.loading.is_some() as u8,
        loading_fields(srv),
        srv.dirty,
        srv.snapshot.child.is_some() as u8,
        srv.lastsave_unix,
        if srv.snapshot.last_bgsave_ok { "ok" } else { "err" },
        srv.snapshot.last_bgsave_secs,
        srv.snapshot.child.map_or(-1, |(_, t)| t.elapsed().as_secs() as i64),
        srv.snapshot.saves,
        srv.rdb_last_load_expired,
        srv.rdb_last_load_keys,
    );
}

fn info_section_stats(srv: &crate::state::Server, out: &mut String) {
    let s = &srv.stats;
    let _ = write!(
        out,
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\nexpired_keys:{}\r\nexpired_stale_perc:{:.2}\r\nexpired_time_cap_reached_count:{}\r\nexpire_cycle_cpu_milliseconds:{}\r\nevicted_keys:{}\r\nevicted_clients:0\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:0\r\npubsub_patterns:0\r\npubsubshard_channels:0\r\nlatest_fork_usec:{}\r\ntotal_forks:{}\r\nmigrate_cached_sockets:0\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:0\r\ntracking_total_items:0\r\ntracking_total_prefixes:0\r\nunexpected_error_replies:0\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\nacl_access_denied_auth:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n",
        s.total_connections_received,
        s.total_commands_processed,
        s.inst_ops.rate().round() as u64,
        s.total_net_input_bytes,
        s.total_net_output_bytes,
        s.inst_input.rate() / 1024.0,
        s.inst_output.rate() / 1024.0,
        s.rejected_connections,
        s.expired_keys,
        s.expired_stale_perc * 100.0,
        s.expired_time_cap_reached_count,
        s.expire_cycle_cpu_ms,
        s.evicted_keys,
        s.keyspace_hits,
        s.keyspace_misses,
        srv.snapshot.latest_fork_usec,
        srv.snapshot.saves,
        s.total_error_replies,
        s.total_reads_processed,
        s.total_writes_processed,
        s.acl_access_denied_auth,
        s.client_output_buffer_limit_disconnections,
    );
}

fn info_section_replication(srv: &crate::state::Server, out: &mut String) {
    let _ = write!(
        out,
        "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
        srv.replid
    );
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills a zeroed struct.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        (t(ru.ru_stime), t(ru.ru_utime))
    }
}

fn info_section_cpu(out: &mut String) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    let (tsys, tuser) = rusage(libc::RUSAGE_THREAD);
    let _ = write!(
        out,
        "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\nused_cpu_user_children:{cuser:.6}\r\nused_cpu_sys_main_thread:{tsys:.6}\r\nused_cpu_user_main_thread:{tuser:.6}\r\n"
    );
}

fn info_section_keyspace(srv: &crate::state::Server, out: &mut String) {
    out.push_str("# Keyspace\r\n");
    for d in &srv.dbs {
        if !d.is_empty() {
            let _ = write!(
                out,
                "db{}:keys={},expires={},avg_ttl={}\r\n",
                d.id,
                d.len(),
                d.expires.len(),
                d.avg_ttl
            );
        }
    }
}

/// Build the INFO text for the requested sections (Redis's genRedisInfoString).
pub fn info_string(srv: &mut crate::state::Server, sections: &[&[u8]]) -> String {
    let defaults = [
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "cpu",
        "modules",
        "errorstats",
        "cluster",
        "keyspace",
    ];
    let mut wanted: Vec<String> = Vec::new();
    if sections.is_empty() {
        wanted = defaults.iter().map(|s| s.to_string()).collect();
    }
    for s in sections {
        let s = String::from_utf8_lossy(s).to_ascii_lowercase();
        match s.as_str() {
            "all" | "everything" | "default" => {
                for d in defaults {
                    if !wanted.iter().any(|w| w == d) {
                        wanted.push(d.to_string());
                    }
                }
                if s != "default" && !wanted.iter().any(|w| w == "commandstats") {
                    wanted.push("commandstats".into());
                }
            }
            _ => {
                if !wanted.contains(&s) {
                    wanted.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    for section in &defaults {
        if !wanted.iter().any(|w| w == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        match *section {
            "server" => info_section_server(srv, &mut out),
            "clients" => info_section_clients(srv, &mut out),
            "memory" => info_section_memory(srv, &mut out),
            "persistence" => info_section_persistence(srv, &mut out),
            "stats" => info_section_stats(srv, &mut out),
            "replication" => info_section_replication(srv, &mut out),
            "cpu" => info_section_cpu(&mut out),
            "modules" => out.push_str("# Modules\r\n"),
            "errorstats" => {
                out.push_str("# Errorstats\r\n");
                for (code, count) in &srv.stats.errorstats {
                    let _ = write!(out, "errorstat_{code}:count={count}\r\n");
                }
            }
            "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            _ => info_section_keyspace(srv, &mut out),
        }
    }
    out
}

/// `INFO [section ...]`
pub fn info(c: &mut Ctx, argv: &[&[u8]]) {
    let text = info_string(c.srv, &argv[1..]);
    c.cl.reply.verbatim(text.as_bytes());
}

// ---- COMMAND ----

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

fn reply_command_info(c: &mut Ctx, spec: &CommandSpec) {
    let out = &mut c.cl.reply;
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(spec.arity as i64);
    let flags: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(f, _)| spec.flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    out.int(spec.first_key as i64);
    out.int(spec.last_key as i64);
    out.int(spec.step as i64);
    let cats = spec.acl_categories();
    out.set(cats.len());
    for cat in cats {
        out.simple(cat);
    }
    out.set(0);
    out.array(0);
    out.array(0);
}

fn reply_command_docs(c: &mut Ctx, spec: &CommandSpec) {
    let out = &mut c.cl.reply;
    out.bulk(spec.name.as_bytes());
    out.map(4);
    out.bulk(b"summary");
    out.bulk(spec.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(spec.since.as_bytes());
    out.bulk(b"group");
    out.bulk(spec.group.as_bytes());
    out.bulk(b"complexity");
    out.bulk(spec.complexity.as_bytes());
}

/// `COMMAND [COUNT | LIST | INFO name… | DOCS name… | GETKEYS cmd… | HELP]`
pub fn command(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() == 1 {
        c.cl.reply.array(COMMANDS.len());
        for spec in COMMANDS {
            reply_command_info(c, spec);
        }
        return;
    }
    let subs = [
        ("count", 2),
        ("list", -2),
        ("info", -2),
        ("docs", -2),
        ("getkeys", -4),
        ("getkeysandflags", -4),
        ("help", 2),
    ];
    let Some(sub) = subcommand(c, argv, &subs) else {
        return;
    };
    match sub {
        "help" => reply_help(c, COMMAND_HELP),
        "count" => c.cl.reply.int(COMMANDS.len() as i64),
        "list" => {
            let mut names: Vec<&str> = COMMANDS.iter().map(|s| s.name).collect();
            if argv.len() > 2 {
                if argv.len() != 5 || !eq_ic(argv[2], "filterby") {
                    return c.cl.reply.error(ERR_SYNTAX);
                }
                let v = argv[4];
                if eq_ic(argv[3], "pattern") {
                    names.retain(|n| glob_match(v, n.as_bytes(), true));
                } else if eq_ic(argv[3], "aclcat") {
                    let cat = String::from_utf8_lossy(v).to_ascii_lowercase();
                    names.retain(|n| {
                        lookup_command(n.as_bytes())
                            .is_some_and(|s| s.acl_categories().iter().any(|c| c[1..] == cat))
                    });
                } else if eq_ic(argv[3], "module") {
                    names.clear();
                } else {
                    return c.cl.reply.error(ERR_SYNTAX);
                }
            }
            c.cl.reply.array(names.len());
            for n in names {
                c.cl.reply.bulk(n.as_bytes());
            }
        }
        "info" => {
            if argv.len() == 2 {
                c.cl.reply.array(COMMANDS.len());
                for spec in COMMANDS {
                    reply_command_info(c, spec);
                }
                return;
            }
            c.cl.reply.array(argv.len() - 2);
            for name in &argv[2..] {
                match lookup_command(name) {
                    Some(spec) => reply_command_info(c, spec),
                    None => c.cl.reply.null_array(),
                }
            }
        }
        "docs" => {
            let specs: Vec<&CommandSpec> = if argv.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                argv[2..].iter().filter_map(|n| lookup_command(n)).collect()
            };
            c.cl.reply.map(specs.len());
            for spec in specs {
                reply_command_docs(c, spec);
            }
        }
        _ => {
            let Some(spec) = lookup_command(argv[2]) else {
                return c.cl.reply.error("ERR Invalid command specified");
            };
            let args = &argv[2..];
            let argc = args.len() as i32;
            if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
                return c
                    .cl
                    .reply
                    .error("ERR Invalid number of arguments specified for command");
            }
            let pos = spec.key_positions(args.len());
            if pos.is_empty() {
                return c.cl.reply.error("ERR The command has no key arguments");
            }
            let flags_too = sub == "getkeysandflags";
            c.cl.reply.array(pos.len());
            for p in pos {
                if flags_too {
                    c.cl.reply.array(2);
                    c.cl.reply.bulk(args[p]);
                    let f = if spec.flags & WRITE != 0 {
                        ["RW", "update"]
                    } else {
                        ["RO", "access"]
                    };
                    c.cl.reply.set(2);
                    c.cl.reply.simple(f[0]);
                    c.cl.reply.simple(f[1]);
                } else {
                    c.cl.reply.bulk(args[p]);
                }
            }
        }
    }
}

// ---- DEBUG ----

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "OBJECT <key>",
    "    Show low level info about the key and associated value.",
    "RELOAD",
    "    Save the RDB on disk and reload it back to memory.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HELP",
    "    Prints this help.",
];

/// `DEBUG SLEEP|SET-ACTIVE-EXPIRE|OBJECT|HELP`
pub fn debug(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(sub) = subcommand(
        c,
        argv,
        &[
            ("help", 2),
            ("sleep", 3),
            ("set-active-expire", 3),
            ("object", 3),
            ("reload", -2),
        ],
    ) else {
        return;
    };
    match sub {
        "help" => reply_help(c, DEBUG_HELP),
        "sleep" => {
            // DEBUG SLEEP is defined to block the server; it is a test tool.
            let secs = String::from_utf8_lossy(argv[2])
                .trim()
                .parse::<f64>()
                .unwrap_or(0.0);
            if secs > 0.0 && secs.is_finite() {
                std::thread::sleep(Duration::from_secs_f64(secs.min(86_400.0)));
            }
            c.cl.reply.ok();
        }
        "reload" => {
            // Save, empty the databases, load the file back.
            use crate::persistence::rdb;
            use crate::state::snapshot;
            if let Err(e) = snapshot::save(c.srv) {
                return c
                    .cl
                    .reply
                    .error(&format!("ERR Error trying to save the DB: {e}"));
            }
            for d in &mut c.srv.dbs {
                d.clear();
            }
            let path = c.srv.config.dir.join(&c.srv.config.dbfilename);
            let opts = rdb::LoadOptions::from_config(&c.srv.config);
            match rdb::load_file(&mut c.srv.dbs, &opts, &path) {
                Ok(_) => c.cl.reply.ok(),
                Err(e) => {
                    c.cl.reply
                        .error(&format!("ERR Error trying to load the RDB dump: {e}"))
                }
            }
        }
        "set-active-expire" => {
            c.srv.active_expire_enabled = parse_i64(argv[2]).unwrap_or(0) != 0;
            c.cl.reply.ok();
        }
        _ => {
            let db = c.cl.db;
            let Some(e) = c.srv.dbs[db].main.get(argv[2]) else {
                return c.cl.reply.error(ERR_NO_SUCH_KEY);
            };
            let size = e.heap_size();
            let encoding = encoding_name(e);
            let idle = {
                let now = lru_clock(c.srv.now_ms) as i64;
                let lru = e.lru() as i64;
                if now >= lru {
                    now - lru
                } else {
                    now + (LRU_CLOCK_MAX as i64 - lru)
                }
            };
            let text = format!(
                "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
                e as *const _, encoding, size, e.lru(), idle
            );
            c.cl.reply.simple(&text);
        }
    }
}

// ---- MODULE ----

const MODULE_HELP: &[&str] = &[
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
    "HELP",
    "    Prints this help.",
];

/// `MODULE LIST|LOAD|LOADEX|UNLOAD|HELP` — kvstore loads no Redis modules
/// (their API is Redis's C internals): the list is empty and a load fails
/// as a failed load does in Redis, with the reason in the log. Only where
/// `enable-module-command` allows it at all.
pub fn module(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(sub) = subcommand(
        c,
        argv,
        &[
            ("help", 2),
            ("list", 2),
            ("load", -3),
            ("loadex", -3),
            ("unload", 3),
        ],
    ) else {
        return;
    };
    match sub {
        "help" => reply_help(c, MODULE_HELP),
        "list" => c.cl.reply.array(0),
        "unload" => {
            c.cl.reply
                .error("ERR Error unloading module: no such module with that name")
        }
        _ => {
            tracing::warn!(
                "Module {} failed to load: kvstore does not load Redis modules",
                String::from_utf8_lossy(argv[2])
            );
            c.cl.reply
                .error("ERR Error loading the extension. Please check the server logs.");
        }
    }
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`
pub fn shutdown(c: &mut Ctx, argv: &[&[u8]]) {
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for a in &argv[1..] {
        if eq_ic(a, "nosave") {
            nosave = true;
        } else if eq_ic(a, "save") {
            save = true;
        } else if eq_ic(a, "now") || eq_ic(a, "force") {
        } else if eq_ic(a, "abort") {
            abort = true;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    if (nosave && save) || (abort && argv.len() > 2) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    if abort {
        return c.cl.reply.error("ERR No shutdown in progress.");
    }
    use crate::state::snapshot;
    let want_save = !nosave && (save || !snapshot::save_points(c.srv).is_empty());
    if want_save {
        snapshot::kill_child(c.srv);
        if snapshot::save(c.srv).is_err() {
            return c
                .cl
                .reply
                .error("ERR Errors trying to SHUTDOWN. Check logs.");
        }
    }
    // Saved above (or not wanted): the loop only has to stop.
    c.srv.shutdown = Some(ShutdownMode::NoSave);
    // No reply: the connection closes as the server exits.
    c.cl.close_asap = true;
}
