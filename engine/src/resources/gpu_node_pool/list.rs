//! The `gpufleet_gpu_node_pool` list resource: the node pools gpufleet made on the host
//! cluster, for `terraform query`.
//!
//! A pool shows on the host as the label `gpufleet.dev/pool=<virtual cluster>.<pool>`: on the
//! nodes it holds (`host` and `bcm` pools) and on its Karpenter NodePool (`auto` pools, which
//! may have no node yet). One list of gpufleet's virtual-cluster namespaces names the host
//! namespace of each virtual cluster, one list of labelled nodes and one of labelled
//! NodePools find the pools; each is then read as a refresh after an import reads it (only
//! when the resource is asked for). Two kinds of pool are not listed, each named in a
//! warning so that it can be imported by id: one whose label had to be shortened with a hash
//! (a virtual cluster and pool name longer than 62 characters together), which does not
//! carry the pool's name; and one whose virtual cluster's name two namespaces use, since the
//! label does not say whose pool it is.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;

use super::{
    Backend, FromSettings, TYPE_NAME,
    read::{import_skeleton, read},
    schema::VIRTUAL_CLUSTER_ID,
};
use crate::{
    apply::{Found, read_found},
    backends::kube::{MANAGED_BY, MANAGED_BY_VALUE, POOL, VIRTUAL_CLUSTER},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ListKind, ListRequest, ListResponse},
    path::AttrPath,
    schema::{Attribute, Block, Schema},
    tenancy::{VirtualClusterRef, pool_label},
    value::{Type, Value},
};

/// The list resource over the same backend as the resource. The registry uses
/// `GpuNodePoolList(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuNodePoolList<B = FromSettings>(pub B);

fn list_schema() -> Schema {
    Schema::new(
        Block::new(
            "Finds the GPU node pools gpufleet made on the host cluster (nodes, and Karpenter \
             NodePools, labelled `gpufleet.dev/pool`), so that `terraform query \
             -generate-config-out` writes an import and a resource block for each. Pools of \
             every source are found: `host` and `bcm` pools by the nodes they hold, `auto` \
             pools by their NodePool. Not listed, each named in a warning so that it can be \
             imported by id: a pool whose label gpufleet had to shorten (a virtual cluster and \
             pool name longer than 62 characters together), and a pool of a virtual cluster \
             whose name two namespaces use.",
        )
        .attr(
            Attribute::optional(VIRTUAL_CLUSTER_ID, Type::String).describe(
                "Only the pools of this virtual cluster (`<namespace>/<name>`, a \
                 `gpufleet_virtual_cluster`'s `id`).",
            ),
        ),
    )
}

fn validate_filter(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    if let Some(id) = config.get(VIRTUAL_CLUSTER_ID).as_str()
        && VirtualClusterRef::parse(id).is_none()
    {
        d.error_at(
            AttrPath::attr("virtual_cluster_id"),
            "Invalid Virtual Cluster ID",
            format!(
                "virtual_cluster_id: {id:?} is not a virtual cluster id \
                 (`<namespace>/<name>`)."
            ),
        );
    }
    d
}

/// Whether `label` has the shape of a label [`pool_label`] shortened: the first 54
/// characters of `<virtual cluster>.<pool>` (less a trailing `-` or `.`), `-` and 8 hex
/// digits. A name of its own that long with such an ending cannot be told apart and is
/// skipped too, with a warning: importing it by id is always possible.
fn looks_shortened(label: &str) -> bool {
    let Some((head, hash)) = label.rsplit_once('-') else {
        return false;
    };
    head.len() >= 50
        && hash.len() == 8
        && hash
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// What the pool labels name: the pools, `(namespace, virtual cluster, pool)` in order, and
/// the labels that name none for certain.
#[derive(Debug, Default, PartialEq, Eq)]
struct Named {
    pools: Vec<(String, String, String)>,
    /// Labels shortened with a hash, which do not carry the pool's name.
    shortened: Vec<String>,
    /// Labels whose virtual cluster name is in more than one namespace: the label does not
    /// say whose pool it is, so it is listed for neither.
    ambiguous: Vec<(String, Vec<String>)>,
}

/// The pools that `labels` (values of `gpufleet.dev/pool`) name, given each virtual
/// cluster's namespaces.
fn pools_named(labels: &BTreeSet<String>, namespaces: &BTreeMap<String, Vec<String>>) -> Named {
    let mut named = Named::default();
    for label in labels {
        let Some((vc, pool)) = label.split_once('.') else {
            continue;
        };
        if looks_shortened(label) || pool_label(vc, pool) != *label {
            named.shortened.push(label.clone());
            continue;
        }
        match namespaces.get(vc).map(Vec::as_slice) {
            Some([namespace]) => {
                named
                    .pools
                    .push((namespace.clone(), vc.to_owned(), pool.to_owned()));
            }
            Some(several) if several.len() > 1 => {
                named.ambiguous.push((label.clone(), several.to_vec()));
            }
            _ => {}
        }
    }
    named.pools.sort();
    named
}

/// The warnings for what could not be listed, each saying to import by id.
fn skipped(named: &Named) -> Diagnostics {
    let mut d = Diagnostics::new();
    if !named.shortened.is_empty() {
        d.push(Diagnostic::warning(
            "Node Pools Not Listed",
            format!(
                "{TYPE_NAME}: the pool label(s) {} were shortened with a hash and do not carry \
                 the pool's name; import such a pool by `<host namespace>/<virtual \
                 cluster>/<pool>`.",
                named.shortened.join(", ")
            ),
        ));
    }
    for (label, namespaces) in &named.ambiguous {
        d.push(Diagnostic::warning(
            "Node Pool Owner Ambiguous",
            format!(
                "{TYPE_NAME}: virtual clusters of the same name live in namespaces {}, and \
                 the label {POOL}={label} does not say whose pool it is, so it is not listed; \
                 import it by id once you know its namespace.",
                namespaces.join(", ")
            ),
        ));
    }
    d
}

/// The diagnostic of a listing that failed.
fn listing_failed(e: impl std::fmt::Display) -> Diagnostics {
    Diagnostic::error("Node Pool Listing Failed", format!("{TYPE_NAME}: {e}.")).into()
}

#[async_trait]
impl<B: Backend> ListKind for GpuNodePoolList<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        list_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_filter(config)
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
        let only = req
            .config
            .get(VIRTUAL_CLUSTER_ID)
            .as_str()
            .and_then(VirtualClusterRef::parse);
        let selector = format!("{MANAGED_BY}={MANAGED_BY_VALUE},{VIRTUAL_CLUSTER}");
        let listed = async {
            let mut namespaces: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (namespace, labels) in host.list_namespaces(&selector).await? {
                if let Some(vc) = labels.get(VIRTUAL_CLUSTER) {
                    namespaces.entry(vc.clone()).or_default().push(namespace);
                }
            }
            let mut labels: BTreeSet<String> = host
                .list_nodes(POOL)
                .await?
                .iter()
                .filter_map(|n| n.label(POOL).map(str::to_owned))
                .collect();
            for np in host.list_node_pools(POOL).await? {
                if let Some(l) = np["metadata"]["labels"][POOL].as_str() {
                    labels.insert(l.to_owned());
                }
            }
            Ok::<_, crate::backends::kube::host::nodes::HostError>(pools_named(
                &labels,
                &namespaces,
            ))
        };
        let named = match listed.await {
            Ok(named) => named,
            Err(e) => {
                resp.diagnostics = listing_failed(e);
                return resp;
            }
        };
        let warnings = skipped(&named);
        let found = named
            .pools
            .into_iter()
            .filter(|(namespace, vc, _)| {
                only.as_ref()
                    .is_none_or(|o| o.namespace == *namespace && o.name == *vc)
            })
            .filter_map(|(namespace, vc, pool)| {
                Some(Found {
                    skeleton: import_skeleton(&format!("{namespace}/{vc}/{pool}")).ok()?,
                    display_name: format!("{pool} (virtual cluster {vc}, namespace {namespace})"),
                })
            });
        let host = host.as_ref();
        let mut resp = read_found(ctx, &req, found, |skeleton| async move {
            read(host, None, ctx, &skeleton).await
        })
        .await;
        resp.diagnostics.extend(warnings);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_names_a_pool_only_when_it_is_that_pools_label_and_one_tenants() {
        let namespaces = BTreeMap::from([
            ("team-a".to_owned(), vec!["vc-team-a".to_owned()]),
            ("team-b".to_owned(), vec!["vc-team-b".to_owned()]),
            (
                "twin".to_owned(),
                vec!["prod-twin".to_owned(), "test-twin".to_owned()],
            ),
        ]);
        let long = pool_label("team-a", &"p".repeat(70));
        let labels: BTreeSet<String> = [
            "team-a.train".to_owned(),
            "team-b.infer".to_owned(),
            // A virtual cluster no namespace holds any more.
            "gone.train".to_owned(),
            // Shortened with a hash: not this pool's name.
            long.clone(),
            "no-dot".to_owned(),
            // Two tenants' virtual clusters share the name: whose pool is it?
            "twin.train".to_owned(),
        ]
        .into();
        let named = pools_named(&labels, &namespaces);
        assert_eq!(
            named.pools,
            vec![
                ("vc-team-a".into(), "team-a".into(), "train".into()),
                ("vc-team-b".into(), "team-b".into(), "infer".into()),
            ]
        );
        assert_eq!(named.shortened, vec![long]);
        assert_eq!(
            named.ambiguous,
            vec![(
                "twin.train".to_owned(),
                vec!["prod-twin".to_owned(), "test-twin".to_owned()]
            )]
        );
        let warnings = format!("{:?}", skipped(&named));
        assert!(warnings.contains("prod-twin, test-twin"), "{warnings}");
    }

    #[test]
    fn a_filter_must_be_a_virtual_cluster_id() {
        let config = |id: &str| Value::object([("virtual_cluster_id", Value::string(id))]);
        assert!(!validate_filter(&config("vc-a/a")).has_error());
        assert!(validate_filter(&config("a")).has_error());
    }
}
