//! What the backends already know stops `terraform plan`, through the real CLI against the
//! shared lab: a name BCM or Netris does not have, a node another tenant holds, a CIDR that
//! overlaps an allocation, a pool too small for a benchmark or for the nodes asked. Each row
//! plans a configuration that apply would refuse; the plan must fail with the attribute and
//! the backend's fact, and nothing may change.
//!
//! Each row planned cleanly before these checks existed (apply refused it, or a benchmark
//! waited out its start timeout).

use gpufleet_acceptance::{
    Session,
    emulators::{bcm_call, bcm_device},
};
use gpufleet_engine::plan::backend_facts::{self as facts, BACKEND_FACTS, BackendFact};
use gpufleet_lab::Lab;
use serde_json::json;

const A100: &str = "NVIDIA-A100-SXM4-80GB";

/// One configuration the plan must refuse with `fact` (its summary, on its attribute), saying
/// each of `words` too.
struct Row {
    what: &'static str,
    config: String,
    fact: BackendFact,
    words: Vec<String>,
}

/// Plans each row and checks its refusal.
fn assert_refused(rows: &[Row]) {
    let mut failures = Vec::new();
    for row in rows {
        let tf = Session::on_shared_lab(&row.config);
        let out = tf.run(&["plan", "-input=false", "-no-color"]);
        let text = out.combined();
        // Terraform quotes the attribute's line (`  22:   nodes    = 2`) under the error, and
        // wraps the detail: words are matched with whitespace collapsed.
        let named = text.lines().any(|l| {
            l.trim_start().split_once(": ").is_some_and(|(n, rest)| {
                n.chars().all(|c| c.is_ascii_digit())
                    && rest
                        .trim_start()
                        .strip_prefix(row.fact.attribute)
                        .is_some_and(|r| r.trim_start().starts_with('='))
            })
        });
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let missing: Vec<&str> = std::iter::once(row.fact.summary)
            .chain(row.words.iter().map(String::as_str))
            .filter(|w| !flat.contains(w))
            .collect();
        if out.success() || !named || !missing.is_empty() {
            failures.push(format!(
                "{}: expected a refusal on {} saying {:?} (missing {missing:?}):\n{text}",
                row.what, row.fact.attribute, row.words
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
    let mut d = bcm_device(hostname);
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

/// Builds a row.
fn row(what: &'static str, config: String, fact: BackendFact, words: &[&str]) -> Row {
    Row {
        what,
        config,
        fact,
        words: words.iter().map(|w| (*w).to_owned()).collect(),
    }
}

/// The BCM rows; `spare` is a server held by tenant `bf-other`.
fn bcm_rows(spare: &str) -> Vec<Row> {
    let image = "ubuntu2404-cuda12.8";
    vec![
        row(
            "a hostname BCM does not have",
            bcm_node("no-such-node", "bf-a", "gpu-compute", image),
            facts::UNKNOWN_BCM_NODE,
            &["no node named \"no-such-node\""],
        ),
        row(
            "a category BCM does not have",
            bcm_node(spare, "bf-a", "no-such-category", image),
            facts::UNKNOWN_BCM_CATEGORY,
            &["\"no-such-category\"", "gpu-compute"],
        ),
        row(
            "a software image BCM does not have",
            bcm_node(spare, "bf-a", "gpu-compute", "no-such-image"),
            facts::UNKNOWN_BCM_IMAGE,
            &["\"no-such-image\"", image],
        ),
        row(
            "a node another tenant holds",
            bcm_node(spare, "bf-a", "gpu-compute", image),
            facts::BCM_NODE_HELD,
            &["\"bf-other\""],
        ),
        row(
            "a bcm pool larger than the free servers",
            r#"
resource "gpufleet_gpu_node_pool" "p" {
  name               = "metal"
  virtual_cluster_id = "vc-bf-a/bf-a"
  gpu_product        = "NVIDIA-B200"
  source             = "bcm"
  node_count         = 99
}
"#
            .to_owned(),
            facts::NOT_ENOUGH_BCM_NODES,
            &["NVIDIA-B200"],
        ),
    ]
}

/// The Netris rows; segment `bf-base` holds 10.77.0.0/24.
fn netris_rows() -> Vec<Row> {
    let with = |name: &str, tenant: &str, vpc: &str, site: &str, cidr: &str, members: &str| {
        segment(name, tenant, vpc, site, cidr, members)
    };
    let free = "10.78.0.0/24";
    vec![
        row(
            "a tenant Netris does not have",
            with("bf-t", "no-such-tenant", "Default", "site-a", free, ""),
            facts::UNKNOWN_NETRIS_TENANT,
            &["\"no-such-tenant\"", "tenant-a"],
        ),
        row(
            "a VPC Netris does not have",
            with("bf-v", "tenant-a", "no-such-vpc", "site-a", free, ""),
            facts::UNKNOWN_NETRIS_VPC,
            &["\"no-such-vpc\"", "Default"],
        ),
        row(
            "a site Netris does not have",
            with("bf-s", "tenant-a", "Default", "no-such-site", free, ""),
            facts::UNKNOWN_NETRIS_SITE,
            &["\"no-such-site\"", "site-a"],
        ),
        row(
            "a member host missing from the server inventory",
            with(
                "bf-m",
                "tenant-a",
                "Default",
                "site-a",
                free,
                r#"{ hostname = "no-such-server" }"#,
            ),
            facts::UNKNOWN_MEMBER_HOST,
            &["\"no-such-server\""],
        ),
        row(
            "a CIDR inside another segment's allocation",
            with(
                "bf-c",
                "tenant-a",
                "Default",
                "site-a",
                "10.77.0.128/25",
                "",
            ),
            facts::CIDR_OVERLAP,
            &["gf-bf-base", "10.77.0.0/24"],
        ),
    ]
}

/// A gpu-burn run on pool `pool_id` of `vc_id`, with `extra` attribute lines.
fn benchmark(vc_id: &str, pool_id: &str, extra: &str) -> String {
    format!(
        r#"
resource "gpufleet_benchmark" "b" {{
  name               = "bf-run"
  virtual_cluster_id = "{vc_id}"
  node_pool_id       = {pool_id}
  suite              = "gpu-burn"
  image              = "nvcr.io/nvidia/pytorch:25.04-py3"
  {extra}
}}
"#
    )
}

/// The host-cluster rows; `pool_id` is a pool of `vc_id` holding one A100 node.
fn host_rows(vc_id: &str, pool_id: &str) -> Vec<Row> {
    let quoted = format!("\"{pool_id}\"");
    let (vc_namespace, vc_name) = vc_id.split_once('/').expect("a virtual cluster id");
    let lives_in = format!("namespace {vc_namespace}");
    let planned_pool = format!(
        r#"
resource "gpufleet_gpu_node_pool" "q" {{
  name               = "planned"
  virtual_cluster_id = "{vc_id}"
  gpu_product        = "{A100}"
  node_count         = 1
}}
"#
    );
    vec![
        row(
            "a second virtual cluster of the tenant's name, in another namespace",
            format!(
                r#"
resource "gpufleet_virtual_cluster" "twin" {{
  name      = "{vc_name}"
  namespace = "{vc_name}-twin"
}}
"#
            ),
            facts::VIRTUAL_CLUSTER_NAME_TAKEN,
            &[&lives_in, "would share nodes"],
        ),
        row(
            "a host pool larger than the free nodes",
            format!(
                r#"
resource "gpufleet_gpu_node_pool" "p" {{
  name               = "big"
  virtual_cluster_id = "{vc_id}"
  gpu_product        = "{A100}"
  node_count         = 99
}}
"#
            ),
            facts::NOT_ENOUGH_HOST_NODES,
            &[A100],
        ),
        row(
            "a benchmark on more nodes than its pool has",
            benchmark(vc_id, &quoted, "nodes = 3"),
            facts::MORE_NODES_THAN_POOL,
            &["has 1 node(s)"],
        ),
        row(
            "a benchmark on more GPUs per node than the pool's nodes offer",
            benchmark(vc_id, &quoted, "gpus_per_node = 16"),
            facts::MORE_GPUS_THAN_NODES,
            &["at most 8"],
        ),
        row(
            "a benchmark per NVLink clique on a pool whose nodes have none",
            benchmark(vc_id, &quoted, "per = \"clique\""),
            facts::POOL_NOT_IN_UNITS,
            &["carry no nvidia.com/gpu.clique label"],
        ),
        row(
            "a benchmark on more nodes than the same run plans for its pool",
            planned_pool + &benchmark(vc_id, "gpufleet_gpu_node_pool.q.id", "nodes = 2"),
            facts::MORE_NODES_THAN_POOL,
            &["is planned with 1 node(s)"],
        ),
    ]
}

/// Every refusal the provider documents has a row here (the rows need no lab to be built).
#[test]
fn every_documented_backend_fact_has_a_row() {
    let rows: Vec<Row> = bcm_rows("spare")
        .into_iter()
        .chain(netris_rows())
        .chain(host_rows("vc-x/x", "vc-x/x/p"))
        .collect();
    for fact in BACKEND_FACTS {
        assert!(
            rows.iter().any(|r| r.fact == *fact),
            "no row plans {:?} ({} of {})",
            fact.summary,
            fact.attribute,
            fact.type_name
        );
    }
}

#[test]
fn what_bcm_knows_refuses_the_plan() {
    let spare = spare_server();
    hold(&spare, Some("bf-other"));
    let result = std::panic::catch_unwind(|| assert_refused(&bcm_rows(&spare)));
    hold(&spare, None);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn what_netris_knows_refuses_the_plan() {
    // An allocation of another segment, which a new CIDR must not overlap.
    let base = Session::on_shared_lab(&segment(
        "bf-base",
        "tenant-a",
        "Default",
        "site-a",
        "10.77.0.0/24",
        "",
    ));
    let _cleanup = base.destroy_on_panic();
    base.apply();
    assert_refused(&netris_rows());
    // The segment's own allocation is no overlap: a plan of the base itself is empty, and a
    // new segment elsewhere plans.
    let again = base.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
    assert_eq!(
        again.status_code, 0,
        "the base segment plans empty:\n{again}"
    );
    let elsewhere = Session::on_shared_lab(&segment(
        "bf-ok",
        "tenant-a",
        "Default",
        "site-a",
        "10.78.0.0/24",
        "",
    ));
    let out = elsewhere.run(&["plan", "-input=false", "-no-color"]);
    assert!(out.success(), "a free range plans:\n{out}");
    base.destroy();
}

#[test]
fn what_the_host_cluster_knows_refuses_the_plan() {
    // A tenant with a one-node pool for the benchmark rows.
    let tenant = Session::on_shared_lab(&format!(
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
    let id = |address: &str| {
        tenant.resource(address)["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{address} has an id"))
            .to_owned()
    };
    let (vc_id, pool_id) = (
        id("gpufleet_virtual_cluster.t"),
        id("gpufleet_gpu_node_pool.p"),
    );
    assert_refused(&host_rows(&vc_id, &pool_id));
    // What fits plans.
    let fits = Session::on_shared_lab(&benchmark(
        &vc_id,
        &format!("\"{pool_id}\""),
        "nodes = 1\n  gpus_per_node = 8",
    ));
    let out = fits.run(&["plan", "-input=false", "-no-color"]);
    assert!(out.success(), "a run that fits plans:\n{out}");
    tenant.destroy();
}
