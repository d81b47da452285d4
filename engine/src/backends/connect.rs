//! [`Connect`]: where an operation gets the client of one backend from. Every backend has the
//! same two sources: the provider's settings ([`FromSettings`], what the registry uses), or a
//! client a test or tool brings (an `Arc` of it). A kind names the client it needs by its
//! trait object, `Connect<dyn BcmApi>`, `Connect<dyn NetrisApi>`, `Connect<dyn HostObjects>`
//! or `Connect<dyn HostNodes>`, so one trait serves them all.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{context::Context, diag::Diagnostics};

/// Where an operation gets its `Api` client from.
#[async_trait]
pub trait Connect<Api: ?Sized + Send + Sync + 'static>: Send + Sync {
    /// The client for an operation that may change things, or the diagnostic naming the
    /// settings to fix; `needed_by` names the kind (e.g. `gpufleet_benchmark`) in it.
    async fn connect(&self, ctx: &Context, needed_by: &str) -> Result<Arc<Api>, Diagnostics>;

    /// The client for a refresh or a plan, which change nothing: it may answer reads from the
    /// run's lists. The same client as [`Self::connect`] unless the backend keeps lists.
    async fn connect_reader(
        &self,
        ctx: &Context,
        needed_by: &str,
    ) -> Result<Arc<Api>, Diagnostics> {
        self.connect(ctx, needed_by).await
    }
}

/// The production source of every backend: the shared client of the provider's settings for
/// that backend (its `kubernetes`, `bcm` or `netris` block).
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;
