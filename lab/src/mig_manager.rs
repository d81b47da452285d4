//! The lab's MIG manager: the lab's nodes answer `nvidia.com/mig.config` as the GPU
//! Operator's MIG manager does on a real node.
//!
//! A node that gets `nvidia.com/mig.config` (a config of the GPU Operator's default
//! mig-parted config, [`gpufleet_engine::catalog::mig_config`]) goes
//! `nvidia.com/mig.config.state=pending`; one pass later (about a second) `success`, with the
//! node's capacity and allocatable showing the MIG devices as the device plugin advertises
//! them under the node's `nvidia.com/mig.strategy` (`mixed` when the label is missing), or
//! `failed` when the config is not one of the product's or a fault is injected: the
//! annotation [`FAULT_ANNOTATION`]`=fail` on the node.
//!
//! Where the lab differs from a node: when the label goes (a pool released the node), the
//! node gets its whole GPUs back and loses the state label, so the next tenant finds it as
//! the fleet made it. A real MIG manager leaves the GPUs partitioned.
//!
//! It runs in the `vcluster` component's process (`vcluster-kubelet`), the lab's agent for
//! what nodes do besides kwok's stages.

use std::collections::BTreeMap;
use std::time::Duration;

use gpufleet_engine::{
    catalog,
    resources::gpu_node_pool::mig::{self as pool_mig, MIG_CONFIG_STATE_LABEL, Strategy},
};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

use crate::fleet::{
    GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, GPU_RESOURCE, MANAGED_BY, MANAGED_BY_LABEL,
};
use crate::nodes::FIELD_MANAGER;

/// The node label the MIG manager applies.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The annotation that makes the lab's MIG manager fail on a node: `fail`.
pub const FAULT_ANNOTATION: &str = "gpufleet.dev/lab-mig-fault";

/// What the MIG manager does to a node in one pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    /// The state label to set (`Some`) or remove (`None`).
    pub state: Option<Option<&'static str>>,
    /// GPU resources to set in capacity and allocatable (`None`: remove the resource).
    pub resources: BTreeMap<String, Option<u64>>,
}

impl Step {
    fn is_empty(&self) -> bool {
        self.state.is_none() && self.resources.is_empty()
    }
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn gpu_resources_now(node: &Node) -> BTreeMap<String, String> {
    node.status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() == GPU_RESOURCE || k.starts_with("nvidia.com/mig-"))
        .map(|(k, q)| (k.clone(), q.0.clone()))
        .collect()
}

/// The resources to write so that the node's GPU resources are exactly `want`.
fn resource_changes(node: &Node, want: &BTreeMap<String, u64>) -> BTreeMap<String, Option<u64>> {
    let now = gpu_resources_now(node);
    let mut changes: BTreeMap<String, Option<u64>> = now
        .keys()
        .filter(|k| !want.contains_key(*k))
        .map(|k| (k.clone(), None))
        .collect();
    for (k, v) in want {
        if now.get(k) != Some(&v.to_string()) {
            changes.insert(k.clone(), Some(*v));
        }
    }
    changes
}

/// What the MIG manager does to `node` now. Pure.
#[must_use]
pub fn step(node: &Node) -> Step {
    let state = label(node, MIG_CONFIG_STATE_LABEL);
    let gpus: u64 = label(node, GPU_COUNT_LABEL)
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    let Some(config) = label(node, MIG_CONFIG_LABEL) else {
        // Released: whole GPUs again, no state.
        if state.is_none() {
            return Step::default();
        }
        let whole = BTreeMap::from([(GPU_RESOURCE.to_owned(), gpus)]);
        return Step {
            state: Some(None),
            resources: resource_changes(node, &whole),
        };
    };
    match state {
        None => Step {
            state: Some(Some("pending")),
            ..Step::default()
        },
        Some("pending") => {
            let fault = node
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(FAULT_ANNOTATION))
                .is_some_and(|v| v == "fail");
            let layout = label(node, GPU_PRODUCT_LABEL)
                .and_then(catalog::lookup)
                .and_then(|m| catalog::mig_config(m, config).ok());
            match layout {
                Some(layout) if !fault => {
                    let strategy = Strategy::from_label(label(node, pool_mig::MIG_STRATEGY_LABEL));
                    let mut want = pool_mig::resources(&layout, strategy, gpus);
                    // MIG-enabled GPUs are no whole GPUs any more.
                    want.entry(GPU_RESOURCE.to_owned()).or_insert(0);
                    Step {
                        state: Some(Some("success")),
                        resources: resource_changes(node, &want),
                    }
                }
                _ => Step {
                    state: Some(Some("failed")),
                    ..Step::default()
                },
            }
        }
        // Done (success or failed) until the config changes, which drops the state.
        Some(_) => Step::default(),
    }
}

/// Applies one node's step: a merge patch of its labels, then of its status.
async fn apply(api: &Api<Node>, name: &str, step: &Step) -> Result<(), kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER);
    if let Some(state) = step.state {
        let patch =
            serde_json::json!({ "metadata": { "labels": { MIG_CONFIG_STATE_LABEL: state } } });
        api.patch(name, &params, &Patch::Merge(&patch)).await?;
    }
    if !step.resources.is_empty() {
        let quantities: serde_json::Map<String, serde_json::Value> = step
            .resources
            .iter()
            .map(|(k, v)| {
                let q = v.map_or(serde_json::Value::Null, |n| n.to_string().into());
                (k.clone(), q)
            })
            .collect();
        let patch = serde_json::json!({ "status": {
            "capacity": quantities.clone(),
            "allocatable": quantities,
        }});
        api.patch_status(name, &params, &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// One pass over the lab's nodes that carry a MIG config or a MIG state.
///
/// # Errors
/// When listing the nodes fails; a failed patch is logged and retried next pass.
pub async fn pass(client: &kube::Client) -> Result<usize, kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for key in [MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL] {
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY},{key}");
        for n in api.list(&ListParams::default().labels(&selector)).await? {
            if let Some(name) = n.metadata.name.clone() {
                nodes.insert(name, n);
            }
        }
    }
    let mut changed = 0;
    for (name, node) in &nodes {
        let s = step(node);
        if s.is_empty() {
            continue;
        }
        match apply(&api, name, &s).await {
            Ok(()) => {
                changed += 1;
                tracing::info!(
                    node = %name,
                    state = ?s.state.flatten(),
                    "MIG manager: {}",
                    label(node, MIG_CONFIG_LABEL).unwrap_or("config removed")
                );
            }
            Err(e) => tracing::warn!(node = %name, "MIG manager: failed to update the node: {e}"),
        }
    }
    Ok(changed)
}

/// Runs [`pass`] every `interval`, forever.
pub async fn run(client: kube::Client, interval: Duration) {
    loop {
        if let Err(e) = pass(&client).await {
            tracing::debug!("MIG manager: failed to list nodes: {e}");
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn node(labels: &[(&str, &str)], fault: bool) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("gpu-a1-01".into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .chain([
                    (
                        GPU_PRODUCT_LABEL.to_owned(),
                        "NVIDIA-A100-SXM4-40GB".to_owned(),
                    ),
                    (GPU_COUNT_LABEL.to_owned(), "8".to_owned()),
                ])
                .collect(),
        );
        if fault {
            n.metadata.annotations =
                Some([(FAULT_ANNOTATION.to_owned(), "fail".to_owned())].into());
        }
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            capacity: Some(
                [
                    (GPU_RESOURCE.to_owned(), Quantity("8".into())),
                    ("cpu".to_owned(), Quantity("64".into())),
                ]
                .into(),
            ),
            ..Default::default()
        });
        n
    }

    #[test]
    fn a_new_config_goes_pending_then_success_with_the_mig_devices() {
        let n = node(&[(MIG_CONFIG_LABEL, "all-balanced")], false);
        assert_eq!(step(&n).state, Some(Some("pending")));
        let n = node(
            &[
                (MIG_CONFIG_LABEL, "all-balanced"),
                (MIG_CONFIG_STATE_LABEL, "pending"),
            ],
            false,
        );
        let s = step(&n);
        assert_eq!(s.state, Some(Some("success")));
        assert_eq!(
            s.resources,
            [
                (GPU_RESOURCE.to_owned(), Some(0)),
                ("nvidia.com/mig-1g.5gb".to_owned(), Some(16)),
                ("nvidia.com/mig-2g.10gb".to_owned(), Some(8)),
                ("nvidia.com/mig-3g.20gb".to_owned(), Some(8)),
            ]
            .into()
        );
    }

    #[test]
    fn the_single_strategy_advertises_instances_as_gpus() {
        let n = node(
            &[
                (MIG_CONFIG_LABEL, "all-1g.5gb"),
                (MIG_CONFIG_STATE_LABEL, "pending"),
                ("nvidia.com/mig.strategy", "single"),
            ],
            false,
        );
        assert_eq!(
            step(&n).resources,
            [(GPU_RESOURCE.to_owned(), Some(56))].into()
        );
    }

    #[test]
    fn a_fault_or_a_foreign_config_fails() {
        let pending = [
            (MIG_CONFIG_LABEL, "all-balanced"),
            (MIG_CONFIG_STATE_LABEL, "pending"),
        ];
        assert_eq!(step(&node(&pending, true)).state, Some(Some("failed")));
        let foreign = [
            (MIG_CONFIG_LABEL, "all-1g.10gb.me"),
            (MIG_CONFIG_STATE_LABEL, "pending"),
        ];
        assert_eq!(step(&node(&foreign, false)).state, Some(Some("failed")));
        // Done: nothing more until the config changes.
        let done = [
            (MIG_CONFIG_LABEL, "all-balanced"),
            (MIG_CONFIG_STATE_LABEL, "failed"),
        ];
        assert!(step(&node(&done, false)).is_empty());
    }

    #[test]
    fn a_released_node_gets_its_whole_gpus_back() {
        let mut n = node(&[(MIG_CONFIG_STATE_LABEL, "success")], false);
        if let Some(c) = n.status.as_mut().and_then(|s| s.capacity.as_mut()) {
            c.insert(GPU_RESOURCE.to_owned(), Quantity("0".into()));
            c.insert("nvidia.com/mig-1g.5gb".to_owned(), Quantity("56".into()));
        }
        let s = step(&n);
        assert_eq!(s.state, Some(None));
        assert_eq!(
            s.resources,
            [
                (GPU_RESOURCE.to_owned(), Some(8)),
                ("nvidia.com/mig-1g.5gb".to_owned(), None),
            ]
            .into()
        );
        assert!(step(&node(&[], false)).is_empty());
    }
}
