//! Judging a run's results (step 5): the tool's verdict and facts from what `observe` read of
//! the pods (their logs, the image and the exit codes that count), and the state that records
//! them.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;

use crate::{
    benchmark::{Details, Parsed},
    diag::{Diagnostic, Diagnostics},
    value::Value,
};

use super::{
    TYPE_NAME,
    environment::Environment,
    launch::{self, Launcher},
    model::{BenchmarkSpec, OnFailure, judged_by, verdict},
    per_node::{self, Metrics},
    ranks, repeats,
    schema::{
        ENVIRONMENT, ENVIRONMENT_HASH, FAILURES, FINISHED_AT, ID, NODE_ENVIRONMENTS, NODE_RESULTS,
        RAW_OUTPUT, REPEAT_RESULTS, RESULTS, SPREAD, STARTED_AT, STATUS, UNIT_RESULTS,
    },
    units,
};

mod observe;

pub(super) use observe::{Observed, observe};
use observe::{headed, tail};

/// One repeat's numbers: the aggregate, each node's (empty for one MPI world), and the
/// tool's failures.
struct Judged {
    results: Metrics,
    node_results: BTreeMap<String, Metrics>,
    failures: Vec<String>,
}

/// Parses one repeat's logs, checking each MPI world and recording in `env` the ranks each
/// node ran; the run's first repeat (`first`) also tells `env` the tool's versions.
fn judge(
    spec: &BenchmarkSpec,
    launcher: Launcher,
    observed: &Observed,
    completed: bool,
    env: &mut Environment,
    first: bool,
) -> Judged {
    let mut failures: Vec<String> = observed
        .exit_codes
        .iter()
        .filter_map(|(pod, code)| Some(format!("pod {pod} {}", spec.suite.exit_failure(*code)?)))
        .collect();
    let several = observed.logs.len() > 1;
    let mut node_results: BTreeMap<String, Metrics> = BTreeMap::new();
    for (i, (node, log)) in observed.logs.iter().enumerate() {
        // With several nodes, each failure says whose it is.
        let whose = |f: String| {
            if several {
                format!("node {node}: {f}")
            } else {
                f
            }
        };
        match spec.suite.parse(log) {
            Ok(parsed) => {
                failures.extend(parsed.failures.iter().cloned().map(whose));
                if i == 0 {
                    let facts = ToolFacts {
                        spec,
                        launcher,
                        gang: &observed.nodes,
                        parsed: &parsed,
                    };
                    facts.record(env, first, &mut failures);
                }
                node_results.insert(node.clone(), parsed.metrics);
            }
            Err(e) => failures.push(whose(e.to_string())),
        }
    }
    let (results, node_results) = match launcher {
        // One MPI world's numbers belong to the whole world, not to a node.
        Launcher::MpiOperator | Launcher::Gpufleet => (
            node_results.into_values().next().unwrap_or_default(),
            BTreeMap::new(),
        ),
        Launcher::Pods => (
            per_node::worst(spec.suite, &spec.thresholds, &node_results),
            node_results,
        ),
    };
    // A failed Job whose exit codes and report explain nothing still failed.
    if !completed && failures.is_empty() {
        failures.push("the Job failed".to_owned());
    }
    Judged {
        results,
        node_results,
        failures,
    }
}

/// Name → metric → value, as the state holds `node_results` and `unit_results`.
fn metrics_map(by: BTreeMap<String, Metrics>) -> Value {
    Value::Map(by.into_iter().map(|(k, m)| (k, number_map(m))).collect())
}

fn number_map(metrics: Metrics) -> Value {
    Value::Map(
        metrics
            .into_iter()
            .map(|(k, v)| (k, Value::Number(v)))
            .collect(),
    )
}

/// The runs of one unit of a run `per` unit (its name), or of the whole run (`None`): each
/// repeat's observation and whether its Job completed.
pub(super) struct UnitRuns<'a> {
    pub(super) unit: Option<String>,
    pub(super) runs: Vec<(&'a Observed, bool)>,
}

/// What the repeats of one unit (or of the whole run) measured.
struct UnitJudged {
    tool_failures: Vec<String>,
    results: Metrics,
    repeat_results: Vec<Metrics>,
    node_results: BTreeMap<String, Metrics>,
}

/// Judges the repeats `runs` of one unit (the run's first unit: `first`), recording in `env`
/// what their output says.
fn judge_unit(
    spec: &BenchmarkSpec,
    launcher: Launcher,
    runs: &[(&Observed, bool)],
    env: &mut Environment,
    first: bool,
) -> UnitJudged {
    let several = runs.len() > 1;
    let mut tool_failures = Vec::new();
    let mut repeat_results = Vec::new();
    let mut repeat_nodes = Vec::new();
    for (i, (observed, completed)) in runs.iter().enumerate() {
        let judged = judge(spec, launcher, observed, *completed, env, first && i == 0);
        tool_failures.extend(judged.failures.into_iter().map(|f| {
            if several {
                format!("repeat {}: {f}", i + 1)
            } else {
                f
            }
        }));
        repeat_results.push(judged.results);
        repeat_nodes.push(judged.node_results);
    }
    let node_results = repeats::node_medians(&repeat_nodes);
    // Several nodes at once: each node's medians, then each metric's worst node. One node:
    // the medians over the repeats, whichever node each ran on.
    let results = if several_nodes(spec, launcher) {
        per_node::worst(spec.suite, &spec.thresholds, &node_results)
    } else {
        repeats::medians(&repeat_results)
    };
    UnitJudged {
        tool_failures,
        results,
        repeat_results,
        node_results,
    }
}

/// Whether each of several nodes runs the tool on its own, so that each has results.
fn several_nodes(spec: &BenchmarkSpec, launcher: Launcher) -> bool {
    launcher == Launcher::Pods && spec.nodes > 1
}

/// Step 5's verdict and record: the state of a run whose units (each with its repeats and
/// whether each Job succeeded) ran in `env`, with what the output adds to it, and the error
/// `on_failure = "fail"` asks for. A run `per` unit has
/// several `units`, each judged alone and then together: `results` keeps each metric's worst
/// unit, and the units are compared with each other.
pub(super) fn record_run(
    planned: &Value,
    spec: &BenchmarkSpec,
    launcher: Launcher,
    units: &[UnitRuns<'_>],
    mut env: Environment,
) -> (Value, Diagnostics) {
    let judged: Vec<UnitJudged> = units
        .iter()
        .enumerate()
        .map(|(i, u)| judge_unit(spec, launcher, &u.runs, &mut env, i == 0))
        .collect();
    let per = spec.per.filter(|_| units.iter().all(|u| u.unit.is_some()));
    let named = |u: &UnitRuns<'_>, f: &str| match (per, &u.unit) {
        (Some(per), Some(unit)) => format!("{} {unit}: {f}", per.name()),
        _ => f.to_owned(),
    };
    let tool_failures: Vec<String> = units
        .iter()
        .zip(&judged)
        .flat_map(|(u, j)| j.tool_failures.iter().map(move |f| named(u, f)))
        .collect();
    let unit_results: BTreeMap<String, Metrics> = units
        .iter()
        .zip(&judged)
        .filter_map(|(u, j)| Some((u.unit.clone()?, j.results.clone())))
        .filter(|_| per.is_some())
        .collect();
    let node_results: BTreeMap<String, Metrics> =
        judged.iter().flat_map(|j| j.node_results.clone()).collect();
    let results = match per {
        Some(_) => per_node::worst(spec.suite, &spec.thresholds, &unit_results),
        None => judged
            .first()
            .map(|j| j.results.clone())
            .unwrap_or_default(),
    };
    let judged_by = judged_by(
        several_nodes(spec, launcher),
        &node_results,
        per,
        &unit_results,
    );
    let mut failures = verdict(&tool_failures, &results, judged_by, &spec.thresholds);
    if let Some(per) = per {
        failures.extend(units::spread_failures(
            spec.suite,
            &spec.thresholds,
            per,
            &spec.unit_tolerance,
            &unit_results,
        ));
    }
    if let Some(b) = &spec.baseline {
        failures.extend(b.failures(spec.suite, &spec.thresholds, &results, &env.to_map()));
    }
    // Each metric's spread over the repeats of a unit, the widest unit's: units differ by
    // design, and `unit_results` shows by how much.
    let spread = per_node::worst_of(
        judged.iter().map(|j| repeats::spread(&j.repeat_results)),
        true,
    );
    let repeat_results: Vec<Metrics> = judged.into_iter().flat_map(|j| j.repeat_results).collect();
    let (mut state, diagnostics) = record(planned, spec, &results, &failures);
    state.set_attr(SPREAD, number_map(spread));
    state.set_attr(
        REPEAT_RESULTS,
        Value::List(repeat_results.into_iter().map(number_map).collect()),
    );
    state.set_attr(NODE_RESULTS, metrics_map(node_results));
    state.set_attr(UNIT_RESULTS, metrics_map(unit_results));
    state.set_attr(
        ENVIRONMENT,
        Value::Map(
            env.to_map()
                .into_iter()
                .map(|(k, v)| (k, Value::string(v)))
                .collect(),
        ),
    );
    state.set_attr(ENVIRONMENT_HASH, Value::string(env.hash()));
    state.set_attr(
        NODE_ENVIRONMENTS,
        Value::Map(
            env.node_environments()
                .into_iter()
                .map(|(n, m)| {
                    (
                        n,
                        Value::Map(m.into_iter().map(|(k, v)| (k, Value::string(v))).collect()),
                    )
                })
                .collect(),
        ),
    );
    let raw = units
        .iter()
        .map(|u| {
            let text = match &u.runs[..] {
                [(observed, _)] => observed.output(),
                runs => runs
                    .iter()
                    .enumerate()
                    .map(|(i, (o, _))| headed(&format!("repeat {}", i + 1), &o.output()))
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            match (per, &u.unit) {
                (Some(per), Some(unit)) => headed(&format!("{} {unit}", per.name()), &text),
                _ => text,
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    state.set_attr(RAW_OUTPUT, Value::string(tail(&raw)));
    state.set_attr(STARTED_AT, Value::string(env.started_at));
    state.set_attr(FINISHED_AT, Value::string(env.finished_at));
    (state, diagnostics)
}

/// The state of a recorded run, and the error `on_failure = "fail"` asks for.
pub(super) fn record(
    planned: &Value,
    spec: &BenchmarkSpec,
    results: &BTreeMap<String, BigDecimal>,
    failures: &[String],
) -> (Value, Diagnostics) {
    let mut s = planned.clone();
    s.set_attr(ID, Value::string(spec.id()));
    s.set_attr(
        RESULTS,
        Value::Map(
            results
                .iter()
                .map(|(k, v)| (k.clone(), Value::Number(v.clone())))
                .collect(),
        ),
    );
    s.set_attr(
        FAILURES,
        Value::List(failures.iter().map(Value::string).collect()),
    );
    let passed = failures.is_empty();
    s.set_attr(
        STATUS,
        Value::string(if passed { "passed" } else { "failed" }),
    );
    let mut d = Diagnostics::new();
    if !passed {
        let text = format!(
            "{TYPE_NAME} {:?} ({}) failed:\n- {}",
            spec.name,
            spec.suite.name(),
            failures.join("\n- ")
        );
        match spec.on_failure {
            OnFailure::Fail => d.push(Diagnostic::error(
                "Benchmark Failed",
                format!(
                    "{text}\nThe run is recorded; the next apply runs it again. Set on_failure = \
                     \"record\" to keep failed runs without an error."
                ),
            )),
            OnFailure::Record => {}
        }
    }
    (s, d)
}

/// What one repeat's result log adds to the record: the tool's versions and, for an MPI run,
/// the world it shows (a world that is not the run's is a failure: its numbers are not the
/// gang's).
struct ToolFacts<'a> {
    spec: &'a BenchmarkSpec,
    launcher: Launcher,
    gang: &'a [String],
    parsed: &'a Parsed,
}

impl ToolFacts<'_> {
    /// Checks the MPI world (every repeat of every unit: any may be broken) and records the
    /// ranks each node ran; the run's `first` repeat also records the tool's versions and
    /// the world's shape.
    fn record(&self, env: &mut Environment, first: bool, failures: &mut Vec<String>) {
        let ToolFacts {
            spec,
            launcher,
            gang,
            parsed,
        } = *self;
        if first {
            let taken = env.to_map();
            for (k, v) in &parsed.versions {
                // The node's driver and CUDA come from its labels; the tool's own say are
                // kept apart.
                let key = if taken.contains_key(k) {
                    format!("reported_{k}")
                } else {
                    k.clone()
                };
                env.tool_versions.insert(key, v.clone());
            }
        }
        let Details::NcclAllReduce(details) = &parsed.details else {
            return;
        };
        if details.ranks.is_empty() {
            return;
        }
        if first {
            env.ranks = details.ranks.len().to_string();
            env.ranks_by_host = ranks::by_host(details)
                .iter()
                .map(|(h, r)| format!("{h}: {}", ranks::ranges(r)))
                .collect::<Vec<_>>()
                .join("; ");
        }
        if !launch::is_mpi(spec) {
            return;
        }
        if let Some(problem) = ranks::world_problem(spec, details) {
            failures.push(problem);
        }
        for (node, r) in ranks::per_node(details, &spec.name, launcher, gang) {
            if let Some(record) = env.per_node.get_mut(&node) {
                record.ranks = r;
            }
        }
    }
}

pub(super) fn launcher_name(launcher: Launcher) -> &'static str {
    match launcher {
        Launcher::Pods => "pods",
        Launcher::MpiOperator => "mpi-operator",
        Launcher::Gpufleet => "gpufleet",
    }
}
