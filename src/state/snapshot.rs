//! Snapshot scheduling: SAVE, BGSAVE in a forked child (the loop keeps
//! serving while the child writes the copy-on-write image), the `save`
//! points, loading at startup, and the status INFO persistence reports.

use std::time::Instant;

use tracing::{info, warn};

use super::{ClientState, Server};
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
    /// Bytes in use copied per second by the latest fork, in GB/s (Redis's
    /// stat_fork_rate; LATENCY DOCTOR grades it).
    pub fork_rate_gb_per_sec: f64,
    /// `dirty` when the running background save started.
    pub dirty_at_start: u64,
    pub saves: u64,
    /// Children forked, of every kind (INFO `total_forks`).
    pub forks: u64,
    /// Unix time of the last background save attempt.
    pub last_try_unix: i64,
    /// Read end of a pipe on which a failing child writes why it failed.
    pub child_errors: Option<std::fs::File>,
    /// The running child writes to replicas (diskless), not the dump file.
    pub child_to_socket: bool,
    /// Read end of the running child's reports (util::child_info), BGSAVE's
    /// or the AOF rewrite's: one child at a time.
    pub child_info: Option<std::fs::File>,
    /// What the running child reported (INFO `current_*`).
    pub child_stats: ChildStats,
    /// Copy-on-write peak of the last dump and the last rewrite's child.
    pub rdb_last_cow: u64,
    pub aof_last_cow: u64,
}

/// The running child's progress, as INFO persistence shows it.
#[derive(Debug, Default, Clone, Copy)]
pub struct ChildStats {
    pub cow_peak: u64,
    pub cow: u64,
    /// Unix ms of the `cow` reading (0: none yet).
    pub cow_updated_ms: i64,
    pub keys_processed: u64,
    /// Keys in the dataset when the child was forked.
    pub keys_total: u64,
}

impl Default for SnapshotState {
    fn default() -> Self {
        SnapshotState {
            child: None,
            scheduled: false,
            last_bgsave_ok: true,
            last_bgsave_secs: -1,
            latest_fork_usec: 0,
            fork_rate_gb_per_sec: 0.0,
            dirty_at_start: 0,
            saves: 0,
            forks: 0,
            last_try_unix: 0,
            child_errors: None,
            child_to_socket: false,
            child_info: None,
            child_stats: ChildStats::default(),
            rdb_last_cow: 0,
            aof_last_cow: 0,
        }
    }
}

/// The writer's options from the server's configuration. With a
/// replication history (a backlog), the dump records where in it it was
/// taken, so that a restart can continue with PSYNC.
pub fn save_options(srv: &Server) -> rdb::SaveOptions {
    let mut opts = rdb::SaveOptions::from_config(&srv.config, srv.used_memory());
    if srv.repl.backlog.is_some() {
        // A replica's stream is its master's: the master client's database.
        let stream_db = if srv.master.target.is_some() {
            srv.master
                .client_id
                .and_then(|id| srv.client_by_id(id))
                .map_or(srv.master.stream_db, |c| c.db)
        } else {
            srv.repl.cursor.selected_db.unwrap_or(0)
        };
        opts.repl = Some(rdb::ReplInfo {
            stream_db: stream_db as i64,
            id: srv.replid.clone(),
            offset: srv.repl.offset,
        });
    }
    opts.functions = srv.functions.codes();
    opts
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
    bgsave_with(srv, None, Default::default())
}

/// BGSAVE; with `to_pipe`, the child writes the image into that pipe,
/// framed by a `$EOF:<mark>` line and the mark (a diskless
/// synchronisation), instead of the dump file. Either way the image records
/// where in the replication stream it was taken (`save_options`).
pub fn bgsave_with(
    srv: &mut Server,
    to_pipe: Option<(std::fs::File, Vec<u8>)>,
    filter: super::replication::RdbFilter,
) -> Result<(), String> {
    if srv.snapshot.child.is_some() {
        return Err("Background save already in progress".into());
    }
    if srv.aof.rewrite.is_some() {
        return Err("Another child process is active (AOF?): can't BGSAVE right now".into());
    }
    let start = Instant::now();
    let to_socket = to_pipe.is_some();
    if !to_socket {
        srv.snapshot.last_try_unix = unix_time_ms() / 1000;
    }
    let parent = std::process::id() as libc::pid_t;
    let (errors_rd, errors_wr) = error_pipe();
    let reports = child_info_pipe(srv);
    // SAFETY: fork in a process whose other threads (jemalloc's, the
    // reclaimer, the lazyfree thread) hold no locks the child needs except
    // the allocator's, which
    // jemalloc makes fork-safe. The child only serialises memory, writes the
    // file and exits with _exit, without logging.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        drop((errors_rd, errors_wr, reports));
        srv.snapshot.child_info = None;
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
        child_reports_to(&reports);
        let title = if to_pipe.is_some() {
            "redis-rdb-to-slaves"
        } else {
            "redis-rdb-bgsave"
        };
        crate::process::enter_background_child(&srv.config, title, &srv.config.bgsave_cpulist);
        let dir = srv.config.dir.clone();
        let name = srv.config.dbfilename.clone();
        let mut opts = save_options(srv);
        if filter.exclude_functions {
            opts.functions.clear();
        }
        let dbs: &[crate::db::Db] = if filter.exclude_data { &[] } else { &srv.dbs };
        let written = match to_pipe {
            Some((pipe, mark)) => write_framed(dbs, &opts, pipe, &mark),
            None => rdb::save_to_file(&srv.dbs, &opts, &dir, &name, &parent_alive),
        };
        let code = match written {
            Ok(()) => {
                crate::util::child_info::finish(crate::util::child_info::Kind::RdbCow, 0);
                0
            }
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
    drop((errors_wr, reports));
    srv.snapshot.child_to_socket = to_socket;
    srv.snapshot.child_errors = errors_rd;
    record_fork(srv, start);
    srv.snapshot.child = Some((pid, start));
    srv.snapshot.dirty_at_start = srv.dirty;
    if to_socket {
        info!("Background RDB transfer started by pid {pid}");
    } else {
        info!("Background saving started by pid {pid}");
    }
    Ok(())
}

/// Account a fork that began at `started` (BGSAVE, a diskless transfer,
/// an AOF rewrite): INFO's latest_fork_usec, the fork rate LATENCY DOCTOR
/// grades, and the `fork` latency event.
pub fn record_fork(srv: &mut Server, started: Instant) {
    // The child shares the keyspace's pages: tables hold off resizing
    // (Redis's updateDictResizePolicy).
    crate::db::table::set_resize_allowed(false);
    srv.snapshot.forks += 1;
    let usec = started.elapsed().as_micros() as u64;
    srv.snapshot.latest_fork_usec = usec;
    srv.snapshot.fork_rate_gb_per_sec =
        srv.used_memory() as f64 * 1_000_000.0 / usec as f64 / (1024.0 * 1024.0 * 1024.0);
    srv.latency_add_sample_if_needed("fork", usec / 1000);
}

/// The image into a pipe as a diskless transfer sends it: `$EOF:<mark>`,
/// the RDB, the mark.
fn write_framed(
    dbs: &[crate::db::Db],
    opts: &rdb::SaveOptions,
    mut pipe: std::fs::File,
    mark: &[u8],
) -> std::io::Result<()> {
    use std::io::Write;
    // The parent's end is non-blocking; this one must block.
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&pipe);
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    pipe.write_all(b"$EOF:")?;
    pipe.write_all(mark)?;
    pipe.write_all(b"\r\n")?;
    rdb::write_rdb(dbs, opts, &mut pipe)?;
    pipe.write_all(mark)
}

/// A pipe for a diskless transfer: (parent's non-blocking read end, the
/// child's write end).
pub fn transfer_pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    match error_pipe() {
        (Some(r), Some(w)) => Ok((r, w)),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Open the report pipe of a child about to be forked: the parent keeps
/// the read end; the write end is for the child (`child_reports_to`), and
/// the parent drops its copy once forked.
pub fn child_info_pipe(srv: &mut Server) -> Option<std::os::fd::OwnedFd> {
    srv.snapshot.child_stats = ChildStats {
        keys_total: srv.dbs.iter().map(|d| d.len() as u64).sum(),
        ..ChildStats::default()
    };
    match crate::util::child_info::pipe() {
        Ok((r, w)) => {
            srv.snapshot.child_info = Some(r);
            Some(w)
        }
        Err(e) => {
            warn!("Can't open the child info pipe: {e}");
            srv.snapshot.child_info = None;
            None
        }
    }
}

/// In the child: report on the pipe from now on.
pub fn child_reports_to(w: &Option<std::os::fd::OwnedFd>) {
    if let Some(w) = w {
        crate::util::child_info::child_start(std::os::fd::AsRawFd::as_raw_fd(w));
    }
}

/// Read what the running child reported (Redis's receiveChildInfo).
pub fn receive_child_info(srv: &mut Server) {
    use crate::util::child_info::Kind;
    let Some(pipe) = srv.snapshot.child_info.as_mut() else {
        return;
    };
    for r in crate::util::child_info::drain(pipe) {
        let st = &mut srv.snapshot.child_stats;
        st.cow_peak = st.cow_peak.max(r.cow);
        match r.kind {
            Kind::Current => {
                st.cow = r.cow;
                st.cow_updated_ms = r.cow_updated_ms;
                st.keys_processed = r.keys;
            }
            Kind::RdbCow => srv.snapshot.rdb_last_cow = st.cow_peak,
            Kind::AofCow => srv.snapshot.aof_last_cow = st.cow_peak,
        }
    }
}

/// The child was reaped (or killed): its last reports, then no current
/// child.
pub fn child_info_done(srv: &mut Server) {
    crate::db::table::set_resize_allowed(srv.snapshot.child.is_none() && srv.aof.rewrite.is_none());
    receive_child_info(srv);
    srv.snapshot.child_info = None;
    srv.snapshot.child_stats = ChildStats::default();
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
    child_info_done(srv);
    // Only a reaped child has closed its end of the pipe.
    let errors = srv.snapshot.child_errors.take().filter(|_| r == pid);
    srv.snapshot.last_bgsave_secs = start.elapsed().as_secs() as i64;
    let ok = r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    if std::mem::take(&mut srv.snapshot.child_to_socket) {
        // A diskless transfer wrote no dump: nothing is saved.
        if !ok {
            let why = describe_child_failure(errors, status);
            warn!("Diskless transfer to replicas failed (child pid {pid}): {why}");
        }
        srv.replication_snapshot_done(ok);
        return;
    }
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
        // A child killed half way leaves its temporary file behind; Redis
        // times its removal then (a large file can take long to unlink).
        let timer = srv.latency_start();
        let _ = std::fs::remove_file(srv.config.dir.join(rdb::temp_name(pid)));
        if r == pid && libc::WIFSIGNALED(status) {
            srv.latency_end("rdb-unlink-temp-file", timer);
        }
    }
    srv.replication_snapshot_done(ok);
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
        child_info_done(srv);
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        let _ = std::fs::remove_file(srv.config.dir.join(rdb::temp_name(pid)));
    }
}

/// Stop the child because what it makes is no longer wanted (FLUSHALL; the
/// last replica waiting for it gone): as `kill_child`, and the replicas it
/// was for learn that it failed, as after Redis's killRDBChild. They are
/// dropped and come back for a new synchronization; replicas that came
/// meanwhile get the next snapshot.
pub fn abort_child(srv: &mut Server) {
    if srv.snapshot.child.is_none() {
        return;
    }
    srv.snapshot.child_to_socket = false;
    kill_child(srv);
    srv.replication_snapshot_done(false);
}

/// Cron work: reap the child, honour BGSAVE SCHEDULE and the save points.
pub fn cron(srv: &mut Server) {
    receive_child_info(srv);
    check_child(srv);
    if srv.snapshot.child.is_some() || srv.aof.rewrite.is_some() {
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
/// AOF commands replayed per slice of the event loop.
const LOAD_SLICE_COMMANDS: usize = 10_000;

/// Runs one command read from an AOF, without the client gates (the
/// commands layer provides it: the state layer does not know commands).
pub type Replay = fn(&mut Server, &mut ClientState, &[&[u8]]) -> Result<(), String>;

/// What part of the current file is being loaded.
pub enum LoadPhase {
    /// A dump still arriving, before its header did.
    Header,
    /// An RDB image (a dump, an AOF base, an old AOF's RDB preamble).
    Rdb(Box<rdb::LoadState>),
    /// A command log, from this offset.
    Commands { pos: usize },
}

/// A dataset being loaded at startup, a slice per turn of the event loop
/// (commands get -LOADING meanwhile): a dump, or an AOF's base and
/// incremental files in manifest order.
pub struct AsyncLoad {
    pub map: memmap2::Mmap,
    pub phase: LoadPhase,
    pub path: std::path::PathBuf,
    /// AOF files still to load after this one.
    pub rest: std::collections::VecDeque<std::path::PathBuf>,
    /// Loading an AOF (command logs allowed, truncation rules apply).
    pub aof: bool,
    pub started: Instant,
    /// Bytes of every file to load, and of the files already loaded.
    pub total_bytes: u64,
    pub done_bytes: u64,
    /// The client AOF commands run as (its database follows SELECTs).
    pub client: Box<ClientState>,
    pub keys: u64,
    pub expired: u64,
    /// Offset of the MULTI of a transaction not yet closed by EXEC.
    multi_start: Option<usize>,
    /// The dump is still arriving (a replica loads its master's dump as
    /// it is received).
    growing: Option<Growing>,
    /// The dump's replication history is this server's already (a master
    /// takes it as soon as its aux fields are read, so that the DELs of
    /// its expired keys follow it into the backlog slice by slice).
    history_restored: bool,
}

/// A dump file still being written: how much of it is there to load, and
/// whether that is all of it.
struct Growing {
    file: std::fs::File,
    available: usize,
    complete: bool,
}

impl AsyncLoad {
    /// The name of the file being loaded, for messages.
    fn file_name(&self) -> String {
        self.path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    }

    /// A load starting at `path` (then, for an AOF, the files in `rest`);
    /// `total_bytes` of all of them.
    fn new(
        map: memmap2::Mmap,
        phase: LoadPhase,
        path: std::path::PathBuf,
        rest: std::collections::VecDeque<std::path::PathBuf>,
        aof: bool,
        total_bytes: u64,
    ) -> AsyncLoad {
        AsyncLoad {
            map,
            phase,
            path,
            aof,
            rest,
            started: Instant::now(),
            total_bytes,
            done_bytes: 0,
            client: replay_client(),
            keys: 0,
            expired: 0,
            multi_start: None,
            growing: None,
            history_restored: false,
        }
    }

    /// Has the load consumed all that arrived of a dump still arriving?
    /// (The loop then sleeps until more does.)
    pub fn waiting(&self) -> bool {
        let Some(g) = self.growing.as_ref().filter(|g| !g.complete) else {
            return false;
        };
        match &self.phase {
            LoadPhase::Header => g.available < rdb::HEADER_LEN,
            LoadPhase::Rdb(st) => st.loaded_bytes() >= g.available || st.needs() > g.available,
            LoadPhase::Commands { .. } => false,
        }
    }

    /// More of the dump arrived (`available` bytes in all; `total` when
    /// known), or all of it (`complete`).
    pub fn grown(&mut self, available: u64, complete: bool, total: Option<u64>) {
        if let Some(g) = self.growing.as_mut() {
            g.available = available as usize;
            g.complete = complete;
            self.total_bytes = total.unwrap_or(available).max(available);
        }
    }

    /// Bytes consumed so far, all files together.
    pub fn loaded_bytes(&self) -> u64 {
        let here = match &self.phase {
            LoadPhase::Header => 0,
            LoadPhase::Rdb(st) => st.loaded_bytes(),
            LoadPhase::Commands { pos } => *pos,
        };
        self.done_bytes + here as u64
    }
}

fn map_file(path: &std::path::Path) -> Result<memmap2::Mmap, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    map_open_file(&file)
}

fn map_open_file(file: &std::fs::File) -> Result<memmap2::Mmap, String> {
    // SAFETY: read-only mapping; kvstore replaces dumps and AOF bases by
    // rename, only appends to incremental files after loading ended, and
    // only appends to a dump still arriving, whose loader reads no further
    // than what was written.
    unsafe { memmap2::Mmap::map(file) }.map_err(|e| e.to_string())
}

/// Map a dump still arriving again once it grew past the map (a map is of
/// the file as it was).
fn remap_grown(load: &mut AsyncLoad) -> Result<(), String> {
    if let Some(g) = &load.growing {
        if load.map.len() < g.available {
            load.map = map_open_file(&g.file)
                .map_err(|e| format!("mapping {}: {e}", load.path.display()))?;
        }
    }
    Ok(())
}

/// The client AOF commands run as. It may never block: a blocking command
/// in a (hand-made) AOF answers at once, as Redis's AOF client does.
fn replay_client() -> Box<ClientState> {
    let mut c = ClientState::new(0, -1, "aof".into(), String::new(), false, true, true);
    c.set_superuser();
    c.deny_blocking = true;
    Box::new(c)
}

/// The phase a file starts in: an RDB image, or a command log.
fn first_phase(map: &memmap2::Mmap, path: &std::path::Path) -> Result<LoadPhase, String> {
    if crate::persistence::aof::is_rdb(map) {
        let st =
            rdb::load_begin(map).map_err(|e| format!("Bad RDB file {}: {e}", path.display()))?;
        Ok(LoadPhase::Rdb(Box::new(st)))
    } else {
        Ok(LoadPhase::Commands { pos: 0 })
    }
}

/// Start loading the dataset at startup: with `appendonly yes`, the AOF
/// (base and incremental files from its manifest; an old single
/// appendonly.aof is moved into the AOF directory first, as Redis 7
/// upgrades it) and never the dump, as Redis does; otherwise the dump, if
/// there is one.
pub fn begin_startup_load(srv: &mut Server) -> Result<(), String> {
    let manifest = crate::state::aof::read_manifest(srv)?;
    if srv.config.appendonly {
        srv.aof.manifest = manifest;
        crate::state::aof::upgrade_old_aof(srv)?;
        srv.loading = begin_aof_load(srv)?;
        return Ok(());
    }
    srv.aof.manifest = manifest;
    let path = srv.config.dir.join(&srv.config.dbfilename);
    if !path.exists() {
        return Ok(());
    }
    begin_rdb_load(srv, path)
}

/// Start loading the dump at `path` in slices of the loop (clients get
/// `-LOADING` meanwhile).
pub fn begin_rdb_load(srv: &mut Server, path: std::path::PathBuf) -> Result<(), String> {
    let bad = |e: String| format!("Bad RDB file {}: {e}", path.display());
    let map = map_file(&path).map_err(bad)?;
    let state = rdb::load_begin(&map).map_err(bad)?;
    info!("Loading RDB {} ({} bytes)", path.display(), map.len());
    let total = map.len() as u64;
    srv.loading = Some(AsyncLoad::new(
        map,
        LoadPhase::Rdb(Box::new(state)),
        path,
        Default::default(),
        false,
        total,
    ));
    Ok(())
}

/// Start loading the dump at `path` while it is still being written (a
/// replica's full sync): `AsyncLoad::grown` says how far it got, the load
/// follows in slices of the loop and ends once the dump is complete.
pub fn begin_growing_rdb_load(srv: &mut Server, path: std::path::PathBuf) -> Result<(), String> {
    let file =
        std::fs::File::open(&path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    // SAFETY: read-only mapping of what was written so far; the loader
    // reads only the part `grown` said is there, which is never rewritten.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| format!("mapping {}: {e}", path.display()))?;
    info!("Loading RDB {} as it is received", path.display());
    let mut load = AsyncLoad::new(map, LoadPhase::Header, path, Default::default(), false, 0);
    load.growing = Some(Growing {
        file,
        available: 0,
        complete: false,
    });
    srv.loading = Some(load);
    Ok(())
}

/// Prepare to load the AOF the manifest in memory lists (`None` when it
/// lists nothing, or only empty files).
fn begin_aof_load(srv: &mut Server) -> Result<Option<AsyncLoad>, String> {
    let dir = srv.config.dir.join(&srv.config.appenddirname);
    let files: Vec<std::path::PathBuf> = srv
        .aof
        .manifest
        .load_order()
        .map(|f| dir.join(&f.name))
        .collect();
    let mut total = 0;
    for f in &files {
        match std::fs::metadata(f) {
            Ok(m) => total += m.len(),
            Err(e) => {
                return Err(format!(
                    "Unable to obtain the AOF file {} length. stat: {e}",
                    f.file_name().unwrap_or_default().to_string_lossy()
                ))
            }
        }
    }
    if files.is_empty() || total == 0 {
        return Ok(None);
    }
    let mut rest: std::collections::VecDeque<_> = files.into();
    let path = rest.pop_front().expect("not empty");
    let map = map_file(&path).map_err(|e| {
        format!(
            "Fatal error: can't open the append log file {}: {e}",
            path.display()
        )
    })?;
    let phase = first_phase(&map, &path)?;
    info!("Loading the AOF from {} ({total} bytes)", dir.display());
    Ok(Some(AsyncLoad::new(map, phase, path, rest, true, total)))
}

/// DEBUG LOADAOF: read the manifest again and load the AOF into the (empty)
/// databases at once, feeding nothing back to the AOF meanwhile.
pub fn load_aof_now(srv: &mut Server, replay: Replay) -> Result<(), String> {
    srv.aof.manifest = crate::state::aof::read_manifest(srv)?;
    if srv.aof.manifest.load_order().next().is_none() {
        // Redis's AOF_NOT_EXIST, which DEBUG LOADAOF treats as fatal.
        return Err("DEBUG LOADAOF: there is no append only file to load".into());
    }
    let Some(mut load) = begin_aof_load(srv)? else {
        return Ok(());
    };
    srv.feed.suspend();
    let result = loop {
        match load_slice(srv, &mut load, replay) {
            Ok(true) => continue,
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    srv.feed.resume();
    result
}

/// Load the next slice. `Ok(true)` while more remains; an error means the
/// data is bad and the server must stop.
pub fn continue_loading(srv: &mut Server, replay: Replay) -> Result<bool, String> {
    let Some(mut load) = srv.loading.take() else {
        return Ok(false);
    };
    let more = load_slice(srv, &mut load, replay)?;
    if more {
        srv.loading = Some(load);
        return Ok(true);
    }
    let secs = load.started.elapsed().as_secs_f64();
    if load.aof {
        info!("DB loaded from append only file: {secs:.3} seconds");
    } else {
        info!(
            "DB loaded from disk: {secs:.3} seconds ({} keys, {} expired keys skipped)",
            load.keys, load.expired
        );
    }
    srv.rdb_last_load_keys = load.keys;
    srv.rdb_last_load_expired = load.expired;
    Ok(false)
}

/// One slice of the current file; moves on to the next file at its end.
fn load_slice(srv: &mut Server, load: &mut AsyncLoad, replay: Replay) -> Result<bool, String> {
    let name = load.file_name();
    remap_grown(load)?;
    match &mut load.phase {
        LoadPhase::Header => {
            let g = load
                .growing
                .as_ref()
                .expect("only a dump still arriving waits");
            if g.available < rdb::HEADER_LEN && !g.complete {
                return Ok(true);
            }
            let st = rdb::load_begin(&load.map[..])
                .map_err(|e| format!("Bad RDB file {}: {e}", load.path.display()))?;
            load.phase = LoadPhase::Rdb(Box::new(st));
            Ok(true)
        }
        LoadPhase::Rdb(st) => {
            let mut opts = rdb::LoadOptions::from_config(&srv.config);
            opts.checksum &= !srv.skip_checksum_validation;
            opts.keep_expired = load.aof || srv.master.target.is_some();
            opts.collect_expired = !opts.keep_expired;
            // Into the dataset being built aside (async loading), or the
            // dataset itself.
            let dbs = match srv.loading_aside.as_mut() {
                Some(aside) => &mut aside.dbs,
                None => &mut srv.dbs,
            };
            let (data, complete) = match &load.growing {
                Some(g) => (&load.map[..g.available.min(load.map.len())], g.complete),
                None => (&load.map[..], true),
            };
            if let Err(e) = rdb::load_step_partial(dbs, &opts, data, complete, st, LOAD_SLICE_KEYS)
            {
                return Err(if load.aof {
                    format!("Error reading the RDB base file {name}, AOF loading aborted: {e}")
                } else {
                    format!("Bad RDB file {}: {e}", load.path.display())
                });
            }
            // A master's keys that expired while it was down: its replicas,
            // which continue its history, learn they are gone after the
            // point the dump was taken at (Redis's RDBFLAGS_FEED_REPL). The
            // history comes first (aux fields precede the keys); each
            // slice's DELs then go to the feed, which the loop drains into
            // the backlog, so a dump of many expired keys costs no memory.
            if opts.collect_expired {
                if !load.history_restored {
                    if let Some(repl) = st.stats.repl() {
                        srv.restore_replication_history(repl);
                        load.history_restored = true;
                    }
                }
                let del: &[u8] = if srv.config.lazyfree_lazy_expire {
                    b"UNLINK"
                } else {
                    b"DEL"
                };
                for (db, key) in std::mem::take(&mut st.stats.expired_keys) {
                    srv.propagate_only_to(db, &[del, &key], super::feed::TO_REPLICAS);
                }
            }
            if !st.done {
                return Ok(true);
            }
            load.keys += st.stats.keys;
            load.expired += st.stats.expired_skipped;
            if st.stats.empty_skipped > 0 {
                info!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.",
                    st.stats.keys, st.stats.expired_skipped, st.stats.empty_skipped
                );
            }
            // Not from an AOF's base (older builds wrote the history into
            // it): the incremental files go past its offset, and a replica
            // continuing from it would apply them twice. Redis restores it
            // from a dump only.
            if !load.history_restored && !load.aof {
                if let Some(repl) = st.stats.repl() {
                    srv.restore_replication_history(repl);
                }
            }
            // The dump's function libraries (a library of the same name is
            // replaced, as Redis loads them).
            let functions = match srv.loading_aside.as_mut() {
                Some(aside) => &mut aside.functions,
                None => &mut srv.functions,
            };
            for code in std::mem::take(&mut st.stats.functions) {
                functions
                    .load(&code, true)
                    .map_err(|e| format!("Failed loading library from {name}: {e}"))?;
            }
            if !load.aof {
                return Ok(false);
            }
            // An RDB base may be followed by a command log (old-style AOF).
            let pos = st.loaded_bytes();
            load.phase = LoadPhase::Commands { pos };
            Ok(true)
        }
        LoadPhase::Commands { pos } => {
            let data: &[u8] = &load.map;
            let mut reader = crate::persistence::aof::CommandReader::new(data, *pos);
            let mut argv = Vec::new();
            for _ in 0..LOAD_SLICE_COMMANDS {
                match reader.next_command(&mut argv) {
                    None => {
                        // Annotations after the last command were read.
                        *pos = reader.offset();
                        break;
                    }
                    Some(Ok(())) => {
                        let is = |n: &str| argv[0].eq_ignore_ascii_case(n.as_bytes());
                        if is("multi") {
                            load.multi_start = Some(*pos);
                        } else if is("exec") {
                            load.multi_start = None;
                        }
                        if srv.config.key_load_delay != 0 {
                            crate::persistence::rdb::debug_delay(srv.config.key_load_delay);
                        }
                        // Nothing expires while the log is replayed (Redis's
                        // keyIsExpired while loading): its commands ran on
                        // keys that were alive then.
                        srv.replaying_aof = true;
                        let replayed = replay(srv, &mut load.client, &argv);
                        srv.replaying_aof = false;
                        replayed.map_err(|e| format!("{e} reading the append only file {name}"))?;
                        *pos = reader.offset();
                    }
                    Some(Err(crate::persistence::aof::LogError::Format { .. })) => {
                        return Err(format!("Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"));
                    }
                    Some(Err(crate::persistence::aof::LogError::Truncated { valid_up_to })) => {
                        return finish_truncated(srv, load, valid_up_to).map(|_| false);
                    }
                }
            }
            if *pos < data.len() {
                return Ok(true);
            }
            if let Some(at) = load.multi_start {
                // A transaction cut by the end of the file is not applied.
                warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
                return finish_truncated(srv, load, at).map(|_| false);
            }
            info!(
                "DB loaded from {} file {name}: {:.3} seconds",
                if load.done_bytes == 0 && srv.aof.manifest.base.is_some() {
                    "base"
                } else {
                    "incr"
                },
                load.started.elapsed().as_secs_f64()
            );
            next_file(load)
        }
    }
}

/// Move on to the next AOF file, if any.
fn next_file(load: &mut AsyncLoad) -> Result<bool, String> {
    load.done_bytes += load.map.len() as u64;
    let Some(path) = load.rest.pop_front() else {
        return Ok(false);
    };
    load.map = map_file(&path).map_err(|e| {
        format!(
            "Fatal error: can't open the append log file {}: {e}",
            path.display()
        )
    })?;
    load.phase = first_phase(&load.map, &path)?;
    load.path = path;
    load.multi_start = None;
    // A fresh file starts in database 0, as a new client.
    load.client.db = 0;
    Ok(true)
}

/// The current file ends in the middle of a command: with
/// `aof-load-truncated` (and only in the last file) cut it there and go
/// on, as Redis does; otherwise stop.
fn finish_truncated(
    srv: &mut Server,
    load: &mut AsyncLoad,
    valid_up_to: usize,
) -> Result<(), String> {
    let name = load.file_name();
    if !srv.config.aof_load_truncated {
        return Err(format!("Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."));
    }
    if !load.rest.is_empty() {
        return Err(format!(
            "Fatal error: the truncated file {name} is not the last file"
        ));
    }
    warn!("!!! Warning: short read while loading the AOF file {name}!!!");
    warn!("!!! Truncating the AOF {name} at offset {valid_up_to} !!!");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&load.path)
        .map_err(|e| format!("Error truncating the AOF file {name}: {e}"))?;
    f.set_len(valid_up_to as u64)
        .map_err(|e| format!("Error truncating the AOF file {name}: {e}"))?;
    warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
    load.done_bytes += valid_up_to as u64;
    Ok(())
}
