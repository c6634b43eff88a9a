//! Snapshot scheduling: SAVE, BGSAVE in a forked child (the loop keeps
//! serving while the child writes the copy-on-write image), the `save`
//! points, loading at startup, and the status INFO persistence reports.

use std::time::Instant;

use tracing::{info, warn};

use super::Server;
use crate::persistence::rdb;
use crate::util::unix_time_ms;

/// Seconds to wait before retrying after a failed background save (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY).
const BGSAVE_RETRY_DELAY_SECS: i64 = 5;

/// State of snapshots, for INFO persistence and the cron.
#[derive(Debug)]
pub struct SnapshotState {
    /// Running background save: child pid and start time.
    pub child: Option<(libc::pid_t, Instant)>,
    /// BGSAVE SCHEDULE asked for a save after the running one.
    pub scheduled: bool,
    pub last_bgsave_ok: bool,
    pub last_bgsave_secs: i64,
    pub latest_fork_usec: u64,
    /// `dirty` when the running background save started.
    pub dirty_at_start: u64,
    pub saves: u64,
    /// Unix time of the last background save attempt.
    pub last_try_unix: i64,
    /// Read end of a pipe on which a failing child writes why it failed.
    pub child_errors: Option<std::fs::File>,
}

impl Default for SnapshotState {
    fn default() -> Self {
        SnapshotState {
            child: None,
            scheduled: false,
            last_bgsave_ok: true,
            last_bgsave_secs: -1,
            latest_fork_usec: 0,
            dirty_at_start: 0,
            saves: 0,
            last_try_unix: 0,
            child_errors: None,
        }
    }
}

/// The writer's options from the server's configuration.
pub fn save_options(srv: &Server) -> rdb::SaveOptions {
    rdb::SaveOptions::from_config(&srv.config, srv.used_memory())
}

/// The configured save points as (seconds, changes).
pub fn save_points(srv: &Server) -> Vec<(i64, u64)> {
    let nums: Vec<u64> = srv
        .config
        .save
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    nums.chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0] as i64, c[1]))
        .collect()
}

/// SAVE: write the snapshot now, blocking (as Redis does).
pub fn save(srv: &mut Server) -> Result<(), String> {
    if srv.snapshot.child.is_some() {
        return Err("Background save already in progress".into());
    }
    let start = Instant::now();
    let dir = srv.config.dir.clone();
    let name = srv.config.dbfilename.clone();
    match rdb::save_to_file(&srv.dbs, &save_options(srv), &dir, &name, &|| true) {
        Ok(()) => {
            srv.dirty = 0;
            srv.lastsave_unix = unix_time_ms() / 1000;
            srv.snapshot.saves += 1;
            srv.snapshot.last_bgsave_ok = true;
            info!("DB saved on disk in {:.3}s", start.elapsed().as_secs_f64());
            Ok(())
        }
        Err(e) => {
            warn!("Failed saving the DB to {}: {e}", dir.join(&name).display());
            Err(e.to_string())
        }
    }
}

/// BGSAVE: fork a child that writes the snapshot from the copy-on-write
/// image of memory; the parent goes back to serving at once.
pub fn bgsave(srv: &mut Server) -> Result<(), String> {
    if srv.snapshot.child.is_some() {
        return Err("Background save already in progress".into());
    }
    let start = Instant::now();
    srv.snapshot.last_try_unix = unix_time_ms() / 1000;
    let parent = std::process::id() as libc::pid_t;
    let (errors_rd, errors_wr) = error_pipe();
    // SAFETY: fork in a process whose other threads (jemalloc's, the
    // reclaimer, the lazyfree thread) hold no locks the child needs except
    // the allocator's, which
    // jemalloc makes fork-safe. The child only serialises memory, writes the
    // file and exits with _exit, without logging.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        drop((errors_rd, errors_wr));
        srv.snapshot.last_bgsave_ok = false;
        warn!("Can't save in background: fork: {e}");
        return Err(format!("fork failed: {e}"));
    }
    if pid == 0 {
        // Die with the parent: a child that outlives a killed server would
        // race a restarted one. The parent may already be gone by the time
        // the death signal is armed, so check after arming it.
        // SAFETY: prctl/getppid have no memory effects.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let parent_alive = || unsafe { libc::getppid() } == parent;
        if !parent_alive() {
            // SAFETY: as below.
            unsafe { libc::_exit(1) };
        }
        drop(errors_rd);
        let dir = srv.config.dir.clone();
        let name = srv.config.dbfilename.clone();
        let code = match rdb::save_to_file(&srv.dbs, &save_options(srv), &dir, &name, &parent_alive)
        {
            Ok(()) => 0,
            Err(e) => {
                if let Some(mut w) = errors_wr {
                    use std::io::Write;
                    let _ = w.write_all(e.to_string().as_bytes());
                }
                1
            }
        };
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    drop(errors_wr);
    srv.snapshot.child_errors = errors_rd;
    srv.snapshot.latest_fork_usec = start.elapsed().as_micros() as u64;
    srv.snapshot.child = Some((pid, start));
    srv.snapshot.dirty_at_start = srv.dirty;
    info!("Background saving started by pid {pid}");
    Ok(())
}

/// Reap a finished background save (called from the cron).
pub fn check_child(srv: &mut Server) {
    let Some((pid, start)) = srv.snapshot.child else {
        return;
    };
    let mut status = 0;
    // SAFETY: waitpid on our own child, non-blocking.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r == 0 {
        return;
    }
    if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
        return;
    }
    srv.snapshot.child = None;
    // Only a reaped child has closed its end of the pipe.
    let errors = srv.snapshot.child_errors.take().filter(|_| r == pid);
    srv.snapshot.last_bgsave_secs = start.elapsed().as_secs() as i64;
    let ok = r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    if ok {
        srv.dirty = srv.dirty.saturating_sub(srv.snapshot.dirty_at_start);
        srv.lastsave_unix = unix_time_ms() / 1000;
        srv.snapshot.saves += 1;
        srv.snapshot.last_bgsave_ok = true;
        info!("Background saving terminated with success");
    } else {
        srv.snapshot.last_bgsave_ok = false;
        let why = describe_child_failure(errors, status);
        warn!("Background saving error (child pid {pid}): {why}");
        // A child killed half way leaves its temporary file behind.
        let _ = std::fs::remove_file(srv.config.dir.join(format!("temp-{pid}.rdb")));
    }
}

/// A pipe for the child's failure reason (`None`s if one cannot be made:
/// the save still runs, only the reason is not reported).
fn error_pipe() -> (Option<std::fs::File>, Option<std::fs::File>) {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into fds.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return (None, None);
    }
    // The parent's end never blocks the loop, whatever the child does.
    // SAFETY: fcntl on a descriptor we just created.
    unsafe { libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK) };
    // SAFETY: both descriptors were just created and are owned by nobody else.
    unsafe {
        (
            Some(std::fs::File::from_raw_fd(fds[0])),
            Some(std::fs::File::from_raw_fd(fds[1])),
        )
    }
}

/// Why a background save failed: what the child wrote on its error pipe,
/// else how it ended.
fn describe_child_failure(errors: Option<std::fs::File>, status: libc::c_int) -> String {
    let mut text = String::new();
    if let Some(mut f) = errors {
        use std::io::Read;
        // The child has exited, so its write end is closed and this ends.
        let _ = f.by_ref().take(4096).read_to_string(&mut text);
    }
    if !text.is_empty() {
        return text;
    }
    if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exit status {}", libc::WEXITSTATUS(status))
    }
}

/// Stop a running background save (shutdown, FLUSHALL).
pub fn kill_child(srv: &mut Server) {
    srv.snapshot.child_errors = None;
    if let Some((pid, _)) = srv.snapshot.child.take() {
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        let _ = std::fs::remove_file(srv.config.dir.join(format!("temp-{pid}.rdb")));
    }
}

/// Cron work: reap the child, honour BGSAVE SCHEDULE and the save points.
pub fn cron(srv: &mut Server) {
    check_child(srv);
    if srv.snapshot.child.is_some() {
        return;
    }
    let now = unix_time_ms() / 1000;
    if srv.snapshot.scheduled {
        srv.snapshot.scheduled = false;
        let _ = bgsave(srv);
        return;
    }
    let retry_ok =
        srv.snapshot.last_bgsave_ok || now - srv.snapshot.last_try_unix > BGSAVE_RETRY_DELAY_SECS;
    for (secs, changes) in save_points(srv) {
        if srv.dirty >= changes && now - srv.lastsave_unix >= secs && retry_ok {
            info!("{changes} changes in {secs} seconds. Saving...");
            let _ = bgsave(srv);
            break;
        }
    }
}

/// Refuse writes after a failed background save (stop-writes-on-bgsave-error).
pub fn writes_refused(srv: &Server) -> bool {
    srv.config.stop_writes_on_bgsave_error
        && !srv.snapshot.last_bgsave_ok
        && !save_points(srv).is_empty()
}

/// Keys loaded per slice of the event loop while a dump loads at startup
/// (a few milliseconds of work, so `-LOADING` replies stay prompt).
const LOAD_SLICE_KEYS: usize = 10_000;

/// A dump being loaded at startup, a slice per turn of the event loop.
pub struct AsyncLoad {
    pub map: memmap2::Mmap,
    pub state: rdb::LoadState,
    pub path: std::path::PathBuf,
}

/// Start loading `dir/dbfilename` (if it exists) in the background of the
/// event loop: clients connecting meanwhile get `-LOADING`.
pub fn begin_startup_load(srv: &mut Server) -> Result<(), String> {
    let path = srv.config.dir.join(&srv.config.dbfilename);
    if !path.exists() {
        return Ok(());
    }
    let bad = |e: String| format!("Bad RDB file {}: {e}", path.display());
    let file = std::fs::File::open(&path).map_err(|e| bad(e.to_string()))?;
    // SAFETY: read-only mapping; dumps are replaced by rename, never rewritten in place.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| bad(e.to_string()))?;
    let state = rdb::load_begin(&map).map_err(bad)?;
    info!("Loading RDB {} ({} bytes)", path.display(), map.len());
    srv.loading = Some(AsyncLoad { map, state, path });
    Ok(())
}

/// Load the next slice. `Ok(true)` while more remains; an error means the
/// file is bad and the server must stop.
pub fn continue_loading(srv: &mut Server) -> Result<bool, String> {
    let Some(mut load) = srv.loading.take() else {
        return Ok(false);
    };
    if let Err(e) = rdb::load_step(
        &mut srv.dbs,
        &rdb::LoadOptions::from_config(&srv.config),
        &load.map,
        &mut load.state,
        LOAD_SLICE_KEYS,
    ) {
        return Err(format!("Bad RDB file {}: {e}", load.path.display()));
    }
    if !load.state.done {
        srv.loading = Some(load);
        return Ok(true);
    }
    let stats = &load.state.stats;
    info!(
        "DB loaded from disk: {:.3} seconds ({} keys, {} expired keys skipped, RDB version {})",
        load.state.started().elapsed().as_secs_f64(),
        stats.keys,
        stats.expired_skipped,
        stats.version
    );
    srv.rdb_last_load_keys = stats.keys;
    srv.rdb_last_load_expired = stats.expired_skipped;
    Ok(false)
}
