//! `gpufleet_network_segment` with the real Terraform CLI against the lab's Netris
//! emulator (the shared lab, [`Lab::shared`]): life cycle, import, drift repair,
//! conflicts, injected faults, an interruption after every call, plan-time validation and
//! the example.
//!
//! Every test has names, CIDRs and VLANs of its own (the emulator is shared by every test
//! of the run), and checks the controller's objects through the admin plane
//! (`GET /_admin/state`), filtered to its own names. Tests that inject faults take a
//! process-wide lock, as faults apply to every client of the emulator.

use std::sync::{Mutex, MutexGuard};

use gpufleet_acceptance::{
    Output, Session,
    emulators::{netris_admin, netris_curl, netris_login},
    sweep, workspace_root,
};
use gpufleet_lab::Lab;
use serde_json::{Value, json};

const REQUIRED_PROVIDERS: &str = r#"
terraform {
  required_providers {
    gpufleet = { source = "gpufleet/gpufleet" }
  }
}

provider "gpufleet" {}
"#;

/// Serialises the tests that inject faults (faults hit every client of the emulator),
/// and keeps the other tests off the emulator while a fault is in force.
static FAULTS: Mutex<()> = Mutex::new(());

fn fault_lock() -> MutexGuard<'static, ()> {
    FAULTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Terraform run with the lab's settings.
struct Tf(Session);

impl std::ops::Deref for Tf {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl Tf {
    fn new(body: &str) -> Self {
        Tf(Session::new(
            &format!("{REQUIRED_PROVIDERS}\n{body}"),
            Lab::shared().settings_env(),
        ))
    }

    fn write(&self, body: &str) {
        self.0.write(&format!("{REQUIRED_PROVIDERS}\n{body}"));
    }

    fn err(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            !out.success(),
            "terraform {args:?} was expected to fail:\n{out}"
        );
        out
    }

    fn apply_err(&self) -> Output {
        self.err(&["apply", "-auto-approve", "-input=false", "-no-color"])
    }

    fn plan_err(&self) -> Output {
        self.err(&["plan", "-input=false", "-no-color"])
    }

    fn plan_json(&self) -> Value {
        self.ok(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
        self.ok(&["show", "-json", "-no-color", "tfplan"]).json()
    }

    fn show_json(&self) -> Value {
        self.ok(&["show", "-json", "-no-color"]).json()
    }

    /// `plan -detailed-exitcode` must report changes.
    fn assert_plan_changes(&self) -> Output {
        let out = self.run(&["plan", "-detailed-exitcode", "-input=false", "-no-color"]);
        assert_eq!(
            out.status_code, 2,
            "expected planned changes (exit 2):\n{out}"
        );
        out
    }
}

/// The actions planned for `address`.
fn actions(plan: &Value, address: &str) -> Vec<String> {
    plan["resource_changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|rc| rc["address"] == address)
        .map(|rc| {
            rc["change"]["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The segment's attributes in `terraform show -json`.
fn state_of(show: &Value, address: &str) -> Value {
    show["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["address"] == address)
        .map(|r| r["values"].clone())
        .unwrap_or(Value::Null)
}

fn fault(body: &Value) {
    netris_admin("POST", "/_admin/fault", Some(body));
}

fn clear_faults() {
    netris_admin("DELETE", "/_admin/fault", None);
}

/// The controller's allocations, subnets and V-Nets whose names contain `tag`, without
/// the fields that change by themselves (provisioning status, timestamps).
fn objects(tag: &str) -> Value {
    let state = netris_admin("GET", "/_admin/state", None);
    let pick = |kind: &str| -> Vec<Value> {
        state[kind]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["name"].as_str().is_some_and(|n| n.contains(tag)))
            .map(|o| {
                let mut o = o.clone();
                if let Some(m) = o.as_object_mut() {
                    m.retain(|k, _| {
                        !matches!(
                            k.as_str(),
                            "provisioning" | "status" | "modifiedDate" | "createdDate" | "ports"
                        )
                    });
                }
                o
            })
            .collect()
    };
    json!({
        "allocations": pick("allocations"),
        "subnets": pick("subnets"),
        "vnets": pick("vnets"),
    })
}

fn count(objs: &Value, kind: &str) -> usize {
    objs[kind].as_array().map_or(0, Vec::len)
}

/// Exactly one allocation, subnet and V-Net for the segment `name`.
fn assert_exactly_one(name: &str) {
    let objs = objects(name);
    for kind in ["allocations", "subnets", "vnets"] {
        assert_eq!(count(&objs, kind), 1, "{kind} of {name}: {objs:#}");
    }
}

/// The hostnames of the n-th and m-th fleet nodes at site-a.
fn hosts(n: usize) -> Vec<String> {
    Lab::shared()
        .fleet()
        .nodes()
        .iter()
        .filter(|node| node.site == "site-a")
        .skip(n)
        .take(2)
        .map(|node| node.name.clone())
        .collect()
}

fn segment(name: &str, tenant: &str, cidr: &str, extra: &str, members: &str) -> String {
    format!(
        r#"
resource "gpufleet_network_segment" "s" {{
  name   = "{name}"
  tenant = "{tenant}"
  vpc    = "Default"
  site   = "site-a"
  cidr   = "{cidr}"
  {extra}
  members = [{members}]
}}
"#
    )
}

fn host_member(h: &str) -> String {
    format!(r#"{{ hostname = "{h}", untagged = true }}"#)
}

#[test]
fn life_cycle_update_replace_import_destroy() {
    let _g = fault_lock();
    let name = "acc-life";
    let before = objects(name);
    let h = hosts(10);
    let tf = Tf::new(&segment(
        name,
        "tenant-a",
        "10.101.0.0/24",
        "",
        &host_member(&h[0]),
    ));
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one(name);
    let st = state_of(&tf.show_json(), "gpufleet_network_segment.s");
    assert_eq!(st["status"], "active", "{st:#}");
    assert_eq!(st["gateway"], "10.101.0.1", "{st:#}");
    assert!(
        !st["attached_ports"].as_array().expect("ports").is_empty(),
        "{st:#}"
    );

    // Members change in place.
    let both = format!("{}, {}", host_member(&h[0]), host_member(&h[1]));
    tf.write(&segment(name, "tenant-a", "10.101.0.0/24", "", &both));
    let plan = tf.plan_json();
    assert_eq!(actions(&plan, "gpufleet_network_segment.s"), ["update"]);
    let id_before = state_of(&tf.show_json(), "gpufleet_network_segment.s")["id"].clone();
    tf.apply();
    tf.assert_plan_empty();
    let st = state_of(&tf.show_json(), "gpufleet_network_segment.s");
    assert_eq!(st["id"], id_before, "updated in place");
    assert_eq!(
        st["attached_ports"].as_array().map(Vec::len),
        Some(4),
        "{st:#}"
    );

    // A new CIDR replaces it.
    tf.write(&segment(name, "tenant-a", "10.102.0.0/24", "", &both));
    let plan = tf.plan_json();
    let acts = actions(&plan, "gpufleet_network_segment.s");
    assert!(
        acts == ["delete", "create"] || acts == ["create", "delete"],
        "{acts:?}"
    );
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one(name);
    let objs = objects(name);
    assert_eq!(
        objs["allocations"][0]["prefix"], "10.102.0.0/24",
        "{objs:#}"
    );

    // Import into a fresh directory, by name, with the configuration as written: the
    // V-Net's tags say which ports came from which hostname, so the members import as the
    // two hostname members they were.
    let imported = Tf::new(&segment(name, "tenant-a", "10.102.0.0/24", "", &both));
    imported.ok(&[
        "import",
        "-input=false",
        "-no-color",
        "gpufleet_network_segment.s",
        name,
    ]);
    imported.assert_plan_empty();

    tf.destroy();
    assert_eq!(
        objects(name),
        before,
        "destroy leaves the controller as it was"
    );
}

#[test]
fn drift_is_repaired() {
    let _g = fault_lock();
    let name = "acc-drift";
    let tf = Tf::new(&segment(
        name,
        "tenant-b",
        "10.111.0.0/24",
        "",
        &host_member(&hosts(12)[0]),
    ));
    tf.apply();
    let st = state_of(&tf.show_json(), "gpufleet_network_segment.s");
    let id = st["id"].as_str().expect("id").to_owned();
    delete_vnet_out_of_band(&id);
    assert_eq!(count(&objects(name), "vnets"), 0);
    // The segment still owns its allocation and subnet, so it is not gone: apply recreates
    // the V-Net on them.
    let plan = tf.assert_plan_changes();
    assert!(plan.contains("will be updated in-place"), "{plan}");
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one(name);
    tf.destroy();
    assert_eq!(count(&objects(name), "vnets"), 0);
}

/// Deletes the segment's V-Net through the controller's API, as an operator (or a destroy
/// killed right after that call) would.
fn delete_vnet_out_of_band(id: &str) {
    let jar = netris_login();
    let (status, body) = netris_curl(
        "DELETE",
        &format!("/api/v2/vnet/{id}"),
        None,
        Some(jar.path()),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn destroy_after_the_vnet_went_removes_the_allocation_and_subnet() {
    let _g = fault_lock();
    let name = "acc-vnet-gone";
    let before = objects(name);
    let tf = Tf::new(&segment(
        name,
        "tenant-b",
        "10.113.0.0/24",
        "",
        &host_member(&hosts(24)[0]),
    ));
    tf.apply();
    let st = state_of(&tf.show_json(), "gpufleet_network_segment.s");
    delete_vnet_out_of_band(st["id"].as_str().expect("id"));
    let left = objects(name);
    assert_eq!(
        (
            count(&left, "allocations"),
            count(&left, "subnets"),
            count(&left, "vnets")
        ),
        (1, 1, 0),
        "{left:#}"
    );
    let out = tf.destroy();
    assert!(out.contains("1 destroyed"), "{out}");
    assert_eq!(objects(name), before, "the controller is as it was found");
}

#[test]
fn conflicting_vlan_and_port_fail_clearly_and_leave_the_first_alone() {
    let _g = fault_lock();
    let h = hosts(14);
    let first = Tf::new(&segment(
        "acc-vlan-1",
        "tenant-c",
        "10.121.0.0/24",
        "vlan_id = 3001",
        &host_member(&h[0]),
    ));
    first.apply();
    let first_state = state_of(&first.show_json(), "gpufleet_network_segment.s");
    let first_objs = objects("acc-vlan-1");

    let second = Tf::new(&segment(
        "acc-vlan-2",
        "tenant-c",
        "10.122.0.0/24",
        "vlan_id = 3001",
        &host_member(&h[1]),
    ));
    let out = second.apply_err();
    assert!(
        out.combined().contains("3001"),
        "the error names the VLAN:\n{out}"
    );

    // The same port in a second segment.
    let third = Tf::new(&segment(
        "acc-port-3",
        "tenant-c",
        "10.123.0.0/24",
        "",
        &host_member(&h[0]),
    ));
    let out = third.apply_err();
    let text = out.combined();
    assert!(
        text.contains("swp") || text.contains(&h[0]),
        "the error names the port:\n{out}"
    );

    assert_eq!(
        state_of(&first.show_json(), "gpufleet_network_segment.s"),
        first_state
    );
    assert_eq!(objects("acc-vlan-1"), first_objs);
    first.assert_plan_empty();

    // Whatever the failed applies left is recorded in their state: destroy cleans up.
    second.destroy();
    third.destroy();
    first.destroy();
    for n in ["acc-vlan-1", "acc-vlan-2", "acc-port-3"] {
        let objs = objects(n);
        for kind in ["allocations", "subnets", "vnets"] {
            assert_eq!(count(&objs, kind), 0, "{n}: {objs:#}");
        }
    }
}

#[test]
fn faults_converge_without_duplicates() {
    let _g = fault_lock();
    clear_faults();
    let h = hosts(16);

    // 503 on V-Net create, twice.
    let name = "acc-fault-503";
    let tf = Tf::new(&segment(
        name,
        "tenant-d",
        "10.131.0.0/24",
        "",
        &host_member(&h[0]),
    ));
    fault(&json!({"route": "POST /api/v2/vnet", "status": 503, "count": 2}));
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    if !out.success() {
        assert!(
            out.combined().contains("503") || out.combined().contains("Unavailable"),
            "{out}"
        );
    }
    clear_faults();
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one(name);
    tf.destroy();

    // Provisioning never finishes: the create times out, naming the segment.
    let name = "acc-fault-stuck";
    let tf = Tf::new(&segment(
        name,
        "tenant-d",
        "10.132.0.0/24",
        "timeouts { create = \"3s\" }",
        &host_member(&h[1]),
    ));
    fault(&json!({"provisioning_stuck": true}));
    let out = tf.apply_err();
    clear_faults();
    let text = out.combined();
    assert!(text.contains(name), "{out}");
    assert!(
        text.to_lowercase().contains("timeout") || text.contains("timed out"),
        "{out}"
    );
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one(name);

    // Sessions expire before the next apply: the client logs in again.
    fault(&json!({"expire_sessions": true}));
    tf.write(&segment(
        name,
        "tenant-d",
        "10.132.0.0/24",
        "timeouts { create = \"3s\" }\n  mtu = 1500",
        &host_member(&h[1]),
    ));
    tf.apply();
    tf.assert_plan_empty();
    tf.destroy();
    assert_eq!(count(&objects(name), "vnets"), 0);
}

#[test]
fn bad_input_fails_at_plan_and_leaves_the_controller_alone() {
    let _g = fault_lock();
    let before = netris_admin("GET", "/_admin/state", None);
    let keep = |s: &Value| json!({"a": s["allocations"], "s": s["subnets"], "v": s["vnets"]});
    let tf = Tf::new(&segment(
        "acc-bad",
        "tenant-a",
        "10.141.0.0/24",
        "gateway = \"10.9.9.1\"",
        "",
    ));
    let out = tf.plan_err();
    assert!(out.combined().contains("gateway"), "{out}");
    tf.write(&segment(
        "acc-bad",
        "tenant-a",
        "10.141.0.0/24",
        "vlan_id = 5000",
        "",
    ));
    let out = tf.plan_err();
    assert!(out.combined().contains("vlan_id"), "{out}");
    assert_eq!(
        keep(&netris_admin("GET", "/_admin/state", None)),
        keep(&before)
    );
}

#[test]
fn network_segment_example_applies_and_destroys() {
    let _g = fault_lock();
    let example =
        std::fs::read_to_string(workspace_root().join("examples/network-segment/main.tf"))
            .expect("examples/network-segment/main.tf");
    let tf = Session::new(&example, Lab::shared().settings_env());
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one("tenant-a-net");
    let out = tf.ok(&["output", "-json", "-no-color"]).json();
    assert_eq!(out["segment"]["value"]["status"], "active", "{out:#}");
    tf.destroy();
    assert_eq!(count(&objects("tenant-a-net"), "vnets"), 0);
}

#[test]
fn latency_beyond_the_timeout_converges_without_duplicates() {
    let _g = fault_lock();
    clear_faults();
    let h = hosts(20);
    let name = "acc-fault-slow";
    let tf = Tf::new(&segment(
        name,
        "tenant-d",
        "10.133.0.0/24",
        "timeouts { create = \"4s\" }",
        &host_member(&h[0]),
    ));
    // The controller creates the V-Net at once but answers after 8 s: the client gives up
    // without knowing whether the create happened.
    fault(&json!({"route": "POST /api/v2/vnet", "latency_ms": 8000}));
    let out = tf.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    clear_faults();
    if !out.success() {
        assert!(out.combined().contains(name), "{out}");
    }
    tf.apply();
    tf.assert_plan_empty();
    assert_exactly_one(name);
    tf.destroy();
    assert_eq!(count(&objects(name), "vnets"), 0);
}

#[test]
fn session_expiring_mid_apply_is_survived() {
    let _g = fault_lock();
    clear_faults();
    let h = hosts(22);
    let name = "acc-fault-session";
    let tf = Tf::new(&segment(
        name,
        "tenant-d",
        "10.134.0.0/24",
        "",
        &host_member(&h[0]),
    ));
    // Hold the apply in its provisioning wait, expire every session under it, then let
    // provisioning finish: the next poll meets a 401 and must log in again.
    fault(&json!({"provisioning_stuck": true}));
    let injector = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(3));
        fault(&json!({"expire_sessions": true}));
        std::thread::sleep(std::time::Duration::from_secs(1));
        clear_faults();
    });
    tf.apply();
    injector.join().expect("fault injector");
    tf.assert_plan_empty();
    assert_exactly_one(name);
    tf.destroy();
    assert_eq!(count(&objects(name), "vnets"), 0);
}

/// The Netris emulator as the sweep drives it: every `/api` call refused with 400.
struct Netris {
    tag: &'static str,
}

impl sweep::Controller for Netris {
    fn admin(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        netris_admin(method, path, body)
    }

    fn refusal(&self) -> Value {
        json!({"status": 400, "message": "refused from here on"})
    }

    fn owned(&self) -> Vec<String> {
        let objs = objects(self.tag);
        ["allocations", "subnets", "vnets"]
            .iter()
            .flat_map(|kind| {
                objs[kind]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |o| format!("{kind} {}", o["name"].as_str().unwrap_or_default()))
            })
            .collect()
    }
}

#[test]
fn interrupted_at_any_call_converges_without_orphans_or_duplicates() {
    let _g = fault_lock();
    clear_faults();
    let h = hosts(16);
    let name = "acc-sweep-seg";
    let with = |cidr: &str, members: &[&String]| {
        let members: Vec<String> = members.iter().map(|m| host_member(m)).collect();
        format!(
            "{REQUIRED_PROVIDERS}\n{}",
            segment(name, "tenant-d", cidr, "", &members.join(", "))
        )
    };
    let one = with("10.140.0.0/24", &[&h[0]]);
    let two = with("10.140.0.0/24", &[&h[0], &h[1]]);
    let moved = with("10.141.0.0/24", &[&h[0]]);
    let netris = Netris { tag: name };
    let session = |main_tf: &str| Session::new(main_tf, Lab::shared().settings_env());
    for (op, before, target) in [
        ("create", vec![], Some(one.clone())),
        ("update", vec![one.clone()], Some(two)),
        ("replace", vec![one.clone()], Some(moved)),
        ("delete", vec![one.clone()], None),
    ] {
        let case = sweep::Case {
            kind: "network_segment",
            op,
            before,
            target,
        };
        sweep::sweep_both(&case, &netris, session);
    }
}
