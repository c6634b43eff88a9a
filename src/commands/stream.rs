//! Stream commands (Redis's t_stream.c): XADD, XRANGE, XREAD, consumer
//! groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM), XINFO,
//! XTRIM, XDEL, XSETID, with Redis 7.0's replies, errors and propagation:
//! XADD goes out with the ID it generated and an approximate trim as the
//! exact one it did; XREADGROUP, XCLAIM and XAUTOCLAIM go out as the
//! XCLAIM … FORCE JUSTID and XGROUP SETID commands that rebuild the same
//! group state on a replica or from the AOF.

use std::time::Instant;

use super::blocking::block;
use super::*;
use crate::db::stream::{Consumer, Group, Nack, NodeLimits, ENTRIES_READ_UNKNOWN};
use crate::db::{Stream, StreamId, Value};
use crate::protocol::reply::Reply;

const ERR_INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
/// XREAD/XREADGROUP that blocked without COUNT get at most this many
/// entries when served (Redis's XREAD_BLOCKED_DEFAULT_COUNT).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

fn pick(v: &mut Value) -> Option<&mut Stream> {
    match v {
        Value::Stream(s) => Some(s),
        _ => None,
    }
}

fn limits(c: &Ctx) -> NodeLimits {
    NodeLimits {
        max_bytes: c.srv.config.stream_node_max_bytes as usize,
        max_entries: c.srv.config.stream_node_max_entries,
    }
}

/// Redis's string2ull: a strict signed integer that is not negative, or
/// else what C's strtoull accepts (spaces, a sign, leading zeros), whole.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::util::parse_i64(s) {
        return (v >= 0).then_some(v as u64);
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if i == s.len() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &s[i..] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's streamGenericParseIDOrReply: `-`, `+` (unless strict), `ms`,
/// `ms-seq`, and with `seq_star` also `ms-*`. Returns the ID and whether
/// the sequence was given.
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Result<(StreamId, bool), &'static str> {
    // A C string: what follows a NUL byte is not seen.
    let arg = &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())];
    if arg.len() > 127 {
        return Err(ERR_INVALID_ID);
    }
    if arg == b"-" || arg == b"+" {
        if strict {
            return Err(ERR_INVALID_ID);
        }
        return Ok((
            if arg == b"-" {
                StreamId::MIN
            } else {
                StreamId::MAX
            },
            true,
        ));
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(p) => (&arg[..p], Some(&arg[p + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms_part).ok_or(ERR_INVALID_ID)?;
    match seq_part {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if seq_star => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((StreamId::new(ms, parse_u64(s).ok_or(ERR_INVALID_ID)?), true)),
    }
}

fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, &'static str> {
    parse_id_full(arg, missing_seq, false, false).map(|(id, _)| id)
}

fn parse_strict_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, &'static str> {
    parse_id_full(arg, missing_seq, true, false).map(|(id, _)| id)
}

/// An interval bound (`(` makes it exclusive): the ID and whether excluded.
fn parse_interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), &'static str> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_strict_id(&arg[1..], missing_seq)?, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

/// The start of an interval, exclusive bounds moved inward.
fn interval_start(arg: &[u8]) -> Result<StreamId, String> {
    let (id, ex) = parse_interval_id(arg, 0).map_err(str::to_string)?;
    if ex {
        return id
            .incr()
            .ok_or_else(|| "ERR invalid start ID for the interval".to_string());
    }
    Ok(id)
}

fn interval_end(arg: &[u8]) -> Result<StreamId, String> {
    let (id, ex) = parse_interval_id(arg, u64::MAX).map_err(str::to_string)?;
    if ex {
        return id
            .decr()
            .ok_or_else(|| "ERR invalid end ID for the interval".to_string());
    }
    Ok(id)
}

fn id_bytes(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}

/// An entry's fields and values, owned.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;
/// An entry as replies carry it.
type OwnedEntry = (StreamId, Fields);

/// Live entries in `[start, end]`, at most `count` (0: all).
fn collect(s: &Stream, start: StreamId, end: StreamId, count: usize, rev: bool) -> Vec<OwnedEntry> {
    let mut out = Vec::new();
    s.range(start, end, rev, &mut |e| {
        out.push((
            e.id,
            e.fields
                .iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect(),
        ));
        count == 0 || out.len() < count
    });
    out
}

fn reply_entry(out: &mut Reply, id: StreamId, fields: &[(Vec<u8>, Vec<u8>)]) {
    out.array(2);
    out.bulk(&id_bytes(id));
    out.array(fields.len() * 2);
    for (f, v) in fields {
        out.bulk(f);
        out.bulk(v);
    }
}

fn reply_entries(out: &mut Reply, entries: &[OwnedEntry]) {
    out.array(entries.len());
    for (id, fields) in entries {
        reply_entry(out, *id, fields);
    }
}

fn nogroup_key_or_group(key: &[u8], group: &[u8]) -> String {
    format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        c_str(key),
        c_str(group)
    )
}

/// The stream at `key` for reading: Ok(None) when missing.
fn read_stream<'s>(c: &'s mut Ctx, key: &[u8]) -> Result<Option<&'s mut Stream>, &'static str> {
    let db = c.cl.db;
    match lookup_typed(c.srv, db, key, true, pick) {
        Typed::Missing => Ok(None),
        Typed::WrongType => Err(ERR_WRONGTYPE),
        Typed::Found(s) => Ok(Some(s)),
    }
}

fn write_stream<'s>(c: &'s mut Ctx, key: &[u8]) -> Result<Option<&'s mut Stream>, &'static str> {
    let db = c.cl.db;
    match lookup_typed(c.srv, db, key, false, pick) {
        Typed::Missing => Ok(None),
        Typed::WrongType => Err(ERR_WRONGTYPE),
        Typed::Found(s) => Ok(Some(s)),
    }
}

// ------------------------------------------------------------ XADD / XTRIM

#[derive(Default)]
struct TrimArgs {
    maxlen: Option<u64>,
    minid: Option<StreamId>,
    approx: bool,
    limit: i64,
    /// Index of the MAXLEN/MINID value (rewritten for propagation).
    arg_idx: usize,
    nomkstream: bool,
    /// XADD: the ID given (and whether its sequence was), its index.
    id: Option<(StreamId, bool)>,
    id_idx: usize,
}

/// Redis's streamParseAddOrTrimArgsOrReply. Returns the index where XADD's
/// ID is (or argv.len() when none was found).
fn parse_add_or_trim(c: &Ctx, argv: &[&[u8]], xadd: bool) -> Result<(TrimArgs, usize), String> {
    let mut a = TrimArgs::default();
    let mut i = 2;
    let mut limit_given = false;
    let mut has_strategy = false;
    while i < argv.len() {
        let moreargs = argv.len() - 1 - i;
        let opt = argv[i];
        if xadd && opt == b"*" {
            break;
        } else if (eq_ic(opt, "maxlen") || eq_ic(opt, "minid")) && moreargs > 0 {
            if has_strategy {
                return Err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible".into());
            }
            a.approx = false;
            let next = argv[i + 1];
            if moreargs >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if moreargs >= 2 && next == b"=" {
                i += 1;
            }
            if eq_ic(opt, "maxlen") {
                let n = arg_i64(argv[i + 1]).map_err(str::to_string)?;
                if n < 0 {
                    return Err("ERR The MAXLEN argument must be >= 0.".into());
                }
                a.maxlen = Some(n as u64);
            } else {
                a.minid = Some(parse_strict_id(argv[i + 1], 0).map_err(str::to_string)?);
            }
            i += 1;
            has_strategy = true;
            a.arg_idx = i;
        } else if eq_ic(opt, "limit") && moreargs > 0 {
            let n = arg_i64(argv[i + 1]).map_err(str::to_string)?;
            if n < 0 {
                return Err("ERR The LIMIT argument must be >= 0.".into());
            }
            a.limit = n;
            limit_given = true;
            i += 1;
        } else if xadd && eq_ic(opt, "nomkstream") {
            a.nomkstream = true;
        } else if xadd {
            let parsed = parse_id_full(opt, 0, true, true).map_err(str::to_string)?;
            a.id = Some(parsed);
            break;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    if a.limit != 0 && !has_strategy {
        return Err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy".into(),
        );
    }
    if !xadd && !has_strategy {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy".into());
    }
    if c.cl.must_obey() {
        // The trim was rewritten to be exact where it was made.
        a.limit = 0;
    } else if limit_given {
        if !a.approx {
            return Err(
                "ERR syntax error, LIMIT cannot be used without the special ~ option".into(),
            );
        }
    } else if a.approx {
        a.limit = 100 * c.srv.config.stream_node_max_entries;
        if a.limit <= 0 {
            a.limit = 10000;
        }
    } else {
        a.limit = 0;
    }
    a.id_idx = i;
    Ok((a, i))
}

/// An approximate trim propagates as the exact one it did (Redis's
/// streamRewriteApproxSpecifier and streamRewriteTrimArgument).
fn rewrite_trim(s: &Stream, a: &TrimArgs, argv: &mut [Vec<u8>]) {
    argv[a.arg_idx - 1] = b"=".to_vec();
    argv[a.arg_idx] = if a.maxlen.is_some() {
        s.length.to_string().into_bytes()
    } else {
        id_bytes(s.edge_id(true).unwrap_or(StreamId::MIN))
    };
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]`
pub fn xadd(c: &mut Ctx, argv: &[&[u8]]) {
    let (a, id_pos) = match parse_add_or_trim(c, argv, true) {
        Ok(x) => x,
        Err(e) => return c.cl.reply.error(&e),
    };
    let field_pos = id_pos + 1;
    if argv.len() < field_pos + 2 || !(argv.len() - field_pos).is_multiple_of(2) {
        return c.cl.reply.error(&arity_error("xadd"));
    }
    if let Some((id, true)) = a.id {
        if id == StreamId::MIN {
            return c
                .cl
                .reply
                .error("ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let key = argv[1];
    let db = c.cl.db;
    let now = c.now_ms() as u64;
    let lim = limits(c);
    let s = match lookup_typed(c.srv, db, key, false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing if a.nomkstream => return c.cl.reply.null(),
        Typed::Missing => pick(create_value(
            c.srv,
            db,
            key,
            Value::Stream(Box::new(Stream::new())),
        ))
        .expect("stream"),
        Typed::Found(s) => s,
    };
    if s.last_id == StreamId::MAX {
        return c
            .cl
            .reply
            .error("ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let id = match a.id {
        Some((id, true)) => Some(id),
        Some((id, false)) => {
            if s.last_id.ms == id.ms {
                s.last_id.incr().filter(|n| n.ms == id.ms)
            } else {
                Some(id)
            }
        }
        None => {
            if now > s.last_id.ms {
                Some(StreamId::new(now, 0))
            } else {
                s.last_id.incr()
            }
        }
    };
    let Some(id) = id.filter(|&id| id > s.last_id) else {
        return c.cl.reply.error(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        );
    };
    let total: usize = argv[field_pos..].iter().map(|x| x.len()).sum();
    if total > 1 << 30 {
        return c.cl.reply.error("ERR Elements are too large to be stored");
    }
    let fields: Vec<(&[u8], &[u8])> = argv[field_pos..].chunks(2).map(|p| (p[0], p[1])).collect();
    s.append(id, &fields, lim);
    c.cl.reply.bulk(&id_bytes(id));
    c.modified(key, NotifyFlags::STREAM, "xadd");
    c.dirty(1);
    // Propagated with the ID it got and the exact trim it did (copied
    // only when something consumes propagation).
    let rewrite_id = !matches!(a.id, Some((_, true)));
    let trims = a.maxlen.is_some() || a.minid.is_some();
    let propagating = c.srv.propagating();
    if trims || (rewrite_id && propagating) {
        let mut out: Vec<Vec<u8>> = if propagating {
            argv.iter().map(|x| x.to_vec()).collect()
        } else {
            Vec::new()
        };
        if trims {
            let s = write_stream(c, key).ok().flatten().expect("stream");
            let removed = s.trim(a.maxlen, a.minid, a.approx, a.limit);
            if propagating && a.approx {
                rewrite_trim(s, &a, &mut out);
            }
            if removed > 0 {
                c.notify(NotifyFlags::STREAM, "xtrim", key);
            }
        }
        if propagating && rewrite_id {
            out[a.id_idx] = id_bytes(id);
        }
        if propagating && (a.approx || rewrite_id) {
            c.propagate_as(out);
        }
    }
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`
pub fn xtrim(c: &mut Ctx, argv: &[&[u8]]) {
    let key = argv[1];
    // The arguments are checked before the key is looked up, as Redis.
    let a = match parse_add_or_trim(c, argv, false) {
        Ok((a, _)) => a,
        Err(e) => return c.cl.reply.error(&e),
    };
    match write_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(None) => return c.cl.reply.int(0),
        Ok(Some(_)) => {}
    }
    let s = write_stream(c, key).ok().flatten().expect("stream");
    let removed = s.trim(a.maxlen, a.minid, a.approx, a.limit);
    if removed > 0 && a.approx {
        let mut out: Vec<Vec<u8>> = argv.iter().map(|x| x.to_vec()).collect();
        rewrite_trim(s, &a, &mut out);
        c.propagate_as(out);
    }
    if removed > 0 {
        c.modified(key, NotifyFlags::STREAM, "xtrim");
        c.dirty(removed as u64);
    }
    c.cl.reply.int(removed);
}

/// `XDEL key id [id ...]`
pub fn xdel(c: &mut Ctx, argv: &[&[u8]]) {
    let key = argv[1];
    match write_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(None) => return c.cl.reply.int(0),
        Ok(Some(_)) => {}
    }
    // All parsed before any is applied, as Redis.
    let ids: Vec<StreamId> = match argv[2..].iter().map(|a| parse_strict_id(a, 0)).collect() {
        Ok(ids) => ids,
        Err(e) => return c.cl.reply.error(e),
    };
    let s = write_stream(c, key).ok().flatten().expect("stream");
    let deleted = ids.into_iter().filter(|&id| s.delete(id)).count();
    if deleted > 0 {
        c.modified(key, NotifyFlags::STREAM, "xdel");
        c.dirty(deleted as u64);
    }
    c.cl.reply.int(deleted as i64);
}

/// `XLEN key`
pub fn xlen(c: &mut Ctx, argv: &[&[u8]]) {
    match read_stream(c, argv[1]) {
        Err(e) => c.cl.reply.error(e),
        Ok(None) => c.cl.reply.int(0),
        Ok(Some(s)) => {
            let n = s.length as i64;
            c.cl.reply.int(n)
        }
    }
}

fn range_generic(c: &mut Ctx, argv: &[&[u8]], rev: bool) {
    let (start_arg, end_arg) = if rev {
        (argv[3], argv[2])
    } else {
        (argv[2], argv[3])
    };
    let start = match interval_start(start_arg) {
        Ok(id) => id,
        Err(e) => return c.cl.reply.error(&e),
    };
    let end = match interval_end(end_arg) {
        Ok(id) => id,
        Err(e) => return c.cl.reply.error(&e),
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        if eq_ic(argv[j], "count") && j + 1 < argv.len() {
            count = match arg_i64(argv[j + 1]) {
                Ok(n) => n.max(0),
                Err(e) => return c.cl.reply.error(e),
            };
            j += 2;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    let s = match read_stream(c, argv[1]) {
        Err(e) => return c.cl.reply.error(e),
        Ok(None) => return c.cl.reply.array(0),
        Ok(Some(s)) => s,
    };
    if count == 0 {
        return c.cl.reply.null_array();
    }
    let entries = collect(s, start, end, count.max(0) as usize, rev);
    reply_entries(&mut c.cl.reply, &entries);
}

/// `XRANGE key start end [COUNT count]`
pub fn xrange(c: &mut Ctx, argv: &[&[u8]]) {
    range_generic(c, argv, false);
}

/// `XREVRANGE key end start [COUNT count]`
pub fn xrevrange(c: &mut Ctx, argv: &[&[u8]]) {
    range_generic(c, argv, true);
}

// ---------------------------------------------------------------- XREAD

/// What one key of XREAD/XREADGROUP asks for.
enum ReadFrom {
    After(StreamId),
    /// XREADGROUP's `>`: entries never delivered to the group.
    New,
}

fn propagate_xclaim(
    c: &mut Ctx,
    key: &[u8],
    group_name: &[u8],
    id: StreamId,
    nack: &Nack,
    group_last: StreamId,
) {
    if !c.srv.propagating() {
        return;
    }
    let id = id_bytes(id);
    let time = nack.delivery_time.to_string();
    let count = nack.delivery_count.to_string();
    let last = id_bytes(group_last);
    let db = c.cl.db;
    c.srv.propagate(
        db,
        &[
            b"XCLAIM",
            key,
            group_name,
            &nack.consumer,
            b"0",
            &id,
            b"TIME",
            time.as_bytes(),
            b"RETRYCOUNT",
            count.as_bytes(),
            b"FORCE",
            b"JUSTID",
            b"LASTID",
            &last,
        ],
    );
}

fn propagate_group_id(c: &mut Ctx, key: &[u8], group_name: &[u8], g_last: StreamId, read: i64) {
    if !c.srv.propagating() {
        return;
    }
    let last = id_bytes(g_last);
    let read = read.to_string();
    let db = c.cl.db;
    c.srv.propagate(
        db,
        &[
            b"XGROUP",
            b"SETID",
            key,
            group_name,
            &last,
            b"ENTRIESREAD",
            read.as_bytes(),
        ],
    );
}

fn propagate_consumer_creation(c: &mut Ctx, key: &[u8], group_name: &[u8], consumer: &[u8]) {
    if !c.srv.propagating() {
        return;
    }
    let db = c.cl.db;
    c.srv.propagate(
        db,
        &[b"XGROUP", b"CREATECONSUMER", key, group_name, consumer],
    );
}

/// Make sure the group has consumer `name` (created with its event and a
/// change counted when missing) and refresh its seen time (Redis's
/// streamLookupConsumer + streamCreateConsumer). Whether it was created.
fn ensure_consumer(c: &mut Ctx, g: &mut Group, key: &[u8], name: &[u8], now: i64) -> bool {
    let mut created = false;
    let consumer = g.consumers.entry(name.to_vec()).or_insert_with(|| {
        created = true;
        Consumer::default()
    });
    consumer.seen_time = now;
    if created {
        c.notify(NotifyFlags::STREAM, "xgroup-createconsumer", key);
        c.dirty(1);
    }
    created
}

/// A pending entry whose stream entry is gone leaves the PEL, and the
/// change propagates (an XCLAIM of a missing entry drops it on a replica).
fn drop_gone_pending(c: &mut Ctx, g: &mut Group, key: &[u8], gname: &[u8], id: StreamId) -> bool {
    let Some(nack) = g.pel.remove(&id) else {
        return false;
    };
    if let Some(prev) = g.consumers.get_mut(&nack.consumer) {
        prev.pel.remove(&id);
    }
    propagate_xclaim(c, key, gname, id, &nack, g.last_id);
    c.dirty(1);
    true
}

/// Give pending entry `id` to consumer `name` (which exists) delivered at
/// `time`, its delivery count set to `count` or else bumped when `bump`;
/// propagated as the XCLAIM that does the same on a replica.
#[allow(clippy::too_many_arguments)]
fn claim(
    c: &mut Ctx,
    g: &mut Group,
    key: &[u8],
    gname: &[u8],
    id: StreamId,
    name: &[u8],
    time: i64,
    count: Option<u64>,
    bump: bool,
) {
    claim_to(g, id, name);
    let nack = g.pel.get_mut(&id).expect("pending entry");
    nack.delivery_time = time;
    match count {
        Some(n) => nack.delivery_count = n,
        None if bump => nack.delivery_count += 1,
        None => {}
    }
    let nack = nack.clone();
    propagate_xclaim(c, key, gname, id, &nack, g.last_id);
    c.dirty(1);
}

/// Entry `id` is delivered to group `gname`: past the group's last ID, it
/// becomes the last ID and the group's read counter follows (counted on
/// while it is known and no deleted entry lies ahead, estimated otherwise,
/// as Redis's streamReplyWithRange). Whether the last ID moved.
fn deliver(s: &mut Stream, gname: &[u8], id: StreamId) -> bool {
    if id <= s.groups[gname].last_id {
        return false;
    }
    let known = s.groups[gname].entries_read != ENTRIES_READ_UNKNOWN;
    let read = if known && !s.range_has_tombstones(id, StreamId::MAX) {
        Some(s.groups[gname].entries_read + 1)
    } else if s.entries_added > 0 {
        Some(
            s.estimate_distance(id)
                .map_or(ENTRIES_READ_UNKNOWN, |d| d as i64),
        )
    } else {
        None
    };
    let g = s.groups.get_mut(gname).expect("group");
    if let Some(read) = read {
        g.entries_read = read;
    }
    g.last_id = id;
    true
}

/// One stream of an XREADGROUP call, as [`serve_group`] serves it.
#[derive(Clone, Copy)]
struct GroupRead<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    from: &'a ReadFrom,
    count: usize,
    noack: bool,
}

/// Serve one stream of XREADGROUP: new entries (`>`), delivered and added
/// to the PELs, or the consumer's history after an ID. Writes the entries
/// array; writes nothing when the stream key or the group is missing.
fn serve_group(c: &mut Ctx, read: GroupRead) {
    let GroupRead {
        key,
        group: group_name,
        consumer,
        noack,
        ..
    } = read;
    let now = c.now_ms();
    let db = c.cl.db;
    let Typed::Found(s) = lookup_typed(c.srv, db, key, true, pick) else {
        return;
    };
    let s: *mut Stream = s;
    // SAFETY: the stream stays in the keyspace for this call; the borrow
    // of the server is released so replies and propagation can be made.
    let s = unsafe { &mut *s };
    let Some(g) = s.groups.get_mut(group_name) else {
        return;
    };
    // A new consumer reaches replicas as Redis 7.0.15 sends it: explicitly
    // under NOACK (no XCLAIM will name it), otherwise through the XCLAIMs of
    // the entries it is given. Where it is given none, Redis sends nothing
    // and its replicas lack the consumer; here it is sent then (below), so
    // replicas and the AOF hold the same groups.
    let created = ensure_consumer(c, g, key, consumer, now);
    if created && noack {
        propagate_consumer_creation(c, key, group_name, consumer);
    }
    serve_read(c, s, read, now);
    // Not given any entry (the PEL of a consumer made now holds only what
    // this read gave it), no XCLAIM named it.
    if created && !noack && s.groups[group_name].consumers[consumer].pel.is_empty() {
        propagate_consumer_creation(c, key, group_name, consumer);
    }
}

/// The read of [`serve_group`] for a consumer that exists: replies with the
/// entries and propagates what it changed.
fn serve_read(c: &mut Ctx, s: &mut Stream, read: GroupRead, now: i64) {
    let GroupRead {
        key,
        group: group_name,
        consumer,
        from,
        count,
        noack,
    } = read;
    let g = s.groups.get_mut(group_name).expect("group");
    match from {
        ReadFrom::After(after) => {
            // History: the consumer's own pending entries after `after`.
            let Some(start) = after.incr() else {
                c.cl.reply.array(0);
                return;
            };
            let pel: Vec<StreamId> = g.consumers[consumer]
                .pel
                .range(start..)
                .take(if count == 0 { usize::MAX } else { count })
                .copied()
                .collect();
            let mut out = Vec::with_capacity(pel.len());
            for id in pel {
                let fields = s.lookup(id);
                let g = s.groups.get_mut(group_name).expect("group");
                if fields.is_some() {
                    if let Some(n) = g.pel.get_mut(&id) {
                        n.delivery_time = now;
                        n.delivery_count += 1;
                    }
                }
                out.push((id, fields));
            }
            c.cl.reply.array(out.len());
            for (id, fields) in &out {
                match fields {
                    Some(f) => reply_entry(&mut c.cl.reply, *id, f),
                    None => {
                        c.cl.reply.array(2);
                        c.cl.reply.bulk(&id_bytes(*id));
                        c.cl.reply.null_array();
                    }
                }
            }
        }
        ReadFrom::New => {
            let Some(start) = g.last_id.incr() else {
                c.cl.reply.array(0);
                return;
            };
            let entries = collect(s, start, StreamId::MAX, count, false);
            let propagating = c.srv.propagating();
            let mut propagate_last = false;
            let mut claims = Vec::new();
            for (id, _) in &entries {
                let id = *id;
                if deliver(s, group_name, id) {
                    // Under NOACK only, as Redis 7.0.15: otherwise each
                    // entry's XCLAIM carries the group's last ID.
                    propagate_last = noack;
                }
                let g = s.groups.get_mut(group_name).expect("group");
                if !noack {
                    let nack = Nack {
                        delivery_time: now,
                        delivery_count: 1,
                        consumer: consumer.to_vec(),
                    };
                    if let Some(old) = g.pel.insert(id, nack) {
                        if let Some(prev) = g.consumers.get_mut(&old.consumer) {
                            prev.pel.remove(&id);
                        }
                    }
                    g.consumers
                        .get_mut(consumer)
                        .expect("consumer")
                        .pel
                        .insert(id);
                    if propagating {
                        claims.push((id, g.pel[&id].clone(), g.last_id));
                    }
                }
            }
            reply_entries(&mut c.cl.reply, &entries);
            for (id, nack, last) in claims {
                propagate_xclaim(c, key, group_name, id, &nack, last);
            }
            if propagate_last {
                let g = &s.groups[group_name];
                let (last, read) = (g.last_id, g.entries_read);
                propagate_group_id(c, key, group_name, last, read);
            }
        }
    }
}

/// `XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]`
pub fn xread(c: &mut Ctx, argv: &[&[u8]]) {
    read_generic(c, argv, false);
}

/// `XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key [key ...] id [id ...]`
pub fn xreadgroup(c: &mut Ctx, argv: &[&[u8]]) {
    read_generic(c, argv, true);
}

fn read_generic(c: &mut Ctx, argv: &[&[u8]], xreadgroup: bool) {
    let mut timeout: Option<i64> = None;
    let mut count: usize = 0;
    let mut streams_arg = 0;
    let mut streams_count = 0;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut noack = false;
    let mut i = 1;
    while i < argv.len() {
        let moreargs = argv.len() - i - 1;
        let o = argv[i];
        if eq_ic(o, "block") && moreargs > 0 {
            if c.srv.script_run.is_some() {
                return c.cl.reply.error(&format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    c_str(argv[0])
                ));
            }
            i += 1;
            match parse_timeout_ms(argv[i]) {
                Ok(ms) => timeout = Some(ms),
                Err(e) => return c.cl.reply.error(e),
            }
        } else if eq_ic(o, "count") && moreargs > 0 {
            i += 1;
            match arg_i64(argv[i]) {
                Ok(n) => count = n.max(0) as usize,
                Err(e) => return c.cl.reply.error(e),
            }
        } else if eq_ic(o, "streams") && moreargs > 0 {
            streams_arg = i + 1;
            streams_count = argv.len() - streams_arg;
            if !streams_count.is_multiple_of(2) {
                return c.cl.reply.error(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                );
            }
            streams_count /= 2;
            break;
        } else if eq_ic(o, "group") && moreargs >= 2 {
            if !xreadgroup {
                return c.cl.reply.error(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                );
            }
            group = Some((argv[i + 1], argv[i + 2]));
            i += 2;
        } else if eq_ic(o, "noack") {
            if !xreadgroup {
                return c.cl.reply.error(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                );
            }
            noack = true;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        i += 1;
    }
    if streams_arg == 0 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    if xreadgroup && group.is_none() {
        return c.cl.reply.error("ERR Missing GROUP option for XREADGROUP");
    }
    let keys = &argv[streams_arg..streams_arg + streams_count];
    let id_args = &argv[streams_arg + streams_count..];
    // On a retry (a key got data) the client waits on: a missing key, a
    // key of another type, are not errors then.
    let retry = c.retry;
    let mut froms = Vec::with_capacity(streams_count);
    for (key, id_arg) in keys.iter().zip(id_args) {
        let db = c.cl.db;
        let stream = match lookup_typed(c.srv, db, key, true, pick) {
            Typed::WrongType | Typed::Missing if retry && group.is_some() => {
                // Redis 7.0.15's signalDeletedKeyAsReady.
                return c
                    .cl
                    .reply
                    .error("UNBLOCKED the stream key no longer exists");
            }
            // Another of its keys got data: this one is passed over
            // (Redis 7.0.15 serves the key that got data).
            Typed::WrongType if retry => {
                froms.push(ReadFrom::After(StreamId::MAX));
                continue;
            }
            Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
            Typed::Missing => None,
            Typed::Found(s) => Some(s),
        };
        if let Some((gname, _)) = group {
            let has_group = stream
                .as_ref()
                .is_some_and(|s| s.groups.contains_key(gname));
            if !has_group {
                if retry {
                    return c.cl.reply.error(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    );
                }
                return c.cl.reply.error(&format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    c_str(key),
                    c_str(gname)
                ));
            }
        }
        let from = if *id_arg == b"$" {
            if xreadgroup {
                return c.cl.reply.error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
            }
            ReadFrom::After(stream.map_or(StreamId::MIN, |s| s.last_id))
        } else if *id_arg == b">" {
            if !xreadgroup {
                return c.cl.reply.error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
            }
            ReadFrom::New
        } else {
            match parse_strict_id(id_arg, 0) {
                // Redis stores `>` as the highest ID, so XREADGROUP reads
                // that ID written out as `>`.
                Ok(StreamId::MAX) if xreadgroup => ReadFrom::New,
                Ok(id) => ReadFrom::After(id),
                Err(e) => return c.cl.reply.error(e),
            }
        };
        froms.push(from);
    }
    if retry && count == 0 {
        count = BLOCKED_DEFAULT_COUNT;
    }
    // Which streams can be served now.
    // (A consumer is made only when something is served to it, as Redis
    // 7.0.15: one that blocks does not exist until it gets data.)
    let mut serve = Vec::new();
    for (k, (key, from)) in keys.iter().zip(&froms).enumerate() {
        let db = c.cl.db;
        let Typed::Found(s) = lookup_typed(c.srv, db, key, true, pick) else {
            continue;
        };
        // A blocked reader is served once the stream's last ID passes the
        // one it waits after, even if what was added is gone again (a
        // MAXLEN 0, an XDEL in the same MULTI): it gets an empty read, as
        // from Redis 7.0.15's serveClientsBlockedOnStreamKey.
        let ready = match (group, from) {
            (Some(_), ReadFrom::After(_)) => true,
            (Some((gname, _)), ReadFrom::New) if retry => s.last_id > s.groups[gname].last_id,
            (Some((gname, _)), ReadFrom::New) => s.has_entries_after(s.groups[gname].last_id),
            (None, ReadFrom::After(gt)) if retry => s.last_id > *gt,
            (None, ReadFrom::After(gt)) => s.has_entries_after(*gt),
            (None, ReadFrom::New) => false,
        };
        if ready {
            serve.push(k);
        }
    }
    // Propagated as its effects (XCLAIM, XGROUP SETID), never as itself.
    c.prevent_propagation();
    if !serve.is_empty() {
        if c.cl.reply.is_resp3() {
            c.cl.reply.map(serve.len());
        } else {
            c.cl.reply.array(serve.len());
        }
        for k in serve {
            let key = keys[k];
            if !c.cl.reply.is_resp3() {
                c.cl.reply.array(2);
            }
            c.cl.reply.bulk(key);
            match group {
                Some((gname, cname)) => {
                    let read = GroupRead {
                        key,
                        group: gname,
                        consumer: cname,
                        from: &froms[k],
                        count,
                        noack,
                    };
                    serve_group(c, read);
                    c.dirty(1);
                }
                None => {
                    let ReadFrom::After(gt) = froms[k] else {
                        unreachable!("XREAD reads after an ID")
                    };
                    let db = c.cl.db;
                    let Typed::Found(s) = lookup_typed(c.srv, db, key, true, pick) else {
                        unreachable!("served streams exist")
                    };
                    let entries = match gt.incr() {
                        Some(start) => collect(s, start, StreamId::MAX, count, false),
                        None => Vec::new(),
                    };
                    reply_entries(&mut c.cl.reply, &entries);
                }
            }
        }
        return;
    }
    if retry {
        return;
    }
    let Some(ms) = timeout else {
        return c.cl.reply.null_array();
    };
    let deadline = if ms == 0 {
        None
    } else {
        Some(Instant::now() + std::time::Duration::from_millis(ms as u64))
    };
    // The command is run again when a key gets data, with `$` replaced by
    // the ID it stood for now.
    let mut stored: Vec<&[u8]> = argv.to_vec();
    let resolved: Vec<Vec<u8>> = froms
        .iter()
        .map(|f| match f {
            ReadFrom::After(id) => id_bytes(*id),
            ReadFrom::New => b">".to_vec(),
        })
        .collect();
    for (j, r) in resolved.iter().enumerate() {
        stored[streams_arg + streams_count + j] = r;
    }
    block(c, keys, deadline, &stored);
    if let Some(b) = c.cl.blocked.as_mut() {
        b.stream = true;
    }
}

// ---------------------------------------------------------------- groups

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

fn entries_read_arg(arg: &[u8]) -> Result<i64, &'static str> {
    let n = arg_i64(arg)?;
    if n < 0 && n != ENTRIES_READ_UNKNOWN {
        return Err("ERR value for ENTRIESREAD must be positive or -1");
    }
    Ok(n)
}

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP …`
pub fn xgroup(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    if sub == "help" {
        return reply_help(c, XGROUP_HELP);
    }
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    if sub == "create" {
        let mut i = 5;
        while i < argv.len() {
            if eq_ic(argv[i], "mkstream") {
                mkstream = true;
                i += 1;
            } else if eq_ic(argv[i], "entriesread") && i + 1 < argv.len() {
                match entries_read_arg(argv[i + 1]) {
                    Ok(n) => entries_read = n,
                    Err(e) => return c.cl.reply.error(e),
                }
                i += 2;
            } else {
                return subcommand_syntax_error(c, argv, "XGROUP");
            }
        }
    }
    if sub == "setid" {
        if argv.len() == 7 {
            if !eq_ic(argv[5], "entriesread") {
                return subcommand_syntax_error(c, argv, "XGROUP");
            }
            match entries_read_arg(argv[6]) {
                Ok(n) => entries_read = n,
                Err(e) => return c.cl.reply.error(e),
            }
        } else if argv.len() != 5 {
            return subcommand_syntax_error(c, argv, "XGROUP");
        }
    }
    let key = argv[2];
    let gname = argv[3];
    let exists = match write_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(s) => s.is_some(),
    };
    if !exists && !mkstream {
        return c.cl.reply.error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
    }
    let has_group = exists
        && write_stream(c, key)
            .ok()
            .flatten()
            .is_some_and(|s| s.groups.contains_key(gname));
    if !has_group && matches!(sub, "setid" | "createconsumer" | "delconsumer") {
        return c.cl.reply.error(&format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            c_str(gname),
            c_str(key)
        ));
    }
    let now = c.now_ms();
    match sub {
        "create" if argv.len() <= 8 => {
            let last = if argv[4] == b"$" {
                None
            } else {
                match parse_strict_id(argv[4], 0) {
                    Ok(id) => Some(id),
                    Err(e) => return c.cl.reply.error(e),
                }
            };
            if !exists {
                let db = c.cl.db;
                create_value(c.srv, db, key, Value::Stream(Box::new(Stream::new())));
                c.signal_modified(key);
            }
            let s = write_stream(c, key).ok().flatten().expect("stream");
            let last = last.unwrap_or(s.last_id);
            if s.groups.contains_key(gname) {
                return c
                    .cl
                    .reply
                    .error("BUSYGROUP Consumer Group name already exists");
            }
            s.groups.insert(
                gname.to_vec(),
                Group {
                    last_id: last,
                    entries_read,
                    ..Group::default()
                },
            );
            c.cl.reply.ok();
            c.dirty(1);
            c.notify(NotifyFlags::STREAM, "xgroup-create", key);
        }
        "setid" => {
            let s = write_stream(c, key).ok().flatten().expect("stream");
            let id = if argv[4] == b"$" {
                s.last_id
            } else {
                match parse_id(argv[4], 0) {
                    Ok(id) => id,
                    Err(e) => return c.cl.reply.error(e),
                }
            };
            let g = s.groups.get_mut(gname).expect("group");
            g.last_id = id;
            g.entries_read = entries_read;
            c.cl.reply.ok();
            c.dirty(1);
            c.notify(NotifyFlags::STREAM, "xgroup-setid", key);
        }
        "destroy" => {
            let s = write_stream(c, key).ok().flatten().expect("stream");
            if s.groups.remove(gname).is_some() {
                c.cl.reply.int(1);
                c.dirty(1);
                c.notify(NotifyFlags::STREAM, "xgroup-destroy", key);
                // Consumers blocked on the group learn it is gone (the
                // dispatcher signals the stream: see signal_stream_waiters).
            } else {
                c.cl.reply.int(0);
            }
        }
        "createconsumer" => {
            let s = write_stream(c, key).ok().flatten().expect("stream");
            let g = s.groups.get_mut(gname).expect("group");
            if g.consumers.contains_key(argv[4]) {
                c.cl.reply.int(0);
            } else {
                g.consumers.insert(
                    argv[4].to_vec(),
                    Consumer {
                        seen_time: now,
                        ..Consumer::default()
                    },
                );
                c.cl.reply.int(1);
                c.dirty(1);
                c.notify(NotifyFlags::STREAM, "xgroup-createconsumer", key);
            }
        }
        "delconsumer" => {
            let s = write_stream(c, key).ok().flatten().expect("stream");
            let g = s.groups.get_mut(gname).expect("group");
            // A consumer that is not there: 0, and nothing changed (no
            // write, no event), as Redis's.
            let Some(cons) = g.consumers.remove(argv[4]) else {
                return c.cl.reply.int(0);
            };
            for id in &cons.pel {
                g.pel.remove(id);
            }
            c.cl.reply.int(cons.pel.len() as i64);
            c.dirty(1);
            c.notify(NotifyFlags::STREAM, "xgroup-delconsumer", key);
        }
        _ => subcommand_syntax_error(c, argv, "XGROUP"),
    }
}

/// `XACK key group id [id ...]`
pub fn xack(c: &mut Ctx, argv: &[&[u8]]) {
    let key = argv[1];
    let has = match read_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(argv[2])),
    };
    if !has {
        return c.cl.reply.int(0);
    }
    // All parsed before any is applied, as Redis.
    let ids: Vec<StreamId> = match argv[3..].iter().map(|a| parse_strict_id(a, 0)).collect() {
        Ok(ids) => ids,
        Err(e) => return c.cl.reply.error(e),
    };
    let s = read_stream(c, key).ok().flatten().expect("stream");
    let g = s.groups.get_mut(argv[2]).expect("group");
    let mut acked = 0;
    for id in ids {
        if let Some(nack) = g.pel.remove(&id) {
            if let Some(cons) = g.consumers.get_mut(&nack.consumer) {
                cons.pel.remove(&id);
            }
            acked += 1;
        }
    }
    c.dirty(acked as u64);
    c.cl.reply.int(acked);
}

/// `XPENDING key group [[IDLE min-idle-time] start end count [consumer]]`
pub fn xpending(c: &mut Ctx, argv: &[&[u8]]) {
    let justinfo = argv.len() == 3;
    if argv.len() != 3 && (argv.len() < 6 || argv.len() > 9) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let mut range = None;
    let mut minidle = 0i64;
    let mut consumer: Option<&[u8]> = None;
    if argv.len() >= 6 {
        let mut startidx = 3;
        if eq_ic(argv[3], "idle") {
            minidle = match arg_i64(argv[4]) {
                Ok(n) => n,
                Err(e) => return c.cl.reply.error(e),
            };
            if argv.len() < 8 {
                return c.cl.reply.error(ERR_SYNTAX);
            }
            startidx += 2;
        }
        let count = match arg_i64(argv[startidx + 2]) {
            Ok(n) => n.max(0),
            Err(e) => return c.cl.reply.error(e),
        };
        let start = match interval_start(argv[startidx]) {
            Ok(id) => id,
            Err(e) => return c.cl.reply.error(&e),
        };
        let end = match interval_end(argv[startidx + 1]) {
            Ok(id) => id,
            Err(e) => return c.cl.reply.error(&e),
        };
        if startidx + 3 < argv.len() {
            consumer = Some(argv[startidx + 3]);
        }
        range = Some((start, end, count));
    }
    let now = c.now_ms();
    let db = c.cl.db;
    let s = match lookup_typed(c.srv, db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => None,
        Typed::Found(s) => Some(s),
    };
    let Some(g) = s.and_then(|s| s.groups.get(argv[2])) else {
        return c.cl.reply.error(&nogroup_key_or_group(argv[1], argv[2]));
    };
    if justinfo {
        c.cl.reply.array(4);
        c.cl.reply.int(g.pel.len() as i64);
        if g.pel.is_empty() {
            c.cl.reply.null();
            c.cl.reply.null();
            c.cl.reply.null_array();
        } else {
            let first = *g.pel.keys().next().expect("pel");
            let last = *g.pel.keys().next_back().expect("pel");
            c.cl.reply.bulk(&id_bytes(first));
            c.cl.reply.bulk(&id_bytes(last));
            let owners: Vec<(&Vec<u8>, usize)> = g
                .consumers
                .iter()
                .filter(|(_, cs)| !cs.pel.is_empty())
                .map(|(n, cs)| (n, cs.pel.len()))
                .collect();
            c.cl.reply.array(owners.len());
            for (n, k) in owners {
                c.cl.reply.array(2);
                c.cl.reply.bulk(n);
                c.cl.reply.bulk_i64(k as i64);
            }
        }
        return;
    }
    let (start, end, mut count) = range.expect("range");
    let ids: Box<dyn Iterator<Item = StreamId>> = match consumer {
        Some(name) => match g.consumers.get(name) {
            None => return c.cl.reply.array(0),
            Some(cs) => Box::new(cs.pel.range(start..).copied()),
        },
        None => Box::new(g.pel.range(start..).map(|(k, _)| *k)),
    };
    let mut out = Vec::new();
    for id in ids {
        if count == 0 || id > end {
            break;
        }
        let nack = &g.pel[&id];
        if minidle != 0 && now - nack.delivery_time < minidle {
            continue;
        }
        count -= 1;
        out.push((id, nack));
    }
    c.cl.reply.array(out.len());
    for (id, nack) in out {
        c.cl.reply.array(4);
        c.cl.reply.bulk(&id_bytes(id));
        c.cl.reply.bulk(&nack.consumer);
        c.cl.reply.int((now - nack.delivery_time).max(0));
        c.cl.reply.int(nack.delivery_count as i64);
    }
}

/// Move pending entry `id` to consumer `name` (created if missing).
fn claim_to(g: &mut Group, id: StreamId, name: &[u8]) {
    let nack = g.pel.get_mut(&id).expect("pending entry");
    if nack.consumer != name {
        if let Some(prev) = g.consumers.get_mut(&nack.consumer) {
            prev.pel.remove(&id);
        }
        nack.consumer = name.to_vec();
        g.consumers.get_mut(name).expect("consumer").pel.insert(id);
    }
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]`
pub fn xclaim(c: &mut Ctx, argv: &[&[u8]]) {
    let key = argv[1];
    let gname = argv[2];
    let has = match read_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(gname)),
    };
    if !has {
        return c.cl.reply.error(&nogroup_key_or_group(key, gname));
    }
    let minidle = match parse_i64(argv[4]) {
        Some(n) => n.max(0),
        None => {
            return c
                .cl
                .reply
                .error("ERR Invalid min-idle-time argument for XCLAIM")
        }
    };
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argv.len() {
        match parse_strict_id(argv[j], 0) {
            Ok(id) => ids.push((id, argv[j])),
            Err(_) => break,
        }
        j += 1;
    }
    let now = c.now_ms();
    let mut force = false;
    let mut justid = false;
    let mut delivery_time: i64 = -1;
    let mut retrycount: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < argv.len() {
        let moreargs = argv.len() - 1 - j;
        let opt = argv[j];
        let num = |a: &[u8], what: &str| -> Result<i64, String> {
            parse_i64(a).ok_or_else(|| format!("ERR Invalid {what} option argument for XCLAIM"))
        };
        if eq_ic(opt, "force") {
            force = true;
        } else if eq_ic(opt, "justid") {
            justid = true;
        } else if eq_ic(opt, "idle") && moreargs > 0 {
            j += 1;
            match num(argv[j], "IDLE") {
                Ok(n) => delivery_time = now.wrapping_sub(n),
                Err(e) => return c.cl.reply.error(&e),
            }
        } else if eq_ic(opt, "time") && moreargs > 0 {
            j += 1;
            match num(argv[j], "TIME") {
                Ok(n) => delivery_time = n,
                Err(e) => return c.cl.reply.error(&e),
            }
        } else if eq_ic(opt, "retrycount") && moreargs > 0 {
            j += 1;
            match num(argv[j], "RETRYCOUNT") {
                Ok(n) => retrycount = n,
                Err(e) => return c.cl.reply.error(&e),
            }
        } else if eq_ic(opt, "lastid") && moreargs > 0 {
            j += 1;
            match parse_strict_id(argv[j], 0) {
                Ok(id) => last_id = id,
                Err(e) => return c.cl.reply.error(e),
            }
        } else {
            return c
                .cl
                .reply
                .error(&format!("ERR Unrecognized XCLAIM option '{}'", c_str(opt)));
        }
        j += 1;
    }
    let s: *mut Stream = read_stream(c, key).ok().flatten().expect("stream");
    // SAFETY: the stream stays in the keyspace while this command runs;
    // the server is borrowed again only for replies and propagation.
    let s = unsafe { &mut *s };
    // A master's XREADGROUP reaches its replicas (and the AOF) as one
    // XCLAIM per delivered entry, its LASTID the entry: obeying it, the
    // group's read counter moves as it did on the master (Redis 7.0.15
    // leaves it behind; a client's XCLAIM LASTID only sets the last ID).
    let mut propagate_last = if c.cl.must_obey() {
        deliver(s, gname, last_id)
    } else {
        let g = s.groups.get_mut(gname).expect("group");
        let moved = last_id > g.last_id;
        if moved {
            g.last_id = last_id;
        }
        moved
    };
    if delivery_time != -1 {
        if delivery_time < 0 || delivery_time > now {
            delivery_time = now;
        }
    } else {
        delivery_time = now;
    }
    let name = argv[3];
    let mut replies: Vec<(StreamId, Option<Fields>)> = Vec::new();
    let mut consumer_ready = false;
    for (id, _) in ids {
        let fields = if justid {
            s.lookup(id).map(|_| Vec::new())
        } else {
            s.lookup(id)
        };
        let g = s.groups.get_mut(gname).expect("group");
        let Some(fields) = fields else {
            // Gone from the stream: gone from the PEL too.
            if drop_gone_pending(c, g, key, gname, id) {
                propagate_last = false;
            }
            continue;
        };
        let mut fresh = false;
        if force && !g.pel.contains_key(&id) {
            g.pel.insert(
                id,
                Nack {
                    delivery_time: now,
                    delivery_count: 1,
                    consumer: Vec::new(),
                },
            );
            fresh = true;
        }
        let Some(nack) = g.pel.get(&id) else {
            continue;
        };
        if !fresh && minidle != 0 && now - nack.delivery_time < minidle {
            continue;
        }
        if !consumer_ready {
            ensure_consumer(c, g, key, name, now);
            consumer_ready = true;
        }
        let count = (retrycount >= 0).then_some(retrycount as u64);
        claim(c, g, key, gname, id, name, delivery_time, count, !justid);
        replies.push((id, if justid { None } else { Some(fields) }));
        propagate_last = false;
    }
    if propagate_last {
        let g = &s.groups[gname];
        let (last, read) = (g.last_id, g.entries_read);
        propagate_group_id(c, key, gname, last, read);
        c.dirty(1);
    }
    c.prevent_propagation();
    c.cl.reply.array(replies.len());
    for (id, fields) in &replies {
        match fields {
            None => c.cl.reply.bulk(&id_bytes(*id)),
            Some(f) => reply_entry(&mut c.cl.reply, *id, f),
        }
    }
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`
pub fn xautoclaim(c: &mut Ctx, argv: &[&[u8]]) {
    let key = argv[1];
    let gname = argv[2];
    let minidle = match parse_i64(argv[4]) {
        Some(n) => n.max(0),
        None => {
            return c
                .cl
                .reply
                .error("ERR Invalid min-idle-time argument for XAUTOCLAIM")
        }
    };
    let start = match interval_start(argv[5]) {
        Ok(id) => id,
        Err(e) => return c.cl.reply.error(&e),
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let moreargs = argv.len() - 1 - j;
        if eq_ic(argv[j], "count") && moreargs > 0 {
            let max = i64::MAX / 16;
            match parse_i64(argv[j + 1]) {
                Some(n) if (1..=max).contains(&n) => count = n,
                _ => return c.cl.reply.error("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if eq_ic(argv[j], "justid") {
            justid = true;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let has = match read_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(gname)),
    };
    if !has {
        return c.cl.reply.error(&nogroup_key_or_group(key, gname));
    }
    let s: *mut Stream = read_stream(c, key).ok().flatten().expect("stream");
    // SAFETY: as in XCLAIM.
    let s = unsafe { &mut *s };
    let now = c.now_ms();
    let name = argv[3];
    let mut attempts = count.saturating_mul(10);
    // At most the entries the attempts can visit, and the next one (the
    // cursor), not the whole PEL from `start`.
    let visit = usize::try_from(attempts)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let pending: Vec<StreamId> = s.groups[gname]
        .pel
        .range(start..)
        .map(|(k, _)| *k)
        .take(visit)
        .collect();
    let mut idx = 0;
    let mut claimed: Vec<(StreamId, Option<Fields>)> = Vec::new();
    let mut deleted = Vec::new();
    let mut consumer_ready = false;
    while attempts > 0 && count > 0 && idx < pending.len() {
        attempts -= 1;
        let id = pending[idx];
        idx += 1;
        let fields = s.lookup(id);
        let g = s.groups.get_mut(gname).expect("group");
        let Some(fields) = fields else {
            drop_gone_pending(c, g, key, gname, id);
            deleted.push(id);
            count -= 1;
            continue;
        };
        if minidle != 0 && now - g.pel[&id].delivery_time < minidle {
            continue;
        }
        if !consumer_ready {
            ensure_consumer(c, g, key, name, now);
            consumer_ready = true;
        }
        claim(c, g, key, gname, id, name, now, None, !justid);
        claimed.push((id, if justid { None } else { Some(fields) }));
        count -= 1;
    }
    let cursor = pending.get(idx).copied().unwrap_or(StreamId::MIN);
    c.prevent_propagation();
    c.cl.reply.array(3);
    c.cl.reply.bulk(&id_bytes(cursor));
    c.cl.reply.array(claimed.len());
    for (id, fields) in &claimed {
        match fields {
            None => c.cl.reply.bulk(&id_bytes(*id)),
            Some(f) => reply_entry(&mut c.cl.reply, *id, f),
        }
    }
    c.cl.reply.array(deleted.len());
    for id in deleted {
        c.cl.reply.bulk(&id_bytes(id));
    }
}

// ---------------------------------------------------------------- XINFO

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

fn reply_lag(out: &mut Reply, lag: Option<i64>) {
    match lag {
        Some(n) => out.int(n),
        None => out.null(),
    }
}

fn reply_entries_read(out: &mut Reply, n: i64) {
    if n == ENTRIES_READ_UNKNOWN {
        out.null();
    } else {
        out.int(n);
    }
}

/// `XINFO CONSUMERS|GROUPS|STREAM|HELP …`
pub fn xinfo(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    if sub == "help" {
        return reply_help(c, XINFO_HELP);
    }
    let key = argv[2];
    let db = c.cl.db;
    let s: &Stream = match lookup_typed(c.srv, db, key, true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.error(ERR_NO_SUCH_KEY),
        Typed::Found(s) => s,
    };
    let now = crate::util::unix_time_ms();
    match sub {
        "consumers" => {
            let Some(g) = s.groups.get(argv[3]) else {
                return c.cl.reply.error(&format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    c_str(argv[3]),
                    c_str(key)
                ));
            };
            c.cl.reply.array(g.consumers.len());
            for (name, cs) in &g.consumers {
                c.cl.reply.map(3);
                c.cl.reply.bulk(b"name");
                c.cl.reply.bulk(name);
                c.cl.reply.bulk(b"pending");
                c.cl.reply.int(cs.pel.len() as i64);
                c.cl.reply.bulk(b"idle");
                c.cl.reply.int((now - cs.seen_time).max(0));
            }
        }
        "groups" => {
            c.cl.reply.array(s.groups.len());
            for (name, g) in &s.groups {
                c.cl.reply.map(6);
                c.cl.reply.bulk(b"name");
                c.cl.reply.bulk(name);
                c.cl.reply.bulk(b"consumers");
                c.cl.reply.int(g.consumers.len() as i64);
                c.cl.reply.bulk(b"pending");
                c.cl.reply.int(g.pel.len() as i64);
                c.cl.reply.bulk(b"last-delivered-id");
                c.cl.reply.bulk(&id_bytes(g.last_id));
                c.cl.reply.bulk(b"entries-read");
                reply_entries_read(&mut c.cl.reply, g.entries_read);
                c.cl.reply.bulk(b"lag");
                reply_lag(&mut c.cl.reply, s.group_lag(g));
            }
        }
        _ => xinfo_stream(&mut c.cl.reply, argv, s),
    }
}

fn xinfo_stream(out: &mut Reply, argv: &[&[u8]], s: &Stream) {
    let args = &argv[2..];
    let mut count: i64 = 10;
    let full = match args.len() {
        1 => false,
        2 | 4 => {
            if !eq_ic(args[1], "full") {
                return out.error(&subcommand_syntax_error_text(argv, "XINFO"));
            }
            if args.len() == 4 {
                if !eq_ic(args[2], "count") {
                    return out.error(&subcommand_syntax_error_text(argv, "XINFO"));
                }
                count = match arg_i64(args[3]) {
                    Ok(n) if n < 0 => 10,
                    Ok(n) => n,
                    Err(e) => return out.error(e),
                };
            }
            true
        }
        _ => return out.error(&subcommand_syntax_error_text(argv, "XINFO")),
    };
    out.map(if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.length as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.nodes.len() as i64);
    out.bulk(b"radix-tree-nodes");
    // Our nodes sit in an ordered map, not a radix tree: what Redis's tree
    // would need for as many 16-byte keys, roughly.
    out.int(if s.nodes.is_empty() {
        1
    } else {
        s.nodes.len() as i64 * 2
    });
    out.bulk(b"last-generated-id");
    out.bulk(&id_bytes(s.last_id));
    out.bulk(b"max-deleted-entry-id");
    out.bulk(&id_bytes(s.max_deleted_entry_id));
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    out.bulk(&id_bytes(s.first_id));
    if !full {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        for (label, rev) in [(&b"first-entry"[..], false), (&b"last-entry"[..], true)] {
            out.bulk(label);
            match collect(s, StreamId::MIN, StreamId::MAX, 1, rev).first() {
                Some((id, f)) => reply_entry(out, *id, f),
                None => out.null(),
            }
        }
        return;
    }
    let limit = |n: usize| if count == 0 { n } else { n.min(count as usize) };
    out.bulk(b"entries");
    let entries = collect(s, StreamId::MIN, StreamId::MAX, count as usize, false);
    reply_entries(out, &entries);
    out.bulk(b"groups");
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        out.bulk(&id_bytes(g.last_id));
        out.bulk(b"entries-read");
        reply_entries_read(out, g.entries_read);
        out.bulk(b"lag");
        reply_lag(out, s.group_lag(g));
        out.bulk(b"pel-count");
        out.int(g.pel.len() as i64);
        out.bulk(b"pending");
        out.array(limit(g.pel.len()));
        for (id, nack) in g.pel.iter().take(limit(g.pel.len())) {
            out.array(4);
            out.bulk(&id_bytes(*id));
            out.bulk(&nack.consumer);
            out.int(nack.delivery_time);
            out.int(nack.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array(g.consumers.len());
        for (cname, cs) in &g.consumers {
            out.map(4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(cs.seen_time);
            out.bulk(b"pel-count");
            out.int(cs.pel.len() as i64);
            out.bulk(b"pending");
            out.array(limit(cs.pel.len()));
            for id in cs.pel.iter().take(limit(cs.pel.len())) {
                let nack = &g.pel[id];
                out.array(3);
                out.bulk(&id_bytes(*id));
                out.int(nack.delivery_time);
                out.int(nack.delivery_count as i64);
            }
        }
    }
}

/// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]`
pub fn xsetid(c: &mut Ctx, argv: &[&[u8]]) {
    let id = match parse_strict_id(argv[2], 0) {
        Ok(id) => id,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < argv.len() {
        let moreargs = argv.len() - 1 - i;
        if eq_ic(argv[i], "entriesadded") && moreargs > 0 {
            match arg_i64(argv[i + 1]) {
                Ok(n) if n < 0 => return c.cl.reply.error("ERR entries_added must be positive"),
                Ok(n) => entries_added = n,
                Err(e) => return c.cl.reply.error(e),
            }
            i += 2;
        } else if eq_ic(argv[i], "maxdeletedid") && moreargs > 0 {
            match parse_strict_id(argv[i + 1], 0) {
                Ok(m) if id < m => {
                    return c.cl.reply.error("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
                }
                Ok(m) => max_xdel = m,
                Err(e) => return c.cl.reply.error(e),
            }
            i += 2;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    let key = argv[1];
    let s = match write_stream(c, key) {
        Err(e) => return c.cl.reply.error(e),
        Ok(None) => return c.cl.reply.error(ERR_NO_SUCH_KEY),
        Ok(Some(s)) => s,
    };
    if s.length > 0 {
        let maxid = s.edge_id(false).unwrap_or(StreamId::MIN);
        if id < maxid {
            return c.cl.reply.error(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return c.cl.reply.error(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if max_xdel != StreamId::MIN {
        s.max_deleted_entry_id = max_xdel;
    }
    c.cl.reply.ok();
    c.modified(key, NotifyFlags::STREAM, "xsetid");
    c.dirty(1);
}
