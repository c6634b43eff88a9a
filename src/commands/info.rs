//! INFO: the report, section by section, with Redis's field names.

use std::fmt::Write as _;

use super::*;
use crate::memory;
use crate::{KVSTORE_VERSION, REDIS_VERSION};

// ---- INFO ----

fn info_section_server(srv: &crate::state::Server, out: &mut String) {
    let uptime = srv.start.elapsed().as_secs();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let uname = uname();
    let _ = write!(
        out,
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nkvstore_version:{KVSTORE_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{uname}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:{}\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{now_us}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\n",
        srv.io_engine.name(),
        std::process::id(),
        crate::process::supervised_name(),
        srv.run_id,
        srv.config.port,
        uptime / 86400,
        srv.hz,
        srv.config.hz,
        lru_clock(srv.now_ms),
        srv.executable,
        srv.config.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
    );
    // While a shutdown waits for lagging replicas (Redis's
    // isShutdownInitiated).
    if let Some(wait) = srv.shutdown_wait {
        let left = wait
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let _ = write!(out, "shutdown_in_milliseconds:{}\r\n", left.as_millis());
    }
}

fn uname() -> String {
    // SAFETY: uname fills a zeroed struct.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let f = |s: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(s.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

fn info_section_clients(srv: &crate::state::Server, out: &mut String) {
    let _ = write!(
        out,
        "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:{}\r\nclient_recent_max_output_buffer:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:{}\r\n",
        // Replicas are not counted, as Redis's listLength(server.clients) -
        // listLength(server.slaves).
        srv.connected_clients.saturating_sub(srv.repl.replicas.len()),
        srv.config.maxclients,
        srv.recent_max_input,
        srv.recent_max_output,
        srv.blocked_clients,
        srv.tracking.clients,
        srv.block_deadlines.len(),
    );
}

fn info_section_memory(
    srv: &mut crate::state::Server,
    caller: Option<&crate::state::ClientState>,
    out: &mut String,
) {
    let mh = super::memory::memory_overhead(srv, caller);
    let used = mh.total_allocated;
    let stats = mh.allocator;
    let rss = mh.rss;
    let peak = mh.peak_allocated;
    let overhead = mh.overhead_total;
    let dataset = mh.dataset;
    let total = memory::total_system_memory();
    let h = memory::bytes_to_human;
    let lua = srv.scripts.memory();
    let scripts = srv.scripts.scripts_memory();
    let cached = srv.scripts.len();
    // The functions' interpreter and libraries (Redis's functionsMemory and
    // functions_caches) beside the eval scripts'.
    let functions_vm = srv.functions.memory();
    let vm_total = lua + functions_vm;
    let all_scripts = scripts + mh.functions_caches;
    let replication_buffers = srv.replication_buffers_memory();
    let _ = write!(
        out,
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\nused_memory_startup:{}\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{}\r\nallocator_active:{}\r\nallocator_resident:{}\r\ntotal_system_memory:{total}\r\ntotal_system_memory_human:{}\r\nused_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{scripts}\r\nnumber_of_cached_scripts:{cached}\r\nnumber_of_functions:{}\r\nnumber_of_libraries:{}\r\nused_memory_vm_functions:{functions_vm}\r\nused_memory_vm_total:{vm_total}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:{}\r\nused_memory_scripts:{all_scripts}\r\nused_memory_scripts_human:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:{}\r\nmem_replication_backlog:{}\r\nmem_total_replication_buffers:{replication_buffers}\r\nmem_clients_slaves:{}\r\nmem_clients_normal:{}\r\nmem_cluster_links:0\r\nmem_aof_buffer:{}\r\nmem_allocator:jemalloc-5.3.0\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
        h(used),
        h(rss),
        h(peak),
        mh.peak_perc,
        mh.startup_allocated,
        mh.dataset_perc,
        stats.allocated,
        stats.active,
        stats.resident,
        h(total),
        h(lua),
        srv.functions.function_count(),
        srv.functions.library_count(),
        h(vm_total),
        mh.functions_caches,
        h(all_scripts),
        srv.config.maxmemory,
        h(srv.config.maxmemory as usize),
        srv.config.maxmemory_policy,
        mh.allocator_frag(),
        mh.allocator_frag_bytes(),
        mh.allocator_rss(),
        mh.allocator_rss_bytes(),
        mh.rss_extra(),
        mh.rss_extra_bytes(),
        mh.total_frag(),
        mh.total_frag_bytes(),
        srv.memory_not_counted_for_evict(),
        mh.repl_backlog,
        mh.clients_slaves,
        mh.clients_normal,
        mh.aof_buffer,
        crate::db::lazyfree::pending_objects(),
        crate::db::lazyfree::freed_objects(),
    );
}

/// The loading_* fields INFO shows while a dump loads.
fn loading_fields(srv: &crate::state::Server) -> String {
    let Some(l) = &srv.loading else {
        return String::new();
    };
    let total = l.total_bytes.max(1);
    let done = l.loaded_bytes();
    let elapsed = l.started.elapsed().as_secs_f64();
    let perc = done as f64 * 100.0 / total as f64;
    let eta = if done > 0 {
        (elapsed * (total - done) as f64 / done as f64) as u64
    } else {
        1
    };
    let start = crate::util::unix_time_ms() / 1000 - elapsed as i64;
    // What the dump's writer said it used (its `used-mem` aux field).
    let used_mem = match &l.phase {
        crate::state::snapshot::LoadPhase::Rdb(st) => st.stats.used_mem,
        _ => 0,
    };
    format!("loading_start_time:{start}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:{used_mem}\r\nloading_loaded_bytes:{done}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n")
}

fn info_section_persistence(srv: &crate::state::Server, out: &mut String) {
    use crate::state::aof::AofStatus;
    let aof = &srv.aof;
    let child = srv.snapshot.child_stats;
    let _ = write!(
        out,
        "# Persistence\r\nloading:{}\r\nasync_loading:{}\r\ncurrent_cow_peak:{}\r\ncurrent_cow_size:{}\r\ncurrent_cow_size_age:{}\r\ncurrent_fork_perc:{:.2}\r\ncurrent_save_keys_processed:{}\r\ncurrent_save_keys_total:{}\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_cow_size:{}\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{}\r\naof_last_cow_size:{}\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
        (srv.loading.is_some() && !srv.async_loading()) as u8,
        srv.async_loading() as u8,
        child.cow_peak,
        child.cow,
        if child.cow_updated_ms != 0 {
            (crate::util::unix_time_ms() - child.cow_updated_ms).max(0) / 1000
        } else {
            0
        },
        if child.keys_total != 0 {
            child.keys_processed as f64 * 100.0 / child.keys_total as f64
        } else {
            0.0
        },
        child.keys_processed,
        child.keys_total,
        srv.dirty,
        srv.snapshot.child.is_some() as u8,
        srv.lastsave_unix,
        if srv.snapshot.last_bgsave_ok { "ok" } else { "err" },
        srv.snapshot.last_bgsave_secs,
        srv.snapshot.child.map_or(-1, |(_, t)| t.elapsed().as_secs() as i64),
        srv.snapshot.saves,
        srv.snapshot.rdb_last_cow,
        srv.rdb_last_load_expired,
        srv.rdb_last_load_keys,
        (aof.status != AofStatus::Off) as u8,
        aof.rewrite.is_some() as u8,
        aof.rewrite_scheduled as u8,
        aof.last_rewrite_secs,
        aof.rewrite
            .as_ref()
            .map_or(-1, |r| r.started.elapsed().as_secs() as i64),
        if aof.last_bgrewrite_ok { "ok" } else { "err" },
        aof.rewrites,
        aof.rewrites_consecutive_failures,
        if aof.last_write_ok && aof.fsync_error() == 0 {
            "ok"
        } else {
            "err"
        },
        srv.snapshot.aof_last_cow,
    );
    // As Redis: these follow the configuration, not the AOF's state.
    if srv.config.appendonly {
        let _ = write!(
            out,
            "aof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:{}\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:{}\r\naof_delayed_fsync:{}\r\naof_engine:{}\r\n",
            aof.current_size,
            aof.base_size,
            aof.rewrite_scheduled as u8,
            aof.buf.len(),
            aof.pending_fsyncs(),
            aof.delayed_fsync,
            if aof.uring.is_some() { "io_uring" } else { "write" },
        );
    }
    out.push_str(&loading_fields(srv));
}

fn info_section_stats(srv: &crate::state::Server, out: &mut String) {
    let s = &srv.stats;
    let current_exceeded = s
        .eviction_exceeded_since
        .map_or(0, |t| t.elapsed().as_micros() as u64);
    let _ = write!(
        out,
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:{}\r\ntotal_net_repl_output_bytes:{}\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:{:.2}\r\ninstantaneous_output_repl_kbps:{:.2}\r\nrejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\nexpired_keys:{}\r\nexpired_stale_perc:{:.2}\r\nexpired_time_cap_reached_count:{}\r\nexpire_cycle_cpu_milliseconds:{}\r\nevicted_keys:{}\r\nevicted_clients:{}\r\ntotal_eviction_exceeded_time:{}\r\ncurrent_eviction_exceeded_time:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nlatest_fork_usec:{}\r\ntotal_forks:{}\r\nmigrate_cached_sockets:{}\r\nslave_expires_tracked_keys:{}\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:{}\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:{}\r\nreply_buffer_expands:{}\r\nacl_access_denied_auth:{}\r\nacl_access_denied_cmd:{}\r\nacl_access_denied_key:{}\r\nacl_access_denied_channel:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n",
        s.total_connections_received,
        s.total_commands_processed,
        s.inst_ops.rate().round() as u64,
        s.total_net_input_bytes,
        s.total_net_output_bytes,
        s.net_repl_input_bytes,
        s.net_repl_output_bytes,
        s.inst_input.rate() / 1024.0,
        s.inst_output.rate() / 1024.0,
        s.inst_repl_input.rate() / 1024.0,
        s.inst_repl_output.rate() / 1024.0,
        s.rejected_connections,
        s.sync_full,
        s.sync_partial_ok,
        s.sync_partial_err,
        s.expired_keys,
        s.expired_stale_perc * 100.0,
        s.expired_time_cap_reached_count,
        s.expire_cycle_cpu_ms,
        s.evicted_keys,
        s.evicted_clients,
        (s.eviction_exceeded_us + current_exceeded) / 1000,
        current_exceeded / 1000,
        s.keyspace_hits,
        s.keyspace_misses,
        srv.pubsub.channels.len(),
        srv.pubsub.pattern_count(),
        srv.pubsub.shard_channels.len(),
        srv.snapshot.latest_fork_usec,
        srv.snapshot.forks,
        srv.migrate_sockets.len(),
        srv.replica_keys_with_expire.len(),
        srv.tracking.total_keys(),
        srv.tracking.total_items(),
        srv.tracking.total_prefixes(),
        srv.unexpected_error_replies,
        s.total_error_replies,
        s.total_reads_processed,
        s.total_writes_processed,
        s.reply_buffer_shrinks,
        s.reply_buffer_expands,
        s.acl_access_denied_auth,
        s.acl_access_denied_cmd,
        s.acl_access_denied_key,
        s.acl_access_denied_channel,
        s.client_output_buffer_limit_disconnections,
    );
}

fn info_section_replication(srv: &crate::state::Server, out: &mut String) {
    use crate::state::master::LinkState;
    use crate::state::replication::ReplicaPhase;
    let r = &srv.repl;
    let m = &srv.master;
    match &m.target {
        None => out.push_str("# Replication\r\nrole:master\r\n"),
        Some((host, port)) => {
            let connected = m.state == LinkState::Connected;
            let last_io = match m.client_id.and_then(|id| srv.client_by_id(id)) {
                Some(c) => c.last_interaction.elapsed().as_secs() as i64,
                None => -1,
            };
            // Redis shows 1 before the first synchronisation.
            let offset = if r.backlog.is_some() { r.offset } else { 1 };
            // Received runs ahead of applied while commands wait (CLIENT
            // PAUSE on this replica, a transaction not yet whole).
            let read_offset = offset
                + m.client_id
                    .and_then(|id| srv.client_by_id(id))
                    .map_or(0, |c| c.unapplied_master_bytes() as i64);
            let _ = write!(
                out,
                "# Replication\r\nrole:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{read_offset}\r\nslave_repl_offset:{offset}\r\n",
                if connected { "up" } else { "down" },
                u8::from(matches!(m.state, LinkState::Transfer | LinkState::Loading)),
            );
            if let (LinkState::Transfer, Some(t)) = (m.state, m.transfer.as_ref()) {
                let total = t.size.map_or(-1, |s| s as i64);
                let read = t.received as i64;
                let perc = if total > 0 {
                    read as f64 * 100.0 / total as f64
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "master_sync_total_bytes:{total}\r\nmaster_sync_read_bytes:{read}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\nmaster_sync_last_io_seconds_ago:{}\r\n",
                    total - read,
                    m.last_io.elapsed().as_secs()
                );
            }
            if !connected {
                let down = m.down_since.map_or(-1, |d| d.elapsed().as_secs() as i64);
                let _ = write!(out, "master_link_down_since_seconds:{down}\r\n");
            }
            let _ = write!(
                out,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
                srv.config.replica_priority,
                u8::from(srv.config.replica_read_only),
                u8::from(srv.config.replica_announced)
            );
        }
    }
    let _ = write!(out, "connected_slaves:{}\r\n", r.replicas.len());
    if srv.config.min_replicas_to_write > 0 && srv.config.min_replicas_max_lag > 0 {
        let _ = write!(out, "min_slaves_good_slaves:{}\r\n", srv.good_replicas());
    }
    let now = std::time::Instant::now();
    for (n, (c, l)) in srv.replica_links().enumerate() {
        let lag = match l.phase {
            ReplicaPhase::Online => now.duration_since(l.ack_time).as_secs(),
            _ => 0,
        };
        let _ = write!(
            out,
            "slave{n}:ip={},port={},state={},offset={},lag={lag}\r\n",
            super::replication::replica_ip(c),
            l.listening_port,
            l.state_name(),
            l.ack_offset,
        );
    }
    let _ = write!(
        out,
        "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
        srv.failover.state.name(),
        srv.replid,
        r.replid2,
        r.offset,
        r.second_offset,
        u8::from(r.backlog.is_some()),
        srv.config.repl_backlog_size,
        r.backlog_first_offset(),
        r.backlog.as_ref().map_or(0, |b| b.histlen),
    );
    // RDMA full syncs (kvstore's own fields, shown where a device exists).
    if let Some(dev) = &r.rdma {
        let st = &r.rdma_stats;
        let mbps = if st.last_usec > 0 {
            st.last_bytes as f64 / st.last_usec as f64
        } else {
            0.0
        };
        let _ = write!(
            out,
            "rdma_device:{}\r\nrdma_enabled:{}\r\nrdma_fullsyncs:{}\r\nrdma_failures:{}\r\nrdma_fallbacks:{}\r\nrdma_last_bytes:{}\r\nrdma_last_usec:{}\r\nrdma_last_mbytes_per_sec:{mbps:.2}\r\n",
            dev.0.name(),
            u8::from(srv.config.repl_rdma),
            st.fullsyncs,
            st.failures,
            st.fallbacks,
            st.last_bytes,
            st.last_usec,
        );
    }
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills a zeroed struct.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        (t(ru.ru_stime), t(ru.ru_utime))
    }
}

fn info_section_cpu(out: &mut String) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    let (tsys, tuser) = rusage(libc::RUSAGE_THREAD);
    let _ = write!(
        out,
        "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\nused_cpu_user_children:{cuser:.6}\r\nused_cpu_sys_main_thread:{tsys:.6}\r\nused_cpu_user_main_thread:{tuser:.6}\r\n"
    );
}

fn info_section_keyspace(srv: &crate::state::Server, out: &mut String) {
    out.push_str("# Keyspace\r\n");
    for d in &srv.dbs {
        if !d.is_empty() {
            let _ = write!(
                out,
                "db{}:keys={},expires={},avg_ttl={}\r\n",
                d.id,
                d.len(),
                d.expires.len(),
                d.avg_ttl
            );
        }
    }
}

/// Every INFO section in Redis's order.
const SECTIONS: [&str; 13] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// Sections INFO leaves out unless named (or asked for with `all` or
/// `everything`): Redis 7.0's default set has neither.
const NON_DEFAULT_SECTIONS: [&str; 2] = ["commandstats", "latencystats"];

/// Build the INFO text for the requested sections (Redis's genRedisInfoString).
/// INFO's text for `sections`; `caller` is the client asking (it is out of
/// the client table while its command runs, but its memory counts).
pub fn info_string(
    srv: &mut crate::state::Server,
    caller: Option<&crate::state::ClientState>,
    sections: &[&[u8]],
) -> String {
    let defaults = SECTIONS
        .iter()
        .filter(|s| !NON_DEFAULT_SECTIONS.contains(*s));
    let mut wanted: Vec<String> = Vec::new();
    if sections.is_empty() {
        wanted = defaults.clone().map(|s| s.to_string()).collect();
    }
    for s in sections {
        let s = String::from_utf8_lossy(s).to_ascii_lowercase();
        match s.as_str() {
            "all" | "everything" | "default" => {
                for d in defaults.clone() {
                    if !wanted.iter().any(|w| w == d) {
                        wanted.push(d.to_string());
                    }
                }
                if s != "default" {
                    for extra in NON_DEFAULT_SECTIONS {
                        if !wanted.iter().any(|w| w == extra) {
                            wanted.push(extra.into());
                        }
                    }
                }
            }
            _ => {
                if !wanted.contains(&s) {
                    wanted.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    for section in &SECTIONS {
        if !wanted.iter().any(|w| w == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        match *section {
            "server" => info_section_server(srv, &mut out),
            "clients" => info_section_clients(srv, &mut out),
            "memory" => info_section_memory(srv, caller, &mut out),
            "persistence" => info_section_persistence(srv, &mut out),
            "stats" => info_section_stats(srv, &mut out),
            "replication" => info_section_replication(srv, &mut out),
            "cpu" => info_section_cpu(&mut out),
            "modules" => out.push_str("# Modules\r\n"),
            "errorstats" => {
                out.push_str("# Errorstats\r\n");
                for (code, count) in &srv.stats.errorstats {
                    let _ = write!(out, "errorstat_{code}:count={count}\r\n");
                }
            }
            "commandstats" => {
                out.push_str("# Commandstats\r\n");
                let names = all_command_stats(srv)
                    .into_iter()
                    .filter(|(_, st)| st.calls + st.rejected_calls + st.failed_calls > 0);
                for (name, st) in names {
                    let per_call = if st.calls > 0 {
                        st.usec as f64 / st.calls as f64
                    } else {
                        0.0
                    };
                    let _ = write!(
                        out,
                        "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                        st.calls, st.usec, st.rejected_calls, st.failed_calls
                    );
                }
            }
            "latencystats" => {
                out.push_str("# Latencystats\r\n");
                if srv.config.latency_tracking {
                    let percentiles = &srv.config.latency_tracking_info_percentiles;
                    for (name, st) in all_command_stats(srv) {
                        if let Some(h) = &st.latency_histogram {
                            out.push_str(&crate::state::latency::percentiles_line(
                                name,
                                h,
                                percentiles,
                            ));
                        }
                    }
                }
            }
            "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            _ => info_section_keyspace(srv, &mut out),
        }
    }
    out
}

/// `INFO [section ...]`
pub fn info(c: &mut Ctx, argv: &[&[u8]]) {
    let text = info_string(c.srv, Some(c.cl), &argv[1..]);
    c.cl.reply.verbatim(text.as_bytes());
}
