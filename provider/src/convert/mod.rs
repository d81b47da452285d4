//! Conversions between tfplugin6 messages and engine types.
//!
//! Conversions never fail with a gRPC error: a value that cannot be decoded becomes an error
//! diagnostic, which Terraform shows to the user.

mod diagnostics;
mod dynamic;
mod schema;

pub use diagnostics::{attribute_path, diagnostic, diagnostics};
pub use dynamic::{decode, encode};
pub use schema::{function, identity_schema, schema};
