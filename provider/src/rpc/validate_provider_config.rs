//! ValidateProviderConfig: offline checks of the provider block (its attribute validators and
//! the declared GPU products).

use gpufleet_engine::{provider_config, validate};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    _shared: &Shared,
    req: pb::validate_provider_config::Request,
) -> pb::validate_provider_config::Response {
    let schema = provider_config::schema();
    let diagnostics = match convert::decode(
        req.config.as_ref(),
        &schema.value_type(),
        "provider configuration",
    ) {
        Ok(config) => {
            let mut diags = validate::validate_block(&schema.block, &config);
            diags.extend(provider_config::check(&config));
            convert::diagnostics(&diags)
        }
        Err(d) => vec![convert::diagnostic(&d)],
    };
    pb::validate_provider_config::Response { diagnostics }
}
