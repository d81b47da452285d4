//! The host cluster as the kinds see it: [`KubeHost`] is the one real client, on the shared
//! `kube::Client`, and implements every host-cluster interface a kind uses, so the kinds
//! reach the network only through this module.

pub mod nodes;

use std::sync::Arc;

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

    /// API requests made so far.
    pub fn calls(&self) -> u64 {
        self.objects.calls()
    }

    /// The object calls, counted.
    fn objects(&self) -> &DynamicClient {
        &self.objects
    }
}
