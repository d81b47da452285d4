//! Bad input stops `terraform plan`, through the real CLI and no lab: a broken provider block
//! fails the plan of what needs that backend (and only that), and offline rules of a resource's
//! configuration are reported on the attribute's line.

use gpufleet_acceptance::Session;

const REQUIRED: &str = r#"
terraform {
  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}
"#;

/// A session on `body` whose backends come only from the configuration: no `GPUFLEET_*`
/// variable of the caller's environment leaks in.
fn session(body: &str) -> Session {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("GPUFLEET_"))
        .map(|(k, _)| (k, String::new()))
        .collect();
    env.push((
        "KUBECONFIG".to_owned(),
        "/nonexistent/kubeconfig".to_owned(),
    ));
    Session::new(&format!("{REQUIRED}\n{body}"), env)
}

const BCM_NODE: &str = r#"
resource "gpufleet_bcm_node" "n" {
  hostname       = "gpu-node-001"
  tenant         = "tenant-a"
  category       = "gpu-compute"
  software_image = "ubuntu2404-cuda12.8"
}
"#;

const BCM_NODES: &str = r#"
data "gpufleet_bcm_nodes" "free" {
  free_only = true
}
"#;

const SEGMENT: &str = r#"
resource "gpufleet_network_segment" "s" {
  name   = "tenant-a-net"
  tenant = "tenant-a"
  vpc    = "vpc-tenant-a"
  site   = "dc1"
  cidr   = "10.20.0.0/24"
}
"#;

const VIRTUAL_CLUSTER: &str = r#"
resource "gpufleet_virtual_cluster" "vc" {
  name               = "team-a"
  kubernetes_version = "1.36"
}
"#;

const CATALOG: &str = r#"
data "gpufleet_gpu_catalog" "all" {}
"#;

/// Provider blocks that plan accepted before, each with something that needs the backend and
/// what the error must name. Each row planned without error before the provider checked its
/// blocks at configure time (they failed only at apply).
const BROKEN_BLOCKS: &[(&str, &str, &str, &[&str])] = &[
    (
        "bcm certificate without its key",
        r#"bcm {
      endpoint           = "https://127.0.0.1:9"
      client_certificate = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    }"#,
        BCM_NODE,
        &[
            "bcm.client_key",
            "gpufleet_bcm_node",
            "GPUFLEET_BCM_CLIENT_KEY",
        ],
    ),
    (
        "bcm user without a password, read by a data source",
        r#"bcm {
      endpoint = "https://127.0.0.1:9"
      username = "root"
    }"#,
        BCM_NODES,
        &[
            "bcm.client_certificate",
            "gpufleet_bcm_nodes",
            "GPUFLEET_BCM_PASSWORD",
        ],
    ),
    (
        "bcm CA file that does not exist",
        r#"bcm {
      endpoint       = "https://127.0.0.1:9"
      username       = "root"
      password       = "secret"
      ca_certificate = "/nonexistent/bcm-ca.pem"
    }"#,
        BCM_NODE,
        &["bcm.ca_certificate", "/nonexistent/bcm-ca.pem"],
    ),
    (
        "netris user without a password",
        r#"netris {
      endpoint = "https://netris.example"
      username = "admin"
    }"#,
        SEGMENT,
        &[
            "netris",
            "password",
            "GPUFLEET_NETRIS_PASSWORD",
            "gpufleet_network_segment",
        ],
    ),
    (
        "netris endpoint over plain http to a remote host",
        r#"netris {
      endpoint = "http://netris.example"
      username = "admin"
      password = "secret"
    }"#,
        SEGMENT,
        &["netris.endpoint", "https://"],
    ),
    (
        "kubeconfig path that does not exist",
        r#"kubernetes {
      config_path = "/nonexistent/gpufleet-kubeconfig"
    }"#,
        VIRTUAL_CLUSTER,
        &[
            "/nonexistent/gpufleet-kubeconfig",
            "gpufleet_virtual_cluster",
            "kubernetes",
        ],
    ),
];

fn provider(block: &str) -> String {
    format!("provider \"gpufleet\" {{\n    {block}\n}}\n")
}

#[test]
fn a_broken_provider_block_fails_the_plan_of_what_needs_it() {
    for (what, block, body, expected) in BROKEN_BLOCKS {
        let tf = session(&format!("{}\n{body}", provider(block)));
        let out = tf.run(&["plan", "-input=false", "-no-color"]);
        assert!(!out.success(), "{what}: plan succeeded\n{out}");
        for e in *expected {
            assert!(out.contains(e), "{what}: no {e:?} in\n{out}");
        }
        assert!(
            !out.contains("secret"),
            "{what}: a password was shown\n{out}"
        );
    }
}

#[test]
fn a_broken_provider_block_does_not_fail_what_does_not_need_it() {
    let (_, block, _, _) = BROKEN_BLOCKS[0];
    let tf = session(&format!("{}\n{CATALOG}", provider(block)));
    let out = tf.run(&["plan", "-input=false", "-no-color"]);
    assert!(out.success(), "{out}");
}
