//! Server commands: SWAPDB, DBSIZE, FLUSHDB, FLUSHALL, TIME, SAVE, BGSAVE,
//! LASTSAVE, DEBUG, MODULE and SHUTDOWN.

use std::time::Duration;

use super::keys::encoding_name;
use super::*;
use crate::db::{FreeMode, Value};
use crate::state::ShutdownFlags;

/// A database index as SWAPDB takes it: `msg` for a non-integer or
/// out-of-int-range argument, as Redis's getIntFromObjectOrReply does.
fn parse_db_index(c: &Ctx, arg: &[u8], msg: &'static str) -> Result<usize, &'static str> {
    let n = parse_i64(arg)
        .filter(|n| *n >= i32::MIN as i64 && *n <= i32::MAX as i64)
        .ok_or(msg)?;
    if n < 0 || n as usize >= c.srv.dbs.len() {
        return Err(ERR_DB_INDEX);
    }
    Ok(n as usize)
}

/// `SWAPDB index1 index2`
pub fn swapdb(c: &mut Ctx, argv: &[&[u8]]) {
    let a = match parse_db_index(c, argv[1], "ERR invalid first DB index") {
        Ok(a) => a,
        Err(e) => return c.cl.reply.error(e),
    };
    let b = match parse_db_index(c, argv[2], "ERR invalid second DB index") {
        Ok(b) => b,
        Err(e) => return c.cl.reply.error(e),
    };
    if a != b {
        // Watchers of keys that exist on either side see a change.
        c.srv.touch_all_watched_keys_in_db(Some(c.cl), a, Some(b));
        c.srv.touch_all_watched_keys_in_db(Some(c.cl), b, Some(a));
        c.srv.dbs.swap(a, b);
        c.srv.dbs[a].id = a;
        c.srv.dbs[b].id = b;
    }
    c.dirty(1);
    c.cl.reply.ok();
}

/// `DBSIZE`
pub fn dbsize(c: &mut Ctx, _argv: &[&[u8]]) {
    let n = c.srv.dbs[c.cl.db].len();
    c.cl.reply.int(n as i64);
}

/// Parse the optional ASYNC|SYNC of FLUSHDB/FLUSHALL; without it,
/// `lazyfree-lazy-user-flush` decides.
fn flush_flags(c: &Ctx, argv: &[&[u8]]) -> Result<FreeMode, &'static str> {
    match argv.len() {
        1 => Ok(FreeMode::lazy_if(c.srv.config.lazyfree_lazy_user_flush)),
        2 if eq_ic(argv[1], "sync") => Ok(FreeMode::Sync),
        2 if eq_ic(argv[1], "async") => Ok(FreeMode::Lazy),
        _ => Err(ERR_SYNTAX),
    }
}

/// `FLUSHDB [ASYNC | SYNC]` — ASYNC swaps in an empty table at once and
/// leaves freeing the old one to the lazyfree thread.
pub fn flushdb(c: &mut Ctx, argv: &[&[u8]]) {
    let mode = match flush_flags(c, argv) {
        Ok(m) => m,
        Err(e) => return c.cl.reply.error(e),
    };
    let db = c.cl.db;
    let n = c.srv.dbs[db].len() as u64;
    c.srv.touch_all_watched_keys_in_db(Some(c.cl), db, None);
    c.srv.tracking_invalidate_all();
    c.srv.dbs[db].clear_with(mode);
    c.dirty(n);
    c.force_propagation();
    c.cl.reply.ok();
}

/// `FLUSHALL [ASYNC | SYNC]`
pub fn flushall(c: &mut Ctx, argv: &[&[u8]]) {
    let mode = match flush_flags(c, argv) {
        Ok(m) => m,
        Err(e) => return c.cl.reply.error(e),
    };
    let mut n = 0;
    for db in 0..c.srv.dbs.len() {
        c.srv.touch_all_watched_keys_in_db(Some(c.cl), db, None);
        let d = &mut c.srv.dbs[db];
        n += d.len() as u64;
        d.clear_with(mode);
    }
    c.srv.tracking_invalidate_all();
    c.srv.replica_keys_with_expire.clear();
    // Like Redis: a running background save is stale now, and with save
    // points configured the (empty) dataset is saved right away. The save
    // resets the change counter, as rdbSave does in Redis 7.0: the flush is
    // in the file, so `rdb_changes_since_last_save` reads 0.
    crate::state::snapshot::abort_child(c.srv);
    if crate::state::snapshot::save_points(c.srv).is_empty()
        || crate::state::snapshot::save(c.srv).is_err()
    {
        c.dirty(n);
    }
    c.force_propagation();
    c.cl.reply.ok();
}

/// `TIME` — seconds and microseconds.
pub fn time(c: &mut Ctx, _argv: &[&[u8]]) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    c.cl.reply.array(2);
    c.cl.reply.bulk(now.as_secs().to_string().as_bytes());
    c.cl.reply.bulk(now.subsec_micros().to_string().as_bytes());
}

/// `SAVE` — write the snapshot now (blocking, as in Redis).
pub fn save(c: &mut Ctx, _argv: &[&[u8]]) {
    match crate::state::snapshot::save(c.srv) {
        Ok(()) => c.cl.reply.ok(),
        Err(e) if e.contains("in progress") => c.cl.reply.error(&format!("ERR {e}")),
        Err(_) => c.cl.reply.error("ERR"),
    }
}

/// `BGSAVE [SCHEDULE]` — snapshot in a forked child while the loop serves.
pub fn bgsave(c: &mut Ctx, argv: &[&[u8]]) {
    let schedule = match argv.len() {
        1 => false,
        2 if eq_ic(argv[1], "schedule") => true,
        _ => return c.cl.reply.error(ERR_SYNTAX),
    };
    // A snapshot child already writing refuses even SCHEDULE (Redis
    // schedules only behind another kind of child).
    if c.srv.snapshot.child.is_some() {
        return c.cl.reply.error("ERR Background save already in progress");
    }
    // One child at a time, as Redis: an AOF rewrite holds the fork, and
    // nothing forks inside EXEC.
    if c.srv.aof.rewrite.is_some() || c.srv.in_exec {
        if schedule || c.srv.in_exec {
            c.srv.snapshot.scheduled = true;
            return c.cl.reply.simple("Background saving scheduled");
        }
        return c.cl.reply.error("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
    }
    match crate::state::snapshot::bgsave(c.srv) {
        Ok(()) => c.cl.reply.simple("Background saving started"),
        Err(e) => c.cl.reply.error(&format!("ERR {e}")),
    }
}

/// `BGREWRITEAOF` — a new AOF base from a forked child (works with the
/// AOF off too: the directory then holds just the new base).
pub fn bgrewriteaof(c: &mut Ctx, _argv: &[&[u8]]) {
    if c.srv.aof.rewrite.is_some() {
        return c
            .cl
            .reply
            .error("ERR Background append only file rewriting already in progress");
    }
    if c.srv.snapshot.child.is_some() || c.srv.in_exec {
        c.srv.aof.rewrite_scheduled = true;
        // Asked for by hand: run as soon as possible, whatever the failures
        // before (Redis resets the count the rewrite limit reads).
        c.srv.aof.rewrites_consecutive_failures = 0;
        return c
            .cl
            .reply
            .simple("Background append only file rewriting scheduled");
    }
    match c.srv.rewrite_aof_background() {
        Ok(()) => {
            c.cl.reply
                .simple("Background append only file rewriting started")
        }
        // The reason goes to the log; the reply is Redis's.
        Err(e) => {
            tracing::warn!("{e}");
            c.cl.reply.error(
                "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
            )
        }
    }
}

/// `LASTSAVE` — Unix time of the last successful save (startup until then).
pub fn lastsave(c: &mut Ctx, _argv: &[&[u8]]) {
    c.cl.reply.int(c.srv.lastsave_unix);
}

// ---- DEBUG ----

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "AOF-FSYNC-SLEEP <microsec>",
    "    The AOF fsync thread will sleep before each fsync (a slow disk), this is",
    "    used for testing.",
    "ASSERT",
    "    Crash by assertion failed.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LEAK <string>",
    "    Create a memory leak of the input string.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "MALLCTL <key> [<val>]",
    "    Get or set a malloc tuning integer.",
    "MALLCTL-STR <key> [<val>]",
    "    Get or set a malloc tuning string.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "OOM",
    "    Crash the server simulating an out-of-memory error.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Let scripts run commands they may not run (a test hook).",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "CLIENT-EVICTION",
    "    Show low level client eviction pools info (maxmemory-clients).",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
    "HELP",
    "    Prints this help.",
];

/// Redis's stringmatchlen_fuzz_test: ten million random patterns and
/// strings of up to 31 bytes of ASCII through the glob matcher, which must
/// neither crash nor take forever on any of them.
fn stringmatch_fuzz(rng: &mut crate::util::Rng) -> usize {
    let mut matches = 0;
    let (mut pat, mut text) = ([0u8; 32], [0u8; 32]);
    for _ in 0..10_000_000 {
        let r = rng.next_u64();
        let (tlen, plen) = ((r % 32) as usize, ((r >> 8) % 32) as usize);
        for b in pat[..plen].iter_mut().chain(text[..tlen].iter_mut()) {
            *b = (rng.next_u64() % 128) as u8;
        }
        matches += usize::from(crate::util::glob_match(&pat[..plen], &text[..tlen], false));
    }
    matches
}

/// `DEBUG CLIENT-EVICTION`: the memory of the clients that may be evicted
/// (normal and pub/sub ones, not CLIENT NO-EVICT), in Redis's buckets by
/// size: below 32 KiB, then one per power of two up to 4 GiB and above.
fn debug_client_eviction(c: &mut Ctx) {
    const MIN_LOG: u32 = 15;
    const MAX_LOG: u32 = 33;
    const BUCKETS: usize = (1 + MAX_LOG - MIN_LOG) as usize;
    if c.srv.config.maxmemory_clients == 0 {
        return c.cl.reply.error("ERR maxmemory-clients is disabled.");
    }
    let mut buckets = [(0usize, 0usize); BUCKETS];
    let others = c.srv.clients.iter().flatten().map(|o| &**o);
    for o in others.chain(std::iter::once(&*c.cl)) {
        if o.kind != crate::state::ClientKind::Normal || o.no_evict {
            continue;
        }
        let mem = o.memory();
        let bits = usize::BITS - mem.leading_zeros();
        let idx = (bits.clamp(MIN_LOG, MAX_LOG) - MIN_LOG) as usize;
        buckets[idx].0 += mem;
        buckets[idx].1 += 1;
    }
    let mut text = String::new();
    for (j, (sum, clients)) in buckets.iter().enumerate() {
        if j == 0 {
            text.push_str("bucket          0");
        } else {
            text.push_str(&format!("bucket {:10}", 1usize << (j as u32 - 1 + MIN_LOG)));
        }
        if j == BUCKETS - 1 {
            text.push_str("+            : ");
        } else {
            text.push_str(&format!(" - {:10}: ", (1usize << (j as u32 + MIN_LOG)) - 1));
        }
        text.push_str(&format!("tot-mem: {sum:10}, clients: {clients}\n"));
    }
    c.cl.reply.verbatim(text.as_bytes());
}

/// `DEBUG POPULATE count [prefix] [size]` — create `prefix:N` = `value:N`
/// (zero-padded or cut to `size` bytes) for N below `count`, skipping keys
/// that exist; not propagated (a test tool, as in Redis).
fn debug_populate(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() > 5 {
        return subcommand_syntax_error(c, argv, "DEBUG");
    }
    // Redis's getPositiveLongFromObjectOrReply: one message for both.
    let positive = |a: &[u8]| match parse_i64(a) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err("ERR value is out of range, must be positive"),
    };
    let count = match positive(argv[2]) {
        Ok(n) => n,
        Err(e) => return c.cl.reply.error(e),
    };
    let size = match argv.get(4).map(|a| positive(a)) {
        None => 0,
        Some(Ok(n)) => n as usize,
        Some(Err(e)) => return c.cl.reply.error(e),
    };
    let prefix: &[u8] = argv.get(3).copied().unwrap_or(b"key");
    let db = c.cl.db;
    for j in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{j}").as_bytes());
        if lookup_write(c.srv, db, &key).is_some() {
            continue;
        }
        let mut value = format!("value:{j}").into_bytes();
        if size > 0 {
            value.resize(size, 0);
        }
        c.srv.dbs[db].set(Entry::from_vec(&key, value, false), false);
        c.signal_modified(&key);
    }
    c.cl.reply.ok();
}

/// C's atoi: leading spaces, a sign, the digits up to the first other byte.
fn c_atoi(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for &b in digits.iter().take_while(|b| b.is_ascii_digit()) {
        v = v.wrapping_mul(10).wrapping_add((b - b'0') as i64);
    }
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

/// `DEBUG PROTOCOL <type>`: one reply of each RESP type (Redis's test
/// hook for clients and for scripts' conversions).
fn debug_protocol(c: &mut Ctx, name: &[u8]) {
    let r = &mut c.cl.reply;
    match name.to_ascii_lowercase().as_slice() {
        b"string" => r.bulk(b"Hello World"),
        b"integer" => r.int(12345),
        // Redis's test value (not pi).
        #[allow(clippy::approx_constant)]
        b"double" => r.double(3.141),
        b"bignum" => r.big_number(b"1234567999999999999999999999999999999"),
        b"null" => r.null(),
        b"array" => {
            r.array(3);
            (0..3).for_each(|j| r.int(j));
        }
        b"set" => {
            r.set(3);
            (0..3).for_each(|j| r.int(j));
        }
        b"map" => {
            r.map(3);
            for j in 0..3 {
                r.int(j);
                r.boolean(j == 1);
            }
        }
        b"attrib" => {
            if r.is_resp3() {
                r.raw(b"|1\r\n");
                r.bulk(b"key-popularity");
                r.array(2);
                r.bulk(b"key:123");
                r.int(90);
            }
            // An attribute is not a reply: a real one follows.
            r.bulk(b"Some real reply following the attribute");
        }
        b"push" if !r.is_resp3() => r.error("ERR RESP2 is not supported by this command"),
        b"push" => {
            r.push(2);
            r.bulk(b"server-cpu-usage");
            r.int(42);
            r.bulk(b"Some real reply following the push reply");
        }
        b"true" => r.boolean(true),
        b"false" => r.boolean(false),
        b"verbatim" => r.verbatim_with(b"txt", b"This is a verbatim\nstring"),
        _ => r.error("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"),
    }
}

/// Bytes of a DUMP payload around the value: its type, the RDB version (2)
/// and the CRC-64 (8).
const DUMP_FRAMING: usize = 1 + 2 + 8;

/// DEBUG LISTPACK key and DEBUG QUICKLIST key [0|1]: print the value's
/// layout on stdout, as Redis does (its lpRepr / quicklistRepr), and say so.
fn debug_print_encoding(c: &mut Ctx, sub: &str, argv: &[&[u8]]) {
    let db = c.cl.db;
    let Some(e) = lookup_notouch(c.srv, db, argv[2]) else {
        return c.cl.reply.error(ERR_NO_SUCH_KEY);
    };
    let text = match (sub, e.value()) {
        ("listpack", ValueRef::Boxed(Value::Hash(h))) if h.encoding_is_packed() => {
            crate::db::listpack::repr(&crate::persistence::rdb::hash_listpack(h))
        }
        ("listpack", ValueRef::Boxed(Value::ZSet(z))) if z.encoding() == "listpack" => {
            crate::db::listpack::repr(&crate::persistence::rdb::zset_listpack(z))
        }
        ("listpack", _) => return c.cl.reply.error("ERR Not a listpack encoded object."),
        ("quicklist", ValueRef::Boxed(Value::List(l))) => {
            let full = argv.get(3).is_some_and(|a| c_atoi(a) != 0);
            l.repr(full)
        }
        _ => return c.cl.reply.error("ERR Not a quicklist encoded object."),
    };
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
    if sub == "listpack" {
        c.cl.reply.simple("Listpack structure printed on stdout");
    } else {
        c.cl.reply.simple("Quicklist structure printed on stdout");
    }
}

/// `DEBUG REPLYBUFFER PEAK-RESET-TIME <never|reset|ms>` and
/// `DEBUG REPLYBUFFER RESIZING <0|1>`: how the cron sizes reply buffers.
fn debug_replybuffer(c: &mut Ctx, argv: &[&[u8]]) {
    if eq_ic(argv[2], "peak-reset-time") {
        c.srv.reply_buffer_peak_reset_ms = if eq_ic(argv[3], "never") {
            -1
        } else if eq_ic(argv[3], "reset") {
            crate::state::REPLY_BUFFER_PEAK_RESET_MS
        } else {
            match parse_i64(argv[3]) {
                Some(ms) => ms,
                None => {
                    return c
                        .cl
                        .reply
                        .error("ERR value is not an integer or out of range")
                }
            }
        };
    } else if eq_ic(argv[2], "resizing") {
        c.srv.reply_buffer_resizing = c_atoi(argv[3]) != 0;
    } else {
        return subcommand_syntax_error(c, argv, "DEBUG");
    }
    c.cl.reply.ok();
}

/// `DEBUG SLEEP|LOG|LEAK|ASSERT|OOM|STRINGMATCH-TEST|CLIENT-EVICTION|DROP-CLUSTER-PACKET-FILTER|CLUSTERLINK|AOF-FLUSH-SLEEP|AOF-FSYNC-SLEEP|SET-ACTIVE-EXPIRE|SET-DISABLE-DENY-SCRIPTS|PROTOCOL|OBJECT|RELOAD|LOADAOF|PANIC|`
/// `DIGEST|DIGEST-VALUE|CHANGE-REPL-ID|POPULATE|PAUSE-CRON|LISTPACK|QUICKLIST|QUICKLIST-PACKED-THRESHOLD|HTSTATS|HTSTATS-KEY|HELP`
pub fn debug(c: &mut Ctx, argv: &[&[u8]]) {
    // DEBUG is one command in Redis, not a container: it parses its own
    // subcommands and answers anything else with addReplySubcommandSyntaxError.
    const SUBS: &[(&str, i32)] = &[
        ("help", 2),
        ("sleep", 3),
        ("set-active-expire", 3),
        ("aof-flush-sleep", 3),
        ("aof-fsync-sleep", 3),
        ("log", 3),
        ("segfault", 2),
        ("set-disable-deny-scripts", 3),
        ("set-skip-checksum-validation", 3),
        ("protocol", 3),
        ("object", 3),
        ("reload", -2),
        ("loadaof", 2),
        ("digest", 2),
        ("digest-value", -2),
        ("change-repl-id", 2),
        ("populate", -3),
        ("pause-cron", 3),
        ("panic", 2),
        ("listpack", 3),
        ("quicklist", 3),
        ("quicklist", 4),
        ("quicklist-packed-threshold", 3),
        ("replybuffer", 4),
        ("config-rewrite-force-all", 2),
        ("htstats", 3),
        ("htstats-key", 3),
        ("replicate", -3),
        ("error", 3),
        ("mallctl", -3),
        ("mallctl-str", -3),
        ("assert", -2),
        ("oom", -2),
        ("leak", 3),
        ("drop-cluster-packet-filter", 3),
        ("stringmatch-test", 2),
        ("client-eviction", 2),
        ("clusterlink", 5),
    ];
    let argc = argv.len() as i32;
    let found = SUBS.iter().find(|(name, arity)| {
        eq_ic(argv[1], name) && (argc == *arity || (*arity < 0 && argc >= -arity))
    });
    let Some(&(sub, _)) = found else {
        return subcommand_syntax_error(c, argv, "DEBUG");
    };
    match sub {
        "help" => reply_help(c, DEBUG_HELP),
        "replicate" => {
            // Straight to the replicas (not the AOF), whatever it says: a
            // test tool for divergence between master and replica.
            let db = c.cl.db;
            c.srv
                .propagate_only_to(db, &argv[2..], crate::state::feed::TO_REPLICAS);
            c.cl.reply.ok();
        }
        "error" => c.cl.reply.error(&String::from_utf8_lossy(argv[2])),
        "mallctl" | "mallctl-str" => {
            use crate::memory::MallctlReply;
            let answer = if sub == "mallctl" {
                let new = match argv.get(3) {
                    None => None,
                    Some(v) => match crate::util::parse_i64(v) {
                        Some(v) => Some(v),
                        None => return c.cl.reply.error(super::ERR_NOT_INT),
                    },
                };
                crate::memory::mallctl_int(argv[2], new)
            } else {
                crate::memory::mallctl_str(argv[2], argv.get(3).copied())
            };
            match answer {
                MallctlReply::Int(v) => c.cl.reply.int(v),
                MallctlReply::Str(s) => c.cl.reply.bulk(&s),
                MallctlReply::Ok => c.cl.reply.ok(),
                MallctlReply::Errno(e) => {
                    c.cl.reply
                        .error(&format!("ERR {}", crate::memory::strerror(e)))
                }
            }
        }
        "sleep" => {
            // DEBUG SLEEP is defined to block the server; it is a test tool.
            let secs = String::from_utf8_lossy(argv[2])
                .trim()
                .parse::<f64>()
                .unwrap_or(0.0);
            if secs > 0.0 && secs.is_finite() {
                std::thread::sleep(Duration::from_secs_f64(secs.min(86_400.0)));
            }
            c.cl.reply.ok();
        }
        "reload" => {
            // Save, empty the databases, load the file back; NOSAVE loads
            // the file as it is, NOFLUSH keeps the dataset (a key or library
            // in both fails the load unless MERGE replaces it).
            use crate::persistence::rdb;
            use crate::state::snapshot;
            let (mut merge, mut flush, mut save) = (false, true, true);
            for opt in &argv[2..] {
                if eq_ic(opt, "merge") {
                    merge = true;
                } else if eq_ic(opt, "noflush") {
                    flush = false;
                } else if eq_ic(opt, "nosave") {
                    save = false;
                } else {
                    return c.cl.reply.error(
                        "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                    );
                }
            }
            if save {
                if let Err(e) = snapshot::save(c.srv) {
                    return c
                        .cl
                        .reply
                        .error(&format!("ERR Error trying to save the DB: {e}"));
                }
            }
            if flush {
                for db in 0..c.srv.dbs.len() {
                    c.srv.touch_all_watched_keys_in_db(Some(c.cl), db, None);
                    c.srv.dbs[db].clear();
                }
                c.srv.functions.flush();
            }
            c.srv.tracking_invalidate_all();
            let path = c.srv.config.dir.join(&c.srv.config.dbfilename);
            let mut opts = rdb::LoadOptions::from_config(&c.srv.config);
            opts.checksum &= !c.srv.skip_checksum_validation;
            // A replica keeps what its master has yet to expire.
            opts.keep_expired = c.srv.master.target.is_some();
            opts.allow_dup = merge;
            match rdb::load_file(&mut c.srv.dbs, &opts, &path).and_then(|stats| {
                stats
                    .functions
                    .iter()
                    .try_for_each(|code| c.srv.functions.load(code, merge).map(|_| ()))
            }) {
                Ok(()) => {
                    tracing::warn!("DB reloaded by DEBUG RELOAD");
                    c.cl.reply.ok()
                }
                Err(e) => {
                    c.cl.reply
                        .error(&format!("ERR Error trying to load the RDB dump: {e}"))
                }
            }
        }
        "loadaof" => {
            // As Redis: the AOF on disk is complete first, then it is the
            // dataset; a load that fails stops the server.
            c.srv.flush_feed();
            c.srv.flush_aof();
            c.srv.sync_aof_now();
            for db in 0..c.srv.dbs.len() {
                c.srv.touch_all_watched_keys_in_db(Some(c.cl), db, None);
                c.srv.dbs[db].clear();
            }
            // Redis's emptyData: the libraries go too, the file has them.
            c.srv.functions.flush();
            c.srv.tracking_invalidate_all();
            if let Err(e) = crate::state::snapshot::load_aof_now(c.srv, super::replay_aof_command) {
                tracing::error!("{e}");
                std::process::exit(1);
            }
            c.srv.dirty = 0;
            tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
            c.cl.reply.ok();
        }
        "segfault" => {
            // DEBUG SEGFAULT: crash as a bad memory access would, through
            // the fatal signal handler's report (Redis maps a read-only page
            // and writes to it; the signal is what matters).
            // SAFETY: raising a signal; the handler ends the process.
            unsafe { libc::raise(libc::SIGSEGV) };
            c.cl.reply.ok();
        }
        "log" => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(argv[2]));
            c.cl.reply.ok();
        }
        "aof-flush-sleep" => {
            // Microseconds slept before each AOF write (a test aid: the
            // write of a turn's commands is seen to come before its replies).
            c.srv.aof.flush_sleep_us = c_atoi(argv[2]).max(0) as u64;
            c.cl.reply.ok();
        }
        "aof-fsync-sleep" => {
            // Microseconds the fsync thread sleeps before each fsync (a test
            // aid: a slow disk, with writes and replies going on meanwhile).
            let us = c_atoi(argv[2]).max(0) as u64;
            c.srv
                .aof
                .fsync_sleep_us
                .store(us, std::sync::atomic::Ordering::Relaxed);
            c.cl.reply.ok();
        }
        "set-active-expire" => {
            c.srv.active_expire_enabled = parse_i64(argv[2]).unwrap_or(0) != 0;
            c.cl.reply.ok();
        }
        "set-disable-deny-scripts" => {
            c.srv.script_disable_deny = c_atoi(argv[2]) != 0;
            c.cl.reply.ok();
        }
        "set-skip-checksum-validation" => {
            c.srv.skip_checksum_validation = c_atoi(argv[2]) != 0;
            c.cl.reply.ok();
        }
        "protocol" => debug_protocol(c, argv[2]),
        "digest" => super::digest::debug_digest(c),
        "digest-value" => super::digest::debug_digest_value(c, &argv[2..]),
        "change-repl-id" => {
            // A new history: the id changes and no second id remains.
            c.srv.replid = crate::util::random_hex(40);
            c.srv.repl.replid2 = "0".repeat(40);
            c.srv.repl.second_offset = -1;
            c.cl.reply.ok();
        }
        "populate" => debug_populate(c, argv),
        "pause-cron" => {
            c.srv.cron_paused = c_atoi(argv[2]) != 0;
            c.cl.reply.ok();
        }
        "replybuffer" => debug_replybuffer(c, argv),
        "htstats" => {
            let db = match parse_i64(argv[2]) {
                None => {
                    return c
                        .cl
                        .reply
                        .error("ERR value is not an integer or out of range")
                }
                Some(id) if id < 0 || id as usize >= c.srv.dbs.len() => {
                    return c.cl.reply.error("ERR Out of range database")
                }
                Some(id) => &c.srv.dbs[id as usize],
            };
            let text = format!(
                "[Dictionary HT]\n{}[Expires HT]\n{}",
                db.main.stats(),
                db.expires.stats()
            );
            c.cl.reply.verbatim(text.as_bytes());
        }
        "htstats-key" => {
            let Some(e) = c.srv.dbs[c.cl.db].main.get(argv[2]) else {
                return c.cl.reply.error(ERR_NO_SUCH_KEY);
            };
            let table = match e.value() {
                ValueRef::Boxed(v) => v.hash_table(),
                _ => None,
            };
            match table {
                Some(t) => {
                    let text = t.stats();
                    c.cl.reply.verbatim(text.as_bytes());
                }
                None => c.cl.reply.error(
                    "ERR The value stored at the specified key is not represented using an hash table",
                ),
            }
        }
        "config-rewrite-force-all" => match c
            .srv
            .config
            .rewrite_with(true, &super::acl::config_user_lines(c.srv))
        {
            Ok(()) => c.cl.reply.ok(),
            Err(e) => {
                c.cl.reply
                    .error(&format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}"))
            }
        },
        // Redis's DEBUG PANIC: crash as a bug would (the crash report, when
        // `crash-log-enabled`, and the exit).
        "panic" => panic!("DEBUG PANIC called at Unix time {}", c.srv.now_ms / 1000),
        "assert" => {
            tracing::warn!("=== ASSERTION FAILED ===");
            panic!("DEBUG ASSERT: '1 == 2' is not true");
        }
        "oom" => {
            // An allocation no machine can give: the server dies as any
            // failed allocation makes it die (Redis's zmalloc OOM handler).
            let size = isize::MAX as usize;
            if Vec::<u8>::new().try_reserve_exact(size).is_err() {
                tracing::warn!("Out Of Memory allocating {size} bytes!");
                if let Ok(layout) = std::alloc::Layout::from_size_align(size, 1) {
                    std::alloc::handle_alloc_error(layout);
                }
            }
            c.cl.reply.ok();
        }
        "leak" => {
            // A test aid for leak detectors: the copy is never freed.
            std::mem::forget(argv[2].to_vec());
            c.cl.reply.ok();
        }
        "drop-cluster-packet-filter" => match parse_i64(argv[2]) {
            // There is no cluster bus here, so no packet to drop: the
            // argument is checked as Redis checks it.
            Some(_) => c.cl.reply.ok(),
            None => c.cl.reply.error(super::ERR_NOT_INT),
        },
        "clusterlink" if eq_ic(argv[2], "kill") => {
            c.cl.reply
                .error("ERR Debug option only available for cluster mode enabled setup!")
        }
        "clusterlink" => subcommand_syntax_error(c, argv, "DEBUG"),
        "stringmatch-test" => {
            stringmatch_fuzz(&mut c.srv.rng.fork());
            c.cl.reply
                .simple("Apparently Redis did not crash: test passed");
        }
        "client-eviction" => debug_client_eviction(c),
        "listpack" | "quicklist" => debug_print_encoding(c, sub, argv),
        "quicklist-packed-threshold" => {
            let size = std::str::from_utf8(argv[2])
                .ok()
                .and_then(|v| crate::config::parse_memory(v).ok());
            match size {
                Some(n) if crate::db::quicklist::set_packed_threshold(n) => c.cl.reply.ok(),
                _ => c.cl.reply.error(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                ),
            }
        }
        _ => {
            let db = c.cl.db;
            let Some(e) = c.srv.dbs[db].main.get(argv[2]) else {
                return c.cl.reply.error(ERR_NO_SUCH_KEY);
            };
            // What the value takes in a dump (Redis's rdbSavedObjectLen): the
            // payload DUMP would make, less its type byte and its version and
            // checksum.
            let payload = crate::persistence::rdb::dump_payload(e, c.srv.config.rdbcompression);
            let size = payload.len().saturating_sub(DUMP_FRAMING);
            let encoding = encoding_name(e);
            let idle = crate::db::entry::lru_idle(lru_clock(c.srv.now_ms), e.lru());
            // A list adds its quicklist's shape, as Redis's does.
            let extra = match e.value() {
                ValueRef::Boxed(Value::List(l)) => {
                    let shape = l.shape();
                    format!(
                        " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
                        shape.nodes,
                        shape.count as f64 / shape.nodes as f64,
                        shape.fill,
                        u8::from(shape.compress != 0),
                        shape.uncompressed_size
                    )
                }
                _ => String::new(),
            };
            let refcount = super::keys::refcount(e, super::keys::shares_integers(c.srv));
            let text = format!(
                "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}{}",
                e as *const _, encoding, size, e.lru(), idle, extra
            );
            c.cl.reply.simple(&text);
        }
    }
}

// ---- CLUSTER ----

/// `CLUSTER <subcommand>`, `READONLY`, `READWRITE`, `ASKING`: this server
/// never runs in cluster mode (`cluster-enabled yes` is refused), so each
/// answers as a Redis 7.0 with cluster support disabled does.
pub fn cluster_disabled(c: &mut Ctx, _argv: &[&[u8]]) {
    c.cl.reply
        .error("ERR This instance has cluster support disabled");
}

// ---- MODULE ----

const MODULE_HELP: &[&str] = &[
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
    "HELP",
    "    Prints this help.",
];

/// `MODULE LIST|LOAD|LOADEX|UNLOAD|HELP` — kvstore loads no Redis modules
/// (their API is Redis's C internals): the list is empty and a load fails
/// as a failed load does in Redis, with the reason in the log. Only where
/// `enable-module-command` allows it at all.
pub fn module(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    match sub {
        "help" => reply_help(c, MODULE_HELP),
        "list" => c.cl.reply.array(0),
        "unload" => {
            c.cl.reply
                .error("ERR Error unloading module: no such module with that name")
        }
        _ => {
            tracing::warn!(
                "Module {} failed to load: kvstore does not load Redis modules",
                String::from_utf8_lossy(argv[2])
            );
            c.cl.reply
                .error("ERR Error loading the extension. Please check the server logs.");
        }
    }
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`
///
/// The client blocks while the loop shuts down (Redis's BLOCKED_SHUTDOWN):
/// with replicas lagging and no NOW, writes pause for up to
/// `shutdown-timeout` seconds while they catch up; then the final snapshot
/// (unless NOSAVE; without save points only with SAVE) and the exit. A
/// snapshot that fails, without FORCE, cancels the shutdown and the
/// client gets an error; so does `SHUTDOWN ABORT` during the wait.
pub fn shutdown(c: &mut Ctx, argv: &[&[u8]]) {
    let mut flags = ShutdownFlags::default();
    let mut abort = false;
    for a in &argv[1..] {
        if eq_ic(a, "nosave") {
            flags = flags.with(ShutdownFlags::NOSAVE);
        } else if eq_ic(a, "save") {
            flags = flags.with(ShutdownFlags::SAVE);
        } else if eq_ic(a, "now") {
            flags = flags.with(ShutdownFlags::NOW);
        } else if eq_ic(a, "force") {
            flags = flags.with(ShutdownFlags::FORCE);
        } else if eq_ic(a, "abort") {
            abort = true;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    let nosave = flags.has(ShutdownFlags::NOSAVE);
    if (nosave && flags.has(ShutdownFlags::SAVE)) || (abort && argv.len() > 2) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    if abort {
        if abort_shutdown(c.srv) {
            return c.cl.reply.ok();
        }
        return c.cl.reply.error("ERR No shutdown in progress.");
    }
    // While a script runs too long, only SHUTDOWN NOSAVE (which stops it).
    if !nosave {
        if let Some(run) = c.srv.script_run.as_ref() {
            return c.cl.reply.error(if run.eval {
                super::scripting::ERR_BUSY_SCRIPT
            } else {
                super::scripting::ERR_BUSY_FUNCTION
            });
        }
    }
    // One already waiting for replicas goes on; this client waits for it.
    if c.srv.shutdown_wait.is_none() {
        c.srv.shutdown = Some(flags);
    }
    blocking::block_for_shutdown(c);
}

/// SHUTDOWN ABORT: stop a shutdown waiting for replicas (Redis's
/// abortShutdown). False when none is under way.
fn abort_shutdown(srv: &mut Server) -> bool {
    if srv.shutdown_wait.is_some() {
        cancel_shutdown(srv);
    } else if srv.shutdown.take().is_none() && srv.shutdown_asap.take().is_none() {
        return false;
    }
    tracing::info!("Shutdown manually aborted.");
    true
}

/// A shutdown is off (aborted, or its final snapshot failed): writes
/// resume and the clients blocked in SHUTDOWN get Redis's error (its
/// cancelShutdown and replyToClientsBlockedOnShutdown).
pub fn cancel_shutdown(srv: &mut Server) {
    srv.shutdown = None;
    srv.shutdown_wait = None;
    let waiting: Vec<u64> = srv
        .clients
        .iter()
        .flatten()
        .filter(|c| c.blocked.as_ref().is_some_and(|b| b.shutdown))
        .map(|c| c.id)
        .collect();
    for id in waiting {
        let Some((slot, mut client)) = srv.take_client(id) else {
            continue;
        };
        client
            .reply
            .error("ERR Errors trying to SHUTDOWN. Check logs.");
        blocking::unblock(srv, &mut client);
        srv.unblocked.push((slot, id));
        srv.clients[slot] = Some(client);
    }
}
