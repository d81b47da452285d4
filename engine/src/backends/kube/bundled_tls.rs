//! A kube client whose TLS needs nothing from the operating system, for the macOS build.
//!
//! kube's own TLS verifies servers with the platform's verifier, on macOS Apple's Security
//! framework, which a macOS binary linked on Linux cannot use. This client is the same stack
//! as kube's (its layers for the address, retries, authentication and headers, over hyper),
//! with rustls on ring, and verifies the API server against:
//!
//! - the certificate authority the kubeconfig (or the `kubernetes` block) names, alone, as
//!   kube does; that is the usual case, since clusters sign their own serving certificates;
//! - without one, Mozilla's roots built into the binary (`webpki-roots`), plus the PEM bundle
//!   `SSL_CERT_FILE` names and the PEM files in `SSL_CERT_DIR`, as OpenSSL reads them.
//!
//! Client certificates come from the kubeconfig, as data or files. Tokens from exec plugins
//! work as with kube; a client certificate an exec plugin hands out is not used. A proxy and
//! `insecure-skip-tls-verify` are refused with a message, never ignored.
//!
//! Compiled everywhere and tested against the lab's API server on Linux; used on macOS only.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use base64::Engine as _;
use http::Response;
use http_body_util::BodyExt;
use hyper_util::{client::legacy::connect::HttpConnector, rt::TokioExecutor};
use kube::client::{Body, ClientBuilder, ConfigExt as _, DynBody, retry::RetryPolicy};
use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject as _},
};
use secrecy::ExposeSecret as _;
use tower::{BoxError, ServiceBuilder, ServiceExt as _, retry::RetryLayer, util::BoxService};

/// The service type of kube's own client builder (`ClientBuilder::try_from`).
pub type GenericService = BoxService<http::Request<Body>, Response<Box<DynBody>>, BoxError>;

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate file could not be read or holds no certificate.
    #[error("failed to read the certificate authorities in {path}: {source}")]
    Roots {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: Unreadable,
    },
    /// The client certificate or key could not be read.
    #[error("failed to read the client {what}: {source}")]
    Identity {
        /// `certificate` or `key`.
        what: &'static str,
        /// Why.
        #[source]
        source: Unreadable,
    },
    /// Something kube's own TLS supports and this build does not.
    #[error("failed to build the Kubernetes client: {0} is not supported by this build (macOS)")]
    Unsupported(&'static str),
    /// rustls refused the configuration (say, a key that does not match the certificate).
    #[error("failed to set up TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// kube refused the configuration (say, a broken header or auth setting).
    #[error("failed to build the Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
}

/// Why certificates or a key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// A file of certificate authorities could not be read.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// The file a kubeconfig credential names could not be read.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kubeconfig credential's data is not base64.
    #[error("its data is not base64: {0}")]
    Base64(#[source] base64::DecodeError),
    /// The PEM text is malformed.
    #[error("{0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// The PEM text holds no certificate.
    #[error("no PEM certificate in it")]
    NoCertificate,
    /// A client certificate came without its key, or a key without its certificate.
    #[error("a client certificate and its key come together")]
    Unpaired,
}

/// Certificates in the PEM `bytes`.
fn pem_certs(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, Unreadable> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(Unreadable::Pem)?;
    if certs.is_empty() {
        return Err(Unreadable::NoCertificate);
    }
    Ok(certs)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Roots {
        path: path.display().to_string(),
        source: Unreadable::Io(e),
    })
}

/// Where roots beside the bundled ones come from, when the cluster names no authority.
#[derive(Debug, Clone, Default)]
pub struct ExtraRoots {
    /// A PEM bundle (`SSL_CERT_FILE`).
    pub file: Option<PathBuf>,
    /// Directories of PEM files (`SSL_CERT_DIR`, a list as `PATH` is).
    pub dirs: Vec<PathBuf>,
}

impl ExtraRoots {
    /// `SSL_CERT_FILE` and `SSL_CERT_DIR`, as OpenSSL reads them.
    pub fn from_env() -> ExtraRoots {
        ExtraRoots {
            file: std::env::var_os("SSL_CERT_FILE")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            dirs: std::env::var_os("SSL_CERT_DIR")
                .map(|v| std::env::split_paths(&v).collect())
                .unwrap_or_default(),
        }
    }

    /// The certificates of the file, which must be there, and of the PEM files in the
    /// directories; as OpenSSL does, a missing directory and what in one is no certificate
    /// (hash links to other files, subdirectories, unreadable files) are passed over.
    pub fn certs(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let mut certs = Vec::new();
        if let Some(file) = &self.file {
            certs.extend(pem_certs(&read(file)?).map_err(|source| TlsError::Roots {
                path: file.display().to_string(),
                source,
            })?);
        }
        for dir in &self.dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for path in entries.filter_map(Result::ok).map(|e| e.path()) {
                if let Some(found) = std::fs::read(&path)
                    .ok()
                    .and_then(|pem| pem_certs(&pem).ok())
                {
                    certs.extend(found);
                }
            }
        }
        Ok(certs)
    }
}

/// The roots a server is verified against: the configured authority alone, or else the
/// bundled roots and those of `extra`.
pub fn roots(config: &kube::Config, extra: &ExtraRoots) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    let add = |store: &mut RootCertStore, certs: Vec<CertificateDer<'static>>, what: &str| {
        let (_, ignored) = store.add_parsable_certificates(certs);
        if ignored > 0 {
            tracing::warn!("{ignored} certificate(s) in {what} could not be used as roots");
        }
    };
    if let Some(ders) = config.root_cert.as_ref().filter(|d| !d.is_empty()) {
        let certs = ders
            .iter()
            .map(|d| CertificateDer::from(d.clone()))
            .collect();
        add(&mut store, certs, "the cluster's certificate authority");
        return Ok(store);
    }
    store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    add(&mut store, extra.certs()?, "SSL_CERT_FILE and SSL_CERT_DIR");
    Ok(store)
}

/// The PEM of a kubeconfig credential given as base64 data or as a file.
fn credential(
    data: Option<&str>,
    file: Option<&String>,
    what: &'static str,
) -> Result<Option<Vec<u8>>, TlsError> {
    let fail = |source| TlsError::Identity { what, source };
    match (data, file) {
        (Some(b64), _) => base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map(Some)
            .map_err(|e| fail(Unreadable::Base64(e))),
        (None, Some(path)) => std::fs::read(path).map(Some).map_err(|source| {
            fail(Unreadable::File {
                path: path.clone(),
                source,
            })
        }),
        (None, None) => Ok(None),
    }
}

/// The TLS configuration for `config`: its [`roots`], and the client certificate the
/// kubeconfig names.
pub fn tls_config(config: &kube::Config, extra: &ExtraRoots) -> Result<ClientConfig, TlsError> {
    if config.accept_invalid_certs {
        return Err(TlsError::Unsupported("insecure-skip-tls-verify"));
    }
    let store = roots(config, extra)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(store);
    let auth = &config.auth_info;
    let cert = credential(
        auth.client_certificate_data.as_deref(),
        auth.client_certificate.as_ref(),
        "certificate",
    )?;
    let key = credential(
        auth.client_key_data.as_ref().map(|k| k.expose_secret()),
        auth.client_key.as_ref(),
        "key",
    )?;
    let tls = match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = pem_certs(&cert).map_err(|source| TlsError::Identity {
                what: "certificate",
                source,
            })?;
            let key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| TlsError::Identity {
                what: "key",
                source: Unreadable::Pem(e),
            })?;
            builder.with_client_auth_cert(chain, key)?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) | (None, Some(_)) => {
            return Err(TlsError::Identity {
                what: "certificate",
                source: Unreadable::Unpaired,
            });
        }
    };
    // hyper-rustls sets ALPN itself (HTTP/1.1, as kube's stack speaks).
    Ok(tls)
}

/// kube's client builder for `config`, with the same service type as kube's own
/// (`ClientBuilder::try_from`), so callers add their layers the same way.
pub fn client_builder(
    config: &kube::Config,
    extra: &ExtraRoots,
) -> Result<ClientBuilder<GenericService>, TlsError> {
    if config.proxy_url.is_some() {
        return Err(TlsError::Unsupported("a proxy"));
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(config, extra)?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = ServerName::try_from(name.clone())
            .map_err(|_| TlsError::Unsupported("a tls-server-name that is not a DNS name"))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut connector =
        hyper_timeout::TimeoutConnector::new(https.enable_http1().wrap_connector(http));
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let transport: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(transport)
        .map_response(|r: Response<hyper::body::Incoming>| {
            r.map(|body| Box::new(BodyExt::map_err(body, BoxError::from)) as Box<DynBody>)
        });
    Ok(ClientBuilder::new(
        BoxService::new(service),
        config.default_namespace.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its key, PEM.
    fn pem_pair() -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["api.example".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("a certificate");
        (cert.pem(), key.serialize_pem())
    }

    fn config() -> kube::Config {
        kube::Config::new("https://api.example:6443".parse().expect("a URL"))
    }

    fn bundled() -> usize {
        webpki_roots::TLS_SERVER_ROOTS.len()
    }

    #[test]
    fn the_clusters_own_authority_is_trusted_alone() {
        let (cert, _) = pem_pair();
        let mut c = config();
        c.root_cert = Some(vec![
            pem_certs(cert.as_bytes()).expect("a cert")[0].to_vec(),
        ]);
        let store = roots(&c, &ExtraRoots::default()).expect("roots");
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn without_an_authority_the_bundled_roots_and_the_environments_are_trusted() {
        let dir = tempfile::tempdir().expect("a dir");
        let (one, _) = pem_pair();
        let (two, _) = pem_pair();
        let file = dir.path().join("bundle.pem");
        std::fs::write(&file, &one).expect("written");
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).expect("a dir");
        std::fs::write(certs.join("two.pem"), &two).expect("written");
        // A c_rehash directory also holds files that are no certificates.
        std::fs::write(certs.join("README"), "not a certificate").expect("written");
        std::fs::create_dir(certs.join("sub")).expect("a subdirectory");
        assert_eq!(
            roots(&config(), &ExtraRoots::default())
                .expect("roots")
                .len(),
            bundled()
        );
        // SSL_CERT_DIR is a list; a directory in it that is missing is passed over.
        let extra = ExtraRoots {
            file: Some(file),
            dirs: vec![dir.path().join("missing"), certs],
        };
        assert_eq!(
            roots(&config(), &extra).expect("roots").len(),
            bundled() + 2
        );
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_named() {
        let dir = tempfile::tempdir().expect("a dir");
        let missing = dir.path().join("nothing.pem");
        let e = roots(
            &config(),
            &ExtraRoots {
                file: Some(missing.clone()),
                dirs: Vec::new(),
            },
        )
        .expect_err("a missing file");
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").expect("written");
        let e = roots(
            &config(),
            &ExtraRoots {
                file: Some(empty),
                dirs: Vec::new(),
            },
        )
        .expect_err("an empty file");
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
    }

    #[test]
    fn a_client_certificate_is_used_and_half_of_one_or_no_verification_is_refused() {
        let (cert, key) = pem_pair();
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut c = config();
        c.auth_info.client_certificate_data = Some(b64(&cert));
        c.auth_info.client_key_data = Some(b64(&key).into());
        let tls = tls_config(&c, &ExtraRoots::default()).expect("a TLS config");
        assert!(tls.client_auth_cert_resolver.has_certs());

        c.auth_info.client_key_data = None;
        let e = tls_config(&c, &ExtraRoots::default()).expect_err("a certificate without key");
        assert!(e.to_string().contains("come together"), "{e}");
        assert!(matches!(
            e,
            TlsError::Identity {
                source: Unreadable::Unpaired,
                ..
            }
        ));

        let mut c = config();
        c.accept_invalid_certs = true;
        let e = tls_config(&c, &ExtraRoots::default()).expect_err("no verification");
        assert!(e.to_string().contains("insecure-skip-tls-verify"), "{e}");
    }
}
