//! The benchmark's attributes decoded once into types: from a configuration, a proposed or
//! planned value, or a prior state alike. Validate and plan read a [`BenchmarkConfig`]
//! instead of the raw value, and apply builds its [`BenchmarkSpec`](super::model::BenchmarkSpec)
//! and reads the recorded run from one; any attribute here may still be unknown or left out.
//! Pure: no I/O.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;

use super::{
    baseline::{Baseline, default_min_ratio},
    per_node::Metrics,
    schema::{
        ALLOW_DIFFERENCES, ALLOW_NODE_DIFFERENCES, ARCHIVE, ARCHIVE_CONFIGMAPS, ARCHIVE_SHA256,
        BASELINE, BASELINE_SOURCE, COMMAND, ENDPOINT_API_KEY, ENDPOINT_API_KEY_VERSION,
        ENVIRONMENT, FAILURES, GPUS_PER_NODE, ID, IMAGE, LAUNCHER, MIN_RATIO, NAME, NAMESPACE,
        NODE_POOL_ID, NODE_RESULTS, NODES, ON_FAILURE, PARAMETERS, PER, PRESCREEN, REPEATS,
        RESULTS, START_TIMEOUT, STARTED_AT, SUITE, THRESHOLD_MAX, THRESHOLD_MIN, THRESHOLDS,
        UNIT_RESULTS, UNIT_TOLERANCE, VIRTUAL_CLUSTER_ID,
    },
    thresholds::{Bounds, ThresholdSetting},
    units::{self, Per},
};
use crate::{
    benchmark::{self, Suite},
    tenancy::VirtualClusterRef,
    value::{
        Known, Value,
        known::{flag, object, text, whole},
    },
};

/// What `launcher` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LauncherSetting {
    /// The MPI Operator when the host serves `MPIJob`, else gpufleet's own.
    Auto,
    /// Always an `MPIJob`.
    MpiOperator,
    /// Always gpufleet's own launcher.
    Gpufleet,
}

impl LauncherSetting {
    /// From the attribute's value (`auto` when unset).
    pub fn parse(s: Option<&str>) -> LauncherSetting {
        match s {
            Some("mpi-operator") => LauncherSetting::MpiOperator,
            Some("gpufleet") => LauncherSetting::Gpufleet,
            _ => LauncherSetting::Auto,
        }
    }
}

/// What a failed run does to the apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// An apply error; the run is recorded and tainted.
    Fail,
    /// Recorded as `failed`, no error.
    Record,
}

impl OnFailure {
    /// From the attribute's value: anything but `record` fails, as the schema's default does.
    fn parse(s: &str) -> OnFailure {
        match s {
            "record" => OnFailure::Record,
            _ => OnFailure::Fail,
        }
    }
}

/// `baseline`, when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BaselineConfig {
    pub(super) results: Known<BTreeMap<String, Known<BigDecimal>>>,
    pub(super) environment: Known<BTreeMap<String, Known<String>>>,
    pub(super) min_ratio: Known<BigDecimal>,
    pub(super) allow_differences: Known<Vec<Known<String>>>,
    pub(super) source: Known<String>,
}

/// The `archive` a state records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct ArchiveRecord {
    /// The ConfigMaps that hold it, as far as they are known strings.
    pub(super) configmaps: Vec<String>,
    pub(super) sha256: Known<String>,
}

/// A benchmark's attributes as far as a value gives them: the configuration, then what a
/// run records in the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BenchmarkConfig {
    pub(super) id: Known<String>,
    pub(super) name: Known<String>,
    pub(super) virtual_cluster_id: Known<String>,
    pub(super) namespace: Known<String>,
    pub(super) node_pool_id: Known<String>,
    /// As written; [`BenchmarkConfig::suite`] looks it up.
    pub(super) suite: Known<String>,
    pub(super) image: Known<String>,
    /// Each element kept, known or not: an empty command is refused, one not yet known is not.
    pub(super) command: Known<Vec<Known<String>>>,
    pub(super) nodes: Known<i64>,
    pub(super) repeats: Known<i64>,
    pub(super) gpus_per_node: Known<i64>,
    pub(super) per: Known<Per>,
    pub(super) unit_tolerance: Known<BigDecimal>,
    pub(super) prescreen: Known<bool>,
    pub(super) launcher: Known<LauncherSetting>,
    pub(super) allow_node_differences: Known<Vec<Known<String>>>,
    pub(super) parameters: Known<BTreeMap<String, Known<String>>>,
    /// Write-only: only a configuration carries it.
    pub(super) endpoint_api_key: Known<String>,
    /// Any number, as written: only whether it is set matters across attributes.
    pub(super) endpoint_api_key_version: Known<BigDecimal>,
    pub(super) thresholds: Known<BTreeMap<String, Known<ThresholdSetting>>>,
    pub(super) baseline: Known<BaselineConfig>,
    pub(super) on_failure: Known<OnFailure>,
    /// As written; the schema's validator refuses what does not parse.
    pub(super) start_timeout: Known<String>,
    // What a run records.
    pub(super) results: Known<BTreeMap<String, Known<BigDecimal>>>,
    /// Each node's numbers; the numbers that are not known are left out.
    pub(super) node_results: Known<BTreeMap<String, Metrics>>,
    /// Each unit's numbers; the numbers that are not known are left out.
    pub(super) unit_results: Known<BTreeMap<String, Metrics>>,
    /// The known strings of `environment`.
    pub(super) environment: Known<BTreeMap<String, String>>,
    /// The known strings of `failures`.
    pub(super) failures: Known<Vec<String>>,
    pub(super) started_at: Known<String>,
    pub(super) archive: Known<ArchiveRecord>,
}

fn number(v: &Value) -> Known<BigDecimal> {
    Known::decode(v, |x| x.as_number().cloned())
}

/// A list or set, each element decoded as text.
fn texts(v: &Value) -> Known<Vec<Known<String>>> {
    Known::decode(v, |x| x.as_seq().map(|xs| xs.iter().map(text).collect()))
}

/// A map, each value decoded by `entry`.
fn map_of<T>(v: &Value, entry: impl Fn(&Value) -> T) -> Known<BTreeMap<String, T>> {
    Known::decode(v, |x| {
        x.as_map()
            .map(|m| m.iter().map(|(k, x)| (k.clone(), entry(x))).collect())
    })
}

/// The numbers of a map; any other entry is left out.
fn metrics(v: &Value) -> Metrics {
    v.as_map()
        .into_iter()
        .flatten()
        .filter_map(|(k, x)| Some((k.clone(), x.as_number()?.clone())))
        .collect()
}

/// Whether `k` waits for nothing: left out, or set and `set_known` says its parts are known.
fn wholly_known<C>(k: &Known<C>, set_known: impl FnOnce(&C) -> bool) -> bool {
    match k {
        Known::Unknown => false,
        Known::Null => true,
        Known::Value(c) => set_known(c),
    }
}

/// Whether none of `xs` is unknown.
fn none_unknown<'a, T: 'a>(mut xs: impl Iterator<Item = &'a Known<T>>) -> bool {
    xs.all(|x| !x.is_unknown())
}

/// One entry of `thresholds`.
fn threshold_setting(v: &Value) -> Known<ThresholdSetting> {
    object(v, |b| ThresholdSetting {
        min: number(b.get(THRESHOLD_MIN)),
        max: number(b.get(THRESHOLD_MAX)),
    })
}

/// The bounds of an entry as far as they are known: an unknown bound, or an entry that is
/// not a known object, bounds nothing.
fn known_bounds(entry: &Known<ThresholdSetting>) -> Bounds {
    let setting = entry.value();
    Bounds {
        min: setting.and_then(|s| s.min.value().cloned()),
        max: setting.and_then(|s| s.max.value().cloned()),
    }
}

impl BaselineConfig {
    fn decode(v: &Value) -> Known<BaselineConfig> {
        object(v, |b| BaselineConfig {
            results: map_of(b.get(RESULTS), number),
            environment: map_of(b.get(ENVIRONMENT), text),
            min_ratio: number(b.get(MIN_RATIO)),
            allow_differences: texts(b.get(ALLOW_DIFFERENCES)),
            source: text(b.get(BASELINE_SOURCE)),
        })
    }

    /// Whether nothing in it waits for apply.
    fn is_known(&self) -> bool {
        wholly_known(&self.results, |m| none_unknown(m.values()))
            && wholly_known(&self.environment, |m| none_unknown(m.values()))
            && !self.min_ratio.is_unknown()
            && wholly_known(&self.allow_differences, |xs| none_unknown(xs.iter()))
            && !self.source.is_unknown()
    }

    /// The reference the results must reach.
    fn baseline(&self) -> Baseline {
        Baseline {
            results: self
                .results
                .value()
                .into_iter()
                .flatten()
                .filter_map(|(k, x)| Some((k.clone(), x.value()?.clone())))
                .collect(),
            environment: self.environment.value().map(|m| {
                m.iter()
                    .filter_map(|(k, x)| Some((k.clone(), x.value()?.clone())))
                    .collect()
            }),
            min_ratio: self
                .min_ratio
                .value()
                .cloned()
                .unwrap_or_else(default_min_ratio),
            allow_differences: self
                .allow_differences
                .value()
                .into_iter()
                .flatten()
                .filter_map(|x| x.value().cloned())
                .collect(),
            source: self.source.value().cloned(),
        }
    }
}

impl ArchiveRecord {
    fn decode(v: &Value) -> Known<ArchiveRecord> {
        object(v, |a| ArchiveRecord {
            configmaps: a.get(ARCHIVE_CONFIGMAPS).strings(),
            sha256: text(a.get(ARCHIVE_SHA256)),
        })
    }
}

impl BenchmarkConfig {
    /// Decodes `v`; a null `v` (no prior state, a destroy plan) has every attribute null.
    pub(super) fn decode(v: &Value) -> BenchmarkConfig {
        BenchmarkConfig {
            id: text(v.get(ID)),
            name: text(v.get(NAME)),
            virtual_cluster_id: text(v.get(VIRTUAL_CLUSTER_ID)),
            namespace: text(v.get(NAMESPACE)),
            node_pool_id: text(v.get(NODE_POOL_ID)),
            suite: text(v.get(SUITE)),
            image: text(v.get(IMAGE)),
            command: texts(v.get(COMMAND)),
            nodes: whole(v.get(NODES)),
            repeats: whole(v.get(REPEATS)),
            gpus_per_node: whole(v.get(GPUS_PER_NODE)),
            per: Known::decode(v.get(PER), |x| x.as_str().and_then(Per::parse)),
            unit_tolerance: number(v.get(UNIT_TOLERANCE)),
            prescreen: flag(v.get(PRESCREEN)),
            launcher: Known::decode(v.get(LAUNCHER), |x| {
                x.as_str().map(|s| LauncherSetting::parse(Some(s)))
            }),
            allow_node_differences: texts(v.get(ALLOW_NODE_DIFFERENCES)),
            parameters: map_of(v.get(PARAMETERS), text),
            endpoint_api_key: text(v.get(ENDPOINT_API_KEY)),
            endpoint_api_key_version: number(v.get(ENDPOINT_API_KEY_VERSION)),
            // A map of objects; an object too, as a dynamic value may carry it.
            thresholds: Known::decode(v.get(THRESHOLDS), |x| {
                x.as_map().or_else(|| x.as_object()).map(|m| {
                    m.iter()
                        .map(|(k, b)| (k.clone(), threshold_setting(b)))
                        .collect()
                })
            }),
            baseline: BaselineConfig::decode(v.get(BASELINE)),
            on_failure: Known::decode(v.get(ON_FAILURE), |x| x.as_str().map(OnFailure::parse)),
            start_timeout: text(v.get(START_TIMEOUT)),
            results: map_of(v.get(RESULTS), number),
            node_results: map_of(v.get(NODE_RESULTS), metrics),
            unit_results: map_of(v.get(UNIT_RESULTS), metrics),
            environment: Known::decode(v.get(ENVIRONMENT), |x| {
                x.as_map().map(|m| {
                    m.iter()
                        .filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned())))
                        .collect()
                })
            }),
            failures: Known::decode(v.get(FAILURES), |x| x.as_seq().map(|_| x.strings())),
            started_at: text(v.get(STARTED_AT)),
            archive: ArchiveRecord::decode(v.get(ARCHIVE)),
        }
    }

    /// The suite, when `suite` is known and names one.
    pub(super) fn suite(&self) -> Option<&'static dyn Suite> {
        self.suite
            .value()
            .map(String::as_str)
            .and_then(benchmark::suite)
    }

    /// The host namespace the benchmark runs in: `namespace`, else the namespace of
    /// `virtual_cluster_id`.
    pub(super) fn run_namespace(&self) -> Option<String> {
        self.namespace.value().cloned().or_else(|| {
            self.virtual_cluster_id
                .value()
                .map(String::as_str)
                .and_then(VirtualClusterRef::parse)
                .map(|vc| vc.namespace)
        })
    }

    /// Every threshold's bounds as far as they are known.
    pub(super) fn bounds(&self) -> BTreeMap<String, Bounds> {
        self.thresholds
            .value()
            .into_iter()
            .flatten()
            .map(|(k, entry)| (k.clone(), known_bounds(entry)))
            .collect()
    }

    /// Whether no threshold waits for apply.
    pub(super) fn thresholds_known(&self) -> bool {
        wholly_known(&self.thresholds, |m| {
            m.values()
                .all(|entry| wholly_known(entry, |s| !s.min.is_unknown() && !s.max.is_unknown()))
        })
    }

    /// The baseline, when it is set and nothing in it waits for apply.
    pub(super) fn baseline(&self) -> Option<Baseline> {
        self.baseline
            .value()
            .filter(|b| b.is_known())
            .map(BaselineConfig::baseline)
    }

    /// Whether the baseline is left out or wholly known.
    pub(super) fn baseline_known(&self) -> bool {
        wholly_known(&self.baseline, BaselineConfig::is_known)
    }

    /// `unit_tolerance` as configured, else its default.
    pub(super) fn unit_tolerance_or_default(&self) -> BigDecimal {
        self.unit_tolerance
            .value()
            .cloned()
            .unwrap_or_else(default_unit_tolerance)
    }

    /// The recorded results, when the state's `results` is wholly known (a null one reads
    /// as no results).
    pub(super) fn recorded_results(&self) -> Option<Metrics> {
        match &self.results {
            Known::Unknown => None,
            Known::Null => Some(Metrics::new()),
            Known::Value(m) => m
                .iter()
                .map(|(k, x)| match x {
                    Known::Unknown => None,
                    Known::Null => Some(None),
                    Known::Value(n) => Some(Some((k.clone(), n.clone()))),
                })
                .collect::<Option<Vec<_>>>()
                .map(|xs| xs.into_iter().flatten().collect()),
        }
    }
}

/// The default `unit_tolerance`.
pub(super) fn default_unit_tolerance() -> BigDecimal {
    units::DEFAULT_TOLERANCE
        .parse()
        .unwrap_or_else(|_| BigDecimal::from(0))
}

/// The `archive` of `state` as it is, for a change that keeps the recorded one.
pub(super) fn recorded_archive(state: &Value) -> Value {
    state.get(ARCHIVE).clone()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn n(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).expect("number")
    }

    #[test]
    fn decode_keeps_unknown_null_and_value_apart() {
        let config = BenchmarkConfig::decode(&Value::object([
            ("name", Value::string("allreduce")),
            ("namespace", Value::unknown()),
            ("nodes", Value::int(2)),
        ]));
        assert_eq!(config.name, Known::Value("allreduce".to_owned()));
        assert!(config.namespace.is_unknown());
        assert!(config.virtual_cluster_id.is_null());
        assert_eq!(config.nodes, Known::Value(2));
        assert!(config.repeats.is_null());
    }

    #[test]
    fn a_null_value_decodes_to_nulls() {
        let config = BenchmarkConfig::decode(&Value::Null);
        assert!(config.name.is_null() && config.thresholds.is_null() && config.baseline.is_null());
        assert!(config.suite().is_none() && config.run_namespace().is_none());
        assert_eq!(config.recorded_results(), Some(Metrics::new()));
    }

    #[test]
    fn a_value_the_parse_refuses_reads_as_unknown() {
        let config = BenchmarkConfig::decode(&Value::object([
            ("per", Value::string("rack")),
            ("nodes", Value::Number(n("1.5"))),
            ("on_failure", Value::string("record")),
        ]));
        assert!(config.per.is_unknown());
        assert!(config.nodes.is_unknown());
        assert_eq!(config.on_failure, Known::Value(OnFailure::Record));
        let zone = BenchmarkConfig::decode(&Value::object([("per", Value::string("zone"))]));
        assert_eq!(zone.per, Known::Value(Per::Zone));
    }

    #[test]
    fn the_namespace_falls_back_to_the_virtual_clusters() {
        let config = |ns: Value| {
            BenchmarkConfig::decode(&Value::object([
                ("namespace", ns),
                ("virtual_cluster_id", Value::string("vc-a/a")),
            ]))
        };
        assert_eq!(config(Value::Null).run_namespace().as_deref(), Some("vc-a"));
        assert_eq!(
            config(Value::string("other")).run_namespace().as_deref(),
            Some("other")
        );
    }

    #[test]
    fn thresholds_keep_what_plan_waits_for() {
        let thresholds = |min: Value| {
            BenchmarkConfig::decode(&Value::object([(
                "thresholds",
                Value::Map(BTreeMap::from([(
                    "busbw".to_owned(),
                    Value::object([("min", min), ("max", Value::Null)]),
                )])),
            )]))
        };
        let known = thresholds(Value::int(400));
        assert!(known.thresholds_known());
        assert_eq!(known.bounds()["busbw"].min, Some(n("400")));
        let waiting = thresholds(Value::unknown());
        assert!(!waiting.thresholds_known());
        assert_eq!(waiting.bounds()["busbw"], Bounds::default());
    }

    #[test]
    fn a_baseline_is_read_only_once_wholly_known() {
        let baseline = |ratio: Value| {
            BenchmarkConfig::decode(&Value::object([(
                "baseline",
                Value::object([
                    (
                        "results",
                        Value::Map(BTreeMap::from([("h2d".to_owned(), Value::int(400))])),
                    ),
                    ("environment", Value::Null),
                    ("min_ratio", ratio),
                    ("allow_differences", Value::Null),
                    ("source", Value::Null),
                ]),
            )]))
        };
        let set = baseline(Value::Null).baseline().expect("baseline");
        assert_eq!(set.min_ratio, default_min_ratio());
        assert_eq!(set.results["h2d"], n("400"));
        assert!(set.environment.is_none());
        let waiting = baseline(Value::unknown());
        assert!(!waiting.baseline_known() && waiting.baseline().is_none());
        assert!(waiting.baseline.value().is_some());
    }

    #[test]
    fn recorded_results_wait_for_every_number() {
        let results = |x: Value| {
            BenchmarkConfig::decode(&Value::object([(
                "results",
                Value::Map(BTreeMap::from([
                    ("a".to_owned(), Value::int(1)),
                    ("b".to_owned(), x),
                ])),
            )]))
            .recorded_results()
        };
        assert_eq!(results(Value::unknown()), None);
        assert_eq!(
            results(Value::Null),
            Some(Metrics::from([("a".to_owned(), n("1"))]))
        );
    }

    #[test]
    fn an_archive_of_a_state_names_its_parts() {
        let state = Value::object([
            ("started_at", Value::string("2026-01-01T00:00:00Z")),
            (
                "archive",
                Value::object([
                    (
                        "configmaps",
                        Value::List(vec![Value::string("gfb-a-archive-0")]),
                    ),
                    ("sha256", Value::string("ab")),
                ]),
            ),
        ]);
        let config = BenchmarkConfig::decode(&state);
        let archive = config.archive.value().expect("archive");
        assert_eq!(archive.configmaps, ["gfb-a-archive-0"]);
        assert_eq!(archive.sha256, Known::Value("ab".to_owned()));
        assert_eq!(recorded_archive(&state), *state.get("archive"));
        assert!(BenchmarkConfig::decode(&Value::Null).archive.is_null());
    }
}
