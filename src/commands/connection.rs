//! Connection commands: PING, ECHO, QUIT, RESET, AUTH, HELLO, SELECT and
//! CLIENT.

use super::*;
use crate::protocol::Proto;
use crate::REDIS_VERSION;

/// `PING [message]`
pub fn ping(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 2 {
        return c.cl.reply.error(&arity_error("ping"));
    }
    // A RESP2 client in subscribed mode gets its answer in the shape of a
    // message, as Redis does.
    if c.cl.subscriptions() > 0 && !c.cl.reply.is_resp3() {
        c.cl.reply.array(2);
        c.cl.reply.bulk(b"pong");
        c.cl.reply.bulk(argv.get(1).copied().unwrap_or(b""));
    } else if argv.len() == 2 {
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
    // Redis's clearClientConnectionState: no MONITOR, no transaction, no
    // watched keys, no subscriptions (silently), database 0, RESP2.
    if c.cl.monitor {
        c.cl.monitor = false;
        let id = c.cl.id;
        c.srv.monitors.retain(|&m| m != id);
    }
    super::transaction::discard_transaction(c.srv, c.cl);
    super::pubsub::unsubscribe_everything(c.srv, c.cl);
    c.cl.db = 0;
    c.cl.reply.proto = Proto::Resp2;
    c.cl.reply_off = false;
    c.cl.reply_skip = false;
    c.cl.reply_skip_next = false;
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
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "HELP",
    "    Prints this help.",
];

/// The client type a TYPE argument names, as `ClientState::type_name`
/// spells it (`slave` is `replica`).
fn client_type_arg(t: &[u8]) -> Option<&'static str> {
    ["normal", "master", "replica", "pubsub"]
        .into_iter()
        .find(|n| eq_ic(t, n))
        .or_else(|| eq_ic(t, "slave").then_some("replica"))
}

/// `CLIENT ID|INFO|LIST|KILL|GETNAME|SETNAME|NO-EVICT|REPLY|UNBLOCK|HELP`
pub fn client(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
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
        "reply" => {
            // OFF and SKIP answer nothing (the dispatcher drops replies
            // while the flags say so); ON answers +OK.
            if eq_ic(argv[2], "on") {
                c.cl.reply_off = false;
                c.cl.reply_skip = false;
                c.cl.reply_skip_next = false;
                c.cl.reply.ok();
            } else if eq_ic(argv[2], "off") {
                c.cl.reply_off = true;
            } else if eq_ic(argv[2], "skip") {
                if !c.cl.reply_off {
                    c.cl.reply_skip_next = true;
                }
            } else {
                c.cl.reply.error(ERR_SYNTAX);
            }
        }
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
    let mut type_filter: Option<&str> = None;
    let mut j = 2;
    while j < argv.len() {
        if eq_ic(argv[j], "type") && j + 1 < argv.len() {
            let Some(t) = client_type_arg(argv[j + 1]) else {
                return c.cl.reply.error(&format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(argv[j + 1])
                ));
            };
            type_filter = Some(t);
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
    let wanted = |st: &ClientState| type_filter.is_none_or(|t| st.type_name() == t);
    if wanted(c.cl) {
        lines.push((c.cl.id, c.cl.info_line()));
    }
    for other in c.srv.clients.iter().flatten() {
        if wanted(other) {
            lines.push((other.id, other.info_line()));
        }
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
    let mut type_filter: Option<&str> = None;
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
                let Some(t) = client_type_arg(v) else {
                    return c.cl.reply.error(&format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(v)
                    ));
                };
                type_filter = Some(t);
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
            && type_filter.is_none_or(|t| st.type_name() == t)
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
