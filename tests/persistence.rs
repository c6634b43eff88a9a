//! RDB snapshots against the real binary and against Redis's own tools:
//! data survives restarts, dumps move both ways between kvstore and
//! redis-server 7.0, redis-check-rdb accepts ours, corrupt files are refused.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{start_kvstore_in, start_redis, Conn};
use kvstore::config::Config;
use kvstore::persistence::rdb;
use kvstore::state::Server;

/// A dataset with every type, compact and large encodings, and TTLs.
fn fill(c: &mut Conn) {
    c.cmd_str(&["SET", "str", "hello world"]);
    c.cmd_str(&["SET", "int", "12345"]);
    c.cmd_str(&["SET", "big", &"x".repeat(5000)]);
    c.cmd_str(&["SET", "ttl", "v", "EX", "1000"]);
    c.cmd_str(&["RPUSH", "list", "a", "b", "c", "1"]);
    let many: Vec<String> = (0..600).map(|i| format!("item{i}")).collect();
    let mut args = vec!["RPUSH", "biglist"];
    args.extend(many.iter().map(|s| s.as_str()));
    c.cmd_str(&args);
    c.cmd_str(&["SADD", "ints", "1", "2", "3"]);
    c.cmd_str(&["SADD", "strs", "a", "b", "c"]);
    c.cmd_str(&["HSET", "hash", "f1", "v1", "f2", "2"]);
    let mut args = vec!["HSET", "bighash"];
    for s in &many {
        args.push(s);
        args.push(s);
    }
    c.cmd_str(&args);
    c.cmd_str(&["ZADD", "zset", "1.5", "a", "2", "b", "-inf", "c"]);
    let mut args = vec!["ZADD", "bigzset"];
    let scores: Vec<String> = (0..300).map(|i| i.to_string()).collect();
    for (s, m) in scores.iter().zip(&many) {
        args.push(s);
        args.push(m);
    }
    c.cmd_str(&args);
    c.cmd_str(&["SELECT", "3"]);
    c.cmd_str(&["SET", "in-db-3", "yes"]);
    c.cmd_str(&["SELECT", "0"]);
}

/// One key as a client sees it.
#[derive(Debug, Clone, PartialEq)]
struct KeyState {
    db: usize,
    key: Vec<u8>,
    kind: Vec<u8>,
    /// The whole value: GET, LRANGE, sorted members, sorted field/value
    /// pairs, or ZRANGE WITHSCORES.
    value: Vec<Vec<u8>>,
    encoding: Vec<u8>,
    /// PTTL in ms, or None without a TTL.
    ttl_ms: Option<i64>,
}

/// Every key of every database: type, full value, TTL and OBJECT ENCODING.
fn snapshot_of(c: &mut Conn) -> Vec<KeyState> {
    let mut out = Vec::new();
    for db in 0..16 {
        assert_eq!(c.cmd_str(&["SELECT", &db.to_string()]), b"+OK\r\n");
        let mut keys = elements(&c.cmd_str(&["KEYS", "*"]));
        keys.sort();
        for key in keys {
            let kind = c.cmd(&[b"TYPE", &key]);
            let value = match &kind[..] {
                b"+string\r\n" => vec![c.cmd(&[b"GET", &key])],
                b"+list\r\n" => elements(&c.cmd(&[b"LRANGE", &key, b"0", b"-1"])),
                b"+set\r\n" => {
                    let mut m = elements(&c.cmd(&[b"SMEMBERS", &key]));
                    m.sort();
                    m
                }
                b"+hash\r\n" => {
                    let flat = elements(&c.cmd(&[b"HGETALL", &key]));
                    let mut pairs: Vec<Vec<u8>> = flat.chunks(2).map(|p| p.concat()).collect();
                    pairs.sort();
                    pairs
                }
                b"+zset\r\n" => elements(&c.cmd(&[b"ZRANGE", &key, b"0", b"-1", b"WITHSCORES"])),
                other => panic!("unexpected type {:?}", String::from_utf8_lossy(other)),
            };
            let encoding = c.cmd(&[b"OBJECT", b"ENCODING", &key]);
            let pttl = String::from_utf8(c.cmd(&[b"PTTL", &key])).unwrap();
            let pttl: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
            out.push(KeyState {
                db,
                key,
                kind,
                value,
                encoding,
                ttl_ms: (pttl >= 0).then_some(pttl),
            });
        }
    }
    c.cmd_str(&["SELECT", "0"]);
    out
}

/// The elements of an array of bulk strings, without their framing.
fn elements(raw: &[u8]) -> Vec<Vec<u8>> {
    let (_, items) = common::aggregate_items(raw)
        .unwrap_or_else(|| panic!("not an array: {}", raw.escape_ascii()));
    items
        .iter()
        .map(|i| common::bulk_payload(i).expect("a bulk string").to_vec())
        .collect()
}

/// Two snapshots hold the same keys with the same types, values and
/// encodings, and the same TTLs give or take `tolerance` (time passes
/// between them).
fn assert_same_data(got: &[KeyState], expected: &[KeyState], tolerance: Duration, what: &str) {
    let names = |s: &[KeyState]| -> Vec<(usize, Vec<u8>)> {
        s.iter().map(|k| (k.db, k.key.clone())).collect()
    };
    assert_eq!(names(got), names(expected), "{what}: key sets differ");
    assert!(!expected.is_empty(), "{what}: empty snapshot");
    for (g, e) in got.iter().zip(expected) {
        let mut g2 = g.clone();
        g2.ttl_ms = e.ttl_ms;
        assert_eq!(g2, *e, "{what}: key {:?}", String::from_utf8_lossy(&e.key));
        match (g.ttl_ms, e.ttl_ms) {
            (None, None) => {}
            (Some(a), Some(b)) => assert!(
                (a - b).unsigned_abs() <= tolerance.as_millis() as u64,
                "{what}: TTL of {:?}: {a} vs {b} ms",
                String::from_utf8_lossy(&e.key)
            ),
            (a, b) => panic!(
                "{what}: TTL of {:?}: {a:?} vs {b:?}",
                String::from_utf8_lossy(&e.key)
            ),
        }
    }
}

/// Time allowed between two snapshots of the same data.
const TTL_TOLERANCE: Duration = Duration::from_secs(15);

#[test]
fn data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let s = start_kvstore_in(dir, &["--save", "3600 1"]);
    let mut c = Conn::connect(s.port);
    fill(&mut c);
    let before = snapshot_of(&mut c);
    // Saved alive, expired by the time the dump is loaded: skipped on load.
    c.cmd_str(&["SET", "soon", "v", "PX", "700"]);
    c.cmd_str(&["SELECT", "5"]);
    c.cmd_str(&["SET", "soon", "v", "PX", "700"]);
    // SHUTDOWN saves because save points are configured.
    c.send_raw(b"SHUTDOWN\r\n");
    c.expect_closed();
    let mut s = s;
    let _ = s.child.wait();
    assert!(path.join("dump.rdb").exists());
    std::thread::sleep(Duration::from_millis(800));
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    let s2 = start_kvstore_in(dir, &[]);
    let mut c2 = Conn::connect(s2.port);
    assert_same_data(
        &snapshot_of(&mut c2),
        &before,
        TTL_TOLERANCE,
        "after a restart",
    );
    let info = String::from_utf8(c2.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_load_keys_expired:2\r\n"), "{info}");
    // LASTSAVE and INFO report the save.
    let info = String::from_utf8(c2.cmd_str(&["INFO", "persistence"])).unwrap();
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
}

#[test]
fn bgsave_writes_in_the_background_and_debug_reload_round_trips() {
    let s = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--enable-debug-command", "yes"],
    );
    let mut c = Conn::connect(s.port);
    fill(&mut c);
    let before = snapshot_of(&mut c);
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info = String::from_utf8(c.cmd_str(&["INFO", "persistence"])).unwrap();
        if info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_saves:1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Only a real save and load turns an APPENDed ("raw") string back into
    // an embedded one, as in Redis.
    c.cmd_str(&["SET", "appended", "abc"]);
    c.cmd_str(&["APPEND", "appended", "def"]);
    assert_eq!(
        c.cmd_str(&["OBJECT", "ENCODING", "appended"]),
        b"$3\r\nraw\r\n"
    );
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["OBJECT", "ENCODING", "appended"]),
        b"$6\r\nembstr\r\n"
    );
    c.cmd_str(&["DEL", "appended"]);
    assert_same_data(
        &snapshot_of(&mut c),
        &before,
        TTL_TOLERANCE,
        "after DEBUG RELOAD",
    );
}

#[test]
fn dumps_move_both_ways_with_redis() {
    let Some(redis) = start_redis(&["--hash-max-listpack-entries", "512"]) else {
        return;
    };
    // Redis -> kvstore: Redis writes listpack, intset and quicklist2 encodings.
    let mut r = Conn::connect(redis.port);
    fill(&mut r);
    let expected = snapshot_of(&mut r);
    assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");
    let kv = common::start_kvstore_on_dump(&redis.dir.path().join("dump.rdb"), &[]);
    let mut k = Conn::connect(kv.port);
    assert_same_data(
        &snapshot_of(&mut k),
        &expected,
        TTL_TOLERANCE,
        "kvstore loading a Redis dump",
    );

    // kvstore -> redis-check-rdb and redis-server.
    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    let dump = kv.dir.path().join("dump.rdb");
    if let Some(check) = common::require_tool("redis-check-rdb") {
        let out = Command::new(check).arg(&dump).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("RDB looks OK"),
            "redis-check-rdb ({}): {text}",
            out.status
        );
    }
    drop(r);
    drop(redis);
    // A fresh redis-server started on kvstore's directory loads its dump.
    let kv_dir = kv.dir.path().to_str().unwrap().to_string();
    let redis2 = start_redis(&["--dir", &kv_dir]).unwrap();
    let mut r2 = Conn::connect(redis2.port);
    assert_same_data(
        &snapshot_of(&mut r2),
        &expected,
        TTL_TOLERANCE,
        "redis-server loading a kvstore dump",
    );
}

/// An RDB file written by redis-server with compressed list nodes (LZF
/// blobs inside quicklist2 records, and a plain node for a large element)
/// loads here with the same contents; the dump we write from it holds the
/// same bytes for each list, and redis-server loads that in turn.
#[test]
fn redis_dumps_with_compressed_list_nodes_load_and_ours_load_in_redis() {
    let opts = [
        "--list-compress-depth",
        "2",
        "--list-max-listpack-size",
        "8",
        "--enable-debug-command",
        "yes",
    ];
    let Some(redis) = start_redis(&opts) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    let script = "for i = 1, 400 do redis.call('rpush', KEYS[1], 'entry:' .. i .. string.rep('y', i % 30)) end \
                  for i = 1, 100 do redis.call('lpush', KEYS[2], i, -i * 70000) end \
                  return 1";
    assert_eq!(
        r.cmd_str(&["EVAL", script, "2", "words", "numbers"]),
        b":1\r\n"
    );
    // A plain node (an element over the packed threshold) among packed ones.
    assert_eq!(
        r.cmd_str(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1kb"]),
        b"+OK\r\n"
    );
    let big = "p".repeat(3000);
    r.cmd_str(&["RPUSH", "mixed", "a", "b", &big, "c", &big, "d", "e"]);
    r.cmd_str(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]);
    let keys = ["words", "numbers", "mixed"];
    let contents = |c: &mut Conn| -> Vec<Vec<u8>> {
        keys.iter()
            .flat_map(|k| {
                [
                    c.cmd_str(&["LRANGE", k, "0", "-1"]),
                    c.cmd_str(&["DUMP", k]),
                ]
            })
            .collect()
    };
    let expected = contents(&mut r);
    assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");

    let kv = common::start_kvstore_on_dump(&redis.dir.path().join("dump.rdb"), &opts);
    let mut k = Conn::connect(kv.port);
    assert_eq!(contents(&mut k), expected, "kvstore loading Redis's dump");

    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    if let Some(check) = common::require_tool("redis-check-rdb") {
        let out = Command::new(check)
            .arg(kv.dir.path().join("dump.rdb"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("RDB looks OK"),
            "{text}"
        );
    }
    drop(r);
    drop(redis);
    let mut args = opts.to_vec();
    let kv_dir = kv.dir.path().to_str().unwrap().to_string();
    args.extend(["--dir", &kv_dir]);
    let redis2 = start_redis(&args).unwrap();
    let mut r2 = Conn::connect(redis2.port);
    assert_eq!(contents(&mut r2), expected, "redis-server loading our dump");
}

/// The fixture dumps (one written by kvstore, one by redis-server 7.0, every
/// type) load; they also seed the RDB loader fuzzer, which so starts from
/// valid files.
#[test]
fn fixture_dumps_load() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rdb");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let mut srv = Server::new(Config::default());
        let stats = rdb::load_bytes(
            &mut srv.dbs,
            &rdb::LoadOptions::from_config(&Config::default()),
            &bytes,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(stats.keys >= 9, "{}: {} keys", path.display(), stats.keys);
        n += 1;
    }
    assert!(n >= 2, "fixture dumps missing");
}

/// Truncations and flipped bytes are refused with a message, never a panic.
#[test]
fn corrupt_dumps_are_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_kvstore_in(dir, &[]);
    let mut c = Conn::connect(s.port);
    fill(&mut c);
    c.cmd_str(&["SAVE"]);
    let good = std::fs::read(s.dir.path().join("dump.rdb")).unwrap();
    let mut srv = Server::new(Config::default());
    assert!(rdb::load_bytes(
        &mut srv.dbs,
        &rdb::LoadOptions::from_config(&Config::default()),
        &good
    )
    .is_ok());
    for cut in (0..good.len()).step_by(7) {
        let mut srv = Server::new(Config::default());
        let err = rdb::load_bytes(
            &mut srv.dbs,
            &rdb::LoadOptions::from_config(&Config::default()),
            &good[..cut],
        )
        .expect_err("truncated dump must be refused");
        assert!(err.contains("offset"), "{err}");
    }
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..400 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut bad = good.clone();
        let i = 9 + (rng as usize) % (bad.len() - 9);
        bad[i] ^= 1 << ((rng >> 60) % 8);
        let mut srv = Server::new(Config::default());
        // Any flip is caught, by the parser or by the CRC.
        assert!(
            rdb::load_bytes(
                &mut srv.dbs,
                &rdb::LoadOptions::from_config(&Config::default()),
                &bad
            )
            .is_err(),
            "flip at {i} accepted"
        );
    }
    // A corrupt file stops the server from starting.
    let bad_dir = tempfile::tempdir().unwrap();
    std::fs::write(bad_dir.path().join("dump.rdb"), &good[..good.len() / 2]).unwrap();
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_kvstore"))
            .args(["--port", &common::free_port().to_string(), "--dir"])
            .arg(bad_dir.path()),
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Bad RDB file"), "stderr: {err}");
    // The log ends as Redis's does (its tests and scripts look for it).
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.trim_end()
            .ends_with("Terminating server after rdb file reading failure."),
        "log: {log}"
    );
}

#[test]
fn check_rdb_subcommand_validates_dumps() {
    let s = start_kvstore_in(tempfile::tempdir().unwrap(), &[]);
    let mut c = Conn::connect(s.port);
    fill(&mut c);
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let dump = s.dir.path().join("dump.rdb");
    let out = Command::new(env!("CARGO_BIN_EXE_kvstore"))
        .arg("check-rdb")
        .arg(&dump)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK") && text.contains("keys read"),
        "{text}"
    );
    let bytes = std::fs::read(&dump).unwrap();
    let cut = s.dir.path().join("cut.rdb");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kvstore"))
        .arg("check-rdb")
        .arg(&cut)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("RDB ERROR DETECTED"));
}

/// Killing the server and its snapshot child mid-BGSAVE leaves a dump that
/// loads: the previous one or the new one, never a torn file.
#[test]
fn kill_during_bgsave_leaves_a_loadable_dump() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = start_kvstore_in(dir, &[]);
    let mut c = Conn::connect(s.port);
    c.cmd_str(&["SET", "before", "1"]);
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    // Enough data that the background save takes a moment.
    let value = "v".repeat(100);
    for batch in 0..20 {
        let mut args = vec!["MSET".to_string()];
        for i in 0..5000 {
            args.push(format!("key:{batch}:{i}"));
            args.push(value.clone());
        }
        let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
        c.cmd_str(&refs);
    }
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let pid = s.child.id();
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    unsafe {
        for child in children.split_whitespace() {
            libc::kill(child.parse().unwrap(), libc::SIGKILL);
        }
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let _ = s.child.wait();
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    let s2 = start_kvstore_in(dir, &[]);
    let mut c2 = Conn::connect(s2.port);
    assert_eq!(c2.cmd_str(&["GET", "before"]), b"$1\r\n1\r\n");
    let n = c2.cmd_str(&["DBSIZE"]);
    assert!(
        n == b":1\r\n" || n == b":100001\r\n",
        "torn dump? dbsize {}",
        n.escape_ascii()
    );
}

/// While a dump loads, commands get Redis's LOADING error (INFO still
/// works); once loaded, everything is there.
#[test]
fn clients_get_loading_while_a_dump_loads() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_kvstore_in(dir, &[]);
    let mut c = Conn::connect(s.port);
    let value = "v".repeat(50);
    for batch in 0..40 {
        let mut args = vec!["MSET".to_string()];
        for i in 0..10_000 {
            args.push(format!("k:{batch}:{i}"));
            args.push(value.clone());
        }
        let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
        c.cmd_str(&refs);
    }
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let mut s = s;
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    let loading = start_loading(dir, &[]);
    let mut conn = Conn::connect(loading.port);
    let mut saw_loading = false;
    loop {
        let r = conn.cmd_str(&["GET", "k:39:9999"]);
        if r == b"-LOADING Redis is loading the dataset in memory\r\n" {
            saw_loading = true;
            let info = String::from_utf8(conn.cmd_str(&["INFO", "persistence"])).unwrap();
            // Still loading (with progress fields, and the memory the
            // writer said it used, from the dump's aux field), or done in
            // between.
            let used_mem_known = info
                .lines()
                .find_map(|l| l.strip_prefix("loading_rdb_used_mem:"))
                .is_some_and(|v| v.trim().parse::<u64>().is_ok_and(|n| n > 1_000_000));
            assert!(
                (info.contains("loading:1\r\n")
                    && info.contains("loading_loaded_bytes:")
                    && used_mem_known)
                    || info.contains("loading:0\r\n"),
                "{info}"
            );
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        assert_eq!(r, format!("${}\r\n{}\r\n", value.len(), value).into_bytes());
        break;
    }
    assert!(
        saw_loading,
        "no -LOADING reply was seen while the dump loaded"
    );
    assert_eq!(conn.cmd_str(&["DBSIZE"]), b":400000\r\n");
}

/// kvstore on the dump in `dir`, answering as soon as it listens (the
/// harness's start waits for +PONG, which comes only after the load);
/// killed when dropped, even if an assertion fails.
fn start_loading(dir: tempfile::TempDir, args: &[&str]) -> common::ServerProcess {
    let port = common::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_kvstore"))
        .args(["--port", &port.to_string(), "--save", ""])
        .args(args)
        .arg("--dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = common::ServerProcess {
        child,
        port,
        dir,
        name: "kvstore",
    };
    common::wait_for("the server to listen", 30, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    server
}

/// A failed background save is reported, and with save points configured
/// writes are refused (stop-writes-on-bgsave-error) until a save succeeds.
#[test]
fn failed_bgsave_stops_writes_until_a_save_succeeds() {
    let s = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--save", "3600 1", "--enable-protected-configs", "yes"],
    );
    let mut c = Conn::connect(s.port);
    let doomed = s.dir.path().join("doomed");
    std::fs::create_dir(&doomed).unwrap();
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dir", doomed.to_str().unwrap()]),
        b"+OK\r\n"
    );
    std::fs::remove_dir(&doomed).unwrap();
    c.cmd_str(&["SET", "k", "v"]);
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info = String::from_utf8(c.cmd_str(&["INFO", "persistence"])).unwrap();
        if info.contains("rdb_last_bgsave_status:err") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = c.cmd_str(&["SET", "k", "w"]);
    assert!(err.starts_with(b"-MISCONF "), "{}", err.escape_ascii());
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    // Back to a working directory: SAVE succeeds and writes are accepted again.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dir", s.dir.path().to_str().unwrap()]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "k", "w"]), b"+OK\r\n");
}

#[test]
fn flushall_saves_and_resets_the_change_counter_only_with_save_points() {
    // With save points FLUSHALL writes the (empty) dump, which resets the
    // counter as Redis 7.0's rdbSave does; without, the flush counts as
    // changes. Both as redis-server 7.0 answers.
    let saving = start_kvstore_in(tempfile::tempdir().unwrap(), &["--save", "3600 1"]);
    let mut c = Conn::connect(saving.port);
    c.cmd_str(&["SET", "key", "value"]);
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        "1"
    );
    assert_eq!(c.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        "0"
    );
    assert!(saving.dir.path().join("dump.rdb").exists());

    let not_saving = start_kvstore_in(tempfile::tempdir().unwrap(), &["--save", ""]);
    let mut c = Conn::connect(not_saving.port);
    c.cmd_str(&["SET", "key", "value"]);
    c.cmd_str(&["SET", "other", "value"]);
    assert_eq!(c.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(
        c.info_field("persistence", "rdb_changes_since_last_save"),
        "4"
    );
    assert!(!not_saving.dir.path().join("dump.rdb").exists());
}

/// While a dump loads, CONFIG SET refuses with -LOADING the options that
/// would change the load (dir, appendonly), as Redis's DENY_LOADING_CONFIG,
/// and sets the others; `key-load-delay` and
/// `loading-process-events-interval-bytes` keep the load slow and the loop
/// turning, as in Redis's "config during loading".
#[test]
fn config_set_during_loading_refuses_what_would_change_the_load() {
    let s = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--enable-debug-command", "yes"],
    );
    let mut c = Conn::connect(s.port);
    assert_eq!(
        c.cmd_str(&["DEBUG", "POPULATE", "20000", "key", "1000"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let mut s = s;
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    let loading = start_loading(
        dir,
        &[
            "--enable-protected-configs",
            "yes",
            "--key-load-delay",
            "50",
            "--loading-process-events-interval-bytes",
            "1024",
            "--logfile",
            "loading.log",
        ],
    );
    let mut c = Conn::connect(loading.port);
    assert_eq!(c.info_field("persistence", "loading"), "1");
    // Ready only once the dataset is in, as Redis logs it.
    let log = loading.dir.path().join("loading.log");
    let ready = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Ready to accept connections")
    };
    assert!(!ready(), "ready logged while loading");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dir", "/tmp"]),
        b"-LOADING Redis is loading the dataset in memory\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "loglevel", "debug", "appendonly", "yes"]),
        b"-LOADING Redis is loading the dataset in memory\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "nosuch", "1", "dir", "/tmp"]),
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "loglevel", "debug"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "loglevel"]),
        b"*2\r\n$8\r\nloglevel\r\n$5\r\ndebug\r\n"
    );
    assert_eq!(
        c.info_field("persistence", "loading"),
        "1",
        "the load was over too soon"
    );
    common::wait_for("the dump to load", 30, || {
        c.info_field("persistence", "loading") == "0"
    });
    common::wait_for("the ready line", 5, ready);
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":20000\r\n");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
        b"+OK\r\n"
    );
}

/// Nothing forks inside EXEC: BGSAVE, BGREWRITEAOF and CONFIG SET
/// appendonly yes queued in a transaction are scheduled and run once it is
/// over, with Redis 7.0's replies and log line (unit/multi "MULTI with
/// BGREWRITEAOF", "MULTI with config set appendonly").
#[test]
fn background_saves_queued_in_a_transaction_are_scheduled() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("kvstore.log");
    let s = start_kvstore_in(dir, &["--logfile", log_path.to_str().unwrap()]);
    let mut c = Conn::connect(s.port);
    let forks = |c: &mut Conn| c.info_field("stats", "total_forks").parse::<u64>().unwrap();
    let before = forks(&mut c);
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["SET", "foo", "bar"]);
    c.cmd_str(&["BGSAVE"]);
    assert_eq!(
        c.cmd_str(&["EXEC"]),
        b"*2\r\n+OK\r\n+Background saving scheduled\r\n"
    );
    common::wait_for("the scheduled BGSAVE", 10, || {
        forks(&mut c) > before && c.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert!(s.dir.path().join("dump.rdb").exists());
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["BGREWRITEAOF"]);
    assert_eq!(
        c.cmd_str(&["EXEC"]),
        b"*1\r\n+Background append only file rewriting scheduled\r\n"
    );
    common::wait_for("the scheduled rewrite", 10, || {
        forks(&mut c) > before + 1 && c.info_field("persistence", "aof_rewrite_in_progress") == "0"
    });
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]);
    assert_eq!(c.cmd_str(&["EXEC"]), b"*1\r\n+OK\r\n");
    common::wait_for("the AOF to be on", 10, || {
        c.info_field("persistence", "aof_enabled") == "1"
            && c.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && c.info_field("persistence", "aof_rewrite_scheduled") == "0"
    });
    assert!(forks(&mut c) > before + 2);
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("AOF was enabled during a transaction. An AOF background was scheduled to start when possible."));
}

/// The largest `table size: N` of database `db`'s keys (DEBUG HTSTATS): the
/// rehashing target while a resize runs.
fn keyspace_buckets(c: &mut Conn, db: &str) -> u64 {
    let stats = String::from_utf8(c.cmd_str(&["DEBUG", "HTSTATS", db])).unwrap();
    let keys = stats.split("[Expires HT]").next().unwrap();
    keys.lines()
        .filter_map(|l| l.trim().strip_prefix("table size: "))
        .map(|n| n.trim().parse::<u64>().unwrap())
        .max()
        .unwrap_or_else(|| panic!("no table size in {stats}"))
}

/// Start a BGSAVE whose child writes each key `delay_us` late.
fn slow_bgsave(c: &mut Conn, delay_us: u64) {
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", &delay_us.to_string()]);
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
}

#[test]
fn tables_hold_off_resizing_while_a_child_shares_their_pages() {
    // Redis's updateDictResizePolicy: while a snapshot or rewrite child
    // runs, a keyspace grows its bucket array only once its chains average
    // more than 5 (a resize rewrites the link of every entry it moves,
    // copying its page); once the child is gone, the next write resizes.
    let kv = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--save", "", "--enable-debug-command", "yes"],
    );
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["DEBUG", "POPULATE", "4096", "a", "1"]);
    let before = keyspace_buckets(&mut c, "0");
    // 4096 keys written 1 ms apart: the child runs 4 s.
    slow_bgsave(&mut c, 1000);
    // Four entries per bucket: twice the usual load, under the forced one.
    c.cmd_str(&[
        "DEBUG",
        "POPULATE",
        &(before * 4 - 4096).to_string(),
        "b",
        "1",
    ]);
    assert_eq!(keyspace_buckets(&mut c, "0"), before, "grew beside a child");
    common::wait_for("the save", 30, || {
        c.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    c.cmd_str(&["SET", "one-more", "v"]);
    let grown = keyspace_buckets(&mut c, "0");
    assert!(
        grown > before,
        "{grown} buckets after the child, {before} before"
    );
    // Past 5 entries per bucket a table grows even beside a child.
    slow_bgsave(&mut c, 1000);
    let keys = before * 4 + 1;
    c.cmd_str(&[
        "DEBUG",
        "POPULATE",
        &(grown * 6 + 10 - keys).to_string(),
        "c",
        "1",
    ]);
    let forced = keyspace_buckets(&mut c, "0");
    assert!(forced > grown, "{forced} buckets for {} keys", grown * 6);
    assert_eq!(c.info_field("persistence", "rdb_bgsave_in_progress"), "1");
}

#[test]
fn a_background_child_reports_its_progress_and_copy_on_write() {
    // INFO persistence's current_* fields while a BGSAVE runs, and the
    // copy-on-write size of the last dump and rewrite once they end (Redis's
    // integration/rdb "Test child sending info").
    let kv = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--save", "", "--enable-debug-command", "yes"],
    );
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.info_field("persistence", "rdb_last_cow_size"), "0");
    c.cmd_str(&["DEBUG", "POPULATE", "5000", "key", "500"]);
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    assert_eq!(
        c.info_field("persistence", "current_save_keys_total"),
        "5000"
    );
    let mut last = 0u64;
    common::wait_for("progress reports", 20, || {
        // Writes copy pages the child still shares.
        c.cmd_str(&["DEBUG", "POPULATE", "300", "more", "4000"]);
        let keys: u64 = c
            .info_field("persistence", "current_save_keys_processed")
            .parse()
            .unwrap();
        let cow: u64 = c
            .info_field("persistence", "current_cow_size")
            .parse()
            .unwrap();
        let progressed = last > 0 && keys > last && cow > 0;
        last = last.max(keys);
        progressed
    });
    let perc: f64 = c
        .info_field("persistence", "current_fork_perc")
        .parse()
        .unwrap();
    assert!(perc > 0.0 && perc <= 100.0, "{perc}");
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    common::wait_for("the save", 30, || {
        c.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    let cow: u64 = c
        .info_field("persistence", "rdb_last_cow_size")
        .parse()
        .unwrap();
    assert!(cow > 0);
    assert_eq!(c.info_field("persistence", "current_save_keys_total"), "0");
    assert_eq!(c.info_field("persistence", "current_cow_peak"), "0");
    c.cmd_str(&["BGREWRITEAOF"]);
    common::wait_for("the rewrite", 30, || {
        c.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && c.info_field("persistence", "aof_last_cow_size") != "0"
    });
}

#[test]
fn debug_reload_takes_redis_s_options() {
    let kv = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--save", "", "--enable-debug-command", "yes"],
    );
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "a", "1"]);
    c.cmd_str(&["SET", "b", "1"]);
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    // NOSAVE: the file as it is; what was written since is gone.
    c.cmd_str(&["SET", "later", "1"]);
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "a", "later"]), b":1\r\n");
    // NOFLUSH: a key in both fails the load; MERGE replaces it, TTL too.
    c.cmd_str(&["SET", "later", "1"]);
    c.cmd_str(&["PEXPIRE", "a", "100000"]);
    let dup = c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]);
    assert!(
        dup.starts_with(b"-ERR Error trying to load the RDB dump"),
        "{}",
        String::from_utf8_lossy(&dup)
    );
    c.cmd_str(&["FLUSHALL"]);
    c.cmd_str(&["SET", "a", "2", "PX", "100000"]);
    c.cmd_str(&["SET", "later", "1"]);
    assert_eq!(
        c.cmd_str(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["MGET", "a", "b", "later"]),
        b"*3\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n"
    );
    assert_eq!(c.cmd_str(&["TTL", "a"]), b":-1\r\n");
    // The replaced key's TTL is gone from the expires table too (it stayed,
    // and active expiry would have deleted the key later).
    assert_eq!(
        c.info_field("keyspace", "db0"),
        "keys=3,expires=0,avg_ttl=0"
    );
    assert_eq!(
        c.cmd_str(&["DEBUG", "RELOAD", "FAST"]),
        b"-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
}

/// BGSAVE SCHEDULE schedules only behind another kind of child: while a
/// snapshot is being written it is refused as a plain BGSAVE is.
fn schedule_while_saving(port: u16) -> Vec<Vec<u8>> {
    let mut c = Conn::connect(port);
    c.cmd_str(&["DEBUG", "POPULATE", "100"]);
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let mut out = vec![c.cmd_str(&["BGSAVE"])];
    out.push(c.cmd_str(&["BGSAVE", "SCHEDULE"]));
    out.push(c.cmd_str(&["BGSAVE"]));
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    out
}

#[test]
fn bgsave_schedule_is_refused_while_a_snapshot_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let kv = start_kvstore_in(dir, &["--enable-debug-command", "yes"]);
    let ours = schedule_while_saving(kv.port);
    assert_eq!(
        ours[1],
        b"-ERR Background save already in progress\r\n".to_vec()
    );
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    assert_eq!(ours, schedule_while_saving(redis.port));
}
