//! The gpufleet Terraform provider: plugin server, value codec and RPC dispatch.
//!
//! This crate speaks Terraform's plugin protocol v6 (gRPC over go-plugin's handshake and
//! mutual TLS) and translates between wire values and the engine's values. It knows nothing
//! about Kubernetes, BCM or Netris: every decision is the engine's.

pub mod codec;
pub mod convert;
pub mod logging;
pub mod plugin;
pub mod proto;
pub mod rpc;
pub mod server;
