//! Set commands (SADD, SINTER, SPOP, SSCAN, …).
//!
//! Sets of integers are sorted integer arrays (`intset`) up to
//! `set-max-intset-entries`; otherwise a table of members (`hashtable`).

use super::hash::{draw_distinct, draw_plan, random_picks, Draw};
use super::keys::{elements_removed, parse_cursor, parse_scan_options, store_result};
use super::*;
use crate::db::{Set, Value};

fn pick(v: &mut Value) -> Option<&mut Set> {
    match v {
        Value::Set(s) => Some(s),
        _ => None,
    }
}

/// SPOP with a count keeps the members not popped in a new set when they
/// are at most a fifth of those popped (Redis's SPOP_MOVE_STRATEGY_MUL).
const SPOP_MOVE_STRATEGY_MUL: usize = 5;

fn max_intset(c: &Ctx) -> usize {
    c.srv.config.set_max_intset_entries.max(0) as usize
}

/// Reply with members as a set (RESP3 `~`, array in RESP2).
fn reply_set(out: &mut crate::protocol::Reply, members: &[Vec<u8>]) {
    out.set(members.len());
    for m in members {
        out.bulk(m);
    }
}

/// `SADD key member [member ...]` — number added.
pub fn sadd(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let max = max_intset(c);
    let set = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => {
            pick(create_value(c.srv, db, argv[1], Value::Set(Set::default()))).expect("set")
        }
        Typed::Found(s) => s,
    };
    let added = argv[2..].iter().filter(|m| set.add(m, max)).count();
    if added > 0 {
        c.modified(argv[1], NotifyFlags::SET, "sadd");
    }
    c.dirty(added as u64);
    c.cl.reply.int(added as i64);
}

/// `SREM key member [member ...]` — number removed.
pub fn srem(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let (removed, empty) = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.int(0),
        Typed::Found(s) => (
            argv[2..].iter().filter(|m| s.remove(m)).count(),
            s.is_empty(),
        ),
    };
    if removed > 0 {
        elements_removed(c, argv[1], NotifyFlags::SET, "srem", empty);
    }
    c.dirty(removed as u64);
    c.cl.reply.int(removed as i64);
}

/// `SISMEMBER key member`
pub fn sismember(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.int(0),
        Typed::Found(s) => c.cl.reply.int(s.contains(argv[2]) as i64),
    }
}

/// `SMISMEMBER key member [member ...]`
pub fn smismember(c: &mut Ctx, argv: &[&[u8]]) {
    let s = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => None,
        Typed::Found(s) => Some(s),
    };
    let flags: Vec<i64> = argv[2..]
        .iter()
        .map(|m| s.as_ref().is_some_and(|s| s.contains(m)) as i64)
        .collect();
    c.cl.reply.array(flags.len());
    for f in flags {
        c.cl.reply.int(f);
    }
}

/// `SCARD key`
pub fn scard(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.int(0),
        Typed::Found(s) => c.cl.reply.int(s.len() as i64),
    }
}

/// `SMEMBERS key`
pub fn smembers(c: &mut Ctx, argv: &[&[u8]]) {
    let members = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => Vec::new(),
        Typed::Found(s) => s.members(),
    };
    reply_set(&mut c.cl.reply, &members);
}

/// `SPOP key [count]` — propagated as SREM of what was popped (DEL when all).
pub fn spop(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 3 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let count = match optional_pop_count(argv, 2) {
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let key = argv[1];
    let max_intset = max_intset(c);
    // The RNG is borrowed out of the server while the set is borrowed.
    let mut rng = std::mem::replace(&mut c.srv.rng, crate::util::Rng::new(1));
    let (popped, empty) = match lookup_typed(c.srv, db, key, false, pick) {
        Typed::WrongType => (Err(ERR_WRONGTYPE), false),
        Typed::Missing => (Ok(None), false),
        Typed::Found(s) => {
            let n = count.unwrap_or(1).min(s.len());
            let mut popped = Vec::with_capacity(n);
            let kept = s.len() - n;
            // The whole of an intset comes back in its (sorted) order, as
            // Redis returns it.
            if count.is_some() && kept == 0 && matches!(s, Set::Ints(_)) {
                popped = s.members();
                *s = Set::default();
            }
            if count.is_some() && kept > 0 && kept * SPOP_MOVE_STRATEGY_MUL <= n {
                // Most of the set goes (Redis's spopWithCountCommand, case
                // 3): the few members kept move to a new set, encoded as
                // new (an intset again when they are all integers), and
                // what is left of the old one is the reply, in its order.
                let mut new = Set::default();
                for _ in 0..kept {
                    let Some(m) = s.random(&mut || rng.next_u64()) else {
                        break;
                    };
                    s.remove(&m);
                    new.add(&m, max_intset);
                }
                popped = s.members();
                *s = new;
            }
            while popped.len() < n {
                let Some(m) = s.random(&mut || rng.next_u64()) else {
                    break;
                };
                s.remove(&m);
                popped.push(m);
            }
            (Ok(Some(popped)), s.is_empty())
        }
    };
    c.srv.rng = rng;
    let popped = match popped {
        Err(e) => return c.cl.reply.error(e),
        Ok(None) => {
            return match count {
                Some(_) => c.cl.reply.set(0),
                None => c.cl.reply.null(),
            };
        }
        Ok(Some(p)) => p,
    };
    if !popped.is_empty() {
        elements_removed(c, key, NotifyFlags::SET, "spop", empty);
        c.dirty(popped.len() as u64);
        if empty && count.is_some() {
            c.propagate_as(vec![b"DEL".to_vec(), key.to_vec()]);
        } else {
            let mut p = vec![b"SREM".to_vec(), key.to_vec()];
            p.extend(popped.iter().cloned());
            c.propagate_as(p);
        }
    }
    match count {
        None => c.cl.reply.bulk(&popped[0]),
        Some(_) => reply_set(&mut c.cl.reply, &popped),
    }
}

/// `SRANDMEMBER key [count]`
pub fn srandmember(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 3 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let count = if argv.len() == 3 {
        match parse_i64(argv[2]) {
            Some(l) if l >= -i64::MAX => match super::hash::check_random_count(c, l) {
                Ok(picks) => Some(picks),
                Err(e) => return c.cl.reply.error(e),
            },
            Some(_) => return c.cl.reply.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
            None => return c.cl.reply.error(ERR_NOT_INT),
        }
    } else {
        None
    };
    if count.is_none() {
        // One random member: no need to copy the whole set.
        let mut rng = c.srv.rng.fork();
        return match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
            Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
            Typed::Missing => c.cl.reply.null(),
            Typed::Found(s) => match s.random(&mut || rng.next_u64()) {
                Some(m) => c.cl.reply.bulk(&m),
                None => c.cl.reply.null(),
            },
        };
    }
    // The single-member form returned above.
    let Some(l) = count else { return };
    let mut rng = c.srv.rng.fork();
    let s = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.array(0),
        Typed::Found(s) => s,
    };
    s.rehash_step();
    let len = s.len();
    let mut draw = || s.random(&mut || rng.next_u64());
    let out = &mut c.cl.reply;
    match draw_plan(len, l) {
        Draw::Repeats(n) => {
            out.array(n);
            for _ in 0..n {
                let Some(m) = draw() else { break };
                out.bulk(&m);
            }
        }
        Draw::Distinct(n) => {
            let picked = draw_distinct(n, |m: &Vec<u8>| m, draw);
            out.array(picked.len());
            for m in &picked {
                out.bulk(m);
            }
        }
        Draw::FromCopy => {
            let members = s.members();
            let picked = random_picks(&members, l, &mut || rng.next_u64());
            out.array(picked.len());
            for m in picked {
                out.bulk(m);
            }
        }
    }
}

/// `SMOVE source destination member`
pub fn smove(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let (src, dst, m) = (argv[1], argv[2], argv[3]);
    let max = max_intset(c);
    // Both keys are looked up (and expired if needed) before any check.
    let src_state = match lookup_typed(c.srv, db, src, false, pick) {
        Typed::Missing => None,
        Typed::WrongType => Some(Err(ERR_WRONGTYPE)),
        Typed::Found(s) => Some(Ok(s.contains(m))),
    };
    let dst_wrongtype = matches!(lookup_typed(c.srv, db, dst, false, pick), Typed::WrongType);
    let src_state = match src_state {
        None => return c.cl.reply.int(0),
        Some(Err(e)) => return c.cl.reply.error(e),
        Some(Ok(found)) => found,
    };
    if dst_wrongtype {
        return c.cl.reply.error(ERR_WRONGTYPE);
    }
    if src == dst {
        return c.cl.reply.int(src_state as i64);
    }
    if !src_state {
        return c.cl.reply.int(0);
    }
    let Typed::Found(s) = lookup_typed(c.srv, db, src, false, pick) else {
        return;
    };
    s.remove(m);
    let empty = s.is_empty();
    elements_removed(c, src, NotifyFlags::SET, "srem", empty);
    let dest = match lookup_typed(c.srv, db, dst, false, pick) {
        Typed::Found(d) => d,
        _ => pick(create_value(c.srv, db, dst, Value::Set(Set::default()))).expect("set"),
    };
    if dest.add(m, max) {
        c.modified(dst, NotifyFlags::SET, "sadd");
    }
    c.dirty(1);
    c.cl.reply.int(1);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Load the sets named by `keys`: `Err` after a WRONGTYPE reply; a missing
/// key is `None`.
fn load_sets(c: &mut Ctx, keys: &[&[u8]]) -> Result<Vec<Option<Vec<Vec<u8>>>>, ()> {
    let db = c.cl.db;
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        match lookup_typed(c.srv, db, k, true, pick) {
            Typed::WrongType => {
                c.cl.reply.error(ERR_WRONGTYPE);
                return Err(());
            }
            Typed::Missing => out.push(None),
            Typed::Found(s) => out.push(Some(s.members())),
        }
    }
    Ok(out)
}

/// Compute an intersection, union or difference as a new set built in
/// Redis's order (so an all-integer result is an intset, like Redis's).
fn combine(sets: &[Option<Vec<Vec<u8>>>], op: Op, max_intset: usize, limit: usize) -> Set {
    let mut result = Set::default();
    match op {
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return result;
            }
            let mut order: Vec<&Vec<Vec<u8>>> = sets.iter().flatten().collect();
            order.sort_by_key(|s| s.len());
            let others: Vec<std::collections::HashSet<&[u8]>> = order[1..]
                .iter()
                .map(|s| s.iter().map(|m| m.as_slice()).collect())
                .collect();
            for m in order[0] {
                if others.iter().all(|o| o.contains(m.as_slice())) {
                    result.add(m, max_intset);
                    if limit != 0 && result.len() >= limit {
                        break;
                    }
                }
            }
        }
        Op::Union => {
            for m in sets.iter().flatten().flatten() {
                result.add(m, max_intset);
            }
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else {
                return result;
            };
            // Redis's two algorithms, chosen as it chooses them: the second
            // (the whole first set, then the others taken out) when the
            // first set is large against the others, so the result is a
            // hashtable whenever the first set would be one.
            let present = sets.iter().flatten();
            let one_work = present.clone().count() * first.len() / 2;
            let two_work: usize = present.map(|s| s.len()).sum();
            if one_work > two_work {
                for m in first {
                    result.add(m, max_intset);
                }
                for other in sets[1..].iter().flatten() {
                    for m in other {
                        result.remove(m);
                    }
                    if result.is_empty() {
                        break;
                    }
                }
                return result;
            }
            let others: Vec<std::collections::HashSet<&[u8]>> = sets[1..]
                .iter()
                .flatten()
                .map(|s| s.iter().map(|m| m.as_slice()).collect())
                .collect();
            for m in first {
                if !others.iter().any(|o| o.contains(m.as_slice())) {
                    result.add(m, max_intset);
                }
            }
        }
    }
    result
}

fn set_op(c: &mut Ctx, keys: &[&[u8]], dst: Option<&[u8]>, op: Op) {
    let Ok(sets) = load_sets(c, keys) else { return };
    let result = combine(&sets, op, max_intset(c), 0);
    match dst {
        None => reply_set(&mut c.cl.reply, &result.members()),
        Some(dst) => {
            let n = result.len();
            let event = match op {
                Op::Inter => "sinterstore",
                Op::Union => "sunionstore",
                Op::Diff => "sdiffstore",
            };
            let result = (n > 0).then_some(Value::Set(result));
            if store_result(c, dst, result, NotifyFlags::SET, event) {
                c.dirty(1);
            }
            c.cl.reply.int(n as i64);
        }
    }
}

/// `SINTER key [key ...]`
pub fn sinter(c: &mut Ctx, argv: &[&[u8]]) {
    set_op(c, &argv[1..], None, Op::Inter);
}

/// `SINTERSTORE destination key [key ...]`
pub fn sinterstore(c: &mut Ctx, argv: &[&[u8]]) {
    set_op(c, &argv[2..], Some(argv[1]), Op::Inter);
}

/// `SUNION key [key ...]`
pub fn sunion(c: &mut Ctx, argv: &[&[u8]]) {
    set_op(c, &argv[1..], None, Op::Union);
}

/// `SUNIONSTORE destination key [key ...]`
pub fn sunionstore(c: &mut Ctx, argv: &[&[u8]]) {
    set_op(c, &argv[2..], Some(argv[1]), Op::Union);
}

/// `SDIFF key [key ...]`
pub fn sdiff(c: &mut Ctx, argv: &[&[u8]]) {
    set_op(c, &argv[1..], None, Op::Diff);
}

/// `SDIFFSTORE destination key [key ...]`
pub fn sdiffstore(c: &mut Ctx, argv: &[&[u8]]) {
    set_op(c, &argv[2..], Some(argv[1]), Op::Diff);
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
pub fn sintercard(c: &mut Ctx, argv: &[&[u8]]) {
    let numkeys = match parse_i64(argv[1]) {
        Some(n) if n >= 1 => n as usize,
        _ => return c.cl.reply.error("ERR numkeys should be greater than 0"),
    };
    if numkeys > argv.len() - 2 {
        return c
            .cl
            .reply
            .error("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = 0usize;
    let mut j = 2 + numkeys;
    while j < argv.len() {
        if eq_ic(argv[j], "limit") && j + 1 < argv.len() {
            j += 1;
            limit = match parse_i64(argv[j]) {
                Some(n) if n >= 0 => n as usize,
                _ => return c.cl.reply.error("ERR LIMIT can't be negative"),
            };
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let Ok(sets) = load_sets(c, &argv[2..2 + numkeys]) else {
        return;
    };
    let result = combine(&sets, Op::Inter, usize::MAX, limit);
    c.cl.reply.int(result.len() as i64);
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`
pub fn sscan(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(cursor) = parse_cursor(argv[2]) else {
        return c.cl.reply.error("ERR invalid cursor");
    };
    let s = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => None,
        Typed::Found(s) => Some(s),
    };
    let Some(s) = s else {
        c.cl.reply.array(2);
        c.cl.reply.bulk(b"0");
        return c.cl.reply.array(0);
    };
    let opts = match parse_scan_options(argv, 3, false) {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut found: Vec<Vec<u8>> = Vec::new();
    let next = match s {
        Set::Ints(_) => {
            found = s.members();
            0
        }
        Set::Table(t) => super::keys::scan_table(t, cursor, opts.count, &mut |e| {
            found.push(e.key().to_vec());
            found.len()
        }),
    };
    if let Some(p) = opts.pattern {
        found.retain(|m| glob_match(p, m, false));
    }
    let out = &mut c.cl.reply;
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len());
    for m in found {
        out.bulk(&m);
    }
}
