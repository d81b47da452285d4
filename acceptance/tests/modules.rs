//! The tenant-tier modules (`modules/`), each applied from a root configuration the way a
//! platform team would call it, with the real Terraform CLI against the shared lab: apply,
//! an empty second plan, destroy, and nothing left behind (no namespace, every node as found).
//! In every tier a pod created through the tenant's kubeconfig is synced to the host by
//! vCluster's syncer, scheduled onto the tenant's nodes, and runs, and the tenant sees only
//! those nodes; and the state holds no admin credential (the modules' default).

use std::{
    collections::BTreeSet,
    sync::{Mutex, PoisonError},
};

use base64::Engine as _;
use gpufleet_acceptance::{
    Session, module_source,
    tenant::{eventually, tenant_client},
};
use gpufleet_lab::{Lab, rest::KubeRest};
use serde_json::{Value, json};

fn host() -> KubeRest {
    KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host client")
}

/// A root configuration that calls `modules/<module>` with `inputs` (HCL attribute lines).
fn root(module: &str, inputs: &str) -> String {
    let source = module_source(module);
    format!(
        r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}

provider "gpufleet" {{}}

module "tenant" {{
  source = "{source}"
{inputs}
}}

output "virtual_cluster_id" {{
  value = module.tenant.virtual_cluster_id
}}
"#
    )
}

/// The tests compare every node before and after, so they take turns.
static HOST: Mutex<()> = Mutex::new(());

/// Applies, re-plans, runs `check` on the applied session, destroys, and checks the host is
/// as it was.
fn round_trip(
    module: &str,
    namespace: &str,
    inputs: &str,
    check: impl FnOnce(&Session),
) -> Session {
    let _turn = HOST.lock().unwrap_or_else(PoisonError::into_inner);
    let before = Lab::shared().node_marks().expect("list nodes");
    let s = Session::new(&root(module, inputs), Lab::shared().settings_env());
    {
        let _cleanup = s.destroy_on_panic();
        s.apply();
        s.assert_plan_empty();
        let id = s.output_raw("virtual_cluster_id");
        assert!(id.starts_with(&format!("{namespace}/")), "{id}");
        let ns = host()
            .get(&format!("/api/v1/namespaces/{namespace}"))
            .expect("the tenant's namespace");
        assert_eq!(
            ns["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "gpufleet"
        );
        check(&s);
        s.destroy();
    }
    let gone = host()
        .get(&format!("/api/v1/namespaces/{namespace}"))
        .expect_err("namespace deleted");
    assert!(gone.is_not_found(), "{gone}");
    assert_eq!(
        Lab::shared().node_marks().expect("list nodes"),
        before,
        "{module} leaves every node as it was"
    );
    s
}

fn names(items: &[Value]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Through the tenant's own kubeconfig: a GPU pod is synced to `namespace` on the host,
/// scheduled onto one of the host nodes `own_nodes` selects, runs, and its status comes back;
/// the tenant lists only such nodes.
fn a_tenant_pod_runs_on_its_own_nodes(s: &Session, name: &str, namespace: &str, own_nodes: &str) {
    let vc = s.resource("module.tenant.gpufleet_virtual_cluster.this");
    // The modules keep the admin credentials out of state: nothing in it administers the
    // tenant. An operator finds the kubeconfig in the host Secret, as the test does here.
    for secret in ["kubeconfig", "client_certificate", "client_key"] {
        assert!(vc[secret].is_null(), "{secret} is in state: {vc}");
    }
    let state = s.ok(&["state", "pull"]).stdout;
    assert!(
        !state.contains("PRIVATE KEY"),
        "the state holds a private key"
    );
    let stored = host()
        .get(&format!("/api/v1/namespaces/{namespace}/secrets/vc-{name}"))
        .expect("the control plane's kubeconfig Secret");
    let kubeconfig = base64::engine::general_purpose::STANDARD
        .decode(stored["data"]["config"].as_str().expect("a config key"))
        .expect("base64");
    let dir = tempfile::tempdir().expect("tempdir");
    // A ClusterIP-only tenant, reached as from outside the host cluster: a port-forward
    // through the host API server.
    let (tenant, _forward) = tenant_client(
        dir.path(),
        namespace,
        name,
        std::str::from_utf8(&kubeconfig).expect("UTF-8"),
    );
    let own = names(
        &host()
            .list(&format!("/api/v1/nodes?labelSelector={own_nodes}"))
            .expect("list host nodes"),
    );
    assert!(!own.is_empty(), "no host node is labelled {own_nodes}");

    // The dedicated and private modules enforce the `restricted` pod security standard in
    // the tenant, and the dedicated module's quota has no LimitRange behind it, so the host
    // only admits pods that request CPU and memory themselves. A pod that meets both runs in
    // every tier.
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "gpu-check" },
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 1000,
                "seccompProfile": { "type": "RuntimeDefault" },
            },
            "containers": [{
                "name": "check",
                "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": { "drop": ["ALL"] },
                },
                "resources": {
                    "requests": { "cpu": "100m", "memory": "128Mi" },
                    "limits": { "nvidia.com/gpu": "1" },
                },
            }],
        },
    });
    // The tenant's controller manager makes the default ServiceAccount shortly after start.
    eventually("the tenant accepts a pod", || {
        tenant
            .create("/api/v1/namespaces/default/pods", &pod)
            .map_err(|e| e.to_string())
    });
    let synced = format!("/api/v1/namespaces/{namespace}/pods/gpu-check-x-default-x-{name}");
    let host_pod = eventually("the pod runs on the host", || {
        let p = host().get(&synced).map_err(|e| e.to_string())?;
        if p["status"]["phase"] == "Running" {
            Ok(p)
        } else {
            Err(format!("{:#}", p["status"]))
        }
    });
    let node = host_pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(own.contains(&node), "{node} is not one of {own:?}");
    assert_eq!(
        host_pod["metadata"]["labels"]["vcluster.loft.sh/managed-by"], name,
        "synced by the tenant's syncer"
    );
    eventually("the pod's status comes back to the tenant", || {
        let p = tenant
            .get("/api/v1/namespaces/default/pods/gpu-check")
            .map_err(|e| e.to_string())?;
        if p["status"]["phase"] == "Running" && p["spec"]["nodeName"] == node.as_str() {
            Ok(())
        } else {
            Err(format!("{:#}", p["status"]))
        }
    });
    let seen = names(
        &tenant
            .list("/api/v1/nodes")
            .expect("the tenant lists nodes"),
    );
    assert!(seen.contains(&node), "{seen:?} lacks {node}");
    assert!(
        seen.is_subset(&own),
        "the tenant sees {seen:?}, its own are {own:?}"
    );
    tenant
        .delete("/api/v1/namespaces/default/pods/gpu-check")
        .expect("delete the pod");
}

#[test]
fn tenant_shared_applies_replans_empty_and_leaves_nothing() {
    let s = round_trip(
        "tenant-shared",
        "vc-mod-shared",
        r#"
  name        = "mod-shared"
  gpu_product = "NVIDIA-A100-SXM4-80GB"
  quota       = { gpus = 8 }
"#,
        |s| {
            a_tenant_pod_runs_on_its_own_nodes(
                s,
                "mod-shared",
                "vc-mod-shared",
                "gpufleet.dev/isolation=shared",
            );
        },
    );
    assert!(s.addresses().is_empty(), "{:?}", s.addresses());
}

#[test]
fn tenant_dedicated_applies_replans_empty_and_leaves_nothing() {
    round_trip(
        "tenant-dedicated",
        "vc-mod-dedicated",
        r#"
  name        = "mod-dedicated"
  gpu_product = "NVIDIA-L40S"
  node_count  = 1
  network = {
    tenant = "tenant-c"
    site   = "site-b"
    cidr   = "10.61.0.0/24"
  }
"#,
        |s| {
            a_tenant_pod_runs_on_its_own_nodes(
                s,
                "mod-dedicated",
                "vc-mod-dedicated",
                "gpufleet.dev/tenant=mod-dedicated",
            );
        },
    );
}

#[test]
fn tenant_private_applies_replans_empty_and_leaves_nothing() {
    round_trip(
        "tenant-private",
        "vc-mod-private",
        r#"
  name        = "mod-private"
  gpu_product = "NVIDIA-B200"
  node_count  = 1
  network = {
    tenant = "tenant-d"
    site   = "site-b"
    cidr   = "10.62.0.0/24"
  }
"#,
        |s| {
            a_tenant_pod_runs_on_its_own_nodes(
                s,
                "mod-private",
                "vc-mod-private",
                "gpufleet.dev/tenant=mod-private",
            );
        },
    );
}

#[test]
fn benchmark_env_runs_its_template_and_reports_the_results() {
    round_trip(
        "benchmark-env",
        "vc-mod-bench",
        r#"
  name        = "mod-bench"
  template    = "nccl-all-reduce"
  gpu_product = "NVIDIA-A100-SXM4-80GB"
  nodes       = 2
  thresholds  = { wrong_count = { max = 0 } }
"#,
        |s| {
            let r = s.resource("module.tenant.gpufleet_benchmark.this");
            assert_eq!(r["status"], "passed", "{r:#}");
            assert_eq!(r["suite"], "nccl-all-reduce");
            assert_eq!(r["image"], "nvcr.io/nvidia/hpc-benchmarks:25.04");
            assert_eq!(r["parameters"]["max_bytes"], "16G", "the template's sweep");
            assert!(
                r["results"]["largest_size_bus_bandwidth"].as_f64() > Some(0.0),
                "{r:#}"
            );
            assert_eq!(
                r["environment"]["nodes"]
                    .as_str()
                    .map(|n| n.split(',').count()),
                Some(2)
            );
        },
    );
}

#[test]
fn benchmark_env_refuses_a_template_without_an_image_at_plan() {
    let s = Session::new(
        &root(
            "benchmark-env",
            r#"
  name        = "mod-bench-noimage"
  template    = "gpu-burn"
  gpu_product = "NVIDIA-A100-SXM4-80GB"
"#,
        ),
        Lab::shared().settings_env(),
    );
    let out = s.plan();
    assert_eq!(out.status_code, 1, "{out}");
    assert!(out.contains("has no published image"), "{out}");
    assert!(s.addresses().is_empty());
}
