//! `gpufleet_host_preflight` with the real Terraform CLI against the shared lab: what the lab
//! offers (a ready GPU Operator ClusterPolicy, GFD's labels, a default StorageClass, a load
//! balancer for a virtual cluster's Service, Karpenter, the MPI Operator) reads `ok`, and what
//! it lacks is named: no agent of a NetworkPolicy-enforcing network plugin runs, so
//! `network_policy` is `unknown`. The plan warns of every `missing` check, and a
//! postcondition on `missing` can refuse a plan.

use gpufleet_acceptance::Session;
use gpufleet_lab::Lab;
use serde_json::Value;

/// A virtual cluster behind a LoadBalancer Service, and the preflight read after it.
const MAIN_TF: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}

resource "gpufleet_virtual_cluster" "lb" {
  name   = "acc-preflight"
  expose = { type = "LoadBalancer" }
}

data "gpufleet_host_preflight" "host" {
  depends_on = [gpufleet_virtual_cluster.lb]
}

output "checks" {
  value = { for c in data.gpufleet_host_preflight.host.checks : c.name => c }
}

output "missing" {
  value = data.gpufleet_host_preflight.host.missing
}
"#;

#[test]
fn the_preflight_reads_what_the_lab_offers_and_names_what_it_lacks() {
    let s = Session::new(MAIN_TF, Lab::shared().settings_env());
    let _cleanup = s.destroy_on_panic();
    s.apply();
    let checks: Value = s.ok(&["output", "-json", "-no-color", "checks"]).json();
    let status = |name: &str| {
        checks[name]["status"]
            .as_str()
            .unwrap_or("absent")
            .to_owned()
    };
    let detail = |name: &str| {
        checks[name]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let names: Vec<&String> = checks
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert_eq!(names.len(), 9, "{checks:#}");
    for ok in [
        "topology_labels",
        "gpu_operator",
        "gpu_feature_discovery",
        "mig_manager",
        "default_storage_class",
        "load_balancer",
        "karpenter",
        "mpi_operator",
    ] {
        assert_eq!(status(ok), "ok", "{ok}: {checks:#}");
    }
    assert!(detail("gpu_operator").contains("v25.10.0"), "{checks:#}");
    assert!(
        detail("default_storage_class").starts_with("lab-local"),
        "{checks:#}"
    );
    assert!(
        detail("load_balancer").contains("vc-acc-preflight/acc-preflight has 127.0.201."),
        "{checks:#}"
    );
    // The lab judges NetworkPolicy with Cyclonus; no plugin enforces it.
    assert_eq!(status("network_policy"), "unknown", "{checks:#}");
    let missing: Value = s.ok(&["output", "-json", "-no-color", "missing"]).json();
    assert_eq!(missing, serde_json::json!([]), "{checks:#}");

    // A postcondition on a check refuses the plan, naming it.
    s.write(&MAIN_TF.replace(
        "  depends_on = [gpufleet_virtual_cluster.lb]\n",
        "  depends_on = [gpufleet_virtual_cluster.lb]\n  lifecycle {\n    postcondition {\n      \
         condition     = self.checks[6].status == \"ok\"\n      error_message = \
         \"no NetworkPolicy engine: ${self.checks[6].detail}\"\n    }\n  }\n",
    ));
    let refused = s.run(&["plan", "-input=false", "-no-color"]);
    assert!(!refused.success(), "{refused}");
    assert!(
        refused.contains("no NetworkPolicy engine") && refused.contains("calico-node"),
        "{refused}"
    );
    s.write(MAIN_TF);
    s.destroy();
}
