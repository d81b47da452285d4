//! Claiming and releasing nodes, one guarded write per node.
//!
//! A claim writes the pool's labels, taints and originals record in one write that the API
//! server accepts only while the node still has the resource version the claim read. Two
//! pools that pick the same free node therefore cannot both get it: the second write fails
//! with a conflict, the loser reads the node again, and if another pool holds it now, picks
//! another free node (placement is re-run without it). A conflict from an unrelated change
//! (a status heartbeat bumps the resource version too) is retried on the fresh copy.
//!
//! A claim of `n` nodes is all or nothing: when the free nodes run out part-way, the nodes
//! already claimed are released again before the error is returned. A node the claim gave a
//! MIG config is not free again at once: it gets the fleet's default MIG config and stays the
//! pool's, marked releasing, for the pool's next apply or destroy to finish
//! ([`super::mig`]).

use super::{
    choices::Policy,
    node_config::{Desired, held_write, is_free, is_releasing, release_write, releasing_write},
    placement,
};
use crate::backends::kube::{
    POOL,
    host::nodes::{HostError, HostNode, HostNodes, NodeWrite, WriteOutcome},
};

/// How many times one node write is retried after conflicts before giving up.
const MAX_RETRIES: u32 = 50;

/// Why a claim or release stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Fewer free nodes than asked for; nothing was claimed.
    #[error(
        "not enough free nodes of {product}: the pool needs {need} more, but only {free} {are} free (Ready, not cordoned, held by no pool). Lower node_count, or release nodes from other pools"
    , are = if *free == 1 { "is" } else { "are" })]
    NotEnough {
        /// GPU product.
        product: String,
        /// Nodes still needed.
        need: usize,
        /// Nodes free when the claim gave up.
        free: usize,
    },
    /// A node kept changing under every retry.
    #[error("failed to write node {node}: it changed {MAX_RETRIES} times while being written")]
    Contended {
        /// Node name.
        node: String,
    },
    /// The candidate nodes do not all carry the topology label placement needs.
    #[error("cannot place the pool's nodes by topology: {0}")]
    Topology(String),
    /// A host-cluster call failed.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// What a claim achieved.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    /// The nodes now held, as written.
    pub nodes: Vec<HostNode>,
    /// Writes that lost a race and were retried or redirected.
    pub conflicts: u32,
}

/// The inputs of one claim.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    /// GPU product, for messages.
    pub product: &'a str,
    /// The pool's `gpufleet.dev/pool` value.
    pub pool: &'a str,
    /// What each node must carry.
    pub want: &'a Desired,
    /// Topology label for placement (`placement.topology_key`); `None` finds it
    /// ([`placement::topology_key`]).
    pub topology_key: Option<&'a str>,
    /// Placement policy.
    pub policy: Policy,
    /// Nodes to take first when they are free (nodes the pool held before they drifted).
    pub prefer: &'a [String],
    /// The MIG config a node the claim gives back gets ([`super::mig::release_config`]).
    pub release: &'a str,
}

/// Claims `need` more nodes out of `candidates` (nodes of the product, as listed), next to
/// the `held` ones. All or nothing.
pub async fn claim(
    api: &dyn HostNodes,
    req: ClaimRequest<'_>,
    candidates: Vec<HostNode>,
    held: &[HostNode],
    need: usize,
) -> Result<Claimed, ClaimError> {
    let mut free: Vec<HostNode> = candidates.into_iter().filter(is_free).collect();
    if free.len() < need {
        return Err(ClaimError::NotEnough {
            product: req.product.to_owned(),
            need,
            free: free.len(),
        });
    }
    let candidates: Vec<&HostNode> = free.iter().chain(held).collect();
    let key = placement::topology_key(&candidates, req.topology_key)
        .map_err(ClaimError::Topology)?
        .unwrap_or_default();
    if free.len() > need {
        // With a choice, placement prefers nodes it need not clear of others' pods.
        let movable = api.movable_pods().await?;
        for n in &mut free {
            n.movable_pods = movable.get(&n.name).copied().unwrap_or(0);
        }
    }
    let mut out = Claimed::default();
    while out.nodes.len() < need {
        let pick = req
            .prefer
            .iter()
            .find(|p| free.iter().any(|n| &n.name == *p))
            .cloned()
            .or_else(|| {
                let f: Vec<&HostNode> = free.iter().collect();
                let h: Vec<&HostNode> = held.iter().chain(&out.nodes).collect();
                placement::choose(&f, &h, 1.max(need - out.nodes.len()), &key, req.policy)
                    .into_iter()
                    .next()
            });
        let Some(name) = pick else {
            let got = out.nodes.len();
            rollback(api, req, &out.nodes).await;
            return Err(ClaimError::NotEnough {
                product: req.product.to_owned(),
                need,
                free: got,
            });
        };
        let Some(pos) = free.iter().position(|n| n.name == name) else {
            continue;
        };
        let node = free.swap_remove(pos);
        let write = held_write(&node, req.want);
        match api.write_node(&node, &write).await {
            Ok(WriteOutcome::Written(n)) => out.nodes.push(n),
            Ok(WriteOutcome::Gone) => {}
            Ok(WriteOutcome::Conflict) => {
                out.conflicts += 1;
                match api.get_node(&node.name).await {
                    Ok(Some(fresh)) if is_free(&fresh) => free.push(fresh),
                    Ok(_) => {
                        tracing::debug!(node = %node.name, "lost the node to another claim");
                    }
                    Err(e) => {
                        rollback(api, req, &out.nodes).await;
                        return Err(e.into());
                    }
                }
            }
            Err(e) => {
                rollback(api, req, &out.nodes).await;
                return Err(e.into());
            }
        }
    }
    Ok(out)
}

/// Releases what a failed claim took; failures are logged (the nodes stay labelled for the
/// pool and a later apply or destroy finds them by label). A node given a MIG config gets the
/// fleet's default instead and stays the pool's, marked releasing: waiting for its MIG
/// manager is the next apply's or destroy's.
async fn rollback(api: &dyn HostNodes, req: ClaimRequest<'_>, nodes: &[HostNode]) {
    for n in nodes {
        let result = match rewrite(api, &n.name, req.pool, |x| {
            releasing_write(x, req.release, req.pool)
        })
        .await
        {
            Ok(Some(x)) if is_releasing(&x) => continue,
            Ok(_) => rewrite(api, &n.name, req.pool, release_write).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(node = %n.name, "could not release a node after a failed claim: {e}");
        }
    }
}

/// Reads `name` and writes `f(node)` on it, retrying on conflicts, while the node is held by
/// `pool`. `Ok(None)` when the node is gone or no longer the pool's.
pub async fn rewrite(
    api: &dyn HostNodes,
    name: &str,
    pool: &str,
    f: impl Fn(&HostNode) -> NodeWrite,
) -> Result<Option<HostNode>, ClaimError> {
    for _ in 0..MAX_RETRIES {
        let Some(node) = api.get_node(name).await? else {
            return Ok(None);
        };
        if node.label(POOL) != Some(pool) {
            return Ok(None);
        }
        let w = f(&node);
        if w.matches(&node) {
            return Ok(Some(node));
        }
        match api.write_node(&node, &w).await? {
            WriteOutcome::Written(n) => return Ok(Some(n)),
            WriteOutcome::Gone => return Ok(None),
            WriteOutcome::Conflict => {}
        }
    }
    Err(ClaimError::Contended {
        node: name.to_owned(),
    })
}

/// Writes `f(node)` on a node already read, retrying through [`rewrite`] on a conflict.
pub async fn write_held(
    api: &dyn HostNodes,
    node: &HostNode,
    pool: &str,
    f: impl Fn(&HostNode) -> NodeWrite,
) -> Result<Option<HostNode>, ClaimError> {
    let w = f(node);
    if w.matches(node) {
        return Ok(Some(node.clone()));
    }
    match api.write_node(node, &w).await? {
        WriteOutcome::Written(n) => Ok(Some(n)),
        WriteOutcome::Gone => Ok(None),
        WriteOutcome::Conflict => rewrite(api, &node.name, pool, f).await,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backends::kube::host::memory::MemoryHost;

    fn want(pool: &str) -> Desired {
        Desired {
            labels: [(POOL.to_owned(), pool.to_owned())].into(),
            taints: Vec::new(),
            settings: None,
        }
    }

    fn req<'a>(pool: &'a str, want: &'a Desired) -> ClaimRequest<'a> {
        ClaimRequest {
            product: "NVIDIA-L40S",
            pool,
            want,
            topology_key: None,
            policy: Policy::Pack,
            prefer: &[],
            release: "all-disabled",
        }
    }

    #[tokio::test]
    async fn a_lost_race_moves_on_to_another_free_node() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 3)]);
        let nodes = host.nodes_now();
        // Another pool takes the node placement would pick first, after we listed.
        host.claim_behind_the_back("gpu-r1-00", "other.pool");
        let w = want("a.p");
        let got = claim(host.as_ref(), req("a.p", &w), nodes, &[], 2)
            .await
            .expect("claim");
        let names: Vec<&str> = got.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["gpu-r1-01", "gpu-r1-02"]);
        assert_eq!(got.conflicts, 1);
        assert_eq!(host.holder("gpu-r1-00").as_deref(), Some("other.pool"));
    }

    #[tokio::test]
    async fn a_heartbeat_conflict_is_retried_on_the_same_node() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 1)]);
        let nodes = host.nodes_now();
        host.touch("gpu-r1-00");
        let w = want("a.p");
        let got = claim(host.as_ref(), req("a.p", &w), nodes, &[], 1)
            .await
            .expect("claim");
        assert_eq!(got.nodes[0].name, "gpu-r1-00");
        assert_eq!(got.conflicts, 1);
    }

    #[tokio::test]
    async fn running_out_part_way_releases_what_was_claimed() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 2)]);
        let before = host.nodes_now();
        host.claim_behind_the_back("gpu-r1-01", "other.pool");
        let w = want("a.p");
        let err = claim(host.as_ref(), req("a.p", &w), before.clone(), &[], 2)
            .await
            .expect_err("not enough");
        assert!(
            matches!(err, ClaimError::NotEnough { free: 1, .. }),
            "{err}"
        );
        assert_eq!(host.holder("gpu-r1-00"), None);
        let after = host.nodes_now();
        assert_eq!(after[0].labels, before[0].labels);
        assert!(
            !after[0]
                .annotations
                .contains_key(super::super::node_config::ORIGINALS_ANNOTATION)
        );
    }

    #[tokio::test]
    async fn concurrent_claims_never_share_a_node() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 8), ("r2", 8)]);
        let mut tasks = Vec::new();
        for i in 0..8 {
            let host: Arc<MemoryHost> = Arc::clone(&host);
            tasks.push(tokio::spawn(async move {
                let pool = format!("t{i}.p");
                let w = want(&pool);
                let nodes = host.nodes_now();
                tokio::task::yield_now().await;
                claim(host.as_ref(), req(&pool, &w), nodes, &[], 2)
                    .await
                    .map(|c| c.nodes.len())
            }));
        }
        for t in tasks {
            assert_eq!(t.await.expect("task").expect("claim"), 2);
        }
        let mut holders: Vec<String> = host
            .nodes_now()
            .iter()
            .filter_map(|n| n.label(POOL).map(str::to_owned))
            .collect();
        holders.sort();
        assert_eq!(holders.len(), 16);
        holders.dedup();
        assert_eq!(holders.len(), 8, "each pool holds exactly two nodes");
    }
}
