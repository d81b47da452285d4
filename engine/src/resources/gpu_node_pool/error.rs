//! Why a step of a pool's apply stops: the pool's own reasons ([`PoolError`]) and the apply
//! runtime's timeout, conflict and stop request around them ([`StepError`]).

use super::{TYPE_NAME, claim::ClaimError, device_plugin::DevicePluginError};
use crate::{
    apply::{self, KindError},
    backends::{
        bcm::{BcmError, lifecycle::LifecycleError},
        kube::host::nodes::HostError,
    },
};

/// A pool's own reasons for a step to stop.
#[derive(Debug, thiserror::Error)]
pub(super) enum PoolError {
    /// A host-cluster call failed.
    #[error(transparent)]
    Host(HostError),
    /// A claim or release failed.
    #[error(transparent)]
    Claim(ClaimError),
    /// A Base Command Manager call failed.
    #[error(transparent)]
    Bcm(BcmError),
}

impl KindError for PoolError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str = "The nodes held so far are recorded in state.";
}

/// Why a step stopped.
pub(super) type StepError = apply::StepError<PoolError>;

impl From<HostError> for StepError {
    fn from(e: HostError) -> StepError {
        StepError::Kind(PoolError::Host(e))
    }
}

impl From<LifecycleError> for StepError {
    fn from(e: LifecycleError) -> StepError {
        match e {
            LifecycleError::Bcm(e) => StepError::Kind(PoolError::Bcm(e)),
            LifecycleError::Conflict(m) => StepError::Conflict(m),
            LifecycleError::InstallFailed {
                hostname,
                status: s,
            } => StepError::Conflict(format!(
                "BCM node {} stopped in {}{} while being provisioned. It stays held by the \
                     pool; fix the cause (see its provisioning log on the head node) and apply \
                     again.",
                hostname,
                s.status,
                if s.message.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.message)
                }
            )),
        }
    }
}

impl From<DevicePluginError> for StepError {
    fn from(e: DevicePluginError) -> StepError {
        match e {
            DevicePluginError::Host(e) => StepError::Kind(PoolError::Host(e)),
            other => StepError::Conflict(other.to_string()),
        }
    }
}

impl From<ClaimError> for StepError {
    fn from(e: ClaimError) -> StepError {
        StepError::Kind(PoolError::Claim(e))
    }
}
