//! Grow a keyspace table to N keys and report the slowest single insert:
//! incremental rehashing should keep it far below a millisecond-scale stall.
//!
//! `cargo run --release --example table_growth -- 10000000`

use std::time::{Duration, Instant};

use kvstore::db::{Entry, NewValue, Table};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let mut t = Table::new(42);
    let mut worst = Duration::ZERO;
    let mut worst_at = 0;
    let mut over_1ms = 0;
    let start = Instant::now();
    for i in 0..n {
        let key = format!("key:{i:012}");
        let t0 = Instant::now();
        t.insert(Entry::new(
            key.as_bytes(),
            NewValue::Str(b"0123456789abcdef"),
            false,
        ));
        let dt = t0.elapsed();
        if dt > Duration::from_millis(1) {
            over_1ms += 1;
        }
        if dt > worst {
            worst = dt;
            worst_at = i;
        }
    }
    println!(
        "{n} inserts in {:.2?}; slowest single insert {:.3?} at key #{worst_at}, {over_1ms} inserts over 1 ms; {} buckets at the end",
        start.elapsed(),
        worst,
        t.buckets()
    );
}
