//! The Lua debugger (Redis's LDB, `SCRIPT DEBUG YES|SYNC` and
//! `redis-cli --ldb`): while a debugged EVAL runs, a line hook stops the
//! script, sends what it logged to the client as an array of status
//! replies, and reads the client's debugger commands (step, continue,
//! list, print, break, eval, redis, trace, maxlen, abort) straight from
//! its socket, as Redis does, until one lets the script go on.
//!
//! The session talks to the client through [`LdbIo`]; the command layer
//! gives it the client's socket (in the server's process for SYNC, in a
//! forked child for YES).

use std::ffi::{c_char, c_int, CStr};

use ffi::lua_State;
use mlua_sys as ffi;

use super::{run_ctx, to_bytes};
use crate::util::{c_atoi as atoi, cat_repr};

/// Where a debugging session reads the client's commands and writes its
/// logs.
pub trait LdbIo {
    /// Bytes the client sent, waiting for some; `Ok(0)` or an error when
    /// the client is gone.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Send `data` whole (a failure is found by the next read).
    fn write_all(&mut self, data: &[u8]);
}

/// Replies and values longer than this are cut in the logs (Redis's
/// LDB_MAX_LEN_DEFAULT).
const MAX_LEN_DEFAULT: usize = 256;
/// Most breakpoints at once (LDB_BREAKPOINTS_MAX).
const BREAKPOINTS_MAX: usize = 64;
/// Most bytes of debugger commands buffered before the script is stopped.
const MAX_CBUF: usize = 1 << 20;
/// Nested tables printed this deep (LDB_MAX_VALUES_DEPTH: LUA_MINSTACK/2).
const MAX_VALUES_DEPTH: usize = 10;

/// One debugging session.
pub struct Ldb {
    io: Box<dyn LdbIo>,
    /// The script's source, line by line.
    src: Vec<Vec<u8>>,
    logs: Vec<Vec<u8>>,
    cbuf: Vec<u8>,
    breakpoints: Vec<i32>,
    /// Stop at the next line.
    pub(crate) step: bool,
    /// `redis.breakpoint()` was called.
    luabp: bool,
    maxlen: usize,
    maxlen_hint_sent: bool,
    pub(crate) currentline: i32,
    /// How long a `continue`d script may run before it is stopped as
    /// looping (busy-reply-threshold, or 5 s).
    time_limit: std::time::Duration,
}

impl Ldb {
    /// A session for a script with source `body`, stopping at its first
    /// line.
    pub fn new(io: Box<dyn LdbIo>, body: &[u8], time_limit: std::time::Duration) -> Ldb {
        let mut end = body.len();
        while end > 0 && (body[end - 1] == b'\n' || body[end - 1] == b'\r') {
            end -= 1;
        }
        let src = if end == 0 {
            Vec::new()
        } else {
            body[..end]
                .split(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect()
        };
        Ldb {
            io,
            src,
            logs: Vec::new(),
            cbuf: Vec::new(),
            breakpoints: Vec::new(),
            step: true,
            luabp: false,
            maxlen: MAX_LEN_DEFAULT,
            maxlen_hint_sent: false,
            currentline: 0,
            time_limit,
        }
    }

    /// Logging is on: the session is stepping (Redis's ldbIsEnabled).
    pub(crate) fn enabled(&self) -> bool {
        self.step
    }

    pub(crate) fn log(&mut self, entry: impl Into<Vec<u8>>) {
        self.logs.push(entry.into());
    }

    /// Log `entry`, cut at `maxlen` bytes (with a hint the first time).
    fn log_max_len(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen > 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// Send the logs as an array of status replies (line breaks become
    /// spaces) and forget them.
    pub fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for entry in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(entry.iter().map(|&b| match b {
                b'\r' | b'\n' => b' ',
                b => b,
            }));
            proto.extend_from_slice(b"\r\n");
        }
        self.io.write_all(&proto);
    }

    /// The session's end: what is left, then `<endsession>`.
    pub fn end(&mut self) {
        self.log("<endsession>");
        self.send_logs();
    }

    fn source_line(&self, line: i32) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn is_breakpoint(&self, line: i32) -> bool {
        self.breakpoints.contains(&line)
    }

    fn log_source_line(&mut self, line: i32) {
        let prefix = match (self.currentline == line, self.is_breakpoint(line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut entry = format!("{prefix}{line:<3} ").into_bytes();
        entry.extend_from_slice(self.source_line(line));
        self.log(entry);
    }

    /// `list`: the lines within `context` of `around` (0: all).
    fn list(&mut self, around: i32, context: i32) {
        for line in 1..=self.src.len() as i32 {
            if around != 0 && (around - line).abs() > context {
                continue;
            }
            self.log_source_line(line);
        }
    }

    /// `break` with its arguments (Redis's ldbBreak).
    fn break_command(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.breakpoints.is_empty() {
                self.log("No breakpoints set. Use 'b <line>' to add one.");
            } else {
                self.log(format!("{} breakpoints set:", self.breakpoints.len()));
                for line in self.breakpoints.clone() {
                    self.log_source_line(line);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = std::str::from_utf8(arg)
                .ok()
                .and_then(|s| crate::util::parse_i64(s.as_bytes()))
                .and_then(|n| i32::try_from(n).ok())
            else {
                let mut e = b"Invalid argument:'".to_vec();
                e.extend_from_slice(arg);
                e.push(b'\'');
                self.log(e);
                continue;
            };
            if line == 0 {
                self.breakpoints.clear();
                self.log("All breakpoints removed.");
            } else if line > 0 {
                if self.breakpoints.len() == BREAKPOINTS_MAX {
                    self.log("Too many breakpoints set.");
                } else if line as usize <= self.src.len() && !self.is_breakpoint(line) {
                    self.breakpoints.push(line);
                    self.list(line, 1);
                } else {
                    self.log("Wrong line number.");
                }
            } else if let Some(i) = self.breakpoints.iter().position(|&b| b == -line) {
                self.breakpoints.remove(i);
                self.log("Breakpoint removed.");
            } else {
                self.log("No breakpoint in the specified line.");
            }
        }
    }

    /// `maxlen [len]`.
    fn maxlen_command(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut n = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if n != 0 && n <= 60 {
                n = 60;
            }
            self.maxlen = n.max(0) as usize;
        }
        if self.maxlen > 0 {
            self.log(format!(
                "<value> replies are truncated at {} bytes.",
                self.maxlen
            ));
        } else {
            self.log("<value> replies are unlimited.");
        }
    }

    /// Log a command's reply (RESP) as Redis's ldbLogRedisReply.
    pub(crate) fn log_reply(&mut self, reply: &[u8]) {
        let mut out = b"<reply> ".to_vec();
        resp_to_human(&mut out, reply);
        self.log_max_len(out);
    }

    /// Log a command `redis.call` runs (the first ten arguments).
    pub(crate) fn log_command(&mut self, argv: &[&[u8]]) {
        let mut entry = b"<redis>".to_vec();
        for (j, a) in argv.iter().enumerate() {
            if j == 10 {
                entry.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
                break;
            }
            entry.push(b' ');
            entry.extend_from_slice(a);
        }
        self.log(entry);
    }

    /// The next complete debugger command in the input (Redis's
    /// ldbReplParseCommand, as forgiving): `Ok(None)` to read more.
    fn parse_command(&self) -> Result<Option<Vec<Vec<u8>>>, ()> {
        let buf = &self.cbuf;
        if buf.is_empty() {
            return Ok(None);
        }
        let Some(star) = buf.iter().position(|&b| b == b'*') else {
            return Err(());
        };
        let mut p = star + 1;
        let Some(eol) = find_crlf(buf, p) else {
            return Ok(None);
        };
        let argc = atoi(&buf[p..eol]);
        if argc <= 0 || argc > 1024 {
            return Err(());
        }
        p = eol + 2;
        let mut argv = Vec::with_capacity(argc as usize);
        while argv.len() < argc as usize {
            if p >= buf.len() {
                return Ok(None);
            }
            if buf[p] != b'$' {
                return Err(());
            }
            let Some(eol) = find_crlf(buf, p + 1) else {
                return Ok(None);
            };
            let len = atoi(&buf[p + 1..eol]);
            if len <= 0 || len > 1024 {
                return Err(());
            }
            p = eol + 2;
            let len = len as usize;
            if p + len + 2 > buf.len() {
                return Ok(None);
            }
            argv.push(buf[p..p + len].to_vec());
            p += len;
            if &buf[p..p + 2] != b"\r\n" {
                return Err(());
            }
            p += 2;
        }
        Ok(Some(argv))
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

/// Append a reply in human form (Redis's ldbRedisProtocolToHuman); the
/// rest of `reply` after it is returned.
fn resp_to_human<'a>(o: &mut Vec<u8>, reply: &'a [u8]) -> &'a [u8] {
    let Some(&kind) = reply.first() else {
        return reply;
    };
    let eol = find_crlf(reply, 1).unwrap_or(reply.len());
    let line = &reply[1.min(reply.len())..eol];
    let rest = reply.get(eol + 2..).unwrap_or_default();
    let count = || i64::from(atoi(line));
    // A null bulk string or array.
    if matches!(kind, b'$' | b'*') && count() < 0 {
        o.extend_from_slice(b"NULL");
        return rest;
    }
    match kind {
        b':' => {
            o.extend_from_slice(line);
            rest
        }
        b'$' => {
            let len = (count() as usize).min(rest.len());
            cat_repr(o, &rest[..len]);
            rest.get(len + 2..).unwrap_or_default()
        }
        b'+' | b'-' => {
            cat_repr(o, &reply[..eol]);
            rest
        }
        b'*' => human_items(o, rest, count(), b"[", b"]"),
        b'~' => human_items(o, rest, count(), b"~(", b")"),
        b'%' => {
            let n = count();
            o.push(b'{');
            let mut p = rest;
            for j in 0..n {
                p = resp_to_human(o, p);
                o.extend_from_slice(b" => ");
                p = resp_to_human(o, p);
                if j != n - 1 {
                    o.push(b',');
                }
            }
            o.push(b'}');
            p
        }
        b'_' => {
            o.extend_from_slice(b"(null)");
            rest
        }
        b'#' => {
            o.extend_from_slice(if line.first() == Some(&b't') {
                b"#true"
            } else {
                b"#false"
            });
            rest
        }
        b',' => {
            o.extend_from_slice(b"(double) ");
            o.extend_from_slice(line);
            rest
        }
        _ => {
            // A type Redis's debugger does not print: shown as it came.
            o.extend_from_slice(&reply[..eol]);
            rest
        }
    }
}

/// `n` replies from `reply` in human form, comma-separated between `open`
/// and `close`; the rest of `reply` after them is returned.
fn human_items<'a>(
    o: &mut Vec<u8>,
    reply: &'a [u8],
    n: i64,
    open: &[u8],
    close: &[u8],
) -> &'a [u8] {
    o.extend_from_slice(open);
    let mut p = reply;
    for j in 0..n {
        p = resp_to_human(o, p);
        if j != n - 1 {
            o.push(b',');
        }
    }
    o.extend_from_slice(close);
    p
}

/// The session of the script running, if it is being debugged.
unsafe fn session<'a>(l: *mut lua_State) -> Option<&'a mut Ldb> {
    let ctx = run_ctx(l);
    if ctx.is_null() {
        return None;
    }
    (*ctx).ldb.as_deref_mut().map(|p| &mut *(p as *mut Ldb))
}

/// Append the value at `idx` in human form (Redis's ldbCatStackValue).
unsafe fn cat_value(s: &mut Vec<u8>, l: *mut lua_State, idx: c_int, level: usize) {
    if level == MAX_VALUES_DEPTH {
        s.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let level = level + 1;
    let t = ffi::lua_type(l, idx);
    match t {
        ffi::LUA_TSTRING => cat_repr(s, to_bytes(l, idx).unwrap_or_default()),
        ffi::LUA_TBOOLEAN => s.extend_from_slice(if ffi::lua_toboolean(l, idx) != 0 {
            b"true"
        } else {
            b"false"
        }),
        ffi::LUA_TNUMBER => s.extend_from_slice(format_g(ffi::lua_tonumber(l, idx)).as_bytes()),
        ffi::LUA_TNIL => s.extend_from_slice(b"nil"),
        ffi::LUA_TTABLE => {
            let mut expected = 1.0;
            let mut is_array = true;
            let mut repr1 = Vec::new();
            let mut repr2 = Vec::new();
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, idx - 1) != 0 {
                if is_array
                    && (ffi::lua_type(l, -2) != ffi::LUA_TNUMBER
                        || ffi::lua_tonumber(l, -2) != expected)
                {
                    is_array = false;
                }
                cat_value(&mut repr1, l, -1, level);
                repr1.extend_from_slice(b"; ");
                repr2.push(b'[');
                cat_value(&mut repr2, l, -2, level);
                repr2.extend_from_slice(b"]=");
                cat_value(&mut repr2, l, -1, level);
                repr2.extend_from_slice(b"; ");
                ffi::lua_pop(l, 1);
                expected += 1.0;
            }
            for r in [&mut repr1, &mut repr2] {
                if !r.is_empty() {
                    r.truncate(r.len() - 2);
                }
            }
            s.push(b'{');
            s.extend_from_slice(if is_array { &repr1 } else { &repr2 });
            s.push(b'}');
        }
        ffi::LUA_TFUNCTION | ffi::LUA_TUSERDATA | ffi::LUA_TTHREAD | ffi::LUA_TLIGHTUSERDATA => {
            let name = match t {
                ffi::LUA_TFUNCTION => "function",
                ffi::LUA_TUSERDATA => "userdata",
                ffi::LUA_TTHREAD => "thread",
                _ => "light-userdata",
            };
            let p = ffi::lua_topointer(l, idx);
            s.extend_from_slice(format!("\"{name}@{p:p}\"").as_bytes());
        }
        _ => s.extend_from_slice(b"\"<unknown-lua-type>\""),
    }
}

/// `%g`, as Redis prints a Lua number.
fn format_g(d: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL-terminated.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
            c"%g".as_ptr(),
            d,
        )
    };
    String::from_utf8_lossy(&buf[..(n.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

/// Log the value on top of the stack after `prefix`.
unsafe fn log_top(ldb: &mut Ldb, l: *mut lua_State, prefix: &[u8]) {
    let mut s = prefix.to_vec();
    cat_value(&mut s, l, -1, 0);
    ldb.log_max_len(s);
}

/// `print <var>`: the first local of that name from the current frame
/// outwards, or the globals KEYS and ARGV.
unsafe fn print_var(ldb: &mut Ldb, l: *mut lua_State, var: &[u8]) {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        level += 1;
        let mut i = 1;
        loop {
            let name = ffi::lua_getlocal(l, &ar, i);
            if name.is_null() {
                break;
            }
            i += 1;
            if CStr::from_ptr(name).to_bytes() == var {
                log_top(ldb, l, b"<value> ");
                ffi::lua_pop(l, 1);
                return;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if var == b"ARGV" || var == b"KEYS" {
        let name = std::ffi::CString::new(var).expect("no NUL");
        ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, name.as_ptr());
        log_top(ldb, l, b"<value> ");
        ffi::lua_pop(l, 1);
    } else {
        ldb.log("No such variable.");
    }
}

/// `print`: every local of the current frame.
unsafe fn print_all(ldb: &mut Ldb, l: *mut lua_State) {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut vars = 0;
    if ffi::lua_getstack(l, 0, &mut ar) != 0 {
        let mut i = 1;
        loop {
            let name = ffi::lua_getlocal(l, &ar, i);
            if name.is_null() {
                break;
            }
            i += 1;
            let name = CStr::from_ptr(name).to_bytes();
            if !name.windows(12).any(|w| w == b"(*temporary)") {
                let mut prefix = b"<value> ".to_vec();
                prefix.extend_from_slice(name);
                prefix.extend_from_slice(b" = ");
                log_top(ldb, l, &prefix);
                vars += 1;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if vars == 0 {
        ldb.log("No local variables in the current context.");
    }
}

/// `eval <code>`: run a fragment in its own frame (as an expression
/// first, then as a statement) and show its value.
unsafe fn eval_fragment(ldb: &mut Ldb, l: *mut lua_State, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let name = c"@ldb_eval";
    if ffi::luaL_loadbuffer(l, expr.as_ptr() as *const c_char, expr.len(), name.as_ptr()) != 0 {
        ffi::lua_pop(l, 1);
        if ffi::luaL_loadbuffer(l, code.as_ptr() as *const c_char, code.len(), name.as_ptr()) != 0 {
            log_error_on_top(ldb, l);
            return;
        }
    }
    if ffi::lua_pcall(l, 0, 1, 0) != 0 {
        log_error_on_top(ldb, l);
        return;
    }
    log_top(ldb, l, b"<retval> ");
    ffi::lua_pop(l, 1);
}

/// `<error> …` for the error message on top (popped).
unsafe fn log_error_on_top(ldb: &mut Ldb, l: *mut lua_State) {
    let mut e = b"<error> ".to_vec();
    e.extend_from_slice(to_bytes(l, -1).unwrap_or_default());
    ldb.log(e);
    ffi::lua_pop(l, 1);
}

/// `redis <cmd> …`: run it through `redis.call` with logging on, so the
/// command and its reply are logged.
unsafe fn redis_command(ldb: *mut Ldb, l: *mut lua_State, argv: &[Vec<u8>]) {
    if ffi::lua_checkstack(l, argv.len() as c_int + 1) == 0 {
        (*ldb).log_reply(b"max lua stack reached");
        return;
    }
    ffi::lua_getfield(l, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
    ffi::lua_getfield(l, -1, c"call".as_ptr());
    for a in &argv[1..] {
        ffi::lua_pushlstring(l, a.as_ptr() as *const c_char, a.len());
    }
    (*ldb).step = true;
    ffi::lua_pcall(l, argv.len() as c_int - 1, 1, 0);
    (*ldb).step = false;
    ffi::lua_pop(l, 2);
}

/// `trace`: the script's frames, innermost first.
unsafe fn trace(ldb: &mut Ldb, l: *mut lua_State) {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar);
        let src = CStr::from_ptr(ar.short_src.as_ptr()).to_bytes();
        if src.windows(11).any(|w| w == b"user_script") {
            let name = if ar.name.is_null() {
                "top level".to_string()
            } else {
                CStr::from_ptr(ar.name).to_string_lossy().into_owned()
            };
            ldb.log(format!(
                "{} {name}:",
                if level == 0 { "In" } else { "From" }
            ));
            ldb.log_source_line(ar.currentline);
        }
        level += 1;
    }
    if level == 0 {
        ldb.log("<error> Can't retrieve Lua stack.");
    }
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// Why the REPL returned.
enum ReplEnd {
    /// A command lets the script go on.
    Resume,
    /// The client is gone: the script runs on without it.
    Gone,
    /// Stop the script with this error (raised by the hook once nothing
    /// of the REPL's is alive).
    Raise(&'static str),
}

/// Read and run debugger commands until one lets the script go on
/// (Redis's ldbRepl). Protocol errors, `abort` and an oversized input
/// stop the script with an error.
unsafe fn repl(ldb_ptr: *mut Ldb, l: *mut lua_State) -> ReplEnd {
    loop {
        let argv = loop {
            let parsed = (*ldb_ptr).parse_command();
            match parsed {
                Ok(Some(argv)) => break argv,
                Err(()) => return ReplEnd::Raise("protocol error"),
                Ok(None) => {}
            }
            let mut buf = [0u8; 1024];
            let n = match (*ldb_ptr).io.read(&mut buf) {
                Ok(n) if n > 0 => n,
                _ => {
                    // The client is gone: the script runs on unattended.
                    (*ldb_ptr).step = false;
                    (*ldb_ptr).breakpoints.clear();
                    return ReplEnd::Gone;
                }
            };
            (*ldb_ptr).cbuf.extend_from_slice(&buf[..n]);
            if (*ldb_ptr).cbuf.len() > MAX_CBUF {
                (*ldb_ptr).cbuf = Vec::new();
                return ReplEnd::Raise("max client buffer reached");
            }
        };
        let ldb = &mut *ldb_ptr;
        ldb.cbuf.clear();
        let cmd = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        let is = |short: &str, long: &str| cmd == short || cmd == long;
        if is("h", "help") {
            for line in HELP {
                ldb.log(*line);
            }
        } else if is("s", "step") || is("n", "next") {
            ldb.step = true;
            return ReplEnd::Resume;
        } else if is("c", "continue") {
            return ReplEnd::Resume;
        } else if is("t", "trace") {
            trace(ldb, l);
        } else if is("m", "maxlen") {
            ldb.maxlen_command(&argv);
        } else if is("b", "break") {
            ldb.break_command(&argv);
        } else if is("e", "eval") {
            eval_fragment(ldb, l, &argv);
        } else if is("a", "abort") {
            return ReplEnd::Raise("script aborted for user request");
        } else if argv.len() > 1 && is("r", "redis") {
            redis_command(ldb_ptr, l, &argv);
        } else if is("p", "print") {
            if argv.len() == 2 {
                print_var(ldb, l, &argv[1]);
            } else {
                print_all(ldb, l);
            }
        } else if is("l", "list") {
            let mut around = ldb.currentline;
            let mut ctx = 5;
            if argv.len() > 1 {
                let n = atoi(&argv[1]);
                if n > 0 {
                    around = n;
                }
            }
            if argv.len() > 2 {
                ctx = atoi(&argv[2]);
            }
            ldb.list(around, ctx);
        } else if is("w", "whole") {
            ldb.list(1, 1_000_000);
        } else {
            ldb.log("<error> Unknown Redis Lua debugger command or wrong number of arguments.");
        }
        (*ldb_ptr).send_logs();
    }
}

/// The hook of a debugged script, on every line (and every 100,000
/// instructions, to catch a loop run with `continue`): Redis's
/// luaLdbLineHook.
pub(crate) unsafe extern "C-unwind" fn line_hook(l: *mut lua_State, ar: *mut ffi::lua_Debug) {
    let Some(ldb) = session(l) else {
        return;
    };
    let ldb_ptr: *mut Ldb = ldb;
    let event = (*ar).event;
    ffi::lua_getstack(l, 0, ar);
    ffi::lua_getinfo(l, c"Sl".as_ptr(), ar);
    (*ldb_ptr).currentline = (*ar).currentline;
    let bp = (*ldb_ptr).is_breakpoint((*ldb_ptr).currentline) || (*ldb_ptr).luabp;
    let src = CStr::from_ptr((*ar).short_src.as_ptr()).to_bytes();
    if !src.windows(11).any(|w| w == b"user_script") {
        return;
    }
    let ctx = run_ctx(l);
    let mut timeout = false;
    if event == ffi::LUA_HOOKCOUNT && !(*ldb_ptr).step && !bp {
        if (*ctx).started.elapsed() >= (*ldb_ptr).time_limit {
            timeout = true;
            (*ldb_ptr).step = true;
        } else {
            return;
        }
    }
    if (*ldb_ptr).step || bp {
        let reason = if bp {
            if (*ldb_ptr).luabp {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        let ldb = &mut *ldb_ptr;
        ldb.step = false;
        ldb.luabp = false;
        let line = ldb.currentline;
        ldb.log(format!("* Stopped at {line}, stop reason = {reason}"));
        ldb.log_source_line(line);
        ldb.send_logs();
        match repl(ldb_ptr, l) {
            ReplEnd::Raise(e) => super::raise(l, e),
            ReplEnd::Gone if timeout => super::raise(
                l,
                "timeout during Lua debugging with client closing connection",
            ),
            _ => {}
        }
        (*ctx).started = std::time::Instant::now();
    }
}

/// `redis.breakpoint()`: stop at the next line when debugging.
pub(crate) unsafe extern "C-unwind" fn redis_breakpoint(l: *mut lua_State) -> c_int {
    let on = match session(l) {
        Some(ldb) => {
            ldb.luabp = true;
            true
        }
        None => false,
    };
    ffi::lua_pushboolean(l, on as c_int);
    1
}

/// `redis.debug(…)`: log its arguments to the debugger's console.
pub(crate) unsafe extern "C-unwind" fn redis_debug(l: *mut lua_State) -> c_int {
    let Some(ldb) = session(l) else {
        return 0;
    };
    let argc = ffi::lua_gettop(l);
    let mut entry = format!("<debug> line {}: ", ldb.currentline).into_bytes();
    for i in 1..=argc {
        cat_value(&mut entry, l, i - argc - 1, 0);
        if i != argc {
            entry.extend_from_slice(b", ");
        }
    }
    ldb.log(entry);
    0
}

/// Log an error `redis.call` met, when stepping.
pub(crate) unsafe fn log_call_error(l: *mut lua_State, err: &str) {
    if let Some(ldb) = session(l).filter(|s| s.enabled()) {
        ldb.log(format!("<error> {err}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sink;
    impl LdbIo for Sink {
        fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
            Ok(0)
        }
        fn write_all(&mut self, _data: &[u8]) {}
    }

    fn ldb_with_input(input: &[u8]) -> Ldb {
        let mut l = Ldb::new(Box::new(Sink), b"a\nb\n", std::time::Duration::from_secs(5));
        l.cbuf = input.to_vec();
        l
    }

    #[test]
    fn debugger_commands_parse_as_redis_does() {
        assert_eq!(ldb_with_input(b"").parse_command(), Ok(None));
        assert_eq!(
            ldb_with_input(b"*2\r\n$1\r\np\r\n$3\r\nabc\r\n").parse_command(),
            Ok(Some(vec![b"p".to_vec(), b"abc".to_vec()]))
        );
        // Incomplete: read more.
        assert_eq!(
            ldb_with_input(b"*2\r\n$1\r\np\r\n$3\r\nab").parse_command(),
            Ok(None)
        );
        // Junk before the array is skipped; no array at all is an error.
        assert_eq!(
            ldb_with_input(b"xx*1\r\n$1\r\nc\r\n").parse_command(),
            Ok(Some(vec![b"c".to_vec()]))
        );
        assert_eq!(ldb_with_input(b"step\r\n").parse_command(), Err(()));
        assert_eq!(ldb_with_input(b"*0\r\n").parse_command(), Err(()));
        assert_eq!(ldb_with_input(b"*1\r\n$0\r\n\r\n").parse_command(), Err(()));
        assert_eq!(ldb_with_input(b"*1\r\n$2000\r\n").parse_command(), Err(()));
        assert_eq!(ldb_with_input(b"*1\r\n$1\r\nabc").parse_command(), Err(()));
    }

    #[test]
    fn replies_are_shown_as_redis_shows_them() {
        let human = |r: &[u8]| {
            let mut o = Vec::new();
            resp_to_human(&mut o, r);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(human(b":12\r\n"), "12");
        assert_eq!(human(b"$3\r\na\"b\r\n"), "\"a\\\"b\"");
        assert_eq!(human(b"$-1\r\n"), "NULL");
        assert_eq!(human(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(human(b"-ERR x\r\n"), "\"-ERR x\"");
        assert_eq!(human(b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n"), "[1,[\"x\"]]");
        assert_eq!(human(b"*-1\r\n"), "NULL");
        assert_eq!(human(b"%1\r\n+a\r\n:1\r\n"), "{\"+a\" => 1}");
        assert_eq!(human(b"~1\r\n:1\r\n"), "~(1)");
        assert_eq!(human(b"_\r\n"), "(null)");
        assert_eq!(human(b"#t\r\n"), "#true");
        assert_eq!(human(b",1.5\r\n"), "(double) 1.5");
    }

    #[test]
    fn source_lines_and_breakpoints_are_listed_as_redis_lists_them() {
        let mut l = Ldb::new(
            Box::new(Sink),
            b"x\ny\nz\r\n\n",
            std::time::Duration::from_secs(5),
        );
        assert_eq!(l.src.len(), 3);
        l.currentline = 2;
        l.break_command(&[b"b".to_vec(), b"3".to_vec(), b"9".to_vec(), b"q".to_vec()]);
        l.break_command(&[b"b".to_vec()]);
        l.break_command(&[b"b".to_vec(), b"-3".to_vec(), b"-3".to_vec()]);
        let logs: Vec<String> = l
            .logs
            .iter()
            .map(|e| String::from_utf8_lossy(e).into())
            .collect();
        assert_eq!(
            logs,
            [
                "-> 2   y",
                "  #3   z",
                "Wrong line number.",
                "Invalid argument:'q'",
                "1 breakpoints set:",
                "  #3   z",
                "Breakpoint removed.",
                "No breakpoint in the specified line."
            ]
        );
        assert_eq!(l.source_line(7), b"<out of range source code line>");
    }
}
