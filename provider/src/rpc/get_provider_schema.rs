//! GetProviderSchema: every schema, rendered from the engine's declarations.

use gpufleet_engine::provider_config;

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

/// What this provider announces it can do.
pub(crate) fn capabilities() -> pb::ServerCapabilities {
    pb::ServerCapabilities {
        // Destroys are planned too, so a destroy plan can be checked like any other.
        plan_destroy: true,
        // Schemas never change within one binary, so Terraform may cache them.
        get_provider_schema_optional: true,
        move_resource_state: false,
        generate_resource_config: false,
    }
}

pub(crate) async fn handle(
    shared: &Shared,
    _req: pb::get_provider_schema::Request,
) -> pb::get_provider_schema::Response {
    pb::get_provider_schema::Response {
        provider: Some(convert::schema(&provider_config::schema())),
        resource_schemas: shared
            .kinds
            .resources
            .iter()
            .map(|r| (r.type_name().to_owned(), convert::schema(&r.schema())))
            .collect(),
        data_source_schemas: shared
            .kinds
            .data_sources
            .iter()
            .map(|d| (d.type_name().to_owned(), convert::schema(&d.schema())))
            .collect(),
        ephemeral_resource_schemas: shared
            .kinds
            .ephemeral_resources
            .iter()
            .map(|e| (e.type_name().to_owned(), convert::schema(&e.schema())))
            .collect(),
        list_resource_schemas: shared
            .kinds
            .list_resources
            .iter()
            .map(|l| (l.type_name().to_owned(), convert::schema(&l.schema())))
            .collect(),
        action_schemas: shared
            .kinds
            .actions
            .iter()
            .map(|a| {
                let schema = Some(convert::schema(&a.schema()));
                (a.type_name().to_owned(), pb::ActionSchema { schema })
            })
            .collect(),
        functions: shared
            .kinds
            .functions
            .iter()
            .map(|f| (f.name().to_owned(), convert::function(&f.signature())))
            .collect(),
        server_capabilities: Some(capabilities()),
        ..Default::default()
    }
}
