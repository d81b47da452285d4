//! The cmdaemon JSON API's wire shapes: devices, categories, software images, device status,
//! commit results and power results.
//!
//! Devices and categories keep every field they arrive with (`rest`), because updates are
//! whole-object: what gpufleet does not understand goes back unchanged. The fields gpufleet
//! does read are normalised on the way in: the sentinels cmdaemon reports for inherited values
//! (the zero uuid for an image, `""`/`CATEGORY` for an install mode, `0.0.0.0` for an unset
//! address) become `None`, so a node that inherits reads the same as one that never had the
//! value, and no perpetual diff comes from the spelling. On the way out, `None` is written the
//! way the API spells "inherit": `installMode: ""`, `softwareImageProxy: null`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The uuid cmdaemon reports for a reference that is inherited or unset.
pub const ZERO_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// The `extra_values` key that records the tenant holding a node.
pub const TENANT_KEY: &str = "gpufleet_tenant";
/// Where gpufleet records, while a released node is being wiped, whose data is still on it.
/// Such a node is neither held nor free: nobody can claim it until the wipe has finished.
pub const RELEASING_KEY: &str = "gpufleet_releasing";

/// `Some(s)` unless `s` is empty or one of the sentinels for "inherited / unset".
fn meaningful(s: Option<String>) -> Option<String> {
    s.filter(|v| {
        let v = v.trim();
        !v.is_empty() && v != ZERO_UUID && v != "0.0.0.0" && !v.eq_ignore_ascii_case("CATEGORY")
    })
}

fn de_meaningful<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(meaningful(Option::<String>::deserialize(d)?))
}

/// `None` is written as `""`, the API's "use the category's value".
fn ser_inherit<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_deref().unwrap_or(""))
}

fn de_string_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    // `revision` is a string on the wire, but tolerate a number.
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// `softwareImageProxy`: a per-node (or per-category) software image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageProxy {
    /// The image's uuid; `None` when inherited (the zero uuid on the wire).
    #[serde(default, deserialize_with = "de_meaningful")]
    pub parent_software_image: Option<String>,
    /// Anything else the proxy carries.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

fn de_proxy<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ImageProxy>, D::Error> {
    let proxy = Option::<ImageProxy>::deserialize(d)?;
    Ok(proxy.filter(|p| p.parent_software_image.is_some()))
}

/// A network interface of a device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// `NetworkPhysicalInterface`, `NetworkBmcInterface`, …
    #[serde(default)]
    pub child_type: String,
    /// `BOOTIF`, `ipmi0`, …
    #[serde(default)]
    pub name: String,
    /// The MAC address, as sent (see [`Device::mac_address`]).
    #[serde(default)]
    pub mac: Option<String>,
    /// The address, as sent: `0.0.0.0` when unset (see [`Device::ip`]).
    #[serde(default)]
    pub ip: Option<String>,
    /// Everything else (network, dhcp, …), sent back unchanged.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `rackPosition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RackPosition {
    /// The rack's name.
    #[serde(default)]
    pub rack: Option<String>,
    /// Everything else (position, height, …).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A device (`baseType: "Device"`), as read and as written back whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// The device's uuid.
    #[serde(default)]
    pub uuid: String,
    /// Optimistic-concurrency token; an update whose revision is stale is refused.
    #[serde(default, deserialize_with = "de_string_lenient")]
    pub revision: String,
    /// The hostname.
    #[serde(default)]
    pub hostname: String,
    /// The MAC address, as sent (see [`Device::mac_address`]).
    #[serde(default)]
    pub mac: Option<String>,
    /// The uuid of the device's category.
    #[serde(default)]
    pub category: Option<String>,
    /// A software image set on the node itself; `None` when it inherits the category's.
    #[serde(default, deserialize_with = "de_proxy")]
    pub software_image_proxy: Option<ImageProxy>,
    /// The node's install mode; `None` when it uses the category's.
    #[serde(
        default,
        deserialize_with = "de_meaningful",
        serialize_with = "ser_inherit"
    )]
    pub install_mode: Option<String>,
    /// The install mode of the next boot only; cleared by cmdaemon during that boot.
    #[serde(
        default,
        deserialize_with = "de_meaningful",
        serialize_with = "ser_inherit"
    )]
    pub next_boot_install_mode: Option<String>,
    /// Block devices to clear on the next (FULL) boot; cleared by cmdaemon during that boot.
    #[serde(default, deserialize_with = "de_null_vec")]
    pub block_devices_cleared_on_next_boot: Vec<String>,
    /// Network interfaces.
    #[serde(default, deserialize_with = "de_null_vec")]
    pub interfaces: Vec<Interface>,
    /// Where the device sits.
    #[serde(default)]
    pub rack_position: Option<RackPosition>,
    /// Free-form values: the site's `idle_power`, and what gpufleet records (the tenant as
    /// `gpufleet_tenant`, a pending wipe as `gpufleet_releasing`).
    #[serde(default, rename = "extra_values", deserialize_with = "de_null_map")]
    pub extra_values: Map<String, Value>,
    /// Every other field (`baseType`, `childType`, `bootLoader`, …), sent back unchanged.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

fn de_null_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

fn de_null_map<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Object(m) => m,
        _ => Map::new(),
    })
}

impl Device {
    /// The uuid of the node's own software image, `None` when it inherits the category's.
    pub fn image(&self) -> Option<&str> {
        self.software_image_proxy
            .as_ref()
            .and_then(|p| p.parent_software_image.as_deref())
    }

    /// Sets (or, with `None`, clears) the node's own software image.
    pub fn set_image(&mut self, uuid: Option<&str>) {
        self.software_image_proxy = uuid.map(|u| ImageProxy {
            parent_software_image: Some(u.to_owned()),
            rest: Map::new(),
        });
    }

    /// A string from `extra_values`.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra_values
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The tenant holding the node; `None` when it is free.
    pub fn tenant(&self) -> Option<&str> {
        self.extra(TENANT_KEY)
    }

    /// Whether the device is a compute node (not the head node, a switch or a PDU); a device
    /// whose type is not given counts as a node.
    pub fn is_compute_node(&self) -> bool {
        self.rest
            .get("childType")
            .and_then(serde_json::Value::as_str)
            .is_none_or(|t| t.ends_with("Node") && t != "HeadNode")
    }

    /// The tenant whose data a pending wipe is removing; `None` when no wipe is pending.
    pub fn releasing(&self) -> Option<&str> {
        self.extra(RELEASING_KEY)
    }

    /// Marks the node as being wiped after `tenant` released it, or clears the mark.
    pub fn set_releasing(&mut self, tenant: Option<&str>) {
        match tenant {
            Some(t) => {
                self.extra_values
                    .insert(RELEASING_KEY.to_owned(), Value::String(t.to_owned()));
            }
            None => {
                self.extra_values.remove(RELEASING_KEY);
            }
        }
    }

    /// Records (or, with `None`, clears) the tenant holding the node.
    pub fn set_tenant(&mut self, tenant: Option<&str>) {
        match tenant {
            Some(t) => {
                self.extra_values
                    .insert(TENANT_KEY.to_owned(), Value::String(t.to_owned()));
            }
            None => {
                self.extra_values.remove(TENANT_KEY);
            }
        }
    }

    /// The node's own disk setup (`disksetup`, BCM's partition layout XML); `None` when it
    /// uses its category's.
    pub fn disk_setup(&self) -> Option<&str> {
        non_empty_text(&self.rest, "disksetup")
    }

    /// Whether the node's rack keeps idle nodes powered off (`extra_values.idle_power`).
    pub fn idles_off(&self) -> bool {
        self.extra("idle_power")
            .is_some_and(|p| p.eq_ignore_ascii_case("off"))
    }

    /// The rack's name.
    pub fn rack(&self) -> Option<&str> {
        self.rack_position
            .as_ref()
            .and_then(|r| r.rack.as_deref())
            .filter(|r| !r.is_empty())
    }

    /// The provisioning interface: `BOOTIF` when there is one, else the first.
    pub fn boot_interface(&self) -> Option<&Interface> {
        self.interfaces
            .iter()
            .find(|i| i.name == "BOOTIF")
            .or_else(|| self.interfaces.first())
    }

    /// The MAC address: the device's, else the boot interface's; `None` when unassigned
    /// (`00:00:00:00:00:00`).
    pub fn mac_address(&self) -> Option<&str> {
        fn assigned(m: Option<&str>) -> Option<&str> {
            m.filter(|m| !m.is_empty() && *m != "00:00:00:00:00:00")
        }
        assigned(self.mac.as_deref())
            .or_else(|| assigned(self.boot_interface().and_then(|i| i.mac.as_deref())))
    }

    /// The boot interface's address; `None` when unset (`0.0.0.0`).
    pub fn ip(&self) -> Option<&str> {
        self.boot_interface()
            .and_then(|i| i.ip.as_deref())
            .filter(|ip| !ip.is_empty() && *ip != "0.0.0.0")
    }
}

/// A category (`cmdevice.getCategory`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Category {
    /// The category's uuid.
    #[serde(default)]
    pub uuid: String,
    /// Its revision.
    #[serde(default, deserialize_with = "de_string_lenient")]
    pub revision: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The category's software image.
    #[serde(default, deserialize_with = "de_proxy")]
    pub software_image_proxy: Option<ImageProxy>,
    /// The category's install mode.
    #[serde(
        default,
        deserialize_with = "de_meaningful",
        serialize_with = "ser_inherit"
    )]
    pub install_mode: Option<String>,
    /// Every other field.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Category {
    /// The uuid of the category's software image.
    pub fn image(&self) -> Option<&str> {
        self.software_image_proxy
            .as_ref()
            .and_then(|p| p.parent_software_image.as_deref())
    }

    /// The category's disk setup (`disksetup`, BCM's partition layout XML).
    pub fn disk_setup(&self) -> Option<&str> {
        non_empty_text(&self.rest, "disksetup")
    }
}

/// A string field of `rest` that is set and not blank.
fn non_empty_text<'a>(rest: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    rest.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// What cmdaemon collected from a running node about its hardware (cmsh `sysinfo`): the
/// GPUs the driver reports and the block devices the kernel sees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SysInfo {
    /// The uuid of the node it describes (`ref_device_uuid`; pythoncm's manager keys the
    /// same record by `ref_node_uuid`).
    #[serde(rename = "ref_device_uuid", alias = "ref_node_uuid")]
    pub device: String,
    /// The GPUs, one entry each.
    pub gpus: Vec<GpuInfo>,
    /// The block devices.
    pub disks: Vec<DiskInfo>,
}

/// One GPU in a node's system information.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GpuInfo {
    /// The name the driver reports, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
}

/// One block device in a node's system information.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DiskInfo {
    /// The device, e.g. `/dev/nvme0n1` (or `nvme0n1`).
    pub name: String,
}

impl SysInfo {
    /// The GPU product as GPU feature discovery labels it (`nvidia.com/gpu.product`: the
    /// driver's name with blanks as dashes, e.g. `NVIDIA-H100-80GB-HBM3`); `None` when the
    /// node reports no GPU, or GPUs of more than one product.
    pub fn gpu_product(&self) -> Option<String> {
        let mut names = self
            .gpus
            .iter()
            .map(|g| g.name.trim())
            .filter(|n| !n.is_empty());
        let first = names.next()?;
        if names.any(|n| n != first) {
            return None;
        }
        Some(first.split_whitespace().collect::<Vec<_>>().join("-"))
    }

    /// How many GPUs the node reports.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }
}

/// Whether two block device names name the same device (`/dev/sda` and `sda` do).
pub fn same_block_device(a: &str, b: &str) -> bool {
    let bare = |s: &str| s.trim().trim_start_matches("/dev/").to_owned();
    bare(a) == bare(b)
}

/// A software image (`cmpart.getSoftwareImage`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SoftwareImage {
    /// The image's uuid.
    #[serde(default)]
    pub uuid: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its path on the head node.
    #[serde(default)]
    pub path: String,
    /// Its kernel version.
    #[serde(default)]
    pub kernel_version: String,
}

/// A device's status record (`cmstatus.getStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct DeviceStatus {
    /// The device's uuid (`ref_device_uuid`).
    #[serde(rename = "ref_device_uuid")]
    pub uuid: String,
    /// `DOWN`, `BOOTING`, `INSTALLING`, `INSTALLER_CALLING_INIT`, `UP`, `INSTALLER_FAILED`,
    /// `INSTALLER_UNREACHABLE`, … (the enum's names, as the JSON API sends them).
    pub status: String,
    /// Whether the device is closed (skipped by power operations without `force`).
    pub closed: bool,
    /// cmdaemon's note on the status (`infoMessage`).
    #[serde(rename = "infoMessage")]
    pub message: String,
}

impl DeviceStatus {
    /// Whether the node is up.
    pub fn is_up(&self) -> bool {
        self.status.eq_ignore_ascii_case("UP")
    }

    /// Whether the install stopped in a failure state.
    pub fn is_failed(&self) -> bool {
        matches!(
            self.status.to_ascii_uppercase().as_str(),
            "INSTALLER_FAILED" | "INSTALLER_UNREACHABLE"
        )
    }

    /// Whether the node is on its way up (booting or installing).
    pub fn is_booting(&self) -> bool {
        matches!(
            self.status.to_ascii_uppercase().as_str(),
            "BOOTING" | "INSTALLING" | "INSTALLER_CALLING_INIT" | "INSTALLER_REBOOTING"
        )
    }

    /// Whether the node is taken to be powered. BCM's JSON API publishes no synchronous
    /// power state (a `STATUS` power operation answers through session events), so, as
    /// NVIDIA's own cluster tooling does, a node that is `DOWN` counts as off and any other
    /// as on.
    pub fn is_on(&self) -> bool {
        !self.status.eq_ignore_ascii_case("DOWN")
    }
}

/// One entry of a commit's `validation` list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Validation {
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// `BAD_VALUE`, `DUPLICATE_FIELD`, `NOT_NULL`, …
    pub error_code: String,
    /// `ERROR` or `WARNING`.
    pub severity: String,
    /// The entity the entry is about.
    pub ref_entity_uuid: String,
}

impl Validation {
    /// Whether the entry is an error (not a warning).
    pub fn is_error(&self) -> bool {
        !self.severity.eq_ignore_ascii_case("WARNING")
    }

    /// Whether the entry reports a stale `revision`.
    pub fn is_revision_mismatch(&self) -> bool {
        self.field == "revision" && self.is_error()
    }
}

/// The answer to `add*` / `update*` / `remove*`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct CommitResult {
    /// Whether the change was stored (pythoncm renames an update's `result` to this).
    #[serde(alias = "result")]
    pub success: bool,
    /// Problems found.
    pub validation: Vec<Validation>,
    /// The asynchronous task that carries the change out.
    pub task_uuid: String,
}

/// A power operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerOp {
    /// Power on.
    On,
    /// Power off.
    Off,
    /// Power cycle (reboot).
    Reset,
}

impl PowerOp {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PowerOp::On => "ON",
            PowerOp::Off => "OFF",
            PowerOp::Reset => "RESET",
        }
    }
}

/// The answer to `cmdevice.powerOperation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PowerResult {
    /// Devices acted on; 0 when nothing was done (e.g. already in that state).
    pub count: u64,
    /// The operation's index in the power history.
    pub index: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inherited_sentinels_read_as_none_and_write_as_inherit() {
        let wire = json!({
            "baseType": "Device", "childType": "PhysicalNode",
            "uuid": "u1", "revision": "7", "hostname": "gpu-001",
            "mac": "00:00:00:00:00:00", "category": "c1",
            "softwareImageProxy": {"parentSoftwareImage": ZERO_UUID},
            "installMode": "", "nextBootInstallMode": "CATEGORY",
            "bootLoader": "CATEGORY",
            "interfaces": [{"childType": "NetworkPhysicalInterface", "name": "BOOTIF",
                            "mac": "aa:bb:cc:00:00:01", "ip": "0.0.0.0", "network": "n1"}],
            "rackPosition": {"rack": "rack-a1", "position": 3},
            "extra_values": {"idle_power": "off"},
            "disksetup": "<diskSetup/>"
        });
        let d: Device = serde_json::from_value(wire).expect("device");
        assert_eq!(d.image(), None);
        assert_eq!(d.install_mode, None);
        assert_eq!(d.next_boot_install_mode, None);
        assert_eq!(d.ip(), None);
        assert_eq!(d.mac_address(), Some("aa:bb:cc:00:00:01"));
        assert_eq!(d.rack(), Some("rack-a1"));
        assert!(d.idles_off());
        assert_eq!(d.disk_setup(), Some("<diskSetup/>"));
        assert_eq!(d.tenant(), None);
        let back = serde_json::to_value(&d).expect("encode");
        assert_eq!(back["installMode"], "");
        assert_eq!(back["softwareImageProxy"], Value::Null);
        assert_eq!(
            back["bootLoader"], "CATEGORY",
            "unknown fields go back unchanged"
        );
        assert_eq!(back["interfaces"][0]["network"], "n1");
        assert_eq!(back["rackPosition"]["position"], 3);
        assert_eq!(back["baseType"], "Device");
    }

    #[test]
    fn gpu_product_is_the_driver_name_as_gpu_feature_discovery_labels_it() {
        let info: SysInfo = serde_json::from_value(json!({
            "device": "u1",
            "gpus": [{"name": "NVIDIA H100 80GB HBM3"}, {"name": "NVIDIA H100 80GB HBM3"}],
            "disks": [{"name": "/dev/sda"}]
        }))
        .expect("sysinfo");
        assert_eq!(info.gpu_product().as_deref(), Some("NVIDIA-H100-80GB-HBM3"));
        assert_eq!(info.gpu_count(), 2);
        let mixed = SysInfo {
            gpus: vec![
                GpuInfo {
                    name: "NVIDIA L4".into(),
                },
                GpuInfo {
                    name: "NVIDIA L40S".into(),
                },
            ],
            ..SysInfo::default()
        };
        assert_eq!(mixed.gpu_product(), None);
        assert_eq!(SysInfo::default().gpu_product(), None);
        assert!(same_block_device("/dev/nvme0n1", "nvme0n1"));
        assert!(!same_block_device("/dev/nvme0n1", "/dev/nvme1n1"));
    }

    #[test]
    fn commit_result_accepts_result_for_success() {
        let r: CommitResult =
            serde_json::from_value(json!({"result": true, "validation": []})).expect("commit");
        assert!(r.success);
    }
}
