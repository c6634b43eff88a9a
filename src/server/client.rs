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
    pub created: Instant,
    /// Last time the client sent a command (for `timeout` and CLIENT LIST idle).
    pub last_interaction: Instant,
    /// Lower-case name of the last command run (CLIENT LIST `cmd`).
    pub last_cmd: &'static str,
    /// Close once the pending replies are written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Close as soon as possible, without writing (CLIENT KILL).
    pub close_asap: bool,
    /// Bytes of `reply.buf` already written to the socket.
    pub sent: usize,
    /// Query buffer size, copied in for CLIENT LIST while the client runs.
    pub qbuf_len: usize,
    pub qbuf_free: usize,
    /// Total commands this client ran.
    pub commands: u64,
    /// Set while the client waits in a blocking command (BLPOP, …).
    pub blocked: Option<Blocked>,
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
        }
    }

    /// Bytes of reply not yet written.
    pub fn pending_output(&self) -> usize {
        self.reply.buf.len() - self.sent
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
            self.reply.buf.capacity(),
            self.qbuf_len + self.qbuf_free + self.reply.buf.capacity() + std::mem::size_of::<Client>(),
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
}
