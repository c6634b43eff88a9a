//! Version 1 peer certificates, checked as OpenSSL checks them for Redis.
//! `openssl x509 -req` without extensions makes version 1 certificates
//! (Redis's gen-test-certs.sh makes one; many setups do); webpki refuses
//! them outright. A version 1 client or master certificate is accepted
//! here when a trusted authority signed it (directly, or through the
//! intermediates the peer sent) and every certificate on the way is within
//! its validity period; the handshake signatures it makes are then checked
//! against its key. Version 3 certificates never come here: webpki checks
//! them, with everything it checks.

use std::sync::Arc;

use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

use crate::util::der::{bit_string, Certificate, Der};

/// Is this a version 1 certificate (one for [`verify_chain`])?
pub fn is_v1(der: &[u8]) -> bool {
    Certificate::parse(der).is_some_and(|c| c.version == 1)
}

/// Check a version 1 leaf up to one of `roots` (see the module's notes).
pub fn verify_chain(
    leaf: &[u8],
    intermediates: &[CertificateDer<'_>],
    roots: &[CertificateDer<'static>],
    now: UnixTime,
) -> Result<(), Error> {
    let bad = || Error::InvalidCertificate(CertificateError::BadEncoding);
    let now = now.as_secs() as i64;
    let mut current = Certificate::parse(leaf).ok_or_else(bad)?;
    let parsed_roots: Vec<Certificate> =
        roots.iter().filter_map(|r| Certificate::parse(r)).collect();
    let parsed_mid: Vec<Certificate> = intermediates
        .iter()
        .filter_map(|c| Certificate::parse(c))
        .collect();
    for _ in 0..8 {
        if now < current.not_before {
            return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
        }
        if now > current.not_after {
            return Err(Error::InvalidCertificate(CertificateError::Expired));
        }
        let signed_by = |issuer: &Certificate| {
            issuer.subject == current.issuer && verify_signed(&current, issuer.spki)
        };
        if parsed_roots.iter().any(signed_by) {
            return Ok(());
        }
        match parsed_mid.iter().find(|c| signed_by(c)) {
            Some(next) => current = next.clone(),
            None => return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer)),
        }
    }
    Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
}

/// Did the key `issuer_spki` sign `cert`?
fn verify_signed(cert: &Certificate, issuer_spki: &[u8]) -> bool {
    let Some(PublicKey {
        algorithm: key_alg,
        curve,
        key,
    }) = spki_parts(issuer_spki)
    else {
        return false;
    };
    let alg: &dyn VerificationAlgorithm = match (cert.sig_alg, key_alg, curve) {
        (SHA256_RSA, RSA, _) => &signature::RSA_PKCS1_2048_8192_SHA256,
        (SHA384_RSA, RSA, _) => &signature::RSA_PKCS1_2048_8192_SHA384,
        (SHA512_RSA, RSA, _) => &signature::RSA_PKCS1_2048_8192_SHA512,
        (ECDSA_SHA256, EC, Some(P256)) => &signature::ECDSA_P256_SHA256_ASN1,
        (ECDSA_SHA384, EC, Some(P256)) => &signature::ECDSA_P256_SHA384_ASN1,
        (ECDSA_SHA256, EC, Some(P384)) => &signature::ECDSA_P384_SHA256_ASN1,
        (ECDSA_SHA384, EC, Some(P384)) => &signature::ECDSA_P384_SHA384_ASN1,
        _ => return false,
    };
    UnparsedPublicKey::new(alg, key)
        .verify(cert.tbs, cert.signature)
        .is_ok()
}

/// A SubjectPublicKeyInfo's parts.
struct PublicKey<'a> {
    algorithm: &'a [u8],
    /// The named curve of an EC key.
    curve: Option<&'a [u8]>,
    key: &'a [u8],
}

fn spki_parts(spki: &[u8]) -> Option<PublicKey<'_>> {
    let mut s = Der::new(spki).seq()?;
    let mut alg = s.seq()?;
    let algorithm = alg.oid()?;
    let curve = if alg.peek() == Some(0x06) {
        alg.oid()
    } else {
        None
    };
    let key = bit_string(s.take(0x03)?)?;
    Some(PublicKey {
        algorithm,
        curve,
        key,
    })
}

/// A handshake signature made with a version 1 certificate's key.
fn verify_handshake(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    tls13: bool,
) -> Result<HandshakeSignatureValid, Error> {
    let bad = Error::InvalidCertificate(CertificateError::BadSignature);
    let leaf =
        Certificate::parse(cert).ok_or(Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let PublicKey {
        algorithm: key_alg,
        curve,
        key,
    } = spki_parts(leaf.spki).ok_or(bad.clone())?;
    let alg: &dyn VerificationAlgorithm = match (dss.scheme, key_alg, curve) {
        (SignatureScheme::RSA_PKCS1_SHA256, RSA, _) if !tls13 => {
            &signature::RSA_PKCS1_2048_8192_SHA256
        }
        (SignatureScheme::RSA_PKCS1_SHA384, RSA, _) if !tls13 => {
            &signature::RSA_PKCS1_2048_8192_SHA384
        }
        (SignatureScheme::RSA_PKCS1_SHA512, RSA, _) if !tls13 => {
            &signature::RSA_PKCS1_2048_8192_SHA512
        }
        (SignatureScheme::RSA_PSS_SHA256, RSA, _) => &signature::RSA_PSS_2048_8192_SHA256,
        (SignatureScheme::RSA_PSS_SHA384, RSA, _) => &signature::RSA_PSS_2048_8192_SHA384,
        (SignatureScheme::RSA_PSS_SHA512, RSA, _) => &signature::RSA_PSS_2048_8192_SHA512,
        (SignatureScheme::ECDSA_NISTP256_SHA256, EC, Some(P256)) => {
            &signature::ECDSA_P256_SHA256_ASN1
        }
        (SignatureScheme::ECDSA_NISTP384_SHA384, EC, Some(P384)) => {
            &signature::ECDSA_P384_SHA384_ASN1
        }
        (SignatureScheme::ED25519, ED25519, _) => &signature::ED25519,
        _ => {
            return Err(Error::PeerMisbehaved(
                rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            ))
        }
    };
    UnparsedPublicKey::new(alg, key)
        .verify(message, dss.signature())
        .map(|_| HandshakeSignatureValid::assertion())
        .map_err(|_| bad)
}

/// The schemes [`verify_handshake`] checks.
fn v1_schemes() -> Vec<SignatureScheme> {
    vec![
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ED25519,
        SignatureScheme::RSA_PSS_SHA512,
        SignatureScheme::RSA_PSS_SHA384,
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::RSA_PKCS1_SHA512,
        SignatureScheme::RSA_PKCS1_SHA384,
        SignatureScheme::RSA_PKCS1_SHA256,
    ]
}

const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const SHA256_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
const SHA384_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c];
const SHA512_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d];
const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];

/// The handshake-signature methods both verifiers share: a version 1
/// certificate's signatures are checked here, others by webpki (`inner`);
/// the schemes offered are those both can check.
macro_rules! handshake_signature_methods {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            match is_v1(cert) {
                true => verify_handshake(message, cert, dss, false),
                false => self.inner.verify_tls12_signature(message, cert, dss),
            }
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            match is_v1(cert) {
                true => verify_handshake(message, cert, dss, true),
                false => self.inner.verify_tls13_signature(message, cert, dss),
            }
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            let mut schemes = self.inner.supported_verify_schemes();
            schemes.retain(|s| v1_schemes().contains(s));
            schemes
        }
    };
}

/// Client certificates: webpki's checks, version 1 certificates as above.
#[derive(Debug)]
pub struct ClientVerifier {
    pub inner: Arc<dyn ClientCertVerifier>,
    pub roots: Vec<CertificateDer<'static>>,
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if is_v1(end_entity) {
            verify_chain(end_entity, intermediates, &self.roots, now)?;
            return Ok(ClientCertVerified::assertion());
        }
        self.inner
            .verify_client_cert(end_entity, intermediates, now)
    }

    handshake_signature_methods!();
}

/// A master's certificate: signed by a trusted authority and in its
/// validity period, not compared with the host name (Redis does not
/// compare names); version 1 certificates as above.
#[derive(Debug)]
pub struct MasterVerifier {
    pub inner: Arc<rustls::client::WebPkiServerVerifier>,
    pub roots: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for MasterVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if is_v1(end_entity) {
            verify_chain(end_entity, intermediates, &self.roots, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    handshake_signature_methods!();
}
