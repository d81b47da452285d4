//! Managed resource kinds, one module each.

pub mod bcm_node;
pub mod benchmark;
pub mod gpu_node_pool;
pub mod network_segment;
pub mod virtual_cluster;
