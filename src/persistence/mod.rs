//! Persistence formats: RDB snapshots (and, later, the append-only file).
//! Functions here take databases and options, never the server.

pub mod aof;
pub mod crc64;
pub mod rdb;

/// The LZF codec lives in `util` (lists compress their nodes with it in
/// `db`); dumps use it from here as before.
pub use crate::util::lzf;
