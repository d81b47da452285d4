//! The JSON value encoding (go-cty `cty/json`), used for raw state in `UpgradeResourceState`.
//!
//! Like msgpack it is directed by the type: objects and maps are JSON objects, lists, sets and
//! tuples are arrays, numbers are JSON numbers written exactly (never through a float), and a
//! value in a dynamically typed position is `{"value": …, "type": …}` with the type's JSON
//! (see [`super::type_json`]). JSON has no way to say "unknown", so encoding an unknown value
//! is an error.
//!
//! Decoding converts primitives the way go-cty's decoder does: a number or bool where a string
//! is expected becomes its text, a string where a number is expected is parsed, and `"true"`,
//! `"1"`, `"false"` and `"0"` are accepted for bools. State written by older providers relies
//! on this.

use std::collections::BTreeMap;

use gpufleet_engine::{
    path::PathStep,
    value::{Type, Value},
};
use serde_json::{Map, Value as Json};

use super::{
    CodecError, MAX_DEPTH, PathStack, format_number, infer_type, parse_number, type_from_json,
    type_to_json, value_kind,
};

/// Decodes JSON bytes as a value of type `ty`.
///
/// Objects must have exactly their type's attributes; see [`decode_lenient_object`] for raw
/// state, where they need not.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    decode_value(&parse(bytes)?, ty)
}

/// Decodes already-parsed JSON as a value of type `ty` (strictly, like [`decode`]).
pub fn decode_value(json: &Json, ty: &Type) -> Result<Value, CodecError> {
    Decoder {
        path: PathStack::default(),
        depth: 0,
        lenient: false,
    }
    .value(json, ty)
}

/// Decodes raw resource state (`UpgradeResourceState.raw_state.json`) as a value of the
/// object type `ty`, leniently.
///
/// Raw state was written by whichever version of the provider last saved it, whose schema may
/// have had fewer or more attributes than today's. So, in every object at any depth,
/// attributes the type declares but the JSON lacks decode as null, and attributes the JSON
/// has but the type no longer declares are dropped — what Terraform's own SDKs do before
/// handing state to an upgrader. Everything else is as strict as [`decode`].
pub fn decode_lenient_object(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    decode_lenient_object_value(&parse(bytes)?, ty)
}

/// [`decode_lenient_object`] for already-parsed JSON.
pub fn decode_lenient_object_value(json: &Json, ty: &Type) -> Result<Value, CodecError> {
    Decoder {
        path: PathStack::default(),
        depth: 0,
        lenient: true,
    }
    .value(json, ty)
}

/// Encodes a value of type `ty` as JSON bytes.
pub fn encode(value: &Value, ty: &Type) -> Result<Vec<u8>, CodecError> {
    let json = encode_value(value, ty)?;
    serde_json::to_vec(&json).map_err(|e| CodecError::WriteJson {
        reason: e.to_string(),
    })
}

/// Encodes a value of type `ty` as a JSON tree.
///
/// Fails if the value is or contains an unknown value, or does not conform to the type (a
/// [`Value::Dynamic`] in a concretely typed position is unwrapped; any other value in a
/// dynamic position is written with its inferred type, see [`super::infer_type`]).
pub fn encode_value(value: &Value, ty: &Type) -> Result<Json, CodecError> {
    Encoder {
        path: PathStack::default(),
    }
    .value(value, ty)
}

fn parse(bytes: &[u8]) -> Result<Json, CodecError> {
    if bytes.is_empty() {
        return Err(CodecError::DecodeEmpty);
    }
    Ok(serde_json::from_slice(bytes)?)
}

/// What a JSON value is, for errors.
fn describe(json: &Json) -> String {
    match json {
        Json::Null => "JSON null",
        Json::Bool(_) => "a JSON bool",
        Json::Number(_) => "a JSON number",
        Json::String(_) => "a JSON string",
        Json::Array(_) => "a JSON array",
        Json::Object(_) => "a JSON object",
    }
    .to_owned()
}

struct Decoder {
    path: PathStack,
    depth: usize,
    /// Whether objects may lack or add attributes (raw state).
    lenient: bool,
}

impl Decoder {
    fn mismatch(&self, ty: &Type, json: &Json) -> CodecError {
        CodecError::DecodeValue {
            path: self.path.to_path(),
            expected: ty.clone(),
            found: describe(json),
        }
    }

    fn value(&mut self, json: &Json, ty: &Type) -> Result<Value, CodecError> {
        if self.depth >= MAX_DEPTH {
            return Err(CodecError::DecodeDepth {
                path: self.path.to_path(),
                limit: MAX_DEPTH,
            });
        }
        self.depth += 1;
        let result = self.value_inner(json, ty);
        self.depth -= 1;
        result
    }

    fn value_inner(&mut self, json: &Json, ty: &Type) -> Result<Value, CodecError> {
        if json.is_null() {
            return Ok(Value::Null);
        }
        match ty {
            Type::Dynamic => self.dynamic(json),
            Type::Bool => match json {
                Json::Bool(b) => Ok(Value::Bool(*b)),
                Json::String(s) if s == "true" || s == "1" => Ok(Value::Bool(true)),
                Json::String(s) if s == "false" || s == "0" => Ok(Value::Bool(false)),
                _ => Err(self.mismatch(ty, json)),
            },
            Type::Number => {
                let text = match json {
                    // With serde_json's arbitrary_precision this is the number's exact text.
                    Json::Number(n) => n.as_str(),
                    Json::String(s) => s.as_str(),
                    _ => return Err(self.mismatch(ty, json)),
                };
                parse_number(text)
                    .map(Value::Number)
                    .map_err(|reason| CodecError::DecodeNumber {
                        path: self.path.to_path(),
                        reason,
                    })
            }
            Type::String => match json {
                Json::String(s) => Ok(Value::String(s.clone())),
                Json::Number(n) => Ok(Value::String(n.as_str().to_owned())),
                Json::Bool(b) => Ok(Value::String(b.to_string())),
                _ => Err(self.mismatch(ty, json)),
            },
            Type::List(elem) | Type::Set(elem) => {
                let Json::Array(items) = json else {
                    return Err(self.mismatch(ty, json));
                };
                let mut values = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    self.path.push_index(i);
                    values.push(self.value(item, elem)?);
                    self.path.pop();
                }
                Ok(if matches!(ty, Type::Set(_)) {
                    Value::set(values)
                } else {
                    Value::List(values)
                })
            }
            Type::Tuple(elems) => {
                let Json::Array(items) = json else {
                    return Err(self.mismatch(ty, json));
                };
                if items.len() != elems.len() {
                    return Err(CodecError::DecodeTuple {
                        path: self.path.to_path(),
                        expected: elems.len(),
                        found: items.len(),
                    });
                }
                let mut values = Vec::with_capacity(items.len());
                for (i, (item, elem)) in items.iter().zip(elems).enumerate() {
                    self.path.push_index(i);
                    values.push(self.value(item, elem)?);
                    self.path.pop();
                }
                Ok(Value::Tuple(values))
            }
            Type::Map(elem) => {
                let Json::Object(entries) = json else {
                    return Err(self.mismatch(ty, json));
                };
                let mut values = BTreeMap::new();
                for (key, item) in entries {
                    self.path.push(PathStep::Key(key.clone()));
                    let v = self.value(item, elem)?;
                    self.path.pop();
                    values.insert(key.clone(), v);
                }
                Ok(Value::Map(values))
            }
            Type::Object(attrs) => {
                let Json::Object(entries) = json else {
                    return Err(self.mismatch(ty, json));
                };
                let mut values = BTreeMap::new();
                for (name, item) in entries {
                    let Some(attr_ty) = attrs.get(name) else {
                        if self.lenient {
                            // Removed from the schema since this state was written.
                            continue;
                        }
                        return Err(self.object_error(format!("unsupported attribute {name:?}")));
                    };
                    self.path.push(PathStep::Attr(name.clone()));
                    let v = self.value(item, attr_ty)?;
                    self.path.pop();
                    values.insert(name.clone(), v);
                }
                for name in attrs.keys() {
                    if !values.contains_key(name) {
                        if !self.lenient {
                            return Err(self.object_error(format!("missing attribute {name:?}")));
                        }
                        // Added to the schema since this state was written.
                        values.insert(name.clone(), Value::Null);
                    }
                }
                Ok(Value::Object(values))
            }
        }
    }

    fn object_error(&self, reason: String) -> CodecError {
        CodecError::DecodeObject {
            path: self.path.to_path(),
            reason,
        }
    }

    /// `{"value": …, "type": …}`, the wrapper of a value in a dynamically typed position.
    fn dynamic(&mut self, json: &Json) -> Result<Value, CodecError> {
        let error = |this: &Self, reason: String| CodecError::DecodeDynamic {
            path: this.path.to_path(),
            reason,
        };
        let Json::Object(wrapper) = json else {
            return Err(error(
                self,
                format!(
                    "expected a {{\"value\", \"type\"}} object, found {}",
                    describe(json)
                ),
            ));
        };
        if let Some(key) = wrapper.keys().find(|k| *k != "value" && *k != "type") {
            return Err(error(self, format!("unexpected key {key:?}")));
        }
        let Some(type_json) = wrapper.get("type") else {
            return Err(error(self, "the type is missing".to_owned()));
        };
        let Some(value_json) = wrapper.get("value") else {
            return Err(error(self, "the value is missing".to_owned()));
        };
        let ty = type_from_json(type_json).map_err(|e| error(self, e.to_string()))?;
        let value = self.value(value_json, &ty)?;
        if ty == Type::Dynamic {
            // A wrapper that says "dynamic" wraps another dynamic value: nothing to add.
            return Ok(value);
        }
        Ok(Value::Dynamic(Box::new((ty, value))))
    }
}

struct Encoder {
    path: PathStack,
}

impl Encoder {
    fn value(&mut self, value: &Value, ty: &Type) -> Result<Json, CodecError> {
        match (value, ty) {
            (Value::Unknown(_), _) => Err(CodecError::EncodeUnknown {
                path: self.path.to_path(),
            }),
            (Value::Dynamic(d), Type::Dynamic) => {
                let (inner_ty, inner) = &**d;
                if *inner_ty == Type::Dynamic {
                    self.value(inner, ty)
                } else {
                    self.dynamic(inner_ty, inner)
                }
            }
            (Value::Null, _) => Ok(Json::Null),
            (other, Type::Dynamic) => {
                let inferred = infer_type(other);
                self.dynamic(&inferred, other)
            }
            // The schema's type wins over whatever type a dynamic wrapper recorded.
            (Value::Dynamic(d), _) => self.value(&d.1, ty),
            (Value::Bool(b), Type::Bool) => Ok(Json::Bool(*b)),
            (Value::Number(n), Type::Number) => {
                // Exact decimal text: serde_json keeps it verbatim (arbitrary_precision).
                let text = format_number(n);
                text.parse::<serde_json::Number>()
                    .map(Json::Number)
                    .map_err(|e| CodecError::WriteJson {
                        reason: format!("number {text}: {e}"),
                    })
            }
            (Value::String(s), Type::String) => Ok(Json::String(s.clone())),
            (Value::List(items), Type::List(elem)) | (Value::Set(items), Type::Set(elem)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    self.path.push_index(i);
                    out.push(self.value(item, elem)?);
                    self.path.pop();
                }
                Ok(Json::Array(out))
            }
            (Value::Tuple(items), Type::Tuple(elems)) => {
                if items.len() != elems.len() {
                    return Err(CodecError::EncodeTuple {
                        path: self.path.to_path(),
                        expected: elems.len(),
                        found: items.len(),
                    });
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, (item, elem)) in items.iter().zip(elems).enumerate() {
                    self.path.push_index(i);
                    out.push(self.value(item, elem)?);
                    self.path.pop();
                }
                Ok(Json::Array(out))
            }
            (Value::Map(entries), Type::Map(elem)) => {
                let mut out = Map::new();
                for (key, item) in entries {
                    self.path.push(PathStep::Key(key.clone()));
                    out.insert(key.clone(), self.value(item, elem)?);
                    self.path.pop();
                }
                Ok(Json::Object(out))
            }
            (Value::Object(values), Type::Object(attrs)) => {
                if let Some(extra) = values.keys().find(|k| !attrs.contains_key(*k)) {
                    return Err(self.object_error(format!("unsupported attribute {extra:?}")));
                }
                let mut out = Map::new();
                for (name, attr_ty) in attrs {
                    let Some(item) = values.get(name) else {
                        return Err(self.object_error(format!("missing attribute {name:?}")));
                    };
                    self.path.push(PathStep::Attr(name.clone()));
                    out.insert(name.clone(), self.value(item, attr_ty)?);
                    self.path.pop();
                }
                Ok(Json::Object(out))
            }
            _ => Err(CodecError::EncodeValue {
                path: self.path.to_path(),
                expected: ty.clone(),
                found: value_kind(value),
            }),
        }
    }

    fn object_error(&self, reason: String) -> CodecError {
        CodecError::EncodeObject {
            path: self.path.to_path(),
            reason,
        }
    }

    /// `{"value": …, "type": …}`, in go-cty's key order.
    fn dynamic(&mut self, ty: &Type, value: &Value) -> Result<Json, CodecError> {
        let mut out = Map::new();
        out.insert("value".to_owned(), self.value(value, ty)?);
        out.insert("type".to_owned(), type_to_json(ty));
        Ok(Json::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_digits() {
        let text = br#"{"n":100000000000000000000000000007,"f":0.1000000000000000000000000001}"#;
        let ty = Type::object([("n", Type::Number), ("f", Type::Number)]);
        let value = decode(text, &ty).expect("decode");
        let back = encode(&value, &ty).expect("encode");
        assert_eq!(
            String::from_utf8(back).expect("utf-8"),
            r#"{"f":0.1000000000000000000000000001,"n":100000000000000000000000000007}"#
        );
    }

    #[test]
    fn lenient_objects_fill_and_drop() {
        let ty = Type::object([
            ("kept", Type::String),
            ("added", Type::Number),
            (
                "nested",
                Type::list(Type::object([("a", Type::Bool), ("b", Type::Bool)])),
            ),
        ]);
        let text = br#"{"kept":"x","removed":1,"nested":[{"a":true,"gone":2}]}"#;
        let value = decode_lenient_object(text, &ty).expect("decode");
        let want = Value::object([
            ("kept", Value::string("x")),
            ("added", Value::Null),
            (
                "nested",
                Value::List(vec![Value::object([
                    ("a", Value::Bool(true)),
                    ("b", Value::Null),
                ])]),
            ),
        ]);
        assert_eq!(value, want);
        assert!(decode(text, &ty).is_err());
    }

    #[test]
    fn converts_primitives_like_go_cty() {
        let ty = Type::Tuple(vec![Type::Number, Type::Bool, Type::String, Type::String]);
        let value = decode(br#"["12.5","1",3.0,false]"#, &ty).expect("decode");
        assert_eq!(
            value,
            Value::Tuple(vec![
                Value::Number(parse_number("12.5").expect("number")),
                Value::Bool(true),
                Value::string("3.0"),
                Value::string("false"),
            ])
        );
    }

    #[test]
    fn dynamic_is_value_then_type() {
        let v = Value::Dynamic(Box::new((Type::list(Type::String), Value::List(vec![]))));
        let bytes = encode(&v, &Type::Dynamic).expect("encode");
        assert_eq!(
            String::from_utf8(bytes).expect("utf-8"),
            r#"{"value":[],"type":["list","string"]}"#
        );
    }

    #[test]
    fn unknown_is_an_error() {
        let ty = Type::object([("a", Type::String)]);
        let v = Value::object([("a", Value::unknown())]);
        let err = encode(&v, &ty).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "failed to encode value at a as JSON: the value is unknown"
        );
    }
}
