//! Lists: Redis 7.0's quicklist (quicklist.c), node for node.
//!
//! A list is a deque of nodes. A node is either *packed* — a listpack
//! ([`super::listpack`], Redis's byte format) of elements, filled up to
//! `list-max-listpack-size` (negative: a byte size of 4 KB … 64 KB; positive:
//! an element count, never past 8 KB) — or *plain*: one element of at least
//! the packed threshold (1 GB; `DEBUG QUICKLIST-PACKED-THRESHOLD` lowers
//! it), stored as it is.
//!
//! With `list-compress-depth` N > 0 every node but the N at each end is
//! kept LZF-compressed, when that is worth it (a node of at least 48 bytes
//! that compression shrinks by at least 8). A node is decompressed to be
//! changed and compressed again afterwards, as Redis does; to be read, it
//! is read from a decompressed copy, with the same effect on the list as
//! Redis's read (see [`List::index_with`]) at half the cost.
//!
//! Why a port and not a design of our own: which elements share a node,
//! and which nodes are compressed, show in DEBUG OBJECT, in MEMORY USAGE and
//! in the bytes of DUMP and of RDB files (a node is saved as it is, LZF and
//! all). Following quicklist.c step by step — the same splits, merges and
//! (re)compressions in the same order, including the iterator that
//! decompresses a node "for use" and recompresses it when it moves on —
//! gives the same nodes as Redis for the same commands.
//!
//! Like Redis's, a list's fill and depth are fixed when it is created (from
//! the configuration then); changing the configuration affects new lists.
//!
//! Nodes are held in a `VecDeque` and named by index where Redis holds
//! pointers; every step that inserts or removes a node says how the indices
//! it still holds move.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::listpack::{self as lp, Where};
use crate::util::lzf;

/// Byte sizes of a node for fill -1 … -5.
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// A count-limited node (positive fill) never grows past this many bytes.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// What an element adds to a node beyond its length, estimated high.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// Nodes smaller than this are not worth compressing.
const MIN_COMPRESS_BYTES: usize = 48;
/// Compression must save at least this many bytes to be kept.
const MIN_COMPRESS_IMPROVE: usize = 8;
/// The largest fill (Redis keeps it in 16 signed bits) and the smallest.
const FILL_MAX: i64 = (1 << 15) - 1;
const FILL_MIN: i64 = -5;
/// The largest compress depth (16 bits).
const COMPRESS_MAX: i64 = (1 << 16) - 1;
/// A quicklist's fill when nothing sets it (SORT ... STORE's lists).
const DEFAULT_FILL: i32 = -2;
/// The default packed threshold: elements this long get a plain node.
const DEFAULT_PACKED_THRESHOLD: usize = 1 << 30;
/// The threshold can't be set above (or even slightly below) 4 GB.
const MAX_PACKED_THRESHOLD: u64 = (1 << 32) - (1 << 20);
/// Bytes of a listpack's header and end marker, which a merge saves.
const LP_OVERHEAD: usize = 11;
/// A listpack's end marker.
const LP_EOF: u8 = 0xFF;

/// Elements at least this long are stored in plain nodes. One value for the
/// whole server, as in Redis (a `static` in quicklist.c); only DEBUG
/// QUICKLIST-PACKED-THRESHOLD changes it.
static PACKED_THRESHOLD: AtomicUsize = AtomicUsize::new(DEFAULT_PACKED_THRESHOLD);

/// Set the packed threshold (0 restores the default); false when `size` is
/// out of range (Redis's quicklistisSetPackedThreshold).
pub fn set_packed_threshold(size: u64) -> bool {
    if size > MAX_PACKED_THRESHOLD {
        return false;
    }
    let size = if size == 0 {
        DEFAULT_PACKED_THRESHOLD
    } else {
        size as usize
    };
    PACKED_THRESHOLD.store(size, Ordering::Relaxed);
    true
}

fn is_large_element(size: usize) -> bool {
    size >= PACKED_THRESHOLD.load(Ordering::Relaxed)
}

/// What a node holds (Redis's node container; the numbers are the RDB's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// One element, as it is.
    Plain = 1,
    /// A listpack of elements.
    Packed = 2,
}

#[derive(Clone, Debug)]
struct Node {
    /// A listpack, or a plain node's element; LZF-compressed when
    /// `compressed`.
    entry: Vec<u8>,
    /// Bytes of the uncompressed `entry`.
    sz: usize,
    /// Elements in the node.
    count: u32,
    container: Container,
    /// The node is LZF-compressed (Redis's `QUICKLIST_NODE_ENCODING_LZF`).
    compressed: bool,
    /// Decompressed for a moment: compress it again when done.
    recompress: bool,
    /// Don't compress until an operation in progress is over.
    dont_compress: bool,
}

impl Node {
    fn packed(entry: Vec<u8>) -> Node {
        Node {
            sz: entry.len(),
            count: lp::len(&entry) as u32,
            entry,
            container: Container::Packed,
            compressed: false,
            recompress: false,
            dont_compress: false,
        }
    }

    fn plain(value: &[u8]) -> Node {
        Node::plain_owned(value.to_vec())
    }

    fn plain_owned(value: Vec<u8>) -> Node {
        Node {
            sz: value.len(),
            count: 1,
            entry: value,
            container: Container::Plain,
            compressed: false,
            recompress: false,
            dont_compress: false,
        }
    }

    fn is_plain(&self) -> bool {
        self.container == Container::Plain
    }

    fn update_sz(&mut self) {
        self.sz = self.entry.len();
    }

    /// The uncompressed entry (borrowed, or decompressed into a copy).
    fn raw(&self) -> Cow<'_, [u8]> {
        if self.compressed {
            // A compressed node was compressed here from bytes of this
            // size, so it decompresses; an empty entry is the worst case.
            Cow::Owned(lzf::decompress(&self.entry, self.sz).unwrap_or_default())
        } else {
            Cow::Borrowed(&self.entry)
        }
    }
}

/// The direction an iterator moves in (Redis's `AL_START_HEAD`: from the
/// head towards the tail; `AL_START_TAIL`: from the tail towards the head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    FromHead,
    FromTail,
}

/// The end of a list to push to or pop from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

/// An element read from a list: a string, or an integer a listpack holds
/// as one (a listpack's own value, borrowed from the node being read).
pub use super::listpack::LpVal as Element;

/// A position in a list while iterating (Redis's quicklistIter).
struct Iter {
    /// The node, `None` past either end (or after an insertion).
    current: Option<usize>,
    /// The element's byte position in the node's listpack (0 in a plain
    /// node); `None` before the node is entered.
    zi: Option<usize>,
    /// The element's index in its node (negative: from the node's tail).
    offset: i64,
    direction: Direction,
}

/// The element an iterator is at (Redis's quicklistEntry).
#[derive(Clone, Copy)]
struct Entry {
    node: usize,
    zi: usize,
    offset: i64,
}

/// A list (Redis's quicklist).
#[derive(Clone, Debug)]
pub struct List {
    nodes: VecDeque<Node>,
    /// Elements in all nodes.
    count: usize,
    /// `list-max-listpack-size` when the list was made (-5 ..= 32767).
    fill: i32,
    /// `list-compress-depth` when the list was made (0 ..= 65535).
    compress: u32,
}

impl Default for List {
    /// A list with Redis's defaults for a quicklist that nothing configured
    /// (fill -2, no compression), as SORT ... STORE makes.
    fn default() -> List {
        List {
            nodes: VecDeque::new(),
            count: 0,
            fill: DEFAULT_FILL,
            compress: 0,
        }
    }
}

/// What DEBUG OBJECT shows of a list.
pub struct ListShape {
    pub nodes: usize,
    pub count: usize,
    pub fill: i32,
    pub compress: u32,
    /// Sum of the nodes' uncompressed sizes.
    pub uncompressed_size: usize,
}

fn meets_optimization_requirement(sz: usize, fill: i32) -> bool {
    if fill >= 0 {
        return false;
    }
    match OPTIMIZATION_LEVEL.get((-(fill as i64) - 1) as usize) {
        Some(&limit) => sz <= limit,
        None => false,
    }
}

impl List {
    /// A list with `fill` (`list-max-listpack-size`) and `compress`
    /// (`list-compress-depth`), clamped as Redis's quicklistSetOptions does.
    pub fn new(fill: i64, compress: i64) -> List {
        List {
            nodes: VecDeque::new(),
            count: 0,
            fill: fill.clamp(FILL_MIN, FILL_MAX) as i32,
            compress: compress.clamp(0, COMPRESS_MAX) as u32,
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Allocations freed when it is dropped: one per node (see `lazyfree`).
    pub fn free_effort(&self) -> usize {
        self.nodes.len()
    }

    /// Heap bytes: the nodes (compressed ones at their compressed size).
    pub fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.nodes.iter().map(|n| n.entry.capacity()).sum::<usize>()
    }

    pub fn shape(&self) -> ListShape {
        ListShape {
            nodes: self.nodes.len(),
            count: self.count,
            fill: self.fill,
            compress: self.compress,
            uncompressed_size: self.nodes.iter().map(|n| n.sz).sum(),
        }
    }

    // ------------------------------------------------------ compression

    /// Redis's __quicklistCompressNode: compress node `i` if that is worth
    /// it. Never the head or the tail.
    fn compress_node_now(&mut self, i: usize) -> bool {
        let last = self.nodes.len() - 1;
        let node = &mut self.nodes[i];
        if node.dont_compress {
            return false;
        }
        debug_assert!(i != 0 && i != last, "compressing an end node");
        if i == 0 || i == last {
            return false;
        }
        node.recompress = false;
        if node.sz < MIN_COMPRESS_BYTES {
            return false;
        }
        match lzf::compress(&node.entry, node.sz) {
            Some(c) if c.len() + MIN_COMPRESS_IMPROVE < node.sz => {
                let mut c = c;
                c.shrink_to_fit();
                node.entry = c;
                node.compressed = true;
                true
            }
            _ => false,
        }
    }

    /// quicklistCompressNode: compress node `i` unless it already is.
    fn compress_node(&mut self, i: usize) {
        if !self.nodes[i].compressed {
            self.compress_node_now(i);
        }
    }

    /// quicklistDecompressNode.
    fn decompress_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if !node.compressed {
            return;
        }
        node.recompress = false;
        // Our own compression of `sz` bytes: it decompresses.
        if let Some(raw) = lzf::decompress(&node.entry, node.sz) {
            node.entry = raw;
            node.compressed = false;
        }
    }

    /// quicklistDecompressNodeForUse: decompress node `i`, remembering to
    /// compress it again.
    fn decompress_for_use(&mut self, i: usize) {
        if self.nodes[i].compressed {
            self.decompress_node(i);
            self.nodes[i].recompress = true;
        }
    }

    /// Redis's __quicklistCompress: the `compress` nodes at each end are
    /// decompressed, the next one in from each end is compressed, and so is
    /// `node` if it is beyond them.
    fn compress_around(&mut self, node: Option<usize>) {
        let len = self.nodes.len();
        if len == 0 || self.compress == 0 || len < self.compress as usize * 2 {
            return;
        }
        let (mut forward, mut reverse) = (0usize, len - 1);
        let mut in_depth = false;
        for _ in 0..self.compress {
            self.decompress_node(forward);
            self.decompress_node(reverse);
            if node == Some(forward) || node == Some(reverse) {
                in_depth = true;
            }
            // The two ends met: everything is within the depth.
            if forward == reverse || forward + 1 == reverse {
                return;
            }
            forward += 1;
            reverse -= 1;
        }
        if !in_depth {
            if let Some(n) = node {
                self.compress_node(n);
            }
        }
        self.compress_node(forward);
        self.compress_node(reverse);
    }

    /// The quicklistCompress macro: a node decompressed for use is just
    /// compressed again; otherwise the whole depth is rechecked around it.
    fn compress(&mut self, i: usize) {
        if self.nodes[i].recompress {
            self.compress_node(i);
        } else {
            self.compress_around(Some(i));
        }
    }

    /// quicklistRecompressOnly.
    fn recompress_only(&mut self, i: usize) {
        if self.nodes[i].recompress {
            self.compress_node(i);
        }
    }

    // ------------------------------------------------------ nodes

    /// Redis's __quicklistInsertNode: put `new` before or after node `old`
    /// (the list's only node when `old` is `None`). Returns where `new` is;
    /// `old` moves up by one when `new` goes before it.
    fn insert_node(&mut self, old: Option<usize>, new: Node, after: bool) -> usize {
        let (at, old) = match old {
            None => (self.nodes.len(), None),
            Some(o) if after => (o + 1, Some(o)),
            Some(o) => (o, Some(o + 1)),
        };
        self.nodes.insert(at, new);
        if let Some(o) = old {
            self.compress(o);
        }
        self.compress(at);
        at
    }

    /// Redis's __quicklistDelNode: remove node `i` (its elements leave the
    /// count) and recheck the depth. Nodes after it move down by one.
    fn del_node(&mut self, i: usize) {
        if let Some(node) = self.nodes.remove(i) {
            self.count -= node.count as usize;
        }
        self.compress_around(None);
    }

    /// quicklistDelIndex: remove the element at `p` of node `i`. Returns
    /// whether the node went with it; otherwise `p` is the next element's
    /// position (`None` past the node's end).
    fn del_index(&mut self, i: usize, p: &mut Option<usize>) -> bool {
        if self.nodes[i].is_plain() {
            self.del_node(i);
            return true;
        }
        let node = &mut self.nodes[i];
        if let Some(pos) = *p {
            *p = lp::delete(&mut node.entry, pos);
        }
        node.count -= 1;
        let gone = if node.count == 0 {
            self.del_node(i);
            true
        } else {
            self.nodes[i].update_sz();
            false
        };
        self.count -= 1;
        gone
    }

    /// _quicklistNodeAllowInsert: may an element of `sz` bytes join node `i`?
    fn allow_insert(&self, i: Option<usize>, sz: usize) -> bool {
        let Some(node) = i.and_then(|i| self.nodes.get(i)) else {
            return false;
        };
        if node.is_plain() || is_large_element(sz) {
            return false;
        }
        let new_sz = node.sz + sz + SIZE_ESTIMATE_OVERHEAD;
        if meets_optimization_requirement(new_sz, self.fill) {
            true
        } else if new_sz > SIZE_SAFETY_LIMIT {
            false
        } else {
            (node.count as i64) < self.fill as i64
        }
    }

    /// _quicklistNodeAllowMerge for nodes `a` and `b`.
    fn allow_merge(&self, a: Option<usize>, b: Option<usize>) -> bool {
        let (Some(a), Some(b)) = (
            a.and_then(|i| self.nodes.get(i)),
            b.and_then(|i| self.nodes.get(i)),
        ) else {
            return false;
        };
        if a.is_plain() || b.is_plain() {
            return false;
        }
        let merge_sz = (a.sz + b.sz).saturating_sub(LP_OVERHEAD);
        if meets_optimization_requirement(merge_sz, self.fill) {
            true
        } else if merge_sz > SIZE_SAFETY_LIMIT {
            false
        } else {
            (a.count as i64 + b.count as i64) <= self.fill as i64
        }
    }

    /// A new packed node holding `value`.
    fn new_packed_node(value: &[u8]) -> Node {
        let mut entry = lp::new();
        lp::prepend(&mut entry, value);
        Node::packed(entry)
    }

    /// __quicklistInsertPlainNode.
    fn insert_plain_node(&mut self, old: Option<usize>, value: &[u8], after: bool) {
        self.insert_node(old, Node::plain(value), after);
        self.count += 1;
    }

    fn head(&self) -> Option<usize> {
        (!self.nodes.is_empty()).then_some(0)
    }

    fn tail(&self) -> Option<usize> {
        self.nodes.len().checked_sub(1)
    }

    // ------------------------------------------------------ push and pop

    /// quicklistPushHead / quicklistPushTail.
    pub fn push(&mut self, value: &[u8], end: End) {
        let sz = value.len();
        let target = match end {
            End::Head => self.head(),
            End::Tail => self.tail(),
        };
        let after = end == End::Tail;
        if is_large_element(sz) {
            self.insert_plain_node(target, value, after);
            return;
        }
        let at = if self.allow_insert(target, sz) {
            let i = target.unwrap_or(0);
            let node = &mut self.nodes[i];
            match end {
                End::Head => lp::prepend(&mut node.entry, value),
                End::Tail => lp::append(&mut node.entry, value),
            }
            node.update_sz();
            i
        } else {
            let node = self.fresh_node(value);
            self.insert_node(target, node, after)
        };
        self.count += 1;
        self.nodes[at].count += 1;
    }

    /// The node a push starts when the end node is full: an empty listpack
    /// with `value` in it (its count is added by the caller, as Redis's
    /// push does). A list that has filled a node sizes the next one for the
    /// byte limit up front, so pushes fill it without reallocating.
    fn fresh_node(&self, value: &[u8]) -> Node {
        let mut entry = lp::new();
        if !self.nodes.is_empty() && value.len() < 1024 {
            if let Some(&limit) = OPTIMIZATION_LEVEL.get((-(self.fill as i64) - 1) as usize) {
                entry.reserve_exact(limit.saturating_sub(entry.len()));
            }
        }
        lp::prepend(&mut entry, value);
        let mut node = Node::packed(entry);
        node.count = 0;
        node
    }

    pub fn push_back(&mut self, value: &[u8]) {
        self.push(value, End::Tail);
    }

    pub fn push_front(&mut self, value: &[u8]) {
        self.push(value, End::Head);
    }

    /// quicklistPopCustom: remove and return the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        if self.count == 0 {
            return None;
        }
        let i = match end {
            End::Head => self.head()?,
            End::Tail => self.tail()?,
        };
        if self.nodes[i].is_plain() {
            // The node goes, and its bytes with it: no copy.
            let node = self.nodes.remove(i)?;
            self.count -= 1;
            self.compress_around(None);
            return Some(node.entry);
        }
        let node = &mut self.nodes[i];
        let pos = match end {
            End::Head => lp::first_element(&node.entry),
            End::Tail => lp::last_element(&node.entry),
        }?;
        let (value, next) = lp::get_and_skip(&node.entry, pos);
        let value = value.to_vec();
        // quicklistDelIndex, with the element's extent already known.
        lp::delete_span(&mut node.entry, pos, next);
        node.count -= 1;
        if node.count == 0 {
            self.del_node(i);
        } else {
            node.update_sz();
        }
        self.count -= 1;
        Some(value)
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.pop(End::Head)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        self.pop(End::Tail)
    }

    // ------------------------------------------------------ iteration

    /// quicklistGetIteratorAtIdx: an iterator at element `idx` (negative:
    /// from the tail), seeking from the nearer end; `None` out of range.
    fn iter_at(&self, direction: Direction, idx: i64) -> Option<Iter> {
        let forward = idx >= 0;
        // -idx - 1 without overflowing at i64::MIN.
        let index = if forward { idx as u64 } else { !idx as u64 } as usize;
        if index >= self.count {
            return None;
        }
        let (seek_forward, seek_index) = if index > (self.count - 1) / 2 {
            (!forward, self.count - 1 - index)
        } else {
            (forward, index)
        };
        let mut accum = 0usize;
        let mut n = None;
        let len = self.nodes.len();
        for k in 0..len {
            let i = if seek_forward { k } else { len - 1 - k };
            let c = self.nodes[i].count as usize;
            if accum + c > seek_index {
                n = Some(i);
                break;
            }
            accum += c;
        }
        let n = n?;
        if seek_forward != forward {
            accum = self.count - self.nodes[n].count as usize - accum;
        }
        let offset = if forward {
            (index - accum) as i64
        } else {
            -(index as i64) - 1 + accum as i64
        };
        Some(Iter {
            current: Some(n),
            zi: None,
            offset,
            direction,
        })
    }

    /// quicklistReleaseIterator: recompress where the iterator stopped.
    fn iter_release(&mut self, iter: Iter) {
        if let Some(i) = iter.current {
            if i < self.nodes.len() {
                self.compress(i);
            }
        }
    }

    /// quicklistNext: the next element, decompressing its node for use and
    /// compressing each node it leaves.
    fn iter_next(&mut self, iter: &mut Iter) -> Option<Entry> {
        loop {
            let cur = iter.current?;
            let plain = self.nodes[cur].is_plain();
            if iter.zi.is_none() {
                self.decompress_for_use(cur);
                iter.zi = if plain {
                    Some(0)
                } else {
                    lp::seek(&self.nodes[cur].entry, iter.offset)
                };
            } else if plain {
                iter.zi = None;
            } else {
                let entry = &self.nodes[cur].entry;
                let zi = iter.zi.unwrap_or(0);
                match iter.direction {
                    Direction::FromHead => {
                        iter.zi = lp::next_element(entry, zi);
                        iter.offset += 1;
                    }
                    Direction::FromTail => {
                        iter.zi = lp::prev(entry, zi);
                        iter.offset -= 1;
                    }
                }
            }
            if let Some(zi) = iter.zi {
                return Some(Entry {
                    node: cur,
                    zi,
                    offset: iter.offset,
                });
            }
            // Past this node's elements: on to the next node.
            self.compress(cur);
            match iter.direction {
                Direction::FromHead => {
                    iter.current = (cur + 1 < self.nodes.len()).then_some(cur + 1);
                    iter.offset = 0;
                }
                Direction::FromTail => {
                    iter.current = cur.checked_sub(1);
                    iter.offset = -1;
                }
            }
            iter.zi = None;
        }
    }

    /// quicklistCompare.
    fn entry_equals(&self, e: &Entry, value: &[u8]) -> bool {
        let node = &self.nodes[e.node];
        if node.is_plain() {
            node.entry == value
        } else {
            lp::compare(&node.entry, e.zi, value)
        }
    }

    /// quicklistDelEntry: delete the entry's element and keep the iterator
    /// usable.
    fn del_entry(&mut self, iter: &mut Iter, e: &Entry) {
        let mut p = Some(e.zi);
        let deleted_node = self.del_index(e.node, &mut p);
        iter.zi = None;
        if deleted_node {
            match iter.direction {
                Direction::FromHead => {
                    // The next node has moved into the deleted one's place.
                    iter.current = (e.node < self.nodes.len()).then_some(e.node);
                    iter.offset = 0;
                }
                Direction::FromTail => {
                    iter.current = e.node.checked_sub(1);
                    iter.offset = -1;
                }
            }
        }
    }

    // ------------------------------------------------------ split, merge, insert

    /// _quicklistSplitNode: node `i` keeps `[0, offset]` and the returned
    /// node gets the rest (`after`), or node `i` keeps `[offset, end]` and
    /// the returned node `[0, offset)` (not `after`). The new node is not
    /// in the list yet.
    fn split_node(&mut self, i: usize, offset: i64, after: bool) -> Node {
        let node = &mut self.nodes[i];
        let mut new_entry = node.entry.clone();
        let offset = if offset < 0 {
            node.count as i64 + offset
        } else {
            offset
        };
        let (orig_start, orig_extent) = if after { (offset + 1, -1) } else { (0, offset) };
        let (new_start, new_extent) = if after { (0, offset + 1) } else { (offset, -1) };
        // An extent of -1 means "to the end" (lpDeleteRange reads it as a
        // huge unsigned count).
        let extent = |e: i64| if e < 0 { usize::MAX } else { e as usize };
        lp::delete_range(&mut node.entry, orig_start, extent(orig_extent));
        node.count = lp::len(&node.entry) as u32;
        node.update_sz();
        lp::delete_range(&mut new_entry, new_start, extent(new_extent));
        Node::packed(new_entry)
    }

    /// _quicklistListpackMerge: merge nodes `a` and `b` (`a` just before
    /// `b`) into the larger one. Returns the kept node's index (`a`'s).
    fn merge_pair(&mut self, a: usize, b: usize) -> usize {
        self.decompress_node(a);
        self.decompress_node(b);
        let first = std::mem::take(&mut self.nodes[a].entry);
        let second = std::mem::take(&mut self.nodes[b].entry);
        let keep_first = first.len() >= second.len();
        let merged = lp::merge(first, second);
        let (keep, nokeep) = if keep_first { (a, b) } else { (b, a) };
        let node = &mut self.nodes[keep];
        node.count = lp::len(&merged) as u32;
        node.entry = merged;
        node.update_sz();
        self.nodes[nokeep].count = 0;
        self.del_node(nokeep);
        // Both ways the merged node now sits where `a` was.
        self.compress(a);
        a
    }

    /// _quicklistMergeNodes: try merging the two nodes before `center`, the
    /// two after it, then `center` with its neighbours.
    fn merge_nodes(&mut self, mut center: usize) {
        let prev = center.checked_sub(1);
        let prev_prev = center.checked_sub(2);
        if self.allow_merge(prev, prev_prev) {
            if let (Some(pp), Some(p)) = (prev_prev, prev) {
                self.merge_pair(pp, p);
                // One node fewer before the center.
                center -= 1;
            }
        }
        let next = (center + 1 < self.nodes.len()).then_some(center + 1);
        let next_next = (center + 2 < self.nodes.len()).then_some(center + 2);
        if self.allow_merge(next, next_next) {
            if let (Some(n), Some(nn)) = (next, next_next) {
                self.merge_pair(n, nn);
            }
        }
        let target = if self.allow_merge(Some(center), center.checked_sub(1)) {
            self.merge_pair(center - 1, center)
        } else {
            center
        };
        let after = (target + 1 < self.nodes.len()).then_some(target + 1);
        if self.allow_merge(Some(target), after) {
            self.merge_pair(target, target + 1);
        }
    }

    /// _quicklistInsert: insert `value` before or after the entry `e`.
    fn insert_at_entry(&mut self, e: Option<Entry>, value: &[u8], after: bool) {
        let sz = value.len();
        let Some(e) = e else {
            // No reference node: the list is empty.
            if is_large_element(sz) {
                self.insert_plain_node(self.tail(), value, after);
                return;
            }
            let mut node = Self::new_packed_node(value);
            node.count = 0;
            let at = self.insert_node(None, node, after);
            self.nodes[at].count += 1;
            self.count += 1;
            return;
        };
        let node = e.node;
        let full = !self.allow_insert(Some(node), sz);
        let node_count = self.nodes[node].count as i64;
        let mut at_tail = false;
        let mut at_head = false;
        let mut avail_next = false;
        let mut avail_prev = false;
        if after && (e.offset == node_count - 1 || e.offset == -1) {
            at_tail = true;
            let next = (node + 1 < self.nodes.len()).then_some(node + 1);
            avail_next = self.allow_insert(next, sz);
        }
        if !after && (e.offset == 0 || e.offset == -node_count) {
            at_head = true;
            avail_prev = self.allow_insert(node.checked_sub(1), sz);
        }

        if is_large_element(sz) {
            if self.nodes[node].is_plain() || (at_tail && after) || (at_head && !after) {
                self.insert_plain_node(Some(node), value, after);
            } else {
                self.decompress_for_use(node);
                let new_node = self.split_node(node, e.offset, after);
                let entry_node = self.insert_node(Some(node), Node::plain(value), after);
                self.insert_node(Some(entry_node), new_node, after);
                self.count += 1;
            }
            return;
        }

        if !full {
            self.decompress_for_use(node);
            let n = &mut self.nodes[node];
            let at = if after { Where::After } else { Where::Before };
            lp::insert(&mut n.entry, e.zi, value, at);
            n.count += 1;
            n.update_sz();
            self.recompress_only(node);
        } else if at_tail && avail_next && after {
            // Full, at its tail, the next node has room: its head.
            let next = node + 1;
            self.decompress_for_use(next);
            let n = &mut self.nodes[next];
            lp::prepend(&mut n.entry, value);
            n.count += 1;
            n.update_sz();
            self.recompress_only(next);
            self.recompress_only(node);
        } else if at_head && avail_prev && !after {
            // Full, at its head, the previous node has room: its tail.
            let prev = node - 1;
            self.decompress_for_use(prev);
            let n = &mut self.nodes[prev];
            lp::append(&mut n.entry, value);
            n.count += 1;
            n.update_sz();
            self.recompress_only(prev);
            self.recompress_only(node);
        } else if (at_tail && !avail_next && after) || (at_head && !avail_prev && !after) {
            // Full, and so is the neighbour: a node of its own.
            let new_node = Self::new_packed_node(value);
            self.insert_node(Some(node), new_node, after);
        } else {
            // Full, in its middle: split it.
            self.decompress_for_use(node);
            let mut new_node = self.split_node(node, e.offset, after);
            if after {
                lp::prepend(&mut new_node.entry, value);
            } else {
                lp::append(&mut new_node.entry, value);
            }
            new_node.count += 1;
            new_node.update_sz();
            self.insert_node(Some(node), new_node, after);
            // Inserted before, the split node moved up by one.
            let center = if after { node } else { node + 1 };
            self.merge_nodes(center);
        }
        self.count += 1;
    }

    /// quicklistReplaceEntry: put `value` in place of the entry's element.
    fn replace_entry(&mut self, e: &Entry, value: &[u8]) {
        let node = e.node;
        let sz = value.len();
        if !self.nodes[node].is_plain() && !is_large_element(sz) {
            let n = &mut self.nodes[node];
            lp::replace(&mut n.entry, e.zi, value);
            n.update_sz();
            self.compress(node);
        } else if self.nodes[node].is_plain() {
            if is_large_element(sz) {
                let n = &mut self.nodes[node];
                n.entry = value.to_vec();
                n.sz = sz;
                self.compress(node);
            } else {
                // The insertion goes after this node, which keeps its index.
                self.insert_at_entry(Some(*e), value, true);
                self.del_node(node);
            }
        } else {
            // A packed node gets a large element: insert it after the old
            // one (splitting the node), then delete the old one.
            self.nodes[node].dont_compress = true;
            self.insert_at_entry(Some(*e), value, true);
            if self.nodes[node].count == 1 {
                self.del_node(node);
            } else {
                let mut p = lp::seek(&self.nodes[node].entry, -1);
                self.del_index(node, &mut p);
                self.nodes[node].dont_compress = false;
                self.compress(node);
                if node + 1 < self.nodes.len() {
                    self.compress(node + 1);
                }
            }
        }
    }

    // ------------------------------------------------------ commands' operations

    /// Where element `index` (negative: from the tail) is: its node and
    /// its index there (quicklistGetIteratorAtIdx's seek).
    fn locate(&self, index: i64) -> Option<(usize, usize)> {
        let iter = self.iter_at(Direction::FromHead, index)?;
        let node = iter.current?;
        let count = self.nodes[node].count as i64;
        let offset = if iter.offset < 0 {
            count + iter.offset
        } else {
            iter.offset
        };
        (0..count)
            .contains(&offset)
            .then_some((node, offset as usize))
    }

    /// The element at `index` (negative: from the tail) to `visit`; false
    /// when out of range. LINDEX.
    ///
    /// How reads treat nodes: Redis decompresses a node "for use" as its
    /// iterator enters it, and when the iterator leaves it or is released
    /// compresses it again, or — a node that was not compressed — runs the
    /// depth pass around it (which can compress it: an interior node left
    /// raw by an insertion into it). Here a compressed node is read from a
    /// decompressed copy and left as it is (compressing the same bytes
    /// again would give the same bytes: our LZF starts from a clean table),
    /// which saves a compression per node read; a raw node gets the same
    /// depth pass ([`List::after_reading`]).
    pub fn index_with(&mut self, index: i64, visit: &mut dyn FnMut(Element<'_>)) -> bool {
        let Some((node, offset)) = self.locate(index) else {
            return false;
        };
        let was_compressed = self.nodes[node].compressed;
        let found = {
            let n = &self.nodes[node];
            let raw = n.raw();
            if n.is_plain() {
                visit(Element::Str(&raw));
                true
            } else if let Some(pos) = lp::seek(&raw, offset as i64) {
                visit(lp::get(&raw, pos));
                true
            } else {
                false
            }
        };
        self.after_reading(node, was_compressed);
        found
    }

    /// What Redis's iterator does to a node it read once it moves on or is
    /// released (quicklistCompress): nothing that shows for a node that was
    /// compressed (it is compressed again to the same bytes); the depth pass
    /// around one that was not.
    fn after_reading(&mut self, node: usize, was_compressed: bool) {
        if !was_compressed && node < self.nodes.len() {
            self.compress_around(Some(node));
        }
    }

    /// The element at `index`, copied.
    pub fn index(&mut self, index: i64) -> Option<Vec<u8>> {
        let mut out = None;
        self.index_with(index, &mut |e| out = Some(e.to_vec()));
        out
    }

    /// Elements `start..=end` (clamped indices, `start <= end < len`) to
    /// `visit`, from `end` down when `reverse` (addListRangeReply). Nodes
    /// are read as [`List::index_with`] reads them.
    pub fn range<F: FnMut(Element<'_>)>(
        &mut self,
        start: usize,
        end: usize,
        reverse: bool,
        mut visit: F,
    ) {
        self.walk(start, end, reverse, |e| {
            visit(e);
            true
        });
    }

    /// [`List::range`] until `visit` returns false.
    fn walk<F: FnMut(Element<'_>) -> bool>(
        &mut self,
        start: usize,
        end: usize,
        reverse: bool,
        mut visit: F,
    ) {
        if start > end || end >= self.count {
            return;
        }
        let mut left = end - start + 1;
        let from = if reverse { end } else { start };
        let Some((mut node, mut offset)) = self.locate(from as i64) else {
            return;
        };
        loop {
            let was_compressed = self.nodes[node].compressed;
            let going = {
                let n = &self.nodes[node];
                let raw = n.raw();
                let mut going = true;
                if n.is_plain() {
                    going = visit(Element::Str(&raw));
                    left -= 1;
                } else if !reverse {
                    let mut pos = lp::seek(&raw, offset as i64);
                    while let (Some(p), true) = (pos, going && left > 0) {
                        let (v, after) = lp::get_and_skip(&raw, p);
                        going = visit(v);
                        left -= 1;
                        pos = (raw[after] != LP_EOF).then_some(after);
                    }
                } else {
                    let mut pos = lp::seek(&raw, offset as i64);
                    while let (Some(p), true) = (pos, going && left > 0) {
                        going = visit(lp::get(&raw, p));
                        left -= 1;
                        pos = lp::prev(&raw, p);
                    }
                }
                going
            };
            self.after_reading(node, was_compressed);
            if !going || left == 0 {
                return;
            }
            if reverse {
                let Some(prev) = node.checked_sub(1) else {
                    return;
                };
                node = prev;
                offset = (self.nodes[node].count as usize).saturating_sub(1);
            } else {
                node += 1;
                if node >= self.nodes.len() {
                    return;
                }
                offset = 0;
            }
        }
    }

    /// LSET: replace the element at `index`; false when out of range
    /// (quicklistReplaceAtIndex).
    pub fn replace_at(&mut self, index: i64, value: &[u8]) -> bool {
        let Some(mut iter) = self.iter_at(Direction::FromTail, index) else {
            return false;
        };
        let Some(e) = self.iter_next(&mut iter) else {
            self.iter_release(iter);
            return false;
        };
        // Replacing resets the iterator: nothing to release.
        self.replace_entry(&e, value);
        true
    }

    /// LINSERT: insert `value` before or after the first element equal to
    /// `pivot`; false when there is none.
    pub fn insert_at_pivot(&mut self, pivot: &[u8], value: &[u8], after: bool) -> bool {
        let Some(mut iter) = self.iter_at(Direction::FromHead, 0) else {
            return false;
        };
        while let Some(e) = self.iter_next(&mut iter) {
            if self.entry_equals(&e, pivot) {
                // Inserting resets the iterator: nothing to release.
                self.insert_at_entry(Some(e), value, after);
                return true;
            }
        }
        self.iter_release(iter);
        false
    }

    /// LREM: remove up to `count` elements equal to `value` (0: all; from
    /// the tail when negative). Returns how many went.
    pub fn remove_matching(&mut self, value: &[u8], count: i64) -> usize {
        let (direction, start, max) = if count < 0 {
            (Direction::FromTail, -1, count.unsigned_abs() as usize)
        } else {
            (Direction::FromHead, 0, count as usize)
        };
        let Some(mut iter) = self.iter_at(direction, start) else {
            return 0;
        };
        let mut removed = 0;
        while let Some(e) = self.iter_next(&mut iter) {
            if self.entry_equals(&e, value) {
                self.del_entry(&mut iter, &e);
                removed += 1;
                if max != 0 && removed == max {
                    break;
                }
            }
        }
        self.iter_release(iter);
        removed
    }

    /// LPOS's walk: each element with its index, from the head or from the
    /// tail, until `visit` returns false. Nodes are read as
    /// [`List::index_with`] reads them.
    pub fn scan(&mut self, from_tail: bool, visit: &mut dyn FnMut(usize, Element<'_>) -> bool) {
        let Some(last) = self.count.checked_sub(1) else {
            return;
        };
        let mut k = 0usize;
        self.walk(0, last, from_tail, |e| {
            let index = if from_tail { last - k } else { k };
            k += 1;
            visit(index, e)
        });
    }

    /// quicklistDelRange: delete `count` elements from `start` (negative:
    /// from the tail). LTRIM, and LPOP/RPOP/LMPOP with a count.
    pub fn del_range(&mut self, start: i64, count: i64) -> bool {
        if count <= 0 {
            return false;
        }
        let mut extent = count as u64;
        if start >= 0 && extent > (self.count as u64).saturating_sub(start as u64) {
            extent = (self.count as u64).saturating_sub(start as u64);
        } else if start < 0 && extent > start.unsigned_abs() {
            extent = start.unsigned_abs();
        }
        let Some(iter) = self.iter_at(Direction::FromTail, start) else {
            return false;
        };
        let Some(mut node) = iter.current else {
            return false;
        };
        let mut offset = iter.offset;
        self.iter_release(iter);
        while extent > 0 {
            if node >= self.nodes.len() {
                break;
            }
            let node_count = self.nodes[node].count as u64;
            let mut delete_entire_node = false;
            let del = if offset == 0 && extent >= node_count {
                delete_entire_node = true;
                node_count
            } else if offset >= 0 && extent + offset as u64 >= node_count {
                node_count - offset as u64
            } else if offset < 0 {
                offset.unsigned_abs().min(extent)
            } else {
                extent
            };
            // Where the next node will be once this one is dealt with.
            let mut next = node + 1;
            if delete_entire_node || self.nodes[node].is_plain() {
                self.del_node(node);
                next = node;
            } else {
                self.decompress_for_use(node);
                let n = &mut self.nodes[node];
                lp::delete_range(&mut n.entry, offset, del as usize);
                n.update_sz();
                n.count -= del as u32;
                self.count -= del as usize;
                if self.nodes[node].count == 0 {
                    self.del_node(node);
                    next = node;
                } else {
                    self.recompress_only(node);
                }
            }
            extent -= del;
            node = next;
            offset = 0;
        }
        true
    }

    /// Every element, head to tail, without changing the list (SORT, AOF
    /// rewrite): compressed nodes are read from a decompressed copy.
    pub fn for_each(&self, visit: &mut dyn FnMut(Element<'_>)) {
        for node in &self.nodes {
            let raw = node.raw();
            if node.is_plain() {
                visit(Element::Str(&raw));
                continue;
            }
            let mut p = lp::first_element(&raw);
            while let Some(pos) = p {
                visit(lp::get(&raw, pos));
                p = lp::next_element(&raw, pos);
            }
        }
    }

    /// All elements, head to tail, read as a command reads them (SORT):
    /// see [`List::index_with`].
    pub fn read_all(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.count);
        if let Some(last) = self.count.checked_sub(1) {
            self.range(0, last, false, |e| out.push(e.to_vec()));
        }
        out
    }

    /// All elements as byte strings, head to tail, without changing the
    /// list (the AOF rewrite, which Redis does in a forked child).
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.count);
        self.for_each(&mut |e| out.push(e.to_vec()));
        out
    }

    // ------------------------------------------------------ dumps

    /// Each node as an RDB file holds it: its container, and either its
    /// LZF form with its uncompressed size, or its bytes.
    pub fn for_each_node(&self, visit: &mut dyn FnMut(Container, NodeBytes<'_>)) {
        for node in &self.nodes {
            let bytes = if node.compressed {
                NodeBytes::Lzf {
                    compressed: &node.entry,
                    raw_len: node.sz,
                }
            } else {
                NodeBytes::Raw(&node.entry)
            };
            visit(node.container, bytes);
        }
    }

    /// quicklistAppendListpack: add a listpack (already validated and not
    /// empty) as a node at the tail.
    pub fn append_listpack(&mut self, listpack: Vec<u8>) {
        let node = Node::packed(listpack);
        let count = node.count as usize;
        let tail = self.tail();
        self.insert_node(tail, node, true);
        self.count += count;
    }

    /// quicklistAppendPlainNode: add an element as a plain node at the tail.
    pub fn append_plain(&mut self, value: Vec<u8>) {
        let tail = self.tail();
        self.insert_node(tail, Node::plain_owned(value), true);
        self.count += 1;
    }

    /// Redis's quicklistRepr, for DEBUG QUICKLIST (`full`: with every
    /// node's contents).
    pub fn repr(&self, full: bool) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "{{count : {}}}", self.count);
        let _ = writeln!(out, "{{len : {}}}", self.nodes.len());
        let _ = writeln!(out, "{{fill : {}}}", self.fill);
        let _ = writeln!(out, "{{compress : {}}}", self.compress);
        let _ = writeln!(out, "{{bookmark_count : 0}}");
        for (i, node) in self.nodes.iter().enumerate() {
            let _ = writeln!(out, "{{quicklist node({i})");
            let _ = writeln!(
                out,
                "{{container : {}, encoding: {}, size: {}, count: {}, recompress: {}, attempted_compress: 0}}",
                if node.is_plain() { "PLAIN" } else { "PACKED" },
                if node.compressed { "LZF" } else { "RAW" },
                node.sz,
                node.count,
                u8::from(node.recompress),
            );
            if full {
                let raw = node.raw();
                if node.is_plain() {
                    let _ = writeln!(out, "{{ entry : {} }}", String::from_utf8_lossy(&raw));
                } else {
                    let _ = writeln!(out, "{{ listpack:");
                    out.push_str(&lp::repr(&raw));
                    let _ = writeln!(out, "}}");
                }
                let _ = writeln!(out, "}}");
            }
        }
        out
    }
}

/// A node's bytes as a dump holds them.
pub enum NodeBytes<'a> {
    Raw(&'a [u8]),
    Lzf {
        compressed: &'a [u8],
        raw_len: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl List {
        /// Check the structure: counts, sizes, valid listpacks, no empty
        /// node, no node left mid-operation, the ends never compressed.
        /// (An interior node may be raw: Redis leaves one raw after an
        /// insertion into a node too small to have been compressed.)
        fn check(&self) {
            self.check_nodes(false);
        }

        /// [`check`], and every interior node that compression shrinks
        /// enough is compressed (what pushes and pops keep).
        fn check_fully_compressed(&self) {
            self.check_nodes(true);
        }

        fn check_nodes(&self, fully: bool) {
            let mut total = 0;
            let len = self.nodes.len();
            let depth = self.compress as usize;
            for (i, n) in self.nodes.iter().enumerate() {
                assert!(n.count > 0, "empty node {i}");
                assert!(
                    !n.recompress && !n.dont_compress,
                    "node {i} left mid-operation"
                );
                total += n.count as usize;
                let raw = n.raw();
                assert_eq!(raw.len(), n.sz, "node {i} size");
                if n.is_plain() {
                    assert_eq!(n.count, 1);
                } else {
                    assert!(lp::validate(&raw), "node {i} listpack");
                    assert_eq!(lp::len(&raw), n.count as usize, "node {i} count");
                }
                let interior = depth > 0 && len >= 2 * depth && i >= depth && i < len - depth;
                if !interior {
                    assert!(
                        !n.compressed,
                        "node {i} of {len} compressed within depth {depth}"
                    );
                } else if fully && !n.compressed && n.sz >= MIN_COMPRESS_BYTES {
                    let worth = lzf::compress(&raw, n.sz)
                        .is_some_and(|c| c.len() + MIN_COMPRESS_IMPROVE < n.sz);
                    assert!(!worth, "interior node {i} of {len} left uncompressed");
                }
            }
            assert_eq!(total, self.count);
        }
    }

    fn contents(l: &List) -> Vec<Vec<u8>> {
        l.to_vecs()
    }

    fn value(i: usize) -> Vec<u8> {
        // Compressible, of varied sizes, some integers.
        match i % 4 {
            0 => i.to_string().into_bytes(),
            1 => format!("item:{i:06}").into_bytes(),
            2 => format!("{}{i}", "abcdefgh".repeat(i % 40 + 1)).into_bytes(),
            _ => vec![b'a' + (i % 26) as u8; 50 + i % 300],
        }
    }

    #[test]
    fn interior_nodes_are_compressed_and_the_ends_are_not() {
        for depth in 1..=3 {
            let mut l = List::new(4, depth);
            for i in 0..200 {
                l.push_back(format!("element-{:04}-{}", i, "x".repeat(40)).as_bytes());
            }
            l.check_fully_compressed();
            let d = depth as usize;
            let n = l.nodes.len();
            assert_eq!(n, 50);
            for (i, node) in l.nodes.iter().enumerate() {
                assert_eq!(node.compressed, i >= d && i < n - d, "node {i} depth {d}");
            }
            // Reading does not change what is compressed.
            assert_eq!(
                l.index(100),
                Some(format!("element-0100-{}", "x".repeat(40)).into_bytes())
            );
            l.check_fully_compressed();
        }
    }

    #[test]
    fn small_or_incompressible_nodes_stay_raw() {
        let mut l = List::new(2, 1);
        for i in 0..10u64 {
            l.push_back(i.to_string().as_bytes());
        }
        l.check();
        assert!(
            l.nodes.iter().all(|n| !n.compressed),
            "nodes under 48 bytes"
        );
        let mut rng = 7u64;
        let mut noise = || {
            (0..100)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect::<Vec<u8>>()
        };
        let mut l = List::new(1, 1);
        for _ in 0..5 {
            l.push_back(&noise());
        }
        l.check();
        assert!(
            l.nodes.iter().all(|n| !n.compressed),
            "random bytes don't shrink"
        );
    }

    #[test]
    fn pushes_and_pops_at_both_ends_recompress_at_the_depth() {
        let mut l = List::new(2, 2);
        let mut model = std::collections::VecDeque::new();
        for i in 0..300 {
            let v = value(i);
            if i % 3 == 0 {
                l.push_front(&v);
                model.push_front(v);
            } else {
                l.push_back(&v);
                model.push_back(v);
            }
            l.check_fully_compressed();
        }
        while !model.is_empty() {
            let (got, want) = if model.len() % 2 == 0 {
                (l.pop_front(), model.pop_front())
            } else {
                (l.pop_back(), model.pop_back())
            };
            assert_eq!(got, want);
            l.check_fully_compressed();
        }
        assert!(l.is_empty() && l.nodes.is_empty());
    }

    #[test]
    fn a_compressed_list_reads_and_changes_as_an_uncompressed_one() {
        let build = |depth| {
            let mut l = List::new(3, depth);
            for i in 0..120 {
                l.push_back(&value(i));
            }
            l
        };
        let mut plain = build(0);
        let mut packed = build(1);
        for (a, b) in [(&mut plain, &mut packed)] {
            assert!(b.nodes.iter().any(|n| n.compressed));
            for i in [-121i64, -120, -60, -1, 0, 1, 59, 119, 120] {
                assert_eq!(a.index(i), b.index(i), "LINDEX {i}");
            }
            let (mut ra, mut rb) = (Vec::new(), Vec::new());
            a.range(10, 100, true, |e| ra.push(e.to_vec()));
            b.range(10, 100, true, |e| rb.push(e.to_vec()));
            assert_eq!(ra, rb);
            for (i, v) in [(5i64, &b"new"[..]), (-7, b"12345"), (60, &[b'z'; 700])] {
                assert!(a.replace_at(i, v) && b.replace_at(i, v));
            }
            assert_eq!(
                a.insert_at_pivot(b"12345", b"before", false),
                b.insert_at_pivot(b"12345", b"before", false)
            );
            assert_eq!(
                a.insert_at_pivot(&value(90), b"after", true),
                b.insert_at_pivot(&value(90), b"after", true)
            );
            assert_eq!(
                a.remove_matching(&value(33), 0),
                b.remove_matching(&value(33), 0)
            );
            assert!(a.del_range(0, 7) && b.del_range(0, 7));
            assert!(a.del_range(-9, 9) && b.del_range(-9, 9));
            assert_eq!(contents(a), contents(b));
            b.check();
        }
    }

    #[test]
    fn plain_nodes_hold_large_elements() {
        // The threshold is the server's: the other tests here use shorter
        // elements, and this one puts it back.
        const LARGE: usize = 1000;
        assert!(set_packed_threshold(LARGE as u64));
        let mut l = List::new(-2, 1);
        l.push_back(b"a");
        l.push_back(&[b'x'; LARGE + 500]);
        l.push_back(b"b");
        l.push_front(&[b'y'; LARGE + 200]);
        assert_eq!(l.nodes.len(), 4);
        assert_eq!(l.nodes[1].container, Container::Packed);
        assert_eq!(l.nodes[2].container, Container::Plain);
        // A plain node in the middle is compressed like any other.
        assert!(l.nodes[2].compressed);
        assert!(l.replace_at(1, b"small"));
        assert!(l.replace_at(0, &[b'q'; LARGE * 2]));
        assert!(l.insert_at_pivot(b"b", &[b'r'; LARGE + 100], false));
        l.check();
        assert_eq!(
            contents(&l),
            vec![
                vec![b'q'; LARGE * 2],
                b"small".to_vec(),
                vec![b'x'; LARGE + 500],
                vec![b'r'; LARGE + 100],
                b"b".to_vec()
            ]
        );
        assert_eq!(l.pop_front(), Some(vec![b'q'; LARGE * 2]));
        assert!(set_packed_threshold(0));
        assert!(!set_packed_threshold(1 << 32));
    }

    #[test]
    fn a_list_rebuilt_from_its_dumped_nodes_is_the_same_list() {
        let mut l = List::new(5, 2);
        for i in 0..400 {
            l.push_back(&value(i));
        }
        // As RDB loading does: each node's bytes, decompressed, appended.
        let mut copy = List::new(5, 2);
        l.for_each_node(&mut |container, bytes| {
            let raw = match bytes {
                NodeBytes::Raw(b) => b.to_vec(),
                NodeBytes::Lzf {
                    compressed,
                    raw_len,
                } => lzf::decompress(compressed, raw_len).unwrap(),
            };
            match container {
                Container::Packed => copy.append_listpack(raw),
                Container::Plain => copy.append_plain(raw),
            }
        });
        copy.check_fully_compressed();
        assert_eq!(contents(&copy), contents(&l));
        let compressed = |l: &List| l.nodes.iter().map(|n| n.compressed).collect::<Vec<_>>();
        assert_eq!(compressed(&copy), compressed(&l));
    }

    #[test]
    fn a_compressed_list_reports_its_compressed_size() {
        let build = |depth| {
            let mut l = List::new(-2, depth);
            for i in 0..5000 {
                l.push_back(format!("a fairly compressible element number {i}").as_bytes());
            }
            l
        };
        let (raw, packed) = (build(0), build(1));
        assert!(
            packed.heap_size() * 3 < raw.heap_size(),
            "{} vs {}",
            packed.heap_size(),
            raw.heap_size()
        );
        assert_eq!(
            packed.shape().uncompressed_size,
            raw.shape().uncompressed_size
        );
    }

    #[test]
    fn options_are_clamped_as_redis_does() {
        let l = List::new(-100, -3);
        assert_eq!((l.fill, l.compress), (-5, 0));
        let l = List::new(1 << 40, 1 << 20);
        assert_eq!((l.fill, l.compress), (32767, 65535));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(bool, usize),
        Pop(bool),
        Index(i64),
        Range(i64, i64, bool),
        Replace(i64, usize),
        Insert(usize, usize, bool),
        Remove(usize, i64),
        DelRange(i64, i64),
        Scan(bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<bool>(), 0..2000usize).prop_map(|(f, v)| Op::Push(f, v)),
            2 => any::<bool>().prop_map(Op::Pop),
            1 => (-300..300i64).prop_map(Op::Index),
            1 => (-300..300i64, -300..300i64, any::<bool>()).prop_map(|(a, b, r)| Op::Range(a, b, r)),
            1 => (-300..300i64, 0..2000usize).prop_map(|(i, v)| Op::Replace(i, v)),
            2 => (0..2000usize, 0..2000usize, any::<bool>()).prop_map(|(p, v, a)| Op::Insert(p, v, a)),
            1 => (0..2000usize, -3..3i64).prop_map(|(v, c)| Op::Remove(v, c)),
            1 => (-300..300i64, 0..40i64).prop_map(|(s, c)| Op::DelRange(s, c)),
            1 => any::<bool>().prop_map(Op::Scan),
        ]
    }

    /// A value of the op's number: many repeat (so LREM and LINSERT find
    /// pivots), some are integers, some long.
    fn val(n: usize) -> Vec<u8> {
        value(n % 97 + (n / 1000) * 1000)
    }

    fn resolve(i: i64, len: usize) -> Option<usize> {
        let i = if i < 0 { i + len as i64 } else { i };
        (0..len as i64).contains(&i).then_some(i as usize)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Every operation, on lists of every node size and compress depth
        /// 0..=3, against a plain vector.
        #[test]
        fn list_matches_a_vector_model(
            fill in prop_oneof![Just(-5i64), Just(-2), Just(-1), Just(1), Just(2), Just(3), Just(5), Just(16)],
            depth in 0..4i64,
            ops in proptest::collection::vec(op(), 1..250),
        ) {
            let mut l = List::new(fill, depth);
            let mut m: Vec<Vec<u8>> = Vec::new();
            for op in ops {
                match op {
                    Op::Push(front, v) => {
                        let v = val(v);
                        if front { l.push_front(&v); m.insert(0, v) } else { l.push_back(&v); m.push(v) }
                    }
                    Op::Pop(front) => {
                        let want = if m.is_empty() { None } else if front { Some(m.remove(0)) } else { m.pop() };
                        let got = if front { l.pop_front() } else { l.pop_back() };
                        prop_assert_eq!(got, want);
                    }
                    Op::Index(i) => {
                        let want = resolve(i, m.len()).map(|i| m[i].clone());
                        prop_assert_eq!(l.index(i), want);
                    }
                    Op::Range(a, b, rev) => {
                        if let Some((s, e)) = clamp(a, b, m.len()) {
                            let mut got = Vec::new();
                            l.range(s, e, rev, |x| got.push(x.to_vec()));
                            let mut want = m[s..=e].to_vec();
                            if rev { want.reverse() }
                            prop_assert_eq!(got, want);
                        }
                    }
                    Op::Replace(i, v) => {
                        let v = val(v);
                        let ok = l.replace_at(i, &v);
                        match resolve(i, m.len()) {
                            Some(k) => { prop_assert!(ok); m[k] = v; }
                            None => prop_assert!(!ok),
                        }
                    }
                    Op::Insert(p, v, after) => {
                        let (p, v) = (val(p), val(v));
                        let ok = l.insert_at_pivot(&p, &v, after);
                        match m.iter().position(|x| *x == p) {
                            Some(k) => { prop_assert!(ok); m.insert(if after { k + 1 } else { k }, v); }
                            None => prop_assert!(!ok),
                        }
                    }
                    Op::Remove(v, count) => {
                        let v = val(v);
                        let got = l.remove_matching(&v, count);
                        let max = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
                        let mut idx: Vec<usize> = (0..m.len()).filter(|&i| m[i] == v).collect();
                        if count < 0 { idx.reverse(); }
                        idx.truncate(max);
                        idx.sort_unstable();
                        for &i in idx.iter().rev() { m.remove(i); }
                        prop_assert_eq!(got, idx.len());
                    }
                    Op::DelRange(start, count) => {
                        let len = m.len() as i64;
                        let begin = if start < 0 { start + len } else { start };
                        l.del_range(start, count);
                        if count > 0 && (0..len).contains(&begin) {
                            let end = (begin + count).min(len);
                            m.drain(begin as usize..end as usize);
                        }
                    }
                    Op::Scan(from_tail) => {
                        let mut got = Vec::new();
                        l.scan(from_tail, &mut |i, e| { got.push((i, e.to_vec())); true });
                        let mut want: Vec<(usize, Vec<u8>)> = m.iter().cloned().enumerate().collect();
                        if from_tail { want.reverse() }
                        prop_assert_eq!(got, want);
                    }
                }
                l.check();
                prop_assert_eq!(l.len(), m.len());
                prop_assert_eq!(contents(&l), m.clone());
            }
        }
    }

    fn clamp(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
        let len = len as i64;
        let start = if start < 0 {
            (start + len).max(0)
        } else {
            start
        };
        let end = if end < 0 { end + len } else { end };
        if start > end || start >= len {
            return None;
        }
        Some((start as usize, end.min(len - 1) as usize))
    }
}
