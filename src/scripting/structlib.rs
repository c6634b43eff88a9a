//! The `struct` library Redis loads (Roberto Ierusalimschy's struct 0.2
//! as Redis ships it): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s
//! [, pos])`, `struct.size(fmt)`, with its format options (`>` `<` `!n`
//! `b B h H l L T i[n] I[n] f d c[n] s x`), the C layout of this machine
//! (little endian, 8-byte `long`, alignment up to 8) and its messages.

use std::ffi::{c_char, c_int, CStr};

use ffi::lua_State;
use mlua_sys as ffi;

use super::to_bytes;

/// The largest integer size (`i32`).
const MAX_INT_SIZE: usize = 32;
/// `!` without a number: the largest alignment a double needs here.
const MAX_ALIGN: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// Why a call fails; raised by `fail` once every Rust value of the call
/// is gone (a Lua error is a longjmp, which runs no destructor).
enum Failure {
    /// `luaL_error`: the message, after the caller's position.
    Error(String),
    /// `luaL_argerror(narg, message)`.
    Arg(c_int, String),
    /// `luaL_typerror(narg, type)`.
    Type(c_int, &'static CStr),
}

type R<T> = Result<T, Failure>;

/// Raise `f`.
///
/// # Safety
/// Called by a C function of the library with nothing that owns memory
/// alive in its frame (`f`'s strings are copied to Lua and dropped here).
unsafe fn fail(l: *mut lua_State, f: Failure) -> ! {
    match f {
        Failure::Error(msg) => {
            ffi::luaL_where(l, 1);
            ffi::lua_pushlstring(l, msg.as_ptr() as *const c_char, msg.len());
            drop(msg);
            ffi::lua_concat(l, 2);
            ffi::lua_error(l)
        }
        Failure::Arg(narg, msg) => {
            // A C string on the stack (it owns nothing) for Lua to format.
            let mut buf = [0u8; 128];
            let n = msg.len().min(buf.len() - 1);
            buf[..n].copy_from_slice(&msg.as_bytes()[..n]);
            drop(msg);
            ffi::luaL_argerror(l, narg, buf.as_ptr() as *const c_char);
            unreachable!("luaL_argerror raises")
        }
        Failure::Type(narg, tname) => {
            ffi::luaL_typerror(l, narg, tname.as_ptr());
            unreachable!("luaL_typerror raises")
        }
    }
}

/// `luaL_checknumber` that reports instead of raising.
unsafe fn check_number(l: *mut lua_State, narg: c_int) -> R<f64> {
    let d = ffi::lua_tonumber(l, narg);
    if d == 0.0 && ffi::lua_isnumber(l, narg) == 0 {
        return Err(Failure::Type(narg, c"number"));
    }
    Ok(d)
}

/// `luaL_checklstring` that reports instead of raising.
unsafe fn check_bytes<'a>(l: *mut lua_State, narg: c_int) -> R<&'a [u8]> {
    to_bytes(l, narg).ok_or(Failure::Type(narg, c"string"))
}

/// A number in the format at `*pos`, or `default`.
fn get_num(fmt: &[u8], pos: &mut usize, default: usize) -> R<usize> {
    if !fmt.get(*pos).is_some_and(|c| c.is_ascii_digit()) {
        return Ok(default);
    }
    let mut a: i64 = 0;
    while let Some(&c) = fmt.get(*pos).filter(|c| c.is_ascii_digit()) {
        let d = (c - b'0') as i64;
        if a > (c_int::MAX / 10) as i64 || a * 10 > c_int::MAX as i64 - d {
            return Err(Failure::Error("integral size overflow".into()));
        }
        a = a * 10 + d;
        *pos += 1;
    }
    Ok(a as usize)
}

/// The size of option `opt` (0 for options that take no room).
fn opt_size(opt: u8, fmt: &[u8], pos: &mut usize) -> R<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' => 8,
        b'f' => 4,
        b'd' => 8,
        b'x' => 1,
        b'c' => get_num(fmt, pos, 1)?,
        b'i' | b'I' => {
            let size = get_num(fmt, pos, 4)?;
            if size > MAX_INT_SIZE {
                return Err(Failure::Error(format!(
                    "integral size {size} is larger than limit of {MAX_INT_SIZE}"
                )));
            }
            size
        }
        _ => 0,
    })
}

/// Padding before an item of `size` at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

/// Endianness, alignment and spaces; anything else is an error.
fn control(opt: u8, fmt: &[u8], pos: &mut usize, h: &mut Header) -> R<()> {
    match opt {
        b' ' => {}
        b'>' => h.endian = Endian::Big,
        b'<' => h.endian = Endian::Little,
        b'!' => {
            let a = get_num(fmt, pos, MAX_ALIGN)?;
            if !a.is_power_of_two() {
                return Err(Failure::Error(format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        _ => {
            return Err(Failure::Arg(
                1,
                format!("invalid format option '{}'", opt as char),
            ))
        }
    }
    Ok(())
}

/// The format string argument (raises when it is not one; nothing of the
/// call exists yet).
unsafe fn format_arg<'a>(l: *mut lua_State) -> &'a [u8] {
    let mut len = 0;
    let p = ffi::luaL_checklstring(l, 1, &mut len);
    // Read as a C string: up to the first NUL.
    let s = std::slice::from_raw_parts(p as *const u8, len);
    &s[..s.iter().position(|&b| b == 0).unwrap_or(len)]
}

unsafe fn pack_into(l: *mut lua_State, fmt: &[u8], out: &mut Vec<u8>) -> R<()> {
    let mut h = Header::default();
    let mut arg = 2;
    let mut pos = 0;
    while pos < fmt.len() {
        let opt = fmt[pos];
        pos += 1;
        let mut size = opt_size(opt, fmt, &mut pos)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.extend(std::iter::repeat_n(0u8, pad));
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(l, arg)?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let start = out.len();
                out.resize(start + size, 0);
                for i in 0..size {
                    let at = if h.endian == Endian::Little {
                        i
                    } else {
                        size - 1 - i
                    };
                    out[start + at] = value as u8;
                    value >>= 8;
                }
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(l, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => f.to_le_bytes(),
                    Endian::Big => f.to_be_bytes(),
                });
            }
            b'd' => {
                let d = check_number(l, arg)?;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => d.to_le_bytes(),
                    Endian::Big => d.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let s = check_bytes(l, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(Failure::Arg(arg, "string too short".into()));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(opt, fmt, &mut pos, &mut h)?,
        }
    }
    Ok(())
}

unsafe extern "C-unwind" fn pack(l: *mut lua_State) -> c_int {
    let fmt = format_arg(l);
    let result = {
        let mut out: Vec<u8> = Vec::new();
        pack_into(l, fmt, &mut out).map(|()| {
            ffi::lua_pushlstring(l, out.as_ptr() as *const c_char, out.len());
        })
    };
    match result {
        Ok(()) => 1,
        Err(f) => fail(l, f),
    }
}

/// An integer of `size` bytes at the start of `b`.
fn get_integer(b: &[u8], endian: Endian, signed: bool, size: usize) -> f64 {
    let mut v: u64 = 0;
    let mut add = |x: u8| v = (v << 8) | x as u64;
    match endian {
        Endian::Big => b[..size].iter().for_each(|&x| add(x)),
        Endian::Little => b[..size].iter().rev().for_each(|&x| add(x)),
    }
    if !signed {
        return v as f64;
    }
    let mask = (!0u64).wrapping_shl((size * 8).wrapping_sub(1) as u32);
    if v & mask != 0 {
        v |= mask;
    }
    v as i64 as f64
}

unsafe fn unpack_into(l: *mut lua_State, fmt: &[u8], data: &[u8], mut pos: usize) -> R<c_int> {
    let ld = data.len();
    let mut n: c_int = 0;
    let mut h = Header::default();
    let mut i = 0;
    let too_short = || Failure::Arg(2, "data string too short".into());
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = opt_size(opt, fmt, &mut i)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(too_short());
        }
        if ffi::lua_checkstack(l, 2) == 0 {
            return Err(Failure::Error("stack overflow (too many results)".into()));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = get_integer(&data[pos..], h.endian, opt.is_ascii_lowercase(), size);
                ffi::lua_pushnumber(l, v);
                n += 1;
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or_default();
                let f = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                ffi::lua_pushnumber(l, f as f64);
                n += 1;
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or_default();
                let d = match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                };
                ffi::lua_pushnumber(l, d);
                n += 1;
            }
            b'c' => {
                if size == 0 {
                    if n == 0 || ffi::lua_isnumber(l, -1) == 0 {
                        return Err(Failure::Error("format 'c0' needs a previous size".into()));
                    }
                    size = ffi::lua_tonumber(l, -1) as usize;
                    ffi::lua_pop(l, 1);
                    n -= 1;
                    if !(size <= ld && pos <= ld - size) {
                        return Err(too_short());
                    }
                }
                ffi::lua_pushlstring(l, data[pos..].as_ptr() as *const c_char, size);
                n += 1;
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(Failure::Error("unfinished string in data".into()));
                };
                size = end + 1;
                ffi::lua_pushlstring(l, data[pos..].as_ptr() as *const c_char, end);
                n += 1;
            }
            _ => control(opt, fmt, &mut i, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    ffi::lua_pushinteger(l, (pos as ffi::lua_Integer).wrapping_add(1));
    Ok(n + 1)
}

unsafe extern "C-unwind" fn unpack(l: *mut lua_State) -> c_int {
    let fmt = format_arg(l);
    let mut ld = 0;
    let data = ffi::luaL_checklstring(l, 2, &mut ld);
    let data = std::slice::from_raw_parts(data as *const u8, ld);
    let pos = ffi::luaL_optinteger(l, 3, 1) as usize;
    if pos == 0 {
        fail(l, Failure::Arg(3, "offset must be 1 or greater".into()));
    }
    match unpack_into(l, fmt, data, pos - 1) {
        Ok(n) => n,
        Err(f) => fail(l, f),
    }
}

unsafe fn size_of_format(fmt: &[u8]) -> R<usize> {
    let mut h = Header::default();
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = opt_size(opt, fmt, &mut i)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(Failure::Arg(1, "option 's' has no fixed size".into()));
        } else if opt == b'c' && size == 0 {
            return Err(Failure::Arg(1, "option 'c0' has no fixed size".into()));
        }
        if !opt.is_ascii_alphanumeric() {
            control(opt, fmt, &mut i, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos)
}

unsafe extern "C-unwind" fn size(l: *mut lua_State) -> c_int {
    let fmt = format_arg(l);
    match size_of_format(fmt) {
        Ok(n) => {
            ffi::lua_pushinteger(l, n as ffi::lua_Integer);
            1
        }
        Err(f) => fail(l, f),
    }
}

/// Push the `struct` table.
///
/// # Safety
/// `l` is a valid state being set up.
pub unsafe fn open(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 3);
    for (name, f) in [
        (c"pack", pack as ffi::lua_CFunction),
        (c"unpack", unpack),
        (c"size", size),
    ] {
        ffi::lua_pushcfunction(l, f);
        ffi::lua_setfield(l, -2, name.as_ptr());
    }
}
