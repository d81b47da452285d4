//! What a node pool needs from the host cluster, as a trait, so that claiming, placement and
//! the life cycle can be exercised against the in-memory cluster in [`super::memory`] as well
//! as the real API server ([`super::kube_api`]).
//!
//! Node writes are guarded: [`HostApi::write_node`] succeeds only while the node still has the
//! resource version the caller read, which is what makes a claim atomic.

use std::collections::BTreeMap;

use async_trait::async_trait;

/// A taint as Kubernetes spells it on `spec.taints`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct NodeTaint {
    /// Taint key.
    pub key: String,
    /// Taint value; `None` when the taint has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl NodeTaint {
    /// Whether `other` is the same taint slot (key and effect), whatever its value.
    pub fn same_slot(&self, other: &NodeTaint) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

/// The parts of a Node a pool reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostNode {
    /// Node name.
    pub name: String,
    /// `metadata.resourceVersion` when it was read.
    pub resource_version: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: Vec<NodeTaint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Whether the `Ready` condition is `True`.
    pub ready: bool,
    /// `status.capacity["nvidia.com/gpu"]`: physical GPUs.
    pub gpus: u32,
}

impl HostNode {
    /// A label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// The metadata and spec fields a pool writes on a node, as a whole: labels, annotations and
/// taints are replaced by these.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeWrite {
    /// The node's labels after the write.
    pub labels: BTreeMap<String, String>,
    /// The node's annotations after the write.
    pub annotations: BTreeMap<String, String>,
    /// The node's taints after the write.
    pub taints: Vec<NodeTaint>,
    /// Whether the node is cordoned after the write.
    pub unschedulable: bool,
}

impl NodeWrite {
    /// What `node` has now, as a write that changes nothing.
    pub fn of(node: &HostNode) -> NodeWrite {
        NodeWrite {
            labels: node.labels.clone(),
            annotations: node.annotations.clone(),
            taints: node.taints.clone(),
            unschedulable: node.unschedulable,
        }
    }

    /// Whether writing this to `node` would change nothing.
    pub fn matches(&self, node: &HostNode) -> bool {
        *self == NodeWrite::of(node)
    }
}

/// How a guarded node write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written; the node as it is now.
    Written(HostNode),
    /// The node changed since it was read (another writer got there first): re-read it.
    Conflict,
    /// The node no longer exists.
    Gone,
}

/// A pod that runs on a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Owned by a DaemonSet or a mirror pod: draining leaves it alone, as kubectl does.
    pub stays: bool,
}

/// A failed host-cluster call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to {what}: {message}")]
pub struct HostError {
    /// What was being done, e.g. "patch node gpu-rack-a1-01".
    pub what: String,
    /// The server's or client's message.
    pub message: String,
}

/// The host-cluster calls a node pool makes.
#[async_trait]
pub trait HostApi: Send + Sync {
    /// The labels of namespace `name`, or `None` when it does not exist.
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, HostError>;

    /// Nodes matching a label selector.
    async fn list_nodes(&self, selector: &str) -> Result<Vec<HostNode>, HostError>;

    /// One node, or `None` when it does not exist.
    async fn get_node(&self, name: &str) -> Result<Option<HostNode>, HostError>;

    /// Replaces the node's labels, annotations, taints and cordon with `write`, provided the
    /// node is still exactly `current` (its resource version has not moved).
    async fn write_node(
        &self,
        current: &HostNode,
        write: &NodeWrite,
    ) -> Result<WriteOutcome, HostError>;

    /// The pods bound to a node.
    async fn pods_on(&self, node: &str) -> Result<Vec<PodRef>, HostError>;

    /// Evicts a pod (Eviction API, so disruption budgets apply). `Ok(false)` when a budget
    /// refused it for now.
    async fn evict(&self, pod: &PodRef) -> Result<bool, HostError>;

    /// One key of a ConfigMap, or `None` when the key or the map is missing.
    async fn config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, HostError>;

    /// Sets (`Some`) or removes (`None`) one key of a ConfigMap, leaving every other key
    /// alone; creates the map when it is missing.
    async fn set_config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), HostError>;

    /// Creates or updates a Karpenter NodePool (server-side apply).
    async fn apply_node_pool(&self, body: &serde_json::Value) -> Result<(), HostError>;

    /// A Karpenter NodePool, or `None` when it does not exist.
    async fn get_node_pool(&self, name: &str) -> Result<Option<serde_json::Value>, HostError>;

    /// Deletes a Karpenter NodePool; a missing one is not an error.
    async fn delete_node_pool(&self, name: &str) -> Result<(), HostError>;
}
