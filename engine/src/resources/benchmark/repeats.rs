//! A run of several repeats: each metric's median, which `results` keeps and thresholds
//! judge, and its spread over the repeats. Pure.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;

use super::per_node::Metrics;

/// The median of `values` (the mean of the middle two for an even count); `None` for none.
fn median(mut values: Vec<BigDecimal>) -> Option<BigDecimal> {
    values.sort();
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => values.into_iter().nth(n / 2),
        _ => Some((&values[n / 2 - 1] + &values[n / 2]) / BigDecimal::from(2)),
    }
}

/// Each metric's values over the repeats that reported it.
fn by_metric<'a>(
    repeats: impl IntoIterator<Item = &'a Metrics>,
) -> BTreeMap<String, Vec<BigDecimal>> {
    let mut out: BTreeMap<String, Vec<BigDecimal>> = BTreeMap::new();
    for metrics in repeats {
        for (k, v) in metrics {
            out.entry(k.clone()).or_default().push(v.clone());
        }
    }
    out
}

/// Each metric's median over the repeats that reported it.
pub fn medians<'a>(repeats: impl IntoIterator<Item = &'a Metrics>) -> Metrics {
    by_metric(repeats)
        .into_iter()
        .filter_map(|(k, vs)| Some((k, median(vs)?)))
        .collect()
}

/// Each metric's largest minus smallest value over the repeats.
pub fn spread(repeats: &[Metrics]) -> Metrics {
    by_metric(repeats)
        .into_iter()
        .filter_map(|(k, vs)| {
            let (lo, hi) = (vs.iter().min()?, vs.iter().max()?);
            Some((k, hi - lo))
        })
        .collect()
}

/// Each node's median of each metric, over the repeats it ran in.
pub fn node_medians(repeats: &[BTreeMap<String, Metrics>]) -> BTreeMap<String, Metrics> {
    let mut nodes: BTreeMap<&str, Vec<&Metrics>> = BTreeMap::new();
    for repeat in repeats {
        for (node, metrics) in repeat {
            nodes.entry(node).or_default().push(metrics);
        }
    }
    nodes
        .into_iter()
        .map(|(node, runs)| (node.to_owned(), medians(runs)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn m(entries: &[(&str, &str)]) -> Metrics {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), BigDecimal::from_str(v).expect("number")))
            .collect()
    }

    #[test]
    fn the_median_and_spread_of_three_repeats() {
        let runs = [
            m(&[("bw", "410"), ("errors", "0")]),
            m(&[("bw", "395.5"), ("errors", "2")]),
            m(&[("bw", "402")]),
        ];
        assert_eq!(medians(&runs), m(&[("bw", "402"), ("errors", "1")]));
        assert_eq!(spread(&runs), m(&[("bw", "14.5"), ("errors", "2")]));
    }

    #[test]
    fn one_run_is_its_own_median_with_no_spread() {
        let runs = [m(&[("bw", "410")])];
        assert_eq!(medians(&runs), runs[0]);
        assert_eq!(spread(&runs), m(&[("bw", "0")]));
    }

    #[test]
    fn each_node_has_its_own_median() {
        let repeats = [
            BTreeMap::from([
                ("a".to_owned(), m(&[("bw", "1")])),
                ("b".to_owned(), m(&[("bw", "5")])),
            ]),
            BTreeMap::from([("a".to_owned(), m(&[("bw", "3")]))]),
        ];
        let by_node = node_medians(&repeats);
        assert_eq!(by_node["a"], m(&[("bw", "2")]));
        assert_eq!(by_node["b"], m(&[("bw", "5")]));
    }
}
