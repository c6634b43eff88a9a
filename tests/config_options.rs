//! The options kvstore answers for CONFIG GET * parity with Redis 7.0, and
//! what each one does: every redis-server option name is known, and the
//! options with an effect here have it (INFO fields, the replication
//! handshake, replica sockets, the cron's frequency, the OOM score, the
//! process title, CPU affinity, supervision messages, signal and replica
//! aware shutdowns, AOF history, dumps written for full syncs, crash
//! reports, propagated errors). Values and error replies are compared with
//! redis-server in tests/differential/config-all.txt.

mod common;

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{start_kvstore, start_kvstore_env, wait_for, Conn, ServerProcess};

/// Option names of `CONFIG GET *`.
fn config_names(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port);
    let raw = c.cmd_str(&["CONFIG", "GET", "*"]);
    let (_, items) = common::aggregate_items(&raw).expect("an array");
    items
        .chunks(2)
        .map(|pair| String::from_utf8_lossy(common::bulk_payload(&pair[0]).unwrap()).to_string())
        .collect()
}

/// Every option redis-server 7.0 answers in `CONFIG GET *` is one kvstore
/// answers too, but TLS's, which is left to other work.
#[test]
fn config_get_star_has_every_redis_option() {
    let Some(redis) = common::start_redis(&[]) else {
        return;
    };
    let kv = start(&[]);
    let ours: std::collections::HashSet<String> = config_names(kv.port).into_iter().collect();
    let left_to_others = |n: &str| n.starts_with("tls-");
    let mut missing: Vec<String> = config_names(redis.port)
        .into_iter()
        .filter(|n| !left_to_others(n) && !ours.contains(n))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "CONFIG GET * lacks {} of redis-server's options: {missing:?}",
        missing.len()
    );
}

/// Start kvstore; its log (the harness's `--logfile kvstore.log`) is in
/// its own directory, as Redis puts a relative log file.
fn start(args: &[&str]) -> ServerProcess {
    start_kvstore(args)
}

/// The text of a server's log file.
fn log_of(srv: &ServerProcess) -> String {
    std::fs::read_to_string(srv.dir.path().join("kvstore.log")).unwrap_or_default()
}

#[test]
fn a_relative_logfile_is_written_in_the_data_directory() {
    // As Redis: `--dir D --logfile kvstore.log` logs to D/kvstore.log, not
    // to the directory the server was started from.
    let srv = start(&[]);
    wait_for("the log in the data directory", 10, || {
        log_of(&srv).contains("Ready to accept connections")
    });
}

/// Wait for a server process to exit; its status.
fn wait_exit(child: &mut Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A replica of `master` (extra options `args`), synchronised.
fn start_replica(master: &ServerProcess, args: &[&str]) -> ServerProcess {
    let port = master.port.to_string();
    let mut all = vec!["--replicaof", "127.0.0.1", &port];
    all.extend_from_slice(args);
    let replica = start(&all);
    let mut c = Conn::connect(replica.port);
    wait_for("the replica's link", 20, || {
        c.info_field("replication", "master_link_status") == "up"
    });
    replica
}

fn send_signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

// ---- INFO and the replication handshake ----

#[test]
fn replica_priority_and_replica_announced_show_in_info() {
    // A master that is not there: the replica's INFO is what counts.
    let nowhere = common::free_port().to_string();
    let srv = start(&["--replicaof", "127.0.0.1", &nowhere]);
    let mut c = Conn::connect(srv.port);
    assert_eq!(c.info_field("replication", "slave_priority"), "100");
    assert_eq!(c.info_field("replication", "replica_announced"), "1");
    assert_eq!(
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "slave-priority",
            "42",
            "replica-announced",
            "no"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(c.info_field("replication", "slave_priority"), "42");
    assert_eq!(c.info_field("replication", "replica_announced"), "0");
}

#[test]
fn a_replica_announces_its_configured_address_and_port() {
    let master = start(&[]);
    let _replica = start_replica(
        &master,
        &[
            "--replica-announce-ip",
            "10.9.8.7",
            "--slave-announce-port",
            "4321",
        ],
    );
    let mut m = Conn::connect(master.port);
    let slave0 = m.info_field("replication", "slave0");
    assert!(slave0.starts_with("ip=10.9.8.7,port=4321,"), "{slave0}");
}

/// The replica's socket on the master, duplicated into this process
/// (pidfd_getfd); `None` where the kernel or the sandbox forbids it.
fn peer_fd(pid: u32, fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: plain syscalls on integers; a returned descriptor is new and
    // owned by nobody else.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) as RawFd;
        if pidfd < 0 {
            return None;
        }
        let dup = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as RawFd;
        libc::close(pidfd);
        (dup >= 0).then(|| OwnedFd::from_raw_fd(dup))
    }
}

fn sockopt_int(fd: &OwnedFd, level: i32, name: i32) -> i32 {
    use std::os::fd::AsRawFd;
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int we own, with its size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt");
    v
}

/// The fd field of the replica's line in the master's CLIENT LIST.
fn replica_fd(master: &mut Conn) -> RawFd {
    let list = String::from_utf8_lossy(&master.cmd_str(&["CLIENT", "LIST"])).to_string();
    let line = list
        .lines()
        .find(|l| l.contains(" flags=S "))
        .unwrap_or_else(|| panic!("no replica in {list}"));
    line.split(' ')
        .find_map(|f| f.strip_prefix("fd="))
        .and_then(|f| f.parse().ok())
        .unwrap()
}

#[test]
fn repl_disable_tcp_nodelay_turns_nodelay_off_on_replica_sockets() {
    let master = start(&[]);
    let mut m = Conn::connect(master.port);
    let first = start_replica(&master, &[]);
    let Some(sock) = peer_fd(master.child.id(), replica_fd(&mut m)) else {
        eprintln!("SKIPPED: pidfd_getfd is not permitted here; TCP_NODELAY not checked");
        return;
    };
    assert_eq!(sockopt_int(&sock, libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);
    drop(first);
    wait_for("the first replica to go", 10, || {
        m.info_field("replication", "connected_slaves") == "0"
    });
    assert_eq!(
        m.cmd_str(&["CONFIG", "SET", "repl-disable-tcp-nodelay", "yes"]),
        b"+OK\r\n"
    );
    let _second = start_replica(&master, &[]);
    let sock = peer_fd(master.child.id(), replica_fd(&mut m)).unwrap();
    assert_eq!(sockopt_int(&sock, libc::IPPROTO_TCP, libc::TCP_NODELAY), 0);
}

#[test]
fn socket_mark_id_marks_the_listening_socket() {
    use std::os::fd::AsRawFd;
    let srv = start(&["--socket-mark-id", "77"]);
    if log_of(&srv).contains("Can't set socket-mark-id") {
        eprintln!("SKIPPED: SO_MARK needs CAP_NET_ADMIN, which this sandbox lacks");
        return;
    }
    let pid = srv.child.id();
    let mut marks = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let Ok(fd) = entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .parse::<RawFd>()
        else {
            continue;
        };
        let Some(sock) = peer_fd(pid, fd) else {
            continue;
        };
        // SAFETY: getsockname into a zeroed sockaddr_in6, big enough for IPv4.
        let port = unsafe {
            let mut sa: libc::sockaddr_in6 = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            if libc::getsockname(sock.as_raw_fd(), &mut sa as *mut _ as *mut _, &mut len) != 0 {
                continue;
            }
            u16::from_be(sa.sin6_port)
        };
        let listening = sockopt_int(&sock, libc::SOL_SOCKET, libc::SO_ACCEPTCONN) == 1;
        if port == srv.port && listening {
            marks.push(sockopt_int(&sock, libc::SOL_SOCKET, libc::SO_MARK));
        }
    }
    if marks.is_empty() {
        eprintln!("SKIPPED: pidfd_getfd is not permitted here; SO_MARK not checked");
        return;
    }
    assert_eq!(marks, vec![77]);
}

// ---- The cron's frequency ----

#[test]
fn dynamic_hz_raises_hz_while_there_are_many_clients() {
    let srv = start(&["--hz", "1"]);
    let mut c = Conn::connect(srv.port);
    assert_eq!(c.info_field("server", "hz"), "1");
    // 450 clients: 450/1 and 450/2 exceed 200 per tick, 450/4 does not.
    let crowd: Vec<Conn> = (0..449).map(|_| Conn::connect(srv.port)).collect();
    wait_for("hz to rise to 4", 10, || {
        c.info_field("server", "hz") == "4"
    });
    assert_eq!(c.info_field("server", "configured_hz"), "1");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dynamic-hz", "no"]),
        b"+OK\r\n"
    );
    wait_for("hz back to 1", 10, || c.info_field("server", "hz") == "1");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "dynamic-hz", "yes"]),
        b"+OK\r\n"
    );
    drop(crowd);
    std::thread::sleep(Duration::from_millis(500));
    wait_for("hz to fall back to 1", 10, || {
        c.info_field("server", "hz") == "1"
    });
}

// ---- The process: OOM score, title, CPUs, THP, jemalloc ----

fn read_proc(pid: u32, file: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default()
}

/// Pids of the children of `pid`'s main thread.
fn children_of(pid: u32) -> Vec<u32> {
    read_proc(pid, &format!("task/{pid}/children"))
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A background save that lasts a while: 20 keys at 100 ms each.
fn slow_bgsave(c: &mut Conn) {
    for i in 0..20 {
        c.cmd_str(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["BGSAVE"]),
        b"+Background saving started\r\n".to_vec()
    );
}

#[test]
fn oom_score_adj_follows_the_role_and_marks_background_children() {
    let base = read_proc(std::process::id(), "oom_score_adj")
        .trim()
        .parse::<i32>()
        .unwrap();
    let srv = start(&[
        "--oom-score-adj",
        "absolute",
        "--oom-score-adj-values",
        "110 220 330",
    ]);
    let pid = srv.child.id();
    let score = || read_proc(pid, "oom_score_adj").trim().to_string();
    assert_eq!(score(), "110");
    let mut c = Conn::connect(srv.port);
    let nowhere = common::free_port().to_string();
    c.cmd_str(&["REPLICAOF", "127.0.0.1", &nowhere]);
    assert_eq!(score(), "220");
    c.cmd_str(&["REPLICAOF", "NO", "ONE"]);
    assert_eq!(score(), "110");
    slow_bgsave(&mut c);
    let child = *children_of(pid).first().expect("the snapshot child");
    wait_for("the child's score", 5, || {
        read_proc(child, "oom_score_adj").trim() == "330"
    });
    // The child names itself just after it sets its score.
    wait_for("the child's title", 5, || {
        read_proc(child, "cmdline").starts_with("redis-rdb-bgsave")
    });
    // Relative: added to the score the server started with.
    assert_eq!(
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "oom-score-adj",
            "relative",
            "oom-score-adj-values",
            "5 6 7"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(score(), (base + 5).to_string());
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "oom-score-adj", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(score(), base.to_string());
}

#[test]
fn the_process_title_follows_proc_title_template() {
    let srv = start(&[]);
    let pid = srv.child.id();
    let cmdline = || read_proc(pid, "cmdline").trim_end_matches('\0').to_string();
    let exe = env!("CARGO_BIN_EXE_kvstore");
    assert_eq!(cmdline(), format!("{exe} 127.0.0.1:{}", srv.port));
    let mut c = Conn::connect(srv.port);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "proc-title-template", "kv {port} {{x}"]),
        b"+OK\r\n"
    );
    assert_eq!(cmdline(), format!("kv {} {{x}}", srv.port));
    // The short name stays the executable's (pidof, pkill).
    assert_eq!(read_proc(pid, "comm").trim(), "kvstore");
    // A title longer than the arguments runs over the environment, which
    // was moved out of its way (Redis's spt_init): shown whole, up to the
    // one NUL after it.
    let long = format!("kv {{port}} {}", "x".repeat(600));
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "proc-title-template", &long]),
        b"+OK\r\n"
    );
    assert_eq!(cmdline(), format!("kv {} {}", srv.port, "x".repeat(600)));
    assert_eq!(read_proc(pid, "cmdline").matches('\0').count(), 1);

    // set-proc-title no: the command line stays as it was started.
    let plain = start(&["--set-proc-title", "no"]);
    let args = read_proc(plain.child.id(), "cmdline");
    assert!(args.contains("--set-proc-title\0no"), "{args:?}");
}

#[test]
fn cpulists_pin_the_event_loop_and_snapshot_children() {
    let allowed = |status: String| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    // Two CPUs this test may use: the loop on one, the child on the other.
    let ours = kvstore::process::parse_cpulist(&allowed(read_proc(std::process::id(), "status")))
        .unwrap_or_default();
    let (Some(first), Some(second)) = (ours.first(), ours.get(1)) else {
        eprintln!("SKIPPED: fewer than two CPUs available");
        return;
    };
    let (first, second) = (first.to_string(), second.to_string());
    let srv = start(&["--server_cpulist", &first, "--bgsave_cpulist", &second]);
    let pid = srv.child.id();
    assert_eq!(
        allowed(read_proc(pid, &format!("task/{pid}/status"))),
        first
    );
    let mut c = Conn::connect(srv.port);
    slow_bgsave(&mut c);
    let child = *children_of(pid).first().expect("the snapshot child");
    wait_for("the child's CPUs", 5, || {
        allowed(read_proc(child, "status")) == second
    });
}

/// With the kernel's THP at `always`, disable-thp turns it off for the
/// process (Redis does nothing otherwise, nor does kvstore).
#[test]
fn disable_thp_turns_huge_pages_off_when_the_kernel_forces_them() {
    let forced = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|m| m.contains("[always]"));
    let thp = |srv: &ServerProcess| {
        read_proc(srv.child.id(), "status")
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))
            .map(|v| v.trim().to_string())
    };
    let on = start(&[]);
    let off = start(&["--disable-thp", "no"]);
    if thp(&on).is_none() {
        eprintln!("SKIPPED: this kernel does not report THP_enabled");
        return;
    }
    assert_eq!(thp(&on).unwrap(), if forced { "0" } else { "1" });
    assert_eq!(thp(&off).unwrap(), "1");
}

#[test]
fn jemalloc_bg_thread_starts_and_stops_the_purging_thread() {
    let srv = start(&[]);
    let pid = srv.child.id();
    let bg_threads = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter(|t| {
                let comm = std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"));
                comm.is_ok_and(|c| c.trim() == "jemalloc_bg_thd")
            })
            .count()
    };
    wait_for("jemalloc's background thread", 10, || bg_threads() >= 1);
    let mut c = Conn::connect(srv.port);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "jemalloc-bg-thread", "no"]),
        b"+OK\r\n"
    );
    wait_for("the thread to stop", 10, || bg_threads() == 0);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "jemalloc-bg-thread", "yes"]),
        b"+OK\r\n"
    );
    wait_for("the thread to start again", 10, || bg_threads() >= 1);
}

// ---- Supervision ----

/// Datagrams received on `sock` until `READY=1` (or 10 s).
fn notifications_until(sock: &std::os::unix::net::UnixDatagram, last: &str) -> Vec<String> {
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.iter().any(|m: &String| m == last) {
        let n = sock.recv(&mut buf).expect("a notification");
        got.push(String::from_utf8_lossy(&buf[..n]).to_string());
    }
    got
}

#[test]
fn supervised_systemd_notifies_ready_and_stopping() {
    for mode in ["systemd", "auto"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let srv = start_kvstore_env(
            tempfile::tempdir().unwrap(),
            &["--supervised", mode],
            &[("NOTIFY_SOCKET", path.to_str().unwrap())],
        );
        let got = notifications_until(&sock, "READY=1\n");
        assert_eq!(
            got,
            [
                "STATUS=Redis is loading...\n",
                "STATUS=Ready to accept connections\n",
                "READY=1\n"
            ],
            "{mode}"
        );
        let mut c = Conn::connect(srv.port);
        assert_eq!(c.info_field("server", "process_supervised"), "systemd");
        c.send(&[b"SHUTDOWN"]);
        let got = notifications_until(&sock, "STOPPING=1\n");
        assert_eq!(got, ["STOPPING=1\n"], "{mode}");
    }
    // Not supervised: nothing is sent, INFO says no.
    let srv = start(&["--supervised", "auto"]);
    let mut c = Conn::connect(srv.port);
    assert_eq!(c.info_field("server", "process_supervised"), "no");
}

// ---- Shutdown ----

/// A signal's shutdown starts from the cron, as Redis's shutdown_asap: with
/// DEBUG PAUSE-CRON 1 it waits, and SHUTDOWN ABORT cancels it (Redis's
/// unit/shutdown "SHUTDOWN ABORT can cancel SIGTERM").
#[test]
fn shutdown_abort_cancels_a_signal_held_by_a_paused_cron() {
    let mut srv = start(&["--enable-debug-command", "yes"]);
    let mut c = Conn::connect(srv.port);
    assert_eq!(c.cmd_str(&["DEBUG", "PAUSE-CRON", "1"]), b"+OK\r\n");
    send_signal(&srv.child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd_str(&["SHUTDOWN", "ABORT"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["DEBUG", "PAUSE-CRON", "0"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    assert!(srv.child.try_wait().unwrap().is_none());
    assert!(log_of(&srv).contains("Shutdown manually aborted."));
    assert_eq!(
        c.cmd_str(&["SHUTDOWN", "ABORT"]),
        b"-ERR No shutdown in progress.\r\n"
    );
}

/// A second SIGINT while the final save runs exits at once and removes the
/// save's temp file (Redis's "You insist... exiting now.", unit/shutdown
/// "Temp rdb will be deleted in signal handle"); the save would have taken
/// 20 x 100 ms.
#[test]
fn a_second_sigint_during_the_final_save_exits_and_removes_the_temp_file() {
    let mut srv = start(&["--save", "3600 1"]);
    let mut c = Conn::connect(srv.port);
    for i in 0..20 {
        c.cmd_str(&["SET", &i.to_string(), "v"]);
    }
    c.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let temp = srv.dir.path().join(format!("temp-{}.rdb", srv.child.id()));
    send_signal(&srv.child, libc::SIGINT);
    wait_for("the final save to start", 5, || temp.exists());
    send_signal(&srv.child, libc::SIGINT);
    // Exit status 1 is the insistence; a finished save would exit with 0.
    let status = wait_exit(&mut srv.child, 10);
    assert_eq!(status.code(), Some(1));
    assert!(!temp.exists());
    assert!(!srv.dir.path().join("dump.rdb").exists());
}

#[test]
fn shutdown_on_signal_flags_decide_the_final_save() {
    let dump_after = |args: &[&str], signal: i32| -> bool {
        let mut srv = start(args);
        let mut c = Conn::connect(srv.port);
        c.cmd_str(&["SET", "k", "v"]);
        send_signal(&srv.child, signal);
        assert!(wait_exit(&mut srv.child, 10).success());
        srv.dir.path().join("dump.rdb").exists()
    };
    // Save points: saved by default, not with nosave.
    assert!(dump_after(&["--save", "3600 1"], libc::SIGTERM));
    assert!(!dump_after(
        &["--save", "3600 1", "--shutdown-on-sigterm", "nosave"],
        libc::SIGTERM
    ));
    assert!(!dump_after(
        &["--save", "3600 1", "--shutdown-on-sigint", "nosave now"],
        libc::SIGINT
    ));
    // No save points: only with save.
    assert!(!dump_after(&[], libc::SIGINT));
    assert!(dump_after(&["--shutdown-on-sigint", "save"], libc::SIGINT));
    // The other signal's flags are not these.
    assert!(dump_after(
        &["--save", "3600 1", "--shutdown-on-sigint", "nosave"],
        libc::SIGTERM
    ));
}

/// A master whose replica sleeps (DEBUG SLEEP) has a lagging replica.
fn master_and_sleepy_replica(timeout: &str) -> (ServerProcess, ServerProcess) {
    let master = start(&["--shutdown-timeout", timeout]);
    let replica = start_replica(&master, &["--enable-debug-command", "yes"]);
    let mut m = Conn::connect(master.port);
    wait_for("the replica online", 10, || {
        m.info_field("replication", "slave0")
            .contains("state=online")
    });
    (master, replica)
}

#[test]
fn shutdown_waits_for_a_lagging_replica_and_can_be_aborted() {
    let (mut master, replica) = master_and_sleepy_replica("10");
    let mut r = Conn::connect(replica.port);
    let mut m = Conn::connect(master.port);
    r.send(&[b"DEBUG", b"SLEEP", b"3"]);
    std::thread::sleep(Duration::from_millis(100));
    m.cmd_str(&["SET", "k", "1"]);
    // The replica is not a connected client (Redis counts it apart).
    assert_eq!(m.info_field("clients", "connected_clients"), "1");
    let mut stopping = Conn::connect(master.port);
    stopping.send(&[b"SHUTDOWN"]);
    std::thread::sleep(Duration::from_millis(200));
    // INFO says the shutdown is under way, and for how long at most.
    let left: u64 = m
        .info_field("server", "shutdown_in_milliseconds")
        .parse()
        .unwrap();
    assert!(left > 0 && left <= 10_000, "{left}");
    // Writes wait meanwhile; reads are served.
    let mut writer = Conn::connect(master.port);
    writer.send(&[b"SET", b"k", b"2"]);
    assert_eq!(m.cmd_str(&["GET", "k"]), b"$1\r\n1\r\n");
    let (early, _) = writer.read_available(Duration::from_millis(200));
    assert!(early.is_empty(), "a write ran during the shutdown wait");
    assert_eq!(m.cmd_str(&["SHUTDOWN", "ABORT"]), b"+OK\r\n");
    assert_eq!(
        stopping.read_reply(),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    assert!(log_of(&master).contains("Waiting for replicas before shutting down."));
    // Again: it exits as soon as the replica has caught up, well before
    // the timeout.
    wait_for("the replica awake", 10, || {
        r.try_cmd_str(&["PING"]).is_ok_and(|p| p == b"+PONG\r\n")
    });
    r.send(&[b"DEBUG", b"SLEEP", b"1"]);
    std::thread::sleep(Duration::from_millis(100));
    m.cmd_str(&["SET", "k", "3"]);
    let started = Instant::now();
    m.send(&[b"SHUTDOWN"]);
    assert!(wait_exit(&mut master.child, 10).success());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        log_of(&master).contains("1 of 1 replicas are in sync when shutting down."),
        "{}",
        log_of(&master)
    );
}

#[test]
fn shutdown_gives_up_on_a_lagging_replica_after_shutdown_timeout() {
    let (mut master, replica) = master_and_sleepy_replica("1");
    let mut r = Conn::connect(replica.port);
    let mut m = Conn::connect(master.port);
    r.send(&[b"DEBUG", b"SLEEP", b"4"]);
    std::thread::sleep(Duration::from_millis(100));
    m.cmd_str(&["SET", "k", "1"]);
    let started = Instant::now();
    send_signal(&master.child, libc::SIGTERM);
    assert!(wait_exit(&mut master.child, 10).success());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let log = log_of(&master);
    assert!(log.contains("Lagging replica"), "{log}");
    assert!(
        log.contains("0 of 1 replicas are in sync when shutting down."),
        "{log}"
    );

    // NOW does not wait.
    let (mut master, replica) = master_and_sleepy_replica("10");
    let mut r = Conn::connect(replica.port);
    let mut m = Conn::connect(master.port);
    r.send(&[b"DEBUG", b"SLEEP", b"4"]);
    std::thread::sleep(Duration::from_millis(100));
    m.cmd_str(&["SET", "k", "1"]);
    let started = Instant::now();
    m.send(&[b"SHUTDOWN", b"NOW"]);
    assert!(wait_exit(&mut master.child, 10).success());
    assert!(started.elapsed() < Duration::from_secs(2));
}

// ---- Persistence files ----

/// The AOF directory's file names.
fn aof_files(srv: &ServerProcess) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(srv.dir.path().join("appendonlydir"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn aof_disable_auto_gc_keeps_history_files_until_turned_off() {
    let srv = start(&["--appendonly", "yes", "--aof-disable-auto-gc", "yes"]);
    let mut c = Conn::connect(srv.port);
    c.cmd_str(&["SET", "k", "v"]);
    let rewrites = |c: &mut Conn| c.info_field("persistence", "aof_rewrites");
    let before = rewrites(&mut c);
    c.cmd_str(&["BGREWRITEAOF"]);
    wait_for("the rewrite", 10, || {
        rewrites(&mut c) != before && c.info_field("persistence", "aof_rewrite_in_progress") == "0"
    });
    let manifest =
        std::fs::read_to_string(srv.dir.path().join("appendonlydir/appendonly.aof.manifest"))
            .unwrap();
    assert!(manifest.contains("type h"), "{manifest}");
    let files = aof_files(&srv);
    assert!(
        files.iter().any(|f| f == "appendonly.aof.1.base.rdb"),
        "{files:?}"
    );
    assert!(
        files.iter().any(|f| f == "appendonly.aof.2.base.rdb"),
        "{files:?}"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "aof-disable-auto-gc", "no"]),
        b"+OK\r\n"
    );
    wait_for("the history to go", 10, || {
        !aof_files(&srv)
            .iter()
            .any(|f| f == "appendonly.aof.1.base.rdb")
    });
}

#[test]
fn rdb_del_sync_files_removes_dumps_made_for_a_full_sync() {
    let dumps_after_sync = |del: &str| -> (bool, bool) {
        let master = start(&["--repl-diskless-sync", "no", "--rdb-del-sync-files", del]);
        let mut m = Conn::connect(master.port);
        m.cmd_str(&["SET", "k", "v"]);
        let replica = start_replica(
            &master,
            &[
                "--repl-diskless-load",
                "disabled",
                "--rdb-del-sync-files",
                del,
            ],
        );
        let mut r = Conn::connect(replica.port);
        assert_eq!(r.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
        // The master's cron removes its file once a second.
        std::thread::sleep(Duration::from_millis(2500));
        (
            master.dir.path().join("dump.rdb").exists(),
            replica.dir.path().join("dump.rdb").exists(),
        )
    };
    assert_eq!(dumps_after_sync("no"), (true, true));
    assert_eq!(dumps_after_sync("yes"), (false, false));
}

#[test]
fn repl_diskless_sync_max_replicas_starts_the_sync_without_the_delay() {
    let waits = start(&["--repl-diskless-sync-delay", "30"]);
    let port = waits.port.to_string();
    let late = start(&["--replicaof", "127.0.0.1", &port]);
    let prompt_master = start(&[
        "--repl-diskless-sync-delay",
        "30",
        "--repl-diskless-sync-max-replicas",
        "1",
    ]);
    let started = Instant::now();
    let _prompt = start_replica(&prompt_master, &[]);
    assert!(started.elapsed() < Duration::from_secs(10));
    let mut l = Conn::connect(late.port);
    assert_eq!(l.info_field("replication", "master_link_status"), "down");
    let mut w = Conn::connect(waits.port);
    let slave0 = w.info_field("replication", "slave0");
    assert!(slave0.contains("state=wait_bgsave"), "{slave0}");
}

// ---- Crashes and errors in the replication stream ----

#[test]
fn a_panic_writes_a_crash_report_while_crash_log_is_enabled() {
    for (enabled, expected) in [("yes", true), ("no", false)] {
        let mut srv = start(&[
            "--enable-debug-command",
            "yes",
            "--crash-log-enabled",
            enabled,
        ]);
        let mut c = Conn::connect(srv.port);
        c.send(&[b"DEBUG", b"PANIC"]);
        assert!(!wait_exit(&mut srv.child, 10).success());
        let log = log_of(&srv);
        assert_eq!(
            log.contains("Guru Meditation: DEBUG PANIC called at Unix time"),
            expected,
            "{log}"
        );
        assert_eq!(
            log.contains("=== REDIS BUG REPORT START"),
            expected,
            "{log}"
        );
    }
}

#[test]
fn a_fatal_signal_writes_a_crash_report_and_still_kills() {
    // Redis's integration/logging: SIGABRT from outside and DEBUG SEGFAULT
    // leave "crashed by signal" and a stack trace in the log, and the
    // process dies of the signal.
    use std::os::unix::process::ExitStatusExt;
    for (sig, how) in [(libc::SIGSEGV, "debug"), (libc::SIGABRT, "kill")] {
        let mut srv = start(&["--enable-debug-command", "yes"]);
        let mut c = Conn::connect(srv.port);
        if how == "debug" {
            c.send(&[b"DEBUG", b"SEGFAULT"]);
        } else {
            unsafe { libc::kill(srv.child.id() as libc::pid_t, sig) };
        }
        let status = wait_exit(&mut srv.child, 30);
        assert_eq!(status.signal(), Some(sig), "{status:?}");
        let log = log_of(&srv);
        assert!(log.contains(&format!("crashed by signal: {sig}")), "{log}");
        assert!(log.contains("------ STACK TRACE ------"), "{log}");
        if how == "kill" {
            assert!(log.contains("Killed by PID: "), "{log}");
        }
    }
}

/// A replica holding a list where its master has a number: the master's
/// INCR fails there.
fn diverge(master: &ServerProcess, replica: &ServerProcess) {
    let mut m = Conn::connect(master.port);
    let mut r = Conn::connect(replica.port);
    m.cmd_str(&["SET", "n", "1"]);
    wait_for("n on the replica", 10, || {
        r.cmd_str(&["GET", "n"]) == b"$1\r\n1\r\n"
    });
    r.cmd_str(&["CONFIG", "SET", "replica-read-only", "no"]);
    r.cmd_str(&["DEL", "n"]);
    r.cmd_str(&["RPUSH", "n", "x"]);
    r.cmd_str(&["CONFIG", "SET", "replica-read-only", "yes"]);
    m.cmd_str(&["INCR", "n"]);
}

#[test]
fn propagation_error_behavior_decides_what_a_failing_replica_does() {
    let master = start(&[]);
    let replica = start_replica(&master, &[]);
    diverge(&master, &replica);
    let mut r = Conn::connect(replica.port);
    wait_for("the error counted", 10, || {
        r.info_field("stats", "unexpected_error_replies") == "1"
    });
    let log = log_of(&replica);
    assert!(
        log.contains("== CRITICAL == This replica is sending an error to its master: 'WRONGTYPE Operation against a key holding the wrong kind of value' after processing the command 'incr'"),
        "{log}"
    );

    let master = start(&[]);
    let mut replica = start_replica(
        &master,
        &["--propagation-error-behavior", "panic-on-replicas"],
    );
    diverge(&master, &replica);
    assert!(!wait_exit(&mut replica.child, 10).success());
    let log = log_of(&replica);
    assert!(
        log.contains("This replica panicked sending an error to its master after processing the command 'incr'"),
        "{log}"
    );
}

#[test]
fn a_replica_that_cannot_persist_stops_unless_told_to_ignore_it() {
    for (ignore, survives) in [("no", false), ("yes", true)] {
        let logs = tempfile::tempdir().unwrap();
        let log = logs.path().join("replica.log");
        let master = start(&[]);
        let mut replica = start_replica(
            &master,
            &[
                "--save",
                "3600 1",
                "--logfile",
                log.to_str().unwrap(),
                "--replica-ignore-disk-write-errors",
                ignore,
            ],
        );
        // Its directory gone, the replica's snapshots fail.
        std::fs::remove_dir_all(replica.dir.path()).unwrap();
        let mut r = Conn::connect(replica.port);
        r.cmd_str(&["BGSAVE"]);
        wait_for("the failed save", 10, || {
            r.info_field("persistence", "rdb_last_bgsave_status") == "err"
        });
        Conn::connect(master.port).cmd_str(&["SET", "k", "v"]);
        if survives {
            wait_for("the write applied", 10, || {
                r.cmd_str(&["GET", "k"]) == b"$1\r\nv\r\n"
            });
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(
                text.contains(
                    "Replica is applying a command even though it is unable to write to disk."
                ),
                "{text}"
            );
        } else {
            assert!(!wait_exit(&mut replica.child, 10).success());
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(
                text.contains("Replica was unable to write command to disk."),
                "{text}"
            );
        }
    }
}

// ---- Startup ----

fn start_failure(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_kvstore"))
            .args(["--port", &common::free_port().to_string(), "--dir"])
            .arg(dir.path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        Duration::from_secs(10),
    );
    assert!(!out.status.success(), "{args:?} started");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn options_of_missing_features_refuse_to_turn_them_on_at_startup() {
    let err = start_failure(&["--cluster-enabled", "yes"]);
    assert!(
        err.contains("cluster mode is not supported by kvstore: cluster-enabled must be no"),
        "{err}"
    );
    let err = start_failure(&["--activedefrag", "yes"]);
    assert!(
        err.contains("Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc"),
        "{err}"
    );
    let err = start_failure(&["--io-threads", "129"]);
    assert!(
        err.contains("argument must be between 1 and 128 inclusive"),
        "{err}"
    );
    // More I/O threads than one: accepted, said to have no effect.
    let srv = start(&["--io-threads", "4", "--io-threads-do-reads", "yes"]);
    let mut c = Conn::connect(srv.port);
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "io-threads"]),
        b"*2\r\n$10\r\nio-threads\r\n$1\r\n4\r\n"
    );
    assert!(log_of(&srv)
        .contains("io-threads 4: kvstore serves every client from its single event loop thread"));
}

// ---- CONFIG REWRITE ----

/// CONFIG REWRITE writes the added options as redis-server 7.0 does
/// (aliases renamed, enums and flags as words, memory in units, strings
/// quoted, unset strings left out), from the same file and CONFIG SETs.
#[test]
fn config_rewrite_writes_the_added_options_as_redis_does() {
    let Some(bin) = common::require_tool("redis-server") else {
        return;
    };
    let template = "# kept\n\
        bind 127.0.0.1\n\
        slave-priority 50\n\
        shutdown-on-sigint save\n\
        repl-ping-slave-period 5\n\
        slave-announce-ip 10.0.0.9\n\
        cluster-announce-ip 10.0.0.8\n\
        syslog-ident kv\n";
    let settings: &[(&str, &str)] = &[
        ("replica-priority", "7"),
        ("shutdown-on-sigterm", "nosave now"),
        ("oom-score-adj-values", "1 2 3"),
        ("oom-score-adj", "relative"),
        ("slave-announce-ip", ""),
        ("cluster-announce-hostname", "node-1"),
        ("active-defrag-ignore-bytes", "200mb"),
        ("cluster-link-sendbuf-limit", "1mb"),
        ("proc-title-template", "{title} {port}"),
        ("ignore-warnings", "ARM64-COW-BUG"),
        ("dynamic-hz", "no"),
        ("repl-diskless-sync-max-replicas", "2"),
        ("cluster-node-timeout", "5000"),
        ("sanitize-dump-payload", "clients"),
        ("propagation-error-behavior", "panic-on-replicas"),
        ("replica-announce-port", "6390"),
        ("shutdown-timeout", "3"),
        ("aof-disable-auto-gc", "yes"),
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
            // Each server's own port and directory; Redis's ACL user line.
            let mut lines: Vec<String> = text
                .lines()
                .filter(|l| {
                    !l.starts_with("user ") && !l.starts_with("port ") && !l.starts_with("dir ")
                })
                .map(String::from)
                .collect();
            // Redis appends in its dict's order, random per process.
            lines.sort();
            lines
        };
    let ours = rewrite(&|conf, dir| {
        let (child, port, _) = common::start_kvstore_with_file(conf, dir, &[]);
        (child, port)
    });
    let theirs = rewrite(&|conf, dir| {
        let port = common::free_port();
        let child = common::KillOnDrop(
            Command::new(&bin)
                .arg(conf)
                .args(["--port", &port.to_string(), "--daemonize", "no", "--dir"])
                .arg(dir)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        (child, port)
    });
    assert_eq!(
        ours,
        theirs,
        "kvstore:\n{}\nredis:\n{}",
        ours.join("\n"),
        theirs.join("\n")
    );
}

/// CONFIG SET bind as Redis 7.0's changeBindAddr: a list overlapping the
/// addresses listened on (`127.0.0.1` → `*` and back) closes the old
/// listeners and binds the new ones; a list that cannot be bound keeps the
/// old one; `""` listens nowhere. Connections already open stay.
#[test]
fn config_set_bind_moves_between_overlapping_lists() {
    let s = start(&[]);
    let mut c = Conn::connect(s.port);
    let reachable = |ip: &str| std::net::TcpStream::connect((ip, s.port)).is_ok();
    assert!(reachable("127.0.0.1") && !reachable("127.0.0.2"));
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "bind", "*"]), b"+OK\r\n");
    common::wait_for("every address to be listened on", 5, || {
        reachable("127.0.0.2")
    });
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "bind", "127.0.0.1"]),
        b"+OK\r\n"
    );
    common::wait_for("127.0.0.2 to be let go", 5, || !reachable("127.0.0.2"));
    assert!(reachable("127.0.0.1"));
    // 192.0.2.0/24 is for documentation: no host has it.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "bind", "* 192.0.2.99"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "bind"]),
        b"*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(reachable("127.0.0.1") && !reachable("127.0.0.2"));
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "bind", ""]), b"+OK\r\n");
    common::wait_for("no address to be listened on", 5, || {
        !reachable("127.0.0.1")
    });
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "bind", "* -::*"]), b"+OK\r\n");
    common::wait_for("the default to be listened on", 5, || {
        reachable("127.0.0.1")
    });
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "bind"]),
        b"*2\r\n$4\r\nbind\r\n$6\r\n* -::*\r\n"
    );
}

/// The open-files limit is raised for `maxclients` clients, or where the
/// system refuses, `maxclients` is lowered to what fits (Redis's
/// adjustOpenFilesLimit): either way every client has a descriptor.
#[test]
fn the_open_files_limit_fits_maxclients() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let bin = env!("CARGO_BIN_EXE_kvstore");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256; exec {bin} --port {port} --bind 127.0.0.1 --save '' --maxclients 1000 --dir {}",
            dir.path().display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("kvstore to listen", 10, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let mut c = Conn::connect(port);
    let raw = c.cmd_str(&["CONFIG", "GET", "maxclients"]);
    let (_, items) = common::aggregate_items(&raw).unwrap();
    let maxclients: u64 = std::str::from_utf8(common::bulk_payload(&items[1]).unwrap())
        .unwrap()
        .parse()
        .unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        maxclients + 32 <= soft,
        "maxclients {maxclients} with {soft} open files"
    );
    assert!(
        maxclients == 1000 || soft < 1032,
        "maxclients lowered though the limit fits"
    );
    // A maxclients no system grants is answered at once with the number
    // that fits (it used to take one refused setrlimit per 16 descriptors
    // short: half a minute for 4 billion, the server deaf meanwhile).
    let asked = Instant::now();
    let reply = c.cmd_str(&["CONFIG", "SET", "maxclients", "4000000000"]);
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.contains("not able to handle the specified number of clients, try with"),
        "{text}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "maxclients"]),
        format!(
            "*2\r\n$10\r\nmaxclients\r\n${}\r\n{maxclients}\r\n",
            maxclients.to_string().len()
        )
        .into_bytes()
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn use_exit_on_panic_ends_a_panic_with_exit_status_1_after_its_report() {
    for (flag, code) in [("yes", Some(1)), ("no", Some(101))] {
        let mut srv = start(&["--enable-debug-command", "yes", "--use-exit-on-panic", flag]);
        let mut c = Conn::connect(srv.port);
        c.send(&[b"DEBUG", b"PANIC"]);
        let status = wait_exit(&mut srv.child, 10);
        assert_eq!(status.code(), code, "use-exit-on-panic {flag}");
        assert!(log_of(&srv).contains("Guru Meditation: DEBUG PANIC"));
    }
}

/// `daemonize yes` as Redis's: the process started exits with 0 at once,
/// the server goes on in the background in a session of its own, writes
/// its PID file and removes it when it shuts down.
#[test]
fn daemonize_runs_the_server_in_the_background_with_a_pid_file() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let pidfile = dir.path().join("kvstore.pid");
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_kvstore")).args([
            "--port",
            &port.to_string(),
            "--daemonize",
            "yes",
            "--pidfile",
            pidfile.to_str().unwrap(),
            "--dir",
            dir.path().to_str().unwrap(),
            "--logfile",
            dir.path().join("kvstore.log").to_str().unwrap(),
            "--save",
            "",
        ]),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{out:?}");
    wait_for("the PID file", 10, || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    /// Kills the daemon if the test stops early.
    struct Daemon(i32);
    impl Drop for Daemon {
        fn drop(&mut self) {
            // SAFETY: a signal to a process this test started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let _daemon = Daemon(pid);
    // SAFETY: getsid only reads.
    assert_eq!(unsafe { libc::getsid(pid) }, pid, "a session of its own");
    let mut c = None;
    wait_for("the daemon to listen", 10, || {
        c = std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok()
            .then(|| Conn::connect(port));
        c.is_some()
    });
    let mut c = c.unwrap();
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "daemonize"]),
        b"*2\r\n$9\r\ndaemonize\r\n$3\r\nyes\r\n"
    );
    let log = std::fs::read_to_string(dir.path().join("kvstore.log")).unwrap();
    assert!(log.contains(&format!("pid={pid}")), "{log}");
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    wait_for("the daemon to exit", 10, || {
        // SAFETY: signal 0 only checks that the process exists; it is not
        // our child, so it is gone once it exits.
        unsafe { libc::kill(pid, 0) != 0 }
    });
    assert!(!pidfile.exists(), "the PID file is removed at shutdown");
}

/// `watchdog-period` (Redis's software watchdog): a loop stuck longer than
/// the period leaves "--- WATCHDOG TIMER EXPIRED ---" and its stack in the
/// log; a loop that turns never does; 0 turns it off.
#[test]
fn the_watchdog_logs_a_stuck_loop() {
    let srv = start(&["--enable-debug-command", "yes"]);
    let mut c = Conn::connect(srv.port);
    let expiries = |srv: &ServerProcess| {
        log_of(srv)
            .matches("--- WATCHDOG TIMER EXPIRED ---")
            .count()
    };
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "watchdog-period", "200"]),
        b"+OK\r\n"
    );
    wait_for("the watchdog", 5, || {
        log_of(&srv).contains("Watchdog timer enabled")
    });
    // A loop that keeps turning (the cron arms it again) never fires it.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(expiries(&srv), 0, "{}", log_of(&srv));
    assert_eq!(c.cmd_str(&["DEBUG", "SLEEP", "1"]), b"+OK\r\n");
    assert_eq!(expiries(&srv), 1, "{}", log_of(&srv));
    assert!(log_of(&srv).contains("--------"));
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "watchdog-period", "0"]),
        b"+OK\r\n"
    );
    wait_for("the watchdog off", 5, || {
        log_of(&srv).contains("Watchdog disabled.")
    });
    assert_eq!(c.cmd_str(&["DEBUG", "SLEEP", "0.5"]), b"+OK\r\n");
    assert_eq!(expiries(&srv), 1);
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "watchdog-period"]),
        b"*2\r\n$15\r\nwatchdog-period\r\n$1\r\n0\r\n"
    );
}

/// Redis's "CONFIG sanity" (unit/introspection): every option CONFIG GET *
/// lists can be set to the value it has, but for Redis's own immutable and
/// special options, which that test skips. kvstore's own immutable option
/// takes its value and refuses any other.
#[test]
fn every_listed_option_can_be_set_to_its_own_value() {
    let skip = [
        "rdbchecksum",
        "daemonize",
        "io-threads-do-reads",
        "tcp-backlog",
        "always-show-logo",
        "syslog-enabled",
        "cluster-enabled",
        "disable-thp",
        "aclfile",
        "unixsocket",
        "pidfile",
        "syslog-ident",
        "appendfilename",
        "appenddirname",
        "supervised",
        "syslog-facility",
        "databases",
        "io-threads",
        "logfile",
        "unixsocketperm",
        "replicaof",
        "slaveof",
        "requirepass",
        "server_cpulist",
        "bio_cpulist",
        "aof_rewrite_cpulist",
        "bgsave_cpulist",
        "set-proc-title",
        "cluster-config-file",
        "cluster-port",
        "oom-score-adj",
        "oom-score-adj-values",
        "enable-protected-configs",
        "enable-debug-command",
        "enable-module-command",
        "dbfilename",
        "dir",
        "socket-mark-id",
    ];
    let srv = start(&[]);
    let mut c = Conn::connect(srv.port);
    let raw = c.cmd_str(&["CONFIG", "GET", "*"]);
    let (_, items) = common::aggregate_items(&raw).expect("an array");
    let mut set = 0;
    for pair in items.chunks(2) {
        let name = String::from_utf8_lossy(common::bulk_payload(&pair[0]).unwrap()).to_string();
        if skip.contains(&name.as_str()) || name.starts_with("tls-") {
            continue;
        }
        let value = common::bulk_payload(&pair[1]).unwrap().to_vec();
        let reply = c.cmd(&[b"CONFIG", b"SET", name.as_bytes(), &value]);
        assert_eq!(
            reply,
            b"+OK\r\n",
            "CONFIG SET {name} {}",
            String::from_utf8_lossy(&value)
        );
        set += 1;
    }
    assert!(set > 100, "{set} options set");
    let engine = c.cmd_str(&["CONFIG", "GET", "io-engine"]);
    let other = if engine.ends_with(b"epoll\r\n") {
        "io_uring"
    } else {
        "epoll"
    };
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "io-engine", other]),
        b"-ERR CONFIG SET failed (possibly related to argument 'io-engine') - can't set immutable config\r\n"
    );
}

#[test]
fn a_failed_config_set_puts_the_working_directory_back() {
    let kv = start_kvstore(&["--enable-protected-configs", "yes"]);
    let mut c = Conn::connect(kv.port);
    let pid = c.info_field("server", "process_id");
    let cwd = || std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    let before = cwd();
    let other = tempfile::tempdir().unwrap();
    // The port is taken: the whole CONFIG SET fails, dir included.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let dir = other.path().to_str().unwrap();
    let reply = String::from_utf8_lossy(&c.cmd_str(&["CONFIG", "SET", "dir", dir, "port", &port]))
        .into_owned();
    assert!(reply.starts_with("-ERR CONFIG SET failed"), "{reply}");
    assert_eq!(cwd(), before);
    let got = String::from_utf8_lossy(&c.cmd_str(&["CONFIG", "GET", "dir"])).into_owned();
    assert!(got.contains(&before.display().to_string()), "{got}");
    // A CONFIG SET that succeeds moves it.
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "dir", dir]), b"+OK\r\n");
    assert_eq!(cwd(), std::fs::canonicalize(other.path()).unwrap());
}

/// A file name that is not UTF-8, on the command line or escaped in the
/// configuration file, stops the start with a clear error: never a panic,
/// never a different name (which would be a fresh, empty AOF).
#[test]
fn a_name_that_is_not_utf8_stops_the_start_cleanly() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    // The server started with `first` before its port and directory and
    // `last` after them must fail with the UTF-8 error, without a panic.
    let refused = |first: &[&OsStr], last: &[&OsStr]| {
        let out = common::output_within(
            Command::new(env!("CARGO_BIN_EXE_kvstore"))
                .args(first)
                .args(["--port", &common::free_port().to_string(), "--dir"])
                .arg(dir.path())
                .args(last)
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
            Duration::from_secs(10),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("not valid UTF-8"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refused(
        &[],
        &[
            OsStr::new("--appendfilename"),
            OsStr::from_bytes(b"ab\xe9.aof"),
        ],
    );
    let conf = dir.path().join("kvstore.conf");
    std::fs::write(&conf, "appendfilename \"ab\\xe9.aof\"\n").unwrap();
    refused(&[conf.as_os_str()], &[]);
    assert!(!dir.path().join("appendonlydir").exists());
}
