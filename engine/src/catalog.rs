//! Static catalog of NVIDIA data-centre GPUs, keyed by the product name that
//! GPU Feature Discovery (GFD) writes into the `nvidia.com/gpu.product` node
//! label.
//!
//! Each entry records how the GPU shows up on a Kubernetes node and what it
//! can be partitioned into:
//!
//! * **Product label.** GFD takes the NVML device name (the same string
//!   `nvidia-smi` prints), replaces every space with a dash and uses that as
//!   the label value, so `NVIDIA A100-SXM4-80GB` becomes
//!   `NVIDIA-A100-SXM4-80GB` and `NVIDIA H100 80GB HBM3` becomes
//!   `NVIDIA-H100-80GB-HBM3`. GFD adds suffixes in two cases. With the MIG
//!   `single` strategy it appends `-MIG-<profile>`, for example
//!   `NVIDIA-A100-80GB-PCIe-MIG-1g.10gb`. When time-slicing replicas are on
//!   and the resource is not renamed, it appends `-SHARED`. Older drivers
//!   left out the `NVIDIA ` prefix (`A100-SXM4-40GB`), so [`lookup`] accepts
//!   names with or without it. Sources: the product
//!   labeler in `NVIDIA/k8s-device-plugin` (`internal/lm/resource.go`) and
//!   label dumps from real nodes.
//! * **Memory.** The value of `nvidia.com/gpu.memory`: NVML's total
//!   framebuffer in MiB, the same number `nvidia-smi` shows as the
//!   denominator of "Memory-Usage". The figures here come from real machines.
//!   They are smaller than the marketing capacity (an "80GB" H100 reports
//!   81559 MiB).
//! * **MIG profiles.** Names, slice counts and per-GPU instance limits come
//!   from the "Supported MIG Profiles" tables in NVIDIA's MIG User Guide. They
//!   were cross-checked against the default mig-parted configuration that the
//!   GPU Operator ships to the MIG manager (`default-mig-parted-config`).
//!   These are the names users write in `mig-devices` and that the device
//!   plugin advertises as `nvidia.com/mig-<profile>`. Only plain profiles are
//!   listed. The media-extension (`+me`) variants are omitted.
//! * **NVLink domain.** The number of GPUs that share one NVLink fabric in the
//!   product's reference platform: the 8-GPU HGX baseboards for SXM parts, the
//!   bridged pair for H100 NVL, and `None` for PCIe cards without a
//!   guaranteed NVLink.
//!
//! Most MIG-capable GPUs divide into 7 compute slices and 8 memory slices; the
//! A30 and the RTX PRO 6000 into 4 and 4 ([`GpuModel::compute_slices`],
//! [`GpuModel::memory_slices`]).
//!
//! Products, memory and profiles of the Hopper and Blackwell parts follow the
//! MIG User Guide's supported-GPU list and the layouts of the GPU Operator's
//! v25.10 `default-mig-parted-config` (which names the B300, GB300 and GB200
//! profiles the guide does not yet table); memory figures are what
//! `nvidia-smi` reports with ECC on.

use std::collections::BTreeMap;
use std::fmt;

/// One MIG GPU-instance profile (for example `1g.10gb`) on a particular GPU
/// model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MigProfile {
    /// Profile name as mig-parted, the MIG manager and the device plugin spell
    /// it, for example `3g.40gb`.
    pub name: &'static str,
    /// Compute slices the profile occupies (the `<g>` in `<g>g.<mem>gb`),
    /// out of the GPU's [`GpuModel::compute_slices`].
    pub compute_slices: u8,
    /// Memory in GB as written in the profile name (the `<mem>` in
    /// `<g>g.<mem>gb`).
    pub memory_gb: u16,
    /// Memory slices the profile occupies, out of the GPU's
    /// [`GpuModel::memory_slices`] (the "Fraction of Memory" column of the MIG
    /// User Guide: eighths, or quarters on the 4-slice GPUs).
    pub memory_slices: u8,
    /// Maximum number of instances of this profile on one GPU when no other
    /// profile is present.
    pub max_instances: u8,
}

impl MigProfile {
    /// Kubernetes extended-resource name under which the NVIDIA device plugin
    /// (MIG `mixed` strategy) advertises this profile, for example
    /// `nvidia.com/mig-1g.10gb`.
    #[must_use]
    pub fn resource_name(&self) -> String {
        format!("nvidia.com/mig-{}", self.name)
    }
}

/// Static facts about one GPU product as GFD reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuModel {
    /// Canonical `nvidia.com/gpu.product` label value, for example
    /// `NVIDIA-A100-SXM4-80GB`.
    pub product: &'static str,
    /// Other spellings users write for the same product, for example
    /// `A100-SXM4-80GB` or `a100-80gb`. [`lookup`] matches them
    /// case-insensitively.
    pub aliases: &'static [&'static str],
    /// Name for humans, for example `NVIDIA A100 80GB SXM4`.
    pub display_name: &'static str,
    /// GPU architecture: `ampere`, `hopper`, `blackwell` or `ada-lovelace`.
    pub architecture: &'static str,
    /// Framebuffer size in MiB, as GFD reports it in `nvidia.com/gpu.memory`.
    pub memory_mib: u32,
    /// MIG profiles the GPU supports. Empty when the GPU is not MIG-capable.
    pub mig_profiles: &'static [MigProfile],
    /// Number of GPUs in one NVLink domain on the product's reference
    /// platform, for example 8 on an HGX baseboard or 72 in an NVL72 rack.
    /// `None` when the product has no NVLink or only an optional bridge.
    pub nvlink_domain_size: Option<u16>,
}

impl GpuModel {
    /// Whether the GPU supports Multi-Instance GPU partitioning.
    #[must_use]
    pub fn mig_capable(&self) -> bool {
        !self.mig_profiles.is_empty()
    }

    /// Compute slices one GPU divides into under MIG (7, or 4 on the A30 and
    /// RTX PRO 6000): those of its whole-GPU profile; 0 when it is not
    /// MIG-capable.
    #[must_use]
    pub fn compute_slices(&self) -> u8 {
        self.mig_profiles
            .iter()
            .map(|p| p.compute_slices)
            .max()
            .unwrap_or(0)
    }

    /// Memory slices one GPU divides into under MIG (8, or 4 on the A30 and
    /// RTX PRO 6000): those of its whole-GPU profile; 0 when it is not
    /// MIG-capable.
    #[must_use]
    pub fn memory_slices(&self) -> u8 {
        self.mig_profiles
            .iter()
            .map(|p| p.memory_slices)
            .max()
            .unwrap_or(0)
    }

    /// Finds one of this GPU's MIG profiles by name.
    ///
    /// The match ignores case and surrounding whitespace. It also accepts the
    /// resource-name forms `mig-1g.10gb` and `nvidia.com/mig-1g.10gb`.
    #[must_use]
    pub fn mig_profile(&self, name: &str) -> Option<&'static MigProfile> {
        let wanted = name.trim().to_ascii_lowercase();
        let wanted = wanted.strip_prefix("nvidia.com/").unwrap_or(&wanted);
        let wanted = wanted.strip_prefix("mig-").unwrap_or(wanted);
        let profiles: &'static [MigProfile] = self.mig_profiles;
        profiles.iter().find(|p| p.name == wanted)
    }

    /// Framebuffer size in whole GiB, rounded up from [`GpuModel::memory_mib`].
    ///
    /// Rounding up makes the result match the size in the full-GPU MIG
    /// profile name: 81559 MiB becomes 80 (`7g.80gb`) and 143771 MiB becomes
    /// 141 (`7g.141gb`).
    #[must_use]
    pub fn memory_gb(&self) -> u32 {
        self.memory_mib.div_ceil(1024)
    }
}

/// Shorthand for building the catalog's [`MigProfile`] tables.
const fn mig(
    name: &'static str,
    compute_slices: u8,
    memory_gb: u16,
    memory_slices: u8,
    max_instances: u8,
) -> MigProfile {
    MigProfile {
        name,
        compute_slices,
        memory_gb,
        memory_slices,
        max_instances,
    }
}

// All tables below follow one pattern. The small 1g profile takes 1/8 of
// memory (up to 7 instances). The large 1g profile takes 2/8 (up to 4). 2g
// takes 2/8 (up to 3). 3g and 4g take 4/8 (up to 2 and 1). 7g takes the whole
// GPU. Only the GB figure in each name differs between products.

/// A100 40GB (SXM4 and PCIe). MIG User Guide, A100-SXM4-40GB table.
const MIG_A100_40GB: &[MigProfile] = &[
    mig("1g.5gb", 1, 5, 1, 7),
    mig("1g.10gb", 1, 10, 2, 4),
    mig("2g.10gb", 2, 10, 2, 3),
    mig("3g.20gb", 3, 20, 4, 2),
    mig("4g.20gb", 4, 20, 4, 1),
    mig("7g.40gb", 7, 40, 8, 1),
];

/// A100 80GB (SXM4 and PCIe) and H100 80GB share these names and limits. MIG
/// User Guide, A100-80GB note and H100 80GB table.
const MIG_80GB: &[MigProfile] = &[
    mig("1g.10gb", 1, 10, 1, 7),
    mig("1g.20gb", 1, 20, 2, 4),
    mig("2g.20gb", 2, 20, 2, 3),
    mig("3g.40gb", 3, 40, 4, 2),
    mig("4g.40gb", 4, 40, 4, 1),
    mig("7g.80gb", 7, 80, 8, 1),
];

/// H100 NVL (94GB). Default mig-parted config (H100 NVL entries).
const MIG_H100_94GB: &[MigProfile] = &[
    mig("1g.12gb", 1, 12, 1, 7),
    mig("1g.24gb", 1, 24, 2, 4),
    mig("2g.24gb", 2, 24, 2, 3),
    mig("3g.47gb", 3, 47, 4, 2),
    mig("4g.47gb", 4, 47, 4, 1),
    mig("7g.94gb", 7, 94, 8, 1),
];

/// H200 141GB. MIG User Guide, H200 table.
const MIG_H200_141GB: &[MigProfile] = &[
    mig("1g.18gb", 1, 18, 1, 7),
    mig("1g.35gb", 1, 35, 2, 4),
    mig("2g.35gb", 2, 35, 2, 3),
    mig("3g.71gb", 3, 71, 4, 2),
    mig("4g.71gb", 4, 71, 4, 1),
    mig("7g.141gb", 7, 141, 8, 1),
];

/// B200 180GB. MIG User Guide, B200 table.
const MIG_B200_180GB: &[MigProfile] = &[
    mig("1g.23gb", 1, 23, 1, 7),
    mig("1g.45gb", 1, 45, 2, 4),
    mig("2g.45gb", 2, 45, 2, 3),
    mig("3g.90gb", 3, 90, 4, 2),
    mig("4g.90gb", 4, 90, 4, 1),
    mig("7g.180gb", 7, 180, 8, 1),
];

/// H100 96GB, the GPU of the GH200 480GB superchip. MIG User Guide, H100 on
/// GH200 row; layouts of the GPU Operator's default config.
const MIG_H100_96GB: &[MigProfile] = &[
    mig("1g.12gb", 1, 12, 1, 7),
    mig("1g.24gb", 1, 24, 2, 4),
    mig("2g.24gb", 2, 24, 2, 3),
    mig("3g.48gb", 3, 48, 4, 2),
    mig("4g.48gb", 4, 48, 4, 1),
    mig("7g.96gb", 7, 96, 8, 1),
];

/// GH200 144GB HBM3e. The GPU Operator's default config (`GH200 144G HBM3e`
/// layouts).
const MIG_GH200_144GB: &[MigProfile] = &[
    mig("1g.18gb", 1, 18, 1, 7),
    mig("1g.36gb", 1, 36, 2, 4),
    mig("2g.36gb", 2, 36, 2, 3),
    mig("3g.72gb", 3, 72, 4, 2),
    mig("4g.72gb", 4, 72, 4, 1),
    mig("7g.144gb", 7, 144, 8, 1),
];

/// GB200 186GB (production boards; early ones said `1g.24gb`). The GPU
/// Operator's default config and `nvidia-smi mig -lgip` of GB200 trays.
const MIG_GB200_186GB: &[MigProfile] = &[
    mig("1g.23gb", 1, 23, 1, 7),
    mig("1g.47gb", 1, 47, 2, 4),
    mig("2g.47gb", 2, 47, 2, 3),
    mig("3g.93gb", 3, 93, 4, 2),
    mig("4g.93gb", 4, 93, 4, 1),
    mig("7g.186gb", 7, 186, 8, 1),
];

/// B300 (HGX, 269GB usable). The GPU Operator's v25.10 default config.
const MIG_B300_269GB: &[MigProfile] = &[
    mig("1g.34gb", 1, 34, 1, 7),
    mig("1g.67gb", 1, 67, 2, 4),
    mig("2g.67gb", 2, 67, 2, 3),
    mig("3g.135gb", 3, 135, 4, 2),
    mig("4g.135gb", 4, 135, 4, 1),
    mig("7g.269gb", 7, 269, 8, 1),
];

/// GB300 (278GB usable). The GPU Operator's v25.10 default config.
const MIG_GB300_278GB: &[MigProfile] = &[
    mig("1g.35gb", 1, 35, 1, 7),
    mig("1g.70gb", 1, 70, 2, 4),
    mig("2g.70gb", 2, 70, 2, 3),
    mig("3g.139gb", 3, 139, 4, 2),
    mig("4g.139gb", 4, 139, 4, 1),
    mig("7g.278gb", 7, 278, 8, 1),
];

/// A30 24GB: 4 compute and 4 memory slices. MIG User Guide, A30 table.
const MIG_A30_24GB: &[MigProfile] = &[
    mig("1g.6gb", 1, 6, 1, 4),
    mig("2g.12gb", 2, 12, 2, 2),
    mig("4g.24gb", 4, 24, 4, 1),
];

/// RTX PRO 6000 Blackwell 96GB: 4 compute and 4 memory slices. MIG User
/// Guide, RTX PRO 6000 table (the `+gfx` and media variants are omitted).
const MIG_RTX_PRO_6000_96GB: &[MigProfile] = &[
    mig("1g.24gb", 1, 24, 1, 4),
    mig("2g.48gb", 2, 48, 2, 2),
    mig("4g.96gb", 4, 96, 4, 1),
];

/// The catalog. Order is not significant; use [`product_names`] for a sorted
/// list.
static MODELS: &[GpuModel] = &[
    GpuModel {
        product: "NVIDIA-A100-SXM4-40GB",
        aliases: &[
            "A100-SXM4-40GB",
            "A100-SXM-40GB",
            "A100-40GB-SXM4",
            "A100-40GB",
        ],
        display_name: "NVIDIA A100 40GB SXM4",
        architecture: "ampere",
        memory_mib: 40_960,
        mig_profiles: MIG_A100_40GB,
        nvlink_domain_size: Some(8),
    },
    GpuModel {
        product: "NVIDIA-A100-SXM4-80GB",
        aliases: &[
            "A100-SXM4-80GB",
            "A100-SXM-80GB",
            "A100-80GB-SXM4",
            "A100-80GB",
        ],
        display_name: "NVIDIA A100 80GB SXM4",
        architecture: "ampere",
        memory_mib: 81_920,
        mig_profiles: MIG_80GB,
        nvlink_domain_size: Some(8),
    },
    // The PCIe card takes an optional 2-way NVLink bridge. A bridge is not
    // guaranteed to be fitted, so no NVLink domain is recorded.
    GpuModel {
        product: "NVIDIA-A100-80GB-PCIe",
        aliases: &["A100-80GB-PCIe", "A100-PCIe-80GB", "A100-PCIE-80GB"],
        display_name: "NVIDIA A100 80GB PCIe",
        architecture: "ampere",
        memory_mib: 81_920,
        mig_profiles: MIG_80GB,
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-H100-80GB-HBM3",
        aliases: &[
            "H100-80GB-HBM3",
            "H100-SXM5-80GB",
            "H100-SXM-80GB",
            "H100-80GB-SXM5",
            "H100-SXM5",
            "H100-SXM",
            "H100-80GB",
        ],
        display_name: "NVIDIA H100 80GB SXM5",
        architecture: "hopper",
        memory_mib: 81_559,
        mig_profiles: MIG_80GB,
        nvlink_domain_size: Some(8),
    },
    // H100 NVL is sold as two PCIe boards joined by NVLink bridges.
    GpuModel {
        product: "NVIDIA-H100-NVL",
        aliases: &["H100-NVL", "H100-NVL-94GB", "H100-94GB-NVL"],
        display_name: "NVIDIA H100 NVL 94GB",
        architecture: "hopper",
        memory_mib: 95_830,
        mig_profiles: MIG_H100_94GB,
        nvlink_domain_size: Some(2),
    },
    GpuModel {
        product: "NVIDIA-H200",
        aliases: &[
            "H200",
            "H200-141GB",
            "H200-SXM5-141GB",
            "H200-SXM5",
            "H200-SXM",
        ],
        display_name: "NVIDIA H200 141GB SXM5",
        architecture: "hopper",
        memory_mib: 143_771,
        mig_profiles: MIG_H200_141GB,
        nvlink_domain_size: Some(8),
    },
    GpuModel {
        product: "NVIDIA-B200",
        aliases: &["B200", "B200-180GB", "HGX-B200"],
        display_name: "NVIDIA B200 180GB",
        architecture: "blackwell",
        memory_mib: 183_359,
        mig_profiles: MIG_B200_180GB,
        nvlink_domain_size: Some(8),
    },
    GpuModel {
        product: "NVIDIA-L40S",
        aliases: &["L40S", "L40S-48GB"],
        display_name: "NVIDIA L40S 48GB",
        architecture: "ada-lovelace",
        memory_mib: 46_068,
        mig_profiles: &[],
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-A100-PCIE-40GB",
        aliases: &["A100-PCIe-40GB", "A100-40GB-PCIe"],
        display_name: "NVIDIA A100 40GB PCIe",
        architecture: "ampere",
        memory_mib: 40_960,
        mig_profiles: MIG_A100_40GB,
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-A30",
        aliases: &["A30", "A30-24GB"],
        display_name: "NVIDIA A30 24GB",
        architecture: "ampere",
        memory_mib: 24_576,
        mig_profiles: MIG_A30_24GB,
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-A10",
        aliases: &["A10", "A10-24GB"],
        display_name: "NVIDIA A10 24GB",
        architecture: "ampere",
        memory_mib: 23_028,
        mig_profiles: &[],
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-A40",
        aliases: &["A40", "A40-48GB"],
        display_name: "NVIDIA A40 48GB",
        architecture: "ampere",
        memory_mib: 46_068,
        mig_profiles: &[],
        nvlink_domain_size: None,
    },
    // The PCIe H100 takes an optional NVLink bridge, so no domain is recorded.
    GpuModel {
        product: "NVIDIA-H100-PCIe",
        aliases: &["H100-PCIe", "H100-PCIe-80GB", "H100-80GB-PCIe"],
        display_name: "NVIDIA H100 80GB PCIe",
        architecture: "hopper",
        memory_mib: 81_559,
        mig_profiles: MIG_80GB,
        nvlink_domain_size: None,
    },
    // H200 NVL boards are bridged in pairs or fours, depending on the server.
    GpuModel {
        product: "NVIDIA-H200-NVL",
        aliases: &["H200-NVL", "H200-NVL-141GB"],
        display_name: "NVIDIA H200 NVL 141GB",
        architecture: "hopper",
        memory_mib: 143_771,
        mig_profiles: MIG_H200_141GB,
        nvlink_domain_size: None,
    },
    // A GH200 superchip's GPU talks NVLink-C2C to its Grace CPU; GPU-to-GPU
    // NVLink exists only in NVL32-style systems, so no domain is recorded.
    GpuModel {
        product: "NVIDIA-GH200-480GB",
        aliases: &["GH200-480GB", "GH200", "GH200-96GB"],
        display_name: "NVIDIA GH200 480GB (96GB HBM3)",
        architecture: "hopper",
        memory_mib: 97_871,
        mig_profiles: MIG_H100_96GB,
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-GH200-144G-HBM3e",
        aliases: &["GH200-144G-HBM3e", "GH200-144GB"],
        display_name: "NVIDIA GH200 144GB HBM3e",
        architecture: "hopper",
        memory_mib: 146_831,
        mig_profiles: MIG_GH200_144GB,
        nvlink_domain_size: None,
    },
    // GB200 and GB300 compute trays hold 4 GPUs each; 18 trays share one
    // NVL72 NVLink domain.
    GpuModel {
        product: "NVIDIA-GB200",
        aliases: &["GB200", "GB200-NVL72"],
        display_name: "NVIDIA GB200 186GB",
        architecture: "blackwell",
        memory_mib: 189_471,
        mig_profiles: MIG_GB200_186GB,
        nvlink_domain_size: Some(72),
    },
    GpuModel {
        product: "NVIDIA-B300-SXM6-AC",
        aliases: &["B300", "B300-SXM6", "HGX-B300"],
        display_name: "NVIDIA B300 SXM6 288GB",
        architecture: "blackwell",
        memory_mib: 275_040,
        mig_profiles: MIG_B300_269GB,
        nvlink_domain_size: Some(8),
    },
    GpuModel {
        product: "NVIDIA-GB300",
        aliases: &["GB300", "GB300-NVL72"],
        display_name: "NVIDIA GB300 288GB",
        architecture: "blackwell",
        memory_mib: 284_208,
        mig_profiles: MIG_GB300_278GB,
        nvlink_domain_size: Some(72),
    },
    GpuModel {
        product: "NVIDIA-L4",
        aliases: &["L4", "L4-24GB"],
        display_name: "NVIDIA L4 24GB",
        architecture: "ada-lovelace",
        memory_mib: 23_034,
        mig_profiles: &[],
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-L40",
        aliases: &["L40", "L40-48GB"],
        display_name: "NVIDIA L40 48GB",
        architecture: "ada-lovelace",
        memory_mib: 46_068,
        mig_profiles: &[],
        nvlink_domain_size: None,
    },
    GpuModel {
        product: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
        aliases: &[
            "RTX-PRO-6000",
            "RTX-PRO-6000-Blackwell",
            "RTX-PRO-6000-Server-Edition",
        ],
        display_name: "NVIDIA RTX PRO 6000 Blackwell Server Edition 96GB",
        architecture: "blackwell",
        memory_mib: 97_887,
        mig_profiles: MIG_RTX_PRO_6000_96GB,
        nvlink_domain_size: None,
    },
];

/// Every GPU model in the catalog.
#[must_use]
pub fn models() -> &'static [GpuModel] {
    MODELS
}

/// Finds a GPU model by its product label or one of its aliases.
///
/// The match ignores case and surrounding whitespace. Spaces and underscores
/// count as dashes, so the `nvidia-smi` spelling (`NVIDIA H100 80GB HBM3`)
/// also works. The `NVIDIA-` prefix is optional. Suffixes that GFD adds are
/// stripped first: `-SHARED` (time-slicing) and `-MIG-<profile>` (MIG
/// `single` strategy), so `NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED` finds the
/// A100 40GB. The MIG profile in the suffix is not checked against the model.
/// Products declared in the provider configuration are found after the catalog's.
#[must_use]
pub fn lookup(product: &str) -> Option<&'static GpuModel> {
    let key = product_key(product);
    if key.is_empty() {
        return None;
    }
    static_lookup(&key).or_else(|| crate::gpu_products::registered(&key))
}

/// The catalog's own model of `product`, ignoring declared products; matched as [`lookup`]
/// matches.
#[must_use]
pub fn catalog_model(product: &str) -> Option<&'static GpuModel> {
    let key = product_key(product);
    if key.is_empty() {
        return None;
    }
    static_lookup(&key)
}

/// The catalog model whose name or alias has [`product_key`] `key`.
fn static_lookup(key: &str) -> Option<&'static GpuModel> {
    MODELS.iter().find(|m| {
        match_key(&normalize(m.product)) == key
            || m.aliases.iter().any(|a| match_key(&normalize(a)) == key)
    })
}

/// The key [`lookup`] compares: the name normalized, without GFD's suffixes and the optional
/// `NVIDIA-` prefix. Declared products ([`crate::gpu_products`]) are matched by it too.
#[must_use]
pub fn product_key(product: &str) -> String {
    match_key(&strip_gfd_suffixes(&normalize(product))).to_owned()
}

/// The MIG profile named in a product label of the MIG `single` strategy, for
/// example `1g.10gb` in `NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED`.
///
/// Under that strategy GFD counts MIG devices, not GPUs, in
/// `nvidia.com/gpu.count`, so callers need the profile to get back to GPUs.
/// `None` when the label has no MIG suffix, the product is unknown, or the
/// profile does not exist on the product.
#[must_use]
pub fn label_mig_profile(product: &str) -> Option<&'static MigProfile> {
    let normalized = normalize(product);
    let profile = split_gfd_suffixes(&normalized).1?;
    lookup(product)?.mig_profile(profile)
}

/// Canonical product names of every model, sorted. Intended for diagnostics
/// such as "known products are: …".
#[must_use]
pub fn product_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = MODELS.iter().map(|m| m.product).collect();
    names.sort_unstable();
    names
}

/// Lowercases and trims a name, and turns runs of whitespace or underscores
/// into single dashes.
fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_dash = false;
    for c in s.trim().chars() {
        if c.is_whitespace() || c == '_' {
            pending_dash = true;
            continue;
        }
        if pending_dash && !out.is_empty() && !out.ends_with('-') && c != '-' {
            out.push('-');
        }
        pending_dash = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Removes the `-shared` and `-mig-<profile>` suffixes GFD appends to a
/// normalized product label.
fn strip_gfd_suffixes(normalized: &str) -> String {
    split_gfd_suffixes(normalized).0.to_string()
}

/// Splits a normalized product label into the product and the MIG profile of
/// a `-mig-<profile>` suffix. GFD writes MIG first and SHARED last. Both
/// orders are accepted.
fn split_gfd_suffixes(normalized: &str) -> (&str, Option<&str>) {
    let mut s = normalized;
    let mut profile = None;
    for _ in 0..2 {
        if let Some(rest) = s.strip_suffix("-shared") {
            s = rest;
        }
        if let Some(idx) = s.rfind("-mig-") {
            let tail = &s[idx + "-mig-".len()..];
            if looks_like_mig_profile(tail) {
                profile = Some(tail);
                s = &s[..idx];
            }
        }
    }
    (s, profile)
}

/// Whether `s` starts like a MIG profile name: digits followed by `g`, as in
/// `1g.10gb` or `7g.80gb`. Anything after the digits and `g` is not checked.
fn looks_like_mig_profile(s: &str) -> bool {
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && s[digits..].starts_with('g')
}

/// The comparison key: a normalized name without the optional `nvidia-`
/// prefix.
fn match_key(normalized: &str) -> &str {
    normalized.strip_prefix("nvidia-").unwrap_or(normalized)
}

/// Why a MIG layout cannot be applied to a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigLayoutError {
    /// The GPU model does not support MIG.
    NotMigCapable {
        /// Product label of the GPU.
        product: &'static str,
    },
    /// The layout names a profile that this GPU model does not offer.
    UnknownProfile {
        /// The profile name as the user wrote it.
        profile: String,
        /// Product label of the GPU.
        product: &'static str,
        /// Profiles the GPU does offer, in catalog order.
        known: Vec<&'static str>,
    },
    /// More instances of one profile than fit on a single GPU.
    TooManyInstances {
        /// Canonical profile name.
        profile: String,
        /// Total instances requested across the layout.
        requested: u32,
        /// Maximum instances of this profile per GPU.
        max: u8,
    },
    /// Together the instances need more compute or memory than one GPU has.
    ExceedsGpu {
        /// Compute slices the layout needs in total.
        compute_slices: u32,
        /// Memory the layout needs in total, in GB, summed from the profile
        /// names.
        memory_gb: u32,
        /// Product label of the GPU.
        product: &'static str,
        /// Compute and memory slices the GPU has.
        has: (u8, u8),
    },
}

impl fmt::Display for MigLayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigLayoutError::NotMigCapable { product } => {
                write!(f, "{product} does not support MIG partitioning")
            }
            MigLayoutError::UnknownProfile {
                profile,
                product,
                known,
            } => write!(
                f,
                "MIG profile \"{profile}\" is not available on {product}; known profiles: {}",
                known.join(", ")
            ),
            MigLayoutError::TooManyInstances {
                profile,
                requested,
                max,
            } => write!(
                f,
                "MIG profile \"{profile}\" requested {requested} times, but at most {max} fit on one GPU"
            ),
            MigLayoutError::ExceedsGpu {
                compute_slices,
                memory_gb,
                product,
                has: (compute, memory),
            } => write!(
                f,
                "MIG layout needs {compute_slices} compute slices and {memory_gb} GB of memory, \
                 more than one {product} provides ({compute} compute slices, {memory} memory \
                 slices)"
            ),
        }
    }
}

impl std::error::Error for MigLayoutError {}

/// Checks that a layout of MIG instances could be applied to a single GPU of
/// `model`.
///
/// `layout` pairs profile names with instance counts, the same way as a
/// mig-parted `mig-devices` map: `[("1g.10gb", 7)]` or
/// `[("3g.40gb", 1), ("4g.40gb", 1)]`. A profile listed more than once has
/// its counts added together. Zero counts are allowed, and an empty layout is
/// valid (MIG enabled with no instances).
///
/// The check is a simplification. It requires that:
/// * each profile exists on the model,
/// * each profile's total count is at most its `max_instances`,
/// * the compute and memory slices add up to at most the model's
///   [`GpuModel::compute_slices`] and [`GpuModel::memory_slices`].
///
/// Real MIG placement has extra rules: instances sit at fixed start offsets,
/// a 3g instance uses four memory slices, and some mixes are refused by the
/// placement table even though the sums fit. A layout that passes here can
/// therefore still be rejected by the driver. Every layout this function
/// rejects is impossible on real hardware.
///
/// # Errors
///
/// * [`MigLayoutError::NotMigCapable`] if `model` has no MIG profiles.
/// * [`MigLayoutError::UnknownProfile`] for the first name that is not one of
///   the model's profiles.
/// * [`MigLayoutError::TooManyInstances`] if one profile's total count is
///   above its `max_instances`.
/// * [`MigLayoutError::ExceedsGpu`] if the instances together need more than
///   the model's compute or memory slices.
pub fn check_mig_layout(model: &GpuModel, layout: &[(&str, u32)]) -> Result<(), MigLayoutError> {
    if !model.mig_capable() {
        return Err(MigLayoutError::NotMigCapable {
            product: model.product,
        });
    }

    // Resolve every name first so that an unknown name is reported before
    // any count problem.
    let mut totals: BTreeMap<&'static str, (&'static MigProfile, u32)> = BTreeMap::new();
    for &(name, count) in layout {
        let Some(profile) = model.mig_profile(name) else {
            return Err(MigLayoutError::UnknownProfile {
                profile: name.trim().to_string(),
                product: model.product,
                known: model.mig_profiles.iter().map(|p| p.name).collect(),
            });
        };
        let entry = totals.entry(profile.name).or_insert((profile, 0));
        entry.1 = entry.1.saturating_add(count);
    }

    // Check counts in catalog order so the first error reported is stable.
    for profile in model.mig_profiles {
        let requested = totals.get(profile.name).map_or(0, |&(_, n)| n);
        if requested > u32::from(profile.max_instances) {
            return Err(MigLayoutError::TooManyInstances {
                profile: profile.name.to_string(),
                requested,
                max: profile.max_instances,
            });
        }
    }

    // Every count is now at most 7, so none of these sums can overflow.
    let mut compute_slices: u32 = 0;
    let mut memory_slices: u32 = 0;
    let mut memory_gb: u32 = 0;
    for &(profile, count) in totals.values() {
        compute_slices += u32::from(profile.compute_slices) * count;
        memory_slices += u32::from(profile.memory_slices) * count;
        memory_gb += u32::from(profile.memory_gb) * count;
    }
    if compute_slices > u32::from(model.compute_slices())
        || memory_slices > u32::from(model.memory_slices())
    {
        return Err(MigLayoutError::ExceedsGpu {
            compute_slices,
            memory_gb,
            product: model.product,
            has: (model.compute_slices(), model.memory_slices()),
        });
    }
    Ok(())
}

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
const BALANCED_LAYOUTS: &[&[(&str, u32)]] = &[
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

#[cfg(test)]
mod tests {
    use super::*;

    fn model(product: &str) -> &'static GpuModel {
        match lookup(product) {
            Some(m) => m,
            None => panic!("{product} should be in the catalog"),
        }
    }

    #[test]
    fn required_models_are_present() {
        for product in [
            "NVIDIA-A100-SXM4-40GB",
            "NVIDIA-A100-SXM4-80GB",
            "NVIDIA-H100-80GB-HBM3",
            "NVIDIA-H200",
            "NVIDIA-B200",
            "NVIDIA-L40S",
        ] {
            assert_eq!(model(product).product, product);
        }
    }

    #[test]
    fn lookup_by_alias_and_case() {
        assert_eq!(model("a100-80gb").product, "NVIDIA-A100-SXM4-80GB");
        assert_eq!(model("A100-SXM4-80GB").product, "NVIDIA-A100-SXM4-80GB");
        // Older drivers left out the NVIDIA- prefix.
        assert_eq!(model("A100-SXM4-40GB").product, "NVIDIA-A100-SXM4-40GB");
        assert_eq!(
            model("nvidia-h100-80gb-hbm3").product,
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(model("h100-sxm5-80gb").product, "NVIDIA-H100-80GB-HBM3");
        assert_eq!(model("  NVIDIA-L40S \n").product, "NVIDIA-L40S");
        assert_eq!(model("l40s").product, "NVIDIA-L40S");
        assert_eq!(model("H200").product, "NVIDIA-H200");
        assert_eq!(model("b200").product, "NVIDIA-B200");
        assert_eq!(
            model("NVIDIA-A100-80GB-PCIe").product,
            "NVIDIA-A100-80GB-PCIe"
        );
        assert_eq!(model("a100-pcie-80gb").product, "NVIDIA-A100-80GB-PCIe");
        assert_eq!(model("H100 NVL").product, "NVIDIA-H100-NVL");
    }

    #[test]
    fn lookup_accepts_nvidia_smi_spelling() {
        assert_eq!(
            model("NVIDIA H100 80GB HBM3").product,
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(
            model("NVIDIA A100 80GB PCIe").product,
            "NVIDIA-A100-80GB-PCIe"
        );
        assert_eq!(
            model("NVIDIA A100-SXM4-40GB").product,
            "NVIDIA-A100-SXM4-40GB"
        );
    }

    #[test]
    fn lookup_strips_shared_and_mig_suffixes() {
        assert_eq!(
            model("NVIDIA-A100-SXM4-80GB-SHARED").product,
            "NVIDIA-A100-SXM4-80GB"
        );
        assert_eq!(
            model("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb").product,
            "NVIDIA-A100-SXM4-40GB"
        );
        assert_eq!(
            model("A100-SXM4-40GB-MIG-1g.5gb").product,
            "NVIDIA-A100-SXM4-40GB"
        );
        assert_eq!(
            model("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb").product,
            "NVIDIA-A100-80GB-PCIe"
        );
        assert_eq!(
            model("nvidia-h100-80gb-hbm3-mig-3g.40gb-shared").product,
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(model("NVIDIA-L40S-SHARED").product, "NVIDIA-L40S");
        assert_eq!(model("NVIDIA-H200-MIG-7g.141gb").product, "NVIDIA-H200");
    }

    #[test]
    fn label_mig_profile_reads_the_single_strategy_suffix() {
        let profile = |label: &str| label_mig_profile(label).map(|p| p.name);
        assert_eq!(
            profile("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"),
            Some("1g.10gb")
        );
        assert_eq!(
            profile("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED"),
            Some("3g.40gb")
        );
        // No MIG suffix: whole GPUs, shared or not.
        assert_eq!(profile("NVIDIA-H100-80GB-HBM3"), None);
        assert_eq!(profile("NVIDIA-H100-80GB-HBM3-SHARED"), None);
        // A profile the product does not have, an unknown product, GFD's
        // invalid-configuration marker.
        assert_eq!(profile("NVIDIA-A100-SXM4-80GB-MIG-1g.5gb"), None);
        assert_eq!(profile("Tesla-T4-MIG-1g.5gb"), None);
        assert_eq!(profile("NVIDIA-A100-SXM4-80GB-MIG-INVALID"), None);
    }

    #[test]
    fn lookup_rejects_unknown_and_empty() {
        assert!(lookup("").is_none());
        assert!(lookup("   ").is_none());
        assert!(lookup("NVIDIA").is_none());
        assert!(lookup("NVIDIA-").is_none());
        assert!(lookup("-SHARED").is_none());
        assert!(lookup("Tesla-V100-SXM2-16GB").is_none());
        // "A100" alone is ambiguous and must not resolve.
        assert!(lookup("A100").is_none());
        assert!(lookup("H100").is_none());
        // A "-MIG-" that is not followed by a profile is not stripped.
        assert!(lookup("NVIDIA-H200-MIG-foo").is_none());
    }

    #[test]
    fn names_and_aliases_are_unambiguous() {
        // No spelling may belong to two models. Within one model, aliases may
        // repeat the product without its NVIDIA- prefix.
        let mut seen: Vec<(String, &str)> = Vec::new();
        for m in models() {
            for name in std::iter::once(&m.product).chain(m.aliases.iter()) {
                let key = match_key(&normalize(name)).to_string();
                if let Some((_, owner)) = seen.iter().find(|(k, _)| *k == key) {
                    assert_eq!(*owner, m.product, "{name} belongs to two models");
                }
                seen.push((key, m.product));
                // Every alias must resolve back to its own model.
                assert_eq!(model(name).product, m.product);
            }
        }
    }

    #[test]
    fn product_names_sorted_and_complete() {
        let names = product_names();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), models().len());
        assert!(names.contains(&"NVIDIA-B200"));
    }

    #[test]
    fn every_profile_fits_on_one_gpu() {
        for m in models() {
            for p in m.mig_profiles {
                assert!(
                    u32::from(p.max_instances) * u32::from(p.compute_slices)
                        <= u32::from(m.compute_slices()),
                    "{} {}",
                    m.product,
                    p.name
                );
                assert!(
                    u32::from(p.max_instances) * u32::from(p.memory_slices)
                        <= u32::from(m.memory_slices()),
                    "{} {}",
                    m.product,
                    p.name
                );
                assert!(p.max_instances >= 1);
                // The name must say what the fields say.
                assert_eq!(p.name, format!("{}g.{}gb", p.compute_slices, p.memory_gb));
                // One instance of every profile is valid on its own.
                assert_eq!(check_mig_layout(m, &[(p.name, 1)]), Ok(()));
                // Filling the GPU with one profile is valid too.
                assert_eq!(
                    check_mig_layout(m, &[(p.name, u32::from(p.max_instances))]),
                    Ok(())
                );
            }
        }
    }

    #[test]
    fn full_gpu_profile_matches_memory() {
        for m in models().iter().filter(|m| m.mig_capable()) {
            let full = m
                .mig_profiles
                .iter()
                .find(|p| p.compute_slices == m.compute_slices());
            let Some(full) = full else {
                panic!("{} has no whole-GPU profile", m.product);
            };
            assert_eq!(full.memory_slices, m.memory_slices());
            assert_eq!(u32::from(full.memory_gb), m.memory_gb(), "{}", m.product);
        }
    }

    #[test]
    fn model_facts() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        assert!(a100.mig_capable());
        assert_eq!(a100.memory_gb(), 80);
        assert_eq!(a100.architecture, "ampere");
        assert_eq!(a100.nvlink_domain_size, Some(8));

        let l40s = model("NVIDIA-L40S");
        assert!(!l40s.mig_capable());
        assert_eq!(l40s.nvlink_domain_size, None);
        assert_eq!(l40s.architecture, "ada-lovelace");
        assert!(l40s.mig_profile("1g.10gb").is_none());

        assert_eq!(model("NVIDIA-B200").architecture, "blackwell");
        assert_eq!(model("NVIDIA-H200").memory_gb(), 141);
        assert_eq!(model("NVIDIA-H100-NVL").nvlink_domain_size, Some(2));
    }

    #[test]
    fn the_current_data_centre_line_is_known_by_its_nvidia_smi_names() {
        for (smi, product, gb) in [
            ("NVIDIA H100 PCIe", "NVIDIA-H100-PCIe", 80),
            ("NVIDIA H200 NVL", "NVIDIA-H200-NVL", 141),
            ("NVIDIA GH200 480GB", "NVIDIA-GH200-480GB", 96),
            ("NVIDIA GH200 144G HBM3e", "NVIDIA-GH200-144G-HBM3e", 144),
            ("NVIDIA GB200", "NVIDIA-GB200", 186),
            ("NVIDIA B300 SXM6 AC", "NVIDIA-B300-SXM6-AC", 269),
            ("NVIDIA GB300", "NVIDIA-GB300", 278),
            ("NVIDIA A30", "NVIDIA-A30", 24),
            ("NVIDIA L4", "NVIDIA-L4", 23),
            ("NVIDIA L40", "NVIDIA-L40", 45),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
                96,
            ),
        ] {
            let m = model(smi);
            assert_eq!((m.product, m.memory_gb()), (product, gb), "{smi}");
        }
        // NVL72 trays: 4 GPUs each, one NVLink domain of 72.
        assert_eq!(model("GB200").nvlink_domain_size, Some(72));
        assert_eq!(model("GB300").nvlink_domain_size, Some(72));
        // The A30 splits into 4 slices, so a 4g instance fills it.
        let a30 = model("NVIDIA-A30");
        assert_eq!((a30.compute_slices(), a30.memory_slices()), (4, 4));
        assert_eq!(
            check_mig_layout(a30, &[("1g.6gb", 2), ("2g.12gb", 1)]),
            Ok(())
        );
        assert!(matches!(
            check_mig_layout(a30, &[("4g.24gb", 1), ("1g.6gb", 1)]),
            Err(MigLayoutError::ExceedsGpu { has: (4, 4), .. })
        ));
        assert!(!model("NVIDIA-L4").mig_capable());
    }

    #[test]
    fn a100_80gb_profile_table() {
        let m = model("NVIDIA-A100-SXM4-80GB");
        let table: Vec<(&str, u8)> = m
            .mig_profiles
            .iter()
            .map(|p| (p.name, p.max_instances))
            .collect();
        assert_eq!(
            table,
            vec![
                ("1g.10gb", 7),
                ("1g.20gb", 4),
                ("2g.20gb", 3),
                ("3g.40gb", 2),
                ("4g.40gb", 1),
                ("7g.80gb", 1),
            ]
        );
    }

    #[test]
    fn mig_profile_lookup_forms() {
        let m = model("NVIDIA-H100-80GB-HBM3");
        for name in [
            "3g.40gb",
            " 3G.40GB ",
            "mig-3g.40gb",
            "nvidia.com/mig-3g.40gb",
        ] {
            let Some(p) = m.mig_profile(name) else {
                panic!("{name} should resolve");
            };
            assert_eq!(p.name, "3g.40gb");
            assert_eq!(p.compute_slices, 3);
            assert_eq!(p.memory_slices, 4);
        }
        assert!(m.mig_profile("2g.10gb").is_none());
    }

    #[test]
    fn resource_names() {
        let m = model("NVIDIA-A100-SXM4-80GB");
        let Some(p) = m.mig_profile("1g.10gb") else {
            panic!("1g.10gb should exist on A100 80GB");
        };
        assert_eq!(p.resource_name(), "nvidia.com/mig-1g.10gb");
        let Some(p) = model("NVIDIA-B200").mig_profile("7g.180gb") else {
            panic!("7g.180gb should exist on B200");
        };
        assert_eq!(p.resource_name(), "nvidia.com/mig-7g.180gb");
    }

    #[test]
    fn valid_layouts() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        assert_eq!(check_mig_layout(a100, &[("1g.10gb", 7)]), Ok(()));
        assert_eq!(
            check_mig_layout(a100, &[("3g.40gb", 1), ("4g.40gb", 1)]),
            Ok(())
        );
        assert_eq!(
            check_mig_layout(a100, &[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)]),
            Ok(())
        );
        assert_eq!(check_mig_layout(a100, &[]), Ok(()));
        assert_eq!(
            check_mig_layout(a100, &[("7g.80gb", 1), ("1g.10gb", 0)]),
            Ok(())
        );
        // Repeated entries are added together.
        assert_eq!(
            check_mig_layout(a100, &[("1g.10gb", 3), ("1g.10gb", 4)]),
            Ok(())
        );

        let a100_40 = model("NVIDIA-A100-SXM4-40GB");
        assert_eq!(
            check_mig_layout(a100_40, &[("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)]),
            Ok(())
        );
        assert_eq!(check_mig_layout(a100_40, &[("1g.10gb", 4)]), Ok(()));

        let h200 = model("NVIDIA-H200");
        assert_eq!(
            check_mig_layout(h200, &[("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)]),
            Ok(())
        );
        let b200 = model("NVIDIA-B200");
        assert_eq!(
            check_mig_layout(b200, &[("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)]),
            Ok(())
        );
    }

    #[test]
    fn layout_not_mig_capable() {
        let l40s = model("NVIDIA-L40S");
        let err = check_mig_layout(l40s, &[("1g.10gb", 1)]);
        assert_eq!(
            err,
            Err(MigLayoutError::NotMigCapable {
                product: "NVIDIA-L40S"
            })
        );
        if let Err(e) = err {
            assert_eq!(
                e.to_string(),
                "NVIDIA-L40S does not support MIG partitioning"
            );
        }
    }

    #[test]
    fn layout_unknown_profile() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        let err = check_mig_layout(a100, &[("1g.10gb", 1), ("2g.10gb", 1)]);
        let Err(e) = err else {
            panic!("2g.10gb does not exist on A100 80GB");
        };
        assert_eq!(
            e,
            MigLayoutError::UnknownProfile {
                profile: "2g.10gb".to_string(),
                product: "NVIDIA-A100-SXM4-80GB",
                known: vec![
                    "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"
                ],
            }
        );
        assert_eq!(
            e.to_string(),
            "MIG profile \"2g.10gb\" is not available on NVIDIA-A100-SXM4-80GB; \
             known profiles: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
        );
    }

    #[test]
    fn layout_too_many_instances() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        let err = check_mig_layout(a100, &[("3g.40gb", 3)]);
        assert_eq!(
            err,
            Err(MigLayoutError::TooManyInstances {
                profile: "3g.40gb".to_string(),
                requested: 3,
                max: 2,
            })
        );
        // Split across entries, and with a huge count that must not overflow.
        let err = check_mig_layout(a100, &[("1g.10gb", 4), ("1g.10gb", 4)]);
        assert!(matches!(
            err,
            Err(MigLayoutError::TooManyInstances {
                requested: 8,
                max: 7,
                ..
            })
        ));
        let err = check_mig_layout(a100, &[("1g.10gb", u32::MAX), ("1g.10gb", u32::MAX)]);
        assert!(matches!(
            err,
            Err(MigLayoutError::TooManyInstances {
                requested: u32::MAX,
                max: 7,
                ..
            })
        ));
        if let Err(e) = check_mig_layout(a100, &[("3g.40gb", 3)]) {
            assert_eq!(
                e.to_string(),
                "MIG profile \"3g.40gb\" requested 3 times, but at most 2 fit on one GPU"
            );
        }
    }

    #[test]
    fn layout_exceeds_gpu() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        // Too much compute: 4 + 4 slices.
        let err = check_mig_layout(a100, &[("4g.40gb", 1), ("3g.40gb", 1), ("1g.10gb", 1)]);
        assert_eq!(
            err,
            Err(MigLayoutError::ExceedsGpu {
                compute_slices: 8,
                memory_gb: 90,
                product: "NVIDIA-A100-SXM4-80GB",
                has: (7, 8),
            })
        );
        // Compute fits (7) but memory does not: 4 + 2 + 2 + 1 = 9 slices.
        let err = check_mig_layout(a100, &[("4g.40gb", 1), ("1g.20gb", 2), ("1g.10gb", 1)]);
        assert_eq!(
            err,
            Err(MigLayoutError::ExceedsGpu {
                compute_slices: 7,
                memory_gb: 90,
                product: "NVIDIA-A100-SXM4-80GB",
                has: (7, 8),
            })
        );
        if let Err(e) = err {
            assert_eq!(
                e.to_string(),
                "MIG layout needs 7 compute slices and 90 GB of memory, more than one \
                 NVIDIA-A100-SXM4-80GB provides (7 compute slices, 8 memory slices)"
            );
        }
        // The whole-GPU profile leaves room for nothing else.
        let b200 = model("NVIDIA-B200");
        assert!(matches!(
            check_mig_layout(b200, &[("7g.180gb", 1), ("1g.23gb", 1)]),
            Err(MigLayoutError::ExceedsGpu {
                compute_slices: 8,
                ..
            })
        ));
    }

    #[test]
    fn error_is_std_error() {
        let e: Box<dyn std::error::Error> = Box::new(MigLayoutError::NotMigCapable {
            product: "NVIDIA-L40S",
        });
        assert!(e.to_string().contains("NVIDIA-L40S"));
    }
    #[test]
    fn named_mig_configs_follow_the_gpu_operators_default_config() {
        let layout = |product: &str, name: &str| -> Vec<(&str, u32)> {
            match mig_config(model(product), name) {
                Ok(c) => c.devices.iter().map(|(p, n)| (p.name, *n)).collect(),
                Err(e) => panic!("{product} {name}: {e}"),
            }
        };
        // all-balanced, per product, as the default config's device filters say.
        for (product, want) in [
            (
                "NVIDIA-A100-SXM4-40GB",
                vec![("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
            ),
            (
                "NVIDIA-A100-PCIE-40GB",
                vec![("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
            ),
            (
                "NVIDIA-H100-80GB-HBM3",
                vec![("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)],
            ),
            (
                "NVIDIA-H100-NVL",
                vec![("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)],
            ),
            (
                "NVIDIA-GH200-480GB",
                vec![("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1)],
            ),
            (
                "NVIDIA-H200-NVL",
                vec![("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)],
            ),
            (
                "NVIDIA-B200",
                vec![("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)],
            ),
            (
                "NVIDIA-GB200",
                vec![("1g.23gb", 2), ("2g.47gb", 1), ("3g.93gb", 1)],
            ),
            (
                "NVIDIA-B300-SXM6-AC",
                vec![("1g.34gb", 2), ("2g.67gb", 1), ("3g.135gb", 1)],
            ),
            ("NVIDIA-A30", vec![("1g.6gb", 2), ("2g.12gb", 1)]),
            (
                "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
                vec![("1g.24gb", 2), ("2g.48gb", 1)],
            ),
        ] {
            assert_eq!(layout(product, "all-balanced"), want, "{product}");
        }
        // all-<profile> fills the GPU: the default config's counts are the
        // profile's maximum (4 of 1g.10gb on a 40GB A100, 7 on an 80GB one).
        assert_eq!(
            layout("NVIDIA-A100-SXM4-40GB", "all-1g.10gb"),
            vec![("1g.10gb", 4)]
        );
        assert_eq!(
            layout("NVIDIA-A100-SXM4-80GB", "all-1g.10gb"),
            vec![("1g.10gb", 7)]
        );
        assert_eq!(layout("NVIDIA-GB300", "all-1g.35gb"), vec![("1g.35gb", 7)]);
        assert_eq!(layout("NVIDIA-H200", " ALL-3G.71GB "), vec![("3g.71gb", 2)]);
        assert_eq!(layout("NVIDIA-H200", "3g.71gb"), vec![("3g.71gb", 2)]);
        let Ok(off) = mig_config(model("NVIDIA-H200"), "all-disabled") else {
            panic!("all-disabled is a config");
        };
        assert!(!off.enabled && off.devices.is_empty());
        let Ok(on) = mig_config(model("NVIDIA-H200"), "all-enabled") else {
            panic!("all-enabled is a config");
        };
        assert!(on.enabled && on.devices.is_empty() && on.is_uniform());
    }

    #[test]
    fn every_mig_product_has_one_balanced_layout_that_fits() {
        for m in models().iter().filter(|m| m.mig_capable()) {
            let matching = BALANCED_LAYOUTS
                .iter()
                .filter(|l| l.iter().all(|(p, _)| m.mig_profile(p).is_some()))
                .count();
            assert_eq!(matching, 1, "{}", m.product);
            let Ok(c) = mig_config(m, "all-balanced") else {
                panic!("{} has all-balanced", m.product);
            };
            let layout: Vec<(&str, u32)> = c.devices.iter().map(|(p, n)| (p.name, *n)).collect();
            assert_eq!(check_mig_layout(m, &layout), Ok(()), "{}", m.product);
            assert!(!c.is_uniform());
        }
    }

    #[test]
    fn unknown_mig_config_names_list_the_known_ones() {
        let a100 = model("NVIDIA-A100-SXM4-40GB");
        let Err(e) = mig_config(a100, "all-1g.5gb.me") else {
            panic!("media-extension configs are not accepted");
        };
        let text = e.to_string();
        assert!(
            text.contains("all-balanced") && text.contains("all-1g.5gb"),
            "{text}"
        );
        assert!(mig_config(a100, "all-1g.10gb.me").is_err());
        assert!(mig_config(a100, "custom-layout").is_err());
        assert_eq!(
            mig_config(model("NVIDIA-L40S"), "all-disabled"),
            Err(MigConfigError::NotMigCapable {
                product: "NVIDIA-L40S"
            })
        );
    }
}
