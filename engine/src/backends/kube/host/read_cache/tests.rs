//! The cache against a host that counts what it is asked.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::*;

/// Objects by kind, answering gets and lists, counting each call, failing lists of the kinds
/// it is told to.
#[derive(Default)]
struct Counting {
    objects: Mutex<Vec<(ObjectKind, Json)>>,
    nodes: Mutex<Vec<HostNode>>,
    calls: AtomicU64,
    refuse_list: Mutex<Vec<ObjectKind>>,
}

impl Counting {
    fn put(&self, kind: ObjectKind, namespace: Option<&str>, name: &str, labels: &Json) {
        let mut o = json!({
            "apiVersion": kind.api_version(),
            "kind": kind.kind(),
            "metadata": { "name": name, "labels": labels.clone() },
        });
        if let Some(ns) = namespace {
            o["metadata"]["namespace"] = json!(ns);
        }
        self.objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((kind, o));
    }

    fn calls(&self) -> u64 {
        self.calls.swap(0, Ordering::Relaxed)
    }

    fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    fn of(&self, kind: ObjectKind) -> Vec<Json> {
        self.objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, o)| o.clone())
            .collect()
    }
}

fn not_asked(what: &str) -> HostError {
    HostError {
        what: what.to_owned(),
        message: "not asked in these tests".to_owned(),
    }
}

#[async_trait]
impl HostObjects for Counting {
    async fn server_version(&self) -> Result<String, ObjectError> {
        Ok("v1.36.0".to_owned())
    }
    async fn serves(&self, _: ObjectKind) -> Result<bool, ObjectError> {
        Ok(true)
    }
    async fn apply(&self, object: &Json) -> Result<(), ObjectError> {
        self.call();
        let kind = ObjectKind::from_kind(object["kind"].as_str().unwrap_or_default())
            .ok_or_else(|| ObjectError::Other("no kind".to_owned()))?;
        self.objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((kind, object.clone()));
        Ok(())
    }
    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        self.call();
        Ok(self
            .of(kind)
            .into_iter()
            .find(|o| o["metadata"]["name"] == name && in_namespace(o, namespace)))
    }
    async fn list(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ObjectError> {
        self.call();
        if self
            .refuse_list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&kind)
        {
            return Err(ObjectError::Other("forbidden".to_owned()));
        }
        let terms = Terms::parse(selector).expect("selector");
        // As the API server answers: items without `apiVersion` and `kind`.
        Ok(self
            .of(kind)
            .into_iter()
            .filter(|o| in_namespace(o, namespace) && terms.matches(&labels_of(o)))
            .map(|mut o| {
                if let Some(m) = o.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                o
            })
            .collect())
    }
    async fn delete(&self, _: ObjectKind, _: Option<&str>, _: &str) -> Result<(), ObjectError> {
        self.call();
        Ok(())
    }
    async fn merge_patch(
        &self,
        _: ObjectKind,
        _: Option<&str>,
        _: &str,
        _: &Json,
    ) -> Result<(), ObjectError> {
        self.call();
        Ok(())
    }
    async fn logs(&self, _: &str, _: &str, _: &str) -> Result<String, ObjectError> {
        Err(ObjectError::Other("no logs".to_owned()))
    }
    async fn take_turn(
        &self,
        _: LeaseRef,
        _: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ObjectError> {
        Err(ObjectError::Other("no turns".to_owned()))
    }
}

#[async_trait]
impl HostNodes for Counting {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, HostError> {
        self.call();
        Ok(self
            .of(ObjectKind::Namespace)
            .iter()
            .find(|o| o["metadata"]["name"] == name)
            .map(labels_of))
    }
    async fn list_namespaces(
        &self,
        _: &str,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>, HostError> {
        Err(not_asked("list namespaces"))
    }
    async fn list_nodes(&self, selector: &str) -> Result<Vec<HostNode>, HostError> {
        self.call();
        let terms = Terms::parse(selector).expect("selector");
        Ok(self
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|n| terms.matches(&n.labels))
            .cloned()
            .collect())
    }
    async fn get_node(&self, _: &str) -> Result<Option<HostNode>, HostError> {
        Err(not_asked("get node"))
    }
    async fn write_node(&self, _: &HostNode, _: &NodeWrite) -> Result<WriteOutcome, HostError> {
        self.call();
        Err(not_asked("write node"))
    }
    async fn pods_on(&self, _: &str) -> Result<Vec<PodRef>, HostError> {
        Err(not_asked("pods on"))
    }
    async fn movable_pods(&self) -> Result<BTreeMap<String, usize>, HostError> {
        Err(not_asked("movable pods"))
    }
    async fn evict(&self, _: &PodRef) -> Result<bool, HostError> {
        Err(not_asked("evict"))
    }
    async fn config_key(&self, _: &str, _: &str, _: &str) -> Result<Option<String>, HostError> {
        Err(not_asked("config key"))
    }
    async fn set_config_key(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<(), HostError> {
        Err(not_asked("set config key"))
    }
    async fn cluster_policies(&self) -> Result<Option<Vec<Json>>, HostError> {
        Err(not_asked("cluster policies"))
    }
    async fn set_device_plugin_config(&self, _: &str, _: &str) -> Result<(), HostError> {
        Err(not_asked("set device plugin config"))
    }
    async fn apply_node_pool(&self, _: &Json) -> Result<(), HostError> {
        Err(not_asked("apply node pool"))
    }
    async fn get_node_pool(&self, _: &str) -> Result<Option<Json>, HostError> {
        self.call();
        Ok(None)
    }
    async fn list_node_pools(&self, _: &str) -> Result<Vec<Json>, HostError> {
        Err(not_asked("list node pools"))
    }
    async fn delete_node_pool(&self, _: &str) -> Result<(), HostError> {
        Err(not_asked("delete node pool"))
    }
    async fn node_claims(&self, _: &str) -> Result<Vec<String>, HostError> {
        Err(not_asked("node claims"))
    }
}

const OURS_JSON: fn() -> Json = || json!({ "app.kubernetes.io/managed-by": "gpufleet" });

/// `n` tenants, each a namespace `vc-tN` with a ServiceAccount `vc-tN` of gpufleet's.
fn tenants(n: usize) -> Arc<Counting> {
    let host = Arc::new(Counting::default());
    for i in 0..n {
        let ns = format!("vc-t{i}");
        host.put(ObjectKind::Namespace, None, &ns, &OURS_JSON());
        host.put(ObjectKind::ServiceAccount, Some(&ns), &ns, &OURS_JSON());
    }
    host
}

#[test]
fn the_label_lists_select_is_gpufleets() {
    use crate::backends::kube::{MANAGED_BY, MANAGED_BY_VALUE};
    assert_eq!(OURS, format!("{MANAGED_BY}={MANAGED_BY_VALUE}"));
}

#[tokio::test]
async fn reads_of_every_tenant_cost_one_list_per_kind() {
    for n in [3, 30] {
        let host = tenants(n);
        let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
        for i in 0..n {
            let ns = format!("vc-t{i}");
            assert!(
                reader
                    .get(ObjectKind::Namespace, None, &ns)
                    .await
                    .expect("answered")
                    .is_some()
            );
            let sa = reader
                .get(ObjectKind::ServiceAccount, Some(&ns), &ns)
                .await
                .expect("answered");
            let sa = sa.expect("answered");
            assert_eq!(sa["metadata"]["namespace"], json!(ns));
            // As a read by name gives it.
            assert_eq!(
                (&sa["apiVersion"], &sa["kind"]),
                (&json!("v1"), &json!("ServiceAccount"))
            );
            // Another tenant's object of the same name is not this tenant's.
            assert!(
                reader
                    .get(ObjectKind::ServiceAccount, Some("elsewhere"), &ns)
                    .await
                    .expect("answered")
                    .is_none()
            );
        }
        assert_eq!(host.calls(), 2, "{n} tenants: one list of each kind");
    }
}

#[tokio::test]
async fn secrets_come_from_one_list_of_the_charts_label_and_a_missing_one_is_read_by_name() {
    let host = tenants(0);
    let chart = json!({ "app": "vcluster" });
    for i in 0..20 {
        let ns = format!("vc-t{i}");
        host.put(ObjectKind::Secret, Some(&ns), &format!("vc-t{i}"), &chart);
        host.put(
            ObjectKind::Secret,
            Some(&ns),
            &format!("vc-config-t{i}"),
            &chart,
        );
    }
    // A Secret without the chart's label (a benchmark's SSH key, or one whose label was
    // removed) is not in the list, and is still found.
    host.put(ObjectKind::Secret, Some("vc-t0"), "ssh-key", &json!({}));
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    for i in 0..20 {
        for name in [format!("vc-t{i}"), format!("vc-config-t{i}")] {
            let secret = reader
                .get(ObjectKind::Secret, Some(&format!("vc-t{i}")), &name)
                .await
                .expect("answered");
            assert!(secret.is_some(), "{name}");
        }
    }
    assert_eq!(host.calls(), 1, "40 Secrets of 20 tenants: one list");
    let key = reader
        .get(ObjectKind::Secret, Some("vc-t0"), "ssh-key")
        .await
        .expect("answered");
    assert!(key.is_some());
    let gone = reader
        .get(ObjectKind::Secret, Some("vc-t0"), "vc-t99")
        .await
        .expect("answered");
    assert!(gone.is_none());
    assert_eq!(host.calls(), 2, "each Secret missing from the list: a GET");
    // Where a missing Secret is no news, the list answers alone.
    let never_written = reader
        .peek(ObjectKind::Secret, Some("vc-t5"), "vc-t99")
        .await
        .expect("answered");
    assert!(never_written.is_none());
    let found = reader
        .peek(ObjectKind::Secret, Some("vc-t5"), "vc-t5")
        .await
        .expect("answered");
    assert!(found.is_some());
    assert_eq!(host.calls(), 0, "peeks are answered by the list");
}

#[tokio::test]
async fn objects_without_gpufleets_label_read_as_missing() {
    let host = tenants(1);
    host.put(ObjectKind::Role, Some("vc-t0"), "hand-made", &json!({}));
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    assert!(
        reader
            .get(ObjectKind::Role, Some("vc-t0"), "hand-made")
            .await
            .expect("answered")
            .is_none()
    );
}

#[tokio::test]
async fn apply_reads_the_api_server_and_a_write_drops_the_lists() {
    let host = tenants(2);
    let cache = Arc::new(ReadCache::default());
    let reader = Cached::refreshing(Arc::clone(&host), Arc::clone(&cache));
    let operator = Cached::operating(Arc::clone(&host), Arc::clone(&cache));
    reader
        .get(ObjectKind::Namespace, None, "vc-t0")
        .await
        .expect("answered");
    operator
        .get(ObjectKind::Namespace, None, "vc-t0")
        .await
        .expect("answered");
    operator
        .get(ObjectKind::Namespace, None, "vc-t0")
        .await
        .expect("answered");
    assert_eq!(host.calls(), 3, "one list, then two GETs");
    reader
        .get(ObjectKind::Namespace, None, "vc-t1")
        .await
        .expect("answered");
    assert_eq!(host.calls(), 0, "still listed");
    operator
        .apply(
            &json!({ "kind": "Namespace", "metadata": { "name": "vc-t2", "labels": OURS_JSON() } }),
        )
        .await
        .expect("answered");
    host.calls();
    let made = reader
        .get(ObjectKind::Namespace, None, "vc-t2")
        .await
        .expect("answered");
    assert!(made.is_some(), "the list after a write holds what it wrote");
    assert_eq!(host.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_list_serves_for_its_age_at_most() {
    let host = tenants(1);
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    reader
        .get(ObjectKind::Namespace, None, "vc-t0")
        .await
        .expect("answered");
    tokio::time::advance(MAX_AGE).await;
    reader
        .get(ObjectKind::Namespace, None, "vc-t0")
        .await
        .expect("answered");
    assert_eq!(host.calls(), 2);
}

#[tokio::test]
async fn a_list_the_role_refuses_falls_back_to_reads_by_name_once() {
    let host = tenants(3);
    host.refuse_list
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(ObjectKind::ServiceAccount);
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    for i in 0..3 {
        let ns = format!("vc-t{i}");
        let sa = reader
            .get(ObjectKind::ServiceAccount, Some(&ns), &ns)
            .await
            .expect("answered");
        assert!(sa.is_some());
    }
    assert_eq!(host.calls(), 1 + 3, "one refused list, then a GET each");
}

#[tokio::test]
async fn a_narrower_selector_is_answered_from_the_list_and_another_is_not() {
    let host = tenants(2);
    for (ns, release) in [("vc-t0", "t0"), ("vc-t1", "t1")] {
        host.put(
            ObjectKind::Pod,
            Some(ns),
            &format!("{release}-0"),
            &json!({ "app": "vcluster", "release": release }),
        );
    }
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    for (ns, release) in [("vc-t0", "t0"), ("vc-t1", "t1")] {
        let pods = reader
            .list(
                ObjectKind::Pod,
                Some(ns),
                &format!("app=vcluster,release={release}"),
            )
            .await
            .expect("answered");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0]["metadata"]["name"], json!(format!("{release}-0")));
    }
    assert_eq!(host.calls(), 1);
    let others = reader
        .list(ObjectKind::Pod, Some("vc-t0"), "release=t0")
        .await
        .expect("answered");
    assert_eq!(others.len(), 1);
    assert_eq!(
        host.calls(),
        1,
        "a selector outside the list asks the API server"
    );
}

#[tokio::test]
async fn each_pools_nodes_come_from_one_list_of_every_pools_nodes() {
    let host = tenants(2);
    for (node, pool) in [("n1", "a"), ("n2", "a"), ("n3", "b")] {
        host.nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(HostNode::labelled(node, &[("gpufleet.dev/pool", pool)]));
    }
    host.nodes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(HostNode::labelled("free", &[]));
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    let a = reader
        .list_nodes("gpufleet.dev/pool=a")
        .await
        .expect("answered");
    let b = reader
        .list_nodes("gpufleet.dev/pool=b")
        .await
        .expect("answered");
    let c = reader
        .list_nodes("gpufleet.dev/pool=c")
        .await
        .expect("answered");
    assert_eq!((a.len(), b.len(), c.len()), (2, 1, 0));
    let tier = reader.namespace_labels("vc-t1").await.expect("answered");
    assert_eq!(
        tier.and_then(|l| l.get("app.kubernetes.io/managed-by").cloned()),
        Some("gpufleet".to_owned())
    );
    assert!(
        reader
            .namespace_labels("gone")
            .await
            .expect("answered")
            .is_none()
    );
    assert_eq!(host.calls(), 2, "one node list, one namespace list");
}

#[tokio::test]
async fn concurrent_readers_share_one_list() {
    let host = tenants(20);
    let reader = Arc::new(Cached::refreshing(
        Arc::clone(&host),
        Arc::new(ReadCache::default()),
    ));
    let reads = (0..20).map(|i| {
        let reader = Arc::clone(&reader);
        tokio::spawn(async move {
            reader
                .get(ObjectKind::Namespace, None, &format!("vc-t{i}"))
                .await
                .expect("answered")
                .is_some()
        })
    });
    for read in reads {
        assert!(read.await.expect("answered"));
    }
    assert_eq!(host.calls(), 1);
}

fn in_namespace(o: &Json, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|ns| o.pointer("/metadata/namespace").and_then(Json::as_str) == Some(ns))
}

#[tokio::test]
async fn a_statefulset_missing_from_the_list_is_looked_up_by_name() {
    let host = tenants(1);
    // Without gpufleet's label: not in the list, yet there.
    host.put(
        ObjectKind::StatefulSet,
        Some("vc-t0"),
        "t0",
        &json!({ "app": "vcluster" }),
    );
    let reader = Cached::refreshing(Arc::clone(&host), Arc::new(ReadCache::default()));
    let sts = reader
        .get(ObjectKind::StatefulSet, Some("vc-t0"), "t0")
        .await
        .expect("answered");
    assert!(sts.is_some());
    assert_eq!(host.calls(), 2, "the list, then a read by name");
    // Other kinds count as missing without asking: drift, which apply writes back.
    host.put(ObjectKind::Role, Some("vc-t0"), "vc-t0", &json!({}));
    let role = reader
        .get(ObjectKind::Role, Some("vc-t0"), "vc-t0")
        .await
        .expect("answered");
    assert!(role.is_none());
    assert_eq!(host.calls(), 1, "the list of roles only");
}
