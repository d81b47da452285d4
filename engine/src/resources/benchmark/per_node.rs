//! Every node's numbers, for runs in which each node runs the tool on its own (every run but
//! one MPI world across nodes): the aggregate that `results` keeps, and thresholds judged node
//! by node so that a failure names the node. Pure.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;

use crate::benchmark::{Direction, Suite};

use super::thresholds::{self, Bounds};

/// Metric name → value.
pub type Metrics = BTreeMap<String, BigDecimal>;

/// Whether lower values of `metric` are better: its suite says so, or, for a metric of no
/// known direction (a custom command's), its threshold sets only a max.
pub fn lower_is_better(suite: &dyn Suite, bounds: &BTreeMap<String, Bounds>, metric: &str) -> bool {
    match thresholds::metric_of(suite, metric).map(|m| m.direction) {
        Some(Direction::LowerIsBetter) => true,
        Some(Direction::HigherIsBetter) => false,
        Some(Direction::Unspecified) | None => bounds
            .get(metric)
            .is_some_and(|b| b.min.is_none() && b.max.is_some()),
    }
}

/// Whether lower values of `metric` are better, when anything says: its suite, or a
/// threshold that bounds it on one side only. `None` for a custom metric with neither.
pub fn known_direction(
    suite: &dyn Suite,
    bounds: &BTreeMap<String, Bounds>,
    metric: &str,
) -> Option<bool> {
    match thresholds::metric_of(suite, metric).map(|m| m.direction) {
        Some(Direction::LowerIsBetter) => Some(true),
        Some(Direction::HigherIsBetter) => Some(false),
        Some(Direction::Unspecified) | None => {
            bounds.get(metric).and_then(|b| match (&b.min, &b.max) {
                (None, Some(_)) => Some(true),
                (Some(_), None) => Some(false),
                _ => None,
            })
        }
    }
}

/// Each metric's highest (`highest`) or lowest value over `all`.
pub fn worst_of(all: impl IntoIterator<Item = Metrics>, highest: bool) -> Metrics {
    let mut out = Metrics::new();
    for metrics in all {
        for (name, value) in metrics {
            let keep = out.get(&name).is_none_or(|kept| {
                if highest {
                    value > *kept
                } else {
                    value < *kept
                }
            });
            if keep {
                out.insert(name, value);
            }
        }
    }
    out
}

/// Each metric's worst value over the nodes that reported it: the highest when lower is
/// better ([`lower_is_better`]), else the lowest.
pub fn worst(
    suite: &dyn Suite,
    bounds: &BTreeMap<String, Bounds>,
    by_node: &BTreeMap<String, Metrics>,
) -> Metrics {
    let mut out = Metrics::new();
    for metrics in by_node.values() {
        for (name, value) in metrics {
            let highest = lower_is_better(suite, bounds, name);
            let keep = out
                .get(name)
                .is_none_or(|kept| if highest { value > kept } else { value < kept });
            if keep {
                out.insert(name.clone(), value.clone());
            }
        }
    }
    out
}

/// The thresholds each node (or unit, as `noun` names them) breaks or reports nothing for,
/// as `<noun> <name>: <violation>`, in name order.
pub fn violations(
    noun: &str,
    by_node: &BTreeMap<String, Metrics>,
    bounds: &BTreeMap<String, Bounds>,
) -> Vec<String> {
    by_node
        .iter()
        .flat_map(|(node, metrics)| {
            thresholds::violations(metrics, bounds)
                .into_iter()
                .map(move |v| format!("{noun} {node}: {v}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::benchmark;

    fn n(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).expect("number")
    }

    fn nodes(entries: &[(&str, &[(&str, &str)])]) -> BTreeMap<String, Metrics> {
        entries
            .iter()
            .map(|(node, ms)| {
                (
                    (*node).to_owned(),
                    ms.iter().map(|(k, v)| ((*k).to_owned(), n(v))).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_worst_node_is_kept_whichever_way_a_metric_improves() {
        let burn = benchmark::suite("gpu-burn").expect("suite");
        let by_node = nodes(&[
            ("a", &[("gflops_min", "9000"), ("gpus_faulty", "0")]),
            ("b", &[("gflops_min", "7000"), ("gpus_faulty", "1")]),
        ]);
        let worst = worst(burn, &BTreeMap::new(), &by_node);
        assert_eq!(worst["gflops_min"], n("7000"));
        assert_eq!(worst["gpus_faulty"], n("1"));
    }

    #[test]
    fn a_custom_metric_follows_its_bound() {
        let custom = benchmark::suite("custom").expect("suite");
        let by_node = nodes(&[("a", &[("latency", "3")]), ("b", &[("latency", "5")])]);
        let max_only = BTreeMap::from([(
            "latency".to_owned(),
            Bounds {
                min: None,
                max: Some(n("4")),
            },
        )]);
        assert_eq!(worst(custom, &max_only, &by_node)["latency"], n("5"));
        assert_eq!(worst(custom, &BTreeMap::new(), &by_node)["latency"], n("3"));
    }

    #[test]
    fn each_node_is_judged_and_named() {
        let by_node = nodes(&[
            ("gpu-a", &[("h2d", "50")]),
            ("gpu-b", &[("h2d", "20")]),
            ("gpu-c", &[]),
        ]);
        let bounds = BTreeMap::from([(
            "h2d".to_owned(),
            Bounds {
                min: Some(n("40")),
                max: None,
            },
        )]);
        assert_eq!(
            violations("node", &by_node, &bounds),
            vec![
                "node gpu-b: h2d = 20 is outside its bound (min 40)".to_owned(),
                "node gpu-c: h2d was not reported by the run (bound min 40)".to_owned(),
            ]
        );
    }
}
