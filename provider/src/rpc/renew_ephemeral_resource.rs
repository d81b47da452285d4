//! RenewEphemeralResource: hand the private data back to the kind.

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::renew_ephemeral_resource::Request,
) -> pb::renew_ephemeral_resource::Response {
    let mut resp = pb::renew_ephemeral_resource::Response {
        private: req.private.clone(),
        ..Default::default()
    };
    let kind = match super::ephemeral_resource(shared, &req.type_name) {
        Ok(k) => k,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let renewed = kind.renew(&shared.context(), req.private.as_deref()).await;
    resp.diagnostics = convert::diagnostics(&renewed.diagnostics);
    resp.private = renewed.private;
    resp.renew_at = renewed.renew_at.map(prost_types::Timestamp::from);
    resp
}
