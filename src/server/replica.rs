//! Replication, replica side, in the event loop (Redis's replication.c:
//! connectWithMaster, syncWithMaster, readSyncBulkPayload).
//!
//! REPLICAOF (or `replicaof` in the configuration) makes the loop open a
//! non-blocking connection to the master, registered in the same poll. The
//! handshake is a chain of one request and one reply at a time — PING,
//! AUTH when `masterauth` is set, REPLCONF listening-port (our port, or
//! `replica-announce-port`), REPLCONF ip-address when
//! `replica-announce-ip` is set, REPLCONF capa eof capa psync2, PSYNC —
//! because a master refuses PSYNC while it still
//! has replies to write. PSYNC names the history this server has (its
//! replication id and offset) so that a master that still has the bytes in
//! its backlog continues (+CONTINUE); otherwise +FULLRESYNC is followed by
//! the dump, as `$<length>` or as `$EOF:<40-byte mark>` (diskless), which
//! is written to a temporary file, renamed over the dump file and loaded
//! in place of the dataset (only once it is complete). Then the socket
//! becomes an ordinary client of kind master in the slab: its commands run
//! through the dispatcher without the gates, with their replies dropped,
//! and the replication offset counts their bytes.

use std::io;
use std::time::Instant;

use mio::{Interest, Token};
use tracing::{info, warn};

use super::client::{Conn, Link};
use super::EventLoop;
use crate::state::failover::FailoverState;
use crate::state::master::{LinkState, Transfer};
use crate::state::ClientState;

/// The longest reply line the handshake accepts.
const MAX_HANDSHAKE_LINE: usize = 64 * 1024;

/// The poll token of the link while it is not yet a client.
pub(super) const MASTER_TOKEN: Token = Token(usize::MAX - 4);
/// The poll token of an RDMA fetch's completion fd.
pub(super) const RDMA_TOKEN: Token = Token(usize::MAX - 6);

/// A handshake or transfer in progress with the master.
pub(super) struct Handshake {
    /// Plain TCP, or TLS with `tls-replication`.
    conn: Conn,
    /// What was received and not yet used.
    inbuf: Vec<u8>,
    /// What is to be written next.
    outbuf: Vec<u8>,
    /// When an empty line last told the master we are alive.
    newline_at: Instant,
}

impl EventLoop {
    /// Once a loop turn: act on REPLICAOF (connect, reconnect, drop the
    /// link) and keep the link to the master alive.
    pub(super) fn replication_turn(&mut self) {
        if std::mem::take(&mut self.srv.master.changed) {
            self.drop_master_link();
            // A new master is tried at once, not after the retry pause.
            self.srv.master.retry_at = Instant::now();
        }
        if self.srv.master.target.is_none() {
            return;
        }
        // Not before the dataset (and the history it names) is loaded.
        if self.srv.loading.is_some() {
            self.newline_while_loading();
            return;
        }
        if self
            .srv
            .master
            .transfer
            .as_ref()
            .is_some_and(|t| t.rdma.is_some())
        {
            self.rdma_fetch_turn(false);
        }
        if self.handshake.is_none()
            && self.srv.master.client_id.is_none()
            && self.srv.master.state == LinkState::Connect
            && self.srv.master.retry_at <= Instant::now()
        {
            self.connect_to_master();
        }
    }

    /// While the master's dump loads, an empty line a second tells the
    /// master we are alive: it counts our `repl-timeout` from our last ACK,
    /// and a load can take longer (Redis's replicationSendNewlineToMaster).
    fn newline_while_loading(&mut self) {
        let Some(h) = self.handshake.as_mut() else {
            return;
        };
        if h.newline_at.elapsed() < std::time::Duration::from_secs(1) {
            return;
        }
        h.newline_at = Instant::now();
        h.outbuf.push(b'\n');
        // A failed write is the link's end, found by the next read.
        let _ = h.flush_out();
    }

    /// Close the handshake or the master client, whichever exists.
    pub(super) fn drop_master_link(&mut self) {
        if let Some(id) = self.srv.master.client_id.take() {
            self.srv.close_client_asap(id);
        }
        match self.handshake.take() {
            Some(h) => self.abandon_handshake(h),
            None => self.abandon_handshake_state(),
        }
    }

    /// The handshake (or transfer) failed or is dropped: its socket and
    /// temporary dump go, and the link is tried again in a second.
    fn abandon_handshake(&mut self, h: Handshake) {
        let mut conn = h.conn;
        let _ = self.poll.registry().deregister(conn.source());
        self.abandon_handshake_state();
    }

    fn abandon_handshake_state(&mut self) {
        if let Some(t) = self.srv.master.transfer.take() {
            let _ = std::fs::remove_file(&t.tmp_path);
        }
        if self.srv.master.streamed_dump.is_some() {
            // The dump was loading as it arrived: what was loaded goes.
            self.srv.loading = None;
            let _ = crate::state::master::finish_synced_load(
                &mut self.srv,
                Err("the transfer was interrupted".into()),
            );
        }
        self.srv.master.link_lost();
    }

    fn connect_to_master(&mut self) {
        let Some((host, port)) = self.srv.master.target.clone() else {
            return;
        };
        self.srv.master.retry_at = Instant::now() + std::time::Duration::from_secs(1);
        let addr = match std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
            .ok()
            .and_then(|mut a| a.next())
        {
            Some(a) => a,
            None => {
                warn!("Unable to connect to MASTER: can't resolve {host}:{port}");
                return;
            }
        };
        let stream = match crate::net::connect_from(addr, &self.srv.config.bind_source_addr) {
            Ok(s) => s,
            Err(e) => {
                warn!("Unable to connect to MASTER: {e}");
                return;
            }
        };
        // With tls-replication the handshake starts once connected: the
        // first request waits in the TLS stream until it is over.
        let mut conn = match (&self.srv.tls, self.srv.config.tls.replication) {
            (Some(tls), true) => match crate::tls::TlsStream::connect(stream, &tls.client, &host) {
                Ok(t) => Conn::Tls(Box::new(t)),
                Err(e) => {
                    warn!("Unable to connect to MASTER: {e}");
                    return;
                }
            },
            _ => Conn::Tcp(stream),
        };
        if let Err(e) = self.poll.registry().register(
            conn.source(),
            MASTER_TOKEN,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            warn!("Unable to connect to MASTER: {e}");
            return;
        }
        info!("Connecting to MASTER {host}:{port}");
        info!("MASTER <-> REPLICA sync started");
        self.srv.master.state = LinkState::Connecting;
        self.srv.master.last_io = Instant::now();
        self.handshake = Some(Handshake {
            conn,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            newline_at: Instant::now(),
        });
    }

    /// An event on the link before it became a client.
    pub(super) fn master_link_event(&mut self) {
        let Some(mut h) = self.handshake.take() else {
            return;
        };
        // While the dump loads, what the master sends waits in the socket.
        if self.srv.master.state == LinkState::Loading {
            self.handshake = Some(h);
            return;
        }
        let next = self.advance_handshake(&mut h);
        self.handshake_advanced(h, next);
    }

    /// Act on where the handshake got to.
    fn handshake_advanced(&mut self, mut h: Handshake, next: Result<Next, String>) {
        match next {
            Ok(Next::Keep) => self.handshake = Some(h),
            Ok(Next::Online(leftover)) if self.srv.master.state == LinkState::Loading => {
                // The stream that came with the dump waits for the load.
                h.inbuf = leftover;
                self.handshake = Some(h);
            }
            Ok(Next::Online(leftover)) => self.master_link_online(h, leftover),
            Err(e) => {
                warn!("{e}");
                self.abandon_handshake(h);
            }
        }
    }

    /// Move the handshake as far as the bytes at hand allow.
    fn advance_handshake(&mut self, h: &mut Handshake) -> Result<Next, String> {
        h.flush_out()?;
        if self.srv.master.state == LinkState::Connecting {
            let tcp = h.conn.tcp().expect("a TCP link");
            match tcp.peer_addr() {
                Ok(_) => {
                    info!("Non blocking connect for SYNC fired the event.");
                    self.srv.master.state = LinkState::ReceivePong;
                    h.outbuf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
                    return self.advance_handshake(h);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    // Still connecting, or refused: the error says which.
                    if let Ok(Some(err)) = tcp.take_error() {
                        return Err(format!("Error condition on socket for SYNC: {err}"));
                    }
                    return Ok(Next::Keep);
                }
                Err(e) => return Err(format!("Error condition on socket for SYNC: {e}")),
            }
        }
        // Read what arrived, a line at a time while the handshake needs
        // lines (the dump that follows goes straight to its file).
        let mut closed = false;
        let mut buf = [0u8; 64 * 1024];
        loop {
            let mut drained = false;
            loop {
                if self.srv.master.state != LinkState::Transfer && h.inbuf.contains(&b'\n') {
                    break;
                }
                match h.conn.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        drained = true;
                        break;
                    }
                    Ok(n) => {
                        self.srv.master.last_io = Instant::now();
                        if self.srv.master.state == LinkState::Transfer {
                            self.receive_payload(h, &buf[..n])?;
                            if let Some(leftover) = self.after_payload(h)? {
                                return Ok(Next::Online(leftover));
                            }
                        } else {
                            h.inbuf.extend_from_slice(&buf[..n]);
                            if h.inbuf.len() > MAX_HANDSHAKE_LINE && !h.inbuf.contains(&b'\n') {
                                return Err(
                                    "Bad protocol from MASTER: an overlong line during the handshake"
                                        .into(),
                                );
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        drained = true;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(format!("Error reading from MASTER: {e}")),
                }
            }
            while self.srv.master.state != LinkState::Transfer {
                let Some(nl) = h.inbuf.iter().position(|&b| b == b'\n') else {
                    break;
                };
                let line: Vec<u8> = h.inbuf.drain(..=nl).collect();
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                if line.is_empty() {
                    // A newline keepalive while the master prepares the dump.
                    continue;
                }
                self.handshake_reply(h, &line)?;
                if self.srv.master.state == LinkState::Transfer {
                    let rest = std::mem::take(&mut h.inbuf);
                    self.receive_payload(h, &rest)?;
                    if let Some(leftover) = self.after_payload(h)? {
                        return Ok(Next::Online(leftover));
                    }
                }
                if self.srv.master.state == LinkState::Continued {
                    // The stream that follows is read by the master client.
                    return Ok(Next::Online(std::mem::take(&mut h.inbuf)));
                }
            }
            if drained {
                break;
            }
        }
        if closed {
            return Err("Master closed the connection during the SYNC handshake".into());
        }
        // Write what the replies queued.
        h.flush_out()?;
        Ok(Next::Keep)
    }

    /// One reply line of the handshake: check it and send the next request.
    fn handshake_reply(&mut self, h: &mut Handshake, line: &str) -> Result<(), String> {
        let send = |h: &mut Handshake, args: &[&[u8]]| {
            crate::state::feed::encode_command(args, &mut h.outbuf);
        };
        let config = &self.srv.config;
        // The port and address the master is to list us under
        // (`replica-announce-port`, `replica-announce-ip`), as Redis.
        let port = match config.replica_announce_port {
            0 => config.port,
            announced => announced,
        }
        .to_string();
        let announce_ip = config.replica_announce_ip.clone();
        let rdma = self.srv.repl.rdma.is_some() && config.repl_rdma;
        let send_capa = |h: &mut Handshake| {
            if rdma {
                send(
                    h,
                    &[
                        b"REPLCONF",
                        b"capa",
                        b"eof",
                        b"capa",
                        b"psync2",
                        b"capa",
                        b"rdma",
                    ],
                );
            } else {
                send(h, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]);
            }
        };
        let m = &mut self.srv.master;
        match m.state {
            LinkState::ReceivePong => {
                // -NOAUTH is fine here: AUTH comes next.
                if line.starts_with('-')
                    && !line.starts_with("-NOAUTH")
                    && !line.starts_with("-NOPERM")
                    && !line.starts_with("-ERR operation not permitted")
                {
                    return Err(format!("Error reply to PING from master: '{line}'"));
                }
                info!("Master replied to PING, replication can continue...");
                let auth = &self.srv.config.masterauth;
                let user = &self.srv.config.masteruser;
                if !auth.is_empty() {
                    if user.is_empty() {
                        send(h, &[b"AUTH", auth.as_bytes()]);
                    } else {
                        send(h, &[b"AUTH", user.as_bytes(), auth.as_bytes()]);
                    }
                    m.state = LinkState::ReceiveAuth;
                } else {
                    send(h, &[b"REPLCONF", b"listening-port", port.as_bytes()]);
                    m.state = LinkState::ReceivePort;
                }
            }
            LinkState::ReceiveAuth => {
                if line.starts_with('-') {
                    return Err(format!("Unable to AUTH to MASTER: {line}"));
                }
                send(h, &[b"REPLCONF", b"listening-port", port.as_bytes()]);
                m.state = LinkState::ReceivePort;
            }
            LinkState::ReceivePort => {
                if line.starts_with('-') {
                    info!(
                        "(Non critical) Master does not understand REPLCONF listening-port: {line}"
                    );
                }
                if announce_ip.is_empty() {
                    send_capa(h);
                    m.state = LinkState::ReceiveCapa;
                } else {
                    send(h, &[b"REPLCONF", b"ip-address", announce_ip.as_bytes()]);
                    m.state = LinkState::ReceiveIp;
                }
            }
            LinkState::ReceiveIp => {
                if line.starts_with('-') {
                    info!("(Non critical) Master does not understand REPLCONF ip-address: {line}");
                }
                send_capa(h);
                m.state = LinkState::ReceiveCapa;
            }
            LinkState::ReceiveCapa => {
                if line.starts_with('-') {
                    info!("(Non critical) Master does not understand REPLCONF capa: {line}");
                }
                let history = self.srv.repl.backlog.is_some();
                let (id, offset) = m.psync_request(&self.srv.replid, self.srv.repl.offset, history);
                if id == "?" {
                    info!("Partial resynchronization not possible (no cached master)");
                } else {
                    info!("Trying a partial resynchronization (request {id}:{offset}).");
                }
                let offset = offset.to_string();
                // A failover asks its target to take the master's place.
                if self.srv.failover.state == FailoverState::InProgress {
                    send(
                        h,
                        &[b"PSYNC", id.as_bytes(), offset.as_bytes(), b"FAILOVER"],
                    );
                } else {
                    send(h, &[b"PSYNC", id.as_bytes(), offset.as_bytes()]);
                }
                self.srv.master.state = LinkState::ReceivePsync;
            }
            LinkState::ReceivePsync => self.psync_reply(line)?,
            _ => return Err(format!("Unexpected reply from master: '{line}'")),
        }
        Ok(())
    }

    /// +FULLRESYNC, +CONTINUE or an error (Redis's
    /// slaveTryPartialResynchronization, reading half).
    fn psync_reply(&mut self, line: &str) -> Result<(), String> {
        // A failover is over once its target answers as a master would
        // (a full sync is not expected, but not wrong either).
        if self.srv.failover.state == FailoverState::InProgress {
            if line.starts_with("+FULLRESYNC ") || line.starts_with("+CONTINUE") {
                self.srv.clear_failover();
            } else {
                self.srv
                    .abort_failover("Failover target rejected psync request");
                return Err(format!("Unexpected reply to PSYNC from master: {line}"));
            }
        }
        if let Some(rest) = line.strip_prefix("+FULLRESYNC ") {
            let mut parts = rest.split(' ');
            let (Some(id), Some(off)) = (
                parts.next().filter(|id| crate::util::is_replication_id(id)),
                parts
                    .next()
                    .and_then(|o| o.parse::<i64>().ok())
                    .filter(|o| (0..i64::MAX).contains(o)),
            ) else {
                return Err(format!(
                    "Master replied with a wrong +FULLRESYNC reply: '{line}'"
                ));
            };
            info!("Full resync from master: {id}:{off}");
            self.srv.master.full_sync_from = Some((id.to_string(), off));
            let dir = self.srv.config.dir.clone();
            let tmp_path = dir.join(format!(
                "temp-{}.{}.rdb",
                crate::util::unix_time_ms() / 1000,
                std::process::id()
            ));
            let file = std::fs::File::create(&tmp_path).map_err(|e| {
                format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}")
            })?;
            self.srv.master.transfer = Some(Transfer::new(file, tmp_path));
            self.srv.master.state = LinkState::Transfer;
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("+CONTINUE") {
            let new_id = rest.trim();
            if !new_id.is_empty() && !crate::util::is_replication_id(new_id) {
                return Err(format!(
                    "Master replied with a wrong +CONTINUE reply: '{line}'"
                ));
            }
            info!("Successful partial resynchronization with master.");
            if !new_id.is_empty() && new_id != self.srv.replid {
                // The master's history got a new id (it was promoted): keep
                // the old one as our second id, for our own replicas.
                info!("Master replication ID changed to {new_id}");
                self.srv.repl.replid2 = std::mem::replace(&mut self.srv.replid, new_id.to_string());
                self.srv.repl.second_offset = self.srv.repl.offset + 1;
                // Our replicas reconnect to learn the new id (as Redis).
                self.srv.disconnect_replicas();
            }
            info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
            crate::process::notify_systemd(
                "STATUS=MASTER <-> REPLICA sync: Partial Resynchronization accepted. Ready to accept connections in read-write mode.\n",
            );
            self.srv.master.state = LinkState::Continued;
            return Ok(());
        }
        if line.starts_with("-NOMASTERLINK") || line.starts_with("-LOADING") {
            return Err(format!(
                "Master is currently unable to PSYNC but should be in the future: {line}"
            ));
        }
        Err(format!("Unexpected reply to PSYNC from master: {line}"))
    }

    /// Bytes of the dump (after the `$` line) or of the line itself.
    fn receive_payload(&mut self, _h: &mut Handshake, bytes: &[u8]) -> Result<(), String> {
        let Some(t) = self.srv.master.transfer.as_mut() else {
            return Ok(());
        };
        // Replication traffic, as Redis counts it: the payload's header
        // line, the payload, and the stream that came with its last bytes.
        self.srv.stats.net_repl_input_bytes += bytes.len() as u64;
        self.srv.stats.total_net_input_bytes += bytes.len() as u64;
        t.receive(bytes)
    }

    /// After bytes of the transfer: start an RDMA fetch the master offered,
    /// note one it overtook with TCP, and finish a complete transfer.
    fn after_payload(&mut self, h: &mut Handshake) -> Result<Option<Vec<u8>>, String> {
        let Some(t) = self.srv.master.transfer.as_mut() else {
            return Ok(None);
        };
        if std::mem::take(&mut t.payload_begun) {
            let tmp = t.tmp_path.clone();
            if crate::state::master::streams_sync_load(&self.srv) {
                crate::state::master::begin_streamed_load(&mut self.srv, &tmp)?;
                if let Some(t) = self.srv.master.transfer.as_mut() {
                    t.streamed = true;
                }
            }
        }
        crate::state::master::streamed_load_progress(&mut self.srv);
        let Some(t) = self.srv.master.transfer.as_mut() else {
            return Ok(None);
        };
        if std::mem::take(&mut t.rdma_overtaken) {
            self.srv.repl.rdma_stats.failures += 1;
            warn!("MASTER <-> REPLICA sync: the master sends the dump over TCP; the RDMA fetch is dropped");
        }
        if let Some(offer) = t.rdma_offer.take() {
            if let Some(fd) = self.srv.rdma_fetch_start(offer, &mut h.outbuf) {
                super::register_readable(&self.poll, fd, RDMA_TOKEN, "RDMA completion channel");
            }
        }
        let t = self.srv.master.transfer.as_mut().expect("checked above");
        if std::mem::take(&mut t.rdma_ready) {
            self.srv.rdma_fetch_begin(&mut h.outbuf);
            // Completions may come before the loop polls the fd.
            self.rdma_pending = true;
        }
        h.flush_out()?;
        if let Some(t) = self.srv.master.transfer.as_mut().filter(|t| t.is_done()) {
            if let Some((bytes, usec)) = t.rdma_result.take() {
                let stats = &mut self.srv.repl.rdma_stats;
                stats.fullsyncs += 1;
                stats.last_bytes = bytes;
                stats.last_usec = usec;
            }
        }
        self.finish_transfer_if_done(h)
    }

    /// The RDMA fetch's completion fd fired (`event`), or a loop turn
    /// passed: handle completions, time, and what they lead to.
    pub(super) fn rdma_fetch_turn(&mut self, event: bool) {
        use crate::state::rdma_sync::FetchOutcome;
        let Some(mut h) = self.handshake.take() else {
            return;
        };
        let mut outcome = FetchOutcome::Running;
        if event || std::mem::take(&mut self.rdma_pending) {
            outcome = self.srv.rdma_fetch_poll(&mut h.outbuf);
        }
        if outcome == FetchOutcome::Running {
            outcome = self.srv.rdma_fetch_tick(&mut h.outbuf);
        }
        let next = match h.flush_out() {
            Err(e) => Err(e),
            Ok(()) if outcome == FetchOutcome::Done => match self.finish_transfer_if_done(&mut h) {
                Ok(Some(leftover)) => Ok(Next::Online(leftover)),
                Ok(None) => Ok(Next::Keep),
                Err(e) => Err(e),
            },
            Ok(()) => Ok(Next::Keep),
        };
        self.handshake_advanced(h, next);
    }

    /// The dump is complete: load it and make the link a client.
    fn finish_transfer_if_done(&mut self, _h: &mut Handshake) -> Result<Option<Vec<u8>>, String> {
        let done = self
            .srv
            .master
            .transfer
            .as_ref()
            .is_some_and(|t| t.is_done());
        if !done {
            return Ok(None);
        }
        let mut t = self.srv.master.transfer.take().expect("checked");
        let leftover = t.take_leftover();
        if let Err(e) = t.finish() {
            let _ = std::fs::remove_file(&t.tmp_path);
            return Err(e);
        }
        info!(
            "MASTER <-> REPLICA sync: received {} bytes of payload",
            t.received
        );
        if t.streamed {
            // The load, which followed the transfer, may finish.
            let (len, complete) = t.loadable();
            if let Some(load) = self.srv.loading.as_mut() {
                load.grown(len, complete, Some(len));
            }
            self.srv.master.state = LinkState::Loading;
        } else {
            crate::state::master::begin_synced_load(&mut self.srv, &t.tmp_path)?;
        }
        Ok(Some(leftover))
    }

    /// The loop finished loading the synchronised dump (or failed to): the
    /// link becomes the master client, or is dropped and tried again.
    pub(super) fn synced_load_done(&mut self, result: Result<(), String>) {
        let Some(h) = self.handshake.take() else {
            return;
        };
        match crate::state::master::finish_synced_load(&mut self.srv, result) {
            Ok(()) => {
                let mut h = h;
                let leftover = std::mem::take(&mut h.inbuf);
                self.master_link_online(h, leftover);
            }
            Err(e) => {
                warn!("{e}");
                self.abandon_handshake(h);
            }
        }
    }

    /// The handshake is over: the socket becomes the master client.
    fn master_link_online(&mut self, h: Handshake, leftover: Vec<u8>) {
        let mut conn = h.conn;
        let _ = self.poll.registry().deregister(conn.source());
        let id = self.srv.next_client_id;
        self.srv.next_client_id += 1;
        let tcp = conn.tcp().expect("a TCP link");
        let addr = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let laddr = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
        // Decrypted input a TLS stream holds raises no event: read it now.
        let read_now = !leftover.is_empty() || conn.is_tls();
        let mut st = ClientState::new(id, conn.fd(), addr, laddr, false, true, true);
        st.set_superuser();
        st.kind = crate::state::ClientKind::Master;
        // The stream goes on in the database it had selected: as the link
        // left it (a continued stream), or as the dump says (a full sync
        // from a replica, whose stream has no SELECT of its own).
        st.db = self.srv.master.stream_db;
        let idx = self.srv.vacant_slot();
        let reg = self
            .poll
            .registry()
            .register(conn.source(), Token(idx), Interest::READABLE);
        if let Err(e) = reg {
            warn!("Registering the master link: {e}");
            self.srv.master.link_lost();
            return;
        }
        let slot = self.srv.insert_client(st);
        if self.links.len() <= slot {
            self.links.resize_with(slot + 1, || None);
        }
        let mut query = crate::protocol::QueryBuffer::new();
        query.feed(&leftover);
        self.links[slot] = Some(Box::new(Link::new(conn, query)));
        self.srv.master.client_id = Some(id);
        self.srv.master.state = LinkState::Connected;
        self.srv.master.last_io = Instant::now();
        self.srv.master.down_since = None;
        // An ACK at once: a master that streamed the dump (diskless) starts
        // the command stream on the first one.
        let ack = self.srv.ack_bytes();
        if let Some(c) = self
            .srv
            .clients
            .get_mut(slot)
            .and_then(|c| c.as_deref_mut())
        {
            c.reply.raw(&ack);
            c.pending_write = true;
            self.srv.pending_writes.push((slot, id));
        }
        info!("MASTER <-> REPLICA sync: Finished with success");
        // The stream that came with the last bytes of the dump.
        if read_now {
            self.pending_reads.push(slot);
        }
    }
}

impl Handshake {
    /// Write what is queued, as far as the socket takes it (a connection
    /// still being made takes nothing yet).
    fn flush_out(&mut self) -> Result<(), String> {
        // TLS records from an earlier write go first.
        match self.conn.flush() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
            Err(e) => return Err(format!("Error condition on socket for SYNC: {e}")),
        }
        while !self.outbuf.is_empty() {
            match self.conn.write(&self.outbuf) {
                Ok(0) => return Err("Error condition on socket for SYNC: closed".into()),
                Ok(n) => {
                    self.outbuf.drain(..n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
                    ) =>
                {
                    break
                }
                Err(e) => return Err(format!("Error condition on socket for SYNC: {e}")),
            }
        }
        Ok(())
    }
}

enum Next {
    Keep,
    Online(Vec<u8>),
}
