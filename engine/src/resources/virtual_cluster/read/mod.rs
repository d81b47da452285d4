//! Refresh and import.
//!
//! Refresh observes the host objects of a virtual cluster, reflects what the user can see in
//! the attributes (quota, limit range, network isolation, paused, the volume claim), and lists
//! in `drift` every difference from the rendered objects: each object of
//! [`HOST_OBJECTS`](super::objects::HOST_OBJECTS) that is missing, or whose rendered fields
//! were changed ([`compare`](super::compare)), the reflected ones included, so the next plan
//! shows it and the next apply repairs it. A missing (or terminating) namespace means the
//! virtual cluster is gone once its cluster-scoped objects are gone too; a terminating one,
//! or one whose cluster-scoped objects remain, reads as half deleted, so that destroy
//! finishes the delete and apply puts the virtual cluster back. Import starts from a
//! skeleton holding only the name and namespace, and takes every configurable attribute
//! from the host objects.
//!
//! Each object is read once: the namespace, the sixteen objects gpufleet may write, the
//! control-plane pods and the kubeconfig Secret (twenty reads; one more, the Service again,
//! for the address of a NodePort or LoadBalancer). A refresh answers them from one list of
//! each kind for the whole fleet ([`Cached`](crate::backends::kube::host::Cached)).
//!
//! The credentials are computed as apply computes them ([`expose`](super::expose)), from the
//! Service type found and the `expose.host` in the stored vcluster.yaml, so a refresh after
//!
//! The objects are read in `observe`; `observed_state` turns them into the state, with the
//! attributes users see reflected (`reflected`) and every other difference in `drift`.

mod drift;
mod observe;
mod observed_state;
mod reflected;

pub use observe::{Observed, observe};
pub use observed_state::{half_deleted, observed_state};

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    adopt::{self, owned_by},
    config::ClusterConfig,
    model::{Address, Spec, default_namespace},
    objects::Names,
    render,
    schema::{self as attrs, NAME, NAMESPACE},
};
use crate::{
    backends::kube::ObjectError,
    backends::kube::host::{HostObjects, ObjectKind},
    backends::kube::json::str_at,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ReadResponse,
    path::AttrPath,
    schema::Validator,
    timeouts::{Operation, Timeouts},
    validate::DnsLabel,
    value::Value,
};

/// Whether `state` is an import's skeleton, which has no `isolation` yet: every
/// configurable attribute comes from the cluster.
pub(super) fn importing(state: &Value) -> bool {
    ClusterConfig::decode(state).isolation.is_null()
}

/// The state skeleton for `terraform import`: `<namespace>/<name>` or `<name>`.
pub fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let id = id.trim();
    let (namespace, name) = match id.split_once('/') {
        Some((ns, n)) => (ns.to_owned(), n.to_owned()),
        None => (default_namespace(id), id.to_owned()),
    };
    let mut d = Diagnostics::new();
    DnsLabel::new(attrs::NAME_MAX).validate(&AttrPath::attr(NAME), &Value::string(&*name), &mut d);
    DnsLabel::new(63).validate(
        &AttrPath::attr(NAMESPACE),
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
    Ok(attrs::resource_schema().block.complete(&Value::object([
        (NAME, Value::string(name)),
        (NAMESPACE, Value::string(namespace)),
    ])))
}

/// Why the vCluster Helm installed as `name` in `namespace` cannot be adopted, if it
/// cannot: gpufleet could not keep its data, another release shares the namespace (a
/// virtual cluster owns its namespace), or another namespace uses its name (node pools
/// tell tenants apart by name).
async fn adoptable(
    host: &dyn HostObjects,
    namespace: &str,
    name: &str,
    observed: &Observed,
) -> Result<Option<String>, ObjectError> {
    if let Some(why) = observed.config.as_ref().and_then(adopt::refusal) {
        return Ok(Some(why));
    }
    let others: Vec<String> = host
        .list(ObjectKind::StatefulSet, Some(namespace), "app=vcluster")
        .await?
        .iter()
        .filter_map(|o| str_at(o, "/metadata/name").map(str::to_owned))
        .filter(|n| n != name)
        .collect();
    if !others.is_empty() {
        return Ok(Some(format!(
            "the namespace also holds {}, and a virtual cluster owns its namespace. Move the \
             others out first",
            others.join(", ")
        )));
    }
    Ok(super::name_taken::other_namespace(host, name, namespace)
        .await?
        .map(|other| super::name_taken::taken(name, &other)))
}

/// Refreshes `state` against `host`.
pub async fn read_virtual_cluster(
    host: &dyn HostObjects,
    ctx: &Context,
    state: &Value,
) -> ReadResponse {
    let recorded = ClusterConfig::decode(state);
    let Address { name, namespace } = Address::of_config(&recorded);
    let names = Names::new(&name, &namespace);
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let calls_before = host.calls();
    // What the state renders, once: the stored vcluster.yaml and every object compare to it.
    let expected = (!recorded.isolation.is_null())
        .then(|| Spec::from_config(&recorded).ok())
        .flatten()
        .map(|spec| render::render(&spec));
    let look = ctx
        .cancel
        .run_until_cancelled(tokio::time::timeout(
            t.read,
            observe(host, &namespace, &names, expected.as_ref()),
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
            // An import also takes the release Helm installed there.
            let mut diagnostics = Diagnostics::new();
            let owned = observed
                .namespace
                .as_ref()
                .is_some_and(|ns| owned_by(ns, &name));
            let release = !owned
                && recorded.isolation.is_null()
                && observed.namespace.as_ref().is_some_and(|ns| {
                    adopt::recognised(ns, observed.get(ObjectKind::StatefulSet, &name), &name)
                });
            if release {
                match adoptable(host, &namespace, &name, &observed).await {
                    Ok(None) => {}
                    Ok(Some(why)) => {
                        return ReadResponse {
                            new_state: Value::Null,
                            diagnostics: Diagnostic::error(
                                "Virtual Cluster Cannot Be Adopted",
                                format!(
                                    "{TYPE_NAME} {name:?}: the vCluster Helm installed in \
                                     namespace {namespace} cannot be adopted: {why}."
                                ),
                            )
                            .into(),
                        };
                    }
                    Err(e) => {
                        return ReadResponse {
                            new_state: state.clone(),
                            diagnostics: Diagnostic::error(
                                "Virtual Cluster Read Failed",
                                format!("{TYPE_NAME} {name:?}: {e}."),
                            )
                            .into(),
                        };
                    }
                }
            }
            let ours = owned || release;
            // Without its namespace, it is gone once nothing it made outside is left.
            let new_state = if ours {
                observed_state(state, &observed, &names, expected)
            } else if observed.namespace.is_none()
                && (observed.terminating || !observed.objects.is_empty())
            {
                half_deleted(state, &observed, &names)
            } else {
                Value::Null
            };
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
