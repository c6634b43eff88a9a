//! Streams beyond single replies: dumps that move both ways between
//! kvstore and redis-server (and pass redis-check-rdb), the AOF rewrite,
//! replicas (kvstore and Redis) holding the same groups as their master,
//! and redis-py's consumer-group API against both servers.

mod common;

use common::{start_kvstore, start_kvstore_in, start_redis, Conn};

/// Commands that build a stream with everything a dump must carry: many
/// nodes, entries with and without the master fields, deleted entries, a
/// set last ID, groups with pending entries owned by several consumers, a
/// consumer with none, and a group whose read counter is unknown.
const BUILD: &[&[&str]] = &[
    &["CONFIG", "SET", "stream-node-max-entries", "10"],
    &[
        "EVAL",
        "for i = 1, 250 do if i % 7 == 0 then redis.call('xadd', KEYS[1], i .. '-' .. i, 'other', i, 'x', string.rep('y', i)) else redis.call('xadd', KEYS[1], i .. '-1', 'f', i, 'name', 'item' .. i) end end",
        "1",
        "s",
    ],
    &["XDEL", "s", "3-1", "4-1", "100-1", "200-1"],
    &["XGROUP", "CREATE", "s", "g1", "0"],
    &["XGROUP", "CREATE", "s", "g2", "50-1", "ENTRIESREAD", "40"],
    &["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "20", "STREAMS", "s", ">"],
    &["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "5", "STREAMS", "s", ">"],
    &["XACK", "s", "g1", "1-1", "2-1", "5-1"],
    &["XREADGROUP", "GROUP", "g2", "carol", "COUNT", "3", "STREAMS", "s", ">"],
    &["XGROUP", "CREATECONSUMER", "s", "g2", "dave"],
    &["XGROUP", "CREATE", "s", "g3", "$"],
    &["XGROUP", "SETID", "s", "g3", "7-7"],
    &["XADD", "s", "MAXLEN", "~", "200", "300-1", "f", "last"],
    &["XADD", "empty", "1-1", "a", "b"],
    &["XDEL", "empty", "1-1"],
    &["XSETID", "s", "1000-5", "ENTRIESADDED", "400", "MAXDELETEDID", "999-1"],
    // A function library travels in the same dump.
    &[
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=streamlib\nredis.register_function{function_name='xcount', callback=function(keys) return redis.call('xlen', keys[1]) end, flags={'no-writes'}}",
    ],
];

/// What both servers must agree on, times left out where they are the
/// servers' own (idle times, consumers' seen times) and Redis's radix-tree
/// node count (a property of its tree, not of the stream).
const SIGNATURE: &[&[&str]] = &[
    &["XRANGE", "s", "-", "+"],
    &["XLEN", "s"],
    &["XINFO", "GROUPS", "s"],
    &["XPENDING", "s", "g1"],
    &["XPENDING", "s", "g2"],
    &[
        "EVAL",
        "local out = {} for _, g in ipairs({'g1', 'g2', 'g3'}) do for _, e in ipairs(redis.call('xpending', KEYS[1], g, '-', '+', 1000)) do out[#out+1] = {e[1], e[2], e[4]} end end return out",
        "1",
        "s",
    ],
    &[
        "EVAL",
        "local out = {} for _, g in ipairs({'g1', 'g2', 'g3'}) do for _, c in ipairs(redis.call('xinfo', 'consumers', KEYS[1], g)) do out[#out+1] = {c[2], c[4]} end end return out",
        "1",
        "s",
    ],
    &[
        "EVAL",
        "local r = redis.call('xinfo', 'stream', KEYS[1], 'full', 'count', 0) local o = {} for i = 1, #r, 2 do if r[i] ~= 'radix-tree-nodes' and r[i] ~= 'groups' then o[#o+1] = r[i]; o[#o+1] = r[i+1] end end return o",
        "1",
        "s",
    ],
    &[
        "EVAL",
        "local r = redis.call('xinfo', 'stream', KEYS[1]) local o = {} for i = 1, #r, 2 do if r[i] ~= 'radix-tree-nodes' then o[#o+1] = r[i]; o[#o+1] = r[i+1] end end return o",
        "1",
        "empty",
    ],
    &["TYPE", "s"],
    &["OBJECT", "ENCODING", "s"],
    &["FCALL_RO", "xcount", "1", "s"],
    &["FUNCTION", "LIST", "WITHCODE"],
];

fn run_all(c: &mut Conn, cmds: &[&[&str]]) -> Vec<Vec<u8>> {
    cmds.iter().map(|cmd| c.cmd_str(cmd)).collect()
}

fn assert_same(ours: &[Vec<u8>], theirs: &[Vec<u8>], what: &str) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a != b {
            // Where they part, with some context (replies can be long).
            let at = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
            let from = at.saturating_sub(120);
            panic!(
                "{what}: {:?} differs at byte {at}:\n  ours:   {}\n  theirs: {}",
                SIGNATURE.get(i),
                String::from_utf8_lossy(&a[from..(at + 120).min(a.len())]),
                String::from_utf8_lossy(&b[from..(at + 120).min(b.len())])
            );
        }
    }
}

fn wait_for_file(path: &std::path::Path) {
    common::wait_for("the dump to be written", 20, || path.exists());
}

#[test]
fn stream_dumps_move_both_ways_with_redis() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    // The same commands on both build the same stream, node for node: our
    // nodes are Redis's listpacks (radix-tree-keys is compared too).
    let built_r = run_all(&mut r, BUILD);
    let built_k = run_all(&mut k, BUILD);
    for (i, (a, b)) in built_k.iter().zip(&built_r).enumerate() {
        // The XREADGROUP replies are entries, equal; times do not show.
        assert_eq!(a, b, "building: {:?}", BUILD[i]);
    }
    let sig_r = run_all(&mut r, SIGNATURE);
    assert_same(&run_all(&mut k, SIGNATURE), &sig_r, "built");

    // Redis's dump loads here.
    assert_eq!(r.cmd_str(&["SAVE"]), b"+OK\r\n");
    let loaded = common::start_kvstore_on_dump(&redis.dir.path().join("dump.rdb"), &[]);
    let mut l = Conn::connect(loaded.port);
    assert_same(
        &run_all(&mut l, SIGNATURE),
        &sig_r,
        "Redis's dump loaded here",
    );

    // Ours loads in Redis, and redis-check-rdb accepts it.
    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    let ours = kv.dir.path().join("dump.rdb");
    wait_for_file(&ours);
    if let Some(check) = common::require_tool("redis-check-rdb") {
        let out = common::output_within(
            std::process::Command::new(check).arg(&ours),
            std::time::Duration::from_secs(30),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("RDB looks OK!"),
            "redis-check-rdb: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let rdir = tempfile::tempdir().unwrap();
    std::fs::copy(&ours, rdir.path().join("dump.rdb")).unwrap();
    let rdir_arg = rdir.path().to_string_lossy().into_owned();
    let Some(redis2) = start_redis(&["--dir", &rdir_arg]) else {
        return;
    };
    let mut r2 = Conn::connect(redis2.port);
    assert_same(
        &run_all(&mut r2, SIGNATURE),
        &sig_r,
        "our dump loaded in Redis",
    );
}

#[test]
fn a_damaged_stream_in_a_dump_is_refused_not_loaded() {
    // No checksum and no compression: only the stream's own checks stand
    // between a damaged node and the keyspace.
    let kv = start_kvstore(&["--rdbchecksum", "no", "--rdbcompression", "no"]);
    let mut k = Conn::connect(kv.port);
    assert_eq!(k.cmd_str(&["XADD", "s", "1-1", "f", "v"]), b"$3\r\n1-1\r\n");
    assert_eq!(k.cmd_str(&["SAVE"]), b"+OK\r\n");
    let dump = std::fs::read(kv.dir.path().join("dump.rdb")).unwrap();
    // The node's key (its master ID 1-1), then the listpack: a length byte
    // and the listpack itself.
    let key = [0u8, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
    let at = dump
        .windows(16)
        .position(|w| w == key)
        .expect("the node's key");
    let lp = at + 17;
    let lp_len = dump[at + 16] as usize & 0x3f;
    assert_eq!(dump[lp] as usize, lp_len, "the listpack's own total");
    let damages: [(&str, usize, u8); 4] = [
        ("the listpack's total", lp, dump[lp] + 1),
        ("the node's entry count", lp + 6, 5),
        ("an entry's element count", lp + lp_len - 3, 9),
        ("the end marker", lp + lp_len - 1, 0x7f),
    ];
    for (what, pos, byte) in damages {
        let mut bad = dump.clone();
        bad[pos] = byte;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("dump.rdb"), &bad).unwrap();
        let out = common::output_within(
            std::process::Command::new(env!("CARGO_BIN_EXE_kvstore"))
                .args(["--port", &common::free_port().to_string(), "--dir"])
                .arg(dir.path()),
            std::time::Duration::from_secs(30),
        );
        // Refused with an error (exit 1), never a crash or a hang.
        assert_eq!(
            out.status.code(),
            Some(1),
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_aof_rewrite_rebuilds_streams_and_groups() {
    let kv = start_kvstore(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut k = Conn::connect(kv.port);
    // Without the trim: pending entries the trim removed would be dropped
    // by the rewrite's XCLAIMs on load, in Redis as here.
    let build: Vec<&[&str]> = BUILD
        .iter()
        .copied()
        .filter(|c| !c.contains(&"MAXLEN"))
        .collect();
    run_all(&mut k, &build);
    let before = run_all(&mut k, SIGNATURE);
    assert_eq!(
        k.cmd_str(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    common::wait_for("the rewrite to finish", 30, || {
        k.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && k.info_field("persistence", "aof_rewrite_scheduled") == "0"
    });
    // A write after the rewrite lands in the new incremental file.
    assert_eq!(k.cmd_str(&["XACK", "s", "g1", "6-1"]), b":1\r\n");
    let after = run_all(&mut k, SIGNATURE);
    let aof_dir = kv.dir.path().join("appendonlydir");
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir(copy.path().join("appendonlydir")).unwrap();
    for f in std::fs::read_dir(&aof_dir).unwrap() {
        let f = f.unwrap();
        std::fs::copy(
            f.path(),
            copy.path().join("appendonlydir").join(f.file_name()),
        )
        .unwrap();
    }
    drop(kv);
    let _ = before;
    // The rewrite's XADDs fill nodes as the loading server's limits say.
    let reloaded = start_kvstore_in(
        copy,
        &["--appendonly", "yes", "--stream-node-max-entries", "10"],
    );
    let mut l = Conn::connect(reloaded.port);
    assert_same(&run_all(&mut l, SIGNATURE), &after, "reloaded from the AOF");
    // Redis loads our appendonlydir to the same state.
    let rdir = reloaded.dir.path().to_string_lossy().into_owned();
    drop(l);
    let Some(redis) = start_redis(&[
        "--dir",
        &rdir,
        "--appendonly",
        "yes",
        "--stream-node-max-entries",
        "10",
    ]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    assert_same(
        &run_all(&mut r, SIGNATURE),
        &after,
        "our AOF loaded in Redis",
    );
}

/// The group state a replica must hold: the signature less what a replica
/// sets from its own clock (consumers' seen times are in XINFO STREAM FULL).
const REPLICATED: &[&[&str]] = &[
    &["XRANGE", "s", "-", "+"],
    &["XINFO", "GROUPS", "s"],
    &[
        "EVAL",
        "local out = {} for _, g in ipairs(redis.call('xinfo', 'groups', KEYS[1])) do out[#out+1] = {g[2], g[4], g[6], g[8]} end return out",
        "1",
        "s",
    ],
    &["XPENDING", "s", "g1"],
    &["XPENDING", "s", "g2"],
    &[
        "EVAL",
        "local out = {} for _, g in ipairs({'g1', 'g2', 'g3'}) do for _, e in ipairs(redis.call('xpending', KEYS[1], g, '-', '+', 1000)) do out[#out+1] = {e[1], e[2], e[4]} end end return out",
        "1",
        "s",
    ],
    &[
        "EVAL",
        "local out = {} for _, g in ipairs({'g1', 'g2', 'g3'}) do for _, c in ipairs(redis.call('xinfo', 'consumers', KEYS[1], g)) do out[#out+1] = {c[2], c[4]} end end return out",
        "1",
        "s",
    ],
];

#[test]
fn replicas_hold_the_same_groups_as_their_master() {
    let master = start_kvstore(&[]);
    let mut m = Conn::connect(master.port);
    // Part of it before the replicas come (the full sync carries it), part
    // after (the stream carries it).
    run_all(&mut m, &BUILD[..8]);
    let port = master.port.to_string();
    let replica = start_kvstore(&["--replicaof", "127.0.0.1", &port]);
    let mut k = Conn::connect(replica.port);
    let Some(redis) = start_redis(&["--replicaof", "127.0.0.1", &port]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    for c in [&mut k, &mut r] {
        common::wait_for("the replica to sync", 20, || {
            c.info_field("replication", "master_link_status") == "up"
        });
    }
    run_all(&mut m, &BUILD[8..]);
    // Claims and auto-claims propagate as their effects.
    m.cmd_str(&[
        "XCLAIM",
        "s",
        "g1",
        "erin",
        "0",
        "7-1",
        "8-1",
        "RETRYCOUNT",
        "5",
    ]);
    m.cmd_str(&["XAUTOCLAIM", "s", "g1", "frank", "0", "0", "COUNT", "4"]);
    m.cmd_str(&[
        "XREADGROUP",
        "GROUP",
        "g3",
        "gina",
        "NOACK",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    m.cmd_str(&["XGROUP", "DELCONSUMER", "s", "g1", "bob"]);
    m.cmd_str(&["XTRIM", "s", "MINID", "~", "60-1"]);
    let want = run_all(&mut m, REPLICATED);
    let offset = m.info_field("replication", "master_repl_offset");
    for (c, name) in [(&mut k, "kvstore"), (&mut r, "redis")] {
        common::wait_for("the replica to catch up", 20, || {
            c.info_field("replication", "slave_repl_offset") == offset
        });
        let got = run_all(c, REPLICATED);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            if name == "redis" && REPLICATED[i][..2] == ["XINFO", "GROUPS"] {
                // A Redis 7.0.15 replica leaves a group's read counter
                // where it was (the XCLAIMs carry only its last ID; the
                // script below compares the rest); a kvstore replica
                // follows it.
                continue;
            }
            assert_eq!(
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b),
                "{name} replica: {:?}",
                REPLICATED[i]
            );
        }
    }
}

const REDIS_PY_GROUPS: &str = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
out = []
for i in range(1, 8):
    out.append(r.xadd("jobs", {"n": i, "kind": "email" if i % 2 else "sms"}, id=f"{i}-0"))
r.xgroup_create("jobs", "workers", id="0")
out.append(r.xreadgroup("workers", "w1", {"jobs": ">"}, count=3))
out.append(r.xreadgroup("workers", "w2", {"jobs": ">"}, count=2))
out.append(r.xack("jobs", "workers", "1-0", "2-0"))
p = r.xpending("jobs", "workers")
out.append((p["pending"], p["min"], p["max"], sorted((c["name"], c["pending"]) for c in p["consumers"])))
claimed = r.xautoclaim("jobs", "workers", "w3", min_idle_time=0, start_id="0-0", count=10)
out.append(claimed[0])
out.append([e[0] for e in claimed[1]])
out.append(r.xreadgroup("workers", "w3", {"jobs": "0"}))
out.append([(g["name"], g["pending"], g["last-delivered-id"], g["lag"]) for g in r.xinfo_groups("jobs")])
out.append(r.xtrim("jobs", maxlen=4))
out.append(r.xrange("jobs"))
out.append(r.xrevrange("jobs", count=2))
out.append(r.xlen("jobs"))
print(repr(out))
"#;

#[test]
fn redis_py_consumer_groups_work_as_on_redis() {
    let Some(python) = common::python_with_redis_py("the consumer-group check") else {
        return;
    };
    let run = |port: u16| {
        let out = common::output_within(
            std::process::Command::new(python).args(["-c", REDIS_PY_GROUPS, &port.to_string()]),
            std::time::Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "redis-py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let kv = start_kvstore(&[]);
    let ours = run(kv.port);
    assert!(ours.contains("b'1-0'"), "{ours}");
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    assert_eq!(ours, run(redis.port));
}

#[test]
fn a_blocked_reader_is_served_by_the_next_entry_in_order() {
    let kv = start_kvstore(&[]);
    let mut a = Conn::connect(kv.port);
    let mut b = Conn::connect(kv.port);
    let mut w = Conn::connect(kv.port);
    assert_eq!(
        w.cmd_str(&["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]),
        b"+OK\r\n"
    );
    // Two consumers of one group wait; one entry goes to the first only.
    a.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"a",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"q",
        b">",
    ]);
    common::wait_for("a to block", 10, || {
        w.info_field("clients", "blocked_clients") == "1"
    });
    b.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"b",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"q",
        b">",
    ]);
    common::wait_for("b to block", 10, || {
        w.info_field("clients", "blocked_clients") == "2"
    });
    assert_eq!(
        w.cmd_str(&["XADD", "q", "1-1", "job", "1"]),
        b"$3\r\n1-1\r\n"
    );
    assert_eq!(
        a.read_reply(),
        b"*1\r\n*2\r\n$1\r\nq\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$3\r\njob\r\n$1\r\n1\r\n"
    );
    assert_eq!(w.info_field("clients", "blocked_clients"), "1");
    assert_eq!(
        w.cmd_str(&["XADD", "q", "2-1", "job", "2"]),
        b"$3\r\n2-1\r\n"
    );
    assert_eq!(
        b.read_reply(),
        b"*1\r\n*2\r\n$1\r\nq\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$3\r\njob\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        w.cmd_str(&["XPENDING", "q", "g"]),
        b"*4\r\n:2\r\n$3\r\n1-1\r\n$3\r\n2-1\r\n*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n1\r\n"
    );
}
