//! The labels, annotations and resources of a fleet node's Kubernetes object.

/// GPU product, as GPU feature discovery sets it (`NVIDIA-H100-80GB-HBM3`).
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// Number of GPUs on the node (GFD).
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// Framebuffer of one GPU in MiB (GFD).
pub const GPU_MEMORY_LABEL: &str = "nvidia.com/gpu.memory";
/// GPU architecture: `ampere`, `hopper`, `ada-lovelace`, `blackwell` (GFD).
pub const GPU_FAMILY_LABEL: &str = "nvidia.com/gpu.family";
/// `true` on every GPU node (set by the GPU operator's node feature rules).
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// Whether the GPUs support MIG partitioning (GFD).
pub const MIG_CAPABLE_LABEL: &str = "nvidia.com/mig.capable";
/// The driver and CUDA runtime versions every lab node reports, as GFD splits them into
/// `nvidia.com/cuda.driver.{major,minor,rev}` and `nvidia.com/cuda.runtime.{major,minor}`
/// labels. A node group's `labels` can override any of them (a rack on another driver).
pub const DRIVER_LABELS: &[(&str, &str)] = &[
    ("nvidia.com/cuda.driver.major", "570"),
    ("nvidia.com/cuda.driver.minor", "133"),
    ("nvidia.com/cuda.driver.rev", "20"),
    ("nvidia.com/cuda.runtime.major", "12"),
    ("nvidia.com/cuda.runtime.minor", "8"),
];
/// The well-known zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The well-known region label.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// The site (data centre) the node is in.
pub const SITE_LABEL: &str = "gpufleet.dev/site";
/// The rack the node is in.
pub const RACK_LABEL: &str = "gpufleet.dev/rack";
/// NVIDIA topograph's switch block: the leaf switches that connect one or more racks. The
/// lab gives each rack its own block.
pub const BLOCK_LABEL: &str = "network.topology.nvidia.com/block";
/// GPU feature discovery's NVLink clique, `<cluster UUID>.<clique id>`: set only on
/// multi-node NVLink systems (an NVLink domain larger than one node, such as GB200 NVL72),
/// where the fabric manager gives the GPUs a cluster UUID.
pub const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";
/// The NVLink domain the node's GPUs belong to: nodes with the same value share one
/// NVLink fabric. Set only for products that have NVLink (the catalog's NVLink domain
/// size). The value is `<rack>-nvl<k>`, counting domains within the rack. A domain holds
/// `domain size / GPUs per node` nodes: an 8-GPU HGX node of an 8-GPU-domain product is a
/// domain of its own; a product whose domain is smaller than a node (H100 NVL pairs) gives
/// each node its own value too, since the fabric does not reach past the node.
pub const NVLINK_DOMAIN_LABEL: &str = "topology.gpufleet.dev/nvlink-domain";
/// Marks the nodes the lab manages, so it can remove nodes that left the spec.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "gpufleet-lab";
/// The annotation kwok selects the nodes it simulates by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// The node's (simulated) BMC MAC address.
pub const MAC_ANNOTATION: &str = "gpufleet.dev/mac-address";
/// The node's GPUs as the hardware has them (`<count>x<product>`), which GPU feature discovery
/// relabels under MIG: the lab's MIG manager reads it where a real one asks the driver.
pub const HARDWARE_ANNOTATION: &str = "gpufleet.dev/lab-gpus";
/// The Kubernetes extended resource for whole GPUs (NVIDIA device plugin).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Pods per node, as on a default kubelet.
pub const PODS_PER_NODE: u32 = 110;
