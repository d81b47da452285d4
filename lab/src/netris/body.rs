//! Reading request bodies: typed field access over a JSON object, each failure a 400
//! [`ApiError`] naming the field.
//!
//! Bodies are read field by field from a `serde_json::Value` instead of being
//! deserialized into structs, because the real API is loose in ways clients rely on
//! (references as `{"id": n}` or a bare `n`, numbers sent as strings, `vlan` as `"auto"`
//! or `"100"` or `100`) and because every error must name the field it is about.

use serde_json::{Map, Value};

use super::dispatch::ApiError;

/// A request body: a JSON object.
pub(crate) type Obj = Map<String, Value>;

/// Parses a body that must be a JSON object.
pub(crate) fn object(bytes: &[u8]) -> Result<Obj, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "body",
            "the body must be a JSON object",
        )),
        Err(e) => Err(ApiError::bad_request(
            "body",
            format!("the body is not valid JSON: {e}"),
        )),
    }
}

/// A field that is absent or `null` reads as `None`.
fn get<'a>(obj: &'a Obj, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// Whether the body sets this field (to anything but `null`).
pub(crate) fn has(obj: &Obj, key: &str) -> bool {
    get(obj, key).is_some()
}

/// An optional string.
pub(crate) fn opt_str<'a>(obj: &'a Obj, key: &str) -> Result<Option<&'a str>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(
            key,
            format!("{key} must be a string"),
        )),
    }
}

/// A required, non-blank string.
pub(crate) fn req_str<'a>(obj: &'a Obj, key: &str) -> Result<&'a str, ApiError> {
    match opt_str(obj, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(ApiError::bad_request(
            key,
            format!("Must have required property '{key}'"),
        )),
    }
}

/// An optional boolean.
pub(crate) fn opt_bool(obj: &Obj, key: &str) -> Result<Option<bool>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ApiError::bad_request(
            key,
            format!("{key} must be a boolean"),
        )),
    }
}

/// A non-negative integer sent as a number or a numeric string.
pub(crate) fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// An optional non-negative integer (number or numeric string).
pub(crate) fn opt_u64(obj: &Obj, key: &str) -> Result<Option<u64>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(v) => as_u64(v).map(Some).ok_or_else(|| {
            ApiError::bad_request(key, format!("{key} must be a non-negative integer"))
        }),
    }
}

/// The id in a reference: `{"id": n}` (other keys ignored) or a bare `n`.
pub(crate) fn ref_of(v: &Value) -> Option<u64> {
    match v {
        Value::Object(o) => o.get("id").and_then(as_u64),
        other => as_u64(other),
    }
}

/// An optional reference field.
pub(crate) fn opt_ref(obj: &Obj, key: &str) -> Result<Option<u64>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(v) => ref_of(v).map(Some).ok_or_else(|| {
            ApiError::bad_request(key, format!("{key} must be {{\"id\": <number>}}"))
        }),
    }
}

/// A required reference field.
pub(crate) fn req_ref(obj: &Obj, key: &str) -> Result<u64, ApiError> {
    opt_ref(obj, key)?
        .ok_or_else(|| ApiError::bad_request(key, format!("Must have required property '{key}'")))
}

/// An optional list of references (`[{"id": n}, …]` or `[n, …]`).
pub(crate) fn opt_refs(obj: &Obj, key: &str) -> Result<Option<Vec<u64>>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                ref_of(v).ok_or_else(|| {
                    ApiError::bad_request(
                        key,
                        format!("every {key} entry must be {{\"id\": <number>}}"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ApiError::bad_request(
            key,
            format!("{key} must be an array"),
        )),
    }
}

/// An optional list of strings (tags).
pub(crate) fn opt_strings(obj: &Obj, key: &str) -> Result<Option<Vec<String>>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    ApiError::bad_request(key, format!("every {key} entry must be a string"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ApiError::bad_request(
            key,
            format!("{key} must be an array"),
        )),
    }
}

/// An optional array of objects.
pub(crate) fn opt_objects<'a>(obj: &'a Obj, key: &str) -> Result<Option<Vec<&'a Obj>>, ApiError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_object().ok_or_else(|| {
                    ApiError::bad_request(key, format!("every {key} entry must be an object"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ApiError::bad_request(
            key,
            format!("{key} must be an array"),
        )),
    }
}

/// Removes duplicates, keeping the first occurrence of each.
pub(crate) fn dedup(ids: Vec<u64>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(ids.len());
    for id in ids {
        if !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn o(v: Value) -> Obj {
        serde_json::from_value(v).expect("object")
    }

    #[test]
    fn references_take_both_shapes() {
        let b = o(
            json!({"a": {"id": 3, "name": "x"}, "b": 4, "c": "5", "d": {"name": "x"}, "e": null}),
        );
        assert_eq!(opt_ref(&b, "a").expect("a"), Some(3));
        assert_eq!(opt_ref(&b, "b").expect("b"), Some(4));
        assert_eq!(opt_ref(&b, "c").expect("c"), Some(5));
        assert!(opt_ref(&b, "d").is_err());
        assert_eq!(opt_ref(&b, "e").expect("e"), None);
        assert!(req_ref(&b, "zzz").is_err());
        let l = o(json!({"l": [{"id": 1}, 2], "bad": [{"id": -1}]}));
        assert_eq!(opt_refs(&l, "l").expect("l"), Some(vec![1, 2]));
        assert!(opt_refs(&l, "bad").is_err());
    }

    #[test]
    fn errors_name_the_field() {
        let b = o(json!({"name": 5}));
        let err = req_str(&b, "name").expect_err("not a string");
        assert_eq!(err.status, 400);
        assert!(err.errors.get("name").is_some());
        assert!(object(b"[1]").is_err());
        assert!(object(b"{").is_err());
        assert!(object(b"{}").is_ok());
    }
}
