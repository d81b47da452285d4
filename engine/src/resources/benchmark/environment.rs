//! The environment record of a run, and its stable hash. Pure.
//!
//! The record says where and with what a run ran. The hash covers only what must match for
//! two results to be comparable (software and hardware, the run's shape and parameters), not
//! what differs between equivalent runs (times, node names, which pool lent the nodes), so
//! equal hashes mean "same experiment".

use std::collections::BTreeMap;

use ring::digest::{SHA256, digest};

/// GFD's node label of the driver's major version; `.minor` and `.rev` complete it.
pub const DRIVER_MAJOR_LABEL: &str = "nvidia.com/cuda.driver.major";
/// GFD's node label of the CUDA runtime's major version; `.minor` completes it.
pub const CUDA_MAJOR_LABEL: &str = "nvidia.com/cuda.runtime.major";
/// GFD's GPU count label.
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
use crate::backends::kube::{ACCELERATOR_LABEL, BLOCK_LABEL, CLIQUE_LABEL, ZONE_LABEL};

/// What the run recorded of one node. The first four fields are compared across the nodes
/// of a run ([`super::schema::NODE_FIELDS`]) and hashed; the rest say where the node sits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeRecord {
    /// Driver version (GFD labels).
    pub driver_version: String,
    /// CUDA runtime version (GFD labels).
    pub cuda_version: String,
    /// GPU product, the catalog's name.
    pub gpu_product: String,
    /// GPUs on the node (GFD).
    pub gpu_count: String,
    /// NVLink domain: GFD's clique, else topograph's accelerator label.
    pub nvlink_domain: String,
    /// Network block (rack) from topograph's label.
    pub block: String,
    /// Zone.
    pub zone: String,
    /// The ranks that ran on the node (`0-7`), for MPI runs whose log names them.
    pub ranks: String,
    /// What the node's prescreen reported ([`super::prescreen::Report::facts`]), when the
    /// run had one.
    pub prescreen: BTreeMap<String, String>,
}

impl NodeRecord {
    /// The record of a node from its labels.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> NodeRecord {
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        // The catalog's name: GFD suffixes the label under sharing (`-SHARED`, `-MIG-…`),
        // which `sharing` records on its own.
        let raw = label(crate::backends::kube::GPU_PRODUCT_LABEL);
        NodeRecord {
            driver_version: version_from_labels(labels, DRIVER_MAJOR_LABEL),
            cuda_version: version_from_labels(labels, CUDA_MAJOR_LABEL),
            gpu_product: crate::catalog::lookup(&raw).map_or(raw, |m| m.product.to_owned()),
            gpu_count: label(GPU_COUNT_LABEL),
            nvlink_domain: labels
                .get(CLIQUE_LABEL)
                .or_else(|| labels.get(ACCELERATOR_LABEL))
                .cloned()
                .unwrap_or_default(),
            block: label(BLOCK_LABEL),
            zone: label(ZONE_LABEL),
            ranks: String::new(),
            prescreen: BTreeMap::new(),
        }
    }

    /// The value of a compared field (one of [`super::schema::NODE_FIELDS`]).
    pub fn field(&self, name: &str) -> Option<&str> {
        Some(match name {
            "driver_version" => &self.driver_version,
            "cuda_version" => &self.cuda_version,
            "gpu_product" => &self.gpu_product,
            "gpu_count" => &self.gpu_count,
            _ => return None,
        })
    }

    /// The record as one entry of `node_environments`.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("driver_version".into(), self.driver_version.clone()),
            ("cuda_version".into(), self.cuda_version.clone()),
            ("gpu_product".into(), self.gpu_product.clone()),
            ("gpu_count".into(), self.gpu_count.clone()),
            ("nvlink_domain".into(), self.nvlink_domain.clone()),
            ("block".into(), self.block.clone()),
            ("zone".into(), self.zone.clone()),
            ("ranks".into(), self.ranks.clone()),
        ])
        .into_iter()
        .chain(self.prescreen.clone())
        .collect()
    }
}

/// Compared fields in which the nodes differ, each with every node's value; `allowed`
/// fields are left out.
pub fn node_differences(
    nodes: &BTreeMap<String, NodeRecord>,
    allowed: &std::collections::BTreeSet<String>,
) -> Vec<(String, BTreeMap<String, String>)> {
    super::schema::NODE_FIELDS
        .iter()
        .filter(|f| !allowed.contains(**f))
        .filter_map(|f| {
            let values: BTreeMap<String, String> = nodes
                .iter()
                .map(|(n, r)| (n.clone(), r.field(f).unwrap_or_default().to_owned()))
                .collect();
            let distinct: std::collections::BTreeSet<&String> = values.values().collect();
            (distinct.len() > 1).then(|| ((*f).to_owned(), values))
        })
        .collect()
}

/// One compared field across the nodes: the common value, or the distinct values joined
/// with `,` when the nodes may differ.
fn common(nodes: &BTreeMap<String, NodeRecord>, field: &str) -> String {
    let distinct: std::collections::BTreeSet<&str> =
        nodes.values().filter_map(|r| r.field(field)).collect();
    distinct.into_iter().collect::<Vec<_>>().join(",")
}

/// Everything recorded about a run's environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// The host cluster's Kubernetes version (`v1.36.0`).
    pub kubernetes_version: String,
    /// The virtual cluster's vCluster version.
    pub vcluster_version: String,
    /// The virtual cluster's Kubernetes version.
    pub virtual_cluster_kubernetes_version: String,
    /// The nodes the pods ran on, in index order.
    pub nodes: Vec<String>,
    /// GPU product (GFD).
    pub gpu_product: String,
    /// GPUs per node (GFD).
    pub gpu_count: String,
    /// Driver version from GFD's `nvidia.com/cuda.driver.*` labels.
    pub driver_version: String,
    /// CUDA version from GFD's `nvidia.com/cuda.runtime.*` labels.
    pub cuda_version: String,
    /// The image as configured.
    pub image: String,
    /// The image id the node reported (`…@sha256:…`), when it reported one.
    pub image_digest: String,
    /// The suite.
    pub suite: String,
    /// The command run.
    pub command: Vec<String>,
    /// Suite parameters.
    pub parameters: BTreeMap<String, String>,
    /// Nodes in the run.
    pub node_count: u32,
    /// GPUs per pod.
    pub gpus_per_node: u32,
    /// The pool id.
    pub node_pool_id: String,
    /// The pool's sharing mode: `none`, `time-slicing:<config>` or `mig:<config>`.
    pub sharing: String,
    /// Start time (RFC 3339).
    pub started_at: String,
    /// Finish time (RFC 3339).
    pub finished_at: String,
    /// The GPU Operator's release, from its ClusterPolicy (empty without one).
    pub gpu_operator_version: String,
    /// The device plugin release the ClusterPolicy deploys.
    pub device_plugin_version: String,
    /// Versions the tool printed (`nccl_version`, `dcgm_version`, …).
    pub tool_versions: BTreeMap<String, String>,
    /// How the run was launched: `pods`, `mpi-operator` or `gpufleet`.
    pub launcher: String,
    /// Every node of the run.
    pub per_node: BTreeMap<String, NodeRecord>,
    /// How many ranks the tool's log shows (MPI runs).
    pub ranks: String,
    /// Each host the log names, with its ranks (`host-a: 0-7; host-b: 8-15`).
    pub ranks_by_host: String,
}

/// A version from GFD's `<prefix>.major`, `.minor`, `.rev` labels, as `major.minor[.rev]`.
pub fn version_from_labels(labels: &BTreeMap<String, String>, major_label: &str) -> String {
    let Some(prefix) = major_label.strip_suffix(".major") else {
        return String::new();
    };
    let part = |p: &str| labels.get(&format!("{prefix}.{p}")).cloned();
    match (part("major"), part("minor"), part("rev")) {
        (Some(a), Some(b), Some(c)) if !c.is_empty() => format!("{a}.{b}.{c}"),
        (Some(a), Some(b), _) => format!("{a}.{b}"),
        (Some(a), None, _) => a,
        _ => String::new(),
    }
}

impl Environment {
    /// Fills the compared fields from the nodes: the common value, or the distinct ones.
    pub fn summarise_nodes(&mut self) {
        self.driver_version = common(&self.per_node, "driver_version");
        self.cuda_version = common(&self.per_node, "cuda_version");
        self.gpu_product = common(&self.per_node, "gpu_product");
        self.gpu_count = common(&self.per_node, "gpu_count");
    }

    /// The `node_environments` attribute: node → its record.
    pub fn node_environments(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.per_node
            .iter()
            .map(|(n, r)| (n.clone(), r.to_map()))
            .collect()
    }

    /// The record as the `environment` attribute.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let parameters = serde_json::to_string(&self.parameters).unwrap_or_default();
        BTreeMap::from([
            ("kubernetes_version".into(), self.kubernetes_version.clone()),
            ("vcluster_version".into(), self.vcluster_version.clone()),
            (
                "virtual_cluster_kubernetes_version".into(),
                self.virtual_cluster_kubernetes_version.clone(),
            ),
            ("nodes".into(), self.nodes.join(",")),
            ("node_count".into(), self.node_count.to_string()),
            ("gpu_product".into(), self.gpu_product.clone()),
            ("gpu_count".into(), self.gpu_count.clone()),
            ("driver_version".into(), self.driver_version.clone()),
            ("cuda_version".into(), self.cuda_version.clone()),
            ("image".into(), self.image.clone()),
            ("image_digest".into(), self.image_digest.clone()),
            ("suite".into(), self.suite.clone()),
            ("parameters".into(), parameters),
            ("node_pool_id".into(), self.node_pool_id.clone()),
            ("sharing".into(), self.sharing.clone()),
            ("started_at".into(), self.started_at.clone()),
            ("finished_at".into(), self.finished_at.clone()),
            (
                "gpu_operator_version".into(),
                self.gpu_operator_version.clone(),
            ),
            (
                "device_plugin_version".into(),
                self.device_plugin_version.clone(),
            ),
            ("launcher".into(), self.launcher.clone()),
            ("ranks".into(), self.ranks.clone()),
            ("ranks_by_host".into(), self.ranks_by_host.clone()),
        ])
        .into_iter()
        .chain(self.tool_versions.clone())
        .collect()
    }

    /// SHA-256 (hex) of the comparable part: a canonical JSON document with sorted keys.
    pub fn hash(&self) -> String {
        // The digest identifies the image when the node reported one; the reference otherwise.
        let image = if self.image_digest.is_empty() {
            &self.image
        } else {
            &self.image_digest
        };
        // Each node's compared fields, without its name: which nodes ran does not matter,
        // what they were does.
        let mut node_setups: Vec<[&str; 4]> = self
            .per_node
            .values()
            .map(|r| {
                [
                    r.driver_version.as_str(),
                    r.cuda_version.as_str(),
                    r.gpu_product.as_str(),
                    r.gpu_count.as_str(),
                ]
            })
            .collect();
        node_setups.sort_unstable();
        let doc = serde_json::json!({
            "v": 2,
            "node_setups": node_setups,
            "gpu_operator_version": self.gpu_operator_version,
            "device_plugin_version": self.device_plugin_version,
            "tool_versions": self.tool_versions,
            "launcher": self.launcher,
            "suite": self.suite,
            "image": image,
            "command": self.command,
            "parameters": self.parameters,
            "nodes": self.node_count,
            "gpus_per_node": self.gpus_per_node,
            "gpu_product": self.gpu_product,
            "gpu_count": self.gpu_count,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "sharing": self.sharing,
            "kubernetes_version": self.kubernetes_version,
            "vcluster_version": self.vcluster_version,
            "virtual_cluster_kubernetes_version": self.virtual_cluster_kubernetes_version,
        });
        // serde_json's maps are sorted, so the text is canonical.
        sha256_hex(doc.to_string().as_bytes())
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    digest(&SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment {
            kubernetes_version: "v1.36.0".into(),
            vcluster_version: "0.30.0".into(),
            virtual_cluster_kubernetes_version: "1.36".into(),
            nodes: vec!["gpu-a1-01".into(), "gpu-a1-02".into()],
            gpu_product: "NVIDIA-H100-80GB-HBM3".into(),
            gpu_count: "8".into(),
            driver_version: "570.124.06".into(),
            cuda_version: "12.8".into(),
            image: "nvcr.io/nvidia/nccl-tests:2.17.6".into(),
            image_digest: String::new(),
            suite: "nccl-all-reduce".into(),
            command: vec!["all_reduce_perf".into()],
            parameters: BTreeMap::from([("max_bytes".into(), "8G".into())]),
            node_count: 2,
            gpus_per_node: 8,
            node_pool_id: "vc-a/a/train".into(),
            sharing: "none".into(),
            started_at: "2026-03-02T10:00:00Z".into(),
            finished_at: "2026-03-02T10:05:00Z".into(),
            gpu_operator_version: "v25.10.0".into(),
            device_plugin_version: "v0.18.0".into(),
            tool_versions: BTreeMap::from([("nccl_version".into(), "2.27.5".into())]),
            launcher: "mpi-operator".into(),
            ranks: "16".into(),
            ranks_by_host: "gpu-a1-01: 0-7; gpu-a1-02: 8-15".into(),
            per_node: BTreeMap::from([
                ("gpu-a1-01".into(), node("570.124.06")),
                ("gpu-a1-02".into(), node("570.124.06")),
            ]),
        }
    }

    fn node(driver: &str) -> NodeRecord {
        NodeRecord {
            driver_version: driver.into(),
            cuda_version: "12.8".into(),
            gpu_product: "NVIDIA-H100-80GB-HBM3".into(),
            gpu_count: "8".into(),
            ..NodeRecord::default()
        }
    }

    #[test]
    fn nodes_that_differ_in_a_compared_field_are_named_unless_allowed() {
        let mut e = env();
        assert!(node_differences(&e.per_node, &Default::default()).is_empty());
        e.per_node.insert("gpu-a1-02".into(), node("575.51.03"));
        let diffs = node_differences(&e.per_node, &Default::default());
        assert_eq!(diffs.len(), 1);
        assert_eq!(diffs[0].0, "driver_version");
        assert_eq!(diffs[0].1["gpu-a1-02"], "575.51.03");
        let allowed = ["driver_version".to_owned()].into_iter().collect();
        assert!(node_differences(&e.per_node, &allowed).is_empty());
        e.summarise_nodes();
        assert_eq!(e.driver_version, "570.124.06,575.51.03");
        assert_ne!(e.hash(), env().hash(), "a mixed gang is another setup");
    }

    #[test]
    fn the_hash_is_sha256_hex_and_stable() {
        let h = env().hash();
        assert_eq!(h.len(), 64);
        assert!(h.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(h, env().hash());
    }

    #[test]
    fn times_node_names_and_pools_do_not_change_the_hash() {
        let mut other = env();
        other.nodes = vec!["gpu-b2-07".into(), "gpu-b2-08".into()];
        other.started_at = "2027-01-01T00:00:00Z".into();
        other.finished_at = "2027-01-01T00:01:00Z".into();
        other.node_pool_id = "vc-b/b/eval".into();
        assert_eq!(other.hash(), env().hash());
    }

    #[test]
    fn what_decides_the_result_changes_the_hash() {
        let base = env().hash();
        type Change = Box<dyn Fn(&mut Environment)>;
        let changes: Vec<(&str, Change)> = vec![
            ("driver", Box::new(|e| e.driver_version = "575.0".into())),
            (
                "sweep",
                Box::new(|e| {
                    e.parameters.insert("max_bytes".into(), "16G".into());
                }),
            ),
            (
                "product",
                Box::new(|e| e.gpu_product = "NVIDIA-B200".into()),
            ),
            ("digest", Box::new(|e| e.image_digest = "sha256:ab".into())),
            (
                "nccl",
                Box::new(|e| {
                    e.tool_versions
                        .insert("nccl_version".into(), "2.28.3".into());
                }),
            ),
            (
                "device plugin",
                Box::new(|e| e.device_plugin_version = "v0.17.4".into()),
            ),
            ("nodes", Box::new(|e| e.node_count = 4)),
            (
                "sharing",
                Box::new(|e| e.sharing = "mig:all-1g.10gb".into()),
            ),
            (
                "kubernetes",
                Box::new(|e| e.kubernetes_version = "v1.35.2".into()),
            ),
        ];
        for (what, change) in changes {
            let mut e = env();
            change(&mut e);
            assert_ne!(e.hash(), base, "{what}");
        }
    }

    #[test]
    fn versions_come_from_gfd_labels() {
        let labels = BTreeMap::from([
            ("nvidia.com/cuda.driver.major".to_owned(), "570".to_owned()),
            ("nvidia.com/cuda.driver.minor".to_owned(), "124".to_owned()),
            ("nvidia.com/cuda.driver.rev".to_owned(), "06".to_owned()),
            ("nvidia.com/cuda.runtime.major".to_owned(), "12".to_owned()),
            ("nvidia.com/cuda.runtime.minor".to_owned(), "8".to_owned()),
        ]);
        assert_eq!(
            version_from_labels(&labels, DRIVER_MAJOR_LABEL),
            "570.124.06"
        );
        assert_eq!(version_from_labels(&labels, CUDA_MAJOR_LABEL), "12.8");
        assert_eq!(version_from_labels(&BTreeMap::new(), CUDA_MAJOR_LABEL), "");
    }
}
