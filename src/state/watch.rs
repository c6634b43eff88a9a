//! WATCH bookkeeping (Redis's multi.c touchWatchedKey and friends).
//!
//! Each watched (database, key) lists the ids of the clients watching it.
//! A change to the key (`touch_watched_key`, called wherever Redis calls
//! signalModifiedKey) flags those clients: their next EXEC fails. A key that
//! was already logically expired when it was watched only counts as changed
//! if it is still there and rewritten; its deletion is no change (Redis
//! 7.0's "stale key" rules).

use std::collections::HashMap;

use super::{ClientState, Server};

/// A key one client watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedKey {
    pub db: usize,
    pub key: Vec<u8>,
    /// The key was logically expired when WATCH ran.
    pub expired: bool,
}

/// A watched key: (database, key).
pub type WatchKey = (usize, Vec<u8>);

/// Watchers of every watched key.
pub type WatchedKeys = HashMap<WatchKey, Vec<u64>, foldhash::fast::RandomState>;

impl Server {
    /// The running client (not in the slab) or a client in the slab.
    fn watcher<'a>(
        &'a mut self,
        current: &'a mut Option<&mut ClientState>,
        id: u64,
    ) -> Option<&'a mut ClientState> {
        if let Some(c) = current.as_deref_mut() {
            if c.id == id {
                return Some(c);
            }
        }
        self.client_by_id_mut(id)
    }

    /// A key changed (Redis's signalModifiedKey): its watchers fail their
    /// next EXEC and the clients that may cache it are told.
    pub fn signal_modified_key(
        &mut self,
        current: Option<&mut ClientState>,
        db: usize,
        key: &[u8],
    ) {
        self.touch_watched_key(current, db, key);
        self.tracking_invalidate_key(key, true);
    }

    /// A key was modified: every client watching it fails its next EXEC.
    /// `current` is the client running the command (out of the slab).
    pub fn touch_watched_key(
        &mut self,
        mut current: Option<&mut ClientState>,
        db: usize,
        key: &[u8],
    ) {
        if self.watched_keys.is_empty() {
            return;
        }
        let Some(ids) = self.watched_keys.get(&(db, key.to_vec())).cloned() else {
            return;
        };
        let exists = self.dbs[db].main.get(key).is_some();
        for id in ids {
            let Some(c) = self.watcher(&mut current, id) else {
                if id == self.current_client {
                    self.deferred_touches.push((db, key.to_vec()));
                }
                continue;
            };
            let Some(wk) = c.watched.iter_mut().find(|w| w.db == db && w.key == key) else {
                continue;
            };
            if wk.expired && !exists {
                // The stale key is gone: logically nothing changed.
                wk.expired = false;
                continue;
            }
            c.dirty_cas = true;
        }
    }

    /// FLUSHDB/FLUSHALL (`replaced_with` None) or SWAPDB (the database
    /// whose contents replace `emptied`'s): flag watchers of keys that
    /// existed in `emptied` or exist in the replacement (Redis's
    /// touchAllWatchedKeysInDb).
    pub fn touch_all_watched_keys_in_db(
        &mut self,
        mut current: Option<&mut ClientState>,
        emptied: usize,
        replaced_with: Option<usize>,
    ) {
        if self.watched_keys.is_empty() {
            return;
        }
        let now = self.now_ms;
        let keys: Vec<(WatchKey, Vec<u64>)> = self
            .watched_keys
            .iter()
            .filter(|((db, _), _)| *db == emptied)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for ((_, key), ids) in keys {
            let exists_in_emptied = self.dbs[emptied].main.get(&key).is_some();
            let in_replacement =
                replaced_with.is_some_and(|r| self.dbs[r].main.get(&key).is_some());
            if !exists_in_emptied && !in_replacement {
                continue;
            }
            let replacement_expired =
                replaced_with.is_some_and(|r| in_replacement && self.dbs[r].is_expired(&key, now));
            for id in ids {
                let Some(c) = self.watcher(&mut current, id) else {
                    continue;
                };
                let Some(wk) = c
                    .watched
                    .iter_mut()
                    .find(|w| w.db == emptied && w.key == key)
                else {
                    continue;
                };
                if wk.expired {
                    if !in_replacement {
                        // The expired key is now deleted: no logical change.
                        wk.expired = false;
                        continue;
                    } else if replacement_expired {
                        // Expired before, expired after.
                        continue;
                    }
                } else if !exists_in_emptied && replacement_expired {
                    // A missing key replaced by an expired one.
                    wk.expired = true;
                    continue;
                }
                c.dirty_cas = true;
            }
        }
    }

    /// Forget every key `client` watches (EXEC, DISCARD, UNWATCH, RESET,
    /// disconnect).
    pub fn unwatch_all(&mut self, client: &mut ClientState) {
        for wk in client.watched.drain(..) {
            let k = (wk.db, wk.key);
            if let Some(ids) = self.watched_keys.get_mut(&k) {
                ids.retain(|&i| i != client.id);
                if ids.is_empty() {
                    self.watched_keys.remove(&k);
                }
            }
        }
        client.dirty_cas = false;
    }
}
