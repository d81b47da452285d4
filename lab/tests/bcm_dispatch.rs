//! Contract tests of the BCM emulator's JSON API, called in-process through the
//! dispatcher (no network): profiles, login, bare results and in-band errors, commit
//! validation, revisions, the status clock on a manual clock, one-shot boot fields,
//! wipes and leaks, install faults, the journal, and persistence.

use std::sync::Arc;
use std::time::Duration;

use gpufleet_lab::bcm::inventory::InventoryNode;
use gpufleet_lab::bcm::model::ZERO_UUID;
use gpufleet_lab::bcm::{
    ApiConfig, BcmInventory, BcmStore, Controller, ManualClock, Outcome, Request, Response,
};
use serde_json::{Value, json};

const T0: u64 = 1_700_000_000_000;

/// The block devices of an 8-GPU inventory node that names none: a DGX-like OS disk and
/// four NVMe data disks.
const DGX_DISKS: [&str; 5] = [
    "/dev/sda",
    "/dev/nvme0n1",
    "/dev/nvme1n1",
    "/dev/nvme2n1",
    "/dev/nvme3n1",
];
const STEP: Duration = Duration::from_millis(1000);

fn node(hostname: &str, rack: &str, position: u32, idle: &str) -> InventoryNode {
    InventoryNode {
        hostname: hostname.into(),
        mac: format!("02:00:00:00:00:{position:02x}"),
        ip: format!("10.240.0.{}", 10 + position),
        rack: rack.into(),
        position,
        gpu_product: "NVIDIA-H100-80GB-HBM3".into(),
        gpu_count: 8,
        idle_power: idle.into(),
        disks: Vec::new(),
    }
}

fn inventory() -> BcmInventory {
    BcmInventory {
        nodes: vec![
            node("gpu-a-01", "rack-a", 1, "on"),
            node("gpu-a-02", "rack-a", 2, "on"),
            node("gpu-b-01", "rack-b", 3, "off"),
        ],
    }
}

struct Bcm {
    ctl: Controller,
    clock: ManualClock,
}

impl Bcm {
    fn new() -> Self {
        let clock = ManualClock::new(T0);
        let api = ApiConfig {
            boot_step: STEP,
            ..ApiConfig::default()
        };
        let ctl = Controller::in_memory(inventory(), Arc::new(clock.clone()), api);
        Self { ctl, clock }
    }

    fn send(&self, req: &Request) -> Response {
        match self.ctl.handle(req) {
            Outcome::Reply(r) => r,
            Outcome::Drop => panic!("{} {} was dropped", req.method, req.path),
        }
    }

    /// A call as client certificate `cn`.
    fn call_as(&self, cn: &str, service: &str, call: &str, args: Value) -> Response {
        let mut body = json!({"service": service, "call": call});
        body["args"] = args;
        self.send(&Request::json_call(Some(cn), &body))
    }

    /// An admin call that must answer 200; its body.
    fn call(&self, service: &str, call: &str, args: Value) -> Value {
        let r = self.call_as("admin", service, call, args);
        assert_eq!(r.status, 200, "{service}.{call}: {}", r.body);
        r.body
    }

    /// The device named `hostname`, resolved as clients resolve names: from the full list
    /// (`getDevice` takes a uuid only).
    fn device(&self, hostname: &str) -> Value {
        let all = self.call("cmdevice", "getDevices", json!([]));
        let uuid = all
            .as_array()
            .and_then(|a| a.iter().find(|d| d["hostname"] == hostname))
            .map(|d| d["uuid"].clone())
            .unwrap_or_else(|| panic!("no device named {hostname}"));
        self.call("cmdevice", "getDevice", json!([uuid]))
    }

    fn status(&self, key: &str) -> Value {
        let uuid = self.device(key)["uuid"].clone();
        self.call("cmstatus", "getStatus", json!([uuid]))
    }

    fn update(&self, device: &Value) -> Value {
        self.call("cmdevice", "updateDevice", json!([device, 0]))
    }

    fn power(&self, key: &str, op: &str) -> Value {
        let uuid = self.device(key)["uuid"].clone();
        self.call(
            "cmdevice",
            "powerOperation",
            json!([{"devices": [uuid], "operation": op, "force": false}]),
        )
    }

    fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let mut req = Request::new(method, &format!("/_admin/{path}"));
        if let Some(b) = body {
            req = req.raw(b.to_string());
        }
        let r = self.send(&req);
        assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
        r.body
    }

    /// The entity named `name` in the list `service.call` returns.
    fn named(&self, service: &str, call: &str, name: &str) -> Value {
        let all = self.call(service, call, json!([]));
        all.as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{call}: nothing named {name}"))
    }

    fn category(&self, name: &str) -> Value {
        self.named("cmdevice", "getCategories", name)
    }

    fn image(&self, name: &str) -> Value {
        self.named("cmpart", "getSoftwareImages", name)
    }

    fn category_uuid(&self, name: &str) -> Value {
        self.category(name)["uuid"].clone()
    }

    /// Sets the tenant on a device (whole-object update).
    fn set_tenant(&self, key: &str, tenant: Option<&str>) {
        let mut d = self.device(key);
        match tenant {
            Some(t) => d["extra_values"]["gpufleet_tenant"] = json!(t),
            None => {
                if let Some(e) = d["extra_values"].as_object_mut() {
                    e.remove("gpufleet_tenant");
                }
            }
        }
        assert_eq!(self.update(&d)["success"], true);
    }

    /// Each disk of a node with whose data is on it (`null`: none), from the admin state.
    fn disk_data(&self, key: &str) -> Vec<(String, Value)> {
        let state = self.admin("GET", "state", None);
        let node = state["nodes"]
            .as_array()
            .and_then(|n| n.iter().find(|n| n["hostname"] == key))
            .cloned()
            .unwrap_or_default();
        node["disks"]
            .as_array()
            .map(|d| {
                d.iter()
                    .map(|d| {
                        (
                            d["device"].as_str().unwrap_or_default().to_owned(),
                            d["data_owner"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Releases `key` as a wipe does: no tenant, the one-shot FULL install clearing `clear`.
    fn release_with_wipe(&self, key: &str, clear: &[&str]) {
        let mut d = self.device(key);
        d["nextBootInstallMode"] = json!("FULL");
        d["blockDevicesClearedOnNextBoot"] = json!(clear);
        if let Some(e) = d["extra_values"].as_object_mut() {
            e.remove("gpufleet_tenant");
        }
        assert_eq!(self.update(&d)["success"], true);
    }

    /// Runs a whole boot (four steps) on the clock.
    fn boot(&self, key: &str) {
        assert_eq!(self.power(key, "RESET")["count"], 1);
        self.clock.advance(STEP * 4);
        assert_eq!(self.status(key)["status"], "UP");
    }
}

fn codes(commit: &Value) -> Vec<(String, String)> {
    commit["validation"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|e| {
                    (
                        e["field"].as_str().unwrap_or_default().to_owned(),
                        e["error_code"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_inventory_is_seeded_with_idle_power_and_sentinels() {
    let bcm = Bcm::new();
    let d = bcm.device("gpu-a-01");
    assert_eq!(d["baseType"], "Device");
    assert_eq!(d["childType"], "PhysicalNode");
    assert_eq!(d["mac"], "02:00:00:00:00:01");
    assert_eq!(d["category"], bcm.category_uuid("free-pool"));
    assert_eq!(d["softwareImageProxy"]["parentSoftwareImage"], ZERO_UUID);
    assert_eq!(d["installMode"], "");
    assert_eq!(d["bootLoader"], "CATEGORY");
    assert_eq!(d["interfaces"][0]["name"], "BOOTIF");
    assert_eq!(d["interfaces"][0]["ip"], "10.240.0.11");
    assert_eq!(d["rackPosition"]["rack"], "rack-a");
    assert!(
        d["extra_values"].get("gpu_product").is_none(),
        "GPUs are system information, not device fields"
    );
    assert_eq!(d["extra_values"]["idle_power"], "on");
    let setup = d["disksetup"].as_str().unwrap_or_default();
    assert!(setup.starts_with("<?xml"), "{setup}");
    for dev in DGX_DISKS {
        assert!(
            setup.contains(&format!("<blockdev>{dev}</blockdev>")),
            "{dev}: {setup}"
        );
    }
    assert!(d["extra_values"].get("gpufleet_tenant").is_none());
    assert!(d["revision"].is_string());
    // pythoncm's DeviceStatus: the uuid as `ref_device_uuid`, no power field (a powered-off
    // node is DOWN).
    let up = bcm.status("gpu-a-01");
    assert_eq!(up["status"], "UP");
    assert_eq!(up["ref_device_uuid"], d["uuid"]);
    assert!(
        up.get("power").is_none() && up.get("hostname").is_none(),
        "{up}"
    );
    assert_eq!(bcm.status("gpu-b-01")["status"], "DOWN");
    assert_eq!(bcm.device("gpu-b-01")["extra_values"]["idle_power"], "off");

    let cats = bcm.call("cmdevice", "getCategories", json!([]));
    let names: Vec<&str> = cats
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names.len(), 3);
    for n in ["free-pool", "gpu-compute", "gpu-inference"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let images = bcm.call("cmpart", "getSoftwareImages", json!([]));
    assert_eq!(images.as_array().map(Vec::len), Some(3));
    let img = bcm.image("ubuntu2404-cuda12.8");
    let img = bcm.call("cmpart", "getSoftwareImage", json!([img["uuid"]]));
    assert_eq!(img["path"], "/cm/images/ubuntu2404-cuda12.8");
    assert_eq!(
        bcm.category("free-pool")["softwareImageProxy"]["parentSoftwareImage"],
        bcm.image("baseline")["uuid"]
    );
}

#[test]
fn missing_objects_are_null_and_unknown_calls_are_http_400() {
    let bcm = Bcm::new();
    assert_eq!(
        bcm.call("cmdevice", "getDevice", json!(["nope"])),
        Value::Null
    );
    assert_eq!(
        bcm.call("cmdevice", "getDevice", json!([ZERO_UUID])),
        Value::Null
    );
    assert_eq!(
        bcm.call("cmstatus", "getStatus", json!(["nope"])),
        Value::Null
    );
    // Devices are fetched by uuid only: a hostname finds nothing.
    let uuid = bcm.device("gpu-a-02")["uuid"].clone();
    assert_eq!(
        bcm.call("cmdevice", "getDevice", json!([uuid]))["hostname"],
        "gpu-a-02"
    );
    assert_eq!(
        bcm.call("cmdevice", "getDevice", json!(["gpu-a-02"])),
        Value::Null
    );
    // An unknown call, or a known one with the wrong number of arguments: HTTP 400, as
    // cmdaemon since 8.2 answers.
    let r = bcm.call_as("admin", "cmdevice", "bogus", json!([]));
    assert_eq!(
        (r.status, r.errormessage()),
        (400, Some("no such call: cmdevice.bogus"))
    );
    let r = bcm.call_as("admin", "cmdevice", "getNodes", json!([]));
    assert_eq!(r.status, 400, "not published: {}", r.body);
    let r = bcm.call_as("admin", "cmdevice", "updateDevice", json!([{}]));
    assert_eq!(r.status, 400, "{}", r.body);
    // Service names in any case, `arg` as well as `args`.
    let r = bcm.send(&Request::json_call(
        Some("admin"),
        &json!({"service": "CMDevice", "call": "getDevice", "arg": uuid}),
    ));
    assert_eq!(r.body["hostname"], "gpu-a-02");
    let r = bcm.send(&Request::json_call(
        Some("admin"),
        &json!({"service": "cmdevice", "call": "getDevices", "args": {}}),
    ));
    assert_eq!(r.body.as_array().map(Vec::len), Some(3));
    let statuses = bcm.call("cmstatus", "getStatusForDevices", json!([[uuid, "nope"]]));
    assert_eq!(statuses.as_array().map(Vec::len), Some(1));
}

#[test]
fn profiles_refuse_what_they_do_not_allow() {
    let bcm = Bcm::new();
    let d = bcm.device("gpu-a-01");
    let r = bcm.call_as("readonly", "cmdevice", "updateDevice", json!([d, 0]));
    assert_eq!(r.status, 640, "pythoncm's \"RPC restricted\"");
    assert_eq!(
        r.errormessage(),
        Some("Profile readonly does not allow access to cmdevice.updateDevice")
    );
    let r = bcm.call_as(
        "readonly",
        "cmdevice",
        "powerOperation",
        json!([{"devices": [], "operation": "OFF"}]),
    );
    assert!(
        r.errormessage()
            .is_some_and(|m| m.contains("does not allow")),
        "{}",
        r.body
    );
    let r = bcm.call_as("readonly", "cmdevice", "getDevice", json!([d["uuid"]]));
    assert_eq!(r.body["hostname"], "gpu-a-01");
    let r = bcm.call_as("readonly", "cmstatus", "getStatus", json!([d["uuid"]]));
    assert_eq!(r.body["status"], "UP");
    let r = bcm.call_as("somebody", "cmdevice", "getDevice", json!([d["uuid"]]));
    assert_eq!(
        r.errormessage(),
        Some("Profile somebody does not allow access to cmdevice.getDevice")
    );
    // Nothing changed, and every call is in the journal with its profile.
    assert_eq!(bcm.device("gpu-a-01")["revision"], d["revision"]);
    let journal = bcm.admin("GET", "journal", None);
    let profiles: Vec<&str> = journal
        .as_array()
        .expect("journal")
        .iter()
        .filter_map(|e| e["profile"].as_str())
        .collect();
    assert!(
        profiles.contains(&"readonly") && profiles.contains(&"somebody"),
        "{profiles:?}"
    );
    let stats = bcm.admin("GET", "stats", None);
    assert!(
        stats["calls"]["cmdevice.getDevice"].as_u64() >= Some(3),
        "{stats}"
    );
    bcm.admin("DELETE", "journal", None);
    assert_eq!(bcm.admin("GET", "journal", None), json!([]));
}

#[test]
fn without_a_certificate_a_login_token_is_needed() {
    let bcm = Bcm::new();
    let uuid = bcm.device("gpu-a-01")["uuid"].clone();
    let body = json!({"service": "cmdevice", "call": "getDevice", "args": [uuid]});
    let r = bcm.send(&Request::json_call(None, &body));
    assert_eq!(r.status, 401);
    let r = bcm.send(&Request::json_call(
        None,
        &json!({"service": "login", "username": "root", "password": "wrong"}),
    ));
    assert_eq!(r.status, 401);
    assert!(r.set_cookie.is_none());
    let r = bcm.send(&Request::json_call(
        None,
        &json!({"service": "login", "username": "root", "password": "cmdaemon"}),
    ));
    assert_eq!((r.status, r.body.clone()), (200, json!(true)));
    let set = r.set_cookie.clone().expect("Set-Cookie");
    assert!(
        set.contains("path=/") && set.contains("Secure") && set.contains("HttpOnly"),
        "{set}"
    );
    let cookie = r.token_cookie().expect("cm-login-token");
    let r = bcm.send(&Request::json_call(None, &body).cookie(cookie.clone()));
    assert_eq!(r.body["hostname"], "gpu-a-01");
    // The token acts as admin.
    let d = bcm.device("gpu-a-01");
    let r = bcm.send(
        &Request::json_call(
            None,
            &json!({"service": "cmdevice", "call": "updateDevice", "args": [d, 0]}),
        )
        .cookie(cookie),
    );
    assert_eq!(r.body["success"], true, "{}", r.body);
    let r = bcm.send(&Request::json_call(None, &body).cookie("cm-login-token=forged"));
    assert_eq!(r.status, 401);
    // The password never reaches the journal.
    let journal = bcm.admin("GET", "journal", None).to_string();
    assert!(
        !journal.contains("cmdaemon") && !journal.contains("wrong"),
        "{journal}"
    );
    assert!(
        journal.contains(r#""profile":"none""#),
        "refused calls are journaled too: {journal}"
    );
}

#[test]
fn malformed_requests_get_clear_errors() {
    let bcm = Bcm::new();
    for (body, want) in [
        ("{not json", "not valid JSON"),
        ("[1,2]", "must be a JSON object"),
        (r#"{"call":"getDevice"}"#, "\"service\""),
        (r#"{"service":"cmdevice"}"#, "\"call\""),
    ] {
        let r = bcm.send(&Request::new("POST", "/json").raw(body));
        assert_eq!(r.status, 400, "{body}");
        assert!(
            r.errormessage().is_some_and(|m| m.contains(want)),
            "{body}: {}",
            r.body
        );
    }
    let r = bcm.call_as("admin", "cmdevice", "getDevice", json!([42]));
    assert!(
        r.errormessage()
            .is_some_and(|m| m.contains("must be a string")),
        "{}",
        r.body
    );
    let r = bcm.call_as("admin", "cmdevice", "updateDevice", json!(["x"]));
    assert!(r.errormessage().is_some(), "{}", r.body);
    let r = bcm.call_as(
        "admin",
        "cmdevice",
        "powerOperation",
        json!([{"devices": "x", "operation": "ON"}]),
    );
    assert!(r.errormessage().is_some(), "{}", r.body);
    let r = bcm.call_as(
        "admin",
        "cmdevice",
        "powerOperation",
        json!([{"devices": [], "operation": "EXPLODE"}]),
    );
    assert!(
        r.errormessage().is_some_and(|m| m.contains("EXPLODE")),
        "{}",
        r.body
    );
    let r = bcm.send(&Request::new("GET", "/json"));
    assert_eq!(r.status, 405);
    let r = bcm.send(&Request::new("POST", "/rest/v1/device"));
    assert_eq!(r.status, 404);
}

#[test]
fn commits_validate_every_field_at_once() {
    let bcm = Bcm::new();
    let free = bcm.category_uuid("free-pool");
    let existing = bcm.device("gpu-a-01");
    let r = bcm.call(
        "cmdevice",
        "addDevice",
        json!([{
            "uuid": "8f0e2c1a-0000-4000-8000-000000000001",
            "hostname": "gpu-a-01",
            "mac": "02:00:00:00:00:02",
            "category": "no-such-category",
            "installMode": "SOMETIMES",
            "interfaces": [{"name": "BOOTIF", "ip": "999.1.1.1"}],
        }, 0]),
    );
    assert_eq!(r["success"], false);
    assert!(r["task_uuid"].is_string());
    let found = codes(&r);
    for want in [
        ("hostname", "DUPLICATE_FIELD"),
        ("mac", "DUPLICATE_FIELD"),
        ("category", "BAD_VALUE"),
        ("installMode", "BAD_VALUE"),
        ("interfaces", "BAD_VALUE"),
    ] {
        assert!(
            found.contains(&(want.0.into(), want.1.into())),
            "{want:?} in {found:?}"
        );
    }
    let dup = r["validation"]
        .as_array()
        .and_then(|v| v.iter().find(|e| e["field"] == "hostname"))
        .expect("hostname entry");
    assert_eq!(dup["ref_entity_uuid"], existing["uuid"]);
    assert_eq!(dup["severity"], "ERROR");

    // The zero uuid is NOT_NULL; a missing category too.
    let r = bcm.call(
        "cmdevice",
        "addDevice",
        json!([{"uuid": ZERO_UUID, "hostname": "new-01"}, 0]),
    );
    let c = codes(&r);
    assert!(c.contains(&("uuid".into(), "NOT_NULL".into())), "{c:?}");
    assert!(c.contains(&("category".into(), "NOT_NULL".into())), "{c:?}");

    // A good one: defaults and sentinels filled, status DOWN/OFF.
    let uuid = "8f0e2c1a-0000-4000-8000-000000000002";
    let r = bcm.call(
        "cmdevice",
        "addDevice",
        json!([{"uuid": uuid, "hostname": "new-01", "category": free,
                "interfaces": [{"name": "BOOTIF", "network": "internalnet"}], "custom": {"kept": 1}}, 0]),
    );
    assert_eq!(r["success"], true, "{r}");
    let d = bcm.device("new-01");
    assert_eq!(d["mac"], "00:00:00:00:00:00");
    assert_eq!(d["interfaces"][0]["ip"], "0.0.0.0");
    assert_eq!(d["softwareImageProxy"]["parentSoftwareImage"], ZERO_UUID);
    assert_eq!(d["custom"]["kept"], 1, "unknown fields are kept");
    assert_eq!(bcm.status("new-01")["status"], "DOWN");
    let again = bcm.call(
        "cmdevice",
        "addDevice",
        json!([{"uuid": uuid, "hostname": "new-02", "category": free}, 0]),
    );
    assert!(codes(&again).contains(&("uuid".into(), "DUPLICATE_FIELD".into())));

    // Categories and images in use cannot go; unused ones can.
    let r = bcm.call("cmdevice", "removeCategory", json!([free, 0]));
    assert_eq!(r["success"], false);
    let r = bcm.call("cmdevice", "removeDevice", json!([uuid, 0]));
    assert_eq!(r["success"], true);
    assert_eq!(
        bcm.call("cmdevice", "getDevice", json!([uuid])),
        Value::Null
    );
    let cat = "8f0e2c1a-0000-4000-8000-0000000000c1";
    let r = bcm.call(
        "cmdevice",
        "addCategory",
        json!([{"uuid": cat, "name": "gpu-compute"}, 0]),
    );
    assert!(codes(&r).contains(&("name".into(), "DUPLICATE_FIELD".into())));
    let r = bcm.call(
        "cmdevice",
        "addCategory",
        json!([{"uuid": cat, "name": "tenant-x"}, 0]),
    );
    assert_eq!(r["success"], true);
    assert_eq!(bcm.category("tenant-x")["installMode"], "AUTO");
    let r = bcm.call("cmdevice", "removeCategory", json!([cat, 0]));
    assert_eq!(r["success"], true);
    let baseline = bcm.image("baseline")["uuid"].clone();
    let r = bcm.call("cmpart", "removeSoftwareImage", json!([baseline, 0]));
    assert_eq!(r["success"], false);
}

#[test]
fn updates_are_whole_object_with_revision_checks() {
    let bcm = Bcm::new();
    let d = bcm.device("gpu-a-01");
    let rev = d["revision"].clone();
    let mut changed = d.clone();
    changed["extra_values"]["gpufleet_tenant"] = json!("acme");
    changed["interfaces"] = json!([]);
    assert_eq!(bcm.update(&changed)["success"], true);
    let after = bcm.device("gpu-a-01");
    assert_ne!(after["revision"], rev, "a change bumps the revision");
    assert_eq!(after["interfaces"], json!([]), "arrays are replaced");
    assert_eq!(after["extra_values"]["gpufleet_tenant"], "acme");

    // The stale revision is refused, with nothing changed.
    let mut stale = d.clone();
    stale["extra_values"]["gpufleet_tenant"] = json!("other");
    let r = bcm.update(&stale);
    assert_eq!(r["success"], false);
    let entry = &r["validation"][0];
    assert_eq!(
        (entry["field"].clone(), entry["error_code"].clone()),
        (json!("revision"), json!("BAD_VALUE"))
    );
    assert!(
        entry["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("revision mismatch"))
    );
    assert_eq!(
        bcm.device("gpu-a-01")["extra_values"]["gpufleet_tenant"],
        "acme"
    );

    // "" overwrites regardless.
    stale["revision"] = json!("");
    assert_eq!(bcm.update(&stale)["success"], true);
    assert_eq!(
        bcm.device("gpu-a-01")["extra_values"]["gpufleet_tenant"],
        "other"
    );

    // An update that changes nothing keeps the revision.
    let now = bcm.device("gpu-a-01");
    assert_eq!(bcm.update(&now)["success"], true);
    assert_eq!(bcm.device("gpu-a-01")["revision"], now["revision"]);

    // An unknown uuid is refused.
    let mut ghost = now.clone();
    ghost["uuid"] = json!("8f0e2c1a-0000-4000-8000-00000000dead");
    let r = bcm.update(&ghost);
    assert!(codes(&r).contains(&("uuid".into(), "BAD_VALUE".into())));
}

#[test]
fn power_and_the_status_clock() {
    let bcm = Bcm::new();
    // Already on: nothing to do.
    assert_eq!(bcm.power("gpu-a-01", "ON")["count"], 0);
    let off = bcm.power("gpu-a-01", "OFF");
    assert_eq!(off["count"], 1);
    assert_eq!(bcm.status("gpu-a-01")["status"], "DOWN");
    assert_eq!(bcm.power("gpu-a-01", "OFF")["count"], 0);

    let on = bcm.power("gpu-a-01", "ON");
    assert_eq!(on["count"], 1);
    assert!(on["index"].as_u64() > off["index"].as_u64());
    let mut seen = vec![bcm.status("gpu-a-01")["status"].clone()];
    for _ in 0..5 {
        bcm.clock.advance(STEP);
        seen.push(bcm.status("gpu-a-01")["status"].clone());
    }
    assert_eq!(
        seen,
        [
            json!("DOWN"),
            json!("BOOTING"),
            json!("INSTALLING"),
            json!("INSTALLER_CALLINGINIT"),
            json!("UP"),
            json!("UP")
        ]
    );
    // The clock does not move on its own: nothing happens between steps.
    bcm.power("gpu-a-01", "RESET");
    bcm.clock.advance(STEP - Duration::from_millis(1));
    assert_eq!(bcm.status("gpu-a-01")["status"], "DOWN");
    // A long wait settles every step at once.
    bcm.clock.advance(STEP * 10);
    assert_eq!(bcm.status("gpu-a-01")["status"], "UP");
    // Changing the category or image does not reboot.
    let mut d = bcm.device("gpu-a-01");
    d["category"] = bcm.category_uuid("gpu-compute");
    assert_eq!(bcm.update(&d)["success"], true);
    assert_eq!(bcm.status("gpu-a-01")["status"], "UP");
}

#[test]
fn one_shot_fields_are_cleared_by_the_boot_and_full_wipes() {
    let bcm = Bcm::new();
    bcm.set_tenant("gpu-a-01", Some("acme"));
    let owners =
        |host: &str| -> Vec<Value> { bcm.disk_data(host).into_iter().map(|(_, o)| o).collect() };
    assert_eq!(
        owners("gpu-a-01"),
        vec![json!("acme"); 5],
        "an up node takes its tenant's data on every disk"
    );

    bcm.release_with_wipe("gpu-a-01", &DGX_DISKS[1..]);
    assert_eq!(bcm.device("gpu-a-01")["nextBootInstallMode"], "FULL");
    bcm.power("gpu-a-01", "RESET");
    bcm.clock.advance(STEP * 2);
    assert_eq!(bcm.status("gpu-a-01")["status"], "INSTALLING");
    assert_eq!(
        bcm.device("gpu-a-01")["nextBootInstallMode"],
        "FULL",
        "kept until the install ends"
    );
    bcm.clock.advance(STEP * 2);
    assert_eq!(bcm.status("gpu-a-01")["status"], "UP");
    let after = bcm.device("gpu-a-01");
    assert_eq!(after["nextBootInstallMode"], "");
    assert_eq!(after["blockDevicesClearedOnNextBoot"], json!([]));
    assert_eq!(
        owners("gpu-a-01"),
        vec![Value::Null; 5],
        "the listed data disks, and the OS disk by the FULL install"
    );

    // Listed block devices are cleared without FULL too (BCM ignores the install mode for
    // them); the OS disk, not listed, keeps its data under AUTO.
    bcm.set_tenant("gpu-a-02", Some("acme"));
    bcm.set_tenant("gpu-a-02", None);
    let mut d = bcm.device("gpu-a-02");
    d["blockDevicesClearedOnNextBoot"] = json!(["nvme0n1"]);
    assert_eq!(bcm.update(&d)["success"], true);
    bcm.boot("gpu-a-02");
    let data = bcm.disk_data("gpu-a-02");
    assert_eq!(data[0], ("/dev/sda".to_owned(), json!("acme")));
    assert_eq!(data[1], ("/dev/nvme0n1".to_owned(), Value::Null));
    assert_eq!(data[2], ("/dev/nvme1n1".to_owned(), json!("acme")));
    assert_eq!(
        bcm.device("gpu-a-02")["blockDevicesClearedOnNextBoot"],
        json!([]),
        "cleared all the same"
    );
}

#[test]
fn sysinfo_reports_each_nodes_gpus_and_disks() {
    let bcm = Bcm::new();
    let uuid = bcm.device("gpu-a-01")["uuid"].clone();
    // pythoncm's `system_information(nodes, basic, add_empty)`; records name their node by
    // `ref_device_uuid`.
    let infos = bcm.call(
        "cmdevice",
        "getSysInfoCollectors",
        json!([[uuid], false, false]),
    );
    assert_eq!(infos.as_array().map(Vec::len), Some(1), "{infos}");
    let info = &infos[0];
    assert_eq!(info["ref_device_uuid"], uuid);
    assert_eq!(info["baseType"], "SysInfoCollector");
    let gpus = info["gpus"].as_array().cloned().unwrap_or_default();
    assert_eq!(gpus.len(), 8);
    assert_eq!(gpus[0]["name"], "NVIDIA H100 80GB HBM3");
    let disks: Vec<&str> = info["disks"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(disks, DGX_DISKS);
    let ro = bcm.call_as(
        "readonly",
        "cmdevice",
        "getSysInfoCollectors",
        json!([[], false, false]),
    );
    assert_eq!(ro.body, json!([]), "a read: readonly may call it");
    for bad in [json!([[uuid]]), json!(["x", false, false]), json!([])] {
        let r = bcm.call_as("admin", "cmdevice", "getSysInfoCollectors", bad.clone());
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}

#[test]
fn a_data_disk_left_out_of_the_wipe_leaks_to_the_next_tenant() {
    let bcm = Bcm::new();
    // All four NVMe data disks listed: the next tenant finds nothing.
    bcm.set_tenant("gpu-a-01", Some("tenant-a"));
    bcm.release_with_wipe("gpu-a-01", &DGX_DISKS);
    bcm.boot("gpu-a-01");
    assert!(bcm.disk_data("gpu-a-01").iter().all(|(_, o)| o.is_null()));
    bcm.set_tenant("gpu-a-01", Some("tenant-b"));
    assert_eq!(bcm.admin("GET", "leaks", None), json!([]));

    // One left out: it keeps tenant-a's data, and the next tenant finds it.
    bcm.set_tenant("gpu-a-02", Some("tenant-a"));
    bcm.release_with_wipe("gpu-a-02", &DGX_DISKS[..4]);
    bcm.boot("gpu-a-02");
    let data = bcm.disk_data("gpu-a-02");
    assert_eq!(data[4], ("/dev/nvme3n1".to_owned(), json!("tenant-a")));
    assert!(data[..4].iter().all(|(_, o)| o.is_null()), "{data:?}");
    bcm.set_tenant("gpu-a-02", Some("tenant-b"));
    let leaks = bcm.admin("GET", "leaks", None);
    assert_eq!(leaks.as_array().map(Vec::len), Some(1), "{leaks}");
    assert_eq!(leaks[0]["hostname"], "gpu-a-02");
    assert_eq!(leaks[0]["devices"], json!(["/dev/nvme3n1"]));
    assert_eq!(leaks[0]["from"], "tenant-a");
    assert_eq!(leaks[0]["to"], "tenant-b");
}

#[test]
fn a_node_handed_on_without_a_wipe_leaks() {
    let bcm = Bcm::new();
    // Tenant a uses gpu-a-01, then releases it without a wipe; tenant b gets it.
    bcm.set_tenant("gpu-a-01", Some("tenant-a"));
    bcm.set_tenant("gpu-a-01", None);
    bcm.set_tenant("gpu-a-01", Some("tenant-b"));
    let leaks = bcm.admin("GET", "leaks", None);
    assert_eq!(leaks.as_array().map(Vec::len), Some(1), "{leaks}");
    assert_eq!(leaks[0]["hostname"], "gpu-a-01");
    assert_eq!(leaks[0]["from"], "tenant-a");
    assert_eq!(leaks[0]["to"], "tenant-b");
    assert_eq!(leaks[0]["at"], T0);

    // The same with a wipe of every disk in between: no leak.
    bcm.set_tenant("gpu-a-02", Some("tenant-a"));
    bcm.release_with_wipe("gpu-a-02", &DGX_DISKS);
    bcm.boot("gpu-a-02");
    bcm.set_tenant("gpu-a-02", Some("tenant-b"));
    assert_eq!(
        bcm.admin("GET", "leaks", None).as_array().map(Vec::len),
        Some(1)
    );

    // Assigning the next tenant with the wipe pending is fine: the check waits for the
    // node to come up again, wiped.
    let mut d = bcm.device("gpu-a-02");
    d["extra_values"]["gpufleet_tenant"] = json!("tenant-c");
    d["nextBootInstallMode"] = json!("FULL");
    d["blockDevicesClearedOnNextBoot"] = json!(DGX_DISKS);
    assert_eq!(bcm.update(&d)["success"], true);
    bcm.boot("gpu-a-02");
    assert_eq!(
        bcm.admin("GET", "leaks", None).as_array().map(Vec::len),
        Some(1)
    );

    // A powered-off node with old data leaks when it comes up for someone else.
    bcm.set_tenant("gpu-a-02", Some("tenant-c"));
    bcm.power("gpu-a-02", "OFF");
    bcm.set_tenant("gpu-a-02", Some("tenant-d"));
    assert_eq!(
        bcm.admin("GET", "leaks", None).as_array().map(Vec::len),
        Some(1),
        "not while off"
    );
    bcm.power("gpu-a-02", "ON");
    bcm.clock.advance(STEP * 4);
    let leaks = bcm.admin("GET", "leaks", None);
    assert_eq!(leaks.as_array().map(Vec::len), Some(2), "{leaks}");
    assert_eq!(leaks[1]["to"], "tenant-d");
    assert_eq!(
        leaks[1]["at"].as_u64(),
        Some(T0 + 12_000),
        "at the time it came up"
    );
}

#[test]
fn install_faults_stop_installs_until_cleared() {
    let bcm = Bcm::new();
    let r = bcm.send(
        &Request::new("POST", "/_admin/fault")
            .raw(json!({"hostname": "nope", "install": "installer_failed"}).to_string()),
    );
    assert_eq!(r.status, 400);
    bcm.admin(
        "POST",
        "fault",
        Some(json!({"hostname": "gpu-a-01", "install": "installer_failed"})),
    );
    bcm.admin(
        "POST",
        "fault",
        Some(json!({"hostname": "gpu-a-02", "install": "installer_unreachable"})),
    );
    bcm.power("gpu-a-01", "RESET");
    bcm.power("gpu-a-02", "RESET");
    bcm.clock.advance(STEP * 10);
    assert_eq!(bcm.status("gpu-a-01")["status"], "INSTALLER_FAILED");
    assert_eq!(bcm.status("gpu-a-02")["status"], "INSTALLER_UNREACHABLE");
    // Still stuck on the next try.
    bcm.power("gpu-a-01", "RESET");
    bcm.clock.advance(STEP * 10);
    assert_eq!(bcm.status("gpu-a-01")["status"], "INSTALLER_FAILED");
    bcm.admin("DELETE", "fault", None);
    bcm.boot("gpu-a-01");
    bcm.boot("gpu-a-02");
}

#[test]
fn call_faults_and_down() {
    let bcm = Bcm::new();
    bcm.admin(
        "POST",
        "fault",
        Some(json!({"call": "cmdevice.updateDevice", "errormessage": "database busy", "count": 1})),
    );
    let d = bcm.device("gpu-a-01");
    let r = bcm.call_as("admin", "cmdevice", "updateDevice", json!([d, 0]));
    assert_eq!((r.status, r.errormessage()), (200, Some("database busy")));
    assert_eq!(bcm.update(&d)["success"], true, "count 1: once");
    bcm.admin(
        "POST",
        "fault",
        Some(json!({"call": "cmstatus.*", "status": 503, "latency_ms": 20})),
    );
    let r = bcm.call_as("admin", "cmstatus", "getStatus", json!([d["uuid"]]));
    assert_eq!(r.status, 503);
    assert_eq!(r.delay, Duration::from_millis(20));
    bcm.admin("POST", "fault", Some(json!({"down": true})));
    let req = Request::json_call(
        Some("admin"),
        &json!({"service": "cmdevice", "call": "getDevices"}),
    );
    assert_eq!(bcm.ctl.handle(&req), Outcome::Drop);
    assert_eq!(
        bcm.admin("GET", "healthz", None)["status"],
        "ok",
        "the admin plane still answers"
    );
    bcm.admin("DELETE", "fault", None);
    assert_eq!(
        bcm.call_as("admin", "cmstatus", "getStatus", json!([d["uuid"]]))
            .status,
        200
    );
    let r = bcm.send(&Request::new("POST", "/_admin/fault").raw(r#"{"bogus": 1}"#));
    assert_eq!(r.status, 400);
}

#[test]
fn reset_restores_the_seeded_state() {
    let bcm = Bcm::new();
    bcm.set_tenant("gpu-a-01", Some("acme"));
    bcm.power("gpu-a-02", "OFF");
    bcm.admin("POST", "reset", None);
    assert!(
        bcm.device("gpu-a-01")["extra_values"]
            .get("gpufleet_tenant")
            .is_none()
    );
    assert_eq!(bcm.status("gpu-a-02")["status"], "UP");
    assert_eq!(bcm.admin("GET", "leaks", None), json!([]));
}

#[test]
fn state_survives_a_reopen_even_mid_boot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(T0);
    let open = || BcmStore::open(dir.path(), inventory(), Arc::new(clock.clone())).expect("open");
    let api = ApiConfig {
        boot_step: STEP,
        ..ApiConfig::default()
    };
    let first = Bcm {
        ctl: Controller::new(Arc::new(open()), api.clone()),
        clock: clock.clone(),
    };
    first.set_tenant("gpu-a-01", Some("acme"));
    first.power("gpu-b-01", "ON");
    clock.advance(STEP);
    assert_eq!(first.status("gpu-b-01")["status"], "BOOTING");
    drop(first);
    let second = Bcm {
        ctl: Controller::new(Arc::new(open()), api),
        clock: clock.clone(),
    };
    assert_eq!(
        second.device("gpu-a-01")["extra_values"]["gpufleet_tenant"],
        "acme"
    );
    clock.advance(STEP * 3);
    assert_eq!(
        second.status("gpu-b-01")["status"],
        "UP",
        "the boot carries on"
    );
}
