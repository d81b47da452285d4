//! One run against the cluster: create (or adopt) the Job, wait for the gang to start and the
//! Job to finish, read the log, record the environment, and clean up.
//!
//! # Expected flow
//!
//! 1. Look up the pool's nodes (for placement and the environment) and the virtual cluster's
//!    versions.
//! 2. Find `gfb-<name>`: a Job with the same spec hash is adopted (a re-run after a killed
//!    provider); one with another hash is deleted first. Then apply the Service and the Job.
//! 3. Gang start: every pod must be running (or done), together on distinct nodes, within
//!    `start_timeout`; otherwise everything is deleted and the run fails, naming the pods
//!    that did not start and why.
//! 4. Wait for the Job to complete or fail, within the create timeout.
//! 5. Read pod 0's log (the termination message when the log cannot be read), parse it.
//! 6. Delete the Job, its pods and the Service: the resource is the record.
//!
//! Runs on the same pool take turns within one provider process (`take_turn`).
//!
//! The waits of steps 3 and 4 are in `wait`, step 5 in `results`.
//! Here a run takes its turn; `execute` runs steps 1 to 6 over its units and repeats, `repeat`
//! runs one repeat, and `cleanup` removes what a run made.
//! An in-place change ([`apply_update`]) only re-checks the record; destroy
//! ([`apply_delete`]) removes whatever a run left.
//!
//! Terraform's stop request ends any wait at once; what was created is deleted then too.

mod cleanup;
mod execute;
mod repeat;

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock, PoisonError},
};

use tokio::time::Instant;

use cleanup::cleanup;
use execute::execute;
use repeat::Run;

use crate::{
    apply::{bounded, subject},
    backends::kube::host::HostObjects,
    context::Context,
    diag::Diagnostic,
    kinds::{ApplyResponse, ProgressSink},
    timeouts::{Operation, Timeouts},
    value::Value,
};

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    archive::Keeper,
    archive_store::remove_archive,
    config::{BenchmarkConfig, recorded_archive},
    model::{BenchmarkSpec, RecordedRun},
    results::record,
    schema::ARCHIVE,
    wait::wait_pods_gone,
};

pub use super::error::{RunError, StepError};

/// The detail of a run, or its cleanup, that stopped with `e`; `then` says what became of
/// the run's objects. A benchmark's stop names no step: the run is one.
fn stop_detail(name: &str, e: &StepError, then: Option<&str>) -> String {
    // A run's stop names no step: it says what stopped and what cleanup did.
    let said = match e {
        StepError::Cancelled => format!(
            "{}: stopped because Terraform asked the provider to stop.",
            subject(TYPE_NAME, name)
        ),
        other => other.detail(name, ""),
    };
    match then {
        Some(then) => format!("{said} {then}"),
        None => said,
    }
}

/// Waits for this run's turn on its pool. Runs on one pool take turns within a provider
/// process (one `terraform apply`): at once they would share the pool's GPUs and skew each
/// other's results, and a gang could not find its nodes free together.
async fn take_turn(spec: &BenchmarkSpec) -> Option<tokio::sync::OwnedMutexGuard<()>> {
    type Turns = std::sync::Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>;
    static TURNS: OnceLock<Turns> = OnceLock::new();
    let pool = spec.pool.as_ref()?.id();
    let turn = TURNS
        .get_or_init(Turns::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(pool.clone())
        .or_default()
        .clone();
    if let Ok(guard) = turn.clone().try_lock_owned() {
        return Some(guard);
    }
    tracing::info!(
        target: "gpufleet::benchmark",
        "benchmark {:?} waits for another run on pool {pool} to finish",
        spec.name
    );
    Some(turn.lock_owned().await)
}

/// Create: runs the benchmark of `planned` and returns its record. `endpoint_api_key` is the
/// configuration's write-only key, which no state holds.
pub async fn apply_create(
    cluster: &dyn HostObjects,
    ctx: &Context,
    planned: &Value,
    endpoint_api_key: Option<&str>,
) -> ApplyResponse {
    run(
        cluster,
        ctx,
        planned,
        endpoint_api_key,
        Keeper::Resource,
        &|_| {},
    )
    .await
}

/// One run of the benchmark `planned` describes, as create makes it, telling `progress` each
/// phase as it starts; the response holds the run's record. The `gpufleet_benchmark_run`
/// action runs through here too, so a run on demand is the run an apply makes; `keeper` says
/// whose archive the run keeps.
pub async fn run(
    cluster: &dyn HostObjects,
    ctx: &Context,
    planned: &Value,
    endpoint_api_key: Option<&str>,
    keeper: Keeper,
    progress: ProgressSink<'_>,
) -> ApplyResponse {
    let mut spec = match BenchmarkSpec::from_value(planned) {
        Ok(s) => s,
        Err(diagnostics) => {
            return ApplyResponse::refused(Value::Null, diagnostics);
        }
    };
    spec.endpoint_api_key = endpoint_api_key.is_some();
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let done = ctx
        .cancel
        .run_until_cancelled(async {
            // Within this process first (no polling), then across processes on the pool's
            // Lease.
            let _turn = take_turn(&spec).await;
            // On a pool, the pool's turn; else the benchmark's own, which a run on demand of
            // the same definition shares (their Job is the same).
            let lease = match &spec.pool {
                Some(pool) => super::turn_name::turn_lease(pool),
                None => super::turn_name::run_lease(&spec.namespace, &spec.name),
            };
            let held = match cluster.take_turn(lease, &ctx.cancel).await {
                Ok(held) => held,
                Err(e) => return failed(cluster, &spec, &t, e.into()).await,
            };
            // The create timeout counts from the run's turn, not from the wait for it.
            let started = Instant::now();
            let deadline = started + t.create;
            if let Some(pool) = &spec.pool {
                progress(format!("has its turn on node pool {}", pool.id()));
            }
            let run = Run {
                spec: &spec,
                planned,
                endpoint_api_key,
                keeper,
                progress,
            };
            let response = match execute(cluster, &run, started, deadline, t.create).await {
                Ok(response) => response,
                // Cleaned up before the turn passes on: the next run finds the nodes free.
                Err(e) => failed(cluster, &spec, &t, e).await,
            };
            held.release().await;
            response
        })
        .await;
    match done {
        Some(response) => response,
        None => failed(cluster, &spec, &t, StepError::Cancelled).await,
    }
}

/// The response of a run that did not finish: nothing of it is kept.
async fn failed(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    t: &Timeouts,
    e: StepError,
) -> ApplyResponse {
    let removed = match cleanup(cluster, &spec.namespace, &spec.name).await {
        Ok(()) => {
            let _ = wait_pods_gone(cluster, &spec.namespace, &spec.name, t.delete).await;
            "Everything the run created was removed.".to_owned()
        }
        Err(c) => format!(
            "What the run created could not be removed ({c}); the next apply takes it over \
             or removes it."
        ),
    };
    ApplyResponse {
        new_state: Value::Null,
        diagnostics: Diagnostic::error(
            "Benchmark Run Failed",
            stop_detail(&spec.name, &e, Some(&removed)),
        )
        .into(),
    }
}

/// Destroy (step 6): removes whatever the benchmark left, waiting for its pods to go.
pub async fn apply_delete(
    cluster: &dyn HostObjects,
    ctx: &Context,
    prior: &Value,
) -> ApplyResponse {
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let recorded = BenchmarkConfig::decode(prior);
    let RecordedRun {
        namespace: Some(namespace),
        name: Some(name),
        ..
    } = RecordedRun::from_config(&recorded)
    else {
        return ApplyResponse::done(Value::Null);
    };
    // A state from before archives records none.
    let archive = recorded.archive.into_value().unwrap_or_default();
    let work = async {
        cleanup(cluster, &namespace, &name).await?;
        let left = remove_archive(cluster, &namespace, &name, &archive).await?;
        wait_pods_gone(cluster, &namespace, &name, t.delete).await?;
        Ok(left)
    };
    let started = Instant::now();
    let e = match bounded(ctx, Operation::Delete, started, started + t.delete, work).await {
        Ok(left) => {
            return ApplyResponse {
                new_state: Value::Null,
                diagnostics: left.map(Into::into).unwrap_or_default(),
            };
        }
        // A namespace that is gone took the objects with it.
        Err(StepError::Kind(RunError::Cluster(e))) if e.is_not_found() => {
            return ApplyResponse::done(Value::Null);
        }
        // Reported as the timeout that was set, not the moment the wait noticed it.
        Err(StepError::TimedOut { op, .. }) => StepError::TimedOut {
            op,
            waited: t.delete,
        },
        Err(e) => e,
    };
    ApplyResponse {
        new_state: prior.clone(),
        diagnostics: Diagnostic::error("Benchmark Cleanup Failed", stop_detail(&name, &e, None))
            .into(),
    }
}

/// Update: only `thresholds`, `baseline`, `on_failure` and `timeouts` change in place, so
/// the recorded run is re-checked, without a cluster.
pub fn apply_update(prior: &Value, planned: &Value) -> ApplyResponse {
    let spec = match BenchmarkSpec::from_value(planned) {
        Ok(s) => s,
        Err(diagnostics) => {
            return ApplyResponse::refused(prior.clone(), diagnostics);
        }
    };
    let recorded = RecordedRun::from_state(prior);
    let failures = recorded
        .re_checked(
            &spec.thresholds,
            spec.baseline.as_ref(),
            &spec.unit_tolerance,
        )
        .unwrap_or_else(|| recorded.tool_failures.clone());
    let results = recorded.results.unwrap_or_default();
    let (mut new_state, diagnostics) = record(planned, &spec, &results, &failures);
    // No run, so the archive is the recorded one (null for a state from before archives).
    new_state.set_attr(ARCHIVE, recorded_archive(prior));
    ApplyResponse {
        new_state,
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_stop_names_the_run_then_says_what_became_of_its_objects() {
        let removed = Some("Everything the run created was removed.");
        assert_eq!(
            stop_detail(
                "solo",
                &RunError::Setup("namespace vc-a does not exist".to_owned()).into(),
                removed
            ),
            "gpufleet_benchmark \"solo\": namespace vc-a does not exist. Everything the run \
             created was removed."
        );
        assert_eq!(
            stop_detail("solo", &StepError::Cancelled, removed),
            "gpufleet_benchmark \"solo\": stopped because Terraform asked the provider to stop. \
             Everything the run created was removed."
        );
        let timed_out = |op| StepError::TimedOut {
            op,
            waited: Duration::from_secs(90),
        };
        assert_eq!(
            stop_detail("solo", &timed_out(Operation::Create), removed),
            "gpufleet_benchmark \"solo\": the Job did not finish within the create timeout \
             (1m 30s). Everything the run created was removed."
        );
        assert_eq!(
            stop_detail("solo", &timed_out(Operation::Delete), None),
            "gpufleet_benchmark \"solo\": gave up after the delete timeout (1m 30s)."
        );
    }
}
