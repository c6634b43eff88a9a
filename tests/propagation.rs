//! Every write is propagated through one function, rewritten the way Redis
//! rewrites it for the AOF and replicas. These tests run commands in process
//! and observe what would be fed to persistence and replication.

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
