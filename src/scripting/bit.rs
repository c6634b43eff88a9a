//! The `bit` library Redis loads (LuaBitOp 1.0's API): 32-bit operations on
//! Lua numbers, which convert to 32 bits by the same rounding trick
//! (adding 2^52 + 2^51 and keeping the low word), so results match.

use std::ffi::{c_char, c_int};

use ffi::lua_State;
use mlua_sys as ffi;

/// Argument `idx` as 32 bits (LuaBitOp's barg).
///
/// # Safety
/// `l` is a valid state inside a call; raises on a non-number (no Rust
/// value owning memory is alive here).
unsafe fn barg(l: *mut lua_State, idx: c_int) -> u32 {
    let n = ffi::lua_tonumber(l, idx) + 6_755_399_441_055_744.0;
    let b = n.to_bits() as u32;
    if b == 0 && ffi::lua_isnumber(l, idx) == 0 {
        ffi::luaL_typerror(l, idx, c"number".as_ptr());
    }
    b
}

/// Push a result as Lua's number (signed 32 bits).
unsafe fn ret(l: *mut lua_State, b: u32) -> c_int {
    ffi::lua_pushnumber(l, b as i32 as f64);
    1
}

unsafe extern "C-unwind" fn tobit(l: *mut lua_State) -> c_int {
    ret(l, barg(l, 1))
}

unsafe extern "C-unwind" fn bnot(l: *mut lua_State) -> c_int {
    ret(l, !barg(l, 1))
}

/// AND, OR, XOR of all the arguments.
unsafe fn fold(l: *mut lua_State, op: fn(u32, u32) -> u32) -> c_int {
    let mut b = barg(l, 1);
    let mut i = ffi::lua_gettop(l);
    while i > 1 {
        b = op(b, barg(l, i));
        i -= 1;
    }
    ret(l, b)
}

unsafe extern "C-unwind" fn band(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a & b)
}

unsafe extern "C-unwind" fn bor(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a | b)
}

unsafe extern "C-unwind" fn bxor(l: *mut lua_State) -> c_int {
    fold(l, |a, b| a ^ b)
}

/// A shift or rotation by the second argument (mod 32).
unsafe fn shift(l: *mut lua_State, op: fn(u32, u32) -> u32) -> c_int {
    let b = barg(l, 1);
    let n = barg(l, 2) & 31;
    ret(l, op(b, n))
}

unsafe extern "C-unwind" fn lshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b << n)
}

unsafe extern "C-unwind" fn rshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b >> n)
}

unsafe extern "C-unwind" fn arshift(l: *mut lua_State) -> c_int {
    shift(l, |b, n| ((b as i32) >> n) as u32)
}

unsafe extern "C-unwind" fn rol(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b.rotate_left(n))
}

unsafe extern "C-unwind" fn ror(l: *mut lua_State) -> c_int {
    shift(l, |b, n| b.rotate_right(n))
}

unsafe extern "C-unwind" fn bswap(l: *mut lua_State) -> c_int {
    ret(l, barg(l, 1).swap_bytes())
}

/// `bit.tohex(x [, n])`: `n` hex digits (upper case when negative, at
/// most 8).
unsafe extern "C-unwind" fn tohex(l: *mut lua_State) -> c_int {
    let mut b = barg(l, 1);
    let mut n: i32 = if ffi::lua_isnone(l, 2) != 0 {
        8
    } else {
        barg(l, 2) as i32
    };
    // As Redis's patched LuaBitOp: the one negative without a positive.
    if n == i32::MIN {
        n = i32::MIN + 1;
    }
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let n = n.clamp(0, 8) as usize;
    let mut buf = [0u8; 8];
    for i in (0..n).rev() {
        buf[i] = digits[(b & 15) as usize];
        b >>= 4;
    }
    ffi::lua_pushlstring(l, buf.as_ptr() as *const c_char, n);
    1
}

/// Push the `bit` table.
///
/// # Safety
/// `l` is a valid state being set up.
pub unsafe fn open(l: *mut lua_State) {
    ffi::lua_createtable(l, 0, 12);
    for (name, f) in [
        (c"tobit", tobit as ffi::lua_CFunction),
        (c"bnot", bnot),
        (c"band", band),
        (c"bor", bor),
        (c"bxor", bxor),
        (c"lshift", lshift),
        (c"rshift", rshift),
        (c"arshift", arshift),
        (c"rol", rol),
        (c"ror", ror),
        (c"bswap", bswap),
        (c"tohex", tohex),
    ] {
        ffi::lua_pushcfunction(l, f);
        ffi::lua_setfield(l, -2, name.as_ptr());
    }
}
