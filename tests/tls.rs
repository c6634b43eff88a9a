//! TLS: redis-cli --tls and redis-py with ssl=True against kvstore, client
//! certificates (tls-auth-clients yes, optional, no), certificates reloaded
//! by CONFIG SET, encrypted keys, tls-protocols, and replication over TLS
//! with kvstore and redis-server on either side. Certificates are made by
//! `openssl` in a temporary directory, as Redis's gen-test-certs.sh does.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// A CA, a server certificate, a client certificate (both version 3, with
/// key usages) and a version 1 certificate without extensions.
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn make() -> Option<Certs> {
        require_tool("openssl")?;
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .output()
                .expect("openssl");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        std::fs::write(
            dir.path().join("ext.cnf"),
            "[server]\nkeyUsage = digitalSignature, keyEncipherment\nsubjectAltName = IP:127.0.0.1, DNS:localhost\n\
             [client]\nkeyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = clientAuth\n",
        )
        .unwrap();
        run(&["genrsa", "-out", "ca.key", "2048"]);
        run(&[
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-sha256",
            "-key",
            "ca.key",
            "-days",
            "30",
            "-subj",
            "/O=kvstore test/CN=Certificate Authority",
            "-out",
            "ca.crt",
        ]);
        for (name, cn, ext) in [
            ("server", "Server", Some("server")),
            ("client", "Client", Some("client")),
            ("other", "Other server", Some("server")),
            ("generic", "Generic v1", None),
        ] {
            run(&["genrsa", "-out", &format!("{name}.key"), "2048"]);
            run(&[
                "req",
                "-new",
                "-sha256",
                "-key",
                &format!("{name}.key"),
                "-subj",
                &format!("/O=kvstore test/CN={cn}"),
                "-out",
                &format!("{name}.csr"),
            ]);
            let mut args: Vec<String> = [
                "x509",
                "-req",
                "-sha256",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "30",
                "-in",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.push(format!("{name}.csr"));
            args.extend(["-out".to_string(), format!("{name}.crt")]);
            if let Some(ext) = ext {
                args.extend(["-extfile", "ext.cnf", "-extensions", ext].map(String::from));
            }
            run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        }
        // A certificate no authority here signed (self-signed, version 3).
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=stranger",
            "-keyout",
            "stranger.key",
            "-out",
            "stranger.crt",
        ]);
        // A version 1 certificate no authority signed (self-signed).
        run(&[
            "x509",
            "-req",
            "-sha256",
            "-in",
            "generic.csr",
            "-signkey",
            "generic.key",
            "-days",
            "30",
            "-out",
            "selfv1.crt",
        ]);
        // The server's key, encrypted (PKCS#8, PBES2, AES-256-CBC).
        run(&[
            "pkcs8",
            "-topk8",
            "-in",
            "server.key",
            "-out",
            "server.enc.key",
            "-passout",
            "pass:s3cret",
            "-v2",
            "aes-256-cbc",
        ]);
        Some(Certs { dir })
    }

    /// The server options of a TLS server on `tls_port`.
    fn server_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
        ]
    }

    /// redis-cli over TLS to `port`, with the client certificate or not.
    fn cli(&self, port: u16, with_cert: bool) -> Command {
        let mut cmd = Command::new(find_tool("redis-cli").expect("redis-cli"));
        cmd.args([
            "-p",
            &port.to_string(),
            "--tls",
            "--cacert",
            &self.path("ca.crt"),
        ]);
        if with_cert {
            cmd.args([
                "--cert",
                &self.path("client.crt"),
                "--key",
                &self.path("client.key"),
            ]);
        }
        cmd
    }

    /// The reply (stdout and stderr) of one redis-cli command over TLS.
    fn cli_run(&self, port: u16, with_cert: bool, args: &[&str]) -> String {
        let out = output_within(
            self.cli(port, with_cert).args(args).stdin(Stdio::null()),
            Duration::from_secs(20),
        );
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text.trim_end().to_string()
    }
}

fn args_ref(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn start_tls_kvstore(certs: &Certs, extra: &[&str]) -> (ServerProcess, u16) {
    let tls_port = free_port();
    let mut args = certs.server_args(tls_port);
    args.extend(extra.iter().map(|s| s.to_string()));
    (start_kvstore(&args_ref(&args)), tls_port)
}

/// The subject the server on `port` shows, as `openssl s_client` prints it.
fn served_subject(certs: &Certs, port: u16) -> String {
    let out = output_within(
        Command::new("openssl")
            .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
            .args([
                "-cert",
                &certs.path("client.crt"),
                "-key",
                &certs.path("client.key"),
            ])
            .args(["-CAfile", &certs.path("ca.crt")])
            .stdin(Stdio::null()),
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or("")
        .to_string()
}

#[test]
fn redis_cli_over_tls_with_client_certificates() {
    let Some(certs) = Certs::make() else { return };
    if require_tool("redis-cli").is_none() {
        return;
    }
    let (srv, tls_port) = start_tls_kvstore(&certs, &[]);
    assert_eq!(certs.cli_run(tls_port, true, &["PING"]), "PONG");
    assert_eq!(
        certs.cli_run(tls_port, true, &["SET", "k", "over tls"]),
        "OK"
    );
    // The same keyspace on the plain port.
    let mut plain = Conn::connect(srv.port);
    assert_eq!(plain.cmd_str(&["GET", "k"]), b"$8\r\nover tls\r\n");

    // A big value both ways: many records, partial writes, the socket full.
    let big: String = (0..3_000_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let file = certs.dir.path().join("big.txt");
    std::fs::write(&file, &big).unwrap();
    let out = output_within(
        certs
            .cli(tls_port, true)
            .args(["-x", "SET", "big"])
            .stdin(std::fs::File::open(&file).unwrap()),
        Duration::from_secs(30),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    assert_eq!(certs.cli_run(tls_port, true, &["STRLEN", "big"]), "3000000");
    // (to a file: the output is bigger than a pipe holds)
    let back = certs.dir.path().join("back.txt");
    let status = certs
        .cli(tls_port, true)
        .args(["--raw", "GET", "big"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&back).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let got = std::fs::read_to_string(&back).unwrap();
    assert!(
        got.trim_end() == big,
        "the value read back over TLS differs"
    );

    // tls-auth-clients yes (the default): no certificate, no service.
    let refused = certs.cli_run(tls_port, false, &["PING"]);
    assert_ne!(refused, "PONG", "a client without a certificate was served");
    assert_eq!(
        plain.cmd_str(&["CONFIG", "GET", "tls-auth-clients"]),
        b"*2\r\n$16\r\ntls-auth-clients\r\n$3\r\nyes\r\n"
    );
    assert_eq!(
        plain.cmd_str(&["CONFIG", "SET", "tls-auth-clients", "optional"]),
        b"+OK\r\n"
    );
    assert_eq!(certs.cli_run(tls_port, false, &["PING"]), "PONG");
    assert_eq!(certs.cli_run(tls_port, true, &["PING"]), "PONG");
    assert_eq!(
        plain.cmd_str(&["CONFIG", "SET", "tls-auth-clients", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(certs.cli_run(tls_port, false, &["PING"]), "PONG");
    assert_eq!(
        plain.cmd_str(&["CONFIG", "SET", "tls-auth-clients", "yes"]),
        b"+OK\r\n"
    );
    assert_ne!(certs.cli_run(tls_port, false, &["PING"]), "PONG");

    // A version 1 client certificate (no extensions) signed by the CA is
    // accepted, as OpenSSL accepts it; a self-signed one is not.
    let v1 = |cert: &str, key: &str| {
        let out = output_within(
            certs
                .cli(tls_port, false)
                .args([
                    "--cert",
                    &certs.path(cert),
                    "--key",
                    &certs.path(key),
                    "PING",
                ])
                .stdin(Stdio::null()),
            Duration::from_secs(20),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(v1("generic.crt", "generic.key"), "PONG");
    assert_ne!(v1("selfv1.crt", "generic.key"), "PONG");
    assert_ne!(v1("ca.crt", "ca.key"), "PONG");

    // A client that does not speak TLS gets nothing and is closed.
    let mut wrong = Conn::connect(tls_port);
    wrong.send(&[b"PING"]);
    wrong.expect_closed();
    // The server goes on.
    assert_eq!(plain.cmd_str(&["PING"]), b"+PONG\r\n");
}

#[test]
fn certificates_reload_on_config_set_and_tls_port_moves() {
    let Some(certs) = Certs::make() else { return };
    if require_tool("redis-cli").is_none() {
        return;
    }
    let (srv, tls_port) = start_tls_kvstore(&certs, &[]);
    let mut c = Conn::connect(srv.port);
    assert!(
        served_subject(&certs, tls_port).contains("CN = Server"),
        "{}",
        served_subject(&certs, tls_port)
    );
    // A new certificate is served to new connections.
    let mut use_cert = |name: &str| {
        let (cert, key) = (
            certs.path(&format!("{name}.crt")),
            certs.path(&format!("{name}.key")),
        );
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &cert,
            "tls-key-file",
            &key,
        ])
    };
    assert_eq!(use_cert("other"), b"+OK\r\n");
    assert!(served_subject(&certs, tls_port).contains("CN = Other server"));
    // A version 1 certificate (no extensions), which OpenSSL serves too.
    assert_eq!(use_cert("generic"), b"+OK\r\n");
    assert!(served_subject(&certs, tls_port).contains("CN = Generic v1"));
    assert_eq!(certs.cli_run(tls_port, true, &["PING"]), "PONG");
    assert_eq!(use_cert("other"), b"+OK\r\n");
    // A key that is not the certificate's, a missing file, an encrypted key
    // without its passphrase: refused, and nothing changes.
    let err = b"-ERR CONFIG SET failed (possibly related to argument 'tls-key-file') - Unable to update TLS configuration. Check server logs.\r\n";
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "tls-key-file", &certs.path("server.key")]),
        err
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "tls-key-file", "/nonexistent"]),
        err
    );
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "tls-cert-file", &certs.path("server.crt"), "tls-key-file", &certs.path("server.enc.key")]),
        b"-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.\r\n");
    let got = c.cmd_str(&["CONFIG", "GET", "tls-key-file"]);
    assert!(String::from_utf8_lossy(&got).contains("other.key"));
    assert!(served_subject(&certs, tls_port).contains("CN = Other server"));
    // With the passphrase the encrypted key loads.
    assert_eq!(
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &certs.path("server.crt"),
            "tls-key-file",
            &certs.path("server.enc.key"),
            "tls-key-file-pass",
            "s3cret"
        ]),
        b"+OK\r\n"
    );
    assert!(served_subject(&certs, tls_port).contains("CN = Server"));
    assert_eq!(certs.cli_run(tls_port, true, &["PING"]), "PONG");
    // The passphrase is not shown in the slow log.
    c.cmd_str(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd_str(&["CONFIG", "SET", "tls-key-file-pass", "s3cret"]);
    let log = c.cmd_str(&["SLOWLOG", "GET", "1"]);
    assert!(
        !String::from_utf8_lossy(&log).contains("s3cret"),
        "{}",
        String::from_utf8_lossy(&log)
    );
    c.cmd_str(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);

    // A new bind list applies to the TLS port too (127.0.0.1 → * overlaps:
    // the old listeners close first, as Redis).
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "bind", "*"]), b"+OK\r\n");
    assert_eq!(certs.cli_run(tls_port, true, &["PING"]), "PONG");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "bind", "127.0.0.1"]),
        b"+OK\r\n"
    );
    assert_eq!(certs.cli_run(tls_port, true, &["PING"]), "PONG");

    // tls-port moves; the old port closes. (A port found free can be
    // taken by another test's connection before the server binds it: then
    // another one is tried.)
    let mut new_port = free_port();
    let mut reply = Vec::new();
    for _ in 0..5 {
        reply = c.cmd_str(&["CONFIG", "SET", "tls-port", &new_port.to_string()]);
        if !String::from_utf8_lossy(&reply).contains("Unable to listen") {
            break;
        }
        new_port = free_port();
    }
    assert_eq!(reply, b"+OK\r\n");
    assert_eq!(certs.cli_run(new_port, true, &["PING"]), "PONG");
    assert!(std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err());
    assert_eq!(c.cmd_str(&["CONFIG", "SET", "tls-port", "0"]), b"+OK\r\n");
    assert!(std::net::TcpStream::connect(("127.0.0.1", new_port)).is_err());

    // Only TLS 1.2, then only 1.3.
    assert_eq!(
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "tls-port",
            &new_port.to_string(),
            "tls-protocols",
            "TLSv1.2"
        ]),
        b"+OK\r\n"
    );
    let proto = |flag: &str| {
        let out = output_within(
            Command::new("openssl")
                .args([
                    "s_client",
                    flag,
                    "-connect",
                    &format!("127.0.0.1:{new_port}"),
                ])
                .args([
                    "-cert",
                    &certs.path("client.crt"),
                    "-key",
                    &certs.path("client.key"),
                ])
                .stdin(Stdio::null()),
            Duration::from_secs(20),
        );
        String::from_utf8_lossy(&out.stdout).contains("New, TLSv1")
    };
    assert!(proto("-tls1_2"));
    assert!(!proto("-tls1_3"));
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "tls-protocols", "TLSv1.3"]),
        b"+OK\r\n"
    );
    assert!(!proto("-tls1_2"));
    assert!(proto("-tls1_3"));
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "tls-protocols", "SSLv3"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'tls-protocols') - Unable to update TLS configuration. Check server logs.\r\n"
    );
}

#[test]
fn redis_py_over_tls() {
    let Some(certs) = Certs::make() else { return };
    let Some(python) = python_with_redis_py("redis-py over TLS") else {
        return;
    };
    let (_srv, tls_port) = start_tls_kvstore(&certs, &[]);
    let script = format!(
        r#"
import redis
r = redis.Redis(host="127.0.0.1", port={tls_port}, ssl=True, ssl_certfile="{cert}",
                ssl_keyfile="{key}", ssl_ca_certs="{ca}", ssl_cert_reqs="required")
assert r.ping()
p = r.pipeline(transaction=False)
for i in range(2000):
    p.set("key:%d" % i, "value:%d" % i)
p.execute()
assert r.dbsize() == 2000
assert r.get("key:1999") == b"value:1999"
big = b"x" * (5 << 20)
r.set("big", big)
assert r.get("big") == big
with r.pipeline(transaction=True) as t:
    t.incr("n").incr("n")
    assert t.execute() == [1, 2]
print("ok")
"#,
        cert = certs.path("client.crt"),
        key = certs.path("client.key"),
        ca = certs.path("ca.crt"),
    );
    let out = output_within(
        Command::new(python).args(["-c", &script]),
        Duration::from_secs(60),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Options of a replica of `master_tls_port` over TLS, with certificate
/// `own` (its tls-cert-file) and `client` (tls-client-cert-file, if any).
fn replica_args_with(
    certs: &Certs,
    master_tls_port: u16,
    own: &str,
    client: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = vec!["--tls-replication".into(), "yes".into()];
    let mut files = vec![("cert", own)];
    files.extend(client.map(|c| ("client-cert", c)));
    for (option, name) in files {
        let key = option.replace("cert", "key");
        args.extend([
            format!("--tls-{option}-file"),
            certs.path(&format!("{name}.crt")),
        ]);
        args.extend([
            format!("--tls-{key}-file"),
            certs.path(&format!("{name}.key")),
        ]);
    }
    args.extend(["--tls-ca-cert-file".into(), certs.path("ca.crt")]);
    args.extend([
        "--replicaof".into(),
        "127.0.0.1".into(),
        master_tls_port.to_string(),
    ]);
    args
}

/// A replica showing the server certificate and the client certificate.
fn replica_args(certs: &Certs, master_tls_port: u16) -> Vec<String> {
    replica_args_with(certs, master_tls_port, "server", Some("client"))
}

fn wait_synced(replica: &mut Conn, master: &mut Conn, key: &str) {
    let want = master.cmd_str(&["GET", key]);
    wait_for("the replica to catch up over TLS", 30, || {
        replica.cmd_str(&["GET", key]) == want
    });
}

fn fill(c: &mut Conn, n: usize, prefix: &str) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
        for i in chunk {
            args.push(format!("{prefix}:{i}").into_bytes());
            args.push(format!("{i:0>200}").into_bytes());
        }
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        assert_eq!(c.cmd(&refs), b"+OK\r\n");
    }
}

#[test]
fn replication_over_tls_between_kvstores() {
    let Some(certs) = Certs::make() else { return };
    let (master, master_tls) = start_tls_kvstore(&certs, &[]);
    let mut m = Conn::connect(master.port);
    fill(&mut m, 20_000, "before");
    // A dump sent from the file, then one streamed (diskless).
    for diskless in ["no", "yes"] {
        m.cmd_str(&["CONFIG", "SET", "repl-diskless-sync", diskless]);
        m.cmd_str(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
        let args = replica_args(&certs, master_tls);
        let replica = start_kvstore(&args_ref(&args));
        let mut r = Conn::connect(replica.port);
        wait_for("master_link_status:up over TLS", 30, || {
            r.info_field("replication", "master_link_status") == "up"
        });
        m.cmd_str(&["SET", "after", diskless]);
        wait_synced(&mut r, &mut m, "after");
        assert_eq!(r.cmd_str(&["DBSIZE"]), m.cmd_str(&["DBSIZE"]));
        assert_eq!(
            r.cmd_str(&["GET", "before:19999"]),
            m.cmd_str(&["GET", "before:19999"])
        );
        // The stream goes on over TLS.
        fill(&mut m, 2_000, "stream");
        m.cmd_str(&["SET", "last", diskless]);
        wait_synced(&mut r, &mut m, "last");
        assert_eq!(r.cmd_str(&["DBSIZE"]), m.cmd_str(&["DBSIZE"]));
    }
    // A replica whose certificate the master does not trust cannot sync.
    let args = replica_args_with(&certs, master_tls, "stranger", None);
    let stranger = start_kvstore(&args_ref(&args));
    let mut s = Conn::connect(stranger.port);
    std::thread::sleep(Duration::from_millis(1500));
    assert_ne!(s.info_field("replication", "master_link_status"), "up");
    assert_eq!(s.cmd_str(&["DBSIZE"]), b":0\r\n");

    // A replica showing a version 1 certificate (its tls-cert-file, with no
    // tls-client-cert-file) syncs, as Redis's own TLS test has it.
    let args = replica_args_with(&certs, master_tls, "generic", None);
    let generic = start_kvstore(&args_ref(&args));
    let mut g = Conn::connect(generic.port);
    m.cmd_str(&["SET", "v1", "yes"]);
    wait_synced(&mut g, &mut m, "v1");
}

/// kvstore replicates from redis-server over TLS, and redis-server from
/// kvstore: each accepts the other's TLS and stream.
#[test]
fn replication_over_tls_with_redis_server() {
    let Some(certs) = Certs::make() else { return };
    let redis_tls = free_port();
    let Some(redis) = start_redis(&args_ref(&certs.server_args(redis_tls))) else {
        return;
    };
    let mut rm = Conn::connect(redis.port);
    fill(&mut rm, 5_000, "from-redis");
    let args = replica_args(&certs, redis_tls);
    let replica = start_kvstore(&args_ref(&args));
    let mut r = Conn::connect(replica.port);
    rm.cmd_str(&["SET", "mark", "1"]);
    wait_synced(&mut r, &mut rm, "mark");
    assert_eq!(r.cmd_str(&["DBSIZE"]), rm.cmd_str(&["DBSIZE"]));

    let (master, master_tls) = start_tls_kvstore(&certs, &[]);
    let mut km = Conn::connect(master.port);
    fill(&mut km, 5_000, "from-kvstore");
    let args = replica_args(&certs, master_tls);
    let redis_replica = start_redis(&args_ref(&args)).unwrap();
    let mut rr = Conn::connect(redis_replica.port);
    km.cmd_str(&["SET", "mark", "2"]);
    wait_synced(&mut rr, &mut km, "mark");
    assert_eq!(rr.cmd_str(&["DBSIZE"]), km.cmd_str(&["DBSIZE"]));
}

/// A server whose TLS files do not load does not start, and says why.
#[test]
fn bad_tls_configuration_stops_the_start() {
    let Some(certs) = Certs::make() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["--port".into(), free_port().to_string()];
        args.extend(certs.server_args(free_port()));
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["--dir".into(), dir.path().to_string_lossy().into_owned()]);
        let out = output_within(
            Command::new(env!("CARGO_BIN_EXE_kvstore")).args(&args),
            Duration::from_secs(20),
        );
        assert!(!out.status.success());
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text
    };
    let text = run(&["--tls-key-file", &certs.path("client.key")]);
    assert!(text.contains("is not the key of"), "{text}");
    assert!(text.contains("Failed to configure TLS"), "{text}");
    let text = run(&["--tls-ca-cert-file", ""]);
    assert!(
        text.contains("Either tls-ca-cert-file or tls-ca-cert-dir must be specified"),
        "{text}"
    );
}

/// TLS sessions resume while `tls-session-caching` is on and the session is
/// younger than `tls-session-cache-timeout`.
#[test]
fn sessions_resume_as_the_session_cache_options_say() {
    let Some(certs) = Certs::make() else { return };
    let (srv, tls_port) = start_tls_kvstore(&certs, &["--tls-protocols", "TLSv1.2"]);
    let mut c = Conn::connect(srv.port);
    let session = certs.dir.path().join("session.pem");
    // A first handshake saves the session, a second offers it back.
    let handshake = |save: bool| {
        let mut cmd = Command::new("openssl");
        cmd.args([
            "s_client",
            "-tls1_2",
            "-connect",
            &format!("127.0.0.1:{tls_port}"),
        ])
        .args([
            "-cert",
            &certs.path("client.crt"),
            "-key",
            &certs.path("client.key"),
        ])
        .arg(if save { "-sess_out" } else { "-sess_in" })
        .arg(&session)
        .stdin(Stdio::null());
        let out = output_within(&mut cmd, Duration::from_secs(20));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let resumed = || {
        assert!(handshake(true).contains("New, TLSv1.2"));
        handshake(false).contains("Reused, TLSv1.2")
    };
    assert!(resumed(), "a session was not resumed");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "tls-session-caching", "no"]),
        b"+OK\r\n"
    );
    assert!(!resumed(), "a session was resumed with caching off");
    assert_eq!(
        c.cmd_str(&[
            "CONFIG",
            "SET",
            "tls-session-caching",
            "yes",
            "tls-session-cache-timeout",
            "1"
        ]),
        b"+OK\r\n"
    );
    assert!(handshake(true).contains("New, TLSv1.2"));
    std::thread::sleep(Duration::from_millis(2100));
    assert!(
        !handshake(false).contains("Reused"),
        "a session past its timeout was resumed"
    );
}
