//! The generic part of planning, shared by every resource kind.
//!
//! In order, for a create or update:
//! 1. defaults fill attributes the configuration leaves null;
//! 2. computed attributes the configuration leaves null become unknown, unless nothing
//!    changed or the attribute keeps its prior value (`use_state_for_unknown`);
//! 3. the kind's own `plan` refines the result, and write-only attributes become null;
//! 4. requires-replace paths are collected from the schema and the kind, sorted and
//!    deduplicated, keeping only attributes that actually change.
//!
//! A destroy plan (null configuration) is always null.

pub mod backend_facts;
mod modifiers;

use crate::{
    context::Context,
    diag::Diagnostics,
    kinds::{PlanRequest, ResourceKind},
    path::AttrPath,
    value::Value,
};

pub use modifiers::{apply_defaults, mark_computed_unknown};

/// The outcome of planning one resource instance.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The planned new state (null for destroy).
    pub planned: Value,
    /// Changed attributes that force replacement.
    pub requires_replace: Vec<AttrPath>,
    /// Problems found.
    pub diagnostics: Diagnostics,
}

/// Plans one resource instance from Terraform's prior state, proposed new state and config.
pub async fn plan_resource(
    kind: &dyn ResourceKind,
    ctx: &Context,
    prior: Value,
    proposed: Value,
    config: Value,
) -> Planned {
    if config.is_null() {
        return Planned {
            planned: Value::Null,
            requires_replace: Vec::new(),
            diagnostics: Diagnostics::new(),
        };
    }
    let unusable = ctx.settings.check_needed(kind.type_name(), &config);
    if unusable.has_error() {
        return Planned {
            planned: Value::Null,
            requires_replace: Vec::new(),
            diagnostics: unusable,
        };
    }
    let schema = kind.schema();
    let mut proposed = apply_defaults(&schema.block, &proposed, &config);
    if proposed != prior {
        proposed = mark_computed_unknown(&schema.block, &proposed, &config, &prior);
    }
    let resp = kind
        .plan(
            ctx,
            PlanRequest {
                prior: prior.clone(),
                proposed,
                config,
            },
        )
        .await;
    let planned = schema.block.without_write_only(resp.planned);

    let mut requires_replace = resp.requires_replace;
    if !prior.is_null() {
        for attr in schema
            .block
            .attributes
            .iter()
            .filter(|a| a.requires_replace)
        {
            if prior.get(attr.name) != planned.get(attr.name) {
                requires_replace.push(AttrPath::attr(attr.name));
            }
        }
    }
    requires_replace.sort();
    requires_replace.dedup();
    Planned {
        planned,
        requires_replace,
        diagnostics: resp.diagnostics,
    }
}
