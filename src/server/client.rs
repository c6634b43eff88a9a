//! The event loop's side of a client: its socket, its query buffer and the
//! flags that drive polling. The rest of the client (`ClientState`) lives in
//! the server state's slab under the same slot.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};

use crate::protocol::QueryBuffer;
use crate::tls::TlsStream;

/// The client's socket: plain, or TLS over TCP.
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream>),
}

impl Conn {
    pub fn fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
            Conn::Tls(t) => t.sock.as_raw_fd(),
        }
    }

    /// The socket, for the poll's registry.
    pub fn source(&mut self) -> &mut dyn Source {
        match self {
            Conn::Tcp(s) => s,
            Conn::Unix(s) => s,
            Conn::Tls(t) => &mut t.sock,
        }
    }

    /// The TCP socket under the connection (none for a Unix socket).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Conn::Tcp(s) => Some(s),
            Conn::Tls(t) => Some(&t.sock),
            Conn::Unix(_) => None,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Conn::Tls(_))
    }

    /// Read into uninitialised memory, as `read(2)`: `Ok(0)` at the end.
    pub fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        match self {
            Conn::Tls(t) => t.read_uninit(buf),
            _ => {
                // SAFETY: the kernel writes at most `buf.len()` bytes into
                // memory we own; the caller trusts only the count returned.
                let n = unsafe {
                    libc::read(self.fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len())
                };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(n as usize)
            }
        }
    }

    /// Read, as `read(2)`.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tls(t) => t.read(buf),
            // SAFETY: a `&mut [u8]` is initialised memory viewed as maybe-not.
            _ => self.read_uninit(unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) }),
        }
    }

    /// Write, as `write(2)`.
    pub fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tls(t) => t.write(data),
            _ => {
                // SAFETY: writing from a valid slice to a socket we own.
                let n = unsafe {
                    libc::write(self.fd(), data.as_ptr() as *const libc::c_void, data.len())
                };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(n as usize)
            }
        }
    }

    /// Write several slices, as `writev(2)`.
    pub fn writev(&mut self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Conn::Tls(t) => t.write_vectored(slices),
            _ => {
                // SAFETY: IoSlice is ABI-compatible with iovec; every slice
                // outlives the call.
                let n = unsafe {
                    libc::writev(
                        self.fd(),
                        slices.as_ptr() as *const libc::iovec,
                        slices.len() as libc::c_int,
                    )
                };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(n as usize)
            }
        }
    }

    /// TLS records wait for the socket (plain sockets hold nothing back).
    pub fn pending(&self) -> bool {
        matches!(self, Conn::Tls(t) if t.pending())
    }

    /// Send what waits. `Ok(true)` once nothing is left.
    pub fn flush(&mut self) -> io::Result<bool> {
        match self {
            Conn::Tls(t) => t.flush(),
            _ => Ok(true),
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
    /// until they see the end of the stream. Served through io_uring: the
    /// end of the stream was received (everything before it is in the
    /// query buffer).
    pub peer_closed: bool,
    /// Served through the io_uring engine (see `uring.rs`): its input
    /// arrives with completions, and `write_interest` means a `POLLOUT`
    /// poll is in flight.
    pub uring: bool,
    /// io_uring: a multishot receive is in flight.
    pub recv_armed: bool,
    /// io_uring: a send of the reply buffer is in flight.
    pub send_inflight: bool,
    /// io_uring: the client sends big arguments, so its input is read
    /// directly, when its `POLLIN` poll says so, instead of by a receive
    /// (see `EventLoop::read_big_input_directly`); it goes back once
    /// `quiet_reads` reads brought none.
    pub big_input: bool,
    /// io_uring: a multishot `POLLIN` poll is in flight.
    pub poll_in_armed: bool,
    /// Reads in a row without a big argument, while `big_input`.
    pub quiet_reads: u32,
}

impl Link {
    /// Does its input arrive through an io_uring receive (not read from
    /// the socket by the loop)?
    pub fn ring_receives(&self) -> bool {
        self.uring && !self.big_input
    }

    pub fn new(conn: Conn, query: QueryBuffer) -> Link {
        Link {
            conn,
            query,
            write_interest: false,
            yielded: false,
            peer_closed: false,
            uring: false,
            recv_armed: false,
            send_inflight: false,
            big_input: false,
            poll_in_armed: false,
            quiet_reads: 0,
        }
    }
}
