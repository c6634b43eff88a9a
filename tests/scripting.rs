//! Scripting as client libraries use it: redis-rs `Script` (EVALSHA, then
//! EVAL on NOSCRIPT), redis-py's `Lock` (acquire, extend, release are Lua
//! scripts) and `register_script`, against the real binary.

mod common;

use common::{start_kvstore, Conn};

#[test]
fn redis_rs_scripts_load_on_demand_and_run_from_the_cache() {
    let kv = start_kvstore(&[]);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", kv.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    let script = redis::Script::new(
        "redis.call('set', KEYS[1], ARGV[1]); return {redis.call('get', KEYS[1]), #ARGV}",
    );
    // The first call finds no script (NOSCRIPT), loads it and runs it.
    let (value, argc): (String, i64) = script.key("k").arg("hello").invoke(&mut con).unwrap();
    assert_eq!((value.as_str(), argc), ("hello", 1));
    let mut c = Conn::connect(kv.port);
    let sha = script.get_hash();
    assert_eq!(c.cmd_str(&["SCRIPT", "EXISTS", sha]), b"*1\r\n:1\r\n");
    // Later calls are EVALSHA alone.
    let (value, _): (String, i64) = script.key("k").arg("again").invoke(&mut con).unwrap();
    assert_eq!(value, "again");
    assert_eq!(c.cmd_str(&["SCRIPT", "FLUSH"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SCRIPT", "EXISTS", sha]), b"*1\r\n:0\r\n");
    let (value, _): (String, i64) = script.key("k").arg("reloaded").invoke(&mut con).unwrap();
    assert_eq!(value, "reloaded");
    // A script error reaches the client as Redis words it.
    let err = redis::Script::new("return redis.call('incr', KEYS[1])")
        .key("k")
        .invoke::<i64>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("value is not an integer or out of range"),
        "{err}"
    );
}

/// The redis-py checks: its Lock and register_script.
const REDIS_PY_CHECK: &str = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
lock = r.lock("resource", timeout=10)
assert lock.acquire(blocking=False)
assert r.get("resource") is not None
assert not r.lock("resource", timeout=10).acquire(blocking=False)
assert lock.extend(5)
assert r.pttl("resource") > 10000
lock.release()
assert r.get("resource") is None
try:
    lock.release()
    raise SystemExit("released twice")
except redis.exceptions.LockError:
    pass
with r.lock("ctx", timeout=5):
    assert r.exists("ctx") == 1
assert r.exists("ctx") == 0
add = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
assert add(keys=["n"], args=[5]) == 5
assert add(keys=["n"], args=[2]) == 7
print("ok")
"#;

#[test]
fn redis_py_lock_acquires_extends_and_releases() {
    let Some(python) = common::python_with_redis_py("the Lock check") else {
        return;
    };
    let kv = start_kvstore(&[]);
    let out = common::output_within(
        std::process::Command::new(python).args(["-c", REDIS_PY_CHECK, &kv.port.to_string()]),
        std::time::Duration::from_secs(60),
    );
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "redis-py: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_script_that_never_ends_does_not_keep_the_server_from_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("script.log");
    let log_arg = log_path.to_string_lossy().into_owned();
    let mut kv = common::start_kvstore_in(
        dir,
        &["--busy-reply-threshold", "100", "--logfile", &log_arg],
    );
    let mut c = Conn::connect(kv.port);
    c.send(&[b"EVAL", b"local n = 0 while true do n = n + 1 end", b"0"]);
    std::thread::sleep(std::time::Duration::from_millis(400));
    // SAFETY: kill(2) on our own child process.
    unsafe { libc::kill(kv.child.id() as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = kv.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not stop while a script looped"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("Slow script detected"), "{log}");
}

const LIBRARY: &str = "#!lua name=counters\nredis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";

#[test]
fn function_libraries_survive_dumps_reloads_and_move_between_servers() {
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["FUNCTION", "LOAD", LIBRARY]),
        b"$8\r\ncounters\r\n"
    );
    assert_eq!(c.cmd_str(&["FCALL", "bump", "1", "n", "5"]), b":5\r\n");
    // DEBUG RELOAD saves and loads the dump: the library comes back.
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["FCALL_RO", "peek", "1", "n"]), b"$1\r\n5\r\n");
    // DUMP, FLUSH, RESTORE.
    let dump = c.cmd_str(&["FUNCTION", "DUMP"]);
    let payload = common::bulk_payload(&dump).unwrap().to_vec();
    assert_eq!(c.cmd_str(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["FCALL", "bump", "1", "n", "1"]),
        b"-ERR Function not found\r\n"
    );
    assert_eq!(c.cmd(&[b"FUNCTION", b"RESTORE", &payload]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[b"FUNCTION", b"RESTORE", &payload]),
        b"-ERR Library counters already exists\r\n"
    );
    assert_eq!(
        c.cmd(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["FCALL", "bump", "1", "n", "1"]), b":6\r\n");
    let mut broken = payload.clone();
    let last = broken.len() - 1;
    broken[last] ^= 1;
    assert_eq!(
        c.cmd(&[b"FUNCTION", b"RESTORE", &broken]),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
    // The payload is Redis's: redis-server restores ours and we restore its.
    let Some(redis) = common::start_redis(&[]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    assert_eq!(r.cmd(&[b"FUNCTION", b"RESTORE", &payload]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["FCALL", "bump", "1", "n", "2"]), b":2\r\n");
    let theirs = r.cmd_str(&["FUNCTION", "DUMP"]);
    let theirs = common::bulk_payload(&theirs).unwrap().to_vec();
    assert_eq!(
        c.cmd(&[b"FUNCTION", b"RESTORE", &theirs, b"FLUSH"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["FCALL_RO", "peek", "1", "n"]), b"$1\r\n6\r\n");
}

#[test]
fn a_replica_gets_the_libraries_and_their_changes() {
    let master = start_kvstore(&[]);
    let mut m = Conn::connect(master.port);
    assert_eq!(
        m.cmd_str(&["FUNCTION", "LOAD", LIBRARY]),
        b"$8\r\ncounters\r\n"
    );
    let Some(redis) = common::start_redis(&["--replicaof", "127.0.0.1", &master.port.to_string()])
    else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    common::wait_for("the replica to sync", 20, || {
        r.info_field("replication", "master_link_status") == "up"
    });
    // The full sync carried the library; its writes replicate by effects.
    assert_eq!(m.cmd_str(&["FCALL", "bump", "1", "n", "3"]), b":3\r\n");
    common::wait_for("the write to replicate", 10, || {
        r.cmd_str(&["GET", "n"]) == b"$1\r\n3\r\n"
    });
    assert_eq!(r.cmd_str(&["FCALL_RO", "peek", "1", "n"]), b"$1\r\n3\r\n");
    // FUNCTION DELETE goes to the replica as itself.
    assert_eq!(m.cmd_str(&["FUNCTION", "DELETE", "counters"]), b"+OK\r\n");
    common::wait_for("the delete to replicate", 10, || {
        r.cmd_str(&["FCALL_RO", "peek", "1", "n"]) == b"-ERR Function not found\r\n"
    });
}

#[test]
fn a_busy_script_answers_others_busy_and_script_kill_stops_it() {
    let mut kv = start_kvstore(&["--busy-reply-threshold", "100"]);
    let mut runner = Conn::connect(kv.port);
    let mut other = Conn::connect(kv.port);
    runner.send(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]);
    common::wait_for("the script to be busy", 10, || {
        other.cmd_str(&["PING"]).starts_with(b"-BUSY")
    });
    // A new connection is served too.
    let mut late = Conn::connect(kv.port);
    assert_eq!(
        late.cmd_str(&["GET", "x"]),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert!(other.cmd_str(&["FUNCTION", "KILL"]).starts_with(b"-BUSY"));
    assert!(other.cmd_str(&["SHUTDOWN"]).starts_with(b"-BUSY"));
    assert_eq!(other.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let reply = String::from_utf8(runner.read_reply()).unwrap();
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{reply}"
    );
    assert_eq!(other.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        other.cmd_str(&["SCRIPT", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
    // A function is killed with FUNCTION KILL, and FUNCTION STATS shows it.
    assert_eq!(
        other.cmd_str(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=spin\nredis.register_function('spin', function() while true do end end)"
        ]),
        b"$4\r\nspin\r\n"
    );
    runner.send(&[b"FCALL", b"spin", b"0"]);
    common::wait_for("the function to be busy", 10, || {
        other.cmd_str(&["PING"]).starts_with(b"-BUSY")
    });
    let stats = String::from_utf8(other.cmd_str(&["FUNCTION", "STATS"])).unwrap();
    assert!(
        stats.contains("spin") && stats.contains("duration_ms"),
        "{stats}"
    );
    assert!(
        stats.ends_with("$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"),
        "{stats}"
    );
    assert!(other.cmd_str(&["SCRIPT", "KILL"]).starts_with(b"-BUSY"));
    assert_eq!(other.cmd_str(&["FUNCTION", "KILL"]), b"+OK\r\n");
    assert!(runner
        .read_reply()
        .starts_with(b"-ERR Script killed by user"));
    // A script that wrote cannot be killed: SHUTDOWN NOSAVE stops it all.
    runner.send(&[
        b"EVAL",
        b"redis.call('set', 'k', 'v') while true do end",
        b"0",
    ]);
    common::wait_for("the writing script to be busy", 10, || {
        other.cmd_str(&["PING"]).starts_with(b"-BUSY")
    });
    assert!(other
        .cmd_str(&["SCRIPT", "KILL"])
        .starts_with(b"-UNKILLABLE Sorry the script already executed write commands"));
    other.send(&[b"SHUTDOWN", b"NOSAVE"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while kv.child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "SHUTDOWN NOSAVE did not stop the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_busy_script_sees_a_replica_leave() {
    let master = start_kvstore(&["--busy-reply-threshold", "100"]);
    let port = master.port.to_string();
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &port]);
    let mut other = Conn::connect(master.port);
    common::wait_for("the replica to attach", 20, || {
        other.info_field("replication", "connected_slaves") == "1"
    });
    // The script waits for the replica to go (Redis's own test of a long
    // script seeing its replicas leave): only the pump can notice it.
    let mut runner = Conn::connect(master.port);
    runner.send(&[
        b"EVAL",
        b"while true do local i = redis.call('info', 'replication') if not string.find(i, 'connected_slaves:1') then return 'gone' end end",
        b"0",
    ]);
    common::wait_for("the script to be busy", 10, || {
        other.cmd_str(&["PING"]).starts_with(b"-BUSY")
    });
    drop(replica);
    assert_eq!(runner.read_reply(), b"$4\r\ngone\r\n");
    assert_eq!(other.cmd_str(&["PING"]), b"+PONG\r\n");
}

/// Everything the server sends within a short quiet period.
fn raw_exchange(s: &mut std::net::TcpStream, cmd: &[&[u8]]) -> Vec<u8> {
    use std::io::{Read, Write};
    s.write_all(&common::encode(cmd)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    s.set_read_timeout(Some(std::time::Duration::from_millis(150)))
        .unwrap();
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

#[test]
fn debug_protocol_replies_and_their_conversions_match_redis() {
    let args = ["--enable-debug-command", "yes"];
    let kv = start_kvstore(&args);
    let Some(redis) = common::start_redis(&args) else {
        return;
    };
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "nosuch",
    ];
    let mut seen = Vec::new();
    for port in [kv.port, redis.port] {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut out = Vec::new();
        out.push(raw_exchange(
            &mut s,
            &[b"DEBUG", b"SET-DISABLE-DENY-SCRIPTS", b"1"],
        ));
        for proto in [b"2", b"3"] {
            out.push(
                raw_exchange(&mut s, &[b"HELLO", proto])
                    .len()
                    .to_le_bytes()
                    .to_vec(),
            );
            for t in types {
                out.push(raw_exchange(&mut s, &[b"DEBUG", b"PROTOCOL", t.as_bytes()]));
                // A script's view of each, in both protocols.
                for script_resp in ["2", "3"] {
                    let script = format!(
                        "redis.setresp({script_resp}) return redis.call('debug', 'protocol', ARGV[1])"
                    );
                    out.push(raw_exchange(
                        &mut s,
                        &[b"EVAL", script.as_bytes(), b"0", t.as_bytes()],
                    ));
                }
            }
        }
        out.push(raw_exchange(
            &mut s,
            &[b"DEBUG", b"SET-DISABLE-DENY-SCRIPTS", b"0"],
        ));
        out.push(raw_exchange(
            &mut s,
            &[
                b"EVAL",
                b"return redis.call('debug', 'protocol', 'string')",
                b"0",
            ],
        ));
        seen.push(out);
    }
    for (i, (a, b)) in seen[0].iter().zip(&seen[1]).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "exchange {i}"
        );
    }
}

#[test]
fn ioredis_define_command_works_as_on_redis() {
    // ioredis comes from npm into tests/js/node_modules (.ci/run installs it).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    let has_ioredis = dir.join("node_modules/ioredis").is_dir()
        && std::process::Command::new("node")
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !has_ioredis {
        assert!(
            !common::in_ci(),
            "node and ioredis are required under CI (npm install --prefix tests/js ioredis@5)"
        );
        eprintln!(
            "SKIPPED: node or ioredis (tests/js/node_modules) missing; the check did not run"
        );
        return;
    }
    let run = |port: u16| {
        let out = common::output_within(
            std::process::Command::new("node")
                .arg(dir.join("define_command.js"))
                .arg(port.to_string()),
            std::time::Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "ioredis: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let kv = start_kvstore(&[]);
    let ours = run(kv.port);
    assert!(ours.starts_with("[1,2,3,3,"), "{ours}");
    let Some(redis) = common::start_redis(&[]) else {
        return;
    };
    assert_eq!(ours, run(redis.port));
}

#[test]
fn set_repl_sends_a_script_s_writes_where_it_says() {
    let master = start_kvstore(&["--appendonly", "yes"]);
    let port = master.port.to_string();
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &port]);
    let mut m = Conn::connect(master.port);
    let mut r = Conn::connect(replica.port);
    common::wait_for("the replica to sync", 20, || {
        r.info_field("replication", "master_link_status") == "up"
    });
    let script = "redis.set_repl(redis.REPL_AOF) redis.call('set', 'only-aof', '1') \
                  redis.set_repl(redis.REPL_REPLICA) redis.call('set', 'only-replica', '2') \
                  redis.set_repl(redis.REPL_NONE) redis.call('set', 'nowhere', '3') \
                  redis.set_repl(redis.REPL_ALL) redis.call('set', 'everywhere', '4')";
    assert_eq!(m.cmd_str(&["EVAL", script, "0"]), b"$-1\r\n");
    let offset = m.info_field("replication", "master_repl_offset");
    common::wait_for("the replica to catch up", 20, || {
        r.info_field("replication", "slave_repl_offset") == offset
    });
    for (key, there) in [
        ("only-aof", false),
        ("only-replica", true),
        ("nowhere", false),
        ("everywhere", true),
    ] {
        assert_eq!(
            r.cmd_str(&["EXISTS", key]),
            if there { b":1\r\n" } else { b":0\r\n" },
            "{key} on the replica"
        );
    }
    // The AOF's incremental file.
    let dir = master.dir.path().join("appendonlydir");
    let aof: Vec<u8> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|f| f.ok())
        .filter(|f| f.file_name().to_string_lossy().contains(".incr."))
        .flat_map(|f| std::fs::read(f.path()).unwrap())
        .collect();
    let aof = String::from_utf8_lossy(&aof);
    for (key, there) in [
        ("only-aof", true),
        ("only-replica", false),
        ("nowhere", false),
        ("everywhere", true),
    ] {
        assert_eq!(aof.contains(key), there, "{key} in the AOF: {aof}");
    }
}

/// The replies a transaction gets while a script is busy: MULTI is allowed,
/// a command refused with BUSY fails the transaction, and an EXEC refused
/// with BUSY aborts it (Redis's unit/multi "MULTI and script timeout" and
/// "EXEC and script timeout").
fn transaction_during_a_busy_script(port: u16) -> Vec<Vec<u8>> {
    let mut r = Conn::connect(port);
    let mut tx = Conn::connect(port);
    let mut runner = Conn::connect(port);
    r.cmd_str(&["CONFIG", "SET", "busy-reply-threshold", "10"]);
    r.cmd_str(&["SET", "xx", "1"]);
    let mut out = Vec::new();
    for exec_while_busy in [false, true] {
        runner.send(&[b"EVAL", b"while true do end", b"0"]);
        common::wait_for("the script to be busy", 10, || {
            r.cmd_str(&["PING"]).starts_with(b"-BUSY")
        });
        out.push(tx.cmd_str(&["MULTI"]));
        out.push(tx.cmd_str(&["INCR", "xx"]));
        if exec_while_busy {
            out.push(tx.cmd_str(&["EXEC"]));
        }
        out.push(r.cmd_str(&["SCRIPT", "KILL"]));
        runner.read_reply();
        if !exec_while_busy {
            out.push(tx.cmd_str(&["INCR", "xx"]));
            out.push(tx.cmd_str(&["EXEC"]));
        }
        out.push(r.cmd_str(&["GET", "xx"]));
        // No transaction is left open.
        out.push(tx.cmd_str(&["PING", "asdf"]));
    }
    out
}

#[test]
fn a_transaction_meeting_a_busy_script_fails_whole() {
    const BUSY: &str =
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    let kv = start_kvstore(&[]);
    let got = transaction_during_a_busy_script(kv.port);
    let expected: Vec<Vec<u8>> = [
        "+OK\r\n",
        BUSY,
        "+OK\r\n",
        "+QUEUED\r\n",
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
        "$1\r\n1\r\n",
        "$4\r\nasdf\r\n",
        "+OK\r\n",
        BUSY,
        &format!(
            "-EXECABORT Transaction discarded because of: {}",
            &BUSY[1..]
        ),
        "+OK\r\n",
        "$1\r\n1\r\n",
        "$4\r\nasdf\r\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let text = |v: &[Vec<u8>]| -> Vec<String> {
        v.iter()
            .map(|r| String::from_utf8_lossy(r).to_string())
            .collect()
    };
    assert_eq!(text(&got), text(&expected));
    if let Some(redis) = common::start_redis(&[]) {
        assert_eq!(
            text(&transaction_during_a_busy_script(redis.port)),
            text(&expected)
        );
    }
}

/// A Lua debugger session (SCRIPT DEBUG, as `redis-cli --ldb` drives it):
/// every reply of the session, byte for byte, and what it left in the
/// dataset and on the connection.
fn ldb_session(port: u16, mode: &str) -> (Vec<Vec<u8>>, Vec<u8>) {
    let script = "local a = 1\nredis.call('set', KEYS[1], a)\nlocal t = {1, 2, x = 'y'}\nredis.debug('a is', a, t)\nif redis.breakpoint() then a = 2 end\nreturn redis.call('get', KEYS[1])\n";
    let mut c = Conn::connect(port);
    c.cmd_str(&["DEL", "k1"]);
    let mut replies = vec![c.cmd_str(&["SCRIPT", "DEBUG", mode])];
    replies.push(c.cmd_str(&["EVALSHA", &"0".repeat(40), "0"]));
    replies.push(c.cmd_str(&["EVAL", script, "1", "k1"]));
    for cmd in [
        &["step"][..],
        &["print", "a"],
        &["s"],
        &["print"],
        &["eval", "1+2"],
        &["e", "bad syntax here"],
        &["redis", "get", "k1"],
        &["r", "incr", "nosuchcommand", "x"],
        &["r", "nosuch"],
        &["list"],
        &["l", "2", "1"],
        &["whole"],
        &["break", "6"],
        &["b"],
        &["b", "-6", "-6", "x", "99"],
        &["b", "6"],
        &["maxlen", "10"],
        &["eval", "string.rep('x', 100)"],
        &["m", "0"],
        &["trace"],
        &["print", "KEYS"],
        &["p", "nosuch"],
        &["foo"],
        &["redis"],
        &["help"],
        &["continue"],
        &["print", "a"],
    ] {
        replies.push(c.cmd_str(cmd));
    }
    // The last continue: to the end, then <endsession>, the script's
    // reply, and the connection closes.
    c.send(&[b"c"]);
    replies.push(c.read_reply());
    replies.push(c.read_reply());
    c.expect_closed();
    let mut other = Conn::connect(port);
    let value = other.cmd_str(&["GET", "k1"]);
    (replies, value)
}

#[test]
fn lua_debugger_sessions_run_as_on_redis() {
    let redis = common::start_redis(&[]);
    for engine in ["io_uring", "epoll"] {
        let kv = start_kvstore(&["--io-engine", engine]);
        for mode in ["sync", "yes"] {
            let (replies, value) = ldb_session(kv.port, mode);
            let text = |r: &[u8]| String::from_utf8_lossy(r).into_owned();
            assert_eq!(replies[0], b"+OK\r\n");
            assert_eq!(
                text(&replies[1]),
                "-ERR Please use EVAL instead of EVALSHA for debugging\r\n"
            );
            assert!(
                text(&replies[2]).starts_with(
                    "*2\r\n+* Stopped at 1, stop reason = step over\r\n+-> 1   local a = 1\r\n"
                ),
                "{}",
                text(&replies[2])
            );
            let all: String = replies.iter().map(|r| text(r)).collect();
            for expected in [
                "+<value> 1\r\n",
                "+<redis> set k1 1\r\n",
                "+<reply> \"+OK\"\r\n",
                "+<retval> 3\r\n",
                "+<debug> line 4: \"a is\", 1, {[1]=1; [2]=2; [\"x\"]=\"y\"}\r\n",
                "+* Stopped at 6, stop reason = redis.breakpoint() called\r\n",
                "+<value> 2\r\n",
                "+<endsession>\r\n",
                "$1\r\n1\r\n",
            ] {
                assert!(all.contains(expected), "{expected:?} not in {all}");
            }
            // SYNC keeps the script's writes; a forked session's are gone
            // with the child.
            let kept = if mode == "sync" {
                "$1\r\n1\r\n"
            } else {
                "$-1\r\n"
            };
            assert_eq!(text(&value), kept, "{engine} {mode}");
            if let Some(redis) = &redis {
                let (theirs, their_value) = ldb_session(redis.port, mode);
                assert_eq!(replies.len(), theirs.len());
                for (ours, theirs) in replies.iter().zip(&theirs) {
                    assert_eq!(text(ours), text(theirs), "{engine} {mode}");
                }
                assert_eq!(value, their_value);
            }
        }
        // A forked session leaves the server serving others meanwhile.
        let mut c = Conn::connect(kv.port);
        assert_eq!(c.cmd_str(&["SCRIPT", "DEBUG", "yes"]), b"+OK\r\n");
        let stopped = c.cmd_str(&["EVAL", "return 1", "0"]);
        assert!(stopped.starts_with(b"*2\r\n+* Stopped at 1"));
        let mut other = Conn::connect(kv.port);
        assert_eq!(other.cmd_str(&["PING"]), b"+PONG\r\n");
        // A debugger command that is not RESP stops the script.
        c.send_raw(b"step\r\n");
        let (rest, closed) = c.read_available(std::time::Duration::from_secs(2));
        assert!(closed);
        assert!(
            String::from_utf8_lossy(&rest).contains("protocol error"),
            "{}",
            String::from_utf8_lossy(&rest)
        );
        assert_eq!(
            other.cmd_str(&["SCRIPT", "DEBUG", "maybe"]),
            b"-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n"
        );
        assert_eq!(other.cmd_str(&["SCRIPT", "DEBUG", "no"]), b"+OK\r\n");
        assert_eq!(other.cmd_str(&["EVAL", "return 7", "0"]), b":7\r\n");
    }
}

/// A forked debugging session dies with its server: it would otherwise
/// keep the server's listening socket, and a server restarted at once
/// could not bind its port.
#[test]
fn a_forked_debugging_session_dies_with_its_server() {
    let mut kv = start_kvstore(&[]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["SCRIPT", "DEBUG", "yes"]), b"+OK\r\n");
    let stopped = c.cmd_str(&["EVAL", "return 1", "0"]);
    assert!(stopped.starts_with(b"*2\r\n+* Stopped at 1"));
    let server = kv.child.id();
    let children = std::fs::read_to_string(format!("/proc/{server}/task/{server}/children"))
        .unwrap_or_default();
    let session: i32 = children
        .split_whitespace()
        .next()
        .expect("the session's child")
        .parse()
        .unwrap();
    kv.child.kill().unwrap();
    kv.child.wait().unwrap();
    // Gone, or a zombie waiting for a reaper: either way it holds nothing.
    common::wait_for("the session to end", 10, || {
        std::fs::read_to_string(format!("/proc/{session}/stat")).map_or(true, |s| {
            s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z'))
        })
    });
    assert!(std::net::TcpListener::bind(("0.0.0.0", kv.port)).is_ok());
}

/// Lua's setfenv, getfenv and newproxy: withheld unless
/// `lua-enable-deprecated-api yes`, as Redis since CVE-2025-46818 (a
/// newproxy's `__gc` is code that would run later inside another user's
/// script). The option is fixed at startup and hidden from CONFIG GET *.
#[test]
fn deprecated_lua_builtins_are_withheld_unless_enabled() {
    let scripts: [&[u8]; 4] = [
        b"local f = function() return 1 end setfenv(f, {}) return 0",
        b"local f = function() return 1 end getfenv(f) return 0",
        b"getmetatable(newproxy(true)).__gc = function() return 1 end return 0",
        b"return {type(setfenv), type(getfenv), type(newproxy)}",
    ];
    let exchange = |port: u16| -> Vec<Vec<u8>> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut out: Vec<Vec<u8>> = scripts
            .iter()
            .map(|body| raw_exchange(&mut s, &[b"EVAL", body, b"0"]))
            .collect();
        // Functions run on an interpreter of their own, with the same rule.
        let lib = b"#!lua name=deprecated\nredis.register_function('probe', function() return type(newproxy) end)";
        out.push(raw_exchange(&mut s, &[b"FUNCTION", b"LOAD", lib]));
        out.push(raw_exchange(&mut s, &[b"FCALL", b"probe", b"0"]));
        out.push(raw_exchange(
            &mut s,
            &[b"CONFIG", b"GET", b"lua-enable-deprecated-api"],
        ));
        out.push(raw_exchange(
            &mut s,
            &[b"CONFIG", b"SET", b"lua-enable-deprecated-api", b"yes"],
        ));
        let all = raw_exchange(&mut s, &[b"CONFIG", b"GET", b"*"]);
        assert!(!String::from_utf8_lossy(&all).contains("deprecated-api"));
        out
    };
    let kv = start_kvstore(&[]);
    let withheld = exchange(kv.port);
    for (i, name) in ["setfenv", "getfenv", "newproxy"].iter().enumerate() {
        let reply = String::from_utf8_lossy(&withheld[i]);
        assert!(
            reply.starts_with(&format!(
                "-ERR user_script:1: Script attempted to access nonexistent global variable '{name}' script: "
            )),
            "{reply}"
        );
    }
    assert_eq!(withheld[5], b"-ERR user_function:2: Script attempted to access nonexistent global variable 'newproxy' script: probe, on @user_function:2.\r\n");
    assert_eq!(
        withheld[6],
        b"*2\r\n$25\r\nlua-enable-deprecated-api\r\n$2\r\nno\r\n"
    );
    assert!(withheld[7].starts_with(b"-ERR CONFIG SET failed (possibly related to argument 'lua-enable-deprecated-api') - can't set immutable config"));

    let kv = start_kvstore(&["--lua-enable-deprecated-api", "yes"]);
    let offered = exchange(kv.port);
    for reply in &offered[..3] {
        assert_eq!(reply, b":0\r\n");
    }
    assert_eq!(
        offered[3],
        b"*3\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n"
    );
    assert_eq!(offered[5], b"$8\r\nfunction\r\n");
    assert_eq!(
        offered[6],
        b"*2\r\n$25\r\nlua-enable-deprecated-api\r\n$3\r\nyes\r\n"
    );

    // The same replies as redis-server's, both ways.
    for (args, ours) in [
        (vec![], withheld),
        (vec!["--lua-enable-deprecated-api", "yes"], offered),
    ] {
        let Some(redis) = common::start_redis(&args) else {
            return;
        };
        let theirs = exchange(redis.port);
        assert_eq!(ours.len(), theirs.len());
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(String::from_utf8_lossy(a), String::from_utf8_lossy(b));
        }
    }
}

#[test]
fn function_stats_is_refused_while_an_eval_script_runs() {
    // Redis's functionStatsCommand: the busy error an EVAL gets, not the
    // stats (which would say no function runs).
    for server in [Some(start_kvstore(&[])), common::start_redis(&[])]
        .into_iter()
        .flatten()
    {
        let mut runner = Conn::connect(server.port);
        let mut other = Conn::connect(server.port);
        other.cmd_str(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
        runner.send(&[b"EVAL", b"while true do end", b"0"]);
        common::wait_for("the script to be busy", 10, || {
            other.cmd_str(&["PING"]).starts_with(b"-BUSY")
        });
        assert_eq!(
            String::from_utf8_lossy(&other.cmd_str(&["FUNCTION", "STATS"])),
            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
            "{}",
            server.name
        );
        assert_eq!(other.cmd_str(&["SCRIPT", "KILL"]), b"+OK\r\n");
        runner.read_reply();
    }
}

/// A FUNCTION DUMP-shaped payload: the records, RDB version 10, the CRC.
fn function_payload(records: &[u8]) -> Vec<u8> {
    let mut p = records.to_vec();
    p.extend_from_slice(&[10, 0]);
    let crc = kvstore::persistence::crc64::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// A string in RDB form (a length below 16 KiB).
fn rdb_str(s: &[u8]) -> Vec<u8> {
    let n = s.len();
    let mut v = if n < 64 {
        vec![n as u8]
    } else {
        vec![0x40 | (n >> 8) as u8, n as u8]
    };
    v.extend_from_slice(s);
    v
}

/// Functions where Redis reads them in its own way: only the array part
/// of a flags table, no debugger API, a library twice in one RESTORE
/// payload, a payload string running into the footer, a library in the
/// release candidates' record.
fn function_edges(port: u16) -> Vec<Vec<u8>> {
    let mut c = Conn::connect(port);
    let mut out = Vec::new();
    for code in [
        "#!lua name=f1\nredis.register_function{function_name='f1', callback=function() return 1 end, flags={no_writes=true}}",
        "#!lua name=f2\nredis.register_function{function_name='f2', callback=function() return 2 end, flags={'no-writes', foo='x'}}",
        "#!lua name=f3\nredis.register_function{function_name='f3', callback=function() return 3 end, flags={[2]='no-writes'}}",
        "#!lua name=f4\nredis.register_function{function_name='f4', callback=function() return 4 end, flags={'no-writes', 5}}",
        "#!lua name=dbg\nredis.register_function('bp', function() return redis.breakpoint() end)\nredis.register_function('dbgf', function() return redis.debug('x') end)",
    ] {
        out.push(c.cmd_str(&["FUNCTION", "LOAD", code]));
    }
    // f2 reads no-writes from index 1: a write is refused.
    out.push(c.cmd_str(&["FCALL", "f2", "0"]));
    for name in ["bp", "dbgf"] {
        let reply = c.cmd_str(&["FCALL", name, "0"]);
        // The error's line number is the function's place in the code.
        out.push(reply.split(|&b| b == b':').next().unwrap().to_vec());
    }
    let lib = b"#!lua name=v\nredis.register_function('vf', function() return 1 end)";
    let mut twice = vec![0xf5];
    twice.extend(rdb_str(lib));
    twice.push(0xf5);
    twice.extend(rdb_str(lib));
    out.push(c.cmd(&[b"FUNCTION", b"RESTORE", &function_payload(&twice)]));
    out.push(c.cmd(&[b"FUNCTION", b"RESTORE", &function_payload(&[0xf5])]));
    out.push(c.cmd(&[b"FUNCTION", b"RESTORE", &function_payload(b"\xf5\x05ab")]));
    let mut pre_ga = vec![0xf6];
    pre_ga.extend(rdb_str(b"old"));
    pre_ga.extend(rdb_str(b"LUA"));
    pre_ga.push(1);
    pre_ga.extend(rdb_str(b"a description"));
    pre_ga.extend(rdb_str(
        b"redis.register_function('oldf', function() return 'old' end)",
    ));
    out.push(c.cmd(&[b"FUNCTION", b"RESTORE", &function_payload(&pre_ga)]));
    out.push(c.cmd_str(&["FCALL", "oldf", "0"]));
    out.push(c.cmd(&[b"FUNCTION", b"RESTORE", &function_payload(b"\xf6\x01x")]));
    out
}

#[test]
fn functions_read_flags_payloads_and_old_records_as_redis() {
    let kv = start_kvstore(&[]);
    let ours = function_edges(kv.port);
    let show = |v: &[Vec<u8>]| {
        v.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    };
    let ours = show(&ours);
    assert_eq!(ours[0], "$2\r\nf1\r\n");
    assert_eq!(ours[1], "$2\r\nf2\r\n");
    assert_eq!(ours[6], "-ERR user_function");
    assert_eq!(ours[8], "-ERR Library 'v' already exists\r\n");
    assert_eq!(ours[12], "$3\r\nold\r\n");
    let Some(redis) = common::start_redis(&[]) else {
        return;
    };
    assert_eq!(ours, show(&function_edges(redis.port)));
}
