//! Placeholder for the tenant tunnel: a local listener in the provider process that forwards
//! through the host API server to a virtual cluster's control plane, with a short-lived token
//! from inside the virtual cluster. Until the real backend lands, opening one fails with
//! [`TunnelError::Unavailable`].

use std::time::{Duration, SystemTime};

use super::host::KubeHost;

/// What a client needs to reach a tenant's API server through an open tunnel.
#[derive(Debug, Clone)]
pub struct TenantAccess {
    /// The local URL of the tunnel, e.g. `https://127.0.0.1:41234`.
    pub host: String,
    /// The name the API server's certificate is checked against, when it is not `host`'s.
    pub tls_server_name: Option<String>,
    /// PEM CA certificate of the tenant's API server.
    pub cluster_ca_certificate: String,
    /// A bearer token from the TokenRequest API inside the virtual cluster.
    pub token: String,
    /// When `token` expires.
    pub expires_at: SystemTime,
    /// A kubeconfig with all of the above.
    pub kubeconfig: String,
}

/// An open tunnel; dropping it closes the listener.
#[derive(Debug)]
pub struct TenantTunnel {
    access: TenantAccess,
}

impl TenantTunnel {
    /// How to reach the tenant through this tunnel.
    pub fn access(&self) -> &TenantAccess {
        &self.access
    }
}

/// Why a tunnel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// This build cannot open tunnels.
    #[error("tunnels to virtual clusters are not available in this build")]
    Unavailable,
}

/// Opens a tunnel to the virtual cluster `namespace/name`, with a token valid for `token_ttl`.
pub async fn open_tenant_tunnel(
    _host: &KubeHost,
    _namespace: &str,
    _name: &str,
    _token_ttl: Duration,
) -> Result<TenantTunnel, TunnelError> {
    Err(TunnelError::Unavailable)
}
