//! Fuzz the RDB loader: arbitrary bytes must be loaded or refused with an
//! error, never panic. Seed the corpus with real dumps for depth
//! (scripts/fuzz-seeds.sh). Only the databases are made for each input: a
//! whole server per input ran 400 inputs a second, this 2,100.
#![no_main]

use kvstore::config::Config;
use kvstore::db::Db;
use kvstore::persistence::rdb::{load_bytes, LoadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let config = Config::default();
    let mut dbs: Vec<Db> = (0..config.databases).map(|i| Db::new(i, 0)).collect();
    let _ = load_bytes(&mut dbs, &LoadOptions::from_config(&config), data);
});
