//! Differential tests: the same command sequences go to kvstore and to a real
//! redis-server 7.0, and the raw replies must be byte-identical.
//!
//! Cases live in `tests/differential/*.txt`, read with this harness's own
//! tokenizer (not the server's):
//!
//! ```text
//! === case name              starts a case (fresh connections, FLUSHALL first)
//! SET k "a b\x00c"           a command, quoted like redis-cli / inline commands
//! ~ TIME # why               run on both, don't compare; the reason is required
//! @sort KEYS *               compare an aggregate's elements as a multiset
//!                            (type and header kept; map pairs kept together)
//! @sortpairs HGETALL h       the same for a flat array of field/value pairs
//! @sortdeep COMMAND INFO x   sort every aggregate at every depth (where
//!                            Redis's order is its dict's, random per run)
//! @raw "*1\r\n$-5\r\n"      send raw bytes; every reply that follows and
//!                            whether the connection was closed must match,
//!                            and silence on both sides is a failure
//! @raw-silent "*1\r\n"       the same, where no reply at all is expected
//! @sleep 150                 wait (for expiry cases)
//! [1] SUBSCRIBE ch           any step on connection 1 (0 is the default);
//!                            each connection is opened on first use
//! @noreply SET k v           send a command whose reply is expected to be
//!                            dropped (CLIENT REPLY OFF/SKIP); whatever does
//!                            arrive must match
//! [1] @drain                 read everything connection 1 has received
//!                            (messages, further confirmations) and compare
//! [1] @close                 close connection 1 on both sides
//! CLIENT KILL ID {id:1}      `{id:N}` stands for connection N's client id
//!                            on each server (ids differ between them)
//! ```
//!
//! After a case's last command, anything more either server sends is read
//! and compared too. Any other `@` directive is an error.
//!
//! Without redis-server the test fails, unless `KVSTORE_SKIP_REDIS=1` skips
//! it explicitly (never under CI).

mod common;

use std::time::Duration;

use common::{start_kvstore, start_redis, Conn};

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
    // Every line must parse before anything runs: a typo in a directive is
    // an error of the case file, not a silently skipped step.
    for c in &cases {
        for line in &c.lines {
            if let Err(e) = parse_step(line) {
                panic!("[{}] {}: {e}", c.file, c.name);
            }
        }
    }
    cases
}

/// An aggregate reply as its header line and raw elements, for `@sort`
/// (map entries are kept as field/value pairs); `None` when it is not an
/// aggregate.
fn aggregate_elements(raw: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let (header, items) = common::aggregate_items(raw)?;
    let items = if raw[0] == b'%' {
        pair_up(items)
    } else {
        items
    };
    Some((header, items))
}

/// Group a flat array's elements in pairs (RESP2 maps: HGETALL, CONFIG GET).
fn pair_up(items: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    items.chunks(2).map(|c| c.concat()).collect()
}

/// A reply in the form `@sort`/`@sortpairs` compares: header plus sorted
/// elements (anything that is not an aggregate as it is).
fn sorted_form(raw: &[u8], pairs: bool) -> Vec<u8> {
    let Some((header, items)) = aggregate_elements(raw) else {
        return raw.to_vec();
    };
    let mut items = if pairs { pair_up(items) } else { items };
    items.sort();
    let mut out = header;
    for i in items {
        out.extend_from_slice(&i);
    }
    out
}

/// A reply with every aggregate, at every depth, in sorted order (a map's
/// fields kept with their values), for `@sortdeep`.
fn deep_sorted_form(raw: &[u8]) -> Vec<u8> {
    let Some((header, items)) = aggregate_elements(raw) else {
        return raw.to_vec();
    };
    let mut items: Vec<Vec<u8>> = if raw[0] == b'%' {
        // Pairs: sort each half, keep them together.
        items
            .iter()
            .map(|pair| {
                let mid = common::value_end(pair, 0);
                [
                    deep_sorted_form(&pair[..mid]),
                    deep_sorted_form(&pair[mid..]),
                ]
                .concat()
            })
            .collect()
    } else {
        items.iter().map(|i| deep_sorted_form(i)).collect()
    };
    items.sort();
    let mut out = header;
    for i in items {
        out.extend_from_slice(&i);
    }
    out
}

/// Fields kvstore reports that Redis 7.0 does not, each for a reason; the
/// `@fields` comparison leaves them out.
const KVSTORE_ONLY_FIELDS: &[&str] = &[
    // INFO server: which kvstore build answers (redis_version stays 7.0's).
    "kvstore_version",
    // INFO stats: Redis 7.2's counters of failed AUTH, of commands refused
    // by ACL rules, and of clients closed for their output buffer limit.
    "acl_access_denied_auth",
    "acl_access_denied_cmd",
    "acl_access_denied_key",
    "acl_access_denied_channel",
    "client_output_buffer_limit_disconnections",
    // INFO persistence with the AOF on: which engine writes it.
    "aof_engine",
];

/// The field names of a text reply, in order: `name:value` lines (INFO,
/// section headers kept) or `name=value` words (CLIENT INFO/LIST).
fn field_names(raw: &[u8]) -> Vec<String> {
    let body = match raw.iter().position(|&b| b == b'\n') {
        Some(nl) if matches!(raw[0], b'$' | b'=') => &raw[nl + 1..raw.len().saturating_sub(2)],
        _ => return vec![format!("<not a text reply: {}>", show(raw))],
    };
    let text = String::from_utf8_lossy(body);
    let mut names = Vec::new();
    for line in text.split("\r\n").flat_map(|l| l.split('\n')) {
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            names.push(line.to_string());
        } else if line.split(' ').next().is_some_and(|w| {
            w.find('=')
                .is_some_and(|eq| w.find(':').is_none_or(|colon| eq < colon))
        }) {
            names.extend(
                line.split(' ')
                    .filter_map(|w| w.split('=').next())
                    .map(String::from),
            );
        } else {
            names.push(line.split(':').next().unwrap_or("").to_string());
        }
    }
    names.retain(|n| !KVSTORE_ONLY_FIELDS.contains(&n.as_str()));
    names
}

/// A reply's structure with every scalar replaced by its type byte.
fn shape(raw: &[u8]) -> String {
    match common::aggregate_items(raw) {
        Some((header, items)) => {
            let head = String::from_utf8_lossy(&header[..header.len() - 2]).to_string();
            let inner: String = items.iter().map(|i| shape(i)).collect();
            format!("{head}[ {inner}] ")
        }
        None if raw.starts_with(b"$-1") => "$-1 ".to_string(),
        None => format!("{}? ", raw.first().map_or('?', |&c| c as char)),
    }
}

/// Split a line like redis-cli does: words separated by spaces, `"…"` with
/// `\n \r \t \b \a \\ \" \xHH` escapes, `'…'` with `\'`. A closing quote
/// must end the word. With `comment`, a word starting with `#` begins a
/// comment, returned separately.
fn tokenize(line: &str, comment: bool) -> Result<(Vec<Vec<u8>>, Option<String>), String> {
    let b = line.as_bytes();
    let mut i = 0;
    let mut args = Vec::new();
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return Ok((args, None));
        }
        if comment && b[i] == b'#' {
            return Ok((args, Some(line[i + 1..].trim().to_string())));
        }
        let mut cur = Vec::new();
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    let Some(&c) = b.get(i) else {
                        return Err(format!("unbalanced double quote: {line}"));
                    };
                    i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let Some(&e) = b.get(i) else {
                                return Err(format!("dangling escape: {line}"));
                            };
                            i += 1;
                            cur.push(match e {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 8,
                                b'a' => 7,
                                b'x' => {
                                    let hex = line
                                        .get(i..i + 2)
                                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                                        .ok_or_else(|| format!("bad \\x escape: {line}"))?;
                                    i += 2;
                                    hex
                                }
                                other => other,
                            });
                        }
                        c => cur.push(c),
                    }
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    let Some(&c) = b.get(i) else {
                        return Err(format!("unbalanced single quote: {line}"));
                    };
                    i += 1;
                    match c {
                        b'\'' => break,
                        b'\\' if b.get(i) == Some(&b'\'') => {
                            cur.push(b'\'');
                            i += 1;
                        }
                        c => cur.push(c),
                    }
                }
            }
            _ => {
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    cur.push(b[i]);
                    i += 1;
                }
                args.push(cur);
                continue;
            }
        }
        if i < b.len() && !b[i].is_ascii_whitespace() {
            return Err(format!("closing quote must be followed by a space: {line}"));
        }
        args.push(cur);
    }
}

fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

/// How a command's reply is compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compare {
    Exact,
    Sorted,
    SortedPairs,
    /// Every aggregate sorted, at every depth.
    SortedDeep,
    /// Field names (and their order) of an INFO-style or CLIENT-style text.
    Fields,
    /// The reply's structure, every scalar masked to its type.
    Shape,
    Not,
}

enum Step {
    Cmd {
        args: Vec<Vec<u8>>,
        compare: Compare,
    },
    Raw {
        bytes: Vec<u8>,
        silent_ok: bool,
        /// Keep the connection afterwards (not a protocol error case).
        keep: bool,
    },
    Sleep(u64),
    /// Read whatever has arrived on the connection.
    Drain,
    /// Close the connection on both sides.
    Close,
}

/// The connection number in a `{id:N}` argument.
fn connection_id_ref(arg: &[u8]) -> Option<usize> {
    std::str::from_utf8(arg)
        .ok()?
        .strip_prefix("{id:")?
        .strip_suffix('}')?
        .parse()
        .ok()
}

/// Split an optional `[n] ` connection prefix off a line.
fn connection_of(line: &str) -> Result<(usize, &str), String> {
    let Some(rest) = line.strip_prefix('[') else {
        return Ok((0, line));
    };
    let close = rest
        .find("] ")
        .ok_or_else(|| format!("bad connection prefix: {line}"))?;
    let n = rest[..close]
        .parse()
        .map_err(|_| format!("bad connection number: {line}"))?;
    Ok((n, &rest[close + 2..]))
}

fn parse_step(line: &str) -> Result<Step, String> {
    let (_, line) = connection_of(line)?;
    if line.trim() == "@drain" {
        return Ok(Step::Drain);
    }
    if line.trim() == "@close" {
        return Ok(Step::Close);
    }
    let raw_bytes = |r: &str| -> Result<Vec<u8>, String> {
        let (parts, _) = tokenize(r, false)?;
        if parts.is_empty() {
            return Err(format!("@raw without bytes: {line}"));
        }
        Ok(parts.concat())
    };
    let (compare, rest) = if let Some(r) = line.strip_prefix("~ ") {
        let (args, why) = tokenize(r, true)?;
        if why.as_deref().unwrap_or("").is_empty() {
            return Err(format!(
                "a `~` line must say why it is not compared (`# …`): {line}"
            ));
        }
        return Ok(Step::Cmd {
            args,
            compare: Compare::Not,
        });
    } else if let Some(r) = line.strip_prefix("@sort ") {
        (Compare::Sorted, r)
    } else if let Some(r) = line.strip_prefix("@sortpairs ") {
        (Compare::SortedPairs, r)
    } else if let Some(r) = line.strip_prefix("@sortdeep ") {
        (Compare::SortedDeep, r)
    } else if let Some(r) = line.strip_prefix("@fields ") {
        (Compare::Fields, r)
    } else if let Some(r) = line.strip_prefix("@shape ") {
        (Compare::Shape, r)
    } else if let Some(r) = line.strip_prefix("@raw ") {
        return Ok(Step::Raw {
            bytes: raw_bytes(r)?,
            silent_ok: false,
            keep: false,
        });
    } else if let Some(r) = line.strip_prefix("@noreply ") {
        let (args, _) = tokenize(r, false)?;
        if args.is_empty() {
            return Err(format!("@noreply without a command: {line}"));
        }
        return Ok(Step::Raw {
            bytes: common::encode(&args.iter().map(|a| a.as_slice()).collect::<Vec<_>>()),
            silent_ok: true,
            keep: true,
        });
    } else if let Some(r) = line.strip_prefix("@raw-silent ") {
        return Ok(Step::Raw {
            bytes: raw_bytes(r)?,
            silent_ok: true,
            keep: false,
        });
    } else if let Some(r) = line.strip_prefix("@sleep ") {
        return r
            .trim()
            .parse()
            .map(Step::Sleep)
            .map_err(|_| format!("bad @sleep: {line}"));
    } else if line.starts_with('@') || line.starts_with('~') {
        return Err(format!("unknown directive: {line}"));
    } else {
        (Compare::Exact, line)
    };
    let (args, _) = tokenize(rest, false)?;
    if args.is_empty() {
        return Err(format!("empty command: {line}"));
    }
    Ok(Step::Cmd { args, compare })
}

/// What each server sends until it is quiet for `quiet` (read from both
/// at once), and whether it closed the connection.
fn read_both(a: &mut Conn, b: &mut Conn, quiet: Duration) -> ((Vec<u8>, bool), (Vec<u8>, bool)) {
    std::thread::scope(|s| {
        let ha = s.spawn(|| a.read_available(quiet));
        let rb = b.read_available(quiet);
        (ha.join().expect("reader thread"), rb)
    })
}

/// How long a server may stay silent before its replies to raw bytes are
/// taken as complete.
const RAW_QUIET: Duration = Duration::from_millis(150);
/// How long to listen for anything unexpected after a case's last reply.
const TRAILING_QUIET: Duration = Duration::from_millis(20);

fn show_closed(bytes: &[u8], closed: bool) -> String {
    format!("{}{}", show(bytes), if closed { " <closed>" } else { "" })
}

#[test]
fn replies_match_redis() {
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let kv = start_kvstore(&["--enable-debug-command", "yes"]);
    let cases = load_cases();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in &cases {
        // Connection pairs of this case: (kvstore, redis), by number.
        let mut conns: Vec<Option<(Conn, Conn)>> = Vec::new();
        // `{id:N}` as first asked, so that it can name a connection that
        // is blocked since: (server side, connection) -> id.
        let mut ids_known: std::collections::HashMap<(usize, usize), Vec<u8>> =
            std::collections::HashMap::new();
        let open = |conns: &mut Vec<Option<(Conn, Conn)>>, n: usize| {
            if conns.len() <= n {
                conns.resize_with(n + 1, || None);
            }
            if conns[n].is_none() {
                conns[n] = Some((Conn::connect(kv.port), Conn::connect(redis.port)));
            }
        };
        open(&mut conns, 0);
        {
            // Each case starts from an empty dataset and no pause left over
            // by a case that stopped half-way.
            let (a, b) = conns[0].as_mut().unwrap();
            for c in [a, b] {
                c.cmd_str(&["CLIENT", "UNPAUSE"]);
                c.cmd_str(&["FLUSHALL"]);
            }
        }
        let fail = |failures: &mut Vec<String>, line: &str, ka: String, rb: String| {
            failures.push(format!(
                "[{}] {}: {}\n    kvstore: {}\n    redis:   {}",
                case.file, case.name, line, ka, rb
            ));
        };
        for line in &case.lines {
            let step =
                parse_step(line).unwrap_or_else(|e| panic!("[{}] {}: {e}", case.file, case.name));
            let (n, _) = connection_of(line).expect("parsed above");
            open(&mut conns, n);
            let (a, b) = conns[n].as_mut().unwrap();
            match step {
                Step::Close => {
                    conns[n] = None;
                    ids_known.retain(|&(_, m), _| m != n);
                    continue;
                }
                Step::Drain => {
                    let ((ra, ca), (rb, cb)) = read_both(a, b, RAW_QUIET);
                    compared += 1;
                    if (&ra, ca) != (&rb, cb) {
                        fail(
                            &mut failures,
                            line,
                            show_closed(&ra, ca),
                            show_closed(&rb, cb),
                        );
                    }
                }
                Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(ms)),
                Step::Raw {
                    bytes,
                    silent_ok,
                    keep,
                } => {
                    a.send_raw(&bytes);
                    b.send_raw(&bytes);
                    let ((ra, ca), (rb, cb)) = read_both(a, b, RAW_QUIET);
                    compared += 1;
                    let both_silent = ra.is_empty() && rb.is_empty() && !ca && !cb;
                    if (&ra, ca) != (&rb, cb) || (both_silent && !silent_ok) {
                        let why = if both_silent {
                            " (both silent: use @raw-silent where that is expected)"
                        } else {
                            ""
                        };
                        fail(
                            &mut failures,
                            line,
                            format!("{}{why}", show_closed(&ra, ca)),
                            show_closed(&rb, cb),
                        );
                    }
                    // A protocol error closes the connection: start afresh.
                    if !keep {
                        conns[n] = None;
                        ids_known.retain(|&(_, m), _| m != n);
                    }
                }
                Step::Cmd { args, compare } => {
                    // `{id:N}`: connection N's id, asked of each server.
                    let ids = |side: usize,
                               conns: &mut Vec<Option<(Conn, Conn)>>,
                               known: &mut std::collections::HashMap<(usize, usize), Vec<u8>>|
                     -> Vec<Vec<u8>> {
                        args.iter()
                            .map(|arg| match connection_id_ref(arg) {
                                Some(m) => known
                                    .entry((side, m))
                                    .or_insert_with(|| {
                                        open(conns, m);
                                        let (ka, kb) = conns[m].as_mut().unwrap();
                                        let c = if side == 0 { ka } else { kb };
                                        c.client_id().into_bytes()
                                    })
                                    .clone(),
                                None => arg.clone(),
                            })
                            .collect()
                    };
                    let (args_a, args_b) = (
                        ids(0, &mut conns, &mut ids_known),
                        ids(1, &mut conns, &mut ids_known),
                    );
                    let (a, b) = conns[n].as_mut().unwrap();
                    let refs_a: Vec<&[u8]> = args_a.iter().map(|v| v.as_slice()).collect();
                    let refs_b: Vec<&[u8]> = args_b.iter().map(|v| v.as_slice()).collect();
                    let (ra, rb) = match (a.try_cmd(&refs_a), b.try_cmd(&refs_b)) {
                        (Ok(ra), Ok(rb)) => (ra, rb),
                        (ra, rb) => {
                            // One side hung or closed: the rest of the case
                            // cannot be compared.
                            let show_result = |r: Result<Vec<u8>, String>| match r {
                                Ok(v) => show(&v),
                                Err(e) => format!("<{e}>"),
                            };
                            fail(&mut failures, line, show_result(ra), show_result(rb));
                            conns.clear();
                            break;
                        }
                    };
                    let equal = match compare {
                        Compare::Not => continue,
                        Compare::Exact => ra == rb,
                        Compare::Sorted => sorted_form(&ra, false) == sorted_form(&rb, false),
                        Compare::SortedPairs => sorted_form(&ra, true) == sorted_form(&rb, true),
                        Compare::SortedDeep => deep_sorted_form(&ra) == deep_sorted_form(&rb),
                        Compare::Fields => field_names(&ra) == field_names(&rb),
                        Compare::Shape => shape(&ra) == shape(&rb),
                    };
                    compared += 1;
                    if !equal {
                        fail(&mut failures, line, show(&ra), show(&rb));
                    }
                }
            }
        }
        // Nothing more may come from either side, or the same from both.
        for (n, pair) in conns.iter_mut().enumerate() {
            let Some((a, b)) = pair.as_mut() else {
                continue;
            };
            let ((ra, ca), (rb, cb)) = read_both(a, b, TRAILING_QUIET);
            if (&ra, ca) != (&rb, cb) {
                fail(
                    &mut failures,
                    &format!("(connection {n}, after the last command)"),
                    show_closed(&ra, ca),
                    show_closed(&rb, cb),
                );
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
