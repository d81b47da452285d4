//! Where the virtual cluster connection gets its tunnels from: the provider's `kubernetes`
//! settings, or a fake a test brings.

use std::time::Duration;

use async_trait::async_trait;

use super::{FromSettings, KubeHost};
use crate::{
    backends::kube::tunnel::{self, TenantAccess, TenantTunnel},
    context::Context,
    diag::Diagnostics,
};

/// A tunnel that stays open until it is dropped.
pub trait OpenTunnel: Send + Sync + 'static {
    /// How to reach the tenant through it.
    fn access(&self) -> &TenantAccess;
}

impl OpenTunnel for TenantTunnel {
    fn access(&self) -> &TenantAccess {
        TenantTunnel::access(self)
    }
}

/// Why no tunnel was opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenTunnelError {
    /// The host cluster cannot be reached with the provider's settings; the diagnostics
    /// name the setting to fix.
    #[error("the provider's kubernetes settings do not reach a host cluster")]
    Settings(Diagnostics),
    /// The host cluster was reached, but the tunnel could not be opened.
    #[error(transparent)]
    Tunnel(Box<dyn std::error::Error + Send + Sync>),
}

/// Opens tunnels to virtual clusters.
#[async_trait]
pub trait TunnelsBackend: Send + Sync {
    /// Opens a tunnel to the virtual cluster `namespace/name`, with a token valid for
    /// `token_ttl`; `needed_by` names the kind in a settings diagnostic.
    async fn open_tunnel(
        &self,
        ctx: &Context,
        needed_by: &str,
        namespace: &str,
        name: &str,
        token_ttl: Duration,
    ) -> Result<Box<dyn OpenTunnel>, OpenTunnelError>;
}

#[async_trait]
impl TunnelsBackend for FromSettings {
    async fn open_tunnel(
        &self,
        ctx: &Context,
        needed_by: &str,
        namespace: &str,
        name: &str,
        token_ttl: Duration,
    ) -> Result<Box<dyn OpenTunnel>, OpenTunnelError> {
        let client = crate::backends::kube::client(&ctx.settings, needed_by)
            .await
            .map_err(OpenTunnelError::Settings)?;
        let host = KubeHost::new(client);
        let tunnel = tunnel::open_tenant_tunnel(&host, namespace, name, token_ttl)
            .await
            .map_err(|e| OpenTunnelError::Tunnel(Box::new(e)))?;
        Ok(Box::new(tunnel))
    }
}
