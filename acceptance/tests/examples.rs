//! Every configuration under `examples/` that a user would apply, applied as written with
//! the real Terraform CLI against the shared lab: apply, an empty second plan, destroy, and
//! every node left as it was found. (The quickstart has its own test, `quickstart.rs`, and
//! the catalog example is applied through the filesystem mirror in `distribution.rs`.)
//!
//! The examples claim nodes of the same products and the same free BCM servers, so they take
//! turns.

use std::sync::{Mutex, PoisonError};

use gpufleet_acceptance::{Session, assert_import_example_adopts, example};
use gpufleet_lab::{Lab, rest::KubeRest};
use serde_json::Value;

static TURN: Mutex<()> = Mutex::new(());

/// Applies `main_tf`, checks the plan is empty, runs `check`, destroys, and checks that
/// every node is as it was.
fn round_trip(main_tf: &str, check: impl FnOnce(&Session)) {
    round_trip_settling(main_tf, Session::assert_plan_empty, check);
}

/// [`round_trip`], with `settle` in place of the empty-plan check.
fn round_trip_settling(main_tf: &str, settle: impl FnOnce(&Session), check: impl FnOnce(&Session)) {
    let before = Lab::shared().node_marks().expect("list nodes");
    let s = Session::new(main_tf, Lab::shared().settings_env());
    let _cleanup = s.destroy_on_panic();
    s.apply();
    settle(&s);
    check(&s);
    s.destroy();
    assert!(s.addresses().is_empty(), "{:?}", s.addresses());
    assert_eq!(
        Lab::shared().node_marks().expect("list nodes"),
        before,
        "every node is left as it was found"
    );
}

#[test]
fn network_segment_example() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    round_trip(&example("network-segment"), |s| {
        assert!(
            s.addresses()
                .iter()
                .any(|a| a.starts_with("gpufleet_network_segment.")),
            "{:?}",
            s.addresses()
        );
    });
}

#[test]
fn bcm_node_example() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    round_trip(&example("bcm-node"), |s| {
        for i in 0..2 {
            let n = s.resource(&format!("gpufleet_bcm_node.worker[{i}]"));
            assert_eq!(n["status"], "UP", "{n:#}");
            assert_eq!(n["tenant"], "tenant-a");
        }
    });
}

#[test]
fn benchmark_example() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    round_trip(&example("benchmark"), |s| {
        for name in ["allreduce", "training_step"] {
            let r = s.resource(&format!("gpufleet_benchmark.{name}"));
            assert_eq!(r["status"], "passed", "{name}: {r:#}");
        }
        let health = s.resource("gpufleet_benchmark.health");
        assert!(
            health["status"] == "passed" || health["status"] == "failed",
            "{health:#}"
        );
        assert!(!s.output_raw("allreduce_busbw").is_empty());
    });
}

#[test]
fn tiers_example() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    round_trip(&example("tiers"), |s| {
        let show = s.ok(&["output", "-json", "-no-color", "tenants"]).json();
        assert_eq!(show["dev"], "vc-tier-dev/tier-dev", "{show}");
        assert_eq!(show["inference"], "vc-tier-inference/tier-inference");
        assert_eq!(show["regulated"], "vc-tier-regulated/tier-regulated");
    });
}

#[test]
fn fleet_example_of_twenty_tenants() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    round_trip_settling(&example("fleet"), settled_plan, |s| {
        let pools = s
            .addresses()
            .iter()
            .filter(|a| a.starts_with("gpufleet_gpu_node_pool."))
            .count();
        assert_eq!(pools, 20);
        let held: f64 = s.output_raw("held_fraction").parse().expect("a number");
        assert!(held > 0.0 && held <= 1.0, "{held}");
    });
}

/// The plan after applying many control planes at once on a small host. It must be empty,
/// unless a control plane really restarted since it was Ready (its pod counts a restart):
/// then the plan may update exactly those virtual clusters' `status`, and once applied, the
/// next plan is empty.
fn settled_plan(s: &Session) {
    // The plan's warnings say why a control plane reads as not ready.
    let planned = s.ok(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
    let plan = s.ok(&["show", "-json", "-no-color", "tfplan"]).json();
    let changed: Vec<&Value> = plan["resource_changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["change"]["actions"] != serde_json::json!(["no-op"]))
        .collect();
    if changed.is_empty() {
        return;
    }
    let host = KubeRest::from_kubeconfig(&Lab::shared().kubeconfig_path()).expect("host");
    let restarted: Vec<String> = host
        .list("/api/v1/pods?labelSelector=app%3Dvcluster")
        .expect("list the control-plane pods")
        .iter()
        .filter(|p| p["status"]["containerStatuses"][0]["restartCount"].as_u64() > Some(0))
        .filter_map(|p| {
            p["metadata"]["labels"]["release"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    for c in &changed {
        let name = c["change"]["before"]["name"].as_str().unwrap_or_default();
        assert!(
            c["type"] == "gpufleet_virtual_cluster"
                && c["change"]["actions"] == serde_json::json!(["update"])
                && restarted.iter().any(|r| r == name),
            "only a restarted control plane may change after apply; {} changed, restarted: \
             {restarted:?}\n{c:#}\n{}",
            c["address"],
            planned.stdout
        );
    }
    eprintln!(
        "[fleet] {} virtual clusters changed after their control planes restarted: {restarted:?}",
        changed.len()
    );
    s.apply();
    s.assert_plan_empty();
}

#[test]
fn import_example_adopts_existing_objects_unchanged() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let before = Lab::shared().node_marks().expect("list nodes");
    assert_import_example_adopts(&example("import"), |main_tf| {
        Session::new(main_tf, Lab::shared().settings_env())
    });
    assert_eq!(
        Lab::shared().node_marks().expect("list nodes"),
        before,
        "every node is left as it was found"
    );
}
