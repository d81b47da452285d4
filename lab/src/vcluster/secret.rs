//! Secret `vc-<name>`: the virtual cluster's kubeconfig and its parts, in vCluster's shape.
//!
//! ```text
//! type: Opaque
//! metadata.labels: app=vcluster, vcluster-name=<name>
//! metadata.ownerReferences: the StatefulSet
//! data:
//!   config                  kubeconfig: server https://127.0.0.1:<port>, the CA and the
//!                           admin client certificate and key, all embedded
//!   certificate-authority   the cluster's CA (PEM)
//!   client-certificate      the admin client certificate (PEM, group system:masters)
//!   client-key              its key (PEM)
//! ```

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::record::Record;

/// The PEM parts of a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The CA certificate.
    pub ca: Vec<u8>,
    /// The client certificate.
    pub cert: Vec<u8>,
    /// The client key.
    pub key: Vec<u8>,
}

/// The server URL of the virtual cluster on `port`.
#[must_use]
pub fn server_url(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

/// The kubeconfig of virtual cluster `name` (cluster, user and context `vcluster-<name>`).
#[must_use]
pub fn render_kubeconfig(name: &str, port: u16, creds: &Credentials) -> String {
    let context = format!("vcluster-{name}");
    let server = server_url(port);
    let ca = STANDARD.encode(&creds.ca);
    let cert = STANDARD.encode(&creds.cert);
    let key = STANDARD.encode(&creds.key);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {context}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {context}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {context}
  context:
    cluster: {context}
    user: {context}
current-context: {context}
"
    )
}

/// The data of Secret `vc-<name>`.
#[must_use]
pub fn secret_data(record: &Record, creds: &Credentials) -> BTreeMap<String, ByteString> {
    let kubeconfig = render_kubeconfig(&record.name, record.port, creds);
    [
        ("config", kubeconfig.into_bytes()),
        ("certificate-authority", creds.ca.clone()),
        ("client-certificate", creds.cert.clone()),
        ("client-key", creds.key.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v)))
    .collect()
}

/// The labels of Secret `vc-<name>`.
#[must_use]
pub fn secret_labels(name: &str) -> BTreeMap<String, String> {
    [
        ("app".to_string(), "vcluster".to_string()),
        ("vcluster-name".to_string(), name.to_string()),
    ]
    .into()
}

/// The whole Secret `vc-<name>`, owned by the StatefulSet (so the host's garbage
/// collector removes it with the StatefulSet).
#[must_use]
pub fn secret(record: &Record, creds: &Credentials) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(super::kubeconfig_secret_name(&record.name)),
            namespace: Some(record.namespace.clone()),
            labels: Some(secret_labels(&record.name)),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: record.name.clone(),
                uid: record.uid.clone(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(secret_data(record, creds)),
        ..Secret::default()
    }
}

/// Whether `existing` already says what [`secret`] would write.
#[must_use]
pub fn is_current(existing: &Secret, record: &Record, creds: &Credentials) -> bool {
    let labels = existing.metadata.labels.clone().unwrap_or_default();
    let labelled = secret_labels(&record.name)
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    labelled && existing.data.as_ref() == Some(&secret_data(record, creds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_kubeconfig_loads_with_the_clusters_ca_and_admin_identity() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = super::super::certs::ClusterPki::new(dir.path());
        pki.ensure(&[]).expect("pki");
        let read = |p: std::path::PathBuf| std::fs::read(p).expect("read");
        let creds = Credentials {
            ca: read(pki.ca_cert()),
            cert: read(pki.admin_cert()),
            key: read(pki.admin_key()),
        };
        let record = Record::new("vc-a", "a", "uid-a", 24567);
        let s = secret(&record, &creds);
        assert_eq!(s.metadata.name.as_deref(), Some("vc-a"));
        let data = s.data.clone().expect("data");
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "certificate-authority",
                "client-certificate",
                "client-key",
                "config"
            ]
        );
        let text = String::from_utf8(data["config"].0.clone()).expect("utf-8");
        let kc = kube::config::Kubeconfig::from_yaml(&text).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:24567/");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        assert!(is_current(&s, &record, &creds));
        let moved = Record {
            port: 24568,
            ..record
        };
        assert!(!is_current(&s, &moved, &creds));
    }
}
