//! What every operation runs with: the resolved provider settings, a cancellation signal and
//! what ephemeral resources hold open in this process.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::{
    open_handles::OpenHandles, planned_pools::PlannedPools, planned_releases::PlannedReleases,
    planned_virtual_clusters::PlannedVirtualClusters, provider_config::ProviderSettings,
};

/// Shared, cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Settings from the provider block and `GPUFLEET_*` variables.
    pub settings: Arc<ProviderSettings>,
    /// Cancelled when Terraform asks the provider to stop (Ctrl-C); long waits must watch it.
    pub cancel: CancellationToken,
    /// Tunnels and leases ephemeral resources opened, shared by every operation of one
    /// provider process.
    pub handles: Arc<OpenHandles>,
    /// What this run has planned for virtual clusters and not yet applied, shared the same
    /// way.
    pub virtual_clusters: Arc<PlannedVirtualClusters>,
    /// What this run has planned for node pools and not yet applied, shared the same way.
    pub pools: Arc<PlannedPools>,
    /// What the replacements this run plans release first, shared the same way.
    pub releases: Arc<PlannedReleases>,
}
