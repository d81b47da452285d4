//! The host cluster as the kinds see it: [`KubeHost`] is the one real client, on the shared
//! `kube::Client`, and implements every host-cluster interface a kind uses, so the kinds
//! reach the network only through this module.
//!
//! - [`HostObjects`]: objects as JSON values by [`ObjectKind`] (virtual clusters,
//!   benchmarks), with [`ObjectsBackend`] to connect from the provider's settings.
//! - [`nodes::HostNodes`]: typed node, pod, ConfigMap and Karpenter calls (GPU node pools).
//! - [`TunnelsBackend`]: tunnels into virtual clusters (the virtual cluster connection).
//! - [`Cached`]: the same host, with a run's refreshes answered from one list per kind.

mod connect;
mod kinds;
mod objects;
mod read_cache;
mod tunnels;

#[cfg(any(test, feature = "test-support"))]
pub mod memory;
pub mod nodes;

use std::sync::Arc;

pub use connect::{FromSettings, ObjectsBackend};
pub use kinds::{Access, ObjectKind};
pub use objects::{HeldTurn, HostObjects, TURN_DURATION};
pub use read_cache::{Cached, MAX_AGE, ReadCache};
pub use tunnels::{OpenTunnel, OpenTunnelError, TunnelsBackend};

use super::DynamicClient;

/// The host cluster over a `kube::Client`, counting its calls.
#[derive(Debug, Clone)]
pub struct KubeHost {
    objects: Arc<DynamicClient>,
}

impl KubeHost {
    /// A host over `client`.
    pub fn new(client: kube::Client) -> KubeHost {
        KubeHost {
            objects: Arc::new(DynamicClient::new(client)),
        }
    }

    /// How many API calls this host made so far (for the operation's debug log).
    pub fn calls(&self) -> u64 {
        self.objects.calls()
    }

    /// The client itself, for typed calls (the tenant tunnel); count each with
    /// [`KubeHost::count`].
    pub(in crate::backends::kube) fn client(&self) -> &kube::Client {
        self.objects.client()
    }

    /// Counts one request made on [`KubeHost::client`].
    pub(in crate::backends::kube) fn count(&self) {
        self.objects.count();
    }

    /// The object calls, counted.
    fn objects(&self) -> &DynamicClient {
        &self.objects
    }
}
