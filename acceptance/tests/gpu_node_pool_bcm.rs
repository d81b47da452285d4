//! `gpufleet_gpu_node_pool` with `source = "bcm"`, with the real Terraform CLI against the
//! shared lab ([`Lab::shared`]): the lab's BCM emulator holds the servers, its hostnames are
//! the API server's node names. A `private` pool is created and destroyed twice for each of
//! two tenants; every server must come up for its tenant on wiped disks (no new entry in
//! `/_admin/leaks`) and end free, and the host nodes must end as they were.
//!
//! Uses B200 servers (rack-b3, powered off while idle), of which it needs 2; virtual
//! clusters are stood in for by their host namespaces, labelled as the host-cluster contract
//! says.

use std::{collections::BTreeMap, process::Command};

use gpufleet_acceptance::Session;
use gpufleet_lab::Lab;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::Value;

const B200: &str = "NVIDIA-B200";

const PROVIDER: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}
"#;

/// A Terraform session against the shared lab, with the provider block prepended.
fn session(body: &str) -> Session {
    Session::new(&format!("{PROVIDER}\n{body}"), Lab::shared().settings_env())
}

/// `curl` against the BCM emulator's admin plane (trusting the lab CA).
fn admin(path: &str) -> Value {
    let lab = Lab::shared();
    let out = Command::new("curl")
        .args(["-sS", "-f", "--cacert"])
        .arg(lab.bcm_ca())
        .arg(format!("{}{path}", lab.bcm_url()))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn leaks() -> Vec<Value> {
    admin("/_admin/leaks")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn device(hostname: &str) -> Value {
    admin("/_admin/state")["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["hostname"] == hostname)
        .cloned()
        .unwrap_or(Value::Null)
}

/// A host namespace standing in for a `private` virtual cluster.
async fn virtual_cluster(client: &kube::Client, name: &str) {
    let ns: Api<Namespace> = Api::all(client.clone());
    let namespace = format!("vc-{name}");
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "gpufleet",
                "gpufleet.dev/virtual-cluster": name,
                "gpufleet.dev/isolation": "private",
            },
        },
    });
    ns.patch(
        &namespace,
        &PatchParams::apply("gpufleet-acceptance").force(),
        &Patch::Apply(&body),
    )
    .await
    .expect("namespace");
}

/// Labels and taints of every B200 host node.
async fn b200_nodes(client: &kube::Client) -> BTreeMap<String, String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&format!("nvidia.com/gpu.product={B200}")))
        .await
        .expect("list nodes");
    list.items
        .into_iter()
        .map(|n| {
            let labels = n.metadata.labels.unwrap_or_default();
            let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
            (
                n.metadata.name.unwrap_or_default(),
                format!("{labels:?} {taints:?}"),
            )
        })
        .collect()
}

fn pool_tf(vc: &str) -> String {
    format!(
        r#"
resource "gpufleet_gpu_node_pool" "p" {{
  name               = "metal"
  virtual_cluster_id = "vc-{vc}/{vc}"
  gpu_product        = "{B200}"
  source             = "bcm"
  node_count         = 2
}}
"#
    )
}

/// Two tenants take the same servers in turn, twice; the first round also imports each pool
/// back from what the fleet shows.
#[test]
fn private_pools_of_two_tenants_in_turn_leave_no_leak_and_every_server_free() {
    let lab = Lab::shared();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = {
        // The client spawns its connection task on the runtime.
        let _in = rt.enter();
        lab.client()
    };
    let tenants = ["gnpb-red", "gnpb-blue"];
    for t in tenants {
        rt.block_on(virtual_cluster(&client, t));
    }
    let nodes_before = rt.block_on(b200_nodes(&client));
    // The emulator keeps its record across the run (other tests leak on purpose): count
    // only new leaks on the servers these pools held.
    let leaks_before = leaks().len();
    let mut used: Vec<String> = Vec::new();
    for round in 0..2 {
        for t in tenants {
            let tf = session(&pool_tf(t));
            tf.ok(&["apply", "-auto-approve", "-input=false", "-no-color"]);
            let st = tf.resource("gpufleet_gpu_node_pool.p");
            assert_eq!(st["status"], "ready", "round {round}, {t}: {st:#}");
            let held: Vec<String> = st["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect();
            assert_eq!(held.len(), 2, "{st:#}");
            used.extend(held.iter().cloned());
            for h in &held {
                let d = device(h);
                assert_eq!(d["extra_values"]["gpufleet_tenant"], t, "{d:#}");
            }
            let out = tf.ok(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
            assert_eq!(out.status_code, 0, "expected an empty plan:\n{out}");
            if round == 0 {
                // Imported, a bcm pool is a bcm pool again: the plan after import is empty.
                tf.ok(&["state", "rm", "gpufleet_gpu_node_pool.p"]);
                let id = format!("vc-{t}/{t}/metal");
                tf.ok(&["import", "-no-color", "gpufleet_gpu_node_pool.p", &id]);
                let out = tf.ok(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
                assert_eq!(out.status_code, 0, "import round-trips:\n{out}");
            }
            tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
            for h in &held {
                let d = device(h);
                assert!(d["extra_values"]["gpufleet_tenant"].is_null(), "{d:#}");
                assert!(d["extra_values"]["gpufleet_releasing"].is_null(), "{d:#}");
                assert!(d["extra_values"]["gpufleet_pool"].is_null(), "{d:#}");
            }
        }
    }
    let new_leaks: Vec<Value> = leaks()
        .into_iter()
        .skip(leaks_before)
        .filter(|l| used.iter().any(|h| l["hostname"] == h.as_str()))
        .collect();
    assert!(new_leaks.is_empty(), "{new_leaks:#?}");
    assert_eq!(
        rt.block_on(b200_nodes(&client)),
        nodes_before,
        "host nodes as they were"
    );
}
