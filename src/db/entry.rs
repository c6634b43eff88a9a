//! Compact keyspace entries.
//!
//! Every key lives in exactly one heap allocation that holds the hash chain
//! link, a tag byte, a 24-bit access clock, the key, and — for small strings
//! and integers — the value itself:
//!
//! ```text
//! 0        8     9         12              12|16
//! | next   | tag | lru (3) | klen (1 or 4) | key bytes | value payload |
//! ```
//!
//! The value payload is `[len u8][bytes]` for a string of up to 255 bytes,
//! `[i64]` for an integer, or a pointer to a boxed [`Value`] for anything
//! else. A 16-byte key with a 16-byte value takes 46 bytes, which jemalloc
//! serves from its 48-byte class; Redis spends a dictEntry, an robj and an sds
//! for the same key (≈ 120 bytes with the table).
//!
//! Expiry times are kept in the database's `expires` table, as Redis does; the
//! tag's `HAS_EXPIRE` bit lets lookups of keys without a TTL skip that table.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};

use super::value::{Str, Value};

const OFF_NEXT: usize = 0;
const OFF_TAG: usize = 8;
const OFF_LRU: usize = 9;
const OFF_KLEN: usize = 12;

const KIND_MASK: u8 = 0b11;
const KIND_INLINE: u8 = 0;
const KIND_INT: u8 = 1;
const KIND_BOXED: u8 = 2;
/// The key has a TTL in the expires table.
const HAS_EXPIRE: u8 = 1 << 2;
/// The string was modified in place by APPEND/SETRANGE: OBJECT ENCODING says
/// "raw" as Redis does for such strings.
const RAW: u8 = 1 << 3;
/// The key length is a 4-byte field rather than one byte.
const WIDE_KLEN: u8 = 1 << 4;

/// Longest string stored inside the entry.
pub const INLINE_MAX: usize = 255;
/// Longest key whose length fits the one-byte field.
const NARROW_KLEN_MAX: usize = 254;

/// The access clock new entries start with (Redis's `server.lruclock`),
/// refreshed by the event loop whenever it reads the time.
static LRU_CLOCK: AtomicU32 = AtomicU32::new(0);

/// Redis's 24-bit LRU clock: seconds, wrapping.
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// The LRU clock at `now_ms` (ms since the epoch).
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / 1000) as u32) & LRU_CLOCK_MAX
}

/// Seconds between an LRU access word and the clock now, on the wrapping
/// 24-bit clock (Redis's estimateObjectIdleTime, in seconds).
pub fn lru_idle(clock: u32, word: u32) -> u32 {
    if clock >= word {
        clock - word
    } else {
        clock + (LRU_CLOCK_MAX - word)
    }
}

/// The access word a key gets from an idle time or a frequency (RESTORE
/// IDLETIME/FREQ, a dump's IDLE/FREQ records), as Redis's
/// objectSetLRUOrLFU: a frequency under an LFU policy, an idle time under
/// any other (one before the clock's start wraps half a cycle ahead);
/// `None` when the policy keeps neither.
pub fn access_word(lfu: bool, idle: Option<u64>, freq: Option<u8>, now_ms: i64) -> Option<u32> {
    if lfu {
        freq.map(|f| (lfu_minutes(now_ms) << 8) | f as u32)
    } else {
        idle.map(|idle| {
            let clock = lru_clock(now_ms) as i64;
            let max = LRU_CLOCK_MAX as i64;
            let abs = clock - idle.min(i64::MAX as u64) as i64;
            (if abs < 0 {
                (clock + max / 2) % max
            } else {
                abs
            }) as u32
        })
    }
}

/// The LFU clock in an entry's access word: minutes, 16 bits, wrapping
/// (the word holds `minutes << 8 | counter`).
pub fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) as u32) & 0xffff
}

/// The counter a new key starts with under an LFU policy, so that it is
/// not evicted before it had a chance to be read.
pub const LFU_INIT_VAL: u8 = 5;

/// The access word of a new entry under an LFU policy.
pub fn lfu_initial_word(now_ms: i64) -> u32 {
    (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL as u32
}

/// An LFU counter after its idle periods are taken off: one per
/// `decay_minutes` since the word's time (Redis's LFUDecrAndReturn).
pub fn lfu_decayed(word: u32, now_minutes: u32, decay_minutes: i64) -> u8 {
    let then = word >> 8;
    let counter = (word & 0xff) as u8;
    let elapsed = if now_minutes >= then {
        now_minutes - then
    } else {
        65535 - then + now_minutes
    };
    let periods = if decay_minutes > 0 {
        elapsed as i64 / decay_minutes
    } else {
        0
    };
    if periods >= counter as i64 {
        0
    } else {
        counter - periods as u8
    }
}

/// An LFU counter after one access: it grows with probability
/// 1 / ((counter - LFU_INIT_VAL) * log_factor + 1), so it counts hits
/// logarithmically up to 255 (Redis's LFULogIncr). `r` is uniform in [0, 1).
pub fn lfu_log_incr(counter: u8, log_factor: i64, r: f64) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = (counter as f64 - LFU_INIT_VAL as f64).max(0.0);
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// Set the access clock new entries start with (the loop calls this
/// whenever it reads the time), and whether it is an LFU word.
pub fn set_lru_clock(clock: u32, lfu: bool) {
    LRU_CLOCK.store(clock, Ordering::Relaxed);
    LFU_POLICY.store(lfu, Ordering::Relaxed);
}

/// An LFU maxmemory policy is in force: an overwritten key's counter goes
/// to its new value (Redis's dbOverwrite), as a hot key stays hot.
static LFU_POLICY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn lfu_policy() -> bool {
    LFU_POLICY.load(Ordering::Relaxed)
}

/// Longest string that may be stored as an integer (Redis tries at most 20 chars).
const MAX_INT_STRING: usize = 20;

/// What an entry's value is, borrowed.
pub enum ValueRef<'a> {
    /// A string held inline (`raw` tells which OBJECT ENCODING it reports).
    Str(&'a [u8]),
    Int(i64),
    Boxed(&'a Value),
}

/// The value to store when creating an entry.
pub enum NewValue<'a> {
    Str(&'a [u8]),
    Int(i64),
    Boxed(Box<Value>),
}

/// The integer a string value is stored as, when it is the canonical form
/// of an i64 (Redis's tryObjectEncoding); None: stored as its bytes.
pub fn string_int(val: &[u8]) -> Option<i64> {
    if val.len() <= MAX_INT_STRING {
        crate::util::parse_i64(val)
    } else {
        None
    }
}

/// An owning pointer to one entry allocation.
///
/// # Invariant
/// The pointer is never null and points at a live allocation made by
/// [`Entry::new`] with the layout in this file's header: the tag byte says
/// which payload follows, and the key-length field (one byte, or four with
/// `WIDE_KLEN`) gives the key's size, so the allocation's size and layout can
/// always be computed back from its contents (that is how `Drop` frees it).
/// Exactly one owner holds the pointer at any time: an `Entry` value, or one
/// link slot of a [`Table`](super::Table) (after [`Entry::into_raw`]). A boxed
/// value's pointer in the payload is owned by the entry and freed with it.
///
/// A table's bucket slot keeps a filter of its chain's hashes in the
/// address's top bits (see `table.rs`), and a reference to the chain's first
/// entry is that slot: every access goes through [`Entry::base`], which
/// takes those bits off.
#[derive(Debug)]
#[repr(transparent)]
pub struct Entry(NonNull<u8>);

/// The bits of an entry's address. User-space addresses on the 64-bit
/// targets Linux runs this server on (x86-64 and AArch64, with 4- or 5-level
/// page tables unless a mapping asks for a high address, which the
/// allocator never does) stay below 2^48, so the 16 bits above are free.
pub(super) const ADDR_MASK: usize = (1 << 48) - 1;

const _: () = assert!(
    usize::BITS == 64,
    "entries keep a filter in the top 16 address bits"
);

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.base() == other.base()
    }
}

impl Eq for Entry {}

impl Entry {
    /// The entry for a string value, integer-encoded when it is the
    /// canonical form of an i64 (Redis's tryObjectEncoding).
    pub fn string(key: &[u8], val: &[u8]) -> Entry {
        Entry::string_encoded(key, val, string_int(val))
    }

    /// [`Entry::string`] with `val`'s [`string_int`] already known.
    pub fn string_encoded(key: &[u8], val: &[u8], int: Option<i64>) -> Entry {
        let new = match int {
            Some(n) => NewValue::Int(n),
            None => NewValue::Str(val),
        };
        Entry::new(key, new, false)
    }

    /// An entry for a string handed over as an owned buffer: a long one is
    /// kept as it is (no copy of a 500 MB value), a short one is inlined.
    pub fn from_vec(key: &[u8], value: Vec<u8>, raw: bool) -> Entry {
        if value.len() > INLINE_MAX {
            Entry::new(
                key,
                NewValue::Boxed(Box::new(Value::Str(Str::new(value)))),
                raw,
            )
        } else {
            Entry::new(key, NewValue::Str(&value), raw)
        }
    }

    /// Allocate an entry for `key` holding `value`. Strings longer than
    /// [`INLINE_MAX`] are boxed automatically.
    pub fn new(key: &[u8], value: NewValue, raw: bool) -> Entry {
        let value = match value {
            NewValue::Str(s) if s.len() > INLINE_MAX => {
                NewValue::Boxed(Box::new(Value::Str(Str::new(s.to_vec()))))
            }
            v => v,
        };
        // Every way in refuses longer ones (`protocol::ARG_LEN_MAX`); a
        // longer key would be read back as its length modulo 2^32.
        assert!(key.len() <= u32::MAX as usize, "key longer than 4 GiB");
        let wide = key.len() > NARROW_KLEN_MAX;
        let klen_size = if wide { 4 } else { 1 };
        let key_off = OFF_KLEN + klen_size;
        let val_off = key_off + key.len();
        let (kind, val_size) = match &value {
            NewValue::Str(s) => (KIND_INLINE, 1 + s.len()),
            NewValue::Int(_) => (KIND_INT, 8),
            NewValue::Boxed(_) => (KIND_BOXED, 8),
        };
        let size = val_off + val_size;
        let layout = Layout::from_size_align(size, 8).expect("entry layout");
        // SAFETY: layout has non-zero size; every byte of it is written below
        // before it is read.
        unsafe {
            let p = alloc(layout);
            let Some(p) = NonNull::new(p) else {
                std::alloc::handle_alloc_error(layout)
            };
            // The table's filter bits would clobber such an address; no
            // Linux allocation without an explicit high hint returns one.
            assert!(
                p.as_ptr().addr() & !ADDR_MASK == 0,
                "entry above the 48-bit address space"
            );
            let b = p.as_ptr();
            ptr::write_unaligned(b.add(OFF_NEXT) as *mut *mut u8, ptr::null_mut());
            let mut tag = kind;
            if raw {
                tag |= RAW;
            }
            if wide {
                tag |= WIDE_KLEN;
                ptr::write_unaligned(b.add(OFF_KLEN) as *mut u32, key.len() as u32);
            } else {
                *b.add(OFF_KLEN) = key.len() as u8;
            }
            *b.add(OFF_TAG) = tag;
            let clock = LRU_CLOCK.load(Ordering::Relaxed);
            *b.add(OFF_LRU) = clock as u8;
            *b.add(OFF_LRU + 1) = (clock >> 8) as u8;
            *b.add(OFF_LRU + 2) = (clock >> 16) as u8;
            ptr::copy_nonoverlapping(key.as_ptr(), b.add(key_off), key.len());
            let v = b.add(val_off);
            match value {
                NewValue::Str(s) => {
                    *v = s.len() as u8;
                    ptr::copy_nonoverlapping(s.as_ptr(), v.add(1), s.len());
                }
                NewValue::Int(n) => ptr::write_unaligned(v as *mut i64, n),
                NewValue::Boxed(bx) => {
                    ptr::write_unaligned(v as *mut *mut Value, Box::into_raw(bx))
                }
            }
            Entry(p)
        }
    }

    /// The allocation (without a bucket slot's filter bits).
    #[inline]
    fn base(&self) -> *mut u8 {
        self.0.as_ptr().map_addr(|a| a & ADDR_MASK)
    }

    #[inline]
    fn tag(&self) -> u8 {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { *self.base().add(OFF_TAG) }
    }

    #[inline]
    fn set_tag(&mut self, t: u8) {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { *self.base().add(OFF_TAG) = t }
    }

    #[inline]
    fn key_off_len(&self) -> (usize, usize) {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe {
            if self.tag() & WIDE_KLEN != 0 {
                let len = ptr::read_unaligned(self.base().add(OFF_KLEN) as *const u32) as usize;
                (OFF_KLEN + 4, len)
            } else {
                (OFF_KLEN + 1, *self.base().add(OFF_KLEN) as usize)
            }
        }
    }

    /// The allocation's address (stable for the entry's lifetime), for
    /// structures that index entries owned by a table.
    pub fn as_raw(&self) -> *const u8 {
        self.base()
    }

    /// The key of the entry at `p`.
    ///
    /// # Safety
    /// `p` must come from [`Entry::as_raw`] of an entry that outlives `'a`.
    pub unsafe fn key_at<'a>(p: *const u8) -> &'a [u8] {
        let e = std::mem::ManuallyDrop::new(Entry(NonNull::new_unchecked(p as *mut u8)));
        let k = e.key();
        std::slice::from_raw_parts(k.as_ptr(), k.len())
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        let (off, len) = self.key_off_len();
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { std::slice::from_raw_parts(self.base().add(off), len) }
    }

    #[inline]
    fn val_ptr(&self) -> *mut u8 {
        let (off, len) = self.key_off_len();
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { self.base().add(off + len) }
    }

    fn alloc_size(&self) -> usize {
        let (off, len) = self.key_off_len();
        off + len
            + match self.tag() & KIND_MASK {
                // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
                KIND_INLINE => 1 + unsafe { *self.val_ptr() } as usize,
                _ => 8,
            }
    }

    /// Bytes this entry occupies on the heap, its boxed value included
    /// (approximate for collections). Used by MEMORY USAGE and DEBUG OBJECT.
    pub fn heap_size(&self) -> usize {
        let own = self.alloc_size();
        match self.value() {
            ValueRef::Boxed(v) => own + v.heap_size(),
            _ => own,
        }
    }

    /// [`Entry::heap_size`] with a big collection's elements sampled
    /// (MEMORY USAGE … SAMPLES).
    pub fn heap_size_sampled(&self, samples: usize) -> usize {
        let own = self.alloc_size();
        match self.value() {
            ValueRef::Boxed(v) => own + v.heap_size_sampled(samples),
            _ => own,
        }
    }

    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        let v = self.val_ptr();
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe {
            match self.tag() & KIND_MASK {
                KIND_INLINE => ValueRef::Str(std::slice::from_raw_parts(v.add(1), *v as usize)),
                KIND_INT => ValueRef::Int(ptr::read_unaligned(v as *const i64)),
                _ => ValueRef::Boxed(&*ptr::read_unaligned(v as *const *const Value)),
            }
        }
    }

    /// Mutable access to a boxed value.
    pub fn boxed_mut(&mut self) -> Option<&mut Value> {
        if self.tag() & KIND_MASK != KIND_BOXED {
            return None;
        }
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe {
            Some(&mut *ptr::read_unaligned(
                self.val_ptr() as *const *mut Value
            ))
        }
    }

    /// The bytes of a string stored inside the entry, for a write that
    /// keeps its length (SETBIT, BITFIELD, SETRANGE within it); the entry
    /// becomes a "raw" string, as Redis's dbUnshareStringValue makes one.
    /// `None` for any other kind of value.
    pub fn inline_bytes_mut(&mut self) -> Option<&mut [u8]> {
        if self.tag() & KIND_MASK != KIND_INLINE {
            return None;
        }
        let t = self.tag();
        self.set_tag(t | RAW);
        // SAFETY: the Entry invariant (see `Entry`): an inline value is its
        // length byte followed by that many bytes, owned by this entry.
        unsafe {
            let v = self.val_ptr();
            Some(std::slice::from_raw_parts_mut(v.add(1), *v as usize))
        }
    }

    /// Store the string `val` (whose [`string_int`] is `int`) over this
    /// entry's value in place, when the old value is an integer or an inline
    /// string and the new one (encoded as [`Entry::string`] would) takes
    /// exactly as many bytes, or both are long strings of one length and no
    /// reply holds the old: SET over a key of the same size writes where the
    /// old value is, instead of allocating a new entry, relinking the chain
    /// and freeing the old one. The value is a new one as Redis's setKey
    /// makes it: not "raw", and its access clock restarts unless
    /// `keep_clock` (an LFU policy keeps the key's counter). The TTL flag is
    /// left to the caller. Returns false, changing nothing, otherwise.
    pub fn overwrite_string(&mut self, val: &[u8], int: Option<i64>, keep_clock: bool) -> bool {
        let done = match self.tag() & KIND_MASK {
            KIND_BOXED => self.overwrite_boxed_string(val),
            _ => self.overwrite_small_value(val, int),
        };
        if done {
            let t = self.tag();
            self.set_tag(t & !RAW);
            if !keep_clock {
                self.set_lru(LRU_CLOCK.load(Ordering::Relaxed));
            }
        }
        done
    }

    /// An integer or inline string whose payload has the size of the new
    /// value's (`int` when `val` is stored as an integer, else `val`
    /// inline): it written over it, the tag saying which it now is. False
    /// otherwise (a new value too long to be inline included).
    #[inline]
    fn overwrite_small_value(&mut self, val: &[u8], int: Option<i64>) -> bool {
        // SAFETY: the Entry invariant (see `Entry`): an inline payload is
        // its length byte and that many bytes, an integer's 8 bytes.
        let old_size = match self.tag() & KIND_MASK {
            KIND_INLINE => 1 + unsafe { *self.val_ptr() } as usize,
            _ => 8, // KIND_INT: the caller took boxed values elsewhere
        };
        let (kind, size) = match int {
            Some(_) => (KIND_INT, 8),
            None if val.len() <= INLINE_MAX => (KIND_INLINE, 1 + val.len()),
            None => return false,
        };
        if size != old_size {
            return false;
        }
        let v = self.val_ptr();
        // SAFETY: the new payload has the old one's size, so it fills the
        // same bytes of this entry's allocation, and the tag set below says
        // how to read it (and the allocation's size computed back from it
        // is unchanged, as `Drop` needs).
        unsafe {
            match int {
                Some(n) => ptr::write_unaligned(v as *mut i64, n),
                None => {
                    *v = val.len() as u8;
                    ptr::copy_nonoverlapping(val.as_ptr(), v.add(1), val.len());
                }
            }
        }
        let t = self.tag();
        self.set_tag((t & !KIND_MASK) | kind);
        true
    }

    /// A long string (boxed) of `val`'s length that no reply holds: its
    /// bytes copied over with `val`, in its own buffer. False otherwise.
    fn overwrite_boxed_string(&mut self, val: &[u8]) -> bool {
        if val.len() <= INLINE_MAX {
            return false;
        }
        let Some(Value::Str(s)) = self.boxed_mut() else {
            return false;
        };
        let bytes = match s {
            Str::Owned(v) => v,
            Str::Shared(a) => match std::sync::Arc::get_mut(a) {
                Some(v) => v,
                None => return false,
            },
        };
        if bytes.len() != val.len() {
            return false;
        }
        bytes.copy_from_slice(val);
        true
    }

    /// Overwrite an integer value in place (INCR and friends).
    pub fn set_int_in_place(&mut self, n: i64) -> bool {
        if self.tag() & KIND_MASK != KIND_INT {
            return false;
        }
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { ptr::write_unaligned(self.val_ptr() as *mut i64, n) };
        true
    }

    pub fn is_raw(&self) -> bool {
        self.tag() & RAW != 0
    }

    pub fn has_expire(&self) -> bool {
        self.tag() & HAS_EXPIRE != 0
    }

    pub fn set_has_expire(&mut self, on: bool) {
        let t = self.tag();
        self.set_tag(if on { t | HAS_EXPIRE } else { t & !HAS_EXPIRE });
    }

    /// The 24-bit access clock (LRU seconds, or LFU time+counter).
    pub fn lru(&self) -> u32 {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe {
            let p = self.base().add(OFF_LRU);
            (*p as u32) | ((*p.add(1) as u32) << 8) | ((*p.add(2) as u32) << 16)
        }
    }

    pub fn set_lru(&mut self, v: u32) {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe {
            let p = self.base().add(OFF_LRU);
            *p = v as u8;
            *p.add(1) = (v >> 8) as u8;
            *p.add(2) = (v >> 16) as u8;
        }
    }

    /// Move this entry's value into a new entry named `key` (RENAME, MOVE):
    /// a boxed value changes hands without being copied.
    pub fn rekey(mut self, key: &[u8]) -> Entry {
        let raw = self.is_raw();
        let lru = self.lru();
        let mut e = match self.tag() & KIND_MASK {
            // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
            KIND_BOXED => unsafe {
                let bx = Box::from_raw(ptr::read_unaligned(self.val_ptr() as *const *mut Value));
                // The payload is 8 bytes either way: relabel it as an integer
                // so dropping `self` does not free the moved box.
                let t = self.tag();
                self.set_tag((t & !KIND_MASK) | KIND_INT);
                Entry::new(key, NewValue::Boxed(bx), raw)
            },
            _ => match self.value() {
                ValueRef::Str(s) => Entry::new(key, NewValue::Str(s), raw),
                ValueRef::Int(n) => Entry::new(key, NewValue::Int(n), raw),
                ValueRef::Boxed(_) => unreachable!("handled above"),
            },
        };
        e.set_lru(lru);
        e
    }

    /// Copy tag bits that belong to the key, not the value (TTL flag, clock)
    /// from `other` when an entry is rebuilt for a new value.
    pub fn inherit_key_state(&mut self, other: &Entry) {
        self.set_has_expire(other.has_expire());
        self.set_lru(other.lru());
    }

    // --- chain link, used only by the table ---

    #[inline]
    pub(super) fn next(&self) -> *mut u8 {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { ptr::read_unaligned(self.base().add(OFF_NEXT) as *const *mut u8) }
    }

    #[inline]
    pub(super) fn set_next(&mut self, p: *mut u8) {
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe { ptr::write_unaligned(self.base().add(OFF_NEXT) as *mut *mut u8, p) }
    }

    #[inline]
    pub(super) fn into_raw(self) -> *mut u8 {
        let p = self.base();
        std::mem::forget(self);
        p
    }

    /// # Safety
    /// `p` must come from [`Entry::into_raw`] and not be owned elsewhere.
    #[inline]
    pub(super) unsafe fn from_raw(p: *mut u8) -> Entry {
        Entry(NonNull::new_unchecked(p))
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let size = self.alloc_size();
        // SAFETY: the Entry invariant (see `Entry`): the pointer is a live allocation with this layout, owned by this value.
        unsafe {
            if self.tag() & KIND_MASK == KIND_BOXED {
                drop(Box::from_raw(ptr::read_unaligned(
                    self.val_ptr() as *const *mut Value
                )));
            }
            dealloc(self.base(), Layout::from_size_align_unchecked(size, 8));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_small_strings_inline() {
        let e = Entry::new(
            b"key:000000000001",
            NewValue::Str(b"0123456789abcdef"),
            false,
        );
        assert_eq!(e.key(), b"key:000000000001");
        assert_eq!(e.alloc_size(), 46);
        match e.value() {
            ValueRef::Str(s) => assert_eq!(s, b"0123456789abcdef"),
            _ => panic!("expected inline string"),
        }
    }

    #[test]
    fn boxes_long_strings_and_wide_keys() {
        let key = vec![7u8; 1000];
        let val = vec![9u8; 300];
        let mut e = Entry::new(&key, NewValue::Str(&val), false);
        assert_eq!(e.key(), &key[..]);
        assert!(e.boxed_mut().is_some());
        match e.value() {
            ValueRef::Boxed(Value::Str(s)) => assert_eq!(&s[..], &val[..]),
            _ => panic!("expected boxed string"),
        }
    }

    /// [`Entry::overwrite_string`] as SET calls it.
    fn overwrite(e: &mut Entry, val: &[u8], keep_clock: bool) -> bool {
        e.overwrite_string(val, string_int(val), keep_clock)
    }

    #[test]
    fn overwrites_a_value_of_the_same_size_in_place() {
        // The clock is the process's (a server's tick in another test may
        // move it): a new value's is the clock before or after the write.
        let clock = || LRU_CLOCK.load(Ordering::Relaxed);
        let mut e = Entry::new(b"key", NewValue::Str(b"abcdefg"), true);
        let at = e.as_raw();
        let old_clock = (clock() + 12345) & LRU_CLOCK_MAX;
        e.set_lru(old_clock);
        e.set_has_expire(true);
        let before = clock();
        assert!(
            overwrite(&mut e, b"12345678", false),
            "an integer in place of 7 bytes"
        );
        let after = clock();
        assert_eq!(e.as_raw(), at);
        assert!(matches!(e.value(), ValueRef::Int(12345678)));
        assert!(!e.is_raw(), "a new value is not raw");
        assert!(e.lru() == before || e.lru() == after, "a new value's clock");
        assert!(e.has_expire(), "the TTL flag is the caller's");
        e.set_lru(old_clock);
        assert!(overwrite(&mut e, b"-7", true), "an integer over an integer");
        assert!(matches!(e.value(), ValueRef::Int(-7)));
        assert_eq!(e.lru(), old_clock, "an LFU policy keeps the counter");
        assert!(
            overwrite(&mut e, b"1234567", false),
            "an integer over an integer"
        );
        assert!(matches!(e.value(), ValueRef::Int(1234567)));
        assert!(
            overwrite(&mut e, b"gfedcba", false),
            "7 bytes take an integer's room"
        );
        assert!(matches!(e.value(), ValueRef::Str(b"gfedcba")));
        assert!(
            overwrite(&mut e, b"0123456", true),
            "not an integer: a leading zero"
        );
        assert!(matches!(e.value(), ValueRef::Str(b"0123456")));
        assert_eq!(e.key(), b"key");
        assert_eq!(e.alloc_size(), 13 + 3 + 8, "the layout of the entry it was");
    }

    #[test]
    fn refuses_to_overwrite_another_size_or_kind() {
        let mut e = Entry::new(b"k", NewValue::Str(b"abc"), false);
        for other in [&b"abcd"[..], b"ab", b"1", b"", &[b'x'; 300]] {
            assert!(!overwrite(&mut e, other, false));
            assert!(matches!(e.value(), ValueRef::Str(b"abc")));
        }
        let mut n = Entry::new(b"k", NewValue::Int(5), false);
        assert!(!overwrite(&mut n, b"abc", false));
        assert!(matches!(n.value(), ValueRef::Int(5)));
        let long = vec![b'y'; 300];
        let mut b = Entry::new(b"k", NewValue::Str(&long), false);
        assert!(!overwrite(&mut b, &long[..299], false), "another length");
        assert!(!overwrite(&mut b, b"12345678", false));
        assert!(matches!(b.value(), ValueRef::Boxed(Value::Str(s)) if s[..] == long[..]));
        let list = Value::List(Default::default());
        let mut l = Entry::new(b"k", NewValue::Boxed(Box::new(list)), false);
        assert!(!overwrite(&mut l, &long, false), "not a string");
        assert!(matches!(l.value(), ValueRef::Boxed(Value::List(_))));
    }

    #[test]
    fn overwrites_a_long_string_of_the_same_length_unless_a_reply_holds_it() {
        let bytes_at = |e: &Entry| match e.value() {
            ValueRef::Boxed(Value::Str(s)) => s.as_ptr(),
            _ => panic!("expected a long string"),
        };
        let mut e = Entry::from_vec(b"k", vec![b'a'; 300], true);
        let at = bytes_at(&e);
        assert!(overwrite(&mut e, &[b'b'; 300], false));
        assert_eq!(bytes_at(&e), at, "the same buffer");
        assert!(matches!(e.value(), ValueRef::Boxed(Value::Str(s)) if s[..] == [b'b'; 300]));
        assert!(!e.is_raw());

        let len = crate::db::value::SHARED_STR_MIN;
        let mut e = Entry::from_vec(b"k", vec![b'c'; len], false);
        let held = match e.value() {
            ValueRef::Boxed(Value::Str(s)) => s.shared().expect("shared").clone(),
            _ => panic!("expected a long string"),
        };
        let other = vec![b'd'; len];
        assert!(!overwrite(&mut e, &other, false), "a reply holds the bytes");
        assert!(held.iter().all(|&b| b == b'c'));
        drop(held);
        assert!(
            overwrite(&mut e, &other, false),
            "no one else holds them now"
        );
        assert!(matches!(e.value(), ValueRef::Boxed(Value::Str(s)) if s[..] == other[..]));
    }

    #[test]
    fn keeps_flags_and_clock() {
        let mut e = Entry::new(b"k", NewValue::Int(-5), false);
        e.set_lru(0xABCDEF);
        e.set_has_expire(true);
        assert!(e.set_int_in_place(42));
        assert_eq!(e.lru(), 0xABCDEF);
        assert!(e.has_expire());
        assert!(matches!(e.value(), ValueRef::Int(42)));
    }
}
