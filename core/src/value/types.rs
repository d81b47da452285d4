//! The type system of Terraform values (cty types).
//!
//! Types are needed to decode the wire format (msgpack is schema-directed) and to check that
//! a value conforms to a schema. They never carry behaviour of their own.

use std::{collections::BTreeMap, fmt};

/// A cty type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Type {
    /// A UTF-8 string.
    String,
    /// An arbitrary-precision decimal number.
    Number,
    /// `true` or `false`.
    Bool,
    /// The dynamic pseudo-type: the concrete type travels with the value.
    Dynamic,
    /// An ordered sequence of one element type.
    List(Box<Type>),
    /// An unordered collection of distinct values of one element type.
    Set(Box<Type>),
    /// String keys to values of one element type.
    Map(Box<Type>),
    /// Named attributes, each with its own type.
    Object(BTreeMap<String, Type>),
    /// A fixed-length sequence, each element with its own type.
    Tuple(Vec<Type>),
}

impl Type {
    /// `list(elem)`.
    pub fn list(elem: Type) -> Type {
        Type::List(Box::new(elem))
    }

    /// `set(elem)`.
    pub fn set(elem: Type) -> Type {
        Type::Set(Box::new(elem))
    }

    /// `map(elem)`.
    pub fn map(elem: Type) -> Type {
        Type::Map(Box::new(elem))
    }

    /// `object({...})` from `(name, type)` pairs.
    pub fn object<I, S>(attrs: I) -> Type
    where
        I: IntoIterator<Item = (S, Type)>,
        S: Into<String>,
    {
        Type::Object(attrs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// Whether the type is, or contains, the dynamic pseudo-type.
    pub fn has_dynamic(&self) -> bool {
        match self {
            Type::Dynamic => true,
            Type::String | Type::Number | Type::Bool => false,
            Type::List(e) | Type::Set(e) | Type::Map(e) => e.has_dynamic(),
            Type::Object(attrs) => attrs.values().any(Type::has_dynamic),
            Type::Tuple(elems) => elems.iter().any(Type::has_dynamic),
        }
    }

    /// Whether this is a primitive type (string, number or bool).
    pub fn is_primitive(&self) -> bool {
        matches!(self, Type::String | Type::Number | Type::Bool)
    }
}

impl fmt::Display for Type {
    /// Renders the type the way Terraform's language writes it, for diagnostics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::String => f.write_str("string"),
            Type::Number => f.write_str("number"),
            Type::Bool => f.write_str("bool"),
            Type::Dynamic => f.write_str("any"),
            Type::List(e) => write!(f, "list({e})"),
            Type::Set(e) => write!(f, "set({e})"),
            Type::Map(e) => write!(f, "map({e})"),
            Type::Object(attrs) => {
                f.write_str("object({")?;
                for (i, (k, v)) in attrs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                f.write_str("})")
            }
            Type::Tuple(elems) => {
                f.write_str("tuple([")?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("])")
            }
        }
    }
}
