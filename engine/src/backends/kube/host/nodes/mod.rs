//! What a node pool needs from the host cluster, as the trait [`HostNodes`]: nodes, their
//! pods, one key of a ConfigMap, the GPU Operator's ClusterPolicy and Karpenter NodePools.
//! [`KubeHost`](super::KubeHost) implements it on the API server; the node pool's in-memory cluster, in tests.
//!
//! Node writes are guarded: [`HostNodes::write_node`] succeeds only while the node still has
//! the resource version the caller read, which is what makes a claim atomic. On the API server
//! a node write is a JSON merge patch that carries `metadata.resourceVersion`: the server
//! applies it only while the node still has that version and answers `409 Conflict`
//! otherwise. The patch is computed against the node as read, so keys to remove are sent as
//! `null`. ConfigMap keys are written with merge patches too (one key at a time, so pools
//! sharing the device-plugin ConfigMap never drop each other's keys), and Karpenter NodePools
//! with server-side apply. The GPU Operator's ClusterPolicy gets one field,
//! `spec.devicePlugin.config.name`, by a server-side apply that is never forced.

use std::collections::BTreeMap;

use async_trait::async_trait;

mod kube_host;

pub use kube_host::RULES;

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
    /// `status.capacity["nvidia.com/gpu"]` as the device plugin advertises it: GPUs times
    /// replicas under time-slicing, without the MIG-enabled GPUs under the MIG `mixed`
    /// strategy. The node pool counts the GPUs in the machine from the labels.
    pub gpu_capacity: u32,
    /// `status.capacity` of the MIG resources the device plugin advertises under the MIG
    /// `mixed` strategy (`nvidia.com/mig-<profile>`), by resource name.
    pub mig_capacity: BTreeMap<String, u64>,
    /// Pods a claim would have to move off the node (not DaemonSet or mirror pods), when
    /// counted ([`HostNodes::movable_pods`]); 0 otherwise.
    pub movable_pods: usize,
}

impl HostNode {
    /// A node named `name` with only `labels`, for tests of what labels decide.
    #[cfg(test)]
    pub(crate) fn labelled(name: &str, labels: &[(&str, &str)]) -> HostNode {
        HostNode {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..HostNode::default()
        }
    }

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

/// The host-cluster calls a node pool (and the fleet inventory) makes.
#[async_trait]
pub trait HostNodes: Send + Sync {
    /// The labels of namespace `name`, or `None` when it does not exist.
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, HostError>;

    /// The namespaces matching a label selector, each with its labels.
    async fn list_namespaces(
        &self,
        selector: &str,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>, HostError>;

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

    /// For every node that runs any, how many pods a drain would move (those that do not
    /// [`stay`](PodRef::stays)), from one list of all pods.
    async fn movable_pods(&self) -> Result<BTreeMap<String, usize>, HostError>;

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

    /// The GPU Operator's ClusterPolicies (`nvidia.com/v1`, cluster-scoped), or `None` when
    /// the cluster does not serve that kind (no GPU Operator installed).
    async fn cluster_policies(&self) -> Result<Option<Vec<serde_json::Value>>, HostError>;

    /// Sets `spec.devicePlugin.config.name` of ClusterPolicy `policy` to `config_map` alone,
    /// without forcing: a value another manager holds is never overwritten.
    async fn set_device_plugin_config(
        &self,
        policy: &str,
        config_map: &str,
    ) -> Result<(), HostError>;

    /// Creates or updates a Karpenter NodePool (server-side apply).
    async fn apply_node_pool(&self, body: &serde_json::Value) -> Result<(), HostError>;

    /// A Karpenter NodePool, or `None` when it does not exist.
    async fn get_node_pool(&self, name: &str) -> Result<Option<serde_json::Value>, HostError>;

    /// The Karpenter NodePools matching a label selector; none when the cluster does not
    /// serve NodePools (no Karpenter installed).
    async fn list_node_pools(&self, selector: &str) -> Result<Vec<serde_json::Value>, HostError>;

    /// Deletes a Karpenter NodePool; a missing one is not an error.
    async fn delete_node_pool(&self, name: &str) -> Result<(), HostError>;

    /// The names of Karpenter's NodeClaims for NodePool `name`: its instances, from launch
    /// until the cloud has terminated them.
    async fn node_claims(&self, name: &str) -> Result<Vec<String>, HostError>;
}
