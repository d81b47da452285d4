//! The certificate plumbing both emulators do alike: their files, a CA's parameters, a
//! fresh serving certificate per start, and the rustls configuration. Which CA issues
//! it and whether clients show certificates stays with each emulator.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SigningKey,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::danger::ClientCertVerifier;

/// Writes a file through a temporary one and a rename, so a reader never sees half of
/// it; secrets get mode 0600.
pub(crate) fn write_file(path: &Path, contents: &str, secret: bool) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    if secret {
        options.mode(0o600);
    }
    let mut f = options.open(&tmp)?;
    f.write_all(contents.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// The parameters of an emulator's own CA named `common_name`.
pub(crate) fn ca_params(common_name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "gpufleet-lab");
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// The parameters of a certificate a CA issues for `purpose` (serving or client), for
/// `names`, named `common_name`.
pub(crate) fn leaf_params(
    names: Vec<String>,
    common_name: &str,
    purpose: ExtendedKeyUsagePurpose,
) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(names)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![purpose];
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

/// A serving certificate, issued by `issuer` at each start (so it always names the
/// current `extra_names`), for loopback and `extra_names`, with its key.
pub(crate) fn server_cert(
    issuer: &Issuer<'_, impl SigningKey>,
    common_name: &str,
    extra_names: &[String],
) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), rcgen::Error> {
    let mut names: Vec<String> = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
    names.extend(extra_names.iter().cloned());
    let params = leaf_params(names, common_name, ExtendedKeyUsagePurpose::ServerAuth)?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((
        CertificateDer::from(cert.der().to_vec()),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

/// The TLS server configuration (HTTP/1.1 only) for `cert`; clients are checked by
/// `client_auth`, or show no certificate at all when it is `None`.
pub(crate) fn server_config(
    (cert, key): (CertificateDer<'static>, PrivateKeyDer<'static>),
    client_auth: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match client_auth {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(vec![cert], key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The crypto provider of every emulator's TLS (also for client verifiers).
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The subject common name of a certificate (DER).
#[must_use]
pub fn common_name(der: &[u8]) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}
