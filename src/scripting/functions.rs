//! Redis 7.0 functions: libraries loaded with FUNCTION LOAD, whose code
//! registers named functions (`redis.register_function`) that FCALL runs
//! (Redis's functions.c and function_lua.c).
//!
//! Functions have an interpreter of their own (an [`Engine`], so the same
//! sandbox, `redis.*` API and libraries). A library's code sees other
//! globals while it loads: only `redis`, with `register_function`, `log`
//! and the version; a function it registers sees the ordinary ones when it
//! runs. Both come from one read-only globals table whose lookups are
//! switched between the two. A registered function is kept by registry
//! reference; FCALL calls it with the keys and arguments as its two
//! parameters.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int};

use ffi::lua_State;
use mlua_sys as ffi;

use super::{
    missing_global, push_error_table, readonly_newindex, run_setup, to_bytes, to_string_lossy,
    CallStyle, Engine, Host, RunOptions, ScriptFlags, PROTECTED, REAL_GLOBALS,
};
use crate::protocol::reply::Reply;

/// A function a library registered.
#[derive(Debug)]
pub struct Function {
    pub name: String,
    pub description: Option<Vec<u8>>,
    pub flags: ScriptFlags,
    func: c_int,
}

/// A loaded library.
#[derive(Debug)]
pub struct Library {
    pub name: String,
    /// The code as given to FUNCTION LOAD, shebang included.
    pub code: Vec<u8>,
    pub functions: Vec<Function>,
}

/// The functions engine: the interpreter and the libraries in it.
pub struct Functions {
    engine: Engine,
    libraries: BTreeMap<String, Library>,
    /// Function name, lowercased (function names are case-insensitive, as
    /// in Redis) → its library.
    index: HashMap<String, String>,
    /// Registry references: the globals' metatable, what it reads through
    /// to while a library loads and while a function runs.
    meta: c_int,
    load_globals: c_int,
    run_globals: c_int,
    /// The globals table functions are compiled with.
    globals: c_int,
}

/// How long FUNCTION LOAD may run a library's code.
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

thread_local! {
    /// The library being loaded: where `redis.register_function` puts
    /// what it registers (null outside FUNCTION LOAD).
    static LOADING: std::cell::Cell<*mut Loading> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

struct Loading {
    started: std::time::Instant,
    registered: Vec<Function>,
}

const FUNCTIONS_SETUP: &str = r#"
local ro_newindex, missing, register_function, log, protected = ...
local P = _G
local function view(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_newindex, __metatable = false})
  protected[p] = t
  return p
end
local lr = {register_function = register_function, log = log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = P.redis.REDIS_VERSION, REDIS_VERSION_NUM = P.redis.REDIS_VERSION_NUM}
setmetatable(lr, {__index = missing})
local lg = {redis = view(lr)}
setmetatable(lg, {__index = missing})
local meta = {__index = P, __newindex = ro_newindex, __metatable = false}
local F = setmetatable({}, meta)
protected[F] = P
return F, meta, view(lg), P
"#;

impl Functions {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Functions {
        let engine = Engine::new();
        let l = engine.lua();
        // SAFETY: the engine's fresh state, set up here once.
        let (globals, meta, load_globals, run_globals) = unsafe {
            // The debugger's entry points are EVAL's alone (Redis sets
            // them up for the eval engine only): removed from the `redis`
            // table itself, which the protected table maps its view to.
            ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
            ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, REAL_GLOBALS.as_ptr());
            ffi::lua_getfield(l, -1, c"redis".as_ptr());
            ffi::lua_rawget(l, -3);
            for name in [c"breakpoint", c"debug"] {
                ffi::lua_pushstring(l, name.as_ptr());
                ffi::lua_pushnil(l);
                ffi::lua_rawset(l, -3);
            }
            ffi::lua_pop(l, 3);
            ffi::lua_pushcfunction(l, readonly_newindex);
            ffi::lua_pushcfunction(l, missing_global);
            ffi::lua_pushcfunction(l, register_function);
            ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
            ffi::lua_getfield(l, -1, c"log".as_ptr());
            ffi::lua_remove(l, -2);
            ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
            run_setup(l, FUNCTIONS_SETUP, c"@functions_def", 5, 4);
            let run_globals = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            let load_globals = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            let meta = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            let globals = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
            (globals, meta, load_globals, run_globals)
        };
        Functions {
            engine,
            libraries: BTreeMap::new(),
            index: HashMap::new(),
            meta,
            load_globals,
            run_globals,
            globals,
        }
    }

    /// What stands in while a function runs (see `Engine::placeholder`).
    pub fn placeholder() -> Functions {
        Functions {
            engine: Engine::placeholder(),
            libraries: BTreeMap::new(),
            index: HashMap::new(),
            meta: 0,
            load_globals: 0,
            run_globals: 0,
            globals: 0,
        }
    }

    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    pub fn library_count(&self) -> usize {
        self.libraries.len()
    }

    pub fn function_count(&self) -> usize {
        self.index.len()
    }

    /// Memory of the interpreter.
    pub fn memory(&self) -> usize {
        self.engine.memory()
    }

    /// Bytes of the libraries' bookkeeping outside the interpreter: their
    /// code and the function index (MEMORY STATS `functions.caches`).
    pub fn caches_memory(&self) -> usize {
        self.libraries
            .iter()
            .map(|(name, l)| name.len() + l.code.len())
            .sum::<usize>()
            + self
                .index
                .iter()
                .map(|(f, l)| f.len() + l.len())
                .sum::<usize>()
    }

    /// The code of every library, for DUMP, the RDB and the AOF.
    pub fn codes(&self) -> Vec<Vec<u8>> {
        self.libraries.values().map(|l| l.code.clone()).collect()
    }

    /// The function `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Function> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let lib = self.index.get(&name)?;
        self.libraries
            .get(lib)?
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&name))
    }

    /// FUNCTION FLUSH: a fresh interpreter, no libraries.
    pub fn flush(&mut self) {
        *self = Functions::new();
    }

    /// FUNCTION DELETE.
    pub fn delete(&mut self, name: &[u8]) -> Result<(), String> {
        let name = String::from_utf8_lossy(name).into_owned();
        let Some(lib) = self.libraries.remove(&name) else {
            return Err("ERR Library not found".into());
        };
        self.unlink(lib);
        Ok(())
    }

    fn unlink(&mut self, lib: Library) {
        for f in lib.functions {
            self.index.remove(&f.name.to_ascii_lowercase());
            // SAFETY: the reference is ours, made when the library loaded.
            unsafe { ffi::luaL_unref(self.engine.lua(), ffi::LUA_REGISTRYINDEX, f.func) };
        }
    }

    /// FUNCTION LOAD [REPLACE] code: the library's name, or Redis's error.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let meta = parse_metadata(code)?;
        if !valid_name(&meta.name) {
            return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
        }
        if !meta.engine.eq_ignore_ascii_case("lua") {
            return Err(format!("ERR Engine '{}' not found", meta.engine));
        }
        if self.libraries.contains_key(&meta.name) && !replace {
            return Err(format!("ERR Library '{}' already exists", meta.name));
        }
        let registered = self.run_library(&super::text_chunk(&code[meta.code_start..]))?;
        let release = |this: &mut Functions, fs: Vec<Function>| {
            for f in fs {
                // SAFETY: references made by this load.
                unsafe { ffi::luaL_unref(this.engine.lua(), ffi::LUA_REGISTRYINDEX, f.func) };
            }
        };
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        if let Some(f) = registered.iter().find(|f| {
            self.index
                .get(&f.name.to_ascii_lowercase())
                .is_some_and(|lib| *lib != meta.name)
        }) {
            let err = format!("ERR Function {} already exists", f.name);
            release(self, registered);
            return Err(err);
        }
        if let Some(old) = self.libraries.remove(&meta.name) {
            self.unlink(old);
        }
        for f in &registered {
            self.index
                .insert(f.name.to_ascii_lowercase(), meta.name.clone());
        }
        self.libraries.insert(
            meta.name.clone(),
            Library {
                name: meta.name.clone(),
                code: code.to_vec(),
                functions: registered,
            },
        );
        Ok(meta.name)
    }

    /// Compile and run a library's code with the load-time globals; what
    /// it registered.
    fn run_library(&mut self, code: &[u8]) -> Result<Vec<Function>, String> {
        let l = self.engine.lua();
        let mut loading = Loading {
            started: std::time::Instant::now(),
            registered: Vec::new(),
        };
        // SAFETY: the state is ours; `loading` outlives the run and the
        // thread-local pointer to it is cleared before it goes.
        let result = unsafe {
            self.set_globals_view(self.load_globals);
            let mut result = Ok(());
            if ffi::luaL_loadbuffer(
                l,
                code.as_ptr() as *const c_char,
                code.len(),
                c"@user_function".as_ptr(),
            ) != 0
            {
                result = Err(format!(
                    "ERR Error compiling function: {}",
                    to_string_lossy(l, -1)
                ));
                ffi::lua_pop(l, 1);
            } else {
                ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, self.globals as ffi::lua_Integer);
                ffi::lua_setfenv(l, -2);
                let ptr: *mut Loading = &mut loading;
                LOADING.with(|c| c.set(ptr));
                ffi::lua_sethook(l, Some(load_hook), ffi::LUA_MASKCOUNT, 100_000);
                if ffi::lua_pcall(l, 0, 0, 0) != 0 {
                    result = Err(format!(
                        "ERR Error registering functions: {}",
                        error_message(l)
                    ));
                    ffi::lua_pop(l, 1);
                }
                ffi::lua_sethook(l, None, 0, 0);
                LOADING.with(|c| c.set(std::ptr::null_mut()));
            }
            self.set_globals_view(self.run_globals);
            result
        };
        match result {
            Ok(()) => Ok(loading.registered),
            Err(e) => {
                for f in loading.registered {
                    // SAFETY: references made by this load.
                    unsafe { ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, f.func) };
                }
                Err(e)
            }
        }
    }

    /// Make the functions' globals read through to the table at `view`.
    unsafe fn set_globals_view(&self, view: c_int) {
        let l = self.engine.lua();
        ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, self.meta as ffi::lua_Integer);
        ffi::lua_pushstring(l, c"__index".as_ptr());
        ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, view as ffi::lua_Integer);
        ffi::lua_rawset(l, -3);
        ffi::lua_pop(l, 1);
    }

    /// FCALL: run function `name` (it exists: see `get`).
    pub fn call(
        &mut self,
        name: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        options: RunOptions,
        host: &mut dyn Host,
        out: &mut Reply,
    ) {
        let Some(func) = self.get(name.as_bytes()).map(|f| f.func) else {
            return out.error("ERR Function not found");
        };
        self.engine.invoke(
            func,
            name,
            CallStyle::Function,
            keys,
            args,
            options,
            host,
            out,
            None,
        );
    }

    /// FUNCTION RESTORE: add the libraries in `codes` (FLUSH: instead of
    /// the current ones; REPLACE: replacing those of the same names),
    /// all or none.
    pub fn restore(&mut self, codes: &[Vec<u8>], policy: RestorePolicy) -> Result<(), String> {
        // Each library must load on its own and with the others restored.
        let mut trial = Functions::new();
        for code in codes {
            trial.load(code, false)?;
        }
        match policy {
            RestorePolicy::Flush => {
                *self = trial;
                Ok(())
            }
            RestorePolicy::Append | RestorePolicy::Replace => {
                let replace = policy == RestorePolicy::Replace;
                for lib in trial.libraries.values() {
                    if !replace && self.libraries.contains_key(&lib.name) {
                        return Err(format!("ERR Library {} already exists", lib.name));
                    }
                    for f in &lib.functions {
                        if self
                            .index
                            .get(&f.name.to_ascii_lowercase())
                            .is_some_and(|l| *l != lib.name || !replace)
                        {
                            return Err(format!("ERR Function {} already exists", f.name));
                        }
                    }
                }
                for lib in trial.libraries.values() {
                    self.load(&lib.code, replace)?;
                }
                Ok(())
            }
        }
    }
}

/// How FUNCTION RESTORE treats the libraries already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    Flush,
    Append,
    Replace,
}

/// A library's shebang: `#!<engine> name=<name>`.
struct Metadata {
    engine: String,
    name: String,
    /// Where the code starts (at the shebang's line feed, so that line
    /// numbers stay the user's).
    code_start: usize,
}

/// Redis's functionExtractLibMetaData.
fn parse_metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    // Split as Redis's sdssplitargs: `name="foo"` names the library foo.
    let parts: Vec<String> = match crate::protocol::parser::split_args(&code[..end]) {
        Some(parts) if !parts.is_empty() => parts
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
        _ => return Err("ERR Invalid library metadata".into()),
    };
    let engine = parts[0].get(2..).unwrap_or_default().to_string();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_string());
            continue;
        }
        return Err(format!("ERR Invalid metadata value given: {part}"));
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    Ok(Metadata {
        engine,
        name,
        code_start: end,
    })
}

/// Letters, digits and underscores, at least one.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The message of the error object on top (Redis's
/// luaExtractErrorInformation: a string gets `ERR`, a table gives `err`).
unsafe fn error_message(l: *mut lua_State) -> String {
    if ffi::lua_isstring(l, -1) != 0 {
        return format!("ERR {}", to_string_lossy(l, -1));
    }
    let mut msg = String::new();
    if ffi::lua_istable(l, -1) != 0 {
        ffi::lua_getfield(l, -1, c"err".as_ptr());
        if ffi::lua_isstring(l, -1) != 0 {
            msg = to_string_lossy(l, -1);
        }
        ffi::lua_pop(l, 1);
    }
    msg
}

/// Stop a library's code that runs past the load timeout.
unsafe extern "C-unwind" fn load_hook(l: *mut lua_State, _ar: *mut ffi::lua_Debug) {
    let loading = LOADING.with(|c| c.get());
    if loading.is_null() || (*loading).started.elapsed() <= LOAD_TIMEOUT {
        return;
    }
    ffi::lua_sethook(l, Some(load_hook), ffi::LUA_MASKLINE, 0);
    push_error_table(l, "FUNCTION LOAD timeout");
    ffi::lua_error(l);
}

/// Push an error table and raise it (no Rust value owning memory may be
/// alive in the caller's frame).
unsafe fn raise(l: *mut lua_State, msg: &str) -> ! {
    push_error_table(l, msg);
    ffi::lua_error(l)
}

/// The flags named in a `flags` table (its array part, each a flag name).
unsafe fn read_flags(l: *mut lua_State) -> Option<ScriptFlags> {
    // As Redis's luaRegisterFunctionReadFlags: the array part only, from
    // index 1 to the first nil; other keys are not looked at.
    let mut flags = ScriptFlags::default();
    for j in 1.. {
        ffi::lua_pushnumber(l, j as ffi::lua_Number);
        ffi::lua_gettable(l, -2);
        if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
            ffi::lua_pop(l, 1);
            break;
        }
        let name = if ffi::lua_isstring(l, -1) != 0 {
            to_string_lossy(l, -1).to_ascii_lowercase()
        } else {
            String::new()
        };
        ffi::lua_pop(l, 1);
        match name.as_str() {
            "no-writes" => flags.no_writes = true,
            "allow-oom" => flags.allow_oom = true,
            "allow-stale" => flags.allow_stale = true,
            "no-cluster" => flags.no_cluster = true,
            "allow-cross-slot-keys" => flags.allow_cross_slot = true,
            _ => return None,
        }
    }
    Some(flags)
}

/// What `redis.register_function` was given: a function, or the error.
unsafe fn read_registration(l: *mut lua_State) -> Result<Function, &'static str> {
    let argc = ffi::lua_gettop(l);
    if !(1..=2).contains(&argc) {
        return Err("wrong number of arguments to redis.register_function");
    }
    if argc == 2 {
        let Some(name) = to_bytes(l, 1).filter(|_| ffi::lua_isstring(l, 1) != 0) else {
            return Err("first argument to redis.register_function must be a string");
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if ffi::lua_isfunction(l, 2) == 0 {
            return Err("second argument to redis.register_function must be a function");
        }
        let func = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
        return Ok(Function {
            name,
            description: None,
            flags: ScriptFlags::default(),
            func,
        });
    }
    if ffi::lua_istable(l, 1) == 0 {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
    }
    let (mut name, mut description, mut func, mut flags) =
        (None, None, None, ScriptFlags::default());
    let release = |func: Option<c_int>| {
        if let Some(f) = func {
            ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, f);
        }
    };
    ffi::lua_pushnil(l);
    while ffi::lua_next(l, -2) != 0 {
        if ffi::lua_isstring(l, -2) == 0 {
            release(func);
            return Err("named argument key given to redis.register_function is not a string");
        }
        let key = to_string_lossy(l, -2).to_ascii_lowercase();
        match key.as_str() {
            "function_name" => {
                if ffi::lua_isstring(l, -1) == 0 {
                    release(func);
                    return Err(
                        "function_name argument given to redis.register_function must be a string",
                    );
                }
                name = Some(to_string_lossy(l, -1));
            }
            "description" => {
                if ffi::lua_isstring(l, -1) == 0 {
                    release(func);
                    return Err(
                        "description argument given to redis.register_function must be a string",
                    );
                }
                description = to_bytes(l, -1).map(|b| b.to_vec());
            }
            "callback" => {
                if ffi::lua_isfunction(l, -1) == 0 {
                    release(func);
                    return Err(
                        "callback argument given to redis.register_function must be a function",
                    );
                }
                release(func);
                func = Some(ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX));
                continue; // the value was taken by the reference
            }
            "flags" => {
                if ffi::lua_istable(l, -1) == 0 {
                    release(func);
                    return Err("flags argument to redis.register_function must be a table representing function flags");
                }
                match read_flags(l) {
                    Some(f) => flags = f,
                    None => {
                        release(func);
                        return Err("unknown flag given");
                    }
                }
            }
            _ => {
                release(func);
                return Err("unknown argument given to redis.register_function");
            }
        }
        ffi::lua_pop(l, 1);
    }
    let Some(name) = name else {
        release(func);
        return Err("redis.register_function must get a function name argument");
    };
    let Some(func) = func else {
        return Err("redis.register_function must get a callback argument");
    };
    Ok(Function {
        name,
        description,
        flags,
        func,
    })
}

/// `redis.register_function(name, callback)` or
/// `redis.register_function{function_name=…, callback=…, flags={…},
/// description=…}`, while FUNCTION LOAD runs a library's code.
unsafe extern "C-unwind" fn register_function(l: *mut lua_State) -> c_int {
    let loading = LOADING.with(|c| c.get());
    if loading.is_null() {
        raise(
            l,
            "redis.register_function can only be called on FUNCTION LOAD command",
        );
    }
    let error: Option<&'static str> = match read_registration(l) {
        Err(e) => Some(e),
        Ok(f) => {
            if !valid_name(&f.name) {
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, f.func);
                Some("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
            } else if (*loading).registered.iter().any(|g| g.name == f.name) {
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, f.func);
                Some("Function already exists in the library")
            } else {
                (*loading).registered.push(f);
                None
            }
        }
    };
    if let Some(e) = error {
        raise(l, e);
    }
    0
}

/// Names of the flags a function has, in Redis's order.
pub fn flag_names(flags: &ScriptFlags) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (on, name) in [
        (flags.no_writes, "no-writes"),
        (flags.allow_oom, "allow-oom"),
        (flags.allow_stale, "allow-stale"),
        (flags.no_cluster, "no-cluster"),
        (flags.allow_cross_slot, "allow-cross-slot-keys"),
    ] {
        if on {
            out.push(name);
        }
    }
    out
}
