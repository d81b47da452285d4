//! A control plane that runs without its kubeconfig Secret `vc-<name>`.
//!
//! The syncer writes that Secret once, after it becomes leader and starts its controllers,
//! retrying every 10 s until it succeeds. Its pod is Ready before that (the probe asks the
//! API server), so a Ready pod without the Secret is usually one that is about to write it:
//! right after `helm install`, or on a busy host. Restarting it then throws away a control
//! plane that was fine. It only never comes when the Secret went after it was written:
//!
//! - the syncer makes the Service `<name>` the Secret's owner, so a Service deleted out of
//!   band takes the Secret with it through the garbage collector. The apply that puts the
//!   Service back sees a Service newer than the pod, and restarts the pod at once
//!   ([`restart_if_owner_replaced`]);
//! - a Secret deleted by hand is only told apart by time: a pod that stays Ready without it
//!   for [`GRACE`] is restarted, once per wait ([`Overdue`]).
//!
//! Deleting the pod, as an operator would, lets the StatefulSet start the syncer again, which
//! writes the Secret.

use std::time::Duration;

use serde_json::Value as Json;
use tokio::time::Instant;

use super::objects::Names;
use crate::backends::kube::{
    ObjectError,
    host::{HostObjects, ObjectKind},
};

/// How long a Ready control plane may go without writing its Secret before it is restarted:
/// several of the syncer's 10 s retries.
pub(super) const GRACE: Duration = Duration::from_secs(60);

fn str_at<'a>(o: &'a Json, ptr: &str) -> Option<&'a str> {
    o.pointer(ptr).and_then(Json::as_str)
}

/// When `o` was made, by the API server's clock (a pod's `startTime` is its node's).
fn created(o: &Json) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(str_at(o, "/metadata/creationTimestamp")?).ok()
}

/// Deletes the control plane's pods that are not going already (with `made_before`, only
/// those made before then), so that the StatefulSet starts them again and the leader among
/// the new ones writes Secret `vc-<name>`. Every replica goes: the leader that would write it
/// need not be the newest pod.
pub(super) async fn restart(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
    made_before: Option<std::time::SystemTime>,
    why: &str,
) -> Result<(), ObjectError> {
    let ns = Some(namespace);
    for pod in host
        .list(ObjectKind::Pod, ns, &names.control_plane_pods())
        .await?
    {
        let going = pod.pointer("/metadata/deletionTimestamp").is_some();
        let spared = made_before.is_some_and(|t| created(&pod).is_none_or(|c| c >= t));
        let Some(name) = str_at(&pod, "/metadata/name").filter(|_| !going && !spared) else {
            continue;
        };
        tracing::info!(
            namespace,
            pod = name,
            "the control plane runs without Secret {} ({why}): restarting it",
            names.kubeconfig()
        );
        host.delete(ObjectKind::Pod, ns, name).await?;
    }
    Ok(())
}

/// Restarts the control plane's pods when Secret `vc-<name>` is missing and the Service
/// `<name>` that owned it was made after they started: the garbage collector took what they
/// wrote, and they will not write it again. Called after an apply's writes.
pub(super) async fn restart_if_owner_replaced(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
) -> Result<(), ObjectError> {
    let ns = Some(namespace);
    if host
        .get(ObjectKind::Secret, ns, &names.kubeconfig())
        .await?
        .is_some()
    {
        return Ok(());
    }
    let Some(service_made) = host
        .get(ObjectKind::Service, ns, &names.name)
        .await?
        .as_ref()
        .and_then(created)
    else {
        return Ok(());
    };
    let why = format!("Service {} was replaced after it started", names.name);
    restart(host, namespace, names, Some(service_made), &why).await
}

/// Tracks, while waiting for a control plane, how long its Ready pod has gone without
/// writing the Secret, by this process's clock (the host's may differ).
#[derive(Debug, Default)]
pub(super) struct Overdue {
    /// The pod's uid, and when it was first seen Ready without the Secret.
    since: Option<(String, Instant)>,
    /// Whether this wait restarted a pod already.
    restarted: bool,
}

impl Overdue {
    /// Whether `pod`, Ready without the Secret now, has been so for [`GRACE`] and is the first
    /// this wait restarts. Another pod (a restart's successor) starts the count again.
    pub(super) fn due(&mut self, pod: &Json, now: Instant) -> bool {
        let uid = str_at(pod, "/metadata/uid").unwrap_or_default();
        match &self.since {
            Some((seen, at)) if seen == uid => {
                if self.restarted || now.duration_since(*at) < GRACE {
                    return false;
                }
                self.restarted = true;
                true
            }
            _ => {
                self.since = Some((uid.to_owned(), now));
                false
            }
        }
    }

    /// Forgets the pod: the Secret came, or the control plane is not Ready.
    pub(super) fn clear(&mut self) {
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(uid: &str) -> Json {
        json!({ "metadata": { "name": "vc-0", "uid": uid } })
    }

    #[test]
    fn a_pod_is_restarted_once_after_the_grace_and_a_successor_starts_a_new_count() {
        let t0 = Instant::now();
        let mut o = Overdue::default();
        assert!(!o.due(&pod("a"), t0));
        assert!(!o.due(&pod("a"), t0 + GRACE - Duration::from_secs(1)));
        assert!(o.due(&pod("a"), t0 + GRACE));
        assert!(!o.due(&pod("a"), t0 + GRACE * 2), "restarted once only");
        // The successor gets its own grace, and is not restarted by this wait again.
        let t1 = t0 + GRACE * 2;
        assert!(!o.due(&pod("b"), t1));
        assert!(!o.due(&pod("b"), t1 + GRACE));
    }

    #[test]
    fn a_pause_in_the_wait_starts_the_count_again() {
        let t0 = Instant::now();
        let mut o = Overdue::default();
        assert!(!o.due(&pod("a"), t0));
        o.clear();
        assert!(!o.due(&pod("a"), t0 + GRACE));
        assert!(o.due(&pod("a"), t0 + GRACE * 2));
    }

    #[test]
    fn objects_are_ordered_by_the_api_servers_clock_not_the_nodes() {
        // The node's clock runs ahead: its startTime would say the pod is the newer one.
        let p = json!({ "metadata": { "creationTimestamp": "2026-01-01T00:00:00Z" },
                        "status": { "startTime": "2026-01-01T00:00:05Z" } });
        let s = json!({ "metadata": { "creationTimestamp": "2026-01-01T00:00:03Z" } });
        assert!(created(&p) < created(&s));
    }
}
