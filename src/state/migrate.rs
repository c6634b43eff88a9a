//! MIGRATE's connections to target instances, kept for reuse (Redis's
//! migrate socket cache): one per `host:port`, at most 64, each closed after
//! 10 idle seconds by the cron. The I/O on them is blocking with MIGRATE's
//! timeout, as Redis's is: the command waits for its target's replies.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Most connections kept (MIGRATE_SOCKET_CACHE_ITEMS).
const MAX_CACHED: usize = 64;
/// Idle seconds after which a kept connection is closed (MIGRATE_SOCKET_CACHE_TTL).
const IDLE_SECS: i64 = 10;
/// Longest reply line read back (the rest of a longer line is dropped).
const MAX_LINE: usize = 1024;

/// A connection to a target instance.
pub struct MigrateSocket {
    stream: BufReader<TcpStream>,
    /// The database last selected on it; -1: unknown (SELECT next time).
    pub last_dbid: i64,
    last_use: i64,
}

/// Why an exchange with a target failed.
#[derive(Debug, Clone, Copy)]
pub struct SocketError {
    /// Out of time (no retry then, as Redis's `errno == ETIMEDOUT`).
    pub timed_out: bool,
}

impl From<io::Error> for SocketError {
    fn from(e: io::Error) -> SocketError {
        SocketError {
            timed_out: matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }
}

impl MigrateSocket {
    /// Write `bytes` in 64 KB pieces, each within `timeout`.
    pub fn write_all(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SocketError> {
        let stream = self.stream.get_mut();
        stream.set_write_timeout(Some(timeout))?;
        for chunk in bytes.chunks(64 * 1024) {
            stream.write_all(chunk)?;
        }
        Ok(())
    }

    /// Read one reply line within `timeout`, without its CRLF.
    pub fn read_line(&mut self, timeout: Duration) -> Result<Vec<u8>, SocketError> {
        let deadline = Instant::now() + timeout;
        let mut line = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SocketError { timed_out: true });
            }
            self.stream.get_mut().set_read_timeout(Some(left))?;
            let available = self.stream.fill_buf()?;
            if available.is_empty() {
                // The target closed the connection.
                return Err(SocketError { timed_out: false });
            }
            let (take, done) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&available[..take.min(room)]);
            self.stream.consume(take);
            if done {
                while matches!(line.last(), Some(b'\n' | b'\r')) {
                    line.pop();
                }
                return Ok(line);
            }
        }
    }
}

/// The kept connections, by `host:port`.
#[derive(Default)]
pub struct MigrateSockets {
    sockets: HashMap<String, MigrateSocket>,
}

impl MigrateSockets {
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// The connection to `host:port`, kept or made now within `timeout`;
    /// None when it cannot be made.
    pub fn get(
        &mut self,
        host: &str,
        port: &str,
        timeout: Duration,
        now_secs: i64,
        rand: u64,
    ) -> Option<&mut MigrateSocket> {
        let name = format!("{host}:{port}");
        if !self.sockets.contains_key(&name) {
            if self.sockets.len() >= MAX_CACHED {
                // Full: one goes, chosen at random.
                let victim = self.sockets.keys().nth(rand as usize % self.sockets.len());
                let victim = victim.cloned()?;
                self.sockets.remove(&victim);
            }
            let stream = connect(host, port, timeout).ok()?;
            let _ = stream.set_nodelay(true);
            self.sockets.insert(
                name.clone(),
                MigrateSocket {
                    stream: BufReader::new(stream),
                    last_dbid: -1,
                    last_use: now_secs,
                },
            );
        }
        let socket = self.sockets.get_mut(&name)?;
        socket.last_use = now_secs;
        Some(socket)
    }

    /// Close the connection to `host:port` (after an error: the next
    /// MIGRATE connects again and selects its database again).
    pub fn close(&mut self, host: &str, port: &str) {
        self.sockets.remove(&format!("{host}:{port}"));
    }

    /// Close connections idle for more than 10 seconds.
    pub fn close_idle(&mut self, now_secs: i64) {
        self.sockets
            .retain(|_, s| now_secs - s.last_use <= IDLE_SECS);
    }
}

/// A blocking connection to `host:port`, trying each address it resolves
/// to within `timeout`.
fn connect(host: &str, port: &str, timeout: Duration) -> io::Result<TcpStream> {
    // As C's atoi: digits up to the first other character.
    let digits: String = port.chars().take_while(|c| c.is_ascii_digit()).collect();
    let port: u16 = digits
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad port"))?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}
