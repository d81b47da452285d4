//! `gpufleet_benchmark` runs end to end against an in-memory host cluster:
//! `apply::apply_create` and `apply::apply_delete` driven against [`FakeCluster`], a small
//! Kubernetes that keeps Jobs, Services, pods, nodes and namespaces and plays the controllers
//! a run depends on.
//!
//! The fake runs on tokio's clock (the tests start it paused, so the run's 500 ms polls and
//! the 2 s gang deadlines cost nothing) and moves in 50 ms ticks:
//!
//! - the Job controller creates one pod per completion index when a Job is applied
//!   (`parallelism = completions = nodes`, Indexed: the completion-index annotation and
//!   label, the job-name and controller-uid labels), marks the Job `Complete` when every index
//!   succeeded and `Failed` on the first failed pod (`backoffLimit: 0`) or past
//!   `activeDeadlineSeconds`, deleting the pods still active;
//! - the scheduler binds a pending pod to the first node that matches its node selector,
//!   tolerates the node's taints, honours its pod anti-affinity and has the GPUs it asks for
//!   (pods elsewhere hold GPUs too); otherwise the pod keeps `PodScheduled=False`,
//!   `Unschedulable`, with the scheduler's message;
//! - the kubelet pulls, runs and stops the container as the pod's [`PodScript`] says
//!   (`Pending` → `Running` → `Succeeded`/`Failed`), and writes the termination message
//!   (`FallbackToLogsOnError`: the end of the log when the container failed);
//! - deleting a Job deletes it at once and its pods in the background; a deleted pod goes
//!   when its container has stopped (at once, unless the script's tool ignores SIGTERM, then
//!   after the pod's grace period).
//!
//! A provider killed mid-run is played by dropping the run's future.

#[path = "support/network_segment.rs"]
mod support;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use base64::{Engine, engine::general_purpose::STANDARD};
use gpufleet_engine::{
    actions::benchmark_run::BenchmarkRun,
    backends::kube::{
        ObjectError, POOL, TENANT,
        host::{Access, FromSettings, HeldTurn, HostObjects, ObjectKind},
        lease::LeaseRef,
    },
    consistency::{assert_object_compatible, assert_wholly_known_conformant},
    context::Context,
    kinds::{ActionKind, ApplyResponse, ResourceKind},
    resources::benchmark::{
        Benchmark, apply,
        render::{COMPLETION_INDEX_ANNOTATION, JOB_NAME_LABEL, SPEC_HASH_ANNOTATION},
    },
    tenancy::pool_label,
    value::Value,
};
use serde_json::{Value as Json, json};
use support::sweep;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The virtual cluster every benchmark here runs for, and its host namespace.
const VC: &str = "team-a";
const NAMESPACE: &str = "vc-team-a";
/// The fake's step.
const TICK: Duration = Duration::from_millis(50);
/// The label the Job controller ties its pods to their Job with.
const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The label form of the completion index (Kubernetes ≥ 1.28 sets both).
const COMPLETION_INDEX_LABEL: &str = "batch.kubernetes.io/job-completion-index";
const GPU: &str = "nvidia.com/gpu";
const DIGEST: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// =============================================================================================
// The fake cluster

/// What the container of one pod does.
#[derive(Debug, Clone)]
struct PodScript {
    /// From binding to the container running (image pull).
    pull: Duration,
    /// How long the container runs.
    runs: Duration,
    /// Its exit code.
    exit_code: i64,
    /// What it prints.
    output: String,
    /// When set, reading the log fails with this (log rotated, node gone).
    log_error: Option<String>,
    /// What it writes to `/dev/termination-log`.
    message: Option<String>,
    /// How long it takes to exit on SIGTERM (the kubelet kills it after the grace period).
    stops_in: Duration,
}

impl PodScript {
    /// A container printing `output` and exiting 0 after 600 ms.
    fn prints(output: &str) -> PodScript {
        PodScript {
            pull: ms(100),
            runs: ms(600),
            exit_code: 0,
            output: output.to_owned(),
            log_error: None,
            message: None,
            stops_in: Duration::ZERO,
        }
    }

    fn runs_for(mut self, d: Duration) -> PodScript {
        self.runs = d;
        self
    }

    fn exits(mut self, code: i64) -> PodScript {
        self.exit_code = code;
        self
    }

    fn log_unreadable(mut self, why: &str) -> PodScript {
        self.log_error = Some(why.to_owned());
        self
    }

    fn pulls_for(mut self, d: Duration) -> PodScript {
        self.pull = d;
        self
    }

    fn ignores_sigterm(mut self) -> PodScript {
        self.stops_in = Duration::from_secs(3600);
        self
    }
}

#[derive(Debug)]
struct FakeJob {
    object: Json,
    uid: String,
    created: Instant,
    creation_timestamp: String,
    completions: u32,
    deadline: Option<Duration>,
    /// `(complete, reason)` once the Job has finished.
    outcome: Option<(bool, &'static str)>,
    succeeded: BTreeSet<u32>,
    failed: u32,
}

#[derive(Debug)]
struct FakePod {
    serial: u64,
    name: String,
    job: String,
    index: u32,
    labels: Json,
    spec: Json,
    script: PodScript,
    created: Instant,
    node: Option<String>,
    bound: Option<Instant>,
    unschedulable: Option<String>,
    started: Option<Instant>,
    /// `(when, exit code)`.
    finished: Option<(Instant, i64)>,
    deleted: Option<Instant>,
}

impl FakePod {
    fn gpus(&self) -> u32 {
        gpu_request(&self.spec)
    }

    fn grace(&self) -> Duration {
        let secs = self.spec["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap_or(30);
        Duration::from_secs(secs).min(self.script.stops_in)
    }

    fn phase(&self) -> &'static str {
        match (self.started, self.finished) {
            (_, Some((_, 0))) => "Succeeded",
            (_, Some(_)) => "Failed",
            (Some(_), None) => "Running",
            (None, None) => "Pending",
        }
    }
}

fn gpu_request(spec: &Json) -> u32 {
    spec.pointer("/containers/0/resources/requests")
        .and_then(|r| r.get(GPU))
        .and_then(Json::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The end of a log as the kubelet keeps it for `FallbackToLogsOnError`: the last 80 lines,
/// at most 2048 bytes.
fn kubelet_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let mut tail = lines[lines.len().saturating_sub(80)..].join("\n");
    if tail.len() > 2048 {
        let mut start = tail.len() - 2048;
        while !tail.is_char_boundary(start) {
            start += 1;
        }
        tail = tail[start..].to_owned();
    }
    tail
}

fn labels_match(labels: &Json, wanted: &[(String, String)]) -> bool {
    wanted
        .iter()
        .all(|(k, v)| labels.get(k).and_then(Json::as_str) == Some(v.as_str()))
}

fn parse_selector(selector: &str) -> Result<Vec<(String, String)>, ObjectError> {
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|term| {
            term.split_once('=')
                .filter(|(k, _)| !k.ends_with('!'))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| {
                    ObjectError::Other(format!("the fake reads equality selectors, not {term:?}"))
                })
        })
        .collect()
}

#[derive(Debug)]
struct World {
    clock: Instant,
    /// Namespaces, nodes, Services and StatefulSets by (kind, namespace or "", name).
    objects: BTreeMap<(&'static str, String, String), Json>,
    /// GPUs held on a node by pods of other workloads.
    foreign_gpus: BTreeMap<String, u32>,
    jobs: BTreeMap<(String, String), FakeJob>,
    pods: BTreeMap<(String, String), FakePod>,
    /// The containers of the next Jobs' pods, by completion index; scripts beyond one
    /// gang serve the Jobs after it (the repeats of a run), in order.
    scripts: Vec<PodScript>,
    /// Where the next Job's scripts start.
    script_offset: usize,
    serial: u64,
    events: Vec<String>,
    job_applies: Vec<Json>,
    /// Every Secret applied, as sent.
    secret_applies: Vec<Json>,
    pods_created: usize,
    most_jobs_at_once: usize,
    /// Calls still carried out before every call fails.
    budget: sweep::Budget,
}

impl World {
    /// Counts a call against the budget; a spent budget fails it, as when the API server
    /// goes away.
    fn enter(&mut self) -> Result<(), ObjectError> {
        if self.budget.spend() {
            Ok(())
        } else {
            Err(ObjectError::Other("connection refused".to_owned()))
        }
    }

    /// Moves the world to the present, tick by tick.
    fn sync(&mut self) {
        let now = Instant::now();
        while self.clock + TICK <= now {
            self.clock += TICK;
            let t = self.clock;
            self.step(t);
        }
    }

    fn step(&mut self, t: Instant) {
        let mut order: Vec<(u64, (String, String))> = self
            .pods
            .iter()
            .map(|(k, p)| (p.serial, k.clone()))
            .collect();
        order.sort();
        for (_, key) in order {
            let Some(p) = self.pods.get(&key) else {
                continue;
            };
            if p.node.is_none() {
                if p.deleted.is_some() || t < p.created + TICK {
                    continue;
                }
                let decision = self.schedule(p);
                let Some(p) = self.pods.get_mut(&key) else {
                    continue;
                };
                match decision {
                    Ok(node) => {
                        p.node = Some(node);
                        p.bound = Some(t);
                        p.unschedulable = None;
                    }
                    Err(why) => p.unschedulable = Some(why),
                }
                continue;
            }
            let Some(p) = self.pods.get_mut(&key) else {
                continue;
            };
            match (p.bound, p.started, p.finished, p.deleted) {
                (Some(b), None, None, None) if t >= b + p.script.pull => p.started = Some(t),
                (_, Some(_), None, Some(d)) if t >= d + p.grace() => {
                    p.finished = Some((t, 137));
                }
                (_, Some(s), None, None) if t >= s + p.script.runs => {
                    p.finished = Some((t, p.script.exit_code));
                }
                _ => {}
            }
        }
        self.job_controller(t);
        self.reap(t);
    }

    /// The scheduler: the first node that takes the pod, or the reasons none does.
    fn schedule(&self, pod: &FakePod) -> Result<String, String> {
        let selector: Vec<(String, String)> = pod.spec["nodeSelector"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let tolerations: Vec<Json> = pod.spec["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let anti: Option<Vec<(String, String)>> = pod
            .spec
            .pointer(
                "/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/0/\
                 labelSelector/matchLabels",
            )
            .and_then(Json::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            });
        // A required node affinity on the hostname (the nodes a prescreen passed).
        let hosts: Option<Vec<&str>> = pod
            .spec
            .pointer(
                "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/\
                 nodeSelectorTerms/0/matchExpressions/0",
            )
            .filter(|e| e["key"] == "kubernetes.io/hostname" && e["operator"] == "In")
            .and_then(|e| e["values"].as_array())
            .map(|vs| vs.iter().filter_map(Json::as_str).collect());
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let nodes: Vec<&Json> = self
            .objects
            .iter()
            .filter(|((kind, _, _), _)| *kind == "Node")
            .map(|(_, n)| n)
            .collect();
        for node in &nodes {
            let name = node["metadata"]["name"].as_str().unwrap_or_default();
            let labels = &node["metadata"]["labels"];
            if !labels_match(labels, &selector)
                || hosts.as_ref().is_some_and(|h| !h.contains(&name))
            {
                *reasons
                    .entry("node(s) didn't match Pod's node affinity/selector".to_owned())
                    .or_default() += 1;
                continue;
            }
            let untolerated = node["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
                .find(|t| {
                    !tolerations.iter().any(|tol| {
                        tol["key"] == t["key"]
                            && (tol["effect"].is_null() || tol["effect"] == t["effect"])
                            && (tol["operator"].as_str() == Some("Exists")
                                || tol["value"].as_str().unwrap_or_default()
                                    == t["value"].as_str().unwrap_or_default())
                    })
                });
            if let Some(t) = untolerated {
                *reasons
                    .entry(format!(
                        "node(s) had untolerated taint {{{}: {}}}",
                        t["key"].as_str().unwrap_or_default(),
                        t["value"].as_str().unwrap_or_default()
                    ))
                    .or_default() += 1;
                continue;
            }
            let here: Vec<&FakePod> = self
                .pods
                .values()
                .filter(|q| q.node.as_deref() == Some(name) && q.finished.is_none())
                .collect();
            if let Some(anti) = &anti
                && here.iter().any(|q| labels_match(&q.labels, anti))
            {
                *reasons
                    .entry("node(s) didn't match pod anti-affinity rules".to_owned())
                    .or_default() += 1;
                continue;
            }
            let capacity: u32 = node
                .pointer("/status/allocatable")
                .and_then(|a| a.get(GPU))
                .and_then(Json::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let used = here.iter().map(|q| q.gpus()).sum::<u32>()
                + self.foreign_gpus.get(name).copied().unwrap_or(0);
            if used + pod.gpus() > capacity {
                *reasons.entry(format!("Insufficient {GPU}")).or_default() += 1;
                continue;
            }
            return Ok(name.to_owned());
        }
        Err(format!(
            "0/{} nodes are available: {}.",
            nodes.len(),
            reasons
                .iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// The Job controller: conditions from the pods, and the active pods of a failed Job
    /// deleted.
    fn job_controller(&mut self, t: Instant) {
        let mut stop: Vec<String> = Vec::new();
        for job in self.jobs.values_mut() {
            if job.outcome.is_some() {
                continue;
            }
            for p in self.pods.values() {
                if p.labels[CONTROLLER_UID_LABEL].as_str() != Some(job.uid.as_str()) {
                    continue;
                }
                match p.finished {
                    Some((_, 0)) => {
                        job.succeeded.insert(p.index);
                    }
                    Some(_) if p.deleted.is_none() => job.failed += 1,
                    _ => {}
                }
            }
            if job.failed > 0 {
                job.outcome = Some((false, "BackoffLimitExceeded"));
            } else if job.succeeded.len() == job.completions as usize {
                job.outcome = Some((true, "CompletionsReached"));
            } else if job.deadline.is_some_and(|d| t >= job.created + d) {
                job.outcome = Some((false, "DeadlineExceeded"));
            }
            if job.outcome.is_some_and(|(complete, _)| !complete) {
                stop.push(job.uid.clone());
            }
        }
        for p in self.pods.values_mut() {
            if p.finished.is_none()
                && p.deleted.is_none()
                && stop
                    .iter()
                    .any(|uid| p.labels[CONTROLLER_UID_LABEL].as_str() == Some(uid))
            {
                p.deleted = Some(t);
            }
        }
    }

    /// Stops the containers of deleted pods that exit at once, and removes the deleted pods
    /// whose container is not running.
    fn reap(&mut self, t: Instant) {
        for p in self.pods.values_mut() {
            if let Some(d) = p.deleted
                && p.started.is_some()
                && p.finished.is_none()
                && t >= d + p.grace()
            {
                p.finished = Some((t, 137));
            }
        }
        self.pods
            .retain(|_, p| p.deleted.is_none() || (p.started.is_some() && p.finished.is_none()));
    }

    fn job_json(&self, j: &FakeJob) -> Json {
        let mut o = j.object.clone();
        o["metadata"]["uid"] = json!(j.uid);
        o["metadata"]["creationTimestamp"] = json!(j.creation_timestamp);
        let mine = |p: &&FakePod| p.labels[CONTROLLER_UID_LABEL].as_str() == Some(j.uid.as_str());
        let active = self
            .pods
            .values()
            .filter(mine)
            .filter(|p| p.finished.is_none())
            .count();
        let mut status = json!({
            "startTime": j.creation_timestamp,
            "active": active,
            "succeeded": j.succeeded.len(),
            "failed": j.failed,
        });
        if let Some((complete, reason)) = j.outcome {
            let (first, last) = if complete {
                ("SuccessCriteriaMet", "Complete")
            } else {
                ("FailureTarget", "Failed")
            };
            status["conditions"] = json!([
                { "type": first, "status": "True", "reason": reason },
                { "type": last, "status": "True", "reason": reason },
            ]);
        }
        o["status"] = status;
        o
    }

    fn pod_json(p: &FakePod) -> Json {
        let container = p.spec.pointer("/containers/0").cloned().unwrap_or_default();
        let image = container["image"].as_str().unwrap_or_default();
        let repository = match image.rsplit_once(':') {
            Some((r, tag)) if !tag.contains('/') => r,
            _ => image,
        };
        let mut spec = p.spec.clone();
        spec["hostname"] = json!(format!("{}-{}", p.job, p.index));
        if let Some(n) = &p.node {
            spec["nodeName"] = json!(n);
        }
        let mut status = json!({ "phase": p.phase() });
        if p.node.is_some() {
            status["conditions"] = json!([{ "type": "PodScheduled", "status": "True" }]);
            let state = match (p.started, p.finished) {
                (_, Some((_, code))) => {
                    let mut term = json!({
                        "exitCode": code,
                        "reason": if code == 0 { "Completed" } else { "Error" },
                    });
                    let fallback = container["terminationMessagePolicy"].as_str()
                        == Some("FallbackToLogsOnError")
                        && code != 0;
                    let message = p
                        .script
                        .message
                        .clone()
                        .or_else(|| fallback.then(|| kubelet_tail(&p.script.output)));
                    if let Some(m) = message.filter(|m| !m.is_empty()) {
                        term["message"] = json!(m);
                    }
                    json!({ "terminated": term })
                }
                (Some(_), None) => json!({ "running": {} }),
                (None, None) => json!({ "waiting": { "reason": "ContainerCreating" } }),
            };
            status["containerStatuses"] = json!([{
                "name": container["name"],
                "image": image,
                "imageID": if p.started.is_some() {
                    format!("{repository}@{DIGEST}")
                } else {
                    String::new()
                },
                "ready": p.started.is_some() && p.finished.is_none(),
                "state": state,
            }]);
        } else if let Some(why) = &p.unschedulable {
            status["conditions"] = json!([{
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": why,
            }]);
        }
        let mut metadata = json!({
            "name": p.name,
            "namespace": NAMESPACE,
            "labels": p.labels,
            "annotations": { COMPLETION_INDEX_ANNOTATION: p.index.to_string() },
            "ownerReferences": [{ "apiVersion": "batch/v1", "kind": "Job", "name": p.job }],
        });
        if p.deleted.is_some() {
            metadata["deletionTimestamp"] = json!("2026-03-02T10:00:00Z");
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": status,
        })
    }

    fn apply_job(&mut self, object: &Json, namespace: &str, name: &str) -> Result<(), ObjectError> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(j) = self.jobs.get_mut(&key) {
            if j.object["spec"] != object["spec"] {
                return Err(ObjectError::Other(format!(
                    "Job.batch {name:?} is invalid: spec.template: Invalid value: field is immutable"
                )));
            }
            j.object["metadata"] = object["metadata"].clone();
            self.events.push(format!("apply Job {name} (unchanged)"));
            return Ok(());
        }
        self.serial += 1;
        let uid = format!("uid-{}", self.serial);
        let completions = object["spec"]["completions"].as_u64().unwrap_or(1) as u32;
        let template = &object["spec"]["template"];
        let now = Instant::now();
        let gang = completions as usize;
        let offset = if self.script_offset + gang <= self.scripts.len() {
            self.script_offset
        } else {
            0
        };
        self.script_offset = offset + gang;
        for index in 0..completions {
            self.serial += 1;
            let mut labels = template["metadata"]["labels"].clone();
            labels[JOB_NAME_LABEL] = json!(name);
            labels[CONTROLLER_UID_LABEL] = json!(uid);
            labels[COMPLETION_INDEX_LABEL] = json!(index.to_string());
            let script = self
                .scripts
                .get(offset + index as usize)
                .cloned()
                .expect("the scenario scripts every pod of the gang");
            let pod = FakePod {
                serial: self.serial,
                name: format!("{name}-{index}-x{:04}", self.serial),
                job: name.to_owned(),
                index,
                labels,
                spec: template["spec"].clone(),
                script,
                created: now,
                node: None,
                bound: None,
                unschedulable: None,
                started: None,
                finished: None,
                deleted: None,
            };
            self.pods
                .insert((namespace.to_owned(), pod.name.clone()), pod);
            self.pods_created += 1;
        }
        self.jobs.insert(
            key,
            FakeJob {
                object: object.clone(),
                uid,
                created: now,
                creation_timestamp: format!("2026-03-02T10:{:02}:00Z", self.serial % 60),
                completions,
                deadline: object["spec"]["activeDeadlineSeconds"]
                    .as_u64()
                    .map(Duration::from_secs),
                outcome: None,
                succeeded: BTreeSet::new(),
                failed: 0,
            },
        );
        self.job_applies.push(object.clone());
        self.events.push(format!("apply Job {name}"));
        self.most_jobs_at_once = self.most_jobs_at_once.max(self.jobs.len());
        Ok(())
    }
}

/// A small Kubernetes; see the module docs.
#[derive(Debug)]
struct FakeCluster {
    world: Mutex<World>,
}

fn node(name: &str, pool: Option<&str>) -> Json {
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/cuda.driver.major": "570",
        "nvidia.com/cuda.driver.minor": "124",
        "nvidia.com/cuda.driver.rev": "06",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "8",
    });
    let mut taints = vec![json!({ "key": GPU, "effect": "NoSchedule" })];
    if let Some(pool) = pool {
        labels[POOL] = json!(pool_label(VC, pool));
        labels[TENANT] = json!(VC);
        taints.push(json!({ "key": TENANT, "value": VC, "effect": "NoSchedule" }));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": labels },
        "spec": { "taints": taints },
        "status": { "allocatable": { GPU: "8" } },
    })
}

impl FakeCluster {
    /// The host namespace of [`VC`] with its StatefulSet, `nodes` nodes of `pool` (8 GPUs
    /// each, tainted for the tenant) named `gpu-<pool>-01`…, a free GPU node of no pool
    /// (which the scheduler tries first), and `scripts` for the pods of the Jobs to come.
    fn new(pool: &str, nodes: usize, scripts: Vec<PodScript>) -> Arc<FakeCluster> {
        let mut objects = BTreeMap::new();
        objects.insert(
            ("Namespace", String::new(), NAMESPACE.to_owned()),
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE } }),
        );
        objects.insert(
            ("StatefulSet", NAMESPACE.to_owned(), VC.to_owned()),
            json!({
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": { "name": VC, "namespace": NAMESPACE },
                "spec": { "template": { "spec": {
                    "initContainers": [
                        { "name": "kubernetes", "image": "ghcr.io/loft-sh/kubernetes:v1.35.2" },
                    ],
                    "containers": [
                        { "name": "syncer", "image": "ghcr.io/loft-sh/vcluster-pro:0.30.0" },
                    ],
                } } },
            }),
        );
        let mut names = vec!["a-spare-gpu-01".to_owned()];
        names.extend((1..=nodes).map(|i| format!("gpu-{pool}-{i:02}")));
        for (i, n) in names.iter().enumerate() {
            let pool = (i > 0).then_some(pool);
            objects.insert(("Node", String::new(), n.clone()), node(n, pool));
        }
        Arc::new(FakeCluster {
            world: Mutex::new(World {
                clock: Instant::now(),
                objects,
                foreign_gpus: BTreeMap::new(),
                jobs: BTreeMap::new(),
                pods: BTreeMap::new(),
                scripts,
                script_offset: 0,
                serial: 0,
                events: Vec::new(),
                job_applies: Vec::new(),
                secret_applies: Vec::new(),
                pods_created: 0,
                most_jobs_at_once: 0,
                budget: sweep::Budget::default(),
            }),
        })
    }

    fn world(&self) -> MutexGuard<'_, World> {
        let mut w = self.world.lock().unwrap_or_else(PoisonError::into_inner);
        w.sync();
        w
    }

    /// Labels `node` `key=value`, as topograph labels a node's switch block.
    fn label(&self, node: &str, key: &str, value: &str) {
        let mut w = self.world();
        if let Some(n) = w.objects.get_mut(&("Node", String::new(), node.to_owned())) {
            n["metadata"]["labels"][key] = json!(value);
        }
    }

    /// Pods of another workload hold `gpus` GPUs of `node`.
    fn occupy(&self, node: &str, gpus: u32) {
        self.world().foreign_gpus.insert(node.to_owned(), gpus);
    }

    /// The containers of the pods of Jobs applied from now on.
    fn set_scripts(&self, scripts: Vec<PodScript>) {
        let mut world = self.world();
        world.scripts = scripts;
        world.script_offset = 0;
    }

    /// What is left of benchmarks in the namespace: `Job x`, `Service x`, `Secret x`, `Pod x`.
    fn left(&self) -> Vec<String> {
        let w = self.world();
        let mut out: Vec<String> = w.jobs.keys().map(|(_, n)| format!("Job {n}")).collect();
        out.extend(
            w.objects
                .keys()
                .filter(|(k, _, _)| *k == "Service" || *k == "Secret")
                .map(|(k, _, n)| format!("{k} {n}")),
        );
        out.extend(w.pods.keys().map(|(_, n)| format!("Pod {n}")));
        out
    }

    fn events(&self) -> Vec<String> {
        self.world().events.clone()
    }

    /// The ConfigMaps applied, by name.
    fn configmaps(&self) -> BTreeMap<String, Json> {
        self.world()
            .objects
            .iter()
            .filter(|((k, _, _), _)| *k == "ConfigMap")
            .map(|((_, _, n), o)| (n.clone(), o.clone()))
            .collect()
    }

    fn job_applies(&self) -> Vec<Json> {
        self.world().job_applies.clone()
    }

    fn secret_applies(&self) -> Vec<Json> {
        self.world().secret_applies.clone()
    }

    fn pods_created(&self) -> usize {
        self.world().pods_created
    }

    fn most_jobs_at_once(&self) -> usize {
        self.world().most_jobs_at_once
    }

    fn job(&self, name: &str) -> Option<Json> {
        let w = self.world();
        w.jobs
            .get(&(NAMESPACE.to_owned(), name.to_owned()))
            .map(|j| w.job_json(j))
    }
}

/// The turn of a fake cluster: nothing to hand on.
struct NoLease;

#[async_trait]
impl HeldTurn for NoLease {
    async fn release(self: Box<Self>) {}
}

/// Every host call the kinds make must be one the provider's ClusterRole grants
/// (`deploy/rbac/clusterrole.yaml` is generated from [`ObjectKind::access`]).
fn granted(kind: ObjectKind, access: Access) {
    assert!(
        kind.permits(access),
        "{access:?} on {} is not in the provider's ClusterRole: add it to ObjectKind::access",
        kind.kind()
    );
}

#[async_trait]
impl HostObjects for FakeCluster {
    async fn server_version(&self) -> Result<String, ObjectError> {
        self.world().enter()?;
        Ok("v1.36.0".to_owned())
    }

    async fn take_turn(
        &self,
        lease: LeaseRef,
        _cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ObjectError> {
        // One provider process: the in-process turn already orders the runs.
        let mut w = self.world();
        w.enter()?;
        w.events.push(format!("turn {}", lease.name));
        Ok(Box::new(NoLease))
    }

    async fn serves(&self, _kind: ObjectKind) -> Result<bool, ObjectError> {
        // No MPI Operator and no GPU Operator: multi-node runs take gpufleet's own launcher.
        self.world().enter()?;
        Ok(false)
    }

    async fn apply(&self, object: &Json) -> Result<(), ObjectError> {
        let mut w = self.world();
        w.enter()?;
        let kind = object["kind"].as_str().unwrap_or_default();
        if let Some(k) = ObjectKind::from_kind(kind) {
            granted(k, Access::Apply);
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if !w
            .objects
            .contains_key(&("Namespace", String::new(), namespace.to_owned()))
        {
            return Err(ObjectError::Other(format!(
                "namespaces {namespace:?} not found"
            )));
        }
        match kind {
            "Job" => w.apply_job(object, namespace, name),
            "Service" | "Secret" | "ConfigMap" => {
                let kind = match kind {
                    "Service" => "Service",
                    "Secret" => "Secret",
                    _ => "ConfigMap",
                };
                if kind == "Secret" {
                    w.secret_applies.push(object.clone());
                }
                w.objects.insert(
                    (kind, namespace.to_owned(), name.to_owned()),
                    object.clone(),
                );
                w.events.push(format!("apply {kind} {name}"));
                Ok(())
            }
            other => Err(ObjectError::Other(format!(
                "cannot apply an object of kind {other:?}"
            ))),
        }
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        let mut w = self.world();
        w.enter()?;
        granted(kind, Access::Get);
        let ns = namespace.unwrap_or_default().to_owned();
        Ok(match kind {
            ObjectKind::Job => w.jobs.get(&(ns, name.to_owned())).map(|j| w.job_json(j)),
            ObjectKind::Pod => w.pods.get(&(ns, name.to_owned())).map(World::pod_json),
            other => w.objects.get(&(other.kind(), ns, name.to_owned())).cloned(),
        })
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ObjectError> {
        let wanted = parse_selector(selector)?;
        let mut w = self.world();
        w.enter()?;
        granted(kind, Access::List);
        let in_ns = |ns: &str| namespace.is_none_or(|want| want == ns);
        let found: Vec<Json> = match kind {
            ObjectKind::Job => w
                .jobs
                .iter()
                .filter(|((ns, _), _)| in_ns(ns))
                .map(|(_, j)| w.job_json(j))
                .collect(),
            ObjectKind::Pod => w
                .pods
                .iter()
                .filter(|((ns, _), _)| in_ns(ns))
                .map(|(_, p)| World::pod_json(p))
                .collect(),
            other => w
                .objects
                .iter()
                .filter(|((k, ns, _), _)| *k == other.kind() && in_ns(ns))
                .map(|(_, o)| o.clone())
                .collect(),
        };
        Ok(found
            .into_iter()
            .filter(|o| labels_match(&o["metadata"]["labels"], &wanted))
            .collect())
    }

    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ObjectError> {
        let mut w = self.world();
        w.enter()?;
        granted(kind, Access::Delete);
        let now = w.clock;
        let namespace = namespace.unwrap_or_default();
        let key = (namespace.to_owned(), name.to_owned());
        match kind {
            ObjectKind::Job => {
                if let Some(j) = w.jobs.remove(&key) {
                    w.events.push(format!("delete Job {name}"));
                    // Background propagation: the garbage collector deletes the pods.
                    for p in w.pods.values_mut() {
                        if p.labels[CONTROLLER_UID_LABEL].as_str() == Some(j.uid.as_str())
                            && p.deleted.is_none()
                        {
                            p.deleted = Some(now);
                        }
                    }
                }
            }
            ObjectKind::Pod => {
                if let Some(p) = w.pods.get_mut(&key) {
                    if p.deleted.is_none() {
                        p.deleted = Some(now);
                    }
                    w.events.push(format!("delete Pod {name}"));
                }
            }
            other => {
                if w.objects
                    .remove(&(other.kind(), namespace.to_owned(), name.to_owned()))
                    .is_some()
                {
                    w.events.push(format!("delete {} {name}", other.kind()));
                }
            }
        }
        w.reap(now);
        Ok(())
    }

    async fn merge_patch(
        &self,
        kind: ObjectKind,
        _namespace: Option<&str>,
        name: &str,
        _patch: &Json,
    ) -> Result<(), ObjectError> {
        // A benchmark only applies and deletes; a patch here is a change to notice.
        Err(ObjectError::Other(format!(
            "a benchmark does not patch {} {name}",
            kind.kind()
        )))
    }

    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ObjectError> {
        let mut w = self.world();
        w.enter()?;
        granted(ObjectKind::Pod, Access::Logs);
        let p = w
            .pods
            .get(&(namespace.to_owned(), pod.to_owned()))
            .ok_or_else(|| ObjectError::Other(format!("pods {pod:?} not found")))?;
        if p.spec.pointer("/containers/0/name").and_then(Json::as_str) != Some(container) {
            return Err(ObjectError::Other(format!(
                "container {container} is not valid for pod {pod}"
            )));
        }
        if p.started.is_none() {
            return Err(ObjectError::Other(format!(
                "container {container:?} in pod {pod:?} is waiting to start: ContainerCreating"
            )));
        }
        match &p.script.log_error {
            Some(why) => Err(ObjectError::Other(why.clone())),
            None => Ok(p.script.output.clone()),
        }
    }
}

// =============================================================================================
// Benchmarks and what to check on a record

const LOG: &str = "loading model weights\nwarmup done\n\
                   {\"tokens_per_second\": 1832.5, \"loss\": 2.3125, \"steps\": 500}\n";

fn kind() -> Benchmark {
    Benchmark(FromSettings)
}

/// The configuration of benchmark `name` on pool `pool` of [`VC`]: a custom command with a
/// `start_timeout` of 2s, plus `extra` attributes.
fn configured(name: &str, pool: &str, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![
        ("name", Value::string(name)),
        (
            "virtual_cluster_id",
            Value::string(format!("{NAMESPACE}/{VC}")),
        ),
        (
            "node_pool_id",
            Value::string(format!("{NAMESPACE}/{VC}/{pool}")),
        ),
        ("suite", Value::string("custom")),
        (
            "image",
            Value::string("registry.example.com/bench/train-check:1.4"),
        ),
        (
            "command",
            Value::List(vec![Value::string("python"), Value::string("bench.py")]),
        ),
        ("start_timeout", Value::string("2s")),
    ];
    attrs.extend(extra.iter().cloned());
    support::config(&kind(), &attrs)
}

/// The planned value of [`configured`].
async fn planned(name: &str, pool: &str, extra: &[(&str, Value)]) -> Value {
    let config = configured(name, pool, extra);
    let p = support::plan(&kind(), &Context::default(), &Value::Null, &config).await;
    assert!(
        !p.diagnostics.has_error(),
        "{}",
        support::show(&p.diagnostics)
    );
    p.planned
}

fn command(args: &[&str]) -> Value {
    Value::List(args.iter().map(|a| Value::string(*a)).collect())
}

/// A recorded run, as Terraform checks it: wholly known, of the schema's type, and
/// compatible with the plan.
#[track_caller]
fn assert_recorded(planned: &Value, r: &ApplyResponse) {
    let schema = kind().schema();
    let mut errs = assert_wholly_known_conformant(&schema.value_type(), &r.new_state, "state");
    errs.extend(assert_object_compatible(
        &schema.block,
        planned,
        &r.new_state,
    ));
    assert!(
        errs.is_empty(),
        "{}",
        errs.iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn environment(state: &Value, key: &str) -> String {
    state
        .get("environment")
        .as_map()
        .and_then(|m| m.get(key))
        .map(|v| text(v).to_owned())
        .unwrap_or_default()
}

fn results(state: &Value) -> BTreeMap<String, String> {
    state
        .get("results")
        .as_map()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let n = v.as_number().map(|n| n.normalized().to_plain_string());
                    (k.clone(), n.unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn failures(state: &Value) -> Vec<String> {
    state
        .get("failures")
        .as_seq()
        .map(|xs| xs.iter().map(|x| text(x).to_owned()).collect())
        .unwrap_or_default()
}

/// The one error of a response.
#[track_caller]
fn the_error(r: &ApplyResponse) -> String {
    let errors: Vec<_> = r.diagnostics.iter().collect();
    assert_eq!(errors.len(), 1, "{}", support::show(&r.diagnostics));
    assert!(
        r.diagnostics.has_error(),
        "{}",
        support::show(&r.diagnostics)
    );
    format!("{}: {}", errors[0].summary, errors[0].detail)
}

fn expected_results() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("loss".to_owned(), "2.3125".to_owned()),
        ("steps".to_owned(), "500".to_owned()),
        ("tokens_per_second".to_owned(), "1832.5".to_owned()),
    ])
}

// =============================================================================================
// Scenarios

#[tokio::test(start_paused = true)]
async fn a_passing_run_is_recorded_with_its_environment_and_leaves_nothing() {
    let fake = FakeCluster::new("solo", 1, vec![PodScript::prints(LOG)]);
    let planned = planned("solo", "solo", &[]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    let s = &r.new_state;
    assert_eq!(text(s.get("status")), "passed");
    assert!(failures(s).is_empty(), "{:?}", failures(s));
    assert_eq!(results(s), expected_results());
    assert_eq!(text(s.get("raw_output")), LOG);
    assert_eq!(text(s.get("id")), format!("{NAMESPACE}/solo"));
    for (key, want) in [
        ("nodes", "gpu-solo-01"),
        ("gpu_product", "NVIDIA-H100-80GB-HBM3"),
        ("gpu_count", "8"),
        ("driver_version", "570.124.06"),
        ("cuda_version", "12.8"),
        ("kubernetes_version", "v1.36.0"),
        ("vcluster_version", "0.30.0"),
        ("virtual_cluster_kubernetes_version", "v1.35.2"),
        ("image", "registry.example.com/bench/train-check:1.4"),
        (
            "image_digest",
            &format!("registry.example.com/bench/train-check@{DIGEST}"),
        ),
        ("suite", "custom"),
        ("node_pool_id", "vc-team-a/team-a/solo"),
        ("sharing", "none"),
    ] {
        assert_eq!(environment(s, key), want, "environment.{key}");
    }
    let hash = text(s.get("environment_hash"));
    assert!(
        hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{hash}"
    );
    assert!(!text(s.get("started_at")).is_empty());
    assert!(!text(s.get("finished_at")).is_empty());

    assert_eq!(fake.left(), Vec::<String>::new());
    // One pod, no Service for a single node.
    assert_eq!(fake.pods_created(), 1);
    assert!(
        !fake.events().iter().any(|e| e.starts_with("apply Service")),
        "{:?}",
        fake.events()
    );
}

#[tokio::test(start_paused = true)]
async fn the_endpoint_key_reaches_the_container_by_reference_and_leaves_with_the_run() {
    const KEY: &str = "sk-write-only-7f3a";
    // A tool that prints the key it was given (its configuration, its command line).
    let printed = format!("config: api_key={KEY} url=http://llm:8000\n{LOG}");
    let fake = FakeCluster::new("keyed", 1, vec![PodScript::prints(&printed)]);
    let key = [("endpoint_api_key_wo", Value::string(KEY))];
    let planned = planned("keyed", "keyed", &key).await;
    assert!(
        planned.get("endpoint_api_key_wo").is_null(),
        "a write-only value is never planned"
    );
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, Some(KEY)).await;
    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    assert!(!format!("{:?}", r.new_state).contains(KEY));
    assert!(
        text(r.new_state.get("raw_output")).contains("api_key=(redacted) url="),
        "{}",
        text(r.new_state.get("raw_output"))
    );
    for (name, cm) in fake.configmaps() {
        assert!(
            !cm.to_string().contains(KEY),
            "the key is in ConfigMap {name}"
        );
    }

    let secrets = fake.secret_applies();
    assert_eq!(secrets.len(), 1, "{:?}", fake.events());
    assert_eq!(secrets[0]["metadata"]["name"], "gfb-keyed-endpoint");
    assert_eq!(secrets[0]["data"]["api-key"], STANDARD.encode(KEY));
    let events = fake.events();
    let at = |e: &str| events.iter().position(|x| x.starts_with(e));
    assert!(
        at("apply Secret gfb-keyed-endpoint") < at("apply Job"),
        "the Secret is there before the pods: {events:?}"
    );
    let job = &fake.job_applies()[0];
    assert!(
        !job.to_string().contains(KEY),
        "the Job holds no key: {job}"
    );
    let env = &job["spec"]["template"]["spec"]["containers"][0]["env"];
    let reference = env
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "GPUFLEET_ENDPOINT_API_KEY")
        .unwrap_or_else(|| panic!("no key variable in {env}"));
    assert_eq!(
        reference["valueFrom"]["secretKeyRef"],
        json!({ "name": "gfb-keyed-endpoint", "key": "api-key" })
    );
    assert_eq!(
        fake.left(),
        Vec::<String>::new(),
        "the Secret goes with the run"
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_provider_was_killed_is_adopted_not_started_again() {
    let fake = FakeCluster::new(
        "adopt",
        2,
        vec![
            PodScript::prints(LOG).runs_for(ms(3000)),
            PodScript::prints(LOG).runs_for(ms(3000)),
        ],
    );
    let planned = planned("adopt", "adopt", &[("nodes", Value::int(2))]).await;
    let ctx = Context::default();

    // The provider dies while the pods run: nothing cleans up.
    tokio::time::timeout(
        ms(1200),
        apply::apply_create(fake.as_ref(), &ctx, &planned, None),
    )
    .await
    .expect_err("the run is killed while its pods run");
    let job = fake
        .job("gfb-adopt")
        .expect("the Job outlives the provider");
    let created = job["metadata"]["creationTimestamp"]
        .as_str()
        .expect("a creation time")
        .to_owned();

    let r = apply::apply_create(fake.as_ref(), &ctx, &planned, None).await;
    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    assert_eq!(text(r.new_state.get("status")), "passed");
    assert_eq!(results(&r.new_state), expected_results());
    assert_eq!(
        environment(&r.new_state, "nodes"),
        "gpu-adopt-01,gpu-adopt-02"
    );
    // The run is the one that started before the provider died.
    assert_eq!(text(r.new_state.get("started_at")), created);
    assert_eq!(fake.job_applies().len(), 1, "{:?}", fake.events());
    assert_eq!(fake.pods_created(), 2);
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_leftover_job_of_another_configuration_is_deleted_before_the_new_one() {
    let fake = FakeCluster::new(
        "replace",
        1,
        vec![PodScript::prints("{\"tokens_per_second\": 1.0}\n").runs_for(ms(3000))],
    );
    let ctx = Context::default();
    let old = planned(
        "replace",
        "replace",
        &[("command", command(&["python", "old.py"]))],
    )
    .await;
    tokio::time::timeout(
        ms(1200),
        apply::apply_create(fake.as_ref(), &ctx, &old, None),
    )
    .await
    .expect_err("the old run is killed while its pod runs");
    assert!(fake.job("gfb-replace").is_some());

    fake.set_scripts(vec![PodScript::prints(LOG)]);
    let planned = planned("replace", "replace", &[]).await;
    let r = apply::apply_create(fake.as_ref(), &ctx, &planned, None).await;
    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    assert_eq!(results(&r.new_state), expected_results());

    let applies = fake.job_applies();
    assert_eq!(applies.len(), 2, "{:?}", fake.events());
    let hash = |j: &Json| j["metadata"]["annotations"][SPEC_HASH_ANNOTATION].clone();
    assert_ne!(hash(&applies[0]), hash(&applies[1]));
    assert_eq!(
        applies[1].pointer("/spec/template/spec/containers/0/command"),
        Some(&json!(["python", "bench.py"]))
    );
    let events = fake.events();
    let first_delete = events.iter().position(|e| e == "delete Job gfb-replace");
    let second_apply = events
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == "apply Job gfb-replace")
        .nth(1)
        .map(|(i, _)| i);
    assert!(
        matches!((first_delete, second_apply), (Some(d), Some(a)) if d < a),
        "{events:?}"
    );
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn the_pods_of_a_replaced_leftover_are_not_taken_for_the_new_run() {
    let old_log = "{\"tokens_per_second\": 1.0}\n";
    let fake = FakeCluster::new(
        "linger",
        2,
        vec![
            PodScript::prints(old_log)
                .runs_for(ms(60_000))
                .ignores_sigterm(),
        ],
    );
    let ctx = Context::default();
    let old = planned(
        "linger",
        "linger",
        &[("command", command(&["python", "old.py"]))],
    )
    .await;
    tokio::time::timeout(
        ms(1200),
        apply::apply_create(fake.as_ref(), &ctx, &old, None),
    )
    .await
    .expect_err("the old run is killed while its pod runs");

    fake.set_scripts(vec![PodScript::prints(LOG)]);
    let planned = planned("linger", "linger", &[]).await;
    let r = apply::apply_create(fake.as_ref(), &ctx, &planned, None).await;
    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_eq!(text(r.new_state.get("raw_output")), LOG);
    assert_eq!(results(&r.new_state), expected_results());
    // One pod ran this run, on one node.
    assert!(
        !environment(&r.new_state, "nodes").contains(','),
        "{}",
        environment(&r.new_state, "nodes")
    );
}

#[tokio::test(start_paused = true)]
async fn a_gang_that_cannot_start_within_start_timeout_fails_and_leaves_nothing() {
    let fake = FakeCluster::new(
        "gang",
        2,
        vec![
            PodScript::prints(LOG).runs_for(ms(60_000)),
            PodScript::prints(LOG).runs_for(ms(60_000)),
        ],
    );
    // Another workload holds every GPU of the second node.
    fake.occupy("gpu-gang-02", 8);
    let planned = planned("gang", "gang", &[("nodes", Value::int(2))]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert_eq!(r.new_state, Value::Null);
    let e = the_error(&r);
    assert!(e.contains("start_timeout (2s)"), "{e}");
    assert!(
        e.contains("gfb-gang-1-"),
        "names the pod that did not start: {e}"
    );
    assert!(
        e.contains("Insufficient nvidia.com/gpu"),
        "says why it did not start: {e}"
    );
    assert!(!e.contains("gfb-gang-0-"), "pod 0 was running: {e}");
    assert!(e.contains("Everything the run created was removed"), "{e}");
    assert_eq!(fake.left(), Vec::<String>::new());
    let events = fake.events();
    assert!(
        events.contains(&"apply Service gfb-gang".to_owned()),
        "{events:?}"
    );
    assert!(
        events.contains(&"delete Service gfb-gang".to_owned()),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_gang_whose_pods_ran_one_after_another_on_one_node_fails() {
    // The pool has one node: pod 1 waits for pod 0 to finish, then runs on the same node.
    let fake = FakeCluster::new(
        "serial",
        1,
        vec![
            PodScript::prints(LOG).runs_for(ms(300)),
            PodScript::prints("rank 1 done\n").runs_for(ms(300)),
        ],
    );
    let planned = planned("serial", "serial", &[("nodes", Value::int(2))]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert_eq!(r.new_state, Value::Null);
    let e = the_error(&r);
    assert!(e.contains("did not run together"), "{e}");
    assert!(e.contains("needs 2 free nodes of the pool at once"), "{e}");
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_gang_whose_pod_crashes_at_once_is_recorded_with_the_crash() {
    // A typo in the command: pod 0 exits 127 while pod 1 still pulls its image; the Job
    // fails (backoffLimit 0) and its controller deletes pod 1.
    let fake = FakeCluster::new(
        "typo",
        2,
        vec![
            PodScript::prints("sh: 1: bench.py: not found\n")
                .runs_for(Duration::ZERO)
                .exits(127),
            PodScript::prints("").pulls_for(ms(1000)),
        ],
    );
    let planned = planned(
        "typo",
        "typo",
        &[
            ("nodes", Value::int(2)),
            ("on_failure", Value::string("record")),
        ],
    )
    .await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert!(
        !r.diagnostics.has_error(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_eq!(text(r.new_state.get("status")), "failed");
    let f = failures(&r.new_state);
    assert!(
        f.iter().any(|x| x.ends_with("exited with code 127")),
        "{f:?}"
    );
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_log_falls_back_to_the_termination_message() {
    // The command fails after printing its metrics, and its log cannot be read any more;
    // the kubelet kept the end of it as the termination message (FallbackToLogsOnError).
    let fake = FakeCluster::new(
        "msg",
        1,
        vec![
            PodScript::prints(LOG)
                .exits(3)
                .log_unreadable("the log of pod gfb-msg-0 was rotated away"),
        ],
    );
    let planned = planned("msg", "msg", &[("on_failure", Value::string("record"))]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    let s = &r.new_state;
    assert_eq!(results(s), expected_results());
    assert_eq!(text(s.get("raw_output")), LOG.trim_end());
    assert_eq!(text(s.get("status")), "failed");
    let f = failures(s);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with("pod gfb-msg-0-") && f[0].ends_with("exited with code 3"),
        "{f:?}"
    );
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_log_without_a_termination_message_fails_the_run() {
    let fake = FakeCluster::new(
        "nolog",
        1,
        vec![PodScript::prints(LOG).log_unreadable("the node gpu-nolog-01 is gone")],
    );
    let planned = planned("nolog", "nolog", &[]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert_eq!(r.new_state, Value::Null);
    let e = the_error(&r);
    assert!(e.contains("the node gpu-nolog-01 is gone"), "{e}");
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_failed_dcgm_diagnostic_is_recorded_with_its_failed_test_not_its_exit_code() {
    let report = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/benchmark/dcgm-diag/gb10-level1-4.2.3-software-fail.json"),
    )
    .expect("the dcgm fixture");
    let fake = FakeCluster::new("dcgm", 1, vec![PodScript::prints(&report).exits(226)]);
    let planned = planned(
        "dcgm",
        "dcgm",
        &[
            ("suite", Value::string("dcgm-diag")),
            (
                "image",
                Value::string("nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1"),
            ),
            ("command", Value::Null),
            ("on_failure", Value::string("record")),
        ],
    )
    .await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    assert!(
        !r.diagnostics.has_error(),
        "on_failure = record: {}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    let s = &r.new_state;
    assert_eq!(text(s.get("status")), "failed");
    let f = failures(s);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with("test software failed (GPU 0: Persistence Mode"),
        "{f:?}"
    );
    assert!(
        !f.iter()
            .any(|x| x.contains("226") || x.contains("exited with code")),
        "{f:?}"
    );
    assert_eq!(
        results(s).get("tests_failed").map(String::as_str),
        Some("1")
    );
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_broken_threshold_fails_the_apply_and_still_records_the_run() {
    let fake = FakeCluster::new("slow", 1, vec![PodScript::prints(LOG)]);
    let thresholds = Value::Map(BTreeMap::from([(
        "tokens_per_second".to_owned(),
        Value::object([("min", Value::int(2000)), ("max", Value::Null)]),
    )]));
    let planned = planned("slow", "slow", &[("thresholds", thresholds)]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    let e = the_error(&r);
    assert!(
        e.contains("tokens_per_second = 1832.5 is outside its bound (min 2000)"),
        "{e}"
    );
    // Recorded (and tainted by Terraform), so the next apply runs it again.
    assert!(!r.new_state.is_null());
    let schema = kind().schema();
    let errs = assert_wholly_known_conformant(&schema.value_type(), &r.new_state, "state");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(text(r.new_state.get("status")), "failed");
    assert_eq!(
        failures(&r.new_state),
        ["threshold: tokens_per_second = 1832.5 is outside its bound (min 2000)"]
    );
    assert_eq!(results(&r.new_state), expected_results());
    assert_eq!(fake.left(), Vec::<String>::new());
}

/// Node → metric → value, as plain strings.
fn node_results(state: &Value) -> BTreeMap<String, BTreeMap<String, String>> {
    metrics_by(state.get("node_results"))
}

/// A map of maps of numbers (`node_results`, `unit_results`), the numbers as text.
fn metrics_by(v: &Value) -> BTreeMap<String, BTreeMap<String, String>> {
    v.as_map()
        .map(|m| {
            m.iter()
                .map(|(node, metrics)| {
                    let metrics = metrics
                        .as_map()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| {
                            let n = v.as_number().map(|n| n.normalized().to_plain_string());
                            (k.clone(), n.unwrap_or_default())
                        })
                        .collect();
                    (node.clone(), metrics)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_two_node_run_judges_each_node_and_names_the_slow_one() {
    const SLOW: &str = "{\"tokens_per_second\": 912.0, \"loss\": 2.5, \"steps\": 500}\n";
    let fake = FakeCluster::new(
        "pair",
        2,
        vec![PodScript::prints(LOG), PodScript::prints(SLOW)],
    );
    let bound = |min: i64| {
        Value::Map(BTreeMap::from([(
            "tokens_per_second".to_owned(),
            Value::object([("min", Value::int(min)), ("max", Value::Null)]),
        )]))
    };
    let planned = planned(
        "pair",
        "pair",
        &[("nodes", Value::int(2)), ("thresholds", bound(1000))],
    )
    .await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    let e = the_error(&r);
    assert!(
        e.contains("node gpu-pair-02: tokens_per_second = 912 is outside its bound (min 1000)"),
        "{e}"
    );
    assert_recorded(&planned, &r);
    let s = &r.new_state;
    assert_eq!(
        failures(s),
        ["threshold: node gpu-pair-02: tokens_per_second = 912 is outside its bound (min 1000)"]
    );
    // Every node's numbers are kept; `results` holds each metric's worst node.
    let by_node = node_results(s);
    assert_eq!(by_node.len(), 2, "{by_node:?}");
    assert_eq!(by_node["gpu-pair-01"]["tokens_per_second"], "1832.5");
    assert_eq!(by_node["gpu-pair-02"]["tokens_per_second"], "912");
    assert_eq!(results(s)["tokens_per_second"], "912");
    let raw = text(s.get("raw_output"));
    assert!(
        raw.contains("==> node gpu-pair-01 <==") && raw.contains("==> node gpu-pair-02 <=="),
        "{raw}"
    );

    // A bound both nodes meet passes the recorded run again at plan, without running it.
    let looser = configured(
        "pair",
        "pair",
        &[("nodes", Value::int(2)), ("thresholds", bound(900))],
    );
    let p = support::plan(&kind(), &Context::default(), s, &looser).await;
    assert!(
        !p.diagnostics.has_error(),
        "{}",
        support::show(&p.diagnostics)
    );
    assert_eq!(text(p.planned.get("status")), "passed");
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn three_repeats_record_each_and_keep_the_median_and_spread() {
    let line = |tps: &str| format!("{{\"tokens_per_second\": {tps}, \"steps\": 500}}\n");
    let fake = FakeCluster::new(
        "thrice",
        1,
        vec![
            PodScript::prints(&line("1832.5")),
            PodScript::prints(&line("1700")),
            PodScript::prints(&line("1900")),
        ],
    );
    let thresholds = Value::Map(BTreeMap::from([(
        "tokens_per_second".to_owned(),
        Value::object([("min", Value::int(1750)), ("max", Value::Null)]),
    )]));
    let planned = planned(
        "thrice",
        "thrice",
        &[("repeats", Value::int(3)), ("thresholds", thresholds)],
    )
    .await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    // The slow repeat does not fail the run: the median is judged.
    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    let s = &r.new_state;
    assert_eq!(text(s.get("status")), "passed");
    assert_eq!(results(s)["tokens_per_second"], "1832.5");
    let spread = s.get("spread").as_map().expect("spread");
    assert_eq!(
        spread["tokens_per_second"]
            .as_number()
            .map(|n| n.normalized().to_plain_string()),
        Some("200".to_owned())
    );
    let each: Vec<String> = s
        .get("repeat_results")
        .as_seq()
        .expect("repeat_results")
        .iter()
        .map(|m| {
            m.as_map()
                .and_then(|m| m.get("tokens_per_second"))
                .and_then(Value::as_number)
                .map(|n| n.normalized().to_plain_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(each, ["1832.5", "1700", "1900"]);
    let raw = text(s.get("raw_output"));
    assert!(raw.contains("==> repeat 3 <=="), "{raw}");
    // One Job per repeat, one after another, and nothing left.
    assert_eq!(fake.job_applies().len(), 3, "{:?}", fake.events());
    assert_eq!(fake.pods_created(), 3);
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_repeat_the_tool_fails_is_named_in_the_failures() {
    let fake = FakeCluster::new(
        "flaky",
        1,
        vec![
            PodScript::prints(LOG),
            PodScript::prints("no metrics at all\n"),
        ],
    );
    let planned = planned(
        "flaky",
        "flaky",
        &[
            ("repeats", Value::int(2)),
            ("on_failure", Value::string("record")),
        ],
    )
    .await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    assert_recorded(&planned, &r);
    let f = failures(&r.new_state);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].starts_with("repeat 2: "), "{f:?}");
    // The repeat that reported keeps its numbers.
    assert_eq!(results(&r.new_state), expected_results());
    assert_eq!(fake.left(), Vec::<String>::new());
}

fn baseline(tps: i64, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![
        (
            "results",
            Value::Map(BTreeMap::from([(
                "tokens_per_second".to_owned(),
                Value::int(tps),
            )])),
        ),
        ("environment", Value::Null),
        ("min_ratio", Value::Null),
        ("allow_differences", Value::Null),
        ("source", Value::Null),
    ];
    attrs.extend(extra.iter().cloned());
    Value::object(attrs)
}

#[tokio::test(start_paused = true)]
async fn a_run_below_its_baseline_fails_naming_the_metric_and_both_values() {
    let fake = FakeCluster::new("base", 1, vec![PodScript::prints(LOG)]);
    let planned = planned("base", "base", &[("baseline", baseline(2000, &[]))]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;

    let e = the_error(&r);
    let want = "baseline: tokens_per_second = 1832.5 is below 0.95 of the baseline: baseline 2000";
    assert!(e.contains(want), "{e}");
    assert_recorded(&planned, &r);
    assert_eq!(failures(&r.new_state), [want]);

    // A baseline the run reaches passes the recorded run again at plan, without running it.
    let met = configured("base", "base", &[("baseline", baseline(1900, &[]))]);
    let p = support::plan(&kind(), &Context::default(), &r.new_state, &met).await;
    assert!(
        !p.diagnostics.has_error(),
        "{}",
        support::show(&p.diagnostics)
    );
    assert_eq!(text(p.planned.get("status")), "passed");
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_baseline_from_another_driver_is_refused_naming_the_field() {
    // The reference: this very run's own environment, but on another driver.
    let fake = FakeCluster::new("drv", 1, vec![PodScript::prints(LOG)]);
    let planned = planned("drv", "drv", &[("on_failure", Value::string("record"))]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    assert_eq!(text(r.new_state.get("status")), "passed");
    let reference_map = r
        .new_state
        .get("environment")
        .as_map()
        .expect("environment")
        .clone();
    let mut other = reference_map.clone();
    other.insert("driver_version".to_owned(), Value::string("550.54.15"));
    let reference = Value::Map(other);
    let with = |reference: &Value, extra: &[(&str, Value)]| {
        let mut base = vec![("environment", reference.clone())];
        base.extend(extra.iter().cloned());
        configured(
            "drv",
            "drv",
            &[
                ("baseline", baseline(1000, &base)),
                ("on_failure", Value::string("record")),
            ],
        )
    };

    // Re-checked at plan, without running again: the setups differ in one field.
    let p = support::plan(
        &kind(),
        &Context::default(),
        &r.new_state,
        &with(&reference, &[]),
    )
    .await;
    assert!(
        !p.diagnostics.has_error(),
        "{}",
        support::show(&p.diagnostics)
    );
    assert_eq!(text(p.planned.get("status")), "failed");
    let f: Vec<String> = p
        .planned
        .get("failures")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .map(|x| text(x).to_owned())
        .collect();
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].contains("driver_version (run \"570.124.06\", baseline \"550.54.15\")")
            && !f[0].contains("started_at"),
        "{f:?}"
    );

    // Allowing the field compares the numbers, which pass.
    let allowed = with(
        &reference,
        &[(
            "allow_differences",
            Value::List(vec![Value::string("driver_version")]),
        )],
    );
    let p = support::plan(&kind(), &Context::default(), &r.new_state, &allowed).await;
    assert!(
        !p.diagnostics.has_error(),
        "{}",
        support::show(&p.diagnostics)
    );
    assert_eq!(text(p.planned.get("status")), "passed");

    // A reference run on another number of nodes is another experiment: as it records it,
    // and as a record from before `node_count` (its list of nodes) shows it.
    let mut two = reference_map;
    two.insert("nodes".to_owned(), Value::string("gpu-drv-01,gpu-drv-02"));
    two.insert("node_count".to_owned(), Value::string("2"));
    let mut listed_only = two.clone();
    listed_only.remove("node_count");
    for reference in [two, listed_only] {
        let reference = with(&Value::Map(reference), &[]);
        let p = support::plan(&kind(), &Context::default(), &r.new_state, &reference).await;
        let failed = p
            .planned
            .get("failures")
            .as_seq()
            .unwrap_or_default()
            .to_vec();
        assert!(
            failed
                .iter()
                .any(|f| text(f).contains("node_count (run \"1\", baseline \"2\")")),
            "{failed:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn destroy_removes_what_an_interrupted_run_left() {
    // Tools that ignore SIGTERM: the pods go only after their grace period, and destroy
    // waits for them.
    let fake = FakeCluster::new(
        "left",
        2,
        vec![
            PodScript::prints(LOG)
                .runs_for(ms(60_000))
                .ignores_sigterm(),
            PodScript::prints(LOG)
                .runs_for(ms(60_000))
                .ignores_sigterm(),
        ],
    );
    let planned = planned("left", "left", &[("nodes", Value::int(2))]).await;
    let ctx = Context::default();
    tokio::time::timeout(
        ms(1200),
        apply::apply_create(fake.as_ref(), &ctx, &planned, None),
    )
    .await
    .expect_err("the run is killed while its pods run");
    assert_eq!(fake.left().len(), 4, "{:?}", fake.left());

    let r = apply::apply_delete(fake.as_ref(), &ctx, &planned).await;
    assert!(
        r.diagnostics.is_empty(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_eq!(r.new_state, Value::Null);
    assert_eq!(fake.left(), Vec::<String>::new());

    // Nothing left: destroy has nothing to do and does not fail.
    let again = apply::apply_delete(fake.as_ref(), &ctx, &planned).await;
    assert!(
        again.diagnostics.is_empty(),
        "{}",
        support::show(&again.diagnostics)
    );
    assert_eq!(again.new_state, Value::Null);
}

#[tokio::test(start_paused = true)]
async fn a_stop_request_ends_the_run_and_removes_what_it_created() {
    let fake = FakeCluster::new("stop", 1, vec![PodScript::prints(LOG).runs_for(ms(60_000))]);
    let planned = planned("stop", "stop", &[]).await;
    let ctx = Context::default();
    let cancel = ctx.cancel.clone();
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(ms(1200)).await;
        cancel.cancel();
    });
    let r = apply::apply_create(fake.as_ref(), &ctx, &planned, None).await;
    stopper.await.expect("the stopper ran");

    assert_eq!(r.new_state, Value::Null);
    let e = the_error(&r);
    assert!(e.contains("Terraform asked the provider to stop"), "{e}");
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn runs_on_one_pool_take_turns() {
    let fake = FakeCluster::new("turns", 1, vec![PodScript::prints(LOG)]);
    let first = planned("turn-a", "turns", &[]).await;
    let second = planned("turn-b", "turns", &[]).await;
    let ctx = Context::default();
    let (a, b) = tokio::join!(
        apply::apply_create(fake.as_ref(), &ctx, &first, None),
        apply::apply_create(fake.as_ref(), &ctx, &second, None),
    );
    for r in [&a, &b] {
        assert!(
            r.diagnostics.is_empty(),
            "{}",
            support::show(&r.diagnostics)
        );
        assert_eq!(text(r.new_state.get("status")), "passed");
    }
    assert_eq!(fake.job_applies().len(), 2);
    assert_eq!(fake.most_jobs_at_once(), 1, "{:?}", fake.events());
    assert_eq!(fake.left(), Vec::<String>::new());
}

impl sweep::Budgeted for FakeCluster {
    fn budget<R>(&self, f: impl FnOnce(&mut sweep::Budget) -> R) -> R {
        f(&mut self.world().budget)
    }
    fn owned(&self) -> Vec<String> {
        // An archive is kept on purpose, but only one: a run an interruption repeated
        // must not leave a second.
        let mut owned = self.left();
        owned.extend(self.configmaps().keys().map(|n| format!("ConfigMap {n}")));
        owned
    }
}

/// Sweeps one benchmark operation, from `before` to `target`, interrupted at every host call.
async fn sweep_benchmark(
    op: &'static str,
    before: &[&[(&str, Value)]],
    target: Option<&[(&str, Value)]>,
) {
    let make = || {
        let fake = FakeCluster::new("sweep", 2, vec![PodScript::prints(LOG); 2]);
        let k = Benchmark(Arc::clone(&fake));
        (fake, k)
    };
    let config = |extra: &&[(&str, Value)]| {
        let mut attrs = vec![("nodes", Value::int(2))];
        attrs.extend(extra.iter().cloned());
        configured("sweep", "sweep", &attrs)
    };
    let case = sweep::Case::new("benchmark", op, config, before, target);
    sweep::sweep_both(case, make).await;
}

#[tokio::test(start_paused = true)]
async fn a_run_interrupted_at_any_call_converges() {
    sweep_benchmark("create", &[], Some(&[])).await;
}

#[tokio::test(start_paused = true)]
async fn a_run_of_repeats_interrupted_at_any_call_converges() {
    sweep_benchmark("create", &[], Some(&[("repeats", Value::int(2))])).await;
}

#[tokio::test(start_paused = true)]
async fn a_rerun_interrupted_at_any_call_converges() {
    let other = [("command", command(&["python", "bench.py", "--steps", "10"]))];
    sweep_benchmark("replace", &[&[]], Some(&other)).await;
}

#[tokio::test(start_paused = true)]
async fn a_run_destroy_interrupted_at_any_call_converges() {
    sweep_benchmark("delete", &[&[]], None).await;
}

/// The `gpufleet_benchmark_run` action's configuration: the definition of [`configured`]
/// (as an object of the resource's arguments), plus `extra` action attributes.
fn run_action_config(name: &str, pool: &str, def_extra: &[(&str, Value)]) -> Value {
    let definition = configured(name, pool, def_extra);
    let attrs: BTreeMap<String, Value> = definition
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !v.is_null() && k.as_str() != "timeouts")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::object([
        ("benchmark", Value::Object(attrs)),
        ("endpoint_api_key", Value::Null),
        ("timeout", Value::Null),
    ])
}

/// Invokes the action on `fake`; returns its diagnostics and the progress it reported.
async fn invoke_run(
    fake: &Arc<FakeCluster>,
    config: Value,
) -> (gpufleet_engine::diag::Diagnostics, Vec<String>) {
    let said = Mutex::new(Vec::new());
    let sink = |m: String| said.lock().unwrap_or_else(PoisonError::into_inner).push(m);
    let action = BenchmarkRun(fake.clone());
    let d = action.invoke(&Context::default(), config, &sink).await;
    (d, said.into_inner().unwrap_or_else(PoisonError::into_inner))
}

/// The record a run on demand kept, as JSON.
fn kept_record(fake: &FakeCluster) -> (String, Json) {
    let records: BTreeMap<String, Json> = fake
        .configmaps()
        .into_iter()
        .filter(|(_, cm)| cm["metadata"]["labels"]["gpufleet.dev/record"] == "run")
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let (name, cm) = records.into_iter().next().expect("one record");
    assert_eq!(cm["metadata"]["labels"]["gpufleet.dev/benchmark"], "solo");
    let record = serde_json::from_str(cm["data"]["record.json"].as_str().expect("record.json"))
        .expect("record JSON");
    (name, record)
}

#[tokio::test(start_paused = true)]
async fn the_run_action_runs_the_definition_reports_each_phase_and_keeps_the_record() {
    let fake = FakeCluster::new("solo", 1, vec![PodScript::prints(LOG)]);
    let (d, said) = invoke_run(&fake, run_action_config("solo", "solo", &[])).await;

    assert!(!d.has_error(), "{}", support::show(&d));
    let said = said.join("\n");
    for phase in [
        "has its turn on node pool vc-team-a/team-a/solo",
        "created Job gfb-solo (1 node(s), pods launcher)",
        "running on gpu-solo-01",
        "reading the results",
        "status passed: loss = 2.3125, steps = 500, tokens_per_second = 1832.5",
    ] {
        assert!(said.contains(phase), "{phase:?} not in:\n{said}");
    }
    let (name, record) = kept_record(&fake);
    assert!(name.starts_with("gfb-solo-run-"), "{name}");
    assert!(
        said.contains(&format!("record kept in ConfigMap {NAMESPACE}/{name}")),
        "{said}"
    );
    assert_eq!(record["status"], "passed");
    assert_eq!(record["results"]["tokens_per_second"], json!(1832.5));
    assert_eq!(
        record["environment"]["node_pool_id"],
        "vc-team-a/team-a/solo"
    );
    assert_eq!(record["environment_hash"].as_str().map(str::len), Some(64));
    // The run's archive is named in the record and holds the pod's complete log.
    let parts = record["archive"]["configmaps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(parts.len(), 1, "{record:#}");
    let archive = &fake.configmaps()[parts[0].as_str().unwrap_or_default()];
    assert_eq!(
        archive["metadata"]["labels"]["gpufleet.dev/record"],
        "run-archive"
    );
    let logs: Vec<&Json> = archive["data"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("repeat-1.") && k.ends_with(".log"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(logs, [&json!(LOG)], "{archive:#}");
    // The run's own objects go, as after an apply; the record stays.
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_run_on_demand_that_breaks_a_threshold_fails_the_action_and_is_still_recorded() {
    let fake = FakeCluster::new("solo", 1, vec![PodScript::prints(LOG)]);
    let thresholds = Value::Map(BTreeMap::from([(
        "tokens_per_second".to_owned(),
        Value::object([("min", Value::int(2000)), ("max", Value::Null)]),
    )]));
    let config = run_action_config("solo", "solo", &[("thresholds", thresholds)]);
    let (d, said) = invoke_run(&fake, config).await;

    assert!(d.has_error(), "{said:?}");
    let text = support::show(&d);
    assert!(
        text.contains("tokens_per_second = 1832.5 is outside its bound (min 2000)"),
        "{text}"
    );
    let (_, record) = kept_record(&fake);
    assert_eq!(record["status"], "failed");
}

#[tokio::test(start_paused = true)]
async fn a_bad_definition_is_refused_on_its_attribute_before_anything_runs() {
    let fake = FakeCluster::new("solo", 1, vec![PodScript::prints(LOG)]);
    let config = run_action_config(
        "solo",
        "solo",
        &[("node_pool_id", Value::string("not-a-pool-id"))],
    );
    let (d, said) = invoke_run(&fake, config).await;
    let text = support::show(&d);
    assert!(d.has_error(), "{text}");
    assert!(text.contains(" at benchmark.node_pool_id: "), "{text}");
    assert!(said.is_empty(), "{said:?}");
    assert!(fake.events().is_empty(), "{:?}", fake.events());
    assert!(fake.configmaps().is_empty());
}

/// The ConfigMaps of the archive the benchmark `name` keeps as a resource.
fn resource_archive(fake: &FakeCluster, name: &str) -> Vec<String> {
    fake.configmaps()
        .into_iter()
        .filter(|(_, cm)| {
            cm["metadata"]["labels"]["gpufleet.dev/record"] == "archive"
                && cm["metadata"]["labels"]["gpufleet.dev/benchmark"] == name
        })
        .map(|(n, _)| n)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_resource_keeps_one_archive_under_fixed_names_and_destroy_removes_it() {
    let fake = FakeCluster::new("solo", 1, vec![PodScript::prints(LOG); 2]);
    let planned = planned("solo", "solo", &[]).await;
    let first = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    assert!(
        !first.diagnostics.has_error(),
        "{}",
        support::show(&first.diagnostics)
    );
    assert_eq!(resource_archive(&fake, "solo"), ["gfb-solo-archive-0"]);
    assert_eq!(
        first.new_state.get("archive").get("configmaps"),
        &Value::List(vec![Value::string("gfb-solo-archive-0")])
    );

    // A run again (its state lost to a killed apply) overwrites the archive: still one.
    let again = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    assert!(
        !again.diagnostics.has_error(),
        "{}",
        support::show(&again.diagnostics)
    );
    assert_eq!(resource_archive(&fake, "solo"), ["gfb-solo-archive-0"]);

    // The first run's destroy (after `create_before_destroy` made the second) leaves the
    // second's archive, which holds another index.
    let old = apply::apply_delete(fake.as_ref(), &Context::default(), &first.new_state).await;
    assert!(
        old.diagnostics.is_empty(),
        "{}",
        support::show(&old.diagnostics)
    );
    assert_eq!(resource_archive(&fake, "solo"), ["gfb-solo-archive-0"]);

    let gone = apply::apply_delete(fake.as_ref(), &Context::default(), &again.new_state).await;
    assert!(
        gone.diagnostics.is_empty(),
        "{}",
        support::show(&gone.diagnostics)
    );
    assert_eq!(resource_archive(&fake, "solo"), Vec::<String>::new());
}

const BLOCK: &str = "network.topology.nvidia.com/block";

/// `thresholds` with a lower bound on `tokens_per_second`.
fn min_tokens(min: i64) -> Value {
    Value::Map(BTreeMap::from([(
        "tokens_per_second".to_owned(),
        Value::object([("min", Value::int(min)), ("max", Value::Null)]),
    )]))
}

/// A pool of three nodes in two switch blocks (`gpu-units-01` and `-02` in b1, `-03` in b2)
/// whose pods print `logs` in turn.
fn two_blocks(logs: &[&str]) -> Arc<FakeCluster> {
    let fake = FakeCluster::new(
        "units",
        3,
        logs.iter().map(|l| PodScript::prints(l)).collect(),
    );
    for (node, block) in [
        ("gpu-units-01", "b1"),
        ("gpu-units-02", "b1"),
        ("gpu-units-03", "b2"),
    ] {
        fake.label(node, BLOCK, block);
    }
    fake
}

#[tokio::test(start_paused = true)]
async fn a_run_per_block_runs_on_each_block_in_turn_and_fails_the_block_outside_five_percent() {
    let slow = LOG.replace("1832.5", "1700");
    let fake = two_blocks(&[LOG, &slow]);
    let extra = [
        ("per", Value::string("block")),
        ("thresholds", min_tokens(1750)),
    ];
    let first = planned("units", "units", &extra).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &first, None).await;
    assert_recorded(&first, &r);
    let s = &r.new_state;

    // One Job per block, each held to its block's nodes, one after the other.
    let jobs = fake.job_applies();
    let blocks: Vec<&Json> = jobs
        .iter()
        .map(|j| &j["spec"]["template"]["spec"]["nodeSelector"][BLOCK])
        .collect();
    assert_eq!(blocks, [&json!("b1"), &json!("b2")]);
    assert_eq!(fake.most_jobs_at_once(), 1);

    let by_unit = metrics_by(s.get("unit_results"));
    assert_eq!(by_unit.len(), 2, "{by_unit:?}");
    assert_eq!(by_unit["b1"]["tokens_per_second"], "1832.5");
    assert_eq!(by_unit["b2"]["tokens_per_second"], "1700");
    assert_eq!(
        results(s)["tokens_per_second"],
        "1700",
        "results keep the worst block"
    );
    assert_eq!(text(s.get("status")), "failed");
    assert_eq!(
        failures(s),
        [
            "threshold: block b2: tokens_per_second = 1700 is outside its bound (min 1750)"
                .to_owned(),
            "units: tokens_per_second on block b2 = 1700 is more than 5% below block b1 = \
             1832.5 (unit_tolerance 0.05)"
                .to_owned(),
        ]
    );
    let raw = text(s.get("raw_output"));
    assert!(
        raw.contains("==> block b1 <==") && raw.contains("==> block b2 <=="),
        "{raw}"
    );
    assert_eq!(fake.left(), Vec::<String>::new());

    // A wider tolerance and a lower bound are re-checked on the recorded units, no run.
    let looser = [
        ("per", Value::string("block")),
        (
            "unit_tolerance",
            Value::Number("0.1".parse().expect("a number")),
        ),
        ("thresholds", min_tokens(1600)),
    ];
    let relaxed = apply::apply_update(s, &planned("units", "units", &looser).await);
    assert_eq!(text(relaxed.new_state.get("status")), "passed");
    assert_eq!(fake.job_applies().len(), 2, "nothing ran again");
}

#[tokio::test(start_paused = true)]
async fn a_run_per_block_is_refused_where_a_node_has_no_block() {
    let fake = two_blocks(&[LOG, LOG]);
    fake.label("gpu-units-03", BLOCK, "");
    let planned = planned("units", "units", &[("per", Value::string("block"))]).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    let shown = support::show(&r.diagnostics);
    assert!(
        shown.contains("node(s) gpu-units-03 carry no network.topology.nvidia.com/block label"),
        "{shown}"
    );
    assert!(fake.job_applies().is_empty(), "nothing ran");
}

/// What a prescreen pod prints on a node of one GPU with `uncorrectable` ECC errors, in the
/// layout of `nvidia-smi -q` (values made up for the test).
fn screen_log(uuid: &str, uncorrectable: u32) -> String {
    format!(
        "==> gpufleet prescreen: nvidia-smi -q <==\n\
         \n\
         ==============NVSMI LOG==============\n\
         \n\
         Timestamp                                 : Sat Nov 28 10:00:00 2026\n\
         Driver Version                            : 570.124.06\n\
         CUDA Version                              : 12.8\n\
         \n\
         Attached GPUs                             : 1\n\
         GPU 00000000:18:00.0\n\
         \x20   Product Name                          : NVIDIA H100 80GB HBM3\n\
         \x20   Serial Number                         : 1650000000001\n\
         \x20   GPU UUID                              : {uuid}\n\
         \x20   VBIOS Version                         : 96.00.99.00.01\n\
         \x20   ECC Errors\n\
         \x20       Volatile\n\
         \x20           SRAM Correctable              : 0\n\
         \x20           SRAM Uncorrectable            : 0\n\
         \x20           DRAM Correctable              : 3\n\
         \x20           DRAM Uncorrectable            : {uncorrectable}\n\
         \x20   Remapped Rows\n\
         \x20       Correctable Error                 : 0\n\
         \x20       Uncorrectable Error               : 0\n\
         \x20       Pending                           : No\n\
         \x20       Remapping Failure Occurred        : No\n\
         ==> gpufleet prescreen: nvidia-smi topo -m <==\n\
         \x20       GPU0\tCPU Affinity\tNUMA Affinity\n\
         GPU0\t X \t0-55\t0\n\
         ==> gpufleet prescreen: ibstat <==\n\
         ibstat: not found\n\
         ==> gpufleet prescreen: kernel command line <==\n\
         BOOT_IMAGE=/vmlinuz ro iommu=pt\n\
         ==> gpufleet prescreen: nccl environment <==\n\
         NCCL_DEBUG=INFO\n"
    )
}

#[tokio::test(start_paused = true)]
async fn a_prescreen_records_each_node_and_pins_the_run_to_the_nodes_it_passed() {
    let fake = FakeCluster::new(
        "screen",
        3,
        vec![
            PodScript::prints(&screen_log("GPU-aaaa", 0)),
            PodScript::prints(&screen_log("GPU-bbbb", 0)),
            PodScript::prints(LOG),
            PodScript::prints(LOG),
        ],
    );
    let extra = [("nodes", Value::int(2)), ("prescreen", Value::Bool(true))];
    let planned = planned("screen", "screen", &extra).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    assert!(
        !r.diagnostics.has_error(),
        "{}",
        support::show(&r.diagnostics)
    );
    assert_recorded(&planned, &r);
    let s = &r.new_state;
    assert_eq!(text(s.get("status")), "passed");

    // The prescreen Job came first; the run's pods were held to the nodes it passed.
    let jobs = fake.job_applies();
    assert_eq!(jobs.len(), 2, "{:?}", fake.events());
    assert_eq!(jobs[0]["metadata"]["name"], "gfb-screen-prescreen");
    let pinned = &jobs[1]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"];
    let nodes = environment(s, "nodes");
    let ran: Vec<&str> = nodes.split(',').collect();
    let mut pinned: Vec<&str> = pinned
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    pinned.sort_unstable();
    let mut sorted = ran.clone();
    sorted.sort_unstable();
    assert_eq!(pinned, sorted);

    // Each node's report is in node_environments, the prescreen logs in the archive.
    let by_node = node_environments(s);
    let uuids: BTreeSet<&str> = ran
        .iter()
        .map(|n| by_node[*n]["gpu_uuids"].as_str())
        .collect();
    assert_eq!(uuids, BTreeSet::from(["GPU-aaaa", "GPU-bbbb"]));
    let env = &by_node[ran[0]];
    assert_eq!(env["reported_driver_version"], "570.124.06");
    assert_eq!(env["kernel_cmdline"], "BOOT_IMAGE=/vmlinuz ro iommu=pt");
    assert_eq!(env["nccl_env"], "NCCL_DEBUG=INFO");
    assert_eq!(env["gpu_bus_ids"], "00000000:18:00.0");
    let archive = &fake.configmaps()["gfb-screen-archive-0"];
    let screens = archive["data"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("prescreen."))
        .count();
    assert_eq!(screens, 2, "{archive:#}");
    assert_eq!(fake.left(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_node_with_uncorrectable_ecc_errors_stops_the_run_before_it_starts() {
    let fake = FakeCluster::new(
        "screen",
        2,
        vec![
            PodScript::prints(&screen_log("GPU-aaaa", 0)),
            PodScript::prints(&screen_log("GPU-bbbb", 2)),
            PodScript::prints(LOG),
            PodScript::prints(LOG),
        ],
    );
    let extra = [("nodes", Value::int(2)), ("prescreen", Value::Bool(true))];
    let planned = planned("screen", "screen", &extra).await;
    let r = apply::apply_create(fake.as_ref(), &Context::default(), &planned, None).await;
    let shown = support::show(&r.diagnostics);
    assert!(r.diagnostics.has_error(), "{shown}");
    assert!(
        shown.contains("prescreen stopped the run")
            && shown.contains("GPU GPU-bbbb (00000000:18:00.0) has 2 uncorrectable ECC error(s)"),
        "{shown}"
    );
    // No benchmark pod ever existed, and nothing is left.
    let jobs = fake.job_applies();
    assert_eq!(jobs.len(), 1, "{:?}", fake.events());
    assert_eq!(fake.pods_created(), 2);
    assert_eq!(fake.left(), Vec::<String>::new());
    assert!(r.new_state.is_null());
}

/// `node_environments` as text: node → field → value.
fn node_environments(state: &Value) -> BTreeMap<String, BTreeMap<String, String>> {
    state
        .get("node_environments")
        .as_map()
        .into_iter()
        .flatten()
        .map(|(n, m)| {
            let fields = m
                .as_map()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), text(v).to_owned()))
                .collect();
            (n.clone(), fields)
        })
        .collect()
}
