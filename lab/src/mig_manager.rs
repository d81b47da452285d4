//! The lab's MIG manager: the lab's MIG-capable nodes answer `nvidia.com/mig.config` as the
//! GPU Operator's MIG manager (mig-parted's `k8s-mig-manager`) and the stack around it do on a
//! real node.
//!
//! Like the real one it acts only when the label changes (or, as a restarted MIG manager pod
//! does, on the label it finds when it first sees the node; and, since it polls, on a label
//! without any state, which a change it missed between two passes leaves): it sets
//! `nvidia.com/mig.config.state=pending`, repartitions, then sets `success` or `failed`. Nothing
//! else moves it: a node whose label is removed, or that loses its pool's labels and taints,
//! keeps its partitions, and a `failed` node stays failed until the label changes again.
//!
//! The layouts come from the lab's own copy of the GPU Operator's default mig-parted config
//! ([`crate::mig_parted`]), not from gpufleet. A config it does not know, or one with no entry
//! for the node's GPUs, fails; so does any config on a node with the annotation
//! [`FAULT_ANNOTATION`]`=fail`.
//!
//! On `success` the node shows what the device plugin and GPU feature discovery would make of
//! the new layout, under the node's `nvidia.com/mig.strategy` (`mixed` when the label is
//! missing):
//!
//! - capacity and allocatable: under `mixed` one `nvidia.com/mig-<profile>` resource per
//!   profile and no whole GPU on a MIG-enabled node; under `single` every instance as
//!   `nvidia.com/gpu` (nothing for a layout of several profiles); MIG off, whole GPUs;
//! - GFD's labels: under `mixed` `nvidia.com/mig-<profile>.{count,product,replicas,
//!   sharing-strategy,slices.gi,slices.ci}`; under `single` the product renamed
//!   `<product>-MIG-<profile>` and `nvidia.com/gpu.count` counting instances; MIG off, the
//!   plain product and GPU count.
//!
//! It runs in the `vcluster` component's process (`vcluster-kubelet`), the lab's agent for
//! what nodes do besides kwok's stages.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

use crate::fleet::{
    GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, GPU_RESOURCE, HARDWARE_ANNOTATION, MANAGED_BY,
    MANAGED_BY_LABEL, MIG_CAPABLE_LABEL,
};
use crate::mig_parted::{ConfigFile, Layout};
use crate::nodes::FIELD_MANAGER;

/// The node label the MIG manager applies.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The label the MIG manager reports in: `pending`, `success` or `failed`.
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// GFD's label of the device plugin's MIG strategy: `single` or `mixed`.
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";
/// The annotation that makes the lab's MIG manager fail on a node: `fail`.
pub const FAULT_ANNOTATION: &str = "gpufleet.dev/lab-mig-fault";

/// GFD's per-profile labels under `mixed` start with this.
const MIG_PROFILE_LABEL_PREFIX: &str = "nvidia.com/mig-";
/// GFD's slice labels of the GPUs under `single`.
const GPU_SLICES_LABELS: [&str; 2] = ["nvidia.com/gpu.slices.gi", "nvidia.com/gpu.slices.ci"];

/// What the MIG manager (and the device plugin and GFD after it) do to a node in one pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Step {
    /// Labels to set (`Some`) or remove (`None`), only those that change.
    pub labels: BTreeMap<String, Option<String>>,
    /// GPU resources to set in capacity and allocatable (`None`: remove the resource).
    pub resources: BTreeMap<String, Option<u64>>,
}

impl Step {
    /// Whether the step changes nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.resources.is_empty()
    }

    /// The state label this step sets, if it sets one.
    #[must_use]
    pub fn state(&self) -> Option<&str> {
        self.labels
            .get(MIG_CONFIG_STATE_LABEL)
            .and_then(|v| v.as_deref())
    }
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The node's GPUs as the hardware has them: product and count. From the lab's hardware
/// annotation, else from GFD's labels as the fleet wrote them.
fn hardware(node: &Node) -> Option<(String, u64)> {
    let from_annotation = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HARDWARE_ANNOTATION))
        .and_then(|h| h.split_once('x'))
        .and_then(|(n, p)| Some((p.to_owned(), n.trim().parse().ok()?)));
    from_annotation.or_else(|| {
        let product = label(node, GPU_PRODUCT_LABEL)?;
        let product = product.split("-MIG-").next().unwrap_or(product);
        let product = product.strip_suffix("-SHARED").unwrap_or(product);
        let gpus = label(node, GPU_COUNT_LABEL)?.trim().parse().ok()?;
        Some((product.to_owned(), gpus))
    })
}

fn gpu_resources_now(node: &Node) -> BTreeMap<String, String> {
    node.status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() == GPU_RESOURCE || k.starts_with(MIG_PROFILE_LABEL_PREFIX))
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

/// The label writes that make the node carry `want` (`None`: absent), only those that change.
fn label_changes(
    node: &Node,
    want: BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Option<String>> {
    want.into_iter()
        .filter(|(k, v)| label(node, k) != v.as_deref())
        .collect()
}

/// Compute slices of a profile: the `<g>` of `<g>g.<mem>gb`.
fn slices(profile: &str) -> String {
    profile.split_once('g').map_or("1", |(g, _)| g).to_owned()
}

/// What the device plugin advertises and GFD labels for `gpus` GPUs of `product` laid out as
/// `layout`, under `single` or not.
fn advertised(
    node: &Node,
    product: &str,
    gpus: u64,
    layout: &Layout,
    single: bool,
) -> (BTreeMap<String, u64>, BTreeMap<String, Option<String>>) {
    let mut resources = BTreeMap::new();
    let mut labels: BTreeMap<String, Option<String>> = BTreeMap::new();
    // Every per-profile label goes unless the layout sets it again.
    for k in node.metadata.labels.iter().flatten().map(|(k, _)| k) {
        if k.starts_with(MIG_PROFILE_LABEL_PREFIX) {
            labels.insert(k.clone(), None);
        }
    }
    let gpu_labels = |labels: &mut BTreeMap<String, Option<String>>,
                      product: String,
                      count: u64,
                      slices: Option<String>| {
        labels.insert(GPU_PRODUCT_LABEL.to_owned(), Some(product));
        labels.insert(GPU_COUNT_LABEL.to_owned(), Some(count.to_string()));
        for k in GPU_SLICES_LABELS {
            labels.insert(k.to_owned(), slices.clone());
        }
    };
    let uniform = (layout.devices.len() == 1)
        .then(|| layout.devices.iter().next())
        .flatten();
    match (layout.enabled, single, uniform) {
        (false, _, _) => {
            resources.insert(GPU_RESOURCE.to_owned(), gpus);
            gpu_labels(&mut labels, product.to_owned(), gpus, None);
        }
        (true, true, Some((profile, n))) => {
            let instances = gpus * u64::from(*n);
            resources.insert(GPU_RESOURCE.to_owned(), instances);
            gpu_labels(
                &mut labels,
                format!("{product}-MIG-{profile}"),
                instances,
                Some(slices(profile)),
            );
        }
        (true, true, None) => {
            // Several profiles (or none) cannot be advertised as one resource.
            resources.insert(GPU_RESOURCE.to_owned(), 0);
            gpu_labels(&mut labels, product.to_owned(), gpus, None);
        }
        (true, false, _) => {
            // MIG-enabled GPUs are no whole GPUs any more.
            resources.insert(GPU_RESOURCE.to_owned(), 0);
            gpu_labels(&mut labels, product.to_owned(), gpus, None);
            for (profile, n) in &layout.devices {
                let count = gpus * u64::from(*n);
                resources.insert(format!("{MIG_PROFILE_LABEL_PREFIX}{profile}"), count);
                let key = |suffix: &str| format!("{MIG_PROFILE_LABEL_PREFIX}{profile}.{suffix}");
                labels.insert(key("count"), Some(count.to_string()));
                labels.insert(key("product"), Some(format!("{product}-MIG-{profile}")));
                labels.insert(key("replicas"), Some("1".to_owned()));
                labels.insert(key("sharing-strategy"), Some("none".to_owned()));
                labels.insert(key("slices.gi"), Some(slices(profile)));
                labels.insert(key("slices.ci"), Some(slices(profile)));
            }
        }
    }
    (resources, labels)
}

/// What the MIG manager does to `node` now, given the node's `nvidia.com/mig.config` when it
/// last looked (`seen`: `None` when it never saw the node, as after its pod starts). Pure.
#[must_use]
pub fn step(node: &Node, seen: Option<&Option<String>>, configs: &ConfigFile) -> Step {
    let config = label(node, MIG_CONFIG_LABEL);
    // A pass may miss a change that came and went between two passes (the real one watches
    // every update); a config without any state is one the MIG manager has not taken up yet.
    let changed = match seen {
        None => config.is_some(),
        Some(before) => {
            before.as_deref() != config || label(node, MIG_CONFIG_STATE_LABEL).is_none()
        }
    };
    let Some(config) = config else {
        // No label: nothing to apply, and nothing undone.
        return Step::default();
    };
    let state = |s: &str| BTreeMap::from([(MIG_CONFIG_STATE_LABEL.to_owned(), Some(s.to_owned()))]);
    if changed {
        return Step {
            labels: label_changes(node, state("pending")),
            ..Step::default()
        };
    }
    // Done (success or failed) until the label changes again.
    if label(node, MIG_CONFIG_STATE_LABEL) != Some("pending") {
        return Step::default();
    }
    let fault = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAULT_ANNOTATION))
        .is_some_and(|v| v == "fail");
    let applied = hardware(node).and_then(|(product, gpus)| {
        let layout = configs.layout(config, &product).ok()?;
        Some((product, gpus, layout))
    });
    match applied {
        Some((product, gpus, layout)) if !fault => {
            let single = label(node, MIG_STRATEGY_LABEL).map(str::trim) == Some("single");
            let (resources, mut labels) = advertised(node, &product, gpus, &layout, single);
            labels.extend(state("success"));
            Step {
                labels: label_changes(node, labels),
                resources: resource_changes(node, &resources),
            }
        }
        _ => Step {
            labels: label_changes(node, state("failed")),
            ..Step::default()
        },
    }
}

/// Applies one node's step: a merge patch of its labels, then of its status.
async fn apply(api: &Api<Node>, name: &str, step: &Step) -> Result<(), kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER);
    if !step.resources.is_empty() {
        // Resources first: once the state says `success`, the node advertises the layout.
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
    if !step.labels.is_empty() {
        let patch = serde_json::json!({ "metadata": { "labels": step.labels } });
        api.patch(name, &params, &Patch::Merge(&patch)).await?;
    }
    Ok(())
}

/// The MIG manager of every MIG-capable lab node, with what it last saw on each.
#[derive(Debug)]
pub struct MigManager {
    configs: ConfigFile,
    seen: BTreeMap<String, Option<String>>,
}

impl MigManager {
    /// A MIG manager with the lab's default mig-parted config, that has seen no node yet.
    ///
    /// # Errors
    /// When the built-in config does not parse (the unit tests make sure it does).
    pub fn new() -> Result<MigManager, crate::mig_parted::LayoutError> {
        Ok(MigManager {
            configs: ConfigFile::lab_default()?,
            seen: BTreeMap::new(),
        })
    }

    /// One pass over the lab's MIG-capable nodes; returns how many it changed.
    ///
    /// # Errors
    /// When listing the nodes fails; a failed patch is logged and retried next pass.
    pub async fn pass(&mut self, client: &kube::Client) -> Result<usize, kube::Error> {
        let api: Api<Node> = Api::all(client.clone());
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY},{MIG_CAPABLE_LABEL}=true");
        let nodes = api.list(&ListParams::default().labels(&selector)).await?;
        let mut changed = 0;
        for node in &nodes {
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let config = label(node, MIG_CONFIG_LABEL).map(str::to_owned);
            let s = step(node, self.seen.get(&name), &self.configs);
            if !s.is_empty() {
                if let Err(e) = apply(&api, &name, &s).await {
                    tracing::warn!(node = %name, "MIG manager: failed to update the node: {e}");
                    continue;
                }
                changed += 1;
                tracing::info!(
                    node = %name,
                    state = s.state().unwrap_or_default(),
                    "MIG manager: {}",
                    config.as_deref().unwrap_or_default()
                );
            }
            self.seen.insert(name, config);
        }
        Ok(changed)
    }
}

/// Runs the MIG manager every `interval`, forever.
pub async fn run(client: kube::Client, interval: Duration) {
    let mut manager = match MigManager::new() {
        Ok(m) => m,
        Err(e) => {
            tracing::error!("MIG manager not started: {e}");
            return;
        }
    };
    loop {
        if let Err(e) = manager.pass(&client).await {
            tracing::debug!("MIG manager: failed to list nodes: {e}");
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    const A100: &str = "NVIDIA-A100-SXM4-80GB";

    fn configs() -> ConfigFile {
        ConfigFile::lab_default().expect("the lab's config parses")
    }

    fn node(labels: &[(&str, &str)], fault: bool) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("gpu-b1-01".into());
        n.metadata.labels = Some(
            [(GPU_PRODUCT_LABEL, A100), (GPU_COUNT_LABEL, "8")]
                .iter()
                .chain(labels)
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let mut annotations =
            BTreeMap::from([(HARDWARE_ANNOTATION.to_owned(), format!("8x{A100}"))]);
        if fault {
            annotations.insert(FAULT_ANNOTATION.to_owned(), "fail".to_owned());
        }
        n.metadata.annotations = Some(annotations);
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

    /// `node` after `s`, as the API server would store it.
    fn after(mut n: Node, s: &Step) -> Node {
        let labels = n.metadata.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in &s.labels {
            match v {
                Some(v) => labels.insert(k.clone(), v.clone()),
                None => labels.remove(k),
            };
        }
        if let Some(c) = n.status.as_mut().and_then(|st| st.capacity.as_mut()) {
            for (k, v) in &s.resources {
                match v {
                    Some(v) => c.insert(k.clone(), Quantity(v.to_string())),
                    None => c.remove(k),
                };
            }
        }
        n
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_owned())
    }

    #[test]
    fn a_new_config_goes_pending_then_success_with_the_mig_devices() {
        let c = configs();
        let n = node(&[(MIG_CONFIG_LABEL, "all-balanced")], false);
        let s = step(&n, Some(&None), &c);
        assert_eq!(s.state(), Some("pending"));
        assert!(s.resources.is_empty());
        let n = after(n, &s);
        let s = step(&n, Some(&some("all-balanced")), &c);
        assert_eq!(s.state(), Some("success"));
        assert_eq!(
            s.resources,
            [
                (GPU_RESOURCE.to_owned(), Some(0)),
                ("nvidia.com/mig-1g.10gb".to_owned(), Some(16)),
                ("nvidia.com/mig-2g.20gb".to_owned(), Some(8)),
                ("nvidia.com/mig-3g.40gb".to_owned(), Some(8)),
            ]
            .into()
        );
        // GFD's labels of the mixed strategy.
        assert_eq!(
            s.labels.get("nvidia.com/mig-1g.10gb.count"),
            Some(&some("16"))
        );
        assert_eq!(
            s.labels.get("nvidia.com/mig-3g.40gb.slices.gi"),
            Some(&some("3"))
        );
        // Done: nothing more while the label stays.
        let n = after(n, &s);
        assert!(step(&n, Some(&some("all-balanced")), &c).is_empty());
    }

    #[test]
    fn the_single_strategy_advertises_instances_as_gpus_and_gfd_renames_the_product() {
        let c = configs();
        let n = node(
            &[
                (MIG_CONFIG_LABEL, "all-1g.10gb"),
                (MIG_CONFIG_STATE_LABEL, "pending"),
                (MIG_STRATEGY_LABEL, "single"),
            ],
            false,
        );
        let s = step(&n, Some(&some("all-1g.10gb")), &c);
        assert_eq!(s.resources, [(GPU_RESOURCE.to_owned(), Some(56))].into());
        assert_eq!(
            s.labels.get(GPU_PRODUCT_LABEL),
            Some(&some("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"))
        );
        assert_eq!(s.labels.get(GPU_COUNT_LABEL), Some(&some("56")));
        // Back to all-disabled: the plain product, 8 whole GPUs.
        let mut n = after(n, &s);
        if let Some(l) = n.metadata.labels.as_mut() {
            l.insert(MIG_CONFIG_LABEL.into(), "all-disabled".into());
        }
        let s = step(&n, Some(&some("all-1g.10gb")), &c);
        assert_eq!(s.state(), Some("pending"));
        let n = after(n, &s);
        let s = step(&n, Some(&some("all-disabled")), &c);
        assert_eq!(s.state(), Some("success"));
        assert_eq!(s.resources, [(GPU_RESOURCE.to_owned(), Some(8))].into());
        assert_eq!(s.labels.get(GPU_PRODUCT_LABEL), Some(&some(A100)));
        assert_eq!(s.labels.get(GPU_COUNT_LABEL), Some(&some("8")));
    }

    #[test]
    fn a_fault_or_a_config_it_does_not_know_fails() {
        let c = configs();
        let pending = [
            (MIG_CONFIG_LABEL, "all-balanced"),
            (MIG_CONFIG_STATE_LABEL, "pending"),
        ];
        let s = step(&node(&pending, true), Some(&some("all-balanced")), &c);
        assert_eq!(s.state(), Some("failed"));
        assert!(s.resources.is_empty());
        // Not in the lab's mig-parted config, or not for this product.
        for config in ["all-1g.10gb.me", "all-1g.18gb"] {
            let n = node(
                &[
                    (MIG_CONFIG_LABEL, config),
                    (MIG_CONFIG_STATE_LABEL, "pending"),
                ],
                false,
            );
            assert_eq!(
                step(&n, Some(&some(config)), &c).state(),
                Some("failed"),
                "{config}"
            );
        }
        // Failed stays failed, fault or not, until the label changes.
        let done = [
            (MIG_CONFIG_LABEL, "all-balanced"),
            (MIG_CONFIG_STATE_LABEL, "failed"),
        ];
        assert!(step(&node(&done, false), Some(&some("all-balanced")), &c).is_empty());
    }

    #[test]
    fn it_acts_only_when_the_label_changes() {
        let c = configs();
        let partitioned = |extra: &[(&str, &str)]| {
            let mut n = node(extra, false);
            if let Some(cap) = n.status.as_mut().and_then(|s| s.capacity.as_mut()) {
                cap.insert(GPU_RESOURCE.to_owned(), Quantity("0".into()));
                cap.insert("nvidia.com/mig-1g.10gb".to_owned(), Quantity("56".into()));
            }
            n
        };
        // The label removed (a pool let the node go): the partitions stay, and so does the
        // state.
        let n = partitioned(&[(MIG_CONFIG_STATE_LABEL, "success")]);
        assert!(step(&n, Some(&some("all-1g.10gb")), &c).is_empty());
        assert!(step(&n, Some(&None), &c).is_empty());
        // The same label, whatever the node looks like otherwise: nothing.
        let n = partitioned(&[
            (MIG_CONFIG_LABEL, "all-1g.10gb"),
            (MIG_CONFIG_STATE_LABEL, "success"),
        ]);
        assert!(step(&n, Some(&some("all-1g.10gb")), &c).is_empty());
        // A new value is; so is the label it finds when it starts.
        let n = partitioned(&[
            (MIG_CONFIG_LABEL, "all-disabled"),
            (MIG_CONFIG_STATE_LABEL, "success"),
        ]);
        assert_eq!(
            step(&n, Some(&some("all-1g.10gb")), &c).state(),
            Some("pending")
        );
        assert_eq!(step(&n, None, &c).state(), Some("pending"));
    }
}
