//! Model-based property test: random sequences of operations on every data
//! type go to kvstore and to a real redis-server, and every reply must be
//! identical.
//!
//! The sequences use dozens of keys (a few hot ones), short and long values
//! (so size-triggered encoding conversions happen), TTLs with active expiry
//! off, several databases (SELECT, MOVE, SWAPDB, COPY … DB), RESP2 or RESP3
//! per sequence, SORT, and SCAN/SSCAN/HSCAN/ZSCAN run to completion.
//! Replies whose order Redis does not define (a hashtable's HGETALL, a
//! SMEMBERS of a hashtable set) are compared as sorted multisets; where the
//! order is defined (listpack hashes, intsets) it is compared exactly.
//!
//! The seed is printed and can be given back with `MODEL_SEED=<hex>`;
//! failures are kept in `tests/model-regressions.txt` and replayed first.
//! A kvstore crash is reported as a crash, with the sequence that caused it,
//! instead of being shrunk. Without redis-server the test fails, unless
//! `KVSTORE_SKIP_REDIS=1` skips it explicitly (never under CI).

mod common;

use std::cell::RefCell;

use common::{start_kvstore, start_redis, Conn};
use proptest::prelude::*;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestRng, TestRunner,
};

/// A few hot keys (so operations meet) and many others.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (1..4u8).prop_map(|i| format!("k{i}")),
        1 => (0..32u8).prop_map(|i| format!("key:{i}")),
    ]
}

/// Values: small numbers and words, odd ones, and long strings that push
/// hashes and sorted sets past `*-max-listpack-value` and strings past
/// what an entry holds inline.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0..20i64).prop_map(|n| n.to_string()),
        6 => "[a-e]{1,3}",
        1 => Just("-1".to_string()),
        1 => Just("1.5".to_string()),
        1 => Just("".to_string()),
        1 => "[a-z]{60,80}",
        1 => "[a-z]{250,300}",
    ]
}

/// How a reply is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Byte for byte.
    Exact,
    /// As a multiset of elements: only when the encoding leaves the order
    /// undefined (checked against Redis's OBJECT ENCODING first).
    UnlessCompact,
    /// Field/value pairs as a multiset, likewise.
    PairsUnlessCompact,
}

#[derive(Clone, Debug)]
enum Op {
    Cmd(Vec<String>, Order),
    /// SCAN-family command run to completion: the set of what it returned.
    ScanAll(Vec<String>),
}

fn cmd(args: &[&str]) -> Op {
    Op::Cmd(args.iter().map(|s| s.to_string()).collect(), Order::Exact)
}

fn op() -> impl Strategy<Value = Op> {
    let (k, v) = (key, value);
    let ttl_ms = prop_oneof![Just(-1i64), Just(0i64), 100_000..2_000_000i64];
    prop_oneof![
        (k(), v()).prop_map(|(k, v)| cmd(&["SET", &k, &v])),
        k().prop_map(|k| cmd(&["GET", &k])),
        (k(), v()).prop_map(|(k, v)| cmd(&["APPEND", &k, &v])),
        k().prop_map(|k| cmd(&["INCR", &k])),
        (k(), v()).prop_map(|(k, v)| cmd(&["INCRBYFLOAT", &k, &v])),
        k().prop_map(|k| cmd(&["DEL", &k])),
        k().prop_map(|k| cmd(&["TYPE", &k])),
        (k(), k()).prop_map(|(a, b)| cmd(&["RENAME", &a, &b])),
        (k(), k(), any::<bool>()).prop_map(|(a, b, r)| if r {
            cmd(&["COPY", &a, &b, "REPLACE"])
        } else {
            cmd(&["COPY", &a, &b])
        }),
        (k(), k(), 0..3u8).prop_map(|(a, b, db)| cmd(&["COPY", &a, &b, "DB", &db.to_string()])),
        (k(), v(), v()).prop_map(|(k, f, v)| cmd(&["HSET", &k, &f, &v])),
        (k(), v()).prop_map(|(k, f)| cmd(&["HDEL", &k, &f])),
        k().prop_map(|k| Op::Cmd(vec!["HGETALL".into(), k], Order::PairsUnlessCompact)),
        (k(), v(), v()).prop_map(|(k, f, n)| cmd(&["HINCRBY", &k, &f, &n])),
        (k(), v()).prop_map(|(k, x)| cmd(&["LPUSH", &k, &x])),
        (k(), v()).prop_map(|(k, x)| cmd(&["RPUSH", &k, &x])),
        k().prop_map(|k| cmd(&["LPOP", &k])),
        (k(), v()).prop_map(|(k, n)| cmd(&["RPOP", &k, &n])),
        (k(), -4..4i64, -4..4i64).prop_map(|(k, a, b)| cmd(&[
            "LRANGE",
            &k,
            &a.to_string(),
            &b.to_string()
        ])),
        (k(), -3..3i64, v()).prop_map(|(k, c, x)| cmd(&["LREM", &k, &c.to_string(), &x])),
        (k(), -3..3i64, -3..3i64).prop_map(|(k, a, b)| cmd(&[
            "LTRIM",
            &k,
            &a.to_string(),
            &b.to_string()
        ])),
        (k(), k()).prop_map(|(a, b)| cmd(&["LMOVE", &a, &b, "LEFT", "RIGHT"])),
        (k(), v()).prop_map(|(k, m)| cmd(&["SADD", &k, &m])),
        (k(), v()).prop_map(|(k, m)| cmd(&["SREM", &k, &m])),
        k().prop_map(|k| Op::Cmd(vec!["SMEMBERS".into(), k], Order::UnlessCompact)),
        (k(), k()).prop_map(|(a, b)| Op::Cmd(vec!["SINTER".into(), a, b], Order::UnlessCompact)),
        (k(), k()).prop_map(|(a, b)| cmd(&["SUNIONSTORE", &a, &a, &b])),
        k().prop_map(|k| cmd(&["SCARD", &k])),
        (k(), v(), v()).prop_map(|(k, s, m)| cmd(&["ZADD", &k, &s, &m])),
        (k(), v(), v()).prop_map(|(k, s, m)| cmd(&["ZINCRBY", &k, &s, &m])),
        (k(), v()).prop_map(|(k, m)| cmd(&["ZREM", &k, &m])),
        (k(), -4..4i64, -4..4i64).prop_map(|(k, a, b)| cmd(&[
            "ZRANGE",
            &k,
            &a.to_string(),
            &b.to_string(),
            "WITHSCORES"
        ])),
        (k(), v(), v()).prop_map(|(k, a, b)| cmd(&["ZRANGEBYSCORE", &k, &a, &b])),
        k().prop_map(|k| cmd(&["ZPOPMIN", &k])),
        (k(), k()).prop_map(|(a, b)| cmd(&["ZUNIONSTORE", &a, "2", &a, &b])),
        (k(), v()).prop_map(|(k, m)| cmd(&["ZRANK", &k, &m])),
        k().prop_map(|k| cmd(&["EXISTS", &k])),
        k().prop_map(|k| cmd(&["OBJECT", "ENCODING", &k])),
        // TTLs: far enough ahead that both servers round TTL the same way
        // (active expiry is off; 0 and -1 delete at once).
        (k(), ttl_ms).prop_map(|(k, ms)| cmd(&["PEXPIRE", &k, &ms.to_string()])),
        k().prop_map(|k| cmd(&["TTL", &k])),
        k().prop_map(|k| cmd(&["PERSIST", &k])),
        (k(), v()).prop_map(|(k, v)| cmd(&["SET", &k, &v, "EX", "500"])),
        // Several databases.
        (0..3u8).prop_map(|db| cmd(&["SELECT", &db.to_string()])),
        (k(), 0..3u8).prop_map(|(k, db)| cmd(&["MOVE", &k, &db.to_string()])),
        (0..3u8, 0..3u8).prop_map(|(a, b)| cmd(&["SWAPDB", &a.to_string(), &b.to_string()])),
        Just(cmd(&["DBSIZE"])),
        // SORT, numeric and alphabetic.
        k().prop_map(|k| cmd(&["SORT", &k])),
        k().prop_map(|k| cmd(&["SORT", &k, "ALPHA", "DESC", "LIMIT", "0", "5"])),
        // Scans to completion.
        Just(Op::ScanAll(vec!["SCAN".into()])),
        k().prop_map(|k| Op::ScanAll(vec!["SSCAN".into(), k])),
        k().prop_map(|k| Op::ScanAll(vec!["HSCAN".into(), k])),
        k().prop_map(|k| Op::ScanAll(vec!["ZSCAN".into(), k])),
    ]
}

/// Stream IDs from a small range (so operations meet), some with `*`
/// for the sequence: never the time-based `*`, which differs per server.
fn stream_id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (1..40u32, 0..3u32).prop_map(|(ms, seq)| format!("{ms}-{seq}")),
        1 => (1..40u32).prop_map(|ms| format!("{ms}-*")),
    ]
}

/// Streams and consumer groups: random XADD/XREADGROUP/XACK/XCLAIM/XDEL/
/// XTRIM sequences (Redis's replies, PELs and group counters must follow).
fn stream_op() -> impl Strategy<Value = Op> {
    let k = key;
    let g = || prop_oneof![Just("g1".to_string()), Just("g2".to_string())];
    let consumer = || (1..4u8).prop_map(|i| format!("c{i}"));
    let id = stream_id;
    let plain_id = || (1..40u32, 0..3u32).prop_map(|(ms, seq)| format!("{ms}-{seq}"));
    let trim = prop_oneof![
        Just(vec![]),
        (1..8u32, any::<bool>()).prop_map(|(n, approx)| vec![
            "MAXLEN".to_string(),
            if approx { "~" } else { "=" }.to_string(),
            n.to_string()
        ]),
        (1..40u32).prop_map(|ms| vec!["MINID".to_string(), format!("{ms}-0")]),
    ];
    prop_oneof![
        6 => (k(), trim, id(), value(), any::<bool>()).prop_map(|(k, t, id, v, two)| {
            let mut a = vec!["XADD".to_string(), k];
            a.extend(t);
            a.push(id);
            a.extend(["f".to_string(), v.clone()]);
            if two {
                a.extend(["other".to_string(), v]);
            }
            Op::Cmd(a, Order::Exact)
        }),
        1 => (k(), plain_id()).prop_map(|(k, id)| cmd(&["XDEL", &k, &id])),
        1 => (k(), 0..8u32, any::<bool>()).prop_map(|(k, n, approx)| cmd(&[
            "XTRIM",
            &k,
            "MAXLEN",
            if approx { "~" } else { "=" },
            &n.to_string()
        ])),
        1 => (k(), plain_id()).prop_map(|(k, id)| cmd(&["XTRIM", &k, "MINID", &id])),
        1 => k().prop_map(|k| cmd(&["XRANGE", &k, "-", "+"])),
        1 => (k(), plain_id(), 0..4u8).prop_map(|(k, id, n)| cmd(&[
            "XREVRANGE",
            &k,
            "+",
            &format!("({id}"),
            "COUNT",
            &n.to_string()
        ])),
        1 => k().prop_map(|k| cmd(&["XLEN", &k])),
        1 => (k(), plain_id()).prop_map(|(k, id)| cmd(&["XREAD", "COUNT", "3", "STREAMS", &k, &id])),
        1 => (k(), g(), prop_oneof![Just("0"), Just("$")], any::<bool>()).prop_map(|(k, g, at, mk)| {
            if mk {
                cmd(&["XGROUP", "CREATE", &k, &g, at, "MKSTREAM"])
            } else {
                cmd(&["XGROUP", "CREATE", &k, &g, at])
            }
        }),
        1 => (k(), g(), plain_id()).prop_map(|(k, g, id)| cmd(&["XGROUP", "SETID", &k, &g, &id])),
        1 => (k(), g()).prop_map(|(k, g)| cmd(&["XGROUP", "DESTROY", &k, &g])),
        1 => (k(), g(), consumer()).prop_map(|(k, g, c)| cmd(&["XGROUP", "CREATECONSUMER", &k, &g, &c])),
        1 => (k(), g(), consumer()).prop_map(|(k, g, c)| cmd(&["XGROUP", "DELCONSUMER", &k, &g, &c])),
        4 => (k(), g(), consumer(), 1..4u8, any::<bool>(), any::<bool>()).prop_map(
            |(k, g, c, n, history, noack)| {
                let mut a = vec!["XREADGROUP", "GROUP", &g, &c];
                let n = n.to_string();
                a.extend(["COUNT", &n]);
                if noack {
                    a.push("NOACK");
                }
                a.extend(["STREAMS", &k, if history { "0" } else { ">" }]);
                cmd(&a)
            }
        ),
        2 => (k(), g(), plain_id()).prop_map(|(k, g, id)| cmd(&["XACK", &k, &g, &id])),
        2 => (k(), g(), consumer(), plain_id(), any::<bool>()).prop_map(|(k, g, c, id, justid)| {
            if justid {
                cmd(&["XCLAIM", &k, &g, &c, "0", &id, "JUSTID"])
            } else {
                cmd(&["XCLAIM", &k, &g, &c, "0", &id])
            }
        }),
        1 => (k(), g(), consumer(), 1..4u8).prop_map(|(k, g, c, n)| cmd(&[
            "XAUTOCLAIM",
            &k,
            &g,
            &c,
            "0",
            "0",
            "COUNT",
            &n.to_string()
        ])),
        1 => (k(), g()).prop_map(|(k, g)| cmd(&["XPENDING", &k, &g])),
        // The extended form without its idle times (the servers' own).
        1 => (k(), g()).prop_map(|(k, g)| cmd(&[
            "EVAL",
            "local r = redis.call('xpending', KEYS[1], ARGV[1], '-', '+', 100) for _, e in ipairs(r) do e[3] = 0 end return r",
            "1",
            &k,
            &g
        ])),
        1 => k().prop_map(|k| cmd(&["XINFO", "GROUPS", &k])),
        1 => (k(), plain_id()).prop_map(|(k, id)| cmd(&["XSETID", &k, &id])),
        1 => (1..5u8).prop_map(|n| cmd(&["CONFIG", "SET", "stream-node-max-entries", &n.to_string()])),
    ]
}

/// A sequence: the protocol it speaks, then its operations.
fn sequence() -> impl Strategy<Value = (bool, Vec<Op>)> {
    let any_op = prop_oneof![3 => op(), 2 => stream_op()];
    (any::<bool>(), proptest::collection::vec(any_op, 1..80))
}

/// An aggregate reply's raw elements (a map's fields and values in turn),
/// or the reply itself when it is not an aggregate.
fn split_aggregate(raw: &[u8]) -> Vec<Vec<u8>> {
    common::aggregate_items(raw)
        .map(|(_, items)| items)
        .unwrap_or_else(|| vec![raw.to_vec()])
}

/// A reply as a multiset (of elements, or of field/value pairs).
fn as_multiset(raw: &[u8], pairs: bool) -> Vec<Vec<u8>> {
    let head: Vec<u8> = raw.iter().take_while(|&&b| b != b'\n').copied().collect();
    let items = split_aggregate(raw);
    let mut items: Vec<Vec<u8>> = if pairs {
        items.chunks(2).map(|c| c.concat()).collect()
    } else {
        items
    };
    items.sort();
    items.insert(0, head);
    items
}

/// Run a SCAN-family command until its cursor returns to 0 and return what
/// it listed, deduplicated (SCAN may return an element twice).
fn scan_all(c: &mut Conn, base: &[String]) -> Result<Vec<Vec<u8>>, String> {
    let mut cursor = "0".to_string();
    let mut seen = std::collections::BTreeSet::new();
    let pairs = base[0] != "SCAN" && base[0] != "SSCAN";
    for _ in 0..10_000 {
        let mut args: Vec<&str> = vec![&base[0]];
        args.extend(base[1..].iter().map(|s| s.as_str()));
        args.push(&cursor);
        args.extend(["COUNT", "3"]);
        let reply = c.try_cmd_str(&args)?;
        if reply.first() == Some(&b'-') {
            return Ok(vec![reply]);
        }
        let parts = split_aggregate(&reply);
        let cur = parts[0].clone();
        let body = String::from_utf8_lossy(&cur);
        cursor = body.lines().nth(1).unwrap_or("0").to_string();
        let items = split_aggregate(&parts[1]);
        if pairs {
            for p in items.chunks(2) {
                seen.insert(p.concat());
            }
        } else {
            seen.extend(items);
        }
        if cursor == "0" {
            return Ok(seen.into_iter().collect());
        }
    }
    Err(format!("{base:?} did not finish"))
}

#[test]
fn random_operations_give_identical_replies() {
    run_model(&[]);
}

/// The same with tiny encoding limits, so the large encodings (hashtable,
/// skiplist) and the conversions to them are exercised.
#[test]
fn random_operations_on_large_encodings_give_identical_replies() {
    let tiny = [
        "--hash-max-listpack-entries",
        "2",
        "--zset-max-listpack-entries",
        "2",
        "--set-max-intset-entries",
        "2",
        "--list-max-listpack-size",
        "2",
    ];
    run_model(&tiny);
}

/// The seed: `MODEL_SEED` (64 hex digits) or a fresh one, printed.
fn seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    match std::env::var("MODEL_SEED") {
        Ok(hex) => {
            for (i, b) in seed.iter_mut().enumerate() {
                *b = u8::from_str_radix(hex.get(i * 2..i * 2 + 2).unwrap_or("00"), 16)
                    .expect("MODEL_SEED is hex");
            }
        }
        Err(_) => {
            // Fresh randomness from the kernel.
            use std::io::Read;
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut seed))
                .expect("read /dev/urandom");
        }
    }
    seed
}

fn run_model(options: &[&str]) {
    let mut flags = vec!["--enable-debug-command", "yes"];
    flags.extend_from_slice(options);
    let Some(redis) = start_redis(&flags) else {
        return;
    };
    let kv = RefCell::new(start_kvstore(&flags));
    let seed = seed();
    let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    println!("model seed: MODEL_SEED={hex}");
    let kv_port = kv.borrow().port;
    let a = RefCell::new(Conn::connect(kv_port));
    let b = RefCell::new(Conn::connect(redis.port));
    let crashed: RefCell<Option<String>> = RefCell::new(None);
    let compared = std::cell::Cell::new(0usize);
    let config = Config {
        cases: 300,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/model-regressions.txt"
        )))),
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let result = runner.run(&sequence(), |(resp3, ops)| {
        if crashed.borrow().is_some() {
            return Ok(());
        }
        let (mut a, mut b) = (a.borrow_mut(), b.borrow_mut());
        compared.set(compared.get() + ops.len());
        let outcome = run_sequence(&mut a, &mut b, resp3, &ops);
        match outcome {
            Ok(()) => Ok(()),
            Err(Divergence::Replies(msg)) => Err(TestCaseError::fail(msg)),
            Err(Divergence::Io(e)) => {
                // A server that stopped answering: a crash is reported as
                // one, with the exact sequence, not shrunk.
                let status = kv.borrow_mut().child.try_wait().ok().flatten();
                *crashed.borrow_mut() = Some(format!(
                    "kvstore stopped answering ({e}; exit status {status:?}) while running \
                     (RESP{}) {ops:#?}",
                    if resp3 { 3 } else { 2 }
                ));
                Ok(())
            }
        }
    });
    println!("model: {} operations compared", compared.get());
    assert!(compared.get() > 1000, "too few operations ran");
    if let Some(msg) = crashed.borrow().as_ref() {
        panic!("{msg}\nseed: MODEL_SEED={hex}");
    }
    if let Err(e) = result {
        panic!("kvstore and redis-server diverged: {e}\nseed: MODEL_SEED={hex}");
    }
}

enum Divergence {
    Replies(String),
    Io(String),
}

fn run_sequence(a: &mut Conn, b: &mut Conn, resp3: bool, ops: &[Op]) -> Result<(), Divergence> {
    let io = |e: String| Divergence::Io(e);
    for c in [&mut *a, &mut *b] {
        c.try_cmd_str(&["HELLO", if resp3 { "3" } else { "2" }])
            .map_err(io)?;
        c.try_cmd_str(&["SELECT", "0"]).map_err(io)?;
        c.try_cmd_str(&["FLUSHALL"]).map_err(io)?;
        c.try_cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"])
            .map_err(io)?;
    }
    for op in ops {
        match op {
            Op::Cmd(args, order) => {
                let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                // Where the order is defined by a compact encoding, compare
                // it exactly: ask Redis which encoding the key has.
                let compact = *order != Order::Exact
                    && b.try_cmd_str(&["OBJECT", "ENCODING", &args[1]])
                        .map_err(io)?
                        .windows(8)
                        .any(|w| w == b"listpack" || w == b"intset\r\n");
                let ra = a.try_cmd_str(&refs).map_err(io)?;
                let rb = b.try_cmd_str(&refs).map_err(io)?;
                let same = match order {
                    _ if compact => ra == rb,
                    Order::Exact => ra == rb,
                    Order::UnlessCompact => as_multiset(&ra, false) == as_multiset(&rb, false),
                    Order::PairsUnlessCompact => as_multiset(&ra, true) == as_multiset(&rb, true),
                };
                if !same {
                    return Err(Divergence::Replies(format!(
                        "{args:?}\n  kvstore: {}\n  redis:   {}",
                        ra.escape_ascii(),
                        rb.escape_ascii()
                    )));
                }
            }
            Op::ScanAll(base) => {
                let ra = scan_all(a, base).map_err(io)?;
                let rb = scan_all(b, base).map_err(io)?;
                if ra != rb {
                    return Err(Divergence::Replies(format!(
                        "{base:?} to completion\n  kvstore: {ra:?}\n  redis:   {rb:?}"
                    )));
                }
            }
        }
    }
    Ok(())
}
