//! Node sync from the host, like vCluster's `sync.fromHost.nodes`: the host nodes the
//! selector picks appear in the virtual cluster with their name, labels,
//! capacity/allocatable and Ready condition, and disappear once they no longer match. A
//! tenant listing nodes sees its pool's nodes and no one else's.
//!
//! Copies carry the annotation [`SYNCED_FROM_HOST`]; nodes without it (a tenant's own) are
//! left alone. Writes are server-side applies, so a label removed on the host is removed
//! from the copy, and an unchanged node costs no write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::config::NodeSync;

/// The annotation on node copies.
pub const SYNCED_FROM_HOST: &str = "gpufleet.dev/synced-from-host";

/// The field manager of the stand-in's writes in a virtual cluster.
pub const FIELD_MANAGER: &str = "vcluster-standin";

/// What one node sync did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSyncReport {
    /// Copies created or changed.
    pub applied: usize,
    /// Copies removed.
    pub deleted: usize,
    /// Copies that were already current.
    pub unchanged: usize,
}

/// The metadata part of the copy of `host` (what the main resource gets).
fn copy_metadata(host: &Node) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": host.metadata.name,
            "labels": host.metadata.labels.clone().unwrap_or_default(),
            "annotations": { SYNCED_FROM_HOST: "true" },
        },
    })
}

/// The status part of the copy of `host`: capacity, allocatable and the Ready condition
/// (without its heartbeat, which would make every sync a write).
fn copy_status(host: &Node) -> Value {
    let status = host.status.clone().unwrap_or_default();
    let ready: Vec<Value> = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ == "Ready")
        .map(|c| {
            json!({
                "type": "Ready",
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": c.last_transition_time,
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": host.metadata.name },
        "status": {
            "capacity": status.capacity.unwrap_or_default(),
            "allocatable": status.allocatable.unwrap_or_default(),
            "conditions": ready,
        },
    })
}

/// Whether `copy` already says what `host` says.
fn is_current(copy: &Node, host: &Node) -> bool {
    let labels = |n: &Node| n.metadata.labels.clone().unwrap_or_default();
    let status = |n: &Node| n.status.clone().unwrap_or_default();
    let ready = |n: &Node| {
        status(n)
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.status, c.reason))
    };
    labels(copy) == labels(host)
        && status(copy).capacity == status(host).capacity
        && status(copy).allocatable == status(host).allocatable
        && ready(copy) == ready(host)
}

/// Makes the nodes of the virtual cluster behind `virtual_nodes` match the host nodes
/// `selection` picks out of `host_nodes`.
///
/// # Errors
/// The first failed request.
pub async fn sync(
    host_nodes: &[Node],
    selection: &NodeSync,
    virtual_nodes: &Api<Node>,
) -> Result<NodeSyncReport, kube::Error> {
    let wanted: BTreeMap<String, &Node> = host_nodes
        .iter()
        .filter(|n| selection.selects(&n.metadata.labels.clone().unwrap_or_default()))
        .filter_map(|n| Some((n.metadata.name.clone()?, n)))
        .collect();
    let existing: BTreeMap<String, Node> = virtual_nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, n)))
        .collect();
    let mut report = NodeSyncReport::default();
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    for (name, host) in &wanted {
        if existing
            .get(name)
            .is_some_and(|copy| is_current(copy, host))
        {
            report.unchanged += 1;
            continue;
        }
        virtual_nodes
            .patch(name, &apply, &Patch::Apply(copy_metadata(host)))
            .await?;
        virtual_nodes
            .patch_status(name, &apply, &Patch::Apply(copy_status(host)))
            .await?;
        report.applied += 1;
    }
    for (name, copy) in &existing {
        let synced = copy
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(SYNCED_FROM_HOST));
        if synced && !wanted.contains_key(name) {
            match virtual_nodes.delete(name, &DeleteParams::default()).await {
                Ok(_) => report.deleted += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &Value, gpus: &str, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": "gpu-1", "labels": labels },
            "status": {
                "capacity": { "nvidia.com/gpu": gpus },
                "allocatable": { "nvidia.com/gpu": gpus },
                "conditions": [
                    { "type": "Ready", "status": ready, "reason": "KubeletReady",
                      "lastHeartbeatTime": "2026-01-01T00:00:00Z" },
                    { "type": "MemoryPressure", "status": "False" }
                ]
            }
        }))
        .expect("node")
    }

    #[test]
    fn the_copy_carries_labels_resources_and_readiness_only() {
        let host = node(&json!({ "gpufleet.dev/tenant": "a" }), "8", "True");
        let status = copy_status(&host);
        assert_eq!(status["status"]["allocatable"]["nvidia.com/gpu"], "8");
        let conditions = status["status"]["conditions"].as_array().expect("list");
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["status"], "True");
        assert!(conditions[0].get("lastHeartbeatTime").is_none());
        let meta = copy_metadata(&host);
        assert_eq!(meta["metadata"]["labels"]["gpufleet.dev/tenant"], "a");
        assert_eq!(meta["metadata"]["annotations"][SYNCED_FROM_HOST], "true");
    }

    #[test]
    fn a_copy_is_stale_when_labels_resources_or_readiness_change() {
        let host = node(&json!({ "a": "1" }), "8", "True");
        assert!(is_current(&host, &host));
        assert!(!is_current(&node(&json!({ "a": "2" }), "8", "True"), &host));
        assert!(!is_current(&node(&json!({ "a": "1" }), "4", "True"), &host));
        assert!(!is_current(
            &node(&json!({ "a": "1" }), "8", "False"),
            &host
        ));
    }
}
