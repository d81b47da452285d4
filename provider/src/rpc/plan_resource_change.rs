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
    let kind = match super::resource(shared, &req.type_name) {
        Ok(k) => k,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let ty = kind.schema().value_type();
    let decoded = convert::decode(req.prior_state.as_ref(), &ty, "prior state").and_then(|prior| {
        let proposed = convert::decode(req.proposed_new_state.as_ref(), &ty, "proposed state")?;
        let config = convert::decode(req.config.as_ref(), &ty, "configuration")?;
        Ok((prior, proposed, config))
    });
    let (prior, proposed, config) = match decoded {
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
