//! The wire form of an unknown value's refinements, shared by the decoder and the encoder.

/// The extension type of an unknown value that carries refinements.
pub(super) const REFINED_UNKNOWN_EXT: i8 = 0x0c;
/// Refinement map keys, as go-cty's `unknown.go` numbers them.
pub(super) const KEY_NULLNESS: i64 = 1;
pub(super) const KEY_STRING_PREFIX: i64 = 2;
pub(super) const KEY_NUMBER_MIN: i64 = 3;
pub(super) const KEY_NUMBER_MAX: i64 = 4;
pub(super) const KEY_LENGTH_MIN: i64 = 5;
pub(super) const KEY_LENGTH_MAX: i64 = 6;
/// go-cty refuses refinement payloads above 1 KiB as an abuse of memory; so do we.
pub(super) const MAX_REFINEMENTS_LEN: u32 = 1024;
