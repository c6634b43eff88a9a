//! A fake RDMA device with the semantics the full sync relies on, for tests
//! and for machines without RDMA hardware. Compiled into test builds and
//! into builds with the `rdma-fake` feature, never into a default release.
//!
//! The "fabric" is a directory (`KVSTORE_RDMA_FAKE=<dir>`): each queue pair
//! listens on the Unix socket `<dir>/qp-<qpn>.sock`, so two server
//! processes on one machine can connect their endpoints as two hosts would.
//! What makes it one-sided like real RDMA READ: when the requester first
//! uses an rkey, the responder's "NIC" (a thread of the endpoint, never the
//! event loop) passes it the registered file's descriptor and a one-word
//! validity flag (a memfd) over that socket with SCM_RIGHTS; from then on
//! the requester's NIC thread maps the file and copies from it itself, so
//! the master's CPU does nothing per byte. Checked as a device would: the
//! rkey must be registered, the range inside the region, the region still
//! registered (the flag) and the responder alive (its socket open), the
//! local slot large enough; a failed request puts the queue pair in the
//! error state and flushes everything after it. Requests complete in the
//! order they were posted (RC ordering); completions are signalled on an
//! eventfd the loop polls, like a completion channel.
//!
//! Faults for tests (`KVSTORE_RDMA_FAKE_FAULTS`, comma-separated):
//! `error-at=N` (the Nth read fails with a remote access error),
//! `corrupt-at=N` (flips a byte of it), `short-at=N` (reports a byte less),
//! `die-at=N` (the link dies: retry exceeded from the Nth read on),
//! `delay-us=D` (every read takes D µs longer).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::endpoint::{
    Completion, Device, Endpoint, QpInfo, RdmaError, RemoteRegion, Result, WcStatus,
};

/// How long a requester keeps asking a responder whose queue pair is not
/// yet connected to it (a real RC QP retries for about as long).
const RETRY_FOR: Duration = Duration::from_secs(2);

/// Injected faults, by read number (counted from 0 per endpoint).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    pub error_at: Option<u64>,
    pub corrupt_at: Option<u64>,
    pub short_at: Option<u64>,
    pub die_at: Option<u64>,
    pub delay: Duration,
}

impl Faults {
    /// Parse `error-at=3,delay-us=10`; unknown words are an error.
    pub fn parse(spec: &str) -> std::result::Result<Faults, String> {
        let mut f = Faults::default();
        for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| format!("bad fault '{word}'"))?;
            let n: u64 = v.parse().map_err(|_| format!("bad number in '{word}'"))?;
            match k {
                "error-at" => f.error_at = Some(n),
                "corrupt-at" => f.corrupt_at = Some(n),
                "short-at" => f.short_at = Some(n),
                "die-at" => f.die_at = Some(n),
                "delay-us" => f.delay = Duration::from_micros(n),
                _ => return Err(format!("unknown fault '{k}'")),
            }
        }
        Ok(f)
    }
}

/// The fake device: a fabric directory and the faults its endpoints inject.
pub struct FakeDevice {
    fabric: PathBuf,
    faults: Faults,
}

impl FakeDevice {
    pub fn new(fabric: PathBuf, faults: Faults) -> Result<FakeDevice> {
        if !fabric.is_dir() {
            return Err(RdmaError(format!(
                "fake RDMA fabric {} is not a directory",
                fabric.display()
            )));
        }
        Ok(FakeDevice { fabric, faults })
    }

    /// The device named by `KVSTORE_RDMA_FAKE` (and its faults), if set.
    pub fn from_env() -> Option<Result<FakeDevice>> {
        let dir = std::env::var_os("KVSTORE_RDMA_FAKE")?;
        let faults = match std::env::var("KVSTORE_RDMA_FAKE_FAULTS") {
            Ok(spec) => match Faults::parse(&spec) {
                Ok(f) => f,
                Err(e) => return Some(Err(RdmaError(format!("KVSTORE_RDMA_FAKE_FAULTS: {e}")))),
            },
            Err(_) => Faults::default(),
        };
        Some(FakeDevice::new(PathBuf::from(dir), faults))
    }
}

impl Device for FakeDevice {
    fn name(&self) -> &str {
        "fake"
    }

    fn open_endpoint(&self) -> Result<Box<dyn Endpoint>> {
        Ok(Box::new(FakeEndpoint::open(
            self.fabric.clone(),
            self.faults.clone(),
        )?))
    }
}

/// A registered region, as the responder keeps it.
struct Region {
    file: File,
    /// The memfd holding the region's validity word (1 while registered).
    valid: File,
    addr: u64,
    len: u64,
}

/// A region as the requester has mapped it.
struct MappedRegion {
    map: memmap2::Mmap,
    valid: memmap2::Mmap,
    addr: u64,
    len: u64,
}

impl MappedRegion {
    fn still_valid(&self) -> bool {
        self.valid.first() == Some(&1)
    }
}

/// A posted read.
struct Work {
    wr_id: u64,
    slot: usize,
    len: usize,
    remote_addr: u64,
    rkey: u32,
}

/// The endpoint's ring of local slots. The device (the NIC thread) writes a
/// slot only between `post_read` and the completion; the loop reads it only
/// after the completion (the endpoint.rs ownership rule). The completion
/// queue's mutex orders the two.
struct Slots {
    buf: Box<[std::cell::UnsafeCell<u8>]>,
    size: usize,
}

// SAFETY: access to each slot is handed between the NIC thread and the
// loop by posting and completing, under the queue mutex (see `Slots`).
unsafe impl Sync for Slots {}

impl Slots {
    fn new(count: usize, size: usize) -> Slots {
        Slots {
            buf: (0..count * size)
                .map(|_| std::cell::UnsafeCell::new(0))
                .collect(),
            size,
        }
    }

    fn count(&self) -> usize {
        self.buf.len().checked_div(self.size).unwrap_or(0)
    }

    /// # Safety
    /// The caller must own `slot` (the device between post and completion,
    /// the loop after it) and nobody else may access it meanwhile.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot_mut(&self, slot: usize) -> &mut [u8] {
        let start = slot * self.size;
        let cells = &self.buf[start..start + self.size];
        // SAFETY: UnsafeCell<u8> has u8's layout; the range is in bounds
        // and owned by the caller (this function's contract).
        unsafe { std::slice::from_raw_parts_mut(cells.as_ptr() as *mut u8, self.size) }
    }
}

/// What the requester's NIC thread and the loop share.
#[derive(Default)]
struct Queue {
    work: VecDeque<Work>,
    done: VecDeque<Completion>,
    shutdown: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Readable while completions wait (the completion channel).
    event: OwnedFd,
    /// Regions registered here for remote reads, by rkey.
    regions: Mutex<HashMap<u32, Region>>,
    /// The peer our queue pair is connected to.
    peer: Mutex<Option<QpInfo>>,
}

impl Shared {
    fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd.
        unsafe { libc::write(self.event.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

/// One queue pair of the fake device.
pub struct FakeEndpoint {
    info: QpInfo,
    fabric: PathBuf,
    faults: Faults,
    shared: Arc<Shared>,
    slots: Option<Arc<Slots>>,
    responder: Option<(JoinHandle<()>, OwnedFd)>,
    requester: Option<JoinHandle<()>>,
    next_rkey: u32,
}

fn eventfd() -> Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned right away.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn socket_path(fabric: &std::path::Path, qpn: u32) -> PathBuf {
    fabric.join(format!("qp-{qpn}.sock"))
}

impl FakeEndpoint {
    pub fn open(fabric: PathBuf, faults: Faults) -> Result<FakeEndpoint> {
        let r = crate::util::random_u64();
        let info = QpInfo {
            qpn: ((r as u32) & 0xff_ffff).max(1),
            psn: ((r >> 32) as u32) & 0xff_ffff,
            lid: 1,
            gid: [0; 16],
            mtu: 4096,
            rd_atomic: 16,
        };
        Ok(FakeEndpoint {
            info,
            fabric,
            faults,
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                wake: Condvar::new(),
                event: eventfd()?,
                regions: Mutex::new(HashMap::new()),
                peer: Mutex::new(None),
            }),
            slots: None,
            responder: None,
            requester: None,
            next_rkey: (r >> 8) as u32 | 1,
        })
    }

    /// Start answering peers on our socket (once, at the first region).
    fn start_responder(&mut self) -> Result<()> {
        if self.responder.is_some() {
            return Ok(());
        }
        let path = socket_path(&self.fabric, self.info.qpn);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let stop = eventfd()?;
        let stop_fd = stop.as_raw_fd();
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("rdma-fake-responder".into())
            .spawn(move || respond(listener, stop_fd, shared, path))?;
        self.responder = Some((handle, stop));
        Ok(())
    }
}

impl Endpoint for FakeEndpoint {
    fn local_info(&self) -> QpInfo {
        self.info
    }

    fn connect(&mut self, peer: &QpInfo) -> Result<()> {
        *self.shared.peer.lock().map_err(|_| poisoned())? = Some(*peer);
        Ok(())
    }

    fn register_file(&mut self, file: &File, addr: *const u8, len: usize) -> Result<RemoteRegion> {
        let size = file.metadata()?.len();
        if len as u64 > size {
            return Err(RdmaError("region longer than its file".into()));
        }
        self.start_responder()?;
        let valid = memfd_flag()?;
        let rkey = self.next_rkey;
        self.next_rkey = self.next_rkey.wrapping_add(2);
        let region = RemoteRegion {
            addr: addr as u64,
            rkey,
            len: len as u64,
        };
        self.shared.regions.lock().map_err(|_| poisoned())?.insert(
            rkey,
            Region {
                file: file.try_clone()?,
                valid,
                addr: region.addr,
                len: region.len,
            },
        );
        Ok(region)
    }

    fn deregister(&mut self, rkey: u32) -> Result<()> {
        let region = self
            .shared
            .regions
            .lock()
            .map_err(|_| poisoned())?
            .remove(&rkey);
        match region {
            Some(r) => {
                // Requesters that mapped it see the flag drop.
                r.valid.write_at(&[0], 0)?;
                Ok(())
            }
            None => Err(RdmaError(format!("no region with rkey {rkey}"))),
        }
    }

    fn alloc_slots(&mut self, count: usize, size: usize) -> Result<()> {
        if self.slots.is_some() {
            return Err(RdmaError("slots already allocated".into()));
        }
        let slots = Arc::new(Slots::new(count, size));
        self.slots = Some(Arc::clone(&slots));
        let shared = Arc::clone(&self.shared);
        let fabric = self.fabric.clone();
        let faults = self.faults.clone();
        let me = self.info.qpn;
        self.requester = Some(
            std::thread::Builder::new()
                .name("rdma-fake-requester".into())
                .spawn(move || request(shared, slots, fabric, faults, me))?,
        );
        Ok(())
    }

    fn post_read(
        &mut self,
        wr_id: u64,
        slot: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<()> {
        let slots = self
            .slots
            .as_ref()
            .ok_or_else(|| RdmaError("no slots".into()))?;
        if slot >= slots.count() {
            return Err(RdmaError(format!("no slot {slot}")));
        }
        let mut q = self.shared.queue.lock().map_err(|_| poisoned())?;
        q.work.push_back(Work {
            wr_id,
            slot,
            len,
            remote_addr,
            rkey,
        });
        self.shared.wake.notify_one();
        Ok(())
    }

    fn slot(&self, slot: usize, len: usize) -> Option<&[u8]> {
        let s = self
            .slots
            .as_ref()
            .filter(|s| slot < s.count() && len <= s.size)?;
        // SAFETY: the caller owns a completed slot (endpoint.rs rule).
        Some(unsafe { &s.slot_mut(slot)[..len] })
    }

    fn completion_fd(&self) -> RawFd {
        self.shared.event.as_raw_fd()
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<()> {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer; EAGAIN is fine.
        unsafe { libc::read(self.shared.event.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        let mut q = self.shared.queue.lock().map_err(|_| poisoned())?;
        out.extend(q.done.drain(..));
        Ok(())
    }
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        if let Ok(mut q) = self.shared.queue.lock() {
            q.shutdown = true;
        }
        self.shared.wake.notify_all();
        if let Some(h) = self.requester.take() {
            let _ = h.join();
        }
        if let Some((h, stop)) = self.responder.take() {
            let one = 1u64.to_ne_bytes();
            // SAFETY: 8 bytes to our own eventfd.
            unsafe { libc::write(stop.as_raw_fd(), one.as_ptr().cast(), 8) };
            let _ = h.join();
        }
        // Regions go with the endpoint, as with a destroyed PD.
        if let Ok(mut regions) = self.shared.regions.lock() {
            for (_, r) in regions.drain() {
                let _ = r.valid.write_at(&[0], 0);
            }
        }
    }
}

fn poisoned() -> RdmaError {
    RdmaError("fake device state poisoned".into())
}

/// A one-byte memfd set to 1: a region's validity flag.
fn memfd_flag() -> Result<File> {
    // SAFETY: a NUL-terminated name; the fd is owned right away.
    let fd = unsafe { libc::memfd_create(c"kvstore-rdma-mr".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a fresh fd nobody else owns.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(&[1])?;
    Ok(f)
}

/// Send `line` with `fds` attached (SCM_RIGHTS).
fn send_with_fds(sock: &UnixStream, line: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: line.as_ptr() as *mut libc::c_void,
        iov_len: line.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is CMSG_SPACE(fd_bytes) long, so the
        // first header and its data fit.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                fd_bytes as usize,
            );
        }
    }
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Receive one message of at most 256 bytes and up to two fds.
fn recv_with_fds(sock: &UnixStream) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut buf = [0u8; 256];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: pure size computation.
    let space = unsafe { libc::CMSG_SPACE(2 * std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: zeroed msghdr is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walks the control headers the kernel filled in, within
    // msg_controllen; each SCM_RIGHTS payload holds whole fds we now own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let bytes = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((buf[..n as usize].to_vec(), fds))
}

/// The responder's NIC: accepts requesters and answers `OPEN <qpn> <rkey>`
/// with the region's file and flag, or `NOTREADY` (our queue pair is not
/// connected to that requester yet) or `ERR` (no such rkey).
fn respond(listener: UnixListener, stop: RawFd, shared: Arc<Shared>, path: PathBuf) {
    let mut peers: Vec<UnixStream> = Vec::new();
    loop {
        let mut fds = vec![
            libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        fds.extend(peers.iter().map(|p| libc::pollfd {
            fd: p.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `fds` is a live array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[0].revents != 0 {
            break;
        }
        if fds[1].revents != 0 {
            if let Ok((s, _)) = listener.accept() {
                peers.push(s);
            }
        }
        let mut gone = Vec::new();
        for (i, pfd) in fds[2..].iter().enumerate() {
            if pfd.revents == 0 {
                continue;
            }
            let peer = &peers[i];
            let mut line = [0u8; 128];
            let n = match (&*peer).read(&mut line) {
                Ok(0) | Err(_) => {
                    gone.push(i);
                    continue;
                }
                Ok(n) => n,
            };
            let text = String::from_utf8_lossy(&line[..n]).to_string();
            let mut words = text.split_whitespace();
            let (Some("OPEN"), Some(qpn), Some(rkey)) = (words.next(), words.next(), words.next())
            else {
                gone.push(i);
                continue;
            };
            let qpn: u32 = qpn.parse().unwrap_or(0);
            let rkey: u32 = rkey.parse().unwrap_or(0);
            let connected = shared
                .peer
                .lock()
                .map(|p| p.is_some_and(|p| p.qpn == qpn))
                .unwrap_or(false);
            let regions = match shared.regions.lock() {
                Ok(r) => r,
                Err(_) => break,
            };
            let sent = match (connected, regions.get(&rkey)) {
                (false, _) => send_with_fds(peer, b"NOTREADY\n", &[]),
                (true, None) => send_with_fds(peer, b"ERR\n", &[]),
                (true, Some(r)) => send_with_fds(
                    peer,
                    format!("OK {} {}\n", r.addr, r.len).as_bytes(),
                    &[r.file.as_raw_fd(), r.valid.as_raw_fd()],
                ),
            };
            if sent.is_err() {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            peers.remove(i);
        }
    }
    let _ = std::fs::remove_file(path);
}

/// The requester's NIC: runs posted reads in order.
fn request(shared: Arc<Shared>, slots: Arc<Slots>, fabric: PathBuf, faults: Faults, me: u32) {
    let mut link: Option<UnixStream> = None;
    let mut mapped: HashMap<u32, MappedRegion> = HashMap::new();
    let mut failed = false;
    let mut count = 0u64;
    loop {
        let work = {
            let Ok(mut q) = shared.queue.lock() else {
                return;
            };
            loop {
                if q.shutdown {
                    return;
                }
                if let Some(w) = q.work.pop_front() {
                    break w;
                }
                q = match shared.wake.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
        };
        let n = count;
        count += 1;
        let (status, bytes) = if failed {
            (WcStatus::Flushed, 0)
        } else {
            // The injected delay, cut short by a teardown.
            let until = Instant::now() + faults.delay;
            while Instant::now() < until && !shutting_down(&shared) {
                std::thread::sleep(Duration::from_millis(1));
            }
            read_one(
                &work,
                &shared,
                &slots,
                &fabric,
                &faults,
                me,
                n,
                &mut link,
                &mut mapped,
            )
        };
        if status != WcStatus::Success {
            // The queue pair is in the error state from here on.
            failed = true;
        }
        if let Ok(mut q) = shared.queue.lock() {
            q.done.push_back(Completion {
                wr_id: work.wr_id,
                status,
                bytes,
            });
        }
        shared.signal();
    }
}

/// One RDMA READ, with the device's checks.
#[allow(clippy::too_many_arguments)]
fn read_one(
    work: &Work,
    shared: &Shared,
    slots: &Slots,
    fabric: &std::path::Path,
    faults: &Faults,
    me: u32,
    n: u64,
    link: &mut Option<UnixStream>,
    mapped: &mut HashMap<u32, MappedRegion>,
) -> (WcStatus, u32) {
    if faults.die_at.is_some_and(|d| n >= d) {
        return (WcStatus::RetryExceeded, 0);
    }
    if faults.error_at == Some(n) {
        return (WcStatus::RemoteAccess, 0);
    }
    if work.len > slots.size || work.slot >= slots.count() {
        return (WcStatus::LocalProtection, 0);
    }
    let Some(peer) = shared.peer.lock().ok().and_then(|p| *p) else {
        return (WcStatus::RetryExceeded, 0);
    };
    if link.is_none() {
        match UnixStream::connect(socket_path(fabric, peer.qpn)) {
            // A responder that stops answering (a stopped host) ends in
            // retry-exceeded, as on a wire, instead of holding the NIC.
            Ok(s) if s.set_read_timeout(Some(RETRY_FOR)).is_ok() => *link = Some(s),
            _ => return (WcStatus::RetryExceeded, 0),
        }
    }
    let Some(sock) = link.as_ref() else {
        return (WcStatus::RetryExceeded, 0);
    };
    // The responder must still be there (a dead host stops answering).
    let mut probe = [0u8; 1];
    // SAFETY: a 1-byte peek into a live buffer, non-blocking.
    let peeked = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            probe.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if peeked == 0 {
        return (WcStatus::RetryExceeded, 0);
    }
    let region = match mapped.entry(work.rkey) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            match open_region(sock, shared, me, work.rkey) {
                Ok(Some(r)) => e.insert(r),
                Ok(None) => return (WcStatus::RemoteAccess, 0),
                Err(_) => return (WcStatus::RetryExceeded, 0),
            }
        }
    };
    let inside = work.remote_addr >= region.addr
        && work
            .remote_addr
            .checked_add(work.len as u64)
            .is_some_and(|end| {
                region
                    .addr
                    .checked_add(region.len)
                    .is_some_and(|r| end <= r)
            });
    if !inside || !region.still_valid() {
        return (WcStatus::RemoteAccess, 0);
    }
    let from = (work.remote_addr - region.addr) as usize;
    // SAFETY: the slot was posted and not yet completed: the device owns it.
    let dst = unsafe { slots.slot_mut(work.slot) };
    dst[..work.len].copy_from_slice(&region.map[from..from + work.len]);
    let mut bytes = work.len as u32;
    if faults.corrupt_at == Some(n) && work.len > 0 {
        dst[0] ^= 0x20;
    }
    if faults.short_at == Some(n) {
        bytes = bytes.saturating_sub(1);
    }
    (WcStatus::Success, bytes)
}

/// Ask the responder for region `rkey`, retrying while its queue pair is
/// not yet connected to ours. `Ok(None)`: no such region.
fn shutting_down(shared: &Shared) -> bool {
    shared.queue.lock().map(|q| q.shutdown).unwrap_or(true)
}

fn open_region(
    sock: &UnixStream,
    shared: &Shared,
    me: u32,
    rkey: u32,
) -> std::io::Result<Option<MappedRegion>> {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        (&*sock).write_all(format!("OPEN {me} {rkey}\n").as_bytes())?;
        let (reply, mut fds) = recv_with_fds(sock)?;
        let text = String::from_utf8_lossy(&reply).to_string();
        let mut words = text.split_whitespace();
        match words.next() {
            Some("OK") if fds.len() == 2 => {
                let addr: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let len: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let valid = File::from(fds.pop().expect("two fds"));
                let file = File::from(fds.pop().expect("two fds"));
                // SAFETY: the responder maps its file read-only too and
                // never truncates it while registered.
                // Populated up front, as a NIC's DMA would not page-fault.
                let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }?;
                // SAFETY: the flag memfd is one byte, only ever rewritten.
                let valid = unsafe { memmap2::Mmap::map(&valid) }?;
                if (map.len() as u64) < len {
                    return Ok(None);
                }
                return Ok(Some(MappedRegion {
                    map,
                    valid,
                    addr,
                    len,
                }));
            }
            Some("NOTREADY") if Instant::now() < deadline && !shutting_down(shared) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Some("NOTREADY") => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "responder not connected",
                ))
            }
            Some("ERR") => return Ok(None),
            _ => return Err(std::io::Error::other("bad answer from the responder")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(faults: Faults) -> (tempfile::TempDir, FakeEndpoint, FakeEndpoint) {
        let dir = tempfile::tempdir().unwrap();
        let master = FakeEndpoint::open(dir.path().to_path_buf(), Faults::default()).unwrap();
        let replica = FakeEndpoint::open(dir.path().to_path_buf(), faults).unwrap();
        (dir, master, replica)
    }

    fn file_with(data: &[u8]) -> (tempfile::NamedTempFile, memmap2::Mmap) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(data).unwrap();
        let map = unsafe { memmap2::Mmap::map(f.as_file()) }.unwrap();
        (f, map)
    }

    /// A master endpoint with `data` registered and a replica endpoint
    /// with `slots` slots of `size` bytes, connected both ways.
    struct Rig {
        _dir: tempfile::TempDir,
        _file: (tempfile::NamedTempFile, memmap2::Mmap),
        m: FakeEndpoint,
        r: FakeEndpoint,
        region: RemoteRegion,
    }

    fn rig(faults: Faults, data: &[u8], slots: usize, size: usize) -> Rig {
        let (dir, mut m, mut r) = pair(faults);
        let (f, map) = file_with(data);
        let region = m
            .register_file(f.as_file(), map.as_ptr(), map.len())
            .unwrap();
        m.connect(&r.local_info()).unwrap();
        r.connect(&m.local_info()).unwrap();
        r.alloc_slots(slots, size).unwrap();
        Rig {
            _dir: dir,
            _file: (f, map),
            m,
            r,
            region,
        }
    }

    /// Wait for `n` completions on the endpoint's fd, as the loop would.
    fn wait(ep: &mut FakeEndpoint, n: usize) -> Vec<Completion> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.len() < n && Instant::now() < deadline {
            let mut pfd = libc::pollfd {
                fd: ep.completion_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            unsafe { libc::poll(&mut pfd, 1, 100) };
            ep.poll(&mut out).unwrap();
        }
        out
    }

    #[test]
    fn a_read_copies_the_registered_bytes_in_order() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let Rig {
            _dir,
            _file,
            m: _m,
            mut r,
            region,
        } = rig(Faults::default(), &data, 2, 4096);
        r.post_read(10, 0, 4096, region.addr, region.rkey).unwrap();
        r.post_read(11, 1, 4096, region.addr + 4096, region.rkey)
            .unwrap();
        let c = wait(&mut r, 2);
        assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![10, 11]);
        assert!(c
            .iter()
            .all(|c| c.status == WcStatus::Success && c.bytes == 4096));
        assert_eq!(r.slot(0, 4096), Some(&data[..4096]));
        assert_eq!(r.slot(1, 4096), Some(&data[4096..8192]));
        assert_eq!(r.slot(1, 4097), None, "longer than a slot");
        assert_eq!(r.slot(2, 1), None, "no such slot");
    }

    #[test]
    fn bad_keys_and_bounds_fail_and_flush_what_follows() {
        let Rig {
            _dir,
            _file,
            m: _m,
            mut r,
            region,
        } = rig(Faults::default(), &[7u8; 100], 2, 64);
        r.post_read(1, 0, 64, region.addr + 50, region.rkey)
            .unwrap();
        r.post_read(2, 1, 10, region.addr, region.rkey).unwrap();
        let c = wait(&mut r, 2);
        assert_eq!(c[0].status, WcStatus::RemoteAccess, "past the region's end");
        assert_eq!(c[1].status, WcStatus::Flushed);

        let Rig {
            _dir,
            _file,
            m: _m,
            mut r,
            region,
        } = rig(Faults::default(), &[7u8; 100], 1, 64);
        r.post_read(1, 0, 10, region.addr, region.rkey ^ 0x100)
            .unwrap();
        assert_eq!(
            wait(&mut r, 1)[0].status,
            WcStatus::RemoteAccess,
            "bad rkey"
        );
    }

    #[test]
    fn a_deregistered_region_can_no_longer_be_read() {
        let Rig {
            _dir,
            _file,
            mut m,
            mut r,
            region,
        } = rig(Faults::default(), &[1u8; 100], 1, 64);
        r.post_read(1, 0, 10, region.addr, region.rkey).unwrap();
        assert_eq!(wait(&mut r, 1)[0].status, WcStatus::Success);
        m.deregister(region.rkey).unwrap();
        r.post_read(2, 0, 10, region.addr, region.rkey).unwrap();
        assert_eq!(wait(&mut r, 1)[0].status, WcStatus::RemoteAccess);
    }

    #[test]
    fn a_responder_not_yet_connected_is_retried_and_a_dead_one_is_noticed() {
        let (_dir, mut m, mut r) = pair(Faults::default());
        let (f, map) = file_with(&[3u8; 100]);
        let region = m
            .register_file(f.as_file(), map.as_ptr(), map.len())
            .unwrap();
        r.connect(&m.local_info()).unwrap();
        r.alloc_slots(1, 64).unwrap();
        r.post_read(1, 0, 10, region.addr, region.rkey).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        m.connect(&r.local_info()).unwrap();
        assert_eq!(wait(&mut r, 1)[0].status, WcStatus::Success);
        drop(m);
        r.post_read(2, 0, 10, region.addr, region.rkey).unwrap();
        assert_eq!(wait(&mut r, 1)[0].status, WcStatus::RetryExceeded);
    }

    #[test]
    fn injected_faults_happen_at_their_read() {
        let faults = Faults::parse("corrupt-at=1,short-at=2").unwrap();
        let Rig {
            _dir,
            _file,
            m: _m,
            mut r,
            region,
        } = rig(faults, &[0u8; 300], 3, 100);
        for i in 0..3u64 {
            r.post_read(i, i as usize, 100, region.addr + i * 100, region.rkey)
                .unwrap();
        }
        let c = wait(&mut r, 3);
        assert_eq!(c[0].bytes, 100);
        assert_eq!(r.slot(1, 1), Some(&[0x20][..]));
        assert_eq!(c[2].bytes, 99);
        assert!(Faults::parse("bogus=1").is_err());
    }
}
