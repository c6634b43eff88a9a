//! Fuzz the RDB loader: arbitrary bytes must be loaded or refused with an
//! error, never panic. Seed the corpus with real dumps for depth.
#![no_main]

use kvstore::config::Config;
use kvstore::state::Server;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut srv = Server::new(Config::default());
    let _ = kvstore::persistence::rdb::load_bytes(
        &mut srv.dbs,
        &kvstore::persistence::rdb::LoadOptions::from_config(&Config::default()),
        data,
    );
});
