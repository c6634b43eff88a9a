//! The `cjson` library Redis loads (Lua CJSON 2.1.0's API and behaviour):
//! `cjson.encode`, `cjson.decode`, `cjson.null`, `cjson.new` and the
//! settings (`encode_sparse_array`, `encode_max_depth`, `decode_max_depth`,
//! `encode_number_precision`, `encode_keep_buffer`,
//! `encode_invalid_numbers`, `decode_invalid_numbers`), with its number
//! formatting (`%.14g`), its rules for telling arrays from objects, and its
//! error messages, so that scripts get the same strings as on Redis.
//!
//! Each module table's functions share one settings block (a userdata
//! upvalue); `cjson.new()` makes a table with its own.

use std::ffi::{c_char, c_int, CStr};

use ffi::lua_State;
use mlua_sys as ffi;

use super::to_bytes;

/// The settings of one cjson table (Lua CJSON's json_config_t).
#[derive(Clone, Copy)]
#[repr(C)]
struct Settings {
    sparse_convert: c_int,
    sparse_ratio: c_int,
    sparse_safe: c_int,
    encode_max_depth: c_int,
    decode_max_depth: c_int,
    /// 0 off, 1 on, 2 "null".
    encode_invalid_numbers: c_int,
    decode_invalid_numbers: c_int,
    encode_keep_buffer: c_int,
    encode_number_precision: c_int,
}

const DEFAULTS: Settings = Settings {
    sparse_convert: 0,
    sparse_ratio: 2,
    sparse_safe: 10,
    encode_max_depth: 1000,
    decode_max_depth: 1000,
    encode_invalid_numbers: 0,
    decode_invalid_numbers: 1,
    encode_keep_buffer: 1,
    encode_number_precision: 14,
};

/// The settings block of the running function (its first upvalue).
///
/// # Safety
/// Called from one of this module's closures.
unsafe fn settings(l: *mut lua_State) -> *mut Settings {
    ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *mut Settings
}

/// `luaL_error` with a message built in Rust (the string is copied onto
/// the Lua stack and freed before raising).
unsafe fn error(l: *mut lua_State, msg: String) -> ! {
    ffi::luaL_where(l, 1);
    ffi::lua_pushlstring(l, msg.as_ptr() as *const c_char, msg.len());
    drop(msg);
    ffi::lua_concat(l, 2);
    ffi::lua_error(l)
}

// ---- encoding ----

/// Why an encoding stopped (raised once the buffer is gone).
enum EncodeError {
    /// "Cannot serialise <type>: <reason>"
    Value(&'static str, &'static str),
    Depth(c_int),
}

/// `%.<precision>g`.
fn format_number(num: f64, precision: c_int) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL-terminated.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            c"%.*g".as_ptr(),
            precision,
            num,
        )
    };
    String::from_utf8_lossy(&buf[..(n.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// The type name Lua gives the value at `idx`.
unsafe fn type_name(l: *mut lua_State, idx: c_int) -> &'static str {
    let p = ffi::lua_typename(l, ffi::lua_type(l, idx));
    CStr::from_ptr(p).to_str().unwrap_or("?")
}

unsafe fn append_number(
    l: *mut lua_State,
    cfg: &Settings,
    out: &mut Vec<u8>,
    idx: c_int,
) -> Result<(), EncodeError> {
    let num = ffi::lua_tonumber(l, idx);
    match cfg.encode_invalid_numbers {
        0 if !num.is_finite() => {
            return Err(EncodeError::Value(
                type_name(l, idx),
                "must not be NaN or Inf",
            ))
        }
        1 if num.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !num.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(format_number(num, cfg.encode_number_precision).as_bytes());
    Ok(())
}

/// The array length of the table on top, or `None` for an object (Lua
/// CJSON's lua_array_length).
unsafe fn array_length(l: *mut lua_State, cfg: &Settings) -> Result<Option<i64>, EncodeError> {
    let mut max: i64 = 0;
    let mut items: i64 = 0;
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        if ffi::lua_type(l, -2) == ffi::LUA_TNUMBER {
            let k = ffi::lua_tonumber(l, -2);
            if k != 0.0 && k.floor() == k && k >= 1.0 {
                max = max.max(k as i64);
                items += 1;
                ffi::lua_pop(l, 1);
                continue;
            }
        }
        ffi::lua_pop(l, 2);
        return Ok(None);
    }
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio as i64 && max > cfg.sparse_safe as i64
    {
        if cfg.sparse_convert == 0 {
            return Err(EncodeError::Value("table", "excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

/// Append the value on top of the stack (left there).
unsafe fn append_value(
    l: *mut lua_State,
    cfg: &Settings,
    depth: c_int,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match ffi::lua_type(l, -1) {
        ffi::LUA_TSTRING => append_string(out, to_bytes(l, -1).unwrap_or_default()),
        ffi::LUA_TNUMBER => append_number(l, cfg, out, -1)?,
        ffi::LUA_TBOOLEAN => out.extend_from_slice(if ffi::lua_toboolean(l, -1) != 0 {
            b"true"
        } else {
            b"false"
        }),
        ffi::LUA_TTABLE => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth || ffi::lua_checkstack(l, 3) == 0 {
                return Err(EncodeError::Depth(depth));
            }
            match array_length(l, cfg)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        ffi::lua_rawgeti(l, -1, i as ffi::lua_Integer);
                        let r = append_value(l, cfg, depth, out);
                        ffi::lua_pop(l, 1);
                        r?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    ffi::lua_pushnil(l);
                    while ffi::lua_next(l, -2) != 0 {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        let r = match ffi::lua_type(l, -2) {
                            ffi::LUA_TNUMBER => {
                                out.push(b'"');
                                let r = append_number(l, cfg, out, -2);
                                out.extend_from_slice(b"\":");
                                r
                            }
                            ffi::LUA_TSTRING => {
                                append_string(out, to_bytes(l, -2).unwrap_or_default());
                                out.push(b':');
                                Ok(())
                            }
                            _ => Err(EncodeError::Value(
                                type_name(l, -2),
                                "table key must be a number or string",
                            )),
                        }
                        .and_then(|_| append_value(l, cfg, depth, out));
                        if r.is_err() {
                            ffi::lua_pop(l, 2);
                            return r;
                        }
                        ffi::lua_pop(l, 1);
                    }
                    out.push(b'}');
                }
            }
        }
        ffi::LUA_TNIL => out.extend_from_slice(b"null"),
        ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(l, -1).is_null() => {
            out.extend_from_slice(b"null")
        }
        _ => return Err(EncodeError::Value(type_name(l, -1), "type not supported")),
    }
    Ok(())
}

unsafe extern "C-unwind" fn encode(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 {
        ffi::luaL_argerror(l, 1, c"expected 1 argument".as_ptr());
    }
    let cfg = *settings(l);
    let err = {
        let mut out = Vec::new();
        match append_value(l, &cfg, 0, &mut out) {
            Ok(()) => {
                ffi::lua_pushlstring(l, out.as_ptr() as *const c_char, out.len());
                None
            }
            Err(e) => Some(e),
        }
    };
    match err {
        None => 1,
        Some(EncodeError::Value(kind, reason)) => {
            error(l, format!("Cannot serialise {kind}: {reason}"))
        }
        Some(EncodeError::Depth(d)) => {
            error(l, format!("Cannot serialise, excessive nesting ({d})"))
        }
    }
}

// ---- decoding ----

#[derive(Clone, Copy, PartialEq)]
enum Token {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A token error, with Lua CJSON's name for it.
    Error(&'static str),
}

impl Token {
    /// The name an error message gives a token.
    fn name(self) -> &'static str {
        match self {
            Token::ObjBegin => "T_OBJ_BEGIN",
            Token::ObjEnd => "T_OBJ_END",
            Token::ArrBegin => "T_ARR_BEGIN",
            Token::ArrEnd => "T_ARR_END",
            Token::Str => "T_STRING",
            Token::Number(_) => "T_NUMBER",
            Token::Boolean(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(e) => e,
        }
    }
}

/// Why decoding stopped (raised once everything Rust owns is gone).
enum DecodeError {
    /// "Expected <what> but found <token> at character <index+1>"
    Expected(&'static str, Token, usize),
    /// "Found too many nested data structures (<depth>) at character <pos>"
    Depth(c_int, usize),
}

struct Parser<'a> {
    /// The input up to its first NUL (Lua CJSON reads a C string).
    data: &'a [u8],
    pos: usize,
    depth: c_int,
    cfg: Settings,
    /// The last string token's bytes.
    text: Vec<u8>,
}

fn hex4(b: &[u8]) -> Option<u32> {
    let s = b.get(..4)?;
    let mut v = 0;
    for &c in s {
        v = v * 16 + (c as char).to_digit(16)?;
    }
    Some(v)
}

/// Lua CJSON's rule for numbers that strict JSON forbids.
fn invalid_json_number(b: &[u8]) -> bool {
    let mut p = b;
    if p.first() == Some(&b'+') {
        return true;
    }
    if p.first() == Some(&b'-') {
        p = &p[1..];
    }
    match p.first() {
        Some(b'0') => matches!(p.get(1), Some(c) if (c | 0x20) == b'x' || c.is_ascii_digit()),
        Some(&c) if c <= b'9' => false,
        _ => {
            let lower: Vec<u8> = p.iter().take(3).map(|c| c.to_ascii_lowercase()).collect();
            lower == b"inf" || lower == b"nan"
        }
    }
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// strtod over the characters a number may have.
    fn number(&mut self) -> Token {
        let len = self.data[self.pos..]
            .iter()
            .take_while(|&&c| {
                c.is_ascii_digit()
                    || c == b'-'
                    || c == b'+'
                    || c == b'.'
                    || (b'a'..=b'y').contains(&(c | 0x20))
            })
            .count();
        let mut buf = self.data[self.pos..self.pos + len].to_vec();
        buf.push(0);
        let mut end: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: `buf` is NUL-terminated; strtod only reads it.
        let v = unsafe { libc::strtod(buf.as_ptr() as *const libc::c_char, &mut end) };
        let used = end as usize - buf.as_ptr() as usize;
        if used == 0 {
            return Token::Error("invalid number");
        }
        self.pos += used;
        Token::Number(v)
    }

    fn string(&mut self) -> Token {
        self.pos += 1;
        self.text.clear();
        loop {
            let c = self.at(self.pos);
            match c {
                b'"' => {
                    self.pos += 1;
                    return Token::Str;
                }
                0 => return Token::Error("unexpected end of string"),
                b'\\' => {
                    let e = self.at(self.pos + 1);
                    let ch = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'u' => {
                            if self.unicode_escape() {
                                continue;
                            }
                            return Token::Error("invalid unicode escape code");
                        }
                        _ => return Token::Error("invalid escape code"),
                    };
                    self.text.push(ch);
                    self.pos += 2;
                }
                _ => {
                    self.text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// `\uXXXX` (a surrogate pair takes two) as UTF-8.
    fn unicode_escape(&mut self) -> bool {
        let rest = &self.data[self.pos..];
        let Some(mut cp) = hex4(rest.get(2..).unwrap_or_default()) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || rest.get(6) != Some(&b'\\') || rest.get(7) != Some(&b'u') {
                return false;
            }
            let Some(low) = hex4(rest.get(8..).unwrap_or_default()) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut utf8 = [0u8; 4];
        let n = match cp {
            0..=0x7F => {
                utf8[0] = cp as u8;
                1
            }
            0x80..=0x7FF => {
                utf8[0] = (cp >> 6) as u8 | 0xC0;
                utf8[1] = (cp & 0x3F) as u8 | 0x80;
                2
            }
            0x800..=0xFFFF => {
                utf8[0] = (cp >> 12) as u8 | 0xE0;
                utf8[1] = ((cp >> 6) & 0x3F) as u8 | 0x80;
                utf8[2] = (cp & 0x3F) as u8 | 0x80;
                3
            }
            _ => {
                utf8[0] = (cp >> 18) as u8 | 0xF0;
                utf8[1] = ((cp >> 12) & 0x3F) as u8 | 0x80;
                utf8[2] = ((cp >> 6) & 0x3F) as u8 | 0x80;
                utf8[3] = (cp & 0x3F) as u8 | 0x80;
                4
            }
        };
        self.text.extend_from_slice(&utf8[..n]);
        self.pos += len;
        true
    }

    /// The next token and where it starts.
    fn next(&mut self) -> (Token, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let at = self.pos;
        let c = self.at(at);
        let simple = match c {
            b'{' => Some(Token::ObjBegin),
            b'}' => Some(Token::ObjEnd),
            b'[' => Some(Token::ArrBegin),
            b']' => Some(Token::ArrEnd),
            b',' => Some(Token::Comma),
            b':' => Some(Token::Colon),
            _ => None,
        };
        if let Some(t) = simple {
            self.pos += 1;
            return (t, at);
        }
        let rest = &self.data[at..];
        let token = match c {
            0 => Token::End,
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => {
                if self.cfg.decode_invalid_numbers == 0 && invalid_json_number(rest) {
                    Token::Error("invalid number")
                } else {
                    self.number()
                }
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                if rest.starts_with(b"true") {
                    self.pos += 4;
                    Token::Boolean(true)
                } else if rest.starts_with(b"false") {
                    self.pos += 5;
                    Token::Boolean(false)
                } else if rest.starts_with(b"null") {
                    self.pos += 4;
                    Token::Null
                } else if self.cfg.decode_invalid_numbers != 0 && invalid_json_number(rest) {
                    self.number()
                } else {
                    Token::Error("invalid token")
                }
            }
            _ => Token::Error("invalid token"),
        };
        // A token error is reported where the parser stopped.
        match token {
            Token::Error(_) => (token, self.pos),
            _ => (token, at),
        }
    }

    unsafe fn descend(&mut self, l: *mut lua_State, slots: c_int) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth && ffi::lua_checkstack(l, slots) != 0 {
            return Ok(());
        }
        Err(DecodeError::Depth(self.depth, self.pos))
    }

    /// Push the value starting with `token`.
    unsafe fn value(
        &mut self,
        l: *mut lua_State,
        (token, at): (Token, usize),
    ) -> Result<(), DecodeError> {
        match token {
            Token::Str => {
                ffi::lua_pushlstring(l, self.text.as_ptr() as *const c_char, self.text.len());
            }
            Token::Number(n) => ffi::lua_pushnumber(l, n),
            Token::Boolean(b) => ffi::lua_pushboolean(l, b as c_int),
            Token::Null => ffi::lua_pushlightuserdata(l, std::ptr::null_mut()),
            Token::ObjBegin => return self.object(l),
            Token::ArrBegin => return self.array(l),
            _ => return Err(DecodeError::Expected("value", token, at)),
        }
        Ok(())
    }

    unsafe fn object(&mut self, l: *mut lua_State) -> Result<(), DecodeError> {
        self.descend(l, 3)?;
        ffi::lua_newtable(l);
        let mut t = self.next();
        if t.0 == Token::ObjEnd {
            self.depth -= 1;
            return Ok(());
        }
        loop {
            if t.0 != Token::Str {
                return Err(DecodeError::Expected("object key string", t.0, t.1));
            }
            ffi::lua_pushlstring(l, self.text.as_ptr() as *const c_char, self.text.len());
            let c = self.next();
            if c.0 != Token::Colon {
                return Err(DecodeError::Expected("colon", c.0, c.1));
            }
            let v = self.next();
            self.value(l, v)?;
            ffi::lua_rawset(l, -3);
            let n = self.next();
            if n.0 == Token::ObjEnd {
                self.depth -= 1;
                return Ok(());
            }
            if n.0 != Token::Comma {
                return Err(DecodeError::Expected("comma or object end", n.0, n.1));
            }
            t = self.next();
        }
    }

    unsafe fn array(&mut self, l: *mut lua_State) -> Result<(), DecodeError> {
        self.descend(l, 2)?;
        ffi::lua_newtable(l);
        let mut t = self.next();
        if t.0 == Token::ArrEnd {
            self.depth -= 1;
            return Ok(());
        }
        let mut i: ffi::lua_Integer = 1;
        loop {
            self.value(l, t)?;
            ffi::lua_rawseti(l, -2, i);
            i += 1;
            let n = self.next();
            if n.0 == Token::ArrEnd {
                self.depth -= 1;
                return Ok(());
            }
            if n.0 != Token::Comma {
                return Err(DecodeError::Expected("comma or array end", n.0, n.1));
            }
            t = self.next();
        }
    }
}

unsafe extern "C-unwind" fn decode(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 {
        ffi::luaL_argerror(l, 1, c"expected 1 argument".as_ptr());
    }
    let mut len = 0usize;
    let p = ffi::luaL_checklstring(l, 1, &mut len);
    let input = std::slice::from_raw_parts(p as *const u8, len);
    if len >= 2 && (input[0] == 0 || input[1] == 0) {
        error(l, "JSON parser does not support UTF-16 or UTF-32".into());
    }
    let cfg = *settings(l);
    let top = ffi::lua_gettop(l);
    let outcome = {
        let data = &input[..input.iter().position(|&b| b == 0).unwrap_or(len)];
        let mut parser = Parser {
            data,
            pos: 0,
            depth: 0,
            cfg,
            text: Vec::new(),
        };
        let first = parser.next();
        parser.value(l, first).and_then(|_| {
            let (t, at) = parser.next();
            if t == Token::End {
                Ok(())
            } else {
                Err(DecodeError::Expected("the end", t, at))
            }
        })
    };
    match outcome {
        Ok(()) => 1,
        Err(e) => {
            ffi::lua_settop(l, top);
            match e {
                DecodeError::Expected(what, token, at) => error(
                    l,
                    format!(
                        "Expected {what} but found {} at character {}",
                        token.name(),
                        at + 1
                    ),
                ),
                DecodeError::Depth(depth, pos) => error(
                    l,
                    format!("Found too many nested data structures ({depth}) at character {pos}"),
                ),
            }
        }
    }
}

// ---- settings ----

/// Pad the arguments with nils up to `n`, refusing more.
unsafe fn settings_args(l: *mut lua_State, n: c_int) -> *mut Settings {
    if ffi::lua_gettop(l) > n {
        ffi::luaL_argerror(l, n + 1, c"found too many arguments".as_ptr());
    }
    while ffi::lua_gettop(l) < n {
        ffi::lua_pushnil(l);
    }
    settings(l)
}

unsafe fn integer_option(
    l: *mut lua_State,
    idx: c_int,
    setting: *mut c_int,
    min: c_int,
    max: c_int,
) {
    if ffi::lua_isnil(l, idx) == 0 {
        let v = ffi::luaL_checkinteger(l, idx);
        if v < min as ffi::lua_Integer || v > max as ffi::lua_Integer {
            let msg = format!("expected integer between {min} and {max}\0");
            // Copied by Lua before it raises; the format is kept short.
            let mut buf = [0u8; 64];
            let n = msg.len().min(63);
            buf[..n].copy_from_slice(&msg.as_bytes()[..n]);
            drop(msg);
            ffi::luaL_argerror(l, 1, buf.as_ptr() as *const c_char);
        }
        *setting = v as c_int;
    }
    ffi::lua_pushinteger(l, *setting as ffi::lua_Integer);
}

/// An on/off (or named) setting: `options` lists the names, and
/// `bool_true` is the value `true` sets.
unsafe fn enum_option(
    l: *mut lua_State,
    idx: c_int,
    setting: *mut c_int,
    options: &[&CStr],
    bool_true: c_int,
) {
    if ffi::lua_isnil(l, idx) == 0 {
        if ffi::lua_isboolean(l, idx) != 0 {
            *setting = ffi::lua_toboolean(l, idx) * bool_true;
        } else {
            let mut list: [*const c_char; 4] = [std::ptr::null(); 4];
            for (d, s) in list.iter_mut().zip(options) {
                *d = s.as_ptr();
            }
            *setting = ffi::luaL_checkoption(l, idx, std::ptr::null(), list.as_ptr());
        }
    }
    if *setting == 0 || *setting == bool_true {
        ffi::lua_pushboolean(l, *setting);
    } else {
        ffi::lua_pushstring(l, options[*setting as usize].as_ptr());
    }
}

const ON_OFF: &[&CStr] = &[c"off", c"on"];

unsafe extern "C-unwind" fn cfg_encode_sparse_array(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 3);
    enum_option(l, 1, &mut (*cfg).sparse_convert, ON_OFF, 1);
    integer_option(l, 2, &mut (*cfg).sparse_ratio, 0, c_int::MAX);
    integer_option(l, 3, &mut (*cfg).sparse_safe, 0, c_int::MAX);
    3
}

unsafe extern "C-unwind" fn cfg_encode_max_depth(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 1);
    integer_option(l, 1, &mut (*cfg).encode_max_depth, 1, c_int::MAX);
    1
}

unsafe extern "C-unwind" fn cfg_decode_max_depth(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 1);
    integer_option(l, 1, &mut (*cfg).decode_max_depth, 1, c_int::MAX);
    1
}

unsafe extern "C-unwind" fn cfg_encode_number_precision(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 1);
    integer_option(l, 1, &mut (*cfg).encode_number_precision, 1, 14);
    1
}

unsafe extern "C-unwind" fn cfg_encode_keep_buffer(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 1);
    enum_option(l, 1, &mut (*cfg).encode_keep_buffer, ON_OFF, 1);
    1
}

unsafe extern "C-unwind" fn cfg_encode_invalid_numbers(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 1);
    enum_option(
        l,
        1,
        &mut (*cfg).encode_invalid_numbers,
        &[c"off", c"on", c"null"],
        1,
    );
    1
}

unsafe extern "C-unwind" fn cfg_decode_invalid_numbers(l: *mut lua_State) -> c_int {
    let cfg = settings_args(l, 1);
    enum_option(l, 1, &mut (*cfg).decode_invalid_numbers, ON_OFF, 1);
    1
}

unsafe extern "C-unwind" fn new(l: *mut lua_State) -> c_int {
    open(l);
    1
}

/// Push a cjson table with its own settings.
///
/// # Safety
/// `l` is a valid state.
pub unsafe fn open(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 14);
    let cfg = ffi::lua_newuserdata(l, std::mem::size_of::<Settings>()) as *mut Settings;
    cfg.write(DEFAULTS);
    for (name, f) in [
        (c"encode", encode as ffi::lua_CFunction),
        (c"decode", decode),
        (c"encode_sparse_array", cfg_encode_sparse_array),
        (c"encode_max_depth", cfg_encode_max_depth),
        (c"decode_max_depth", cfg_decode_max_depth),
        (c"encode_number_precision", cfg_encode_number_precision),
        (c"encode_keep_buffer", cfg_encode_keep_buffer),
        (c"encode_invalid_numbers", cfg_encode_invalid_numbers),
        (c"decode_invalid_numbers", cfg_decode_invalid_numbers),
        (c"new", new),
    ] {
        ffi::lua_pushvalue(l, -1);
        ffi::lua_pushcclosure(l, f, 1);
        ffi::lua_setfield(l, -3, name.as_ptr());
    }
    ffi::lua_pop(l, 1);
    ffi::lua_pushlightuserdata(l, std::ptr::null_mut());
    ffi::lua_setfield(l, -2, c"null".as_ptr());
    ffi::lua_pushstring(l, c"cjson".as_ptr());
    ffi::lua_setfield(l, -2, c"_NAME".as_ptr());
    ffi::lua_pushstring(l, c"2.1.0".as_ptr());
    ffi::lua_setfield(l, -2, c"_VERSION".as_ptr());
}
