//! Eviction at `maxmemory`, against the real binary: memory stays under
//! the limit, each policy picks the keys it should, evicted keys are
//! notified and reach a replica as deletions, noeviction refuses writes
//! with Redis's OOM error, and a keyspace table does not grow past the
//! limit into a burst of evictions.

mod common;

use common::{start_kvstore, Conn, Rng};

const LIMIT: u64 = 8 << 20;

/// Write `n` keys `prefix:i` of a 200-byte value, pipelined.
fn fill(c: &mut Conn, prefix: &str, n: usize, ttl: bool) {
    let value = "v".repeat(200);
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut batch = Vec::new();
        for i in chunk {
            let key = format!("{prefix}:{i}");
            if ttl {
                batch.extend(common::encode(&[
                    b"SET",
                    key.as_bytes(),
                    value.as_bytes(),
                    b"EX",
                    b"10000",
                ]));
            } else {
                batch.extend(common::encode(&[b"SET", key.as_bytes(), value.as_bytes()]));
            }
        }
        c.send_raw(&batch);
        for _ in chunk {
            let r = c.read_reply();
            assert_eq!(r, b"+OK\r\n", "{}", String::from_utf8_lossy(&r));
        }
    }
}

fn start(policy: &str) -> common::ServerProcess {
    start_kvstore(&[
        "--maxmemory",
        &LIMIT.to_string(),
        "--maxmemory-policy",
        policy,
    ])
}

fn exists(c: &mut Conn, key: &str) -> bool {
    c.cmd_str(&["EXISTS", key]) == b":1\r\n"
}

#[test]
fn allkeys_lru_stays_under_the_limit_and_keeps_recently_read_keys() {
    let kv = start("allkeys-lru");
    let mut c = Conn::connect(kv.port);
    fill(&mut c, "hot", 500, false);
    // The access clock counts seconds: each round writes new keys, lets a
    // second pass, then reads the hot keys, so that every round's cold keys
    // are older than the hot keys' last read.
    for round in 0..10 {
        fill(&mut c, &format!("cold{round}"), 4000, false);
        std::thread::sleep(std::time::Duration::from_millis(1050));
        for i in 0..500 {
            c.cmd_str(&["GET", &format!("hot:{i}")]);
        }
    }
    let used = c.info_num::<u64>("memory", "used_memory");
    assert!(
        used <= LIMIT + (LIMIT / 10),
        "used_memory {used} over the limit {LIMIT}"
    );
    assert!(c.info_num::<u64>("stats", "evicted_keys") > 5_000);
    let kept = (0..500)
        .filter(|i| exists(&mut c, &format!("hot:{i}")))
        .count();
    assert!(
        kept >= 450,
        "only {kept} of 500 recently read keys survived"
    );
}

#[test]
fn a_huge_maxmemory_samples_samples_at_most_the_keyspace() {
    // Redis takes any positive int; a pass samples at most the keys there
    // are, and eviction goes on with the largest.
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let kv = start(policy);
        let mut c = Conn::connect(kv.port);
        // Room for a few thousand keys: every pass walks all of them.
        let limit = c.info_num::<u64>("memory", "used_memory") + (1 << 20);
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
            b"+OK\r\n"
        );
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "maxmemory-samples", "2147483647"]),
            b"+OK\r\n"
        );
        fill(&mut c, "k", 6_000, true);
        assert!(c.info_num::<u64>("stats", "evicted_keys") > 0, "{policy}");
        let used = c.info_num::<u64>("memory", "used_memory");
        assert!(used <= limit + limit / 10, "{policy}: used_memory {used}");
        assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn volatile_policies_never_touch_persistent_keys() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let kv = start(policy);
        let mut c = Conn::connect(kv.port);
        fill(&mut c, "keep", 3000, false);
        fill(&mut c, "temp", 30_000, true);
        assert!(c.info_num::<u64>("stats", "evicted_keys") > 0, "{policy}");
        let kept = (0..3000)
            .filter(|i| exists(&mut c, &format!("keep:{i}")))
            .count();
        assert_eq!(kept, 3000, "{policy} evicted persistent keys");
        // With only persistent keys left to grow, writes are refused.
        let value = "p".repeat(200);
        let mut refused = false;
        for i in 0..100_000 {
            let r = c.cmd_str(&["SET", &format!("more:{i}"), &value]);
            if r.starts_with(b"-OOM") {
                assert_eq!(
                    r,
                    b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
                );
                refused = true;
                break;
            }
        }
        assert!(refused, "{policy} never refused a write");
        // Reads still work.
        assert!(exists(&mut c, "keep:1"));
    }
}

#[test]
fn volatile_ttl_evicts_the_nearest_expiry_first() {
    let kv = start("volatile-ttl");
    let mut c = Conn::connect(kv.port);
    let value = "v".repeat(200);
    for i in 0..2000 {
        c.cmd_str(&["SET", &format!("late:{i}"), &value, "EX", "100000"]);
    }
    for i in 0..2000 {
        c.cmd_str(&["SET", &format!("soon:{i}"), &value, "EX", "1000"]);
    }
    fill(&mut c, "bulk", 40_000, true);
    let late = (0..2000)
        .filter(|i| exists(&mut c, &format!("late:{i}")))
        .count();
    let soon = (0..2000)
        .filter(|i| exists(&mut c, &format!("soon:{i}")))
        .count();
    assert!(late > soon, "late {late} soon {soon}");
}

#[test]
fn allkeys_lfu_keeps_frequently_read_keys() {
    let kv = start("allkeys-lfu");
    let mut c = Conn::connect(kv.port);
    fill(&mut c, "freq", 300, false);
    for _ in 0..30 {
        for i in 0..300 {
            c.cmd_str(&["GET", &format!("freq:{i}")]);
        }
    }
    let f: i64 = String::from_utf8_lossy(&c.cmd_str(&["OBJECT", "FREQ", "freq:1"]))
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(f > 5, "the counter grew: {f}");
    fill(&mut c, "once", 40_000, false);
    let kept = (0..300)
        .filter(|i| exists(&mut c, &format!("freq:{i}")))
        .count();
    assert!(kept >= 280, "only {kept} of 300 frequent keys survived");
}

#[test]
fn noeviction_refuses_writes_and_allows_reads_and_deletes() {
    let kv = start("noeviction");
    let mut c = Conn::connect(kv.port);
    let value = "v".repeat(1000);
    let mut refused_at = None;
    for i in 0..20_000 {
        if c.cmd_str(&["SET", &format!("k:{i}"), &value])
            .starts_with(b"-OOM")
        {
            refused_at = Some(i);
            break;
        }
    }
    assert!(refused_at.is_some());
    assert_eq!(c.info_num::<u64>("stats", "evicted_keys"), 0);
    assert_eq!(
        c.cmd_str(&["GET", "k:0"]).len(),
        "$1000\r\n".len() + 1000 + 2
    );
    assert_eq!(c.cmd_str(&["DEL", "k:0", "k:1", "k:2"]), b":3\r\n");
    // Queued in MULTI while out of memory: the transaction fails.
    c.cmd_str(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(c.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert!(c.cmd_str(&["GET", "k:5"]).starts_with(b"-OOM"));
    assert!(c.cmd_str(&["EXEC"]).starts_with(b"-EXECABORT"));
}

#[test]
fn evicted_keys_are_notified_and_deleted_on_the_replica() {
    let master = start("allkeys-random");
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut m = Conn::connect(master.port);
    let mut r = Conn::connect(replica.port);
    common::wait_for("the link", 20, || {
        r.info_field("replication", "master_link_status") == "up"
    });
    m.cmd_str(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    let mut sub = Conn::connect(master.port);
    sub.cmd_str(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    fill(&mut m, "k", 40_000, false);
    let evicted = m.info_num::<u64>("stats", "evicted_keys");
    assert!(evicted > 0);
    let (msgs, _) = sub.read_available(std::time::Duration::from_millis(300));
    assert!(
        String::from_utf8_lossy(&msgs).contains("evicted"),
        "no evicted event"
    );
    // Every command may evict while the master is over its limit: lift
    // it, so that the datasets can be compared at rest.
    m.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]);
    common::wait_for("the replica to catch up", 20, || {
        r.info_field("replication", "slave_repl_offset")
            == m.info_field("replication", "master_repl_offset")
    });
    // The replica never evicts on its own; it mirrors the master's DELs.
    assert_eq!(r.info_num::<u64>("stats", "evicted_keys"), 0);
    assert_eq!(m.cmd_str(&["DBSIZE"]), r.cmd_str(&["DBSIZE"]));
    for i in (0..40_000).step_by(997) {
        let key = format!("k:{i}");
        assert_eq!(exists(&mut m, &key), exists(&mut r, &key), "{key}");
    }
}

fn int_reply(raw: &[u8]) -> i64 {
    String::from_utf8_lossy(raw)
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not an integer: {}", String::from_utf8_lossy(raw)))
}

#[test]
fn access_clocks_survive_a_reload_and_redis_reads_them() {
    // LFU: the counter travels in FREQ records. No decay: a counter read
    // after the minute clock ticks would be one lower, as in Redis.
    let kv = start_kvstore(&[
        "--maxmemory-policy",
        "allkeys-lfu",
        "--lfu-decay-time",
        "0",
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "hot", "v"]);
    c.cmd_str(&["SET", "cold", "v"]);
    for _ in 0..2000 {
        c.cmd_str(&["GET", "hot"]);
    }
    let before = int_reply(&c.cmd_str(&["OBJECT", "FREQ", "hot"]));
    assert!(before > 10, "counter {before}");
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(int_reply(&c.cmd_str(&["OBJECT", "FREQ", "hot"])), before);
    assert_eq!(int_reply(&c.cmd_str(&["OBJECT", "FREQ", "cold"])), 5);

    // LRU: the idle time travels in IDLE records; redis-server 7.0 loads
    // the dump and sees the same idle time.
    let kv = start_kvstore(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["SET", "k", "v"]);
    let payload = c.cmd_str(&["DUMP", "k"]);
    let payload = common::bulk_payload(&payload).unwrap().to_vec();
    c.cmd(&[b"RESTORE", b"old", b"0", &payload, b"IDLETIME", b"5000"]);
    assert_eq!(c.cmd_str(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    let idle = int_reply(&c.cmd_str(&["OBJECT", "IDLETIME", "old"]));
    assert!((5000..5010).contains(&idle), "idle {idle}");
    assert_eq!(c.cmd_str(&["SAVE"]), b"+OK\r\n");
    let dump = kv.dir.path().join("dump.rdb");
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(&dump, copy.path().join("restored.rdb")).unwrap();
    let dir = copy.path().to_str().unwrap().to_string();
    let Some(redis) = common::start_redis(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--dir",
        &dir,
        "--dbfilename",
        "restored.rdb",
    ]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    let idle = int_reply(&r.cmd_str(&["OBJECT", "IDLETIME", "old"]));
    assert!((5000..5010).contains(&idle), "redis sees idle {idle}");
}

/// A client that has sent part of a big argument: its query buffer holds it.
fn half_sent_big_argument(port: u16, bytes: usize) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", bytes * 2);
    // A client evicted while it is still sending gets a reset: the
    // eviction this sets up came early, which the caller checks for.
    let sent = s
        .write_all(head.as_bytes())
        .and_then(|_| s.write_all(&vec![b'x'; bytes]));
    if let Err(e) = sent {
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "{e}"
        );
    }
    s
}

fn closed(s: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(0) | Err(_)) && {
        // A timeout means still open; a reset or EOF means closed.
        match s.read(&mut buf) {
            Ok(0) => true,
            Err(e) => {
                e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut
            }
            Ok(_) => false,
        }
    }
}

#[test]
fn maxmemory_clients_disconnects_the_biggest_clients_but_not_no_evict_ones() {
    let kv = start_kvstore(&[]);
    let mut c = Conn::connect(kv.port);
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "maxmemory-clients", "1mb"]),
        b"+OK\r\n"
    );
    // A protected client with a big query buffer stays.
    let mut keeper = std::net::TcpStream::connect(("127.0.0.1", kv.port)).unwrap();
    {
        use std::io::{Read, Write};
        keeper.write_all(b"CLIENT NO-EVICT on\r\n").unwrap();
        let mut buf = [0u8; 5];
        keeper.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"+OK\r\n");
        keeper
            .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$200000\r\n")
            .unwrap();
        keeper.write_all(&vec![b'x'; 100_000]).unwrap();
    }
    let mut small = half_sent_big_argument(kv.port, 100_000);
    let mut big = half_sent_big_argument(kv.port, 600_000);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(closed(&mut big), "the biggest evictable client is gone");
    assert!(!closed(&mut small), "a small client stays");
    assert!(!closed(&mut keeper), "a NO-EVICT client stays");
    assert!(
        c.info_field("stats", "evicted_clients")
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    // Percentages of maxmemory, and their limits, as Redis.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "maxmemory-clients", "10%"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "maxmemory-clients"]),
        b"*2\r\n$17\r\nmaxmemory-clients\r\n$3\r\n10%\r\n"
    );
    assert!(c
        .cmd_str(&["CONFIG", "SET", "maxmemory-clients", "101%"])
        .starts_with(b"-ERR CONFIG SET failed"));
}

/// Random keys without a dependency.
impl Rng {
    /// A key as Redis's test suite's randomKey makes them: small integers
    /// that collide, 32- and 64-bit integers, or 1 to 256 letters.
    fn key(&mut self) -> String {
        match self.next() % 4 {
            0 => (self.next() % 1000).to_string(),
            1 => (self.next() % 4_000_000_000).to_string(),
            2 => (self.next() % 1_000_000_000_000).to_string(),
            _ => {
                let len = 1 + (self.next() % 256) as usize;
                (0..len)
                    .map(|_| (b'a' + (self.next() % 26) as u8) as char)
                    .collect()
            }
        }
    }
}

/// Redis's "maxmemory - is the memory limit honoured?": 100 KB over what
/// an empty server uses, fill with keys carrying a TTL until 4 KB short of
/// it, then write as many again: used memory ends under the limit plus 4 KB.
#[test]
fn maxmemory_limit_is_honoured_for_keys_with_a_ttl() {
    let kv = start_kvstore(&[]);
    let mut c = Conn::connect(kv.port);
    let mut rng = Rng::seeded();
    for policy in ["allkeys-lru", "volatile-ttl", "allkeys-random"] {
        assert_eq!(c.cmd_str(&["FLUSHALL"]), b"+OK\r\n");
        let limit = c.info_num::<u64>("memory", "used_memory") + 100 * 1024;
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
            b"+OK\r\n"
        );
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", policy]),
            b"+OK\r\n"
        );
        let mut numkeys = 0;
        loop {
            let r = c.cmd_str(&["SETEX", &rng.key(), "10000", "x"]);
            assert_eq!(r, b"+OK\r\n", "{policy}: {}", String::from_utf8_lossy(&r));
            numkeys += 1;
            if c.info_num::<u64>("memory", "used_memory") + 4096 > limit {
                assert!(numkeys > 10, "{policy}: full after {numkeys} keys");
                break;
            }
        }
        for _ in 0..numkeys {
            let r = c.cmd_str(&["SETEX", &rng.key(), "10000", "x"]);
            assert_eq!(r, b"+OK\r\n", "{policy}: {}", String::from_utf8_lossy(&r));
        }
        let used = c.info_num::<u64>("memory", "used_memory");
        assert!(
            used < limit + 4096,
            "{policy}: used_memory {used} after {numkeys} more keys, limit {limit}"
        );
    }
}

/// Redis's "Don't rehash if used memory exceeds maxmemory after rehash":
/// a keyspace table that would grow past `maxmemory` waits, instead of
/// growing and forcing evictions. kvstore's keyspace tables grow when
/// they hold twice as many keys as buckets: at the 8193rd key, from 4096
/// to 16384 buckets (128 KB).
#[test]
fn the_keyspace_does_not_grow_past_maxmemory_into_evictions() {
    const AT_GROWTH: &str = "8192";
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let mut c = Conn::connect(kv.port);
    // As Redis's test: no per-command latency histograms, which the first
    // run of each command would allocate under the limit.
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "latency-tracking", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]),
        b"+OK\r\n"
    );
    // Without a limit the table grows at that key: 8193 keys cost far
    // more than 8192 did.
    assert_eq!(
        c.cmd_str(&["DEBUG", "POPULATE", AT_GROWTH, "key", "1"]),
        b"+OK\r\n"
    );
    let before = c.info_num::<u64>("memory", "used_memory");
    assert_eq!(c.cmd_str(&["SET", "k1", "v1"]), b"+OK\r\n");
    let after = c.info_num::<u64>("memory", "used_memory");
    assert!(
        after > before + 64 * 1024,
        "the 8193rd key did not grow the table: {before} -> {after}"
    );
    // Every command the limited part runs has run once (first runs may
    // allocate for good: command statistics, say).
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":8193\r\n");
    assert_eq!(c.info_num::<u64>("stats", "evicted_keys"), 0);
    assert_eq!(c.cmd_str(&["FLUSHALL"]), b"+OK\r\n");

    // With a limit 10 KB over what is used, it does not.
    assert_eq!(
        c.cmd_str(&["DEBUG", "POPULATE", AT_GROWTH, "key", "1"]),
        b"+OK\r\n"
    );
    let limit = c.info_num::<u64>("memory", "used_memory") + 10 * 1024;
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["SET", "k1", "v1"]), b"+OK\r\n");
    // The next write would evict if the last one had grown the table.
    assert_eq!(c.cmd_str(&["SET", "k2", "v2"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["DBSIZE"]), b":8194\r\n");
    assert_eq!(c.info_num::<u64>("stats", "evicted_keys"), 0);
}

/// A key evicted to make room for a client's own EXEC is one it may be
/// watching: the transaction then fails (a null reply), as in Redis, where
/// eviction runs before the command and touches every watcher.
fn exec_fails_when_eviction_takes_a_watched_key(port: u16) {
    let mut a = Conn::connect(port);
    let mut b = Conn::connect(port);
    // Per-command latency histograms are allocated on first use: off, so
    // only the keys move memory.
    assert_eq!(
        a.cmd_str(&["CONFIG", "SET", "latency-tracking", "no"]),
        b"+OK\r\n"
    );
    let used = a.info_num::<u64>("memory", "used_memory");
    let limit = (used + 100 * 1024).to_string();
    assert_eq!(
        a.cmd_str(&["CONFIG", "SET", "maxmemory", &limit]),
        b"+OK\r\n"
    );
    assert_eq!(
        a.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]),
        b"+OK\r\n"
    );
    assert_eq!(a.cmd_str(&["SET", "w", "x", "EX", "1000"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["WATCH", "w"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert_eq!(a.cmd_str(&["GET", "other"]), b"+QUEUED\r\n");
    // 200 KB more: over the limit, with `w` the only key that may go.
    assert_eq!(b.cmd_str(&["SETBIT", "big", "1600000", "0"]), b":0\r\n");
    // Only reads are queued, so EXEC runs despite the memory; `w` was
    // evicted on its way in.
    assert_eq!(a.cmd_str(&["EXEC"]), b"*-1\r\n");
    assert_eq!(a.cmd_str(&["EXISTS", "w"]), b":0\r\n");
    assert_eq!(a.info_num::<u64>("stats", "evicted_keys"), 1);
}

#[test]
fn exec_fails_when_eviction_takes_a_watched_key_as_in_redis() {
    let kv = start_kvstore(&[]);
    exec_fails_when_eviction_takes_a_watched_key(kv.port);
    if let Some(redis) = common::start_redis(&[]) {
        exec_fails_when_eviction_takes_a_watched_key(redis.port);
    }
}

/// CONFIG SET maxmemory below what is used evicts at once, as Redis's
/// updateMaxmemory does, not at the next command: a subscriber gets the
/// `evicted` event with nothing else sent (Redis's unit/pubsub "Keyspace
/// notifications: evicted events" waited for it).
#[test]
fn a_lower_maxmemory_evicts_at_once() {
    let s = start_kvstore(&["--maxmemory-policy", "allkeys-lru"]);
    let mut c = Conn::connect(s.port);
    let mut sub = Conn::connect(s.port);
    c.cmd_str(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    sub.send(&[b"PSUBSCRIBE", b"*"]);
    assert_eq!(
        sub.read_reply(),
        b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n"
    );
    c.cmd_str(&["SET", "foo", "bar"]);
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    assert_eq!(
        sub.read_reply(),
        b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$22\r\n__keyevent@0__:evicted\r\n$3\r\nfoo\r\n"
    );
    assert_eq!(c.info_field("stats", "evicted_keys"), "1");
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
}

/// The commands streamed on `repl` until it is quiet, PINGs and SELECTs
/// left out, each as its words joined by spaces.
fn streamed(repl: &mut std::net::TcpStream) -> Vec<String> {
    use std::io::Read;
    repl.set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = repl.read(&mut buf) {
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let end = common::value_end(&bytes, i);
        let (_, items) = common::aggregate_items(&bytes[i..end]).expect("an array");
        let words: Vec<String> = items
            .iter()
            .map(|b| String::from_utf8_lossy(common::bulk_payload(b).unwrap()).into_owned())
            .collect();
        if !matches!(words[0].as_str(), "PING" | "SELECT" | "select") {
            out.push(words.join(" ").to_ascii_lowercase());
        }
        i = end;
    }
    out
}

/// Redis 7.0's unit/maxmemory "propagation with eviction (in MULTI)":
/// CONFIG SET maxmemory evicts after the command, not inside it (so not
/// between the commands of an EXEC), and the DELs go to replicas one by
/// one, never wrapped in MULTI with the command's own writes.
fn eviction_after_config_set(port: u16) -> (Vec<u8>, Vec<String>) {
    let mut repl = common::attach_as_replica(port);
    let mut c = Conn::connect(port);
    for k in ["asdf1", "asdf2", "asdf3"] {
        c.cmd_str(&["SET", k, "1"]);
    }
    c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    c.cmd_str(&["MULTI"]);
    c.cmd_str(&["INCR", "x"]);
    c.cmd_str(&["CONFIG", "SET", "maxmemory", "1"]);
    c.cmd_str(&["INCR", "x"]);
    let exec = c.cmd_str(&["EXEC"]);
    common::wait_for("every key evicted", 10, || {
        c.cmd_str(&["DBSIZE"]) == b":0\r\n"
    });
    c.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]);
    c.cmd_str(&["SET", "asdf4", "4"]);
    let mut stream = streamed(&mut repl);
    // The DELs' order is the eviction policy's.
    let dels = stream
        .iter()
        .position(|s| s.starts_with("del"))
        .unwrap_or(0);
    let end = stream[dels..]
        .iter()
        .position(|s| !s.starts_with("del"))
        .map_or(stream.len(), |n| dels + n);
    stream[dels..end].sort();
    (exec, stream)
}

#[test]
fn eviction_started_by_config_set_runs_after_the_command() {
    let kv = start_kvstore(&[]);
    let (exec, stream) = eviction_after_config_set(kv.port);
    assert_eq!(exec, b"*3\r\n:1\r\n+OK\r\n:2\r\n");
    assert_eq!(
        stream,
        [
            "set asdf1 1",
            "set asdf2 1",
            "set asdf3 1",
            "multi",
            "incr x",
            "incr x",
            "exec",
            "del asdf1",
            "del asdf2",
            "del asdf3",
            "del x",
            "set asdf4 4"
        ]
    );
    if let Some(redis) = common::start_redis(&[]) {
        assert_eq!(eviction_after_config_set(redis.port), (exec, stream));
    }
}

/// Eviction that runs out of its time slice goes on by itself while no
/// command arrives (Redis's eviction time event), instead of a slice per
/// cron tick; INFO counts the time spent over the limit.
#[test]
fn eviction_past_its_time_limit_goes_on_while_idle() {
    let s = start_kvstore(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = Conn::connect(s.port);
    assert_eq!(
        c.cmd_str(&["DEBUG", "POPULATE", "200000", "key", "100"]),
        b"+OK\r\n"
    );
    let used = c.info_num::<u64>("memory", "used_memory");
    // Tenacity 0: a slice stops after 16 keys.
    c.cmd_str(&["CONFIG", "SET", "maxmemory-eviction-tenacity", "0"]);
    let limit = used / 2;
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
        b"+OK\r\n"
    );
    // About 100,000 keys must go: at a slice per cron tick that would take
    // minutes; without a command meanwhile it takes well under a second.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let evicted = c.info_num::<u64>("stats", "evicted_keys");
    assert!(evicted > 90_000, "only {evicted} keys evicted");
    // Under the limit again: the spell over it is over.
    assert_eq!(
        c.info_num::<u64>("stats", "current_eviction_exceeded_time"),
        0
    );
    assert!(c.info_num::<u64>("stats", "total_eviction_exceeded_time") > 0);

    // noeviction: the spell lasts while memory stays over the limit.
    c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    c.cmd_str(&["CONFIG", "SET", "maxmemory", "1"]);
    assert!(c.cmd_str(&["SET", "k", "v"]).starts_with(b"-OOM"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let current = c.info_num::<u64>("stats", "current_eviction_exceeded_time");
    assert!(current >= 250, "current_eviction_exceeded_time {current}");
    let total = c.info_num::<u64>("stats", "total_eviction_exceeded_time");
    assert!(total >= current);
    // No limit: the spell ends.
    c.cmd_str(&["CONFIG", "SET", "maxmemory", "0"]);
    c.cmd_str(&["PING"]);
    assert_eq!(
        c.info_num::<u64>("stats", "current_eviction_exceeded_time"),
        0
    );
    assert_eq!(c.cmd_str(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(
        c.info_num::<u64>("stats", "total_eviction_exceeded_time"),
        0
    );
}
