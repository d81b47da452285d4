//! `gpufleet_virtual_cluster` through whole Terraform runs against an in-memory host cluster
//! that behaves like the real one where it matters: a StatefulSet with replicas gets a Ready
//! pod and, from the stand-in control plane, Secret `vc-<name>`; namespaces terminate over a
//! few reads and take their objects with them. Every plan, apply and refresh is checked
//! against Terraform's consistency rules by the shared harness.

#[path = "support/network_segment.rs"]
mod support;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use async_trait::async_trait;
use base64::Engine as _;
use gpufleet_engine::{
    resources::virtual_cluster::{HostApi, HostError, VirtualCluster, objects::ObjectKind},
    value::Value,
};
use serde_json::{Value as Json, json};
use support::{Action, Terraform, config, show};

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
}

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

/// What the lab's control-plane stand-in and kwok do for a StatefulSet.
fn run_statefulset(s: &mut State, ns: &str, sts: &Json) {
    let name = sts["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let replicas = sts["spec"]["replicas"].as_i64().unwrap_or(1);
    let pod_key = (ObjectKind::Pod, ns.to_owned(), format!("{name}-0"));
    if replicas == 0 {
        s.objects.remove(&pod_key);
        return;
    }
    let container = if s.crash {
        json!({ "name": "syncer", "ready": false, "state": { "waiting": { "reason": "CrashLoopBackOff" } } })
    } else {
        json!({ "name": "syncer", "ready": true, "state": { "running": {} } })
    };
    s.objects.insert(
        pod_key,
        json!({
            "metadata": { "name": format!("{name}-0"), "namespace": ns,
                          "labels": { "app": "vcluster", "release": name },
                          "creationTimestamp": "2026-01-01T00:00:00Z" },
            "status": { "phase": "Running", "containerStatuses": [container] },
        }),
    );
    if s.crash {
        return;
    }
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://127.0.0.1:41000\n    certificate-authority-data: {}\ncontexts: []\nusers: []\n",
        b64("CA PEM")
    );
    s.objects
        .entry((ObjectKind::Secret, ns.to_owned(), format!("vc-{name}")))
        .or_insert(json!({
            "metadata": { "name": format!("vc-{name}"), "namespace": ns },
            "data": { "config": b64(&kubeconfig), "certificate-authority": b64("CA PEM") },
        }));
}

#[async_trait]
impl HostApi for FakeHost {
    async fn apply(&self, object: &Json) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls += 1;
        let kind =
            ObjectKind::from_kind(object["kind"].as_str().unwrap_or_default()).expect("kind");
        if s.fail_apply == Some(kind) {
            s.fail_apply = None;
            return Err(HostError::Other(format!(
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
        let mut o = object.clone();
        if kind == ObjectKind::StatefulSet {
            let generation = s
                .objects
                .get(&(kind, ns.clone(), name.clone()))
                .and_then(|old| old["metadata"]["generation"].as_i64())
                .unwrap_or(0)
                + 1;
            o["metadata"]["generation"] = json!(generation);
            o["status"] = json!({ "observedGeneration": generation, "currentRevision": "r", "updateRevision": "r" });
            run_statefulset(&mut s, &ns, &o);
        }
        s.objects.insert((kind, ns, name), o);
        Ok(())
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, HostError> {
        let mut s = self.lock();
        s.calls += 1;
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
    ) -> Result<(), HostError> {
        let mut s = self.lock();
        s.calls += 1;
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
            s.objects.remove(&key);
        }
        Ok(())
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Json>, HostError> {
        let mut s = self.lock();
        s.calls += 1;
        let want: Vec<(&str, &str)> = selector
            .split(',')
            .filter_map(|p| p.split_once('='))
            .collect();
        Ok(s.objects
            .iter()
            .filter(|(k, o)| {
                k.0 == kind
                    && k.1 == namespace
                    && want
                        .iter()
                        .all(|(lk, lv)| o["metadata"]["labels"][*lk] == *lv)
            })
            .map(|(_, o)| o.clone())
            .collect())
    }

    fn calls(&self) -> u64 {
        self.lock().calls
    }
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
async fn drift_shows_in_the_plan_and_apply_repairs_it() {
    let (host, k) = setup();
    let mut tf = Terraform::new(&k);
    let c = vc(&k, &[("quota", quota(50))]);
    tf.apply_ok(&c).await;
    // Out of band: a quota raised, a namespace label changed, a ServiceAccount deleted.
    host.edit(ObjectKind::ResourceQuota, NS, "vc-team-a", |rq| {
        rq["spec"]["hard"]["count/pods"] = json!("500");
    });
    host.edit(ObjectKind::Namespace, "", NS, |ns| {
        ns["metadata"]["labels"]["gpufleet.dev/isolation"] = json!("dedicated");
    });
    host.lock().objects.remove(&(
        ObjectKind::ServiceAccount,
        NS.to_owned(),
        "vc-workload-team-a".to_owned(),
    ));
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(tf.state.get("quota").get("pods"), &Value::int(500));
    // The quota was written as 1024Mi and reads back the same amount: no drift there.
    assert_eq!(
        tf.state.get("quota").get("memory"),
        &Value::string("1024Mi")
    );
    let drift: Vec<&str> = tf
        .state
        .get("drift")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        drift,
        [
            "Namespace vc-team-a: label gpufleet.dev/isolation is \"dedicated\", want \"shared\"",
            "ServiceAccount vc-workload-team-a: missing",
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
