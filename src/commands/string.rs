//! String commands: SET and its family, GET and its family, counters, ranges.
//!
//! Values that parse as a 64-bit integer are stored as integers (Redis's
//! "int" encoding); short strings live inside the keyspace entry; longer ones
//! are boxed. Every write that sets an expiry is propagated with an absolute
//! time (`SET … PXAT`, `PEXPIREAT`) so replicas and the AOF never compute an
//! expiry from their own clock.

use std::borrow::Cow;

use super::*;
use crate::db::{Db, Entry, NewValue, Str, Value, ValueRef};
use crate::protocol::reply::{fmt_i64, itoa_buf};

/// The bytes of a string value, or `None` when the entry holds another type.
pub fn string_bytes(e: &Entry) -> Option<Cow<'_, [u8]>> {
    match e.value() {
        ValueRef::Str(s) => Some(Cow::Borrowed(s)),
        ValueRef::Int(n) => {
            let mut b = itoa_buf();
            Some(Cow::Owned(fmt_i64(&mut b, n).to_vec()))
        }
        ValueRef::Boxed(Value::Str(s)) => Some(Cow::Borrowed(s)),
        #[allow(unreachable_patterns)]
        ValueRef::Boxed(_) => None,
    }
}

/// Length of a string value without materialising it.
pub(super) fn string_len(e: &Entry) -> Option<usize> {
    match e.value() {
        ValueRef::Str(s) => Some(s.len()),
        ValueRef::Int(n) => {
            let mut b = itoa_buf();
            Some(fmt_i64(&mut b, n).len())
        }
        ValueRef::Boxed(Value::Str(s)) => Some(s.len()),
        #[allow(unreachable_patterns)]
        ValueRef::Boxed(_) => None,
    }
}

/// Reply with an entry's string value; WRONGTYPE for other types.
fn reply_string(out: &mut crate::protocol::Reply, e: &Entry) -> bool {
    match e.value() {
        ValueRef::Str(s) => out.bulk(s),
        ValueRef::Int(n) => out.bulk_i64(n),
        // A long string is handed to the reply, not copied into it.
        ValueRef::Boxed(Value::Str(s)) => match s.shared() {
            Some(bytes) => out.bulk_shared(bytes),
            None => out.bulk(s),
        },
        #[allow(unreachable_patterns)]
        ValueRef::Boxed(_) => {
            out.error(ERR_WRONGTYPE);
            return false;
        }
    }
    true
}

/// Whether `key` exists before a string write replaces it (the lookup in
/// Redis's setKey): expires it if needed, so an expired old value is
/// counted, propagated as DEL and published as `expired` before the
/// write's `new`, exactly as Redis does; under an LFU policy it counts as
/// an access, and the new value inherits the raised counter. The lookup is
/// skipped only where its answer changes nothing: a plain overwrite (no
/// NX/XX) in a database without TTLs (nothing can be expired) while `new`
/// is not published and the policy is not LFU.
fn exists_before_set(c: &mut Ctx, key: &[u8], needed: bool) -> bool {
    let wanted = needed
        || !c.srv.dbs[c.cl.db].expires.is_empty()
        || crate::db::entry::lfu_policy()
        || c.srv
            .config
            .notify_keyspace_events
            .wants(NotifyFlags::NEW | NotifyFlags::EXPIRED);
    wanted && lookup_write(c.srv, c.cl.db, key).is_some()
}

/// After a string write: `new` when the key was created, then the
/// watchers, then the command's own event.
pub(super) fn string_written(c: &mut Ctx, key: &[u8], existed: bool, event: &str) {
    if !existed {
        c.notify(NotifyFlags::NEW, "new", key);
    }
    c.modified(key, NotifyFlags::STRING, event);
}

fn i64_bytes(n: i64) -> Vec<u8> {
    let mut b = itoa_buf();
    fmt_i64(&mut b, n).to_vec()
}

// ---- SET family ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireUnit {
    Seconds,
    Millis,
}

#[derive(Default)]
struct SetFlags {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    ex: bool,
    px: bool,
    exat: bool,
    pxat: bool,
}

impl SetFlags {
    fn any_expire(&self) -> bool {
        self.ex || self.px || self.exat || self.pxat
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum CommandType {
    Set,
    Get,
}

/// Parse SET / GETEX options exactly as Redis's
/// `parseExtendedStringArgumentsOrReply` does, conflicts included.
fn parse_extended<'a>(
    argv: &[&'a [u8]],
    start: usize,
    ty: CommandType,
) -> Result<(SetFlags, Option<&'a [u8]>), &'static str> {
    let mut f = SetFlags::default();
    let mut expire = None;
    let mut j = start;
    while j < argv.len() {
        let opt = argv[j];
        let has_next = j + 1 < argv.len();
        if eq_ic(opt, "nx") && !f.xx && ty == CommandType::Set {
            f.nx = true;
        } else if eq_ic(opt, "xx") && !f.nx && ty == CommandType::Set {
            f.xx = true;
        } else if eq_ic(opt, "get") && ty == CommandType::Set {
            f.get = true;
        } else if eq_ic(opt, "keepttl") && !f.persist && !f.any_expire() && ty == CommandType::Set {
            f.keepttl = true;
        } else if eq_ic(opt, "persist") && ty == CommandType::Get && !f.any_expire() && !f.keepttl {
            f.persist = true;
        } else if let Some(kind) = ["ex", "px", "exat", "pxat"]
            .iter()
            .position(|k| eq_ic(opt, k))
        {
            // One expiry form only (repeating the same one is allowed), and
            // never with KEEPTTL or PERSIST.
            let set = [f.ex, f.px, f.exat, f.pxat];
            let other_form = set.iter().enumerate().any(|(i, &on)| on && i != kind);
            if f.keepttl || f.persist || other_form || !has_next {
                return Err(ERR_SYNTAX);
            }
            match kind {
                0 => f.ex = true,
                1 => f.px = true,
                2 => f.exat = true,
                _ => f.pxat = true,
            }
            expire = Some(argv[j + 1]);
            j += 1;
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    Ok((f, expire))
}

/// Redis's `getExpireMillisecondsOrReply`: an absolute expiry in ms.
fn expire_ms(c: &Ctx, arg: &[u8], relative: bool, unit: ExpireUnit) -> Result<i64, String> {
    let mut ms = arg_i64(arg).map_err(String::from)?;
    let invalid = || format!("ERR invalid expire time in '{}' command", c.cmd.name);
    if ms <= 0 || (unit == ExpireUnit::Seconds && ms > i64::MAX / 1000) {
        return Err(invalid());
    }
    if unit == ExpireUnit::Seconds {
        ms *= 1000;
    }
    if relative {
        ms = ms.wrapping_add(c.clock_ms());
    }
    if ms <= 0 {
        return Err(invalid());
    }
    Ok(ms)
}

/// The engine behind SET, SETNX, SETEX and PSETEX (Redis's
/// `setGenericCommand`). `expire` is the raw expiry argument with its unit;
/// `int_replies` (ok, abort) lets SETNX answer 1/0 instead of OK/nil.
fn set_generic(
    c: &mut Ctx,
    argv: &[&[u8]],
    flags: SetFlags,
    key: &[u8],
    val: &[u8],
    expire: Option<(&[u8], ExpireUnit)>,
    int_replies: Option<(i64, i64)>,
) {
    let mut when = None;
    if let Some((arg, unit)) = expire {
        match expire_ms(c, arg, flags.ex || flags.px, unit) {
            Ok(ms) => when = Some(ms),
            Err(e) => return c.cl.reply.error(&e),
        }
    }
    let db = c.cl.db;
    if flags.get {
        match lookup_read(c.srv, db, key) {
            None => c.cl.reply.null(),
            Some(e) => {
                if !reply_string(&mut c.cl.reply, e) {
                    return;
                }
            }
        }
    }
    let found = exists_before_set(c, key, flags.nx || flags.xx);
    if (flags.nx && found) || (flags.xx && !found) {
        if !flags.get {
            match int_replies {
                Some((_, abort)) => c.cl.reply.int(abort),
                None => c.cl.reply.null(),
            }
        }
        return;
    }
    // A big value read into a buffer of its own becomes the stored value
    // as it is: no copy, no second 500 MB allocation.
    // A TTL about to be set anew is kept until then: its entry in the
    // expires table is overwritten rather than freed and made again.
    let keep_ttl = flags.keepttl || when.is_some();
    match c.cl.take_big_arg(val) {
        Some(owned) => c.srv.dbs[db].set(Entry::from_vec(key, owned, false), keep_ttl),
        None => c.srv.dbs[db].set_string(key, val, keep_ttl),
    }
    c.dirty(1);
    string_written(c, key, found, "set");
    if let Some(ms) = when {
        c.set_expire(db, key, ms);
        c.notify(NotifyFlags::GENERIC, "expire", key);
        // Only copy the value into a rewrite when something consumes it.
        if c.srv.propagating() {
            c.propagate_as(vec![
                b"SET".to_vec(),
                key.to_vec(),
                val.to_vec(),
                b"PXAT".to_vec(),
                i64_bytes(ms),
            ]);
        }
    } else if flags.get {
        // Replicas need no GET: propagate the command without it.
        let argv: Vec<Vec<u8>> = argv
            .iter()
            .filter(|a| !eq_ic(a, "get"))
            .map(|a| a.to_vec())
            .collect();
        c.propagate_as(argv);
    }
    if !flags.get {
        match int_replies {
            Some((ok, _)) => c.cl.reply.int(ok),
            None => c.cl.reply.ok(),
        }
    }
}

/// ```text
/// SET key value [NX | XX] [GET] [EX seconds | PX milliseconds |
///     EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]
/// ```
/// Reply: OK, or nil when NX/XX stopped it; with GET, the old value.
pub fn set(c: &mut Ctx, argv: &[&[u8]]) {
    let (flags, expire) = match parse_extended(argv, 3, CommandType::Set) {
        Ok(x) => x,
        Err(e) => return c.cl.reply.error(e),
    };
    let unit = if flags.px || flags.pxat {
        ExpireUnit::Millis
    } else {
        ExpireUnit::Seconds
    };
    set_generic(
        c,
        argv,
        flags,
        argv[1],
        argv[2],
        expire.map(|e| (e, unit)),
        None,
    );
}

/// `SETNX key value` — 1 if set, 0 if the key existed.
pub fn setnx(c: &mut Ctx, argv: &[&[u8]]) {
    let flags = SetFlags {
        nx: true,
        ..Default::default()
    };
    set_generic(c, argv, flags, argv[1], argv[2], None, Some((1, 0)));
}

/// `SETEX key seconds value`
pub fn setex(c: &mut Ctx, argv: &[&[u8]]) {
    let flags = SetFlags {
        ex: true,
        ..Default::default()
    };
    set_generic(
        c,
        argv,
        flags,
        argv[1],
        argv[3],
        Some((argv[2], ExpireUnit::Seconds)),
        None,
    );
}

/// `PSETEX key milliseconds value`
pub fn psetex(c: &mut Ctx, argv: &[&[u8]]) {
    let flags = SetFlags {
        px: true,
        ..Default::default()
    };
    set_generic(
        c,
        argv,
        flags,
        argv[1],
        argv[3],
        Some((argv[2], ExpireUnit::Millis)),
        None,
    );
}

/// `GET key` — the value, or nil.
pub fn get(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_read(c.srv, c.cl.db, argv[1]) {
        None => c.cl.reply.null(),
        Some(e) => {
            reply_string(&mut c.cl.reply, e);
        }
    }
}

/// `GETSET key value` — sets the value, returns the old one (propagated as SET).
pub fn getset(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let existed = match lookup_read(c.srv, db, argv[1]) {
        None => {
            c.cl.reply.null();
            false
        }
        Some(e) => {
            if !reply_string(&mut c.cl.reply, e) {
                return;
            }
            true
        }
    };
    // Redis's GETSET reads, then setKey looks the key up for writing: an
    // LFU counter is bumped twice.
    if existed && crate::db::entry::lfu_policy() {
        lookup_write(c.srv, db, argv[1]);
    }
    c.srv.dbs[db].set_string(argv[1], argv[2], false);
    c.dirty(1);
    string_written(c, argv[1], existed, "set");
    c.propagate_as(vec![b"SET".to_vec(), argv[1].to_vec(), argv[2].to_vec()]);
}

/// `GETDEL key` — the value, then the key is deleted (propagated as DEL).
pub fn getdel(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    match lookup_read(c.srv, db, argv[1]) {
        None => return c.cl.reply.null(),
        Some(e) => {
            if !reply_string(&mut c.cl.reply, e) {
                return;
            }
        }
    }
    c.srv.dbs[db].delete(argv[1]);
    c.dirty(1);
    c.modified(argv[1], NotifyFlags::GENERIC, "del");
    c.propagate_as(vec![b"DEL".to_vec(), argv[1].to_vec()]);
}

/// ```text
/// GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
///     PXAT unix-time-milliseconds | PERSIST]
/// ```
/// Returns the value and changes its TTL; propagated as PEXPIREAT, DEL or PERSIST.
pub fn getex(c: &mut Ctx, argv: &[&[u8]]) {
    let (flags, expire) = match parse_extended(argv, 2, CommandType::Get) {
        Ok(x) => x,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let key = argv[1];
    let Some(e) = lookup_read(c.srv, db, key) else {
        return c.cl.reply.null();
    };
    let Some(val) = string_bytes(e).map(|v| v.into_owned()) else {
        return c.cl.reply.error(ERR_WRONGTYPE);
    };
    let mut when = None;
    if let Some(arg) = expire {
        let unit = if flags.px || flags.pxat {
            ExpireUnit::Millis
        } else {
            ExpireUnit::Seconds
        };
        match expire_ms(c, arg, flags.ex || flags.px, unit) {
            Ok(ms) => when = Some(ms),
            Err(e) => return c.cl.reply.error(&e),
        }
    }
    c.cl.reply.bulk(&val);
    if let Some(ms) = when {
        if (flags.exat || flags.pxat) && c.srv.already_expired(ms) {
            c.delete_already_expired(key);
            c.modified(key, NotifyFlags::GENERIC, "del");
        } else {
            c.set_expire(db, key, ms);
            c.propagate_as(vec![b"PEXPIREAT".to_vec(), key.to_vec(), i64_bytes(ms)]);
            c.modified(key, NotifyFlags::GENERIC, "expire");
        }
        c.dirty(1);
    } else if flags.persist && c.srv.dbs[db].persist(key) {
        c.propagate_as(vec![b"PERSIST".to_vec(), key.to_vec()]);
        c.modified(key, NotifyFlags::GENERIC, "persist");
        c.dirty(1);
    }
}

/// `MGET key [key ...]` — values in order, nil for missing or non-string keys.
pub fn mget(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    c.cl.reply.array(argv.len() - 1);
    for key in &argv[1..] {
        match lookup_read(c.srv, db, key) {
            Some(e)
                if matches!(
                    e.value(),
                    ValueRef::Str(_) | ValueRef::Int(_) | ValueRef::Boxed(Value::Str(_))
                ) =>
            {
                reply_string(&mut c.cl.reply, e);
            }
            _ => c.cl.reply.null(),
        }
    }
}

/// The engine behind MSET and MSETNX.
fn mset_generic(c: &mut Ctx, argv: &[&[u8]], nx: bool) {
    if argv.len().is_multiple_of(2) {
        return c.cl.reply.error(&arity_error(c.cmd.name));
    }
    let db = c.cl.db;
    if nx {
        for pair in argv[1..].chunks(2) {
            if lookup_write(c.srv, db, pair[0]).is_some() {
                return c.cl.reply.int(0);
            }
        }
    }
    for pair in argv[1..].chunks(2) {
        // Each key is looked up as it is set (Redis's setKey), so a key
        // given twice is new only the first time.
        let existed = exists_before_set(c, pair[0], false);
        c.srv.dbs[db].set_string(pair[0], pair[1], false);
        string_written(c, pair[0], existed, "set");
    }
    c.dirty((argv.len() as u64 - 1) / 2);
    if nx {
        c.cl.reply.int(1);
    } else {
        c.cl.reply.ok();
    }
}

/// `MSET key value [key value ...]`
pub fn mset(c: &mut Ctx, argv: &[&[u8]]) {
    mset_generic(c, argv, false);
}

/// `MSETNX key value [key value ...]` — 1 if all were set, 0 if any existed.
pub fn msetnx(c: &mut Ctx, argv: &[&[u8]]) {
    mset_generic(c, argv, true);
}

pub(super) fn check_string_length(c: &Ctx, size: usize, append: usize) -> Result<(), &'static str> {
    if size as u128 + append as u128 > c.srv.config.proto_max_bulk_len as u128 {
        Err(ERR_STRING_TOO_LONG)
    } else {
        Ok(())
    }
}

/// Get mutable access to a string value as a growable buffer with room for
/// `final_len` bytes, converting the entry to a boxed "raw" string (Redis's
/// dbUnshareStringValue); a value a pending reply holds is copied first.
pub(super) fn unshare_string<'d>(db: &'d mut Db, key: &[u8], final_len: usize) -> &'d mut Vec<u8> {
    let needs_box = !matches!(
        db.main.get(key).map(|e| e.value()),
        Some(ValueRef::Boxed(Value::Str(_)))
    );
    if needs_box {
        let cur = db
            .main
            .get(key)
            .and_then(string_bytes)
            .map(|v| v.into_owned())
            .unwrap_or_default();
        db.replace_value(
            key,
            NewValue::Boxed(Box::new(Value::Str(Str::new(cur)))),
            true,
        );
    }
    match db.main.get_mut(key).and_then(|e| e.boxed_mut()) {
        Some(Value::Str(v)) => {
            let additional = final_len.saturating_sub(v.len());
            v.make_mut(additional)
        }
        #[allow(unreachable_patterns)]
        _ => unreachable!("value was just boxed as a string"),
    }
}

/// Re-inline a boxed string when it is small enough to live in its entry.
pub(super) fn compact_string(db: &mut Db, key: &[u8]) {
    let small = match db.main.get(key).map(|e| e.value()) {
        Some(ValueRef::Boxed(Value::Str(v))) if v.len() <= crate::db::entry::INLINE_MAX => {
            Some(v.clone())
        }
        _ => None,
    };
    if let Some(v) = small {
        db.replace_value(key, NewValue::Str(&v), true);
    }
}

/// `APPEND key value` — the new length.
pub fn append(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let (key, val) = (argv[1], argv[2]);
    let cur_len = match lookup_write(c.srv, db, key) {
        None => {
            c.srv.dbs[db].set(Entry::string(key, val), false);
            c.dirty(1);
            string_written(c, key, false, "append");
            return c.cl.reply.int(val.len() as i64);
        }
        Some(e) => match string_len(e) {
            Some(n) => n,
            None => return c.cl.reply.error(ERR_WRONGTYPE),
        },
    };
    if let Err(e) = check_string_length(c, cur_len, val.len()) {
        return c.cl.reply.error(e);
    }
    let d = &mut c.srv.dbs[db];
    let buf = unshare_string(d, key, cur_len + val.len());
    buf.extend_from_slice(val);
    let total = buf.len();
    compact_string(d, key);
    c.dirty(1);
    string_written(c, key, true, "append");
    c.cl.reply.int(total as i64);
}

/// `STRLEN key`
pub fn strlen(c: &mut Ctx, argv: &[&[u8]]) {
    match lookup_read(c.srv, c.cl.db, argv[1]) {
        None => c.cl.reply.int(0),
        Some(e) => match string_len(e) {
            Some(n) => c.cl.reply.int(n as i64),
            None => c.cl.reply.error(ERR_WRONGTYPE),
        },
    }
}

/// `GETRANGE key start end` (and the old SUBSTR).
pub fn getrange(c: &mut Ctx, argv: &[&[u8]]) {
    let (mut start, mut end) = match (arg_i64(argv[2]), arg_i64(argv[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
    };
    let Some(e) = lookup_read(c.srv, c.cl.db, argv[1]) else {
        return c.cl.reply.bulk(b"");
    };
    let Some(s) = string_bytes(e) else {
        return c.cl.reply.error(ERR_WRONGTYPE);
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return c.cl.reply.bulk(b"");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        c.cl.reply.bulk(b"");
    } else {
        c.cl.reply.bulk(&s[start as usize..=end as usize]);
    }
}

/// `SETRANGE key offset value` — the new length.
pub fn setrange(c: &mut Ctx, argv: &[&[u8]]) {
    let offset = match arg_i64(argv[2]) {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    if offset < 0 {
        return c.cl.reply.error("ERR offset is out of range");
    }
    let offset = offset as usize;
    let (db, key, val) = (c.cl.db, argv[1], argv[3]);
    match lookup_write(c.srv, db, key) {
        None => {
            if val.is_empty() {
                return c.cl.reply.int(0);
            }
            if let Err(e) = check_string_length(c, offset, val.len()) {
                return c.cl.reply.error(e);
            }
            // Zeroed pages come straight from the kernel (calloc), and the
            // buffer becomes the value without a copy: only the bytes
            // written are touched, even for a 512 MB string.
            let mut v = vec![0u8; offset + val.len()];
            v[offset..].copy_from_slice(val);
            let len = v.len();
            c.srv.dbs[db].set(Entry::from_vec(key, v, true), false);
            c.dirty(1);
            string_written(c, key, false, "setrange");
            return c.cl.reply.int(len as i64);
        }
        Some(e) => {
            let Some(olen) = string_len(e) else {
                return c.cl.reply.error(ERR_WRONGTYPE);
            };
            if val.is_empty() {
                return c.cl.reply.int(olen as i64);
            }
        }
    }
    if let Err(e) = check_string_length(c, offset, val.len()) {
        return c.cl.reply.error(e);
    }
    let d = &mut c.srv.dbs[db];
    let buf = unshare_string(d, key, offset + val.len());
    if buf.len() < offset + val.len() {
        buf.resize(offset + val.len(), 0);
    }
    buf[offset..offset + val.len()].copy_from_slice(val);
    let total = buf.len();
    compact_string(d, key);
    c.dirty(1);
    string_written(c, key, true, "setrange");
    c.cl.reply.int(total as i64);
}

/// The engine behind INCR, DECR, INCRBY and DECRBY.
fn incr_decr(c: &mut Ctx, key: &[u8], incr: i64) {
    let db = c.cl.db;
    let overflow = "ERR increment or decrement would overflow";
    let old = match lookup_write(c.srv, db, key) {
        None => 0,
        // Hot path: an integer changes in place, with a single lookup.
        Some(e) if matches!(e.value(), ValueRef::Int(_)) => {
            let ValueRef::Int(n) = e.value() else {
                unreachable!()
            };
            let Some(new) = n.checked_add(incr) else {
                return c.cl.reply.error(overflow);
            };
            e.set_int_in_place(new);
            c.dirty(1);
            string_written(c, key, true, "incrby");
            return c.cl.reply.int(new);
        }
        Some(e) => match string_bytes(e) {
            Some(s) => match parse_i64(&s) {
                Some(n) => n,
                None => return c.cl.reply.error(ERR_NOT_INT),
            },
            None => return c.cl.reply.error(ERR_WRONGTYPE),
        },
    };
    let Some(new) = old.checked_add(incr) else {
        return c.cl.reply.error(overflow);
    };
    let d = &mut c.srv.dbs[db];
    let existed = d.main.get(key).is_some();
    if existed {
        d.replace_value(key, NewValue::Int(new), false);
    } else {
        d.main
            .insert_new(Entry::new(key, NewValue::Int(new), false));
    }
    c.dirty(1);
    string_written(c, key, existed, "incrby");
    c.cl.reply.int(new);
}

/// `INCR key`
pub fn incr(c: &mut Ctx, argv: &[&[u8]]) {
    incr_decr(c, argv[1], 1);
}

/// `DECR key`
pub fn decr(c: &mut Ctx, argv: &[&[u8]]) {
    incr_decr(c, argv[1], -1);
}

/// `INCRBY key increment`
pub fn incrby(c: &mut Ctx, argv: &[&[u8]]) {
    match arg_i64(argv[2]) {
        Ok(n) => incr_decr(c, argv[1], n),
        Err(e) => c.cl.reply.error(e),
    }
}

/// `DECRBY key decrement`
pub fn decrby(c: &mut Ctx, argv: &[&[u8]]) {
    match arg_i64(argv[2]) {
        Ok(i64::MIN) => c.cl.reply.error("ERR decrement would overflow"),
        Ok(n) => incr_decr(c, argv[1], -n),
        Err(e) => c.cl.reply.error(e),
    }
}

/// `INCRBYFLOAT key increment` — propagated as `SET key value KEEPTTL`.
pub fn incrbyfloat(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let key = argv[1];
    let cur = match lookup_write(c.srv, db, key) {
        None => None,
        Some(e) => match string_bytes(e) {
            Some(v) => Some(v.into_owned()),
            None => return c.cl.reply.error(ERR_WRONGTYPE),
        },
    };
    let new = match crate::util::ld_add(cur.as_deref(), argv[2]) {
        Ok(v) => v,
        Err(crate::util::LongDoubleError::NotAFloat) => return c.cl.reply.error(ERR_NOT_FLOAT),
        Err(crate::util::LongDoubleError::OutOfRange) => return c.cl.reply.error(ERR_NAN_OR_INF),
    };
    let d = &mut c.srv.dbs[db];
    if cur.is_some() {
        d.replace_value(key, NewValue::Str(&new), false);
    } else {
        d.main
            .insert_new(Entry::new(key, NewValue::Str(&new), false));
    }
    c.dirty(1);
    string_written(c, key, cur.is_some(), "incrbyfloat");
    c.cl.reply.bulk(&new);
    c.propagate_as(vec![
        b"SET".to_vec(),
        key.to_vec(),
        new,
        b"KEEPTTL".to_vec(),
    ]);
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]` — the
/// longest common subsequence of two strings, its length (LEN), or its
/// matching ranges (IDX), as Redis 7.0 computes them: the classic dynamic
/// programming table, walked back from the end. Missing keys read as
/// empty strings. The table's size is bounded by `proto-max-bulk-len`.
pub fn lcs(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let mut read = |key: &[u8]| -> Result<Vec<u8>, ()> {
        match lookup_read(c.srv, db, key) {
            None => Ok(Vec::new()),
            Some(e) => string_bytes(e).map(|s| s.into_owned()).ok_or(()),
        }
    };
    let (a, b) = match (read(argv[1]), read(argv[2])) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            return c
                .cl
                .reply
                .error("ERR The specified keys must contain string values")
        }
    };
    let (mut want_len, mut want_idx, mut with_match_len, mut min_match_len) =
        (false, false, false, 0i64);
    let mut j = 3;
    while j < argv.len() {
        let opt = argv[j];
        if eq_ic(opt, "idx") {
            want_idx = true;
        } else if eq_ic(opt, "len") {
            want_len = true;
        } else if eq_ic(opt, "withmatchlen") {
            with_match_len = true;
        } else if eq_ic(opt, "minmatchlen") && j + 1 < argv.len() {
            min_match_len = match arg_i64(argv[j + 1]) {
                Ok(n) => n.max(0),
                Err(e) => return c.cl.reply.error(e),
            };
            j += 1;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    if want_len && want_idx {
        return c
            .cl
            .reply
            .error("ERR If you want both the length and indexes, please just use IDX.");
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return c.cl.reply.error("ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u128 + 1) * (blen as u128 + 1);
    if cells * 4 > c.srv.config.proto_max_bulk_len as u128 {
        return c
            .cl
            .reply
            .error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells as usize).is_err() {
        return c
            .cl
            .reply
            .error("ERR Insufficient memory, failed allocating transient memory for LCS");
    }
    table.resize(cells as usize, 0);
    let w = blen + 1;
    for i in 1..=alen {
        for j in 1..=blen {
            table[i * w + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * w + j - 1] + 1
            } else {
                table[(i - 1) * w + j].max(table[i * w + j - 1])
            };
        }
    }
    let total = table[alen * w + blen];
    if want_len {
        return c.cl.reply.int(total as i64);
    }
    // Walk back from the end, collecting the string and, for IDX, the
    // ranges of contiguous matches (with Redis's exact range rules).
    let mut result = vec![0u8; total as usize];
    let mut ranges: Vec<[usize; 4]> = Vec::new();
    let (mut astart, mut aend, mut bstart, mut bend) = (alen, 0, 0, 0);
    let (mut i, mut j, mut k) = (alen, blen, total as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[k - 1] = a[i - 1];
            if astart == alen {
                (astart, aend, bstart, bend) = (i - 1, i - 1, j - 1, j - 1);
            } else if astart == i && bstart == j {
                astart -= 1;
                bstart -= 1;
            } else {
                emit = true;
            }
            if astart == 0 || bstart == 0 {
                emit = true;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * w + j] > table[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if astart != alen {
                emit = true;
            }
        }
        if emit {
            let match_len = aend.wrapping_sub(astart).wrapping_add(1);
            if min_match_len == 0 || match_len as i64 >= min_match_len {
                ranges.push([astart, aend, bstart, bend]);
            }
            astart = alen;
        }
    }
    if !want_idx {
        return c.cl.reply.bulk(&result);
    }
    let r = &mut c.cl.reply;
    r.map(2);
    r.bulk(b"matches");
    r.array(ranges.len());
    for [astart, aend, bstart, bend] in ranges {
        r.array(2 + with_match_len as usize);
        r.array(2);
        r.int(astart as i64);
        r.int(aend as i64);
        r.array(2);
        r.int(bstart as i64);
        r.int(bend as i64);
        if with_match_len {
            r.int((aend - astart + 1) as i64);
        }
    }
    r.bulk(b"len");
    r.int(total as i64);
}
