//! Brings a pool to its spec on the cluster: the tenant's tier checked, a Karpenter NodePool
//! applied or nodes claimed, repaired and released (after BCM servers are provisioned for a
//! `bcm` pool), and other tenants' pods evicted from dedicated and private nodes.

use std::time::Duration;

use super::drain::drain_and_release;
use super::held_nodes::{held_now, list_held, list_product};
use super::sharing_config::write_sharing_config;
use crate::backends::{
    bcm::BcmApi,
    kube::{
        ISOLATION, POOL, VIRTUAL_CLUSTER,
        host::nodes::{HostError, HostNode, HostNodes},
    },
};
use crate::resources::gpu_node_pool::{
    bcm as bcm_pool,
    choices::{Source, Tier},
    claim::{self, ClaimRequest},
    device_plugin::ConfigHome,
    error::StepError,
    karpenter::{self, NODEPOOL_LABEL},
    mig,
    model::PoolSpec,
    node_config::{desired, held_write, is_free, is_releasing},
    validate::refuse_private_host,
};
use crate::tenancy::VirtualClusterRef;

/// The tier of the pool's virtual cluster, from its namespace.
async fn tier_of(api: &dyn HostNodes, vc: &VirtualClusterRef) -> Result<Tier, StepError> {
    let Some(labels) = api.namespace_labels(&vc.namespace).await? else {
        return Err(StepError::Conflict(format!(
            "the virtual cluster's namespace {} does not exist. Create the \
             gpufleet_virtual_cluster first (refer to its id, so Terraform orders them).",
            vc.namespace
        )));
    };
    if labels.get(VIRTUAL_CLUSTER).map(String::as_str) != Some(vc.name.as_str()) {
        return Err(StepError::Conflict(format!(
            "namespace {} is not the host namespace of virtual cluster {:?} (its label {} is \
             {:?}).",
            vc.namespace,
            vc.name,
            VIRTUAL_CLUSTER,
            labels.get(VIRTUAL_CLUSTER)
        )));
    }
    labels
        .get(ISOLATION)
        .and_then(|t| Tier::parse(t))
        .ok_or_else(|| {
            StepError::Conflict(format!(
                "namespace {} has no valid {ISOLATION} label (shared, dedicated or private).",
                vc.namespace
            ))
        })
}

/// What a converge has done so far, kept by the caller for the state it returns, also when
/// the converge fails.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// BCM nodes the pool holds.
    pub(super) bcm_held: usize,
    /// The tier the tenant's namespace showed.
    pub(super) tier_seen: Option<Tier>,
}

/// Brings the pool to `spec` on the cluster; returns the nodes it holds. On failure, also the
/// nodes held at that point.
pub(super) async fn converge(
    api: &dyn HostNodes,
    bcm: Option<&dyn BcmApi>,
    spec: &PoolSpec,
    prefer: &[String],
    plugin: Option<&ConfigHome>,
    progress: &mut Progress,
    release: &mut mig::Release,
) -> Result<Vec<HostNode>, (Vec<HostNode>, StepError)> {
    let bcm_held = &mut progress.bcm_held;
    let tier = tier_of(api, &spec.vc).await.map_err(|e| (Vec::new(), e))?;
    progress.tier_seen = Some(tier);
    if let Some(planned) = spec.isolation
        && planned != tier
    {
        return Err((
            Vec::new(),
            StepError::Conflict(format!(
                "the pool was planned for a {} virtual cluster, but namespace {} says {} \
                 ({ISOLATION}). Plan again; set isolation to the virtual cluster's isolation.",
                planned.as_str(),
                spec.vc.namespace,
                tier.as_str()
            )),
        ));
    }
    if let Some(why) = refuse_private_host(tier, spec.source) {
        return Err((Vec::new(), StepError::Conflict(why)));
    }
    let want = desired(spec, tier);
    let pool = spec.pool_label();
    if spec.source == Source::Auto {
        write_sharing_config(api, spec, plugin)
            .await
            .map_err(|e| (Vec::new(), e))?;
        api.apply_node_pool(&karpenter::node_pool(spec, &want))
            .await
            .map_err(|e| (Vec::new(), e.into()))?;
        let launched = api
            .list_nodes(&format!("{NODEPOOL_LABEL}={}", spec.node_pool_name()))
            .await
            .map_err(|e| (Vec::new(), e.into()))?;
        return Ok(launched);
    }
    let target = spec.target() as usize;
    // A bcm pool provisions its BCM nodes first; only their host nodes may be claimed.
    let bcm_names = match (spec.source, bcm) {
        (Source::Bcm, Some(bcm)) => {
            let names = match provision_bcm(api, bcm, spec, target, bcm_held).await {
                Ok(names) => names,
                Err(e) => return Err((held_now(api, &pool).await, e)),
            };
            Some((bcm, names))
        }
        (Source::Bcm, None) => {
            return Err((
                Vec::new(),
                StepError::Conflict("a bcm pool needs the provider's bcm settings.".to_owned()),
            ));
        }
        _ => None,
    };
    let (releasing, mut held): (Vec<HostNode>, Vec<HostNode>) = list_held(api, &pool)
        .await
        .map_err(|e| (Vec::new(), e.into()))?
        .into_iter()
        .partition(is_releasing);
    // Nodes an earlier apply began to let go are finished first: they serve the pool no more.
    if !releasing.is_empty() {
        let all: Vec<HostNode> = releasing.iter().chain(&held).cloned().collect();
        if let Err((_, e)) =
            drain_and_release(api, &pool, releasing, spec.drain_timeout, release).await
        {
            return Err((all, e));
        }
    }
    // Repair drift on what is held.
    let mut repaired = Vec::with_capacity(held.len());
    for n in &held {
        match claim::write_held(api, n, &pool, |x| held_write(x, &want)).await {
            Ok(Some(n)) => repaired.push(n),
            Ok(None) => {}
            Err(e) => return Err((held.clone(), e.into())),
        }
    }
    held = repaired;
    let release_config = release.config.clone();
    if held.len() < target {
        let mut others = list_product(api, spec.model)
            .await
            .map_err(|e| (held.clone(), e.into()))?;
        let prefer = match &bcm_names {
            Some((_, names)) => {
                others.retain(|n| names.contains(&n.name));
                names.as_slice()
            }
            None => prefer,
        };
        let req = ClaimRequest {
            product: spec.model.product,
            pool: &pool,
            want: &want,
            topology_key: spec.topology_key.as_deref(),
            policy: spec.policy,
            prefer,
            release: &release_config,
        };
        let got = match claim::claim(api, req, others, &held, target - held.len()).await {
            Ok(got) => got,
            Err(e) => {
                // A claim releases what it took when it fails, but that release can fail
                // too: record every node that still carries the pool's label, so destroy
                // (or the next apply) finds them.
                let now = list_held(api, &pool).await.unwrap_or_else(|_| held.clone());
                return Err((now, e.into()));
            }
        };
        held.extend(got.nodes);
    } else if held.len() > target {
        // The emptiest go first.
        let mut load = Vec::with_capacity(held.len());
        for n in &held {
            let pods = api
                .pods_on(&n.name)
                .await
                .map_err(|e| (held.clone(), e.into()))?;
            load.push((pods.iter().filter(|p| !p.stays).count(), n.name.clone()));
        }
        load.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let going: Vec<String> = load
            .into_iter()
            .take(held.len() - target)
            .map(|(_, n)| n)
            .collect();
        let (going, keep): (Vec<HostNode>, Vec<HostNode>) =
            held.into_iter().partition(|n| going.contains(&n.name));
        if let Err((mut still, e)) =
            drain_and_release(api, &pool, going, spec.drain_timeout, release).await
        {
            still.extend(keep);
            return Err((still, e));
        }
        held = keep;
    }
    if let Some((bcm, names)) = &bcm_names {
        // BCM nodes whose host node the pool does not hold (scale-down, surplus) are wiped,
        // and so are those an earlier scale-down left half-wiped.
        let surplus: Vec<String> = names
            .iter()
            .filter(|h| !held.iter().any(|n| &n.name == *h))
            .cloned()
            .collect();
        bcm_pool::release(*bcm, spec, Some(&surplus))
            .await
            .map_err(|e| (held.clone(), e))?;
        *bcm_held = names.len() - surplus.len();
    }
    if matches!(tier, Tier::Dedicated | Tier::Private) {
        evict_foreign_pods(api, &held, &spec.vc.namespace)
            .await
            .map_err(|e| (held.clone(), e.into()))?;
    }
    write_sharing_config(api, spec, plugin)
        .await
        .map_err(|e| (held.clone(), e))?;
    Ok(held)
}

/// Evicts the pods of anyone but the tenant from its dedicated or private nodes. The taint
/// keeps new ones off, but a node claimed while it ran other pods (or a pod placed there
/// since by hand) would share the tenant's GPUs and node. DaemonSet and mirror pods stay, as
/// in a drain; the Eviction API keeps disruption budgets, and a pod a budget protects for now
/// is left for the next apply.
async fn evict_foreign_pods(
    api: &dyn HostNodes,
    held: &[HostNode],
    tenant_namespace: &str,
) -> Result<(), HostError> {
    for n in held {
        for p in api.pods_on(&n.name).await? {
            if p.stays || p.namespace == tenant_namespace {
                continue;
            }
            if api.evict(&p).await? {
                tracing::info!(
                    target: "gpufleet::gpu_node_pool",
                    "evicted pod {}/{} from {}, held for {tenant_namespace} alone",
                    p.namespace,
                    p.name,
                    n.name
                );
            } else {
                tracing::warn!(
                    target: "gpufleet::gpu_node_pool",
                    "a disruption budget keeps pod {}/{} on {} for now; the next apply evicts it",
                    p.namespace,
                    p.name,
                    n.name
                );
            }
        }
    }
    Ok(())
}

/// How often the host nodes of freshly provisioned BCM nodes are looked for.
const JOIN_POLL: Duration = Duration::from_secs(2);

/// Provisions the pool's BCM nodes, then waits until each has a host node that is Ready and
/// free (or already the pool's). Returns their hostnames.
async fn provision_bcm(
    api: &dyn HostNodes,
    bcm: &dyn BcmApi,
    spec: &PoolSpec,
    target: usize,
    bcm_held: &mut usize,
) -> Result<Vec<String>, StepError> {
    let names = bcm_pool::provision(bcm, spec, target, bcm_held).await?;
    let pool = spec.pool_label();
    loop {
        let held = list_held(api, &pool).await?;
        let joining: Vec<&String> = names
            .iter()
            .filter(|name| !held.iter().any(|n| &n.name == *name))
            .collect();
        if joining.is_empty() {
            return Ok(names);
        }
        let nodes = list_product(api, spec.model).await?;
        let mut waiting = 0;
        for name in joining {
            match nodes.iter().find(|n| &n.name == name) {
                Some(n) if is_free(n) || n.label(POOL) == Some(pool.as_str()) => {}
                Some(n) if n.label(POOL).is_some() => {
                    return Err(StepError::Conflict(format!(
                        "the host node {name} of a BCM node this pool holds is claimed by pool \
                         {:?}.",
                        n.label(POOL).unwrap_or_default()
                    )));
                }
                _ => waiting += 1,
            }
        }
        if waiting == 0 {
            return Ok(names);
        }
        tracing::debug!(
            waiting,
            "waiting for provisioned BCM nodes to join the host cluster"
        );
        tokio::time::sleep(JOIN_POLL).await;
    }
}
