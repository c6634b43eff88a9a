//! One connected client: its socket, query buffer and per-connection state.

use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use mio::net::{TcpStream, UnixStream};

use crate::protocol::{Proto, QueryBuffer, Reply};

/// The client's socket.
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    pub fn fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// Everything about a client that command handlers may read or change. The
/// query buffer is kept outside so that handlers can borrow arguments from it
/// while writing replies here.
pub struct ClientState {
    pub id: u64,
    /// Selected database.
    pub db: usize,
    pub reply: Reply,
    pub name: Option<Vec<u8>>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    pub authenticated: bool,
    /// Peer address (`ip:port`, or the socket path for unix clients).
    pub addr: String,
    pub laddr: String,
    pub fd: RawFd,
    pub is_unix: bool,
    /// Connected from 127.0.0.1, ::1 or the unix socket (Redis's
    /// `islocalClient`): what protected mode and the `local` gates accept.
    pub is_local: bool,
    pub created: Instant,
    /// Last time the client sent a command (for `timeout` and CLIENT LIST idle).
    pub last_interaction: Instant,
    /// Lower-case name of the last command run (CLIENT LIST `cmd`).
    pub last_cmd: &'static str,
    /// Close once the pending replies are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Close as soon as possible, without writing (CLIENT KILL).
    pub close_asap: bool,
    /// Bytes of the reply (see `Reply::len`) already written to the socket.
    pub sent: usize,
    /// Query buffer size, copied in for CLIENT LIST while the client runs.
    pub qbuf_len: usize,
    pub qbuf_free: usize,
    /// Total commands this client ran.
    pub commands: u64,
    /// Set while the client waits in a blocking command (BLPOP, …).
    pub blocked: Option<Blocked>,
    /// Since when the pending output has been past the soft limit.
    pub obuf_soft_since: Option<Instant>,
    /// Big bulk arguments of the running command, read into buffers of
    /// their own: a handler may take one to store it without copying (SET
    /// of a 500 MB value). The argument's slice still points into the
    /// buffer afterwards, so the buffer must outlive the command (it does:
    /// it now belongs to the keyspace entry the handler made).
    pub big_args: Vec<Vec<u8>>,
}

/// What a blocked client waits for.
#[derive(Debug, Clone)]
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
    /// The command, re-run when one of the keys gets data.
    pub argv: Vec<Vec<u8>>,
    pub deadline: Option<Instant>,
    /// Waiting for a sorted set (BZPOP*) rather than a list.
    pub zset: bool,
}

impl ClientState {
    pub fn new(
        id: u64,
        fd: RawFd,
        addr: String,
        laddr: String,
        is_unix: bool,
        is_local: bool,
        authenticated: bool,
    ) -> ClientState {
        let now = Instant::now();
        ClientState {
            id,
            db: 0,
            reply: Reply::new(Proto::Resp2),
            name: None,
            lib_name: None,
            lib_ver: None,
            authenticated,
            addr,
            laddr,
            fd,
            is_unix,
            is_local,
            created: now,
            last_interaction: now,
            last_cmd: "NULL",
            close_after_reply: false,
            close_asap: false,
            sent: 0,
            qbuf_len: 0,
            qbuf_free: 0,
            commands: 0,
            blocked: None,
            obuf_soft_since: None,
            big_args: Vec::new(),
        }
    }

    /// Take the buffer that argument `arg` (a slice of the running
    /// command's argv) lives in, if it was read into one of its own (see
    /// `big_args`).
    pub fn take_big_arg(&mut self, arg: &[u8]) -> Option<Vec<u8>> {
        let pos = self
            .big_args
            .iter()
            .position(|v| v.as_ptr() == arg.as_ptr() && v.len() == arg.len())?;
        Some(self.big_args.swap_remove(pos))
    }

    /// Has the pending output overcome `limit`: past its hard bytes, or
    /// past its soft bytes for its seconds (Redis's
    /// `checkClientOutputBufferLimits`)? Remembers when the soft limit was
    /// first passed, and forgets it once the output is back under it.
    pub fn output_limit_reached(
        &mut self,
        limit: crate::config::BufferLimit,
        now: Instant,
    ) -> bool {
        let used = self.pending_output() as u64;
        if limit.hard > 0 && used >= limit.hard {
            return true;
        }
        if limit.soft > 0 && used >= limit.soft {
            // As Redis: the first sighting only starts the clock, and the
            // limit counts as reached once it has lasted more than its seconds.
            let Some(since) = self.obuf_soft_since else {
                self.obuf_soft_since = Some(now);
                return false;
            };
            return now.duration_since(since).as_secs() > limit.soft_secs;
        }
        self.obuf_soft_since = None;
        false
    }

    /// Bytes of reply not yet written.
    pub fn pending_output(&self) -> usize {
        self.reply.len() - self.sent
    }

    /// One line of CLIENT LIST / CLIENT INFO, with Redis's field names.
    pub fn info_line(&self) -> String {
        let now = Instant::now();
        let flags = if self.close_after_reply || self.close_asap {
            "c"
        } else if self.blocked.is_some() {
            "b"
        } else {
            "N"
        };
        let name = self
            .name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp=0 obl={} oll=0 omem={} tot-mem={} events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_interaction).as_secs(),
            flags,
            self.db,
            self.qbuf_len,
            self.qbuf_free,
            self.qbuf_len + self.qbuf_free,
            self.pending_output(),
            self.reply.buf.capacity() + self.reply.shared_len(),
            self.qbuf_len + self.qbuf_free + self.reply.buf.capacity() + self.reply.shared_len() + std::mem::size_of::<Client>(),
            self.last_cmd,
            if self.reply.is_resp3() { 3 } else { 2 },
            self.lib_name.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
            self.lib_ver.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
        )
    }
}

/// A connected client.
pub struct Client {
    pub conn: Conn,
    pub query: QueryBuffer,
    pub st: ClientState,
    /// Registered for writable events (only while output is stuck).
    pub write_interest: bool,
    /// Not served (no reads, no commands) until its pending output drains
    /// below the pause threshold: a client that never reads its replies
    /// cannot make the server build an unbounded buffer.
    pub input_paused: bool,
    /// The peer has shut down its side (an event said so); reads go on
    /// until they see the end of the stream.
    pub peer_closed: bool,
}

/// Is a peer address loopback in Redis's sense (exactly 127.0.0.1 or ::1,
/// as `islocalClient` compares them)? IPv4-mapped 127.0.0.1 counts too.
pub fn is_loopback_peer(addr: &std::net::SocketAddr) -> bool {
    match addr.ip() {
        std::net::IpAddr::V4(ip) => ip == std::net::Ipv4Addr::LOCALHOST,
        std::net::IpAddr::V6(ip) => {
            ip == std::net::Ipv6Addr::LOCALHOST
                || ip.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}
