//! ReadDataSource: read, then insist on a wholly known result, as Terraform does.

use gpufleet_engine::diag::Diagnostic;

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::read_data_source::Request,
) -> pb::read_data_source::Response {
    let mut resp = pb::read_data_source::Response::default();
    let kind = match super::data_source(shared, &req.type_name) {
        Ok(k) => k,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let ty = kind.schema().value_type();
    let config = match convert::decode(req.config.as_ref(), &ty, "configuration") {
        Ok(c) => c,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let ctx = shared.context();
    let unusable = ctx.settings.check_needed(&req.type_name, &config);
    if unusable.has_error() {
        resp.diagnostics = convert::diagnostics(&unusable);
        return resp;
    }
    let read = kind.read(&ctx, config).await;
    resp.diagnostics = convert::diagnostics(&read.diagnostics);
    if read.diagnostics.has_error() {
        return resp;
    }
    if read.new_state.is_null() || !read.new_state.is_wholly_known() {
        resp.diagnostics
            .push(convert::diagnostic(&Diagnostic::error(
                "Incomplete Data Source Result",
                format!(
                    "{} returned a result that is not wholly known. This is a bug in gpufleet.",
                    req.type_name
                ),
            )));
        return resp;
    }
    match convert::encode(&read.new_state, &ty, "data source result") {
        Ok(dv) => resp.state = Some(dv),
        Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
    }
    resp
}
