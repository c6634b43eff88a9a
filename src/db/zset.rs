//! Sorted sets: members ordered by (score, member).
//!
//! Small sets are packed (`listpack`): member, score (8 raw bytes), … kept in
//! order, so ranges are slices of one allocation. Past
//! `zset-max-listpack-entries` members or `zset-max-listpack-value` bytes they
//! become a B-tree ordered by (score, member) plus a member → score map
//! (Redis's skiplist + dict; the B-tree answers score and lex ranges in
//! O(log n), rank-based access walks from the nearer end).

use std::collections::{BTreeSet, HashMap};

use super::packed::Packed;

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

type Key = (Score, Box<[u8]>);

#[derive(Debug, Clone, Default)]
pub struct Tree {
    order: BTreeSet<Key>,
    scores: HashMap<Box<[u8]>, f64, foldhash::fast::RandomState>,
}

#[derive(Debug, Clone)]
pub enum ZSet {
    Packed(Packed),
    Tree(Tree),
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
    /// A new sorted set sized for `hint` members of at most `maxlen` bytes.
    pub fn with_hint(hint: usize, maxlen: usize, max_entries: usize, max_value: usize) -> ZSet {
        if hint <= max_entries && maxlen <= max_value {
            ZSet::Packed(Packed::new())
        } else {
            ZSet::Tree(Tree::default())
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
            ZSet::Tree(t) => t.order.iter().map(|(_, m)| 2 * m.len() + 64).sum(),
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
            ZSet::Tree(t) => t.scores.get(member).copied(),
        }
    }

    fn convert_to_tree(&mut self) {
        if let ZSet::Packed(p) = self {
            let mut t = Tree::default();
            let mut it = p.iter();
            while let (Some(m), Some(s)) = (it.next(), it.next()) {
                let score = bytes_score(s);
                t.order.insert((Score(score), m.into()));
                t.scores.insert(m.into(), score);
            }
            *self = ZSet::Tree(t);
        }
    }

    /// Insert or update a member's score.
    pub fn insert(&mut self, member: &[u8], score: f64, max_entries: usize, max_value: usize) {
        // -0 and 0 are the same score (Redis replies "0" for both).
        let score = score + 0.0;
        self.remove(member);
        if let ZSet::Packed(p) = self {
            if p.len() / 2 + 1 > max_entries || member.len() > max_value {
                self.convert_to_tree();
            }
        }
        match self {
            ZSet::Packed(p) => {
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
            ZSet::Tree(t) => {
                t.order.insert((Score(score), member.into()));
                t.scores.insert(member.into(), score);
            }
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
            ZSet::Tree(t) => match t.scores.remove(member) {
                Some(s) => {
                    t.order.remove(&(Score(s), member.into()));
                    true
                }
                None => false,
            },
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
            ZSet::Tree(t) => t.order.iter().map(|(s, m)| (&m[..], s.0)).collect(),
        }
    }

    /// Elements by rank `start..=end` (0-based, ascending; already clamped),
    /// reversed ranks when `rev`.
    pub fn range_by_rank(&self, start: usize, end: usize, rev: bool) -> Vec<(Vec<u8>, f64)> {
        let n = end + 1 - start;
        match self {
            ZSet::Tree(t) if !rev => t
                .order
                .iter()
                .skip(start)
                .take(n)
                .map(|(s, m)| (m.to_vec(), s.0))
                .collect(),
            ZSet::Tree(t) => t
                .order
                .iter()
                .rev()
                .skip(start)
                .take(n)
                .map(|(s, m)| (m.to_vec(), s.0))
                .collect(),
            ZSet::Packed(_) => {
                let items = self.items();
                let iter: Box<dyn Iterator<Item = &(&[u8], f64)>> = if rev {
                    Box::new(items.iter().rev())
                } else {
                    Box::new(items.iter())
                };
                iter.skip(start)
                    .take(n)
                    .map(|(m, s)| (m.to_vec(), *s))
                    .collect()
            }
        }
    }

    /// Rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match self {
            ZSet::Packed(_) => self.items().iter().position(|(m, _)| *m == member),
            ZSet::Tree(t) => {
                let s = *t.scores.get(member)?;
                Some(t.order.range(..(Score(s), member.into())).count())
            }
        }
    }

    /// Elements matching `keep`, ascending (or descending when `rev`).
    pub fn filter(&self, rev: bool, keep: &dyn Fn(&[u8], f64) -> bool) -> Vec<(Vec<u8>, f64)> {
        let items = self.items();
        let iter: Box<dyn Iterator<Item = &(&[u8], f64)>> = if rev {
            Box::new(items.iter().rev())
        } else {
            Box::new(items.iter())
        };
        iter.filter(|(m, s)| keep(m, *s))
            .map(|(m, s)| (m.to_vec(), *s))
            .collect()
    }
}
