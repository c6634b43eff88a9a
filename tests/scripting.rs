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
    let has_redis_py = std::process::Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_redis_py {
        assert!(
            !common::in_ci(),
            "redis-py is required under CI (apt-get install python3-redis)"
        );
        eprintln!("SKIPPED: redis-py (python3-redis) is not installed; the Lock check did not run");
        return;
    }
    let kv = start_kvstore(&[]);
    let out = common::output_within(
        std::process::Command::new("python3").args(["-c", REDIS_PY_CHECK, &kv.port.to_string()]),
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
