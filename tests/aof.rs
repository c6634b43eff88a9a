//! The append-only file: restarts keep every acknowledged write, a killed
//! server loses none under `appendfsync always`, the directory moves both
//! ways between kvstore and redis-server 7.0 (and redis-check-aof accepts
//! ours), rewrites replace the files without losing writes made meanwhile,
//! and damaged files are repaired or refused as Redis does.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require_tool, start_kvstore_in, start_redis, Conn, ServerProcess};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// SHUTDOWN (which answers nothing when it succeeds) and wait for the
/// process to end.
fn shutdown(c: &mut Conn, kv: &mut ServerProcess, args: &[&str]) {
    let mut argv = vec!["SHUTDOWN"];
    argv.extend_from_slice(args);
    let v: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
    c.send(&v);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = kv.child.try_wait() {
            assert!(status.success(), "{} exited with {status}", kv.name);
            return;
        }
        assert!(Instant::now() < deadline, "{} did not shut down", kv.name);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start kvstore with the AOF on and extra flags (which name the data
/// directory with `--dir`).
fn start_on(_dir: &std::path::Path, extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--appendonly", "yes", "--save", ""];
    args.extend_from_slice(extra);
    start_kvstore_in(scratch_dir(), &args)
}

/// A directory for the process handle to hold: the tests pass their own
/// data directory with `--dir`, which overrides the helper's.
fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Copy a server's AOF directory into a fresh data directory.
fn copy_aof_dir(from: &std::path::Path, to: &std::path::Path) {
    let src = from.join("appendonlydir");
    let dst = to.join("appendonlydir");
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

/// Restart on `dir` with the AOF on: the keys `before`, `during` and
/// `after` written around a rewrite hold 1, 2 and 3.
fn assert_restart_has_before_during_after(dir: &std::path::Path) {
    let d = dir.to_str().unwrap();
    let kv = start_on(dir, &["--dir", d]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["MGET", "before", "during", "after"]),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
    );
}

/// A dataset of every type with TTLs, in two databases.
fn write_dataset(c: &mut Conn) {
    let cmds: &[&[&str]] = &[
        &["SET", "s", "hello"],
        &["SET", "n", "12345"],
        &["INCR", "n"],
        &["RPUSH", "l", "a", "b", "c"],
        &["SADD", "st", "1", "2", "3"],
        &["SADD", "sm", "x", "y"],
        &["ZADD", "z", "1.5", "a", "2", "b"],
        &["HSET", "h", "f", "v", "g", "w"],
        &["SET", "t", "x", "EX", "1000"],
        &["PEXPIRE", "h", "5000000"],
        &["MULTI"],
        &["SET", "tx1", "1"],
        &["SET", "tx2", "2"],
        &["EXEC"],
        &["SELECT", "3"],
        &["SET", "db3", "yes"],
        &["SELECT", "0"],
        &["DEL", "sm"],
    ];
    for cmd in cmds {
        c.cmd_str(cmd);
    }
}

fn check_dataset(c: &mut Conn) {
    assert_eq!(c.cmd_str(&["GET", "s"]), b"$5\r\nhello\r\n");
    assert_eq!(c.cmd_str(&["GET", "n"]), b"$5\r\n12346\r\n");
    assert_eq!(
        c.cmd_str(&["LRANGE", "l", "0", "-1"]),
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(c.cmd_str(&["SCARD", "st"]), b":3\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "sm"]), b":0\r\n");
    assert_eq!(c.cmd_str(&["ZSCORE", "z", "a"]), b"$3\r\n1.5\r\n");
    assert_eq!(c.cmd_str(&["HGET", "h", "g"]), b"$1\r\nw\r\n");
    let ttl: i64 = text(&c.cmd_str(&["TTL", "t"]))[1..].trim().parse().unwrap();
    assert!((900..=1000).contains(&ttl), "ttl {ttl}");
    let pttl: i64 = text(&c.cmd_str(&["PTTL", "h"]))[1..]
        .trim()
        .parse()
        .unwrap();
    assert!(pttl > 4_000_000, "pttl {pttl}");
    assert_eq!(
        c.cmd_str(&["MGET", "tx1", "tx2"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    c.cmd_str(&["SELECT", "3"]);
    assert_eq!(c.cmd_str(&["GET", "db3"]), b"$3\r\nyes\r\n");
    c.cmd_str(&["SELECT", "0"]);
}

#[test]
fn a_restart_keeps_every_write_and_ignores_the_dump() {
    for policy in ["always", "everysec", "no"] {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut kv = start_on(
                dir.path(),
                &[
                    "--appendfsync",
                    policy,
                    "--dir",
                    dir.path().to_str().unwrap(),
                ],
            );
            let mut c = Conn::connect(kv.port);
            write_dataset(&mut c);
            // A dump that disagrees: with the AOF on it must not be read.
            c.cmd_str(&["SET", "onlyindump", "1"]);
            c.cmd_str(&["SAVE"]);
            c.cmd_str(&["DEL", "onlyindump"]);
            assert_eq!(c.info_field("persistence", "aof_enabled"), "1");
            assert_eq!(c.info_field("persistence", "aof_last_write_status"), "ok");
            shutdown(&mut c, &mut kv, &["NOSAVE"]);
        }
        let kv = start_on(dir.path(), &["--dir", dir.path().to_str().unwrap()]);
        let mut c = Conn::connect(kv.port);
        check_dataset(&mut c);
        assert_eq!(
            c.cmd_str(&["EXISTS", "onlyindump"]),
            b":0\r\n",
            "policy {policy}"
        );
        let manifest =
            std::fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest"))
                .unwrap();
        assert_eq!(
            manifest,
            "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
        );
    }
}

#[test]
fn a_killed_server_loses_no_acknowledged_write_under_any_policy() {
    // Every reply is sent only after its write reached the kernel (and,
    // under `always`, the disk), so a killed process loses nothing it
    // acknowledged under any policy. Writers on four connections, each
    // writing its own counter, list and set; killed at a moment none chose
    // (the delay is printed, KILL_AFTER_MS replays one).
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    for (round, policy) in ["always", "everysec", "no"].into_iter().enumerate() {
        let delay = std::env::var("KILL_AFTER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(
                200 + (seed
                    .wrapping_mul(2654435761)
                    .wrapping_add(round as u64 * 977))
                    % 700,
            );
        println!("policy {policy}: killed after {delay} ms");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        let mut acked: Vec<(usize, u64)> = Vec::new();
        {
            let mut kv = start_on(dir.path(), &["--appendfsync", policy, "--dir", &d]);
            let port = kv.port;
            let writers: Vec<_> = (0..4)
                .map(|w| {
                    std::thread::spawn(move || {
                        let mut c = Conn::connect(port);
                        let mut last = 0;
                        for i in 1..u64::MAX {
                            let steps: [Vec<String>; 3] = [
                                vec!["SET".into(), format!("w{w}"), i.to_string()],
                                vec!["RPUSH".into(), format!("l{w}"), i.to_string()],
                                vec!["SADD".into(), format!("s{w}"), i.to_string()],
                            ];
                            let mut ok = true;
                            for st in &steps {
                                let args: Vec<&str> = st.iter().map(|a| a.as_str()).collect();
                                match c.try_cmd_str(&args) {
                                    Ok(r)
                                        if r.first() == Some(&b'+') || r.first() == Some(&b':') => {
                                    }
                                    _ => {
                                        ok = false;
                                        break;
                                    }
                                }
                            }
                            if !ok {
                                break;
                            }
                            last = i;
                        }
                        (w, last)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(delay));
            kv.child.kill().unwrap();
            kv.child.wait().unwrap();
            for w in writers {
                acked.push(w.join().unwrap());
            }
        }
        let kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        for (w, last) in acked {
            assert!(last > 0, "{policy}: writer {w} got no acknowledgement");
            let got: u64 = text(&c.cmd_str(&["GET", &format!("w{w}")]))
                .lines()
                .nth(1)
                .unwrap()
                .parse()
                .unwrap();
            // What was acknowledged is there; at most the step in flight more.
            assert!(
                got == last || got == last + 1,
                "{policy}: writer {w}: acked {last}, found {got}"
            );
            let llen: u64 = text(&c.cmd_str(&["LLEN", &format!("l{w}")]))[1..]
                .trim()
                .parse()
                .unwrap();
            let scard: u64 = text(&c.cmd_str(&["SCARD", &format!("s{w}")]))[1..]
                .trim()
                .parse()
                .unwrap();
            assert!(
                llen == last || llen == last + 1,
                "{policy}: writer {w}: acked {last}, list {llen}"
            );
            assert!(
                scard == last || scard == last + 1,
                "{policy}: writer {w}: acked {last}, set {scard}"
            );
            // The list holds exactly 1..=llen in order: no hole, no reordering.
            let tail = text(&c.cmd_str(&["LRANGE", &format!("l{w}"), "-1", "-1"]));
            assert!(
                tail.ends_with(&format!("\r\n{llen}\r\n")),
                "{policy}: {tail}"
            );
        }
    }
}

/// redis-check-aof (where installed) finds the AOF under `dir` valid.
fn assert_redis_check_aof_accepts(dir: &std::path::Path) {
    let Some(tool) = require_tool("redis-check-aof") else {
        return;
    };
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    let out = Command::new(tool).arg(&manifest).output().unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "redis-check-aof: {said}");
    assert!(
        said.contains("All AOF files and manifest are valid"),
        "{said}"
    );
}

#[test]
fn redis_and_kvstore_load_each_other_s_aof() {
    let Some(redis) = start_redis(&["--appendonly", "yes"]) else {
        return;
    };
    // Redis writes, rewrites (an RDB-preamble base) and writes more.
    let mut r = Conn::connect(redis.port);
    write_dataset(&mut r);
    r.cmd_str(&["BGREWRITEAOF"]);
    common::wait_for("redis's rewrite", 20, || {
        r.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && r.info_field("persistence", "aof_rewrites") == "1"
    });
    r.cmd_str(&["SET", "after", "rewrite"]);
    let mut redis = redis;
    shutdown(&mut r, &mut redis, &[]);
    let dir = tempfile::tempdir().unwrap();
    copy_aof_dir(redis.dir.path(), dir.path());
    drop(redis);
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        check_dataset(&mut c);
        assert_eq!(c.cmd_str(&["GET", "after"]), b"$7\r\nrewrite\r\n");
        // kvstore appends to Redis's incremental file, then rewrites.
        c.cmd_str(&["SET", "fromkv", "1"]);
        c.cmd_str(&["BGREWRITEAOF"]);
        common::wait_for("kvstore's rewrite", 20, || {
            c.info_field("persistence", "aof_rewrites") == "1"
                && c.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        c.cmd_str(&["SET", "fromkv2", "2"]);
        shutdown(&mut c, &mut kv, &[]);
    }
    assert_redis_check_aof_accepts(dir.path());
    // And redis-server 7.0 reads what kvstore left.
    let Some(redis2) = start_redis(&["--appendonly", "yes", "--dir", &d]) else {
        return;
    };
    let mut r2 = Conn::connect(redis2.port);
    check_dataset(&mut r2);
    assert_eq!(
        r2.cmd_str(&["MGET", "fromkv", "fromkv2"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
}

#[test]
fn appendonly_yes_at_run_time_makes_a_base_and_writes_during_a_rewrite_survive() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_kvstore_in(
            scratch_dir(),
            // 300 keys at 2 ms each: the base takes 0.6 s, so the checks
            // below run while it is written even on a busy machine.
            &["--save", "", "--dir", &d, "--rdb-key-save-delay", "2000"],
        );
        let mut c = Conn::connect(kv.port);
        for i in 0..300 {
            c.cmd_str(&["SET", &format!("k{i}"), &i.to_string()]);
        }
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
            b"+OK\r\n"
        );
        // The first base is being written (slowly): writes go on meanwhile.
        assert_eq!(c.info_field("persistence", "aof_rewrite_in_progress"), "1");
        for i in 0..50 {
            c.cmd_str(&["SET", &format!("during{i}"), "x"]);
        }
        assert_eq!(
            c.cmd_str(&["BGREWRITEAOF"]),
            b"-ERR Background append only file rewriting already in progress\r\n"
        );
        common::wait_for("the first base", 20, || {
            c.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        assert_eq!(
            c.info_field("persistence", "aof_last_bgrewrite_status"),
            "ok"
        );
        c.cmd_str(&["SET", "last", "1"]);
        shutdown(&mut c, &mut kv, &["NOSAVE"]);
    }
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":351\r\n");
    assert_eq!(c.cmd_str(&["GET", "k299"]), b"$3\r\n299\r\n");
    assert_eq!(c.cmd_str(&["GET", "during49"]), b"$1\r\nx\r\n");
    let names: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("temp-")), "{names:?}");
}

#[test]
fn writes_before_a_rewrite_forks_load_once_and_the_new_file_selects_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
        // One write: the INCR and the rewrite run in the same loop turn, so
        // the INCR is in the child's image and must not also go to the
        // incremental file opened for the writes after the fork.
        c.send_raw(b"INCR n\r\nBGREWRITEAOF\r\n");
        assert_eq!(c.read_reply(), b":1\r\n");
        assert_eq!(
            c.read_reply(),
            b"+Background append only file rewriting started\r\n"
        );
        common::wait_for("the rewrite", 20, || {
            c.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        // The first write to the new incremental file is still to database 3.
        assert_eq!(c.cmd_str(&["SET", "after", "1"]), b"+OK\r\n");
        shutdown(&mut c, &mut kv, &["NOSAVE"]);
    }
    let incr: String = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        incr.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"),
        "{incr:?}"
    );
    assert!(!incr.contains("INCR"), "{incr:?}");
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":0\r\n");
    assert_eq!(c.cmd_str(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "n"]), b"$1\r\n1\r\n");
    assert_eq!(c.cmd_str(&["GET", "after"]), b"$1\r\n1\r\n");
}

#[test]
fn a_rewrite_whose_manifest_cannot_be_written_leaves_the_writes_on_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let aof = dir.path().join("appendonlydir");
    let manifest = || std::fs::read_to_string(aof.join("appendonly.aof.manifest")).unwrap();
    {
        let mut kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        assert_eq!(c.cmd_str(&["SET", "before", "1"]), b"+OK\r\n");
        let before = manifest();
        // The manifest's temporary file cannot be created: a directory
        // stands in its place.
        let blocker = aof.join("temp-appendonly.aof.manifest");
        std::fs::create_dir(&blocker).unwrap();
        let reply = text(&c.cmd_str(&["BGREWRITEAOF"]));
        assert!(reply.starts_with("-ERR"), "{reply}");
        assert_eq!(c.info_field("persistence", "aof_rewrite_in_progress"), "0");
        assert_eq!(manifest(), before);
        // The writes go on, to the file the manifest names.
        assert_eq!(c.cmd_str(&["SET", "during", "2"]), b"+OK\r\n");
        let names: Vec<String> = std::fs::read_dir(&aof)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".incr.aof"))
            .collect();
        assert_eq!(
            names,
            vec!["appendonly.aof.1.incr.aof".to_string()],
            "{names:?}"
        );
        // Once it can be written, a rewrite goes through.
        std::fs::remove_dir(&blocker).unwrap();
        assert_eq!(
            c.cmd_str(&["BGREWRITEAOF"]),
            b"+Background append only file rewriting started\r\n"
        );
        common::wait_for("the rewrite", 20, || {
            c.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        assert_eq!(c.cmd_str(&["SET", "after", "3"]), b"+OK\r\n");
        shutdown(&mut c, &mut kv, &["NOSAVE"]);
    }
    assert_restart_has_before_during_after(dir.path());
}

#[test]
fn appendonly_yes_inside_a_transaction_with_a_replica_holds_no_reply() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_kvstore_in(scratch_dir(), &["--save", "", "--dir", &d]);
        // A replica that never reads: the feed has consumers before the AOF.
        let mut replica = Conn::connect(kv.port);
        replica.send_raw(b"SYNC\r\n");
        let mut c = Conn::connect(kv.port);
        common::wait_for("the replica", 10, || {
            c.info_field("replication", "connected_slaves") == "1"
        });
        // Redis schedules the first rewrite after the EXEC; the writes
        // before it forks are in its image, and nothing waits for them.
        c.send_raw(b"MULTI\r\nSET foo bar\r\nCONFIG SET appendonly yes\r\nEXEC\r\n");
        assert_eq!(c.read_reply(), b"+OK\r\n");
        assert_eq!(c.read_reply(), b"+QUEUED\r\n");
        assert_eq!(c.read_reply(), b"+QUEUED\r\n");
        assert_eq!(c.read_reply(), b"*2\r\n+OK\r\n+OK\r\n");
        let mut other = Conn::connect(kv.port);
        assert_eq!(other.cmd_str(&["PING"]), b"+PONG\r\n");
        common::wait_for("the first base", 20, || {
            c.info_field("persistence", "aof_rewrite_in_progress") == "0"
                && c.info_field("persistence", "aof_rewrite_scheduled") == "0"
        });
        assert_eq!(c.info_field("persistence", "aof_enabled"), "1");
        assert_eq!(c.cmd_str(&["GET", "foo"]), b"$3\r\nbar\r\n");
        shutdown(&mut c, &mut kv, &["NOSAVE"]);
        drop(replica);
    }
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["GET", "foo"]), b"$3\r\nbar\r\n");
}

/// Run kvstore on `dir` until it exits (it must fail to start) and return
/// its exit status and log.
fn failed_start(dir: &std::path::Path, extra: &[&str]) -> (std::process::ExitStatus, String) {
    let bin = env!("CARGO_BIN_EXE_kvstore");
    let port = common::free_port().to_string();
    let mut cmd = Command::new(bin);
    cmd.args([
        "--port",
        &port,
        "--appendonly",
        "yes",
        "--save",
        "",
        "--dir",
    ])
    .arg(dir)
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let out = common::output_within(&mut cmd, Duration::from_secs(10));
    (
        out.status,
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

#[test]
fn a_torn_last_command_is_cut_off_or_refused_and_broken_manifests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        c.cmd_str(&["SET", "a", "1"]);
        c.cmd_str(&["SET", "b", "2"]);
        shutdown(&mut c, &mut kv, &["NOSAVE"]);
    }
    let incr = dir.path().join("appendonlydir/appendonly.aof.1.incr.aof");
    let whole = std::fs::read(&incr).unwrap();
    // A crash in the middle of writing the last command.
    std::fs::write(&incr, [&whole[..], b"*3\r\n$3\r\nSET\r\n$1\r\nc"].concat()).unwrap();
    let (status, log) = failed_start(dir.path(), &["--aof-load-truncated", "no"]);
    assert!(!status.success());
    assert!(
        log.contains("Unexpected end of file reading the append only file"),
        "{log}"
    );
    {
        let mut kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        assert_eq!(
            c.cmd_str(&["MGET", "a", "b", "c"]),
            b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
        );
        shutdown(&mut c, &mut kv, &["NOSAVE"]);
    }
    assert_eq!(
        std::fs::read(&incr).unwrap(),
        whole,
        "the torn tail was cut off"
    );
    // Garbage in the middle is refused, not skipped.
    std::fs::write(
        &incr,
        [&b"*1\r\n$4\r\nPING\r\nGARBAGE\r\n"[..], &whole[..]].concat(),
    )
    .unwrap();
    let (status, log) = failed_start(dir.path(), &[]);
    assert!(!status.success());
    assert!(
        log.contains("Bad file format reading the append only file"),
        "{log}"
    );
    // A manifest that names a missing file, and one that is not a manifest.
    let manifest = dir.path().join("appendonlydir/appendonly.aof.manifest");
    std::fs::write(&incr, &whole).unwrap();
    std::fs::write(
        &manifest,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.7.incr.aof seq 7 type i\n",
    )
    .unwrap();
    let (status, log) = failed_start(dir.path(), &[]);
    assert!(!status.success());
    assert!(
        log.contains("appendonly.aof.7.incr.aof") && log.contains("No such file or directory"),
        "{log}"
    );
    std::fs::write(&manifest, "this is not a manifest\n").unwrap();
    let (status, log) = failed_start(dir.path(), &[]);
    assert!(!status.success());
    assert!(log.contains("Invalid AOF manifest file format"), "{log}");
}

#[test]
fn a_long_pipeline_killed_midway_has_every_acknowledged_write_under_always() {
    // 60,000 pipelined SETs, the server killed after a third of the
    // replies: every reply received must have its write in the AOF.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let n = 60_000;
    let mut acked = 0;
    {
        let mut kv = start_on(dir.path(), &["--appendfsync", "always", "--dir", &d]);
        let mut c = Conn::connect(kv.port);
        let mut pipeline = Vec::new();
        for i in 0..n {
            pipeline.extend_from_slice(&common::encode(&[
                b"SET",
                format!("key:{i:06}").as_bytes(),
                b"0123456789abcdef0123456789abcdef",
            ]));
        }
        let writer = {
            let mut w = c.writer.try_clone().unwrap();
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = w.write_all(&pipeline);
            })
        };
        // Read some replies, then kill the server mid-stream.
        while acked < n / 3 {
            assert_eq!(c.read_reply(), b"+OK\r\n");
            acked += 1;
        }
        kv.child.kill().unwrap();
        kv.child.wait().unwrap();
        while let Some(r) = c.try_read_reply() {
            if r != b"+OK\r\n" {
                break;
            }
            acked += 1;
        }
        let _ = writer.join();
    }
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    let last = format!("key:{:06}", acked - 1);
    assert_eq!(
        c.cmd_str(&["EXISTS", &last]),
        b":1\r\n",
        "{acked} replies were received but {last} is not in the AOF"
    );
    let dbsize: usize = text(&c.cmd_str(&["DBSIZE"]))[1..].trim().parse().unwrap();
    assert!(dbsize >= acked, "dbsize {dbsize} < acked {acked}");
}

#[test]
fn a_background_fsync_releases_held_replies_only_once_on_disk() {
    use kvstore::config::Config;
    use kvstore::state::{ClientState, Server};
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        dir: dir.path().to_path_buf(),
        appendonly: true,
        appendfsync: kvstore::config::FsyncPolicy::Always,
        appendfilename: "appendonly.aof".into(),
        appenddirname: "appendonlydir".into(),
        aof_use_rdb_preamble: true,
        ..Config::default()
    };
    let mut srv = Server::new(config);
    kvstore::state::aof::open_after_load(&mut srv).unwrap();
    let mut client = ClientState::new(1, -1, "t:1".into(), "t:0".into(), false, true, true);
    let out = kvstore::commands::execute_detached(&mut srv, &mut client, &[b"SET", b"k", b"v"]);
    assert_eq!(out, b"+OK\r\n");
    // The loop is busy: the fsync goes to the ring (or the fsync thread
    // where io_uring is not available) and the loop does not wait.
    srv.aof.inline_fsync = false;
    srv.flush_feed();
    let appended = srv.aof.appended;
    assert!(appended > 0);
    client.reply.ok();
    client.hold_until(appended, srv.aof_durable());
    let uring = srv.aof.uring.as_ref().map(|u| u.eventfd());
    let fd = uring
        .or(srv.aof.completion_fd())
        .expect("a completion eventfd");
    // The engine reports through its eventfd; then the reply is released.
    while srv.aof.synced() < appended {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polling one valid descriptor.
        let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
        assert_eq!(ready, 1, "the AOF engine did not report");
        if uring.is_some() {
            srv.aof_uring_done();
        } else {
            srv.aof_fsync_done();
        }
    }
    assert_eq!(client.write_limit(srv.aof_durable()), client.reply.len());
    let incr = std::fs::read(dir.path().join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    assert!(incr.ends_with(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"));
}

#[test]
fn a_disk_that_fills_up_refuses_writes_and_keeps_answering_until_the_aof_is_reopened() {
    // Files may not grow past 64 KB: the incremental file fills up after
    // three 20 KB values.
    let mut kv = common::start_kvstore_file_limit(
        tempfile::tempdir().unwrap(),
        &["--appendonly", "yes", "--appendfsync", "everysec"],
        64 * 1024,
    );
    let mut c = Conn::connect(kv.port);
    let value = "v".repeat(20 * 1024);
    let mut refused = None;
    for i in 0..10 {
        let reply = text(&c.cmd_str(&["SET", &format!("k{i}"), &value]));
        if reply != "+OK\r\n" {
            refused = Some((i, reply));
            break;
        }
    }
    let (i, reply) = refused.expect("no write refused past the file size limit");
    assert!(i >= 3, "refused too early: {i}");
    assert_eq!(
        reply,
        "-MISCONF Errors writing to the AOF file: File too large\r\n"
    );
    // Everything else is answered (a write error once held every reply).
    assert_eq!(
        text(&c.cmd_str(&["GET", "k0"])),
        format!("${}\r\n{value}\r\n", value.len())
    );
    assert_eq!(c.info_field("persistence", "aof_last_write_status"), "err");
    assert_eq!(
        c.cmd_str(&["BGREWRITEAOF"]),
        b"-ERR Can't execute an AOF background rewriting. Please check the server logs for more information.\r\n"
    );
    assert_eq!(c.info_field("persistence", "aof_rewrite_in_progress"), "0");
    // Off, the writes go on; after making room and turning it on again (a
    // new base from the dataset), the old error is forgotten and replies
    // wait for nothing the old file could not take.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendonly", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SET", "small", "1"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
        b"+OK\r\n"
    );
    common::wait_for("the first base", 20, || {
        c.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && c.info_field("persistence", "aof_enabled") == "1"
    });
    assert_eq!(c.info_field("persistence", "aof_last_write_status"), "ok");
    assert_eq!(c.cmd_str(&["SET", "after", "2"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "after"]), b"$1\r\n2\r\n");
    shutdown(&mut c, &mut kv, &["NOSAVE"]);
    let dir = kv.dir.path().to_path_buf();
    let mut kv = common::start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &["--appendonly", "yes", "--dir", dir.to_str().unwrap()],
    );
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":2\r\n");
    assert_eq!(c.cmd_str(&["GET", "after"]), b"$1\r\n2\r\n");
    shutdown(&mut c, &mut kv, &["NOSAVE"]);
}

#[test]
fn always_replies_wait_for_nothing_that_no_fsync_will_cover() {
    let dir = tempfile::tempdir().unwrap();
    let mut kv = start_kvstore_in(dir, &["--appendonly", "yes", "--appendfsync", "no"]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["SET", "k", "1"]), b"+OK\r\n");
    // Nothing was ever synced under `no`: the switch's own reply and the
    // next read are answered (an fsync of what is behind starts at once).
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendfsync", "always"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$1\r\n1\r\n");
    // With no-appendfsync-on-rewrite, a write while a child runs is
    // answered while it runs (Redis skips those fsyncs).
    for (k, v) in [
        ("no-appendfsync-on-rewrite", "yes"),
        ("rdb-key-save-delay", "1000000"),
    ] {
        assert_eq!(c.cmd_str(&["CONFIG", "SET", k, v]), b"+OK\r\n");
    }
    for i in 0..5 {
        c.cmd_str(&["SET", &format!("slow{i}"), "x"]);
    }
    assert_eq!(c.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    assert_eq!(c.cmd_str(&["SET", "during", "2"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "during"]), b"$1\r\n2\r\n");
    assert_eq!(c.info_field("persistence", "rdb_bgsave_in_progress"), "1");
    // Once the child is gone, what it skipped is synced without a new
    // write, and replies flow.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        b"+OK\r\n"
    );
    let child = background_child(kv.child.id());
    unsafe { libc::kill(child, libc::SIGKILL) };
    common::wait_for("the child's end", 10, || {
        c.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(c.cmd_str(&["GET", "during"]), b"$1\r\n2\r\n");
    shutdown(&mut c, &mut kv, &["NOSAVE"]);
}

#[test]
fn holds_release_replies_in_order() {
    use kvstore::state::ClientState;
    let mut c = ClientState::new(1, -1, "t:1".into(), "t:0".into(), false, true, true);
    c.reply.ok();
    c.hold_until(10, 5); // +OK waits for offset 10
    c.reply.ok();
    c.hold_until(20, 5); // the second +OK waits for 20
    assert_eq!(c.write_limit(5), 0);
    assert_eq!(c.write_limit(10), 5);
    assert_eq!(c.write_limit(19), 5);
    assert_eq!(c.write_limit(20), 10);
    // Nothing pending and nothing held: a new reply is free at once.
    c.reply.clear();
    c.reply.ok();
    c.hold_until(20, 20);
    assert_eq!(c.write_limit(20), 5);
}

#[test]
fn a_plain_base_is_written_as_commands_and_redis_loads_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_on(dir.path(), &["--aof-use-rdb-preamble", "no", "--dir", &d]);
        let mut c = Conn::connect(kv.port);
        write_dataset(&mut c);
        // A collection longer than one command's batch of 64.
        let mut big = vec!["RPUSH", "biglist"];
        let items: Vec<String> = (0..150).map(|i| i.to_string()).collect();
        big.extend(items.iter().map(|s| s.as_str()));
        c.cmd_str(&big);
        c.cmd_str(&["BGREWRITEAOF"]);
        common::wait_for("the rewrite", 20, || {
            c.info_field("persistence", "aof_rewrites") == "1"
                && c.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        shutdown(&mut c, &mut kv, &[]);
    }
    let base = dir.path().join("appendonlydir/appendonly.aof.2.base.aof");
    let bytes = std::fs::read(&base).expect("a .base.aof file");
    assert!(
        bytes.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"),
        "{}",
        text(&bytes[..40.min(bytes.len())])
    );
    assert_redis_check_aof_accepts(dir.path());
    {
        let kv = start_on(dir.path(), &["--dir", &d]);
        let mut c = Conn::connect(kv.port);
        check_dataset(&mut c);
        assert_eq!(c.cmd_str(&["LLEN", "biglist"]), b":150\r\n");
    }
    let Some(redis) = start_redis(&["--appendonly", "yes", "--dir", &d]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    check_dataset(&mut r);
    assert_eq!(r.cmd_str(&["LINDEX", "biglist", "149"]), b"$3\r\n149\r\n");
}

#[test]
fn debug_loadaof_reloads_the_dataset_from_the_aof() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let kv = start_on(dir.path(), &["--dir", &d, "--enable-debug-command", "yes"]);
    let mut c = Conn::connect(kv.port);
    write_dataset(&mut c);
    c.cmd_str(&["SET", "gone", "x"]);
    c.cmd_str(&["EXPIRE", "gone", "1"]);
    let size_before = c.info_field("persistence", "aof_current_size");
    assert_eq!(c.cmd_str(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    check_dataset(&mut c);
    // The TTL came back as the absolute time it was written as.
    let ttl = c.cmd_str(&["TTL", "gone"]);
    assert!(ttl == b":1\r\n" || ttl == b":0\r\n", "{}", text(&ttl));
    // Replaying did not append the AOF to itself.
    assert_eq!(c.info_field("persistence", "aof_current_size"), size_before);
    // The loaded data is written on as before.
    c.cmd_str(&["SET", "after", "1"]);
    assert_eq!(c.cmd_str(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "after"]), b"$1\r\n1\r\n");
    check_dataset(&mut c);
}

#[test]
fn debug_loadaof_replaces_the_function_libraries_with_the_files() {
    // Redis's emptyData clears the libraries before the replay: replaying
    // FUNCTION LOAD onto the library already loaded would fail, and with
    // propagation-error-behavior panic stop the server.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let kv = start_on(
        dir.path(),
        &[
            "--dir",
            &d,
            "--enable-debug-command",
            "yes",
            "--propagation-error-behavior",
            "panic",
        ],
    );
    let mut c = Conn::connect(kv.port);
    let code = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)";
    assert_eq!(c.cmd_str(&["FUNCTION", "LOAD", code]), b"$4\r\ntest\r\n");
    assert_eq!(c.cmd_str(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["FCALL", "test", "0"]), b"$5\r\nhello\r\n");
    assert_eq!(c.cmd_str(&["FUNCTION", "DELETE", "test"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["FUNCTION", "LOAD", code]), b"$4\r\ntest\r\n");
    assert_eq!(c.cmd_str(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["FUNCTION", "LIST"]), b"*0\r\n");
}

#[test]
fn timestamp_annotations_are_written_and_skipped_on_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    {
        let mut kv = start_on(dir.path(), &["--dir", &d, "--aof-timestamp-enabled", "yes"]);
        let mut c = Conn::connect(kv.port);
        c.cmd_str(&["SET", "a", "1"]);
        std::thread::sleep(Duration::from_millis(1100));
        c.cmd_str(&["SET", "b", "2"]);
        shutdown(&mut c, &mut kv, &[]);
    }
    let incr = std::fs::read(dir.path().join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    let stamps = text(&incr)
        .lines()
        .filter(|l| l.starts_with("#TS:"))
        .count();
    assert_eq!(stamps, 2, "{}", text(&incr));
    assert_redis_check_aof_accepts(dir.path());
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["MGET", "a", "b"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    // A plain (command) base starts with when it was made.
    let mut kv = kv;
    let plain = [
        "--dir",
        &d,
        "--aof-timestamp-enabled",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
    ];
    shutdown(&mut c, &mut kv, &[]);
    let kv = start_on(dir.path(), &plain);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    common::wait_for("the rewrite", 20, || {
        c.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && c.info_field("persistence", "aof_rewrites") == "1"
    });
    let base = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".base.aof"))
        .expect("a plain base");
    let bytes = std::fs::read(base.path()).unwrap();
    assert!(
        bytes.starts_with(b"#TS:"),
        "{}",
        text(&bytes[..bytes.len().min(40)])
    );
    assert_redis_check_aof_accepts(dir.path());
}

#[test]
fn a_blocking_command_in_an_aof_does_not_block_the_load() {
    // Redis never writes one, but a hand-made AOF may hold one: as in
    // Redis, the AOF client cannot block, and loading goes on.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let aofdir = dir.path().join("appendonlydir");
    std::fs::create_dir(&aofdir).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let mut log = Vec::new();
    for cmd in [
        "BLPOP nolist 0",
        "MULTI",
        "SET a 1",
        "EXEC",
        "BRPOP nolist 0",
        "SET b 2",
    ] {
        let argv: Vec<&[u8]> = cmd.split(' ').map(|w| w.as_bytes()).collect();
        log.extend_from_slice(&common::encode(&argv));
    }
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), log).unwrap();
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["MGET", "a", "b"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    let clients = text(&c.cmd_str(&["INFO", "clients"]));
    assert!(clients.contains("blocked_clients:0\r\n"), "{clients}");
}

/// A hand-made AOF directory holding one incremental file with `log`.
fn aof_dir_with(dir: &std::path::Path, log: &[u8]) {
    let aofdir = dir.join("appendonlydir");
    std::fs::create_dir(&aofdir).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), log).unwrap();
}

fn commands(lines: &[&str]) -> Vec<u8> {
    let mut log = Vec::new();
    for cmd in lines {
        let argv: Vec<&[u8]> = cmd.split(' ').map(|w| w.as_bytes()).collect();
        log.extend_from_slice(&common::encode(&argv));
    }
    log
}

#[test]
fn nothing_expires_while_the_aof_is_replayed() {
    // Redis's integration/aof "AOF+EXPIRE": a PEXPIREAT in the past sets
    // the TTL while loading (the key is not deleted there, so the RPUSH
    // after it adds to the same list), and the list is gone once loaded.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    aof_dir_with(
        dir.path(),
        &commands(&[
            "RPUSH list foo",
            "PEXPIREAT list 1000",
            "RPUSH list bar",
            "SET s 1",
            "EXPIREAT s 1",
            "INCR s",
            "SET kept v",
        ]),
    );
    let kv = start_on(dir.path(), &["--dir", &d, "--aof-load-truncated", "no"]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(c.cmd_str(&["LLEN", "list"]), b":0\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "list", "s"]), b":0\r\n");
    assert_eq!(c.cmd_str(&["GET", "kept"]), b"$1\r\nv\r\n");
    // Out of the load, a deadline in the past deletes at once, as before.
    c.cmd_str(&["SET", "now", "1"]);
    assert_eq!(c.cmd_str(&["PEXPIREAT", "now", "1000"]), b":1\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "now"]), b":0\r\n");
}

#[test]
fn annotations_after_the_last_command_end_the_load() {
    // Redis's integration/aof writes `#TS:` lines last: the load used to
    // stop before them and never finish (-LOADING for ever).
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let mut log = b"#TS:1628217470\r\n".to_vec();
    log.extend_from_slice(&commands(&["SET foo1 bar1"]));
    log.extend_from_slice(b"#TS:1628217472\r\n#TS:1628217473\r\n");
    log.extend_from_slice(&commands(&["SET foo2 bar2"]));
    log.extend_from_slice(b"#TS:1628217474\r\n");
    aof_dir_with(dir.path(), &log);
    let kv = start_on(dir.path(), &["--dir", &d]);
    let mut c = Conn::connect(kv.port);
    common::wait_for("the load", 10, || {
        c.try_cmd_str(&["PING"]).is_ok_and(|r| r == b"+PONG\r\n")
    });
    assert_eq!(
        c.cmd_str(&["MGET", "foo1", "foo2"]),
        b"*2\r\n$4\r\nbar1\r\n$4\r\nbar2\r\n"
    );
}

#[test]
fn clients_hear_loading_while_a_slow_script_from_the_aof_runs() {
    // Redis's integration/aof "EVAL timeout with slow verbatim Lua script
    // from AOF": a script replayed past busy-reply-threshold lets the loop
    // serve others, who are told the dataset is loading (not BUSY), and the
    // script runs to its end.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let mut kv = start_on(
        dir.path(),
        &[
            "--dir",
            &d,
            "--aof-use-rdb-preamble",
            "no",
            "--lua-time-limit",
            "1",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut c = Conn::connect(kv.port);
    let incr = dir.path().join("appendonlydir/appendonly.aof.1.incr.aof");
    let script =
        "redis.call('set',KEYS[1],'y'); for i=1,3000000 do redis.call('ping') end return 'ok'";
    let mut log = commands(&["SELECT 9"]);
    log.extend_from_slice(&common::encode(&[b"EVAL", script.as_bytes(), b"1", b"x"]));
    std::fs::write(&incr, log).unwrap();
    let mut loader = Conn::connect(kv.port);
    loader.send(&[b"DEBUG", b"LOADAOF"]);
    let mut seen = Vec::new();
    common::wait_for("a reply while the script runs", 20, || {
        let r = c.cmd_str(&["PING"]);
        let busy = r != b"+PONG\r\n";
        if busy {
            seen = r;
        }
        busy
    });
    assert!(seen.starts_with(b"-LOADING"), "{}", text(&seen));
    assert_eq!(loader.read_reply(), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["SELECT", "9"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["GET", "x"]), b"$1\r\ny\r\n");
    shutdown(&mut c, &mut kv, &["NOSAVE"]);
}

#[test]
fn appendonly_yes_keeps_its_writes_in_a_temporary_file_until_the_first_base() {
    // Redis's integration/aof-multi-part "AOF will open a temporary INCR
    // AOF…": while the first rewrite runs, writes go to
    // temp-appendonly.aof.incr, outside the manifest; a failed rewrite
    // removes it and schedules another; the successful one renames it into
    // the first incremental file.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let mut kv = start_kvstore_in(
        scratch_dir(),
        &["--dir", &d, "--save", "", "--rdb-key-save-delay", "100000"],
    );
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "before", "1"]);
    // A rewrite takes 3 s: 0.1 s a key.
    for i in 0..30 {
        c.cmd_str(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
        b"+OK\r\n"
    );
    assert_eq!(c.info_field("persistence", "aof_rewrite_in_progress"), "1");
    c.cmd_str(&["SET", "during", "2"]);
    let aofdir = dir.path().join("appendonlydir");
    let temp = aofdir.join("temp-appendonly.aof.incr");
    assert!(temp.exists(), "no temporary incremental file");
    assert!(!aofdir.join("appendonly.aof.manifest").exists());
    // Kill the rewrite's child: it counts as failed, and another rewrite
    // starts from the cron (with a new temporary file).
    let first = background_child(kv.child.id());
    unsafe { libc::kill(first, libc::SIGKILL) };
    common::wait_for("the next rewrite", 10, || {
        c.info_field("persistence", "aof_rewrites_consecutive_failures") == "1"
            && c.info_field("persistence", "aof_rewrite_in_progress") == "1"
    });
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        b"+OK\r\n"
    );
    let child = background_child(kv.child.id());
    unsafe { libc::kill(child, libc::SIGKILL) };
    common::wait_for("a successful rewrite", 20, || {
        c.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && c.info_field("persistence", "aof_rewrites_consecutive_failures") == "0"
    });
    // Every attempt counts, as Redis's (counted when it forks).
    assert_eq!(c.info_field("persistence", "aof_rewrites"), "3");
    c.cmd_str(&["SET", "after", "3"]);
    let manifest = std::fs::read_to_string(aofdir.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    assert!(!temp.exists());
    assert_eq!(
        c.info_field("persistence", "aof_rewrites_consecutive_failures"),
        "0"
    );
    // The killed children's files are gone too.
    let mut names: Vec<String> = std::fs::read_dir(&aofdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "appendonly.aof.1.base.rdb",
            "appendonly.aof.1.incr.aof",
            "appendonly.aof.manifest"
        ]
    );
    shutdown(&mut c, &mut kv, &["NOSAVE"]);
    assert_restart_has_before_during_after(dir.path());
}

/// The pid of the server's forked child (a rewrite or a save).
fn background_child(server: u32) -> libc::pid_t {
    let mut found = None;
    common::wait_for("a background child", 10, || {
        let path = format!("/proc/{server}/task/{server}/children");
        found = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()));
        found.is_some()
    });
    found.unwrap()
}

#[test]
fn shutdown_refuses_while_the_first_base_is_written_unless_forced() {
    // Redis's finishShutdown: with the AOF turned on and its first rewrite
    // still running, the AOF does not hold the dataset: exiting would lose
    // it. SHUTDOWN fails (Redis's error), SHUTDOWN FORCE exits.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let mut kv = start_kvstore_in(
        scratch_dir(),
        &["--dir", &d, "--save", "", "--rdb-key-save-delay", "1000000"],
    );
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "k", "v"]);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SHUTDOWN"]),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(c.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(c.info_field("persistence", "aof_rewrite_in_progress"), "1");
    shutdown(&mut c, &mut kv, &["NOSAVE", "FORCE"]);
}

/// Under `everysec` a slow fsync (a busy disk: the fsync thread sleeps 3 s
/// before each one) holds no reply: each write reaches the file before its
/// reply and the replies keep coming while the fsync runs, and one running
/// past 2 s counts in `aof_delayed_fsync`, as Redis's.
#[test]
fn everysec_writes_and_replies_go_on_while_a_slow_fsync_runs() {
    let dir = tempfile::tempdir().unwrap();
    let kv = start_on(
        dir.path(),
        &[
            "--appendfsync",
            "everysec",
            "--enable-debug-command",
            "yes",
            "--dir",
            dir.path().to_str().unwrap(),
        ],
    );
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["DEBUG", "aof-fsync-sleep", "3000000"]),
        b"+OK\r\n"
    );
    let incr = dir.path().join("appendonlydir/appendonly.aof.1.incr.aof");
    // Writes until the once-a-second fsync has started (and sleeps).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    while c.info_field("persistence", "aof_pending_bio_fsync") != "1" {
        assert!(Instant::now() < deadline, "no background fsync started");
        c.cmd_str(&["SET", &format!("before{n}"), "v"]);
        n += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let fsync_started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut i = 0;
    let mut beside_the_fsync = 0;
    while c.info_field("persistence", "aof_delayed_fsync") != "1" {
        assert!(
            fsync_started.elapsed() < Duration::from_secs(10),
            "an fsync running past 2 s was not counted"
        );
        if c.info_field("persistence", "aof_pending_bio_fsync") == "1" {
            beside_the_fsync += 1;
        }
        let key = format!("during{i}");
        let t = Instant::now();
        assert_eq!(c.cmd_str(&["SET", &key, "v"]), b"+OK\r\n");
        slowest = slowest.max(t.elapsed());
        let file = std::fs::read(&incr).unwrap();
        let needle = format!("${}\r\n{key}\r\n", key.len());
        assert!(
            file.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "SET {key} was answered before it was written"
        );
        i += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        beside_the_fsync >= 10,
        "only {beside_the_fsync} writes while the fsync ran"
    );
    // Held behind the fsync, a reply would wait 2 s or more.
    assert!(
        slowest < Duration::from_secs(1),
        "a reply waited {slowest:?} for the fsync"
    );
}

/// Loading an AOF counts in INFO as Redis counts it: not the commands it
/// replays (Redis runs them without call()), but those an EXEC in it runs.
#[test]
fn loading_an_aof_counts_only_what_its_exec_runs() {
    let args = ["--appendonly", "yes", "--enable-debug-command", "yes"];
    let Some(redis) = start_redis(&args) else {
        return;
    };
    let kv = common::start_kvstore(&args);
    let counts = |port: u16| -> Vec<String> {
        let mut c = Conn::connect(port);
        for cmd in [
            &["SET", "a", "1"][..],
            &["MULTI"],
            &["SET", "b", "2"],
            &["INCR", "c"],
            &["EXEC"],
        ] {
            c.cmd_str(cmd);
        }
        let fields = |c: &mut Conn| -> Vec<String> {
            let stats = String::from_utf8_lossy(&c.cmd_str(&["INFO", "stats"])).to_string();
            let cmds = String::from_utf8_lossy(&c.cmd_str(&["INFO", "commandstats"])).to_string();
            let mut out: Vec<String> = stats
                .lines()
                .filter(|l| l.starts_with("total_commands_processed:"))
                .map(str::to_string)
                .collect();
            // calls= of each command, without the timings.
            out.extend(
                cmds.lines()
                    .filter(|l| l.starts_with("cmdstat_"))
                    .map(|l| l.split(",usec=").next().unwrap().to_string()),
            );
            out.sort();
            out
        };
        let before = fields(&mut c);
        assert_eq!(c.cmd_str(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
        assert_eq!(
            c.cmd_str(&["MGET", "a", "b", "c"]),
            b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n"
        );
        let mut all = before;
        all.push("--- after DEBUG LOADAOF".into());
        all.extend(fields(&mut c));
        all
    };
    assert_eq!(counts(kv.port), counts(redis.port), "kvstore, then redis");
}

/// A write the disk cuts short leaves no half command at the end of the
/// incremental file: it is cut off (Redis's ftruncate after a short
/// write), so a server killed then starts again from the file even with
/// `aof-load-truncated no`, with every write before the failed one.
#[test]
fn a_short_write_is_cut_off_the_end_of_the_aof() {
    let mut kv = common::start_kvstore_file_limit(
        tempfile::tempdir().unwrap(),
        &["--appendonly", "yes", "--appendfsync", "everysec"],
        64 * 1024,
    );
    let mut c = Conn::connect(kv.port);
    let value = "v".repeat(15 * 1000);
    let refused = (0..20)
        .find(|i| c.cmd_str(&["SET", &format!("k{i}"), &value]) != b"+OK\r\n")
        .expect("no write refused past the file size limit");
    // Tried again (the cron) with the limit still there: cut each time.
    std::thread::sleep(Duration::from_millis(300));
    let incr = std::fs::read_dir(kv.dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental file");
    let bytes = std::fs::read(&incr).unwrap();
    assert!(bytes.len() < 64 * 1024, "{} bytes", bytes.len());
    assert!(bytes.ends_with(b"\r\n"), "the file ends inside a command");
    if let Some(check) = require_tool("redis-check-aof") {
        let out = Command::new(check).arg(&incr).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("is valid"), "{said}");
    }
    let dir = std::mem::replace(&mut kv.dir, tempfile::tempdir().unwrap());
    drop(kv);
    let kv = start_kvstore_in(dir, &["--appendonly", "yes", "--aof-load-truncated", "no"]);
    let mut c = Conn::connect(kv.port);
    // The write whose AOF record failed was answered before the failure
    // was known (as in Redis): it is the one missing.
    assert_eq!(
        c.cmd_str(&["DBSIZE"]),
        format!(":{}\r\n", refused - 1).as_bytes()
    );
}

/// A first AOF made at start counts for nothing in INFO until a rewrite
/// or a restart, as Redis counts only what it loaded: sizes 0, then the
/// writes alone.
fn fresh_aof_sizes(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port);
    let sizes = |c: &mut Conn| {
        format!(
            "{}/{}",
            c.info_field("persistence", "aof_current_size"),
            c.info_field("persistence", "aof_base_size")
        )
    };
    let mut out = vec![sizes(&mut c)];
    c.cmd_str(&["SET", "x", "y"]);
    out.push(sizes(&mut c));
    out
}

#[test]
fn a_first_aof_made_at_start_counts_from_zero() {
    let kv = start_kvstore_in(tempfile::tempdir().unwrap(), &["--appendonly", "yes"]);
    let ours = fresh_aof_sizes(kv.port);
    assert_eq!(ours, ["0/0", "50/0"]);
    let Some(redis) = start_redis(&["--appendonly", "yes"]) else {
        return;
    };
    assert_eq!(ours, fresh_aof_sizes(redis.port));
}

/// A big write's AOF buffer goes back to the allocator once written: a
/// transaction that sets a 32 MB value and deletes it leaves `used_memory`
/// where it was, with no write after it (the buffer's capacity used to stay
/// for good, counted by nothing).
#[test]
fn a_big_write_leaves_no_aof_buffer_behind() {
    let kv = start_kvstore_in(
        tempfile::tempdir().unwrap(),
        &[
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
        ],
    );
    let mut c = Conn::connect(kv.port);
    let used = |c: &mut Conn| -> usize {
        c.info_field("memory", "used_memory")
            .parse()
            .expect("used_memory")
    };
    let before = used(&mut c);
    let value = vec![b'x'; 32 << 20];
    assert_eq!(c.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"SET", b"big", &value]), b"+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["DEL", "big"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd_str(&["EXEC"]), b"*2\r\n+OK\r\n:1\r\n");
    let after = used(&mut c);
    assert!(
        after < before + (4 << 20),
        "used_memory {before} before the transaction, {after} after it"
    );
}
