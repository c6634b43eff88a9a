//! The event loop's side of a client: its socket, its query buffer and the
//! flags that drive polling. The rest of the client (`ClientState`) lives in
//! the server state's slab under the same slot.

use std::os::fd::{AsRawFd, RawFd};

use mio::net::{TcpStream, UnixStream};

use crate::protocol::QueryBuffer;

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

/// A client's connection.
pub struct Link {
    pub conn: Conn,
    pub query: QueryBuffer,
    /// Registered for writable events (only while output is stuck).
    pub write_interest: bool,
    /// Stopped for this turn after its commands produced a turn's worth of
    /// output the socket did not take; it goes on next turn (it is in the
    /// loop's pending reads), as Redis goes on reading such a client.
    pub yielded: bool,
    /// The peer has shut down its side (an event said so); reads go on
    /// until they see the end of the stream.
    pub peer_closed: bool,
}
