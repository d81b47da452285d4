//! What the lab installs besides nodes, so that gpufleet's GPU node pools meet the API
//! surface of a real GPU cluster: the Karpenter `NodePool` CRD (`karpenter.sh/v1`, with the
//! upstream validation of the fields gpufleet emits, `lab/kube/crds/`), and the
//! `gpu-operator` namespace the NVIDIA GPU Operator would live in (time-slicing pools write
//! the device plugin's config there). Neither Karpenter nor the GPU Operator runs: their
//! objects are stored and validated, not acted on.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::error::LabError;
use crate::nodes::FIELD_MANAGER;

/// The Karpenter NodePool CRD.
pub const NODEPOOL_CRD_JSON: &str = include_str!("../kube/crds/karpenter.sh_nodepools.json");

/// The namespace of the GPU Operator.
pub const GPU_OPERATOR_NAMESPACE: &str = "gpu-operator";

fn api_err(what: &str) -> impl FnOnce(kube::Error) -> LabError + '_ {
    move |source| LabError::Api {
        what: what.to_owned(),
        source,
    }
}

/// Installs (server-side apply, idempotent) the CRDs and namespaces, and waits until the
/// NodePool CRD is established.
///
/// # Errors
/// When the API server refuses a write, or the CRD is not established within 30 s.
pub async fn install(client: &kube::Client) -> Result<(), LabError> {
    let crd: CustomResourceDefinition =
        serde_json::from_str(NODEPOOL_CRD_JSON).map_err(|e| LabError::Api {
            what: "parse the NodePool CRD".to_owned(),
            source: kube::Error::SerdeError(e),
        })?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    crds.patch("nodepools.karpenter.sh", &pp, &Patch::Apply(&crd))
        .await
        .map_err(api_err("install the Karpenter NodePool CRD"))?;
    let ns: Api<Namespace> = Api::all(client.clone());
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": GPU_OPERATOR_NAMESPACE},
    });
    ns.patch(GPU_OPERATOR_NAMESPACE, &pp, &Patch::Apply(&body))
        .await
        .map_err(api_err("create the gpu-operator namespace"))?;
    let started = Instant::now();
    loop {
        let c = crds
            .get("nodepools.karpenter.sh")
            .await
            .map_err(api_err("read the Karpenter NodePool CRD"))?;
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
                what: "the Karpenter NodePool CRD to be established".to_owned(),
                waited: started.elapsed(),
                state: "not established".to_owned(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
