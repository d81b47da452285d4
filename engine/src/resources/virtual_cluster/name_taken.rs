//! One name, one tenant. Node pools label and taint their nodes with the virtual cluster's
//! name (`gpufleet.dev/pool=<name>.<pool>`, `gpufleet.dev/tenant=<name>`), so two virtual
//! clusters of one name in two namespaces would hold, and tolerate, each other's nodes. A new
//! virtual cluster whose name another namespace already uses is refused, at plan and again at
//! apply before anything is written.

use crate::{
    backends::kube::{
        MANAGED_BY, MANAGED_BY_VALUE, ObjectError, VIRTUAL_CLUSTER,
        host::{HostObjects, ObjectKind},
        json::{labels_of, str_at},
    },
    diag::Diagnostic,
    plan::backend_facts::VIRTUAL_CLUSTER_NAME_TAKEN,
};

/// Another namespace that holds a virtual cluster named `name` (one being deleted does not
/// count), if any.
pub async fn other_namespace(
    host: &dyn HostObjects,
    name: &str,
    namespace: &str,
) -> Result<Option<String>, ObjectError> {
    let named = [(VIRTUAL_CLUSTER.to_owned(), name.to_owned())];
    Ok(virtual_clusters(host, &named)
        .await?
        .into_iter()
        .map(|(ns, _)| ns)
        .find(|ns| ns != namespace))
}

/// Why `name` cannot be used again: namespace `other` already has a virtual cluster of
/// that name.
pub fn taken(name: &str, other: &str) -> String {
    format!(
        "a virtual cluster named {name:?} already lives in namespace {other}. Node pools label \
         and taint their nodes with the virtual cluster's name, so two tenants of one name \
         would share nodes"
    )
}

/// The refusal of `name`, which namespace `other` already uses.
pub fn refusal(name: &str, other: &str) -> Diagnostic {
    VIRTUAL_CLUSTER_NAME_TAKEN.refuse(format!(
        "name: {}: choose another name.",
        taken(name, other)
    ))
}

/// The virtual clusters gpufleet made, as `(namespace, name)`, from one list of namespaces
/// by gpufleet's labels and `labels` besides; namespaces being deleted are left out.
pub(super) async fn virtual_clusters(
    host: &dyn HostObjects,
    labels: &[(String, String)],
) -> Result<Vec<(String, String)>, ObjectError> {
    let mut selector = format!("{MANAGED_BY}={MANAGED_BY_VALUE},{VIRTUAL_CLUSTER}");
    for (k, v) in labels {
        selector.push_str(&format!(",{k}={v}"));
    }
    Ok(host
        .list(ObjectKind::Namespace, None, &selector)
        .await?
        .iter()
        .filter(|ns| ns.pointer("/metadata/deletionTimestamp").is_none())
        .filter_map(|ns| {
            let namespace = str_at(ns, "/metadata/name")?.to_owned();
            let name = labels_of(ns).get(VIRTUAL_CLUSTER)?.clone();
            Some((namespace, name))
        })
        .collect())
}
