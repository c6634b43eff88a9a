//! The event loop and the server-wide state.
//!
//! One thread owns everything: the listeners, every client, every database.
//! mio (epoll, edge-triggered) tells us which sockets are ready; for each
//! readable client we read, run every complete command in the buffer, and
//! write the replies straight away, so a request/response costs one read and
//! one write. A client socket is registered for reads only; interest in
//! writability is added just while a reply could not be written in full (the
//! socket buffer is full) and dropped once it drains, so ACKs of a healthy
//! connection never wake the loop. The cron (at `hz`) runs active expiry,
//! idle timeouts, incremental rehashing and statistics.

mod busy;
pub mod client;
mod cron;
mod replica;
pub mod uring;

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use tracing::{debug, error, info, warn};

use crate::commands;
use crate::config::Config;
use crate::net::{bind_tcp_listeners, is_loopback_peer, set_keepalive};
use crate::protocol::ParseLimits;
use crate::state::acl::DEFAULT_USER;
use crate::state::replication::ReplicaPhase;
use crate::state::{ClientKind, ClientState, Server, ShutdownFlags, ShutdownWait};
pub use client::{Conn, Link};
use uring::{Cqe, Op, UringNet};

/// Tokens at the top of the range are listeners and signals; clients use
/// their slab index.
const SIGNAL_TOKEN: Token = Token(usize::MAX - 1);
/// The AOF fsync thread's completion eventfd.
const AOF_TOKEN: Token = Token(usize::MAX - 2);
/// The AOF io_uring's completion eventfd.
const AOF_URING_TOKEN: Token = Token(usize::MAX - 3);
/// The child's pipe of a diskless transfer (the bytes are passed on before
/// the loop sleeps; the event only wakes it).
const RDB_PIPE_TOKEN: Token = Token(usize::MAX - 5);
const LISTENER_TOKEN_BASE: usize = usize::MAX - 64;
/// How soon accepting is tried again after it stopped at an error that left
/// the connection queued (out of file descriptors, say).
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);
/// Reads of one client per loop turn before others get their turn.
const MAX_READS_PER_TURN: usize = 16;
/// Bytes read from one client per loop turn: a 500 MB value arrives over
/// hundreds of turns, each a few milliseconds of copying and page faults,
/// instead of stalling everybody else while it is read.
const MAX_READ_BYTES_PER_TURN: usize = 1 << 20;
/// A send up to this size is taken whole by any socket that is not
/// backed up (io_uring: its completion needs no follow-up at once).
const SEND_SURELY_TAKEN: usize = 8 * 1024;
/// Commands of a pipeline whose keys are prefetched together.
const PREFETCH_WINDOW: usize = 16;
/// Reads without a big argument after which a client whose input is read
/// directly for its big arguments goes back to its io_uring receive.
const BIG_INPUT_QUIET_READS: u32 = 64;
/// Argument slices the reused argv keeps room for between commands.
const ARGV_SCRATCH_KEEP: usize = 1024;
/// Pieces handed to one writev (replies holding shared values).
const IOVECS_PER_WRITE: usize = 64;
/// Output a client's commands may add in one turn of the loop while its
/// socket does not take it: then the client yields to the others and goes
/// on next turn. It is never stopped for good, as Redis never stops
/// reading a client: one that writes a whole pipeline before it reads
/// would otherwise wait for us forever. What it holds is bounded by the
/// output limits and `maxmemory-clients`, as in Redis. Big values shared
/// with the keyspace count only their slot ([`ClientState::output_held`]),
/// so fifty GETs of a 100 MB value cost fifty references, not 5 GB.
const OUTPUT_BYTES_PER_TURN: usize = 256 * 1024;
/// Output a client that has not authenticated may hold beyond its reply
/// buffer before it is closed.
const UNAUTHENTICATED_OUTPUT: usize = 1024;

/// A client while the loop serves it: its connection and its state, both
/// taken out of their slots (so handlers can reach every other client
/// through the state's slab).
struct Client {
    link: Box<Link>,
    st: Box<ClientState>,
}

impl Client {
    /// Record for CLIENT LIST what the query buffer holds and has free.
    fn note_query_buffer(&mut self) {
        // As Redis's `qbuf`: the whole buffer, the running command included
        // (it is trimmed after the command, not before).
        self.st.qbuf_len = self.link.query.shown_len();
        self.st.qbuf_free = self.link.query.capacity().saturating_sub(self.st.qbuf_len);
    }
}

enum Listener {
    Tcp(TcpListener),
    /// On `tls-port`: its clients speak TLS.
    Tls(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp(l) | Listener::Tls(l) => l,
            Listener::Unix(l) => l,
        }
    }
}

/// The event loop: owns the poller, the listeners and the [`Server`].
pub struct EventLoop {
    poll: Poll,
    listeners: Vec<Listener>,
    signals: Signals,
    /// A signal asked for the shutdown under way (a second SIGINT then
    /// exits at once, as Redis's "You insist...").
    signalled: bool,
    /// systemd was told the server is ready (once the dataset is loaded).
    ready_announced: bool,
    pub srv: Server,
    /// Connections, under the same slot as their client's state.
    links: Vec<Option<Box<Link>>>,
    /// Clients with input left unread after their turn.
    pending_reads: Vec<usize>,
    argv_scratch: Vec<&'static [u8]>,
    /// The AOF fsync eventfd is registered.
    aof_watched: bool,
    /// The AOF io_uring eventfd is registered.
    aof_uring_watched: bool,
    /// The link to our master while it is not yet a client.
    handshake: Option<replica::Handshake>,
    /// An RDMA fetch just started: poll its completions on the next turn
    /// even without an event (some may predate the registration).
    rdma_pending: bool,
    /// The diskless transfer pipe registered for wake-ups (its descriptor).
    /// The diskless pipe registered in the poll: its fd and generation.
    rdb_pipe_watched: Option<(std::os::fd::RawFd, u64)>,
    /// The io_uring engine serving plain client sockets (`io-engine`);
    /// none: epoll serves them.
    uring: Option<UringNet>,
    /// Send completions of a turn, reused.
    cqes: Vec<Cqe>,
    /// Clients whose turn's output goes out as io_uring sends.
    send_batch: Vec<(usize, u64)>,
    /// The lists of clients a turn walks (`pending_writes`, `send_batch`)
    /// are walked from here, so that their allocation is reused instead
    /// of grown again every turn.
    walked: Vec<(usize, u64)>,
}

/// A walked list keeps at most this many entries' room between turns.
const WALKED_KEEP: usize = 1024;

impl EventLoop {
    /// Bind the listeners named by the configuration.
    pub fn bind(mut config: Config) -> io::Result<EventLoop> {
        // Enough descriptors for maxclients, or fewer clients.
        config.maxclients =
            crate::process::adjust_open_files_limit(config.maxclients).map_err(io::Error::other)?;
        info!(
            "Clients allowed at once (maxclients): {}",
            config.maxclients
        );
        let poll = Poll::new()?;
        let mut listeners: Vec<Listener> = bind_tcp_listeners(&config, &[])?
            .into_iter()
            .map(Listener::Tcp)
            .collect();
        // TLS: its certificates load now, or the server does not start.
        let tls = match config.tls.in_use() {
            true => Some(crate::tls::configure(&config.tls).map_err(|e| {
                error!("{e}");
                io::Error::other("Failed to configure TLS. Check logs for more info.")
            })?),
            false => None,
        };
        listeners.extend(
            crate::net::bind_tls_listeners(&config, &[])?
                .into_iter()
                .map(Listener::Tls),
        );
        if !config.unixsocket.is_empty() {
            let _ = std::fs::remove_file(&config.unixsocket);
            let l = UnixListener::bind(&config.unixsocket)?;
            if config.unixsocketperm != 0 {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(
                    &config.unixsocket,
                    std::fs::Permissions::from_mode(config.unixsocketperm),
                )?;
            }
            info!("Listening on unix socket {}", config.unixsocket);
            listeners.push(Listener::Unix(l));
        }
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no listener: set port or unixsocket",
            ));
        }
        for (i, l) in listeners.iter_mut().enumerate() {
            let token = Token(LISTENER_TOKEN_BASE + i);
            poll.registry()
                .register(l.source(), token, Interest::READABLE)?;
        }
        let mut signals = Signals::new([SIGTERM, SIGINT])?;
        poll.registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        let uring = match config.io_engine {
            crate::config::IoEngine::IoUring => match UringNet::new(poll.as_raw_fd()) {
                Ok(u) => {
                    info!("Clients are served through io_uring");
                    Some(u)
                }
                Err(e) => {
                    warn!("io_uring is not available ({e}): clients are served through epoll");
                    None
                }
            },
            crate::config::IoEngine::Epoll => None,
        };
        let mut srv = Server::new(config);
        srv.tls = tls;
        if uring.is_some() {
            srv.io_engine = crate::config::IoEngine::IoUring;
        }
        // Users from `user` lines and the ACL file, once the command table
        // exists; a bad rule stops the start, as in Redis.
        if let Err(e) = commands::acl::load_users_at_startup(&mut srv) {
            return Err(io::Error::other(format!(
                "Aborting Redis startup because of ACL errors: {e}"
            )));
        }
        for sig in [SIGTERM, SIGINT] {
            signal_hook::flag::register(sig, srv.stop_signal.clone())?;
        }
        crate::process::install_shutdown_signal_handler(crate::persistence::rdb::temp_name(
            std::process::id() as i32,
        ))?;
        // RDMA is found at start, once: its absence is said once and
        // turns RDMA full syncs off (REPLCONF capa rdma is not sent, no
        // dump is offered).
        match crate::rdma::open_device() {
            Ok(dev) => {
                info!(
                    "RDMA device {} opened: full syncs go over RDMA with peers that can",
                    dev.name()
                );
                srv.repl.rdma = Some(crate::rdma::DeviceHandle(dev));
            }
            Err(e) => info!("RDMA full sync off: {e}"),
        }
        let mut event_loop = EventLoop {
            poll,
            listeners,
            signals,
            signalled: false,
            ready_announced: false,
            srv,
            links: Vec::new(),
            pending_reads: Vec::new(),
            argv_scratch: Vec::new(),
            aof_watched: false,
            aof_uring_watched: false,
            handshake: None,
            rdma_pending: false,
            rdb_pipe_watched: None,
            uring,
            cqes: Vec::new(),
            send_batch: Vec::new(),
            walked: Vec::new(),
        };
        event_loop.note_tcp_listeners();
        Ok(event_loop)
    }

    /// Replace the TCP listeners of one kind, plain or TLS (CONFIG SET
    /// port, tls-port or bind): the new ones were bound by the command, so
    /// nothing here can fail but registration, which is logged. The other
    /// listeners stay.
    fn swap_tcp_listeners(&mut self, tcp: Vec<TcpListener>, tls: bool) {
        let old = std::mem::take(&mut self.listeners);
        let mut listeners: Vec<Listener> = Vec::new();
        for mut l in old {
            let _ = self.poll.registry().deregister(l.source());
            match l {
                Listener::Tcp(_) if !tls => {}
                Listener::Tls(_) if tls => {}
                l => listeners.push(l),
            }
        }
        listeners.extend(tcp.into_iter().map(match tls {
            true => Listener::Tls,
            false => Listener::Tcp,
        }));
        for (i, l) in listeners.iter_mut().enumerate() {
            let token = Token(LISTENER_TOKEN_BASE + i);
            let res = self
                .poll
                .registry()
                .register(l.source(), token, Interest::READABLE);
            if let Err(e) = res {
                warn!("Registering a listener after CONFIG SET port: {e}");
            }
        }
        self.listeners = listeners;
        self.note_tcp_listeners();
    }

    /// Tell the state which TCP listeners are open, at which addresses.
    fn note_tcp_listeners(&mut self) {
        use std::os::fd::AsRawFd;
        let (mut tcp, mut tls) = (Vec::new(), Vec::new());
        for l in &self.listeners {
            let (list, l) = match l {
                Listener::Tcp(l) => (&mut tcp, l),
                Listener::Tls(l) => (&mut tls, l),
                Listener::Unix(_) => continue,
            };
            if let Ok(at) = l.local_addr() {
                list.push((at, l.as_raw_fd()));
            }
        }
        self.srv.tcp_listeners = tcp;
        self.srv.tls_listeners = tls;
    }

    /// The TCP port actually bound (useful with `--port 0` in tests).
    pub fn local_port(&self) -> Option<u16> {
        self.listeners.iter().find_map(|l| match l {
            Listener::Tcp(l) => l.local_addr().ok().map(|a| a.port()),
            _ => None,
        })
    }

    /// Serve until SHUTDOWN or a signal.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now();
        self.srv.startup_memory = self.srv.used_memory();
        loop {
            let now = Instant::now();
            if now >= next_cron {
                self.cron();
                let period = Duration::from_millis(1000 / self.srv.hz.max(1) as u64);
                next_cron = now + period;
            }
            self.close_marked();
            if self.srv.accept_retry_at.is_some_and(|t| now >= t) {
                self.srv.accept_retry_at = None;
                for li in 0..self.listeners.len() {
                    self.accept(li);
                }
            }
            if let Some(tcp) = self.srv.new_tcp_listeners.take() {
                self.swap_tcp_listeners(tcp, false);
            }
            if let Some(tls) = self.srv.new_tls_listeners.take() {
                self.swap_tcp_listeners(tls, true);
            }
            if let Some(flags) = self.srv.shutdown.take() {
                if self.prepare_shutdown(flags) {
                    return Ok(());
                }
            }
            if let Some(wait) = self.srv.shutdown_wait {
                let done_waiting = Instant::now() >= wait.deadline || self.srv.replicas_caught_up();
                if done_waiting && self.finish_shutdown(wait.flags) {
                    return Ok(());
                }
            }
            // A signal's shutdown that was aborted or failed is over: the
            // next SIGINT starts another instead of exiting at once.
            if self.signalled
                && self.srv.shutdown.is_none()
                && self.srv.shutdown_asap.is_none()
                && self.srv.shutdown_wait.is_none()
            {
                self.signalled = false;
                crate::process::shutdown_signal_over();
            }
            if self.srv.loading.is_some() {
                // A full sync's dump: its end (or failure) is the link's.
                let synced = self.srv.master.loads_sync();
                let dump = self.srv.loading.as_ref().is_some_and(|l| !l.aof);
                match crate::state::snapshot::continue_loading(
                    &mut self.srv,
                    commands::replay_aof_command,
                ) {
                    Ok(true) => {}
                    Ok(false) if synced => self.synced_load_done(Ok(())),
                    Ok(false) => {
                        if let Err(e) = crate::state::aof::open_after_load(&mut self.srv) {
                            return Err(io::Error::other(e));
                        }
                    }
                    Err(e) if synced => {
                        self.srv.loading = None;
                        self.synced_load_done(Err(e));
                    }
                    Err(e) if dump => {
                        // As Redis's rdbReportError for a file being loaded.
                        error!("{e}");
                        eprintln!("{e}");
                        warn!("Terminating server after rdb file reading failure.");
                        std::process::exit(1);
                    }
                    Err(e) => return Err(io::Error::other(e)),
                }
            }
            if !self.ready_announced && self.srv.loading.is_none() {
                self.announce_ready();
            }
            self.replication_turn();
            commands::blocking::resume_postponed(&mut self.srv);
            commands::blocking::expire_blocked(&mut self.srv);
            if std::mem::take(&mut self.srv.repl.acks_arrived) {
                commands::blocking::serve_waiting(&mut self.srv);
            }
            self.resume_unblocked();
            self.before_sleep();
            let mut wake = next_cron;
            if let Some(&(deadline, _)) = self.srv.block_deadlines.first() {
                wake = wake.min(deadline);
            }
            if let Some(wait) = self.srv.shutdown_wait {
                wake = wake.min(wait.deadline);
            }
            if let Some(retry) = self.srv.accept_retry_at {
                wake = wake.min(retry);
            }
            // Wake when a pause that holds commands back runs out.
            if let Some(pause) = self
                .srv
                .client_pause
                .filter(|_| !self.srv.postponed.is_empty())
            {
                let left_ms = (pause.end_ms - crate::util::unix_time_ms() + 1).max(0) as u64;
                wake = wake.min(Instant::now() + Duration::from_millis(left_ms));
            }
            let timeout = if self.pending_reads.is_empty()
                && self.srv.shutdown.is_none()
                && self.srv.pending_writes.is_empty()
                && self.srv.unblocked.is_empty()
                && !self.srv.evictor.pending
                && self.srv.loading.as_ref().is_none_or(|l| l.waiting())
            {
                wake.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            if self.uring.is_some() {
                self.uring_turn(&mut events, timeout)?;
                continue;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            self.srv.update_time();
            self.resume_unblocked();
            for idx in std::mem::take(&mut self.pending_reads) {
                self.handle_client(idx, true, false, false);
            }
            self.dispatch(&events);
        }
    }

    /// Serve what mio reported.
    fn dispatch(&mut self, events: &Events) {
        for event in events.iter() {
            match event.token() {
                SIGNAL_TOKEN => self.signals_received(),
                AOF_TOKEN => self.srv.aof_fsync_done(),
                AOF_URING_TOKEN => self.srv.aof_uring_done(),
                replica::MASTER_TOKEN => self.master_link_event(),
                replica::RDMA_TOKEN => self.rdma_fetch_turn(true),
                RDB_PIPE_TOKEN => {}
                Token(t) if t >= LISTENER_TOKEN_BASE => self.accept(t - LISTENER_TOKEN_BASE),
                Token(idx) => self.handle_client(
                    idx,
                    event.is_readable() || event.is_read_closed() || event.is_error(),
                    event.is_writable(),
                    event.is_read_closed(),
                ),
            }
        }
    }

    /// The io_uring engine's half of a loop turn: submit the turn's sends
    /// and wait (one `io_uring_enter`), then handle the completions: the
    /// sends' first (no reply buffer is touched before its send is done),
    /// then the clients left to run from the last turn, then what arrived.
    fn uring_turn(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        let uring = self.uring.as_mut().expect("the io_uring engine");
        uring.wait(timeout)?;
        uring.collect();
        let mut sends = std::mem::take(&mut self.cqes);
        uring.take_sends(&mut sends);
        self.srv.update_time();
        for c in &sends {
            self.uring_sent(c);
        }
        sends.clear();
        self.cqes = sends;
        self.resume_unblocked();
        for idx in std::mem::take(&mut self.pending_reads) {
            self.handle_client(idx, true, false, false);
        }
        // One at a time: a busy script may take other clients' input out
        // of the queue meanwhile (see busy.rs).
        let mut ahead = 0;
        loop {
            if ahead == 0 {
                self.prefetch_received();
                ahead = PREFETCH_WINDOW;
            }
            ahead -= 1;
            let Some(c) = self.uring.as_mut().and_then(|u| u.queue.pop_front()) else {
                break;
            };
            let c = &c;
            match c.op() {
                Some(Op::Recv) => self.uring_received(c),
                Some(Op::PollOut) => {
                    if let Some(link) = self.uring_link(c) {
                        link.write_interest = false;
                        self.handle_client(c.slot(), false, true, false);
                    }
                }
                Some(Op::Epoll) => {
                    if !c.more() {
                        let fd = self.poll.as_raw_fd();
                        if let Some(u) = self.uring.as_mut() {
                            u.arm_epoll(fd);
                        }
                    }
                    // Everything mio has, without waiting (the ring is
                    // told of the epoll descriptor's next wake-up only).
                    loop {
                        match self.poll.poll(events, Some(Duration::ZERO)) {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(e),
                        }
                        self.dispatch(events);
                        if events.iter().count() < events.capacity() {
                            break;
                        }
                    }
                }
                Some(Op::Send) => self.uring_sent(c),
                Some(Op::PollIn) => self.uring_poll_in(c),
                None => {}
            }
        }
        Ok(())
    }

    /// The link a client operation's completion is for, if that client is
    /// still in its slot.
    fn uring_link(&mut self, c: &Cqe) -> Option<&mut Link> {
        live_link(&self.srv, &mut self.links, c)
    }

    /// What a client sent arrived: into its query buffer, then run.
    fn uring_received(&mut self, c: &Cqe) {
        let uring = self.uring.as_mut().expect("the io_uring engine");
        let slot = c.slot();
        let Some(link) = live_link(&self.srv, &mut self.links, c) else {
            // A completion for a client that is gone.
            uring.discard(c);
            return;
        };
        match absorb_received(link, uring, c, &mut self.srv.stats) {
            Received::Data | Received::End => {
                let now = self.srv.interaction_time();
                if let Some(st) = self.srv.clients[slot].as_mut() {
                    st.last_interaction = now;
                }
                self.handle_client(slot, true, false, false);
            }
            Received::Nothing => {}
            Received::Failed(e) => {
                debug!(client = slot, "Reading from client: {e}");
                self.close_client(slot);
            }
        }
    }

    /// A client whose input is read directly has something to read.
    fn uring_poll_in(&mut self, c: &Cqe) {
        let Some(link) = self.uring_link(c) else {
            return;
        };
        if !c.more() {
            link.poll_in_armed = false;
        }
        // Cancelled: the client is back with its receive.
        if !link.big_input {
            return;
        }
        if !link.poll_in_armed {
            link.poll_in_armed = true;
            let fd = link.conn.fd();
            if let Some(u) = self.uring.as_mut() {
                u.rearm_poll_in(fd, c);
            }
        }
        self.handle_client(c.slot(), true, false, false);
    }

    /// A send of the turn's output completed.
    fn uring_sent(&mut self, c: &Cqe) {
        if let Some(u) = self.uring.as_mut() {
            u.sends_in_flight = u.sends_in_flight.saturating_sub(1);
        }
        if self.uring_link(c).is_none() {
            return;
        }
        let idx = c.slot();
        let Some(mut client) = self.take_client(idx) else {
            return;
        };
        client.link.send_inflight = false;
        let mut close = false;
        if c.result > 0 {
            let n = c.result as usize;
            client.st.sent += n;
            self.srv.stats.total_writes_processed += 1;
            self.srv.stats.total_net_output_bytes += n as u64;
            if client.st.kind == ClientKind::Replica {
                self.srv.stats.net_repl_output_bytes += n as u64;
            }
        } else if c.result != -libc::EAGAIN {
            debug!(client = %client.st.addr, "Writing to client: {}", io::Error::from_raw_os_error(-c.result));
            close = true;
        }
        // The rest (if the socket did not take it all), a dump file, or
        // the reply buffer's reset.
        if !close {
            close |= !self.write_client(idx, &mut client);
            self.srv.note_held(&mut client.st);
        }
        close |= client.st.close_asap;
        self.put_or_close(idx, client, close);
    }

    fn accept(&mut self, li: usize) {
        accept_from(
            &self.listeners[li],
            &self.poll,
            self.uring.as_mut(),
            &mut self.links,
            &mut self.srv,
        );
    }

    /// Read, execute and reply for one client.
    fn handle_client(&mut self, idx: usize, readable: bool, writable: bool, read_closed: bool) {
        let Some(mut client) = self.take_client(idx) else {
            return;
        };
        let mut close = false;
        if writable && (client.st.wants_write() || client.link.conn.pending()) {
            close |= !self.write_client(idx, &mut client);
        }
        // A FIN reported once must be remembered: the read that sees it
        // may come turns later (read budget, a yield), with no new event.
        client.link.peer_closed |= read_closed;
        let mut read_ok = true;
        if readable && !close && !client.st.close_after_reply {
            let peer_closed = client.link.peer_closed;
            read_ok = self.read_client(idx, &mut client, peer_closed);
        }
        close |= !read_ok || client.st.close_asap;
        // A TLS handshake (or the reply to a key update) may wait on a
        // full socket: the writable event sends it.
        if !close && client.link.conn.pending() {
            close |= !self.wait_writable(idx, &mut client);
        }
        if client.st.wants_write() {
            if !close {
                // Written before the loop sleeps, after the feed has gone
                // to its consumers (see `before_sleep`).
                self.queue_write(&mut client);
            } else if !client.st.close_asap {
                // Best effort for a connection that is going away.
                let _ = self.write_client(idx, &mut client);
            }
        }
        self.put_or_close(idx, client, close);
    }

    /// Queue a client that has output for `before_sleep`.
    fn queue_write(&mut self, client: &mut Client) {
        if !client.st.pending_write {
            client.st.pending_write = true;
            self.srv.pending_writes.push((client.st.slot, client.st.id));
        }
    }

    /// What the loop does before it sleeps (Redis's beforeSleep), in this
    /// order: the iteration's writes go to the propagation feed's consumers
    /// (`Server::flush_feed`: the AOF buffer and the replica streams attach
    /// there), then every client with pending output is written. So a reply
    /// never reaches a client before the write it reflects has been handed
    /// to the AOF and the replicas; a reply that must also wait for the
    /// AOF's write or fsync to complete is held between these two steps.
    fn before_sleep(&mut self) {
        // With buffered input to run, an `always` fsync goes to the thread
        // and the loop goes on; otherwise it is done here.
        self.srv.aof.inline_fsync = self.pending_reads.is_empty() && self.srv.unblocked.is_empty();
        // Eviction that hit its time limit goes on, a slice per turn, the
        // loop not sleeping meanwhile (Redis's evictionTimeProc); it stops
        // when done, when nothing is left to evict, or when evicting is not
        // allowed now (`perform_evictions` keeps `pending`).
        if self.srv.evictor.pending {
            self.srv.perform_evictions();
        }
        self.srv.tracking_broadcast();
        // A failover waiting for its replica acts as soon as it can.
        self.srv.failover_cron();
        self.srv.flush_feed();
        self.srv.sync_aof_always_behind();
        self.srv.request_acks();
        self.srv.refill_bulk();
        self.watch_rdb_pipe();
        self.watch_aof_completions();
        let appended = self.srv.aof.appended;
        let durable = self.srv.aof_durable();
        let spare = std::mem::take(&mut self.walked);
        let mut pending = std::mem::replace(&mut self.srv.pending_writes, spare);
        for (idx, id) in pending.drain(..) {
            let Some(mut client) = self.take_client_if(idx, id) else {
                continue;
            };
            client.st.pending_write = false;
            let mut close = client.st.close_asap;
            if !close && (client.st.wants_write() || client.link.conn.pending()) {
                // Under appendfsync always, what this client was sent this
                // turn waits for the fsync of this turn's writes.
                client.st.hold_until(appended, durable);
                if client.link.uring && !client.link.send_inflight {
                    // Sent with every other client's, below.
                    self.send_batch.push((idx, id));
                    self.put_client(idx, client);
                    continue;
                }
                close |= !self.write_client(idx, &mut client);
                self.srv.note_held(&mut client.st);
            }
            self.put_or_close(idx, client, close);
        }
        self.keep_walked(pending);
        // Last, as Redis: what clients hold once this turn's output is
        // written (invalidations and replies included) decides who goes.
        // An evicted client goes now, before anyone can see it in CLIENT
        // LIST or send it more (Redis frees it at once).
        if self.srv.config.maxmemory_clients != 0 {
            self.srv.evict_clients();
            self.close_marked();
        }
        self.queue_sends(durable);
        // What replicas were sent past, or held when they went, is freed
        // (beyond the backlog's size).
        if std::mem::take(&mut self.srv.repl.trim_wanted) {
            self.srv
                .trim_replication_buffer(crate::state::replication::TRIM_BLOCKS_PER_CALL);
        }
    }

    /// io_uring: the turn's output of every client in the batch goes out as
    /// one send each, submitted together when the loop waits. Output the
    /// send cannot take from the reply buffer alone (values shared with the
    /// keyspace, a dump file) is written as with epoll.
    fn queue_sends(&mut self, durable: u64) {
        let spare = std::mem::take(&mut self.walked);
        let mut batch = std::mem::replace(&mut self.send_batch, spare);
        for (idx, id) in batch.drain(..) {
            let Some(mut client) = self.take_client_if(idx, id) else {
                continue;
            };
            let st = &mut client.st;
            let limit = st.write_limit(durable);
            let simple = st.reply.shared_len() == 0 && st.sent < limit;
            if simple {
                note_output(st, &mut self.srv.recent_max_output);
                let uring = self.uring.as_mut().expect("the io_uring engine");
                // What a send may leave to do at once: the rest of a reply
                // the socket may not take (a poll to arm), a close after
                // the reply, a replica's next phase.
                uring.sends_urgent |= limit - st.sent > SEND_SURELY_TAKEN
                    || st.close_after_reply
                    || st.close_asap
                    || st.repl.is_some();
                // SAFETY: the reply buffer is not touched until this send's
                // completion is handled (`uring_sent`, first thing after
                // the wait; `send_inflight` guards every write meanwhile).
                unsafe {
                    uring.send(
                        client.link.conn.fd(),
                        &st.reply.buf[st.sent..limit],
                        idx,
                        id,
                    )
                };
                client.link.send_inflight = true;
                self.put_client(idx, client);
                continue;
            }
            let mut close = !self.write_client(idx, &mut client);
            self.srv.note_held(&mut client.st);
            close |= client.st.close_asap;
            self.put_or_close(idx, client, close);
        }
        self.keep_walked(batch);
    }

    /// A walked list, drained, becomes the spare that takes its place in
    /// the next walk (what is queued meanwhile goes into the spare).
    fn keep_walked(&mut self, mut drained: Vec<(usize, u64)>) {
        drained.clear();
        drained.shrink_to(WALKED_KEEP);
        self.walked = drained;
    }

    /// Write the replies of clients that were just unblocked and run the
    /// commands they sent while blocked.
    fn resume_unblocked(&mut self) {
        while !self.srv.unblocked.is_empty() {
            for (idx, id) in std::mem::take(&mut self.srv.unblocked) {
                let Some(mut client) = self.take_client_if(idx, id) else {
                    continue;
                };
                let mut close = false;
                if client.st.blocked.is_none() && client.link.query.unparsed() > 0 {
                    close |= self.run_buffered(idx, &mut client).is_none();
                }
                if client.st.pending_output() > 0 {
                    self.queue_write(&mut client);
                }
                close |= client.st.close_asap;
                self.put_or_close(idx, client, close);
            }
        }
    }

    /// Read what the socket has and execute the complete commands. Returns
    /// false when the client must be closed.
    fn read_client(&mut self, idx: usize, client: &mut Client, read_closed: bool) -> bool {
        // io_uring: a send of this client's output is still in flight: its
        // reply buffer waits (the completion runs it again).
        if client.link.send_inflight {
            if !self.pending_reads.contains(&idx) {
                self.pending_reads.push(idx);
            }
            return true;
        }
        if client.link.ring_receives() {
            return self.run_received(idx, client);
        }
        // Input left over from an earlier turn (or a big argument a busy
        // script's pump completed) runs before anything new is read.
        if client.link.query.has_input() {
            match self.run_buffered(idx, client) {
                None => return false,
                Some(false) => return true,
                Some(true) => {}
            }
        }
        let mut turn_bytes = 0;
        for _ in 0..MAX_READS_PER_TURN {
            if turn_bytes >= MAX_READ_BYTES_PER_TURN {
                break;
            }
            let link = &mut client.link;
            let (n, want) = match link.query.read_with(|buf| link.conn.read_uninit(buf)) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.big_input_back_to_receive(idx, client);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    debug!(client = %client.st.addr, "Reading from client: {e}");
                    return false;
                }
            };
            if n == 0 {
                return self.finish_after_eof(idx, client);
            }
            self.srv.stats.total_reads_processed += 1;
            self.srv.stats.total_net_input_bytes += n as u64;
            if client.st.kind == ClientKind::Master {
                self.srv.stats.net_repl_input_bytes += n as u64;
            }
            turn_bytes += n;
            client.st.last_interaction = self.srv.interaction_time();
            match self.run_buffered(idx, client) {
                None => return false,
                Some(false) => return true,
                Some(true) => {}
            }
            if client.link.query.len() as u64 > self.srv.config.client_query_buffer_limit {
                warn!(client = %client.st.addr, "Closing client that reached max query buffer length");
                return false;
            }
            if client.link.big_input {
                client.link.quiet_reads = match client.link.query.take_big_seen() {
                    true => 0,
                    false => client.link.quiet_reads.saturating_add(1),
                };
            }
            // A short read means the socket is drained; with edge-triggered
            // polling a new edge will come with new data, so we spare the
            // read() that would only return EAGAIN. A pending FIN is the
            // exception: it will not raise another edge.
            if n < want && !read_closed {
                self.big_input_back_to_receive(idx, client);
                return true;
            }
        }
        // Fairness: others get their turn, this client continues next turn
        // (once: an event for it in the same turn must not queue it twice).
        if !self.pending_reads.contains(&idx) {
            self.pending_reads.push(idx);
        }
        true
    }

    /// io_uring: what arrived is in the query buffer already; run it. At
    /// the end of the stream, as after the last read (`finish_after_eof`).
    fn run_received(&mut self, idx: usize, client: &mut Client) -> bool {
        if client.link.peer_closed {
            return self.finish_after_eof(idx, client);
        }
        // (Bytes of a big argument go straight to its own buffer: the
        // parser is run whatever `unparsed` says.)
        if self.run_buffered(idx, client).is_none() {
            return false;
        }
        if client.link.query.len() as u64 > self.srv.config.client_query_buffer_limit {
            warn!(client = %client.st.addr, "Closing client that reached max query buffer length");
            return false;
        }
        if client.link.query.take_big_seen() {
            return self.read_big_input_directly(idx, client);
        }
        true
    }

    /// io_uring: a client that sends big arguments has its input read
    /// directly, as with epoll, straight from its socket into each
    /// argument's own buffer: through the ring every byte of it would be
    /// copied twice (into a ring buffer by the kernel, then out of it into
    /// the argument's), and for a 100 KB value that second copy is a
    /// quarter of the server's time. Its multishot receive is cancelled,
    /// what the receive took before that reaches the query buffer first
    /// (in order), and a multishot `POLLIN` poll in the ring says when to
    /// read (its replies still go out with the turn's sends). It goes back
    /// to the receive after [`BIG_INPUT_QUIET_READS`] reads without a big
    /// argument (`big_input_back_to_receive`). Returns false when it must
    /// close.
    fn read_big_input_directly(&mut self, idx: usize, client: &mut Client) -> bool {
        let link = &mut client.link;
        // Not while its end is in the ring's hands, nor while the poll of
        // its last time is still ending: tried again with its next big
        // argument.
        if link.peer_closed || link.poll_in_armed {
            return true;
        }
        let id = client.st.id;
        let uring = self.uring.as_mut().expect("the io_uring engine");
        if let Err(e) = uring.cancel_recv_now(idx, id) {
            debug!(client = %client.st.addr, "Cancelling a receive: {e}");
            return true;
        }
        // Nothing arms the receive again from here (`absorb_received`);
        // `recv_armed` stays set until its last completion (`ECANCELED`)
        // has been handled.
        link.big_input = true;
        link.quiet_reads = 0;
        uring.collect();
        let mut failed = None;
        for c in uring.take_received(idx, id) {
            // After a failure, the rest only give their buffers back.
            if failed.is_some() {
                uring.discard(&c);
            } else if let Received::Failed(e) =
                absorb_received(link, uring, &c, &mut self.srv.stats)
            {
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            debug!(client = %client.st.addr, "Reading from client: {e}");
            return false;
        }
        link.poll_in_armed = true;
        uring.poll_in(link.conn.fd(), idx, id);
        // What was taken in runs next turn, before the socket is read.
        if !self.pending_reads.contains(&idx) {
            self.pending_reads.push(idx);
        }
        true
    }

    /// A client whose input is read directly for its big arguments goes
    /// back to its receive once it has sent none for
    /// [`BIG_INPUT_QUIET_READS`] reads, between reads that drained its
    /// socket (what comes next, the new receive takes), once the cancelled
    /// receive has ended.
    fn big_input_back_to_receive(&mut self, idx: usize, client: &mut Client) {
        let link = &mut client.link;
        if !link.big_input
            || link.quiet_reads < BIG_INPUT_QUIET_READS
            || link.recv_armed
            || link.peer_closed
            || link.query.reading_big()
        {
            return;
        }
        let Some(uring) = self.uring.as_mut() else {
            return;
        };
        // (A readiness the poll reports meanwhile runs the client's input
        // as any other completion for it does: nothing is read from it.)
        uring.cancel_poll_in(idx, client.st.id);
        link.big_input = false;
        link.recv_armed = true;
        uring.arm_recv(link.conn.fd(), idx, client.st.id);
    }

    /// The peer shut down its side: it has sent all it will. Its buffered
    /// commands still run and their replies are still written (a pipeline
    /// sent with `nc -N` gets every answer), then the connection closes.
    /// Returns false when it must close right away.
    fn finish_after_eof(&mut self, idx: usize, client: &mut Client) -> bool {
        match self.run_buffered(idx, client) {
            None => false,
            // Yielded: the end of the stream is seen again next turn.
            Some(_) if client.link.yielded => true,
            Some(_) => {
                client.st.close_after_reply = true;
                true
            }
        }
    }

    /// Run the buffered commands, handing replies to the socket whenever
    /// they pass [`OUTPUT_BYTES_PER_TURN`]. `Some(true)`: go on reading;
    /// `Some(false)`: stop reading for now (a turn's worth of output is
    /// stuck and the client yields to the others until the next turn, or it
    /// accepts no more input); `None`: close it.
    fn run_buffered(&mut self, idx: usize, client: &mut Client) -> Option<bool> {
        client.link.yielded = false;
        // What a client that does not read may add in one turn: others are
        // served between its turns, and it is never stopped for good (a
        // client that writes its whole pipeline before reading would wait
        // for us forever). Its output grows as in Redis, up to the output
        // limits and `maxmemory-clients`.
        let turn_limit = client.st.output_held() + OUTPUT_BYTES_PER_TURN;
        loop {
            if !self.process_input(client, turn_limit) {
                return Some(false);
            }
            if client.st.close_asap {
                return None;
            }
            if client.st.output_held() < turn_limit {
                return Some(true);
            }
            // Writes reach the feed's consumers before any reply is sent —
            // but not while a replica is out of the client table: the
            // stream flushed now would go to the backlog and every other
            // replica and miss this one (a PSYNC's backlog tail is what
            // makes its output this long), which then counts an offset
            // the master's stream does not have. Its stream follows at
            // the end of the turn, after what it is sent here.
            if client.st.repl.is_none() {
                self.srv.aof.inline_fsync = false;
                self.srv.flush_feed();
            }
            let durable = self.srv.aof_durable();
            client.st.hold_until(self.srv.aof.appended, durable);
            self.srv.note_held(&mut client.st);
            if !self.write_client(idx, client) {
                return None;
            }
            if client.st.output_held() >= turn_limit {
                client.link.yielded = true;
                if !self.pending_reads.contains(&idx) {
                    self.pending_reads.push(idx);
                }
                return Some(false);
            }
        }
    }

    /// Parse and run every complete command in the query buffer, until the
    /// client's pending output reaches `output_limit`. Returns false when
    /// the client stops accepting input (QUIT, protocol error).
    fn process_input(&mut self, client: &mut Client, output_limit: usize) -> bool {
        let limits = |c: &Client, srv: &Server| ParseLimits {
            max_bulk_len: srv.config.proto_max_bulk_len,
            authenticated: c.st.authenticated || !srv.acl.auth_required(),
        };
        // Commands left before the next look ahead.
        let mut ahead = 0;
        loop {
            if client.st.close_after_reply
                || client.st.close_asap
                || client.st.blocked.is_some()
                || self.srv.shutdown.is_some()
                || client.st.output_held() >= output_limit
            {
                break;
            }
            if ahead == 0 {
                ahead = self.prefetch_pipeline(client);
            }
            ahead -= 1;
            match client.link.query.parse(limits(client, &self.srv)) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    let msg = e.message();
                    if let Some(skipped) = self.srv.log_limits.protocol.allow(Instant::now()) {
                        warn!(
                            client = %client.st.addr,
                            "{msg}{}",
                            crate::logging::suppressed_note(skipped)
                        );
                    }
                    client.st.reply.error_bytes(&e.message_bytes());
                    self.srv.stats.total_error_replies += 1;
                    self.srv
                        .stats
                        .count_errors(&mut client.st.reply.error_codes);
                    client.st.close_after_reply = true;
                    break;
                }
            }
            client.note_query_buffer();
            let mut argv = std::mem::take(&mut self.argv_scratch);
            // SAFETY: the slices are used only while the command runs and
            // dropped (`argv.clear()`) before the query buffer is touched
            // again; the big-argument buffers outlive them (they are
            // dropped after, or taken into the keyspace by the handler).
            unsafe {
                client
                    .link
                    .query
                    .argv_detached(&mut argv, &mut client.st.big_args)
            };
            // The clock was read when the loop woke; it is read again before
            // a command that follows 100 µs or more of commands (this
            // client's or another's in this turn), so expiry is judged at
            // the time each command starts and a TTL counts from no earlier
            // than it, as in Redis, without a clock read per request.
            if self.srv.clock_is_stale() {
                self.srv.update_time();
            }
            let dirty = self.srv.dirty;
            // A script that runs too long serves the other clients through
            // the loop's sockets (see busy.rs) while this command runs.
            let mut pump = busy::Pump {
                links: &mut self.links,
                listeners: &self.listeners,
                poll: &self.poll,
                uring: &mut self.uring,
                pending_reads: &mut self.pending_reads,
            };
            self.srv.busy_pump =
                Some(&mut pump as *mut busy::Pump as *mut dyn crate::state::BusyPump);
            commands::execute(&mut self.srv, &mut client.st, &argv);
            self.srv.busy_pump = None;
            if client.st.ldb_detach {
                client.st.ldb_detach = false;
                self.detach_from_uring(client);
            }
            argv.clear();
            client.st.big_args.clear();
            if self.srv.dirty != dirty && !self.srv.blocked_keys.is_empty() {
                commands::blocking::serve_blocked(&mut self.srv);
            }
            // Kept for the next command, unless a huge one grew it.
            if argv.capacity() <= ARGV_SCRATCH_KEEP {
                self.argv_scratch = argv;
            }
            client.link.query.consume();
            if !self.check_output_limits(&mut client.st) {
                break;
            }
        }
        // A replica's empty line says it is alive while it loads its dump
        // (Redis's processInlineBuffer refreshes repl_ack_time).
        if client.link.query.take_empty_line() {
            use crate::state::replication::ReplicaPhase;
            // (While it waits for a snapshot the time is its wait's start.)
            if let Some(l) = client
                .st
                .repl
                .as_mut()
                .filter(|l| !matches!(l.phase, ReplicaPhase::WaitBgsaveStart))
            {
                l.ack_time = Instant::now();
            }
        }
        client.link.query.compact();
        let qlen = client.link.query.capacity();
        if qlen > self.srv.recent_max_input {
            self.srv.recent_max_input = qlen;
        }
        !client.st.close_after_reply
    }

    /// SCRIPT DEBUG: the debugging session will read the client's socket
    /// itself (here, or in a forked child), so nothing else may: an
    /// io_uring client's receive is cancelled and its socket goes to
    /// epoll, whose readiness reads nothing. What the receive had taken
    /// still reaches the query buffer (`absorb_received`).
    fn detach_from_uring(&mut self, client: &mut Client) {
        if !client.link.uring {
            return;
        }
        let idx = client.st.slot;
        let id = client.st.id;
        let uring = self.uring.as_mut().expect("the io_uring engine");
        if std::mem::take(&mut client.link.big_input) {
            uring.cancel_poll_in(idx, id);
        }
        let cancelled = uring.cancel_recv_now(idx, id);
        let registered = cancelled.and_then(|()| {
            self.poll
                .registry()
                .register(client.link.conn.source(), Token(idx), Interest::READABLE)
        });
        client.link.uring = false;
        client.link.recv_armed = false;
        if let Err(e) = registered {
            warn!("Moving a client to epoll for SCRIPT DEBUG: {e}");
            client.st.close_asap = true;
        }
    }

    /// A pipeline's next commands are in the buffer: start fetching their
    /// keys' buckets, then the entries the buckets point at (and the next
    /// entry in the chain where the first is another key's), so that the
    /// cache misses of up to [`PREFETCH_WINDOW`] lookups overlap instead of
    /// coming one after the other (on a keyspace bigger than the caches
    /// most of a GET's time is two misses). Returns how many commands it
    /// looked at (at least one: the next look ahead is after them).
    fn prefetch_pipeline(&self, client: &Client) -> usize {
        let Some(input) = client.link.query.ahead() else {
            return 1;
        };
        let mut keys = [&[][..]; PREFETCH_WINDOW];
        let n = crate::protocol::leading_keys(input, &mut keys);
        // One command: nothing to overlap with.
        if n < 2 {
            return 1;
        }
        let Some(db) = self.srv.dbs.get(client.st.db) else {
            return n;
        };
        let mut hashes = [0u64; PREFETCH_WINDOW];
        for (h, key) in hashes.iter_mut().zip(&keys[..n]) {
            *h = db.main.hash(key);
            db.main.prefetch_bucket(*h);
        }
        for &h in &hashes[..n] {
            db.main.prefetch_chain(h);
        }
        for (&h, key) in hashes.iter().zip(&keys[..n]) {
            db.main.prefetch_chain_next(key, h);
        }
        n
    }

    /// The same across clients (io_uring): the first key of each client's
    /// input that waits in the completion queue, for up to
    /// [`PREFETCH_WINDOW`] clients, so that a turn serving many clients one
    /// command each overlaps their misses too. Only input that starts a
    /// command is looked at (a client's buffered partial command goes
    /// first).
    fn prefetch_received(&self) {
        let Some(u) = self.uring.as_ref() else {
            return;
        };
        let mut found = [(0usize, 0u64, &[][..]); PREFETCH_WINDOW];
        let mut n = 0;
        for c in &u.queue {
            if n == found.len() {
                break;
            }
            let (Some(Op::Recv), Some(bid), true) = (c.op(), c.buffer(), c.result > 0) else {
                continue;
            };
            let slot = c.slot();
            let Some(st) = self.srv.clients.get(slot).and_then(|s| s.as_ref()) else {
                continue;
            };
            let fresh = self
                .links
                .get(slot)
                .and_then(|l| l.as_ref())
                .is_some_and(|l| l.query.unparsed() == 0);
            if !c.is_for(st.id) || !fresh {
                continue;
            }
            let mut key = [&[][..]; 1];
            if crate::protocol::leading_keys(u.buffer(bid, c.result as usize), &mut key) == 0 {
                continue;
            }
            if let Some(db) = self.srv.dbs.get(st.db) {
                let h = db.main.hash(key[0]);
                db.main.prefetch_bucket(h);
                found[n] = (st.db, h, key[0]);
                n += 1;
            }
        }
        // One client: nothing to overlap with.
        if n < 2 {
            return;
        }
        for &(db, h, _) in &found[..n] {
            self.srv.dbs[db].main.prefetch_chain(h);
        }
        for &(db, h, key) in &found[..n] {
            self.srv.dbs[db].main.prefetch_chain_next(key, h);
        }
    }

    /// Enforce `client-output-buffer-limit` (normal class) after a reply
    /// was added. Returns false when the client is to be closed.
    fn check_output_limits(&mut self, st: &mut ClientState) -> bool {
        // A client that has not authenticated may hold 1 KB past its reply
        // buffer and no more, whatever the limits say: it cannot make the
        // server buffer replies it never reads (Redis: reply list > 1024).
        if !st.authenticated
            && self.srv.acl.auth_required()
            && st.output_used() > (st.rbuf.size + UNAUTHENTICATED_OUTPUT) as u64
        {
            self.srv.close_for_output_limit(st);
            return false;
        }
        let limit = st.output_limit(&self.srv.config);
        // The default (0 0 0) costs nothing per command, not even a clock read.
        if limit.hard == 0 && limit.soft == 0 {
            return true;
        }
        if !st.output_limit_reached(limit, Instant::now()) {
            return true;
        }
        self.srv.close_for_output_limit(st);
        false
    }

    /// Write pending output. Returns false when the client must be closed.
    fn write_client(&mut self, idx: usize, client: &mut Client) -> bool {
        // io_uring: the send in flight goes first; its completion writes
        // the rest.
        if client.link.send_inflight {
            return true;
        }
        let st = &mut client.st;
        note_output(st, &mut self.srv.recent_max_output);
        // Replies that wait for the AOF (appendfsync always) are not sent
        // before their writes are on disk.
        let limit = st.write_limit(self.srv.aof_durable());
        if let Err(e) = write_reply(&mut client.link.conn, st, limit, &mut self.srv.stats) {
            if e.kind() == io::ErrorKind::WouldBlock {
                return self.wait_writable(idx, client);
            }
            debug!(client = %st.addr, "Writing to client: {e}");
            return false;
        }
        if st.sent < st.reply.len() {
            // The rest is held for the AOF; its release queues a write.
            return true;
        }
        st.reply.clear();
        st.sent = 0;
        // A replica getting the dump file: from the file to the socket.
        if let Some(ReplicaPhase::SendBulk { file, remaining }) =
            st.repl.as_mut().map(|l| &mut l.phase)
        {
            let (sent, result) = match &mut client.link.conn {
                Conn::Tls(tls) => copy_bulk_tls(tls, file, remaining),
                conn => sendfile_bulk(conn.fd(), file, remaining),
            };
            self.srv.stats.total_net_output_bytes += sent;
            self.srv.stats.net_repl_output_bytes += sent;
            match result {
                Ok(Bulk::Done) => {}
                Ok(Bulk::Budget) => {
                    // More next turn (the loop does not sleep meanwhile),
                    // so one fast replica cannot hold the loop.
                    st.queue_write(&mut self.srv.pending_writes);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return self.wait_writable(idx, client);
                }
                Err(e) => {
                    warn!("SYNC failed for replica {}: sending the dump: {e}", st.addr);
                    return false;
                }
            }
            // All of it is out: the stream kept meanwhile follows.
            self.srv.bulk_sent(st);
            return self.write_client(idx, client);
        }
        // An online replica: the shared stream from where it is, as far
        // as the AOF lets it out.
        let online = st
            .repl
            .as_ref()
            .is_some_and(|l| matches!(l.phase, ReplicaPhase::Online) && l.stream.is_some());
        if online {
            let limit = self.srv.repl.stream_limit(self.srv.aof_durable());
            self.srv.repl.trim_wanted = true;
            let backlog = self.srv.repl.backlog.as_ref();
            match write_stream(
                &mut client.link.conn,
                st,
                backlog,
                limit,
                &mut self.srv.stats,
            ) {
                Ok(StreamWrite::Done) => {}
                Ok(StreamWrite::Held) => self.srv.note_stream_held(st),
                Ok(StreamWrite::Lost) => {
                    warn!(
                        "Replica {} fell behind what the replication buffer holds: disconnecting it",
                        st.addr
                    );
                    return false;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return self.wait_writable(idx, client);
                }
                Err(e) => {
                    debug!(client = %st.addr, "Writing to replica: {e}");
                    return false;
                }
            }
        }
        // Drained: whatever time over the soft output limit starts anew.
        st.obuf_soft_since = None;
        // A turn's output bigger than the reply buffer's size was written
        // from a grown buffer; it goes back to its size.
        if st.reply.buf.capacity() > st.rbuf.size {
            st.reply.buf.shrink_to(st.rbuf.size);
        }
        // TLS records the socket did not take yet go out when it drains.
        match client.link.conn.flush() {
            Ok(true) => {}
            Ok(false) => return self.wait_writable(idx, client),
            Err(e) => {
                debug!(client = %client.st.addr, "Writing to client: {e}");
                return false;
            }
        }
        // (io_uring: a POLLOUT poll in flight just finds nothing to do.)
        if client.link.write_interest && !client.link.uring {
            client.link.write_interest = false;
            return self.set_interest(idx, client, Interest::READABLE);
        }
        true
    }

    /// Change what the client's socket is polled for. False if that failed.
    /// The socket is full: ask for the writable event that resumes the
    /// write (once). Returns false when the client must be closed.
    fn wait_writable(&mut self, idx: usize, client: &mut Client) -> bool {
        if client.link.write_interest {
            return true;
        }
        client.link.write_interest = true;
        if client.link.uring {
            let uring = self.uring.as_mut().expect("the io_uring engine");
            uring.poll_out(client.link.conn.fd(), idx, client.st.id);
            return true;
        }
        self.set_interest(idx, client, Interest::READABLE | Interest::WRITABLE)
    }

    fn set_interest(&mut self, idx: usize, client: &mut Client, interest: Interest) -> bool {
        let res = self
            .poll
            .registry()
            .reregister(client.link.conn.source(), Token(idx), interest);
        if let Err(e) = &res {
            warn!(client = %client.st.addr, "Changing poll interest: {e}");
        }
        res.is_ok()
    }

    /// Poll the AOF's io_uring and fsync-thread eventfds once they exist.
    fn watch_aof_completions(&mut self) {
        if !self.aof_uring_watched {
            if let Some(fd) = self.srv.aof.uring.as_ref().map(|u| u.eventfd()) {
                register_readable(&self.poll, fd, AOF_URING_TOKEN, "AOF io_uring eventfd");
                self.aof_uring_watched = true;
            }
        }
        if !self.aof_watched {
            if let Some(fd) = self.srv.aof.completion_fd() {
                register_readable(&self.poll, fd, AOF_TOKEN, "AOF fsync eventfd");
                self.aof_watched = true;
            }
        }
    }

    /// Register a new diskless transfer pipe, so that its data wakes the
    /// loop.
    fn watch_rdb_pipe(&mut self) {
        let generation = self.srv.repl.rdb_pipe_generation;
        let pipe = self
            .srv
            .repl
            .rdb_pipe
            .as_ref()
            .map(|p| (p.as_raw_fd(), generation));
        if pipe != self.rdb_pipe_watched {
            if let Some((fd, _)) = pipe {
                register_readable(&self.poll, fd, RDB_PIPE_TOKEN, "diskless transfer pipe");
            }
            self.rdb_pipe_watched = pipe;
        }
    }

    /// Does slot `idx` still hold client `id` (it may have been reused)?
    fn slot_holds(&self, idx: usize, id: u64) -> bool {
        self.srv
            .clients
            .get(idx)
            .and_then(|c| c.as_ref())
            .is_some_and(|c| c.id == id)
    }

    /// Take client `id` out of slot `idx`, if the slot still holds it.
    fn take_client_if(&mut self, idx: usize, id: u64) -> Option<Client> {
        if self.slot_holds(idx, id) {
            self.take_client(idx)
        } else {
            None
        }
    }

    /// Take a client out of its slots to serve it.
    fn take_client(&mut self, idx: usize) -> Option<Client> {
        let link = self.links.get_mut(idx)?.take()?;
        let Some(st) = self.srv.clients.get_mut(idx).and_then(|c| c.take()) else {
            self.links[idx] = Some(link);
            return None;
        };
        Some(Client { link, st })
    }

    fn put_client(&mut self, idx: usize, mut client: Client) {
        client.note_query_buffer();
        self.links[idx] = Some(client.link);
        self.srv.clients[idx] = Some(client.st);
    }

    /// Put a served client back, closing it when `close` says so or when it
    /// asked to be closed once its replies were all written (QUIT).
    fn put_or_close(&mut self, idx: usize, client: Client, close: bool) {
        let close = close || (client.st.close_after_reply && client.st.pending_output() == 0);
        self.put_client(idx, client);
        if close {
            self.close_client(idx);
        }
    }

    fn close_client(&mut self, idx: usize) {
        close_slot(
            &mut self.srv,
            &mut self.links,
            &self.poll,
            self.uring.as_mut(),
            idx,
        );
    }

    fn close_marked(&mut self) {
        for (idx, id) in std::mem::take(&mut self.srv.to_close) {
            if self.slot_holds(idx, id) {
                self.close_client(idx);
            }
        }
    }

    /// SIGINT / SIGTERM: a shutdown with the flags `shutdown-on-sigint` /
    /// `shutdown-on-sigterm` give it (Redis's sigShutdownHandler and the
    /// cron's shutdown_asap). A SIGINT while a signal's shutdown is under
    /// way exits at once.
    fn signals_received(&mut self) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for sig in pending {
            if sig == SIGINT && self.signalled {
                warn!("You insist... exiting now.");
                std::process::exit(1);
            }
            if self.srv.loading.is_some() {
                warn!("Received shutdown signal during loading, scheduling shutdown.");
            } else if sig == SIGINT {
                warn!("Received SIGINT scheduling shutdown...");
            } else {
                warn!("Received SIGTERM scheduling shutdown...");
            }
            self.signalled = true;
            let flags = if sig == SIGINT {
                self.srv.config.shutdown_on_sigint
            } else {
                self.srv.config.shutdown_on_sigterm
            };
            // One waiting for replicas goes on as it is.
            if self.srv.shutdown_wait.is_none() {
                self.srv.shutdown_asap = Some(flags);
            }
        }
    }

    /// Start stopping the server (Redis's prepareForShutdown): unless NOW
    /// or `shutdown-timeout` 0, replicas that have not acknowledged the
    /// whole stream are asked for an ACK and waited for, writes paused,
    /// until they have or the timeout passes (the loop checks each turn);
    /// else the server stops now. Returns true when it may exit.
    fn prepare_shutdown(&mut self, mut flags: ShutdownFlags) -> bool {
        // A half-loaded dataset must not overwrite the dump.
        if self.srv.loading.is_some() {
            flags = flags
                .without(ShutdownFlags::SAVE)
                .with(ShutdownFlags::NOSAVE);
        }
        warn!("User requested shutdown...");
        crate::process::notify_systemd("STOPPING=1\n");
        let timeout = self.srv.config.shutdown_timeout;
        if !flags.has(ShutdownFlags::NOW) && timeout != 0 && !self.srv.replicas_caught_up() {
            if self.srv.clients_paused().is_none() {
                self.srv.send_getack();
            }
            self.srv.shutdown_wait = Some(ShutdownWait {
                flags,
                deadline: Instant::now() + Duration::from_secs(timeout as u64),
            });
            info!("Waiting for replicas before shutting down.");
            return false;
        }
        self.finish_shutdown(flags)
    }

    /// Stop the server (Redis's finishShutdown): a final snapshot when save
    /// points are configured (or SAVE was given), unless NOSAVE. A failed
    /// snapshot, without FORCE, cancels the shutdown and the server keeps
    /// running, as Redis does (returns false).
    fn finish_shutdown(&mut self, flags: ShutdownFlags) -> bool {
        commands::scripting::kill_debug_sessions(&mut self.srv);
        let (mut replicas, mut lagging) = (0, 0);
        let offset = self.srv.repl.offset;
        for (c, l) in self.srv.replica_links() {
            replicas += 1;
            if l.ack_offset != offset {
                lagging += 1;
                let lag = match l.phase {
                    ReplicaPhase::Online => l.ack_time.elapsed().as_secs(),
                    _ => 0,
                };
                warn!(
                    "Lagging replica {} reported offset {} behind master, lag={lag}, state={}.",
                    c.addr,
                    offset - l.ack_offset,
                    l.state_name()
                );
            }
        }
        if replicas > 0 {
            info!(
                "{} of {replicas} replicas are in sync when shutting down.",
                replicas - lagging
            );
        }
        use crate::state::aof::AofStatus;
        use crate::state::snapshot;
        snapshot::kill_child(&mut self.srv);
        if self.srv.aof.rewrite.is_some() {
            // Turned on and still writing its first base: the AOF does not
            // hold the dataset yet (Redis's finishShutdown).
            if self.srv.aof.status == AofStatus::WaitRewrite {
                if flags.has(ShutdownFlags::FORCE) {
                    warn!("Writing initial AOF. Exit anyway.");
                } else {
                    warn!("Writing initial AOF, can't exit.");
                    warn!("Errors trying to shut down the server. Check the logs for more information.");
                    commands::server::cancel_shutdown(&mut self.srv);
                    return false;
                }
            }
            warn!("There is a child rewriting the AOF. Killing it!");
        }
        // The AOF gets everything written and synced before the end.
        self.srv.flush_feed();
        if self.srv.aof.status != AofStatus::Off {
            info!("Calling fsync() on the AOF file.");
        }
        self.srv.flush_aof();
        self.srv.kill_aof_rewrite();
        self.srv.sync_aof_now();
        let save = flags.has(ShutdownFlags::SAVE)
            || (!flags.has(ShutdownFlags::NOSAVE) && !snapshot::save_points(&self.srv).is_empty());
        if save {
            info!("Saving the final RDB snapshot before exiting.");
            crate::process::notify_systemd("STATUS=Saving the final RDB snapshot\n");
            if let Err(e) = snapshot::save(&mut self.srv) {
                if flags.has(ShutdownFlags::FORCE) {
                    warn!("Error trying to save the DB. Exit anyway. ({e})");
                } else {
                    warn!("Error trying to save the DB, can't exit: {e}");
                    crate::process::notify_systemd(
                        "STATUS=Error trying to save the DB, can't exit.\n",
                    );
                    warn!("Errors trying to shut down the server. Check the logs for more information.");
                    commands::server::cancel_shutdown(&mut self.srv);
                    return false;
                }
            }
        }
        // Listeners first, as Redis: a client reconnecting meanwhile is
        // refused, not accepted and then dropped.
        self.listeners.clear();
        if !self.srv.config.unixsocket.is_empty() {
            let _ = std::fs::remove_file(&self.srv.config.unixsocket);
        }
        for idx in 0..self.srv.clients.len() {
            self.close_client(idx);
        }
        if !self.srv.config.pidfile.is_empty() {
            let _ = std::fs::remove_file(&self.srv.config.pidfile);
        }
        warn!("kvstore is now ready to exit, bye bye...");
        true
    }

    /// The dataset is loaded and the listeners are open: say so in the log
    /// and to systemd (Redis does right before its event loop starts).
    fn announce_ready(&mut self) {
        self.ready_announced = true;
        // After the dataset, as Redis logs it (tools wait for this line).
        info!("Ready to accept connections");
        if self.srv.master.target.is_none() {
            crate::process::notify_systemd("STATUS=Ready to accept connections\n");
        } else {
            crate::process::notify_systemd(
                "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n",
            );
        }
        crate::process::notify_systemd("READY=1\n");
    }
}

/// Redis 7.0's reply to a client refused by protected mode, word for word
/// (tools and people search for this text).
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Tell a connection we will not serve it why (best effort: one
/// non-blocking write), before it is dropped and so closed. A TLS client
/// is closed without a word: its handshake has not happened.
fn reject_connection(conn: &mut Conn, msg: &[u8]) {
    if !conn.is_tls() {
        let _ = conn.write(msg);
    }
}

/// Poll `fd` for reading under `token`; a failure is logged.
/// How far `sendfile_bulk` got.
enum Bulk {
    /// The whole file is out.
    Done,
    /// This turn's budget is spent; the socket may take more.
    Budget,
}

/// Send what is left of a dump file to a replica's socket with sendfile,
/// from the file's current offset, until all of it is out, this turn's
/// budget is spent, or the socket is full (`WouldBlock`). Returns the bytes
/// sent either way (`remaining` says how far it got).
fn sendfile_bulk(
    sock: std::os::fd::RawFd,
    file: &std::fs::File,
    remaining: &mut u64,
) -> (u64, io::Result<Bulk>) {
    /// Bytes per sendfile call.
    const SENDFILE_STEP: u64 = 4 << 20;
    /// Bytes per loop turn for one replica.
    const SENDFILE_TURN: u64 = 64 << 20;
    let mut sent = 0;
    while *remaining > 0 {
        if sent >= SENDFILE_TURN {
            return (sent, Ok(Bulk::Budget));
        }
        // SAFETY: both fds are open for the call; a null offset makes the
        // kernel use and advance the file's own offset.
        let n = unsafe {
            libc::sendfile(
                sock,
                file.as_raw_fd(),
                std::ptr::null_mut(),
                (*remaining).min(SENDFILE_STEP) as usize,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return (sent, Err(e));
        }
        if n == 0 {
            return (
                sent,
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the dump file is shorter than announced",
                )),
            );
        }
        *remaining -= n as u64;
        sent += n as u64;
    }
    (sent, Ok(Bulk::Done))
}

/// [`sendfile_bulk`] for a replica over TLS: the file is read and written
/// through the TLS stream, a buffer at a time.
fn copy_bulk_tls(
    tls: &mut crate::tls::TlsStream,
    mut file: &std::fs::File,
    remaining: &mut u64,
) -> (u64, io::Result<Bulk>) {
    use std::io::{Read, Seek, SeekFrom};
    /// Bytes per loop turn for one replica.
    const COPY_TURN: u64 = 16 << 20;
    let mut buf = vec![0u8; 64 * 1024];
    let mut sent = 0;
    while *remaining > 0 {
        if sent >= COPY_TURN {
            return (sent, Ok(Bulk::Budget));
        }
        let want = (*remaining).min(buf.len() as u64) as usize;
        let got = match file.read(&mut buf[..want]) {
            Ok(0) => {
                return (
                    sent,
                    Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the dump file is shorter than announced",
                    )),
                )
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return (sent, Err(e)),
        };
        let taken = match tls.write(&buf[..got]) {
            Ok(n) => n,
            Err(e) => {
                let _ = file.seek(SeekFrom::Current(-(got as i64)));
                return (sent, Err(e));
            }
        };
        if taken < got {
            // What the stream did not take is read again next time.
            if let Err(e) = file.seek(SeekFrom::Current(-((got - taken) as i64))) {
                return (sent, Err(e));
            }
        }
        *remaining -= taken as u64;
        sent += taken as u64;
    }
    (sent, Ok(Bulk::Done))
}

fn register_readable(poll: &Poll, fd: std::os::fd::RawFd, token: Token, what: &str) {
    let res = poll
        .registry()
        .register(&mut mio::unix::SourceFd(&fd), token, Interest::READABLE);
    if let Err(e) = res {
        warn!("Registering the {what}: {e}");
    }
}

/// Close the client in slot `idx`: detached from everything it was part
/// of, removed, its socket deregistered and closed (from the loop, and
/// from a script running too long: see `busy.rs`).
fn close_slot(
    srv: &mut Server,
    links: &mut [Option<Box<Link>>],
    poll: &Poll,
    uring: Option<&mut UringNet>,
    idx: usize,
) {
    let Some(mut st) = srv.clients.get_mut(idx).and_then(|c| c.take()) else {
        return;
    };
    commands::detach_client(srv, &mut st);
    srv.clients[idx] = Some(st);
    srv.remove_client(idx);
    if let Some(mut link) = links.get_mut(idx).and_then(|l| l.take()) {
        if link.uring {
            if let Some(u) = uring {
                u.submit_queued();
            }
            // Ends the receive and any poll in flight, which hold the
            // socket open until they complete (their completions are then
            // stale: see `uring.rs`).
            // SAFETY: shutting down a socket we own.
            unsafe { libc::shutdown(link.conn.fd(), libc::SHUT_RDWR) };
        } else {
            let _ = poll.registry().deregister(link.conn.source());
        }
    }
    debug!(client = idx, "Client closed connection");
}

/// Accept every pending connection on `listener` (from the loop, and
/// from a script running too long: see `busy.rs`).
fn accept_from(
    listener: &Listener,
    poll: &Poll,
    mut uring: Option<&mut UringNet>,
    links: &mut Vec<Option<Box<Link>>>,
    srv: &mut Server,
) {
    loop {
        let accepted = match listener {
            Listener::Tcp(l) | Listener::Tls(l) => l.accept().map(|(s, a)| {
                let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
                let _ = s.set_nodelay(true);
                set_keepalive(s.as_raw_fd(), srv.config.tcp_keepalive);
                let conn = match (listener, &srv.tls) {
                    (Listener::Tls(_), Some(tls)) => {
                        match crate::tls::TlsStream::accept(s, &tls.server) {
                            Ok(t) => Conn::Tls(Box::new(t)),
                            Err(e) => {
                                warn!("Accepting a TLS connection: {e}");
                                return None;
                            }
                        }
                    }
                    // The TLS port closed while this one waited.
                    (Listener::Tls(_), None) => return None,
                    _ => Conn::Tcp(s),
                };
                Some((conn, a.to_string(), laddr, false, is_loopback_peer(&a)))
            }),
            Listener::Unix(l) => l.accept().map(|(s, _)| {
                let path = srv.config.unixsocket.clone();
                Some((Conn::Unix(s), format!("{path}:0"), path, true, true))
            }),
        };
        let (mut conn, addr, laddr, is_unix, is_local) = match accepted {
            Ok(Some(x)) => x,
            // Accepted, but it could not be set up: closed, and on to the next.
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if crate::net::accept_failure_needs_retry(&e) => continue,
            Err(e) => {
                // The connection is still queued; the loop tries again.
                let now = Instant::now();
                srv.accept_retry_at = Some(now + ACCEPT_RETRY_DELAY);
                if let Some(skipped) = srv.log_limits.accept.allow(now) {
                    warn!(
                        "Accepting client connection: {e}{}",
                        crate::logging::suppressed_note(skipped)
                    );
                }
                return;
            }
        };
        srv.stats.total_connections_received += 1;
        if srv.connected_clients as i64 >= srv.config.maxclients {
            reject_connection(&mut conn, b"-ERR max number of clients reached\r\n");
            srv.stats.rejected_connections += 1;
            continue;
        }
        // Protected mode (Redis's clientAcceptHandler): while the default
        // user has no password, only local clients are served, whatever
        // `bind` says.
        if srv.config.protected_mode && srv.acl.user(DEFAULT_USER).nopass && !is_local {
            reject_connection(&mut conn, PROTECTED_MODE_DENIED);
            srv.stats.rejected_connections += 1;
            if let Some(skipped) = srv.log_limits.denied.allow(Instant::now()) {
                warn!(
                    client = %addr,
                    "Refused a non-local connection: protected mode is on and no password is set{}",
                    crate::logging::suppressed_note(skipped)
                );
            }
            continue;
        }
        let id = srv.next_client_id;
        srv.next_client_id += 1;
        // Logged in as the default user at once when it needs no password
        // (Redis's clientSetDefaultAuth).
        let authenticated = !srv.acl.auth_required();
        let mut st = ClientState::new(id, conn.fd(), addr, laddr, is_unix, is_local, authenticated);
        st.is_tls = conn.is_tls();
        // Register under the slot the client is about to take.
        let idx = srv.vacant_slot();
        let mut link = Box::new(Link::new(conn, crate::protocol::QueryBuffer::new()));
        // TLS connections stay with epoll: rustls reads the socket itself.
        match uring.as_deref_mut().filter(|_| !link.conn.is_tls()) {
            Some(u) => {
                u.arm_recv(link.conn.fd(), idx, id);
                link.uring = true;
                link.recv_armed = true;
            }
            None => {
                let reg =
                    poll.registry()
                        .register(link.conn.source(), Token(idx), Interest::READABLE);
                if let Err(e) = reg {
                    warn!("Registering client: {e}");
                    continue;
                }
            }
        }
        let slot = srv.insert_client(st);
        debug_assert_eq!(slot, idx);
        if links.len() <= slot {
            links.resize_with(slot + 1, || None);
        }
        links[slot] = Some(link);
        debug!(client = id, "Accepted connection");
    }
}

/// Before output is written: the reply buffer's peak (its resizing) and
/// the recent biggest output (INFO).
fn note_output(st: &mut ClientState, recent_max: &mut usize) {
    st.rbuf.note_held(st.reply.len());
    *recent_max = (*recent_max).max(st.pending_output());
}

/// The link of the client a completion is for, if that client is still in
/// its slot (not a later holder of it).
fn live_link<'l>(
    srv: &Server,
    links: &'l mut [Option<Box<Link>>],
    c: &Cqe,
) -> Option<&'l mut Link> {
    let slot = c.slot();
    let st = srv.clients.get(slot)?.as_ref()?;
    match c.is_for(st.id) {
        true => links.get_mut(slot)?.as_deref_mut(),
        false => None,
    }
}

/// What a receive's completion brought a client.
enum Received {
    /// Bytes, now in the query buffer.
    Data,
    /// The end of the stream.
    End,
    /// Nothing (the receive ran out of buffers and was armed again).
    Nothing,
    Failed(io::Error),
}

/// Take a receive's completion into the client's link: its bytes into the
/// query buffer (and the kernel's buffer back to the ring), the end of the
/// stream, or an error. A receive that stopped for any other reason (no
/// buffer was free) is armed again.
fn absorb_received(
    link: &mut Link,
    uring: &mut UringNet,
    c: &Cqe,
    stats: &mut crate::state::Stats,
) -> Received {
    if !c.more() {
        link.recv_armed = false;
    }
    let parked = uring.unpark(c);
    let got = match (c.result, c.buffer()) {
        // Cancelled for SCRIPT DEBUG (`detach_from_uring`) or while a busy
        // script ran (`UringNet::park`).
        (e, _) if e == -libc::ECANCELED => Received::Nothing,
        (n, bid) if n > 0 && (bid.is_some() || parked.is_some()) => {
            let n = n as usize;
            let mut data = match (&parked, bid) {
                (Some(bytes), _) => &bytes[..n.min(bytes.len())],
                (None, Some(bid)) => uring.buffer(bid, n),
                (None, None) => &[],
            };
            while !data.is_empty() {
                let res = link.query.read_with(|buf| {
                    let k = buf.len().min(data.len());
                    // SAFETY: `buf` has room for `k` bytes; MaybeUninit<u8>
                    // is laid out as u8.
                    unsafe {
                        std::ptr::copy_nonoverlapping(data.as_ptr(), buf.as_mut_ptr() as *mut u8, k)
                    };
                    Ok(k)
                });
                match res {
                    Ok((k, _)) if k > 0 => data = &data[k..],
                    _ => break,
                }
            }
            let placed = data.is_empty();
            if let Some(bid) = bid {
                uring.recycle(bid);
            }
            stats.total_reads_processed += 1;
            stats.total_net_input_bytes += n as u64;
            match placed {
                true => Received::Data,
                // Bytes the query buffer did not take are never dropped
                // silently: the client goes.
                false => Received::Failed(io::Error::other("the query buffer took no more input")),
            }
        }
        (0, _) => {
            link.peer_closed = true;
            Received::End
        }
        (e, _) if e == -libc::ENOBUFS || e == -libc::EINTR => Received::Nothing,
        (e, _) if e < 0 => Received::Failed(io::Error::from_raw_os_error(-e)),
        _ => Received::Failed(io::Error::other("a receive without its buffer")),
    };
    if link.ring_receives() && !link.recv_armed && matches!(got, Received::Data | Received::Nothing)
    {
        link.recv_armed = true;
        uring.rearm_recv(link.conn.fd(), c);
    }
    got
}

/// How far [`write_stream`] got.
enum StreamWrite {
    /// The replica has all the stream.
    Done,
    /// It has all the AOF lets out so far.
    Held,
    /// Its place is no longer in the buffer (it cannot be sent on).
    Lost,
}

/// Write the shared replication stream to an online replica from where it
/// is, up to offset `limit`. Stops with the socket's error (`WouldBlock`
/// when it is full).
fn write_stream(
    conn: &mut Conn,
    st: &mut ClientState,
    backlog: Option<&crate::state::replication::Backlog>,
    limit: i64,
    stats: &mut crate::state::Stats,
) -> io::Result<StreamWrite> {
    let Some(stream) = st.repl.as_mut().and_then(|l| l.stream.as_mut()) else {
        return Ok(StreamWrite::Done);
    };
    let Some(backlog) = backlog else {
        return Ok(StreamWrite::Lost);
    };
    loop {
        let to = limit.min(backlog.end());
        if stream.sent >= to {
            stream.end = backlog.end();
            return Ok(if stream.sent < backlog.end() {
                StreamWrite::Held
            } else {
                StreamWrite::Done
            });
        }
        if !backlog.holds_from(stream.sent) {
            return Ok(StreamWrite::Lost);
        }
        let room = (to - stream.sent) as usize;
        let slices = backlog.slices_from(stream.sent, IOVECS_PER_WRITE, room);
        let n = match conn.writev(&slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stats.total_writes_processed += 1;
        stats.total_net_output_bytes += n as u64;
        stats.net_repl_output_bytes += n as u64;
        stream.sent += n as i64;
    }
}

/// Write the client's reply up to `limit` (what the AOF lets out), from
/// the reply buffer or, for shared values, from where they live. Stops
/// with the socket's error (`WouldBlock` when it is full).
fn write_reply(
    conn: &mut Conn,
    st: &mut ClientState,
    limit: usize,
    stats: &mut crate::state::Stats,
) -> io::Result<()> {
    while st.sent < limit {
        let n = if st.reply.shared_len() == 0 {
            conn.write(&st.reply.buf[st.sent..limit])
        } else {
            // Shared values are written from where they live.
            st.reply.seek(st.sent);
            let mut slices = Vec::new();
            st.reply.io_slices(st.sent, IOVECS_PER_WRITE, &mut slices);
            // Stop at the limit.
            let mut room = limit - st.sent;
            let mut keep = 0;
            for s in &mut slices {
                if room == 0 {
                    break;
                }
                if s.len() > room {
                    // SAFETY: shortening a slice that borrows the reply.
                    *s = std::io::IoSlice::new(unsafe {
                        std::slice::from_raw_parts(s.as_ptr(), room)
                    });
                }
                room -= s.len();
                keep += 1;
            }
            slices.truncate(keep);
            conn.writev(&slices)
        };
        let n = match n {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stats.total_writes_processed += 1;
        stats.total_net_output_bytes += n as u64;
        if st.kind == ClientKind::Replica {
            stats.net_repl_output_bytes += n as u64;
        }
        st.sent += n;
    }
    Ok(())
}
