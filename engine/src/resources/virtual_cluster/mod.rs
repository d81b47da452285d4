//! `gpufleet_virtual_cluster`: a tenant's virtual Kubernetes control plane in a namespace of
//! the host cluster, compatible with vCluster.
//!
//! # Modules
//!
//! - [`schema`]: the attributes; `config`: each attribute decoded once, possibly unknown or
//!   left out, for validate and plan; [`model`]: the virtual cluster decoded from a value;
//!   `validate`: the plan-time checks across attributes (reserved labels, `values_override`
//!   keys gpufleet manages); [`chart_schema`]: `values_override` against the chart's
//!   `values.schema.json`, and the chart settings gpufleet does not render (listed, with the
//!   attribute's description, in `unrendered`); `choices`: the isolation tier; `plan`: planning,
//!   with `claim_change` for the `persistence` changes that replace the virtual cluster;
//!   [`versions`]: the pinned vCluster release and its Kubernetes versions; [`quantity`]:
//!   Kubernetes quantities.
//! - [`values`]: the complete vcluster.yaml (the pinned chart's values, gpufleet's settings,
//!   `values_override`, merged as Helm merges them), with the controller manager's controllers
//!   from `controller_manager` (no taint eviction inside the virtual cluster); [`render`]: pure, configuration → host
//!   objects from those values, as the chart's templates make them; [`rbac`]: the chart's
//!   rules for the Role and ClusterRole; [`objects`]: the objects and their names.
//! - [`apply`] (create, update, delete), [`read`] (refresh, import, with [`compare`] for
//!   `drift`) and [`readiness`]: the
//!   operations against the host cluster's [`HostObjects`]; [`pause`]: what `vcluster pause`
//!   and `vcluster resume` do; [`persistence`]: the volume claim that keeps the control
//!   plane's data; [`expose`]: how the control plane is reached from outside, and the URL its
//!   credentials point at.
//!
//! [`HostObjects`]: crate::backends::kube::host::HostObjects
//!
//! # Identity
//!
//! The id is `<namespace>/<name>`; the namespace defaults to `vc-<name>` and carries
//! `app.kubernetes.io/managed-by=gpufleet` and `gpufleet.dev/virtual-cluster=<name>`, which
//! is how an interrupted apply recognises its own namespace and how import and the data
//! source find a virtual cluster. A namespace without those labels is never deleted; it is
//! adopted only by importing the vCluster that Helm or the vCluster CLI installed in it from
//! the chart (`adopt`), and the first apply after the import labels it.
//!
//! # Plan
//!
//! `sleep` plans with a warning: vCluster's sleep mode is a vCluster Platform feature, so
//! gpufleet renders nothing for it. A plan that creates a virtual cluster, or changes
//! `expose`, whose address is only reachable inside the host cluster (a ClusterIP Service
//! without `expose.host`) warns and points to the ephemeral resource
//! `gpufleet_virtual_cluster_connection`.
//!
//! `name`, `namespace` and `isolation` force a replacement (the tier is fixed at creation,
//! and the plan carries a warning saying so). So does a different amount or class in
//! `persistence` (a StatefulSet's volume claims cannot change), or a prior state without a
//! claim, each with a warning. Everything else changes in place. The credentials (`host`,
//! `endpoint`, `kubeconfig`, the CA, client certificate and key) stay as recorded unless the
//! control plane restarts or its address changes (a version or configuration change,
//! `expose`, pausing or resuming). `drift` is planned empty: every apply repairs what a
//! refresh found.

mod adopt;
pub mod apply;
pub mod chart_schema;
mod choices;
mod claim_change;
pub mod compare;
mod config;
mod controller_manager;
pub mod expose;
mod list;
pub mod model;
pub mod name_taken;
pub mod objects;
pub mod pause;
pub mod persistence;
mod plan;
pub mod quantity;
pub mod rbac;
pub mod read;
pub mod readiness;
pub mod render;
pub mod schema;
mod unrendered;
mod unwritten;
mod validate;
pub mod values;
pub mod versions;
mod yaml;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

pub use list::VirtualClusterList;
pub use read::{import_skeleton, read_virtual_cluster};

use self::{config::ClusterConfig, plan::plan_virtual_cluster, validate::validate_virtual_cluster};
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
pub const TYPE_NAME: &str = "gpufleet_virtual_cluster";

/// Default timeouts: a control plane starts in well under a minute on a healthy host.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(10 * 60),
    read: Duration::from_secs(2 * 60),
    update: Duration::from_secs(10 * 60),
    delete: Duration::from_secs(10 * 60),
};

/// The `gpufleet_virtual_cluster` resource kind over a host [`ObjectsBackend`]. The registry uses
/// `VirtualCluster(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct VirtualCluster<B = FromSettings>(pub B);

#[async_trait]
impl<B: ObjectsBackend> RemoteKind for VirtualCluster<B> {
    type Api = dyn HostObjects;
    const TYPE_NAME: &'static str = TYPE_NAME;
    const IDENTITY: &'static [&'static str] = &[schema::NAMESPACE, schema::NAME];

    fn schema() -> Schema {
        schema::resource_schema()
    }

    fn validate(config: &Value) -> Diagnostics {
        validate_virtual_cluster(config)
    }

    fn plan(ctx: &Context, req: &PlanRequest) -> PlanResponse {
        let resp = plan_virtual_cluster(req);
        // Node pools and benchmarks of this run read the tier and whether it is new.
        let planned = ClusterConfig::decode(&resp.planned);
        if let Some(id) = planned.id.value() {
            ctx.virtual_clusters.planned(
                id,
                req.prior.is_null(),
                planned.isolation.value().map(|i| i.as_str()),
            );
        }
        resp
    }

    /// Only a new virtual cluster asks the host: whether its name is taken elsewhere.
    fn checks_backend_at_plan(req: &PlanRequest) -> bool {
        req.prior.is_null()
    }

    async fn check_plan(
        host: &dyn HostObjects,
        _ctx: &Context,
        _req: &PlanRequest,
        planned: &Value,
    ) -> Diagnostics {
        let planned = ClusterConfig::decode(planned);
        let (Some(name), Some(namespace)) = (planned.name.value(), planned.namespace.value())
        else {
            return Diagnostics::new();
        };
        match name_taken::other_namespace(host, name, namespace).await {
            Ok(Some(other)) => name_taken::refusal(name, &other).into(),
            // A host that cannot be asked now is asked again at apply.
            _ => Diagnostics::new(),
        }
    }

    fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
        import_skeleton(id)
    }

    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        self.0.connect(ctx, TYPE_NAME).await
    }

    async fn connect_reader(
        &self,
        ctx: &Context,
        state: &Value,
    ) -> Result<Arc<dyn HostObjects>, Diagnostics> {
        // An import reads what Helm installed, which lacks gpufleet's labels: by name.
        if read::importing(state) {
            self.0.connect(ctx, TYPE_NAME).await
        } else {
            self.0.connect_reader(ctx, TYPE_NAME).await
        }
    }

    async fn create(host: &dyn HostObjects, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        upsert(host, ctx, req).await
    }

    async fn update(host: &dyn HostObjects, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        upsert(host, ctx, req).await
    }

    async fn delete(host: &dyn HostObjects, ctx: &Context, prior: &Value) -> ApplyResponse {
        apply::apply_delete(host, ctx, prior).await
    }

    async fn refresh(host: &dyn HostObjects, ctx: &Context, state: &Value) -> ReadResponse {
        read_virtual_cluster(host, ctx, state).await
    }

    fn docs_sections() -> Vec<(&'static str, String)> {
        vec![("Host Objects", objects::docs_table())]
    }
}

/// Create and update are one convergence of the host's objects; node pools of this run then
/// see the virtual cluster as applied.
async fn upsert(host: &dyn HostObjects, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
    let resp = apply::apply_upsert(host, ctx, &req.prior, &req.planned).await;
    if let Some(id) = ClusterConfig::decode(&req.planned).id.value() {
        ctx.virtual_clusters.applied(id);
    }
    resp
}
