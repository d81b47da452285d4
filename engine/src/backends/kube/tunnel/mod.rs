//! A tenant's API server reached from outside the host cluster the way `kubectl
//! port-forward` reaches it: a local listener whose connections each become a
//! `pods/portforward` stream, through the host API server, to port 8443 of the virtual
//! cluster's control-plane pod. Nothing has to be exposed: whoever may port-forward in the
//! tenant's namespace may reach its API server.
//!
//! The credentials handed out are not the syncer's admin certificate (which lives as long as
//! the virtual cluster and cannot be revoked) but a short-lived token of a ServiceAccount
//! gpufleet keeps inside the virtual cluster, `kube-system/gpufleet-terraform`, bound to
//! `cluster-admin`. The admin certificate from Secret `vc-<name>` is used once, through the
//! tunnel, to ensure that ServiceAccount and mint the token.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::host::KubeHost;

mod credentials;
mod pods;

use credentials::{
    admin_credentials, admin_kubeconfig, ensure_service_account, mint_token, token_kubeconfig,
};
pub use pods::READY_WAIT;
use pods::ready_pod;

/// The port the virtual API server serves on inside its pod.
pub const TENANT_API_PORT: u16 = 8443;

/// The ServiceAccount inside the virtual cluster whose tokens are handed out.
pub const SERVICE_ACCOUNT: (&str, &str) = ("kube-system", "gpufleet-terraform");

/// The shortest token lifetime asked for (the TokenRequest API refuses less than ten
/// minutes).
pub const MIN_TOKEN_TTL: Duration = Duration::from_secs(600);

/// What a client needs to reach one tenant's API server through a tunnel.
#[derive(Clone)]
pub struct TenantAccess {
    /// The tunnel's local end, e.g. `https://127.0.0.1:<local port>`.
    pub host: String,
    /// The name to verify the serving certificate against when it does not cover `host`'s.
    pub tls_server_name: Option<String>,
    /// The CA that signs the virtual API server's serving certificate (PEM).
    pub cluster_ca_certificate: String,
    /// A short-lived token of [`SERVICE_ACCOUNT`], from the TokenRequest API.
    pub token: String,
    /// When `token` stops being accepted.
    pub expires_at: SystemTime,
    /// The same, as one kubeconfig YAML.
    pub kubeconfig: String,
}

impl std::fmt::Debug for TenantAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token (and the kubeconfig holding it) never reach a log.
        f.debug_struct("TenantAccess")
            .field("host", &self.host)
            .field("tls_server_name", &self.tls_server_name)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// The API rights a tunnel needs beyond the object kinds' own (it lists the control-plane
/// pods and reads Secret `vc-<name>` through them), for the provider's ClusterRole
/// ([`super::rbac`]). The API server authorizes a port-forward as `create` when it comes as a
/// POST and, for a WebSocket upgrade, as `get` on servers that do not map it to `create`.
pub const RULES: &[super::rbac::Rule] = &[super::rbac::Rule::new(
    "",
    "pods/portforward",
    &["get", "create"],
)];

/// A local listener forwarding through the host API server's `pods/portforward` to the
/// tenant's control-plane pod; dropping it closes the listener and its connections.
#[derive(Debug)]
pub struct TenantTunnel {
    access: TenantAccess,
    local: SocketAddr,
    pod: String,
    forwarder: JoinHandle<()>,
}

impl TenantTunnel {
    /// The address and credentials of the tenant's API server through this tunnel.
    pub fn access(&self) -> &TenantAccess {
        &self.access
    }

    /// The tunnel's local end.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The control-plane pod the tunnel leads to.
    pub fn pod(&self) -> &str {
        &self.pod
    }
}

impl Drop for TenantTunnel {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every open connection.
        self.forwarder.abort();
    }
}

/// Why a tunnel could not be opened: the endpoint, what was being done, and the cause.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// No control-plane pod of the virtual cluster is Ready.
    #[error(
        "virtual cluster {namespace}/{name} has no ready control-plane pod (pods labelled \
         app=vcluster,release={name} in {namespace}): {detail}"
    )]
    NotReady {
        /// The virtual cluster's namespace.
        namespace: String,
        /// The virtual cluster's name.
        name: String,
        /// What was found instead.
        detail: String,
    },
    /// A call to the host API server failed.
    #[error("host API server: {operation} ({endpoint}) failed: {source}")]
    Host {
        /// The endpoint called.
        endpoint: String,
        /// What was being done.
        operation: String,
        #[source]
        /// The cause.
        source: Box<kube::Error>,
    },
    /// Secret `vc-<name>` lacks what the tunnel needs.
    #[error("Secret vc-{name} in {namespace} has no {what}; is the virtual cluster running?")]
    Credentials {
        /// The virtual cluster's namespace.
        namespace: String,
        /// The virtual cluster's name.
        name: String,
        /// What is missing.
        what: &'static str,
    },
    /// The local listener could not be opened.
    #[error("opening a local listener on 127.0.0.1 failed: {source}")]
    Listen {
        #[source]
        /// The cause.
        source: std::io::Error,
    },
    /// A client for the tenant's API server could not be built from its credentials.
    #[error(
        "virtual cluster {namespace}/{name}: building a client for {endpoint} failed: {source}"
    )]
    Client {
        /// The virtual cluster's namespace.
        namespace: String,
        /// The virtual cluster's name.
        name: String,
        /// The endpoint called.
        endpoint: String,
        #[source]
        /// The cause.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A call to the tenant's API server, through the tunnel, failed.
    #[error(
        "virtual cluster {namespace}/{name} API server through the tunnel at {endpoint}: \
         {operation} failed: {source}"
    )]
    Tenant {
        /// The virtual cluster's namespace.
        namespace: String,
        /// The virtual cluster's name.
        name: String,
        /// The endpoint called.
        endpoint: String,
        /// What was being done.
        operation: String,
        #[source]
        /// The cause.
        source: Box<kube::Error>,
    },
    /// The TokenRequest answer had no token or expiry.
    #[error(
        "virtual cluster {namespace}/{name} API server at {endpoint}: the TokenRequest for \
         ServiceAccount {sa} answered without {what}",
        sa = format!("{}/{}", SERVICE_ACCOUNT.0, SERVICE_ACCOUNT.1)
    )]
    Token {
        /// The virtual cluster's namespace.
        namespace: String,
        /// The virtual cluster's name.
        name: String,
        /// The endpoint called.
        endpoint: String,
        /// What is missing.
        what: &'static str,
    },
}

/// Opens a tunnel to virtual cluster `namespace/name` and mints a token valid for
/// `token_ttl` (at least [`MIN_TOKEN_TTL`]) for its API server.
///
/// # Errors
/// When no control-plane pod is ready, Secret `vc-<name>` is missing or incomplete, or a
/// call to the host or the tenant API server fails; the error names which call.
pub async fn open_tenant_tunnel(
    host: &KubeHost,
    namespace: &str,
    name: &str,
    token_ttl: Duration,
) -> Result<TenantTunnel, TunnelError> {
    let client = host.client().clone();
    let pod = ready_pod(host, &client, namespace, name).await?;
    let creds = admin_credentials(host, &client, namespace, name).await?;

    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .map_err(|source| TunnelError::Listen { source })?;
    let local = listener
        .local_addr()
        .map_err(|source| TunnelError::Listen { source })?;
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let forwarder = tokio::spawn(forward_connections(listener, pods, pod.clone()));
    let mut tunnel = TenantTunnel {
        access: TenantAccess {
            host: format!("https://{local}"),
            // vCluster signs its serving certificate for 127.0.0.1.
            tls_server_name: None,
            cluster_ca_certificate: creds.ca.clone(),
            token: String::new(),
            expires_at: SystemTime::UNIX_EPOCH,
            kubeconfig: String::new(),
        },
        local,
        pod,
        forwarder,
    };
    let target = Target {
        namespace,
        name,
        endpoint: &tunnel.access.host,
    };
    let admin = target
        .client(admin_kubeconfig(&tunnel.access, &creds))
        .await?;
    ensure_service_account(&target, &admin).await?;
    let (token, expires_at) = mint_token(&target, &admin, token_ttl).await?;
    tunnel.access.kubeconfig = token_kubeconfig(&tunnel.access, &token);
    tunnel.access.token = token;
    tunnel.access.expires_at = expires_at;
    tracing::debug!(
        namespace,
        name,
        pod = %tunnel.pod,
        local = %tunnel.local,
        "tunnel to the virtual cluster's API server open"
    );
    Ok(tunnel)
}

/// Accepts connections until aborted; each becomes one port-forward stream to the pod.
async fn forward_connections(listener: TcpListener, pods: Api<Pod>, pod: String) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((conn, _)) => {
                    connections.spawn(forward_one(conn, pods.clone(), pod.clone()));
                }
                Err(e) => {
                    tracing::debug!("tunnel listener: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn forward_one(mut conn: TcpStream, pods: Api<Pod>, pod: String) {
    let _ = conn.set_nodelay(true);
    let mut forwarder = match pods.portforward(&pod, &[TENANT_API_PORT]).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("port-forward to pod {pod} port {TENANT_API_PORT} failed: {e}");
            return;
        }
    };
    let Some(mut upstream) = forwarder.take_stream(TENANT_API_PORT) else {
        return;
    };
    let errors = forwarder.take_error(TENANT_API_PORT);
    if let Err(e) = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await {
        tracing::debug!("tunnel connection to pod {pod} ended: {e}");
    }
    drop(upstream);
    if let Some(errors) = errors
        && let Some(message) = errors.await
    {
        tracing::debug!("port-forward to pod {pod}: {message}");
    }
    if let Err(e) = forwarder.join().await {
        tracing::debug!("port-forward to pod {pod} closed: {e}");
    }
}

/// The virtual cluster being reached, for building clients and wording errors.
struct Target<'a> {
    namespace: &'a str,
    name: &'a str,
    endpoint: &'a str,
}

impl Target<'_> {
    async fn client(&self, kubeconfig: Kubeconfig) -> Result<kube::Client, TunnelError> {
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| TunnelError::Client {
            namespace: self.namespace.into(),
            name: self.name.into(),
            endpoint: self.endpoint.into(),
            source,
        };
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| fail(Box::new(e)))?;
        // kube builds its TLS from rustls' process default, which has to be chosen once.
        let _ = rustls::crypto::ring::default_provider().install_default();
        super::client_naming_server(config).map_err(|e| fail(Box::new(e)))
    }

    fn failed(&self, operation: &str) -> impl FnOnce(kube::Error) -> TunnelError + '_ {
        let operation = operation.to_owned();
        move |e| TunnelError::Tenant {
            namespace: self.namespace.into(),
            name: self.name.into(),
            endpoint: self.endpoint.into(),
            operation,
            source: Box::new(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    use serde_json::{Value as Json, json};

    use super::credentials::{credentials_of, expiration_seconds};
    use super::pods::is_ready;
    use super::*;

    fn access() -> TenantAccess {
        TenantAccess {
            host: "https://127.0.0.1:40123".into(),
            tls_server_name: None,
            cluster_ca_certificate:
                "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n".into(),
            token: "secret-token".into(),
            expires_at: SystemTime::UNIX_EPOCH,
            kubeconfig: String::new(),
        }
    }

    #[test]
    fn token_lifetimes_below_ten_minutes_are_raised() {
        assert_eq!(expiration_seconds(Duration::from_secs(60)), 600);
        assert_eq!(expiration_seconds(Duration::from_secs(3600)), 3600);
        assert_eq!(expiration_seconds(Duration::from_millis(3_600_001)), 3601);
    }

    #[test]
    fn the_token_kubeconfig_parses_and_names_the_tunnel_ca_and_token() {
        let mut a = access();
        a.tls_server_name = Some("localhost".into());
        let text = token_kubeconfig(&a, "tok:en\"x");
        // kube reads it...
        let parsed = Kubeconfig::from_yaml(&text).expect("valid kubeconfig");
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:40123"));
        assert_eq!(cluster.tls_server_name.as_deref(), Some("localhost"));
        assert_eq!(parsed.current_context.as_deref(), Some("gpufleet-tunnel"));
        // ...and the values survive quoting.
        let plain: Json = serde_saphyr::from_str(&text).expect("yaml");
        assert_eq!(
            plain.pointer("/users/0/user/token"),
            Some(&json!("tok:en\"x"))
        );
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD
            .decode(
                plain
                    .pointer("/clusters/0/cluster/certificate-authority-data")
                    .and_then(Json::as_str)
                    .expect("ca"),
            )
            .expect("base64");
        assert_eq!(
            String::from_utf8(ca).expect("utf8"),
            a.cluster_ca_certificate
        );
    }

    #[test]
    fn debug_output_leaves_out_the_token() {
        let mut a = access();
        a.kubeconfig = token_kubeconfig(&a, "secret-token");
        let shown = format!("{a:?}");
        assert!(!shown.contains("secret-token"), "{shown}");
        assert!(shown.contains("127.0.0.1:40123"));
    }

    fn secret(data: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn credentials_come_from_the_pem_keys_or_the_kubeconfig() {
        let direct = credentials_of(&secret(&[
            ("certificate-authority", "CA"),
            ("client-certificate", "CERT"),
            ("client-key", "KEY"),
        ]))
        .expect("complete");
        assert_eq!(
            (
                direct.ca.as_str(),
                direct.certificate.as_str(),
                direct.key.as_str()
            ),
            ("CA", "CERT", "KEY")
        );
        let config = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    \
                      server: https://localhost:8443\n    certificate-authority-data: Q0E=\n\
                      users:\n- name: a\n  user:\n    client-certificate-data: Q0VSVA==\n    \
                      client-key-data: S0VZ\ncontexts: []\n";
        let inner = credentials_of(&secret(&[("config", config)])).expect("from kubeconfig");
        assert_eq!(
            (
                inner.ca.as_str(),
                inner.certificate.as_str(),
                inner.key.as_str()
            ),
            ("CA", "CERT", "KEY")
        );
        let missing = credentials_of(&secret(&[("certificate-authority", "CA")]));
        assert!(matches!(missing, Err(what) if what.contains("client certificate")));
    }

    #[test]
    fn only_ready_pods_that_are_not_terminating_are_chosen() {
        let pod = |ready: &str, deleting: bool| -> Pod {
            serde_json::from_value(json!({
                "metadata": {
                    "name": "vc-0",
                    "deletionTimestamp": deleting.then_some("2026-01-01T00:00:00Z"),
                },
                "status": { "conditions": [{ "type": "Ready", "status": ready }] },
            }))
            .expect("pod")
        };
        assert!(is_ready(&pod("True", false)));
        assert!(!is_ready(&pod("False", false)));
        assert!(!is_ready(&pod("True", true)));
    }
}
