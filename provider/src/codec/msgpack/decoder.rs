//! Decoding msgpack into values, with the type directing it.

use std::collections::BTreeMap;

use bigdecimal::{BigDecimal, num_bigint::BigInt};
use gpufleet_engine::{
    path::PathStep,
    value::{NumberBound, Refinements, Type, Value},
};
use rmp::{Marker, decode};

use super::markers::{describe, is_bin, is_ext, is_str};
use super::refinements::{
    KEY_LENGTH_MAX, KEY_LENGTH_MIN, KEY_NULLNESS, KEY_NUMBER_MAX, KEY_NUMBER_MIN,
    KEY_STRING_PREFIX, MAX_REFINEMENTS_LEN, REFINED_UNKNOWN_EXT,
};
use crate::codec::{
    CodecError, MAX_DEPTH, PathStack, exact_f64, parse_number, type_from_json_bytes,
};

/// Decodes a msgpack value of type `ty`.
///
/// An empty slice is an error: Terraform sends an empty `DynamicValue` to mean "no value",
/// which the caller must handle before decoding. Bytes after the value are an error too.
pub fn decode(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    if bytes.is_empty() {
        return Err(CodecError::DecodeEmpty);
    }
    let mut decoder = Decoder {
        input: bytes,
        path: PathStack::default(),
        depth: 0,
    };
    let value = decoder.value(ty)?;
    if !decoder.input.is_empty() {
        return Err(CodecError::DecodeTrailing {
            count: decoder.input.len(),
        });
    }
    Ok(value)
}

struct Decoder<'a> {
    /// What is left of the input; reading advances it.
    input: &'a [u8],
    path: PathStack,
    depth: usize,
}

impl<'a> Decoder<'a> {
    fn read_error(&self, reason: impl std::fmt::Display) -> CodecError {
        CodecError::ReadMsgpack {
            path: self.path.to_path(),
            reason: reason.to_string(),
        }
    }

    fn mismatch(&self, ty: &Type, marker: Marker) -> CodecError {
        CodecError::DecodeValue {
            path: self.path.to_path(),
            expected: ty.clone(),
            found: describe(marker),
        }
    }

    fn peek(&self) -> Result<Marker, CodecError> {
        self.input
            .first()
            .map(|&b| Marker::from_u8(b))
            .ok_or_else(|| self.read_error("unexpected end of input"))
    }

    /// Takes the next `len` raw bytes (the payload of a string, binary or extension).
    fn take(&mut self, len: u32) -> Result<&'a [u8], CodecError> {
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        match self.input.split_at_checked(len) {
            Some((head, rest)) => {
                self.input = rest;
                Ok(head)
            }
            None => Err(self.read_error(format!(
                "a {len}-byte item runs past the end of the input ({} bytes left)",
                self.input.len()
            ))),
        }
    }

    /// A capacity for `len` items that hostile lengths cannot inflate: each item takes at
    /// least one byte.
    fn capacity(&self, len: u32) -> usize {
        usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(self.input.len())
    }

    fn value(&mut self, ty: &Type) -> Result<Value, CodecError> {
        if self.depth >= MAX_DEPTH {
            return Err(CodecError::DecodeDepth {
                path: self.path.to_path(),
                limit: MAX_DEPTH,
            });
        }
        self.depth += 1;
        let result = self.value_inner(ty);
        self.depth -= 1;
        result
    }

    fn value_inner(&mut self, ty: &Type) -> Result<Value, CodecError> {
        let marker = self.peek()?;
        // As in go-cty: extensions mean "unknown" at any type, and are checked before the
        // dynamic wrapper because a wholly unknown dynamic value is written bare.
        if is_ext(marker) {
            return self.unknown(ty);
        }
        if *ty == Type::Dynamic {
            return self.dynamic();
        }
        if marker == Marker::Null {
            self.skip_marker();
            return Ok(Value::Null);
        }
        // Each kind has its own function so that a deep recursion only stacks the frames of
        // the kinds it passes through (unoptimised builds give every local its own slot).
        match ty {
            Type::Bool | Type::Number | Type::String => self.primitive(ty, marker),
            Type::List(elem) => self.list(ty, elem, marker).map(Value::List),
            Type::Set(elem) => self.list(ty, elem, marker).map(Value::set),
            Type::Tuple(elems) => self.tuple(ty, elems, marker),
            Type::Map(elem) => self.map(ty, elem, marker),
            Type::Object(attrs) => self.object(ty, attrs, marker),
            // Handled above; kept so the match needs no wildcard.
            Type::Dynamic => self.dynamic(),
        }
    }

    fn primitive(&mut self, ty: &Type, marker: Marker) -> Result<Value, CodecError> {
        match (ty, marker) {
            (Type::Bool, Marker::True | Marker::False) => {
                let b = decode::read_bool(&mut self.input).map_err(|e| self.read_error(e))?;
                Ok(Value::Bool(b))
            }
            (Type::Number, _) => self.number(marker).map(Value::Number),
            (Type::String, m) if is_str(m) || is_bin(m) => self.string().map(Value::String),
            _ => Err(self.mismatch(ty, marker)),
        }
    }

    fn list(&mut self, ty: &Type, elem: &Type, marker: Marker) -> Result<Vec<Value>, CodecError> {
        let len = self.array_len(ty, marker)?;
        let mut items = Vec::with_capacity(self.capacity(len));
        for i in 0..len {
            self.path
                .push_index(usize::try_from(i).unwrap_or(usize::MAX));
            items.push(self.value(elem)?);
            self.path.pop();
        }
        Ok(items)
    }

    fn tuple(&mut self, ty: &Type, elems: &[Type], marker: Marker) -> Result<Value, CodecError> {
        let len = self.array_len(ty, marker)?;
        if usize::try_from(len).ok() != Some(elems.len()) {
            return Err(CodecError::DecodeTuple {
                path: self.path.to_path(),
                expected: elems.len(),
                found: usize::try_from(len).unwrap_or(usize::MAX),
            });
        }
        let mut items = Vec::with_capacity(elems.len());
        for (i, elem) in elems.iter().enumerate() {
            self.path.push_index(i);
            items.push(self.value(elem)?);
            self.path.pop();
        }
        Ok(Value::Tuple(items))
    }

    fn map(&mut self, ty: &Type, elem: &Type, marker: Marker) -> Result<Value, CodecError> {
        let len = self.map_len(ty, marker)?;
        let mut entries = BTreeMap::new();
        for _ in 0..len {
            let key = self.key(ty)?;
            self.path.push(PathStep::Key(key.clone()));
            let v = self.value(elem)?;
            self.path.pop();
            // A repeated key replaces the earlier one, as in go-cty.
            entries.insert(key, v);
        }
        Ok(Value::Map(entries))
    }

    fn object(
        &mut self,
        ty: &Type,
        attrs: &BTreeMap<String, Type>,
        marker: Marker,
    ) -> Result<Value, CodecError> {
        let len = self.map_len(ty, marker)?;
        let mut values = BTreeMap::new();
        for _ in 0..len {
            let name = self.key(ty)?;
            let Some(attr_ty) = attrs.get(&name) else {
                return Err(self.object_error(format!("unsupported attribute {name:?}")));
            };
            if values.contains_key(&name) {
                return Err(self.object_error(format!("duplicate attribute {name:?}")));
            }
            self.path.push(PathStep::Attr(name.clone()));
            let v = self.value(attr_ty)?;
            self.path.pop();
            values.insert(name, v);
        }
        if let Some(missing) = attrs.keys().find(|k| !values.contains_key(*k)) {
            return Err(self.object_error(format!("missing attribute {missing:?}")));
        }
        Ok(Value::Object(values))
    }

    fn object_error(&self, reason: String) -> CodecError {
        CodecError::DecodeObject {
            path: self.path.to_path(),
            reason,
        }
    }

    /// Drops the one-byte marker just peeked (nil).
    fn skip_marker(&mut self) {
        self.input = self.input.get(1..).unwrap_or_default();
    }

    fn array_len(&mut self, ty: &Type, marker: Marker) -> Result<u32, CodecError> {
        match marker {
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                decode::read_array_len(&mut self.input).map_err(|e| self.read_error(e))
            }
            _ => Err(self.mismatch(ty, marker)),
        }
    }

    fn map_len(&mut self, ty: &Type, marker: Marker) -> Result<u32, CodecError> {
        match marker {
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                decode::read_map_len(&mut self.input).map_err(|e| self.read_error(e))
            }
            _ => Err(self.mismatch(ty, marker)),
        }
    }

    /// A map key or attribute name, which must be a string.
    fn key(&mut self, ty: &Type) -> Result<String, CodecError> {
        let marker = self.peek()?;
        if is_str(marker) || is_bin(marker) {
            self.string()
        } else {
            Err(CodecError::DecodeValue {
                path: self.path.to_path(),
                expected: ty.clone(),
                found: format!("{} as a key", describe(marker)),
            })
        }
    }

    /// The raw bytes of a string or binary item (go-cty reads either where it wants a string).
    fn str_bytes(&mut self) -> Result<&'a [u8], CodecError> {
        let marker = self.peek()?;
        let len = if is_bin(marker) {
            decode::read_bin_len(&mut self.input)
        } else {
            decode::read_str_len(&mut self.input)
        }
        .map_err(|e| self.read_error(e))?;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, CodecError> {
        let bytes = self.str_bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| CodecError::DecodeString {
            path: self.path.to_path(),
        })
    }

    fn number_error(&self, reason: impl Into<String>) -> CodecError {
        CodecError::DecodeNumber {
            path: self.path.to_path(),
            reason: reason.into(),
        }
    }

    fn number(&mut self, marker: Marker) -> Result<BigDecimal, CodecError> {
        match marker {
            Marker::FixPos(_)
            | Marker::FixNeg(_)
            | Marker::U8
            | Marker::U16
            | Marker::U32
            | Marker::U64
            | Marker::I8
            | Marker::I16
            | Marker::I32
            | Marker::I64 => {
                // i128 holds every msgpack integer, signed or unsigned.
                let n: i128 = decode::read_int(&mut self.input).map_err(|e| self.read_error(e))?;
                Ok(BigDecimal::new(BigInt::from(n), 0))
            }
            Marker::F32 => {
                let f = decode::read_f32(&mut self.input).map_err(|e| self.read_error(e))?;
                self.float(f64::from(f))
            }
            Marker::F64 => {
                let f = decode::read_f64(&mut self.input).map_err(|e| self.read_error(e))?;
                self.float(f)
            }
            m if is_str(m) || is_bin(m) => {
                let bytes = self.str_bytes()?;
                let text = std::str::from_utf8(bytes)
                    .map_err(|_| self.number_error("the number string is not valid UTF-8"))?;
                parse_number(text).map_err(|reason| self.number_error(reason))
            }
            m => Err(self.mismatch(&Type::Number, m)),
        }
    }

    /// A float's exact value. go-cty writes infinities as floats, but the engine's numbers
    /// are decimals and cannot hold them.
    fn float(&self, f: f64) -> Result<BigDecimal, CodecError> {
        exact_f64(f).ok_or_else(|| self.number_error(format!("{f} is not a finite number")))
    }

    /// A value in a dynamically typed position: nil, or `[type JSON, value]`.
    fn dynamic(&mut self) -> Result<Value, CodecError> {
        let marker = self.peek()?;
        let dyn_error = |this: &Self, reason: String| CodecError::DecodeDynamic {
            path: this.path.to_path(),
            reason,
        };
        match marker {
            Marker::Null => {
                self.skip_marker();
                Ok(Value::Null)
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                let len =
                    decode::read_array_len(&mut self.input).map_err(|e| self.read_error(e))?;
                if len != 2 {
                    return Err(dyn_error(
                        self,
                        format!("expected a [type, value] array of 2 elements, found {len}"),
                    ));
                }
                let ty = self.dynamic_type()?;
                let value = self.value(&ty)?;
                if ty == Type::Dynamic {
                    // A wrapper that says "dynamic" wraps another dynamic value: nothing to add.
                    return Ok(value);
                }
                Ok(Value::Dynamic(Box::new((ty, value))))
            }
            m => Err(dyn_error(
                self,
                format!("expected a [type, value] array, found {}", describe(m)),
            )),
        }
    }

    /// The type in a dynamic value's wrapper: its JSON, as binary (or, leniently, a string).
    fn dynamic_type(&mut self) -> Result<Type, CodecError> {
        let marker = self.peek()?;
        let reason = if is_bin(marker) || is_str(marker) {
            let type_json = self.str_bytes()?;
            match type_from_json_bytes(type_json) {
                Ok(ty) => return Ok(ty),
                Err(e) => e.to_string(),
            }
        } else {
            format!(
                "expected the type as JSON bytes, found {}",
                describe(marker)
            )
        };
        Err(CodecError::DecodeDynamic {
            path: self.path.to_path(),
            reason,
        })
    }

    /// An unknown value: any extension. Only type 12 with a body carries refinements.
    fn unknown(&mut self, ty: &Type) -> Result<Value, CodecError> {
        let meta = decode::read_ext_meta(&mut self.input).map_err(|e| self.read_error(e))?;
        let body = self.take(meta.size)?;
        // A body of at most one byte is go-cty's compact "wholly unknown". Other extension
        // types are taken as plain unknowns too (go-cty would reject them when they have a
        // body); dynamic positions never carry refinements, so go-cty ignores them there.
        if meta.size <= 1 || meta.typeid != REFINED_UNKNOWN_EXT || *ty == Type::Dynamic {
            return Ok(Value::unknown());
        }
        if meta.size > MAX_REFINEMENTS_LEN {
            return Err(self.refinement_error("the refinements exceed 1 KiB"));
        }
        self.refinements(body, ty)
    }

    fn refinement_error(&self, reason: impl Into<String>) -> CodecError {
        CodecError::DecodeRefinements {
            path: self.path.to_path(),
            reason: reason.into(),
        }
    }

    fn refinements(&self, body: &'a [u8], ty: &Type) -> Result<Value, CodecError> {
        let mut sub = Decoder {
            input: body,
            path: PathStack::default(),
            depth: 0,
        };
        let count = decode::read_map_len(&mut sub.input)
            .map_err(|_| self.refinement_error("the refinements are not a map"))?;
        let mut refinements = Refinements::default();
        let mut is_null = false;
        for _ in 0..count {
            let key: i64 = decode::read_int(&mut sub.input)
                .map_err(|_| self.refinement_error("a refinement key is not an integer"))?;
            match key {
                KEY_NULLNESS => {
                    let null = decode::read_bool(&mut sub.input)
                        .map_err(|_| self.refinement_error("the nullness is not a bool"))?;
                    // `true` would make the value null; go-cty collapses it to a known null.
                    if null {
                        is_null = true;
                    } else {
                        refinements.not_null = true;
                    }
                }
                KEY_STRING_PREFIX => {
                    if *ty != Type::String {
                        return Err(self.refinement_error(format!(
                            "a string prefix refinement for a value of type {ty}"
                        )));
                    }
                    let marker = sub
                        .peek()
                        .map_err(|_| self.refinement_error("the string prefix is missing"))?;
                    if !is_str(marker) && !is_bin(marker) {
                        return Err(self.refinement_error("the string prefix is not a string"));
                    }
                    let prefix = sub.string().map_err(|_| {
                        self.refinement_error("the string prefix is not a valid UTF-8 string")
                    })?;
                    refinements.string_prefix = (!prefix.is_empty()).then_some(prefix);
                }
                KEY_NUMBER_MIN | KEY_NUMBER_MAX => {
                    if *ty != Type::Number {
                        return Err(self.refinement_error(format!(
                            "a number bound refinement for a value of type {ty}"
                        )));
                    }
                    let bound = sub.number_bound().map_err(|_| {
                        self.refinement_error("a number bound is not [number, bool]")
                    })?;
                    if key == KEY_NUMBER_MIN {
                        refinements.number_lower = Some(bound);
                    } else {
                        refinements.number_upper = Some(bound);
                    }
                }
                KEY_LENGTH_MIN | KEY_LENGTH_MAX => {
                    if !matches!(ty, Type::List(_) | Type::Set(_) | Type::Map(_)) {
                        return Err(self.refinement_error(format!(
                            "a length bound refinement for a value of type {ty}"
                        )));
                    }
                    let len: u64 = decode::read_int(&mut sub.input).map_err(|_| {
                        self.refinement_error("a length bound is not a non-negative integer")
                    })?;
                    if key == KEY_LENGTH_MIN {
                        refinements.length_lower = (len > 0).then_some(len);
                    } else {
                        refinements.length_upper = Some(len);
                    }
                }
                // Keys from newer versions of Terraform: skip them, as go-cty does.
                _ => sub
                    .skip()
                    .map_err(|_| self.refinement_error("a refinement value is truncated"))?,
            }
        }
        // Bytes after the map are ignored on purpose (go-cty reserves them for future use).
        if is_null {
            return Ok(Value::Null);
        }
        Ok(Value::Unknown(Box::new(refinements)))
    }

    /// A number bound in a refinement: `[number, inclusive]`.
    fn number_bound(&mut self) -> Result<NumberBound, CodecError> {
        let marker = self.peek()?;
        if self.array_len(&Type::Number, marker)? != 2 {
            return Err(self.read_error("not a pair"));
        }
        let marker = self.peek()?;
        let value = self.number(marker)?;
        let inclusive = decode::read_bool(&mut self.input).map_err(|e| self.read_error(e))?;
        Ok(NumberBound { value, inclusive })
    }

    /// Skips one msgpack item of any kind, without recursion (its nesting is untrusted).
    fn skip(&mut self) -> Result<(), CodecError> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let marker = self.peek()?;
            let rd = &mut self.input;
            let result: Result<(), String> = match marker {
                Marker::Null => decode::read_nil(rd).map_err(|e| e.to_string()),
                Marker::True | Marker::False => {
                    decode::read_bool(rd).map(drop).map_err(|e| e.to_string())
                }
                Marker::FixPos(_)
                | Marker::FixNeg(_)
                | Marker::U8
                | Marker::U16
                | Marker::U32
                | Marker::U64
                | Marker::I8
                | Marker::I16
                | Marker::I32
                | Marker::I64 => decode::read_int::<i128, _>(rd)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                Marker::F32 => decode::read_f32(rd).map(drop).map_err(|e| e.to_string()),
                Marker::F64 => decode::read_f64(rd).map(drop).map_err(|e| e.to_string()),
                m if is_str(m) || is_bin(m) => {
                    self.str_bytes().map(drop).map_err(|e| e.to_string())
                }
                Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                    decode::read_array_len(rd)
                        .map(|n| pending += u64::from(n))
                        .map_err(|e| e.to_string())
                }
                Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => decode::read_map_len(rd)
                    .map(|n| pending += 2 * u64::from(n))
                    .map_err(|e| e.to_string()),
                m if is_ext(m) => match decode::read_ext_meta(rd) {
                    Ok(meta) => self.take(meta.size).map(drop).map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
                m => Err(format!("cannot skip {}", describe(m))),
            };
            result.map_err(|reason| self.read_error(reason))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_unknown_refinement_keys() {
        // {9: [1, {"a": nil}], 1: false} as a type-12 extension.
        let body = [0x82, 0x09, 0x92, 0x01, 0x81, 0xa1, b'a', 0xc0, 0x01, 0xc2];
        let mut bytes = vec![0xc7, u8::try_from(body.len()).expect("small"), 0x0c];
        bytes.extend_from_slice(&body);
        assert_eq!(
            decode(&bytes, &Type::String).expect("decode"),
            Value::unknown_not_null()
        );
    }

    #[test]
    fn rejects_hostile_lengths() {
        // An array claiming 4 billion elements in a handful of bytes.
        let bytes = [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(decode(&bytes, &Type::list(Type::Number)).is_err());
        // A string longer than the input.
        assert!(decode(&[0xdb, 0xff, 0xff, 0xff, 0xff], &Type::String).is_err());
    }

    #[test]
    fn bounds_nesting_of_dynamic_values() {
        // ["dynamic"-wrapped…] nested far beyond the limit.
        let type_json = br#"["list","dynamic"]"#;
        let mut bytes = Vec::new();
        for _ in 0..2000 {
            bytes.extend_from_slice(&[0x92, 0xc4, u8::try_from(type_json.len()).expect("small")]);
            bytes.extend_from_slice(type_json);
            bytes.push(0x91);
        }
        bytes.push(0xc0);
        let result = decode(&bytes, &Type::Dynamic);
        assert!(
            matches!(result, Err(CodecError::DecodeDepth { .. })),
            "{result:?}"
        );
    }
}
