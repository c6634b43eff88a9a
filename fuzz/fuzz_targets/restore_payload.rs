//! Fuzz RESTORE's payload reader with the checksum skipped (as Redis's
//! corrupt-dump fuzzer does with DEBUG SET-SKIP-CHECKSUM-VALIDATION): any
//! bytes are restored or refused, never a panic; a value restored reads
//! whole (its digest walks every element) and DUMPs to a payload that
//! restores, checksum checked, to a value with the same digest. The first
//! byte's low bit picks the encoding limits: Redis's defaults, or limits
//! of one element (list nodes of one entry, compressed) so that loading
//! converts every compact encoding.
#![no_main]

use kvstore::commands::digest::entry_digest;
use kvstore::config::Config;
use kvstore::db::{Entry, NewValue};
use kvstore::persistence::rdb::{dump_payload, parse_dump_payload, LoadOptions, Restored};
use libfuzzer_sys::fuzz_target;

fn entry(restored: Restored) -> Entry {
    match restored {
        Restored::Str(s) => Entry::string(b"k", &s),
        Restored::Value(v) => Entry::new(b"k", NewValue::Boxed(Box::new(v)), false),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&limits, data)) = data.split_first() else {
        return;
    };
    let mut config = Config::default();
    if limits & 1 == 1 {
        config.list_max_listpack_size = 1;
        config.list_compress_depth = 1;
        config.hash_max_listpack_entries = 1;
        config.hash_max_listpack_value = 1;
        config.zset_max_listpack_entries = 1;
        config.zset_max_listpack_value = 1;
        config.set_max_intset_entries = 1;
    }
    let mut opts = LoadOptions::from_config(&config);
    opts.skip_payload_checksum = true;
    let Ok(restored) = parse_dump_payload(data, &opts) else {
        return;
    };
    let first = entry(restored);
    let digest = entry_digest(&first, false);
    opts.skip_payload_checksum = false;
    for compress in [false, true] {
        let payload = dump_payload(&first, compress);
        let again = parse_dump_payload(&payload, &opts)
            .unwrap_or_else(|e| panic!("a restored value's own DUMP is refused: {e}"));
        assert_eq!(
            entry_digest(&entry(again), false),
            digest,
            "DUMP/RESTORE changed the value"
        );
    }
});
