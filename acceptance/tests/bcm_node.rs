//! `gpufleet_bcm_node` and `gpufleet_bcm_nodes` with the real Terraform CLI against the lab's
//! BCM emulator (the shared lab, [`Lab::shared`]): life cycle with zero leaks, wiping between
//! tenants (and the leak without it), ten nodes in parallel, a failed install, the read-only
//! profile, a wrong CA, a provider killed mid-provisioning, and the example.
//!
//! Every test uses hostnames of its own (the emulator is shared by every test of the run) and
//! checks the emulator through its admin plane (`/_admin/state`, `/_admin/leaks`,
//! `/_admin/journal`). All tests take one process-wide lock, as install faults and the leak
//! checks must not interleave.

use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gpufleet_acceptance::{
    Output, Session,
    emulators::{bcm_admin as admin, bcm_call, bcm_device, bcm_power_calls as power_calls},
    sweep, terraform_launcher, workspace_root,
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

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Terraform run with the lab's settings (some of them replaced).
struct Tf(Session);

impl std::ops::Deref for Tf {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl Tf {
    fn new(body: &str) -> Self {
        Self::with_env(body, &[])
    }

    fn with_env(body: &str, overrides: &[(&str, String)]) -> Self {
        let mut env = Lab::shared().settings_env();
        for (k, v) in overrides {
            env.retain(|(name, _)| name != k);
            env.push(((*k).to_owned(), v.clone()));
        }
        Tf(Session::new(&format!("{REQUIRED_PROVIDERS}\n{body}"), env))
    }

    fn write(&self, body: &str) {
        self.0.write(&format!("{REQUIRED_PROVIDERS}\n{body}"));
    }

    fn apply_err(&self) -> Output {
        let out = self.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
        assert!(!out.success(), "apply was expected to fail:\n{out}");
        out
    }

    fn resources(&self) -> Vec<Value> {
        let show = self.ok(&["show", "-json", "-no-color"]).json();
        show["values"]["root_module"]["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// The emulator's record of one node: status, power, data owner, …
fn emulated(hostname: &str) -> Value {
    let state = admin("GET", "/_admin/state", None);
    state["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["hostname"] == hostname)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The device object the emulator stores for `hostname`.
fn device(hostname: &str) -> Value {
    let state = admin("GET", "/_admin/state", None);
    state["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["hostname"] == hostname)
        .cloned()
        .unwrap_or(Value::Null)
}

fn leaks_of(hostname: &str) -> Vec<Value> {
    admin("GET", "/_admin/leaks", None)
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["hostname"] == hostname)
        .cloned()
        .collect()
}

/// How many `updateDevice` calls the journal holds for `hostname`.
fn updates_of(hostname: &str) -> usize {
    admin("GET", "/_admin/journal", None)
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["call"] == "updateDevice" && e["args"].to_string().contains(hostname))
        .count()
}

/// The hostnames of the fleet's nodes in `rack`, last first (tests take them from the end,
/// away from what other features pick first).
fn rack(rack: &str) -> Vec<String> {
    let mut names: Vec<String> = Lab::shared()
        .fleet()
        .nodes()
        .iter()
        .filter(|n| n.rack == rack)
        .map(|n| n.name.clone())
        .collect();
    names.sort();
    names.reverse();
    names
}

fn node(name: &str, hostname: &str, tenant: &str, extra: &str) -> String {
    format!(
        r#"
resource "gpufleet_bcm_node" "{name}" {{
  hostname       = "{hostname}"
  tenant         = "{tenant}"
  category       = "gpu-compute"
  software_image = "ubuntu2404-cuda12.8"
  {extra}
}}
"#
    )
}

#[test]
fn life_cycle_wipes_between_tenants_and_leaks_only_without_wipe() {
    let _g = lock();
    let b3 = rack("rack-b3");
    let (host, unwiped) = (&b3[0], &b3[1]);

    let tf = Tf::new(&node("n", host, "acc-tenant-a", ""));
    tf.apply();
    tf.assert_plan_empty();
    let st = tf.resource("gpufleet_bcm_node.n");
    assert_eq!(st["status"], "UP", "{st:#}");
    assert_eq!(st["rack"], "rack-b3", "{st:#}");
    assert_eq!(st["gpu_product"], "NVIDIA-B200", "{st:#}");
    assert_eq!(
        device(host)["extra_values"]["gpufleet_tenant"],
        "acc-tenant-a"
    );

    // Category in place, then the image (a reprovisioning reboot).
    tf.write(&node("n", host, "acc-tenant-a", "").replace("gpu-compute", "gpu-inference"));
    tf.apply();
    tf.assert_plan_empty();
    tf.write(
        &node("n", host, "acc-tenant-a", "")
            .replace("gpu-compute", "gpu-inference")
            .replace("cuda12.8", "cuda13.0"),
    );
    tf.apply();
    tf.assert_plan_empty();
    assert_eq!(tf.resource("gpufleet_bcm_node.n")["status"], "UP");

    // Import into a fresh directory by hostname.
    let imported = Tf::new(
        &node("n", host, "acc-tenant-a", "")
            .replace("gpu-compute", "gpu-inference")
            .replace("cuda12.8", "cuda13.0"),
    );
    imported.ok(&[
        "import",
        "-input=false",
        "-no-color",
        "gpufleet_bcm_node.n",
        host,
    ]);
    imported.assert_plan_empty();

    tf.destroy();
    let n = emulated(host);
    assert_eq!(n["power"], "OFF", "rack-b3 idles off: {n:#}");
    assert!(device(host)["extra_values"]["gpufleet_tenant"].is_null());

    // Tenant B after a wiping destroy: no leak.
    let b = Tf::new(&node("n", host, "acc-tenant-b", ""));
    b.apply();
    b.destroy();
    assert_eq!(leaks_of(host), Vec::<Value>::new());

    // Without the wipe, tenant B comes up on tenant A's data: the emulator sees the leak.
    // (The emulator keeps its record across runs of a kept lab, so count only new leaks.)
    let earlier = leaks_of(unwiped).len();
    let a = Tf::new(&node(
        "n",
        unwiped,
        "acc-tenant-a",
        "wipe_on_destroy = false",
    ));
    a.apply();
    a.destroy();
    let b = Tf::new(&node("n", unwiped, "acc-tenant-b", ""));
    b.apply();
    let leaks = leaks_of(unwiped);
    assert_eq!(leaks.len(), earlier + 1, "{leaks:#?}");
    assert_eq!(leaks[earlier]["from"], "acc-tenant-a");
    assert_eq!(leaks[earlier]["to"], "acc-tenant-b");
    b.destroy();
}

/// Gives the device of `hostname` a disk setup naming `devices` (a whole-object update).
fn set_disk_setup(hostname: &str, devices: &[&str]) {
    let mut d = bcm_device(hostname);
    let blocks: String = devices
        .iter()
        .map(|dev| format!("<device><blockdev>{dev}</blockdev></device>"))
        .collect();
    d["disksetup"] = json!(format!("<diskSetup>{blocks}</diskSetup>"));
    let r = bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    assert_eq!(r["success"], true, "{r}");
}

/// Each disk of `hostname` with whose data is on it, from the emulator's state.
fn disk_data(hostname: &str) -> Vec<(String, Value)> {
    emulated(hostname)["disks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                d["device"].as_str().unwrap_or_default().to_owned(),
                d["data_owner"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_dgx_like_node_is_released_with_all_four_data_disks_cleared_or_not_at_all() {
    let _g = lock();
    let b3 = rack("rack-b3");
    let host = &b3[3];
    const DISKS: [&str; 5] = [
        "/dev/sda",
        "/dev/nvme0n1",
        "/dev/nvme1n1",
        "/dev/nvme2n1",
        "/dev/nvme3n1",
    ];
    let all: Vec<String> = DISKS.iter().map(|d| (*d).to_owned()).collect();

    // Every disk of the node's disk setup is cleared.
    let tf = Tf::new(&node("n", host, "acc-dgx-a", ""));
    tf.apply();
    let data = disk_data(host);
    assert_eq!(
        data.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>(),
        all,
        "an OS disk and four NVMe data disks"
    );
    assert!(data.iter().all(|(_, o)| o == "acc-dgx-a"), "{data:?}");
    tf.destroy();
    assert!(
        disk_data(host).iter().all(|(_, o)| o.is_null()),
        "{:?}",
        disk_data(host)
    );

    // One data disk left out of the disk setup: the check names it and the release fails;
    // the node is not free, and its disk still holds the tenant's data.
    let tf = Tf::new(&node("n", host, "acc-dgx-b", ""));
    tf.apply();
    set_disk_setup(host, &DISKS[..4]);
    let out = tf.run(&["destroy", "-auto-approve", "-input=false", "-no-color"]);
    assert!(!out.success(), "the destroy must fail:\n{out}");
    let text = out.to_string();
    assert!(text.contains("/dev/nvme3n1"), "{text}");
    assert_eq!(
        device(host)["extra_values"]["gpufleet_releasing"],
        "acc-dgx-b"
    );
    assert_eq!(disk_data(host)[4].1, "acc-dgx-b");
    let free = Tf::new(
        r#"data "gpufleet_bcm_nodes" "f" {
  free_only = true
  rack      = "rack-b3"
}
output "free" { value = join(",", data.gpufleet_bcm_nodes.f.hostnames) }"#,
    );
    free.apply();
    let listed = free.output_raw("free");
    assert!(
        !listed.split(',').any(|h| h == host.as_str()),
        "{host} is not free: {listed}"
    );

    // Disk setup complete again: the next destroy wipes every disk and frees the node.
    set_disk_setup(host, &DISKS);
    tf.destroy();
    assert!(disk_data(host).iter().all(|(_, o)| o.is_null()));
    assert!(device(host)["extra_values"]["gpufleet_releasing"].is_null());
}

#[test]
fn ten_nodes_in_parallel_all_come_up() {
    let _g = lock();
    let hosts: Vec<String> = rack("rack-b1").into_iter().take(10).collect();
    let list = hosts
        .iter()
        .map(|h| format!("\"{h}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let tf = Tf::new(&format!(
        r#"
locals {{ hosts = [{list}] }}
resource "gpufleet_bcm_node" "n" {{
  for_each = toset(local.hosts)
  hostname = each.key
  tenant   = "acc-tenant-par"
  category = "gpu-compute"
}}
data "gpufleet_bcm_nodes" "held" {{
  category = "gpu-compute"
  depends_on = [gpufleet_bcm_node.n]
}}
output "held" {{
  value = [for n in data.gpufleet_bcm_nodes.held.nodes : n.hostname if n.tenant == "acc-tenant-par"]
}}
"#
    ));
    let started = Instant::now();
    tf.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-parallelism=10",
    ]);
    eprintln!(
        "[figures] 10 nodes created in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let resources = tf.resources();
    let up = resources
        .iter()
        .filter(|r| r["type"] == "gpufleet_bcm_node" && r["values"]["status"] == "UP")
        .count();
    assert_eq!(up, 10);
    let held = tf.ok(&["output", "-json", "-no-color", "held"]).json();
    assert_eq!(held.as_array().map(Vec::len), Some(10), "{held:#}");
    let started = Instant::now();
    tf.ok(&[
        "destroy",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-parallelism=10",
    ]);
    eprintln!(
        "[figures] 10 nodes destroyed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    for h in &hosts {
        assert!(
            device(h)["extra_values"]["gpufleet_tenant"].is_null(),
            "{h}"
        );
    }
}

#[test]
fn a_failed_install_names_the_node_and_reapply_converges() {
    let _g = lock();
    let hosts: Vec<String> = rack("rack-b2").into_iter().take(3).collect();
    let bad = &hosts[1];
    let body: String = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| node(&format!("n{i}"), h, "acc-tenant-fail", ""))
        .collect();
    let tf = Tf::new(&body);
    admin(
        "POST",
        "/_admin/fault",
        Some(&json!({"hostname": bad, "install": "installer_failed"})),
    );
    let out = tf.apply_err();
    admin(
        "POST",
        "/_admin/fault",
        Some(&json!({"hostname": bad, "install": null})),
    );
    assert!(
        out.contains(&format!("node {bad} stopped in INSTALLER_FAILED")),
        "{out}"
    );
    for (i, _) in hosts.iter().enumerate().filter(|(_, h)| *h != bad) {
        let st = tf.resource(&format!("gpufleet_bcm_node.n{i}"));
        assert_eq!(st["status"], "UP", "the others succeed: {st:#}");
    }
    let failed = tf.resource("gpufleet_bcm_node.n1");
    assert_eq!(failed["status"], "INSTALLER_FAILED", "recorded: {failed:#}");
    tf.apply();
    tf.assert_plan_empty();
    tf.destroy();
    admin("DELETE", "/_admin/fault", None);
}

#[test]
fn the_read_only_profile_gets_a_permission_error_at_apply() {
    let _g = lock();
    let host = &rack("rack-b2")[5];
    let (cert, key) = Lab::shared().bcm_readonly_identity();
    let tf = Tf::with_env(
        &node("n", host, "acc-tenant-ro", ""),
        &[
            (
                "GPUFLEET_BCM_CLIENT_CERTIFICATE",
                cert.display().to_string(),
            ),
            ("GPUFLEET_BCM_CLIENT_KEY", key.display().to_string()),
        ],
    );
    let out = tf.apply_err();
    assert!(
        out.contains("does not allow access to cmdevice.updateDevice"),
        "{out}"
    );
    // cmdaemon refuses with its "call restricted" status; the error says what to do.
    assert!(
        out.contains("use a client certificate of a profile"),
        "{out}"
    );
    assert!(device(host)["extra_values"]["gpufleet_tenant"].is_null());
}

#[test]
fn a_wrong_ca_is_refused() {
    let _g = lock();
    let host = &rack("rack-b2")[6];
    // The system's CA bundle: valid CAs, none of which signed the emulator's certificate.
    let bundle = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("a system CA bundle (install ca-certificates)");
    let tf = Tf::with_env(
        &node("n", host, "acc-tenant-ca", ""),
        &[("GPUFLEET_BCM_CA_CERTIFICATE", bundle.to_owned())],
    );
    let out = tf.apply_err();
    assert!(
        out.combined().to_lowercase().contains("certificate"),
        "the error is about the certificate:\n{out}"
    );
    assert!(device(host)["extra_values"]["gpufleet_tenant"].is_null());
}

#[test]
fn a_provider_killed_mid_provisioning_is_adopted_without_a_second_claim() {
    let _g = lock();
    let host = &rack("rack-b3")[2];
    let tf = Tf::new(&node("n", host, "acc-tenant-kill", ""));
    let mut cmd = Command::new(terraform_launcher());
    cmd.current_dir(tf.wd.path())
        .args(["apply", "-auto-approve", "-input=false", "-no-color"])
        .env("TF_CLI_CONFIG_FILE", tf.wd.cli_config_path())
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in tf.env() {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start terraform apply");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut killed = Vec::new();
    while Instant::now() < deadline {
        let status = emulated(host)["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if matches!(status.as_str(), "BOOTING" | "INSTALLING" | "DOWN")
            && device(host)["extra_values"]["gpufleet_tenant"] == "acc-tenant-kill"
        {
            killed = gpufleet_acceptance::process::kill_providers_of(&child);
            if !killed.is_empty() {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().expect("terraform apply ends");
    assert!(
        !killed.is_empty(),
        "the provider was never seen mid-provisioning"
    );
    assert!(!status.success(), "the apply was interrupted");
    assert_eq!(updates_of(host), 1, "one claim");

    tf.apply();
    tf.assert_plan_empty();
    assert_eq!(updates_of(host), 1, "adopted: no second claim");
    assert_eq!(tf.resource("gpufleet_bcm_node.n")["status"], "UP");
    tf.destroy();
}

#[test]
fn bad_input_fails_at_plan_on_its_attribute() {
    let _g = lock();
    let tf = Tf::new(&node(
        "n",
        "gpu-nowhere",
        "acc-tenant-bad",
        "install_mode = \"MAIN\"",
    ));
    let out = tf.run(&["plan", "-input=false", "-no-color"]);
    assert!(!out.success(), "{out}");
    assert!(out.contains("install_mode"), "{out}");
    assert!(out.contains("`AUTO`"), "{out}");
}

#[test]
fn bcm_node_example_applies_and_destroys() {
    let _g = lock();
    let example = std::fs::read_to_string(workspace_root().join("examples/bcm-node/main.tf"))
        .expect("examples/bcm-node/main.tf");
    let tf = Session::new(&example, Lab::shared().settings_env());
    tf.apply();
    tf.assert_plan_empty();
    let out = tf.ok(&["output", "-json", "-no-color"]).json();
    let workers = out["workers"]["value"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(workers.len(), 2, "{out:#}");
    assert!(workers.values().all(|w| w["status"] == "UP"), "{out:#}");
    tf.destroy();
}

/// The BCM emulator as the sweep drives it: every call refused with 400; gpufleet owns the
/// nodes it marks with a tenant, or as releasing from one.
struct Bcm {
    hosts: Vec<String>,
}

impl sweep::Controller for Bcm {
    fn admin(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        admin(method, path, body)
    }

    fn refusal(&self) -> Value {
        json!({"status": 400, "errormessage": "refused from here on"})
    }

    fn owned(&self) -> Vec<String> {
        let state = admin("GET", "/_admin/state", None);
        state["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| self.hosts.iter().any(|h| d["hostname"] == h.as_str()))
            .flat_map(|d| {
                let extra = &d["extra_values"];
                let host = d["hostname"].as_str().unwrap_or_default();
                let mark = |key: &str, what: &str| {
                    extra[key]
                        .as_str()
                        .filter(|t| !t.is_empty())
                        .map(|t| format!("node {host} {what} {t}"))
                };
                [
                    mark("gpufleet_tenant", "for"),
                    mark("gpufleet_releasing", "releasing from"),
                ]
            })
            .flatten()
            .collect()
    }
}

#[test]
fn interrupted_at_any_call_converges_without_orphans_or_duplicates() {
    let _g = lock();
    let host = rack("rack-b3")[3].clone();
    let config = |tenant: &str| format!("{REQUIRED_PROVIDERS}\n{}", node("n", &host, tenant, ""));
    let bcm = Bcm {
        hosts: vec![host.clone()],
    };
    let session = |main_tf: &str| Session::new(main_tf, Lab::shared().settings_env());
    for (op, before, target) in [
        ("create", vec![], Some(config("acc-sweep-a"))),
        (
            "replace",
            vec![config("acc-sweep-a")],
            Some(config("acc-sweep-b")),
        ),
        ("delete", vec![config("acc-sweep-a")], None),
    ] {
        let case = sweep::Case {
            kind: "bcm_node",
            op,
            before,
            target,
        };
        sweep::sweep_both(&case, &bcm, session);
    }
}

fn power_action(hostname: &str, operation: &str, force: bool) -> String {
    format!(
        r#"
action "gpufleet_bcm_node_power" "p" {{
  config {{
    hostname  = "{hostname}"
    operation = "{operation}"
    force     = {force}
  }}
}}
"#
    )
}

#[test]
fn the_power_action_resets_a_free_node_and_refuses_a_held_one_unless_forced() {
    let _g = lock();
    let host = rack("rack-a1").pop().expect("rack-a1 has nodes");
    let invoke = [
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-invoke=action.gpufleet_bcm_node_power.p",
    ];
    let tf = Tf::new(&power_action(&host, "reset", false));
    let before = power_calls(&host);
    let out = tf.ok(&invoke);
    assert_eq!(power_calls(&host), before + 1, "one reset:\n{out}");
    assert!(
        out.contains("is UP"),
        "the progress shows the node came up:\n{out}"
    );
    assert_eq!(emulated(&host)["status"], "UP", "{:#}", emulated(&host));

    // Held by a tenant: refused at plan, naming the tenant, and nothing is powered.
    let mut d = device(&host);
    d["extra_values"]["gpufleet_tenant"] = json!("acc-power-tenant");
    let r = bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    assert_eq!(r["success"], true, "{r}");
    let unmark = || {
        let mut d = device(&host);
        d["extra_values"]["gpufleet_tenant"] = Value::Null;
        bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    };
    tf.write(&power_action(&host, "off", false));
    let refused = tf.run(&invoke);
    if refused.success() {
        // Leave the fleet as found before the assertion below fails.
        unmark();
    }
    assert!(refused.contains("BCM Node Held By A Tenant"), "{refused}");
    assert!(refused.contains("acc-power-tenant"), "{refused}");
    assert!(refused.contains("hostname"), "on the attribute:\n{refused}");
    assert_eq!(
        power_calls(&host),
        before + 1,
        "a refused action powers nothing"
    );

    // Forced, it runs.
    tf.write(&power_action(&host, "on", true));
    let forced = tf.run(&invoke);
    unmark();
    assert!(forced.success(), "{forced}");
    assert_eq!(power_calls(&host), before + 2);

    // A misspelt operation is refused on its attribute at plan.
    tf.write(&power_action(&host, "cycle", false));
    let bad = tf.run(&invoke);
    assert!(!bad.success(), "{bad}");
    assert!(bad.contains("operation"), "{bad}");
    assert_eq!(power_calls(&host), before + 2);
}

#[test]
fn the_reprovision_action_reinstalls_a_free_node_and_refuses_a_held_one() {
    let _g = lock();
    let host = rack("rack-a1")
        .into_iter()
        .rev()
        .nth(1)
        .expect("rack-a1 has two nodes");
    let action = |force: bool| {
        format!(
            r#"
action "gpufleet_bcm_node_reprovision" "r" {{
  config {{
    hostname = "{host}"
    force    = {force}
  }}
}}
"#
        )
    };
    let invoke = [
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-invoke=action.gpufleet_bcm_node_reprovision.r",
    ];
    let tf = Tf::new(&action(false));
    let updates = updates_of(&host);
    let powers = power_calls(&host);
    let out = tf.ok(&invoke);
    assert!(out.contains("next boot installs FULL"), "{out}");
    assert!(out.contains("reinstalled (FULL)"), "{out}");
    assert_eq!(
        updates_of(&host),
        updates + 1,
        "one update marks the install"
    );
    assert_eq!(power_calls(&host), powers + 1, "one boot");
    assert!(
        device(&host)["nextBootInstallMode"]
            .as_str()
            .is_none_or(str::is_empty),
        "the installer consumed the one-shot mode: {:#}",
        device(&host)
    );

    // Held by a tenant: refused at plan, and nothing is marked or powered.
    let mut d = device(&host);
    d["extra_values"]["gpufleet_tenant"] = json!("acc-reprovision-tenant");
    let r = bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    assert_eq!(r["success"], true, "{r}");
    let updates = updates_of(&host);
    let refused = tf.run(&invoke);
    let updates_after = updates_of(&host);
    let mut d = device(&host);
    d["extra_values"]["gpufleet_tenant"] = Value::Null;
    bcm_call("cmdevice", "updateDevice", &json!([d, 0]));
    assert!(!refused.success(), "{refused}");
    assert!(refused.contains("acc-reprovision-tenant"), "{refused}");
    assert_eq!(
        updates_after, updates,
        "a refused reprovision marks nothing"
    );
    assert_eq!(power_calls(&host), powers + 1);
}
