//! Socket helpers below the event loop: binding listeners (at startup and
//! for CONFIG SET port and bind), TCP keepalive, who counts as a local peer.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use mio::net::TcpListener;
use tracing::info;

use crate::config::Config;

/// Should accepting go on after `err`? These are the errors of a connection
/// that failed on its way in (Linux's accept(2) reports a new socket's
/// pending network error as its own, and the connection is gone), as Redis
/// 7.0.15's anetAcceptFailureNeedsRetry (its fix for CVE-2025-48367): the
/// next connection in the queue is accepted, so a peer that can make
/// connections fail cannot stop the server from accepting others. Any
/// other error (out of descriptors or memory) leaves the connection queued
/// and stops accepting for now.
pub fn accept_failure_needs_retry(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::ENETDOWN
                | libc::EPROTO
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH
        )
    )
}

/// Listen on `port` at every `bind` address (none when the port is 0), as
/// Redis 7.0 reads them: `*` is any IPv4 address and `::*` any IPv6 one
/// (IPv6 sockets are v6-only, so both can be bound), a leading `-` makes an
/// address optional (skipped when the host does not have it), and an
/// address family the host lacks is skipped. `current` are the listeners
/// open now with their addresses: one on an address asked for again is
/// shared (its socket duplicated) instead of bound a second time, so
/// CONFIG SET bind can keep an address it already listens on.
pub fn bind_tcp_listeners(
    config: &Config,
    current: &[(SocketAddr, RawFd)],
) -> io::Result<Vec<TcpListener>> {
    bind_port_listeners(config, config.port, current)
}

/// [`bind_tcp_listeners`] for `tls-port`.
pub fn bind_tls_listeners(
    config: &Config,
    current: &[(SocketAddr, RawFd)],
) -> io::Result<Vec<TcpListener>> {
    bind_port_listeners(config, config.tls.port, current)
}

fn bind_port_listeners(
    config: &Config,
    port: u16,
    current: &[(SocketAddr, RawFd)],
) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    if port == 0 {
        return Ok(listeners);
    }
    for entry in &config.bind {
        let (optional, addr) = match entry.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, entry.as_str()),
        };
        let result = resolve_bind(addr, port).and_then(|sa| {
            match current.iter().find(|(at, _)| *at == sa) {
                Some(&(_, fd)) => share_listener(fd),
                None => bind_tcp(sa, config.tcp_backlog as i32),
            }
        });
        let l = match result {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(
                    "Warning: Could not create server TCP listening socket {addr}:{port}: {e}"
                );
                let errno = e.raw_os_error().unwrap_or(0);
                if errno == libc::EADDRNOTAVAIL && optional {
                    continue;
                }
                if [
                    libc::ENOPROTOOPT,
                    libc::EPROTONOSUPPORT,
                    libc::ESOCKTNOSUPPORT,
                    libc::EPFNOSUPPORT,
                    libc::EAFNOSUPPORT,
                ]
                .contains(&errno)
                {
                    continue;
                }
                return Err(e);
            }
        };
        if config.socket_mark_id > 0 {
            set_socket_mark(l.as_raw_fd(), config.socket_mark_id);
        }
        info!("Listening on {}", l.local_addr()?);
        listeners.push(l);
    }
    Ok(listeners)
}

/// Close the listening sockets behind `fds` at once, each descriptor
/// number left open on /dev/null until its owner drops it (the loop swaps
/// its listeners at the start of the next turn), so that their addresses
/// can be bound again right away: Redis's changeBindAddr closes the old
/// listeners before it binds the new list (`127.0.0.1` → `*` overlaps).
pub fn release_listeners(fds: &[RawFd]) -> io::Result<()> {
    // SAFETY: opening /dev/null; the result is checked.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if null < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut result = Ok(());
    for &fd in fds {
        // SAFETY: `fd` is a listener descriptor this process owns; dup2
        // atomically closes the socket behind it and reuses the number.
        if unsafe { libc::dup3(null, fd, libc::O_CLOEXEC) } < 0 {
            result = Err(io::Error::last_os_error());
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(null) };
    result
}

/// SO_MARK on a listening socket (`socket-mark-id`, Redis's
/// anetSetSockMarkId): it needs CAP_NET_ADMIN; as in Redis a refusal does
/// not stop the server, but it is logged here.
fn set_socket_mark(fd: i32, mark: u32) {
    // SAFETY: setsockopt with a valid pointer to a u32 on our own socket.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MARK,
            &mark as *const u32 as *const libc::c_void,
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::warn!(
            "Can't set socket-mark-id {mark} on a listening socket: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The socket address of one `bind` entry (without its `-`).
fn resolve_bind(addr: &str, port: u16) -> io::Result<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    match addr {
        "*" => return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))),
        "::*" => return Ok(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))),
        _ => {}
    }
    if let Ok(ip) = addr.trim_start_matches('[').trim_end_matches(']').parse() {
        return Ok(SocketAddr::new(ip, port));
    }
    // A host name: its first address of the family Redis would ask for.
    let v6 = addr.contains(':');
    (addr, port)
        .to_socket_addrs()?
        .find(|a| a.is_ipv6() == v6)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EADDRNOTAVAIL))
}

/// Another handle on a listening socket already open.
fn share_listener(fd: RawFd) -> io::Result<TcpListener> {
    // SAFETY: duplicating a descriptor we own; the copy is owned by the
    // listener built from it.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is a fresh descriptor of a listening TCP socket.
    Ok(unsafe { TcpListener::from_raw_fd(dup) })
}

/// A non-blocking, close-on-exec TCP socket of `addr`'s family; the
/// caller's object takes it over (and closes it on any error after).
fn tcp_socket(addr: &SocketAddr) -> io::Result<RawFd> {
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: creating a socket; the result is checked.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// A non-blocking listening socket on `addr` with SO_REUSEADDR (and
/// IPV6_V6ONLY for IPv6, as Redis's anetV6Only).
fn bind_tcp(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let fd = tcp_socket(&addr)?;
    // SAFETY: `fd` is the socket just made; the listener owns it from here
    // and closes it on any error below.
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    let on: libc::c_int = 1;
    let set = |level, name| {
        // SAFETY: setsockopt with a pointer to an int on our socket.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                &on as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    set(libc::SOL_SOCKET, libc::SO_REUSEADDR);
    if addr.is_ipv6() && set(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) < 0 {
        return Err(io::Error::last_os_error());
    }
    let (storage, len) = sockaddr(&addr);
    // SAFETY: binding our socket to a sockaddr of the right length.
    if unsafe { libc::bind(fd, &storage as *const _ as *const libc::sockaddr, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: listen() on our bound socket.
    if unsafe { libc::listen(fd, backlog.max(1)) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

/// Start a non-blocking connection to `addr`, from the address `source`
/// when one is given (`bind-source-addr`). As Redis's best-effort binding
/// connect, a source the socket cannot be bound to is logged and the
/// connection made from whatever address the kernel picks.
pub fn connect_from(addr: SocketAddr, source: &str) -> io::Result<mio::net::TcpStream> {
    if source.is_empty() {
        return mio::net::TcpStream::connect(addr);
    }
    let fd = tcp_socket(&addr)?;
    // SAFETY: `fd` is the socket just made; the stream owns (and closes) it.
    let stream = unsafe { mio::net::TcpStream::from_raw_fd(fd) };
    let from = (source, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.find(|a| a.is_ipv6() == addr.is_ipv6()));
    match from {
        Some(from) => {
            let (storage, len) = sockaddr(&from);
            // SAFETY: binding our socket to a sockaddr of the right length.
            if unsafe { libc::bind(fd, &storage as *const _ as *const libc::sockaddr, len) } < 0 {
                tracing::warn!(
                    "Could not bind to the source address {source}: {}",
                    io::Error::last_os_error()
                );
            }
        }
        None => tracing::warn!("Could not resolve the source address {source}"),
    }
    let (storage, len) = sockaddr(&addr);
    // SAFETY: connecting our socket to a sockaddr of the right length.
    if unsafe { libc::connect(fd, &storage as *const _ as *const libc::sockaddr, len) } < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(stream)
}

/// `addr` as a C socket address and its length.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any
            // socket address.
            let sin = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above.
            let sin6 = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// TCP_NODELAY on or off for a socket (a failure changes nothing worth
/// reporting: the socket just keeps its setting).
pub fn set_nodelay(fd: i32, on: bool) {
    let value: libc::c_int = on.into();
    // SAFETY: setsockopt with a valid pointer to an int on a socket the
    // caller owns.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &value as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Shut a connection down in both directions at once, so that the peer
/// sees it end now; the descriptor stays open until its owner closes it
/// (a client killed by a command is torn down by the loop at the end of
/// the turn, but Redis frees it, closing the socket, at once).
pub fn shutdown(fd: i32) {
    if fd >= 0 {
        // SAFETY: shutdown(2) on a socket its caller owns; an fd that is
        // not a socket gets ENOTSOCK, nothing else.
        unsafe {
            libc::shutdown(fd, libc::SHUT_RDWR);
        }
    }
}

pub fn set_keepalive(fd: i32, interval: i64) {
    if interval <= 0 {
        return;
    }
    let on: libc::c_int = 1;
    let idle: libc::c_int = interval as libc::c_int;
    let intvl: libc::c_int = (interval / 3).max(1) as libc::c_int;
    let cnt: libc::c_int = 3;
    let sz = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt with valid pointers to ints on our own socket.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            &on as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            &idle as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            &intvl as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            &cnt as *const _ as *const libc::c_void,
            sz,
        );
    }
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
