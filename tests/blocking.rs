//! Blocking list commands against the real binary: waiters are served in the
//! order they blocked, time out with millisecond resolution, are released by
//! CLIENT UNBLOCK and by their own disconnection, and never stall others.

mod common;

use std::time::{Duration, Instant};

use common::{start_kvstore, Conn};

#[test]
fn waiters_are_served_in_blocking_order() {
    let s = start_kvstore(&[]);
    let mut a = Conn::connect(s.port);
    let mut b = Conn::connect(s.port);
    let mut c = Conn::connect(s.port);
    a.send(&[b"BLPOP", b"q", b"0"]);
    std::thread::sleep(Duration::from_millis(50));
    b.send(&[b"BLPOP", b"q", b"other", b"0"]);
    std::thread::sleep(Duration::from_millis(50));
    let mut p = Conn::connect(s.port);
    let info = String::from_utf8(p.cmd_str(&["INFO", "clients"])).unwrap();
    assert!(info.contains("blocked_clients:2"), "{info}");
    // Two elements in one push: the first waiter gets the first element.
    assert_eq!(p.cmd_str(&["RPUSH", "q", "one", "two"]), b":2\r\n");
    assert_eq!(a.read_reply(), b"*2\r\n$1\r\nq\r\n$3\r\none\r\n");
    assert_eq!(b.read_reply(), b"*2\r\n$1\r\nq\r\n$3\r\ntwo\r\n");
    // The list was drained by the waiters and deleted.
    assert_eq!(p.cmd_str(&["EXISTS", "q"]), b":0\r\n");
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn timeout_fires_without_a_push() {
    let s = start_kvstore(&[]);
    let mut a = Conn::connect(s.port);
    let start = Instant::now();
    assert_eq!(a.cmd_str(&["BRPOP", "nothing", "0.05"]), b"*-1\r\n");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(50), "{waited:?}");
    assert!(waited < Duration::from_millis(1000), "{waited:?}");
    assert_eq!(
        a.cmd_str(&["BLMOVE", "nothing", "dst", "LEFT", "RIGHT", "0.02"]),
        b"*-1\r\n"
    );
    // A negative or non-numeric timeout is refused.
    assert_eq!(
        a.cmd_str(&["BLPOP", "k", "-1"]),
        b"-ERR timeout is negative\r\n"
    );
    assert_eq!(
        a.cmd_str(&["BLPOP", "k", "abc"]),
        b"-ERR timeout is not a float or out of range\r\n"
    );
}

#[test]
fn push_from_another_client_wakes_blmove_and_blmpop() {
    let s = start_kvstore(&[]);
    let mut a = Conn::connect(s.port);
    let mut b = Conn::connect(s.port);
    let mut p = Conn::connect(s.port);
    a.send(&[b"BLMOVE", b"src", b"dst", b"RIGHT", b"LEFT", b"0"]);
    b.send(&[b"BLMPOP", b"0", b"2", b"x", b"dst", b"LEFT", b"COUNT", b"5"]);
    std::thread::sleep(Duration::from_millis(50));
    p.cmd_str(&["LPUSH", "src", "payload"]);
    assert_eq!(a.read_reply(), b"$7\r\npayload\r\n");
    // The element moved into dst wakes the BLMPOP waiter in turn.
    assert_eq!(
        b.read_reply(),
        b"*2\r\n$3\r\ndst\r\n*1\r\n$7\r\npayload\r\n"
    );
    assert_eq!(p.cmd_str(&["DBSIZE"]), b":0\r\n");
}

#[test]
fn client_unblock_and_disconnect_release_waiters() {
    let s = start_kvstore(&[]);
    let mut a = Conn::connect(s.port);
    let id = String::from_utf8(a.cmd_str(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim().to_string();
    a.send(&[b"BLPOP", b"k", b"0"]);
    // Commands sent while blocked wait their turn.
    a.send(&[b"PING"]);
    let mut p = Conn::connect(s.port);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(p.cmd_str(&["CLIENT", "UNBLOCK", &id, "ERROR"]), b":1\r\n");
    assert_eq!(
        a.read_reply(),
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    assert_eq!(a.read_reply(), b"+PONG\r\n");
    assert_eq!(p.cmd_str(&["CLIENT", "UNBLOCK", &id]), b":0\r\n");

    // A waiter that disconnects is forgotten: the next push stays in the list.
    let mut gone = Conn::connect(s.port);
    gone.send(&[b"BLPOP", b"k", b"0"]);
    std::thread::sleep(Duration::from_millis(50));
    drop(gone);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(p.cmd_str(&["RPUSH", "k", "v"]), b":1\r\n");
    assert_eq!(p.cmd_str(&["LLEN", "k"]), b":1\r\n");
    let info = String::from_utf8(p.cmd_str(&["INFO", "clients"])).unwrap();
    assert!(info.contains("blocked_clients:0"), "{info}");
}
