//! The gpufleet engine: the resource kinds, planning, the apply runtime and the backends, over
//! the pure core it re-exports (values, schemas, validators, consistency rules, the catalog).
//!
//! Data flows one way: the provider crate decodes Terraform's values and calls into the kinds
//! listed in [`registry`]; the engine validates, plans and applies against the backends and
//! hands values back. The engine knows nothing of gRPC or msgpack.

pub use gpufleet_core::{catalog, consistency, diag, gpu_products, path, schema, validate, value};

pub mod actions;
pub mod apply;
pub mod backends;
pub mod benchmark;
pub mod context;
pub mod data_sources;
pub mod docs;
pub mod ephemeral_resources;
pub mod functions;
pub mod kinds;
pub mod open_handles;
pub mod plan;
pub mod planned_pools;
pub mod planned_releases;
pub mod planned_virtual_clusters;
pub mod provider_config;
pub mod registry;
pub mod resources;
pub mod tenancy;
pub mod timeouts;

#[cfg(test)]
mod bad_input_tests;
