//! `gpufleet_virtual_cluster`: a tenant's virtual Kubernetes control plane in a namespace of
//! the host cluster, compatible with vCluster.
//!
//! # Modules
//!
//! - [`schema`]: the attributes; [`model`]: the model read from a value, and the offline checks
//!   across attributes (reserved labels, `values_override` keys gpufleet manages);
//!   [`versions`]: the pinned vCluster release and its Kubernetes versions; [`quantity`]:
//!   Kubernetes quantities.
//! - [`values`]: the complete vcluster.yaml (the pinned chart's values, gpufleet's settings,
//!   `values_override`, merged as Helm merges them); [`render`]: pure, configuration → host
//!   objects from those values, as the chart's templates make them; [`rbac`]: the chart's
//!   rules for the Role and ClusterRole; [`objects`]: the kinds and names.
//! - [`host`]: the host cluster behind a trait; [`apply`], [`read`] and [`readiness`]: the
//!   operations against it; [`pause`]: what `vcluster pause` and `vcluster resume` do;
//!   [`persistence`]: the volume claim that keeps the control plane's data; [`expose`]: how
//!   the control plane is reached from outside, and the URL its credentials point at.
//!
//! # Identity
//!
//! The id is `<namespace>/<name>`; the namespace defaults to `vc-<name>` and carries
//! `app.kubernetes.io/managed-by=gpufleet` and `gpufleet.dev/virtual-cluster=<name>`, which
//! is how an interrupted apply recognises its own namespace and how import and the data
//! source find a virtual cluster. A namespace without those labels is never adopted or
//! deleted.
//!
//! # Plan
//!
//! `sleep` plans with a warning: vCluster's sleep mode is a vCluster Platform feature, so
//! gpufleet renders nothing for it.
//!
//! `name`, `namespace` and `isolation` force a replacement (the tier is fixed at creation,
//! and the plan carries a warning saying so). So does a different amount or class in
//! `persistence` (a StatefulSet's volume claims cannot change), or a prior state without a
//! claim, each with a warning. Everything else changes in place. The credentials (`host`,
//! `endpoint`, `kubeconfig`, the CA, client certificate and key) stay as recorded unless the
//! control plane restarts or its address changes (a version or configuration change,
//! `expose`, pausing or resuming). `drift` is planned empty: every apply repairs what a
//! refresh found.

pub mod apply;
pub mod expose;
pub mod host;
pub mod model;
pub mod objects;
pub mod pause;
pub mod persistence;
pub mod quantity;
pub mod rbac;
pub mod read;
pub mod readiness;
pub mod render;
pub mod schema;
pub mod values;
pub mod versions;

use std::time::Duration;

use async_trait::async_trait;

pub use host::{Backend, FromSettings, HostApi, HostError, KubeHost};

use crate::{
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    path::AttrPath,
    schema::Schema,
    schema::Validator,
    timeouts::{Operation, Timeouts},
    validate::DnsLabel,
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

/// The `gpufleet_virtual_cluster` resource kind over a host [`Backend`]. The registry uses
/// `VirtualCluster(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct VirtualCluster<B = FromSettings>(pub B);

/// Attributes whose change restarts the control plane (and may rewrite its kubeconfig);
/// `expose` too, compared by what it means ([`expose_changes`]).
const RESTARTING: &[&str] = &[
    "paused",
    "kubernetes_version",
    "values_override",
    "vcluster_version",
    "persistence",
];

/// Computed attributes read from Secret `vc-<name>` and the address `expose` gives.
const ACCESS: &[&str] = &[
    "kubeconfig",
    "endpoint",
    "host",
    "cluster_ca_certificate",
    "client_certificate",
    "client_key",
];

/// Whether `planned` may reach the control plane differently from `prior` (a null `expose`,
/// from a state older than the attribute, means the default; an unknown one may differ).
fn expose_changes(prior: &Value, planned: &Value) -> bool {
    !planned.is_wholly_known()
        || expose::Expose::from_value(prior) != expose::Expose::from_value(planned)
}

/// The kind's part of planning; see the module docs.
pub fn plan_virtual_cluster(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    let mut diagnostics = Diagnostics::new();
    let mut requires_replace = Vec::new();
    let name = planned.get("name").as_str().map(str::to_owned);
    if req.config.get("namespace").is_null() {
        let ns = name.as_deref().map_or_else(Value::unknown, |n| {
            Value::string(model::default_namespace(n))
        });
        planned.set_attr("namespace", ns);
    }
    let id = match (planned.get("namespace").as_str(), name.as_deref()) {
        (Some(ns), Some(n)) => Value::string(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    planned.set_attr("id", id);
    planned.set_attr(
        "vcluster_version",
        Value::string(versions::VCLUSTER_VERSION),
    );
    planned.set_attr("drift", Value::List(Vec::new()));
    let status = match planned.get("paused").as_bool() {
        Some(true) => Value::string("Paused"),
        Some(false) => Value::string("Running"),
        None => Value::unknown(),
    };
    planned.set_attr("status", status);
    if !planned.get("sleep").is_null() {
        diagnostics.push(
            Diagnostic::warning(
                "Sleep Needs vCluster Platform",
                format!(
                    "sleep.after_inactivity is vCluster's sleep mode (sleep.auto), a vCluster \
                     Platform feature that open-source vCluster {} does not implement. gpufleet \
                     leaves it out of vcluster.yaml, so this virtual cluster never goes to \
                     sleep. Set paused = true to scale it to zero instead, and remove sleep.",
                    versions::VCLUSTER_VERSION
                ),
            )
            .with_path(AttrPath::attr("sleep")),
        );
    }
    if !req.prior.is_null() {
        let (was, now) = (
            req.prior.get("kubernetes_version").as_str(),
            planned.get("kubernetes_version").as_str(),
        );
        if let (Some(was), Some(now)) = (was, now)
            && versions::compare(now, was) == Some(std::cmp::Ordering::Less)
        {
            diagnostics.error_at(
                AttrPath::attr("kubernetes_version"),
                "Kubernetes Downgrade Refused",
                format!(
                    "kubernetes_version would go from {was} to {now}; a control plane cannot be \
                     downgraded. Keep {was}, or replace the virtual cluster to start afresh."
                ),
            );
        }
        let (was, now) = (req.prior.get("isolation"), planned.get("isolation"));
        if !was.is_null() && !now.is_unknown() && was != now {
            diagnostics.push(
                Diagnostic::warning(
                    "Isolation Change Replaces The Virtual Cluster",
                    format!(
                        "isolation is fixed at creation: changing it from {} to {} destroys the \
                         virtual cluster (its API server, data and kubeconfig) and creates a new \
                         one.",
                        was.as_str().unwrap_or("?"),
                        now.as_str().unwrap_or("?"),
                    ),
                )
                .with_path(AttrPath::attr("isolation")),
            );
        }
        let (paths, warnings) =
            persistence::replacements(req.prior.get("persistence"), planned.get("persistence"));
        requires_replace.extend(paths);
        diagnostics.extend(warnings);
        let restarts = RESTARTING
            .iter()
            .any(|a| planned.get(a) != req.prior.get(a))
            || expose_changes(req.prior.get("expose"), planned.get("expose"));
        for a in ACCESS {
            let v = if restarts {
                Value::unknown()
            } else {
                req.prior.get(a).clone()
            };
            planned.set_attr(a, v);
        }
    }
    PlanResponse {
        planned,
        requires_replace,
        diagnostics,
    }
}

/// The state skeleton for `terraform import`: `<namespace>/<name>` or `<name>`.
pub fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let id = id.trim();
    let (namespace, name) = match id.split_once('/') {
        Some((ns, n)) => (ns.to_owned(), n.to_owned()),
        None => (model::default_namespace(id), id.to_owned()),
    };
    let mut d = Diagnostics::new();
    DnsLabel::new(schema::NAME_MAX).validate(
        &AttrPath::attr("name"),
        &Value::string(&*name),
        &mut d,
    );
    DnsLabel::new(63).validate(
        &AttrPath::attr("namespace"),
        &Value::string(&*namespace),
        &mut d,
    );
    if d.has_error() {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by `<namespace>/<name>` or by `<name>` (namespace \
                 vc-<name>), e.g. `terraform import {TYPE_NAME}.a vc-tenant-a/tenant-a`; {id:?} \
                 is neither: {}",
                d.iter()
                    .map(|x| x.detail.clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        )
        .into());
    }
    Ok(schema::resource_schema().block.complete(&Value::object([
        ("name", Value::string(name)),
        ("namespace", Value::string(namespace)),
    ])))
}

/// Refreshes `state` against `host`.
pub async fn read_virtual_cluster(
    host: &dyn HostApi,
    ctx: &Context,
    state: &Value,
) -> ReadResponse {
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let namespace = state
        .get("namespace")
        .as_str()
        .map_or_else(|| model::default_namespace(&name), str::to_owned);
    let names = objects::Names::new(&name, &namespace);
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let calls_before = host.calls();
    let look = ctx
        .cancel
        .run_until_cancelled(tokio::time::timeout(
            t.read,
            read::observe(host, &namespace, &names),
        ))
        .await;
    tracing::info!(
        target: "gpufleet::virtual_cluster",
        "read {name}: {} host API calls",
        host.calls().saturating_sub(calls_before)
    );
    let problem = match look {
        Some(Ok(Ok(observed))) => {
            // A namespace that another owner took over is not this virtual cluster any more.
            let ours = observed
                .namespace
                .as_ref()
                .is_some_and(|ns| read::owned_by(ns, &name));
            // Without its namespace, it is gone once nothing it made outside is left.
            let new_state = if ours {
                read::observed_state(state, &observed, &names)
            } else if observed.namespace.is_none()
                && (observed.terminating || !observed.objects.is_empty())
            {
                read::half_deleted(state, &observed, &names)
            } else {
                Value::Null
            };
            let mut diagnostics = Diagnostics::new();
            if ours && let Some(why) = observed.readiness.as_ref().and_then(|r| r.not_ready()) {
                // A plan that shows `status` going back to Running says why it is not now.
                tracing::info!(target: "gpufleet::virtual_cluster", "read {name}: {why}");
                diagnostics.push(Diagnostic::warning(
                    "Control Plane Not Ready",
                    format!("{TYPE_NAME} {name:?} reads as Pending: {why}."),
                ));
            }
            return ReadResponse {
                new_state,
                diagnostics,
            };
        }
        Some(Ok(Err(e))) => e.to_string(),
        Some(Err(_)) => format!("gave up after the {} timeout", Operation::Read.name()),
        None => "stopped because Terraform asked the provider to stop".to_owned(),
    };
    ReadResponse {
        new_state: state.clone(),
        diagnostics: Diagnostic::error(
            "Virtual Cluster Read Failed",
            format!("{TYPE_NAME} {name:?}: {problem}."),
        )
        .into(),
    }
}

#[async_trait]
impl<B: Backend> ResourceKind for VirtualCluster<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema::resource_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        model::validate(config)
    }

    async fn plan(&self, _ctx: &Context, req: PlanRequest) -> PlanResponse {
        plan_virtual_cluster(&req)
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        let host = match self.0.connect(ctx).await {
            Ok(h) => h,
            Err(diagnostics) => {
                return ApplyResponse {
                    new_state: req.prior,
                    diagnostics,
                };
            }
        };
        if req.planned.is_null() {
            apply::apply_delete(host.as_ref(), ctx, &req.prior).await
        } else {
            apply::apply_upsert(host.as_ref(), ctx, &req.prior, &req.planned).await
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        match self.0.connect(ctx).await {
            Ok(host) => read_virtual_cluster(host.as_ref(), ctx, &state).await,
            Err(diagnostics) => ReadResponse {
                new_state: state,
                diagnostics,
            },
        }
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        self.0.connect(ctx).await?;
        import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["namespace", "name"]
    }
}
