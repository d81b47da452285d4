//! The emulator's TLS: a CA of its own (kept in the state directory, so clients that
//! pinned it keep working across restarts) and a fresh server certificate per start for
//! `127.0.0.1`, `::1`, `localhost` and any extra names.
//!
//! Files in the state directory: `netris-ca.pem` (give this to clients) and
//! `netris-ca.key` (mode 0600). The server certificate lives only in memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{Issuer, KeyPair};
use rustls::ServerConfig;

use crate::emulator::tls::{ca_params, server_cert, server_config};

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
    let cert = ca_params(CA_COMMON_NAME)?.self_signed(&key)?;
    write_file(&key_path, &key.serialize_pem(), true)?;
    write_file(&cert_path, &cert.pem(), false)?;
    Ok((key, cert.pem()))
}

/// Writes a file atomically; secrets get mode 0600.
pub(crate) fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), TlsError> {
    crate::emulator::tls::write_file(path, contents, secret).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The CA (loaded or made in `dir`) and a new server certificate for loopback and
/// `extra_names`.
pub(crate) fn setup(dir: &Path, extra_names: &[String]) -> Result<Tls, TlsError> {
    let (ca_key, ca_pem) = ensure_ca(dir)?;
    // Re-issuing needs only the CA's name and key, which are the same as when the
    // CA certificate on disk was made.
    let issuer = Issuer::new(ca_params(CA_COMMON_NAME)?, &ca_key);
    let cert = server_cert(&issuer, "netris-controller", extra_names)?;
    // No client certificates: clients log in for a session cookie.
    Ok(Tls {
        server_config: server_config(cert, None)?,
        ca_pem,
        ca_path: dir.join(CA_CERT_FILE),
    })
}
