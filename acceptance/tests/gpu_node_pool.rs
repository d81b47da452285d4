//! `gpufleet_gpu_node_pool` and `gpufleet_fleet_inventory` against the shared lab's real API
//! server: concurrent claims, over-asking, tiers, drift, destroy leaving nodes as found, and a
//! life cycle plus bad inputs with the real Terraform CLI.
//!
//! Tests share one lab, so each uses a product and counts of its own and cleans up: H200 for
//! the concurrent claims (10 of 16 nodes), B200 for over-asking (nothing is claimed), H100 for
//! the Terraform life cycle (at most 2 nodes), one L40S for the drain action, one A100 for
//! MIG. A test that compares every node of its product before and after must be the only one
//! claiming that product. Virtual clusters are stood in for by their host namespaces,
//! labelled as the host-cluster contract says.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use gpufleet_acceptance::Session;
use gpufleet_engine::{
    backends::kube::host::KubeHost,
    consistency::{assert_object_compatible, proposed_new},
    context::Context,
    kinds::{ApplyRequest, ResourceKind},
    plan::plan_resource,
    resources::gpu_node_pool::{GpuNodePool, node_config::ORIGINALS_ANNOTATION},
    value::Value,
};
use gpufleet_lab::Lab;
use k8s_openapi::api::{
    core::v1::{Namespace, Node, Pod},
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};

const H100: &str = "NVIDIA-H100-80GB-HBM3";
const H200: &str = "NVIDIA-H200";
const B200: &str = "NVIDIA-B200";
const A100: &str = "NVIDIA-A100-SXM4-80GB";
const L40S: &str = "NVIDIA-L40S";

/// Labels, taints, cordon and whether the originals record is there, per node.
type Snapshot = BTreeMap<String, (BTreeMap<String, String>, String, bool, bool)>;

async fn snapshot(client: &kube::Client, product: &str) -> Snapshot {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&format!("nvidia.com/gpu.product={product}")))
        .await
        .expect("list nodes");
    list.items
        .into_iter()
        .map(|n| {
            let spec = n.spec.unwrap_or_default();
            let taints = serde_json_string(&spec.taints);
            (
                n.metadata.name.unwrap_or_default(),
                (
                    n.metadata.labels.unwrap_or_default(),
                    taints,
                    spec.unschedulable.unwrap_or(false),
                    n.metadata
                        .annotations
                        .unwrap_or_default()
                        .contains_key(ORIGINALS_ANNOTATION),
                ),
            )
        })
        .collect()
}

fn serde_json_string<T: std::fmt::Debug>(v: &T) -> String {
    format!("{v:?}")
}

/// A host namespace standing in for a virtual cluster of `tier`.
async fn virtual_cluster(client: &kube::Client, name: &str, tier: &str) -> String {
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
                "gpufleet.dev/isolation": tier,
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
    format!("{namespace}/{name}")
}

/// For the CLI tests: a runtime for the kube client, the lab's client, and the host
/// namespace standing in for virtual cluster `name` of `tier`.
fn lab_tenant(lab: &Lab, name: &str, tier: &str) -> (tokio::runtime::Runtime, kube::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async { lab.client() });
    rt.block_on(virtual_cluster(&client, name, tier));
    (rt, client)
}

fn config(kind: &dyn ResourceKind, attrs: &[(&str, Value)]) -> Value {
    let schema = kind.schema();
    let mut obj: BTreeMap<String, Value> = schema
        .block
        .attributes
        .iter()
        .map(|a| (a.name.to_owned(), Value::Null))
        .chain(
            schema
                .block
                .blocks
                .iter()
                .map(|b| (b.type_name.to_owned(), Value::Null)),
        )
        .collect();
    for (k, v) in attrs {
        obj.insert((*k).to_owned(), v.clone());
    }
    Value::Object(obj)
}

/// Plans and applies like Terraform, checking the result against the plan.
async fn apply(kind: &dyn ResourceKind, prior: &Value, config: &Value) -> (Value, String) {
    let ctx = Context::default();
    let block = kind.schema().block;
    let planned = if config.is_null() {
        Value::Null
    } else {
        let proposed = proposed_new(&block, prior, config);
        let p = plan_resource(kind, &ctx, prior.clone(), proposed, config.clone()).await;
        if p.diagnostics.has_error() {
            return (prior.clone(), format!("{:?}", p.diagnostics));
        }
        p.planned
    };
    let r = kind
        .apply(
            &ctx,
            ApplyRequest {
                prior: prior.clone(),
                planned: planned.clone(),
                config: config.clone(),
            },
        )
        .await;
    let errors: Vec<String> = r.diagnostics.iter().map(|d| d.detail.clone()).collect();
    if errors.is_empty() && !planned.is_null() {
        let errs = assert_object_compatible(&block, &planned, &r.new_state);
        assert!(errs.is_empty(), "inconsistent result: {errs:?}");
    }
    (r.new_state, errors.join("\n"))
}

fn pool_config(kind: &dyn ResourceKind, name: &str, vc: &str, product: &str, n: i64) -> Value {
    config(
        kind,
        &[
            ("name", Value::string(name)),
            ("virtual_cluster_id", Value::string(vc)),
            ("gpu_product", Value::string(product)),
            ("node_count", Value::int(n)),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_concurrent_pools_never_share_a_node_and_destroy_restores_every_node() {
    let lab = Lab::shared();
    let client = lab.client();
    let before = snapshot(&client, H200).await;
    let mut vcs = Vec::new();
    for i in 0..10 {
        vcs.push(virtual_cluster(&client, &format!("gnp-c{i}"), "dedicated").await);
    }
    let host = Arc::new(KubeHost::new(client.clone()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for vc in vcs.clone() {
        let host = Arc::clone(&host);
        tasks.push(tokio::spawn(async move {
            let kind = GpuNodePool(host);
            let c = pool_config(&kind, "p", &vc, H200, 1);
            apply(&kind, &Value::Null, &c).await
        }));
    }
    let mut states = Vec::new();
    for t in tasks {
        let (state, err) = t.await.expect("task");
        assert!(err.is_empty(), "claim failed: {err}");
        states.push(state);
    }
    let took = started.elapsed();
    let calls = host.calls();
    println!("10 concurrent pools claimed in {took:?} with {calls} API calls");

    // What the API server says: ten distinct nodes, each held by one pool, tainted.
    let nodes: Api<Node> = Api::all(client.clone());
    let held = nodes
        .list(&ListParams::default().labels("gpufleet.dev/pool"))
        .await
        .expect("list");
    let mine: Vec<&Node> = held
        .items
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("gpufleet.dev/pool"))
                .is_some_and(|p| p.starts_with("gnp-c"))
        })
        .collect();
    assert_eq!(mine.len(), 10, "one node per pool");
    let mut pools: Vec<&String> = mine
        .iter()
        .filter_map(|n| n.metadata.labels.as_ref()?.get("gpufleet.dev/pool"))
        .collect();
    pools.sort();
    pools.dedup();
    assert_eq!(pools.len(), 10, "no node is shared");
    for n in &mine {
        let taints = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.key == "gpufleet.dev/tenant" && t.effect == "NoSchedule"),
            "dedicated nodes are tainted"
        );
    }

    // Refresh and destroy, counted.
    let kind = GpuNodePool(Arc::clone(&host));
    let c0 = host.calls();
    let r = kind.read(&Context::default(), states[0].clone()).await;
    assert!(!r.diagnostics.has_error());
    println!("refresh of one pool: {} API calls", host.calls() - c0);
    for s in &states {
        let c0 = host.calls();
        let (gone, err) = apply(&kind, s, &Value::Null).await;
        assert!(err.is_empty(), "{err}");
        assert!(gone.is_null());
        if s == &states[0] {
            println!(
                "destroy of a one-node pool: {} API calls",
                host.calls() - c0
            );
        }
    }
    assert_eq!(snapshot(&client, H200).await, before, "every node as found");
    let ns: Api<Namespace> = Api::all(client.clone());
    for vc in vcs {
        let name = vc.split('/').next().unwrap_or_default().to_owned();
        let _ = ns.delete(&name, &DeleteParams::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_asking_fails_names_the_free_count_and_changes_nothing() {
    let lab = Lab::shared();
    let client = lab.client();
    let vc = virtual_cluster(&client, "gnp-over", "shared").await;
    let before = snapshot(&client, B200).await;
    let kind = GpuNodePool(Arc::new(KubeHost::new(client.clone())));
    // Refused at plan, with the free count.
    let (state, err) = apply(
        &kind,
        &Value::Null,
        &pool_config(&kind, "big", &vc, B200, 9),
    )
    .await;
    assert!(state.is_null());
    assert!(err.contains("Not Enough Free Host Nodes"), "{err}");
    assert!(err.contains("free (of its"), "{err}");
    // And at apply, when the fleet changed after a plan that fitted.
    let config = pool_config(&kind, "big", &vc, B200, 1);
    let block = kind.schema().block;
    let proposed = proposed_new(&block, &Value::Null, &config);
    let ctx = Context::default();
    let p = plan_resource(&kind, &ctx, Value::Null, proposed, config.clone()).await;
    assert!(!p.diagnostics.has_error(), "{:?}", p.diagnostics);
    let mut planned = p.planned;
    planned.set_attr("node_count", Value::int(9));
    let r = kind
        .apply(
            &ctx,
            ApplyRequest {
                prior: Value::Null,
                planned,
                config,
            },
        )
        .await;
    let err: Vec<String> = r.diagnostics.iter().map(|d| d.detail.clone()).collect();
    let err = err.join("\n");
    assert!(r.new_state.is_null());
    assert!(
        err.contains("not enough free nodes of NVIDIA-B200"),
        "{err}"
    );
    assert!(err.contains("are free") || err.contains("is free"), "{err}");
    assert_eq!(snapshot(&client, B200).await, before);
}

// =============================================================================================
// The real Terraform CLI

const PROVIDER: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}
provider "gpufleet" {}
"#;

/// A Terraform session against the shared lab, with the provider block prepended.
struct Tf(Session);

impl Tf {
    fn new(body: &str) -> Tf {
        Tf(Session::new(
            &format!("{PROVIDER}\n{body}"),
            Lab::shared().settings_env(),
        ))
    }

    fn write(&self, body: &str) {
        self.0.write(&format!("{PROVIDER}\n{body}"));
    }

    fn plan_exit(&self) -> i32 {
        self.0.plan().status_code
    }
}

impl std::ops::Deref for Tf {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

fn pool_tf(count: u32, extra: &str) -> String {
    format!(
        r#"
resource "gpufleet_gpu_node_pool" "p" {{
  name               = "life"
  virtual_cluster_id = "vc-gnp-life/gnp-life"
  gpu_product        = "{H100}"
  node_count         = {count}
  placement = {{ policy = "spread" }}
  drain_timeout      = "2m"
  node_labels        = {{ team = "vision" }}
  node_taints        = [{{ key = "example.com/maintenance", value = "weekly", effect = "PreferNoSchedule" }}]
  sharing = {{
    strategy = "time-slicing"
    replicas = 4
  }}
  {extra}
}}

data "gpufleet_fleet_inventory" "mine" {{
  holder     = "gnp-life.life"
  depends_on = [gpufleet_gpu_node_pool.p]
}}

output "allocatable" {{ value = gpufleet_gpu_node_pool.p.allocatable }}
output "held" {{ value = length(data.gpufleet_fleet_inventory.mine.nodes) }}
"#
    )
}

/// The lab's ClusterPolicy, and the pool's key of the device plugin ConfigMap in the
/// namespace the ClusterPolicy reports.
async fn device_plugin_wiring(
    client: &kube::Client,
    pool: &str,
) -> (serde_json::Value, Option<String>) {
    let gvk = kube::api::GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy");
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterpolicies");
    let policies: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    let policy = policies.get("cluster-policy").await.expect("ClusterPolicy");
    let policy = serde_json::to_value(&policy).expect("json");
    let namespace = policy["status"]["namespace"].as_str().unwrap_or_default();
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), namespace);
    let key = maps
        .get_opt("gpufleet-device-plugin-config")
        .await
        .expect("read ConfigMap")
        .and_then(|c| c.data?.get(pool).cloned());
    (policy, key)
}

fn mig_pool(kind: &dyn ResourceKind, vc: &str, mig_config: &str) -> Value {
    let mut c = pool_config(kind, "mig", vc, A100, 1);
    if let Some(m) = c.as_object_mut() {
        m.insert(
            "sharing".to_owned(),
            Value::object([
                ("strategy", Value::string("mig")),
                ("replicas", Value::Null),
                ("mig_config", Value::string(mig_config)),
            ]),
        );
    }
    c
}

fn label_of<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn capacity_of(n: &Node, resource: &str) -> Option<String> {
    n.status
        .as_ref()?
        .capacity
        .as_ref()?
        .get(resource)
        .map(|q| q.0.clone())
}

fn allocatable_of(state: &Value, resource: &str) -> Option<i64> {
    state.get("allocatable").as_map()?.get(resource)?.as_i64()
}

/// The A100 rack is the MIG tests' own; they take turns on it.
static A100_RACK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The lab's nodes play the MIG manager: apply returns once the state is `success`, counts by
/// the node's MIG strategy, and fails naming the node when the MIG manager fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mig_pool_waits_for_the_mig_manager_and_counts_by_strategy() {
    let _rack = A100_RACK.lock().await;
    let lab = Lab::shared();
    let client = lab.client();
    let vc = virtual_cluster(&client, "gnp-mig", "dedicated").await;
    let kind = GpuNodePool(Arc::new(KubeHost::new(client.clone())));
    let nodes: Api<Node> = Api::all(client.clone());

    let c = mig_pool(&kind, &vc, "all-balanced");
    let (state, err) = apply(&kind, &Value::Null, &c).await;
    assert!(err.is_empty(), "{err}");
    let held = nodes
        .list(&ListParams::default().labels("gpufleet.dev/pool=gnp-mig.mig"))
        .await
        .expect("list");
    assert_eq!(held.items.len(), 1);
    let name = held.items[0].metadata.name.clone().unwrap_or_default();
    let node = &held.items[0];
    assert_eq!(
        label_of(node, "nvidia.com/mig.config"),
        Some("all-balanced")
    );
    assert_eq!(
        label_of(node, "nvidia.com/mig.config.state"),
        Some("success")
    );
    // `mixed` (no strategy label): one resource per profile, on the node and in state.
    assert_eq!(
        capacity_of(node, "nvidia.com/mig-1g.10gb").as_deref(),
        Some("16")
    );
    assert_eq!(allocatable_of(&state, "nvidia.com/mig-1g.10gb"), Some(16));
    assert_eq!(allocatable_of(&state, "nvidia.com/mig-2g.20gb"), Some(8));
    assert_eq!(allocatable_of(&state, "nvidia.com/mig-3g.40gb"), Some(8));

    // `single`: instances are whole `nvidia.com/gpu`.
    let patch = |v: serde_json::Value| Patch::Merge(v);
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &patch(
                serde_json::json!({"metadata": {"labels": {"nvidia.com/mig.strategy": "single"}}}),
            ),
        )
        .await
        .expect("strategy label");
    let (state, err) = apply(&kind, &state, &mig_pool(&kind, &vc, "all-3g.40gb")).await;
    assert!(err.is_empty(), "{err}");
    assert_eq!(allocatable_of(&state, "nvidia.com/gpu"), Some(16));
    let node = nodes.get(&name).await.expect("node");
    assert_eq!(capacity_of(&node, "nvidia.com/gpu").as_deref(), Some("16"));

    // A fault: the MIG manager fails, and the apply names the node and the state.
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &patch(serde_json::json!({"metadata": {
                "labels": {"nvidia.com/mig.strategy": null},
                "annotations": {"gpufleet.dev/lab-mig-fault": "fail"},
            }})),
        )
        .await
        .expect("fault");
    let (state, err) = apply(&kind, &state, &mig_pool(&kind, &vc, "all-1g.10gb")).await;
    assert!(err.contains(&name), "{err}");
    assert!(err.contains("nvidia.com/mig.config.state=failed"), "{err}");
    let r = kind.read(&Context::default(), state.clone()).await;
    assert_eq!(r.new_state.get("status"), &Value::string("degraded"));

    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &patch(serde_json::json!({"metadata": {"annotations": {"gpufleet.dev/lab-mig-fault": null}}})),
        )
        .await
        .expect("heal");
    let (gone, err) = apply(&kind, &state, &Value::Null).await;
    assert!(err.is_empty(), "{err}");
    assert!(gone.is_null());
    // Released only once the MIG manager turned MIG off: whole GPUs again, free.
    let node = nodes.get(&name).await.expect("node");
    assert_eq!(
        label_of(&node, "nvidia.com/mig.config"),
        Some("all-disabled")
    );
    assert_eq!(
        label_of(&node, "nvidia.com/mig.config.state"),
        Some("success")
    );
    assert_eq!(capacity_of(&node, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(capacity_of(&node, "nvidia.com/mig-1g.10gb"), None);
    assert_eq!(label_of(&node, "gpufleet.dev/pool"), None);
}

/// Every A100 node of the lab's fleet (one rack of 16): a pool of them all is pinned to
/// whichever node a MIG pool had.
const A100_NODES: u32 = 16;

/// A MIG pool destroyed with the real CLI, then a whole-GPU pool on the same node: the node
/// went back to `all-disabled` before it was free, so the new pool gets whole GPUs, not the
/// partitions the MIG pool left.
#[test]
fn terraform_a_node_a_mig_pool_let_go_comes_back_with_whole_gpus() {
    let _rack = A100_RACK.blocking_lock();
    let lab = Lab::shared();
    let (rt, client) = lab_tenant(lab, "gnp-migrel", "dedicated");
    let nodes: Api<Node> = Api::all(client.clone());
    let mig = format!(
        r#"
resource "gpufleet_gpu_node_pool" "mig" {{
  name               = "mig"
  virtual_cluster_id = "vc-gnp-migrel/gnp-migrel"
  gpu_product        = "{A100}"
  node_count         = 1
  sharing            = {{ strategy = "mig", mig_config = "all-1g.10gb" }}
}}

output "nodes" {{ value = gpufleet_gpu_node_pool.mig.nodes }}
output "allocatable" {{ value = gpufleet_gpu_node_pool.mig.allocatable }}
"#
    );
    let tf = Tf::new(&mig);
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    let out = tf.ok(&["output", "-json"]).json();
    assert_eq!(out["allocatable"]["value"]["nvidia.com/mig-1g.10gb"], 56);
    let name = out["nodes"]["value"][0]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!name.is_empty(), "{out}");

    // The MIG pool goes.
    tf.write("");
    tf.apply();
    let node = rt.block_on(nodes.get(&name)).expect("node");
    assert_eq!(label_of(&node, "gpufleet.dev/pool"), None, "free again");
    assert_eq!(
        label_of(&node, "nvidia.com/mig.config"),
        Some("all-disabled")
    );
    assert_eq!(
        label_of(&node, "nvidia.com/mig.config.state"),
        Some("success")
    );

    // A whole-GPU pool of every A100 node gets that one too, with whole GPUs.
    tf.write(&format!(
        r#"
resource "gpufleet_gpu_node_pool" "whole" {{
  name               = "whole"
  virtual_cluster_id = "vc-gnp-migrel/gnp-migrel"
  gpu_product        = "{A100}"
  node_count         = {A100_NODES}
}}

output "nodes" {{ value = gpufleet_gpu_node_pool.whole.nodes }}
output "allocatable" {{ value = gpufleet_gpu_node_pool.whole.allocatable }}
"#
    ));
    tf.apply();
    let out = tf.ok(&["output", "-json"]).json();
    let held: Vec<&str> = out["nodes"]["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(held.contains(&name.as_str()), "{out}");
    let allocatable = &out["allocatable"]["value"];
    assert_eq!(allocatable["nvidia.com/gpu"], 8 * A100_NODES, "{out}");
    assert!(
        allocatable
            .as_object()
            .is_some_and(|m| m.keys().all(|k| !k.starts_with("nvidia.com/mig-"))),
        "no MIG resources: {out}"
    );
    let node = rt.block_on(nodes.get(&name)).expect("node");
    assert_eq!(capacity_of(&node, "nvidia.com/gpu").as_deref(), Some("8"));
    assert_eq!(capacity_of(&node, "nvidia.com/mig-1g.10gb"), None);
    tf.destroy();
}

#[test]
fn terraform_life_cycle_drift_import_and_destroy() {
    let lab = Lab::shared();
    let (rt, client) = lab_tenant(lab, "gnp-life", "dedicated");
    let before = rt.block_on(snapshot(&client, H100));

    let tf = Tf::new(&pool_tf(1, ""));
    tf.apply();
    assert_eq!(tf.plan_exit(), 0, "no changes after create");
    let out = tf.ok(&["output", "-json"]).json();
    assert_eq!(out["allocatable"]["value"]["nvidia.com/gpu"], 32);
    assert_eq!(out["held"]["value"], 1);
    // The config is in the namespace the GPU Operator's ClusterPolicy reports, and the
    // ClusterPolicy points the device plugin at it.
    let (policy, key) = rt.block_on(device_plugin_wiring(&client, "gnp-life.life"));
    assert_eq!(
        policy["spec"]["devicePlugin"]["config"]["name"], "gpufleet-device-plugin-config",
        "{policy}"
    );
    assert!(
        key.as_deref().is_some_and(|c| c.contains("replicas: 4")),
        "{key:?}"
    );

    // Scale up, spread over racks.
    tf.write(&pool_tf(2, ""));
    tf.apply();
    assert_eq!(tf.plan_exit(), 0);

    // Drift: the tenant taint removed out of band is seen and repaired.
    let nodes: Api<Node> = Api::all(client.clone());
    let held = rt
        .block_on(nodes.list(&ListParams::default().labels("gpufleet.dev/pool=gnp-life.life")))
        .expect("list");
    assert_eq!(held.items.len(), 2);
    let victim = held.items[0].metadata.name.clone().unwrap_or_default();
    rt.block_on(nodes.patch(
        &victim,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"taints": null}})),
    ))
    .expect("drift");
    assert_eq!(tf.plan_exit(), 2, "drift shows as a change");
    tf.apply();
    assert_eq!(tf.plan_exit(), 0, "repaired");
    let repaired = rt.block_on(nodes.get(&victim)).expect("node");
    assert!(
        repaired
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "gpufleet.dev/tenant")
    );

    // Import into a fresh state.
    tf.ok(&["state", "rm", "gpufleet_gpu_node_pool.p"]);
    tf.ok(&[
        "import",
        "-no-color",
        "gpufleet_gpu_node_pool.p",
        "vc-gnp-life/gnp-life/life",
    ]);
    // Import recovers the whole configuration: node_labels and node_taints from what the
    // pool recorded setting on its nodes, placement and drain_timeout from the settings it
    // wrote beside them. The plan after import is empty.
    let held_before = rt
        .block_on(nodes.list(&ListParams::default().labels("gpufleet.dev/pool=gnp-life.life")))
        .expect("list")
        .items
        .len();
    let plan = tf.plan();
    assert_eq!(plan.status_code, 0, "import round-trips:\n{plan}");
    tf.apply();
    assert_eq!(tf.plan_exit(), 0, "import, apply, then plan is empty");
    let held_after = rt
        .block_on(nodes.list(&ListParams::default().labels("gpufleet.dev/pool=gnp-life.life")))
        .expect("list")
        .items
        .len();
    assert_eq!(held_before, held_after);

    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    assert_eq!(
        rt.block_on(snapshot(&client, H100)),
        before,
        "every node as found"
    );
}

fn drain_action(extra: &str) -> String {
    format!(
        r#"
resource "gpufleet_gpu_node_pool" "p" {{
  name               = "maint"
  virtual_cluster_id = "vc-gnp-drain/gnp-drain"
  gpu_product        = "{L40S}"
  node_count         = 1
}}

action "gpufleet_gpu_node_pool_drain" "d" {{
  config {{
    node_pool_id = gpufleet_gpu_node_pool.p.id
    {extra}
  }}
}}
"#
    )
}

/// Whether node `name` is cordoned, and whether it carries the cordon's taint.
fn cordon_of(rt: &tokio::runtime::Runtime, nodes: &Api<Node>, name: &str) -> (bool, bool) {
    let spec = rt
        .block_on(nodes.get(name))
        .expect("node")
        .spec
        .unwrap_or_default();
    let tainted = spec
        .taints
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == "node.kubernetes.io/unschedulable");
    (spec.unschedulable.unwrap_or(false), tainted)
}

/// The drain action: a budget that allows no disruption holds a tenant's pod, and the
/// action fails within its timeout naming the pod, the node left cordoned; once the budget
/// goes, the pod is evicted; `uncordon` gives the node back. The pool plans no change
/// throughout, a node outside the pool is refused at plan, and destroy leaves every node as
/// found.
#[test]
fn terraform_drain_action_honours_a_budget_and_uncordon_gives_the_node_back() {
    let lab = Lab::shared();
    let (rt, client) = lab_tenant(lab, "gnp-drain", "dedicated");
    let before = rt.block_on(snapshot(&client, L40S));
    let invoke = [
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-invoke=action.gpufleet_gpu_node_pool_drain.d",
    ];

    let tf = Tf::new(&drain_action(""));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    let node = tf.resource("gpufleet_gpu_node_pool.p")["nodes"][0]
        .as_str()
        .expect("the pool's node")
        .to_owned();

    // A tenant's pod on the node, which its budget lets nobody disrupt.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "vc-gnp-drain");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "vc-gnp-drain");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "trainer", "labels": { "app": "trainer" } },
        "spec": {
            "nodeName": node,
            "tolerations": [{ "operator": "Exists" }],
            "containers": [{ "name": "train", "image": "registry.example.com/train:1" }],
        },
    }))
    .expect("pod");
    rt.block_on(pods.create(&Default::default(), &pod))
        .expect("create the pod");
    let budget: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "trainer" },
        "spec": { "maxUnavailable": 0, "selector": { "matchLabels": { "app": "trainer" } } },
    }))
    .expect("budget");
    rt.block_on(budgets.create(&Default::default(), &budget))
        .expect("create the budget");
    // The Eviction API lets a pending pod go whatever its budget says: wait until it runs.
    let started = Instant::now();
    while rt
        .block_on(pods.get("trainer"))
        .ok()
        .and_then(|p| p.status)
        .and_then(|s| s.phase)
        .as_deref()
        != Some("Running")
    {
        assert!(started.elapsed().as_secs() < 60, "the pod never ran");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    tf.write(&drain_action(r#"timeout = "6s""#));
    let held = tf.run(&invoke);
    assert!(!held.success(), "{held}");
    assert!(
        held.contains("vc-gnp-drain/trainer") && held.contains("PodDisruptionBudgets refused"),
        "names the pod and the budget:\n{held}"
    );
    assert!(held.contains(&format!("cordoned {node}")), "{held}");
    assert!(
        cordon_of(&rt, &Api::all(client.clone()), &node).0,
        "left cordoned"
    );
    assert!(rt.block_on(pods.get_opt("trainer")).expect("get").is_some());
    assert_eq!(tf.plan_exit(), 0, "a drain is no change to the pool");

    rt.block_on(budgets.delete("trainer", &DeleteParams::default()))
        .expect("delete the budget");
    tf.write(&drain_action(r#"timeout = "2m""#));
    let drained = tf.ok(&invoke);
    assert!(drained.contains("drained 1 node(s)"), "{drained}");
    assert!(
        rt.block_on(pods.get_opt("trainer")).expect("get").is_none(),
        "the pod was evicted"
    );

    tf.write(&drain_action(r#"operation = "uncordon""#));
    let back = tf.ok(&invoke);
    assert!(
        back.contains(&format!("node {node} is schedulable")),
        "{back}"
    );
    assert_eq!(
        cordon_of(&rt, &Api::all(client.clone()), &node),
        (false, false)
    );
    assert_eq!(tf.plan_exit(), 0);

    // Another tenant's node, or any node the pool does not hold, is refused at plan.
    tf.write(&drain_action(r#"nodes = ["gpu-not-in-this-pool"]"#));
    let foreign = tf.run(&invoke);
    assert!(!foreign.success(), "{foreign}");
    assert!(
        foreign.contains("Node Not In Pool") && foreign.contains("gpu-not-in-this-pool"),
        "{foreign}"
    );

    tf.write(&drain_action(""));
    tf.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    assert_eq!(
        rt.block_on(snapshot(&client, L40S)),
        before,
        "every node as found"
    );
}

#[test]
fn terraform_refuses_bad_input_at_plan_on_its_attribute() {
    let lab = Lab::shared();
    let _namespace = lab_tenant(lab, "gnp-priv", "private");
    let cases = [
        (
            r#"gpu_product = "NVIDIA-A100-SXM4-80GB"
  node_count = 1
  sharing = { strategy = "mig", mig_config = "all-1g.5gb" }"#,
            "mig_config",
        ),
        (
            r#"gpu_product = "NVIDIA-L40S"
  node_count = 1
  sharing = { strategy = "time-slicing", replicas = 0 }"#,
            "replicas",
        ),
        (
            r#"gpu_product = "RTX-9090"
  node_count = 1"#,
            "gpu_product",
        ),
        (
            r#"gpu_product = "NVIDIA-L40S"
  node_count = 1
  source = "auto"
  autoscaling = { min_nodes = 0, max_nodes = 2 }"#,
            "autoscaling",
        ),
        (
            r#"gpu_product = "NVIDIA-L40S"
  node_count = 1"#,
            "source",
        ),
        (
            // The default node class is AWS's, which has no A30 instances.
            r#"gpu_product = "NVIDIA-A30"
  source = "auto"
  autoscaling = { min_nodes = 0, max_nodes = 2 }"#,
            "gpu_product",
        ),
        (
            r#"gpu_product = "NVIDIA-L40S"
  source = "auto"
  autoscaling = { min_nodes = 0, max_nodes = 2 }
  karpenter = {
    requirements = [{ key = "karpenter.k8s.aws/instance-gpu-count", operator = "In", values = ["2"] }]
  }"#,
            "karpenter.k8s.aws/instance-gpu-count",
        ),
    ];
    for (body, attr) in cases {
        let tf = Tf::new(&format!(
            "resource \"gpufleet_gpu_node_pool\" \"bad\" {{\n  name = \"bad\"\n  virtual_cluster_id = \"vc-gnp-priv/gnp-priv\"\n  {body}\n}}\n"
        ));
        let out = tf.run(&["plan", "-input=false", "-no-color"]);
        assert!(!out.success(), "plan should fail for {attr}:\n{out}");
        assert!(out.contains(attr), "the error names {attr}:\n{out}");
    }
}

/// The provider block of the auto-pool test: one product the catalog lacks.
const DECLARING_PROVIDER: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}
provider "gpufleet" {
  gpu_product {
    name          = "NVIDIA-Acceptance-G100"
    aliases       = ["G100"]
    memory_mib    = 97871
    gpus_per_node = 4
  }
}
"#;

#[test]
fn terraform_auto_pools_constrain_karpenter_and_accept_declared_products() {
    let lab = Lab::shared();
    let (rt, client) = lab_tenant(lab, "gnp-auto", "private");
    let body = r#"
resource "gpufleet_gpu_node_pool" "h100" {
  name               = "h100"
  virtual_cluster_id = "vc-gnp-auto/gnp-auto"
  gpu_product        = "NVIDIA-H100-80GB-HBM3"
  source             = "auto"
  autoscaling        = { min_nodes = 0, max_nodes = 2 }
  karpenter = {
    requirements = [{ key = "karpenter.sh/capacity-type", operator = "In", values = ["on-demand"] }]
  }
}

resource "gpufleet_gpu_node_pool" "g100" {
  name               = "g100"
  virtual_cluster_id = "vc-gnp-auto/gnp-auto"
  gpu_product        = "G100"
  source             = "auto"
  node_count         = 2
  karpenter = {
    provider     = "generic"
    requirements = [{ key = "node.kubernetes.io/instance-type", operator = "In", values = ["g100.4x"] }]
  }
}

data "gpufleet_gpu_catalog" "g100" {
  product = "g100"
}

output "g100_gpus_per_node" {
  value = data.gpufleet_gpu_catalog.g100.gpu.gpus_per_node
}
"#;
    let tf = Session::new(&format!("{DECLARING_PROVIDER}\n{body}"), lab.settings_env());
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    assert_eq!(tf.plan().status_code, 0, "no changes after create");
    let out = tf.ok(&["output", "-json"]).json();
    assert_eq!(out["g100_gpus_per_node"]["value"], 4);

    // The API server stored both NodePools through the Karpenter CRD's validation.
    let pools: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "karpenter.sh".into(),
            version: "v1".into(),
            api_version: "karpenter.sh/v1".into(),
            kind: "NodePool".into(),
            plural: "nodepools".into(),
        },
    );
    let get = |name: &str| {
        rt.block_on(pools.get(name))
            .unwrap_or_else(|e| panic!("NodePool {name}: {e}"))
            .data
    };
    let values = |np: &serde_json::Value, key: &str| {
        np["spec"]["template"]["spec"]["requirements"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["key"] == key))
            .map(|r| r["values"].clone())
    };
    let h100 = get("gpufleet-gnp-auto-h100");
    assert_eq!(
        values(&h100, "karpenter.k8s.aws/instance-gpu-name"),
        Some(serde_json::json!(["h100"]))
    );
    assert_eq!(
        values(&h100, "karpenter.k8s.aws/instance-gpu-count"),
        Some(serde_json::json!(["8"]))
    );
    assert_eq!(
        values(&h100, "karpenter.sh/capacity-type"),
        Some(serde_json::json!(["on-demand"]))
    );
    assert_eq!(h100["spec"]["limits"]["nvidia.com/gpu"], "16");
    let g100 = get("gpufleet-gnp-auto-g100");
    assert_eq!(
        values(&g100, "nvidia.com/gpu.product"),
        Some(serde_json::json!(["NVIDIA-Acceptance-G100"]))
    );
    assert_eq!(g100["spec"]["limits"]["nvidia.com/gpu"], "8");

    tf.destroy();
    assert!(
        rt.block_on(pools.get_opt("gpufleet-gnp-auto-h100"))
            .expect("get")
            .is_none()
    );
    assert!(
        rt.block_on(pools.get_opt("gpufleet-gnp-auto-g100"))
            .expect("get")
            .is_none()
    );
}

/// A fleet laid out as production GPU clusters are labelled: 36 GB200 trays in one rack (two
/// NVL72 domains, so two `nvidia.com/gpu.clique` values), and H100 servers in two racks of
/// their own (topograph's block label) in one zone.
const TOPOLOGY_FLEET: &str = r#"
name = "topology"

[[site]]
name = "site-t"
zone = "zone-t"

[[site.rack]]
name = "nvl"
[[site.rack.nodes]]
product = "NVIDIA-GB200"
count = 36
gpus_per_node = 4
cpu = "144"
memory = "960Gi"

[[site.rack]]
name = "h1"
[[site.rack.nodes]]
product = "NVIDIA-H100-80GB-HBM3"
count = 2
gpus_per_node = 8
cpu = "224"
memory = "2Ti"

[[site.rack]]
name = "h2"
[[site.rack.nodes]]
product = "NVIDIA-H100-80GB-HBM3"
count = 2
gpus_per_node = 8
cpu = "224"
memory = "2Ti"
"#;

/// Stops a lab of the test's own when the test ends, however it ends.
struct OwnLab(std::path::PathBuf);

impl Drop for OwnLab {
    fn drop(&mut self) {
        if let Err(e) = Lab::down(&self.0) {
            eprintln!("could not stop the lab in {}: {e}", self.0.display());
        }
    }
}

/// The values of `key` on the nodes a pool holds.
async fn label_values(nodes: &Api<Node>, pool: &str, key: &str) -> Vec<String> {
    let held = nodes
        .list(&ListParams::default().labels(&format!("gpufleet.dev/pool={pool}")))
        .await
        .expect("list held nodes");
    let mut values: Vec<String> = held
        .items
        .iter()
        .map(|n| label_of(n, key).unwrap_or("<missing>").to_owned())
        .collect();
    values.sort();
    values
}

fn placed(
    kind: &dyn ResourceKind,
    vc: &str,
    name: &str,
    product: &str,
    n: i64,
    placement: Value,
) -> Value {
    let mut c = pool_config(kind, name, vc, product, n);
    if let Some(m) = c.as_object_mut() {
        m.insert("placement".to_owned(), placement);
    }
    c
}

fn placement(policy: &str, key: Option<&str>) -> Value {
    Value::object([
        ("policy", Value::string(policy)),
        ("topology_key", key.map_or(Value::Null, Value::string)),
    ])
}

/// Left unset, the topology key is the real label the candidates carry: GFD's NVLink clique on
/// NVL72 trays, topograph's block on HGX servers. Pack and spread place by it, and a key the
/// nodes lack fails the apply and claims nothing. On a lab of its own, whose nodes carry the
/// labels production nodes do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_follows_the_nvlink_clique_and_the_rack_block_of_real_labels() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = gpufleet_lab::LabOptions::new(dir.path().join("lab"));
    options.fleet = Some(gpufleet_lab::fleet::FleetSpec::from_toml(TOPOLOGY_FLEET).expect("fleet"));
    let lab = Lab::up(options).await.expect("lab up");
    let _down = OwnLab(lab.dir().to_path_buf());
    let client = lab.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let vc = virtual_cluster(&client, "topo", "dedicated").await;
    let kind = GpuNodePool(Arc::new(KubeHost::new(client.clone())));
    const GB200: &str = "NVIDIA-GB200";
    const CLIQUE: &str = "nvidia.com/gpu.clique";
    const BLOCK: &str = "network.topology.nvidia.com/block";

    // Pack: four trays in one NVLink domain.
    let packed = pool_config(&kind, "packed", &vc, GB200, 4);
    let (packed_state, err) = apply(&kind, &Value::Null, &packed).await;
    assert!(err.is_empty(), "{err}");
    let cliques = label_values(&nodes, "topo.packed", CLIQUE).await;
    assert_eq!(cliques.len(), 4);
    assert!(
        cliques.iter().all(|c| c == &cliques[0] && c != "<missing>"),
        "{cliques:?}"
    );

    // Spread: two trays in two NVLink domains, though the whole rack is one block.
    let spread = placed(&kind, &vc, "spread", GB200, 2, placement("spread", None));
    let (spread_state, err) = apply(&kind, &Value::Null, &spread).await;
    assert!(err.is_empty(), "{err}");
    let cliques = label_values(&nodes, "topo.spread", CLIQUE).await;
    assert_eq!(cliques.len(), 2);
    assert_ne!(cliques[0], cliques[1], "one tray per NVLink domain");

    // HGX servers have no clique: spread goes by topograph's block, one server per rack.
    let racks = placed(&kind, &vc, "racks", H100, 2, placement("spread", None));
    let (racks_state, err) = apply(&kind, &Value::Null, &racks).await;
    assert!(err.is_empty(), "{err}");
    assert_eq!(
        label_values(&nodes, "topo.racks", BLOCK).await,
        ["h1", "h2"]
    );

    // A key no candidate carries is an error naming it, and nothing is claimed.
    let missing = placed(
        &kind,
        &vc,
        "missing",
        H100,
        1,
        placement("pack", Some("example.com/rack")),
    );
    let (missing_state, err) = apply(&kind, &Value::Null, &missing).await;
    assert!(err.contains("example.com/rack is missing on"), "{err}");
    assert!(missing_state.is_null());
    assert!(label_values(&nodes, "topo.missing", BLOCK).await.is_empty());

    for state in [packed_state, spread_state, racks_state] {
        let (gone, err) = apply(&kind, &state, &Value::Null).await;
        assert!(err.is_empty(), "{err}");
        assert!(gone.is_null());
    }
}
