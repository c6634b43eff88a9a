//! The rdma-core implementation of `Device` and `Endpoint` (feature `rdma`),
//! on top of `sideway` with a few raw `rdma-mummy-sys` calls where sideway
//! has no wrapper (`ibv_get_cq_event`, `ibv_ack_cq_events`,
//! `ibv_req_notify_cq`).
//!
//! Design:
//! - The replica pulls with one-sided RDMA READ: the master only registers
//!   its mapped snapshot file (read-only, `REMOTE_READ`) and never touches
//!   the data path; the replica owns a ring of `LOCAL_WRITE` slots and
//!   decides what to read, when, and how many reads are in flight.
//! - Completions reach the event loop through a completion channel whose fd
//!   is non-blocking. `poll` does the verbs dance in this order: read every
//!   pending channel event (`ibv_get_cq_event` until `EAGAIN`), acknowledge
//!   exactly that many (`ibv_ack_cq_events`; `ibv_destroy_cq` waits for
//!   every read event to be acked), re-arm (`ibv_req_notify_cq`), and only
//!   then poll the CQ empty. Arming before the final poll means a
//!   completion that lands after the poll raises a fresh event, so nothing
//!   is lost. mio registers the fd edge-triggered, so `poll` must drain the
//!   channel and the CQ completely every time it is called.
//! - Fork safety: BGSAVE forks. `ibv_fork_init` runs before anything else
//!   (a device whose library refuses it is not used). The slot ring is an
//!   anonymous mapping marked
//!   `MADV_DONTFORK`, so a child never gets (copy-on-write or otherwise) the
//!   pages the NIC writes into; the master's registered file mapping is a
//!   shared read-only file mapping, which fork does not copy.
//! - Teardown order is fixed by field order in `VerbsEndpoint`: QP, then the
//!   MRs, then the slot MR before its mapping is unmapped, then the CQ, then
//!   the channel.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::raw::c_void;
use std::ptr;
use std::sync::Arc;

use rdma_mummy_sys::{
    ibv_ack_cq_events, ibv_cq, ibv_get_cq_event, ibv_mtu, ibv_req_notify_cq, ibv_wc_status,
};
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    BasicCompletionQueue, CompletionChannel, CompletionQueue, PollCompletionQueueError,
};
use sideway::ibverbs::device::{DeviceInfo, DeviceList, GetDeviceListErrorKind};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, QueuePairType,
    SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

use super::endpoint::{
    Completion, Device, Endpoint, QpInfo, RdmaError, RemoteRegion, Result, WcStatus,
};

/// The physical port every endpoint uses.
const PORT: u8 = 1;
/// Completion queue depth: well above the send queue depth, so a full send
/// queue can never overrun it.
const CQ_DEPTH: u32 = 256;
/// Outstanding work requests on the send queue (reads in flight).
const MAX_SEND_WR: u32 = 64;
/// Outstanding RDMA READs per QP, requested on both sides; clamped to what
/// the device supports.
const RD_ATOMIC: u8 = 16;
/// RNR NAK timer (12 ≈ 0.64 ms), local ACK timeout (14 ≈ 67 ms) and retry
/// counts (7 = the maximum; for rnr_retry 7 means "retry forever").
const MIN_RNR_TIMER: u8 = 12;
const TIMEOUT: u8 = 14;
const RETRY_CNT: u8 = 7;
const RNR_RETRY: u8 = 7;
const HOP_LIMIT: u8 = 64;

/// `what` followed by the error and its sources, each once (sideway's
/// `transparent` layers repeat their inner message).
fn chain(what: &str, err: &dyn StdError) -> RdmaError {
    let mut msg = String::from(what);
    let mut last = String::new();
    let mut cur: Option<&dyn StdError> = Some(err);
    while let Some(e) = cur {
        let s = e.to_string();
        if s != last {
            msg.push_str(": ");
            msg.push_str(&s);
        }
        last = s;
        cur = e.source();
    }
    RdmaError(msg)
}

fn os_err(what: &str, err: io::Error) -> RdmaError {
    RdmaError(format!("{what}: {err}"))
}

/// An `ibv_mtu` value (as `ibv_port_attr.active_mtu` holds it) in bytes.
fn mtu_enum_to_bytes(mtu: u32) -> Option<u32> {
    match mtu {
        ibv_mtu::IBV_MTU_256 => Some(256),
        ibv_mtu::IBV_MTU_512 => Some(512),
        ibv_mtu::IBV_MTU_1024 => Some(1024),
        ibv_mtu::IBV_MTU_2048 => Some(2048),
        ibv_mtu::IBV_MTU_4096 => Some(4096),
        _ => None,
    }
}

/// A path MTU in bytes as the `IBV_MTU_*` enum.
fn mtu_from_bytes(bytes: u32) -> Option<Mtu> {
    match bytes {
        256 => Some(Mtu::Mtu256),
        512 => Some(Mtu::Mtu512),
        1024 => Some(Mtu::Mtu1024),
        2048 => Some(Mtu::Mtu2048),
        4096 => Some(Mtu::Mtu4096),
        _ => None,
    }
}

/// A raw `ibv_wc_status` as the subset the sync machines act on.
fn wc_status(status: u32) -> WcStatus {
    match status {
        ibv_wc_status::IBV_WC_SUCCESS => WcStatus::Success,
        ibv_wc_status::IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccess,
        ibv_wc_status::IBV_WC_LOC_PROT_ERR => WcStatus::LocalProtection,
        ibv_wc_status::IBV_WC_WR_FLUSH_ERR => WcStatus::Flushed,
        ibv_wc_status::IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
        n => WcStatus::Other(n),
    }
}

/// A random 24-bit packet sequence number.
fn random_psn() -> u32 {
    (crate::util::random_u64() as u32) & 0x00ff_ffff
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Open the RDMA device to use: the one named by `KVSTORE_RDMA_DEVICE`, or
/// the first one listed. Allocates its protection domain and reads port 1
/// (LID, active MTU) and GID index 0 (or `KVSTORE_RDMA_GID_INDEX`).
///
/// An `Err` carries a plain reason ("no RDMA device found", "libibverbs not
/// available: ...") for the log; it is what turns RDMA off.
pub fn open_first_device() -> Result<Box<dyn Device>> {
    let gid_index = match env_var("KVSTORE_RDMA_GID_INDEX") {
        None => 0u8,
        Some(v) => v
            .trim()
            .parse::<u8>()
            .map_err(|_| RdmaError(format!("KVSTORE_RDMA_GID_INDEX: not a GID index: {v:?}")))?,
    };
    let wanted = env_var("KVSTORE_RDMA_DEVICE");
    // BGSAVE and AOF-rewrite children fork while queue pairs and regions
    // exist: libibverbs makes that safe (MADV_DONTFORK on its own queues;
    // a no-op on kernels that copy pinned pages on fork). It must come
    // before any other verbs call.
    // SAFETY: takes no arguments and touches no verbs object.
    let fork_rc = unsafe { rdma_mummy_sys::ibv_fork_init() };

    let list = match DeviceList::new() {
        Ok(list) => list,
        Err(e) => {
            let errno = match &e.0 {
                GetDeviceListErrorKind::Ibverbs(io) => io.raw_os_error(),
                _ => None,
            };
            return Err(match errno {
                // rdma-core-mummy could not dlopen libibverbs.so.1.
                Some(libc::EOPNOTSUPP) => chain("libibverbs not available", &e),
                // libibverbs is there, the kernel has no uverbs support.
                Some(libc::ENOSYS) => RdmaError(format!(
                    "no RDMA device found (ibv_get_device_list: {})",
                    io::Error::from_raw_os_error(libc::ENOSYS)
                )),
                _ => chain("ibv_get_device_list", &e),
            });
        }
    };
    if list.is_empty() {
        return Err(RdmaError("no RDMA device found".into()));
    }
    if fork_rc != 0 {
        return Err(RdmaError(format!(
            "ibv_fork_init failed ({}): RDMA stays off, as this server forks for snapshots",
            io::Error::from_raw_os_error(fork_rc.abs())
        )));
    }
    let dev = match &wanted {
        None => list
            .get(0)
            .ok_or_else(|| RdmaError("no RDMA device found".into()))?,
        Some(name) => match list.iter().find(|d| d.name() == *name) {
            Some(d) => d,
            None => {
                let have: Vec<String> = list.iter().map(|d| d.name()).collect();
                return Err(RdmaError(format!(
                    "RDMA device {name:?} (KVSTORE_RDMA_DEVICE) not found; devices: {}",
                    have.join(", ")
                )));
            }
        },
    };
    let name = dev.name();
    let ctx = dev
        .open()
        .map_err(|e| chain(&format!("ibv_open_device({name})"), &e))?;
    // Opened devices stay valid after the list is freed.
    drop(list);

    let pd = ctx
        .alloc_pd()
        .map_err(|e| chain(&format!("ibv_alloc_pd({name})"), &e))?;
    let port = ctx
        .query_port(PORT)
        .map_err(|e| chain(&format!("ibv_query_port({name}, port {PORT})"), &e))?;
    let mtu = mtu_enum_to_bytes(port.attr.active_mtu).ok_or_else(|| {
        RdmaError(format!(
            "ibv_query_port({name}, port {PORT}): unknown active MTU {}",
            port.attr.active_mtu
        ))
    })?;
    let gid = ctx.query_gid(PORT, u32::from(gid_index)).map_err(|e| {
        chain(
            &format!("ibv_query_gid({name}, port {PORT}, index {gid_index})"),
            &e,
        )
    })?;
    // The device may allow fewer outstanding reads than we ask for.
    let (max_rd_atomic, max_dest_rd_atomic) = match ctx.query_device() {
        Ok(attr) => (
            clamp_rd_atomic(attr.max_qp_init_rd_atom()),
            clamp_rd_atomic(attr.max_qp_rd_atom()),
        ),
        Err(_) => (RD_ATOMIC, RD_ATOMIC),
    };

    Ok(Box::new(VerbsDevice {
        name,
        ctx,
        pd,
        lid: port.attr.lid,
        gid: gid.raw,
        gid_index,
        mtu,
        max_rd_atomic,
        max_dest_rd_atomic,
    }))
}

fn clamp_rd_atomic(device_max: i32) -> u8 {
    let max = u8::try_from(device_max.max(1)).unwrap_or(u8::MAX);
    RD_ATOMIC.min(max)
}

/// An opened device: its context and protection domain, and what port 1
/// looked like when it was opened.
///
/// `Send` without an `unsafe impl`: sideway's `DeviceContext` and
/// `ProtectionDomain` are `Send + Sync` (verbs handles may be used from any
/// thread), and the rest is plain data.
pub struct VerbsDevice {
    name: String,
    ctx: Arc<DeviceContext>,
    pd: Arc<ProtectionDomain>,
    lid: u16,
    gid: [u8; 16],
    gid_index: u8,
    /// Active MTU of port 1, in bytes.
    mtu: u32,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
}

// `Device: Send` is a supertrait; fail here, not at the trait object.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<VerbsDevice>();
};

impl Device for VerbsDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn open_endpoint(&self) -> Result<Box<dyn Endpoint>> {
        let channel = self
            .ctx
            .create_comp_channel()
            .map_err(|e| chain("ibv_create_comp_channel", &e))?;
        channel
            .set_nonblocking(true)
            .map_err(|e| os_err("fcntl(completion channel, O_NONBLOCK)", e))?;
        let cq = self
            .ctx
            .create_cq_builder()
            .setup_cqe(CQ_DEPTH)
            .setup_comp_channel(&channel, 0)
            .build()
            .map_err(|e| chain("ibv_create_cq", &e))?;
        // SAFETY: `cq` is a live CQ (we hold its Arc for the whole call).
        let rc = unsafe { ibv_req_notify_cq(cq.cq().as_ptr(), 0) };
        if rc != 0 {
            return Err(os_err(
                "ibv_req_notify_cq",
                io::Error::from_raw_os_error(rc),
            ));
        }

        let mut qp = self
            .pd
            .create_qp_builder()
            .setup_qp_type(QueuePairType::ReliableConnection)
            .setup_max_send_wr(MAX_SEND_WR)
            .setup_max_recv_wr(1)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_send_cq(Arc::clone(&cq))
            .setup_recv_cq(Arc::clone(&cq))
            .build()
            .map_err(|e| chain("ibv_create_qp", &e))?;

        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(PORT)
            .setup_access_flags(AccessFlags::RemoteRead | AccessFlags::LocalWrite);
        qp.modify(&attr)
            .map_err(|e| chain("ibv_modify_qp(INIT)", &e))?;

        let qpn = qp.qp_number();
        let info = QpInfo {
            qpn,
            psn: random_psn(),
            lid: self.lid,
            gid: self.gid,
            mtu: self.mtu,
            rd_atomic: self.max_dest_rd_atomic,
        };
        Ok(Box::new(VerbsEndpoint {
            qp,
            mrs: HashMap::new(),
            slots: None,
            cq,
            channel,
            pd: Arc::clone(&self.pd),
            info,
            gid_index: self.gid_index,
            max_rd_atomic: self.max_rd_atomic,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
        }))
    }
}

/// An anonymous, page-aligned, `MADV_DONTFORK` mapping; unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Mapping> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page)
            .ok()
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        let len = len
            .checked_add(page - 1)
            .map(|l| l / page * page)
            .ok_or_else(|| RdmaError(format!("alloc_slots: {len} bytes is too large")))?;
        // SAFETY: a fresh anonymous private mapping; no existing memory is
        // touched, and the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap(slots)", io::Error::last_os_error()));
        }
        let map = Mapping {
            ptr: p.cast::<u8>(),
            len,
        };
        // SAFETY: [ptr, ptr+len) is the mapping just created and owned by
        // `map`; MADV_DONTFORK only changes what fork() copies.
        let rc = unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) };
        if rc != 0 {
            // `map` is dropped here and unmaps.
            return Err(os_err(
                "madvise(slots, MADV_DONTFORK)",
                io::Error::last_os_error(),
            ));
        }
        Ok(map)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, unmapped once;
        // the memory region over it has been deregistered before (see
        // `SlotRing` field order), so the device no longer writes here.
        unsafe {
            libc::munmap(self.ptr.cast::<c_void>(), self.len);
        }
    }
}

/// The replica's registered slots. Field order is drop order: the MR is
/// deregistered before the mapping under it is unmapped.
struct SlotRing {
    mr: Arc<MemoryRegion>,
    map: Mapping,
    count: usize,
    size: usize,
}

/// One RC queue pair with its CQ and completion channel. Field order is
/// drop order (QP, MRs, slot MR then its mapping, CQ, channel), which is the
/// order verbs requires: a CQ cannot be destroyed while a QP uses it, nor a
/// channel while a CQ uses it. Every CQ event read is acked in `poll`, so
/// `ibv_destroy_cq` does not wait on unacked events.
pub struct VerbsEndpoint {
    qp: BasicQueuePair,
    mrs: HashMap<u32, Arc<MemoryRegion>>,
    slots: Option<SlotRing>,
    cq: Arc<BasicCompletionQueue>,
    channel: Arc<CompletionChannel>,
    pd: Arc<ProtectionDomain>,
    info: QpInfo,
    gid_index: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
}

impl VerbsEndpoint {
    /// Read every pending channel event; returns how many were read (all of
    /// which must be acked), and the error that stopped the loop, if any.
    fn drain_events(&self) -> (u32, Option<RdmaError>) {
        let mut events: u32 = 0;
        loop {
            let mut ev_cq: *mut ibv_cq = ptr::null_mut();
            let mut ev_ctx: *mut c_void = ptr::null_mut();
            // SAFETY: the channel is live (we own an Arc); the out-pointers
            // are valid locals. The fd is non-blocking, so this never waits.
            let rc = unsafe {
                ibv_get_cq_event(
                    self.channel.comp_channel().as_ptr(),
                    &mut ev_cq,
                    &mut ev_ctx,
                )
            };
            if rc == 0 {
                events = events.saturating_add(1);
                continue;
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => return (events, None),
                io::ErrorKind::Interrupted => continue,
                _ => return (events, Some(os_err("ibv_get_cq_event", err))),
            }
        }
    }
}

impl Endpoint for VerbsEndpoint {
    fn local_info(&self) -> QpInfo {
        self.info
    }

    fn connect(&mut self, peer: &QpInfo) -> Result<()> {
        let path = peer.mtu.min(self.info.mtu);
        let mtu = mtu_from_bytes(path).ok_or_else(|| {
            RdmaError(format!(
                "connect: invalid path MTU {path} (peer {}, local {})",
                peer.mtu, self.info.mtu
            ))
        })?;

        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(peer.lid).setup_port(PORT);
        let dgid = Gid { raw: peer.gid };
        if !dgid.is_zero() {
            ah.setup_grh(&dgid, 0, self.gid_index, HOP_LIMIT, 0);
        }

        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu)
            .setup_dest_qp_num(peer.qpn)
            .setup_rq_psn(peer.psn & 0x00ff_ffff)
            .setup_max_dest_read_atomic(self.max_dest_rd_atomic)
            .setup_min_rnr_timer(MIN_RNR_TIMER)
            .setup_address_vector(&ah);
        self.qp
            .modify(&rtr)
            .map_err(|e| chain("ibv_modify_qp(RTR)", &e))?;

        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_timeout(TIMEOUT)
            .setup_retry_cnt(RETRY_CNT)
            .setup_rnr_retry(RNR_RETRY)
            .setup_sq_psn(self.info.psn)
            // No more reads in flight than the peer serves.
            .setup_max_read_atomic(self.max_rd_atomic.min(peer.rd_atomic).max(1));
        self.qp
            .modify(&rts)
            .map_err(|e| chain("ibv_modify_qp(RTS)", &e))?;
        Ok(())
    }

    fn register_file(&mut self, _file: &File, addr: *const u8, len: usize) -> Result<RemoteRegion> {
        if addr.is_null() || len == 0 {
            return Err(RdmaError(format!(
                "register_file: empty region ({addr:p}, {len} bytes)"
            )));
        }
        // SAFETY: the trait contract: the caller mapped `len` bytes at `addr`
        // and keeps the mapping until `deregister` or drop, both of which
        // deregister the MR first. Remote-read only: the device never writes.
        let mr = unsafe { self.pd.reg_mr(addr as usize, len, AccessFlags::RemoteRead) }
            .map_err(|e| chain("ibv_reg_mr(file)", &e))?;
        let rkey = mr.rkey();
        self.mrs.insert(rkey, mr);
        Ok(RemoteRegion {
            addr: addr as u64,
            rkey,
            len: len as u64,
        })
    }

    fn deregister(&mut self, rkey: u32) -> Result<()> {
        match self.mrs.remove(&rkey) {
            Some(_mr) => Ok(()),
            None => Err(RdmaError(format!(
                "deregister: no region with rkey {rkey:#x}"
            ))),
        }
    }

    fn alloc_slots(&mut self, count: usize, size: usize) -> Result<()> {
        if count == 0 || size == 0 {
            return Err(RdmaError(format!(
                "alloc_slots: empty ring ({count} slots of {size} bytes)"
            )));
        }
        if u32::try_from(size).is_err() {
            return Err(RdmaError(format!(
                "alloc_slots: slot size {size} exceeds a work request's 32-bit length"
            )));
        }
        let total = count
            .checked_mul(size)
            .ok_or_else(|| RdmaError(format!("alloc_slots: {count} x {size} bytes overflows")))?;
        if self.slots.is_some() {
            return Err(RdmaError("alloc_slots: slots already allocated".into()));
        }
        let map = Mapping::new(total)?;
        // SAFETY: `map` is a live read/write mapping of `map.len` bytes owned
        // by the `SlotRing` below, whose field order deregisters the MR
        // before unmapping.
        let mr = unsafe {
            self.pd
                .reg_mr(map.ptr as usize, map.len, AccessFlags::LocalWrite)
        }
        .map_err(|e| chain("ibv_reg_mr(slots)", &e))?;
        self.slots = Some(SlotRing {
            mr,
            map,
            count,
            size,
        });
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
        let ring = self
            .slots
            .as_ref()
            .ok_or_else(|| RdmaError("post_read: no slots allocated".into()))?;
        if slot >= ring.count || len > ring.size {
            return Err(RdmaError(format!(
                "post_read: slot {slot} / {len} bytes out of range ({} slots of {} bytes)",
                ring.count, ring.size
            )));
        }
        // Fits: len <= size, and alloc_slots checked size fits in u32.
        let length = len as u32;
        let lkey = ring.mr.lkey();
        let addr = ring.map.ptr as u64 + (slot * ring.size) as u64;

        let mut guard = self.qp.start_post_send();
        let wr = guard
            .construct_wr(wr_id, WorkRequestFlags::Signaled)
            .setup_read(rkey, remote_addr);
        if length > 0 {
            // SAFETY: [addr, addr+length) lies inside slot `slot` of the
            // registered ring (checked above), under `lkey`. The slot belongs
            // to the device until its completion is returned by `poll`
            // (trait contract), and the ring outlives the QP's use of it.
            unsafe { wr.setup_sge(lkey, addr, length) };
        }
        // A zero-length READ is posted with no SGE: an SGE of length 0 means
        // 2 GiB on some devices.
        guard.post().map_err(|e| chain("ibv_post_send", &e))
    }

    /// Like the fake: no slots, or a slot out of range, gives an empty
    /// slice, and `len` is clamped to the slot size (a caller bug either way,
    /// but not one worth a panic on the event loop).
    fn slot(&self, slot: usize, len: usize) -> Option<&[u8]> {
        let ring = self
            .slots
            .as_ref()
            .filter(|r| slot < r.count && len <= r.size)?;
        // SAFETY: slot < count and len <= size, so the range lies inside the
        // live mapping; the caller only asks for slots whose read has
        // completed (endpoint.rs ownership rule), so the device is not
        // writing them while this shared borrow of `self` lives.
        Some(unsafe { std::slice::from_raw_parts(ring.map.ptr.add(slot * ring.size), len) })
    }

    fn completion_fd(&self) -> RawFd {
        self.channel.as_raw_fd()
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<()> {
        // SAFETY: the CQ is live for the whole call (we own an Arc).
        let cq = unsafe { self.cq.cq() }.as_ptr();

        let (events, drain_err) = self.drain_events();
        if events > 0 {
            // SAFETY: `events` events were read for this CQ (the only CQ on
            // this channel) and none of them has been acked yet.
            unsafe { ibv_ack_cq_events(cq, events) };
        }
        if let Some(e) = drain_err {
            return Err(e);
        }

        // SAFETY: live CQ; re-arm before the final poll so that a completion
        // arriving after it raises a new channel event.
        let rc = unsafe { ibv_req_notify_cq(cq, 0) };
        if rc != 0 {
            return Err(os_err(
                "ibv_req_notify_cq",
                io::Error::from_raw_os_error(rc),
            ));
        }

        loop {
            match self.cq.start_poll() {
                Ok(poller) => {
                    for wc in poller {
                        out.push(Completion {
                            wr_id: wc.wr_id(),
                            status: wc_status(wc.status()),
                            bytes: wc.byte_len(),
                        });
                    }
                }
                Err(PollCompletionQueueError::CompletionQueueEmpty) => return Ok(()),
                Err(e) => return Err(chain("ibv_poll_cq", &e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_first_device_gives_device_or_reason() {
        match open_first_device() {
            Ok(dev) => {
                println!("RDMA device: {}", dev.name());
                assert!(!dev.name().is_empty());
            }
            Err(e) => {
                println!("no RDMA device: {e}");
                assert!(!e.0.is_empty());
            }
        }
    }

    #[test]
    fn mtu_and_status_mapping() {
        for b in [256, 512, 1024, 2048, 4096] {
            let m = mtu_from_bytes(b).map(|m| m as u32);
            assert_eq!(m.and_then(mtu_enum_to_bytes), Some(b));
        }
        assert!(mtu_from_bytes(1500).is_none());
        assert_eq!(wc_status(ibv_wc_status::IBV_WC_SUCCESS), WcStatus::Success);
        assert_eq!(
            wc_status(ibv_wc_status::IBV_WC_REM_ACCESS_ERR),
            WcStatus::RemoteAccess
        );
        assert_eq!(
            wc_status(ibv_wc_status::IBV_WC_LOC_PROT_ERR),
            WcStatus::LocalProtection
        );
        assert_eq!(
            wc_status(ibv_wc_status::IBV_WC_WR_FLUSH_ERR),
            WcStatus::Flushed
        );
        assert_eq!(
            wc_status(ibv_wc_status::IBV_WC_RETRY_EXC_ERR),
            WcStatus::RetryExceeded
        );
        assert_eq!(
            wc_status(ibv_wc_status::IBV_WC_GENERAL_ERR),
            WcStatus::Other(ibv_wc_status::IBV_WC_GENERAL_ERR)
        );
        assert!(random_psn() <= 0x00ff_ffff);
    }

    #[test]
    fn slot_mapping_is_page_aligned() {
        let map = Mapping::new(3 * 1000).map_err(|e| e.0);
        let map = match map {
            Ok(m) => m,
            Err(e) => panic!("mmap: {e}"),
        };
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        assert_eq!(map.ptr as usize % page, 0);
        assert!(map.len >= 3000 && map.len % page == 0);
    }
}
