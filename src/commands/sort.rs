//! SORT and SORT_RO over lists, sets and sorted sets, with BY and GET
//! patterns (`weight_*`, `user:*->name`), LIMIT, ASC/DESC, ALPHA and STORE,
//! following Redis's sortCommandGeneric.

use super::*;
use crate::db::{List, Value, ValueRef};

/// Look up the string (or hash field, with `->`) a BY/GET pattern names for
/// `elem`. `#` is the element itself; a pattern without `*` names nothing.
fn lookup_by_pattern(srv: &mut Server, db: usize, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let (post, field) = match after.windows(2).position(|w| w == b"->") {
        Some(i) if i + 2 < after.len() => (&after[..i], Some(&after[i + 2..])),
        _ => (after, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    let e = lookup_read(srv, db, &key)?;
    match field {
        Some(f) => match e.value() {
            ValueRef::Boxed(Value::Hash(h)) => h.get(f).map(|v| v.to_vec()),
            _ => None,
        },
        None => super::string::string_bytes(e).map(|v| v.into_owned()),
    }
}

/// A sort key as a number: C's strtod over the whole string (up to a NUL
/// byte, where Redis's C string ends, so "\0…" is 0); like Redis, any
/// range error (overflow or underflow) fails the sort.
fn strtod_all(v: &[u8]) -> Option<f64> {
    match crate::util::strtod(c_bytes(v))? {
        (d, false) if !d.is_nan() => Some(d),
        _ => None,
    }
}

fn sort_generic(c: &mut Ctx, argv: &[&[u8]], readonly: bool) {
    let db = c.cl.db;
    let key = argv[1];
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut store: Option<&[u8]> = None;
    let mut sortby: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    // BY and GET read keys the arguments do not name: only a user who may
    // read every key may use them (Redis's user_has_full_key_access).
    let full_key_access = c.cl.user == crate::state::acl::NO_USER
        || super::acl::may_touch_every_key(
            c.srv.acl.user(c.cl.user),
            c.cmd,
            argv,
            crate::state::acl::KEY_READ,
        );
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let a = argv[j];
        if eq_ic(a, "asc") {
            desc = false;
        } else if eq_ic(a, "desc") {
            desc = true;
        } else if eq_ic(a, "alpha") {
            alpha = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            match (arg_i64(argv[j + 1]), arg_i64(argv[j + 2])) {
                (Ok(s), Ok(n)) => {
                    limit_start = s;
                    limit_count = n;
                }
                (Err(e), _) | (_, Err(e)) => return c.cl.reply.error(e),
            }
            j += 2;
        } else if eq_ic(a, "store") && left >= 1 && !readonly {
            store = Some(argv[j + 1]);
            j += 1;
        } else if eq_ic(a, "by") && left >= 1 {
            sortby = Some(argv[j + 1]);
            if !argv[j + 1].contains(&b'*') {
                dontsort = true;
            } else if !full_key_access {
                return c
                    .cl
                    .reply
                    .error("ERR BY option of SORT denied due to insufficient ACL permissions.");
            }
            j += 1;
        } else if eq_ic(a, "get") && left >= 1 {
            if !full_key_access {
                return c
                    .cl
                    .reply
                    .error("ERR GET option of SORT denied due to insufficient ACL permissions.");
            }
            gets.push(argv[j + 1]);
            j += 1;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
        j += 1;
    }
    // The key must be a list, set or sorted set (missing means empty).
    let (mut elems, kind): (Vec<Vec<u8>>, u8) = match lookup_read(c.srv, db, key) {
        // Like Redis ("destructively convert encoded sorted sets for
        // SORT"), a sorted set that is sorted leaves in the skiplist encoding.
        Some(e) if matches!(e.value(), ValueRef::Boxed(Value::ZSet(_))) => {
            let Some(Value::ZSet(z)) = e.boxed_mut() else {
                unreachable!("matched a sorted set just above")
            };
            z.convert_to_tree();
            (
                z.items().into_iter().map(|(m, _)| m.to_vec()).collect(),
                b'z',
            )
        }
        // A list is read through, as Redis's iterator reads it (which can
        // compress a node: see List::read_all).
        Some(e) if matches!(e.value(), ValueRef::Boxed(Value::List(_))) => {
            let Some(Value::List(l)) = e.boxed_mut() else {
                unreachable!("matched a list just above")
            };
            if dontsort {
                // Redis reads only the LIMIT range then (from its end when
                // DESC); reading it here has the same effect on the nodes.
                let len = l.len() as i64;
                let start = limit_start.clamp(0, len);
                let count = limit_count.clamp(-1, len);
                let (mut start, mut end) = (
                    start,
                    if count < 0 {
                        len - 1
                    } else {
                        start + count - 1
                    },
                );
                if start >= len {
                    (start, end) = (len - 1, len - 2);
                }
                end = end.min(len - 1);
                if end >= start {
                    let (lo, hi) = if desc {
                        (len - 1 - end, len - 1 - start)
                    } else {
                        (start, end)
                    };
                    l.range(lo as usize, hi as usize, desc, |_| {});
                }
                (l.to_vecs(), b'l')
            } else {
                (l.read_all(), b'l')
            }
        }
        None => (Vec::new(), b'l'),
        Some(e) => match e.value() {
            ValueRef::Boxed(Value::Set(s)) => (s.members(), b's'),
            ValueRef::Boxed(Value::ZSet(z)) => (
                z.items().into_iter().map(|(m, _)| m.to_vec()).collect(),
                b'z',
            ),
            _ => return c.cl.reply.error(ERR_WRONGTYPE),
        },
    };
    // Sets have no order of their own: sort them when storing, so that the
    // result is the same on replicas, and for a script, whose output must
    // not depend on it (Redis's CLIENT_SCRIPT check).
    if dontsort && kind == b's' && (store.is_some() || c.srv.script_run.is_some()) {
        dontsort = false;
        alpha = true;
        sortby = None;
    }
    if dontsort && kind != b's' && desc {
        elems.reverse();
    }
    let len = elems.len() as i64;
    let mut start = limit_start.max(0);
    let mut end = if limit_count < 0 {
        len - 1
    } else {
        start.saturating_add(limit_count) - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    if !dontsort {
        // Sort keys: a number, or bytes (ALPHA), or absent (missing BY key).
        let mut keyed: Vec<(Vec<u8>, Option<Vec<u8>>, f64)> = Vec::with_capacity(elems.len());
        let mut conversion_error = false;
        for e in elems.drain(..) {
            let by = match sortby {
                Some(p) => lookup_by_pattern(c.srv, db, p, &e),
                None => Some(e.clone()),
            };
            let mut score = 0.0;
            if !alpha {
                if let Some(v) = &by {
                    match strtod_all(v) {
                        Some(d) => score = d,
                        None => conversion_error = true,
                    }
                }
            }
            keyed.push((e, by, score));
        }
        if conversion_error {
            return c
                .cl
                .reply
                .error("ERR One or more scores can't be converted into double");
        }
        let by_pattern = sortby.is_some();
        keyed.sort_by(|a, b| {
            let cmp = if !alpha {
                a.2.partial_cmp(&b.2)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            } else if by_pattern {
                match (&a.1, &b.1) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Less,
                    (Some(_), None) => std::cmp::Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.0.cmp(&b.0)
            };
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        elems = keyed.into_iter().map(|(e, _, _)| e).collect();
    }
    let picked: &[Vec<u8>] = if start <= end && start >= 0 {
        &elems[start as usize..=end as usize]
    } else {
        &[]
    };
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for e in picked {
        if gets.is_empty() {
            out.push(Some(e.clone()));
        }
        for g in &gets {
            out.push(lookup_by_pattern(c.srv, db, g, e));
        }
    }
    match store {
        None => {
            c.cl.reply.array(out.len());
            for v in out {
                match v {
                    Some(v) => c.cl.reply.bulk(&v),
                    None => c.cl.reply.null(),
                }
            }
        }
        Some(dst) => {
            let n = out.len();
            let result = (n > 0).then(|| {
                // Redis's SORT makes its list with quicklist defaults
                // (fill -2, not compressed), whatever the configuration.
                let mut list = List::default();
                for v in &out {
                    list.push_back(v.as_deref().unwrap_or(b""));
                }
                Value::List(list)
            });
            // "sortstore" is in the list class, as in Redis.
            let stored = result.is_some();
            if super::keys::store_result(c, dst, result, NotifyFlags::LIST, "sortstore") {
                // Redis counts every stored element (one for a deletion).
                c.dirty(if stored { n as u64 } else { 1 });
            }
            c.cl.reply.int(n as i64);
        }
    }
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE destination]`
pub fn sort(c: &mut Ctx, argv: &[&[u8]]) {
    sort_generic(c, argv, false);
}

/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]`
pub fn sort_ro(c: &mut Ctx, argv: &[&[u8]]) {
    sort_generic(c, argv, true);
}
