//! The `struct` library Redis loads (Roberto Ierusalimschy's struct 0.2
//! as Redis ships it): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s
//! [, pos])`, `struct.size(fmt)`, with its format options (`>` `<` `!n`
//! `b B h H l L T i[n] I[n] f d c[n] s x`), the C layout of this machine
//! (little endian, 8-byte `long`, alignment up to 8) and its messages.

use std::ffi::{c_char, c_int};

use ffi::lua_State;
use mlua_sys as ffi;

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

/// `luaL_error` with a message built here (copied to Lua, then freed).
unsafe fn raise(l: *mut lua_State, msg: String) -> ! {
    ffi::luaL_where(l, 1);
    ffi::lua_pushlstring(l, msg.as_ptr() as *const c_char, msg.len());
    drop(msg);
    ffi::lua_concat(l, 2);
    ffi::lua_error(l)
}

/// `luaL_argerror(narg, msg)` with a message built here.
unsafe fn arg_error(l: *mut lua_State, narg: c_int, msg: &str) -> ! {
    // The message must be a C string while Lua formats it; a stack buffer
    // owns nothing, so raising from here leaks nothing.
    let mut buf = [0u8; 128];
    let n = msg.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&msg.as_bytes()[..n]);
    ffi::luaL_argerror(l, narg, buf.as_ptr() as *const c_char);
    unreachable!("luaL_argerror raises")
}

/// A number in the format at `*pos`, or `default`.
unsafe fn get_num(l: *mut lua_State, fmt: &[u8], pos: &mut usize, default: usize) -> usize {
    if !fmt.get(*pos).is_some_and(|c| c.is_ascii_digit()) {
        return default;
    }
    let mut a: i64 = 0;
    while let Some(&c) = fmt.get(*pos).filter(|c| c.is_ascii_digit()) {
        let d = (c - b'0') as i64;
        if a > (c_int::MAX / 10) as i64 || a * 10 > c_int::MAX as i64 - d {
            raise(l, "integral size overflow".into());
        }
        a = a * 10 + d;
        *pos += 1;
    }
    a as usize
}

/// The size of option `opt` (0 for options that take no room).
unsafe fn opt_size(l: *mut lua_State, opt: u8, fmt: &[u8], pos: &mut usize) -> usize {
    match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' => 8,
        b'f' => 4,
        b'd' => 8,
        b'x' => 1,
        b'c' => get_num(l, fmt, pos, 1),
        b'i' | b'I' => {
            let size = get_num(l, fmt, pos, 4);
            if size > MAX_INT_SIZE {
                raise(
                    l,
                    format!("integral size {size} is larger than limit of {MAX_INT_SIZE}"),
                );
            }
            size
        }
        _ => 0,
    }
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
unsafe fn control(l: *mut lua_State, opt: u8, fmt: &[u8], pos: &mut usize, h: &mut Header) {
    match opt {
        b' ' => {}
        b'>' => h.endian = Endian::Big,
        b'<' => h.endian = Endian::Little,
        b'!' => {
            let a = get_num(l, fmt, pos, MAX_ALIGN);
            if !a.is_power_of_two() {
                raise(l, format!("alignment {a} is not a power of 2"));
            }
            h.align = a;
        }
        _ => arg_error(l, 1, &format!("invalid format option '{}'", opt as char)),
    }
}

/// The format string argument (raises when it is not one).
unsafe fn format_arg<'a>(l: *mut lua_State) -> &'a [u8] {
    let mut len = 0;
    let p = ffi::luaL_checklstring(l, 1, &mut len);
    // Read as a C string: up to the first NUL.
    let s = std::slice::from_raw_parts(p as *const u8, len);
    &s[..s.iter().position(|&b| b == 0).unwrap_or(len)]
}

unsafe extern "C-unwind" fn pack(l: *mut lua_State) -> c_int {
    let fmt = format_arg(l);
    let mut h = Header::default();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut pos = 0;
    while pos < fmt.len() {
        let opt = fmt[pos];
        pos += 1;
        let mut size = opt_size(l, opt, fmt, &mut pos);
        let pad = to_align(out.len(), &h, opt, size);
        out.extend(std::iter::repeat_n(0u8, pad));
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = ffi::luaL_checknumber(l, arg);
                arg += 1;
                let mut value: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut bytes = vec![0u8; size];
                for i in 0..size {
                    let at = if h.endian == Endian::Little {
                        i
                    } else {
                        size - 1 - i
                    };
                    bytes[at] = value as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = ffi::luaL_checknumber(l, arg) as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => f.to_le_bytes(),
                    Endian::Big => f.to_be_bytes(),
                });
            }
            b'd' => {
                let d = ffi::luaL_checknumber(l, arg);
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => d.to_le_bytes(),
                    Endian::Big => d.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let mut len = 0;
                let p = ffi::luaL_checklstring(l, arg, &mut len);
                arg += 1;
                if size == 0 {
                    size = len;
                }
                if len < size {
                    arg_error(l, arg, "string too short");
                }
                out.extend_from_slice(std::slice::from_raw_parts(p as *const u8, size));
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(l, opt, fmt, &mut pos, &mut h),
        }
    }
    ffi::lua_pushlstring(l, out.as_ptr() as *const c_char, out.len());
    1
}

/// An integer of `size` bytes at the start of `b`.
fn get_integer(b: &[u8], endian: Endian, signed: bool, size: usize) -> f64 {
    let mut v: u64 = 0;
    let bytes: Box<dyn Iterator<Item = &u8>> = match endian {
        Endian::Big => Box::new(b[..size].iter()),
        Endian::Little => Box::new(b[..size].iter().rev()),
    };
    for &x in bytes {
        v = (v << 8) | x as u64;
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

unsafe extern "C-unwind" fn unpack(l: *mut lua_State) -> c_int {
    let fmt = format_arg(l);
    let mut ld = 0;
    let data = ffi::luaL_checklstring(l, 2, &mut ld);
    let data = std::slice::from_raw_parts(data as *const u8, ld);
    let mut pos = ffi::luaL_optinteger(l, 3, 1) as usize;
    if pos == 0 {
        arg_error(l, 3, "offset must be 1 or greater");
    }
    pos -= 1;
    let mut n: c_int = 0;
    let mut h = Header::default();
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = opt_size(l, opt, fmt, &mut i);
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            arg_error(l, 2, "data string too short");
        }
        ffi::luaL_checkstack(l, 2, c"too many results".as_ptr());
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
                        raise(l, "format 'c0' needs a previous size".into());
                    }
                    size = ffi::lua_tonumber(l, -1) as usize;
                    ffi::lua_pop(l, 1);
                    n -= 1;
                    if !(size <= ld && pos <= ld - size) {
                        arg_error(l, 2, "data string too short");
                    }
                }
                ffi::lua_pushlstring(l, data[pos..].as_ptr() as *const c_char, size);
                n += 1;
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    raise(l, "unfinished string in data".into());
                };
                size = end + 1;
                ffi::lua_pushlstring(l, data[pos..].as_ptr() as *const c_char, end);
                n += 1;
            }
            _ => control(l, opt, fmt, &mut i, &mut h),
        }
        pos = pos.wrapping_add(size);
    }
    ffi::lua_pushinteger(l, pos as ffi::lua_Integer + 1);
    n + 1
}

unsafe extern "C-unwind" fn size(l: *mut lua_State) -> c_int {
    let fmt = format_arg(l);
    let mut h = Header::default();
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = opt_size(l, opt, fmt, &mut i);
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            arg_error(l, 1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            arg_error(l, 1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            control(l, opt, fmt, &mut i, &mut h);
        }
        pos += size;
    }
    ffi::lua_pushinteger(l, pos as ffi::lua_Integer);
    1
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
