//! Lists' introspection against redis-server 7.0, with DEBUG allowed on
//! both (the differential suite runs without it): DEBUG LISTPACK,
//! DEBUG QUICKLIST, DEBUG QUICKLIST-PACKED-THRESHOLD and plain nodes, the
//! quicklist fields of DEBUG OBJECT, DEBUG RELOAD. Replies are compared raw;
//! DUMP payloads compare the nodes themselves.

mod common;

use common::{start_kvstore, start_redis, Conn, Rng};

const OPTS: &[&str] = &["--enable-debug-command", "yes"];

/// Run each command on both servers; the raw replies must be the same.
fn same(r: &mut Conn, k: &mut Conn, cmds: &[&[&str]]) {
    for cmd in cmds {
        let (a, b) = (k.cmd_str(cmd), r.cmd_str(cmd));
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{cmd:?}"
        );
    }
}

/// DEBUG OBJECT without what is this process's own (the address, the LRU
/// clock). The serialized length is a list's dump size: the same.
fn debug_object_fields(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .trim_end()
        .split(' ')
        .filter(|f| {
            !f.starts_with("at:") && !f.starts_with("lru:") && !f.starts_with("lru_seconds_idle:")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn debug_subcommands_for_lists_answer_as_redis() {
    let Some(redis) = start_redis(OPTS) else {
        return;
    };
    let kv = start_kvstore(OPTS);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    same(
        &mut r,
        &mut k,
        &[
            &["RPUSH", "l", "a", "b", "c"],
            &["HSET", "h", "f", "v"],
            &["ZADD", "z", "1", "m"],
            &["SET", "s", "v"],
            // A list is a quicklist in 7.0, never a listpack.
            &["DEBUG", "LISTPACK", "l"],
            &["DEBUG", "LISTPACK", "h"],
            &["DEBUG", "LISTPACK", "z"],
            &["DEBUG", "LISTPACK", "s"],
            &["DEBUG", "LISTPACK", "missing"],
            &["DEBUG", "LISTPACK"],
            &["DEBUG", "LISTPACK", "l", "extra"],
            &["DEBUG", "QUICKLIST", "l"],
            &["DEBUG", "QUICKLIST", "l", "1"],
            &["DEBUG", "QUICKLIST", "l", "0"],
            &["DEBUG", "QUICKLIST", "l", "x"],
            &["DEBUG", "QUICKLIST", "h"],
            &["DEBUG", "QUICKLIST", "missing"],
            &["DEBUG", "QUICKLIST", "l", "1", "2"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1b"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1kb"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "4gb"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "abc"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "-1"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"],
            &["OBJECT", "ENCODING", "l"],
        ],
    );
}

#[test]
fn plain_nodes_and_compressed_nodes_are_redis_s_node_for_node() {
    let Some(redis) = start_redis(OPTS) else {
        return;
    };
    let kv = start_kvstore(OPTS);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    let big = "B".repeat(600);
    let huge = "H".repeat(20_000);
    let a500 = "a".repeat(500);
    let b500 = "b".repeat(500);
    let x32 = "x".repeat(32);
    same(
        &mut r,
        &mut k,
        &[
            &["CONFIG", "SET", "list-compress-depth", "1"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100b"],
            // Plain nodes among packed ones, compressed in the middle.
            &["RPUSH", "l", "a", "b", &big, "c", &big, "d", &huge, "e"],
            &["DUMP", "l"],
            &["LSET", "l", "1", &big],
            &["LSET", "l", "2", "small"],
            &["LINSERT", "l", "BEFORE", "c", &big],
            &["LINSERT", "l", "AFTER", "d", "after-d"],
            &["DUMP", "l"],
            &["LREM", "l", "0", &big],
            &["DUMP", "l"],
            &["LRANGE", "l", "0", "-1"],
            &["LTRIM", "l", "1", "-2"],
            &["DUMP", "l"],
            &["LPOP", "l", "2"],
            &["RPOP", "l"],
            &["DUMP", "l"],
            // Redis's own regression cases (unit/type/list).
            &["RPUSH", "lst", &big, &x32, &x32],
            &["LSET", "lst", "-1", &big],
            &["LRANGE", "lst", "0", "-1"],
            &["DUMP", "lst"],
            &["CONFIG", "SET", "list-compress-depth", "2"],
            &["CONFIG", "SET", "list-max-listpack-size", "1"],
            &["LPUSH", "list4", &a500, &b500, &a500, &b500],
            &["LINSERT", "list4", "AFTER", &b500, "inserted"],
            &["DUMP", "list4"],
            &["LPOP", "list4"],
            &["LPOP", "list4"],
            &["DUMP", "list4"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"],
            &["CONFIG", "SET", "list-compress-depth", "0"],
            &["CONFIG", "SET", "list-max-listpack-size", "-2"],
        ],
    );
}

#[test]
fn debug_object_and_debug_reload_keep_redis_s_nodes() {
    let Some(redis) = start_redis(OPTS) else {
        return;
    };
    let kv = start_kvstore(OPTS);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    let script = "for i = 1, 1000 do redis.call('rpush', KEYS[1], 'n' .. i .. string.rep('w', i % 45)) end return 1";
    same(
        &mut r,
        &mut k,
        &[
            &["CONFIG", "SET", "list-compress-depth", "3"],
            &["CONFIG", "SET", "list-max-listpack-size", "-1"],
            &["EVAL", script, "1", "l"],
            &["DUMP", "l"],
        ],
    );
    let fields = |c: &mut Conn| debug_object_fields(&c.cmd_str(&["DEBUG", "OBJECT", "l"]));
    assert_eq!(fields(&mut k), fields(&mut r));
    assert!(fields(&mut k).contains(&"ql_compressed:1".to_string()));
    // Reloaded with another configuration, the list takes it: its nodes
    // come back as saved, compressed at the new depth.
    same(
        &mut r,
        &mut k,
        &[
            &["CONFIG", "SET", "list-compress-depth", "1"],
            &["CONFIG", "SET", "list-max-listpack-size", "16"],
            &["DEBUG", "RELOAD"],
            &["DUMP", "l"],
            &["RPUSH", "l", "after", "reload"],
            &["DUMP", "l"],
            &["LLEN", "l"],
            &["CONFIG", "SET", "list-compress-depth", "0"],
            &["CONFIG", "SET", "list-max-listpack-size", "-2"],
        ],
    );
    assert_eq!(fields(&mut k), fields(&mut r));
}

/// Draws of list elements and indices (the seed: `LIST_FUZZ_SEED`).
impl Rng {
    /// An element: integers, short words, compressible strings of every
    /// length around the node limits, the odd long one.
    fn element(&mut self) -> String {
        match self.below(10) {
            0..=2 => (self.below(300) as i64 - 100).to_string(),
            3..=4 => format!("w{}", self.below(40)),
            5..=7 => {
                let c = (b'a' + self.below(6) as u8) as char;
                format!(
                    "{}{}",
                    c.to_string().repeat(self.below(120) as usize),
                    self.below(30)
                )
            }
            8 => format!(
                "{}{}",
                "pattern-".repeat(self.below(600) as usize),
                self.below(5)
            ),
            _ => (0..self.below(200))
                .map(|_| (b'!' + self.below(90) as u8) as char)
                .collect(),
        }
    }

    fn index(&mut self, len: i64) -> String {
        (self.below((2 * len + 4) as u64) as i64 - len - 2).to_string()
    }
}

/// Random list commands on lists of random node sizes and compress depths
/// (plain nodes too, with a low packed threshold), on both servers: every
/// reply, and every list's DUMP payload after every command, must be the
/// same — the same nodes, split, merged and compressed as Redis's.
#[test]
fn random_list_commands_leave_redis_s_nodes() {
    let Some(redis) = start_redis(OPTS) else {
        return;
    };
    let kv = start_kvstore(OPTS);
    let mut r = Conn::connect(redis.port);
    let mut k = Conn::connect(kv.port);
    let seed = std::env::var("LIST_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    let mut rng = Rng(seed);
    let fills = ["-5", "-2", "-1", "1", "2", "3", "5", "16"];
    for round in 0..24 {
        let fill = fills[rng.below(fills.len() as u64) as usize];
        let depth = rng.below(4).to_string();
        let threshold = if rng.below(3) == 0 { "200b" } else { "0" };
        let mut log: Vec<Vec<String>> = Vec::new();
        // Without rdbcompression a raw node is dumped raw and a compressed
        // one as its LZF blob: the payload shows which is which.
        let setup: [&[&str]; 5] = [
            &["FLUSHALL"],
            &["CONFIG", "SET", "rdbcompression", "no"],
            &["CONFIG", "SET", "list-max-listpack-size", fill],
            &["CONFIG", "SET", "list-compress-depth", &depth],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", threshold],
        ];
        same(&mut r, &mut k, &setup);
        for _ in 0..300 {
            let key = if rng.below(5) == 0 { "b" } else { "a" };
            let len = String::from_utf8_lossy(&r.cmd_str(&["LLEN", key]))
                .trim_start_matches(':')
                .trim()
                .parse::<i64>()
                .unwrap_or_default();
            let e = rng.element();
            let cmd: Vec<String> = match rng.below(19) {
                0..=2 => {
                    let mut c = vec![
                        if rng.below(2) == 0 { "LPUSH" } else { "RPUSH" }.to_string(),
                        key.into(),
                        e,
                    ];
                    for _ in 0..rng.below(4) {
                        c.push(rng.element());
                    }
                    c
                }
                3 => vec!["LPOP".into(), key.into()],
                4 => vec!["RPOP".into(), key.into(), rng.below(6).to_string()],
                5 => vec!["LINDEX".into(), key.into(), rng.index(len)],
                6 => match rng.below(2) {
                    0 => vec!["LRANGE".into(), key.into(), rng.index(len), rng.index(len)],
                    _ => vec!["LRANGE".into(), key.into(), "0".into(), "-1".into()],
                },
                7 => vec!["LSET".into(), key.into(), rng.index(len), e],
                8 | 9 | 17 | 18 => {
                    // A pivot that is there, mostly.
                    let at = rng.index(len);
                    let pivot =
                        String::from_utf8_lossy(&r.cmd_str(&["LINDEX", key, &at])).into_owned();
                    let pivot = pivot.split("\r\n").nth(1).unwrap_or("none").to_string();
                    let side = if rng.below(2) == 0 { "BEFORE" } else { "AFTER" };
                    vec!["LINSERT".into(), key.into(), side.into(), pivot, e]
                }
                10 => {
                    let at = rng.index(len);
                    let v = String::from_utf8_lossy(&r.cmd_str(&["LINDEX", key, &at])).into_owned();
                    let v = v.split("\r\n").nth(1).unwrap_or("none").to_string();
                    vec![
                        "LREM".into(),
                        key.into(),
                        (rng.below(5) as i64 - 2).to_string(),
                        v,
                    ]
                }
                11 => vec!["LTRIM".into(), key.into(), rng.index(len), rng.index(len)],
                12 => vec![
                    "LPOS".into(),
                    key.into(),
                    e,
                    "RANK".into(),
                    "-1".into(),
                    "MAXLEN".into(),
                    rng.below(50).to_string(),
                ],
                13 => vec![
                    "LMOVE".into(),
                    key.into(),
                    if key == "a" { "b" } else { "a" }.into(),
                    "LEFT".into(),
                    "RIGHT".into(),
                ],
                14 => vec![
                    "LMPOP".into(),
                    "1".into(),
                    key.into(),
                    "RIGHT".into(),
                    "COUNT".into(),
                    rng.below(8).add_one(),
                ],
                15 => match rng.below(3) {
                    0 => vec!["SORT".into(), key.into(), "ALPHA".into()],
                    1 => vec![
                        "SORT".into(),
                        key.into(),
                        "BY".into(),
                        "nosort".into(),
                        "LIMIT".into(),
                        rng.index(len),
                        rng.below(20).to_string(),
                    ],
                    _ => vec![
                        "SORT".into(),
                        key.into(),
                        "BY".into(),
                        "nosort".into(),
                        "DESC".into(),
                        "LIMIT".into(),
                        rng.below(len.max(1) as u64).to_string(),
                        rng.below(9).to_string(),
                    ],
                },
                16 => vec!["LPOS".into(), key.into(), e, "COUNT".into(), "0".into()],
                _ => vec!["LINDEX".into(), key.into(), rng.index(len)],
            };
            log.push(cmd.clone());
            let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let (a, b) = (k.cmd_str(&refs), r.cmd_str(&refs));
            let context = || {
                format!(
                    "seed {seed}, round {round} (fill {fill}, depth {depth}, threshold {threshold}), after:\n{}",
                    log.iter().map(|c| c.join(" ")).collect::<Vec<_>>().join("\n")
                )
            };
            assert_eq!(a, b, "{}", context());
            for key in ["a", "b"] {
                let (a, b) = (k.cmd_str(&["DUMP", key]), r.cmd_str(&["DUMP", key]));
                assert!(a == b, "DUMP {key} differs; {}", context());
            }
        }
    }
    same(
        &mut r,
        &mut k,
        &[
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"],
            &["CONFIG", "SET", "rdbcompression", "yes"],
        ],
    );
}

trait AddOne {
    fn add_one(self) -> String;
}

impl AddOne for u64 {
    fn add_one(self) -> String {
        (self + 1).to_string()
    }
}
