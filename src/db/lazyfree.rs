//! Freeing large values off the event loop (Redis's lazyfree.c and its bio
//! thread).
//!
//! Dropping a 10M-member set frees 10M allocations: close to a second during
//! which nobody is served. UNLINK, FLUSHALL ASYNC and the `lazyfree-lazy-*`
//! options instead unlink the value from the keyspace on the loop (O(1)) and
//! hand the now unreachable allocation to one freeing thread. That thread
//! never sees the keyspace: only values that nothing else points to, which
//! is what makes it safe without a lock.
//!
//! As in Redis, only values whose freeing costs more than
//! [`LAZYFREE_THRESHOLD`] allocations go to the thread; small ones are
//! cheaper to free in place than to queue.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

use super::entry::{Entry, ValueRef};
use super::table::Table;
use super::value::Value;

/// Values costing more than this many frees go to the freeing thread
/// (Redis's LAZYFREE_THRESHOLD).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Objects queued and not yet freed (INFO `lazyfree_pending_objects`).
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// Objects the thread has freed (INFO `lazyfreed_objects`).
static FREED: AtomicU64 = AtomicU64::new(0);
/// Net bytes the thread has given back to the allocator. The event loop
/// counts its own allocations (see `memory::used_memory`), so memory it
/// allocated and this thread freed is subtracted with this.
static FREED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Something unreachable from the keyspace, waiting to be dropped (the
/// fields are never read: dropping them is the whole point).
#[allow(dead_code)]
enum Garbage {
    Entry(Entry),
    Tables(Vec<Table>),
}

/// A job for the freeing thread and the number of objects it holds.
struct Job(Garbage, usize);

// SAFETY: a job holds the only pointers to its allocations (the entry or
// tables were unlinked from the keyspace before being queued), so moving it
// to another thread shares nothing; jemalloc frees from any thread. The one
// exception is a long string a pending reply also holds, and that is an
// `Arc`, whose count is atomic.
unsafe impl Send for Job {}

pub fn pending_objects() -> usize {
    PENDING.load(Ordering::Relaxed)
}

pub fn freed_objects() -> u64 {
    FREED.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT: the freed-object count starts again (Redis's
/// lazyfreeResetStats).
pub fn reset_freed_objects() {
    FREED.store(0, Ordering::Relaxed);
}

/// Bytes freed by the lazyfree thread, net of what it allocated itself.
pub fn freed_bytes() -> u64 {
    FREED_BYTES.load(Ordering::Relaxed)
}

/// The freeing thread's own allocator counters: (allocated, deallocated).
fn thread_counters() -> Option<(
    tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
    tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
)> {
    Some((
        tikv_jemalloc_ctl::thread::allocatedp::read().ok()?,
        tikv_jemalloc_ctl::thread::deallocatedp::read().ok()?,
    ))
}

/// How many allocations freeing this entry's value takes (Redis's
/// `lazyfreeGetFreeEffort`): 1 for strings and packed encodings, the
/// element count for tables and the node count for lists.
pub fn free_effort(e: &Entry) -> usize {
    match e.value() {
        ValueRef::Str(_) | ValueRef::Int(_) => 1,
        ValueRef::Boxed(v) => value_free_effort(v),
    }
}

fn value_free_effort(v: &Value) -> usize {
    match v {
        Value::Str(_) => 1,
        Value::Hash(h) => h.free_effort(),
        Value::Set(s) => s.free_effort(),
        Value::ZSet(z) => z.free_effort(),
        Value::List(l) => l.free_effort(),
        Value::Stream(s) => s.free_effort(),
    }
}

/// Whether to free an unlinked value in the background.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeMode {
    /// Drop it here and now (DEL, or a lazyfree option that is off).
    Sync,
    /// Queue it when it is big enough to be worth it (UNLINK, lazyfree-*).
    Lazy,
}

impl FreeMode {
    /// `Lazy` when the governing `lazyfree-*` option is on.
    pub fn lazy_if(on: bool) -> FreeMode {
        if on {
            FreeMode::Lazy
        } else {
            FreeMode::Sync
        }
    }
}

/// Free an entry that was removed from the keyspace.
pub fn free_entry(e: Entry, mode: FreeMode) {
    if mode == FreeMode::Lazy && free_effort(&e) > LAZYFREE_THRESHOLD {
        submit(Job(Garbage::Entry(e), 1));
    }
}

/// Free whole tables (FLUSHALL/FLUSHDB ASYNC): `objects` is the number of
/// keys they hold, as Redis counts a database flush.
pub fn free_tables(tables: Vec<Table>, objects: usize, mode: FreeMode) {
    if mode == FreeMode::Lazy && objects > LAZYFREE_THRESHOLD {
        submit(Job(Garbage::Tables(tables), objects));
    }
}

/// Queue a job (or free it here if the thread cannot be started).
fn submit(job: Job) {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name("kvstore-lazyfree".into())
            .spawn(move || {
                crate::process::pin_background_thread();
                let counters = thread_counters();
                for Job(garbage, objects) in rx {
                    drop(garbage);
                    if let Some((alloc, dealloc)) = &counters {
                        let net = dealloc.get().saturating_sub(alloc.get());
                        FREED_BYTES.store(net, Ordering::Relaxed);
                    }
                    PENDING.fetch_sub(objects, Ordering::Relaxed);
                    FREED.fetch_add(objects as u64, Ordering::Relaxed);
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    let objects = job.1;
    PENDING.fetch_add(objects, Ordering::Relaxed);
    let job = match queue.as_ref().map(|m| m.lock()) {
        Some(Ok(tx)) => match tx.send(job) {
            Ok(()) => return,
            Err(e) => e.0,
        },
        _ => job,
    };
    PENDING.fetch_sub(objects, Ordering::Relaxed);
    drop(job);
}
