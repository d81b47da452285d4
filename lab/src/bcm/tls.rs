//! The emulator's TLS: a server certificate issued at each start by the CA it is given
//! (the lab's CA), client certificates verified against the same CA but optional (a
//! client without one may log in with a password), and the common name of a verified
//! client certificate, which names its profile.
//!
//! Run on its own, the emulator makes a CA of its own in its state directory
//! ([`ensure_own_ca`]) with an `admin` and a `readonly` client certificate next to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;

pub use crate::emulator::tls::common_name;
use crate::emulator::tls::{ca_params, leaf_params, provider, server_cert, write_file};

/// File names of a CA made by [`ensure_own_ca`]: certificate, key.
pub const OWN_CA: (&str, &str) = ("bcm-ca.pem", "bcm-ca.key");
/// File names of the `admin` client certificate [`ensure_own_ca`] issues.
pub const OWN_ADMIN: (&str, &str) = ("bcm-admin.crt", "bcm-admin.key");
/// File names of the `readonly` client certificate [`ensure_own_ca`] issues.
pub const OWN_READONLY: (&str, &str) = ("bcm-readonly.crt", "bcm-readonly.key");

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused to generate or parse a key or certificate.
    #[error("failed to make or read a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("failed to configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("failed to configure client certificate verification: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// The CA file holds no certificate.
    #[error("{0} holds no PEM certificate")]
    NoCertificate(PathBuf),
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

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a file atomically; keys get mode 0600.
fn write(path: &Path, contents: &str, secret: bool) -> Result<(), TlsError> {
    write_file(path, contents, secret).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A client certificate and key (PEM) for common name `cn`, issued by the CA.
///
/// # Errors
/// When the CA cannot be read or the certificate not made.
pub fn issue_client(
    ca_pem: &str,
    ca_key_pem: &str,
    cn: &str,
) -> Result<(String, String), TlsError> {
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, &ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = leaf_params(Vec::new(), cn, ExtendedKeyUsagePurpose::ClientAuth)?;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(3650);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A CA of the emulator's own in `dir` (kept across restarts), with `admin` and
/// `readonly` client certificates. Returns the CA certificate and key paths.
///
/// # Errors
/// When a file cannot be read or written, or a certificate not made.
pub fn ensure_own_ca(dir: &Path) -> Result<(PathBuf, PathBuf), TlsError> {
    let cert_path = dir.join(OWN_CA.0);
    let key_path = dir.join(OWN_CA.1);
    if !(cert_path.is_file() && key_path.is_file()) {
        let key = KeyPair::generate()?;
        let cert = ca_params("gpufleet bcm emulator CA")?.self_signed(&key)?;
        write(&key_path, &key.serialize_pem(), true)?;
        write(&cert_path, &cert.pem(), false)?;
    }
    let ca_pem = read(&cert_path)?;
    let ca_key = read(&key_path)?;
    for (cn, (crt, key)) in [("admin", OWN_ADMIN), ("readonly", OWN_READONLY)] {
        if dir.join(crt).is_file() && dir.join(key).is_file() {
            continue;
        }
        let (c, k) = issue_client(&ca_pem, &ca_key, cn)?;
        write(&dir.join(key), &k, true)?;
        write(&dir.join(crt), &c, false)?;
    }
    Ok((cert_path, key_path))
}

/// The server configuration: a new serving certificate for loopback and `extra_names`
/// issued by the CA in `ca_cert`/`ca_key`, and optional client certificates verified
/// against the same CA.
///
/// # Errors
/// When the CA cannot be read or rustls refuses the configuration.
pub fn server_config(
    ca_cert: &Path,
    ca_key: &Path,
    extra_names: &[String],
) -> Result<Arc<ServerConfig>, TlsError> {
    let ca_pem = read(ca_cert)?;
    let ca_key_pair = KeyPair::from_pem(&read(ca_key)?)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, &ca_key_pair)?;
    let cert = server_cert(&issuer, "bcm-head", extra_names)?;

    // Certificates are optional: a client without one logs in with a password.
    let ca_der = crate::components::pem_to_der(ca_pem.as_bytes())
        .ok_or_else(|| TlsError::NoCertificate(ca_cert.to_path_buf()))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(ca_der))?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()?;
    Ok(crate::emulator::tls::server_config(cert, Some(verifier))?)
}
