//! MIGRATE: keys moved (or copied) to another instance as RESTORE commands
//! carrying DUMP payloads, over a kept connection, as Redis's migrateCommand.

use std::time::Duration;

use super::*;
use crate::state::migrate::SocketError;

/// Append a RESP bulk string.
fn push_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", bytes.len()).as_bytes());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Append a RESP command.
fn push_command(out: &mut Vec<u8>, argv: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for a in argv {
        push_bulk(out, a);
    }
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]`
pub fn migrate(c: &mut Ctx, argv: &[&[u8]]) {
    let (mut copy, mut replace) = (false, false);
    let (mut username, mut password): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    let (mut first_key, mut num_keys) = (3, 1);
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if eq_ic(argv[j], "copy") {
            copy = true;
        } else if eq_ic(argv[j], "replace") {
            replace = true;
        } else if eq_ic(argv[j], "auth") {
            if more == 0 {
                return c.cl.reply.error(ERR_SYNTAX);
            }
            j += 1;
            password = Some(argv[j]);
        } else if eq_ic(argv[j], "auth2") {
            if more < 2 {
                return c.cl.reply.error(ERR_SYNTAX);
            }
            username = Some(argv[j + 1]);
            password = Some(argv[j + 2]);
            j += 2;
        } else if eq_ic(argv[j], "keys") {
            if !argv[3].is_empty() {
                return c.cl.reply.error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
            }
            first_key = j + 1;
            num_keys = argv.len() - j - 1;
            break;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let (Some(timeout), Some(dbid)) = (parse_i64(argv[5]), parse_i64(argv[4])) else {
        return c.cl.reply.error(ERR_NOT_INT);
    };
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let db = c.cl.db;
    // Keys that are here; when none is, nothing is sent (+NOKEY, not an
    // error: they often just expired meanwhile).
    let keys: Vec<&[u8]> = argv[first_key..first_key + num_keys]
        .iter()
        .copied()
        .filter(|k| lookup::lookup_read(c.srv, db, k).is_some())
        .collect();
    if keys.is_empty() {
        return c.cl.reply.simple("NOKEY");
    }
    let host = String::from_utf8_lossy(argv[1]).into_owned();
    let port = String::from_utf8_lossy(argv[2]).into_owned();
    let mut may_retry = true;
    loop {
        let (now_secs, rand) = (c.srv.now_ms / 1000, c.srv.rng.next_u64());
        let Some(socket) = c
            .srv
            .migrate_sockets
            .get(&host, &port, timeout, now_secs, rand)
        else {
            return c
                .cl
                .reply
                .error("IOERR error or timeout connecting to the client");
        };
        let select = socket.last_dbid != dbid;
        let mut cmd = Vec::new();
        if let Some(pw) = password {
            match username {
                Some(user) => push_command(&mut cmd, &[b"AUTH", user, pw]),
                None => push_command(&mut cmd, &[b"AUTH", pw]),
            }
        }
        if select {
            push_command(&mut cmd, &[b"SELECT", dbid.to_string().as_bytes()]);
        }
        // One RESTORE per key still alive, with what is left of its TTL.
        let now_ms = crate::util::unix_time_ms();
        let compress = c.srv.config.rdbcompression;
        let mut sent: Vec<&[u8]> = Vec::new();
        for &key in &keys {
            let mut ttl = 0;
            if let Some(at) = c.srv.dbs[db].get_expire(key) {
                ttl = at - now_ms;
                if ttl < 0 {
                    continue;
                }
                ttl = ttl.max(1);
            }
            let Some(entry) = c.srv.dbs[db].main.get(key) else {
                continue;
            };
            let payload = crate::persistence::rdb::dump_payload(entry, compress);
            let ttl = ttl.to_string();
            let mut restore: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
            if replace {
                restore.push(b"REPLACE");
            }
            push_command(&mut cmd, &restore);
            sent.push(key);
        }
        // The connection just kept (the payloads were built meanwhile).
        let Some(socket) = c
            .srv
            .migrate_sockets
            .get(&host, &port, timeout, now_secs, rand)
        else {
            return c
                .cl
                .reply
                .error("IOERR error or timeout connecting to the client");
        };
        // The exchange: every command written, then a reply line for each.
        let mut failure: Option<(bool, SocketError)> = None;
        let mut auth_reply = Vec::new();
        let mut select_reply = Vec::new();
        if let Err(e) = socket.write_all(&cmd, timeout) {
            failure = Some((true, e));
        }
        if failure.is_none() && password.is_some() {
            match socket.read_line(timeout) {
                Ok(line) => auth_reply = line,
                Err(e) => failure = Some((false, e)),
            }
        }
        if failure.is_none() && select {
            match socket.read_line(timeout) {
                Ok(line) => select_reply = line,
                Err(e) => failure = Some((false, e)),
            }
        }
        if failure.is_none() {
            let mut target_error = false;
            let mut socket_error: Option<SocketError> = None;
            let mut acked: Vec<&[u8]> = Vec::new();
            let mut read = 0;
            for &key in &sent {
                let line = match socket.read_line(timeout) {
                    Ok(line) => line,
                    Err(e) => {
                        socket_error = Some(e);
                        break;
                    }
                };
                read += 1;
                let error = [&auth_reply, &select_reply, &line]
                    .into_iter()
                    .find(|l| l.first() == Some(&b'-'));
                if let Some(error) = error {
                    if !target_error {
                        socket.last_dbid = -1;
                        target_error = true;
                        c.cl.reply.error(&format!(
                            "ERR Target instance replied with error: {}",
                            String::from_utf8_lossy(&error[1..])
                        ));
                    }
                } else if !copy {
                    acked.push(key);
                }
            }
            // Nothing was taken and the connection failed at once (a kept
            // connection the target closed): once more on a new one.
            if let Some(e) = socket_error {
                if !target_error && read == 0 && may_retry && !e.timed_out {
                    c.srv.migrate_sockets.close(&host, &port);
                    may_retry = false;
                    continue;
                }
                c.srv.migrate_sockets.close(&host, &port);
            } else if !target_error {
                socket.last_dbid = dbid;
            }
            // Keys the target acknowledged leave here, and go as DEL to
            // the AOF and replicas.
            if !acked.is_empty() {
                let mut del = vec![b"DEL".to_vec()];
                for key in &acked {
                    c.srv.dbs[db].delete(key);
                    c.modified(key, NotifyFlags::GENERIC, "del");
                    c.dirty(1);
                    del.push(key.to_vec());
                }
                c.propagate_as(del);
            }
            if target_error {
                return;
            }
            if socket_error.is_some() {
                return c
                    .cl
                    .reply
                    .error("IOERR error or timeout reading to target instance");
            }
            return c.cl.reply.ok();
        }
        // Nothing acknowledged: drop the connection, and try once more on
        // a new one unless time ran out.
        c.srv.migrate_sockets.close(&host, &port);
        let (write_error, e) = failure.expect("a failure");
        if !e.timed_out && may_retry {
            may_retry = false;
            continue;
        }
        let what = if write_error { "writing" } else { "reading" };
        return c
            .cl
            .reply
            .error(&format!("IOERR error or timeout {what} to target instance"));
    }
}
