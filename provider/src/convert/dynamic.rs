//! `DynamicValue` (msgpack or JSON bytes) to engine values and back.

use gpufleet_engine::{
    diag::Diagnostic,
    value::{Type, Value},
};

use crate::{codec, proto::tfplugin6 as pb};

/// Decodes a value Terraform sent. Terraform sends msgpack; JSON is accepted as a fallback
/// and an absent or empty value is null.
pub fn decode(dv: Option<&pb::DynamicValue>, ty: &Type, what: &str) -> Result<Value, Diagnostic> {
    let Some(dv) = dv else { return Ok(Value::Null) };
    let decoded = if !dv.msgpack.is_empty() {
        codec::msgpack::decode(&dv.msgpack, ty)
    } else if !dv.json.is_empty() {
        codec::json::decode(&dv.json, ty)
    } else {
        return Ok(Value::Null);
    };
    decoded.map_err(|e| {
        Diagnostic::error(
            "Invalid Value From Terraform",
            format!("gpufleet could not decode the {what}: {e}. This is a bug in gpufleet; please report it."),
        )
    })
}

/// Encodes a value for Terraform, always as msgpack.
pub fn encode(v: &Value, ty: &Type, what: &str) -> Result<pb::DynamicValue, Diagnostic> {
    codec::msgpack::encode(v, ty)
        .map(|msgpack| pb::DynamicValue {
            msgpack,
            json: Vec::new(),
        })
        .map_err(|e| {
            Diagnostic::error(
                "Invalid Value From Provider",
                format!("gpufleet could not encode the {what}: {e}. This is a bug in gpufleet; please report it."),
            )
        })
}
