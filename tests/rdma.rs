//! RDMA full sync, end to end: a kvstore replica of a kvstore master takes
//! its snapshot over the fake RDMA transport (two processes joined through
//! a fabric directory, `rdma-fake` feature: `cargo test --features
//! rdma-fake --test rdma`), the command stream continues on TCP, and every
//! injected fault ends in a TCP full sync of the same file with equal data.
//! The real-device test runs wherever /sys/class/infiniband lists a device
//! and says plainly when there is none.

mod common;

#[cfg(feature = "rdma-fake")]
mod fake_transport {
    use super::common::{self, Conn, ServerProcess};
    use std::time::Duration;

    fn start(fabric: &std::path::Path, faults: &str, args: &[&str]) -> ServerProcess {
        let fabric = fabric.to_str().unwrap();
        let mut envs = vec![("KVSTORE_RDMA_FAKE", fabric)];
        if !faults.is_empty() {
            envs.push(("KVSTORE_RDMA_FAKE_FAULTS", faults));
        }
        common::start_kvstore_env(tempfile::tempdir().unwrap(), args, &envs)
    }

    /// Keys of every type, in two databases.
    fn fill(c: &mut Conn, strings: usize) {
        // key:N → 100 bytes, pipelined in batches.
        for start in (0..strings).step_by(10_000) {
            let end = (start + 10_000).min(strings);
            let mut batch = Vec::new();
            for i in start..end {
                // Incompressible, so the dump is as large as the data.
                let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let value: String = (0..100)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        char::from(b'!' + (x % 90) as u8)
                    })
                    .collect();
                batch.extend(common::encode(&[
                    b"SET",
                    format!("key:{i}").as_bytes(),
                    value.as_bytes(),
                ]));
            }
            c.send_raw(&batch);
            for _ in start..end {
                assert_eq!(c.read_reply(), b"+OK\r\n");
            }
        }
        for db in ["0", "5"] {
            c.cmd_str(&["SELECT", db]);
            for i in 0..300 {
                let n = i.to_string();
                c.cmd_str(&["RPUSH", &format!("list:{}", i % 7), &n, "x"]);
                c.cmd_str(&["SADD", &format!("set:{}", i % 5), &n]);
                c.cmd_str(&["HSET", &format!("hash:{}", i % 3), &n, &"v".repeat(i)]);
                c.cmd_str(&["ZADD", &format!("zset:{}", i % 4), &n, &format!("m{n}")]);
            }
            c.cmd_str(&["SET", "ttl", "v", "EX", "10000"]);
            c.cmd_str(&["SADD", "ints", "1", "2", "3"]);
        }
        c.cmd_str(&["SELECT", "0"]);
    }

    fn text(raw: &[u8]) -> String {
        String::from_utf8_lossy(raw).to_string()
    }

    /// Everything in the dataset, key by key: the populated strings through
    /// MGET in batches, every other key with its type, whole value (sorted
    /// where the order is not defined) and TTL, in both databases.
    fn digest(c: &mut Conn, strings: usize) -> Vec<String> {
        let mut out = Vec::new();
        for db in ["0", "5"] {
            c.cmd_str(&["SELECT", db]);
            out.push(format!("db{db} size {}", text(&c.cmd_str(&["DBSIZE"]))));
            let (_, keys) = common::aggregate_items(&c.cmd_str(&["KEYS", "[^k]*"])).unwrap();
            let mut keys: Vec<Vec<u8>> = keys
                .iter()
                .map(|k| common::bulk_payload(k).unwrap().to_vec())
                .collect();
            keys.sort();
            for key in keys {
                let ty = text(&c.cmd(&[b"TYPE", &key]));
                let value = match ty.as_str() {
                    "+string\r\n" => text(&c.cmd(&[b"GET", &key])),
                    "+list\r\n" => text(&c.cmd(&[b"LRANGE", &key, b"0", b"-1"])),
                    "+zset\r\n" => text(&c.cmd(&[b"ZRANGE", &key, b"0", b"-1", b"WITHSCORES"])),
                    "+set\r\n" | "+hash\r\n" => {
                        let cmd: &[u8] = if ty == "+set\r\n" {
                            b"SMEMBERS"
                        } else {
                            b"HGETALL"
                        };
                        let (_, items) = common::aggregate_items(&c.cmd(&[cmd, &key])).unwrap();
                        let mut items: Vec<String> = if ty == "+set\r\n" {
                            items.iter().map(|i| text(i)).collect()
                        } else {
                            items.chunks(2).map(|p| text(&p.concat())).collect()
                        };
                        items.sort();
                        items.join(",")
                    }
                    other => panic!("unexpected type {other}"),
                };
                let ttl = c.cmd(&[b"PTTL", &key]) != b":-1\r\n";
                out.push(format!("{} {ty} {value} {ttl}", text(&key)));
            }
        }
        c.cmd_str(&["SELECT", "0"]);
        for start in (0..strings).step_by(1000) {
            let mut args = vec!["MGET".to_string()];
            args.extend((start..(start + 1000).min(strings)).map(|i| format!("key:{i}")));
            let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
            out.push(text(&c.cmd_str(&refs)));
        }
        out
    }

    fn info(c: &mut Conn, field: &str) -> String {
        c.info_field("replication", field)
    }

    fn wait_in_sync(master: &mut Conn, replica: &mut Conn) {
        common::wait_for("the replica to catch up", 60, || {
            info(replica, "master_link_status") == "up"
                && info(replica, "slave_repl_offset") == info(master, "master_repl_offset")
        });
    }

    /// A full sync of `strings` + collections with the replica's faults;
    /// writes made during the transfer must arrive too. Returns both
    /// connections for further checks.
    fn sync_with(
        faults: &str,
        strings: usize,
    ) -> (tempfile::TempDir, ServerProcess, ServerProcess, Conn, Conn) {
        let fabric = tempfile::tempdir().unwrap();
        let master = start(fabric.path(), "", &[]);
        let mut m = Conn::connect(master.port);
        fill(&mut m, strings);
        let replica = start(fabric.path(), faults, &[]);
        let mut r = Conn::connect(replica.port);
        assert_eq!(info(&mut r, "rdma_device"), "fake");
        r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        // Writes while the replica synchronises: kept, then streamed.
        for i in 0..200 {
            m.cmd_str(&["SET", &format!("during:{i}"), &i.to_string()]);
            m.cmd_str(&["INCR", "counter"]);
        }
        wait_in_sync(&mut m, &mut r);
        m.cmd_str(&["SET", "after", "1"]);
        m.cmd_str(&["DEL", "key:1"]);
        wait_in_sync(&mut m, &mut r);
        assert!(
            digest(&mut m, strings) == digest(&mut r, strings),
            "datasets differ"
        );
        assert_eq!(r.cmd_str(&["GET", "counter"]), b"$3\r\n200\r\n");
        // The fabric goes last, after both servers (reverse binding order).
        (fabric, master, replica, m, r)
    }

    #[test]
    fn a_replica_takes_its_full_sync_over_rdma_and_then_the_stream() {
        let keys = 1_000_000;
        let t = std::time::Instant::now();
        let (_fabric, _master, _replica, mut m, mut r) = sync_with("", keys);
        println!("{keys} keys: synced and compared in {:?}", t.elapsed());
        assert_eq!(info(&mut m, "rdma_fullsyncs"), "1");
        assert_eq!(info(&mut m, "rdma_fallbacks"), "0");
        assert_eq!(info(&mut r, "rdma_fullsyncs"), "1");
        assert_eq!(info(&mut r, "rdma_failures"), "0");
        let bytes: u64 = info(&mut r, "rdma_last_bytes").parse().unwrap();
        assert!(
            bytes > keys as u64 * 100,
            "{keys} keys of 100 bytes moved {bytes} bytes"
        );
        assert_eq!(r.cmd_str(&["DBSIZE"]), m.cmd_str(&["DBSIZE"]));
    }

    /// Each fault ends in a TCP full sync of the same file, data equal.
    fn falls_back(faults: &str) {
        let (_fabric, _master, _replica, mut m, mut r) = sync_with(faults, 50_000);
        assert_eq!(info(&mut m, "rdma_fullsyncs"), "0", "{faults}");
        assert_eq!(info(&mut m, "rdma_fallbacks"), "1", "{faults}");
        assert_eq!(info(&mut m, "rdma_failures"), "1", "{faults}");
        assert_eq!(info(&mut r, "rdma_failures"), "1", "{faults}");
        assert_eq!(info(&mut r, "rdma_fullsyncs"), "0", "{faults}");
    }

    #[test]
    fn a_corrupted_read_fails_the_crc_and_falls_back_to_tcp() {
        falls_back("corrupt-at=3");
    }

    #[test]
    fn a_failed_read_falls_back_to_tcp() {
        falls_back("error-at=2");
    }

    #[test]
    fn a_short_read_falls_back_to_tcp() {
        falls_back("short-at=0");
    }

    #[test]
    fn a_dead_link_falls_back_to_tcp() {
        falls_back("die-at=1");
    }

    #[test]
    fn a_master_that_gives_up_first_sends_tcp_and_the_replica_follows() {
        // The replica's reads take 3 s each, so it reports no progress for
        // longer than the master's repl-timeout: the master falls back to
        // TCP while the fetch still runs, and the replica takes the `$len`
        // that crosses its work instead of its own verdict.
        let fabric = tempfile::tempdir().unwrap();
        let master = start(fabric.path(), "", &["--repl-timeout", "2"]);
        let mut m = Conn::connect(master.port);
        fill(&mut m, 50_000);
        let replica = start(fabric.path(), "delay-us=3000000", &[]);
        let mut r = Conn::connect(replica.port);
        r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        common::wait_for("the offer", 20, || {
            text(&m.cmd_str(&["INFO", "replication"])).contains("state=send_bulk")
        });
        // Kept while the transfer runs, sent after it.
        for i in 0..100 {
            m.cmd_str(&["RPUSH", "during", &i.to_string()]);
        }
        wait_in_sync(&mut m, &mut r);
        assert!(digest(&mut m, 50_000) == digest(&mut r, 50_000));
        assert_eq!(info(&mut m, "rdma_fallbacks"), "1");
        assert_eq!(info(&mut m, "rdma_fullsyncs"), "0");
        assert_eq!(info(&mut r, "rdma_failures"), "1");
        assert_eq!(r.cmd_str(&["LLEN", "during"]), b":100\r\n");
    }

    #[test]
    fn a_replica_that_does_not_ask_for_rdma_gets_tcp() {
        let fabric = tempfile::tempdir().unwrap();
        let master = start(fabric.path(), "", &[]);
        let mut m = Conn::connect(master.port);
        fill(&mut m, 1000);
        let replica = start(fabric.path(), "", &["--repl-rdma", "no"]);
        let mut r = Conn::connect(replica.port);
        r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        wait_in_sync(&mut m, &mut r);
        assert!(digest(&mut m, 1000) == digest(&mut r, 1000));
        assert_eq!(info(&mut m, "rdma_fullsyncs"), "0");
        assert_eq!(info(&mut m, "rdma_fallbacks"), "0");
        assert_eq!(info(&mut r, "rdma_enabled"), "0");
    }

    #[test]
    fn a_replica_with_a_device_follows_a_redis_master_over_tcp() {
        // Redis ignores `capa rdma` and sends its dump as always.
        let Some(redis) = common::start_redis(&[]) else {
            return;
        };
        let mut m = Conn::connect(redis.port);
        fill(&mut m, 1000);
        let fabric = tempfile::tempdir().unwrap();
        let replica = start(fabric.path(), "", &[]);
        let mut r = Conn::connect(replica.port);
        r.cmd_str(&["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
        wait_in_sync(&mut m, &mut r);
        assert!(digest(&mut m, 1000) == digest(&mut r, 1000));
        assert_eq!(info(&mut r, "rdma_fullsyncs"), "0");
        assert_eq!(info(&mut r, "rdma_failures"), "0");
    }

    #[test]
    fn a_replica_that_vanishes_mid_transfer_leaves_the_master_serving() {
        let fabric = tempfile::tempdir().unwrap();
        let master = start(fabric.path(), "", &[]);
        let mut m = Conn::connect(master.port);
        fill(&mut m, 50_000);
        let mut replica = start(fabric.path(), "delay-us=200000", &[]);
        let mut r = Conn::connect(replica.port);
        r.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        common::wait_for("the transfer to start", 20, || {
            text(&m.cmd_str(&["INFO", "replication"])).contains("state=send_bulk")
                && std::fs::read_dir(fabric.path()).unwrap().count() > 0
        });
        std::thread::sleep(Duration::from_millis(300));
        replica.child.kill().unwrap();
        replica.child.wait().unwrap();
        common::wait_for("the master to drop the replica", 20, || {
            info(&mut m, "connected_slaves") == "0"
        });
        assert_eq!(m.cmd_str(&["PING"]), b"+PONG\r\n");
        // Its region and queue pair went with it (the responder's socket).
        let left: Vec<_> = std::fs::read_dir(fabric.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "left in the fabric: {left:?}");
        // The region went with the replica: the master can sync another.
        let replica2 = start(fabric.path(), "", &[]);
        let mut r2 = Conn::connect(replica2.port);
        r2.cmd_str(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        wait_in_sync(&mut m, &mut r2);
        assert!(digest(&mut m, 50_000) == digest(&mut r2, 50_000));
        assert_eq!(info(&mut m, "rdma_fullsyncs"), "1");
    }
}

/// On a host with an RDMA device (soft-RoCE counts: `rdma link add rxe0
/// type rxe netdev eth0`), a build with `--features rdma` must open it.
#[test]
fn a_real_device_is_found_where_one_exists() {
    let devices: Vec<String> = std::fs::read_dir("/sys/class/infiniband")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    if devices.is_empty() {
        println!("SKIPPED: no RDMA device in /sys/class/infiniband on this host; the real-device test did not run");
        return;
    }
    if !cfg!(feature = "rdma") {
        println!("SKIPPED: RDMA devices {devices:?} exist but this build lacks --features rdma");
        return;
    }
    let server = common::start_kvstore(&[]);
    let mut c = common::Conn::connect(server.port);
    let name = c.info_field("replication", "rdma_device");
    assert!(
        devices.contains(&name),
        "kvstore opened {name:?}, devices are {devices:?}"
    );
}
