//! Hash commands (HSET, HGET, HINCRBY, HSCAN, …).
//!
//! Small hashes are packed (`listpack`, insertion order); past
//! `hash-max-listpack-entries` fields or `hash-max-listpack-value` bytes they
//! become a table (`hashtable`), as in Redis.

use super::keys::{elements_removed, parse_cursor, parse_scan_options};
use super::*;
use crate::db::{Hash, Value};
use crate::util::{ld_add, LongDoubleError};

fn pick(v: &mut Value) -> Option<&mut Hash> {
    match v {
        Value::Hash(h) => Some(h),
        _ => None,
    }
}

fn limits(c: &Ctx) -> (usize, usize) {
    (
        c.srv.config.hash_max_listpack_entries.max(0) as usize,
        c.srv.config.hash_max_listpack_value.max(0) as usize,
    )
}

/// The hash at `key` for writing, created if missing; `None` after a
/// WRONGTYPE reply.
fn hash_for_write<'s>(c: &'s mut Ctx, key: &[u8]) -> Option<&'s mut Hash> {
    match lookup_or_create(c.srv, c.cl.db, key, pick, || Value::Hash(Hash::default())) {
        Ok(h) => Some(h),
        Err(e) => {
            c.cl.reply.error(e);
            None
        }
    }
}

/// The engine behind HSET and HMSET.
fn hset_generic(c: &mut Ctx, argv: &[&[u8]], hmset: bool) {
    if argv.len() % 2 == 1 {
        return c.cl.reply.error(&arity_error(c.cmd.name));
    }
    let (max_entries, max_value) = limits(c);
    let Some(h) = hash_for_write(c, argv[1]) else {
        return;
    };
    let mut created = 0;
    for pair in argv[2..].chunks(2) {
        if h.set(pair[0], pair[1], max_entries, max_value) {
            created += 1;
        }
    }
    c.dirty((argv.len() as u64 - 2) / 2);
    // Always, even when no field changed, as Redis does.
    c.modified(argv[1], NotifyFlags::HASH, "hset");
    if hmset {
        c.cl.reply.ok();
    } else {
        c.cl.reply.int(created);
    }
}

/// `HSET key field value [field value ...]` — number of new fields.
pub fn hset(c: &mut Ctx, argv: &[&[u8]]) {
    hset_generic(c, argv, false);
}

/// `HMSET key field value [field value ...]` — OK.
pub fn hmset(c: &mut Ctx, argv: &[&[u8]]) {
    hset_generic(c, argv, true);
}

/// `HSETNX key field value` — 1 if set, 0 if the field existed.
pub fn hsetnx(c: &mut Ctx, argv: &[&[u8]]) {
    let (max_entries, max_value) = limits(c);
    let db = c.cl.db;
    if let Typed::Found(h) = lookup_typed(c.srv, db, argv[1], false, pick) {
        if h.get(argv[2]).is_some() {
            return c.cl.reply.int(0);
        }
    }
    let Some(h) = hash_for_write(c, argv[1]) else {
        return;
    };
    h.set(argv[2], argv[3], max_entries, max_value);
    c.dirty(1);
    // Redis names HSETNX's event "hset".
    c.modified(argv[1], NotifyFlags::HASH, "hset");
    c.cl.reply.int(1);
}

/// `HGET key field`
pub fn hget(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.null(),
        Typed::Found(h) => match h.get(argv[2]) {
            Some(v) => c.cl.reply.bulk(v),
            None => c.cl.reply.null(),
        },
    }
}

/// `HMGET key field [field ...]`
pub fn hmget(c: &mut Ctx, argv: &[&[u8]]) {
    let h = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => None,
        Typed::Found(h) => Some(h),
    };
    c.cl.reply.array(argv.len() - 2);
    for f in &argv[2..] {
        match h.as_ref().and_then(|h| h.get(f)) {
            Some(v) => c.cl.reply.bulk(v),
            None => c.cl.reply.null(),
        }
    }
}

/// `HDEL key field [field ...]` — number removed; an emptied hash is deleted.
pub fn hdel(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let (removed, empty) = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.int(0),
        Typed::Found(h) => {
            let n = argv[2..].iter().filter(|f| h.remove(f)).count();
            (n, h.is_empty())
        }
    };
    if removed > 0 {
        elements_removed(c, argv[1], NotifyFlags::HASH, "hdel", empty);
    }
    c.dirty(removed as u64);
    c.cl.reply.int(removed as i64);
}

/// `HLEN key`
pub fn hlen(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.int(0),
        Typed::Found(h) => c.cl.reply.int(h.len() as i64),
    }
}

/// `HEXISTS key field`
pub fn hexists(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.int(0),
        Typed::Found(h) => c.cl.reply.int(h.get(argv[2]).is_some() as i64),
    }
}

/// `HSTRLEN key field`
pub fn hstrlen(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.int(0),
        Typed::Found(h) => c.cl.reply.int(h.get(argv[2]).map_or(0, |v| v.len()) as i64),
    }
}

/// `HINCRBY key field increment`
pub fn hincrby(c: &mut Ctx, argv: &[&[u8]]) {
    let incr = match arg_i64(argv[3]) {
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let (max_entries, max_value) = limits(c);
    let Some(h) = hash_for_write(c, argv[1]) else {
        return;
    };
    let old = match h.get(argv[2]) {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(n) => n,
            None => return c.cl.reply.error("ERR hash value is not an integer"),
        },
    };
    let Some(new) = old.checked_add(incr) else {
        return c
            .cl
            .reply
            .error("ERR increment or decrement would overflow");
    };
    h.set(argv[2], new.to_string().as_bytes(), max_entries, max_value);
    c.dirty(1);
    c.modified(argv[1], NotifyFlags::HASH, "hincrby");
    c.cl.reply.int(new);
}

/// `HINCRBYFLOAT key field increment` — propagated as HSET of the result.
pub fn hincrbyfloat(c: &mut Ctx, argv: &[&[u8]]) {
    match ld_add(None, argv[3]) {
        Ok(_) => {}
        Err(LongDoubleError::NotAFloat) => return c.cl.reply.error(ERR_NOT_FLOAT),
        Err(LongDoubleError::OutOfRange) => {
            return c.cl.reply.error("ERR value is NaN or Infinity")
        }
    }
    let (max_entries, max_value) = limits(c);
    let Some(h) = hash_for_write(c, argv[1]) else {
        return;
    };
    let cur = h.get(argv[2]).map(|v| v.to_vec());
    let new = match ld_add(cur.as_deref(), argv[3]) {
        Ok(v) => v,
        Err(LongDoubleError::NotAFloat) => {
            return c.cl.reply.error("ERR hash value is not a float")
        }
        Err(LongDoubleError::OutOfRange) => return c.cl.reply.error(ERR_NAN_OR_INF),
    };
    h.set(argv[2], &new, max_entries, max_value);
    c.dirty(1);
    c.modified(argv[1], NotifyFlags::HASH, "hincrbyfloat");
    c.cl.reply.bulk(&new);
    c.propagate_as(vec![
        b"HSET".to_vec(),
        argv[1].to_vec(),
        argv[2].to_vec(),
        new,
    ]);
}

/// The engine behind HGETALL, HKEYS and HVALS.
fn getall_generic(c: &mut Ctx, key: &[u8], keys: bool, vals: bool) {
    let pairs = match lookup_typed(c.srv, c.cl.db, key, true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => Vec::new(),
        Typed::Found(h) => h.pairs(),
    };
    let out = &mut c.cl.reply;
    if keys && vals {
        out.map(pairs.len());
    } else {
        out.array(pairs.len());
    }
    for (k, v) in pairs {
        if keys {
            out.bulk(&k);
        }
        if vals {
            out.bulk(&v);
        }
    }
}

/// `HGETALL key` — a map in RESP3, a flat array in RESP2.
pub fn hgetall(c: &mut Ctx, argv: &[&[u8]]) {
    getall_generic(c, argv[1], true, true);
}

/// `HKEYS key`
pub fn hkeys(c: &mut Ctx, argv: &[&[u8]]) {
    getall_generic(c, argv[1], true, false);
}

/// `HVALS key`
pub fn hvals(c: &mut Ctx, argv: &[&[u8]]) {
    getall_generic(c, argv[1], false, true);
}

/// `HRANDFIELD key [count [WITHVALUES]]`
pub fn hrandfield(c: &mut Ctx, argv: &[&[u8]]) {
    let mut count = None;
    let mut withvalues = false;
    if argv.len() >= 3 {
        let l = match parse_i64(argv[2]) {
            Some(l) if l >= -i64::MAX => l,
            Some(_) => return c.cl.reply.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
            None => return c.cl.reply.error(ERR_NOT_INT),
        };
        if argv.len() > 4 || (argv.len() == 4 && !eq_ic(argv[3], "withvalues")) {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        let picks = match check_random_count(c, l) {
            Ok(picks) => picks,
            Err(e) => return c.cl.reply.error(e),
        };
        if argv.len() == 4 {
            withvalues = true;
            if !(-i64::MAX / 2..=i64::MAX / 2).contains(&l) {
                return c.cl.reply.error("ERR value is out of range");
            }
        }
        count = Some(picks);
    }
    let db = c.cl.db;
    if count.is_none() {
        // One random field: no need to copy the whole hash.
        let mut rng = c.srv.rng.fork();
        return match lookup_typed(c.srv, db, argv[1], true, pick) {
            Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
            Typed::Missing => c.cl.reply.null(),
            Typed::Found(h) => match h.random_field(&mut || rng.next_u64()) {
                Some(f) => c.cl.reply.bulk(&f),
                None => c.cl.reply.null(),
            },
        };
    }
    // The single-field form returned above.
    let Some(l) = count else { return };
    let mut rng = c.srv.rng.fork();
    let h = match lookup_typed(c.srv, db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.array(0),
        Typed::Found(h) => h,
    };
    h.rehash_step();
    let h_len = h.len();
    let mut draw = || {
        let f = h.random_field(&mut || rng.next_u64())?;
        let v = h.get(&f).unwrap_or_default().to_vec();
        Some((f, v))
    };
    let out = &mut c.cl.reply;
    match draw_plan(h_len, l) {
        Draw::Repeats(n) => {
            pairs_header(out, n, withvalues);
            for _ in 0..n {
                let Some((f, v)) = draw() else { break };
                reply_pair(out, &f, &v, withvalues);
            }
        }
        Draw::Distinct(n) => {
            let picked = draw_distinct(n, |(f, _): &(Vec<u8>, Vec<u8>)| f, draw);
            pairs_header(out, picked.len(), withvalues);
            for (f, v) in &picked {
                reply_pair(out, f, v, withvalues);
            }
        }
        Draw::FromCopy => {
            let pairs = h.pairs();
            let picked = random_picks(&pairs, l, &mut || rng.next_u64());
            pairs_header(out, picked.len(), withvalues);
            for (f, v) in picked {
                reply_pair(out, f, v, withvalues);
            }
        }
    }
}

/// Most elements a negative-count HRANDFIELD/SRANDMEMBER/ZRANDMEMBER may
/// return to a client with no hard output limit. Redis tries to build any
/// such reply and runs out of memory on absurd counts; we refuse them
/// instead, so no request can exhaust memory.
pub const MAX_RANDOM_REPLY: u64 = 10_000_000;

/// The picks to make for a random-pick `count`. Past [`MAX_RANDOM_REPLY`]
/// repeats, a client with a hard output limit gets as many as overflow it
/// (each takes at least the 6 bytes of `$0\r\n\r\n`), so it is closed when
/// the command ends, as Redis stops such a reply mid-run; any other client
/// is refused.
pub fn check_random_count(c: &Ctx, count: i64) -> Result<i64, &'static str> {
    if count >= 0 || count.unsigned_abs() <= MAX_RANDOM_REPLY {
        return Ok(count);
    }
    let hard = c.srv.config.client_output_buffer_limit[c.cl.output_class() as usize].hard;
    if hard == 0 {
        return Err("ERR value is out of range");
    }
    Ok(-((hard / 6 + 1).min(count.unsigned_abs()) as i64))
}

/// How a random-count command picks from a collection of `len` elements
/// (Redis's cases in srandmemberWithCountCommand and its twins).
pub enum Draw {
    /// A negative count: this many single draws, repeats allowed (CASE 1).
    Repeats(usize),
    /// A positive count under a third of the collection: draws until this
    /// many differ (CASE 4), without copying the collection.
    Distinct(usize),
    /// The rest: picked from a copy of the collection ([`random_picks`]).
    FromCopy,
}

pub fn draw_plan(len: usize, count: i64) -> Draw {
    if count < 0 {
        Draw::Repeats(count.unsigned_abs() as usize)
    } else if (count as u64).saturating_mul(3) <= len as u64 {
        Draw::Distinct(count as usize)
    } else {
        Draw::FromCopy
    }
}

/// `n` elements from `draw`, told apart by `key`, in the order first drawn
/// (fewer only if `draw` runs dry).
pub fn draw_distinct<T>(
    n: usize,
    key: impl Fn(&T) -> &[u8],
    mut draw: impl FnMut() -> Option<T>,
) -> Vec<T> {
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let Some(x) = draw() else { break };
        if seen.insert(key(&x).to_vec()) {
            out.push(x);
        }
    }
    out
}

/// Choose elements the way Redis's *RANDMEMBER/HRANDFIELD with a count do:
/// a negative count may repeat elements, a positive one returns distinct
/// ones (all of them when count >= size).
pub fn random_picks<'a, T>(
    items: &'a [T],
    count: i64,
    rand: &mut dyn FnMut() -> u64,
) -> Vec<&'a T> {
    if count == 0 || items.is_empty() {
        return Vec::new();
    }
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        return (0..n)
            .map(|_| &items[(rand() as usize) % items.len()])
            .collect();
    }
    let n = count as usize;
    if n >= items.len() {
        return items.iter().collect();
    }
    // Partial Fisher-Yates over indexes.
    let mut idx: Vec<usize> = (0..items.len()).collect();
    for i in 0..n {
        let j = i + (rand() as usize) % (items.len() - i);
        idx.swap(i, j);
    }
    idx[..n].iter().map(|&i| &items[i]).collect()
}

/// The array of `n` random fields, flat or (RESP3 WITHVALUES) of pairs.
fn pairs_header(out: &mut crate::protocol::Reply, n: usize, withvalues: bool) {
    if withvalues && !out.is_resp3() {
        out.array(n * 2);
    } else {
        out.array(n);
    }
}

fn reply_pair(out: &mut crate::protocol::Reply, f: &[u8], v: &[u8], withvalues: bool) {
    if withvalues && out.is_resp3() {
        out.array(2);
    }
    out.bulk(f);
    if withvalues {
        out.bulk(v);
    }
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`
pub fn hscan(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(cursor) = parse_cursor(argv[2]) else {
        return c.cl.reply.error("ERR invalid cursor");
    };
    let db = c.cl.db;
    let h = match lookup_typed(c.srv, db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => None,
        Typed::Found(h) => Some(h),
    };
    let Some(h) = h else {
        c.cl.reply.array(2);
        c.cl.reply.bulk(b"0");
        return c.cl.reply.array(0);
    };
    let opts = match parse_scan_options(argv, 3, false) {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let next = match h {
        Hash::Packed(_) => {
            found = h.pairs();
            0
        }
        Hash::Table(t) => super::keys::scan_table(t, cursor, opts.count, &mut |e| {
            found.push((e.key().to_vec(), crate::db::value::entry_bytes(e).to_vec()));
            found.len()
        }),
    };
    if let Some(p) = opts.pattern {
        found.retain(|(f, _)| glob_match(p, f, false));
    }
    let out = &mut c.cl.reply;
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len() * 2);
    for (f, v) in found {
        out.bulk(&f);
        out.bulk(&v);
    }
}
