//! Shared by the `bcm_node_*` tests (included with `#[path]`): a faithful in-memory BCM head
//! node behind the [`BcmApi`] trait, and a harness that drives a resource kind the way
//! Terraform core does, checking Terraform's consistency rules on every plan, apply and
//! refresh.
//!
//! The fake keeps whole device objects with revisions (a stale revision is refused), validates
//! category and image references, runs boots on a step clock (each status read moves a booting
//! node one step: BOOTING → INSTALLING → INSTALLER_CALLING_INIT → UP), applies the one-shot
//! install mode and block-device wipe at boot (the listed devices are cleared, and the OS disk
//! on a FULL install), records whose data is on each of a node's disks (a DGX-like OS disk and
//! four NVMe data disks) and the leaks when a node comes up for another tenant, reports each
//! node's GPUs and disks as system information, and logs every call as `service.call <args>`
//! so tests can assert (and snapshot) what the client sends.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use async_trait::async_trait;
use gpufleet_engine::{
    backends::bcm::{
        ApiError, BcmApi, BcmError, CallStats, Category, Device, DeviceStatus, DiskInfo, GpuInfo,
        ImageProxy, Interface, PowerOp, PowerResult, RackPosition, SoftwareImage, SysInfo,
        same_block_device,
    },
    kinds::ResourceKind,
    resources::bcm_node::BcmNode,
    value::Value,
};
use serde_json::json;

// =============================================================================================
// The fake head node

/// The boot steps a node goes through after power on or reset.
const BOOT: [&str; 4] = ["BOOTING", "INSTALLING", "INSTALLER_CALLING_INIT", "UP"];

/// A failure to inject into the next call of a `service.call`.
#[derive(Debug, Clone)]
pub enum Fault {
    /// cmdaemon refuses in-band (`errormessage`); nothing happens.
    Refuse(&'static str),
    /// A server error; nothing happens.
    Unavailable,
}

/// What the fake knows of a node beyond its device object.
#[derive(Debug, Clone)]
struct Node {
    on: bool,
    status: String,
    /// The index into [`BOOT`] while booting.
    boot: Option<usize>,
    /// The install stops in this state (`INSTALLER_FAILED`, …) while set.
    install_fault: Option<String>,
    /// Never moves past INSTALLING while set.
    stuck: bool,
    /// The block devices, the OS disk first, each with whose data is on it.
    disks: Vec<(String, Option<String>)>,
    /// The GPUs' name as the driver reports it, and how many.
    gpus: (&'static str, usize),
    /// Boots that cleared disks.
    wipes: u32,
}

impl Node {
    /// Whose data is on the disks (the first owner found), if anyone's.
    fn data_owner(&self) -> Option<String> {
        self.disks.iter().find_map(|(_, o)| o.clone())
    }
}

/// The block devices of every fake node: a DGX-like OS disk and four NVMe data disks.
pub const DISKS: [&str; 5] = [
    "/dev/sda",
    "/dev/nvme0n1",
    "/dev/nvme1n1",
    "/dev/nvme2n1",
    "/dev/nvme3n1",
];

/// A BCM disk setup naming `devices` (partitions left out: gpufleet reads the devices only).
pub fn disk_setup_xml(devices: &[&str]) -> String {
    let blocks: String = devices
        .iter()
        .map(|d| format!("<device><blockdev>{d}</blockdev></device>"))
        .collect();
    format!("<diskSetup>{blocks}</diskSetup>")
}

/// A leak: a node came up for `to` with `from`'s data on its disks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub hostname: String,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Default)]
struct State {
    devices: BTreeMap<String, Device>,
    nodes: BTreeMap<String, Node>,
    categories: Vec<Category>,
    images: Vec<SoftwareImage>,
    leaks: Vec<Leak>,
    log: Vec<String>,
    calls: BTreeMap<String, u64>,
    faults: VecDeque<(String, Fault)>,
    /// Someone else changes this node just before the next update reaches it.
    race: Option<String>,
    /// Calls still carried out before every call fails with 503.
    budget: sweep::Budget,
}

/// The fake head node.
#[derive(Debug, Default)]
pub struct FakeBcm {
    state: Mutex<State>,
}

pub fn uuid(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

fn category(n: u32, name: &str, image: u32) -> Category {
    Category {
        uuid: uuid(n),
        revision: "1".to_owned(),
        name: name.to_owned(),
        software_image_proxy: Some(ImageProxy {
            parent_software_image: Some(uuid(image)),
            rest: serde_json::Map::new(),
        }),
        install_mode: Some("AUTO".to_owned()),
        rest: serde_json::Map::new(),
    }
}

fn image(n: u32, name: &str) -> SoftwareImage {
    SoftwareImage {
        uuid: uuid(n),
        name: name.to_owned(),
        path: format!("/cm/images/{name}"),
        kernel_version: "6.8.0".to_owned(),
    }
}

/// `gpu-001`..`gpu-004`: H100 nodes in rack-a1 (idle on: powered on and UP);
/// `gpu-b3-001`, `gpu-b3-002`: B200 nodes in rack-b3 (idle off: powered off).
pub const A_NODES: [&str; 4] = ["gpu-001", "gpu-002", "gpu-003", "gpu-004"];
pub const B_NODES: [&str; 2] = ["gpu-b3-001", "gpu-b3-002"];

impl FakeBcm {
    pub fn new() -> Arc<FakeBcm> {
        let mut s = State {
            images: vec![
                image(1, "baseline"),
                image(2, "ubuntu2404-cuda12.8"),
                image(3, "ubuntu2404-cuda13.0"),
            ],
            categories: vec![
                category(11, "free-pool", 1),
                category(12, "gpu-compute", 2),
                category(13, "gpu-inference", 3),
            ],
            ..State::default()
        };
        let mut n = 100;
        for (i, host) in A_NODES.iter().chain(B_NODES.iter()).enumerate() {
            n += 1;
            let b = i >= A_NODES.len();
            let mut extra = serde_json::Map::new();
            let (gpu, rack, idle) = if b {
                ("NVIDIA B200", "rack-b3", "off")
            } else {
                ("NVIDIA H100 80GB HBM3", "rack-a1", "on")
            };
            extra.insert("idle_power".into(), json!(idle));
            let mut rest = serde_json::Map::new();
            rest.insert("baseType".into(), json!("Device"));
            rest.insert("childType".into(), json!("PhysicalNode"));
            rest.insert("bootLoader".into(), json!("CATEGORY"));
            rest.insert("disksetup".into(), json!(disk_setup_xml(&DISKS)));
            let mac = format!("aa:bb:cc:00:00:{n:02x}");
            let d = Device {
                uuid: uuid(n),
                revision: "1".to_owned(),
                hostname: (*host).to_owned(),
                mac: Some(mac.clone()),
                category: Some(uuid(11)),
                software_image_proxy: None,
                install_mode: None,
                next_boot_install_mode: None,
                block_devices_cleared_on_next_boot: Vec::new(),
                interfaces: vec![Interface {
                    child_type: "NetworkPhysicalInterface".into(),
                    name: "BOOTIF".into(),
                    mac: Some(mac),
                    ip: Some(if b {
                        "0.0.0.0".into()
                    } else {
                        format!("10.141.0.{n}")
                    }),
                    rest: serde_json::Map::new(),
                }],
                rack_position: Some(RackPosition {
                    rack: Some(rack.to_owned()),
                    rest: serde_json::Map::new(),
                }),
                extra_values: extra,
                rest,
            };
            s.nodes.insert(
                d.uuid.clone(),
                Node {
                    on: !b,
                    status: if b { "DOWN" } else { "UP" }.to_owned(),
                    boot: None,
                    install_fault: None,
                    stuck: false,
                    disks: DISKS.iter().map(|d| ((*d).to_owned(), None)).collect(),
                    gpus: (gpu, 8),
                    wipes: 0,
                },
            );
            s.devices.insert(d.uuid.clone(), d);
        }
        Arc::new(FakeBcm {
            state: Mutex::new(s),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The calls made so far, one line each, and forgets them.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().log)
    }

    /// The next call of `key` (`cmdevice.updateDevice`) fails with `fault`.
    pub fn fail_next(&self, key: &str, fault: Fault) {
        self.lock().faults.push_back((key.to_owned(), fault));
    }

    /// Installs on `hostname` stop in `status` (`INSTALLER_FAILED`, …); `None` clears.
    pub fn install_fault(&self, hostname: &str, status: Option<&str>) {
        let mut s = self.lock();
        if let Some(uuid) = uuid_of(&s, hostname)
            && let Some(n) = s.nodes.get_mut(&uuid)
        {
            n.install_fault = status.map(str::to_owned);
        }
    }

    /// Boots of `hostname` never get past INSTALLING while set.
    pub fn stuck(&self, hostname: &str, stuck: bool) {
        let mut s = self.lock();
        if let Some(uuid) = uuid_of(&s, hostname)
            && let Some(n) = s.nodes.get_mut(&uuid)
        {
            n.stuck = stuck;
        }
    }

    /// Someone else updates `hostname` just before the next update of it arrives.
    pub fn race_next_update(&self, hostname: &str) {
        self.lock().race = Some(hostname.to_owned());
    }

    /// The device, as stored.
    pub fn device(&self, hostname: &str) -> Device {
        let s = self.lock();
        s.devices
            .values()
            .find(|d| d.hostname == hostname)
            .cloned()
            .expect("known node")
    }

    /// Changes a device behind Terraform's back (bumping its revision).
    pub fn edit(&self, hostname: &str, f: impl FnOnce(&mut Device)) {
        let mut s = self.lock();
        if let Some(d) = s.devices.values_mut().find(|d| d.hostname == hostname) {
            f(d);
            bump(d);
        }
    }

    /// (status, power on, data owner, wipes) of a node.
    pub fn node(&self, hostname: &str) -> (String, bool, Option<String>, u32) {
        let s = self.lock();
        let uuid = uuid_of(&s, hostname).expect("known node");
        let n = &s.nodes[&uuid];
        (n.status.clone(), n.on, n.data_owner(), n.wipes)
    }

    /// Each block device of a node with whose data is on it.
    pub fn disk_data(&self, hostname: &str) -> Vec<(String, Option<String>)> {
        let s = self.lock();
        let uuid = uuid_of(&s, hostname).expect("known node");
        s.nodes[&uuid].disks.clone()
    }

    /// Gives a node's device the disk setup `devices` (bumping its revision).
    pub fn set_disk_setup(&self, hostname: &str, devices: &[&str]) {
        self.edit(hostname, |d| {
            d.rest
                .insert("disksetup".into(), json!(disk_setup_xml(devices)));
        });
    }

    /// Powers a node off behind Terraform's back.
    pub fn power_off_out_of_band(&self, hostname: &str) {
        let mut s = self.lock();
        let uuid = uuid_of(&s, hostname).expect("known node");
        if let Some(n) = s.nodes.get_mut(&uuid) {
            n.on = false;
            n.status = "DOWN".to_owned();
            n.boot = None;
        }
    }

    /// Brings booting nodes up, as time passing would.
    pub fn settle(&self) {
        let mut s = self.lock();
        let uuids: Vec<String> = s.nodes.keys().cloned().collect();
        for u in uuids {
            for _ in 0..BOOT.len() {
                step(&mut s, &u);
            }
        }
    }

    pub fn leaks(&self) -> Vec<Leak> {
        self.lock().leaks.clone()
    }

    /// Logs and counts a call, and takes its fault if one is due.
    fn enter(&self, key: &str, args: &serde_json::Value) -> Result<(), ApiError> {
        let mut s = self.lock();
        s.log.push(format!("{key} {args}"));
        *s.calls.entry(key.to_owned()).or_default() += 1;
        let fault = if s.budget.spend() {
            let Some(pos) = s.faults.iter().position(|(k, _)| k == key) else {
                return Ok(());
            };
            s.faults.remove(pos).map(|(_, f)| f)
        } else {
            Some(Fault::Unavailable)
        };
        match fault {
            Some(Fault::Refuse(m)) => Err(ApiError::Refused(m.to_owned())),
            Some(Fault::Unavailable) => Err(ApiError::Status {
                status: 503,
                message: "Service Unavailable".to_owned(),
            }),
            None => Ok(()),
        }
    }
}

fn uuid_of(s: &State, key: &str) -> Option<String> {
    s.devices
        .values()
        .find(|d| d.uuid == key || d.hostname == key)
        .map(|d| d.uuid.clone())
}

fn bump(d: &mut Device) {
    let r: u64 = d.revision.parse().unwrap_or(0);
    d.revision = (r + 1).to_string();
}

/// Moves a booting node one step; at UP the boot's install happens.
fn step(s: &mut State, uuid: &str) {
    let Some(n) = s.nodes.get(uuid).cloned() else {
        return;
    };
    let Some(i) = n.boot else { return };
    if BOOT[i] == "INSTALLING" {
        if let Some(f) = &n.install_fault {
            let n = s.nodes.get_mut(uuid).expect("node");
            n.status = f.clone();
            n.boot = None;
            // The one-shot settings were used by this boot.
            if let Some(d) = s.devices.get_mut(uuid) {
                d.next_boot_install_mode = None;
                d.block_devices_cleared_on_next_boot.clear();
                bump(d);
            }
            return;
        }
        if n.stuck {
            return;
        }
    }
    let next = i + 1;
    if BOOT[next] != "UP" {
        let n = s.nodes.get_mut(uuid).expect("node");
        n.boot = Some(next);
        n.status = BOOT[next].to_owned();
        return;
    }
    // The install: the mode is the one-shot, else the node's, else the category's.
    let Some(d) = s.devices.get(uuid).cloned() else {
        return;
    };
    let category_mode = s
        .categories
        .iter()
        .find(|c| Some(&c.uuid) == d.category.as_ref())
        .and_then(|c| c.install_mode.clone());
    let mode = d
        .next_boot_install_mode
        .clone()
        .or(d.install_mode.clone())
        .or(category_mode)
        .unwrap_or_else(|| "AUTO".to_owned());
    let tenant = d.tenant().map(str::to_owned);
    let mut leak = None;
    {
        let n = s.nodes.get_mut(uuid).expect("node");
        // The listed devices are cleared whatever the mode; a FULL install re-creates the OS
        // disk as well. Any other disk keeps what it holds.
        let mut cleared = false;
        for (i, (dev, owner)) in n.disks.iter_mut().enumerate() {
            let listed = d
                .block_devices_cleared_on_next_boot
                .iter()
                .any(|l| same_block_device(l, dev));
            if listed || (i == 0 && mode == "FULL") {
                cleared |= owner.is_some() || listed;
                *owner = None;
            }
        }
        if cleared && !d.block_devices_cleared_on_next_boot.is_empty() {
            n.wipes += 1;
        }
        if let Some(t) = &tenant {
            if let Some(u) = n
                .disks
                .iter()
                .find_map(|(_, o)| o.clone().filter(|o| o != t))
            {
                leak = Some(Leak {
                    hostname: d.hostname.clone(),
                    from: u,
                    to: t.clone(),
                });
            }
            for (_, owner) in &mut n.disks {
                *owner = Some(t.clone());
            }
        }
        n.boot = None;
        n.status = "UP".to_owned();
    }
    s.leaks.extend(leak);
    if let Some(d) = s.devices.get_mut(uuid) {
        d.next_boot_install_mode = None;
        d.block_devices_cleared_on_next_boot.clear();
        if let Some(ip) = d.interfaces.first_mut()
            && ip.ip.as_deref() == Some("0.0.0.0")
        {
            ip.ip = Some(format!("10.141.1.{}", d.uuid.len()));
        }
        bump(d);
    }
}

fn read_err(what: &str) -> impl Fn(ApiError) -> BcmError + '_ {
    move |source| BcmError::Read {
        what: what.to_owned(),
        source,
    }
}

#[async_trait]
impl BcmApi for FakeBcm {
    async fn device(&self, uuid: &str) -> Result<Option<Device>, BcmError> {
        self.enter("cmdevice.getDevice", &json!([uuid]))
            .map_err(read_err(uuid))?;
        Ok(self.lock().devices.get(uuid).cloned())
    }

    async fn devices(&self) -> Result<Vec<Device>, BcmError> {
        self.enter("cmdevice.getDevices", &json!([]))
            .map_err(read_err("devices"))?;
        Ok(self.lock().devices.values().cloned().collect())
    }

    async fn update_device(&self, device: &Device) -> Result<(), BcmError> {
        let what = format!("node {}", device.hostname);
        let body = serde_json::to_value(device).expect("encode");
        self.enter("cmdevice.updateDevice", &json!([body, 0]))
            .map_err(|source| BcmError::Update {
                what: what.clone(),
                source,
            })?;
        let mut s = self.lock();
        if s.race.as_deref() == Some(device.hostname.as_str()) {
            s.race = None;
            if let Some(d) = s.devices.get_mut(&device.uuid) {
                d.category = Some(uuid(13));
                bump(d);
            }
        }
        let Some(stored) = s.devices.get(&device.uuid).cloned() else {
            return Err(BcmError::Rejected {
                what,
                validation: vec![validation("uuid", "no such device", "BAD_VALUE")],
            });
        };
        if !device.revision.is_empty() && device.revision != stored.revision {
            return Err(BcmError::RevisionConflict {
                what,
                detail: format!(
                    "revision mismatch: sent {}, stored {}",
                    device.revision, stored.revision
                ),
            });
        }
        if !s
            .categories
            .iter()
            .any(|c| Some(&c.uuid) == device.category.as_ref())
        {
            return Err(BcmError::Rejected {
                what,
                validation: vec![validation("category", "no such category", "BAD_VALUE")],
            });
        }
        if let Some(i) = device.image()
            && !s.images.iter().any(|x| x.uuid == i)
        {
            return Err(BcmError::Rejected {
                what,
                validation: vec![validation(
                    "softwareImageProxy",
                    "no such software image",
                    "BAD_VALUE",
                )],
            });
        }
        let mut d = device.clone();
        d.revision = stored.revision.clone();
        bump(&mut d);
        s.devices.insert(d.uuid.clone(), d);
        Ok(())
    }

    async fn category(&self, uuid: &str) -> Result<Option<Category>, BcmError> {
        self.enter("cmdevice.getCategory", &json!([uuid]))
            .map_err(read_err(uuid))?;
        let s = self.lock();
        Ok(s.categories.iter().find(|c| c.uuid == uuid).cloned())
    }

    async fn categories(&self) -> Result<Vec<Category>, BcmError> {
        self.enter("cmdevice.getCategories", &json!([]))
            .map_err(read_err("categories"))?;
        Ok(self.lock().categories.clone())
    }

    async fn software_image(&self, uuid: &str) -> Result<Option<SoftwareImage>, BcmError> {
        self.enter("cmpart.getSoftwareImage", &json!([uuid]))
            .map_err(read_err(uuid))?;
        let s = self.lock();
        Ok(s.images.iter().find(|c| c.uuid == uuid).cloned())
    }

    async fn software_images(&self) -> Result<Vec<SoftwareImage>, BcmError> {
        self.enter("cmpart.getSoftwareImages", &json!([]))
            .map_err(read_err("images"))?;
        Ok(self.lock().images.clone())
    }

    async fn status(&self, uuid: &str) -> Result<Option<DeviceStatus>, BcmError> {
        self.enter("cmstatus.getStatus", &json!([uuid]))
            .map_err(read_err(uuid))?;
        let mut s = self.lock();
        let r = status_of(&s, uuid);
        step(&mut s, uuid);
        Ok(r)
    }

    async fn statuses(&self, uuids: &[String]) -> Result<Vec<DeviceStatus>, BcmError> {
        self.enter("cmstatus.getStatusForDevices", &json!([uuids]))
            .map_err(read_err("status"))?;
        let s = self.lock();
        Ok(uuids.iter().filter_map(|u| status_of(&s, u)).collect())
    }

    async fn sysinfo(&self, uuids: &[String]) -> Result<Vec<SysInfo>, BcmError> {
        self.enter(
            "cmdevice.getSysInfoCollectors",
            &json!([uuids, false, false]),
        )
        .map_err(read_err("system information"))?;
        let s = self.lock();
        Ok(uuids
            .iter()
            .filter_map(|u| {
                s.devices.get(u)?;
                let n = s.nodes.get(u)?;
                Some(SysInfo {
                    device: u.clone(),
                    gpus: (0..n.gpus.1)
                        .map(|_| GpuInfo {
                            name: n.gpus.0.to_owned(),
                        })
                        .collect(),
                    disks: n
                        .disks
                        .iter()
                        .map(|(name, _)| DiskInfo { name: name.clone() })
                        .collect(),
                })
            })
            .collect())
    }

    async fn power(
        &self,
        uuids: &[String],
        op: PowerOp,
        what: &str,
    ) -> Result<PowerResult, BcmError> {
        self.enter(
            "cmdevice.powerOperation",
            &json!([{"devices": uuids, "operation": op.as_str(), "force": false}]),
        )
        .map_err(|source| BcmError::Power {
            operation: op.as_str(),
            what: what.to_owned(),
            source,
        })?;
        let mut s = self.lock();
        let mut count = 0;
        for u in uuids {
            let Some(n) = s.nodes.get_mut(u) else {
                continue;
            };
            match op {
                PowerOp::On if !n.on => {
                    n.on = true;
                    n.boot = Some(0);
                    n.status = BOOT[0].to_owned();
                    count += 1;
                }
                PowerOp::Reset if n.on => {
                    n.boot = Some(0);
                    n.status = BOOT[0].to_owned();
                    count += 1;
                }
                PowerOp::Off if n.on => {
                    n.on = false;
                    n.boot = None;
                    n.status = "DOWN".to_owned();
                    count += 1;
                }
                _ => {}
            }
        }
        Ok(PowerResult { count, index: 1 })
    }

    fn stats(&self) -> CallStats {
        CallStats {
            calls: self.lock().calls.clone(),
        }
    }
}

fn validation(
    field: &str,
    message: &str,
    code: &str,
) -> gpufleet_engine::backends::bcm::Validation {
    gpufleet_engine::backends::bcm::Validation {
        field: field.to_owned(),
        message: message.to_owned(),
        error_code: code.to_owned(),
        severity: "ERROR".to_owned(),
        ref_entity_uuid: String::new(),
    }
}

fn status_of(s: &State, uuid: &str) -> Option<DeviceStatus> {
    s.devices.get(uuid)?;
    let n = s.nodes.get(uuid)?;
    Some(DeviceStatus {
        uuid: uuid.to_owned(),
        status: n.status.clone(),
        closed: false,
        message: if n.status.starts_with("INSTALLER_") && n.status != "INSTALLER_CALLING_INIT" {
            "install aborted".to_owned()
        } else {
            String::new()
        },
    })
}

/// Replaces every uuid in `text` with `<uuid>`.
pub fn redact_uuids(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if i + 36 <= bytes.len() && is_uuid(&text[i..i + 36]) {
            out.push_str("<uuid>");
            i += 36;
        } else {
            let c = text[i..].chars().next().expect("char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn is_uuid(s: &str) -> bool {
    s.char_indices().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => c == '-',
        _ => c.is_ascii_hexdigit(),
    })
}

// =============================================================================================
// Terraform core, as far as one resource instance goes

/// The node kind over `fake`.
pub fn kind(fake: &Arc<FakeBcm>) -> BcmNode<Arc<FakeBcm>> {
    BcmNode(Arc::clone(fake))
}

/// A node configuration: tenant-a on `hostname` in gpu-compute, with extra attributes.
pub fn node(kind: &dyn ResourceKind, hostname: &str, extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![
        ("hostname", Value::string(hostname)),
        ("category", Value::string("gpu-compute")),
        ("software_image", Value::string("ubuntu2404-cuda12.8")),
        ("tenant", Value::string("tenant-a")),
    ];
    attrs.extend(extra.iter().cloned());
    config(kind, &attrs)
}

/// A full configuration object: every attribute null except the given ones.
pub fn config(kind: &dyn ResourceKind, attrs: &[(&str, Value)]) -> Value {
    let schema = kind.schema();
    let mut obj: BTreeMap<String, Value> = schema
        .block
        .attributes
        .iter()
        .map(|a| (a.name.to_owned(), Value::Null))
        .chain(
            schema
                .block
                .blocks
                .iter()
                .map(|b| (b.type_name.to_owned(), Value::Null)),
        )
        .collect();
    for (k, v) in attrs {
        obj.insert((*k).to_owned(), v.clone());
    }
    Value::Object(obj)
}

// =============================================================================================
// Terraform's side, shared with the other resources' suites.

#[path = "terraform.rs"]
mod terraform;
pub use terraform::*;

#[path = "sweep.rs"]
pub mod sweep;

impl sweep::Budgeted for FakeBcm {
    fn budget<R>(&self, f: impl FnOnce(&mut sweep::Budget) -> R) -> R {
        f(&mut self.lock().budget)
    }
    /// The nodes gpufleet holds: claimed for a tenant, or still being wiped after one.
    fn owned(&self) -> Vec<String> {
        let s = self.lock();
        s.devices
            .values()
            .filter_map(|d| match (d.tenant(), d.releasing()) {
                (Some(t), _) => Some(format!("node {} for {t}", d.hostname)),
                (None, Some(t)) => Some(format!("node {} releasing from {t}", d.hostname)),
                (None, None) => None,
            })
            .collect()
    }

    /// Every node's category, image, power, status and whose data is on its disks, and the
    /// leaks so far.
    fn snapshot(&self) -> String {
        let s = self.lock();
        let mut out: Vec<String> = s
            .devices
            .values()
            .map(|d| {
                let n = s.nodes.get(&d.uuid);
                format!(
                    "{} category={:?} image={:?} on={:?} status={:?} data={:?}",
                    d.hostname,
                    d.category,
                    d.image(),
                    n.map(|n| n.on),
                    n.map(|n| n.status.as_str()),
                    n.and_then(Node::data_owner),
                )
            })
            .collect();
        out.push(format!("leaks {:?}", s.leaks));
        out.join("\n")
    }
}
