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
//! Runs on the same pool take turns within one provider process ([`take_turn`]).
//!
//! The waits of steps 3 and 4 are in `wait`, step 5 in `results`.
//! An in-place change ([`apply_update`]) only re-checks the record; destroy
//! ([`apply_delete`]) removes whatever a run left.
//!
//! Terraform's stop request ends any wait at once; what was created is deleted then too.

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock, PoisonError},
    time::Duration,
};

use serde_json::Value as Json;
use tokio::time::Instant;

use crate::{
    apply::{bounded, subject},
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
        json::str_at,
    },
    context::Context,
    diag::Diagnostic,
    kinds::{ApplyResponse, ProgressSink},
    timeouts::{Operation, Timeouts},
    value::Value,
};

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    archive::{Keeper, RepeatLogs},
    archive_store::{keep_archive, remove_archive},
    cluster_facts::{PoolInfo, gpu_operator_versions, node_records, pool_info, vc_versions},
    commands,
    config::{BenchmarkConfig, recorded_archive},
    environment::{Environment, NodeRecord, node_differences},
    launch::{self, Launcher},
    model::{BenchmarkSpec, RecordedRun},
    prescreen,
    render::{self, SPEC_HASH_ANNOTATION},
    results::{Observed, UnitRuns, launcher_name, observe, record, record_run},
    schema::ARCHIVE,
    shape::Shape,
    units,
    wait::{POLL, wait_done, wait_gang, wait_pods_gone},
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

/// `driver_version (gpu-a: 570.1; gpu-b: 575.2)` for each differing field.
fn describe_differences(differences: &[(String, BTreeMap<String, String>)]) -> String {
    differences
        .iter()
        .map(|(field, by_node)| {
            let values: Vec<String> = by_node
                .iter()
                .map(|(n, v)| format!("{n}: {}", if v.is_empty() { "unknown" } else { v }))
                .collect();
            format!("{field} ({})", values.join("; "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Deletes everything a benchmark made in `namespace`: Job, Service and any pod left.
async fn cleanup(
    cluster: &dyn HostObjects,
    namespace: &str,
    name: &str,
) -> Result<(), ObjectError> {
    let job = render::job_name(name);
    // The run's Job, and a prescreen's a killed provider left (whose controller would
    // otherwise start its pods again).
    for j in [job.clone(), prescreen::job_name(name)] {
        cluster.delete(ObjectKind::Job, Some(namespace), &j).await?;
    }
    // The MPI Operator's own objects (launcher, workers, hostfile, keys) go with it; its
    // launcher Job is deleted here too, so nothing of the run outlives the apply.
    cluster
        .delete(ObjectKind::MpiJob, Some(namespace), &job)
        .await?;
    cluster
        .delete(ObjectKind::Job, Some(namespace), &format!("{job}-launcher"))
        .await?;
    cluster
        .delete(ObjectKind::Service, Some(namespace), &job)
        .await?;
    for secret in [
        launch::ssh_secret_name(name),
        render::endpoint_secret_name(name),
    ] {
        cluster
            .delete(ObjectKind::Secret, Some(namespace), &secret)
            .await?;
    }
    for pod in cluster
        .list(
            ObjectKind::Pod,
            Some(namespace),
            &render::owner_selector(name),
        )
        .await?
    {
        if let Some(p) = str_at(&pod, "/metadata/name") {
            cluster.delete(ObjectKind::Pod, Some(namespace), p).await?;
        }
    }
    Ok(())
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

/// What one run is made of: the planned record, the key no state holds, and who hears of
/// its phases.
#[derive(Clone, Copy)]
struct Run<'a> {
    spec: &'a BenchmarkSpec,
    planned: &'a Value,
    endpoint_api_key: Option<&'a str>,
    keeper: Keeper,
    progress: ProgressSink<'a>,
}

/// Steps 1 to 6 of a run that has its turn (see the module docs); `deadline` ends the create
/// timeout `limit`, counted from `started`.
async fn execute(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    started: Instant,
    deadline: Instant,
    limit: Duration,
) -> Result<ApplyResponse, StepError> {
    let Run {
        spec,
        planned,
        progress,
        ..
    } = *run;
    if cluster
        .get(ObjectKind::Namespace, None, &spec.namespace)
        .await?
        .is_none()
    {
        return Err(RunError::Setup(format!("namespace {} does not exist", spec.namespace)).into());
    }
    let kubernetes_version = cluster.server_version().await?;
    let (vcluster_version, vc_kubernetes_version) = vc_versions(cluster, spec).await?;
    let pool = pool_info(cluster, spec).await?;
    let (gpu_operator_version, device_plugin_version) = gpu_operator_versions(cluster).await?;

    let serves_mpijob = launch::is_mpi(spec) && cluster.serves(ObjectKind::MpiJob).await?;
    let launcher = launch::choose(spec, serves_mpijob).map_err(RunError::Setup)?;
    let shape = Shape::new(launcher, &spec.name);
    let deadline_seconds = limit.as_secs().max(1);
    // Per unit: each unit's nodes by its label, in turn. Else the whole pool, once.
    let unit_list: Vec<Option<String>> = match spec.per {
        None => vec![None],
        Some(per) => units::units(per, &pool.nodes, spec.nodes)
            .map_err(|e| RunError::Setup(format!("node pool: {e}")))?
            .into_keys()
            .map(Some)
            .collect(),
    };
    let mut by_unit: Vec<(Option<String>, Vec<Repeat>)> = Vec::new();
    let mut mains: Vec<Json> = Vec::new();
    let mut per_node: BTreeMap<String, NodeRecord> = BTreeMap::new();
    let mut nodes: Vec<String> = Vec::new();
    let mut started_at = String::new();
    let mut screened: Vec<prescreen::Screened> = Vec::new();
    for (u, unit) in unit_list.iter().enumerate() {
        let mut placement = pool.placement.clone();
        let mut of_unit = String::new();
        if let (Some(per), Some(unit)) = (spec.per, unit) {
            placement
                .node_selector
                .insert(per.label().to_owned(), unit.clone());
            of_unit = format!(
                " on {} {unit} ({} of {})",
                per.name(),
                u + 1,
                unit_list.len()
            );
        }
        if spec.prescreen {
            let s = screen(cluster, run, &pool, &placement, &of_unit, (deadline, limit)).await?;
            placement.hosts = s.nodes.clone();
            screened.push(s);
        }
        let mut main = match launcher {
            Launcher::Pods => render::job(spec, &placement, deadline_seconds),
            Launcher::Gpufleet => launch::gpufleet_job(spec, &placement, deadline_seconds),
            Launcher::MpiOperator => launch::mpijob(spec, &placement, deadline_seconds),
        };
        let hash = super::environment::sha256_hex(main.to_string().as_bytes());
        main["metadata"]["annotations"] = serde_json::json!({ SPEC_HASH_ANNOTATION: hash });
        let launch = Launch {
            launcher,
            shape: &shape,
            main: &main,
            hash: &hash,
            serves_mpijob,
            deadline,
            limit,
        };
        let mut repeats: Vec<Repeat> = Vec::new();
        for i in 0..spec.repeats {
            let first = u == 0 && i == 0;
            // A prescreened run never takes over a leftover: it was screened anew.
            let may_adopt = first && !spec.prescreen;
            let (adopted, created_at) = start(cluster, run, &launch, may_adopt).await?;
            if first {
                started_at = created_at;
            }
            let repeat = if spec.repeats > 1 {
                format!(" (repeat {} of {})", i + 1, spec.repeats)
            } else {
                String::new()
            };
            progress(format!(
                "{} {} {}{of_unit}{repeat} ({} node(s), {} launcher); waiting for its pods to start",
                if adopted { "took over" } else { "created" },
                shape.main_kind().kind(),
                shape.name,
                spec.nodes,
                launcher_name(launcher)
            ));
            let more = i + 1 < spec.repeats || u + 1 < unit_list.len();
            let mut repeat = one_repeat(cluster, run, &launch, &pool, started, more).await?;
            // Environment: GPU facts from the nodes the pods ran on, over every repeat and
            // unit. Numbers from nodes of different setups compare what no one setup gave:
            // stop at the first repeat that shows it.
            for n in &repeat.observed.nodes {
                if !nodes.contains(n) {
                    nodes.push(n.clone());
                }
            }
            per_node.append(&mut repeat.per_node);
            let differences = node_differences(&per_node, &spec.allow_node_differences);
            if !differences.is_empty() {
                return Err(RunError::MixedNodes(describe_differences(&differences)).into());
            }
            repeats.push(repeat);
        }
        mains.push(main);
        by_unit.push((unit.clone(), repeats));
    }
    let repeats: Vec<&Repeat> = by_unit.iter().flat_map(|(_, r)| r).collect();
    // The prescreen's facts, beside the labels' of each node it passed.
    for s in &screened {
        for (node, report) in &s.reports {
            if let Some(r) = per_node.get_mut(node) {
                r.prescreen = report.facts();
            }
        }
    }

    let first = repeats.first().map(|r| &r.observed);
    let mut env = Environment {
        kubernetes_version,
        vcluster_version,
        virtual_cluster_kubernetes_version: vc_kubernetes_version,
        nodes,
        image: spec.image.clone(),
        image_digest: first.map(|o| o.image_digest.clone()).unwrap_or_default(),
        suite: spec.suite.name().to_owned(),
        command: commands::command(spec),
        parameters: spec.parameters.clone(),
        node_count: spec.nodes,
        gpus_per_node: spec.gpus_per_node,
        node_pool_id: spec.pool.as_ref().map(|p| p.id()).unwrap_or_default(),
        sharing: pool.sharing,
        started_at,
        finished_at: repeats
            .last()
            .map(|r| r.finished_at.clone())
            .unwrap_or_else(now),
        gpu_operator_version,
        device_plugin_version,
        launcher: launcher_name(launcher).to_owned(),
        per_node,
        ..Environment::default()
    };
    env.summarise_nodes();

    let left = repeats
        .iter()
        .find_map(|r| r.left.as_ref().map(ToString::to_string));
    drop(repeats);
    if let Some(key) = run.endpoint_api_key {
        for (_, repeats) in &mut by_unit {
            for r in repeats {
                r.observed.redact(key);
            }
        }
    }
    let units: Vec<UnitRuns> = by_unit
        .iter()
        .map(|(unit, repeats)| UnitRuns {
            unit: unit.clone(),
            runs: repeats.iter().map(|r| (&r.observed, r.completed)).collect(),
        })
        .collect();
    let (mut state, mut diagnostics) = record_run(planned, spec, launcher, &units, env);
    // The archive's repeats are numbered over the units, in turn.
    let mut logs: Vec<RepeatLogs> = by_unit
        .iter()
        .flat_map(|(_, repeats)| repeats.iter().map(|r| r.observed.archive_logs()))
        .collect();
    if let Some(first) = logs.first_mut() {
        first.prescreen = screened
            .iter()
            .flat_map(|s| s.logs.iter().map(|(p, l)| (p.as_str(), l.as_str())))
            .collect();
    }
    // The object sent, or per unit each unit's.
    let objects = match (&mains[..], spec.per) {
        ([main], None) => main.clone(),
        (mains, _) => Json::Object(
            unit_list
                .iter()
                .zip(mains)
                .map(|(u, m)| (u.clone().unwrap_or_default(), m.clone()))
                .collect(),
        ),
    };
    match keep_archive(cluster, spec, run.keeper, &state, &objects, &logs).await {
        Ok((archive, stale_left)) => {
            progress(format!(
                "archive kept in ConfigMap(s) {} of {}",
                archive.names().join(", "),
                spec.namespace
            ));
            state.set_attr(ARCHIVE, archive.to_value());
            if let Some(e) = stale_left {
                diagnostics.push(Diagnostic::warning(
                    "Benchmark Archive Parts Left",
                    format!(
                        "{TYPE_NAME} {:?}: the archive is kept, but parts of an earlier, \
                         larger one could not be removed ({e}); destroy removes them.",
                        spec.name
                    ),
                ));
            }
        }
        Err(e) => {
            state.set_attr(ARCHIVE, Value::Null);
            diagnostics.push(Diagnostic::warning(
                "Benchmark Archive Not Kept",
                format!(
                    "{TYPE_NAME} {:?}: the run is recorded, but its archive (every pod's \
                     log, the objects and the record) could not be written to ConfigMaps in \
                     {}: {e}.",
                    spec.name, spec.namespace
                ),
            ));
        }
    }
    if let Some(e) = left {
        diagnostics.push(Diagnostic::warning(
            "Benchmark Objects Left Behind",
            format!(
                "{TYPE_NAME} {:?}: the run is recorded, but its Job, Service or pods in {} \
                 could not be removed ({e}). Destroy removes them.",
                spec.name, spec.namespace
            ),
        ));
    }
    Ok(ApplyResponse {
        new_state: state,
        diagnostics,
    })
}

/// The prescreen of one unit (or of the whole run): everything of the run's removed first,
/// then [`prescreen::screen`] on `placement`, said to `progress`.
async fn screen(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    pool: &PoolInfo,
    placement: &render::Placement,
    of_unit: &str,
    (deadline, limit): (Instant, Duration),
) -> Result<prescreen::Screened, StepError> {
    let Run { spec, progress, .. } = *run;
    cleanup(cluster, &spec.namespace, &spec.name).await?;
    progress(format!(
        "prescreening {} node(s){of_unit}: nvidia-smi, topology, InfiniBand, kernel command \
         line, NCCL environment",
        spec.nodes
    ));
    let labelled: BTreeMap<String, String> = pool
        .nodes
        .iter()
        .map(|(n, l)| (n.clone(), NodeRecord::from_labels(l).driver_version))
        .collect();
    let s = prescreen::screen(
        cluster,
        spec,
        placement,
        &labelled,
        (Instant::now(), deadline, limit),
    )
    .await?;
    progress(format!("prescreen passed on {}", s.nodes.join(", ")));
    Ok(s)
}

/// What every repeat of a run launches.
struct Launch<'a> {
    launcher: Launcher,
    shape: &'a Shape,
    /// The Job or MPIJob, with its spec hash annotation.
    main: &'a Json,
    hash: &'a str,
    serves_mpijob: bool,
    /// The end of the create timeout `limit`.
    deadline: Instant,
    limit: Duration,
}

/// Step 2: takes over a leftover of the same configuration (a run whose provider was killed)
/// when `may_adopt`, or removes any other and creates the run's objects. Returns whether it took over, and when
/// the run started.
async fn start(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    launch: &Launch<'_>,
    may_adopt: bool,
) -> Result<(bool, String), StepError> {
    let Run {
        spec,
        endpoint_api_key,
        ..
    } = *run;
    let Launch {
        launcher,
        shape,
        main,
        hash,
        serves_mpijob,
        deadline,
        limit,
    } = *launch;
    let (kind, name) = (shape.main_kind(), shape.name.clone());
    let existing = cluster.get(kind, Some(&spec.namespace), &name).await?;
    // Only a run's first repeat takes over a leftover: a later one would take its
    // predecessor's finished Job for itself.
    let adopt = may_adopt
        && existing.as_ref().is_some_and(|j| {
            j.pointer("/metadata/annotations")
                .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
                .and_then(Json::as_str)
                == Some(hash)
        });
    // A run of the other launcher (the configuration or the cluster changed) is a leftover too.
    let other = match kind {
        ObjectKind::MpiJob => Some(ObjectKind::Job),
        _ if serves_mpijob => Some(ObjectKind::MpiJob),
        _ => None,
    };
    let mut stray = false;
    if let Some(other) = other {
        stray = cluster
            .get(other, Some(&spec.namespace), &name)
            .await?
            .is_some();
    }
    let started_at = match (&existing, adopt) {
        (Some(j), true) => str_at(j, "/metadata/creationTimestamp").map_or_else(now, str::to_owned),
        _ => now(),
    };
    if !adopt {
        if existing.is_some() || stray {
            // A leftover of another configuration: a template cannot change in place.
            cleanup(cluster, &spec.namespace, &spec.name).await?;
            let kinds: Vec<ObjectKind> = std::iter::once(kind).chain(other).collect();
            wait_run_gone(cluster, spec, &kinds, &name, deadline, limit).await?;
        }
        if launcher == Launcher::Gpufleet
            && cluster
                .get(
                    ObjectKind::Secret,
                    Some(&spec.namespace),
                    &launch::ssh_secret_name(&spec.name),
                )
                .await?
                .is_none()
        {
            let keys =
                super::ssh_keys::generate(&name).map_err(|e| RunError::Setup(e.to_string()))?;
            cluster.apply(&launch::ssh_secret(spec, &keys)).await?;
        }
        // The MPI Operator makes the workers' Service itself.
        if launcher != Launcher::MpiOperator
            && let Some(svc) = render::service(spec)
        {
            cluster.apply(&svc).await?;
        }
        if let Some(key) = endpoint_api_key {
            cluster.apply(&render::endpoint_secret(spec, key)).await?;
        }
        cluster.apply(main).await?;
    } else if let Some(key) = endpoint_api_key {
        // The run of a killed provider, taken over: its key may have gone with a cleanup.
        cluster.apply(&render::endpoint_secret(spec, key)).await?;
    }
    tracing::info!(
        target: "gpufleet::benchmark",
        "{} {} {} in {} ({} node(s), {:?} launcher)",
        if adopt { "adopted" } else { "created" },
        kind.kind(),
        name,
        spec.namespace,
        spec.nodes,
        launcher
    );
    Ok((adopt, started_at))
}

/// Waits until no object of `kinds` named `name` is left in the run's namespace, then until
/// its pods are gone (they outlive it by their grace period, with the same names), within
/// the create timeout `limit` ending at `deadline`.
async fn wait_run_gone(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    kinds: &[ObjectKind],
    name: &str,
    deadline: Instant,
    limit: Duration,
) -> Result<(), StepError> {
    for k in kinds {
        while cluster
            .get(*k, Some(&spec.namespace), name)
            .await?
            .is_some()
        {
            if Instant::now() >= deadline {
                return Err(StepError::TimedOut {
                    op: Operation::Create,
                    waited: limit,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
    wait_pods_gone(
        cluster,
        &spec.namespace,
        &spec.name,
        deadline.saturating_duration_since(Instant::now()),
    )
    .await?;
    Ok(())
}

/// What one repeat gave.
struct Repeat {
    observed: Observed,
    /// Whether its Job succeeded.
    completed: bool,
    /// The facts of the nodes it ran on.
    per_node: BTreeMap<String, NodeRecord>,
    finished_at: String,
    /// Why its objects could not be removed, if they could not.
    left: Option<ObjectError>,
}

/// Steps 3 to 6 of one repeat: the gang starts, the Job ends, its logs are read and its
/// objects removed (and, when `more` repeats follow, waited out, so the next one's pods are
/// not taken for this one's).
async fn one_repeat(
    cluster: &dyn HostObjects,
    run: &Run<'_>,
    launch: &Launch<'_>,
    pool: &PoolInfo,
    started: Instant,
    more: bool,
) -> Result<Repeat, StepError> {
    let Run { spec, progress, .. } = *run;
    let Launch {
        shape,
        deadline,
        limit,
        ..
    } = *launch;
    // The gang deadline counts from the creation, not from waiting out a leftover.
    let gang_deadline = (Instant::now() + spec.start_timeout).min(deadline);
    let pool_size = spec.pool.as_ref().map(|_| pool.nodes.len());
    let gang = wait_gang(cluster, spec, shape, started, gang_deadline, pool_size).await?;
    // A gang of mixed setups would report a result neither setup has: stop it now.
    let gang_records = node_records(cluster, pool, &gang).await?;
    let differences = node_differences(&gang_records, &spec.allow_node_differences);
    if !differences.is_empty() {
        return Err(RunError::MixedNodes(describe_differences(&differences)).into());
    }
    if !gang.is_empty() {
        progress(format!("running on {}", gang.join(", ")));
    }
    let completed = wait_done(cluster, spec, shape, deadline, limit).await?;
    progress(format!(
        "finished after {}s; reading the results",
        started.elapsed().as_secs()
    ));
    let observed = observe(cluster, spec, shape, &gang).await?;
    let finished_at = now();
    // The run is recorded either way; what could not be removed waits for destroy (or the
    // next run of the same name, which takes it over), and the user is told.
    let left = match cleanup(cluster, &spec.namespace, &spec.name).await {
        Ok(()) => None,
        // The next repeat would find this one's Job and take it for a run to adopt.
        Err(e) if more => return Err(e.into()),
        Err(e) => Some(e),
    };
    if more {
        wait_run_gone(
            cluster,
            spec,
            &[shape.main_kind()],
            &shape.name,
            deadline,
            limit,
        )
        .await?;
    }
    // The gang's nodes, unless it was not seen forming (an adopted run that had finished).
    let per_node = if observed.nodes == gang {
        gang_records
    } else {
        node_records(cluster, pool, &observed.nodes).await?
    };
    Ok(Repeat {
        observed,
        completed,
        per_node,
        finished_at,
        left,
    })
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
