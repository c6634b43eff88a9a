//! The endpoint trait: what the full-sync machines need from an RDMA
//! device, and nothing more.
//!
//! The data plane is replica-driven RDMA READ (see `rdma/mod.rs`), so an
//! endpoint does four things: describe its reliable-connected queue pair
//! (`local_info`) and bring it up towards the peer's (`connect`); on the
//! master, register a mapped file read-only for remote reads
//! (`register_file`); on the replica, own a ring of registered slots and
//! post reads into them (`alloc_slots`, `post_read`); and report
//! completions through a file descriptor the event loop polls
//! (`completion_fd`, `poll`). Two implementations: rdma-core verbs
//! (`rdma/verbs.rs`, feature `rdma`) and the fake (`rdma/fake.rs`).
//!
//! Ownership of a slot follows the verbs rule: from `post_read` until its
//! completion is returned by `poll` the slot belongs to the device, and the
//! caller neither reads it nor posts it again; after the completion it is
//! the caller's until posted again.

use std::fmt;
use std::fs::File;
use std::os::fd::RawFd;

/// A queue pair as the peer needs to know it (what `ibv_modify_qp` to RTR
/// takes): sent over the TCP control link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInfo {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
    /// Path MTU in bytes (256 … 4096).
    pub mtu: u32,
    /// RDMA reads this queue pair serves in flight as a responder (its
    /// device's limit, at most 16): the peer's initiator depth may not
    /// exceed it, or the responder NAKs.
    pub rd_atomic: u8,
}

/// A region the peer may read: where it is, its key, how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRegion {
    pub addr: u64,
    pub rkey: u32,
    pub len: u64,
}

/// How a work request ended (the subset of `ibv_wc_status` we act on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// Bad rkey, or an address outside the region (IBV_WC_REM_ACCESS_ERR).
    RemoteAccess,
    /// The local buffer was not registered or too short (IBV_WC_LOC_PROT_ERR).
    LocalProtection,
    /// The queue pair went to the error state before this request ran
    /// (IBV_WC_WR_FLUSH_ERR).
    Flushed,
    /// The peer stopped answering (IBV_WC_RETRY_EXC_ERR).
    RetryExceeded,
    /// Any other status, as the device reported it.
    Other(u32),
}

/// One completion: which request, how it ended, bytes moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub bytes: u32,
}

/// Why an endpoint operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaError(pub String);

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RdmaError {}

impl From<std::io::Error> for RdmaError {
    fn from(e: std::io::Error) -> RdmaError {
        RdmaError(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, RdmaError>;

/// An opened RDMA device (a context and a protection domain): makes
/// endpoints. Opened once at start; its absence is what turns RDMA off.
pub trait Device: Send {
    /// The device's name, for the log and INFO (`mlx5_0`, `rxe0`, `fake`).
    fn name(&self) -> &str;
    /// A new endpoint: a completion channel, a completion queue and a
    /// reliable-connected queue pair in the INIT state.
    fn open_endpoint(&self) -> Result<Box<dyn Endpoint>>;
}

/// One side of an RC connection used for one full sync.
pub trait Endpoint {
    /// This queue pair as the peer must know it.
    fn local_info(&self) -> QpInfo;

    /// Bring the queue pair to RTS towards `peer` (INIT → RTR → RTS).
    fn connect(&mut self, peer: &QpInfo) -> Result<()>;

    /// The master: register `len` bytes of `file`, mapped read-only at
    /// `addr` by the caller, for remote reads. The mapping must outlive the
    /// registration (`deregister`, or dropping the endpoint).
    fn register_file(&mut self, file: &File, addr: *const u8, len: usize) -> Result<RemoteRegion>;

    /// Remove a registration: later remote reads of it fail.
    fn deregister(&mut self, rkey: u32) -> Result<()>;

    /// The replica: `count` slots of `size` bytes, registered for local
    /// writes by the device.
    fn alloc_slots(&mut self, count: usize, size: usize) -> Result<()>;

    /// Post an RDMA READ of `len` bytes at `remote_addr` (under `rkey`) into
    /// slot `slot`; its completion carries `wr_id`.
    fn post_read(
        &mut self,
        wr_id: u64,
        slot: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result<()>;

    /// The first `len` bytes of slot `slot`, whose read has completed;
    /// `None` when there is no such slot or it is shorter than `len`.
    fn slot(&self, slot: usize, len: usize) -> Option<&[u8]>;

    /// The fd that becomes readable when completions are waiting (the
    /// completion channel). The loop registers it; it is edge-triggered
    /// there, so `poll` is called until it returns nothing new.
    fn completion_fd(&self) -> RawFd;

    /// Drain the channel's events (acknowledging exactly that many), re-arm
    /// notification, then poll the completion queue empty into `out`.
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<()>;
}
