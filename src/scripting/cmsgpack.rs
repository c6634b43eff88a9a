//! The `cmsgpack` library Redis loads (lua-cmsgpack 0.4.0's API and
//! encoding choices): `pack(...)`, `unpack(s)`, `unpack_one(s [, offset])`,
//! `unpack_limit(s, limit [, offset])`.
//!
//! A table whose keys are exactly 1..n is an array, any other a map; a
//! number that is an integer goes out as the smallest integer form, else
//! as a float when a float holds it exactly, else as a double; tables
//! nested 16 deep go out as nil (so a cycle ends). Decoded integers are
//! Lua numbers.

use std::ffi::{c_char, c_int};

use ffi::lua_State;
use mlua_sys as ffi;

use super::to_bytes;

/// Tables nested deeper are packed as nil.
const MAX_NESTING: c_int = 16;

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// An array or map header: `fix` is 0x90 or 0x80, `wide` 0xdc or 0xde.
fn encode_header(out: &mut Vec<u8>, n: u64, fix: u8, wide: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 65535 {
        out.push(wide);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `(int64_t)d` as C on x86-64 does it (out of range and NaN give the
/// smallest integer).
fn c_i64(d: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    if !n.is_infinite() && c_i64(n) as f64 == n {
        encode_int(out, c_i64(n));
    } else if n == (n as f32) as f64 {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Are the keys of the table on top exactly 1..n?
unsafe fn is_array(l: *mut lua_State) -> bool {
    let top = ffi::lua_gettop(l);
    let (mut count, mut max) = (0i64, 0i64);
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        ffi::lua_pop(l, 1);
        let n = ffi::lua_tonumber(l, -1);
        let int_like = !n.is_infinite() && (n as i32) as f64 == n;
        if ffi::lua_type(l, -1) != ffi::LUA_TNUMBER || n <= 0.0 || !int_like {
            ffi::lua_settop(l, top);
            return false;
        }
        max = max.max(n as i64);
        count += 1;
    }
    ffi::lua_settop(l, top);
    max == count
}

/// Room for `n` more values on the Lua stack, or the message
/// `luaL_checkstack` would raise (raised by the caller once its buffer is
/// gone).
unsafe fn room(l: *mut lua_State, n: c_int, what: &'static str) -> Result<(), &'static str> {
    if ffi::lua_checkstack(l, n) == 0 {
        return Err(what);
    }
    Ok(())
}

/// Pack the value on top and pop it.
unsafe fn encode_value(
    l: *mut lua_State,
    out: &mut Vec<u8>,
    level: c_int,
) -> Result<(), &'static str> {
    let mut t = ffi::lua_type(l, -1);
    if t == ffi::LUA_TTABLE && level == MAX_NESTING {
        t = ffi::LUA_TNIL;
    }
    match t {
        ffi::LUA_TSTRING => encode_bytes(out, to_bytes(l, -1).unwrap_or_default()),
        ffi::LUA_TBOOLEAN => out.push(if ffi::lua_toboolean(l, -1) != 0 {
            0xc3
        } else {
            0xc2
        }),
        ffi::LUA_TNUMBER => encode_number(out, ffi::lua_tonumber(l, -1)),
        ffi::LUA_TTABLE if is_array(l) => {
            let len = ffi::lua_objlen(l, -1);
            encode_header(out, len as u64, 0x90, 0xdc);
            room(l, 1, "in function mp_encode_lua_table_as_array")?;
            for j in 1..=len {
                ffi::lua_pushnumber(l, j as f64);
                ffi::lua_gettable(l, -2);
                encode_value(l, out, level + 1)?;
            }
        }
        ffi::LUA_TTABLE => {
            room(l, 3, "in function mp_encode_lua_table_as_map")?;
            let mut len = 0u64;
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, -2) != 0 {
                ffi::lua_pop(l, 1);
                len += 1;
            }
            encode_header(out, len, 0x80, 0xde);
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, -2) != 0 {
                ffi::lua_pushvalue(l, -2);
                encode_value(l, out, level + 1)?;
                encode_value(l, out, level + 1)?;
            }
        }
        _ => out.push(0xc0),
    }
    ffi::lua_pop(l, 1);
    Ok(())
}

unsafe extern "C-unwind" fn pack(l: *mut lua_State) -> c_int {
    let nargs = ffi::lua_gettop(l);
    if nargs == 0 {
        ffi::luaL_argerror(l, 0, c"MessagePack pack needs input.".as_ptr());
    }
    if ffi::lua_checkstack(l, nargs) == 0 {
        ffi::luaL_argerror(l, 0, c"Too many arguments for MessagePack pack.".as_ptr());
    }
    let result = {
        let mut out = Vec::new();
        let mut result = Ok(());
        for i in 1..=nargs {
            result = room(l, 1, "in function mp_check").and_then(|()| {
                ffi::lua_pushvalue(l, i);
                encode_value(l, &mut out, 0)
            });
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            ffi::lua_pushlstring(l, out.as_ptr() as *const c_char, out.len());
        }
        result
    };
    match result {
        Ok(()) => 1,
        // As luaL_checkstack words it; the buffer is gone.
        Err(what) => raise_message(l, format!("stack overflow ({what})")),
    }
}

/// Why decoding stopped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DecodeError {
    Eof,
    BadFormat,
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn need(&self, n: usize) -> Result<&[u8], DecodeError> {
        self.data
            .get(self.pos..self.pos.checked_add(n).ok_or(DecodeError::Eof)?)
            .ok_or(DecodeError::Eof)
    }

    /// A big-endian unsigned integer of `n` bytes after the type byte.
    fn be(&self, n: usize) -> Result<u64, DecodeError> {
        let b = self.need(1 + n)?;
        Ok(b[1..].iter().fold(0u64, |v, &x| (v << 8) | x as u64))
    }
}

/// Push the value at the cursor.
unsafe fn decode_value(l: *mut lua_State, c: &mut Cursor) -> Result<(), DecodeError> {
    let t = *c.need(1)?.first().ok_or(DecodeError::Eof)?;
    ffi::luaL_checkstack(
        l,
        1,
        c"too many return values at once; use unpack_one or unpack_limit instead.".as_ptr(),
    );
    let push_str = |c: &mut Cursor, header: usize, len: usize| -> Result<(), DecodeError> {
        let b = c.need(header + len)?;
        ffi::lua_pushlstring(l, b[header..].as_ptr() as *const c_char, len);
        c.pos += header + len;
        Ok(())
    };
    match t {
        0xcc => {
            let v = c.be(1)?;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 2;
        }
        0xd0 => {
            let v = c.be(1)? as u8 as i8;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 2;
        }
        0xcd => {
            let v = c.be(2)?;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 3;
        }
        0xd1 => {
            let v = c.be(2)? as u16 as i16;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 3;
        }
        0xce => {
            let v = c.be(4)?;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 5;
        }
        0xd2 => {
            let v = c.be(4)? as u32 as i32;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 5;
        }
        0xcf => {
            let v = c.be(8)?;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 9;
        }
        0xd3 => {
            let v = c.be(8)? as i64;
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 9;
        }
        0xc0 => {
            ffi::lua_pushnil(l);
            c.pos += 1;
        }
        0xc3 | 0xc2 => {
            ffi::lua_pushboolean(l, (t == 0xc3) as c_int);
            c.pos += 1;
        }
        0xca => {
            let v = f32::from_bits(c.be(4)? as u32);
            ffi::lua_pushnumber(l, v as f64);
            c.pos += 5;
        }
        0xcb => {
            let v = f64::from_bits(c.be(8)?);
            ffi::lua_pushnumber(l, v);
            c.pos += 9;
        }
        0xd9 => {
            let len = c.be(1)? as usize;
            push_str(c, 2, len)?;
        }
        0xda => {
            let len = c.be(2)? as usize;
            push_str(c, 3, len)?;
        }
        0xdb => {
            let len = c.be(4)? as usize;
            push_str(c, 5, len)?;
        }
        0xdc | 0xdd => {
            let (n, len) = if t == 0xdc {
                (2, c.be(2)?)
            } else {
                (4, c.be(4)?)
            };
            c.pos += 1 + n;
            decode_array(l, c, len)?;
        }
        0xde | 0xdf => {
            let (n, len) = if t == 0xde {
                (2, c.be(2)?)
            } else {
                (4, c.be(4)?)
            };
            c.pos += 1 + n;
            decode_map(l, c, len)?;
        }
        _ if t & 0x80 == 0 => {
            ffi::lua_pushnumber(l, t as f64);
            c.pos += 1;
        }
        _ if t & 0xe0 == 0xe0 => {
            ffi::lua_pushnumber(l, t as i8 as f64);
            c.pos += 1;
        }
        _ if t & 0xe0 == 0xa0 => push_str(c, 1, (t & 0x1f) as usize)?,
        _ if t & 0xf0 == 0x90 => {
            c.pos += 1;
            decode_array(l, c, (t & 0xf) as u64)?;
        }
        _ if t & 0xf0 == 0x80 => {
            c.pos += 1;
            decode_map(l, c, (t & 0xf) as u64)?;
        }
        _ => return Err(DecodeError::BadFormat),
    }
    Ok(())
}

unsafe fn decode_array(l: *mut lua_State, c: &mut Cursor, len: u64) -> Result<(), DecodeError> {
    ffi::lua_newtable(l);
    ffi::luaL_checkstack(l, 1, c"in function mp_decode_to_lua_array".as_ptr());
    for i in 1..=len {
        ffi::lua_pushnumber(l, i as f64);
        decode_value(l, c)?;
        ffi::lua_settable(l, -3);
    }
    Ok(())
}

unsafe fn decode_map(l: *mut lua_State, c: &mut Cursor, len: u64) -> Result<(), DecodeError> {
    ffi::lua_newtable(l);
    for _ in 0..len {
        decode_value(l, c)?;
        decode_value(l, c)?;
        ffi::lua_settable(l, -3);
    }
    Ok(())
}

/// Decode up to `limit` values from `offset` (0 and 0: all of them);
/// with a limit or an offset the next offset comes first (-1 at the end).
unsafe fn unpack_full(
    l: *mut lua_State,
    limit: ffi::lua_Integer,
    offset: ffi::lua_Integer,
) -> c_int {
    let mut len = 0usize;
    let p = ffi::luaL_checklstring(l, 1, &mut len);
    let data = std::slice::from_raw_parts(p as *const u8, len);
    let all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        let msg = format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as c_int, len as c_int
        );
        raise_message(l, msg);
    }
    if offset as usize > len {
        let msg = format!(
            "Start offset {} greater than input length {}.",
            offset as c_int, len as c_int
        );
        raise_message(l, msg);
    }
    let limit = if all {
        c_int::MAX as ffi::lua_Integer
    } else {
        limit
    };
    let mut c = Cursor {
        data,
        pos: offset as usize,
    };
    let mut count: c_int = 0;
    while c.left() > 0 && (count as ffi::lua_Integer) < limit {
        match decode_value(l, &mut c) {
            Ok(()) => count += 1,
            Err(DecodeError::Eof) => raise_message(l, "Missing bytes in input.".into()),
            Err(DecodeError::BadFormat) => raise_message(l, "Bad data format in input.".into()),
        }
    }
    if !all {
        ffi::luaL_checkstack(l, 1, c"in function mp_unpack_full".as_ptr());
        let next = if c.left() == 0 {
            -1
        } else {
            c.pos as ffi::lua_Integer
        };
        ffi::lua_pushinteger(l, next);
        ffi::lua_insert(l, 2);
        count += 1;
    }
    count
}

/// `luaL_error` with a message built here (copied to Lua, then freed).
unsafe fn raise_message(l: *mut lua_State, msg: String) -> ! {
    ffi::luaL_where(l, 1);
    ffi::lua_pushlstring(l, msg.as_ptr() as *const c_char, msg.len());
    drop(msg);
    ffi::lua_concat(l, 2);
    ffi::lua_error(l)
}

unsafe extern "C-unwind" fn unpack(l: *mut lua_State) -> c_int {
    unpack_full(l, 0, 0)
}

unsafe extern "C-unwind" fn unpack_one(l: *mut lua_State) -> c_int {
    let offset = ffi::luaL_optinteger(l, 2, 0);
    ffi::lua_settop(l, 1);
    unpack_full(l, 1, offset)
}

unsafe extern "C-unwind" fn unpack_limit(l: *mut lua_State) -> c_int {
    let limit = ffi::luaL_checkinteger(l, 2);
    let offset = ffi::luaL_optinteger(l, 3, 0);
    ffi::lua_settop(l, 1);
    unpack_full(l, limit, offset)
}

/// Push the `cmsgpack` table.
///
/// # Safety
/// `l` is a valid state being set up.
pub unsafe fn open(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 8);
    for (name, f) in [
        (c"pack", pack as ffi::lua_CFunction),
        (c"unpack", unpack),
        (c"unpack_one", unpack_one),
        (c"unpack_limit", unpack_limit),
    ] {
        ffi::lua_pushcfunction(l, f);
        ffi::lua_setfield(l, -2, name.as_ptr());
    }
    for (name, value) in [
        (c"_NAME", c"cmsgpack"),
        (c"_VERSION", c"lua-cmsgpack 0.4.0"),
        (c"_COPYRIGHT", c"Copyright (C) 2012, Salvatore Sanfilippo"),
        (c"_DESCRIPTION", c"MessagePack C implementation for Lua"),
    ] {
        ffi::lua_pushstring(l, value.as_ptr());
        ffi::lua_setfield(l, -2, name.as_ptr());
    }
}
