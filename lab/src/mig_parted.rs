//! The MIG configs the lab's MIG manager knows: the lab's own copy of the GPU Operator's
//! default mig-parted config (`lab/mig-parted/config.yaml`), and the PCI device ids by which
//! its entries select GPUs.
//!
//! This is deliberately not gpufleet's catalog: the lab stands for the cluster, and a cluster
//! answers from its own MIG manager's config, which may disagree with what gpufleet believes.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The `config.yaml` of the lab's `default-mig-parted-config`.
pub const DEFAULT_CONFIG_YAML: &str = include_str!("../mig-parted/config.yaml");

/// The PCI device id (as mig-parted's `device-filter` spells it) of each MIG-capable product
/// of the lab's fleets, by its GPU feature discovery product name.
const DEVICE_IDS: &[(&str, &str)] = &[
    ("NVIDIA-A100-SXM4-80GB", "0x20B210DE"),
    ("NVIDIA-H100-80GB-HBM3", "0x233010DE"),
    ("NVIDIA-H200", "0x233510DE"),
    ("NVIDIA-B200", "0x290110DE"),
];

/// The PCI device id of a product, when the lab's GPUs of that product can run MIG.
#[must_use]
pub fn device_id(product: &str) -> Option<&'static str> {
    DEVICE_IDS
        .iter()
        .find(|(p, _)| *p == product)
        .map(|(_, id)| *id)
}

/// mig-parted's config file.
#[derive(Debug, Clone, Deserialize)]
pub struct ConfigFile {
    /// `v1`.
    pub version: String,
    /// Named configs, each a list of entries.
    #[serde(rename = "mig-configs")]
    pub mig_configs: BTreeMap<String, Vec<Entry>>,
}

/// One entry of a named config.
#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    /// The PCI device ids the entry applies to; every GPU when absent.
    #[serde(rename = "device-filter", default)]
    pub device_filter: Option<DeviceFilter>,
    /// `all`, or GPU indices (the lab only writes `all`).
    pub devices: serde_json::Value,
    /// Whether MIG mode is on.
    #[serde(rename = "mig-enabled")]
    pub mig_enabled: bool,
    /// Instances per GPU, by profile.
    #[serde(rename = "mig-devices", default)]
    pub mig_devices: BTreeMap<String, u32>,
}

/// `device-filter`: one id or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DeviceFilter {
    /// One PCI device id.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl DeviceFilter {
    fn admits(&self, id: &str) -> bool {
        match self {
            DeviceFilter::One(one) => one.eq_ignore_ascii_case(id),
            DeviceFilter::Many(many) => many.iter().any(|m| m.eq_ignore_ascii_case(id)),
        }
    }
}

/// What one GPU becomes under a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Whether MIG mode is on.
    pub enabled: bool,
    /// Instances per GPU, by profile (`1g.10gb`).
    pub devices: BTreeMap<String, u32>,
}

/// Why a config cannot be applied to a node's GPUs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The file has no config by that name.
    #[error("no MIG config named {0:?}")]
    UnknownConfig(String),
    /// No entry of the config selects the node's GPUs.
    #[error("MIG config {config:?} has no entry for {product}")]
    NotForProduct {
        /// The config.
        config: String,
        /// The node's product.
        product: String,
    },
    /// The file does not parse.
    #[error("the MIG config file is not valid: {0}")]
    File(String),
}

impl ConfigFile {
    /// Parses a `config.yaml`.
    ///
    /// # Errors
    /// [`LayoutError::File`] when it is not mig-parted's shape.
    pub fn parse(text: &str) -> Result<ConfigFile, LayoutError> {
        let file: ConfigFile =
            serde_saphyr::from_str(text).map_err(|e| LayoutError::File(e.to_string()))?;
        if file.version != "v1" {
            return Err(LayoutError::File(format!(
                "version {:?}, expected v1",
                file.version
            )));
        }
        Ok(file)
    }

    /// The lab's default config.
    ///
    /// # Errors
    /// Never in practice: the built-in file is checked by the unit tests.
    pub fn lab_default() -> Result<ConfigFile, LayoutError> {
        ConfigFile::parse(DEFAULT_CONFIG_YAML)
    }

    /// What a GPU of `product` becomes under config `name`: the first entry that selects it,
    /// as mig-parted picks. A product without MIG takes no entry that enables MIG.
    ///
    /// # Errors
    /// When the config is unknown or none of its entries fits the product.
    pub fn layout(&self, name: &str, product: &str) -> Result<Layout, LayoutError> {
        let entries = self
            .mig_configs
            .get(name)
            .ok_or_else(|| LayoutError::UnknownConfig(name.to_owned()))?;
        let id = device_id(product);
        let entry = entries.iter().find(|e| {
            let selected = match (&e.device_filter, id) {
                (None, _) => true,
                (Some(f), Some(id)) => f.admits(id),
                (Some(_), None) => false,
            };
            selected && (id.is_some() || !e.mig_enabled)
        });
        entry
            .map(|e| Layout {
                enabled: e.mig_enabled,
                devices: e.mig_devices.clone(),
            })
            .ok_or_else(|| LayoutError::NotForProduct {
                config: name.to_owned(),
                product: product.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_default_parses_and_covers_the_fleets_mig_products() {
        let file = ConfigFile::lab_default().expect("the built-in config parses");
        for (product, _) in DEVICE_IDS {
            for name in ["all-disabled", "all-enabled", "all-balanced"] {
                assert!(file.layout(name, product).is_ok(), "{name} on {product}");
            }
        }
        let a100 = file
            .layout("all-balanced", "NVIDIA-A100-SXM4-80GB")
            .expect("layout");
        assert!(a100.enabled);
        assert_eq!(
            a100.devices,
            [
                ("1g.10gb".to_owned(), 2),
                ("2g.20gb".to_owned(), 1),
                ("3g.40gb".to_owned(), 1)
            ]
            .into()
        );
        assert_eq!(
            file.layout("all-1g.18gb", "NVIDIA-H200")
                .expect("layout")
                .devices,
            [("1g.18gb".to_owned(), 7)].into()
        );
    }

    #[test]
    fn other_products_and_unknown_names_do_not_apply() {
        let file = ConfigFile::lab_default().expect("parses");
        assert_eq!(
            file.layout("all-1g.18gb", "NVIDIA-A100-SXM4-80GB"),
            Err(LayoutError::NotForProduct {
                config: "all-1g.18gb".into(),
                product: "NVIDIA-A100-SXM4-80GB".into()
            })
        );
        assert_eq!(
            file.layout("all-1g.10gb.me", "NVIDIA-A100-SXM4-80GB"),
            Err(LayoutError::UnknownConfig("all-1g.10gb.me".into()))
        );
        // No MIG on an L40S, but turning it off is no error.
        assert!(file.layout("all-balanced", "NVIDIA-L40S").is_err());
        assert!(
            !file
                .layout("all-disabled", "NVIDIA-L40S")
                .expect("all-disabled")
                .enabled
        );
    }
}
