//! Fuzz the request parser: arbitrary bytes, fed in arbitrary splits, must
//! never panic, and must parse the same way whatever the split.
#![no_main]

use kvstore::protocol::{ParseLimits, QueryBuffer};
use libfuzzer_sys::fuzz_target;

fn parse(data: &[u8], split: usize) -> Result<Vec<Vec<Vec<u8>>>, kvstore::protocol::ProtocolError> {
    let limits = ParseLimits {
        max_bulk_len: 1 << 20,
        authenticated: true,
    };
    let mut q = QueryBuffer::new();
    let mut out = Vec::new();
    for chunk in data.chunks(split.max(1)) {
        q.feed(chunk);
        while q.parse(limits)? {
            let mut argv = Vec::new();
            q.argv(&mut argv);
            out.push(argv.iter().map(|a| a.to_vec()).collect());
            q.consume();
        }
        q.compact();
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let split = data[0] as usize % 17 + 1;
    let whole = parse(&data[1..], data.len());
    let pieces = parse(&data[1..], split);
    // Errors may be detected at different points, but successful parses of
    // the same bytes must agree.
    if let (Ok(a), Ok(b)) = (&whole, &pieces) {
        assert_eq!(a, b);
    }
});
