//! What a client holds on the server, against the real binary: reply
//! buffers sized by the cron (DEBUG REPLYBUFFER, CLIENT LIST rbs/rbp),
//! client eviction at `maxmemory-clients`, the query buffer of a big
//! argument as CLIENT LIST shows it, and huge random-pick counts stopped by
//! the hard output limit.

mod common;

use std::time::Duration;

use common::{bulk_payload, start_kvstore, start_redis, Conn};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The lines of CLIENT LIST.
fn client_lines(c: &mut Conn) -> Vec<String> {
    let raw = c.cmd_str(&["CLIENT", "LIST"]);
    let body = bulk_payload(&raw).unwrap_or_else(|| panic!("CLIENT LIST: {}", text(&raw)));
    text(body).lines().map(str::to_string).collect()
}

/// One field of the CLIENT LIST line of the client named `name`; None when
/// no such client is connected.
fn client_field(c: &mut Conn, name: &str, field: &str) -> Option<String> {
    let line = client_lines(c)
        .into_iter()
        .find(|l| l.split(' ').any(|f| f == format!("name={name}")))?;
    let found = line
        .split(' ')
        .find_map(|f| f.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("no {field} in {line}"));
    Some(found.to_string())
}

fn client_u64(c: &mut Conn, name: &str, field: &str) -> u64 {
    client_field(c, name, field)
        .unwrap_or_else(|| panic!("no client named {name}"))
        .parse()
        .unwrap()
}

fn debug_server() -> common::ServerProcess {
    start_kvstore(&["--enable-debug-command", "yes"])
}

/// Redis's "verify reply buffer limits", and DEBUG REPLYBUFFER RESIZING.
fn resize_reply_buffers(port: u16) {
    let mut c = Conn::connect(port);
    assert_eq!(
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]),
        b"+OK\r\n"
    );
    let mut tc = Conn::connect(port);
    assert_eq!(
        tc.cmd_str(&["CLIENT", "SETNAME", "test_client"]),
        b"+OK\r\n"
    );
    // Idle: the buffer shrinks to what it used, but not under 1 KB.
    common::wait_for("the idle client's reply buffer to shrink", 3, || {
        (1024..2048).contains(&client_u64(&mut c, "test_client", "rbs"))
    });
    let shrinks = c.info_num::<u64>("stats", "reply_buffer_shrinks");
    assert!(shrinks > 0);

    // Busy with big replies: it doubles back up to 16 KB, never past.
    let big = "x".repeat(32 * 1024);
    assert_eq!(c.cmd_str(&["SET", "bigval", &big]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "NEVER"]),
        b"+OK\r\n"
    );
    let expands = c.info_num::<u64>("stats", "reply_buffer_expands");
    common::wait_for("the busy client's reply buffer to grow", 5, || {
        let reply = tc.cmd_str(&["GET", "bigval"]);
        assert_eq!(bulk_payload(&reply), Some(big.as_bytes()));
        client_u64(&mut c, "test_client", "rbs") >= 16384
    });
    assert_eq!(client_u64(&mut c, "test_client", "rbs"), 16384);
    // The peak is capped at the size it was seen at: one more big reply
    // fills the grown buffer.
    let reply = tc.cmd_str(&["GET", "bigval"]);
    assert_eq!(bulk_payload(&reply), Some(big.as_bytes()));
    assert_eq!(client_u64(&mut c, "test_client", "rbp"), 16384);
    assert!(c.info_num::<u64>("stats", "reply_buffer_expands") > expands);

    // Resizing off: the idle buffer keeps its size although its peak would
    // otherwise be forgotten within 100 ms and the buffer shrunk.
    assert_eq!(
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "RESIZING", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]),
        b"+OK\r\n"
    );
    let shrinks = c.info_num::<u64>("stats", "reply_buffer_shrinks");
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(client_u64(&mut c, "test_client", "rbs"), 16384);
    assert_eq!(c.info_num::<u64>("stats", "reply_buffer_shrinks"), shrinks);
    // On again: it shrinks.
    assert_eq!(
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "RESIZING", "1"]),
        b"+OK\r\n"
    );
    common::wait_for("the reply buffer to shrink once resizing is on", 3, || {
        client_u64(&mut c, "test_client", "rbs") < 16384
    });
    assert_eq!(
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "RESET"]),
        b"+OK\r\n"
    );
}

#[test]
fn reply_buffers_shrink_when_idle_and_grow_when_busy() {
    let kv = debug_server();
    resize_reply_buffers(kv.port);
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    resize_reply_buffers(redis.port);
}

/// DEBUG REPLYBUFFER's errors, as one server answers them.
fn replybuffer_errors(port: u16) -> Vec<Vec<u8>> {
    let mut c = Conn::connect(port);
    vec![
        c.cmd_str(&["DEBUG", "replybuffer", "nosuch", "1"]),
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "RESIZING"]),
        c.cmd_str(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "soon"]),
    ]
}

#[test]
fn debug_replybuffer_errors_are_redis_s() {
    let kv = debug_server();
    let ours = replybuffer_errors(kv.port);
    assert_eq!(
        ours,
        [
            b"-ERR unknown subcommand or wrong number of arguments for 'replybuffer'. Try DEBUG HELP.\r\n".to_vec(),
            b"-ERR unknown subcommand or wrong number of arguments for 'REPLYBUFFER'. Try DEBUG HELP.\r\n".to_vec(),
            b"-ERR value is not an integer or out of range\r\n".to_vec(),
        ],
        "{:?}",
        ours.iter().map(|r| text(r)).collect::<Vec<_>>()
    );
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    assert_eq!(replybuffer_errors(redis.port), ours);
}

/// Ten clients each holding 1 MB in their query buffer; a limit with room
/// for half of them (and the control client) leaves exactly half.
fn evict_half_of_ten_big_clients(port: u16) {
    const CLIENTS: usize = 10;
    const ARG: usize = 1 << 20;
    let mut ctl = Conn::connect(port);
    // Buffers resized by the cron would change the clients' sizes.
    assert_eq!(
        ctl.cmd_str(&["DEBUG", "REPLYBUFFER", "RESIZING", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(ctl.cmd_str(&["CLIENT", "SETNAME", "control"]), b"+OK\r\n");
    assert_eq!(ctl.cmd_str(&["CLIENT", "NO-EVICT", "ON"]), b"+OK\r\n");
    let mut clients = Vec::new();
    let mut biggest = 0;
    for j in 0..CLIENTS {
        let name = format!("client{j}");
        let mut rr = Conn::connect(port);
        assert_eq!(rr.cmd_str(&["CLIENT", "SETNAME", &name]), b"+OK\r\n");
        // An argument of 1 MB, all but its CRLF: held in the query buffer.
        let mut partial = format!("*2\r\n${ARG}\r\n").into_bytes();
        partial.extend(std::iter::repeat_n(b'v', ARG));
        rr.send_raw(&partial);
        common::wait_for(&format!("{name}'s query buffer to fill"), 5, || {
            client_u64(&mut ctl, &name, "tot-mem") >= ARG as u64
        });
        biggest = biggest.max(client_u64(&mut ctl, &name, "tot-mem"));
        clients.push(rr);
    }
    let count_named = |c: &mut Conn| {
        client_lines(c)
            .iter()
            .filter(|l| l.contains(" name=client"))
            .count()
    };
    assert_eq!(count_named(&mut ctl), CLIENTS);
    assert_eq!(ctl.info_num::<u64>("stats", "evicted_clients"), 0);
    // Room for half of them, and the control client.
    let limit = biggest * CLIENTS as u64 / 2 + client_u64(&mut ctl, "control", "tot-mem");
    assert_eq!(
        ctl.cmd_str(&["CONFIG", "SET", "maxmemory-clients", &limit.to_string()]),
        b"+OK\r\n"
    );
    assert_eq!(count_named(&mut ctl), CLIENTS / 2);
    assert_eq!(
        ctl.info_num::<u64>("stats", "evicted_clients"),
        (CLIENTS / 2) as u64
    );
    let total: u64 = client_lines(&mut ctl)
        .iter()
        .filter_map(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("tot-mem="))
                .map(|v| v.parse::<u64>().unwrap())
        })
        .sum();
    assert!(total <= limit, "clients hold {total}, the limit is {limit}");
}

#[test]
fn client_eviction_disconnects_the_biggest_clients_only_until_under_the_limit() {
    let kv = debug_server();
    evict_half_of_ten_big_clients(kv.port);
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    evict_half_of_ten_big_clients(redis.port);
}

/// A client adding BCAST prefixes one by one under a small
/// `maxmemory-clients` is eventually evicted for them.
fn evict_a_client_for_its_tracking_prefixes(port: u16) {
    let mut ctl = Conn::connect(port);
    assert_eq!(ctl.cmd_str(&["CLIENT", "NO-EVICT", "ON"]), b"+OK\r\n");
    assert_eq!(
        ctl.cmd_str(&["CONFIG", "SET", "maxmemory-clients", "200000"]),
        b"+OK\r\n"
    );
    let mut rr = Conn::connect(port);
    let mut evicted_after = None;
    for j in 0..200_000 {
        let prefix = format!("{j:012}");
        match rr.try_cmd_str(&["CLIENT", "TRACKING", "ON", "PREFIX", &prefix, "BCAST"]) {
            Ok(reply) => assert_eq!(reply, b"+OK\r\n", "prefix {j}: {}", text(&reply)),
            Err(_) => {
                evicted_after = Some(j);
                break;
            }
        }
    }
    let prefixes = evicted_after.expect("the client adding prefixes was never evicted");
    // Its prefixes did it, not what it had to start with.
    assert!(prefixes > 100, "evicted after {prefixes} prefixes");
    assert_eq!(ctl.info_num::<u64>("stats", "evicted_clients"), 1);
    assert_eq!(ctl.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn client_eviction_counts_tracking_prefixes() {
    let kv = start_kvstore(&[]);
    evict_a_client_for_its_tracking_prefixes(kv.port);
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    evict_a_client_for_its_tracking_prefixes(redis.port);
}

/// CLIENT LIST's qbuf for a client part way through, then all through, a
/// 1 MB argument (without its CRLF).
fn big_argument_qbuf(port: u16) {
    const ARG: usize = 1 << 20;
    const FIRST: usize = 40_000;
    let mut ctl = Conn::connect(port);
    let mut rr = Conn::connect(port);
    assert_eq!(rr.cmd_str(&["CLIENT", "SETNAME", "big"]), b"+OK\r\n");
    let mut head = format!("*1\r\n${ARG}\r\n").into_bytes();
    head.extend(std::iter::repeat_n(b'v', FIRST));
    rr.send_raw(&head);
    let mut qbuf = 0;
    common::wait_for("the first part of the argument", 5, || {
        qbuf = client_u64(&mut ctl, "big", "qbuf");
        qbuf == FIRST as u64
    });
    rr.send_raw(&vec![b'v'; ARG - FIRST]);
    common::wait_for("the whole argument", 5, || {
        qbuf = client_u64(&mut ctl, "big", "qbuf");
        qbuf == ARG as u64
    });
    // The CRLF ends it: an unknown command of 1 MB.
    rr.send_raw(b"\r\n");
    let reply = rr.read_reply();
    assert!(
        reply.starts_with(b"-ERR unknown command"),
        "{}",
        text(&reply)
    );
    assert_eq!(client_u64(&mut ctl, "big", "qbuf"), 0);
}

#[test]
fn client_list_qbuf_shows_only_a_big_argument_s_bytes() {
    let kv = start_kvstore(&[]);
    big_argument_qbuf(kv.port);
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    big_argument_qbuf(redis.port);
}

const HUGE_RANDOM_PICKS: [[&str; 3]; 3] = [
    ["HRANDFIELD", "myhash", "-999999999"],
    ["SRANDMEMBER", "myset", "-999999999"],
    ["ZRANDMEMBER", "myzset", "-999999999"],
];

#[test]
fn huge_random_pick_counts_are_refused_without_an_output_limit() {
    let kv = start_kvstore(&[]);
    let mut c = Conn::connect(kv.port);
    c.cmd_str(&["HSET", "myhash", "a", "1"]);
    c.cmd_str(&["SADD", "myset", "a"]);
    c.cmd_str(&["ZADD", "myzset", "1", "a"]);
    for argv in HUGE_RANDOM_PICKS {
        assert_eq!(
            c.cmd_str(&argv),
            b"-ERR value is out of range\r\n",
            "{argv:?}"
        );
    }
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    // A count the server can answer still is.
    assert_eq!(
        c.cmd_str(&["SRANDMEMBER", "myset", "-3"]),
        b"*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n"
    );
}

/// Under a hard output limit, each huge random pick closes its client as
/// soon as the reply overflows the limit (Redis stops building it there).
/// `counted`: the server has INFO `client_output_buffer_limit_disconnections`
/// (Redis 7.0 has not).
fn huge_random_picks_close_their_clients(port: u16, counted: bool) {
    let mut c = Conn::connect(port);
    c.cmd_str(&["HSET", "myhash", "a", "1"]);
    c.cmd_str(&["SADD", "myset", "a"]);
    c.cmd_str(&["ZADD", "myzset", "1", "a"]);
    assert_eq!(
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1000000 0 0"
        ]),
        b"+OK\r\n"
    );
    for argv in HUGE_RANDOM_PICKS {
        let mut victim = Conn::connect(port);
        let v: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        victim.send(&v);
        victim.expect_closed();
    }
    if counted {
        assert_eq!(
            c.info_num::<u64>("stats", "client_output_buffer_limit_disconnections"),
            3
        );
    }
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn huge_random_pick_counts_close_a_client_with_a_hard_output_limit() {
    let kv = start_kvstore(&[]);
    huge_random_picks_close_their_clients(kv.port, true);
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    huge_random_picks_close_their_clients(redis.port, false);
}

/// What CLIENT LIST, CLIENT KILL and HELLO say of a MONITOR, a doomed
/// transaction, a list of ids and a replica, on one server.
fn client_views(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port);
    let mut seen = Vec::new();
    // A MONITOR is a normal client, as Redis's getClientType.
    let mut mon = Conn::connect(port);
    mon.cmd_str(&["CLIENT", "SETNAME", "mon"]);
    assert_eq!(mon.cmd_str(&["MONITOR"]), b"+OK\r\n");
    let raw = c.cmd_str(&["CLIENT", "LIST", "TYPE", "replica"]);
    seen.push(format!(
        "replicas: {}",
        text(bulk_payload(&raw).unwrap()).lines().count()
    ));
    let raw = c.cmd_str(&["CLIENT", "LIST", "TYPE", "normal"]);
    seen.push(format!(
        "monitor is normal: {}",
        text(&raw).contains("name=mon ")
    ));
    seen.push(text(&c.cmd_str(&["CLIENT", "KILL", "TYPE", "replica"])));
    // A transaction EXEC will refuse keeps no more commands.
    let mut tx = Conn::connect(port);
    tx.cmd_str(&["CLIENT", "SETNAME", "tx"]);
    let a = tx.client_id();
    tx.cmd_str(&["WATCH", "k"]);
    c.cmd_str(&["SET", "k", "1"]);
    tx.cmd_str(&["MULTI"]);
    tx.cmd_str(&["GET", "x"]);
    tx.cmd_str(&["GET", "y"]);
    seen.push(format!(
        "dirty: multi={}",
        client_field(&mut c, "tx", "multi").unwrap()
    ));
    let mut bad = Conn::connect(port);
    bad.cmd_str(&["CLIENT", "SETNAME", "bad"]);
    let b = bad.client_id();
    bad.cmd_str(&["MULTI"]);
    bad.cmd_str(&["GET", "x"]);
    bad.cmd_str(&["NOSUCH"]);
    bad.cmd_str(&["GET", "y"]);
    bad.cmd_str(&["GET", "z"]);
    seen.push(format!(
        "errored: multi={}",
        client_field(&mut c, "bad", "multi").unwrap()
    ));
    // CLIENT LIST ID: in the order given, repeated as given.
    let raw = c.cmd_str(&["CLIENT", "LIST", "ID", &b, &a, "0", &b]);
    let names: Vec<String> = text(bulk_payload(&raw).unwrap())
        .lines()
        .map(|l| {
            l.split(' ')
                .find(|f| f.starts_with("name="))
                .unwrap()
                .to_string()
        })
        .collect();
    seen.push(format!("ids: {names:?}"));
    // HELLO's role follows REPLICAOF.
    let unused = common::free_port().to_string();
    c.cmd_str(&["REPLICAOF", "127.0.0.1", &unused]);
    let hello = text(&c.cmd_str(&["HELLO", "2"]));
    seen.push(format!(
        "role replica: {}",
        hello.contains("$4\r\nrole\r\n$7\r\nreplica\r\n")
    ));
    c.cmd_str(&["REPLICAOF", "NO", "ONE"]);
    let hello = text(&c.cmd_str(&["HELLO", "2"]));
    seen.push(format!(
        "role master: {}",
        hello.contains("$4\r\nrole\r\n$6\r\nmaster\r\n")
    ));
    seen
}

#[test]
fn client_types_transactions_ids_and_roles_show_as_redis_shows_them() {
    let kv = start_kvstore(&[]);
    let got = client_views(kv.port);
    assert_eq!(
        got,
        [
            "replicas: 0",
            "monitor is normal: true",
            ":0\r\n",
            "dirty: multi=0",
            "errored: multi=1",
            "ids: [\"name=bad\", \"name=tx\", \"name=bad\"]",
            "role replica: true",
            "role master: true",
        ]
    );
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    assert_eq!(got, client_views(redis.port));
}

/// DEBUG CLIENT-EVICTION's buckets: a client holding a 1 MB argument is
/// in the 1-2 MB bucket with what it holds, a CLIENT NO-EVICT one in none.
fn client_eviction_buckets(port: u16) {
    const ARG: usize = 1 << 20;
    let mut ctl = Conn::connect(port);
    assert_eq!(
        ctl.cmd_str(&["DEBUG", "CLIENT-EVICTION"]),
        b"-ERR maxmemory-clients is disabled.\r\n"
    );
    assert_eq!(ctl.cmd_str(&["CLIENT", "NO-EVICT", "ON"]), b"+OK\r\n");
    assert_eq!(
        ctl.cmd_str(&["CONFIG", "SET", "maxmemory-clients", "1gb"]),
        b"+OK\r\n"
    );
    let mut big = Conn::connect(port);
    assert_eq!(big.cmd_str(&["CLIENT", "SETNAME", "big"]), b"+OK\r\n");
    let mut partial = format!("*2\r\n${ARG}\r\n").into_bytes();
    partial.extend(std::iter::repeat_n(b'v', ARG));
    big.send_raw(&partial);
    let bucket = |ctl: &mut Conn, start: usize| -> (u64, u64) {
        let raw = ctl.cmd_str(&["DEBUG", "CLIENT-EVICTION"]);
        let body = text(bulk_payload(&raw).unwrap_or_else(|| panic!("{}", text(&raw))));
        let head = format!("bucket {start:10} - ");
        let line = body
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no bucket {start} in {body}"));
        let num = |tag: &str| -> u64 {
            let rest = &line[line.find(tag).unwrap() + tag.len()..];
            rest.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        (num("tot-mem:"), num("clients:"))
    };
    common::wait_for("the big client in the 1-2 MB bucket", 5, || {
        bucket(&mut ctl, 1 << 20).1 == 1
    });
    let (mem, _) = bucket(&mut ctl, 1 << 20);
    assert!(mem >= ARG as u64, "the bucket holds {mem}");
    assert_eq!(bucket(&mut ctl, 1 << 21), (0, 0));
}

#[test]
fn debug_client_eviction_shows_clients_by_size() {
    let kv = debug_server();
    client_eviction_buckets(kv.port);
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    client_eviction_buckets(redis.port);
}
