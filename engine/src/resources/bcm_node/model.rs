//! The node a configuration asks for, and the attributes BCM shows for it.

use super::TYPE_NAME;
use crate::{
    backends::bcm::{Device, DeviceStatus, SysInfo},
    diag::Diagnostics,
    path::AttrPath,
    value::Value,
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
    pub(super) fn from_value(v: &Value) -> Result<Desired, Diagnostics> {
        let mut d = Diagnostics::new();
        let mut text = |name: &str| -> String {
            if let Some(s) = v.get(name).as_str() {
                return s.to_owned();
            }
            d.error_at(
                AttrPath::attr(name),
                "Value Not Known At Apply",
                format!("{name} must be known to apply a {TYPE_NAME}."),
            );
            String::new()
        };
        let (hostname, category, tenant) = (text("hostname"), text("category"), text("tenant"));
        if d.has_error() {
            return Err(d);
        }
        Ok(Desired {
            hostname,
            category,
            tenant,
            software_image: v.get("software_image").as_str().map(str::to_owned),
            install_mode: v.get("install_mode").as_str().unwrap_or("AUTO").to_owned(),
            power_on: v.get("power").as_str() != Some("off"),
        })
    }
}

pub(super) fn opt(s: Option<&str>) -> Value {
    s.map_or(Value::Null, Value::string)
}

/// The schema's spelling of a status record's power.
pub(super) fn power_word(s: &DeviceStatus) -> &'static str {
    if s.is_on() { "on" } else { "off" }
}

/// The GPU product and count of a node's system information, as attribute values.
pub(super) fn gpu_facts(info: Option<&SysInfo>) -> [(&'static str, Value); 2] {
    let product = info.and_then(SysInfo::gpu_product);
    let count = info
        .filter(|i| i.gpu_count() > 0)
        .and_then(|i| i64::try_from(i.gpu_count()).ok());
    [
        ("gpu_product", product.map_or(Value::Null, Value::string)),
        ("gpu_count", count.map_or(Value::Null, Value::int)),
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
    s.set_attr("id", Value::string(device.uuid.clone()));
    let [product, count] = gpu_facts(info);
    let facts = [
        ("mac", opt(device.mac_address())),
        ("rack", opt(device.rack())),
        product,
        count,
    ];
    for (name, value) in facts {
        if s.get(name).is_unknown() || s.get(name).is_null() {
            s.set_attr(name, value);
        }
    }
    if s.get("ip").is_unknown() {
        s.set_attr("ip", opt(device.ip()));
    }
    if let Some(st) = status
        && s.get("status").is_unknown()
    {
        s.set_attr("status", Value::string(st.status.clone()));
    }
}
