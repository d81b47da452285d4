//! The `gpufleet_virtual_cluster` list resource: the virtual clusters on the host cluster,
//! for `terraform query`: those gpufleet made, found by their namespaces' labels, and those
//! Helm or the vCluster CLI installed from the chart, found by the chart's StatefulSet labels
//! and config Secret.
//!
//! One list of namespaces and one of StatefulSets find them (and, per release Helm
//! installed, its namespace and config Secret); each is then read as a refresh after an
//! import reads it (only when the resource is asked for).

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{
    TYPE_NAME, adopt,
    config::ListFilter,
    name_taken::virtual_clusters,
    read::import_skeleton,
    read_virtual_cluster,
    schema::{LABELS, NAMESPACE},
};
use crate::{
    apply::{Found, read_found},
    backends::kube::{
        ObjectError, VIRTUAL_CLUSTER,
        host::{HostObjects, ObjectKind, ObjectsBackend},
        json::{labels_of, str_at},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ListKind, ListRequest, ListResponse},
    path::AttrPath,
    schema::{Attribute, Block, Schema},
    value::{Type, Value},
};

/// The list resource over the same backend as the resource. The registry uses
/// `VirtualClusterList(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct VirtualClusterList<B = crate::backends::kube::host::FromSettings>(pub B);

fn list_schema() -> Schema {
    Schema::new(
        Block::new(
            "Finds the virtual clusters on the host cluster, so that `terraform query \
             -generate-config-out` writes an import and a resource block for each: those \
             gpufleet made (namespaces labelled `app.kubernetes.io/managed-by=gpufleet` and \
             `gpufleet.dev/virtual-cluster`), for a workspace that lost its state or takes \
             over tenants from another, and vClusters that Helm or the vCluster CLI installed \
             from the chart (a StatefulSet labelled `app=vcluster` and `release=<name>` beside \
             its Secret `vc-config-<name>`). Importing such a release reads its vcluster.yaml \
             back into the attributes and `values_override`. The first apply labels its \
             namespace and objects as gpufleet's, which restarts nothing, and writes the \
             settings gpufleet decides itself where the release set them otherwise (the plan's \
             `drift` names each), which restarts the control plane once. Filters combine; \
             without any, every virtual cluster is listed.",
        )
        .attr(
            Attribute::optional(NAMESPACE, Type::String)
                .describe("Only the virtual cluster in this host namespace."),
        )
        .attr(
            Attribute::optional(LABELS, Type::map(Type::String)).describe(
                "Only virtual clusters whose namespace carries all of these labels (the \
                 resource's `labels` are set on its namespace; Helm leaves the namespace as \
                 it found it).",
            ),
        ),
    )
}

/// Whether `s` may appear in a label selector as a key (`key`) or a value: label syntax, so
/// that no filter can change what the selector means.
fn label_syntax(s: &str, key: bool) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) if key => (Some(p), n),
        _ => (None, s),
    };
    let name_ok = name.len() <= 63 && name.chars().all(allowed) && !(key && name.is_empty());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
    });
    name_ok && prefix_ok
}

fn validate_labels(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let Some(labels) = ListFilter::decode(config).labels.into_value() else {
        return d;
    };
    for (k, v) in &labels {
        let value = v.value().map_or("", String::as_str);
        if !label_syntax(k, true) || !label_syntax(value, false) {
            d.error_at(
                AttrPath::attr(LABELS).push_key(k.clone()),
                "Invalid Label Filter",
                format!(
                    "labels: {k:?} = {value:?} is not a Kubernetes label (a key of letters, \
                     digits, `-`, `_` and `.` with an optional DNS prefix and `/`, a value of at \
                     most 63 such characters), so no namespace could carry it."
                ),
            );
        }
    }
    d
}

/// The vClusters Helm or the vCluster CLI installed from the chart, as `(namespace, name)`:
/// the chart's StatefulSets as Helm labels them, whose config Secret is there and whose
/// namespace carries `labels`, in `namespace` when given; releases being deleted are left
/// out. Releases an import would refuse are left out with a warning saying why: two in one
/// namespace (a virtual cluster owns its namespace), or a name another namespace uses (node
/// pools tell tenants apart by name).
async fn chart_releases(
    host: &dyn HostObjects,
    namespace: Option<&str>,
    labels: &[(String, String)],
    ours: &[(String, String)],
) -> Result<(Vec<(String, String)>, Diagnostics), ObjectError> {
    let mut by_namespace: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for sts in host
        .list(ObjectKind::StatefulSet, namespace, "app=vcluster")
        .await?
    {
        let (Some(ns), Some(name)) = (
            str_at(&sts, "/metadata/namespace"),
            labels_of(&sts).get("release").cloned(),
        ) else {
            continue;
        };
        if adopt::chart_release(&sts, &name) && sts.pointer("/metadata/deletionTimestamp").is_none()
        {
            by_namespace.entry(ns.to_owned()).or_default().push(name);
        }
    }
    let mut warnings = Diagnostics::new();
    let mut found = Vec::new();
    for (ns, names) in &by_namespace {
        if let [one, two, ..] = &names[..] {
            warnings.push(Diagnostic::warning(
                "vCluster Releases Not Listed",
                format!(
                    "{TYPE_NAME}: namespace {ns} holds several vClusters ({one}, {two}, …), and \
                     a virtual cluster owns its namespace: move all but one out to adopt them."
                ),
            ));
            continue;
        }
        let name = &names[0];
        let elsewhere = ours
            .iter()
            .map(|(n, v)| (n, v))
            .chain(
                by_namespace
                    .iter()
                    .flat_map(|(n, vs)| vs.iter().map(move |v| (n, v))),
            )
            .find(|(n, v)| *v == name && *n != ns);
        if let Some((other, _)) = elsewhere {
            warnings.push(Diagnostic::warning(
                "vCluster Release Not Listed",
                format!(
                    "{TYPE_NAME}: the vCluster Helm installed in namespace {ns} is not listed: \
                     {}. Rename one to adopt it.",
                    super::name_taken::taken(name, other)
                ),
            ));
            continue;
        }
        let Some(namespace) = host.get(ObjectKind::Namespace, None, ns).await? else {
            continue;
        };
        let ns_labels = labels_of(&namespace);
        if namespace.pointer("/metadata/deletionTimestamp").is_some()
            || ns_labels.contains_key(VIRTUAL_CLUSTER)
            || !labels.iter().all(|(k, v)| ns_labels.get(k) == Some(v))
        {
            continue;
        }
        let config = format!("vc-config-{name}");
        if host
            .get(ObjectKind::Secret, Some(ns), &config)
            .await?
            .is_some()
        {
            found.push((ns.clone(), name.clone()));
        }
    }
    Ok((found, warnings))
}

#[async_trait]
impl<B: ObjectsBackend> ListKind for VirtualClusterList<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        list_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_labels(config)
    }

    async fn list(&self, ctx: &Context, req: ListRequest) -> ListResponse {
        let mut resp = ListResponse::default();
        let host = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(host) => host,
            Err(diagnostics) => {
                resp.diagnostics = diagnostics;
                return resp;
            }
        };
        let filter = ListFilter::decode(&req.config);
        let labels: Vec<(String, String)> = filter
            .labels
            .into_value()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k, v.into_value()?)))
            .collect();
        let only = filter.namespace.value().map(String::as_str);
        let listed = async {
            let ours = virtual_clusters(host.as_ref(), &labels).await?;
            let every = if labels.is_empty() {
                ours.clone()
            } else {
                virtual_clusters(host.as_ref(), &[]).await?
            };
            let helm = chart_releases(host.as_ref(), only, &labels, &every).await?;
            Ok::<_, ObjectError>((ours, helm))
        };
        let (ours, (helm, warnings)) = match listed.await {
            Ok(found) => found,
            Err(e) => {
                resp.diagnostics = Diagnostic::error(
                    "Virtual Cluster Listing Failed",
                    format!("{TYPE_NAME}: listing namespaces and StatefulSets: {e}."),
                )
                .into();
                return resp;
            }
        };
        let mut found: Vec<(String, String, &'static str)> = ours
            .into_iter()
            .map(|(ns, name)| (ns, name, ""))
            .chain(
                helm.into_iter()
                    .map(|(ns, name)| (ns, name, ", installed with Helm")),
            )
            .filter(|(namespace, _, _)| only.is_none_or(|o| o == namespace))
            .collect();
        found.sort();
        found.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        let found: Vec<Found> = found
            .into_iter()
            .filter_map(|(namespace, name, how)| {
                Some(Found {
                    skeleton: import_skeleton(&format!("{namespace}/{name}")).ok()?,
                    display_name: format!("{name} (namespace {namespace}{how})"),
                })
            })
            .collect();
        let host = host.as_ref();
        let mut resp = read_found(ctx, &req, found, |skeleton| async move {
            read_virtual_cluster(host, ctx, &skeleton).await
        })
        .await;
        resp.diagnostics.0.splice(0..0, warnings.0);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_filter_cannot_change_what_the_selector_means() {
        let config = |k: &str, v: &str| {
            Value::object([(
                "labels",
                Value::Map([(k.to_owned(), Value::string(v))].into()),
            )])
        };
        assert!(!validate_labels(&config("tier", "gold")).has_error());
        assert!(!validate_labels(&config("example.com/tier", "")).has_error());
        for (k, v) in [
            ("tier", "gold,app=x"),
            ("tier in (a)", "x"),
            ("/tier", "a"),
            ("", "a"),
        ] {
            assert!(validate_labels(&config(k, v)).has_error(), "{k:?} = {v:?}");
        }
    }
}
