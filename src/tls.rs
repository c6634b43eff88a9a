//! TLS on rustls (ring's crypto, no OpenSSL): the server and client
//! configurations built from the `tls-*` options (Redis's tlsConfigure),
//! and [`TlsStream`], a TLS connection as one more non-blocking state
//! machine over a socket of the event loop.
//!
//! A `TlsStream` reads and writes like the socket it wraps: `read` gives
//! plaintext (0 at the end of the stream, `WouldBlock` when the socket is
//! drained), `write` takes plaintext (`WouldBlock` when the socket is full).
//! Records the socket did not take wait in the stream ([`TlsStream::pending`])
//! and go out on [`TlsStream::flush`] when the socket becomes writable; the
//! handshake happens inside the reads and writes, as records come and go.
//! A read returns short only once the socket said `WouldBlock`, so an
//! edge-triggered poll never misses input held in the socket.

use std::io::{self, IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::client::ResolvesClientCert;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring as provider, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{
    ClientHello, NoServerSessionStorage, ResolvesServerCert, ServerSessionMemoryCache,
    WebPkiClientVerifier,
};
use rustls::sign::CertifiedKey;
use rustls::{
    ClientConfig, RootCertStore, ServerConfig, SignatureScheme, SupportedCipherSuite,
    SupportedProtocolVersion,
};
use tracing::warn;

use crate::config::{TlsAuthClients, TlsConfig};
use crate::util::der::Certificate;

/// The TLS configurations in force: for clients that connect to us and for
/// our connection to a master. Rebuilt whole when a `tls-*` option changes;
/// connections keep the configuration they started with.
#[derive(Clone)]
pub struct TlsContext {
    pub server: Arc<ServerConfig>,
    pub client: Arc<ClientConfig>,
}

/// Build both configurations from the options, loading every file they
/// name (Redis's tlsConfigure). The error says what is wrong, for the log.
pub fn configure(cfg: &TlsConfig) -> Result<TlsContext, String> {
    if cfg.cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if cfg.key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    let need_ca = cfg.auth_clients != TlsAuthClients::No || cfg.cluster || cfg.replication;
    if need_ca && cfg.ca_cert_file.is_empty() && cfg.ca_cert_dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
    }
    if !cfg.dh_params_file.is_empty() {
        std::fs::metadata(&cfg.dh_params_file)
            .map_err(|e| format!("Failed to load {}: {e}", cfg.dh_params_file))?;
    }
    let versions = parse_protocols(&cfg.protocols)?;
    let mut suites = Vec::new();
    if versions
        .iter()
        .any(|v| v.version == rustls::ProtocolVersion::TLSv1_3)
    {
        let tls13 = parse_ciphersuites(&cfg.ciphersuites)?;
        if tls13.is_empty() {
            return Err(format!(
                "Failed to configure ciphersuites: {}",
                cfg.ciphersuites
            ));
        }
        suites.extend(tls13);
    }
    if versions
        .iter()
        .any(|v| v.version == rustls::ProtocolVersion::TLSv1_2)
    {
        let tls12 = parse_ciphers(&cfg.ciphers);
        if tls12.is_empty() {
            return Err(format!("Failed to configure ciphers: {}", cfg.ciphers));
        }
        suites.extend(tls12);
    }
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..provider::default_provider()
    });
    // The authorities, as rustls keeps them and as found (for version 1
    // peer certificates: see tls_v1).
    let roots = if cfg.ca_cert_file.is_empty() && cfg.ca_cert_dir.is_empty() {
        None
    } else {
        let certs = load_roots(cfg)?;
        let mut store = RootCertStore::empty();
        for cert in &certs {
            store.add(cert.clone()).map_err(|e| {
                format!("Failed to configure CA certificate(s) file/directory: {e}")
            })?;
        }
        Some((Arc::new(store), certs))
    };

    let own = certified_key(&cfg.cert_file, &cfg.key_file, &cfg.key_file_pass, &provider)?;
    let verifier = match (cfg.auth_clients, &roots) {
        (TlsAuthClients::No, _) | (_, None) => WebPkiClientVerifier::no_client_auth(),
        (auth, Some((store, certs))) => {
            let builder =
                WebPkiClientVerifier::builder_with_provider(store.clone(), provider.clone());
            let builder = if auth == TlsAuthClients::Optional {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            let inner = builder
                .build()
                .map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?;
            Arc::new(crate::tls_v1::ClientVerifier {
                inner,
                roots: certs.clone(),
            })
        }
    };
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure TLS protocols: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(OneCert(own)));
    server.ignore_client_order = cfg.prefer_server_ciphers;
    if cfg.session_caching && cfg.session_cache_size > 0 {
        server.session_storage = Arc::new(SessionCache {
            inner: ServerSessionMemoryCache::new(cfg.session_cache_size as usize),
            timeout: cfg.session_cache_timeout as u64,
        });
    } else {
        server.session_storage = Arc::new(NoServerSessionStorage {});
        server.send_tls13_tickets = 0;
    }

    // Our side of a link to a master: its own certificate when set.
    let (client_cert, client_key, client_pass) = if cfg.client_cert_file.is_empty() {
        (&cfg.cert_file, &cfg.key_file, &cfg.key_file_pass)
    } else {
        (
            &cfg.client_cert_file,
            &cfg.client_key_file,
            &cfg.client_key_file_pass,
        )
    };
    let client_own = certified_key(client_cert, client_key, client_pass, &provider)?;
    let client_builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure TLS protocols: {e}"))?;
    let client_builder = match &roots {
        Some((store, certs)) => {
            let inner = WebPkiServerVerifier::builder_with_provider(store.clone(), provider)
                .build()
                .map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?;
            client_builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(crate::tls_v1::MasterVerifier {
                    inner,
                    roots: certs.clone(),
                }))
        }
        // Without authorities there is nothing to check a master against:
        // such a configuration cannot replicate (tls-replication needs
        // them), so its client side refuses every master.
        None => client_builder.with_root_certificates(RootCertStore::empty()),
    };
    let client = client_builder.with_client_cert_resolver(Arc::new(OneCert(client_own)));
    Ok(TlsContext {
        server: Arc::new(server),
        client: Arc::new(client),
    })
}

/// `tls-protocols`: which of TLSv1.2 and TLSv1.3 (empty: both).
fn parse_protocols(spec: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    if spec.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut versions = Vec::new();
    let mut old = false;
    for word in spec.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.3" => versions.push(&rustls::version::TLS13),
            "tlsv1.2" => versions.push(&rustls::version::TLS12),
            "tlsv1" | "tlsv1.1" => old = true,
            _ => return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into()),
        }
    }
    if versions.is_empty() && old {
        return Err("TLSv1 and TLSv1.1 are not supported: use TLSv1.2 or TLSv1.3".into());
    }
    if old {
        warn!("tls-protocols: TLSv1 and TLSv1.1 are not offered (insecure); using the rest");
    }
    Ok(versions)
}

/// The TLSv1.3 suites by their OpenSSL (and RFC) names.
fn tls13_suites() -> [(&'static str, SupportedCipherSuite); 3] {
    use provider::cipher_suite::*;
    [
        ("TLS_AES_256_GCM_SHA384", TLS13_AES_256_GCM_SHA384),
        (
            "TLS_CHACHA20_POLY1305_SHA256",
            TLS13_CHACHA20_POLY1305_SHA256,
        ),
        ("TLS_AES_128_GCM_SHA256", TLS13_AES_128_GCM_SHA256),
    ]
}

/// The TLSv1.2 suites by their OpenSSL names, in OpenSSL's default order.
fn tls12_suites() -> [(&'static str, SupportedCipherSuite); 6] {
    use provider::cipher_suite::*;
    [
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ),
    ]
}

/// `tls-ciphersuites`: TLSv1.3 suite names, colon separated (empty: all).
/// Names not known are skipped, as OpenSSL does; none known is an error.
fn parse_ciphersuites(spec: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = tls13_suites();
    if spec.trim().is_empty() {
        return Ok(all.iter().map(|(_, s)| *s).collect());
    }
    let mut out = Vec::new();
    for name in spec.split(':').map(str::trim) {
        if let Some((_, s)) = all.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            if !out.contains(s) {
                out.push(*s);
            }
        }
    }
    if out.is_empty() {
        return Err(format!("Failed to configure ciphersuites: {spec}"));
    }
    Ok(out)
}

/// `tls-ciphers`: an OpenSSL cipher list for TLSv1.2, read as OpenSSL reads
/// it for the suites there are (every one is ECDHE with an AEAD): names and
/// keywords separated by `:`, `,` or spaces; a word adds what it names,
/// `-word` removes it, `!word` removes it for good, `+word` moves it last.
/// Words that name nothing here (RSA key exchange, CBC, ...) add nothing.
fn parse_ciphers(spec: &str) -> Vec<SupportedCipherSuite> {
    let all = tls12_suites();
    if spec.trim().is_empty() {
        return all.iter().map(|(_, s)| *s).collect();
    }
    let mut list: Vec<usize> = Vec::new();
    let mut banned = [false; 6];
    for word in spec.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        let (op, name) = match word.as_bytes()[0] {
            b'!' | b'-' | b'+' => (word.as_bytes()[0], &word[1..]),
            _ => (0, word),
        };
        // `A+B`: suites that both name.
        let matched: Vec<usize> = (0..all.len())
            .filter(|&i| {
                name.split('+')
                    .all(|part| cipher_word_matches(part, all[i].0))
            })
            .collect();
        for i in matched {
            match op {
                b'!' => {
                    banned[i] = true;
                    list.retain(|&j| j != i);
                }
                b'-' => list.retain(|&j| j != i),
                b'+' => {
                    if list.contains(&i) {
                        list.retain(|&j| j != i);
                        list.push(i);
                    }
                }
                _ => {
                    if !banned[i] && !list.contains(&i) {
                        list.push(i);
                    }
                }
            }
        }
    }
    list.into_iter().map(|i| all[i].1).collect()
}

/// Does an OpenSSL cipher-list word name this suite (by its OpenSSL name)?
fn cipher_word_matches(word: &str, suite: &str) -> bool {
    let w = word.to_ascii_uppercase();
    let has = |part: &str| suite.contains(part);
    match w.as_str() {
        "DEFAULT" | "ALL" | "HIGH" | "ECDHE" | "EECDH" | "KECDHE" | "KEECDH" | "AEAD"
        | "TLSV1.2" => true,
        "AESGCM" | "AES" => has("GCM"),
        "AES256" => has("AES256"),
        "AES128" => has("AES128"),
        "CHACHA20" => has("CHACHA20"),
        "ECDSA" | "AECDSA" => has("ECDSA"),
        "RSA" | "ARSA" => has("-RSA-"),
        "SHA384" => has("SHA384"),
        "SHA256" => has("SHA256") || has("CHACHA20"),
        _ => suite.eq_ignore_ascii_case(word),
    }
}

/// A certificate chain and its private key, checked to match (OpenSSL's
/// SSL_CTX_check_private_key). The certificate is not parsed by webpki,
/// which refuses version 1 certificates (those `openssl x509 -req` makes
/// without extensions); OpenSSL, and so Redis, serves them.
fn certified_key(
    cert_path: &str,
    key_path: &str,
    pass: &str,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let certs = load_certs(cert_path)?;
    let key = load_key(key_path, pass)?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("Failed to load private key: {key_path}: {e}"))?;
    let leaf = Certificate::parse(&certs[0])
        .ok_or_else(|| format!("Failed to load certificate: {cert_path}: not a certificate"))?;
    if signing
        .public_key()
        .is_none_or(|spki| spki.as_ref() != leaf.spki)
    {
        return Err(format!(
            "Failed to load private key: {key_path}: it is not the key of {cert_path}"
        ));
    }
    Ok(Arc::new(CertifiedKey::new(certs, signing)))
}

/// Always the one certificate (server side and client side).
#[derive(Debug)]
struct OneCert(Arc<CertifiedKey>);

impl ResolvesServerCert for OneCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

impl ResolvesClientCert for OneCert {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// rustls's session cache (bounded by `tls-session-cache-size`) with
/// `tls-session-cache-timeout`: a session older than that is not resumed.
#[derive(Debug)]
struct SessionCache {
    inner: Arc<ServerSessionMemoryCache>,
    /// Seconds.
    timeout: u64,
}

impl SessionCache {
    /// A stored value without its time, if it is recent enough.
    fn fresh(&self, stored: Vec<u8>) -> Option<Vec<u8>> {
        let (at, value) = stored.split_at_checked(8)?;
        let at = u64::from_le_bytes(at.try_into().ok()?);
        let now = crate::util::unix_time_ms() as u64 / 1000;
        (now.saturating_sub(at) < self.timeout).then(|| value.to_vec())
    }
}

impl rustls::server::StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let now = crate::util::unix_time_ms() as u64 / 1000;
        let mut stored = now.to_le_bytes().to_vec();
        stored.extend_from_slice(&value);
        self.inner.put(key, stored)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.inner.get(key)?)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.inner.take(key)?)
    }

    fn can_cache(&self) -> bool {
        self.timeout > 0 && self.inner.can_cache()
    }
}

/// Every certificate in a PEM file.
fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("Failed to load certificate: {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {path}: no certificate found"
        ));
    }
    Ok(certs)
}

/// A private key from a PEM file; an encrypted PKCS#8 key is decrypted with
/// `pass`.
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem =
        std::fs::read(path).map_err(|e| format!("Failed to load private key: {path}: {e}"))?;
    if let Ok(key) = PrivateKeyDer::from_pem_slice(&pem) {
        return Ok(key);
    }
    let encrypted = pem_section(&pem, "ENCRYPTED PRIVATE KEY");
    match encrypted {
        Some(der) if !pass.is_empty() => crate::util::pkcs8::decrypt(&der, pass.as_bytes())
            .map(|plain| PrivateKeyDer::Pkcs8(plain.into()))
            .map_err(|e| format!("Failed to load private key: {path}: {e}")),
        Some(_) => Err(format!(
            "Failed to load private key: {path}: the key is encrypted and no passphrase is set"
        )),
        None => Err(format!(
            "Failed to load private key: {path}: no private key found"
        )),
    }
}

/// The DER bytes of the first PEM section with this label.
fn pem_section(pem: &[u8], label: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let b64: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    crate::util::base64_decode(b64.as_bytes())
}

/// The authorities of `tls-ca-cert-file` and every file of `tls-ca-cert-dir`
/// that holds certificates.
fn load_roots(cfg: &TlsConfig) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut roots = Vec::new();
    if !cfg.ca_cert_file.is_empty() {
        roots.extend(load_certs(&cfg.ca_cert_file)?);
    }
    if !cfg.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&cfg.ca_cert_dir)
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
        let mut paths: Vec<_> = dir.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths.iter().filter(|p| p.is_file()) {
            if let Ok(it) = CertificateDer::pem_file_iter(path) {
                roots.extend(it.flatten());
            }
        }
    }
    if roots.is_empty() {
        return Err(
            "Failed to configure CA certificate(s) file/directory: no certificate found".into(),
        );
    }
    Ok(roots)
}

/// A TLS connection over a non-blocking socket (see the module's notes).
pub struct TlsStream {
    pub sock: TcpStream,
    conn: rustls::Connection,
    /// The stream reached its end (close_notify, or the socket's end).
    eof: bool,
    /// Plaintext decrypted and not yet read.
    plain: usize,
}

/// The socket as rustls reads it, noting a short read.
struct Probe<'a> {
    sock: &'a mut TcpStream,
    short: bool,
}

impl Read for Probe<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl TlsStream {
    /// A connection accepted from a TLS client.
    pub fn accept(sock: TcpStream, config: &Arc<ServerConfig>) -> io::Result<TlsStream> {
        let conn = rustls::ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        Ok(TlsStream {
            sock,
            conn: conn.into(),
            eof: false,
            plain: 0,
        })
    }

    /// A connection to a TLS server named `host` (not checked, see
    /// [`AnyNameVerifier`]; sent as SNI when it is a name).
    pub fn connect(
        sock: TcpStream,
        config: &Arc<ClientConfig>,
        host: &str,
    ) -> io::Result<TlsStream> {
        let name = ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| ServerName::try_from("redis").expect("a valid name"));
        let conn = rustls::ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
        Ok(TlsStream {
            sock,
            conn: conn.into(),
            eof: false,
            plain: 0,
        })
    }

    /// Records wait for the socket to take them.
    pub fn pending(&self) -> bool {
        self.conn.wants_write()
    }

    /// The handshake is over.
    pub fn established(&self) -> bool {
        !self.conn.is_handshaking()
    }

    /// Read plaintext, as `read(2)` does: `Ok(0)` at the end of the
    /// stream, `WouldBlock` when nothing is there. A read that fills less
    /// than `buf` found the socket drained.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: initialised bytes viewed as maybe-uninitialised; only
        // initialised bytes are written into them.
        self.read_uninit(unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) })
    }

    /// [`read`](Self::read) into uninitialised memory. Only as many bytes
    /// as there is plaintext for are initialised (zeroed, then filled):
    /// rustls writes into initialised bytes only.
    pub fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let mut filled = 0;
        // A short read emptied the socket: asking it again would only get
        // `WouldBlock` (this holds within this call only: data may come
        // before the next).
        let mut drained = false;
        loop {
            if filled == buf.len() {
                return Ok(filled);
            }
            if self.plain > 0 {
                let n = self.plain.min(buf.len() - filled);
                let dst = &mut buf[filled..filled + n];
                dst.fill(MaybeUninit::new(0));
                // SAFETY: every byte of `dst` was just initialised.
                let dst = unsafe { &mut *(dst as *mut [MaybeUninit<u8>] as *mut [u8]) };
                let got = match self.conn.reader().read(dst) {
                    Ok(got) => got,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                    Err(e) => return Err(e),
                };
                self.plain = if got == 0 { 0 } else { self.plain - got };
                filled += got;
                continue;
            }
            // The peer's close_notify, or the socket's end: what was read,
            // then 0.
            if self.eof || drained {
                return match filled {
                    0 if !self.eof => Err(io::ErrorKind::WouldBlock.into()),
                    n => Ok(n),
                };
            }
            let mut probe = Probe {
                sock: &mut self.sock,
                short: false,
            };
            match self.conn.read_tls(&mut probe) {
                Ok(0) => self.eof = true,
                Ok(_) => drained = probe.short,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.flush()?;
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            match self.conn.process_new_packets() {
                Ok(state) => {
                    self.plain = state.plaintext_bytes_to_read();
                    self.eof |= state.peer_has_closed();
                }
                Err(e) => {
                    // The alert that says why goes out, best effort; a peer
                    // that does not speak TLS at all gets none (as OpenSSL).
                    if !matches!(e, rustls::Error::InvalidMessage(_)) {
                        let _ = self.flush();
                    }
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            }
            // Handshake messages and replies to the peer's go out now.
            self.flush()?;
        }
    }

    /// Write plaintext: what is returned was taken (encrypted, and sent as
    /// far as the socket took it). `WouldBlock` while earlier records wait.
    pub fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(data)])
    }

    /// [`write`](Self::write) from several slices.
    pub fn write_vectored(&mut self, data: &[IoSlice<'_>]) -> io::Result<usize> {
        if !self.flush()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.conn.writer().write_vectored(data)?;
        self.flush()?;
        if n == 0 && data.iter().any(|s| !s.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Send the records waiting. `Ok(true)` once none is left.
    pub fn flush(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

impl Drop for TlsStream {
    /// Tell the peer the stream ends here (close_notify), best effort.
    fn drop(&mut self) {
        if !self.eof && !self.conn.is_handshaking() {
            self.conn.send_close_notify();
            let _ = self.conn.write_tls(&mut self.sock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(suites: &[SupportedCipherSuite]) -> Vec<String> {
        suites.iter().map(|s| format!("{:?}", s.suite())).collect()
    }

    #[test]
    fn cipher_lists_read_as_openssl_reads_them() {
        assert_eq!(parse_ciphers("").len(), 6);
        assert_eq!(parse_ciphers("DEFAULT").len(), 6);
        assert_eq!(
            names(&parse_ciphers("ECDHE-RSA-AES128-GCM-SHA256")),
            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        );
        assert_eq!(parse_ciphers("HIGH:!CHACHA20").len(), 4);
        assert_eq!(parse_ciphers("ECDHE-RSA-AES256-GCM-SHA384:!aRSA").len(), 0);
        assert_eq!(parse_ciphers("AES256:AES128").len(), 4);
        // An RSA key exchange or CBC suite: nothing here.
        assert!(parse_ciphers("AES256-SHA256").is_empty());
        assert_eq!(
            names(&parse_ciphers("ALL:+AES256"))[..2],
            [
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
            ]
        );
    }

    #[test]
    fn suites_and_protocols() {
        assert_eq!(parse_ciphersuites("").unwrap().len(), 3);
        assert_eq!(
            names(&parse_ciphersuites("TLS_CHACHA20_POLY1305_SHA256:bogus").unwrap()),
            ["TLS13_CHACHA20_POLY1305_SHA256"]
        );
        assert!(parse_ciphersuites("bogus").is_err());
        assert_eq!(parse_protocols("").unwrap().len(), 2);
        assert_eq!(parse_protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(parse_protocols("tlsv1.3 TLSv1.1").unwrap().len(), 1);
        assert!(parse_protocols("TLSv1").is_err());
        assert!(parse_protocols("SSLv3").is_err());
    }

    #[test]
    fn configuration_errors_name_what_is_missing() {
        let mut cfg = TlsConfig {
            auth_clients: TlsAuthClients::Yes,
            ..TlsConfig::default()
        };
        assert_eq!(
            configure(&cfg).err().unwrap(),
            "No tls-cert-file configured!"
        );
        cfg.cert_file = "/nonexistent/cert".into();
        assert_eq!(
            configure(&cfg).err().unwrap(),
            "No tls-key-file configured!"
        );
        cfg.key_file = "/nonexistent/key".into();
        assert!(configure(&cfg)
            .err()
            .unwrap()
            .starts_with("Either tls-ca-cert-file"));
        cfg.auth_clients = TlsAuthClients::No;
        assert!(configure(&cfg)
            .err()
            .unwrap()
            .starts_with("Failed to load certificate: /nonexistent/cert"));
    }
}
