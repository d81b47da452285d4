//! Wire codecs between Terraform's encodings and the engine's [`Value`]s.
//!
//! Terraform sends and expects values in go-cty's encodings, and this module follows them
//! byte for byte where it matters:
//!
//! - [`msgpack`]: the `DynamicValue.msgpack` encoding (go-cty `cty/msgpack`), the only one
//!   that can carry unknown values and their refinements.
//! - [`json`]: the JSON value encoding (go-cty `cty/json`), used for raw state in
//!   `UpgradeResourceState`; it cannot represent unknown values.
//! - [`type_json`]: the JSON encoding of types (go-cty `Type.MarshalJSON`), which both of
//!   the above embed wherever a value sits in a dynamically typed position.
//!
//! Every decoder takes untrusted bytes: it never panics, bounds nesting depth and the size of
//! numbers, and reports the attribute path of whatever it could not decode.

mod infer;
pub mod json;
pub mod msgpack;
mod number;
pub mod type_json;

use std::fmt;

use gpufleet_engine::{
    path::{AttrPath, PathStep},
    value::{Type, Value},
};

pub use infer::infer_type;
pub(crate) use number::{
    exact_f64, format_number, number_to_exact_f64, number_to_i64, parse_number,
};
pub use type_json::{type_from_json, type_from_json_bytes, type_to_json, type_to_json_bytes};

/// Why a value or type could not be encoded or decoded.
///
/// Each variant is named after the step that failed; `path` is where in the value it failed,
/// rendered the way Terraform writes references (`(root)` for the whole value).
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The input held no bytes at all. Callers decide what an empty `DynamicValue` means.
    #[error("failed to decode value: the input is empty")]
    DecodeEmpty,

    /// Bytes were left over after the top-level value.
    #[error("failed to decode value: {count} unexpected bytes after the value")]
    DecodeTrailing {
        /// How many bytes were left.
        count: usize,
    },

    /// The msgpack stream was truncated or malformed (bad marker, length past the end).
    #[error("failed to read msgpack at {}: {reason}", PathDisplay(path))]
    ReadMsgpack {
        /// Where the read failed.
        path: AttrPath,
        /// What was wrong with the bytes.
        reason: String,
    },

    /// The JSON text was not valid JSON.
    #[error("failed to parse JSON: {source}")]
    ParseJson {
        /// The parser's error, with line and column.
        #[from]
        source: serde_json::Error,
    },

    /// An encoded item was not of a kind the type at its position accepts.
    #[error("failed to decode {expected} at {}: found {found}", PathDisplay(path))]
    DecodeValue {
        /// Where the item was.
        path: AttrPath,
        /// The type that was expected there.
        expected: Type,
        /// What was found instead.
        found: String,
    },

    /// A string was not valid UTF-8.
    #[error(
        "failed to decode string at {}: it is not valid UTF-8",
        PathDisplay(path)
    )]
    DecodeString {
        /// Where the string was.
        path: AttrPath,
    },

    /// A number was malformed, not finite, or too large or precise to handle.
    #[error("failed to decode number at {}: {reason}", PathDisplay(path))]
    DecodeNumber {
        /// Where the number was.
        path: AttrPath,
        /// What was wrong with it.
        reason: String,
    },

    /// An object lacked an attribute of its type, or had one its type does not declare.
    #[error("failed to decode object at {}: {reason}", PathDisplay(path))]
    DecodeObject {
        /// The object's path.
        path: AttrPath,
        /// Which attribute was missing, unexpected or repeated.
        reason: String,
    },

    /// A tuple had the wrong number of elements.
    #[error(
        "failed to decode tuple at {}: expected {expected} elements, found {found}",
        PathDisplay(path)
    )]
    DecodeTuple {
        /// The tuple's path.
        path: AttrPath,
        /// How many elements its type has.
        expected: usize,
        /// How many were encoded.
        found: usize,
    },

    /// The refinements of an unknown value were malformed or do not fit its type.
    #[error(
        "failed to decode unknown value refinements at {}: {reason}",
        PathDisplay(path)
    )]
    DecodeRefinements {
        /// Where the unknown value was.
        path: AttrPath,
        /// What was wrong with the refinements.
        reason: String,
    },

    /// A value in a dynamically typed position lacked a well-formed type wrapper.
    #[error("failed to decode dynamic value at {}: {reason}", PathDisplay(path))]
    DecodeDynamic {
        /// Where the dynamic value was.
        path: AttrPath,
        /// What was wrong with the wrapper or the type it carried.
        reason: String,
    },

    /// A type's JSON description was malformed.
    #[error("failed to decode type: {reason}")]
    DecodeType {
        /// What was wrong with it.
        reason: String,
    },

    /// The input nested deeper than the decoder allows, which no real schema does.
    #[error(
        "failed to decode value at {}: nested deeper than {limit} levels",
        PathDisplay(path)
    )]
    DecodeDepth {
        /// Where the limit was hit.
        path: AttrPath,
        /// The limit.
        limit: usize,
    },

    /// A value did not match the type it was to be encoded as.
    #[error(
        "failed to encode value at {}: expected {expected}, found {found}",
        PathDisplay(path)
    )]
    EncodeValue {
        /// Where the value was.
        path: AttrPath,
        /// The type at that position.
        expected: Type,
        /// What kind of value was there.
        found: &'static str,
    },

    /// An object value's attributes did not match its type's.
    #[error("failed to encode object at {}: {reason}", PathDisplay(path))]
    EncodeObject {
        /// The object's path.
        path: AttrPath,
        /// Which attribute was missing or unexpected.
        reason: String,
    },

    /// A tuple value had a different number of elements than its type.
    #[error(
        "failed to encode tuple at {}: expected {expected} elements, found {found}",
        PathDisplay(path)
    )]
    EncodeTuple {
        /// The tuple's path.
        path: AttrPath,
        /// How many elements the type has.
        expected: usize,
        /// How many the value has.
        found: usize,
    },

    /// An unknown value was to be encoded as JSON, which cannot represent it.
    #[error(
        "failed to encode value at {} as JSON: the value is unknown",
        PathDisplay(path)
    )]
    EncodeUnknown {
        /// Where the unknown value was.
        path: AttrPath,
    },

    /// Writing JSON failed (which only a bug in this module could cause).
    #[error("failed to write JSON: {reason}")]
    WriteJson {
        /// Why.
        reason: String,
    },

    /// Writing msgpack failed (a collection or string too long for msgpack's 32-bit lengths).
    #[error("failed to write msgpack at {}: {reason}", PathDisplay(path))]
    WriteMsgpack {
        /// Where the write failed.
        path: AttrPath,
        /// Why.
        reason: String,
    },
}

/// Renders a path for an error message, naming the root explicitly.
struct PathDisplay<'a>(&'a AttrPath);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_root() {
            f.write_str("(root)")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// How deep decoders may recurse. Real schemas nest a few dozen levels at most; the limit only
/// keeps hostile input (dynamic values wrapping dynamic values) from exhausting the stack.
pub(crate) const MAX_DEPTH: usize = 128;

/// The path being walked by an encoder or decoder, kept as a stack so that the common,
/// successful case never allocates a path.
#[derive(Debug, Default)]
pub(crate) struct PathStack(Vec<PathStep>);

impl PathStack {
    pub(crate) fn push(&mut self, step: PathStep) {
        self.0.push(step);
    }

    pub(crate) fn push_index(&mut self, index: usize) {
        self.0
            .push(PathStep::Index(i64::try_from(index).unwrap_or(i64::MAX)));
    }

    pub(crate) fn pop(&mut self) {
        self.0.pop();
    }

    /// The current path, for an error.
    pub(crate) fn to_path(&self) -> AttrPath {
        AttrPath(self.0.clone())
    }
}

/// A short name for the kind of a value, for errors.
pub(crate) fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Unknown(_) => "an unknown value",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::List(_) => "a list",
        Value::Set(_) => "a set",
        Value::Tuple(_) => "a tuple",
        Value::Map(_) => "a map",
        Value::Object(_) => "an object",
        Value::Dynamic(_) => "a dynamic value",
    }
}
