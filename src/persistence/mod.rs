//! Persistence formats: RDB snapshots (and, later, the append-only file).
//! Functions here take databases and options, never the server.

pub mod aof;
pub mod crc64;
pub mod rdb;

/// The LZF codec lives in `util` (lists compress their nodes with it in
/// `db`); dumps use it from here as before.
pub use crate::util::lzf;

use std::io::Write;

/// Bytes between two fsyncs of a snapshot or an AOF rewrite being written
/// when its incremental fsync option is on (Redis's REDIS_AUTOSYNC_BYTES):
/// the kernel never holds much of it dirty, so no huge flush stalls the
/// disk at the end.
pub const INCREMENTAL_FSYNC_BYTES: u64 = 4 << 20;

/// A file written through, fsynced every `every` bytes (Redis's rio
/// autosync); `None`: only when its writer says.
pub struct SyncingWriter<'a> {
    file: &'a std::fs::File,
    every: Option<u64>,
    unsynced: u64,
}

impl<'a> SyncingWriter<'a> {
    pub fn new(file: &'a std::fs::File, every: Option<u64>) -> SyncingWriter<'a> {
        SyncingWriter {
            file,
            every,
            unsynced: 0,
        }
    }
}

impl Write for SyncingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        if let Some(every) = self.every {
            self.unsynced += n as u64;
            if self.unsynced >= every {
                self.file.sync_data()?;
                self.unsynced = 0;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
