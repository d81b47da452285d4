//! What the emulator stores: entities as JSON objects (devices, categories, software
//! images, exactly as clients read them back), and per node what is not part of the
//! device: status, power, an install in progress, and whose data is on each of its disks.
//!
//! Every seeded node carries its own disk setup (`disksetup`, BCM's partition layout XML)
//! naming all of its block devices; its GPUs and disks are reported as system information
//! (`cmdevice.getSysInfoCollectors`), never as device fields.
//!
//! Entities stay JSON because updates are whole-object and BCM keeps fields a client
//! sends that this emulator does not interpret; the fields it does interpret are checked
//! and normalised on every commit ([`super::entities`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::inventory::BcmInventory;
use super::uuid::name_uuid;

/// The state file's format version.
pub const DB_VERSION: u32 = 1;

/// The zero UUID: "none" or "inherited" in BCM's references.
pub const ZERO_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// A JSON object.
pub type Obj = Map<String, Value>;

/// The seeded categories: name, image name, install mode.
pub const SEED_CATEGORIES: [(&str, &str, &str); 3] = [
    ("free-pool", "baseline", "AUTO"),
    ("gpu-compute", "ubuntu2404-cuda12.8", "AUTO"),
    ("gpu-inference", "ubuntu2404-cuda13.0", "AUTO"),
];

/// The seeded software images: name, kernel version.
pub const SEED_IMAGES: [(&str, &str); 3] = [
    ("baseline", "6.8.0-51-generic"),
    ("ubuntu2404-cuda12.8", "6.8.0-60-generic"),
    ("ubuntu2404-cuda13.0", "6.8.0-71-generic"),
];

/// The network every seeded boot interface is on.
pub const NODE_NETWORK: &str = "internalnet";

/// A node's status as `cmstatus` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Powered off, or just reset.
    Down,
    /// PXE boot, loading the installer.
    Booting,
    /// The installer syncs the image.
    Installing,
    /// The installer hands over to the installed system.
    InstallerCallinginit,
    /// Running.
    Up,
    /// The install failed (injected fault); stays until the next power operation.
    InstallerFailed,
    /// The installer lost the head node (injected fault); stays until the next power
    /// operation.
    InstallerUnreachable,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        f.write_str(&s)
    }
}

/// Power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Power {
    /// On.
    On,
    /// Off.
    Off,
}

/// An install fault a node's next installs stop in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstallFault {
    /// Stop in `INSTALLER_FAILED`.
    InstallerFailed,
    /// Stop in `INSTALLER_UNREACHABLE`.
    InstallerUnreachable,
}

impl InstallFault {
    /// The status the install stops in.
    #[must_use]
    pub fn status(self) -> Status {
        match self {
            Self::InstallerFailed => Status::InstallerFailed,
            Self::InstallerUnreachable => Status::InstallerUnreachable,
        }
    }
}

/// A boot in progress: `DOWN` at `started_ms`, then one status per step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boot {
    /// When it began, epoch ms.
    pub started_ms: u64,
    /// The length of each step, ms.
    pub step_ms: u64,
    /// Steps already carried out (0: `DOWN`; 4: `UP`).
    pub phase: u8,
    /// The install mode in effect (`AUTO`, `FULL`, …).
    pub mode: String,
    /// The block devices the install clears (`blockDevicesClearedOnNextBoot` when the
    /// boot began).
    #[serde(default)]
    pub clear: Vec<String>,
    /// An install fault in force when the boot began.
    pub fault: Option<InstallFault>,
}

/// What a node is doing, kept apart from its device object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// Status.
    pub status: Status,
    /// Power.
    pub power: Power,
    /// Closed by an operator (power operations skip it unless forced).
    pub closed: bool,
    /// A status message.
    pub message: String,
    /// The block devices, the OS disk first, with whose data is on each.
    #[serde(default)]
    pub disks: Vec<Disk>,
    /// A boot in progress.
    pub boot: Option<Boot>,
}

/// One block device of a node and whose data it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// The device, e.g. `/dev/nvme0n1`.
    pub device: String,
    /// The tenant whose data is on it, if any.
    pub data_owner: Option<String>,
}

impl NodeState {
    /// A node powered on and up, or off and down, with empty `disks`.
    #[must_use]
    pub fn idle(on: bool, disks: &[String]) -> Self {
        Self {
            status: if on { Status::Up } else { Status::Down },
            power: if on { Power::On } else { Power::Off },
            closed: false,
            message: String::new(),
            disks: disks
                .iter()
                .map(|d| Disk {
                    device: d.clone(),
                    data_owner: None,
                })
                .collect(),
            boot: None,
        }
    }

    /// Whose data is on the disks (the first owner found), if anyone's.
    #[must_use]
    pub fn data_owner(&self) -> Option<&str> {
        self.disks.iter().find_map(|d| d.data_owner.as_deref())
    }
}

/// Whether two block device names name the same device (`/dev/sda` and `sda` do).
#[must_use]
pub fn same_device(a: &str, b: &str) -> bool {
    a.trim().trim_start_matches("/dev/") == b.trim().trim_start_matches("/dev/")
}

/// A disk setup (BCM's partition layout XML) naming `devices`, the first holding `/`.
#[must_use]
pub fn disk_setup_xml(devices: &[String]) -> String {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<diskSetup>\n");
    for (i, d) in devices.iter().enumerate() {
        let (mount, fs) = if i == 0 {
            ("/", "xfs")
        } else {
            ("/raid", "ext4")
        };
        xml.push_str(&format!(
            "  <device>\n    <blockdev>{d}</blockdev>\n    <partition id=\"a{i}\">\n      \
             <size>max</size>\n      <type>linux</type>\n      <filesystem>{fs}</filesystem>\n      \
             <mountPoint>{mount}</mountPoint>\n    </partition>\n  </device>\n"
        ));
    }
    xml.push_str("</diskSetup>\n");
    xml
}

/// One tenant's data found by another tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leak {
    /// The node.
    pub hostname: String,
    /// The block devices that held it.
    #[serde(default)]
    pub devices: Vec<String>,
    /// Whose data was on the disks.
    pub from: String,
    /// Who got the node.
    pub to: String,
    /// When, epoch ms.
    pub at: u64,
}

/// Every stored object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Db {
    /// [`DB_VERSION`].
    pub version: u32,
    /// What it was seeded from.
    pub inventory: BcmInventory,
    /// The last revision handed out.
    pub revision: u64,
    /// The last power operation's index.
    pub power_index: u64,
    /// Devices by uuid.
    pub devices: BTreeMap<String, Obj>,
    /// Categories by uuid.
    pub categories: BTreeMap<String, Obj>,
    /// Software images by uuid.
    pub images: BTreeMap<String, Obj>,
    /// Node state by device uuid.
    pub nodes: BTreeMap<String, NodeState>,
    /// Leaks seen, oldest first.
    pub leaks: Vec<Leak>,
}

/// A string field of an object (`""` when absent or not a string).
#[must_use]
pub fn str_field<'a>(obj: &'a Obj, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The tenant recorded on a device (`extra_values.gpufleet_tenant`), if any.
#[must_use]
pub fn tenant(device: &Obj) -> Option<&str> {
    device
        .get("extra_values")
        .and_then(|e| e.get("gpufleet_tenant"))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
}

impl Db {
    /// A fresh state: the seeded images and categories, and one device per inventory
    /// node in `free-pool`, up or off as its rack idles.
    #[must_use]
    pub fn seeded(inventory: BcmInventory) -> Self {
        let mut db = Self {
            version: DB_VERSION,
            inventory: BcmInventory::default(),
            revision: 0,
            power_index: 0,
            devices: BTreeMap::new(),
            categories: BTreeMap::new(),
            images: BTreeMap::new(),
            nodes: BTreeMap::new(),
            leaks: Vec::new(),
        };
        for (name, kernel) in SEED_IMAGES {
            let uuid = name_uuid("image", name);
            let rev = db.next_revision();
            let image = serde_json::json!({
                "baseType": "SoftwareImage",
                "childType": "SoftwareImage",
                "uuid": uuid,
                "revision": rev,
                "name": name,
                "path": format!("/cm/images/{name}"),
                "kernelVersion": kernel,
            });
            if let Value::Object(m) = image {
                db.images.insert(uuid, m);
            }
        }
        for (name, image, mode) in SEED_CATEGORIES {
            let uuid = name_uuid("category", name);
            let rev = db.next_revision();
            let category = serde_json::json!({
                "baseType": "Category",
                "childType": "Category",
                "uuid": uuid,
                "revision": rev,
                "name": name,
                "softwareImageProxy": {"parentSoftwareImage": name_uuid("image", image)},
                "installMode": mode,
            });
            if let Value::Object(m) = category {
                db.categories.insert(uuid, m);
            }
        }
        let free_pool = name_uuid("category", "free-pool");
        for node in &inventory.nodes {
            let uuid = name_uuid("device", &node.hostname);
            let disks = node.block_devices();
            let rev = db.next_revision();
            let device = serde_json::json!({
                "baseType": "Device",
                "childType": "PhysicalNode",
                "uuid": uuid,
                "revision": rev,
                "hostname": node.hostname,
                "mac": node.mac,
                "category": free_pool,
                "softwareImageProxy": {"parentSoftwareImage": ZERO_UUID},
                "installMode": "",
                "nextBootInstallMode": "",
                "blockDevicesClearedOnNextBoot": [],
                "interfaces": [{
                    "childType": "NetworkPhysicalInterface",
                    "name": "BOOTIF",
                    "mac": node.mac,
                    "ip": node.ip,
                    "network": NODE_NETWORK,
                }],
                "bootLoader": "CATEGORY",
                "disksetup": disk_setup_xml(&disks),
                "rackPosition": {"rack": node.rack, "position": node.position},
                "extra_values": {
                    "idle_power": node.idle_power,
                },
            });
            if let Value::Object(m) = device {
                db.devices.insert(uuid.clone(), m);
            }
            db.nodes
                .insert(uuid, NodeState::idle(node.idle_power != "off", &disks));
        }
        db.inventory = inventory;
        db
    }

    /// Gives every inventory node without disks its block devices, and its device a disk
    /// setup naming them when it has none (a state saved by an older emulator). Returns
    /// whether anything changed.
    pub fn add_missing_disks(&mut self) -> bool {
        let mut changed = false;
        for hw in self.inventory.nodes.clone() {
            let uuid = name_uuid("device", &hw.hostname);
            let disks = hw.block_devices();
            if let Some(node) = self.nodes.get_mut(&uuid)
                && node.disks.is_empty()
            {
                node.disks = NodeState::idle(false, &disks).disks;
                changed = true;
            }
            if let Some(device) = self.devices.get_mut(&uuid)
                && !device.contains_key("disksetup")
            {
                device.insert("disksetup".into(), Value::String(disk_setup_xml(&disks)));
                changed = true;
            }
        }
        changed
    }

    /// The next revision, as the string entities carry.
    pub fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    /// The device with this uuid (cmdaemon fetches by uuid only).
    #[must_use]
    pub fn find_device(&self, uuid: &str) -> Option<(&String, &Obj)> {
        self.devices.get_key_value(uuid)
    }

    /// The category with this uuid.
    #[must_use]
    pub fn find_category(&self, uuid: &str) -> Option<(&String, &Obj)> {
        self.categories.get_key_value(uuid)
    }

    /// The software image with this uuid.
    #[must_use]
    pub fn find_image(&self, uuid: &str) -> Option<(&String, &Obj)> {
        self.images.get_key_value(uuid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bcm::inventory::InventoryNode;

    fn inventory() -> BcmInventory {
        BcmInventory {
            nodes: vec![InventoryNode {
                hostname: "gpu-01".into(),
                mac: "02:00:00:00:00:01".into(),
                ip: "10.240.0.11".into(),
                rack: "rack-a".into(),
                position: 1,
                gpu_product: "NVIDIA-B200".into(),
                gpu_count: 8,
                idle_power: "on".into(),
                disks: Vec::new(),
            }],
        }
    }

    #[test]
    fn a_state_saved_without_disks_gets_them_from_its_inventory() {
        let mut db = Db::seeded(inventory());
        let uuid = name_uuid("device", "gpu-01");
        let seeded = db.clone();
        if let Some(n) = db.nodes.get_mut(&uuid) {
            n.disks.clear();
        }
        if let Some(d) = db.devices.get_mut(&uuid) {
            d.remove("disksetup");
        }
        assert!(db.add_missing_disks());
        assert_eq!(db, seeded);
        assert!(!db.add_missing_disks(), "nothing left to add");
        let devices: Vec<&str> = db.nodes[&uuid]
            .disks
            .iter()
            .map(|d| d.device.as_str())
            .collect();
        assert_eq!(
            devices,
            [
                "/dev/sda",
                "/dev/nvme0n1",
                "/dev/nvme1n1",
                "/dev/nvme2n1",
                "/dev/nvme3n1"
            ]
        );
    }
}
