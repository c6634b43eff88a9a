//! Key expiry: the EXPIRE family, TTL queries, PERSIST, and the active
//! expiry cycle run by the cron.
//!
//! Expiry is lazy (a key is checked when it is accessed, see
//! `expire_if_needed`) and active: every cron tick walks the `expires` table
//! of each database with a resumable cursor, deleting what has expired, and
//! keeps going while more than a tenth of what it sampled had expired, within
//! a CPU budget — Redis's adaptive algorithm.

use std::time::Instant;

use super::*;
use crate::db::ValueRef;
use crate::state::Server;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

/// The engine behind EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT (Redis's
/// `expireGenericCommand`). `basetime` is now for relative forms and 0 for
/// absolute ones. Propagated as `PEXPIREAT key ms [flags]`, or as DEL when
/// the time is already past.
fn expire_generic(c: &mut Ctx, argv: &[&[u8]], basetime: i64, unit: Unit) {
    let (key, param) = (argv[1], argv[2]);
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &argv[3..] {
        if eq_ic(opt, "nx") {
            nx = true;
        } else if eq_ic(opt, "xx") {
            xx = true;
        } else if eq_ic(opt, "gt") {
            gt = true;
        } else if eq_ic(opt, "lt") {
            lt = true;
        } else {
            return c
                .cl
                .reply
                .error(&format!("ERR Unsupported option {}", c_str(opt)));
        }
    }
    if nx && (xx || gt || lt) {
        return c
            .cl
            .reply
            .error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return c
            .cl
            .reply
            .error("ERR GT and LT options at the same time are not compatible");
    }
    let mut when = match arg_i64(param) {
        Ok(w) => w,
        Err(e) => return c.cl.reply.error(e),
    };
    let invalid = format!("ERR invalid expire time in '{}' command", c.cmd.name);
    if unit == Unit::Seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return c.cl.reply.error(&invalid);
        }
        when *= 1000;
    }
    if when > i64::MAX - basetime {
        return c.cl.reply.error(&invalid);
    }
    when += basetime;
    let db = c.cl.db;
    if lookup_write(c.srv, db, key).is_none() {
        return c.cl.reply.int(0);
    }
    if nx || xx || gt || lt {
        let current = c.srv.dbs[db].get_expire(key).unwrap_or(-1);
        if (nx && current != -1)
            || (xx && current == -1)
            || (gt && (when <= current || current == -1))
            || (lt && current != -1 && when >= current)
        {
            return c.cl.reply.int(0);
        }
    }
    if c.srv.already_expired(when) {
        c.delete_already_expired(key);
        // A deletion by the command, not an expiry: "del".
        c.modified(key, NotifyFlags::GENERIC, "del");
    } else {
        c.set_expire(db, key, when);
        c.modified(key, NotifyFlags::GENERIC, "expire");
        let mut out = vec![
            b"PEXPIREAT".to_vec(),
            key.to_vec(),
            when.to_string().into_bytes(),
        ];
        out.extend(argv[3..].iter().map(|a| a.to_vec()));
        c.propagate_as(out);
    }
    c.dirty(1);
    c.cl.reply.int(1);
}

/// `EXPIRE key seconds [NX | XX | GT | LT]`
pub fn expire(c: &mut Ctx, argv: &[&[u8]]) {
    let now = c.clock_ms();
    expire_generic(c, argv, now, Unit::Seconds);
}

/// `PEXPIRE key milliseconds [NX | XX | GT | LT]`
pub fn pexpire(c: &mut Ctx, argv: &[&[u8]]) {
    let now = c.clock_ms();
    expire_generic(c, argv, now, Unit::Millis);
}

/// `EXPIREAT key unix-time-seconds [NX | XX | GT | LT]`
pub fn expireat(c: &mut Ctx, argv: &[&[u8]]) {
    expire_generic(c, argv, 0, Unit::Seconds);
}

/// `PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]`
pub fn pexpireat(c: &mut Ctx, argv: &[&[u8]]) {
    expire_generic(c, argv, 0, Unit::Millis);
}

/// The engine behind TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for a
/// missing key, -1 for no TTL.
fn ttl_generic(c: &mut Ctx, key: &[u8], ms: bool, absolute: bool) {
    let db = c.cl.db;
    if expire_if_needed(c.srv, db, key) || c.srv.dbs[db].main.get(key).is_none() {
        c.srv.stats.keyspace_misses += 1;
        c.notify(NotifyFlags::KEY_MISS, "keymiss", key);
        return c.cl.reply.int(-2);
    }
    c.srv.stats.keyspace_hits += 1;
    let Some(when) = c.srv.dbs[db].get_expire(key) else {
        return c.cl.reply.int(-1);
    };
    let ttl = if absolute {
        when
    } else {
        (when - c.clock_ms()).max(0)
    };
    // (Rounded without overflow at the largest deadlines.)
    c.cl.reply.int(if ms {
        ttl
    } else {
        ((ttl as i128 + 500) / 1000) as i64
    });
}

/// `TTL key` — seconds to live, rounded.
pub fn ttl(c: &mut Ctx, argv: &[&[u8]]) {
    ttl_generic(c, argv[1], false, false);
}

/// `PTTL key`
pub fn pttl(c: &mut Ctx, argv: &[&[u8]]) {
    ttl_generic(c, argv[1], true, false);
}

/// `EXPIRETIME key` — absolute Unix time in seconds.
pub fn expiretime(c: &mut Ctx, argv: &[&[u8]]) {
    ttl_generic(c, argv[1], false, true);
}

/// `PEXPIRETIME key`
pub fn pexpiretime(c: &mut Ctx, argv: &[&[u8]]) {
    ttl_generic(c, argv[1], true, true);
}

/// `PERSIST key` — 1 if a TTL was removed.
pub fn persist(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    if lookup_write(c.srv, db, argv[1]).is_some() && c.srv.dbs[db].persist(argv[1]) {
        c.dirty(1);
        c.modified(argv[1], NotifyFlags::GENERIC, "persist");
        c.cl.reply.int(1);
    } else {
        c.cl.reply.int(0);
    }
}

/// Expire the keys this writable replica's own clients gave a TTL (Redis's
/// expireSlaveKeys): the master sends no DEL for them. Stops after finding
/// more than three keys not yet due, or after 1 ms.
pub fn expire_replica_keys(srv: &mut Server) {
    if srv.replica_keys_with_expire.is_empty() || srv.clients_paused().is_some() {
        return;
    }
    let start = Instant::now();
    let now = srv.now_ms;
    let (mut cycles, mut not_due) = (0usize, 0usize);
    while !srv.replica_keys_with_expire.is_empty() {
        let i = (srv.rng.next_u64() % srv.replica_keys_with_expire.len() as u64) as usize;
        let (key, dbs) = srv.replica_keys_with_expire.at(i);
        let key = key.to_vec();
        let mut still = 0u64;
        for db in 0..srv.dbs.len().min(64) {
            if dbs & (1 << db) == 0 {
                continue;
            }
            let Some(when) = srv.dbs[db].get_expire(&key) else {
                continue;
            };
            if crate::db::deadline_passed(when, now) {
                delete_expired(srv, db, &key);
            } else {
                not_due += 1;
                still |= 1 << db;
            }
        }
        srv.replica_keys_with_expire.update(i, still);
        cycles += 1;
        if not_due > 3 || (cycles.is_multiple_of(64) && start.elapsed().as_millis() > 1) {
            break;
        }
    }
}

/// Keys examined per round of the active cycle at effort 1.
const ACTIVE_EXPIRE_KEYS_PER_LOOP: usize = 20;
/// Percentage of CPU time the slow cycle may use at effort 1.
const ACTIVE_EXPIRE_SLOW_TIME_PERC: u64 = 25;
/// Keep working while more than this percentage of sampled keys had expired.
const ACTIVE_EXPIRE_ACCEPTABLE_STALE: usize = 10;

/// Redis's slow active expiry cycle, run from the cron.
pub fn active_expire_cycle(srv: &mut Server) {
    // While clients are paused the dataset stays as it is.
    if !srv.may_delete_expired() {
        return;
    }
    let effort = (srv.config.active_expire_effort - 1).max(0) as usize;
    let keys_per_loop = ACTIVE_EXPIRE_KEYS_PER_LOOP + ACTIVE_EXPIRE_KEYS_PER_LOOP / 4 * effort;
    let time_perc = ACTIVE_EXPIRE_SLOW_TIME_PERC + 2 * effort as u64;
    let acceptable_stale = ACTIVE_EXPIRE_ACCEPTABLE_STALE.saturating_sub(effort);
    let budget_us = 1_000_000 * time_perc / srv.hz.max(1) as u64 / 100;
    let start = Instant::now();
    let (mut total_sampled, mut total_expired) = (0usize, 0usize);
    let mut timed_out = false;
    'dbs: for db in 0..srv.dbs.len() {
        let mut iteration = 0u64;
        loop {
            if srv.dbs[db].expires.is_empty() {
                // Nothing to expire: no average either (as Redis).
                srv.dbs[db].avg_ttl = 0;
                break;
            }
            let now = srv.now_ms;
            let mut sampled = 0usize;
            let mut expired: Vec<Vec<u8>> = Vec::new();
            let mut ttl_sum: i64 = 0;
            let mut ttl_samples: i64 = 0;
            let d = &mut srv.dbs[db];
            let mut cursor = d.expires_cursor;
            let mut buckets = 0;
            loop {
                cursor = d.expires.scan(cursor, &mut |e| {
                    sampled += 1;
                    if let ValueRef::Int(when) = e.value() {
                        if crate::db::deadline_passed(when, now) {
                            expired.push(e.key().to_vec());
                        } else if when > now {
                            ttl_sum += when - now;
                            ttl_samples += 1;
                        }
                    }
                });
                buckets += 1;
                if cursor == 0 || sampled >= keys_per_loop || buckets >= keys_per_loop * 20 {
                    break;
                }
            }
            d.expires_cursor = cursor;
            if ttl_samples > 0 {
                let avg = ttl_sum / ttl_samples;
                // Running average, as Redis keeps it for INFO keyspace.
                d.avg_ttl = if d.avg_ttl == 0 {
                    avg
                } else {
                    (d.avg_ttl / 50) * 49 + avg / 50
                };
            }
            let n_expired = expired.len();
            for key in expired {
                delete_expired(srv, db, &key);
            }
            total_sampled += sampled;
            total_expired += n_expired;
            iteration += 1;
            if iteration.is_multiple_of(16) && start.elapsed().as_micros() as u64 > budget_us {
                timed_out = true;
                break 'dbs;
            }
            if sampled == 0
                || n_expired * 100 / sampled <= acceptable_stale
                || cursor == 0 && n_expired == 0
            {
                break;
            }
        }
    }
    let elapsed_ms = start.elapsed().as_millis() as u64;
    srv.stats.expire_cycle_cpu_ms += elapsed_ms;
    srv.latency_add_sample_if_needed("expire-cycle", elapsed_ms);
    if timed_out {
        srv.stats.expired_time_cap_reached_count += 1;
    }
    let current_perc = if total_sampled > 0 {
        total_expired as f64 / total_sampled as f64
    } else {
        0.0
    };
    srv.stats.expired_stale_perc = current_perc * 0.05 + srv.stats.expired_stale_perc * 0.95;
}
