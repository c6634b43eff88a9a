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
    start_kvstore_env(dir, args, &[])
}

/// Start kvstore on a copy of the dump file `rdb` (another server's), in a
/// data directory of its own.
#[allow(dead_code)]
pub fn start_kvstore_on_dump(rdb: &std::path::Path, args: &[&str]) -> ServerProcess {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(rdb, dir.path().join("dump.rdb")).unwrap();
    start_kvstore_in(dir, args)
}

/// `--io-engine` as `KVSTORE_TEST_IO_ENGINE` says (CI runs the suite with
/// each engine); nothing when unset (the server's default, io_uring). A
/// test's own arguments come after, so they win.
pub fn io_engine_args() -> Vec<String> {
    match std::env::var("KVSTORE_TEST_IO_ENGINE") {
        Ok(e) if !e.is_empty() => vec!["--io-engine".into(), e],
        _ => Vec::new(),
    }
}

/// Start kvstore in `dir` with extra environment variables.
pub fn start_kvstore_env(
    dir: tempfile::TempDir,
    args: &[&str],
    envs: &[(&str, &str)],
) -> ServerProcess {
    start_kvstore_cmd(dir, args, &mut |cmd| {
        cmd.envs(envs.iter().copied());
    })
}

/// Start kvstore in `dir` whose files cannot grow past `bytes`
/// (RLIMIT_FSIZE, with SIGXFSZ ignored so that a write past it fails with
/// EFBIG instead of killing the process): a disk that fills up.
#[allow(dead_code)]
pub fn start_kvstore_file_limit(
    dir: tempfile::TempDir,
    args: &[&str],
    bytes: u64,
) -> ServerProcess {
    use std::os::unix::process::CommandExt;
    start_kvstore_cmd(dir, args, &mut |cmd| {
        // SAFETY: setrlimit and signal are async-signal-safe; nothing else
        // runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    })
}

/// Start kvstore in `dir`, `setup` adding to its command.
fn start_kvstore_cmd(
    dir: tempfile::TempDir,
    args: &[&str],
    setup: &mut dyn FnMut(&mut Command),
) -> ServerProcess {
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvstore"));
        setup(&mut cmd);
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
        // As Redis's own test suite (tests/assets/default.conf): a full
        // sync starts at once instead of waiting 5 s for more replicas.
        .args(["--repl-diskless-sync-delay", "0"])
        .args(io_engine_args())
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

/// A Python interpreter with redis-py. The Debian package's module is the
/// system interpreter's, which a `python3` earlier on the PATH (pyenv, a
/// venv) may not see. Missing, it fails the test under CI; elsewhere it
/// says the check did not run and gives `None`.
pub fn python_with_redis_py(check: &str) -> Option<&'static str> {
    let python = ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import redis"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if python.is_none() {
        assert!(
            !in_ci(),
            "redis-py is required under CI (apt-get install python3-redis)"
        );
        eprintln!("SKIPPED: redis-py (python3-redis) is not installed; {check} did not run");
    }
    python
}

/// Running under CI (`CI=true` or `CI=1`)?
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A program found on PATH (then in /usr/bin and /usr/local/bin), as
/// `.ci/run` finds it.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin".into(), "/usr/local/bin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A tool from Redis's packages that a cross-check needs. Missing, it fails
/// the test — a skipped check must not look like a passed one — unless
/// `KVSTORE_SKIP_REDIS=1` asks to skip explicitly (never under CI).
pub fn require_tool(name: &str) -> Option<PathBuf> {
    if let Some(p) = find_tool(name) {
        return Some(p);
    }
    let skip = std::env::var("KVSTORE_SKIP_REDIS").is_ok_and(|v| v == "1");
    if skip && !in_ci() {
        eprintln!("SKIPPED (KVSTORE_SKIP_REDIS=1): {name} not installed; this check did not run");
        return None;
    }
    panic!(
        "{name} is required for this check (apt-get install redis-server redis-tools), \
         or set KVSTORE_SKIP_REDIS=1 to skip it explicitly outside CI"
    );
}

/// Path of a real redis-server, if installed.
pub fn redis_server_path() -> Option<PathBuf> {
    find_tool("redis-server")
}

/// Start a real redis-server. Without one the test fails, unless
/// `KVSTORE_SKIP_REDIS=1` (outside CI) skips it: then `None`.
pub fn start_redis(args: &[&str]) -> Option<ServerProcess> {
    let bin = require_tool("redis-server")?;
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

/// Start `redis-server --sentinel` on a config file written into `dir`:
/// `port` and `bind` lines first, then `body`. A port taken between
/// `free_port` and the sentinel's bind (another test's server) makes the
/// sentinel exit: it is started again on a new port until it answers PING.
pub fn start_sentinel(
    redis: &std::path::Path,
    dir: &std::path::Path,
    body: &str,
) -> (KillOnDrop, u16) {
    let conf = dir.join("sentinel.conf");
    for _ in 0..5 {
        let port = free_port();
        std::fs::write(
            &conf,
            format!("port {port}\nbind 127.0.0.1\ndir {}\n{body}", dir.display()),
        )
        .unwrap();
        let mut child = Command::new(redis)
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server --sentinel");
        if wait_ready(port, &mut child) {
            return (KillOnDrop(child), port);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("redis-server --sentinel did not start");
}

/// A raw RESP connection.
pub struct Conn {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
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

    /// Run a command given as strings; an I/O error (the server closed or
    /// stopped answering) is returned, not a panic.
    pub fn try_cmd_str(&mut self, args: &[&str]) -> Result<Vec<u8>, String> {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.writer
            .write_all(&encode(&v))
            .map_err(|e| format!("sending {args:?}: {e}"))?;
        let mut out = Vec::new();
        read_value(&mut self.reader, &mut out)
            .map_err(|e| format!("reading reply to {args:?}: {e}"))?;
        Ok(out)
    }

    /// Run a command; an I/O error (the server closed or stopped
    /// answering) is returned, not a panic.
    pub fn try_cmd(&mut self, args: &[&[u8]]) -> Result<Vec<u8>, String> {
        self.writer
            .write_all(&encode(args))
            .map_err(|e| format!("sending: {e}"))?;
        let mut out = Vec::new();
        read_value(&mut self.reader, &mut out).map_err(|e| format!("reading the reply: {e}"))?;
        Ok(out)
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

    /// Read one reply, or None when the server closed the connection. A
    /// server that neither replies nor closes within 5 s fails the test (it
    /// must not pass as "closed").
    pub fn try_read_reply(&mut self) -> Option<Vec<u8>> {
        let s = self.reader.get_ref();
        s.set_read_timeout(Some(CLOSE_TIMEOUT)).unwrap();
        let mut out = Vec::new();
        let res = read_value(&mut self.reader, &mut out);
        self.reader
            .get_ref()
            .set_read_timeout(Some(READ_TIMEOUT))
            .unwrap();
        match res {
            Ok(()) => Some(out),
            Err(e) if is_closed(&e) && out.is_empty() => None,
            Err(e) => panic!(
                "expected a reply or the connection closed, got {e} after {:?}",
                String::from_utf8_lossy(&out)
            ),
        }
    }

    /// The server must close the connection (EOF or reset) without sending
    /// anything more, within 5 s.
    pub fn expect_closed(&mut self) {
        if let Some(reply) = self.try_read_reply() {
            panic!(
                "expected the connection closed, got {:?}",
                String::from_utf8_lossy(&reply)
            );
        }
    }

    /// Send a command after which the server must close the connection
    /// (QUIT): its reply is read, then the close.
    pub fn expect_closed_after(&mut self, args: &[&str]) {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&v);
        let _ = self.try_read_reply();
        self.expect_closed();
    }

    /// One line of text (without its CRLF or LF), e.g. a replication
    /// handshake reply.
    pub fn read_line(&mut self) -> String {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).expect("a line");
        String::from_utf8_lossy(&line)
            .trim_end_matches(['\r', '\n'])
            .to_string()
    }

    /// One field of an INFO section, trimmed.
    pub fn info_field(&mut self, section: &str, field: &str) -> String {
        let info = String::from_utf8_lossy(&self.cmd_str(&["INFO", section])).to_string();
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
            .trim()
            .to_string()
    }

    /// A number from INFO (`info_field`, parsed).
    pub fn info_num<T: std::str::FromStr>(&mut self, section: &str, field: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        self.info_field(section, field).parse().unwrap()
    }

    /// This connection's client id (CLIENT ID), as text.
    pub fn client_id(&mut self) -> String {
        let r = self.cmd_str(&["CLIENT", "ID"]);
        String::from_utf8_lossy(&r[1..r.len() - 2]).to_string()
    }

    /// Everything the server sends until it is quiet for `quiet` (or closes
    /// the connection): the bytes, and whether it closed.
    pub fn read_available(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        self.reader.get_ref().set_read_timeout(Some(quiet)).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        let closed = loop {
            match self.reader.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if is_closed(&e) => break true,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break false
                }
                Err(e) => panic!("reading from the server: {e}"),
            }
        };
        self.reader
            .get_ref()
            .set_read_timeout(Some(READ_TIMEOUT))
            .unwrap();
        (out, closed)
    }
}

/// Poll `cond` every 20 ms until it holds; fail the test after `secs`
/// seconds, naming `what` was awaited.
pub fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed when dropped, however the test ends.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start kvstore on a config file (`kvstore FILE --port P --dir D …`) and
/// connect once it listens. (With the file's engine, or the default:
/// `KVSTORE_TEST_IO_ENGINE` would show in a CONFIG REWRITE.)
pub fn start_kvstore_with_file(
    conf: &std::path::Path,
    dir: &std::path::Path,
    args: &[&str],
) -> (KillOnDrop, u16, Conn) {
    // As start_kvstore_in: a port another test took meanwhile makes this
    // server exit (or another answer); try another port.
    for _ in 0..5 {
        let port = free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvstore"))
            .arg(conf)
            .args(["--port", &port.to_string(), "--dir"])
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("start kvstore");
        if wait_ready(port, &mut child) {
            return (KillOnDrop(child), port, Conn::connect(port));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("kvstore did not start on its config file");
}

/// Run a command to completion, killing it (and failing the test) if it
/// takes longer than `limit`: a server that should refuse to start must not
/// hang the suite by starting.
pub fn output_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// How long a reply may take before a test fails.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to close a connection it must close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Did this read error mean the peer closed the connection?
fn is_closed(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    )
}

/// Where the RESP value starting at `raw[i]` ends (one past its last byte).
pub fn value_end(raw: &[u8], i: usize) -> usize {
    let nl = i + raw[i..]
        .iter()
        .position(|&b| b == b'\n')
        .expect("a complete reply");
    let n: i64 = std::str::from_utf8(&raw[i + 1..nl - 1])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    match raw[i] {
        b'$' | b'=' | b'!' if n >= 0 => nl + 1 + n as usize + 2,
        b'*' | b'~' | b'>' | b'%' => {
            let count = if raw[i] == b'%' { n * 2 } else { n };
            (0..count.max(0)).fold(nl + 1, |j, _| value_end(raw, j))
        }
        _ => nl + 1,
    }
}

/// An aggregate reply as its header line and its raw elements (a map's
/// fields and values in turn); `None` when the reply is not an aggregate.
pub fn aggregate_items(raw: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    if !matches!(raw.first(), Some(b'*' | b'~' | b'%' | b'>')) {
        return None;
    }
    let nl = raw.iter().position(|&b| b == b'\n')?;
    let n: i64 = std::str::from_utf8(&raw[1..nl - 1]).ok()?.parse().ok()?;
    let count = if raw[0] == b'%' { n * 2 } else { n };
    let mut items = Vec::new();
    let mut i = nl + 1;
    for _ in 0..count.max(0) {
        let end = value_end(raw, i);
        items.push(raw[i..end].to_vec());
        i = end;
    }
    Some((raw[..=nl].to_vec(), items))
}

/// The bytes of a bulk-string reply, without its framing.
pub fn bulk_payload(raw: &[u8]) -> Option<&[u8]> {
    if raw.first() != Some(&b'$') {
        return None;
    }
    let nl = raw.iter().position(|&b| b == b'\n')?;
    let n: usize = std::str::from_utf8(&raw[1..nl - 1]).ok()?.parse().ok()?;
    raw.get(nl + 1..nl + 1 + n)
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

/// Attach to a server as a replica (SYNC) and read past its snapshot: the
/// link then carries the command stream it propagates.
pub fn attach_as_replica(port: u16) -> TcpStream {
    let mut repl = TcpStream::connect(("127.0.0.1", port)).unwrap();
    repl.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    repl.write_all(b"SYNC\r\n").unwrap();
    // Newlines keep the link alive while the snapshot is made; then the
    // snapshot as `$<len>\r\n<bytes>` (no trailing CRLF).
    let mut byte = [0u8; 1];
    let mut header = Vec::new();
    loop {
        repl.read_exact(&mut byte).unwrap();
        if header.is_empty() && byte[0] == b'\n' {
            continue;
        }
        header.push(byte[0]);
        if header.ends_with(b"\r\n") {
            break;
        }
    }
    let len: usize = String::from_utf8_lossy(&header[1..header.len() - 2])
        .parse()
        .unwrap();
    let mut rdb = vec![0u8; len];
    repl.read_exact(&mut rdb).unwrap();
    repl
}

/// A small deterministic generator (xorshift), so a failure can be rerun
/// with its seed; test files add the draws they need (`impl Rng`).
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from the clock (never 0, which would stay 0).
    pub fn seeded() -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
        Rng(nanos | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An index below `n`.
    pub fn pick(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}
