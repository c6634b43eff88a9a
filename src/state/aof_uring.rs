//! The AOF's io_uring engine: each loop turn's AOF bytes go out as one
//! write at the end of the file, linked with an `fdatasync` when the policy
//! is `always`, submitted with one `io_uring_enter` and never waited for:
//! completions come back through an eventfd registered with the ring and
//! polled by the loop, which drains the completion queue fully on each
//! wake (the eventfd is only a hint). While a batch is in flight its buffer
//! is owned here and never touched; the next turns' bytes accumulate in the
//! AOF buffer and go out as the next batch (group commit).
//!
//! Fork safety: a BGSAVE or rewrite child inherits the ring's descriptor
//! and mappings and the eventfd, and never uses them (it only serialises
//! memory and `_exit`s); the parent's ring is unaffected.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types, IoUring};

/// Submission queue entries: a write and its fsync.
const RING_ENTRIES: u32 = 8;
const WRITE: u64 = 1;
const FSYNC: u64 = 2;

/// A batch of AOF bytes in flight.
struct Batch {
    buf: Vec<u8>,
    fd: RawFd,
    /// Bytes of `buf` the kernel has taken so far.
    done: usize,
    /// Linked with an fdatasync.
    sync: bool,
    /// The AOF offset at the end of the batch.
    end: u64,
    /// Completions still expected for the current submission.
    expected: u32,
    write_result: Option<i32>,
    fsync_result: Option<i32>,
}

/// What a finished batch did.
#[derive(Debug)]
pub struct Completion {
    /// Bytes written (the whole batch unless `error`; then the part of it
    /// that reached the file).
    pub written: usize,
    /// The AOF offset at the end of the batch.
    pub end: u64,
    /// The fdatasync linked to the write completed.
    pub synced: bool,
    pub error: Option<io::Error>,
    /// After an error: the whole batch, of which `written` bytes reached
    /// the file.
    pub rest: Vec<u8>,
}

pub struct Uring {
    ring: IoUring,
    eventfd: OwnedFd,
    batch: Option<Batch>,
    /// The last batch's buffer, emptied, for the next turn's bytes.
    pub spare: Vec<u8>,
    /// A submission failed: entries may be left in the submission queue,
    /// so the ring must not be entered again (dropping it discards them).
    broken: bool,
}

impl Uring {
    /// Set up a ring and its completion eventfd. Fails where io_uring is not
    /// available (old kernel, seccomp, `kernel.io_uring_disabled`).
    pub fn new() -> io::Result<Uring> {
        let ring = IoUring::new(RING_ENTRIES)?;
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let eventfd = unsafe { OwnedFd::from_raw_fd(fd) };
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        Ok(Uring {
            ring,
            eventfd,
            batch: None,
            spare: Vec::new(),
            broken: false,
        })
    }

    pub fn eventfd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    /// Is a batch in flight?
    pub fn busy(&self) -> bool {
        self.batch.is_some()
    }

    /// A submission failed: give the ring up (see `broken`).
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// Bytes in flight.
    pub fn in_flight(&self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.buf.len() - b.done)
    }

    /// Send `buf`'s bytes (taken; `buf` gets the spare buffer back) to the
    /// end of `fd`, with an fdatasync after them when `sync`. When the
    /// submission fails nothing reached the kernel: the bytes come back
    /// with the error, and the ring is broken.
    pub fn submit(
        &mut self,
        fd: RawFd,
        buf: &mut Vec<u8>,
        sync: bool,
        end: u64,
    ) -> Result<(), (io::Error, Vec<u8>)> {
        debug_assert!(self.batch.is_none());
        let bytes = std::mem::replace(buf, std::mem::take(&mut self.spare));
        self.batch = Some(Batch {
            buf: bytes,
            fd,
            done: 0,
            sync,
            end,
            expected: 0,
            write_result: None,
            fsync_result: None,
        });
        self.push_batch().map_err(|e| {
            let bytes = self.batch.take().map(|b| b.buf).unwrap_or_default();
            (e, bytes)
        })
    }

    /// Queue the rest of the batch (all of it the first time).
    fn push_batch(&mut self) -> io::Result<()> {
        let b = self.batch.as_mut().expect("a batch to push");
        let rest = &b.buf[b.done..];
        // One write takes at most 4 GiB; the rest goes as after a short write.
        let len = rest.len().min(u32::MAX as usize) as u32;
        // Offset -1: at the file position; the file is O_APPEND, so at its end.
        let mut write = opcode::Write::new(types::Fd(b.fd), rest.as_ptr(), len)
            .offset(u64::MAX)
            .build()
            .user_data(WRITE);
        b.write_result = None;
        b.fsync_result = None;
        b.expected = 1;
        let fsync = b.sync.then(|| {
            opcode::Fsync::new(types::Fd(b.fd))
                .flags(types::FsyncFlags::DATASYNC)
                .build()
                .user_data(FSYNC)
        });
        if fsync.is_some() {
            write = write.flags(squeue::Flags::IO_LINK);
            b.expected = 2;
        }
        self.broken = true;
        {
            let mut sq = self.ring.submission();
            // SAFETY: the buffer the write reads lives in `self.batch`, which
            // is neither dropped nor changed until both completions are in.
            unsafe {
                sq.push(&write)
                    .map_err(|_| io::Error::other("io_uring queue full"))?;
                if let Some(f) = &fsync {
                    sq.push(f)
                        .map_err(|_| io::Error::other("io_uring queue full"))?;
                }
            }
        }
        self.ring.submit()?;
        self.broken = false;
        Ok(())
    }

    /// Drain the eventfd and the completion queue; `Some` once the batch in
    /// flight has finished (a short write is resubmitted, not reported).
    pub fn reap(&mut self) -> Option<Completion> {
        let mut tmp = [0u8; 8];
        // SAFETY: reading 8 bytes from our nonblocking eventfd (drains it).
        unsafe {
            libc::read(
                self.eventfd.as_raw_fd(),
                tmp.as_mut_ptr() as *mut libc::c_void,
                8,
            )
        };
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        let b = self.batch.as_mut()?;
        for (what, res) in cqes {
            match what {
                WRITE => b.write_result = Some(res),
                FSYNC => b.fsync_result = Some(res),
                _ => continue,
            }
            b.expected = b.expected.saturating_sub(1);
        }
        if b.expected > 0 {
            return None;
        }
        self.finish()
    }

    /// The batch's completions are all in: report it, or resubmit the rest
    /// of a short write.
    fn finish(&mut self) -> Option<Completion> {
        let b = self.batch.as_mut()?;
        let write = b.write_result.unwrap_or(-libc::EIO);
        if write < 0 {
            return self.fail(io::Error::from_raw_os_error(-write));
        }
        b.done += write as usize;
        if b.done < b.buf.len() {
            if write == 0 {
                return self.fail(io::Error::from(io::ErrorKind::WriteZero));
            }
            // A short write cancels the linked fsync: send the rest again.
            // A failed submission queued nothing, so the batch may go.
            if let Err(e) = self.push_batch() {
                return self.fail(e);
            }
            return None;
        }
        let mut b = self.batch.take()?;
        let error = match b.fsync_result {
            Some(r) if r < 0 => Some(io::Error::from_raw_os_error(-r)),
            _ => None,
        };
        let done = Completion {
            written: b.buf.len(),
            end: b.end,
            synced: b.sync && error.is_none(),
            error,
            rest: Vec::new(),
        };
        b.buf.clear();
        // Kept as the spare whatever its size, a big batch's buffer would
        // pass between the ring and the AOF buffer for good.
        super::feed::release_if_big(&mut b.buf);
        self.spare = b.buf;
        Some(done)
    }

    /// End the batch with `error` (nothing of it is in the kernel any
    /// more): how much of it reached the file, and the whole batch, for
    /// the caller to take that part back off the file and try it all
    /// again (or to count it, when the file cannot be cut).
    fn fail(&mut self, error: io::Error) -> Option<Completion> {
        let b = self.batch.take()?;
        let unwritten = (b.buf.len() - b.done) as u64;
        Some(Completion {
            written: b.done,
            end: b.end - unwritten,
            synced: false,
            error: Some(error),
            rest: b.buf,
        })
    }

    /// Wait for the batch in flight, if any (shutdown, switching files).
    /// Its buffer is the kernel's until its completions are in, so a
    /// failing wait is retried, never given up.
    pub fn wait(&mut self) -> Option<Completion> {
        loop {
            let expected = self.batch.as_ref()?.expected;
            if let Err(e) = self.ring.submit_and_wait(expected as usize) {
                if e.kind() != io::ErrorKind::Interrupted {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            if let Some(c) = self.reap() {
                return Some(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::feed::FEED_KEEP_BYTES;
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    /// Write `len` bytes through the ring and wait for them.
    fn write_through(u: &mut Uring, file: &std::fs::File, len: usize) -> Completion {
        let mut buf = vec![b'a'; len];
        u.submit(file.as_raw_fd(), &mut buf, false, 0)
            .map_err(|(e, _)| e)
            .expect("submit");
        let done = u.wait().expect("a completion");
        assert!(done.error.is_none(), "{:?}", done.error);
        assert_eq!(done.written, len);
        done
    }

    #[test]
    fn a_big_batch_s_buffer_is_not_kept_as_the_spare() {
        let mut u = Uring::new().expect("io_uring");
        let mut file = tempfile::tempfile().unwrap();
        write_through(&mut u, &file, 1000);
        assert!(
            u.spare.capacity() >= 1000,
            "a small batch's buffer is reused"
        );
        write_through(&mut u, &file, 8 << 20);
        assert!(
            u.spare.capacity() <= FEED_KEEP_BYTES,
            "spare of {} bytes kept",
            u.spare.capacity()
        );
        let mut back = Vec::new();
        file.seek(SeekFrom::Start(0)).unwrap();
        file.read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 1000 + (8 << 20));
        assert!(back.iter().all(|&b| b == b'a'));
    }
}
