//! [`Known`]: one attribute of a configuration, plan or state, decoded into a Rust type.
//!
//! A [`Value`] read for validation or planning is one of three things: not known until apply,
//! left out (null), or a value. Decoding an attribute once into `Known<T>` keeps those three
//! apart in the type, so the checks that read it match on them instead of asking the raw
//! value again by name.

use super::Value;

/// An attribute decoded into `T`, or why there is no `T` to read yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Known<T> {
    /// Only known after apply.
    Unknown,
    /// Left out.
    #[default]
    Null,
    /// Known, decoded.
    Value(T),
}

impl<T> Known<T> {
    /// Decodes `v` with `parse`. A known value `parse` refuses reads as [`Known::Unknown`]:
    /// the schema's validators report what is malformed, and the checks reading `T` skip it as
    /// they skip what apply has yet to decide.
    pub fn decode(v: &Value, parse: impl FnOnce(&Value) -> Option<T>) -> Known<T> {
        match v {
            Value::Null => Known::Null,
            Value::Unknown(_) => Known::Unknown,
            Value::Dynamic(d) => Known::decode(&d.1, parse),
            _ => parse(v).map_or(Known::Unknown, Known::Value),
        }
    }

    /// A `Known` of a reference to the value.
    pub fn as_ref(&self) -> Known<&T> {
        match self {
            Known::Unknown => Known::Unknown,
            Known::Null => Known::Null,
            Known::Value(x) => Known::Value(x),
        }
    }

    /// The value, when it is known and set.
    pub fn value(&self) -> Option<&T> {
        match self {
            Known::Value(x) => Some(x),
            Known::Unknown | Known::Null => None,
        }
    }

    /// The value, owned, when it is known and set.
    pub fn into_value(self) -> Option<T> {
        match self {
            Known::Value(x) => Some(x),
            Known::Unknown | Known::Null => None,
        }
    }

    /// Whether it is only known after apply.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Known::Unknown)
    }

    /// Whether it was left out.
    pub fn is_null(&self) -> bool {
        matches!(self, Known::Null)
    }

    /// Maps the value, keeping unknown and null.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Known<U> {
        match self {
            Known::Unknown => Known::Unknown,
            Known::Null => Known::Null,
            Known::Value(x) => Known::Value(f(x)),
        }
    }

    /// Null read as `default`: for an attribute whose schema default stands in for it.
    #[must_use]
    pub fn null_as(self, default: T) -> Known<T> {
        match self {
            Known::Null => Known::Value(default),
            other => other,
        }
    }
}

// Decoders of the attribute shapes every kind's configuration has.

/// A string attribute.
pub fn text(v: &Value) -> Known<String> {
    Known::decode(v, |x| x.as_str().map(str::to_owned))
}

/// A whole-number attribute; a fraction or a number beyond 64 bits reads as unknown.
pub fn whole(v: &Value) -> Known<i64> {
    Known::decode(v, Value::as_i64)
}

/// A bool attribute.
pub fn flag(v: &Value) -> Known<bool> {
    Known::decode(v, Value::as_bool)
}

/// A nested single block, built by `build` from the block's value.
pub fn object<T>(v: &Value, build: impl FnOnce(&Value) -> T) -> Known<T> {
    Known::decode(v, |o| o.as_object().map(|_| build(o)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: &Value) -> Known<String> {
        Known::decode(v, |x| x.as_str().map(str::to_owned))
    }

    #[test]
    fn decode_keeps_unknown_null_and_value_apart() {
        assert_eq!(text(&Value::unknown()), Known::Unknown);
        assert_eq!(text(&Value::unknown_not_null()), Known::Unknown);
        assert_eq!(text(&Value::Null), Known::Null);
        assert_eq!(text(&Value::string("a")), Known::Value("a".to_owned()));
    }

    #[test]
    fn a_value_the_parse_refuses_reads_as_unknown() {
        assert_eq!(text(&Value::int(1)), Known::Unknown);
        let whole = |v: &Value| Known::decode(v, Value::as_i64);
        assert_eq!(whole(&Value::int(3)), Known::Value(3));
        assert_eq!(whole(&Value::string("3")), Known::Unknown);
    }

    #[test]
    fn a_block_decodes_only_from_an_object() {
        let block = |v: &Value| object(v, |o| text(o.get("a")));
        assert_eq!(block(&Value::Null), Known::Null);
        assert_eq!(block(&Value::unknown()), Known::Unknown);
        assert_eq!(block(&Value::string("a")), Known::Unknown);
        let set = Value::object([("a", Value::string("x"))]);
        assert_eq!(block(&set), Known::Value(Known::Value("x".to_owned())));
    }

    #[test]
    fn dynamic_values_decode_what_they_carry() {
        use crate::value::Type;
        let d = |v: Value| Value::Dynamic(Box::new((Type::String, v)));
        assert_eq!(text(&d(Value::string("a"))), Known::Value("a".to_owned()));
        assert_eq!(text(&d(Value::Null)), Known::Null);
        assert_eq!(text(&d(Value::unknown())), Known::Unknown);
    }

    #[test]
    fn helpers() {
        let k = Known::Value(2);
        assert_eq!(k.value(), Some(&2));
        assert_eq!(k.as_ref(), Known::Value(&2));
        assert_eq!(k.map(|n| n * 2), Known::Value(4));
        assert_eq!(k.into_value(), Some(2));
        assert!(Known::<i64>::Unknown.is_unknown() && !Known::<i64>::Unknown.is_null());
        assert!(Known::<i64>::Null.is_null() && Known::<i64>::Null.value().is_none());
        assert_eq!(Known::<i64>::Unknown.map(|n| n + 1), Known::Unknown);
        assert_eq!(Known::Null.null_as(7), Known::Value(7));
        assert_eq!(Known::Unknown.null_as(7), Known::Unknown);
        assert_eq!(Known::Value(1).null_as(7), Known::Value(1));
        assert_eq!(Known::<i64>::default(), Known::Null);
    }
}
