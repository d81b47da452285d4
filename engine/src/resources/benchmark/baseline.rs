//! Baselines: a run's results judged against a reference run's (or published figures), as a
//! ratio, and refused when the two ran on setups that must match but do not. Pure.

use std::collections::{BTreeMap, BTreeSet};

use bigdecimal::BigDecimal;

use crate::{benchmark::Suite, value::display_number};

use super::{
    per_node::{self, Metrics},
    thresholds::Bounds,
};

/// Prefix of `failures` entries that come from the baseline.
pub const BASELINE_PREFIX: &str = "baseline: ";

/// The ratio a run must reach when the baseline sets none, 0.95: NVIDIA's Exemplar validation
/// asks for more than 95% of the baseline's performance.
pub fn default_min_ratio() -> BigDecimal {
    BigDecimal::new(95.into(), 2)
}

/// The `environment` keys whose values must be the same for two runs to be compared: the
/// experiment and the software and hardware it ran on, not when or where. The number of
/// nodes (`node_count`, from `nodes`) is compared too.
pub const MUST_MATCH: &[&str] = &[
    "suite",
    "image_digest",
    "parameters",
    "launcher",
    "gpu_product",
    "gpu_count",
    "driver_version",
    "cuda_version",
    "gpu_operator_version",
    "device_plugin_version",
    "sharing",
    "nccl_version",
    "nccl_tests_version",
    "dcgm_version",
    "ranks",
];

/// The compared number of nodes that ran at once (`environment`'s `node_count`; a record from
/// before it has only the list of their names).
pub const NODE_COUNT: &str = "node_count";

/// The `baseline` attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// The reference values by metric.
    pub results: Metrics,
    /// The reference run's `environment`, when given.
    pub environment: Option<BTreeMap<String, String>>,
    /// The share of each reference value the run must reach.
    pub min_ratio: BigDecimal,
    /// `MUST_MATCH` keys that may differ.
    pub allow_differences: BTreeSet<String>,
    /// Where published figures come from.
    pub source: Option<String>,
}

impl Baseline {
    /// Why `results`, from a run in `environment` under `bounds`, fall short of the baseline,
    /// each prefixed [`BASELINE_PREFIX`]: the fields that must match and do not, a field
    /// recorded on one side only included (then no metric is compared), else each metric below
    /// the ratio or not reported.
    pub fn failures(
        &self,
        suite: &dyn Suite,
        bounds: &BTreeMap<String, Bounds>,
        results: &Metrics,
        environment: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let of = self
            .source
            .as_deref()
            .map_or_else(String::new, |s| format!(" ({s})"));
        if let Some(reference) = &self.environment {
            // How many nodes ran at once: `node_count`, else (a record from before it) the
            // list of their names, which may differ.
            let count = |env: &BTreeMap<String, String>| {
                env.get(NODE_COUNT).cloned().or_else(|| {
                    env.get("nodes")
                        .map(|n| n.split(',').filter(|n| !n.is_empty()).count().to_string())
                })
            };
            let (run_nodes, base_nodes) = (count(environment), count(reference));
            let differ: Vec<String> = MUST_MATCH
                .iter()
                .map(|k| (*k, environment.get(*k).cloned(), reference.get(*k).cloned()))
                .chain(std::iter::once((NODE_COUNT, run_nodes, base_nodes)))
                .filter(|(k, _, _)| !self.allow_differences.contains(*k))
                .filter(|(_, run, base)| run != base)
                .map(|(k, run, base)| {
                    let shown = |v: Option<String>| {
                        v.map_or_else(|| "absent".to_owned(), |v| format!("{v:?}"))
                    };
                    format!("{k} (run {}, baseline {})", shown(run), shown(base))
                })
                .collect();
            if !differ.is_empty() {
                return vec![format!(
                    "{BASELINE_PREFIX}not compared, because the environments differ in {}; \
                     results compare only between runs of the same setup, so list the fields \
                     that may differ in baseline.allow_differences",
                    differ.join(", ")
                )];
            }
        }
        let ratio = display_number(&self.min_ratio);
        let mut out = Vec::new();
        for (metric, base) in &self.results {
            let Some(value) = results.get(metric) else {
                out.push(format!(
                    "{BASELINE_PREFIX}{metric} was not reported by the run (baseline {}{of})",
                    display_number(base)
                ));
                continue;
            };
            let lower_is_better = per_node::lower_is_better(suite, bounds, metric);
            // Higher is better: at least ratio × baseline. Lower is better: at most
            // baseline / ratio.
            let short = if lower_is_better {
                value * &self.min_ratio > *base
            } else {
                *value < base * &self.min_ratio
            };
            if short {
                let how = if lower_is_better {
                    format!("above the baseline divided by {ratio}")
                } else {
                    format!("below {ratio} of the baseline")
                };
                out.push(format!(
                    "{BASELINE_PREFIX}{metric} = {} is {how}: baseline {}{of}",
                    display_number(value),
                    display_number(base)
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::benchmark;

    fn n(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).expect("number")
    }

    #[test]
    fn the_default_ratio_is_ninety_five_percent() {
        assert_eq!(default_min_ratio(), n("0.95"));
    }

    fn baseline(results: &[(&str, &str)]) -> Baseline {
        Baseline {
            results: results
                .iter()
                .map(|(k, v)| ((*k).to_owned(), n(v)))
                .collect(),
            environment: None,
            min_ratio: n("0.95"),
            allow_differences: BTreeSet::new(),
            source: None,
        }
    }

    #[test]
    fn a_metric_below_the_ratio_names_both_values() {
        let nvb = benchmark::suite("nvbandwidth").expect("suite");
        let b = baseline(&[("h2d", "400"), ("d2h", "400")]);
        let results = Metrics::from([("h2d".to_owned(), n("379")), ("d2h".to_owned(), n("380"))]);
        assert_eq!(
            b.failures(nvb, &BTreeMap::new(), &results, &BTreeMap::new()),
            ["baseline: h2d = 379 is below 0.95 of the baseline: baseline 400"]
        );
    }

    #[test]
    fn lower_is_better_metrics_may_rise_only_by_the_ratio() {
        let burn = benchmark::suite("gpu-burn").expect("suite");
        let b = baseline(&[("gpus_faulty", "1")]);
        let ok = Metrics::from([("gpus_faulty".to_owned(), n("1"))]);
        assert!(
            b.failures(burn, &BTreeMap::new(), &ok, &BTreeMap::new())
                .is_empty()
        );
        let worse = Metrics::from([("gpus_faulty".to_owned(), n("2"))]);
        assert_eq!(
            b.failures(burn, &BTreeMap::new(), &worse, &BTreeMap::new())
                .len(),
            1
        );
    }

    #[test]
    fn a_different_driver_is_refused_naming_the_field_unless_allowed() {
        let nvb = benchmark::suite("nvbandwidth").expect("suite");
        let env = |driver: &str| {
            BTreeMap::from([
                ("driver_version".to_owned(), driver.to_owned()),
                ("started_at".to_owned(), driver.to_owned()),
            ])
        };
        let mut b = baseline(&[("h2d", "400")]);
        b.environment = Some(env("550.54.15"));
        let results = Metrics::from([("h2d".to_owned(), n("100"))]);
        let f = b.failures(nvb, &BTreeMap::new(), &results, &env("570.133.20"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].contains("driver_version (run \"570.133.20\", baseline \"550.54.15\")")
                && !f[0].contains("started_at"),
            "{f:?}"
        );
        b.allow_differences.insert("driver_version".to_owned());
        let f = b.failures(nvb, &BTreeMap::new(), &results, &env("570.133.20"));
        assert!(f[0].contains("h2d = 100 is below"), "{f:?}");
    }
}
