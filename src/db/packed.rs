//! A packed list of byte strings in one allocation (our listpack).
//!
//! Each element is stored as a varint length followed by its bytes. Small
//! hashes (field, value, field, value…) and small sorted sets (member,
//! score…) live in this form: one allocation and one or two bytes of
//! overhead per element, instead of a pointer and a heap block each. (Lists
//! and streams use Redis's own listpack, `listpack.rs`: their nodes go to
//! dumps as they are.)
//! Operations are linear scans, which is what the size limits
//! (`*-max-listpack-*`) are for.

/// A packed sequence of byte strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    buf: Vec<u8>,
    count: u32,
}

fn varint_len(n: usize) -> usize {
    let mut n = n;
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Decode a varint at `pos`: (value, bytes used).
#[inline]
fn get_varint(buf: &[u8], pos: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = pos;
    loop {
        let b = buf[i];
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b < 0x80 {
            return (n, i - pos);
        }
        shift += 7;
    }
}

fn encode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(varint_len(v.len()) + v.len());
    put_varint(&mut out, v.len());
    out.extend_from_slice(v);
    out
}

/// Iterator over the elements of a [`Packed`].
pub struct Iter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let (len, used) = get_varint(self.buf, self.pos);
        let start = self.pos + used;
        self.pos = start + len;
        Some(&self.buf[start..start + len])
    }
}

impl Packed {
    pub fn new() -> Packed {
        Packed::default()
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the packed representation.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn heap_size(&self) -> usize {
        self.buf.capacity()
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            pos: 0,
        }
    }

    /// Byte offset of element `i` (or the end when `i == len`).
    fn offset_of(&self, i: usize) -> usize {
        let mut pos = 0;
        for _ in 0..i {
            let (len, used) = get_varint(&self.buf, pos);
            pos += used + len;
        }
        pos
    }

    /// The element at `pos` and the offset after it.
    fn element_at(&self, pos: usize) -> (&[u8], usize) {
        let (len, used) = get_varint(&self.buf, pos);
        (&self.buf[pos + used..pos + used + len], pos + used + len)
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len() {
            return None;
        }
        Some(self.element_at(self.offset_of(i)).0)
    }

    pub fn push_back(&mut self, v: &[u8]) {
        // Exact growth: small collections live here, and doubling would
        // waste up to half of each one.
        if self.buf.capacity() - self.buf.len() < varint_len(v.len()) + v.len() {
            self.buf.reserve_exact(varint_len(v.len()) + v.len());
        }
        put_varint(&mut self.buf, v.len());
        self.buf.extend_from_slice(v);
        self.count += 1;
    }

    pub fn push_front(&mut self, v: &[u8]) {
        self.insert(0, v);
    }

    /// Room for `bytes` more of packed elements, exactly (a loader that
    /// knows what it will add).
    pub fn reserve_exact(&mut self, bytes: usize) {
        self.buf.reserve_exact(bytes);
    }

    /// Bytes element `v` takes packed.
    pub fn packed_len(v: &[u8]) -> usize {
        varint_len(v.len()) + v.len()
    }

    /// Insert `v` so that it becomes element `i` (`i <= len`).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        if i >= self.len() {
            return self.push_back(v);
        }
        let pos = self.offset_of(i);
        let enc = encode(v);
        self.buf.reserve_exact(enc.len());
        self.buf.splice(pos..pos, enc);
        self.count += 1;
    }

    /// Remove element `i`, returning it.
    pub fn remove(&mut self, i: usize) -> Option<Vec<u8>> {
        if i >= self.len() {
            return None;
        }
        let pos = self.offset_of(i);
        let (v, end) = self.element_at(pos);
        let out = v.to_vec();
        self.buf.drain(pos..end);
        self.count -= 1;
        Some(out)
    }

    /// Remove `n` elements starting at `i`.
    pub fn remove_range(&mut self, i: usize, n: usize) {
        let n = n.min(self.len().saturating_sub(i));
        if n == 0 {
            return;
        }
        let start = self.offset_of(i);
        let mut end = start;
        for _ in 0..n {
            end = self.element_at(end).1;
        }
        self.buf.drain(start..end);
        self.count -= n as u32;
    }

    /// Replace element `i` with `v`.
    pub fn set(&mut self, i: usize, v: &[u8]) {
        if i >= self.len() {
            return;
        }
        let pos = self.offset_of(i);
        let end = self.element_at(pos).1;
        self.buf.splice(pos..end, encode(v));
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.remove(0)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let n = self.len();
        if n == 0 {
            None
        } else {
            self.remove(n - 1)
        }
    }

    /// Index of the first element equal to `v` at an even position (a
    /// field or member of a pair list), searching pairs.
    pub fn find_pair(&self, key: &[u8]) -> Option<usize> {
        let mut it = self.iter();
        let mut i = 0;
        while let Some(k) = it.next() {
            if k == key {
                return Some(i);
            }
            it.next();
            i += 2;
        }
        None
    }

    pub fn shrink_to_fit(&mut self) {
        self.buf.shrink_to_fit();
    }
}

impl<'a> FromIterator<&'a [u8]> for Packed {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> Packed {
        let mut p = Packed::new();
        for v in iter {
            p.push_back(v);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_get_insert_remove() {
        let mut p = Packed::new();
        p.push_back(b"b");
        p.push_front(b"a");
        p.push_back(&[7u8; 300]);
        p.insert(2, b"c");
        assert_eq!(p.len(), 4);
        assert_eq!(p.get(0), Some(&b"a"[..]));
        assert_eq!(p.get(2), Some(&b"c"[..]));
        assert_eq!(p.get(3).unwrap().len(), 300);
        p.set(1, b"bbbb");
        assert_eq!(p.remove(1).unwrap(), b"bbbb");
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            vec![&b"a"[..], &b"c"[..], &[7u8; 300][..]]
        );
        assert_eq!(p.pop_back().unwrap().len(), 300);
        p.remove_range(0, 5);
        assert!(p.is_empty());
    }

    #[test]
    fn finds_pairs() {
        let p: Packed = [&b"f1"[..], b"v1", b"f2", b"f1"].into_iter().collect();
        assert_eq!(p.find_pair(b"f2"), Some(2));
        assert_eq!(p.find_pair(b"v1"), None);
        assert_eq!(p.find_pair(b"f1"), Some(0));
    }
}
