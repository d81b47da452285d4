//! Power, the boot sequence on the status clock, and leak tracking.
//!
//! A boot (power ON of an off node, or RESET) runs `DOWN → BOOTING → INSTALLING →
//! INSTALLER_CALLING_INIT → UP`, one status per step. The install mode is the node's
//! `nextBootInstallMode`, else its `installMode`, else its category's, else `AUTO`. When
//! the install finishes (leaving `INSTALLING`) the block devices listed in
//! `blockDevicesClearedOnNextBoot` are cleared whatever the mode (as BCM documents it), a
//! `FULL` install re-creates the OS disk (the node's first) as well, and both one-shot
//! fields are cleared. Every other disk keeps what it holds. An install fault in force
//! when the boot began stops it in `INSTALLER_FAILED` or `INSTALLER_UNREACHABLE` instead
//! (nothing wiped or cleared).
//!
//! The clock is evaluated lazily: [`settle`] runs before every call and carries out
//! every step whose time has passed, with the times they were due, so the outcome does
//! not depend on when anyone looks.
//!
//! Leaks: each disk of a node holds the data of the last tenant the node was up for
//! (`extra_values.gpufleet_tenant`) until it is cleared. A node that is up for tenant T
//! while any of its disks holds tenant U's data records a leak U → T naming those disks,
//! unless block devices are to be cleared at its next boot (then the check waits for it to
//! come up again).

use serde_json::{Value, json};

use super::model::{Boot, Db, Leak, NodeState, Obj, Power, Status, same_device, str_field, tenant};
use super::store::{CallError, Faults};

/// The boot's statuses, one per step.
const SEQUENCE: [Status; 5] = [
    Status::Down,
    Status::Booting,
    Status::Installing,
    Status::InstallerCallinginit,
    Status::Up,
];

/// The install mode a boot of `device` uses.
#[must_use]
pub fn install_mode(db: &Db, device: &Obj) -> String {
    let next = str_field(device, "nextBootInstallMode");
    if !next.is_empty() {
        return next.to_owned();
    }
    let own = str_field(device, "installMode");
    if !own.is_empty() && own != "CATEGORY" {
        return own.to_owned();
    }
    let category = db
        .categories
        .get(str_field(device, "category"))
        .map(|c| str_field(c, "installMode"))
        .unwrap_or("");
    if category.is_empty() {
        "AUTO".into()
    } else {
        category.to_owned()
    }
}

/// The block devices the next boot of `device` clears (`blockDevicesClearedOnNextBoot`).
#[must_use]
pub fn devices_to_clear(device: &Obj) -> Vec<String> {
    device
        .get("blockDevicesClearedOnNextBoot")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the next boot of `device` clears block devices.
#[must_use]
pub fn wipe_pending(device: &Obj) -> bool {
    !devices_to_clear(device).is_empty()
}

/// Starts a boot of node `uuid` at `now`.
pub fn start(db: &mut Db, uuid: &str, now: u64, step_ms: u64, faults: &Faults) {
    let Some(device) = db.devices.get(uuid) else {
        return;
    };
    let mode = install_mode(db, device);
    let clear = devices_to_clear(device);
    let fault = faults.installs.get(str_field(device, "hostname")).copied();
    if let Some(node) = db.nodes.get_mut(uuid) {
        node.power = Power::On;
        node.status = Status::Down;
        node.message = format!("booting, install mode {mode}");
        node.boot = Some(Boot {
            started_ms: now,
            step_ms: step_ms.max(1),
            phase: 0,
            mode,
            clear,
            fault,
        });
    }
}

/// Carries out every boot step due by `now`.
pub fn settle(db: &mut Db, now: u64) {
    let booting: Vec<String> = db
        .nodes
        .iter()
        .filter(|(_, n)| n.boot.is_some())
        .map(|(u, _)| u.clone())
        .collect();
    for uuid in booting {
        while let Some(boot) = db.nodes.get(&uuid).and_then(|n| n.boot.clone()) {
            let next = boot.phase + 1;
            let due = boot
                .started_ms
                .saturating_add(boot.step_ms.saturating_mul(u64::from(next)));
            if due > now || usize::from(next) >= SEQUENCE.len() {
                break;
            }
            step(db, &uuid, &boot, next, due);
        }
    }
}

/// Moves node `uuid` to step `phase` of its boot, at time `at`.
fn step(db: &mut Db, uuid: &str, boot: &Boot, phase: u8, at: u64) {
    let status = SEQUENCE[usize::from(phase)];
    if status == Status::InstallerCallinginit {
        if let Some(fault) = boot.fault {
            if let Some(node) = db.nodes.get_mut(uuid) {
                node.status = fault.status();
                node.message = format!("install stopped: {}", fault.status());
                node.boot = None;
            }
            return;
        }
        finish_install(db, uuid, boot);
    }
    let Some(node) = db.nodes.get_mut(uuid) else {
        return;
    };
    node.status = status;
    if status == Status::Up {
        node.boot = None;
        node.message = String::new();
        leak_check(db, uuid, at);
    } else if let Some(b) = &mut node.boot {
        b.phase = phase;
    }
}

/// The end of an install: clears the listed disks (and the OS disk on a FULL install),
/// and the one-shot fields.
fn finish_install(db: &mut Db, uuid: &str, boot: &Boot) {
    if let Some(node) = db.nodes.get_mut(uuid) {
        for (i, disk) in node.disks.iter_mut().enumerate() {
            let listed = boot.clear.iter().any(|c| same_device(c, &disk.device));
            if listed || (i == 0 && boot.mode == "FULL") {
                disk.data_owner = None;
            }
        }
    }
    let pending = db.devices.get(uuid).is_some_and(|d| {
        d.get("nextBootInstallMode") != Some(&json!(""))
            || d.get("blockDevicesClearedOnNextBoot") != Some(&json!([]))
    });
    if pending {
        let rev = db.next_revision();
        if let Some(device) = db.devices.get_mut(uuid) {
            device.insert("nextBootInstallMode".into(), json!(""));
            device.insert("blockDevicesClearedOnNextBoot".into(), json!([]));
            device.insert("revision".into(), json!(rev));
        }
    }
}

/// Records a leak when node `uuid` is up for a tenant while holding another tenant's
/// data, and makes the tenant the data's owner.
fn leak_check(db: &mut Db, uuid: &str, at: u64) {
    let Some(device) = db.devices.get(uuid) else {
        return;
    };
    let Some(node) = db.nodes.get(uuid) else {
        return;
    };
    if node.status != Status::Up || node.boot.is_some() {
        return;
    }
    let Some(holder) = tenant(device).map(str::to_owned) else {
        return;
    };
    let settled = node
        .disks
        .iter()
        .all(|d| d.data_owner.as_deref() == Some(holder.as_str()));
    if settled || wipe_pending(device) {
        return;
    }
    let hostname = str_field(device, "hostname").to_owned();
    let others: Vec<(&str, &str)> = node
        .disks
        .iter()
        .filter_map(|d| {
            d.data_owner
                .as_deref()
                .filter(|o| *o != holder)
                .map(|o| (d.device.as_str(), o))
        })
        .collect();
    if let Some((_, from)) = others.first() {
        let from = (*from).to_owned();
        let devices: Vec<String> = others.iter().map(|(d, _)| (*d).to_owned()).collect();
        tracing::warn!(
            "leak: {hostname} is up for {holder} with {from}'s data on {}",
            devices.join(", ")
        );
        db.leaks.push(Leak {
            hostname,
            devices,
            from,
            to: holder.clone(),
            at,
        });
    }
    if let Some(node) = db.nodes.get_mut(uuid) {
        for d in &mut node.disks {
            d.data_owner = Some(holder.clone());
        }
    }
}

/// `leak_check` on every node that is up.
pub fn check_leaks(db: &mut Db, now: u64) {
    let up: Vec<String> = db
        .nodes
        .iter()
        .filter(|(_, n)| n.status == Status::Up && n.boot.is_none())
        .map(|(u, _)| u.clone())
        .collect();
    for uuid in up {
        leak_check(db, &uuid, now);
    }
}

/// `cmdevice.powerOperation({devices, operation, force})` → `{count, index}`.
///
/// # Errors
/// When the argument is malformed or names an unknown device.
pub fn power_operation(
    db: &mut Db,
    arg: &Value,
    now: u64,
    step_ms: u64,
    faults: &Faults,
) -> Result<Value, CallError> {
    let bad = |m: &str| CallError::Message(format!("powerOperation: {m}"));
    let obj = arg
        .as_object()
        .ok_or_else(|| bad("the argument must be an object {devices, operation, force}"))?;
    let devices: Vec<&str> = match obj.get("devices") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| bad("devices must be uuid strings"))
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(bad("devices must be a list of device uuids")),
    };
    let operation = obj
        .get("operation")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("operation must be ON, OFF, RESET or STATUS"))?
        .to_ascii_uppercase();
    let force = match obj.get("force") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_u64().is_some_and(|n| n != 0),
        Some(_) => return Err(bad("force must be a boolean")),
    };
    if !matches!(operation.as_str(), "ON" | "OFF" | "RESET" | "STATUS") {
        return Err(bad(&format!(
            "unknown operation {operation:?}; use ON, OFF, RESET or STATUS"
        )));
    }
    let mut uuids = Vec::with_capacity(devices.len());
    for d in devices {
        let (uuid, _) = db
            .find_device(d)
            .ok_or_else(|| bad(&format!("no device {d}")))?;
        uuids.push(uuid.clone());
    }
    let mut count = 0u64;
    for uuid in uuids {
        let Some(node) = db.nodes.get(&uuid).cloned() else {
            continue;
        };
        if node.closed && !force {
            continue;
        }
        let acted = match operation.as_str() {
            "ON" if node.power == Power::Off => {
                start(db, &uuid, now, step_ms, faults);
                true
            }
            "OFF" if node.power == Power::On => {
                power_off(db, &uuid);
                true
            }
            "RESET" => {
                start(db, &uuid, now, step_ms, faults);
                true
            }
            "STATUS" => true,
            _ => false,
        };
        if acted {
            count += 1;
        }
    }
    if count > 0 && operation != "STATUS" {
        db.power_index += 1;
    }
    Ok(json!({"count": count, "index": db.power_index}))
}

fn power_off(db: &mut Db, uuid: &str) {
    if let Some(node) = db.nodes.get_mut(uuid) {
        node.power = Power::Off;
        node.status = Status::Down;
        node.boot = None;
        node.message = String::new();
    }
}

/// The system information of node `uuid` (`cmdevice.getSysInfoCollectors`): its GPUs, from
/// the inventory, and its block devices; `None` for a device the inventory does not know.
#[must_use]
pub fn sysinfo_json(db: &Db, uuid: &str) -> Option<Value> {
    let device = db.devices.get(uuid)?;
    let hostname = str_field(device, "hostname");
    let hw = db.inventory.nodes.iter().find(|n| n.hostname == hostname)?;
    let node = db.nodes.get(uuid)?;
    let name = hw.gpu_name();
    let gpus: Vec<Value> = (0..hw.gpu_count)
        .map(|i| json!({"baseType": "GPUInfo", "index": i, "name": name}))
        .collect();
    let disks: Vec<Value> = node
        .disks
        .iter()
        .map(|d| json!({"baseType": "DiskInfo", "name": d.device}))
        .collect();
    Some(json!({
        "baseType": "SysInfoCollector",
        "ref_device_uuid": uuid,
        "gpus": gpus,
        "disks": disks,
    }))
}

/// The `cmstatus` record of node `uuid`.
#[must_use]
pub fn status_json(uuid: &str, node: &NodeState) -> Value {
    // pythoncm's DeviceStatus: no power state (that answers through session events) and no
    // hostname; a powered-off node is DOWN.
    json!({
        "baseType": "DeviceStatus",
        "ref_device_uuid": uuid,
        "status": node.status,
        "closed": node.closed,
        "infoMessage": node.message,
    })
}
