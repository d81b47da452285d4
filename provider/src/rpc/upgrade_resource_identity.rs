//! UpgradeResourceIdentity: identities are at version 0, so they pass through unchanged.

use gpufleet_engine::diag::Diagnostic;

use crate::{codec, convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::upgrade_resource_identity::Request,
) -> pb::upgrade_resource_identity::Response {
    let mut resp = pb::upgrade_resource_identity::Response::default();
    let kind = match super::resource(shared, &req.type_name) {
        Ok(k) => k,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let ty = super::identity_type(kind);
    let raw = req.raw_identity.map(|r| r.json).unwrap_or_default();
    let decoded = codec::json::decode(&raw, &ty).map_err(|e| {
        Diagnostic::error(
            "Invalid Stored Identity",
            format!(
                "the stored identity of this {} could not be read: {e}",
                req.type_name
            ),
        )
    });
    match decoded.and_then(|v| convert::encode(&v, &ty, "identity")) {
        Ok(dv) => {
            resp.upgraded_identity = Some(pb::ResourceIdentityData {
                identity_data: Some(dv),
            });
        }
        Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
    }
    resp
}
