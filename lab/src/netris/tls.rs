//! The emulator's TLS: a CA of its own (kept in the state directory, so clients that
//! pinned it keep working across restarts) and a fresh server certificate per start for
//! `127.0.0.1`, `::1`, `localhost` and any extra names.
//!
//! Files in the state directory: `netris-ca.pem` (give this to clients) and
//! `netris-ca.key` (mode 0600). The server certificate lives only in memory.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The CA certificate's file name in the state directory.
pub const CA_CERT_FILE: &str = "netris-ca.pem";
/// The CA key's file name in the state directory.
pub const CA_KEY_FILE: &str = "netris-ca.key";

const CA_COMMON_NAME: &str = "gpufleet netris emulator CA";

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused to generate a key or certificate.
    #[error("failed to generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("failed to configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// A file could not be read or written.
    #[error("failed to access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The server side of TLS, and the CA clients should trust.
#[derive(Debug, Clone)]
pub(crate) struct Tls {
    /// For the acceptor.
    pub(crate) server_config: Arc<ServerConfig>,
    /// The CA certificate, PEM.
    pub(crate) ca_pem: String,
    /// Where it is in the state directory.
    pub(crate) ca_path: PathBuf,
}

fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "gpufleet-lab");
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// Loads the CA from `dir`, or makes one and writes it there.
fn ensure_ca(dir: &Path) -> Result<(KeyPair, String), TlsError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    if let (Ok(pem), Ok(key)) = (
        std::fs::read_to_string(&cert_path),
        std::fs::read_to_string(&key_path),
    ) && let Ok(key) = KeyPair::from_pem(&key)
    {
        return Ok((key, pem));
    }
    let key = KeyPair::generate()?;
    let cert = ca_params()?.self_signed(&key)?;
    write_file(&key_path, &key.serialize_pem(), true)?;
    write_file(&cert_path, &cert.pem(), false)?;
    Ok((key, cert.pem()))
}

/// Writes a file through a temporary one and a rename; secrets get mode 0600.
pub(crate) fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), TlsError> {
    let err = |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    if secret {
        options.mode(0o600);
    }
    let mut f = options.open(&tmp).map_err(err)?;
    f.write_all(contents.as_bytes()).map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(err)
}

/// The CA (loaded or made in `dir`) and a new server certificate for loopback and
/// `extra_names`.
pub(crate) fn setup(dir: &Path, extra_names: &[String]) -> Result<Tls, TlsError> {
    let (ca_key, ca_pem) = ensure_ca(dir)?;
    // Re-issuing needs only the CA's name and key, which are the same as when the
    // CA certificate on disk was made.
    let issuer = Issuer::new(ca_params()?, &ca_key);
    let mut names: Vec<String> = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
    names.extend(extra_names.iter().cloned());
    let mut params = CertificateParams::new(names)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "netris-controller");
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;

    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        server_config: Arc::new(config),
        ca_pem,
        ca_path: dir.join(CA_CERT_FILE),
    })
}
