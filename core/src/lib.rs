//! The pure core of gpufleet: what a configuration means, with no async runtime and no
//! network.
//!
//! - [`value`]: Terraform's values and types, with [`value::known`] to decode attributes;
//! - [`path`] and [`diag`]: attribute paths and the diagnostics that point at them;
//! - [`schema`] and [`validate`]: schemas and the validators they declare;
//! - [`consistency`]: the rules Terraform holds a provider's plans and applies to;
//! - [`catalog`] and [`gpu_products`]: the GPUs gpufleet knows, and those a provider block
//!   declares.
//!
//! The engine re-exports every module under the same name, so code that uses the engine
//! reads them from there.

pub mod catalog;
pub mod consistency;
pub mod diag;
pub mod gpu_products;
pub mod path;
pub mod schema;
pub mod validate;
pub mod value;
