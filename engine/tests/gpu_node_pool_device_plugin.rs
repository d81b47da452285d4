//! Time-slicing pools and the NVIDIA device plugin, through whole Terraform runs against the
//! in-memory host cluster: the GPU Operator's namespace is read from its ClusterPolicy (or
//! set in the provider), the ClusterPolicy is pointed at gpufleet's ConfigMap when it names
//! none, a ClusterPolicy set up for another ConfigMap fails the apply before any node is
//! claimed, and a cluster without the operator needs the namespace set and gets a warning
//! saying what to wire by hand.

#[path = "support/network_segment.rs"]
mod support;

use std::{collections::BTreeMap, sync::Arc};

use gpufleet_engine::backends::kube::host::memory::MemoryHost;
use gpufleet_engine::{
    backends::kube::{POOL, host::nodes::NodeWrite},
    diag::{Diagnostics, Severity},
    kinds::ResourceKind,
    path::AttrPath,
    provider_config::ProviderSettings,
    resources::gpu_node_pool::{DEVICE_PLUGIN_CONFIG_MAP, GpuNodePool},
    value::Value,
};
use serde_json::{Value as Json, json};
use support::{Action, Terraform, apply, config, show, single_error};

const H100: &str = "NVIDIA-H100-80GB-HBM3";

/// Two racks of H100 nodes and a dedicated virtual cluster; the GPU Operator is installed
/// in `gpu-operator` (as [`MemoryHost::new`] sets it up).
fn host() -> Arc<MemoryHost> {
    let h = MemoryHost::with_nodes(H100, &[("r1", 2), ("r2", 2)]);
    h.add_namespace(
        "vc-a",
        &[
            ("app.kubernetes.io/managed-by", "gpufleet"),
            ("gpufleet.dev/virtual-cluster", "a"),
            ("gpufleet.dev/isolation", "dedicated"),
        ],
    );
    h
}

fn pool(kind: &dyn ResourceKind, replicas: Option<i64>) -> Value {
    let strategy = if replicas.is_some() {
        "time-slicing"
    } else {
        "none"
    };
    config(
        kind,
        &[
            ("name", Value::string("infer")),
            ("virtual_cluster_id", Value::string("vc-a/a")),
            ("gpu_product", Value::string(H100)),
            ("node_count", Value::int(1)),
            (
                "sharing",
                Value::object([
                    ("strategy", Value::string(strategy)),
                    ("replicas", replicas.map(Value::int).into()),
                    ("mig_config", Value::Null),
                ]),
            ),
        ],
    )
}

/// The ClusterPolicy the operator's Helm chart makes, with `config` as its device plugin
/// config and `namespace` as the namespace it reports.
fn cluster_policy(namespace: &str, config: &Json) -> Json {
    json!({
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"enabled": true, "config": config}},
        "status": {"state": "ready", "namespace": namespace},
    })
}

fn config_name(h: &MemoryHost) -> Json {
    h.cluster_policy("cluster-policy").expect("ClusterPolicy")["spec"]["devicePlugin"]["config"]
        ["name"]
        .clone()
}

fn snapshot(h: &MemoryHost) -> BTreeMap<String, NodeWrite> {
    h.nodes_now()
        .iter()
        .map(|n| (n.name.clone(), NodeWrite::of(n)))
        .collect()
}

fn held(h: &MemoryHost) -> usize {
    h.nodes_now()
        .iter()
        .filter(|n| n.label(POOL) == Some("a.infer"))
        .count()
}

/// The only error, which plan put on `sharing.strategy`.
#[track_caller]
fn plan_error(d: &Diagnostics) -> String {
    let detail = single_error(d);
    let e = d
        .iter()
        .find(|d| d.severity == Severity::Error)
        .expect("an error");
    assert_eq!(
        e.path,
        Some(AttrPath::attr("sharing").push_attr("strategy")),
        "{}",
        show(d)
    );
    detail
}

/// Provider settings with `kubernetes.device_plugin_namespace`.
fn namespace_setting(namespace: &str) -> Arc<ProviderSettings> {
    let block = Value::object([(
        "kubernetes",
        Value::object([("device_plugin_namespace", Value::string(namespace))]),
    )]);
    Arc::new(ProviderSettings::resolve(&block, |_| None))
}

#[tokio::test(start_paused = true)]
async fn time_slicing_points_the_gpu_operator_at_gpufleets_config_map() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    assert_eq!(config_name(&h), Json::Null, "unset before");
    let c = pool(&k, Some(4));
    let (_, d) = tf.apply(&c).await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(
        d.iter().all(|d| d.severity != Severity::Warning),
        "{}",
        show(&d)
    );
    assert_eq!(config_name(&h), json!(DEVICE_PLUGIN_CONFIG_MAP));
    let cm = h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP);
    assert!(cm["a.infer"].contains("replicas: 4"), "{cm:?}");
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    // Leaving time-slicing removes the key; the ClusterPolicy keeps pointing at the map
    // (nodes without the label get the device plugin's defaults).
    tf.apply_ok(&pool(&k, None)).await;
    assert!(
        h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );
    tf.apply_ok(&c).await;
    assert!(!tf.destroy().await.has_error());
    assert!(
        h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );
    assert_eq!(config_name(&h), json!(DEVICE_PLUGIN_CONFIG_MAP));
}

#[tokio::test(start_paused = true)]
async fn the_config_goes_to_the_namespace_the_operator_reports() {
    let h = host();
    h.put_cluster_policy(cluster_policy("nvidia-gpu-operator", &json!({})));
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, Some(2))).await;
    let cm = h.config_map("nvidia-gpu-operator", DEVICE_PLUGIN_CONFIG_MAP);
    assert!(cm["a.infer"].contains("replicas: 2"), "{cm:?}");
    assert!(
        h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );

    // A setting that names another namespace contradicts the operator.
    let mut other = Terraform::new(&k);
    other.ctx.settings = namespace_setting("gpu-operator");
    let e = plan_error(&other.try_run(&pool(&k, Some(2))).await);
    assert!(
        e.contains("\"gpu-operator\"") && e.contains("\"nvidia-gpu-operator\""),
        "{e}"
    );
    assert!(!tf.destroy().await.has_error());
    assert!(
        h.config_map("nvidia-gpu-operator", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn a_cluster_policy_naming_another_config_map_fails_before_any_node_is_claimed() {
    let h = host();
    let theirs = cluster_policy("gpu-operator", &json!({"name": "time-slicing-config"}));
    h.put_cluster_policy(theirs.clone());
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    // Plan says so on sharing.strategy.
    let e = plan_error(&tf.try_run(&pool(&k, Some(4))).await);
    assert!(e.contains("\"time-slicing-config\""), "{e}");
    assert!(
        e.contains("kubectl patch clusterpolicies.nvidia.com/cluster-policy"),
        "{e}"
    );
    // So does an apply planned before the ClusterPolicy changed, and it changes nothing:
    // no node, no key, the ClusterPolicy as it was, no state.
    h.put_cluster_policy(cluster_policy("gpu-operator", &json!({})));
    let p = tf.plan(&pool(&k, Some(4))).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    h.put_cluster_policy(theirs.clone());
    let a = apply(&k, &tf.ctx, &p).await;
    let e = single_error(&a.diagnostics);
    assert!(e.contains("\"time-slicing-config\""), "{e}");
    assert!(a.state.is_null());
    assert_eq!(snapshot(&h), before);
    assert!(
        h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );
    assert_eq!(h.cluster_policy("cluster-policy"), Some(theirs));

    // Once the ClusterPolicy points at gpufleet's map (a default the user added included),
    // the same apply goes through and leaves it alone.
    let ours = cluster_policy(
        "gpu-operator",
        &json!({"name": DEVICE_PLUGIN_CONFIG_MAP, "default": "any"}),
    );
    h.put_cluster_policy(ours.clone());
    tf.apply_ok(&pool(&k, Some(4))).await;
    assert_eq!(held(&h), 1);
    assert_eq!(h.cluster_policy("cluster-policy"), Some(ours));
}

#[tokio::test(start_paused = true)]
async fn a_default_config_without_a_config_map_is_not_pointed_at_gpufleets() {
    let h = host();
    h.put_cluster_policy(cluster_policy("gpu-operator", &json!({"default": "any"})));
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let e = plan_error(&tf.try_run(&pool(&k, Some(4))).await);
    assert!(e.contains("spec.devicePlugin.config.default"), "{e}");
    assert_eq!(config_name(&h), Json::Null);
    assert_eq!(snapshot(&h), before);
}

#[tokio::test(start_paused = true)]
async fn without_the_gpu_operator_the_namespace_is_set_and_the_wiring_is_left_to_the_user() {
    let h = host();
    h.remove_gpu_operator();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    let e = plan_error(&tf.try_run(&pool(&k, Some(4))).await);
    assert!(e.contains("no GPU Operator"), "{e}");
    assert!(e.contains("kubernetes.device_plugin_namespace"), "{e}");
    assert_eq!(snapshot(&h), before);

    // With the device plugin's namespace set, the config is written there and a warning
    // says what the device plugin needs.
    tf.ctx.settings = namespace_setting("nvidia-device-plugin");
    let (_, d) = tf.apply(&pool(&k, Some(4))).await;
    assert!(!d.has_error(), "{}", show(&d));
    let warning = d
        .iter()
        .find(|d| d.severity == Severity::Warning)
        .unwrap_or_else(|| panic!("a warning:\n{}", show(&d)));
    assert!(
        warning
            .detail
            .contains("config.name=gpufleet-device-plugin-config"),
        "{}",
        warning.detail
    );
    let cm = h.config_map("nvidia-device-plugin", DEVICE_PLUGIN_CONFIG_MAP);
    assert!(cm["a.infer"].contains("replicas: 4"), "{cm:?}");
    assert!(!tf.destroy().await.has_error());
    assert!(
        h.config_map("nvidia-device-plugin", DEVICE_PLUGIN_CONFIG_MAP)
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn destroy_releases_the_nodes_after_the_operator_is_gone() {
    let h = host();
    let before = snapshot(&h);
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, Some(4))).await;
    h.remove_gpu_operator();
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert_eq!(snapshot(&h), before);
}

#[tokio::test(start_paused = true)]
async fn an_update_the_cluster_policy_refuses_keeps_the_pools_nodes_in_state() {
    let h = host();
    let k = GpuNodePool(Arc::clone(&h));
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, Some(4))).await;
    let nodes = tf.state.get("nodes").clone();
    assert_eq!(nodes.as_seq().map(<[Value]>::len), Some(1));
    // Someone points the device plugin elsewhere; the next change of replicas is refused
    // and leaves the pool as it was.
    h.put_cluster_policy(cluster_policy(
        "gpu-operator",
        &json!({"name": "time-slicing-config"}),
    ));
    let (_, d) = tf.apply(&pool(&k, Some(2))).await;
    let e = single_error(&d);
    assert!(e.contains("\"time-slicing-config\""), "{e}");
    assert_eq!(tf.state.get("nodes"), &nodes);
    assert_eq!(held(&h), 1);
    let cm = h.config_map("gpu-operator", DEVICE_PLUGIN_CONFIG_MAP);
    assert!(cm["a.infer"].contains("replicas: 4"), "{cm:?}");
}
