//! The `gpufleet_virtual_cluster` list resource: the virtual clusters gpufleet made on the
//! host cluster, found by their namespaces' labels, for `terraform query`.
//!
//! One list of namespaces finds them; each is then read as a refresh after an import reads
//! it (only when the resource is asked for). A vCluster installed with Helm or the vCluster
//! CLI has no gpufleet namespace and is not listed: gpufleet adopts only what it can read
//! back as it would have made it.

use async_trait::async_trait;

use super::{TYPE_NAME, read::import_skeleton, read_virtual_cluster};
use crate::{
    apply::{Found, read_found},
    backends::kube::{
        MANAGED_BY, MANAGED_BY_VALUE, ObjectError, VIRTUAL_CLUSTER,
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
            "Finds the virtual clusters gpufleet made on the host cluster (namespaces labelled \
             `app.kubernetes.io/managed-by=gpufleet` and `gpufleet.dev/virtual-cluster`), so \
             that `terraform query -generate-config-out` writes an import and a resource block \
             for each: a workspace that lost its state, or one that takes over tenants from \
             another. A vCluster installed with Helm or the vCluster CLI is not listed. Filters \
             combine; without any, every such virtual cluster is listed.",
        )
        .attr(
            Attribute::optional("namespace", Type::String)
                .describe("Only the virtual cluster in this host namespace."),
        )
        .attr(
            Attribute::optional("labels", Type::map(Type::String)).describe(
                "Only virtual clusters whose namespace carries all of these labels (the \
                 resource's `labels` are set on its namespace).",
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
    let Some(labels) = config.get("labels").as_map() else {
        return d;
    };
    for (k, v) in labels {
        let value = v.as_str().unwrap_or_default();
        if !label_syntax(k, true) || !label_syntax(value, false) {
            d.error_at(
                AttrPath::attr("labels").push_key(k.clone()),
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
        let labels: Vec<(String, String)> = req
            .config
            .get("labels")
            .as_map()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        let mut found = match virtual_clusters(host.as_ref(), &labels).await {
            Ok(found) => found,
            Err(e) => {
                resp.diagnostics = Diagnostic::error(
                    "Virtual Cluster Listing Failed",
                    format!("{TYPE_NAME}: listing the namespaces: {e}."),
                )
                .into();
                return resp;
            }
        };
        let only = req.config.get("namespace").as_str();
        found.retain(|(namespace, _)| only.is_none_or(|o| o == namespace));
        found.sort();
        let found = found.into_iter().filter_map(|(namespace, name)| {
            Some(Found {
                skeleton: import_skeleton(&format!("{namespace}/{name}")).ok()?,
                display_name: format!("{name} (namespace {namespace})"),
            })
        });
        let host = host.as_ref();
        read_found(ctx, &req, found, |skeleton| async move {
            read_virtual_cluster(host, ctx, &skeleton).await
        })
        .await
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
