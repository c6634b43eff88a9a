//! Fuzz the AOF readers: arbitrary bytes as a manifest and as a command
//! log must be parsed or refused with an error, never panic or loop.
#![no_main]

use kvstore::persistence::aof::{CommandReader, Manifest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Manifest::parse(data);
    let mut reader = CommandReader::new(data, 0);
    let mut argv = Vec::new();
    let mut last = 0;
    while let Some(Ok(())) = reader.next_command(&mut argv) {
        assert!(reader.offset() > last, "the reader must make progress");
        last = reader.offset();
    }
});
