//! Inferring the type of a value that sits in a dynamically typed position.

use std::collections::BTreeMap;

use gpufleet_engine::value::{Type, Value};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_unified_types() {
        let v = Value::List(vec![Value::Null, Value::string("a")]);
        assert_eq!(infer_type(&v), Type::list(Type::String));
        let mixed = Value::List(vec![Value::int(1), Value::string("a")]);
        assert_eq!(infer_type(&mixed), Type::list(Type::Dynamic));
        assert_eq!(infer_type(&Value::List(vec![])), Type::list(Type::Dynamic));
    }
}
