//! CLIENT TRACKING and CLIENT PAUSE details the differential cases cannot
//! compare byte for byte (client ids, timing, INFO counters, the table
//! limit). The behaviour itself is compared with Redis in
//! tests/differential/tracking.txt.

mod common;

use std::time::{Duration, Instant};

use common::{start_kvstore, Conn};

#[test]
fn a_broken_redirect_is_reported_to_a_resp3_client_with_the_target_id() {
    let s = start_kvstore(&[]);
    let mut c = Conn::connect(s.port);
    let mut target = Conn::connect(s.port);
    let mut writer = Conn::connect(s.port);
    c.cmd_str(&["HELLO", "3"]);
    let id = target.client_id();
    assert_eq!(
        c.cmd_str(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]),
        b"+OK\r\n"
    );
    c.cmd_str(&["GET", "k"]);
    target.expect_closed_after(&["QUIT"]);
    writer.cmd_str(&["SET", "k", "v"]);
    let notice = format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{id}\r\n");
    assert_eq!(c.read_reply(), notice.as_bytes());
    let info = String::from_utf8_lossy(&c.cmd_str(&["CLIENT", "TRACKINGINFO"])).to_string();
    assert!(info.contains("broken_redirect"), "{info}");
    let me = String::from_utf8_lossy(&c.cmd_str(&["CLIENT", "INFO"])).to_string();
    assert!(me.contains("flags=tR "), "{me}");
    assert!(me.contains(&format!("redir={id} ")), "{me}");
}

#[test]
fn info_counts_tracking_clients_keys_items_and_prefixes() {
    let s = start_kvstore(&[]);
    let mut a = Conn::connect(s.port);
    let mut b = Conn::connect(s.port);
    let mut w = Conn::connect(s.port);
    a.cmd_str(&["HELLO", "3"]);
    b.cmd_str(&["HELLO", "3"]);
    a.cmd_str(&["CLIENT", "TRACKING", "on"]);
    b.cmd_str(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "y",
    ]);
    a.cmd_str(&["MGET", "k1", "k2"]);
    let mut c = Conn::connect(s.port);
    c.cmd_str(&["HELLO", "3"]);
    c.cmd_str(&["CLIENT", "TRACKING", "on"]);
    c.cmd_str(&["GET", "k1"]);
    assert_eq!(w.info_field("clients", "tracking_clients"), "3");
    assert_eq!(w.info_field("stats", "tracking_total_keys"), "2");
    assert_eq!(w.info_field("stats", "tracking_total_items"), "3");
    assert_eq!(w.info_field("stats", "tracking_total_prefixes"), "2");
    let list = String::from_utf8_lossy(&w.cmd_str(&["CLIENT", "LIST"])).to_string();
    assert!(list.contains("flags=tB "), "{list}");
    // A change forgets the key for everyone who had it.
    w.cmd_str(&["SET", "k1", "v"]);
    assert_eq!(w.info_field("stats", "tracking_total_keys"), "1");
    assert_eq!(w.info_field("stats", "tracking_total_items"), "1");
    // Closing a client leaves the count (and its prefixes) behind.
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(5);
    while w.info_field("clients", "tracking_clients") != "2" {
        assert!(
            Instant::now() < deadline,
            "the closed client is still counted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(w.info_field("stats", "tracking_total_prefixes"), "0");
}

#[test]
fn the_tracking_table_is_held_to_tracking_table_max_keys() {
    let s = start_kvstore(&["--tracking-table-max-keys", "10"]);
    let mut c = Conn::connect(s.port);
    let mut w = Conn::connect(s.port);
    c.cmd_str(&["HELLO", "3"]);
    c.cmd_str(&["CLIENT", "TRACKING", "on"]);
    let keys: Vec<String> = (0..50).map(|i| format!("key:{i}")).collect();
    let mut args = vec!["MGET"];
    args.extend(keys.iter().map(|k| k.as_str()));
    c.cmd_str(&args);
    // The next command trims the table; the forgotten keys are invalidated
    // as if they had changed.
    w.cmd_str(&["PING"]);
    let keys_now: usize = w
        .info_field("stats", "tracking_total_keys")
        .parse()
        .unwrap();
    assert!(keys_now <= 10, "{keys_now} keys tracked");
    let (pushed, _) = c.read_available(Duration::from_millis(200));
    let text = String::from_utf8_lossy(&pushed).to_string();
    assert_eq!(text.matches("invalidate").count(), 50 - keys_now, "{text}");
}

#[test]
fn a_pause_ends_on_its_own_and_held_clients_run_in_order() {
    let s = start_kvstore(&[]);
    let mut admin = Conn::connect(s.port);
    let mut w1 = Conn::connect(s.port);
    let mut w2 = Conn::connect(s.port);
    assert_eq!(
        admin.cmd_str(&["CLIENT", "PAUSE", "500", "WRITE"]),
        b"+OK\r\n"
    );
    let started = Instant::now();
    w1.send(&[b"RPUSH", b"l", b"first"]);
    std::thread::sleep(Duration::from_millis(50));
    w2.send(&[b"RPUSH", b"l", b"second"]);
    std::thread::sleep(Duration::from_millis(50));
    // Held clients are blocked clients, flagged `b`.
    assert_eq!(admin.info_field("clients", "blocked_clients"), "2");
    let list = String::from_utf8_lossy(&admin.cmd_str(&["CLIENT", "LIST"])).to_string();
    assert_eq!(list.matches("flags=b ").count(), 2, "{list}");
    // Reads go on meanwhile.
    assert_eq!(admin.cmd_str(&["LLEN", "l"]), b":0\r\n");
    assert_eq!(w1.read_reply(), b":1\r\n");
    assert_eq!(w2.read_reply(), b":2\r\n");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_millis(1500),
        "held for {waited:?}"
    );
    assert_eq!(
        admin.cmd_str(&["LRANGE", "l", "0", "-1"]),
        b"*2\r\n$5\r\nfirst\r\n$6\r\nsecond\r\n"
    );
    assert_eq!(admin.info_field("clients", "blocked_clients"), "0");
}

/// A client held by CLIENT PAUSE is not unblocked by CLIENT UNBLOCK (its
/// command has no timeout and must get one reply, once it runs; Redis 7.0
/// crashes here), but can be killed; an expired ALL pause leaves no trace
/// on a later WRITE pause.
#[test]
fn a_held_client_is_not_unblocked_but_can_be_killed() {
    let s = start_kvstore(&[]);
    let mut admin = Conn::connect(s.port);
    let mut w = Conn::connect(s.port);
    let mut gone = Conn::connect(s.port);
    let wid = w.client_id();
    let gid = gone.client_id();
    admin.cmd_str(&["CLIENT", "PAUSE", "100000", "WRITE"]);
    w.send(&[b"SET", b"k", b"v"]);
    gone.send(&[b"SET", b"k2", b"v"]);
    std::thread::sleep(Duration::from_millis(50));
    for how in ["ERROR", "TIMEOUT"] {
        assert_eq!(admin.cmd_str(&["CLIENT", "UNBLOCK", &wid, how]), b":0\r\n");
    }
    assert_eq!(admin.cmd_str(&["CLIENT", "UNBLOCK", &wid]), b":0\r\n");
    let (early, _) = w.read_available(Duration::from_millis(100));
    assert!(early.is_empty(), "{}", String::from_utf8_lossy(&early));
    assert_eq!(admin.cmd_str(&["CLIENT", "KILL", "ID", &gid]), b":1\r\n");
    gone.expect_closed();
    assert_eq!(admin.info_field("clients", "blocked_clients"), "1");
    admin.cmd_str(&["CLIENT", "UNPAUSE"]);
    // The held command runs, and is answered once.
    assert_eq!(w.read_reply(), b"+OK\r\n");
    let (more, _) = w.read_available(Duration::from_millis(100));
    assert!(more.is_empty(), "{}", String::from_utf8_lossy(&more));
    assert_eq!(admin.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(admin.cmd_str(&["EXISTS", "k2"]), b":0\r\n");
    // An ALL pause that ran out is over, mode included: a WRITE pause
    // after it lets reads through.
    assert_eq!(
        admin.cmd_str(&["CLIENT", "PAUSE", "100", "ALL"]),
        b"+OK\r\n"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        admin.cmd_str(&["CLIENT", "PAUSE", "3000", "WRITE"]),
        b"+OK\r\n"
    );
    let started = Instant::now();
    assert_eq!(w.cmd_str(&["GET", "k"]), b"$1\r\nv\r\n");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a read was held"
    );
    admin.cmd_str(&["CLIENT", "UNPAUSE"]);
}
