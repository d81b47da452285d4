//! What a run reads of the cluster before and after it runs: the pool's nodes, placement and
//! sharing mode, each node's record, and the versions of the GPU Operator and of the virtual
//! cluster. Read before the run, so a failed read costs no GPU time.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::{
    environment::NodeRecord,
    error::{RunError, StepError},
    model::BenchmarkSpec,
    render::{Placement, Toleration},
};
use crate::{
    backends::kube::{
        DEVICE_PLUGIN_CONFIG_LABEL, MIG_CONFIG_LABEL,
        host::{HostObjects, ObjectKind},
        json::{labels_by_name, labels_of, str_at},
    },
    tenancy::pool_label,
};

/// The label of a Helm release's objects that carries its version: on the GPU Operator's
/// ClusterPolicy, the operator's.
const HELM_VERSION_LABEL: &str = "app.kubernetes.io/version";

/// The MIG config of a node whose MIG is off.
const MIG_DISABLED: &str = "all-disabled";

/// The record of each node, from the pool's listing (or read, for a node that left it).
pub(super) async fn node_records(
    cluster: &dyn HostObjects,
    pool: &PoolInfo,
    nodes: &[String],
) -> Result<BTreeMap<String, NodeRecord>, StepError> {
    let mut records = BTreeMap::new();
    for n in nodes {
        let labels = match pool.nodes.get(n) {
            Some(l) => l.clone(),
            None => cluster
                .get(ObjectKind::Node, None, n)
                .await?
                .map(|o| labels_of(&o))
                .unwrap_or_default(),
        };
        records.insert(n.clone(), NodeRecord::from_labels(&labels));
    }
    Ok(records)
}

/// The GPU Operator's release and the device plugin's, from the one ClusterPolicy: its Helm
/// chart's `app.kubernetes.io/version` label and `spec.devicePlugin.version`. Empty when the
/// cluster has no GPU Operator. Read before the run, so a failed read costs no GPU time.
pub(super) async fn gpu_operator_versions(
    cluster: &dyn HostObjects,
) -> Result<(String, String), StepError> {
    if !cluster.serves(ObjectKind::ClusterPolicy).await? {
        return Ok(Default::default());
    }
    let policies = cluster.list(ObjectKind::ClusterPolicy, None, "").await?;
    let [policy] = policies.as_slice() else {
        return Ok(Default::default());
    };
    let operator = labels_of(policy)
        .get(HELM_VERSION_LABEL)
        .cloned()
        .unwrap_or_default();
    let plugin = str_at(policy, "/spec/devicePlugin/version")
        .unwrap_or_default()
        .to_owned();
    Ok((operator, plugin))
}

/// What the pool lends the run.
#[derive(Debug, Default)]
pub(super) struct PoolInfo {
    pub(super) placement: Placement,
    pub(super) nodes: BTreeMap<String, BTreeMap<String, String>>,
    pub(super) sharing: String,
}

/// The pool's nodes, placement and sharing mode.
pub(super) async fn pool_info(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
) -> Result<PoolInfo, StepError> {
    let Some(pool) = &spec.pool else {
        return Ok(PoolInfo {
            sharing: "none".to_owned(),
            ..PoolInfo::default()
        });
    };
    let label = pool_label(&pool.vc.name, &pool.name);
    let selector = format!("{}={label}", crate::backends::kube::POOL);
    let nodes = cluster.list(ObjectKind::Node, None, &selector).await?;
    if nodes.is_empty() {
        return Err(RunError::Setup(format!(
            "node pool {} has no nodes (none is labelled {selector}).",
            pool.id()
        ))
        .into());
    }
    let mut extra = Vec::new();
    for n in &nodes {
        for t in n
            .pointer("/spec/taints")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let effect = str_at(t, "/effect").unwrap_or_default();
            if effect == "NoSchedule" || effect == "NoExecute" {
                extra.push(Toleration {
                    key: str_at(t, "/key").unwrap_or_default().to_owned(),
                    value: str_at(t, "/value").map(str::to_owned),
                    effect: effect.to_owned(),
                });
            }
        }
    }
    let by_name = labels_by_name(&nodes);
    let first = by_name.values().next().cloned().unwrap_or_default();
    // A node whose MIG is off (a MIG pool let it go with the fleet's default) runs whole
    // GPUs, like one that never had MIG: the same experiment records the same sharing.
    let sharing = if let Some(c) = first
        .get(MIG_CONFIG_LABEL)
        .filter(|c| c.as_str() != MIG_DISABLED)
    {
        format!("mig:{c}")
    } else if let Some(c) = first.get(DEVICE_PLUGIN_CONFIG_LABEL) {
        format!("time-slicing:{c}")
    } else {
        "none".to_owned()
    };
    Ok(PoolInfo {
        placement: Placement::on_pool(&label, &pool.vc.name, &extra),
        nodes: by_name,
        sharing,
    })
}

/// The virtual cluster's vCluster and Kubernetes versions, from its StatefulSet's images.
pub(super) async fn vc_versions(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
) -> Result<(String, String), StepError> {
    let Some(vc) = &spec.vc else {
        return Ok(Default::default());
    };
    let Some(sts) = cluster
        .get(ObjectKind::StatefulSet, Some(&vc.namespace), &vc.name)
        .await?
    else {
        return Ok(Default::default());
    };
    let tag = |path: &str, container: &str| {
        sts.pointer(path)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .find(|c| str_at(c, "/name") == Some(container))
            .and_then(|c| str_at(c, "/image"))
            .and_then(|i| i.rsplit_once(':'))
            .map(|(_, t)| t.to_owned())
            .unwrap_or_default()
    };
    Ok((
        tag("/spec/template/spec/containers", "syncer"),
        tag("/spec/template/spec/initContainers", "kubernetes"),
    ))
}
