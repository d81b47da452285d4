//! What the backends already know stops `terraform plan`, through the real CLI against the
//! shared lab: a name BCM or Netris does not have, a node another tenant holds, a CIDR that
//! overlaps an allocation, a pool too small for a benchmark or for the nodes asked. Each row
//! plans a configuration that apply would refuse; the plan must fail with the attribute and
//! the backend's fact, and nothing may change.
//!
//! Each row planned cleanly before these checks existed (apply refused it, or a benchmark
//! waited out its start timeout).

use gpufleet_acceptance::{Session, emulators::bcm_call};
use gpufleet_lab::Lab;
use serde_json::json;

const A100: &str = "NVIDIA-A100-SXM4-80GB";

/// A session on `body` against the shared lab, with the provider block.
fn session(body: &str) -> Session {
    Session::new(
        &format!(
            r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}
provider "gpufleet" {{}}
{body}"#
        ),
        Lab::shared().settings_env(),
    )
}

/// One configuration the plan must refuse: on `attribute`, saying each of `words`.
struct Row {
    what: &'static str,
    config: String,
    attribute: &'static str,
    words: &'static [&'static str],
}

/// Plans each row and checks its refusal.
fn assert_refused(rows: &[Row]) {
    let mut failures = Vec::new();
    for row in rows {
        let tf = session(&row.config);
        let out = tf.run(&["plan", "-input=false", "-no-color"]);
        let text = out.combined();
        // Terraform quotes the attribute's line (`  22:   nodes    = 2`) under the error, and
        // wraps the detail: words are matched with whitespace collapsed.
        let named = text.lines().any(|l| {
            l.trim_start().split_once(": ").is_some_and(|(n, rest)| {
                n.chars().all(|c| c.is_ascii_digit())
                    && rest
                        .trim_start()
                        .strip_prefix(row.attribute)
                        .is_some_and(|r| r.trim_start().starts_with('='))
            })
        });
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let missing: Vec<&str> = row
            .words
            .iter()
            .copied()
            .filter(|w| !flat.contains(w))
            .collect();
        if out.success() || !named || !missing.is_empty() {
            failures.push(format!(
                "{}: expected a refusal on {} saying {:?} (missing {missing:?}):\n{text}",
                row.what, row.attribute, row.words
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn bcm_node(hostname: &str, tenant: &str, category: &str, image: &str) -> String {
    format!(
        r#"
resource "gpufleet_bcm_node" "n" {{
  hostname       = "{hostname}"
  tenant         = "{tenant}"
  category       = "{category}"
  software_image = "{image}"
}}
"#
    )
}

fn segment(name: &str, tenant: &str, vpc: &str, site: &str, cidr: &str, members: &str) -> String {
    format!(
        r#"
resource "gpufleet_network_segment" "{name}" {{
  name    = "{name}"
  tenant  = "{tenant}"
  vpc     = "{vpc}"
  site    = "{site}"
  cidr    = "{cidr}"
  members = [{members}]
}}
"#
    )
}

/// The last L40S server of rack-b2, away from what other tests pick.
fn spare_server() -> String {
    let mut names: Vec<String> = Lab::shared()
        .fleet()
        .nodes()
        .iter()
        .filter(|n| n.rack == "rack-b2")
        .map(|n| n.name.clone())
        .collect();
    names.sort();
    names.pop().expect("rack-b2 has servers")
}

/// Records `tenant` (or nobody) as the holder of `hostname` in BCM.
fn hold(hostname: &str, tenant: Option<&str>) {
    let mut d = bcm_call("cmdevice", "getDevice", &json!([hostname]));
    match tenant {
        Some(t) => d["extra_values"]["gpufleet_tenant"] = json!(t),
        None => {
            if let Some(m) = d["extra_values"].as_object_mut() {
                m.remove("gpufleet_tenant");
            }
        }
    }
    let r = bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    assert_eq!(r["success"], true, "{r}");
}

#[test]
fn what_bcm_knows_refuses_the_plan() {
    let spare = spare_server();
    hold(&spare, Some("bf-other"));
    let rows = [
        Row {
            what: "a hostname BCM does not have",
            config: bcm_node("no-such-node", "bf-a", "gpu-compute", "ubuntu2404-cuda12.8"),
            attribute: "hostname",
            words: &["Unknown BCM Node", "no node named \"no-such-node\""],
        },
        Row {
            what: "a category BCM does not have",
            config: bcm_node(&spare, "bf-a", "no-such-category", "ubuntu2404-cuda12.8"),
            attribute: "category",
            words: &[
                "Unknown BCM Category",
                "\"no-such-category\"",
                "gpu-compute",
            ],
        },
        Row {
            what: "a software image BCM does not have",
            config: bcm_node(&spare, "bf-a", "gpu-compute", "no-such-image"),
            attribute: "software_image",
            words: &[
                "Unknown BCM Software Image",
                "\"no-such-image\"",
                "ubuntu2404-cuda12.8",
            ],
        },
        Row {
            what: "a node another tenant holds",
            config: bcm_node(&spare, "bf-a", "gpu-compute", "ubuntu2404-cuda12.8"),
            attribute: "hostname",
            words: &["Held By Another Tenant", "\"bf-other\""],
        },
        Row {
            what: "a bcm pool larger than the free servers",
            config: r#"
resource "gpufleet_gpu_node_pool" "p" {
  name               = "metal"
  virtual_cluster_id = "vc-bf-a/bf-a"
  gpu_product        = "NVIDIA-B200"
  source             = "bcm"
  node_count         = 99
}
"#
            .to_owned(),
            attribute: "node_count",
            words: &["Not Enough Free BCM Nodes"],
        },
    ];
    let result = std::panic::catch_unwind(|| assert_refused(&rows));
    hold(&spare, None);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn what_netris_knows_refuses_the_plan() {
    // An allocation of another segment, which a new CIDR must not overlap.
    let base = session(&segment(
        "bf-base",
        "tenant-a",
        "Default",
        "site-a",
        "10.77.0.0/24",
        "",
    ));
    let _cleanup = base.destroy_on_panic();
    base.apply();
    let ok = |name: &str| segment(name, "tenant-a", "Default", "site-a", "10.78.0.0/24", "");
    let rows = [
        Row {
            what: "a tenant Netris does not have",
            config: segment(
                "bf-t",
                "no-such-tenant",
                "Default",
                "site-a",
                "10.78.0.0/24",
                "",
            ),
            attribute: "tenant",
            words: &["Unknown Netris Tenant", "\"no-such-tenant\"", "tenant-a"],
        },
        Row {
            what: "a VPC Netris does not have",
            config: segment(
                "bf-v",
                "tenant-a",
                "no-such-vpc",
                "site-a",
                "10.78.0.0/24",
                "",
            ),
            attribute: "vpc",
            words: &["Unknown Netris VPC", "\"no-such-vpc\"", "Default"],
        },
        Row {
            what: "a site Netris does not have",
            config: segment(
                "bf-s",
                "tenant-a",
                "Default",
                "no-such-site",
                "10.78.0.0/24",
                "",
            ),
            attribute: "site",
            words: &["Unknown Netris Site", "\"no-such-site\"", "site-a"],
        },
        Row {
            what: "a member host missing from the server inventory",
            config: segment(
                "bf-m",
                "tenant-a",
                "Default",
                "site-a",
                "10.78.0.0/24",
                r#"{ hostname = "no-such-server" }"#,
            ),
            attribute: "members",
            words: &["Unknown Member Host", "\"no-such-server\""],
        },
        Row {
            what: "a CIDR inside another segment's allocation",
            config: segment(
                "bf-c",
                "tenant-a",
                "Default",
                "site-a",
                "10.77.0.128/25",
                "",
            ),
            attribute: "cidr",
            words: &["Overlaps An Allocation", "gf-bf-base", "10.77.0.0/24"],
        },
    ];
    assert_refused(&rows);
    // The segment's own allocation is no overlap: a plan of the base itself is empty, and a
    // new segment elsewhere plans.
    let again = base.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
    assert_eq!(
        again.status_code, 0,
        "the base segment plans empty:\n{again}"
    );
    let elsewhere = session(&ok("bf-ok"));
    let out = elsewhere.run(&["plan", "-input=false", "-no-color"]);
    assert!(out.success(), "a free range plans:\n{out}");
    base.destroy();
}

#[test]
fn what_the_host_cluster_knows_refuses_the_plan() {
    // A tenant with a one-node pool for the benchmark rows.
    let tenant = session(&format!(
        r#"
resource "gpufleet_virtual_cluster" "t" {{
  name      = "bf-bench"
  isolation = "dedicated"
}}

resource "gpufleet_gpu_node_pool" "p" {{
  name               = "a100"
  virtual_cluster_id = gpufleet_virtual_cluster.t.id
  gpu_product        = "{A100}"
  node_count         = 1
}}
"#
    ));
    let _cleanup = tenant.destroy_on_panic();
    tenant.apply();
    let pool_id = tenant.resource("gpufleet_gpu_node_pool.p")["id"]
        .as_str()
        .expect("a pool id")
        .to_owned();
    let vc_id = tenant.resource("gpufleet_virtual_cluster.t")["id"]
        .as_str()
        .expect("a virtual cluster id")
        .to_owned();
    let benchmark = |extra: &str| {
        format!(
            r#"
resource "gpufleet_benchmark" "b" {{
  name               = "bf-run"
  virtual_cluster_id = "{vc_id}"
  node_pool_id       = "{pool_id}"
  suite              = "gpu-burn"
  image              = "nvcr.io/nvidia/pytorch:25.04-py3"
  {extra}
}}
"#
        )
    };
    let rows = [
        Row {
            what: "a host pool larger than the free nodes",
            config: format!(
                r#"
resource "gpufleet_gpu_node_pool" "p" {{
  name               = "big"
  virtual_cluster_id = "{vc_id}"
  gpu_product        = "{A100}"
  node_count         = 99
}}
"#
            ),
            attribute: "node_count",
            words: &["Not Enough Free Host Nodes", A100],
        },
        Row {
            what: "a benchmark on more nodes than its pool has",
            config: benchmark("nodes = 3"),
            attribute: "nodes",
            words: &["More Nodes Than The Pool Has", "has 1 node(s)"],
        },
        Row {
            what: "a benchmark on more GPUs per node than the pool's nodes offer",
            config: benchmark("gpus_per_node = 16"),
            attribute: "gpus_per_node",
            words: &["More GPUs Per Node Than The Pool Offers", "at most 8"],
        },
        Row {
            what: "a benchmark on more nodes than the same run plans for its pool",
            config: format!(
                r#"
resource "gpufleet_gpu_node_pool" "q" {{
  name               = "planned"
  virtual_cluster_id = "{vc_id}"
  gpu_product        = "{A100}"
  node_count         = 1
}}

resource "gpufleet_benchmark" "b" {{
  name               = "bf-planned"
  virtual_cluster_id = "{vc_id}"
  node_pool_id       = gpufleet_gpu_node_pool.q.id
  suite              = "gpu-burn"
  image              = "nvcr.io/nvidia/pytorch:25.04-py3"
  nodes              = 2
}}
"#
            ),
            attribute: "nodes",
            words: &["More Nodes Than The Pool Has", "is planned with 1 node(s)"],
        },
    ];
    assert_refused(&rows);
    // What fits plans.
    let fits = session(&benchmark("nodes = 1\n  gpus_per_node = 8"));
    let out = fits.run(&["plan", "-input=false", "-no-color"]);
    assert!(out.success(), "a run that fits plans:\n{out}");
    tenant.destroy();
}
