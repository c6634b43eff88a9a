//! Eviction at `maxmemory` (Redis's evict.c): before a command runs, keys
//! are deleted by the configured policy until used memory is back under
//! the limit.
//!
//! The sampling policies (LRU, LFU, TTL) keep Redis's eviction pool: each
//! round samples `maxmemory-samples` keys of every database (from clusters
//! of neighbouring buckets, which is cheap) into a pool of the 16 best
//! candidates seen so far, and evicts the best one still alive. The pool
//! persists between rounds, so the choice approximates a true LRU/LFU over
//! far more keys than one sample holds. Random policies take one random
//! key per database in turn.
//!
//! Memory is what this thread has allocated, less what replicas' output
//! buffers and the AOF buffer hold (they shrink by themselves; counting
//! them would evict the dataset to make room for its own propagation).
//! One call frees at most what `maxmemory-eviction-tenacity` allows in
//! time; the rest is freed on the following turns of the loop, as Redis
//! does with its eviction timer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::{ClientKind, Server};
use crate::config::{MaxmemoryPolicy, NotifyFlags};
use crate::db::entry::{lfu_decayed, lfu_minutes, lru_clock, lru_idle};
use crate::db::{FreeMode, ValueRef};

/// Candidates the eviction pool holds (Redis's EVPOOL_SIZE).
const POOL_SIZE: usize = 16;
/// Samples an eviction pass takes without allocating (`maxmemory-samples`
/// is 5 by default; Redis suggests up to 10).
const STACK_SAMPLES: usize = 64;
/// Keys evicted between checks of the time limit.
const CHECK_EVERY: u32 = 16;

/// What an eviction attempt achieved (Redis's EVICT_OK/RUNNING/FAIL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Memory is under the limit (or eviction does not apply now).
    Ok,
    /// Over the limit, but freeing continues on the next turns.
    Running,
    /// Over the limit with nothing to evict (or noeviction).
    Fail,
}

/// One candidate: the higher `score`, the better to evict.
#[derive(Clone, Debug, Default)]
pub struct PoolEntry {
    score: u64,
    db: usize,
    key: Vec<u8>,
}

/// Eviction state kept between calls.
#[derive(Debug, Default)]
pub struct Evictor {
    /// Sorted by score, ascending; the best candidate is last.
    pool: Vec<PoolEntry>,
    /// The database the random policies visit next.
    next_db: usize,
    /// Freeing stopped at its time limit and continues on the next turn.
    pub pending: bool,
}

impl Evictor {
    /// Offer a sampled key; keeps the `POOL_SIZE` best (Redis's
    /// evictionPoolPopulate insertion).
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        let pos = self.pool.partition_point(|e| e.score < score);
        if self.pool.len() == POOL_SIZE {
            if pos == 0 {
                return; // worse than every candidate held
            }
            // Make room by dropping the worst.
            self.pool.remove(0);
            self.pool.insert(pos - 1, PoolEntry::new(score, db, key));
        } else {
            self.pool.insert(pos, PoolEntry::new(score, db, key));
        }
    }
}

impl PoolEntry {
    fn new(score: u64, db: usize, key: &[u8]) -> PoolEntry {
        PoolEntry {
            score,
            db,
            key: key.to_vec(),
        }
    }
}

/// Redis's evictionTimeLimitUs: how long one call may spend freeing.
fn time_limit_us(tenacity: i64) -> u64 {
    if tenacity <= 10 {
        50 * tenacity.max(0) as u64
    } else if tenacity < 100 {
        (500.0 * 1.15f64.powf(tenacity as f64 - 10.0)) as u64
    } else {
        u64::MAX
    }
}

/// What memory may reach before a keyspace table's growth waits (see
/// [`Server::update_growth_ceiling`]); 0: no limit.
static GROWTH_CEILING: AtomicUsize = AtomicUsize::new(0);

/// The keyspace tables' growth guard (Redis's dictExpandAllowed): a bucket
/// array of `more` bytes may be allocated unless that passes `maxmemory`,
/// so that growing a table never forces a burst of evictions.
pub fn table_growth_allowed(more: usize) -> bool {
    let ceiling = GROWTH_CEILING.load(Ordering::Relaxed);
    ceiling == 0 || crate::memory::used_memory() + more <= ceiling
}

impl Server {
    /// Memory that counts against `maxmemory`: used memory less replica
    /// output buffers and the AOF buffer (Redis's
    /// freeMemoryGetNotCountedMemory).
    pub fn memory_not_counted_for_evict(&self) -> usize {
        let replicas: usize = self
            .repl
            .replicas
            .iter()
            .filter_map(|&id| self.client_by_id(id))
            .map(|c| c.output_memory())
            .sum();
        // Of the replication buffer, what the backlog would hold without
        // replicas counts; what they make it hold beyond does not (Redis's
        // freeMemoryGetNotCountedMemory).
        let size = self.config.repl_backlog_size as usize;
        let counted = size
            + (size / super::replication::BLOCK_BYTES + 1) * super::replication::BLOCK_OVERHEAD;
        let beyond = self.replication_buffers_memory().saturating_sub(counted);
        replicas + beyond + self.aof.buf.capacity()
    }

    /// Note for the keyspace tables' growth guard what memory may reach:
    /// `maxmemory` plus what does not count against it (0: no limit).
    /// Refreshed by the cron (replica and AOF buffers move slowly against
    /// a table's growth) and when CONFIG SET changes `maxmemory`.
    pub fn update_growth_ceiling(&self) {
        let max = self.config.maxmemory as usize;
        let ceiling = if max == 0 {
            0
        } else {
            max + self.memory_not_counted_for_evict()
        };
        GROWTH_CEILING.store(ceiling, Ordering::Relaxed);
    }

    /// Bytes to free to get under `maxmemory`; 0 when under it.
    fn memory_to_free(&self) -> usize {
        let max = self.config.maxmemory as usize;
        let used = self.used_memory();
        if max == 0 || used <= max {
            return 0;
        }
        used.saturating_sub(self.memory_not_counted_for_evict())
            .saturating_sub(max)
    }

    /// Whether evicting now is allowed: not while loading, inside a busy
    /// script, on a replica that ignores maxmemory, or while clients are
    /// paused (the dataset must stay still).
    fn may_evict(&self) -> bool {
        self.loading.is_none()
            && self.script_run.is_none()
            && !(self.master.target.is_some() && self.config.replica_ignore_maxmemory)
            && self.clients_paused().is_none()
    }

    /// Free memory by the policy until under `maxmemory` (Redis's
    /// performEvictions). Each evicted key is deleted (lazily with
    /// `lazyfree-lazy-eviction`), counted, notified as `evicted`, and
    /// propagated as DEL (UNLINK when lazy) so replicas and the AOF drop it
    /// too.
    pub fn perform_evictions(&mut self) -> Eviction {
        if self.config.maxmemory != 0 && !self.may_evict() {
            // Not now: as if nothing were needed, the time over the limit
            // left as it is (Redis's isSafeToPerformEvictions); the next
            // command tries again.
            self.evictor.pending = false;
            return Eviction::Ok;
        }
        let result = self.evict_to_limit();
        self.count_time_over_limit(result);
        // Out of time with more to free: the loop goes on without sleeping
        // (Redis's eviction time event).
        self.evictor.pending = result == Eviction::Running;
        result
    }

    /// INFO's total/current_eviction_exceeded_time: a spell over
    /// `maxmemory` starts when eviction fails or runs out of time, and ends
    /// once used memory is under the limit again.
    fn count_time_over_limit(&mut self, result: Eviction) {
        let stats = &mut self.stats;
        match (result, stats.eviction_exceeded_since) {
            (Eviction::Ok, Some(since)) => {
                stats.eviction_exceeded_us += since.elapsed().as_micros() as u64;
                stats.eviction_exceeded_since = None;
            }
            (Eviction::Running | Eviction::Fail, None) => {
                stats.eviction_exceeded_since = Some(Instant::now());
            }
            _ => {}
        }
    }

    fn evict_to_limit(&mut self) -> Eviction {
        let to_free = self.memory_to_free();
        if to_free == 0 {
            return Eviction::Ok;
        }
        let policy = self.config.maxmemory_policy;
        if policy == MaxmemoryPolicy::NoEviction {
            return Eviction::Fail;
        }
        let started = Instant::now();
        let cycle = self.latency_start();
        let limit = time_limit_us(self.config.maxmemory_eviction_tenacity);
        let lazy = self.config.lazyfree_lazy_eviction;
        let (mut freed, mut evicted) = (0usize, 0u32);
        let mut result = Eviction::Ok;
        while freed < to_free {
            let Some((db, key)) = self.pick_victim(policy) else {
                result = Eviction::Fail;
                break;
            };
            let before = self.used_memory();
            let del = self.latency_start();
            self.dbs[db].delete_with(&key, FreeMode::lazy_if(lazy));
            self.latency_end("eviction-del", del);
            freed += before.saturating_sub(self.used_memory());
            self.stats.evicted_keys += 1;
            self.signal_modified_key(None, db, &key);
            self.notify_keyspace_event(NotifyFlags::EVICTED, "evicted", &key, db);
            if self.propagating() {
                let del: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
                self.propagate(db, &[del, &key]);
            }
            evicted += 1;
            if evicted % CHECK_EVERY == 0 {
                // Lazily freed memory leaves in another thread: look again.
                if lazy && self.memory_to_free() == 0 {
                    break;
                }
                if started.elapsed().as_micros() as u64 > limit {
                    result = Eviction::Running;
                    break;
                }
            }
        }
        // Lazily freed values may still be on their way out.
        if result == Eviction::Fail && self.memory_to_free() == 0 {
            result = Eviction::Ok;
        }
        self.latency_end("eviction-cycle", cycle);
        result
    }

    /// A random key (of those with a TTL unless `all`), taking the
    /// databases in turn (Redis's random policies keep a rotating index).
    fn any_key(&mut self, all: bool) -> Option<(usize, Vec<u8>)> {
        let n = self.dbs.len();
        for _ in 0..n {
            self.evictor.next_db = (self.evictor.next_db + 1) % n;
            let db = self.evictor.next_db;
            let d = &self.dbs[db];
            let table = if all { &d.main } else { &d.expires };
            let rng = &mut self.rng;
            if let Some(e) = table.random_entry(&mut || rng.next_u64()) {
                return Some((db, e.key().to_vec()));
            }
        }
        None
    }

    /// The next key to evict under `policy`, with its database.
    fn pick_victim(&mut self, policy: MaxmemoryPolicy) -> Option<(usize, Vec<u8>)> {
        let all = policy.all_keys();
        if matches!(
            policy,
            MaxmemoryPolicy::AllkeysRandom | MaxmemoryPolicy::VolatileRandom
        ) {
            return self.any_key(all);
        }
        loop {
            let mut total = 0;
            for db in 0..self.dbs.len() {
                let d = &self.dbs[db];
                let table = if all { &d.main } else { &d.expires };
                if table.is_empty() {
                    continue;
                }
                total += table.len();
                self.populate_pool(db, policy);
            }
            if total == 0 {
                return None;
            }
            // Sampling walks a bounded number of buckets, so a very sparse
            // table can yield nothing: then any key will do, never a spin.
            if self.evictor.pool.is_empty() {
                return self.any_key(all);
            }
            // The best candidates first; one deleted since is a ghost.
            while let Some(best) = self.evictor.pool.pop() {
                let d = &self.dbs[best.db];
                let table = if all { &d.main } else { &d.expires };
                if table.get(&best.key).is_some() {
                    return Some((best.db, best.key));
                }
            }
        }
    }

    /// Sample keys of `db` into the pool, scored by the policy.
    fn populate_pool(&mut self, db: usize, policy: MaxmemoryPolicy) {
        let samples = self.config.maxmemory_samples.max(1) as usize;
        let now = self.now_ms;
        let (clock, minutes) = (lru_clock(now), lfu_minutes(now));
        let decay = self.config.lfu_decay_time;
        let d = &self.dbs[db];
        let sampled = if policy.all_keys() {
            &d.main
        } else {
            &d.expires
        };
        // No more than the table holds (`maxmemory-samples` goes up to
        // INT_MAX, as Redis's), and on the stack for the usual counts.
        let samples = samples.min(sampled.len());
        let rng = &mut self.rng;
        // A field apart from `dbs`: candidates go to the pool as they are
        // scored, the pool copying only the keys it keeps.
        let evictor = &mut self.evictor;
        let mut on_stack = [None; STACK_SAMPLES];
        let mut on_heap = Vec::new();
        let entries = if samples <= STACK_SAMPLES {
            &mut on_stack[..samples]
        } else {
            on_heap.resize(samples, None);
            &mut on_heap[..]
        };
        let n = sampled.sample_some(entries, &mut || rng.next_u64());
        for e in entries[..n].iter().flatten() {
            let key = e.key();
            let score = if policy == MaxmemoryPolicy::VolatileTtl {
                // The sooner it expires, the better.
                match e.value() {
                    ValueRef::Int(when) => u64::MAX - when as u64,
                    _ => 0,
                }
            } else {
                // A key sampled from `expires` is read from the main table.
                let word = if policy.all_keys() {
                    Some(e.lru())
                } else {
                    d.main.get(key).map(|m| m.lru())
                };
                let Some(word) = word else { continue };
                if policy.is_lfu() {
                    255 - lfu_decayed(word, minutes, decay) as u64
                } else {
                    lru_idle(clock, word) as u64
                }
            };
            evictor.offer(score, db, key);
        }
    }
}

/// The smallest `maxmemory-clients` honoured (Redis's floor, so that a bad
/// setting cannot disconnect everyone, the operator included).
const CLIENT_EVICTION_MIN: usize = 128 << 10;

impl Server {
    /// What all normal and pub/sub clients may hold together, in bytes;
    /// 0 when client eviction is off (Redis's getClientEvictionLimit).
    pub fn client_eviction_limit(&self) -> usize {
        let setting = self.config.maxmemory_clients;
        let limit = if setting < 0 && self.config.maxmemory > 0 {
            (self.config.maxmemory as f64 * -setting as f64 / 100.0) as usize
        } else if setting > 0 {
            setting as usize
        } else {
            return 0;
        };
        limit.max(CLIENT_EVICTION_MIN)
    }

    /// Disconnect the biggest clients, one after the other, while normal
    /// and pub/sub clients together hold more than `maxmemory-clients`
    /// (Redis's evictClients). Replicas, the master link and clients that
    /// said CLIENT NO-EVICT ON are never chosen, though their memory
    /// counts. Each is logged and counted in INFO `evicted_clients`.
    pub fn evict_clients(&mut self) {
        let limit = self.client_eviction_limit();
        if limit == 0 {
            return;
        }
        let mut total = 0;
        let mut candidates: Vec<(usize, usize, u64)> = Vec::new();
        for (slot, c) in self.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            if c.kind != ClientKind::Normal || c.close_asap {
                continue;
            }
            let mem = c.memory();
            total += mem;
            if !c.no_evict {
                candidates.push((mem, slot, c.id));
            }
        }
        if total < limit {
            return;
        }
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        for (mem, slot, id) in candidates {
            if total < limit {
                return;
            }
            if let Some(c) = self.clients[slot].as_mut() {
                tracing::info!("Evicting client: {}", c.info_line());
                c.close_asap = true;
            }
            self.to_close.push((slot, id));
            self.stats.evicted_clients += 1;
            total -= mem;
        }
        if total >= limit {
            tracing::warn!("Over client maxmemory after evicting all evictable clients");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_candidates_in_order() {
        let mut ev = Evictor::default();
        for (i, score) in [5u64, 1, 9, 3, 7].into_iter().enumerate() {
            ev.offer(score, 0, format!("k{i}").as_bytes());
        }
        let scores: Vec<u64> = ev.pool.iter().map(|e| e.score).collect();
        assert_eq!(scores, [1, 3, 5, 7, 9]);
        for s in 10..30 {
            ev.offer(s, 0, b"x");
        }
        assert_eq!(ev.pool.len(), POOL_SIZE);
        assert_eq!(ev.pool.last().unwrap().score, 29);
        // Worse than everything held: refused.
        ev.offer(0, 0, b"low");
        assert!(ev.pool.iter().all(|e| e.key != b"low"));
    }

    #[test]
    fn tenacity_maps_to_redis_time_limits() {
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(100), u64::MAX);
        assert_eq!(time_limit_us(20), (500.0 * 1.15f64.powf(10.0)) as u64);
    }
}
