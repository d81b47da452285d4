//! Pod sync to the host, like vCluster's syncer (`sync.toHost.pods`): every pod of the
//! virtual cluster gets a host pod `<pod>-x-<namespace>-x-<vcluster>` in the host
//! namespace, with the enforced tolerations added and the node selector of
//! `sync.fromHost.nodes.selector.labels`; the host's scheduler places it and kwok runs it,
//! and its node and status are copied back to the virtual pod. So a tenant's GPU pod lands
//! where the tenant's tier says it may.
//!
//! The virtual cluster has no scheduler and no kubelet: binding (`pods/binding`) and
//! status come from here, and so does the end of a graceful deletion (the virtual pod is
//! removed once its host pod is gone).

use std::collections::{BTreeMap, BTreeSet};

use aws_lc_rs::digest;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::config::PodSync;
use super::record::Record;

/// The label on host pods naming the virtual cluster they belong to.
pub const MANAGED_BY_LABEL: &str = "vcluster.loft.sh/managed-by";
/// The annotation on host pods with the virtual pod's name.
pub const OBJECT_NAME: &str = "vcluster.loft.sh/object-name";
/// The annotation on host pods with the virtual pod's namespace.
pub const OBJECT_NAMESPACE: &str = "vcluster.loft.sh/object-namespace";

/// The host name of pod `name` in virtual namespace `namespace` of virtual cluster
/// `vcluster`: `<name>-x-<namespace>-x-<vcluster>`, shortened as vCluster's
/// `SafeConcatName` does when longer than 63 characters (52 characters, `-`, then 10 hex
/// digits of its SHA-256).
#[must_use]
pub fn host_name(name: &str, namespace: &str, vcluster: &str) -> String {
    let full = format!("{name}-x-{namespace}-x-{vcluster}");
    if full.len() <= 63 {
        return full;
    }
    let sum = digest::digest(&digest::SHA256, full.as_bytes());
    let hex: String = sum.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}", &full[..52], &hex[..10]).replace(".-", "-")
}

/// The host pod for virtual pod `pod`.
#[must_use]
pub fn host_pod(pod: &Pod, record: &Record, sync: &PodSync) -> Option<Pod> {
    let name = pod.metadata.name.as_deref()?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut spec: PodSpec = pod.spec.clone()?;
    // The host's scheduler and service accounts decide these, not the virtual cluster's.
    spec.node_name = None;
    spec.service_account_name = None;
    spec.automount_service_account_token = Some(false);
    spec.priority = None;
    spec.priority_class_name = None;
    spec.preemption_policy = None;
    spec.runtime_class_name = None;
    let mut selector = spec.node_selector.take().unwrap_or_default();
    selector.extend(sync.node_selector.clone());
    spec.node_selector = (!selector.is_empty()).then_some(selector);
    let mut tolerations = spec.tolerations.take().unwrap_or_default();
    for t in &sync.enforce_tolerations {
        if !tolerations.contains(t) {
            tolerations.push(t.clone());
        }
    }
    spec.tolerations = (!tolerations.is_empty()).then_some(tolerations);
    let labels: BTreeMap<String, String> = [
        (MANAGED_BY_LABEL.to_string(), record.name.clone()),
        (
            "vcluster.loft.sh/namespace".to_string(),
            namespace.to_string(),
        ),
    ]
    .into();
    let annotations: BTreeMap<String, String> = [
        (OBJECT_NAME.to_string(), name.to_string()),
        (OBJECT_NAMESPACE.to_string(), namespace.to_string()),
    ]
    .into();
    Some(Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(host_name(name, namespace, &record.name)),
            namespace: Some(record.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// One pass of pod sync for the virtual cluster behind `virtual_client`.
///
/// # Errors
/// The first failed request.
pub async fn sync(
    host: &Client,
    record: &Record,
    sync: &PodSync,
    virtual_client: &Client,
) -> Result<(), kube::Error> {
    let host_pods: Api<Pod> = Api::namespaced(host.clone(), &record.namespace);
    let selector = format!("{MANAGED_BY_LABEL}={}", record.name);
    let on_host: BTreeMap<String, Pod> = host_pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, p)))
        .collect();
    let virtual_pods = Api::<Pod>::all(virtual_client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut wanted = BTreeSet::new();
    for pod in &virtual_pods {
        let (Some(name), Some(namespace)) = (
            pod.metadata.name.as_deref(),
            pod.metadata.namespace.as_deref(),
        ) else {
            continue;
        };
        let hname = host_name(name, namespace, &record.name);
        wanted.insert(hname.clone());
        let vapi: Api<Pod> = Api::namespaced(virtual_client.clone(), namespace);
        let host_pod_now = on_host.get(&hname);
        if pod.metadata.deletion_timestamp.is_some() {
            // No kubelet finishes the deletion: the host pod goes first, then the
            // virtual pod for good.
            if host_pod_now.is_some() {
                ignore_missing(host_pods.delete(&hname, &DeleteParams::default()).await)?;
            } else {
                ignore_missing(
                    vapi.delete(name, &DeleteParams::default().grace_period(0))
                        .await,
                )?;
            }
            continue;
        }
        let Some(hp) = host_pod_now else {
            if node_name(pod).is_some() && !is_finished(pod) {
                // Its host pod was removed under it: so is the virtual pod, as in vCluster.
                ignore_missing(
                    vapi.delete(name, &DeleteParams::default().grace_period(0))
                        .await,
                )?;
            } else if node_name(pod).is_none()
                && let Some(new) = host_pod(pod, record, sync)
            {
                match host_pods.create(&PostParams::default(), &new).await {
                    Ok(_) => tracing::info!(
                        "virtual cluster {}: pod {namespace}/{name} synced to host pod {hname}",
                        record.key()
                    ),
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
            continue;
        };
        if let Some(node) = node_name(hp)
            && node_name(pod).is_none()
        {
            bind(virtual_client, namespace, name, node).await?;
        }
        let host_status = serde_json::to_value(&hp.status).unwrap_or_default();
        let virtual_status = serde_json::to_value(&pod.status).unwrap_or_default();
        // Only write when the merge would change something: fields the virtual API set
        // and the host does not have must not cause a write on every pass.
        let mut merged = virtual_status.clone();
        merge(&mut merged, &host_status);
        if merged != virtual_status && !host_status.is_null() {
            vapi.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": host_status })),
            )
            .await?;
        }
    }
    for hname in on_host.keys().filter(|h| !wanted.contains(*h)) {
        ignore_missing(host_pods.delete(hname, &DeleteParams::default()).await)?;
    }
    Ok(())
}

/// Binds a virtual pod to `node`, as a scheduler would (`pods/binding`).
async fn bind(client: &Client, namespace: &str, name: &str, node: &str) -> Result<(), kube::Error> {
    let body = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": { "name": name },
        "target": { "apiVersion": "v1", "kind": "Node", "name": node },
    });
    let request = http::Request::post(format!(
        "/api/v1/namespaces/{namespace}/pods/{name}/binding"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&body).unwrap_or_default())
    .map_err(kube::Error::HttpError)?;
    match client.request::<serde_json::Value>(request).await {
        Ok(_) => Ok(()),
        // Already bound (a pass raced another): nothing to do.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes every host pod synced from the virtual cluster of `record` (on pause and on
/// delete, as vCluster does).
///
/// # Errors
/// When the pods cannot be listed or deleted.
pub async fn remove_all(host: &Client, record: &Record) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(host.clone(), &record.namespace);
    let selector = format!("{MANAGED_BY_LABEL}={}", record.name);
    let list = pods.list(&ListParams::default().labels(&selector)).await?;
    for p in list.items {
        if let Some(name) = p.metadata.name {
            ignore_missing(pods.delete(&name, &DeleteParams::default()).await)?;
        }
    }
    Ok(())
}

/// JSON merge patch (RFC 7386) of `patch` into `target`.
fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn ignore_missing<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcluster::config::parse_toleration;

    #[test]
    fn merging_what_the_target_already_says_changes_nothing() {
        let virtual_status = json!({ "phase": "Running", "qosClass": "BestEffort" });
        let mut merged = virtual_status.clone();
        merge(&mut merged, &json!({ "phase": "Running" }));
        assert_eq!(merged, virtual_status);
        merge(
            &mut merged,
            &json!({ "phase": "Succeeded", "hostIP": null }),
        );
        assert_eq!(merged["phase"], "Succeeded");
    }

    #[test]
    fn host_names_follow_vclusters_scheme() {
        assert_eq!(host_name("train", "ml", "acme"), "train-x-ml-x-acme");
        let long = host_name(&"p".repeat(40), "team-namespace", "tenant-cluster");
        assert_eq!(long.len(), 63);
        assert!(long.starts_with(&"p".repeat(40)));
        assert_eq!(
            long,
            host_name(&"p".repeat(40), "team-namespace", "tenant-cluster")
        );
    }

    #[test]
    fn host_pods_get_the_tiers_selector_and_tolerations() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "train", "namespace": "ml" },
            "spec": {
                "nodeSelector": { "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" },
                "serviceAccountName": "default",
                "priority": 0,
                "containers": [{ "name": "c", "image": "pytorch",
                                 "resources": { "limits": { "nvidia.com/gpu": "1" } } }]
            }
        }))
        .expect("pod");
        let sync = PodSync {
            enabled: true,
            enforce_tolerations: vec![
                parse_toleration("gpufleet.dev/tenant=acme:NoSchedule").expect("toleration"),
            ],
            node_selector: [("gpufleet.dev/tenant".to_string(), "acme".to_string())].into(),
        };
        let record = Record::new("vc-acme", "acme", "uid", 1);
        let host = host_pod(&pod, &record, &sync).expect("host pod");
        assert_eq!(host.metadata.name.as_deref(), Some("train-x-ml-x-acme"));
        assert_eq!(host.metadata.namespace.as_deref(), Some("vc-acme"));
        let spec = host.spec.expect("spec");
        let selector = spec.node_selector.expect("selector");
        assert_eq!(selector["gpufleet.dev/tenant"], "acme");
        assert_eq!(selector["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
        assert_eq!(spec.tolerations.expect("tolerations").len(), 1);
        assert_eq!(spec.priority, None);
        assert_eq!(spec.service_account_name, None);
    }
}
