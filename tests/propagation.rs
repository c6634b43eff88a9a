//! Every write is propagated through one function, rewritten the way Redis
//! rewrites it for the AOF and replicas. These tests run commands in process
//! and observe what would be fed to persistence and replication.

mod common;

use std::io::Read;
use std::time::Duration;

use kvstore::config::Config;
use kvstore::state::{ClientState, Server};

struct Harness {
    srv: Server,
    client: ClientState,
}

impl Harness {
    fn new() -> Harness {
        let mut srv = Server::new(Config::default());
        srv.feed.add_tap();
        let client = ClientState::new(1, -1, "test:0".into(), "test:0".into(), false, true, true);
        Harness { srv, client }
    }

    fn run(&mut self, args: &[&str]) -> String {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let out = kvstore::commands::execute_detached(&mut self.srv, &mut self.client, &argv);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Propagated commands since the last call, as "db:space-joined args"
    /// (decoded from the fed RESP stream; SELECTs set the db).
    fn take(&mut self) -> Vec<String> {
        self.srv.feed.flush_taps();
        self.srv.feed.clear();
        let bytes = std::mem::take(&mut self.srv.feed.taps[0].bytes);
        let mut out = Vec::new();
        let mut db = 0;
        for argv in decode_commands(&bytes) {
            let line: Vec<String> = argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if line[0] == "SELECT" {
                db = line[1].parse().unwrap();
                continue;
            }
            out.push(format!("{db}:{}", line.join(" ")));
        }
        out
    }
}

/// Split a stream of RESP arrays of bulk strings into commands.
fn decode_commands(mut b: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(b: &mut &[u8]) -> String {
        let end = b.windows(2).position(|w| w == b"\r\n").expect("CRLF");
        let s = String::from_utf8(b[..end].to_vec()).unwrap();
        *b = &b[end + 2..];
        s
    }
    let mut cmds = Vec::new();
    while !b.is_empty() {
        let head = line(&mut b);
        let n: usize = head.strip_prefix('*').expect("array").parse().unwrap();
        let mut argv = Vec::new();
        for _ in 0..n {
            let len: usize = line(&mut b)
                .strip_prefix('$')
                .expect("bulk")
                .parse()
                .unwrap();
            argv.push(b[..len].to_vec());
            b = &b[len + 2..];
        }
        cmds.push(argv);
    }
    cmds
}

fn abs_ms(s: &str) -> i64 {
    s.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn set_with_relative_expire_becomes_pxat() {
    let mut h = Harness::new();
    let before = kvstore::util::unix_time_ms();
    assert_eq!(h.run(&["SET", "k", "v", "EX", "100"]), "+OK\r\n");
    let p = h.take();
    assert_eq!(p.len(), 1);
    assert!(p[0].starts_with("0:SET k v PXAT "), "{p:?}");
    let at = abs_ms(&p[0]);
    assert!(at >= before + 100_000 && at <= kvstore::util::unix_time_ms() + 100_000);
    h.run(&["SETEX", "k2", "10", "v"]);
    assert!(h.take()[0].starts_with("0:SET k2 v PXAT "));
}

#[test]
fn expire_family_becomes_pexpireat() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    h.take();
    assert_eq!(h.run(&["EXPIRE", "k", "100"]), ":1\r\n");
    let p = h.take();
    assert!(p[0].starts_with("0:PEXPIREAT k "), "{p:?}");
    // GT with a shorter time changes nothing, so nothing is propagated
    // (Redis replies 0 and propagates nothing); a longer one is.
    assert_eq!(h.run(&["PEXPIRE", "k", "5000", "GT"]), ":0\r\n");
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(h.run(&["PEXPIRE", "k", "500000", "GT"]), ":1\r\n");
    let p = h.take();
    assert!(p.len() == 1 && p[0].starts_with("0:PEXPIREAT k "), "{p:?}");
    h.run(&["EXPIREAT", "k", "99999999999"]);
    assert_eq!(h.take(), vec!["0:PEXPIREAT k 99999999999000".to_string()]);
    // An expiry in the past deletes the key and is propagated as DEL.
    h.run(&["EXPIRE", "k", "-1"]);
    assert_eq!(h.take(), vec!["0:DEL k".to_string()]);
}

#[test]
fn incrbyfloat_becomes_set_keepttl() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["INCRBYFLOAT", "f", "10.5"]), "$4\r\n10.5\r\n");
    assert_eq!(h.take(), vec!["0:SET f 10.5 KEEPTTL".to_string()]);
}

#[test]
fn expired_on_access_becomes_del_before_the_command() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v", "PX", "1"]);
    h.take();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(h.run(&["GET", "k"]), "$-1\r\n");
    assert_eq!(h.take(), vec!["0:DEL k".to_string()]);
}

#[test]
fn lazy_expiry_by_scan_and_randomkey_is_not_wrapped_in_multi() {
    // Redis 7.0 propagates the DELs of SCAN and RANDOMKEY one by one
    // (CMD_TOUCHES_ARBITRARY_KEYS), unlike a command's own lazy expiry.
    for cmd in [&["SCAN", "0"][..], &["RANDOMKEY"][..]] {
        let mut h = Harness::new();
        h.run(&["SET", "foo1", "bar", "PX", "1"]);
        h.run(&["SET", "foo2", "bar", "PX", "1"]);
        h.take();
        std::thread::sleep(std::time::Duration::from_millis(5));
        h.run(cmd);
        let mut p = h.take();
        p.sort();
        assert_eq!(
            p,
            vec!["0:DEL foo1".to_string(), "0:DEL foo2".to_string()],
            "{cmd:?}"
        );
    }
}

#[test]
fn reads_and_failed_writes_are_not_propagated() {
    let mut h = Harness::new();
    h.run(&["GET", "x"]);
    h.run(&["SET", "x", "1", "XX"]);
    h.run(&["DEL", "nothing"]);
    assert!(h.take().is_empty());
    h.run(&["SET", "s", "abc"]);
    h.run(&["INCR", "s"]);
    assert_eq!(h.take(), vec!["0:SET s abc".to_string()]);
}

#[test]
fn getex_getset_getdel_are_rewritten() {
    let mut h = Harness::new();
    h.run(&["SET", "k", "v"]);
    h.take();
    h.run(&["GETEX", "k", "PX", "5000"]);
    assert!(h.take()[0].starts_with("0:PEXPIREAT k "));
    h.run(&["GETEX", "k", "PERSIST"]);
    assert_eq!(h.take(), vec!["0:PERSIST k".to_string()]);
    h.run(&["GETSET", "k", "w"]);
    assert_eq!(h.take(), vec!["0:SET k w".to_string()]);
    h.run(&["GETDEL", "k"]);
    assert_eq!(h.take(), vec!["0:DEL k".to_string()]);
    h.run(&["SET", "k", "v", "GET"]);
    assert_eq!(h.take(), vec!["0:SET k v".to_string()]);
}

#[test]
fn a_new_consumer_given_nothing_is_still_created_on_replicas() {
    let mut h = Harness::new();
    h.run(&["XGROUP", "CREATE", "xs", "g", "$", "MKSTREAM"]);
    h.take();
    // Nothing new: the consumer is not made (as in Redis).
    h.run(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "xs", ">"]);
    assert_eq!(h.take(), Vec::<String>::new());
    // Its history, empty: it is made, and no XCLAIM will name it (Redis
    // 7.0.15 sends nothing here and its replicas lack it).
    h.run(&["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "xs", "0"]);
    assert_eq!(
        h.take(),
        vec!["0:XGROUP CREATECONSUMER xs g c2".to_string()]
    );
    // Again, now known: nothing to propagate.
    h.run(&["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "xs", "0"]);
    assert_eq!(h.take(), Vec::<String>::new());
    // Given an entry, the consumer reaches replicas through its XCLAIM alone.
    h.run(&["XADD", "xs", "1-1", "f", "v"]);
    h.take();
    h.run(&["XREADGROUP", "GROUP", "g", "c3", "STREAMS", "xs", ">"]);
    let got = h.take();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("0:XCLAIM xs g c3 0 1-1 TIME "),
        "{got:?}"
    );
}

#[test]
fn propagation_records_the_database() {
    let mut h = Harness::new();
    h.run(&["SELECT", "3"]);
    h.run(&["SET", "k", "v"]);
    h.run(&["FLUSHDB"]);
    h.run(&["FLUSHDB"]);
    assert_eq!(
        h.take(),
        vec![
            "3:SET k v".to_string(),
            "3:FLUSHDB".to_string(),
            "3:FLUSHDB".to_string()
        ]
    );
}

// ---- the feed against Redis's replication stream ----

/// One step of a workload: on which client, the command, and how long to
/// wait after it.
type Step = (usize, &'static [&'static str], u64);

/// A mixed workload over two clients: database changes, relative expiry,
/// a lazily expired key inside an INCR, MULTI/EXEC with a SELECT inside,
/// SPOP with a count (all members, so both servers pick the same),
/// blocking pops and moves served by a later push or at once (BRPOPLPUSH
/// goes out as RPOPLPUSH, BLMOVE as LMOVE), an expiry in the past, INCRBYFLOAT,
/// GEOADD (propagated as the ZADD it runs), the geo stores, and
/// HyperLogLogs (PFADD when it changes a register, PFCOUNT when it caches,
/// PFDEBUG when it converts, PFMERGE always).
const WORKLOAD: &[Step] = &[
    (0, &["SELECT", "1"], 0),
    (0, &["SET", "a", "1"], 0),
    (0, &["SET", "e", "v", "EX", "100"], 0),
    (0, &["SET", "k", "10", "PX", "30"], 80),
    (0, &["INCR", "k"], 0),
    (0, &["MULTI"], 0),
    (0, &["SET", "m1", "1"], 0),
    (0, &["SELECT", "2"], 0),
    (0, &["SET", "m2", "2"], 0),
    (0, &["INCR", "m2"], 0),
    (0, &["EXEC"], 0),
    (0, &["MULTI"], 0),
    (0, &["SET", "single", "1"], 0),
    (0, &["GET", "single"], 0),
    (0, &["EXEC"], 0),
    (0, &["SADD", "s", "a", "b", "c"], 0),
    (0, &["SPOP", "s", "10"], 0),
    (1, &["SELECT", "2"], 0),
    (1, &["BLPOP", "q", "0"], 50),
    (0, &["LPUSH", "q", "x", "y"], 50),
    (1, &["BRPOPLPUSH", "bq", "bd", "0"], 50),
    (0, &["LPUSH", "bq", "x", "y", "z"], 50),
    (0, &["BRPOPLPUSH", "bq", "bd", "0"], 0),
    (1, &["BLMOVE", "bq2", "bd", "LEFT", "RIGHT", "0"], 50),
    (0, &["LPUSH", "bq2", "x", "y"], 50),
    (0, &["BLMOVE", "bq2", "bd", "RIGHT", "LEFT", "0"], 0),
    (0, &["EXPIRE", "m2", "-1"], 0),
    (0, &["INCRBYFLOAT", "f", "1.5"], 0),
    (0, &["SELECT", "0"], 0),
    (0, &["PFADD", "hll", "a", "b"], 0),
    (0, &["PFADD", "hll", "a"], 0),
    (0, &["PFCOUNT", "hll"], 0),
    (0, &["PFCOUNT", "hll"], 0),
    (0, &["PFCOUNT", "hll", "nokey"], 0),
    (0, &["PFMERGE", "hll2", "hll", "nokey"], 0),
    (0, &["PFDEBUG", "TODENSE", "hll"], 0),
    (0, &["PFDEBUG", "TODENSE", "hll"], 0),
    (0, &["PFDEBUG", "GETREG", "hll2"], 0),
    (0, &["PFDEBUG", "ENCODING", "hll2"], 0),
    (0, &["PFADD", "hll", "a"], 0),
    (0, &["LPUSH", "l", "1", "2", "3"], 0),
    (0, &["RPOPLPUSH", "l", "l2"], 0),
    (0, &["DEL", "l", "l2", "nokey"], 0),
    (
        0,
        &[
            "GEOADD",
            "g",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
        0,
    ),
    (
        0,
        &[
            "GEOADD", "g", "CH", "XX", "13.5", "38.1", "Palermo", "1", "1", "x",
        ],
        0,
    ),
    (0, &["GEOADD", "g", "NX", "13.5", "38.1", "Palermo"], 0),
    (
        0,
        &["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"],
        0,
    ),
    (
        0,
        &[
            "GEOSEARCH",
            "g",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ],
        0,
    ),
    (
        0,
        &[
            "GEOSEARCHSTORE",
            "gs",
            "g",
            "FROMLONLAT",
            "15",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "STOREDIST",
        ],
        0,
    ),
    (
        0,
        &[
            "GEOSEARCHSTORE",
            "gs",
            "nokey",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "1",
            "km",
        ],
        0,
    ),
    // XREADGROUP inside MULTI: each delivered entry as an XCLAIM (with the
    // group's last ID), a new consumer named only by them; under NOACK the
    // consumer's creation and the group's last ID go out explicitly.
    (0, &["XADD", "xs", "1-1", "f", "a"], 0),
    (0, &["XADD", "xs", "2-1", "f", "b"], 0),
    (0, &["XADD", "xs", "3-1", "f", "c"], 0),
    (0, &["XGROUP", "CREATE", "xs", "xg", "0"], 0),
    (0, &["MULTI"], 0),
    (
        0,
        &[
            "XREADGROUP",
            "GROUP",
            "xg",
            "c1",
            "COUNT",
            "2",
            "STREAMS",
            "xs",
            ">",
        ],
        0,
    ),
    (
        0,
        &["XREADGROUP", "GROUP", "xg", "c1", "STREAMS", "xs", ">"],
        0,
    ),
    (0, &["EXEC"], 0),
    (0, &["XADD", "xs", "4-1", "f", "d"], 0),
    (
        0,
        &[
            "XREADGROUP",
            "GROUP",
            "xg",
            "c2",
            "NOACK",
            "STREAMS",
            "xs",
            ">",
        ],
        0,
    ),
    (
        0,
        &[
            "XREADGROUP",
            "GROUP",
            "xg",
            "c3",
            "NOACK",
            "STREAMS",
            "xs",
            ">",
        ],
        0,
    ),
];

/// Replace absolute times (PXAT, PEXPIREAT) by a marker: the two servers
/// run the workload at slightly different moments.
fn normalize(cmds: Vec<Vec<Vec<u8>>>) -> Vec<String> {
    cmds.into_iter()
        .map(|argv| {
            let mut words: Vec<String> = argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if words[0].eq_ignore_ascii_case("PEXPIREAT") && words.len() > 2 {
                words[2] = "<time>".into();
            }
            for i in 1..words.len() {
                // XCLAIM's TIME is the delivery's own clock.
                if words[i - 1].eq_ignore_ascii_case("PXAT")
                    || (words[0].eq_ignore_ascii_case("XCLAIM")
                        && words[i - 1].eq_ignore_ascii_case("TIME"))
                {
                    words[i] = "<time>".into();
                }
            }
            words.join(" ")
        })
        .collect()
}

/// Attach to redis-server as a replica (SYNC), run the workload on two
/// clients, and return the commands it streamed to the replica.
fn redis_stream(port: u16) -> Vec<Vec<Vec<u8>>> {
    let mut repl = common::attach_as_replica(port);
    let mut clients = [common::Conn::connect(port), common::Conn::connect(port)];
    for (who, args, wait) in WORKLOAD {
        if *who == 1 && args[0].starts_with('B') {
            // Blocks: its reply comes once a later step serves it.
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            clients[*who].send(&refs);
        } else {
            clients[*who].cmd_str(args);
        }
        std::thread::sleep(Duration::from_millis(*wait));
    }
    let _ = clients[1].read_reply();
    // Everything the master streamed, until it has been quiet a while.
    repl.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut stream = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = repl.read(&mut buf) {
        if n == 0 {
            break;
        }
        stream.extend_from_slice(&buf[..n]);
    }
    decode_commands(&stream)
        .into_iter()
        .filter(|c| !c[0].eq_ignore_ascii_case(b"PING"))
        .collect()
}

/// Run the workload in process with two clients in the server's slab (so
/// a blocked client is served as the loop serves it) and return what the
/// feed gave its consumer.
fn kvstore_stream() -> Vec<Vec<Vec<u8>>> {
    let mut srv = Server::new(Config::default());
    srv.feed.add_tap();
    let mut slots = Vec::new();
    for id in 1..=2 {
        let st = ClientState::new(
            id,
            -1,
            format!("test:{id}"),
            "test:0".into(),
            false,
            true,
            true,
        );
        srv.next_client_id = id + 1;
        slots.push(srv.insert_client(st));
    }
    for (who, args, wait) in WORKLOAD {
        let slot = slots[*who];
        let mut client = srv.clients[slot].take().unwrap();
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let dirty = srv.dirty;
        kvstore::commands::execute_detached(&mut srv, &mut client, &argv);
        srv.clients[slot] = Some(client);
        if srv.dirty != dirty && !srv.blocked_keys.is_empty() {
            kvstore::commands::blocking::serve_blocked(&mut srv);
        }
        srv.flush_feed();
        std::thread::sleep(Duration::from_millis(*wait));
    }
    decode_commands(&std::mem::take(&mut srv.feed.taps[0].bytes))
}

#[test]
fn feed_matches_what_redis_streams_to_a_replica() {
    let Some(redis) = common::start_redis(&["--repl-ping-replica-period", "3600"]) else {
        return;
    };
    let theirs = normalize(redis_stream(redis.port));
    let ours = normalize(kvstore_stream());
    // The workload exercises what it means to: a wrapped unit, the
    // served pop, a SELECT inside a transaction.
    for expected in [
        "MULTI",
        "DEL k",
        "LPOP q",
        "SELECT 2",
        "SET f 1.5 KEEPTTL",
        "zadd g CH XX 3479100566894653 Palermo 3377822707026402 x",
        "PFCOUNT hll",
        "PFDEBUG TODENSE hll",
        "RPOPLPUSH bq bd",
        "LMOVE bq2 bd RIGHT LEFT",
        "XGROUP CREATECONSUMER xs xg c2",
    ] {
        assert!(
            theirs.iter().any(|c| c == expected),
            "{expected} in {theirs:?}"
        );
    }
    assert_eq!(
        ours,
        theirs,
        "\nkvstore feed:\n  {}\nredis replication stream:\n  {}",
        ours.join("\n  "),
        theirs.join("\n  ")
    );
}

#[test]
fn scripts_propagate_their_effects_not_themselves() {
    let mut h = Harness::new();
    // One write: the command alone, rewritten as any write is.
    h.run(&[
        "EVAL",
        "return redis.call('set', KEYS[1], 'v', 'EX', 100)",
        "1",
        "k",
    ]);
    let one = h.take();
    assert_eq!(one.len(), 1, "{one:?}");
    assert!(one[0].starts_with("0:SET k v PXAT "), "{one:?}");
    // Several writes: one transaction, in the databases they ran in.
    h.run(&[
        "EVAL",
        "redis.call('incr', 'a'); redis.call('select', 2); redis.call('incrbyfloat', 'f', '1.5'); return redis.call('get', 'a')",
        "0",
    ]);
    assert_eq!(
        h.take(),
        ["0:MULTI", "0:incr a", "2:SET f 1.5 KEEPTTL", "2:EXEC"]
    );
    // Reads and refused writes propagate nothing; REPL_NONE silences.
    h.run(&["EVAL", "return redis.call('get', 'a')", "0"]);
    h.run(&[
        "EVAL",
        "redis.set_repl(redis.REPL_NONE); redis.call('set', 'q', '1'); return 1",
        "0",
    ]);
    h.run(&["EVAL_RO", "return redis.pcall('set', 'x', '1')", "0"]);
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(h.run(&["GET", "q"]), "$1\r\n1\r\n");
    // EVALSHA of a cached script behaves the same.
    let sha = h.run(&["SCRIPT", "LOAD", "return redis.call('del', KEYS[1])"]);
    let sha = sha.lines().nth(1).unwrap().to_string();
    h.run(&["EVALSHA", &sha, "1", "k"]);
    assert_eq!(h.take(), ["0:del k"]);
}
