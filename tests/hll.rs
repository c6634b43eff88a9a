//! HyperLogLogs move between kvstore and redis-server 7.0 unchanged: one
//! made by either server, moved by DUMP/RESTORE or an RDB file, has the same
//! bytes, the same count, and grows the same way on the other.

mod common;

use common::{bulk_payload, start_kvstore, start_redis, Conn};

/// HLLs of every shape: empty, sparse, sparse near the promotion limit,
/// dense, and a merge of sparse and dense.
const BUILD: &[&[&str]] = &[
    &["PFADD", "empty"],
    &["PFADD", "small", "a", "b", "c"],
    &[
        "EVAL",
        "for i = 1, 1200 do redis.call('pfadd', KEYS[1], 'near' .. i) end \
         for i = 1, 50000 do redis.call('pfadd', KEYS[2], i) end \
         redis.call('pfmerge', KEYS[3], KEYS[1], KEYS[2]) \
         return 1",
        "3",
        "near",
        "dense",
        "merged",
    ],
    // A cached count in the header.
    &["PFCOUNT", "dense"],
];

const KEYS: &[&str] = &["empty", "small", "near", "dense", "merged"];

/// What a key looks like: its bytes, its count, its encoding.
fn describe(c: &mut Conn, key: &str) -> Vec<Vec<u8>> {
    vec![
        c.cmd_str(&["GET", key]),
        c.cmd_str(&["PFCOUNT", key]),
        c.cmd_str(&["PFDEBUG", "ENCODING", key]),
        c.cmd_str(&["GET", key]),
    ]
}

/// Grow a key by elements enough to promote a sparse one.
fn grow(c: &mut Conn, key: &str) -> Vec<u8> {
    c.cmd_str(&[
        "EVAL",
        "for i = 1, 3000 do redis.call('pfadd', KEYS[1], 'more' .. i) end \
         return redis.call('get', KEYS[1])",
        "1",
        key,
    ])
}

fn build(c: &mut Conn) {
    for cmd in BUILD {
        c.cmd_str(cmd);
    }
}

#[test]
fn hlls_restored_from_redis_dumps_read_and_grow_as_in_redis() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    build(&mut r);
    for key in KEYS {
        let dump = r.cmd_str(&["DUMP", key]);
        let payload = bulk_payload(&dump).expect("a payload");
        assert_eq!(
            k.cmd(&[b"RESTORE", key.as_bytes(), b"0", payload]),
            b"+OK\r\n",
            "{key}"
        );
        assert_eq!(describe(&mut k, key), describe(&mut r, key), "{key}");
        assert_eq!(grow(&mut k, key), grow(&mut r, key), "{key} grown");
        assert_eq!(describe(&mut k, key), describe(&mut r, key), "{key} grown");
    }
    let all: Vec<&str> = ["PFCOUNT"].iter().chain(KEYS).copied().collect();
    assert_eq!(k.cmd_str(&all), r.cmd_str(&all));
}

#[test]
fn hlls_dumped_here_restore_in_redis_with_the_same_bytes() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    build(&mut k);
    build(&mut r);
    for key in KEYS {
        assert_eq!(k.cmd_str(&["GET", key]), r.cmd_str(&["GET", key]), "{key}");
        let copy = format!("{key}-copy");
        let dump = k.cmd_str(&["DUMP", key]);
        let payload = bulk_payload(&dump).expect("a payload");
        assert_eq!(
            r.cmd(&[b"RESTORE", copy.as_bytes(), b"0", payload]),
            b"+OK\r\n",
            "{key}"
        );
        assert_eq!(describe(&mut r, &copy), describe(&mut k, key), "{key}");
        assert_eq!(grow(&mut r, &copy), grow(&mut k, key), "{key} grown");
    }
}

#[test]
fn hlls_in_a_redis_rdb_file_load_here() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    build(&mut r);
    assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");
    let kv = common::start_kvstore_on_dump(&redis.dir.path().join("dump.rdb"), &[]);
    let mut k = Conn::connect(kv.port);
    for key in KEYS {
        assert_eq!(describe(&mut k, key), describe(&mut r, key), "{key}");
    }
}
