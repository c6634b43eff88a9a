//! The keyspace: one [`Db`] per logical database, each a main table of keys
//! and an `expires` table of TTLs (as in Redis, so that active expiry only has
//! to walk keys that can expire).
//!
//! This layer knows nothing about clients or propagation: expiring a key on
//! access, counting hits and feeding replicas happen in `commands`.

pub mod bitops;
pub mod entry;
pub mod geohash;
pub mod hll;
pub mod lazyfree;
pub mod listpack;
pub mod packed;
pub mod quicklist;
pub mod stream;
pub mod table;
pub mod value;
mod zorder;
pub mod zset;

pub use entry::{Entry, NewValue, ValueRef};
pub use lazyfree::FreeMode;
pub use stream::{Stream, StreamId};
pub use table::Table;
pub use value::{Hash, List, Set, Str, Value, ZSet};

/// One logical database (SELECT index).
pub struct Db {
    pub id: usize,
    pub main: Table,
    /// key → absolute expiry time in ms (stored as an integer entry).
    pub expires: Table,
    /// Where the active expiry cycle continues its walk of `expires`.
    pub expires_cursor: u64,
    /// Running estimate of the average TTL (INFO keyspace `avg_ttl`).
    pub avg_ttl: i64,
    /// How values that commands replace or empty are freed
    /// (`lazyfree-lazy-server-del`).
    pub server_del: FreeMode,
}

impl Db {
    pub fn new(id: usize, seed: u64) -> Db {
        Db {
            id,
            main: Table::guarded(seed),
            expires: Table::guarded(seed ^ 0x9e37_79b9_7f4a_7c15),
            expires_cursor: 0,
            avg_ttl: 0,
            server_del: FreeMode::Sync,
        }
    }

    pub fn len(&self) -> usize {
        self.main.len()
    }

    pub fn is_empty(&self) -> bool {
        self.main.is_empty()
    }

    /// The key's absolute expiry in ms, if it has one.
    pub fn get_expire(&self, key: &[u8]) -> Option<i64> {
        let e = self.main.get(key)?;
        if !e.has_expire() {
            return None;
        }
        match self.expires.get(key)?.value() {
            ValueRef::Int(ms) => Some(ms),
            _ => None,
        }
    }

    /// Set the key's absolute expiry. The key must exist.
    pub fn set_expire(&mut self, key: &[u8], when_ms: i64) {
        if let Some(e) = self.main.get_mut(key) {
            e.set_has_expire(true);
            match self.expires.get_mut(key) {
                Some(x) => {
                    x.set_int_in_place(when_ms);
                }
                None => self
                    .expires
                    .insert_new(Entry::new(key, NewValue::Int(when_ms), false)),
            }
        }
    }

    /// Remove the key's TTL. Returns whether it had one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        match self.main.get_mut(key) {
            Some(e) if e.has_expire() => {
                e.set_has_expire(false);
                self.expires.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Is the key logically expired at `now_ms`?
    pub fn is_expired(&self, key: &[u8], now_ms: i64) -> bool {
        self.get_expire(key)
            .is_some_and(|t| deadline_passed(t, now_ms))
    }

    /// Store `entry` (overwriting any previous value). When `keep_ttl` the
    /// existing TTL stays, otherwise it is removed as SET does. A replaced
    /// value is freed as `lazyfree-lazy-server-del` says.
    pub fn set(&mut self, entry: Entry, keep_ttl: bool) {
        if let Some(old) = self.main.insert(entry) {
            self.replaced(old, keep_ttl);
        }
    }

    /// Store the string `val` under `key` as [`Db::set`] of
    /// [`Entry::string`] does. An existing key whose integer or inline
    /// value takes the new one's room, or whose long string has its length,
    /// gets it in place ([`Entry::overwrite_string`]): one lookup, no
    /// allocation.
    pub fn set_string(&mut self, key: &[u8], val: &[u8], keep_ttl: bool) {
        let h = self.main.hash(key);
        let int = entry::string_int(val);
        let keep_clock = entry::lfu_policy();
        let expires = &mut self.expires;
        let overwrite = |e: &mut Entry| {
            let done = e.overwrite_string(val, int, keep_clock);
            if done && !keep_ttl && e.has_expire() {
                e.set_has_expire(false);
                expires.remove(key);
            }
            done
        };
        let make = || Entry::string_encoded(key, val, int);
        if let Some(old) = self.main.store_hashed(key, h, overwrite, make) {
            self.replaced(old, keep_ttl);
        }
    }

    /// After `old` was replaced by a new entry of its key: the counter and
    /// TTL the new one keeps, the old one freed.
    fn replaced(&mut self, old: Entry, keep_ttl: bool) {
        // Under an LFU policy the new value keeps the key's counter; with
        // `keep_ttl` it keeps the deadline (one lookup for both).
        let keep_counter = entry::lfu_policy();
        let keep_expire = keep_ttl && old.has_expire();
        if keep_counter || keep_expire {
            if let Some(e) = self.main.get_mut(old.key()) {
                if keep_counter {
                    e.set_lru(old.lru());
                }
                if keep_expire {
                    e.set_has_expire(true);
                }
            }
        }
        if old.has_expire() && !keep_ttl {
            self.expires.remove(old.key());
        }
        lazyfree::free_entry(old, self.server_del);
    }

    /// Replace the value of an existing key, keeping its TTL and clock.
    pub fn replace_value(&mut self, key: &[u8], value: NewValue, raw: bool) {
        let mut new = Entry::new(key, value, raw);
        if let Some(old) = self.main.get(key) {
            new.inherit_key_state(old);
        }
        if let Some(old) = self.main.insert(new) {
            lazyfree::free_entry(old, self.server_del);
        }
    }

    /// Delete a key as a side effect of a command (an emptied collection, a
    /// RENAME target): freed as `lazyfree-lazy-server-del` says. Returns
    /// whether it existed.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        self.delete_with(key, self.server_del)
    }

    /// Delete a key, freeing its value as `mode` says (UNLINK: lazily; DEL:
    /// per `lazyfree-lazy-user-del`). Returns whether it existed.
    pub fn delete_with(&mut self, key: &[u8], mode: FreeMode) -> bool {
        match self.main.remove(key) {
            Some(e) => {
                if e.has_expire() {
                    self.expires.remove(key);
                }
                lazyfree::free_entry(e, mode);
                true
            }
            None => false,
        }
    }

    /// Remove and return the entry together with its TTL (RENAME, MOVE).
    pub fn take(&mut self, key: &[u8]) -> Option<(Entry, Option<i64>)> {
        let ttl = self.get_expire(key);
        let mut e = self.main.remove(key)?;
        if e.has_expire() {
            self.expires.remove(key);
            e.set_has_expire(false);
        }
        Some((e, ttl))
    }

    /// Insert an entry (replacing any old key of that name) with an optional TTL.
    pub fn put(&mut self, entry: Entry, ttl: Option<i64>) {
        let key = entry.key().to_vec();
        self.delete(&key);
        self.main.insert_new(entry);
        if let Some(t) = ttl {
            self.set_expire(&key, t);
        }
    }

    pub fn clear(&mut self) {
        self.clear_with(FreeMode::Sync);
    }

    /// Empty the database (FLUSHDB); with `FreeMode::Lazy` the old tables
    /// are swapped out in O(1) and freed by the lazyfree thread.
    pub fn clear_with(&mut self, mode: FreeMode) {
        let objects = self.main.len();
        let (new_main, new_expires) = (self.main.empty_like(), self.expires.empty_like());
        let main = std::mem::replace(&mut self.main, new_main);
        let expires = std::mem::replace(&mut self.expires, new_expires);
        lazyfree::free_tables(vec![main, expires], objects, mode);
        self.expires_cursor = 0;
        self.avg_ttl = 0;
    }

    /// Advance incremental rehashing for up to `budget`.
    pub fn rehash_for(&mut self, budget: std::time::Duration) {
        self.main.rehash_for(budget);
        self.expires.rehash_for(budget);
    }
}

/// Has a key with deadline `when` (ms) expired at `now_ms`? Only once the
/// clock has passed it: as in Redis (keyIsExpired, the active cycle, the
/// RDB loader), a key lives through its last millisecond.
pub fn deadline_passed(when: i64, now_ms: i64) -> bool {
    now_ms > when
}

/// A copy of `entry`'s value under another key (COPY): a new value, with
/// the access clock of a new one, as Redis's copyCommand makes it.
pub fn entry_with_key(entry: &Entry, key: &[u8]) -> Entry {
    match entry.value() {
        ValueRef::Str(s) => Entry::new(key, NewValue::Str(s), entry.is_raw()),
        ValueRef::Int(n) => Entry::new(key, NewValue::Int(n), false),
        ValueRef::Boxed(v) => Entry::new(key, NewValue::Boxed(Box::new(v.clone())), entry.is_raw()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_of(db: &Db, key: &[u8]) -> Vec<u8> {
        match db.main.get(key).expect("key").value() {
            ValueRef::Str(s) => s.to_vec(),
            ValueRef::Int(n) => n.to_string().into_bytes(),
            ValueRef::Boxed(Value::Str(s)) => s.to_vec(),
            #[allow(unreachable_patterns)]
            ValueRef::Boxed(_) => panic!("not a string"),
        }
    }

    #[test]
    fn set_string_overwrites_in_place_and_drops_or_keeps_the_ttl() {
        let mut db = Db::new(0, 1);
        db.set_string(b"k", b"abcdef", false);
        let at = db.main.get(b"k").unwrap().as_raw();
        db.set_expire(b"k", 4_000_000_000_000);
        db.set_string(b"k", b"ghijkl", true);
        assert_eq!(db.main.get(b"k").unwrap().as_raw(), at, "the same entry");
        assert_eq!(string_of(&db, b"k"), b"ghijkl");
        assert_eq!(db.get_expire(b"k"), Some(4_000_000_000_000), "KEEPTTL");
        db.set_string(b"k", b"mnopqr", false);
        assert_eq!(db.main.get(b"k").unwrap().as_raw(), at);
        assert_eq!(db.get_expire(b"k"), None, "a plain SET drops the TTL");
        assert!(!db.main.get(b"k").unwrap().has_expire());
        assert_eq!(db.expires.len(), 0);

        // Another size: a new entry, the TTL handled the same way.
        db.set_expire(b"k", 4_000_000_000_000);
        db.set_string(b"k", b"longer value", true);
        assert_eq!(string_of(&db, b"k"), b"longer value");
        assert_eq!(db.get_expire(b"k"), Some(4_000_000_000_000));
        db.set_string(b"k", &[b'x'; 1000], false);
        assert_eq!(string_of(&db, b"k"), vec![b'x'; 1000]);
        assert_eq!(db.get_expire(b"k"), None);
        db.set_string(b"k", b"7", false);
        assert!(matches!(
            db.main.get(b"k").unwrap().value(),
            ValueRef::Int(7)
        ));
        assert_eq!(db.main.len(), 1);
    }
}
