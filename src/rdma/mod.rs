//! RDMA full sync: a replica's snapshot moves over an RDMA queue pair,
//! zero-copy from the master's memory-mapped dump, while the TCP
//! replication link carries the control plane and then the command stream.
//!
//! The data plane is replica-driven RDMA READ. The master writes the dump to
//! its file (the disk-based path), maps it read-only, registers the mapping
//! for remote reads and offers it (`+RDMAFULLSYNC`, `control.rs`); the
//! replica keeps a window of reads in flight into a ring of registered
//! slots and writes each slot to its temporary dump in order (`sync.rs`).
//! Why READ rather than master-driven WRITE WITH IMMEDIATE: the master's CPU
//! does nothing per byte (no posting, no completions, no credits to track),
//! there is no flow control to get wrong because the reader paces itself,
//! and the master's event loop stays free for clients; the replica, which
//! has nothing else to do during a full sync, does the work. The window
//! (`WINDOW` reads of `CHUNK` bytes) keeps the link full: the seed had one
//! chunk in flight and a message round trip per chunk.
//!
//! Layering: this module knows devices, queue pairs and the two machines;
//! the replication code (`state/`, `server/`) feeds them and carries out
//! their actions. Devices: rdma-core verbs through the `sideway` crate
//! (`verbs.rs`, cargo feature `rdma`) and a fake with the same semantics
//! (`fake.rs`, in tests and with the `rdma-fake` feature).

pub mod control;
pub mod endpoint;
#[cfg(any(test, feature = "rdma-fake"))]
pub mod fake;
pub mod sync;
#[cfg(feature = "rdma")]
pub mod verbs;

pub use endpoint::{Completion, Device, Endpoint, QpInfo, RdmaError, RemoteRegion, WcStatus};

/// Reads the replica keeps in flight.
pub const WINDOW: usize = 16;
/// Bytes per read (and per slot of the replica's ring).
pub const CHUNK: usize = 1 << 20;

/// Open the RDMA device this build can use: the fake named by
/// `KVSTORE_RDMA_FAKE` (builds with `rdma-fake`), else the first verbs
/// device (builds with `rdma`). `Err` says why there is none, for the one
/// log line at start.
pub fn open_device() -> Result<Box<dyn Device>, RdmaError> {
    #[cfg(feature = "rdma-fake")]
    if let Some(dev) = fake::FakeDevice::from_env() {
        return dev.map(|d| Box::new(d) as Box<dyn Device>);
    }
    #[cfg(feature = "rdma")]
    {
        verbs::open_first_device()
    }
    #[cfg(not(feature = "rdma"))]
    {
        Err(RdmaError(
            "this build has no RDMA support (build with --features rdma)".into(),
        ))
    }
}

/// The opened device, as the server keeps it.
pub struct DeviceHandle(pub Box<dyn Device>);

impl std::fmt::Debug for DeviceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceHandle({})", self.0.name())
    }
}

/// What INFO replication shows about RDMA full syncs (both roles).
#[derive(Debug, Default, Clone)]
pub struct RdmaStats {
    /// Full syncs completed over RDMA (served on a master, received on a
    /// replica).
    pub fullsyncs: u64,
    /// RDMA transfers that failed (each then fell back to TCP).
    pub failures: u64,
    /// Full syncs sent over TCP to an RDMA-capable replica instead.
    pub fallbacks: u64,
    /// The last completed transfer: bytes and microseconds.
    pub last_bytes: u64,
    pub last_usec: u64,
}
