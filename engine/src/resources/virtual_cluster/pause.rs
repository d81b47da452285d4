//! What `vcluster pause` and `vcluster resume` (the Helm driver of the pinned release) do
//! beyond the replica count the rendered StatefulSet carries.
//!
//! Pause annotates the StatefulSet ([`PAUSED`], [`PAUSED_REPLICAS`], [`PAUSED_DATE`]) and
//! scales it to zero; once its pods are gone it deletes the pods the syncer put in the host
//! namespace ([`SYNCED_BY`]): they belong to the vCluster's Service, not the StatefulSet, so
//! scaling down leaves them running. Services, volume claims and other synced objects stay.
//! Resume removes the annotations and scales back up; the restarted syncer recreates the pods.
//!
//! [`render`](super::render) writes the first two annotations; apply stamps the date (render
//! is pure) and, on resume, removes annotations another client such as the vCluster CLI wrote,
//! which a server-side apply would leave in place.

use std::time::SystemTime;

use serde_json::{Value as Json, json};

use crate::backends::kube::{
    ObjectError,
    host::{HostObjects, ObjectKind},
};

/// `"true"` on the StatefulSet of a paused virtual cluster; `vcluster list` shows it as
/// `Paused`.
pub const PAUSED: &str = "loft.sh/paused";
/// The replica count to resume to.
pub const PAUSED_REPLICAS: &str = "loft.sh/paused-replicas";
/// When it was paused (RFC 3339).
pub const PAUSED_DATE: &str = "loft.sh/paused-date";
/// The label vCluster's syncer puts on every host pod it syncs, naming the virtual cluster.
pub const SYNCED_BY: &str = "vcluster.loft.sh/managed-by";

/// The three pause annotations.
const ANNOTATIONS: [&str; 3] = [PAUSED, PAUSED_REPLICAS, PAUSED_DATE];

fn annotation<'a>(o: &'a Json, key: &str) -> Option<&'a str> {
    o.pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))
        .and_then(Json::as_str)
}

/// The date to record for a pause: the live StatefulSet's own when it is paused already (so
/// every apply writes the same value and the first time is kept), otherwise now.
pub fn paused_date(live: Option<&Json>) -> String {
    live.filter(|o| annotation(o, PAUSED) == Some("true"))
        .and_then(|o| annotation(o, PAUSED_DATE))
        .map_or_else(
            || humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            str::to_owned,
        )
}

/// Whether `sts` carries any pause annotation.
pub fn has_annotations(sts: &Json) -> bool {
    ANNOTATIONS.iter().any(|k| annotation(sts, k).is_some())
}

/// The merge patch that removes the pause annotations, as `vcluster resume` does.
pub fn resume_patch() -> Json {
    let nulls: serde_json::Map<String, Json> = ANNOTATIONS
        .iter()
        .map(|k| ((*k).to_owned(), Json::Null))
        .collect();
    json!({ "metadata": { "annotations": nulls } })
}

/// Deletes the pods virtual cluster `name` synced into `namespace`, returning how many there
/// were. Call it only once the control plane has stopped: a running syncer recreates them.
pub async fn delete_synced_pods(
    host: &dyn HostObjects,
    namespace: &str,
    name: &str,
) -> Result<usize, ObjectError> {
    let selector = format!("{SYNCED_BY}={name}");
    let pods = host
        .list(ObjectKind::Pod, Some(namespace), &selector)
        .await?;
    for pod in pods
        .iter()
        .filter_map(|p| p.pointer("/metadata/name").and_then(Json::as_str))
    {
        host.delete(ObjectKind::Pod, Some(namespace), pod).await?;
    }
    Ok(pods.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_statefulset_keeps_its_date() {
        let paused = json!({ "metadata": { "annotations": {
            PAUSED: "true", PAUSED_REPLICAS: "1", PAUSED_DATE: "2026-01-01T00:00:00Z",
        } } });
        assert_eq!(paused_date(Some(&paused)), "2026-01-01T00:00:00Z");
        assert!(has_annotations(&paused));
        // A running StatefulSet with a stale date gets a new one.
        let running = json!({ "metadata": { "annotations": {
            PAUSED_DATE: "2026-01-01T00:00:00Z",
        } } });
        let now = paused_date(Some(&running));
        assert_ne!(now, "2026-01-01T00:00:00Z");
        assert!(humantime::parse_rfc3339(&now).is_ok(), "{now}");
        assert!(!has_annotations(&json!({ "metadata": {} })));
    }

    #[test]
    fn resume_removes_all_three_annotations() {
        assert_eq!(
            resume_patch(),
            json!({ "metadata": { "annotations": {
                "loft.sh/paused": null,
                "loft.sh/paused-replicas": null,
                "loft.sh/paused-date": null,
            } } })
        );
    }
}
