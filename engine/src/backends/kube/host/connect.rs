//! Where a kind that reads and writes host objects gets its [`HostObjects`] from: the
//! provider's `kubernetes` settings, or a client a test brings.

use std::sync::Arc;

use async_trait::async_trait;

use super::{HostObjects, KubeHost};
use crate::{context::Context, diag::Diagnostics};

/// Where a kind gets its host-object client from.
#[async_trait]
pub trait ObjectsBackend: Send + Sync {
    /// The client for this operation, or the diagnostic naming the settings to fix;
    /// `needed_by` names the kind (e.g. `gpufleet_benchmark`) in that diagnostic.
    async fn connect(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics>;
}

/// The production backend: the shared client of the provider's `kubernetes` settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;

#[async_trait]
impl ObjectsBackend for FromSettings {
    async fn connect(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        let client = crate::backends::kube::client(&ctx.settings, needed_by).await?;
        Ok(Arc::new(KubeHost::new(client)))
    }
}

/// A given client, for tests and tools that bring their own.
#[async_trait]
impl<A: HostObjects + 'static> ObjectsBackend for Arc<A> {
    async fn connect(
        &self,
        _ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn HostObjects>)
    }
}
