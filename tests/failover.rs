//! FAILOVER (Redis 7.0's coordinated failover): a master hands its place
//! to a replica once it has acknowledged the whole stream, writes paused
//! meanwhile, and nothing written is lost; its checks, TIMEOUT, FORCE and
//! ABORT. The servers are kvstore; a replica is stopped with SIGSTOP where
//! it must not catch up.

mod common;

use std::time::Duration;

use common::{start_kvstore, Conn, ServerProcess};

fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

fn signal(server: &ServerProcess, sig: libc::c_int) {
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(server.child.id() as libc::pid_t, sig) };
}

/// The replica has the master's whole stream.
fn wait_in_sync(master: &mut Conn, replica: &mut Conn) {
    common::wait_for("the replica to catch up", 20, || {
        replica.info_field("replication", "master_link_status") == "up"
            && replica.info_field("replication", "slave_repl_offset")
                == master.info_field("replication", "master_repl_offset")
    });
}

fn state(c: &mut Conn) -> String {
    c.info_field("replication", "master_failover_state")
}

/// A master and two replicas, in sync, with some data.
fn three_nodes() -> (Vec<ServerProcess>, Vec<Conn>) {
    let servers: Vec<ServerProcess> = (0..3).map(|_| start_kvstore(&[])).collect();
    let mut conns: Vec<Conn> = servers.iter().map(|s| Conn::connect(s.port)).collect();
    for i in 0..100 {
        conns[0].cmd_str(&["SET", &format!("k{i}"), &i.to_string()]);
    }
    let port = servers[0].port.to_string();
    for r in 1..3 {
        conns[r].cmd_str(&["REPLICAOF", "127.0.0.1", &port]);
        let (m, rest) = conns.split_at_mut(1);
        wait_in_sync(&mut m[0], &mut rest[r - 1]);
    }
    (servers, conns)
}

#[test]
fn failover_checks_its_arguments_and_its_state() {
    let lone = start_kvstore(&[]);
    let mut c = Conn::connect(lone.port);
    assert_eq!(
        text(&c.cmd_str(&["FAILOVER"])),
        "-ERR FAILOVER requires connected replicas.\r\n"
    );
    assert_eq!(
        text(&c.cmd_str(&["FAILOVER", "ABORT"])),
        "-ERR No failover in progress.\r\n"
    );
    let (servers, mut conns) = three_nodes();
    let port = servers[1].port.to_string();
    assert_eq!(
        text(&conns[0].cmd_str(&["FAILOVER", "TO", "invalidhost", &port])),
        "-ERR FAILOVER target HOST and PORT is not a replica.\r\n"
    );
    assert_eq!(
        text(&conns[0].cmd_str(&["FAILOVER", "TO", "127.0.0.1", "invalidport"])),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert!(
        text(&conns[0].cmd_str(&["FAILOVER", "FORCE", "TIMEOUT", "100"]))
            .starts_with("-ERR FAILOVER with force option requires both")
    );
    assert!(
        text(&conns[0].cmd_str(&["FAILOVER", "TO", "127.0.0.1", &port, "FORCE"]))
            .starts_with("-ERR FAILOVER with force option requires both")
    );
    assert_eq!(
        text(&conns[0].cmd_str(&["FAILOVER", "TIMEOUT", "0"])),
        "-ERR FAILOVER timeout must be greater than 0\r\n"
    );
    assert_eq!(
        text(&conns[0].cmd_str(&["FAILOVER", "BOGUS"])),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        text(&conns[1].cmd_str(&["FAILOVER", "TO", "127.0.0.1", &port])),
        "-ERR FAILOVER is not valid when server is a replica.\r\n"
    );
    assert_eq!(state(&mut conns[0]), "no-failover");
}

#[test]
fn failover_to_a_replica_hands_over_the_master_role_without_a_full_sync() {
    let (servers, mut conns) = three_nodes();
    let target = servers[1].port.to_string();
    assert_eq!(
        conns[0].cmd_str(&["FAILOVER", "TO", "127.0.0.1", &target]),
        b"+OK\r\n"
    );
    common::wait_for("the failover to end", 10, || {
        state(&mut conns[0]) == "no-failover"
            && conns[0].info_field("replication", "master_link_status") == "up"
    });
    assert_eq!(conns[0].info_field("replication", "role"), "slave");
    assert_eq!(conns[1].info_field("replication", "role"), "master");
    // The old master continued the history: a partial resync, no dump.
    assert_eq!(conns[1].info_field("stats", "sync_partial_ok"), "1");
    assert_eq!(conns[1].info_field("stats", "sync_full"), "0");
    // The other replica follows the new master, with a partial resync too.
    conns[2].cmd_str(&["REPLICAOF", "127.0.0.1", &target]);
    conns[1].cmd_str(&["SET", "after", "failover"]);
    let (first, rest) = conns.split_at_mut(1);
    let (new_master, other) = rest.split_at_mut(1);
    wait_in_sync(&mut new_master[0], &mut first[0]);
    wait_in_sync(&mut new_master[0], &mut other[0]);
    assert_eq!(new_master[0].info_field("stats", "sync_full"), "0");
    for c in conns.iter_mut() {
        assert_eq!(c.cmd_str(&["DBSIZE"]), b":101\r\n");
        assert_eq!(c.cmd_str(&["GET", "after"]), b"$8\r\nfailover\r\n");
    }
}

#[test]
fn failover_waits_with_writes_paused_and_can_be_aborted_or_time_out() {
    let (servers, mut conns) = three_nodes();
    let target = servers[1].port.to_string();
    // The target never acknowledges: the failover waits, writes held.
    signal(&servers[1], libc::SIGSTOP);
    conns[0].cmd_str(&["SET", "case", "1"]);
    assert_eq!(
        conns[0].cmd_str(&["FAILOVER", "TO", "127.0.0.1", &target, "TIMEOUT", "60000"]),
        b"+OK\r\n"
    );
    assert_eq!(state(&mut conns[0]), "waiting-for-sync");
    assert_eq!(
        text(&conns[0].cmd_str(&["REPLICAOF", "NO", "ONE"])),
        "-ERR REPLICAOF not allowed while failing over.\r\n"
    );
    let mut writer = Conn::connect(servers[0].port);
    writer.send(&[b"SET", b"held", b"1"]);
    assert_eq!(conns[0].cmd_str(&["GET", "case"]), b"$1\r\n1\r\n");
    let (early, _) = writer.read_available(Duration::from_millis(300));
    assert!(early.is_empty(), "a write ran during the failover's pause");
    assert_eq!(conns[0].cmd_str(&["FAILOVER", "ABORT"]), b"+OK\r\n");
    assert_eq!(state(&mut conns[0]), "no-failover");
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    // Without FORCE, a timeout gives up.
    conns[0].cmd_str(&["FAILOVER", "TO", "127.0.0.1", &target, "TIMEOUT", "500"]);
    common::wait_for("the failover to time out", 5, || {
        state(&mut conns[0]) == "no-failover"
    });
    assert_eq!(conns[0].info_field("replication", "role"), "master");
    signal(&servers[1], libc::SIGCONT);
    let (m, rest) = conns.split_at_mut(1);
    wait_in_sync(&mut m[0], &mut rest[0]);
    assert_eq!(m[0].info_field("stats", "sync_full"), "2");
    assert_eq!(rest[0].cmd_str(&["GET", "held"]), b"$1\r\n1\r\n");
}

#[test]
fn failover_with_force_switches_after_the_timeout() {
    let (servers, mut conns) = three_nodes();
    let target = servers[1].port.to_string();
    signal(&servers[1], libc::SIGSTOP);
    conns[0].cmd_str(&["SET", "case", "2"]);
    assert_eq!(
        conns[0].cmd_str(&[
            "FAILOVER",
            "TO",
            "127.0.0.1",
            &target,
            "TIMEOUT",
            "100",
            "FORCE"
        ]),
        b"+OK\r\n"
    );
    common::wait_for("the forced switch", 5, || {
        state(&mut conns[0]) == "failover-in-progress"
    });
    // Never two masters: the old one follows the target already.
    assert_eq!(conns[0].info_field("replication", "role"), "slave");
    signal(&servers[1], libc::SIGCONT);
    common::wait_for("the failover to end", 10, || {
        state(&mut conns[0]) == "no-failover"
    });
    assert_eq!(conns[1].info_field("replication", "role"), "master");
    let (first, rest) = conns.split_at_mut(1);
    wait_in_sync(&mut rest[0], &mut first[0]);
    assert_eq!(first[0].cmd_str(&["GET", "case"]), b"$1\r\n2\r\n");
    assert_eq!(rest[0].cmd_str(&["GET", "case"]), b"$1\r\n2\r\n");
}
