//! Replication commands, master side: SYNC, PSYNC, REPLCONF, ROLE (Redis's
//! replication.c). The machinery is in `state::replication`.

use super::*;
use crate::state::failover::FailoverState;
use crate::state::replication::ReplicaPhase;

/// `PSYNC replid offset` — continue from the backlog (+CONTINUE) or start a
/// full synchronisation (+FULLRESYNC replid offset, then the dump and the
/// stream). `SYNC` — the old protocol: the dump without +FULLRESYNC.
pub fn psync(c: &mut Ctx, argv: &[&[u8]]) {
    // A replica asking again (or a MONITOR turned replica) is ignored.
    if c.cl.kind == crate::state::ClientKind::Replica {
        return;
    }
    // Our master hands its place over to us (FAILOVER): we become the
    // master, and it our replica, continuing the history.
    if c.cmd.name == "psync" && argv.len() > 3 && eq_ic(argv[3], "failover") {
        tracing::warn!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(argv[1])
        );
        if c.srv.master.target.is_none() {
            return c
                .cl
                .reply
                .error("ERR PSYNC FAILOVER can't be sent to a master.");
        }
        if argv[1] != c.srv.replid.as_bytes() {
            return c
                .cl
                .reply
                .error("ERR PSYNC FAILOVER replid must match my replid.");
        }
        c.srv.promote_to_master();
        tracing::info!(
            "MASTER MODE enabled (failover request from '{}')",
            c.cl.info_line()
        );
    }
    if c.srv.failover.state != FailoverState::None {
        return c
            .cl
            .reply
            .error("NOMASTERLINK Can't SYNC while failing over");
    }
    if c.srv.master.is_syncing() {
        return c
            .cl
            .reply
            .error("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    if c.cl.pending_output() > 0 {
        return c
            .cl
            .reply
            .error("ERR SYNC and PSYNC are invalid with pending output");
    }
    // A filtered dump is never the server's dump file: it goes diskless,
    // so the replica must take an `$EOF:` transfer (Redis's syncCommand).
    if c.cl
        .repl
        .as_ref()
        .is_some_and(|l| l.filter.any() && !l.capa_eof)
    {
        return c
            .cl
            .reply
            .error("ERR Filtered replica requires EOF capability");
    }
    tracing::info!("Replica {} asks for synchronization", replica_name(c.cl));
    let psync = if c.cmd.name == "psync" {
        let Some(offset) = parse_i64(argv[2]) else {
            tracing::warn!(
                "Replica {} asks for synchronization but with a wrong offset",
                replica_name(c.cl)
            );
            return c.cl.reply.error(ERR_NOT_INT);
        };
        let replid = String::from_utf8_lossy(argv[1]).to_string();
        Some((replid, offset))
    } else {
        None
    };
    let capa_psync2 = c.cl.repl.as_ref().is_some_and(|l| l.capa_psync2);
    let request = psync.as_ref().map(|(id, off)| (id.as_str(), *off));
    c.srv.replica_sync(c.cl, request, capa_psync2);
}

/// `REPLCONF option value [option value …]` — what a replica tells its
/// master: listening-port, ip-address, capa (eof, psync2, rdma), ack (no
/// reply), getack, rdb-only; and `REPLCONF rdma-qp|rdma-progress|rdma-done|
/// rdma-fail …`, an RDMA full sync's messages (no reply).
pub fn replconf(c: &mut Ctx, argv: &[&[u8]]) {
    // An RDMA full sync's messages (rdma/control.rs): only from a replica
    // being synchronised, never answered (its dump shares the link).
    if argv.len() > 1 && argv[1].len() > 5 && argv[1][..5].eq_ignore_ascii_case(b"rdma-") {
        if c.cl.kind != crate::state::ClientKind::Replica {
            return c.cl.reply.error(&format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(argv[1])
            ));
        }
        match crate::rdma::control::Message::parse(&argv[1..]) {
            Some(msg) => c.srv.rdma_replica_message(c.cl, msg),
            // A message we cannot read ends the RDMA attempt at once
            // (the master falls back to TCP) instead of at the timeout.
            None => {
                let what = String::from_utf8_lossy(argv[1]).to_string();
                tracing::warn!("Bad REPLCONF {what} from replica {}", c.cl.addr);
                let msg = crate::rdma::control::Message::Fail(format!("malformed {what}"));
                c.srv.rdma_replica_message(c.cl, msg);
            }
        }
        return;
    }
    if argv.len().is_multiple_of(2) {
        return c.cl.reply.error(ERR_SYNTAX);
    }
    for pair in argv[1..].chunks(2) {
        let (option, value) = (pair[0], pair[1]);
        if eq_ic(option, "listening-port") {
            let Some(port) = parse_i64(value) else {
                return c.cl.reply.error(ERR_NOT_INT);
            };
            link(c.cl).listening_port = port.clamp(0, u16::MAX as i64) as u16;
        } else if eq_ic(option, "ip-address") {
            // Redis's NET_HOST_STR_LEN: a host name fits, not only an
            // address.
            if value.len() >= 256 {
                return c.cl.reply.error(&format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                ));
            }
            link(c.cl).announced_ip = Some(String::from_utf8_lossy(value).to_string());
        } else if eq_ic(option, "capa") {
            // Capabilities this master does not know are ignored.
            if eq_ic(value, "psync2") {
                link(c.cl).capa_psync2 = true;
            } else if eq_ic(value, "eof") {
                link(c.cl).capa_eof = true;
            } else if eq_ic(value, "rdma") {
                link(c.cl).capa_rdma = true;
            }
        } else if eq_ic(option, "ack") {
            // Only from replicas, and never answered.
            if c.cl.kind != crate::state::ClientKind::Replica {
                return;
            }
            // An offset that is not a number is no acknowledgement: it
            // neither refreshes the link nor starts its stream (Redis's).
            let Some(offset) = parse_i64(value) else {
                return;
            };
            if let Some(l) = c.cl.repl.as_mut() {
                l.ack_offset = l.ack_offset.max(offset);
                l.ack_time = std::time::Instant::now();
            }
            c.srv.replica_acked(c.cl);
            // Served by the loop once this replica is back among the
            // clients: counted from here, it would miss its own ACK.
            c.srv.repl.acks_arrived = true;
            return;
        } else if eq_ic(option, "getack") {
            // Asked of a replica by its master: the ACK goes out after this
            // command (the dispatcher drops the master's other replies).
            if c.cl.kind == crate::state::ClientKind::Master {
                c.cl.ack_requested = true;
            }
            return;
        } else if eq_ic(option, "rdb-only") {
            match parse_i64(value) {
                Some(v @ 0..=1) => link(c.cl).rdb_only = v == 1,
                _ => return c.cl.reply.error(ERR_NOT_INT),
            }
        } else if eq_ic(option, "rdb-filter-only") {
            // Include filters: everything is left out but what is named;
            // "functions" is the one there is ("" asks for an empty dump).
            let Some(words) = crate::protocol::parser::split_args(value) else {
                return c.cl.reply.error("ERR Missing rdb-filter-only values");
            };
            let mut filter = crate::state::replication::RdbFilter {
                exclude_data: true,
                exclude_functions: true,
            };
            for w in &words {
                if eq_ic(w, "functions") {
                    filter.exclude_functions = false;
                } else {
                    return c.cl.reply.error(&format!(
                        "ERR Unsupported rdb-filter-only option: {}",
                        String::from_utf8_lossy(w)
                    ));
                }
            }
            link(c.cl).filter = filter;
        } else {
            return c.cl.reply.error(&format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(option)
            ));
        }
    }
    c.cl.reply.ok();
}

/// The replica link a REPLCONF before PSYNC configures.
fn link(client: &mut ClientState) -> &mut crate::state::replication::ReplicaLink {
    client.repl.get_or_insert_default()
}

/// How Redis names a replica in its log: `ip:port` it listens on.
fn replica_name(client: &ClientState) -> String {
    let ip = client
        .addr
        .rsplit_once(':')
        .map_or(client.addr.as_str(), |(ip, _)| ip);
    let port = client.repl.as_ref().map_or(0, |l| l.listening_port);
    format!("{ip}:{port}")
}

/// `ROLE` — on a master: `master`, the offset, and each online replica's
/// address, listening port and acknowledged offset; on a replica: `slave`,
/// its master's host and port, the link's state and its offset.
pub fn role(c: &mut Ctx, _argv: &[&[u8]]) {
    use crate::state::master::LinkState;
    if let Some((host, port)) = c.srv.master.target.clone() {
        // A replica: its master, the link's state and the offset it has.
        let state = match c.srv.master.state {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Transfer | LinkState::Loading => "sync",
            LinkState::Connected => "connected",
            _ => "handshake",
        };
        let offset = if c.srv.master.client_id.is_some() {
            c.srv.repl.offset
        } else {
            -1
        };
        let out = &mut c.cl.reply;
        out.array(5);
        out.bulk(b"slave");
        out.bulk(host.as_bytes());
        out.int(port as i64);
        out.bulk(state.as_bytes());
        out.int(offset);
        return;
    }
    let replicas: Vec<(String, u16, i64)> = c
        .srv
        .replica_links()
        .filter(|(_, l)| matches!(l.phase, ReplicaPhase::Online | ReplicaPhase::WaitFirstAck))
        .map(|(r, l)| (replica_ip(r), l.listening_port, l.ack_offset))
        .collect();
    let out = &mut c.cl.reply;
    out.array(3);
    out.bulk(b"master");
    out.int(c.srv.repl.offset);
    out.array(replicas.len());
    for (ip, port, offset) in replicas {
        out.array(3);
        out.bulk(ip.as_bytes());
        out.bulk(port.to_string().as_bytes());
        out.bulk(offset.to_string().as_bytes());
    }
}

/// The address a replica is known by: the one it announced, else its
/// peer address.
pub use crate::state::failover::replica_ip;

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and `SLAVEOF`): follow a
/// master, or become one.
pub fn replicaof(c: &mut Ctx, argv: &[&[u8]]) {
    if c.srv.failover.state != FailoverState::None {
        return c
            .cl
            .reply
            .error("ERR REPLICAOF not allowed while failing over.");
    }
    if eq_ic(argv[1], "no") && eq_ic(argv[2], "one") {
        if c.srv.master.target.is_some() {
            c.srv.promote_to_master();
            tracing::info!("MASTER MODE enabled (user request from '{}')", c.cl.addr);
        }
        return c.cl.reply.ok();
    }
    if c.cl.kind == crate::state::ClientKind::Replica {
        // It would be flushed with the other replicas.
        return c
            .cl
            .reply
            .error("ERR Command is not valid when client is a replica.");
    }
    let Some(port) = parse_i64(argv[2]).filter(|p| (0..=65535).contains(p)) else {
        return c.cl.reply.error("ERR Invalid master port");
    };
    let host = String::from_utf8_lossy(argv[1]).to_string();
    if c.srv.master.target.as_ref() == Some(&(host.clone(), port as u16)) {
        return c
            .cl
            .reply
            .simple("OK Already connected to specified master");
    }
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        c.cl.addr
    );
    let was_master = c.srv.master.target.is_none();
    c.srv.replicate_from(host, port as u16);
    if was_master {
        super::blocking::disconnect_blocked(c.srv);
    }
    c.cl.reply.ok();
}

/// `FAILOVER [TO host port [FORCE]] [TIMEOUT ms]` / `FAILOVER ABORT` — hand
/// the master's place to a replica without losing a write (Redis 7.0's
/// failoverCommand; the work is in `state::failover`).
pub fn failover(c: &mut Ctx, argv: &[&[u8]]) {
    if argv.len() == 2 && eq_ic(argv[1], "abort") {
        if c.srv.failover.state == FailoverState::None {
            return c.cl.reply.error("ERR No failover in progress.");
        }
        c.srv.abort_failover("Failover manually aborted");
        return c.cl.reply.ok();
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < argv.len() {
        if eq_ic(argv[j], "timeout") && j + 1 < argv.len() && timeout == 0 {
            let Some(ms) = parse_i64(argv[j + 1]) else {
                return c.cl.reply.error(ERR_NOT_INT);
            };
            if ms <= 0 {
                return c
                    .cl
                    .reply
                    .error("ERR FAILOVER timeout must be greater than 0");
            }
            timeout = ms;
            j += 2;
        } else if eq_ic(argv[j], "to") && j + 2 < argv.len() && target.is_none() {
            let Some(port) = parse_i64(argv[j + 2]) else {
                return c.cl.reply.error(ERR_NOT_INT);
            };
            target = Some((String::from_utf8_lossy(argv[j + 1]).into_owned(), port));
            j += 3;
        } else if eq_ic(argv[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return c.cl.reply.error(ERR_SYNTAX);
        }
    }
    if c.srv.failover.state != FailoverState::None {
        return c.cl.reply.error("ERR FAILOVER already in progress.");
    }
    if c.srv.master.target.is_some() {
        return c
            .cl
            .reply
            .error("ERR FAILOVER is not valid when server is a replica.");
    }
    if c.srv.repl.replicas.is_empty() {
        return c
            .cl
            .reply
            .error("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout == 0 || target.is_none()) {
        return c.cl.reply.error(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match target {
        Some((host, port)) => {
            let found = u16::try_from(port).ok().and_then(|p| {
                let online = matches!(c.srv.find_replica(&host, p)?.phase, ReplicaPhase::Online);
                Some((p, online))
            });
            let Some((port, online)) = found else {
                return c
                    .cl
                    .reply
                    .error("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if !online {
                return c
                    .cl
                    .reply
                    .error("ERR FAILOVER target replica is not online.");
            }
            Some((host, port))
        }
        None => None,
    };
    c.srv.start_failover(target, timeout, force);
    c.cl.reply.ok();
}
