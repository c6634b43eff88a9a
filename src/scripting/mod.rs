//! Scripting: Redis 7.0's EVAL on Lua 5.1 (vendored, through mlua-sys's C
//! API), the sandbox Redis gives scripts, and the script cache.
//!
//! The layer knows nothing of the server. A script's `redis.call` goes to a
//! [`Host`] (the command layer runs the command as Redis's script client
//! and hands back the reply bytes), and the script's result is written to
//! a [`Reply`]. Conversions both ways are in `convert.rs`.
//!
//! Why the C API rather than a higher-level binding: Redis defines script
//! behaviour in its terms — an error is a table `{err=…}` raised with
//! `lua_error`, the error handler reads the frame that raised it to name
//! the line, numbers cross as doubles, `pcall` is replaced — and matching
//! those replies byte for byte is simplest with the same calls.
//!
//! # Unsafe code
//! Every function here that takes a `*mut lua_State` rests on one
//! invariant: the state is the engine's, open, and used from the loop
//! thread only. Lua reports errors with `longjmp`, so the C functions
//! Lua calls (`extern "C-unwind"`) drop every Rust value that owns memory
//! before they call anything that may raise (`lua_error`, `luaL_check*`);
//! the one exception, a failing allocation inside Lua while such a value is
//! alive, would leak that value, not corrupt anything.
//!
//! # The sandbox
//! Redis patches its Lua with read-only tables; the stock Lua here gets the
//! same effect from proxies. The globals scripts see are an empty table
//! whose metatable reads through to the real globals (whose own metatable
//! makes reading a missing name an error) and refuses every write; the
//! library tables (`redis`, `string`, `math`, `table`, `coroutine`) are
//! proxies the same way, and so is the strings' metatable. `rawset`,
//! `rawget`, `setmetatable`, `next` and `pairs` see through or refuse the
//! proxies as Redis's read-only tables would. `print`, `dofile`,
//! `loadfile` and `debug` are not there.

mod bit;
mod cjson;
mod cmsgpack;
pub mod convert;
pub mod functions;
mod ldb;
mod structlib;

pub use ldb::{Ldb, LdbIo};

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, Ordering};

use ffi::lua_State;
use mlua_sys as ffi;

use crate::protocol::reply::Reply;

/// What a script's `redis.*` functions reach: the command layer.
pub trait Host {
    /// Run `argv` as the script's client, with replies in protocol `resp`
    /// (2 or 3): the reply bytes, or why the command was refused
    /// (`-CODE message`, or a message that gets `ERR`).
    fn call(&mut self, argv: &[&[u8]], resp: u8) -> Result<Vec<u8>, String>;
    /// `redis.set_repl(flags)`: where the script's writes propagate from
    /// now on (`REPL_AOF` 1 | `REPL_REPLICA` 2).
    fn set_repl(&mut self, flags: i32);
    /// May the script's user run `argv` (`redis.acl_check_cmd`)? None
    /// when it is no command this server has.
    fn acl_check_cmd(&self, argv: &[&[u8]]) -> Option<bool>;
    /// A script runs past its time: serve the other clients meanwhile, and
    /// say why it must stop now, if it must (SCRIPT KILL, shutdown).
    fn interrupt(&mut self) -> Option<&'static str>;
}

/// The flags a script declares in its shebang (`#!lua flags=…`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// No shebang: EVAL's behaviour before Redis 7 (Redis's
    /// SCRIPT_FLAG_EVAL_COMPAT_MODE).
    pub compat: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
}

/// A script in the cache.
#[derive(Debug)]
pub struct Script {
    pub body: Vec<u8>,
    pub flags: ScriptFlags,
    /// The compiled function's reference in the registry.
    func: c_int,
}

/// How a script runs.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// The server's `loglevel` (0 debug … 3 warning): `redis.log` below it
    /// is dropped.
    pub verbosity: i32,
    /// After this long a script is reported slow and checked, every
    /// `HOOK_INSTRUCTIONS`, for a request to stop (`busy-reply-threshold`;
    /// `None`: never).
    pub slow_after: Option<std::time::Duration>,
}

/// VM instructions between two checks of a slow script (Redis's count).
const HOOK_INSTRUCTIONS: c_int = 100_000;

/// Log levels of `redis.log` (Redis's LL_*).
const LL_DEBUG: i32 = 0;
const LL_WARNING: i32 = 3;

/// `redis.set_repl` flags (Redis's PROPAGATE_*).
pub const REPL_AOF: i32 = 1;
pub const REPL_REPLICA: i32 = 2;

/// The state of the script being run, reachable from the C functions
/// through the registry.
struct RunCtx<'a> {
    host: &'a mut dyn Host,
    sha: &'a str,
    started: std::time::Instant,
    slow_after: Option<std::time::Duration>,
    /// Reported slow once already.
    slow: bool,
    /// The protocol `redis.call` replies are read in (`redis.setresp`).
    resp: u8,
    verbosity: i32,
    /// The generator behind `math.random` (Redis's rand48).
    rand: &'a mut u64,
    /// The debugging session, when the script is debugged (SCRIPT DEBUG).
    ldb: Option<&'a mut Ldb>,
}

thread_local! {
    /// The script running on this thread (the loop's), or null: what the
    /// C functions reach the host through.
    static RUN_CTX: std::cell::Cell<*mut RunCtx<'static>> =
        const { std::cell::Cell::new(std::ptr::null_mut()) };
}

/// Registry keys.
/// Proxy → the table it guards.
pub(crate) const PROTECTED: &CStr = c"__kvstore_protected";
/// The real globals table (KEYS and ARGV are set there).
pub(crate) const REAL_GLOBALS: &CStr = c"__kvstore_globals";
const ERR_HANDLER: &CStr = c"__redis__err__handler";

/// The Lua interpreter and the scripts it has compiled.
pub struct Engine {
    lua: *mut lua_State,
    /// Registry references of the error handler and the real globals.
    err_handler: c_int,
    globals: c_int,
    /// Scripts run since the last garbage-collection step.
    runs_since_gc: u32,
    scripts: HashMap<String, Script>,
    /// Bytes of the cached bodies and their names.
    scripts_mem: usize,
    /// rand48 state of `math.random`, which, as in Redis, goes on from
    /// script to script.
    rand: u64,
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.lua.is_null() {
            // SAFETY: the state is ours and no script runs.
            unsafe { ffi::lua_close(self.lua) };
        }
    }
}

/// rand48's starting state (Redis's X0, X1, X2).
const RAND48_INIT: u64 = 0x1234_ABCD_330E;

/// Every this many scripts the collector takes as many steps (Redis's
/// LUA_GC_CYCLE_PERIOD), so a full cycle never lands on one script.
const GC_PERIOD: u32 = 50;

impl Engine {
    // No Default: `mem::take` would build a whole interpreter to stand in
    // (see `placeholder`).
    #[allow(clippy::new_without_default)]
    pub fn new() -> Engine {
        // SAFETY: a fresh state, set up before anything else touches it.
        let (lua, err_handler, globals) = unsafe {
            let l = new_state();
            ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, ERR_HANDLER.as_ptr());
            let err_handler = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, REAL_GLOBALS.as_ptr());
            let globals = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            (l, err_handler, globals)
        };
        Engine {
            lua,
            err_handler,
            globals,
            runs_since_gc: 0,
            scripts: HashMap::new(),
            scripts_mem: 0,
            rand: RAND48_INIT,
        }
    }

    /// What stands in the server's place for the engine while a script
    /// runs (the engine is taken out to run it): no interpreter, no
    /// scripts, nothing allocated.
    pub fn placeholder() -> Engine {
        Engine {
            lua: std::ptr::null_mut(),
            err_handler: 0,
            globals: 0,
            runs_since_gc: 0,
            scripts: HashMap::new(),
            scripts_mem: 0,
            rand: RAND48_INIT,
        }
    }

    /// SCRIPT FLUSH: a fresh interpreter and an empty cache.
    pub fn reset(&mut self) {
        let rand = self.rand;
        *self = Engine::new();
        self.rand = rand;
    }

    /// The cached script named `sha` (any case).
    pub fn get(&self, sha: &[u8]) -> Option<&Script> {
        let sha = std::str::from_utf8(sha).ok()?;
        if sha.bytes().any(|b| b.is_ascii_uppercase()) {
            return self.scripts.get(&sha.to_ascii_lowercase());
        }
        self.scripts.get(sha)
    }

    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// Memory of the interpreter (INFO used_memory_lua).
    pub fn memory(&self) -> usize {
        if self.lua.is_null() {
            return 0;
        }
        // SAFETY: the state is ours.
        unsafe {
            ffi::lua_gc(self.lua, ffi::LUA_GCCOUNT, 0) as usize * 1024
                + ffi::lua_gc(self.lua, ffi::LUA_GCCOUNTB, 0) as usize
        }
    }

    /// Memory of the script cache (INFO used_memory_scripts_eval).
    pub fn scripts_memory(&self) -> usize {
        self.scripts_mem + self.scripts.len() * std::mem::size_of::<Script>()
    }

    /// Compile `body` and cache it (SCRIPT LOAD, and EVAL of a script not
    /// seen before): its SHA1, or the error Redis replies with.
    pub fn create(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = crate::util::sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, shebang_len) = parse_shebang(body)?;
        // The shebang line goes, its line feed stays, so line numbers in
        // errors are the user's.
        let code = text_chunk(&body[shebang_len..]);
        // SAFETY: the state is ours; the chunk is compiled, not run.
        let func = unsafe {
            let l = self.lua;
            if ffi::luaL_loadbuffer(
                l,
                code.as_ptr() as *const c_char,
                code.len(),
                c"@user_script".as_ptr(),
            ) != 0
            {
                let msg = to_string_lossy(l, -1);
                ffi::lua_pop(l, 1);
                return Err(format!("ERR Error compiling script (new function): {msg}"));
            }
            // The script sees the sandboxed globals.
            ffi::lua_pushvalue(l, ffi::LUA_GLOBALSINDEX);
            ffi::lua_setfenv(l, -2);
            ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX)
        };
        self.scripts_mem += body.len() + sha.len();
        self.scripts.insert(
            sha.clone(),
            Script {
                body: body.to_vec(),
                flags,
                func,
            },
        );
        Ok(sha)
    }

    /// Run the cached script `sha` (lower case) with `keys` and `args` as
    /// KEYS and ARGV; its result, or its error, goes to `out`. With `ldb`
    /// the run is debugged (SCRIPT DEBUG).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        sha: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        options: RunOptions,
        host: &mut dyn Host,
        out: &mut Reply,
        ldb: Option<&mut Ldb>,
    ) {
        let Some(func) = self.scripts.get(sha).map(|s| s.func) else {
            return out.error("NOSCRIPT No matching script. Please use EVAL.");
        };
        self.invoke(
            func,
            sha,
            CallStyle::Eval,
            keys,
            args,
            options,
            host,
            out,
            ldb,
        );
    }

    /// Call the function at registry reference `func`, named `label` in
    /// errors: as EVAL calls a script (KEYS and ARGV as globals), or as
    /// FCALL calls a function (the keys and arguments as its two
    /// parameters).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn invoke(
        &mut self,
        func: c_int,
        label: &str,
        style: CallStyle,
        keys: &[&[u8]],
        args: &[&[u8]],
        options: RunOptions,
        host: &mut dyn Host,
        out: &mut Reply,
        ldb: Option<&mut Ldb>,
    ) {
        let l = self.lua;
        let debugging = ldb.is_some();
        let mut ctx = RunCtx {
            host,
            sha: label,
            started: std::time::Instant::now(),
            slow_after: options.slow_after,
            slow: false,
            resp: 2,
            verbosity: options.verbosity,
            rand: &mut self.rand,
            ldb,
        };
        // SAFETY: the state is ours; `ctx` outlives the call, and the
        // thread-local pointer to it is cleared before it goes.
        unsafe {
            let ctx_ptr: *mut RunCtx = &mut ctx;
            RUN_CTX.with(|c| c.set(ctx_ptr.cast()));
            if debugging {
                // Every line stops at the debugger's hook, which also
                // catches a loop left to run (Redis's luaLdbLineHook).
                ffi::lua_sethook(
                    l,
                    Some(ldb::line_hook),
                    ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT,
                    HOOK_INSTRUCTIONS,
                );
            } else if options.slow_after.is_some() {
                ffi::lua_sethook(
                    l,
                    Some(slow_script_hook),
                    ffi::LUA_MASKCOUNT,
                    HOOK_INSTRUCTIONS,
                );
            }
            ffi::lua_rawgeti(
                l,
                ffi::LUA_REGISTRYINDEX,
                self.err_handler as ffi::lua_Integer,
            );
            ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, func as ffi::lua_Integer);
            let err = match style {
                CallStyle::Eval => {
                    ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, self.globals as ffi::lua_Integer);
                    push_array(l, keys);
                    ffi::lua_setfield(l, -2, c"KEYS".as_ptr());
                    push_array(l, args);
                    ffi::lua_setfield(l, -2, c"ARGV".as_ptr());
                    ffi::lua_pop(l, 1);
                    ffi::lua_pcall(l, 0, 1, -2)
                }
                CallStyle::Function => {
                    push_array(l, keys);
                    push_array(l, args);
                    ffi::lua_pcall(l, 2, 1, -4)
                }
            };
            if err != 0 {
                reply_with_run_error(l, label, out);
            } else {
                convert::lua_to_reply(l, out, ctx.resp == 3);
            }
            ffi::lua_pop(l, 1); // the error handler
            if debugging || options.slow_after.is_some() {
                ffi::lua_sethook(l, None, 0, 0);
            }
            RUN_CTX.with(|c| c.set(std::ptr::null_mut()));
            self.runs_since_gc += 1;
            if self.runs_since_gc == GC_PERIOD {
                self.runs_since_gc = 0;
                ffi::lua_gc(l, ffi::LUA_GCSTEP, GC_PERIOD as c_int);
            }
        }
    }

    /// The interpreter (for the functions engine, which shares it).
    pub(crate) fn lua(&self) -> *mut lua_State {
        self.lua
    }
}

/// How a script is called.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallStyle {
    Eval,
    Function,
}

/// The count hook of a script that may run long: past `slow_after` it is
/// logged once as slow, and from then on every check lets the host serve
/// the other clients (`-BUSY`, SCRIPT KILL, SHUTDOWN NOSAVE) and stops the
/// script when the host says so.
unsafe extern "C-unwind" fn slow_script_hook(l: *mut lua_State, _ar: *mut ffi::lua_Debug) {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        return;
    }
    let Some(limit) = (*ctx).slow_after else {
        return;
    };
    let elapsed = (*ctx).started.elapsed();
    if elapsed < limit {
        return;
    }
    if !(*ctx).slow {
        (*ctx).slow = true;
        tracing::warn!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the SCRIPT KILL command. Script name is: {}.",
            elapsed.as_millis(),
            (*ctx).sha
        );
    }
    if let Some(why) = (*ctx).host.interrupt() {
        tracing::warn!("Lua script killed: {why}");
        // From now on every line raises, so a pcall in the script cannot
        // catch the kill and go on.
        ffi::lua_sethook(l, Some(slow_script_hook), ffi::LUA_MASKLINE, 0);
        raise(l, why);
    }
}

/// A failed run's error (Redis's luaCallFunction): the `{err=…}` table the
/// error handler built, with where the script was.
///
/// # Safety
/// `l` is the engine's state with the error object on top (popped here).
unsafe fn reply_with_run_error(l: *mut lua_State, sha: &str, out: &mut Reply) {
    if ffi::lua_type(l, -1) != ffi::LUA_TTABLE {
        let msg = if ffi::lua_isstring(l, -1) != 0 {
            to_string_lossy(l, -1)
        } else {
            "execution failure".into()
        };
        let msg: String = msg.chars().take(100).collect();
        out.error(&format!("ERR Error running script {sha}, {msg}"));
    } else {
        let field = |f: &CStr| -> Option<String> {
            ffi::lua_getfield(l, -1, f.as_ptr());
            let v = (ffi::lua_isstring(l, -1) != 0).then(|| to_string_lossy(l, -1));
            ffi::lua_pop(l, 1);
            v
        };
        let msg = field(c"err").unwrap_or_default();
        let mut text = msg;
        if let (Some(line), Some(source)) = (field(c"line"), field(c"source")) {
            text.push_str(&format!(" script: {sha}, on {source}:{line}."));
        }
        // A command's error raised by redis.call was counted when the
        // command failed (or was refused).
        ffi::lua_getfield(l, -1, c"ignore_error_stats_update".as_ptr());
        let counted = ffi::lua_toboolean(l, -1) != 0;
        ffi::lua_pop(l, 1);
        if counted {
            out.error_uncounted(&text);
        } else {
            out.error(&text);
        }
    }
    ffi::lua_pop(l, 1);
}

/// Parse `#!lua flags=a,b` (Redis's evalExtractShebangFlags): the flags and
/// the length of the shebang line (without its line feed).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    let mut flags = ScriptFlags {
        compat: true,
        ..Default::default()
    };
    if !body.starts_with(b"#!") {
        return Ok((flags, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    let Some(&engine) = parts.first() else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    flags.compat = false;
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in list.split(',') {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot = true,
                "" if list.is_empty() => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok((flags, end))
}

/// A chunk as Redis's Lua parses it: always as text. A precompiled chunk
/// (its first byte is the signature's ESC) gets a space before it, so the
/// stock Lua here parses it as text too, and fails as Redis's does.
pub(crate) fn text_chunk(code: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if code.first() == Some(&0x1b) {
        let mut spaced = Vec::with_capacity(code.len() + 1);
        spaced.push(b' ');
        spaced.extend_from_slice(code);
        std::borrow::Cow::Owned(spaced)
    } else {
        std::borrow::Cow::Borrowed(code)
    }
}

/// The value at `idx` as a string (numbers too), lossily as UTF-8.
///
/// # Safety
/// `l` is a valid state and `idx` a valid index.
pub(crate) unsafe fn to_string_lossy(l: *mut lua_State, idx: c_int) -> String {
    String::from_utf8_lossy(to_bytes(l, idx).unwrap_or_default()).into_owned()
}

/// The bytes of the string (or number, converted in place) at `idx`.
///
/// # Safety
/// `l` is a valid state and `idx` a valid index; the slice lives as long
/// as the value stays on the stack.
pub(crate) unsafe fn to_bytes<'a>(l: *mut lua_State, idx: c_int) -> Option<&'a [u8]> {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, idx, &mut len);
    (!p.is_null()).then(|| std::slice::from_raw_parts(p as *const u8, len))
}

/// Push a Lua array of `items`.
///
/// # Safety
/// `l` is a valid state.
unsafe fn push_array(l: *mut lua_State, items: &[&[u8]]) {
    ffi::lua_createtable(l, items.len() as c_int, 0);
    for (i, item) in items.iter().enumerate() {
        ffi::lua_pushlstring(l, item.as_ptr() as *const c_char, item.len());
        ffi::lua_rawseti(l, -2, i as ffi::lua_Integer + 1);
    }
}

/// The running script's context, or null outside a run.
///
/// # Safety
/// Called from a C function of the engine's state on the loop thread; the
/// pointer is valid while the run lasts.
unsafe fn run_ctx(_l: *mut lua_State) -> *mut RunCtx<'static> {
    RUN_CTX.with(|c| c.get())
}

/// Push the `{err="CODE message"}` table Redis uses for errors (its
/// luaPushErrorBuff): `-CODE message` keeps its code, anything else gets
/// `ERR`; line breaks at the ends go.
///
/// # Safety
/// `l` is a valid state.
pub(crate) unsafe fn push_error_table(l: *mut lua_State, err: &str) {
    let (code, msg) = match err.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => (code, msg),
            None => ("ERR", rest),
        },
        None => ("ERR", err),
    };
    let msg = msg.trim_matches(|c| c == '\r' || c == '\n');
    let text = format!("{code} {msg}");
    ffi::lua_createtable(l, 0, 1);
    ffi::lua_pushlstring(l, text.as_ptr() as *const c_char, text.len());
    ffi::lua_setfield(l, -2, c"err".as_ptr());
}

/// Push an error table and raise it.
///
/// # Safety
/// `l` is a valid state, called from a C function with no Rust value that
/// owns memory alive in its frame (`err` is borrowed and copied first).
unsafe fn raise(l: *mut lua_State, err: &str) -> ! {
    push_error_table(l, err);
    ffi::lua_error(l)
}

// ---- redis.* ----

/// `redis.call` and `redis.pcall` (Redis's luaRedisGenericCommand).
unsafe fn generic_call(l: *mut lua_State, raise_errors: bool) -> c_int {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        raise(
            l,
            "redis.call/pcall can only be called inside a script invocation",
        );
    }
    let argc = ffi::lua_gettop(l);
    if argc == 0 {
        push_error_table(
            l,
            "Please specify at least one argument for this redis lib call",
        );
        if raise_errors {
            ffi::lua_error(l);
        }
        return 1;
    }
    // Arguments: strings, and numbers as `%.17g` (Lua's own conversion
    // loses precision).
    let outcome: Option<Result<Vec<u8>, String>> = {
        let mut argv: Vec<Vec<u8>> = Vec::with_capacity(argc as usize);
        let mut ok = true;
        for i in 1..=argc {
            if ffi::lua_type(l, i) == ffi::LUA_TNUMBER {
                argv.push(format_g17(ffi::lua_tonumber(l, i)).into_bytes());
            } else if let Some(b) = to_bytes(l, i) {
                argv.push(b.to_vec());
            } else {
                ok = false;
                break;
            }
        }
        ffi::lua_settop(l, 0);
        ok.then(|| {
            let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
            if let Some(ldb) = (*ctx).ldb.as_deref_mut().filter(|s| s.enabled()) {
                ldb.log_command(&refs);
            }
            let outcome = (*ctx).host.call(&refs, (*ctx).resp);
            if let (Some(ldb), Ok(reply)) =
                ((*ctx).ldb.as_deref_mut().filter(|s| s.enabled()), &outcome)
            {
                ldb.log_reply(reply);
            }
            outcome
        })
    };
    let is_error = match outcome {
        None => {
            push_error_table(
                l,
                "Lua redis lib command arguments must be strings or integers",
            );
            true
        }
        Some(Err(e)) => {
            ldb::log_call_error(l, &e);
            push_error_table(l, &e);
            mark_error_counted(l);
            true
        }
        Some(Ok(reply)) => {
            convert::push_reply(l, &reply);
            reply.first() == Some(&b'-')
        }
    };
    if raise_errors && is_error {
        ffi::lua_error(l);
    }
    1
}

/// The error table on top was counted in the error statistics already.
unsafe fn mark_error_counted(l: *mut lua_State) {
    ffi::lua_pushboolean(l, 1);
    ffi::lua_setfield(l, -2, c"ignore_error_stats_update".as_ptr());
}

/// `%.17g`, as Redis formats a number passed to `redis.call`.
pub(crate) fn format_g17(d: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL-terminated.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            c"%.17g".as_ptr(),
            d,
        )
    };
    String::from_utf8_lossy(&buf[..(n.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

unsafe extern "C-unwind" fn redis_call(l: *mut lua_State) -> c_int {
    generic_call(l, true)
}

unsafe extern "C-unwind" fn redis_pcall(l: *mut lua_State) -> c_int {
    generic_call(l, false)
}

/// The global `pcall`: as Lua's, but an error that is a Redis error table
/// comes back as its message (scripts written before Redis 7 compare it
/// with strings).
unsafe extern "C-unwind" fn pcall(l: *mut lua_State) -> c_int {
    let argc = ffi::lua_gettop(l);
    if argc < 1 {
        ffi::luaL_argerror(l, 1, c"value expected".as_ptr());
    }
    ffi::lua_pushboolean(l, 1);
    ffi::lua_insert(l, 1);
    if ffi::lua_pcall(l, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
        ffi::lua_remove(l, 1);
        if ffi::lua_istable(l, -1) != 0 {
            ffi::lua_getfield(l, -1, c"err".as_ptr());
            if ffi::lua_isstring(l, -1) != 0 {
                ffi::lua_replace(l, -2);
            }
        }
        ffi::lua_pushboolean(l, 0);
        ffi::lua_insert(l, 1);
    }
    ffi::lua_gettop(l)
}

/// `unpack` as Redis patched it: Lua 5.1's counts the results in an `int`
/// that overflows for a huge range (and then writes past the stack).
unsafe extern "C-unwind" fn unpack(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    let mut i = ffi::luaL_optinteger(l, 2, 1) as c_int;
    let e = if ffi::lua_isnoneornil(l, 3) != 0 {
        ffi::lua_objlen(l, 1) as c_int
    } else {
        ffi::luaL_checkinteger(l, 3) as c_int
    };
    if i > e {
        return 0;
    }
    let n = (e as u32).wrapping_sub(i as u32);
    if n >= c_int::MAX as u32 || ffi::lua_checkstack(l, (n + 1) as c_int) == 0 {
        return ffi::luaL_error(l, c"too many results to unpack".as_ptr());
    }
    ffi::lua_rawgeti(l, 1, i as _);
    while i < e {
        i += 1;
        ffi::lua_rawgeti(l, 1, i as _);
    }
    (n + 1) as c_int
}

unsafe extern "C-unwind" fn redis_sha1hex(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 {
        raise(l, "wrong number of arguments");
    }
    let digest = crate::util::sha1_hex(to_bytes(l, 1).unwrap_or_default());
    ffi::lua_pushlstring(l, digest.as_ptr() as *const c_char, digest.len());
    1
}

/// `redis.error_reply(msg)`: `{err=msg}` (with a code, `ERR` by default).
unsafe extern "C-unwind" fn redis_error_reply(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 || ffi::lua_type(l, -1) != ffi::LUA_TSTRING {
        push_error_table(l, "wrong number or type of arguments");
        return 1;
    }
    let msg = to_string_lossy(l, -1);
    if msg.starts_with('-') {
        push_error_table(l, &msg);
    } else {
        push_error_table(l, &format!("-{msg}"));
    }
    1
}

/// `redis.status_reply(msg)`: `{ok=msg}`.
unsafe extern "C-unwind" fn redis_status_reply(l: *mut lua_State) -> c_int {
    if ffi::lua_gettop(l) != 1 || ffi::lua_type(l, -1) != ffi::LUA_TSTRING {
        push_error_table(l, "wrong number or type of arguments");
        return 1;
    }
    ffi::lua_createtable(l, 0, 1);
    ffi::lua_pushvalue(l, -2);
    ffi::lua_setfield(l, -2, c"ok".as_ptr());
    1
}

unsafe extern "C-unwind" fn redis_set_repl(l: *mut lua_State) -> c_int {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        raise(
            l,
            "redis.set_repl can only be called inside a script invocation",
        );
    }
    if ffi::lua_gettop(l) != 1 {
        raise(l, "redis.set_repl() requires two arguments.");
    }
    let flags = ffi::lua_tonumber(l, -1) as i32;
    if flags & !(REPL_AOF | REPL_REPLICA) != 0 {
        raise(
            l,
            "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        );
    }
    (*ctx).host.set_repl(flags);
    0
}

unsafe extern "C-unwind" fn redis_setresp(l: *mut lua_State) -> c_int {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        raise(
            l,
            "redis.setresp can only be called inside a script invocation",
        );
    }
    if ffi::lua_gettop(l) != 1 {
        raise(l, "redis.setresp() requires one argument.");
    }
    let resp = ffi::lua_tonumber(l, 1) as i32;
    if resp != 2 && resp != 3 {
        raise(l, "RESP version must be 2 or 3.");
    }
    (*ctx).resp = resp as u8;
    0
}

unsafe extern "C-unwind" fn redis_log(l: *mut lua_State) -> c_int {
    let argc = ffi::lua_gettop(l);
    if argc < 2 {
        raise(l, "redis.log() requires two arguments or more.");
    }
    if ffi::lua_isnumber(l, 1) == 0 {
        raise(l, "First argument must be a number (log level).");
    }
    let level = ffi::lua_tonumber(l, 1) as i32;
    if !(LL_DEBUG..=LL_WARNING).contains(&level) {
        raise(l, "Invalid debug level.");
    }
    let ctx = run_ctx(l);
    let verbosity = if ctx.is_null() { 2 } else { (*ctx).verbosity };
    if level < verbosity {
        return 0;
    }
    let mut text = Vec::new();
    for i in 2..=argc {
        if let Some(b) = to_bytes(l, i) {
            if i != 2 {
                text.push(b' ');
            }
            text.extend_from_slice(b);
        }
    }
    let text = String::from_utf8_lossy(&text);
    match level {
        0 | 1 => tracing::debug!("{text}"),
        2 => tracing::info!("{text}"),
        _ => tracing::warn!("{text}"),
    }
    0
}

unsafe extern "C-unwind" fn redis_replicate_commands(l: *mut lua_State) -> c_int {
    // Scripts always replicate their effects (Redis 7): nothing to turn on.
    ffi::lua_pushboolean(l, 1);
    1
}

unsafe extern "C-unwind" fn redis_acl_check_cmd(l: *mut lua_State) -> c_int {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        raise(
            l,
            "redis.acl_check_cmd can only be called inside a script invocation",
        );
    }
    let argc = ffi::lua_gettop(l);
    if argc == 0 {
        raise(
            l,
            "Please specify at least one argument for this redis lib call",
        );
    }
    let found: Option<Option<bool>> = {
        let mut argv: Vec<Vec<u8>> = Vec::new();
        let mut ok = true;
        for i in 1..=argc {
            if ffi::lua_type(l, i) == ffi::LUA_TNUMBER {
                argv.push(format_g17(ffi::lua_tonumber(l, i)).into_bytes());
            } else if let Some(b) = to_bytes(l, i) {
                argv.push(b.to_vec());
            } else {
                ok = false;
                break;
            }
        }
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        ok.then(|| (*ctx).host.acl_check_cmd(&refs))
    };
    match found {
        None => raise(
            l,
            "Lua redis lib command arguments must be strings or integers",
        ),
        Some(None) => raise(l, "Invalid command passed to redis.acl_check_cmd()"),
        Some(Some(allowed)) => ffi::lua_pushboolean(l, allowed as c_int),
    }
    1
}

/// rand48 (Redis's redisLrand48): the top 31 bits of the next state.
fn lrand48(state: &mut u64) -> i32 {
    *state = (state.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & 0xFFFF_FFFF_FFFF;
    (*state >> 17) as i32
}

/// `math.random`, on rand48 so that every machine draws the same sequence
/// (Lua's own is libc's).
unsafe extern "C-unwind" fn math_random(l: *mut lua_State) -> c_int {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        ffi::luaL_error(
            l,
            c"math.random can only be called inside a script invocation".as_ptr(),
        );
    }
    let max = i32::MAX as f64;
    let r = (lrand48((*ctx).rand) as f64 % max) / max;
    match ffi::lua_gettop(l) {
        0 => ffi::lua_pushnumber(l, r),
        1 => {
            let u = ffi::luaL_checkinteger(l, 1) as i32;
            if u < 1 {
                ffi::luaL_argerror(l, 1, c"interval is empty".as_ptr());
            }
            ffi::lua_pushnumber(l, (r * u as f64).floor() + 1.0);
        }
        2 => {
            let lo = ffi::luaL_checkinteger(l, 1) as i32;
            let hi = ffi::luaL_checkinteger(l, 2) as i32;
            if lo > hi {
                ffi::luaL_argerror(l, 2, c"interval is empty".as_ptr());
            }
            ffi::lua_pushnumber(l, (r * (hi as f64 - lo as f64 + 1.0)).floor() + lo as f64);
        }
        _ => {
            ffi::luaL_error(l, c"wrong number of arguments".as_ptr());
        }
    }
    1
}

unsafe extern "C-unwind" fn math_randomseed(l: *mut lua_State) -> c_int {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        ffi::luaL_error(
            l,
            c"math.randomseed can only be called inside a script invocation".as_ptr(),
        );
    }
    let seed = ffi::luaL_checkinteger(l, 1) as i32;
    *(*ctx).rand = ((seed as u32 as u64) << 16) | 0x330E;
    0
}

// ---- the sandbox ----

/// The table a proxy at `idx` guards, pushed (nil when it is no proxy).
unsafe fn push_guarded(l: *mut lua_State, idx: c_int) {
    let idx = if idx < 0 {
        ffi::lua_gettop(l) + idx + 1
    } else {
        idx
    };
    ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
    ffi::lua_pushvalue(l, idx);
    ffi::lua_rawget(l, -2);
    ffi::lua_remove(l, -2);
}

/// Is the value at `idx` a read-only proxy?
unsafe fn is_protected(l: *mut lua_State, idx: c_int) -> bool {
    if ffi::lua_type(l, idx) != ffi::LUA_TTABLE {
        return false;
    }
    push_guarded(l, idx);
    let yes = ffi::lua_type(l, -1) != ffi::LUA_TNIL;
    ffi::lua_pop(l, 1);
    yes
}

/// `__newindex` of a proxy: writes are refused, naming the script's line
/// as Redis's patched VM does.
pub(crate) unsafe extern "C-unwind" fn readonly_newindex(l: *mut lua_State) -> c_int {
    ffi::luaL_where(l, 1);
    ffi::lua_pushstring(l, c"Attempt to modify a readonly table".as_ptr());
    ffi::lua_concat(l, 2);
    ffi::lua_error(l)
}

/// `__index` of the real globals: reading a name that is not there is an
/// error in a script (with the script's line, as Redis's `luaL_error`).
pub(crate) unsafe extern "C-unwind" fn missing_global(l: *mut lua_State) -> c_int {
    {
        let name = if ffi::lua_isstring(l, 2) != 0 {
            to_string_lossy(l, 2)
        } else {
            String::new()
        };
        let msg = format!("Script attempted to access nonexistent global variable '{name}'");
        // Copied onto the Lua stack; both strings go before raising.
        ffi::luaL_where(l, 1);
        ffi::lua_pushlstring(l, msg.as_ptr() as *const c_char, msg.len());
        ffi::lua_concat(l, 2);
    }
    ffi::lua_error(l)
}

/// Raise the read-only error without a position (as a C function of
/// Redis's patched Lua does).
unsafe fn refuse_readonly(l: *mut lua_State) -> ! {
    ffi::lua_pushstring(l, c"Attempt to modify a readonly table".as_ptr());
    ffi::lua_error(l)
}

unsafe extern "C-unwind" fn sandbox_rawset(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::luaL_checkany(l, 3);
    if is_protected(l, 1) {
        refuse_readonly(l);
    }
    ffi::lua_settop(l, 3);
    ffi::lua_rawset(l, 1);
    1
}

unsafe extern "C-unwind" fn sandbox_rawget(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::luaL_checkany(l, 2);
    ffi::lua_settop(l, 2);
    if is_protected(l, 1) {
        push_guarded(l, 1);
        ffi::lua_replace(l, 1);
    }
    ffi::lua_rawget(l, 1);
    1
}

unsafe extern "C-unwind" fn sandbox_setmetatable(l: *mut lua_State) -> c_int {
    let t = ffi::lua_type(l, 2);
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    if t != ffi::LUA_TNIL && t != ffi::LUA_TTABLE {
        ffi::luaL_argerror(l, 2, c"nil or table expected".as_ptr());
    }
    if is_protected(l, 1) {
        refuse_readonly(l);
    }
    if ffi::luaL_getmetafield(l, 1, c"__metatable".as_ptr()) != 0 {
        ffi::luaL_error(l, c"cannot change a protected metatable".as_ptr());
    }
    ffi::lua_settop(l, 2);
    ffi::lua_setmetatable(l, 1);
    1
}

/// Registry key of what `getmetatable` answers for the globals and strings.
const METATABLE_VIEWS: &CStr = c"__kvstore_metatable_views";

/// `getmetatable`: a read-only view never shows its metatable (which
/// leads to what it guards); the globals show a read-only stand-in, as
/// Redis's read-only globals show theirs; a string shows a read-only view
/// of the strings' metatable.
unsafe extern "C-unwind" fn sandbox_getmetatable(l: *mut lua_State) -> c_int {
    ffi::luaL_checkany(l, 1);
    ffi::lua_settop(l, 1);
    if ffi::lua_type(l, 1) == ffi::LUA_TSTRING {
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, METATABLE_VIEWS.as_ptr());
        ffi::lua_getfield(l, -1, c"string".as_ptr());
        return 1;
    }
    if is_protected(l, 1) {
        if ffi::lua_rawequal(l, 1, ffi::LUA_GLOBALSINDEX) != 0 {
            ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, METATABLE_VIEWS.as_ptr());
            ffi::lua_getfield(l, -1, c"globals".as_ptr());
        } else {
            ffi::lua_pushnil(l);
        }
        return 1;
    }
    if ffi::lua_getmetatable(l, 1) == 0 {
        ffi::lua_pushnil(l);
        return 1;
    }
    // As Lua's own: a __metatable field stands in for the metatable.
    ffi::luaL_getmetafield(l, 1, c"__metatable".as_ptr());
    1
}

/// `next` and `pairs` walk what a proxy guards.
unsafe extern "C-unwind" fn sandbox_next(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::lua_settop(l, 2);
    if is_protected(l, 1) {
        push_guarded(l, 1);
        ffi::lua_replace(l, 1);
    }
    if ffi::lua_next(l, 1) != 0 {
        2
    } else {
        ffi::lua_pushnil(l);
        1
    }
}

unsafe extern "C-unwind" fn sandbox_pairs(l: *mut lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    ffi::lua_pushcfunction(l, sandbox_next);
    ffi::lua_pushvalue(l, 1);
    ffi::lua_pushnil(l);
    3
}

/// Set `t[name] = f` for the table on top.
unsafe fn set_fn(l: *mut lua_State, name: &CStr, f: ffi::lua_CFunction) {
    ffi::lua_pushcfunction(l, f);
    ffi::lua_setfield(l, -2, name.as_ptr());
}

unsafe fn set_num(l: *mut lua_State, name: &CStr, n: f64) {
    ffi::lua_pushnumber(l, n);
    ffi::lua_setfield(l, -2, name.as_ptr());
}

/// The error handler every script runs under (Redis's
/// `__redis__err__handler`): turn what was raised into `{err=…}` and note
/// the script line that raised it (the caller's, when a C function did).
const ERR_HANDLER_CODE: &str = r#"
local dbg = debug
return function(err)
  local i = dbg.getinfo(2, 'nSl')
  if i and i.what == 'C' then
    i = dbg.getinfo(3, 'nSl')
  end
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end
"#;

/// Make the read-only views (run with the real globals, before they are
/// replaced): every library table and the globals themselves.
const SANDBOX_CODE: &str = r#"
local G, protected, ro_newindex, missing, getmetatable_of, smt = ...
-- A read-only view of t. Its metatable is never handed to scripts (the
-- sandbox's getmetatable answers for views), so t cannot be reached.
local function view(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_newindex, __metatable = false})
  protected[p] = t
  return p
end
-- Redis's patched Lua parses every chunk as text: a precompiled (binary)
-- chunk is a syntax error, never loaded. The stock Lua here would load
-- it, so a chunk starting with the signature byte is parsed as text with
-- a space before it, which fails with the same message.
local real_loadstring, real_load = loadstring, load
G.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then
    return real_loadstring(' ' .. s, name or s)
  end
  return real_loadstring(s, name)
end
G.load = function(f, name)
  if type(f) ~= 'function' then return real_load(f, name) end
  local first = f()
  if type(first) == 'string' and first:byte(1) == 27 then
    first = ' ' .. first
  end
  local given = false
  return real_load(function()
    if not given then given = true; return first end
    return f()
  end, name)
end
for _, name in ipairs({'redis', 'string', 'math', 'table', 'coroutine', 'bit', 'cjson', 'cmsgpack', 'struct'}) do
  G[name] = view(G[name])
end
smt.__index = G.string
setmetatable(G, {__index = missing})
local globals = view(G)
G._G = globals
-- What getmetatable shows: for the globals, a read-only table like the
-- one Redis's globals have; for a string, a read-only view of the
-- strings' metatable (whose __index is the read-only string library).
getmetatable_of.globals = view({__index = missing})
getmetatable_of.string = view(smt)
return globals
"#;

/// `lua-enable-deprecated-api`, read by every interpreter made after it is
/// set (the option is fixed at startup).
static DEPRECATED_API: AtomicBool = AtomicBool::new(false);

/// Offer scripts (and functions) `setfenv`, `getfenv` and `newproxy` in the
/// interpreters made from now on. Redis withholds them by default
/// (CVE-2025-46818): a `__gc` handler on a `newproxy` object is code a
/// script leaves behind that runs later, inside whichever script the
/// collector happens to run in, as that script's user.
pub fn offer_deprecated_api(offer: bool) {
    DEPRECATED_API.store(offer, Ordering::Relaxed);
}

/// A fresh interpreter with Redis's libraries, `redis` API and sandbox.
///
/// # Safety
/// Called once per engine, on the loop thread.
unsafe fn new_state() -> *mut lua_State {
    let l = ffi::luaL_newstate();
    assert!(!l.is_null(), "out of memory creating the Lua interpreter");
    for (name, open) in [
        (c"", ffi::luaopen_base as ffi::lua_CFunction),
        (c"table", ffi::luaopen_table),
        (c"string", ffi::luaopen_string),
        (c"math", ffi::luaopen_math),
        (c"debug", ffi::luaopen_debug),
    ] {
        ffi::lua_pushcfunction(l, open);
        ffi::lua_pushstring(l, name.as_ptr());
        ffi::lua_call(l, 1, 0);
    }
    // Not offered to scripts (Redis's deny list), nor, unless
    // `lua-enable-deprecated-api` says so, Redis's deprecated builtins.
    let deprecated: &[&CStr] = if DEPRECATED_API.load(Ordering::Relaxed) {
        &[]
    } else {
        &[c"setfenv", c"getfenv", c"newproxy"]
    };
    for name in [c"print", c"dofile", c"loadfile"].iter().chain(deprecated) {
        ffi::lua_pushnil(l);
        ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, name.as_ptr());
    }
    ffi::lua_pushcfunction(l, pcall);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"pcall".as_ptr());
    ffi::lua_pushcfunction(l, unpack);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"unpack".as_ptr());
    for (name, f) in [
        (c"rawset", sandbox_rawset as ffi::lua_CFunction),
        (c"rawget", sandbox_rawget),
        (c"setmetatable", sandbox_setmetatable),
        (c"getmetatable", sandbox_getmetatable),
        (c"next", sandbox_next),
        (c"pairs", sandbox_pairs),
    ] {
        ffi::lua_pushcfunction(l, f);
        ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, name.as_ptr());
    }

    // The redis table.
    ffi::lua_createtable(l, 0, 32);
    set_fn(l, c"call", redis_call);
    set_fn(l, c"pcall", redis_pcall);
    set_fn(l, c"log", redis_log);
    set_num(l, c"LOG_DEBUG", 0.0);
    set_num(l, c"LOG_VERBOSE", 1.0);
    set_num(l, c"LOG_NOTICE", 2.0);
    set_num(l, c"LOG_WARNING", 3.0);
    set_num(l, c"REDIS_VERSION_NUM", crate::REDIS_VERSION_NUM as f64);
    let version = format!("{}\0", crate::REDIS_VERSION);
    ffi::lua_pushstring(l, version.as_ptr() as *const c_char);
    ffi::lua_setfield(l, -2, c"REDIS_VERSION".as_ptr());
    set_fn(l, c"setresp", redis_setresp);
    set_fn(l, c"sha1hex", redis_sha1hex);
    set_fn(l, c"error_reply", redis_error_reply);
    set_fn(l, c"status_reply", redis_status_reply);
    set_fn(l, c"set_repl", redis_set_repl);
    set_num(l, c"REPL_NONE", 0.0);
    set_num(l, c"REPL_AOF", REPL_AOF as f64);
    set_num(l, c"REPL_SLAVE", REPL_REPLICA as f64);
    set_num(l, c"REPL_REPLICA", REPL_REPLICA as f64);
    set_num(l, c"REPL_ALL", (REPL_AOF | REPL_REPLICA) as f64);
    set_fn(l, c"acl_check_cmd", redis_acl_check_cmd);
    set_fn(l, c"breakpoint", ldb::redis_breakpoint);
    set_fn(l, c"debug", ldb::redis_debug);
    set_fn(l, c"replicate_commands", redis_replicate_commands);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());

    bit::open(l);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"bit".as_ptr());
    cjson::open(l);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"cjson".as_ptr());
    cmsgpack::open(l);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"cmsgpack".as_ptr());
    structlib::open(l);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"struct".as_ptr());

    ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c"math".as_ptr());
    set_fn(l, c"random", math_random);
    set_fn(l, c"randomseed", math_randomseed);
    ffi::lua_pop(l, 1);

    // The error handler keeps `debug` to itself.
    run_setup(l, ERR_HANDLER_CODE, c"@err_handler_def", 0, 1);
    ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, ERR_HANDLER.as_ptr());
    ffi::lua_pushnil(l);
    ffi::lua_setfield(l, ffi::LUA_GLOBALSINDEX, c"debug".as_ptr());

    // The sandbox: read-only views, and the globals scripts see.
    ffi::lua_newtable(l);
    ffi::lua_pushvalue(l, -1);
    ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
    ffi::lua_pushvalue(l, ffi::LUA_GLOBALSINDEX);
    ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, REAL_GLOBALS.as_ptr());
    ffi::lua_pushvalue(l, ffi::LUA_GLOBALSINDEX);
    ffi::lua_insert(l, -2); // G, protected
    ffi::lua_pushcfunction(l, readonly_newindex);
    ffi::lua_pushcfunction(l, missing_global);
    ffi::lua_newtable(l);
    ffi::lua_pushvalue(l, -1);
    ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, METATABLE_VIEWS.as_ptr());
    // The strings' metatable (the sandbox's getmetatable hides it).
    ffi::lua_pushstring(l, c"".as_ptr());
    ffi::lua_getmetatable(l, -1);
    ffi::lua_remove(l, -2);
    run_setup(l, SANDBOX_CODE, c"@sandbox_def", 6, 1);
    // From now on code compiled here sees the read-only globals.
    ffi::lua_replace(l, ffi::LUA_GLOBALSINDEX);
    l
}

/// Compile and run a setup chunk with `nargs` arguments on the stack.
///
/// # Safety
/// `l` is a fresh state being set up; the code is ours and cannot fail.
pub(crate) unsafe fn run_setup(
    l: *mut lua_State,
    code: &str,
    name: &CStr,
    nargs: c_int,
    nresults: c_int,
) {
    let status = ffi::luaL_loadbuffer(l, code.as_ptr() as *const c_char, code.len(), name.as_ptr());
    assert_eq!(status, 0, "the built-in Lua setup code compiles");
    ffi::lua_insert(l, -(nargs + 1));
    let status = ffi::lua_pcall(l, nargs, nresults, 0);
    assert_eq!(
        status,
        0,
        "the built-in Lua setup code runs: {}",
        to_string_lossy(l, -1)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::reply::Proto;

    /// A host that answers every command with `reply`, noting what ran.
    struct FakeHost {
        reply: Result<Vec<u8>, String>,
        calls: Vec<Vec<Vec<u8>>>,
        stop: bool,
    }

    impl Host for FakeHost {
        fn call(&mut self, argv: &[&[u8]], _resp: u8) -> Result<Vec<u8>, String> {
            self.calls.push(argv.iter().map(|a| a.to_vec()).collect());
            self.reply.clone()
        }
        fn set_repl(&mut self, _flags: i32) {}
        fn acl_check_cmd(&self, argv: &[&[u8]]) -> Option<bool> {
            (argv[0] == b"get").then_some(true)
        }
        fn interrupt(&mut self) -> Option<&'static str> {
            self.stop
                .then_some("Script killed: the server is shutting down")
        }
    }

    fn eval_with(engine: &mut Engine, body: &str, reply: &[u8], keys: &[&[u8]]) -> String {
        let mut host = FakeHost {
            reply: Ok(reply.to_vec()),
            calls: Vec::new(),
            stop: false,
        };
        let mut out = Reply::new(Proto::Resp2);
        match engine.create(body.as_bytes()) {
            Ok(sha) => engine.run(
                &sha,
                keys,
                &[b"a1"],
                RunOptions {
                    verbosity: 2,
                    slow_after: None,
                },
                &mut host,
                &mut out,
                None,
            ),
            Err(e) => out.error(&e),
        }
        String::from_utf8(out.take_bytes()).unwrap()
    }

    fn eval(body: &str) -> String {
        eval_with(&mut Engine::new(), body, b"+OK\r\n", &[b"k1"])
    }

    #[test]
    fn values_convert_as_in_redis() {
        assert_eq!(eval("return 1"), ":1\r\n");
        assert_eq!(eval("return 3.99"), ":3\r\n");
        assert_eq!(eval("return 'x'"), "$1\r\nx\r\n");
        assert_eq!(eval("return true"), ":1\r\n");
        assert_eq!(eval("return false"), "$-1\r\n");
        assert_eq!(eval("return nil"), "$-1\r\n");
        assert_eq!(
            eval("return {1, 'a', {2}, nil, 5}"),
            "*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n"
        );
        assert_eq!(eval("return {ok='fine'}"), "+fine\r\n");
        assert_eq!(eval("return {err='My Error'}"), "-My Error\r\n");
        assert_eq!(eval("return redis.error_reply('oops')"), "-ERR oops\r\n");
        assert_eq!(eval("return redis.status_reply('FINE')"), "+FINE\r\n");
        assert_eq!(eval("return KEYS[1] .. ARGV[1]"), "$4\r\nk1a1\r\n");
        assert_eq!(eval("return redis.call('set', 'k', 1.5)"), "+OK\r\n");
        assert_eq!(
            eval("return redis.sha1hex('')"),
            "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"
        );
        assert_eq!(eval("return tostring(math.random(10))"), "$1\r\n4\r\n");
    }

    #[test]
    fn errors_name_the_script_and_line() {
        let sha = crate::util::sha1_hex(b"local a = 1\nx = 1");
        assert_eq!(
            eval("local a = 1\nx = 1"),
            format!("-ERR user_script:2: Attempt to modify a readonly table script: {sha}, on @user_script:2.\r\n")
        );
        let sha = crate::util::sha1_hex(b"return y");
        assert_eq!(
            eval("return y"),
            format!("-ERR user_script:1: Script attempted to access nonexistent global variable 'y' script: {sha}, on @user_script:1.\r\n")
        );
        for body in [
            "redis.call = 1",
            "string.len = nil",
            "setmetatable(_G, {})",
            "rawset(_G, 'a', 1)",
            "getmetatable(_G).__index = {}",
            "_G.x = 1",
            "getmetatable('').__index.x = 1",
        ] {
            let got = eval(body);
            assert!(
                got.contains("Attempt to modify a readonly table"),
                "{body}: {got}"
            );
        }
        assert!(eval("print('x')").contains("nonexistent global variable 'print'"));
        assert!(eval("return debug").contains("nonexistent global variable 'debug'"));
        assert!(eval("return loadfile").contains("nonexistent global variable 'loadfile'"));
        assert_eq!(
            eval("return x ="),
            "-ERR Error compiling script (new function): user_script:1: '<eof>' expected near '='\r\n"
        );
    }

    #[test]
    fn command_errors_raise_or_return() {
        let mut e = Engine::new();
        let err = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        let sha = crate::util::sha1_hex(b"return redis.call('get', 'k')");
        assert_eq!(
            eval_with(&mut e, "return redis.call('get', 'k')", err, &[]),
            format!("-WRONGTYPE Operation against a key holding the wrong kind of value script: {sha}, on @user_script:1.\r\n")
        );
        assert_eq!(
            eval_with(
                &mut e,
                "local r = redis.pcall('get', 'k'); return r['err']",
                err,
                &[]
            ),
            "$65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
        assert_eq!(
            eval_with(&mut e, "local ok, m = pcall(redis.call, 'get', 'k'); return {tostring(ok), m}", err, &[]),
            "*2\r\n$5\r\nfalse\r\n$65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n"
        );
        assert!(eval_with(&mut e, "return redis.call({})", b"+OK\r\n", &[])
            .contains("Lua redis lib command arguments must be strings or integers"));
        assert_eq!(
            eval_with(
                &mut e,
                "return redis.call('get', 'k')",
                b"*2\r\n$1\r\na\r\n$-1\r\n",
                &[]
            ),
            "*2\r\n$1\r\na\r\n$-1\r\n"
        );
        assert_eq!(
            eval_with(
                &mut e,
                "redis.setresp(3); local m = redis.call('x').map; return m.a",
                b"%1\r\n$1\r\na\r\n:7\r\n",
                &[]
            ),
            ":7\r\n"
        );
    }

    #[test]
    fn shebangs_are_parsed_as_redis_does() {
        assert!(parse_shebang(b"return 1").unwrap().0.compat);
        let (f, len) = parse_shebang(b"#!lua flags=no-writes,allow-stale\nreturn 1").unwrap();
        assert!(!f.compat && f.no_writes && f.allow_stale && !f.allow_oom);
        assert_eq!(len, 33);
        assert_eq!(parse_shebang(b"#!lua\nreturn 1").unwrap().1, 5);
        assert_eq!(
            parse_shebang(b"#!lua").unwrap_err(),
            "ERR Invalid script shebang"
        );
        assert_eq!(
            parse_shebang(b"#!python\n").unwrap_err(),
            "ERR Unexpected engine in script shebang: #!python"
        );
        assert_eq!(
            parse_shebang(b"#!lua flags=bad\n").unwrap_err(),
            "ERR Unexpected flag in script shebang: bad"
        );
        assert_eq!(
            parse_shebang(b"#!lua name=x\n").unwrap_err(),
            "ERR Unknown lua shebang option: name=x"
        );
    }

    #[test]
    fn a_slow_script_stops_when_the_server_must() {
        let mut engine = Engine::new();
        let body = b"local n = 0; while true do pcall(function() n = n + 1 end) end";
        let sha = engine.create(body).unwrap();
        let mut host = FakeHost {
            reply: Ok(b"+OK\r\n".to_vec()),
            calls: Vec::new(),
            stop: true,
        };
        let mut out = Reply::new(Proto::Resp2);
        let options = RunOptions {
            verbosity: 2,
            slow_after: Some(std::time::Duration::from_millis(20)),
        };
        engine.run(&sha, &[], &[], options, &mut host, &mut out, None);
        let got = String::from_utf8(out.take_bytes()).unwrap();
        assert!(
            got.starts_with("-ERR Script killed: the server is shutting down"),
            "{got}"
        );
        // The interpreter is fine afterwards.
        let sha = engine.create(b"return 7").unwrap();
        engine.run(&sha, &[], &[], options, &mut host, &mut out, None);
        assert_eq!(out.take_bytes(), b":7\r\n");
    }

    #[test]
    fn bit_operations_are_luabitop() {
        assert_eq!(eval("return bit.band(0xff, 0x0f)"), ":15\r\n");
        assert_eq!(eval("return bit.bor(1, 2, 4)"), ":7\r\n");
        assert_eq!(eval("return bit.bxor(5, 3)"), ":6\r\n");
        assert_eq!(eval("return bit.bnot(0)"), ":-1\r\n");
        assert_eq!(eval("return bit.tobit(0xffffffff)"), ":-1\r\n");
        assert_eq!(eval("return bit.lshift(1, 31)"), ":-2147483648\r\n");
        assert_eq!(eval("return bit.rshift(-1, 28)"), ":15\r\n");
        assert_eq!(eval("return bit.arshift(-256, 4)"), ":-16\r\n");
        assert_eq!(
            eval("return bit.rol(0x12345678, 8)"),
            format!(":{}\r\n", 0x34567812)
        );
        assert_eq!(
            eval("return bit.ror(0x12345678, 8)"),
            format!(":{}\r\n", 0x78123456)
        );
        assert_eq!(
            eval("return bit.bswap(0x12345678)"),
            format!(":{}\r\n", 0x78563412)
        );
        assert_eq!(eval("return bit.tohex(255)"), "$8\r\n000000ff\r\n");
        assert_eq!(eval("return bit.tohex(-1, -4)"), "$4\r\nFFFF\r\n");
        assert!(eval("return bit.band('x')")
            .contains("bad argument #1 to 'band' (number expected, got string)"));
        assert!(eval("bit.band = nil").contains("Attempt to modify a readonly table"));
    }

    #[test]
    fn rand48_matches_redis() {
        // Redis's rand48 from its starting state (X0..X2 = 0x330E, 0xABCD,
        // 0x1234): the classic drand48 sequence.
        let mut s = RAND48_INIT;
        let first: Vec<i32> = (0..3).map(|_| lrand48(&mut s)).collect();
        assert_eq!(first, [851401618, 1804928587, 758783491]);
    }
}
