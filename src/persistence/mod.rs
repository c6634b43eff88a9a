//! Persistence: RDB snapshots (and, later, the append-only file).

pub mod crc64;
pub mod lzf;
pub mod rdb;
pub mod snapshot;
