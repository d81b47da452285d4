//! CloseEphemeralResource: hand the private data back to the kind to release.

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::close_ephemeral_resource::Request,
) -> pb::close_ephemeral_resource::Response {
    let diagnostics = match super::ephemeral_resource(shared, &req.type_name) {
        Ok(kind) => {
            convert::diagnostics(&kind.close(&shared.context(), req.private.as_deref()).await)
        }
        Err(d) => vec![convert::diagnostic(&d)],
    };
    pb::close_ephemeral_resource::Response { diagnostics }
}
