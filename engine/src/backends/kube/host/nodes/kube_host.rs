//! [`HostNodes`] on the API server: [`KubeHost`]'s node, pod, ConfigMap, ClusterPolicy and
//! Karpenter calls, and the rights they need.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch,
        PatchParams, PostParams,
    },
    core::ObjectMeta,
};
use serde_json::{Map, Value as Json, json};

use super::{HostError, HostNode, HostNodes, NodeTaint, NodeWrite, PodRef, WriteOutcome};
use crate::backends::kube::host::KubeHost;
use crate::backends::kube::{
    FIELD_MANAGER, Gvk, MANAGED_BY, MANAGED_BY_VALUE, NODEPOOL_LABEL, ObjectError, rbac::Rule,
    status_code,
};

/// How long one eviction may take, retries of a busy API server included, before it counts
/// as refused for now.
const EVICTION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Karpenter's NodePool, cluster-scoped.
const NODE_POOL: Gvk = Gvk::new("karpenter.sh", "v1", "NodePool", "nodepools");
/// Karpenter's NodeClaim, cluster-scoped: one per instance it launched.
const NODE_CLAIM: Gvk = Gvk::new("karpenter.sh", "v1", "NodeClaim", "nodeclaims");
/// The GPU Operator's ClusterPolicy, cluster-scoped.
const CLUSTER_POLICY: Gvk = Gvk::new("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies");

/// The API rights the [`HostNodes`] calls of [`KubeHost`] need, call by call: what the
/// provider's ClusterRole grants node pools ([`crate::backends::kube::rbac`]).
pub const RULES: &[Rule] = &[
    // namespace_labels, list_namespaces
    Rule::new("", "namespaces", &["get", "list"]),
    // list_nodes, get_node, write_node (a merge patch)
    Rule::new("", "nodes", &["get", "list", "patch"]),
    // pods_on, movable_pods
    Rule::new("", "pods", &["list"]),
    // evict
    Rule::new("", "pods/eviction", &["create"]),
    // config_key, set_config_key (a merge patch, or a create when the map is missing)
    Rule::new("", "configmaps", &["get", "create", "patch"]),
    // cluster_policies, set_device_plugin_config (a server-side apply of one field of a
    // policy that exists)
    Rule::new(
        CLUSTER_POLICY.group,
        CLUSTER_POLICY.plural,
        &["list", "patch"],
    ),
    // node_claims
    Rule::new(NODE_CLAIM.group, NODE_CLAIM.plural, &["list"]),
    // apply_node_pool (server-side apply), get_node_pool, list_node_pools, delete_node_pool
    Rule::new(
        NODE_POOL.group,
        NODE_POOL.plural,
        &["get", "list", "create", "patch", "delete"],
    ),
];

/// The client for one typed request, counted.
fn typed(host: &KubeHost) -> kube::Client {
    host.objects().count();
    host.objects().client().clone()
}

fn err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> HostError {
    let what = what.into();
    move |e| HostError {
        what,
        message: e.to_string(),
    }
}

/// Node errors name the call in their own words ("Karpenter NodePool") and keep only
/// the cause from the shared client's error.
fn object_err(what: String) -> impl FnOnce(ObjectError) -> HostError {
    move |e| HostError {
        what,
        message: e.cause(),
    }
}

fn host_node(n: Node) -> HostNode {
    let spec = n.spec.unwrap_or_default();
    let status = n.status.unwrap_or_default();
    let ready = status
        .conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let capacity = status.capacity.unwrap_or_default();
    let gpu_capacity = capacity
        .get("nvidia.com/gpu")
        .and_then(|q| q.0.parse::<u32>().ok())
        .unwrap_or(0);
    let mig_capacity = capacity
        .iter()
        .filter(|(k, _)| k.starts_with("nvidia.com/mig-"))
        .filter_map(|(k, q)| Some((k.clone(), q.0.parse::<u64>().ok()?)))
        .collect();
    HostNode {
        name: n.metadata.name.unwrap_or_default(),
        resource_version: n.metadata.resource_version.unwrap_or_default(),
        labels: n.metadata.labels.unwrap_or_default(),
        annotations: n.metadata.annotations.unwrap_or_default(),
        taints: spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| NodeTaint {
                key: t.key,
                value: t.value.filter(|v| !v.is_empty()),
                effect: t.effect,
            })
            .collect(),
        unschedulable: spec.unschedulable.unwrap_or(false),
        ready,
        gpu_capacity,
        mig_capacity,
        movable_pods: 0,
    }
}

/// A merge patch of a string map from `old` to `new`: changed keys, and `null` for removed.
fn map_patch(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Json {
    let mut m = Map::new();
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        m.insert(k.clone(), Json::Null);
    }
    for (k, v) in new {
        if old.get(k) != Some(v) {
            m.insert(k.clone(), Json::String(v.clone()));
        }
    }
    Json::Object(m)
}

/// The guarded merge patch that turns `current` into `write`.
fn node_patch(current: &HostNode, write: &NodeWrite) -> Json {
    let taints: Vec<Json> = write
        .taints
        .iter()
        .map(|t| match &t.value {
            Some(v) => json!({"key": t.key, "value": v, "effect": t.effect}),
            None => json!({"key": t.key, "effect": t.effect}),
        })
        .collect();
    json!({
        "metadata": {
            "resourceVersion": current.resource_version,
            "labels": map_patch(&current.labels, &write.labels),
            "annotations": map_patch(&current.annotations, &write.annotations),
        },
        "spec": {
            "taints": if taints.is_empty() { Json::Null } else { Json::Array(taints) },
            "unschedulable": if write.unschedulable { Json::Bool(true) } else { Json::Null },
        },
    })
}

#[async_trait]
impl HostNodes for KubeHost {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, HostError> {
        let api: Api<Namespace> = Api::all(typed(self));
        Ok(api
            .get_opt(name)
            .await
            .map_err(err(format!("read namespace {name}")))?
            .map(|ns| ns.metadata.labels.unwrap_or_default()))
    }

    async fn list_namespaces(
        &self,
        selector: &str,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>, HostError> {
        let api: Api<Namespace> = Api::all(typed(self));
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(err(format!("list namespaces ({selector})")))?;
        Ok(list
            .items
            .into_iter()
            // One being deleted holds no virtual cluster to adopt.
            .filter(|ns| ns.metadata.deletion_timestamp.is_none())
            .filter_map(|ns| Some((ns.metadata.name?, ns.metadata.labels.unwrap_or_default())))
            .collect())
    }

    async fn list_nodes(&self, selector: &str) -> Result<Vec<HostNode>, HostError> {
        let api: Api<Node> = Api::all(typed(self));
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(err(format!("list nodes ({selector})")))?;
        Ok(list.items.into_iter().map(host_node).collect())
    }

    async fn get_node(&self, name: &str) -> Result<Option<HostNode>, HostError> {
        let api: Api<Node> = Api::all(typed(self));
        Ok(api
            .get_opt(name)
            .await
            .map_err(err(format!("read node {name}")))?
            .map(host_node))
    }

    async fn write_node(
        &self,
        current: &HostNode,
        write: &NodeWrite,
    ) -> Result<WriteOutcome, HostError> {
        let api: Api<Node> = Api::all(typed(self));
        let patch = node_patch(current, write);
        match api
            .patch(
                &current.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(n) => Ok(WriteOutcome::Written(host_node(n))),
            Err(e) if status_code(&e) == Some(409) => Ok(WriteOutcome::Conflict),
            Err(e) if status_code(&e) == Some(404) => Ok(WriteOutcome::Gone),
            Err(e) => Err(err(format!("patch node {}", current.name))(e)),
        }
    }

    async fn pods_on(&self, node: &str) -> Result<Vec<PodRef>, HostError> {
        let api: Api<Pod> = Api::all(typed(self));
        let pods = api
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(err(format!("list the pods on node {node}")))?;
        Ok(pods.items.into_iter().map(|p| pod_ref(p).1).collect())
    }

    async fn movable_pods(&self) -> Result<BTreeMap<String, usize>, HostError> {
        let api: Api<Pod> = Api::all(typed(self));
        let pods = api
            .list(&ListParams::default().fields("spec.nodeName!="))
            .await
            .map_err(err("list the pods bound to nodes".to_owned()))?;
        let mut out = BTreeMap::new();
        for (node, p) in pods.items.into_iter().map(pod_ref) {
            if !p.stays {
                *out.entry(node).or_insert(0) += 1;
            }
        }
        Ok(out)
    }

    async fn evict(&self, pod: &PodRef) -> Result<bool, HostError> {
        let api: Api<Pod> = Api::namespaced(typed(self), &pod.namespace);
        // A budget's refusal is a 429, which kube's client retries with a backoff of up to
        // 1000 s: a drain would sit here far past its own timeout. Its callers ask again on
        // their own schedule, so a refusal that outlasts this is "refused for now".
        let params = EvictParams::default();
        let asked = tokio::time::timeout(EVICTION_PATIENCE, api.evict(&pod.name, &params));
        let Ok(answer) = asked.await else {
            return Ok(false);
        };
        match answer {
            Ok(_) => Ok(true),
            Err(e) if status_code(&e) == Some(404) => Ok(true),
            Err(e) if status_code(&e) == Some(429) => Ok(false),
            // No eviction can be created in a namespace being deleted; its pods are on their
            // way out already, which is all a drain needs.
            Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("being terminated") => {
                Ok(true)
            }
            Err(e) => Err(err(format!("evict pod {}/{}", pod.namespace, pod.name))(e)),
        }
    }

    async fn config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, HostError> {
        let api: Api<ConfigMap> = Api::namespaced(typed(self), namespace);
        Ok(api
            .get_opt(name)
            .await
            .map_err(err(format!("read ConfigMap {namespace}/{name}")))?
            .and_then(|c| c.data?.get(key).cloned()))
    }

    async fn set_config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), HostError> {
        let api: Api<ConfigMap> = Api::namespaced(typed(self), namespace);
        let what = format!("write key {key} of ConfigMap {namespace}/{name}");
        let patch = json!({"data": {key: value}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => {
                let Some(value) = value else { return Ok(()) };
                self.objects().count();
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        namespace: Some(namespace.to_owned()),
                        labels: Some([(MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned())].into()),
                        ..ObjectMeta::default()
                    },
                    data: Some([(key.to_owned(), value.to_owned())].into()),
                    ..ConfigMap::default()
                };
                match api.create(&PostParams::default(), &cm).await {
                    Ok(_) => Ok(()),
                    // Another pool created it in the meantime: add the key to theirs.
                    Err(e) if status_code(&e) == Some(409) => {
                        self.objects().count();
                        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map(|_| ())
                            .map_err(err(what))
                    }
                    Err(e) => Err(err(what)(e)),
                }
            }
            Err(e) => Err(err(what)(e)),
        }
    }

    async fn cluster_policies(&self) -> Result<Option<Vec<Json>>, HostError> {
        let what = "list the GPU Operator's ClusterPolicies".to_owned();
        match self
            .objects
            .list(&CLUSTER_POLICY, None, "", what.clone())
            .await
        {
            Ok(items) => Ok(Some(items)),
            // The kind is not served: no GPU Operator.
            Err(ObjectError::Call { source, .. }) if status_code(&source) == Some(404) => Ok(None),
            Err(e) => Err(object_err(what)(e)),
        }
    }

    async fn set_device_plugin_config(
        &self,
        policy: &str,
        config_map: &str,
    ) -> Result<(), HostError> {
        let gvk = GroupVersionKind::gvk(
            CLUSTER_POLICY.group,
            CLUSTER_POLICY.version,
            CLUSTER_POLICY.kind,
        );
        let ar = ApiResource::from_gvk_with_plural(&gvk, CLUSTER_POLICY.plural);
        let api: Api<DynamicObject> = Api::all_with(typed(self), &ar);
        let body = json!({
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": policy},
            "spec": {"devicePlugin": {"config": {"name": config_map}}},
        });
        let what = format!("set spec.devicePlugin.config.name of ClusterPolicy {policy}");
        // Not forced: a conflict means another manager set the field since it was read.
        match api
            .patch(
                policy,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(409) => Err(HostError {
                what,
                message: format!(
                    "another manager set it while gpufleet was reading it ({e}); apply again \
                     to see what it holds now"
                ),
            }),
            Err(e) => Err(err(what)(e)),
        }
    }

    async fn apply_node_pool(&self, body: &Json) -> Result<(), HostError> {
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        self.objects()
            .apply(&NODE_POOL, body)
            .await
            .map_err(object_err(format!("apply Karpenter NodePool {name}")))
    }

    async fn get_node_pool(&self, name: &str) -> Result<Option<Json>, HostError> {
        self.objects()
            .get(&NODE_POOL, None, name)
            .await
            .map_err(object_err(format!("read Karpenter NodePool {name}")))
    }

    async fn list_node_pools(&self, selector: &str) -> Result<Vec<Json>, HostError> {
        let what = format!("list Karpenter NodePools ({selector})");
        match self
            .objects()
            .list(&NODE_POOL, None, selector, what.clone())
            .await
        {
            Ok(items) => Ok(items),
            // The kind is not served: no Karpenter.
            Err(ObjectError::Call { source, .. }) if status_code(&source) == Some(404) => {
                Ok(Vec::new())
            }
            Err(e) => Err(object_err(what)(e)),
        }
    }

    async fn delete_node_pool(&self, name: &str) -> Result<(), HostError> {
        self.objects()
            .delete(&NODE_POOL, None, name, &DeleteParams::default())
            .await
            .map_err(object_err(format!("delete Karpenter NodePool {name}")))
    }

    async fn node_claims(&self, name: &str) -> Result<Vec<String>, HostError> {
        let what = format!("list the NodeClaims of Karpenter NodePool {name}");
        let claims = self
            .objects()
            .list(
                &NODE_CLAIM,
                None,
                &format!("{NODEPOOL_LABEL}={name}"),
                what.clone(),
            )
            .await
            .map_err(object_err(what))?;
        Ok(claims
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
            .collect())
    }
}

/// The node a pod is bound to, and the pod as a drain sees it: DaemonSet, mirror and finished
/// pods stay.
fn pod_ref(p: Pod) -> (String, PodRef) {
    let daemon = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let done = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
    let node = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    (
        node,
        PodRef {
            namespace: p.metadata.namespace.unwrap_or_default(),
            name: p.metadata.name.unwrap_or_default(),
            stays: daemon || mirror || done,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_patch_is_guarded_and_nulls_what_goes() {
        let current = HostNode {
            name: "n".into(),
            resource_version: "42".into(),
            labels: [
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "2".to_owned()),
            ]
            .into(),
            ..HostNode::default()
        };
        let write = NodeWrite {
            labels: [
                ("a".to_owned(), "1".to_owned()),
                ("c".to_owned(), "3".to_owned()),
            ]
            .into(),
            ..NodeWrite::default()
        };
        let p = node_patch(&current, &write);
        assert_eq!(p["metadata"]["resourceVersion"], "42");
        assert_eq!(p["metadata"]["labels"], json!({"b": null, "c": "3"}));
        assert_eq!(p["spec"]["taints"], Json::Null);
    }
}
