//! ValidateListResourceConfig: the filters' validators plus the list kind's own offline checks.

use gpufleet_engine::validate;

use super::LIST_CONFIG_BLOCK;
use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::validate_list_resource_config::Request,
) -> pb::validate_list_resource_config::Response {
    let checked = super::list_resource(shared, &req.type_name).and_then(|kind| {
        let schema = kind.schema();
        let config = convert::decode(req.config.as_ref(), &schema.value_type(), "configuration")?;
        let config = schema.block.complete(&config);
        let mut diags = validate::validate_block(&schema.block, &config);
        diags.extend(kind.validate(&config));
        // Terraform reads the paths from the list block, whose filters sit in `config`.
        Ok(diags.nested_in(LIST_CONFIG_BLOCK))
    });
    pb::validate_list_resource_config::Response {
        diagnostics: match checked {
            Ok(diags) => convert::diagnostics(&diags),
            Err(d) => vec![convert::diagnostic(&d)],
        },
    }
}
