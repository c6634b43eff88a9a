//! The keyspace hash table: chained buckets with incremental rehashing.
//!
//! Why this design (see ARCHITECTURE.md, "the keyspace table never pauses"):
//! - Growing never stalls. Like Redis's dict, a resize allocates the new bucket
//!   array (zeroed pages from the allocator, so O(1) in practice) and then moves
//!   one bucket per table operation, plus a time-bounded batch in the cron, so
//!   no single request pays for more than a few buckets.
//! - It stays dense. The chain link lives inside each entry (see `entry.rs`),
//!   so a key costs one allocation plus its share of the bucket array. We grow
//!   at an average chain length of 2 rather than Redis's 1: the array then costs
//!   4–8 bytes a key instead of 8–16, for chains that stay short enough that a
//!   lookup touches about 1.5 entries.
//! - A miss reads no entry. Each bucket slot keeps, in the 16 address bits
//!   that user-space pointers never use, a filter of its chain's hashes (two
//!   bits a key, from the hash's top byte, which no bucket index uses). A
//!   lookup whose bits are not all set stops at the bucket, so inserting a new
//!   key (the loader's duplicate check, SET of a new key) and reading a missing
//!   one cost the bucket's cache miss and not the chain's; about 6% of misses
//!   on a full table still walk it. The filter costs no memory: it is exact
//!   after every insert, remove and rehash, and is dropped with the chain.
//! - SCAN keeps Redis's guarantee. Bucket indexes are the low bits of the hash,
//!   and the cursor is advanced on the reversed bits, so a key present for the
//!   whole scan is returned at least once however the table grows or shrinks.

use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use super::entry::{Entry, ADDR_MASK};

/// Smallest bucket array.
const INITIAL_SIZE: usize = 4;
/// Grow when there are this many entries per bucket on average.
const MAX_LOAD: usize = 2;
/// Shrink when fewer than one entry in this many buckets is used.
const MIN_FILL_RATIO: usize = 10;
/// Empty buckets visited per rehash step before giving up for now.
const EMPTY_VISITS_PER_STEP: usize = 10;
/// Chain-length classes in [`Table::stats`] (Redis's DICT_STATS_VECTLEN).
const STATS_CHAIN_LENGTHS: usize = 50;
/// Redis builds the stats text in a buffer of this size.
const STATS_BUF: usize = 4096;

/// A link slot: a bucket, or the `next` field inside an entry.
///
/// # Invariant
/// Every slot reachable from a table is either null or holds a pointer
/// from [`Entry::into_raw`] of an entry that the table owns; each entry is
/// reachable from exactly one slot, and chains end in null. A `*mut Link`
/// passed between the table's methods points at such a slot (in the current
/// bucket arrays or inside a live entry) and is valid only until the table is
/// next changed.
///
/// A bucket slot's top 16 bits hold its chain's filter ([`filter_of`] of
/// every key in the chain; zero when the chain is empty). `next` fields
/// inside entries hold plain addresses. Read a slot's address with
/// [`target`], and walk a chain with it.
type Link = *mut u8;

/// The first of the filter bits in a bucket slot.
const FILTER_SHIFT: u32 = 48;

/// A key's two filter bits, from the top byte of its hash.
#[inline]
fn filter_of(h: u64) -> usize {
    (1usize << (FILTER_SHIFT + ((h >> 56) & 15) as u32))
        | (1usize << (FILTER_SHIFT + (h >> 60) as u32))
}

/// The entry a slot points at (null at a chain's end).
#[inline]
fn target(l: Link) -> Link {
    l.map_addr(|a| a & ADDR_MASK)
}

/// Hint that the entry at `e` is read soon: its first 64 bytes (header,
/// key and a small value), which cross into a second cache line for half
/// of the places a 48-byte allocation can sit.
#[inline]
fn prefetch_entry(e: Link) {
    let e = e as *const u8;
    crate::util::prefetch_read(e);
    crate::util::prefetch_read(e.wrapping_add(63));
}

/// For a walk over every chain of `tab` in bucket order (a cache miss per
/// entry, and in a forked child a page walk too), fetch ahead of bucket `i`
/// in stages: the first entry of the chain `3 * STAGE` buckets on, the
/// second `2 * STAGE` on (its address read from the first, fetched by then),
/// the third `STAGE` on. Near half of a full table's entries are second or
/// later in their chain.
#[inline]
fn prefetch_walk_ahead(tab: &[Link], i: usize) {
    const STAGE: usize = 8;
    for depth in 0..3 {
        if let Some(&slot) = tab.get(i + STAGE * (3 - depth)) {
            let mut e = target(slot);
            // SAFETY: the link-slot invariant (see `Table`): a non-null slot
            // owns a live entry, whose first word is its own next link.
            unsafe {
                for _ in 0..depth {
                    if e.is_null() {
                        break;
                    }
                    e = target(*(e as *const Link));
                }
            }
            if !e.is_null() {
                prefetch_entry(e);
            }
        }
    }
}

/// A bucket slot's filter bits.
#[inline]
fn filter(l: Link) -> usize {
    l.addr() & !ADDR_MASK
}

/// A bucket slot pointing at `p` with filter `f`.
#[inline]
fn with_filter(p: Link, f: usize) -> Link {
    p.map_addr(|a| a | f)
}

/// Bytes of bucket arrays mapped outside the allocator (counted in
/// `used_memory`, so INFO and maxmemory see them).
static MAPPED_BYTES: AtomicUsize = AtomicUsize::new(0);

pub fn mapped_bucket_bytes() -> usize {
    MAPPED_BYTES.load(Ordering::Relaxed)
}

/// Asked before a guarded table (a database's keys and expires) grows while
/// its chains are still short: may this many more bytes be allocated? The
/// state layer installs it to keep a resize from pushing memory past
/// `maxmemory` (Redis's dictExpandAllowed).
static GROWTH_GUARD: OnceLock<fn(usize) -> bool> = OnceLock::new();

pub fn set_growth_guard(allowed: fn(usize) -> bool) {
    let _ = GROWTH_GUARD.set(allowed);
}

/// Past this load (in thousandths of `MAX_LOAD`, Redis's 1.618), a guarded
/// table grows whatever memory says: chains that long cost more than the
/// bytes saved.
const GUARDED_MAX_LOAD_PERMILLE: usize = 1618;

/// Whether tables resize at their normal loads (Redis's dict_can_resize).
/// Off while a forked child (a snapshot, an AOF rewrite) shares the parent's
/// pages: a resize rewrites every moved entry's link, copying on write the
/// pages that hold them.
static RESIZE_ALLOWED: AtomicBool = AtomicBool::new(true);

/// While resizing is held back, a table still grows past this many entries
/// per bucket (Redis's dict_force_resize_ratio): chains that long cost more
/// than the copied pages.
const FORCED_GROWTH_LOAD: usize = 5;

/// Let tables resize at their normal loads, or hold them back (see
/// [`RESIZE_ALLOWED`]); the state layer says so as its children come and go.
pub fn set_resize_allowed(allowed: bool) {
    RESIZE_ALLOWED.store(allowed, Ordering::Relaxed);
}

pub fn resize_allowed() -> bool {
    RESIZE_ALLOWED.load(Ordering::Relaxed)
}

/// Bucket arrays at least this large are mapped straight from the kernel.
const MMAP_THRESHOLD_BYTES: usize = 1 << 20;

/// A zero-initialised bucket array.
///
/// Large arrays are anonymous mappings: the kernel hands out zero pages
/// lazily, so allocating 128 MB for a resize costs microseconds, where a
/// calloc that reuses freed memory has to clear it all first (measured: a
/// 69 ms stall growing past 8M keys). Unmapping a large array that was
/// written to is also slow (the kernel frees every page), so that happens on
/// a reclaimer thread; it never touches the keyspace.
struct Buckets {
    ptr: NonNull<Link>,
    len: usize,
    mapped: bool,
}

impl Buckets {
    fn empty() -> Buckets {
        Buckets {
            ptr: NonNull::dangling(),
            len: 0,
            mapped: false,
        }
    }

    fn zeroed(len: usize) -> Buckets {
        let bytes = len * std::mem::size_of::<Link>();
        if bytes >= MMAP_THRESHOLD_BYTES {
            // SAFETY: a private anonymous mapping; checked for failure.
            let p = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                if let Some(ptr) = NonNull::new(p as *mut Link) {
                    MAPPED_BYTES.fetch_add(bytes, Ordering::Relaxed);
                    return Buckets {
                        ptr,
                        len,
                        mapped: true,
                    };
                }
            }
        }
        let v: Box<[Link]> = vec![ptr::null_mut(); len].into_boxed_slice();
        let len = v.len();
        let ptr = NonNull::new(Box::into_raw(v) as *mut Link).unwrap_or(NonNull::dangling());
        Buckets {
            ptr,
            len,
            mapped: false,
        }
    }
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets::empty()
    }
}

impl Deref for Buckets {
    type Target = [Link];
    fn deref(&self) -> &[Link] {
        // SAFETY: ptr is valid for len elements (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Buckets {
    fn deref_mut(&mut self) -> &mut [Link] {
        // SAFETY: as above, and uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        if self.mapped {
            MAPPED_BYTES.fetch_sub(self.len * std::mem::size_of::<Link>(), Ordering::Relaxed);
            unmap_in_background(
                self.ptr.as_ptr() as usize,
                self.len * std::mem::size_of::<Link>(),
            );
        } else {
            // SAFETY: allocated as a boxed slice of exactly len elements.
            unsafe {
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr(),
                    self.len,
                )))
            };
        }
    }
}

/// The reclaimer thread's queue of (address, length) mappings to unmap.
type ReclaimQueue = std::sync::Mutex<Sender<(usize, usize)>>;

/// Hand a mapping to the reclaimer thread (or unmap inline if it cannot run).
fn unmap_in_background(addr: usize, bytes: usize) {
    static RECLAIMER: OnceLock<Option<ReclaimQueue>> = OnceLock::new();
    let tx = RECLAIMER.get_or_init(|| {
        let (tx, rx) = channel::<(usize, usize)>();
        std::thread::Builder::new()
            .name("kvstore-reclaim".into())
            .spawn(move || {
                crate::process::pin_background_thread();
                for (addr, bytes) in rx {
                    // SAFETY: the mapping was created by Buckets::zeroed and
                    // is no longer referenced by anyone.
                    unsafe { libc::munmap(addr as *mut libc::c_void, bytes) };
                }
            })
            .ok()
            .map(|_| std::sync::Mutex::new(tx))
    });
    let sent = tx
        .as_ref()
        .and_then(|m| m.lock().ok())
        .is_some_and(|tx| tx.send((addr, bytes)).is_ok());
    if !sent {
        // SAFETY: as above.
        unsafe { libc::munmap(addr as *mut libc::c_void, bytes) };
    }
}

/// A hash table of [`Entry`] keyed by the entry's key.
pub struct Table {
    tabs: [Buckets; 2],
    /// Next bucket of `tabs[0]` to move while rehashing into `tabs[1]`.
    rehash_idx: Option<usize>,
    len: usize,
    hasher: foldhash::fast::FixedState,
    /// Growth asks [`GROWTH_GUARD`] first.
    guarded: bool,
}

// SAFETY: the table exclusively owns its entries; raw pointers are only an
// implementation detail of the chains.
unsafe impl Send for Table {}

impl Table {
    /// An empty table that hashes as this one does (a flushed database).
    pub fn empty_like(&self) -> Table {
        Table {
            tabs: [Buckets::empty(), Buckets::empty()],
            rehash_idx: None,
            len: 0,
            hasher: self.hasher,
            guarded: self.guarded,
        }
    }

    pub fn new(seed: u64) -> Table {
        Table {
            tabs: [Buckets::empty(), Buckets::empty()],
            rehash_idx: None,
            len: 0,
            hasher: foldhash::fast::FixedState::with_seed(seed),
            guarded: false,
        }
    }

    /// A table whose growth asks the growth guard first (a database's).
    pub fn guarded(seed: u64) -> Table {
        let mut t = Table::new(seed);
        t.guarded = true;
        t
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of buckets, both arrays counted while rehashing.
    pub fn buckets(&self) -> usize {
        self.tabs[0].len() + self.tabs[1].len()
    }

    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx.is_some()
    }

    /// Bytes used by the bucket arrays.
    pub fn overhead_bytes(&self) -> usize {
        self.buckets() * std::mem::size_of::<Link>()
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(key)
    }

    /// The bucket of the entry for `key`, if present, and the link slot
    /// pointing at it.
    fn find_link(&self, key: &[u8], h: u64) -> Option<(*mut Link, *mut Link)> {
        if self.len == 0 {
            return None;
        }
        let want = filter_of(h);
        for t in 0..2 {
            let tab = &self.tabs[t];
            if tab.is_empty() {
                break;
            }
            let idx = (h as usize) & (tab.len() - 1);
            if t == 0 {
                if let Some(r) = self.rehash_idx {
                    if idx < r {
                        // Already moved to the new array.
                        continue;
                    }
                }
            }
            let bucket = tab.as_ptr().wrapping_add(idx) as *mut Link;
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            unsafe {
                if filter(*bucket) & want == want {
                    let mut link = bucket;
                    loop {
                        let next = target(*link);
                        if next.is_null() {
                            break;
                        }
                        if crate::util::bytes_eq((*(link as *const Entry)).key(), key) {
                            return Some((bucket, link));
                        }
                        link = next as *mut Link; // `next` is at offset 0
                    }
                }
            }
            if self.rehash_idx.is_none() {
                break;
            }
        }
        None
    }

    /// Look up `key`.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        let h = self.hash(key);
        self.find_link(key, h)
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            .map(|(_, l)| unsafe { &*(l as *const Entry) })
    }

    /// Look up `key` for modification; advances a rehash in progress.
    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.rehash_step();
        let h = self.hash(key);
        self.find_link(key, h)
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            .map(|(_, l)| unsafe { &mut *(l as *mut Entry) })
    }

    /// Store a value for `key` (hashed to `h`) with one lookup: an entry
    /// for it that `overwrite` changes in place stays; otherwise `make`'s
    /// entry goes in, and the entry it replaces, if any, is returned.
    #[inline]
    pub fn store_hashed(
        &mut self,
        key: &[u8],
        h: u64,
        overwrite: impl FnOnce(&mut Entry) -> bool,
        make: impl FnOnce() -> Entry,
    ) -> Option<Entry> {
        self.rehash_step();
        let Some((_, link)) = self.find_link(key, h) else {
            self.insert_new_hashed(make(), h);
            return None;
        };
        // SAFETY: the link-slot invariant (see `Table`): every slot is null
        // or owns one live entry; `link` was found just now, and nothing
        // changes the table before it is used.
        unsafe {
            if overwrite(&mut *(link as *mut Entry)) {
                return None;
            }
            Some(self.replace_at(link, make()))
        }
    }

    /// Insert `entry`, replacing and returning any entry with the same key.
    pub fn insert(&mut self, entry: Entry) -> Option<Entry> {
        let h = self.hash(entry.key());
        self.insert_hashed(entry, h)
    }

    /// The bucket an entry with hash `h` goes to, if there is an array.
    #[inline]
    fn insert_bucket(&self, h: u64) -> Option<*const Link> {
        let tab = &self.tabs[self.rehash_idx.is_some() as usize];
        (!tab.is_empty()).then(|| tab.as_ptr().wrapping_add((h as usize) & (tab.len() - 1)))
    }

    /// The bucket a lookup of hash `h` reads first: during a rehash, the
    /// old array's while that bucket has not moved yet, else the current.
    #[inline]
    fn lookup_bucket(&self, h: u64) -> Option<*const Link> {
        if let Some(r) = self.rehash_idx {
            let old = &self.tabs[0];
            let idx = (h as usize) & old.len().wrapping_sub(1);
            if !old.is_empty() && idx >= r {
                return Some(old.as_ptr().wrapping_add(idx));
            }
        }
        self.insert_bucket(h)
    }

    /// Hint that the bucket of hash `h` is read soon. With `prefetch_chain`
    /// this lets a batch of lookups or inserts (a pipeline's, the RDB
    /// loader's) wait for their cache misses together: every bucket first,
    /// then the entry each points at.
    #[inline]
    pub fn prefetch_bucket(&self, h: u64) {
        if let Some(b) = self.lookup_bucket(h) {
            crate::util::prefetch_read(b as *const u8);
        }
    }

    /// Hint that the first entry in the chain of hash `h` is read soon
    /// (after `prefetch_bucket`, once the bucket is likely cached), when the
    /// bucket's filter says the key may be in the chain.
    #[inline]
    pub fn prefetch_chain(&self, h: u64) {
        if let Some(b) = self.lookup_bucket(h) {
            // SAFETY: `b` is a slot of one of the bucket arrays.
            let head = unsafe { *b };
            let want = filter_of(h);
            if filter(head) & want == want {
                prefetch_entry(target(head));
            }
        }
    }

    /// After `prefetch_chain`, a pass later (once the chain's first entry
    /// is likely cached): when that entry is not `key`'s, hint the next one
    /// in the chain, where about a third of the keys of a table at its
    /// usual load sit.
    #[inline]
    pub fn prefetch_chain_next(&self, key: &[u8], h: u64) {
        let Some(b) = self.lookup_bucket(h) else {
            return;
        };
        // SAFETY: `b` is a slot of one of the bucket arrays; by the
        // link-slot invariant (see `Table`) a non-null slot owns a live
        // entry, whose first word is its own next link.
        unsafe {
            let head = *b;
            let want = filter_of(h);
            let first = target(head);
            if first.is_null() || filter(head) & want != want {
                return;
            }
            if crate::util::bytes_eq((*(b as *const Entry)).key(), key) {
                return;
            }
            let next = target(*(first as *const Link));
            if !next.is_null() {
                prefetch_entry(next);
            }
        }
    }

    /// `insert` of an entry whose key hashes to `h` (from `hash`).
    pub fn insert_hashed(&mut self, entry: Entry, h: u64) -> Option<Entry> {
        self.rehash_step();
        if let Some((_, link)) = self.find_link(entry.key(), h) {
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            return Some(unsafe { self.replace_at(link, entry) });
        }
        self.insert_new_hashed(entry, h);
        None
    }

    /// Insert an entry whose key is known to be absent.
    pub fn insert_new(&mut self, entry: Entry) {
        self.rehash_step();
        let h = self.hash(entry.key());
        debug_assert!(self.find_link(entry.key(), h).is_none());
        self.insert_new_hashed(entry, h);
    }

    fn insert_new_hashed(&mut self, mut entry: Entry, h: u64) {
        self.expand_if_needed();
        let t = if self.rehash_idx.is_some() { 1 } else { 0 };
        let tab = &mut self.tabs[t];
        let mask = tab.len() - 1;
        let slot = &mut tab[(h as usize) & mask];
        entry.set_next(target(*slot));
        *slot = with_filter(entry.into_raw(), filter(*slot) | filter_of(h));
        self.len += 1;
    }

    /// Put `new`, whose key is the same, in the chain where the entry at
    /// `link` is, returning the old one.
    ///
    /// # Safety
    /// `link` must be a valid, non-null slot of this table (see [`Link`]),
    /// obtained since the table was last changed.
    unsafe fn replace_at(&mut self, link: *mut Link, mut new: Entry) -> Entry {
        let old = Entry::from_raw(target(*link));
        new.set_next(old.next());
        // Same key, same hash: a bucket's filter stays as it is.
        *link = with_filter(new.into_raw(), filter(*link));
        let mut old = old;
        old.set_next(ptr::null_mut());
        old
    }

    /// Replace the entry for `new`'s key, which must exist, returning the old
    /// one (used when a value outgrows its entry).
    pub fn replace(&mut self, new: Entry) -> Option<Entry> {
        let h = self.hash(new.key());
        let (_, link) = self.find_link(new.key(), h)?;
        // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
        Some(unsafe { self.replace_at(link, new) })
    }

    /// Remove and return the entry for `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.rehash_step();
        let h = self.hash(key);
        let (bucket, link) = self.find_link(key, h)?;
        // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
        let removed = unsafe {
            let mut e = Entry::from_raw(target(*link));
            *link = with_filter(e.next(), filter(*link));
            e.set_next(ptr::null_mut());
            self.refilter(bucket);
            e
        };
        self.len -= 1;
        self.shrink_if_needed();
        Some(removed)
    }

    /// Recompute a bucket's filter from the keys left in its chain (after a
    /// removal, so that the filter stays exact).
    ///
    /// # Safety
    /// `bucket` must be a bucket slot of this table's arrays.
    unsafe fn refilter(&self, bucket: *mut Link) {
        let head = target(*bucket);
        let mut f = 0;
        let mut p = head;
        while !p.is_null() {
            let e = &*(&p as *const Link as *const Entry);
            f |= filter_of(self.hash(e.key()));
            p = e.next();
        }
        *bucket = with_filter(head, f);
    }

    /// Remove every entry, handing each to `f` (or dropping it).
    pub fn clear(&mut self) {
        let tabs = std::mem::take(&mut self.tabs);
        self.rehash_idx = None;
        self.len = 0;
        for tab in tabs {
            for (i, &p) in tab.iter().enumerate() {
                prefetch_walk_ahead(&tab, i);
                let mut p = target(p);
                while !p.is_null() {
                    // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
                    let e = unsafe { Entry::from_raw(p) };
                    p = e.next();
                    drop(e);
                }
            }
        }
    }

    /// Size an empty table for `n` entries up front (loading a snapshot
    /// whose RESIZEDB says how many keys follow), so loading never rehashes.
    pub fn reserve(&mut self, n: usize) {
        if self.len == 0 && self.rehash_idx.is_none() {
            let size = (n / MAX_LOAD).max(INITIAL_SIZE).next_power_of_two();
            if size > self.tabs[0].len() {
                self.tabs[0] = Buckets::zeroed(size);
            }
        }
    }

    fn expand_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        if self.tabs[0].is_empty() {
            self.tabs[0] = Buckets::zeroed(INITIAL_SIZE);
            return;
        }
        let buckets = self.tabs[0].len();
        if self.len >= buckets * MAX_LOAD {
            if !resize_allowed() && self.len / buckets <= FORCED_GROWTH_LOAD {
                return;
            }
            let size = (self.len + 1).next_power_of_two();
            if self.guarded
                && self.len * 1000 < buckets * MAX_LOAD * GUARDED_MAX_LOAD_PERMILLE
                && GROWTH_GUARD
                    .get()
                    .is_some_and(|allowed| !allowed(size * std::mem::size_of::<Link>()))
            {
                return;
            }
            self.start_resize(size);
        }
    }

    fn shrink_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        let size = self.tabs[0].len();
        if size > INITIAL_SIZE && self.len * MIN_FILL_RATIO < size && resize_allowed() {
            self.start_resize(self.len.max(INITIAL_SIZE).next_power_of_two());
        }
    }

    fn start_resize(&mut self, size: usize) {
        if size == self.tabs[0].len() {
            return;
        }
        // Large arrays come as fresh zero pages: O(1), whatever the size.
        self.tabs[1] = Buckets::zeroed(size);
        self.rehash_idx = Some(0);
    }

    /// Move one bucket (skipping at most a few empty ones) to the new array.
    #[inline]
    pub fn rehash_step(&mut self) {
        if self.rehash_idx.is_some() {
            self.rehash(1);
        }
    }

    /// Move up to `n` buckets. Returns true while a rehash is still running.
    pub fn rehash(&mut self, n: usize) -> bool {
        let Some(mut idx) = self.rehash_idx else {
            return false;
        };
        let mut empty_visits = n * EMPTY_VISITS_PER_STEP;
        let mut moved = 0;
        let old_len = self.tabs[0].len();
        while moved < n && idx < old_len {
            // Every moved entry is read for its key, in hash order: a cache
            // miss each unless fetched ahead (a step a table operation
            // leaves the next buckets' chains on their way).
            prefetch_walk_ahead(&self.tabs[0], idx);
            let mut p = target(self.tabs[0][idx]);
            if p.is_null() {
                idx += 1;
                empty_visits -= 1;
                if empty_visits == 0 {
                    break;
                }
                continue;
            }
            self.tabs[0][idx] = ptr::null_mut();
            let mask = self.tabs[1].len() - 1;
            while !p.is_null() {
                // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
                let mut e = unsafe { Entry::from_raw(p) };
                p = e.next();
                let h = self.hash(e.key());
                let slot = &mut self.tabs[1][(h as usize) & mask];
                e.set_next(target(*slot));
                *slot = with_filter(e.into_raw(), filter(*slot) | filter_of(h));
            }
            idx += 1;
            moved += 1;
        }
        if idx >= old_len {
            self.tabs[0] = std::mem::take(&mut self.tabs[1]);
            self.rehash_idx = None;
            false
        } else {
            self.rehash_idx = Some(idx);
            true
        }
    }

    /// Rehash for up to `budget` of wall time (the cron's share).
    pub fn rehash_for(&mut self, budget: std::time::Duration) {
        let start = std::time::Instant::now();
        while self.rehash(100) {
            if start.elapsed() >= budget {
                break;
            }
        }
    }

    /// Chain statistics in Redis's `dictGetStats` text (DEBUG HTSTATS): the
    /// main array, then the rehashing target while a rehash runs, cut at
    /// Redis's 4 KB buffer.
    pub fn stats(&self) -> String {
        let mut out = self.array_stats(0);
        if self.rehash_idx.is_some() {
            out.push_str(&self.array_stats(1));
        }
        out.truncate(STATS_BUF - 1);
        out
    }

    fn array_stats(&self, t: usize) -> String {
        use std::fmt::Write;
        let tab = &self.tabs[t];
        let name = if t == 0 {
            "main hash table"
        } else {
            "rehashing target"
        };
        let mut lengths = [0usize; STATS_CHAIN_LENGTHS];
        let (mut used, mut slots, mut longest) = (0usize, 0usize, 0usize);
        for idx in 0..tab.len() {
            let mut chain = 0;
            let mut link = &tab[idx] as *const Link;
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            unsafe {
                while !target(*link).is_null() {
                    chain += 1;
                    link = target(*link) as *const Link;
                }
            }
            lengths[chain.min(STATS_CHAIN_LENGTHS - 1)] += 1;
            if chain > 0 {
                slots += 1;
                used += chain;
                longest = longest.max(chain);
            }
        }
        if used == 0 {
            return format!(
                "Hash table {t} stats ({name}):\nNo stats available for empty dictionaries\n"
            );
        }
        // Redis computes the averages in single precision.
        let mut out = format!(
            "Hash table {t} stats ({name}):\n table size: {}\n number of elements: {used}\n \
             different slots: {slots}\n max chain length: {longest}\n avg chain length \
             (counted): {:.2}\n avg chain length (computed): {:.2}\n Chain length distribution:\n",
            tab.len(),
            used as f32 / slots as f32,
            used as f32 / slots as f32,
        );
        // As Redis, the last class (chains of 49 or more) is counted but not printed.
        for (len, &n) in lengths[..STATS_CHAIN_LENGTHS - 1].iter().enumerate() {
            if n > 0 {
                let share = n as f32 / tab.len() as f32 * 100.0;
                let _ = writeln!(out, "   {len}: {n} ({share:.2}%)");
            }
        }
        out
    }

    /// Visit the entries of the buckets addressed by cursor `v` and return the
    /// next cursor (0 when the scan is complete). This is Redis's `dictScan`:
    /// the cursor is incremented on its reversed bits so that buckets are
    /// visited in an order that survives resizing.
    pub fn scan(&self, v: u64, f: &mut dyn FnMut(&Entry)) -> u64 {
        if self.len == 0 || self.tabs[0].is_empty() {
            return 0;
        }
        let visit = |tab: &Buckets, idx: usize, f: &mut dyn FnMut(&Entry)| {
            let mut link = &tab[idx] as *const Link;
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            unsafe {
                while !target(*link).is_null() {
                    f(&*(link as *const Entry));
                    link = target(*link) as *const Link;
                }
            }
        };
        let mut v = v;
        if self.rehash_idx.is_none() {
            let m0 = (self.tabs[0].len() - 1) as u64;
            visit(&self.tabs[0], (v & m0) as usize, f);
            v |= !m0;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
        } else {
            let (small, large) = if self.tabs[0].len() <= self.tabs[1].len() {
                (&self.tabs[0], &self.tabs[1])
            } else {
                (&self.tabs[1], &self.tabs[0])
            };
            let m0 = (small.len() - 1) as u64;
            let m1 = (large.len() - 1) as u64;
            visit(small, (v & m0) as usize, f);
            loop {
                visit(large, (v & m1) as usize, f);
                v |= !m1;
                v = v.reverse_bits().wrapping_add(1).reverse_bits();
                if v & (m0 ^ m1) == 0 {
                    break;
                }
            }
        }
        v
    }

    /// Up to `out.len()` entries from consecutive buckets starting at a
    /// random one (Redis's dictGetSomeKeys): cheap, cache-friendly samples
    /// for eviction, not a uniform draw. A chain is always walked to its end,
    /// the entries past `out.len()` taking a random place by reservoir
    /// sampling (so the end of a long chain can be sampled too). Gives up
    /// after `10 * out.len()` buckets. Returns how many of `out` it filled.
    pub fn sample_some<'t>(
        &'t self,
        out: &mut [Option<&'t Entry>],
        rand: &mut dyn FnMut() -> u64,
    ) -> usize {
        let count = out.len().min(self.len);
        if count == 0 {
            return 0;
        }
        let rehashing = self.rehash_idx;
        let tables = if rehashing.is_some() { 2 } else { 1 };
        let mask = self.tabs[..tables]
            .iter()
            .map(|t| t.len())
            .max()
            .unwrap_or(1)
            - 1;
        let (mut stored, mut empty_run) = (0, 0);
        let mut i = (rand() as usize) & mask;
        for _ in 0..count * 10 {
            for (j, tab) in self.tabs[..tables].iter().enumerate() {
                // Buckets of the old table below the rehash point are empty.
                if let (Some(ri), 0) = (rehashing, j) {
                    if i < ri {
                        if i >= self.tabs[1].len() {
                            i = ri;
                        } else {
                            continue;
                        }
                    }
                }
                if i >= tab.len() {
                    continue;
                }
                if target(tab[i]).is_null() {
                    empty_run += 1;
                    if empty_run >= 5 && empty_run > count {
                        i = (rand() as usize) & mask;
                        empty_run = 0;
                    }
                    continue;
                }
                empty_run = 0;
                let mut link = &tab[i] as *const Link;
                // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
                unsafe {
                    while !target(*link).is_null() {
                        let e = &*(link as *const Entry);
                        if stored < count {
                            out[stored] = Some(e);
                        } else {
                            let r = (rand() as usize) % (stored + 1);
                            if r < count {
                                out[r] = Some(e);
                            }
                        }
                        stored += 1;
                        link = target(*link) as *const Link;
                    }
                }
                if stored >= count {
                    return count;
                }
            }
            i = (i + 1) & mask;
        }
        stored
    }

    /// One of up to 15 entries sampled from consecutive buckets (Redis's
    /// dictGetFairRandomKey): near uniform however long the chains, where
    /// [`Table::random_entry`] favours entries in short chains.
    pub fn fair_random_entry(&self, rand: &mut dyn FnMut() -> u64) -> Option<&Entry> {
        let mut sampled: [Option<&Entry>; 15] = [None; 15];
        // The high bits: a generator's low bits are its weakest, and two
        // draws from them in a row (where to start, which one) showed.
        let mut high = || rand() >> 11;
        let n = self.sample_some(&mut sampled, &mut high);
        if n == 0 {
            return self.random_entry(rand);
        }
        sampled[(high() as usize) % n]
    }

    /// A uniformly chosen bucket's random entry (Redis's dictGetRandomKey):
    /// `rand` supplies random numbers.
    pub fn random_entry(&self, rand: &mut dyn FnMut() -> u64) -> Option<&Entry> {
        if self.len == 0 {
            return None;
        }
        // Bounded number of attempts; a table this sparse is about to shrink.
        for _ in 0..10_000 {
            let r = rand();
            let (tab, idx) = match self.rehash_idx {
                Some(ri) => {
                    let total = self.tabs[0].len() - ri + self.tabs[1].len();
                    let i = (r as usize) % total;
                    if i < self.tabs[1].len() {
                        (&self.tabs[1], i)
                    } else {
                        (&self.tabs[0], ri + i - self.tabs[1].len())
                    }
                }
                None => (&self.tabs[0], (r as usize) & (self.tabs[0].len() - 1)),
            };
            if target(tab[idx]).is_null() {
                continue;
            }
            let mut n = 0;
            let mut link = &tab[idx] as *const Link;
            // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
            unsafe {
                while !target(*link).is_null() {
                    n += 1;
                    link = target(*link) as *const Link;
                }
            }
            let pick = (rand() as usize) % n;
            let mut link = &tab[idx] as *const Link;
            for _ in 0..pick {
                // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
                link = target(unsafe { *link }) as *const Link;
            }
            return Some(unsafe { &*(link as *const Entry) });
        }
        // Fall back to the first entry found.
        let mut found = None;
        for tab in &self.tabs {
            if let Some(l) = tab.iter().find(|p| !target(**p).is_null()) {
                // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
                found = Some(unsafe { &*(l as *const Link as *const Entry) });
                break;
            }
        }
        found
    }

    /// Iterate over every entry (not for the hot path: KEYS, SAVE, tests),
    /// fetching the chains ahead of the walk (see `prefetch_walk_ahead`).
    pub fn for_each<'t>(&'t self, f: &mut dyn FnMut(&'t Entry)) {
        for tab in &self.tabs {
            for i in 0..tab.len() {
                prefetch_walk_ahead(tab, i);
                let mut link = &tab[i] as *const Link;
                // SAFETY: the link-slot invariant (see `Table`): every slot is null or owns one live entry.
                unsafe {
                    while !target(*link).is_null() {
                        let e = &*(link as *const Entry);
                        f(e);
                        link = target(*link) as *const Link;
                    }
                }
            }
        }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("len", &self.len)
            .field("buckets", &self.buckets())
            .finish()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::entry::NewValue;

    fn key(i: usize) -> Vec<u8> {
        format!("key:{i}").into_bytes()
    }

    #[test]
    fn grows_incrementally_and_finds_everything() {
        let mut t = Table::new(1);
        for i in 0..10_000 {
            assert!(t
                .insert(Entry::new(&key(i), NewValue::Int(i as i64), false))
                .is_none());
            // Only a bounded amount of work per operation: the old array is
            // still there right after a resize starts.
            // The lookup hints read the chains (mid-rehash too) and change
            // nothing, for keys present and absent.
            for k in [key(i / 2), key(i + 1)] {
                let h = t.hash(&k);
                t.prefetch_bucket(h);
                t.prefetch_chain(h);
                t.prefetch_chain_next(&k, h);
            }
        }
        assert_eq!(t.len(), 10_000);
        for i in 0..10_000 {
            assert!(t.get(&key(i)).is_some(), "missing {i}");
        }
        for i in 0..5_000 {
            assert!(t.remove(&key(i)).is_some());
        }
        assert_eq!(t.len(), 5_000);
        assert!(t.get(&key(1)).is_none());
        assert!(t.get(&key(9_999)).is_some());
    }

    /// The walk that fetches chains ahead (three entries deep, 24 buckets
    /// on) visits every entry once: in a table whose old array is at its
    /// fullest (chains past three) as a rehash starts, and after it; and
    /// `clear`, which walks the same way, frees them all.
    #[test]
    fn for_each_visits_every_entry_once() {
        let mut t = Table::new(1);
        let mut n = 0;
        let mut insert = |t: &mut Table| {
            t.insert(Entry::new(&key(n), NewValue::Int(0), false));
            n += 1;
            n
        };
        while insert(&mut t) < 10_000 || t.is_rehashing() {}
        while !t.is_rehashing() {
            insert(&mut t);
        }
        let mut longest_chain = 0;
        for &slot in t.tabs[0].iter() {
            let mut len = 0;
            let mut p = target(slot);
            while !p.is_null() {
                len += 1;
                // SAFETY: a live entry of the table, whose first word is its next link.
                p = target(unsafe { *(p as *const Link) });
            }
            longest_chain = longest_chain.max(len);
        }
        assert!(
            longest_chain > 3,
            "chains too short to test: {longest_chain}"
        );
        let n = t.len();
        for rehashing in [true, false] {
            assert_eq!(t.is_rehashing(), rehashing);
            let mut seen = vec![0u8; n];
            t.for_each(&mut |e| {
                let i: usize = std::str::from_utf8(&e.key()[4..]).unwrap().parse().unwrap();
                seen[i] += 1;
            });
            assert!(
                seen.iter().all(|&c| c == 1),
                "an entry missed or seen twice (rehashing: {rehashing})"
            );
            while t.rehash(100) {}
        }
        // `clear` walks the same way, freeing as it goes; mid-rehash here.
        while !t.is_rehashing() {
            insert(&mut t);
        }
        t.clear();
        assert_eq!(t.len(), 0);
        assert!(t.get(&key(0)).is_none());
        t.insert(Entry::new(&key(0), NewValue::Int(0), false));
        assert!(t.get(&key(0)).is_some());
    }

    #[test]
    fn scan_returns_every_key_across_resizes() {
        let mut t = Table::new(7);
        for i in 0..1000 {
            t.insert(Entry::new(&key(i), NewValue::Int(0), false));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut extra = 1000;
        loop {
            cursor = t.scan(cursor, &mut |e| {
                seen.insert(e.key().to_vec());
            });
            // Grow the table while scanning (slower than the scan advances,
            // or it would never finish).
            for _ in 0..2 {
                t.insert(Entry::new(&key(extra), NewValue::Int(0), false));
                extra += 1;
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(seen.contains(&key(i)), "scan missed key {i}");
        }
    }

    #[test]
    fn store_hashed_overwrites_replaces_or_inserts_with_one_lookup() {
        let mut t = Table::new(5);
        let value = |t: &Table, k: &[u8]| match t.get(k).expect("present").value() {
            crate::db::entry::ValueRef::Int(n) => n,
            _ => panic!("an integer"),
        };
        // Enough keys that some stores land in the middle of a rehash.
        for i in 0..3_000 {
            let k = key(i);
            let h = t.hash(&k);
            let make = || Entry::new(&k, NewValue::Int(i as i64), false);
            assert!(t
                .store_hashed(&k, h, |_| panic!("a new key"), make)
                .is_none());
            if i % 3 == 0 {
                // An existing key changed in place: nothing replaced.
                let at = t.get(&k).unwrap().as_raw();
                let overwrite = |e: &mut Entry| e.set_int_in_place(-(i as i64));
                let make = || panic!("changed in place");
                assert!(t.store_hashed(&k, h, overwrite, make).is_none());
                assert_eq!(t.get(&k).unwrap().as_raw(), at);
                assert_eq!(value(&t, &k), -(i as i64));
            } else if i % 3 == 1 {
                // One that refuses: a new entry, the old one returned.
                let make = || Entry::new(&k, NewValue::Int(7), false);
                let old = t.store_hashed(&k, h, |_| false, make).expect("replaced");
                assert!(matches!(old.value(), crate::db::entry::ValueRef::Int(n) if n == i as i64));
                assert_eq!(value(&t, &k), 7);
            }
        }
        assert_eq!(t.len(), 3_000);
        assert_filters_exact(&t);
    }

    /// Every bucket's filter is exactly that of its chain's keys.
    fn assert_filters_exact(t: &Table) {
        for tab in &t.tabs {
            for &slot in tab.iter() {
                let mut f = 0;
                let mut p = target(slot);
                while !p.is_null() {
                    // SAFETY: a live entry of the table.
                    let e = unsafe { &*(&p as *const Link as *const Entry) };
                    f |= filter_of(t.hash(e.key()));
                    p = e.next();
                }
                assert_eq!(filter(slot), f, "a bucket's filter is stale");
            }
        }
    }

    #[test]
    fn bucket_filters_stay_exact_through_inserts_removes_and_rehashes() {
        let mut t = Table::new(11);
        for i in 0..5_000 {
            t.insert(Entry::new(&key(i), NewValue::Int(i as i64), false));
            if i % 997 == 0 {
                assert_filters_exact(&t);
            }
        }
        assert_filters_exact(&t);
        // Replacing keeps the filter; removing recomputes it; shrinking
        // rebuilds it in the new array.
        for i in (0..5_000).step_by(3) {
            t.insert(Entry::new(&key(i), NewValue::Int(-1), false));
        }
        for i in (0..5_000).filter(|i| i % 5 != 0) {
            assert!(t.remove(&key(i)).is_some(), "lost {i}");
            if i % 1001 == 0 {
                assert_filters_exact(&t);
            }
        }
        assert_filters_exact(&t);
        while t.rehash(100) {}
        assert_filters_exact(&t);
        for i in 0..5_000 {
            assert_eq!(t.get(&key(i)).is_some(), i % 5 == 0, "key {i}");
        }
        // Removing everything leaves plain null buckets.
        for i in (0..5_000).step_by(5) {
            assert!(t.remove(&key(i)).is_some());
        }
        assert!(t.tabs.iter().all(|tab| tab.iter().all(|s| s.is_null())));
    }

    #[test]
    fn the_first_entry_of_a_chain_is_reached_through_its_filtered_slot() {
        // A table with few buckets: most keys share chains, and every key is
        // at some point the head that a bucket slot (with filter bits) points at.
        let mut t = Table::new(5);
        let mut addrs = std::collections::HashMap::new();
        for i in 0..64 {
            t.insert(Entry::new(&key(i), NewValue::Int(i as i64), false));
        }
        for i in 0..64 {
            let e = t.get(&key(i)).expect("present");
            assert_eq!(e.key(), key(i));
            assert_eq!(e.as_raw().addr() & !ADDR_MASK, 0);
            addrs.insert(i, e.as_raw());
        }
        let mut seen = 0;
        t.for_each(&mut |e| {
            let i: usize = std::str::from_utf8(&e.key()[4..]).unwrap().parse().unwrap();
            assert_eq!(addrs[&i], e.as_raw());
            seen += 1;
        });
        assert_eq!(seen, 64);
        if let Some(e) = t.get_mut(&key(7)) {
            assert!(e.set_int_in_place(70));
        }
        assert!(matches!(
            t.get(&key(7)).map(|e| e.value()),
            Some(crate::db::entry::ValueRef::Int(70))
        ));
    }

    #[test]
    fn random_entry_finds_keys() {
        let mut t = Table::new(3);
        let mut r = 12345u64;
        let mut rand = move || {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            r
        };
        assert!(t.random_entry(&mut rand).is_none());
        t.insert(Entry::new(b"a", NewValue::Int(1), false));
        assert_eq!(t.random_entry(&mut rand).unwrap().key(), b"a");
    }

    #[test]
    fn fair_random_entry_reaches_the_end_of_a_long_chain() {
        // 40 keys in one bucket of a table sized for 4096: the sample walks
        // the whole chain (reservoir sampling), so every key comes out, not
        // only the 15 nearest the chain's head.
        let mut t = Table::new(3);
        t.reserve(4096);
        let mask = t.tabs[0].len() as u64 - 1;
        let keys: Vec<Vec<u8>> = (0..1_000_000u32)
            .map(|i| format!("m:{i}").into_bytes())
            .filter(|k| t.hash(k) & mask == 7)
            .take(40)
            .collect();
        assert_eq!(keys.len(), 40);
        for k in &keys {
            t.insert(Entry::new(k, NewValue::Int(1), false));
        }
        assert_eq!(t.tabs[0].len() as u64 - 1, mask, "the table resized");
        let mut r = 88172645463325252u64;
        let mut rand = move || {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            r
        };
        let mut seen = std::collections::HashSet::new();
        for _ in 0..4000 {
            seen.insert(t.fair_random_entry(&mut rand).unwrap().key().to_vec());
        }
        assert_eq!(seen.len(), 40);
    }
}
