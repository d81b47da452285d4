//! The node a wholly known plan asks for, built from its [`NodeConfig`], and the attributes
//! BCM shows for it.

use super::{
    TYPE_NAME,
    config::NodeConfig,
    schema::{
        CATEGORY, DEFAULT_INSTALL_MODE, GPU_COUNT, GPU_PRODUCT, HOSTNAME, ID, IP, MAC, POWER_OFF,
        POWER_ON, RACK, STATUS, TENANT,
    },
};
use crate::{
    backends::bcm::{Device, DeviceStatus, SysInfo},
    diag::Diagnostics,
    path::AttrPath,
    value::{Known, Value},
};

/// The desired node, from a planned value whose configuration is known.
#[derive(Debug, Clone)]
pub(super) struct Desired {
    pub(super) hostname: String,
    pub(super) category: String,
    pub(super) software_image: Option<String>,
    pub(super) install_mode: String,
    pub(super) power_on: bool,
    pub(super) tenant: String,
}

impl Desired {
    /// The node a wholly known plan asks for; a diagnostic for each name that is not known
    /// yet.
    pub(super) fn from_config(c: &NodeConfig) -> Result<Desired, Diagnostics> {
        let mut d = Diagnostics::new();
        let mut text = |name: &str, v: &Known<String>| -> String {
            if let Some(s) = v.value() {
                return s.clone();
            }
            d.error_at(
                AttrPath::attr(name),
                "Value Not Known At Apply",
                format!("{name} must be known to apply a {TYPE_NAME}."),
            );
            String::new()
        };
        let (hostname, category, tenant) = (
            text(HOSTNAME, &c.hostname),
            text(CATEGORY, &c.category),
            text(TENANT, &c.tenant),
        );
        if d.has_error() {
            return Err(d);
        }
        Ok(Desired {
            hostname,
            category,
            tenant,
            software_image: c.software_image.value().cloned(),
            install_mode: c
                .install_mode
                .value()
                .map_or(DEFAULT_INSTALL_MODE, String::as_str)
                .to_owned(),
            power_on: c.powered_on(),
        })
    }
}

pub(super) fn opt(s: Option<&str>) -> Value {
    s.map_or(Value::Null, Value::string)
}

/// The schema's spelling of a status record's power.
pub(super) fn power_word(s: &DeviceStatus) -> &'static str {
    if s.is_on() { POWER_ON } else { POWER_OFF }
}

/// The GPU product and count of a node's system information, as attribute values.
pub(super) fn gpu_facts(info: Option<&SysInfo>) -> [(&'static str, Value); 2] {
    let product = info.and_then(SysInfo::gpu_product);
    let count = info
        .filter(|i| i.gpu_count() > 0)
        .and_then(|i| i64::try_from(i.gpu_count()).ok());
    [
        (GPU_PRODUCT, product.map_or(Value::Null, Value::string)),
        (GPU_COUNT, count.map_or(Value::Null, Value::int)),
    ]
}

/// Fills the computed attributes from what BCM shows; hardware facts already recorded are
/// kept, as the plan promised them.
pub(super) fn fill_observed(
    s: &mut Value,
    device: &Device,
    status: Option<&DeviceStatus>,
    info: Option<&SysInfo>,
) {
    s.set_attr(ID, Value::string(device.uuid.clone()));
    let [product, count] = gpu_facts(info);
    let facts = [
        (MAC, opt(device.mac_address())),
        (RACK, opt(device.rack())),
        product,
        count,
    ];
    for (name, value) in facts {
        if s.get(name).is_unknown() || s.get(name).is_null() {
            s.set_attr(name, value);
        }
    }
    if s.get(IP).is_unknown() {
        s.set_attr(IP, opt(device.ip()));
    }
    if let Some(st) = status
        && s.get(STATUS).is_unknown()
    {
        s.set_attr(STATUS, Value::string(st.status.clone()));
    }
}
