//! Data sources, one file each.

pub mod gpu_catalog;
