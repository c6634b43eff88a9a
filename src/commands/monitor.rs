//! MONITOR: every command the server runs, as Redis's replicationFeedMonitors
//! shows it: `+<unix time.usec> [<db> <client>] "arg" "arg"…`, arguments
//! quoted and escaped like `sdscatrepr`, secrets redacted.

use super::*;
use crate::state::ClientKind;

/// `MONITOR`
pub fn monitor(c: &mut Ctx, _argv: &[&[u8]]) {
    if c.cl.deny_blocking {
        return c
            .cl
            .reply
            .error("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    // A replica or an existing monitor: ignored, as in Redis.
    if c.cl.monitor || c.cl.kind != ClientKind::Normal {
        return;
    }
    c.cl.monitor = true;
    c.srv.monitors.push(c.cl.id);
    c.cl.reply.ok();
}

/// Arguments MONITOR and SLOWLOG must not show (Redis's
/// redactClientCommandArgument): AUTH's, HELLO's AUTH pair, and
/// MIGRATE's AUTH password and AUTH2 pair.
pub fn redacted(cmd: &str, argv: &[&[u8]], i: usize) -> bool {
    match cmd {
        "migrate" => {
            let mut j = 6;
            while j < argv.len() && !eq_ic(argv[j], "keys") {
                if eq_ic(argv[j], "auth") {
                    if i == j + 1 {
                        return true;
                    }
                    j += 2;
                } else if eq_ic(argv[j], "auth2") {
                    if i == j + 1 || i == j + 2 {
                        return true;
                    }
                    j += 3;
                } else {
                    j += 1;
                }
            }
            false
        }
        "auth" => i >= 1,
        "acl|setuser" => i >= 2,
        // CONFIG SET of a password or the user name for the master.
        "config|set" => {
            i >= 3
                && (i - 3).is_multiple_of(2)
                && [
                    "requirepass",
                    "masterauth",
                    "masteruser",
                    "tls-key-file-pass",
                    "tls-client-key-file-pass",
                ]
                .iter()
                .any(|name| eq_ic(argv[i - 1], name))
        }
        "hello" => argv
            .iter()
            .position(|a| eq_ic(a, "auth"))
            .is_some_and(|at| at >= 2 && (i == at + 1 || i == at + 2)),
        _ => false,
    }
}

/// Show a command to every monitor.
pub fn feed_monitors(srv: &mut Server, client: &ClientState, db: usize, argv: &[&[u8]]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut line = format!("+{}.{:06} ", now.as_secs(), now.subsec_micros()).into_bytes();
    if client.is_unix {
        line.extend_from_slice(format!("[{db} unix:{}] ", srv.config.unixsocket).as_bytes());
    } else {
        line.extend_from_slice(format!("[{db} {}] ", client.addr).as_bytes());
    }
    let name = client.last_cmd;
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        if redacted(name, argv, i) {
            crate::util::cat_repr(&mut line, b"(redacted)");
        } else {
            crate::util::cat_repr(&mut line, a);
        }
    }
    line.extend_from_slice(b"\r\n");
    for i in 0..srv.monitors.len() {
        let id = srv.monitors[i];
        if id == client.id {
            // A monitor sees its own commands too, after their replies
            // (it is out of the client table while it runs one).
            srv.self_pushes.extend_from_slice(&line);
            continue;
        }
        if let Some(slot) = srv.client_index(id) {
            // As any reply: queued, and bound by the monitor's (replica
            // class) output-buffer limit.
            srv.push_output(slot, id, &line);
        }
    }
}
