//! Kubeconfig files: the admin one handed to users and tests, and one per component.
//!
//! The admin kubeconfig embeds the CA and the client certificate and key (base64), so it
//! works from any directory and can be copied; the component kubeconfigs point at the
//! files under `pki/`, as kubeadm's do. Both name one cluster (`gpufleet-lab`) with the
//! server `https://127.0.0.1:<apiserver port>`.

use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The cluster, user and context name in every kubeconfig the lab writes.
pub const CLUSTER_NAME: &str = "gpufleet-lab";

/// Why a kubeconfig could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// A file could not be read or written.
    #[error("failed to access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// kube could not parse the file or make a client configuration of it.
    #[error("failed to load the kubeconfig {path}: {source}")]
    Load {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The server URL of a lab whose API server listens on `port`.
#[must_use]
pub fn server_url(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

/// A kubeconfig with everything embedded (the admin kubeconfig).
#[must_use]
pub fn render_embedded(server: &str, ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> String {
    render(
        server,
        &format!("certificate-authority-data: {}", STANDARD.encode(ca_pem)),
        &format!(
            "client-certificate-data: {}\n    client-key-data: {}",
            STANDARD.encode(cert_pem),
            STANDARD.encode(key_pem)
        ),
        "admin",
    )
}

/// A kubeconfig for `server` (CA embedded) that authenticates with a bearer `token`, as
/// user `user`.
#[must_use]
pub fn render_token(server: &str, ca_pem: &[u8], token: &str, user: &str) -> String {
    render(
        server,
        &format!("certificate-authority-data: {}", STANDARD.encode(ca_pem)),
        &format!("token: {token}"),
        user,
    )
}

/// A kubeconfig that points at certificate files (the components' kubeconfigs).
#[must_use]
pub fn render_files(server: &str, ca: &Path, cert: &Path, key: &Path, user: &str) -> String {
    render(
        server,
        &format!("certificate-authority: {}", quote(ca)),
        &format!(
            "client-certificate: {}\n    client-key: {}",
            quote(cert),
            quote(key)
        ),
        user,
    )
}

/// Paths as YAML double-quoted strings.
fn quote(p: &Path) -> String {
    serde_json::to_string(&p.display().to_string()).unwrap_or_default()
}

fn render(server: &str, cluster_ca: &str, user_creds: &str, user: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CLUSTER_NAME}
  cluster:
    server: {server}
    {cluster_ca}
users:
- name: {user}
  user:
    {user_creds}
contexts:
- name: {CLUSTER_NAME}
  context:
    cluster: {CLUSTER_NAME}
    user: {user}
current-context: {CLUSTER_NAME}
"
    )
}

/// Writes a kubeconfig (mode 0600: it holds a private key or points at one).
///
/// # Errors
/// When the file cannot be written.
pub fn write(path: &Path, contents: &str) -> Result<(), KubeconfigError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| KubeconfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(contents.as_bytes()).map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(err)
}

/// Loads a kubeconfig file into a kube client configuration (TLS verification on, with
/// the CA from the file).
///
/// # Errors
/// When the file cannot be read or is not a usable kubeconfig.
pub async fn load(path: &Path) -> Result<kube::Config, KubeconfigError> {
    let load_err = |source: Box<dyn std::error::Error + Send + Sync>| KubeconfigError::Load {
        path: path.to_path_buf(),
        source,
    };
    let kc = Kubeconfig::read_from(path).map_err(|e| load_err(Box::new(e)))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| load_err(Box::new(e)))?;
    // Generous, but never hang forever on a wedged server.
    config.read_timeout = Some(std::time::Duration::from_secs(60));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn embedded_kubeconfig_loads_with_ca_and_client_identity() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::pki::Pki::new(dir.path());
        pki.generate().expect("pki");
        let read = |p: PathBuf| std::fs::read(p).expect("read");
        let text = render_embedded(
            &server_url(6443),
            &read(pki.ca_cert()),
            &read(pki.cert("admin")),
            &read(pki.key("admin")),
        );
        let path = dir.path().join("kubeconfig");
        write(&path, &text).expect("write");
        let config = load(&path).await.expect("load");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        assert!(!config.accept_invalid_certs);
        assert!(config.auth_info.client_certificate_data.is_some());
        assert!(config.auth_info.client_key_data.is_some());
    }

    #[tokio::test]
    async fn file_kubeconfig_points_at_the_pki_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::pki::Pki::new(&dir.path().join("with space"));
        pki.generate().expect("pki");
        let text = render_files(
            &server_url(1234),
            &pki.ca_cert(),
            &pki.cert("kwok"),
            &pki.key("kwok"),
            "kwok",
        );
        let path = dir.path().join("kwok.kubeconfig");
        write(&path, &text).expect("write");
        let config = load(&path).await.expect("load");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            config.auth_info.client_certificate.as_deref(),
            Some(pki.cert("kwok").display().to_string().as_str())
        );
    }
}
