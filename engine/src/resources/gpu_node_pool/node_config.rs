//! What a pool writes on its nodes, and how it takes it back. Pure.
//!
//! A held node carries the pool's labels (`gpufleet.dev/pool`, `gpufleet.dev/isolation`, for
//! dedicated and private tiers `gpufleet.dev/tenant`, the sharing labels and `node_labels`)
//! and taints (the tenant taint for dedicated and private tiers, and `node_taints`). Before
//! the pool sets a label or a taint, the value the node had is recorded in the annotation
//! [`ORIGINALS_ANNOTATION`]; releasing the node puts every one of them back and removes the
//! annotation, so the node ends exactly as it was found. The same record lets an update drop
//! labels and taints the configuration no longer asks for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backends::kube::{
    DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL, NODE_ISOLATION, POOL, RELEASING, TENANT,
    host::nodes::{HostNode, NodeTaint, NodeWrite},
};

use super::{
    mig::{self, MIG_CONFIG_STATE_LABEL},
    model::{PoolSpec, Sharing},
};

pub use super::choices::Tier;

/// The annotation that records what a pool overwrote on a node.
pub const ORIGINALS_ANNOTATION: &str = "gpufleet.dev/pool-originals";

/// The annotation that records the pool's settings no label shows (`placement`,
/// `drain_timeout`), so that an import finds them.
pub const SETTINGS_ANNOTATION: &str = "gpufleet.dev/pool-settings";

/// The labels and taints a pool wants on each of its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Desired {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<NodeTaint>,
    /// The [`SETTINGS_ANNOTATION`] text; `None` leaves the annotation as it is.
    pub settings: Option<String>,
}

/// What the pool wants on its nodes, for a virtual cluster of `tier` named `tenant`.
pub fn desired(spec: &PoolSpec, tier: Tier) -> Desired {
    let mut labels = spec.node_labels.clone();
    let mut taints = spec.node_taints.clone();
    labels.insert(POOL.to_owned(), spec.pool_label());
    labels.insert(NODE_ISOLATION.to_owned(), tier.as_str().to_owned());
    if tier != Tier::Shared {
        labels.insert(TENANT.to_owned(), spec.vc.name.clone());
        taints.push(NodeTaint {
            key: TENANT.to_owned(),
            value: Some(spec.vc.name.clone()),
            effect: "NoSchedule".to_owned(),
        });
    }
    match &spec.sharing {
        Sharing::None => {}
        Sharing::TimeSlicing(_) => {
            labels.insert(DEVICE_PLUGIN_CONFIG_LABEL.to_owned(), spec.pool_label());
        }
        Sharing::Mig(c) => {
            labels.insert(MIG_CONFIG_LABEL.to_owned(), c.name.clone());
        }
    }
    Desired {
        labels,
        taints,
        settings: Some(spec.settings.to_string()),
    }
}

/// One taint slot (key and effect) the pool set, with the taint it replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TaintRecord {
    key: String,
    effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    before: Option<NodeTaint>,
}

/// What the pool overwrote on a node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
struct Originals {
    /// Every label the pool set, with the value it had before (`None`: absent).
    #[serde(default)]
    labels: BTreeMap<String, Option<String>>,
    /// Every taint slot the pool set.
    #[serde(default)]
    taints: Vec<TaintRecord>,
    /// Whether the node was cordoned before the pool cordoned it to drain it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unschedulable: Option<bool>,
}

/// The labels and taints a configuration asked for (`node_labels`, `node_taints`), out of
/// `labels` and `taints` the pool wrote: without those gpufleet sets itself.
pub fn configured(
    labels: &BTreeMap<String, String>,
    taints: &[NodeTaint],
) -> (BTreeMap<String, String>, Vec<NodeTaint>) {
    const MANAGED: [&str; 5] = [
        POOL,
        NODE_ISOLATION,
        TENANT,
        DEVICE_PLUGIN_CONFIG_LABEL,
        MIG_CONFIG_LABEL,
    ];
    let labels = labels
        .iter()
        .filter(|(k, _)| !MANAGED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let taints = taints.iter().filter(|t| t.key != TENANT).cloned().collect();
    (labels, taints)
}

/// What the configuration of the pool holding `node` asked for on it: the labels and taints
/// the pool recorded setting ([`ORIGINALS_ANNOTATION`]), with their values on the node, less
/// those gpufleet sets itself. Labels and taints the node had of its own are not among them.
pub fn configured_on(node: &HostNode) -> (BTreeMap<String, String>, Vec<NodeTaint>) {
    let o = originals_of(node);
    let labels: BTreeMap<String, String> = node
        .labels
        .iter()
        .filter(|(k, _)| o.labels.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let taints: Vec<NodeTaint> = node
        .taints
        .iter()
        .filter(|t| {
            o.taints
                .iter()
                .any(|r| r.key == t.key && r.effect == t.effect)
        })
        .cloned()
        .collect();
    configured(&labels, &taints)
}

fn originals_of(node: &HostNode) -> Originals {
    node.annotations
        .get(ORIGINALS_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

fn put_originals(w: &mut NodeWrite, o: &Originals) {
    match serde_json::to_string(o) {
        Ok(s) => {
            w.annotations.insert(ORIGINALS_ANNOTATION.to_owned(), s);
        }
        Err(e) => tracing::warn!("could not record a node's original labels: {e}"),
    }
}

fn restore_label(w: &mut NodeWrite, key: &str, before: Option<&String>) {
    match before {
        Some(v) => {
            w.labels.insert(key.to_owned(), v.clone());
        }
        None => {
            w.labels.remove(key);
        }
    }
}

fn restore_taint(w: &mut NodeWrite, r: &TaintRecord) {
    w.taints
        .retain(|t| !(t.key == r.key && t.effect == r.effect));
    if let Some(b) = &r.before {
        w.taints.push(b.clone());
    }
}

/// The write that makes `node` carry `want` (a claim, or a repair of a held node).
pub fn held_write(node: &HostNode, want: &Desired) -> NodeWrite {
    let mut o = originals_of(node);
    let mut w = NodeWrite::of(node);
    // Labels and taints the pool set before but no longer wants go back first.
    let stale: Vec<String> = o
        .labels
        .keys()
        .filter(|k| !want.labels.contains_key(*k))
        .cloned()
        .collect();
    for k in stale {
        let before = o.labels.remove(&k).flatten();
        restore_label(&mut w, &k, before.as_ref());
    }
    let (keep, stale): (Vec<TaintRecord>, Vec<TaintRecord>) = o.taints.drain(..).partition(|r| {
        want.taints
            .iter()
            .any(|t| t.key == r.key && t.effect == r.effect)
    });
    for r in &stale {
        restore_taint(&mut w, r);
    }
    o.taints = keep;
    for (k, v) in &want.labels {
        o.labels
            .entry(k.clone())
            .or_insert_with(|| node.labels.get(k).cloned());
        w.labels.insert(k.clone(), v.clone());
    }
    for t in &want.taints {
        if !o
            .taints
            .iter()
            .any(|r| r.key == t.key && r.effect == t.effect)
        {
            o.taints.push(TaintRecord {
                key: t.key.clone(),
                effect: t.effect.clone(),
                before: node.taints.iter().find(|x| x.same_slot(t)).cloned(),
            });
        }
        w.taints.retain(|x| !x.same_slot(t));
        w.taints.push(t.clone());
    }
    w.taints.sort();
    // The MIG manager's state speaks of the config the node had: a new config drops it, so
    // that waiting for `success` waits for this one.
    if let Some(c) = want.labels.get(MIG_CONFIG_LABEL)
        && node.labels.get(MIG_CONFIG_LABEL) != Some(c)
    {
        w.labels.remove(MIG_CONFIG_STATE_LABEL);
    }
    if let Some(settings) = &want.settings {
        w.annotations
            .insert(SETTINGS_ANNOTATION.to_owned(), settings.clone());
    }
    put_originals(&mut w, &o);
    w
}

/// The taint Kubernetes' node lifecycle controller puts on cordoned nodes.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The write that cordons a held node before it is drained, remembering whether it was
/// cordoned already.
pub fn cordon_write(node: &HostNode) -> NodeWrite {
    let mut o = originals_of(node);
    let mut w = NodeWrite::of(node);
    if o.unschedulable.is_none() {
        o.unschedulable = Some(node.unschedulable);
    }
    w.unschedulable = true;
    put_originals(&mut w, &o);
    w
}

/// The write that ends a drain the pool did not ask for (the drain action's `uncordon`): the
/// cordon the node had before, which is none for a node claimed free, and no record of it,
/// so a later release does not put the cordon back.
pub fn uncordon_write(node: &HostNode) -> NodeWrite {
    let mut o = originals_of(node);
    let mut w = NodeWrite::of(node);
    w.unschedulable = o.unschedulable.take().unwrap_or(false);
    if !w.unschedulable {
        w.taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
    }
    put_originals(&mut w, &o);
    w
}

/// The write that starts letting a MIG node go: `nvidia.com/mig.config` set to `release`
/// (the fleet's default), and the node marked [`RELEASING`] for `pool`. Everything else stays
/// (the pool label, the cordon, the record), so the node is neither free nor the pool's to
/// use until the MIG manager has applied the config. A node that needs no MIG manager is left
/// as it is.
pub fn releasing_write(node: &HostNode, release: &str, pool: &str) -> NodeWrite {
    let mut w = NodeWrite::of(node);
    if !mig::needs_release(node, release) {
        return w;
    }
    // The state speaks of the config the node had: drop it, so that waiting waits for this one.
    if node.label(MIG_CONFIG_LABEL) != Some(release) {
        w.labels.remove(MIG_CONFIG_STATE_LABEL);
    }
    w.labels
        .insert(MIG_CONFIG_LABEL.to_owned(), release.to_owned());
    w.labels.insert(RELEASING.to_owned(), pool.to_owned());
    w
}

/// Whether a pool is letting `node` go ([`releasing_write`]) and waits for its MIG manager.
pub fn is_releasing(node: &HostNode) -> bool {
    node.label(RELEASING).is_some()
}

/// The write that gives a node back as the pool found it, except its MIG config: that stays
/// what [`releasing_write`] set, the layout the node now has (a MIG manager does not undo a
/// layout when its label goes).
pub fn release_write(node: &HostNode) -> NodeWrite {
    let o = originals_of(node);
    let mut w = NodeWrite::of(node);
    for (k, before) in &o.labels {
        if k == MIG_CONFIG_LABEL {
            continue;
        }
        restore_label(&mut w, k, before.as_ref());
    }
    w.labels.remove(RELEASING);
    w.annotations.remove(SETTINGS_ANNOTATION);
    // The pool label goes even when the record was lost.
    if !o.labels.contains_key(POOL) {
        w.labels.remove(POOL);
    }
    for r in &o.taints {
        restore_taint(&mut w, r);
    }
    // Keep the order the node had, as far as its own taints go.
    let order = |t: &NodeTaint| {
        node.taints
            .iter()
            .position(|x| x == t)
            .unwrap_or(usize::MAX)
    };
    w.taints.sort_by_key(order);
    if let Some(u) = o.unschedulable {
        w.unschedulable = u;
        // The node lifecycle controller taints a cordoned node. Un-cordoning takes that
        // taint away in the same write, so the node is as found the moment destroy returns.
        if !u {
            w.taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
        }
    }
    w.annotations.remove(ORIGINALS_ANNOTATION);
    w
}

/// Whether `node` carries everything in `want`.
pub fn is_configured(node: &HostNode, want: &Desired) -> bool {
    want.labels
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && want.taints.iter().all(|t| node.taints.contains(t))
}

/// Whether a node is free for a claim: Ready, not cordoned, held by no pool.
pub fn is_free(node: &HostNode) -> bool {
    node.ready && !node.unschedulable && node.label(POOL).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found() -> HostNode {
        HostNode {
            name: "n1".into(),
            resource_version: "1".into(),
            labels: [
                ("team".to_owned(), "infra".to_owned()),
                (
                    "nvidia.com/gpu.product".to_owned(),
                    "NVIDIA-H100-80GB-HBM3".to_owned(),
                ),
            ]
            .into(),
            annotations: [("x".to_owned(), "y".to_owned())].into(),
            taints: vec![NodeTaint {
                key: "maintenance".into(),
                value: Some("soon".into()),
                effect: "NoSchedule".into(),
            }],
            unschedulable: false,
            ready: true,
            gpu_capacity: 8,
            mig_capacity: BTreeMap::new(),
            movable_pods: 0,
        }
    }

    fn apply(node: &HostNode, w: NodeWrite) -> HostNode {
        HostNode {
            labels: w.labels,
            annotations: w.annotations,
            taints: w.taints,
            unschedulable: w.unschedulable,
            ..node.clone()
        }
    }

    fn want(extra_label: (&str, &str), taint_value: &str) -> Desired {
        Desired {
            labels: [
                (POOL.to_owned(), "a.p".to_owned()),
                (extra_label.0.to_owned(), extra_label.1.to_owned()),
            ]
            .into(),
            taints: vec![
                NodeTaint {
                    key: TENANT.into(),
                    value: Some("a".into()),
                    effect: "NoSchedule".into(),
                },
                NodeTaint {
                    key: "maintenance".into(),
                    value: Some(taint_value.into()),
                    effect: "NoSchedule".into(),
                },
            ],
            settings: Some(r#"{"placement":null,"drain_timeout":null}"#.into()),
        }
    }

    #[test]
    fn claim_then_release_leaves_the_node_as_found() {
        let n0 = found();
        let n1 = apply(&n0, held_write(&n0, &want(("team", "ml"), "pool")));
        assert!(is_configured(&n1, &want(("team", "ml"), "pool")));
        assert_eq!(n1.label("team"), Some("ml"));
        let n2 = apply(&n1, cordon_write(&n1));
        assert!(n2.unschedulable);
        let n3 = apply(&n2, release_write(&n2));
        assert_eq!(NodeWrite::of(&n3), NodeWrite::of(&n0));
    }

    #[test]
    fn updates_drop_what_is_no_longer_wanted_and_keep_first_originals() {
        let n0 = found();
        let n1 = apply(&n0, held_write(&n0, &want(("team", "ml"), "pool")));
        // The label moves to another key; the team label must come back to "infra".
        let w2 = Desired {
            labels: [
                (POOL.to_owned(), "a.p".to_owned()),
                ("tier".to_owned(), "gold".to_owned()),
            ]
            .into(),
            taints: Vec::new(),
            settings: None,
        };
        let n2 = apply(&n1, held_write(&n1, &w2));
        assert_eq!(n2.label("team"), Some("infra"));
        assert_eq!(n2.taints, n0.taints);
        let n3 = apply(&n2, release_write(&n2));
        assert_eq!(NodeWrite::of(&n3), NodeWrite::of(&n0));
    }

    #[test]
    fn repairing_a_held_node_is_idempotent() {
        let n0 = found();
        let w = want(("team", "ml"), "pool");
        let n1 = apply(&n0, held_write(&n0, &w));
        assert!(held_write(&n1, &w).matches(&n1));
    }

    #[test]
    fn letting_a_mig_node_go_hands_it_to_the_mig_manager_before_it_is_free() {
        let n0 = found();
        let mut w = want(("team", "ml"), "pool");
        w.labels
            .insert(MIG_CONFIG_LABEL.to_owned(), "all-balanced".to_owned());
        let mut n1 = apply(&n0, held_write(&n0, &w));
        n1.labels
            .insert(MIG_CONFIG_STATE_LABEL.to_owned(), "success".to_owned());
        // The fleet's default, and the node still the pool's, marked releasing.
        let n2 = apply(&n1, releasing_write(&n1, "all-disabled", "a.p"));
        assert_eq!(n2.label(MIG_CONFIG_LABEL), Some("all-disabled"));
        assert_eq!(n2.label(MIG_CONFIG_STATE_LABEL), None);
        assert!(is_releasing(&n2));
        assert_eq!(n2.label(POOL), Some("a.p"));
        assert!(!is_free(&n2));
        // Applied: nothing more to write, and the release keeps the config the node has.
        let mut n3 = n2.clone();
        n3.labels
            .insert(MIG_CONFIG_STATE_LABEL.to_owned(), "success".to_owned());
        assert!(releasing_write(&n3, "all-disabled", "a.p").matches(&n3));
        let n4 = apply(&n3, release_write(&n3));
        assert_eq!(n4.label(MIG_CONFIG_LABEL), Some("all-disabled"));
        assert_eq!(n4.label("team"), Some("infra"));
        assert!(!is_releasing(&n4));
        assert!(is_free(&n4));
        // A node without a MIG config needs no MIG manager.
        assert!(releasing_write(&n0, "all-disabled", "a.p").matches(&n0));
    }

    #[test]
    fn a_new_mig_config_drops_the_mig_managers_old_state() {
        let mut n0 = found();
        n0.labels
            .insert(MIG_CONFIG_LABEL.to_owned(), "all-1g.10gb".to_owned());
        n0.labels
            .insert(MIG_CONFIG_STATE_LABEL.to_owned(), "success".to_owned());
        let mut w = want(("team", "ml"), "pool");
        w.labels
            .insert(MIG_CONFIG_LABEL.to_owned(), "all-balanced".to_owned());
        let n1 = apply(&n0, held_write(&n0, &w));
        assert_eq!(n1.label(MIG_CONFIG_LABEL), Some("all-balanced"));
        assert_eq!(n1.label(MIG_CONFIG_STATE_LABEL), None);
        // The same config again keeps what the MIG manager reported.
        let mut n2 = n1.clone();
        n2.labels
            .insert(MIG_CONFIG_STATE_LABEL.to_owned(), "success".to_owned());
        assert!(held_write(&n2, &w).matches(&n2));
    }
}
