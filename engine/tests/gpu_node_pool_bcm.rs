//! `gpufleet_gpu_node_pool` with `source = "bcm"` through whole Terraform runs, against the
//! in-memory host cluster and the fake BCM head node: claim and provision, label the host
//! nodes, scale down, destroy with a wipe, two tenants in turn without a leak, over-asking,
//! and re-adopting nodes claimed by an apply that never finished. Every plan, apply and
//! refresh is checked against Terraform's consistency rules by the harness.

#[path = "support/bcm_node.rs"]
mod support;

use std::{collections::BTreeMap, sync::Arc};

use gpufleet_engine::backends::kube::host::memory::MemoryHost;
use gpufleet_engine::{
    backends::bcm::POOL_KEY,
    backends::kube::{
        POOL, TENANT,
        host::nodes::{HostNode, NodeWrite},
    },
    kinds::ResourceKind,
    resources::gpu_node_pool::{GpuNodePool, WithBcm},
    value::Value,
};
use support::{A_NODES, Action, B_NODES, FakeBcm, Terraform, config, show};

const H100: &str = "NVIDIA-H100-80GB-HBM3";

type Kind = GpuNodePool<WithBcm<MemoryHost, FakeBcm>>;

/// The fake head node's servers as host nodes, and private virtual clusters `p` and `q`.
fn setup() -> (Arc<MemoryHost>, Arc<FakeBcm>, Kind) {
    let h = MemoryHost::new();
    for name in A_NODES {
        h.add_node(name, H100, "rack-a1", 8);
    }
    for name in B_NODES {
        h.add_node(name, "NVIDIA-B200", "rack-b3", 8);
    }
    for (ns, vc) in [("vc-p", "p"), ("vc-q", "q")] {
        h.add_namespace(
            ns,
            &[
                ("app.kubernetes.io/managed-by", "gpufleet"),
                ("gpufleet.dev/virtual-cluster", vc),
                ("gpufleet.dev/isolation", "private"),
            ],
        );
    }
    let bcm = FakeBcm::new();
    let kind = GpuNodePool(WithBcm {
        host: Arc::clone(&h),
        bcm: Arc::clone(&bcm),
    });
    (h, bcm, kind)
}

fn pool(kind: &dyn ResourceKind, vc: &str, count: i64) -> Value {
    config(
        kind,
        &[
            ("name", Value::string("train")),
            ("virtual_cluster_id", Value::string(format!("vc-{vc}/{vc}"))),
            ("gpu_product", Value::string(H100)),
            ("source", Value::string("bcm")),
            ("node_count", Value::int(count)),
        ],
    )
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

/// The hostnames BCM records as held by `tenant`.
fn bcm_held(bcm: &FakeBcm, tenant: &str) -> Vec<String> {
    A_NODES
        .iter()
        .chain(B_NODES.iter())
        .filter(|h| bcm.device(h).tenant() == Some(tenant))
        .map(|h| (*h).to_owned())
        .collect()
}

/// Every server is free again: no tenant, no wipe pending, no pool mark, in the free pool.
fn assert_all_free(bcm: &FakeBcm) {
    let free_pool = support::uuid(11);
    for h in A_NODES.iter().chain(B_NODES.iter()) {
        let d = bcm.device(h);
        assert_eq!(d.tenant(), None, "{h}");
        assert_eq!(d.releasing(), None, "{h}");
        assert_eq!(d.extra(POOL_KEY), None, "{h}");
        assert_eq!(d.category.as_deref(), Some(free_pool.as_str()), "{h}");
    }
}

#[tokio::test(start_paused = true)]
async fn private_pool_claims_provisions_labels_and_destroy_wipes() {
    let (h, bcm, k) = setup();
    let before = snapshot(&h);
    let mut tf = Terraform::new(&k);
    let c = pool(&k, "p", 2);
    assert_eq!(tf.apply_ok(&c).await, Action::Create);
    assert_eq!(tf.state.get("status"), &Value::string("ready"));
    assert_eq!(tf.state.get("gpus"), &Value::int(16));
    let mine = bcm_held(&bcm, "p");
    assert_eq!(mine.len(), 2, "{mine:?}");
    for host in &mine {
        assert!(
            A_NODES.contains(&host.as_str()),
            "only H100 servers: {host}"
        );
        assert_eq!(bcm.device(host).extra(POOL_KEY), Some("p.train"));
        let (status, on, owner, _) = bcm.node(host);
        assert_eq!((status.as_str(), on), ("UP", true), "{host}");
        assert_eq!(owner.as_deref(), Some("p"), "provisioned for the tenant");
    }
    let nodes = held(&h, "p.train");
    let mut names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    names.sort();
    assert_eq!(names, mine, "the host nodes of the BCM nodes held");
    for n in &nodes {
        assert_eq!(n.label(TENANT), Some("p"));
        assert_eq!(n.label("gpufleet.dev/isolation"), Some("private"));
        assert!(n.taints.iter().any(|t| t.key == TENANT));
    }
    assert_eq!(tf.plan(&c).await.action, Action::NoOp);

    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert!(tf.state.is_null());
    assert_all_free(&bcm);
    for host in &mine {
        let (_, _, owner, wipes) = bcm.node(host);
        assert_eq!(wipes, 1, "{host} wiped once");
        assert_eq!(owner, None, "{host} keeps no tenant data");
    }
    assert_eq!(
        snapshot(&h),
        before,
        "host nodes as they were before the pool"
    );
    assert!(bcm.leaks().is_empty(), "{:?}", bcm.leaks());
}

#[tokio::test(start_paused = true)]
async fn two_tenants_in_turn_never_see_each_others_data() {
    let (_h, bcm, k) = setup();
    for round in 0..2 {
        for vc in ["p", "q"] {
            let mut tf = Terraform::new(&k);
            tf.apply_ok(&pool(&k, vc, 4)).await;
            assert_eq!(bcm_held(&bcm, vc).len(), 4, "round {round}, tenant {vc}");
            let d = tf.destroy().await;
            assert!(!d.has_error(), "{}", show(&d));
        }
    }
    assert_all_free(&bcm);
    assert!(bcm.leaks().is_empty(), "{:?}", bcm.leaks());
}

#[tokio::test(start_paused = true)]
async fn scale_down_releases_and_wipes_the_surplus() {
    let (h, bcm, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, "p", 3)).await;
    assert_eq!(tf.apply_ok(&pool(&k, "p", 1)).await, Action::Update);
    let mine = bcm_held(&bcm, "p");
    assert_eq!(mine.len(), 1);
    let nodes = held(&h, "p.train");
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].name, mine[0]);
    let wiped: Vec<&str> = A_NODES
        .iter()
        .copied()
        .filter(|n| bcm.node(n).3 == 1)
        .collect();
    assert_eq!(
        wiped.len(),
        2,
        "the two released nodes were wiped: {wiped:?}"
    );
    assert!(!wiped.contains(&mine[0].as_str()));
    assert!(!tf.destroy().await.has_error());
    assert_all_free(&bcm);
}

#[tokio::test(start_paused = true)]
async fn time_sliced_host_nodes_relabelled_by_the_operator_stay_the_pools() {
    let (h, bcm, k) = setup();
    let mut tf = Terraform::new(&k);
    let with_sharing = |count: i64| {
        config(
            &k,
            &[
                ("name", Value::string("train")),
                ("virtual_cluster_id", Value::string("vc-p/p")),
                ("gpu_product", Value::string(H100)),
                ("source", Value::string("bcm")),
                ("node_count", Value::int(count)),
                (
                    "sharing",
                    Value::object([
                        ("strategy", Value::string("time-slicing")),
                        ("replicas", Value::int(4)),
                        ("mig_config", Value::Null),
                    ]),
                ),
            ],
        )
    };
    tf.apply_ok(&with_sharing(2)).await;
    // The device plugin and GFD apply time-slicing on every H100 host node.
    for name in A_NODES {
        h.edit_node(name, |n| {
            n.labels
                .insert("nvidia.com/gpu.product".into(), format!("{H100}-SHARED"));
            n.labels
                .insert("nvidia.com/gpu.replicas".into(), "4".into());
            n.gpu_capacity *= 4;
        });
    }
    assert_eq!(tf.plan(&with_sharing(2)).await.action, Action::NoOp);
    assert_eq!(tf.state.get("gpus"), &Value::int(16));
    assert_eq!(tf.apply_ok(&with_sharing(3)).await, Action::Update);
    assert_eq!(held(&h, "p.train").len(), 3);
    assert_eq!(bcm_held(&bcm, "p").len(), 3);
    assert_eq!(tf.state.get("gpus"), &Value::int(24));
    assert!(!tf.destroy().await.has_error());
    assert_all_free(&bcm);
}

#[tokio::test(start_paused = true)]
async fn over_asking_is_refused_at_plan_naming_the_free_count() {
    let (h, bcm, k) = setup();
    let before = snapshot(&h);
    // One H100 server is someone else's.
    bcm.edit("gpu-004", |d| d.set_tenant(Some("other")));
    let mut tf = Terraform::new(&k);
    let p = tf.plan(&pool(&k, "p", 4)).await;
    let text = show(&p.diagnostics);
    assert!(p.diagnostics.has_error(), "{text}");
    assert!(text.contains("only 3 are free"), "{text}");
    assert!(text.contains("node_count"), "{text}");
    assert!(bcm_held(&bcm, "p").is_empty(), "nothing claimed");
    assert_eq!(snapshot(&h), before);
    // Exactly what is free fits.
    tf.apply_ok(&pool(&k, "p", 3)).await;
    assert_eq!(bcm_held(&bcm, "p").len(), 3);
}

#[tokio::test(start_paused = true)]
async fn nodes_claimed_by_an_unfinished_apply_are_adopted_not_claimed_again() {
    let (h, bcm, k) = setup();
    // What a provider killed after claiming (and powering off) one node leaves behind.
    bcm.edit("gpu-003", |d| {
        d.set_tenant(Some("p"));
        d.extra_values
            .insert(POOL_KEY.to_owned(), serde_json::json!("p.train"));
    });
    bcm.power_off_out_of_band("gpu-003");
    bcm.take_log();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, "p", 2)).await;
    let mine = bcm_held(&bcm, "p");
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert!(mine.contains(&"gpu-003".to_owned()), "{mine:?}");
    let claims = bcm
        .take_log()
        .iter()
        .filter(|l| l.starts_with("cmdevice.updateDevice"))
        .count();
    assert_eq!(claims, 1, "only the missing node is claimed");
    assert_eq!(bcm.node("gpu-003").0, "UP");
    assert_eq!(held(&h, "p.train").len(), 2);
    assert!(!tf.destroy().await.has_error());
    assert_all_free(&bcm);
}

#[tokio::test(start_paused = true)]
async fn autoscaling_is_refused_for_bcm_pools() {
    let (_h, _bcm, k) = setup();
    let mut c = pool(&k, "p", 1);
    if let Some(m) = c.as_object_mut() {
        m.insert("node_count".to_owned(), Value::Null);
        m.insert(
            "autoscaling".to_owned(),
            Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(2))]),
        );
    }
    let mut tf = Terraform::new(&k);
    let p = tf.plan(&c).await;
    assert!(
        show(&p.diagnostics).contains("autoscaling"),
        "{}",
        show(&p.diagnostics)
    );
}

#[tokio::test(start_paused = true)]
async fn servers_taken_between_plan_and_apply_fail_the_apply_and_claim_nothing() {
    let (h, bcm, k) = setup();
    let before = snapshot(&h);
    let tf = Terraform::new(&k);
    let p = support::plan(&k, &tf.ctx, &Value::Null, &pool(&k, "p", 3)).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    bcm.edit("gpu-001", |d| d.set_tenant(Some("other")));
    bcm.edit("gpu-002", |d| d.set_tenant(Some("other")));
    let a = support::apply(&k, &tf.ctx, &p).await;
    let text = show(&a.diagnostics);
    assert!(text.contains("only 2 are free"), "{text}");
    assert!(
        a.state.is_null(),
        "a create that holds nothing leaves no state"
    );
    assert!(bcm_held(&bcm, "p").is_empty());
    assert_eq!(snapshot(&h), before);
}

#[tokio::test(start_paused = true)]
async fn a_failed_wipe_keeps_the_pool_until_a_later_destroy_finishes_it() {
    let (h, bcm, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, "p", 1)).await;
    let host = bcm_held(&bcm, "p").remove(0);
    bcm.install_fault(&host, Some("INSTALLER_FAILED"));
    let d = tf.destroy().await;
    assert!(d.has_error(), "a failed wipe fails the destroy");
    assert!(!tf.state.is_null(), "the pool stays recorded");
    assert!(held(&h, "p.train").is_empty(), "the host node is released");
    assert_eq!(bcm.device(&host).releasing(), Some("p"), "not free yet");
    // A refresh keeps the pool: its server still has the tenant's data on it.
    tf.plan(&pool(&k, "p", 1)).await;
    assert!(
        !tf.state.is_null(),
        "the pool is still seen after a refresh"
    );
    assert_eq!(tf.state.get("status"), &Value::string("degraded"));
    bcm.install_fault(&host, None);
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert_all_free(&bcm);
    assert_eq!(bcm.node(&host).2, None, "wiped");
    assert!(bcm.leaks().is_empty(), "{:?}", bcm.leaks());
}

#[tokio::test(start_paused = true)]
async fn a_failed_install_is_an_error_naming_the_server_and_the_pool_stays_recorded() {
    let (_h, bcm, k) = setup();
    bcm.install_fault("gpu-001", Some("INSTALLER_FAILED"));
    let mut tf = Terraform::new(&k);
    let (_, d) = tf.apply(&pool(&k, "p", 1)).await;
    let text = show(&d);
    assert!(
        text.contains("gpu-001") && text.contains("INSTALLER_FAILED"),
        "{text}"
    );
    assert!(
        !tf.state.is_null(),
        "the claimed server is recorded, never orphaned"
    );
    assert!(tf.tainted);
    bcm.install_fault("gpu-001", None);
    // The tainted pool is replaced: its server is wiped and released, then claimed anew.
    assert_eq!(tf.apply_ok(&pool(&k, "p", 1)).await, Action::Replace);
    assert_eq!(bcm_held(&bcm, "p").len(), 1);
    assert!(!tf.destroy().await.has_error());
    assert_all_free(&bcm);
    assert!(bcm.leaks().is_empty(), "{:?}", bcm.leaks());
}

#[tokio::test(start_paused = true)]
async fn a_scale_down_whose_wipe_failed_is_finished_by_the_next_apply() {
    let (_h, bcm, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, "p", 2)).await;
    for host in bcm_held(&bcm, "p") {
        bcm.install_fault(&host, Some("INSTALLER_FAILED"));
    }
    let (_, d) = tf.apply(&pool(&k, "p", 1)).await;
    assert!(d.has_error(), "the wipe of the released server failed");
    let half_wiped: Vec<&str> = A_NODES
        .iter()
        .copied()
        .filter(|h| bcm.device(h).releasing() == Some("p"))
        .collect();
    assert_eq!(half_wiped.len(), 1, "{half_wiped:?}");
    for host in A_NODES {
        bcm.install_fault(host, None);
    }
    tf.apply_ok(&pool(&k, "p", 1)).await;
    assert_eq!(bcm.device(half_wiped[0]).releasing(), None, "wipe finished");
    assert_eq!(bcm.node(half_wiped[0]).2, None, "no tenant data left");
    assert_eq!(bcm_held(&bcm, "p").len(), 1);
    assert!(!tf.destroy().await.has_error());
    assert_all_free(&bcm);
    assert!(bcm.leaks().is_empty(), "{:?}", bcm.leaks());
}

#[tokio::test(start_paused = true)]
async fn the_gpu_product_comes_from_what_bcm_reports_not_from_extra_values() {
    let (_h, bcm, k) = setup();
    // A custom field claiming H100 on a B200 node changes nothing: BCM's system
    // information says B200.
    bcm.edit("gpu-b3-001", |d| {
        d.extra_values
            .insert("gpu_product".to_owned(), serde_json::json!(H100));
    });
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, "p", 4)).await;
    let mut mine = bcm_held(&bcm, "p");
    mine.sort();
    assert_eq!(mine, A_NODES, "only the H100 nodes");
    let p = tf.plan(&pool(&k, "p", 5)).await;
    assert!(
        support::single_error(&p.diagnostics).contains("only 0 are free"),
        "the B200 node does not count: {}",
        show(&p.diagnostics)
    );
}

#[tokio::test(start_paused = true)]
async fn a_release_whose_wipe_misses_a_disk_fails_and_the_node_stays_out_of_the_pool() {
    let (h, bcm, k) = setup();
    let mut tf = Terraform::new(&k);
    tf.apply_ok(&pool(&k, "p", 1)).await;
    let host = bcm_held(&bcm, "p").pop().expect("one node");
    bcm.set_disk_setup(&host, &support::DISKS[..4]);
    let d = tf.destroy().await;
    let msg = support::single_error(&d);
    assert!(msg.contains("/dev/nvme3n1"), "{msg}");
    assert!(!tf.state.is_null(), "the pool stays recorded");
    let dev = bcm.device(&host);
    assert_eq!(dev.tenant(), None);
    assert_eq!(dev.releasing(), Some("p"), "still marked as being wiped");
    assert_eq!(bcm.disk_data(&host)[4].1.as_deref(), Some("p"));

    // Another pool cannot have it meanwhile.
    let mut other = Terraform::new(&k);
    let p = other.plan(&pool(&k, "q", 4)).await;
    assert!(
        support::single_error(&p.diagnostics).contains("only 3 are free"),
        "{}",
        show(&p.diagnostics)
    );

    // Fixed disk setup: the next destroy finishes the wipe.
    bcm.set_disk_setup(&host, &support::DISKS);
    let d = tf.destroy().await;
    assert!(!d.has_error(), "{}", show(&d));
    assert_all_free(&bcm);
    assert!(held(&h, "p.train").is_empty());
    assert!(bcm.leaks().is_empty(), "{:?}", bcm.leaks());
}
