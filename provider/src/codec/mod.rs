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

pub mod json;
pub mod msgpack;
pub mod type_json;

use std::{collections::BTreeMap, fmt};

use bigdecimal::{
    BigDecimal, ToPrimitive, Zero,
    num_bigint::{BigInt, Sign},
};
use gpufleet_engine::{
    path::{AttrPath, PathStep},
    value::{Type, Value},
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

/// The largest decimal exponent (in either direction) and the most significant digits a
/// decoded number may have. go-cty keeps 512-bit mantissas (about 155 digits), and the
/// smallest float64 needs 1074 decimal places, so these leave room for every real number
/// while keeping `1e999999999` from turning into a billion-digit string later.
pub(crate) const MAX_NUMBER_EXPONENT: i64 = 10_000;
/// See [`MAX_NUMBER_EXPONENT`].
pub(crate) const MAX_NUMBER_DIGITS: usize = 10_000;

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

/// Infers the type of a value, for encoding it in a dynamically typed position.
///
/// A [`Value::Dynamic`] carries its type; null and unknown values infer as dynamic. Elements
/// of a collection are unified: nulls and unknowns take their siblings' type, and siblings
/// whose types disagree make the element type dynamic (each element then carries its own
/// type on the wire).
pub fn infer_type(value: &Value) -> Type {
    infer(value).into_type()
}

/// A type being inferred. Unlike [`Type`] it tells "nothing known yet" (a null or unknown,
/// which fits any sibling) apart from "dynamic" (siblings disagree, or a carried type says
/// so), which no sibling can make concrete again.
enum Inferred {
    Free,
    Dynamic,
    Primitive(Type),
    List(Box<Inferred>),
    Set(Box<Inferred>),
    Map(Box<Inferred>),
    Tuple(Vec<Inferred>),
    Object(BTreeMap<String, Inferred>),
}

impl Inferred {
    fn from_type(ty: &Type) -> Inferred {
        match ty {
            Type::Dynamic => Inferred::Dynamic,
            Type::String | Type::Number | Type::Bool => Inferred::Primitive(ty.clone()),
            Type::List(e) => Inferred::List(Box::new(Inferred::from_type(e))),
            Type::Set(e) => Inferred::Set(Box::new(Inferred::from_type(e))),
            Type::Map(e) => Inferred::Map(Box::new(Inferred::from_type(e))),
            Type::Tuple(elems) => Inferred::Tuple(elems.iter().map(Inferred::from_type).collect()),
            Type::Object(attrs) => Inferred::Object(
                attrs
                    .iter()
                    .map(|(k, t)| (k.clone(), Inferred::from_type(t)))
                    .collect(),
            ),
        }
    }

    fn into_type(self) -> Type {
        match self {
            Inferred::Free | Inferred::Dynamic => Type::Dynamic,
            Inferred::Primitive(t) => t,
            Inferred::List(e) => Type::list(e.into_type()),
            Inferred::Set(e) => Type::set(e.into_type()),
            Inferred::Map(e) => Type::map(e.into_type()),
            Inferred::Tuple(elems) => {
                Type::Tuple(elems.into_iter().map(Inferred::into_type).collect())
            }
            Inferred::Object(attrs) => {
                Type::Object(attrs.into_iter().map(|(k, t)| (k, t.into_type())).collect())
            }
        }
    }

    /// The one type that fits both, or dynamic if they disagree.
    fn unify(self, other: Inferred) -> Inferred {
        use Inferred as I;
        match (self, other) {
            (I::Free, t) | (t, I::Free) => t,
            (I::Primitive(a), I::Primitive(b)) if a == b => I::Primitive(a),
            (I::List(a), I::List(b)) => I::List(Box::new(a.unify(*b))),
            (I::Set(a), I::Set(b)) => I::Set(Box::new(a.unify(*b))),
            (I::Map(a), I::Map(b)) => I::Map(Box::new(a.unify(*b))),
            (I::Tuple(a), I::Tuple(b)) if a.len() == b.len() => {
                I::Tuple(a.into_iter().zip(b).map(|(x, y)| x.unify(y)).collect())
            }
            (I::Object(a), I::Object(b)) if a.keys().eq(b.keys()) => I::Object(
                a.into_iter()
                    .zip(b)
                    .map(|((k, x), (_, y))| (k, x.unify(y)))
                    .collect(),
            ),
            _ => I::Dynamic,
        }
    }
}

fn infer(value: &Value) -> Inferred {
    match value {
        Value::Null | Value::Unknown(_) => Inferred::Free,
        Value::Bool(_) => Inferred::Primitive(Type::Bool),
        Value::Number(_) => Inferred::Primitive(Type::Number),
        Value::String(_) => Inferred::Primitive(Type::String),
        Value::List(items) => Inferred::List(Box::new(infer_elements(items.iter()))),
        Value::Set(items) => Inferred::Set(Box::new(infer_elements(items.iter()))),
        Value::Map(entries) => Inferred::Map(Box::new(infer_elements(entries.values()))),
        Value::Tuple(items) => Inferred::Tuple(items.iter().map(infer).collect()),
        Value::Object(attrs) => {
            Inferred::Object(attrs.iter().map(|(k, v)| (k.clone(), infer(v))).collect())
        }
        Value::Dynamic(d) => Inferred::from_type(&d.0),
    }
}

fn infer_elements<'a>(values: impl Iterator<Item = &'a Value>) -> Inferred {
    values.fold(Inferred::Free, |acc, v| acc.unify(infer(v)))
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

// ---------------------------------------------------------------------------------------------
// Numbers, shared by both value codecs.
// ---------------------------------------------------------------------------------------------

/// Parses a decimal number the way go-cty's `ParseNumberVal` accepts it (`[+-]digits[.digits]`
/// with an optional `e` exponent), exactly, within the size limits above.
///
/// Infinities, NaN and go's binary `p` exponents are rejected: a [`BigDecimal`] cannot hold
/// the first two and Terraform never writes the third.
pub(crate) fn parse_number(text: &str) -> Result<BigDecimal, String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut digits: Vec<u8> = Vec::new();
    let mut int_digits = 0usize;
    let mut frac_digits = 0usize;
    while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
        digits.push(b);
        int_digits += 1;
        i += 1;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
            digits.push(b);
            frac_digits += 1;
            i += 1;
        }
    }
    if int_digits + frac_digits == 0 {
        return Err(format!("{text:?} is not a number"));
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_negative = match bytes.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
            // Saturate: anything this large is rejected by the range check below anyway.
            exponent = exponent
                .saturating_mul(10)
                .saturating_add(i64::from(b - b'0'));
            i += 1;
        }
        if i == start {
            return Err(format!("{text:?} is not a number"));
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != bytes.len() {
        return Err(format!("{text:?} is not a number"));
    }

    // Normalise: drop leading zeros (they carry nothing) and trailing zeros (into the exponent).
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Ok(BigDecimal::zero());
    };
    let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(first);
    let significant = digits.get(first..=last).unwrap_or_default();
    if significant.len() > MAX_NUMBER_DIGITS {
        return Err(format!(
            "more than {MAX_NUMBER_DIGITS} significant digits are not supported"
        ));
    }
    let trailing_zeros = digits.len() - 1 - last;
    // value = significant * 10^(exponent - frac_digits + trailing_zeros)
    let exp10 = exponent
        .saturating_sub(i64::try_from(frac_digits).unwrap_or(i64::MAX))
        .saturating_add(i64::try_from(trailing_zeros).unwrap_or(i64::MAX));
    check_exponent(exp10, significant.len())?;
    let mut mantissa =
        BigInt::parse_bytes(significant, 10).ok_or_else(|| format!("{text:?} is not a number"))?;
    if negative {
        mantissa = -mantissa;
    }
    Ok(BigDecimal::new(mantissa, -exp10))
}

/// Rejects numbers whose decimal exponent is outside the supported range.
fn check_exponent(exp10: i64, digit_count: usize) -> Result<(), String> {
    let adjusted = exp10.saturating_add(i64::try_from(digit_count).unwrap_or(i64::MAX));
    if exp10 < -MAX_NUMBER_EXPONENT || adjusted > MAX_NUMBER_EXPONENT {
        return Err(format!(
            "numbers beyond 1e±{MAX_NUMBER_EXPONENT} are not supported"
        ));
    }
    Ok(())
}

/// A number as a sign-carrying mantissa without trailing zeros and a power of ten, so that
/// the value is `mantissa * 10^exp10`. Zero is `(0, 0)`.
fn decompose(n: &BigDecimal) -> (BigInt, i64) {
    let (mantissa, scale) = n.normalized().into_bigint_and_exponent();
    if mantissa.is_zero() {
        return (mantissa, 0);
    }
    (mantissa, scale.saturating_neg())
}

/// The number as an `i64`, if it is an integer in range.
pub(crate) fn number_to_i64(n: &BigDecimal) -> Option<i64> {
    let (mantissa, exp10) = decompose(n);
    if exp10 < 0 {
        return None;
    }
    if exp10 > 18 {
        // Any non-zero mantissa times 10^19 is out of range; zero was normalised to exp 0.
        return None;
    }
    let scaled = mantissa * BigInt::from(10u64.pow(u32::try_from(exp10).ok()?));
    scaled.to_i64()
}

/// The number as an `f64`, if that `f64` is exactly the same number.
pub(crate) fn number_to_exact_f64(n: &BigDecimal) -> Option<f64> {
    let (mantissa, exp10) = decompose(n);
    if mantissa.is_zero() {
        return Some(0.0);
    }
    let digits = i64::try_from(mantissa.magnitude().to_string().len()).ok()?;
    let adjusted = exp10.saturating_add(digits);
    // Outside float64's range (about 4.9e-324 ..= 1.8e308) no value can match.
    if !(-330..=310).contains(&adjusted) {
        return None;
    }
    // Rust's float parser rounds correctly, so this is the nearest f64; keep it only if it is
    // the very same number, not merely the shortest representation that rounds to it.
    let f: f64 = format!("{mantissa}e{exp10}").parse().ok()?;
    if !f.is_finite() {
        return None;
    }
    (exact_f64(f)? == *n).then_some(f)
}

/// The exact decimal value of a finite `f64` (every binary fraction is a finite decimal).
pub(crate) fn exact_f64(f: f64) -> Option<BigDecimal> {
    if !f.is_finite() {
        return None;
    }
    if f == 0.0 {
        return Some(BigDecimal::zero());
    }
    let bits = f.to_bits();
    let negative = bits >> 63 == 1;
    let biased = i64::try_from((bits >> 52) & 0x7ff).ok()?;
    let fraction = bits & ((1u64 << 52) - 1);
    // value = mantissa * 2^exp2
    let (mantissa, exp2) = if biased == 0 {
        (fraction, -1074i64)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    let sign = if negative { Sign::Minus } else { Sign::Plus };
    let m = BigInt::from_biguint(sign, mantissa.into());
    if exp2 >= 0 {
        Some(BigDecimal::new(m << usize::try_from(exp2).ok()?, 0))
    } else {
        // m / 2^k == m * 5^k / 10^k
        let k = u32::try_from(-exp2).ok()?;
        Some(BigDecimal::new(m * BigInt::from(5u8).pow(k), i64::from(k)))
    }
}

/// Renders a number as go-cty does (`big.Float.Text('f', -1)`): plain decimal notation with no
/// exponent and no trailing fractional zeros. Numbers too long for that (only ever built
/// in-process, never decoded) use `e` notation, which go-cty and JSON read just as well.
pub(crate) fn format_number(n: &BigDecimal) -> String {
    let (mantissa, exp10) = decompose(n);
    let negative = mantissa.sign() == Sign::Minus;
    let digits = mantissa.magnitude().to_string();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if exp10.unsigned_abs() > MAX_NUMBER_EXPONENT.unsigned_abs() * 2 {
        let (head, tail) = digits.split_at(1);
        out.push_str(head);
        if !tail.is_empty() {
            out.push('.');
            out.push_str(tail);
        }
        out.push('e');
        out.push_str(&exp10.saturating_add(len - 1).to_string());
        return out;
    }
    if exp10 >= 0 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n(
            '0',
            usize::try_from(exp10).unwrap_or(0),
        ));
    } else {
        let frac = usize::try_from(-exp10).unwrap_or(0);
        if digits.len() > frac {
            let (int_part, frac_part) = digits.split_at(digits.len() - frac);
            out.push_str(int_part);
            out.push('.');
            out.push_str(frac_part);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', frac - digits.len()));
            out.push_str(&digits);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> BigDecimal {
        parse_number(s).expect("number")
    }

    #[test]
    fn parses_go_number_syntax() {
        assert_eq!(num("1.50"), num("1.5"));
        assert_eq!(num("-0.8e1"), BigDecimal::from(-8));
        assert_eq!(num(".5"), num("0.5"));
        assert_eq!(num("5."), BigDecimal::from(5));
        assert_eq!(num("+7"), BigDecimal::from(7));
        assert_eq!(num("0e999999999999999999999"), BigDecimal::zero());
        for bad in [
            "", "-", ".", "e5", "1e", "1e+", "Inf", "NaN", "1_000", " 1", "1 ", "0x10",
        ] {
            assert!(parse_number(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_number("1e999999999").is_err());
        assert!(parse_number("1e-999999999").is_err());
    }

    #[test]
    fn formats_like_go_text_f() {
        for (input, want) in [
            ("0", "0"),
            ("1.50", "1.5"),
            ("-0.001", "-0.001"),
            ("1e30", "1000000000000000000000000000000"),
            ("123.456", "123.456"),
            ("-1200", "-1200"),
        ] {
            assert_eq!(format_number(&num(input)), want);
        }
        let tiny = BigDecimal::new(BigInt::from(15), 30_000);
        assert_eq!(format_number(&tiny), "1.5e-29999");
    }

    #[test]
    fn exact_floats() {
        assert_eq!(number_to_exact_f64(&num("0.5")), Some(0.5));
        assert_eq!(number_to_exact_f64(&num("0.1")), None);
        assert_eq!(number_to_exact_f64(&num("1e300")), None);
        let max = exact_f64(f64::MAX).expect("finite");
        assert_eq!(number_to_exact_f64(&max), Some(f64::MAX));
        let tiny = exact_f64(f64::from_bits(1)).expect("finite");
        assert_eq!(number_to_exact_f64(&tiny), Some(f64::from_bits(1)));
        assert_eq!(number_to_i64(&num("9223372036854775807")), Some(i64::MAX));
        assert_eq!(number_to_i64(&num("9223372036854775808")), None);
        assert_eq!(number_to_i64(&num("1.5")), None);
        assert_eq!(number_to_i64(&num("12e2")), Some(1200));
    }

    #[test]
    fn infers_unified_types() {
        let v = Value::List(vec![Value::Null, Value::string("a")]);
        assert_eq!(infer_type(&v), Type::list(Type::String));
        let mixed = Value::List(vec![Value::int(1), Value::string("a")]);
        assert_eq!(infer_type(&mixed), Type::list(Type::Dynamic));
        assert_eq!(infer_type(&Value::List(vec![])), Type::list(Type::Dynamic));
    }
}
