//! The latency monitor and latency tracking against the real binary: a
//! slow command becomes a `command` event that LATEST, HISTORY, GRAPH and
//! DOCTOR report; commands get histograms (LATENCY HISTOGRAM) and
//! percentiles (INFO latencystats); RESET and CONFIG RESETSTAT clear them.

mod common;

use common::{aggregate_items, bulk_payload, start_kvstore, Conn};

fn int(reply: &[u8]) -> i64 {
    assert_eq!(
        reply[0],
        b':',
        "not an integer: {}",
        String::from_utf8_lossy(reply)
    );
    std::str::from_utf8(&reply[1..reply.len() - 2])
        .unwrap()
        .parse()
        .unwrap()
}

fn text(reply: &[u8]) -> String {
    String::from_utf8(bulk_payload(reply).expect("a bulk reply").to_vec()).unwrap()
}

fn items(reply: &[u8]) -> Vec<Vec<u8>> {
    aggregate_items(reply).expect("an aggregate").1
}

fn start() -> (common::ServerProcess, Conn) {
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let c = Conn::connect(kv.port);
    (kv, c)
}

#[test]
fn slow_command_is_recorded_as_a_command_event() {
    let (_kv, mut c) = start();
    c.cmd_str(&["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    assert_eq!(c.cmd_str(&["DEBUG", "SLEEP", "0.05"]), b"+OK\r\n");

    // LATEST: [event, time, latest, max].
    let latest = items(&c.cmd_str(&["LATENCY", "LATEST"]));
    let command = latest
        .iter()
        .map(|e| items(e))
        .find(|e| bulk_payload(&e[0]) == Some(b"command"))
        .expect("a command event");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - int(&command[1])).abs() <= 2);
    assert!(int(&command[2]) >= 50);
    assert!(int(&command[3]) >= 50);

    // HISTORY: [[time, latency]].
    let history = items(&c.cmd_str(&["LATENCY", "HISTORY", "command"]));
    assert_eq!(history.len(), 1);
    let sample = items(&history[0]);
    assert!(int(&sample[1]) >= 50);

    let graph = text(&c.cmd_str(&["LATENCY", "GRAPH", "command"]));
    assert!(graph.starts_with("command - high "), "{graph}");
    let lines: Vec<&str> = graph.lines().collect();
    assert_eq!(lines[1], "-".repeat(80));
    // One sample: the bottom row's character, then its age label.
    assert_eq!(lines[5], "_");
    assert_eq!(lines[6], " ");
    assert!(lines[7].chars().all(|ch| ch.is_ascii_digit()));
    assert_eq!(lines.last(), Some(&"s"));

    let doctor = text(&c.cmd_str(&["LATENCY", "DOCTOR"]));
    assert!(
        doctor.starts_with("Dave, I have observed latency spikes"),
        "{doctor}"
    );
    assert!(
        doctor.contains("1. command: 1 latency spikes (average "),
        "{doctor}"
    );
    assert!(doctor.contains("Check your Slow Log"), "{doctor}");

    assert_eq!(c.cmd_str(&["LATENCY", "RESET", "nosuch"]), b":0\r\n");
    assert!(int(&c.cmd_str(&["LATENCY", "RESET"])) >= 1);
    assert_eq!(c.cmd_str(&["LATENCY", "LATEST"]), b"*0\r\n");
    assert_eq!(c.cmd_str(&["LATENCY", "HISTORY", "command"]), b"*0\r\n");
    assert_eq!(
        c.cmd_str(&["LATENCY", "GRAPH", "command"]),
        b"-ERR No samples available for event 'command'\r\n"
    );
    // Still enabled, and now without events: Dave gets the all-clear (or
    // the huge pages advice, where the process has some).
    let doctor = text(&c.cmd_str(&["LATENCY", "DOCTOR"]));
    assert!(
        doctor.starts_with("Dave, no latency spike")
            || doctor.starts_with("\nI have a few advices"),
        "{doctor}"
    );
}

#[test]
fn fast_commands_stay_under_the_threshold() {
    let (_kv, mut c) = start();
    c.cmd_str(&["CONFIG", "SET", "latency-monitor-threshold", "10000"]);
    c.cmd_str(&["SET", "k", "v"]);
    c.cmd_str(&["DEBUG", "SLEEP", "0.01"]);
    assert_eq!(c.cmd_str(&["LATENCY", "LATEST"]), b"*0\r\n");
    c.cmd_str(&["CONFIG", "SET", "latency-monitor-threshold", "0"]);
    let doctor = text(&c.cmd_str(&["LATENCY", "DOCTOR"]));
    assert!(
        doctor.starts_with("I'm sorry, Dave, I can't do that."),
        "{doctor}"
    );
}

#[test]
fn histogram_counts_calls_per_command() {
    let (_kv, mut c) = start();
    c.cmd_str(&["CONFIG", "RESETSTAT"]);
    for i in 0..5 {
        c.cmd_str(&["SET", &format!("k{i}"), "v"]);
    }
    c.cmd_str(&["CLIENT", "ID"]);
    let reply = c.cmd_str(&["LATENCY", "HISTOGRAM", "set", "client", "nosuch"]);
    let map = items(&reply);
    // set and client|id, each a {calls, histogram_usec} map.
    assert_eq!(map.len(), 4, "{}", String::from_utf8_lossy(&reply));
    assert_eq!(bulk_payload(&map[0]), Some(&b"set"[..]));
    assert_eq!(bulk_payload(&map[2]), Some(&b"client|id"[..]));
    let set = items(&map[1]);
    assert_eq!(bulk_payload(&set[0]), Some(&b"calls"[..]));
    assert_eq!(int(&set[1]), 5);
    assert_eq!(bulk_payload(&set[2]), Some(&b"histogram_usec"[..]));
    let buckets: Vec<i64> = items(&set[3]).iter().map(|b| int(b)).collect();
    assert!(!buckets.is_empty() && buckets.len().is_multiple_of(2));
    // Bucket bounds grow, and the last cumulative count is every call.
    let bounds: Vec<i64> = buckets.iter().step_by(2).copied().collect();
    assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
    assert_eq!(buckets.last(), Some(&5));

    // RESP3: maps all the way down.
    c.cmd_str(&["HELLO", "3"]);
    let reply = c.cmd_str(&["LATENCY", "HISTOGRAM", "set"]);
    assert!(reply.starts_with(b"%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:5\r\n"));

    // Everything: at least set, client|id, hello, latency|histogram.
    c.cmd_str(&["HELLO", "2"]);
    let all = items(&c.cmd_str(&["LATENCY", "HISTOGRAM"]));
    let names: Vec<&[u8]> = all
        .iter()
        .step_by(2)
        .map(|n| bulk_payload(n).unwrap())
        .collect();
    for want in [&b"set"[..], b"client|id", b"hello", b"latency|histogram"] {
        assert!(names.contains(&want), "{:?}", want);
    }

    c.cmd_str(&["CONFIG", "RESETSTAT"]);
    assert_eq!(c.cmd_str(&["LATENCY", "HISTOGRAM", "set"]), b"*0\r\n");
}

#[test]
fn info_latencystats_reports_configured_percentiles() {
    let (_kv, mut c) = start();
    c.cmd_str(&["SET", "k", "v"]);
    let info = text(&c.cmd_str(&["INFO", "latencystats"]));
    assert!(info.starts_with("# Latencystats\r\n"), "{info}");
    let line = info
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .expect("a line for set");
    let values = line.split_once(':').unwrap().1;
    let labels: Vec<&str> = values
        .split(',')
        .map(|p| p.split('=').next().unwrap())
        .collect();
    assert_eq!(labels, ["p50", "p99", "p99.9"]);
    for p in values.split(',') {
        let v = p.split('=').nth(1).unwrap();
        // "%.3f" microseconds.
        assert_eq!(v.split('.').nth(1).map(str::len), Some(3), "{line}");
    }

    // The default INFO leaves the section out; all and everything have it.
    assert!(!text(&c.cmd_str(&["INFO"])).contains("# Latencystats"));
    assert!(!text(&c.cmd_str(&["INFO", "default"])).contains("# Latencystats"));
    assert!(text(&c.cmd_str(&["INFO", "all"])).contains("latency_percentiles_usec_set:"));
    assert!(text(&c.cmd_str(&["INFO", "everything"])).contains("# Latencystats"));

    c.cmd_str(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "0 100 33.3",
    ]);
    let info = text(&c.cmd_str(&["INFO", "latencystats"]));
    assert!(info.contains("latency_percentiles_usec_set:p0="), "{info}");
    assert!(info.contains(",p100="), "{info}");
    assert!(info.contains(",p33.3="), "{info}");

    // A debug sleep of 50 ms lands at or above 50000 µs.
    c.cmd_str(&["CONFIG", "SET", "latency-tracking-info-percentiles", "50"]);
    c.cmd_str(&["DEBUG", "SLEEP", "0.05"]);
    let info = text(&c.cmd_str(&["INFO", "latencystats"]));
    let debug = info
        .lines()
        .find_map(|l| l.strip_prefix("latency_percentiles_usec_debug:p50="))
        .expect("a line for debug");
    assert!(debug.parse::<f64>().unwrap() >= 50_000.0, "{debug}");

    c.cmd_str(&["CONFIG", "SET", "latency-tracking", "no"]);
    assert_eq!(
        text(&c.cmd_str(&["INFO", "latencystats"])),
        "# Latencystats\r\n"
    );
    c.cmd_str(&["CONFIG", "SET", "latency-tracking", "yes"]);
    c.cmd_str(&["CONFIG", "RESETSTAT"]);
    let info = text(&c.cmd_str(&["INFO", "latencystats"]));
    assert!(!info.contains("usec_set:"), "{info}");
}

#[test]
fn blocked_command_is_tracked_when_served() {
    let (kv, mut c) = start();
    let mut waiter = Conn::connect(kv.port);
    c.cmd_str(&["CONFIG", "RESETSTAT"]);
    waiter.send(&[b"BLPOP", b"list", b"0"]);
    common::wait_for("the client to block", 5, || {
        c.info_field("clients", "blocked_clients") == "1"
    });
    assert_eq!(c.cmd_str(&["LATENCY", "HISTOGRAM", "blpop"]), b"*0\r\n");
    c.cmd_str(&["LPUSH", "list", "a"]);
    waiter.read_reply();
    let map = items(&c.cmd_str(&["LATENCY", "HISTOGRAM", "blpop"]));
    assert_eq!(int(&items(&map[1])[1]), 1);
}

#[test]
fn percentiles_config_survives_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("kvstore.conf");
    std::fs::write(&conf, "latency-tracking-info-percentiles 90 99.5\n").unwrap();
    let (_child, _port, mut c) = common::start_kvstore_with_file(&conf, dir.path(), &[]);
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "latency-tracking-info-percentiles"]),
        b"*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$7\r\n90 99.5\r\n"
    );
    c.cmd_str(&["CONFIG", "SET", "latency-tracking-info-percentiles", ""]);
    assert_eq!(c.cmd_str(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains("latency-tracking-info-percentiles \"\"\n"),
        "{text}"
    );
}
