//! MEMORY USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE and HELP (Redis's
//! object.c), and the breakdown of used memory they share with INFO memory.
//!
//! Sizes come from jemalloc (what is really allocated) and from the values
//! themselves (`heap_size`): kvstore's encodings are smaller than Redis's,
//! so MEMORY USAGE answers less than Redis for the same key, as it should.

use super::*;
use crate::memory;

/// Where used memory goes, as Redis's getMemoryOverheadData splits it.
pub struct MemoryOverhead {
    pub peak_allocated: usize,
    pub total_allocated: usize,
    pub startup_allocated: usize,
    pub repl_backlog: usize,
    pub clients_slaves: usize,
    pub clients_normal: usize,
    pub aof_buffer: usize,
    pub lua_caches: usize,
    pub functions_caches: usize,
    /// Per non-empty database: (index, main table, expires table) bytes.
    pub dbs: Vec<(usize, usize, usize)>,
    pub overhead_total: usize,
    pub total_keys: usize,
    pub bytes_per_key: usize,
    pub dataset: usize,
    pub dataset_perc: f64,
    pub peak_perc: f64,
    pub allocator: memory::AllocatorStats,
    pub rss: usize,
}

impl MemoryOverhead {
    pub fn allocator_frag(&self) -> f64 {
        ratio(self.allocator.active, self.allocator.allocated)
    }
    pub fn allocator_frag_bytes(&self) -> i64 {
        self.allocator.active as i64 - self.allocator.allocated as i64
    }
    pub fn allocator_rss(&self) -> f64 {
        ratio(self.allocator.resident, self.allocator.active)
    }
    pub fn allocator_rss_bytes(&self) -> i64 {
        self.allocator.resident as i64 - self.allocator.active as i64
    }
    pub fn rss_extra(&self) -> f64 {
        ratio(self.rss, self.allocator.resident)
    }
    pub fn rss_extra_bytes(&self) -> i64 {
        self.rss as i64 - self.allocator.resident as i64
    }
    /// RSS over used memory: fragmentation and every other overhead.
    pub fn total_frag(&self) -> f64 {
        ratio(self.rss, self.total_allocated)
    }
    pub fn total_frag_bytes(&self) -> i64 {
        self.rss as i64 - self.total_allocated as i64
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Measure where memory goes now (and raise the recorded peak). `caller`
/// is the client running the command: out of the client table while it
/// runs, it counts all the same.
pub fn memory_overhead(srv: &mut Server, caller: Option<&ClientState>) -> MemoryOverhead {
    let allocator = memory::allocator_stats();
    // What maxmemory weighs (Redis's zmalloc_used_memory), not jemalloc's
    // global figure, which also counts what thread caches hold.
    let total = srv.used_memory();
    srv.peak_memory = srv.peak_memory.max(total);
    let startup = srv.startup_memory.min(total);
    // The backlog and the replicas share one buffer: what it holds past
    // `repl-backlog-size` counts as the replicas' (as Redis).
    let buffers = srv.replication_buffers_memory();
    let size = srv.config.repl_backlog_size as usize;
    let (repl_backlog, mut clients_slaves) = if !srv.repl.replicas.is_empty() && buffers > size {
        (size, buffers - size)
    } else {
        (buffers, 0)
    };
    let mut clients_normal = 0;
    for c in srv.clients.iter().flatten().map(|c| &**c).chain(caller) {
        match c.kind {
            crate::state::ClientKind::Replica => {
                clients_slaves += c.memory_held() - c.stream_behind()
            }
            _ => clients_normal += c.memory_held(),
        }
    }
    let aof_buffer = srv.aof.buf.capacity();
    let lua_caches = srv.scripts.scripts_memory();
    let functions_caches = srv.functions.caches_memory();
    let mut dbs = Vec::new();
    let mut total_keys = 0;
    let mut overhead_total = startup
        + repl_backlog
        + clients_slaves
        + clients_normal
        + aof_buffer
        + lua_caches
        + functions_caches;
    for d in &srv.dbs {
        if d.main.is_empty() {
            continue;
        }
        let (main, expires) = (d.main.overhead_bytes(), d.expires.overhead_bytes());
        overhead_total += main + expires;
        total_keys += d.main.len();
        dbs.push((d.id, main, expires));
    }
    let net = total.saturating_sub(startup);
    let dataset = total.saturating_sub(overhead_total);
    MemoryOverhead {
        peak_allocated: srv.peak_memory,
        total_allocated: total,
        startup_allocated: startup,
        repl_backlog,
        clients_slaves,
        clients_normal,
        aof_buffer,
        lua_caches,
        functions_caches,
        dbs,
        overhead_total,
        total_keys,
        bytes_per_key: net.checked_div(total_keys).unwrap_or(0),
        dataset,
        dataset_perc: ratio(dataset, net) * 100.0,
        peak_perc: ratio(total, srv.peak_memory) * 100.0,
        allocator,
        rss: memory::rss_bytes(),
    }
}

/// `MEMORY <subcommand>`.
pub fn memory_cmd(c: &mut Ctx, argv: &[&[u8]]) {
    match subcommand(c) {
        "usage" => memory_usage(c, argv),
        "stats" => memory_stats(c),
        "doctor" => {
            let report = memory_doctor(c.srv, c.cl);
            c.cl.reply.verbatim(report.as_bytes());
        }
        "malloc-stats" => c.cl.reply.verbatim(memory::malloc_stats_text().as_bytes()),
        "purge" => {
            if memory::purge() {
                c.cl.reply.ok();
            } else {
                c.cl.reply.error("ERR Error purging dirty pages");
            }
        }
        _ => reply_help(
            c,
            &[
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
                "HELP",
                "    Prints this help.",
            ],
        ),
    }
}

/// Elements MEMORY USAGE samples in a big collection by default.
const USAGE_DEFAULT_SAMPLES: usize = 5;

/// `MEMORY USAGE key [SAMPLES count]` — bytes the key and its value use
/// (its entry, any boxed value, its table slot and TTL entry); nil when
/// the key doesn't exist. The key is not touched (no expiry, no hit).
fn memory_usage(c: &mut Ctx, argv: &[&[u8]]) {
    let mut samples = USAGE_DEFAULT_SAMPLES;
    let mut j = 3;
    while j < argv.len() {
        if eq_ic(argv[j], "samples") && j + 1 < argv.len() {
            samples = match arg_i64(argv[j + 1]) {
                Ok(n) if n < 0 => return c.cl.reply.error(ERR_SYNTAX),
                Ok(0) => usize::MAX,
                Ok(n) => n as usize,
                Err(e) => return c.cl.reply.error(e),
            };
            j += 2;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    let d = &c.srv.dbs[c.cl.db];
    let Some(e) = d.main.get(argv[2]) else {
        return c.cl.reply.null();
    };
    let slot = std::mem::size_of::<usize>();
    let mut usage = e.heap_size_sampled(samples) + slot;
    if let Some(ttl) = d.expires.get(argv[2]) {
        usage += ttl.heap_size() + slot;
    }
    c.cl.reply.int(usage as i64)
}

/// `MEMORY STATS` — a map of Redis's memory figures.
fn memory_stats(c: &mut Ctx) {
    let mh = memory_overhead(c.srv, Some(c.cl));
    let r = &mut c.cl.reply;
    r.map(27 + mh.dbs.len());
    let int = |r: &mut crate::protocol::Reply, name: &str, v: i64| {
        r.bulk(name.as_bytes());
        r.int(v);
    };
    int(r, "peak.allocated", mh.peak_allocated as i64);
    int(r, "total.allocated", mh.total_allocated as i64);
    int(r, "startup.allocated", mh.startup_allocated as i64);
    int(r, "replication.backlog", mh.repl_backlog as i64);
    int(r, "clients.slaves", mh.clients_slaves as i64);
    int(r, "clients.normal", mh.clients_normal as i64);
    int(r, "cluster.links", 0);
    int(r, "aof.buffer", mh.aof_buffer as i64);
    int(r, "lua.caches", mh.lua_caches as i64);
    int(r, "functions.caches", mh.functions_caches as i64);
    for &(id, main, expires) in &mh.dbs {
        r.bulk(format!("db.{id}").as_bytes());
        r.map(3);
        int(r, "overhead.hashtable.main", main as i64);
        int(r, "overhead.hashtable.expires", expires as i64);
        int(r, "overhead.hashtable.slot-to-keys", 0);
    }
    int(r, "overhead.total", mh.overhead_total as i64);
    int(r, "keys.count", mh.total_keys as i64);
    int(r, "keys.bytes-per-key", mh.bytes_per_key as i64);
    int(r, "dataset.bytes", mh.dataset as i64);
    let double = |r: &mut crate::protocol::Reply, name: &str, v: f64| {
        r.bulk(name.as_bytes());
        r.double(v);
    };
    double(r, "dataset.percentage", mh.dataset_perc);
    double(r, "peak.percentage", mh.peak_perc);
    int(r, "allocator.allocated", mh.allocator.allocated as i64);
    int(r, "allocator.active", mh.allocator.active as i64);
    int(r, "allocator.resident", mh.allocator.resident as i64);
    double(r, "allocator-fragmentation.ratio", mh.allocator_frag());
    int(
        r,
        "allocator-fragmentation.bytes",
        mh.allocator_frag_bytes(),
    );
    double(r, "allocator-rss.ratio", mh.allocator_rss());
    int(r, "allocator-rss.bytes", mh.allocator_rss_bytes());
    double(r, "rss-overhead.ratio", mh.rss_extra());
    int(r, "rss-overhead.bytes", mh.rss_extra_bytes());
    double(r, "fragmentation", mh.total_frag());
    int(r, "fragmentation.bytes", mh.total_frag_bytes());
}

/// Below this much allocated memory the doctor declines to judge.
const DOCTOR_EMPTY_BYTES: usize = 5 << 20;
/// Ratios and sizes past which the doctor reports a problem (Redis's).
const DOCTOR_RATIO: f64 = 1.1;
const DOCTOR_TOTAL_FRAG_RATIO: f64 = 1.4;
const DOCTOR_FRAG_BYTES: i64 = 10 << 20;
const DOCTOR_CLIENT_BYTES: usize = 200 << 10;
const DOCTOR_REPLICA_BYTES: usize = 10 << 20;
const DOCTOR_MANY_SCRIPTS: usize = 1000;

/// MEMORY DOCTOR's report, Redis's getMemoryDoctorReport word for word.
fn memory_doctor(srv: &mut Server, caller: &ClientState) -> String {
    let mh = memory_overhead(srv, Some(caller));
    let mut found: Vec<&str> = Vec::new();
    if mh.total_allocated < DOCTOR_EMPTY_BYTES {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".into();
    }
    if mh.peak_allocated as f64 / mh.total_allocated as f64 > 1.5 {
        found.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if mh.total_frag() > DOCTOR_TOTAL_FRAG_RATIO && mh.total_frag_bytes() > DOCTOR_FRAG_BYTES {
        found.push(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"jemalloc-5.3.0\".\n\n");
    }
    if mh.allocator_frag() > DOCTOR_RATIO && mh.allocator_frag_bytes() > DOCTOR_FRAG_BYTES {
        found.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
    }
    if mh.allocator_rss() > DOCTOR_RATIO && mh.allocator_rss_bytes() > DOCTOR_FRAG_BYTES {
        found.push(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n");
    }
    if mh.rss_extra() > DOCTOR_RATIO && mh.rss_extra_bytes() > DOCTOR_FRAG_BYTES {
        found.push(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n");
    }
    let replicas = srv
        .clients
        .iter()
        .flatten()
        .filter(|c| c.kind == crate::state::ClientKind::Replica)
        .count();
    let normal = srv.clients.iter().flatten().count() + 1 - replicas;
    if replicas > 0 && mh.clients_slaves > DOCTOR_REPLICA_BYTES {
        found.push(" * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each replica (on average). This likely means that there is some replica instance that is struggling receiving data, either because it is too slow or because of networking issues. As a result, data piles on the master output buffers. Please try to identify what replica is not receiving data correctly and why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to check the output buffers of each replica.\n\n");
    }
    if normal > 0 && mh.clients_normal / normal > DOCTOR_CLIENT_BYTES {
        found.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
    }
    if srv.scripts.len() > DOCTOR_MANY_SCRIPTS {
        found.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
    }
    if found.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n");
    for f in found {
        s.push_str(f);
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}
