//! The gpufleet engine: resource model, schemas, validation, planning and backends.
//!
//! Data flows one way: the provider crate decodes Terraform's values and calls into the kinds
//! listed in [`registry`]; the engine validates, plans and applies against the backends and
//! hands values back. The engine knows nothing of gRPC or msgpack.

pub mod actions;
pub mod apply;
pub mod backends;
pub mod benchmark;
pub mod catalog;
pub mod consistency;
pub mod context;
pub mod data_sources;
pub mod diag;
pub mod docs;
pub mod ephemeral_resources;
pub mod functions;
pub mod gpu_products;
pub mod kinds;
pub mod open_handles;
pub mod path;
pub mod plan;
pub mod planned_pools;
pub mod planned_releases;
pub mod planned_virtual_clusters;
pub mod provider_config;
pub mod registry;
pub mod resources;
pub mod schema;
pub mod tenancy;
pub mod timeouts;
pub mod validate;
pub mod value;
