//! Thresholds: which metric names a suite accepts, and which results fall outside their
//! bounds. Pure.

use std::{collections::BTreeMap, fmt};

use bigdecimal::BigDecimal;

use crate::{
    benchmark::{MetricSpec, Suite},
    diag::Diagnostics,
    path::AttrPath,
    value::{Known, display_number},
};

/// The bounds of one metric.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bounds {
    /// The smallest acceptable value.
    pub min: Option<BigDecimal>,
    /// The largest acceptable value.
    pub max: Option<BigDecimal>,
}

/// One entry of the `thresholds` attribute, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThresholdSetting {
    /// `min`.
    pub min: Known<BigDecimal>,
    /// `max`.
    pub max: Known<BigDecimal>,
}

/// One metric outside its bounds (or missing from the output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The metric.
    pub metric: String,
    /// Its value; `None` when the run did not report it.
    pub value: Option<BigDecimal>,
    /// The bound it broke, as `min 400` or `max 12.5`.
    pub bound: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(
                f,
                "{} = {} is outside its bound ({})",
                self.metric,
                display_number(v),
                self.bound
            ),
            None => write!(
                f,
                "{} was not reported by the run (bound {})",
                self.metric, self.bound
            ),
        }
    }
}

/// The metric `name` of `suite`: its own entry, or the pattern it matches. Suites whose names
/// come from the run (`<testcase>`, `<key>`) match any snake_case name.
pub fn metric_of(suite: &dyn Suite, name: &str) -> Option<MetricSpec> {
    suite.metrics().into_iter().find(|m| {
        if m.name.starts_with('<') {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        } else {
            m.name == name
        }
    })
}

/// Whether `name` is a metric `suite` can report.
pub fn is_metric_of(suite: &dyn Suite, name: &str) -> bool {
    metric_of(suite, name).is_some()
}

/// Refuses `name` at `path` unless it is a metric of `suite`, listing the suite's metrics.
pub fn check_metric(suite: &dyn Suite, name: &str, path: AttrPath, d: &mut Diagnostics) {
    if is_metric_of(suite, name) {
        return;
    }
    let known: Vec<String> = suite.metrics().into_iter().map(|m| m.name).collect();
    d.error_at(
        path,
        "Unknown Metric",
        format!(
            "{name:?} is not a metric of the {} suite; it reports: {}.",
            suite.name(),
            known.join(", ")
        ),
    );
}

/// Plan-time checks of `thresholds`, the attribute at `path`, against `suite`: unknown
/// metric names (listing the suite's metrics), and bounds that exclude every value.
pub fn validate(
    suite: &dyn Suite,
    path: &AttrPath,
    thresholds: &Known<BTreeMap<String, Known<ThresholdSetting>>>,
    d: &mut Diagnostics,
) {
    let Some(map) = thresholds.value() else {
        return;
    };
    let unset = ThresholdSetting::default();
    for (name, entry) in map {
        check_metric(suite, name, path.push_key(name), d);
        // An entry that is not a known object sets no bound yet either.
        let ThresholdSetting { min, max } = entry.value().unwrap_or(&unset);
        if min.is_null() && max.is_null() {
            d.error_at(
                path.push_key(name),
                "Empty Threshold",
                format!("the threshold of {name:?} sets neither min nor max."),
            );
        }
        if let (Some(lo), Some(hi)) = (min.value(), max.value())
            && lo > hi
        {
            d.error_at(
                path.push_key(name),
                "Impossible Threshold",
                format!(
                    "the threshold of {name:?} has min {} above max {}.",
                    display_number(lo),
                    display_number(hi)
                ),
            );
        }
    }
}

/// The metrics of `results` outside `thresholds`, in metric order.
pub fn violations(
    results: &BTreeMap<String, BigDecimal>,
    thresholds: &BTreeMap<String, Bounds>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for (metric, b) in thresholds {
        let value = results.get(metric);
        let broken = |bound: String| Violation {
            metric: metric.clone(),
            value: value.cloned(),
            bound,
        };
        match value {
            None => {
                let bound = match (&b.min, &b.max) {
                    (Some(lo), Some(hi)) => {
                        format!("min {}, max {}", display_number(lo), display_number(hi))
                    }
                    (Some(lo), None) => format!("min {}", display_number(lo)),
                    (None, Some(hi)) => format!("max {}", display_number(hi)),
                    (None, None) => continue,
                };
                out.push(broken(bound));
            }
            Some(v) => {
                if let Some(lo) = &b.min
                    && v < lo
                {
                    out.push(broken(format!("min {}", display_number(lo))));
                } else if let Some(hi) = &b.max
                    && v > hi
                {
                    out.push(broken(format!("max {}", display_number(hi))));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;
    use crate::benchmark::suite;

    fn num(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).expect("number")
    }

    fn bounds(min: Option<&str>, max: Option<&str>) -> Bounds {
        Bounds {
            min: min.map(num),
            max: max.map(num),
        }
    }

    #[test]
    fn values_inside_their_bounds_pass_and_the_edges_are_inclusive() {
        let results = BTreeMap::from([
            ("largest_size_bus_bandwidth".to_owned(), num("480.16")),
            ("wrong_count".to_owned(), num("0")),
        ]);
        let t = BTreeMap::from([
            (
                "largest_size_bus_bandwidth".to_owned(),
                bounds(Some("480.16"), None),
            ),
            ("wrong_count".to_owned(), bounds(None, Some("0"))),
        ]);
        assert!(violations(&results, &t).is_empty());
    }

    #[test]
    fn a_value_below_min_or_above_max_names_metric_value_and_bound() {
        let results = BTreeMap::from([("a".to_owned(), num("479.99")), ("b".to_owned(), num("3"))]);
        let t = BTreeMap::from([
            ("a".to_owned(), bounds(Some("480"), None)),
            ("b".to_owned(), bounds(Some("1"), Some("2"))),
        ]);
        let v = violations(&results, &t);
        let text: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "a = 479.99 is outside its bound (min 480)",
                "b = 3 is outside its bound (max 2)"
            ]
        );
    }

    #[test]
    fn messages_do_not_depend_on_the_scale_a_number_was_stored_with() {
        // A result read back from state can carry many trailing zeros; the message of the
        // re-check on refresh must equal the one of the run, or every plan would show a diff.
        let t = BTreeMap::from([("a".to_owned(), bounds(Some("2000.000"), None))]);
        let fresh = BTreeMap::from([("a".to_owned(), num("1832.5"))]);
        let stored = BTreeMap::from([("a".to_owned(), num("1832.500000000000000000000000"))]);
        let text = |r| violations(r, &t)[0].to_string();
        assert_eq!(text(&fresh), text(&stored));
        assert_eq!(text(&fresh), "a = 1832.5 is outside its bound (min 2000)");
    }

    #[test]
    fn a_metric_the_run_did_not_report_fails() {
        let t = BTreeMap::from([("gflops_min".to_owned(), bounds(Some("1000"), None))]);
        let v = violations(&BTreeMap::new(), &t);
        assert_eq!(v.len(), 1);
        assert!(v[0].value.is_none());
    }

    #[test]
    fn unknown_metric_names_are_refused_with_the_suite_metrics() {
        let nccl = suite("nccl-all-reduce").expect("suite");
        let t = Known::Value(BTreeMap::from([(
            "busbw".to_owned(),
            Known::Value(ThresholdSetting {
                min: Known::Value(num("400")),
                max: Known::Null,
            }),
        )]));
        let mut d = Diagnostics::new();
        validate(nccl, &AttrPath::attr("thresholds"), &t, &mut d);
        assert!(d.has_error());
        let detail = &d.iter().next().expect("one").detail;
        assert!(detail.contains("average_bus_bandwidth"), "{detail}");
        assert!(detail.contains("largest_size_bus_bandwidth"), "{detail}");
    }

    #[test]
    fn pattern_suites_accept_run_defined_names() {
        let nvb = suite("nvbandwidth").expect("suite");
        assert!(is_metric_of(nvb, "host_to_device_memcpy_ce"));
        assert!(!is_metric_of(nvb, "has space"));
        let burn = suite("gpu-burn").expect("suite");
        assert!(is_metric_of(burn, "gpus_faulty"));
        assert!(!is_metric_of(burn, "host_to_device_memcpy_ce"));
    }

    #[test]
    fn min_above_max_is_refused() {
        let burn = suite("gpu-burn").expect("suite");
        let t = Known::Value(BTreeMap::from([(
            "gflops_min".to_owned(),
            Known::Value(ThresholdSetting {
                min: Known::Value(num("5")),
                max: Known::Value(num("4")),
            }),
        )]));
        let mut d = Diagnostics::new();
        validate(burn, &AttrPath::attr("thresholds"), &t, &mut d);
        assert!(d.has_error());
    }
}
