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
//!   the host cluster's [`HostObjects`], with `wait`
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

use std::{sync::Arc, time::Duration};

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
    apply::RemoteKind,
    backends::kube::host::{FromSettings, HostObjects, ObjectsBackend},
    context::Context,
    diag::Diagnostics,
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse},
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
impl<B: ObjectsBackend> RemoteKind for Benchmark<B> {
    type Api = dyn HostObjects;
    const TYPE_NAME: &'static str = TYPE_NAME;
    const IDENTITY: &'static [&'static str] = &[schema::NAMESPACE, schema::NAME];

    fn schema() -> Schema {
        benchmark_schema()
    }

    fn validate(config: &Value) -> Diagnostics {
        validate_benchmark(config)
    }

    fn plan(_ctx: &Context, req: &PlanRequest) -> PlanResponse {
        plan_benchmark(req)
    }

    async fn check_plan(
        cluster: &dyn HostObjects,
        ctx: &Context,
        req: &PlanRequest,
        _planned: &Value,
    ) -> Diagnostics {
        plan::check_plan(cluster, ctx, req).await
    }

    /// Import is refused: the record is of a run made by Terraform.
    fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
        Err(import_refused(id))
    }

    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        self.0.connect(ctx, TYPE_NAME).await
    }

    /// Only thresholds, on_failure and timeouts change in place: no cluster needed.
    fn update_locally(prior: &Value, planned: &Value) -> Option<ApplyResponse> {
        Some(apply_update(prior, planned))
    }

    /// A run is a record: what it measured does not change afterwards.
    fn read_locally(state: &Value) -> Option<ReadResponse> {
        Some(read_record(state.clone()))
    }

    async fn create(cluster: &dyn HostObjects, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        // Write-only: only the configuration carries the key.
        let config = BenchmarkConfig::decode(&req.config);
        let key = config.endpoint_api_key.value().map(String::as_str);
        apply_create(cluster, ctx, &req.planned, key).await
    }

    async fn update(
        _cluster: &dyn HostObjects,
        _ctx: &Context,
        req: &ApplyRequest,
    ) -> ApplyResponse {
        apply_update(&req.prior, &req.planned)
    }

    async fn delete(cluster: &dyn HostObjects, ctx: &Context, prior: &Value) -> ApplyResponse {
        apply_delete(cluster, ctx, prior).await
    }

    async fn refresh(_cluster: &dyn HostObjects, _ctx: &Context, state: &Value) -> ReadResponse {
        read_record(state.clone())
    }
}
