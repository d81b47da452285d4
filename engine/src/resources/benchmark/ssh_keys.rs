//! The SSH key pair `mpirun` reaches the workers with, when gpufleet launches a multi-node
//! run itself (the MPI Operator makes its own).
//!
//! An ECDSA P-256 key: the private key as PKCS#8 PEM, which OpenSSH reads through OpenSSL, and
//! the public key in `authorized_keys` form (`ecdsa-sha2-nistp256 <blob>`, the blob being the
//! key type, the curve and the uncompressed point, each as an SSH string).

use base64::{Engine, engine::general_purpose::STANDARD};
use ring::{
    rand::SystemRandom,
    signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair},
};

/// A fresh key pair.
#[derive(Clone, PartialEq, Eq)]
pub struct SshKeys {
    /// The private key, PKCS#8 PEM.
    pub private_pem: String,
    /// The public key, one `authorized_keys` line.
    pub public_line: String,
}

impl std::fmt::Debug for SshKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The private key never reaches a log.
        f.debug_struct("SshKeys")
            .field("public_line", &self.public_line)
            .finish_non_exhaustive()
    }
}

/// Why no key pair could be made (the system's random source failed).
#[derive(Debug, thiserror::Error)]
#[error("failed to generate the SSH key pair of the MPI launcher: {0}")]
pub struct KeyError(#[source] RingError);

/// ring's error, as a `std::error::Error` (ring implements that only with its `std` feature),
/// so that it stays the source of a [`KeyError`].
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// The random source failed.
    #[error("{0}")]
    Unspecified(ring::error::Unspecified),
    /// ring refused the key it had just made.
    #[error("{0}")]
    KeyRejected(ring::error::KeyRejected),
}

fn ssh_string(out: &mut Vec<u8>, bytes: &[u8]) {
    // SSH strings are length-prefixed; keys are far below 4 GiB.
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A new key pair, commented `comment`.
///
/// # Errors
/// When the random source or the key parser fails.
pub fn generate(comment: &str) -> Result<SshKeys, KeyError> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .map_err(|e| KeyError(RingError::Unspecified(e)))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|e| KeyError(RingError::KeyRejected(e)))?;
    let mut blob = Vec::new();
    ssh_string(&mut blob, b"ecdsa-sha2-nistp256");
    ssh_string(&mut blob, b"nistp256");
    ssh_string(&mut blob, pair.public_key().as_ref());
    let body = STANDARD.encode(pkcs8.as_ref());
    let mut private_pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        private_pem.push_str(&String::from_utf8_lossy(line));
        private_pem.push('\n');
    }
    private_pem.push_str("-----END PRIVATE KEY-----\n");
    Ok(SshKeys {
        private_pem,
        public_line: format!("ecdsa-sha2-nistp256 {} {comment}\n", STANDARD.encode(&blob)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_line_carries_the_type_curve_and_point() {
        let keys = generate("gfb-x").expect("keys");
        let mut parts = keys.public_line.split_whitespace();
        assert_eq!(parts.next(), Some("ecdsa-sha2-nistp256"));
        let blob = STANDARD
            .decode(parts.next().expect("blob"))
            .expect("base64");
        assert_eq!(parts.next(), Some("gfb-x"));
        // type (4 + 19), curve (4 + 8), point (4 + 65: uncompressed P-256)
        assert_eq!(blob.len(), 4 + 19 + 4 + 8 + 4 + 65);
        assert_eq!(&blob[4..23], b"ecdsa-sha2-nistp256");
        assert_eq!(blob[4 + 19 + 4 + 8 + 4], 0x04, "uncompressed point");
        assert!(
            keys.private_pem
                .starts_with("-----BEGIN PRIVATE KEY-----\n")
        );
        assert!(
            !format!("{keys:?}").contains("PRIVATE"),
            "Debug hides the key"
        );
        assert_ne!(generate("gfb-x").expect("keys"), keys, "fresh every time");
    }
}
