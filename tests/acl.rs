//! ACL users against the real binary: what the differential cases cannot
//! compare byte for byte (the ACL log's client lines, connections closed
//! when a user goes, files), and interop of ACL files with redis-server.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{output_within, start_kvstore, start_redis, Conn};

fn s(reply: Vec<u8>) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

/// `ACL LOG` as one string per entry (fields and values joined by spaces).
fn acl_log(c: &mut Conn) -> Vec<String> {
    let raw = c.cmd_str(&["ACL", "LOG"]);
    let (_, entries) = common::aggregate_items(&raw).expect("an array");
    entries
        .iter()
        .map(|e| {
            let (_, fields) = common::aggregate_items(e).expect("a map");
            fields
                .iter()
                .map(|f| match common::bulk_payload(f) {
                    Some(b) => s(b.to_vec()),
                    // An integer or a double: its text.
                    None => s(f[1..].to_vec()).trim_end().to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn refusals_are_logged_with_their_reason_context_and_object() {
    let srv = start_kvstore(&[]);
    let mut admin = Conn::connect(srv.port);
    let mut u = Conn::connect(srv.port);
    assert_eq!(
        admin.cmd_str(&[
            "ACL", "SETUSER", "alice", "on", ">pw", "~k*", "+get", "+multi", "+exec", "+eval"
        ]),
        b"+OK\r\n"
    );
    assert!(s(u.cmd_str(&["AUTH", "alice", "bad"])).starts_with("-WRONGPASS"));
    assert_eq!(u.cmd_str(&["AUTH", "alice", "pw"]), b"+OK\r\n");
    assert_eq!(
        s(u.cmd_str(&["SET", "k1", "v"])),
        "-NOPERM this user has no permissions to run the 'set' command\r\n"
    );
    assert_eq!(u.cmd_str(&["MULTI"]), b"+OK\r\n");
    assert!(s(u.cmd_str(&["GET", "secret"])).starts_with("-NOPERM"));
    assert!(s(u.cmd_str(&["EXEC"])).starts_with("-EXECABORT"));
    let script = "return redis.call('get', 'other')";
    let e = s(u.cmd_str(&["EVAL", script, "0"]));
    assert!(
        e.contains("The user executing the script can't access at least one of the keys"),
        "{e}"
    );
    let log = acl_log(&mut admin);
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(
        log[0].contains("reason key context lua object other username alice"),
        "{}",
        log[0]
    );
    assert!(
        log[1].contains("reason key context multi object secret username alice"),
        "{}",
        log[1]
    );
    assert!(
        log[2].contains("reason command context toplevel object set username alice"),
        "{}",
        log[2]
    );
    assert!(
        log[3].contains("reason auth context toplevel object AUTH username alice"),
        "{}",
        log[3]
    );
    // The client line is the refused client's own.
    assert!(log[2].contains("user=alice"), "{}", log[2]);
    // The same refusal again is counted in its entry.
    u.cmd_str(&["SET", "k1", "v"]);
    let log = acl_log(&mut admin);
    assert_eq!(log.len(), 4);
    assert!(log[0].starts_with("count 2 reason command"), "{}", log[0]);
    assert_eq!(admin.info_field("stats", "acl_access_denied_cmd"), "2");
    assert_eq!(admin.info_field("stats", "acl_access_denied_key"), "2");
    assert_eq!(admin.info_field("stats", "acl_access_denied_auth"), "1");
    // acllog-max-len bounds it.
    admin.cmd_str(&["CONFIG", "SET", "acllog-max-len", "2"]);
    u.cmd_str(&["GET", "x1"]);
    assert_eq!(acl_log(&mut admin).len(), 2);
    assert_eq!(admin.cmd_str(&["ACL", "LOG", "RESET"]), b"+OK\r\n");
    assert!(acl_log(&mut admin).is_empty());
}

#[test]
fn a_script_runs_with_its_caller_s_permissions() {
    let srv = start_kvstore(&[]);
    let mut admin = Conn::connect(srv.port);
    admin.cmd_str(&[
        "ACL", "SETUSER", "bob", "on", "nopass", "~*", "+eval", "+get",
    ]);
    let mut u = Conn::connect(srv.port);
    u.cmd_str(&["AUTH", "bob", "x"]);
    let check = "return {redis.acl_check_cmd('get','a') and 1 or 0, redis.acl_check_cmd('set','a','b') and 1 or 0}";
    assert_eq!(u.cmd_str(&["EVAL", check, "0"]), b"*2\r\n:1\r\n:0\r\n");
    let e = s(u.cmd_str(&["EVAL", "return redis.call('set','a','b')", "0"]));
    assert!(
        e.contains("The user executing the script can't run this command or subcommand"),
        "{e}"
    );
    // The default user may.
    assert_eq!(admin.cmd_str(&["EVAL", check, "0"]), b"*2\r\n:1\r\n:1\r\n");
}

#[test]
fn deleting_a_user_closes_its_connections() {
    let srv = start_kvstore(&[]);
    let mut admin = Conn::connect(srv.port);
    admin.cmd_str(&["ACL", "SETUSER", "carol", "on", "nopass", "+@all", "~*"]);
    let mut a = Conn::connect(srv.port);
    let mut b = Conn::connect(srv.port);
    a.cmd_str(&["AUTH", "carol", "x"]);
    b.cmd_str(&["AUTH", "carol", "x"]);
    assert!(s(admin.cmd_str(&["CLIENT", "LIST"])).contains("user=carol"));
    assert_eq!(admin.cmd_str(&["ACL", "DELUSER", "carol"]), b":1\r\n");
    a.expect_closed();
    b.expect_closed();
    // A user deleting itself gets its reply first.
    admin.cmd_str(&["ACL", "SETUSER", "dave", "on", "nopass", "+@all", "~*"]);
    let mut d = Conn::connect(srv.port);
    d.cmd_str(&["AUTH", "dave", "x"]);
    assert_eq!(d.cmd_str(&["ACL", "DELUSER", "dave"]), b":1\r\n");
    d.expect_closed();
    // CLIENT KILL USER.
    admin.cmd_str(&["ACL", "SETUSER", "erin", "on", "nopass", "+@all", "~*"]);
    let mut e = Conn::connect(srv.port);
    e.cmd_str(&["AUTH", "erin", "x"]);
    assert_eq!(
        admin.cmd_str(&["CLIENT", "KILL", "USER", "erin"]),
        b":1\r\n"
    );
    e.expect_closed();
    assert_eq!(
        s(admin.cmd_str(&["CLIENT", "KILL", "USER", "nobody"])),
        "-ERR No such user 'nobody'\r\n"
    );
}

#[test]
fn subscribers_are_closed_when_their_channels_are_revoked() {
    let srv = start_kvstore(&[]);
    let mut admin = Conn::connect(srv.port);
    admin.cmd_str(&[
        "ACL", "SETUSER", "sub", "on", "nopass", "+@all", "&news.*", "&sport",
    ]);
    let mut keep = Conn::connect(srv.port);
    keep.cmd_str(&["AUTH", "sub", "x"]);
    keep.cmd_str(&["SUBSCRIBE", "sport"]);
    let mut lose = Conn::connect(srv.port);
    lose.cmd_str(&["AUTH", "sub", "x"]);
    lose.cmd_str(&["SUBSCRIBE", "news.tech"]);
    // A superset of the channels keeps everyone.
    admin.cmd_str(&["ACL", "SETUSER", "sub", "&weather"]);
    assert_eq!(admin.cmd_str(&["PUBLISH", "news.tech", "1"]), b":1\r\n");
    assert!(s(lose.read_reply()).contains("news.tech"));
    // Losing news.* closes the news subscriber only.
    admin.cmd_str(&["ACL", "SETUSER", "sub", "resetchannels", "&sport"]);
    lose.expect_closed();
    assert_eq!(admin.cmd_str(&["PUBLISH", "sport", "goal"]), b":1\r\n");
    let msg = s(keep.read_reply());
    assert!(msg.contains("goal"), "{msg}");
}

#[test]
fn acl_save_and_load_round_trip_through_the_acl_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    std::fs::write(&file, "user default on nopass ~* &* +@all\n").unwrap();
    let srv = start_kvstore(&["--aclfile", file.to_str().unwrap()]);
    let mut admin = Conn::connect(srv.port);
    admin.cmd_str(&[
        "ACL",
        "SETUSER",
        "frank",
        "on",
        ">pw",
        "%R~r*",
        "&c",
        "+@read",
        "(+set ~w*)",
    ]);
    let before = admin.cmd_str(&["ACL", "LIST"]);
    assert_eq!(admin.cmd_str(&["ACL", "SAVE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("user default on nopass"), "{text}");
    assert!(text.contains("user frank on #"), "{text}");
    let mut frank = Conn::connect(srv.port);
    frank.cmd_str(&["AUTH", "frank", "pw"]);
    // A file with an error changes nothing.
    std::fs::write(
        &file,
        format!("{text}user broken on +nosuchcommand\nbogus line\n"),
    )
    .unwrap();
    let e = s(admin.cmd_str(&["ACL", "LOAD"]));
    assert!(
        e.contains("Error in applying operation '+nosuchcommand'"),
        "{e}"
    );
    assert!(e.contains("should start with user keyword"), "{e}");
    assert_eq!(admin.cmd_str(&["ACL", "LIST"]), before);
    // Frank is still connected, under the old rules.
    assert!(s(frank.cmd_str(&["GET", "r1"])).starts_with('$'));
    // A good file replaces every user; the clients of the old ones go.
    std::fs::write(&file, &text).unwrap();
    assert_eq!(admin.cmd_str(&["ACL", "LOAD"]), b"+OK\r\n");
    assert_eq!(admin.cmd_str(&["ACL", "LIST"]), before);
    frank.expect_closed();
    assert_eq!(admin.cmd_str(&["PING"]), b"+PONG\r\n");
    // Without an ACL file the commands say so.
    let plain = start_kvstore(&[]);
    let mut c = Conn::connect(plain.port);
    assert!(s(c.cmd_str(&["ACL", "SAVE"])).contains("not configured to use an ACL file"));
}

#[test]
fn users_come_from_the_config_and_config_rewrite_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("kv.conf");
    std::fs::write(
        &conf,
        "user alice on >pw ~* &* +@all\nuser default on nopass ~* &* +@all -flushall\n",
    )
    .unwrap();
    let (_server, port, mut c) = common::start_kvstore_with_file(&conf, dir.path(), &[]);
    assert_eq!(
        s(c.cmd_str(&["FLUSHALL"])),
        "-NOPERM this user has no permissions to run the 'flushall' command\r\n"
    );
    assert_eq!(c.cmd_str(&["AUTH", "alice", "pw"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_str(&["ACL", "SETUSER", "bob", "on", "nopass", "+get"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd_str(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains("user bob on nopass resetchannels -@all +get"),
        "{text}"
    );
    // `user default` starts from a reset user, as in Redis.
    assert!(
        text.contains("user default on nopass sanitize-payload ~* &* +@all -flushall"),
        "{text}"
    );
    assert_eq!(text.matches("user alice").count(), 1, "{text}");
    let _ = port;
}

#[test]
fn bad_user_definitions_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let aclfile = dir.path().join("users.acl");
    std::fs::write(&aclfile, "user a on nopass +@all\n").unwrap();
    let run = |args: &[&str]| {
        let out = output_within(
            Command::new(env!("CARGO_BIN_EXE_kvstore"))
                .args(["--port", &common::free_port().to_string(), "--dir"])
                .arg(dir.path())
                .args(args),
            Duration::from_secs(10),
        );
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let both = run(&["--aclfile", aclfile.to_str().unwrap(), "--user", "b", "on"]);
    assert!(
        both.contains("define either an ACL file or declare users"),
        "{both}"
    );
    let dup = run(&["--user", "b", "on", "--user", "b", "off"]);
    assert!(dup.contains("Duplicate user"), "{dup}");
    let bad = run(&["--user", "b", "+nosuchcommand"]);
    assert!(
        bad.contains("Unknown command or category name in ACL"),
        "{bad}"
    );
}

#[test]
fn requirepass_is_the_default_user_s_password() {
    let srv = start_kvstore(&["--requirepass", "s3cret"]);
    let mut c = Conn::connect(srv.port);
    assert!(s(c.cmd_str(&["GET", "a"])).starts_with("-NOAUTH"));
    assert!(s(c.cmd_str(&["AUTH", "wrong"])).starts_with("-WRONGPASS"));
    assert_eq!(c.cmd_str(&["AUTH", "default", "s3cret"]), b"+OK\r\n");
    assert_eq!(c.cmd_str(&["ACL", "WHOAMI"]), b"$7\r\ndefault\r\n");
    // Turning the default user off requires AUTH of every new connection,
    // even with no password.
    c.cmd_str(&["CONFIG", "SET", "requirepass", ""]);
    let mut fresh = Conn::connect(srv.port);
    assert_eq!(fresh.cmd_str(&["PING"]), b"+PONG\r\n");
    c.cmd_str(&["ACL", "SETUSER", "default", "off"]);
    let mut later = Conn::connect(srv.port);
    assert!(s(later.cmd_str(&["PING"])).starts_with("-NOAUTH"));
    // RESET goes back to the default user, unauthenticated while it is off.
    c.cmd_str(&["ACL", "SETUSER", "u", "on", "nopass", "+@all"]);
    c.cmd_str(&["AUTH", "u", "x"]);
    assert_eq!(c.cmd_str(&["RESET"]), b"+RESET\r\n");
    assert!(s(c.cmd_str(&["PING"])).starts_with("-NOAUTH"));
}

/// ACL files are exchanged both ways with redis-server 7.0: what one saves
/// the other loads, to the same users.
#[test]
fn acl_files_interoperate_with_redis_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    std::fs::write(&file, "").unwrap();
    let Some(redis) = start_redis(&["--aclfile", file.to_str().unwrap()]) else {
        return;
    };
    let mut r = Conn::connect(redis.port);
    let users: &[&[&str]] = &[
        &[
            "u1",
            "on",
            ">one",
            "~k*",
            "%R~r*",
            "&ch*",
            "+@all",
            "-@dangerous",
        ],
        &[
            "u2",
            "off",
            "#34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6",
            "-@all",
            "+@hash",
        ],
        &[
            "u3",
            "on",
            "nopass",
            "allkeys",
            "allchannels",
            "-@all",
            "+@read",
            "(+set %W~w*)",
            "(+@list ~l*)",
        ],
        &["u4", "on", "nopass", "resetchannels", "-@all", "+client|id"],
    ];
    for u in users {
        let mut args = vec!["ACL", "SETUSER"];
        args.extend_from_slice(u);
        assert_eq!(r.cmd_str(&args), b"+OK\r\n", "{u:?}");
    }
    assert_eq!(r.cmd_str(&["ACL", "SAVE"]), b"+OK\r\n");
    let redis_list = r.cmd_str(&["ACL", "LIST"]);
    let kv = start_kvstore(&["--aclfile", file.to_str().unwrap()]);
    let mut k = Conn::connect(kv.port);
    assert_eq!(s(k.cmd_str(&["ACL", "LIST"])), s(redis_list.clone()));
    // And back: kvstore saves, redis-server loads.
    k.cmd_str(&["ACL", "SETUSER", "u5", "on", ">five", "~x", "+@string"]);
    assert_eq!(k.cmd_str(&["ACL", "SAVE"]), b"+OK\r\n");
    assert_eq!(r.cmd_str(&["ACL", "LOAD"]), b"+OK\r\n");
    assert_eq!(
        s(r.cmd_str(&["ACL", "LIST"])),
        s(k.cmd_str(&["ACL", "LIST"]))
    );
    assert_eq!(r.cmd_str(&["AUTH", "u5", "five"]), b"+OK\r\n");
}

/// A replica logs in to its master as `masteruser`, which needs no more
/// than the replication commands; both a kvstore and a redis-server
/// replica sync through such a user.
#[test]
fn replicas_authenticate_as_masteruser() {
    let master = start_kvstore(&[]);
    let mut m = Conn::connect(master.port);
    let setuser = [
        "ACL",
        "SETUSER",
        "repl",
        "on",
        ">rpw",
        "-@all",
        "+psync",
        "+replconf",
        "+ping",
    ];
    assert_eq!(m.cmd_str(&setuser), b"+OK\r\n");
    m.cmd_str(&["ACL", "SETUSER", "admin", "on", ">apw", "+@all", "~*", "&*"]);
    m.cmd_str(&["ACL", "SETUSER", "default", "off"]);
    assert_eq!(m.cmd_str(&["AUTH", "admin", "apw"]), b"+OK\r\n");
    let mut fresh = Conn::connect(master.port);
    assert!(s(fresh.cmd_str(&["PING"])).starts_with("-NOAUTH"));
    let port = master.port.to_string();
    let auth = [
        "--masteruser",
        "repl",
        "--masterauth",
        "rpw",
        "--replicaof",
        "127.0.0.1",
        &port,
    ];
    let kv_replica = start_kvstore(&auth);
    let mut rk = Conn::connect(kv_replica.port);
    common::wait_for("the kvstore replica to sync", 10, || {
        rk.info_field("replication", "master_link_status") == "up"
    });
    let mut expected = 1;
    let redis_replica = start_redis(&auth);
    if let Some(redis_replica) = &redis_replica {
        let mut rr = Conn::connect(redis_replica.port);
        common::wait_for("the redis replica to sync", 10, || {
            rr.info_field("replication", "master_link_status") == "up"
        });
        expected = 2;
    }
    // The replicas' links run as repl; writes reach them.
    let list = s(m.cmd_str(&["CLIENT", "LIST", "TYPE", "replica"]));
    assert_eq!(list.matches("user=repl").count(), expected, "{list}");
    m.cmd_str(&["SET", "k", "v"]);
    common::wait_for("the write to reach the replica", 10, || {
        rk.cmd_str(&["GET", "k"]) == b"$1\r\nv\r\n"
    });
}
