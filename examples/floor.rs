//! The floor under a server's CPU per request on this machine: a responder
//! that does only what every Redis-compatible server must do per request —
//! receive it, frame it as RESP, send a reply — and nothing else (no
//! keyspace, no commands: `GET` is answered with a fixed 3-byte value,
//! `CONFIG GET name` with an empty value, everything else with `+OK`).
//! Whatever it spends per request is the kernel's share (the sockets, the
//! loopback delivery, the waits) plus framing, so no server built on the
//! same system calls can spend less; `scripts/bench-floor.sh` runs it beside
//! kvstore and redis-server.
//!
//! Engines, as kvstore's: `epoll` (mio; one read per readable socket, the
//! turn's replies written at the end of the turn, as Redis's beforeSleep
//! does) and `io_uring` (multishot receives into a provided buffer ring,
//! the turn's sends submitted by the `io_uring_enter` that waits for the
//! next completions, `SINGLE_ISSUER | DEFER_TASKRUN`). With `--aof FILE` the
//! bytes of every command but GET are appended to FILE with one `write(2)`
//! a turn before the turn's replies, and a thread calls `fdatasync` once a
//! second: the work of `appendfsync everysec`.
//!
//! `cargo run --release --example floor -- --port 7000 --engine io_uring [--aof FILE]`

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// Frame the complete commands at the start of `input`, append their
/// replies to `out` and the bytes of those other than GET to `log`; return
/// how many bytes were consumed, or `None` for input that is not RESP.
fn respond(input: &[u8], out: &mut Vec<u8>, log: Option<&mut Vec<u8>>) -> Option<usize> {
    let mut log = log;
    let mut pos = 0;
    loop {
        let start = pos;
        let Some((argc, next)) = header(input, pos, b'*')? else {
            return Some(start);
        };
        pos = next;
        let mut first: &[u8] = &[];
        let mut third: &[u8] = &[];
        let mut complete = true;
        for i in 0..argc {
            let Some((len, next)) = header(input, pos, b'$')? else {
                complete = false;
                break;
            };
            if input.len() < next + len + 2 {
                complete = false;
                break;
            }
            let arg = &input[next..next + len];
            if i == 0 {
                first = arg;
            } else if i == 2 {
                third = arg;
            }
            pos = next + len + 2;
        }
        if !complete {
            return Some(start);
        }
        if first.eq_ignore_ascii_case(b"GET") {
            out.extend_from_slice(b"$3\r\nxxx\r\n");
            continue;
        }
        if first.eq_ignore_ascii_case(b"CONFIG") {
            out.extend_from_slice(format!("*2\r\n${}\r\n", third.len()).as_bytes());
            out.extend_from_slice(third);
            out.extend_from_slice(b"\r\n$0\r\n\r\n");
        } else if first.eq_ignore_ascii_case(b"PING") {
            out.extend_from_slice(b"+PONG\r\n");
        } else {
            out.extend_from_slice(b"+OK\r\n");
        }
        if let Some(log) = log.as_deref_mut() {
            log.extend_from_slice(&input[start..pos]);
        }
    }
}

/// `<kind><number>\r\n` at `pos`: `Some(None)` when incomplete, `None` when
/// malformed.
fn header(input: &[u8], pos: usize, kind: u8) -> Option<Option<(usize, usize)>> {
    let Some(&first) = input.get(pos) else {
        return Some(None);
    };
    if first != kind {
        return None;
    }
    let mut n: usize = 0;
    for (i, &b) in input[pos + 1..].iter().enumerate() {
        match b {
            b'0'..=b'9' if i < 10 => n = n * 10 + (b - b'0') as usize,
            b'\r' if i > 0 => {
                return match input.get(pos + 1 + i + 1) {
                    None => Some(None),
                    Some(b'\n') => Some(Some((n, pos + i + 3))),
                    Some(_) => None,
                };
            }
            _ => return None,
        }
    }
    Some(None)
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

/// One connection's input not yet framed and replies not yet sent.
#[derive(Default)]
struct Conn {
    input: Vec<u8>,
    out: Vec<u8>,
}

impl Conn {
    /// Take `data`, answer what is complete; false for a protocol error.
    fn feed(&mut self, data: &[u8], log: Option<&mut Vec<u8>>) -> bool {
        let consumed = if self.input.is_empty() {
            match respond(data, &mut self.out, log) {
                Some(n) => {
                    self.input.extend_from_slice(&data[n..]);
                    return true;
                }
                None => return false,
            }
        } else {
            self.input.extend_from_slice(data);
            respond(&self.input, &mut self.out, log)
        };
        match consumed {
            Some(n) => {
                self.input.drain(..n);
                true
            }
            None => false,
        }
    }
}

fn run_epoll(listener: TcpListener, mut aof: Option<File>) -> io::Result<()> {
    use mio::net::{TcpListener as MioListener, TcpStream};
    use mio::{Events, Interest, Poll, Token};

    const LISTENER: Token = Token(usize::MAX);
    listener.set_nonblocking(true)?;
    let mut listener = MioListener::from_std(listener);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: Vec<Option<(TcpStream, Conn)>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 16 * 1024];
    let mut log = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    loop {
        poll.poll(&mut events, None)?;
        for event in events.iter() {
            if event.token() == LISTENER {
                while let Ok((mut stream, _)) = listener.accept() {
                    stream.set_nodelay(true)?;
                    let slot = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
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
        if let (Some(file), false) = (aof.as_mut(), log.is_empty()) {
            file.write_all(&log)?;
            log.clear();
        }
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

const BUF_SIZE: usize = 8 * 1024;
const BUF_COUNT: u16 = 256;
const ACCEPT: u64 = u64::MAX;

/// Anonymous page-aligned memory the kernel reads or writes.
fn region(len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh private anonymous mapping, checked below, never unmapped.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr as *mut u8)
}

struct UringConn {
    fd: RawFd,
    /// Tells this connection's completions from those of a slot's former
    /// holder.
    id: u32,
    /// The receive ended; the socket closes once no send is in flight.
    closed: bool,
    conn: Conn,
    /// The bytes a send in flight reads: untouched until its completion.
    sending: Vec<u8>,
    in_flight: bool,
}

/// An operation's user data: a send or a receive, the connection's id, its slot.
fn tag(slot: usize, id: u32, send: bool) -> u64 {
    (send as u64) << 63 | (id as u64) << 32 | slot as u32 as u64
}

fn close(fd: RawFd) {
    // SAFETY: the socket of a connection that ends, closed once.
    unsafe { libc::close(fd) };
}

fn run_uring(listener: TcpListener, mut aof: Option<File>) -> io::Result<()> {
    let mut ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(8192)
        .build(1024)?;
    let bufs = region(BUF_SIZE * BUF_COUNT as usize)?;
    let buf_ring = region(4096)?;
    // SAFETY: both regions live until the process exits.
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(buf_ring as u64, BUF_COUNT, 0, 0)?
    };
    let mut tail: u16 = 0;
    let recycle = |tail: &mut u16, bid: u16| {
        let at = (*tail & (BUF_COUNT - 1)) as usize;
        // SAFETY: `at` is inside the buffer ring, the buffer inside `bufs`.
        let entry = unsafe { &mut *(buf_ring as *mut types::BufRingEntry).add(at) };
        entry.set_addr(unsafe { bufs.add(bid as usize * BUF_SIZE) } as u64);
        entry.set_len(BUF_SIZE as u32);
        entry.set_bid(bid);
        *tail = tail.wrapping_add(1);
    };
    let publish = |tail: u16| {
        // SAFETY: the ring's tail, a u16 the kernel reads atomically.
        let at = unsafe {
            &*(types::BufRingEntry::tail(buf_ring as *const types::BufRingEntry)
                as *const AtomicU16)
        };
        at.store(tail, Ordering::Release);
    };
    for bid in 0..BUF_COUNT {
        recycle(&mut tail, bid);
    }
    publish(tail);

    let push = |ring: &mut IoUring, entry: squeue::Entry| loop {
        // SAFETY: what entries point to stays valid until their completion.
        if unsafe { ring.submission().push(&entry) }.is_ok() {
            return;
        }
        let _ = ring.submit();
    };
    let accept = |ring: &mut IoUring| {
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .build()
            .user_data(ACCEPT);
        push(ring, entry);
    };
    let recv = |ring: &mut IoUring, c: &UringConn, slot: usize| {
        let entry = opcode::RecvMulti::new(types::Fd(c.fd), 0)
            .build()
            .user_data(tag(slot, c.id, false));
        push(ring, entry);
    };
    let mut next_id = 0u32;
    accept(&mut ring);
    let mut conns: Vec<Option<UringConn>> = Vec::new();
    let mut sends = 0usize;
    let mut log = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut cqes: Vec<(u64, i32, u32)> = Vec::new();
    loop {
        publish(tail);
        match ring.submitter().submit_and_wait(sends + 1) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        cqes.extend(
            ring.completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for (data, result, flags) in cqes.drain(..) {
            let send = data >> 63 == 1 && data != ACCEPT;
            if data == ACCEPT {
                if result >= 0 {
                    let fd = result;
                    let one: libc::c_int = 1;
                    // SAFETY: setting TCP_NODELAY on the socket just accepted.
                    unsafe {
                        libc::setsockopt(
                            fd,
                            libc::IPPROTO_TCP,
                            libc::TCP_NODELAY,
                            &one as *const _ as *const libc::c_void,
                            std::mem::size_of::<libc::c_int>() as u32,
                        )
                    };
                    let slot = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    next_id = next_id.wrapping_add(1) & 0x7fff_ffff;
                    let c = UringConn {
                        fd,
                        id: next_id,
                        closed: false,
                        conn: Conn::default(),
                        sending: Vec::new(),
                        in_flight: false,
                    };
                    recv(&mut ring, &c, slot);
                    conns[slot] = Some(c);
                }
                if !cqueue::more(flags) {
                    accept(&mut ring);
                }
                continue;
            }
            let slot = data as u32 as usize;
            let id = (data >> 32) as u32 & 0x7fff_ffff;
            let mine = conns[slot].as_ref().is_some_and(|c| c.id == id);
            if send {
                sends -= 1;
                let Some(c) = conns[slot].as_mut().filter(|_| mine) else {
                    continue;
                };
                c.in_flight = false;
                if c.closed {
                    close(c.fd);
                    conns[slot] = None;
                    continue;
                }
                if result > 0 {
                    c.sending.drain(..result as usize);
                } else if result != -libc::EAGAIN {
                    c.sending.clear();
                }
                if !c.sending.is_empty() || !c.conn.out.is_empty() {
                    pending.push(slot);
                }
                continue;
            }
            let mut open = result > 0 || result == -libc::ENOBUFS;
            if let Some(bid) = cqueue::buffer_select(flags) {
                if let Some(c) = conns[slot].as_mut().filter(|_| mine && result > 0) {
                    // SAFETY: the kernel filled `result` bytes of buffer `bid`.
                    let data = unsafe {
                        std::slice::from_raw_parts(
                            bufs.add(bid as usize * BUF_SIZE),
                            result as usize,
                        )
                    };
                    open = c.conn.feed(data, aof.as_ref().map(|_| &mut log));
                    if !c.conn.out.is_empty() {
                        pending.push(slot);
                    }
                }
                recycle(&mut tail, bid);
            }
            match conns[slot].as_mut().filter(|_| mine) {
                Some(c) if !open => {
                    if cqueue::more(flags) {
                        // Ends the receive: its last completion comes later.
                        // SAFETY: a socket this connection owns.
                        unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
                    } else if c.in_flight {
                        c.closed = true;
                    } else {
                        close(c.fd);
                        conns[slot] = None;
                    }
                }
                Some(c) if !cqueue::more(flags) => recv(&mut ring, c, slot),
                _ => {}
            }
        }
        if let (Some(file), false) = (aof.as_mut(), log.is_empty()) {
            file.write_all(&log)?;
            log.clear();
        }
        for slot in pending.drain(..) {
            let Some(c) = conns[slot].as_mut() else {
                continue;
            };
            if c.in_flight {
                continue;
            }
            if c.sending.is_empty() {
                std::mem::swap(&mut c.sending, &mut c.conn.out);
            }
            if c.sending.is_empty() {
                continue;
            }
            let entry =
                opcode::Send::new(types::Fd(c.fd), c.sending.as_ptr(), c.sending.len() as u32)
                    .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                    .build()
                    .user_data(tag(slot, c.id, true));
            push(&mut ring, entry);
            c.in_flight = true;
            sends += 1;
        }
    }
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
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    match engine.as_str() {
        "epoll" => run_epoll(listener, aof),
        "io_uring" => run_uring(listener, aof),
        _ => panic!("--engine epoll or io_uring"),
    }
}

#[cfg(test)]
mod tests {
    use super::respond;

    #[test]
    fn frames_commands_across_splits() {
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
        let input = [&set[..], b"*2\r\n$3\r\nget\r\n$1\r\nk\r\n"].concat();
        for split in 0..input.len() {
            let mut out = Vec::new();
            let mut log = Vec::new();
            let n = respond(&input[..split], &mut out, Some(&mut log)).unwrap();
            let rest = [&input[n..split], &input[split..]].concat();
            let m = respond(&rest, &mut out, Some(&mut log)).unwrap();
            assert_eq!(m, rest.len());
            assert_eq!(out, b"+OK\r\n$3\r\nxxx\r\n");
            assert_eq!(log, set);
        }
        assert_eq!(respond(b"PING\r\n", &mut Vec::new(), None), None);
    }
}
