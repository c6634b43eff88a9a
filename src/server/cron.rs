//! The server cron (Redis's `serverCron`), run `hz` times a second by the
//! loop: metrics, active expiry, snapshot scheduling, incremental rehashing,
//! output-limit and idle-timeout checks.

use std::time::{Duration, Instant};

use tracing::debug;

use super::EventLoop;
use crate::commands;

/// Idle time after which an empty query buffer is freed.
const QUERY_BUFFER_IDLE: Duration = Duration::from_secs(2);
/// Time the cron spends on incremental rehashing per database.
const CRON_REHASH_BUDGET: Duration = Duration::from_millis(1);

impl EventLoop {
    pub(super) fn cron(&mut self) {
        let srv = &mut self.srv;
        // DEBUG PAUSE-CRON 1: a test stops periodic work to look at state.
        if srv.cron_paused {
            return;
        }
        // A signal's shutdown starts here, as Redis's serverCron starts it.
        if let Some(flags) = srv.shutdown_asap.take() {
            if srv.shutdown.is_none() && srv.shutdown_wait.is_none() {
                srv.shutdown = Some(flags);
            }
        }
        srv.cron_loops += 1;
        srv.update_time();
        srv.update_hz();
        let now = Instant::now();
        let s = &mut srv.stats;
        for (metric, count) in [
            (&mut s.inst_ops, s.total_commands_processed),
            (&mut s.inst_input, s.total_net_input_bytes),
            (&mut s.inst_output, s.total_net_output_bytes),
            (&mut s.inst_repl_input, s.net_repl_input_bytes),
            (&mut s.inst_repl_output, s.net_repl_output_bytes),
        ] {
            metric.sample(count, now);
        }
        let used = srv.used_memory();
        if used > srv.peak_memory {
            srv.peak_memory = used;
        }
        if srv.tracking.clients > 0 {
            srv.tracking_limit_used_slots();
        }
        // The software watchdog: armed again at every tick (Redis's
        // watchdogScheduleSignal), never shorter than two ticks; 0 turns it
        // off (nothing to do when it is off already).
        let period = srv.config.watchdog_period as u64;
        let floor = 2000 / srv.config.hz.max(1) as u64;
        crate::logging::watchdog(if period == 0 { 0 } else { period.max(floor) });
        if !srv.ldb_children.is_empty() {
            commands::scripting::reap_debug_sessions(srv);
        }
        if srv.loading.is_none() {
            if srv.active_expire_enabled {
                // A replica's keys expire by its master's DELs, except those
                // its own clients wrote.
                if srv.master.target.is_none() {
                    commands::expire::active_expire_cycle(srv);
                } else {
                    commands::expire::expire_replica_keys(srv);
                }
            }
            crate::state::snapshot::cron(srv);
            srv.aof_cron();
        }
        // Not while a child shares the pages (as Redis's databasesCron): a
        // rehash step rewrites the links of every entry it moves.
        if srv.config.activerehashing && crate::db::table::resize_allowed() {
            for db in &mut srv.dbs {
                if db.main.is_rehashing() || db.expires.is_rehashing() {
                    db.rehash_for(CRON_REHASH_BUDGET);
                }
            }
        }
        srv.update_growth_ceiling();
        // Query buffers of clients idle for more than 2 s go back to the
        // allocator (Redis's clientsCronResizeQueryBuffer).
        for (slot, link) in self.links.iter_mut().enumerate() {
            let (Some(link), Some(Some(st))) = (link.as_mut(), srv.clients.get_mut(slot)) else {
                continue;
            };
            if now.duration_since(st.last_interaction) > QUERY_BUFFER_IDLE
                && link.query.release_if_empty()
            {
                st.qbuf_len = 0;
                st.qbuf_free = 0;
            }
        }
        srv.check_output_limits_cron(now);
        srv.resize_reply_buffers_cron();
        if srv.config.timeout > 0 {
            let limit = Duration::from_secs(srv.config.timeout as u64);
            for (i, c) in srv.clients.iter().enumerate() {
                if let Some(c) = c {
                    // As Redis: replicas, masters, blocked and subscribed
                    // clients are never closed for idleness.
                    if c.timeout_exempt() {
                        continue;
                    }
                    if now.duration_since(c.last_interaction) > limit {
                        debug!(client = %c.addr, "closing idle client");
                        srv.to_close.push((i, c.id));
                    }
                }
            }
        }
        // Once a second, as Redis's replicationCron.
        if srv.cron_loops.is_multiple_of((srv.hz as u64).max(1)) {
            srv.replication_cron();
            srv.migrate_sockets.close_idle(srv.now_ms / 1000);
            let timeout = Duration::from_secs(srv.config.repl_timeout.max(1) as u64);
            let loading = self.srv.master.state == crate::state::master::LinkState::Loading;
            if self.handshake.is_some() && !loading && self.srv.master.last_io.elapsed() > timeout {
                tracing::warn!("Timeout connecting to the MASTER...");
                self.drop_master_link();
            }
        }
        let srv = &mut self.srv;
        // Decay the recent maxima every few seconds, as Redis's sampling does.
        if srv.cron_loops.is_multiple_of((srv.hz as u64 * 5).max(1)) {
            srv.recent_max_input = 0;
            srv.recent_max_output = 0;
        }
    }
}
