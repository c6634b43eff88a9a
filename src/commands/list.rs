//! List commands (LPUSH, LRANGE, LMOVE, LPOS, LMPOP, …).
//!
//! Lists are Redis's quicklist (`db::quicklist`): listpack nodes sized by
//! `list-max-listpack-size`, interior ones compressed at
//! `list-compress-depth`, both fixed when a list is created. Each command
//! works on the list as t_list.c does (LTRIM and popping with a count
//! delete a range, LREM deletes through an iterator), so that the nodes
//! come out as Redis's. The blocking variants wait through `blocking.rs`.

use super::blocking::{block, parse_timeout};
use super::keys::elements_removed;
use super::*;
use crate::db::quicklist::{self, Element};
use crate::db::{List, Value};

fn pick(v: &mut Value) -> Option<&mut List> {
    match v {
        Value::List(l) => Some(l),
        _ => None,
    }
}

/// A new list with the configured node size and compress depth.
fn new_list(c: &Ctx) -> List {
    List::new(
        c.srv.config.list_max_listpack_size,
        c.srv.config.list_compress_depth,
    )
}

/// Reply with a list element (an integer a node holds as one is sent as
/// its decimal form, as addReplyBulkLongLong does).
fn reply_element(out: &mut crate::protocol::reply::Reply, e: Element<'_>) {
    match e {
        Element::Str(s) => out.bulk(s),
        Element::Int(n) => out.bulk_i64(n),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

/// Whether `arg` is LEFT or RIGHT (LMPOP's `<where>`).
fn is_end(arg: &[u8]) -> bool {
    parse_end(arg).is_some()
}

fn parse_end(arg: &[u8]) -> Option<End> {
    if eq_ic(arg, "left") {
        Some(End::Left)
    } else if eq_ic(arg, "right") {
        Some(End::Right)
    } else {
        None
    }
}

impl End {
    fn side(self) -> quicklist::End {
        match self {
            End::Left => quicklist::End::Head,
            End::Right => quicklist::End::Tail,
        }
    }
}

fn push(l: &mut List, v: &[u8], end: End) {
    l.push(v, end.side());
}

fn pop(l: &mut List, end: End) -> Option<Vec<u8>> {
    l.pop(end.side())
}

/// Pop `count` elements (fewer if the list is shorter) from `end`, as
/// Redis's POP with a count and LMPOP do: read the range, then delete it in
/// one go (listTypeDelRange), not element by element.
fn pop_range(l: &mut List, end: End, count: usize) -> Vec<Vec<u8>> {
    let llen = l.len();
    let n = count.min(llen);
    if n == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n);
    let (start, reverse) = match end {
        End::Left => (0, false),
        End::Right => (llen - n, true),
    };
    l.range(start, start + n - 1, reverse, |e| out.push(e.to_vec()));
    let from = match end {
        End::Left => 0,
        End::Right => -(n as i64),
    };
    l.del_range(from, n as i64);
    out
}

fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

/// Redis's listElementsRemoved: the pop event, the emptied list's deletion
/// and `del`, the watchers.
fn popped(c: &mut Ctx, key: &[u8], end: End, empty: bool) {
    let event = match end {
        End::Left => "lpop",
        End::Right => "rpop",
    };
    elements_removed(c, key, NotifyFlags::LIST, event, empty);
}

/// The engine behind LPUSH, RPUSH, LPUSHX and RPUSHX: the new length.
fn push_generic(c: &mut Ctx, argv: &[&[u8]], end: End, only_existing: bool) {
    let db = c.cl.db;
    let fresh = new_list(c);
    let key = argv[1];
    let list = match lookup_typed(c.srv, db, key, false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing if only_existing => return c.cl.reply.int(0),
        Typed::Missing => pick(create_value(c.srv, db, key, Value::List(fresh))).expect("list"),
        Typed::Found(l) => l,
    };
    for v in &argv[2..] {
        push(list, v, end);
    }
    let len = list.len();
    c.dirty(argv.len() as u64 - 2);
    c.modified(key, NotifyFlags::LIST, push_event(end));
    c.cl.reply.int(len as i64);
}

/// `LPUSH key element [element ...]`
pub fn lpush(c: &mut Ctx, argv: &[&[u8]]) {
    push_generic(c, argv, End::Left, false);
}

/// `RPUSH key element [element ...]`
pub fn rpush(c: &mut Ctx, argv: &[&[u8]]) {
    push_generic(c, argv, End::Right, false);
}

/// `LPUSHX key element [element ...]`
pub fn lpushx(c: &mut Ctx, argv: &[&[u8]]) {
    push_generic(c, argv, End::Left, true);
}

/// `RPUSHX key element [element ...]`
pub fn rpushx(c: &mut Ctx, argv: &[&[u8]]) {
    push_generic(c, argv, End::Right, true);
}

/// A "positive" count argument as Redis's getPositiveLongFromObjectOrReply.
fn positive_arg(arg: &[u8], msg: &'static str) -> Result<i64, &'static str> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(msg),
    }
}

/// The engine behind LPOP and RPOP (with an optional count).
fn pop_generic(c: &mut Ctx, argv: &[&[u8]], end: End) {
    if argv.len() > 3 {
        return c.cl.reply.error(&arity_error(c.cmd.name));
    }
    let count = match optional_pop_count(argv, 2) {
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let key = argv[1];
    let (popped, empty) = match lookup_typed(c.srv, db, key, false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => {
            return if count.is_some() {
                c.cl.reply.null_array()
            } else {
                c.cl.reply.null()
            };
        }
        Typed::Found(l) => {
            let popped: Vec<Vec<u8>> = match count {
                None => pop(l, end).into_iter().collect(),
                Some(n) => pop_range(l, end, n),
            };
            (popped, l.is_empty())
        }
    };
    if !popped.is_empty() {
        self::popped(c, key, end, empty);
        c.dirty(popped.len() as u64);
    }
    match count {
        None => c.cl.reply.bulk(&popped[0]),
        Some(_) => {
            c.cl.reply.array(popped.len());
            for v in &popped {
                c.cl.reply.bulk(v);
            }
        }
    }
}

/// `LPOP key [count]`
pub fn lpop(c: &mut Ctx, argv: &[&[u8]]) {
    pop_generic(c, argv, End::Left);
}

/// `RPOP key [count]`
pub fn rpop(c: &mut Ctx, argv: &[&[u8]]) {
    pop_generic(c, argv, End::Right);
}

/// `LLEN key`
pub fn llen(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => c.cl.reply.int(0),
        Typed::Found(l) => c.cl.reply.int(l.len() as i64),
    }
}

/// `LRANGE key start stop`
pub fn lrange(c: &mut Ctx, argv: &[&[u8]]) {
    let (start, end) = match (arg_i64(argv[2]), arg_i64(argv[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
    };
    let l = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.array(0),
        Typed::Found(l) => l,
    };
    let out = &mut c.cl.reply;
    match clamp_range(start, end, l.len()) {
        None => out.array(0),
        Some((s, e)) => {
            out.array(e - s + 1);
            l.range(s, e, false, |v| reply_element(out, v));
        }
    }
}

/// `LINDEX key index`
pub fn lindex(c: &mut Ctx, argv: &[&[u8]]) {
    // Redis looks the key up before it parses the index.
    let l = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.null(),
        Typed::Found(l) => l,
    };
    let index = match arg_i64(argv[2]) {
        Ok(i) => i,
        Err(e) => return c.cl.reply.error(e),
    };
    let out = &mut c.cl.reply;
    if !l.index_with(index, &mut |v| reply_element(out, v)) {
        out.null();
    }
}

/// `LSET key index element`
pub fn lset(c: &mut Ctx, argv: &[&[u8]]) {
    let l = match lookup_typed(c.srv, c.cl.db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.error(ERR_NO_SUCH_KEY),
        Typed::Found(l) => l,
    };
    let index = match arg_i64(argv[2]) {
        Ok(i) => i,
        Err(e) => return c.cl.reply.error(e),
    };
    if l.replace_at(index, argv[3]) {
        c.dirty(1);
        c.modified(argv[1], NotifyFlags::LIST, "lset");
        c.cl.reply.ok();
    } else {
        c.cl.reply.error("ERR index out of range");
    }
}

/// `LINSERT key BEFORE|AFTER pivot element` — new length, -1 without pivot.
pub fn linsert(c: &mut Ctx, argv: &[&[u8]]) {
    let after = if eq_ic(argv[2], "after") {
        true
    } else if eq_ic(argv[2], "before") {
        false
    } else {
        return c.cl.reply.error(ERR_SYNTAX);
    };
    let l = match lookup_typed(c.srv, c.cl.db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.int(0),
        Typed::Found(l) => l,
    };
    if !l.insert_at_pivot(argv[3], argv[4], after) {
        return c.cl.reply.int(-1);
    }
    let len = l.len();
    c.dirty(1);
    c.modified(argv[1], NotifyFlags::LIST, "linsert");
    c.cl.reply.int(len as i64);
}

/// `LREM key count element` — number removed.
pub fn lrem(c: &mut Ctx, argv: &[&[u8]]) {
    let count = match arg_i64(argv[2]) {
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let (removed, empty) = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.int(0),
        Typed::Found(l) => (l.remove_matching(argv[3], count), l.is_empty()),
    };
    if removed > 0 {
        elements_removed(c, argv[1], NotifyFlags::LIST, "lrem", empty);
    }
    c.dirty(removed as u64);
    c.cl.reply.int(removed as i64);
}

/// `LTRIM key start stop`
pub fn ltrim(c: &mut Ctx, argv: &[&[u8]]) {
    let (start, end) = match (arg_i64(argv[2]), arg_i64(argv[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let (removed, empty) = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.ok(),
        Typed::Found(l) => {
            let llen = l.len();
            // Elements to drop from the left and from the right.
            let (ltrim, rtrim) = match clamp_range(start, end, llen) {
                Some((s, e)) => (s, llen - e - 1),
                None => (llen, 0),
            };
            l.del_range(0, ltrim as i64);
            l.del_range(-(rtrim as i64), rtrim as i64);
            (ltrim + rtrim, l.is_empty())
        }
    };
    // LTRIM notifies even when nothing was trimmed, as Redis does.
    elements_removed(c, argv[1], NotifyFlags::LIST, "ltrim", empty);
    c.dirty(removed as u64);
    c.cl.reply.ok();
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
pub fn lpos(c: &mut Ctx, argv: &[&[u8]]) {
    let (mut rank, mut count, mut maxlen): (i64, i64, i64) = (1, -1, 0);
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        if eq_ic(argv[j], "rank") && more {
            j += 1;
            rank = match parse_i64(argv[j]) {
                // Redis negates the rank in C, so i64::MIN stays i64::MIN and
                // every match from the tail qualifies: like a rank of -1.
                Some(i64::MIN) => -1,
                Some(r) => r,
                None => return c.cl.reply.error(ERR_NOT_INT),
            };
            if rank == 0 {
                return c.cl.reply.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
        } else if eq_ic(argv[j], "count") && more {
            j += 1;
            count = match positive_arg(argv[j], "ERR COUNT can't be negative") {
                Ok(n) => n,
                Err(e) => return c.cl.reply.error(e),
            };
        } else if eq_ic(argv[j], "maxlen") && more {
            j += 1;
            maxlen = match positive_arg(argv[j], "ERR MAXLEN can't be negative") {
                Ok(n) => n,
                Err(e) => return c.cl.reply.error(e),
            };
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let l = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => {
            return if count != -1 {
                c.cl.reply.array(0)
            } else {
                c.cl.reply.null()
            }
        }
        Typed::Found(l) => l,
    };
    let mut skip = rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    let mut scanned: i64 = 0;
    l.scan(rank < 0, &mut |i, v| {
        if maxlen != 0 && scanned >= maxlen {
            return false;
        }
        scanned += 1;
        let equal = match v {
            Element::Str(s) => s == argv[2],
            Element::Int(n) => parse_i64(argv[2]) == Some(n),
        };
        if equal {
            if skip > 0 {
                skip -= 1;
                return true;
            }
            found.push(i as i64);
            if count != 0 && found.len() as i64 >= count.max(1) {
                return false;
            }
        }
        true
    });
    if count != -1 {
        c.cl.reply.array(found.len());
        for i in found {
            c.cl.reply.int(i);
        }
    } else {
        match found.first() {
            Some(&i) => c.cl.reply.int(i),
            None => c.cl.reply.null(),
        }
    }
}

/// Pop from `src` at `from` and push onto `dst` at `to` (LMOVE, RPOPLPUSH).
fn lmove_generic(c: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) {
    let db = c.cl.db;
    let fresh = new_list(c);
    match lookup_typed(c.srv, db, src, false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.null(),
        Typed::Found(_) => {}
    }
    if let Typed::WrongType = lookup_typed(c.srv, db, dst, false, pick) {
        return c.cl.reply.error(ERR_WRONGTYPE);
    }
    let Typed::Found(l) = lookup_typed(c.srv, db, src, false, pick) else {
        return;
    };
    let Some(v) = pop(l, from) else {
        return c.cl.reply.null();
    };
    let dest = match lookup_typed(c.srv, db, dst, false, pick) {
        Typed::Found(d) => d,
        _ => pick(create_value(c.srv, db, dst, Value::List(fresh))).expect("list"),
    };
    push(dest, &v, to);
    // As Redis's lmoveHandlePush: the destination's push event comes first.
    c.modified(dst, NotifyFlags::LIST, push_event(to));
    let src_empty =
        matches!(lookup_typed(c.srv, db, src, false, pick), Typed::Found(l) if l.is_empty());
    popped(c, src, from, src_empty);
    c.dirty(1);
    c.cl.reply.bulk(&v);
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`
pub fn lmove(c: &mut Ctx, argv: &[&[u8]]) {
    let (Some(from), Some(to)) = (parse_end(argv[3]), parse_end(argv[4])) else {
        return c.cl.reply.error(ERR_SYNTAX);
    };
    lmove_generic(c, argv[1], argv[2], from, to);
}

/// `RPOPLPUSH source destination`
pub fn rpoplpush(c: &mut Ctx, argv: &[&[u8]]) {
    lmove_generic(c, argv[1], argv[2], End::Right, End::Left);
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub fn lmpop(c: &mut Ctx, argv: &[&[u8]]) {
    match parse_mpop(argv, is_end) {
        Ok(args) => lmpop_generic(c, &args, false),
        Err(e) => c.cl.reply.error(e),
    }
}

/// The engine behind LMPOP and BLMPOP, on arguments `parse_mpop` checked.
/// When nothing could be popped and `blocking`, nothing is replied (the
/// caller blocks).
fn lmpop_generic(c: &mut Ctx, args: &MpopArgs, blocking: bool) {
    let end = parse_end(args.side).unwrap_or(End::Left);
    let count = args.count;
    let db = c.cl.db;
    for key in &args.keys {
        let (popped, empty) = match lookup_typed(c.srv, db, key, false, pick) {
            // Run again because another key got data: passed over, as
            // Redis 7.0.15 serves the key that did.
            Typed::WrongType if c.retry => continue,
            Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
            Typed::Missing => continue,
            Typed::Found(l) => {
                let popped = pop_range(l, end, count);
                (popped, l.is_empty())
            }
        };
        self::popped(c, key, end, empty);
        c.dirty(popped.len() as u64);
        let name: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
        c.propagate_as(vec![
            name.to_vec(),
            key.to_vec(),
            popped.len().to_string().into_bytes(),
        ]);
        let out = &mut c.cl.reply;
        out.array(2);
        out.bulk(key);
        out.array(popped.len());
        for v in &popped {
            out.bulk(v);
        }
        return;
    }
    if !blocking {
        c.cl.reply.null_array();
    }
}

/// The engine behind BLPOP and BRPOP: `[key, element]` from the first
/// non-empty list, or wait.
fn bpop_generic(c: &mut Ctx, argv: &[&[u8]], end: End) {
    let deadline = match parse_timeout(argv[argv.len() - 1], std::time::Instant::now()) {
        Ok(d) => d,
        Err(e) => return c.cl.reply.error(e),
    };
    let keys = &argv[1..argv.len() - 1];
    let db = c.cl.db;
    for key in keys {
        let (v, empty) = match lookup_typed(c.srv, db, key, false, pick) {
            Typed::WrongType if c.retry => continue,
            Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
            Typed::Missing => continue,
            Typed::Found(l) => match pop(l, end) {
                Some(v) => (v, l.is_empty()),
                None => continue,
            },
        };
        popped(c, key, end, empty);
        c.dirty(1);
        let name: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
        c.propagate_as(vec![name.to_vec(), key.to_vec()]);
        c.cl.reply.array(2);
        c.cl.reply.bulk(key);
        c.cl.reply.bulk(&v);
        return;
    }
    block(c, keys, deadline, argv);
}

/// `BLPOP key [key ...] timeout`
pub fn blpop(c: &mut Ctx, argv: &[&[u8]]) {
    bpop_generic(c, argv, End::Left);
}

/// `BRPOP key [key ...] timeout`
pub fn brpop(c: &mut Ctx, argv: &[&[u8]]) {
    bpop_generic(c, argv, End::Right);
}

/// The engine behind BLMOVE and BRPOPLPUSH: `ends` is (from, to).
fn blmove_generic(
    c: &mut Ctx,
    argv: &[&[u8]],
    src: &[u8],
    dst: &[u8],
    ends: (End, End),
    timeout: &[u8],
) {
    let deadline = match parse_timeout(timeout, std::time::Instant::now()) {
        Ok(d) => d,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    match lookup_typed(c.srv, db, src, false, pick) {
        Typed::WrongType => c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Found(l) if !l.is_empty() => {
            lmove_generic(c, src, dst, ends.0, ends.1);
            // As Redis: BRPOPLPUSH goes out as RPOPLPUSH, BLMOVE as LMOVE,
            // with the sides as the client wrote them, or, served after
            // blocking, as Redis's shared "left"/"right".
            if c.cmd.name == "brpoplpush" {
                c.propagate_as(vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()]);
            } else {
                let side = |e: End, given: &[u8]| -> Vec<u8> {
                    match (c.retry, e) {
                        (false, _) => given.to_vec(),
                        (true, End::Right) => b"right".to_vec(),
                        (true, End::Left) => b"left".to_vec(),
                    }
                };
                let (from, to) = (side(ends.0, argv[3]), side(ends.1, argv[4]));
                c.propagate_as(vec![
                    b"LMOVE".to_vec(),
                    src.to_vec(),
                    dst.to_vec(),
                    from,
                    to,
                ]);
            }
        }
        _ => block(c, &[src], deadline, argv),
    }
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`
pub fn blmove(c: &mut Ctx, argv: &[&[u8]]) {
    let (Some(from), Some(to)) = (parse_end(argv[3]), parse_end(argv[4])) else {
        return c.cl.reply.error(ERR_SYNTAX);
    };
    blmove_generic(c, argv, argv[1], argv[2], (from, to), argv[5]);
}

/// `BRPOPLPUSH source destination timeout`
pub fn brpoplpush(c: &mut Ctx, argv: &[&[u8]]) {
    blmove_generic(c, argv, argv[1], argv[2], (End::Right, End::Left), argv[3]);
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub fn blmpop(c: &mut Ctx, argv: &[&[u8]]) {
    super::blocking::block_mpop(c, argv, is_end, lmpop_generic);
}
