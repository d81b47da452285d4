//! `gpufleet_virtual_cluster` through whole Terraform runs against an in-memory host cluster
//! that behaves like the real one where it matters: a StatefulSet with replicas gets a Ready
//! pod, the claims of its volume claim templates (kept when it scales down or goes, as their
//! retention policy says) and, from the control plane, Secret `vc-<name>`; its claim templates
//! cannot change; scaled to zero, its pod terminates over a few reads while the pods the
//! syncer put in the namespace keep running; a server-side apply removes only the annotations
//! an earlier apply set; namespaces terminate over a few reads and take their objects with
//! them. Services behave as the API server and its controllers make them: a ClusterIP is
//! allocated once, node ports are allocated for NodePort and LoadBalancer Services and kept
//! across applies that leave them out, dropped when the type no longer needs them and refused
//! on a ClusterIP Service, and a LoadBalancer gets its address from the load balancer
//! controller after a few reads (or never, without one). Every plan, apply and refresh is
//! checked against Terraform's consistency rules by the shared harness.

#[path = "support/network_segment.rs"]
mod support;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use base64::Engine as _;
use gpufleet_engine::{
    backends::{
        Connect,
        kube::{
            ObjectError,
            host::{Access, Cached, HeldTurn, HostObjects, ObjectKind, ReadCache},
            lease::LeaseRef,
        },
    },
    context::Context,
    data_sources::virtual_cluster::VirtualClusterData,
    diag::Diagnostics,
    kinds::DataSourceKind,
    resources::virtual_cluster::{
        VirtualCluster,
        pause::{PAUSED, PAUSED_DATE, PAUSED_REPLICAS, SYNCED_BY},
        persistence::Persistence,
    },
    value::Value,
};
use serde_json::{Value as Json, json};
use support::{Action, Terraform, config, show, sweep};
use tokio_util::sync::CancellationToken;

type Key = (ObjectKind, String, String);

#[derive(Default)]
struct State {
    objects: BTreeMap<Key, Json>,
    /// Reads left before a terminating namespace is gone.
    terminating: BTreeMap<String, u32>,
    calls: u64,
    /// Fail the apply of this kind once.
    fail_apply: Option<ObjectKind>,
    /// Pods of new StatefulSets crash.
    crash: bool,
    /// Reads of a StatefulSet scaled to zero before its pod is gone, by namespace and name.
    stopping: BTreeMap<(String, String), u32>,
    /// Pods of StatefulSets scaled to zero never finish terminating.
    stuck: bool,
    /// The annotation keys each object's last server-side apply set: what the next apply
    /// removes when it omits them (annotations written otherwise stay).
    applied_annotations: BTreeMap<Key, BTreeSet<String>>,
    /// Uids handed out so far (to new volume claims).
    uids: u64,
    /// Node ports and ClusterIPs handed out so far.
    node_ports: i64,
    cluster_ips: u64,
    /// What the load balancer controller writes to `status.loadBalancer.ingress[0]` of a
    /// LoadBalancer Service; `None`: there is no controller, so it never gets an address.
    lb_address: Option<Json>,
    /// Reads of a LoadBalancer Service before its address is there, by namespace and name.
    lb_pending: BTreeMap<(String, String), u32>,
    /// Calls still carried out before every call fails.
    budget: sweep::Budget,
    /// Seconds on the API server's clock, for creation timestamps.
    clock: u64,
    /// Reads of Secret `vc-<name>` before the control plane writes it; `None`: it writes it
    /// as soon as it starts.
    late_secret: Option<u32>,
    /// Control-plane pods deleted (restarts).
    restarts: u32,
}

/// The API server's time for an object made now: a second later than the last.
fn stamp(s: &mut State) -> String {
    s.clock += 1;
    let t = s.clock;
    format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// Counts a call and fails it when the budget is spent, as when the API server goes away.
fn enter(s: &mut State) -> Result<(), ObjectError> {
    s.calls += 1;
    if s.budget.spend() {
        Ok(())
    } else {
        Err(ObjectError::Other("connection refused".to_owned()))
    }
}

/// The host IP of the node the control-plane pod runs on.
const NODE_IP: &str = "192.0.2.17";

/// Reads of a new LoadBalancer Service before the controller gives it an address.
const LB_READS: u32 = 3;

#[derive(Default)]
struct FakeHost(Mutex<State>);

impl FakeHost {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn obj(&self, kind: ObjectKind, ns: &str, name: &str) -> Option<Json> {
        self.lock()
            .objects
            .get(&(kind, ns.to_owned(), name.to_owned()))
            .cloned()
    }

    fn edit(&self, kind: ObjectKind, ns: &str, name: &str, f: impl FnOnce(&mut Json)) {
        let mut s = self.lock();
        f(s.objects
            .get_mut(&(kind, ns.to_owned(), name.to_owned()))
            .expect("object"));
    }

    fn count(&self, kind: ObjectKind) -> usize {
        self.lock().objects.keys().filter(|k| k.0 == kind).count()
    }

    fn take_calls(&self) -> u64 {
        std::mem::take(&mut self.lock().calls)
    }
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// What the StatefulSet controller, kwok and the control plane do for a StatefulSet; sets
/// its `status.replicas`.
fn run_statefulset(s: &mut State, ns: &str, sts: &mut Json) {
    let name = sts["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let replicas = sts["spec"]["replicas"].as_i64().unwrap_or(1);
    let pod_key = (ObjectKind::Pod, ns.to_owned(), format!("{name}-0"));
    if replicas == 0 {
        // The pod terminates over the next reads; synced pods are not the StatefulSet's.
        let running = s.objects.contains_key(&pod_key);
        sts["status"]["replicas"] = json!(i64::from(running));
        if running {
            s.stopping.insert((ns.to_owned(), name), 2);
        }
        return;
    }
    s.stopping.remove(&(ns.to_owned(), name.clone()));
    sts["status"]["replicas"] = json!(replicas);
    // The claims of the pod, from the templates, labelled with the selector; an existing claim
    // is used as it is.
    let templates = sts["spec"]["volumeClaimTemplates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for t in templates {
        let claim = format!(
            "{}-{name}-0",
            t["metadata"]["name"].as_str().unwrap_or_default()
        );
        let key = (
            ObjectKind::PersistentVolumeClaim,
            ns.to_owned(),
            claim.clone(),
        );
        if !s.objects.contains_key(&key) {
            s.uids += 1;
            let uid = format!("uid-{}", s.uids);
            s.objects.insert(
                key,
                json!({
                    "metadata": { "name": claim, "namespace": ns, "uid": uid,
                                  "labels": sts["spec"]["selector"]["matchLabels"] },
                    "spec": t["spec"],
                }),
            );
        }
    }
    let container = if s.crash {
        json!({ "name": "syncer", "ready": false, "restartCount": 5, "state": { "waiting": { "reason": "CrashLoopBackOff" } } })
    } else {
        json!({ "name": "syncer", "ready": true, "state": { "running": {} } })
    };
    // A running pod stays the same pod (the fake rolls nothing out); a new one starts now.
    let (created, started_now) = match s.objects.get(&pod_key) {
        Some(p) => (p["metadata"]["creationTimestamp"].clone(), false),
        None => (json!(stamp(s)), true),
    };
    s.objects.insert(
        pod_key,
        json!({
            "metadata": { "name": format!("{name}-0"), "namespace": ns,
                          "labels": { "app": "vcluster", "release": name },
                          "creationTimestamp": created },
            "status": { "phase": "Running", "hostIP": NODE_IP, "startTime": created,
                        "containerStatuses": [container] },
        }),
    );
    // The syncer writes its Secret once, when it starts.
    if started_now && !s.crash && s.late_secret.is_none() {
        write_kubeconfig(s, ns, &name);
    }
}

/// What the syncer of virtual cluster `name` writes once it has started: Secret `vc-<name>`,
/// with the labels vCluster (0.24 and newer) gives it.
fn write_kubeconfig(s: &mut State, ns: &str, name: &str) {
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://127.0.0.1:41000\n    certificate-authority-data: {}\ncontexts: []\nusers: []\n",
        b64("CA PEM")
    );
    s.objects
        .entry((ObjectKind::Secret, ns.to_owned(), format!("vc-{name}")))
        .or_insert(json!({
            "metadata": {
                "name": format!("vc-{name}"),
                "namespace": ns,
                "labels": { "app": "vcluster", "vcluster-name": name },
            },
            "data": {
                "config": b64(&kubeconfig),
                "certificate-authority": b64("CA PEM"),
                "client-certificate": b64("CLIENT CERT PEM"),
                "client-key": b64("CLIENT KEY PEM"),
                "token": b64("TOKEN"),
            },
        }));
}

/// One read of StatefulSet `name` in `ns` while it scales to zero: its pod terminates.
fn progress_stop(s: &mut State, ns: &str, name: &str) {
    let key = (ns.to_owned(), name.to_owned());
    let Some(left) = s.stopping.get_mut(&key) else {
        return;
    };
    if s.stuck {
        return;
    }
    if *left > 0 {
        *left -= 1;
        return;
    }
    s.stopping.remove(&key);
    s.objects
        .remove(&(ObjectKind::Pod, ns.to_owned(), format!("{name}-0")));
    if let Some(sts) = s
        .objects
        .get_mut(&(ObjectKind::StatefulSet, ns.to_owned(), name.to_owned()))
    {
        sts["status"]["replicas"] = json!(0);
    }
}

fn service_type(o: &Json) -> String {
    o["spec"]["type"].as_str().unwrap_or("ClusterIP").to_owned()
}

fn has_node_ports(service_type: &str) -> bool {
    matches!(service_type, "NodePort" | "LoadBalancer")
}

fn node_ports(o: &Json) -> BTreeSet<i64> {
    o["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_i64())
        .collect()
}

/// What the API server does with a Service written by server-side apply over `old`: the
/// ClusterIP and node ports it allocated stay (no apply sets them); when the new type has no
/// use for node ports and the apply brought no new ones, they are dropped (the registry's
/// `dropTypeDependentFields`); node ports on a ClusterIP Service are refused; missing node
/// ports of NodePort and LoadBalancer Services are allocated; the load balancer status goes
/// with the LoadBalancer type, and a new LoadBalancer waits for the controller.
fn apply_service(
    s: &mut State,
    ns: &str,
    name: &str,
    old: Option<&Json>,
    o: &mut Json,
) -> Result<(), ObjectError> {
    o["metadata"]["creationTimestamp"] = match old {
        Some(old) => old["metadata"]["creationTimestamp"].clone(),
        None => json!(stamp(s)),
    };
    if o["spec"]["clusterIP"].is_null() {
        o["spec"]["clusterIP"] = match old.map(|x| x["spec"]["clusterIP"].clone()) {
            Some(ip @ Json::String(_)) => ip,
            _ => {
                s.cluster_ips += 1;
                json!(format!("10.96.0.{}", s.cluster_ips))
            }
        };
    }
    let new_type = service_type(o);
    if let Some(old) = old {
        let kept: Vec<Json> = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
        for p in o["spec"]["ports"].as_array_mut().into_iter().flatten() {
            let same = kept
                .iter()
                .find(|k| k["port"] == p["port"] && k["protocol"] == p["protocol"]);
            if p.get("nodePort").is_none()
                && let Some(n) = same.and_then(|k| k.get("nodePort"))
            {
                p["nodePort"] = n.clone();
            }
        }
        if has_node_ports(&service_type(old))
            && !has_node_ports(&new_type)
            && node_ports(old).is_superset(&node_ports(o))
        {
            for p in o["spec"]["ports"].as_array_mut().into_iter().flatten() {
                if let Some(m) = p.as_object_mut() {
                    m.remove("nodePort");
                }
            }
        }
    }
    if !has_node_ports(&new_type) && !node_ports(o).is_empty() {
        return Err(ObjectError::Other(format!(
            "Service {name:?} is invalid: spec.ports[0].nodePort: Forbidden: may not be used \
             when `type` is '{new_type}'"
        )));
    }
    if has_node_ports(&new_type) {
        for p in o["spec"]["ports"].as_array_mut().into_iter().flatten() {
            if p.get("nodePort").is_none() {
                s.node_ports += 1;
                p["nodePort"] = json!(30000 + s.node_ports);
            }
        }
    }
    let key = (ns.to_owned(), name.to_owned());
    let was_lb = old.is_some_and(|x| service_type(x) == "LoadBalancer");
    o["status"] = match (new_type.as_str(), was_lb, old) {
        ("LoadBalancer", true, Some(old)) => old["status"].clone(),
        ("LoadBalancer", _, _) => {
            s.lb_pending.insert(key, LB_READS);
            json!({ "loadBalancer": {} })
        }
        _ => {
            s.lb_pending.remove(&key);
            json!({ "loadBalancer": {} })
        }
    };
    Ok(())
}

/// One read of Service `name` in `ns`: the load balancer controller gets to it.
fn progress_load_balancer(s: &mut State, ns: &str, name: &str) {
    let key = (ns.to_owned(), name.to_owned());
    let Some(left) = s.lb_pending.get_mut(&key) else {
        return;
    };
    if *left > 0 {
        *left -= 1;
        return;
    }
    let Some(address) = s.lb_address.clone() else {
        return;
    };
    s.lb_pending.remove(&key);
    if let Some(svc) = s
        .objects
        .get_mut(&(ObjectKind::Service, ns.to_owned(), name.to_owned()))
    {
        svc["status"]["loadBalancer"]["ingress"] = json!([address]);
    }
}

/// Whether two StatefulSets have the same claim templates, as the API server compares them
/// (quantities by amount).
fn same_claims(a: &Json, b: &Json) -> bool {
    let count = |o: &Json| {
        o["spec"]["volumeClaimTemplates"]
            .as_array()
            .map_or(0, Vec::len)
    };
    count(a) == count(b)
        && match (
            Persistence::of_statefulset(a),
            Persistence::of_statefulset(b),
        ) {
            (Some(x), Some(y)) => x.same(&y),
            (x, y) => x == y,
        }
}

fn annotation_keys(o: &Json) -> BTreeSet<String> {
    o["metadata"]["annotations"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Json, patch: &Json) {
    let Json::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Json::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Json::Null), v);
            }
        }
    }
}

/// Every host call the kinds make must be one the provider's ClusterRole grants
/// (`deploy/rbac/clusterrole.yaml` is generated from [`ObjectKind::access`]).
fn granted(kind: ObjectKind, access: Access) {
    assert!(
        kind.permits(access),
        "{access:?} on {} is not in the provider's ClusterRole: add it to ObjectKind::access",
        kind.kind()
    );
}

#[async_trait]
impl HostObjects for FakeHost {
    async fn apply(&self, object: &Json) -> Result<(), ObjectError> {
        let mut s = self.lock();
        enter(&mut s)?;
        let kind =
            ObjectKind::from_kind(object["kind"].as_str().unwrap_or_default()).expect("kind");
        granted(kind, Access::Apply);
        if s.fail_apply == Some(kind) {
            s.fail_apply = None;
            return Err(ObjectError::Other(format!(
                "connection lost applying a {}",
                kind.kind()
            )));
        }
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if kind == ObjectKind::Namespace {
            assert!(
                !s.terminating.contains_key(&name),
                "applied a terminating namespace"
            );
        } else if !kind.cluster_scoped() {
            assert!(
                s.objects
                    .contains_key(&(ObjectKind::Namespace, String::new(), ns.clone())),
                "namespace {ns} must exist first"
            );
        }
        let key = (kind, ns.clone(), name.clone());
        let mut o = object.clone();
        let applied = annotation_keys(&o);
        if let Some(old) = s.objects.get(&key) {
            let owned = s.applied_annotations.get(&key).cloned().unwrap_or_default();
            for k in annotation_keys(old).difference(&owned) {
                if !applied.contains(k) {
                    o["metadata"]["annotations"][k] = old["metadata"]["annotations"][k].clone();
                }
            }
        }
        if kind == ObjectKind::StatefulSet
            && let Some(old) = s.objects.get(&key)
            && !same_claims(old, &o)
        {
            return Err(ObjectError::Other(format!(
                "StatefulSet.apps {name:?} is invalid: spec: Forbidden: updates to statefulset \
                 spec for fields other than 'replicas', 'ordinals', 'template', \
                 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' \
                 and 'minReadySeconds' are forbidden"
            )));
        }
        if kind == ObjectKind::Service {
            let old = s.objects.get(&key).cloned();
            apply_service(&mut s, &ns, &name, old.as_ref(), &mut o)?;
        }
        s.applied_annotations.insert(key.clone(), applied);
        if kind == ObjectKind::StatefulSet {
            let generation = s
                .objects
                .get(&key)
                .and_then(|old| old["metadata"]["generation"].as_i64())
                .unwrap_or(0)
                + 1;
            o["metadata"]["generation"] = json!(generation);
            o["status"] = json!({ "observedGeneration": generation, "currentRevision": "r", "updateRevision": "r" });
            run_statefulset(&mut s, &ns, &mut o);
        }
        s.objects.insert(key, o);
        Ok(())
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        let mut s = self.lock();
        enter(&mut s)?;
        granted(kind, Access::Get);
        if kind == ObjectKind::StatefulSet {
            progress_stop(&mut s, namespace.unwrap_or_default(), name);
        }
        if kind == ObjectKind::Service {
            progress_load_balancer(&mut s, namespace.unwrap_or_default(), name);
        }
        if kind == ObjectKind::Secret
            && let Some(vc) = name.strip_prefix("vc-")
            && let Some(left) = s.late_secret
        {
            if left == 0 {
                s.late_secret = None;
                write_kubeconfig(&mut s, namespace.unwrap_or_default(), vc);
            } else {
                s.late_secret = Some(left - 1);
            }
        }
        if kind == ObjectKind::Namespace
            && let Some(left) = s.terminating.get_mut(name)
        {
            if *left == 0 {
                s.terminating.remove(name);
                let ns = name.to_owned();
                s.objects
                    .retain(|k, _| k.1 != ns && !(k.0 == ObjectKind::Namespace && k.2 == ns));
            } else {
                *left -= 1;
            }
        }
        Ok(s.objects
            .get(&(
                kind,
                namespace.unwrap_or_default().to_owned(),
                name.to_owned(),
            ))
            .cloned())
    }

    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ObjectError> {
        let mut s = self.lock();
        enter(&mut s)?;
        granted(kind, Access::Delete);
        let key = (
            kind,
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        if kind == ObjectKind::Namespace {
            if let Some(ns) = s.objects.get_mut(&key) {
                ns["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                s.terminating.insert(name.to_owned(), 2);
            }
        } else {
            if let Some(vc) = s
                .objects
                .get(&key)
                .and_then(|p| p["metadata"]["labels"][SYNCED_BY].as_str())
            {
                // A running syncer would recreate it at once.
                let sts = s
                    .objects
                    .get(&(ObjectKind::StatefulSet, key.1.clone(), vc.to_owned()));
                assert!(
                    sts.is_none_or(|o| o["status"]["replicas"] == 0),
                    "deleted synced pod {name} while the control plane of {vc} still runs"
                );
            }
            let control_plane = s.objects.get(&key).and_then(|p| {
                (p["metadata"]["labels"]["app"] == "vcluster")
                    .then(|| {
                        p["metadata"]["labels"]["release"]
                            .as_str()
                            .map(str::to_owned)
                    })
                    .flatten()
            });
            s.objects.remove(&key);
            // The StatefulSet controller starts a new pod, whose syncer writes its Secret.
            if let Some(vc) = control_plane {
                s.restarts += 1;
                let sts_key = (ObjectKind::StatefulSet, key.1.clone(), vc);
                if let Some(mut sts) = s.objects.get(&sts_key).cloned() {
                    run_statefulset(&mut s, &key.1, &mut sts);
                    s.objects.insert(sts_key, sts);
                }
            }
        }
        Ok(())
    }

    async fn merge_patch(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), ObjectError> {
        let mut s = self.lock();
        enter(&mut s)?;
        granted(kind, Access::MergePatch);
        let key = (
            kind,
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        let Some(o) = s.objects.get_mut(&key) else {
            return Err(ObjectError::Other(format!(
                "{} {name} not found",
                kind.kind()
            )));
        };
        merge(o, patch);
        // Annotations this patch wrote are no longer the last apply's.
        let patched = annotation_keys(patch);
        if let Some(owned) = s.applied_annotations.get_mut(&key) {
            owned.retain(|k| !patched.contains(k));
        }
        Ok(())
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ObjectError> {
        let mut s = self.lock();
        enter(&mut s)?;
        granted(kind, Access::List);
        let want: Vec<(&str, &str)> = selector
            .split(',')
            .filter_map(|p| p.split_once('='))
            .collect();
        Ok(s.objects
            .iter()
            .filter(|(k, o)| {
                k.0 == kind
                    && namespace.is_none_or(|ns| k.1 == ns)
                    && want
                        .iter()
                        .all(|(lk, lv)| o["metadata"]["labels"][*lk] == *lv)
            })
            // As the API server answers: items without `apiVersion` and `kind`.
            .map(|(_, o)| {
                let mut o = o.clone();
                if let Some(m) = o.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                o
            })
            .collect())
    }

    async fn server_version(&self) -> Result<String, ObjectError> {
        Err(unused("the server version"))
    }

    async fn serves(&self, kind: ObjectKind) -> Result<bool, ObjectError> {
        Err(unused(&format!("discovery of {}", kind.kind())))
    }

    async fn logs(&self, _ns: &str, pod: &str, _container: &str) -> Result<String, ObjectError> {
        Err(unused(&format!("the log of {pod}")))
    }

    async fn take_turn(
        &self,
        lease: LeaseRef,
        _cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ObjectError> {
        Err(unused(&format!("a turn on {lease}")))
    }

    fn calls(&self) -> u64 {
        self.lock().calls
    }
}

/// A host call a virtual cluster never makes: failing it shows in the test that made it.
fn unused(what: &str) -> ObjectError {
    ObjectError::Other(format!("a virtual cluster does not ask for {what}"))
}

fn setup() -> (Arc<FakeHost>, VirtualCluster<Arc<FakeHost>>) {
    let host = Arc::new(FakeHost::default());
    let kind = VirtualCluster(Arc::clone(&host));
    (host, kind)
}

fn vc(kind: &VirtualCluster<Arc<FakeHost>>, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![("name", Value::string("team-a"))];
    attrs.extend(extra.iter().cloned());
    config(kind, &attrs)
}

fn quota(pods: i64) -> Value {
    Value::object([
        ("gpus", Value::int(8)),
        ("cpu", Value::string("64")),
        ("memory", Value::string("1024Mi")),
        ("pods", Value::int(pods)),
    ])
}

const NS: &str = "vc-team-a";

/// The claim of the control-plane pod `team-a-0`.
const CLAIM: &str = "data-team-a-0";

fn persistence(size: &str, class: Option<&str>) -> Value {
    Value::object([
        ("size", Value::string(size)),
        ("storage_class", class.map(Value::string).into()),
    ])
}

/// The uid and requested size of the control plane's claim, if there is one.
fn claim(host: &FakeHost) -> Option<(String, String)> {
    host.obj(ObjectKind::PersistentVolumeClaim, NS, CLAIM)
        .map(|c| {
            (
                c["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
                c["spec"]["resources"]["requests"]["storage"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
}

/// Puts a running pod `name` in `ns`, synced there by the control plane of virtual cluster
/// `synced_by` (or by nothing: a pod of the host's own).
fn put_pod(host: &FakeHost, ns: &str, name: &str, synced_by: Option<&str>) {
    let labels = synced_by.map_or(json!({}), |vc| json!({ SYNCED_BY: vc }));
    host.lock().objects.insert(
        (ObjectKind::Pod, ns.to_owned(), name.to_owned()),
        json!({
            "metadata": { "name": name, "namespace": ns, "labels": labels },
            "status": { "phase": "Running" },
        }),
    );
}

fn annotation(o: &Json, key: &str) -> Option<String> {
    o["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_owned)
}

fn timeouts(t: &str) -> Value {
    Value::object([
        ("create", Value::string(t)),
        ("update", Value::string(t)),
        ("delete", Value::Null),
        ("read", Value::Null),
    ])
}

#[tokio::test(start_paused = true)]
async fn create_replan_pause_resume_destroy() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("quota", quota(50))]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    let create_calls = host.take_calls();
    let s = tf.state.clone();
    assert_eq!(s.get("status"), &Value::string("Running"));
    assert_eq!(s.get("endpoint"), &Value::string("https://127.0.0.1:41000"));
    assert_eq!(s.get("cluster_ca_certificate"), &Value::string("CA PEM"));
    assert!(
        s.get("kubeconfig")
            .as_str()
            .is_some_and(|k| k.contains("127.0.0.1:41000"))
    );
    for kind in [
        ObjectKind::StatefulSet,
        ObjectKind::ResourceQuota,
        ObjectKind::RoleBinding,
        ObjectKind::ClusterRole,
        ObjectKind::ClusterRoleBinding,
    ] {
        assert_eq!(host.count(kind), 1, "{kind:?}");
    }
    // The chart's four: workloads, control plane, DNS, snapshots.
    assert_eq!(host.count(ObjectKind::NetworkPolicy), 4);
    // A quota without limit_range has no LimitRange (the chart's `auto` would add one).
    assert_eq!(host.count(ObjectKind::LimitRange), 0);
    assert_eq!(host.count(ObjectKind::ServiceAccount), 2);
    assert_eq!(host.count(ObjectKind::Service), 2);
    assert!(
        host.obj(ObjectKind::ClusterRole, "", "vc-team-a-v-vc-team-a")
            .is_some()
    );

    let p = tf.plan(&c).await;
    let refresh_calls = host.take_calls();
    assert_eq!(p.action, Action::NoOp, "{:?}", p.planned.get("drift"));

    // Pause and resume.
    tf.apply_ok(&vc(
        &k,
        &[("quota", quota(50)), ("paused", Value::Bool(true))],
    ))
    .await;
    assert_eq!(tf.state.get("status"), &Value::string("Paused"));
    let sts = host
        .obj(ObjectKind::StatefulSet, NS, "team-a")
        .expect("sts");
    assert_eq!(sts["spec"]["replicas"], 0);
    assert!(host.obj(ObjectKind::Pod, NS, "team-a-0").is_none());
    tf.apply_ok(&c).await;
    assert_eq!(tf.state.get("status"), &Value::string("Running"));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    host.take_calls();
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    let destroy_calls = host.take_calls();
    assert!(tf.state.is_null());
    assert!(
        host.lock().objects.is_empty(),
        "destroy leaves nothing behind"
    );
    // Bounded call counts (figures for the report; the bounds keep refresh from growing).
    eprintln!(
        "host calls: create {create_calls}, refresh {refresh_calls}, destroy {destroy_calls}"
    );
    assert!(refresh_calls <= 20, "{refresh_calls}");
}

#[tokio::test(start_paused = true)]
async fn pausing_deletes_the_synced_pods_once_the_control_plane_stopped() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let running = vc(&k, &[]);
    tf.apply_ok(&running).await;
    // What the syncer put in the host: two pods of team-a; a pod of another virtual cluster
    // in the same namespace, a pod of the host's own, and a pod labelled for team-a in another
    // namespace, which must all stay; and a synced Service, which pausing leaves too.
    put_pod(&host, NS, "web-x-default-x-team-a", Some("team-a"));
    put_pod(&host, NS, "train-x-ml-x-team-a", Some("team-a"));
    put_pod(&host, NS, "web-x-default-x-team-b", Some("team-b"));
    put_pod(&host, NS, "debug", None);
    put_pod(&host, "elsewhere", "web-x-default-x-team-a", Some("team-a"));
    host.lock().objects.insert(
        (
            ObjectKind::Service,
            NS.to_owned(),
            "web-x-default-x-team-a".to_owned(),
        ),
        json!({ "metadata": { "name": "web-x-default-x-team-a", "namespace": NS,
                              "labels": { SYNCED_BY: "team-a" } } }),
    );

    let paused = vc(&k, &[("paused", Value::Bool(true))]);
    tf.apply_ok(&paused).await;
    assert_eq!(tf.state.get("status"), &Value::string("Paused"));
    // The fake panics had a synced pod been deleted before the control-plane pod was gone.
    let pods = |ns: &str| -> Vec<String> {
        host.lock()
            .objects
            .keys()
            .filter(|k| k.0 == ObjectKind::Pod && k.1 == ns)
            .map(|k| k.2.clone())
            .collect()
    };
    assert_eq!(pods(NS), ["debug", "web-x-default-x-team-b"]);
    assert_eq!(pods("elsewhere"), ["web-x-default-x-team-a"]);
    assert!(
        host.obj(ObjectKind::Service, NS, "web-x-default-x-team-a")
            .is_some()
    );
    let sts = host
        .obj(ObjectKind::StatefulSet, NS, "team-a")
        .expect("sts");
    assert_eq!(sts["spec"]["replicas"], 0);
    assert_eq!(sts["status"]["replicas"], 0);
    assert_eq!(annotation(&sts, PAUSED).as_deref(), Some("true"));
    assert_eq!(annotation(&sts, PAUSED_REPLICAS).as_deref(), Some("1"));
    let stamped = annotation(&sts, PAUSED_DATE).expect("paused-date");
    assert!(humantime::parse_rfc3339(&stamped).is_ok(), "{stamped}");

    // The date is not drift, and a later apply keeps it (made older here, so that a new
    // one would differ even within the same second).
    assert_eq!(tf.plan(&paused).await.action, Action::NoOp);
    let date = "2026-01-01T00:00:00Z".to_owned();
    host.edit(ObjectKind::StatefulSet, NS, "team-a", |o| {
        o["metadata"]["annotations"][PAUSED_DATE] = json!(date);
    });
    tf.apply_ok(&vc(
        &k,
        &[("paused", Value::Bool(true)), ("quota", quota(50))],
    ))
    .await;
    let sts = host
        .obj(ObjectKind::StatefulSet, NS, "team-a")
        .expect("sts");
    assert_eq!(annotation(&sts, PAUSED_DATE), Some(date));

    // A pause without the annotations (as an older gpufleet left it) is drift, repaired.
    host.edit(ObjectKind::StatefulSet, NS, "team-a", |o| {
        o["metadata"]["annotations"] = json!({});
    });
    let p = tf.plan(&paused).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(
        tf.state.get("drift").as_seq().unwrap_or_default(),
        [
            Value::string("StatefulSet team-a: metadata.annotations.loft.sh/paused is missing"),
            Value::string(
                "StatefulSet team-a: metadata.annotations.loft.sh/paused-replicas is missing"
            ),
        ]
    );
    tf.apply_ok(&paused).await;
    let sts = host
        .obj(ObjectKind::StatefulSet, NS, "team-a")
        .expect("sts");
    assert_eq!(annotation(&sts, PAUSED).as_deref(), Some("true"));

    // Resume: the annotations go, the control plane comes back; the pods are its to recreate.
    tf.apply_ok(&running).await;
    assert_eq!(tf.state.get("status"), &Value::string("Running"));
    let sts = host
        .obj(ObjectKind::StatefulSet, NS, "team-a")
        .expect("sts");
    assert_eq!(sts["spec"]["replicas"], 1);
    for key in [PAUSED, PAUSED_REPLICAS, PAUSED_DATE] {
        assert_eq!(annotation(&sts, key), None, "{key}");
    }
    assert!(host.obj(ObjectKind::Pod, NS, "team-a-0").is_some());
    assert_eq!(tf.plan(&running).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn a_pause_that_does_not_stop_times_out_and_leaves_the_synced_pods() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let running = vc(&k, &[("timeouts", timeouts("10s"))]);
    tf.apply_ok(&running).await;
    put_pod(&host, NS, "web-x-default-x-team-a", Some("team-a"));
    host.lock().stuck = true;
    let paused = vc(
        &k,
        &[("paused", Value::Bool(true)), ("timeouts", timeouts("10s"))],
    );
    let (_, d) = tf.apply(&paused).await;
    let text = show(&d);
    assert!(
        text.contains("while waiting for the control plane to stop"),
        "{text}"
    );
    assert!(
        text.contains("StatefulSet team-a still has 1 pod"),
        "{text}"
    );
    assert!(
        host.obj(ObjectKind::Pod, NS, "web-x-default-x-team-a")
            .is_some()
    );
    // The update kept the prior state, so the next apply pauses again, and finishes.
    assert_eq!(tf.state.get("paused"), &Value::Bool(false));
    host.lock().stuck = false;
    tf.apply_ok(&paused).await;
    assert_eq!(tf.state.get("status"), &Value::string("Paused"));
    assert!(
        host.obj(ObjectKind::Pod, NS, "web-x-default-x-team-a")
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn resuming_what_the_vcluster_cli_paused_removes_its_annotations() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let running = vc(&k, &[]);
    tf.apply_ok(&running).await;
    // `vcluster pause`: a merge patch by another client, which server-side apply leaves alone.
    host.edit(ObjectKind::StatefulSet, NS, "team-a", |o| {
        o["metadata"]["annotations"] = json!({
            PAUSED: "true", PAUSED_REPLICAS: "1", PAUSED_DATE: "2026-01-01T00:00:00Z",
        });
        o["spec"]["replicas"] = json!(0);
    });
    let p = tf.plan(&running).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(tf.state.get("paused"), &Value::Bool(true));
    tf.apply_ok(&running).await;
    assert_eq!(tf.state.get("status"), &Value::string("Running"));
    let sts = host
        .obj(ObjectKind::StatefulSet, NS, "team-a")
        .expect("sts");
    assert_eq!(sts["spec"]["replicas"], 1);
    for key in [PAUSED, PAUSED_REPLICAS, PAUSED_DATE] {
        assert_eq!(annotation(&sts, key), None, "{key}");
    }
    assert_eq!(tf.plan(&running).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn the_data_stays_on_its_claim_until_the_claim_changes() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let running = vc(&k, &[]);
    tf.apply_ok(&running).await;
    assert_eq!(tf.state.get("persistence"), &persistence("5Gi", None));
    let (uid, size) = claim(&host).expect("the control plane's claim");
    assert_eq!(size, "5Gi");
    let claim_labels = host
        .obj(ObjectKind::PersistentVolumeClaim, NS, CLAIM)
        .expect("claim")["metadata"]["labels"]
        .clone();
    assert_eq!(
        claim_labels,
        json!({ "app": "vcluster", "release": "team-a" })
    );

    // Pause, resume, a restarting change and the same amount written otherwise: the same
    // claim throughout.
    tf.apply_ok(&vc(&k, &[("paused", Value::Bool(true))])).await;
    assert!(host.obj(ObjectKind::Pod, NS, "team-a-0").is_none());
    assert_eq!(claim(&host).map(|c| c.0), Some(uid.clone()));
    tf.apply_ok(&running).await;
    let restart = vc(
        &k,
        &[(
            "values_override",
            Value::string("sync:\n  toHost:\n    ingresses:\n      enabled: true\n"),
        )],
    );
    assert_eq!(tf.apply_ok(&restart).await, Action::Update);
    let same_amount = vc(&k, &[("persistence", persistence("5120Mi", None))]);
    assert_eq!(tf.apply_ok(&same_amount).await, Action::Update);
    assert_eq!(tf.plan(&same_amount).await.action, Action::NoOp);
    assert_eq!(
        tf.state.get("persistence"),
        &persistence("5120Mi", None),
        "kept in the configured spelling"
    );
    assert_eq!(claim(&host).map(|c| c.0), Some(uid.clone()));

    // A bigger claim replaces the virtual cluster: the namespace goes with the old claim, and
    // the new control plane starts on a new one. No apply meets the immutability error.
    let bigger = vc(&k, &[("persistence", persistence("20Gi", None))]);
    let p = tf.plan(&bigger).await;
    assert_eq!(p.action, Action::Replace);
    assert_eq!(tf.apply_ok(&bigger).await, Action::Replace);
    let (new_uid, size) = claim(&host).expect("a new claim");
    assert_ne!(new_uid, uid);
    assert_eq!(size, "20Gi");
    assert_eq!(tf.plan(&bigger).await.action, Action::NoOp);

    // Destroy: the claim goes with the namespace, and so does everything else.
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(
        host.lock().objects.is_empty(),
        "destroy leaves nothing behind"
    );
}

#[tokio::test(start_paused = true)]
async fn a_control_plane_without_a_claim_is_replaced_onto_one() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[]);
    tf.apply_ok(&c).await;
    // What an earlier gpufleet release made: no claim template, the data on an emptyDir, and
    // a state without `persistence`.
    host.edit(ObjectKind::StatefulSet, NS, "team-a", |o| {
        o["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("volumeClaimTemplates");
    });
    host.lock().objects.remove(&(
        ObjectKind::PersistentVolumeClaim,
        NS.to_owned(),
        CLAIM.to_owned(),
    ));
    if let Some(m) = tf.state.as_object_mut() {
        m.insert("persistence".to_owned(), Value::Null);
    }
    let p = tf.plan(&c).await;
    assert_eq!(tf.state.get("persistence"), &Value::Null);
    assert_eq!(p.action, Action::Replace);
    tf.apply_ok(&c).await;
    assert!(claim(&host).is_some());
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn a_plan_that_missed_a_claim_change_writes_nothing_and_says_why() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&vc(&k, &[])).await;
    // The StatefulSet was made again out of band with another claim; a plan without a
    // refresh does not know, and would change the quota in place.
    host.edit(ObjectKind::StatefulSet, NS, "team-a", |o| {
        o["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
            json!("50Gi");
    });
    let stale = support::plan(&k, &tf.ctx, &tf.state, &vc(&k, &[("quota", quota(10))])).await;
    assert_eq!(stale.action, Action::Update);
    let applied = support::apply(&k, &tf.ctx, &stale).await;
    let text = show(&applied.diagnostics);
    assert!(
        text.contains("cannot change the volume claims of a StatefulSet, so nothing was written"),
        "{text}"
    );
    assert!(
        text.contains("checking the control plane's volume claim"),
        "{text}"
    );
    assert!(!text.contains("Forbidden"), "{text}");
    assert_eq!(host.count(ObjectKind::ResourceQuota), 0, "nothing written");
    // With a refresh, the plan sees the claim and replaces.
    assert_eq!(tf.plan(&vc(&k, &[])).await.action, Action::Replace);
}

#[tokio::test(start_paused = true)]
async fn a_destroy_that_cannot_delete_the_namespace_deletes_the_claims() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&vc(&k, &[])).await;
    // Another virtual cluster's claim and a claim of the tenant's stay.
    for (name, release) in [("data-team-b-0", "team-b"), ("my-data", "team-a")] {
        host.lock().objects.insert(
            (
                ObjectKind::PersistentVolumeClaim,
                NS.to_owned(),
                name.to_owned(),
            ),
            json!({ "metadata": { "name": name, "namespace": NS,
                                  "labels": { "app": "vcluster", "release": release } } }),
        );
    }
    // The namespace was taken over between refresh and apply.
    host.edit(ObjectKind::Namespace, "", NS, |ns| {
        ns["metadata"]["labels"] = json!({ "owner": "someone-else" });
    });
    let destroy = support::Plan {
        prior: tf.state.clone(),
        config: Value::Null,
        planned: Value::Null,
        action: Action::Delete,
        requires_replace: Vec::new(),
        diagnostics: Default::default(),
    };
    let applied = support::apply(&k, &tf.ctx, &destroy).await;
    assert!(
        !applied.diagnostics.has_error(),
        "{}",
        show(&applied.diagnostics)
    );
    assert!(host.obj(ObjectKind::Namespace, "", NS).is_some());
    let claims: Vec<String> = host
        .lock()
        .objects
        .keys()
        .filter(|k| k.0 == ObjectKind::PersistentVolumeClaim)
        .map(|k| k.2.clone())
        .collect();
    assert_eq!(claims, ["data-team-b-0", "my-data"]);
    assert_eq!(host.count(ObjectKind::StatefulSet), 0);
    assert_eq!(host.count(ObjectKind::ClusterRole), 0);
}

/// Out of band: a quota raised, a namespace label changed, the policy that isolates the
/// tenant's pods deleted, and the control plane's Role granted to someone else.
fn edit_out_of_band(host: &FakeHost) {
    host.edit(ObjectKind::ResourceQuota, NS, "vc-team-a", |rq| {
        rq["spec"]["hard"]["count/pods"] = json!("500");
    });
    host.edit(ObjectKind::Namespace, "", NS, |ns| {
        ns["metadata"]["labels"]["gpufleet.dev/isolation"] = json!("dedicated");
    });
    host.lock().objects.remove(&(
        ObjectKind::NetworkPolicy,
        NS.to_owned(),
        "vc-work-team-a".to_owned(),
    ));
    host.edit(ObjectKind::RoleBinding, NS, "vc-team-a", |rb| {
        rb["subjects"][0]["name"] = json!("intruder");
    });
}

/// The `drift` a state records.
fn drift_of(state: &Value) -> Vec<&str> {
    state
        .get("drift")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn drift_shows_in_the_plan_and_apply_repairs_it() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("quota", quota(50))]);
    tf.apply_ok(&c).await;
    edit_out_of_band(&host);
    // And a ServiceAccount deleted.
    host.lock().objects.remove(&(
        ObjectKind::ServiceAccount,
        NS.to_owned(),
        "vc-workload-team-a".to_owned(),
    ));
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(tf.state.get("network_isolation"), &Value::Bool(false));
    assert_eq!(tf.state.get("quota").get("pods"), &Value::int(500));
    // The quota was written as 1024Mi and reads back the same amount: no drift there.
    assert_eq!(
        tf.state.get("quota").get("memory"),
        &Value::string("1024Mi")
    );
    assert_eq!(
        drift_of(&tf.state),
        [
            "Namespace vc-team-a: label gpufleet.dev/isolation is \"dedicated\", want \"shared\"",
            "ServiceAccount vc-workload-team-a: missing",
            "RoleBinding vc-team-a: subjects[0].name is \"intruder\", want \"vc-team-a\"",
            "ResourceQuota vc-team-a: spec.hard.count/pods is \"500\", want \"50\"",
            "NetworkPolicy vc-work-team-a: missing",
        ]
    );
    tf.apply_ok(&c).await;
    let rq = host
        .obj(ObjectKind::ResourceQuota, NS, "vc-team-a")
        .expect("rq");
    assert_eq!(rq["spec"]["hard"]["count/pods"], "50");
    assert!(
        host.obj(ObjectKind::ServiceAccount, NS, "vc-workload-team-a")
            .is_some()
    );
    assert!(
        host.obj(ObjectKind::NetworkPolicy, NS, "vc-work-team-a")
            .is_some()
    );
    assert_eq!(
        host.obj(ObjectKind::RoleBinding, NS, "vc-team-a")
            .expect("rb")["subjects"][0]["name"],
        "vc-team-a"
    );
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    // A deleted namespace means the virtual cluster is gone: the plan creates it again.
    host.lock().objects.clear();
    assert_eq!(tf.plan(&c).await.action, Action::Create);
}

#[tokio::test(start_paused = true)]
async fn import_by_id_or_name_plans_empty() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(
        &k,
        &[
            ("quota", quota(50)),
            ("isolation", Value::string("dedicated")),
            ("pod_security", Value::string("restricted")),
            // No `sleep`: it renders nothing (a vCluster Platform feature), so an import
            // cannot recover it, as it cannot recover `values_override`.
            (
                "labels",
                Value::Map([("example.com/team".to_owned(), Value::string("ml"))].into()),
            ),
            // Read back from the StatefulSet's claim template.
            ("persistence", persistence("20Gi", Some("fast-ssd"))),
        ],
    );
    tf.apply_ok(&c).await;
    for id in ["vc-team-a/team-a", "team-a"] {
        let mut imported = Terraform::new(&k);
        let d = imported.import(id).await;
        assert!(!d.has_error(), "{}", show(&d));
        let p = imported.plan(&c).await;
        assert_eq!(p.action, Action::NoOp, "{id}: {:?}", p.planned);
    }
    let mut missing = Terraform::new(&k);
    missing.import("nothing-here").await;
    assert!(missing.state.is_null());
    let _ = host;
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_create_converges_without_duplicates() {
    let (host, k) = setup();
    let c = vc(&k, &[]);
    host.lock().fail_apply = Some(ObjectKind::StatefulSet);
    let mut first = Terraform::new(&k);
    let (_, d) = first.apply(&c).await;
    assert!(d.has_error());
    // As if the provider had been killed: Terraform recorded nothing.
    let mut again = Terraform::new(&k);
    again.apply_ok(&c).await;
    assert_eq!(again.state.get("status"), &Value::string("Running"));
    assert_eq!(host.count(ObjectKind::Namespace), 1);
    assert_eq!(host.count(ObjectKind::StatefulSet), 1);
    assert_eq!(host.count(ObjectKind::ServiceAccount), 2);
}

#[tokio::test(start_paused = true)]
async fn a_crash_looping_control_plane_fails_fast_and_a_foreign_namespace_is_refused() {
    let (host, k) = setup();
    host.lock().crash = true;
    let mut tf = Terraform::new(&k);
    let (_, d) = tf.apply(&vc(&k, &[])).await;
    let text = show(&d);
    assert!(text.contains("CrashLoopBackOff"), "{text}");
    assert!(
        tf.tainted,
        "a failed create is recorded and replaced next time"
    );

    host.lock().objects.insert(
        (ObjectKind::Namespace, String::new(), "shared-ns".to_owned()),
        json!({ "metadata": { "name": "shared-ns", "labels": { "team": "x" } } }),
    );
    let mut other = Terraform::new(&k);
    let before = host.lock().objects.len();
    let (_, d) = other
        .apply(&vc(
            &k,
            &[
                ("name", Value::string("b")),
                ("namespace", Value::string("shared-ns")),
            ],
        ))
        .await;
    assert!(show(&d).contains("not created by gpufleet"), "{}", show(&d));
    assert!(other.state.is_null());
    assert_eq!(host.lock().objects.len(), before, "nothing written");
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_the_wait() {
    let (host, k) = setup();
    host.lock().crash = false;
    // No pod ever becomes ready when the StatefulSet has no stand-in: simulate by failing
    // readiness with an endless wait, then cancel.
    let mut tf = Terraform::new(&k);
    tf.ctx.cancel.cancel();
    let (_, d) = tf.apply(&vc(&k, &[])).await;
    assert!(
        show(&d).contains("asked the provider to stop"),
        "{}",
        show(&d)
    );
}

fn expose(service_type: &str, host: Option<&str>) -> Value {
    Value::object([
        ("type", Value::string(service_type)),
        ("host", host.map(Value::string).into()),
    ])
}

/// The server of the first cluster of the kubeconfig in `state`.
fn kubeconfig_server(state: &Value) -> String {
    let text = state.get("kubeconfig").as_str().expect("kubeconfig");
    let parsed: Json = serde_saphyr::from_str(text).expect("kubeconfig is YAML");
    parsed["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("server")
        .to_owned()
}

/// The URL attributes of `state`: `host`, `endpoint` and the kubeconfig's server, which must
/// agree.
fn url_of(state: &Value) -> String {
    let host = state.get("host").as_str().expect("host").to_owned();
    assert_eq!(state.get("endpoint"), &Value::string(&*host));
    assert_eq!(kubeconfig_server(state), host);
    host
}

/// The node port of the https port of Service `team-a`.
fn https_node_port(host: &FakeHost) -> i64 {
    let svc = host
        .obj(ObjectKind::Service, NS, "team-a")
        .expect("Service");
    svc["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == "https")
        .and_then(|p| p["nodePort"].as_i64())
        .expect("a node port")
}

/// A refresh right after an apply finds what the apply recorded, and the plan is empty.
async fn refresh_agrees(tf: &mut Terraform<'_>, c: &Value) {
    let applied = tf.state.clone();
    let p = tf.plan(c).await;
    assert_eq!(
        tf.state, applied,
        "the refresh changed the state the apply wrote"
    );
    assert_eq!(p.action, Action::NoOp, "{:?}", p.planned);
}

#[tokio::test(start_paused = true)]
async fn the_credentials_come_apart_for_the_kubernetes_and_helm_providers() {
    let (_host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[]);
    tf.apply_ok(&c).await;
    let s = &tf.state;
    // ClusterIP without a host: the server the control plane wrote, as before.
    assert_eq!(url_of(s), "https://127.0.0.1:41000");
    assert_eq!(s.get("expose"), &expose("ClusterIP", None));
    assert_eq!(s.get("cluster_ca_certificate"), &Value::string("CA PEM"));
    assert_eq!(
        s.get("client_certificate"),
        &Value::string("CLIENT CERT PEM")
    );
    assert_eq!(s.get("client_key"), &Value::string("CLIENT KEY PEM"));
    refresh_agrees(&mut tf, &c).await;
}

#[tokio::test(start_paused = true)]
async fn a_load_balancer_is_waited_for_and_its_address_reported() {
    let (host, k) = setup();
    host.lock().lb_address = Some(json!({ "ip": "203.0.113.10" }));
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("expose", expose("LoadBalancer", None))]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    assert_eq!(url_of(&tf.state), "https://203.0.113.10:443");
    assert_eq!(tf.state.get("status"), &Value::string("Running"));
    let svc = host
        .obj(ObjectKind::Service, NS, "team-a")
        .expect("Service");
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
    assert!(
        host.lock().lb_pending.is_empty(),
        "the address was waited for"
    );
    // The rest of the kubeconfig is the control plane's.
    let kubeconfig = tf.state.get("kubeconfig").as_str().unwrap_or_default();
    assert!(kubeconfig.contains(&b64("CA PEM")), "{kubeconfig}");
    assert!(!kubeconfig.contains("41000"), "{kubeconfig}");
    refresh_agrees(&mut tf, &c).await;

    // A new address (the load balancer was provisioned again) shows on refresh.
    host.edit(ObjectKind::Service, NS, "team-a", |svc| {
        svc["status"]["loadBalancer"]["ingress"] = json!([{ "hostname": "lb-7.elb.example" }]);
    });
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert_eq!(url_of(&tf.state), "https://lb-7.elb.example:443");

    // Without an address the refresh says Pending and keeps the last one; the apply waits
    // for an address again.
    host.edit(ObjectKind::Service, NS, "team-a", |svc| {
        svc["status"] = json!({ "loadBalancer": {} });
    });
    host.lock()
        .lb_pending
        .insert((NS.to_owned(), "team-a".to_owned()), LB_READS);
    let p = tf.plan(&c).await;
    assert_eq!(tf.state.get("status"), &Value::string("Pending"));
    assert_eq!(url_of(&tf.state), "https://lb-7.elb.example:443");
    assert_eq!(p.action, Action::Update);
    tf.apply_ok(&c).await;
    assert_eq!(url_of(&tf.state), "https://203.0.113.10:443");
    refresh_agrees(&mut tf, &c).await;
}

#[tokio::test(start_paused = true)]
async fn a_load_balancer_that_never_gets_an_address_times_out_saying_so() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(
        &k,
        &[
            ("expose", expose("LoadBalancer", Some("vc.example.com"))),
            ("timeouts", timeouts("30s")),
        ],
    );
    let (_, d) = tf.apply(&c).await;
    let text = show(&d);
    assert!(text.contains("gave up after 30s"), "{text}");
    assert!(
        text.contains("Service team-a (LoadBalancer) has no address yet"),
        "{text}"
    );
    assert!(tf.tainted, "the failed create is recorded, to be replaced");
    // Terraform asking to stop ends the wait at once.
    let mut again = Terraform::new(&k);
    again.ctx.cancel.cancel();
    let (_, d) = again.apply(&c).await;
    assert!(
        show(&d).contains("asked the provider to stop"),
        "{}",
        show(&d)
    );
    let _ = host;
}

#[tokio::test(start_paused = true)]
async fn a_node_port_is_reached_on_the_control_planes_node() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("expose", expose("NodePort", None))]);
    tf.apply_ok(&c).await;
    let port = https_node_port(&host);
    assert_eq!(url_of(&tf.state), format!("https://{NODE_IP}:{port}"));
    refresh_agrees(&mut tf, &c).await;
}

#[tokio::test(start_paused = true)]
async fn host_takes_the_place_of_the_address() {
    let (host, k) = setup();
    host.lock().lb_address = Some(json!({ "ip": "203.0.113.10" }));
    let mut tf = Terraform::new(&k);
    let name = Some("team-a.vc.example.com");
    for (service_type, want) in [
        ("ClusterIP", None),
        ("NodePort", Some("node port")),
        ("LoadBalancer", None),
    ] {
        let c = vc(&k, &[("expose", expose(service_type, name))]);
        tf.apply_ok(&c).await;
        let port = match want {
            Some(_) => https_node_port(&host),
            None => 443,
        };
        assert_eq!(
            url_of(&tf.state),
            format!("https://team-a.vc.example.com:{port}"),
            "{service_type}"
        );
        refresh_agrees(&mut tf, &c).await;
    }
    // The name is in the serving certificate's extra names, through vcluster.yaml.
    let secret = host
        .obj(ObjectKind::Secret, NS, "vc-config-team-a")
        .expect("config Secret");
    let yaml = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["config.yaml"].as_str().unwrap_or_default())
        .expect("base64");
    let config: Json = serde_saphyr::from_str(&String::from_utf8_lossy(&yaml)).expect("YAML");
    assert_eq!(
        config["controlPlane"]["proxy"]["extraSANs"],
        json!(["team-a.vc.example.com"])
    );
    assert_eq!(
        config["controlPlane"]["service"]["spec"]["type"],
        "LoadBalancer"
    );
}

#[tokio::test(start_paused = true)]
async fn expose_changes_in_place_between_every_type() {
    let (host, k) = setup();
    host.lock().lb_address = Some(json!({ "ip": "203.0.113.10" }));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&vc(&k, &[])).await;
    let cluster_ip = host
        .obj(ObjectKind::Service, NS, "team-a")
        .expect("Service")["spec"]["clusterIP"]
        .clone();
    for (service_type, url) in [
        ("NodePort", None),
        ("ClusterIP", Some("https://127.0.0.1:41000")),
        ("LoadBalancer", Some("https://203.0.113.10:443")),
        ("NodePort", None),
        ("LoadBalancer", Some("https://203.0.113.10:443")),
        ("ClusterIP", Some("https://127.0.0.1:41000")),
    ] {
        let c = vc(&k, &[("expose", expose(service_type, None))]);
        let p = tf.plan(&c).await;
        assert_eq!(p.action, Action::Update, "{service_type}");
        assert!(p.requires_replace.is_empty(), "{service_type}");
        for a in ["host", "endpoint", "kubeconfig"] {
            assert!(p.planned.get(a).is_unknown(), "{service_type}: {a}");
        }
        // The fake refuses node ports on a ClusterIP Service, as the API server does.
        assert_eq!(tf.apply_ok(&c).await, Action::Update, "{service_type}");
        let svc = host
            .obj(ObjectKind::Service, NS, "team-a")
            .expect("Service");
        assert_eq!(svc["spec"]["type"], service_type);
        assert_eq!(svc["spec"]["clusterIP"], cluster_ip, "the same Service");
        if service_type == "ClusterIP" {
            assert!(node_ports(&svc).is_empty(), "{svc}");
        }
        let want = url.map_or_else(
            || format!("https://{NODE_IP}:{}", https_node_port(&host)),
            str::to_owned,
        );
        assert_eq!(url_of(&tf.state), want, "{service_type}");
        refresh_agrees(&mut tf, &c).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_service_type_changed_out_of_band_shows_in_expose_and_is_reverted() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("expose", expose("NodePort", None))]);
    tf.apply_ok(&c).await;
    host.edit(ObjectKind::Service, NS, "team-a", |svc| {
        svc["spec"]["type"] = json!("ClusterIP");
        for p in svc["spec"]["ports"].as_array_mut().into_iter().flatten() {
            if let Some(m) = p.as_object_mut() {
                m.remove("nodePort");
            }
        }
    });
    let p = tf.plan(&c).await;
    assert_eq!(tf.state.get("expose"), &expose("ClusterIP", None));
    assert_eq!(url_of(&tf.state), "https://127.0.0.1:41000");
    assert_eq!(p.action, Action::Update);
    tf.apply_ok(&c).await;
    assert_eq!(
        url_of(&tf.state),
        format!("https://{NODE_IP}:{}", https_node_port(&host))
    );
    refresh_agrees(&mut tf, &c).await;
}

#[tokio::test(start_paused = true)]
async fn an_exposed_virtual_cluster_imports_with_its_type_and_host() {
    let (host, k) = setup();
    host.lock().lb_address = Some(json!({ "ip": "203.0.113.10" }));
    let mut tf = Terraform::new(&k);
    let c = vc(
        &k,
        &[("expose", expose("LoadBalancer", Some("vc.example.com")))],
    );
    tf.apply_ok(&c).await;
    let mut imported = Terraform::new(&k);
    let d = imported.import("vc-team-a/team-a").await;
    assert!(!d.has_error(), "{}", show(&d));
    assert_eq!(
        imported.state.get("expose"),
        &expose("LoadBalancer", Some("vc.example.com"))
    );
    assert_eq!(url_of(&imported.state), "https://vc.example.com:443");
    assert_eq!(
        imported.state.get("client_key"),
        &Value::string("CLIENT KEY PEM")
    );
    let p = imported.plan(&c).await;
    assert_eq!(p.action, Action::NoOp, "{:?}", p.planned);
}

#[tokio::test(start_paused = true)]
async fn pausing_an_exposed_virtual_cluster_keeps_what_is_known_of_its_address() {
    let (host, k) = setup();
    host.lock().lb_address = Some(json!({ "ip": "203.0.113.10" }));
    let mut tf = Terraform::new(&k);
    let lb = |paused: bool| {
        vc(
            &k,
            &[
                ("expose", expose("LoadBalancer", None)),
                ("paused", Value::Bool(paused)),
            ],
        )
    };
    tf.apply_ok(&lb(false)).await;
    // The load balancer stays while the control plane is scaled to zero.
    tf.apply_ok(&lb(true)).await;
    assert_eq!(tf.state.get("status"), &Value::string("Paused"));
    assert_eq!(url_of(&tf.state), "https://203.0.113.10:443");
    refresh_agrees(&mut tf, &lb(true)).await;
    tf.apply_ok(&lb(false)).await;
    refresh_agrees(&mut tf, &lb(false)).await;

    // A paused NodePort has no node to name: the control plane's own server stands in.
    let np = |paused: bool| {
        vc(
            &k,
            &[
                ("expose", expose("NodePort", None)),
                ("paused", Value::Bool(paused)),
            ],
        )
    };
    tf.apply_ok(&np(false)).await;
    tf.apply_ok(&np(true)).await;
    assert_eq!(url_of(&tf.state), "https://127.0.0.1:41000");
    refresh_agrees(&mut tf, &np(true)).await;
    tf.apply_ok(&np(false)).await;
    assert_eq!(
        url_of(&tf.state),
        format!("https://{NODE_IP}:{}", https_node_port(&host))
    );
}

#[tokio::test(start_paused = true)]
async fn the_data_source_hands_out_the_same_credentials() {
    let (host, k) = setup();
    host.lock().lb_address = Some(json!({ "hostname": "lb-1.elb.example" }));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&vc(&k, &[("expose", expose("LoadBalancer", None))]))
        .await;
    let data = VirtualClusterData(Arc::clone(&host));
    let schema = data.schema();
    let config = Value::Object(
        schema
            .block
            .attributes
            .iter()
            .map(|a| {
                let v = if a.name == "name" {
                    Value::string("team-a")
                } else {
                    Value::Null
                };
                (a.name.to_owned(), v)
            })
            .collect(),
    );
    let r = data.read(&Context::default(), config).await;
    assert!(!r.diagnostics.has_error(), "{}", show(&r.diagnostics));
    let s = &r.new_state;
    assert!(s.conforms_to(&schema.block.value_type()), "{s:?}");
    assert!(s.is_wholly_known());
    assert_eq!(url_of(s), "https://lb-1.elb.example:443");
    assert_eq!(s.get("expose"), &expose("LoadBalancer", None));
    for a in [
        "kubeconfig",
        "cluster_ca_certificate",
        "client_certificate",
        "client_key",
    ] {
        assert_eq!(s.get(a), tf.state.get(a), "{a}");
    }
}

impl sweep::Budgeted for FakeHost {
    fn budget<R>(&self, f: impl FnOnce(&mut sweep::Budget) -> R) -> R {
        f(&mut self.lock().budget)
    }
    /// Every object on the host but pods, which the StatefulSet controller and the syncer
    /// make.
    fn owned(&self) -> Vec<String> {
        self.lock()
            .objects
            .keys()
            .filter(|(kind, _, _)| *kind != ObjectKind::Pod)
            .map(|(kind, ns, name)| format!("{} {ns}/{name}", kind.kind()))
            .collect()
    }
}

/// Sweeps one virtual-cluster operation, from `before` to `target`, interrupted at every
/// host call.
async fn sweep_vc(op: &'static str, before: &[&[(&str, Value)]], target: Option<&[(&str, Value)]>) {
    let (_, k) = setup();
    let case = sweep::Case::new("virtual_cluster", op, |a| vc(&k, a), before, target);
    sweep::sweep_both(case, setup).await;
}

#[tokio::test(start_paused = true)]
async fn a_virtual_cluster_create_interrupted_at_any_call_converges() {
    sweep_vc("create", &[], Some(&[("quota", quota(50))])).await;
}

#[tokio::test(start_paused = true)]
async fn a_quota_change_interrupted_at_any_call_converges() {
    let before: &[(&str, Value)] = &[("quota", quota(50))];
    sweep_vc("update", &[before], Some(&[("quota", quota(80))])).await;
}

#[tokio::test(start_paused = true)]
async fn a_pause_interrupted_at_any_call_converges() {
    sweep_vc("pause", &[&[]], Some(&[("paused", Value::Bool(true))])).await;
}

#[tokio::test(start_paused = true)]
async fn a_virtual_cluster_replace_interrupted_at_any_call_converges() {
    let bigger = [("persistence", persistence("20Gi", None))];
    sweep_vc("replace", &[&[]], Some(&bigger)).await;
}

#[tokio::test(start_paused = true)]
async fn a_virtual_cluster_destroy_interrupted_at_any_call_converges() {
    sweep_vc("delete", &[&[("quota", quota(50))]], None).await;
}

#[tokio::test(start_paused = true)]
async fn admin_credentials_stay_out_of_state_when_asked_and_come_back_when_asked() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let off = vc(&k, &[("admin_credentials_in_state", Value::Bool(false))]);
    assert_eq!(tf.apply_ok(&off).await, Action::Create);
    let s = tf.state.clone();
    for secret in ["kubeconfig", "client_certificate", "client_key"] {
        assert!(s.get(secret).is_null(), "{secret}: {s:?}");
    }
    // What is not secret is still known: where the cluster is and which CA it has.
    assert_eq!(s.get("endpoint"), &Value::string("https://127.0.0.1:41000"));
    assert_eq!(s.get("cluster_ca_certificate"), &Value::string("CA PEM"));
    // A refresh reads the Secret and still records nothing of it.
    assert_eq!(tf.plan(&off).await.action, Action::NoOp);
    assert!(tf.state.get("client_key").is_null());
    host.take_calls();

    // Asking for them again is an in-place change that reads them; the control plane keeps
    // running (nothing is written to the host but what apply always re-applies).
    let on = vc(&k, &[("admin_credentials_in_state", Value::Bool(true))]);
    assert_eq!(tf.apply_ok(&on).await, Action::Update);
    assert!(
        tf.state
            .get("kubeconfig")
            .as_str()
            .is_some_and(|k| k.contains("127.0.0.1:41000"))
    );
    assert!(tf.state.get("client_key").as_str().is_some());
    assert_eq!(tf.plan(&on).await.action, Action::NoOp);

    // And turning them off again drops them from state.
    assert_eq!(tf.apply_ok(&off).await, Action::Update);
    assert!(tf.state.get("kubeconfig").is_null());
    assert!(tf.state.get("client_key").is_null());
}

#[tokio::test(start_paused = true)]
async fn a_second_virtual_cluster_of_one_name_is_refused_in_another_namespace() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    assert_eq!(tf.apply_ok(&vc(&k, &[])).await, Action::Create);
    let twin = vc(&k, &[("namespace", Value::string("staging-team-a"))]);
    let mut other = Terraform::new(&k);
    let p = other.plan(&twin).await;
    let text = show(&p.diagnostics);
    assert!(p.diagnostics.has_error(), "{text}");
    assert!(
        text.contains("at name") && text.contains("already lives in namespace vc-team-a"),
        "{text}"
    );
    assert!(
        host.obj(ObjectKind::Namespace, "", "staging-team-a")
            .is_none()
    );
    // Its own namespace, planned again (a create a killed provider left), is no conflict.
    let again = Terraform::new(&k).plan(&vc(&k, &[])).await;
    assert!(
        !again.diagnostics.has_error(),
        "{}",
        show(&again.diagnostics)
    );
}

/// The host as the provider reaches it: applies read the API server, refreshes and plans
/// read the run's lists ([`Cached`]); [`RunLists::next_run`] starts another Terraform run.
struct RunLists {
    host: Arc<FakeHost>,
    cache: Mutex<Arc<ReadCache>>,
}

impl RunLists {
    fn new(host: Arc<FakeHost>) -> RunLists {
        RunLists {
            host,
            cache: Mutex::new(Arc::new(ReadCache::default())),
        }
    }

    fn cache(&self) -> Arc<ReadCache> {
        Arc::clone(&self.cache.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn next_run(&self) {
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(ReadCache::default());
    }
}

#[async_trait]
impl Connect<dyn HostObjects> for RunLists {
    async fn connect(&self, _: &Context, _: &str) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        Ok(Arc::new(Cached::operating(
            Arc::clone(&self.host),
            self.cache(),
        )))
    }

    async fn connect_reader(
        &self,
        _: &Context,
        _: &str,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        Ok(Arc::new(Cached::refreshing(
            Arc::clone(&self.host),
            self.cache(),
        )))
    }
}

fn tenant(k: &VirtualCluster<RunLists>, name: &str, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![("name", Value::string(name)), ("quota", quota(50))];
    attrs.extend(extra.iter().cloned());
    config(k, &attrs)
}

#[tokio::test(start_paused = true)]
async fn refreshes_from_the_runs_lists_see_what_reads_by_name_see() {
    let host = Arc::new(FakeHost::default());
    let k = VirtualCluster(RunLists::new(Arc::clone(&host)));
    let mut tf = Terraform::new(&k);
    let c = tenant(&k, "team-a", &[]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    assert_eq!(tf.state.get("status"), &Value::string("Running"));
    k.0.next_run();
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    // The drift of `drift_shows_in_the_plan_and_apply_repairs_it`, seen the same way.
    edit_out_of_band(&host);
    k.0.next_run();
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(
        drift_of(&tf.state),
        [
            "Namespace vc-team-a: label gpufleet.dev/isolation is \"dedicated\", want \"shared\"",
            "RoleBinding vc-team-a: subjects[0].name is \"intruder\", want \"vc-team-a\"",
            "ResourceQuota vc-team-a: spec.hard.count/pods is \"500\", want \"50\"",
            "NetworkPolicy vc-work-team-a: missing",
        ]
    );
    // Apply waits on what it writes; its reads are not the plan's lists.
    tf.apply_ok(&c).await;
    assert_eq!(
        host.obj(ObjectKind::ResourceQuota, NS, "vc-team-a")
            .expect("rq")["spec"]["hard"]["count/pods"],
        "50"
    );
    k.0.next_run();
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    // Pause and resume within one run: each apply's writes drop the lists its plan read.
    let paused = tenant(&k, "team-a", &[("paused", Value::Bool(true))]);
    tf.apply_ok(&paused).await;
    assert_eq!(tf.state.get("status"), &Value::string("Paused"));
    assert_eq!(tf.plan(&paused).await.action, Action::NoOp);
    tf.apply_ok(&c).await;
    assert_eq!(tf.state.get("status"), &Value::string("Running"));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(
        host.lock().objects.is_empty(),
        "destroy leaves nothing behind"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refresh_of_more_tenants_costs_no_more_host_calls() {
    let host = Arc::new(FakeHost::default());
    let k = VirtualCluster(RunLists::new(Arc::clone(&host)));
    let mut tenants = Vec::new();
    for name in ["team-a", "team-b", "team-c"] {
        let mut tf = Terraform::new(&k);
        let c = tenant(&k, name, &[]);
        tf.apply_ok(&c).await;
        tenants.push((tf, c));
    }
    k.0.next_run();
    host.take_calls();
    let (tf, c) = &mut tenants[0];
    assert_eq!(tf.plan(c).await.action, Action::NoOp);
    let one = host.take_calls();
    k.0.next_run();
    for (tf, c) in &mut tenants {
        assert_eq!(tf.plan(c).await.action, Action::NoOp);
    }
    let three = host.take_calls();
    eprintln!("host calls of a refresh: one tenant {one}, three tenants {three}");
    // Every kind, Secrets included, is listed once for all of them.
    assert_eq!(three, one, "one tenant {one}, three {three}");
}

/// Takes the kubeconfig Secret away, as the garbage collector or a hand would.
fn remove_kubeconfig(host: &FakeHost) {
    host.lock()
        .objects
        .remove(&(ObjectKind::Secret, NS.to_owned(), "vc-team-a".to_owned()));
}

/// The syncer writes its kubeconfig Secret a while after its pod is Ready (right after a
/// `helm install`, or on a busy host): an apply waits for it and restarts nothing.
#[tokio::test(start_paused = true)]
async fn a_control_plane_that_has_not_written_its_secret_yet_is_waited_for() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&vc(&k, &[("quota", quota(50))])).await;
    // A control plane that has just started: Ready, and its Secret some reads away.
    remove_kubeconfig(&host);
    host.lock().late_secret = Some(20);
    let started = tokio::time::Instant::now();
    tf.apply_ok(&vc(&k, &[("quota", quota(60))])).await;
    assert_eq!(
        host.lock().restarts,
        0,
        "a control plane about to write was restarted"
    );
    assert!(
        host.lock().late_secret.is_none(),
        "the apply did not wait for the Secret"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(kubeconfig_server(&tf.state).starts_with("https://"));
}

/// A Secret deleted by hand never comes back by itself: after a minute Ready without it, the
/// control plane is restarted once, and its successor writes it.
#[tokio::test(start_paused = true)]
async fn a_control_plane_whose_secret_was_deleted_is_restarted_after_a_grace() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&vc(&k, &[("quota", quota(50))])).await;
    remove_kubeconfig(&host);
    let started = tokio::time::Instant::now();
    tf.apply_ok(&vc(&k, &[("quota", quota(60))])).await;
    assert_eq!(host.lock().restarts, 1);
    assert!(
        started.elapsed() >= Duration::from_secs(60),
        "restarted without a grace"
    );
    assert!(host.obj(ObjectKind::Secret, NS, "vc-team-a").is_some());
    assert_eq!(
        tf.plan(&vc(&k, &[("quota", quota(60))])).await.action,
        Action::NoOp
    );
}

/// A Service deleted out of band takes the Secret it owns with it: the apply that puts the
/// Service back restarts the control plane at once, since it will not write the Secret again.
#[tokio::test(start_paused = true)]
async fn a_replaced_service_restarts_the_control_plane_at_once() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("quota", quota(50))]);
    tf.apply_ok(&c).await;
    host.lock()
        .objects
        .remove(&(ObjectKind::Service, NS.to_owned(), "team-a".to_owned()));
    remove_kubeconfig(&host);
    let started = tokio::time::Instant::now();
    tf.apply_ok(&c).await;
    assert_eq!(host.lock().restarts, 1);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "waited out the grace"
    );
    assert!(host.obj(ObjectKind::Secret, NS, "vc-team-a").is_some());
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}
