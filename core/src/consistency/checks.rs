//! The smaller checks Terraform runs on refreshed state, data source results and upgraded
//! state, and the building blocks the plan and apply checks share: type conformance, unknown
//! detection and write-only nullness.

use super::{PathError, attr_of, bare, entries, seq};
use crate::{
    path::AttrPath,
    schema::{AttrType, Attribute, Block, Nesting},
    value::{Type, Value},
};

/// Checks a result that must be wholly known and fit `schema_type`: a refreshed state, an
/// upgraded state or a data source result. `what` names the result in messages ("refreshed
/// state").
///
/// Null is accepted, because a refresh returns null when the object is gone. Use
/// [`assert_data_source_result`] for data sources, which must never be null.
pub fn assert_wholly_known_conformant(schema_type: &Type, v: &Value, what: &str) -> Vec<PathError> {
    let mut errs: Vec<PathError> = conformance_errors(schema_type, v)
        .into_iter()
        .map(|e| PathError {
            message: format!("{what} does not fit the schema: {}", e.message),
            ..e
        })
        .collect();
    // A value of the wrong shape makes unknown paths meaningless, as in Terraform.
    if errs.is_empty() {
        errs = unknown_errors(
            v,
            &format!("{what} contains an unknown value; all values must be known"),
        );
    }
    errs
}

/// Checks a data source result: not null, wholly known and conformant to `schema_type`.
pub fn assert_data_source_result(schema_type: &Type, v: &Value) -> Vec<PathError> {
    if bare(v).is_null() {
        return vec![PathError::new(
            &AttrPath::root(),
            "data source result is null; a data source must return an object",
        )];
    }
    assert_wholly_known_conformant(schema_type, v, "data source result")
}

/// Checks that every write-only attribute in `v` is null. Terraform requires this of planned,
/// applied and refreshed values, since write-only values are never stored.
pub fn assert_write_only_null(schema: &Block, v: &Value) -> Vec<PathError> {
    let mut errs = Vec::new();
    write_only_in_block(schema, v, &AttrPath::root(), &mut errs);
    errs
}

fn write_only_in_block(block: &Block, v: &Value, path: &AttrPath, errs: &mut Vec<PathError>) {
    if !matches!(bare(v), Value::Object(_)) {
        return;
    }
    for attr in &block.attributes {
        write_only_in_attr(
            attr,
            &attr_of(v, attr.name),
            &path.push_attr(attr.name),
            errs,
        );
    }
    for nb in &block.blocks {
        let bv = attr_of(v, nb.type_name);
        let path = path.push_attr(nb.type_name);
        for_each_element(nb.nesting, &bv, &path, |ev, ep| {
            write_only_in_block(&nb.block, ev, ep, errs);
        });
    }
}

fn write_only_in_attr(attr: &Attribute, v: &Value, path: &AttrPath, errs: &mut Vec<PathError>) {
    if attr.write_only {
        if !bare(v).is_null() {
            // The value itself is never printed: it is typically a secret.
            errs.push(PathError::new(
                path,
                "write-only attribute value must be null",
            ));
        }
        return;
    }
    if let AttrType::Nested {
        nesting,
        attributes,
    } = &attr.ty
    {
        for_each_element(*nesting, v, path, |ev, ep| {
            for a in attributes {
                write_only_in_attr(a, &attr_of(ev, a.name), &ep.push_attr(a.name), errs);
            }
        });
    }
}

/// Calls `f` on each object of a nested value (the value itself for single nesting), with its
/// path. Unknown and null values have no elements.
fn for_each_element(
    nesting: Nesting,
    v: &Value,
    path: &AttrPath,
    mut f: impl FnMut(&Value, &AttrPath),
) {
    match nesting {
        Nesting::Single | Nesting::Group => f(v, path),
        Nesting::List | Nesting::Set => {
            for (i, ev) in seq(v).unwrap_or_default().iter().enumerate() {
                f(ev, &path.push_index(i));
            }
        }
        Nesting::Map => {
            for (k, ev) in entries(v).into_iter().flatten() {
                f(ev, &path.push_key(k));
            }
        }
    }
}

/// One error at each unknown value in `v`, all with `message`. Set elements are addressed by
/// their position in the sorted set.
pub(super) fn unknown_errors(v: &Value, message: &str) -> Vec<PathError> {
    let mut errs = Vec::new();
    walk_unknowns(v, &AttrPath::root(), &mut |p| {
        errs.push(PathError::new(p, message));
    });
    errs
}

fn walk_unknowns(v: &Value, path: &AttrPath, found: &mut impl FnMut(&AttrPath)) {
    match v {
        Value::Unknown(_) => found(path),
        Value::List(xs) | Value::Tuple(xs) | Value::Set(xs) => {
            for (i, x) in xs.iter().enumerate() {
                walk_unknowns(x, &path.push_index(i), found);
            }
        }
        Value::Map(m) => {
            for (k, x) in m {
                walk_unknowns(x, &path.push_key(k), found);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                walk_unknowns(x, &path.push_attr(k), found);
            }
        }
        Value::Dynamic(d) => walk_unknowns(&d.1, path, found),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// Where `v` does not fit `ty`, with a cty-style reason ("string required, but have number").
/// Null and unknown fit any type. A value in a dynamic position is checked against the type it
/// carries.
pub(super) fn conformance_errors(ty: &Type, v: &Value) -> Vec<PathError> {
    let mut errs = Vec::new();
    conform(ty, v, &AttrPath::root(), &mut errs);
    errs
}

fn conform(ty: &Type, v: &Value, path: &AttrPath, errs: &mut Vec<PathError>) {
    match (ty, v) {
        (_, Value::Null | Value::Unknown(_)) => {}
        (Type::Dynamic, Value::Dynamic(d)) => conform(&d.0, &d.1, path, errs),
        // An untyped value in a dynamic position is whatever it is.
        (Type::Dynamic, _) => {}
        (_, Value::Dynamic(d)) => match type_conforms(&d.0, ty) {
            Ok(()) => conform(ty, &d.1, path, errs),
            Err(why) => errs.push(PathError::new(path, why)),
        },
        (Type::String, Value::String(_))
        | (Type::Number, Value::Number(_))
        | (Type::Bool, Value::Bool(_)) => {}
        // cty carries lists of objects with dynamic attributes as tuples, and maps of them as
        // objects, so those spellings are accepted too.
        (Type::List(e), Value::List(xs) | Value::Tuple(xs)) | (Type::Set(e), Value::Set(xs)) => {
            for (i, x) in xs.iter().enumerate() {
                conform(e, x, &path.push_index(i), errs);
            }
        }
        (Type::Map(e), Value::Map(m) | Value::Object(m)) => {
            for (k, x) in m {
                conform(e, x, &path.push_key(k), errs);
            }
        }
        (Type::Tuple(ts), Value::Tuple(xs) | Value::List(xs)) => {
            if ts.len() == xs.len() {
                for (i, (t, x)) in ts.iter().zip(xs).enumerate() {
                    conform(t, x, &path.push_index(i), errs);
                }
            } else {
                errs.push(PathError::new(
                    path,
                    format!(
                        "tuple of {} elements required, but have {}",
                        ts.len(),
                        xs.len()
                    ),
                ));
            }
        }
        (Type::Object(ts), Value::Object(m)) => {
            for (name, t) in ts {
                match m.get(name) {
                    Some(x) => conform(t, x, &path.push_attr(name), errs),
                    None => errs.push(PathError::new(
                        path,
                        format!("attribute {name:?} is required"),
                    )),
                }
            }
            for name in m.keys().filter(|k| !ts.contains_key(*k)) {
                errs.push(PathError::new(
                    path,
                    format!("unsupported attribute {name:?}"),
                ));
            }
        }
        _ => errs.push(PathError::new(
            path,
            format!("{ty} required, but have {}", kind(v)),
        )),
    }
}

/// Whether values of type `actual` fit where `want` is expected: equal types, with the dynamic
/// pseudo-type in `want` accepting anything.
pub(super) fn type_conforms(actual: &Type, want: &Type) -> Result<(), String> {
    match (actual, want) {
        (_, Type::Dynamic) => Ok(()),
        (Type::List(a), Type::List(w))
        | (Type::Set(a), Type::Set(w))
        | (Type::Map(a), Type::Map(w)) => type_conforms(a, w),
        (Type::Object(a), Type::Object(w)) => {
            if let Some(name) = w.keys().find(|k| !a.contains_key(*k)) {
                return Err(format!("attribute {name:?} is required"));
            }
            if let Some(name) = a.keys().find(|k| !w.contains_key(*k)) {
                return Err(format!("unsupported attribute {name:?}"));
            }
            w.iter()
                .try_for_each(|(k, wt)| a.get(k).map_or(Ok(()), |at| type_conforms(at, wt)))
        }
        (Type::Tuple(a), Type::Tuple(w)) if a.len() == w.len() => a
            .iter()
            .zip(w)
            .try_for_each(|(at, wt)| type_conforms(at, wt)),
        _ if actual == want => Ok(()),
        _ => Err(format!("{want} required, but have {actual}")),
    }
}

/// The kind of a value, for "X required, but have Y" messages.
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Unknown(_) => "unknown".to_owned(),
        Value::Bool(_) => "bool".to_owned(),
        Value::Number(_) => "number".to_owned(),
        Value::String(_) => "string".to_owned(),
        Value::List(_) => "list".to_owned(),
        Value::Set(_) => "set".to_owned(),
        Value::Tuple(_) => "tuple".to_owned(),
        Value::Map(_) => "map".to_owned(),
        Value::Object(_) => "object".to_owned(),
        Value::Dynamic(d) => d.0.to_string(),
    }
}
