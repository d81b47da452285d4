//! Managed resource kinds, one file each.

pub mod network_segment;
