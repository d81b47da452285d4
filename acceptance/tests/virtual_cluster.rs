//! `gpufleet_virtual_cluster` with the real Terraform CLI against the shared lab
//! ([`Lab::shared`]), where vCluster's own syncer runs each virtual cluster's control plane:
//! life cycle with an in-place policy change, a replacing isolation change, import, drift
//! repair, fields other controllers own, tenant isolation, a provider killed mid-apply, and a destroy that leaves the host
//! cluster as it was. The host is inspected through its REST API with the lab's admin kubeconfig.
//!
//! The tests share one host cluster, so they take a lock and compare snapshots of the host
//! objects gpufleet could create.

use std::{
    collections::BTreeSet,
    path::Path,
    process::{Command, Stdio},
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant},
};

use gpufleet_acceptance::tenant::tenant_client;
use gpufleet_acceptance::{Output, Session, terraform_launcher};
use gpufleet_lab::{Lab, rest::KubeRest, tenant_forward::TenantForward};
use serde_json::Value;

const HEADER: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}
"#;

static HOST: Mutex<()> = Mutex::new(());

fn host_lock() -> MutexGuard<'static, ()> {
    HOST.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Terraform session against the shared lab, with the provider block prepended.
struct Tf(Session);

impl Tf {
    fn new(body: &str) -> Self {
        Tf(Session::new(
            &format!("{HEADER}\n{body}"),
            Lab::shared().settings_env(),
        ))
    }

    fn write(&self, body: &str) {
        self.0.write(&format!("{HEADER}\n{body}"));
    }

    fn plan_exit(&self) -> Output {
        self.0.plan()
    }

    fn state(&self, address: &str) -> Value {
        self.0.resource(address)
    }
}

impl std::ops::Deref for Tf {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

/// The lab's host cluster, as its admin.
fn host() -> KubeRest {
    KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host client")
}

/// A virtual cluster, through the kubeconfig Terraform gave for it (for addresses reachable
/// from outside the host cluster: node ports, load balancers).
fn tenant(kubeconfig: &Path) -> KubeRest {
    KubeRest::from_kubeconfig(kubeconfig).expect("tenant client")
}

/// Virtual cluster `name` (in `vc-<name>`) exposed by a ClusterIP Service only, reached
/// through a port-forward as a user outside the host cluster reaches it.
fn forwarded(dir: &Path, kubeconfig: &str, name: &str) -> (KubeRest, TenantForward) {
    tenant_client(dir, &format!("vc-{name}"), name, kubeconfig)
}

/// The labels of namespace `ns`.
fn namespace_labels(ns: &str) -> Value {
    host()
        .get(&format!("/api/v1/namespaces/{ns}"))
        .expect("namespace")["metadata"]["labels"]
        .clone()
}

/// Every object of the kinds a virtual cluster is made of, with its labels, cluster-wide.
fn host_snapshot() -> BTreeSet<String> {
    let kinds = [
        ("Namespace", "/api/v1/namespaces"),
        ("StatefulSet", "/apis/apps/v1/statefulsets"),
        ("Service", "/api/v1/services"),
        ("ServiceAccount", "/api/v1/serviceaccounts"),
        ("Secret", "/api/v1/secrets"),
        ("Role", "/apis/rbac.authorization.k8s.io/v1/roles"),
        (
            "RoleBinding",
            "/apis/rbac.authorization.k8s.io/v1/rolebindings",
        ),
        ("ResourceQuota", "/api/v1/resourcequotas"),
        ("LimitRange", "/api/v1/limitranges"),
        (
            "NetworkPolicy",
            "/apis/networking.k8s.io/v1/networkpolicies",
        ),
    ];
    let host = host();
    kinds
        .iter()
        .flat_map(|(kind, path)| {
            host.list(path).expect("list").into_iter().map(move |o| {
                format!(
                    "{kind} {}/{} {}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default(),
                    o["metadata"]["labels"]
                )
            })
        })
        .collect()
}

fn vc(address: &str, name: &str, extra: &str) -> String {
    format!(
        r#"
resource "gpufleet_virtual_cluster" "{address}" {{
  name = "{name}"
  {extra}
}}

output "{address}_kubeconfig" {{
  value     = gpufleet_virtual_cluster.{address}.kubeconfig
  sensitive = true
}}
"#
    )
}

const QUOTA_50: &str = r#"quota = { gpus = 4, cpu = "16", memory = "64Gi", pods = 50 }"#;
const QUOTA_80: &str = r#"quota = { gpus = 4, cpu = "16", memory = "64Gi", pods = 80 }"#;

#[test]
fn life_cycle_replace_import_drift_and_clean_destroy() {
    let _g = host_lock();
    let before = host_snapshot();
    let name = "acc-vc-life";
    let ns = "vc-acc-vc-life";
    let tf = Tf::new(&vc("a", name, QUOTA_50));
    let started = Instant::now();
    tf.apply();
    eprintln!("[figures] apply to Ready: {:?}", started.elapsed());
    tf.assert_plan_empty();
    let st = tf.state("gpufleet_virtual_cluster.a");
    assert_eq!(st["status"], "Running", "{st:#}");
    assert_eq!(st["id"], format!("{ns}/{name}"));
    assert!(
        st["endpoint"].as_str() == Some(format!("https://{name}.{ns}.svc:443").as_str()),
        "{st:#}"
    );

    // In place: a quota change.
    tf.write(&vc("a", name, QUOTA_80));
    let plan = tf.plan_exit();
    assert_eq!(plan.status_code, 2, "{plan}");
    assert!(plan.contains("update in-place"), "{plan}");
    tf.apply();
    tf.assert_plan_empty();
    let quota_path = format!("/api/v1/namespaces/{ns}/resourcequotas/vc-acc-vc-life");
    assert_eq!(
        host().get(&quota_path).expect("quota")["spec"]["hard"]["count/pods"],
        "80"
    );

    // Isolation is fixed at creation: a change replaces, and the plan says so.
    tf.write(&vc(
        "a",
        name,
        &format!("{QUOTA_80}\n  isolation = \"dedicated\""),
    ));
    let plan = tf.plan_exit();
    assert!(plan.contains("must be replaced"), "{plan}");
    assert!(plan.contains("forces replacement"), "{plan}");
    assert!(plan.contains("Isolation Change Replaces"), "{plan}");
    tf.apply();
    tf.assert_plan_empty();
    assert_eq!(namespace_labels(ns)["gpufleet.dev/isolation"], "dedicated");

    // Import into a fresh directory, by <namespace>/<name> and by name.
    for id in [format!("{ns}/{name}"), name.to_owned()] {
        let imported = Tf::new(&vc(
            "a",
            name,
            &format!("{QUOTA_80}\n  isolation = \"dedicated\""),
        ));
        imported.ok(&[
            "import",
            "-input=false",
            "-no-color",
            "gpufleet_virtual_cluster.a",
            &id,
        ]);
        imported.assert_plan_empty();
    }

    // Drift: a quota and a namespace label edited out of band.
    host()
        .merge_patch(
            &quota_path,
            &serde_json::json!({"spec": {"hard": {"count/pods": "999"}}}),
        )
        .expect("edit the quota");
    host()
        .merge_patch(
            &format!("/api/v1/namespaces/{ns}"),
            &serde_json::json!({"metadata": {"labels": {"gpufleet.dev/isolation": "shared"}}}),
        )
        .expect("edit the namespace label");
    let plan = tf.plan_exit();
    assert_eq!(plan.status_code, 2, "{plan}");
    assert!(plan.contains("999"), "{plan}");
    assert!(plan.contains("gpufleet.dev/isolation"), "{plan}");
    tf.apply();
    tf.assert_plan_empty();
    assert_eq!(namespace_labels(ns)["gpufleet.dev/isolation"], "dedicated");
    assert_eq!(
        host().get(&quota_path).expect("quota")["spec"]["hard"]["count/pods"],
        "80"
    );

    let started = Instant::now();
    tf.destroy();
    eprintln!("[figures] destroy: {:?}", started.elapsed());
    assert_eq!(
        host_snapshot(),
        before,
        "destroy leaves the host cluster as it was"
    );
}

#[test]
fn a_label_another_controller_owns_survives_an_apply_while_hand_edits_are_reverted() {
    let _g = host_lock();
    let before = host_snapshot();
    let name = "acc-vc-owners";
    let ns = "vc-acc-vc-owners";
    let ns_path = format!("/api/v1/namespaces/{ns}");
    let labels = r#"labels = { team = "ml", cost-center = "gpu" }"#;
    let tf = Tf::new(&vc("a", name, &format!("{QUOTA_50}\n  {labels}")));
    tf.apply();
    tf.assert_plan_empty();

    // A label controller takes `team` with its own server-side apply; a person relabels
    // `cost-center` with kubectl; another controller rewrites the tier label.
    let namespace = |labels: Value| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": labels}
        })
    };
    host()
        .apply_as(
            &ns_path,
            "label-sync",
            &namespace(serde_json::json!({"team": "research"})),
        )
        .expect("the controller's label");
    host()
        .merge_patch(
            &format!("{ns_path}?fieldManager=kubectl-label"),
            &serde_json::json!({"metadata": {"labels": {"cost-center": "cpu"}}}),
        )
        .expect("the hand edit");
    host()
        .apply_as(
            &ns_path,
            "tier-sync",
            &namespace(serde_json::json!({"gpufleet.dev/isolation": "dedicated"})),
        )
        .expect("the tier label");

    // The hand edit and the tier label are drift; the controller's label is not.
    let plan = tf.plan_exit();
    assert_eq!(plan.status_code, 2, "{plan}");
    assert!(plan.contains("label cost-center"), "{plan}");
    assert!(plan.contains("label gpufleet.dev/isolation"), "{plan}");
    assert!(!plan.contains("label team"), "{plan}");
    let applied = tf.apply();
    assert!(
        applied.contains("Fields Left to Other Controllers")
            && applied.contains(
                r#"metadata.labels.team of Namespace vc-acc-vc-owners (kept by "label-sync")"#
            ),
        "{applied}"
    );
    assert!(!applied.contains("cost-center of"), "{applied}");
    let labels_now = namespace_labels(ns);
    assert_eq!(labels_now["team"], "research", "{labels_now:#}");
    assert_eq!(labels_now["cost-center"], "gpu", "{labels_now:#}");
    assert_eq!(
        labels_now["gpufleet.dev/isolation"], "shared",
        "{labels_now:#}"
    );
    tf.assert_plan_empty();

    // A later change keeps leaving the controller's label alone.
    tf.write(&vc("a", name, &format!("{QUOTA_80}\n  {labels}")));
    tf.apply();
    tf.assert_plan_empty();
    assert_eq!(namespace_labels(ns)["team"], "research");

    tf.destroy();
    assert_eq!(
        host_snapshot(),
        before,
        "destroy leaves the host cluster as it was"
    );
}

#[test]
fn tenants_reach_only_their_own_api_server() {
    let _g = host_lock();
    let tf = Tf::new(&format!(
        "{}\n{}",
        vc("a", "acc-vc-ta", ""),
        vc("b", "acc-vc-tb", "isolation = \"dedicated\"")
    ));
    tf.apply();
    tf.assert_plan_empty();
    let dir = tempfile::tempdir().expect("tempdir");
    let (a_text, b_text) = (tf.output_raw("a_kubeconfig"), tf.output_raw("b_kubeconfig"));
    let (a, a_forward) = forwarded(dir.path(), &a_text, "acc-vc-ta");
    let (b, b_forward) = forwarded(dir.path(), &b_text, "acc-vc-tb");
    let cm = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "only-in-b"},
        "data": {"tenant": "b"}
    });
    b.create("/api/v1/namespaces/default/configmaps", &cm)
        .expect("B creates a ConfigMap in its own API");
    let path = "/api/v1/namespaces/default/configmaps/only-in-b";
    assert_eq!(b.get(path).expect("B sees it")["data"]["tenant"], "b");
    let seen_by_a = a.get(path).expect_err("A must not see B's objects");
    assert!(seen_by_a.is_not_found(), "{seen_by_a}");
    // Nor the host's: A's API server has no namespace of the host.
    let host_ns = a
        .get("/api/v1/namespaces/vc-acc-vc-tb")
        .expect_err("the host's namespaces are not in A's API");
    assert!(host_ns.is_not_found(), "{host_ns}");
    // A's credentials, shown to B's API server (trusting B's CA), are refused: each
    // virtual cluster has its own client CA.
    let a_text = a_forward.kubeconfig(&a_text).expect("kubeconfig");
    let b_text = b_forward.kubeconfig(&b_text).expect("kubeconfig");
    let line = |text: &str, key: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no {key} in the kubeconfig"))
            .to_owned()
    };
    let crossed = a_text
        .replace(&line(&a_text, "\"server\":"), &line(&b_text, "\"server\":"))
        .replace(
            &line(&a_text, "\"certificate-authority-data\":"),
            &line(&b_text, "\"certificate-authority-data\":"),
        );
    let crossed_path = dir.path().join("a-at-b.kubeconfig");
    std::fs::write(&crossed_path, crossed).expect("write");
    let refused = tenant(&crossed_path)
        .get("/api/v1/namespaces/default")
        .expect_err("B's API server must refuse A's credentials");
    assert_eq!(refused.code, 401, "{refused}");
    tf.destroy();
}

#[test]
fn a_provider_killed_mid_apply_converges_without_duplicates() {
    let _g = host_lock();
    let name = "acc-vc-kill";
    let ns = "vc-acc-vc-kill";
    let tf = Tf::new(&vc("a", name, ""));
    let mut child = Command::new(terraform_launcher())
        .args(["apply", "-auto-approve", "-input=false", "-no-color"])
        .current_dir(tf.wd.path())
        .env("TF_CLI_CONFIG_FILE", tf.wd.cli_config_path())
        .envs(tf.env().iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start terraform");
    // Wait until the apply has written the StatefulSet, then kill the provider.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let written = host()
            .get(&format!(
                "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"
            ))
            .is_ok();
        if written || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    gpufleet_acceptance::process::kill_providers_of(&child);
    let _ = child.wait();
    tf.apply();
    tf.assert_plan_empty();
    let sts = host()
        .list(&format!("/apis/apps/v1/namespaces/{ns}/statefulsets"))
        .expect("list");
    assert_eq!(sts.len(), 1, "{sts:#?}");
    // gpufleet's own Services, once each (vCluster syncs the tenant's kube-dns Service
    // next to them).
    let mut svcs: Vec<String> = host()
        .list(&format!(
            "/api/v1/namespaces/{ns}/services?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgpufleet"
        ))
        .expect("list")
        .iter()
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    svcs.sort();
    assert_eq!(
        svcs,
        [name.to_owned(), format!("{name}-headless")],
        "{svcs:#?}"
    );
    tf.destroy();
}

#[test]
fn bad_input_fails_at_plan_on_the_attribute() {
    let tf = Tf::new(&vc("a", &"a".repeat(53), ""));
    for (body, needle) in [
        (vc("a", &"a".repeat(53), ""), "name"),
        (
            vc("a", "acc-vc-bad", "isolation = \"isolated\""),
            "isolation",
        ),
        (
            vc("a", "acc-vc-bad", r#"quota = { cpu = "lots" }"#),
            "quota.cpu",
        ),
        (
            vc("a", "acc-vc-bad", "kubernetes_version = \"1.20\""),
            "kubernetes_version",
        ),
        (
            vc(
                "a",
                "acc-vc-bad",
                r#"values_override = yamlencode({ controlPlane = { distro = { k8s = { version = "v1.30.0" } } } })"#,
            ),
            "controlPlane.distro.k8s.version",
        ),
    ] {
        tf.write(&body);
        let out = tf.run(&["plan", "-input=false", "-no-color"]);
        assert!(!out.success(), "{out}");
        assert!(out.combined().contains(needle), "{needle}:\n{out}");
    }
}

/// Waits until the tenant behind `kubeconfig` serves ConfigMap `keep` with `owner`; returns
/// the Kubernetes version its API server reports (`/version`).
fn wait_kept(tf: &Tf, dir: &Path, step: &str) -> String {
    let (tenant, _forward) = forwarded(dir, &tf.output_raw("a_kubeconfig"), "acc-vc-data");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        match tenant.get("/api/v1/namespaces/default/configmaps/keep") {
            Ok(cm) => {
                assert_eq!(cm["data"]["owner"], "tenant", "after {step}: {cm:#}");
                return served_version(&tenant);
            }
            Err(e) if e.is_not_found() => panic!("after {step} the tenant's ConfigMap is gone"),
            Err(e) if Instant::now() > deadline => panic!("after {step}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The `gitVersion` the tenant's API server reports.
fn served_version(tenant: &KubeRest) -> String {
    let v = tenant.get("/version").expect("the tenant's /version");
    v["gitVersion"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_tenants_data_and_ca_survive_a_quota_change_an_upgrade_a_pause_and_a_restart() {
    let _g = host_lock();
    let name = "acc-vc-data";
    let ns = "vc-acc-vc-data";
    let config = |extra: &str| vc("a", name, extra);
    let tf = Tf::new(&config(&format!(
        "{QUOTA_50}\n  kubernetes_version = \"1.35\""
    )));
    tf.apply();
    let ca = tf.state("gpufleet_virtual_cluster.a")["cluster_ca_certificate"].clone();
    assert!(
        ca.as_str().is_some_and(|c| c.contains("BEGIN CERTIFICATE")),
        "{ca}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, _forward) = forwarded(dir.path(), &tf.output_raw("a_kubeconfig"), name);
    first
        .create(
            "/api/v1/namespaces/default/configmaps",
            &serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "keep" }, "data": { "owner": "tenant" },
            }),
        )
        .expect("the tenant creates a ConfigMap");
    // The version asked for is the one that runs.
    let created = served_version(&first);
    assert!(
        created.starts_with("v1.35."),
        "created at 1.35, serves {created}"
    );
    let same_ca = |step: &str| {
        assert_eq!(
            tf.state("gpufleet_virtual_cluster.a")["cluster_ca_certificate"],
            ca,
            "{step} issued a new CA"
        );
    };

    // A quota change restarts the control plane with a new config.
    tf.write(&config(&format!(
        "{QUOTA_80}\n  kubernetes_version = \"1.35\""
    )));
    tf.apply();
    let v = wait_kept(&tf, dir.path(), "quota");
    assert!(v.starts_with("v1.35."), "after the quota change: {v}");
    same_ca("the quota change");

    // An upgrade of the virtual Kubernetes.
    tf.write(&config(&format!(
        "{QUOTA_80}\n  kubernetes_version = \"1.36\""
    )));
    tf.apply();
    tf.assert_plan_empty();
    let v = wait_kept(&tf, dir.path(), "upgrade");
    assert!(
        v.starts_with("v1.36."),
        "upgraded in place to 1.36, serves {v}"
    );
    same_ca("the upgrade");

    // Pause and resume.
    tf.write(&config(&format!(
        "{QUOTA_80}\n  kubernetes_version = \"1.36\"\n  paused = true"
    )));
    tf.apply();
    let pods = host()
        .list(&format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dvcluster"
        ))
        .expect("list");
    assert!(
        pods.is_empty(),
        "paused, yet the control plane runs: {pods:#?}"
    );
    tf.write(&config(&format!(
        "{QUOTA_80}\n  kubernetes_version = \"1.36\""
    )));
    tf.apply();
    wait_kept(&tf, dir.path(), "resume");
    same_ca("pause and resume");

    // The control plane's pod is deleted (a node drain, a crash of the node).
    host()
        .delete(&format!("/api/v1/namespaces/{ns}/pods/{name}-0"))
        .expect("delete the control plane's pod");
    wait_kept(&tf, dir.path(), "restart");
    tf.apply();
    tf.assert_plan_empty();
    same_ca("a restart of the control plane");
    tf.destroy();
}

/// Waits until the API server behind `kubeconfig` answers (a new address may take the
/// syncer a moment to add to its serving certificate).
fn wait_answers(kubeconfig: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match tenant(kubeconfig).get("/api/v1/namespaces/default") {
            Ok(_) => return,
            Err(e) if Instant::now() > deadline => panic!("the tenant does not answer: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

#[test]
fn an_exposed_tenant_is_reached_at_its_load_balancer_and_node_port() {
    let _g = host_lock();
    let name = "acc-vc-expose";
    let outputs = r#"
output "host" {
  value = gpufleet_virtual_cluster.a.host
}
"#;
    let tf = Tf::new(&format!(
        "{}{outputs}",
        vc("a", name, r#"expose = { type = "LoadBalancer" }"#)
    ));
    tf.apply();
    tf.assert_plan_empty();
    let st = tf.state("gpufleet_virtual_cluster.a");
    let host_url = st["host"].as_str().expect("host").to_owned();
    assert!(host_url.starts_with("https://127.0.201."), "{st:#}");
    assert_eq!(st["endpoint"], st["host"]);
    for key in ["cluster_ca_certificate", "client_certificate"] {
        assert!(
            st[key]
                .as_str()
                .is_some_and(|p| p.contains("BEGIN CERTIFICATE")),
            "{key}: {st:#}"
        );
    }
    let service = host()
        .get(&format!("/api/v1/namespaces/vc-{name}/services/{name}"))
        .expect("the Service");
    assert_eq!(service["spec"]["type"], "LoadBalancer");
    let dir = tempfile::tempdir().expect("tempdir");
    let lb = dir.path().join("lb.kubeconfig");
    let kubeconfig = tf.output_raw("a_kubeconfig");
    assert!(
        kubeconfig.contains(&format!("server: {host_url}")),
        "{kubeconfig}"
    );
    std::fs::write(&lb, kubeconfig).expect("write");
    wait_answers(&lb);

    // A node port instead: the kubeconfig follows.
    tf.write(&format!(
        "{}{outputs}",
        vc("a", name, r#"expose = { type = "NodePort" }"#)
    ));
    tf.apply();
    tf.assert_plan_empty();
    let node_port = host()
        .get(&format!("/api/v1/namespaces/vc-{name}/services/{name}"))
        .expect("the Service")["spec"]["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "https"))
        .and_then(|p| p["nodePort"].as_u64())
        .expect("a node port");
    assert_eq!(
        tf.output_raw("host").trim(),
        format!("https://127.0.0.1:{node_port}")
    );
    let np = dir.path().join("np.kubeconfig");
    std::fs::write(&np, tf.output_raw("a_kubeconfig")).expect("write");
    wait_answers(&np);
    tf.destroy();
}

/// What a row of the drift table does to its object out of band.
enum Tamper {
    /// `kubectl delete`.
    Delete,
    /// `kubectl edit`: a merge patch under kubectl's field manager.
    Edit(Value),
}

/// The API path of a host object of the drift table's tenant.
fn object_path(kind: &str, ns: &str, name: &str) -> String {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    match kind {
        "Namespace" => format!("/api/v1/namespaces/{name}"),
        "ClusterRole" => format!("{rbac}/clusterroles/{name}"),
        "ClusterRoleBinding" => format!("{rbac}/clusterrolebindings/{name}"),
        "Role" => format!("{rbac}/namespaces/{ns}/roles/{name}"),
        "RoleBinding" => format!("{rbac}/namespaces/{ns}/rolebindings/{name}"),
        "NetworkPolicy" => {
            format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}")
        }
        "StatefulSet" => format!("/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"),
        core => format!(
            "/api/v1/namespaces/{ns}/{}s/{name}",
            core.to_ascii_lowercase()
        ),
    }
}

/// An object as gpufleet renders it, without what the API server assigns anew when the
/// object is created again (uid, timestamps, managed fields, status, a Service's cluster IP).
fn rendered_view(o: &Value) -> Value {
    let mut v = o.clone();
    let meta = &o["metadata"];
    v["metadata"] = serde_json::json!({
        "name": meta["name"], "namespace": meta["namespace"],
        "labels": meta["labels"], "annotations": meta["annotations"],
    });
    if let Some(m) = v.as_object_mut() {
        m.remove("status");
    }
    if let Some(spec) = v["spec"].as_object_mut() {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    v
}

/// Every host object gpufleet renders for one tenant, deleted or edited out of band, one at
/// a time: the plan shows it in `drift` (or in the attribute that reflects it), apply puts
/// it back exactly as it was rendered, and the next plan is empty. One tenant for the whole
/// table; every row is run, and the failures are reported together.
#[test]
fn every_rendered_object_deleted_or_edited_out_of_band_shows_in_the_plan_and_apply_restores_it() {
    let _g = host_lock();
    let name = "acc-vc-drift";
    let ns = "vc-acc-vc-drift";
    let cluster_role = format!("vc-{name}-v-{ns}");
    let limits = r#"limit_range = { default_cpu = "1", default_memory = "1Gi" }"#;
    let tf = Tf::new(&vc("a", name, &format!("{QUOTA_50}\n  {limits}")));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    tf.assert_plan_empty();

    let vc_name = format!("vc-{name}");
    let objects: Vec<(&str, String)> = vec![
        ("NetworkPolicy", format!("vc-work-{name}")),
        ("NetworkPolicy", format!("vc-cp-{name}")),
        ("NetworkPolicy", format!("vc-kube-dns-{name}")),
        ("NetworkPolicy", format!("vc-snapshot-{name}")),
        ("ServiceAccount", vc_name.clone()),
        ("ServiceAccount", format!("vc-workload-{name}")),
        ("Role", vc_name.clone()),
        ("RoleBinding", vc_name.clone()),
        ("ClusterRole", cluster_role.clone()),
        ("ClusterRoleBinding", cluster_role.clone()),
        ("Secret", format!("vc-config-{name}")),
        ("Service", name.to_owned()),
        ("Service", format!("{name}-headless")),
        ("ResourceQuota", vc_name.clone()),
        ("LimitRange", vc_name.clone()),
        ("StatefulSet", name.to_owned()),
    ];
    let read_all = || -> Vec<(String, Value)> {
        let host = host();
        std::iter::once(("Namespace", ns.to_owned()))
            .chain(objects.iter().cloned())
            .map(|(kind, n)| {
                let o = match host.get(&object_path(kind, ns, &n)) {
                    Ok(o) => rendered_view(&o),
                    Err(e) if e.is_not_found() => Value::Null,
                    Err(e) => panic!("{kind} {n}: {e}"),
                };
                (format!("{kind} {n}"), o)
            })
            .collect()
    };
    let rendered = read_all();

    // Every object deleted, then a few edits where they matter for the tenant's isolation.
    let mut rows: Vec<(&str, String, Tamper, String)> = objects
        .iter()
        .map(|(kind, n)| {
            (
                *kind,
                n.clone(),
                Tamper::Delete,
                format!("{kind} {n}: missing"),
            )
        })
        .collect();
    let json = |v: Value| Tamper::Edit(v);
    rows.extend([
        (
            "Namespace",
            ns.to_owned(),
            json(serde_json::json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "privileged"}}})),
            format!("Namespace {ns}: label pod-security.kubernetes.io/enforce is"),
        ),
        (
            "NetworkPolicy",
            format!("vc-work-{name}"),
            // One empty rule: every pod of the host may reach the tenant's pods.
            json(serde_json::json!({"spec": {"ingress": [{}]}})),
            format!("NetworkPolicy vc-work-{name}: spec.ingress has 1 entry, want 2"),
        ),
        (
            "NetworkPolicy",
            format!("vc-cp-{name}"),
            // The control plane's pods no longer match: the policy isolates nothing.
            json(serde_json::json!({"spec": {"podSelector": {"matchLabels": {"nobody": "x"}}}})),
            format!(
                "NetworkPolicy vc-cp-{name}: spec.podSelector.matchLabels.nobody is not in the \
                 rendered one"
            ),
        ),
        (
            "Role",
            vc_name.clone(),
            json(serde_json::json!({"rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})),
            format!("Role {vc_name}: rules has 1 entry, want"),
        ),
        (
            "RoleBinding",
            vc_name.clone(),
            json(serde_json::json!({"subjects": [
                {"kind": "ServiceAccount", "name": "intruder", "namespace": "default"}]})),
            format!("RoleBinding {vc_name}: subjects[0].name is"),
        ),
        (
            "ClusterRoleBinding",
            cluster_role.clone(),
            json(serde_json::json!({"subjects": [
                {"kind": "ServiceAccount", "name": vc_name, "namespace": ns},
                {"kind": "ServiceAccount", "name": "intruder", "namespace": "default"}]})),
            format!("ClusterRoleBinding {cluster_role}: subjects has 2 entries, want 1"),
        ),
        (
            "ResourceQuota",
            vc_name.clone(),
            json(serde_json::json!({"spec": {"hard": {"requests.nvidia.com/gpu": null}}})),
            format!("ResourceQuota {vc_name}: spec.hard.requests.nvidia.com/gpu is missing"),
        ),
        (
            "Secret",
            format!("vc-config-{name}"),
            json(serde_json::json!({"data": {"config.yaml": "e30K"}})),
            format!("Secret vc-config-{name}: data.config.yaml differs from the rendered one"),
        ),
    ]);

    let mut failures = Vec::new();
    for (kind, n, tamper, shows) in &rows {
        let path = object_path(kind, ns, n);
        let what = match tamper {
            Tamper::Delete => {
                host().delete(&path).expect("delete");
                format!("{kind} {n} deleted")
            }
            Tamper::Edit(patch) => {
                host()
                    .merge_patch(&format!("{path}?fieldManager=kubectl-edit"), patch)
                    .expect("edit");
                format!("{kind} {n} edited")
            }
        };
        eprintln!("[drift] {what}");
        let plan = tf.plan_exit();
        if plan.status_code != 2 || !plan.contains(shows) {
            failures.push(format!(
                "{what}: the plan (exit {}) does not show {shows:?}:\n{}",
                plan.status_code,
                plan.combined()
            ));
        }
        tf.apply();
        let now = read_all();
        let key = format!("{kind} {n}");
        let (was, is) = (
            rendered.iter().find(|(k, _)| *k == key),
            now.iter().find(|(k, _)| *k == key),
        );
        if was != is {
            failures.push(format!(
                "{what}: apply did not put it back as rendered: {is:#?}, want {was:#?}"
            ));
        }
        let again = tf.plan_exit();
        // Known gap: a deleted Service takes the kubeconfig Secret with it, and the apply
        // that repairs it restarts the control plane, whose syncer writes its kubeconfig once
        // more after the apply recorded it. The next plan then changes no object, only the
        // recorded kubeconfig (an output refresh). Anything more is a failure.
        let kubeconfig_only = *kind == "Service"
            && matches!(tamper, Tamper::Delete)
            && again.status_code == 2
            && !again.contains("Plan:")
            && again.contains("kubeconfig");
        if again.status_code != 0 && !kubeconfig_only {
            failures.push(format!(
                "{what}: the plan after the repair is not empty:\n{}",
                again.combined()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n\n")
    );
    tf.destroy();
}

/// A plan reads every tenant's objects from one list of each kind, which the provider's
/// own role allows: each kind is listed once for both tenants, no list falls back to reads
/// by name, and Secrets are listed only by the chart's label, which holds no other Secret.
#[test]
fn a_plan_lists_each_kind_once_for_every_tenant() {
    let mut env = Lab::shared().settings_env();
    env.push(("TF_LOG_PROVIDER".to_owned(), "debug".to_owned()));
    let body = format!(
        "{}{}",
        vc("a", "acc-vc-list-a", "paused = true"),
        vc("b", "acc-vc-list-b", "paused = true")
    );
    let tf = Tf(Session::new(&format!("{HEADER}\n{body}"), env));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    let out = tf.plan();
    assert_eq!(out.status_code, 0, "expected an empty plan:\n{out}");
    let log = out.combined();
    assert!(
        !log.contains("reading each object by name instead"),
        "a list fell back to reads by name:\n{log}"
    );
    let taken: Vec<&str> = log
        .lines()
        .filter_map(|l| {
            l.split_once("taking the run's list: ")
                .map(|(_, what)| what)
        })
        .map(|what| what.split(" @").next().unwrap_or(what).trim())
        .collect();
    for plural in [
        "namespaces",
        "serviceaccounts",
        "roles",
        "rolebindings",
        "clusterroles",
        "clusterrolebindings",
        "services",
        "resourcequotas",
        "limitranges",
        "networkpolicies",
        "statefulsets",
        "secrets",
    ] {
        let lists = taken
            .iter()
            .filter(|t| t.starts_with(&format!("list {plural} (")))
            .count();
        assert_eq!(lists, 1, "{plural} listed {lists} times: {taken:#?}");
    }
    assert!(
        taken
            .iter()
            .any(|t| t.starts_with("list secrets (app=vcluster)")),
        "{taken:#?}"
    );
    tf.destroy();
}
