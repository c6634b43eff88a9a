//! The slow log (Redis's slowlog.c): commands that ran longer than
//! `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them, with arguments trimmed as Redis trims them.

use super::monitor::redacted;
use super::*;
use crate::state::SlowlogEntry;

/// Arguments kept per entry; the last slot says how many more there were.
const SLOWLOG_ENTRY_MAX_ARGC: usize = 32;
/// Bytes kept per argument.
const SLOWLOG_ENTRY_MAX_STRING: usize = 128;

/// Record the command if it was slow enough.
pub fn push_if_slow(srv: &mut Server, client: &ClientState, argv: &[&[u8]], duration_us: u64) {
    let threshold = srv.config.slowlog_log_slower_than;
    if threshold < 0 || (duration_us as i64) < threshold {
        return;
    }
    let argc = argv.len().min(SLOWLOG_ENTRY_MAX_ARGC);
    let mut args = Vec::with_capacity(argc);
    for (i, a) in argv.iter().take(argc).enumerate() {
        if argc != argv.len() && i == argc - 1 {
            args.push(format!("... ({} more arguments)", argv.len() - argc + 1).into_bytes());
        } else if redacted(client.last_cmd, argv, i) {
            args.push(b"(redacted)".to_vec());
        } else if a.len() > SLOWLOG_ENTRY_MAX_STRING {
            let mut s = a[..SLOWLOG_ENTRY_MAX_STRING].to_vec();
            s.extend_from_slice(
                format!("... ({} more bytes)", a.len() - SLOWLOG_ENTRY_MAX_STRING).as_bytes(),
            );
            args.push(s);
        } else {
            args.push(a.to_vec());
        }
    }
    let entry = SlowlogEntry {
        id: srv.slowlog_next_id,
        time_unix: srv.now_ms / 1000,
        duration_us,
        argv: args,
        addr: client.addr.clone(),
        name: client.name.clone().unwrap_or_default(),
    };
    srv.slowlog_next_id += 1;
    srv.slowlog.push_front(entry);
    srv.slowlog
        .truncate(srv.config.slowlog_max_len.max(0) as usize);
}

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

/// `SLOWLOG GET [count] | LEN | RESET | HELP`
pub fn slowlog(c: &mut Ctx, argv: &[&[u8]]) {
    let sub = subcommand(c);
    match sub {
        "help" => reply_help(c, SLOWLOG_HELP),
        "len" => {
            let n = c.srv.slowlog.len();
            c.cl.reply.int(n as i64);
        }
        "reset" => {
            c.srv.slowlog.clear();
            c.cl.reply.ok();
        }
        "get" => {
            if argv.len() > 3 {
                return subcommand_syntax_error(c, argv, "SLOWLOG");
            }
            let count = match argv.get(2) {
                None => 10,
                Some(a) => match parse_i64(a) {
                    Some(-1) => usize::MAX,
                    Some(n) if n >= 0 => n as usize,
                    _ => {
                        return c
                            .cl
                            .reply
                            .error("ERR count should be greater than or equal to -1")
                    }
                },
            };
            let entries: Vec<SlowlogEntry> = c.srv.slowlog.iter().take(count).cloned().collect();
            c.cl.reply.array(entries.len());
            for e in entries {
                c.cl.reply.array(6);
                c.cl.reply.int(e.id as i64);
                c.cl.reply.int(e.time_unix);
                c.cl.reply.int(e.duration_us as i64);
                c.cl.reply.array(e.argv.len());
                for a in &e.argv {
                    c.cl.reply.bulk(a);
                }
                c.cl.reply.bulk(e.addr.as_bytes());
                c.cl.reply.bulk(&e.name);
            }
        }
        _ => c.cl.reply.error(ERR_SYNTAX),
    }
}
