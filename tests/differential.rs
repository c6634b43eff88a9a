//! Differential tests: the same command sequences go to kvstore and to a real
//! redis-server 7.0, and the raw replies must be byte-identical.
//!
//! Cases live in `tests/differential/*.txt`:
//!
//! ```text
//! === case name            starts a case (fresh connection, FLUSHALL first)
//! SET k "a b\x00c"         a command, quoted like redis-cli / inline commands
//! ~ TIME                   run on both, don't compare (nondeterministic)
//! @sort KEYS *             compare the array's elements as a multiset
//! @raw "*1\r\n$-5\r\n"     send raw bytes, compare the one reply that follows
//! @sleep 150               wait (for expiry cases)
//! ```
//!
//! Without redis-server the test is skipped with a message, except under
//! `CI=true`, where it fails.

mod common;

use std::io::{BufReader, Cursor};

use common::{start_kvstore, start_redis, Conn};
use kvstore::protocol::split_args;

struct Case {
    file: String,
    name: String,
    lines: Vec<String>,
}

fn load_cases() -> Vec<Case> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/differential");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let file = f.file_name().unwrap().to_string_lossy().to_string();
        let mut cur: Option<Case> = None;
        for line in text.lines() {
            let t = line.trim_end();
            if let Some(name) = t.strip_prefix("=== ") {
                if let Some(c) = cur.take() {
                    cases.push(c);
                }
                cur = Some(Case {
                    file: file.clone(),
                    name: name.to_string(),
                    lines: Vec::new(),
                });
            } else if t.trim().is_empty() || t.trim_start().starts_with('#') {
                continue;
            } else if let Some(c) = cur.as_mut() {
                c.lines.push(t.to_string());
            } else {
                panic!("{file}: command outside a case: {t}");
            }
        }
        if let Some(c) = cur.take() {
            cases.push(c);
        }
    }
    cases
}

/// Split a raw array reply into its raw elements.
fn array_elements(raw: &[u8]) -> Vec<Vec<u8>> {
    let nl = raw.iter().position(|&b| b == b'\n').unwrap_or(raw.len());
    if raw.is_empty() || !matches!(raw[0], b'*' | b'~') {
        return vec![raw.to_vec()];
    }
    let n: i64 = std::str::from_utf8(&raw[1..nl - 1])
        .unwrap()
        .parse()
        .unwrap();
    let mut r = BufReader::new(Cursor::new(raw[nl + 1..].to_vec()));
    let mut conn_like = Vec::new();
    for _ in 0..n.max(0) {
        let mut out = Vec::new();
        read_value_from(&mut r, &mut out);
        conn_like.push(out);
    }
    conn_like
}

fn read_value_from(r: &mut BufReader<Cursor<Vec<u8>>>, out: &mut Vec<u8>) {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).unwrap();
    out.extend_from_slice(&line);
    let body = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap()
        .to_string();
    match line[0] {
        b'$' | b'=' => {
            let n: i64 = body.parse().unwrap();
            if n >= 0 {
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf).unwrap();
                out.extend_from_slice(&buf);
            }
        }
        b'*' | b'~' | b'>' => {
            for _ in 0..body.parse::<i64>().unwrap().max(0) {
                read_value_from(r, out);
            }
        }
        b'%' => {
            for _ in 0..body.parse::<i64>().unwrap().max(0) * 2 {
                read_value_from(r, out);
            }
        }
        _ => {}
    }
}

fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

enum Step {
    Cmd {
        args: Vec<Vec<u8>>,
        compare: bool,
        sort: bool,
    },
    Raw(Vec<u8>),
    Sleep(u64),
}

fn parse_step(line: &str) -> Step {
    let (compare, sort, rest) = if let Some(r) = line.strip_prefix("~ ") {
        (false, false, r)
    } else if let Some(r) = line.strip_prefix("@sort ") {
        (true, true, r)
    } else if let Some(r) = line.strip_prefix("@raw ") {
        let parts = split_args(r.as_bytes()).expect("raw bytes quoted");
        return Step::Raw(parts.concat());
    } else if let Some(r) = line.strip_prefix("@sleep ") {
        return Step::Sleep(r.trim().parse().unwrap());
    } else {
        (true, false, line)
    };
    let args = split_args(rest.as_bytes()).unwrap_or_else(|| panic!("bad quoting: {line}"));
    Step::Cmd {
        args,
        compare,
        sort,
    }
}

#[test]
fn replies_match_redis() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let kv = start_kvstore(&[]);
    let cases = load_cases();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in &cases {
        let mut a = Conn::connect(kv.port);
        let mut b = Conn::connect(redis.port);
        a.cmd_str(&["FLUSHALL"]);
        b.cmd_str(&["FLUSHALL"]);
        for line in &case.lines {
            match parse_step(line) {
                Step::Sleep(ms) => std::thread::sleep(std::time::Duration::from_millis(ms)),
                Step::Raw(bytes) => {
                    a.send_raw(&bytes);
                    b.send_raw(&bytes);
                    let (ra, rb) = (
                        a.try_read_reply().unwrap_or_default(),
                        b.try_read_reply().unwrap_or_default(),
                    );
                    compared += 1;
                    if ra != rb {
                        failures.push(format!(
                            "[{}] {}: {}\n    kvstore: {}\n    redis:   {}",
                            case.file,
                            case.name,
                            line,
                            show(&ra),
                            show(&rb)
                        ));
                    }
                    // A protocol error closes the connection: reconnect.
                    a = Conn::connect(kv.port);
                    b = Conn::connect(redis.port);
                }
                Step::Cmd {
                    args,
                    compare,
                    sort,
                } => {
                    let refs: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
                    let ra = a.cmd(&refs);
                    let rb = b.cmd(&refs);
                    if !compare {
                        continue;
                    }
                    compared += 1;
                    let equal = if sort {
                        let (mut ea, mut eb) = (array_elements(&ra), array_elements(&rb));
                        ea.sort();
                        eb.sort();
                        ea == eb
                    } else {
                        ra == rb
                    };
                    if !equal {
                        failures.push(format!(
                            "[{}] {}: {}\n    kvstore: {}\n    redis:   {}",
                            case.file,
                            case.name,
                            line,
                            show(&ra),
                            show(&rb)
                        ));
                    }
                }
            }
        }
    }
    println!(
        "{} cases, {} replies compared, {} differ",
        cases.len(),
        compared,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} replies differ from redis-server:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
