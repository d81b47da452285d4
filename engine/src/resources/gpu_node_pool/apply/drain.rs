//! Letting nodes go: cordoned, drained within `drain_timeout`, returned to the fleet's
//! default MIG config, and released as they were found.

use std::time::Duration;

use tokio::time::Instant;

use crate::backends::kube::{
    POOL,
    host::nodes::{HostNode, HostNodes, NodeWrite},
};
use crate::resources::gpu_node_pool::{
    claim,
    error::StepError,
    mig,
    node_config::{cordon_write, is_releasing, release_write, releasing_write},
};
use crate::timeouts;

/// How often a drain looks at a node's pods again.
const DRAIN_POLL: Duration = Duration::from_millis(500);

/// Cordons `nodes`, evicts their pods until none is left or `timeout` passes, returns MIG
/// nodes to the fleet's default MIG config and waits for their MIG manager, then releases
/// them as found. Returns the nodes still held when it stops.
pub(super) async fn drain_and_release(
    api: &dyn HostNodes,
    pool: &str,
    nodes: Vec<HostNode>,
    timeout: Duration,
    release: &mut mig::Release,
) -> Result<(), (Vec<HostNode>, StepError)> {
    let mut cordoned = Vec::new();
    for n in &nodes {
        match claim::write_held(api, n, pool, cordon_write).await {
            Ok(Some(c)) => cordoned.push(c),
            Ok(None) => {}
            Err(e) => return Err((nodes.clone(), e.into())),
        }
    }
    let deadline = Instant::now() + timeout;
    loop {
        let mut left = 0;
        for n in &cordoned {
            let pods = api
                .pods_on(&n.name)
                .await
                .map_err(|e| (nodes.clone(), e.into()))?;
            for p in pods.iter().filter(|p| !p.stays) {
                left += 1;
                api.evict(p).await.map_err(|e| (nodes.clone(), e.into()))?;
            }
        }
        if left == 0 {
            break;
        }
        if Instant::now() >= deadline {
            return Err((
                nodes.clone(),
                StepError::Conflict(format!(
                    "draining took longer than drain_timeout ({}): {left} pod(s) were still \
                     on the nodes being released. The nodes stay cordoned and held; raise \
                     drain_timeout or move the pods, then apply again.",
                    timeouts::render(timeout)
                )),
            ));
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
    // A MIG manager keeps a layout until its label changes: the next tenant would get this
    // one's partitions. The nodes stay the pool's until the fleet's default is applied.
    let mut releasing = Vec::new();
    for n in &cordoned {
        let config = release.config.clone();
        match claim::rewrite(api, &n.name, pool, |x| releasing_write(x, &config, pool)).await {
            Ok(Some(x)) if is_releasing(&x) => releasing.push(x.name),
            Ok(_) => {}
            Err(e) => return Err((nodes.clone(), e.into())),
        }
    }
    let config = release.config.clone();
    let waited = if releasing.is_empty() {
        Ok(())
    } else {
        mig::wait_released(api, &releasing, &config, &mut release.waiting).await
    };
    // Every node the MIG manager is done with (or that needed none) is free again; those it
    // failed on stay held.
    let mut still = Vec::new();
    for n in &cordoned {
        let released = claim::rewrite(api, &n.name, pool, |x| {
            if mig::needs_release(x, &config) {
                NodeWrite::of(x)
            } else {
                release_write(x)
            }
        })
        .await
        .map_err(|e| (nodes.clone(), e.into()))?;
        if let Some(x) = released.filter(|x| x.label(POOL) == Some(pool)) {
            still.push(x);
        }
    }
    match waited {
        Ok(()) => Ok(()),
        Err(mig::WaitError::Host(e)) => Err((still, e.into())),
        Err(mig::WaitError::Mig(e)) => Err((still, StepError::Conflict(e.to_string()))),
    }
}
