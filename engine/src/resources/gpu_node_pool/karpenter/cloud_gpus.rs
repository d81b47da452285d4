//! How each cloud's Karpenter provider labels its GPU instances.
//!
//! The keys and values come from the providers' sources:
//! * AWS (`karpenter-provider-aws`, `pkg/providers/instancetype/types.go`):
//!   `karpenter.k8s.aws/instance-gpu-{name,manufacturer,count,memory}`, the EC2 GPU name and
//!   manufacturer lower-cased with spaces as dashes, the count and the memory in MiB. The
//!   instance types and their values are those of its generated instance-type reference.
//! * Azure (`karpenter-provider-azure`, `pkg/providers/instancetype/instancetype.go`):
//!   `karpenter.azure.com/sku-gpu-{name,manufacturer,count}`. The name is the accelerator part
//!   of the VM size as `github.com/Azure/skewer` parses it (`[A-Z][0-9]+`: `H100` in
//!   `ND96isr_H100_v5`); sizes whose name has none (`ND96asr_v4`, `ND128isr_NDR_GB200_v6`,
//!   the `RTXPRO6000BSE` sizes) get no name label and cannot be selected by it.

use crate::{catalog::GpuModel, resources::gpu_node_pool::choices::Cloud};

// The instance labels and GPUs of each provider, which only the NodePool needs.
impl Cloud {
    pub(super) fn keys(self) -> Option<&'static GpuKeys> {
        match self {
            Cloud::Aws => Some(&AWS_KEYS),
            Cloud::Azure => Some(&AZURE_KEYS),
            Cloud::Generic => None,
        }
    }

    pub(super) fn gpus(self) -> &'static [CloudGpu] {
        match self {
            Cloud::Aws => AWS_GPUS,
            Cloud::Azure => AZURE_GPUS,
            Cloud::Generic => &[],
        }
    }
}

/// The instance-type labels of one Karpenter provider that describe an instance's GPUs.
#[derive(Debug)]
pub(super) struct GpuKeys {
    pub(super) name: &'static str,
    pub(super) manufacturer: &'static str,
    pub(super) count: &'static str,
    pub(super) memory: Option<&'static str>,
}

const AWS_KEYS: GpuKeys = GpuKeys {
    name: "karpenter.k8s.aws/instance-gpu-name",
    manufacturer: "karpenter.k8s.aws/instance-gpu-manufacturer",
    count: "karpenter.k8s.aws/instance-gpu-count",
    memory: Some("karpenter.k8s.aws/instance-gpu-memory"),
};

const AZURE_KEYS: GpuKeys = GpuKeys {
    name: "karpenter.azure.com/sku-gpu-name",
    manufacturer: "karpenter.azure.com/sku-gpu-manufacturer",
    count: "karpenter.azure.com/sku-gpu-count",
    memory: None,
};

/// How one cloud labels the instances of one catalog product.
#[derive(Debug)]
pub(super) struct CloudGpu {
    /// Catalog product.
    pub(super) product: &'static str,
    /// The GPU name label's value.
    pub(super) name: &'static str,
    /// The GPU memory label's value, where the name alone does not tell the product.
    pub(super) memory_mib: Option<u32>,
    /// GPUs per instance of the instance types that have it.
    pub(super) counts: &'static [u32],
}

const fn gpu(
    product: &'static str,
    name: &'static str,
    memory_mib: Option<u32>,
    counts: &'static [u32],
) -> CloudGpu {
    CloudGpu {
        product,
        name,
        memory_mib,
        counts,
    }
}

/// EC2 instance types by GPU (Karpenter's instance-type reference).
const AWS_GPUS: &[CloudGpu] = &[
    // p4d.24xlarge and p4de.24xlarge: both "a100", told apart by memory.
    gpu("NVIDIA-A100-SXM4-40GB", "a100", Some(40_960), &[8]),
    gpu("NVIDIA-A100-SXM4-80GB", "a100", Some(81_920), &[8]),
    // p5.4xlarge and p5.48xlarge.
    gpu("NVIDIA-H100-80GB-HBM3", "h100", None, &[1, 8]),
    // p5e and p5en.48xlarge.
    gpu("NVIDIA-H200", "h200", None, &[8]),
    gpu("NVIDIA-B200", "b200", None, &[8]),
    gpu("NVIDIA-B300-SXM6-AC", "b300", None, &[8]),
    // g6 and gr6; the fractional g6f sizes report 0 GPUs and are left out by the count.
    gpu("NVIDIA-L4", "l4", None, &[1, 4, 8]),
    // g6e.
    gpu("NVIDIA-L40S", "l40s", None, &[1, 4, 8]),
    // g7e.
    gpu(
        "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
        "rtx-pro-server-6000",
        None,
        &[1, 2, 4, 8],
    ),
];

/// Azure VM sizes by GPU (the accelerator part of the size name).
const AZURE_GPUS: &[CloudGpu] = &[
    // ND96amsr_A100_v4 (SXM, 8) and NC24/48/96ads_A100_v4 (PCIe, 1/2/4): both "A100".
    gpu("NVIDIA-A100-SXM4-80GB", "A100", None, &[8]),
    gpu("NVIDIA-A100-80GB-PCIe", "A100", None, &[1, 2, 4]),
    // ND96is(r)_H100_v5 (SXM, 8) and NC40ads/NC80adis_H100_v5 (H100 NVL, 1/2).
    gpu("NVIDIA-H100-80GB-HBM3", "H100", None, &[8]),
    gpu("NVIDIA-H100-NVL", "H100", None, &[1, 2]),
    // ND96isr_H200_v5.
    gpu("NVIDIA-H200", "H200", None, &[8]),
];

pub(super) fn cloud_gpu(cloud: Cloud, model: &GpuModel) -> Option<&'static CloudGpu> {
    cloud.gpus().iter().find(|g| g.product == model.product)
}
