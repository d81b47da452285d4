//! What goes over the wire: request bodies, the session cookie, the answer's envelope and a
//! created object's id.

use reqwest::{StatusCode, header};
use serde::Serialize;

use super::super::{Secret, error::ApiError, types::Envelope};

/// A request body as JSON.
pub(super) fn encode(body: &impl Serialize) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(body).map_err(|e| ApiError::json("cannot encode the request", e))
}

/// The `connect.sid` value among the `Set-Cookie` headers.
pub(super) fn session_cookie(headers: &header::HeaderMap) -> Option<Secret> {
    headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            let first = v.split(';').next()?.trim();
            let value = first.strip_prefix("connect.sid=")?;
            (!value.is_empty()).then(|| Secret::new(value))
        })
}

/// The envelope of an answer, or the error it reports. A bare JSON array or object (some v1
/// routes) is taken as `data`; an empty body as no data.
pub(super) fn parse_envelope(status: StatusCode, text: &str) -> Result<Envelope, ApiError> {
    let json: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Null
    } else {
        match serde_json::from_str(text) {
            Ok(j) => j,
            Err(_) if !status.is_success() => serde_json::Value::Null,
            Err(e) => return Err(ApiError::json("the answer is not JSON", e)),
        }
    };
    let is_envelope = json
        .as_object()
        .is_some_and(|o| o.contains_key("data") || o.contains_key("isSuccess"));
    let env = if is_envelope {
        serde_json::from_value::<Envelope>(json)
            .map_err(|e| ApiError::json("malformed envelope", e))?
    } else {
        let id = json.get("id").and_then(serde_json::Value::as_i64);
        let message = json
            .get("message")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let errors = json.get("errors").cloned().unwrap_or_default();
        Envelope {
            data: json,
            errors,
            message,
            is_success: None,
            id,
        }
    };
    if !status.is_success() || env.is_success == Some(false) {
        let errors = match &env.errors {
            serde_json::Value::Null => String::new(),
            serde_json::Value::Object(o) if o.is_empty() => String::new(),
            serde_json::Value::Array(a) if a.is_empty() => String::new(),
            e => e.to_string(),
        };
        let message = env
            .message
            .clone()
            .filter(|m| !m.is_empty())
            .or_else(|| status.canonical_reason().map(str::to_owned))
            .unwrap_or_else(|| "request failed".to_owned());
        return Err(ApiError::Status {
            status: status.as_u16(),
            message,
            errors,
        });
    }
    Ok(env)
}

/// The id of a created object: `data.id` (number or numeric string) or a flat `id`.
pub(super) fn created_id(env: &Envelope) -> Option<i64> {
    let as_id = |v: &serde_json::Value| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    env.data.get("id").and_then(as_id).or(env.id)
}
