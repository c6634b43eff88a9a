//! Argument helpers shared by command families: counts, ranges, keywords,
//! subcommands and HELP replies, with Redis's error texts.

use super::*;

/// An argument as Redis's C formats (`%s`) and parsers (strtod, strtoul)
/// see it: up to its first NUL byte.
pub fn c_bytes(a: &[u8]) -> &[u8] {
    let end = a.iter().position(|&b| b == 0).unwrap_or(a.len());
    &a[..end]
}

/// An argument as Redis prints it with `%s` in a reply: up to its first
/// NUL byte.
pub fn c_str(a: &[u8]) -> String {
    String::from_utf8_lossy(c_bytes(a)).into_owned()
}

/// The optional count of LPOP/RPOP/SPOP/ZPOPMIN/ZPOPMAX at `argv[idx]`
/// (Redis's getPositiveLongFromObjectOrReply wording).
pub fn optional_pop_count(argv: &[&[u8]], idx: usize) -> Result<Option<usize>, &'static str> {
    match argv.get(idx) {
        None => Ok(None),
        Some(a) => match parse_i64(a) {
            Some(n) if n >= 0 => Ok(Some(n as usize)),
            _ => Err("ERR value is out of range, must be positive"),
        },
    }
}

/// Parsed `numkeys key [key ...] <where> [COUNT count]` of LMPOP/ZMPOP and
/// their blocking forms (`argv[1]` is numkeys): the keys, the `<where>`
/// argument for the caller to interpret, and the count (default 1).
pub struct MpopArgs<'a> {
    pub keys: Vec<&'a [u8]>,
    pub side: &'a [u8],
    pub count: usize,
}

/// `side_ok` validates `<where>`; like Redis it is checked before COUNT.
pub fn parse_mpop<'a>(
    argv: &[&'a [u8]],
    side_ok: fn(&[u8]) -> bool,
) -> Result<MpopArgs<'a>, &'static str> {
    let numkeys = match parse_i64(argv[1]) {
        Some(n) if n >= 1 => n as usize,
        _ => return Err("ERR numkeys should be greater than 0"),
    };
    let where_idx = numkeys
        .checked_add(2)
        .filter(|&w| w < argv.len())
        .ok_or(ERR_SYNTAX)?;
    if !side_ok(argv[where_idx]) {
        return Err(ERR_SYNTAX);
    }
    let mut count: i64 = -1;
    let mut j = where_idx + 1;
    while j < argv.len() {
        if count == -1 && eq_ic(argv[j], "count") && j + 1 < argv.len() {
            j += 1;
            count = match parse_i64(argv[j]) {
                Some(n) if n >= 1 => n,
                _ => return Err("ERR count should be greater than 0"),
            };
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    Ok(MpopArgs {
        keys: argv[2..where_idx].to_vec(),
        side: argv[where_idx],
        count: count.max(1) as usize,
    })
}

/// Clamp a Redis start/stop index pair (negative = from the end) to
/// `0..len`, as LRANGE, LTRIM and ZRANGE do; `None` when the range is empty.
pub fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

/// An argument as a signed 64-bit integer, or Redis's error.
pub fn arg_i64(arg: &[u8]) -> Result<i64, &'static str> {
    parse_i64(arg).ok_or(ERR_NOT_INT)
}

/// A timeout in milliseconds as Redis's getTimeoutFromObjectOrReply reads
/// it with UNIT_MILLISECONDS (CLIENT PAUSE, WAIT): an integer, not negative.
pub fn parse_timeout_ms(arg: &[u8]) -> Result<i64, &'static str> {
    match parse_i64(arg) {
        None => Err("ERR timeout is not an integer or out of range"),
        Some(ms) if ms < 0 => Err("ERR timeout is negative"),
        Some(ms) => Ok(ms),
    }
}

/// Case-insensitive comparison with an ASCII keyword.
#[inline]
pub fn eq_ic(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

/// Reply with a HELP text as Redis's addReplyHelp does.
pub fn reply_help(c: &mut Ctx, lines: &[&str]) {
    c.cl.reply.array(lines.len());
    for l in lines {
        c.cl.reply.simple(l);
    }
}

/// Redis's addReplySubcommandSyntaxError text for `argv[1]` of the
/// command `container` (printed as C does with `%.128s`: cut at a NUL
/// byte, no newlines in an error line).
pub fn subcommand_syntax_error_text(argv: &[&[u8]], container: &str) -> String {
    let sub = &argv[1][..argv[1].len().min(128)];
    let end = sub.iter().position(|&b| b == 0).unwrap_or(sub.len());
    let sub = String::from_utf8_lossy(&sub[..end]).replace(['\r', '\n'], " ");
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {container} HELP."
    )
}

/// Reply with Redis's addReplySubcommandSyntaxError.
pub fn subcommand_syntax_error(c: &mut Ctx, argv: &[&[u8]], container: &str) {
    c.cl.reply
        .error(&subcommand_syntax_error_text(argv, container));
}

/// The subcommand the dispatcher resolved for a container's handler:
/// `get` when it runs as `config|get`.
pub fn subcommand(c: &Ctx) -> &'static str {
    c.cmd.name.split_once('|').map_or("", |(_, sub)| sub)
}
