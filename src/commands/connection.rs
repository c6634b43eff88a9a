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
    c.srv.disable_tracking(c.cl);
    c.cl.db = 0;
    c.cl.reply.proto = Proto::Resp2;
    // CLIENT REPLY OFF and a SKIP still to come end; a SKIP that covers
    // this very command stands (Redis clears REPLY_OFF and SKIP_NEXT only).
    c.cl.reply_off = false;
    c.cl.reply_skip_next = false;
    c.cl.name = None;
    // Back to the default user, logged in when it needs no password.
    super::acl::set_client_user(c.cl, crate::state::acl::DEFAULT_USER, b"default");
    c.cl.authenticated = !c.srv.acl.auth_required();
    c.cl.reply.simple("RESET");
}

const ERR_WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// `AUTH [username] password`
pub fn auth(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 3 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let (user, pass): (&[u8], &[u8]) = if argv.len() == 2 {
        if c.srv.acl.user(crate::state::acl::DEFAULT_USER).nopass {
            return c.cl.reply.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        (b"default", argv[1])
    } else {
        (argv[1], argv[2])
    };
    if super::acl::authenticate(c.srv, c.cl, user, pass, argv[0]) {
        c.cl.reply.ok();
    } else {
        auth_failed(c, user);
    }
}

/// Log (within the log budget) a failed authentication, and answer it.
fn auth_failed(c: &mut Ctx, user: &[u8]) {
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
    // Each option takes effect as it is read, as Redis's: a name set
    // before a bad option or a failed AUTH stays.
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if eq_ic(argv[j], "auth") && more >= 2 {
            let (user, pass) = (argv[j + 1], argv[j + 2]);
            if !super::acl::authenticate(c.srv, c.cl, user, pass, argv[0]) {
                return auth_failed(c, user);
            }
            j += 3;
        } else if eq_ic(argv[j], "setname") && more >= 1 {
            let n = argv[j + 1];
            if !valid_client_name(n) {
                return c.cl.reply.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            c.cl.name = if n.is_empty() { None } else { Some(n.to_vec()) };
            j += 2;
        } else {
            let mut err = b"ERR Syntax error in HELLO option '".to_vec();
            err.extend_from_slice(super::args::c_bytes(argv[j]));
            err.push(b'\'');
            return c.cl.reply.error_bytes(&err);
        }
    }
    if !c.cl.authenticated {
        return c.cl.reply.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
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
    out.bulk(if c.srv.master.target.is_some() {
        b"replica"
    } else {
        b"master"
    });
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
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
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
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
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
            let line = c.cl.info_line_running(argv) + "\n";
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
            // The flag shows in CLIENT LIST (`e`); with client eviction off
            // (maxmemory-clients 0, the only value accepted) it changes
            // nothing else, as in Redis.
            if eq_ic(argv[2], "on") {
                c.cl.no_evict = true;
                c.cl.reply.ok();
            } else if eq_ic(argv[2], "off") {
                c.cl.no_evict = false;
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
        "unblock" if argv.len() <= 4 => super::blocking::client_unblock(c, argv),
        "pause" if argv.len() <= 4 => client_pause(c, argv),
        "unpause" => {
            c.srv.client_pause = None;
            c.cl.reply.ok();
        }
        "tracking" => client_tracking(c, argv),
        "caching" => client_caching(c, argv),
        "getredir" => {
            let redirect = c.cl.tracking.as_ref().map_or(-1, |t| t.redirect as i64);
            c.cl.reply.int(redirect);
        }
        "trackinginfo" => client_trackinginfo(c),
        "unblock" | "pause" => subcommand_syntax_error(c, argv, "CLIENT"),
        _ => client_kill(c, argv),
    }
}

/// `CLIENT PAUSE timeout [WRITE | ALL]` — hold back every command (ALL,
/// the default) or those that may write, for `timeout` milliseconds. A
/// pause already in effect keeps the later end and the stricter mode.
fn client_pause(c: &mut Ctx, argv: &[&[u8]]) {
    let mut all = true;
    if let Some(mode) = argv.get(3) {
        if eq_ic(mode, "write") {
            all = false;
        } else if !eq_ic(mode, "all") {
            return c
                .cl
                .reply
                .error("ERR CLIENT PAUSE mode must be WRITE or ALL");
        }
    }
    let ms = match parse_timeout_ms(argv[2]) {
        Ok(ms) => ms,
        Err(e) => return c.cl.reply.error(e),
    };
    // As Redis: a timeout of 0 is an end of 0, already over.
    let end_ms = if ms > 0 {
        c.srv.now_ms.saturating_add(ms)
    } else {
        0
    };
    // A pause whose end has passed is over (its mode with it), whether or
    // not anything was held by it.
    let now = c.srv.now_ms;
    let pause = match c.srv.client_pause.filter(|p| p.end_ms >= now) {
        Some(p) => crate::state::ClientPause {
            all: p.all || all,
            end_ms: p.end_ms.max(end_ms),
        },
        None => crate::state::ClientPause { all, end_ms },
    };
    c.srv.client_pause = Some(pause);
    c.cl.reply.ok();
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p …] [OPTIN]
/// [OPTOUT] [NOLOOP]` — server-assisted client-side caching, with
/// Redis's checks and errors in Redis's order.
fn client_tracking(c: &mut Ctx, argv: &[&[u8]]) {
    let mut redirect = 0u64;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let a = argv[j];
        if eq_ic(a, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return c
                    .cl
                    .reply
                    .error("ERR A client can only redirect to a single other client");
            }
            let Some(id) = parse_i64(argv[j]) else {
                return c.cl.reply.error(ERR_NOT_INT);
            };
            if id <= 0 || (id as u64 != c.cl.id && c.srv.client_index(id as u64).is_none()) {
                return c
                    .cl
                    .reply
                    .error("ERR The client ID you want redirect to does not exist");
            }
            redirect = id as u64;
        } else if eq_ic(a, "bcast") {
            bcast = true;
        } else if eq_ic(a, "optin") {
            optin = true;
        } else if eq_ic(a, "optout") {
            optout = true;
        } else if eq_ic(a, "noloop") {
            noloop = true;
        } else if eq_ic(a, "prefix") && more {
            j += 1;
            prefixes.push(argv[j]);
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    if eq_ic(argv[2], "off") {
        c.srv.disable_tracking(c.cl);
        return c.cl.reply.ok();
    }
    if !eq_ic(argv[2], "on") {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    if !bcast && !prefixes.is_empty() {
        return c
            .cl
            .reply
            .error("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if let Some(t) = &c.cl.tracking {
        if t.bcast != bcast {
            return c.cl.reply.error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
    }
    if bcast && (optin || optout) {
        return c
            .cl
            .reply
            .error("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if optin && optout {
        return c
            .cl
            .reply
            .error("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if let Some(t) = &c.cl.tracking {
        if (optin && t.optout) || (optout && t.optin) {
            return c.cl.reply.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
        }
    }
    if bcast {
        if let Some(e) = prefix_collision(c.cl.tracking.as_ref(), &prefixes) {
            return c.cl.reply.error(&e);
        }
    }
    let wanted = crate::state::ClientTracking {
        redirect,
        bcast,
        optin,
        optout,
        noloop,
        ..Default::default()
    };
    c.srv.enable_tracking(c.cl, wanted, &prefixes);
    c.cl.reply.ok();
}

/// Redis's checkPrefixCollisionsOrReply: a new prefix may not be a prefix
/// of (or start with) one the client has or another one given.
fn prefix_collision(
    current: Option<&crate::state::ClientTracking>,
    prefixes: &[&[u8]],
) -> Option<String> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    // Redis prints these with %s: a prefix stops at a NUL byte.
    let show = |p: &[u8]| {
        let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
        String::from_utf8_lossy(&p[..end]).to_string()
    };
    // The client's own prefixes never overlap one another, so only the one
    // just before `p` in order (which `p` may start with) and the one just
    // after (which may start with `p`) can overlap it.
    let existing_overlap = |p: &[u8]| {
        let t = current?;
        use std::ops::Bound::{Included, Unbounded};
        let before = t
            .prefixes
            .range::<[u8], _>((Unbounded, Included(p)))
            .next_back();
        let after = t.prefixes.range::<[u8], _>((Included(p), Unbounded)).next();
        before
            .filter(|e| p.starts_with(e))
            .or(after.filter(|e| e.starts_with(p)))
    };
    // Among the new ones, overlapping prefixes sort next to each other: the
    // pairwise search (for Redis's choice of pair) only runs when one exists.
    let mut sorted = prefixes.to_vec();
    sorted.sort_unstable();
    let new_overlap = sorted.windows(2).any(|w| overlap(w[0], w[1]));
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(existing) = existing_overlap(p) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                show(p),
                show(existing)
            ));
        }
        if !new_overlap {
            continue;
        }
        if let Some(other) = prefixes[i + 1..].iter().find(|o| overlap(p, o)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                show(p),
                show(other)
            ));
        }
    }
    None
}

/// `CLIENT CACHING YES|NO` — in OPTIN (YES) or OPTOUT (NO) mode, whether
/// the next command's keys are tracked.
fn client_caching(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(t) = c.cl.tracking.as_mut() else {
        return c.cl.reply.error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if eq_ic(argv[2], "yes") {
        if !t.optin {
            return c.cl.reply.error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if eq_ic(argv[2], "no") {
        if !t.optout {
            return c.cl.reply.error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    t.caching = true;
    c.cl.reply.ok();
}

/// `CLIENT TRACKINGINFO` — flags, redirect and prefixes, as Redis shows
/// them.
fn client_trackinginfo(c: &mut Ctx) {
    let t = c.cl.tracking.clone();
    let out = &mut c.cl.reply;
    out.map(3);
    out.bulk(b"flags");
    let mut flags: Vec<&str> = Vec::new();
    match &t {
        None => flags.push("off"),
        Some(t) => {
            flags.push("on");
            if t.bcast {
                flags.push("bcast");
            }
            if t.optin {
                flags.push("optin");
                if t.caching {
                    flags.push("caching-yes");
                }
            }
            if t.optout {
                flags.push("optout");
                if t.caching {
                    flags.push("caching-no");
                }
            }
            if t.noloop {
                flags.push("noloop");
            }
            if t.broken_redirect {
                flags.push("broken_redirect");
            }
        }
    }
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(t.as_ref().map_or(-1, |t| t.redirect as i64));
    out.bulk(b"prefixes");
    let prefixes: Vec<&Vec<u8>> = t.iter().flat_map(|t| t.prefixes.iter()).collect();
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(p);
    }
}

fn client_list(c: &mut Ctx, argv: &[&[u8]]) {
    // As Redis's clientCommand: `TYPE t` alone, or `ID` and one or more
    // ids (listed in their order, repeated as given; unknown ones skipped).
    let mut ids: Option<Vec<u64>> = None;
    let mut type_filter: Option<&str> = None;
    if argv.len() == 4 && eq_ic(argv[2], "type") {
        let Some(t) = client_type_arg(argv[3]) else {
            return c.cl.reply.error(&format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(argv[3])
            ));
        };
        type_filter = Some(t);
    } else if argv.len() > 3 && eq_ic(argv[2], "id") {
        let mut list = Vec::with_capacity(argv.len() - 3);
        for a in &argv[3..] {
            match parse_i64(a) {
                Some(n) => list.push(n as u64),
                None => return c.cl.reply.error("ERR Invalid client ID"),
            }
        }
        ids = Some(list);
    } else if argv.len() != 2 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let mut text = String::new();
    if let Some(ids) = ids {
        for id in ids {
            let line = if id == c.cl.id {
                c.cl.info_line_running(argv)
            } else {
                match c.srv.client_by_id(id) {
                    Some(other) => other.info_line(),
                    None => continue,
                }
            };
            text.push_str(&line);
            text.push('\n');
        }
        return c.cl.reply.verbatim(text.as_bytes());
    }
    let mut lines: Vec<(u64, String)> = Vec::new();
    let wanted = |st: &ClientState| type_filter.is_none_or(|t| st.type_name() == t);
    if wanted(c.cl) {
        lines.push((c.cl.id, c.cl.info_line_running(argv)));
    }
    for other in c.srv.clients.iter().flatten() {
        if wanted(other) {
            lines.push((other.id, other.info_line()));
        }
    }
    lines.sort_by_key(|(id, _)| *id);
    for (_, line) in lines {
        text.push_str(&line);
        text.push('\n');
    }
    c.cl.reply.verbatim(text.as_bytes());
}

fn client_kill(c: &mut Ctx, argv: &[&[u8]]) {
    let old_form = argv.len() == 3;
    let (mut addr, mut laddr, mut id, mut skipme) = (None, None, None, !old_form);
    let mut type_filter: Option<&str> = None;
    let mut user: Option<&[u8]> = None;
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
                if c.srv.acl.find(v).is_none() {
                    return c.cl.reply.error(&format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(v)
                    ));
                }
                user = Some(v);
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
            && user.is_none_or(|u| *st.user_name == *u && st.user != crate::state::acl::NO_USER)
    };
    let mut killed = 0;
    for (idx, other) in c.srv.clients.iter().enumerate() {
        if let Some(other) = other {
            if matches(other) {
                // The peer sees the connection end now, as Redis frees a
                // killed client at once (a master link killed inside a
                // transaction that then sleeps is gone for the master).
                crate::net::shutdown(other.fd);
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
