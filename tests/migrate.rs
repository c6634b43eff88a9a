//! MIGRATE against the real binary: keys moved or copied to another
//! kvstore and to and from a real redis-server, REPLACE and the target's
//! errors, the KEYS form, AUTH and AUTH2, an unreachable target, the kept
//! connection, a big value, the DEL it propagates, and MONITOR hiding its
//! passwords.

mod common;

use common::{aggregate_items, bulk_payload, start_kvstore, start_redis, Conn};

/// `MIGRATE 127.0.0.1 <port> <key> 0 5000 <extra...>`, its raw reply.
fn migrate(c: &mut Conn, port: u16, key: &str, extra: &[&str]) -> Vec<u8> {
    let port = port.to_string();
    let mut argv = vec!["MIGRATE", "127.0.0.1", &port, key, "0", "5000"];
    argv.extend_from_slice(extra);
    c.cmd_str(&argv)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn int(reply: &[u8]) -> i64 {
    assert_eq!(reply[0], b':', "not an integer: {}", text(reply));
    text(&reply[1..reply.len() - 2]).parse().unwrap()
}

/// The bulk strings of an array reply.
fn strings(reply: &[u8]) -> Vec<String> {
    let (_, items) =
        aggregate_items(reply).unwrap_or_else(|| panic!("not an array: {}", text(reply)));
    items
        .iter()
        .map(|i| text(bulk_payload(i).expect("a bulk string")))
        .collect()
}

/// A bulk reply of `value`.
fn bulk(value: &str) -> Vec<u8> {
    format!("${}\r\n{value}\r\n", value.len()).into_bytes()
}

#[test]
fn migrate_moves_a_string_with_its_ttl_and_the_source_loses_it() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    assert_eq!(s.cmd_str(&["SET", "k", "hello", "EX", "100"]), b"+OK\r\n");
    assert_eq!(migrate(&mut s, dst.port, "k", &[]), b"+OK\r\n");
    assert_eq!(s.cmd_str(&["EXISTS", "k"]), b":0\r\n");
    assert_eq!(d.cmd_str(&["GET", "k"]), bulk("hello"));
    let ttl = int(&d.cmd_str(&["TTL", "k"]));
    assert!((95..=100).contains(&ttl), "TTL on the target: {ttl}");
    // A key without a TTL arrives without one.
    s.cmd_str(&["SET", "p", "forever"]);
    assert_eq!(migrate(&mut s, dst.port, "p", &[]), b"+OK\r\n");
    assert_eq!(d.cmd_str(&["TTL", "p"]), b":-1\r\n");
}

#[test]
fn migrate_copy_keeps_the_source_key() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    s.cmd_str(&["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(migrate(&mut s, dst.port, "l", &["COPY"]), b"+OK\r\n");
    assert_eq!(
        strings(&s.cmd_str(&["LRANGE", "l", "0", "-1"])),
        ["a", "b", "c"]
    );
    assert_eq!(
        strings(&d.cmd_str(&["LRANGE", "l", "0", "-1"])),
        ["a", "b", "c"]
    );
}

#[test]
fn migrate_replace_overwrites_and_without_it_the_target_s_busykey_comes_back() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    s.cmd_str(&["SET", "k", "new"]);
    d.cmd_str(&["SET", "k", "old"]);
    assert_eq!(
        migrate(&mut s, dst.port, "k", &[]),
        b"-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    assert_eq!(s.cmd_str(&["GET", "k"]), bulk("new"));
    assert_eq!(d.cmd_str(&["GET", "k"]), bulk("old"));
    // The connection is still good for the next MIGRATE.
    assert_eq!(migrate(&mut s, dst.port, "k", &["REPLACE"]), b"+OK\r\n");
    assert_eq!(s.cmd_str(&["EXISTS", "k"]), b":0\r\n");
    assert_eq!(d.cmd_str(&["GET", "k"]), bulk("new"));
}

#[test]
fn migrate_keys_moves_several_and_skips_missing_ones() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    s.cmd_str(&["SET", "a", "1"]);
    s.cmd_str(&["SADD", "b", "x", "y"]);
    s.cmd_str(&["HSET", "c", "f", "v"]);
    assert_eq!(
        migrate(&mut s, dst.port, "", &["KEYS", "a", "missing", "b", "c"]),
        b"+OK\r\n"
    );
    assert_eq!(s.cmd_str(&["EXISTS", "a", "b", "c"]), b":0\r\n");
    assert_eq!(d.cmd_str(&["DBSIZE"]), b":3\r\n");
    assert_eq!(d.cmd_str(&["GET", "a"]), bulk("1"));
    assert_eq!(d.cmd_str(&["SCARD", "b"]), b":2\r\n");
    assert_eq!(d.cmd_str(&["HGET", "c", "f"]), bulk("v"));
    // None of them here: nothing is sent.
    assert_eq!(
        migrate(&mut s, dst.port, "", &["KEYS", "a", "missing"]),
        b"+NOKEY\r\n"
    );
    assert_eq!(migrate(&mut s, dst.port, "nokey", &[]), b"+NOKEY\r\n");
}

#[test]
fn migrate_keys_with_a_non_empty_key_argument_is_refused() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    s.cmd_str(&["SET", "a", "1"]);
    assert_eq!(
        migrate(&mut s, dst.port, "a", &["KEYS", "a"]),
        b"-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string\r\n"
    );
    assert_eq!(s.cmd_str(&["EXISTS", "a"]), b":1\r\n");
    assert_eq!(Conn::connect(dst.port).cmd_str(&["DBSIZE"]), b":0\r\n");
}

#[test]
fn migrate_auth_and_auth2_log_in_to_a_target_with_a_password() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&["--requirepass", "secret"]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    assert_eq!(d.cmd_str(&["AUTH", "secret"]), b"+OK\r\n");
    s.cmd_str(&["SET", "a", "1"]);
    s.cmd_str(&["SET", "b", "2"]);
    // No password: the target's NOAUTH comes back, the key stays.
    let r = migrate(&mut s, dst.port, "a", &[]);
    assert!(
        r.starts_with(b"-ERR Target instance replied with error: NOAUTH"),
        "{}",
        text(&r)
    );
    // A wrong one: WRONGPASS.
    let r = migrate(&mut s, dst.port, "a", &["AUTH", "wrong"]);
    assert!(
        r.starts_with(b"-ERR Target instance replied with error: WRONGPASS"),
        "{}",
        text(&r)
    );
    let r = migrate(&mut s, dst.port, "a", &["AUTH2", "default", "wrong"]);
    assert!(
        r.starts_with(b"-ERR Target instance replied with error: WRONGPASS"),
        "{}",
        text(&r)
    );
    assert_eq!(s.cmd_str(&["EXISTS", "a"]), b":1\r\n");
    assert_eq!(d.cmd_str(&["EXISTS", "a"]), b":0\r\n");
    // The right one, either way.
    assert_eq!(
        migrate(&mut s, dst.port, "a", &["AUTH", "secret"]),
        b"+OK\r\n"
    );
    assert_eq!(
        migrate(&mut s, dst.port, "b", &["AUTH2", "default", "secret"]),
        b"+OK\r\n"
    );
    assert_eq!(s.cmd_str(&["EXISTS", "a", "b"]), b":0\r\n");
    assert_eq!(
        d.cmd_str(&["MGET", "a", "b"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
}

#[test]
fn migrate_to_an_unreachable_target_is_an_ioerr_and_keeps_the_key() {
    let src = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    s.cmd_str(&["SET", "k", "v"]);
    // A port that was free a moment ago: nothing listens there.
    let nobody = common::free_port();
    let r = s.cmd_str(&[
        "MIGRATE",
        "127.0.0.1",
        &nobody.to_string(),
        "k",
        "0",
        "1000",
    ]);
    assert_eq!(r, b"-IOERR error or timeout connecting to the client\r\n");
    assert_eq!(s.cmd_str(&["GET", "k"]), bulk("v"));
    assert_eq!(s.info_field("stats", "migrate_cached_sockets"), "0");
}

#[test]
fn migrate_keeps_its_connection_to_the_target() {
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    let accepted = |d: &mut Conn| -> u64 {
        d.info_field("stats", "total_connections_received")
            .parse()
            .unwrap()
    };
    let before = accepted(&mut d);
    assert_eq!(s.info_field("stats", "migrate_cached_sockets"), "0");
    s.cmd_str(&["SET", "a", "1"]);
    s.cmd_str(&["SET", "b", "2"]);
    assert_eq!(migrate(&mut s, dst.port, "a", &[]), b"+OK\r\n");
    assert_eq!(s.info_field("stats", "migrate_cached_sockets"), "1");
    // The second MIGRATE uses the same connection: the target accepted
    // one connection from the source, and it is still open.
    assert_eq!(migrate(&mut s, dst.port, "b", &[]), b"+OK\r\n");
    assert_eq!(s.info_field("stats", "migrate_cached_sockets"), "1");
    assert_eq!(accepted(&mut d), before + 1);
    assert_eq!(d.info_field("clients", "connected_clients"), "2");
    assert_eq!(d.cmd_str(&["DBSIZE"]), b":2\r\n");
}

#[test]
fn migrate_moves_a_big_list_intact() {
    const LEN: usize = 200_000;
    let src = start_kvstore(&[]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut d = Conn::connect(dst.port);
    for start in (0..LEN).step_by(10_000) {
        let items: Vec<String> = (start..start + 10_000).map(|i| format!("e{i}")).collect();
        let mut argv: Vec<&str> = vec!["RPUSH", "big"];
        argv.extend(items.iter().map(|s| s.as_str()));
        s.cmd_str(&argv);
    }
    assert_eq!(int(&s.cmd_str(&["LLEN", "big"])), LEN as i64);
    let port = dst.port.to_string();
    assert_eq!(
        s.cmd_str(&["MIGRATE", "127.0.0.1", &port, "big", "0", "20000"]),
        b"+OK\r\n"
    );
    assert_eq!(s.cmd_str(&["EXISTS", "big"]), b":0\r\n");
    assert_eq!(int(&d.cmd_str(&["LLEN", "big"])), LEN as i64);
    for i in [0, 1, 9_999, 10_000, 123_456, LEN - 1] {
        assert_eq!(
            d.cmd_str(&["LINDEX", "big", &i.to_string()]),
            bulk(&format!("e{i}")),
            "element {i}"
        );
    }
}

#[test]
fn migrate_from_kvstore_to_redis_server() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let src = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    let mut r = Conn::connect(redis.port);
    s.cmd_str(&["SET", "str", "hello", "EX", "500"]);
    s.cmd_str(&["RPUSH", "list", "a", "b", "c"]);
    s.cmd_str(&["HSET", "hash", "f1", "v1", "f2", "v2"]);
    let long: Vec<String> = (0..300).map(|i| format!("item-{i}")).collect();
    let mut argv: Vec<&str> = vec!["RPUSH", "biglist"];
    argv.extend(long.iter().map(|s| s.as_str()));
    s.cmd_str(&argv);
    assert_eq!(
        migrate(
            &mut s,
            redis.port,
            "",
            &["KEYS", "str", "list", "hash", "biglist"]
        ),
        b"+OK\r\n"
    );
    assert_eq!(s.cmd_str(&["DBSIZE"]), b":0\r\n");
    assert_eq!(r.cmd_str(&["GET", "str"]), bulk("hello"));
    let ttl = int(&r.cmd_str(&["TTL", "str"]));
    assert!((495..=500).contains(&ttl), "TTL on redis: {ttl}");
    assert_eq!(
        strings(&r.cmd_str(&["LRANGE", "list", "0", "-1"])),
        ["a", "b", "c"]
    );
    let mut fields = strings(&r.cmd_str(&["HGETALL", "hash"]));
    fields.sort();
    assert_eq!(fields, ["f1", "f2", "v1", "v2"]);
    assert_eq!(strings(&r.cmd_str(&["LRANGE", "biglist", "0", "-1"])), long);
}

#[test]
fn migrate_from_redis_server_to_kvstore() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let dst = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut d = Conn::connect(dst.port);
    // Small ones (listpacks in Redis) and big ones (a hash table, a skiplist).
    r.cmd_str(&["HSET", "h", "f1", "v1", "f2", "v2"]);
    r.cmd_str(&["ZADD", "z", "1", "one", "2.5", "two", "-3", "minus"]);
    for i in 0..600 {
        let (f, v) = (format!("field{i}"), format!("value{i}"));
        r.cmd_str(&["HSET", "bigh", &f, &v]);
        r.cmd_str(&["ZADD", "bigz", &i.to_string(), &f]);
    }
    assert_eq!(
        r.cmd_str(&["OBJECT", "ENCODING", "bigh"]),
        bulk("hashtable")
    );
    assert_eq!(r.cmd_str(&["OBJECT", "ENCODING", "bigz"]), bulk("skiplist"));
    let before = [
        r.cmd_str(&["HGETALL", "h"]),
        r.cmd_str(&["HGETALL", "bigh"]),
        r.cmd_str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        r.cmd_str(&["ZRANGE", "bigz", "0", "-1", "WITHSCORES"]),
    ];
    assert_eq!(
        migrate(&mut r, dst.port, "", &["KEYS", "h", "bigh", "z", "bigz"]),
        b"+OK\r\n"
    );
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":0\r\n");
    let sorted = |raw: Vec<u8>| {
        let mut pairs: Vec<(String, String)> = strings(&raw)
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        pairs.sort();
        pairs
    };
    assert_eq!(
        sorted(d.cmd_str(&["HGETALL", "h"])),
        sorted(before[0].clone())
    );
    assert_eq!(
        sorted(d.cmd_str(&["HGETALL", "bigh"])),
        sorted(before[1].clone())
    );
    assert_eq!(
        d.cmd_str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        before[2]
    );
    assert_eq!(
        d.cmd_str(&["ZRANGE", "bigz", "0", "-1", "WITHSCORES"]),
        before[3]
    );
    assert_eq!(d.cmd_str(&["ZSCORE", "z", "two"]), bulk("2.5"));
}

/// The commands in the incremental AOF files of a server's data directory.
fn incremental_aof(dir: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            all.extend(std::fs::read(path).unwrap());
        }
    }
    all
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn migrate_without_copy_propagates_as_del() {
    let src = start_kvstore(&["--appendonly", "yes"]);
    let dst = start_kvstore(&[]);
    let mut s = Conn::connect(src.port);
    s.cmd_str(&["SET", "moved", "1"]);
    s.cmd_str(&["SET", "copied", "2"]);
    assert_eq!(migrate(&mut s, dst.port, "copied", &["COPY"]), b"+OK\r\n");
    assert_eq!(migrate(&mut s, dst.port, "moved", &[]), b"+OK\r\n");
    let del_moved = common::encode(&[b"DEL", b"moved"]);
    let dir = src.dir.path().to_path_buf();
    common::wait_for("DEL moved in the AOF", 5, || {
        contains(&incremental_aof(&dir), &del_moved)
    });
    let aof = incremental_aof(&dir);
    // The copy deleted nothing, and MIGRATE itself is not in the log.
    assert!(
        !contains(&aof.to_ascii_uppercase(), b"MIGRATE"),
        "{}",
        text(&aof)
    );
    assert!(
        !contains(&aof, &common::encode(&[b"DEL", b"copied"])),
        "{}",
        text(&aof)
    );
}

/// What MONITOR shows of MIGRATE ... AUTH / AUTH2, after the address.
fn monitored_migrate_lines(source_port: u16, target_port: u16) -> Vec<String> {
    let mut mon = Conn::connect(source_port);
    assert_eq!(mon.cmd_str(&["MONITOR"]), b"+OK\r\n");
    let mut s = Conn::connect(source_port);
    s.cmd_str(&["SET", "a", "1"]);
    s.cmd_str(&["SET", "b", "2"]);
    assert_eq!(
        migrate(&mut s, target_port, "", &["AUTH", "secret", "KEYS", "a"]),
        b"+OK\r\n"
    );
    assert_eq!(
        migrate(
            &mut s,
            target_port,
            "b",
            &["COPY", "AUTH2", "default", "secret"]
        ),
        b"+OK\r\n"
    );
    let mut lines = Vec::new();
    while lines.len() < 2 {
        let line = mon.read_line();
        if line.to_ascii_lowercase().contains("\"migrate\"") {
            let (_, args) = line.split_once("] ").expect("a monitor line");
            lines.push(args.to_string());
        }
    }
    lines
}

#[test]
fn monitor_redacts_migrate_passwords() {
    let target = start_kvstore(&["--requirepass", "secret"]);
    let tp = target.port;
    let expected = [
        format!(r#""MIGRATE" "127.0.0.1" "{tp}" "" "0" "5000" "AUTH" "(redacted)" "KEYS" "a""#),
        format!(
            r#""MIGRATE" "127.0.0.1" "{tp}" "b" "0" "5000" "COPY" "AUTH2" "(redacted)" "(redacted)""#
        ),
    ];
    let src = start_kvstore(&[]);
    assert_eq!(monitored_migrate_lines(src.port, tp), expected);
    // Redis shows the same.
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    {
        let mut t = Conn::connect(tp);
        assert_eq!(t.cmd_str(&["AUTH", "secret"]), b"+OK\r\n");
        assert_eq!(t.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    }
    assert_eq!(monitored_migrate_lines(redis.port, tp), expected);
}
