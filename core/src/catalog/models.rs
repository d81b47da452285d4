//! The catalog's data: the MIG profile tables and every GPU model, from the sources the
//! catalog's module documentation names.

use super::{GpuModel, MigProfile};

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
pub(super) static MODELS: &[GpuModel] = &[
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
