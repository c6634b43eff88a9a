//! Keys a writable replica's own clients gave a TTL (Redis's
//! slaveKeysWithExpire). The master knows nothing of them and sends no DEL,
//! so the replica's cron expires them itself, picking them at random.

use std::collections::HashMap;

/// Each key with a bit for every database (below 64) it may have a TTL in.
#[derive(Default)]
pub struct ReplicaKeysWithExpire {
    keys: Vec<(Vec<u8>, u64)>,
    index: HashMap<Vec<u8>, usize>,
}

impl ReplicaKeysWithExpire {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn clear(&mut self) {
        self.keys.clear();
        self.index.clear();
    }

    /// Note that `key` may have a TTL in `db` (databases above 63 are not
    /// tracked, as in Redis).
    pub fn remember(&mut self, db: usize, key: &[u8]) {
        if db > 63 {
            return;
        }
        match self.index.get(key) {
            Some(&i) => self.keys[i].1 |= 1 << db,
            None => {
                self.index.insert(key.to_vec(), self.keys.len());
                self.keys.push((key.to_vec(), 1 << db));
            }
        }
    }

    /// The key at position `i` (below `len`) and its databases.
    pub fn at(&self, i: usize) -> (&[u8], u64) {
        let (key, dbs) = &self.keys[i];
        (key, *dbs)
    }

    /// Keep the key at `i` for the databases in `dbs`, or forget it when
    /// none is left.
    pub fn update(&mut self, i: usize, dbs: u64) {
        if dbs != 0 {
            self.keys[i].1 = dbs;
            return;
        }
        let (key, _) = self.keys.swap_remove(i);
        self.index.remove(&key);
        if let Some((moved, _)) = self.keys.get(i) {
            if let Some(slot) = self.index.get_mut(moved) {
                *slot = i;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_a_key_keeps_the_others_reachable() {
        let mut k = ReplicaKeysWithExpire::default();
        k.remember(0, b"a");
        k.remember(3, b"b");
        k.remember(5, b"b");
        // Databases above 63 are not tracked.
        k.remember(64, b"c");
        assert_eq!(k.len(), 2);
        k.remember(1, b"c");
        assert_eq!(k.len(), 3);
        assert_eq!(k.at(1), (&b"b"[..], (1 << 3) | (1 << 5)));
        // Forgetting `a` moves the last key into its place.
        k.update(0, 0);
        assert_eq!(k.len(), 2);
        assert_eq!(k.at(0), (&b"c"[..], 1 << 1));
        k.remember(2, b"c");
        k.remember(2, b"b");
        assert_eq!(k.at(0).1, (1 << 1) | (1 << 2));
        assert_eq!(k.at(1).1, (1 << 2) | (1 << 3) | (1 << 5));
        k.update(1, 1 << 2);
        assert_eq!(k.at(1), (&b"b"[..], 1 << 2));
        k.update(1, 0);
        k.update(0, 0);
        assert!(k.is_empty());
        k.remember(0, b"a");
        assert_eq!(k.at(0), (&b"a"[..], 1));
    }
}
