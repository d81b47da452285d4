//! The host cluster: one shared `kube::Client` per provider settings, the field manager,
//! the labels every object gpufleet writes carries, and [`DynamicClient`], the object calls
//! (apply, get, list, delete by a fixed [`Gvk`]) the resources make on that client.
//!
//! # Connection
//!
//! In order of precedence: `host` (with `cluster_ca_certificate` and a `token` or client
//! certificate), then `config_path` with an optional `context`, then `KUBECONFIG` and
//! `~/.kube/config` as kubectl reads them. TLS is always verified; a kubeconfig that turns
//! verification off is honoured only because its author asked for it.
//!
//! # Tenant tunnels
//!
//! [`tunnel`] reaches a virtual cluster's API server from outside the host cluster through
//! the host API server's `pods/portforward`, with a short-lived token (as `kubectl
//! port-forward` or `vcluster connect` would), for callers that need a tenant's API only for
//! the length of one operation.
//!
//! # Ownership
//!
//! Everything gpufleet creates is written with server-side apply under [`FIELD_MANAGER`]
//! and carries [`MANAGED_BY`]` = gpufleet` plus an owner label naming the resource instance,
//! so an interrupted apply finds and adopts what it already made, and destroy removes
//! exactly that. Fields other managers own are settled by [`ownership`]: hand edits are
//! taken back, replica counts and foreign labels stay with their controllers.

pub mod bundled_tls;
pub mod host;
pub mod json;
mod labels;
pub mod lease;
mod objects;
pub mod ownership;
pub mod rbac;
pub mod selector;
pub mod tunnel;

use std::{
    collections::HashMap,
    sync::{Mutex, OnceLock, PoisonError},
};

use kube::config::{
    AuthInfo, Cluster, Context as KubeContext, KubeConfigOptions, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext,
};
pub use labels::*;
pub use objects::{DynamicClient, Gvk, ObjectError, describe, status_code};
pub use tunnel::{TenantAccess, TenantTunnel, TunnelError, open_tenant_tunnel};

use crate::{diag::Diagnostics, path::AttrPath, provider_config::ProviderSettings};

/// The server-side apply field manager of every write.
pub const FIELD_MANAGER: &str = "gpufleet";

/// The settings of the `kubernetes` block that decide which cluster and identity a client
/// uses; two operations with equal keys share one client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct ConnectionKey {
    config_path: Option<String>,
    context: Option<String>,
    host: Option<String>,
    ca: Option<String>,
    token: Option<String>,
    client_certificate: Option<String>,
    client_key: Option<String>,
}

impl ConnectionKey {
    fn from_settings(settings: &ProviderSettings) -> Self {
        let get = |name: &str| settings.get("kubernetes", name).map(str::to_owned);
        ConnectionKey {
            config_path: get("config_path"),
            context: get("context"),
            host: get("host"),
            ca: get("cluster_ca_certificate"),
            token: get("token"),
            client_certificate: get("client_certificate"),
            client_key: get("client_key"),
        }
    }
}

/// A client of the host cluster for these settings, shared by every operation that uses the
/// same settings. Fails with a diagnostic naming the setting at fault.
///
/// `needed_by` names what needs the cluster (for example `gpufleet_virtual_cluster`), for the
/// message when the block's values are not known yet.
pub async fn client(
    settings: &ProviderSettings,
    needed_by: &str,
) -> Result<kube::Client, Diagnostics> {
    if settings.is_pending("kubernetes") {
        return Err(settings_diag(
            "Provider Settings Not Known",
            format!(
                "{needed_by} needs the provider's `kubernetes` block, but its values are not \
                 known yet (they depend on resources that are not applied). Apply those first, \
                 for example with -target."
            ),
        ));
    }
    let key = ConnectionKey::from_settings(settings);
    static CLIENTS: OnceLock<Mutex<HashMap<ConnectionKey, kube::Client>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Mutex::default);
    if let Some(c) = clients
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(c.clone());
    }
    let config = config_for(&key).await?;
    // kube builds its TLS from rustls' process default; the provider links two crypto
    // back ends, so one has to be chosen before the first client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = client_naming_server(config).map_err(|e| {
        settings_diag(
            "Kubernetes Client Failed",
            format!("Could not build a client for the host cluster: {e}"),
        )
    })?;
    clients
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, client.clone());
    Ok(client)
}

/// A transport failure of a client, with the API server it was talking to: hyper's own text
/// ("client error (Connect)") names neither the address nor, on its face, the cause.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach the API server at {server}")]
pub struct Unreachable {
    server: String,
    #[source]
    source: tower::BoxError,
}

/// kube's client for `config`, whose transport failures say which API server they concern
/// ([`Unreachable`]). Answers of the API server (refusals included) are not failures of the
/// stack and pass as they are.
pub(crate) fn client_naming_server(config: kube::Config) -> Result<kube::Client, ClientError> {
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let name = tower::util::MapErrLayer::new(move |source: tower::BoxError| -> tower::BoxError {
        Box::new(Unreachable {
            server: server.clone(),
            source,
        })
    });
    #[cfg(not(target_os = "macos"))]
    let builder = kube::client::ClientBuilder::try_from(config)?;
    #[cfg(target_os = "macos")]
    let builder = bundled_tls::client_builder(&config, &bundled_tls::ExtraRoots::from_env())?;
    Ok(builder.with_layer(&name).build())
}

/// Why a client of a cluster could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// kube refused the configuration.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The TLS of the macOS build refused it.
    #[error(transparent)]
    Tls(#[from] bundled_tls::TlsError),
}

async fn config_for(key: &ConnectionKey) -> Result<kube::Config, Diagnostics> {
    let options = KubeConfigOptions {
        context: key.context.clone(),
        ..KubeConfigOptions::default()
    };
    let from_kubeconfig = |e: kube::config::KubeconfigError, what: &str| {
        settings_diag(
            "Invalid Kubernetes Settings",
            format!(
                "Could not load {what}: {e}. Set `kubernetes.config_path` (GPUFLEET_KUBE_CONFIG_PATH) or `kubernetes.host` (GPUFLEET_KUBE_HOST)."
            ),
        )
    };
    if let Some(host) = &key.host {
        let kubeconfig = inline_kubeconfig(host, key);
        return kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| from_kubeconfig(e, "the `kubernetes` block's host settings"));
    }
    if let Some(path) = &key.config_path {
        let kubeconfig = Kubeconfig::read_from(path)
            .map_err(|e| from_kubeconfig(e, &format!("kubeconfig {path}")))?;
        return kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| from_kubeconfig(e, &format!("kubeconfig {path}")));
    }
    kube::Config::from_kubeconfig(&options)
        .await
        .map_err(|e| from_kubeconfig(e, "KUBECONFIG or ~/.kube/config"))
}

/// A one-cluster kubeconfig built from the block's `host` settings, so PEM handling and
/// validation are kube's own.
fn inline_kubeconfig(host: &str, key: &ConnectionKey) -> Kubeconfig {
    use base64::Engine as _;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let cluster = Cluster {
        server: Some(host.to_owned()),
        certificate_authority_data: key.ca.as_deref().map(b64),
        ..Cluster::default()
    };
    let user = AuthInfo {
        token: key.token.clone().map(Into::into),
        client_certificate_data: key.client_certificate.as_deref().map(b64),
        client_key_data: key.client_key.as_deref().map(|k| b64(k).into()),
        ..AuthInfo::default()
    };
    one_context_kubeconfig("gpufleet", cluster, user)
}

/// A kubeconfig of one cluster and one user, both called `name`, and the context that joins
/// them, current.
fn one_context_kubeconfig(name: &str, cluster: Cluster, user: AuthInfo) -> Kubeconfig {
    let name = name.to_owned();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            other: Default::default(),
            cluster: Some(cluster),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            other: Default::default(),
            auth_info: Some(user),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            other: Default::default(),
            context: Some(KubeContext {
                cluster: name.clone(),
                user: Some(name.clone()),
                ..KubeContext::default()
            }),
        }],
        current_context: Some(name),
        ..Kubeconfig::default()
    }
}

fn settings_diag(summary: &str, detail: String) -> Diagnostics {
    let mut d = Diagnostics::new();
    d.error_at(AttrPath::root(), summary, detail);
    d
}
