//! Persistence formats: RDB snapshots (and, later, the append-only file).
//! Functions here take databases and options, never the server.

pub mod aof;
pub mod crc64;
pub mod lzf;
pub mod rdb;
