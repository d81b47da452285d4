//! Where a kind gets its host-cluster clients from: [`Connect`] of [`HostObjects`] or of
//! [`HostNodes`], from the provider's `kubernetes` settings or a client a test brings.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Cached, HostObjects, KubeHost, nodes::HostNodes};
use crate::{backends::connect::Connect, context::Context, diag::Diagnostics};

pub use crate::backends::connect::FromSettings;

/// Where a kind gets its host-object client from: [`Connect`] of a [`HostObjects`].
pub trait ObjectsBackend: Connect<dyn HostObjects> {}

impl<T: Connect<dyn HostObjects>> ObjectsBackend for T {}

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

// The production clients: the shared client of the provider's `kubernetes` settings, with
// the lists of the provider configuration's run ([`Cached`]) for refresh and plan.

#[async_trait]
impl Connect<dyn HostObjects> for FromSettings {
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

#[async_trait]
impl Connect<dyn HostNodes> for FromSettings {
    async fn connect(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostNodes>, Diagnostics> {
        Ok(Arc::new(FromSettings::host(ctx, needed_by, false).await?))
    }

    async fn connect_reader(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<dyn HostNodes>, Diagnostics> {
        Ok(Arc::new(FromSettings::host(ctx, needed_by, true).await?))
    }
}

// Given clients, for tests and tools that bring their own.

#[async_trait]
impl<A: HostObjects + 'static> Connect<dyn HostObjects> for Arc<A> {
    async fn connect(
        &self,
        _ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn HostObjects>)
    }
}

#[async_trait]
impl<A: HostNodes + 'static> Connect<dyn HostNodes> for Arc<A> {
    async fn connect(
        &self,
        _ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn HostNodes>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn HostNodes>)
    }
}
