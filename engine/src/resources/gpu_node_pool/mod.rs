//! `gpufleet_gpu_node_pool`: GPU nodes for one virtual cluster.
//!
//! # Host pools
//!
//! A `host` pool claims free nodes of its GPU product: Ready, not cordoned, and without the
//! label `gpufleet.dev/pool`. Each claim is one node write guarded by the node's resource
//! version ([`claim`]), so concurrent applies never share a node; which free nodes are
//! claimed is decided by [`placement`] (pack or spread over racks or NVLink domains). A claim
//! is all or nothing: when there are not enough free nodes, the error says how many are free
//! and nothing stays claimed.
//!
//! The nodes a pool holds are found by `gpufleet.dev/pool` alone, and free nodes are matched
//! to the product through [`crate::catalog::lookup`]: once the GPU operator applies sharing,
//! GFD rewrites `nvidia.com/gpu.product` (`-SHARED`, `-MIG-<profile>`) and drops it while it
//! restarts. `gpus` counts physical GPUs ([`api::HostNode::physical_gpus`]), not the capacity
//! the device plugin advertises, which time-slicing multiplies and MIG empties.
//!
//! The nodes get the labels and taints of the virtual cluster's tier (read from its host
//! namespace, see [`node_config`]) and of the sharing mode: time-slicing sets
//! `nvidia.com/device-plugin.config` and writes the device plugin's config under the pool's
//! key in the ConfigMap `gpufleet-device-plugin-config` of the GPU Operator's namespace (a
//! merge patch of that one key, so pools never drop each other's keys), and points the
//! operator's ClusterPolicy at that ConfigMap ([`device_plugin`]); MIG sets
//! `nvidia.com/mig.config` to a config of the GPU Operator's default MIG configs and waits
//! until the MIG manager reports `nvidia.com/mig.config.state=success` on every node
//! ([`mig`]). What a node had before is recorded on it, and releasing the node restores it
//! exactly.
//!
//! Scaling down drains the emptiest nodes (cordon, evict through the Eviction API within
//! `drain_timeout`) and releases them; destroying drains and releases every node and removes
//! the ConfigMap key.
//!
//! # Auto pools
//!
//! An `auto` pool server-side-applies a Karpenter `NodePool` ([`karpenter`]) and reports the
//! nodes Karpenter launched for it.
//!
//! # BCM pools
//!
//! A `bcm` pool first holds bare-metal servers in Base Command Manager ([`bcm`]): it claims
//! free servers of its GPU product for its virtual cluster (placed by their BCM rack),
//! records itself on each device, powers them on or reboots them and waits until they are
//! `UP`; then it claims their host nodes (same names) with the labels and taints a `host`
//! pool sets. Not enough free servers is an error naming how many are free, at plan when BCM
//! can be asked, and nothing is claimed. Releasing a node (scale-down, destroy) releases the
//! host node as a `host` pool does, then wipes the server with the FULL reinstall
//! `gpufleet_bcm_node` uses and returns it to the free pool. An apply re-run after the
//! provider was killed adopts the servers already recorded for the pool.
//!
//! # Refresh and drift
//!
//! A refresh of a host pool lists the nodes labelled for it (one call) and reads the
//! namespace (one call). Nodes missing a label or taint the pool sets do not count: the
//! refreshed `node_count` is the number of correctly configured nodes, so the next plan shows
//! the difference and apply repairs the labels or claims replacements (preferring the nodes
//! the pool held before). A pool none of whose nodes is left reads as gone.
//!
//! # Boundaries
//!
//! The planner, placement, node configuration and claim logic see the cluster only through
//! [`api::HostApi`]; [`kube_api`] implements it on the API server and [`memory`] in memory.

pub mod api;
pub mod bcm;
pub mod claim;
pub mod device_plugin;
pub mod karpenter;
pub mod kube_api;
pub mod memory;
pub mod mig;
pub mod node_config;
mod ops;
pub mod placement;
mod product;
pub mod schema;
pub mod spec;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

pub use device_plugin::{CONFIG_MAP as DEVICE_PLUGIN_CONFIG_MAP, time_slicing_config};
pub use ops::allocatable;

use crate::{
    backends::bcm::{BcmApi, BcmBackend},
    catalog,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    path::AttrPath,
    schema::Schema,
    timeouts::Timeouts,
    value::Value,
};

use self::{
    api::HostApi,
    kube_api::KubeHost,
    node_config::Tier,
    ops::refuse_private_host,
    spec::{Source, VirtualClusterRef},
};

/// The resource type name.
pub const TYPE_NAME: &str = "gpufleet_gpu_node_pool";

/// Default timeouts: updates and deletes include draining.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(10 * 60),
    read: Duration::from_secs(2 * 60),
    update: Duration::from_secs(20 * 60),
    delete: Duration::from_secs(20 * 60),
};

/// Where the kind gets its host cluster (and, for `bcm` pools, its BCM head node) from.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The host cluster for this operation, or the diagnostic naming the missing settings.
    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics>;

    /// The BCM head node for a `bcm` pool, or the diagnostic naming the missing settings.
    fn bcm(&self, _ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        Err(Diagnostic::error(
            "No BCM Head Node",
            format!("a {TYPE_NAME} with source = \"bcm\" needs the provider's bcm block."),
        )
        .into())
    }
}

/// The production backend: the shared client of the provider's `kubernetes` settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;

#[async_trait]
impl Backend for FromSettings {
    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics> {
        let client = crate::backends::kube::client(&ctx.settings, TYPE_NAME).await?;
        Ok(Arc::new(KubeHost::new(client)))
    }

    fn bcm(&self, ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        crate::backends::bcm::FromSettings.connect(ctx)
    }
}

/// A given host cluster and BCM head node, for tests and tools that bring their own.
#[derive(Debug, Clone)]
pub struct WithBcm<H, M> {
    /// The host cluster.
    pub host: Arc<H>,
    /// The BCM head node.
    pub bcm: Arc<M>,
}

#[async_trait]
impl<H: HostApi + 'static, M: BcmApi + 'static> Backend for WithBcm<H, M> {
    async fn connect(&self, _ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics> {
        Ok(Arc::clone(&self.host) as Arc<dyn HostApi>)
    }

    fn bcm(&self, _ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        Ok(Arc::clone(&self.bcm) as Arc<dyn BcmApi>)
    }
}

/// A given host, for tests and tools that bring their own.
#[async_trait]
impl<A: HostApi + 'static> Backend for Arc<A> {
    async fn connect(&self, _ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn HostApi>)
    }
}

/// The `gpufleet_gpu_node_pool` resource kind; the registry uses `GpuNodePool(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuNodePool<B = FromSettings>(pub B);

/// Attributes whose change needs the cluster to be told.
const REMOTE_ATTRIBUTES: &[&str] = &[
    "node_count",
    "autoscaling",
    "sharing",
    "placement",
    "node_labels",
    "node_taints",
    "karpenter_node_class",
    "karpenter",
];

/// Attributes whose change changes which nodes the pool holds.
const COUNT_ATTRIBUTES: &[&str] = &["node_count", "autoscaling"];

fn same(a: &Value, b: &Value, attrs: &[&str]) -> bool {
    attrs.iter().all(|x| a.get(x) == b.get(x))
}

fn plan_pool(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if let (Some(vc), Some(name)) = (
        planned.get("virtual_cluster_id").as_str(),
        planned.get("name").as_str(),
    ) {
        let id = format!("{vc}/{name}");
        planned.set_attr("id", Value::string(id));
    }
    let prior = &req.prior;
    if !prior.is_null() {
        let keep = |planned: &mut Value, attrs: &[&str]| {
            for a in attrs {
                if planned.get(a).is_unknown() {
                    planned.set_attr(a, prior.get(a).clone());
                }
            }
        };
        if same(&planned, prior, REMOTE_ATTRIBUTES) {
            keep(&mut planned, &["nodes", "gpus", "allocatable", "status"]);
        } else if same(&planned, prior, COUNT_ATTRIBUTES) {
            keep(&mut planned, &["nodes", "gpus"]);
            if planned.get("sharing") == prior.get("sharing") {
                keep(&mut planned, &["allocatable"]);
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

/// The plan-time tier check: a `host` pool for a `private` virtual cluster is refused on
/// `source`. Skipped when the cluster cannot be asked (settings not known yet, namespace not
/// created yet, cluster unreachable): apply checks again.
async fn check_tier(host: &dyn HostApi, config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let source = match config.get("source").as_str() {
        Some("auto") => Source::Auto,
        Some("host") | None if !config.get("source").is_unknown() => Source::Host,
        _ => return d,
    };
    let Some(vc) = config
        .get("virtual_cluster_id")
        .as_str()
        .and_then(VirtualClusterRef::parse)
    else {
        return d;
    };
    let tier = match host.namespace_labels(&vc.namespace).await {
        Ok(Some(labels)) => labels
            .get(crate::backends::kube::ISOLATION)
            .and_then(|t| Tier::parse(t)),
        _ => None,
    };
    if let Some(why) = tier.and_then(|t| refuse_private_host(t, source)) {
        d.push(
            Diagnostic::error("Host Nodes Not Allowed For Private Tier", why)
                .with_path(AttrPath::attr("source")),
        );
    }
    d
}

/// The plan-time BCM check: a `bcm` pool that needs more free BCM nodes than there are is
/// refused on `node_count`. Skipped when BCM cannot be asked: apply checks again.
async fn check_bcm_free(bcm: &dyn BcmApi, prior: &Value, config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    if config.get("source").as_str() != Some("bcm") {
        return d;
    }
    let (Some(want), Some(model)) = (
        config.get("node_count").as_i64(),
        config.get("gpu_product").as_str().and_then(catalog::lookup),
    ) else {
        return d;
    };
    let had = if prior.get("source").as_str() == Some("bcm") {
        prior.get("node_count").as_i64().unwrap_or(0)
    } else {
        0
    };
    let need = usize::try_from(want - had).unwrap_or(0);
    if need == 0 {
        return d;
    }
    if let Ok(free) = bcm::free_count(bcm, model.product).await
        && free < need
    {
        d.push(
            Diagnostic::error(
                "Not Enough Free BCM Nodes",
                format!(
                    "the pool needs {need} more BCM node(s) of {}, but only {free} {} free in \
                     Base Command Manager (held by no tenant and not being wiped). Lower \
                     node_count, or release nodes held by other tenants.",
                    model.product,
                    if free == 1 { "is" } else { "are" }
                ),
            )
            .with_path(AttrPath::attr("node_count")),
        );
    }
    d
}

/// The state skeleton for an import by `<namespace>/<virtual cluster>/<pool>`.
fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let parts: Vec<&str> = id.trim().split('/').collect();
    let ok = parts.len() == 3
        && VirtualClusterRef::parse(&format!("{}/{}", parts[0], parts[1])).is_some()
        && !parts[2].is_empty();
    if !ok {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by `<host namespace>/<virtual cluster>/<pool>`, e.g. \
                 `terraform import gpufleet_gpu_node_pool.train vc-team-a/team-a/train`; got \
                 {id:?}."
            ),
        )
        .into());
    }
    Ok(schema::pool_schema().block.complete(&Value::object([
        ("id", Value::string(id.trim())),
        ("name", Value::string(parts[2])),
        (
            "virtual_cluster_id",
            Value::string(format!("{}/{}", parts[0], parts[1])),
        ),
    ])))
}

#[async_trait]
impl<B: Backend> ResourceKind for GpuNodePool<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema::pool_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut d = spec::validate_pool(config);
        d.extend(karpenter::validate(config));
        d
    }

    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse {
        let mut resp = plan_pool(&req);
        resp.diagnostics
            .extend(product::check(&ctx.settings.gpu_products, &req.config));
        // The tier only matters when the pool is created or its virtual cluster changes.
        let vc_changed =
            req.prior.get("virtual_cluster_id") != req.config.get("virtual_cluster_id");
        if (req.prior.is_null() || vc_changed)
            && let Ok(host) = self.0.connect(ctx).await
        {
            resp.diagnostics
                .extend(check_tier(host.as_ref(), &req.config).await);
        }
        // A pool that starts time-slicing needs the device plugin set up for it.
        let time_slicing =
            |v: &Value| v.get("sharing").get("strategy").as_str() == Some("time-slicing");
        if time_slicing(&req.config)
            && !time_slicing(&req.prior)
            && let Ok(host) = self.0.connect(ctx).await
        {
            let setting = ctx
                .settings
                .get("kubernetes", device_plugin::NAMESPACE_SETTING);
            resp.diagnostics
                .extend(device_plugin::plan_check(host.as_ref(), setting).await);
        }
        if req.config.get("sharing").get("strategy").as_str() == Some("mig")
            && let Ok(host) = self.0.connect(ctx).await
        {
            resp.diagnostics
                .extend(mig::check_plan(host.as_ref(), &req.prior, &req.config).await);
        }
        if req.config.get("source").as_str() == Some("bcm")
            && let Ok(bcm) = self.0.bcm(ctx)
        {
            resp.diagnostics
                .extend(check_bcm_free(bcm.as_ref(), &req.prior, &req.config).await);
        }
        resp
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
        let value = if req.planned.is_null() {
            &req.prior
        } else {
            &req.planned
        };
        // Only a bcm pool needs the head node, and it cannot work without one.
        let bcm = if value.get("source").as_str() == Some("bcm") {
            match self.0.bcm(ctx) {
                Ok(b) => Some(b),
                Err(diagnostics) => {
                    return ApplyResponse {
                        new_state: req.prior,
                        diagnostics,
                    };
                }
            }
        } else {
            None
        };
        let bcm = bcm.as_deref();
        if req.planned.is_null() {
            ops::apply_delete(host.as_ref(), bcm, ctx, &req.prior).await
        } else {
            ops::apply_upsert(host.as_ref(), bcm, ctx, &req.prior, &req.planned).await
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        let host = match self.0.connect(ctx).await {
            Ok(host) => host,
            Err(diagnostics) => {
                return ReadResponse {
                    new_state: state,
                    diagnostics,
                };
            }
        };
        // A bcm pool whose host nodes are gone may still hold servers (a wipe to finish).
        let bcm = if state.get("source").as_str() == Some("bcm") {
            match self.0.bcm(ctx) {
                Ok(b) => Some(b),
                Err(diagnostics) => {
                    return ReadResponse {
                        new_state: state,
                        diagnostics,
                    };
                }
            }
        } else {
            None
        };
        ops::read(host.as_ref(), bcm.as_deref(), ctx, &state).await
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        self.0.connect(ctx).await?;
        import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["virtual_cluster_id", "name"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_ids_name_namespace_cluster_and_pool() {
        let s = import_skeleton("vc-a/a/train").expect("skeleton");
        assert_eq!(s.get("virtual_cluster_id"), &Value::string("vc-a/a"));
        assert_eq!(s.get("name"), &Value::string("train"));
        assert!(s.conforms_to(&schema::pool_schema().value_type()));
        assert!(import_skeleton("train").is_err());
    }
}
