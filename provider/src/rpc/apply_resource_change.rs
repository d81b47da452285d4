//! ApplyResourceChange: run the kind's apply. On error the partial state is still returned,
//! so whatever was created is recorded (tainted) rather than orphaned.

use gpufleet_engine::{diag::Diagnostic, kinds::ApplyRequest};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::apply_resource_change::Request,
) -> pb::apply_resource_change::Response {
    let mut resp = pb::apply_resource_change::Response {
        private: req.planned_private.clone(),
        ..Default::default()
    };
    let decoded = super::resource_values(
        shared,
        &req.type_name,
        [
            (req.prior_state.as_ref(), "prior state"),
            (req.planned_state.as_ref(), "planned state"),
            (req.config.as_ref(), "configuration"),
        ],
    );
    let (kind, ty, [prior, planned, config]) = match decoded {
        Ok(v) => v,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let applied = kind
        .apply(
            &shared.context(),
            ApplyRequest {
                prior,
                planned,
                config,
            },
        )
        .await;
    resp.diagnostics = convert::diagnostics(&applied.diagnostics);
    // A write-only value served its call and is never stored.
    let new_state = kind.schema().block.without_write_only(applied.new_state);
    if !new_state.is_wholly_known() {
        resp.diagnostics
            .push(convert::diagnostic(&Diagnostic::error(
                "Incomplete Result After Apply",
                format!(
                    "applying this {} left unknown values. This is a bug in gpufleet.",
                    req.type_name
                ),
            )));
    }
    resp.new_identity = super::identity(kind, &new_state);
    match convert::encode(&new_state, &ty, "new state") {
        Ok(dv) => resp.new_state = Some(dv),
        Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
    }
    resp
}
