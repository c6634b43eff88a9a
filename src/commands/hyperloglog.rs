//! HyperLogLog commands (Redis's hyperloglog.c): PFADD, PFCOUNT, PFMERGE,
//! PFDEBUG and PFSELFTEST.
//!
//! A HyperLogLog is a plain string value in Redis's own layout
//! (`db::hll`), so GET, SET, DUMP/RESTORE and RDB files move them between
//! kvstore and Redis unchanged. The commands edit the string in place:
//! it is kept boxed (OBJECT ENCODING "raw", as Redis's are), so repeated
//! PFADDs reuse one buffer.
//!
//! Propagation is Redis's: PFADD and PFMERGE go out as sent when they
//! changed something; PFCOUNT of one key stores the cardinality it computed
//! in the string's header, and like Redis counts that as a change (it
//! signals watchers and is propagated as PFCOUNT, though it is not a write
//! command); PFDEBUG GETREG and TODENSE go out when they converted a sparse
//! HLL to dense, so replicas hold the same bytes.

use super::string::{string_written, unshare_string};
use super::*;
use crate::db::hll::{self, Encoding, HllError, Registers};
use crate::db::{Db, Entry, NewValue, Str, Value, ValueRef};

/// A string that is not a HyperLogLog (Redis's reply to isHLLObjectOrReply).
const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// A HyperLogLog whose registers are corrupt.
const ERR_CORRUPT_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";

fn hll_error(e: HllError) -> &'static str {
    match e {
        HllError::NotHll => ERR_NOT_HLL,
        HllError::Corrupt => ERR_CORRUPT_HLL,
    }
}

/// The HLL an entry holds, or the error Redis replies for one that holds
/// none: WRONGTYPE for another type, the HLL WRONGTYPE for a string (an
/// integer-encoded one included) whose header is not an HLL's.
fn hll_of(e: &Entry) -> Result<(&[u8], Encoding), &'static str> {
    let s: &[u8] = match e.value() {
        ValueRef::Str(s) => s,
        ValueRef::Boxed(Value::Str(s)) => s,
        ValueRef::Int(_) => return Err(ERR_NOT_HLL),
        ValueRef::Boxed(_) => return Err(ERR_WRONGTYPE),
    };
    hll::validate(s)
        .map(|encoding| (s, encoding))
        .map_err(hll_error)
}

/// The HLL at `key` (which holds a string) as a buffer to edit in place
/// (Redis's dbUnshareStringValue): an inline string is boxed first.
fn hll_mut<'d>(db: &'d mut Db, key: &[u8]) -> &'d mut Vec<u8> {
    unshare_string(db, key, 0)
}

/// The buffer of an HLL that is already boxed (the usual case: one
/// lookup); `None` for an inline string, which `hll_mut` boxes.
fn boxed_hll(e: &mut Entry) -> Option<&mut Vec<u8>> {
    match e.boxed_mut() {
        Some(Value::Str(s)) => Some(s.make_mut(0)),
        _ => None,
    }
}

/// Store a new HLL under `key` (absent), boxed so it is edited in place.
fn create_hll(db: &mut Db, key: &[u8], hll: Vec<u8>) {
    let value = NewValue::Boxed(Box::new(Value::Str(Str::new(hll))));
    db.set(Entry::new(key, value, true), false);
}

/// `PFADD key [element ...]`
///
/// Adds the elements to the HyperLogLog at `key`, creating it (sparse)
/// when missing.
///
/// ```text
/// :1   a register changed, or the key was created
/// :0   nothing changed
/// ```
pub fn pfadd(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let key = argv[1];
    let elements = &argv[2..];
    let sparse_max = c.srv.config.hll_sparse_max_bytes;
    let (existed, result) = match lookup_write(c.srv, db, key) {
        Some(e) => {
            if let Err(msg) = hll_of(e) {
                return c.cl.reply.error(msg);
            }
            let h = match boxed_hll(e) {
                Some(h) => h,
                None => hll_mut(&mut c.srv.dbs[db], key),
            };
            (true, add_elements(h, elements, sparse_max, 0))
        }
        None => {
            // The key's creation counts as a change, even with no elements.
            let mut h = hll::new_sparse();
            let result = add_elements(&mut h, elements, sparse_max, 1);
            create_hll(&mut c.srv.dbs[db], key, h);
            (false, result)
        }
    };
    // A corrupt sparse HLL keeps the registers set before the bad one was
    // met, and nothing is signalled or propagated (as in Redis).
    let updated = match result {
        Ok(updated) => updated,
        Err(e) => return c.cl.reply.error(hll_error(e)),
    };
    if updated > 0 {
        string_written(c, key, existed, "pfadd");
        c.dirty(updated);
    }
    c.cl.reply.int((updated > 0) as i64);
}

/// Add `elements` to `h`, counting the registers changed on top of
/// `updated`; any change marks the cached cardinality stale.
fn add_elements(
    h: &mut Vec<u8>,
    elements: &[&[u8]],
    sparse_max: usize,
    mut updated: u64,
) -> Result<u64, HllError> {
    for element in elements {
        if hll::add(h, element, sparse_max)? {
            updated += 1;
        }
    }
    if updated > 0 {
        hll::invalidate_cache(h);
    }
    Ok(updated)
}

/// `PFCOUNT key [key ...]`
///
/// The estimated cardinality of one HLL (its cached value, else computed
/// and cached), or of the union of several (a missing key counts as empty).
///
/// ```text
/// :<count>
/// ```
pub fn pfcount(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    if argv.len() > 2 {
        let mut union = Registers::default();
        for key in &argv[1..] {
            let Some(e) = lookup_read(c.srv, db, key) else {
                continue;
            };
            let merged = hll_of(e).and_then(|(s, _)| union.merge(s).map_err(hll_error));
            if let Err(msg) = merged {
                return c.cl.reply.error(msg);
            }
        }
        return c.cl.reply.int(union.count() as i64);
    }
    let key = argv[1];
    let Some(e) = lookup_read(c.srv, db, key) else {
        return c.cl.reply.int(0);
    };
    if let Err(msg) = hll_of(e) {
        return c.cl.reply.error(msg);
    }
    let h = match boxed_hll(e) {
        Some(h) => h,
        None => hll_mut(&mut c.srv.dbs[db], key),
    };
    if let Some(card) = hll::cached_cardinality(h) {
        return c.cl.reply.int(card as i64);
    }
    match hll::count(h) {
        Ok(card) => {
            hll::store_cardinality(h, card);
            // The cache is part of the string: watchers see a change, and
            // replicas get this PFCOUNT to cache the same bytes.
            c.signal_modified(key);
            c.dirty(1);
            c.cl.reply.int(card as i64);
        }
        Err(e) => c.cl.reply.error(hll_error(e)),
    }
}

/// `PFMERGE destkey [sourcekey ...]`
///
/// Stores at `destkey` the union of the source HLLs and of `destkey`'s own
/// (created when missing); dense when any input was dense.
///
/// ```text
/// +OK
/// ```
pub fn pfmerge(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    let mut union = Registers::default();
    let mut use_dense = false;
    // The destination is read as an input too.
    for key in &argv[1..] {
        let Some(e) = lookup_read(c.srv, db, key) else {
            continue;
        };
        let merged = hll_of(e).and_then(|(s, encoding)| {
            use_dense |= encoding == Encoding::Dense;
            union.merge(s).map_err(hll_error)
        });
        if let Err(msg) = merged {
            return c.cl.reply.error(msg);
        }
    }
    let dest = argv[1];
    let sparse_max = c.srv.config.hll_sparse_max_bytes;
    let existed = lookup_write(c.srv, db, dest).is_some();
    if !existed {
        create_hll(&mut c.srv.dbs[db], dest, hll::new_sparse());
    }
    let h = hll_mut(&mut c.srv.dbs[db], dest);
    let written = (if use_dense {
        hll::to_dense(h).map(|_| ())
    } else {
        Ok(())
    })
    .and_then(|()| union.write_into(h, sparse_max));
    if let Err(e) = written {
        return c.cl.reply.error(hll_error(e));
    }
    hll::invalidate_cache(h);
    // A merge is a mass add: it is published as `pfadd`.
    string_written(c, dest, existed, "pfadd");
    c.dirty(1);
    c.cl.reply.ok();
}

/// `PFDEBUG <GETREG|DECODE|ENCODING|TODENSE> key`
///
/// ```text
/// GETREG    *16384 of :<register>   (converts a sparse HLL to dense)
/// DECODE    $"Z:1000 v:2,1 z:19 …"  (sparse only)
/// ENCODING  +sparse | +dense
/// TODENSE   :1 converted, :0 already dense
/// ```
pub fn pfdebug(c: &mut Ctx, argv: &[&[u8]]) {
    let db = c.cl.db;
    // Redis compares the subcommand as a C string.
    let sub = argv[1].split(|&b| b == 0).next().unwrap_or_default();
    let key = argv[2];
    let Some(e) = lookup_write(c.srv, db, key) else {
        return c.cl.reply.error("ERR The specified key does not exist");
    };
    let encoding = match hll_of(e) {
        Ok((_, encoding)) => encoding,
        Err(msg) => return c.cl.reply.error(msg),
    };
    let h = hll_mut(&mut c.srv.dbs[db], key);
    if eq_ic(sub, "getreg") || eq_ic(sub, "todense") {
        let converted = match hll::to_dense(h) {
            Ok(converted) => converted,
            Err(e) => return c.cl.reply.error(hll_error(e)),
        };
        if eq_ic(sub, "getreg") {
            c.cl.reply.array(hll::HLL_REGISTERS);
            for r in hll::dense_registers(h) {
                c.cl.reply.int(r as i64);
            }
        } else {
            c.cl.reply.int(converted as i64);
        }
        // The encoding changed: replicas convert too.
        if converted {
            c.dirty(1);
        }
    } else if eq_ic(sub, "decode") {
        if encoding != Encoding::Sparse {
            return c.cl.reply.error("ERR HLL encoding is not sparse");
        }
        let decoded = hll::decode_sparse(h);
        c.cl.reply.bulk(decoded.as_bytes());
    } else if eq_ic(sub, "encoding") {
        c.cl.reply.simple(encoding.name());
    } else {
        c.cl.reply.error(&format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// `PFSELFTEST`
///
/// Checks the register access and the estimator (see
/// [`hll::self_test`]); blocks the server for about a second, as in Redis.
///
/// ```text
/// +OK | -ERR TESTFAILED …
/// ```
pub fn pfselftest(c: &mut Ctx, _argv: &[&[u8]]) {
    let seed = c.now_ms() as u64 ^ c.cl.id;
    match hll::self_test(c.srv.config.hll_sparse_max_bytes, seed) {
        Ok(()) => c.cl.reply.ok(),
        Err(msg) => c.cl.reply.error(&format!("ERR {msg}")),
    }
}
