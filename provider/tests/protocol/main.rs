//! Protocol tests: the tfplugin6 service driven through a real gRPC client over an in-memory
//! connection, with the client playing Terraform core.
//!
//! Every plan and apply goes through the harness in [`support`], which builds requests the way
//! Terraform does and checks every answer against Terraform's plan-validity and
//! apply-consistency rules (`gpufleet_engine::consistency`), and every opened ephemeral
//! resource against the rules Terraform applies to its result. Resource lifecycles run against
//! `test_widget` ([`widget`]), a resource kind that lives in this binary's memory.

mod actions;
mod data_and_functions;
mod ephemeral;
mod list_resources;
mod provider_config;
mod resource_lifecycle;
mod schema;
mod state_upgrade;
mod stop;
mod support;
mod unsupported;
mod widget;
