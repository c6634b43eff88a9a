//! Conversions between Redis replies and Lua values, as Redis 7.0 makes
//! them (script_lua.c: redisProtocolToLuaType and luaReplyToRedisReply).
//!
//! Reply → Lua (what `redis.call` returns): integer → number, bulk string
//! → string, null bulk / null array → `false`, status → `{ok=…}`, error →
//! `{err=…}`, array → table; and with `redis.setresp(3)`: map → `{map=…}`,
//! set → `{set={member=true…}}`, null → nil, boolean, double →
//! `{double=…}`, big number → `{big_number=…}`, verbatim string →
//! `{verbatim_string={format=…, string=…}}`; attributes are skipped.
//!
//! Lua → reply (what a script returns): string → bulk, number → integer
//! (truncated), boolean → 1 / null (or a RESP3 boolean when the script
//! set RESP3), table → `err` / `ok` / `double` / `big_number` /
//! `verbatim_string` / `map` / `set` forms, else an array up to the first
//! nil; anything else → null.

use std::ffi::{c_char, c_int};

use ffi::lua_State;
use mlua_sys as ffi;

use super::{mark_error_counted, push_error_table, to_bytes};
use crate::protocol::reply::Reply;

/// Push the value of the RESP reply in `bytes`.
///
/// # Safety
/// `l` is a valid state. `bytes` is a reply the server encoded; a malformed
/// one pushes nil rather than failing.
pub unsafe fn push_reply(l: *mut lua_State, bytes: &[u8]) {
    let mut pos = 0;
    if parse(l, bytes, &mut pos).is_none() {
        ffi::lua_pushnil(l);
    }
}

/// One line (without CRLF) starting at `*pos`.
fn line<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let start = *pos;
    let end = start + b.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    *pos = end + 2;
    Some(&b[start..end])
}

fn number(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// A length-prefixed payload of `n` bytes and its CRLF.
fn payload<'a>(b: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let start = *pos;
    let data = b.get(start..start.checked_add(n)?)?;
    *pos = start + n + 2;
    Some(data)
}

/// Parse one reply at `*pos` and push its Lua value (`None` when the bytes
/// are cut or malformed: then nothing is pushed for it).
unsafe fn parse(l: *mut lua_State, b: &[u8], pos: &mut usize) -> Option<()> {
    if ffi::lua_checkstack(l, 4) == 0 {
        return None;
    }
    let kind = *b.get(*pos)?;
    *pos += 1;
    let head = line(b, pos)?;
    match kind {
        b':' => ffi::lua_pushnumber(l, number(head)? as f64),
        b'$' => {
            let n = number(head)?;
            if n < 0 {
                ffi::lua_pushboolean(l, 0);
            } else {
                let s = payload(b, pos, n as usize)?;
                ffi::lua_pushlstring(l, s.as_ptr() as *const c_char, s.len());
            }
        }
        b'+' => {
            ffi::lua_createtable(l, 0, 1);
            ffi::lua_pushlstring(l, head.as_ptr() as *const c_char, head.len());
            ffi::lua_setfield(l, -2, c"ok".as_ptr());
        }
        b'-' => {
            push_error_table(l, &format!("-{}", String::from_utf8_lossy(head)));
            // Counted when the command replied.
            mark_error_counted(l);
        }
        // A push message is not a reply a script can read: Redis's parser
        // gives the script nil for it.
        b'>' => ffi::lua_pushnil(l),
        b'*' => {
            let n = number(head)?;
            if n < 0 {
                ffi::lua_pushboolean(l, 0);
                return Some(());
            }
            ffi::lua_createtable(l, (n as usize).min(1 << 16) as c_int, 0);
            for i in 0..n {
                if parse(l, b, pos).is_none() {
                    ffi::lua_pop(l, 1);
                    return None;
                }
                ffi::lua_rawseti(l, -2, i + 1);
            }
        }
        // A map's values, or a set's members each mapped to true, in a
        // table under `map` or `set`.
        b'%' | b'~' => {
            let map = kind == b'%';
            let n = number(head)?;
            ffi::lua_createtable(l, 0, 1);
            // Grown as Redis grows it (no size given), so that the order
            // `next` walks it in (which a script's reply follows) is Redis's.
            ffi::lua_createtable(l, 0, 0);
            for _ in 0..n {
                if parse(l, b, pos).is_none() {
                    ffi::lua_pop(l, 2);
                    return None;
                }
                if !map {
                    ffi::lua_pushboolean(l, 1);
                } else if parse(l, b, pos).is_none() {
                    ffi::lua_pop(l, 3);
                    return None;
                }
                ffi::lua_settable(l, -3);
            }
            let field = if map { c"map" } else { c"set" };
            ffi::lua_setfield(l, -2, field.as_ptr());
        }
        b'_' => ffi::lua_pushnil(l),
        b'#' => ffi::lua_pushboolean(l, (head == b"t") as c_int),
        b',' => {
            let d = crate::util::parse_f64(head)?;
            ffi::lua_createtable(l, 0, 1);
            ffi::lua_pushnumber(l, d);
            ffi::lua_setfield(l, -2, c"double".as_ptr());
        }
        b'(' => {
            ffi::lua_createtable(l, 0, 1);
            ffi::lua_pushlstring(l, head.as_ptr() as *const c_char, head.len());
            ffi::lua_setfield(l, -2, c"big_number".as_ptr());
        }
        b'=' => {
            let n = number(head)?;
            let s = payload(b, pos, n.max(0) as usize)?;
            if s.len() < 4 {
                return None;
            }
            ffi::lua_createtable(l, 0, 1);
            ffi::lua_createtable(l, 0, 2);
            ffi::lua_pushlstring(l, s[4..].as_ptr() as *const c_char, s.len() - 4);
            ffi::lua_setfield(l, -2, c"string".as_ptr());
            ffi::lua_pushlstring(l, s.as_ptr() as *const c_char, 3);
            ffi::lua_setfield(l, -2, c"format".as_ptr());
            ffi::lua_setfield(l, -2, c"verbatim_string".as_ptr());
        }
        b'|' => {
            // Attributes are not shown to scripts: skip them, then the reply.
            let n = number(head)?;
            let top = ffi::lua_gettop(l);
            for _ in 0..n.max(0) * 2 {
                parse(l, b, pos)?;
            }
            ffi::lua_settop(l, top);
            return parse(l, b, pos);
        }
        _ => return None,
    }
    Some(())
}

/// `(long long)d` as C on x86-64 does it: out of range (and NaN) gives the
/// smallest integer.
fn c_truncate(d: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Write the value on top of the stack as a reply and pop it.
/// `script_resp3`: the script asked for RESP3 (`redis.setresp(3)`), which
/// changes what a boolean becomes.
///
/// # Safety
/// `l` is a valid state with a value on top.
pub unsafe fn lua_to_reply(l: *mut lua_State, out: &mut Reply, script_resp3: bool) {
    if ffi::lua_checkstack(l, 4) == 0 {
        out.error("ERR reached lua stack limit");
        ffi::lua_pop(l, 1);
        return;
    }
    match ffi::lua_type(l, -1) {
        ffi::LUA_TSTRING => out.bulk(to_bytes(l, -1).unwrap_or_default()),
        ffi::LUA_TBOOLEAN => {
            let b = ffi::lua_toboolean(l, -1) != 0;
            if script_resp3 {
                out.boolean(b);
            } else if b {
                out.int(1);
            } else {
                out.null();
            }
        }
        ffi::LUA_TNUMBER => out.int(c_truncate(ffi::lua_tonumber(l, -1))),
        ffi::LUA_TTABLE => {
            table_to_reply(l, out, script_resp3);
            return;
        }
        _ => out.null(),
    }
    ffi::lua_pop(l, 1);
}

/// Push `t[field]` (raw) for the table on top and return its type.
unsafe fn raw_field(l: *mut lua_State, field: &std::ffi::CStr) -> c_int {
    ffi::lua_pushstring(l, field.as_ptr());
    ffi::lua_rawget(l, -2);
    ffi::lua_type(l, -1)
}

/// A table on top: an error, a status, a RESP3 form or an array. Pops it.
unsafe fn table_to_reply(l: *mut lua_State, out: &mut Reply, resp3: bool) {
    if raw_field(l, c"err") == ffi::LUA_TSTRING {
        let msg = String::from_utf8_lossy(to_bytes(l, -1).unwrap_or_default()).into_owned();
        ffi::lua_pop(l, 1);
        // A command's error passed on was counted when the command failed.
        let counted = raw_field(l, c"ignore_error_stats_update") == ffi::LUA_TBOOLEAN
            && ffi::lua_toboolean(l, -1) != 0;
        ffi::lua_pop(l, 2);
        // As Redis's addReplyErrorFormat: line breaks at the ends go (the
        // reply adds the line's own), those inside become spaces.
        let msg = msg.trim_matches(|c| c == '\r' || c == '\n');
        if counted {
            out.error_uncounted(msg);
        } else {
            out.error(msg);
        }
        return;
    }
    ffi::lua_pop(l, 1);
    if raw_field(l, c"ok") == ffi::LUA_TSTRING {
        let text: String = String::from_utf8_lossy(to_bytes(l, -1).unwrap_or_default())
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        out.simple(&text);
        ffi::lua_pop(l, 2);
        return;
    }
    ffi::lua_pop(l, 1);
    if raw_field(l, c"double") == ffi::LUA_TNUMBER {
        out.double(ffi::lua_tonumber(l, -1));
        ffi::lua_pop(l, 2);
        return;
    }
    ffi::lua_pop(l, 1);
    if raw_field(l, c"big_number") == ffi::LUA_TSTRING {
        let text: Vec<u8> = to_bytes(l, -1)
            .unwrap_or_default()
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        out.big_number(&text);
        ffi::lua_pop(l, 2);
        return;
    }
    ffi::lua_pop(l, 1);
    if raw_field(l, c"verbatim_string") == ffi::LUA_TTABLE {
        if raw_field(l, c"format") == ffi::LUA_TSTRING {
            let format = to_bytes(l, -1).unwrap_or_default().to_vec();
            ffi::lua_pop(l, 1);
            if raw_field(l, c"string") == ffi::LUA_TSTRING {
                let text = to_bytes(l, -1).unwrap_or_default();
                out.verbatim_with(&format, text);
                ffi::lua_pop(l, 3);
                return;
            }
        }
        ffi::lua_pop(l, 1);
    }
    ffi::lua_pop(l, 1);
    if raw_field(l, c"map") == ffi::LUA_TTABLE {
        let n = count_pairs(l);
        out.map(n);
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, -2) != 0 {
            // table, key, value: reply the key (a copy), then the value.
            ffi::lua_pushvalue(l, -2);
            lua_to_reply(l, out, resp3);
            lua_to_reply(l, out, resp3);
        }
        ffi::lua_pop(l, 2);
        return;
    }
    ffi::lua_pop(l, 1);
    if raw_field(l, c"set") == ffi::LUA_TTABLE {
        let n = count_pairs(l);
        out.set(n);
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, -2) != 0 {
            ffi::lua_pop(l, 1);
            ffi::lua_pushvalue(l, -1);
            lua_to_reply(l, out, resp3);
        }
        ffi::lua_pop(l, 2);
        return;
    }
    ffi::lua_pop(l, 1);
    // An array: items 1, 2, … up to the first nil.
    let mut n = 0;
    loop {
        ffi::lua_rawgeti(l, -1, n as ffi::lua_Integer + 1);
        let nil = ffi::lua_type(l, -1) == ffi::LUA_TNIL;
        ffi::lua_pop(l, 1);
        if nil {
            break;
        }
        n += 1;
    }
    out.array(n);
    for i in 0..n {
        ffi::lua_rawgeti(l, -1, i as ffi::lua_Integer + 1);
        lua_to_reply(l, out, resp3);
    }
    ffi::lua_pop(l, 1);
}

/// The number of pairs in the table on top.
unsafe fn count_pairs(l: *mut lua_State) -> usize {
    let mut n = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        ffi::lua_pop(l, 1);
        n += 1;
    }
    n
}
