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

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, Cluster, KubeConfigOptions, Kubeconfig};
use serde_json::{Value as Json, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::host::KubeHost;
use super::{FIELD_MANAGER, MANAGED_BY, MANAGED_BY_VALUE};

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

/// How long opening waits for a control-plane pod to become Ready (one that is starting, or
/// restarting after a change): about what the chart's readiness probe allows a fresh start.
pub const READY_WAIT: Duration = Duration::from_secs(180);

/// The first Ready, not terminating control-plane pod of the virtual cluster, waiting up to
/// [`READY_WAIT`] while its StatefulSet is there to start one. With no StatefulSet (no such
/// virtual cluster) or none asked to run (paused), it answers at once.
async fn ready_pod(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, TunnelError> {
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    loop {
        let pods = control_plane_pods(host, client, namespace, name).await?;
        let count = pods.len();
        if let Some(pod) = pods
            .into_iter()
            .find(is_ready)
            .and_then(|p| p.metadata.name)
        {
            return Ok(pod);
        }
        let not_ready = |detail: String| TunnelError::NotReady {
            namespace: namespace.into(),
            name: name.into(),
            detail,
        };
        let replicas = desired_replicas(host, client, namespace, name).await?;
        match replicas {
            None => {
                return Err(not_ready(format!(
                    "there is no StatefulSet {name} in {namespace}: no such virtual cluster"
                )));
            }
            Some(0) => {
                return Err(not_ready(
                    "its StatefulSet asks for no replicas: the virtual cluster is paused".into(),
                ));
            }
            Some(_) if tokio::time::Instant::now() >= deadline => {
                return Err(not_ready(match count {
                    0 => format!("none exists after {}s", READY_WAIT.as_secs()),
                    n => format!("{n} exist, none became Ready in {}s", READY_WAIT.as_secs()),
                }));
            }
            Some(_) => tokio::time::sleep(Duration::from_secs(2)).await,
        }
    }
}

async fn control_plane_pods(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<Pod>, TunnelError> {
    let selector = format!("app=vcluster,release={name}");
    host.count();
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| TunnelError::Host {
            endpoint: format!("/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"),
            operation: "listing the control-plane pods".into(),
            source: Box::new(e),
        })?;
    Ok(pods.items)
}

/// `spec.replicas` of the control plane's StatefulSet, `None` when there is none.
async fn desired_replicas(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<i32>, TunnelError> {
    host.count();
    let found = Api::<StatefulSet>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| TunnelError::Host {
            endpoint: format!("/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}"),
            operation: format!("reading StatefulSet {name}"),
            source: Box::new(e),
        })?;
    Ok(found.map(|s| s.spec.and_then(|spec| spec.replicas).unwrap_or(1)))
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The syncer's admin identity and CA, from Secret `vc-<name>`.
struct AdminCredentials {
    ca: String,
    certificate: String,
    key: String,
}

async fn admin_credentials(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<AdminCredentials, TunnelError> {
    let secret_name = format!("vc-{name}");
    host.count();
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&secret_name)
        .await
        .map_err(|e| TunnelError::Host {
            endpoint: format!("/api/v1/namespaces/{namespace}/secrets/{secret_name}"),
            operation: format!("reading Secret {secret_name}"),
            source: Box::new(e),
        })?;
    credentials_of(&secret).map_err(|what| TunnelError::Credentials {
        namespace: namespace.into(),
        name: name.into(),
        what,
    })
}

/// The PEM keys of Secret `vc-<name>`, falling back to the data inside its kubeconfig
/// (`config`); `Err` names what is missing.
fn credentials_of(secret: &Secret) -> Result<AdminCredentials, &'static str> {
    let data = secret.data.as_ref();
    let key = |k: &str| {
        data.and_then(|d| d.get(k))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .filter(|s| !s.trim().is_empty())
    };
    // The kubeconfig read as plain data: kube's own type hides the key behind `secrecy`.
    let kubeconfig: Option<Json> =
        key("config").and_then(|text| serde_saphyr::from_str(&text).ok());
    let inner = |ptr: &str| {
        kubeconfig
            .as_ref()
            .and_then(|k| k.pointer(ptr))
            .and_then(Json::as_str)
    };
    let decoded = |b64: Option<&str>| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(b64?.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let ca = key("certificate-authority")
        .or_else(|| decoded(inner("/clusters/0/cluster/certificate-authority-data")))
        .ok_or("certificate authority (key certificate-authority)")?;
    let certificate = key("client-certificate")
        .or_else(|| decoded(inner("/users/0/user/client-certificate-data")))
        .ok_or("client certificate (key client-certificate)")?;
    let key_pem = key("client-key")
        .or_else(|| decoded(inner("/users/0/user/client-key-data")))
        .ok_or("client key (key client-key)")?;
    Ok(AdminCredentials {
        ca,
        certificate,
        key: key_pem,
    })
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

/// Ensures [`SERVICE_ACCOUNT`] and its `cluster-admin` binding (server-side apply, so
/// a second tunnel changes nothing).
async fn ensure_service_account(
    target: &Target<'_>,
    admin: &kube::Client,
) -> Result<(), TunnelError> {
    let (sa_ns, sa_name) = SERVICE_ACCOUNT;
    let labels = json!({ MANAGED_BY: MANAGED_BY_VALUE });
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let sa = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": { "name": sa_name, "namespace": sa_ns, "labels": labels },
    });
    Api::<ServiceAccount>::namespaced(admin.clone(), sa_ns)
        .patch(sa_name, &pp, &Patch::Apply(&sa))
        .await
        .map_err(target.failed(&format!("applying ServiceAccount {sa_ns}/{sa_name}")))?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": sa_name, "labels": labels },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{ "kind": "ServiceAccount", "name": sa_name, "namespace": sa_ns }],
    });
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(sa_name, &pp, &Patch::Apply(&binding))
        .await
        .map_err(target.failed(&format!("applying ClusterRoleBinding {sa_name}")))?;
    Ok(())
}

/// The seconds a TokenRequest asks for: `ttl`, at least [`MIN_TOKEN_TTL`], rounded up.
fn expiration_seconds(ttl: Duration) -> i64 {
    let ttl = ttl.max(MIN_TOKEN_TTL);
    let whole = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(whole).unwrap_or(i64::MAX)
}

async fn mint_token(
    target: &Target<'_>,
    admin: &kube::Client,
    ttl: Duration,
) -> Result<(String, SystemTime), TunnelError> {
    let (sa_ns, sa_name) = SERVICE_ACCOUNT;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(expiration_seconds(ttl)),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let answer: TokenRequest = Api::<ServiceAccount>::namespaced(admin.clone(), sa_ns)
        .create_subresource("token", sa_name, &PostParams::default(), &request)
        .await
        .map_err(target.failed(&format!(
            "requesting a token for ServiceAccount {sa_ns}/{sa_name}"
        )))?;
    let missing = |what| TunnelError::Token {
        namespace: target.namespace.into(),
        name: target.name.into(),
        endpoint: target.endpoint.into(),
        what,
    };
    let status = answer.status.ok_or_else(|| missing("a status"))?;
    let token = status
        .token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| missing("a token"))?;
    let expires_at = status
        .expiration_timestamp
        .map(|t| SystemTime::from(t.0))
        .ok_or_else(|| missing("an expiration time"))?;
    Ok((token, expires_at))
}

/// A one-context kubeconfig for `access.host` with the given user.
fn kubeconfig(access: &TenantAccess, user: AuthInfo) -> Kubeconfig {
    use base64::Engine as _;
    let cluster = Cluster {
        server: Some(access.host.clone()),
        certificate_authority_data: Some(
            base64::engine::general_purpose::STANDARD.encode(&access.cluster_ca_certificate),
        ),
        tls_server_name: access.tls_server_name.clone(),
        ..Cluster::default()
    };
    super::one_context_kubeconfig("gpufleet-tunnel", cluster, user)
}

fn admin_kubeconfig(access: &TenantAccess, creds: &AdminCredentials) -> Kubeconfig {
    use base64::Engine as _;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    kubeconfig(
        access,
        AuthInfo {
            client_certificate_data: Some(b64(&creds.certificate)),
            client_key_data: Some(b64(&creds.key).into()),
            ..AuthInfo::default()
        },
    )
}

/// The token kubeconfig as YAML, written by hand so the token is not passed through a
/// serializer that might log it; every value is a plain scalar or base64.
fn token_kubeconfig(access: &TenantAccess, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(&access.cluster_ca_certificate);
    let server_name = access
        .tls_server_name
        .as_deref()
        .map(|n| format!("    tls-server-name: {}\n", yaml_string(n)))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: gpufleet-tunnel\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         {server_name}\
         users:\n\
         - name: gpufleet-tunnel\n  \
           user:\n    \
             token: {token}\n\
         contexts:\n\
         - name: gpufleet-tunnel\n  \
           context:\n    \
             cluster: gpufleet-tunnel\n    \
             user: gpufleet-tunnel\n\
         current-context: gpufleet-tunnel\n",
        server = yaml_string(&access.host),
        token = yaml_string(token),
    )
}

/// A YAML double-quoted scalar (JSON's string syntax is valid YAML).
fn yaml_string(s: &str) -> String {
    Json::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

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
