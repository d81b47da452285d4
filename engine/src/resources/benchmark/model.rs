//! The benchmark as configured, built from a planned value's `BenchmarkConfig` into a
//! [`BenchmarkSpec`] apply runs, and the run a state records ([`RecordedRun`]). Pure.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use bigdecimal::BigDecimal;

use crate::{
    benchmark::{self, Suite},
    diag::Diagnostics,
    path::AttrPath,
    tenancy::VirtualClusterRef,
    validate::PositiveDuration,
    value::{Known, Value},
};

pub use super::config::{LauncherSetting, OnFailure};
use super::{
    baseline::{BASELINE_PREFIX, Baseline},
    config::BenchmarkConfig,
    per_node::{self, Metrics},
    schema::DEFAULT_START_TIMEOUT,
    thresholds::{self, Bounds},
    units::{self, Per, UNITS_PREFIX},
};

/// Prefix of `failures` entries that come from thresholds (the rest are the tool's verdict).
pub const THRESHOLD_PREFIX: &str = "threshold: ";

/// The node pool a benchmark runs on, from its id `<namespace>/<virtual cluster>/<pool>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRef {
    /// The pool's virtual cluster.
    pub vc: VirtualClusterRef,
    /// The pool's name.
    pub name: String,
}

impl PoolRef {
    /// Parses a pool id.
    pub fn parse(id: &str) -> Option<PoolRef> {
        let (vc, name) = id.trim().rsplit_once('/')?;
        let vc = VirtualClusterRef::parse(vc)?;
        (!name.is_empty()).then(|| PoolRef {
            vc,
            name: name.to_owned(),
        })
    }

    /// The pool's id.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.vc.namespace, self.vc.name, self.name)
    }
}

/// A benchmark as configured, decoded from a wholly known planned value.
#[derive(Clone)]
pub struct BenchmarkSpec {
    /// Name.
    pub name: String,
    /// Host namespace to run in.
    pub namespace: String,
    /// The virtual cluster, when given.
    pub vc: Option<VirtualClusterRef>,
    /// The node pool, when given.
    pub pool: Option<PoolRef>,
    /// The suite.
    pub suite: &'static dyn Suite,
    /// Container image.
    pub image: String,
    /// Command as configured (`None`: the suite's default).
    pub command: Option<Vec<String>>,
    /// Nodes (pods).
    pub nodes: u32,
    /// How many times the run executes in its turn.
    pub repeats: u32,
    /// GPUs per pod.
    pub gpus_per_node: u32,
    /// Suite parameters.
    pub parameters: BTreeMap<String, String>,
    /// Metric bounds.
    pub thresholds: BTreeMap<String, Bounds>,
    /// The reference the results must reach, when set and known.
    pub baseline: Option<Baseline>,
    /// What a failed run does.
    pub on_failure: OnFailure,
    /// The gang deadline.
    pub start_timeout: Duration,
    /// How a multi-node MPI run starts.
    pub launcher: LauncherSetting,
    /// Per-node environment fields the nodes may differ in.
    pub allow_node_differences: BTreeSet<String>,
    /// The scalable unit the run is repeated on, one run per unit of the pool.
    pub per: Option<Per>,
    /// How far (a share) a unit may fall short of the best unit.
    pub unit_tolerance: BigDecimal,
    /// Whether each node of the gang is prescreened before the run.
    pub prescreen: bool,
    /// Whether the run reads the endpoint's API key from its Secret. The key is write-only,
    /// so it is never in a planned state: apply sets this from the configuration.
    pub endpoint_api_key: bool,
}

impl std::fmt::Debug for BenchmarkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchmarkSpec")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("suite", &self.suite.name())
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl BenchmarkSpec {
    /// Decodes a planned value whose configuration is known.
    pub fn from_value(v: &Value) -> Result<BenchmarkSpec, Diagnostics> {
        BenchmarkSpec::from_config(&BenchmarkConfig::decode(v))
    }

    /// The spec of a decoded planned value whose configuration is known; what is left out
    /// takes the schema's default.
    fn from_config(c: &BenchmarkConfig) -> Result<BenchmarkSpec, Diagnostics> {
        let mut d = Diagnostics::new();
        let name = c.name.value().cloned().unwrap_or_default();
        let (Some(suite), Some(namespace), Some(image)) =
            (c.suite(), c.run_namespace(), c.image.value().cloned())
        else {
            d.error_at(
                AttrPath::root(),
                "Value Not Known At Apply",
                "name, suite, image and namespace (or virtual_cluster_id) must be known to run a \
                 benchmark.",
            );
            return Err(d);
        };
        let count = |n: &Known<i64>| n.value().and_then(|n| u32::try_from(*n).ok()).unwrap_or(1);
        let known_strings = |xs: &Known<Vec<Known<String>>>| -> Vec<String> {
            xs.value()
                .into_iter()
                .flatten()
                .filter_map(|x| x.value().cloned())
                .collect()
        };
        Ok(BenchmarkSpec {
            name,
            namespace,
            vc: c
                .virtual_cluster_id
                .value()
                .map(String::as_str)
                .and_then(VirtualClusterRef::parse),
            pool: c
                .node_pool_id
                .value()
                .map(String::as_str)
                .and_then(PoolRef::parse),
            suite,
            image,
            // An element not known reads as empty, as a wholly known plan has none.
            command: c.command.value().map(|xs| {
                xs.iter()
                    .map(|x| x.value().cloned().unwrap_or_default())
                    .collect()
            }),
            nodes: count(&c.nodes),
            repeats: count(&c.repeats),
            gpus_per_node: count(&c.gpus_per_node),
            parameters: c
                .parameters
                .value()
                .into_iter()
                .flatten()
                .filter_map(|(k, x)| Some((k.clone(), x.value()?.clone())))
                .collect(),
            thresholds: c.bounds(),
            baseline: c.baseline(),
            on_failure: c.on_failure.value().copied().unwrap_or(OnFailure::Fail),
            start_timeout: c
                .start_timeout
                .value()
                .and_then(|s| PositiveDuration::parse(s).ok())
                .or_else(|| PositiveDuration::parse(DEFAULT_START_TIMEOUT).ok())
                .unwrap_or(Duration::from_secs(300)),
            launcher: c.launcher.value().copied().unwrap_or(LauncherSetting::Auto),
            allow_node_differences: known_strings(&c.allow_node_differences)
                .into_iter()
                .collect(),
            per: c.per.value().copied(),
            unit_tolerance: c.unit_tolerance_or_default(),
            prescreen: c.prescreen == Known::Value(true),
            endpoint_api_key: false,
        })
    }

    /// The resource id.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The run a state records, as refresh, an in-place change and destroy need it.
#[derive(Debug, Clone, Default)]
pub struct RecordedRun {
    /// Name, when recorded.
    pub name: Option<String>,
    /// The host namespace it ran in: `namespace`, else that of `virtual_cluster_id`.
    pub namespace: Option<String>,
    /// The recorded results; `None` while they are not known.
    pub results: Option<BTreeMap<String, BigDecimal>>,
    /// Each node's results, when each node ran the tool on its own.
    pub node_results: BTreeMap<String, Metrics>,
    /// Each unit's results, for a run per scalable unit.
    pub unit_results: BTreeMap<String, Metrics>,
    /// The unit it ran per, if any.
    pub per: Option<Per>,
    /// The suite it ran.
    pub suite: Option<String>,
    /// How many nodes ran at once.
    pub nodes: u32,
    /// What it ran on (`environment`).
    pub environment: BTreeMap<String, String>,
    /// The tool's own verdict: the recorded `failures` that are not thresholds.
    pub tool_failures: Vec<String>,
}

/// Whether a recorded failure follows from the results and the configuration alone
/// (thresholds, baseline, units), so plan re-checks it instead of keeping it.
fn is_re_checked(failure: &str) -> bool {
    [THRESHOLD_PREFIX, BASELINE_PREFIX, UNITS_PREFIX]
        .iter()
        .any(|p| failure.starts_with(p))
}

impl RecordedRun {
    /// Decodes the record of a state (or of a prior value at plan).
    pub fn from_state(state: &Value) -> RecordedRun {
        RecordedRun::from_config(&BenchmarkConfig::decode(state))
    }

    /// The record of a decoded state.
    pub(super) fn from_config(c: &BenchmarkConfig) -> RecordedRun {
        RecordedRun {
            name: c.name.value().cloned(),
            namespace: c.run_namespace(),
            results: c.recorded_results(),
            node_results: c.node_results.value().cloned().unwrap_or_default(),
            unit_results: c.unit_results.value().cloned().unwrap_or_default(),
            per: c.per.value().copied(),
            suite: c.suite.value().cloned(),
            nodes: c
                .nodes
                .value()
                .and_then(|n| u32::try_from(*n).ok())
                .unwrap_or(1),
            environment: c.environment.value().cloned().unwrap_or_default(),
            tool_failures: c
                .failures
                .value()
                .into_iter()
                .flatten()
                .filter(|f| !is_re_checked(f))
                .cloned()
                .collect(),
        }
    }

    /// The failures of the recorded run under `bounds` and `baseline`: the tool's verdict,
    /// then the broken thresholds and what falls short of the baseline; `None` while the
    /// results are not known.
    pub fn re_checked(
        &self,
        bounds: &BTreeMap<String, Bounds>,
        baseline: Option<&Baseline>,
        unit_tolerance: &BigDecimal,
    ) -> Option<Vec<String>> {
        let results = self.results.as_ref()?;
        let judged_by = judged_by(
            self.nodes > 1,
            &self.node_results,
            self.per,
            &self.unit_results,
        );
        let mut failures = verdict(&self.tool_failures, results, judged_by, bounds);
        let suite = self.suite.as_deref().and_then(benchmark::suite);
        if let (Some(per), Some(suite)) = (self.per, suite) {
            failures.extend(units::spread_failures(
                suite,
                bounds,
                per,
                unit_tolerance,
                &self.unit_results,
            ));
        }
        if let (Some(b), Some(suite)) = (baseline, suite) {
            failures.extend(b.failures(suite, bounds, results, &self.environment));
        }
        Some(failures)
    }
}

/// What thresholds judge besides `results`: each node, when each of several nodes ran the
/// tool on its own (`per_node`) and reported; else each unit of a run `per` unit. Create and
/// the plan-time re-check both ask here, so that they agree.
pub fn judged_by<'a>(
    per_node: bool,
    node_results: &'a BTreeMap<String, Metrics>,
    per: Option<Per>,
    unit_results: &'a BTreeMap<String, Metrics>,
) -> Option<(&'static str, &'a BTreeMap<String, Metrics>)> {
    if per_node && !node_results.is_empty() {
        Some(("node", node_results))
    } else {
        per.map(|p| (p.name(), unit_results))
    }
}

/// The verdict of a run from its results: tool failures plus broken thresholds, judged on
/// each node or unit of `judged_by` (a run of several nodes, each running the tool on its
/// own, or a run per unit: the word that names one, and their results), else on `results`.
pub fn verdict(
    tool_failures: &[String],
    results: &BTreeMap<String, BigDecimal>,
    judged_by: Option<(&str, &BTreeMap<String, Metrics>)>,
    bounds: &BTreeMap<String, Bounds>,
) -> Vec<String> {
    let broken = if let Some((noun, by)) = judged_by.filter(|(_, by)| !by.is_empty()) {
        per_node::violations(noun, by, bounds)
    } else {
        thresholds::violations(results, bounds)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let mut failures = tool_failures.to_vec();
    failures.extend(broken.into_iter().map(|v| format!("{THRESHOLD_PREFIX}{v}")));
    failures
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{super::config::default_unit_tolerance, *};

    /// An `nccl-all-reduce` run `allreduce` of `nodes` × `gpus`, defaults elsewhere.
    pub(crate) fn nccl_spec(nodes: u32, gpus: u32) -> BenchmarkSpec {
        BenchmarkSpec {
            repeats: 1,
            name: "allreduce".into(),
            namespace: "vc-a".into(),
            vc: None,
            pool: None,
            suite: benchmark::suite("nccl-all-reduce").expect("suite"),
            image: "nvcr.io/nvidia/pytorch:25.04-py3".into(),
            command: None,
            nodes,
            gpus_per_node: gpus,
            parameters: BTreeMap::new(),
            thresholds: BTreeMap::new(),
            baseline: None,
            on_failure: OnFailure::Fail,
            start_timeout: Duration::from_secs(60),
            launcher: LauncherSetting::Auto,
            allow_node_differences: BTreeSet::new(),
            per: None,
            unit_tolerance: default_unit_tolerance(),
            prescreen: false,
            endpoint_api_key: false,
        }
    }

    #[test]
    fn pool_ids_have_three_parts() {
        let p = PoolRef::parse("vc-a/a/train").expect("pool");
        assert_eq!(p.vc.namespace, "vc-a");
        assert_eq!(p.vc.name, "a");
        assert_eq!(p.name, "train");
        assert_eq!(p.id(), "vc-a/a/train");
        assert!(PoolRef::parse("train").is_none());
        assert!(PoolRef::parse("a/").is_none());
    }
}
