//! The provider as the real Terraform CLI sees it: schema, the backend-free catalog data
//! source and function, plan-time diagnostics, unknown provider configuration, logging, and
//! reattaching to a provider started with `--debug`.

use std::{
    io::Read,
    process::{Command, Stdio},
};

use gpufleet_acceptance::{Workdir, provider_binary, workspace_root};
use serde_json::Value;

const REQUIRED_PROVIDERS: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}
"#;

fn config(body: &str) -> String {
    format!("{REQUIRED_PROVIDERS}\n{body}")
}

#[test]
fn schema_lists_every_type_and_function() {
    let wd = Workdir::new(&config("provider \"gpufleet\" {}\n"));
    wd.init();
    let schema = wd.providers_schema_json();
    let p = &schema["provider_schemas"]["registry.terraform.io/gpufleet/gpufleet"];
    let blocks = &p["provider"]["block"]["block_types"];
    for backend in ["kubernetes", "bcm", "netris"] {
        assert!(
            blocks[backend].is_object(),
            "provider block {backend} missing: {p}"
        );
    }
    assert_eq!(
        blocks["netris"]["block"]["attributes"]["password"]["sensitive"],
        Value::Bool(true)
    );
    assert!(p["data_source_schemas"]["gpufleet_gpu_catalog"].is_object());
    assert!(p["functions"]["mig_profiles"].is_object());
    let engine_types: Vec<&str> = p["resource_schemas"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert!(engine_types.iter().all(|t| t.starts_with("gpufleet_")));
}

#[test]
fn catalog_example_applies_and_then_plans_empty() {
    let example = std::fs::read_to_string(workspace_root().join("examples/catalog/main.tf"))
        .expect("examples/catalog/main.tf");
    let wd = Workdir::new(&example);
    wd.init();
    wd.apply();
    let out = wd.output_json();
    assert_eq!(out["gpu"]["value"]["memory_gb"], 80);
    assert_eq!(out["gpu"]["value"]["nvlink_domain_size"], 8);
    let products = out["mig_capable_products"]["value"]
        .as_array()
        .expect("product list");
    assert!(products.contains(&Value::from("NVIDIA-H100-80GB-HBM3")));
    assert!(
        !products.contains(&Value::from("NVIDIA-L40S")),
        "L40S has no MIG"
    );
    assert_eq!(
        out["mig_resource_names"]["value"]["1g.10gb"],
        "nvidia.com/mig-1g.10gb"
    );
    wd.assert_plan_empty();
    wd.destroy();
}

#[test]
fn function_results_are_exact_in_expressions() {
    let wd = Workdir::new(&config(
        r#"
locals {
  b200 = provider::gpufleet::mig_profiles("nvidia-b200")
}
output "largest" {
  value = one([for p in local.b200 : p if p.compute_slices == 7])
}
output "l40s" {
  value = provider::gpufleet::mig_profiles("NVIDIA-L40S")
}
"#,
    ));
    wd.init();
    wd.apply();
    let out = wd.output_json();
    assert_eq!(out["largest"]["value"]["name"], "7g.180gb");
    assert_eq!(out["largest"]["value"]["max_instances"], 1);
    assert_eq!(out["l40s"]["value"], Value::Array(vec![]));
}

#[test]
fn unknown_product_fails_at_plan_on_the_attribute() {
    let wd = Workdir::new(&config(
        r#"
data "gpufleet_gpu_catalog" "bad" {
  product = "NVIDIA-RTX-9999"
}
"#,
    ));
    wd.init();
    let out = wd.run(&["plan", "-input=false", "-no-color", "-json"]);
    assert_eq!(out.status_code, 1, "{out}");
    let diag = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["diagnostic"]["summary"] == "Unknown GPU Product")
        .unwrap_or_else(|| panic!("no Unknown GPU Product diagnostic:\n{out}"));
    let d = &diag["diagnostic"];
    assert_eq!(d["severity"], "error");
    assert_eq!(d["address"], "data.gpufleet_gpu_catalog.bad");
    // Terraform points at the `product = ...` line itself, not the block.
    let product_line = wd
        .read("main.tf")
        .lines()
        .position(|l| l.contains("product ="))
        .map(|i| i + 1)
        .expect("product line");
    assert_eq!(d["range"]["start"]["line"], product_line, "{d}");
    assert!(
        d["snippet"]["code"]
            .as_str()
            .unwrap_or_default()
            .contains("product")
    );
    assert!(
        d["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("NVIDIA-H100-80GB-HBM3")
    );
    assert!(wd.state_list().is_empty(), "a failed plan changed nothing");
}

#[test]
fn unknown_product_in_function_names_the_argument() {
    let wd = Workdir::new(&config(
        r#"
output "x" {
  value = provider::gpufleet::mig_profiles("H900")
}
"#,
    ));
    wd.init();
    let out = wd.plan_expect_error();
    assert!(out.contains("unknown GPU product \"H900\""), "{out}");
    assert!(out.contains("NVIDIA-A100-SXM4-80GB"), "{out}");
}

#[test]
fn provider_configuration_unknown_at_plan_does_not_fail() {
    // A host cluster created in the same run: its address is unknown until apply.
    let wd = Workdir::new(&config(
        r#"
resource "terraform_data" "cluster" {
  input = "https://127.0.0.1:6443"
}
provider "gpufleet" {
  kubernetes {
    host  = terraform_data.cluster.output
    token = "not-a-real-token"
  }
}
data "gpufleet_gpu_catalog" "all" {}
output "count" {
  value = length(data.gpufleet_gpu_catalog.all.gpus)
}
"#,
    ));
    wd.init();
    wd.plan();
    wd.apply();
    assert!(wd.output_json()["count"]["value"].as_u64().unwrap_or(0) >= 6);
    wd.assert_plan_empty();
}

#[test]
fn provider_logs_reach_tf_log_provider_without_secrets() {
    let secret = "s3cr3t-Netris-Passw0rd";
    let wd = Workdir::new(&config(&format!(
        r#"
provider "gpufleet" {{
  netris {{
    endpoint = "https://netris.example"
    username = "admin"
    password = "{secret}"
  }}
}}
data "gpufleet_gpu_catalog" "h200" {{
  product = "NVIDIA-H200"
}}
"#
    )));
    wd.init();
    let out = wd.run_ok_with_env(
        &["plan", "-input=false", "-no-color"],
        &[("TF_LOG_PROVIDER", "trace")],
    );
    let all = out.combined();
    assert!(
        all.contains("provider.terraform-provider-gpufleet"),
        "provider logs are not shown under TF_LOG_PROVIDER:\n{all}"
    );
    assert!(all.contains("rpc served"), "{all}");
    assert!(!all.contains(secret), "a secret reached the logs");
}

#[test]
fn terraform_reattaches_to_a_debug_provider() {
    let mut child = Command::new(provider_binary())
        .arg("--debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start provider in debug mode");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("Ctrl-C") {
        let n = stdout.read(&mut buf).expect("read debug output");
        assert!(n > 0, "debug output ended early: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let reattach = text
        .split("TF_REATTACH_PROVIDERS='")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .expect("reattach value")
        .to_owned();

    // No dev_overrides: the provider is found only through the reattach configuration.
    let wd = Workdir::without_provider(&config(
        r#"
data "gpufleet_gpu_catalog" "a100" {
  product = "NVIDIA-A100-SXM4-40GB"
}
output "gb" {
  value = data.gpufleet_gpu_catalog.a100.gpu.memory_gb
}
"#,
    ));
    let env = [("TF_REATTACH_PROVIDERS", reattach.as_str())];
    wd.run_ok_with_env(
        &["apply", "-auto-approve", "-input=false", "-no-color"],
        &env,
    );
    let out = wd.run_ok_with_env(&["output", "-json"], &env).json();
    assert_eq!(out["gb"]["value"], 40);
    // Terraform leaves a reattached provider running.
    assert!(
        child.try_wait().expect("wait").is_none(),
        "debug provider exited"
    );
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
