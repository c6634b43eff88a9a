//! The order of a large sorted set: an ordered list that also answers
//! "what is at position i" and "at which position is x" in O(log n), as
//! Redis's skiplist does with its spans (ZRANK, ZRANGE by rank, ZCOUNT,
//! ZLEXCOUNT, LIMIT offsets).
//!
//! The elements are kept in sorted chunks of at most [`CHUNK_MAX`]; a
//! Fenwick tree over the chunks' lengths turns a position into a chunk and
//! back. An insertion or removal moves at most one chunk's elements (a few
//! KB) and updates O(log chunks) counts; a chunk that splits, empties or
//! merges rebuilds the counts (O(chunks), once per many changes).

/// A chunk splits in two above this many elements.
const CHUNK_MAX: usize = 512;
/// A chunk this small merges with a neighbour when the two fit in one.
const CHUNK_MIN: usize = CHUNK_MAX / 4;

#[derive(Clone, Debug)]
pub struct OrderList<K> {
    chunks: Vec<Vec<K>>,
    /// Fenwick tree (1-based) over `chunks[i].len()`.
    counts: Vec<usize>,
    len: usize,
}

impl<K> Default for OrderList<K> {
    fn default() -> Self {
        OrderList {
            chunks: Vec::new(),
            counts: vec![0],
            len: 0,
        }
    }
}

impl<K: Ord + Copy> OrderList<K> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held (for the memory estimates).
    pub fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Vec<K>>()
            + self
                .chunks
                .iter()
                .map(|c| c.capacity() * std::mem::size_of::<K>())
                .sum::<usize>()
            + self.counts.capacity() * std::mem::size_of::<usize>()
    }

    fn rebuild_counts(&mut self) {
        let n = self.chunks.len();
        self.counts.clear();
        self.counts.resize(n + 1, 0);
        for i in 1..=n {
            self.counts[i] += self.chunks[i - 1].len();
            let parent = i + (i & i.wrapping_neg());
            if parent <= n {
                self.counts[parent] += self.counts[i];
            }
        }
    }

    fn count_add(&mut self, chunk: usize, up: bool) {
        let mut i = chunk + 1;
        while i < self.counts.len() {
            if up {
                self.counts[i] += 1;
            } else {
                self.counts[i] -= 1;
            }
            i += i & i.wrapping_neg();
        }
    }

    /// Elements in the chunks before `chunk`.
    fn before_chunk(&self, chunk: usize) -> usize {
        let mut i = chunk;
        let mut sum = 0;
        while i > 0 {
            sum += self.counts[i];
            i &= i - 1;
        }
        sum
    }

    /// The chunk holding position `pos` (< len) and the offset in it.
    fn locate(&self, mut pos: usize) -> (usize, usize) {
        let n = self.chunks.len();
        let mut idx = 0;
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = idx + step;
            if next <= n && self.counts[next] <= pos {
                idx = next;
                pos -= self.counts[next];
            }
            step >>= 1;
        }
        (idx, pos)
    }

    /// The chunk where `k` is or would go.
    fn chunk_for(&self, k: &K) -> usize {
        let c = self
            .chunks
            .partition_point(|ch| ch.last().is_some_and(|last| last < k));
        c.min(self.chunks.len().saturating_sub(1))
    }

    /// Insert `k`; false (and nothing changes) when it is there already.
    pub fn insert(&mut self, k: K) -> bool {
        if self.chunks.is_empty() {
            let mut first = Vec::with_capacity(8);
            first.push(k);
            self.chunks.push(first);
            self.len = 1;
            self.rebuild_counts();
            return true;
        }
        let c = self.chunk_for(&k);
        let chunk = &mut self.chunks[c];
        let Err(at) = chunk.binary_search(&k) else {
            return false;
        };
        self.len += 1;
        if chunk.len() < CHUNK_MAX {
            chunk.insert(at, k);
            self.count_add(c, true);
            return true;
        }
        // A full chunk splits before it grows. Appending at its end (a
        // load in order, a leaderboard's new top) starts a new chunk and
        // leaves this one full; elsewhere it splits in halves, the lower
        // one giving back the capacity it no longer needs.
        let mut upper = Vec::with_capacity(CHUNK_MAX);
        if at == CHUNK_MAX {
            upper.push(k);
        } else {
            upper.extend_from_slice(&chunk[CHUNK_MAX / 2..]);
            chunk.truncate(CHUNK_MAX / 2);
            chunk.shrink_to_fit();
            if at <= CHUNK_MAX / 2 {
                chunk.insert(at, k);
            } else {
                upper.insert(at - CHUNK_MAX / 2, k);
            }
        }
        self.chunks.insert(c + 1, upper);
        self.rebuild_counts();
        true
    }

    /// Remove `k`; false when it is not there.
    pub fn remove(&mut self, k: &K) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let c = self.chunk_for(k);
        let Ok(at) = self.chunks[c].binary_search(k) else {
            return false;
        };
        self.chunks[c].remove(at);
        self.len -= 1;
        let small = self.chunks[c].len();
        if small == 0 {
            self.chunks.remove(c);
            self.rebuild_counts();
        } else if small < CHUNK_MIN && self.chunks.len() > 1 {
            // Merge with the smaller neighbour when both fit in one chunk.
            let other = if c == 0 {
                1
            } else if c + 1 == self.chunks.len()
                || self.chunks[c - 1].len() <= self.chunks[c + 1].len()
            {
                c - 1
            } else {
                c + 1
            };
            let (lo, hi) = (c.min(other), c.max(other));
            if self.chunks[lo].len() + self.chunks[hi].len() <= CHUNK_MAX {
                let moved = self.chunks.remove(hi);
                self.chunks[lo].extend_from_slice(&moved);
                self.rebuild_counts();
            } else {
                self.count_add(c, false);
            }
        } else {
            self.count_add(c, false);
        }
        true
    }

    /// The position of `k`, when it is there.
    pub fn rank(&self, k: &K) -> Option<usize> {
        if self.chunks.is_empty() {
            return None;
        }
        let c = self.chunk_for(k);
        let at = self.chunks[c].binary_search(k).ok()?;
        Some(self.before_chunk(c) + at)
    }

    /// How many elements, from the first, satisfy `pred` (which must hold
    /// for a prefix of the order and then never again).
    pub fn partition_point(&self, pred: impl Fn(&K) -> bool) -> usize {
        let c = self
            .chunks
            .partition_point(|ch| ch.last().is_some_and(&pred));
        if c == self.chunks.len() {
            return self.len;
        }
        self.before_chunk(c) + self.chunks[c].partition_point(&pred)
    }

    /// The element at position `pos`.
    pub fn get(&self, pos: usize) -> Option<&K> {
        if pos >= self.len {
            return None;
        }
        let (c, at) = self.locate(pos);
        self.chunks[c].get(at)
    }

    /// All elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &K> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The elements from position `pos` on, in order.
    pub fn iter_from(&self, pos: usize) -> impl Iterator<Item = &K> + '_ {
        let (c, at) = if pos < self.len {
            self.locate(pos)
        } else {
            (self.chunks.len(), 0)
        };
        self.chunks[c..]
            .iter()
            .enumerate()
            .flat_map(move |(i, ch)| ch[if i == 0 { at } else { 0 }..].iter())
    }

    /// The elements from position `pos` down to the first, in reverse.
    pub fn iter_back_from(&self, pos: usize) -> impl Iterator<Item = &K> + '_ {
        let (chunks, at) = if pos < self.len {
            let (c, at) = self.locate(pos);
            (&self.chunks[..=c], at)
        } else {
            (&self.chunks[..0], 0)
        };
        chunks
            .iter()
            .rev()
            .enumerate()
            .flat_map(move |(i, ch)| ch[..if i == 0 { at + 1 } else { ch.len() }].iter().rev())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3000u16).prop_map(Op::Insert),
            2 => (0..3000u16).prop_map(Op::Remove),
        ]
    }

    fn check(list: &OrderList<u16>, model: &BTreeSet<u16>) {
        let all: Vec<u16> = model.iter().copied().collect();
        assert_eq!(list.len(), all.len());
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), all);
        assert_eq!(
            list.iter().rev().copied().collect::<Vec<_>>(),
            all.iter().rev().copied().collect::<Vec<_>>()
        );
        for (i, v) in all.iter().enumerate().step_by(7) {
            assert_eq!(list.rank(v), Some(i));
            assert_eq!(list.get(i), Some(v));
            assert_eq!(list.iter_from(i).copied().collect::<Vec<_>>(), all[i..]);
            let back: Vec<u16> = all[..=i].iter().rev().copied().collect();
            assert_eq!(list.iter_back_from(i).copied().collect::<Vec<_>>(), back);
        }
        assert_eq!(list.get(all.len()), None);
        assert_eq!(list.get(all.len().wrapping_sub(1)), all.last());
        assert_eq!(list.iter_from(all.len()).count(), 0);
        assert_eq!(list.iter_back_from(all.len()).count(), 0);
        for probe in [0u16, 1, 999, 1500, 2999, 3000] {
            assert_eq!(
                list.partition_point(|&x| x < probe),
                all.partition_point(|&x| x < probe)
            );
            assert_eq!(list.rank(&probe), all.binary_search(&probe).ok());
        }
        for c in &list.chunks {
            assert!(!c.is_empty() && c.len() <= CHUNK_MAX);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn behaves_as_an_ordered_set_with_positions(ops in proptest::collection::vec(op(), 1..4000)) {
            let mut list = OrderList::default();
            let mut model = BTreeSet::new();
            for (n, op) in ops.iter().enumerate() {
                match *op {
                    Op::Insert(v) => prop_assert_eq!(list.insert(v), model.insert(v)),
                    Op::Remove(v) => prop_assert_eq!(list.remove(&v), model.remove(&v)),
                }
                if n % 500 == 0 {
                    check(&list, &model);
                }
            }
            check(&list, &model);
        }
    }

    #[test]
    fn emptied_and_refilled() {
        let mut list = OrderList::default();
        let mut model = BTreeSet::new();
        for v in 0..5000u16 {
            list.insert(v);
            model.insert(v);
        }
        check(&list, &model);
        for v in (0..5000u16).filter(|v| v % 3 != 0) {
            assert!(list.remove(&v));
            model.remove(&v);
        }
        check(&list, &model);
        for v in 0..5000u16 {
            list.remove(&v);
        }
        assert_eq!(list.len(), 0);
        assert_eq!(list.partition_point(|_| true), 0);
        assert!(list.insert(7));
        assert_eq!(list.rank(&7), Some(0));
    }
}
