//! DUMP and RESTORE between kvstore and redis-server 7.0, both ways, for
//! every type in its small and its large encoding: a value dumped by one
//! server is restored by the other to the same contents.

mod common;

use common::{start_kvstore, start_redis, Conn};

/// Commands that build one key of each type and encoding (the same on
/// both servers).
const BUILD: &[&[&str]] = &[
    &["SET", "str", "hello"],
    &["SET", "int", "-12345"],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], string.rep('abc', 1000)) \
         for i = 1, 5 do redis.call('rpush', KEYS[2], 'e' .. i) end \
         for i = 1, 300 do redis.call('rpush', KEYS[3], 'element' .. i) end \
         for i = 1, 5 do redis.call('sadd', KEYS[4], i) end \
         for i = 1, 300 do redis.call('sadd', KEYS[5], 'm' .. i) end \
         for i = 1, 5 do redis.call('hset', KEYS[6], 'f' .. i, 'v' .. i) end \
         for i = 1, 300 do redis.call('hset', KEYS[7], 'f' .. i, 'v' .. i) end \
         for i = 1, 5 do redis.call('zadd', KEYS[8], i / 3, 'z' .. i) end \
         for i = 1, 300 do redis.call('zadd', KEYS[9], i / 7, 'z' .. i) end \
         for i = 1, 120 do redis.call('xadd', KEYS[10], i .. '-1', 'f', i) end \
         redis.call('xgroup', 'create', KEYS[10], 'g', '0') \
         redis.call('xreadgroup', 'group', 'g', 'c', 'count', 7, 'streams', KEYS[10], '>') \
         return 1",
        "10",
        "long",
        "smalllist",
        "biglist",
        "intset",
        "bigset",
        "smallhash",
        "bighash",
        "smallzset",
        "bigzset",
        "stream",
    ],
];

/// How to read a key's contents, by name.
fn reads(key: &str) -> Vec<Vec<String>> {
    let k = key.to_string();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let fields: Vec<String> = (1..=300).map(|i| format!("f{i}")).collect();
    match key.trim_end_matches("-copy") {
        "str" | "int" | "long" => vec![v(&["GET", &k])],
        "smalllist" | "biglist" => vec![v(&["LRANGE", &k, "0", "-1"])],
        "intset" | "bigset" => vec![v(&["SORT", &k, "ALPHA"]), v(&["SCARD", &k])],
        "smallhash" | "bighash" => {
            let mut hm = vec!["HMGET".to_string(), k.clone()];
            hm.extend(fields);
            vec![hm, v(&["HLEN", &k])]
        }
        "smallzset" | "bigzset" => vec![v(&["ZRANGE", &k, "0", "-1", "WITHSCORES"])],
        _ => vec![
            v(&["XRANGE", &k, "-", "+"]),
            v(&["XINFO", "GROUPS", &k]),
            v(&["XPENDING", &k, "g"]),
        ],
    }
}

const KEYS: &[&str] = &[
    "str",
    "int",
    "long",
    "smalllist",
    "biglist",
    "intset",
    "bigset",
    "smallhash",
    "bighash",
    "smallzset",
    "bigzset",
    "stream",
];

fn read_all(c: &mut Conn, key: &str) -> Vec<Vec<u8>> {
    reads(key)
        .iter()
        .map(|cmd| {
            let refs: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
            c.cmd_str(&refs)
        })
        .collect()
}

#[test]
fn dumps_move_both_ways_between_kvstore_and_redis() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    for cmd in BUILD {
        assert_eq!(r.cmd_str(cmd), k.cmd_str(cmd), "{cmd:?}");
    }
    for key in KEYS {
        let want = read_all(&mut r, key);
        assert_eq!(read_all(&mut k, key), want, "{key} as built");
        let copy = format!("{key}-copy");
        // Redis's payload restored here…
        let theirs = r.cmd_str(&["DUMP", key]);
        let theirs = common::bulk_payload(&theirs).expect("a payload").to_vec();
        assert_eq!(
            k.cmd(&[b"RESTORE", copy.as_bytes(), b"0", &theirs]),
            b"+OK\r\n",
            "{key}: Redis's payload"
        );
        let ours_of_theirs = read_all(&mut k, &copy);
        let want_copy: Vec<Vec<u8>> = want
            .iter()
            .map(|w| String::from_utf8_lossy(w).replace(key, &copy).into_bytes())
            .collect();
        assert_eq!(
            ours_of_theirs, want_copy,
            "{key}: restored from Redis's payload"
        );
        // …and ours in Redis.
        let ours = k.cmd_str(&["DUMP", key]);
        let ours = common::bulk_payload(&ours).expect("a payload").to_vec();
        assert_eq!(
            r.cmd(&[b"RESTORE", copy.as_bytes(), b"0", &ours]),
            b"+OK\r\n",
            "{key}: our payload in Redis"
        );
        assert_eq!(
            read_all(&mut r, &copy),
            want_copy,
            "{key}: Redis restored ours"
        );
        // A damaged payload is refused, never loaded.
        let mut bad = ours.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x20;
        assert_eq!(
            k.cmd(&[b"RESTORE", b"bad", b"0", &bad]),
            b"-ERR DUMP payload version or checksum are wrong\r\n"
        );
    }
}

#[test]
fn damaged_payloads_with_a_right_checksum_are_refused_or_restored_never_crash() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    for cmd in BUILD {
        r.cmd_str(cmd);
    }
    // Redis's payloads (its compact encodings), each byte of the body
    // changed and the checksum made right again: only our own checks
    // stand between the bytes and the keyspace.
    for key in [
        "smalllist",
        "intset",
        "smallhash",
        "smallzset",
        "str",
        "int",
    ] {
        let payload = r.cmd_str(&["DUMP", key]);
        let payload = common::bulk_payload(&payload).unwrap().to_vec();
        restore_each_damaged_byte(&mut k, &payload, key, |_| {});
    }
    assert_eq!(k.cmd_str(&["PING"]), b"+PONG\r\n");
}

/// RESTORE `payload` with each byte of its body changed three ways and the
/// checksum made right again: each is loaded (then `check` reads it) or
/// refused as bad data, never anything else. Returns how many loaded.
fn restore_each_damaged_byte(
    k: &mut Conn,
    payload: &[u8],
    key: &str,
    check: impl Fn(&mut Conn),
) -> usize {
    let body = payload.len() - 8;
    let mut restored = 0;
    for pos in 0..body - 2 {
        for mask in [0x01u8, 0x40, 0xff] {
            let mut bad = payload[..body].to_vec();
            bad[pos] ^= mask;
            let crc = kvstore::persistence::crc64::crc64(0, &bad);
            bad.extend_from_slice(&crc.to_le_bytes());
            let reply = k.cmd(&[b"RESTORE", b"fuzzed", b"0", &bad, b"REPLACE"]);
            assert!(
                reply == b"+OK\r\n" || reply.starts_with(b"-ERR Bad data format"),
                "{key} byte {pos}: {}",
                String::from_utf8_lossy(&reply)
            );
            if reply == b"+OK\r\n" {
                restored += 1;
                check(k);
            }
        }
    }
    restored
}

/// Lists whose interior nodes are compressed (`list-compress-depth`), built
/// the same way on both servers.
const COMPRESSED_LISTS: &[&str] = &[
    "for i = 1, 500 do redis.call('rpush', KEYS[1], 'element-' .. i .. string.rep('x', i % 40)) end \
     for i = 1, 300 do redis.call('lpush', KEYS[2], i * 1000, 'v' .. string.rep('ab', i % 25)) end \
     for i = 1, 50 do redis.call('rpush', KEYS[3], string.rep(string.char(97 + i % 26), 3000 + i)) end \
     return 1",
];

fn build_compressed_lists(c: &mut Conn) {
    for script in COMPRESSED_LISTS {
        let reply = c.cmd_str(&["EVAL", script, "3", "l1", "l2", "l3"]);
        assert_eq!(reply, b":1\r\n");
    }
}

/// A list dumped with compressed nodes: the payload is Redis's byte for
/// byte (the same nodes, compressed the same, written as LZF blobs), and
/// each server restores the other's to the same elements, whatever its own
/// compress depth.
#[test]
fn compressed_lists_dump_as_redis_and_restore_both_ways() {
    let opts = [
        "--list-compress-depth",
        "1",
        "--list-max-listpack-size",
        "16",
    ];
    let Some(redis) = start_redis(&opts) else {
        return;
    };
    let kv = start_kvstore(&opts);
    let plain_kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    let mut p = Conn::connect(plain_kv.port);
    build_compressed_lists(&mut r);
    build_compressed_lists(&mut k);
    for key in ["l1", "l2", "l3"] {
        let want = r.cmd_str(&["LRANGE", key, "0", "-1"]);
        assert_eq!(
            k.cmd_str(&["LRANGE", key, "0", "-1"]),
            want,
            "{key} as built"
        );
        let theirs = r.cmd_str(&["DUMP", key]);
        let ours = k.cmd_str(&["DUMP", key]);
        assert_eq!(ours, theirs, "{key}: DUMP payloads differ");
        let theirs = common::bulk_payload(&theirs).expect("a payload").to_vec();
        // Redis's payload here, at the same depth and uncompressed.
        for c in [&mut k, &mut p] {
            assert_eq!(c.cmd(&[b"RESTORE", b"copy", b"0", &theirs]), b"+OK\r\n");
            assert_eq!(c.cmd_str(&["LRANGE", "copy", "0", "-1"]), want, "{key}");
            c.cmd_str(&["DEL", "copy"]);
        }
        // An uncompressed server's payload, restored by Redis.
        p.cmd(&[b"RESTORE", key.as_bytes(), b"0", &theirs]);
        let plain = p.cmd_str(&["DUMP", key]);
        let plain = common::bulk_payload(&plain).expect("a payload").to_vec();
        assert_eq!(r.cmd(&[b"RESTORE", b"copy", b"0", &plain]), b"+OK\r\n");
        assert_eq!(r.cmd_str(&["LRANGE", "copy", "0", "-1"]), want, "{key}");
        // Redis recompressed it at its own depth: the same bytes again.
        assert_eq!(
            r.cmd_str(&["DUMP", "copy"]),
            k.cmd_str(&["DUMP", key]),
            "{key}"
        );
        r.cmd_str(&["DEL", "copy"]);
    }
}

/// Small hashes, sets of integers and small sorted sets are dumped in
/// Redis's compact encodings (listpack, intset), byte for byte as Redis
/// dumps them: DUMP and DEBUG OBJECT's serializedlength agree, and each
/// server restores the other's payload.
#[test]
fn small_collections_dump_as_redis_byte_for_byte() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    let long = "x".repeat(60);
    let writes: Vec<Vec<String>> = vec![
        vec![
            "HSET".into(),
            "h".into(),
            "f".into(),
            "v".into(),
            "n".into(),
            "12".into(),
            "neg".into(),
            "-7000000000".into(),
            "big".into(),
            "18446744073709551616".into(),
            "long".into(),
            long.clone(),
            "-0".into(),
            "0".into(),
        ],
        vec!["HSET".into(), "h".into(), "f".into(), "changed".into()],
        vec!["HDEL".into(), "h".into(), "n".into()],
        vec![
            "SADD".into(),
            "s16".into(),
            "3".into(),
            "-1".into(),
            "200".into(),
        ],
        vec!["SADD".into(), "s32".into(), "70000".into(), "1".into()],
        vec![
            "SADD".into(),
            "s64".into(),
            "-9223372036854775808".into(),
            "5".into(),
        ],
        vec![
            "ZADD".into(),
            "z".into(),
            "1".into(),
            "a".into(),
            "-2.5".into(),
            "b".into(),
            "inf".into(),
            "c".into(),
            "-inf".into(),
            "d".into(),
            "0.1".into(),
            "e".into(),
            "1e20".into(),
            "f".into(),
            "123456789012345678".into(),
            "g".into(),
            "-0".into(),
            "h".into(),
            "3".into(),
            "17".into(),
        ],
    ];
    for w in &writes {
        let args: Vec<&str> = w.iter().map(String::as_str).collect();
        assert_eq!(k.cmd_str(&args), r.cmd_str(&args), "{args:?}");
    }
    let serialized = |c: &mut Conn, key: &str| -> String {
        let line = String::from_utf8_lossy(&c.cmd_str(&["DEBUG", "OBJECT", key])).to_string();
        line.split(' ')
            .find_map(|f| f.strip_prefix("serializedlength="))
            .unwrap_or_default()
            .to_string()
    };
    for key in ["h", "s16", "s32", "s64", "z"] {
        assert_eq!(
            k.cmd_str(&["OBJECT", "ENCODING", key]),
            r.cmd_str(&["OBJECT", "ENCODING", key]),
            "{key}"
        );
        let theirs = r.cmd_str(&["DUMP", key]);
        let ours = k.cmd_str(&["DUMP", key]);
        assert_eq!(ours, theirs, "{key}: DUMP payloads differ");
        assert_eq!(serialized(&mut k, key), serialized(&mut r, key), "{key}");
        let ours = common::bulk_payload(&ours).expect("a payload").to_vec();
        assert_eq!(r.cmd(&[b"RESTORE", b"copy", b"0", &ours]), b"+OK\r\n");
        assert_eq!(k.cmd(&[b"RESTORE", b"copy", b"0", &ours]), b"+OK\r\n");
        assert_eq!(
            r.cmd_str(&["DUMP", "copy"]),
            k.cmd_str(&["DUMP", "copy"]),
            "{key}"
        );
        r.cmd_str(&["DEL", "copy"]);
        k.cmd_str(&["DEL", "copy"]);
    }
}

/// Redis's payload of a list with compressed nodes, each byte of the body
/// changed and the checksum made right again: a damaged LZF blob or
/// listpack is refused (never a panic, never a read out of bounds), or the
/// change was harmless and the list restores.
#[test]
fn damaged_compressed_list_payloads_are_refused_or_restored_never_crash() {
    let opts = [
        "--list-compress-depth",
        "1",
        "--list-max-listpack-size",
        "4",
    ];
    let Some(redis) = start_redis(&opts) else {
        return;
    };
    let kv = start_kvstore(&opts);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    r.cmd_str(&[
        "EVAL",
        "for i = 1, 16 do redis.call('rpush', KEYS[1], 'elem' .. string.rep('e', 20) .. i) end return 1",
        "1",
        "l",
    ]);
    let payload = r.cmd_str(&["DUMP", "l"]);
    let payload = common::bulk_payload(&payload).unwrap().to_vec();
    let tried = (payload.len() - 10) * 3;
    let restored = restore_each_damaged_byte(&mut k, &payload, "l", |k| {
        // Whatever loaded reads back whole.
        let n = k.cmd_str(&["LLEN", "fuzzed"]);
        let range = k.cmd_str(&["LRANGE", "fuzzed", "0", "-1"]);
        assert!(n.starts_with(b":") && range.starts_with(b"*"));
    });
    assert!(restored < tried, "damage went unnoticed everywhere");
    assert_eq!(k.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn debug_set_skip_checksum_validation_lets_restore_meet_the_payload() {
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut k = Conn::connect(kv.port);
    k.cmd_str(&["RPUSH", "l", "a", "b", "c"]);
    let dump = k.cmd_str(&["DUMP", "l"]);
    let mut payload = common::bulk_payload(&dump).expect("a payload").to_vec();
    let last = payload.len() - 1;
    payload[last] ^= 0xff;
    assert_eq!(
        k.cmd(&[b"RESTORE", b"copy", b"0", &payload]),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
    assert_eq!(
        k.cmd_str(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]),
        b"+OK\r\n"
    );
    assert_eq!(k.cmd(&[b"RESTORE", b"copy", b"0", &payload]), b"+OK\r\n");
    assert_eq!(
        k.cmd_str(&["LRANGE", "copy", "0", "-1"]),
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    // The body is still checked: a damaged one is refused, not loaded.
    payload[1] ^= 0x55;
    assert!(k
        .cmd(&[b"RESTORE", b"bad", b"0", &payload])
        .starts_with(b"-ERR"));
    assert_eq!(k.cmd_str(&["EXISTS", "bad"]), b":0\r\n");
    k.cmd_str(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0"]);
    assert_eq!(
        k.cmd(&[b"RESTORE", b"again", b"0", &payload]),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
}

/// A refused payload is logged in Redis's words (its corrupt-dump tests
/// and people reading logs look for them): payloads from Redis's own
/// `tests/integration/corrupt-dump.tcl`.
#[test]
fn refused_payloads_are_logged_as_redis_logs_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kvstore.log");
    let kv = common::start_kvstore_in(
        dir,
        &[
            "--logfile",
            log.to_str().unwrap(),
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]),
        b"+OK\r\n"
    );
    let cases: [(&[u8], &str); 5] = [
        (
            b"\x0D\x1B\x1B\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x02\x61\x00\x04\x02\x62\x00\x04\x02\x61\x00\x04\x02\x64\x00\xFF\x09\x00\xA1\x98\x36\x78\xCC\x8E\x93\x2E",
            "Hash ziplist integrity check failed",
        ),
        (
            b"\x09\x02\x00\xFF\x09\x00\xC0\xF1\xB8\x67\x4C\x16\xAC\xE3",
            "Zipmap integrity check failed",
        ),
        (
            b"\x0F\x00\x00\x00\x00\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x00\x00\x00\x02\x04\x6E\x61\x6D\x65\x2A\x4C\xAA\x9A\x7D\x01\x00\x00\x00\x04\x6E\x61\x6D\x65\x2B\x4C\xAA\x9A\x7D\x01\x00\x00\x00\x0A\x00\xCC\xED\x8C\xA7\x62\xEE\xC7\xC8",
            "Duplicate stream consumer detected",
        ),
        (
            b"\x10\x17\x17\x00\x00\x00\x04\x00\x82\x61\x00\x03\x82\x62\x00\x03\x82\x61\x00\x03\x82\x64\x00\x03\xff\x0a\x00\xc0\xcf\xa6\x87\xe5\xa7\xc5\xbe",
            "listpack with dup elements",
        ),
        (
            b"\x0F\x01\x10\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02\x40\x55\x5F\x00\x00\x00\x0F\x00\x01\x01\x00\x01\x02\x01\x88\x31\x00\x00\x00\x00\x00\x00\x00\x09\x88\x32\x00\x00\x00\x00\x00\x00\x00\x09\x00\x01\x00\x01\x00\x01\x00\x01\x02\x02\x88\x31\x00\x00\x00\x00\x00\x00\x00\x09\x88\x61\x00\x00\x00\x00\x00\x00\x00\x09\x88\x32\x00\x00\x00\x00\x00\x00\x00\x09\x88\x62\x00\x00\x00\x00\x00\x00\x00\x09\x08\x01\xFF\x0A\x01\x00\x00\x09\x00\x45\x91\x0A\x87\x2F\xA5\xF9\x2E",
            "Stream listpack integrity check failed",
        ),
    ];
    for (payload, logged) in cases {
        assert_eq!(
            c.cmd(&[b"RESTORE", b"key", b"0", payload]),
            b"-ERR Bad data format\r\n"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains(logged), "{logged:?} not in the log:\n{text}");
    }
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
}

/// A zipmap length under 254 written in the five-byte form is refused:
/// the three payloads of Redis 7.0.15's fix for CVE-2026-25243 (its
/// `corrupt-dump.tcl`), each with a right checksum. A small field, a small
/// value, and a small field ahead of a huge one.
#[test]
fn zipmap_lengths_in_the_wrong_form_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kvstore.log");
    let kv = common::start_kvstore_in(dir, &["--logfile", log.to_str().unwrap()]);
    let mut c = Conn::connect(kv.port);
    let mut huge_field = b"\x09\x41\x15\x02\x04\x6b\x65\x79\x31\x04\x00\x76\x61\x6c\x31\xfe\x04\x00\x00\x00\xfe\xff\xff\xff\xfd\x00".to_vec();
    huge_field.extend(std::iter::repeat_n(0x42, 253));
    huge_field.extend_from_slice(b"\xff\x09\x00\x54\x2f\x0a\xca\x4e\x5c\x49\x9f");
    let payloads: [&[u8]; 3] = [
        b"\x09\x11\x01\xfe\x04\x00\x00\x00\x01\x00\xff\x00\x04\x00\x76\x61\x6c\x31\xff\x09\x00\xf9\xd5\xa4\xf7\x7d\x00\x3f\x1b",
        b"\x09\x0e\x01\x01\x6b\xfe\x04\x00\x00\x00\x00\x76\x61\x6c\x31\xff\x09\x00\xd0\xf9\xe4\x1d\xe4\xfb\x11\x4c",
        &huge_field,
    ];
    for (i, payload) in payloads.into_iter().enumerate() {
        assert_eq!(
            c.cmd(&[b"RESTORE", b"key", b"0", payload]),
            b"-ERR Bad data format\r\n",
            "payload {i}"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        let logged = text.matches("Zipmap integrity check failed").count();
        assert_eq!(logged, i + 1, "payload {i}; the log:\n{text}");
    }
    assert_eq!(c.cmd_str(&["EXISTS", "key"]), b":0\r\n");
    // The same pairs in the right form are restored.
    let good = b"\x01\x04key1\x04\x00val1\xff";
    let mut payload = vec![0x09, good.len() as u8];
    payload.extend_from_slice(good);
    payload.extend_from_slice(&[0x09, 0x00]);
    let crc = kvstore::persistence::crc64::crc64(0, &payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(c.cmd(&[b"RESTORE", b"key", b"0", &payload]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["HGETALL", "key"]),
        b"*2\r\n$4\r\nkey1\r\n$4\r\nval1\r\n"
    );
}
