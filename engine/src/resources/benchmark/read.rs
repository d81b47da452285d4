//! The record after the run: re-checking it against changed thresholds, and refreshing it.
//!
//! A finished run leaves nothing on the cluster, so a refresh has nothing to observe: the
//! record is returned as stored. Changing `thresholds` or `on_failure` re-checks the
//! recorded `results` without running again; everything that decides what runs forces a new
//! run instead.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;

use crate::{diag::Diagnostics, value::Value};

use super::{
    apply::{self, THRESHOLD_PREFIX},
    model::BenchmarkSpec,
    thresholds,
};

/// The recorded results of a state.
pub fn results_of(state: &Value) -> BTreeMap<String, BigDecimal> {
    state
        .get("results")
        .as_map()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_number()?.clone())))
                .collect()
        })
        .unwrap_or_default()
}

/// The tool's own verdict recorded in a state (the `failures` that are not thresholds).
pub fn tool_failures_of(state: &Value) -> Vec<String> {
    state
        .get("failures")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_str)
        .filter(|f| !f.starts_with(THRESHOLD_PREFIX))
        .map(str::to_owned)
        .collect()
}

/// The failures of the recorded run of `prior` under the thresholds of `planned`; `None`
/// when either is not known yet.
pub fn re_checked(prior: &Value, planned: &Value) -> Option<Vec<String>> {
    if !prior.get("results").is_wholly_known() || !planned.get("thresholds").is_wholly_known() {
        return None;
    }
    let mut failures = tool_failures_of(prior);
    failures.extend(
        thresholds::violations(
            &results_of(prior),
            &thresholds::of_value(planned.get("thresholds")),
        )
        .iter()
        .map(|v| format!("{THRESHOLD_PREFIX}{v}")),
    );
    Some(failures)
}

/// Applies an in-place change: the recorded run, re-checked.
pub fn apply_update(prior: &Value, planned: &Value) -> (Value, Diagnostics) {
    let spec = match BenchmarkSpec::from_value(planned) {
        Ok(s) => s,
        Err(d) => return (prior.clone(), d),
    };
    let failures = re_checked(prior, planned).unwrap_or_else(|| tool_failures_of(prior));
    apply::record(planned, &spec, &results_of(prior), &failures)
}
