//! AutoMTLS: the server certificate we present, and the check of Terraform's certificate.
//!
//! Terraform generates a fresh self-signed client certificate per run and passes it in
//! `PLUGIN_CLIENT_CERT`. It is an ECDSA P-521 certificate with `cA=true`, which stock rustls
//! verification rejects twice over (the default crypto lacks P-521 and webpki refuses a CA as
//! an end entity). Rather than make client authentication optional, as other Rust providers
//! do, we pin it: the presented certificate must be byte-for-byte the one Terraform announced,
//! and the handshake signature is verified with aws-lc-rs, which does support P-521. Anyone
//! else who reaches the socket is refused.

use std::sync::Arc;

use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error as TlsError, ServerConfig,
    SignatureScheme,
    client::danger::HandshakeSignatureValid,
    crypto::{CryptoProvider, WebPkiSupportedAlgorithms, aws_lc_rs, ring},
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime},
    server::danger::{ClientCertVerified, ClientCertVerifier},
};

/// Failures while setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// `PLUGIN_CLIENT_CERT` held no PEM certificate.
    #[error("failed to read the client certificate from PLUGIN_CLIENT_CERT: {0}")]
    ClientCert(String),
    /// Generating our own certificate failed.
    #[error("failed to generate the server certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("failed to build the TLS configuration: {0}")]
    Config(#[from] TlsError),
}

/// The server's certificate (DER) and key.
pub struct ServerIdentity {
    /// The certificate, also announced in the handshake line.
    pub cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity").finish_non_exhaustive()
    }
}

/// The server's key, generated and used with ring. rcgen's own `KeyPair` would use
/// aws-lc-rs whenever anything else in the build enables rcgen's `aws_lc_rs` feature (the lab
/// does), and aws-lc seeds its random generator on first use, which costs some 20 ms of CPU
/// before the handshake line. ring seeds from the OS at once.
struct RingKey {
    pair: ::ring::signature::EcdsaKeyPair,
    pkcs8: Vec<u8>,
    rng: ::ring::rand::SystemRandom,
}

impl RingKey {
    fn generate() -> Result<RingKey, rcgen::Error> {
        use ::ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
        let rng = ::ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| rcgen::Error::RingUnspecified)?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|e| rcgen::Error::RingKeyRejected(e.to_string()))?;
        Ok(RingKey {
            pair,
            pkcs8: pkcs8.as_ref().to_vec(),
            rng,
        })
    }
}

impl rcgen::PublicKeyData for RingKey {
    fn der_bytes(&self) -> &[u8] {
        use ::ring::signature::KeyPair as _;
        self.pair.public_key().as_ref()
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl rcgen::SigningKey for RingKey {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let signature = self
            .pair
            .sign(&self.rng, msg)
            .map_err(|_| rcgen::Error::RingUnspecified)?;
        Ok(signature.as_ref().to_vec())
    }
}

/// Generates a self-signed certificate in the shape Terraform's client expects: SAN
/// `localhost` (it dials with that server name) and, like go-plugin's own, a CA certificate
/// for both server and client use, since the client trusts exactly this certificate.
pub fn generate_server_identity() -> Result<ServerIdentity, TlsSetupError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose,
    };
    let key = RingKey::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
    params
        .distinguished_name
        .push(DnType::OrganizationName, "gpufleet");
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(30)).into();
    params.not_after = (now + std::time::Duration::from_secs(60 * 60 * 24 * 365)).into();
    let cert = params.self_signed(&key)?;
    Ok(ServerIdentity {
        cert: cert.der().clone(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.pkcs8)),
    })
}

/// Parses the first certificate of a PEM bundle.
pub fn parse_client_cert(pem: &str) -> Result<CertificateDer<'static>, TlsSetupError> {
    let mut reader = pem.as_bytes();
    match rustls_pemfile::certs(&mut reader).next() {
        Some(Ok(c)) => Ok(c),
        Some(Err(e)) => Err(TlsSetupError::ClientCert(e.to_string())),
        None => Err(TlsSetupError::ClientCert(
            "no PEM certificate found".to_owned(),
        )),
    }
}

/// Accepts exactly one client certificate and verifies handshake signatures made with it.
#[derive(Debug)]
pub struct PinnedClientCert {
    expected: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedClientCert {
    /// Accepts only `expected`.
    pub fn new(expected: CertificateDer<'static>) -> PinnedClientCert {
        PinnedClientCert {
            expected,
            algorithms: aws_lc_rs::default_provider().signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for PinnedClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, TlsError> {
        // Trust is by identity with the certificate Terraform handed us out of band, so no
        // chain is built; the signature checks below prove the peer holds its key.
        if end_entity.as_ref() == self.expected.as_ref() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(TlsError::InvalidCertificate(
                CertificateError::UnknownIssuer,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The server TLS configuration: our identity, Terraform's pinned certificate, ALPN `h2`
/// (gRPC clients insist on it), TLS 1.2 or newer.
///
/// The handshake itself runs on ring; only the client's signatures are checked with aws-lc-rs
/// (see [`PinnedClientCert`]), which keeps aws-lc's slow random-generator start-up out of
/// every provider launch.
pub fn server_config(
    identity: &ServerIdentity,
    client_cert: CertificateDer<'static>,
) -> Result<Arc<ServerConfig>, TlsSetupError> {
    let provider = Arc::new(ring::default_provider());
    let mut config =
        ServerConfig::builder_with_provider(Arc::clone(&provider) as Arc<CryptoProvider>)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_client_cert_verifier(Arc::new(PinnedClientCert::new(client_cert)))
            .with_single_cert(vec![identity.cert.clone()], identity.key.clone_key())?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}
