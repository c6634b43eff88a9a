//! Streams as Redis 7.0 keeps them (Redis's t_stream.c): an ordered map
//! of master ID → listpack node of entries, each node starting with a
//! master entry whose fields later entries with the same fields leave out;
//! consumer groups with a pending entries list (PEL) shared between the
//! group and its consumers.
//!
//! Node layout (Redis's, so nodes go to and from RDB files unchanged):
//!
//! ```text
//! master entry: count | deleted | num-fields | field… | 0
//! entry:        flags | ms-diff | seq-diff | [num-fields | field… ] value… | lp-count
//! ```
//!
//! `flags` has DELETED and SAMEFIELDS (the fields are the master entry's,
//! only values follow); the ID is stored as its difference to the node's
//! master ID; `lp-count` is the number of elements before it in the entry.
//! Deleting marks the flag; a node whose entries are all deleted goes away.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::listpack::{self as lp, LpVal};

pub const FLAG_DELETED: i64 = 1;
pub const FLAG_SAMEFIELDS: i64 = 2;

/// Redis's STREAM_LISTPACK_MAX_SIZE: a node never grows past it.
const LISTPACK_MAX_SIZE: usize = 1 << 30;

/// A stream entry ID: milliseconds and sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (None past the last possible one).
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (None before 0-0).
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// The 16-byte big-endian form (RDB node keys and PEL entries).
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    pub fn from_be_bytes(b: &[u8]) -> Option<StreamId> {
        if b.len() != 16 {
            return None;
        }
        Some(StreamId::new(
            u64::from_be_bytes(b[..8].try_into().ok()?),
            u64::from_be_bytes(b[8..].try_into().ok()?),
        ))
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A pending entry: delivered to a consumer, not acknowledged yet.
#[derive(Clone, Debug)]
pub struct Nack {
    /// Unix time in ms of the last delivery.
    pub delivery_time: i64,
    pub delivery_count: u64,
    pub consumer: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
pub struct Consumer {
    /// Unix time in ms of its last interaction.
    pub seen_time: i64,
    /// Its pending entries (the group's PEL holds their details).
    pub pel: BTreeSet<StreamId>,
}

/// Redis's SCG_INVALID_ENTRIES_READ: the group's read counter is unknown.
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

#[derive(Clone, Debug, Default)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries read by the group (logical), or ENTRIES_READ_UNKNOWN.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

/// One entry read from a node.
pub struct RawEntry<'a> {
    pub id: StreamId,
    pub deleted: bool,
    /// Position of the flags element in the node (to delete it).
    pub flags_pos: usize,
    pub fields: Vec<(LpVal<'a>, LpVal<'a>)>,
}

/// The stream's nodes by master ID, in order: a deque (appends at the end
/// and trims at the front are O(1), lookups a binary search) grown in
/// small steps, so the index costs a stream less than Redis's radix tree.
#[derive(Clone, Debug, Default)]
pub struct NodeMap {
    v: VecDeque<(StreamId, Vec<u8>)>,
}

impl NodeMap {
    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// Index of the first node whose master ID is above `id`.
    fn upper(&self, id: &StreamId) -> usize {
        self.v.partition_point(|(k, _)| k <= id)
    }

    fn find(&self, id: &StreamId) -> Result<usize, usize> {
        self.v.binary_search_by(|(k, _)| k.cmp(id))
    }

    /// Add a node; the one it replaces, if its master ID was taken.
    pub fn insert(&mut self, id: StreamId, node: Vec<u8>) -> Option<Vec<u8>> {
        if self.v.len() == self.v.capacity() {
            self.v.reserve_exact((self.v.len() / 8).max(4));
        }
        if self.v.back().is_none_or(|(k, _)| *k < id) {
            self.v.push_back((id, node));
            return None;
        }
        match self.find(&id) {
            Ok(i) => Some(std::mem::replace(&mut self.v[i].1, node)),
            Err(i) => {
                self.v.insert(i, (id, node));
                None
            }
        }
    }

    pub fn remove(&mut self, id: &StreamId) -> Option<Vec<u8>> {
        let i = self.find(id).ok()?;
        if i == 0 {
            return self.v.pop_front().map(|(_, n)| n);
        }
        self.v.remove(i).map(|(_, n)| n)
    }

    pub fn get_mut(&mut self, id: &StreamId) -> Option<&mut Vec<u8>> {
        let i = self.find(id).ok()?;
        Some(&mut self.v[i].1)
    }

    pub fn first_key(&self) -> Option<StreamId> {
        self.v.front().map(|(k, _)| *k)
    }

    pub fn last(&self) -> Option<(&StreamId, &Vec<u8>)> {
        self.v.back().map(|(k, n)| (k, n))
    }

    pub fn last_mut(&mut self) -> Option<(&StreamId, &mut Vec<u8>)> {
        self.v.back_mut().map(|(k, n)| (&*k, n))
    }

    /// The node that would hold `id`: the last one starting at or before it.
    pub fn holding(&self, id: &StreamId) -> Option<(&StreamId, &Vec<u8>)> {
        let i = self.upper(id);
        (i > 0).then(|| {
            let (k, n) = &self.v[i - 1];
            (k, n)
        })
    }

    /// Nodes with master IDs in `[from, to]`.
    pub fn range(
        &self,
        from: StreamId,
        to: StreamId,
    ) -> impl DoubleEndedIterator<Item = (&StreamId, &Vec<u8>)> {
        let a = self.v.partition_point(|(k, _)| *k < from);
        let b = self.upper(&to).max(a);
        self.v.range(a..b).map(|(k, n)| (k, n))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&StreamId, &Vec<u8>)> {
        self.v.iter().map(|(k, n)| (k, n))
    }

    pub fn keys(&self) -> impl Iterator<Item = &StreamId> {
        self.v.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.v.iter().map(|(_, n)| n)
    }

    /// Bytes the index itself takes.
    pub fn overhead(&self) -> usize {
        self.v.capacity() * std::mem::size_of::<(StreamId, Vec<u8>)>()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Master ID → node.
    pub nodes: NodeMap,
    /// Live entries.
    pub length: u64,
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty).
    pub first_id: StreamId,
    pub max_deleted_entry_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

/// Node size limits (`stream-node-max-bytes`, `stream-node-max-entries`).
#[derive(Clone, Copy)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: i64,
}

/// The entries of one node, in order (deleted ones included).
pub fn node_entries(master: StreamId, node: &[u8]) -> Vec<RawEntry<'_>> {
    let mut out = Vec::new();
    let mut p = lp::first(node);
    let count = lp::get(node, p).int();
    p = lp::next(node, p);
    let deleted = lp::get(node, p).int();
    p = lp::next(node, p);
    let nfields = lp::get(node, p).int().max(0) as usize;
    p = lp::next(node, p);
    let mut master_fields = Vec::with_capacity(nfields);
    for _ in 0..nfields {
        master_fields.push(lp::get(node, p));
        p = lp::next(node, p);
    }
    p = lp::next(node, p); // the master entry's terminator
    out.reserve((count + deleted).max(0) as usize);
    while !lp::at_end(node, p) {
        let flags_pos = p;
        let flags = lp::get(node, p).int();
        p = lp::next(node, p);
        let ms = master.ms.wrapping_add(lp::get(node, p).int() as u64);
        p = lp::next(node, p);
        let seq = master.seq.wrapping_add(lp::get(node, p).int() as u64);
        p = lp::next(node, p);
        let mut fields = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master_fields {
                fields.push((*f, lp::get(node, p)));
                p = lp::next(node, p);
            }
        } else {
            let n = lp::get(node, p).int().max(0) as usize;
            p = lp::next(node, p);
            for _ in 0..n {
                let f = lp::get(node, p);
                p = lp::next(node, p);
                fields.push((f, lp::get(node, p)));
                p = lp::next(node, p);
            }
        }
        p = lp::next(node, p); // lp-count
        out.push(RawEntry {
            id: StreamId::new(ms, seq),
            deleted: flags & FLAG_DELETED != 0,
            flags_pos,
            fields,
        });
    }
    out
}

/// (live count, deleted count) of a node's master entry.
fn node_counts(node: &[u8]) -> (i64, i64) {
    let p = lp::first(node);
    let count = lp::get(node, p).int();
    let deleted = lp::get(node, lp::next(node, p)).int();
    (count, deleted)
}

fn set_node_counts(node: &mut Vec<u8>, count: i64, deleted: i64) {
    let p = lp::first(node);
    lp::replace_int(node, p, count);
    let p = lp::next(node, p);
    lp::replace_int(node, p, deleted);
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Append an entry with `id` (already checked to be above `last_id`).
    pub fn append(&mut self, id: StreamId, fields: &[(&[u8], &[u8])], limits: NodeLimits) {
        let total: usize = fields.iter().map(|(f, v)| f.len() + v.len()).sum();
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            limits.max_bytes
        };
        let mut use_last = false;
        if let Some((_, node)) = self.nodes.last() {
            use_last = lp::bytes(node) + total < max_bytes;
            if use_last && limits.max_entries > 0 {
                let (count, deleted) = node_counts(node);
                if count + deleted >= limits.max_entries {
                    use_last = false;
                }
            }
        }
        if !use_last {
            // The last node is full: it never grows again, so it gives
            // back the slack its growth left (as Redis's exact reallocs).
            if let Some((_, prev)) = self.nodes.last_mut() {
                prev.shrink_to_fit();
            }
            // A new node: this entry's fields are its master fields.
            let mut node = lp::new();
            lp::push_int(&mut node, 1);
            lp::push_int(&mut node, 0);
            lp::push_int(&mut node, fields.len() as i64);
            for (f, _) in fields {
                lp::push_str(&mut node, f);
            }
            lp::push_int(&mut node, 0);
            push_entry(&mut node, id, id, fields, true);
            self.nodes.insert(id, node);
        } else {
            let (&master, node) = self.nodes.last_mut().expect("last node");
            let same = same_fields(node, fields);
            let (count, deleted) = node_counts(node);
            push_entry(node, master, id, fields, same);
            set_node_counts(node, count + 1, deleted);
        }
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
    }

    /// Visit live entries with IDs in `[start, end]`, forward or backward,
    /// until `f` returns false.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) {
        if start > end {
            return;
        }
        // The node holding `start` begins at or before it.
        let from = self.nodes.holding(&start).map(|(k, _)| *k).unwrap_or(start);
        let nodes = self.nodes.range(from, end);
        let mut visit = |master: &StreamId, node: &Vec<u8>| -> bool {
            let entries = node_entries(*master, node);
            let mut go = |e: &RawEntry| -> Option<bool> {
                if e.deleted || e.id < start || e.id > end {
                    return None;
                }
                Some(f(e))
            };
            if rev {
                for e in entries.iter().rev() {
                    if go(e) == Some(false) {
                        return false;
                    }
                }
            } else {
                for e in &entries {
                    if go(e) == Some(false) {
                        return false;
                    }
                }
            }
            true
        };
        if rev {
            for (m, n) in nodes.rev() {
                if !visit(m, n) {
                    return;
                }
            }
        } else {
            for (m, n) in nodes {
                if !visit(m, n) {
                    return;
                }
            }
        }
    }

    /// The first (or last) live entry's ID.
    pub fn edge_id(&self, first: bool) -> Option<StreamId> {
        let mut found = None;
        let (s, e) = (StreamId::MIN, StreamId::MAX);
        self.range(s, e, !first, &mut |en| {
            found = Some(en.id);
            false
        });
        found
    }

    /// Is there a live entry above `id` (what XREAD and XREADGROUP serve)?
    /// Decodes nothing when `id` is at or past the last ID (an idle poll).
    pub fn has_entries_after(&self, id: StreamId) -> bool {
        if self.length == 0 || id >= self.last_id {
            return false;
        }
        let Some(start) = id.incr() else {
            return false;
        };
        let mut found = false;
        self.range(start, StreamId::MAX, false, &mut |_| {
            found = true;
            false
        });
        found
    }

    /// The fields of the live entry `id`, if it exists.
    pub fn lookup(&self, id: StreamId) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = None;
        self.range(id, id, false, &mut |e| {
            out = Some(
                e.fields
                    .iter()
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect(),
            );
            false
        });
        out
    }

    /// Delete the live entry `id`; whether it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, _)) = self.nodes.holding(&id) else {
            return false;
        };
        let node = self.nodes.get_mut(&master).expect("node");
        let pos = node_entries(master, node)
            .iter()
            .find(|e| e.id == id && !e.deleted)
            .map(|e| e.flags_pos);
        let Some(pos) = pos else {
            return false;
        };
        let flags = lp::get(node, pos).int();
        lp::replace_int(node, pos, flags | FLAG_DELETED);
        let (count, deleted) = node_counts(node);
        if count - 1 == 0 {
            self.nodes.remove(&master);
        } else {
            set_node_counts(node, count - 1, deleted + 1);
        }
        self.length -= 1;
        if id == self.first_id {
            self.first_id = self.edge_id(true).unwrap_or(StreamId::MIN);
        }
        if id > self.max_deleted_entry_id {
            self.max_deleted_entry_id = id;
        }
        true
    }

    /// Redis's streamTrim: by MAXLEN (`maxlen`) or MINID (`minid`), whole
    /// nodes first; with `approx` only whole nodes; at most `limit` entries
    /// (0: no limit). Returns the number of entries removed.
    pub fn trim(
        &mut self,
        maxlen: Option<u64>,
        minid: Option<StreamId>,
        approx: bool,
        limit: i64,
    ) -> i64 {
        if maxlen.is_none() && minid.is_none() {
            return 0;
        }
        let mut deleted: i64 = 0;
        // From the front: each turn removes the first node or is the last.
        while let Some(master) = self.nodes.first_key() {
            if let Some(m) = maxlen {
                if self.length <= m {
                    break;
                }
            }
            let node = self.nodes.get_mut(&master).expect("node");
            let (entries, marked) = node_counts(node);
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove = match (maxlen, minid) {
                (Some(m), _) => self.length.saturating_sub(entries as u64) >= m,
                (None, Some(min)) => {
                    let last = node_entries(master, node).last().map(|e| e.id);
                    last.is_some_and(|l| l < min)
                }
                _ => false,
            };
            if remove {
                self.nodes.remove(&master);
                self.length -= entries as u64;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let mut marks = Vec::new();
            let mut length = self.length;
            for e in node_entries(master, node) {
                let stop = match (maxlen, minid) {
                    (Some(m), _) => length <= m,
                    (None, Some(min)) => e.id >= min,
                    _ => true,
                };
                if stop {
                    break;
                }
                if !e.deleted {
                    marks.push(e.flags_pos);
                    length -= 1;
                }
            }
            // Marking never changes an element's size (flags stay 7-bit).
            for &pos in &marks {
                let flags = lp::get(node, pos).int();
                lp::replace_int(node, pos, flags | FLAG_DELETED);
            }
            let n = marks.len() as i64;
            set_node_counts(node, entries - n, marked + n);
            self.length = length;
            deleted += n;
            break;
        }
        self.first_id = if self.length == 0 {
            StreamId::MIN
        } else {
            self.edge_id(true).unwrap_or(StreamId::MIN)
        };
        deleted
    }

    /// Redis's streamRangeHasTombstones: may a deleted entry lie between
    /// `start` and `end` (inclusive)?
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_entry_id == StreamId::MIN {
            return false;
        }
        if self.first_id > self.max_deleted_entry_id {
            return false;
        }
        start <= self.max_deleted_entry_id && end >= self.max_deleted_entry_id
    }

    /// Redis's streamEstimateDistanceFromFirstEverEntry: the logical read
    /// counter of `id`, or None when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted_entry_id == StreamId::MIN || self.max_deleted_entry_id < self.first_id {
            // No fragmentation ahead: the position of `id` is computable.
            if id < self.first_id {
                return Some(self.entries_added - self.length);
            }
            if id == self.first_id {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// The group's lag (XINFO GROUPS), None when it cannot be known.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_UNKNOWN
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        self.estimate_distance(g.last_id)
            .map(|read| self.entries_added as i64 - read as i64)
    }

    /// Heap bytes (approximate).
    pub fn heap_size(&self) -> usize {
        let nodes: usize =
            self.nodes.values().map(|n| n.capacity()).sum::<usize>() + self.nodes.overhead();
        let groups: usize = self
            .groups
            .values()
            .map(|g| 64 + g.pel.len() * 64 + g.consumers.len() * 64)
            .sum();
        nodes + groups
    }

    /// Allocations freed when dropped.
    pub fn free_effort(&self) -> usize {
        self.nodes.len() + self.groups.values().map(|g| g.pel.len() + 1).sum::<usize>()
    }

    /// Check the nodes of a stream read from outside (an RDB file): every
    /// node walks as Redis's layout says with counts that add up, IDs
    /// ascend up to the last ID, and the stream's length matches.
    pub fn validate_nodes(&self) -> Result<(), String> {
        let mut live = 0u64;
        let mut prev: Option<StreamId> = None;
        for (master, node) in self.nodes.iter() {
            if !lp::validate(node) {
                return Err("stream node listpack integrity check failed".into());
            }
            let (count, deleted) = check_node(*master, node)?;
            live += count as u64;
            let _ = deleted;
            for e in node_entries(*master, node) {
                if prev.is_some_and(|p| e.id <= p) || e.id > self.last_id {
                    return Err("stream entries out of order".into());
                }
                prev = Some(e.id);
            }
        }
        if live != self.length {
            return Err("stream length doesn't match its nodes".into());
        }
        Ok(())
    }

    /// Check the groups of a stream read from outside: each pending entry
    /// owned by exactly one consumer that lists it, and the reverse.
    pub fn validate_groups(&self) -> Result<(), String> {
        for g in self.groups.values() {
            let owned: usize = g.consumers.values().map(|c| c.pel.len()).sum();
            if owned != g.pel.len() {
                return Err("stream PEL entries and consumers' PELs differ".into());
            }
            for (id, nack) in &g.pel {
                let owner = g.consumers.get(&nack.consumer);
                if !owner.is_some_and(|c| c.pel.contains(id)) {
                    return Err("stream PEL entry without its consumer".into());
                }
            }
            for c in g.consumers.values() {
                if c.pel.iter().any(|id| !g.pel.contains_key(id)) {
                    return Err("stream consumer PEL entry missing from the group".into());
                }
            }
        }
        Ok(())
    }
}

/// Walk one node's layout strictly (Redis's streamValidateListpackIntegrity).
fn check_node(master: StreamId, node: &[u8]) -> Result<(i64, i64), String> {
    let bad = || Err("stream node layout is invalid".to_string());
    let int_at = |p: usize| -> Option<i64> {
        if lp::at_end(node, p) {
            return None;
        }
        match lp::get(node, p) {
            LpVal::Int(v) => Some(v),
            LpVal::Str(_) => None,
        }
    };
    let mut p = lp::first(node);
    let (Some(count), Some(deleted)) = (int_at(p), {
        if lp::at_end(node, p) {
            None
        } else {
            int_at(lp::next(node, p))
        }
    }) else {
        return bad();
    };
    if count < 0 || deleted < 0 {
        return bad();
    }
    p = lp::next(node, lp::next(node, p));
    let Some(nfields) = int_at(p) else {
        return bad();
    };
    if nfields < 0 {
        return bad();
    }
    p = lp::next(node, p);
    for _ in 0..nfields {
        if lp::at_end(node, p) {
            return bad();
        }
        p = lp::next(node, p);
    }
    if int_at(p) != Some(0) {
        return bad();
    }
    p = lp::next(node, p);
    let (mut live, mut dead) = (0i64, 0i64);
    while !lp::at_end(node, p) {
        let mut elements = 0i64;
        let Some(flags) = int_at(p) else {
            return bad();
        };
        p = lp::next(node, p);
        let (Some(msd), Some(seqd)) = (int_at(p), {
            if lp::at_end(node, p) {
                None
            } else {
                int_at(lp::next(node, p))
            }
        }) else {
            return bad();
        };
        let _ = (master.ms.wrapping_add(msd as u64), seqd);
        p = lp::next(node, lp::next(node, p));
        elements += 3;
        let values = if flags & FLAG_SAMEFIELDS != 0 {
            nfields
        } else {
            let Some(n) = int_at(p) else {
                return bad();
            };
            if n < 0 {
                return bad();
            }
            p = lp::next(node, p);
            elements += 1;
            n.checked_mul(2).ok_or("stream node layout is invalid")?
        };
        for _ in 0..values {
            if lp::at_end(node, p) {
                return bad();
            }
            p = lp::next(node, p);
            elements += 1;
        }
        if int_at(p) != Some(elements) {
            return bad();
        }
        p = lp::next(node, p);
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
        }
    }
    if live != count || dead != deleted || live == 0 && dead == 0 {
        return bad();
    }
    Ok((count, deleted))
}

fn same_fields(node: &[u8], fields: &[(&[u8], &[u8])]) -> bool {
    let mut p = lp::next(node, lp::next(node, lp::first(node)));
    let n = lp::get(node, p).int();
    if n != fields.len() as i64 {
        return false;
    }
    for (f, _) in fields {
        p = lp::next(node, p);
        if !lp::get(node, p).eq_bytes(f) {
            return false;
        }
    }
    true
}

fn push_entry(
    node: &mut Vec<u8>,
    master: StreamId,
    id: StreamId,
    fields: &[(&[u8], &[u8])],
    same: bool,
) {
    let flags = if same { FLAG_SAMEFIELDS } else { 0 };
    lp::push_int(node, flags);
    lp::push_int(node, id.ms.wrapping_sub(master.ms) as i64);
    lp::push_int(node, id.seq.wrapping_sub(master.seq) as i64);
    if same {
        for (_, v) in fields {
            lp::push_str(node, v);
        }
    } else {
        lp::push_int(node, fields.len() as i64);
        for (f, v) in fields {
            lp::push_str(node, f);
            lp::push_str(node, v);
        }
    }
    let mut count = fields.len() as i64 + 3;
    if !same {
        count += fields.len() as i64 + 1;
    }
    lp::push_int(node, count);
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: NodeLimits = NodeLimits {
        max_bytes: 4096,
        max_entries: 4,
    };

    fn ids(s: &Stream, rev: bool) -> Vec<u64> {
        let mut out = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, rev, &mut |e| {
            out.push(e.id.ms);
            true
        });
        out
    }

    #[test]
    fn entries_append_delete_and_trim_across_nodes() {
        let mut s = Stream::new();
        for i in 1..=10u64 {
            let v = i.to_string();
            let fields: Vec<(&[u8], &[u8])> = if i % 3 == 0 {
                vec![(b"other", v.as_bytes()), (b"x", b"y")]
            } else {
                vec![(b"f", v.as_bytes())]
            };
            s.append(StreamId::new(i, 0), &fields, LIMITS);
        }
        assert_eq!(s.nodes.len(), 3);
        assert!(s.validate_nodes().is_ok());
        assert_eq!(ids(&s, false), (1..=10).collect::<Vec<_>>());
        assert_eq!(ids(&s, true), (1..=10).rev().collect::<Vec<_>>());
        assert_eq!(
            s.lookup(StreamId::new(3, 0)).unwrap(),
            vec![
                (b"other".to_vec(), b"3".to_vec()),
                (b"x".to_vec(), b"y".to_vec())
            ]
        );
        assert!(s.delete(StreamId::new(1, 0)));
        assert!(!s.delete(StreamId::new(1, 0)));
        assert_eq!(s.first_id, StreamId::new(2, 0));
        assert_eq!(s.length, 9);
        assert!(s.validate_nodes().is_ok());
        // Approximate trimming removes whole nodes only.
        assert_eq!(s.trim(Some(5), None, true, 0), 3);
        assert_eq!(ids(&s, false), (5..=10).collect::<Vec<_>>());
        // Exact trimming marks entries inside a node.
        assert_eq!(s.trim(Some(3), None, false, 0), 3);
        assert_eq!(ids(&s, false), vec![8, 9, 10]);
        assert_eq!(s.trim(None, Some(StreamId::new(10, 0)), false, 0), 2);
        assert_eq!(ids(&s, false), vec![10]);
        assert!(s.validate_nodes().is_ok());
    }
}
