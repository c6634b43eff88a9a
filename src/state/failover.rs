//! A coordinated failover (FAILOVER, Redis 7.0's replication.c): the
//! master pauses writes, waits until a replica has acknowledged its whole
//! stream, turns itself into that replica's replica and asks it, with
//! `PSYNC <id> <offset> FAILOVER`, to become the master. Nothing written is
//! lost: the writes held by the pause run on the new master's stream once
//! they are let go (they are refused there with -READONLY, as Redis).

use tracing::info;

use super::replication::ReplicaLink;
use super::Server;

/// Where a failover is (INFO `master_failover_state`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum FailoverState {
    #[default]
    None,
    /// Writes paused; waiting for a replica to acknowledge the offset.
    WaitForSync,
    /// This server follows the target and has sent it PSYNC … FAILOVER.
    InProgress,
}

/// The failover under way, if any.
#[derive(Debug, Default, Clone)]
pub struct Failover {
    pub state: FailoverState,
    /// The replica to fail over to (`TO host port`, or the first one found
    /// caught up).
    pub target: Option<(String, u16)>,
    /// When to give up, or force the switch (`TIMEOUT`), in ms; 0: never.
    pub end_ms: i64,
    pub force: bool,
}

impl FailoverState {
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// The address a replica is known by: the one it announced, or its
/// connection's (Redis's `slave_addr` or the peer address).
pub fn replica_ip(client: &super::ClientState) -> String {
    if let Some(ip) = client.repl.as_ref().and_then(|l| l.announced_ip.clone()) {
        return ip;
    }
    client
        .addr
        .rsplit_once(':')
        .map_or(client.addr.clone(), |(ip, _)| ip.to_string())
}

impl Server {
    /// The link of the replica listed as `host:port` (its address and
    /// listening port), as Redis's findReplica.
    pub fn find_replica(&self, host: &str, port: u16) -> Option<&ReplicaLink> {
        self.replica_links()
            .find(|(c, l)| l.listening_port == port && replica_ip(c).eq_ignore_ascii_case(host))
            .map(|(_, l)| l)
    }

    /// FAILOVER's checks passed: pause writes and wait for a replica.
    pub fn start_failover(&mut self, target: Option<(String, u16)>, timeout_ms: i64, force: bool) {
        match &target {
            Some((host, port)) => info!("FAILOVER requested to {host}:{port}."),
            None => info!("FAILOVER requested to any replica."),
        }
        self.failover = Failover {
            state: FailoverState::WaitForSync,
            target,
            end_ms: if timeout_ms > 0 {
                self.now_ms + timeout_ms
            } else {
                0
            },
            force,
        };
    }

    /// The failover is over (done or not): writes go on.
    pub fn clear_failover(&mut self) {
        self.failover = Failover::default();
    }

    /// Give a failover up: a switch already made is undone (this server is
    /// the master again), and writes go on.
    pub fn abort_failover(&mut self, why: &str) {
        if self.failover.state == FailoverState::None {
            return;
        }
        match &self.failover.target {
            Some((host, port)) => info!("FAILOVER to {host}:{port} aborted: {why}"),
            None => info!("FAILOVER to any replica aborted: {why}"),
        }
        if self.failover.state == FailoverState::InProgress {
            self.promote_to_master();
        }
        self.clear_failover();
    }

    /// Before every sleep and once a second (Redis's updateFailoverStatus):
    /// time out or force the switch, or make it once the target (or any
    /// replica) has acknowledged everything.
    pub fn failover_cron(&mut self) {
        if self.failover.state != FailoverState::WaitForSync {
            return;
        }
        if self.failover.end_ms != 0 && self.failover.end_ms <= self.now_ms {
            if self.failover.force {
                if let Some((host, port)) = self.failover.target.clone() {
                    info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                    self.switch_to_target(host, port);
                    return;
                }
            }
            self.abort_failover("Replica never caught up before timeout");
            return;
        }
        let offset = self.repl.offset;
        let caught_up = match self.failover.target.clone() {
            Some((host, port)) => self
                .find_replica(&host, port)
                .is_some_and(|l| l.ack_offset == offset)
                .then_some((host, port)),
            None => self.replica_links().find_map(|(c, l)| {
                (l.ack_offset == offset).then(|| (replica_ip(c), l.listening_port))
            }),
        };
        if let Some((host, port)) = caught_up {
            self.failover.target = Some((host.clone(), port));
            info!("Failover target {host}:{port} is synced, failing over.");
            self.switch_to_target(host, port);
        }
    }

    fn switch_to_target(&mut self, host: String, port: u16) {
        self.failover.state = FailoverState::InProgress;
        self.replicate_from(host, port);
    }
}
