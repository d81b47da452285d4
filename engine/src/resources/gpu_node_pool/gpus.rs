//! What a node's labels say about its GPUs: the catalog product, and the physical GPUs,
//! which sharing does not change.

use crate::{
    backends::kube::{
        GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, GPU_REPLICAS_LABEL, host::nodes::HostNode,
    },
    catalog::{self, GpuModel},
};

impl HostNode {
    /// The catalog model of the node's product label, whatever suffix GFD gave it.
    pub fn gpu_model(&self) -> Option<&'static GpuModel> {
        self.label(GPU_PRODUCT_LABEL).and_then(catalog::lookup)
    }

    /// Whether the node's GPUs are `model`, shared or partitioned as they may be.
    pub fn is_product(&self, model: &GpuModel) -> bool {
        self.gpu_model().is_some_and(|m| m.product == model.product)
    }

    /// The physical GPUs in the node, which sharing does not change.
    ///
    /// GFD's `nvidia.com/gpu.count` comes first: it counts devices whatever the device plugin
    /// advertises. Without it (GFD not running, or restarting), the capacity divided by
    /// `nvidia.com/gpu.replicas`. Under the MIG `single` strategy both count MIG devices, so
    /// they are divided by the instances of the label's profile per GPU (GPUs are filled
    /// with one profile, as `all-<profile>` does).
    pub fn physical_gpus(&self) -> u32 {
        let number = |key: &str| self.label(key).and_then(|v| v.trim().parse::<u32>().ok());
        let devices = number(GPU_COUNT_LABEL).unwrap_or_else(|| {
            let replicas = number(GPU_REPLICAS_LABEL).filter(|r| *r > 0).unwrap_or(1);
            self.gpu_capacity / replicas
        });
        let per_gpu = self
            .label(GPU_PRODUCT_LABEL)
            .and_then(catalog::label_mig_profile)
            .map_or(1, |p| u32::from(p.max_instances).max(1));
        devices.div_ceil(per_gpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = "NVIDIA-H100-80GB-HBM3";

    fn node(capacity: u32, labels: &[(&str, &str)]) -> HostNode {
        HostNode {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            gpu_capacity: capacity,
            ..HostNode::default()
        }
    }

    #[test]
    fn physical_gpus_ignore_what_sharing_does_to_capacity() {
        // As the lab sets them: count equal to capacity.
        let plain = node(8, &[(GPU_PRODUCT_LABEL, H100), (GPU_COUNT_LABEL, "8")]);
        assert_eq!(plain.physical_gpus(), 8);
        // Time-slicing, 4 replicas: the device plugin advertises 32, GFD still counts 8.
        let sliced = node(
            32,
            &[
                (GPU_PRODUCT_LABEL, "NVIDIA-H100-80GB-HBM3-SHARED"),
                (GPU_COUNT_LABEL, "8"),
                (GPU_REPLICAS_LABEL, "4"),
                ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
            ],
        );
        assert_eq!(sliced.physical_gpus(), 8);
        // MIG `mixed`: no whole GPU left to advertise, the GPUs are still there.
        let mixed = node(
            0,
            &[
                (GPU_PRODUCT_LABEL, H100),
                (GPU_COUNT_LABEL, "8"),
                (GPU_REPLICAS_LABEL, "0"),
            ],
        );
        assert_eq!(mixed.physical_gpus(), 8);
        // MIG `single` with all-1g.10gb: 56 MIG devices are 8 GPUs.
        let single = node(
            56,
            &[
                (GPU_PRODUCT_LABEL, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"),
                (GPU_COUNT_LABEL, "56"),
                (GPU_REPLICAS_LABEL, "1"),
            ],
        );
        assert_eq!(single.physical_gpus(), 8);
    }

    #[test]
    fn physical_gpus_fall_back_to_capacity() {
        // No count label: capacity over replicas, then capacity alone.
        let sliced = node(32, &[(GPU_REPLICAS_LABEL, "4")]);
        assert_eq!(sliced.physical_gpus(), 8);
        assert_eq!(node(8, &[]).physical_gpus(), 8);
        // Unreadable labels are ignored, and zero replicas never divide.
        let odd = node(8, &[(GPU_COUNT_LABEL, "eight"), (GPU_REPLICAS_LABEL, "0")]);
        assert_eq!(odd.physical_gpus(), 8);
    }

    #[test]
    fn product_matching_accepts_gfd_suffixes() {
        let Some(h100) = catalog::lookup(H100) else {
            panic!("{H100} is in the catalog");
        };
        for label in [
            H100,
            "NVIDIA-H100-80GB-HBM3-SHARED",
            "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            "H100-80GB-HBM3",
        ] {
            assert!(
                node(8, &[(GPU_PRODUCT_LABEL, label)]).is_product(h100),
                "{label}"
            );
        }
        assert!(!node(8, &[(GPU_PRODUCT_LABEL, "NVIDIA-H200")]).is_product(h100));
        assert!(!node(8, &[]).is_product(h100));
    }
}
