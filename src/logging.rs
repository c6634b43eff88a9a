//! Logging through `tracing`, with Redis's `loglevel` and `logfile` options.
//!
//! The level can change at run time (CONFIG SET loglevel), so filtering is
//! done by the writer factory against a global level rather than fixed when
//! the subscriber is built. With `syslog-enabled` every line goes to syslog
//! too, at the priority of its level (Redis's syslogLevelMap). A panic
//! writes a crash report to the log while `crash-log-enabled` is yes.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// 0 = nothing, 1 = warning, 2 = notice, 3 = verbose, 4 = debug.
static LEVEL: AtomicU8 = AtomicU8::new(2);

fn level_rank(name: &str) -> u8 {
    match name {
        "debug" => 4,
        "verbose" => 3,
        "notice" => 2,
        "warning" => 1,
        _ => 0,
    }
}

fn event_rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR | Level::WARN => 1,
        Level::INFO => 2,
        Level::DEBUG => 3,
        Level::TRACE => 4,
    }
}

/// Change the log level (`loglevel` option).
pub fn set_level(name: &str) {
    LEVEL.store(level_rank(name), Ordering::Relaxed);
}

#[derive(Clone)]
enum Target {
    Stdout,
    File(Arc<Mutex<File>>),
}

#[derive(Clone)]
struct Writer {
    target: Target,
    enabled: bool,
    /// The syslog priority of this line, when syslog is on.
    syslog: Option<libc::c_int>,
}

impl Write for Writer {
    /// The whole line at once (so syslog gets it whole, once).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.enabled {
            return Ok(buf.len());
        }
        if let Some(priority) = self.syslog {
            to_syslog(priority, buf);
        }
        match &self.target {
            Target::Stdout => io::stdout().write_all(buf)?,
            Target::File(f) => f
                .lock()
                .map_err(|_| io::Error::other("log file lock poisoned"))?
                .write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match &self.target {
            Target::Stdout => io::stdout().flush(),
            Target::File(f) => f
                .lock()
                .map_err(|_| io::Error::other("log file lock poisoned"))?
                .flush(),
        }
    }
}

struct Factory {
    target: Target,
    syslog: bool,
}

impl<'a> MakeWriter<'a> for Factory {
    type Writer = Writer;

    fn make_writer(&'a self) -> Writer {
        Writer {
            target: self.target.clone(),
            enabled: true,
            syslog: self.syslog.then_some(libc::LOG_NOTICE),
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Writer {
        let rank = event_rank(meta.level());
        let enabled = rank <= LEVEL.load(Ordering::Relaxed);
        Writer {
            target: self.target.clone(),
            enabled,
            syslog: self.syslog.then(|| syslog_priority(rank)),
        }
    }
}

/// Redis's syslogLevelMap: warning, notice, verbose (info), debug.
fn syslog_priority(rank: u8) -> libc::c_int {
    match rank {
        0 | 1 => libc::LOG_WARNING,
        2 => libc::LOG_NOTICE,
        3 => libc::LOG_INFO,
        _ => libc::LOG_DEBUG,
    }
}

/// Send one log line to syslog: its message, without the timestamp and
/// level the log file has (syslog adds its own) or the newline.
fn to_syslog(priority: libc::c_int, line: &[u8]) {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let message = std::str::from_utf8(line)
        .ok()
        .and_then(|l| {
            let (_, after_time) = l.split_once("Z ")?;
            let (_, message) = after_time.trim_start().split_once(' ')?;
            Some(message.as_bytes())
        })
        .unwrap_or(line);
    let text: Vec<u8> = message.iter().copied().filter(|&b| b != 0).collect();
    if let Ok(msg) = CString::new(text) {
        // SAFETY: a constant "%s" format with one valid C string argument.
        unsafe { libc::syslog(priority, c"%s".as_ptr(), msg.as_ptr()) };
    }
}

/// Where log lines go besides the log file: syslog's identity and
/// facility (`syslog-ident`, `syslog-facility`), when `syslog-enabled`.
pub struct Syslog<'a> {
    pub ident: &'a str,
    pub facility: &'a str,
}

/// A `syslog-facility` name as the C constant.
fn syslog_facility(name: &str) -> libc::c_int {
    match name {
        "user" => libc::LOG_USER,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => libc::LOG_LOCAL0,
    }
}

/// Install the global subscriber. `logfile` empty means standard output;
/// with `syslog`, lines go to syslog as well (Redis's openlog with
/// LOG_PID | LOG_NDELAY | LOG_NOWAIT).
pub fn init(loglevel: &str, logfile: &str, syslog: Option<Syslog<'_>>) -> io::Result<()> {
    set_level(loglevel);
    let target = if logfile.is_empty() {
        Target::Stdout
    } else {
        let f = OpenOptions::new().create(true).append(true).open(logfile)?;
        LOG_FD.store(std::os::fd::AsRawFd::as_raw_fd(&f), Ordering::Relaxed);
        Target::File(Arc::new(Mutex::new(f)))
    };
    if let Some(s) = &syslog {
        let ident = CString::new(s.ident.replace('\0', ""))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // openlog keeps the pointer: the identity lives as long as the process.
        let ident: &'static std::ffi::CStr = Box::leak(ident.into_boxed_c_str());
        // SAFETY: `ident` is a NUL-terminated string that is never freed.
        unsafe {
            libc::openlog(
                ident.as_ptr(),
                libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
                syslog_facility(s.facility),
            )
        };
    }
    let _ = tracing_subscriber::fmt()
        .with_max_level(Level::DEBUG)
        .with_ansi(false)
        .with_target(false)
        .with_writer(Factory {
            target,
            syslog: syslog.is_some(),
        })
        .try_init();
    Ok(())
}

/// The log's descriptor (standard output until a log file is opened), for
/// what a signal handler writes itself (the watchdog).
static LOG_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);

extern "C" {
    // glibc's execinfo: async-signal-safe once loaded (see `watchdog`).
    fn backtrace(buffer: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
    fn backtrace_symbols_fd(buffer: *const *mut libc::c_void, size: libc::c_int, fd: libc::c_int);
}

/// The software watchdog's timer (a `timer_t`: the first is 0), valid
/// while `WATCHDOG_ON`.
static WATCHDOG_TIMER: std::sync::atomic::AtomicPtr<libc::c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
static WATCHDOG_ON: AtomicBool = AtomicBool::new(false);

/// Redis's software watchdog (`watchdog-period`), armed again by every
/// cron tick of the loop thread: a SIGALRM to that thread after `period_ms`
/// without a tick, whose handler writes "--- WATCHDOG TIMER EXPIRED ---"
/// and the thread's stack to the log; 0 turns it off. Only the handler's
/// own system calls run in the signal (write, glibc's backtrace).
pub fn watchdog(period_ms: u64) {
    let timer = WATCHDOG_TIMER.load(Ordering::Relaxed);
    let on = WATCHDOG_ON.load(Ordering::Relaxed);
    if period_ms == 0 {
        if on {
            // SAFETY: the timer made below; SIGALRM is ignored again.
            unsafe {
                libc::timer_delete(timer);
                libc::signal(libc::SIGALRM, libc::SIG_IGN);
            }
            WATCHDOG_ON.store(false, Ordering::Relaxed);
            tracing::warn!("Watchdog disabled.");
        }
        return;
    }
    let timer = if !on {
        // SAFETY: a zeroed sigaction with our handler; a timer whose
        // signal goes to this thread only (SIGEV_THREAD_ID), so no other
        // thread takes it; a first backtrace() loads what it needs (it may
        // allocate then, never again in the handler).
        unsafe {
            let mut frames = [std::ptr::null_mut(); 4];
            backtrace(frames.as_mut_ptr(), 4);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = watchdog_signal as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_NODEFER;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGALRM, &act, std::ptr::null_mut());
            let mut ev: libc::sigevent = std::mem::zeroed();
            ev.sigev_notify = libc::SIGEV_THREAD_ID;
            ev.sigev_signo = libc::SIGALRM;
            ev.sigev_notify_thread_id = libc::gettid();
            let mut t: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut t) != 0 {
                tracing::warn!("Watchdog not set: {}", std::io::Error::last_os_error());
                return;
            }
            WATCHDOG_TIMER.store(t, Ordering::Relaxed);
            WATCHDOG_ON.store(true, Ordering::Relaxed);
            tracing::warn!("Watchdog timer enabled (period: {period_ms} ms).");
            t
        }
    } else {
        timer
    };
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (period_ms / 1000) as libc::time_t,
            tv_nsec: ((period_ms % 1000) * 1_000_000) as libc::c_long,
        },
    };
    // SAFETY: the live timer, a one-shot expiry.
    unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) };
}

extern "C" fn watchdog_signal(
    _sig: libc::c_int,
    _info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let fd = LOG_FD.load(Ordering::Relaxed);
    let write = |b: &[u8]| {
        // SAFETY: write(2) of a static message, async-signal-safe.
        unsafe { libc::write(fd, b.as_ptr() as *const libc::c_void, b.len()) };
    };
    write(b"\n--- WATCHDOG TIMER EXPIRED ---\n");
    let mut frames = [std::ptr::null_mut(); 100];
    // SAFETY: glibc's backtrace into a stack array, symbols written to the
    // descriptor without allocating (loaded at `watchdog`'s first call).
    unsafe {
        let n = backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int);
        backtrace_symbols_fd(frames.as_ptr(), n, fd);
    }
    write(b"--------\n");
}

/// `crash-log-enabled`, read by the panic hook (which runs where the
/// server's state cannot be reached).
pub static CRASH_LOG_ENABLED: AtomicBool = AtomicBool::new(true);

/// Install the panic hook: the usual message on standard error, then,
/// while `crash-log-enabled` is yes, a crash report in the log in Redis's
/// shape (its serverPanic and bug report markers): the message, where it
/// happened, the thread and a backtrace.
pub fn install_crash_hook() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        crash_report(info);
        if USE_EXIT_ON_PANIC.load(Ordering::Relaxed) {
            std::process::exit(1);
        }
    }));
}

/// `use-exit-on-panic`, for the panic hook.
pub static USE_EXIT_ON_PANIC: AtomicBool = AtomicBool::new(false);

fn crash_report(info: &std::panic::PanicHookInfo<'_>) {
    if !CRASH_LOG_ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "Box<dyn Any>".to_string());
    let place = info
        .location()
        .map_or(String::new(), |l| format!(" #{}:{}", l.file(), l.line()));
    let thread = std::thread::current();
    let backtrace = std::backtrace::Backtrace::force_capture();
    tracing::error!("------------------------------------------------");
    tracing::error!("!!! Software Failure. Press left mouse button to continue");
    tracing::error!("Guru Meditation: {message}{place}");
    tracing::error!("=== REDIS BUG REPORT START: Cut & paste starting from here ===");
    tracing::error!(
        "Crashed running the thread '{}'\n------ STACK TRACE ------\n{backtrace}",
        thread.name().unwrap_or("unnamed")
    );
    tracing::error!("=== REDIS BUG REPORT END. Make sure to include from START to END. ===");
}

/// Install handlers for the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
/// SIGABRT), as Redis's setupSigSegvHandlers: while `crash-log-enabled` is
/// yes, the log gets Redis's crash report (the signal, the address, who
/// sent it, a backtrace), then the signal is raised again with its default
/// action, so the process still dies of it (and dumps core where allowed).
/// Logging from a signal handler is not async-signal-safe; like Redis, a
/// crashing process takes that risk for the report.
pub fn install_fatal_signal_handlers() {
    // SAFETY: a zeroed sigaction with a valid handler and flags; installed
    // once at start, before any other thread exists that could race it.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = fatal_signal as *const () as usize;
        // Not on the alternate stack Rust sets up for overflows: a few KB, too
        // small for the report and its backtrace.
        act.sa_flags = libc::SA_NODEFER | libc::SA_RESETHAND | libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        for sig in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGABRT,
        ] {
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

extern "C" fn fatal_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    if CRASH_LOG_ENABLED.load(Ordering::Relaxed) && !info.is_null() {
        // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO
        // handler; the accessors read the fields of this signal's kind.
        let (code, addr, pid, uid) = unsafe {
            let i = &*info;
            (i.si_code, i.si_addr(), i.si_pid(), i.si_uid())
        };
        tracing::error!("=== REDIS BUG REPORT START: Cut & paste starting from here ===");
        tracing::error!(
            "Redis {} crashed by signal: {sig}, si_code: {code}",
            crate::REDIS_VERSION
        );
        if sig == libc::SIGSEGV || sig == libc::SIGBUS {
            tracing::error!("Accessing address: {addr:p}");
        }
        if code == libc::SI_USER && pid != -1 {
            tracing::error!("Killed by PID: {pid}, UID: {uid}");
        }
        let thread = std::thread::current();
        let backtrace = std::backtrace::Backtrace::force_capture();
        tracing::error!(
            "Crashed running the thread '{}'\n------ STACK TRACE ------\n{backtrace}",
            thread.name().unwrap_or("unnamed")
        );
        tracing::error!("=== REDIS BUG REPORT END. Make sure to include from START to END. ===");
    }
    // SAFETY: back to the default action (SA_RESETHAND did it already for
    // this signal) and raise it again: the process ends of it.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// A budget of log lines for one kind of event that a peer can trigger at
/// will (failed AUTH, protocol errors, refused connections): at most `burst`
/// lines per `period`, so one client sending garbage cannot fill the disk.
/// The next line allowed after a quiet spell says how many were left out.
#[derive(Debug)]
pub struct RateLimit {
    burst: u32,
    period: std::time::Duration,
    window_start: Option<std::time::Instant>,
    in_window: u32,
    suppressed: u64,
}

impl RateLimit {
    pub const fn new(burst: u32, period: std::time::Duration) -> RateLimit {
        RateLimit {
            burst,
            period,
            window_start: None,
            in_window: 0,
            suppressed: 0,
        }
    }

    /// May a line be logged now? When it may, returns the number of lines
    /// suppressed since the last one that was logged.
    pub fn allow(&mut self, now: std::time::Instant) -> Option<u64> {
        let fresh = self
            .window_start
            .is_none_or(|t| now.duration_since(t) >= self.period);
        if fresh {
            self.window_start = Some(now);
            self.in_window = 0;
        }
        if self.in_window >= self.burst {
            self.suppressed += 1;
            return None;
        }
        self.in_window += 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// " (N similar lines suppressed)" when N > 0, for the end of a log line.
pub fn suppressed_note(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} similar messages suppressed)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn rate_limit_allows_a_burst_per_period_and_counts_the_rest() {
        let mut r = RateLimit::new(2, Duration::from_secs(1));
        let t = Instant::now();
        assert_eq!(r.allow(t), Some(0));
        assert_eq!(r.allow(t), Some(0));
        assert_eq!(r.allow(t), None);
        assert_eq!(r.allow(t + Duration::from_millis(500)), None);
        assert_eq!(r.allow(t + Duration::from_secs(1)), Some(2));
        assert_eq!(r.allow(t + Duration::from_secs(1)), Some(0));
    }
}
