//! Label, annotation and taint keys gpufleet sets on host-cluster objects, and the GPU
//! Operator's node labels it reads and sets. One list, so the resources that write them and
//! the data sources that read them agree.

/// The well-known label naming the tool that manages an object.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY`] on every object gpufleet creates. Nodes are not created by
/// gpufleet, so they never get it: their own value is left alone.
pub const MANAGED_BY_VALUE: &str = "gpufleet";
/// On every object of a virtual cluster: the virtual cluster's name.
pub const VIRTUAL_CLUSTER: &str = "gpufleet.dev/virtual-cluster";
/// On a virtual cluster's namespace: its isolation tier (`shared`, `dedicated`, `private`).
pub const ISOLATION: &str = "gpufleet.dev/isolation";
/// On nodes a pool holds: the pool that holds them, as `<virtual cluster>.<pool>`; the same
/// key is on objects a pool creates (device-plugin config, Karpenter NodePool).
pub const POOL: &str = "gpufleet.dev/pool";
/// On nodes of a dedicated or private pool: the virtual cluster (tenant) they serve. The same
/// key is the taint (`NoSchedule`) that keeps every other tenant's pods off them.
pub const TENANT: &str = "gpufleet.dev/tenant";
/// On nodes a pool holds: the isolation tier of the pool's virtual cluster.
pub const NODE_ISOLATION: &str = "gpufleet.dev/isolation";
/// On nodes a pool is letting go but that are not free yet (the MIG manager is returning them
/// to the fleet's default MIG config): the pool, as [`POOL`] has it. Such a node keeps
/// [`POOL`], its cordon and its record, and serves the pool no more.
pub const RELEASING: &str = "gpufleet.dev/releasing";

/// Label keys (or prefixes, ending in `/`) gpufleet sets itself on a virtual cluster's
/// objects: its own marks, pod security, and the selector labels of the control plane's
/// pods. Users cannot set them, and gpufleet takes them back whoever wrote them.
pub const RESERVED_LABELS: &[&str] = &[
    "gpufleet.dev/",
    "pod-security.kubernetes.io/",
    MANAGED_BY,
    "app",
    "release",
];

/// Whether `key` is one of [`RESERVED_LABELS`].
pub fn reserved_label(key: &str) -> bool {
    RESERVED_LABELS
        .iter()
        .any(|r| key == *r || (r.ends_with('/') && key.starts_with(r)))
}

/// The label Karpenter puts on the nodes it launches for a NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
/// The GPU Operator's node label selecting a device-plugin config.
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// The MIG manager's node label selecting a MIG profile.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The node label GFD writes the GPU product into. Under time-slicing without renaming GFD
/// appends `-SHARED`, under the MIG `single` strategy `-MIG-<profile>`: match it with
/// [`crate::catalog::lookup`], never by equality.
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// The node label GFD writes the number of physical GPUs into (MIG devices under the MIG
/// `single` strategy).
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// GPU feature discovery's NVLink clique, `<cluster UUID>.<clique id>`: set on multi-node
/// NVLink systems (GB200 NVL72 and later), whose nodes share one NVLink fabric.
pub const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";
/// NVIDIA topograph's NVLink (accelerated network) domain, where the provider exposes one.
pub const ACCELERATOR_LABEL: &str = "network.topology.nvidia.com/accelerator";
/// NVIDIA topograph's switch block: the leaf switches the node hangs off (a rack or a few).
pub const BLOCK_LABEL: &str = "network.topology.nvidia.com/block";
/// Kubernetes' well-known zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The node label GFD writes the time-slicing replicas per GPU into (`0` or `1` when
/// unshared).
pub const GPU_REPLICAS_LABEL: &str = "nvidia.com/gpu.replicas";
