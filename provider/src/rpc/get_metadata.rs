//! GetMetadata: the names of everything served, without schemas.

use crate::{proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    _req: pb::get_metadata::Request,
) -> pb::get_metadata::Response {
    use pb::get_metadata as m;
    m::Response {
        server_capabilities: Some(super::get_provider_schema::capabilities()),
        resources: shared
            .kinds
            .resources
            .iter()
            .map(|r| m::ResourceMetadata {
                type_name: r.type_name().to_owned(),
            })
            .collect(),
        data_sources: shared
            .kinds
            .data_sources
            .iter()
            .map(|d| m::DataSourceMetadata {
                type_name: d.type_name().to_owned(),
            })
            .collect(),
        ephemeral_resources: shared
            .kinds
            .ephemeral_resources
            .iter()
            .map(|e| m::EphemeralMetadata {
                type_name: e.type_name().to_owned(),
            })
            .collect(),
        list_resources: shared
            .kinds
            .list_resources
            .iter()
            .map(|l| m::ListResourceMetadata {
                type_name: l.type_name().to_owned(),
            })
            .collect(),
        actions: shared
            .kinds
            .actions
            .iter()
            .map(|a| m::ActionMetadata {
                type_name: a.type_name().to_owned(),
            })
            .collect(),
        functions: shared
            .kinds
            .functions
            .iter()
            .map(|f| m::FunctionMetadata {
                name: f.name().to_owned(),
            })
            .collect(),
        ..Default::default()
    }
}
