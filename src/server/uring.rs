//! The io_uring networking engine (`io-engine io_uring`, the default where
//! the kernel allows it).
//!
//! Client sockets are not polled for readiness: each has a multishot
//! receive in flight that the kernel completes into buffers of a provided
//! buffer ring, so what clients send arrives with the completions and is
//! copied into their query buffers, with no `read(2)` per client. The
//! replies a loop turn produced go out as one send per client, all
//! submitted by the same `io_uring_enter` that then waits for the next
//! completion: one system call a turn for every client. Sends carry
//! `MSG_DONTWAIT`, so the kernel completes each one (in full, in part, or
//! with `EAGAIN`) within that call and never keeps a reply buffer after
//! it: reply buffers are never owned by the kernel once the loop runs
//! again. A socket that did not take everything gets a one-shot
//! `POLLOUT` poll, and the rest is written when it fires.
//!
//! A client that sends a big argument (32 KB or more) has its input read
//! directly for as long as it sends them, straight into the argument's own
//! buffer instead of arriving in ring buffers to be copied again: its
//! receive is cancelled (what it had taken is placed first) and a
//! multishot `POLLIN` poll says when to read; its replies still go out
//! with the turn's sends. It goes back to the receive after 64 reads
//! without one (`EventLoop::read_big_input_directly`).
//!
//! Everything else (listeners, TLS clients, the link to our master,
//! signals, eventfds, pipes) stays with mio, whose epoll descriptor is
//! itself polled by the ring (multishot `POLLIN`): when it is ready the
//! loop collects mio's events without waiting.
//!
//! Listeners are not given a multishot accept, on purpose. An operation in
//! flight holds its file, and when the process exits (or is killed) the
//! kernel tears the ring down asynchronously: the listening socket went on
//! listening for 6–8 ms after a SIGKILL (measured; under 0.1 ms with
//! epoll), so a supervisor's immediate restart fails to bind the port, and
//! clients connect to a socket that is about to vanish. What it would save,
//! an `accept(2)` and a readiness event per burst of connections, did not
//! show against the cost of TCP connection setup (server CPU for 100k
//! `redis-benchmark -k 0` connections: 5.8–6.3 s either way).
//!
//! Each operation's `user_data` carries its kind, the client's slot and the
//! low 32 bits of the client's id, so a completion for a slot that a new
//! client took meanwhile is recognised as stale (its buffer, if any, goes
//! back to the ring). A closed client's socket is shut down before it is
//! closed, which ends its receive and poll (they hold the socket open
//! until they complete).
//!
//! The ring is set up with `SINGLE_ISSUER | DEFER_TASKRUN`: completions are
//! produced only when the loop enters the kernel to wait, in one batch.
//! Fork safety: a BGSAVE or rewrite child inherits the ring's descriptor
//! and its (shared) queue mappings and never touches them; the receive
//! buffers and the buffer ring are `MADV_DONTFORK`, so the child does not
//! even have them, and the parent's pages (pinned by the kernel for the
//! buffer ring) are never copied on write.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// Bytes of one receive buffer.
pub const BUF_SIZE: usize = 8 * 1024;
/// Receive buffers in the ring (a power of two): 2 MiB in all.
const BUF_COUNT: u16 = 256;
const BUF_GROUP: u16 = 0;
const SQ_ENTRIES: u32 = 1024;
const CQ_ENTRIES: u32 = 8192;
const SLOT_BITS: u32 = 28;
/// The kernel's IORING_CQE_F_BUFFER: the completion names a ring buffer
/// (the `io-uring` crate reads it but does not export it).
const CQE_F_BUFFER: u32 = 1;

/// What an operation in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A client's multishot receive.
    Recv = 1,
    /// A turn's send to a client.
    Send = 2,
    /// A one-shot poll for a client's socket to take more.
    PollOut = 3,
    /// The multishot poll of mio's epoll descriptor.
    Epoll = 4,
    /// A client's multishot `POLLIN` poll, while its input is read
    /// directly (big arguments).
    PollIn = 5,
}

/// One completion, copied out of the queue.
#[derive(Clone, Copy, Debug)]
pub struct Cqe {
    pub user_data: u64,
    pub result: i32,
    pub flags: u32,
    /// A receive whose bytes were copied out of their ring buffer (which
    /// went back to the kernel) to wait for their client: the key of the
    /// copy in [`UringNet::parked`].
    pub parked: Option<u32>,
}

impl Cqe {
    pub fn op(&self) -> Option<Op> {
        match self.user_data >> 60 {
            1 => Some(Op::Recv),
            2 => Some(Op::Send),
            3 => Some(Op::PollOut),
            4 => Some(Op::Epoll),
            5 => Some(Op::PollIn),
            _ => None,
        }
    }

    /// The client's slot.
    pub fn slot(&self) -> usize {
        ((self.user_data >> 32) & ((1 << SLOT_BITS) - 1)) as usize
    }

    /// Is this completion for client `id` (not a former holder of the slot)?
    pub fn is_for(&self, id: u64) -> bool {
        self.user_data as u32 == id as u32
    }

    /// The operation stays in flight (a multishot one goes on).
    pub fn more(&self) -> bool {
        cqueue::more(self.flags)
    }

    /// The receive buffer this completion filled.
    pub fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }
}

fn user_data(op: Op, slot: usize, id: u64) -> u64 {
    ((op as u64) << 60) | (((slot as u64) & ((1 << SLOT_BITS) - 1)) << 32) | (id as u32 as u64)
}

/// Anonymous memory the kernel reads or writes: page-aligned, not
/// inherited by children.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize) -> io::Result<Region> {
        // SAFETY: a fresh private anonymous mapping; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: advice on the mapping just made. A child never uses it.
        unsafe { libc::madvise(ptr, len, libc::MADV_DONTFORK) };
        Ok(Region {
            ptr: ptr as *mut u8,
            len,
        })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unused after this.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

pub struct UringNet {
    /// Declared first: dropped (and the kernel done with the buffers)
    /// before the regions are unmapped.
    ring: IoUring,
    bufs: Region,
    /// The provided buffer ring: `BUF_COUNT` entries the kernel takes
    /// buffers from; the tail is ours.
    buf_ring: Region,
    buf_tail: u16,
    /// Sends submitted whose completions have not been handled.
    pub sends_in_flight: usize,
    /// A send of this turn needs its completion handled at once (the rest
    /// may not fit the socket and needs a poll, or the client closes
    /// after it): the next `wait` returns once the sends are done,
    /// instead of also waiting for something new.
    pub sends_urgent: bool,
    /// Completions taken off the kernel's queue and not handled yet, in
    /// order: the loop takes them one at a time, and a busy script's pump
    /// takes the input of other clients out of it (see `busy.rs`).
    pub queue: VecDeque<Cqe>,
    /// Received bytes copied out of their ring buffers (see [`Self::park`]).
    parked: HashMap<u32, Vec<u8>>,
    next_parked: u32,
}

impl UringNet {
    /// Set up the ring and its receive buffers, and poll `epoll_fd` (mio's)
    /// through it. Fails where io_uring or what this engine needs is not
    /// available (kernels before 6.1, seccomp, `kernel.io_uring_disabled`).
    pub fn new(epoll_fd: RawFd) -> io::Result<UringNet> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_submit_all()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)?;
        if !ring.params().is_feature_ext_arg() || !ring.params().is_feature_nodrop() {
            return Err(io::Error::other(
                "the kernel's io_uring lacks EXT_ARG or NODROP",
            ));
        }
        let bufs = Region::new(BUF_SIZE * BUF_COUNT as usize)?;
        let buf_ring = Region::new(
            (BUF_COUNT as usize * std::mem::size_of::<types::BufRingEntry>()).max(4096),
        )?;
        // SAFETY: the buffer ring lives as long as the ring (field order).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                buf_ring.ptr as u64,
                BUF_COUNT,
                BUF_GROUP,
                0,
            )?
        };
        let mut net = UringNet {
            ring,
            bufs,
            buf_ring,
            buf_tail: 0,
            sends_in_flight: 0,
            sends_urgent: false,
            queue: VecDeque::new(),
            parked: HashMap::new(),
            next_parked: 0,
        };
        for bid in 0..BUF_COUNT {
            net.recycle(bid);
        }
        net.publish();
        net.arm_epoll(epoll_fd);
        Ok(net)
    }

    fn push(&mut self, entry: squeue::Entry) {
        loop {
            // SAFETY: what the entries point to (reply bytes, nothing else)
            // stays valid until their completion (see `send`).
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return;
            }
            // The queue is full: hand what is in it to the kernel.
            if let Err(e) = self.ring.submit() {
                tracing::warn!("io_uring submission: {e}");
            }
        }
    }

    /// Hand the queued entries to the kernel now, before a socket they
    /// name is closed: its descriptor number may go to the next accepted
    /// connection, and an entry submitted later (a receive armed again)
    /// would then act on that connection with the old client's user data.
    pub fn submit_queued(&mut self) {
        if self.ring.submission().is_empty() {
            return;
        }
        if let Err(e) = self.ring.submit() {
            tracing::warn!("io_uring submission: {e}");
        }
    }

    /// Poll mio's epoll descriptor (again, once its multishot poll ended).
    pub fn arm_epoll(&mut self, epoll_fd: RawFd) {
        self.poll_as(epoll_fd, libc::POLLIN, true, user_data(Op::Epoll, 0, 0));
    }

    /// Poll `fd` for `events`, once or until cancelled (`multi`).
    fn poll_as(&mut self, fd: RawFd, events: libc::c_short, multi: bool, user_data: u64) {
        let entry = opcode::PollAdd::new(types::Fd(fd), events as u32)
            .multi(multi)
            .build()
            .user_data(user_data);
        self.push(entry);
    }

    /// Receive what client `id` in `slot` sends, until it is cancelled, the
    /// peer closes, or the buffers run out (then it is armed again).
    pub fn arm_recv(&mut self, fd: RawFd, slot: usize, id: u64) {
        self.recv_as(fd, user_data(Op::Recv, slot, id));
    }

    /// Arm a client's receive again, as the one that completed with `c`.
    pub fn rearm_recv(&mut self, fd: RawFd, c: &Cqe) {
        self.recv_as(fd, c.user_data);
    }

    fn recv_as(&mut self, fd: RawFd, user_data: u64) {
        let entry = opcode::RecvMulti::new(types::Fd(fd), BUF_GROUP)
            .build()
            .user_data(user_data);
        self.push(entry);
    }

    /// Cancel the operation with `target` user data; the cancellation's own
    /// completion (user data 0) is nobody's and is ignored.
    fn cancel_async(&mut self, target: u64) {
        self.push(opcode::AsyncCancel::new(target).build().user_data(0));
    }

    /// Stop client `id`'s receive now (its socket is about to be read
    /// directly: SCRIPT DEBUG). What was queued is submitted first, so a
    /// receive armed again this turn is cancelled too; the cancelled
    /// receive's last completion (`ECANCELED`, or bytes that arrived
    /// before) comes with the next ones.
    pub fn cancel_recv_now(&mut self, slot: usize, id: u64) -> io::Result<()> {
        self.ring.submit()?;
        let ts = types::Timespec::new().sec(1);
        let target = types::CancelBuilder::user_data(user_data(Op::Recv, slot, id)).all();
        match self.ring.submitter().register_sync_cancel(Some(ts), target) {
            // ENOENT: none was in flight (the buffers had run out).
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => Err(e),
            _ => Ok(()),
        }
    }

    /// Send `data` to client `id`: submitted by the next `wait`, done
    /// (in full, in part or not at all) within it.
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until the completion has been
    /// taken off the queue (the loop handles every send's completion
    /// before it touches a client).
    pub unsafe fn send(&mut self, fd: RawFd, data: &[u8], slot: usize, id: u64) {
        let len = data.len().min(u32::MAX as usize) as u32;
        let entry = opcode::Send::new(types::Fd(fd), data.as_ptr(), len)
            .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data(Op::Send, slot, id));
        self.push(entry);
        self.sends_in_flight += 1;
    }

    /// Tell us, each time, when client `id`'s socket has something to read
    /// (its input is read directly meanwhile: no receive is in flight).
    pub fn poll_in(&mut self, fd: RawFd, slot: usize, id: u64) {
        self.poll_as(fd, libc::POLLIN, true, user_data(Op::PollIn, slot, id));
    }

    /// Arm a client's `POLLIN` poll again, as the one that completed with `c`.
    pub fn rearm_poll_in(&mut self, fd: RawFd, c: &Cqe) {
        self.poll_as(fd, libc::POLLIN, true, c.user_data);
    }

    /// End client `id`'s `POLLIN` poll (its last completion comes later).
    pub fn cancel_poll_in(&mut self, slot: usize, id: u64) {
        self.cancel_async(user_data(Op::PollIn, slot, id));
    }

    /// Tell us when client `id`'s socket can take more.
    pub fn poll_out(&mut self, fd: RawFd, slot: usize, id: u64) {
        self.poll_as(fd, libc::POLLOUT, false, user_data(Op::PollOut, slot, id));
    }

    /// Submit what is queued and wait, up to `timeout`, for a completion
    /// beyond those of this turn's sends (unless they are urgent).
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.publish();
        let want = match std::mem::take(&mut self.sends_urgent) {
            true if self.sends_in_flight > 0 => self.sends_in_flight,
            _ => self.sends_in_flight + 1,
        };
        let ts = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(want, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Move the kernel's completions to `queue`.
    pub fn collect(&mut self) {
        for c in self.ring.completion() {
            self.queue.push_back(Cqe {
                user_data: c.user_data(),
                result: c.result(),
                flags: c.flags(),
                parked: None,
            });
        }
    }

    /// Take the sends' completions out of the queue.
    pub fn take_sends(&mut self, out: &mut Vec<Cqe>) {
        if self.sends_in_flight == 0 {
            return;
        }
        self.take_where(out, |c| c.op() == Some(Op::Send));
    }

    /// Take client `id`'s receive completions out of the queue, in order.
    pub fn take_received(&mut self, slot: usize, id: u64) -> Vec<Cqe> {
        let mut mine = Vec::new();
        self.take_where(&mut mine, |c| {
            c.op() == Some(Op::Recv) && c.slot() == slot && c.is_for(id)
        });
        mine
    }

    /// Move the completions `wanted` picks out of the queue into `out`, in
    /// order; the others keep theirs.
    fn take_where(&mut self, out: &mut Vec<Cqe>, wanted: impl Fn(&Cqe) -> bool) {
        self.queue.retain(|c| {
            let take = wanted(c);
            if take {
                out.push(*c);
            }
            !take
        });
    }

    /// Completions that are ready, without waiting (a busy script's pump).
    pub fn poll_now(&mut self) {
        let _ = self.wait(Duration::ZERO);
        self.collect();
    }

    /// The `len` bytes the kernel put in buffer `bid`.
    pub fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        let bid = (bid % BUF_COUNT) as usize;
        let len = len.min(BUF_SIZE);
        // SAFETY: inside the region; the kernel wrote these bytes and no
        // longer owns the buffer until it is recycled.
        unsafe { std::slice::from_raw_parts(self.bufs.ptr.add(bid * BUF_SIZE), len) }
    }

    /// A receive completion that waits for its client while a busy script
    /// runs (the script's caller, a client over its query buffer limit):
    /// its bytes are copied out and its ring buffer goes back to the
    /// kernel, so that waiting completions cannot drain the ring and stop
    /// every other client's input (SCRIPT KILL's among it); and the
    /// client's multishot receive is cancelled, so that what it sends
    /// meanwhile stays in its socket, as under epoll (the loop arms the
    /// receive again once it handles the last completion).
    pub fn park(&mut self, c: &mut Cqe) {
        if let (Some(bid), true) = (c.buffer(), c.result > 0) {
            let data = self.buffer(bid, c.result as usize).to_vec();
            self.recycle(bid);
            let key = self.next_parked;
            self.next_parked = self.next_parked.wrapping_add(1);
            self.parked.insert(key, data);
            c.flags &= !CQE_F_BUFFER;
            c.parked = Some(key);
        }
        if c.more() {
            self.cancel_async(c.user_data);
        }
    }

    /// The bytes of a parked receive, taken.
    pub fn unpark(&mut self, c: &Cqe) -> Option<Vec<u8>> {
        c.parked.and_then(|key| self.parked.remove(&key))
    }

    /// A receive completion that no client will take (it is gone): its
    /// buffer goes back to the kernel, or its parked bytes are dropped.
    pub fn discard(&mut self, c: &Cqe) {
        if let Some(bid) = c.buffer() {
            self.recycle(bid);
        }
        self.unpark(c);
    }

    /// Give buffer `bid` back to the kernel (seen by it after `publish`).
    pub fn recycle(&mut self, bid: u16) {
        let bid = bid % BUF_COUNT;
        let at = (self.buf_tail & (BUF_COUNT - 1)) as usize;
        // SAFETY: `at` is inside the ring; the setters leave the tail
        // (in the first entry's reserved field) alone.
        let entry = unsafe { &mut *(self.buf_ring.ptr as *mut types::BufRingEntry).add(at) };
        // SAFETY: the buffer is inside the region.
        entry.set_addr(unsafe { self.bufs.ptr.add(bid as usize * BUF_SIZE) } as u64);
        entry.set_len(BUF_SIZE as u32);
        entry.set_bid(bid);
        self.buf_tail = self.buf_tail.wrapping_add(1);
    }

    /// Publish the recycled buffers' entries to the kernel.
    fn publish(&mut self) {
        // SAFETY: the tail of the ring, a u16 the kernel reads atomically.
        let tail = unsafe {
            &*(types::BufRingEntry::tail(self.buf_ring.ptr as *const types::BufRingEntry)
                as *const AtomicU16)
        };
        tail.store(self.buf_tail, Ordering::Release);
    }
}
