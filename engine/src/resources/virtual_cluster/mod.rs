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
//! the chart ([`adopt`]), and the first apply after the import labels it.
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

use std::time::Duration;

use async_trait::async_trait;

pub use list::VirtualClusterList;
pub use read::{import_skeleton, read_virtual_cluster};

use self::{config::ClusterConfig, plan::plan_virtual_cluster, validate::validate_virtual_cluster};
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
impl<B: ObjectsBackend> ResourceKind for VirtualCluster<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema::resource_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_virtual_cluster(config)
    }

    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse {
        let mut resp = plan_virtual_cluster(&req);
        let planned = ClusterConfig::decode(&resp.planned);
        if req.prior.is_null()
            && let (Some(name), Some(namespace)) = (planned.name.value(), planned.namespace.value())
            && let Ok(host) = self.0.connect(ctx, TYPE_NAME).await
        {
            let check = async {
                match name_taken::other_namespace(host.as_ref(), name, namespace).await {
                    Ok(Some(other)) => name_taken::refusal(name, &other).into(),
                    // A host that cannot be asked now is asked again at apply.
                    _ => Diagnostics::new(),
                }
            };
            resp.diagnostics
                .extend(crate::plan::backend_facts::bounded(check).await);
        }
        if let Some(id) = planned.id.value() {
            ctx.virtual_clusters.planned(
                id,
                req.prior.is_null(),
                planned.isolation.value().map(|i| i.as_str()),
            );
        }
        resp
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        let host = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(h) => h,
            Err(diagnostics) => {
                return ApplyResponse::refused(req.prior, diagnostics);
            }
        };
        if req.planned.is_null() {
            return apply::apply_delete(host.as_ref(), ctx, &req.prior).await;
        }
        let resp = apply::apply_upsert(host.as_ref(), ctx, &req.prior, &req.planned).await;
        if let Some(id) = ClusterConfig::decode(&req.planned).id.value() {
            ctx.virtual_clusters.applied(id);
        }
        resp
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        // An import reads what Helm installed, which lacks gpufleet's labels: by name.
        let host = if read::importing(&state) {
            self.0.connect(ctx, TYPE_NAME).await
        } else {
            self.0.connect_reader(ctx, TYPE_NAME).await
        };
        match host {
            Ok(host) => read_virtual_cluster(host.as_ref(), ctx, &state).await,
            Err(diagnostics) => ReadResponse::refused(state, diagnostics),
        }
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        self.0.connect(ctx, TYPE_NAME).await?;
        import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &[schema::NAMESPACE, schema::NAME]
    }

    fn docs_sections(&self) -> Vec<(&'static str, String)> {
        vec![("Host Objects", objects::docs_table())]
    }
}
