//! ImportResourceState: by import id or by identity. Either gives a state skeleton; Terraform
//! then calls ReadResource to fill it, and a null read means nothing was there to import.

use gpufleet_engine::{diag::Diagnostics, kinds::ResourceKind, value::Value};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::import_resource_state::Request,
) -> pb::import_resource_state::Response {
    let mut resp = pb::import_resource_state::Response::default();
    let kind = match super::resource(shared, &req.type_name) {
        Ok(k) => k,
        Err(d) => {
            resp.diagnostics.push(convert::diagnostic(&d));
            return resp;
        }
    };
    let skeleton = match skeleton(shared, kind, &req).await {
        Ok(s) => s,
        Err(diags) => {
            resp.diagnostics = convert::diagnostics(&diags);
            return resp;
        }
    };
    let ty = kind.schema().value_type();
    match convert::encode(&skeleton, &ty, "imported state") {
        Ok(dv) => resp
            .imported_resources
            .push(pb::import_resource_state::ImportedResource {
                type_name: req.type_name.clone(),
                state: Some(dv),
                private: Vec::new(),
                identity: super::identity(kind, &skeleton),
            }),
        Err(d) => resp.diagnostics.push(convert::diagnostic(&d)),
    }
    resp
}

async fn skeleton(
    shared: &Shared,
    kind: &dyn ResourceKind,
    req: &pb::import_resource_state::Request,
) -> Result<Value, Diagnostics> {
    let identity = req.identity.as_ref().and_then(|i| i.identity_data.as_ref());
    let Some(identity) = identity.filter(|_| req.id.is_empty()) else {
        return kind
            .import(&shared.context(), &req.id)
            .await
            .map(|v| kind.schema().block.complete(&v));
    };
    let value = convert::decode(Some(identity), &super::identity_type(kind), "identity")?;
    Ok(kind.schema().block.complete(&value))
}
