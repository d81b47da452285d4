//! Waiting for a run: every pod of its gang started together (step 3), then its Job (or
//! MPIJob) finished (step 4).

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value as Json;
use tokio::time::Instant;

use crate::{
    backends::kube::{
        ObjectError,
        host::{HostObjects, ObjectKind},
        json::str_at,
    },
    timeouts::{self, Operation},
};

use super::{
    error::{RunError, StepError},
    model::BenchmarkSpec,
    render,
    shape::{Shape, index_of},
};

/// How often pods and the Job are polled.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// A pod's phase; `Pending` until the kubelet reports one.
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
pub(super) async fn run_pods(
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
pub(super) fn nodes_of(pods: &[Json]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| str_at(p, "/spec/nodeName"))
        .map(str::to_owned)
        .collect()
}

/// Step 3: all pods running (or done) together before the gang deadline. Returns the nodes
/// they run on, in index order (MPI workers are gone once the launcher is done, so this is
/// when they are known); empty when the run failed before the gang formed.
pub(super) async fn wait_gang(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    shape: &Shape,
    started: Instant,
    deadline: Instant,
    pool_size: Option<usize>,
) -> Result<Vec<String>, StepError> {
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
                }
                .into());
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
            }
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Step 4: the run's final condition, `true` when it succeeded.
pub(super) async fn wait_done(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    shape: &Shape,
    deadline: Instant,
    limit: Duration,
) -> Result<bool, StepError> {
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
            return Err(StepError::TimedOut {
                op: Operation::Create,
                waited: limit,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until no pod of the benchmark is left, polling within `limit`.
pub(super) async fn wait_pods_gone(
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
