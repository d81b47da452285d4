//! What the lab installs besides nodes, so that gpufleet's GPU node pools meet the API
//! surface of a real GPU cluster: the GPU Operator's `ClusterPolicy` CRD (`nvidia.com/v1`)
//! with one ClusterPolicy, `cluster-policy`, whose status reports the operator's namespace,
//! and that namespace, `gpu-operator` (time-slicing pools write the device plugin's config
//! there and point the ClusterPolicy at it). The GPU Operator does not run: its objects are
//! stored and validated, not acted on. Also kwok's own `PortForward` CRD, which kwok (the
//! fake nodes' kubelet) reads to serve `pods/portforward`. Karpenter's CRDs come from its
//! release ([`crate::karpenter`]), as do the MPI Operator's.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};

use crate::error::LabError;
use crate::nodes::FIELD_MANAGER;

/// The GPU Operator's ClusterPolicy CRD.
pub const CLUSTER_POLICY_CRD_JSON: &str =
    include_str!("../kube/crds/nvidia.com_clusterpolicies.json");

/// kwok's `PortForward` CRD (kwok v0.8.0, `kustomize/crd/bases`), which kwok watches to
/// serve `pods/portforward` (see [`crate::vcluster::port_forward`]).
pub const KWOK_PORT_FORWARD_CRD_JSON: &str =
    include_str!("../kube/crds/kwok.x-k8s.io_portforwards.json");

/// The namespace of the GPU Operator.
pub const GPU_OPERATOR_NAMESPACE: &str = "gpu-operator";

/// The GPU Operator release the lab's ClusterPolicy says it was installed by.
pub const GPU_OPERATOR_VERSION: &str = "v25.10.0";

/// The device plugin release the lab's ClusterPolicy deploys (the one whose config parser
/// the tests run).
pub const DEVICE_PLUGIN_VERSION: &str = "v0.18.0";

/// The lab's ClusterPolicy, named as the GPU Operator's Helm chart names it.
pub const CLUSTER_POLICY: &str = "cluster-policy";

/// The CRDs, by name and JSON.
const CRDS: &[(&str, &str)] = &[
    ("clusterpolicies.nvidia.com", CLUSTER_POLICY_CRD_JSON),
    ("portforwards.kwok.x-k8s.io", KWOK_PORT_FORWARD_CRD_JSON),
];

fn api_err(what: &str) -> impl FnOnce(kube::Error) -> LabError + '_ {
    move |source| LabError::Api {
        what: what.to_owned(),
        source,
    }
}

/// Installs (server-side apply, idempotent) the CRDs and namespaces, waits until the CRDs
/// are established, then creates the ClusterPolicy.
///
/// # Errors
/// When the API server refuses a write, or a CRD is not established within 30 s.
pub async fn install(client: &kube::Client) -> Result<(), LabError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    for (name, json) in CRDS {
        let crd: CustomResourceDefinition =
            serde_json::from_str(json).map_err(|e| LabError::Api {
                what: format!("parse the CRD {name}"),
                source: kube::Error::SerdeError(e),
            })?;
        crds.patch(name, &pp, &Patch::Apply(&crd))
            .await
            .map_err(|source| LabError::Api {
                what: format!("install the CRD {name}"),
                source,
            })?;
    }
    let ns: Api<Namespace> = Api::all(client.clone());
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": GPU_OPERATOR_NAMESPACE},
    });
    ns.patch(GPU_OPERATOR_NAMESPACE, &pp, &Patch::Apply(&body))
        .await
        .map_err(api_err("create the gpu-operator namespace"))?;
    for (name, _) in CRDS {
        wait_established(&crds, name).await?;
    }
    install_cluster_policy(client).await
}

/// Installs (server-side apply) the CRD in a release's YAML file and waits until it is
/// established; returns its name.
///
/// # Errors
/// When the file cannot be read or parsed, or the API server refuses the CRD.
pub(crate) async fn install_file(
    client: &kube::Client,
    path: &std::path::Path,
) -> Result<String, LabError> {
    let bad_file = |e: String| LabError::StateDir {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    };
    let text = std::fs::read_to_string(path).map_err(|source| LabError::StateDir {
        path: path.to_path_buf(),
        source,
    })?;
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(&text).map_err(|e| bad_file(format!("parse the CRD: {e}")))?;
    let name = crd
        .metadata
        .name
        .clone()
        .ok_or_else(|| bad_file("the CRD has no name".into()))?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(|source| LabError::Api {
        what: format!("install the CRD {name}"),
        source,
    })?;
    wait_established(&crds, &name).await?;
    Ok(name)
}

/// Waits (30 s at most) until the CRD `name` is established.
pub(crate) async fn wait_established(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
) -> Result<(), LabError> {
    let started = Instant::now();
    loop {
        let c = crds.get(name).await.map_err(|source| LabError::Api {
            what: format!("read the CRD {name}"),
            source,
        })?;
        let established = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(LabError::Timeout {
                what: format!("the CRD {name} to be established"),
                waited: started.elapsed(),
                state: "not established".to_owned(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The ClusterPolicy `cluster-policy`, and the status the GPU Operator would give it: ready,
/// installed in `gpu-operator`. Only the fields the lab sets are applied, so a device plugin
/// config gpufleet (or a test) set stays.
async fn install_cluster_policy(client: &kube::Client) -> Result<(), LabError> {
    let gvk = GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterpolicies");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let head = serde_json::json!({
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": CLUSTER_POLICY},
    });
    let mut body = head.clone();
    // As the operator's Helm chart labels it, and the device plugin release it deploys.
    body["metadata"]["labels"] = serde_json::json!({
        "app.kubernetes.io/component": "gpu-operator",
        "app.kubernetes.io/version": GPU_OPERATOR_VERSION,
        "helm.sh/chart": format!("gpu-operator-{GPU_OPERATOR_VERSION}"),
    });
    body["spec"] = serde_json::json!({
        "devicePlugin": {"enabled": true, "version": DEVICE_PLUGIN_VERSION},
    });
    api.patch(CLUSTER_POLICY, &pp, &Patch::Apply(&body))
        .await
        .map_err(api_err("create the GPU Operator's ClusterPolicy"))?;
    let mut status = head;
    status["status"] = serde_json::json!({"state": "ready", "namespace": GPU_OPERATOR_NAMESPACE});
    api.patch_status(CLUSTER_POLICY, &pp, &Patch::Apply(&status))
        .await
        .map_err(api_err(
            "set the status of the GPU Operator's ClusterPolicy",
        ))?;
    Ok(())
}
