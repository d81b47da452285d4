//! Every resource, data source, ephemeral resource, list resource, action and function the
//! provider offers, in one place.
//!
//! The provider crate serves exactly what is listed here, and the docs generator documents
//! exactly this, so adding a kind is one line.

use crate::{
    actions::{
        bcm_node_power::BcmNodePower, bcm_node_reprovision::BcmNodeReprovision,
        benchmark_run::BenchmarkRun, gpu_node_pool_drain::GpuNodePoolDrain,
    },
    apply::Listing,
    backends::kube::host,
    data_sources::bcm_nodes::BcmNodes,
    data_sources::fleet_inventory::FleetInventory,
    data_sources::gpu_catalog::GpuCatalog,
    data_sources::host_preflight::HostPreflight,
    data_sources::virtual_cluster::VirtualClusterData,
    ephemeral_resources::virtual_cluster_connection::VirtualClusterConnection,
    functions::mig_profiles::MigProfiles,
    kinds::{ActionKind, DataSourceKind, EphemeralKind, FunctionKind, ListKind, ResourceKind},
    resources::bcm_node::BcmNode,
    resources::benchmark::Benchmark,
    resources::gpu_node_pool::{self as gpu_node_pool, GpuNodePool, list::GpuNodePoolList},
    resources::network_segment::NetworkSegment,
    resources::virtual_cluster::{VirtualCluster, VirtualClusterList},
};

/// Prefix of every resource and data source type name.
pub const TYPE_PREFIX: &str = "gpufleet_";

/// Managed resource types.
pub const RESOURCES: &[&dyn ResourceKind] = &[
    &NetworkSegment(crate::backends::netris::FromSettings),
    &BcmNode(crate::backends::bcm::FromSettings),
    &VirtualCluster(host::FromSettings),
    &GpuNodePool(gpu_node_pool::FromSettings),
    &Benchmark(host::FromSettings),
];

/// Data source types.
pub const DATA_SOURCES: &[&dyn DataSourceKind] = &[
    &GpuCatalog,
    &BcmNodes(crate::backends::bcm::FromSettings),
    &VirtualClusterData(host::FromSettings),
    &FleetInventory(gpu_node_pool::FromSettings),
    &HostPreflight(host::FromSettings),
];

/// Ephemeral resource types.
pub const EPHEMERAL_RESOURCES: &[&dyn EphemeralKind] =
    &[&VirtualClusterConnection(host::FromSettings)];

/// List resources, for `terraform query`; each has a managed resource type of the same name.
pub const LIST_RESOURCES: &[&dyn ListKind] = &[
    &Listing(NetworkSegment(crate::backends::netris::FromSettings)),
    &Listing(BcmNode(crate::backends::bcm::FromSettings)),
    &VirtualClusterList(host::FromSettings),
    &GpuNodePoolList(gpu_node_pool::FromSettings),
];

/// Actions, for day-2 operations.
pub const ACTIONS: &[&dyn ActionKind] = &[
    &BcmNodePower(crate::backends::bcm::FromSettings),
    &BcmNodeReprovision(crate::backends::bcm::FromSettings),
    &GpuNodePoolDrain(crate::resources::gpu_node_pool::FromSettings),
    &BenchmarkRun(host::FromSettings),
];

/// Provider-defined functions.
pub const FUNCTIONS: &[&dyn FunctionKind] = &[&MigProfiles];

/// A managed resource type by its full name.
pub fn resource(type_name: &str) -> Option<&'static dyn ResourceKind> {
    RESOURCES
        .iter()
        .copied()
        .find(|r| r.type_name() == type_name)
}

/// A data source type by its full name.
pub fn data_source(type_name: &str) -> Option<&'static dyn DataSourceKind> {
    DATA_SOURCES
        .iter()
        .copied()
        .find(|d| d.type_name() == type_name)
}

/// An ephemeral resource type by its full name.
pub fn ephemeral_resource(type_name: &str) -> Option<&'static dyn EphemeralKind> {
    EPHEMERAL_RESOURCES
        .iter()
        .copied()
        .find(|e| e.type_name() == type_name)
}

/// A list resource type by its full name.
pub fn list_resource(type_name: &str) -> Option<&'static dyn ListKind> {
    LIST_RESOURCES
        .iter()
        .copied()
        .find(|l| l.type_name() == type_name)
}

/// An action type by its full name.
pub fn action(type_name: &str) -> Option<&'static dyn ActionKind> {
    ACTIONS.iter().copied().find(|a| a.type_name() == type_name)
}

/// A function by name.
pub fn function(name: &str) -> Option<&'static dyn FunctionKind> {
    FUNCTIONS.iter().copied().find(|f| f.name() == name)
}
