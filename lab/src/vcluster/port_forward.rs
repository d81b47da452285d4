//! `pods/portforward` for vCluster pods, as a real node serves it.
//!
//! The host API server sends a pod's port-forward streams to the kubelet API of the pod's
//! node; for the lab's fake nodes that is kwok. kwok forwards a stream when a `PortForward`
//! object (`kwok.x-k8s.io/v1alpha1`, named and namespaced as the pod) says where the port
//! leads; kwok watches those objects because it runs with `--enable-crds=PortForward`
//! (`lab/src/components.rs`), and the lab installs their CRD (`lab/src/crds.rs`).
//!
//! For each pod it runs, the vCluster kubelet declares that the pod's port 8443 leads to the
//! host loopback port its forwarder listens on (which reaches `127.0.0.1:8443` inside the
//! sandbox). The object is owned by the pod, so the garbage collector removes it with the
//! pod. Any other port of the pod gets kwok's own answer: no forward for that port.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};

/// The API group and version of kwok's `PortForward`.
pub const API_VERSION: &str = "kwok.x-k8s.io/v1alpha1";

/// The field manager of the objects the vCluster kubelet writes.
const FIELD_MANAGER: &str = "gpufleet-lab-vcluster-kubelet";

fn api_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("kwok.x-k8s.io", "v1alpha1", "PortForward");
    ApiResource::from_gvk_with_plural(&gvk, "portforwards")
}

/// The `PortForward` of `pod`: its `pod_port` leads to `127.0.0.1:<host_port>`.
///
/// # Errors
/// When the pod has no name, namespace or uid.
pub fn object(pod: &Pod, pod_port: u16, host_port: u16) -> Result<serde_json::Value, String> {
    let meta = &pod.metadata;
    let (Some(name), Some(namespace), Some(uid)) = (&meta.name, &meta.namespace, &meta.uid) else {
        return Err("the pod has no name, namespace or uid".into());
    };
    Ok(serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": "PortForward",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Pod",
                "name": name,
                "uid": uid,
            }],
        },
        "spec": {
            "forwards": [{
                "ports": [pod_port],
                "target": { "address": "127.0.0.1", "port": host_port },
            }],
        },
    }))
}

/// Declares (server-side apply) that `pod`'s `pod_port` leads to `host_port`.
///
/// # Errors
/// When the object cannot be written (for example before its CRD is installed).
pub async fn declare(
    host: &Client,
    pod: &Pod,
    pod_port: u16,
    host_port: u16,
) -> Result<(), String> {
    let body = object(pod, pod_port, host_port)?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(host.clone(), namespace, &api_resource());
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("failed to declare its port {pod_port} to kwok: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pods_port_leads_to_the_host_port_and_the_pod_owns_the_object() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vc-0", "namespace": "team-a", "uid": "u-1"},
        }))
        .expect("pod");
        let o = object(&pod, 8443, 41000).expect("object");
        assert_eq!(o["metadata"]["namespace"], "team-a");
        assert_eq!(o["metadata"]["name"], "vc-0");
        assert_eq!(o["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(o["spec"]["forwards"][0]["ports"][0], 8443);
        assert_eq!(o["spec"]["forwards"][0]["target"]["port"], 41000);
        assert_eq!(o["spec"]["forwards"][0]["target"]["address"], "127.0.0.1");
        let nameless: Pod =
            serde_json::from_value(serde_json::json!({"metadata": {}})).expect("pod");
        assert!(object(&nameless, 8443, 1).is_err());
    }
}
