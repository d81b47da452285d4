//! Terraform's side of a resource's life, played in process: validate, plan (with the
//! proposed new state Terraform computes), apply and refresh, with Terraform's plan-validity
//! and apply-consistency rules checked on every step, and a tiny state file
//! ([`Terraform`]). Shared by the fake-backend test suites of every resource.

#![allow(dead_code)]

use gpufleet_engine::{
    consistency::{
        PathError, assert_object_compatible, assert_plan_valid, assert_wholly_known_conformant,
        proposed_new,
    },
    context::Context,
    diag::{Diagnostics, Severity},
    kinds::{ApplyRequest, ResourceKind},
    path::AttrPath,
    plan::plan_resource,
    validate::validate_block,
    value::Value,
};

/// What Terraform decides for an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    NoOp,
    Create,
    Update,
    Replace,
    Delete,
}

/// A checked plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub prior: Value,
    pub config: Value,
    pub planned: Value,
    pub action: Action,
    pub requires_replace: Vec<AttrPath>,
    pub diagnostics: Diagnostics,
}

#[track_caller]
fn assert_rules(errs: &[PathError], what: &str) {
    assert!(
        errs.is_empty(),
        "{what}:\n{}",
        errs.iter()
            .map(|e| format!("  - {e}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Errors rendered one per line.
pub fn show(d: &Diagnostics) -> String {
    d.iter()
        .map(|d| {
            let path = d
                .path
                .as_ref()
                .map(|p| format!(" at {p}"))
                .unwrap_or_default();
            format!("{:?}{path}: {}: {}", d.severity, d.summary, d.detail)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Validates and plans like `terraform plan`, checking the plan with Terraform's rules.
/// Validation errors come back in `diagnostics` (with a null plan).
pub async fn plan(kind: &dyn ResourceKind, ctx: &Context, prior: &Value, config: &Value) -> Plan {
    let schema = kind.schema();
    // Validation's warnings reach the user too, with the plan's own.
    let mut validated = Diagnostics::new();
    if !config.is_null() {
        let mut d = validate_block(&schema.block, config);
        d.extend(kind.validate(config));
        if !d.has_error() {
            validated = d;
        } else {
            return Plan {
                prior: prior.clone(),
                config: config.clone(),
                planned: Value::Null,
                action: Action::NoOp,
                requires_replace: Vec::new(),
                diagnostics: d,
            };
        }
    }
    let proposed = proposed_new(&schema.block, prior, config);
    let mut p = plan_resource(kind, ctx, prior.clone(), proposed, config.clone()).await;
    validated.extend(p.diagnostics);
    p.diagnostics = validated;
    if !p.diagnostics.has_error() {
        assert_rules(
            &assert_plan_valid(&schema.block, prior, config, &p.planned),
            "Provider produced invalid plan",
        );
    }
    let action = match (prior.is_null(), config.is_null()) {
        (true, true) => Action::NoOp,
        (true, false) => Action::Create,
        (false, true) => Action::Delete,
        (false, false) if !p.requires_replace.is_empty() => Action::Replace,
        (false, false) if p.planned == *prior => Action::NoOp,
        (false, false) => Action::Update,
    };
    if action == Action::Replace {
        // Terraform plans the create half of a replacement from a null prior.
        let mut again = Box::pin(plan(kind, ctx, &Value::Null, config)).await;
        again.prior = prior.clone();
        again.action = Action::Replace;
        again.requires_replace = p.requires_replace;
        return again;
    }
    Plan {
        prior: prior.clone(),
        config: config.clone(),
        planned: p.planned,
        action,
        requires_replace: p.requires_replace,
        diagnostics: p.diagnostics,
    }
}

/// The result of one apply.
#[derive(Debug, Clone)]
pub struct Applied {
    pub state: Value,
    pub diagnostics: Diagnostics,
}

/// Applies a plan like `terraform apply`: a replacement deletes, then creates. Without errors,
/// the new state must be compatible with the plan. With errors, Terraform keeps the returned
/// state (and a failed create is tainted).
pub async fn apply(kind: &dyn ResourceKind, ctx: &Context, plan: &Plan) -> Applied {
    let schema = kind.schema();
    let (mut prior, mut diagnostics) = (plan.prior.clone(), Diagnostics::new());
    if plan.action == Action::NoOp {
        return Applied {
            state: prior,
            diagnostics,
        };
    }
    if plan.action == Action::Replace {
        let r = kind
            .apply(
                ctx,
                ApplyRequest {
                    prior: prior.clone(),
                    planned: Value::Null,
                    config: Value::Null,
                },
            )
            .await;
        if r.diagnostics.has_error() {
            return Applied {
                state: r.new_state,
                diagnostics: r.diagnostics,
            };
        }
        prior = Value::Null;
    }
    let config = if plan.action == Action::Delete {
        Value::Null
    } else {
        plan.config.clone()
    };
    let r = kind
        .apply(
            ctx,
            ApplyRequest {
                prior,
                planned: plan.planned.clone(),
                config,
            },
        )
        .await;
    diagnostics.extend(r.diagnostics);
    assert_rules(
        &assert_wholly_known_conformant(&schema.value_type(), &r.new_state, "new state"),
        "Provider returned invalid result object after apply",
    );
    if !diagnostics.has_error() {
        assert_rules(
            &assert_object_compatible(&schema.block, &plan.planned, &r.new_state),
            "Provider produced inconsistent result after apply",
        );
    }
    Applied {
        state: r.new_state,
        diagnostics,
    }
}

/// Refreshes like `terraform refresh`; an error keeps the prior state.
pub async fn refresh(
    kind: &dyn ResourceKind,
    ctx: &Context,
    state: &Value,
) -> (Value, Diagnostics) {
    if state.is_null() {
        return (Value::Null, Diagnostics::new());
    }
    let r = kind.read(ctx, state.clone()).await;
    if r.diagnostics.has_error() {
        return (state.clone(), r.diagnostics);
    }
    assert_rules(
        &assert_wholly_known_conformant(
            &kind.schema().value_type(),
            &r.new_state,
            "refreshed state",
        ),
        "Provider produced invalid refreshed state",
    );
    (r.new_state, r.diagnostics)
}

/// One resource instance under Terraform: refresh, plan, apply, as `terraform apply` does.
pub struct Terraform<'a> {
    pub kind: &'a dyn ResourceKind,
    pub ctx: Context,
    pub state: Value,
    /// A create failed but left a state: the next plan replaces the instance.
    pub tainted: bool,
}

impl<'a> Terraform<'a> {
    pub fn new(kind: &'a dyn ResourceKind) -> Terraform<'a> {
        Terraform {
            kind,
            ctx: Context::default(),
            state: Value::Null,
            tainted: false,
        }
    }

    /// Refresh and plan against `config`.
    pub async fn plan(&mut self, config: &Value) -> Plan {
        match self.try_plan(config).await {
            Ok(p) => p,
            Err(d) => panic!("refresh failed:\n{}", show(&d)),
        }
    }

    /// Refresh and plan against `config`; a failed refresh is returned.
    pub async fn try_plan(&mut self, config: &Value) -> Result<Plan, Diagnostics> {
        let (state, d) = refresh(self.kind, &self.ctx, &self.state).await;
        if d.has_error() {
            return Err(d);
        }
        self.state = state;
        if self.state.is_null() {
            self.tainted = false;
        }
        if self.tainted && !config.is_null() {
            let mut p = plan(self.kind, &self.ctx, &Value::Null, config).await;
            p.prior = self.state.clone();
            p.action = Action::Replace;
            return Ok(p);
        }
        Ok(plan(self.kind, &self.ctx, &self.state, config).await)
    }

    /// `terraform apply` (or `terraform destroy` for a null `config`) that may fail anywhere:
    /// a failed refresh or plan changes nothing and is returned like a failed apply.
    pub async fn try_run(&mut self, config: &Value) -> Diagnostics {
        let p = match self.try_plan(config).await {
            Ok(p) if !p.diagnostics.has_error() => p,
            Ok(p) => return p.diagnostics,
            Err(d) => return d,
        };
        self.apply_plan(&p).await
    }

    /// Applies `p` and keeps the state as Terraform would: a create (or replacement) that
    /// failed but left a state is tainted.
    async fn apply_plan(&mut self, p: &Plan) -> Diagnostics {
        let a = apply(self.kind, &self.ctx, p).await;
        let creating = matches!(p.action, Action::Create | Action::Replace);
        self.tainted = creating && a.diagnostics.has_error() && !a.state.is_null();
        self.state = a.state;
        a.diagnostics
    }

    /// Plans `config` and applies that plan even when the plan refused it, as if the fleet
    /// changed between a plan that passed and its apply (apply must check again). Returns the
    /// plan's diagnostics and the apply's.
    pub async fn apply_despite_plan(&mut self, config: &Value) -> (Diagnostics, Diagnostics) {
        let p = self.plan(config).await;
        let d = self.apply_plan(&p).await;
        (p.diagnostics, d)
    }

    /// `terraform apply`: refresh, plan, apply; returns the plan's action and the apply's
    /// diagnostics. The state is updated as Terraform would.
    pub async fn apply(&mut self, config: &Value) -> (Action, Diagnostics) {
        let p = self.plan(config).await;
        assert!(
            !p.diagnostics.has_error(),
            "plan failed:\n{}",
            show(&p.diagnostics)
        );
        let d = self.apply_plan(&p).await;
        (p.action, d)
    }

    /// `terraform apply` that must succeed; returns the action.
    pub async fn apply_ok(&mut self, config: &Value) -> Action {
        let (action, d) = self.apply(config).await;
        assert!(!d.has_error(), "apply failed:\n{}", show(&d));
        action
    }

    /// `terraform destroy`.
    pub async fn destroy(&mut self) -> Diagnostics {
        let p = self.plan(&Value::Null).await;
        let a = apply(self.kind, &self.ctx, &p).await;
        self.state = a.state;
        a.diagnostics
    }

    /// `terraform import <id>`: import, then refresh.
    pub async fn import(&mut self, id: &str) -> Diagnostics {
        match self.kind.import(&self.ctx, id).await {
            Ok(skeleton) => {
                let (state, d) = refresh(self.kind, &self.ctx, &skeleton).await;
                self.state = if d.has_error() { Value::Null } else { state };
                d
            }
            Err(d) => d,
        }
    }
}

/// The only error's detail, or a failed test.
#[track_caller]
pub fn single_error(d: &Diagnostics) -> String {
    let errs: Vec<_> = d.iter().filter(|d| d.severity == Severity::Error).collect();
    assert_eq!(errs.len(), 1, "expected one error:\n{}", show(d));
    errs[0].detail.clone()
}
