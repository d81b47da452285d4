//! Terraform core's plan-validity and apply-consistency rules, as pure functions.
//!
//! Terraform checks every value a provider returns. When a check fails it blames the provider:
//! "Provider produced invalid plan", "inconsistent result after apply", and so on. This module
//! runs the same checks inside the engine, so tests catch those bugs before users do. Every
//! function takes a schema and values and returns path-tagged [`PathError`]s. An empty list
//! means the value is valid.
//!
//! The rules, after `internal/plans/objchange` and `internal/terraform` in Terraform:
//!
//! - **Plan** ([`assert_plan_valid`]). The planned value must fit the schema type. A provider
//!   may plan a value different from the configuration only in two cases: the attribute is
//!   computed and null in the configuration, or the planned value equals the prior state (the
//!   "equivalent, keep prior" exception). Computed-only attributes may be anything, including
//!   unknown. Write-only attributes must be planned null. Nested objects and blocks must exist
//!   exactly where the configuration has them, and lists and maps must have the configuration's
//!   length and keys. Collections of blocks are empty rather than null. A block element is never
//!   wholly unknown. A destroy plan (null configuration) must be null.
//! - **Apply** ([`assert_object_compatible`]). The new state must fit the schema type, be
//!   wholly known and have null write-only attributes. Every value that was known in the plan
//!   must come back unchanged. An unknown may become any value of its type, but it must keep
//!   the refinements promised at plan time (not null, string prefix, number and length bounds).
//!   Set elements must correlate. Sensitive values never appear in messages.
//! - **Apply-time re-plan** ([`assert_final_plan_consistent`]). These are the apply rules
//!   between the plan-time and apply-time planned values, except that unknowns may remain.
//! - **Refresh, data source read, state upgrade** ([`assert_wholly_known_conformant`],
//!   [`assert_data_source_result`], [`assert_write_only_null`]). The result must be wholly
//!   known and fit the schema type. A data source result must not be null, and a refreshed
//!   state must have null write-only attributes.

mod checks;
mod compatible;
mod plan_valid;
mod proposed_new;
#[cfg(test)]
mod tests;

use std::{borrow::Cow, collections::BTreeMap, error::Error, fmt};

pub use checks::{
    assert_data_source_result, assert_wholly_known_conformant, assert_write_only_null,
};
pub use compatible::{assert_final_plan_consistent, assert_object_compatible};
pub use plan_valid::assert_plan_valid;
pub use proposed_new::{empty_value, proposed_new};

use crate::{
    diag::Diagnostic,
    path::AttrPath,
    schema::{AttrType, Attribute, Block},
    value::{NumberBound, Refinements, Value, display_number},
};

/// One broken rule, at the path of the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    /// Where the offending value is; the root path for the whole object.
    pub path: AttrPath,
    /// What is wrong, written for the provider's developers.
    pub message: String,
}

impl PathError {
    /// An error at `path`.
    pub fn new(path: &AttrPath, message: impl Into<String>) -> PathError {
        PathError {
            path: path.clone(),
            message: message.into(),
        }
    }

    /// An error diagnostic with `summary` ("Provider produced invalid plan"), pointed at the
    /// offending attribute.
    pub fn to_diagnostic(&self, summary: &str) -> Diagnostic {
        let detail = format!(
            "{self}\n\nThis is a bug in the provider, which should be reported in the provider's own issue tracker."
        );
        let diag = Diagnostic::error(summary, detail);
        if self.path.is_root() {
            diag
        } else {
            diag.with_path(self.path.clone())
        }
    }
}

impl fmt::Display for PathError {
    /// Renders `path: message`, with `(root)` for the root path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_root() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl Error for PathError {}

// ---------------------------------------------------------------------------------------------
// Value helpers shared by the checks. Values are untyped, so the walks take types from the
// schema and treat `Value::Dynamic` as a transparent wrapper except where types are compared.

/// The value without any `Dynamic` wrappers.
fn bare(v: &Value) -> &Value {
    match v {
        Value::Dynamic(d) => bare(&d.1),
        other => other,
    }
}

/// An attribute of an object value. Like cty, an attribute of an unknown object is unknown and
/// an attribute of a null object is null, so callers need not special-case either.
fn attr_of<'a>(v: &'a Value, name: &str) -> Cow<'a, Value> {
    match bare(v) {
        Value::Unknown(_) => Cow::Owned(Value::unknown()),
        Value::Object(m) => m.get(name).map_or(Cow::Owned(Value::Null), Cow::Borrowed),
        _ => Cow::Owned(Value::Null),
    }
}

/// The elements of a known list, tuple or set.
fn seq(v: &Value) -> Option<&[Value]> {
    match bare(v) {
        Value::List(xs) | Value::Tuple(xs) | Value::Set(xs) => Some(xs),
        _ => None,
    }
}

/// The entries of a known map. A map of objects with dynamic attributes travels as an object,
/// so objects count too.
fn entries(v: &Value) -> Option<&BTreeMap<String, Value>> {
    match bare(v) {
        Value::Map(m) | Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The value with every refinement dropped. Terraform compares planned values with refinements
/// stripped, because most providers cannot carry refinements through the protocol.
fn unrefined(v: &Value) -> Value {
    let map =
        |m: &BTreeMap<String, Value>| m.iter().map(|(k, x)| (k.clone(), unrefined(x))).collect();
    match v {
        Value::Unknown(_) => Value::unknown(),
        Value::List(xs) => Value::List(xs.iter().map(unrefined).collect()),
        Value::Tuple(xs) => Value::Tuple(xs.iter().map(unrefined).collect()),
        // Re-sort, since refinements took part in the order.
        Value::Set(xs) => Value::set(xs.iter().map(unrefined).collect()),
        Value::Map(m) => Value::Map(map(m)),
        Value::Object(m) => Value::Object(map(m)),
        // Null and unknown are untyped here, so their wrapper carries no information.
        Value::Dynamic(d) => match &d.1 {
            Value::Null => Value::Null,
            Value::Unknown(_) => Value::unknown(),
            inner => Value::Dynamic(Box::new((d.0.clone(), unrefined(inner)))),
        },
        other => other.clone(),
    }
}

/// Whether two values are equal once refinements are ignored.
fn same_unrefined(a: &Value, b: &Value) -> bool {
    a == b || unrefined(a) == unrefined(b)
}

/// Whether an attribute, or anything nested in it, must not be printed.
fn attr_is_secret(attr: &Attribute) -> bool {
    attr.sensitive
        || attr.write_only
        || matches!(&attr.ty, AttrType::Nested { attributes, .. } if attributes.iter().any(attr_is_secret))
}

/// Whether anything in a block must not be printed.
fn block_is_secret(block: &Block) -> bool {
    block.attributes.iter().any(attr_is_secret)
        || block.blocks.iter().any(|b| block_is_secret(&b.block))
}

/// How a value reads in a message: `"(sensitive value)"` when it must not be printed.
fn shown(v: &Value, secret: bool) -> String {
    if secret {
        "(sensitive value)".to_owned()
    } else {
        render(v)
    }
}

/// A compact rendering of a value in Terraform's own notation, for messages.
fn render(v: &Value) -> String {
    fn join(xs: impl Iterator<Item = String>, open: &str, close: &str) -> String {
        let items: Vec<String> = xs.collect();
        format!("{open}{}{close}", items.join(", "))
    }
    match v {
        Value::Null => "null".to_owned(),
        Value::Unknown(r) => render_unknown(r),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => display_number(n),
        Value::String(s) => format!("{s:?}"),
        Value::List(xs) | Value::Tuple(xs) => join(xs.iter().map(render), "[", "]"),
        Value::Set(xs) => join(xs.iter().map(render), "toset([", "])"),
        Value::Map(m) => join(
            m.iter().map(|(k, x)| format!("{k:?} = {}", render(x))),
            "{",
            "}",
        ),
        Value::Object(m) => join(
            m.iter().map(|(k, x)| format!("{k} = {}", render(x))),
            "{",
            "}",
        ),
        Value::Dynamic(d) => render(&d.1),
    }
}

/// `unknown`, followed by what is known about it, e.g. `unknown (not null, prefix "a-")`.
fn render_unknown(r: &Refinements) -> String {
    let mut known = Vec::new();
    if r.not_null {
        known.push("not null".to_owned());
    }
    if let Some(p) = &r.string_prefix {
        known.push(format!("prefix {p:?}"));
    }
    if let Some(b) = &r.number_lower {
        let op = if b.inclusive { ">=" } else { ">" };
        known.push(format!("{op} {}", display_number(&b.value)));
    }
    if let Some(b) = &r.number_upper {
        let op = if b.inclusive { "<=" } else { "<" };
        known.push(format!("{op} {}", display_number(&b.value)));
    }
    if let Some(n) = r.length_lower {
        known.push(format!("length >= {n}"));
    }
    if let Some(n) = r.length_upper {
        known.push(format!("length <= {n}"));
    }
    if known.is_empty() {
        "unknown".to_owned()
    } else {
        format!("unknown ({})", known.join(", "))
    }
}

/// The possible lengths of a known collection. Unknown set elements may turn out equal and
/// merge, so a set with `n` elements, some unknown, ends up with between one and `n`.
fn length_range(v: &Value) -> Option<(u64, u64)> {
    let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    match bare(v) {
        Value::Set(xs) if !xs.iter().all(Value::is_wholly_known) => {
            Some((len(xs.len().min(1)), len(xs.len())))
        }
        Value::List(xs) | Value::Tuple(xs) | Value::Set(xs) => Some((len(xs.len()), len(xs.len()))),
        Value::Map(m) => Some((len(m.len()), len(m.len()))),
        _ => None,
    }
}

/// Whether `actual` certainly breaks a promise that an unknown planned value made, in the
/// manner of cty's `ValueRange.Includes`: only a definite violation counts.
fn breaks_refinements(r: &Refinements, actual: &Value) -> bool {
    let actual = bare(actual);
    if actual.is_null() {
        return r.not_null;
    }
    match actual {
        // Two unknowns conflict only when their ranges cannot overlap.
        Value::Unknown(a) => {
            let numbers_apart = matches!((&a.number_upper, &r.number_lower), (Some(u), Some(l)) if entirely_below(u, l))
                || matches!((&r.number_upper, &a.number_lower), (Some(u), Some(l)) if entirely_below(u, l));
            let lengths_apart = matches!((a.length_upper, r.length_lower), (Some(u), Some(l)) if u < l)
                || matches!((r.length_upper, a.length_lower), (Some(u), Some(l)) if u < l);
            numbers_apart || lengths_apart
        }
        Value::String(s) => r
            .string_prefix
            .as_ref()
            .is_some_and(|p| !s.starts_with(p.as_str())),
        Value::Number(n) => {
            let too_low = r.number_lower.as_ref().is_some_and(|b| {
                if b.inclusive {
                    *n < b.value
                } else {
                    *n <= b.value
                }
            });
            let too_high = r.number_upper.as_ref().is_some_and(|b| {
                if b.inclusive {
                    *n > b.value
                } else {
                    *n >= b.value
                }
            });
            too_low || too_high
        }
        _ => length_range(actual).is_some_and(|(lo, hi)| {
            r.length_lower.is_some_and(|min| hi < min) || r.length_upper.is_some_and(|max| lo > max)
        }),
    }
}

/// Whether every number up to `upper` lies below `lower`.
fn entirely_below(upper: &NumberBound, lower: &NumberBound) -> bool {
    upper.value < lower.value
        || (upper.value == lower.value && !(upper.inclusive && lower.inclusive))
}
