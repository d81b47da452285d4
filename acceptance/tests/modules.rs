//! The tenant-tier modules (`modules/`), each applied from a root configuration the way a
//! platform team would call it, with the real Terraform CLI against the shared lab: apply,
//! an empty second plan, destroy, and nothing left behind (no namespace, every node as found).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use gpufleet_acceptance::{Session, workspace_root};
use gpufleet_lab::{Lab, rest::KubeRest};

fn host() -> KubeRest {
    KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host client")
}

/// Labels and taints of every node, by name.
fn nodes() -> BTreeMap<String, String> {
    host()
        .list("/api/v1/nodes")
        .expect("list nodes")
        .into_iter()
        .map(|n| {
            (
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                format!("{} {}", n["metadata"]["labels"], n["spec"]["taints"]),
            )
        })
        .collect()
}

/// A root configuration that calls `modules/<module>` with `inputs` (HCL attribute lines).
///
/// The source is a relative path from the work directory (a directory of the temporary
/// directory), as a local module must be for its own `../platform` to resolve: an absolute
/// path would make the module a package of its own, which `../` may not leave.
fn root(module: &str, inputs: &str) -> String {
    let up = "../".repeat(std::env::temp_dir().components().count());
    let module_dir = workspace_root().join("modules").join(module);
    let below_root = module_dir
        .strip_prefix("/")
        .expect("the workspace has an absolute path");
    let source = format!("{up}{}", below_root.display());
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

/// Applies, re-plans, destroys, and checks the host is as it was.
fn round_trip(module: &str, namespace: &str, inputs: &str) -> Session {
    let _turn = HOST.lock().unwrap_or_else(PoisonError::into_inner);
    let before = nodes();
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
    s.destroy();
    let gone = host()
        .get(&format!("/api/v1/namespaces/{namespace}"))
        .expect_err("namespace deleted");
    assert!(gone.is_not_found(), "{gone}");
    assert_eq!(nodes(), before, "{module} leaves every node as it was");
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
    );
}

#[test]
fn tenant_private_applies_replans_empty_and_leaves_nothing() {
    round_trip(
        "tenant-private",
        "vc-mod-private",
        r#"
  name      = "mod-private"
  hostnames = ["gpu-rack-b3-08"]
  network = {
    tenant = "tenant-d"
    site   = "site-b"
    cidr   = "10.62.0.0/24"
  }
"#,
    );
}
