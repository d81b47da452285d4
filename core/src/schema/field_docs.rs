//! Descriptions of the fields of object-typed values.
//!
//! A plain attribute of an object type (such as a data source's `list(object({...}))` result)
//! and a function's result have no per-field descriptions in the protocol, but their docs
//! should still say what each field holds. [`FieldDocs`] keeps those descriptions next to the
//! attribute or signature they belong to.

use std::collections::BTreeMap;

use crate::value::Type;

/// Descriptions of the fields of an object-typed value, by dotted path relative to the value
/// (`name`, `mig_profiles.name`). Lists, sets and maps add no path segment, so the fields of
/// a `list(object({...}))` are described as if it were the object itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldDocs(BTreeMap<String, &'static str>);

impl FieldDocs {
    /// No descriptions.
    pub fn new() -> FieldDocs {
        FieldDocs::default()
    }

    /// Adds `fields` (name, description) of the object at `under` (`""`: the value itself).
    #[must_use]
    pub fn fields(mut self, under: &str, fields: &[(&str, &'static str)]) -> FieldDocs {
        for (name, description) in fields {
            let path = if under.is_empty() {
                (*name).to_owned()
            } else {
                format!("{under}.{name}")
            };
            self.0.insert(path, description);
        }
        self
    }

    /// The description of the field at `path`; empty when there is none.
    pub fn get(&self, path: &str) -> &'static str {
        self.0.get(path).copied().unwrap_or("")
    }

    /// Every described path.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every field path of the objects inside `ty` (looking through lists, sets and maps),
    /// depth first: the paths descriptions are expected for.
    pub fn field_paths(ty: &Type) -> Vec<String> {
        let mut out = Vec::new();
        collect(ty, "", &mut out);
        out
    }
}

fn collect(ty: &Type, prefix: &str, out: &mut Vec<String>) {
    match ty {
        Type::Object(fields) => {
            for (name, field) in fields {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                out.push(path.clone());
                collect(field, &path, out);
            }
        }
        Type::List(e) | Type::Set(e) | Type::Map(e) => collect(e, prefix, out),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_look_through_collections() {
        let ty = Type::list(Type::object([
            ("a", Type::String),
            ("inner", Type::map(Type::object([("b", Type::Number)]))),
        ]));
        assert_eq!(FieldDocs::field_paths(&ty), ["a", "inner", "inner.b"]);
    }

    #[test]
    fn fields_nest_under_a_path() {
        let docs = FieldDocs::new()
            .fields("", &[("a", "A.")])
            .fields("inner", &[("b", "B.")]);
        assert_eq!(docs.get("a"), "A.");
        assert_eq!(docs.get("inner.b"), "B.");
        assert_eq!(docs.get("inner"), "");
        assert_eq!(docs.paths().collect::<Vec<_>>(), ["a", "inner.b"]);
    }
}
