//! PlanResourceChange: the engine's generic planner around the kind's own plan.

use gpufleet_engine::plan;

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::plan_resource_change::Request,
) -> pb::plan_resource_change::Response {
    let mut resp = pb::plan_resource_change::Response {
        planned_private: req.prior_private.clone(),
        ..Default::default()
    };
    let decoded = super::resource_values(
        shared,
        &req.type_name,
        [
            (req.prior_state.as_ref(), "prior state"),
            (req.proposed_new_state.as_ref(), "proposed state"),
            (req.config.as_ref(), "configuration"),
        ],
    );
    let (kind, ty, [prior, proposed, config]) = match decoded {
        Ok(v) => v,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let planned = plan::plan_resource(kind, &shared.context(), prior, proposed, config).await;
    resp.diagnostics = convert::diagnostics(&planned.diagnostics);
    if planned.diagnostics.has_error() {
        return resp;
    }
    resp.requires_replace = planned
        .requires_replace
        .iter()
        .map(convert::attribute_path)
        .collect();
    resp.planned_identity = super::identity(kind, &planned.planned);
    match convert::encode(&planned.planned, &ty, "planned state") {
        Ok(dv) => resp.planned_state = Some(dv),
        Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
    }
    resp
}
