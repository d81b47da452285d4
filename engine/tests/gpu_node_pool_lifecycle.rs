//! `gpufleet_gpu_node_pool` through whole Terraform runs against the in-memory host cluster:
//! create per tier and sharing mode, no-op re-plans, scale up and down, drift repair,
//! over-asking, import, auto pools and destroy. Every plan, apply and refresh is checked
//! against Terraform's consistency rules by the harness.

#[path = "support/network_segment.rs"]
mod support;

use std::{collections::BTreeMap, sync::Arc};

use gpufleet_engine::backends::kube::host::memory::MemoryHost;
use gpufleet_engine::{
    backends::kube::{
        POOL, TENANT,
        host::nodes::{HostNode, NodeWrite},
    },
    context::Context,
    gpu_products::Declared,
    kinds::{ListKind, ListRequest, ResourceKind},
    provider_config::ProviderSettings,
    resources::gpu_node_pool::{DEVICE_PLUGIN_CONFIG_MAP, GpuNodePool, list::GpuNodePoolList},
    value::Value,
};
use support::{Action, Terraform, config, show, sweep};

const H100: &str = "NVIDIA-H100-80GB-HBM3";

/// A cluster with 4 H100 nodes in each of racks r1 and r2, and three virtual clusters.
fn host() -> Arc<MemoryHost> {
    let h = MemoryHost::with_nodes(H100, &[("r1", 4), ("r2", 4)]);
    for (ns, vc, tier) in [
        ("vc-a", "a", "dedicated"),
        ("vc-s", "s", "shared"),
        ("vc-p", "p", "private"),
    ] {
        h.add_namespace(
            ns,
            &[
                ("app.kubernetes.io/managed-by", "gpufleet"),
                ("gpufleet.dev/virtual-cluster", vc),
                ("gpufleet.dev/isolation", tier),
            ],
        );
    }
    h
}

fn pool(kind: &dyn ResourceKind, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![
        ("name", Value::string("train")),
        ("virtual_cluster_id", Value::string("vc-a/a")),
        ("gpu_product", Value::string(H100)),
        ("node_count", Value::int(2)),
    ];
    for (k, v) in extra {
        attrs.retain(|(a, _)| a != k);
        attrs.push((k, v.clone()));
    }
    config(kind, &attrs)
}

fn sharing(strategy: &str, replicas: Option<i64>, mig: Option<&str>) -> Value {
    Value::object([
        ("strategy", Value::string(strategy)),
        ("replicas", replicas.map(Value::int).into()),
        ("mig_config", mig.map(Value::string).into()),
    ])
}

fn karpenter(provider: Option<&str>, gpus_per_node: Option<i64>, reqs: Vec<Value>) -> Value {
    Value::object([
        ("provider", provider.map(Value::string).into()),
        ("gpus_per_node", gpus_per_node.map(Value::int).into()),
        (
            "requirements",
            if reqs.is_empty() {
                Value::Null
            } else {
                Value::List(reqs)
            },
        ),
    ])
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> Value {
    Value::object([
        ("key", Value::string(key)),
        ("operator", Value::string(operator)),
        (
            "values",
            Value::List(values.iter().map(|v| Value::string(*v)).collect()),
        ),
        ("min_values", Value::Null),
    ])
}

/// The values of the NodePool's requirement on `key`.
fn required(np: &serde_json::Value, key: &str) -> Option<serde_json::Value> {
    np["spec"]["template"]["spec"]["requirements"]
        .as_array()?
        .iter()
        .find(|r| r["key"] == key)
        .map(|r| r["values"].clone())
}

/// A context whose provider block declares `gpu_product` blocks.
fn declaring(products: Vec<Value>) -> Context {
    let settings = ProviderSettings {
        gpu_products: Declared::from_config(&Value::List(products)),
        ..Default::default()
    };
    Context {
        settings: Arc::new(settings),
        ..Default::default()
    }
}

fn declared_product(name: &str, gpus_per_node: Option<i64>) -> Value {
    Value::object([
        ("name", Value::string(name)),
        ("aliases", Value::Null),
        ("display_name", Value::Null),
        ("architecture", Value::string("hopper")),
        ("memory_mib", Value::int(97_871)),
        ("gpus_per_node", gpus_per_node.map(Value::int).into()),
        ("nvlink_domain_size", Value::Null),
        ("mig_profiles", Value::Null),
    ])
}

fn snapshot(h: &MemoryHost) -> BTreeMap<String, NodeWrite> {
    h.nodes_now()
        .iter()
        .map(|n| (n.name.clone(), NodeWrite::of(n)))
        .collect()
}

fn held(h: &MemoryHost, pool: &str) -> Vec<HostNode> {
    h.nodes_now()
        .into_iter()
        .filter(|n| n.label(POOL) == Some(pool))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn dedicated_pool_is_labelled_tainted_and_destroy_leaves_nodes_as_found() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    assert_eq!(tf.state.get("id"), &Value::string("vc-a/a/train"));
    assert_eq!(tf.state.get("gpus"), &Value::int(16));
    assert_eq!(tf.state.get("status"), &Value::string("ready"));
    let nodes = held(&h, "a.train");
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        assert_eq!(n.label(TENANT), Some("a"));
        assert_eq!(n.label("gpufleet.dev/isolation"), Some("dedicated"));
        assert!(
            n.taints
                .iter()
                .any(|t| t.key == TENANT && t.effect == "NoSchedule")
        );
        // Packed: one rack.
        assert_eq!(
            n.label("gpufleet.dev/rack"),
            nodes[0].label("gpufleet.dev/rack")
        );
    }
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert!(!tf.destroy().await.has_error());
    assert_eq!(snapshot(&h), before, "every node as it was before the pool");
}

#[tokio::test(start_paused = true)]
async fn shared_pool_gets_labels_but_no_taint() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(
        &k,
        &[("virtual_cluster_id", Value::string("vc-s/s"))],
    ))
    .await;
    for n in held(&h, "s.train") {
        assert_eq!(n.label("gpufleet.dev/isolation"), Some("shared"));
        assert_eq!(n.label(TENANT), None);
        assert!(n.taints.is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn time_slicing_reports_replicas_and_writes_its_own_config_key() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(
        &k,
        &[
            ("node_count", Value::int(1)),
            ("sharing", sharing("time-slicing", Some(4), None)),
        ],
    );
    tf.apply_ok(&c).await;
    let alloc = tf.state.get("allocatable");
    assert_eq!(
        alloc.get("nvidia.com/gpu"),
        &Value::Null,
        "a map, not an object"
    );
    assert_eq!(
        alloc.as_map().and_then(|m| m.get("nvidia.com/gpu")),
        Some(&Value::int(32))
    );
    let n = &held(&h, "a.train")[0];
    assert_eq!(n.label("nvidia.com/device-plugin.config"), Some("a.train"));
    let cm = h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP);
    assert!(cm["a.train"].contains("replicas: 4"), "{cm:?}");
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    // A second pool's key sits beside the first one's.
    let mut tf2 = Terraform::new(&k);
    let c2 = pool(
        &k,
        &[
            ("name", Value::string("infer")),
            ("node_count", Value::int(1)),
            ("sharing", sharing("time-slicing", Some(2), None)),
        ],
    );
    tf2.apply_ok(&c2).await;
    let cm = h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP);
    assert_eq!(cm.len(), 2);

    assert!(!tf.destroy().await.has_error());
    assert!(!tf2.destroy().await.has_error());
    assert!(
        h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );
    assert_eq!(snapshot(&h), before);
}

/// The MIG manager on the in-memory nodes: a node with `nvidia.com/mig.config` and no state
/// goes `pending`, and one pass later `success`, or `failed` when its name is in `fail`.
fn play_mig_manager(h: &Arc<MemoryHost>, fail: &[&str]) -> tokio::task::JoinHandle<()> {
    let h = Arc::clone(h);
    let fail: Vec<String> = fail.iter().map(|s| (*s).to_owned()).collect();
    tokio::spawn(async move {
        loop {
            for n in h.nodes_now() {
                if n.label(MIG_CONFIG).is_none() {
                    continue;
                }
                let next = match n.label(MIG_STATE) {
                    None => "pending",
                    Some("pending") if fail.contains(&n.name) => "failed",
                    Some("pending") => "success",
                    Some(_) => continue,
                };
                h.edit_node(&n.name, |n| {
                    n.labels.insert(MIG_STATE.to_owned(), next.to_owned());
                });
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    })
}

const MIG_CONFIG: &str = "nvidia.com/mig.config";
const MIG_STATE: &str = "nvidia.com/mig.config.state";

#[tokio::test(start_paused = true)]
async fn mig_pool_waits_for_the_mig_manager_then_reports_instances() {
    let h = host();
    let manager = play_mig_manager(&h, &[]);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(
        &k,
        &[
            ("node_count", Value::int(1)),
            ("sharing", sharing("mig", None, Some("all-1g.10gb"))),
        ],
    ))
    .await;
    let n = &held(&h, "a.train")[0];
    assert_eq!(n.label("nvidia.com/mig.config"), Some("all-1g.10gb"));
    // Apply returned only once the MIG manager was done.
    assert_eq!(n.label(MIG_STATE), Some("success"));
    assert_eq!(
        tf.state
            .get("allocatable")
            .as_map()
            .and_then(|m| m.get("nvidia.com/mig-1g.10gb")),
        Some(&Value::int(8 * 7))
    );
    manager.abort();
}

#[tokio::test(start_paused = true)]
async fn mig_pool_without_a_mig_manager_times_out_naming_the_nodes() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let (_, d) = tf
        .apply(&pool(
            &k,
            &[
                ("node_count", Value::int(1)),
                ("sharing", sharing("mig", None, Some("all-1g.10gb"))),
            ],
        ))
        .await;
    let text = show(&d);
    assert!(d.has_error(), "{text}");
    assert!(text.contains("waiting for the MIG manager"), "{text}");
    assert!(text.contains("gpu-r"), "{text}");
    // The claimed node is recorded, so destroy gives it back.
    assert_eq!(
        tf.state
            .get("nodes")
            .as_seq()
            .map(<[gpufleet_engine::value::Value]>::len),
        Some(1)
    );
}

#[tokio::test(start_paused = true)]
async fn mig_pool_fails_with_the_mig_managers_state_and_read_reports_it() {
    let h = host();
    let fail = ["gpu-r1-01", "gpu-r1-03", "gpu-r2-01", "gpu-r2-03"];
    let manager = play_mig_manager(&h, &fail);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(
        &k,
        &[("sharing", sharing("mig", None, Some("all-balanced")))],
    );
    let (_, d) = tf.apply(&c).await;
    let text = show(&d);
    assert!(d.has_error(), "{text}");
    let nodes = held(&h, "a.train");
    assert_eq!(nodes.len(), 2, "the nodes stay held");
    let (failed, fine): (Vec<&HostNode>, Vec<&HostNode>) =
        nodes.iter().partition(|n| fail.contains(&n.name.as_str()));
    assert!(!failed.is_empty() && !fine.is_empty(), "{nodes:?}");
    assert!(
        text.contains("nvidia.com/mig.config.state=failed"),
        "{text}"
    );
    for n in &failed {
        assert!(text.contains(&n.name), "{} is named: {text}", n.name);
    }
    for n in &fine {
        assert!(!text.contains(&n.name), "{} is not named: {text}", n.name);
    }
    // A refresh reports it too: a warning, and the failed nodes do not count.
    let (s, d) = support::refresh(&k, &tf.ctx, &tf.state).await;
    let text = show(&d);
    assert!(!d.has_error(), "{text}");
    assert!(
        text.contains("Warning") && text.contains(&failed[0].name),
        "{text}"
    );
    assert_eq!(s.get("status"), &Value::string("degraded"));
    assert_eq!(
        s.get("node_count"),
        &Value::int(i64::try_from(fine.len()).unwrap_or(0))
    );
    // Once the MIG manager succeeds, the next apply is clean.
    manager.abort();
    let manager = play_mig_manager(&h, &[]);
    tf.apply_ok(&c).await;
    assert_eq!(tf.state.get("status"), &Value::string("ready"));
    assert_eq!(
        allocatable(&tf.state, "nvidia.com/mig-1g.10gb"),
        Some(Value::int(2 * 8 * 2))
    );
    assert_eq!(
        allocatable(&tf.state, "nvidia.com/mig-3g.40gb"),
        Some(Value::int(2 * 8))
    );
    manager.abort();
}

/// Letting MIG nodes go hands them to the MIG manager with the fleet's default config, and
/// frees them only on `success`: scale-in frees a node with MIG off; a destroy whose MIG
/// manager fails leaves the node held, cordoned and marked releasing, names it, and a destroy
/// re-run once the MIG manager recovers finishes without a duplicate or an orphan.
#[tokio::test(start_paused = true)]
async fn mig_nodes_are_free_only_once_the_mig_manager_applied_the_default() {
    let h = host();
    let manager = play_mig_manager(&h, &[]);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let mig = |n: i64| {
        pool(
            &k,
            &[
                ("node_count", Value::int(n)),
                ("sharing", sharing("mig", None, Some("all-1g.10gb"))),
            ],
        )
    };
    tf.apply_ok(&mig(3)).await;
    // Scale-in: the node let go gets all-disabled, applied, before it is free.
    tf.apply_ok(&mig(2)).await;
    let freed: Vec<HostNode> = h
        .nodes_now()
        .into_iter()
        .filter(|n| n.label(POOL).is_none() && n.label(MIG_CONFIG).is_some())
        .collect();
    assert_eq!(freed.len(), 1, "{freed:?}");
    assert_eq!(freed[0].label(MIG_CONFIG), Some("all-disabled"));
    assert_eq!(freed[0].label(MIG_STATE), Some("success"));
    assert_eq!(freed[0].label("gpufleet.dev/releasing"), None);
    assert!(!freed[0].unschedulable);

    // Destroy, and the MIG manager fails on one node.
    let victim = held(&h, "a.train")[0].name.clone();
    manager.abort();
    let manager = play_mig_manager(&h, &[&victim]);
    let d = tf.destroy().await;
    let text = show(&d);
    assert!(d.has_error(), "{text}");
    assert!(text.contains(&victim), "{text}");
    assert!(
        text.contains("nvidia.com/mig.config.state=failed"),
        "{text}"
    );
    assert!(
        text.contains("nvidia.com/mig.config=all-disabled"),
        "{text}"
    );
    let stuck = h.node(&victim).expect("node");
    assert_eq!(stuck.label(POOL), Some("a.train"), "still the pool's");
    assert_eq!(stuck.label("gpufleet.dev/releasing"), Some("a.train"));
    assert_eq!(stuck.label(MIG_CONFIG), Some("all-disabled"));
    assert!(stuck.unschedulable);
    assert_eq!(tf.state.get("nodes").strings(), vec![victim.clone()]);
    // Out of the free pool: another pool cannot have it.
    let mut other = Terraform::new(&k);
    let all = config(
        &k,
        &[
            ("name", Value::string("all")),
            ("virtual_cluster_id", Value::string("vc-s/s")),
            ("gpu_product", Value::string(H100)),
            ("node_count", Value::int(8)),
        ],
    );
    let (plan, d) = other.apply_despite_plan(&all).await;
    assert!(show(&plan).contains("only 7 free"), "{}", show(&plan));
    assert!(show(&d).contains("only 7 are free"), "{}", show(&d));
    // Still failed: the re-run says so again and changes nothing.
    let d = tf.destroy().await;
    assert!(show(&d).contains(&victim), "{}", show(&d));
    assert_eq!(held(&h, "a.train").len(), 1);
    // Fixed, and its MIG manager restarted: it applies the node's config again.
    manager.abort();
    let manager = play_mig_manager(&h, &[]);
    h.edit_node(&victim, |n| {
        n.labels.insert(MIG_STATE.to_owned(), "pending".to_owned());
    });
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(tf.state.is_null());
    let freed = h.node(&victim).expect("node");
    assert_eq!(freed.label(POOL), None);
    assert_eq!(freed.label("gpufleet.dev/releasing"), None);
    assert_eq!(freed.label(MIG_CONFIG), Some("all-disabled"));
    assert!(!freed.unschedulable);
    assert!(held(&h, "a.train").is_empty());
    manager.abort();
}

#[tokio::test(start_paused = true)]
async fn mig_allocatable_follows_each_nodes_strategy() {
    let h = host();
    let manager = play_mig_manager(&h, &[]);
    // GFD on these nodes runs the `single` strategy.
    for n in h.nodes_now() {
        h.edit_node(&n.name, |n| {
            n.labels
                .insert("nvidia.com/mig.strategy".into(), "single".into());
        });
    }
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let one = |mig: &str| {
        pool(
            &k,
            &[
                ("node_count", Value::int(1)),
                ("sharing", sharing("mig", None, Some(mig))),
            ],
        )
    };
    tf.apply_ok(&one("all-3g.40gb")).await;
    // Instances are advertised as whole GPUs: 8 GPUs × 2.
    assert_eq!(
        allocatable(&tf.state, "nvidia.com/gpu"),
        Some(Value::int(16))
    );
    assert_eq!(allocatable(&tf.state, "nvidia.com/mig-3g.40gb"), None);
    // A mixed layout cannot be advertised under `single`: refused at plan, on its attribute.
    let p = tf.plan(&one("all-balanced")).await;
    let text = show(&p.diagnostics);
    assert!(p.diagnostics.has_error(), "{text}");
    assert!(text.contains("at sharing.mig_config"), "{text}");
    assert!(text.contains("nvidia.com/mig.strategy=single"), "{text}");
    // Only some nodes on `single`: the plan cannot tell, and apply refuses the ones it holds.
    let held_now = held(&h, "a.train");
    for n in h.nodes_now() {
        if !held_now.iter().any(|x| x.name == n.name) {
            h.edit_node(&n.name, |n| {
                n.labels.remove("nvidia.com/mig.strategy");
            });
        }
    }
    let (_, d) = tf.apply(&one("all-balanced")).await;
    let text = show(&d);
    assert!(d.has_error(), "{text}");
    assert!(text.contains("nvidia.com/mig.strategy=single"), "{text}");
    assert!(text.contains(&held_now[0].name), "{text}");
    manager.abort();
}

/// What the GPU operator does to a node once the device plugin runs a time-slicing config
/// with `replicas` (renameByDefault false): GFD suffixes the product with `-SHARED` and records
/// the replicas and strategy, and the device plugin advertises GPUs × replicas. The GPU count
/// label stays the number of physical GPUs.
fn operator_time_slices(h: &MemoryHost, name: &str, replicas: u32) {
    h.edit_node(name, |n| {
        n.labels
            .insert("nvidia.com/gpu.product".into(), format!("{H100}-SHARED"));
        n.labels
            .insert("nvidia.com/gpu.replicas".into(), replicas.to_string());
        n.labels.insert(
            "nvidia.com/gpu.sharing-strategy".into(),
            "time-slicing".into(),
        );
        n.gpu_capacity *= replicas;
    });
}

fn allocatable(state: &Value, resource: &str) -> Option<Value> {
    state
        .get("allocatable")
        .as_map()
        .and_then(|m| m.get(resource))
        .cloned()
}

#[tokio::test(start_paused = true)]
async fn time_sliced_nodes_relabelled_by_the_operator_stay_the_pools() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let ts = sharing("time-slicing", Some(4), None);
    let c = pool(&k, &[("sharing", ts.clone())]);
    tf.apply_ok(&c).await;
    let mine: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    // A cluster-wide default config: every H100 node is time-sliced, free ones too.
    for n in h.nodes_now() {
        operator_time_slices(&h, &n.name, 4);
    }
    // Refresh: the same nodes, the same physical GPUs, replicas counted once.
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert_eq!(tf.state.get("gpus"), &Value::int(16));
    assert_eq!(
        allocatable(&tf.state, "nvidia.com/gpu"),
        Some(Value::int(64))
    );
    assert_eq!(tf.state.get("status"), &Value::string("ready"));
    // Scale-up: the held nodes are kept and one free `-SHARED` node is added.
    let c3 = pool(&k, &[("sharing", ts), ("node_count", Value::int(3))]);
    assert_eq!(tf.apply_ok(&c3).await, Action::Update);
    let now: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(
        mine.iter().all(|n| now.contains(n)),
        "{mine:?} kept in {now:?}"
    );
    assert_eq!(tf.state.get("gpus"), &Value::int(24));
    assert_eq!(tf.plan(&c3).await.action, Action::NoOp);
    assert!(!tf.destroy().await.has_error());
    assert!(held(&h, "a.train").is_empty());
}

#[tokio::test(start_paused = true)]
async fn mig_mixed_nodes_without_whole_gpus_keep_their_gpu_count() {
    let h = host();
    let _manager = play_mig_manager(&h, &[]);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(
        &k,
        &[
            ("node_count", Value::int(1)),
            ("sharing", sharing("mig", None, Some("all-1g.10gb"))),
        ],
    );
    tf.apply_ok(&c).await;
    let name = held(&h, "a.train")[0].name.clone();
    // MIG `mixed`: every GPU is MIG-enabled, so no whole `nvidia.com/gpu` is advertised;
    // GFD still counts the 8 GPUs.
    h.edit_node(&name, |n| {
        n.labels
            .insert("nvidia.com/gpu.replicas".into(), "0".into());
        n.labels
            .insert("nvidia.com/mig.strategy".into(), "mixed".into());
        n.gpu_capacity = 0;
    });
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert_eq!(tf.state.get("gpus"), &Value::int(8));
    assert_eq!(
        allocatable(&tf.state, "nvidia.com/mig-1g.10gb"),
        Some(Value::int(8 * 7))
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_node_gfd_has_not_labelled_is_still_held() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[]);
    tf.apply_ok(&c).await;
    let mine: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    // GFD restarting (or a MIG change pending) removes its labels for a while.
    h.edit_node(&mine[0], |n| {
        n.labels.remove("nvidia.com/gpu.product");
        n.labels.remove("nvidia.com/gpu.count");
    });
    let c3 = pool(&k, &[("node_count", Value::int(3))]);
    tf.apply_ok(&c3).await;
    let now: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    assert_eq!(now.len(), 3, "one more, not three more: {now:?}");
    assert!(mine.iter().all(|n| now.contains(n)));
    // Its GPUs come from the capacity meanwhile.
    assert_eq!(tf.state.get("gpus"), &Value::int(24));
}

#[tokio::test(start_paused = true)]
async fn scale_up_claims_more_and_scale_down_releases_the_emptiest() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, &[("node_count", Value::int(2))]))
        .await;
    assert_eq!(
        tf.apply_ok(&pool(&k, &[("node_count", Value::int(4))]))
            .await,
        Action::Update
    );
    assert_eq!(held(&h, "a.train").len(), 4);
    assert_eq!(tf.state.get("gpus"), &Value::int(32));
    // Busy nodes stay; the idle ones go.
    let names: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    h.add_pod(&names[0], "vc-a", "job-0");
    h.add_pod(&names[1], "vc-a", "job-1");
    tf.apply_ok(&pool(&k, &[("node_count", Value::int(2))]))
        .await;
    let mut left: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    left.sort();
    assert_eq!(left, names[..2]);
    for n in &names[2..] {
        assert_eq!(
            NodeWrite::of(&h.node(n).expect("node")),
            before[n],
            "{n} as found"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn over_asking_fails_claims_nothing_and_names_the_free_count() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    // Refused at plan, and at apply (the fleet can change after a plan that passed).
    let (plan, d) = tf
        .apply_despite_plan(&pool(&k, &[("node_count", Value::int(9))]))
        .await;
    assert!(show(&plan).contains("only 8 free"), "{}", show(&plan));
    let text = show(&d);
    assert!(text.contains("only 8 are free"), "{text}");
    assert!(tf.state.is_null());
    assert_eq!(snapshot(&h), before);
}

#[tokio::test(start_paused = true)]
async fn a_topology_key_the_nodes_lack_fails_and_claims_nothing() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let placement = Value::object([("topology_key", Value::string("example.com/rack"))]);
    let (action, d) = tf.apply(&pool(&k, &[("placement", placement)])).await;
    assert_eq!(action, Action::Create);
    let text = show(&d);
    assert!(
        text.contains("example.com/rack is missing on 8 of 8 candidate nodes"),
        "{text}"
    );
    assert!(tf.state.is_null());
    assert_eq!(snapshot(&h), before, "nothing was claimed");
    // Left unset, placement finds the real label the nodes carry (topograph's block).
    tf.apply_ok(&pool(&k, &[])).await;
    let nodes = held(&h, "a.train");
    assert_eq!(
        nodes[0].label("network.topology.nvidia.com/block"),
        nodes[1].label("network.topology.nvidia.com/block"),
        "packed into one block"
    );
}

/// A create whose third node write fails, and whose release of the two nodes it took fails
/// as well (the API server went away): the two stay labelled for the pool.
async fn create_fails_and_cannot_roll_back(h: &Arc<MemoryHost>, tf: &mut Terraform<'_>, c: &Value) {
    h.fail_writes_after(2);
    let (action, d) = tf.apply(c).await;
    assert_eq!(action, Action::Create);
    assert!(d.has_error(), "{}", show(&d));
    assert_eq!(held(h, "a.train").len(), 2);
    // What still holds the label is in state, so Terraform knows to clean it up.
    let mut recorded = tf.state.get("nodes").strings();
    recorded.sort();
    let labelled: Vec<String> = held(h, "a.train").into_iter().map(|n| n.name).collect();
    assert_eq!(recorded, labelled);
    assert!(tf.tainted);
    h.heal();
}

#[tokio::test(start_paused = true)]
async fn nodes_a_failed_claim_could_not_release_are_released_by_destroy() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[("node_count", Value::int(3))]);
    create_fails_and_cannot_roll_back(&h, &mut tf, &c).await;
    assert!(!tf.destroy().await.has_error());
    assert_eq!(snapshot(&h), before, "every node as it was before the pool");
}

#[tokio::test(start_paused = true)]
async fn nodes_a_failed_claim_could_not_release_are_adopted_by_the_next_apply() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[("node_count", Value::int(3))]);
    create_fails_and_cannot_roll_back(&h, &mut tf, &c).await;
    assert_eq!(tf.apply_ok(&c).await, Action::Replace);
    assert_eq!(held(&h, "a.train").len(), 3, "no fourth node, no orphan");
    assert_eq!(tf.state.get("gpus"), &Value::int(24));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn drift_is_seen_on_refresh_and_repaired_by_apply() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[("node_count", Value::int(3))]);
    tf.apply_ok(&c).await;
    let names: Vec<String> = held(&h, "a.train").iter().map(|n| n.name.clone()).collect();
    // A taint removed, and a node gone.
    h.edit_node(&names[0], |n| n.taints.clear());
    h.delete_node(&names[1]);
    let p = tf.plan(&c).await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(tf.state.get("status"), &Value::string("degraded"));
    assert_eq!(tf.state.get("node_count"), &Value::int(1));
    tf.apply_ok(&c).await;
    let now = held(&h, "a.train");
    assert_eq!(now.len(), 3);
    assert!(now.iter().all(|n| n.taints.iter().any(|t| t.key == TENANT)));
    assert!(
        now.iter().any(|n| n.name == names[0]),
        "the drifted node is kept and repaired"
    );
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn import_by_id_reads_the_pool_back() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[("sharing", sharing("time-slicing", Some(3), None))]);
    tf.apply_ok(&c).await;
    let mut imported = Terraform::new(&k);
    let d = imported.import("vc-a/a/train").await;
    assert!(!d.has_error(), "{}", show(&d));
    for a in [
        "gpu_product",
        "node_count",
        "source",
        "nodes",
        "gpus",
        "allocatable",
    ] {
        assert_eq!(imported.state.get(a), tf.state.get(a), "{a}");
    }
    assert_eq!(
        imported.state.get("sharing").get("replicas"),
        &Value::int(3)
    );
    assert_eq!(imported.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn private_tier_refuses_host_nodes_at_plan_on_source() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let p = tf
        .plan(&pool(
            &k,
            &[("virtual_cluster_id", Value::string("vc-p/p"))],
        ))
        .await;
    let errs: Vec<String> = p
        .diagnostics
        .iter()
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect();
    assert_eq!(errs, ["source"], "{}", show(&p.diagnostics));
    assert_eq!(
        h.nodes_now()
            .iter()
            .filter(|n| n.label(POOL).is_some())
            .count(),
        0
    );
}

/// Relabels a virtual cluster's namespace, as replacing it with another tier does.
fn retier(h: &MemoryHost, ns: &str, vc: &str, tier: &str) {
    h.add_namespace(
        ns,
        &[
            ("app.kubernetes.io/managed-by", "gpufleet"),
            ("gpufleet.dev/virtual-cluster", vc),
            ("gpufleet.dev/isolation", tier),
        ],
    );
}

fn error_paths(d: &gpufleet_engine::diag::Diagnostics) -> Vec<String> {
    d.iter()
        .filter(|d| d.severity == gpufleet_engine::diag::Severity::Error)
        .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_virtual_cluster_replaced_with_another_tier_is_caught_at_the_next_plan() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[]);
    tf.apply_ok(&c).await;
    let before = snapshot(&h);
    // Same id, now private: the host pool is refused on every plan, not only on create.
    retier(&h, "vc-a", "a", "private");
    let p = tf.plan(&c).await;
    assert_eq!(
        error_paths(&p.diagnostics),
        ["source"],
        "{}",
        show(&p.diagnostics)
    );
    assert!(show(&p.diagnostics).contains("private"));
    assert_eq!(snapshot(&h), before, "nothing changed");
    assert_eq!(tf.state.get("isolation"), &Value::string("dedicated"));
    // Now shared: the pool is replaced and its nodes carry the shared tier.
    retier(&h, "vc-a", "a", "shared");
    assert_eq!(tf.plan(&c).await.action, Action::Replace);
    tf.apply_ok(&c).await;
    let now = held(&h, "a.train");
    assert_eq!(now.len(), 2);
    assert!(
        now.iter()
            .all(|n| n.label("gpufleet.dev/isolation") == Some("shared")
                && n.label(TENANT).is_none()
                && n.taints.iter().all(|t| t.key != TENANT))
    );
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
}

#[tokio::test(start_paused = true)]
async fn a_configured_tier_change_is_checked_at_plan_and_replaces_the_pool() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let tiered = |t: &str| pool(&k, &[("isolation", Value::string(t))]);
    tf.apply_ok(&tiered("dedicated")).await;
    let before = snapshot(&h);
    // The virtual cluster is about to become private in the same run: refused at plan.
    let p = tf.plan(&tiered("private")).await;
    assert_eq!(
        error_paths(&p.diagnostics),
        ["source"],
        "{}",
        show(&p.diagnostics)
    );
    assert!(show(&p.diagnostics).contains("isolation = \"private\""));
    assert_eq!(snapshot(&h), before, "nothing changed");
    // About to become shared: the pool is replaced (released before its virtual cluster is
    // replaced, taken again for the new tier).
    let p = tf.plan(&tiered("shared")).await;
    assert_eq!(p.action, Action::Replace, "{}", show(&p.diagnostics));
    retier(&h, "vc-a", "a", "shared");
    tf.apply_ok(&tiered("shared")).await;
    assert!(
        held(&h, "a.train")
            .iter()
            .all(|n| n.taints.iter().all(|t| t.key != TENANT))
    );
    assert_eq!(tf.plan(&tiered("shared")).await.action, Action::NoOp);
    // Replaced behind the configuration's back: the configured tier no longer holds.
    retier(&h, "vc-a", "a", "dedicated");
    let p = tf.plan(&tiered("shared")).await;
    assert_eq!(
        error_paths(&p.diagnostics),
        ["isolation"],
        "{}",
        show(&p.diagnostics)
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_tier_at_plan_is_left_to_apply() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(
        &k,
        &[
            ("isolation", Value::unknown()),
            ("virtual_cluster_id", Value::unknown()),
        ],
    );
    let p = tf.plan(&c).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    assert!(p.planned.get("isolation").is_unknown());
    // With the virtual cluster known and the tier left out, the namespace decides.
    let p = tf
        .plan(&pool(
            &k,
            &[("virtual_cluster_id", Value::string("vc-p/p"))],
        ))
        .await;
    assert_eq!(error_paths(&p.diagnostics), ["source"]);
}

#[tokio::test(start_paused = true)]
async fn auto_pool_emits_a_karpenter_node_pool_and_removes_it() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(
        &k,
        &[
            ("virtual_cluster_id", Value::string("vc-p/p")),
            ("source", Value::string("auto")),
            ("node_count", Value::Null),
            (
                "autoscaling",
                Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(3))]),
            ),
        ],
    );
    tf.apply_ok(&c).await;
    assert_eq!(tf.state.get("status"), &Value::string("pending"));
    let np = h.node_pool("gpufleet-p-train").expect("NodePool");
    assert_eq!(np["spec"]["limits"]["nodes"], "3");
    assert_eq!(np["spec"]["template"]["spec"]["taints"][0]["value"], "p");
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert!(!tf.destroy().await.has_error());
    assert!(h.node_pool("gpufleet-p-train").is_none());
}

#[tokio::test(start_paused = true)]
async fn auto_pool_constrains_what_karpenter_may_launch_to_the_product() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let auto = |karpenter: Value| {
        pool(
            &k,
            &[
                ("source", Value::string("auto")),
                ("node_count", Value::Null),
                (
                    "autoscaling",
                    Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(3))]),
                ),
                ("karpenter", karpenter),
            ],
        )
    };
    tf.apply_ok(&auto(Value::Null)).await;
    let np = h.node_pool("gpufleet-a-train").expect("NodePool");
    // The default node class is AWS's: the instance must have 8 NVIDIA H100s.
    assert_eq!(
        required(&np, "karpenter.k8s.aws/instance-gpu-name"),
        Some(serde_json::json!(["h100"]))
    );
    assert_eq!(
        required(&np, "karpenter.k8s.aws/instance-gpu-count"),
        Some(serde_json::json!(["8"]))
    );
    assert_eq!(np["spec"]["limits"]["nvidia.com/gpu"], "24");
    // One-GPU instances and spot capacity: an update in place.
    let smaller = auto(karpenter(
        None,
        Some(1),
        vec![requirement("karpenter.sh/capacity-type", "In", &["spot"])],
    ));
    assert_eq!(tf.apply_ok(&smaller).await, Action::Update);
    let np = h.node_pool("gpufleet-a-train").expect("NodePool");
    assert_eq!(
        required(&np, "karpenter.k8s.aws/instance-gpu-count"),
        Some(serde_json::json!(["1"]))
    );
    assert_eq!(
        required(&np, "karpenter.sh/capacity-type"),
        Some(serde_json::json!(["spot"]))
    );
    assert_eq!(np["spec"]["limits"]["nvidia.com/gpu"], "3");
    assert_eq!(tf.plan(&smaller).await.action, Action::NoOp);
    // AWS has no 2-GPU H100 instance.
    let p = tf.plan(&auto(karpenter(None, Some(2), vec![]))).await;
    assert_eq!(
        p.diagnostics
            .iter()
            .filter_map(|d| d.path.as_ref().map(ToString::to_string))
            .collect::<Vec<_>>(),
        ["karpenter.gpus_per_node"],
        "{}",
        show(&p.diagnostics)
    );
    assert!(!tf.destroy().await.has_error());
}

#[tokio::test(start_paused = true)]
async fn a_declared_product_is_pooled_like_a_catalog_one() {
    const H20: &str = "NVIDIA-Lifecycle-H20";
    let h = MemoryHost::with_nodes(H20, &[("r1", 3)]);
    h.add_namespace(
        "vc-a",
        &[
            ("app.kubernetes.io/managed-by", "gpufleet"),
            ("gpufleet.dev/virtual-cluster", "a"),
            ("gpufleet.dev/isolation", "dedicated"),
        ],
    );
    let k = GpuNodePool(Arc::clone(&h));
    let c = pool(&k, &[("gpu_product", Value::string(H20))]);
    // Without the declaration the product is refused at plan, on the attribute.
    let mut plain = Terraform::new(&k);
    let p = plain.plan(&c).await;
    assert_eq!(
        p.diagnostics
            .iter()
            .filter_map(|d| d.path.as_ref().map(ToString::to_string))
            .collect::<Vec<_>>(),
        ["gpu_product"],
        "{}",
        show(&p.diagnostics)
    );
    assert!(p.diagnostics.0[0].detail.contains("gpu_product block"));
    // Declared, its nodes are claimed, counted and released like a catalog product's.
    let mut tf = Terraform::new(&k);
    tf.ctx = declaring(vec![declared_product(H20, Some(4))]);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    assert_eq!(held(&h, "a.train").len(), 2);
    assert_eq!(tf.state.get("gpus"), &Value::int(16));
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);
    assert!(!tf.destroy().await.has_error());
    assert!(held(&h, "a.train").is_empty());
    // An auto pool of it takes GPUs per node from the declaration; no cloud maps it, so
    // the user's requirements choose the instances.
    let auto = pool(
        &k,
        &[
            ("gpu_product", Value::string(H20)),
            ("source", Value::string("auto")),
            (
                "karpenter",
                karpenter(
                    Some("generic"),
                    None,
                    vec![requirement(
                        "node.kubernetes.io/instance-type",
                        "In",
                        &["h20x4.large"],
                    )],
                ),
            ),
        ],
    );
    tf.apply_ok(&auto).await;
    let np = h.node_pool("gpufleet-a-train").expect("NodePool");
    assert_eq!(np["spec"]["limits"]["nvidia.com/gpu"], "8");
    assert_eq!(
        required(&np, "node.kubernetes.io/instance-type"),
        Some(serde_json::json!(["h20x4.large"]))
    );
    // With the default AWS node class it would be refused: AWS offers no such GPU.
    let aws = pool(
        &k,
        &[
            ("gpu_product", Value::string(H20)),
            ("source", Value::string("auto")),
        ],
    );
    let p = tf.plan(&aws).await;
    assert!(p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    assert!(!tf.destroy().await.has_error());
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_refused_at_plan_on_its_attribute() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    type Case<'a> = (&'a str, Vec<(&'a str, Value)>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "unknown product",
            vec![("gpu_product", Value::string("RTX-9090"))],
            "gpu_product",
        ),
        (
            "mig profile of another product",
            vec![("sharing", sharing("mig", None, Some("all-1g.5gb")))],
            "sharing.mig_config",
        ),
        (
            "replicas below one",
            vec![("sharing", sharing("time-slicing", Some(0), None))],
            "sharing.replicas",
        ),
        (
            // NVIDIA's device plugin: "number of replicas must be >= 2".
            "one replica, which the device plugin refuses",
            vec![("sharing", sharing("time-slicing", Some(1), None))],
            "sharing.replicas",
        ),
        (
            "count and autoscaling",
            vec![
                (
                    "autoscaling",
                    Value::object([("min_nodes", Value::int(1)), ("max_nodes", Value::int(2))]),
                ),
                ("source", Value::string("auto")),
            ],
            "autoscaling",
        ),
        (
            "reserved label",
            vec![(
                "node_labels",
                Value::Map([("gpufleet.dev/tenant".to_owned(), Value::string("x"))].into()),
            )],
            "node_labels[\"gpufleet.dev/tenant\"]",
        ),
        (
            "bad vc id",
            vec![("virtual_cluster_id", Value::string("a"))],
            "virtual_cluster_id",
        ),
        (
            "karpenter settings on a host pool",
            vec![("karpenter", karpenter(None, Some(8), vec![]))],
            "karpenter",
        ),
        (
            // The default node class is AWS's, which has no A30 instances.
            "auto pool of a product the cloud does not offer",
            vec![
                ("gpu_product", Value::string("NVIDIA-A30")),
                ("source", Value::string("auto")),
            ],
            "gpu_product",
        ),
        (
            "requirement on a key gpufleet sets",
            vec![
                ("source", Value::string("auto")),
                (
                    "karpenter",
                    karpenter(
                        None,
                        None,
                        vec![requirement(
                            "karpenter.k8s.aws/instance-gpu-name",
                            "In",
                            &["a10g"],
                        )],
                    ),
                ),
            ],
            "karpenter.requirements[0].key",
        ),
    ];
    for (case, extra, want) in cases {
        let mut tf = Terraform::new(&k);
        let p = support::plan(&k, &tf.ctx, &Value::Null, &pool(&k, &extra)).await;
        let paths: Vec<String> = p
            .diagnostics
            .iter()
            .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
            .collect();
        assert_eq!(paths, [want], "{case}: {}", show(&p.diagnostics));
        tf.state = Value::Null;
    }
    assert_eq!(
        h.nodes_now()
            .iter()
            .filter(|n| n.label(POOL).is_some())
            .count(),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn host_calls_per_operation_are_bounded() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let c = pool(&k, &[("node_count", Value::int(4))]);
    tf.apply_ok(&c).await;
    let create = h.calls();
    let _ = tf.plan(&c).await;
    let refresh = h.calls() - create;
    assert!(!tf.destroy().await.has_error());
    let destroy = h.calls() - create - refresh;
    println!("host calls, 4 nodes: create {create}, refresh {refresh}, destroy {destroy}");
    // The plan of the create reads the namespace once and lists the pool's nodes and the
    // product's (are there enough free ones?); create reads the namespace again, lists the
    // pool's nodes (by pool label) and the product's (to claim from), claims 4 nodes, and
    // lists the pods of the cluster once (to prefer nodes with none to move), and (dedicated)
    // lists the pods on each claimed node to evict other tenants'.
    assert!(
        create <= 1 + 2 + 1 + 2 + 1 + 4 + 4,
        "create made {create} calls"
    );
    assert_eq!(
        refresh, 3,
        "a refresh lists the pool's nodes and reads the namespace; the plan reads the \
         namespace again to check the tier rules"
    );
}

#[tokio::test(start_paused = true)]
async fn dedicated_nodes_are_cleared_of_other_tenants_pods_and_shared_ones_are_not() {
    let h = host();
    // Every node runs another tenant's pod, a DaemonSet's pod and one of the tenant's own.
    for n in h.nodes_now() {
        h.add_pod(&n.name, "vc-other", &format!("control-plane-{}", n.name));
        h.add_pod(&n.name, "vc-a", &format!("own-{}", n.name));
        h.add_daemon_pod(
            &n.name,
            "gpu-operator",
            &format!("device-plugin-{}", n.name),
        );
    }
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, &[])).await;
    for n in held(&h, "a.train") {
        assert_eq!(
            h.pods_now(&n.name),
            [
                format!("vc-a/own-{}", n.name),
                format!("gpu-operator/device-plugin-{}", n.name)
            ],
            "{}: only the tenant's and the DaemonSet's pods are left on a dedicated node",
            n.name
        );
    }
    // Nodes the pool does not hold keep their pods.
    let free = h
        .nodes_now()
        .into_iter()
        .find(|n| n.label(POOL).is_none())
        .expect("a free node");
    assert_eq!(h.pods_now(&free.name).len(), 3);

    // A shared pool only labels its nodes: other tenants' pods may stay.
    let mut shared = Terraform::new(&k);
    shared
        .apply_ok(&pool(
            &k,
            &[
                ("name", Value::string("dev")),
                ("virtual_cluster_id", Value::string("vc-s/s")),
            ],
        ))
        .await;
    for n in held(&h, "s.dev") {
        assert_eq!(h.pods_now(&n.name).len(), 3, "{}", n.name);
    }
}

#[tokio::test(start_paused = true)]
async fn a_claim_leaves_other_tenants_control_planes_running_when_it_can() {
    let h = host();
    // Another tenant's control plane runs on every other node; r1 and r2 have 2 idle each.
    let busy: Vec<String> = h
        .nodes_now()
        .iter()
        .step_by(2)
        .map(|n| n.name.clone())
        .collect();
    for n in &busy {
        h.add_pod(n, "vc-other", &format!("other-0-on-{n}"));
    }
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, &[])).await;
    let claimed = held(&h, "a.train");
    assert_eq!(claimed.len(), 2);
    for n in &claimed {
        assert!(!busy.contains(&n.name), "{} ran a control plane", n.name);
    }
    for n in &busy {
        assert_eq!(
            h.pods_now(n),
            [format!("vc-other/other-0-on-{n}")],
            "no control plane was evicted"
        );
    }
}

impl sweep::Interruptible for MemoryHost {
    /// Node writes: the pool's reads and its other objects are not interrupted.
    fn fail_after(&self, n: u64) {
        self.fail_writes_after(n);
    }
    fn heal(&self) {
        MemoryHost::heal(self);
    }
    fn calls_left(&self) -> u64 {
        self.writes_left()
    }
    /// Nodes by the pool they are labelled for (which nodes a pool takes may differ between
    /// runs).
    fn owned(&self) -> Vec<String> {
        self.nodes_now()
            .iter()
            .filter_map(|n| n.label(POOL).map(|p| format!("node of pool {p}")))
            .collect()
    }
    fn snapshot(&self) -> String {
        format!("{:#?}", snapshot(self))
    }
}

/// Sweeps one pool operation, from `before` to `target`, interrupted at every node write.
async fn sweep_pool(
    op: &'static str,
    before: &[&[(&str, Value)]],
    target: Option<&[(&str, Value)]>,
) {
    let k = GpuNodePool(host());
    let case = sweep::Case::new("gpu_node_pool", op, |a| pool(&k, a), before, target);
    sweep::sweep_both(case, || {
        let h = host();
        let k = GpuNodePool(Arc::clone(&h));
        (h, k)
    })
    .await;
}

fn nodes(n: i64) -> [(&'static str, Value); 1] {
    [("node_count", Value::int(n))]
}

#[tokio::test(start_paused = true)]
async fn a_pool_create_interrupted_at_any_node_write_converges() {
    sweep_pool("create", &[], Some(&nodes(3))).await;
}

#[tokio::test(start_paused = true)]
async fn a_scale_up_interrupted_at_any_node_write_converges() {
    sweep_pool("scale-up", &[&nodes(2)], Some(&nodes(4))).await;
}

#[tokio::test(start_paused = true)]
async fn a_scale_down_interrupted_at_any_node_write_converges() {
    sweep_pool("scale-down", &[&nodes(4)], Some(&nodes(2))).await;
}

#[tokio::test(start_paused = true)]
async fn a_pool_rename_interrupted_at_any_node_write_converges() {
    let renamed = [("name", Value::string("infer"))];
    sweep_pool("replace", &[&[]], Some(&renamed)).await;
}

#[tokio::test(start_paused = true)]
async fn a_pool_destroy_interrupted_at_any_node_write_converges() {
    sweep_pool("delete", &[&nodes(3)], None).await;
}

#[tokio::test(start_paused = true)]
async fn the_list_finds_pools_of_every_source_and_reads_them_as_an_import_does() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut train = Terraform::new(&k);
    train
        .apply_ok(&pool(
            &k,
            &[("sharing", sharing("time-slicing", Some(2), None))],
        ))
        .await;
    let mut burst = Terraform::new(&k);
    burst
        .apply_ok(&pool(
            &k,
            &[
                ("name", Value::string("burst")),
                ("virtual_cluster_id", Value::string("vc-p/p")),
                ("source", Value::string("auto")),
                ("node_count", Value::Null),
                (
                    "autoscaling",
                    Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(3))]),
                ),
            ],
        ))
        .await;
    let list = GpuNodePoolList(Arc::clone(&h));
    let request = |vc: Option<&str>, include_resource: bool, limit: usize| ListRequest {
        config: Value::object([("virtual_cluster_id", vc.map(Value::string).into())]),
        include_resource,
        limit,
    };

    let all = list
        .list(&Context::default(), request(None, true, 100))
        .await;
    assert!(!all.diagnostics.has_error(), "{}", show(&all.diagnostics));
    let ids: Vec<&str> = all
        .results
        .iter()
        .filter_map(|r| r.state.get("id").as_str())
        .collect();
    assert_eq!(ids, ["vc-a/a/train", "vc-p/p/burst"]);
    for (listed, applied) in all.results.iter().zip([&train.state, &burst.state]) {
        for a in [
            "name",
            "virtual_cluster_id",
            "gpu_product",
            "source",
            "node_count",
            "nodes",
        ] {
            assert_eq!(listed.state.get(a), applied.get(a), "{a}");
        }
    }
    assert_eq!(
        all.results[0].state.get("sharing").get("replicas"),
        &Value::int(2)
    );

    let only_p = list
        .list(&Context::default(), request(Some("vc-p/p"), false, 100))
        .await;
    let names: Vec<&str> = only_p
        .results
        .iter()
        .filter_map(|r| r.state.get("name").as_str())
        .collect();
    assert_eq!(names, ["burst"]);
    let one = list
        .list(&Context::default(), request(None, false, 1))
        .await;
    assert_eq!(one.results.len(), 1);
}
