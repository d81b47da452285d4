//! The status of a vCluster pod, as its kubelet reports it: kwok moves the pod to Running
//! with its addresses but leaves it not ready (lab/kube/stages), and the lab's vCluster
//! kubelet says when the syncer is ready, when it exited, and why it is not running.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value as Json, json};

/// The state of the pod's main container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerState {
    /// Running since `started_at` (RFC 3339); ready or not.
    Running {
        /// When it started.
        started_at: String,
        /// Whether `/readyz` answers.
        ready: bool,
    },
    /// Not running, and why (`CrashLoopBackOff`, `ErrImagePull`, `CreateContainerError`).
    Waiting {
        /// The reason, as the kubelet words it.
        reason: String,
        /// The details.
        message: String,
    },
}

/// How the container last ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastExit {
    /// Its exit code (137 when killed).
    pub exit_code: i32,
    /// When (RFC 3339).
    pub finished_at: String,
}

/// The time now, as Kubernetes writes it.
#[must_use]
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The strategic-merge patch of the pod's status for `state`.
#[must_use]
pub fn patch_body(
    container: &str,
    image: &str,
    state: &ContainerState,
    restarts: u32,
    last: Option<&LastExit>,
    uid: &str,
) -> Json {
    let now = now();
    let (ready, started, state_json) = match state {
        ContainerState::Running { started_at, ready } => (
            *ready,
            true,
            json!({ "running": { "startedAt": started_at } }),
        ),
        ContainerState::Waiting { reason, message } => (
            false,
            false,
            json!({ "waiting": { "reason": reason, "message": message } }),
        ),
    };
    let mut status = json!({
        "name": container,
        "image": image,
        "imageID": "",
        "containerID": format!("gpufleet-lab://{uid}/{restarts}"),
        "ready": ready,
        "started": started,
        "restartCount": restarts,
        "state": state_json,
    });
    if let Some(l) = last {
        status["lastState"] = json!({ "terminated": {
            "exitCode": l.exit_code,
            "finishedAt": l.finished_at,
            "reason": if l.exit_code == 0 { "Completed" } else { "Error" },
        }});
    }
    let flag = if ready { "True" } else { "False" };
    json!({ "status": {
        "conditions": [
            { "type": "Ready", "status": flag, "lastTransitionTime": now },
            { "type": "ContainersReady", "status": flag, "lastTransitionTime": now },
        ],
        "containerStatuses": [status],
    }})
}

/// Writes `body` to the status of `pod`.
///
/// # Errors
/// When the API server refuses it.
pub async fn write(host: &Client, pod: &Pod, body: Json) -> Result<(), kube::Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    Api::<Pod>::namespaced(host.clone(), &namespace)
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .map(|_| ())
}

/// Whether the pod's status already says the container is ready (or not).
#[must_use]
pub fn says_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loop_reads_as_the_kubelet_writes_it() {
        let body = patch_body(
            "syncer",
            "ghcr.io/loft-sh/vcluster-oss:0.36.0",
            &ContainerState::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: "back-off 20s restarting failed container=syncer".into(),
            },
            2,
            Some(&LastExit {
                exit_code: 1,
                finished_at: "2026-01-01T00:00:00Z".into(),
            }),
            "u",
        );
        let c = &body["status"]["containerStatuses"][0];
        assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(c["restartCount"], 2);
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(body["status"]["conditions"][0]["status"], "False");
    }
}
