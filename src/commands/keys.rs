//! Generic key commands: DEL, EXISTS, TYPE, RENAME, COPY, MOVE, KEYS, SCAN,
//! RANDOMKEY, TOUCH and OBJECT. They work on any value type.

use super::*;
use crate::db::{entry_with_key, FreeMode, ValueRef};

/// After a command removed elements from the collection at `key`: its
/// event, then, when the collection became empty, the key's deletion and
/// `del`, then its watchers (the order of Redis's handlers).
pub fn elements_removed(c: &mut Ctx, key: &[u8], class: u32, event: &str, empty: bool) {
    c.notify(class, event, key);
    if empty {
        let db = c.cl.db;
        c.srv.dbs[db].delete(key);
        c.notify(NotifyFlags::GENERIC, "del", key);
    }
    c.signal_modified(key);
}

/// Store a STORE command's result at `dst` (Redis's setKey: the old value
/// and its TTL are replaced; `new` when the key did not exist, watchers,
/// then `event`), or, for an empty result (`None`), delete `dst`, with
/// `del`, if it existed. Returns whether the keyspace changed.
pub fn store_result(
    c: &mut Ctx,
    dst: &[u8],
    result: Option<crate::db::Value>,
    class: u32,
    event: &str,
) -> bool {
    let db = c.cl.db;
    match result {
        Some(v) => {
            let existed = lookup_write(c.srv, db, dst).is_some();
            if !existed {
                c.notify(NotifyFlags::NEW, "new", dst);
            }
            let entry = crate::db::Entry::new(dst, crate::db::NewValue::Boxed(Box::new(v)), false);
            c.srv.dbs[db].set(entry, false);
            c.modified(dst, class, event);
            true
        }
        None => {
            if c.srv.dbs[db].delete(dst) {
                c.modified(dst, NotifyFlags::GENERIC, "del");
                true
            } else {
                false
            }
        }
    }
}

/// DEL and UNLINK: remove the keys, freeing their values as `mode` says.
fn del_generic(c: &mut Ctx, argv: &[&[u8]], mode: FreeMode) {
    let db = c.cl.db;
    let mut deleted = 0;
    for key in &argv[1..] {
        if !expire_if_needed(c.srv, db, key) && c.srv.dbs[db].delete_with(key, mode) {
            deleted += 1;
            c.modified(key, NotifyFlags::GENERIC, "del");
        }
    }
    c.dirty(deleted);
    c.cl.reply.int(deleted as i64);
}

/// `DEL key [key ...]` — values are freed in place, or in the background
/// with `lazyfree-lazy-user-del yes`.
pub fn del(c: &mut Ctx, argv: &[&[u8]]) {
    let mode = FreeMode::lazy_if(c.srv.config.lazyfree_lazy_user_del);
    del_generic(c, argv, mode);
}

/// `UNLINK key [key ...]` — the keys are gone at once; a big value (more
/// than 64 elements) is freed by the lazyfree thread, so unlinking a
/// 10M-member set does not stall the loop.
pub fn unlink(c: &mut Ctx, argv: &[&[u8]]) {
    del_generic(c, argv, FreeMode::Lazy);
}

/// `EXISTS key [key ...]` — how many of the keys exist (repeats count).
pub fn exists(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let mut n = 0;
    for key in &argv[1..] {
        if key_exists(c.srv, db, key) {
            c.srv.stats.keyspace_hits += 1;
            n += 1;
        } else {
            c.srv.stats.keyspace_misses += 1;
            c.notify(NotifyFlags::KEY_MISS, "keymiss", key);
        }
    }
    c.cl.reply.int(n);
}

/// The type name of `key`, "none" when missing, by a read lookup that
/// leaves the access time alone (Redis's LOOKUP_NOTOUCH): it expires the
/// key if needed, counts a hit or a miss, and a miss is a `keymiss` event.
fn lookup_type_name(c: &mut Ctx, key: &[u8]) -> &'static str {
    let db = c.cl.db;
    match lookup_notouch(c.srv, db, key).map(type_name) {
        Some(name) => name,
        None => {
            c.notify(NotifyFlags::KEY_MISS, "keymiss", key);
            "none"
        }
    }
}

/// `TYPE key` — string, list, set, zset, hash, or none.
pub fn type_cmd(c: &mut Ctx, argv: &[&[u8]]) {
    let name = lookup_type_name(c, argv[1]);
    c.cl.reply.simple(name);
}

/// The engine behind RENAME and RENAMENX. The TTL moves with the value.
fn rename_generic(c: &mut Ctx, argv: &[&[u8]], nx: bool) {
    let db = c.cl.db;
    let (src, dst) = (argv[1], argv[2]);
    if lookup_write(c.srv, db, src).is_none() {
        return c.cl.reply.error(ERR_NO_SUCH_KEY);
    }
    if src == dst {
        return if nx {
            c.cl.reply.int(0)
        } else {
            c.cl.reply.ok()
        };
    }
    let dst_exists = lookup_write(c.srv, db, dst).is_some();
    if dst_exists && nx {
        return c.cl.reply.int(0);
    }
    let Some((entry, ttl)) = c.srv.dbs[db].take(src) else {
        return c.cl.reply.error(ERR_NO_SUCH_KEY);
    };
    c.put_key(db, entry.rekey(dst), ttl);
    c.dirty(1);
    // An overwritten destination is deleted first, so `dst` is always new.
    c.notify(NotifyFlags::NEW, "new", dst);
    c.signal_modified(src);
    c.signal_modified(dst);
    c.notify(NotifyFlags::GENERIC, "rename_from", src);
    c.notify(NotifyFlags::GENERIC, "rename_to", dst);
    if nx {
        c.cl.reply.int(1);
    } else {
        c.cl.reply.ok();
    }
}

/// `RENAME key newkey`
pub fn rename(c: &mut Ctx, argv: &[&[u8]]) {
    rename_generic(c, argv, false);
}

/// `RENAMENX key newkey` — 1 if renamed, 0 if newkey existed.
pub fn renamenx(c: &mut Ctx, argv: &[&[u8]]) {
    rename_generic(c, argv, true);
}

/// A database index argument: an `int`, within range (SELECT, MOVE, COPY).
pub fn db_index_arg(c: &Ctx, arg: &[u8]) -> Result<usize, &'static str> {
    let n = arg_i64(arg)?;
    if n < i32::MIN as i64 || n > i32::MAX as i64 {
        return Err("ERR value is out of range, value must between -2147483648 and 2147483647");
    }
    if n < 0 || n as usize >= c.srv.dbs.len() {
        return Err(ERR_DB_INDEX);
    }
    Ok(n as usize)
}

/// `COPY source destination [DB destination-db] [REPLACE]` — 1 if copied.
pub fn copy(c: &mut Ctx, argv: &[&[u8]]) {
    let src_db = c.cl.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < argv.len() {
        if eq_ic(argv[j], "replace") {
            replace = true;
        } else if eq_ic(argv[j], "db") && j + 1 < argv.len() {
            match db_index_arg(c, argv[j + 1]) {
                Ok(d) => dst_db = d,
                Err(e) => return c.cl.reply.error(e),
            }
            j += 1;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let (src, dst) = (argv[1], argv[2]);
    if src_db == dst_db && src == dst {
        return c.cl.reply.error(ERR_SAME_OBJECT);
    }
    let Some(e) = lookup_read(c.srv, src_db, src) else {
        return c.cl.reply.int(0);
    };
    let copy = entry_with_key(e, dst);
    let ttl = c.srv.dbs[src_db].get_expire(src);
    if lookup_write(c.srv, dst_db, dst).is_some() {
        if !replace {
            return c.cl.reply.int(0);
        }
        c.srv.dbs[dst_db].delete(dst);
    }
    c.put_key(dst_db, copy, ttl);
    c.dirty(1);
    c.srv
        .notify_keyspace_event(NotifyFlags::NEW, "new", dst, dst_db);
    c.srv.signal_modified_key(Some(c.cl), dst_db, dst);
    c.srv
        .notify_keyspace_event(NotifyFlags::GENERIC, "copy_to", dst, dst_db);
    c.cl.reply.int(1);
}

/// `MOVE key db` — 1 if moved, 0 if missing here or present there.
pub fn move_cmd(c: &mut Ctx, argv: &[&[u8]]) {
    let src_db = c.cl.db;
    let dst_db = match db_index_arg(c, argv[2]) {
        Ok(d) => d,
        Err(e) => return c.cl.reply.error(e),
    };
    if src_db == dst_db {
        return c.cl.reply.error(ERR_SAME_OBJECT);
    }
    let key = argv[1];
    if lookup_write(c.srv, src_db, key).is_none() || lookup_write(c.srv, dst_db, key).is_some() {
        return c.cl.reply.int(0);
    }
    let Some((entry, ttl)) = c.srv.dbs[src_db].take(key) else {
        return c.cl.reply.int(0);
    };
    c.put_key(dst_db, entry, ttl);
    c.dirty(1);
    c.srv
        .notify_keyspace_event(NotifyFlags::NEW, "new", key, dst_db);
    c.signal_modified(key);
    c.srv.signal_modified_key(Some(c.cl), dst_db, key);
    c.notify(NotifyFlags::GENERIC, "move_from", key);
    c.srv
        .notify_keyspace_event(NotifyFlags::GENERIC, "move_to", key, dst_db);
    c.cl.reply.int(1);
}

/// `KEYS pattern` — every live key matching the glob pattern.
pub fn keys(c: &mut Ctx, argv: &[&[u8]]) {
    let pattern = argv[1];
    let all = pattern == b"*";
    let now = c.srv.now_ms;
    let d = &c.srv.dbs[c.cl.db];
    let mut found: Vec<&[u8]> = Vec::new();
    d.main.for_each(&mut |e| {
        let key = e.key();
        if (all || glob_match(pattern, key, false)) && !(e.has_expire() && d.is_expired(key, now)) {
            found.push(key);
        }
    });
    let out = &mut c.cl.reply;
    out.array(found.len());
    for k in found {
        out.bulk(k);
    }
}

/// Parse a SCAN cursor like `strtoul`: optional sign, decimal digits, the
/// whole argument (a C string to Redis: up to a NUL byte, so "\0…" is 0);
/// a negative number wraps as in C.
pub fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let arg = c_bytes(arg);
    if arg.first().is_some_and(|b| b.is_ascii_whitespace()) {
        return None;
    }
    let (neg, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        // strtoul consumed nothing: the cursor is 0 only if the input is empty.
        return if arg.is_empty() { Some(0) } else { None };
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Advance a SCAN over `table` from `cursor` until `visit` reports at least
/// `count` collected items, the scan completes, or `count * 10` buckets were
/// visited (Redis's bound for sparse tables). Returns the next cursor.
/// SCAN, HSCAN and SSCAN share it.
pub fn scan_table(
    table: &crate::db::Table,
    mut cursor: u64,
    count: usize,
    visit: &mut dyn FnMut(&crate::db::Entry) -> usize,
) -> u64 {
    let mut iterations = count.saturating_mul(10);
    let mut collected = 0;
    loop {
        cursor = table.scan(cursor, &mut |e| collected = visit(e));
        iterations -= 1;
        if cursor == 0 || iterations == 0 || collected >= count {
            return cursor;
        }
    }
}

/// Options shared by SCAN, HSCAN, SSCAN and ZSCAN.
pub struct ScanOptions<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
    pub type_name: Option<&'a [u8]>,
}

/// Parse `[MATCH pattern] [COUNT count] [TYPE type]` starting at `argv[start]`.
pub fn parse_scan_options<'a>(
    argv: &[&'a [u8]],
    start: usize,
    allow_type: bool,
) -> Result<ScanOptions<'a>, &'static str> {
    let mut opts = ScanOptions {
        count: 10,
        pattern: None,
        type_name: None,
    };
    let mut j = start;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        if eq_ic(argv[j], "count") && more {
            let n = arg_i64(argv[j + 1])?;
            if n < 1 {
                return Err(ERR_SYNTAX);
            }
            opts.count = n as usize;
        } else if eq_ic(argv[j], "match") && more {
            let p = argv[j + 1];
            opts.pattern = if p == b"*" { None } else { Some(p) };
        } else if allow_type && eq_ic(argv[j], "type") && more {
            opts.type_name = Some(argv[j + 1]);
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 2;
    }
    Ok(opts)
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`
///
/// Reply: the next cursor and a batch of keys. A key present for the whole
/// iteration is returned at least once, however the table resizes.
pub fn scan(c: &mut Ctx, argv: &[&[u8]]) {
    let Some(mut cursor) = parse_cursor(argv[1]) else {
        return c.cl.reply.error("ERR invalid cursor");
    };
    let opts = match parse_scan_options(argv, 2, true) {
        Ok(o) => o,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    cursor = scan_table(&c.srv.dbs[db].main, cursor, opts.count, &mut |e| {
        keys.push(e.key().to_vec());
        keys.len()
    });
    let mut out_keys = Vec::with_capacity(keys.len());
    for key in keys {
        if let Some(p) = opts.pattern {
            if !glob_match(p, &key, false) {
                continue;
            }
        }
        // As in Redis 7.0: the TYPE filter is a read lookup (an expired key
        // gives `expired` and `keymiss`, and is "none"); then expired keys
        // are dropped.
        if let Some(t) = opts.type_name {
            let ty = lookup_type_name(c, &key);
            if !t.eq_ignore_ascii_case(ty.as_bytes()) {
                continue;
            }
        }
        if expire_if_needed(c.srv, db, &key) {
            continue;
        }
        out_keys.push(key);
    }
    let out = &mut c.cl.reply;
    out.array(2);
    out.bulk(cursor.to_string().as_bytes());
    out.array(out_keys.len());
    for k in out_keys {
        out.bulk(&k);
    }
}

/// `RANDOMKEY` — a random live key, or nil.
pub fn randomkey(c: &mut Ctx, _argv: &[&[u8]]) {
    let db = c.cl.db;
    // Bounded tries: a database full of expired keys is cleaned as we go.
    for _ in 0..100 {
        let rng = &mut c.srv.rng;
        let Some(key) = c.srv.dbs[db]
            .main
            .random_entry(&mut || rng.next_u64())
            .map(|e| e.key().to_vec())
        else {
            return c.cl.reply.null();
        };
        if expire_if_needed(c.srv, db, &key) {
            continue;
        }
        return c.cl.reply.bulk(&key);
    }
    c.cl.reply.null()
}

/// `TOUCH key [key ...]` — how many exist; updates their access time.
pub fn touch(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let n = argv[1..]
        .iter()
        .filter(|k| lookup_read(c.srv, db, k).is_some())
        .count();
    c.cl.reply.int(n as i64);
}

/// OBJECT ENCODING name of an entry, as Redis reports it.
pub fn encoding_name(e: &crate::db::Entry) -> &'static str {
    match e.value() {
        ValueRef::Int(_) => "int",
        ValueRef::Str(s) => {
            if e.is_raw() || s.len() > 44 {
                "raw"
            } else {
                "embstr"
            }
        }
        ValueRef::Boxed(v) => v.encoding(),
    }
}

/// Seconds since the entry was last accessed.
fn idle_seconds(e: &crate::db::Entry, now_ms: i64) -> i64 {
    crate::db::entry::lru_idle(lru_clock(now_ms), e.lru()) as i64
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// The reference count Redis would show for a value (OBJECT REFCOUNT,
/// DEBUG OBJECT): it shares the integers 0..9999 (refcount INT_MAX),
/// except under an LRU or LFU maxmemory policy, where each value needs its
/// own access time (`sharing` false).
pub(super) fn refcount(e: &crate::db::Entry, sharing: bool) -> i64 {
    let shared = sharing && matches!(e.value(), ValueRef::Int(n) if (0..10_000).contains(&n));
    if shared {
        i32::MAX as i64
    } else {
        1
    }
}

/// Whether Redis would share small integers under this configuration.
pub(super) fn shares_integers(srv: &crate::state::Server) -> bool {
    let policy = srv.config.maxmemory_policy;
    srv.config.maxmemory == 0 || !(policy.is_lru() || policy.is_lfu())
}

/// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key` and `OBJECT HELP`.
pub fn object(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    if sub == "help" {
        return reply_help(c, OBJECT_HELP);
    }
    let db = c.cl.db;
    let now = c.srv.now_ms;
    let lfu = c.srv.config.maxmemory_policy.is_lfu();
    let decay = c.srv.config.lfu_decay_time;
    let sharing = shares_integers(c.srv);
    let Some(e) = lookup_notouch(c.srv, db, argv[2]) else {
        return c.cl.reply.null();
    };
    match sub {
        "encoding" => {
            let name = encoding_name(e);
            c.cl.reply.bulk(name.as_bytes());
        }
        "refcount" => c.cl.reply.int(refcount(e, sharing)),
        "idletime" => {
            if lfu {
                return c.cl.reply.error("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
            }
            let idle = idle_seconds(e, now);
            c.cl.reply.int(idle);
        }
        _ => {
            if !lfu {
                return c.cl.reply.error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
            }
            let minutes = crate::db::entry::lfu_minutes(now);
            let freq = crate::db::entry::lfu_decayed(e.lru(), minutes, decay);
            c.cl.reply.int(freq as i64);
        }
    }
}

/// `DUMP key`: the value in Redis's payload format (RDB serialisation, RDB
/// version, CRC-64), so redis-server restores it and the reverse.
pub fn dump(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let compress = c.srv.config.rdbcompression;
    match lookup_read(c.srv, db, argv[1]) {
        None => c.cl.reply.null(),
        Some(e) => {
            let payload = crate::persistence::rdb::dump_payload(e, compress);
            c.cl.reply.bulk(&payload);
        }
    }
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`
pub fn restore(c: &mut Ctx, argv: &[&[u8]]) {
    use crate::persistence::rdb::{self, Restored};
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (i64, i64) = (-1, -1);
    let mut j = 4;
    while j < argv.len() {
        let additional = argv.len() - j - 1;
        if eq_ic(argv[j], "replace") {
            replace = true;
        } else if eq_ic(argv[j], "absttl") {
            absttl = true;
        } else if eq_ic(argv[j], "idletime") && additional >= 1 && freq == -1 {
            idle = match arg_i64(argv[j + 1]) {
                Ok(n) if n < 0 => {
                    return c.cl.reply.error("ERR Invalid IDLETIME value, must be >= 0")
                }
                Ok(n) => n,
                Err(e) => return c.cl.reply.error(e),
            };
            j += 1;
        } else if eq_ic(argv[j], "freq") && additional >= 1 && idle == -1 {
            freq = match arg_i64(argv[j + 1]) {
                Ok(n) if !(0..=255).contains(&n) => {
                    return c
                        .cl
                        .reply
                        .error("ERR Invalid FREQ value, must be >= 0 and <= 255")
                }
                Ok(n) => n,
                Err(e) => return c.cl.reply.error(e),
            };
            j += 1;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    let key = argv[1];
    let db = c.cl.db;
    if !replace && lookup_write(c.srv, db, key).is_some() {
        return c.cl.reply.error("BUSYKEY Target key name already exists.");
    }
    let mut ttl = match arg_i64(argv[2]) {
        Ok(n) if n < 0 => return c.cl.reply.error("ERR Invalid TTL value, must be >= 0"),
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut opts = rdb::LoadOptions::from_config(&c.srv.config);
    opts.skip_payload_checksum = c.srv.skip_checksum_validation;
    let value = match rdb::parse_dump_payload(argv[3], &opts) {
        Ok(v) => v,
        Err(e) => return c.cl.reply.error(&e),
    };
    let deleted = replace && c.srv.dbs[db].delete(key);
    if ttl != 0 && !absttl {
        // As Redis's `ttl += mstime()`: a TTL that overflows wraps to the
        // past, so the key counts as already expired.
        ttl = ttl.wrapping_add(c.clock_ms());
    }
    if ttl != 0 && c.srv.already_expired(ttl) && c.srv.may_delete_expired() {
        // Already expired: nothing is added (what it replaced is gone).
        if deleted {
            c.propagate_as(vec![b"DEL".to_vec(), key.to_vec()]);
            c.modified(key, NotifyFlags::GENERIC, "del");
            c.dirty(1);
        }
        return c.cl.reply.ok();
    }
    c.notify(NotifyFlags::NEW, "new", key);
    let entry = match value {
        Restored::Str(s) => crate::db::Entry::string(key, &s),
        Restored::Value(v) => {
            crate::db::Entry::new(key, crate::db::NewValue::Boxed(Box::new(v)), false)
        }
    };
    c.srv.dbs[db].set(entry, false);
    if ttl != 0 {
        c.set_expire(db, key, ttl);
        if !absttl {
            // Propagated with the absolute time, as Redis does.
            let mut out: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
            out[2] = ttl.to_string().into_bytes();
            out.push(b"ABSTTL".to_vec());
            c.propagate_as(out);
        }
    }
    // IDLETIME sets an LRU time and FREQ an LFU counter, each only under a
    // policy that keeps one (Redis's objectSetLRUOrLFU).
    let lfu = c.srv.config.maxmemory_policy.is_lfu();
    let now_ms = c.srv.now_ms;
    let word = crate::db::entry::access_word(
        lfu,
        u64::try_from(idle).ok(),
        u8::try_from(freq).ok(),
        now_ms,
    );
    if let (Some(word), Some(e)) = (word, c.srv.dbs[db].main.get_mut(key)) {
        e.set_lru(word);
    }
    c.modified(key, NotifyFlags::GENERIC, "restore");
    c.dirty(1);
    c.cl.reply.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_parsing_matches_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"123"), Some(123));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
    }
}
