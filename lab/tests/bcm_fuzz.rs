//! Fuzz-style property test of the BCM emulator's dispatcher: random sequences of
//! requests (every call, random and plausible arguments, device-like objects with
//! fields of the wrong type, junk bodies, random profiles and clock moves) never panic,
//! always answer JSON with a status the contract allows, and never leave the state
//! inconsistent (duplicate hostnames, dangling categories or images, devices without a
//! node state), and every boot finishes on the clock.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use gpufleet_lab::bcm::dispatch::CALLS;
use gpufleet_lab::bcm::inventory::InventoryNode;
use gpufleet_lab::bcm::model::{Db, ZERO_UUID, str_field};
use gpufleet_lab::bcm::{ApiConfig, BcmInventory, Controller, ManualClock, Outcome, Request};
use gpufleet_lab::emulator::Store as _;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const FIELDS: &[&str] = &[
    "uuid",
    "revision",
    "hostname",
    "mac",
    "category",
    "softwareImageProxy",
    "installMode",
    "nextBootInstallMode",
    "blockDevicesClearedOnNextBoot",
    "interfaces",
    "bootLoader",
    "rackPosition",
    "extra_values",
    "name",
    "path",
    "kernelVersion",
    "devices",
    "operation",
    "force",
    "baseType",
    "childType",
];

fn inventory() -> BcmInventory {
    BcmInventory {
        nodes: (0..4)
            .map(|i| InventoryNode {
                hostname: format!("gpu-{i:02}"),
                mac: format!("02:00:00:00:00:{i:02x}"),
                ip: format!("10.240.0.{}", 10 + i),
                rack: "rack-a".into(),
                position: i + 1,
                gpu_product: "NVIDIA-L40S".into(),
                gpu_count: 4,
                idle_power: if i % 2 == 0 {
                    "on".into()
                } else {
                    "off".into()
                },
                disks: Vec::new(),
            })
            .collect(),
    }
}

/// Values an argument or field may take: real uuids and names of the seeded state,
/// sentinels, and wrong types.
fn plausible(db: &Db) -> Vec<Value> {
    let mut v: Vec<Value> = vec![
        json!(null),
        json!(""),
        json!(0),
        json!(1),
        json!(-1),
        json!(1.5),
        json!(true),
        json!([]),
        json!({}),
        json!(ZERO_UUID),
        json!("8f0e2c1a-0000-4000-8000-000000000001"),
        json!("8f0e2c1a-0000-4000-8000-000000000002"),
        json!("not a uuid"),
        json!("FULL"),
        json!("AUTO"),
        json!("SKIP"),
        json!("CATEGORY"),
        json!("bogus-mode"),
        json!("ON"),
        json!("OFF"),
        json!("RESET"),
        json!("STATUS"),
        json!(["/dev/sda"]),
        json!([1]),
        json!("02:00:00:00:00:01"),
        json!("zz:zz"),
        json!("gpu-new"),
        json!("gpu-00"),
        json!({"gpufleet_tenant": "a"}),
        json!({"gpufleet_tenant": "b"}),
        json!({"parentSoftwareImage": ZERO_UUID}),
        json!({"rack": "r", "position": 2}),
        json!([{"name": "BOOTIF", "ip": "10.0.0.1"}]),
        json!([{"name": "BOOTIF"}, {"name": "BOOTIF"}]),
        json!([{"ip": 5}]),
        json!("é\u{0}\u{7f}"),
    ];
    for uuid in db
        .devices
        .keys()
        .chain(db.categories.keys())
        .chain(db.images.keys())
    {
        v.push(json!(uuid));
        v.push(json!({"parentSoftwareImage": uuid}));
    }
    v.push(json!(db.devices.keys().cloned().collect::<Vec<_>>()));
    v
}

#[derive(Debug, Clone)]
enum Step {
    Call {
        cn: Option<u8>,
        service: u8,
        call: u8,
        arg_shape: u8,
        fields: Vec<(u8, u8)>,
        base: u8,
    },
    Junk(Vec<u8>),
    Advance(u16),
    Admin(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (
            proptest::option::of(0u8..4),
            any::<u8>(),
            any::<u8>(),
            0u8..5,
            proptest::collection::vec((any::<u8>(), any::<u8>()), 0..6),
            any::<u8>(),
        )
            .prop_map(|(cn, service, call, arg_shape, fields, base)| Step::Call {
                cn,
                service,
                call,
                arg_shape,
                fields,
                base,
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..64).prop_map(Step::Junk),
        2 => (0u16..3000).prop_map(Step::Advance),
        1 => (0u8..4).prop_map(Step::Admin),
    ]
}

fn pick<T: Clone>(items: &[T], i: u8) -> T {
    items[usize::from(i) % items.len()].clone()
}

fn body(db: &Db, step: &Step) -> (Option<String>, Vec<u8>) {
    let Step::Call {
        cn,
        service,
        call,
        arg_shape,
        fields,
        base,
    } = step
    else {
        return (None, Vec::new());
    };
    let values = plausible(db);
    let (svc, name) = if *call % 10 == 0 {
        ("cmdevice".to_owned(), "bogus".to_owned())
    } else {
        let (s, c, _) = pick(CALLS, *call);
        let s = if service % 3 == 0 {
            s.to_uppercase()
        } else {
            s.to_owned()
        };
        (s, c.to_owned())
    };
    // An object to send: an existing entity (so updates can succeed) with fields
    // replaced by random values.
    let existing: Vec<Value> = db
        .devices
        .values()
        .chain(db.categories.values())
        .chain(db.images.values())
        .map(|o| Value::Object(o.clone()))
        .collect();
    let mut obj = match pick(&existing, *base) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (f, v) in fields {
        obj.insert(pick(FIELDS, *f).to_owned(), pick(&values, *v));
    }
    let first = if fields.is_empty() {
        pick(&values, *base)
    } else {
        Value::Object(obj)
    };
    let mut envelope = json!({"service": svc, "call": name});
    match arg_shape {
        0 => envelope["args"] = json!([first, 0]),
        1 => envelope["arg"] = first,
        2 => envelope["args"] = json!({}),
        3 => envelope["args"] = first,
        _ => {}
    }
    let cn = cn.map(|c| pick(&["admin", "readonly", "nobody", "admin"], c).to_owned());
    (cn, envelope.to_string().into_bytes())
}

fn check_invariants(db: &Db) -> Result<(), TestCaseError> {
    let mut hostnames = HashSet::new();
    for (uuid, d) in &db.devices {
        prop_assert!(
            hostnames.insert(str_field(d, "hostname").to_ascii_lowercase()),
            "duplicate hostname {}",
            str_field(d, "hostname")
        );
        prop_assert!(
            db.nodes.contains_key(uuid),
            "device {uuid} has no node state"
        );
        prop_assert!(
            db.categories.contains_key(str_field(d, "category")),
            "dangling category"
        );
        let image = d["softwareImageProxy"]["parentSoftwareImage"]
            .as_str()
            .unwrap_or("?");
        prop_assert!(
            image == ZERO_UUID || db.images.contains_key(image),
            "dangling image {image}"
        );
        prop_assert!(d["revision"].is_string());
    }
    for uuid in db.nodes.keys() {
        prop_assert!(db.devices.contains_key(uuid), "node state without a device");
    }
    let mut names = HashSet::new();
    for c in db.categories.values() {
        prop_assert!(names.insert(str_field(c, "name").to_ascii_lowercase()));
        let image = c["softwareImageProxy"]["parentSoftwareImage"]
            .as_str()
            .unwrap_or("?");
        prop_assert!(image == ZERO_UUID || db.images.contains_key(image));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn random_requests_never_panic_or_corrupt(steps in proptest::collection::vec(step(), 1..40)) {
        let clock = ManualClock::new(1_700_000_000_000);
        let api = ApiConfig { boot_step: Duration::from_millis(500), ..ApiConfig::default() };
        let ctl = Controller::in_memory(inventory(), Arc::new(clock.clone()), api);
        for step in &steps {
            let req = match step {
                Step::Advance(ms) => {
                    clock.advance(Duration::from_millis(u64::from(*ms)));
                    continue;
                }
                Step::Junk(bytes) => Request::new("POST", "/json").raw(bytes.clone()),
                Step::Admin(i) => match i {
                    0 => Request::new("GET", "/_admin/state"),
                    1 => Request::new("GET", "/_admin/leaks"),
                    2 => Request::new("POST", "/_admin/fault")
                        .raw(json!({"hostname": "gpu-00", "install": "installer_failed"}).to_string()),
                    _ => Request::new("DELETE", "/_admin/fault"),
                },
                Step::Call { .. } => {
                    let (cn, bytes) = body(&ctl.store().snapshot(), step);
                    let mut r = Request::new("POST", "/json").raw(bytes);
                    r.client_cn = cn;
                    r
                }
            };
            let Outcome::Reply(r) = ctl.handle(&req) else {
                return Err(TestCaseError::fail("dropped without a down fault"));
            };
            // 640: a call the certificate's profile may not make (cmdaemon's "call restricted").
            prop_assert!([200, 400, 401, 640].contains(&r.status), "status {} for {step:?}: {}", r.status, r.body);
            if r.status != 200 {
                prop_assert!(r.errormessage().is_some() || r.body.get("error").is_some(), "{}", r.body);
            }
            if let Some(ok) = r.body.get("success") {
                prop_assert!(ok.is_boolean());
                prop_assert!(r.body["validation"].is_array());
                prop_assert!(r.body["task_uuid"].is_string());
                if ok == false {
                    prop_assert!(r.body["validation"].as_array().is_some_and(|v| !v.is_empty()));
                }
            }
            check_invariants(&ctl.store().snapshot())?;
        }
        // After a long wait every boot has finished, with its one-shot fields cleared.
        clock.advance(Duration::from_secs(60));
        let db = ctl.store().snapshot();
        for node in db.nodes.values() {
            prop_assert!(node.boot.is_none(), "a boot never finished: {node:?}");
        }
    }
}
