//! Blocking commands: how a client waits for a key, inside the event loop.
//!
//! A blocking command that finds no data records what it waits for in the
//! client (`Blocked`: database, keys, its own argv, deadline), queues the
//! client id under each key in the order clients blocked, and sends nothing.
//! After every command that changed the keyspace, `serve_blocked` looks at
//! the keys someone waits for; for each key that now holds data it re-runs
//! the waiting clients' commands, first come first served, until the data is
//! gone. Deadlines sit in an ordered set that the loop checks before it
//! sleeps (and it never sleeps past the earliest one), so timeouts have
//! millisecond resolution; no thread, no busy wait.

use std::time::{Duration, Instant};

use super::*;
use crate::db::Value;
use crate::state::{Blocked, ClientState};

/// Parse a blocking timeout in seconds (decimals allowed, computed in long
/// double as Redis's `getTimeoutFromObjectOrReply`); `None` = forever.
pub fn parse_timeout(arg: &[u8], now: Instant) -> Result<Option<Instant>, &'static str> {
    use crate::util::{ld_scaled_ceil, LongDoubleError};
    let ms = match ld_scaled_ceil(arg, 1000.0) {
        Ok(ms) => ms,
        Err(LongDoubleError::NotAFloat) => {
            return Err("ERR timeout is not a float or out of range")
        }
        // Redis 7.0 converts an infinite or huge timeout to a negative integer.
        Err(LongDoubleError::OutOfRange) => return Err("ERR timeout is negative"),
    };
    if ms < 0 {
        return Err("ERR timeout is negative");
    }
    if ms == 0 {
        return Ok(None);
    }
    Ok(Some(
        now + Duration::from_millis(ms.min(1_000_000_000_000_000) as u64),
    ))
}

/// Block the calling client on `keys` (no reply now). On a retry the client
/// is already blocked and stays as it is.
pub fn block(c: &mut Ctx, keys: &[&[u8]], deadline: Option<Instant>, argv: &[&[u8]]) {
    if c.retry || c.cl.blocked.is_some() {
        return;
    }
    // Inside EXEC a blocking command answers at once as if it timed out
    // (BLMOVE and BRPOPLPUSH with a null bulk, as Redis does).
    if c.cl.deny_blocking {
        if matches!(c.cmd.name, "blmove" | "brpoplpush") {
            c.cl.reply.null();
        } else {
            c.cl.reply.null_array();
        }
        return;
    }
    let db = c.cl.db;
    let id = c.cl.id;
    for k in keys {
        let queue = c.srv.blocked_keys.entry((db, k.to_vec())).or_default();
        if !queue.contains(&id) {
            queue.push_back(id);
        }
    }
    if let Some(d) = deadline {
        c.srv.block_deadlines.insert((d, id));
    }
    c.srv.blocked_clients += 1;
    c.cl.blocked = Some(Blocked {
        db,
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        argv: argv.iter().map(|a| a.to_vec()).collect(),
        deadline,
        zset: c.cmd.name.starts_with("bz"),
        stream: false,
        postponed: false,
        wait: None,
        shutdown: false,
    });
}

/// The shared shape of BLMPOP and BZMPOP (`timeout numkeys key … <where>
/// [COUNT n]`): try the non-blocking `pop`, which replies nothing when
/// every key is empty, and block on the keys in that case.
pub fn block_mpop(
    c: &mut Ctx,
    argv: &[&[u8]],
    side_ok: fn(&[u8]) -> bool,
    pop: fn(&mut Ctx, &MpopArgs, bool),
) {
    // numkeys, the side and COUNT are checked before the timeout, as Redis
    // parses them before its blocking pop reads the timeout.
    let args = match parse_mpop(&argv[1..], side_ok) {
        Ok(a) => a,
        Err(e) => return c.cl.reply.error(e),
    };
    let deadline = match parse_timeout(argv[1], Instant::now()) {
        Ok(d) => d,
        Err(e) => return c.cl.reply.error(e),
    };
    let before = c.cl.reply.len();
    pop(c, &args, true);
    if c.cl.reply.len() == before {
        block(c, &args.keys, deadline, argv);
    }
}

/// A blocked command ends unserved (timed out, CLIENT UNBLOCK): it counts
/// as a call, failed when it was answered with an error, and the error
/// counts as any client's (Redis's updateStatsOnUnblock).
fn account_unserved(srv: &mut Server, st: &mut ClientState, failed: bool) {
    let Some(b) = st.blocked.as_ref() else { return };
    if b.postponed || b.shutdown {
        return;
    }
    let argv: Vec<&[u8]> = b.argv.iter().map(|a| a.as_slice()).collect();
    let Some(cmd) = argv
        .first()
        .and_then(|name| lookup_command(name))
        .and_then(|base| base.resolve(&argv).ok())
    else {
        return;
    };
    let stats = stats_of(srv, cmd);
    stats.calls += 1;
    if failed {
        stats.failed_calls += 1;
        srv.stats.total_error_replies += 1;
        srv.stats.count_errors(&mut st.reply.error_codes);
        st.errors_accounted = st.reply.errors;
    }
}

/// Forget that `st` is blocked (served, timed out, unblocked or closed).
pub fn unblock(srv: &mut Server, st: &mut ClientState) {
    let Some(b) = st.blocked.take() else { return };
    // Its command ends now, and `timeout` counts from here: counted from
    // the blocking command, a cron tick between the reply and the turn's
    // writes closed the client and lost the reply. The turn's time, not a
    // fresh read: this may run inside EXEC (REPLICAOF unblocks everyone),
    // whose commands all run at one time.
    st.last_interaction = srv.now_instant;
    for k in b.keys {
        let slot = (b.db, k);
        if let Some(q) = srv.blocked_keys.get_mut(&slot) {
            q.retain(|&id| id != st.id);
            if q.is_empty() {
                srv.blocked_keys.remove(&slot);
            }
        }
    }
    if let Some(d) = b.deadline {
        srv.block_deadlines.remove(&(d, st.id));
    }
    if b.postponed {
        srv.postponed.retain(|&id| id != st.id);
    }
    if b.wait.is_some() {
        srv.repl.waiting.retain(|&id| id != st.id);
    }
    srv.blocked_clients -= 1;
}

/// Hold a client's command back until CLIENT PAUSE ends (Redis's
/// BLOCKED_POSTPONE): nothing is replied, its later input waits in the
/// query buffer.
pub fn postpone(srv: &mut Server, client: &mut ClientState, argv: &[&[u8]]) {
    srv.postponed.push(client.id);
    srv.blocked_clients += 1;
    client.blocked = Some(Blocked {
        db: client.db,
        keys: Vec::new(),
        argv: argv.iter().map(|a| a.to_vec()).collect(),
        deadline: None,
        zset: false,
        stream: false,
        postponed: true,
        wait: None,
        shutdown: false,
    });
}

/// Once the pause is over, run the postponed commands from scratch, in
/// the order they arrived (each may be refused, or held again by a newer
/// pause), and let their clients go on with their input.
pub fn resume_postponed(srv: &mut Server) {
    if srv.postponed.is_empty() || srv.clients_paused().is_some() {
        return;
    }
    srv.client_pause = None;
    for id in std::mem::take(&mut srv.postponed) {
        rerun_postponed(srv, id);
    }
}

/// Unblock a postponed client and run its command again.
fn rerun_postponed(srv: &mut Server, id: u64) {
    let Some((slot, mut client)) = srv.take_client(id) else {
        return;
    };
    // Taken, not copied: `unblock` does not need it (a postponed SET of a
    // big value is not copied again).
    let argv = client
        .blocked
        .as_mut()
        .map(|b| std::mem::take(&mut b.argv))
        .unwrap_or_default();
    unblock(srv, &mut client);
    if !argv.is_empty() {
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        execute_with(srv, &mut client, &refs, false);
    }
    srv.unblocked.push((slot, id));
    srv.clients[slot] = Some(client);
}

/// What a blocked client waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    List,
    ZSet,
    Stream,
}

fn want_of(b: &Blocked) -> Want {
    if b.stream {
        Want::Stream
    } else if b.zset {
        Want::ZSet
    } else {
        Want::List
    }
}

/// Does `key` hold data a client waiting for `want` can take? A stream
/// waiter looks again when the stream was signalled (new entries, a
/// group destroyed) or the key no longer holds a stream.
fn has_data(srv: &Server, db: usize, key: &[u8], want: Want) -> bool {
    match (srv.dbs[db].main.get(key).map(|e| e.value()), want) {
        (Some(crate::db::ValueRef::Boxed(Value::List(l))), Want::List) => !l.is_empty(),
        (Some(crate::db::ValueRef::Boxed(Value::ZSet(z))), Want::ZSet) => !z.is_empty(),
        (Some(crate::db::ValueRef::Boxed(Value::Stream(_))), Want::Stream) => srv
            .ready_streams
            .iter()
            .any(|(d, k)| *d == db && k.as_slice() == key),
        (_, Want::Stream) => true,
        _ => false,
    }
}

/// Every kind of waiter, in the order a ready key serves them.
const WANTS: [Want; 3] = [Want::List, Want::ZSet, Want::Stream];

/// The kinds of waiter the key can serve now, in the order tried.
fn ready_wants(srv: &Server, db: usize, key: &[u8]) -> Vec<Want> {
    WANTS
        .into_iter()
        .filter(|&w| has_data(srv, db, key, w))
        .collect()
}

/// Serve clients blocked on keys that now hold data, in blocking order.
pub fn serve_blocked(srv: &mut Server) {
    // As Redis's handleClientsBlockedOnKeys: keys expire against the time
    // now, not the time the command that readied them started (a MULTI
    // with DEBUG SLEEP can outlive a key it pushed to).
    srv.update_time();
    loop {
        let mut progress = false;
        let can_serve = |srv: &Server, (db, k): &(usize, Vec<u8>)| {
            WANTS.iter().any(|&w| has_data(srv, *db, k, w))
        };
        // The keys written, in the order written; then any other key that
        // can serve its waiters now.
        let mut ready: Vec<(usize, Vec<u8>)> = std::mem::take(&mut srv.ready_keys)
            .into_iter()
            .filter(|s| srv.blocked_keys.contains_key(s) && can_serve(srv, s))
            .collect();
        let written = ready.len();
        for slot in srv.blocked_keys.keys() {
            if can_serve(srv, slot) && !ready[..written].contains(slot) {
                ready.push(slot.clone());
            }
        }
        // Stream waiters are re-run once per signal.
        let signalled = std::mem::take(&mut srv.ready_streams);
        for (db, key) in ready {
            let slot_key = (db, key.clone());
            let wants = {
                let mut w = ready_wants(srv, db, &key);
                // A signalled stream: every waiter there gets one look.
                if signalled.contains(&slot_key) && !w.contains(&Want::Stream) {
                    w.push(Want::Stream);
                }
                w
            };
            for want in wants {
                if want == Want::Stream {
                    progress |= serve_stream_waiters(srv, &slot_key);
                    continue;
                }
                while let Some(queue) = srv.blocked_keys.get(&slot_key) {
                    // The first waiter in line for the kind of value the key holds.
                    let waiting_for = |id: &u64| {
                        srv.client_index(*id)
                            .and_then(|s| srv.clients.get(s))
                            .and_then(|c| c.as_ref())
                            .and_then(|c| c.blocked.as_ref())
                            .is_some_and(|b| want_of(b) == want)
                    };
                    let Some(id) = queue.iter().copied().find(waiting_for) else {
                        break;
                    };
                    if !has_data(srv, db, &key, want) {
                        break;
                    }
                    match rerun_blocked(srv, id, &slot_key) {
                        Some(true) => progress = true,
                        Some(false) => break,
                        None => continue,
                    }
                }
            }
        }
        if !progress && srv.ready_streams.is_empty() {
            break;
        }
    }
}

/// Give every client waiting on a stream key one look, in blocking order
/// (each may take entries, or find the ones it wants already gone to a
/// group mate). Whether any was served.
fn serve_stream_waiters(srv: &mut Server, slot_key: &(usize, Vec<u8>)) -> bool {
    let waiting: Vec<u64> = srv
        .blocked_keys
        .get(slot_key)
        .map(|q| q.iter().copied().collect())
        .unwrap_or_default();
    let mut progress = false;
    for id in waiting {
        let is_stream_waiter = srv
            .client_index(id)
            .and_then(|s| srv.clients.get(s))
            .and_then(|c| c.as_ref())
            .and_then(|c| c.blocked.as_ref())
            .is_some_and(|b| b.stream);
        if is_stream_waiter && rerun_blocked(srv, id, slot_key) == Some(true) {
            progress = true;
        }
    }
    progress
}

/// Run a blocked client's command again: Some(served), None when the
/// client is gone (dropped from the queue).
fn rerun_blocked(srv: &mut Server, id: u64, slot_key: &(usize, Vec<u8>)) -> Option<bool> {
    let Some(slot) = srv.client_index(id) else {
        if let Some(q) = srv.blocked_keys.get_mut(slot_key) {
            q.retain(|&x| x != id);
        }
        return None;
    };
    let mut client = srv.clients.get_mut(slot).and_then(|c| c.take())?;
    let argv = client
        .blocked
        .as_ref()
        .map(|b| b.argv.clone())
        .unwrap_or_default();
    let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let before = client.reply.len();
    execute_with(srv, &mut client, &refs, true);
    let served = client.reply.len() != before;
    if served {
        unblock(srv, &mut client);
        srv.unblocked.push((slot, id));
    }
    srv.clients[slot] = Some(client);
    Some(served)
}

/// Answer clients whose timeout passed with the null reply Redis sends
/// (the clock is read only when some client waits with a timeout).
pub fn expire_blocked(srv: &mut Server) {
    if srv.block_deadlines.is_empty() {
        return;
    }
    let now = Instant::now();
    while let Some(&(deadline, id)) = srv.block_deadlines.first() {
        if deadline > now {
            break;
        }
        srv.block_deadlines.remove(&(deadline, id));
        let Some((slot, mut client)) = srv.take_client(id) else {
            continue;
        };
        reply_timed_out(srv, &mut client);
        account_unserved(srv, &mut client, false);
        unblock(srv, &mut client);
        srv.unblocked.push((slot, id));
        srv.clients[slot] = Some(client);
    }
}

/// A blocked client's reply when its timeout passes, or CLIENT UNBLOCK
/// says so (Redis's replyToBlockedClientTimedOut): WAIT answers how many
/// replicas got there in time, the others a null array.
fn reply_timed_out(srv: &Server, client: &mut ClientState) {
    match client.blocked.as_ref().and_then(|b| b.wait) {
        Some((offset, _)) => client.reply.int(srv.replicas_acked(offset)),
        None => client.reply.null_array(),
    }
}

/// `CLIENT UNBLOCK client-id [TIMEOUT | ERROR]` — 1 if the client was blocked.
pub fn client_unblock(c: &mut Ctx, argv: &[&[u8]]) {
    let mut error = false;
    if argv.len() == 4 {
        if eq_ic(argv[3], "timeout") {
            error = false;
        } else if eq_ic(argv[3], "error") {
            error = true;
        } else {
            return c
                .cl
                .reply
                .error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        }
    }
    let id = match arg_i64(argv[2]) {
        Ok(i) => i as u64,
        Err(e) => return c.cl.reply.error(e),
    };
    let Some(slot) = c.srv.client_index(id) else {
        return c.cl.reply.int(0);
    };
    let Some(mut target) = c.srv.clients.get_mut(slot).and_then(|t| t.take()) else {
        return c.cl.reply.int(0);
    };
    // A client waiting in SHUTDOWN waits for the shutdown, not a timeout;
    // one held by CLIENT PAUSE has no timeout either: its command runs
    // once the pause ends (an error now would be a second reply to it;
    // Redis 7.0 crashes here).
    if target
        .blocked
        .as_ref()
        .is_some_and(|b| b.shutdown || b.postponed)
    {
        c.srv.clients[slot] = Some(target);
        return c.cl.reply.int(0);
    }
    let was_blocked = target.blocked.is_some();
    if was_blocked {
        if error {
            target
                .reply
                .error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            reply_timed_out(c.srv, &mut target);
        }
        account_unserved(c.srv, &mut target, error);
        unblock(c.srv, &mut target);
        c.srv.unblocked.push((slot, id));
    }
    c.srv.clients[slot] = Some(target);
    c.cl.reply.int(was_blocked as i64);
}

/// `WAIT numreplicas timeout` — the number of replicas that acknowledged
/// this client's writes, waiting up to `timeout` ms (0: forever) for
/// `numreplicas` of them.
pub fn wait(c: &mut Ctx, argv: &[&[u8]]) {
    if c.srv.master.target.is_some() {
        return c.cl.reply.error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let Some(numreplicas) = parse_i64(argv[1]) else {
        return c.cl.reply.error(ERR_NOT_INT);
    };
    let ms = match parse_timeout_ms(argv[2]) {
        Ok(ms) => ms,
        Err(e) => return c.cl.reply.error(e),
    };
    // Writes of this turn go into the stream now, so the offset covers them.
    if c.srv.repl.writers.contains(&c.cl.id) {
        c.srv.flush_feed();
        c.cl.woff = c.srv.repl.offset;
    }
    let offset = c.cl.woff;
    let acked = c.srv.replicas_acked(offset);
    if acked >= numreplicas || c.cl.multi.is_some() || c.cl.deny_blocking {
        return c.cl.reply.int(acked);
    }
    let id = c.cl.id;
    let deadline = (ms > 0).then(|| Instant::now() + Duration::from_millis(ms as u64));
    if let Some(d) = deadline {
        c.srv.block_deadlines.insert((d, id));
    }
    c.srv.blocked_clients += 1;
    c.srv.repl.waiting.push(id);
    c.srv.repl.want_acks = true;
    c.cl.blocked = Some(Blocked {
        db: c.cl.db,
        keys: Vec::new(),
        argv: Vec::new(),
        deadline,
        zset: false,
        stream: false,
        postponed: false,
        wait: Some((offset, numreplicas)),
        shutdown: false,
    });
}

/// SHUTDOWN: the client waits, without a reply, for the loop to shut the
/// server down (or to cancel it: `cancel_shutdown` answers then).
pub fn block_for_shutdown(c: &mut Ctx) {
    c.srv.blocked_clients += 1;
    c.cl.blocked = Some(Blocked {
        db: c.cl.db,
        keys: Vec::new(),
        argv: Vec::new(),
        deadline: None,
        zset: false,
        stream: false,
        postponed: false,
        wait: None,
        shutdown: true,
    });
}

/// After ACKs came in: answer the WAITs that now have their replicas.
pub fn serve_waiting(srv: &mut Server) {
    if srv.repl.waiting.is_empty() {
        return;
    }
    for id in srv.repl.waiting.clone() {
        let Some((slot, mut client)) = srv.take_client(id) else {
            continue;
        };
        if let Some((offset, want)) = client.blocked.as_ref().and_then(|b| b.wait) {
            let acked = srv.replicas_acked(offset);
            if acked >= want {
                client.reply.int(acked);
                unblock(srv, &mut client);
                srv.unblocked.push((slot, id));
            }
        }
        srv.clients[slot] = Some(client);
    }
}

/// A master becomes a replica (REPLICAOF host port): clients blocked on
/// keys or in WAIT get Redis's UNBLOCKED error and are closed after it
/// (Redis's disconnectAllBlockedClients); a pause's held clients stay.
pub fn disconnect_blocked(srv: &mut Server) {
    let blocked: Vec<(usize, u64)> = srv
        .clients
        .iter()
        .enumerate()
        .filter_map(|(slot, c)| {
            let c = c.as_ref()?;
            c.blocked
                .as_ref()
                .filter(|b| !b.postponed)
                .map(|_| (slot, c.id))
        })
        .collect();
    for (slot, id) in blocked {
        let Some(mut client) = srv.clients[slot].take() else {
            continue;
        };
        client.reply.error(
            "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
        );
        // Counted as an error reply (errorstats) and a failed call, as
        // any other unblock with an error.
        account_unserved(srv, &mut client, true);
        unblock(srv, &mut client);
        client.close_after_reply = true;
        srv.unblocked.push((slot, id));
        srv.clients[slot] = Some(client);
    }
}
