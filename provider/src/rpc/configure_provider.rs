//! ConfigureProvider: merge the provider block with `GPUFLEET_*` variables and check the
//! backend blocks that are set. Nothing connects here, and unknown values are fine: what is
//! wrong with a block is kept and reported on the resources that need it, when they plan.

use std::sync::Arc;

use gpufleet_engine::{
    backends,
    provider_config::{self, ProviderSettings},
};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::configure_provider::Request,
) -> pb::configure_provider::Response {
    let schema = provider_config::schema();
    let config = match convert::decode(
        req.config.as_ref(),
        &schema.value_type(),
        "provider configuration",
    ) {
        Ok(c) => c,
        Err(d) => {
            return pb::configure_provider::Response {
                diagnostics: vec![convert::diagnostic(&d)],
            };
        }
    };
    let mut settings = ProviderSettings::resolve(&config, |k| std::env::var(k).ok());
    settings.terraform_version = req.terraform_version;
    settings.problems = backends::check_settings(&settings).await;
    for block in settings.problems.keys() {
        tracing::debug!(block, "provider block cannot be used");
    }
    tracing::debug!(terraform_version = %settings.terraform_version, "provider configured");
    match shared.settings.write() {
        Ok(mut s) => *s = Arc::new(settings),
        Err(poisoned) => *poisoned.into_inner() = Arc::new(settings),
    }
    pb::configure_provider::Response::default()
}
