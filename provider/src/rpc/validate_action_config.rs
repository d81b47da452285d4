//! ValidateActionConfig: the attribute validators plus the action's own offline checks.

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::validate_action_config::Request,
) -> pb::validate_action_config::Response {
    let checked = super::action(shared, &req.type_name)
        .and_then(|kind| super::action_config(kind, req.config.as_ref()).map(|(_, d)| d));
    pb::validate_action_config::Response {
        diagnostics: match checked {
            Ok(diags) => convert::diagnostics(&diags),
            Err(d) => vec![convert::diagnostic(&d)],
        },
    }
}
