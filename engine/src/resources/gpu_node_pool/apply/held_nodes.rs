//! The nodes a pool holds and the nodes of its product, as the cluster lists them.

use crate::backends::kube::{
    GPU_PRODUCT_LABEL, POOL,
    host::nodes::{HostError, HostNode, HostNodes},
};
use crate::catalog::GpuModel;

/// The nodes holding the pool label now, for a state after a failure (empty when the cluster
/// cannot say).
pub(super) async fn held_now(api: &dyn HostNodes, pool: &str) -> Vec<HostNode> {
    list_held(api, pool).await.unwrap_or_default()
}

/// The nodes the pool holds, found by its label alone: GFD rewrites the product label of
/// shared nodes (`-SHARED`, `-MIG-<profile>`) and removes it while it restarts.
pub(crate) async fn list_held(api: &dyn HostNodes, pool: &str) -> Result<Vec<HostNode>, HostError> {
    api.list_nodes(&format!("{POOL}={pool}")).await
}

/// The nodes of `model`, held or free. A selector only matches the product label exactly, so
/// every GPU node is listed (one call) and matched through the catalog, which ignores the
/// suffixes GFD adds to shared nodes.
pub(crate) async fn list_product(
    api: &dyn HostNodes,
    model: &GpuModel,
) -> Result<Vec<HostNode>, HostError> {
    let nodes = api.list_nodes(GPU_PRODUCT_LABEL).await?;
    Ok(nodes.into_iter().filter(|n| n.is_product(model)).collect())
}
