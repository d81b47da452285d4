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
//!    `start_timeout`; otherwise everything is deleted and the run fails, naming the pods that did not start and why.
//! 4. Wait for the Job to complete or fail, within the create timeout.
//! 5. Read pod 0's log (the termination message when the log cannot be read), parse it.
//! 6. Delete the Job, its pods and the Service: the resource is the record.
//!
//! Runs on the same pool take turns within one provider process ([`take_turn`]).
//!
//! Terraform's stop request ends any wait at once; what was created is deleted then too.

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock, PoisonError},
    time::Duration,
};

use bigdecimal::BigDecimal;
use serde_json::Value as Json;
use tokio::time::Instant;

use crate::{
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
        json::{labels_of, str_at},
    },
    benchmark::{Details, Parsed},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ApplyResponse,
    tenancy::pool_label,
    timeouts::{self, Timeouts},
    value::Value,
};

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    environment::{Environment, NodeRecord, node_differences},
    launch::{self, Launcher},
    ranks,
    render::{self, Placement, SPEC_HASH_ANNOTATION, Toleration},
    schema::RAW_OUTPUT_MAX,
    shape::{Shape, index_of},
    spec::{BenchmarkSpec, OnFailure},
    thresholds,
};

/// How often pods and the Job are polled.
const POLL: Duration = Duration::from_millis(500);

/// Prefix of `failures` entries that come from thresholds (the rest are the tool's verdict).
pub const THRESHOLD_PREFIX: &str = "threshold: ";

/// Why a run stopped before it had output to record.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A cluster call failed.
    #[error(transparent)]
    Cluster(#[from] ObjectError),
    /// The objects the run needs are missing or wrong.
    #[error("{0}")]
    Setup(String),
    /// Not every pod started within the gang deadline.
    #[error("not every pod was running within start_timeout ({waited}): {pending}")]
    GangStart {
        /// How long the run waited.
        waited: String,
        /// The pods that did not start, and why.
        pending: String,
    },
    /// The pods of a gang ran one after another instead of together.
    #[error(
        "the {nodes} pods did not run together ({detail}); a run of nodes = {nodes} needs {nodes} free nodes of the pool at once"
    )]
    GangBroken {
        /// How many pods the gang has.
        nodes: u32,
        /// What showed it.
        detail: String,
    },
    /// The create timeout passed.
    #[error("the Job did not finish within the create timeout ({0})")]
    TimedOut(String),
    /// Terraform asked the provider to stop.
    #[error("stopped because Terraform asked the provider to stop")]
    Cancelled,
    /// The gang's nodes differ in a compared field.
    #[error(
        "the run's nodes differ in {0}; a result across them would mix two setups. List the \
         field in allow_node_differences to run on them anyway"
    )]
    MixedNodes(String),
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

/// The record of each node, from the pool's listing (or read, for a node that left it).
async fn node_records(
    cluster: &dyn HostObjects,
    pool: &PoolInfo,
    nodes: &[String],
) -> Result<BTreeMap<String, NodeRecord>, RunError> {
    let mut records = BTreeMap::new();
    for n in nodes {
        let labels = match pool.nodes.get(n) {
            Some(l) => l.clone(),
            None => cluster
                .get(ObjectKind::Node, None, n)
                .await?
                .map(|o| labels_of(&o))
                .unwrap_or_default(),
        };
        records.insert(n.clone(), NodeRecord::from_labels(&labels));
    }
    Ok(records)
}

/// The GPU Operator's release and the device plugin's, from the one ClusterPolicy: its Helm
/// chart's `app.kubernetes.io/version` label and `spec.devicePlugin.version`. Empty when the
/// cluster has no GPU Operator. Read before the run, so a failed read costs no GPU time.
async fn gpu_operator_versions(cluster: &dyn HostObjects) -> Result<(String, String), RunError> {
    if !cluster.serves(ObjectKind::ClusterPolicy).await? {
        return Ok(Default::default());
    }
    let policies = cluster.list(ObjectKind::ClusterPolicy, None, "").await?;
    let [policy] = policies.as_slice() else {
        return Ok(Default::default());
    };
    let operator = labels_of(policy)
        .get("app.kubernetes.io/version")
        .cloned()
        .unwrap_or_default();
    let plugin = str_at(policy, "/spec/devicePlugin/version")
        .unwrap_or_default()
        .to_owned();
    Ok((operator, plugin))
}

/// What the tool's own output adds to the record: its versions and, for an MPI run, the world
/// it shows (a world that is not the run's is a failure: its numbers are not the gang's).
fn record_tool_facts(
    env: &mut Environment,
    spec: &BenchmarkSpec,
    launcher: Launcher,
    gang: &[String],
    parsed: &Parsed,
    failures: &mut Vec<String>,
) {
    let taken = env.to_map();
    for (k, v) in &parsed.versions {
        // The node's driver and CUDA come from its labels; the tool's own say are kept apart.
        let key = if taken.contains_key(k) {
            format!("reported_{k}")
        } else {
            k.clone()
        };
        env.tool_versions.insert(key, v.clone());
    }
    let Details::NcclAllReduce(details) = &parsed.details else {
        return;
    };
    if details.ranks.is_empty() {
        return;
    }
    env.ranks = details.ranks.len().to_string();
    env.ranks_by_host = ranks::by_host(details)
        .iter()
        .map(|(h, r)| format!("{h}: {}", ranks::ranges(r)))
        .collect::<Vec<_>>()
        .join("; ");
    if launch::is_mpi(spec) {
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

fn launcher_name(launcher: Launcher) -> &'static str {
    match launcher {
        Launcher::Pods => "pods",
        Launcher::MpiOperator => "mpi-operator",
        Launcher::Gpufleet => "gpufleet",
    }
}

/// What the pool lends the run.
#[derive(Debug, Default)]
struct PoolInfo {
    placement: Placement,
    nodes: BTreeMap<String, BTreeMap<String, String>>,
    sharing: String,
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The pool's nodes, placement and sharing mode.
async fn pool_info(cluster: &dyn HostObjects, spec: &BenchmarkSpec) -> Result<PoolInfo, RunError> {
    let Some(pool) = &spec.pool else {
        return Ok(PoolInfo {
            sharing: "none".to_owned(),
            ..PoolInfo::default()
        });
    };
    let label = pool_label(&pool.vc.name, &pool.name);
    let selector = format!("{}={label}", crate::backends::kube::POOL);
    let nodes = cluster.list(ObjectKind::Node, None, &selector).await?;
    if nodes.is_empty() {
        return Err(RunError::Setup(format!(
            "node pool {} has no nodes (none is labelled {selector}).",
            pool.id()
        )));
    }
    let mut extra = Vec::new();
    for n in &nodes {
        for t in n
            .pointer("/spec/taints")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let effect = str_at(t, "/effect").unwrap_or_default();
            if effect == "NoSchedule" || effect == "NoExecute" {
                extra.push(Toleration {
                    key: str_at(t, "/key").unwrap_or_default().to_owned(),
                    value: str_at(t, "/value").map(str::to_owned),
                    effect: effect.to_owned(),
                });
            }
        }
    }
    let by_name: BTreeMap<String, BTreeMap<String, String>> = nodes
        .iter()
        .map(|n| {
            (
                str_at(n, "/metadata/name").unwrap_or_default().to_owned(),
                labels_of(n),
            )
        })
        .collect();
    let first = by_name.values().next().cloned().unwrap_or_default();
    let sharing = if let Some(c) = first.get("nvidia.com/mig.config") {
        format!("mig:{c}")
    } else if let Some(c) = first.get("nvidia.com/device-plugin.config") {
        format!("time-slicing:{c}")
    } else {
        "none".to_owned()
    };
    Ok(PoolInfo {
        placement: Placement::on_pool(&label, &pool.vc.name, &extra),
        nodes: by_name,
        sharing,
    })
}

/// The virtual cluster's vCluster and Kubernetes versions, from its StatefulSet's images.
async fn vc_versions(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
) -> Result<(String, String), RunError> {
    let Some(vc) = &spec.vc else {
        return Ok(Default::default());
    };
    let Some(sts) = cluster
        .get(ObjectKind::StatefulSet, Some(&vc.namespace), &vc.name)
        .await?
    else {
        return Ok(Default::default());
    };
    let tag = |path: &str, container: &str| {
        sts.pointer(path)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .find(|c| str_at(c, "/name") == Some(container))
            .and_then(|c| str_at(c, "/image"))
            .and_then(|i| i.rsplit_once(':'))
            .map(|(_, t)| t.to_owned())
            .unwrap_or_default()
    };
    Ok((
        tag("/spec/template/spec/containers", "syncer"),
        tag("/spec/template/spec/initContainers", "kubernetes"),
    ))
}

/// Deletes everything a benchmark made in `namespace`: Job, Service and any pod left.
pub async fn cleanup(
    cluster: &dyn HostObjects,
    namespace: &str,
    name: &str,
) -> Result<(), ObjectError> {
    let job = render::job_name(name);
    cluster
        .delete(ObjectKind::Job, Some(namespace), &job)
        .await?;
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
    cluster
        .delete(
            ObjectKind::Secret,
            Some(namespace),
            &launch::ssh_secret_name(name),
        )
        .await?;
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

/// Waits until no pod of the benchmark is left, polling within `limit`.
async fn wait_pods_gone(
    cluster: &dyn HostObjects,
    namespace: &str,
    name: &str,
    limit: Duration,
) -> Result<(), ObjectError> {
    let until = Instant::now() + limit;
    loop {
        let left = cluster
            .list(
                ObjectKind::Pod,
                Some(namespace),
                &render::owner_selector(name),
            )
            .await?;
        if left.is_empty() || Instant::now() >= until {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

fn phase(pod: &Json) -> &str {
    str_at(pod, "/status/phase").unwrap_or("Pending")
}

/// Why a pod is not running yet: the scheduler's message when it has one.
fn pending_reason(pod: &Json) -> String {
    let name = str_at(pod, "/metadata/name").unwrap_or("?");
    let msg = pod
        .pointer("/status/conditions")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .find(|c| {
            str_at(c, "/type") == Some("PodScheduled") && str_at(c, "/status") == Some("False")
        })
        .and_then(|c| str_at(c, "/message"));
    match msg {
        Some(m) => format!("{name} ({m})"),
        None => format!("{name} ({})", phase(pod)),
    }
}

/// The run's pods matching `selector`, in index order. Pods being deleted are left out: they
/// belong to a run this one replaced (or to the run's own cleanup) and carry the same names.
async fn run_pods(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    selector: &str,
) -> Result<Vec<Json>, ObjectError> {
    let mut pods: Vec<Json> = cluster
        .list(ObjectKind::Pod, Some(&spec.namespace), selector)
        .await?
        .into_iter()
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .collect();
    pods.sort_by_key(index_of);
    Ok(pods)
}

fn unschedulable(pod: &Json) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            str_at(c, "/type") == Some("PodScheduled") && str_at(c, "/status") == Some("False")
        })
}

/// Whether a gang of `nodes` pods has started: `Ok(true)` once that many pods run (or ran)
/// on as many distinct nodes. The anti-affinity keeps pods that run at once on distinct
/// nodes, but not a pod from the node of a peer that has already finished; so a pod that
/// finished while a peer could not be scheduled, or two pods on one node, mean the pods ran
/// one after another: the run is broken (`Err`, saying what showed it).
fn gang_progress(pods: &[Json], nodes: u32) -> Result<bool, String> {
    let name = |p: &Json| str_at(p, "/metadata/name").unwrap_or("?").to_owned();
    let mut by_node: BTreeMap<&str, String> = BTreeMap::new();
    for p in pods {
        if let Some(node) = str_at(p, "/spec/nodeName")
            && let Some(other) = by_node.insert(node, name(p))
        {
            return Err(format!("{other} and {} both ran on {node}", name(p)));
        }
    }
    if nodes > 1
        && let Some(done) = pods
            .iter()
            .find(|p| matches!(phase(p), "Succeeded" | "Failed"))
        && let Some(waiting) = pods.iter().find(|p| unschedulable(p))
    {
        return Err(format!(
            "{} finished while {} could not be scheduled",
            name(done),
            name(waiting)
        ));
    }
    let started = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Succeeded" | "Failed"))
        .count();
    Ok(started >= nodes as usize)
}

/// The nodes of a gang's pods, in index order.
fn nodes_of(pods: &[Json]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| str_at(p, "/spec/nodeName"))
        .map(str::to_owned)
        .collect()
}

/// Step 3: all pods running (or done) together before the gang deadline. Returns the nodes
/// they run on, in index order (MPI workers are gone once the launcher is done, so this is
/// when they are known); empty when the run failed before the gang formed.
async fn wait_gang(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    shape: &Shape,
    started: Instant,
    deadline: Instant,
    pool_size: Option<usize>,
) -> Result<Vec<String>, RunError> {
    loop {
        // A pod that failed at once fails the run (no retries): record that failure, rather
        // than wait for peers the controller will not start.
        if let Some(main) = cluster
            .get(shape.main_kind(), Some(&spec.namespace), &shape.name)
            .await?
            && let Some(outcome) = shape.outcome(&main)
        {
            let pods = run_pods(cluster, spec, &shape.gang_selector()).await?;
            return Ok(if outcome { nodes_of(&pods) } else { Vec::new() });
        }
        let pods = run_pods(cluster, spec, &shape.gang_selector()).await?;
        match gang_progress(&pods, spec.nodes) {
            Ok(true) => return Ok(nodes_of(&pods)),
            Ok(false) => {}
            Err(detail) => {
                return Err(RunError::GangBroken {
                    nodes: spec.nodes,
                    detail,
                });
            }
        }
        if Instant::now() >= deadline {
            let mut pending: Vec<String> = pods
                .iter()
                .filter(|p| phase(p) == "Pending")
                .map(pending_reason)
                .collect();
            if pods.len() < spec.nodes as usize {
                pending.push(format!(
                    "{} of {} pods were not created",
                    spec.nodes as usize - pods.len(),
                    spec.nodes
                ));
            }
            if let Some(n) = pool_size
                && n < spec.nodes as usize
            {
                pending.push(format!(
                    "the pool has {n} node(s) and the run asks for {}, one pod per node",
                    spec.nodes
                ));
            }
            return Err(RunError::GangStart {
                waited: timeouts::render(Duration::from_secs(started.elapsed().as_secs())),
                pending: pending.join("; "),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Step 4: the run's final condition, `true` when it succeeded.
async fn wait_done(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    shape: &Shape,
    deadline: Instant,
    limit: Duration,
) -> Result<bool, RunError> {
    let (kind, name) = (shape.main_kind(), &shape.name);
    loop {
        let main = cluster
            .get(kind, Some(&spec.namespace), name)
            .await?
            .ok_or_else(|| {
                RunError::Setup(format!(
                    "{} {name} disappeared during the run.",
                    kind.kind()
                ))
            })?;
        if let Some(ok) = shape.outcome(&main) {
            return Ok(ok);
        }
        if Instant::now() >= deadline {
            return Err(RunError::TimedOut(timeouts::render(limit)));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What step 5 read from the pods.
#[derive(Debug, Default)]
struct Observed {
    log: String,
    nodes: Vec<String>,
    image_digest: String,
    exit_codes: Vec<(String, i64)>,
}

/// Step 5: the result pod's log, the image it ran and the exit codes that count; `gang`
/// are the nodes seen at gang start (the pods may be gone by now).
async fn observe(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    shape: &Shape,
    gang: &[String],
) -> Result<Observed, RunError> {
    let pods = run_pods(cluster, spec, &shape.log_selector()).await?;
    let mut o = Observed {
        nodes: gang.to_vec(),
        ..Observed::default()
    };
    if o.nodes.is_empty() {
        o.nodes = nodes_of(&run_pods(cluster, spec, &shape.gang_selector()).await?);
    }
    for p in &pods {
        let status = p
            .pointer("/status/containerStatuses/0")
            .cloned()
            .unwrap_or_default();
        if o.image_digest.is_empty() {
            o.image_digest = str_at(&status, "/imageID").unwrap_or_default().to_owned();
        }
        if !shape.exit_code_counts(p) {
            continue;
        }
        if let Some(code) = status
            .pointer("/state/terminated/exitCode")
            .and_then(Json::as_i64)
        {
            o.exit_codes.push((
                str_at(p, "/metadata/name").unwrap_or_default().to_owned(),
                code,
            ));
        }
    }
    let Some(first) = pods.first() else {
        return Err(RunError::Setup(format!(
            "{} {} finished without a pod to read.",
            shape.main_kind().kind(),
            shape.name
        )));
    };
    let pod = str_at(first, "/metadata/name").unwrap_or_default();
    let message = str_at(
        first,
        "/status/containerStatuses/0/state/terminated/message",
    )
    .unwrap_or_default()
    .to_owned();
    o.log = match cluster.logs(&spec.namespace, pod, spec.suite.name()).await {
        Ok(log) if !log.trim().is_empty() => log,
        Ok(_) if !message.is_empty() => message,
        Err(e) if !message.is_empty() => {
            tracing::info!(target: "gpufleet::benchmark", "{e}; using the termination message");
            message
        }
        Ok(log) => log,
        Err(e) => return Err(e.into()),
    };
    Ok(o)
}

/// The end of `log`, at most [`RAW_OUTPUT_MAX`] bytes, cut at a character boundary.
pub fn tail(log: &str) -> String {
    if log.len() <= RAW_OUTPUT_MAX {
        return log.to_owned();
    }
    let mut start = log.len() - RAW_OUTPUT_MAX;
    while !log.is_char_boundary(start) {
        start += 1;
    }
    log[start..].to_owned()
}

/// The verdict of a run from its results: tool failures plus broken thresholds.
pub fn verdict(
    tool_failures: &[String],
    results: &BTreeMap<String, BigDecimal>,
    spec: &BenchmarkSpec,
) -> Vec<String> {
    let mut failures = tool_failures.to_vec();
    failures.extend(
        thresholds::violations(results, &spec.thresholds)
            .iter()
            .map(|v| format!("{THRESHOLD_PREFIX}{v}")),
    );
    failures
}

/// The state of a recorded run, and the error `on_failure = "fail"` asks for.
pub fn record(
    planned: &Value,
    spec: &BenchmarkSpec,
    results: &BTreeMap<String, BigDecimal>,
    failures: &[String],
) -> (Value, Diagnostics) {
    let mut s = planned.clone();
    s.set_attr("id", Value::string(spec.id()));
    s.set_attr(
        "results",
        Value::Map(
            results
                .iter()
                .map(|(k, v)| (k.clone(), Value::Number(v.clone())))
                .collect(),
        ),
    );
    s.set_attr(
        "failures",
        Value::List(failures.iter().map(Value::string).collect()),
    );
    let passed = failures.is_empty();
    s.set_attr(
        "status",
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

/// Runs the benchmark of `planned` and returns its record.
pub async fn run(cluster: &dyn HostObjects, ctx: &Context, planned: &Value) -> ApplyResponse {
    let spec = match BenchmarkSpec::from_value(planned) {
        Ok(s) => s,
        Err(diagnostics) => {
            return ApplyResponse {
                new_state: Value::Null,
                diagnostics,
            };
        }
    };
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let done = ctx
        .cancel
        .run_until_cancelled(async {
            // Within this process first (no polling), then across processes on the pool's
            // Lease.
            let _turn = take_turn(&spec).await;
            let held = match &spec.pool {
                Some(pool) => match cluster
                    .take_turn(super::turn_name::turn_lease(pool), &ctx.cancel)
                    .await
                {
                    Ok(held) => Some(held),
                    Err(e) => return failed(cluster, &spec, &t, e.into()).await,
                },
                None => None,
            };
            // The create timeout counts from the run's turn, not from the wait for it.
            let started = Instant::now();
            let deadline = started + t.create;
            let response = match execute(cluster, &spec, planned, started, deadline, t.create).await
            {
                Ok(response) => response,
                // Cleaned up before the turn passes on: the next run finds the nodes free.
                Err(e) => failed(cluster, &spec, &t, e).await,
            };
            if let Some(held) = held {
                held.release().await;
            }
            response
        })
        .await;
    match done {
        Some(response) => response,
        None => failed(cluster, &spec, &t, RunError::Cancelled).await,
    }
}

/// The response of a run that did not finish: nothing of it is kept.
async fn failed(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    t: &Timeouts,
    e: RunError,
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
            format!("{TYPE_NAME} {:?}: {e}. {removed}", spec.name),
        )
        .into(),
    }
}

async fn execute(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    planned: &Value,
    started: Instant,
    deadline: Instant,
    limit: Duration,
) -> Result<ApplyResponse, RunError> {
    if cluster
        .get(ObjectKind::Namespace, None, &spec.namespace)
        .await?
        .is_none()
    {
        return Err(RunError::Setup(format!(
            "namespace {} does not exist",
            spec.namespace
        )));
    }
    let kubernetes_version = cluster.server_version().await?;
    let (vcluster_version, vc_kubernetes_version) = vc_versions(cluster, spec).await?;
    let pool = pool_info(cluster, spec).await?;
    let (gpu_operator_version, device_plugin_version) = gpu_operator_versions(cluster).await?;

    let serves_mpijob = launch::is_mpi(spec) && cluster.serves(ObjectKind::MpiJob).await?;
    let launcher = launch::choose(spec, serves_mpijob).map_err(RunError::Setup)?;
    let shape = Shape::new(launcher, &spec.name);
    let deadline_seconds = limit.as_secs().max(1);
    let mut main = match launcher {
        Launcher::Pods => render::job(spec, &pool.placement, deadline_seconds),
        Launcher::Gpufleet => launch::gpufleet_job(spec, &pool.placement, deadline_seconds),
        Launcher::MpiOperator => launch::mpijob(spec, &pool.placement, deadline_seconds),
    };
    let hash = super::environment::sha256_hex(main.to_string().as_bytes());
    main["metadata"]["annotations"] = serde_json::json!({ SPEC_HASH_ANNOTATION: hash });
    let (kind, name) = (shape.main_kind(), shape.name.clone());
    let existing = cluster.get(kind, Some(&spec.namespace), &name).await?;
    let adopt = existing.as_ref().is_some_and(|j| {
        j.pointer("/metadata/annotations")
            .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
            .and_then(Json::as_str)
            == Some(hash.as_str())
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
            for k in std::iter::once(kind).chain(other) {
                while cluster
                    .get(k, Some(&spec.namespace), &name)
                    .await?
                    .is_some()
                {
                    if Instant::now() >= deadline {
                        return Err(RunError::TimedOut(timeouts::render(limit)));
                    }
                    tokio::time::sleep(POLL).await;
                }
            }
            // Its pods outlive it by their grace period, with the same names.
            wait_pods_gone(
                cluster,
                &spec.namespace,
                &spec.name,
                deadline.saturating_duration_since(Instant::now()),
            )
            .await?;
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
        cluster.apply(&main).await?;
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

    // The gang deadline counts from the creation, not from waiting out a leftover.
    let gang_deadline = (Instant::now() + spec.start_timeout).min(deadline);
    let pool_size = spec.pool.as_ref().map(|_| pool.nodes.len());
    let gang = wait_gang(cluster, spec, &shape, started, gang_deadline, pool_size).await?;
    // A gang of mixed setups would report a result neither setup has: stop it now.
    let gang_records = node_records(cluster, &pool, &gang).await?;
    let differences = node_differences(&gang_records, &spec.allow_node_differences);
    if !differences.is_empty() {
        return Err(RunError::MixedNodes(describe_differences(&differences)));
    }
    let completed = wait_done(cluster, spec, &shape, deadline, limit).await?;
    let observed = observe(cluster, spec, &shape, &gang).await?;
    let finished_at = now();
    // The run is recorded either way; what could not be removed waits for destroy (or the
    // next run of the same name, which takes it over), and the user is told.
    let left = cleanup(cluster, &spec.namespace, &spec.name).await.err();

    // Environment: GPU facts from the nodes the pods ran on.
    // The gang's nodes, unless it was not seen forming (an adopted run that had finished).
    let per_node = if observed.nodes == gang {
        gang_records
    } else {
        node_records(cluster, &pool, &observed.nodes).await?
    };
    let mut env = Environment {
        kubernetes_version,
        vcluster_version,
        virtual_cluster_kubernetes_version: vc_kubernetes_version,
        nodes: observed.nodes.clone(),
        image: spec.image.clone(),
        image_digest: observed.image_digest.clone(),
        suite: spec.suite.name().to_owned(),
        command: render::command(spec),
        parameters: spec.parameters.clone(),
        node_count: spec.nodes,
        gpus_per_node: spec.gpus_per_node,
        node_pool_id: spec.pool.as_ref().map(|p| p.id()).unwrap_or_default(),
        sharing: pool.sharing,
        started_at: started_at.clone(),
        finished_at: finished_at.clone(),
        gpu_operator_version,
        device_plugin_version,
        launcher: launcher_name(launcher).to_owned(),
        per_node,
        ..Environment::default()
    };
    env.summarise_nodes();

    let mut tool_failures: Vec<String> = observed
        .exit_codes
        .iter()
        .filter_map(|(pod, code)| Some(format!("pod {pod} {}", spec.suite.exit_failure(*code)?)))
        .collect();
    let results = match spec.suite.parse(&observed.log) {
        Ok(parsed) => {
            tool_failures.extend(parsed.failures.iter().cloned());
            record_tool_facts(
                &mut env,
                spec,
                launcher,
                &observed.nodes,
                &parsed,
                &mut tool_failures,
            );
            parsed.metrics
        }
        Err(e) => {
            tool_failures.push(e.to_string());
            BTreeMap::new()
        }
    };
    // A failed Job whose exit codes and report explain nothing still failed.
    if !completed && tool_failures.is_empty() {
        tool_failures.push("the Job failed".to_owned());
    }
    let failures = verdict(&tool_failures, &results, spec);
    let (mut state, diagnostics) = record(planned, spec, &results, &failures);
    state.set_attr(
        "environment",
        Value::Map(
            env.to_map()
                .into_iter()
                .map(|(k, v)| (k, Value::string(v)))
                .collect(),
        ),
    );
    state.set_attr("environment_hash", Value::string(env.hash()));
    state.set_attr(
        "node_environments",
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
    state.set_attr("raw_output", Value::string(tail(&observed.log)));
    state.set_attr("started_at", Value::string(started_at));
    state.set_attr("finished_at", Value::string(finished_at));
    let mut diagnostics = diagnostics;
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

/// Step 6 for destroy: removes whatever the benchmark left, waiting for its pods to go.
pub async fn destroy(cluster: &dyn HostObjects, ctx: &Context, prior: &Value) -> ApplyResponse {
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let (Some(namespace), Some(name)) = (
        super::spec::namespace_of(prior),
        prior.get("name").as_str().map(str::to_owned),
    ) else {
        return ApplyResponse {
            new_state: Value::Null,
            diagnostics: Diagnostics::new(),
        };
    };
    let work = async {
        cleanup(cluster, &namespace, &name).await?;
        wait_pods_gone(cluster, &namespace, &name, t.delete).await
    };
    let done = ctx
        .cancel
        .run_until_cancelled(tokio::time::timeout(t.delete, work))
        .await;
    let problem = match done {
        Some(Ok(Ok(()))) => {
            return ApplyResponse {
                new_state: Value::Null,
                diagnostics: Diagnostics::new(),
            };
        }
        // A namespace that is gone took the objects with it.
        Some(Ok(Err(e))) if e.is_not_found() => {
            return ApplyResponse {
                new_state: Value::Null,
                diagnostics: Diagnostics::new(),
            };
        }
        Some(Ok(Err(e))) => e.to_string(),
        Some(Err(_)) => format!(
            "gave up after the delete timeout ({})",
            timeouts::render(t.delete)
        ),
        None => "stopped because Terraform asked the provider to stop".to_owned(),
    };
    ApplyResponse {
        new_state: prior.clone(),
        diagnostics: Diagnostic::error(
            "Benchmark Cleanup Failed",
            format!("{TYPE_NAME} {name:?}: {problem}."),
        )
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, node: Option<&str>, phase: &str, unschedulable: bool) -> Json {
        let mut p = json!({
            "metadata": { "name": name },
            "spec": {},
            "status": { "phase": phase },
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        if unschedulable {
            p["status"]["conditions"] = json!([{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available",
            }]);
        }
        p
    }

    #[test]
    fn a_gang_starts_when_every_pod_runs_on_its_own_node() {
        let pods = [
            pod("p-0", Some("a"), "Running", false),
            pod("p-1", Some("b"), "Succeeded", false),
        ];
        assert_eq!(gang_progress(&pods, 2), Ok(true));
        let waiting = [
            pod("p-0", Some("a"), "Running", false),
            pod("p-1", None, "Pending", true),
        ];
        assert_eq!(gang_progress(&waiting, 2), Ok(false));
        assert_eq!(gang_progress(&waiting[..1], 2), Ok(false));
    }

    #[test]
    fn pods_that_ran_one_after_another_break_the_gang() {
        let same_node = [
            pod("p-0", Some("a"), "Succeeded", false),
            pod("p-1", Some("a"), "Running", false),
        ];
        let err = gang_progress(&same_node, 2).expect_err("one node twice");
        assert!(err.contains("p-0 and p-1 both ran on a"), "{err}");

        let alone = [
            pod("p-0", Some("a"), "Succeeded", false),
            pod("p-1", None, "Pending", true),
        ];
        let err = gang_progress(&alone, 2).expect_err("a pod ran alone");
        assert!(
            err.contains("p-0 finished while p-1 could not be scheduled"),
            "{err}"
        );
    }

    #[test]
    fn a_single_pod_run_is_no_gang() {
        assert_eq!(
            gang_progress(&[pod("p-0", Some("a"), "Succeeded", false)], 1),
            Ok(true)
        );
        assert_eq!(
            gang_progress(&[pod("p-0", None, "Pending", true)], 1),
            Ok(false)
        );
    }
}
