//! End-to-end tests against the real binary, through the `redis` crate (as a
//! user's application would talk to it) and raw sockets where the protocol
//! itself is under test.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{start_kvstore, Conn};
use redis::{Commands, RedisResult};

fn client(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

#[test]
fn strings_and_counters_through_the_redis_crate() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    let _: () = c.set("user:1:name", "Ada").unwrap();
    let name: String = c.get("user:1:name").unwrap();
    assert_eq!(name, "Ada");
    let n: i64 = c.incr("hits", 5).unwrap();
    assert_eq!(n, 5);
    let n: i64 = c.decr("hits", 2).unwrap();
    assert_eq!(n, 3);
    let missing: Option<String> = c.get("nope").unwrap();
    assert_eq!(missing, None);
    let _: () = c.mset(&[("a", "1"), ("b", "2")]).unwrap();
    let vals: Vec<Option<String>> = c.mget(&["a", "b", "c"]).unwrap();
    assert_eq!(vals, vec![Some("1".into()), Some("2".into()), None]);
    let err: RedisResult<i64> = c.incr("user:1:name", 1);
    assert!(err.unwrap_err().to_string().contains("not an integer"));
}

#[test]
fn binary_safe_keys_and_values() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    let key: &[u8] = b"k\x00\r\n\xff\xfe key";
    let val: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    let _: () = c.set(key, &val).unwrap();
    let got: Vec<u8> = c.get(key).unwrap();
    assert_eq!(got, val);
    let utf8 = "ключ-ключ-🔑";
    let _: () = c.set(utf8, "значение").unwrap();
    let got: String = c.get(utf8).unwrap();
    assert_eq!(got, "значение");
}

#[test]
fn large_values_round_trip() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    let big: Vec<u8> = (0..64 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let _: () = c.set("big", &big).unwrap();
    let len: usize = c.strlen("big").unwrap();
    assert_eq!(len, big.len());
    let got: Vec<u8> = c.get("big").unwrap();
    assert!(got == big, "64 MB value came back different");
    let n: usize = c.append("big", "tail").unwrap();
    assert_eq!(n, big.len() + 4);
}

#[test]
fn deep_pipelines_are_answered_in_order() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    let mut batch = Vec::new();
    for i in 0..20_000 {
        batch.extend_from_slice(&common::encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
        batch.extend_from_slice(&common::encode(&[b"INCR", format!("k{i}").as_bytes()]));
    }
    let writer = {
        let mut w = conn.writer.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&batch).unwrap())
    };
    for i in 0..20_000 {
        assert_eq!(conn.read_reply(), b"+OK\r\n");
        assert_eq!(conn.read_reply(), format!(":{}\r\n", i + 1).into_bytes());
    }
    writer.join().unwrap();
    assert_eq!(conn.cmd_str(&["DBSIZE"]), b":20000\r\n");
}

#[test]
fn inline_commands_work_like_telnet() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    conn.send_raw(b"SET greeting \"hello world\"\r\nGET greeting\nPING\r\n\r\n");
    assert_eq!(conn.read_reply(), b"+OK\r\n");
    assert_eq!(conn.read_reply(), b"$11\r\nhello world\r\n");
    assert_eq!(conn.read_reply(), b"+PONG\r\n");
}

#[test]
fn protocol_error_closes_only_the_offender() {
    let s = start_kvstore(&[]);
    let mut good = Conn::connect(s.port);
    good.cmd_str(&["SET", "k", "v"]);
    let mut bad = Conn::connect(s.port);
    bad.send_raw(b"*1\r\n$abc\r\n");
    assert_eq!(
        bad.read_reply(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    bad.expect_closed();
    let mut bad2 = Conn::connect(s.port);
    bad2.send_raw(b"*3\r\n$3\r\nSET\r\n$999999999999\r\n");
    assert_eq!(
        bad2.read_reply(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    assert_eq!(good.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
}

#[test]
fn query_buffer_limit_closes_the_client() {
    let s = start_kvstore(&["--client-query-buffer-limit", "1mb"]);
    let mut conn = Conn::connect(s.port);
    // A 4 MB argument announced and sent: the server must drop us, not grow.
    let mut msg = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4194304\r\n".to_vec();
    msg.extend(std::iter::repeat_n(b'x', 4 << 20));
    let _ = conn.writer.write_all(&msg);
    conn.expect_closed();
    let mut other = Conn::connect(s.port);
    assert_eq!(other.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn keys_expire_lazily_and_actively() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    for i in 0..500 {
        let _: () = redis::cmd("SET")
            .arg(format!("tmp:{i}"))
            .arg("v")
            .arg("PX")
            .arg(100)
            .query(&mut c)
            .unwrap();
    }
    let _: () = c.set("keep", "v").unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let v: Option<String> = c.get("tmp:1").unwrap();
    assert_eq!(v, None);
    // Never-accessed keys are removed by the active cycle (DBSIZE counts
    // keys that expired but were not yet collected).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if n == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "active expiry did not collect keys: dbsize {n}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:500"), "{info}");
}

/// A key lives through the last millisecond of its TTL: Redis deletes it
/// only once the clock has passed its deadline (`now > when`), so a key set
/// with PX 30 is never gone to a client less than 30 ms after it sent the
/// SET. (It vanished up to a millisecond early; pottery's Redlock doctest
/// caught it.) The check holds whatever the scheduling: a reply saying the
/// key is gone was produced at a server time past the deadline.
#[test]
fn a_key_outlives_its_ttl_to_the_millisecond() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    for round in 0..20 {
        let sent = Instant::now();
        let _: () = redis::cmd("SET")
            .arg("lock")
            .arg("v")
            .arg("PX")
            .arg(30)
            .query(&mut c)
            .unwrap();
        loop {
            let exists: i64 = redis::cmd("EXISTS").arg("lock").query(&mut c).unwrap();
            let seen = sent.elapsed();
            if exists == 0 {
                assert!(
                    seen >= Duration::from_millis(30),
                    "round {round}: a key set with PX 30 was gone after {seen:?}"
                );
                break;
            }
            assert!(seen < Duration::from_secs(5), "the key never expired");
        }
    }
}

/// A TTL counts from the time the command was read, not from the start of
/// the loop's turn: here the SET's last bytes arrive while another client's
/// DEBUG SLEEP holds the turn in which the SET is read, and its key must
/// still live its 200 ms afterwards (it was born expired). With epoll the
/// read in that turn takes bytes that came after the turn began.
#[test]
fn a_ttl_counts_from_when_its_command_was_read() {
    let s = start_kvstore(&["--enable-debug-command", "yes", "--io-engine", "epoll"]);
    let (mut busy, mut sleeper, mut setter) = (
        Conn::connect(s.port),
        Conn::connect(s.port),
        Conn::connect(s.port),
    );
    let set = common::encode(&[b"SET", b"lock", b"v", b"PX", b"200"]);
    // The loop is held while the sleeper and the setter's first bytes
    // arrive, so both are read in the turn after it.
    busy.send(&[b"DEBUG", b"SLEEP", b"0.2"]);
    std::thread::sleep(Duration::from_millis(50));
    sleeper.send(&[b"DEBUG", b"SLEEP", b"0.3"]);
    std::thread::sleep(Duration::from_millis(20));
    setter.send_raw(&set[..4]);
    std::thread::sleep(Duration::from_millis(250));
    // The sleeper's turn now runs; the SET's rest arrives during it.
    setter.send_raw(&set[4..]);
    assert_eq!(setter.read_reply(), b"+OK\r\n");
    let ms = int_reply(&setter.cmd_str(&["PTTL", "lock"]));
    assert!(
        (100..=200).contains(&ms),
        "a key set with PX 200 has PTTL {ms}"
    );
    assert_eq!(busy.read_reply(), b"+OK\r\n");
    assert_eq!(sleeper.read_reply(), b"+OK\r\n");
}

/// The integer of a `:n` reply.
fn int_reply(reply: &[u8]) -> i64 {
    String::from_utf8_lossy(&reply[1..reply.len() - 2])
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not an integer: {}", String::from_utf8_lossy(reply)))
}

#[test]
fn a_ttl_in_a_pipeline_counts_from_its_own_command() {
    // Redis reads the clock as each command starts: a SET PX behind a slow
    // command of the same pipeline gets its whole TTL.
    let s = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut c = Conn::connect(s.port);
    let mut pipeline = common::encode(&[b"DEBUG", b"SLEEP", b"0.2"]);
    pipeline.extend(common::encode(&[b"SET", b"lock", b"v", b"PX", b"300"]));
    c.send_raw(&pipeline);
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b"+OK\r\n");
    let ms = int_reply(&c.cmd_str(&["PTTL", "lock"]));
    assert!(
        (200..=300).contains(&ms),
        "PX 300 behind a 200 ms command left a PTTL of {ms}"
    );
    // And a key's expiry is judged at the time its command starts: a GET
    // behind a slow command finds a 100 ms key gone.
    let mut pipeline = common::encode(&[b"SET", b"short", b"v", b"PX", b"100"]);
    pipeline.extend(common::encode(&[b"DEBUG", b"SLEEP", b"0.2"]));
    pipeline.extend(common::encode(&[b"GET", b"short"]));
    c.send_raw(&pipeline);
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b"$-1\r\n");
}

#[test]
fn a_ttl_set_late_in_a_script_counts_from_when_it_was_set() {
    // A script runs at one time for expiry, but as in Redis 7.0 a relative
    // TTL is added to the clock when the command runs and PTTL reads the
    // clock: a key a 150 ms script sets with PX 100 near its end outlives it.
    let s = start_kvstore(&[]);
    let mut c = Conn::connect(s.port);
    let script = "local t = redis.call('TIME') \
        local start = t[1] * 1000000 + t[2] \
        repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= 150000 \
        redis.call('SET', KEYS[1], 'v', 'PX', 100) \
        redis.call('SET', KEYS[2], 'v') \
        redis.call('PEXPIRE', KEYS[2], 100) \
        return {redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}";
    let reply = c.cmd_str(&["EVAL", script, "2", "a", "b"]);
    let text = String::from_utf8_lossy(&reply).to_string();
    let inside: Vec<i64> = text
        .split("\r\n")
        .filter_map(|l| l.strip_prefix(':'))
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(inside.len(), 2, "{text}");
    for ms in inside {
        assert!((90..=100).contains(&ms), "PTTL inside the script: {text}");
    }
    for key in ["a", "b"] {
        let ms = int_reply(&c.cmd_str(&["PTTL", key]));
        assert!(
            (1..=100).contains(&ms),
            "{key}, set with a 100 ms TTL at the end of a 150 ms script, has PTTL {ms} after it"
        );
    }
}

#[test]
fn requirepass_gates_commands() {
    let s = start_kvstore(&["--requirepass", "s3cret"]);
    let mut conn = Conn::connect(s.port);
    assert_eq!(
        conn.cmd_str(&["GET", "k"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        conn.cmd_str(&["AUTH", "wrong"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(conn.cmd_str(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(conn.cmd_str(&["GET", "k"]), b"$-1\r\n");
    let mut c = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn databases_are_isolated_and_swappable() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    conn.cmd_str(&["SET", "k", "zero"]);
    conn.cmd_str(&["SELECT", "5"]);
    assert_eq!(conn.cmd_str(&["GET", "k"]), b"$-1\r\n");
    conn.cmd_str(&["SET", "k", "five"]);
    conn.cmd_str(&["SWAPDB", "0", "5"]);
    assert_eq!(conn.cmd_str(&["GET", "k"]), b"$4\r\nzero\r\n");
    assert_eq!(conn.cmd_str(&["MOVE", "k", "1"]), b":1\r\n");
    conn.cmd_str(&["SELECT", "1"]);
    assert_eq!(conn.cmd_str(&["GET", "k"]), b"$4\r\nzero\r\n");
}

#[test]
fn maxmemory_noeviction_refuses_writes() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    conn.cmd_str(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(
        conn.cmd_str(&["SET", "k", "v"]),
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(conn.cmd_str(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(conn.cmd_str(&["DEL", "k"]), b":0\r\n");
    conn.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(conn.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
}

#[test]
fn scan_returns_every_key_while_the_table_grows() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    for i in 0..2000 {
        let _: () = c.set(format!("orig:{i}"), i).unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor: u64 = 0;
    let mut extra = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut c)
            .unwrap();
        seen.extend(keys);
        for _ in 0..10 {
            let _: () = c.set(format!("new:{extra}"), 1).unwrap();
            extra += 1;
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    for i in 0..2000 {
        assert!(seen.contains(&format!("orig:{i}")), "SCAN missed orig:{i}");
    }
    let (_, typed): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("COUNT")
        .arg(100000)
        .arg("TYPE")
        .arg("hash")
        .query(&mut c)
        .unwrap();
    assert!(typed.is_empty());
}

#[test]
fn resp3_after_hello() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    let hello = conn.cmd_str(&["HELLO", "3"]);
    assert!(
        hello.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{}",
        hello.escape_ascii()
    );
    assert_eq!(conn.cmd_str(&["GET", "nope"]), b"_\r\n");
    let cfg = conn.cmd_str(&["CONFIG", "GET", "maxmemory"]);
    assert_eq!(cfg, b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
    let info = conn.cmd_str(&["INFO", "server"]);
    assert!(info.starts_with(b"="), "INFO is a verbatim string in RESP3");
    conn.cmd_str(&["HELLO", "2"]);
    assert_eq!(conn.cmd_str(&["GET", "nope"]), b"$-1\r\n");
}

#[test]
fn client_commands_and_kill() {
    let s = start_kvstore(&[]);
    let mut a = Conn::connect(s.port);
    let mut b = Conn::connect(s.port);
    assert_eq!(b.cmd_str(&["CLIENT", "SETNAME", "worker-1"]), b"+OK\r\n");
    assert_eq!(b.cmd_str(&["CLIENT", "GETNAME"]), b"$8\r\nworker-1\r\n");
    let id = String::from_utf8(b.cmd_str(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim().to_string();
    let list = String::from_utf8(a.cmd_str(&["CLIENT", "LIST"])).unwrap();
    assert!(list.contains("name=worker-1"), "{list}");
    assert_eq!(a.cmd_str(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
    // The killed client is disconnected.
    b.expect_closed();
    assert_eq!(a.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn idle_clients_time_out() {
    let s = start_kvstore(&["--timeout", "1"]);
    let mut conn = Conn::connect(s.port);
    assert_eq!(conn.cmd_str(&["PING"]), b"+PONG\r\n");
    std::thread::sleep(Duration::from_millis(2500));
    // Closed by the server (EOF), not merely silent.
    conn.expect_closed();
}

#[test]
fn unix_socket_listener() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv.sock");
    let s = start_kvstore(&["--unixsocket", path.to_str().unwrap()]);
    let mut sock = std::os::unix::net::UnixStream::connect(&path).unwrap();
    sock.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 7];
    sock.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"+PONG\r\n");
    drop(s);
}

#[test]
fn shutdown_command_and_sigterm_stop_the_server() {
    let mut s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    conn.send_raw(b"SHUTDOWN NOSAVE\r\n");
    conn.expect_closed();
    let status = wait_exit(&mut s.child);
    assert!(status.success(), "{status:?}");

    let mut s = start_kvstore(&[]);
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let status = wait_exit(&mut s.child);
    assert!(status.success(), "{status:?}");
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn config_file_and_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("kvstore.conf");
    std::fs::write(&conf, "# test config\nmaxclients 123\nhz 20\n").unwrap();
    let (child, _port, mut conn) =
        common::start_kvstore_with_file(&conf, dir.path(), &["--save", ""]);
    assert_eq!(
        conn.cmd_str(&["CONFIG", "GET", "maxclients"]),
        b"*2\r\n$10\r\nmaxclients\r\n$3\r\n123\r\n"
    );
    conn.cmd_str(&["CONFIG", "SET", "maxmemory", "100mb"]);
    assert_eq!(conn.cmd_str(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("maxmemory 100mb"), "{text}");
    assert!(text.contains("# test config"), "comments survive: {text}");
    drop(child);
}

/// CONFIG REWRITE writes the file redis-server 7.0 writes from the same
/// file and the same CONFIG SETs: comments, unknown directives turned into
/// `# ???` comments, options rewritten in place (first line reused, the
/// rest blanked), aliases renamed, memory in Redis's units, strings quoted,
/// one line per `save` pair and per buffer-limit class, and the options
/// appended after the signature (compared as a set: Redis appends in its
/// dict's order, random per process).
#[test]
fn config_rewrite_writes_the_file_redis_writes() {
    let Some(bin) = common::require_tool("redis-server") else {
        return;
    };
    let template = "# a comment that stays\n\
        bind 127.0.0.1\n\
        maxclients 321\n\
        enable-protected-configs yes\n\
        \n\
        \n\
        hash-max-ziplist-entries 100\n\
        save 900 1\n\
        save 300 10\n\
        hz 15\n\
        hz 16\n\
        rename-command FLUSHALL \"\"\n\
        \tloglevel verbose \n\
        # trailing comment\n";
    let settings: &[(&str, &str)] = &[
        ("maxmemory", "100mb"),
        ("hz", "20"),
        ("save", "3600 1 300 100 60 10000"),
        (
            "client-output-buffer-limit",
            "normal 10mb 5mb 10 pubsub 32mb 8mb 61",
        ),
        ("lazyfree-lazy-user-del", "yes"),
        ("notify-keyspace-events", "KEA"),
        ("loglevel", "warning"),
        ("hash-max-listpack-value", "1024"),
        ("proto-max-bulk-len", "1000000000"),
        ("dbfilename", "my dump.rdb"),
        ("slowlog-log-slower-than", "5000"),
        ("appendfsync", "always"),
        ("list-max-listpack-size", "-3"),
    ];
    let rewrite =
        |start: &dyn Fn(&std::path::Path, &std::path::Path) -> (common::KillOnDrop, u16)| {
            let dir = tempfile::tempdir().unwrap();
            let conf = dir.path().join("server.conf");
            std::fs::write(&conf, template).unwrap();
            let (child, port) = start(&conf, dir.path());
            let mut c = Conn::connect(port);
            for (name, value) in settings {
                assert_eq!(
                    c.cmd_str(&["CONFIG", "SET", name, value]),
                    b"+OK\r\n",
                    "{name}"
                );
            }
            assert_eq!(c.cmd_str(&["CONFIG", "REWRITE"]), b"+OK\r\n");
            drop(child);
            let text = std::fs::read_to_string(&conf).unwrap();
            // The port and the directory are each server's own. Left out:
            // the ACL user lines Redis always adds (ACL users are issue 14).
            text.lines()
                .filter(|l| !l.starts_with("user "))
                .map(|l| {
                    if l.starts_with("port ") {
                        "port <port>".to_string()
                    } else if l.starts_with("dir ") {
                        "dir <dir>".to_string()
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<String>>()
        };
    let ours = rewrite(&|conf, dir| {
        let (child, port, _) = common::start_kvstore_with_file(conf, dir, &[]);
        (child, port)
    });
    let theirs = rewrite(&|conf, dir| {
        // The port may be taken by another test's server between
        // free_port and the bind: only our own process will do (its pid
        // in INFO), else try another port.
        for _ in 0..5 {
            let port = common::free_port();
            let mut child = common::KillOnDrop(
                std::process::Command::new(&bin)
                    .arg(conf)
                    .args(["--port", &port.to_string(), "--daemonize", "no", "--dir"])
                    .arg(dir)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut up = false;
            while Instant::now() < deadline && child.0.try_wait().unwrap().is_none() {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    up = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if up
                && Conn::connect(port).info_field("server", "process_id")
                    == child.0.id().to_string()
            {
                return (child, port);
            }
        }
        panic!("redis-server did not start");
    });
    let split = |lines: &[String]| -> (Vec<String>, Vec<String>) {
        let at = lines
            .iter()
            .position(|l| l == "# Generated by CONFIG REWRITE")
            .unwrap_or(lines.len());
        let mut appended = lines[at..].to_vec();
        appended.sort();
        (lines[..at].to_vec(), appended)
    };
    let (ours_kept, ours_added) = split(&ours);
    let (theirs_kept, theirs_added) = split(&theirs);
    assert_eq!(
        ours_kept,
        theirs_kept,
        "the rewritten part of the file\nkvstore:\n{}\nredis:\n{}",
        ours.join("\n"),
        theirs.join("\n")
    );
    assert_eq!(
        ours_added,
        theirs_added,
        "the appended options\nkvstore:\n{}\nredis:\n{}",
        ours.join("\n"),
        theirs.join("\n")
    );
}

/// A file kvstore's CONFIG REWRITE wrote is one redis-server 7.0 loads, with
/// the same values (multi-word options, quoting and classes included).
#[test]
fn a_rewritten_config_file_loads_in_redis_with_the_same_values() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("kvstore.conf");
    std::fs::write(&conf, "# shared settings\nmaxclients 321\n").unwrap();
    let (child, _port, mut conn) = common::start_kvstore_with_file(&conf, dir.path(), &[]);
    let settings: &[(&str, &str)] = &[
        ("maxmemory", "100mb"),
        ("hz", "20"),
        ("save", "3600 1 300 100"),
        ("client-output-buffer-limit", "normal 10mb 5mb 10"),
        ("lazyfree-lazy-user-del", "yes"),
        ("notify-keyspace-events", ""),
        ("requirepass", "a b\"c"),
    ];
    for (name, value) in settings {
        assert_eq!(
            conn.cmd_str(&["CONFIG", "SET", name, value]),
            b"+OK\r\n",
            "{name}"
        );
    }
    conn.cmd_str(&["AUTH", "a b\"c"]);
    assert_eq!(conn.cmd_str(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let names: Vec<&str> = settings
        .iter()
        .map(|(n, _)| *n)
        .chain(["maxclients", "dir"])
        .collect();
    let ours: Vec<Vec<u8>> = names
        .iter()
        .map(|n| conn.cmd_str(&["CONFIG", "GET", n]))
        .collect();
    drop(child);
    // redis-server on the same file (its own port, no saving on the way out).
    let Some(bin) = common::require_tool("redis-server") else {
        return;
    };
    let rport = common::free_port();
    let mut redis = common::KillOnDrop(
        std::process::Command::new(bin)
            .arg(&conf)
            .args(["--port", &rport.to_string(), "--daemonize", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut r = loop {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", rport)) {
            drop(s);
            break Conn::connect(rport);
        }
        if let Ok(Some(status)) = redis.0.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(redis.0.stderr.as_mut().unwrap(), &mut err);
            panic!(
                "redis-server refused kvstore's rewritten file ({status}): {err}\n{}",
                std::fs::read_to_string(&conf).unwrap()
            );
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    r.cmd_str(&["AUTH", "a b\"c"]);
    for (n, ours) in names.iter().zip(&ours) {
        assert_eq!(
            String::from_utf8_lossy(&r.cmd_str(&["CONFIG", "GET", n])),
            String::from_utf8_lossy(ours),
            "{n} after loading {}",
            std::fs::read_to_string(&conf).unwrap()
        );
    }
    drop(redis);
}

#[test]
fn works_with_redis_cli() {
    let Some(cli) = common::require_tool("redis-cli") else {
        return;
    };
    let s = start_kvstore(&[]);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&cli)
            .args(["-p", &s.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(&["SET", "k", "hello"]), "OK");
    assert_eq!(run(&["GET", "k"]), "hello");
    assert_eq!(run(&["--no-raw", "INCR", "n"]), "(integer) 1");
    assert!(run(&["INFO", "keyspace"]).contains("db0:keys=2"));
}

#[test]
fn slow_reader_still_gets_every_reply() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    let val = vec![b'v'; 8 << 20];
    conn.cmd(&[b"SET", b"big", &val]);
    // Ask for 80 MB of replies before reading any: the socket buffer fills,
    // the server must wait for writability and resume.
    for _ in 0..10 {
        conn.send(&[b"GET", b"big"]);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut other = Conn::connect(s.port);
    assert_eq!(
        other.cmd_str(&["PING"]),
        b"+PONG\r\n",
        "the loop is not blocked by a slow reader"
    );
    for _ in 0..10 {
        let r = conn.read_reply();
        assert_eq!(r.len(), val.len() + "$8388608\r\n\r\n".len());
    }
    assert_eq!(conn.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn absurd_random_counts_are_refused_not_fatal() {
    let s = start_kvstore(&[]);
    let mut conn = Conn::connect(s.port);
    conn.cmd_str(&["SADD", "s", "a"]);
    conn.cmd_str(&["HSET", "h", "f", "v"]);
    conn.cmd_str(&["ZADD", "z", "1", "m"]);
    assert_eq!(
        conn.cmd_str(&["SRANDMEMBER", "s", "-9223372036854775807"]),
        b"-ERR value is out of range\r\n"
    );
    assert_eq!(
        conn.cmd_str(&["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"]),
        b"-ERR value is out of range\r\n"
    );
    assert_eq!(
        conn.cmd_str(&["ZRANDMEMBER", "z", "-100000000000"]),
        b"-ERR value is out of range\r\n"
    );
    // Reasonable negative counts still repeat elements as Redis does.
    assert_eq!(
        conn.cmd_str(&["SRANDMEMBER", "s", "-3"]),
        b"*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
    );
    assert_eq!(conn.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn config_set_port_moves_the_listener() {
    let s = start_kvstore(&[]);
    let mut c = Conn::connect(s.port);
    c.cmd_str(&["SET", "k", "v"]);
    // A port someone else holds: refused, nothing changes.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "port", &taken_port]),
        b"-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n"
    );
    assert_eq!(Conn::connect(s.port).cmd_str(&["PING"]), b"+PONG\r\n");
    drop(taken);
    // A free one: served there, and no longer on the old one.
    let new_port = common::free_port();
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "port", &new_port.to_string()]),
        b"+OK\r\n"
    );
    let mut moved = Conn::connect(new_port);
    assert_eq!(moved.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    assert!(std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err());
    // The connection that asked is still served.
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        moved.cmd_str(&["CONFIG", "GET", "port"]),
        format!(
            "*2\r\n$4\r\nport\r\n${}\r\n{new_port}\r\n",
            new_port.to_string().len()
        )
        .into_bytes()
    );
}

#[test]
fn client_no_evict_is_a_flag_in_client_list() {
    let s = start_kvstore(&[]);
    let mut c = Conn::connect(s.port);
    assert_eq!(c.cmd_str(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    let info = String::from_utf8_lossy(&c.cmd_str(&["CLIENT", "INFO"])).to_string();
    assert!(info.contains(" flags=e "), "{info}");
    assert_eq!(c.cmd_str(&["CLIENT", "NO-EVICT", "OFF"]), b"+OK\r\n");
    let info = String::from_utf8_lossy(&c.cmd_str(&["CLIENT", "INFO"])).to_string();
    assert!(info.contains(" flags=N "), "{info}");
    assert_eq!(
        c.cmd_str(&["CLIENT", "NO-EVICT", "maybe"]),
        b"-ERR syntax error\r\n"
    );
}

/// LOLWUT's random pictures (the differential cases cover the fixed
/// ones): Schotter is 49 rows of 66 Braille cells by default, the skyline
/// 20 rows of 80 coloured cells, each ends with its credit line, and two
/// drawings differ.
#[test]
fn lolwut_draws_random_art_of_redis_shape() {
    let srv = start_kvstore(&[]);
    let mut c = Conn::connect(srv.port);
    let text = |c: &mut Conn, args: &[&str]| -> String {
        let raw = c.cmd_str(args);
        String::from_utf8(common::bulk_payload(&raw).expect("a bulk reply").to_vec()).unwrap()
    };

    let a = text(&mut c, &["LOLWUT", "VERSION", "5"]);
    let b = text(&mut c, &["LOLWUT", "VERSION", "5"]);
    assert_ne!(a, b, "two drawings came out the same");
    assert!(a.ends_with("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"));
    let rows: Vec<&str> = a.split('\n').collect();
    assert_eq!(rows.len(), 49 + 3, "{a}");
    for row in &rows[..49] {
        assert_eq!(row.chars().count(), 66, "{row}");
        assert!(row
            .chars()
            .all(|ch| ('\u{2800}'..='\u{28ff}').contains(&ch)));
    }
    // The lower rows are turned: some dots lie off the grid of the first
    // two rows' squares, so the picture is not a repeat of its top.
    assert_ne!(rows[40], rows[8]);

    let a = text(&mut c, &["LOLWUT", "VERSION", "6"]);
    let b = text(&mut c, &["LOLWUT", "VERSION", "6"]);
    assert_ne!(a, b, "two skylines came out the same");
    let credit = "\nDedicated to the 8 bit game developers of past and present.\n\
                  Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15\n";
    assert!(a.ends_with(credit));
    let picture = &a[..a.len() - credit.len()];
    let rows: Vec<&str> = picture.split('\n').collect();
    assert_eq!(rows.len(), 20);
    let mut seen = std::collections::HashSet::new();
    for row in rows {
        let cells: Vec<&str> = row.split("\x1b[0m").filter(|s| !s.is_empty()).collect();
        assert_eq!(cells.len(), 80, "{row:?}");
        for cell in cells {
            assert!(
                [
                    "\x1b[0;30;40m ",
                    "\x1b[0;90;100m ",
                    "\x1b[0;37;47m ",
                    "\x1b[0;97;107m "
                ]
                .contains(&cell),
                "{cell:?}"
            );
            seen.insert(cell);
        }
    }
    // Sky, two greys of buildings behind, black ones in front.
    assert_eq!(seen.len(), 4, "{seen:?}");
}

/// ZSCAN walks a large sorted set a few members at a time, as SSCAN and
/// HSCAN walk theirs (it returned the whole set in one reply): every
/// member present throughout is returned, with the score it has when it
/// is returned.
#[test]
fn zscan_of_a_large_sorted_set_is_incremental() {
    let srv = start_kvstore(&[]);
    let mut c = client(srv.port);
    let members: Vec<(f64, String)> = (0..600)
        .map(|i| (i as f64 / 4.0, format!("m{i:03}")))
        .collect();
    let _: i64 = c.zadd_multiple("zs", &members).unwrap();
    let (mut cursor, first): (u64, Vec<(String, String)>) = redis::cmd("ZSCAN")
        .arg("zs")
        .arg(0)
        .arg("COUNT")
        .arg(10)
        .query(&mut c)
        .unwrap();
    assert_ne!(cursor, 0, "the whole set came back in one call");
    assert!(first.len() < 100, "{} members for COUNT 10", first.len());
    let mut seen: std::collections::HashMap<String, String> = first.into_iter().collect();
    let unseen = members
        .iter()
        .map(|(_, m)| m.clone())
        .find(|m| !seen.contains_key(m))
        .unwrap();
    let _: i64 = c.zadd("zs", &unseen, 5000.5).unwrap();
    let mut calls = 1;
    while cursor != 0 {
        let (next, batch): (u64, Vec<(String, String)>) = redis::cmd("ZSCAN")
            .arg("zs")
            .arg(cursor)
            .arg("COUNT")
            .arg(100)
            .query(&mut c)
            .unwrap();
        seen.extend(batch);
        cursor = next;
        calls += 1;
    }
    assert!(calls > 2);
    assert_eq!(seen.len(), 600);
    assert_eq!(seen[&unseen], "5000.5");
    for (score, m) in &members {
        if *m != unseen {
            let want: f64 = *score;
            assert_eq!(seen[m].parse::<f64>().unwrap(), want, "{m}");
        }
    }
}

/// SRANDMEMBER, HRANDFIELD and ZRANDMEMBER with a count, on table-encoded
/// collections, along each of Redis's paths: repeats (negative count),
/// distinct draws (under a third of the collection), picks from a copy
/// (a third or more) and the whole collection. Every pick is a member (with
/// its own value or score), positive counts never repeat, and a long run of
/// repeats hits every member about equally often.
#[test]
fn random_picks_with_a_count_are_members_distinct_and_spread() {
    let s = start_kvstore(&[]);
    let mut c = client(s.port);
    let n = 1000;
    for i in 0..n {
        let _: () = redis::cmd("SADD")
            .arg("s")
            .arg(format!("m{i}"))
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg("h")
            .arg(format!("m{i}"))
            .arg(format!("v{i}"))
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("ZADD")
            .arg("z")
            .arg(i)
            .arg(format!("m{i}"))
            .query(&mut c)
            .unwrap();
    }
    for key in ["s", "h", "z"] {
        let enc: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(&mut c)
            .unwrap();
        assert!(enc == "hashtable" || enc == "skiplist", "{key}: {enc}");
    }
    let index = |m: &str| -> usize { m[1..].parse().expect("a member") };
    let draw = |c: &mut redis::Connection, cmd: &str, key: &str, count: i64| -> Vec<String> {
        match cmd {
            "SRANDMEMBER" => redis::cmd(cmd).arg(key).arg(count).query(c).unwrap(),
            _ => {
                let with = if cmd == "HRANDFIELD" {
                    "WITHVALUES"
                } else {
                    "WITHSCORES"
                };
                let flat: Vec<String> = redis::cmd(cmd)
                    .arg(key)
                    .arg(count)
                    .arg(with)
                    .query(c)
                    .unwrap();
                flat.chunks(2)
                    .map(|p| {
                        let i = index(&p[0]);
                        let expected = if cmd == "HRANDFIELD" {
                            format!("v{i}")
                        } else {
                            i.to_string()
                        };
                        assert_eq!(p[1], expected, "{cmd} pairs {} with {}", p[0], p[1]);
                        p[0].clone()
                    })
                    .collect()
            }
        }
    };
    for (cmd, key) in [
        ("SRANDMEMBER", "s"),
        ("HRANDFIELD", "h"),
        ("ZRANDMEMBER", "z"),
    ] {
        for count in [10, 300, 400, 999, 1000, 5000] {
            let got = draw(&mut c, cmd, key, count);
            assert_eq!(got.len(), (count as usize).min(n), "{cmd} {count}");
            let distinct: std::collections::HashSet<&String> = got.iter().collect();
            assert_eq!(distinct.len(), got.len(), "{cmd} {count} repeated a member");
            assert!(got.iter().all(|m| index(m) < n));
        }
        let mut hits = vec![0u32; n];
        for _ in 0..10 {
            for m in draw(&mut c, cmd, key, -10_000) {
                hits[index(&m)] += 1;
            }
        }
        // 100 expected per member. Chi-square over degrees of freedom: 1
        // for a uniform draw, about 6 for Redis's (and this) fair random
        // key, 21 for a random bucket's random entry (short chains favoured).
        let chi: f64 = hits
            .iter()
            .map(|&h| (h as f64 - 100.0).powi(2) / 100.0)
            .sum::<f64>()
            / (n - 1) as f64;
        assert!(
            chi < 14.0,
            "{cmd}: chi-square per degree of freedom {chi:.2}"
        );
    }
}

#[test]
fn a_write_while_paused_replaces_an_expired_key_instead_of_adding_a_second() {
    // Nothing expires while clients are paused, but a write that runs then
    // (an EXEC that paused) stores a new value under the key: the expired
    // entry must go first (redis-server 7.0.15 fails an assertion here).
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "k", "v", "PX", "1"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "f", "1.5", "PX", "1"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(20));
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["CLIENT", "PAUSE", "10000", "WRITE"]);
    c.cmd_str(&["LPUSH", "k", "x"]);
    c.cmd_str(&["INCRBYFLOAT", "f", "1"]);
    assert_eq!(c.cmd_str(&["EXEC"]), b"*3\r\n+OK\r\n:1\r\n$1\r\n1\r\n");
    assert_eq!(c.cmd_str(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":2\r\n");
    assert_eq!(c.cmd_str(&["TYPE", "k"]), b"+list\r\n");
    assert_eq!(c.cmd_str(&["TTL", "k"]), b":-1\r\n");
    assert_eq!(
        c.info_field("keyspace", "db0"),
        "keys=2,expires=0,avg_ttl=0"
    );
    // The dataset saves and loads (a key written twice was refused).
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["LRANGE", "k", "0", "-1"]), b"*1\r\n$1\r\nx\r\n");
    assert_eq!(c.cmd_str(&["GET", "f"]), b"$1\r\n1\r\n");
}

/// INFO's counters move as Redis's do: total_commands_processed counts
/// what runs (not a refused command, not a command when MULTI queues it,
/// but a script's commands and a transaction's), a blocked command once;
/// OBJECT counts a keyspace hit or miss.
#[test]
fn info_counters_move_as_redis_does() {
    let Some(redis) = common::start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let scenarios: &[&[&[&str]]] = &[
        &[&["FOO"], &["GET"], &["OBJECT", "FOO"]],
        &[&["MULTI"], &["SET", "q", "1"], &["GET", "q"], &["EXEC"]],
        &[&["MULTI"], &["SET", "q", "1"], &["DISCARD"]],
        &[&["MULTI"], &["SET", "q"], &["GET", "q"], &["EXEC"]],
        &[&["EVAL", "return redis.call('set','q','1')", "0"]],
        &[&["SET", "a", "1"], &["OBJECT", "ENCODING", "a"]],
        &[
            &["OBJECT", "ENCODING", "zz"],
            &["OBJECT", "IDLETIME", "zz"],
            &["OBJECT", "FREQ", "zz"],
        ],
        &[&["BLPOP", "nolist", "0.05"]],
    ];
    let stats = |c: &mut Conn| -> [i64; 3] {
        let info = String::from_utf8_lossy(&c.cmd_str(&["INFO", "stats"])).to_string();
        let field = |name: &str| -> i64 {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .unwrap_or_else(|| panic!("no {name}: {info}"))
                .trim()
                .parse()
                .unwrap()
        };
        [
            field("total_commands_processed"),
            field("keyspace_hits"),
            field("keyspace_misses"),
        ]
    };
    let delta = |port: u16, steps: &[&[&str]]| -> [i64; 3] {
        let mut c = Conn::connect(port);
        let before = stats(&mut c);
        for step in steps {
            c.cmd_str(step);
        }
        let after = stats(&mut c);
        [0, 1, 2].map(|i| after[i] - before[i])
    };
    for steps in scenarios {
        assert_eq!(
            delta(kv.port, steps),
            delta(redis.port, steps),
            "[commands, hits, misses] after {steps:?}: kvstore, then redis"
        );
    }
    // A blocked command counts once, when it is called, not again when a
    // push serves it.
    let blocked = |port: u16| -> [i64; 3] {
        let mut c = Conn::connect(port);
        let mut waiter = Conn::connect(port);
        let before = stats(&mut c);
        waiter.send(&[b"BLPOP", b"w", b"0"]);
        // (Waited for without commands, which would count.)
        std::thread::sleep(Duration::from_millis(300));
        c.cmd_str(&["RPUSH", "w", "x"]);
        assert_eq!(waiter.read_reply(), b"*2\r\n$1\r\nw\r\n$1\r\nx\r\n");
        let after = stats(&mut c);
        [0, 1, 2].map(|i| after[i] - before[i])
    };
    assert_eq!(blocked(kv.port), blocked(redis.port), "a served BLPOP");
}

/// INFO keyspace's avg_ttl is an estimate the active expiry cycle keeps;
/// once a database has no key with a TTL left it is 0 again (it kept the
/// last estimate for ever).
#[test]
fn avg_ttl_goes_back_to_zero_without_volatile_keys() {
    let kv = start_kvstore(&[]);
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "t", "v", "EX", "1000"]);
    c.cmd_str(&["SET", "u", "v"]);
    common::wait_for("an avg_ttl estimate", 10, || {
        !c.info_field("keyspace", "db0").ends_with("avg_ttl=0")
    });
    assert_eq!(c.cmd_str(&["PERSIST", "t"]), b":1\r\n");
    common::wait_for("avg_ttl to go back to 0", 10, || {
        c.info_field("keyspace", "db0") == "keys=2,expires=0,avg_ttl=0"
    });
}

/// CLIENT KILL ends the killed connection at once, as Redis frees the
/// client at once: not at the end of the loop's turn, which a transaction
/// that goes on to sleep would hold back (a replica killing its master link
/// that way must look gone to the master).
#[test]
fn client_kill_ends_the_connection_at_once() {
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut victim = Conn::connect(kv.port);
    let id = victim.client_id();
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["CLIENT", "KILL", "ID", &id]);
    c.cmd_str(&["DEBUG", "SLEEP", "2"]);
    let sent = Instant::now();
    c.send(&[b"EXEC"]);
    let (_, closed) = victim.read_available(Duration::from_millis(1000));
    assert!(closed, "the killed connection was still open");
    assert!(sent.elapsed() < Duration::from_millis(1500));
    assert_eq!(c.read_reply(), b"*2\r\n:1\r\n+OK\r\n");
}
