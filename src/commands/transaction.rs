//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis's multi.c).
//!
//! Between MULTI and EXEC the dispatcher queues commands (copies of their
//! arguments: the query buffer they were parsed from is reused at once) and
//! answers QUEUED; a command refused while queuing (unknown, wrong arity,
//! OOM, …) makes EXEC answer EXECABORT. EXEC runs the queue as one execution
//! unit of the propagation feed, so the AOF and replicas get the writes
//! wrapped in MULTI/EXEC (or a single command unwrapped). WATCHed keys
//! touched since WATCH make EXEC return a null array.

use super::*;
use crate::state::watch::WatchedKey;

/// Queue a command inside MULTI (the dispatcher has checked it): `base` is
/// the table entry EXEC finds it by again, `flags` those it was checked
/// with (EXEC is judged by the union of its commands').
pub fn queue(client: &mut ClientState, base: &'static CommandSpec, argv: &[&[u8]], flags: u32) {
    let Some(m) = client.multi.as_mut() else {
        return;
    };
    // A transaction that EXEC will refuse keeps nothing more (Redis's
    // queueMultiCommand): CLIENT LIST's `multi=` stops counting.
    if m.errored || client.dirty_cas {
        client.reply.simple("QUEUED");
        return;
    }
    let first = m.arg_ends.len();
    for a in argv {
        m.args.extend_from_slice(a);
        m.arg_ends.push(m.args.len());
    }
    m.commands.push((spec_index(base), first..m.arg_ends.len()));
    m.mem = m.args.capacity() + m.arg_ends.capacity() * std::mem::size_of::<usize>();
    m.flags |= flags;
    m.inv_flags |= !flags;
    m.queued += 1;
    client.reply.simple("QUEUED");
}

/// `MULTI`
pub fn multi(c: &mut Ctx, _argv: &[&[u8]]) {
    if c.cl.multi.is_some() {
        return c.cl.reply.error("ERR MULTI calls can not be nested");
    }
    c.cl.multi = Some(std::mem::take(&mut c.cl.spare_multi));
    c.cl.reply.ok();
}

/// `DISCARD`
pub fn discard(c: &mut Ctx, _argv: &[&[u8]]) {
    if c.cl.multi.is_none() {
        return c.cl.reply.error("ERR DISCARD without MULTI");
    }
    discard_transaction(c.srv, c.cl);
    c.cl.reply.ok();
}

/// Forget the queued commands and every watched key.
pub fn discard_transaction(srv: &mut Server, client: &mut ClientState) {
    if let Some(m) = client.multi.take() {
        client.spare_multi = m.recycle();
    }
    srv.unwatch_all(client);
}

/// Has a key watched by `client` expired since it was watched (Redis's
/// isWatchedKeyExpired)? Keys already expired at WATCH time don't count.
fn watched_key_expired(srv: &Server, client: &ClientState) -> bool {
    client.watched.iter().any(|wk| {
        !wk.expired && {
            let d = &srv.dbs[wk.db];
            d.main.get(&wk.key).is_some_and(|e| e.has_expire()) && d.is_expired(&wk.key, srv.now_ms)
        }
    })
}

/// `EXEC`
///
/// ```text
/// EXEC -> array of the queued commands' replies
///       | null array (a watched key changed)
///       | -EXECABORT (a command was refused while queuing)
/// ```
pub fn exec(c: &mut Ctx, _argv: &[&[u8]]) {
    let Some(m) = c.cl.multi.as_mut() else {
        return c.cl.reply.error("ERR EXEC without MULTI");
    };
    // The transaction stays visible (CLIENT LIST `flags=x`, `multi=n`)
    // while its commands run, as in Redis; only the commands move out.
    let errored = m.errored;
    let commands = std::mem::take(&mut m.commands);
    let arg_ends = std::mem::take(&mut m.arg_ends);
    let args = std::mem::take(&mut m.args);
    if errored {
        discard_transaction(c.srv, c.cl);
        return c
            .cl
            .reply
            .error("EXECABORT Transaction discarded because of previous errors.");
    }
    if watched_key_expired(c.srv, c.cl) {
        c.cl.dirty_cas = true;
    }
    if c.cl.dirty_cas {
        discard_transaction(c.srv, c.cl);
        return c.cl.reply.null_array();
    }
    // Unwatch first: the transaction's own writes must not flag this client.
    c.srv.unwatch_all(c.cl);
    c.cl.reply.array(commands.len());
    let denied_before = c.cl.deny_blocking;
    c.cl.deny_blocking = true;
    let in_exec_before = std::mem::replace(&mut c.srv.in_exec, true);
    let mut refs: Vec<&[u8]> = Vec::new();
    let mut commands_buf = commands;
    for (spec, range) in commands_buf.drain(..) {
        refs.clear();
        let mut start = if range.start == 0 {
            0
        } else {
            arg_ends[range.start - 1]
        };
        for &end in &arg_ends[range] {
            refs.push(&args[start..end]);
            start = end;
        }
        // Each queued command passed the dispatcher's checks when it was
        // queued (and EXEC as a whole was checked for OOM and MISCONF).
        let cmd = match COMMANDS[spec].resolve(&refs) {
            Ok(cmd) => cmd,
            // Resolved once already, when it was queued.
            Err(e) => {
                c.cl.reply.error_bytes(&e);
                continue;
            }
        };
        // The rules may have changed since the command was queued.
        let multi = crate::state::acl::LogContext::Multi;
        if let Err(denial) = super::acl::check_client(c.srv, c.cl, cmd, &refs, multi) {
            c.cl.reply.error(&super::acl::exec_denial_error(denial));
            continue;
        }
        call(c.srv, c.cl, cmd, &refs, false);
    }
    c.cl.deny_blocking = denied_before;
    c.srv.in_exec = in_exec_before;
    // Hand the buffers back for the next transaction.
    if let Some(mut m) = c.cl.multi.take() {
        let mut commands = commands_buf;
        commands.clear();
        m.commands = commands;
        m.arg_ends = arg_ends;
        m.args = args;
        c.cl.spare_multi = m.recycle();
    }
}

/// `WATCH key [key ...]`
pub fn watch(c: &mut Ctx, argv: &[&[u8]]) {
    if c.cl.multi.is_some() {
        return c.cl.reply.error("ERR WATCH inside MULTI is not allowed");
    }
    // A client already flagged needs no more watches: EXEC will fail.
    if c.cl.dirty_cas {
        return c.cl.reply.ok();
    }
    let db = c.cl.db;
    for key in &argv[1..] {
        if c.cl.watched.iter().any(|w| w.db == db && w.key == *key) {
            continue;
        }
        let expired = c.srv.dbs[db].main.get(key).is_some_and(|e| e.has_expire())
            && c.srv.dbs[db].is_expired(key, c.srv.now_ms);
        c.srv
            .watched_keys
            .entry((db, key.to_vec()))
            .or_default()
            .push(c.cl.id);
        c.cl.watched.push(WatchedKey {
            db,
            key: key.to_vec(),
            expired,
        });
    }
    c.cl.reply.ok();
}

/// `UNWATCH`
pub fn unwatch(c: &mut Ctx, _argv: &[&[u8]]) {
    c.srv.unwatch_all(c.cl);
    c.cl.reply.ok();
}
