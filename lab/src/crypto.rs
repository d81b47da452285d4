//! The process's TLS crypto provider.

use std::sync::OnceLock;

/// Installs rustls' aws-lc-rs crypto provider as the process default (once; a provider
/// installed earlier by someone else is kept). kube's TLS client needs one.
pub fn install_crypto_provider() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    });
}
