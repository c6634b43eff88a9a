//! Replication against real Redis: redis-server 7.0 replicas of kvstore
//! (full sync, the command stream of every type, expiry and MULTI, partial
//! resync after the link is cut, several replicas sharing one snapshot, a
//! replica arriving during another child), and what a master must refuse.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{start_kvstore, Conn};

/// A redis-server replica of `master_port`, in its own directory.
fn start_redis_replica(master_port: u16) -> Option<common::ServerProcess> {
    common::start_redis(&["--replicaof", "127.0.0.1", &master_port.to_string()])
}

/// The replica has the master's whole stream: link up and offsets equal.
fn wait_in_sync(master: &mut Conn, replica: &mut Conn) {
    common::wait_for("the replica to catch up", 20, || {
        replica.info_field("replication", "master_link_status") == "up"
            && replica.info_field("replication", "slave_repl_offset")
                == master.info_field("replication", "master_repl_offset")
    });
}

fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).to_string()
}

/// Every key of every database: its type, its whole value (sorted where
/// the order is not defined) and whether it has a TTL.
fn dataset(c: &mut Conn) -> BTreeMap<(usize, Vec<u8>), (String, String, bool)> {
    let mut out = BTreeMap::new();
    for db in 0..16 {
        c.cmd_str(&["SELECT", &db.to_string()]);
        let (_, keys) = common::aggregate_items(&c.cmd_str(&["KEYS", "*"])).unwrap();
        for k in keys {
            let key = common::bulk_payload(&k).unwrap().to_vec();
            let ty = text(&c.cmd(&[b"TYPE", &key]));
            let value = match ty.as_str() {
                "+string\r\n" => text(&c.cmd(&[b"GET", &key])),
                "+list\r\n" => text(&c.cmd(&[b"LRANGE", &key, b"0", b"-1"])),
                "+set\r\n" => {
                    let (_, mut m) = common::aggregate_items(&c.cmd(&[b"SMEMBERS", &key])).unwrap();
                    m.sort();
                    format!("{m:?}")
                }
                "+hash\r\n" => {
                    let (_, items) = common::aggregate_items(&c.cmd(&[b"HGETALL", &key])).unwrap();
                    let mut pairs: Vec<Vec<u8>> = items.chunks(2).map(|p| p.concat()).collect();
                    pairs.sort();
                    format!("{pairs:?}")
                }
                "+zset\r\n" => text(&c.cmd(&[b"ZRANGE", &key, b"0", b"-1", b"WITHSCORES"])),
                other => panic!("unexpected type {other}"),
            };
            let ttl = c.cmd(&[b"PTTL", &key]) != b":-1\r\n";
            out.insert((db, key), (ty, value, ttl));
        }
    }
    c.cmd_str(&["SELECT", "0"]);
    out
}

/// Writes of every type, in several databases, with TTLs, a MULTI, and a
/// key that expires while the stream runs.
fn write_everything(c: &mut Conn, tag: &str) {
    let k = |s: &str| format!("{tag}:{s}");
    for db in ["0", "3"] {
        c.cmd_str(&["SELECT", db]);
        c.cmd_str(&["SET", &k("s"), "value"]);
        c.cmd_str(&["SET", &k("ttl"), "v", "EX", "1000"]);
        c.cmd_str(&["INCRBYFLOAT", &k("f"), "1.5"]);
        c.cmd_str(&["RPUSH", &k("l"), "a", "b", "c"]);
        c.cmd_str(&["LPOP", &k("l")]);
        c.cmd_str(&["SADD", &k("set"), "x", "y", "1", "2"]);
        c.cmd_str(&["SPOP", &k("set")]);
        c.cmd_str(&["HSET", &k("h"), "f1", "v1", "f2", "v2"]);
        c.cmd_str(&["HINCRBY", &k("h"), "n", "5"]);
        c.cmd_str(&["ZADD", &k("z"), "1", "one", "2.5", "two"]);
        c.cmd_str(&["ZINCRBY", &k("z"), "3", "one"]);
        c.cmd_str(&["MULTI"]);
        c.cmd_str(&["INCR", &k("counter")]);
        c.cmd_str(&["EXPIRE", &k("counter"), "500"]);
        c.cmd_str(&["EXEC"]);
        c.cmd_str(&["SET", &k("gone"), "v", "PX", "1"]);
    }
    c.cmd_str(&["SELECT", "0"]);
    std::thread::sleep(Duration::from_millis(5));
    // A read finds the key expired: its DEL goes down the stream.
    c.cmd_str(&["GET", &k("gone")]);
    c.cmd_str(&["SWAPDB", "0", "5"]);
    c.cmd_str(&["SWAPDB", "0", "5"]);
}

#[test]
fn a_redis_replica_syncs_fully_follows_the_stream_and_resyncs_partially() {
    // Diskless (the default) and from the dump file.
    for diskless in ["yes", "no"] {
        redis_replica_of_kvstore(diskless);
    }
}

fn redis_replica_of_kvstore(diskless: &str) {
    let kv = start_kvstore(&["--repl-diskless-sync", diskless]);
    let mut m = Conn::connect(kv.port);
    write_everything(&mut m, "before");
    let Some(replica) = start_redis_replica(kv.port) else {
        return;
    };
    let mut r = Conn::connect(replica.port);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(m.info_field("stats", "sync_full"), "1");
    write_everything(&mut m, "streamed");
    wait_in_sync(&mut m, &mut r);
    let ours = dataset(&mut m);
    assert!(ours.len() > 20, "{ours:?}");
    assert_eq!(dataset(&mut r), ours);
    // The master's view of its replica.
    let role = text(&m.cmd_str(&["ROLE"]));
    assert!(role.starts_with("*3\r\n$6\r\nmaster\r\n:"), "{role}");
    assert!(
        role.contains(&format!(
            "${}\r\n{}\r\n",
            replica.port.to_string().len(),
            replica.port
        )),
        "{role}"
    );
    let line = m.info_field("replication", "slave0");
    assert!(
        line.starts_with(&format!(
            "ip=127.0.0.1,port={},state=online,offset=",
            replica.port
        )),
        "{line}"
    );
    // WAIT: the replica acknowledges the client's write (asked with
    // REPLCONF GETACK); more replicas than there are time out with the
    // count that got there.
    assert_eq!(m.cmd_str(&["SET", "waited", "1"]), b"+OK\r\n");
    assert_eq!(m.cmd_str(&["WAIT", "1", "5000"]), b":1\r\n");
    let started = Instant::now();
    assert_eq!(m.cmd_str(&["WAIT", "2", "300"]), b":1\r\n");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(m.cmd_str(&["WAIT", "0", "0"]), b":1\r\n");
    assert_eq!(
        m.cmd_str(&["WAIT", "1", "-1"]),
        b"-ERR timeout is negative\r\n"
    );
    // Cut the link on the replica's side: it comes back with PSYNC and
    // continues from the backlog.
    r.cmd_str(&["CLIENT", "KILL", "TYPE", "master"]);
    write_everything(&mut m, "after");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "1");
    assert_eq!(m.info_field("stats", "sync_full"), "1");
    assert_eq!(dataset(&mut r), dataset(&mut m));
}

#[test]
fn replicas_arriving_together_or_during_another_save_all_sync() {
    // A slow snapshot (1 ms a key) keeps the child running while replicas
    // arrive.
    let kv = start_kvstore(&["--rdb-key-save-delay", "1000"]);
    let mut m = Conn::connect(kv.port);
    for i in 0..300 {
        m.cmd_str(&["SET", &format!("k{i}"), &i.to_string()]);
    }
    assert_eq!(m.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
    let Some(a) = start_redis_replica(kv.port) else {
        return;
    };
    let b = start_redis_replica(kv.port).unwrap();
    // Both wait for the BGSAVE that was not theirs, then share one.
    std::thread::sleep(Duration::from_millis(200));
    let states = m.info_field("replication", "slave0");
    assert!(states.contains("state=wait_bgsave"), "{states}");
    for i in 0..50 {
        m.cmd_str(&["INCR", &format!("k{i}")]);
    }
    let mut ra = Conn::connect(a.port);
    let mut rb = Conn::connect(b.port);
    wait_in_sync(&mut m, &mut ra);
    wait_in_sync(&mut m, &mut rb);
    assert_eq!(m.info_field("stats", "sync_full"), "2");
    let ours = dataset(&mut m);
    assert_eq!(dataset(&mut ra), ours);
    assert_eq!(dataset(&mut rb), ours);
    assert_eq!(m.info_field("persistence", "rdb_last_bgsave_status"), "ok");
}

#[test]
fn a_master_refuses_what_a_replica_may_not_do() {
    let kv = start_kvstore(&[]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["REPLCONF", "listening-port"]),
        b"-ERR syntax error\r\n"
    );
    assert_eq!(
        c.cmd_str(&["REPLCONF", "nosuch", "1"]),
        b"-ERR Unrecognized REPLCONF option: nosuch\r\n"
    );
    assert_eq!(
        c.cmd_str(&[
            "REPLCONF",
            "listening-port",
            "6380",
            "capa",
            "eof",
            "capa",
            "psync2"
        ]),
        b"+OK\r\n"
    );
    // Pipelined behind a command whose reply is not written yet.
    c.send_raw(b"PING\r\nPSYNC ? -1\r\n");
    assert_eq!(c.read_reply(), b"+PONG\r\n");
    assert_eq!(
        c.read_reply(),
        b"-ERR SYNC and PSYNC are invalid with pending output\r\n"
    );
    assert_eq!(
        c.cmd_str(&["PSYNC", "?", "x"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    // A real PSYNC: +FULLRESYNC with a fresh replication id, then the dump.
    c.send(&[b"PSYNC", b"?", b"-1"]);
    let first = c.read_line();
    assert!(first.starts_with("+FULLRESYNC "), "{first}");
    let id = first.split(' ').nth(1).unwrap().to_string();
    assert_eq!(id.len(), 40);
    let mut admin = Conn::connect(kv.port);
    assert_eq!(admin.info_field("replication", "master_replid"), id);
    // Keepalive newlines may come before the payload; it capa eof, so the
    // dump is streamed between two copies of a 40-byte mark.
    let mut header = c.read_line();
    while header.is_empty() {
        header = c.read_line();
    }
    let mark = header
        .strip_prefix("$EOF:")
        .expect("a diskless transfer")
        .to_string();
    assert_eq!(mark.len(), 40);
    let mut rdb = Vec::new();
    while !rdb.ends_with(mark.as_bytes()) {
        let mut byte = [0u8; 1];
        std::io::Read::read_exact(&mut c.reader, &mut byte).unwrap();
        rdb.push(byte[0]);
    }
    assert!(rdb.starts_with(b"REDIS0010"));
    // The stream waits for the replica's first ACK.
    c.send(&[b"REPLCONF", b"ACK", b"0"]);
    assert!(
        rdb.windows(7).any(|w| w == b"repl-id"),
        "the dump names its replication id"
    );
    // The stream: a write on the master reaches it, after a SELECT.
    admin.cmd_str(&["SET", "k", "v"]);
    let select = c.read_reply();
    assert_eq!(select, b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n");
    assert_eq!(c.read_reply(), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
    // A replica may not touch the keyspace, and its link carries no
    // replies: the refusal closes it (Redis logs both).
    c.send(&[b"GET", b"k"]);
    let mut byte = [0u8; 1];
    assert_eq!(
        std::io::Read::read(&mut c.reader, &mut byte).unwrap_or(0),
        0,
        "the replica's link stays open after a command that answered"
    );
    assert_eq!(admin.info_field("replication", "connected_slaves"), "0");
    // PSYNC with an id the master never had, or an offset outside the
    // backlog: a full sync.
    let mut d = Conn::connect(kv.port);
    d.send(&[b"PSYNC", b"0123456789012345678901234567890123456789", b"1"]);
    assert!(d.read_line().starts_with("+FULLRESYNC "));
    assert_eq!(admin.info_field("stats", "sync_partial_err"), "1");
    let mut e = Conn::connect(kv.port);
    e.send(&[b"PSYNC", id.as_bytes(), b"999999"]);
    assert!(e.read_line().starts_with("+FULLRESYNC "));
    // In the backlog: +CONTINUE and the missing bytes (the SET is the last
    // 27 bytes of the stream; the offset names the first byte wanted).
    let offset: i64 = admin
        .info_field("replication", "master_repl_offset")
        .parse()
        .unwrap();
    let mut f = Conn::connect(kv.port);
    f.cmd_str(&["REPLCONF", "capa", "psync2"]);
    f.send(&[
        b"PSYNC",
        id.as_bytes(),
        (offset - 26).to_string().as_bytes(),
    ]);
    assert_eq!(f.read_line(), format!("+CONTINUE {id}"));
    assert_eq!(f.read_reply(), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
    assert_eq!(admin.info_field("stats", "sync_partial_ok"), "1");
}

/// A redis-server master (diskless sync without delay, so tests are quick).
fn start_redis_master() -> Option<common::ServerProcess> {
    common::start_redis(&[
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
    ])
}

#[test]
fn kvstore_replicates_a_redis_master_and_resyncs_partially() {
    let Some(redis) = start_redis_master() else {
        return;
    };
    let mut m = Conn::connect(redis.port);
    write_everything(&mut m, "before");
    let kv = start_kvstore(&["--replicaof", "127.0.0.1", &redis.port.to_string()]);
    let mut r = Conn::connect(kv.port);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(
        r.info_field("replication", "master_replid"),
        m.info_field("replication", "master_replid")
    );
    write_everything(&mut m, "streamed");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(dataset(&mut r), dataset(&mut m));
    // WAIT on the master: its GETACK is answered with our offset.
    m.cmd_str(&["SET", "acked", "1"]);
    assert_eq!(m.cmd_str(&["WAIT", "1", "5000"]), b":1\r\n");
    // A replica is read-only and says who its master is.
    assert_eq!(
        r.cmd_str(&["SET", "x", "1"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    let role = text(&r.cmd_str(&["ROLE"]));
    let want = format!(
        "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{}\r\n$9\r\nconnected\r\n:",
        redis.port
    );
    assert!(role.starts_with(&want), "{role}");
    // The link is cut on our side while the master's stream has database 3
    // selected: PSYNC continues from Redis's backlog, in that database.
    m.cmd_str(&["SELECT", "3"]);
    m.cmd_str(&["SET", "in-three", "before the cut"]);
    wait_in_sync(&mut m, &mut r);
    r.cmd_str(&["CLIENT", "KILL", "TYPE", "master"]);
    m.cmd_str(&["SET", "also-in-three", "after the cut"]);
    m.cmd_str(&["SELECT", "0"]);
    write_everything(&mut m, "after");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "1");
    assert_eq!(dataset(&mut r), dataset(&mut m));
}

#[test]
fn a_replica_does_not_expire_keys_its_master_has_not_deleted() {
    let Some(redis) = start_redis_master() else {
        return;
    };
    let mut m = Conn::connect(redis.port);
    // The master will not expire it on its own.
    assert_eq!(m.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    let kv = start_kvstore(&["--replicaof", "127.0.0.1", &redis.port.to_string()]);
    let mut r = Conn::connect(kv.port);
    wait_in_sync(&mut m, &mut r);
    m.cmd_str(&["SET", "k", "v", "PX", "100"]);
    wait_in_sync(&mut m, &mut r);
    std::thread::sleep(Duration::from_millis(200));
    // Logically expired: reads miss, but the key stays until the master
    // says otherwise.
    assert_eq!(r.cmd_str(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(r.cmd_str(&["EXISTS", "k"]), b":0\r\n");
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":1\r\n");
    // The master's lazy expiry sends a DEL.
    assert_eq!(m.cmd_str(&["GET", "k"]), b"$-1\r\n");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":0\r\n");
}

/// Turns whose writes span several of the backlog's blocks and switch
/// databases inside a transaction reach a Redis replica whole: the stream
/// goes into the blocks a piece at a time.
#[test]
fn big_turns_across_databases_and_blocks_reach_a_redis_replica() {
    let kv = start_kvstore(&["--repl-backlog-size", "16384"]);
    let mut m = Conn::connect(kv.port);
    let Some(replica) = start_redis_replica(kv.port) else {
        return;
    };
    let mut r = Conn::connect(replica.port);
    wait_in_sync(&mut m, &mut r);
    let big = |n: usize, fill: u8| vec![fill; n];
    // One transaction: values of 16 KB and more, a SELECT between them.
    m.cmd_str(&["MULTI"]);
    for (i, db) in ["0", "3", "0", "7"].iter().enumerate() {
        m.cmd_str(&["SELECT", db]);
        let key = format!("tx:{i}");
        m.cmd(&[
            b"SET",
            key.as_bytes(),
            &big(16384 + i * 5000, b'a' + i as u8),
        ]);
        m.cmd(&[b"RPUSH", b"tx:list", &big(20000, b'l'), b"small"]);
    }
    let exec = m.cmd_str(&["EXEC"]);
    assert!(exec.starts_with(b"*12\r\n"), "{}", text(&exec));
    // One pipeline: a turn of big writes in three databases.
    for i in 0..12 {
        let db = ["1", "0", "4"][i % 3].to_string();
        m.send(&[b"SELECT", db.as_bytes()]);
        let key = format!("pipe:{i}");
        m.send(&[b"SET", key.as_bytes(), &big(9000 + i * 700, b'p')]);
    }
    for _ in 0..24 {
        assert!(m.read_reply().starts_with(b"+OK"));
    }
    m.cmd_str(&["SELECT", "0"]);
    wait_in_sync(&mut m, &mut r);
    let want = dataset(&mut m);
    assert_eq!(want.len(), 4 + 3 + 12, "keys on the master");
    assert_eq!(dataset(&mut r), want);
}

#[test]
fn kvstore_replicates_kvstore_in_a_chain_and_promotion_keeps_the_history() {
    let a = start_kvstore(&[]);
    let mut ca = Conn::connect(a.port);
    write_everything(&mut ca, "before");
    // B pings its own replicas every second: a replica adds nothing to the
    // stream it passes on, so its offset stays its master's.
    let b = start_kvstore(&[
        "--replicaof",
        "127.0.0.1",
        &a.port.to_string(),
        "--repl-ping-replica-period",
        "1",
    ]);
    let mut cb = Conn::connect(b.port);
    wait_in_sync(&mut ca, &mut cb);
    // A's stream has database 3 selected when C makes its full sync from B:
    // what follows (without a SELECT) goes to database 3 on C too.
    ca.cmd_str(&["SELECT", "3"]);
    ca.cmd_str(&["SET", "three", "before C"]);
    wait_in_sync(&mut ca, &mut cb);
    // C follows B: B passes A's stream on as it came.
    let Some(c) = start_redis_replica(b.port) else {
        return;
    };
    let mut cc = Conn::connect(c.port);
    wait_in_sync(&mut cb, &mut cc);
    ca.cmd_str(&["SET", "three-too", "after C"]);
    ca.cmd_str(&["SELECT", "0"]);
    std::thread::sleep(Duration::from_millis(2500));
    wait_in_sync(&mut ca, &mut cb);
    wait_in_sync(&mut cb, &mut cc);
    assert_eq!(dataset(&mut cc), dataset(&mut ca));
    write_everything(&mut ca, "streamed");
    wait_in_sync(&mut ca, &mut cb);
    wait_in_sync(&mut cb, &mut cc);
    let want = dataset(&mut ca);
    assert_eq!(dataset(&mut cb), want);
    assert_eq!(dataset(&mut cc), want);
    // B becomes a master: A's id is its second id; C, disconnected so that
    // it learns the new id, continues with B by PSYNC.
    let a_id = ca.info_field("replication", "master_replid");
    assert_eq!(cb.cmd_str(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(cb.info_field("replication", "master_replid2"), a_id);
    assert_ne!(cb.info_field("replication", "master_replid"), a_id);
    write_everything(&mut cb, "promoted");
    wait_in_sync(&mut cb, &mut cc);
    assert_eq!(cb.info_field("stats", "sync_partial_ok"), "1");
    assert_eq!(cb.info_field("stats", "sync_full"), "1");
    assert_eq!(dataset(&mut cc), dataset(&mut cb));
    // REPLICAOF's answers.
    assert_eq!(
        cb.cmd_str(&["REPLICAOF", "127.0.0.1", "notaport"]),
        b"-ERR Invalid master port\r\n"
    );
    assert_eq!(cb.cmd_str(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
}

#[test]
fn a_replica_restarted_from_its_dump_continues_with_psync() {
    replica_restarted_from_its_dump("SAVE");
}

#[test]
fn a_replica_restarted_from_its_bgsave_dump_continues_with_psync() {
    // BGSAVE's child records the history too (it once wrote none).
    replica_restarted_from_its_dump("BGSAVE");
}

fn replica_restarted_from_its_dump(save: &str) {
    let Some(redis) = start_redis_master() else {
        return;
    };
    let mut m = Conn::connect(redis.port);
    write_everything(&mut m, "before");
    let dir = tempfile::tempdir().unwrap();
    let master_port = redis.port.to_string();
    let kv = common::start_kvstore_in(dir, &["--replicaof", "127.0.0.1", &master_port]);
    let mut r = Conn::connect(kv.port);
    wait_in_sync(&mut m, &mut r);
    m.cmd_str(&["SELECT", "5"]);
    m.cmd_str(&["SET", "in-five", "1"]);
    wait_in_sync(&mut m, &mut r);
    // The dump records the master's id, the offset and the stream's
    // database; the replica stops and starts again from it.
    if save == "SAVE" {
        assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");
    } else {
        assert_eq!(r.cmd_str(&["BGSAVE"]), b"+Background saving started\r\n");
        common::wait_for("the BGSAVE to end", 20, || {
            r.info_field("persistence", "rdb_bgsave_in_progress") == "0"
        });
        assert_eq!(r.info_field("persistence", "rdb_last_bgsave_status"), "ok");
    }
    let dir = {
        let mut kv = kv;
        let _ = r.try_cmd_str(&["SHUTDOWN", "NOSAVE"]);
        let _ = kv.child.wait();
        std::mem::replace(&mut kv.dir, tempfile::tempdir().unwrap())
    };
    m.cmd_str(&["SET", "while-down", "1"]);
    let kv = common::start_kvstore_in(dir, &["--replicaof", "127.0.0.1", &master_port]);
    let mut r = Conn::connect(kv.port);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(m.info_field("stats", "sync_full"), "1");
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "1");
    assert_eq!(dataset(&mut r), dataset(&mut m));
}

/// A fake master: accepts the replica's connection, answers its handshake
/// (every line up to PSYNC) and then sends `after_psync`, and closes.
fn fake_master(after_psync: Vec<u8>) -> (u16, std::thread::JoinHandle<usize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let mut served = 0;
        listener.set_nonblocking(false).unwrap();
        // Serve the first two attempts: the replica must come back after
        // the first goes wrong.
        for _ in 0..2 {
            let Ok((s, _)) = listener.accept() else { break };
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut reader = std::io::BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            loop {
                // Each request is a RESP array; answer +OK (or +PONG).
                let mut line = String::new();
                if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 {
                    break;
                }
                let n: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
                let mut args = Vec::new();
                for _ in 0..n {
                    let mut len = String::new();
                    std::io::BufRead::read_line(&mut reader, &mut len).unwrap();
                    let mut arg = String::new();
                    std::io::BufRead::read_line(&mut reader, &mut arg).unwrap();
                    args.push(arg.trim().to_ascii_uppercase());
                }
                match args.first().map(String::as_str) {
                    Some("PING") => std::io::Write::write_all(&mut w, b"+PONG\r\n").unwrap(),
                    Some("PSYNC") => {
                        let _ = std::io::Write::write_all(&mut w, &after_psync);
                        served += 1;
                        break;
                    }
                    _ => std::io::Write::write_all(&mut w, b"+OK\r\n").unwrap(),
                }
            }
        }
        served
    });
    (port, handle)
}

/// The replica survives a bad master: it logs, drops the link, tries
/// again, and serves its clients meanwhile.
fn survives_bad_master(after_psync: &[u8]) {
    let (port, master) = fake_master(after_psync.to_vec());
    let kv = start_kvstore(&["--replicaof", "127.0.0.1", &port.to_string()]);
    let mut c = Conn::connect(kv.port);
    // Both attempts are served and fail.
    assert_eq!(master.join().unwrap(), 2, "the replica did not retry");
    // A payload cut short is being loaded until the replica reads the
    // master's end of stream (-LOADING meanwhile, as Redis): then it serves.
    common::wait_for("the replica to serve after the failed sync", 5, || {
        c.cmd_str(&["PING"]) == b"+PONG\r\n"
    });
    assert_eq!(c.info_field("replication", "master_link_status"), "down");
    // No temporary dump is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(kv.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_replica_survives_masters_that_misbehave() {
    let id = "0123456789abcdef0123456789abcdef01234567";
    // Not a payload at all.
    survives_bad_master(format!("+FULLRESYNC {id} 0\r\nhello\r\n").as_bytes());
    // A payload cut short.
    survives_bad_master(format!("+FULLRESYNC {id} 0\r\n$1000\r\nREDIS0010").as_bytes());
    // A complete payload that is not a dump.
    survives_bad_master(format!("+FULLRESYNC {id} 0\r\n$10\r\n0123456789").as_bytes());
    // An error instead of PSYNC's reply.
    survives_bad_master(b"-ERR no\r\n");
    // Garbage for a +FULLRESYNC.
    survives_bad_master(b"+FULLRESYNC\r\n");
}

#[test]
fn a_replica_that_never_reads_is_cut_off_and_the_master_goes_on() {
    let kv = start_kvstore(&["--client-output-buffer-limit", "replica 1mb 0 0"]);
    let mut m = Conn::connect(kv.port);
    let mut lazy = Conn::connect(kv.port);
    lazy.cmd_str(&["REPLCONF", "capa", "eof"]);
    lazy.send(&[b"PSYNC", b"?", b"-1"]);
    // It never reads again; the master keeps writing.
    let value = "x".repeat(64 * 1024);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        m.cmd_str(&["SET", "k", &value]);
        if m.info_field("replication", "connected_slaves") == "0" {
            break;
        }
        assert!(Instant::now() < deadline, "the replica was never cut off");
    }
    assert_eq!(
        m.info_field("stats", "client_output_buffer_limit_disconnections"),
        "1"
    );
    assert_eq!(m.cmd_str(&["GET", "missing"]), b"$-1\r\n");
}

#[test]
fn min_replicas_stale_data_and_blocked_clients_follow_redis() {
    // min-replicas-to-write: no good replica, no write.
    let kv = start_kvstore(&[
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "10",
    ]);
    let mut m = Conn::connect(kv.port);
    assert_eq!(
        m.cmd_str(&["SET", "k", "v"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n"
    );
    assert_eq!(m.info_field("replication", "min_slaves_good_slaves"), "0");
    if let Some(replica) = start_redis_replica(kv.port) {
        let mut r = Conn::connect(replica.port);
        wait_in_sync(&mut m, &mut r);
        common::wait_for("an ACK", 5, || {
            m.info_field("replication", "min_slaves_good_slaves") == "1"
        });
        assert_eq!(m.cmd_str(&["SET", "k", "v"]), b"+OK\r\n");
    }
    // replica-serve-stale-data no: with the link down only "stale" commands.
    let nowhere = common::free_port().to_string();
    let stale = start_kvstore(&["--replicaof", "127.0.0.1", &nowhere]);
    let mut s = Conn::connect(stale.port);
    assert_eq!(s.cmd_str(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(
        s.cmd_str(&["CONFIG", "SET", "replica-serve-stale-data", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(
        s.cmd_str(&["GET", "k"]),
        b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"
    );
    assert_eq!(
        s.cmd_str(&["PING"]),
        b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"
    );
    assert_eq!(s.info_field("replication", "master_link_status"), "down");
    // A master turned replica unblocks its blocked clients with an error.
    let kv = start_kvstore(&[]);
    let mut waiter = Conn::connect(kv.port);
    waiter.send(&[b"BLPOP", b"q", b"0"]);
    std::thread::sleep(Duration::from_millis(50));
    let mut admin = Conn::connect(kv.port);
    assert_eq!(
        admin.cmd_str(&["REPLICAOF", "127.0.0.1", &nowhere]),
        b"+OK\r\n"
    );
    assert_eq!(
        waiter.read_reply(),
        b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
    );
    waiter.expect_closed();
    // The error is counted as an error reply, as Redis counts it.
    assert_eq!(
        admin.info_field("errorstats", "errorstat_UNBLOCKED"),
        "count=1"
    );
    assert_eq!(
        admin.cmd_str(&["REPLICAOF", "127.0.0.1", &nowhere]),
        b"+OK Already connected to specified master\r\n"
    );
}

/// `redis-cli -p PORT FLAG OUT` (`--rdb` or `--functions-rdb`), which must
/// succeed.
fn cli_dump(cli: &std::path::Path, port: u16, flag: &str, out: &std::path::Path) {
    let status = Command::new(cli)
        .args(["-p", &port.to_string(), flag])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "redis-cli {flag}: {status}");
}

#[test]
fn redis_cli_rdb_takes_a_dump_from_kvstore() {
    let Some(cli) = common::require_tool("redis-cli") else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut m = Conn::connect(kv.port);
    write_everything(&mut m, "dumped");
    let out = kv.dir.path().join("via-cli.rdb");
    cli_dump(&cli, kv.port, "--rdb", &out);
    let rdb = std::fs::read(&out).unwrap();
    assert!(
        rdb.starts_with(b"REDIS0010"),
        "{:?}",
        &rdb[..rdb.len().min(16)]
    );
    // The dump holds the data: a fresh kvstore loads it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&out, dir.path().join("dump.rdb")).unwrap();
    let copy = common::start_kvstore_in(dir, &[]);
    let mut c = Conn::connect(copy.port);
    common::wait_for("the dump to load", 10, || {
        c.try_cmd_str(&["PING"]).is_ok_and(|r| r == b"+PONG\r\n")
    });
    assert_eq!(dataset(&mut c), dataset(&mut m));
}

#[test]
fn redis_cli_functions_rdb_gets_the_libraries_only() {
    // REPLCONF rdb-filter-only functions (redis-cli --functions-rdb): a
    // dump with the function libraries and no keys, sent diskless even
    // where the server syncs replicas through its dump file, which it
    // leaves alone; a plain replica meanwhile gets everything.
    let Some(cli) = common::require_tool("redis-cli") else {
        return;
    };
    let kv = start_kvstore(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(kv.port);
    m.cmd_str(&["SET", "k", "v"]);
    let lib = "#!lua name=lib1\nredis.register_function('func1', function() return 123 end)";
    assert_eq!(m.cmd_str(&["FUNCTION", "LOAD", lib]), b"$4\r\nlib1\r\n");
    let dump = |flag: &str, name: &str| {
        let out = kv.dir.path().join(name);
        cli_dump(&cli, kv.port, flag, &out);
        let mut dbs = vec![kvstore::db::Db::new(0, 1)];
        let opts = kvstore::persistence::rdb::LoadOptions::from_config(
            &kvstore::config::Config::default(),
        );
        let stats = kvstore::persistence::rdb::load_file(&mut dbs, &opts, &out).unwrap();
        (stats.keys, stats.functions.len())
    };
    assert_eq!(dump("--functions-rdb", "functions.rdb"), (0, 1));
    assert!(!kv.dir.path().join("dump.rdb").exists());
    assert_eq!(dump("--rdb", "all.rdb"), (1, 1));
    assert_eq!(
        m.cmd_str(&["REPLCONF", "rdb-filter-only", "keys"]),
        b"-ERR Unsupported rdb-filter-only option: keys\r\n"
    );
}

#[test]
fn a_replica_with_an_aof_restarts_it_from_the_synced_dataset() {
    let Some(redis) = start_redis_master() else {
        return;
    };
    let mut m = Conn::connect(redis.port);
    write_everything(&mut m, "master");
    let dir = tempfile::tempdir().unwrap();
    let kv = common::start_kvstore_in(dir, &["--appendonly", "yes"]);
    let mut r = Conn::connect(kv.port);
    // Data of its own first, which the sync must replace in the AOF too.
    r.cmd_str(&["SET", "mine", "gone after the sync"]);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    common::wait_for("the AOF rewrite after the sync", 20, || {
        r.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && r.info_field("persistence", "aof_rewrites") == "1"
    });
    write_everything(&mut m, "streamed");
    wait_in_sync(&mut m, &mut r);
    let want = dataset(&mut m);
    assert_eq!(dataset(&mut r), want);
    // Restarted from its AOF alone (as a master now), it has the synced
    // dataset, not its own old key.
    r.cmd_str(&["REPLICAOF", "NO", "ONE"]);
    let dir = {
        let mut kv = kv;
        let _ = r.try_cmd_str(&["SHUTDOWN", "NOSAVE"]);
        let _ = kv.child.wait();
        std::mem::replace(&mut kv.dir, tempfile::tempdir().unwrap())
    };
    let again = common::start_kvstore_in(dir, &["--appendonly", "yes"]);
    let mut c = Conn::connect(again.port);
    common::wait_for("the AOF to load", 10, || {
        c.try_cmd_str(&["PING"]).is_ok_and(|r| r == b"+PONG\r\n")
    });
    assert_eq!(dataset(&mut c), want);
}

#[test]
fn clients_get_loading_while_a_replica_loads_its_full_sync() {
    let Some(redis) = start_redis_master() else {
        return;
    };
    let mut m = Conn::connect(redis.port);
    assert_eq!(m.cmd_str(&["DEBUG", "POPULATE", "500000"]), b"+OK\r\n");
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(kv.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    let mut poll = Conn::connect(kv.port);
    let mut saw_loading = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = poll.cmd_str(&["GET", "key:1"]);
        if reply.starts_with(b"-LOADING") {
            saw_loading = true;
        } else if reply == b"$7\r\nvalue:1\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never got the data");
    }
    assert!(saw_loading, "no -LOADING while the synced dump loaded");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":500000\r\n");
}

#[test]
fn config_set_repl_backlog_size_resizes_the_backlog_keeping_its_tail() {
    let kv = start_kvstore(&[]);
    let mut m = Conn::connect(kv.port);
    let Some(replica) = start_redis_replica(kv.port) else {
        return;
    };
    let mut r = Conn::connect(replica.port);
    wait_in_sync(&mut m, &mut r);
    let value = "v".repeat(1000);
    for i in 0..100 {
        m.cmd_str(&["SET", &format!("k{i}"), &value]);
    }
    let histlen: u64 = m
        .info_field("replication", "repl_backlog_histlen")
        .parse()
        .unwrap();
    assert!(histlen > 100_000, "{histlen}");
    assert_eq!(
        m.cmd_str(&["CONFIG", "SET", "repl-backlog-size", "16kb"]),
        b"+OK\r\n"
    );
    // It keeps whole blocks (of 16 KB here), at least its size.
    let histlen = || -> i64 {
        let mut m = Conn::connect(kv.port);
        m.info_field("replication", "repl_backlog_histlen")
            .parse()
            .unwrap()
    };
    common::wait_for("the backlog to shrink", 5, || {
        (16384..3 * 16384).contains(&histlen())
    });
    assert_eq!(m.info_field("replication", "repl_backlog_size"), "16384");
    let offset: i64 = m
        .info_field("replication", "master_repl_offset")
        .parse()
        .unwrap();
    let first: i64 = m
        .info_field("replication", "repl_backlog_first_byte_offset")
        .parse()
        .unwrap();
    assert_eq!(first, offset - histlen() + 1);
    // What it kept still serves a partial resync.
    r.cmd_str(&["CLIENT", "KILL", "TYPE", "master"]);
    m.cmd_str(&["SET", "after", "resize"]);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "1");
}

const LIB_V1: &str = "#!lua name=test\nredis.register_function{function_name='test', callback=function() return 'hello1' end, flags={'no-writes'}}";
const LIB_V2: &str = "#!lua name=test\nredis.register_function{function_name='test', callback=function() return 'hello2' end, flags={'no-writes'}}";

#[test]
fn swapdb_loading_of_another_history_refuses_reads_and_keeps_the_old_data_if_it_fails() {
    // A replica whose data is not the master's history loads aside but
    // answers -LOADING meanwhile (Redis's async loading is only for a
    // master whose history the replica had).
    let Some(redis) = start_redis_master() else {
        return;
    };
    let mut m = Conn::connect(redis.port);
    assert_eq!(m.cmd_str(&["DEBUG", "POPULATE", "500000"]), b"+OK\r\n");
    assert!(m.cmd_str(&["FUNCTION", "LOAD", LIB_V2]).starts_with(b"$4"));
    let kv = start_kvstore(&["--repl-diskless-load", "swapdb"]);
    let mut r = Conn::connect(kv.port);
    r.cmd_str(&["SET", "old", "data"]);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    let mut poll = Conn::connect(kv.port);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut saw_loading = false;
    loop {
        let reply = poll.cmd_str(&["GET", "old"]);
        if reply.starts_with(b"-LOADING") {
            saw_loading = true;
            assert_eq!(poll.info_field("persistence", "async_loading"), "0");
        } else if reply == b"$-1\r\n" {
            break;
        } else {
            assert_eq!(reply, b"$4\r\ndata\r\n");
        }
        assert!(Instant::now() < deadline, "the new dataset never came");
    }
    assert!(saw_loading, "no -LOADING while another history loaded");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":500000\r\n");
    assert_eq!(r.cmd_str(&["FCALL_RO", "test", "0"]), b"$6\r\nhello2\r\n");
    // A dump that does not load leaves the old dataset and functions.
    let id = "0123456789abcdef0123456789abcdef01234567";
    let (port, master) =
        fake_master(format!("+FULLRESYNC {id} 0\r\n$10\r\n0123456789").into_bytes());
    let kv = start_kvstore(&["--repl-diskless-load", "swapdb"]);
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "kept", "yes"]);
    assert!(c.cmd_str(&["FUNCTION", "LOAD", LIB_V1]).starts_with(b"$4"));
    c.cmd_str(&["REPLICAOF", "127.0.0.1", &port.to_string()]);
    assert_eq!(master.join().unwrap(), 2);
    // (The second attempt may still be failing: -LOADING until it has.)
    common::wait_for("the failed load to end", 10, || {
        c.info_field("persistence", "loading") == "0"
    });
    assert_eq!(c.cmd_str(&["GET", "kept"]), b"$3\r\nyes\r\n");
    assert_eq!(c.cmd_str(&["FCALL_RO", "test", "0"]), b"$6\r\nhello1\r\n");
}

#[test]
fn swapdb_loading_of_the_same_history_serves_the_old_data_and_functions() {
    let master = start_kvstore(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
    ]);
    let mut m = Conn::connect(master.port);
    let kv = start_kvstore(&[
        "--repl-diskless-load",
        "swapdb",
        "--replica-read-only",
        "no",
    ]);
    let mut r = Conn::connect(kv.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    // The two diverge (POPULATE is not propagated; the replica is
    // writable), then the link breaks and the backlog cannot bridge the
    // gap: a full sync of the history the replica had.
    assert_eq!(m.cmd_str(&["DEBUG", "POPULATE", "100000"]), b"+OK\r\n");
    r.cmd_str(&["SET", "old", "data"]);
    assert!(r.cmd_str(&["FUNCTION", "LOAD", LIB_V1]).starts_with(b"$4"));
    m.cmd_str(&["CONFIG", "SET", "repl-backlog-size", "16384"]);
    m.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "30"]);
    m.cmd_str(&["MULTI"]);
    m.cmd_str(&["CLIENT", "KILL", "TYPE", "replica"]);
    let filler = "A".repeat(16384);
    for i in 0..4 {
        m.cmd_str(&["SET", &format!("filler{i}"), &filler]);
    }
    m.cmd_str(&["FUNCTION", "LOAD", LIB_V2]);
    assert!(m.cmd_str(&["EXEC"]).starts_with(b"*6"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut saw_async = false;
    loop {
        let reply = r.cmd_str(&["GET", "old"]);
        assert!(
            !reply.starts_with(b"-LOADING"),
            "async loading refused a read"
        );
        if reply == b"$-1\r\n" {
            break;
        }
        assert_eq!(reply, b"$4\r\ndata\r\n");
        // Asked before INFO: if the load is still on after, it was then.
        let function = r.cmd_str(&["FCALL_RO", "test", "0"]);
        if r.info_field("persistence", "async_loading") == "1" {
            saw_async = true;
            assert_eq!(function, b"$6\r\nhello1\r\n");
            assert_eq!(r.info_field("persistence", "loading"), "0");
        }
        assert!(Instant::now() < deadline, "the new dataset never came");
    }
    assert!(saw_async, "INFO never showed async_loading:1");
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":100004\r\n");
    assert_eq!(r.cmd_str(&["FCALL_RO", "test", "0"]), b"$6\r\nhello2\r\n");
    assert_eq!(m.info_field("stats", "sync_full"), "2");
}

/// Names in the replica's directory that start with `prefix`.
fn files_starting(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn an_empty_replica_loads_the_dump_as_it_arrives_and_drops_a_cut_one() {
    // A master that writes its snapshot slowly (3,000 keys of 1 kB, 1 ms
    // each: 64 kB reach the replica every 65 ms).
    let mut master = start_kvstore(&["--rdb-key-save-delay", "1000"]);
    let mut m = Conn::connect(master.port);
    let mut pipeline = Vec::new();
    let filler = "v".repeat(1000);
    for i in 0..3000 {
        let (k, v) = (format!("key:{i}"), format!("{i}:{filler}"));
        pipeline.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    m.send_raw(&pipeline);
    for _ in 0..3000 {
        assert_eq!(m.read_reply(), b"+OK\r\n");
    }
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(kv.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    // Keys load while the transfer is still running.
    common::wait_for("keys loaded during the transfer", 20, || {
        r.info_field("replication", "master_sync_in_progress") == "1"
            && r.info_field("persistence", "loading") == "1"
            && r.info_field("persistence", "loading_loaded_bytes")
                .parse::<u64>()
                .unwrap_or(0)
                > 1000
    });
    assert!(r.cmd_str(&["GET", "key:1"]).starts_with(b"-LOADING"));
    // The master dies mid-transfer: what was loaded goes, with the file.
    let _ = master.child.kill();
    let _ = master.child.wait();
    common::wait_for("the cut transfer to be dropped", 10, || {
        r.info_field("persistence", "loading") == "0"
    });
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":0\r\n");
    assert_eq!(r.info_field("replication", "master_link_status"), "down");
    assert!(files_starting(kv.dir.path(), "temp-").is_empty());
    assert!(files_starting(kv.dir.path(), "dump.rdb").is_empty());
    // From a master that finishes, the replica has it all, and the dump.
    let master = start_kvstore(&[]);
    let mut m = Conn::connect(master.port);
    m.send_raw(&pipeline);
    for _ in 0..3000 {
        assert_eq!(m.read_reply(), b"+OK\r\n");
    }
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":3000\r\n");
    assert_eq!(
        r.cmd_str(&["GET", "key:2999"]),
        format!("$1005\r\n2999:{filler}\r\n").as_bytes()
    );
    assert!(files_starting(kv.dir.path(), "temp-").is_empty());
    assert_eq!(files_starting(kv.dir.path(), "dump.rdb"), ["dump.rdb"]);
}

#[test]
fn a_writable_replica_expires_the_keys_its_own_clients_gave_a_ttl() {
    let master = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut m = Conn::connect(master.port);
    // The master will not expire its own key: only its DEL may remove it.
    assert_eq!(m.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    let replica = start_kvstore(&[
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
        "--replica-read-only",
        "no",
    ]);
    let mut r = Conn::connect(replica.port);
    wait_in_sync(&mut m, &mut r);
    m.cmd_str(&["SET", "from-master", "v", "PX", "50"]);
    wait_in_sync(&mut m, &mut r);
    // Every way a client gives a key a TTL, in two databases.
    assert_eq!(r.cmd_str(&["SET", "a", "v", "PX", "50"]), b"+OK\r\n");
    r.cmd_str(&["SET", "b", "v"]);
    assert_eq!(r.cmd_str(&["PEXPIRE", "b", "50"]), b":1\r\n");
    r.cmd_str(&["SET", "c", "v", "EX", "100"]);
    assert_eq!(r.cmd_str(&["RENAME", "c", "d"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["PEXPIRE", "d", "50"]), b":1\r\n");
    r.cmd_str(&["SET", "long", "v", "EX", "1000"]);
    r.cmd_str(&["SELECT", "9"]);
    r.cmd_str(&["SET", "a", "v", "PX", "50"]);
    r.cmd_str(&["SELECT", "0"]);
    // a counts once for both databases; c stays listed (as in Redis) until
    // the cron finds it has no TTL any more.
    assert_eq!(r.info_field("stats", "slave_expires_tracked_keys"), "5");
    let before: u64 = r.info_field("stats", "expired_keys").parse().unwrap();
    common::wait_for("the replica's own keys to expire", 10, || {
        r.info_field("stats", "expired_keys")
            .parse::<u64>()
            .unwrap()
            == before + 4
    });
    // Nothing was read: the cron removed them. The master's key stays until
    // its DEL, and the key not yet due stays tracked.
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":2\r\n");
    assert_eq!(r.cmd_str(&["EXISTS", "long"]), b":1\r\n");
    r.cmd_str(&["SELECT", "9"]);
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":0\r\n");
    common::wait_for("only the key not yet due to stay listed", 10, || {
        r.info_field("stats", "slave_expires_tracked_keys") == "1"
    });
    // FLUSHALL forgets them.
    assert_eq!(r.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(r.info_field("stats", "slave_expires_tracked_keys"), "0");
}

#[test]
fn a_replica_connects_to_its_master_from_bind_source_addr() {
    let master = start_kvstore(&["--protected-mode", "no"]);
    let mut m = Conn::connect(master.port);
    let replica = start_kvstore(&["--bind-source-addr", "127.0.0.2"]);
    let mut r = Conn::connect(replica.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    common::wait_for("the master to list its replica", 10, || {
        m.info_field("replication", "connected_slaves") == "1"
    });
    let slave0 = m.info_field("replication", "slave0");
    assert!(slave0.starts_with("ip=127.0.0.2,"), "{slave0}");
    // Changed at run time, the next connection comes from the new address.
    assert_eq!(
        r.cmd_str(&["CONFIG", "SET", "bind-source-addr", "127.0.0.3"]),
        b"+OK\r\n"
    );
    r.cmd_str(&["REPLICAOF", "NO", "ONE"]);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    common::wait_for("the replica to come back from 127.0.0.3", 20, || {
        m.info_field("replication", "connected_slaves") == "1"
            && m.info_field("replication", "slave0")
                .starts_with("ip=127.0.0.3,")
            && r.info_field("replication", "master_link_status") == "up"
    });
}

#[test]
fn publish_reaches_the_subscribers_of_replicas_but_not_the_aof() {
    let master = start_kvstore(&["--appendonly", "yes"]);
    let mut m = Conn::connect(master.port);
    let kv_replica = start_kvstore(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let redis_replica = start_redis_replica(master.port);
    let mut subscribers = Vec::new();
    for port in std::iter::once(kv_replica.port).chain(redis_replica.as_ref().map(|r| r.port)) {
        let mut r = Conn::connect(port);
        wait_in_sync(&mut m, &mut r);
        let mut sub = Conn::connect(port);
        sub.send(&[b"SUBSCRIBE", b"news"]);
        assert_eq!(
            sub.read_reply(),
            b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
        );
        subscribers.push(sub);
    }
    assert_eq!(m.cmd_str(&["PUBLISH", "news", "hello"]), b":0\r\n");
    // Inside a transaction too (Redis's unit/multi "MULTI propagation of PUBLISH").
    m.cmd_str(&["MULTI"]);
    m.cmd_str(&["PUBLISH", "news", "again"]);
    assert_eq!(m.cmd_str(&["EXEC"]), b"*1\r\n:0\r\n");
    for sub in &mut subscribers {
        for msg in ["hello", "again"] {
            assert_eq!(
                sub.read_reply(),
                format!(
                    "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{msg}\r\n",
                    msg.len()
                )
                .into_bytes()
            );
        }
    }
    // A message is not data: the AOF has none.
    let mut aof = Vec::new();
    for f in std::fs::read_dir(master.dir.path().join("appendonlydir")).unwrap() {
        aof.extend(std::fs::read(f.unwrap().path()).unwrap());
    }
    let text = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(!text.contains("publish"), "{text}");
}

#[test]
fn a_psync_answered_with_a_long_backlog_misses_none_of_the_stream() {
    // Redis's integration/replication-psync found it: a PSYNC answered with
    // more than a turn's worth of output (the backlog since the link went
    // down) flushed that turn's stream while the replica was out of the
    // client table. The master's offset moved past bytes the replica never
    // got, and its next PSYNC started in the middle of a command. Here a
    // writer's pipeline and a PSYNC reach the master together, so the
    // writes are in the turn's stream when the PSYNC is answered.
    use std::io::{Read, Write};
    let master = start_kvstore(&[
        "--repl-backlog-size",
        "64mb",
        "--enable-debug-command",
        "yes",
    ]);
    let port = master.port.to_string();
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &port]);
    let mut m = Conn::connect(master.port);
    let mut r = Conn::connect(replica.port);
    wait_in_sync(&mut m, &mut r);
    let mut sleeper = Conn::connect(master.port);
    let replid = m.info_field("replication", "master_replid");
    let from: i64 = m
        .info_field("replication", "master_repl_offset")
        .parse()
        .unwrap();
    // Well over a turn's output (256 KB) of backlog after `from`.
    let big = "x".repeat(4096);
    for i in 0..200 {
        m.cmd_str(&["SET", &format!("big{i}"), &big]);
    }
    let mut writer = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    let mut pipeline = Vec::new();
    for i in 0..2000 {
        pipeline.extend_from_slice(&common::encode(&[b"INCR", format!("n{i}").as_bytes()]));
    }
    let start = (from + 1).to_string();
    let psync = common::encode(&[b"PSYNC", replid.as_bytes(), start.as_bytes()]);
    let head = "+CONTINUE\r\n";
    for attempt in 0..5 {
        let mut fake = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
        fake.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        // Both arrive while the loop sleeps: the next turn runs the
        // writes, then the PSYNC.
        sleeper.send(&[b"DEBUG", b"SLEEP", b"0.3"]);
        std::thread::sleep(Duration::from_millis(50));
        writer.write_all(&pipeline).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        fake.write_all(&psync).unwrap();
        assert_eq!(sleeper.read_reply(), b"+OK\r\n");
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now: i64 = m
                .info_field("replication", "master_repl_offset")
                .parse()
                .unwrap();
            let want = head.len() + (now - from) as usize;
            if got.len() >= want || Instant::now() > deadline {
                assert_eq!(
                    got.len(),
                    want,
                    "attempt {attempt}: the stream sent after +CONTINUE"
                );
                break;
            }
            match fake.read(&mut buf) {
                Ok(0) => panic!("the master closed the link"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        assert!(got.starts_with(head.as_bytes()));
        // The writer's replies, read so that it does not block.
        let mut replies = 0;
        let mut wbuf = vec![0u8; 1 << 16];
        writer
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        while replies < 2000 {
            let n = writer.read(&mut wbuf).unwrap();
            replies += wbuf[..n].iter().filter(|&&b| b == b':').count();
        }
    }
}

#[test]
fn a_write_on_a_writable_replica_replaces_an_expired_key() {
    // Redis's integration/replication-3 "Writable replica doesn't return
    // expired keys": the master has not deleted them yet (active expiry
    // off); reads miss them, and a write deletes the old key first, so
    // INCR makes a new one without the old, past TTL.
    let master = start_kvstore(&["--enable-debug-command", "yes"]);
    let port = master.port.to_string();
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &port]);
    let mut m = Conn::connect(master.port);
    let mut r = Conn::connect(replica.port);
    wait_in_sync(&mut m, &mut r);
    m.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    m.cmd_str(&["SET", "key1", "5", "PX", "10"]);
    m.cmd_str(&["SET", "key2", "5", "PX", "10"]);
    common::wait_for("the keys replicated and expired", 10, || {
        r.cmd_str(&["DBSIZE"]) == b":2\r\n" && r.cmd_str(&["EXISTS", "key1", "key2"]) == b":0\r\n"
    });
    r.cmd_str(&["CONFIG", "SET", "replica-read-only", "no"]);
    assert_eq!(r.cmd_str(&["INCR", "key1"]), b":1\r\n");
    assert_eq!(r.cmd_str(&["TTL", "key1"]), b":-1\r\n");
    assert_eq!(r.cmd_str(&["GET", "key2"]), b"$-1\r\n");
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":2\r\n");
}

#[test]
fn a_filtered_dump_needs_a_replica_that_takes_diskless_transfers() {
    // A filtered dump never becomes the server's dump file: it is sent
    // diskless, so a replica that cannot take an `$EOF:` transfer is
    // refused, with redis-server 7.0's words, and stays a plain client.
    let kv = start_kvstore(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(kv.port);
    m.cmd_str(&["SET", "k", "v"]);
    let mut link = Conn::connect(kv.port);
    assert_eq!(
        link.cmd_str(&["REPLCONF", "rdb-filter-only", "functions"]),
        b"+OK\r\n"
    );
    assert_eq!(
        text(&link.cmd_str(&["PSYNC", "?", "-1"])),
        "-ERR Filtered replica requires EOF capability\r\n"
    );
    assert_eq!(link.cmd_str(&["PING"]), b"+PONG\r\n");
    assert_eq!(m.info_field("replication", "connected_slaves"), "0");
    // With `capa eof` it gets its filtered dump, diskless.
    assert_eq!(link.cmd_str(&["REPLCONF", "capa", "eof"]), b"+OK\r\n");
    link.send(&[b"PSYNC", b"?", b"-1"]);
    let line = link.read_line();
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    let header = transfer_header(&mut link);
    assert!(header.starts_with("$EOF:"), "{header}");
}

/// The dump's header line (`$len` or `$EOF:<mark>`), past the newlines
/// that keep the link alive until it comes.
fn transfer_header(r: &mut Conn) -> String {
    let mut header = r.read_line();
    while header.is_empty() {
        header = r.read_line();
    }
    header
}

/// A replica by hand that takes a diskless transfer (`capa eof`) and reads
/// all of it, and sends nothing after it: the link is at the stream's
/// start, or at the end of the stream held until the first ACK.
fn diskless_replica(port: u16) -> Conn {
    let mut r = silent_replica(port);
    let header = transfer_header(&mut r);
    let mark = header
        .strip_prefix("$EOF:")
        .unwrap_or_else(|| panic!("not a diskless transfer: {header}"))
        .as_bytes()
        .to_vec();
    let mut dump = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dump.ends_with(&mark) {
        assert!(Instant::now() < deadline, "the transfer did not end");
        let (more, closed) = r.read_available(Duration::from_millis(100));
        assert!(!closed, "closed during the transfer");
        dump.extend_from_slice(&more);
    }
    r
}

#[test]
fn a_replica_that_never_acknowledges_its_diskless_transfer_is_dropped() {
    // Once the child ended, a replica that has its whole transfer is
    // online as Redis counts: without an ACK (or an empty line while it
    // loads) for `repl-timeout`, it goes.
    let kv = start_logged(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--repl-timeout",
        "2",
    ]);
    let mut m = Conn::connect(kv.port);
    m.cmd_str(&["SET", "k", "v"]);
    let mut quiet = diskless_replica(kv.port);
    common::wait_for("the transfer's child to end", 10, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(m.info_field("replication", "connected_slaves"), "1");
    common::wait_for("the silent replica to be dropped", 10, || {
        m.info_field("replication", "connected_slaves") == "0"
    });
    assert!(
        server_log(&kv).contains("Disconnecting timedout replica (streaming sync)"),
        "{}",
        server_log(&kv)
    );
    let (_, closed) = quiet.read_available(Duration::from_secs(2));
    assert!(closed);
}

#[test]
fn an_ack_that_is_not_a_number_does_not_start_the_stream() {
    let kv = start_kvstore(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let mut m = Conn::connect(kv.port);
    let mut r = diskless_replica(kv.port);
    common::wait_for("the transfer's child to end", 10, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    m.cmd_str(&["SET", "k", "v"]);
    r.send(&[b"REPLCONF", b"ACK", b"abc"]);
    let (got, closed) = r.read_available(Duration::from_millis(500));
    assert!(!closed);
    assert!(got.is_empty(), "the stream started: {}", text(&got));
    r.send(&[b"REPLCONF", b"ACK", b"0"]);
    common::wait_for("the stream after a real ACK", 10, || {
        let (got, _) = r.read_available(Duration::from_millis(100));
        text(&got).contains("SET")
    });
}

#[test]
fn a_failed_later_snapshot_leaves_replicas_loading_an_earlier_one() {
    // Replica A has its whole diskless transfer and is loading it (no ACK
    // yet); B's snapshot, the next one, is stopped by FLUSHALL: B goes, A
    // stays and gets the stream on its ACK (Redis frees only the replicas
    // waiting for the failed child).
    let kv = start_kvstore(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let mut m = Conn::connect(kv.port);
    for i in 0..50 {
        m.cmd_str(&["SET", &format!("k{i}"), "v"]);
    }
    let mut a = diskless_replica(kv.port);
    common::wait_for("A's child to end", 10, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    // B's snapshot takes seconds.
    m.cmd_str(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
    let mut b = Conn::connect(kv.port);
    assert_eq!(b.cmd_str(&["REPLCONF", "capa", "eof"]), b"+OK\r\n");
    b.send(&[b"PSYNC", b"?", b"-1"]);
    common::wait_for("B's snapshot", 10, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "1"
            && m.info_field("replication", "connected_slaves") == "2"
    });
    assert_eq!(m.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    common::wait_for("B to be dropped", 10, || {
        m.info_field("replication", "connected_slaves") == "1"
    });
    let (_, closed) = b.read_available(Duration::from_millis(500));
    assert!(closed, "B was kept");
    assert_eq!(m.info_field("replication", "connected_slaves"), "1");
    m.cmd_str(&["SET", "after", "1"]);
    a.send(&[b"REPLCONF", b"ACK", b"0"]);
    common::wait_for("A's stream, FLUSHALL and the SET", 10, || {
        let (got, closed) = a.read_available(Duration::from_millis(100));
        assert!(!closed, "A was dropped");
        text(&got).contains("after")
    });
}

/// redis-server (None where it is skipped), or kvstore.
fn start_either(redis: bool, args: &[&str]) -> Option<common::ServerProcess> {
    if redis {
        common::start_redis(args)
    } else {
        Some(start_logged(args))
    }
}

/// A master (`master_redis`: redis-server, else kvstore) with
/// `repl-timeout 2` and a replica (likewise) whose load of the full sync
/// takes about five seconds: the replica's empty lines while it loads keep
/// the link, and it syncs once.
fn a_slow_load_keeps_the_link(master_redis: bool, replica_redis: bool, diskless: &str) {
    let master_args = [
        "--repl-timeout",
        "2",
        "--repl-diskless-sync",
        diskless,
        "--repl-diskless-sync-delay",
        "0",
    ];
    let Some(master) = start_either(master_redis, &master_args) else {
        return;
    };
    let mut m = Conn::connect(master.port);
    for i in 0..500 {
        m.cmd_str(&["SET", &format!("key:{i}"), &"v".repeat(100)]);
    }
    // 10 ms a key, and the loop (or Redis's events) served every KB.
    let port = master.port.to_string();
    let replica_args = [
        "--key-load-delay",
        "10000",
        "--loading-process-events-interval-bytes",
        "1024",
        "--repl-timeout",
        "60",
    ];
    let Some(replica) = start_either(replica_redis, &replica_args) else {
        return;
    };
    let mut r = Conn::connect(replica.port);
    // Not empty: a kvstore replica loads after the transfer, not as it
    // arrives.
    r.cmd_str(&["SET", "old", "data"]);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &port]);
    let start = Instant::now();
    common::wait_for("the slow load to finish in sync", 40, || {
        r.try_cmd_str(&["INFO", "replication"])
            .is_ok_and(|i| text(&i).contains("master_link_status:up"))
            && r.info_field("replication", "slave_repl_offset")
                == m.info_field("replication", "master_repl_offset")
    });
    assert!(
        start.elapsed() > Duration::from_secs(4),
        "the load was not slow: {:?}",
        start.elapsed()
    );
    // Not dropped after the load and continued (a partial resync): a
    // master that dropped the loading replica is seen once it loaded.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(r.info_field("replication", "master_link_status"), "up");
    assert_eq!(m.info_field("stats", "sync_full"), "1");
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "0");
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":500\r\n");
    if !master_redis {
        assert!(!server_log(&master).contains("timedout replica"));
    }
}

#[test]
fn a_kvstore_replica_loading_longer_than_repl_timeout_keeps_its_kvstore_master() {
    a_slow_load_keeps_the_link(false, false, "no");
    a_slow_load_keeps_the_link(false, false, "yes");
}

#[test]
fn a_redis_replica_loading_longer_than_repl_timeout_keeps_its_kvstore_master() {
    a_slow_load_keeps_the_link(false, true, "no");
}

#[test]
fn a_kvstore_replica_loading_longer_than_repl_timeout_keeps_its_redis_master() {
    a_slow_load_keeps_the_link(true, false, "no");
}

/// A replica by hand: the handshake and PSYNC, then it reads nothing more.
fn silent_replica(port: u16) -> Conn {
    let mut r = Conn::connect(port);
    assert_eq!(
        r.cmd_str(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
        b"+OK\r\n"
    );
    r.send(&[b"PSYNC", b"?", b"-1"]);
    let line = r.read_line();
    assert!(line.starts_with("+FULLRESYNC"), "{line}");
    r
}

/// Start kvstore; its log (the harness's `--logfile kvstore.log`) is in
/// its own directory, as Redis puts a relative log file.
fn start_logged(args: &[&str]) -> common::ServerProcess {
    common::start_kvstore(args)
}

fn server_log(server: &common::ServerProcess) -> String {
    std::fs::read_to_string(server.dir.path().join("kvstore.log")).unwrap_or_default()
}

#[test]
fn a_diskless_replica_that_reads_nothing_is_dropped_after_repl_timeout() {
    let kv = start_logged(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--repl-timeout",
        "2",
        "--rdbcompression",
        "no",
        "--enable-debug-command",
        "yes",
    ]);
    let mut m = Conn::connect(kv.port);
    // 30 MB: far more than the socket buffers take.
    m.cmd_str(&["DEBUG", "POPULATE", "3000", "key", "10000"]);
    let _stalled = silent_replica(kv.port);
    common::wait_for("the transfer to start", 5, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "1"
    });
    // As Redis: a diskless transfer is the child's, the replica waits for it.
    let info = String::from_utf8_lossy(&m.cmd_str(&["INFO", "replication"])).into_owned();
    assert!(info.contains("state=wait_bgsave"), "{info}");
    common::wait_for("the stalled replica to be dropped", 15, || {
        m.info_field("replication", "connected_slaves") == "0"
            && m.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert!(server_log(&kv).contains("Disconnecting timedout replica (full sync)"));
    assert_eq!(m.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn flushall_during_a_diskless_transfer_drops_it_and_the_replica_syncs_again() {
    let master = start_logged(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--rdb-key-save-delay",
        "1000",
        "--enable-debug-command",
        "yes",
    ]);
    let mut m = Conn::connect(master.port);
    // 1 ms a key: the transfer takes seconds.
    m.cmd_str(&["DEBUG", "POPULATE", "5000"]);
    let replica = start_kvstore(&[]);
    let mut r = Conn::connect(replica.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    common::wait_for("the transfer to start", 5, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "1"
    });
    assert!(server_log(&master).contains("Background RDB transfer started by pid"));
    assert_eq!(m.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
    m.cmd_str(&["SET", "after", "flush"]);
    // The cut transfer is not taken for a whole one: the replica is
    // dropped and comes back for the flushed dataset.
    common::wait_for("the replica to have the flushed dataset", 20, || {
        r.cmd_str(&["GET", "after"]) == b"$5\r\nflush\r\n"
    });
    assert_eq!(r.cmd_str(&["DBSIZE"]), b":1\r\n");
    assert_eq!(m.info_field("stats", "sync_full"), "2");
}

#[test]
fn a_dump_written_for_replicas_alone_stops_when_the_last_one_leaves() {
    let kv = start_kvstore(&[
        "--repl-diskless-sync",
        "no",
        "--save",
        "",
        "--rdb-key-save-delay",
        "100000",
    ]);
    let mut m = Conn::connect(kv.port);
    for i in 0..20 {
        m.cmd_str(&["SET", &i.to_string(), "v"]);
    }
    let first = silent_replica(kv.port);
    let second = silent_replica(kv.port);
    common::wait_for("both replicas to wait for the dump", 5, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "1"
            && m.info_field("replication", "connected_slaves") == "2"
    });
    drop(first);
    common::wait_for("one replica left", 5, || {
        m.info_field("replication", "connected_slaves") == "1"
    });
    assert_eq!(m.info_field("persistence", "rdb_bgsave_in_progress"), "1");
    drop(second);
    common::wait_for("the dump nobody waits for to stop", 2, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    // With save points the dump is a save worth finishing.
    m.cmd_str(&["CONFIG", "SET", "save", "900 1"]);
    let third = silent_replica(kv.port);
    common::wait_for("the dump to start", 5, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "1"
    });
    drop(third);
    common::wait_for("the replica to leave", 5, || {
        m.info_field("replication", "connected_slaves") == "0"
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(m.info_field("persistence", "rdb_bgsave_in_progress"), "1");
}

/// A kvstore master with DEBUG enabled and a kvstore replica in sync.
fn debug_master_and_replica() -> (common::ServerProcess, Conn, common::ServerProcess, Conn) {
    let master = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut m = Conn::connect(master.port);
    let replica = start_kvstore(&[]);
    let mut r = Conn::connect(replica.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    (master, m, replica, r)
}

#[test]
fn debug_replicate_sends_a_command_to_the_replicas_only() {
    let (_master, mut m, _replica, mut r) = debug_master_and_replica();
    assert_eq!(
        m.cmd_str(&["DEBUG", "REPLICATE", "SET", "diverged", "1"]),
        b"+OK\r\n"
    );
    m.cmd_str(&["SET", "marker", "1"]);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["GET", "diverged"]), b"$1\r\n1\r\n");
    assert_eq!(m.cmd_str(&["GET", "diverged"]), b"$-1\r\n");
    // DEBUG ERROR: the error as given, on one line.
    assert_eq!(
        m.cmd_str(&["DEBUG", "ERROR", "BUSY now\r\nreally"]),
        b"-BUSY now  really\r\n"
    );
}

#[test]
fn a_master_restarted_from_its_dump_tells_its_replicas_of_keys_expired_meanwhile() {
    let (master, mut m, _replica, mut r) = debug_master_and_replica();
    m.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for db in 0..3 {
        m.cmd_str(&["SELECT", &db.to_string()]);
        for i in 0..10 {
            m.cmd_str(&["SET", &format!("k{i}"), "v", "PX", "300"]);
        }
    }
    m.cmd_str(&["SELECT", "0"]);
    m.cmd_str(&["SET", "kept", "1"]);
    wait_in_sync(&mut m, &mut r);
    common::wait_for("the synchronization's dump to end", 10, || {
        m.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    let dir = {
        let mut master = master;
        let _ = m.try_cmd_str(&["SHUTDOWN", "SAVE"]);
        let _ = master.child.wait();
        std::mem::replace(&mut master.dir, tempfile::tempdir().unwrap())
    };
    std::thread::sleep(Duration::from_millis(400));
    // The master comes back from its dump with its keys expired meanwhile;
    // the replica continues its history and hears of them.
    let master = common::start_kvstore_in(dir, &[]);
    let mut m = Conn::connect(master.port);
    assert_eq!(
        m.info_field("persistence", "rdb_last_load_keys_expired"),
        "30"
    );
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    assert_eq!(
        (
            m.info_field("stats", "sync_partial_ok"),
            m.info_field("stats", "sync_full")
        ),
        ("1".to_string(), "0".to_string()),
        "{}",
        text(&r.cmd_str(&["INFO", "replication"]))
    );
    for (db, keys) in [(0, ":1\r\n"), (1, ":0\r\n"), (2, ":0\r\n")] {
        r.cmd_str(&["SELECT", &db.to_string()]);
        assert_eq!(text(&r.cmd_str(&["DBSIZE"])), keys, "database {db}");
    }
}

#[test]
fn a_demoted_master_that_continues_with_psync_counts_the_stream_once() {
    let a = start_kvstore(&[]);
    let b = start_kvstore(&[]);
    let (mut ca, mut cb) = (Conn::connect(a.port), Conn::connect(b.port));
    cb.cmd_str(&["REPLICAOF", "127.0.0.1", &a.port.to_string()]);
    ca.cmd_str(&["SET", "x", "1"]);
    wait_in_sync(&mut ca, &mut cb);
    // The replica is promoted, the old master follows it and continues
    // the history with a partial resync.
    cb.cmd_str(&["REPLICAOF", "NO", "ONE"]);
    ca.cmd_str(&["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    wait_in_sync(&mut cb, &mut ca);
    assert_eq!(cb.info_field("stats", "sync_partial_ok"), "1");
    for i in 0..100 {
        cb.cmd_str(&["INCR", "x"]);
        cb.cmd_str(&["SET", &format!("k{i}"), "v"]);
    }
    wait_in_sync(&mut cb, &mut ca);
    assert_eq!(ca.cmd_str(&["GET", "x"]), b"$3\r\n101\r\n");
    assert_eq!(
        ca.info_field("replication", "master_repl_offset"),
        cb.info_field("replication", "master_repl_offset")
    );
    assert_eq!(
        ca.info_field("replication", "repl_backlog_histlen"),
        cb.info_field("replication", "repl_backlog_histlen")
    );
}

fn info_i64(c: &mut Conn, section: &str, field: &str) -> i64 {
    c.info_field(section, field).parse().unwrap()
}

/// CLIENT LIST's `omem` of each replica.
fn replica_omems(c: &mut Conn) -> Vec<i64> {
    text(&c.cmd_str(&["CLIENT", "LIST", "TYPE", "replica"]))
        .lines()
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("omem=")))
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn replicas_share_one_buffer_with_the_backlog_which_keeps_what_they_lag() {
    let kv = start_kvstore(&[
        "--repl-backlog-size",
        "16kb",
        "--client-output-buffer-limit",
        "replica 0 0 0",
    ]);
    let mut m = Conn::connect(kv.port);
    // Two replicas that sync, then read nothing more.
    let lazy = [
        common::attach_as_replica(kv.port),
        common::attach_as_replica(kv.port),
    ];
    common::wait_for("both replicas online", 10, || {
        let info = text(&Conn::connect(kv.port).cmd_str(&["INFO", "replication"]));
        info.matches("state=online").count() == 2
    });
    let value = "v".repeat(100_000);
    for i in 0..300 {
        m.cmd_str(&["SET", &format!("k{i}"), &value]);
    }
    // What the socket buffers could not take is behind for each replica,
    // and held once: the backlog outgrew its 16 KB to keep it.
    let histlen = info_i64(&mut m, "replication", "repl_backlog_histlen");
    let buffers = info_i64(&mut m, "memory", "mem_total_replication_buffers");
    let omems = replica_omems(&mut m);
    assert_eq!(omems.len(), 2);
    assert!(omems.iter().all(|&o| o > 5_000_000), "{omems:?}");
    assert!(
        histlen >= *omems.iter().max().unwrap(),
        "{histlen} {omems:?}"
    );
    assert!(
        buffers >= histlen && buffers < histlen + histlen / 8 + 65536,
        "{buffers} {histlen}"
    );
    assert!(omems.iter().sum::<i64>() > buffers, "{omems:?} {buffers}");
    assert!(info_i64(&mut m, "memory", "mem_clients_slaves") > 5_000_000);
    // A replica that knew this history continues from any of it, far
    // beyond the configured size.
    let replid = m.info_field("replication", "master_replid");
    let first = info_i64(&mut m, "replication", "repl_backlog_first_byte_offset");
    let end = info_i64(&mut m, "replication", "master_repl_offset");
    assert!(end - first > 1_000_000);
    let mut back = Conn::connect(kv.port);
    back.cmd_str(&["REPLCONF", "capa", "psync2"]);
    back.send(&[
        b"PSYNC",
        replid.as_bytes(),
        (first + 10).to_string().as_bytes(),
    ]);
    let line = back.read_line();
    assert!(line.starts_with("+CONTINUE"), "{line}");
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "1");
    // Once the replicas are gone, the backlog is back to its size.
    drop(back);
    drop(lazy);
    common::wait_for("the replicas to go", 10, || {
        Conn::connect(kv.port).info_field("replication", "connected_slaves") == "0"
    });
    common::wait_for("the backlog to shrink", 10, || {
        let mut c = Conn::connect(kv.port);
        info_i64(&mut c, "replication", "repl_backlog_histlen") < 3 * 16384
            && info_i64(&mut c, "memory", "mem_total_replication_buffers") < 4 * 16384 + 4096
    });
}

#[test]
fn a_replicas_hard_output_limit_is_never_under_the_backlog_size() {
    // The snapshot takes for ever: the replica waits for it, and the
    // stream since its offset is kept for it.
    let kv = start_kvstore(&[
        "--repl-backlog-size",
        "1mb",
        "--client-output-buffer-limit",
        "replica 128kb 0 0",
        "--rdb-key-save-delay",
        "1000000",
    ]);
    let mut m = Conn::connect(kv.port);
    m.cmd_str(&["SET", "first", "key"]);
    let waiting = silent_replica(kv.port);
    let value = "v".repeat(100_000);
    for i in 0..6 {
        m.cmd_str(&["SET", &format!("k{i}"), &value]);
    }
    // 600 KB behind: over 128 KB, under the backlog's 1 MB.
    assert_eq!(m.info_field("replication", "connected_slaves"), "1");
    assert!(replica_omems(&mut m)[0] > 600_000);
    for i in 0..6 {
        m.cmd_str(&["SET", &format!("k{i}"), &value]);
    }
    common::wait_for("the replica to be cut off", 5, || {
        Conn::connect(kv.port).info_field("replication", "connected_slaves") == "0"
    });
    assert_eq!(
        m.info_field("stats", "client_output_buffer_limit_disconnections"),
        "1"
    );
    drop(waiting);
}

#[test]
fn psync_with_the_lowest_offset_is_a_full_sync_not_a_crash() {
    let kv = start_kvstore(&[]);
    let mut m = Conn::connect(kv.port);
    // A backlog exists once a replica has synced.
    drop(silent_replica(kv.port));
    let replid = m.info_field("replication", "master_replid");
    let mut r = Conn::connect(kv.port);
    r.send(&[b"PSYNC", replid.as_bytes(), b"-9223372036854775808"]);
    let line = r.read_line();
    assert!(line.starts_with("+FULLRESYNC"), "{line}");
    assert_eq!(m.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_replica_restarted_from_its_aof_does_not_apply_writes_twice() {
    // The replica's AOF base was written after its full sync; the master's
    // later writes are in the incremental file after it. Restarted, the
    // replica must not ask to continue from the base's offset (the master
    // would send those writes again): Redis's AOF base has no replication
    // history, and the replica syncs in full.
    let master = start_kvstore(&["--repl-backlog-size", "10mb"]);
    let mut m = Conn::connect(master.port);
    m.cmd_str(&["SET", "counter", "0"]);
    let dir = tempfile::tempdir().unwrap();
    let replica = common::start_kvstore_in(dir, &["--appendonly", "yes"]);
    let mut r = Conn::connect(replica.port);
    r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_in_sync(&mut m, &mut r);
    common::wait_for("the AOF rewrite after the sync", 20, || {
        r.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && r.info_field("persistence", "aof_rewrites") == "1"
    });
    for _ in 0..10 {
        m.cmd_str(&["INCR", "counter"]);
    }
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["GET", "counter"]), b"$2\r\n10\r\n");
    let dir = {
        let mut replica = replica;
        let _ = r.try_cmd_str(&["SHUTDOWN", "NOSAVE"]);
        let _ = replica.child.wait();
        std::mem::replace(&mut replica.dir, tempfile::tempdir().unwrap())
    };
    let port = master.port.to_string();
    let again = common::start_kvstore_in(
        dir,
        &["--appendonly", "yes", "--replicaof", "127.0.0.1", &port],
    );
    let mut r = Conn::connect(again.port);
    common::wait_for("the restarted replica to load", 10, || {
        r.try_cmd_str(&["PING"]).is_ok_and(|p| p == b"+PONG\r\n")
    });
    wait_in_sync(&mut m, &mut r);
    assert_eq!(r.cmd_str(&["GET", "counter"]), b"$2\r\n10\r\n");
    assert_eq!(m.info_field("stats", "sync_partial_ok"), "0");
}

#[test]
fn a_replica_may_announce_a_host_name_and_wait_asks_for_acks_only_after_a_pause() {
    let master = start_kvstore(&[]);
    let mut m = Conn::connect(master.port);
    // REPLCONF ip-address takes a host name up to 255 bytes, as Redis's.
    let mut peer = Conn::connect(master.port);
    let name = "h".repeat(255);
    assert_eq!(peer.cmd_str(&["REPLCONF", "ip-address", &name]), b"+OK\r\n");
    assert_eq!(
        text(&peer.cmd_str(&["REPLCONF", "ip-address", &"h".repeat(256)])),
        "-ERR REPLCONF ip-address provided by replica instance is too long: 256 bytes\r\n"
    );
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut r = Conn::connect(replica.port);
    m.cmd_str(&["SET", "k", "v"]);
    wait_in_sync(&mut m, &mut r);
    // While clients are paused the stream does not move: a WAIT's GETACK
    // waits for the pause to end (Redis's beforeSleep).
    m.cmd_str(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]);
    let before: u64 = m
        .info_field("replication", "master_repl_offset")
        .parse()
        .unwrap();
    let mut waiter = Conn::connect(master.port);
    waiter.send_raw(&common::encode(&[b"SET", b"x", b"1"]));
    waiter.send_raw(&common::encode(&[b"CLIENT", b"PAUSE", b"5000", b"WRITE"]));
    waiter.send_raw(&common::encode(&[b"WAIT", b"1", b"300"]));
    assert_eq!(waiter.read_reply(), b"+OK\r\n");
    assert_eq!(waiter.read_reply(), b"+OK\r\n");
    waiter.read_reply();
    // The SET (27 bytes: *3 $3 SET $1 x $1 1), and no GETACK (37 bytes).
    let offset = |m: &mut Conn| -> u64 {
        m.info_field("replication", "master_repl_offset")
            .parse()
            .unwrap()
    };
    assert_eq!(offset(&mut m), before + 27);
    assert_eq!(m.cmd_str(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    common::wait_for("the GETACK once resumed", 10, || {
        offset(&mut m) == before + 27 + 37
    });
}

/// INFO's replication traffic: what a master wrote to its replicas (the
/// dump and the stream) and what a replica read from its master, each
/// also inside total_net_*_bytes; ordinary clients' traffic is not in it.
#[test]
fn replication_traffic_is_counted_apart() {
    let m = start_kvstore(&[]);
    let mut cm = Conn::connect(m.port);
    // Values LZF cannot shrink, so the dump is as big as the stream.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut value = || {
        (0..125)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{:08x}", x as u32)
            })
            .collect::<String>()
    };
    for i in 0..1000 {
        cm.cmd_str(&["SET", &format!("before:{i}"), &value()]);
    }
    assert_eq!(
        cm.info_num::<u64>("stats", "total_net_repl_output_bytes"),
        0
    );
    assert_eq!(cm.info_num::<u64>("stats", "total_net_repl_input_bytes"), 0);
    let r = start_kvstore(&["--replicaof", "127.0.0.1", &m.port.to_string()]);
    let mut cr = Conn::connect(r.port);
    wait_in_sync(&mut cm, &mut cr);
    for i in 0..1000 {
        cm.cmd_str(&["SET", &format!("after:{i}"), &value()]);
    }
    wait_in_sync(&mut cm, &mut cr);
    // The dump (over 1 MB of values) and the stream (1 MB more).
    let sent = cm.info_num::<u64>("stats", "total_net_repl_output_bytes");
    let received = cr.info_num::<u64>("stats", "total_net_repl_input_bytes");
    assert!(sent > 2_000_000, "master wrote {sent} bytes to its replica");
    assert!(received > 2_000_000, "replica read {received} bytes");
    assert!(received <= sent, "read {received}, sent {sent}");
    assert_eq!(cm.info_num::<u64>("stats", "total_net_repl_input_bytes"), 0);
    assert_eq!(
        cr.info_num::<u64>("stats", "total_net_repl_output_bytes"),
        0
    );
    assert!(cm.info_num::<u64>("stats", "total_net_output_bytes") > sent);
    assert!(cr.info_num::<u64>("stats", "total_net_input_bytes") > received);
    assert_eq!(cm.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(
        cm.info_num::<u64>("stats", "total_net_repl_output_bytes"),
        0
    );
}

/// A replica that loses an established link to its master tries again at
/// once (Redis 7.0's replicationHandleMasterDisconnection), not after the
/// one-second retry pause, and continues with a partial resync.
#[test]
fn a_lost_link_is_tried_again_at_once() {
    let m = start_kvstore(&[]);
    let mut cm = Conn::connect(m.port);
    cm.cmd_str(&["SET", "k", "v"]);
    let r = start_kvstore(&["--replicaof", "127.0.0.1", &m.port.to_string()]);
    let mut cr = Conn::connect(r.port);
    wait_in_sync(&mut cm, &mut cr);
    let partial = cm.info_num::<u64>("stats", "sync_partial_ok");
    let killed = Instant::now();
    assert_eq!(cr.cmd_str(&["CLIENT", "KILL", "TYPE", "master"]), b":1\r\n");
    while cm.info_num::<u64>("stats", "sync_partial_ok") == partial {
        assert!(
            killed.elapsed() < Duration::from_millis(900),
            "the replica waited before reconnecting"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_in_sync(&mut cm, &mut cr);
}

/// No backlog before a replica's first synchronisation (a master that was
/// never reached), nor after promoting such a replica: its writes move no
/// offset until a replica attaches, which starts a new history (as Redis
/// 7.0 shows in INFO replication).
#[test]
fn no_backlog_before_a_first_synchronisation() {
    let s = start_kvstore(&[]);
    let mut c = Conn::connect(s.port);
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    assert_eq!(
        c.cmd_str(&["REPLICAOF", "127.0.0.1", &port.to_string()]),
        b"+OK\r\n"
    );
    assert_eq!(c.info_field("replication", "repl_backlog_active"), "0");
    assert_eq!(
        c.info_field("replication", "repl_backlog_first_byte_offset"),
        "0"
    );
    let old_id = c.info_field("replication", "master_replid");
    assert_eq!(c.cmd_str(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(c.info_field("replication", "repl_backlog_active"), "0");
    assert_eq!(c.info_field("replication", "master_replid2"), old_id);
    c.cmd_str(&["SET", "x", "1"]);
    assert_eq!(c.info_field("replication", "master_repl_offset"), "0");
    let promoted_id = c.info_field("replication", "master_replid");
    let r = start_kvstore(&["--replicaof", "127.0.0.1", &s.port.to_string()]);
    let mut cr = Conn::connect(r.port);
    wait_in_sync(&mut c, &mut cr);
    assert_eq!(c.info_field("replication", "repl_backlog_active"), "1");
    assert_ne!(c.info_field("replication", "master_replid"), promoted_id);
    assert_eq!(c.info_field("replication", "second_repl_offset"), "-1");
    assert_eq!(cr.cmd_str(&["GET", "x"]), b"$1\r\n1\r\n");
}

/// A client that asks for a full sync without `capa eof` (redis-py's
/// psync(), an old replica) cannot take a diskless transfer: it gets a
/// snapshot to disk at once, not the diskless delay and its keepalive
/// newlines (Redis's syncCommand, case 3). One with `capa eof` waits.
fn first_lines_of_a_full_sync(port: u16, capa_eof: bool) -> (String, Duration) {
    let mut c = Conn::connect(port);
    if capa_eof {
        assert_eq!(
            c.cmd_str(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
            b"+OK\r\n"
        );
    }
    let started = Instant::now();
    c.send_raw(b"PSYNC ? -1\r\n");
    let line = c.read_line();
    (line, started.elapsed())
}

#[test]
fn a_full_sync_without_capa_eof_starts_at_once() {
    let args = [
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "3",
    ];
    let kv = start_kvstore(&args);
    let (line, took) = first_lines_of_a_full_sync(kv.port, false);
    assert!(line.starts_with("+FULLRESYNC "), "{line:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let kv = start_kvstore(&args);
    let (line, took) = first_lines_of_a_full_sync(kv.port, true);
    // The keepalive newlines of the wait come first.
    assert_eq!(line, "");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    let Some(redis) = common::start_redis(&args) else {
        return;
    };
    let (line, took) = first_lines_of_a_full_sync(redis.port, false);
    assert!(line.starts_with("+FULLRESYNC "), "{line:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}
