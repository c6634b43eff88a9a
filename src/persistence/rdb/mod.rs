//! Redis-format RDB snapshots: writing (version 10; lists as Redis writes
//! them, quicklist2 nodes with the compressed ones as LZF blobs; other
//! types in plain encodings Redis 7.0 loads and redis-check-rdb accepts) and loading (through a memory map,
//! never a heap copy of the file), including the compact encodings a Redis
//! 7.0 dump holds: intset, listpack hashes and sorted sets, quicklist2.
//!
//! The file ends with a CRC-64 (Jones) of everything before it; a truncated
//! or corrupt file is refused with the offset and what was expected.

mod encoding;
mod load;
mod save;

use crate::config::Config;

pub use load::{
    load_begin, load_bytes, load_file, load_step, load_step_partial, parse_dump_payload,
    parse_functions_payload, LoadState, LoadStats, Restored, HEADER_LEN,
};
pub use save::{
    dump_payload, functions_payload, hash_listpack, save_to_file, temp_name, write_rdb,
    zset_listpack,
};

pub const RDB_VERSION: u32 = 10;
/// Oldest and newest versions we read.
pub(super) const MIN_VERSION: u32 = 1;
pub(super) const MAX_VERSION: u32 = 12;

// Object types.
pub(super) const T_STRING: u8 = 0;
pub(super) const T_LIST: u8 = 1;
pub(super) const T_SET: u8 = 2;
pub(super) const T_ZSET: u8 = 3;
pub(super) const T_HASH: u8 = 4;
pub(super) const T_ZSET_2: u8 = 5;
pub(super) const T_MODULE: u8 = 6;
pub(super) const T_MODULE_2: u8 = 7;
pub(super) const T_HASH_ZIPMAP: u8 = 9;
pub(super) const T_LIST_ZIPLIST: u8 = 10;
pub(super) const T_SET_INTSET: u8 = 11;
pub(super) const T_ZSET_ZIPLIST: u8 = 12;
pub(super) const T_HASH_ZIPLIST: u8 = 13;
pub(super) const T_LIST_QUICKLIST: u8 = 14;
pub(super) const T_STREAM_LISTPACKS: u8 = 15;
pub(super) const T_HASH_LISTPACK: u8 = 16;
pub(super) const T_ZSET_LISTPACK: u8 = 17;
pub(super) const T_LIST_QUICKLIST_2: u8 = 18;
pub(super) const T_STREAM_LISTPACKS_2: u8 = 19;
pub(super) const T_SET_LISTPACK: u8 = 20;
pub(super) const T_STREAM_LISTPACKS_3: u8 = 21;

/// The encoding byte of an LZF-compressed string (`RDB_ENCVAL << 6 | RDB_ENC_LZF`).
pub(super) const ENC_LZF: u8 = 0xC3;

// Opcodes.
pub(super) const OP_FUNCTION2: u8 = 245;
pub(super) const OP_FUNCTION_PRE_GA: u8 = 246;
pub(super) const OP_MODULE_AUX: u8 = 247;
pub(super) const OP_IDLE: u8 = 248;
pub(super) const OP_FREQ: u8 = 249;
pub(super) const OP_AUX: u8 = 250;
pub(super) const OP_RESIZEDB: u8 = 251;
pub(super) const OP_EXPIRETIME_MS: u8 = 252;
pub(super) const OP_EXPIRETIME: u8 = 253;
pub(super) const OP_SELECTDB: u8 = 254;
pub(super) const OP_EOF: u8 = 255;

/// What the writer takes from the configuration and the server.
#[derive(Debug, Clone)]
pub struct SaveOptions {
    /// LZF-compress strings (`rdbcompression`).
    pub compress: bool,
    /// Write a CRC-64 trailer; zero when off (`rdbchecksum`).
    pub checksum: bool,
    /// Sleep this many microseconds per key (`rdb-key-save-delay`, a test aid).
    pub key_save_delay_us: i64,
    /// Recorded in the `used-mem` aux field.
    pub used_memory: usize,
    /// The image is an AOF base (the `aof-base` aux field).
    pub aof_base: bool,
    /// Replication id and offset the image corresponds to (the
    /// `repl-stream-db`, `repl-id`, `repl-offset` aux fields).
    pub repl: Option<ReplInfo>,
    /// The code of every function library (FUNCTION2 records).
    pub functions: Vec<Vec<u8>>,
    /// What each key's access clock means, so that a restart keeps its
    /// LRU idle time or LFU counter (Redis writes IDLE or FREQ records
    /// under an LRU or LFU maxmemory-policy).
    pub access: AccessRecords,
    /// A file being written is fsynced every so many bytes
    /// (`rdb-save-incremental-fsync`, `aof-rewrite-incremental-fsync`).
    pub fsync_every: Option<u64>,
}

/// Which access records a dump carries, with the clocks to compute them.
#[derive(Debug, Clone, Copy)]
pub enum AccessRecords {
    None,
    /// IDLE: seconds since the last access, from the LRU clock now.
    Lru {
        clock: u32,
    },
    /// FREQ: the LFU counter, decayed to the minutes clock now.
    Lfu {
        minutes: u32,
        decay: i64,
    },
}

impl AccessRecords {
    pub fn from_config(cfg: &Config, now_ms: i64) -> AccessRecords {
        use crate::db::entry::{lfu_minutes, lru_clock};
        if cfg.maxmemory_policy.is_lfu() {
            AccessRecords::Lfu {
                minutes: lfu_minutes(now_ms),
                decay: cfg.lfu_decay_time,
            }
        } else if cfg.maxmemory_policy.is_lru() {
            AccessRecords::Lru {
                clock: lru_clock(now_ms),
            }
        } else {
            AccessRecords::None
        }
    }
}

/// Where in a replication history a snapshot was taken.
#[derive(Debug, Clone)]
pub struct ReplInfo {
    pub stream_db: i64,
    pub id: String,
    pub offset: i64,
}

impl SaveOptions {
    pub fn from_config(cfg: &Config, used_memory: usize) -> SaveOptions {
        SaveOptions {
            compress: cfg.rdbcompression,
            checksum: cfg.rdbchecksum,
            key_save_delay_us: cfg.rdb_key_save_delay,
            used_memory,
            aof_base: false,
            repl: None,
            functions: Vec::new(),
            access: AccessRecords::from_config(cfg, crate::util::unix_time_ms()),
            fsync_every: cfg
                .rdb_save_incremental_fsync
                .then_some(super::INCREMENTAL_FSYNC_BYTES),
        }
    }
}

/// What the loader takes from the configuration: whether to verify the
/// checksum and the limits that decide each loaded value's encoding.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub checksum: bool,
    /// `list-max-listpack-size` and `list-compress-depth` for loaded lists.
    pub(super) list_fill: i64,
    pub(super) list_compress: i64,
    /// (entries, value bytes) of a listpack hash / sorted set.
    pub(super) hash_limits: (usize, usize),
    pub(super) zset_limits: (usize, usize),
    pub(super) intset_max: usize,
    /// Whether FREQ records set LFU counters (an LFU policy) or IDLE
    /// records set LRU times (any other).
    pub(super) lfu: bool,
    /// Microseconds to wait per key loaded (`key-load-delay`, a test aid).
    pub key_load_delay: i64,
    /// A step of a load ends once past this many bytes
    /// (`loading-process-events-interval-bytes`).
    pub step_bytes: usize,
    /// Keep keys whose TTL has passed (Redis keeps them when it is a
    /// replica, its master decides their expiry, and when loading an AOF's
    /// base, which the incremental commands must find as it was). Set by
    /// the caller; `from_config` drops them.
    pub keep_expired: bool,
    /// A key already in the dataset is replaced rather than refused (DEBUG
    /// RELOAD MERGE, Redis's RDBFLAGS_ALLOW_DUP).
    pub allow_dup: bool,
    /// Note the keys skipped as expired (`LoadStats::expired_keys`): a
    /// master loading its dump at startup tells its replicas they are gone
    /// (Redis's RDBFLAGS_FEED_REPL).
    pub collect_expired: bool,
    /// RESTORE takes a payload whatever its CRC-64 (DEBUG
    /// SET-SKIP-CHECKSUM-VALIDATION: Redis's fuzzer corrupts payloads and
    /// wants the parser, not the checksum, to meet them).
    pub skip_payload_checksum: bool,
}

/// Redis's debugDelay: wait `usec` µs, or for a negative -N, 1 µs once in N
/// calls (a shorter sleep than any system call allows, on average).
pub fn debug_delay(usec: i64) {
    let usec = if usec < 0 {
        u64::from(crate::util::random_u64().is_multiple_of(usec.unsigned_abs()))
    } else {
        usec as u64
    };
    if usec > 0 {
        std::thread::sleep(std::time::Duration::from_micros(usec));
    }
}

impl LoadOptions {
    pub fn from_config(cfg: &Config) -> LoadOptions {
        LoadOptions {
            checksum: cfg.rdbchecksum,
            list_fill: cfg.list_max_listpack_size,
            list_compress: cfg.list_compress_depth,
            hash_limits: (
                cfg.hash_max_listpack_entries.max(0) as usize,
                cfg.hash_max_listpack_value.max(0) as usize,
            ),
            zset_limits: (
                cfg.zset_max_listpack_entries.max(0) as usize,
                cfg.zset_max_listpack_value.max(0) as usize,
            ),
            intset_max: cfg.set_max_intset_entries.max(0) as usize,
            lfu: cfg.maxmemory_policy.is_lfu(),
            key_load_delay: cfg.key_load_delay,
            step_bytes: cfg.loading_process_events_interval_bytes.max(1) as usize,
            keep_expired: false,
            allow_dup: false,
            collect_expired: false,
            skip_payload_checksum: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encoding::*;
    use super::{load, save, Config, LoadOptions, SaveOptions};

    #[test]
    fn decodes_listpack_entries() {
        // Built by hand: 7-bit uint 5, 6-bit str "ab", 13-bit int -2, end.
        let mut lp = vec![0, 0, 0, 0, 3, 0];
        lp.extend_from_slice(&[0x05, 1]);
        lp.extend_from_slice(&[0x82, b'a', b'b', 3]);
        let v: u16 = (-2i16 as u16) & 0x1fff;
        lp.extend_from_slice(&[0xC0 | (v >> 8) as u8, v as u8, 2]);
        lp.push(0xFF);
        let total = lp.len() as u32;
        lp[0..4].copy_from_slice(&total.to_le_bytes());
        let items = listpack_items(&lp).unwrap();
        assert_eq!(items, vec![&b"5"[..], b"ab", b"-2"]);
    }

    #[test]
    fn decodes_ziplists_and_zipmaps() {
        // Entries: "ab" (6-bit string), 7 (4-bit immediate), -300 (int16), end.
        let mut zl = vec![0; 10];
        zl.extend_from_slice(&[0x00, 0x02, b'a', b'b']);
        zl.extend_from_slice(&[0x04, 0xF8]);
        zl.extend_from_slice(&[0x02, 0xC0]);
        zl.extend_from_slice(&(-300i16).to_le_bytes());
        zl.push(0xFF);
        let total = zl.len() as u32;
        zl[0..4].copy_from_slice(&total.to_le_bytes());
        zl[4..8].copy_from_slice(&16u32.to_le_bytes());
        zl[8..10].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(
            ziplist_items(&zl).unwrap(),
            vec![b"ab".to_vec(), b"7".to_vec(), b"-300".to_vec()]
        );
        assert!(ziplist_items(&zl[..zl.len() - 1]).is_err());
        // Redis's deep checks: a count of u16::MAX means "count them".
        let mut unknown = zl.clone();
        unknown[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(ziplist_items(&unknown).unwrap().len(), 3);
        for (at, byte, what) in [
            (8, 2, "entry count"),
            (4, 14, "tail offset"),
            (14, 2, "previous length"),
        ] {
            let mut bad = zl.clone();
            bad[at] = byte;
            let err = ziplist_items(&bad).unwrap_err();
            assert!(err.contains(what), "{err}");
        }
        // zipmap: {"f": "vv"} with one free byte.
        let zm = [1, 1, b'f', 2, 1, b'v', b'v', 0, 0xFF];
        assert_eq!(
            zipmap_items(&zm).unwrap(),
            vec![b"f".to_vec(), b"vv".to_vec()]
        );
        assert!(zipmap_items(&zm[..5]).is_err());
        // A header count of 254 means "count them"; any other must match.
        let mut unknown = zm;
        unknown[0] = 254;
        assert_eq!(zipmap_items(&unknown).unwrap().len(), 2);
        let mut wrong = zm;
        wrong[0] = 2;
        assert!(zipmap_items(&wrong).is_err());
        // The last byte must be the end marker, even after an early one.
        let mut trailing = zm.to_vec();
        trailing.push(0);
        assert!(zipmap_items(&trailing).is_err());
        // A length under 254 in the five-byte form is refused (Redis
        // 7.0.15's fix for CVE-2026-25243), for a field and for a value.
        let long_field = [1, 254, 1, 0, 0, 0, b'f', 2, 1, b'v', b'v', 0, 0xFF];
        assert!(zipmap_items(&long_field).is_err());
        let long_value = [1, 1, b'f', 254, 2, 0, 0, 0, 0, b'v', b'v', 0xFF];
        assert!(zipmap_items(&long_value).is_err());
        // The five-byte form of a length of 254 or more is the right one.
        let mut big = vec![1, 1, b'f', 254];
        big.extend_from_slice(&300u32.to_le_bytes());
        big.push(0);
        big.extend(std::iter::repeat_n(b'x', 300));
        big.push(0xFF);
        let items = zipmap_items(&big).unwrap();
        assert_eq!(items[1].len(), 300);
    }

    /// A dump holding a stream with several nodes, deleted entries and
    /// groups with pending entries, without checksum or compression.
    fn stream_dump() -> Vec<u8> {
        use crate::db::stream::{Consumer, Group, Nack, NodeLimits, StreamId};
        use crate::db::{Db, Entry, NewValue, Stream, Value};
        let mut s = Stream::new();
        let limits = NodeLimits {
            max_bytes: 4096,
            max_entries: 5,
        };
        for i in 1..=14u64 {
            let v = i.to_string();
            let fields: Vec<(&[u8], &[u8])> = if i % 4 == 0 {
                vec![(b"other", v.as_bytes())]
            } else {
                vec![(b"f", v.as_bytes()), (b"name", b"item")]
            };
            s.append(StreamId::new(i, 0), &fields, limits);
        }
        s.delete(StreamId::new(2, 0));
        s.delete(StreamId::new(9, 0));
        let mut g = Group {
            last_id: StreamId::new(6, 0),
            entries_read: 5,
            ..Group::default()
        };
        for (i, who) in [(3u64, &b"alice"[..]), (5, b"bob"), (6, b"alice")] {
            let id = StreamId::new(i, 0);
            g.pel.insert(
                id,
                Nack {
                    delivery_time: 1_700_000_000_000,
                    delivery_count: i,
                    consumer: who.to_vec(),
                },
            );
            g.consumers.entry(who.to_vec()).or_default().pel.insert(id);
        }
        g.consumers.insert(b"carol".to_vec(), Consumer::default());
        s.groups.insert(b"g".to_vec(), g);
        let mut db = Db::new(0, 1);
        db.main.insert(Entry::new(
            b"s",
            NewValue::Boxed(Box::new(Value::Stream(Box::new(s)))),
            false,
        ));
        let opts = SaveOptions {
            compress: false,
            checksum: false,
            ..SaveOptions::from_config(&Config::default(), 0)
        };
        let mut out = Vec::new();
        save::write_rdb(std::slice::from_ref(&db), &opts, &mut out).unwrap();
        out
    }

    #[test]
    fn damaged_streams_in_a_dump_are_refused_never_panic() {
        let dump = stream_dump();
        let opts = LoadOptions::from_config(&Config::default());
        let load = |bytes: &[u8]| {
            let mut dbs = vec![crate::db::Db::new(0, 1)];
            load::load_bytes(&mut dbs, &opts, bytes)
        };
        let stats = load(&dump).expect("the intact dump loads");
        assert_eq!(stats.keys, 1);
        // Every byte changed in several ways, and every truncation: loaded
        // or refused, never a panic or an out-of-bounds read.
        let mut refused = 0;
        for pos in 0..dump.len() {
            for mask in [0x01u8, 0x10, 0x80, 0xff] {
                let mut bad = dump.clone();
                bad[pos] ^= mask;
                refused += load(&bad).is_err() as usize;
            }
            refused += load(&dump[..pos]).is_err() as usize;
        }
        // Most damage is caught (the rest changes a value, not the shape).
        assert!(
            refused > dump.len() * 3,
            "{refused} of {} refused",
            dump.len() * 5
        );
    }

    #[test]
    fn decodes_intsets() {
        let mut is = vec![2, 0, 0, 0, 2, 0, 0, 0];
        is.extend_from_slice(&(-3i16).to_le_bytes());
        is.extend_from_slice(&7i16.to_le_bytes());
        assert_eq!(intset_ints(&is).unwrap(), vec![-3, 7]);
        assert!(intset_ints(&is[..9]).is_err());
    }
}
