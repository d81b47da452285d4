//! MIG as the GPU Operator runs it: the MIG manager's state on each node, the cluster's MIG
//! strategy, and what a MIG layout makes allocatable.
//!
//! The pool writes `nvidia.com/mig.config` (a config name of the GPU Operator's default
//! mig-parted config, [`crate::catalog::mig_config`]). The MIG manager then sets
//! `nvidia.com/mig.config.state` to `pending`, repartitions the GPUs, and sets `success` or
//! `failed`. Apply waits for `success` on every node ([`wait_applied`]) and fails on
//! `failed`, naming the nodes.
//!
//! A MIG node a pool lets go (destroy, scale-in, replacement, a claim rolled back) keeps its
//! partitions: the MIG manager changes a layout only when the label changes. So the pool
//! first sets the label to the fleet's default ([`release_config`]: the provider's
//! `kubernetes.default_mig_config`, else `all-disabled`) and marks the node
//! `gpufleet.dev/releasing`; the node stays cordoned and the pool's until the MIG manager
//! reports `success` for that config ([`wait_released`]). `failed`, or the operation's
//! timeout, leaves it so, out of the free pool, and the error names the node and the state.
//!
//! What the device plugin advertises depends on the MIG strategy, which GFD writes into
//! `nvidia.com/mig.strategy`: under `mixed` one resource per profile
//! (`nvidia.com/mig-<profile>`), under `single` every instance as `nvidia.com/gpu`, which
//! needs all instances of one profile. A node without the label counts as `mixed`.

use std::{collections::BTreeMap, time::Duration};

use super::{
    choices::Source,
    config::{PoolConfig, Strategy as SharingStrategy},
    schema::{MIG_CONFIG, SHARING},
};
use crate::{
    backends::kube::{
        GPU_PRODUCT_LABEL, MIG_CONFIG_LABEL,
        host::nodes::{HostError, HostNode, HostNodes},
    },
    catalog::{self, MigConfig},
    diag::{Diagnostic, Diagnostics},
    path::AttrPath,
    provider_config::{
        DEFAULT_MIG_CONFIG, FALLBACK_MIG_CONFIG, KUBERNETES_BLOCK, ProviderSettings,
        mig_config_name_problem,
    },
};

/// The label the MIG manager reports its progress in: `pending`, `success` or `failed`.
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// The label GFD writes the device plugin's MIG strategy into: `single`, `mixed` or `none`.
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";

/// How often apply looks at the MIG manager's state again.
const STATE_POLL: Duration = Duration::from_secs(2);

/// How the device plugin advertises MIG instances on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Every instance as `nvidia.com/gpu`; all of one profile.
    Single,
    /// One resource per profile, `nvidia.com/mig-<profile>`.
    Mixed,
}

impl Strategy {
    /// The node's strategy from GFD's label; `mixed` when the label is missing.
    pub fn of(node: &HostNode) -> Strategy {
        Strategy::from_label(node.label(MIG_STRATEGY_LABEL))
    }

    /// The strategy a value of GFD's label names; `mixed` for a missing or unknown one.
    pub fn from_label(value: Option<&str>) -> Strategy {
        match value.map(str::trim) {
            Some("single") => Strategy::Single,
            _ => Strategy::Mixed,
        }
    }
}

/// What the MIG manager says about a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    /// Applied.
    Success,
    /// Failed; the MIG manager waits for a new config.
    Failed,
    /// Not done yet (`pending`, no state yet, or a state this version does not know).
    Waiting(Option<String>),
}

impl NodeState {
    /// The state of `node` for the config it carries.
    pub fn of(node: &HostNode) -> NodeState {
        match node.label(MIG_CONFIG_STATE_LABEL).map(str::trim) {
            Some("success") => NodeState::Success,
            Some("failed") => NodeState::Failed,
            other => NodeState::Waiting(other.map(str::to_owned)),
        }
    }
}

/// Why MIG is not in place on a pool's nodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigError {
    /// The MIG manager reported `failed`.
    #[error(
        "the MIG manager failed to apply nvidia.com/mig.config={config} on {} \
         (nvidia.com/mig.config.state=failed). The nodes stay held by the pool; see the \
         nvidia-mig-manager pod's log on them, fix the cause (GPUs in use, a layout the \
         driver refuses), then apply again.", nodes.join(", ")
    )]
    Failed {
        /// The config the pool asked for.
        config: String,
        /// The nodes it failed on, sorted.
        nodes: Vec<String>,
    },
    /// The MIG manager reported `failed` for the release config on nodes being let go.
    #[error(
        "the MIG manager failed to return {} to nvidia.com/mig.config={config} \
         (nvidia.com/mig.config.state=failed) while the pool let {} go. {} stay{} cordoned, \
         held by the pool and marked gpufleet.dev/releasing, out of the free pool, so no \
         tenant gets partitions it did not ask for. See the nvidia-mig-manager pod's log on \
         {}, fix the cause, restart that pod (it applies the node's config when it starts), \
         then apply again.",
        nodes.join(", "),
        if nodes.len() == 1 { "it" } else { "them" },
        if nodes.len() == 1 { "It" } else { "They" },
        if nodes.len() == 1 { "s" } else { "" },
        if nodes.len() == 1 { "it" } else { "each" },
    )]
    ReleaseFailed {
        /// The config the nodes were to get back.
        config: String,
        /// The nodes it failed on, sorted.
        nodes: Vec<String>,
    },
    /// A mixed layout on nodes whose device plugin runs the `single` strategy.
    #[error(
        "{config} mixes MIG profiles, but the device plugin on {} runs the MIG strategy \
         `single` (nvidia.com/mig.strategy=single), which needs every instance of one \
         profile. Use an all-<profile> config, or set the GPU Operator's mig.strategy to \
         mixed.", nodes.join(", ")
    )]
    MixedUnderSingle {
        /// The config the pool asked for.
        config: String,
        /// The nodes with the `single` strategy, sorted.
        nodes: Vec<String>,
    },
}

/// The nodes of `nodes` in `state`, sorted.
fn names_in(nodes: &[HostNode], f: impl Fn(&HostNode) -> bool) -> Vec<String> {
    let mut names: Vec<String> = nodes
        .iter()
        .filter(|n| f(n))
        .map(|n| n.name.clone())
        .collect();
    names.sort();
    names
}

/// The nodes the MIG manager failed on.
pub fn failed_nodes(nodes: &[HostNode]) -> Vec<String> {
    names_in(nodes, |n| NodeState::of(n) == NodeState::Failed)
}

/// Whether the layout can be advertised on every node, by its strategy.
///
/// # Errors
/// [`MigError::MixedUnderSingle`] when a mixed layout meets the `single` strategy.
pub fn check_strategy(config: &MigConfig, nodes: &[HostNode]) -> Result<(), MigError> {
    if config.is_uniform() {
        return Ok(());
    }
    let single = names_in(nodes, |n| Strategy::of(n) == Strategy::Single);
    if single.is_empty() {
        Ok(())
    } else {
        Err(MigError::MixedUnderSingle {
            config: config.name.clone(),
            nodes: single,
        })
    }
}

/// What `gpus` physical GPUs laid out as `config` advertise under `strategy`. A mixed layout
/// under `single` advertises nothing the pool can count on.
pub fn resources(config: &MigConfig, strategy: Strategy, gpus: u64) -> BTreeMap<String, u64> {
    if !config.enabled {
        return [("nvidia.com/gpu".to_owned(), gpus)].into();
    }
    match strategy {
        Strategy::Single if config.is_uniform() => [(
            "nvidia.com/gpu".to_owned(),
            gpus * u64::from(config.instances_per_gpu()),
        )]
        .into(),
        Strategy::Single => BTreeMap::new(),
        Strategy::Mixed => config
            .devices
            .iter()
            .map(|(p, n)| (p.resource_name(), gpus * u64::from(*n)))
            .collect(),
    }
}

/// What the pool's nodes advertise, each by its own strategy, added up.
pub fn allocatable(config: &MigConfig, nodes: &[HostNode]) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for n in nodes {
        let gpus = u64::from(n.physical_gpus());
        for (k, v) in resources(config, Strategy::of(n), gpus) {
            *total.entry(k).or_insert(0) += v;
        }
    }
    total
}

/// Why waiting for the MIG manager stopped.
#[derive(Debug)]
pub enum WaitError {
    /// Listing the nodes failed.
    Host(HostError),
    /// The MIG manager failed on some nodes, or the strategy cannot carry the layout.
    Mig(MigError),
}

/// Waits until the MIG manager reports `success` on every node of `pool` among `held`, and
/// returns those nodes as they are then (GFD has relabelled them). `waiting` is kept up to
/// date with the nodes not done yet and their state, for a timeout to name them. Bounded by
/// the caller.
///
/// # Errors
/// [`WaitError::Mig`] as soon as a node reports `failed`, or when the strategy cannot
/// carry the layout; [`WaitError::Host`] when listing the nodes fails.
pub async fn wait_applied(
    api: &dyn HostNodes,
    pool_selector: &str,
    config: &MigConfig,
    held: &[HostNode],
    waiting: &mut Vec<(String, Option<String>)>,
) -> Result<Vec<HostNode>, WaitError> {
    loop {
        let nodes: Vec<HostNode> = api
            .list_nodes(pool_selector)
            .await
            .map_err(WaitError::Host)?
            .into_iter()
            .filter(|n| held.iter().any(|h| h.name == n.name))
            .collect();
        let failed = failed_nodes(&nodes);
        if !failed.is_empty() {
            return Err(WaitError::Mig(MigError::Failed {
                config: config.name.clone(),
                nodes: failed,
            }));
        }
        *waiting = nodes
            .iter()
            .filter_map(|n| match NodeState::of(n) {
                NodeState::Waiting(s) => Some((n.name.clone(), s)),
                _ => None,
            })
            .collect();
        waiting.sort();
        if waiting.is_empty() {
            check_strategy(config, &nodes).map_err(WaitError::Mig)?;
            return Ok(nodes);
        }
        tracing::debug!(
            target: "gpufleet::gpu_node_pool",
            waiting = waiting.len(),
            "waiting for the MIG manager to apply {}",
            config.name
        );
        tokio::time::sleep(STATE_POLL).await;
    }
}

/// The MIG config nodes get back when a pool lets them go: the provider's
/// `kubernetes.default_mig_config` (or `GPUFLEET_KUBE_DEFAULT_MIG_CONFIG`), else
/// `all-disabled`.
///
/// # Errors
/// The message for a setting that cannot be a MIG config name (a variable is not checked
/// when the provider is configured).
pub fn release_config(settings: &ProviderSettings) -> Result<String, String> {
    match settings
        .get(KUBERNETES_BLOCK, DEFAULT_MIG_CONFIG)
        .map(str::trim)
    {
        None => Ok(FALLBACK_MIG_CONFIG.to_owned()),
        Some(name) => match mig_config_name_problem(name) {
            None => Ok(name.to_owned()),
            Some(problem) => Err(format!(
                "the provider setting kubernetes.{DEFAULT_MIG_CONFIG} \
                 (GPUFLEET_KUBE_DEFAULT_MIG_CONFIG) is not usable: {problem}"
            )),
        },
    }
}

/// Nodes a pool is letting go: the MIG config they get back, and those still waiting for the
/// MIG manager to apply it.
#[derive(Debug, Clone, Default)]
pub struct Release {
    /// The MIG config released nodes get back ([`release_config`]).
    pub config: String,
    /// The nodes not done yet, with the state they showed.
    pub waiting: Vec<(String, Option<String>)>,
}

impl Release {
    /// A release to `config`, nothing waiting yet.
    pub fn to(config: String) -> Release {
        Release {
            config,
            waiting: Vec::new(),
        }
    }

    /// What an operation stopped doing, when it stopped waiting for released nodes.
    pub fn doing(&self) -> Option<String> {
        (!self.waiting.is_empty()).then(|| {
            format!(
                "waiting for the MIG manager to return the nodes being released to \
                 nvidia.com/mig.config={}: {}",
                self.config,
                describe_waiting(&self.waiting)
            )
        })
    }
}

/// Whether letting `node` go needs the MIG manager first: it carries a MIG config that is not
/// `release` applied with success.
pub fn needs_release(node: &HostNode, release: &str) -> bool {
    match node.label(MIG_CONFIG_LABEL) {
        None => false,
        Some(c) => c != release || NodeState::of(node) != NodeState::Success,
    }
}

/// Waits until the MIG manager reports `success` for `release` on every node of `names` (a
/// node gone counts as done). `waiting` is kept up to date with the nodes not done yet and
/// their state, for a timeout to name them. Bounded by the caller.
///
/// # Errors
/// [`WaitError::Mig`] as soon as a node reports `failed`; [`WaitError::Host`] when reading a
/// node fails.
pub async fn wait_released(
    api: &dyn HostNodes,
    names: &[String],
    release: &str,
    waiting: &mut Vec<(String, Option<String>)>,
) -> Result<(), WaitError> {
    loop {
        let mut failed = Vec::new();
        waiting.clear();
        for name in names {
            let Some(n) = api.get_node(name).await.map_err(WaitError::Host)? else {
                continue;
            };
            match NodeState::of(&n) {
                _ if n.label(MIG_CONFIG_LABEL) != Some(release) => waiting.push((
                    n.name.clone(),
                    n.label(MIG_CONFIG_STATE_LABEL).map(str::to_owned),
                )),
                NodeState::Success => {}
                NodeState::Failed => failed.push(n.name.clone()),
                NodeState::Waiting(s) => waiting.push((n.name.clone(), s)),
            }
        }
        if !failed.is_empty() {
            failed.sort();
            return Err(WaitError::Mig(MigError::ReleaseFailed {
                config: release.to_owned(),
                nodes: failed,
            }));
        }
        if waiting.is_empty() {
            return Ok(());
        }
        waiting.sort();
        tracing::debug!(
            target: "gpufleet::gpu_node_pool",
            waiting = waiting.len(),
            "waiting for the MIG manager to return released nodes to {release}"
        );
        tokio::time::sleep(STATE_POLL).await;
    }
}

/// The nodes still waiting and their state, for a message: `n1 (pending), n2 (no state yet)`.
pub fn describe_waiting(waiting: &[(String, Option<String>)]) -> String {
    waiting
        .iter()
        .map(|(n, s)| match s {
            Some(s) => format!("{n} ({MIG_CONFIG_STATE_LABEL}={s})"),
            None => format!("{n} (no {MIG_CONFIG_STATE_LABEL} yet)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan-time strategy check: a mixed layout (`all-balanced`) for a product whose every
/// node runs the `single` strategy is refused on `sharing.mig_config`. Only when the sharing
/// changes, and skipped when the cluster cannot be asked: apply checks the nodes it holds.
pub(super) async fn check_plan(
    host: &dyn HostNodes,
    prior: &PoolConfig,
    config: &PoolConfig,
) -> Diagnostics {
    let mut d = Diagnostics::new();
    if config.strategy() != Some(&SharingStrategy::Mig)
        || prior.sharing == config.sharing
        || config.source_is(Source::Auto)
    {
        return d;
    }
    let (Some(model), Some(name)) = (
        config.gpu_product.value().and_then(|p| catalog::lookup(p)),
        config.sharing.value().and_then(|s| s.mig_config.value()),
    ) else {
        return d;
    };
    let Ok(mig) = catalog::mig_config(model, name) else {
        return d;
    };
    if mig.is_uniform() {
        return d;
    }
    let Ok(nodes) = host.list_nodes(GPU_PRODUCT_LABEL).await else {
        return d;
    };
    let nodes: Vec<HostNode> = nodes.into_iter().filter(|n| n.is_product(model)).collect();
    if !nodes.is_empty() && nodes.iter().all(|n| Strategy::of(n) == Strategy::Single) {
        d.push(
            Diagnostic::error(
                "MIG Layout Needs The Mixed Strategy",
                format!(
                    "{name} mixes MIG profiles, but every {} node runs the MIG strategy \
                     `single` ({MIG_STRATEGY_LABEL}=single), which advertises instances as \
                     nvidia.com/gpu and needs all of one profile. Use an all-<profile> \
                     config, or set the GPU Operator's mig.strategy to mixed.",
                    model.product
                ),
            )
            .with_path(AttrPath::attr(SHARING).push_attr(MIG_CONFIG)),
        );
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        backends::kube::{GPU_COUNT_LABEL, GPU_PRODUCT_LABEL},
        catalog::{self, mig_config},
    };

    fn node(name: &str, labels: &[(&str, &str)]) -> HostNode {
        HostNode::labelled(name, labels)
    }

    fn config(product: &str, name: &str) -> MigConfig {
        let Some(m) = catalog::lookup(product) else {
            panic!("{product} is in the catalog");
        };
        match mig_config(m, name) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    const A100_40: &str = "NVIDIA-A100-SXM4-40GB";

    #[test]
    fn mixed_strategy_counts_each_profile() {
        let c = config(A100_40, "all-balanced");
        let got = resources(&c, Strategy::Mixed, 8);
        assert_eq!(
            got,
            [
                ("nvidia.com/mig-1g.5gb".to_owned(), 16),
                ("nvidia.com/mig-2g.10gb".to_owned(), 8),
                ("nvidia.com/mig-3g.20gb".to_owned(), 8),
            ]
            .into()
        );
    }

    #[test]
    fn single_strategy_advertises_instances_as_gpus() {
        let c = config(A100_40, "all-1g.5gb");
        assert_eq!(
            resources(&c, Strategy::Single, 8),
            [("nvidia.com/gpu".to_owned(), 56)].into()
        );
        assert_eq!(
            resources(&c, Strategy::Mixed, 8),
            [("nvidia.com/mig-1g.5gb".to_owned(), 56)].into()
        );
        // MIG off: whole GPUs, whatever the strategy.
        let off = config(A100_40, "all-disabled");
        assert_eq!(
            resources(&off, Strategy::Single, 8),
            [("nvidia.com/gpu".to_owned(), 8)].into()
        );
        // MIG on without instances: nothing to request.
        assert!(resources(&config(A100_40, "all-enabled"), Strategy::Mixed, 8).is_empty());
    }

    #[test]
    fn strategy_comes_from_gfd_and_defaults_to_mixed() {
        assert_eq!(Strategy::of(&node("a", &[])), Strategy::Mixed);
        assert_eq!(
            Strategy::of(&node("a", &[(MIG_STRATEGY_LABEL, "single")])),
            Strategy::Single
        );
        assert_eq!(
            Strategy::of(&node("a", &[(MIG_STRATEGY_LABEL, "mixed")])),
            Strategy::Mixed
        );
    }

    #[test]
    fn a_mixed_layout_under_single_is_refused_naming_the_nodes() {
        let c = config(A100_40, "all-balanced");
        let nodes = [
            node("n2", &[(MIG_STRATEGY_LABEL, "single")]),
            node("n1", &[(MIG_STRATEGY_LABEL, "mixed")]),
        ];
        let Err(e) = check_strategy(&c, &nodes) else {
            panic!("a mixed layout cannot run under single");
        };
        assert_eq!(
            e,
            MigError::MixedUnderSingle {
                config: "all-balanced".into(),
                nodes: vec!["n2".into()]
            }
        );
        assert!(e.to_string().contains("mig.strategy=single"));
        assert_eq!(
            check_strategy(&config(A100_40, "all-1g.5gb"), &nodes),
            Ok(())
        );
    }

    #[test]
    fn allocatable_adds_up_nodes_by_their_own_strategy() {
        let c = config(A100_40, "all-1g.5gb");
        let nodes = [
            node(
                "mixed",
                &[(GPU_PRODUCT_LABEL, A100_40), (GPU_COUNT_LABEL, "8")],
            ),
            // Under single GFD counts MIG devices and names the profile in the product.
            node(
                "single",
                &[
                    (GPU_PRODUCT_LABEL, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
                    (GPU_COUNT_LABEL, "56"),
                    (MIG_STRATEGY_LABEL, "single"),
                ],
            ),
        ];
        assert_eq!(
            allocatable(&c, &nodes),
            [
                ("nvidia.com/gpu".to_owned(), 56),
                ("nvidia.com/mig-1g.5gb".to_owned(), 56),
            ]
            .into()
        );
    }

    #[test]
    fn failed_nodes_are_named() {
        let nodes = [
            node("b", &[(MIG_CONFIG_STATE_LABEL, "failed")]),
            node("a", &[(MIG_CONFIG_STATE_LABEL, "success")]),
            node("c", &[(MIG_CONFIG_STATE_LABEL, "pending")]),
        ];
        assert_eq!(failed_nodes(&nodes), vec!["b".to_owned()]);
        assert_eq!(
            NodeState::of(&nodes[2]),
            NodeState::Waiting(Some("pending".into()))
        );
        let e = MigError::Failed {
            config: "all-balanced".into(),
            nodes: vec!["b".into()],
        };
        assert!(
            e.to_string()
                .contains("on b (nvidia.com/mig.config.state=failed)")
        );
    }
}
