//! Registering the fleet's nodes in the lab's API server, and waiting for kwok to make
//! them Ready.
//!
//! Registration makes the cluster match the fleet: missing nodes are created (up to
//! `concurrency` requests in flight, so 1,000 nodes register in seconds), nodes whose
//! labels drifted are patched, and nodes the lab manages that are no longer in the fleet
//! are deleted. It is idempotent: running it again changes nothing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

use crate::error::LabError;
use crate::fleet::{Fleet, FleetNode, MANAGED_BY, MANAGED_BY_LABEL};

/// The field manager the lab's writes are recorded under.
pub const FIELD_MANAGER: &str = "gpufleet-lab";

/// What [`sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Nodes created.
    pub created: usize,
    /// Nodes that were there already, unchanged.
    pub unchanged: usize,
    /// Nodes whose labels (and capacity) were brought back to the spec.
    pub updated: usize,
    /// Managed nodes deleted because they left the fleet.
    pub deleted: usize,
    /// How long it took.
    pub took: Duration,
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Api { what, source }
}

/// The label selector of the nodes the lab manages.
#[must_use]
pub fn managed_selector() -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY}")
}

/// Makes the API server's nodes match the fleet. `kubelet_port` is kwok's server port, where
/// the API server reaches every node's "kubelet" (logs, exec).
///
/// # Errors
/// When a request fails (other than "already exists" on create, which counts as there).
pub async fn sync(
    client: &kube::Client,
    fleet: &Fleet,
    concurrency: usize,
    kubelet_port: u16,
) -> Result<SyncReport, LabError> {
    let started = Instant::now();
    let api: Api<Node> = Api::all(client.clone());
    let existing = api
        .list(&ListParams::default().labels(&managed_selector()))
        .await
        .map_err(api_err("list the lab's nodes"))?;
    let existing: HashMap<String, Node> = existing
        .items
        .into_iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, n)))
        .collect();

    let mut report = SyncReport::default();
    let mut to_create: Vec<&FleetNode> = Vec::new();
    let mut to_relabel: Vec<&FleetNode> = Vec::new();
    for node in fleet.nodes() {
        match existing.get(&node.name) {
            None => to_create.push(node),
            Some(current) if !is_current(current, node, kubelet_port) => to_relabel.push(node),
            Some(_) => report.unchanged += 1,
        }
    }
    let to_delete: Vec<String> = existing
        .keys()
        .filter(|name| fleet.node(name).is_none())
        .cloned()
        .collect();

    let concurrency = concurrency.max(1);
    let created: Vec<bool> = futures_util::stream::iter(to_create)
        .map(|node| {
            let api = api.clone();
            async move {
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                match api.create(&params, &node.to_node()).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
                    Err(e) => Err(api_err(format!("create node {}", node.name))(e)),
                }
            }
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    report.created = created.iter().filter(|c| **c).count();
    report.unchanged += created.len() - report.created;

    for node in to_relabel {
        // A JSON merge patch of the spec's labels; other labels are left alone.
        let patch = serde_json::json!({ "metadata": { "labels": node.labels() } });
        api.patch(
            &node.name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(api_err(format!("relabel node {}", node.name)))?;
        let status = serde_json::json!({ "status": {
            "capacity": node.capacity(),
            "allocatable": node.capacity(),
            "addresses": node.to_node().status.and_then(|s| s.addresses),
            "daemonEndpoints": { "kubeletEndpoint": { "Port": kubelet_port } },
        }});
        api.patch_status(
            &node.name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&status),
        )
        .await
        .map_err(api_err(format!(
            "update the capacity of node {}",
            node.name
        )))?;
        report.updated += 1;
    }
    for name in to_delete {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => report.deleted += 1,
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(api_err(format!("delete node {name}"))(e)),
        }
    }
    report.took = started.elapsed();
    Ok(report)
}

/// Whether a registered node matches its spec: its labels (others add labels too, kwok the
/// beta os/arch ones, so only the spec's are compared), its addresses, and the port its
/// kubelet is reached at (nodes registered by an older lab may lack the last two).
fn is_current(current: &Node, spec: &FleetNode, kubelet_port: u16) -> bool {
    let labels = current.metadata.labels.clone().unwrap_or_default();
    let status = current.status.clone().unwrap_or_default();
    let port = status
        .daemon_endpoints
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port);
    spec.labels().iter().all(|(k, v)| labels.get(k) == Some(v))
        && status.addresses == spec.to_node().status.and_then(|s| s.addresses)
        && port == Some(i32::from(kubelet_port))
}

/// Whether a node's `Ready` condition is `True`.
#[must_use]
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Counts the fleet's nodes that are registered and Ready (and settled, see `settled`):
/// `(ready, registered)`.
///
/// # Errors
/// When the list fails.
pub async fn count_ready(client: &kube::Client, fleet: &Fleet) -> Result<(usize, usize), LabError> {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = api
        .list(&ListParams::default().labels(&managed_selector()))
        .await
        .map_err(api_err("list the lab's nodes"))?;
    let in_fleet: Vec<&Node> = nodes
        .items
        .iter()
        .filter(|n| {
            n.metadata
                .name
                .as_deref()
                .is_some_and(|name| fleet.node(name).is_some())
        })
        .collect();
    let ready = in_fleet
        .iter()
        .filter(|n| is_ready(n) && settled(n))
        .count();
    Ok((ready, in_fleet.len()))
}

/// Whether the controller manager has caught up with a Ready node: its `not-ready` taint
/// lifted and the `beta.kubernetes.io` labels it mirrors from the stable ones added. Until
/// then the node still changes on its own, and a test that notes every node before it
/// starts would see it change under it.
fn settled(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == "node.kubernetes.io/not-ready"));
    let labels = node.metadata.labels.as_ref();
    let mirrored = labels.is_none_or(|l| {
        !l.contains_key("kubernetes.io/os") || l.contains_key("beta.kubernetes.io/os")
    });
    !tainted && mirrored
}

/// Waits until every node of the fleet is Ready (kwok's node-initialize stage).
///
/// # Errors
/// [`LabError::Timeout`] when some are not Ready within `timeout`.
pub async fn wait_ready(
    client: &kube::Client,
    fleet: &Fleet,
    timeout: Duration,
) -> Result<Duration, LabError> {
    let started = Instant::now();
    let total = fleet.nodes().len();
    let mut last = (0, 0);
    loop {
        match count_ready(client, fleet).await {
            Ok(counts) => {
                last = counts;
                if counts.0 == total {
                    return Ok(started.elapsed());
                }
            }
            Err(e) => tracing::debug!("listing nodes: {e}"),
        }
        if started.elapsed() >= timeout {
            return Err(LabError::Timeout {
                what: "the fleet's nodes to become Ready".into(),
                waited: timeout,
                state: format!(
                    "{} of {total} Ready, {} registered; see the kwok log",
                    last.0, last.1
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
