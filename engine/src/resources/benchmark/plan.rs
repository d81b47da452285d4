//! Planning a `gpufleet_benchmark`: the namespace and id as soon as they are known, and an
//! in-place change's verdict, re-checked against the recorded results.

use crate::{
    diag::Diagnostics,
    kinds::{PlanRequest, PlanResponse},
    value::Value,
};

use super::{
    model::{RecordedRun, namespace_of},
    thresholds,
};

pub(super) fn plan_benchmark(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if req.config.get("namespace").is_null() {
        let ns = namespace_of(&req.config).map_or_else(Value::unknown, Value::string);
        planned.set_attr("namespace", ns);
    }
    let id = match (
        planned.get("namespace").as_str(),
        planned.get("name").as_str(),
    ) {
        (Some(ns), Some(n)) => Value::string(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    planned.set_attr("id", id);
    if !req.prior.is_null() {
        match re_checked(&req.prior, &planned) {
            Some(failures) => {
                let status = if failures.is_empty() {
                    "passed"
                } else {
                    "failed"
                };
                planned.set_attr("status", Value::string(status));
                planned.set_attr(
                    "failures",
                    Value::List(failures.into_iter().map(Value::string).collect()),
                );
            }
            None => {
                planned.set_attr("status", Value::unknown());
                planned.set_attr("failures", Value::unknown());
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

/// The failures of the recorded run of `prior` under the thresholds of `planned`; `None`
/// when either is not known yet.
fn re_checked(prior: &Value, planned: &Value) -> Option<Vec<String>> {
    let bounds = planned.get("thresholds");
    if !bounds.is_wholly_known() {
        return None;
    }
    RecordedRun::from_state(prior).re_checked(&thresholds::of_value(bounds))
}
