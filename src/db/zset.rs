//! Sorted sets: members ordered by (score, member).
//!
//! Small sets are packed (`listpack`): member, score (8 raw bytes), … kept in
//! order, so ranges are slices of one allocation. Past
//! `zset-max-listpack-entries` members or `zset-max-listpack-value` bytes they
//! become an order-statistic list ordered by (score, member) plus a member
//! → score map (Redis's skiplist + dict): score and lex ranges, ranks and
//! positions in O(log n), as the skiplist's spans give Redis.

use super::entry::{Entry, NewValue, ValueRef};
use super::table::Table;

use super::packed::Packed;
use super::zorder::OrderList;

/// A score with the total order Redis uses (scores are never NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .partial_cmp(&other.0)
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

/// A position in the order: a score and the member's entry in
/// `Tree::members`. The member bytes are read through the pointer, so each
/// member is stored once.
#[derive(Clone, Copy, Debug)]
struct OrderKey {
    score: f64,
    entry: *const u8,
}

impl OrderKey {
    fn member(&self) -> &[u8] {
        // SAFETY: real keys point at entries owned by the same Tree's table,
        // which are removed from the order before they are freed.
        unsafe { Entry::key_at(self.entry) }
    }
}

impl PartialEq for OrderKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for OrderKey {}

impl PartialOrd for OrderKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        match Score(self.score).cmp(&Score(other.score)) {
            Equal => {}
            o => return o,
        }
        if self.entry == other.entry {
            return Equal;
        }
        self.member().cmp(other.member())
    }
}

/// The large encoding: member → score in a keyspace-style table (the score
/// lives in the entry), and the (score, member) order in an order-statistic
/// list of pointers to those entries.
pub struct Tree {
    order: OrderList<OrderKey>,
    members: Table,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            order: OrderList::default(),
            members: Table::new(crate::util::random_u64()),
        }
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("len", &self.order.len())
            .finish()
    }
}

fn entry_score(e: &Entry) -> f64 {
    match e.value() {
        ValueRef::Int(bits) => f64::from_bits(bits as u64),
        _ => 0.0,
    }
}

impl Tree {
    /// The member → score table (DEBUG HTSTATS-KEY).
    pub fn members_table(&self) -> &Table {
        &self.members
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        self.members.get(member).map(entry_score)
    }

    fn insert(&mut self, member: &[u8], score: f64) {
        let e = Entry::new(member, NewValue::Int(score.to_bits() as i64), false);
        let ptr = e.as_raw();
        self.members.insert_new(e);
        self.order.insert(OrderKey { score, entry: ptr });
    }

    fn remove(&mut self, member: &[u8]) -> bool {
        let Some(e) = self.members.get(member) else {
            return false;
        };
        let key = OrderKey {
            score: entry_score(e),
            entry: e.as_raw(),
        };
        self.order.remove(&key);
        self.members.remove(member);
        true
    }

    fn rank(&self, member: &[u8]) -> Option<usize> {
        let e = self.members.get(member)?;
        let key = OrderKey {
            score: entry_score(e),
            entry: e.as_raw(),
        };
        self.order.rank(&key)
    }

    /// Positions `lo..hi` of the scores inside `min..max` in the order.
    fn score_span(&self, min: f64, minex: bool, max: f64, maxex: bool) -> (usize, usize) {
        let lo = self
            .order
            .partition_point(|k| if minex { k.score <= min } else { k.score < min });
        let hi = self
            .order
            .partition_point(|k| if maxex { k.score < max } else { k.score <= max });
        (lo, hi.max(lo))
    }

    /// [`lex_start`] in the order, the candidate found by bisection (which
    /// is Redis's answer whenever the members in range share a score).
    fn lex_start(
        &self,
        gte_min: &dyn Fn(&[u8]) -> bool,
        lte_max: &dyn Fn(&[u8]) -> bool,
        rev: bool,
    ) -> Option<usize> {
        let order = &self.order;
        let member = |i: usize| order.get(i).map_or(&[][..], |k| k.member());
        let find = || {
            if rev {
                order
                    .partition_point(|k| lte_max(k.member()))
                    .checked_sub(1)
            } else {
                Some(order.partition_point(|k| !gte_min(k.member())))
            }
        };
        lex_start(order.len(), member, gte_min, lte_max, rev, find)
    }
}

/// `items` ascending, or descending when `rev`.
fn ordered<T>(items: &[T], rev: bool) -> Box<dyn Iterator<Item = &T> + '_> {
    if rev {
        Box::new(items.iter().rev())
    } else {
        Box::new(items.iter())
    }
}

/// Where Redis's lex walk starts (zzlFirstInLexRange / zzlLastInLexRange
/// and their skiplist twins), over `len` members read by position: nowhere
/// when the last member is below the minimum or the first above the
/// maximum; else `find`'s candidate (the first member at or above the
/// minimum; from the highest, the last at or below the maximum), which must
/// be inside the other bound too.
fn lex_start<'a>(
    len: usize,
    member: impl Fn(usize) -> &'a [u8],
    gte_min: &dyn Fn(&[u8]) -> bool,
    lte_max: &dyn Fn(&[u8]) -> bool,
    rev: bool,
    find: impl FnOnce() -> Option<usize>,
) -> Option<usize> {
    if len == 0 || !gte_min(member(len - 1)) || !lte_max(member(0)) {
        return None;
    }
    let start = find().filter(|&p| p < len)?;
    let other_bound = if rev { gte_min } else { lte_max };
    other_bound(member(start)).then_some(start)
}

/// A tree key as the (member, score) the commands reply with.
fn owned(k: &OrderKey) -> (Vec<u8>, f64) {
    (k.member().to_vec(), k.score)
}

fn score_inside(s: f64, min: f64, minex: bool, max: f64, maxex: bool) -> bool {
    (if minex { s > min } else { s >= min }) && (if maxex { s < max } else { s <= max })
}

impl Clone for Tree {
    fn clone(&self) -> Tree {
        let mut t = Tree::default();
        for k in self.order.iter() {
            t.insert(k.member(), k.score);
        }
        t
    }
}

/// A member met by [`ZSet::visit_score_range`], its bytes read on demand.
#[derive(Clone, Copy)]
pub struct MemberRef<'a>(MemberAt<'a>);

#[derive(Clone, Copy)]
enum MemberAt<'a> {
    /// In a packed set, where the scan already has it.
    Bytes(&'a [u8]),
    /// Behind a tree key's pointer.
    Key(&'a OrderKey),
}

impl<'a> MemberRef<'a> {
    pub fn bytes(self) -> &'a [u8] {
        match self.0 {
            MemberAt::Bytes(b) => b,
            MemberAt::Key(k) => k.member(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum ZSet {
    Packed(Packed),
    Tree(Box<Tree>),
}

fn score_bytes(s: f64) -> [u8; 8] {
    s.to_le_bytes()
}

fn bytes_score(b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    f64::from_le_bytes(a)
}

fn before(a: (f64, &[u8]), b: (f64, &[u8])) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
}

impl ZSet {
    /// A packed sorted set of `pairs` as they are, when they are in order
    /// (by score, then member) with no member twice and no NaN: what a
    /// loader builds from a dump without searching for each member's
    /// place. `None` when they are not.
    pub fn packed_from_sorted(pairs: &[(&[u8], f64)]) -> Option<ZSet> {
        if pairs.iter().any(|(_, s)| s.is_nan()) {
            return None;
        }
        let sorted = pairs
            .windows(2)
            .all(|w| before((w[0].1, w[0].0), (w[1].1, w[1].0)));
        if !sorted {
            return None;
        }
        // In order by score, a member seen twice need not be adjacent.
        let mut members: Vec<&[u8]> = pairs.iter().map(|(m, _)| *m).collect();
        members.sort_unstable();
        if members.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let mut p = Packed::new();
        p.reserve_exact(pairs.iter().map(|(m, _)| Packed::packed_len(m) + 9).sum());
        for &(m, s) in pairs {
            p.push_back(m);
            // As `insert`: -0 kept as 0 in the compact form.
            p.push_back(&score_bytes(s + 0.0));
        }
        Some(ZSet::Packed(p))
    }

    /// Allocations freed when it is dropped (see `lazyfree`).
    pub fn free_effort(&self) -> usize {
        match self {
            ZSet::Packed(_) => 1,
            ZSet::Tree(_) => self.len(),
        }
    }

    /// A new sorted set sized for `hint` members of at most `maxlen` bytes.
    pub fn with_hint(hint: usize, maxlen: usize, max_entries: usize, max_value: usize) -> ZSet {
        if hint <= max_entries && maxlen <= max_value {
            ZSet::Packed(Packed::new())
        } else {
            ZSet::Tree(Box::default())
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Packed(_) => "listpack",
            ZSet::Tree(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSet::Packed(p) => p.len() / 2,
            ZSet::Tree(t) => t.order.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn heap_size(&self) -> usize {
        match self {
            ZSet::Packed(p) => p.heap_size(),
            ZSet::Tree(t) => {
                t.order.heap_bytes()
                    + t.members.overhead_bytes()
                    + t.order.iter().map(|k| k.member().len() + 16).sum::<usize>()
            }
        }
    }

    /// [`ZSet::heap_size`] with the members' bytes estimated from the
    /// first `samples` of them (MEMORY USAGE … SAMPLES).
    pub fn heap_size_sampled(&self, samples: usize) -> usize {
        match self {
            ZSet::Tree(t) if t.order.len() > samples => {
                let seen: usize = t
                    .order
                    .iter()
                    .take(samples)
                    .map(|k| k.member().len() + 16)
                    .sum();
                t.order.heap_bytes()
                    + t.members.overhead_bytes()
                    + seen / samples.max(1) * t.order.len()
            }
            _ => self.heap_size(),
        }
    }

    /// A rehash of the member table in progress moves on a step (see
    /// `Set::rehash_step`).
    pub fn rehash_step(&mut self) {
        if let ZSet::Tree(t) = self {
            t.members.rehash_step();
        }
    }

    /// The member table of the large encoding, for a cursor scan (ZSCAN);
    /// `None` for a packed set, which is returned whole.
    pub fn members_table(&self) -> Option<&Table> {
        match self {
            ZSet::Packed(_) => None,
            ZSet::Tree(t) => Some(&t.members),
        }
    }

    /// The score an entry of `members_table` holds.
    pub fn table_entry_score(e: &Entry) -> f64 {
        entry_score(e)
    }

    /// A uniformly random member, without materialising the set (a rehash
    /// step first).
    pub fn random_member(&mut self, rand: &mut dyn FnMut() -> u64) -> Option<Vec<u8>> {
        self.rehash_step();
        match self {
            ZSet::Packed(p) if !p.is_empty() => {
                let i = (rand() as usize) % (p.len() / 2);
                p.get(2 * i).map(|m| m.to_vec())
            }
            ZSet::Packed(_) => None,
            ZSet::Tree(t) => t.members.fair_random_entry(rand).map(|e| e.key().to_vec()),
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Packed(p) => {
                let mut it = p.iter();
                while let (Some(m), Some(s)) = (it.next(), it.next()) {
                    if m == member {
                        return Some(bytes_score(s));
                    }
                }
                None
            }
            ZSet::Tree(t) => t.score(member),
        }
    }

    /// Convert a listpack-encoded set to the skiplist encoding (also what
    /// Redis's SORT does to a sorted set it sorts).
    pub fn convert_to_tree(&mut self) {
        if let ZSet::Packed(p) = self {
            let mut t = Box::<Tree>::default();
            let mut it = p.iter();
            while let (Some(m), Some(s)) = (it.next(), it.next()) {
                t.insert(m, bytes_score(s));
            }
            *self = ZSet::Tree(t);
        }
    }

    /// Insert or update a member's score. Only a new member converts a
    /// listpack past the limits: an update stays in place, as Redis's
    /// zsetAdd (even when the limits were lowered since).
    pub fn insert(&mut self, member: &[u8], score: f64, max_entries: usize, max_value: usize) {
        let existed = self.remove(member);
        if let ZSet::Packed(p) = self {
            if !existed && (p.len() / 2 + 1 > max_entries || member.len() > max_value) {
                self.convert_to_tree();
            }
        }
        match self {
            ZSet::Packed(p) => {
                // A listpack keeps -0 as the integer 0 (Redis's "-0" entry
                // reads back as 0); the large encoding keeps the double,
                // sign and all, as Redis's skiplist does.
                let score = score + 0.0;
                let mut idx = 0;
                let mut it = p.iter();
                while let (Some(m), Some(s)) = (it.next(), it.next()) {
                    if before((score, member), (bytes_score(s), m)) {
                        break;
                    }
                    idx += 2;
                }
                p.insert(idx, member);
                p.insert(idx + 1, &score_bytes(score));
            }
            ZSet::Tree(t) => t.insert(member, score),
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            ZSet::Packed(p) => match p.find_pair(member) {
                Some(i) => {
                    p.remove_range(i, 2);
                    true
                }
                None => false,
            },
            ZSet::Tree(t) => t.remove(member),
        }
    }

    /// All (member, score) in ascending order.
    pub fn items(&self) -> Vec<(&[u8], f64)> {
        match self {
            ZSet::Packed(p) => {
                let mut out = Vec::with_capacity(p.len() / 2);
                let mut it = p.iter();
                while let (Some(m), Some(s)) = (it.next(), it.next()) {
                    out.push((m, bytes_score(s)));
                }
                out
            }
            ZSet::Tree(t) => t.order.iter().map(|k| (k.member(), k.score)).collect(),
        }
    }

    /// Elements by rank `start..=end` (0-based; already clamped), ranks
    /// counted from the highest when `rev`.
    pub fn range_by_rank(&self, start: usize, end: usize, rev: bool) -> Vec<(Vec<u8>, f64)> {
        let n = end + 1 - start;
        match self {
            ZSet::Tree(t) if !rev => t.order.iter_from(start).take(n).map(owned).collect(),
            ZSet::Tree(t) => t
                .order
                .iter_back_from(t.order.len() - 1 - start)
                .take(n)
                .map(owned)
                .collect(),
            ZSet::Packed(_) => ordered(&self.items(), rev)
                .skip(start)
                .take(n)
                .map(|(m, s)| (m.to_vec(), *s))
                .collect(),
        }
    }

    /// Rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match self {
            ZSet::Packed(_) => self.items().iter().position(|(m, _)| *m == member),
            ZSet::Tree(t) => t.rank(member),
        }
    }

    /// Elements with scores in `min..max` (bounds exclusive when flagged),
    /// ascending or descending, `offset` of them skipped and at most
    /// `limit` returned; the large encoding goes straight to the first.
    #[allow(clippy::too_many_arguments)]
    pub fn score_range(
        &self,
        min: f64,
        minex: bool,
        max: f64,
        maxex: bool,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Vec<(Vec<u8>, f64)> {
        let limit = limit.unwrap_or(usize::MAX);
        match self {
            ZSet::Tree(t) => {
                let (lo, hi) = t.score_span(min, minex, max, maxex);
                let n = (hi - lo).saturating_sub(offset).min(limit);
                if n == 0 {
                    return Vec::new();
                }
                if rev {
                    t.order
                        .iter_back_from(hi - 1 - offset)
                        .take(n)
                        .map(owned)
                        .collect()
                } else {
                    t.order.iter_from(lo + offset).take(n).map(owned).collect()
                }
            }
            ZSet::Packed(_) => ordered(&self.items(), rev)
                .filter(|(_, s)| score_inside(*s, min, minex, max, maxex))
                .skip(offset)
                .take(limit)
                .map(|(m, s)| (m.to_vec(), *s))
                .collect(),
        }
    }

    /// How many scores are in `min..max` (ZCOUNT), without visiting them
    /// in the large encoding.
    pub fn count_score_range(&self, min: f64, minex: bool, max: f64, maxex: bool) -> usize {
        match self {
            ZSet::Tree(t) => {
                let (lo, hi) = t.score_span(min, minex, max, maxex);
                hi - lo
            }
            ZSet::Packed(_) => self
                .items()
                .iter()
                .filter(|(_, s)| score_inside(*s, min, minex, max, maxex))
                .count(),
        }
    }

    /// Visit the members with scores in `min <= score < max`, in order,
    /// until `visit` returns false (the geo commands' scan of one geohash
    /// box). Members are handed over as [`MemberRef`]s, read only if the
    /// visitor asks: most candidates of a search are rejected by score.
    pub fn visit_score_range<'a>(
        &'a self,
        min: f64,
        max: f64,
        mut visit: impl FnMut(f64, MemberRef<'a>) -> bool,
    ) {
        // An empty (or NaN) range.
        if min.partial_cmp(&max) != Some(std::cmp::Ordering::Less) {
            return;
        }
        match self {
            ZSet::Tree(t) => {
                let lo = t.order.partition_point(|k| k.score < min);
                for k in t.order.iter_from(lo) {
                    if k.score >= max || !visit(k.score, MemberRef(MemberAt::Key(k))) {
                        return;
                    }
                }
            }
            ZSet::Packed(p) => {
                let mut it = p.iter();
                while let (Some(m), Some(s)) = (it.next(), it.next()) {
                    let score = bytes_score(s);
                    if score < min {
                        continue;
                    }
                    if score >= max || !visit(score, MemberRef(MemberAt::Bytes(m))) {
                        return;
                    }
                }
            }
        }
    }

    /// A lex range walked as Redis walks it (zzlFirstInLexRange /
    /// zslFirstInLexRange and the loops after them), which decides what
    /// a set whose scores differ answers: nothing unless the last member
    /// is at or above the minimum and the first at or below the maximum;
    /// the start is the first member at or above the minimum (from the
    /// highest: the last at or below the maximum) and must be inside the
    /// other bound too; `offset` members after it are skipped unchecked;
    /// then members are taken while inside the far bound, `limit` at most.
    /// `gte_min`/`lte_max` test a member against the bounds; the caller
    /// has checked that the range is not empty (min above max).
    pub fn lex_range(
        &self,
        gte_min: &dyn Fn(&[u8]) -> bool,
        lte_max: &dyn Fn(&[u8]) -> bool,
        rev: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Vec<(Vec<u8>, f64)> {
        let limit = limit.unwrap_or(usize::MAX);
        let far: &dyn Fn(&[u8]) -> bool = if rev { gte_min } else { lte_max };
        let take = |it: &mut dyn Iterator<Item = (&[u8], f64)>| -> Vec<(Vec<u8>, f64)> {
            it.skip(offset)
                .take_while(|(m, _)| far(m))
                .take(limit)
                .map(|(m, s)| (m.to_vec(), s))
                .collect()
        };
        match self {
            ZSet::Packed(_) => {
                let items = self.items();
                let find = || {
                    if rev {
                        items.iter().rposition(|(m, _)| lte_max(m))
                    } else {
                        items.iter().position(|(m, _)| gte_min(m))
                    }
                };
                let member = |i: usize| items[i].0;
                let Some(start) = lex_start(items.len(), member, gte_min, lte_max, rev, find)
                else {
                    return Vec::new();
                };
                if rev {
                    take(&mut items[..=start].iter().rev().copied())
                } else {
                    take(&mut items[start..].iter().copied())
                }
            }
            ZSet::Tree(t) => {
                let Some(start) = t.lex_start(gte_min, lte_max, rev) else {
                    return Vec::new();
                };
                fn key(k: &OrderKey) -> (&[u8], f64) {
                    (k.member(), k.score)
                }
                if rev {
                    take(&mut t.order.iter_back_from(start).map(key))
                } else {
                    take(&mut t.order.iter_from(start).map(key))
                }
            }
        }
    }

    /// How many members a lex range holds (ZLEXCOUNT): [`ZSet::lex_range`]'s
    /// walk from the lowest, counted by position in the large encoding.
    pub fn lex_count(
        &self,
        gte_min: &dyn Fn(&[u8]) -> bool,
        lte_max: &dyn Fn(&[u8]) -> bool,
    ) -> usize {
        match self {
            ZSet::Packed(_) => self.lex_range(gte_min, lte_max, false, 0, None).len(),
            ZSet::Tree(t) => match t.lex_start(gte_min, lte_max, false) {
                Some(start) => t
                    .order
                    .partition_point(|k| lte_max(k.member()))
                    .saturating_sub(start),
                None => 0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loader_packs_sorted_pairs_and_refuses_the_rest() {
        let pairs: [(&[u8], f64); 3] = [(b"b", -0.0), (b"a", 1.0), (b"c", 1.0)];
        let z = ZSet::packed_from_sorted(&pairs).expect("in order");
        let mut built = ZSet::with_hint(3, 1, 128, 64);
        for (m, s) in pairs {
            built.insert(m, s, 128, 64);
        }
        assert_eq!(z.items(), built.items());
        assert_eq!(z.encoding(), "listpack");
        // Out of order, a member twice (not side by side), a NaN.
        assert!(ZSet::packed_from_sorted(&[(b"a", 2.0), (b"b", 1.0)]).is_none());
        assert!(ZSet::packed_from_sorted(&[(b"b", 1.0), (b"a", 1.0)]).is_none());
        assert!(ZSet::packed_from_sorted(&[(b"a", 1.0), (b"b", 2.0), (b"a", 3.0)]).is_none());
        assert!(ZSet::packed_from_sorted(&[(b"a", f64::NAN)]).is_none());
    }
}
