//! Test support: start kvstore (or a real redis-server) on an ephemeral port
//! in a temporary directory, talk raw RESP to it, and clean up on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server process, killed when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub name: &'static str,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_ready(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            if s.write_all(b"PING\r\n").is_ok() {
                let mut buf = [0u8; 64];
                if let Ok(n) = s.read(&mut buf) {
                    if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH") {
                        return true;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Start kvstore with extra `--option value` arguments.
pub fn start_kvstore(args: &[&str]) -> ServerProcess {
    start_kvstore_in(tempfile::tempdir().unwrap(), args)
}

/// Start kvstore with `dir` as its data directory (kept by the process handle).
pub fn start_kvstore_in(dir: tempfile::TempDir, args: &[&str]) -> ServerProcess {
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvstore"));
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
        ])
        .arg(dir.path())
        .args(["--logfile", "kvstore.log"])
        .args(args)
        .stdout(Stdio::null())
        // A panic message must reach the test output.
        .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("start kvstore");
        if wait_ready(port, &mut child) {
            return ServerProcess {
                child,
                port,
                dir,
                name: "kvstore",
            };
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("kvstore did not start");
}

/// Path of a real redis-server, if installed.
pub fn redis_server_path() -> Option<PathBuf> {
    for p in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"] {
        if std::path::Path::new(p).exists() {
            return Some(PathBuf::from(p));
        }
    }
    None
}

/// Start a real redis-server, or explain why not. In CI (`CI=true`) a
/// missing redis-server is a failure, elsewhere the caller skips.
pub fn start_redis(args: &[&str]) -> Option<ServerProcess> {
    let Some(bin) = redis_server_path() else {
        if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
            panic!("redis-server is required in CI (apt-get install redis-server)");
        }
        eprintln!("SKIPPED: redis-server not installed; differential test not run");
        return None;
    };
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut child = Command::new(&bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        if wait_ready(port, &mut child) {
            return Some(ServerProcess {
                child,
                port,
                dir,
                name: "redis",
            });
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("redis-server did not start");
}

/// A raw RESP connection.
pub struct Conn {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.send_raw(&encode(args));
    }

    /// Run a command and return its raw reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.read_reply()
    }

    /// Run a command given as strings.
    pub fn cmd_str(&mut self, args: &[&str]) -> Vec<u8> {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd(&v)
    }

    /// Read exactly one complete RESP2/RESP3 reply, raw.
    pub fn read_reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        read_value(&mut self.reader, &mut out).expect("reply");
        out
    }

    /// Read one reply, or None when the server closed the connection.
    pub fn try_read_reply(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        read_value(&mut self.reader, &mut out).ok()?;
        Some(out)
    }
}

/// Encode a command as a RESP multibulk.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

fn read_line(r: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed",
        ));
    }
    out.extend_from_slice(&line);
    Ok(line)
}

fn read_value(r: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<()> {
    let line = read_line(r, out)?;
    let body = std::str::from_utf8(&line[1..line.len().saturating_sub(2)])
        .unwrap_or("")
        .to_string();
    match line[0] {
        b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => Ok(()),
        b'$' | b'=' | b'!' => {
            let n: i64 = body.parse().unwrap_or(-1);
            if n >= 0 {
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf)?;
                out.extend_from_slice(&buf);
            }
            Ok(())
        }
        b'*' | b'~' | b'>' => {
            let n: i64 = body.parse().unwrap_or(-1);
            for _ in 0..n.max(0) {
                read_value(r, out)?;
            }
            Ok(())
        }
        b'%' => {
            let n: i64 = body.parse().unwrap_or(-1);
            for _ in 0..n.max(0) * 2 {
                read_value(r, out)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
