//! Where a kind that reads and writes host objects gets its [`HostObjects`] from: the
//! provider's `kubernetes` settings, or a client a test brings.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Cached, HostObjects, KubeHost};
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

    /// The client for a refresh or a plan, which change nothing: it may answer reads from
    /// the run's lists ([`Cached`]). The same client as [`Self::connect`] unless the backend
    /// keeps lists.
    async fn connect_reader(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        self.connect(ctx, needed_by).await
    }
}

/// The production backend: the shared client of the provider's `kubernetes` settings, with
/// the lists of the provider configuration's run.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;

impl FromSettings {
    /// The host of the provider's settings, over the lists of this configuration's run.
    pub async fn host(
        ctx: &Context,
        needed_by: &str,
        reading: bool,
    ) -> Result<Cached<KubeHost>, Diagnostics> {
        let client = crate::backends::kube::client(&ctx.settings, needed_by).await?;
        let host = Arc::new(KubeHost::new(client));
        let cache = Arc::clone(&ctx.settings.host_reads);
        Ok(if reading {
            Cached::refreshing(host, cache)
        } else {
            Cached::operating(host, cache)
        })
    }
}

#[async_trait]
impl ObjectsBackend for FromSettings {
    async fn connect(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        Ok(Arc::new(FromSettings::host(ctx, needed_by, false).await?))
    }

    async fn connect_reader(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        Ok(Arc::new(FromSettings::host(ctx, needed_by, true).await?))
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
