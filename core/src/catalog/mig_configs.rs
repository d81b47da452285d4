//! The MIG configurations the GPU Operator's default mig-parted config names, per GPU.

use super::{GpuModel, MigProfile};

/// The MIG configurations of the GPU Operator's default mig-parted config
/// (`default-mig-parted-config`, `assets/state-mig-manager/0400_configmap.yaml`
/// in `NVIDIA/gpu-operator`) that gpufleet accepts by name, with what each
/// makes of one GPU. These are the values of the node label
/// `nvidia.com/mig.config` that the MIG manager applies without a custom
/// config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigConfig {
    /// The config's name, as written in the label: `all-disabled`,
    /// `all-enabled`, `all-balanced` or `all-<profile>`.
    pub name: String,
    /// Whether MIG mode is on (off only for `all-disabled`).
    pub enabled: bool,
    /// Instances per GPU by profile, in catalog order, none with a zero count.
    /// Empty for `all-disabled` and `all-enabled`.
    pub devices: Vec<(&'static MigProfile, u32)>,
}

impl MigConfig {
    /// MIG instances on one GPU.
    #[must_use]
    pub fn instances_per_gpu(&self) -> u32 {
        self.devices.iter().map(|(_, n)| n).sum()
    }

    /// Whether every instance is of one profile (or there are none), which
    /// the MIG `single` strategy requires.
    #[must_use]
    pub fn is_uniform(&self) -> bool {
        self.devices.len() <= 1
    }
}

/// The `all-balanced` layouts of the default config, one per group of GPUs
/// the config's `device-filter` names (PCI device ids in the comments). A
/// product takes the one layout all of whose profiles it has: the profile
/// names tell the products apart as the device ids do.
pub(super) const BALANCED_LAYOUTS: &[&[(&str, u32)]] = &[
    // GB200 (0x2941).
    &[("1g.23gb", 2), ("2g.47gb", 1), ("3g.93gb", 1)],
    // RTX PRO 6000 Blackwell Server Edition (0x2BB5).
    &[("1g.24gb", 2), ("2g.48gb", 1)],
    // B200 (0x2901).
    &[("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)],
    // GH200 144G HBM3e (0x2348).
    &[("1g.18gb", 2), ("2g.36gb", 1), ("3g.72gb", 1)],
    // H200 141GB and H200 NVL (0x2335, 0x233B).
    &[("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)],
    // H100 NVL (0x2321, 0x233A).
    &[("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)],
    // H100 80GB (SXM and PCIe) and A100 80GB (SXM and PCIe).
    &[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)],
    // A100 40GB (SXM and PCIe).
    &[("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
    // A30 (0x20B7).
    &[("1g.6gb", 2), ("2g.12gb", 1)],
    // H100 96GB, the GPU of the GH200 480GB (0x2342, 0x233D, 0x20B6, 0x2329).
    &[("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1)],
    // B300 (0x3182).
    &[("1g.34gb", 2), ("2g.67gb", 1), ("3g.135gb", 1)],
    // GB300 (0x31C2).
    &[("1g.35gb", 2), ("2g.70gb", 1), ("3g.139gb", 1)],
];

/// Why a `nvidia.com/mig.config` name is not one gpufleet can apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigConfigError {
    /// The GPU model does not support MIG.
    #[error("{product} does not support MIG partitioning")]
    NotMigCapable {
        /// Product label of the GPU.
        product: &'static str,
    },
    /// The name is none of the default config's names for this product.
    #[error(
        "{name:?} is not a MIG config of the GPU Operator's default config for {product}; \
         use one of: {}", known.join(", ")
    )]
    Unknown {
        /// The name as written.
        name: String,
        /// Product label of the GPU.
        product: &'static str,
        /// The names that are accepted for the product.
        known: Vec<String>,
    },
}

/// The names [`mig_config`] accepts for `model`.
#[must_use]
pub fn mig_config_names(model: &GpuModel) -> Vec<String> {
    let mut names = vec!["all-disabled".to_owned(), "all-enabled".to_owned()];
    if balanced_layout(model).is_some() {
        names.push("all-balanced".to_owned());
    }
    names.extend(model.mig_profiles.iter().map(|p| format!("all-{}", p.name)));
    names
}

fn balanced_layout(model: &GpuModel) -> Option<&'static [(&'static str, u32)]> {
    BALANCED_LAYOUTS
        .iter()
        .copied()
        .find(|layout| layout.iter().all(|(p, _)| model.mig_profile(p).is_some()))
}

/// Resolves a MIG config name of the GPU Operator's default mig-parted config
/// for `model`: `all-disabled` (MIG off), `all-enabled` (MIG on, no
/// instances), `all-balanced` (the product's mixed layout, e.g. two `1g.5gb`,
/// one `2g.10gb` and one `3g.20gb` on an A100 40GB) or `all-<profile>` (every
/// GPU filled with one profile, as many as fit). A bare `<profile>` is read as
/// `all-<profile>`. The match ignores case and surrounding whitespace.
///
/// # Errors
///
/// [`MigConfigError::NotMigCapable`] for a product without MIG, and
/// [`MigConfigError::Unknown`] for any other name, such as the media-extension
/// (`.me`) configs whose profiles the catalog leaves out.
pub fn mig_config(model: &GpuModel, name: &str) -> Result<MigConfig, MigConfigError> {
    if !model.mig_capable() {
        return Err(MigConfigError::NotMigCapable {
            product: model.product,
        });
    }
    let wanted = name.trim().to_ascii_lowercase();
    let config = |name: &str, enabled, devices| MigConfig {
        name: name.to_owned(),
        enabled,
        devices,
    };
    let unknown = || MigConfigError::Unknown {
        name: name.trim().to_owned(),
        product: model.product,
        known: mig_config_names(model),
    };
    match wanted.as_str() {
        "all-disabled" => Ok(config("all-disabled", false, Vec::new())),
        "all-enabled" => Ok(config("all-enabled", true, Vec::new())),
        "all-balanced" => {
            let layout = balanced_layout(model).ok_or_else(unknown)?;
            let mut devices = Vec::with_capacity(layout.len());
            for (p, n) in layout {
                devices.push((model.mig_profile(p).ok_or_else(unknown)?, *n));
            }
            Ok(config("all-balanced", true, devices))
        }
        other => {
            let profile = other.strip_prefix("all-").unwrap_or(other);
            // Only the plain profile name: `mig-1g.10gb` and the like are no config names.
            let p = model
                .mig_profiles
                .iter()
                .find(|p| p.name == profile)
                .ok_or_else(unknown)?;
            Ok(config(
                &format!("all-{}", p.name),
                true,
                vec![(p, u32::from(p.max_instances))],
            ))
        }
    }
}
