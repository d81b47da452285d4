//! A BCM node's life cycle as tenants use it: claimed nodes are booted and waited for until
//! `UP`, released nodes go back to the free pool, through a wiping FULL reinstall that is
//! verified before the node may count as free.
//!
//! `gpufleet_bcm_node` runs this for one node, `gpufleet_gpu_node_pool` with `source = "bcm"`
//! for each node of a pool; both record the holding tenant on the device ([`super::TENANT_KEY`])
//! and a pool also its own mark ([`POOL_KEY`]).

mod boot;
mod release;

pub use boot::{POLL_FIRST, POLL_MAX, UP_CONFIRMATIONS, boot, poll_delay, wait_up};
pub use release::{check_wiped, release_node, wipe_devices};

use super::{BcmApi, BcmError, Device, DeviceStatus, SysInfo};

/// The `extra_values` key that records the pool holding a BCM node.
pub const POOL_KEY: &str = "gpufleet_pool";

/// The category released nodes go back to.
pub const FREE_POOL: &str = "free-pool";

/// Why a step of a node's life cycle stopped. The resource kinds word each case for their
/// own users.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// A BCM call failed.
    #[error(transparent)]
    Bcm(#[from] BcmError),
    /// The install stopped in a failure state.
    #[error("node {hostname} stopped in {}", .status.status)]
    InstallFailed {
        /// The node (BCM's status record names only its uuid).
        hostname: String,
        /// The record it stopped with.
        status: DeviceStatus,
    },
    /// BCM's objects do not allow the step ("node gpu-001 has no status in BCM.").
    #[error("{0}")]
    Conflict(String),
}

/// What a life-cycle step has learned of the node so far, so a caller that stops part-way
/// can still record it.
#[derive(Debug, Default)]
pub struct Progress {
    /// The node, once it is held (claimed or adopted).
    pub device: Option<Device>,
    /// The last status seen.
    pub status: Option<DeviceStatus>,
    /// The node's system information (GPUs, disks), once read.
    pub sysinfo: Option<SysInfo>,
}

/// The system information of node `uuid`, if cmdaemon has any.
pub async fn sysinfo_of(api: &dyn BcmApi, uuid: &str) -> Result<Option<SysInfo>, BcmError> {
    let all = api.sysinfo(&[uuid.to_owned()]).await?;
    Ok(all.into_iter().find(|i| i.device == uuid))
}
