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
//! restarts. `gpus` counts physical GPUs ([`HostNode::physical_gpus`](crate::backends::kube::host::nodes::HostNode::physical_gpus)), not the capacity
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
//! [`HostNodes`]; [`KubeHost`](crate::backends::kube::host::KubeHost) implements it on the API server and, for the engine's tests,
//! `MemoryHost` in memory.
//!
//! The kind is laid out as `schema`, `config` (the attributes decoded once, for validate and
//! plan), `model` (the pool apply builds from a known plan), `validate`, `plan`, `apply` and
//! `read`, beside its domain modules.

mod apply;
pub mod bcm;
mod choices;
pub mod claim;
mod config;
pub mod device_plugin;
mod error;
mod gpus;
pub mod karpenter;
pub mod list;
pub mod mig;
mod model;
pub mod node_config;
pub mod placement;
mod plan;
mod product;
mod read;
pub mod schema;
mod validate;

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

pub use device_plugin::{CONFIG_MAP as DEVICE_PLUGIN_CONFIG_MAP, time_slicing_config};
pub use model::allocatable;
pub use validate::validate_pool;

use self::{
    apply::{apply_delete, apply_upsert},
    choices::Source,
    config::PoolConfig,
    plan::plan_pool,
    read::{import_skeleton, read},
};
use crate::{
    backends::{Connect, bcm::BcmApi, kube::host::nodes::HostNodes},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    schema::Schema,
    timeouts::Timeouts,
    value::Value,
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

/// Where the kind gets its host cluster ([`Connect`] of [`HostNodes`]) and, for `bcm` pools,
/// its BCM head node from.
pub trait Backend: Connect<dyn HostNodes> {
    /// The BCM head node for a `bcm` pool, or the diagnostic naming the missing settings.
    fn bcm(&self, _ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        Err(Diagnostic::error(
            "No BCM Head Node",
            format!("a {TYPE_NAME} with source = \"bcm\" needs the provider's bcm block."),
        )
        .into())
    }
}

/// The production backend: the shared clients of the provider's `kubernetes` and `bcm`
/// settings.
pub use crate::backends::FromSettings;

impl Backend for FromSettings {
    fn bcm(&self, ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        crate::backends::bcm::connect_from_settings(ctx)
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
impl<H: HostNodes + 'static, M: BcmApi + 'static> Connect<dyn HostNodes> for WithBcm<H, M> {
    async fn connect(
        &self,
        _ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn HostNodes>, Diagnostics> {
        Ok(Arc::clone(&self.host) as Arc<dyn HostNodes>)
    }
}

impl<H: HostNodes + 'static, M: BcmApi + 'static> Backend for WithBcm<H, M> {
    fn bcm(&self, _ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        Ok(Arc::clone(&self.bcm) as Arc<dyn BcmApi>)
    }
}

/// A given host, for tests and tools that bring their own.
impl<A: HostNodes + 'static> Backend for Arc<A> {}

/// The `gpufleet_gpu_node_pool` resource kind; the registry uses `GpuNodePool(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuNodePool<B = FromSettings>(pub B);

#[async_trait]
impl<B: Backend> ResourceKind for GpuNodePool<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema::pool_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        let mut d = validate_pool(config);
        d.extend(karpenter::validate(&PoolConfig::decode(config)));
        d
    }

    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse {
        let resp = plan_pool(&self.0, ctx, &req).await;
        // Benchmarks on this pool check their size against what this run plans for it.
        let planned = PoolConfig::decode(&resp.planned);
        let prior = PoolConfig::decode(&req.prior);
        if let Some(id) = planned.id.value()
            && (req.prior.is_null()
                || planned.node_count != prior.node_count
                || planned.autoscaling != prior.autoscaling)
        {
            let count = planned
                .node_count
                .value()
                .copied()
                .filter(|_| planned.autoscaling.is_null());
            ctx.pools.planned(id, count);
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
        let value = if req.planned.is_null() {
            &req.prior
        } else {
            &req.planned
        };
        // Only a bcm pool needs the head node, and it cannot work without one.
        let pool = PoolConfig::decode(value);
        let bcm = if pool.source_is(Source::Bcm) {
            match self.0.bcm(ctx) {
                Ok(b) => Some(b),
                Err(diagnostics) => {
                    return ApplyResponse::refused(req.prior, diagnostics);
                }
            }
        } else {
            None
        };
        let bcm = bcm.as_deref();
        if req.planned.is_null() {
            apply_delete(host.as_ref(), bcm, ctx, &req.prior).await
        } else {
            let resp = apply_upsert(host.as_ref(), bcm, ctx, &req.prior, &req.planned).await;
            if let Some(id) = pool.id.value() {
                ctx.pools.applied(id);
            }
            resp
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        let host = match self.0.connect_reader(ctx, TYPE_NAME).await {
            Ok(host) => host,
            Err(diagnostics) => {
                return ReadResponse::refused(state, diagnostics);
            }
        };
        // A bcm pool whose host nodes are gone may still hold servers (a wipe to finish).
        let bcm = if PoolConfig::decode(&state).source_is(Source::Bcm) {
            match self.0.bcm(ctx) {
                Ok(b) => Some(b),
                Err(diagnostics) => {
                    return ReadResponse::refused(state, diagnostics);
                }
            }
        } else {
            None
        };
        read(host.as_ref(), bcm.as_deref(), ctx, &state).await
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        self.0.connect(ctx, TYPE_NAME).await?;
        import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["virtual_cluster_id", "name"]
    }
}
