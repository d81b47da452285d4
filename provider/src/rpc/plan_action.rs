//! PlanAction: the configuration checks again (the config is now evaluated), then what the
//! backend already knows that refuses the action, so a refused action fails the plan.

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::plan_action::Request,
) -> pb::plan_action::Response {
    let diagnostics = match super::action(shared, &req.action_type) {
        Err(d) => vec![convert::diagnostic(&d)],
        Ok(kind) => match super::action_config(kind, req.config.as_ref()) {
            Err(d) => vec![convert::diagnostic(&d)],
            Ok((config, mut diags)) => {
                let ctx = shared.context();
                diags.extend(ctx.settings.check_needed(&req.action_type, &config));
                if !diags.has_error() {
                    diags.extend(kind.plan(&ctx, &config).await);
                }
                convert::diagnostics(&diags)
            }
        },
    };
    pb::plan_action::Response {
        diagnostics,
        deferred: None,
    }
}
