//! `gpufleet_benchmark`: one benchmark run on a GPU node pool, recorded with the environment
//! it ran in.
//!
//! # Modules
//!
//! - [`schema`]: the attributes; [`spec`]: the model read from a value and the offline checks;
//!   [`thresholds`]: metric names and bounds.
//! - [`render`]: pure, configuration and placement → Job and headless Service; [`commands`]:
//!   the single-node suites' default commands; [`suite_params`]: their parameters' checks.
//! - [`environment`]: the environment record and its stable hash.
//! - [`run`]: create, gang start, logs, cleanup, against the host cluster's
//!   [`HostObjects`](crate::backends::kube::host::HostObjects); [`read`]: the record after the run.
//!
//! # Life cycle
//!
//! Create runs the benchmark (see [`run`]) and records it; the Job, its pods and the Service
//! are removed when the run ends, so a refresh returns the record unchanged. Everything that
//! decides what runs forces a replacement, that is a new run; `triggers` exist for reruns on
//! demand. `thresholds` and `on_failure` change in place: the plan already shows the new
//! `status`, re-checked against the recorded `results`. Destroy removes anything a run left
//! (an interrupted one), found by name and owner label.
//!
//! A failed run with `on_failure = "fail"` returns its record *and* an error: Terraform keeps
//! the state and taints it, so the next apply runs the benchmark again.

pub mod commands;
pub mod environment;
pub mod launch;
pub mod ranks;
pub mod read;
pub mod render;
pub mod run;
pub mod schema;
pub mod shape;
pub mod spec;
pub mod ssh_keys;
pub mod suite_params;
pub mod thresholds;
pub mod turn_name;

use std::time::Duration;

use async_trait::async_trait;

use crate::{
    backends::kube::host::{FromSettings, ObjectsBackend},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    schema::Schema,
    timeouts::Timeouts,
    value::Value,
};

/// The resource type name.
pub const TYPE_NAME: &str = "gpufleet_benchmark";

/// Default timeouts: create is the whole run, start and cleanup included.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(30 * 60),
    read: Duration::from_secs(60),
    update: Duration::from_secs(60),
    delete: Duration::from_secs(5 * 60),
};

/// The `gpufleet_benchmark` resource kind over a host-objects [`ObjectsBackend`]. The registry uses
/// `Benchmark(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Benchmark<B = FromSettings>(pub B);

/// The kind's part of planning; see the module docs.
pub fn plan_benchmark(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if req.config.get("namespace").is_null() {
        let ns = spec::namespace_of(&req.config).map_or_else(Value::unknown, Value::string);
        planned.set_attr("namespace", ns);
    }
    let id = match (
        planned.get("namespace").as_str(),
        planned.get("name").as_str(),
    ) {
        (Some(ns), Some(n)) => Value::string(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    planned.set_attr("id", id);
    if !req.prior.is_null() {
        match read::re_checked(&req.prior, &planned) {
            Some(failures) => {
                let status = if failures.is_empty() {
                    "passed"
                } else {
                    "failed"
                };
                planned.set_attr("status", Value::string(status));
                planned.set_attr(
                    "failures",
                    Value::List(failures.into_iter().map(Value::string).collect()),
                );
            }
            None => {
                planned.set_attr("status", Value::unknown());
                planned.set_attr("failures", Value::unknown());
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

#[async_trait]
impl<B: ObjectsBackend> ResourceKind for Benchmark<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema::benchmark_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        spec::validate(config)
    }

    async fn plan(&self, _ctx: &Context, req: PlanRequest) -> PlanResponse {
        plan_benchmark(&req)
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        if !req.prior.is_null() && !req.planned.is_null() {
            // Only thresholds, on_failure and timeouts change in place: no cluster needed.
            let (new_state, diagnostics) = read::apply_update(&req.prior, &req.planned);
            return ApplyResponse {
                new_state,
                diagnostics,
            };
        }
        let cluster = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(c) => c,
            Err(diagnostics) => {
                return ApplyResponse {
                    new_state: req.prior,
                    diagnostics,
                };
            }
        };
        if req.planned.is_null() {
            run::destroy(cluster.as_ref(), ctx, &req.prior).await
        } else {
            run::run(cluster.as_ref(), ctx, &req.planned).await
        }
    }

    async fn read(&self, _ctx: &Context, state: Value) -> ReadResponse {
        ReadResponse {
            new_state: state,
            diagnostics: Diagnostics::new(),
        }
    }

    async fn import(&self, _ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        Err(Diagnostic::error(
            "Import Not Supported",
            format!(
                "{TYPE_NAME} is the record of a run made by Terraform and cannot be imported \
                 ({id:?}); declare it and apply to run it."
            ),
        )
        .into())
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["namespace", "name"]
    }
}
