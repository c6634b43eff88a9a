//! Sorted set commands (ZADD, ZRANGE and its many forms, ZUNION/ZINTER/ZDIFF,
//! ZPOPMIN and the blocking pops, …).
//!
//! Every range command goes through one engine, `zrange_generic`, which
//! takes the range type (rank, score, lex), the direction and the options
//! the way Redis's zrangeGenericCommand does, so ZRANGE, ZREVRANGE,
//! ZRANGEBYSCORE, ZREVRANGEBYLEX and ZRANGESTORE all share parsing, errors
//! and replies.

use super::blocking::{block, parse_timeout};
use super::hash::{draw_distinct, draw_plan, random_picks, Draw};
use super::keys::{elements_removed, store_result};
use super::*;
use crate::db::{Value, ZSet};

/// Members with their scores, in order.
type Scored = Vec<(Vec<u8>, f64)>;

pub(super) fn pick(v: &mut Value) -> Option<&mut ZSet> {
    match v {
        Value::ZSet(z) => Some(z),
        _ => None,
    }
}

fn limits(c: &Ctx) -> (usize, usize) {
    (
        c.srv.config.zset_max_listpack_entries.max(0) as usize,
        c.srv.config.zset_max_listpack_value.max(0) as usize,
    )
}

/// A score argument (Redis's getDoubleFromObject).
pub fn parse_score(arg: &[u8]) -> Option<f64> {
    parse_f64(arg)
}

#[derive(Clone, Copy)]
struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

fn parse_bound(arg: &[u8]) -> Option<(f64, bool)> {
    let (ex, rest) = if arg.first() == Some(&b'(') {
        (true, &arg[1..])
    } else {
        (false, arg)
    };
    // zslParseRange: strtod over the whole bound (a C string: up to a NUL
    // byte), only NaN refused.
    let (v, _) = crate::util::strtod(c_bytes(rest))?;
    if v.is_nan() {
        return None;
    }
    Some((v, ex))
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, &'static str> {
    match (parse_bound(min), parse_bound(max)) {
        (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange {
            min,
            minex,
            max,
            maxex,
        }),
        _ => Err("ERR min or max is not a float"),
    }
}

#[derive(Clone)]
enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn parse_lex_bound(arg: &[u8]) -> Option<LexBound> {
    match arg.first()? {
        b'+' if arg.len() == 1 => Some(LexBound::PosInf),
        b'-' if arg.len() == 1 => Some(LexBound::NegInf),
        b'(' => Some(LexBound::Excl(arg[1..].to_vec())),
        b'[' => Some(LexBound::Incl(arg[1..].to_vec())),
        _ => None,
    }
}

#[derive(Clone)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(v) => m >= v.as_slice(),
            LexBound::Excl(v) => m > v.as_slice(),
        }
    }

    fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(v) => m <= v.as_slice(),
            LexBound::Excl(v) => m < v.as_slice(),
        }
    }

    /// No member can be inside: min above max, or equal with either bound
    /// exclusive (Redis's zslIsInLexRange; `-` and `+` are exclusive).
    fn is_empty(&self) -> bool {
        use LexBound::*;
        match (&self.min, &self.max) {
            (NegInf, NegInf) | (PosInf, PosInf) | (PosInf, _) | (_, NegInf) => true,
            (NegInf, _) | (_, PosInf) => false,
            (Incl(a) | Excl(a), Incl(b) | Excl(b)) => match a.cmp(b) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => {
                    matches!(self.min, Excl(_)) || matches!(self.max, Excl(_))
                }
                std::cmp::Ordering::Less => false,
            },
        }
    }

    /// The members of `z` in this range, as Redis walks it.
    fn walk(&self, z: &ZSet, rev: bool, offset: usize, limit: Option<usize>) -> Scored {
        if self.is_empty() {
            return Vec::new();
        }
        z.lex_range(
            &|m| self.gte_min(m),
            &|m| self.lte_max(m),
            rev,
            offset,
            limit,
        )
    }
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, &'static str> {
    match (parse_lex_bound(min), parse_lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err("ERR min or max not valid string range item"),
    }
}

/// Reply with (member, score) pairs: flat in RESP2, pairs in RESP3 when
/// scores are included.
fn reply_scored(out: &mut crate::protocol::Reply, items: &[(Vec<u8>, f64)], withscores: bool) {
    scored_header(out, items.len(), withscores);
    for (m, s) in items {
        reply_one_scored(out, m, *s, withscores);
    }
}

/// The array of `n` members, flat or (RESP3 WITHSCORES) of pairs.
fn scored_header(out: &mut crate::protocol::Reply, n: usize, withscores: bool) {
    if withscores && !out.is_resp3() {
        out.array(n * 2);
    } else {
        out.array(n);
    }
}

fn reply_one_scored(out: &mut crate::protocol::Reply, m: &[u8], s: f64, withscores: bool) {
    if withscores && out.is_resp3() {
        out.array(2);
    }
    out.bulk(m);
    if withscores {
        out.double(s);
    }
}

/// The sorted set at `key` for writing, created with `hint` sizing if missing.
fn zset_for_write<'s>(
    c: &'s mut Ctx,
    key: &[u8],
    hint: usize,
    maxlen: usize,
) -> Option<&'s mut ZSet> {
    let (me, mv) = limits(c);
    match lookup_or_create(c.srv, c.cl.db, key, pick, || {
        Value::ZSet(ZSet::with_hint(hint, maxlen, me, mv))
    }) {
        Ok(z) => Some(z),
        Err(e) => {
            c.cl.reply.error(e);
            None
        }
    }
}

const ERR_NAN: &str = "ERR resulting score is not a number (NaN)";

/// The engine behind ZADD and ZINCRBY.
fn zadd_generic(c: &mut Ctx, argv: &[&[u8]], incr_cmd: bool) {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, incr_cmd);
    let mut idx = 2;
    if !incr_cmd {
        while idx < argv.len() {
            let o = argv[idx];
            if eq_ic(o, "nx") {
                nx = true;
            } else if eq_ic(o, "xx") {
                xx = true;
            } else if eq_ic(o, "ch") {
                ch = true;
            } else if eq_ic(o, "incr") {
                incr = true;
            } else if eq_ic(o, "gt") {
                gt = true;
            } else if eq_ic(o, "lt") {
                lt = true;
            } else {
                break;
            }
            idx += 1;
        }
    }
    let elements = argv.len() - idx;
    if !elements.is_multiple_of(2) || elements == 0 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let elements = elements / 2;
    if nx && xx {
        return c
            .cl
            .reply
            .error("ERR XX and NX options at the same time are not compatible");
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return c
            .cl
            .reply
            .error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if incr && elements > 1 {
        return c
            .cl
            .reply
            .error("ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(elements);
    for j in 0..elements {
        let Some(score) = parse_score(argv[idx + j * 2]) else {
            return c.cl.reply.error(ERR_NOT_FLOAT);
        };
        pairs.push((score, argv[idx + j * 2 + 1]));
    }
    let db = c.cl.db;
    let exists = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => false,
        Typed::Found(_) => true,
    };
    let (mut added, mut updated, mut processed) = (0, 0, 0);
    let mut last_score = 0.0;
    if exists || !xx {
        // A new set starts compact unless its first member is too long
        // for it (Redis 7.0.15's zaddGenericCommand), and converts as the
        // members go in: a -0 score stored while compact reads back as 0.
        let (me, mv) = limits(c);
        let Some(z) = zset_for_write(c, argv[1], 1, pairs[0].1.len()) else {
            return;
        };
        for (score, member) in &pairs {
            let mut score = *score;
            match z.score(member) {
                Some(cur) => {
                    if nx {
                        continue;
                    }
                    if incr {
                        score += cur;
                        if score.is_nan() {
                            let empty = z.is_empty();
                            delete_if_empty(c.srv, db, argv[1], empty);
                            return c.cl.reply.error(ERR_NAN);
                        }
                    }
                    if (gt && score <= cur) || (lt && score >= cur) {
                        continue;
                    }
                    processed += 1;
                    last_score = score;
                    if score != cur {
                        z.insert(member, score, me, mv);
                        updated += 1;
                    }
                }
                None => {
                    if xx {
                        continue;
                    }
                    z.insert(member, score, me, mv);
                    added += 1;
                    processed += 1;
                    last_score = score;
                }
            }
        }
        let empty = z.is_empty();
        delete_if_empty(c.srv, db, argv[1], empty);
    }
    c.dirty(added + updated);
    if added + updated > 0 {
        // ZINCRBY and ZADD INCR are both "zincr".
        let event = if incr { "zincr" } else { "zadd" };
        c.modified(argv[1], NotifyFlags::ZSET, event);
    }
    if incr {
        if processed > 0 {
            c.cl.reply.double(last_score);
        } else {
            c.cl.reply.null();
        }
    } else {
        c.cl.reply
            .int(if ch { added + updated } else { added } as i64);
    }
}

/// `ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]`
pub fn zadd(c: &mut Ctx, argv: &[&[u8]]) {
    zadd_generic(c, argv, false);
}

/// `ZINCRBY key increment member`
pub fn zincrby(c: &mut Ctx, argv: &[&[u8]]) {
    zadd_generic(c, argv, true);
}

/// Read-only lookup: `Err(())` after a WRONGTYPE reply.
fn zset_read<'s>(c: &'s mut Ctx, key: &[u8]) -> Result<Option<&'s mut ZSet>, ()> {
    match lookup_typed(c.srv, c.cl.db, key, true, pick) {
        Typed::WrongType => {
            c.cl.reply.error(ERR_WRONGTYPE);
            Err(())
        }
        Typed::Missing => Ok(None),
        Typed::Found(z) => Ok(Some(z)),
    }
}

/// `ZSCORE key member`
pub fn zscore(c: &mut Ctx, argv: &[&[u8]]) {
    let Ok(z) = zset_read(c, argv[1]) else { return };
    match z.and_then(|z| z.score(argv[2])) {
        Some(s) => c.cl.reply.double(s),
        None => c.cl.reply.null(),
    }
}

/// `ZMSCORE key member [member ...]`
pub fn zmscore(c: &mut Ctx, argv: &[&[u8]]) {
    let Ok(z) = zset_read(c, argv[1]) else { return };
    let scores: Vec<Option<f64>> = argv[2..]
        .iter()
        .map(|m| z.as_ref().and_then(|z| z.score(m)))
        .collect();
    c.cl.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => c.cl.reply.double(s),
            None => c.cl.reply.null(),
        }
    }
}

/// `ZCARD key`
pub fn zcard(c: &mut Ctx, argv: &[&[u8]]) {
    let Ok(z) = zset_read(c, argv[1]) else { return };
    let n = z.map_or(0, |z| z.len());
    c.cl.reply.int(n as i64);
}

/// `ZCOUNT key min max`
pub fn zcount(c: &mut Ctx, argv: &[&[u8]]) {
    let range = match parse_score_range(argv[2], argv[3]) {
        Ok(r) => r,
        Err(e) => return c.cl.reply.error(e),
    };
    let Ok(z) = zset_read(c, argv[1]) else { return };
    let n = z.map_or(0, |z| {
        z.count_score_range(range.min, range.minex, range.max, range.maxex)
    });
    c.cl.reply.int(n as i64);
}

/// `ZLEXCOUNT key min max`
pub fn zlexcount(c: &mut Ctx, argv: &[&[u8]]) {
    let range = match parse_lex_range(argv[2], argv[3]) {
        Ok(r) => r,
        Err(e) => return c.cl.reply.error(e),
    };
    let Ok(z) = zset_read(c, argv[1]) else { return };
    let n = match z {
        Some(z) if !range.is_empty() => z.lex_count(&|m| range.gte_min(m), &|m| range.lte_max(m)),
        _ => 0,
    };
    c.cl.reply.int(n as i64);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

/// The engine behind every ZRANGE form (Redis's zrangeGenericCommand).
/// `argv_start` is where `key min max` begin; `store` is ZRANGESTORE's
/// destination; `preset` and `rev` fix the type/direction of legacy forms.
fn zrange_generic(
    c: &mut Ctx,
    argv: &[&[u8]],
    argv_start: usize,
    store: Option<&[u8]>,
    preset: RangeType,
    preset_rev: Option<bool>,
) {
    let key = argv[argv_start];
    let (mut minidx, mut maxidx) = (argv_start + 1, argv_start + 2);
    let mut rangetype = preset;
    let mut rev = preset_rev;
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = argv_start + 3;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        if store.is_none() && eq_ic(argv[j], "withscores") {
            withscores = true;
        } else if eq_ic(argv[j], "limit") && left >= 2 {
            match (arg_i64(argv[j + 1]), arg_i64(argv[j + 2])) {
                (Ok(o), Ok(l)) => {
                    offset = o;
                    limit = l;
                }
                (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
            }
            j += 2;
        } else if rev.is_none() && eq_ic(argv[j], "rev") {
            rev = Some(true);
        } else if rangetype == RangeType::Auto && eq_ic(argv[j], "bylex") {
            rangetype = RangeType::Lex;
        } else if rangetype == RangeType::Auto && eq_ic(argv[j], "byscore") {
            rangetype = RangeType::Score;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if rangetype == RangeType::Auto {
        rangetype = RangeType::Rank;
    }
    if limit != -1 && rangetype == RangeType::Rank {
        return c.cl.reply.error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && rangetype == RangeType::Lex {
        return c
            .cl
            .reply
            .error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    if rev && rangetype != RangeType::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    enum R {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let range = match rangetype {
        RangeType::Score => match parse_score_range(argv[minidx], argv[maxidx]) {
            Ok(r) => R::Score(r),
            Err(e) => return c.cl.reply.error(e),
        },
        RangeType::Lex => match parse_lex_range(argv[minidx], argv[maxidx]) {
            Ok(r) => R::Lex(r),
            Err(e) => return c.cl.reply.error(e),
        },
        _ => match (arg_i64(argv[minidx]), arg_i64(argv[maxidx])) {
            (Ok(s), Ok(e)) => R::Rank(s, e),
            (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
        },
    };
    let items: Vec<(Vec<u8>, f64)> = match zset_read(c, key) {
        Err(()) => return,
        Ok(None) => Vec::new(),
        Ok(Some(z)) => match range {
            R::Rank(s, e) => match clamp_range(s, e, z.len()) {
                Some((s, e)) => z.range_by_rank(s, e, rev),
                None => Vec::new(),
            },
            // A negative offset gives nothing, a negative count no limit.
            _ if offset < 0 => Vec::new(),
            R::Score(r) => z.score_range(
                r.min,
                r.minex,
                r.max,
                r.maxex,
                rev,
                offset as usize,
                usize::try_from(limit).ok(),
            ),
            R::Lex(r) => r.walk(z, rev, offset as usize, usize::try_from(limit).ok()),
        },
    };
    match store {
        None => reply_scored(&mut c.cl.reply, &items, withscores),
        Some(dst) => {
            let n = items.len();
            // Sized by the count alone, as Redis 7.0.15's
            // zrangeResultBeginStore: long members convert it as they go in.
            let result = (n > 0).then(|| build_zset_sized(c, &items, 0));
            if store_result(c, dst, result, NotifyFlags::ZSET, "zrangestore") {
                c.dirty(1);
            }
            c.cl.reply.int(n as i64);
        }
    }
}

/// A sorted set of `items` (a STORE command's result), encoded as the
/// configured limits say.
pub(super) fn build_zset(c: &Ctx, items: &[(Vec<u8>, f64)]) -> Value {
    let maxlen = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    build_zset_sized(c, items, maxlen)
}

/// `build_zset`, its encoding first chosen for members of `maxlen` bytes.
fn build_zset_sized(c: &Ctx, items: &[(Vec<u8>, f64)], maxlen: usize) -> Value {
    let (me, mv) = limits(c);
    let mut z = ZSet::with_hint(items.len(), maxlen, me, mv);
    for (m, s) in items {
        z.insert(m, *s, me, mv);
    }
    Value::ZSet(z)
}

/// `ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`
pub fn zrange(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 1, None, RangeType::Auto, None);
}

/// `ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]`
pub fn zrangestore(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 2, Some(argv[1]), RangeType::Auto, None);
}

/// `ZREVRANGE key start stop [WITHSCORES]`
pub fn zrevrange(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 1, None, RangeType::Rank, Some(true));
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
pub fn zrangebyscore(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 1, None, RangeType::Score, Some(false));
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
pub fn zrevrangebyscore(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 1, None, RangeType::Score, Some(true));
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`
pub fn zrangebylex(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 1, None, RangeType::Lex, Some(false));
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
pub fn zrevrangebylex(c: &mut Ctx, argv: &[&[u8]]) {
    zrange_generic(c, argv, 1, None, RangeType::Lex, Some(true));
}

fn rank_generic(c: &mut Ctx, argv: &[&[u8]], rev: bool) {
    let Ok(z) = zset_read(c, argv[1]) else { return };
    let res = z.and_then(|z| {
        z.rank(argv[2])
            .map(|r| if rev { z.len() - 1 - r } else { r })
    });
    match res {
        Some(r) => c.cl.reply.int(r as i64),
        None => c.cl.reply.null(),
    }
}

/// `ZRANK key member`
pub fn zrank(c: &mut Ctx, argv: &[&[u8]]) {
    rank_generic(c, argv, false);
}

/// `ZREVRANK key member`
pub fn zrevrank(c: &mut Ctx, argv: &[&[u8]]) {
    rank_generic(c, argv, true);
}

/// `ZREM key member [member ...]`
pub fn zrem(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let (n, empty) = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.int(0),
        Typed::Found(z) => (
            argv[2..].iter().filter(|m| z.remove(m)).count(),
            z.is_empty(),
        ),
    };
    if n > 0 {
        elements_removed(c, argv[1], NotifyFlags::ZSET, "zrem", empty);
    }
    c.dirty(n as u64);
    c.cl.reply.int(n as i64);
}

/// The engine behind ZREMRANGEBYRANK / BYSCORE / BYLEX.
fn zremrange(c: &mut Ctx, argv: &[&[u8]], ty: RangeType) {
    enum R {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let range = match ty {
        RangeType::Score => match parse_score_range(argv[2], argv[3]) {
            Ok(r) => R::Score(r),
            Err(e) => return c.cl.reply.error(e),
        },
        RangeType::Lex => match parse_lex_range(argv[2], argv[3]) {
            Ok(r) => R::Lex(r),
            Err(e) => return c.cl.reply.error(e),
        },
        _ => match (arg_i64(argv[2]), arg_i64(argv[3])) {
            (Ok(s), Ok(e)) => R::Rank(s, e),
            (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
        },
    };
    let db = c.cl.db;
    let (n, empty) = match lookup_typed(c.srv, db, argv[1], false, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.int(0),
        Typed::Found(z) => {
            let victims: Vec<Vec<u8>> = match range {
                R::Rank(s, e) => match clamp_range(s, e, z.len()) {
                    Some((s, e)) => z
                        .range_by_rank(s, e, false)
                        .into_iter()
                        .map(|(m, _)| m)
                        .collect(),
                    None => Vec::new(),
                },
                R::Score(r) => z
                    .score_range(r.min, r.minex, r.max, r.maxex, false, 0, None)
                    .into_iter()
                    .map(|(m, _)| m)
                    .collect(),
                R::Lex(r) => r
                    .walk(z, false, 0, None)
                    .into_iter()
                    .map(|(m, _)| m)
                    .collect(),
            };
            for m in &victims {
                z.remove(m);
            }
            (victims.len(), z.is_empty())
        }
    };
    if n > 0 {
        let event = match ty {
            RangeType::Score => "zremrangebyscore",
            RangeType::Lex => "zremrangebylex",
            _ => "zremrangebyrank",
        };
        elements_removed(c, argv[1], NotifyFlags::ZSET, event, empty);
    }
    c.dirty(n as u64);
    c.cl.reply.int(n as i64);
}

/// `ZREMRANGEBYRANK key start stop`
pub fn zremrangebyrank(c: &mut Ctx, argv: &[&[u8]]) {
    zremrange(c, argv, RangeType::Rank);
}

/// `ZREMRANGEBYSCORE key min max`
pub fn zremrangebyscore(c: &mut Ctx, argv: &[&[u8]]) {
    zremrange(c, argv, RangeType::Score);
}

/// `ZREMRANGEBYLEX key min max`
pub fn zremrangebylex(c: &mut Ctx, argv: &[&[u8]]) {
    zremrange(c, argv, RangeType::Lex);
}

/// Pop up to `count` lowest (or highest) members of the set at `key`.
/// `None` when the key is missing; `Err` after WRONGTYPE.
fn pop_members(c: &mut Ctx, key: &[u8], count: usize, max: bool) -> Result<Option<Scored>, ()> {
    let db = c.cl.db;
    let (popped, empty) = match lookup_typed(c.srv, db, key, false, pick) {
        // A blocked pop run again because another of its keys got data
        // passes over this one (Redis 7.0.15 serves the key that did).
        Typed::WrongType if c.retry => return Ok(None),
        Typed::WrongType => {
            c.cl.reply.error(ERR_WRONGTYPE);
            return Err(());
        }
        Typed::Missing => return Ok(None),
        Typed::Found(z) => {
            let n = count.min(z.len());
            if n == 0 {
                return Ok(Some(Vec::new()));
            }
            let popped = z.range_by_rank(0, n - 1, max);
            for (m, _) in &popped {
                z.remove(m);
            }
            (popped, z.is_empty())
        }
    };
    // One event however many were popped (n > 0 here).
    let event = if max { "zpopmax" } else { "zpopmin" };
    elements_removed(c, key, NotifyFlags::ZSET, event, empty);
    c.dirty(popped.len() as u64);
    Ok(Some(popped))
}

/// The engine behind ZPOPMIN and ZPOPMAX.
fn zpop_generic(c: &mut Ctx, argv: &[&[u8]], max: bool) {
    if argv.len() > 3 {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let count = match optional_pop_count(argv, 2) {
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let popped = match pop_members(c, argv[1], count.unwrap_or(1), max) {
        Err(()) => return,
        Ok(None) => Vec::new(),
        Ok(Some(p)) => p,
    };
    let out = &mut c.cl.reply;
    if count.is_some() && out.is_resp3() {
        reply_scored(out, &popped, true);
    } else {
        out.array(popped.len() * 2);
        for (m, s) in &popped {
            out.bulk(m);
            out.double(*s);
        }
    }
}

/// `ZPOPMIN key [count]`
pub fn zpopmin(c: &mut Ctx, argv: &[&[u8]]) {
    zpop_generic(c, argv, false);
}

/// `ZPOPMAX key [count]`
pub fn zpopmax(c: &mut Ctx, argv: &[&[u8]]) {
    zpop_generic(c, argv, true);
}

/// Whether `arg` is MIN or MAX (ZMPOP's `<where>`).
fn is_min_or_max(arg: &[u8]) -> bool {
    eq_ic(arg, "min") || eq_ic(arg, "max")
}

/// The engine behind ZMPOP and BZMPOP, on arguments `parse_mpop` checked.
/// Replies nothing when `blocking` and nothing could be popped.
fn zmpop_generic(c: &mut Ctx, args: &MpopArgs, blocking: bool) {
    let max = eq_ic(args.side, "max");
    let count = args.count;
    for key in &args.keys {
        match pop_members(c, key, count, max) {
            Err(()) => return,
            Ok(None) => continue,
            Ok(Some(p)) if p.is_empty() => continue,
            Ok(Some(popped)) => {
                let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
                c.propagate_as(vec![
                    name.to_vec(),
                    key.to_vec(),
                    popped.len().to_string().into_bytes(),
                ]);
                let out = &mut c.cl.reply;
                out.array(2);
                out.bulk(key);
                out.array(popped.len());
                for (m, s) in &popped {
                    out.array(2);
                    out.bulk(m);
                    out.double(*s);
                }
                return;
            }
        }
    }
    if !blocking {
        c.cl.reply.null_array();
    }
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`
pub fn zmpop(c: &mut Ctx, argv: &[&[u8]]) {
    match parse_mpop(argv, is_min_or_max) {
        Ok(args) => zmpop_generic(c, &args, false),
        Err(e) => c.cl.reply.error(e),
    }
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`
pub fn bzmpop(c: &mut Ctx, argv: &[&[u8]]) {
    super::blocking::block_mpop(c, argv, is_min_or_max, zmpop_generic);
}

/// The engine behind BZPOPMIN and BZPOPMAX: `[key, member, score]`.
fn bzpop_generic(c: &mut Ctx, argv: &[&[u8]], max: bool) {
    let deadline = match parse_timeout(argv[argv.len() - 1], std::time::Instant::now()) {
        Ok(d) => d,
        Err(e) => return c.cl.reply.error(e),
    };
    let keys = &argv[1..argv.len() - 1];
    for key in keys {
        match pop_members(c, key, 1, max) {
            Err(()) => return,
            Ok(Some(p)) if !p.is_empty() => {
                let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
                c.propagate_as(vec![name.to_vec(), key.to_vec()]);
                let out = &mut c.cl.reply;
                out.array(3);
                out.bulk(key);
                out.bulk(&p[0].0);
                out.double(p[0].1);
                return;
            }
            _ => continue,
        }
    }
    block(c, keys, deadline, argv);
}

/// `BZPOPMIN key [key ...] timeout`
pub fn bzpopmin(c: &mut Ctx, argv: &[&[u8]]) {
    bzpop_generic(c, argv, false);
}

/// `BZPOPMAX key [key ...] timeout`
pub fn bzpopmax(c: &mut Ctx, argv: &[&[u8]]) {
    bzpop_generic(c, argv, true);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(a: Aggregate, acc: f64, v: f64) -> f64 {
    let r = match a {
        Aggregate::Sum => acc + v,
        Aggregate::Min => acc.min(v),
        Aggregate::Max => acc.max(v),
    };
    if r.is_nan() {
        0.0
    } else {
        r
    }
}

/// The engine behind ZUNION, ZINTER, ZDIFF, their STORE forms and
/// ZINTERCARD. `numkeys_idx` is where numkeys is; plain sets count as
/// members with score 1.
fn zsetop(
    c: &mut Ctx,
    argv: &[&[u8]],
    numkeys_idx: usize,
    dst: Option<&[u8]>,
    op: SetOp,
    cardinality: bool,
) {
    let setnum = match parse_i64(argv[numkeys_idx]) {
        Some(n) => n,
        None => return c.cl.reply.error(ERR_NOT_INT),
    };
    if setnum < 1 {
        return c.cl.reply.error(&format!(
            "ERR at least 1 input key is needed for '{}' command",
            c.cmd.name
        ));
    }
    let setnum = setnum as usize;
    if setnum > argv.len() - (numkeys_idx + 1) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    let db = c.cl.db;
    let mut sources: Vec<Option<Scored>> = Vec::with_capacity(setnum);
    for key in &argv[numkeys_idx + 1..numkeys_idx + 1 + setnum] {
        match lookup_read(c.srv, db, key) {
            None => sources.push(None),
            Some(e) => match e.boxed_mut() {
                Some(Value::ZSet(z)) => sources.push(Some(
                    z.items()
                        .into_iter()
                        .map(|(m, s)| (m.to_vec(), s))
                        .collect(),
                )),
                Some(Value::Set(s)) => {
                    sources.push(Some(s.members().into_iter().map(|m| (m, 1.0)).collect()))
                }
                _ => return c.cl.reply.error(ERR_WRONGTYPE),
            },
        }
    }
    let mut weights = vec![1.0; setnum];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = numkeys_idx + 1 + setnum;
    while j < argv.len() {
        let remaining = argv.len() - j;
        if op != SetOp::Diff && !cardinality && remaining > setnum && eq_ic(argv[j], "weights") {
            j += 1;
            for w in weights.iter_mut() {
                match parse_score(argv[j]) {
                    Some(v) => *w = v,
                    None => return c.cl.reply.error("ERR weight value is not a float"),
                }
                j += 1;
            }
            continue;
        } else if op != SetOp::Diff && !cardinality && remaining >= 2 && eq_ic(argv[j], "aggregate")
        {
            agg = if eq_ic(argv[j + 1], "sum") {
                Aggregate::Sum
            } else if eq_ic(argv[j + 1], "min") {
                Aggregate::Min
            } else if eq_ic(argv[j + 1], "max") {
                Aggregate::Max
            } else {
                return c.cl.reply.error(ERR_SYNTAX);
            };
            j += 2;
            continue;
        } else if dst.is_none() && !cardinality && eq_ic(argv[j], "withscores") {
            withscores = true;
        } else if cardinality && remaining >= 2 && eq_ic(argv[j], "limit") {
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
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    // Like Redis, combine from the smallest input to the largest (this
    // decides what inf * 0 style NaNs collapse to).
    if op != SetOp::Diff {
        let mut order: Vec<usize> = (0..sources.len()).collect();
        order.sort_by_key(|&i| sources[i].as_ref().map_or(0, |s| s.len()));
        sources = order.iter().map(|&i| sources[i].take()).collect();
        weights = order.iter().map(|&i| weights[i]).collect();
    }
    let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
    match op {
        SetOp::Union => {
            let mut acc: std::collections::HashMap<Vec<u8>, f64> = std::collections::HashMap::new();
            for (src, w) in sources.iter().zip(&weights) {
                for (m, s) in src.iter().flatten() {
                    let v = weigh(*s, *w);
                    acc.entry(m.clone())
                        .and_modify(|a| *a = aggregate(agg, *a, v))
                        .or_insert(v);
                }
            }
            result = acc.into_iter().collect();
        }
        SetOp::Inter => {
            if sources.iter().all(|s| s.is_some()) {
                let maps: Vec<std::collections::HashMap<&[u8], f64>> = sources
                    .iter()
                    .flatten()
                    .map(|s| s.iter().map(|(m, sc)| (m.as_slice(), *sc)).collect())
                    .collect();
                for (m, s) in sources[0].iter().flatten() {
                    let mut v = weigh(*s, weights[0]);
                    let mut all = true;
                    for (i, map) in maps.iter().enumerate().skip(1) {
                        match map.get(m.as_slice()) {
                            // Later inputs multiply without zeroing NaN first, as Redis does.
                            Some(o) => v = aggregate(agg, v, *o * weights[i]),
                            None => {
                                all = false;
                                break;
                            }
                        }
                    }
                    if all {
                        result.push((m.clone(), v));
                        if cardinality && limit != 0 && result.len() >= limit {
                            break;
                        }
                    }
                }
            }
        }
        SetOp::Diff => {
            if let Some(Some(first)) = sources.first() {
                let others: Vec<std::collections::HashSet<&[u8]>> = sources[1..]
                    .iter()
                    .flatten()
                    .map(|s| s.iter().map(|(m, _)| m.as_slice()).collect())
                    .collect();
                for (m, s) in first {
                    if !others.iter().any(|o| o.contains(m.as_slice())) {
                        result.push((m.clone(), *s));
                    }
                }
            }
        }
    }
    if cardinality {
        return c.cl.reply.int(result.len() as i64);
    }
    result.sort_by(|a, b| {
        crate::db::zset::Score(a.1)
            .cmp(&crate::db::zset::Score(b.1))
            .then_with(|| a.0.cmp(&b.0))
    });
    match dst {
        None => reply_scored(&mut c.cl.reply, &result, withscores),
        Some(dst) => {
            let n = result.len();
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            let result = (n > 0).then(|| build_zset(c, &result));
            if store_result(c, dst, result, NotifyFlags::ZSET, event) {
                c.dirty(1);
            }
            c.cl.reply.int(n as i64);
        }
    }
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`
pub fn zunion(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 1, None, SetOp::Union, false);
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`
pub fn zinter(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 1, None, SetOp::Inter, false);
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`
pub fn zdiff(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 1, None, SetOp::Diff, false);
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS …] [AGGREGATE …]`
pub fn zunionstore(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 2, Some(argv[1]), SetOp::Union, false);
}

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS …] [AGGREGATE …]`
pub fn zinterstore(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 2, Some(argv[1]), SetOp::Inter, false);
}

/// `ZDIFFSTORE destination numkeys key [key ...]`
pub fn zdiffstore(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 2, Some(argv[1]), SetOp::Diff, false);
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
pub fn zintercard(c: &mut Ctx, argv: &[&[u8]]) {
    zsetop(c, argv, 1, None, SetOp::Inter, true);
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
pub fn zrandmember(c: &mut Ctx, argv: &[&[u8]]) {
    let mut count = None;
    let mut withscores = false;
    if argv.len() >= 3 {
        let l = match parse_i64(argv[2]) {
            Some(l) if l >= -i64::MAX => l,
            Some(_) => return c.cl.reply.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
            None => return c.cl.reply.error(ERR_NOT_INT),
        };
        if argv.len() > 4 || (argv.len() == 4 && !eq_ic(argv[3], "withscores")) {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        let picks = match super::hash::check_random_count(c, l) {
            Ok(picks) => picks,
            Err(e) => return c.cl.reply.error(e),
        };
        if argv.len() == 4 {
            withscores = true;
            if !(-i64::MAX / 2..=i64::MAX / 2).contains(&l) {
                return c.cl.reply.error("ERR value is out of range");
            }
        }
        count = Some(picks);
    }
    if count.is_none() {
        // One random member: no need to copy the whole set.
        let mut rng = c.srv.rng.fork();
        let picked = match zset_read(c, argv[1]) {
            Err(()) => return,
            Ok(z) => z.and_then(|z| z.random_member(&mut || rng.next_u64())),
        };
        return match picked {
            Some(m) => c.cl.reply.bulk(&m),
            None => c.cl.reply.null(),
        };
    }
    // The single-member form returned above.
    let Some(l) = count else { return };
    let mut rng = c.srv.rng.fork();
    let z = match lookup_typed(c.srv, c.cl.db, argv[1], true, pick) {
        Typed::WrongType => return c.cl.reply.error(ERR_WRONGTYPE),
        Typed::Missing => return c.cl.reply.array(0),
        Typed::Found(z) => z,
    };
    z.rehash_step();
    let len = z.len();
    let mut draw = || {
        let m = z.random_member(&mut || rng.next_u64())?;
        let s = z.score(&m).unwrap_or_default();
        Some((m, s))
    };
    let picked: Vec<(Vec<u8>, f64)> = match draw_plan(len, l) {
        Draw::Repeats(n) => {
            let out = &mut c.cl.reply;
            scored_header(out, n, withscores);
            for _ in 0..n {
                let Some((m, s)) = draw() else { break };
                reply_one_scored(out, &m, s, withscores);
            }
            return;
        }
        Draw::Distinct(n) => draw_distinct(n, |(m, _): &(Vec<u8>, f64)| m, draw),
        Draw::FromCopy => {
            let items: Vec<(&[u8], f64)> = z.items();
            random_picks(&items, l, &mut || rng.next_u64())
                .into_iter()
                .map(|(m, s)| (m.to_vec(), *s))
                .collect()
        }
    };
    reply_scored(&mut c.cl.reply, &picked, withscores);
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]` — a packed sorted set
/// is returned whole in one call (cursor 0), the large encoding a few
/// buckets of its member table at a time, as Redis scans its dict.
pub fn zscan(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(cursor) = super::keys::parse_cursor(argv[2]) else {
        return c.cl.reply.error("ERR invalid cursor");
    };
    // As Redis: a missing key is an empty scan and a wrong type an error,
    // whatever the options say.
    let opts = super::keys::parse_scan_options(argv, 3, false);
    let z = match zset_read(c, argv[1]) {
        Err(()) => return,
        Ok(None) => {
            c.cl.reply.array(2);
            c.cl.reply.bulk(b"0");
            return c.cl.reply.array(0);
        }
        Ok(Some(z)) => z,
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut items: Vec<(Vec<u8>, f64)> = Vec::new();
    let next = match z.members_table() {
        Some(t) => super::keys::scan_table(t, cursor, opts.count, &mut |e| {
            items.push((e.key().to_vec(), ZSet::table_entry_score(e)));
            items.len()
        }),
        None => {
            items = z
                .items()
                .into_iter()
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            0
        }
    };
    if let Some(p) = opts.pattern {
        items.retain(|(m, _)| glob_match(p, m, false));
    }
    let out = &mut c.cl.reply;
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(items.len() * 2);
    for (m, s) in items {
        out.bulk(&m);
        out.bulk(crate::protocol::reply::format_double(s).as_bytes());
    }
}
