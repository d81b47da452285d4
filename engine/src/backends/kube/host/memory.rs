//! An in-memory host cluster behind [`HostNodes`], for the engine's tests (feature
//! `test-support`): nodes with resource
//! versions that every write bumps (so guarded writes conflict exactly as on an API server),
//! namespaces, pods, ConfigMaps and Karpenter NodePools, and a count of calls.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use async_trait::async_trait;

use crate::backends::kube::{
    GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, POOL,
    host::nodes::{HostError, HostNode, HostNodes, NodeWrite, PodRef, WriteOutcome},
};

#[derive(Debug, Default)]
struct State {
    nodes: BTreeMap<String, HostNode>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pods: BTreeMap<String, Vec<PodRef>>,
    config_maps: BTreeMap<(String, String), BTreeMap<String, String>>,
    node_pools: BTreeMap<String, serde_json::Value>,
    /// The GPU Operator's ClusterPolicies; `None` when the kind is not served.
    cluster_policies: Option<BTreeMap<String, serde_json::Value>>,
    version: u64,
    /// Node writes that still succeed before every further one fails (a fault), if set.
    write_budget: Option<u64>,
}

/// The in-memory host cluster.
#[derive(Debug, Default)]
pub struct MemoryHost {
    state: Mutex<State>,
    calls: AtomicU64,
}

impl MemoryHost {
    /// A cluster without nodes, with the GPU Operator installed in `gpu-operator` (its
    /// ClusterPolicy `cluster-policy` reports that namespace, and leaves the device plugin's
    /// config unset), as on most GPU clusters.
    pub fn new() -> Arc<MemoryHost> {
        let host = Arc::new(MemoryHost::default());
        host.put_cluster_policy(serde_json::json!({
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"devicePlugin": {"enabled": true}},
            "status": {"state": "ready", "namespace": "gpu-operator"},
        }));
        host
    }

    /// Uninstalls the GPU Operator: the ClusterPolicy kind is no longer served.
    pub fn remove_gpu_operator(&self) {
        self.lock().cluster_policies = None;
    }

    /// Creates or replaces a ClusterPolicy (its `metadata.name` names it), serving the kind.
    pub fn put_cluster_policy(&self, policy: serde_json::Value) {
        let name = policy["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.lock()
            .cluster_policies
            .get_or_insert_with(BTreeMap::new)
            .insert(name, policy);
    }

    /// A ClusterPolicy as it is now.
    pub fn cluster_policy(&self, name: &str) -> Option<serde_json::Value> {
        self.lock().cluster_policies.as_ref()?.get(name).cloned()
    }

    /// A cluster with Ready 8-GPU nodes of `product`, `gpu-<rack>-<nn>`, per `(rack, count)`.
    pub fn with_nodes(product: &str, racks: &[(&str, usize)]) -> Arc<MemoryHost> {
        let host = MemoryHost::new();
        for (rack, n) in racks {
            host.add_nodes(product, rack, *n, 8);
        }
        host
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Host-cluster calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// From now on, `n` more node writes succeed and every later one fails, as when the API
    /// server goes away mid-apply; [`MemoryHost::heal`] ends it.
    pub fn fail_writes_after(&self, n: u64) {
        self.lock().write_budget = Some(n);
    }

    /// Node writes succeed again.
    pub fn heal(&self) {
        self.lock().write_budget = None;
    }

    /// How many of the node writes `fail_writes_after` allowed are left.
    pub fn writes_left(&self) -> u64 {
        self.lock().write_budget.unwrap_or(u64::MAX)
    }

    /// Adds `n` Ready nodes of `product` in `rack`.
    pub fn add_nodes(&self, product: &str, rack: &str, n: usize, gpus: u32) {
        for i in 0..n {
            self.add_node(&format!("gpu-{rack}-{i:02}"), product, rack, gpus);
        }
    }

    /// Adds one Ready node `name` of `product` in `rack` (a BCM node's host node, say),
    /// labelled as GFD labels an unshared node: its GPU count equals its capacity.
    pub fn add_node(&self, name: &str, product: &str, rack: &str, gpus: u32) {
        let mut s = self.lock();
        s.version += 1;
        let node = HostNode {
            name: name.to_owned(),
            resource_version: s.version.to_string(),
            labels: [
                (GPU_PRODUCT_LABEL.to_owned(), product.to_owned()),
                (GPU_COUNT_LABEL.to_owned(), gpus.to_string()),
                ("gpufleet.dev/rack".to_owned(), rack.to_owned()),
                // NVIDIA topograph's switch block, which placement finds on its own.
                (
                    "network.topology.nvidia.com/block".to_owned(),
                    rack.to_owned(),
                ),
                ("kubernetes.io/hostname".to_owned(), name.to_owned()),
            ]
            .into(),
            ready: true,
            gpu_capacity: gpus,
            ..HostNode::default()
        };
        s.nodes.insert(name.to_owned(), node);
    }

    /// Adds a namespace with labels.
    pub fn add_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        self.lock().namespaces.insert(
            name.to_owned(),
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
    }

    /// Every node as it is now.
    pub fn nodes_now(&self) -> Vec<HostNode> {
        self.lock().nodes.values().cloned().collect()
    }

    /// One node as it is now.
    pub fn node(&self, name: &str) -> Option<HostNode> {
        self.lock().nodes.get(name).cloned()
    }

    /// Changes a node out of band.
    pub fn edit_node(&self, name: &str, f: impl FnOnce(&mut HostNode)) {
        let mut s = self.lock();
        s.version += 1;
        let v = s.version.to_string();
        if let Some(n) = s.nodes.get_mut(name) {
            f(n);
            n.resource_version = v;
        }
    }

    /// Another pool takes a node out of band.
    pub fn claim_behind_the_back(&self, name: &str, pool: &str) {
        self.edit_node(name, |n| {
            n.labels.insert(POOL.to_owned(), pool.to_owned());
        });
    }

    /// Bumps a node's resource version without changing it (a status heartbeat).
    pub fn touch(&self, name: &str) {
        self.edit_node(name, |_| {});
    }

    /// Deletes a node out of band.
    pub fn delete_node(&self, name: &str) {
        self.lock().nodes.remove(name);
    }

    /// The pool holding a node.
    pub fn holder(&self, name: &str) -> Option<String> {
        self.node(name)?.labels.get(POOL).cloned()
    }

    /// Puts a pod on a node.
    pub fn add_pod(&self, node: &str, namespace: &str, name: &str) {
        self.put_pod(node, namespace, name, false);
    }

    /// Puts a DaemonSet's pod on a node: drains and evictions leave it.
    pub fn add_daemon_pod(&self, node: &str, namespace: &str, name: &str) {
        self.put_pod(node, namespace, name, true);
    }

    /// The pods on a node, as `namespace/name`.
    pub fn pods_now(&self, node: &str) -> Vec<String> {
        self.lock()
            .pods
            .get(node)
            .into_iter()
            .flatten()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect()
    }

    fn put_pod(&self, node: &str, namespace: &str, name: &str, stays: bool) {
        self.lock()
            .pods
            .entry(node.to_owned())
            .or_default()
            .push(PodRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                stays,
            });
    }

    /// A ConfigMap's data.
    pub fn config_map(&self, namespace: &str, name: &str) -> BTreeMap<String, String> {
        self.lock()
            .config_maps
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// A Karpenter NodePool.
    pub fn node_pool(&self, name: &str) -> Option<serde_json::Value> {
        self.lock().node_pools.get(name).cloned()
    }
}

fn matches(node: &HostNode, selector: &str) -> bool {
    selects(&node.labels, selector)
}

/// Whether `labels` match an equality-based label selector (`k=v` and `k` terms).
fn selects(labels: &BTreeMap<String, String>, selector: &str) -> bool {
    selector
        .split(',')
        .filter(|t| !t.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels.get(k).map(String::as_str) == Some(v),
            None => labels.contains_key(term),
        })
}

#[async_trait]
impl HostNodes for MemoryHost {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, HostError> {
        self.count();
        Ok(self.lock().namespaces.get(name).cloned())
    }

    async fn list_namespaces(
        &self,
        selector: &str,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>, HostError> {
        self.count();
        Ok(self
            .lock()
            .namespaces
            .iter()
            .filter(|(_, labels)| selects(labels, selector))
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect())
    }

    async fn list_nodes(&self, selector: &str) -> Result<Vec<HostNode>, HostError> {
        self.count();
        Ok(self
            .lock()
            .nodes
            .values()
            .filter(|n| matches(n, selector))
            .cloned()
            .collect())
    }

    async fn get_node(&self, name: &str) -> Result<Option<HostNode>, HostError> {
        self.count();
        Ok(self.node(name))
    }

    async fn write_node(
        &self,
        current: &HostNode,
        write: &NodeWrite,
    ) -> Result<WriteOutcome, HostError> {
        self.count();
        let (name, resource_version) = (current.name.as_str(), current.resource_version.as_str());
        let mut s = self.lock();
        match s.write_budget {
            Some(0) => {
                return Err(HostError {
                    what: format!("patch node {name}"),
                    message: "the server is currently unable to handle the request".into(),
                });
            }
            Some(n) => s.write_budget = Some(n - 1),
            None => {}
        }
        s.version += 1;
        let v = s.version.to_string();
        let Some(n) = s.nodes.get_mut(name) else {
            return Ok(WriteOutcome::Gone);
        };
        if n.resource_version != resource_version {
            return Ok(WriteOutcome::Conflict);
        }
        n.labels = write.labels.clone();
        n.annotations = write.annotations.clone();
        n.taints = write.taints.clone();
        n.unschedulable = write.unschedulable;
        n.resource_version = v;
        Ok(WriteOutcome::Written(n.clone()))
    }

    async fn pods_on(&self, node: &str) -> Result<Vec<PodRef>, HostError> {
        self.count();
        Ok(self.lock().pods.get(node).cloned().unwrap_or_default())
    }

    async fn movable_pods(&self) -> Result<BTreeMap<String, usize>, HostError> {
        self.count();
        Ok(self
            .lock()
            .pods
            .iter()
            .map(|(node, pods)| (node.clone(), pods.iter().filter(|p| !p.stays).count()))
            .filter(|(_, n)| *n > 0)
            .collect())
    }

    async fn evict(&self, pod: &PodRef) -> Result<bool, HostError> {
        self.count();
        for pods in self.lock().pods.values_mut() {
            pods.retain(|p| p != pod);
        }
        Ok(true)
    }

    async fn config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, HostError> {
        self.count();
        Ok(self.config_map(namespace, name).get(key).cloned())
    }

    async fn set_config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), HostError> {
        self.count();
        let mut s = self.lock();
        let data = s
            .config_maps
            .entry((namespace.to_owned(), name.to_owned()))
            .or_default();
        match value {
            Some(v) => {
                data.insert(key.to_owned(), v.to_owned());
            }
            None => {
                data.remove(key);
            }
        }
        Ok(())
    }

    async fn cluster_policies(&self) -> Result<Option<Vec<serde_json::Value>>, HostError> {
        self.count();
        Ok(self
            .lock()
            .cluster_policies
            .as_ref()
            .map(|m| m.values().cloned().collect()))
    }

    async fn set_device_plugin_config(
        &self,
        policy: &str,
        config_map: &str,
    ) -> Result<(), HostError> {
        self.count();
        let what = format!("set spec.devicePlugin.config.name of ClusterPolicy {policy}");
        let mut s = self.lock();
        let Some(p) = s.cluster_policies.as_mut().and_then(|m| m.get_mut(policy)) else {
            return Err(HostError {
                what,
                message: format!("clusterpolicies.nvidia.com \"{policy}\" not found"),
            });
        };
        // As a server-side apply that is not forced: another value is a conflict.
        let held = p["spec"]["devicePlugin"]["config"]["name"]
            .as_str()
            .unwrap_or_default();
        if !held.is_empty() && held != config_map {
            return Err(HostError {
                what,
                message: format!("conflict: the field holds {held:?}"),
            });
        }
        p["spec"]["devicePlugin"]["config"]["name"] = serde_json::Value::from(config_map);
        Ok(())
    }

    async fn apply_node_pool(&self, body: &serde_json::Value) -> Result<(), HostError> {
        self.count();
        let name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.lock().node_pools.insert(name, body.clone());
        Ok(())
    }

    async fn get_node_pool(&self, name: &str) -> Result<Option<serde_json::Value>, HostError> {
        self.count();
        Ok(self.node_pool(name))
    }

    async fn list_node_pools(&self, selector: &str) -> Result<Vec<serde_json::Value>, HostError> {
        self.count();
        Ok(self
            .lock()
            .node_pools
            .values()
            .filter(|np| {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(np["metadata"]["labels"].clone()).unwrap_or_default();
                selects(&labels, selector)
            })
            .cloned()
            .collect())
    }

    async fn delete_node_pool(&self, name: &str) -> Result<(), HostError> {
        self.count();
        self.lock().node_pools.remove(name);
        Ok(())
    }

    /// No Karpenter runs here: a NodePool never has instances.
    async fn node_claims(&self, _name: &str) -> Result<Vec<String>, HostError> {
        self.count();
        Ok(Vec::new())
    }
}
