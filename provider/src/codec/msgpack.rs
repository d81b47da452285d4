//! The msgpack value encoding (go-cty `cty/msgpack`), Terraform's `DynamicValue.msgpack`.
//!
//! The encoding is directed by the type, which the receiver must already know:
//!
//! - null is `nil` whatever the type; a wholly unknown value is the extension `d4 00 00`
//!   (fixext1, type 0, one zero byte), and an unknown value with refinements is extension type
//!   12 holding a map of refinements (see [`Refinements`](gpufleet_engine::value::Refinements)).
//! - Strings are msgpack strings. Numbers are integers when they are integers that fit an
//!   `i64`, float64s when a float64 holds them exactly, and decimal strings otherwise, so no
//!   number ever loses precision.
//! - Lists, sets and tuples are arrays; maps and objects are maps (object attributes sorted by
//!   name, all of the type's attributes present).
//! - In a dynamically typed position the value travels with its type: a two-element array of
//!   the type's JSON (as binary) and the value encoded with that type. A null or wholly
//!   unknown value there is written bare, since it has no type of its own.
//!
//! Decoding accepts every integer and float width, numbers as strings, and strings as binary,
//! as go-cty's decoder does. Any extension value decodes as unknown.

mod decoder;
mod encoder;
mod markers;
mod refinements;

pub use decoder::decode;
pub use encoder::encode;
