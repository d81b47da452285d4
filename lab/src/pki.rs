//! The lab's PKI, generated in Rust (rcgen): no openssl needed.
//!
//! One CA signs everything, as in a kubeadm cluster with a single CA:
//!
//! | file | what | used by |
//! |---|---|---|
//! | `ca.crt`, `ca.key` | the CA (also the client CA, and the signer of CSRs) | all |
//! | `kube-apiserver.crt/.key` | serving cert: `127.0.0.1`, `10.96.0.1`, `localhost`, `kubernetes.default.svc…` | kube-apiserver |
//! | `kube-controller-manager-serving.crt/.key`, `kube-scheduler-serving.crt/.key` | serving certs for `127.0.0.1` (so `/healthz` is checked with TLS verification on) | kcm, scheduler |
//! | `admin.crt/.key` | client: `CN=gpufleet-admin, O=system:masters` | the admin kubeconfig |
//! | `kube-controller-manager.crt/.key` | client: `CN=system:kube-controller-manager` | kcm |
//! | `kube-scheduler.crt/.key` | client: `CN=system:kube-scheduler` | scheduler |
//! | `kwok.crt/.key` | client: `CN=kwok-controller, O=system:masters` | kwok |
//! | `sa.key`, `sa.pub` | service-account token signing key pair | apiserver, kcm |
//! | `front-proxy-ca.crt/.key` | a second CA for the aggregation layer (kubeadm's layout) | apiserver (`--requestheader-client-ca-file`) |
//! | `front-proxy-client.crt/.key` | client: `CN=front-proxy-client`, signed by the front-proxy CA | apiserver (`--proxy-client-cert-file`) |
//!
//! With the front-proxy CA the API server publishes its request-header settings in the
//! `kube-system/extension-apiserver-authentication` ConfigMap; without it the controller
//! manager and scheduler log "missing content for CA bundle" every few seconds.
//!
//! Keys are ECDSA P-256 (fast to generate, accepted by every component); private keys are
//! PKCS#8 PEM files readable only by the owner. Certificates are valid from one day ago
//! for ten years.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// Subject alternative names of the API server's serving certificate: loopback, and the
/// names and first service IP the in-cluster `kubernetes` Service would use.
pub const APISERVER_SANS: &[&str] = &[
    "127.0.0.1",
    "10.96.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// A client identity: the certificate's common name (the Kubernetes user name) and
/// organization (its groups).
#[derive(Debug, Clone, Copy)]
pub struct ClientIdentity {
    /// File stem under `pki/`.
    pub file: &'static str,
    /// Common name: the user name the API server sees.
    pub common_name: &'static str,
    /// Organization: the group, if any.
    pub group: Option<&'static str>,
}

/// The client certificates the lab issues.
pub const CLIENTS: &[ClientIdentity] = &[
    ClientIdentity {
        file: "admin",
        common_name: "gpufleet-admin",
        group: Some("system:masters"),
    },
    ClientIdentity {
        file: "kube-controller-manager",
        common_name: "system:kube-controller-manager",
        group: None,
    },
    ClientIdentity {
        file: "kube-scheduler",
        common_name: "system:kube-scheduler",
        group: None,
    },
    ClientIdentity {
        file: "kwok",
        common_name: "kwok-controller",
        group: Some("system:masters"),
    },
];

/// Serving certificates: file stem and SANs.
const SERVERS: &[(&str, &[&str])] = &[
    ("kube-apiserver", APISERVER_SANS),
    (
        "kube-controller-manager-serving",
        &["127.0.0.1", "localhost"],
    ),
    ("kube-scheduler-serving", &["127.0.0.1", "localhost"]),
];

/// File stem of the front-proxy CA.
pub const FRONT_PROXY_CA: &str = "front-proxy-ca";
/// File stem of the front-proxy client certificate (the API server's identity towards
/// aggregated API servers), and its common name.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// Why the PKI could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused to generate a key or certificate.
    #[error("failed to generate a key or certificate: {0}")]
    Generate(#[source] rcgen::Error),
    /// A file could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl From<rcgen::Error> for PkiError {
    fn from(e: rcgen::Error) -> Self {
        Self::Generate(e)
    }
}

/// The PKI files of one lab, under `<dir>/pki/`.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// The PKI in `dir` (which need not exist yet).
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<stem>.crt`
    #[must_use]
    pub fn cert(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}.crt"))
    }

    /// `<stem>.key`
    #[must_use]
    pub fn key(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}.key"))
    }

    /// The CA certificate.
    #[must_use]
    pub fn ca_cert(&self) -> PathBuf {
        self.cert("ca")
    }

    /// The service-account signing key.
    #[must_use]
    pub fn sa_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }

    /// The service-account public key.
    #[must_use]
    pub fn sa_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }

    /// Every file the PKI consists of.
    #[must_use]
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![
            self.ca_cert(),
            self.key("ca"),
            self.sa_key(),
            self.sa_pub(),
            self.cert(FRONT_PROXY_CA),
            self.key(FRONT_PROXY_CA),
            self.cert(FRONT_PROXY_CLIENT),
            self.key(FRONT_PROXY_CLIENT),
        ];
        for (stem, _) in SERVERS {
            files.push(self.cert(stem));
            files.push(self.key(stem));
        }
        for client in CLIENTS {
            files.push(self.cert(client.file));
            files.push(self.key(client.file));
        }
        files
    }

    /// Whether every file is there.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.files().iter().all(|f| f.is_file())
    }

    /// Generates the whole PKI unless it is already complete (a lab keeps its CA across
    /// `down` and `up`, so kubeconfigs handed out stay valid). Returns whether it
    /// generated.
    ///
    /// # Errors
    /// When generation fails or a file cannot be written.
    pub fn ensure(&self) -> Result<bool, PkiError> {
        if self.is_complete() {
            return Ok(false);
        }
        self.generate()?;
        Ok(true)
    }

    /// Generates a new PKI, replacing any files there.
    ///
    /// # Errors
    /// When generation fails or a file cannot be written.
    pub fn generate(&self) -> Result<(), PkiError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| PkiError::Write {
            path: self.dir.clone(),
            source,
        })?;
        let (ca_params, ca_key, ca_cert) = new_ca("gpufleet-lab-ca")?;
        let issuer = Issuer::new(ca_params, &ca_key);

        let (fp_params, fp_key, fp_cert) = new_ca("gpufleet-lab-front-proxy-ca")?;
        let fp_issuer = Issuer::new(fp_params, &fp_key);
        let (cert, key) = client_cert(FRONT_PROXY_CLIENT, None, &fp_issuer)?;
        self.write(&self.cert(FRONT_PROXY_CLIENT), &cert, false)?;
        self.write(&self.key(FRONT_PROXY_CLIENT), &key, true)?;
        self.write(&self.key(FRONT_PROXY_CA), &fp_key.serialize_pem(), true)?;
        self.write(&self.cert(FRONT_PROXY_CA), &fp_cert.pem(), false)?;

        for (stem, sans) in SERVERS {
            let key = KeyPair::generate()?;
            let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
            let mut params = CertificateParams::new(sans)?;
            params.distinguished_name = dn(stem.trim_end_matches("-serving"), None);
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            params.use_authority_key_identifier_extension = true;
            set_validity(&mut params);
            let cert = params.signed_by(&key, &issuer)?;
            self.write(&self.cert(stem), &cert.pem(), false)?;
            self.write(&self.key(stem), &key.serialize_pem(), true)?;
        }
        for client in CLIENTS {
            let (cert, key) = client_cert(client.common_name, client.group, &issuer)?;
            self.write(&self.cert(client.file), &cert, false)?;
            self.write(&self.key(client.file), &key, true)?;
        }
        let sa = KeyPair::generate()?;
        self.write(&self.sa_key(), &sa.serialize_pem(), true)?;
        self.write(&self.sa_pub(), &sa.public_key_pem(), false)?;
        // The CA last: `is_complete` only holds once everything else is there too.
        self.write(&self.key("ca"), &ca_key.serialize_pem(), true)?;
        self.write(&self.ca_cert(), &ca_cert.pem(), false)?;
        Ok(())
    }

    /// Writes one file; keys get mode 0600.
    fn write(&self, path: &Path, contents: &str, secret: bool) -> Result<(), PkiError> {
        let err = |source| PkiError::Write {
            path: path.to_path_buf(),
            source,
        };
        let _ = std::fs::remove_file(path);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        if secret {
            options.mode(0o600);
        }
        let mut file = options.open(path).map_err(err)?;
        file.write_all(contents.as_bytes()).map_err(err)
    }
}

/// A new self-signed CA: its parameters (to issue with), key and certificate.
pub(crate) fn new_ca(
    common_name: &str,
) -> Result<(CertificateParams, KeyPair, rcgen::Certificate), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = dn(common_name, None);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params);
    let cert = params.self_signed(&key)?;
    Ok((params, key, cert))
}

/// A client certificate and key (PEM) issued by `issuer`.
pub(crate) fn client_cert(
    common_name: &str,
    group: Option<&str>,
    issuer: &Issuer<'_, &KeyPair>,
) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = dn(common_name, group);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params);
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A distinguished name with a common name and, optionally, an organization.
fn dn(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Valid from a day ago (tolerates clock skew) for ten years.
pub(crate) fn set_validity(params: &mut CertificateParams) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::days(1);
    params.not_after = now + Duration::days(3650);
}

/// The BCM emulator's client certificates: file stem under `pki/` and common name (the
/// cmdaemon profile the certificate carries).
pub const BCM_CLIENTS: [(&str, &str); 2] = [("bcm-admin", "admin"), ("bcm-readonly", "readonly")];

impl Pki {
    /// Issues the BCM emulator's client certificates ([`BCM_CLIENTS`]) from the lab CA
    /// when they are missing (a lab made before the emulator joined gets them without a
    /// new CA). Returns whether it issued any.
    ///
    /// # Errors
    /// When the CA cannot be read or a file cannot be written.
    pub fn ensure_bcm_clients(&self) -> Result<bool, PkiError> {
        let missing: Vec<&(&str, &str)> = BCM_CLIENTS
            .iter()
            .filter(|(stem, _)| !(self.cert(stem).is_file() && self.key(stem).is_file()))
            .collect();
        if missing.is_empty() {
            return Ok(false);
        }
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path).map_err(|source| PkiError::Write { path, source })
        };
        let ca_key = KeyPair::from_pem(&read(self.key("ca"))?)?;
        let issuer = Issuer::from_ca_cert_pem(&read(self.ca_cert())?, &ca_key)?;
        for (stem, cn) in missing {
            let (cert, key) = client_cert(cn, None, &issuer)?;
            self.write(&self.key(stem), &key, true)?;
            self.write(&self.cert(stem), &cert, false)?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

    use super::*;

    fn read_der(path: &Path) -> Vec<u8> {
        CertificateDer::from_pem_file(path)
            .expect("PEM certificate")
            .to_vec()
    }

    #[test]
    fn generates_every_file_once_and_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki::new(&dir.path().join("pki"));
        assert!(pki.ensure().expect("generate"));
        assert!(pki.is_complete());
        let ca = std::fs::read(pki.ca_cert()).expect("ca");
        assert!(!pki.ensure().expect("second ensure"));
        assert_eq!(
            std::fs::read(pki.ca_cert()).expect("ca"),
            ca,
            "the CA is kept"
        );
        for key in [pki.key("ca"), pki.key("admin"), pki.sa_key()] {
            let mode = std::fs::metadata(&key).expect("key").permissions().mode();
            assert_eq!(mode & 0o077, 0, "{} is readable by others", key.display());
        }
    }

    #[test]
    fn certificates_have_the_subjects_sans_and_usages_kubernetes_needs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki::new(dir.path());
        pki.generate().expect("generate");

        let ca_der = read_der(&pki.ca_cert());
        let (_, ca) = X509Certificate::from_der(&ca_der).expect("parse ca");
        assert!(ca.is_ca());
        assert_eq!(ca.subject().to_string(), "CN=gpufleet-lab-ca");

        let api_der = read_der(&pki.cert("kube-apiserver"));
        let (_, api) = X509Certificate::from_der(&api_der).expect("parse apiserver");
        assert_eq!(api.issuer(), ca.subject());
        assert!(!api.is_ca());
        let sans = api
            .subject_alternative_name()
            .expect("san ext")
            .expect("has sans");
        let mut ips = Vec::new();
        let mut dns = Vec::new();
        for name in &sans.value.general_names {
            match name {
                GeneralName::IPAddress(b) => ips.push(b.to_vec()),
                GeneralName::DNSName(d) => dns.push((*d).to_owned()),
                _ => {}
            }
        }
        assert!(ips.contains(&vec![127, 0, 0, 1]));
        assert!(ips.contains(&vec![10, 96, 0, 1]));
        assert!(dns.contains(&"kubernetes.default.svc.cluster.local".to_owned()));
        assert!(dns.contains(&"localhost".to_owned()));
        let eku = api.extended_key_usage().expect("eku").expect("has eku");
        assert!(eku.value.server_auth && !eku.value.client_auth);
        assert!(api.verify_signature(Some(ca.public_key())).is_ok());

        let admin_der = read_der(&pki.cert("admin"));
        let (_, admin) = X509Certificate::from_der(&admin_der).expect("parse admin");
        assert_eq!(
            admin.subject().to_string(),
            "O=system:masters, CN=gpufleet-admin"
        );
        let eku = admin.extended_key_usage().expect("eku").expect("has eku");
        assert!(eku.value.client_auth && !eku.value.server_auth);
        assert!(admin.verify_signature(Some(ca.public_key())).is_ok());

        let kcm_der = read_der(&pki.cert("kube-controller-manager"));
        let (_, kcm) = X509Certificate::from_der(&kcm_der).expect("parse kcm");
        assert_eq!(
            kcm.subject().to_string(),
            "CN=system:kube-controller-manager"
        );

        let fp_ca_der = read_der(&pki.cert(FRONT_PROXY_CA));
        let (_, fp_ca) = X509Certificate::from_der(&fp_ca_der).expect("parse front-proxy ca");
        let fp_der = read_der(&pki.cert(FRONT_PROXY_CLIENT));
        let (_, fp) = X509Certificate::from_der(&fp_der).expect("parse front-proxy client");
        assert_eq!(fp.subject().to_string(), "CN=front-proxy-client");
        assert!(fp.verify_signature(Some(fp_ca.public_key())).is_ok());
        assert!(
            fp.verify_signature(Some(ca.public_key())).is_err(),
            "the front proxy has a CA of its own"
        );

        let sa_pub = std::fs::read_to_string(pki.sa_pub()).expect("sa.pub");
        assert!(sa_pub.starts_with("-----BEGIN PUBLIC KEY-----"));
        let sa_key = std::fs::read_to_string(pki.sa_key()).expect("sa.key");
        assert!(sa_key.starts_with("-----BEGIN PRIVATE KEY-----"));
    }

    /// The real check: a TLS client that trusts only the lab CA accepts the API server's
    /// certificate for 127.0.0.1, and the server accepts the admin client certificate.
    #[tokio::test]
    async fn mutual_tls_handshake_on_loopback_verifies() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki::new(dir.path());
        pki.generate().expect("generate");

        let ca = CertificateDer::from_pem_file(pki.ca_cert()).expect("ca");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).expect("add ca");
        let roots = Arc::new(roots);

        let server_chain =
            vec![CertificateDer::from_pem_file(pki.cert("kube-apiserver")).expect("cert")];
        let server_key = PrivateKeyDer::from_pem_file(pki.key("kube-apiserver")).expect("key");
        let client_verifier = rustls::server::WebPkiClientVerifier::builder(roots.clone())
            .build()
            .expect("client verifier");
        let server_config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(server_chain, server_key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));

        let client_chain = vec![CertificateDer::from_pem_file(pki.cert("admin")).expect("cert")];
        let client_key = PrivateKeyDer::from_pem_file(pki.key("admin")).expect("key");
        let client_config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_client_auth_cert(client_chain, client_key)
            .expect("client config");
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(tcp).await.expect("server handshake");
            tls.write_all(b"ok").await.expect("write");
            tls.shutdown().await.expect("shutdown");
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into());
        let mut tls = connector
            .connect(name, tcp)
            .await
            .expect("client handshake");
        let mut body = String::new();
        tls.read_to_string(&mut body).await.expect("read");
        assert_eq!(body, "ok");
        server.await.expect("server");
    }
}
