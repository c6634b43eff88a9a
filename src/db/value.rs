//! Values that do not fit inside a keyspace entry: long strings and the
//! collection types, each with a compact encoding for small sizes and a
//! scalable one for large sizes, switching at the `*-max-*` thresholds as
//! Redis does (and, like Redis, never converting back).
//!
//! | type | small | large |
//! |------|-------|-------|
//! | hash | `listpack`: field, value, … packed in one allocation | `hashtable`: a keyspace-style [`Table`] of field → value entries |
//! | list | `quicklist` of listpack nodes, interior ones LZF-compressed at `list-compress-depth` (always, as Redis 7.0 reports; see `quicklist`) | same |
//! | set  | `intset`: sorted `i64`s | `hashtable`: a [`Table`] of members |

use super::entry::{Entry, NewValue, ValueRef};
use super::packed::Packed;
pub use super::quicklist::List;
use super::table::Table;
pub use super::zset::ZSet;

/// A boxed value.
#[derive(Debug)]
pub enum Value {
    /// A string longer than an entry can hold inline.
    Str(Str),
    Hash(Hash),
    List(List),
    Set(Set),
    ZSet(ZSet),
    Stream(Box<super::stream::Stream>),
}

/// Strings at least this long are reference-counted (see [`Str`]).
pub const SHARED_STR_MIN: usize = 64 * 1024;

/// The bytes of a long string value.
///
/// One of [`SHARED_STR_MIN`] bytes or more is reference-counted, so that a
/// reply can hold it while its client reads instead of copying it: GET of a
/// 100 MB value costs no copy, however slowly the client reads. A write to
/// it copies the bytes only while a reply still holds them (copy on write),
/// so every reply shows the value as it was when the reply was made. Shorter
/// strings (hash fields, members) stay plain vectors: no count to pay for.
#[derive(Debug, Clone)]
pub enum Str {
    Owned(Vec<u8>),
    Shared(std::sync::Arc<Vec<u8>>),
}

impl Str {
    /// Keep `bytes` as they are (no copy), shared when long.
    pub fn new(bytes: Vec<u8>) -> Str {
        if bytes.len() >= SHARED_STR_MIN {
            Str::Shared(std::sync::Arc::new(bytes))
        } else {
            Str::Owned(bytes)
        }
    }

    /// The bytes for writing, with room for `additional` more: copied first
    /// (once, into a buffer of the final size) only if a reply still holds
    /// them. A string that has grown long becomes shared.
    pub fn make_mut(&mut self, additional: usize) -> &mut Vec<u8> {
        if let Str::Owned(v) = self {
            if v.len() + additional >= SHARED_STR_MIN {
                *self = Str::Shared(std::sync::Arc::new(std::mem::take(v)));
            }
        }
        match self {
            Str::Owned(v) => {
                v.reserve(additional);
                v
            }
            Str::Shared(a) => {
                if std::sync::Arc::get_mut(a).is_none() {
                    let mut copy = Vec::with_capacity(a.len() + additional);
                    copy.extend_from_slice(a);
                    *a = std::sync::Arc::new(copy);
                }
                let v = std::sync::Arc::get_mut(a).expect("unique after the copy");
                v.reserve(additional);
                v
            }
        }
    }

    /// The shared bytes, for a reply to hold.
    pub fn shared(&self) -> Option<&std::sync::Arc<Vec<u8>>> {
        match self {
            Str::Owned(_) => None,
            Str::Shared(a) => Some(a),
        }
    }

    pub fn capacity(&self) -> usize {
        match self {
            Str::Owned(v) => v.capacity(),
            Str::Shared(a) => a.capacity(),
        }
    }
}

impl std::ops::Deref for Str {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Str::Owned(v) => v,
            Str::Shared(a) => a,
        }
    }
}

impl Value {
    /// The hash table a set, hash or sorted set is kept in, when it has one
    /// (Redis's OBJ_ENCODING_HT and the skiplist's dict).
    pub fn hash_table(&self) -> Option<&Table> {
        match self {
            Value::Set(Set::Table(t)) | Value::Hash(Hash::Table(t)) => Some(t),
            Value::ZSet(ZSet::Tree(t)) => Some(t.members_table()),
            _ => None,
        }
    }

    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(_) => "raw",
            Value::Hash(Hash::Packed(_)) => "listpack",
            Value::Hash(Hash::Table(_)) => "hashtable",
            Value::List(_) => "quicklist",
            Value::Set(Set::Ints(_)) => "intset",
            Value::Set(Set::Table(_)) => "hashtable",
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// Approximate heap bytes owned by the value.
    pub fn heap_size(&self) -> usize {
        std::mem::size_of::<Value>()
            + match self {
                Value::Str(s) => s.capacity(),
                Value::Hash(Hash::Packed(p)) => p.heap_size(),
                Value::Hash(Hash::Table(t)) | Value::Set(Set::Table(t)) => table_heap_size(t),
                Value::List(l) => l.heap_size(),
                Value::Set(Set::Ints(v)) => v.capacity() * 8,
                Value::ZSet(z) => z.heap_size(),
                Value::Stream(s) => s.heap_size(),
            }
    }
}

impl Value {
    /// MEMORY USAGE's estimate: [`Value::heap_size`] for compact
    /// encodings, and for tables and sorted-set trees the average of
    /// `samples` elements times the element count, as Redis's
    /// objectComputeSize samples (so the default 5 samples answer at once
    /// for a value of ten million elements).
    pub fn heap_size_sampled(&self, samples: usize) -> usize {
        let samples = samples.max(1);
        match self {
            Value::Hash(Hash::Table(t)) | Value::Set(Set::Table(t)) if t.len() > samples => {
                let (mut seen, mut bytes, mut cursor) = (0usize, 0usize, 0u64);
                loop {
                    cursor = t.scan(cursor, &mut |e| {
                        if seen < samples {
                            seen += 1;
                            bytes += e.heap_size();
                        }
                    });
                    if cursor == 0 || seen >= samples {
                        break;
                    }
                }
                std::mem::size_of::<Value>() + t.overhead_bytes() + (bytes / seen.max(1)) * t.len()
            }
            Value::ZSet(z) => std::mem::size_of::<Value>() + z.heap_size_sampled(samples),
            _ => self.heap_size(),
        }
    }
}

fn table_heap_size(t: &Table) -> usize {
    let mut n = t.overhead_bytes();
    t.for_each(&mut |e| n += e.heap_size());
    n
}

fn new_table() -> Table {
    Table::new(crate::util::random_u64())
}

/// The bytes of a field value or set member stored in a table entry.
pub fn entry_bytes(e: &Entry) -> &[u8] {
    match e.value() {
        ValueRef::Str(s) => s,
        ValueRef::Boxed(Value::Str(s)) => s,
        _ => b"",
    }
}

fn copy_table(t: &Table) -> Table {
    let mut out = new_table();
    t.for_each(&mut |e| out.insert_new(Entry::new(e.key(), NewValue::Str(entry_bytes(e)), false)));
    out
}

impl Clone for Value {
    fn clone(&self) -> Value {
        match self {
            Value::Str(s) => Value::Str(s.clone()),
            Value::Hash(Hash::Packed(p)) => Value::Hash(Hash::Packed(p.clone())),
            Value::Hash(Hash::Table(t)) => Value::Hash(Hash::Table(Box::new(copy_table(t)))),
            Value::List(l) => Value::List(l.clone()),
            Value::Set(Set::Ints(v)) => Value::Set(Set::Ints(v.clone())),
            Value::Set(Set::Table(t)) => Value::Set(Set::Table(Box::new(copy_table(t)))),
            Value::ZSet(z) => Value::ZSet(z.clone()),
            Value::Stream(s) => Value::Stream(s.clone()),
        }
    }
}

// ---------------------------------------------------------------- hash

/// A hash: field → value.
#[derive(Debug)]
pub enum Hash {
    Packed(Packed),
    Table(Box<Table>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Packed(Packed::new())
    }
}

impl Hash {
    /// A loader will add `bytes` of packed fields and values: room for
    /// them at once (nothing when not packed).
    pub fn reserve_packed(&mut self, bytes: usize) {
        if let Hash::Packed(p) = self {
            p.reserve_exact(bytes);
        }
    }

    /// Is it in its compact form (OBJECT ENCODING "listpack")?
    pub fn encoding_is_packed(&self) -> bool {
        matches!(self, Hash::Packed(_))
    }

    /// Allocations freed when it is dropped (see `lazyfree`).
    pub fn free_effort(&self) -> usize {
        match self {
            Hash::Packed(_) => 1,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Hash::Packed(p) => p.len() / 2,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Packed(p) => {
                let mut it = p.iter();
                while let Some(f) = it.next() {
                    let v = it.next()?;
                    if f == field {
                        return Some(v);
                    }
                }
                None
            }
            Hash::Table(t) => t.get(field).map(entry_bytes),
        }
    }

    /// Convert to a table when `incoming` more fields would exceed the limit.
    fn convert_if_needed(&mut self, incoming: usize, max_entries: usize) {
        if let Hash::Packed(p) = self {
            if p.len() / 2 + incoming > max_entries {
                self.convert_to_table();
            }
        }
    }

    fn convert_to_table(&mut self) {
        if let Hash::Packed(p) = self {
            let mut t = new_table();
            let mut it = p.iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                t.insert(Entry::new(f, NewValue::Str(v), false));
            }
            *self = Hash::Table(Box::new(t));
        }
    }

    /// Set a field; returns true when the field is new. `max_entries` and
    /// `max_value` are `hash-max-listpack-entries` / `-value`.
    pub fn set(
        &mut self,
        field: &[u8],
        value: &[u8],
        max_entries: usize,
        max_value: usize,
    ) -> bool {
        if field.len() > max_value || value.len() > max_value {
            self.convert_to_table();
        }
        if let Hash::Packed(p) = self {
            if let Some(i) = p.find_pair(field) {
                p.set(i + 1, value);
                // Redis's hashTypeSet checks the length after an update
                // too (the limit may have been lowered since).
                self.convert_if_needed(0, max_entries);
                return false;
            }
            self.convert_if_needed(1, max_entries);
        }
        match self {
            Hash::Packed(p) => {
                p.push_back(field);
                p.push_back(value);
                true
            }
            Hash::Table(t) => t
                .insert(Entry::new(field, NewValue::Str(value), false))
                .is_none(),
        }
    }

    /// Remove a field; returns whether it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Packed(p) => match p.find_pair(field) {
                Some(i) => {
                    p.remove_range(i, 2);
                    true
                }
                None => false,
            },
            Hash::Table(t) => t.remove(field).is_some(),
        }
    }

    /// Visit every (field, value) in the hash's order.
    pub fn for_each(&self, f: &mut dyn FnMut(&[u8], &[u8])) {
        match self {
            Hash::Packed(p) => {
                let mut it = p.iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    f(k, v);
                }
            }
            Hash::Table(t) => t.for_each(&mut |e| f(e.key(), entry_bytes(e))),
        }
    }

    /// A rehash in progress moves on a step (see [`Set::rehash_step`]).
    pub fn rehash_step(&mut self) {
        if let Hash::Table(t) = self {
            t.rehash_step();
        }
    }

    /// A uniformly random field, without materialising the hash (a rehash
    /// step first).
    pub fn random_field(&mut self, rand: &mut dyn FnMut() -> u64) -> Option<Vec<u8>> {
        self.rehash_step();
        match self {
            Hash::Packed(p) if !p.is_empty() => {
                let i = (rand() as usize) % (p.len() / 2);
                p.get(2 * i).map(|f| f.to_vec())
            }
            Hash::Packed(_) => None,
            Hash::Table(t) => t.fair_random_entry(rand).map(|e| e.key().to_vec()),
        }
    }

    pub fn pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(&mut |k, v| out.push((k.to_vec(), v.to_vec())));
        out
    }
}

// ---------------------------------------------------------------- set

/// A set of byte strings.
#[derive(Debug)]
pub enum Set {
    /// Sorted integers (Redis's intset).
    Ints(Vec<i64>),
    Table(Box<Table>),
}

impl Default for Set {
    fn default() -> Self {
        Set::Ints(Vec::new())
    }
}

impl Set {
    /// Allocations freed when it is dropped (see `lazyfree`).
    pub fn free_effort(&self) -> usize {
        match self {
            Set::Ints(_) => 1,
            Set::Table(t) => t.len(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Ints(v) => v.len(),
            Set::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Ints(v) => crate::util::parse_i64(m).is_some_and(|n| v.binary_search(&n).is_ok()),
            Set::Table(t) => t.get(m).is_some(),
        }
    }

    fn convert_to_table(&mut self) {
        if let Set::Ints(v) = self {
            let mut t = new_table();
            for n in v.iter() {
                t.insert_new(Entry::new(
                    n.to_string().as_bytes(),
                    NewValue::Str(b""),
                    false,
                ));
            }
            *self = Set::Table(Box::new(t));
        }
    }

    /// Add a member; true if it was new. `max_intset` is `set-max-intset-entries`.
    pub fn add(&mut self, m: &[u8], max_intset: usize) -> bool {
        if let Set::Ints(v) = self {
            match crate::util::parse_i64(m) {
                Some(n) => match v.binary_search(&n) {
                    Ok(_) => return false,
                    Err(pos) => {
                        if v.len() < max_intset {
                            v.insert(pos, n);
                            return true;
                        }
                        self.convert_to_table();
                    }
                },
                None => self.convert_to_table(),
            }
        }
        match self {
            Set::Table(t) => {
                if t.get(m).is_some() {
                    false
                } else {
                    t.insert_new(Entry::new(m, NewValue::Str(b""), false));
                    true
                }
            }
            Set::Ints(_) => unreachable!("converted above"),
        }
    }

    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Ints(v) => {
                match crate::util::parse_i64(m).and_then(|n| v.binary_search(&n).ok()) {
                    Some(pos) => {
                        v.remove(pos);
                        true
                    }
                    None => false,
                }
            }
            Set::Table(t) => t.remove(m).is_some(),
        }
    }

    /// All members (intsets in ascending order, as Redis returns them).
    pub fn members(&self) -> Vec<Vec<u8>> {
        match self {
            Set::Ints(v) => v.iter().map(|n| n.to_string().into_bytes()).collect(),
            Set::Table(t) => {
                let mut out = Vec::with_capacity(t.len());
                t.for_each(&mut |e| out.push(e.key().to_vec()));
                out
            }
        }
    }

    /// A rehash in progress moves on a step: random reads do it too, as
    /// Redis's dictGetRandomKey does, so a set only read still finishes.
    pub fn rehash_step(&mut self) {
        if let Set::Table(t) = self {
            t.rehash_step();
        }
    }

    /// A uniformly random member (a rehash step first).
    pub fn random(&mut self, rand: &mut dyn FnMut() -> u64) -> Option<Vec<u8>> {
        self.rehash_step();
        match self {
            Set::Ints(v) if !v.is_empty() => {
                Some(v[(rand() as usize) % v.len()].to_string().into_bytes())
            }
            Set::Ints(_) => None,
            Set::Table(t) => t.fair_random_entry(rand).map(|e| e.key().to_vec()),
        }
    }
}

#[cfg(test)]
mod str_tests {
    use super::*;

    #[test]
    fn long_strings_are_shared_and_copied_only_while_held() {
        let mut s = Str::new(vec![b'a'; 10]);
        assert!(s.shared().is_none());
        // Growing past the threshold makes it shared, without a copy held.
        s.make_mut(SHARED_STR_MIN).resize(SHARED_STR_MIN + 10, b'b');
        let held = std::sync::Arc::clone(s.shared().expect("shared once long"));
        // A writer while a reply holds it gets its own copy.
        s.make_mut(1).push(b'c');
        assert_eq!(held.len(), SHARED_STR_MIN + 10);
        assert_eq!(s.len(), SHARED_STR_MIN + 11);
        assert!(!std::sync::Arc::ptr_eq(&held, s.shared().unwrap()));
        // Unheld, it is written in place.
        drop(held);
        let before = s.shared().unwrap().as_ptr();
        s.make_mut(0)[0] = b'z';
        assert_eq!(s.shared().unwrap().as_ptr(), before);
    }
}
