//! GetResourceIdentitySchemas: the identifying attributes of each resource type.

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    _req: pb::get_resource_identity_schemas::Request,
) -> pb::get_resource_identity_schemas::Response {
    pb::get_resource_identity_schemas::Response {
        identity_schemas: shared
            .kinds
            .resources
            .iter()
            .filter(|r| !r.identity_attributes().is_empty())
            .map(|r| {
                (
                    r.type_name().to_owned(),
                    convert::identity_schema(&r.schema(), r.identity_attributes()),
                )
            })
            .collect(),
        diagnostics: Vec::new(),
    }
}
