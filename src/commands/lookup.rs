//! Keyspace access for handlers (Redis's lookupKey*, expireIfNeeded): every
//! lookup expires a key whose TTL has passed (propagating the deletion),
//! counts hits and misses and touches the access clock.

use super::*;
use crate::db::entry::lru_clock;

/// Delete `key` if its TTL has passed, propagating a DEL as Redis does so
/// that replicas and the AOF never decide expiry on their own clock.
/// Returns true when the key was expired: the caller must then treat it as
/// missing, for while clients are paused it stays in the table.
pub fn expire_if_needed(srv: &mut Server, db: usize, key: &[u8]) -> bool {
    let now = srv.now_ms;
    let d = &mut srv.dbs[db];
    let Some(e) = d.main.get(key) else {
        return false;
    };
    if !e.has_expire() || srv.replaying_aof || !d.is_expired(key, now) {
        return false;
    }
    // The master's commands see keys as the master does: they exist until
    // its DEL comes.
    if srv.master_is_running() {
        return false;
    }
    if srv.may_delete_expired() {
        delete_expired(srv, db, key);
    }
    true
}

/// Remove an expired key, propagate its deletion, publish `expired` and
/// signal its watchers (Redis's deleteExpiredKeyAndPropagate).
pub fn delete_expired(srv: &mut Server, db: usize, key: &[u8]) {
    let mode = crate::db::FreeMode::lazy_if(srv.config.lazyfree_lazy_expire);
    // Freeing a large value inline is a latency spike of its own.
    let timer = srv.latency_start();
    srv.dbs[db].delete_with(key, mode);
    srv.latency_end("expire-del", timer);
    srv.stats.expired_keys += 1;
    let del: &[u8] = if srv.config.lazyfree_lazy_expire {
        b"UNLINK"
    } else {
        b"DEL"
    };
    srv.propagate(db, &[del, key]);
    srv.notify_keyspace_event(NotifyFlags::EXPIRED, "expired", key, db);
    srv.signal_modified_key(None, db, key);
}

/// Look up a key for reading: expires it if needed, counts hits and misses,
/// updates its access clock. One hash lookup for a key without a TTL.
pub fn lookup_read<'s>(srv: &'s mut Server, db: usize, key: &[u8]) -> Option<&'s mut Entry> {
    let found = lookup_live(srv, db, key, false);
    if found.is_some() {
        srv.stats.keyspace_hits += 1;
    } else {
        srv.stats.keyspace_misses += 1;
        srv.notify_keyspace_event(NotifyFlags::KEY_MISS, "keymiss", key, db);
    }
    // SAFETY: the pointer comes from the table of `srv.dbs[db]`, which is
    // borrowed mutably through `srv` for the returned lifetime.
    found.map(|p| unsafe { &mut *p })
}

/// Look up a key without touching its access clock (Redis's
/// LOOKUP_NOTOUCH | LOOKUP_NONOTIFY: TYPE, OBJECT, DEBUG LISTPACK): expires
/// it if needed and counts a keyspace hit or miss.
pub fn lookup_notouch<'s>(srv: &'s mut Server, db: usize, key: &[u8]) -> Option<&'s Entry> {
    let expired = expire_if_needed(srv, db, key);
    let found = srv.dbs[db].main.get(key).filter(|_| !expired);
    if found.is_some() {
        srv.stats.keyspace_hits += 1;
    } else {
        srv.stats.keyspace_misses += 1;
    }
    found
}

/// Look up a key for writing: expires it if needed, updates its clock.
pub fn lookup_write<'s>(srv: &'s mut Server, db: usize, key: &[u8]) -> Option<&'s mut Entry> {
    // SAFETY: as in lookup_read.
    lookup_live(srv, db, key, true).map(|p| unsafe { &mut *p })
}

/// Find a live key (deleting it if its TTL has passed) and touch its clock.
/// `write`: the lookup is for a write, which on a writable replica deletes
/// an expired key first (Redis's EXPIRE_FORCE_DELETE_EXPIRED), or the value
/// it writes would keep the old, past TTL.
fn lookup_live(srv: &mut Server, db: usize, key: &[u8], write: bool) -> Option<*mut Entry> {
    let now = srv.now_ms;
    let lfu = srv.config.maxmemory_policy.is_lfu();
    let d = &mut srv.dbs[db];
    let e: *mut Entry = d.main.get_mut(key)?;
    // SAFETY: `e` points into `d.main`; only shared lookups (which never move
    // entries) happen before it is used or the key is deleted.
    let has_expire = unsafe { (*e).has_expire() };
    if has_expire && !srv.replaying_aof && d.is_expired(key, now) && !srv.master_is_running() {
        // A master deletes it, unless clients are paused (nothing expires
        // then, as in Redis); a writable replica too, for a write. A write
        // deletes it even while paused (one that runs then: in an EXEC
        // that paused, a blocked client served again): it is about to
        // store a new value under the key, which must not sit beside the
        // old entry.
        if write || (srv.clients_paused().is_none() && srv.master.target.is_none()) {
            delete_expired(srv, db, key);
        }
        return None;
    }
    if lfu {
        // SAFETY: as above.
        let word = unsafe { (*e).lru() };
        let r = (srv.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let (factor, decay) = (srv.config.lfu_log_factor, srv.config.lfu_decay_time);
        let minutes = crate::db::entry::lfu_minutes(now);
        let counter = crate::db::entry::lfu_decayed(word, minutes, decay);
        let counter = crate::db::entry::lfu_log_incr(counter, factor, r);
        unsafe { (*e).set_lru((minutes << 8) | counter as u32) };
    } else {
        unsafe { (*e).set_lru(lru_clock(now)) };
    }
    Some(e)
}

/// Does the key exist (after expiry), without touching statistics?
pub fn key_exists(srv: &mut Server, db: usize, key: &[u8]) -> bool {
    !expire_if_needed(srv, db, key) && srv.dbs[db].main.get(key).is_some()
}

/// The result of looking up a key that must hold a given collection type.
pub enum Typed<'a, T> {
    Missing,
    Found(&'a mut T),
    WrongType,
}

/// Look up `key` for a command on collections of one type: `pick` selects
/// the variant. Expires the key first; counts hits/misses when `read`.
pub fn lookup_typed<'s, T>(
    srv: &'s mut Server,
    db: usize,
    key: &[u8],
    read: bool,
    pick: fn(&mut crate::db::Value) -> Option<&mut T>,
) -> Typed<'s, T> {
    let e = if read {
        lookup_read(srv, db, key)
    } else {
        lookup_write(srv, db, key)
    };
    match e {
        None => Typed::Missing,
        Some(e) => match e.boxed_mut().and_then(pick) {
            Some(v) => Typed::Found(v),
            None => Typed::WrongType,
        },
    }
}

/// Store a new collection under `key` (which must be absent) and return it.
pub fn create_value<'s>(
    srv: &'s mut Server,
    db: usize,
    key: &[u8],
    v: crate::db::Value,
) -> &'s mut crate::db::Value {
    srv.notify_keyspace_event(NotifyFlags::NEW, "new", key, db);
    let table = &mut srv.dbs[db].main;
    table.insert_new(Entry::new(
        key,
        crate::db::NewValue::Boxed(Box::new(v)),
        false,
    ));
    table
        .get_mut(key)
        .and_then(|e| e.boxed_mut())
        .expect("value just inserted")
}

/// The collection at `key` for a write, created with `make` when missing,
/// in one lookup. The error is WRONGTYPE's when the key holds another type.
pub fn lookup_or_create<'s, T>(
    srv: &'s mut Server,
    db: usize,
    key: &[u8],
    pick: fn(&mut crate::db::Value) -> Option<&mut T>,
    make: impl FnOnce() -> crate::db::Value,
) -> Result<&'s mut T, &'static str> {
    let found: *mut T = match lookup_typed(srv, db, key, false, pick) {
        Typed::WrongType => return Err(ERR_WRONGTYPE),
        Typed::Found(v) => v,
        Typed::Missing => std::ptr::null_mut(),
    };
    if found.is_null() {
        return pick(create_value(srv, db, key, make())).ok_or(ERR_WRONGTYPE);
    }
    // SAFETY: `found` was borrowed from `srv` just above and nothing has run
    // since; returning it directly is only refused by the borrow checker's
    // conditional-return limitation.
    Ok(unsafe { &mut *found })
}

/// Delete `key` if its collection became empty (Redis never keeps empty ones).
pub fn delete_if_empty(srv: &mut Server, db: usize, key: &[u8], empty: bool) {
    if empty {
        srv.dbs[db].delete(key);
    }
}

/// The type name of an entry's value.
pub fn type_name(e: &Entry) -> &'static str {
    match e.value() {
        ValueRef::Str(_) | ValueRef::Int(_) => "string",
        ValueRef::Boxed(v) => v.type_name(),
    }
}
