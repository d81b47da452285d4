//! The JSON encoding of cty types (go-cty `Type.MarshalJSON` / `UnmarshalJSON`).
//!
//! Primitive types are strings (`"string"`, `"number"`, `"bool"`, `"dynamic"`); the others are
//! arrays naming their kind: `["list",T]`, `["set",T]`, `["map",T]`, `["tuple",[T…]]` and
//! `["object",{"name":T…}]`. Newer go-cty may append a third element to an object type listing
//! its optional attributes; that only matters for type constraints in configuration, so it is
//! accepted and ignored.

use std::collections::BTreeMap;

use gpufleet_engine::value::Type;
use serde_json::{Map, Value as Json};

use super::{CodecError, MAX_DEPTH};

/// The JSON description of a type.
///
/// Object attributes come out sorted by name, as go-cty writes them.
pub fn type_to_json(ty: &Type) -> Json {
    match ty {
        Type::String => Json::from("string"),
        Type::Number => Json::from("number"),
        Type::Bool => Json::from("bool"),
        Type::Dynamic => Json::from("dynamic"),
        Type::List(e) => Json::Array(vec![Json::from("list"), type_to_json(e)]),
        Type::Set(e) => Json::Array(vec![Json::from("set"), type_to_json(e)]),
        Type::Map(e) => Json::Array(vec![Json::from("map"), type_to_json(e)]),
        Type::Tuple(elems) => Json::Array(vec![
            Json::from("tuple"),
            Json::Array(elems.iter().map(type_to_json).collect()),
        ]),
        Type::Object(attrs) => {
            let attrs: Map<String, Json> = attrs
                .iter()
                .map(|(k, t)| (k.clone(), type_to_json(t)))
                .collect();
            Json::Array(vec![Json::from("object"), Json::Object(attrs)])
        }
    }
}

/// The JSON description of a type, as compact bytes (what go-cty embeds in msgpack).
pub fn type_to_json_bytes(ty: &Type) -> Vec<u8> {
    // Serialising a `serde_json::Value` into memory cannot fail.
    serde_json::to_vec(&type_to_json(ty)).unwrap_or_default()
}

/// Reads a type from its JSON description.
pub fn type_from_json(json: &Json) -> Result<Type, CodecError> {
    from_json(json, 0)
}

/// Reads a type from the bytes of its JSON description.
pub fn type_from_json_bytes(bytes: &[u8]) -> Result<Type, CodecError> {
    let json: Json = serde_json::from_slice(bytes).map_err(|e| CodecError::DecodeType {
        reason: format!("not valid JSON: {e}"),
    })?;
    type_from_json(&json)
}

fn invalid(reason: impl Into<String>) -> CodecError {
    CodecError::DecodeType {
        reason: reason.into(),
    }
}

fn from_json(json: &Json, depth: usize) -> Result<Type, CodecError> {
    if depth > MAX_DEPTH {
        return Err(invalid(format!("nested deeper than {MAX_DEPTH} levels")));
    }
    match json {
        Json::String(name) => match name.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "dynamic" => Ok(Type::Dynamic),
            other => Err(invalid(format!("invalid primitive type name {other:?}"))),
        },
        Json::Array(items) => {
            let Some(Json::String(kind)) = items.first() else {
                return Err(invalid("a complex type must start with its kind name"));
            };
            let kind = kind.as_str();
            let Some([arg, rest @ ..]) = items.get(1..) else {
                return Err(invalid(format!("{kind:?} type lacks its element type")));
            };
            // Only objects may carry a third element (their optional attributes).
            let extra_allowed = usize::from(kind == "object");
            if rest.len() > extra_allowed {
                return Err(invalid(format!("unexpected extra data in {kind:?} type")));
            }
            match kind {
                "list" => Ok(Type::list(from_json(arg, depth + 1)?)),
                "set" => Ok(Type::set(from_json(arg, depth + 1)?)),
                "map" => Ok(Type::map(from_json(arg, depth + 1)?)),
                "tuple" => {
                    let Json::Array(elems) = arg else {
                        return Err(invalid("tuple element types must be an array"));
                    };
                    let elems = elems
                        .iter()
                        .map(|e| from_json(e, depth + 1))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(Type::Tuple(elems))
                }
                "object" => {
                    let Json::Object(attrs) = arg else {
                        return Err(invalid("object attribute types must be an object"));
                    };
                    if rest.first().is_some_and(|optional| !optional.is_array()) {
                        return Err(invalid("object optional attributes must be an array"));
                    }
                    let attrs = attrs
                        .iter()
                        .map(|(k, t)| Ok((k.clone(), from_json(t, depth + 1)?)))
                        .collect::<Result<BTreeMap<_, _>, CodecError>>()?;
                    Ok(Type::Object(attrs))
                }
                other => Err(invalid(format!("invalid complex type kind {other:?}"))),
            }
        }
        _ => Err(invalid("a type must be a string or an array")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go_cty_bytes() {
        let ty = Type::object([
            ("b", Type::list(Type::String)),
            ("a", Type::Tuple(vec![Type::Number, Type::Dynamic])),
            ("c", Type::map(Type::set(Type::Bool))),
        ]);
        let text = String::from_utf8(type_to_json_bytes(&ty)).expect("utf-8");
        assert_eq!(
            text,
            r#"["object",{"a":["tuple",["number","dynamic"]],"b":["list","string"],"c":["map",["set","bool"]]}]"#
        );
        assert_eq!(type_from_json_bytes(text.as_bytes()).expect("type"), ty);
    }

    #[test]
    fn accepts_optional_attributes() {
        let ty = type_from_json_bytes(br#"["object",{"a":"string"},["a"]]"#).expect("type");
        assert_eq!(ty, Type::object([("a", Type::String)]));
    }

    #[test]
    fn rejects_malformed_types() {
        for bad in [
            r#""str""#,
            r#"["list"]"#,
            r#"["list","string","string"]"#,
            r#"["object",{"a":"string"},["a"],1]"#,
            r#"["tuple",{}]"#,
            r#"["object",[]]"#,
            r#"["capsule","x"]"#,
            "[]",
            "3",
            "null",
            "[1,2]",
        ] {
            assert!(
                type_from_json_bytes(bad.as_bytes()).is_err(),
                "{bad} accepted"
            );
        }
    }
}
