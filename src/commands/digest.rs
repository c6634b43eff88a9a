//! DEBUG DIGEST and DEBUG DIGEST-VALUE: Redis's SHA-1 based digest of the
//! dataset and of single values (debug.c), so that a replica, an AOF
//! reload or a redis-server holding the same data can be compared with
//! this server by one line.
//!
//! The digest is Redis's exactly: element digests are XORed together where
//! the order is not defined (set members, hash fields, sorted-set members,
//! the keys of a database) and chained (`mix`) where it is (list elements,
//! stream entries), a TTL adds a fixed marker, and numbers are hashed in
//! the decimal form Redis gives them (`%.17g` for scores).

use super::*;
use crate::db::{Hash, List, StreamId, Value, ZSet};
use crate::protocol::reply::format_double;
use crate::util::sha1;

pub type Digest = [u8; 20];

/// digest ^= SHA1(data) (Redis's xorDigest).
fn xor(digest: &mut Digest, data: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(data)) {
        *d ^= h;
    }
}

/// digest = SHA1(digest ^ SHA1(data)) (Redis's mixDigest): order matters.
fn mix(digest: &mut Digest, data: &[u8]) {
    xor(digest, data);
    *digest = sha1(digest);
}

/// Redis's type codes (OBJ_STRING, OBJ_LIST, …), hashed first.
fn type_code(v: Option<&Value>) -> u32 {
    match v {
        None | Some(Value::Str(_)) => 0,
        Some(Value::List(_)) => 1,
        Some(Value::Set(_)) => 2,
        Some(Value::ZSet(_)) => 3,
        Some(Value::Hash(_)) => 4,
        Some(Value::Stream(_)) => 6,
    }
}

/// Mix a key's value (and its TTL marker) into `digest` (Redis's
/// xorObjectDigest).
fn value_digest(digest: &mut Digest, e: &crate::db::Entry, has_ttl: bool) {
    let boxed = match e.value() {
        ValueRef::Boxed(v) => Some(v),
        _ => None,
    };
    mix(digest, &type_code(boxed).to_be_bytes());
    match boxed {
        None | Some(Value::Str(_)) => {
            let s = super::string::string_bytes(e).unwrap_or_default();
            mix(digest, &s);
        }
        Some(Value::List(l)) => list_digest(digest, l),
        Some(Value::Set(s)) => {
            for m in s.members() {
                xor(digest, &m);
            }
        }
        Some(Value::ZSet(z)) => zset_digest(digest, z),
        Some(Value::Hash(h)) => hash_digest(digest, h),
        Some(Value::Stream(st)) => {
            let (first, last) = (
                StreamId { ms: 0, seq: 0 },
                StreamId {
                    ms: u64::MAX,
                    seq: u64::MAX,
                },
            );
            st.range(first, last, false, &mut |entry| {
                mix(
                    digest,
                    format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes(),
                );
                for (f, v) in &entry.fields {
                    mix(digest, &f.to_vec());
                    mix(digest, &v.to_vec());
                }
                true
            });
        }
    }
    if has_ttl {
        xor(digest, b"!!expire!!");
    }
}

/// The digest of one key's value, marked when it has a TTL (DEBUG
/// DIGEST-VALUE's; the RESTORE fuzz target compares a value with its DUMP
/// round trip by it).
pub fn entry_digest(e: &crate::db::Entry, has_ttl: bool) -> Digest {
    let mut digest = [0u8; 20];
    value_digest(&mut digest, e, has_ttl);
    digest
}

fn list_digest(digest: &mut Digest, l: &List) {
    // Integer elements in their decimal form, as Redis's listTypeGet.
    l.for_each(&mut |item| mix(digest, &item.to_vec()));
}

fn zset_digest(digest: &mut Digest, z: &ZSet) {
    for (member, score) in z.items() {
        let mut element = [0u8; 20];
        mix(&mut element, member);
        mix(&mut element, format_double(score).as_bytes());
        xor(digest, &element);
    }
}

fn hash_digest(digest: &mut Digest, h: &Hash) {
    h.for_each(&mut |field, value| {
        let mut element = [0u8; 20];
        mix(&mut element, field);
        mix(&mut element, value);
        xor(digest, &element);
    });
}

/// The digest of the whole dataset (Redis's computeDatasetDigest): 40 zeros
/// when it is empty.
pub fn dataset_digest(srv: &Server) -> Digest {
    let mut out = [0u8; 20];
    for (index, db) in srv.dbs.iter().enumerate() {
        if db.main.is_empty() {
            continue;
        }
        mix(&mut out, &(index as u32).to_be_bytes());
        db.main.for_each(&mut |e| {
            let mut digest = [0u8; 20];
            mix(&mut digest, e.key());
            value_digest(&mut digest, e, db.expires.get(e.key()).is_some());
            xor(&mut out, &digest);
        });
    }
    out
}

/// `DEBUG DIGEST` — the dataset's digest as a status line.
pub fn debug_digest(c: &mut Ctx) {
    let d = dataset_digest(c.srv);
    c.cl.reply.simple(&crate::util::hex(&d));
}

/// `DEBUG DIGEST-VALUE key ...` — one digest per key (zeros for a missing
/// key); logically expired keys still count, as in Redis.
pub fn debug_digest_value(c: &mut Ctx, keys: &[&[u8]]) {
    c.cl.reply.array(keys.len());
    for key in keys {
        let db = &c.srv.dbs[c.cl.db];
        let digest = db.main.get(key).map_or([0u8; 20], |e| {
            entry_digest(e, db.expires.get(key).is_some())
        });
        c.cl.reply.simple(&crate::util::hex(&digest));
    }
}
