//! Terraform values (cty values), independent of any wire format.
//!
//! The engine works on these; the provider crate owns the msgpack and JSON codecs that turn
//! wire bytes into them and back. Values are untyped except where the wire carries a type
//! (dynamic positions, see [`Value::Dynamic`]): the schema supplies types when needed.

pub mod known;
mod refinements;
mod types;

use std::collections::BTreeMap;

pub use bigdecimal::BigDecimal;
pub use known::Known;
pub use refinements::{NumberBound, Refinements};
pub use types::Type;

/// A number as people write it: no exponent, no trailing zeros (`2000`, `1832.5`), whatever
/// scale it was parsed or computed with, so messages read the same before and after a number
/// round-trips through state.
#[must_use]
pub fn display_number(n: &BigDecimal) -> String {
    n.normalized().to_plain_string()
}

/// A Terraform value.
///
/// Sets are kept sorted (by [`Ord`]) and free of duplicate known values, so that two sets with
/// the same members compare equal; build them with [`Value::set`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// The null value of whatever type the position has.
    Null,
    /// A value that will only be known after apply, with what is already known about it.
    Unknown(Box<Refinements>),
    /// A boolean.
    Bool(bool),
    /// An arbitrary-precision number; integers beyond 64 bits and long decimals are exact.
    Number(BigDecimal),
    /// A string.
    String(String),
    /// A list.
    List(Vec<Value>),
    /// A set, sorted and deduplicated.
    Set(Vec<Value>),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A map.
    Map(BTreeMap<String, Value>),
    /// An object.
    Object(BTreeMap<String, Value>),
    /// A value in a dynamically typed position, with the concrete type it travelled with.
    Dynamic(Box<(Type, Value)>),
}

impl Value {
    /// A wholly unknown value with no refinements.
    pub fn unknown() -> Value {
        Value::Unknown(Box::default())
    }

    /// An unknown value that is known not to be null.
    pub fn unknown_not_null() -> Value {
        Value::Unknown(Box::new(Refinements {
            not_null: true,
            ..Refinements::default()
        }))
    }

    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// A number value from an integer.
    pub fn int(n: i64) -> Value {
        Value::Number(BigDecimal::from(n))
    }

    /// A set value; sorts the members and removes duplicates among known ones.
    pub fn set(mut members: Vec<Value>) -> Value {
        members.sort();
        members.dedup_by(|a, b| a == b && a.is_wholly_known());
        Value::Set(members)
    }

    /// An object value from `(name, value)` pairs.
    pub fn object<I, S>(attrs: I) -> Value
    where
        I: IntoIterator<Item = (S, Value)>,
        S: Into<String>,
    {
        Value::Object(attrs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// Whether this is null.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Whether this value itself is unknown (not whether it contains unknowns).
    pub fn is_unknown(&self) -> bool {
        matches!(self, Value::Unknown(_))
    }

    /// Whether this value and everything inside it is known.
    pub fn is_wholly_known(&self) -> bool {
        match self {
            Value::Unknown(_) => false,
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => true,
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => {
                v.iter().all(Value::is_wholly_known)
            }
            Value::Map(m) | Value::Object(m) => m.values().all(Value::is_wholly_known),
            Value::Dynamic(d) => d.1.is_wholly_known(),
        }
    }

    /// The string, if this is a known string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Dynamic(d) => d.1.as_str(),
            _ => None,
        }
    }

    /// The boolean, if this is a known bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Dynamic(d) => d.1.as_bool(),
            _ => None,
        }
    }

    /// The number, if this is a known number.
    pub fn as_number(&self) -> Option<&BigDecimal> {
        match self {
            Value::Number(n) => Some(n),
            Value::Dynamic(d) => d.1.as_number(),
            _ => None,
        }
    }

    /// The number as an `i64`, if this is a known whole number in range.
    pub fn as_i64(&self) -> Option<i64> {
        use bigdecimal::ToPrimitive;
        let n = self.as_number()?;
        if !n.is_integer() {
            return None;
        }
        n.to_i64()
    }

    /// The attributes, if this is a known object.
    pub fn as_object(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Object(m) => Some(m),
            Value::Dynamic(d) => d.1.as_object(),
            _ => None,
        }
    }

    /// The elements, if this is a known list, set or tuple.
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) | Value::Set(v) | Value::Tuple(v) => Some(v),
            Value::Dynamic(d) => d.1.as_seq(),
            _ => None,
        }
    }

    /// The known strings of a list, set or tuple; empty for anything else.
    pub fn strings(&self) -> Vec<String> {
        self.as_seq()
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// The entries, if this is a known map.
    pub fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(m) => Some(m),
            Value::Dynamic(d) => d.1.as_map(),
            _ => None,
        }
    }

    /// An attribute of an object; `None` when this is not a known object or lacks it.
    pub fn attr(&self, name: &str) -> Option<&Value> {
        self.as_object()?.get(name)
    }

    /// An attribute of an object, treating a missing attribute (or a non-object) as null.
    pub fn get(&self, name: &str) -> &Value {
        const NULL: Value = Value::Null;
        self.attr(name).unwrap_or(&NULL)
    }

    /// Mutable access to an object's attributes.
    pub fn as_object_mut(&mut self) -> Option<&mut BTreeMap<String, Value>> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// Whether this object and `other` agree on every attribute of `names` (an update that
    /// changes none of a backend's attributes need not ask the backend).
    #[must_use]
    pub fn same_attrs(&self, other: &Value, names: &[&str]) -> bool {
        names.iter().all(|n| self.get(n) == other.get(n))
    }

    /// Takes each attribute of `names` that is unknown here from `prior`: what a change the
    /// backend never sees leaves as it was observed.
    pub fn keep_from(&mut self, prior: &Value, names: &[&str]) {
        for n in names {
            if self.get(n).is_unknown() {
                self.set_attr(n, prior.get(n).clone());
            }
        }
    }

    /// Sets attribute `name` of an object to `x`; leaves anything but a known object alone.
    pub fn set_attr(&mut self, name: &str, x: Value) {
        if let Some(m) = self.as_object_mut() {
            m.insert(name.to_owned(), x);
        }
    }

    /// This value with every unknown in it, at any depth, replaced by null: a state returned
    /// by apply, even after a failure, may hold no unknowns.
    #[must_use]
    pub fn with_unknowns_nulled(&self) -> Value {
        let nulled = |m: &BTreeMap<String, Value>| {
            m.iter()
                .map(|(k, x)| (k.clone(), x.with_unknowns_nulled()))
                .collect()
        };
        match self {
            Value::Unknown(_) => Value::Null,
            Value::Object(m) => Value::Object(nulled(m)),
            Value::Map(m) => Value::Map(nulled(m)),
            Value::List(xs) => Value::List(xs.iter().map(Value::with_unknowns_nulled).collect()),
            // Members that differed only in being unknown may now be equal.
            Value::Set(xs) => Value::set(xs.iter().map(Value::with_unknowns_nulled).collect()),
            Value::Tuple(xs) => Value::Tuple(xs.iter().map(Value::with_unknowns_nulled).collect()),
            Value::Dynamic(d) => {
                Value::Dynamic(Box::new((d.0.clone(), d.1.with_unknowns_nulled())))
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => self.clone(),
        }
    }

    /// Whether the value conforms to `ty` (structure only; unknown and null fit any type).
    pub fn conforms_to(&self, ty: &Type) -> bool {
        match (self, ty) {
            (Value::Null | Value::Unknown(_), _) => true,
            (Value::Dynamic(d), Type::Dynamic) => d.1.conforms_to(&d.0),
            (_, Type::Dynamic) => true,
            (Value::Bool(_), Type::Bool)
            | (Value::Number(_), Type::Number)
            | (Value::String(_), Type::String) => true,
            (Value::List(v), Type::List(e)) | (Value::Set(v), Type::Set(e)) => {
                v.iter().all(|x| x.conforms_to(e))
            }
            (Value::Map(m), Type::Map(e)) => m.values().all(|x| x.conforms_to(e)),
            (Value::Tuple(v), Type::Tuple(ts)) => {
                v.len() == ts.len() && v.iter().zip(ts).all(|(x, t)| x.conforms_to(t))
            }
            (Value::Object(m), Type::Object(ts)) => {
                m.len() == ts.len()
                    && ts
                        .iter()
                        .all(|(k, t)| m.get(k).is_some_and(|x| x.conforms_to(t)))
            }
            _ => false,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::int(n)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_compare_by_members() {
        let a = Value::set(vec![Value::string("b"), Value::string("a")]);
        let b = Value::set(vec![
            Value::string("a"),
            Value::string("b"),
            Value::string("a"),
        ]);
        assert_eq!(a, b);
    }

    #[test]
    fn unknowns_in_sets_are_not_merged() {
        let s = Value::set(vec![Value::unknown(), Value::unknown()]);
        assert_eq!(s.as_seq().map(<[Value]>::len), Some(2));
    }

    #[test]
    fn numbers_compare_numerically() {
        let a: BigDecimal = "1.50".parse().expect("number");
        let b: BigDecimal = "1.5".parse().expect("number");
        assert_eq!(Value::Number(a), Value::Number(b));
    }

    #[test]
    fn set_attr_sets_an_objects_attribute_only() {
        let mut v = Value::object([("a", Value::int(1))]);
        v.set_attr("a", Value::int(2));
        v.set_attr("b", Value::string("x"));
        assert_eq!(
            v,
            Value::object([("a", Value::int(2)), ("b", Value::string("x"))])
        );
        let mut null = Value::Null;
        null.set_attr("a", Value::int(1));
        assert_eq!(null, Value::Null);
    }

    #[test]
    fn same_attrs_compares_only_the_names_given() {
        let a = Value::object([("size", Value::int(1)), ("note", Value::string("x"))]);
        let b = Value::object([("size", Value::int(1)), ("note", Value::string("y"))]);
        assert!(a.same_attrs(&b, &["size"]));
        assert!(!a.same_attrs(&b, &["size", "note"]));
        assert!(!a.same_attrs(&Value::Null, &["size"]));
    }

    #[test]
    fn keep_from_fills_only_unknowns() {
        let prior = Value::object([
            ("status", Value::string("up")),
            ("ip", Value::string("10.0.0.1")),
        ]);
        let mut planned = Value::object([
            ("status", Value::unknown()),
            ("ip", Value::string("10.0.0.2")),
        ]);
        planned.keep_from(&prior, &["status", "ip"]);
        assert_eq!(
            planned,
            Value::object([
                ("status", Value::string("up")),
                ("ip", Value::string("10.0.0.2"))
            ])
        );
    }

    #[test]
    fn unknowns_are_nulled_at_any_depth() {
        let v = Value::object([
            ("id", Value::unknown()),
            ("name", Value::string("n")),
            (
                "ports",
                Value::List(vec![
                    Value::object([("port", Value::string("swp1")), ("vlan", Value::unknown())]),
                    Value::unknown_not_null(),
                ]),
            ),
            (
                "members",
                Value::set(vec![
                    Value::object([("host", Value::unknown())]),
                    Value::object([("host", Value::string("h1"))]),
                ]),
            ),
            (
                "labels",
                Value::Map(
                    [
                        ("a".to_owned(), Value::unknown()),
                        (
                            "b".to_owned(),
                            Value::Map([("c".to_owned(), Value::unknown())].into()),
                        ),
                    ]
                    .into(),
                ),
            ),
        ]);
        let want = Value::object([
            ("id", Value::Null),
            ("name", Value::string("n")),
            (
                "ports",
                Value::List(vec![
                    Value::object([("port", Value::string("swp1")), ("vlan", Value::Null)]),
                    Value::Null,
                ]),
            ),
            (
                "members",
                Value::set(vec![
                    Value::object([("host", Value::Null)]),
                    Value::object([("host", Value::string("h1"))]),
                ]),
            ),
            (
                "labels",
                Value::Map(
                    [
                        ("a".to_owned(), Value::Null),
                        (
                            "b".to_owned(),
                            Value::Map([("c".to_owned(), Value::Null)].into()),
                        ),
                    ]
                    .into(),
                ),
            ),
        ]);
        let got = v.with_unknowns_nulled();
        assert_eq!(got, want);
        assert!(got.is_wholly_known());
    }

    #[test]
    fn nulled_set_members_merge() {
        let s = Value::set(vec![Value::unknown(), Value::unknown(), Value::Null]);
        assert_eq!(s.with_unknowns_nulled(), Value::Set(vec![Value::Null]));
    }

    #[test]
    fn conformance() {
        let ty = Type::object([("a", Type::String), ("b", Type::list(Type::Number))]);
        let ok = Value::object([
            ("a", Value::string("x")),
            ("b", Value::List(vec![Value::int(1)])),
        ]);
        assert!(ok.conforms_to(&ty));
        let missing = Value::object([("a", Value::string("x"))]);
        assert!(!missing.conforms_to(&ty));
        let wrong = Value::object([("a", Value::int(1)), ("b", Value::Null)]);
        assert!(!wrong.conforms_to(&ty));
    }
}
