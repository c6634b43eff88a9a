//! The floor under a server's CPU per request on this machine: a responder
//! that does only what every Redis-compatible server must do per request —
//! receive it, parse it, send a reply — and nothing else (no keyspace, no
//! commands: `GET` is answered with a fixed 3-byte value, `CONFIG GET name`
//! with an empty value, `PING` with `PONG`, everything else with `+OK`).
//! Whatever it spends per request is the kernel's share (the sockets, the
//! loopback delivery, the waits) plus kvstore's own I/O layer and parser,
//! so no server built on the same system calls can spend much less;
//! `scripts/bench-floor.sh` runs it beside kvstore and redis-server.
//!
//! It is built from kvstore's pieces: requests are parsed by the server's
//! `QueryBuffer` (RESP and inline, with its limits), the `io_uring` engine
//! is the server's `UringNet` (multishot receives into a provided buffer
//! ring, the turn's sends submitted by the `io_uring_enter` that waits,
//! listeners polled with mio through the ring), and `--aof FILE` encodes
//! every command but GET with the propagation feed's `encode_command` and
//! appends a turn's bytes with one `write(2)` before the turn's replies,
//! while a thread calls `fdatasync` once a second: the work of `appendfsync
//! everysec`. The `epoll` engine is mio's, one read per readable socket and
//! the turn's replies written at the end of the turn, as Redis's
//! beforeSleep does.
//!
//! `cargo run --release --example floor -- --port 7000 --engine io_uring [--aof FILE]`

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener as StdListener};
use std::os::fd::AsRawFd;
use std::time::Duration;

use kvstore::protocol::parser::{ParseLimits, QueryBuffer};
use kvstore::server::uring::{Op, UringNet};
use kvstore::state::feed::encode_command;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);
/// A connection whose unsent replies pass this (a client that sends and
/// never reads) is closed rather than buffered for without a bound.
const MAX_UNSENT: usize = 64 << 20;

/// A connection's input being parsed, and the replies not yet sent.
#[derive(Default)]
struct Conn {
    query: QueryBuffer,
    out: Vec<u8>,
    /// The arguments of the command being answered (see `feed`).
    argv: Vec<&'static [u8]>,
    big: Vec<Vec<u8>>,
}

impl Conn {
    /// Take `data` and answer every complete command in it, appending the
    /// encoding of those other than GET to `log`; false for input that is
    /// not the protocol, or once the unsent replies pass [`MAX_UNSENT`]
    /// (the connection is to close).
    fn feed(&mut self, data: &[u8], mut log: Option<&mut Vec<u8>>) -> bool {
        self.query.feed(data);
        loop {
            match self.query.parse(ParseLimits::default()) {
                Ok(true) => {}
                Ok(false) => return true,
                Err(_) => return false,
            }
            // SAFETY: the arguments are used, and cleared, before the query
            // buffer is consumed or parsed again, and `big` is cleared with
            // them.
            unsafe { self.query.argv_detached(&mut self.argv, &mut self.big) };
            if let Some(&name) = self.argv.first() {
                reply(name, &self.argv, &mut self.out);
                if let Some(log) = log
                    .as_deref_mut()
                    .filter(|_| !name.eq_ignore_ascii_case(b"GET"))
                {
                    encode_command(&self.argv, log);
                }
            }
            self.argv.clear();
            self.big.clear();
            self.query.consume();
            if self.out.len() > MAX_UNSENT {
                return false;
            }
        }
    }
}

/// The fixed answer to a command named `name`.
fn reply(name: &[u8], argv: &[&[u8]], out: &mut Vec<u8>) {
    if name.eq_ignore_ascii_case(b"GET") {
        out.extend_from_slice(b"$3\r\nxxx\r\n");
    } else if name.eq_ignore_ascii_case(b"CONFIG") {
        // `CONFIG GET name`: the name with an empty value (redis-benchmark
        // reads `save` and `appendonly` this way).
        let param = argv.get(2).copied().unwrap_or_default();
        out.extend_from_slice(format!("*2\r\n${}\r\n", param.len()).as_bytes());
        out.extend_from_slice(param);
        out.extend_from_slice(b"\r\n$0\r\n\r\n");
    } else if name.eq_ignore_ascii_case(b"PING") {
        out.extend_from_slice(b"+PONG\r\n");
    } else {
        out.extend_from_slice(b"+OK\r\n");
    }
}

/// The `--aof` file and its once-a-second `fdatasync` thread.
fn open_aof(path: &str) -> io::Result<File> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let synced = file.try_clone()?;
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let _ = synced.sync_data();
    });
    Ok(file)
}

/// Write the turn's log, if any, before the turn's replies go out.
fn flush_log(aof: &mut Option<File>, log: &mut Vec<u8>) -> io::Result<()> {
    if let (Some(file), false) = (aof.as_mut(), log.is_empty()) {
        file.write_all(log)?;
        log.clear();
    }
    Ok(())
}

/// The first free slot of `slots`, made if there is none.
fn vacant<T>(slots: &mut Vec<Option<T>>) -> usize {
    slots.iter().position(Option::is_none).unwrap_or_else(|| {
        slots.push(None);
        slots.len() - 1
    })
}

/// The listener, registered with a new mio poll.
fn listen(listener: StdListener) -> io::Result<(TcpListener, Poll)> {
    listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(listener);
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    Ok((listener, poll))
}

fn run_epoll(listener: StdListener, mut aof: Option<File>) -> io::Result<()> {
    let (listener, mut poll) = listen(listener)?;
    let mut conns: Vec<Option<(TcpStream, Conn)>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 16 * 1024];
    let mut log = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    loop {
        match poll.poll(&mut events, None) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => r?,
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                while let Ok((mut stream, _)) = listener.accept() {
                    stream.set_nodelay(true)?;
                    let slot = vacant(&mut conns);
                    poll.registry().register(
                        &mut stream,
                        Token(slot),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    conns[slot] = Some((stream, Conn::default()));
                }
                continue;
            }
            let slot = event.token().0;
            let Some((stream, conn)) = conns[slot].as_mut() else {
                continue;
            };
            let mut open = true;
            if event.is_readable() {
                // Edge-triggered: a read that fills the buffer may have left
                // more behind; a shorter one emptied the socket.
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) => open = false,
                        Ok(n) => {
                            open = conn.feed(&buf[..n], aof.as_ref().map(|_| &mut log));
                            if open && n == buf.len() {
                                continue;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(_) => open = false,
                    }
                    break;
                }
            }
            if !open {
                if let Some((mut stream, _)) = conns[slot].take() {
                    let _ = poll.registry().deregister(&mut stream);
                }
            } else if !conn.out.is_empty() {
                pending.push(slot);
            }
        }
        flush_log(&mut aof, &mut log)?;
        for slot in pending.drain(..) {
            let Some((stream, conn)) = conns[slot].as_mut() else {
                continue;
            };
            match stream.write(&conn.out) {
                Ok(n) => {
                    conn.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => conns[slot] = None,
            }
        }
    }
}

/// A connection of the io_uring engine.
struct UringConn {
    stream: TcpStream,
    /// Tells this connection's completions from those of a slot's former
    /// holder (the ring's user data carries it).
    id: u64,
    conn: Conn,
    /// The bytes the send in flight reads: untouched until its completion.
    sending: Vec<u8>,
    in_flight: bool,
    /// Its receive ended: it goes once no send is in flight.
    closed: bool,
}

fn run_uring(listener: StdListener, mut aof: Option<File>) -> io::Result<()> {
    let (listener, mut poll) = listen(listener)?;
    let epoll_fd = poll.as_raw_fd();
    let mut ring = UringNet::new(epoll_fd)?;
    let mut conns: Vec<Option<UringConn>> = Vec::new();
    let mut next_id = 0u64;
    let mut events = Events::with_capacity(64);
    let mut log = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    loop {
        ring.wait(Duration::from_secs(1))?;
        ring.collect();
        while let Some(c) = ring.queue.pop_front() {
            let slot = c.slot();
            match c.op() {
                Some(Op::Epoll) => {
                    if !c.more() {
                        ring.arm_epoll(epoll_fd);
                    }
                    match poll.poll(&mut events, Some(Duration::ZERO)) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        r => r?,
                    }
                    while let Ok((stream, _)) = listener.accept() {
                        stream.set_nodelay(true)?;
                        let slot = vacant(&mut conns);
                        next_id += 1;
                        ring.arm_recv(stream.as_raw_fd(), slot, next_id);
                        conns[slot] = Some(UringConn {
                            stream,
                            id: next_id,
                            conn: Conn::default(),
                            sending: Vec::new(),
                            in_flight: false,
                            closed: false,
                        });
                    }
                }
                Some(Op::Send) => {
                    ring.sends_in_flight = ring.sends_in_flight.saturating_sub(1);
                    let Some(u) = live(&mut conns, &c) else {
                        continue;
                    };
                    u.in_flight = false;
                    if u.closed {
                        conns[slot] = None;
                        continue;
                    }
                    if c.result > 0 {
                        u.sending.drain(..c.result as usize);
                    } else if c.result != -libc::EAGAIN {
                        u.sending.clear();
                    }
                    if !u.sending.is_empty() || !u.conn.out.is_empty() {
                        pending.push(slot);
                    }
                }
                Some(Op::Recv) => {
                    let Some(u) = live(&mut conns, &c) else {
                        ring.discard(&c);
                        continue;
                    };
                    let mut open = c.result > 0 || c.result == -libc::ENOBUFS;
                    if let Some(bid) = c.buffer() {
                        if c.result > 0 {
                            let data = ring.buffer(bid, c.result as usize);
                            open = u.conn.feed(data, aof.as_ref().map(|_| &mut log));
                            if !u.conn.out.is_empty() {
                                pending.push(slot);
                            }
                        }
                        ring.recycle(bid);
                    }
                    if open {
                        if !c.more() {
                            ring.rearm_recv(u.stream.as_raw_fd(), &c);
                        }
                    } else if c.more() {
                        // Ends the receive: its last completion comes later.
                        let _ = u.stream.shutdown(Shutdown::Both);
                    } else if u.in_flight {
                        u.closed = true;
                    } else {
                        conns[slot] = None;
                    }
                }
                _ => {}
            }
        }
        flush_log(&mut aof, &mut log)?;
        for slot in pending.drain(..) {
            let Some(u) = conns[slot].as_mut().filter(|u| !u.in_flight) else {
                continue;
            };
            if u.sending.is_empty() {
                std::mem::swap(&mut u.sending, &mut u.conn.out);
            }
            if u.sending.is_empty() {
                continue;
            }
            // SAFETY: `sending` is not touched until this send's completion
            // has been taken off the queue (`in_flight` guards it).
            unsafe { ring.send(u.stream.as_raw_fd(), &u.sending, slot, u.id) };
            u.in_flight = true;
        }
    }
}

/// The connection a completion is for, if it still holds the slot.
fn live<'a>(
    conns: &'a mut [Option<UringConn>],
    c: &kvstore::server::uring::Cqe,
) -> Option<&'a mut UringConn> {
    conns
        .get_mut(c.slot())
        .and_then(Option::as_mut)
        .filter(|u| c.is_for(u.id))
}

fn main() -> io::Result<()> {
    let mut port = 7000u16;
    let mut engine = String::from("io_uring");
    let mut aof = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--engine" => engine = value,
            "--aof" => aof = Some(open_aof(&value)?),
            _ => panic!("unknown option {arg} (--port N, --engine epoll|io_uring, --aof FILE)"),
        }
    }
    let listener = StdListener::bind(("127.0.0.1", port))?;
    match engine.as_str() {
        "epoll" => run_epoll(listener, aof),
        "io_uring" => run_uring(listener, aof),
        _ => panic!("--engine epoll or io_uring"),
    }
}

#[cfg(test)]
mod tests {
    use super::Conn;

    #[test]
    fn frames_commands_across_splits() {
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
        let input = [&set[..], b"*2\r\n$3\r\nget\r\n$1\r\nk\r\n"].concat();
        for split in 0..input.len() {
            let mut conn = Conn::default();
            let mut log = Vec::new();
            assert!(conn.feed(&input[..split], Some(&mut log)));
            assert!(conn.feed(&input[split..], Some(&mut log)));
            assert_eq!(conn.out, b"+OK\r\n$3\r\nxxx\r\n");
            assert_eq!(log, set);
        }
        // Inline commands are the protocol too; garbage is not.
        let mut conn = Conn::default();
        assert!(conn.feed(b"PING\r\n", None));
        assert_eq!(conn.out, b"+PONG\r\n");
        assert!(!Conn::default().feed(b"*1\r\n$x\r\n", None));
    }

    #[test]
    fn a_client_that_never_reads_is_cut_off() {
        let mut conn = Conn::default();
        let pings = b"PING\r\n".repeat(1 << 20);
        let mut open = true;
        for _ in 0..16 {
            open = conn.feed(&pings, None);
            if !open {
                break;
            }
        }
        assert!(!open, "{} bytes of replies kept", conn.out.len());
        assert!(conn.out.len() <= super::MAX_UNSENT + 7);
    }
}
