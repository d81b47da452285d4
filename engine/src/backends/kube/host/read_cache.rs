//! One list per kind for a run's refreshes, instead of one read per object per tenant.
//!
//! A plan refreshes every resource in the state, each with its own reads: a workspace of
//! 200 tenants read each tenant's dozen objects by name, so a plan's round trips grew with
//! the tenants. [`Cached`] answers those reads from one list of each kind across all
//! namespaces, taken at the first read and shared by every resource of the provider
//! configuration (one Terraform run; its [`ReadCache`] is kept with the configuration's
//! settings), so they grow with the kinds instead.
//!
//! - **Which reads.** Only a host made for reading ([`Cached::refreshing`]: refresh and
//!   plan) answers from lists. Apply reads the API server every time, since it waits for
//!   what it wrote to take effect.
//! - **Which lists.** Objects gpufleet writes are listed by its label
//!   (`app.kubernetes.io/managed-by=gpufleet`), namespaces all of them, the control plane's
//!   pods by the chart's `app=vcluster`, nodes by the key of the label asked for ([`wide`]).
//!   An object that lost gpufleet's label therefore reads as missing, and the next apply
//!   writes it back with the label; the objects whose absence decides more than drift (a
//!   control plane's StatefulSet: its status; a Karpenter NodePool: whether the pool still
//!   exists; a Secret: a control plane's credentials) are looked up by name before they
//!   count as missing ([`CONFIRM_MISSING`]). Secrets are listed by the label both of a
//!   virtual cluster's carry, `app=vcluster` (the config Secret gpufleet renders and the
//!   kubeconfig Secret the control plane writes), so the list holds no other Secret's data.
//! - **Fresh enough.** Any write of the run through any of its hosts drops every list
//!   (before and after the write), and a list serves for [`MAX_AGE`] at most.
//! - **Never worse.** A list that fails (a role without `list` on a kind, a CRD that is not
//!   installed, a timeout) is not retried by every waiting reader in turn: each reads its
//!   object by name, as without the cache, for the rest of that list's life.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Display,
    hash::Hash,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use serde_json::Value as Json;
use tokio::{sync::OnceCell, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    HeldTurn, HostObjects, ObjectKind,
    nodes::{HostError, HostNode, HostNodes, NodeWrite, PodRef, WriteOutcome},
};
use crate::backends::kube::{ObjectError, json::labels_of, lease::LeaseRef, selector::Terms};

/// How long one list answers reads.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// Kinds whose absence from a list is confirmed by a read by name: it decides more than
/// drift.
const CONFIRM_MISSING: &[ObjectKind] = &[
    ObjectKind::StatefulSet,
    ObjectKind::KarpenterNodePool,
    ObjectKind::Secret,
];

/// gpufleet's label on every object it writes (`MANAGED_BY=MANAGED_BY_VALUE`).
const OURS: &str = "app.kubernetes.io/managed-by=gpufleet";

/// The selector of the one list that answers reads of `kind`, or `None` when each object is
/// read by itself.
fn wide(kind: ObjectKind) -> Option<&'static str> {
    match kind {
        // Every namespace: a node pool reads the tier of a namespace gpufleet may not own.
        ObjectKind::Namespace => Some(""),
        ObjectKind::ServiceAccount
        | ObjectKind::Role
        | ObjectKind::RoleBinding
        | ObjectKind::ClusterRole
        | ObjectKind::ClusterRoleBinding
        | ObjectKind::Service
        | ObjectKind::ResourceQuota
        | ObjectKind::LimitRange
        | ObjectKind::NetworkPolicy
        | ObjectKind::StatefulSet
        | ObjectKind::KarpenterNodePool => Some(OURS),
        // The control planes' pods and Secrets, which carry the chart's labels.
        ObjectKind::Pod | ObjectKind::Secret => Some("app=vcluster"),
        // The rest are not refreshed by name.
        _ => None,
    }
}

/// Lists kept by key, each taken once however many readers ask at the same time.
struct Lists<K, V> {
    cells: Mutex<HashMap<K, Kept<V>>>,
}

/// One list: when it was first asked for, and, once taken, the list or `None` if it failed.
type Kept<V> = (Instant, Arc<OnceCell<Option<Arc<V>>>>);

impl<K, V> Default for Lists<K, V> {
    fn default() -> Self {
        Lists {
            cells: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, V> Lists<K, V> {
    /// The list under `key`, taken with `take` if no reader took it in the last
    /// [`MAX_AGE`]; `None` when taking it failed.
    async fn get<F, E>(&self, key: K, what: impl Display, take: F) -> Option<Arc<V>>
    where
        F: Future<Output = Result<V, E>>,
        E: Display,
    {
        let cell = {
            let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
            match cells.get(&key) {
                Some((asked, cell)) if asked.elapsed() < MAX_AGE => Arc::clone(cell),
                _ => {
                    let cell = Arc::new(OnceCell::new());
                    cells.insert(key, (Instant::now(), Arc::clone(&cell)));
                    cell
                }
            }
        };
        cell.get_or_init(|| async {
            tracing::debug!(target: "gpufleet::kube", "taking the run's list: {what}");
            match take.await {
                Ok(v) => Some(Arc::new(v)),
                Err(e) => {
                    tracing::info!(
                        target: "gpufleet::kube",
                        "cannot {what} ({e}): reading each object by name instead"
                    );
                    None
                }
            }
        })
        .await
        .clone()
    }

    fn forget(&self) {
        self.cells
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// One kind's objects, by namespace (none for cluster-scoped kinds) and name.
type Listing = HashMap<(Option<String>, String), Json>;

fn listing(items: Vec<Json>) -> Listing {
    items
        .into_iter()
        .filter_map(|o| {
            let name = o.pointer("/metadata/name")?.as_str()?.to_owned();
            let namespace = o
                .pointer("/metadata/namespace")
                .and_then(Json::as_str)
                .map(str::to_owned);
            Some(((namespace, name), o))
        })
        .collect()
}

/// The lists one provider configuration's refreshes share.
#[derive(Default)]
pub struct ReadCache {
    objects: Lists<ObjectKind, Listing>,
    nodes: Lists<String, Vec<HostNode>>,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache").finish_non_exhaustive()
    }
}

impl ReadCache {
    /// Drops every list: this process is about to write, or just wrote.
    fn forget(&self) {
        self.objects.forget();
        self.nodes.forget();
    }
}

/// A host whose writes drop the run's lists and, when made for reading, whose reads are
/// answered from them.
#[derive(Debug)]
pub struct Cached<H> {
    host: Arc<H>,
    cache: Arc<ReadCache>,
    answers_reads: bool,
}

impl<H> Cached<H> {
    /// For apply: every read goes to the API server; writes drop `cache`'s lists.
    pub fn operating(host: Arc<H>, cache: Arc<ReadCache>) -> Cached<H> {
        Cached {
            host,
            cache,
            answers_reads: false,
        }
    }

    /// For refresh and plan: reads of the kinds `wide` names come from `cache`'s lists.
    pub fn refreshing(host: Arc<H>, cache: Arc<ReadCache>) -> Cached<H> {
        Cached {
            host,
            cache,
            answers_reads: true,
        }
    }

    /// Runs a write with the lists dropped before and after it: a list taken while the
    /// write was under way may hold what it replaced.
    async fn write<T>(&self, write: impl Future<Output = T>) -> T {
        self.cache.forget();
        let out = write.await;
        self.cache.forget();
        out
    }
}

impl<H: HostObjects> Cached<H> {
    /// One object, from the run's list of its kind when there is one; an object missing
    /// from it is read by name when `confirm` asks.
    async fn read(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        confirm: bool,
    ) -> Result<Option<Json>, ObjectError> {
        let Some(list) = self.listed(kind).await else {
            return self.host.get(kind, namespace, name).await;
        };
        // A cluster-scoped kind has no namespace, whatever the caller passed.
        let key = (
            namespace
                .filter(|_| !kind.cluster_scoped())
                .map(str::to_owned),
            name.to_owned(),
        );
        match list.get(&key) {
            Some(o) => Ok(Some(o.clone())),
            None if confirm => self.host.get(kind, namespace, name).await,
            None => Ok(None),
        }
    }

    /// The list that answers reads of `kind`, when this host answers reads from lists and
    /// the list could be taken.
    async fn listed(&self, kind: ObjectKind) -> Option<Arc<Listing>> {
        let selector = wide(kind).filter(|_| self.answers_reads)?;
        let what = format!("list {} ({selector})", kind.gvk().plural);
        let take = async {
            let mut items = self.host.list(kind, None, selector).await?;
            // A list's items carry no `apiVersion` and `kind`; a read by name does.
            for item in &mut items {
                if let Some(o) = item.as_object_mut() {
                    o.entry("apiVersion")
                        .or_insert_with(|| Json::String(kind.api_version()));
                    o.entry("kind")
                        .or_insert_with(|| Json::String(kind.kind().to_owned()));
                }
            }
            Ok::<_, ObjectError>(listing(items))
        };
        self.cache.objects.get(kind, what, take).await
    }
}

#[async_trait]
impl<H: HostObjects> HostObjects for Cached<H> {
    async fn server_version(&self) -> Result<String, ObjectError> {
        self.host.server_version().await
    }

    async fn serves(&self, kind: ObjectKind) -> Result<bool, ObjectError> {
        self.host.serves(kind).await
    }

    async fn apply(&self, object: &Json) -> Result<(), ObjectError> {
        self.write(self.host.apply(object)).await
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        self.read(kind, namespace, name, CONFIRM_MISSING.contains(&kind))
            .await
    }

    async fn peek(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        self.read(kind, namespace, name, false).await
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ObjectError> {
        // Only a selector that asks for a part of the kept list can be answered from it.
        let narrower = Terms::parse(selector).filter(|terms| {
            wide(kind)
                .and_then(Terms::parse)
                .is_some_and(|wide| terms.within(&wide))
        });
        if let Some(terms) = narrower
            && let Some(list) = self.listed(kind).await
        {
            return Ok(list
                .iter()
                .filter(|((ns, _), o)| {
                    namespace.is_none_or(|want| ns.as_deref() == Some(want))
                        && terms.matches(&labels_of(o))
                })
                .map(|(_, o)| o.clone())
                .collect());
        }
        self.host.list(kind, namespace, selector).await
    }

    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ObjectError> {
        self.write(self.host.delete(kind, namespace, name)).await
    }

    async fn merge_patch(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), ObjectError> {
        self.write(self.host.merge_patch(kind, namespace, name, patch))
            .await
    }

    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ObjectError> {
        self.host.logs(namespace, pod, container).await
    }

    async fn take_turn(
        &self,
        lease: LeaseRef,
        cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ObjectError> {
        self.host.take_turn(lease, cancel).await
    }

    fn calls(&self) -> u64 {
        self.host.calls()
    }

    fn left_to_others(&self) -> Vec<String> {
        self.host.left_to_others()
    }
}

#[async_trait]
impl<H: HostNodes + HostObjects> HostNodes for Cached<H> {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, HostError> {
        if let Some(list) = self.listed(ObjectKind::Namespace).await {
            return Ok(list.get(&(None, name.to_owned())).map(labels_of));
        }
        self.host.namespace_labels(name).await
    }

    async fn list_namespaces(
        &self,
        selector: &str,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>, HostError> {
        self.host.list_namespaces(selector).await
    }

    async fn list_nodes(&self, selector: &str) -> Result<Vec<HostNode>, HostError> {
        // `key=value` is answered from the list of every node that has the key: a pool's
        // nodes from the one list of every pool's nodes.
        let terms = Terms::parse(selector).filter(|_| self.answers_reads);
        if let Some((key, value)) = terms.as_ref().and_then(Terms::single_equality) {
            let what = format!("list nodes ({key})");
            if let Some(nodes) = self
                .cache
                .nodes
                .get(key.to_owned(), what, self.host.list_nodes(key))
                .await
            {
                return Ok(nodes
                    .iter()
                    .filter(|n| n.label(key) == Some(value))
                    .cloned()
                    .collect());
            }
        }
        self.host.list_nodes(selector).await
    }

    async fn get_node(&self, name: &str) -> Result<Option<HostNode>, HostError> {
        self.host.get_node(name).await
    }

    async fn write_node(
        &self,
        current: &HostNode,
        write: &NodeWrite,
    ) -> Result<WriteOutcome, HostError> {
        self.write(self.host.write_node(current, write)).await
    }

    async fn pods_on(&self, node: &str) -> Result<Vec<PodRef>, HostError> {
        self.host.pods_on(node).await
    }

    async fn movable_pods(&self) -> Result<BTreeMap<String, usize>, HostError> {
        self.host.movable_pods().await
    }

    async fn evict(&self, pod: &PodRef) -> Result<bool, HostError> {
        self.write(self.host.evict(pod)).await
    }

    async fn config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, HostError> {
        self.host.config_key(namespace, name, key).await
    }

    async fn set_config_key(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), HostError> {
        self.write(self.host.set_config_key(namespace, name, key, value))
            .await
    }

    async fn cluster_policies(&self) -> Result<Option<Vec<Json>>, HostError> {
        self.host.cluster_policies().await
    }

    async fn set_device_plugin_config(
        &self,
        policy: &str,
        config_map: &str,
    ) -> Result<(), HostError> {
        self.write(self.host.set_device_plugin_config(policy, config_map))
            .await
    }

    async fn apply_node_pool(&self, body: &Json) -> Result<(), HostError> {
        self.write(self.host.apply_node_pool(body)).await
    }

    async fn get_node_pool(&self, name: &str) -> Result<Option<Json>, HostError> {
        // Missing from the list, it is looked up by name ([`CONFIRM_MISSING`]).
        if let Some(list) = self.listed(ObjectKind::KarpenterNodePool).await
            && let Some(found) = list.get(&(None, name.to_owned()))
        {
            return Ok(Some(found.clone()));
        }
        self.host.get_node_pool(name).await
    }

    async fn list_node_pools(&self, selector: &str) -> Result<Vec<Json>, HostError> {
        self.host.list_node_pools(selector).await
    }

    async fn delete_node_pool(&self, name: &str) -> Result<(), HostError> {
        self.write(self.host.delete_node_pool(name)).await
    }

    async fn node_claims(&self, name: &str) -> Result<Vec<String>, HostError> {
        self.host.node_claims(name).await
    }
}

#[cfg(test)]
mod tests;
