//! What a background child (BGSAVE, a diskless transfer, an AOF rewrite)
//! tells its parent while it runs (Redis's childinfo.c): keys written so
//! far and how much memory it has copied on write, then its final copy on
//! write size. Fixed-size records on a pipe: a write of one is atomic, the
//! parent reads them without blocking whenever it looks (its cron, and
//! when the child is reaped).
//!
//! The child side keeps its pipe in a static set once after the fork (the
//! child is single-threaded), so the writers only call [`progress`] every
//! 1024 keys; in the parent, where nothing set it, that is one load.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// What a record reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Keys written so far and the copy-on-write size now.
    Current,
    /// The child finished writing a dump: its copy-on-write peak.
    RdbCow,
    /// The child finished writing an AOF base.
    AofCow,
}

/// One record, as the parent reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    pub kind: Kind,
    pub keys: u64,
    /// Private dirty bytes of the child (what it has copied on write).
    pub cow: u64,
    /// When `cow` was measured (Unix ms).
    pub cow_updated_ms: i64,
}

const RECORD: usize = 32;

/// The child's write end (-1: not a child, or no pipe).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// Unix ms of the last record sent, of the last copy-on-write reading, and
/// what that reading cost (µs).
static LAST_SENT_MS: AtomicU64 = AtomicU64::new(0);
static COW: AtomicU64 = AtomicU64::new(0);
static COW_PEAK: AtomicU64 = AtomicU64::new(0);
static COW_UPDATED_US: AtomicU64 = AtomicU64::new(0);
static COW_COST_US: AtomicU64 = AtomicU64::new(0);

/// A reading costs at most 1% of the child's time (Redis's
/// CHILD_COW_DUTY_CYCLE).
const COW_DUTY_CYCLE: u64 = 100;

/// A pipe for the next child: the parent's non-blocking read end and the
/// write end the child takes with [`child_start`] (the parent drops it once
/// forked).
pub fn pipe() -> std::io::Result<(File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it creates.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned here alone.
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((r, w))
}

/// In the child, right after the fork: report on `fd` from now on.
pub fn child_start(fd: RawFd) {
    PIPE.store(fd, Ordering::Relaxed);
}

/// Called by the writers every 1024 keys: a record at most once a second.
pub fn progress(keys: u64) {
    if PIPE.load(Ordering::Relaxed) < 0 {
        return;
    }
    let now = crate::util::unix_time_ms() as u64;
    if now.saturating_sub(LAST_SENT_MS.load(Ordering::Relaxed)) < 1000 {
        return;
    }
    LAST_SENT_MS.store(now, Ordering::Relaxed);
    send(Kind::Current, keys);
}

/// The child is done writing: its final report.
pub fn finish(kind: Kind, keys: u64) {
    if PIPE.load(Ordering::Relaxed) >= 0 {
        send(kind, keys);
    }
}

fn send(kind: Kind, keys: u64) {
    let now_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
    };
    let before = now_us();
    let updated = COW_UPDATED_US.load(Ordering::Relaxed);
    let due = updated == 0
        || kind != Kind::Current
        || before.saturating_sub(updated) > COW_COST_US.load(Ordering::Relaxed) * COW_DUTY_CYCLE;
    if due {
        let cow = private_dirty_bytes();
        let after = now_us();
        COW.store(cow, Ordering::Relaxed);
        COW_PEAK.fetch_max(cow, Ordering::Relaxed);
        COW_UPDATED_US.store(after, Ordering::Relaxed);
        COW_COST_US.store(after.saturating_sub(before), Ordering::Relaxed);
    }
    let code: u64 = match kind {
        Kind::Current => 0,
        Kind::RdbCow => 1,
        Kind::AofCow => 2,
    };
    let cow = match kind {
        Kind::Current => COW.load(Ordering::Relaxed),
        _ => COW_PEAK.load(Ordering::Relaxed),
    };
    let mut rec = [0u8; RECORD];
    rec[..8].copy_from_slice(&code.to_le_bytes());
    rec[8..16].copy_from_slice(&keys.to_le_bytes());
    rec[16..24].copy_from_slice(&cow.to_le_bytes());
    rec[24..].copy_from_slice(&(COW_UPDATED_US.load(Ordering::Relaxed) / 1000).to_le_bytes());
    // A full pipe (a parent not reading) drops the record: the next one
    // says the same, newer.
    // SAFETY: writing a local buffer to a descriptor this process owns.
    unsafe { libc::write(PIPE.load(Ordering::Relaxed), rec.as_ptr().cast(), RECORD) };
}

/// The parent: every whole record waiting on `pipe`, oldest first.
pub fn drain(pipe: &mut File) -> Vec<Report> {
    let mut out = Vec::new();
    let mut rec = [0u8; RECORD];
    // Records are written whole (RECORD < PIPE_BUF), so they are read whole.
    while let Ok(RECORD) = pipe.read(&mut rec) {
        let word = |i: usize| u64::from_le_bytes(rec[i * 8..i * 8 + 8].try_into().unwrap());
        let kind = match word(0) {
            0 => Kind::Current,
            1 => Kind::RdbCow,
            2 => Kind::AofCow,
            _ => continue,
        };
        out.push(Report {
            kind,
            keys: word(1),
            cow: word(2),
            cow_updated_ms: word(3) as i64,
        });
    }
    out
}

/// This process's private dirty memory in bytes (Redis's
/// zmalloc_get_private_dirty): `/proc/self/smaps_rollup` where the kernel
/// has it (one line to read), else the sum over `/proc/self/smaps`.
pub fn private_dirty_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup")
        .or_else(|_| std::fs::read_to_string("/proc/self/smaps"))
        .unwrap_or_default();
    sum_field(&text, "Private_Dirty:")
}

/// The sum of a `Field:   N kB` line's values over an smaps text, in bytes.
fn sum_field(text: &str, field: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(field))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn smaps_fields_are_summed_in_bytes() {
        let text = "7f00-7f01 rw-p 0 0 0\nPrivate_Dirty:        8 kB\nPrivate_Clean: 4 kB\nPrivate_Dirty:      12 kB\n";
        assert_eq!(sum_field(text, "Private_Dirty:"), 20 * 1024);
        assert!(private_dirty_bytes() > 0, "this process has written memory");
    }

    #[test]
    fn records_cross_the_pipe_whole() {
        // The pipe is process-wide: another test's writer may report on it
        // meanwhile, so only this test's records (by their key counts) are
        // looked at.
        let (mut r, w) = pipe().unwrap();
        child_start(w.as_raw_fd());
        finish(Kind::AofCow, 7_777_001);
        finish(Kind::RdbCow, 7_777_002);
        let got: Vec<Report> = drain(&mut r)
            .into_iter()
            .filter(|r| r.keys > 7_777_000)
            .collect();
        PIPE.store(-1, Ordering::Relaxed);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].kind, got[0].keys), (Kind::AofCow, 7_777_001));
        assert_eq!((got[1].kind, got[1].keys), (Kind::RdbCow, 7_777_002));
        assert!(got[0].cow > 0 && got[0].cow_updated_ms > 0);
        assert!(drain(&mut r).iter().all(|r| r.keys < 7_777_000));
    }
}
