//! Whether an applied (or re-planned) value keeps the promises of the plan (Terraform's
//! `objchange.AssertObjectCompatible`, reported as "Provider produced inconsistent result after
//! apply" and "Provider produced inconsistent final plan").

use super::{
    PathError, attr_is_secret, attr_of, bare, block_is_secret, breaks_refinements,
    checks::{assert_write_only_null, conformance_errors, type_conforms, unknown_errors},
    entries, render, seq, shown,
};
use crate::{
    path::AttrPath,
    schema::{AttrType, Attribute, Block, Nesting},
    value::{Type, Value},
};

/// Checks that `actual`, the new state a provider returned from apply, is a valid completion of
/// `planned`.
///
/// The new state must fit the schema type, contain no unknowns and have null write-only
/// attributes; if it does not, only those problems are reported, as Terraform stops there too.
/// Then every known planned value must come back equal ("was X, but now Y"). An unknown
/// planned value may become anything of its type that satisfies its refinements (not null,
/// string prefix, number and length bounds). Lists and maps keep their elements; set elements
/// must each correlate with an element on the other side, and a set may shrink (unknown
/// elements can turn out equal) but never grow. Blocks keep their count and keys, except where
/// an unknown placeholder stood for a dynamic block. Values of sensitive and write-only
/// attributes are never printed.
pub fn assert_object_compatible(schema: &Block, planned: &Value, actual: &Value) -> Vec<PathError> {
    let mut errs = wrong_type(schema, actual);
    if !errs.is_empty() {
        return errs;
    }
    errs = unknown_errors(
        actual,
        "unknown value after apply; all values must be known after apply",
    );
    errs.extend(assert_write_only_null(schema, actual));
    if !errs.is_empty() {
        return errs;
    }
    compare_block(schema, planned, actual, &AttrPath::root(), &mut errs);
    errs
}

/// Checks the planned value a provider returns when Terraform re-plans at apply time (with
/// values learned during apply) against the value it planned at plan time.
///
/// Known values must be identical and unknowns may become anything of the right type, within
/// their refinements, exactly as for [`assert_object_compatible`]; but unknowns may remain.
/// Terraform's `checkPlannedChange` runs the same `AssertObjectCompatible` between the two
/// planned values. The other half of that check, that the action stays the same (except that
/// an update may become a no-op), is the caller's business, since it needs no values.
pub fn assert_final_plan_consistent(
    schema: &Block,
    plan_time: &Value,
    apply_time: &Value,
) -> Vec<PathError> {
    let mut errs = wrong_type(schema, apply_time);
    if errs.is_empty() {
        compare_block(schema, plan_time, apply_time, &AttrPath::root(), &mut errs);
    }
    errs
}

fn wrong_type(schema: &Block, v: &Value) -> Vec<PathError> {
    conformance_errors(&schema.value_type(), v)
        .into_iter()
        .map(|e| PathError {
            message: format!("wrong final value type: {}", e.message),
            ..e
        })
        .collect()
}

fn compare_block(
    block: &Block,
    planned: &Value,
    actual: &Value,
    path: &AttrPath,
    errs: &mut Vec<PathError>,
) {
    let (planned, actual) = (bare(planned), bare(actual));
    match (planned.is_null(), actual.is_null()) {
        (true, false) => return errs.push(PathError::new(path, "was absent, but now present")),
        (false, true) => return errs.push(PathError::new(path, "was present, but now absent")),
        (true, true) => return,
        (false, false) => {}
    }

    compare_attrs(&block.attributes, planned, actual, path, errs);

    for nb in &block.blocks {
        let (planned_v, actual_v) = (
            attr_of(planned, nb.type_name),
            attr_of(actual, nb.type_name),
        );
        let (planned_v, actual_v) = (bare(&planned_v), bare(&actual_v));
        let path = path.push_attr(nb.type_name);
        let skip = |v: &Value| v.is_unknown() || v.is_null();
        match nb.nesting {
            Nesting::Single | Nesting::Group => {
                // An unknown placeholder may expand to no block at all.
                if !(planned_v.is_unknown() && actual_v.is_null()) {
                    compare_block(&nb.block, planned_v, actual_v, &path, errs);
                }
            }
            Nesting::List => {
                if skip(planned_v) || skip(actual_v) {
                    continue;
                }
                let (planned_l, actual_l) = (
                    seq(planned_v).unwrap_or_default(),
                    seq(actual_v).unwrap_or_default(),
                );
                if planned_l.len() != actual_l.len() {
                    errs.push(PathError::new(
                        &path,
                        format!(
                            "block count changed from {} to {}",
                            planned_l.len(),
                            actual_l.len()
                        ),
                    ));
                    continue;
                }
                for (i, (p, a)) in planned_l.iter().zip(actual_l).enumerate() {
                    compare_block(&nb.block, p, a, &path.push_index(i), errs);
                }
            }
            Nesting::Map => {
                if skip(planned_v) || skip(actual_v) {
                    continue;
                }
                let empty = Default::default();
                let planned_m = entries(planned_v).unwrap_or(&empty);
                let actual_m = entries(actual_v).unwrap_or(&empty);
                if matches!(planned_v, Value::Map(_)) && planned_m.len() != actual_m.len() {
                    errs.push(PathError::new(
                        &path,
                        format!(
                            "block count changed from {} to {}",
                            planned_m.len(),
                            actual_m.len()
                        ),
                    ));
                    continue;
                }
                for (k, p) in planned_m {
                    match actual_m.get(k) {
                        Some(a) => compare_block(&nb.block, p, a, &path.push_key(k), errs),
                        None => errs.push(PathError::new(
                            &path,
                            format!("block key {k:?} has vanished"),
                        )),
                    }
                }
                for k in actual_m.keys().filter(|k| !planned_m.contains_key(*k)) {
                    errs.push(PathError::new(
                        &path,
                        format!("new block key {k:?} has appeared"),
                    ));
                }
            }
            Nesting::Set => {
                if skip(planned_v) || skip(actual_v) {
                    continue;
                }
                let (planned_s, actual_s) = (
                    seq(planned_v).unwrap_or_default(),
                    seq(actual_v).unwrap_or_default(),
                );
                let secret = block_is_secret(&nb.block);
                correlate_sets(planned_s, actual_s, &path, secret, errs, |p, a| {
                    let mut scratch = Vec::new();
                    compare_block(&nb.block, p, a, &path, &mut scratch);
                    scratch.is_empty()
                });
                if planned_s.len() < actual_s.len() {
                    errs.push(PathError::new(
                        &path,
                        format!(
                            "block set length changed from {} to {}",
                            planned_s.len(),
                            actual_s.len()
                        ),
                    ));
                }
            }
        }
    }
}

/// Compares the attributes of one object. Problems inside a sensitive or write-only attribute
/// become one vague error, so that no value leaks into the message.
fn compare_attrs(
    attrs: &[Attribute],
    planned: &Value,
    actual: &Value,
    path: &AttrPath,
    errs: &mut Vec<PathError>,
) {
    for attr in attrs {
        let path = path.push_attr(attr.name);
        let (planned_v, actual_v) = (attr_of(planned, attr.name), attr_of(actual, attr.name));
        let mut found = Vec::new();
        compare_value(Shape::of(attr), &planned_v, &actual_v, &path, &mut found);
        if found.is_empty() {
            continue;
        }
        if attr.sensitive {
            errs.push(PathError::new(
                &path,
                "inconsistent values for sensitive attribute",
            ));
        } else if attr.write_only {
            errs.push(PathError::new(
                &path,
                "inconsistent values for write-only attribute",
            ));
        } else {
            errs.extend(found);
        }
    }
}

/// What a value is, from the schema: a plain cty type, or nested attributes (one object, or a
/// collection of them, whose kind the value itself shows).
#[derive(Clone, Copy)]
enum Shape<'a> {
    Plain(&'a Type),
    Object(&'a [Attribute]),
    Collection(&'a [Attribute]),
}

impl<'a> Shape<'a> {
    fn of(attr: &'a Attribute) -> Shape<'a> {
        match &attr.ty {
            AttrType::Plain(ty) => Shape::Plain(ty),
            AttrType::Nested {
                nesting: Nesting::Single | Nesting::Group,
                attributes,
            } => Shape::Object(attributes),
            AttrType::Nested { attributes, .. } => Shape::Collection(attributes),
        }
    }

    /// The shape of element `i` of a list, set or map (or of a tuple, which has one per index).
    fn element(self, i: usize) -> Shape<'a> {
        match self {
            Shape::Plain(Type::List(e) | Type::Set(e) | Type::Map(e)) => Shape::Plain(e),
            Shape::Plain(Type::Tuple(ts)) => {
                ts.get(i).map_or(Shape::Plain(&Type::Dynamic), Shape::Plain)
            }
            Shape::Collection(attrs) => Shape::Object(attrs),
            _ => Shape::Plain(&Type::Dynamic),
        }
    }

    /// Whether values of this shape hold something that must not be printed.
    fn is_secret(self) -> bool {
        match self {
            Shape::Plain(_) => false,
            Shape::Object(attrs) | Shape::Collection(attrs) => attrs.iter().any(attr_is_secret),
        }
    }
}

fn compare_value(
    shape: Shape<'_>,
    planned: &Value,
    actual: &Value,
    path: &AttrPath,
    errs: &mut Vec<PathError>,
) {
    // In a dynamic position the types travel with the values. A planned value without a
    // concrete type (unknown or null of type "any") allows anything.
    if let Shape::Plain(Type::Dynamic) = shape {
        match planned {
            Value::Dynamic(p) if p.0 != Type::Dynamic => {
                let actual = match actual {
                    Value::Dynamic(a) => {
                        if let Err(why) = type_conforms(&a.0, &p.0) {
                            return errs.push(PathError::new(
                                path,
                                format!("wrong final value type: {why}"),
                            ));
                        }
                        &a.1
                    }
                    other => other,
                };
                return compare_value(Shape::Plain(&p.0), &p.1, actual, path, errs);
            }
            Value::Dynamic(_) | Value::Null | Value::Unknown(_) => return,
            // A known value that lost its type on the way: compare it structurally below.
            _ => {}
        }
    }

    let (planned, actual) = (bare(planned), bare(actual));
    let secret = shape.is_secret();
    if let Value::Unknown(r) = planned {
        // Anything of the planned type will do, as long as it keeps the plan's refinements.
        if breaks_refinements(r, actual) {
            errs.push(PathError::new(
                path,
                format!(
                    "final value {} does not conform to planning placeholder {}",
                    shown(actual, secret),
                    render(planned)
                ),
            ));
        }
        return;
    }
    match (planned.is_null(), actual.is_null()) {
        (true, true) => return,
        (false, true) => {
            return errs.push(PathError::new(
                path,
                format!("was {}, but now null", shown(planned, secret)),
            ));
        }
        (true, false) => {
            return errs.push(PathError::new(
                path,
                format!("was null, but now {}", shown(actual, secret)),
            ));
        }
        (false, false) => {}
    }
    if actual.is_unknown() {
        return errs.push(PathError::new(path, "was known, but now unknown"));
    }

    match (shape, planned, actual) {
        (Shape::Object(attrs), _, _) => compare_attrs(attrs, planned, actual, path, errs),
        (Shape::Plain(Type::Object(types)), Value::Object(_), Value::Object(_)) => {
            for (name, ty) in types {
                let (p, a) = (attr_of(planned, name), attr_of(actual, name));
                compare_value(Shape::Plain(ty), &p, &a, &path.push_attr(name), errs);
            }
        }
        (_, Value::List(p) | Value::Tuple(p), Value::List(a) | Value::Tuple(a)) => {
            for (i, pe) in p.iter().enumerate() {
                match a.get(i) {
                    Some(ae) => compare_value(shape.element(i), pe, ae, &path.push_index(i), errs),
                    None => errs.push(PathError::new(path, format!("element {i} has vanished"))),
                }
            }
            for i in p.len()..a.len() {
                errs.push(PathError::new(
                    path,
                    format!("new element {i} has appeared"),
                ));
            }
        }
        (_, Value::Map(p) | Value::Object(p), Value::Map(a) | Value::Object(a)) => {
            for (k, pe) in p {
                match a.get(k) {
                    Some(ae) => compare_value(shape.element(0), pe, ae, &path.push_key(k), errs),
                    None => errs.push(PathError::new(path, format!("element {k:?} has vanished"))),
                }
            }
            for k in a.keys().filter(|k| !p.contains_key(*k)) {
                errs.push(PathError::new(
                    path,
                    format!("new element {k:?} has appeared"),
                ));
            }
        }
        (_, Value::Set(p), Value::Set(a)) => {
            // Once an unknown element is known its identity changes, so elements can only be
            // matched up by compatibility, and the count checked.
            let element = shape.element(0);
            correlate_sets(p, a, path, secret, errs, |pe, ae| {
                let mut scratch = Vec::new();
                compare_value(element, pe, ae, path, &mut scratch);
                scratch.is_empty()
            });
            if p.len() < a.len() {
                errs.push(PathError::new(
                    path,
                    format!("length changed from {} to {}", p.len(), a.len()),
                ));
            }
        }
        _ => {
            if planned != actual {
                errs.push(PathError::new(
                    path,
                    format!(
                        "was {}, but now {}",
                        shown(planned, secret),
                        shown(actual, secret)
                    ),
                ));
            }
        }
    }
}

/// Reports each planned element without a compatible actual element; if there is none, each
/// actual element without a planned one. Sets can shrink or keep their size through this, since
/// an element may correlate with several on the other side.
fn correlate_sets(
    planned: &[Value],
    actual: &[Value],
    path: &AttrPath,
    secret: bool,
    errs: &mut Vec<PathError>,
    compatible: impl Fn(&Value, &Value) -> bool,
) {
    let mut planned_ok = vec![false; planned.len()];
    let mut actual_ok = vec![false; actual.len()];
    for (pi, p) in planned.iter().enumerate() {
        for (ai, a) in actual.iter().enumerate() {
            // Both already have a partner; another match would tell nothing new.
            if planned_ok[pi] && actual_ok[ai] {
                continue;
            }
            if compatible(p, a) {
                planned_ok[pi] = true;
                actual_ok[ai] = true;
            }
        }
    }
    let lonely_planned: Vec<PathError> = planned
        .iter()
        .zip(&planned_ok)
        .filter(|(_, ok)| !**ok)
        .map(|(p, _)| {
            PathError::new(
                path,
                format!(
                    "planned set element {} does not correlate with any element in actual",
                    shown(p, secret)
                ),
            )
        })
        .collect();
    // The reverse view would mostly repeat the same problem.
    if !lonely_planned.is_empty() {
        return errs.extend(lonely_planned);
    }
    for (a, _) in actual.iter().zip(&actual_ok).filter(|(_, ok)| !**ok) {
        errs.push(PathError::new(
            path,
            format!(
                "actual set element {} does not correlate with any element in plan",
                shown(a, secret)
            ),
        ));
    }
}
