//! kvstore: a Redis-compatible key-value server.
//!
//! One event-loop thread owns all state (see `server`), requests are parsed
//! incrementally (`protocol`), dispatched through one command table
//! (`commands`) onto compact keyspace tables (`db`).

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc options, read at its start: purge unused pages from jemalloc's
/// own background thread (as Redis does) instead of inline in whatever
/// allocation happens to trip the decay timer on the event loop.
#[used]
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: &u8 = &b"background_thread:true\0"[0];

pub mod commands;
pub mod config;
pub mod db;
pub mod logging;
pub mod memory;
pub mod net;
pub mod persistence;
pub mod process;
pub mod protocol;
pub mod rdma;
pub mod scripting;
pub mod server;
pub mod state;
pub mod tls;
pub mod tls_v1;
pub mod util;

/// The Redis version whose behaviour we implement (reported by INFO/HELLO, and
/// what clients use for feature detection).
pub const REDIS_VERSION: &str = "7.0.15";
/// The same as a number (Redis's REDIS_VERSION_NUM: 0x00MMmmpp).
pub const REDIS_VERSION_NUM: u32 = 0x0007_000f;
/// kvstore's own version.
pub const KVSTORE_VERSION: &str = env!("CARGO_PKG_VERSION");
