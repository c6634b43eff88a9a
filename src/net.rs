//! Socket helpers below the event loop: binding listeners (at startup and
//! for CONFIG SET port), TCP keepalive, who counts as a local peer.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;

use mio::net::TcpListener;
use tracing::info;

use crate::config::Config;

/// Listen on `port` at every `bind` address (none when the port is 0).
pub fn bind_tcp_listeners(config: &Config) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    if config.port == 0 {
        return Ok(listeners);
    }
    for addr in &config.bind {
        let addr = addr.trim_start_matches('-');
        let sa: SocketAddr = if addr.contains(':') && !addr.starts_with('[') {
            format!("[{addr}]:{}", config.port).parse()
        } else {
            format!("{addr}:{}", config.port).parse()
        }
        .or_else(|_| {
            (addr, config.port)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address"))
        })?;
        let l = bind_tcp(sa, config.tcp_backlog as i32)?;
        if config.socket_mark_id > 0 {
            set_socket_mark(l.as_raw_fd(), config.socket_mark_id);
        }
        info!("Listening on {}", l.local_addr()?);
        listeners.push(l);
    }
    Ok(listeners)
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

fn bind_tcp(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    // SAFETY: re-issuing listen() on a bound socket to apply our backlog.
    unsafe { libc::listen(std_listener.as_raw_fd(), backlog.max(1)) };
    Ok(TcpListener::from_std(std_listener))
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
