//! Code generated from `proto/` at build time.
#![allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]

/// Terraform's plugin protocol, version 6.
pub mod tfplugin6 {
    tonic::include_proto!("tfplugin6");
}

/// go-plugin's controller, stdio and broker services.
pub mod plugin {
    tonic::include_proto!("plugin");
}
