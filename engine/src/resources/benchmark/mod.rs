//! `gpufleet_benchmark`: one benchmark run on a GPU node pool, recorded with the environment
//! it ran in.
//!
//! # Modules
//!
//! - [`schema`]: the attributes and their names; `config`: any value's attributes decoded
//!   once into types, known, unknown or left out; [`model`]: the run apply makes, built
//!   from it, and the run a state records; `validate`: the plan-time checks across attributes;
//!   [`thresholds`]: metric names and bounds; `plan`: the namespace, id and re-checked
//!   verdict at plan.
//! - [`render`]: pure, configuration and placement → Job and headless Service; [`launch`]:
//!   how a multi-node MPI run starts; [`commands`]: the single-node suites' default commands;
//!   [`suite_params`]: their parameters' checks.
//! - [`environment`]: the environment record and its stable hash.
//! - [`apply`]: create (one run, cleanup included), the in-place update and destroy, against
//!   the host cluster's [`HostObjects`](crate::backends::kube::host::HostObjects), with `wait`
//!   (the gang's start and the Job's end), `results` (the log, the verdict and the record)
//!   and `error` (why a run stops);
//!   `read`: refresh and import.
//!
//! # Life cycle
//!
//! Create runs the benchmark (see [`apply`]) and records it; the Job, its pods and the Service
//! are removed when the run ends, so a refresh returns the record unchanged. Everything that
//! decides what runs forces a replacement, that is a new run; `triggers` exist for reruns on
//! demand. `thresholds` and `on_failure` change in place: the plan already shows the new
//! `status`, re-checked against the recorded `results`. Destroy removes anything a run left
//! (an interrupted one), found by name and owner label.
//!
//! A failed run with `on_failure = "fail"` returns its record *and* an error: Terraform keeps
//! the state and taints it, so the next apply runs the benchmark again.

pub mod apply;
pub mod archive;
mod archive_store;
pub mod baseline;
mod cluster_facts;
pub mod commands;
mod config;
pub mod environment;
mod error;
pub mod launch;
pub mod model;
pub mod per_node;
mod plan;
pub mod prescreen;
pub mod ranks;
mod read;
pub mod render;
pub mod repeats;
mod results;
pub mod schema;
pub mod shape;
pub mod ssh_keys;
pub mod suite_params;
pub mod thresholds;
pub mod turn_name;
pub mod units;
mod validate;
mod wait;

use std::time::Duration;

use async_trait::async_trait;

use self::{
    apply::{apply_create, apply_delete, apply_update},
    config::BenchmarkConfig,
    plan::plan_benchmark,
    read::{import_refused, read_record},
    schema::benchmark_schema,
    validate::validate_benchmark,
};
use crate::{
    backends::kube::host::{FromSettings, ObjectsBackend},
    context::Context,
    diag::Diagnostics,
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

#[async_trait]
impl<B: ObjectsBackend> ResourceKind for Benchmark<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        benchmark_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_benchmark(config)
    }

    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse {
        let mut resp = plan_benchmark(&req);
        if !resp.planned.is_null()
            && let Ok(cluster) = self.0.connect(ctx, TYPE_NAME).await
        {
            resp.diagnostics.extend(
                crate::plan::backend_facts::bounded(plan::check_plan(cluster.as_ref(), ctx, &req))
                    .await,
            );
        }
        resp
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        if !req.prior.is_null() && !req.planned.is_null() {
            // Only thresholds, on_failure and timeouts change in place: no cluster needed.
            return apply_update(&req.prior, &req.planned);
        }
        let cluster = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(c) => c,
            Err(diagnostics) => {
                return ApplyResponse::refused(req.prior, diagnostics);
            }
        };
        if req.planned.is_null() {
            apply_delete(cluster.as_ref(), ctx, &req.prior).await
        } else {
            // Write-only: only the configuration carries the key.
            let config = BenchmarkConfig::decode(&req.config);
            let key = config.endpoint_api_key.value().map(String::as_str);
            apply_create(cluster.as_ref(), ctx, &req.planned, key).await
        }
    }

    async fn read(&self, _ctx: &Context, state: Value) -> ReadResponse {
        read_record(state)
    }

    async fn import(&self, _ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        Err(import_refused(id))
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &[schema::NAMESPACE, schema::NAME]
    }
}
