//! ValidateEphemeralResourceConfig: the attribute validators plus the kind's own offline
//! checks.

use gpufleet_engine::validate;

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::validate_ephemeral_resource_config::Request,
) -> pb::validate_ephemeral_resource_config::Response {
    let checked = super::ephemeral_resource(shared, &req.type_name).and_then(|kind| {
        let schema = kind.schema();
        let config = convert::decode(req.config.as_ref(), &schema.value_type(), "configuration")?;
        let mut diags = validate::validate_block(&schema.block, &config);
        diags.extend(kind.validate(&config));
        Ok(diags)
    });
    pb::validate_ephemeral_resource_config::Response {
        diagnostics: match checked {
            Ok(diags) => convert::diagnostics(&diags),
            Err(d) => vec![convert::diagnostic(&d)],
        },
    }
}
