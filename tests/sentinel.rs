//! Failover under redis-sentinel 7.0: three sentinels watch a kvstore
//! master and two kvstore replicas; the master is killed with SIGKILL; a
//! replica is promoted (REPLICAOF NO ONE, CONFIG REWRITE), the other
//! follows it, clients asking the sentinels find the new master, and the
//! acknowledged writes are there.

mod common;

use common::{Conn, KillOnDrop};

/// kvstore on a config file of its own (the promotion rewrites it).
fn start_node(dir: &std::path::Path, args: &[&str]) -> (KillOnDrop, u16) {
    let conf = dir.join("kvstore.conf");
    std::fs::write(&conf, "").unwrap();
    let (child, port, _) = common::start_kvstore_with_file(
        &conf,
        dir,
        &[&["--save", "", "--logfile", "kvstore.log"], args].concat(),
    );
    (child, port)
}

#[test]
fn sentinels_fail_over_a_kvstore_master_to_a_kvstore_replica() {
    let Some(redis) = common::require_tool("redis-server") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
    let (master, mport) = start_node(dirs[0].path(), &[]);
    let mport_s = mport.to_string();
    let (_r1, p1) = start_node(dirs[1].path(), &["--replicaof", "127.0.0.1", &mport_s]);
    let (_r2, p2) = start_node(dirs[2].path(), &["--replicaof", "127.0.0.1", &mport_s]);
    let mut m = Conn::connect(mport);
    common::wait_for("both replicas online", 20, || {
        m.info_field("replication", "connected_slaves") == "2"
    });
    // Sentinels, each with a config file it may rewrite.
    let mut sentinels = Vec::new();
    let mut sports = Vec::new();
    for d in &dirs[3..] {
        let (sentinel, port) = common::start_sentinel(
            &redis,
            d.path(),
            &format!(
                "sentinel monitor mymaster 127.0.0.1 {mport} 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n"
            ),
        );
        sentinels.push(sentinel);
        sports.push(port);
    }
    let mut s = Conn::connect(sports[0]);
    // The sentinels find the replicas (from INFO) and each other.
    common::wait_for(
        "the sentinels to know the replicas and each other",
        30,
        || {
            let master = String::from_utf8_lossy(&s.cmd_str(&["SENTINEL", "MASTER", "mymaster"]))
                .to_string();
            master.contains("num-slaves\r\n$1\r\n2")
                && master.contains("num-other-sentinels\r\n$1\r\n2")
        },
    );
    // Acknowledged writes: WAIT says both replicas have them.
    for i in 0..100 {
        m.cmd_str(&["SET", &format!("k{i}"), &i.to_string()]);
    }
    assert_eq!(m.cmd_str(&["WAIT", "2", "5000"]), b":2\r\n");
    drop(master);
    // A replica is promoted; the sentinels name it.
    let mut new_port = 0;
    common::wait_for("a failover", 60, || {
        let addr = s.cmd_str(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
        let text = String::from_utf8_lossy(&addr).to_string();
        for p in [p1, p2] {
            if text.contains(&format!("\r\n{p}\r\n")) {
                new_port = p;
                return true;
            }
        }
        false
    });
    let other = if new_port == p1 { p2 } else { p1 };
    let mut nm = Conn::connect(new_port);
    assert_eq!(nm.info_field("replication", "role"), "master");
    // Sentinel reconfigures the follower with CLIENT KILL TYPE normal in the
    // same transaction: ask on a fresh connection each time, and use one
    // made after it is done.
    // (A connection made just before the kill is closed by it: not yet.)
    common::wait_for("the other replica to follow the new master", 60, || {
        let mut f = Conn::connect(other);
        let Ok(reply) = f.try_cmd_str(&["INFO", "replication"]) else {
            return false;
        };
        let text = String::from_utf8_lossy(&reply);
        text.contains(&format!("master_port:{new_port}\r\n"))
            && text.contains("master_link_status:up\r\n")
    });
    let mut follower = Conn::connect(other);
    for i in 0..100 {
        assert_eq!(
            nm.cmd_str(&["GET", &format!("k{i}")]),
            format!("${}\r\n{i}\r\n", i.to_string().len()).into_bytes()
        );
    }
    // The new master takes writes and its replica gets them.
    assert_eq!(nm.cmd_str(&["SET", "after", "failover"]), b"+OK\r\n");
    common::wait_for("the write to reach the follower", 10, || {
        follower.cmd_str(&["GET", "after"]) == b"$8\r\nfailover\r\n"
    });
    // The promoted one's config file says it is a master now.
    let promoted_dir = if new_port == p1 {
        dirs[1].path()
    } else {
        dirs[2].path()
    };
    let conf = std::fs::read_to_string(promoted_dir.join("kvstore.conf")).unwrap();
    assert!(!conf.contains("replicaof"), "{conf}");
}

/// Redis's documented ACL setup for sentinel: the nodes require a password,
/// a sentinel logs in as `sentinel auth-user`/`auth-pass` with only the
/// commands it needs, replicas log in as `masteruser`. The sentinel sees
/// the master and its replica, and a forced failover (MULTI, REPLICAOF NO
/// ONE, CONFIG REWRITE, CLIENT KILL, EXEC as that user) promotes the
/// replica.
#[test]
fn sentinel_logs_in_as_its_acl_user() {
    let Some(redis) = common::require_tool("redis-server") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let users = "requirepass adminpass\n\
        user sentinel-user on >sentpass allchannels +multi +slaveof +ping +exec +subscribe +config|rewrite +role +publish +info +client|setname +client|kill +script|kill\n\
        user replica-user on >replpass +psync +replconf +ping\n\
        masteruser replica-user\nmasterauth replpass\n";
    let node = |dir: &std::path::Path, extra: &[&str]| {
        let conf = dir.join("kvstore.conf");
        std::fs::write(&conf, users).unwrap();
        let (child, port, _) = common::start_kvstore_with_file(
            &conf,
            dir,
            &[&["--save", "", "--logfile", "kvstore.log"], extra].concat(),
        );
        (child, port)
    };
    let (_master, mport) = node(dirs[0].path(), &[]);
    let mport_s = mport.to_string();
    let (_replica, rport) = node(dirs[1].path(), &["--replicaof", "127.0.0.1", &mport_s]);
    let mut m = Conn::connect(mport);
    assert_eq!(m.cmd_str(&["AUTH", "adminpass"]), b"+OK\r\n");
    common::wait_for("the replica to log in and sync", 20, || {
        m.info_field("replication", "connected_slaves") == "1"
    });
    let (_sentinel, sport) = common::start_sentinel(
        &redis,
        dirs[2].path(),
        &format!(
            "sentinel monitor mymaster 127.0.0.1 {mport} 1\nsentinel auth-user mymaster sentinel-user\nsentinel auth-pass mymaster sentpass\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n"
        ),
    );
    let mut s = Conn::connect(sport);
    common::wait_for("the sentinel to see the master and its replica", 30, || {
        let master =
            String::from_utf8_lossy(&s.cmd_str(&["SENTINEL", "MASTER", "mymaster"])).to_string();
        master.contains("flags\r\n$6\r\nmaster\r\n") && master.contains("num-slaves\r\n$1\r\n1")
    });
    // The sentinel's own login is what the master's clients show.
    let clients = String::from_utf8_lossy(&m.cmd_str(&["CLIENT", "LIST"])).to_string();
    assert!(clients.contains("user=sentinel-user"), "{clients}");
    assert!(clients.contains("user=replica-user"), "{clients}");
    // A failover as the sentinel user promotes the replica.
    common::wait_for("the sentinel to know the replica as good", 30, || {
        s.cmd_str(&["SENTINEL", "FAILOVER", "mymaster"]) == b"+OK\r\n"
    });
    common::wait_for("the replica to be promoted", 30, || {
        let addr = s.cmd_str(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
        String::from_utf8_lossy(&addr).contains(&format!("\r\n{rport}\r\n"))
    });
    let mut r = Conn::connect(rport);
    assert_eq!(r.cmd_str(&["AUTH", "adminpass"]), b"+OK\r\n");
    common::wait_for("the promoted replica to say it is master", 10, || {
        r.info_field("replication", "role") == "master"
    });
}
