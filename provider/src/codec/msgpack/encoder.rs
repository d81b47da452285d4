//! Encoding values as msgpack, with the type directing it.

use bigdecimal::BigDecimal;
use gpufleet_engine::{
    path::PathStep,
    value::{Refinements, Type, Value},
};
use rmp::encode as enc;

use super::refinements::{
    KEY_LENGTH_MAX, KEY_LENGTH_MIN, KEY_NULLNESS, KEY_NUMBER_MAX, KEY_NUMBER_MIN,
    KEY_STRING_PREFIX, MAX_REFINEMENTS_LEN, REFINED_UNKNOWN_EXT,
};
use crate::codec::{
    CodecError, PathStack, format_number, infer_type, number_to_exact_f64, number_to_i64,
    type_to_json_bytes, value_kind,
};

/// go-cty truncates string prefixes longer than this when it encodes them, to stay within the
/// refinement limit ([`MAX_REFINEMENTS_LEN`]).
const MAX_PREFIX_LEN: usize = 256;

/// A string prefix as go-cty encodes it: one longer than 256 bytes is cut to at most 255
/// bytes and then loses its last character, which go-cty's `SafeKnownPrefix` drops because
/// the next character might combine with it. (Any shorter prefix of a true prefix is still
/// true, so this is safe for all text and byte-identical to go-cty for ASCII.)
fn cap_prefix(prefix: &str) -> &str {
    if prefix.len() <= MAX_PREFIX_LEN {
        return prefix;
    }
    let mut end = MAX_PREFIX_LEN - 1;
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    let cut = prefix.get(..end).unwrap_or_default();
    cut.char_indices()
        .next_back()
        .and_then(|(last, _)| cut.get(..last))
        .unwrap_or_default()
}

/// Encodes a value as msgpack of type `ty`.
///
/// The value must conform to the type, except that a [`Value::Dynamic`] in a position of a
/// concrete type is unwrapped, and any value in a dynamic position that is not already a
/// [`Value::Dynamic`] is written with its inferred type (see [`crate::codec::infer_type`]).
pub fn encode(value: &Value, ty: &Type) -> Result<Vec<u8>, CodecError> {
    let mut encoder = Encoder {
        out: Vec::new(),
        path: PathStack::default(),
    };
    encoder.value(value, ty)?;
    Ok(encoder.out)
}

struct Encoder {
    out: Vec<u8>,
    path: PathStack,
}

impl Encoder {
    fn write_error(&self, reason: impl std::fmt::Display) -> CodecError {
        CodecError::WriteMsgpack {
            path: self.path.to_path(),
            reason: reason.to_string(),
        }
    }

    fn len32(&self, len: usize) -> Result<u32, CodecError> {
        u32::try_from(len)
            .map_err(|_| self.write_error(format!("{len} items exceed msgpack's limit")))
    }

    fn mismatch(&self, value: &Value, ty: &Type) -> CodecError {
        CodecError::EncodeValue {
            path: self.path.to_path(),
            expected: ty.clone(),
            found: value_kind(value),
        }
    }

    fn value(&mut self, value: &Value, ty: &Type) -> Result<(), CodecError> {
        match (value, ty) {
            (Value::Dynamic(d), Type::Dynamic) => {
                let (inner_ty, inner) = &**d;
                if *inner_ty == Type::Dynamic {
                    self.value(inner, ty)
                } else {
                    self.dynamic(inner_ty, inner)
                }
            }
            // No type to go with these: go-cty writes them bare.
            (Value::Null, Type::Dynamic) => self.nil(),
            (Value::Unknown(_), Type::Dynamic) => self.plain_unknown(),
            (other, Type::Dynamic) => {
                let inferred = infer_type(other);
                self.dynamic(&inferred, other)
            }
            // The schema's type wins over whatever type a dynamic wrapper recorded.
            (Value::Dynamic(d), _) => self.value(&d.1, ty),
            (Value::Unknown(refinements), _) => self.unknown(refinements, ty),
            (Value::Null, _) => self.nil(),
            (Value::Bool(b), Type::Bool) => {
                enc::write_bool(&mut self.out, *b).map_err(|e| self.write_error(e))
            }
            (Value::Number(n), Type::Number) => self.number(n),
            (Value::String(s), Type::String) => self.string(s),
            (Value::List(items), Type::List(elem)) | (Value::Set(items), Type::Set(elem)) => {
                self.array_len(items.len())?;
                for (i, item) in items.iter().enumerate() {
                    self.path.push_index(i);
                    self.value(item, elem)?;
                    self.path.pop();
                }
                Ok(())
            }
            (Value::Tuple(items), Type::Tuple(elems)) => {
                if items.len() != elems.len() {
                    return Err(CodecError::EncodeTuple {
                        path: self.path.to_path(),
                        expected: elems.len(),
                        found: items.len(),
                    });
                }
                self.array_len(items.len())?;
                for (i, (item, elem)) in items.iter().zip(elems).enumerate() {
                    self.path.push_index(i);
                    self.value(item, elem)?;
                    self.path.pop();
                }
                Ok(())
            }
            (Value::Map(entries), Type::Map(elem)) => {
                self.map_len(entries.len())?;
                for (key, item) in entries {
                    self.path.push(PathStep::Key(key.clone()));
                    self.string(key)?;
                    self.value(item, elem)?;
                    self.path.pop();
                }
                Ok(())
            }
            (Value::Object(values), Type::Object(attrs)) => {
                if let Some(extra) = values.keys().find(|k| !attrs.contains_key(*k)) {
                    return Err(self.object_error(format!("unsupported attribute {extra:?}")));
                }
                self.map_len(attrs.len())?;
                // BTreeMap order is go's sort.Strings order: both compare bytes.
                for (name, attr_ty) in attrs {
                    let Some(item) = values.get(name) else {
                        return Err(self.object_error(format!("missing attribute {name:?}")));
                    };
                    self.path.push(PathStep::Attr(name.clone()));
                    self.string(name)?;
                    self.value(item, attr_ty)?;
                    self.path.pop();
                }
                Ok(())
            }
            _ => Err(self.mismatch(value, ty)),
        }
    }

    fn object_error(&self, reason: String) -> CodecError {
        CodecError::EncodeObject {
            path: self.path.to_path(),
            reason,
        }
    }

    fn nil(&mut self) -> Result<(), CodecError> {
        enc::write_nil(&mut self.out).map_err(|e| self.write_error(e))
    }

    fn string(&mut self, s: &str) -> Result<(), CodecError> {
        self.len32(s.len())?;
        enc::write_str(&mut self.out, s).map_err(|e| self.write_error(e))
    }

    fn array_len(&mut self, len: usize) -> Result<(), CodecError> {
        let len = self.len32(len)?;
        enc::write_array_len(&mut self.out, len)
            .map(drop)
            .map_err(|e| self.write_error(e))
    }

    fn map_len(&mut self, len: usize) -> Result<(), CodecError> {
        let len = self.len32(len)?;
        enc::write_map_len(&mut self.out, len)
            .map(drop)
            .map_err(|e| self.write_error(e))
    }

    /// A number as go-cty writes it: integer, exact float64, or else a decimal string.
    fn number(&mut self, n: &BigDecimal) -> Result<(), CodecError> {
        if let Some(i) = number_to_i64(n) {
            enc::write_sint(&mut self.out, i)
                .map(drop)
                .map_err(|e| self.write_error(e))
        } else if let Some(f) = number_to_exact_f64(n) {
            enc::write_f64(&mut self.out, f).map_err(|e| self.write_error(e))
        } else {
            self.string(&format_number(n))
        }
    }

    /// `[type JSON, value]`, the wrapper of a value in a dynamically typed position.
    fn dynamic(&mut self, ty: &Type, value: &Value) -> Result<(), CodecError> {
        self.array_len(2)?;
        let type_json = type_to_json_bytes(ty);
        self.len32(type_json.len())?;
        enc::write_bin(&mut self.out, &type_json).map_err(|e| self.write_error(e))?;
        self.value(value, ty)
    }

    /// go-cty's wholly unknown value: fixext1 of type 0 with one zero byte.
    fn plain_unknown(&mut self) -> Result<(), CodecError> {
        enc::write_ext_meta(&mut self.out, 1, 0).map_err(|e| self.write_error(e))?;
        self.out.push(0);
        Ok(())
    }

    /// An unknown value with whichever refinements apply to its type, in go-cty's order.
    fn unknown(&mut self, refinements: &Refinements, ty: &Type) -> Result<(), CodecError> {
        let mut payload = self.refinement_payload(refinements, ty, true)?;
        if payload.len() > MAX_REFINEMENTS_LEN as usize {
            // Terraform rejects bigger payloads. Only very long number bounds can get here
            // (prefixes are capped); dropping them loses precision of the plan, not truth.
            payload = self.refinement_payload(refinements, ty, false)?;
        }
        if payload.is_empty() {
            // Never an empty refinement map: go-cty writes the compact form instead.
            return self.plain_unknown();
        }
        let len = self.len32(payload.len())?;
        enc::write_ext_meta(&mut self.out, len, REFINED_UNKNOWN_EXT)
            .map_err(|e| self.write_error(e))?;
        self.out.extend_from_slice(&payload);
        Ok(())
    }

    /// The refinement map of an unknown value, or nothing if no refinement applies.
    fn refinement_payload(
        &self,
        refinements: &Refinements,
        ty: &Type,
        with_number_bounds: bool,
    ) -> Result<Vec<u8>, CodecError> {
        let mut body = Encoder {
            out: Vec::new(),
            path: PathStack::default(),
        };
        let mut count: u32 = 0;
        if refinements.not_null {
            count += 1;
            body.key(KEY_NULLNESS)?;
            enc::write_bool(&mut body.out, false).map_err(|e| self.write_error(e))?;
        }
        match ty {
            Type::Number if with_number_bounds => {
                for (key, bound) in [
                    (KEY_NUMBER_MIN, &refinements.number_lower),
                    (KEY_NUMBER_MAX, &refinements.number_upper),
                ] {
                    if let Some(bound) = bound {
                        count += 1;
                        body.key(key)?;
                        body.array_len(2)?;
                        body.number(&bound.value)?;
                        enc::write_bool(&mut body.out, bound.inclusive)
                            .map_err(|e| self.write_error(e))?;
                    }
                }
            }
            Type::String => {
                if let Some(prefix) = refinements
                    .string_prefix
                    .as_deref()
                    .map(cap_prefix)
                    .filter(|p| !p.is_empty())
                {
                    count += 1;
                    body.key(KEY_STRING_PREFIX)?;
                    body.string(prefix)?;
                }
            }
            Type::List(_) | Type::Set(_) | Type::Map(_) => {
                // A lower bound of zero says nothing, so go-cty leaves it out.
                let lower = refinements.length_lower.filter(|&n| n > 0);
                for (key, len) in [
                    (KEY_LENGTH_MIN, lower),
                    (KEY_LENGTH_MAX, refinements.length_upper),
                ] {
                    if let Some(len) = len {
                        count += 1;
                        body.key(key)?;
                        enc::write_uint(&mut body.out, len).map_err(|e| self.write_error(e))?;
                    }
                }
            }
            _ => {}
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut payload = Vec::with_capacity(body.out.len() + 5);
        enc::write_map_len(&mut payload, count).map_err(|e| self.write_error(e))?;
        payload.extend_from_slice(&body.out);
        Ok(payload)
    }

    fn key(&mut self, key: i64) -> Result<(), CodecError> {
        enc::write_sint(&mut self.out, key)
            .map(drop)
            .map_err(|e| self.write_error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_unknown_is_d40000() {
        let bytes = encode(&Value::unknown(), &Type::String).expect("encode");
        assert_eq!(bytes, [0xd4, 0, 0]);
    }
}
