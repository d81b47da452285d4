//! The tenant-tier modules (`modules/`), each applied from a root configuration the way a
//! platform team would call it, with the real Terraform CLI against the shared lab: apply,
//! an empty second plan, destroy, and nothing left behind (no namespace, every node as found).

use std::sync::{Mutex, PoisonError};

use gpufleet_acceptance::{Session, module_source};
use gpufleet_lab::{Lab, rest::KubeRest};

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
        |_| {},
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
        |_| {},
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
        |_| {},
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
