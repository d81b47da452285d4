//! Runs per scalable unit (`per`): the pool's nodes grouped by the topology label that names
//! their switch block, NVLink clique or zone, one run on each unit in turn, and the rule that
//! a fleet handed off in units has every unit within `unit_tolerance` of the best. Pure.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;

use super::{
    per_node::{self, Metrics},
    thresholds::Bounds,
};
use crate::{
    backends::kube::{BLOCK_LABEL, CLIQUE_LABEL, ZONE_LABEL},
    benchmark::Suite,
    value::display_number,
};

/// Prefix of `failures` entries that compare units with each other (re-checked at plan, like
/// thresholds, when `unit_tolerance` changes).
pub const UNITS_PREFIX: &str = "units: ";

/// The default `unit_tolerance`: the reference architecture's "within 5%".
pub const DEFAULT_TOLERANCE: &str = "0.05";

/// What a unit is: the topology the pools already place by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// A switch block (NVIDIA topograph's `network.topology.nvidia.com/block`).
    Block,
    /// A multi-node NVLink domain (GPU feature discovery's `nvidia.com/gpu.clique`).
    Clique,
    /// A zone (`topology.kubernetes.io/zone`).
    Zone,
}

impl Per {
    /// What `per` accepts.
    pub const NAMES: &'static [&'static str] = &["block", "clique", "zone"];

    /// `per` as configured.
    pub fn parse(s: &str) -> Option<Per> {
        match s {
            "block" => Some(Per::Block),
            "clique" => Some(Per::Clique),
            "zone" => Some(Per::Zone),
            _ => None,
        }
    }

    /// The word a failure names a unit with.
    pub fn name(self) -> &'static str {
        match self {
            Per::Block => "block",
            Per::Clique => "clique",
            Per::Zone => "zone",
        }
    }

    /// The node label whose value names a node's unit.
    pub fn label(self) -> &'static str {
        match self {
            Per::Block => BLOCK_LABEL,
            Per::Clique => CLIQUE_LABEL,
            Per::Zone => ZONE_LABEL,
        }
    }
}

/// The pool's units: each value of `per`'s label with its nodes, in name order. Every node
/// must carry the label (a node of no unit would go untested), and every unit must hold the
/// `gang` of nodes one run takes; either failure says which nodes or units, and why.
pub fn units(
    per: Per,
    nodes: &BTreeMap<String, BTreeMap<String, String>>,
    gang: u32,
) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unlabelled = Vec::new();
    for (node, labels) in nodes {
        match labels.get(per.label()).filter(|v| !v.is_empty()) {
            Some(unit) => out.entry(unit.clone()).or_default().push(node.clone()),
            None => unlabelled.push(node.as_str()),
        }
    }
    if !unlabelled.is_empty() {
        return Err(format!(
            "per = {:?} runs once on each {} of the pool, but node(s) {} carry no {} label, so \
             they belong to none",
            per.name(),
            per.name(),
            unlabelled.join(", "),
            per.label()
        ));
    }
    let small: Vec<String> = out
        .iter()
        .filter(|(_, n)| n.len() < gang as usize)
        .map(|(u, n)| format!("{} {u} has {}", per.name(), n.len()))
        .collect();
    if !small.is_empty() {
        return Err(format!(
            "each run takes {gang} node(s) of one {}, but {}",
            per.name(),
            small.join(", ")
        ));
    }
    Ok(out)
}

/// Each unit that falls short of the best unit by more than `tolerance` (a share, 0.05 for
/// 5%), per metric whose better direction is known (a custom metric needs a threshold on one
/// side to say it; without, no unit is "best"): below the best × (1 − tolerance), or, where lower is better, above the
/// best ÷ (1 − tolerance), as the baseline's ratio reads. Each entry names the metric, both
/// units and both values.
pub fn spread_failures(
    suite: &dyn Suite,
    bounds: &BTreeMap<String, Bounds>,
    per: Per,
    tolerance: &BigDecimal,
    by_unit: &BTreeMap<String, Metrics>,
) -> Vec<String> {
    let ratio = BigDecimal::from(1) - tolerance;
    let metrics: std::collections::BTreeSet<&String> =
        by_unit.values().flat_map(BTreeMap::keys).collect();
    let mut out = Vec::new();
    for metric in metrics {
        let Some(lower_is_better) = per_node::known_direction(suite, bounds, metric) else {
            continue;
        };
        let values: Vec<(&String, &BigDecimal)> = by_unit
            .iter()
            .filter_map(|(u, m)| Some((u, m.get(metric)?)))
            .collect();
        let best = values.iter().copied().reduce(|a, b| {
            let better = if lower_is_better {
                b.1 < a.1
            } else {
                b.1 > a.1
            };
            if better { b } else { a }
        });
        let Some((best_unit, best)) = best else {
            continue;
        };
        for (unit, value) in &values {
            let short = if lower_is_better {
                *value * &ratio > *best
            } else {
                **value < best * &ratio
            };
            if short {
                let how = if lower_is_better { "above" } else { "below" };
                out.push(format!(
                    "{UNITS_PREFIX}{metric} on {} {unit} = {} is more than {} {how} {} {best_unit} \
                     = {} (unit_tolerance {})",
                    per.name(),
                    display_number(value),
                    percent(tolerance),
                    per.name(),
                    display_number(best),
                    display_number(tolerance)
                ));
            }
        }
    }
    out
}

/// A share as a percentage: `0.05` → `5%`.
fn percent(share: &BigDecimal) -> String {
    format!("{}%", display_number(&(share * BigDecimal::from(100))))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::benchmark;

    fn n(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).expect("number")
    }

    fn node(block: Option<&str>) -> BTreeMap<String, String> {
        block
            .map(|b| BTreeMap::from([(BLOCK_LABEL.to_owned(), b.to_owned())]))
            .unwrap_or_default()
    }

    #[test]
    fn a_pool_is_split_into_its_blocks() {
        let nodes = BTreeMap::from([
            ("n1".to_owned(), node(Some("b1"))),
            ("n2".to_owned(), node(Some("b2"))),
            ("n3".to_owned(), node(Some("b1"))),
        ]);
        let u = units(Per::Block, &nodes, 1).expect("units");
        assert_eq!(
            u,
            BTreeMap::from([
                ("b1".to_owned(), vec!["n1".to_owned(), "n3".to_owned()]),
                ("b2".to_owned(), vec!["n2".to_owned()]),
            ])
        );
        let e = units(Per::Block, &nodes, 2).expect_err("b2 is too small");
        assert!(e.contains("block b2 has 1"), "{e}");
    }

    #[test]
    fn a_node_of_no_unit_is_named() {
        let nodes = BTreeMap::from([
            ("n1".to_owned(), node(Some("b1"))),
            ("n2".to_owned(), node(None)),
        ]);
        let e = units(Per::Block, &nodes, 1).expect_err("n2 has no block");
        assert!(
            e.contains("node(s) n2 carry no network.topology.nvidia.com/block"),
            "{e}"
        );
    }

    #[test]
    fn a_unit_more_than_five_percent_below_the_best_fails_naming_both() {
        let suite = benchmark::suite("nvbandwidth").expect("suite");
        let metric = "host_to_device_memcpy_ce";
        let by_unit = BTreeMap::from([
            (
                "b1".to_owned(),
                Metrics::from([(metric.to_owned(), n("55.0"))]),
            ),
            (
                "b2".to_owned(),
                Metrics::from([(metric.to_owned(), n("53.0"))]),
            ),
            (
                "b3".to_owned(),
                Metrics::from([(metric.to_owned(), n("51.0"))]),
            ),
        ]);
        let f = spread_failures(suite, &BTreeMap::new(), Per::Block, &n("0.05"), &by_unit);
        assert_eq!(
            f,
            [format!(
                "units: {metric} on block b3 = 51 is more than 5% below block b1 = 55 \
                 (unit_tolerance 0.05)"
            )]
        );
    }
}
