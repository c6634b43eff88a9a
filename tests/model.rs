//! Model-based property test: random sequences of operations on every data
//! type go to kvstore and to a real redis-server, and every reply must be
//! identical. Replies whose order Redis does not define are compared as
//! sorted multisets. Skipped (with a message) without redis-server, except
//! in CI.

mod common;

use common::{start_kvstore, start_redis, Conn};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("k1".to_string()),
        Just("k2".to_string()),
        Just("k3".to_string())
    ]
}

fn small() -> impl Strategy<Value = String> {
    prop_oneof![
        (0..20i64).prop_map(|n| n.to_string()),
        "[a-e]{1,3}",
        Just("-1".to_string()),
        Just("1.5".to_string()),
        Just("".to_string()),
    ]
}

/// One command, as arguments, plus whether its reply is unordered.
fn op() -> impl Strategy<Value = (Vec<String>, bool)> {
    let k = key;
    let v = small;
    prop_oneof![
        (k(), v()).prop_map(|(k, v)| (vec!["SET".into(), k, v], false)),
        k().prop_map(|k| (vec!["GET".into(), k], false)),
        (k(), v()).prop_map(|(k, v)| (vec!["APPEND".into(), k, v], false)),
        k().prop_map(|k| (vec!["INCR".into(), k], false)),
        (k(), v()).prop_map(|(k, v)| (vec!["INCRBYFLOAT".into(), k, v], false)),
        k().prop_map(|k| (vec!["DEL".into(), k], false)),
        k().prop_map(|k| (vec!["TYPE".into(), k], false)),
        (k(), k()).prop_map(|(a, b)| (vec!["RENAME".into(), a, b], false)),
        (k(), v(), v()).prop_map(|(k, f, v)| (vec!["HSET".into(), k, f, v], false)),
        (k(), v()).prop_map(|(k, f)| (vec!["HDEL".into(), k, f], false)),
        // Hashtable-encoded hashes have no defined order.
        k().prop_map(|k| (vec!["HGETALL".into(), k], true)),
        (k(), v(), v()).prop_map(|(k, f, n)| (vec!["HINCRBY".into(), k, f, n], false)),
        (k(), v()).prop_map(|(k, x)| (vec!["LPUSH".into(), k, x], false)),
        (k(), v()).prop_map(|(k, x)| (vec!["RPUSH".into(), k, x], false)),
        k().prop_map(|k| (vec!["LPOP".into(), k], false)),
        (k(), v()).prop_map(|(k, n)| (vec!["RPOP".into(), k, n], false)),
        (k(), -4..4i64, -4..4i64).prop_map(|(k, a, b)| (
            vec!["LRANGE".into(), k, a.to_string(), b.to_string()],
            false
        )),
        (k(), -3..3i64, v())
            .prop_map(|(k, c, x)| (vec!["LREM".into(), k, c.to_string(), x], false)),
        (k(), -3..3i64, -3..3i64)
            .prop_map(|(k, a, b)| (vec!["LTRIM".into(), k, a.to_string(), b.to_string()], false)),
        (k(), k()).prop_map(|(a, b)| (
            vec!["LMOVE".into(), a, b, "LEFT".into(), "RIGHT".into()],
            false
        )),
        (k(), v()).prop_map(|(k, m)| (vec!["SADD".into(), k, m], false)),
        (k(), v()).prop_map(|(k, m)| (vec!["SREM".into(), k, m], false)),
        k().prop_map(|k| (vec!["SMEMBERS".into(), k], true)),
        (k(), k()).prop_map(|(a, b)| (vec!["SINTER".into(), a, b], true)),
        (k(), k()).prop_map(|(a, b)| (vec!["SUNIONSTORE".into(), a.clone(), a, b], false)),
        k().prop_map(|k| (vec!["SCARD".into(), k], false)),
        (k(), v(), v()).prop_map(|(k, s, m)| (vec!["ZADD".into(), k, s, m], false)),
        (k(), v(), v()).prop_map(|(k, s, m)| (vec!["ZINCRBY".into(), k, s, m], false)),
        (k(), v()).prop_map(|(k, m)| (vec!["ZREM".into(), k, m], false)),
        (k(), -4..4i64, -4..4i64).prop_map(|(k, a, b)| (
            vec![
                "ZRANGE".into(),
                k,
                a.to_string(),
                b.to_string(),
                "WITHSCORES".into()
            ],
            false
        )),
        (k(), v(), v()).prop_map(|(k, a, b)| (vec!["ZRANGEBYSCORE".into(), k, a, b], false)),
        k().prop_map(|k| (vec!["ZPOPMIN".into(), k], false)),
        (k(), k()).prop_map(|(a, b)| (
            vec!["ZUNIONSTORE".into(), a.clone(), "2".into(), a, b],
            false
        )),
        (k(), v()).prop_map(|(k, m)| (vec!["ZRANK".into(), k, m], false)),
        k().prop_map(|k| (vec!["EXISTS".into(), k], false)),
        k().prop_map(|k| (vec!["OBJECT".into(), "ENCODING".into(), k], false)),
    ]
}

/// Sort the elements of an array reply (for replies without a defined order).
fn sorted_elements(raw: &[u8]) -> Vec<Vec<u8>> {
    let text = raw.to_vec();
    let mut parts: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(|l| l.to_vec()).collect();
    if parts.len() > 1 {
        let head = parts.remove(0);
        parts.sort();
        parts.insert(0, head);
    }
    parts
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

fn run_model(options: &[&str]) {
    let Some(redis) = start_redis(options) else {
        return;
    };
    let kv = start_kvstore(options);
    // The runner wants a `Fn`: the connections live in RefCells.
    let a = std::cell::RefCell::new(Conn::connect(kv.port));
    let b = std::cell::RefCell::new(Conn::connect(redis.port));
    let mut runner = TestRunner::new(Config {
        cases: 150,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..60), |ops| {
        let (mut a, mut b) = (a.borrow_mut(), b.borrow_mut());
        a.cmd_str(&["FLUSHALL"]);
        b.cmd_str(&["FLUSHALL"]);
        for (args, unordered) in &ops {
            let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            let ra = a.cmd_str(&refs);
            let rb = b.cmd_str(&refs);
            if *unordered {
                prop_assert_eq!(sorted_elements(&ra), sorted_elements(&rb), "{:?}", args);
            } else {
                prop_assert_eq!(
                    ra.escape_ascii().to_string(),
                    rb.escape_ascii().to_string(),
                    "{:?}",
                    args
                );
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("kvstore and redis-server diverged: {e}");
    }
}
