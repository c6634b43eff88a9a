//! The append-only file at run time (Redis's aof.c): the AOF consumes the
//! propagation feed, writes it to the newest incremental file and syncs it
//! as `appendfsync` says; rewrites make a new base in a forked child; the
//! manifest is replaced atomically after each change of files.
//!
//! Durability, as Redis promises it: the loop's `before_sleep` hands the
//! iteration's feed to the AOF and `write`s it *before* any reply of that
//! iteration is written, so no client sees a reply reflecting a write that
//! has not reached the kernel; under `always` the `fdatasync` also happens
//! there, before the replies (so one fsync covers every write of the
//! iteration: group commit, at the cost of the loop waiting for it, as in
//! Redis); under `everysec` a background thread syncs once a second; under
//! `no` the kernel decides.
//!
//! Fork safety: a BGSAVE or rewrite child inherits the AOF descriptor and
//! the fsync thread's channel but never uses either (it only serialises
//! memory and `_exit`s).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::feed::{FeedCursor, TO_AOF};
use super::Server;
use crate::config::{Config, FsyncPolicy};
use crate::persistence::aof::{self as format, AofFile, FileKind, Manifest};
use crate::persistence::rdb;

/// An `everysec` fsync still running after this long, with writes going on
/// beside it, counts in `aof_delayed_fsync` (Redis's 2 seconds, there the
/// longest a write is postponed for it).
const SLOW_FSYNC: Duration = Duration::from_secs(2);

/// Whether the AOF is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AofStatus {
    #[default]
    Off,
    On,
    /// Turned on at run time: writes are kept in the new incremental file,
    /// but the AOF counts as on only once the first base exists.
    WaitRewrite,
}

/// Where the delay between failing automatic rewrites stands.
#[derive(Debug, Default, Clone, Copy)]
pub struct RewriteLimit {
    delay_minutes: i64,
    /// Unix seconds before which no automatic rewrite starts (0: none).
    next_time: i64,
}

/// A rewrite child at work.
#[derive(Debug)]
pub struct RewriteChild {
    pub pid: libc::pid_t,
    pub started: Instant,
    /// Incremental files (the newest ones) that hold writes made after the
    /// child's snapshot: they stay after the new base is installed.
    pub keep_incrs: usize,
    /// The base is an RDB image (`aof-use-rdb-preamble` at the fork).
    pub rdb: bool,
}

/// The background fsync thread (Redis's bio job): it syncs a file up to
/// the AOF offset it is given, publishes that offset and wakes the loop
/// through an eventfd (registered in the loop's poll), so the loop never
/// waits for a disk.
struct Syncer {
    tx: Sender<(File, u64)>,
    /// Fsyncs of the AOF queued or running, closes aside (INFO
    /// aof_pending_bio_fsync).
    pending: Arc<AtomicU32>,
    /// AOF offset known to be on disk.
    synced: Arc<AtomicU64>,
    /// The errno of the last fsync of the AOF if it failed, 0 once one
    /// succeeds (Redis's aof_bio_fsync_status and aof_bio_fsync_errno):
    /// writes are refused meanwhile.
    error: Arc<AtomicI32>,
    /// Written by the thread after each fsync; read by the loop.
    eventfd: std::os::fd::OwnedFd,
}

impl Syncer {
    /// `sleep_us`: microseconds slept before each fsync (DEBUG
    /// aof-fsync-sleep, a test aid standing for a slow disk).
    fn start(sleep_us: Arc<AtomicU64>) -> std::io::Result<Syncer> {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let eventfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let (tx, rx) = channel::<(File, u64)>();
        let pending = Arc::new(AtomicU32::new(0));
        let synced = Arc::new(AtomicU64::new(0));
        let error = Arc::new(AtomicI32::new(0));
        let (p, s, f) = (pending.clone(), synced.clone(), error.clone());
        std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || {
                crate::process::pin_background_thread();
                for (file, upto) in rx {
                    let sleep = sleep_us.load(Ordering::Relaxed);
                    if sleep > 0 {
                        std::thread::sleep(Duration::from_micros(sleep));
                    }
                    // A file only being closed (`upto` 0) moves no status,
                    // as Redis's close job.
                    match file.sync_data() {
                        Ok(()) if upto > 0 => {
                            s.fetch_max(upto, Ordering::AcqRel);
                            f.store(0, Ordering::Release);
                        }
                        Ok(()) => {}
                        Err(e) if upto > 0 => {
                            let errno = e.raw_os_error().unwrap_or(libc::EIO);
                            if f.swap(errno, Ordering::AcqRel) == 0 {
                                warn!(
                                    "Fail to fsync the AOF file: {}",
                                    crate::config::os_error_text(&e)
                                );
                            }
                        }
                        Err(e) => warn!(
                            "Fail to fsync a closed AOF file: {}",
                            crate::config::os_error_text(&e)
                        ),
                    }
                    if upto > 0 {
                        p.fetch_sub(1, Ordering::AcqRel);
                    }
                    let one: u64 = 1;
                    // SAFETY: writing 8 bytes to our eventfd.
                    unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
                }
            })?;
        Ok(Syncer {
            tx,
            pending,
            synced,
            error,
            eventfd,
        })
    }

    /// Queue an fsync of `file`; `upto` is the AOF offset it makes durable
    /// (0 for a file that is only being closed).
    ///
    /// A file only being closed is not an AOF fsync (Redis's close job, on
    /// a thread of its own): it counts neither in `aof_pending_bio_fsync`
    /// nor as an fsync in progress (which would hold the next `everysec`
    /// fsync back and count the writes beside it as delayed).
    fn submit(&self, file: File, upto: u64) {
        if upto > 0 {
            self.pending.fetch_add(1, Ordering::AcqRel);
        }
        if self.tx.send((file, upto)).is_err() && upto > 0 {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The append-only file's state.
#[derive(Default)]
pub struct Aof {
    pub status: AofStatus,
    pub manifest: Manifest,
    /// The newest incremental file, opened for appending.
    file: Option<File>,
    /// Bytes of the feed not yet written (Redis's aof_buf).
    pub buf: Vec<u8>,
    cursor: FeedCursor,
    /// Size of the base plus every incremental file (INFO aof_current_size).
    pub current_size: u64,
    /// Size of the AOF after the last rewrite (INFO aof_base_size).
    pub base_size: u64,
    last_fsync: Option<Instant>,
    /// Since when writes have gone on beside a running `everysec` fsync
    /// (one running past 2 s counts in `aof_delayed_fsync`).
    beside_fsync_since: Option<Instant>,
    pub delayed_fsync: u64,
    syncer: Option<Syncer>,
    /// Bytes handed to the AOF since it was opened (the offset a turn's
    /// replies are held against), and of those the bytes the kernel has
    /// taken (written) — for `everysec` and `no`, what replies wait for.
    pub appended: u64,
    pub written: u64,
    /// The io_uring engine (`None`: write(2) on the loop).
    pub uring: Option<super::aof_uring::Uring>,
    engine_chosen: bool,
    /// Clients with replies held until an fsync completes, as (slot, id).
    pub held_clients: Vec<(usize, u64)>,
    /// The loop has nothing else to do this turn (no buffered input): an
    /// `always` fsync may run inline, sparing the hand-off to the thread.
    pub inline_fsync: bool,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds slept before each write.
    pub flush_sleep_us: u64,
    /// Microseconds the fsync thread sleeps before each fsync (DEBUG
    /// aof-fsync-sleep).
    pub fsync_sleep_us: Arc<AtomicU64>,
    /// Offset synced by an inline fsync.
    inline_synced: u64,
    /// Unix second of the last `#TS:` annotation written.
    last_timestamp: i64,
    pub last_write_ok: bool,
    pub last_write_error: String,
    pub rewrite: Option<RewriteChild>,
    pub rewrite_scheduled: bool,
    pub rewrites: u64,
    pub rewrites_consecutive_failures: u64,
    pub limit: RewriteLimit,
    pub last_rewrite_secs: i64,
    pub last_bgrewrite_ok: bool,
}

impl Aof {
    pub fn new() -> Aof {
        Aof {
            last_write_ok: true,
            last_bgrewrite_ok: true,
            last_rewrite_secs: -1,
            ..Default::default()
        }
    }

    /// Fsyncs queued or running on the background thread.
    pub fn pending_fsyncs(&self) -> u32 {
        self.syncer
            .as_ref()
            .map_or(0, |s| s.pending.load(Ordering::Acquire))
    }

    pub fn fsync_in_progress(&self) -> bool {
        self.pending_fsyncs() > 0
    }

    /// The fsync thread, started on first use.
    fn syncer(&mut self) -> std::io::Result<&Syncer> {
        if self.syncer.is_none() {
            self.syncer = Some(Syncer::start(self.fsync_sleep_us.clone())?);
        }
        Ok(self.syncer.as_ref().expect("just started"))
    }

    /// The errno of the last background fsync if it failed, else 0.
    pub fn fsync_error(&self) -> i32 {
        self.syncer
            .as_ref()
            .map_or(0, |s| s.error.load(Ordering::Acquire))
    }

    /// The AOF offset known to be on disk.
    pub fn synced(&self) -> u64 {
        self.syncer
            .as_ref()
            .map_or(0, |s| s.synced.load(Ordering::Acquire))
            .max(self.inline_synced)
    }

    /// The eventfd the loop polls for fsync completions (once the thread
    /// runs).
    pub fn completion_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.syncer.as_ref().map(|s| s.eventfd.as_raw_fd())
    }
}

/// A failed AOF write as Redis words it in MISCONF and INFO: `strerror`,
/// and ENOSPC's text for a write the kernel cut short.
fn write_error_text(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::WriteZero {
        return crate::config::os_error_text(&std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    crate::config::os_error_text(e)
}

fn aof_dir(srv: &Server) -> PathBuf {
    srv.config.dir.join(&srv.config.appenddirname)
}

/// Create the AOF directory if it is missing; its path.
fn create_aof_dir(srv: &Server) -> Result<PathBuf, String> {
    let dir = aof_dir(srv);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    Ok(dir)
}

/// Write the manifest atomically: a temp file, fsync, rename, fsync of the
/// directory (Redis's persistAofManifest).
fn persist_manifest(dir: &Path, appendfilename: &str, m: &Manifest) -> std::io::Result<()> {
    let name = format::manifest_name(appendfilename);
    let tmp = dir.join(format!("temp-{name}"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(m.format().as_bytes())?;
        f.sync_all()?;
    }
    // The manifest it replaces is freed on a thread: freed here, under the
    // rename, it waited 24 ms for the device on this machine's disk
    // (`blkdev_issue_discard`: the filesystem is mounted with `discard`).
    crate::util::rename_replacing_in_background(&tmp, &dir.join(&name), "aof-unlink")?;
    File::open(dir)?.sync_all()
}

/// Remove the history files the manifest lists, then drop them from it
/// (Redis's aofDelHistoryFiles); nothing while `aof-disable-auto-gc` keeps
/// them.
fn delete_history(config: &Config, dir: &Path, m: &mut Manifest) {
    if m.history.is_empty() || config.aof_disable_auto_gc {
        return;
    }
    let appendfilename = &config.appendfilename;
    // Unlinking a big file frees its cached pages synchronously: tens of
    // milliseconds for a few hundred MB, so it happens off the loop, as
    // Redis's bio does it.
    let paths: Vec<(String, PathBuf)> = std::mem::take(&mut m.history)
        .into_iter()
        .map(|f| {
            info!("Removing the history file {} in the background", f.name);
            let path = dir.join(&f.name);
            (f.name, path)
        })
        .collect();
    let spawned = std::thread::Builder::new()
        .name("aof-unlink".into())
        .spawn(move || {
            crate::process::pin_background_thread();
            for (name, path) in paths {
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => warn!("Can't remove the AOF history file {name}: {e}"),
                }
            }
        });
    if let Err(e) = spawned {
        warn!("Can't start a thread to remove AOF history files: {e}");
    }
    if let Err(e) = persist_manifest(dir, appendfilename, m) {
        warn!("Can't persist the AOF manifest: {e}");
    }
}

/// Remove what a rewrite child that did not finish may have left: the
/// finished base's name, and the file it was writing under (Redis's
/// aofRemoveTempFile).
fn remove_rewrite_temps(dir: &Path, pid: libc::pid_t) {
    let done = format!("temp-rewriteaof-bg-{pid}.aof");
    for name in [
        rdb::temp_name(pid),
        format::commands_temp_name(pid, &done),
        done,
    ] {
        bg_unlink(&dir.join(name));
    }
}

/// Remove a file now, but free its blocks off the loop (Redis's
/// bg_unlink): the name goes at once, so a file opened under it next is
/// never touched; the last descriptor is closed by a thread.
fn bg_unlink(path: &Path) {
    let open = File::open(path);
    if std::fs::remove_file(path).is_err() {
        return;
    }
    if let Ok(file) = open {
        crate::util::close_in_background(file, "aof-unlink");
    }
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The bytes of every file the manifest lists (INFO's aof_current_size).
fn files_size(dir: &Path, manifest: &Manifest) -> u64 {
    manifest
        .load_order()
        .map(|f| file_size(&dir.join(&f.name)))
        .sum()
}

impl Server {
    /// Append the iteration's feed to the AOF buffer (called with the feed
    /// still holding its segments). True when the buffer is to take the
    /// feed's whole stream instead, once the other consumers have copied it
    /// (the bytes are counted as appended already).
    pub(super) fn feed_aof(&mut self) -> bool {
        if self.aof.status == AofStatus::Off {
            return false;
        }
        // Turned on and waiting for its first rewrite, which has not forked
        // yet (scheduled after an EXEC or another child, or retried): these
        // writes are in the dataset the rewrite will snapshot, and no file
        // takes them, as Redis's feedAppendOnlyFile (buffered, they would
        // hold every reply until a later write flushed them).
        if self.aof.status == AofStatus::WaitRewrite && self.aof.rewrite.is_none() {
            return false;
        }
        let before = self.aof.buf.len();
        // Redis's genAofTimestampAnnotationIfNeeded: once per second with
        // writes, before them.
        if self.config.aof_timestamp_enabled {
            let now = self.now_ms / 1000;
            if now > self.aof.last_timestamp {
                self.aof.last_timestamp = now;
                self.aof
                    .buf
                    .extend_from_slice(format!("#TS:{now}\r\n").as_bytes());
            }
        }
        // The usual turn (the previous one written, one database): the
        // stream itself becomes the buffer once replicas have their copy
        // (see flush_feed), which saves copying every byte written.
        if self.aof.buf.is_empty() {
            if let Some(len) = self.feed.whole_stream_for(TO_AOF, &self.aof.cursor) {
                self.aof.appended += len as u64;
                return true;
            }
        }
        let mut cursor = std::mem::take(&mut self.aof.cursor);
        cursor.append(&self.feed, TO_AOF, &mut self.aof.buf);
        self.aof.appended += (self.aof.buf.len() - before) as u64;
        self.aof.cursor = cursor;
        false
    }

    /// Write the AOF buffer and sync it as `appendfsync` says (Redis's
    /// flushAppendOnlyFile).
    pub fn flush_aof(&mut self) {
        if self.aof.buf.is_empty() {
            self.sync_aof_everysec();
            return;
        }
        if self.aof.file.is_none() {
            return;
        }
        if self.aof.flush_sleep_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.aof.flush_sleep_us));
        }
        // Under `always`, a turn after which the loop has nothing else to
        // do writes and syncs inline (as Redis does): measured at one request
        // per client, handing the fsync off (to the ring or the thread) cost
        // more than the overlap saved. With buffered input to run, the ring
        // (or the thread) syncs while the loop executes the next commands.
        // Under `everysec` and `no` the write is inline too (write(2)): the
        // replies need it to have reached the kernel, and an asynchronous
        // write only made them wait a loop turn longer (measured: 10% more
        // CPU per request at P=1, nothing gained at P=16).
        let always = self.config.appendfsync == FsyncPolicy::Always;
        let idle_turn =
            always && self.aof.inline_fsync && self.aof.uring.as_ref().is_none_or(|u| !u.busy());
        let in_flight = self.aof.uring.as_ref().is_some_and(|u| u.busy());
        if self.aof.uring.is_some() && ((always && !idle_turn) || in_flight) {
            self.flush_aof_uring();
            return;
        }
        // Under `everysec` Redis postpones the write for up to 2 s while the
        // background fsync runs (on some filesystems write(2) waits behind
        // it), and sends the replies meanwhile. Here replies wait for the
        // write, so a postponed write would hold every writer's replies for
        // as long as the fsync takes: 60-100 ms for a second of writes on
        // this machine's disk, a stall of the whole pipeline once a second
        // (measured: 16-23% of AOF-off throughput at P=16 with it). The
        // write goes on beside the fsync (on ext4 it does not wait for it:
        // `aof-write-pending-fsync` in LATENCY shows it where it does), and
        // an fsync running past 2 s is still counted and logged as Redis's.
        let everysec = self.config.appendfsync == FsyncPolicy::Everysec;
        if everysec && self.aof.fsync_in_progress() {
            let since = *self.aof.beside_fsync_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SLOW_FSYNC {
                self.aof.delayed_fsync += 1;
                self.aof.beside_fsync_since = Some(Instant::now());
                info!("Asynchronous AOF fsync is taking too long (disk is busy?). Writing the AOF buffer without waiting for fsync to complete, this may slow down Redis.");
            }
        } else {
            self.aof.beside_fsync_since = None;
        }
        // Redis tells delayed writes apart by what else was going on.
        let write_event = if self.aof.fsync_in_progress() {
            "aof-write-pending-fsync"
        } else if self.aof.rewrite.is_some() || self.snapshot.child.is_some() {
            "aof-write-active-child"
        } else {
            "aof-write-alone"
        };
        let timer = self.latency_start();
        let Some(file) = self.aof.file.as_mut() else {
            return;
        };
        let mut written = 0;
        let result = loop {
            if written == self.aof.buf.len() {
                break Ok(());
            }
            match file.write(&self.aof.buf[written..]) {
                Ok(0) => break Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.latency_end(write_event, timer);
        self.latency_end("aof-write", timer);
        if result.is_err() && written > 0 && self.take_back_short_write(written, self.aof.buf.len())
        {
            written = 0;
        }
        self.aof.buf.drain(..written);
        if self.aof.buf.is_empty() {
            super::feed::release_if_big(&mut self.aof.buf);
        }
        self.aof.current_size += written as u64;
        self.aof.written += written as u64;
        if !self.aof.held_clients.is_empty() {
            self.release_held_replies();
        }
        if let Err(e) = result {
            let always = self.config.appendfsync == FsyncPolicy::Always;
            let why = write_error_text(&e);
            if self.aof.last_write_ok {
                warn!("Error writing to the AOF file: {why}");
            }
            self.aof.last_write_ok = false;
            self.aof.last_write_error = why;
            if always {
                // Redis cannot keep its promise either: it exits.
                warn!("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                std::process::exit(1);
            }
            return;
        }
        if !self.aof.last_write_ok {
            warn!("AOF write error looks solved, Redis can write again.");
            self.aof.last_write_ok = true;
        }
        let child_running = self.aof.rewrite.is_some() || self.snapshot.child.is_some();
        if self.config.no_appendfsync_on_rewrite && child_running {
            return;
        }
        if self.config.appendfsync == FsyncPolicy::Always {
            if idle_turn && !self.aof.fsync_in_progress() {
                // Nothing else to do meanwhile: sync here, as Redis does,
                // without the hand-off to the thread.
                let timer = self.latency_start();
                if let Some(f) = self.aof.file.as_ref() {
                    if let Err(e) = f.sync_data() {
                        warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}. Exiting...");
                        std::process::exit(1);
                    }
                }
                self.latency_end("aof-fsync-always", timer);
                self.aof.inline_synced = self.aof.written;
                self.aof.last_fsync = Some(Instant::now());
            } else {
                // The fsync runs on the thread while the loop goes on
                // executing; replies wait for it (see `aof_durable`).
                self.request_fsync();
            }
        } else {
            self.sync_aof_everysec();
        }
    }

    /// The io_uring path of `flush_aof`: the buffer goes out as one batch
    /// (with its fdatasync under `always`) unless one is in flight, in
    /// which case it waits for the next batch.
    fn flush_aof_uring(&mut self) {
        let Some(fd) = self.aof.file.as_ref().map(std::os::fd::AsRawFd::as_raw_fd) else {
            return;
        };
        let child_running = self.aof.rewrite.is_some() || self.snapshot.child.is_some();
        let sync = self.config.appendfsync == FsyncPolicy::Always
            && !(self.config.no_appendfsync_on_rewrite && child_running);
        let end = self.aof.appended;
        let Some(uring) = self.aof.uring.as_mut() else {
            return;
        };
        if uring.busy() {
            return;
        }
        if let Err((e, bytes)) = uring.submit(fd, &mut self.aof.buf, sync, end) {
            // Nothing was queued: give up on the ring, write these bytes
            // (before anything newer) with write(2).
            self.abandon_uring(&e);
            let newer = std::mem::replace(&mut self.aof.buf, bytes);
            self.aof.buf.extend_from_slice(&newer);
            self.flush_aof();
            return;
        }
        if self.config.appendfsync == FsyncPolicy::Everysec {
            self.sync_aof_everysec();
        }
    }

    /// A failed write left `written` of `expected` bytes at the end of the
    /// AOF: half a command must not stay there, so they are cut back off
    /// (Redis's ftruncate after a short write) for the whole buffer to be
    /// tried again. False when the file cannot be cut (the bytes then stay
    /// and count as written). Logged once per failure, as retries come
    /// every cron tick.
    fn take_back_short_write(&self, written: usize, expected: usize) -> bool {
        let log = self.aof.last_write_ok;
        if log {
            warn!("Short write while writing to the AOF file: (nwritten={written}, expected={expected})");
        }
        let Some(file) = self.aof.file.as_ref() else {
            return false;
        };
        let cut = file.metadata().and_then(|m| {
            let keep = m
                .len()
                .checked_sub(written as u64)
                .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
            file.set_len(keep)
        });
        if let Err(e) = &cut {
            if log {
                warn!(
                    "Could not remove short write from the append-only file.  Redis may refuse to load the AOF the next time it starts.  ftruncate: {}",
                    crate::config::os_error_text(e)
                );
            }
        }
        cut.is_ok()
    }

    /// Account a finished io_uring batch.
    fn apply_uring_completion(&mut self, mut c: super::aof_uring::Completion) {
        if c.error.is_some() && c.written > 0 {
            // The whole batch is tried again, or only its rest when the
            // part written could not be cut off.
            if self.take_back_short_write(c.written, c.rest.len()) {
                c.written = 0;
            } else {
                c.rest.drain(..c.written);
            }
        }
        self.aof.written += c.written as u64;
        self.aof.current_size += c.written as u64;
        if c.synced {
            self.aof.inline_synced = self.aof.inline_synced.max(c.end);
            self.aof.last_fsync = Some(Instant::now());
        }
        match c.error {
            None => {
                if !self.aof.last_write_ok {
                    warn!("AOF write error looks solved, Redis can write again.");
                    self.aof.last_write_ok = true;
                }
            }
            Some(e) => {
                if self.config.appendfsync == FsyncPolicy::Always {
                    warn!("Can't recover from AOF write error when the AOF fsync policy is 'always': {e}. Exiting...");
                    std::process::exit(1);
                }
                let why = write_error_text(&e);
                if self.aof.last_write_ok {
                    warn!("Error writing to the AOF file: {why}");
                }
                self.aof.last_write_ok = false;
                self.aof.last_write_error = why;
                // Try the unwritten bytes again, before anything newer.
                let mut rest = c.rest;
                rest.extend_from_slice(&self.aof.buf);
                self.aof.buf = rest;
            }
        }
    }

    /// Stop using the ring; AOF writes use write(2) and the fsync thread.
    fn abandon_uring(&mut self, why: &std::io::Error) {
        warn!("io_uring submission failed ({why}): AOF writes use write(2) from now on");
        self.aof.uring = None;
    }

    /// The ring's eventfd fired: reap, send the next batch, release replies.
    pub fn aof_uring_done(&mut self) {
        let done = self.aof.uring.as_mut().and_then(|u| u.reap());
        if let Some(c) = done {
            let broken = self.aof.uring.as_ref().is_some_and(|u| u.broken());
            if broken {
                let why = std::io::Error::other("resubmitting a short write");
                self.abandon_uring(&why);
            }
            self.apply_uring_completion(c);
            if !self.aof.buf.is_empty() && self.aof.last_write_ok {
                self.flush_aof_uring();
            }
        }
        self.release_held_replies();
    }

    /// Wait for the batch in flight (switching files, stopping, shutdown).
    pub fn drain_aof_uring(&mut self) {
        let done = self.aof.uring.as_mut().and_then(|u| u.wait());
        if let Some(c) = done {
            self.apply_uring_completion(c);
        }
    }

    /// Choose the engine once: io_uring where the kernel allows it,
    /// write(2) otherwise; the log says which.
    fn choose_aof_engine(&mut self) {
        if self.aof.engine_chosen {
            return;
        }
        self.aof.engine_chosen = true;
        match super::aof_uring::Uring::new() {
            Ok(u) => {
                info!("AOF writes go through io_uring");
                self.aof.uring = Some(u);
            }
            Err(e) => info!(
                "io_uring is not available ({e}): AOF writes use write(2) and an fsync thread"
            ),
        }
    }

    /// Queue the clients whose replies waited for the AOF: `before_sleep`
    /// writes what the AOF now allows.
    fn release_held_replies(&mut self) {
        for (slot, id) in std::mem::take(&mut self.aof.held_clients) {
            if let Some(c) = self.client_at(slot, id) {
                c.aof_held = false;
            }
            self.queue_write_of(slot, id);
        }
    }

    /// Note that a client has replies held for the AOF (once, however many
    /// turns it stays held).
    pub fn note_held(&mut self, client: &mut super::ClientState) {
        if !client.holds.is_empty() && !client.aof_held {
            client.aof_held = true;
            self.aof.held_clients.push((client.slot, client.id));
        }
    }

    /// Sync (and then close) a file on the fsync thread.
    fn background_fsync(&mut self, file: File) {
        match self.aof.syncer() {
            // Offset 0: it moves nothing the replies wait for.
            Ok(s) => s.submit(file, 0),
            Err(e) => {
                warn!("Can't start the AOF fsync thread ({e}): syncing on the loop");
                let _ = file.sync_data();
            }
        }
    }

    /// Hand an fsync of everything written so far to the thread. False
    /// when the thread cannot be started.
    fn fsync_written_in_background(&mut self) -> bool {
        let Some(dup) = self.aof.file.as_ref().and_then(|f| f.try_clone().ok()) else {
            return true;
        };
        let upto = self.aof.written;
        match self.aof.syncer() {
            Ok(s) => s.submit(dup, upto),
            Err(e) => {
                warn!("Can't start the AOF fsync thread: {e}");
                return false;
            }
        }
        self.aof.last_fsync = Some(Instant::now());
        true
    }

    /// Ask the fsync thread to sync everything written so far, unless an
    /// fsync is running (its completion asks again).
    fn request_fsync(&mut self) {
        if self.aof.fsync_in_progress() || self.aof.synced() >= self.aof.written {
            return;
        }
        if !self.fsync_written_in_background() {
            // Replies would wait for an fsync that never comes.
            warn!("Exiting: appendfsync always cannot be honoured");
            std::process::exit(1);
        }
    }

    /// The AOF offset a reply may reflect before it is sent: under
    /// `appendfsync always`, what is on disk; otherwise everything (the
    /// write before the replies already reached the kernel).
    ///
    /// After a failed write (never under `always`, which exits), nothing:
    /// the bytes wait in the buffer for the retry, and, as Redis, the
    /// server goes on replying (reads, PING, INFO that shows the error)
    /// while it refuses writes with MISCONF. Under `always` with
    /// `no-appendfsync-on-rewrite` and a child running, what was written:
    /// Redis skips those fsyncs and replies meanwhile.
    pub fn aof_durable(&self) -> u64 {
        if self.aof.status == AofStatus::Off || !self.aof.last_write_ok {
            u64::MAX
        } else if self.config.appendfsync == FsyncPolicy::Always && !self.fsync_skipped_for_child()
        {
            self.aof.synced()
        } else {
            self.aof.written
        }
    }

    /// `no-appendfsync-on-rewrite yes` with a child running: writes go on,
    /// their fsyncs wait for the child's end.
    fn fsync_skipped_for_child(&self) -> bool {
        self.config.no_appendfsync_on_rewrite
            && (self.aof.rewrite.is_some() || self.snapshot.child.is_some())
    }

    /// Under `always`, start an fsync of what is written but not yet on
    /// disk when nothing else will: after the policy was set to `always`,
    /// after a child whose run skipped the fsyncs, after a reopen.
    /// Replies held for those bytes would otherwise wait for the next
    /// write. Called before the loop sleeps.
    pub fn sync_aof_always_behind(&mut self) {
        if self.config.appendfsync == FsyncPolicy::Always
            && self.aof.file.is_some()
            && self.aof.buf.is_empty()
            && self.aof.synced() < self.aof.written
            && !self.fsync_skipped_for_child()
            && !self.aof.uring.as_ref().is_some_and(|u| u.busy())
        {
            self.request_fsync();
        }
    }

    /// The fsync thread finished one: fail as Redis does if it failed,
    /// start the next one for what was written meanwhile, and queue the
    /// clients whose replies it released.
    pub fn aof_fsync_done(&mut self) {
        if let Some(s) = self.aof.syncer.as_ref() {
            let mut buf = [0u8; 8];
            // SAFETY: reading 8 bytes from our nonblocking eventfd (drains it).
            unsafe {
                libc::read(
                    std::os::fd::AsRawFd::as_raw_fd(&s.eventfd),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    8,
                )
            };
            if s.error.load(Ordering::Acquire) != 0
                && self.config.appendfsync == FsyncPolicy::Always
            {
                warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always'. Exiting...");
                std::process::exit(1);
            }
        }
        if self.config.appendfsync == FsyncPolicy::Always && self.aof.uring.is_none() {
            self.request_fsync();
        }
        self.release_held_replies();
    }

    /// Under `everysec`, hand an fsync to the background thread once a
    /// second (never two at once).
    fn sync_aof_everysec(&mut self) {
        if self.config.appendfsync != FsyncPolicy::Everysec || self.aof.file.is_none() {
            return;
        }
        if self
            .aof
            .last_fsync
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
            || self.aof.fsync_in_progress()
        {
            return;
        }
        self.fsync_written_in_background();
    }

    /// Sync the AOF file now (shutdown), after the batch in flight and
    /// whatever is still buffered.
    pub fn sync_aof_now(&mut self) {
        self.drain_aof_uring();
        if !self.aof.buf.is_empty() {
            self.flush_aof();
            self.drain_aof_uring();
        }
        if let Some(f) = self.aof.file.as_ref() {
            if let Err(e) = f.sync_data() {
                warn!("Fail to fsync the AOF file: {e}");
            }
        }
        if let Some(s) = self.aof.syncer.as_ref() {
            s.synced.fetch_max(self.aof.written, Ordering::AcqRel);
        }
    }

    /// Writes fail with MISCONF while the AOF cannot be written (Redis's
    /// writeCommandsDeniedByDiskError for the AOF). A failed background
    /// fsync counts as Redis's does, until one succeeds.
    pub fn aof_write_error(&self) -> Option<String> {
        if self.aof.status == AofStatus::Off {
            return None;
        }
        let why = if !self.aof.last_write_ok {
            self.aof.last_write_error.clone()
        } else {
            let errno = self.aof.fsync_error();
            if errno == 0 {
                return None;
            }
            crate::config::os_error_text(&std::io::Error::from_raw_os_error(errno))
        };
        Some(format!("MISCONF Errors writing to the AOF file: {why}"))
    }

    /// Open the newest incremental file for appending, creating a new one
    /// (and the first base, from the current dataset) when the manifest has
    /// none (Redis's aofOpenIfNeededOnServerStart). Persists the manifest.
    pub fn open_aof_on_start(&mut self) -> Result<(), String> {
        let dir = create_aof_dir(self)?;
        let name = self.config.appendfilename.clone();
        let fresh = self.aof.manifest.base.is_none() && self.aof.manifest.incrs.is_empty();
        if fresh {
            let seq = self.aof.manifest.base_seq + 1;
            let preamble = self.config.aof_use_rdb_preamble;
            let base = format::base_name(&name, seq, preamble);
            let opts = rdb::SaveOptions {
                aof_base: true,
                fsync_every: self
                    .config
                    .aof_rewrite_incremental_fsync
                    .then_some(crate::persistence::INCREMENTAL_FSYNC_BYTES),
                // No replication history: see `rewrite_aof_background`.
                repl: None,
                ..super::snapshot::save_options(self)
            };
            let res = if preamble {
                rdb::save_to_file(&self.dbs, &opts, &dir, &base, &|| true)
            } else {
                let stamp = self
                    .config
                    .aof_timestamp_enabled
                    .then(|| crate::util::unix_time_ms() / 1000);
                format::save_commands_to_file(
                    &self.dbs,
                    &opts.functions,
                    &dir,
                    &base,
                    stamp,
                    opts.fsync_every,
                    &|| true,
                )
            };
            res.map_err(|e| format!("Can't create the AOF base file {base}: {e}"))?;
            self.aof.manifest.install_base(
                AofFile {
                    name: base.clone(),
                    seq,
                    kind: FileKind::Base,
                },
                0,
            );
            info!("Creating AOF base file {base} on server start");
        }
        if self.aof.manifest.incrs.is_empty() {
            let incr = self.aof.manifest.add_incr(&name);
            info!("Creating AOF incr file {incr} on server start");
        }
        let incr = self
            .aof
            .manifest
            .incrs
            .last()
            .expect("just ensured")
            .name
            .clone();
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.join(&incr))
            .map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
        persist_manifest(&dir, &name, &self.aof.manifest)
            .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
        self.aof.file = Some(file);
        self.choose_aof_engine();
        if fresh {
            // As Redis: the sizes are those of what was loaded, so a base
            // made here (no AOF existed) counts for nothing until a
            // rewrite or a restart (INFO aof_current_size and
            // aof_base_size start at 0).
            self.aof.current_size = 0;
            self.aof.base_size = 0;
        } else {
            self.aof.current_size = files_size(&dir, &self.aof.manifest);
            // As Redis at start: the base alone.
            self.aof.base_size = self
                .aof
                .manifest
                .base
                .as_ref()
                .map_or(0, |b| file_size(&dir.join(&b.name)));
        }
        self.aof.status = AofStatus::On;
        self.aof.cursor = FeedCursor::default();
        self.feed.attach();
        Ok(())
    }

    /// CONFIG SET appendonly yes at run time (Redis's startAppendOnly): a
    /// rewrite makes the first base from the dataset; writes meanwhile go
    /// to a new incremental file.
    pub fn start_aof(&mut self) -> Result<(), String> {
        if self.aof.status != AofStatus::Off {
            return Ok(());
        }
        let dir = create_aof_dir(self)?;
        // Start from what is on disk, if an earlier run left files.
        let manifest_path = dir.join(format::manifest_name(&self.config.appendfilename));
        if let Ok(text) = std::fs::read(&manifest_path) {
            self.aof.manifest = Manifest::parse(&text)?;
        }
        self.aof.status = AofStatus::WaitRewrite;
        self.aof.cursor = FeedCursor::default();
        self.feed.attach();
        self.choose_aof_engine();
        // A new file: the old one's errors no longer refuse writes (Redis's
        // startAppendOnly).
        if let Some(s) = self.aof.syncer.as_ref() {
            if s.error.swap(0, Ordering::AcqRel) != 0 {
                warn!("AOF reopen, just ignore the AOF fsync error in bio job");
            }
        }
        if !self.aof.last_write_ok {
            warn!("AOF reopen, just ignore the last error.");
            self.aof.last_write_ok = true;
        }
        if self.snapshot.child.is_some() {
            self.aof.rewrite_scheduled = true;
            warn!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
            return Ok(());
        }
        if self.in_exec {
            self.aof.rewrite_scheduled = true;
            warn!("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.");
            return Ok(());
        }
        if self.aof.rewrite.is_some() {
            warn!("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.");
            self.kill_aof_rewrite();
        }
        if let Err(e) = self.rewrite_aof_background() {
            self.stop_aof();
            return Err(e);
        }
        Ok(())
    }

    /// CONFIG SET appendonly no (Redis's stopAppendOnly): flush, sync,
    /// close, kill a running rewrite.
    pub fn stop_aof(&mut self) {
        if self.aof.status == AofStatus::Off {
            return;
        }
        // This turn's earlier writes (a pipeline before the CONFIG SET)
        // belong in the file, as in Redis's buffer; a transaction's are
        // propagated whole at its EXEC, after this, as Redis's.
        if !self.in_exec {
            self.flush_feed();
        }
        self.flush_aof();
        self.drain_aof_uring();
        if !self.aof.buf.is_empty() {
            self.flush_aof();
            self.drain_aof_uring();
        }
        if let Some(f) = self.aof.file.take() {
            let _ = f.sync_data();
        }
        self.kill_aof_rewrite();
        self.aof.status = AofStatus::Off;
        // What could not be written (a write error) is dropped with the
        // file, as Redis drops its buffer: no offset stays behind for the
        // replies of a later `appendonly yes` to wait on.
        self.aof.buf.clear();
        self.aof.written = self.aof.appended;
        self.aof.inline_synced = self.aof.appended;
        if let Some(s) = self.aof.syncer.as_ref() {
            s.synced.fetch_max(self.aof.appended, Ordering::AcqRel);
        }
        self.feed.detach();
        // Nothing holds replies any more.
        self.release_held_replies();
    }

    /// BGREWRITEAOF (Redis 7.0's rewriteAppendOnlyFileBackground): the
    /// parent flushes and opens a new incremental file for the writes that
    /// follow (no rewrite buffer), then forks a child that writes the new
    /// base from the copy-on-write image.
    pub fn rewrite_aof_background(&mut self) -> Result<(), String> {
        if self.aof.rewrite.is_some() {
            return Err("Background append only file rewriting already in progress".into());
        }
        if self.snapshot.child.is_some() {
            return Err(
                "Can't rewrite append only file in background: fork: another child is running"
                    .into(),
            );
        }
        let dir = create_aof_dir(self)?;
        let name = self.config.appendfilename.clone();
        // New writes go to a fresh incremental file from now on (with the
        // AOF off there are none: the new base replaces everything).
        let aof_on = self.aof.status != AofStatus::Off;
        // This turn's writes so far (a pipeline's, the cron's expiries)
        // are in the image the child will write: they reach the AOF
        // buffer now and go to the old file, not after the fork into the
        // new one, where a load would apply them twice.
        self.flush_feed();
        if aof_on {
            self.flush_aof();
            self.drain_aof_uring();
            // What the drained batch did not cover goes out on the old file.
            if !self.aof.buf.is_empty() {
                self.flush_aof();
                self.drain_aof_uring();
            }
            // Bytes the old file would not take (a write error) would go to
            // the new incremental file, after a snapshot that has them: a
            // load would apply them twice.
            if !self.aof.buf.is_empty() {
                self.aof.last_bgrewrite_ok = false;
                return Err(format!(
                    "Can't rewrite the append only file while it cannot be written: {}",
                    self.aof.last_write_error
                ));
            }
            // Waiting for the first base, the writes go to a temporary
            // file that joins the manifest only with that base (Redis's
            // openNewIncrAofForAppend).
            let waiting = self.aof.status == AofStatus::WaitRewrite;
            let mut next = self.aof.manifest.clone();
            let incr = if waiting {
                format::temp_incr_name(&name)
            } else {
                next.add_incr(&name)
            };
            let file = OpenOptions::new()
                .write(true)
                .truncate(waiting)
                .append(!waiting)
                .create(true)
                .open(dir.join(&incr))
                .map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
            if self.aof.status == AofStatus::On {
                // The new incremental file is part of the AOF before the
                // first write goes to it; if the manifest cannot say so,
                // the writes stay on the old file and no rewrite starts.
                if let Err(e) = persist_manifest(&dir, &name, &next) {
                    warn!(
                        "Can't persist the AOF manifest for the new incremental file {incr}: {e}"
                    );
                    drop(file);
                    bg_unlink(&dir.join(&incr));
                    return Err(format!("Can't persist the AOF manifest: {e}"));
                }
            }
            self.aof.manifest = next;
            // The new file starts with a SELECT (Redis resets
            // aof_selected_db): it is loaded from database 0.
            self.aof.cursor.selected_db = None;
            if let Some(old) = self.aof.file.replace(file) {
                if self.config.appendfsync == FsyncPolicy::Always {
                    // Already synced but for this turn's writes: cheap, and
                    // replies held for them are released by it.
                    if let Err(e) = old.sync_data() {
                        warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...", crate::config::os_error_text(&e));
                        std::process::exit(1);
                    }
                    self.aof.inline_synced = self.aof.written;
                } else {
                    // Possibly hundreds of MB unsynced: the thread syncs and
                    // closes it (Redis's aof_background_fsync_and_close),
                    // after the manifest's own small fsyncs above, which
                    // would otherwise wait on the loop behind all of that
                    // writeback (120-240 ms measured with 330 MB written
                    // under `appendfsync no`).
                    self.background_fsync(old);
                }
            }
        }
        let start = Instant::now();
        let parent = std::process::id() as libc::pid_t;
        let opts = rdb::SaveOptions {
            aof_base: true,
            fsync_every: self
                .config
                .aof_rewrite_incremental_fsync
                .then_some(crate::persistence::INCREMENTAL_FSYNC_BYTES),
            // No replication history (Redis saves the base without it):
            // the incremental files after the base hold writes past its
            // offset, so a replica restarted from them that asked its
            // master to continue from the base's offset would apply them
            // twice.
            repl: None,
            ..super::snapshot::save_options(self)
        };
        let preamble = self.config.aof_use_rdb_preamble;
        let reports = super::snapshot::child_info_pipe(self);
        // Counted when started, as Redis's aof_rewrites.
        self.aof.rewrites += 1;
        // SAFETY: as for BGSAVE (see snapshot.rs): the child only
        // serialises memory, writes its file and `_exit`s.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            drop(reports);
            self.snapshot.child_info = None;
            self.aof.last_bgrewrite_ok = false;
            return Err(format!(
                "Can't rewrite append only file in background: fork: {e}"
            ));
        }
        if pid == 0 {
            // SAFETY: prctl/getppid/_exit have no memory effects.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            let parent_alive = || unsafe { libc::getppid() } == parent;
            super::snapshot::child_reports_to(&reports);
            crate::process::enter_background_child(
                &self.config,
                "redis-aof-rewrite",
                &self.config.aof_rewrite_cpulist,
            );
            let tmp = format!("temp-rewriteaof-bg-{}.aof", std::process::id());
            let res = if preamble {
                rdb::save_to_file(&self.dbs, &opts, &dir, &tmp, &parent_alive)
            } else {
                let stamp = self
                    .config
                    .aof_timestamp_enabled
                    .then(|| crate::util::unix_time_ms() / 1000);
                format::save_commands_to_file(
                    &self.dbs,
                    &opts.functions,
                    &dir,
                    &tmp,
                    stamp,
                    opts.fsync_every,
                    &parent_alive,
                )
            };
            if res.is_ok() {
                crate::util::child_info::finish(crate::util::child_info::Kind::AofCow, 0);
            }
            let code = i32::from(res.is_err());
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        drop(reports);
        super::snapshot::record_fork(self, start);
        self.aof.rewrite = Some(RewriteChild {
            pid,
            started: start,
            keep_incrs: usize::from(aof_on),
            rdb: preamble,
        });
        self.aof.rewrite_scheduled = false;
        info!("Background append only file rewriting started by pid {pid}");
        Ok(())
    }

    /// Stop a running rewrite (appendonly no, shutdown).
    pub fn kill_aof_rewrite(&mut self) {
        if let Some(child) = self.aof.rewrite.take() {
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(child.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(child.pid, &mut status, 0);
            }
            remove_rewrite_temps(&aof_dir(self), child.pid);
            super::snapshot::child_info_done(self);
            info!("Killing running AOF rewrite child: {}", child.pid);
        }
    }

    /// Cron: reap a finished rewrite (installing its base), start a
    /// scheduled or automatic one, keep `everysec` syncing.
    pub fn aof_cron(&mut self) {
        if self.aof.rewrite.is_some() {
            super::snapshot::receive_child_info(self);
        }
        self.check_aof_rewrite();
        // A scheduled BGREWRITEAOF runs once no child is left, whether the
        // AOF is on or not (Redis's serverCron).
        if self.aof.status == AofStatus::Off {
            if self.aof.rewrite_scheduled
                && self.aof.rewrite.is_none()
                && self.snapshot.child.is_none()
                && !self.rewrite_limited()
            {
                let _ = self.rewrite_aof_background();
            }
            return;
        }
        // Retry a write that failed (writes are refused meanwhile, so
        // nothing else triggers it).
        if !self.aof.last_write_ok {
            self.flush_aof();
        }
        self.sync_aof_everysec();
        if self.aof.rewrite.is_some() || self.snapshot.child.is_some() {
            return;
        }
        // Not while writes fail: what the buffer holds would go to the new
        // incremental file after the child's snapshot already has it.
        if !self.aof.last_write_ok {
            return;
        }
        if self.aof.rewrite_scheduled {
            if !self.rewrite_limited() {
                let _ = self.rewrite_aof_background();
            }
            return;
        }
        let pct = self.config.auto_aof_rewrite_percentage;
        let size = self.aof.current_size;
        if self.aof.status == AofStatus::On
            && pct > 0
            && size > self.config.auto_aof_rewrite_min_size
        {
            let base = self.aof.base_size.max(1);
            let growth = (size.saturating_sub(base)) * 100 / base;
            if growth >= pct as u64 && !self.rewrite_limited() {
                info!("Starting automatic rewriting of AOF on {growth}% growth");
                let _ = self.rewrite_aof_background();
            }
        }
    }

    fn check_aof_rewrite(&mut self) {
        let Some(child) = self.aof.rewrite.as_ref() else {
            return;
        };
        let pid = child.pid;
        let mut status = 0;
        // SAFETY: waitpid on our own child, non-blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == 0 {
            return;
        }
        let child = self.aof.rewrite.take().expect("checked above");
        super::snapshot::child_info_done(self);
        self.aof.last_rewrite_secs = child.started.elapsed().as_secs() as i64;
        let dir = aof_dir(self);
        let tmp = dir.join(format!("temp-rewriteaof-bg-{pid}.aof"));
        let reaped = r == pid;
        if !(reaped && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            remove_rewrite_temps(&dir, pid);
            let signal = (reaped && libc::WIFSIGNALED(status)).then(|| libc::WTERMSIG(status));
            match signal {
                Some(s) => warn!("Background AOF rewrite terminated by signal {s}"),
                None => warn!("Background AOF rewrite terminated with error"),
            }
            // SIGUSR1 stops a child without it counting as a failure.
            if signal == Some(libc::SIGUSR1) {
                self.rewrite_over();
            } else {
                self.rewrite_failed();
            }
            return;
        }
        let name = self.config.appendfilename.clone();
        let seq = self.aof.manifest.base_seq + 1;
        let base = format::base_name(&name, seq, child.rdb);
        let timer = self.latency_start();
        let renamed = std::fs::rename(&tmp, dir.join(&base));
        if renamed.is_ok() {
            self.latency_end("aof-rename", timer);
        }
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&tmp);
            warn!(
                "Error trying to rename the temporary AOF base file {}: {e}",
                tmp.display()
            );
            self.rewrite_failed();
            return;
        }
        info!(
            "Successfully renamed the temporary AOF base file {} into {base}",
            tmp.file_name().unwrap_or_default().to_string_lossy()
        );
        let mut next = self.aof.manifest.clone();
        let mut new_incr = None;
        if self.aof.status == AofStatus::WaitRewrite {
            // The writes made since the fork become the first incremental
            // file of the new AOF.
            let temp = format::temp_incr_name(&name);
            let incr = next.add_incr(&name);
            let timer = self.latency_start();
            if let Err(e) = std::fs::rename(dir.join(&temp), dir.join(&incr)) {
                warn!(
                    "Error trying to rename the temporary AOF incr file {}: {e}",
                    dir.join(&temp).display()
                );
                bg_unlink(&dir.join(&base));
                self.rewrite_failed();
                return;
            }
            self.latency_end("aof-rename", timer);
            info!("Successfully renamed the temporary AOF incr file {temp} into {incr}");
            new_incr = Some(incr);
        }
        next.install_base(
            AofFile {
                name: base.clone(),
                seq,
                kind: FileKind::Base,
            },
            child.keep_incrs,
        );
        if let Err(e) = persist_manifest(&dir, &name, &next) {
            warn!("Can't persist the AOF manifest after a rewrite: {e}");
            bg_unlink(&dir.join(&base));
            if let Some(incr) = new_incr {
                // Back to the temporary name: the writes in it are still
                // the AOF's, and the next attempt starts from them.
                let _ = std::fs::rename(dir.join(&incr), dir.join(format::temp_incr_name(&name)));
            }
            self.rewrite_failed();
            return;
        }
        self.aof.manifest = next;
        self.aof.last_bgrewrite_ok = true;
        self.aof.rewrites_consecutive_failures = 0;
        let timer = self.latency_start();
        self.aof.current_size = files_size(&dir, &self.aof.manifest);
        self.latency_end("aof-fstat", timer);
        self.aof.base_size = self.aof.current_size;
        if self.aof.status == AofStatus::WaitRewrite {
            self.aof.status = AofStatus::On;
            info!("AOF rewrite done, append only file enabled");
        }
        info!("Background AOF rewrite finished successfully");
        delete_history(&self.config, &dir, &mut self.aof.manifest);
    }

    /// A rewrite failed: counted, and while the AOF waits for its first
    /// base the writes kept for it are dropped and another rewrite is
    /// scheduled (Redis's backgroundRewriteDoneHandler cleanup).
    fn rewrite_failed(&mut self) {
        self.aof.last_bgrewrite_ok = false;
        self.aof.rewrites_consecutive_failures += 1;
        self.rewrite_over();
    }

    /// After a rewrite that installed nothing: while the AOF waits for its
    /// first base, what was kept for it goes (the next rewrite's child
    /// snapshots those writes anyway) and another rewrite is scheduled.
    fn rewrite_over(&mut self) {
        if self.aof.status != AofStatus::WaitRewrite {
            return;
        }
        self.drain_aof_uring();
        self.aof.file = None;
        self.aof.buf.clear();
        // Replies held for those writes go: the dataset has them, and the
        // next rewrite's base will.
        self.aof.written = self.aof.appended;
        self.aof.inline_synced = self.aof.appended;
        self.release_held_replies();
        let temp = format::temp_incr_name(&self.config.appendfilename);
        info!("Removing the temp incr aof file {temp} in the background");
        bg_unlink(&aof_dir(self).join(temp));
        self.aof.rewrite_scheduled = true;
    }

    /// Redis's aofRewriteLimited: after 3 failed rewrites in a row the
    /// automatic and scheduled ones wait 1 minute, then 2, 4, … up to an
    /// hour between attempts (BGREWRITEAOF still runs at once).
    fn rewrite_limited(&mut self) -> bool {
        const THRESHOLD: u64 = 3;
        const MAX_MINUTES: i64 = 60;
        let limit = &mut self.aof.limit;
        if self.aof.rewrites_consecutive_failures < THRESHOLD {
            *limit = RewriteLimit::default();
            return false;
        }
        let now = self.now_ms / 1000;
        if limit.next_time != 0 {
            if now < limit.next_time {
                return true;
            }
            limit.next_time = 0;
            return false;
        }
        limit.delay_minutes = if limit.delay_minutes == 0 {
            1
        } else {
            (limit.delay_minutes * 2).min(MAX_MINUTES)
        };
        limit.next_time = now + limit.delay_minutes * 60;
        warn!(
            "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {} minutes",
            limit.delay_minutes
        );
        true
    }

    /// `aof-disable-auto-gc` turned off: the history files kept meanwhile go.
    pub fn delete_aof_history(&mut self) {
        let dir = aof_dir(self);
        if dir.is_dir() {
            delete_history(&self.config, &dir, &mut self.aof.manifest);
        }
    }
}

/// The manifest in the AOF directory (Redis reads it at every start, AOF
/// on or off); an empty one when there is none.
pub fn read_manifest(srv: &Server) -> Result<Manifest, String> {
    let path = aof_dir(srv).join(format::manifest_name(&srv.config.appendfilename));
    match std::fs::read(&path) {
        Ok(text) => Manifest::parse(&text).map_err(|e| {
            format!(
                "*** FATAL AOF MANIFEST FILE ERROR *** {}: {e}",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
        Err(e) => Err(format!(
            "Fatal error: can't open the AOF manifest file {} for reading: {e}",
            path.display()
        )),
    }
}

/// Redis 7's upgrade of an old single-file AOF: `dir/appendonly.aof` moves
/// into the AOF directory and becomes the base of a new manifest, when the
/// directory or its manifest is missing (Redis's aofUpgradePrepare).
pub fn upgrade_old_aof(srv: &mut Server) -> Result<(), String> {
    let name = srv.config.appendfilename.clone();
    let old = srv.config.dir.join(&name);
    if !old.is_file() {
        return Ok(());
    }
    let dir = aof_dir(srv);
    let m = &srv.aof.manifest;
    let interrupted = m.incrs.is_empty()
        && m.base.as_ref().is_some_and(|b| b.name == name)
        && !dir.join(&name).exists();
    if dir.is_dir() && !(m.base.is_none() && m.incrs.is_empty()) && !interrupted {
        return Ok(());
    }
    create_aof_dir(srv)?;
    srv.aof.manifest.base = Some(AofFile {
        name: name.clone(),
        seq: 1,
        kind: FileKind::Base,
    });
    srv.aof.manifest.base_seq = 1;
    persist_manifest(&dir, &name, &srv.aof.manifest)
        .map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    std::fs::rename(&old, dir.join(&name)).map_err(|e| {
        format!(
            "Error trying to move the old AOF file {} into dir {}: {e}",
            old.display(),
            dir.display()
        )
    })?;
    info!(
        "Successfully migrated an old-style AOF file ({name}) into the AOF directory ({}).",
        srv.config.appenddirname
    );
    Ok(())
}

/// After loading: with `appendonly yes` open the AOF for appending
/// (creating its first base and incremental file if needed); in any case
/// delete the history files a previous run left (Redis does both at start).
pub fn open_after_load(srv: &mut Server) -> Result<(), String> {
    if srv.config.appendonly {
        srv.open_aof_on_start()?;
    }
    srv.delete_aof_history();
    Ok(())
}
