//! What every operation runs with: the resolved provider settings and a cancellation signal.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::provider_config::ProviderSettings;

/// Shared, cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Settings from the provider block and `GPUFLEET_*` variables.
    pub settings: Arc<ProviderSettings>,
    /// Cancelled when Terraform asks the provider to stop (Ctrl-C); long waits must watch it.
    pub cancel: CancellationToken,
}
