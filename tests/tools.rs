//! The tools Redis users put beside their servers, run against kvstore:
//! Prometheus's redis_exporter (it reads INFO, CONFIG, CLIENT LIST,
//! SLOWLOG, LATENCY and key sizes) and twemproxy (nutcracker), which
//! shards a keyspace over several servers.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, require_tool, start_kvstore, start_redis, wait_for, Conn};

/// A helper process, killed when the test ends however it ends.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command) -> Helper {
    Helper(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    )
}

/// An HTTP GET of `path` on 127.0.0.1:`port`, the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// The same small dataset on a server.
fn fill(port: u16) {
    let mut c = Conn::connect(port);
    c.cmd_str(&["SET", "a", "1"]);
    c.cmd_str(&["SET", "b", "2", "EX", "100"]);
    c.cmd_str(&["RPUSH", "l", "x", "y", "z"]);
    c.cmd_str(&["SELECT", "2"]);
    c.cmd_str(&["SET", "c", "3"]);
}

/// The exporter's metrics for the server on `port`, as (name{labels},
/// value) lines.
fn scrape(exporter: &std::path::Path, port: u16) -> (Helper, String) {
    let web = free_port();
    let helper = spawn(Command::new(exporter).args([
        "-redis.addr",
        &format!("redis://127.0.0.1:{port}"),
        "-web.listen-address",
        &format!("127.0.0.1:{web}"),
        "-check-keys",
        "l,a",
        "-export-client-list",
    ]));
    let mut body = String::new();
    wait_for("the exporter's metrics", 20, || {
        match http_get(web, "/metrics") {
            Some(b) if b.contains("redis_up") => {
                body = b;
                true
            }
            _ => false,
        }
    });
    (helper, body)
}

fn metric<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        // Every database is listed; the empty ones say 0.
        .filter(|l| !(l.starts_with("redis_db_keys") && l.ends_with("\"} 0")))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']))
        })
        .collect()
}

fn names(body: &str) -> std::collections::BTreeSet<String> {
    body.lines()
        .filter(|l| l.starts_with("redis_"))
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn prometheus_redis_exporter_reads_kvstore_as_it_reads_redis() {
    let Some(exporter) = require_tool("prometheus-redis-exporter") else {
        return;
    };
    let kv = start_kvstore(&[]);
    fill(kv.port);
    let (_kv_exporter, ours) = scrape(&exporter, kv.port);
    assert_eq!(metric(&ours, "redis_up"), ["redis_up 1"], "{ours}");
    assert_eq!(
        metric(&ours, "redis_exporter_last_scrape_error"),
        ["redis_exporter_last_scrape_error{err=\"\"} 0"]
    );
    assert_eq!(
        metric(&ours, "redis_db_keys"),
        ["redis_db_keys{db=\"db0\"} 3", "redis_db_keys{db=\"db2\"} 1"]
    );
    assert_eq!(
        metric(&ours, "redis_db_keys_expiring"),
        ["redis_db_keys_expiring{db=\"db0\"} 1"]
    );
    // -check-keys: the list's length and the string's value.
    assert!(
        metric(&ours, "redis_key_size").contains(&"redis_key_size{db=\"db0\",key=\"l\"} 3"),
        "{ours}"
    );
    assert!(metric(&ours, "redis_key_value").contains(&"redis_key_value{db=\"db0\",key=\"a\"} 1"));
    assert!(metric(&ours, "redis_instance_info")
        .iter()
        .any(|l| l.contains("redis_version=\"7.0.15\"") && l.contains("role=\"master\"")));
    assert!(!metric(&ours, "redis_connected_clients_details").is_empty());
    assert!(metric(&ours, "redis_commands_total")
        .iter()
        .any(|l| l.starts_with("redis_commands_total{cmd=\"rpush\"} 1")));
    // Every metric the exporter makes of redis-server it makes of kvstore.
    if let Some(redis) = start_redis(&[]) {
        fill(redis.port);
        let (_redis_exporter, theirs) = scrape(&exporter, redis.port);
        let missing: Vec<String> = names(&theirs).difference(&names(&ours)).cloned().collect();
        assert!(missing.is_empty(), "not exported for kvstore: {missing:?}");
        for name in ["redis_db_keys", "redis_db_keys_expiring", "redis_key_size"] {
            assert_eq!(metric(&ours, name), metric(&theirs, name));
        }
    }
}

#[test]
fn twemproxy_shards_a_keyspace_over_kvstore_servers() {
    let Some(nutcracker) = require_tool("nutcracker") else {
        return;
    };
    let backends = [start_kvstore(&[]), start_kvstore(&[])];
    let dir = tempfile::tempdir().unwrap();
    let (listen, stats) = (free_port(), free_port());
    let conf = dir.path().join("nutcracker.yml");
    std::fs::write(
        &conf,
        format!(
            "alpha:\n  listen: 127.0.0.1:{listen}\n  hash: murmur\n  distribution: ketama\n  redis: true\n  redis_db: 3\n  auto_eject_hosts: false\n  servers:\n   - 127.0.0.1:{}:1\n   - 127.0.0.1:{}:1\n",
            backends[0].port, backends[1].port
        ),
    )
    .unwrap();
    let _proxy = spawn(Command::new(&nutcracker).args([
        "-c",
        conf.to_str().unwrap(),
        "-s",
        &stats.to_string(),
        "-o",
        dir.path().join("nutcracker.log").to_str().unwrap(),
    ]));
    wait_for("twemproxy to listen", 10, || {
        std::net::TcpStream::connect(("127.0.0.1", listen)).is_ok()
    });
    let mut c = Conn::connect(listen);
    for i in 0..100 {
        let (k, v) = (format!("key:{i}"), format!("value:{i}"));
        assert_eq!(c.cmd_str(&["SET", &k, &v]), b"+OK\r\n");
    }
    // MGET and DEL are split over the servers and their replies joined.
    assert_eq!(
        c.cmd_str(&["MGET", "key:1", "key:2", "key:3", "nosuch"]),
        b"*4\r\n$7\r\nvalue:1\r\n$7\r\nvalue:2\r\n$7\r\nvalue:3\r\n$-1\r\n"
    );
    assert_eq!(c.cmd_str(&["DEL", "key:1", "key:2", "nosuch"]), b":2\r\n");
    assert_eq!(c.cmd_str(&["INCRBY", "counter", "5"]), b":5\r\n");
    assert_eq!(c.cmd_str(&["HSET", "h", "f", "v"]), b":1\r\n");
    assert_eq!(
        c.cmd_str(&["HGETALL", "h"]),
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        c.cmd_str(&["EVAL", "return redis.call('get', KEYS[1])", "1", "key:5"]),
        b"$7\r\nvalue:5\r\n"
    );
    assert_eq!(c.cmd_str(&["PING"]), b"+PONG\r\n");
    // Both servers hold a share, in the database the proxy selected.
    let mut total = 0;
    for b in &backends {
        let mut direct = Conn::connect(b.port);
        direct.cmd_str(&["SELECT", "3"]);
        let size = direct.cmd_str(&["DBSIZE"]);
        let n: i64 = String::from_utf8_lossy(&size[1..size.len() - 2])
            .parse()
            .unwrap();
        assert!(n > 10, "a server holds {n} of the keys");
        total += n;
        direct.cmd_str(&["SELECT", "0"]);
        assert_eq!(direct.cmd_str(&["DBSIZE"]), b":0\r\n");
    }
    assert_eq!(total, 98 + 2);
    let stats = http_get_raw(stats);
    assert!(stats.contains("\"alpha\""), "{stats}");
}

/// twemproxy's stats port writes its JSON and closes (no HTTP).
fn http_get_raw(port: u16) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
