//! What the server does to its own process, as Redis does to its own:
//! the OOM score (`oom-score-adj`), transparent huge pages
//! (`disable-thp`), CPU affinity (`*_cpulist`), the process title
//! (`set-proc-title`, `proc-title-template`) and the messages a supervisor
//! waits for (`supervised`).
//!
//! These are process-wide facts, so the little state they need (the OOM
//! score the process started with, whether systemd listens) lives in
//! statics here rather than in the server state; a forked child inherits
//! them with its memory, as Redis's children inherit its statics.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::{info, warn};

use crate::config::{Config, OomClass, OomScoreAdj, SupervisedMode};

// ---- open files ----

/// Descriptors kept for other uses than clients: listeners, files, the
/// AOF, pipes (Redis's CONFIG_MIN_RESERVED_FDS).
pub const RESERVED_FDS: u64 = 32;

/// The most descriptors any process may have (`/proc/sys/fs/nr_open`).
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Raise the open-files limit so that `maxclients` clients fit, as far as
/// the system allows (Redis's adjustOpenFilesLimit). Returns the
/// `maxclients` that fits; below 1 the server cannot start (an error).
pub fn adjust_open_files_limit(maxclients: i64) -> Result<i64, String> {
    let wanted = maxclients.max(0) as u64 + RESERVED_FDS;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == -1 {
        let e = std::io::Error::last_os_error();
        warn!("Unable to obtain the current NOFILE limit ({e}), assuming 1024 and setting the max clients configuration accordingly.");
        return Ok(1024 - RESERVED_FDS as i64);
    }
    let old = limit.rlim_cur;
    if old >= wanted {
        return Ok(maxclients);
    }
    // The highest limit the system grants, down from what is wanted in
    // steps of 16. The hard limit is never lowered (Redis sets both to the
    // same value, which would stop a later CONFIG SET maxclients from
    // raising it again without privileges).
    let mut best = wanted;
    // Nothing above the kernel's nr_open can be granted to anyone: start
    // from the first limit of the same series (wanted − 16k) at or below
    // it, so a huge maxclients costs a few thousand refused calls, not
    // hundreds of millions (the answer is the same).
    let mut error = None;
    if let Some(cap) = nr_open().map(|n| n.max(limit.rlim_max)) {
        if best > cap {
            best -= (best - cap).div_ceil(16) * 16;
            // What each of the calls skipped would have answered.
            error = Some(std::io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    while best > old {
        let try_limit = libc::rlimit {
            rlim_cur: best,
            rlim_max: best.max(limit.rlim_max),
        };
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &try_limit) } == 0 {
            break;
        }
        error = Some(std::io::Error::last_os_error());
        if best < 16 {
            best = old;
            break;
        }
        best -= 16;
    }
    let best = best.max(old);
    if best >= wanted {
        info!(
            "Increased maximum number of open files to {wanted} (it was originally set to {old})."
        );
        return Ok(maxclients);
    }
    if best <= RESERVED_FDS {
        return Err(format!("Your current 'ulimit -n' of {old} is not enough for the server to start. Please increase your open file limit to at least {wanted}. Exiting."));
    }
    let reduced = (best - RESERVED_FDS) as i64;
    warn!("You requested maxclients of {maxclients} requiring at least {wanted} max file descriptors.");
    if let Some(e) = error {
        warn!("Server can't set maximum open files to {wanted} because of OS error: {e}.");
    }
    warn!("Current maximum open files is {best}. maxclients has been reduced to {reduced} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.");
    Ok(reduced)
}

// ---- shutdown signals ----

/// A SIGINT or SIGTERM asked for a shutdown that is not over (Redis's
/// shutdown_asap as its signal handler sees it).
static SHUTDOWN_SIGNALLED: AtomicBool = AtomicBool::new(false);
/// The foreground save's temp file, relative to the working directory
/// (`dir`), as a C string made before any signal can come.
static TEMP_RDB: OnceLock<std::ffi::CString> = OnceLock::new();

/// Handle a second SIGINT during a shutdown in the signal handler itself,
/// as Redis's sigShutdownHandler: the loop may be inside the final save for
/// seconds, and "You insist" must exit now, leaving no temp file behind
/// (`temp_rdb`, the name the foreground save writes to).
pub fn install_shutdown_signal_handler(temp_rdb: String) -> std::io::Result<()> {
    let _ = TEMP_RDB.set(std::ffi::CString::new(temp_rdb).expect("no NUL in a file name"));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the action only does async-signal-safe things: atomics,
        // write(2), unlink(2) and _exit(2).
        unsafe { signal_hook::low_level::register(sig, move || on_shutdown_signal(sig)) }?;
    }
    Ok(())
}

fn on_shutdown_signal(sig: i32) {
    if sig == libc::SIGINT && SHUTDOWN_SIGNALLED.load(Ordering::SeqCst) {
        const MSG: &[u8] = b"You insist... exiting now.\n";
        // SAFETY: write(2), unlink(2) and _exit(2) are async-signal-safe;
        // the path is a C string made before the handler was installed.
        unsafe {
            libc::write(2, MSG.as_ptr() as *const libc::c_void, MSG.len());
            if let Some(tmp) = TEMP_RDB.get() {
                libc::unlink(tmp.as_ptr());
            }
            libc::_exit(1);
        }
    }
    SHUTDOWN_SIGNALLED.store(true, Ordering::SeqCst);
}

/// The signalled shutdown was aborted or failed: the next SIGINT starts
/// another instead of exiting at once.
pub fn shutdown_signal_over() {
    SHUTDOWN_SIGNALLED.store(false, Ordering::SeqCst);
}

// ---- OOM score ----

/// The score the process had before the server first changed it (`i32::MIN`:
/// not changed), to go back to when `oom-score-adj` is set to no.
static OOM_SCORE_BASE: AtomicI32 = AtomicI32::new(i32::MIN);

const OOM_SCORE_ADJ_PATH: &str = "/proc/self/oom_score_adj";
/// The kernel's range of oom_score_adj.
const OOM_SCORE_ADJ_MAX: i32 = 1000;

/// Set the process's OOM score for `class` as `oom-score-adj` says
/// (Redis's setOOMScoreAdj): `relative` adds the class's value to the
/// score the process started with, `absolute` uses it as it is, both
/// clamped to the kernel's range; `no` puts back the starting score if the
/// server had changed it. The reason is logged and returned on failure.
pub fn set_oom_score_adj(config: &Config, class: OomClass) -> Result<(), String> {
    let base = OOM_SCORE_BASE.load(Ordering::Relaxed);
    let value = match config.oom_score_adj {
        OomScoreAdj::No if base == i32::MIN => return Ok(()),
        OomScoreAdj::No => {
            OOM_SCORE_BASE.store(i32::MIN, Ordering::Relaxed);
            base
        }
        mode => {
            let base = if base == i32::MIN {
                let read = std::fs::read_to_string(OOM_SCORE_ADJ_PATH).map_err(|e| {
                    warn!("Unable to read oom_score_adj: {e}");
                    e.to_string()
                })?;
                let start = read.trim().parse::<i32>().unwrap_or(0);
                OOM_SCORE_BASE.store(start, Ordering::Relaxed);
                start
            } else {
                base
            };
            let mut v = config.oom_score_adj_values[class as usize];
            if mode == OomScoreAdj::Relative {
                v += base;
            }
            v.clamp(-OOM_SCORE_ADJ_MAX, OOM_SCORE_ADJ_MAX)
        }
    };
    std::fs::write(OOM_SCORE_ADJ_PATH, format!("{value}\n")).map_err(|e| {
        warn!("Unable to write oom_score_adj: {e}");
        e.to_string()
    })
}

/// The class of the server itself: a replica while it follows a master.
pub fn server_oom_class(config: &Config) -> OomClass {
    if config.replicaof.is_some() {
        OomClass::Replica
    } else {
        OomClass::Master
    }
}

// ---- Transparent huge pages ----

/// With `disable-thp` and the kernel's THP set to `always`, turn THP off
/// for this process (Redis's linuxMemoryWarnings/THPDisable: huge pages
/// make copy-on-write after fork copy 2 MB per touched page); where it
/// stays on, Redis's warning is logged.
pub fn disable_transparent_huge_pages(config: &Config) {
    let Ok(mode) = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") else {
        return;
    };
    if !mode.contains("[always]") {
        return;
    }
    // SAFETY: prctl with integer arguments only changes a process flag.
    let disabled =
        config.disable_thp && unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } == 0;
    if !disabled {
        warn!("WARNING You have Transparent Huge Pages (THP) support enabled in your kernel. This will create latency and memory usage issues with Redis. To fix this issue run the command 'echo madvise > /sys/kernel/mm/transparent_hugepage/enabled' as root, and add it to your /etc/rc.local in order to retain the setting after a reboot. Redis must be restarted after THP is disabled (set to 'madvise' or 'never').");
    }
}

// ---- CPU affinity ----

/// CPUs of a cpulist (`0-3,8,10-14:2`: single CPUs and ranges with an
/// optional step), read as Redis's setcpuaffinity reads it; `None` for a
/// list it would ignore.
pub fn parse_cpulist(list: &str) -> Option<Vec<usize>> {
    /// CPUs a cpu_set_t can name.
    const MAX_CPU: usize = libc::CPU_SETSIZE as usize;
    let number = |s: &str| -> Option<usize> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok().filter(|&n| n < MAX_CPU)
    };
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((r, s)) => (r, number(s).filter(|&s| s > 0)?),
            None => (part, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let a = number(range)?;
                (a, a)
            }
        };
        if first > last {
            return None;
        }
        cpus.extend((first..=last).step_by(step));
    }
    Some(cpus)
}

/// Pin the calling thread to the CPUs of `list` (Redis's
/// redisSetCpuAffinity); an empty list leaves it as it is, a list that
/// does not parse is logged and ignored.
pub fn set_cpu_affinity(list: &str) {
    if list.is_empty() {
        return;
    }
    let Some(cpus) = parse_cpulist(list) else {
        warn!("Invalid CPU list '{list}': CPU affinity left as it is");
        return;
    };
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET is given CPUs
    // below CPU_SETSIZE (parse_cpulist checks), and sched_setaffinity only
    // reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            warn!(
                "Can't set the CPU affinity to '{list}': {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// `bio_cpulist`, for the background threads started after the
/// configuration was read (they pin themselves when they start).
static BIO_CPULIST: Mutex<String> = Mutex::new(String::new());

/// Record `bio_cpulist` for the background threads.
pub fn set_bio_cpulist(list: &str) {
    if let Ok(mut l) = BIO_CPULIST.lock() {
        *l = list.to_string();
    }
}

/// Called by a background thread as it starts: pin it to `bio_cpulist`.
pub fn pin_background_thread() {
    let list = BIO_CPULIST.lock().map(|l| l.clone()).unwrap_or_default();
    set_cpu_affinity(&list);
}

// ---- Process title ----

/// Where a title may be written, `[start, end)`, and where the original
/// arguments ended (`arg_end`): set once by [`make_title_room`].
static TITLE_AREA: Mutex<Option<TitleArea>> = Mutex::new(None);

#[derive(Clone, Copy)]
struct TitleArea {
    start: usize,
    end: usize,
    arg_end: usize,
}

extern "C" {
    /// The C library's environment (glibc's `__environ`), which `getenv`,
    /// `setenv` and Rust's `std::env` read.
    static mut environ: *mut *mut libc::c_char;
}

/// Make room for long process titles as Redis's spt_init does: when the
/// environment strings follow the arguments in memory (as exec lays them
/// out), they are copied to the heap and `environ` pointed at the copies,
/// so a title may run over the old environment as well. Called first thing
/// in `main`, while the process has one thread (nothing else reads
/// `environ` meanwhile). Without it, a title is cut to the arguments'
/// length. /proc/PID/environ shows the title's bytes afterwards, as it does
/// for Redis.
pub fn make_title_room() {
    let Ok(fields) = stat_fields(&[48, 49, 50, 51]) else {
        return;
    };
    let (arg_start, arg_end, env_start, env_end) = (fields[0], fields[1], fields[2], fields[3]);
    if arg_end <= arg_start {
        return;
    }
    let mut end = arg_end;
    if env_start == arg_end && env_end > env_start {
        // SAFETY: single-threaded (see above). `environ` is the C library's
        // NULL-terminated array of NUL-terminated strings; every string is
        // copied before `environ` changes, and the new array and strings are
        // leaked, so they live as long as the process, as the originals did.
        unsafe {
            let mut copies: Vec<*mut libc::c_char> = Vec::new();
            let mut p = environ;
            while !p.is_null() && !(*p).is_null() {
                copies.push(std::ffi::CStr::from_ptr(*p).to_owned().into_raw());
                p = p.add(1);
            }
            copies.push(std::ptr::null_mut());
            environ = Box::leak(copies.into_boxed_slice()).as_mut_ptr();
        }
        end = env_end;
    }
    if let Ok(mut area) = TITLE_AREA.lock() {
        *area = Some(TitleArea {
            start: arg_start,
            end,
            arg_end,
        });
    }
}

/// Show `title` as the process's command line (`ps`, /proc/PID/cmdline),
/// as Redis's setproctitle does: the title is written over the memory of
/// the original arguments, and of the environment after them when
/// [`make_title_room`] moved it away; it is cut to that room. The short
/// name (`comm`, 15 bytes) stays the executable's, so `pidof` and `pkill`
/// keep finding the server. After this, `std::env::args` reads the title.
pub fn set_process_title(title: &str) -> Result<(), String> {
    let kept = TITLE_AREA.lock().ok().and_then(|a| *a);
    let area = match kept {
        Some(area) => area,
        None => {
            let f = stat_fields(&[48, 49])?;
            TitleArea {
                start: f[0],
                end: f[1],
                arg_end: f[1],
            }
        }
    };
    if area.end <= area.start {
        return Err("empty argument area".into());
    }
    let room = area.end - area.start - 1;
    let bytes = title.as_bytes();
    let n = bytes.len().min(room);
    // SAFETY: [start, end) is this process's own argument area, as the
    // kernel reports it in /proc/self/stat, with the environment strings
    // after it when `make_title_room` moved them to the heap first: bytes
    // exec copied onto the initial stack, writable for the life of the
    // process. Nothing holds a Rust reference into it (std keeps only C
    // pointers to the argument strings, which stay valid: they end in the
    // NULs written here). The writes stay inside the area and leave its
    // last byte a NUL.
    unsafe {
        let bytes_area =
            std::slice::from_raw_parts_mut(area.start as *mut u8, area.end - area.start);
        bytes_area[..n].copy_from_slice(&bytes[..n]);
        bytes_area[n..].fill(0);
        // The kernel shows the whole argument area, NULs and all, unless
        // its last byte is not a NUL; then it shows the text up to the
        // first NUL (a title). A title shorter than the arguments marks
        // that byte so that the command line is the title alone, as
        // Redis's setproctitle does.
        let last = area.arg_end - 1 - area.start;
        if n < last {
            bytes_area[last] = b'.';
        }
    }
    Ok(())
}

/// Fields of /proc/self/stat by their number in proc(5) (48-51: arg_start,
/// arg_end, env_start, env_end).
fn stat_fields(which: &[usize]) -> Result<Vec<usize>, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| e.to_string())?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // are counted from the last ')'.
    let after = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or("unexpected /proc/self/stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3.
    which
        .iter()
        .map(|&n| {
            fields
                .get(n - 3)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("no field {n} in /proc/self/stat"))
        })
        .collect()
}

/// The executable's name as started (argv[0]), the `{title}` of the
/// server's own process title; read before any title is set.
static EXEC_NAME: Mutex<String> = Mutex::new(String::new());

/// Set the title from `proc-title-template` with `title` (the server's
/// argv[0] when `None`), Redis's redisSetProcTitle.
pub fn apply_proc_title(config: &Config, title: Option<&str>) -> Result<(), String> {
    let exec = EXEC_NAME.lock().map(|e| e.clone()).unwrap_or_default();
    let title = title.unwrap_or(&exec);
    let text = config
        .expand_proc_title(&config.proc_title_template, title)
        .ok_or("invalid proc-title-template")?;
    set_process_title(&text)
}

/// Remember argv[0] for `{title}` (called at startup, before any title).
pub fn remember_exec_name(argv0: &str) {
    if let Ok(mut e) = EXEC_NAME.lock() {
        *e = argv0.to_string();
    }
}

/// In a child just forked for a snapshot or an AOF rewrite (Redis's
/// redisFork and its callers, child side): its OOM score is a background
/// child's, its CPUs `cpulist`, its title `title` (Redis's names:
/// redis-rdb-bgsave, redis-rdb-to-slaves, redis-aof-rewrite).
pub fn enter_background_child(config: &Config, title: &str, cpulist: &str) {
    let _ = set_oom_score_adj(config, OomClass::BackgroundChild);
    if config.set_proc_title {
        let _ = apply_proc_title(config, Some(title));
    }
    set_cpu_affinity(cpulist);
}

// ---- Supervision ----

/// The supervision in effect (a [`SupervisedMode`] as u8: No, Upstart,
/// Systemd), for INFO and for the messages sent along the way.
static SUPERVISED: AtomicU8 = AtomicU8::new(0);
const SUPERVISED_UPSTART: u8 = 1;
const SUPERVISED_SYSTEMD: u8 = 2;

/// Set up supervision as `supervised` asks (Redis's redisIsSupervised):
/// `auto` picks upstart when $UPSTART_JOB is set, else systemd when
/// $NOTIFY_SOCKET is; upstart stops the process (SIGSTOP) until the
/// supervisor continues it; systemd gets a first STATUS. Done before the
/// listeners are bound, as Redis does.
pub fn start_supervision(mode: SupervisedMode) -> bool {
    let mode = match mode {
        SupervisedMode::Auto if std::env::var_os("UPSTART_JOB").is_some() => {
            SupervisedMode::Upstart
        }
        SupervisedMode::Auto if std::env::var_os("NOTIFY_SOCKET").is_some() => {
            SupervisedMode::Systemd
        }
        m => m,
    };
    match mode {
        SupervisedMode::Upstart => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                warn!("upstart supervision requested, but UPSTART_JOB not found!");
                return false;
            }
            info!("supervised by upstart, will stop to signal readiness.");
            // SAFETY: raising a signal at ourselves; SIGSTOP cannot be caught.
            unsafe { libc::raise(libc::SIGSTOP) };
            std::env::remove_var("UPSTART_JOB");
            SUPERVISED.store(SUPERVISED_UPSTART, Ordering::Relaxed);
            true
        }
        SupervisedMode::Systemd => {
            if systemd_send("STATUS=Redis is loading...\n") {
                info!("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
                SUPERVISED.store(SUPERVISED_SYSTEMD, Ordering::Relaxed);
                true
            } else {
                false
            }
        }
        SupervisedMode::No | SupervisedMode::Auto => false,
    }
}

/// Go to the background as Redis's daemonize: the process forks and the
/// parent exits with 0; the child leads a new session, with its standard
/// streams on /dev/null (a log to stdout goes nowhere). Called while the
/// process has one thread, before anything is bound.
pub fn daemonize() {
    // SAFETY: fork in a process with a single thread; the parent only
    // exits, the child goes on with everything it had.
    unsafe {
        match libc::fork() {
            -1 => {
                let e = std::io::Error::last_os_error();
                eprintln!("Can't fork to go to the background: {e}");
                libc::_exit(1);
            }
            0 => {}
            _ => libc::_exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}

/// INFO's `process_supervised`.
pub fn supervised_name() -> &'static str {
    match SUPERVISED.load(Ordering::Relaxed) {
        SUPERVISED_UPSTART => "upstart",
        SUPERVISED_SYSTEMD => "systemd",
        _ => "no",
    }
}

/// Tell systemd `message` (`READY=1\n`, `STATUS=…\n`, `STOPPING=1\n`)
/// when the server is supervised by it; otherwise nothing.
pub fn notify_systemd(message: &str) {
    if SUPERVISED.load(Ordering::Relaxed) == SUPERVISED_SYSTEMD {
        systemd_send(message);
    }
}

/// Send one sd_notify datagram to $NOTIFY_SOCKET (a path, or `@name` in
/// the abstract namespace), as libsystemd's sd_notify does. Failures are
/// logged with Redis's words.
fn systemd_send(message: &str) -> bool {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        warn!("systemd supervision error: NOTIFY_SOCKET not found!");
        return false;
    };
    let sent = UnixDatagram::unbound().and_then(|sock| {
        let bytes = target.as_encoded_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name)?
            }
            None => SocketAddr::from_pathname(&target)?,
        };
        sock.send_to_addr(message.as_bytes(), &addr)
    });
    match sent {
        Ok(_) => true,
        Err(e) => {
            warn!("systemd supervision error: sd_notify: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_as_redis_reads_them() {
        assert_eq!(parse_cpulist("0"), Some(vec![0]));
        assert_eq!(parse_cpulist("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpulist("10-16:3"), Some(vec![10, 13, 16]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("1-4:0"), None);
        assert_eq!(parse_cpulist("a"), None);
        assert_eq!(parse_cpulist("1,,2"), None);
    }

    #[test]
    fn proc_title_templates_expand_as_redis() {
        let c = Config::default();
        assert_eq!(
            c.expand_proc_title("{title} {listen-addr} {server-mode}", "kvstore")
                .as_deref(),
            Some("kvstore *:6379")
        );
        assert_eq!(
            c.expand_proc_title("{{x} {port}", "t").as_deref(),
            Some("{x} 6379")
        );
        assert_eq!(c.expand_proc_title("{nope}", "t"), None);
        assert_eq!(c.expand_proc_title("{title", "t"), None);
        assert_eq!(c.expand_proc_title("x {", "t"), None);
        // Valid means: not empty with an empty title.
        assert!(!c.valid_proc_title_template("{title}"));
        assert!(!c.valid_proc_title_template("  "));
        assert!(c.valid_proc_title_template("{title} {port}"));
    }
}
