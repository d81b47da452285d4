//! Data sources, one file each.

pub mod bcm_nodes;
pub mod fleet_inventory;
pub mod gpu_catalog;
pub mod host_preflight;
pub mod virtual_cluster;
