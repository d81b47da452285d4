//! What a node pool needs from the host cluster, as a trait, so that claiming, placement and
//! the life cycle can be exercised against the in-memory cluster in [`super::memory`] as well
//! as the real API server ([`super::kube_api`]).
//!
//! Node writes are guarded: [`HostApi::write_node`] succeeds only while the node still has the
//! resource version the caller read, which is what makes a claim atomic.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::spec::{GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, GPU_REPLICAS_LABEL};
use crate::catalog::{self, GpuModel};

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
    /// strategy. Use [`HostNode::physical_gpus`] for the GPUs in the machine.
    pub gpu_capacity: u32,
    /// Pods a claim would have to move off the node (not DaemonSet or mirror pods), when
    /// counted ([`HostApi::movable_pods`]); 0 otherwise.
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

    /// The catalog model of the node's product label, whatever suffix GFD gave it.
    pub fn gpu_model(&self) -> Option<&'static GpuModel> {
        self.label(GPU_PRODUCT_LABEL).and_then(catalog::lookup)
    }

    /// Whether the node's GPUs are `model`, shared or partitioned as they may be.
    pub fn is_product(&self, model: &GpuModel) -> bool {
        self.gpu_model().is_some_and(|m| m.product == model.product)
    }

    /// The physical GPUs in the node, which sharing does not change.
    ///
    /// GFD's `nvidia.com/gpu.count` comes first: it counts devices whatever the device plugin
    /// advertises. Without it (GFD not running, or restarting), the capacity divided by
    /// `nvidia.com/gpu.replicas`. Under the MIG `single` strategy both count MIG devices, so
    /// they are divided by the instances of the label's profile per GPU (GPUs are filled
    /// with one profile, as `all-<profile>` does).
    pub fn physical_gpus(&self) -> u32 {
        let number = |key: &str| self.label(key).and_then(|v| v.trim().parse::<u32>().ok());
        let devices = number(GPU_COUNT_LABEL).unwrap_or_else(|| {
            let replicas = number(GPU_REPLICAS_LABEL).filter(|r| *r > 0).unwrap_or(1);
            self.gpu_capacity / replicas
        });
        let per_gpu = self
            .label(GPU_PRODUCT_LABEL)
            .and_then(catalog::label_mig_profile)
            .map_or(1, |p| u32::from(p.max_instances).max(1));
        devices.div_ceil(per_gpu)
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

    /// Deletes a Karpenter NodePool; a missing one is not an error.
    async fn delete_node_pool(&self, name: &str) -> Result<(), HostError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = "NVIDIA-H100-80GB-HBM3";

    fn node(capacity: u32, labels: &[(&str, &str)]) -> HostNode {
        HostNode {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            gpu_capacity: capacity,
            ..HostNode::default()
        }
    }

    #[test]
    fn physical_gpus_ignore_what_sharing_does_to_capacity() {
        // As the lab sets them: count equal to capacity.
        let plain = node(8, &[(GPU_PRODUCT_LABEL, H100), (GPU_COUNT_LABEL, "8")]);
        assert_eq!(plain.physical_gpus(), 8);
        // Time-slicing, 4 replicas: the device plugin advertises 32, GFD still counts 8.
        let sliced = node(
            32,
            &[
                (GPU_PRODUCT_LABEL, "NVIDIA-H100-80GB-HBM3-SHARED"),
                (GPU_COUNT_LABEL, "8"),
                (GPU_REPLICAS_LABEL, "4"),
                ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
            ],
        );
        assert_eq!(sliced.physical_gpus(), 8);
        // MIG `mixed`: no whole GPU left to advertise, the GPUs are still there.
        let mixed = node(
            0,
            &[
                (GPU_PRODUCT_LABEL, H100),
                (GPU_COUNT_LABEL, "8"),
                (GPU_REPLICAS_LABEL, "0"),
            ],
        );
        assert_eq!(mixed.physical_gpus(), 8);
        // MIG `single` with all-1g.10gb: 56 MIG devices are 8 GPUs.
        let single = node(
            56,
            &[
                (GPU_PRODUCT_LABEL, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"),
                (GPU_COUNT_LABEL, "56"),
                (GPU_REPLICAS_LABEL, "1"),
            ],
        );
        assert_eq!(single.physical_gpus(), 8);
    }

    #[test]
    fn physical_gpus_fall_back_to_capacity() {
        // No count label: capacity over replicas, then capacity alone.
        let sliced = node(32, &[(GPU_REPLICAS_LABEL, "4")]);
        assert_eq!(sliced.physical_gpus(), 8);
        assert_eq!(node(8, &[]).physical_gpus(), 8);
        // Unreadable labels are ignored, and zero replicas never divide.
        let odd = node(8, &[(GPU_COUNT_LABEL, "eight"), (GPU_REPLICAS_LABEL, "0")]);
        assert_eq!(odd.physical_gpus(), 8);
    }

    #[test]
    fn product_matching_accepts_gfd_suffixes() {
        let Some(h100) = catalog::lookup(H100) else {
            panic!("{H100} is in the catalog");
        };
        for label in [
            H100,
            "NVIDIA-H100-80GB-HBM3-SHARED",
            "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            "H100-80GB-HBM3",
        ] {
            assert!(
                node(8, &[(GPU_PRODUCT_LABEL, label)]).is_product(h100),
                "{label}"
            );
        }
        assert!(!node(8, &[(GPU_PRODUCT_LABEL, "NVIDIA-H200")]).is_product(h100));
        assert!(!node(8, &[]).is_product(h100));
    }
}
