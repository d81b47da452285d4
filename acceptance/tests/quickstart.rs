//! The quickstart (`examples/quickstart`), applied as written with the real Terraform CLI
//! against the shared lab, and then used the way a tenant would: each tenant's kubeconfig
//! reaches its own API server, the dedicated tenant sees only its pool's nodes and its GPU pod
//! lands on one of them, the shared tenant's GPU pod cannot land there, and destroy leaves
//! every node as it was.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use gpufleet_acceptance::{
    Session,
    tenant::{gpu_pod, tenant_client},
    workspace_root,
};
use gpufleet_lab::{Lab, rest::KubeRest, tenant_forward::TenantForward};

/// Labels, taints and cordon of every node, by name.
fn nodes(host: &KubeRest) -> BTreeMap<String, String> {
    host.node_marks().expect("list nodes")
}

/// Polls `f` every half second until it returns something, for at most two minutes.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Virtual cluster `name` (in `vc-<name>`), reached as a user outside the host cluster
/// reaches a ClusterIP-only one, with the kubeconfig of Terraform output `output`.
fn kubeconfig(dir: &Path, s: &Session, output: &str, name: &str) -> (KubeRest, TenantForward) {
    tenant_client(dir, &format!("vc-{name}"), name, &s.output_raw(output))
}

#[test]
fn quickstart_gives_two_isolated_tenants_and_cleans_up() {
    let lab = Lab::shared();
    let host = KubeRest::from_kubeconfig(&lab.kubeconfig_path()).expect("host client");
    let before = nodes(&host);

    let main_tf = std::fs::read_to_string(workspace_root().join("examples/quickstart/main.tf"))
        .expect("the quickstart");
    let s = Session::new(&main_tf, lab.settings_env());
    let started = Instant::now();
    s.apply();
    eprintln!("[figures] quickstart apply: {:?}", started.elapsed());
    s.assert_plan_empty();

    let pool = s.resource("gpufleet_gpu_node_pool.prod_h100");
    let pool_nodes: Vec<String> = pool["nodes"]
        .as_array()
        .expect("pool nodes")
        .iter()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    assert_eq!(pool_nodes.len(), 2, "{pool:#}");
    assert_eq!(
        pool["allocatable"]["nvidia.com/gpu"], 64,
        "2 nodes x 8 GPUs x 4 replicas"
    );

    // Nothing of another tenant runs on prod's dedicated nodes (the pool evicts what was
    // there when it claimed them); pods leave by graceful deletion.
    for node in &pool_nodes {
        let foreign = wait_for("other tenants' pods to leave prod's nodes", || {
            let pods = host
                .list(&format!("/api/v1/pods?fieldSelector=spec.nodeName={node}"))
                .ok()?;
            let foreign: Vec<String> = pods
                .iter()
                .filter(|p| p["metadata"]["namespace"] != "vc-prod")
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            foreign.is_empty().then_some(foreign)
        });
        assert!(foreign.is_empty(), "{node}: {foreign:?}");
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let (prod, _prod_forward) = kubeconfig(dir.path(), &s, "prod_kubeconfig", "prod");
    let (dev, _dev_forward) = kubeconfig(dir.path(), &s, "dev_kubeconfig", "dev");

    // The dedicated tenant's API lists exactly its pool's nodes, nothing else of the host.
    let seen: Vec<String> = wait_for("prod's nodes to sync", || {
        let mut names: Vec<String> = prod
            .list("/api/v1/nodes")
            .ok()?
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        (names.len() == pool_nodes.len()).then_some(names)
    });
    assert_eq!(seen, pool_nodes);

    // Pods of an earlier, interrupted run of this test may still be in a kept lab.
    for (tenant, pod) in [(&prod, "train"), (&dev, "notebook")] {
        let path = format!("/api/v1/namespaces/default/pods/{pod}");
        if tenant.delete(&path).is_ok() {
            wait_for("a leftover pod to go", || tenant.get(&path).err());
        }
    }

    // A GPU pod of prod lands on one of prod's nodes.
    prod.create("/api/v1/namespaces/default/pods", &gpu_pod("train"))
        .expect("prod creates a pod");
    let node = wait_for("prod's pod to be scheduled", || {
        let pod = prod.get("/api/v1/namespaces/default/pods/train").ok()?;
        pod["spec"]["nodeName"].as_str().map(str::to_owned)
    });
    assert!(
        pool_nodes.contains(&node),
        "{node} is not one of {pool_nodes:?}"
    );

    // The shared tenant cannot reach prod's nodes: its pod is not scheduled there (no shared
    // node exists in the quickstart, so it stays unschedulable).
    dev.create("/api/v1/namespaces/default/pods", &gpu_pod("notebook"))
        .expect("dev creates a pod");
    let reason = wait_for("the scheduler's verdict on dev's pod", || {
        let pods = host.list("/api/v1/namespaces/vc-dev/pods").ok()?;
        let pod = pods
            .iter()
            .find(|p| p["metadata"]["name"] == "notebook-x-default-x-dev")?;
        assert!(
            pod["spec"]["nodeName"].is_null(),
            "dev's pod was placed: {pod:#}"
        );
        pod["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            .map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
    });
    assert_eq!(reason, "Unschedulable");

    // Tenants see only their own objects.
    let missing = dev
        .get("/api/v1/namespaces/default/pods/train")
        .expect_err("dev must not see prod's pod");
    assert!(missing.is_not_found(), "{missing}");

    s.destroy();
    assert_eq!(nodes(&host), before, "destroy leaves every node as it was");
    for ns in ["vc-dev", "vc-prod"] {
        let gone = host
            .get(&format!("/api/v1/namespaces/{ns}"))
            .expect_err("namespace deleted");
        assert!(gone.is_not_found(), "{ns}: {gone}");
    }
}
