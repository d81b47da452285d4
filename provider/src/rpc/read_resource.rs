//! ReadResource: refresh. Null means the object is gone; Terraform then plans to create it.

use gpufleet_engine::diag::Diagnostic;

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::read_resource::Request,
) -> pb::read_resource::Response {
    let mut resp = pb::read_resource::Response {
        private: req.private.clone(),
        ..Default::default()
    };
    let decoded = super::resource_values(
        shared,
        &req.type_name,
        [(req.current_state.as_ref(), "current state")],
    );
    let (kind, ty, [state]) = match decoded {
        Ok(v) => v,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let read = kind.read(&shared.context(), state.clone()).await;
    resp.diagnostics = convert::diagnostics(&read.diagnostics);
    // On error keep the prior state: a failed read must not make Terraform forget objects.
    let new_state = if read.diagnostics.has_error() {
        state
    } else {
        read.new_state
    };
    if !new_state.is_wholly_known() {
        resp.diagnostics
            .push(convert::diagnostic(&Diagnostic::error(
                "Incomplete Refreshed State",
                format!(
                    "reading this {} produced unknown values. This is a bug in gpufleet.",
                    req.type_name
                ),
            )));
    }
    resp.new_identity = super::identity(kind, &new_state);
    match convert::encode(&new_state, &ty, "refreshed state") {
        Ok(dv) => resp.new_state = Some(dv),
        Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
    }
    resp
}
