//! UpgradeResourceState: called on every run, at the same version too. Stored JSON is read
//! leniently (attributes added since are null, removed ones dropped) after the kind has
//! upgraded it, and returned as msgpack under the current schema.

use gpufleet_engine::diag::{Diagnostic, Diagnostics};

use crate::{codec, convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::upgrade_resource_state::Request,
) -> pb::upgrade_resource_state::Response {
    let result = upgrade(shared, &req);
    match result {
        Ok(dv) => pb::upgrade_resource_state::Response {
            upgraded_state: Some(dv),
            diagnostics: Vec::new(),
        },
        Err(diags) => pb::upgrade_resource_state::Response {
            upgraded_state: None,
            diagnostics: convert::diagnostics(&diags),
        },
    }
}

fn upgrade(
    shared: &Shared,
    req: &pb::upgrade_resource_state::Request,
) -> Result<pb::DynamicValue, Diagnostics> {
    let kind = super::resource(shared, &req.type_name)?;
    let schema = kind.schema();
    if req.version > schema.version {
        return Err(Diagnostic::error(
            "State From A Newer Provider",
            format!(
                "This {} was stored by a newer gpufleet (schema version {}, this one knows up to \
                 {}). Upgrade the provider.",
                req.type_name, req.version, schema.version
            ),
        )
        .into());
    }
    let raw = req
        .raw_state
        .as_ref()
        .map(|r| r.json.as_slice())
        .unwrap_or_default();
    if raw.is_empty() {
        return Err(Diagnostic::error(
            "Unsupported State Format",
            "gpufleet only reads JSON state; flatmap state comes from providers older than gpufleet.",
        )
        .into());
    }
    let json: serde_json::Value = serde_json::from_slice(raw).map_err(|e| {
        Diagnostic::error(
            "Invalid Stored State",
            format!("the stored state is not JSON: {e}"),
        )
    })?;
    let json = kind.upgrade_state(req.version, json)?;
    let ty = schema.value_type();
    let value = codec::json::decode_lenient_object_value(&json, &ty).map_err(|e| {
        Diagnostic::error(
            "Invalid Stored State",
            format!(
                "the stored state of this {} could not be read: {e}",
                req.type_name
            ),
        )
    })?;
    Ok(convert::encode(&value, &ty, "upgraded state")?)
}
