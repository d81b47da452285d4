//! Create, update and destroy: bringing the pool's nodes (and, for a `bcm` pool, its BCM
//! servers) in line with its configuration, within the operation's timeout.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME, bcm as bcm_pool,
    choices::{Source, Tier},
    claim::{self, ClaimRequest},
    config::{PoolConfig, Strategy},
    device_plugin::{self, CONFIG_MAP, ConfigHome},
    error::StepError,
    karpenter::{self, NODEPOOL_LABEL},
    mig,
    model::{PoolSpec, Sharing, state_of, status_for},
    node_config::{
        cordon_write, desired, held_write, is_free, is_releasing, release_write, releasing_write,
    },
    schema,
    validate::refuse_private_host,
};
use crate::{
    apply::{bounded, failed},
    backends::{
        bcm::BcmApi,
        kube::{
            GPU_PRODUCT_LABEL, ISOLATION, POOL, VIRTUAL_CLUSTER,
            host::nodes::{HostError, HostNode, HostNodes, NodeWrite},
        },
    },
    catalog::GpuModel,
    context::Context,
    diag::Diagnostic,
    kinds::ApplyResponse,
    provider_config::{KUBERNETES_BLOCK, ProviderSettings},
    tenancy::VirtualClusterRef,
    timeouts::{self, Operation, Timeouts},
    value::Value,
};

/// How often a drain looks at a node's pods again.
const DRAIN_POLL: Duration = Duration::from_millis(500);

/// How often a deleted `auto` pool's NodeClaims are counted while Karpenter removes them.
const LAUNCHED_POLL: Duration = Duration::from_secs(1);

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

/// The provider setting naming the device plugin's namespace, if set.
pub(super) fn namespace_setting(settings: &ProviderSettings) -> Option<String> {
    settings
        .get(KUBERNETES_BLOCK, device_plugin::NAMESPACE_SETTING)
        .map(str::to_owned)
}

/// Where the pool's time-slicing config goes: prepared (the GPU Operator pointed at it) when
/// the pool time-slices, found when it stops doing so (to remove its key), `None` otherwise.
async fn config_home(
    api: &dyn HostNodes,
    spec: &PoolSpec,
    had_time_slicing: bool,
    setting: Option<&str>,
) -> Result<Option<ConfigHome>, StepError> {
    if matches!(spec.sharing, Sharing::TimeSlicing(_)) {
        return Ok(Some(device_plugin::prepare(api, setting).await?));
    }
    Ok(if had_time_slicing {
        home_to_clean(api, setting).await
    } else {
        None
    })
}

/// Where a key being removed is; `None` when that cannot be found any more (the operator was
/// uninstalled, say): a key nothing reads is harmless, and must not block a destroy.
pub(super) async fn home_to_clean(
    api: &dyn HostNodes,
    setting: Option<&str>,
) -> Option<ConfigHome> {
    match device_plugin::locate(api, setting).await {
        Ok(home) => Some(home),
        Err(e) => {
            tracing::warn!(
                target: "gpufleet::gpu_node_pool",
                "left the pool's time-slicing config key in place: {e}"
            );
            None
        }
    }
}

/// Writes the pool's key of the device plugin's ConfigMap, or removes it when the pool no
/// longer time-slices.
async fn write_sharing_config(
    api: &dyn HostNodes,
    spec: &PoolSpec,
    home: Option<&ConfigHome>,
) -> Result<(), StepError> {
    let Some(home) = home else {
        return Ok(());
    };
    let config = match spec.sharing {
        Sharing::TimeSlicing(r) => Some(device_plugin::time_slicing_config(r)),
        _ => None,
    };
    api.set_config_key(
        &home.namespace,
        CONFIG_MAP,
        &spec.pool_label(),
        config.as_deref(),
    )
    .await?;
    Ok(())
}

/// Cordons `nodes`, evicts their pods until none is left or `timeout` passes, returns MIG
/// nodes to the fleet's default MIG config and waits for their MIG manager, then releases
/// them as found. Returns the nodes still held when it stops.
async fn drain_and_release(
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

/// What a converge has done so far, kept by the caller for the state it returns, also when
/// the converge fails.
#[derive(Debug, Default)]
struct Progress {
    /// BCM nodes the pool holds.
    bcm_held: usize,
    /// The tier the tenant's namespace showed.
    tier_seen: Option<Tier>,
}

/// Brings the pool to `spec` on the cluster; returns the nodes it holds. On failure, also the
/// nodes held at that point.
async fn converge(
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

/// Waits until the instances Karpenter launched for a deleted NodePool are gone: once the
/// NodePool is deleted, Karpenter drains each node, has the cloud terminate the instance, and
/// only then lets its NodeClaim go. A destroy that returned earlier would leave GPUs running
/// (and billed) with no pool in the state. The operation's deadline bounds the wait (a
/// Karpenter that is not running never lets them go); an apply after a timeout deletes
/// nothing new and waits again.
async fn await_instances_gone(api: &dyn HostNodes, node_pool: &str) -> Result<(), StepError> {
    loop {
        let left = api.node_claims(node_pool).await?;
        if left.is_empty() {
            return Ok(());
        }
        tracing::debug!(
            target: "gpufleet::gpu_node_pool",
            node_pool,
            claims = left.len(),
            "waiting for Karpenter to terminate the NodePool's instances"
        );
        tokio::time::sleep(LAUNCHED_POLL).await;
    }
}

/// The nodes holding the pool label now, for a state after a failure (empty when the cluster
/// cannot say).
async fn held_now(api: &dyn HostNodes, pool: &str) -> Vec<HostNode> {
    list_held(api, pool).await.unwrap_or_default()
}

/// The nodes the pool holds, found by its label alone: GFD rewrites the product label of
/// shared nodes (`-SHARED`, `-MIG-<profile>`) and removes it while it restarts.
pub(super) async fn list_held(api: &dyn HostNodes, pool: &str) -> Result<Vec<HostNode>, HostError> {
    api.list_nodes(&format!("{POOL}={pool}")).await
}

/// The nodes of `model`, held or free. A selector only matches the product label exactly, so
/// every GPU node is listed (one call) and matched through the catalog, which ignores the
/// suffixes GFD adds to shared nodes.
pub(super) async fn list_product(
    api: &dyn HostNodes,
    model: &GpuModel,
) -> Result<Vec<HostNode>, HostError> {
    let nodes = api.list_nodes(GPU_PRODUCT_LABEL).await?;
    Ok(nodes.into_iter().filter(|n| n.is_product(model)).collect())
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

/// A state with the tier its nodes were configured for, which the next plan compares.
fn with_tier(mut state: Value, tier: Option<Tier>) -> Value {
    if let Some(t) = tier {
        state.set_attr(schema::ISOLATION, Value::string(t.as_str()));
    }
    state
}

fn spec_or_fail(v: &Value, state: &Value) -> Result<PoolSpec, ApplyResponse> {
    PoolSpec::from_value(v)
        .map_err(|diagnostics| ApplyResponse::refused(state.clone(), diagnostics))
}

/// The MIG config the pool's released nodes get back; a setting that cannot be one refuses
/// the operation (before anything changes) for a product that has MIG.
fn release_or_fail(
    ctx: &Context,
    spec: &PoolSpec,
    state: &Value,
) -> Result<mig::Release, ApplyResponse> {
    match mig::release_config(&ctx.settings) {
        Ok(config) => Ok(mig::Release::to(config)),
        Err(_) if !spec.model.mig_capable() => Ok(mig::Release::default()),
        Err(why) => Err(ApplyResponse::refused(
            state.clone(),
            Diagnostic::error("Invalid Default MIG Config", why).into(),
        )),
    }
}

/// Create or update.
pub(super) async fn apply_upsert(
    api: &dyn HostNodes,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let spec = match spec_or_fail(planned, prior) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut release = match release_or_fail(ctx, &spec, prior) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let creating = prior.is_null();
    let op = if creating {
        Operation::Create
    } else {
        Operation::Update
    };
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let held_before = PoolConfig::decode(prior);
    let had_ts = held_before.strategy() == Some(&Strategy::TimeSlicing);
    let prefer = held_before.nodes.into_value().unwrap_or_default();
    let setting = namespace_setting(&ctx.settings);
    let mut held_at_failure: Vec<HostNode> = Vec::new();
    let mut progress = Progress::default();
    let mut warning = None;
    let mut mig_waiting: Vec<(String, Option<String>)> = Vec::new();
    let result = bounded(ctx, op, started, started + t.get(op), async {
        // Before any node is claimed: a cluster not set up for time-slicing changes nothing.
        let home = match config_home(api, &spec, had_ts, setting.as_deref()).await {
            Ok(home) => home,
            Err(e) => {
                held_at_failure = held_now(api, &spec.pool_label()).await;
                return Err(e);
            }
        };
        warning = home.as_ref().and_then(ConfigHome::warning);
        let held = match converge(
            api,
            bcm,
            &spec,
            &prefer,
            home.as_ref(),
            &mut progress,
            &mut release,
        )
        .await
        {
            Ok(held) => held,
            Err((held, e)) => {
                held_at_failure = held;
                return Err(e);
            }
        };
        // Karpenter's nodes come and go; only claimed nodes are waited for.
        let Sharing::Mig(config) = &spec.sharing else {
            return Ok(held);
        };
        if spec.source == Source::Auto {
            return Ok(held);
        }
        held_at_failure = held.clone();
        let selector = format!("{POOL}={}", spec.pool_label());
        match mig::wait_applied(api, &selector, config, &held, &mut mig_waiting).await {
            Ok(nodes) => Ok(nodes),
            Err(mig::WaitError::Host(e)) => Err(e.into()),
            Err(mig::WaitError::Mig(e)) => Err(StepError::Conflict(e.to_string())),
        }
    })
    .await;
    let summary = if creating {
        "GPU Node Pool Create Failed"
    } else {
        "GPU Node Pool Update Failed"
    };
    let warning = warning.map(|w| {
        Diagnostic::warning(
            "Device Plugin Not Configured By gpufleet",
            format!("{TYPE_NAME} {:?}: {w}", spec.name),
        )
    });
    let Progress {
        bcm_held,
        tier_seen,
    } = progress;
    let mut response = match result {
        Ok(held) => {
            let status = status_for(&spec, held.len());
            ApplyResponse::done(with_tier(
                state_of(planned, &spec, &held, status),
                tier_seen,
            ))
        }
        Err(e) => {
            // A create that holds nothing, in the cluster or in BCM, leaves no state.
            let holds_nothing = held_at_failure.is_empty()
                && (spec.source == Source::Host || (spec.source == Source::Bcm && bcm_held == 0));
            let state = if creating && holds_nothing {
                Value::Null
            } else if creating {
                with_tier(
                    state_of(planned, &spec, &held_at_failure, "degraded"),
                    tier_seen,
                )
            } else {
                // Keep the prior configuration, with what is held now.
                match PoolSpec::from_value(prior) {
                    Ok(p) => state_of(prior, &p, &held_at_failure, "degraded"),
                    Err(_) => prior.clone(),
                }
            };
            let doing = if let Some(doing) = release.doing() {
                doing
            } else if mig_waiting.is_empty() {
                "bringing the pool's nodes in line".to_owned()
            } else {
                format!(
                    "waiting for the MIG manager to repartition {}",
                    mig::describe_waiting(&mig_waiting)
                )
            };
            failed(summary, &spec.name, &doing, &e, state)
        }
    };
    if let Some(w) = warning {
        response.diagnostics.push(w);
    }
    response
}

/// Destroy.
pub(super) async fn apply_delete(
    api: &dyn HostNodes,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    prior: &Value,
) -> ApplyResponse {
    let spec = match spec_or_fail(prior, prior) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut release = match release_or_fail(ctx, &spec, prior) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let pool = spec.pool_label();
    let setting = namespace_setting(&ctx.settings);
    let mut still: Vec<HostNode> = Vec::new();
    let result = bounded(ctx, Operation::Delete, started, started + t.delete, async {
        if spec.source == Source::Auto {
            api.delete_node_pool(&spec.node_pool_name()).await?;
            await_instances_gone(api, &spec.node_pool_name()).await?;
        } else {
            let held = list_held(api, &pool).await?;
            if let Err((left, e)) =
                drain_and_release(api, &pool, held, spec.drain_timeout, &mut release).await
            {
                still = left;
                return Err(e);
            }
            if spec.source == Source::Bcm {
                let bcm = bcm.ok_or_else(|| {
                    StepError::Conflict("a bcm pool needs the provider's bcm settings.".to_owned())
                })?;
                bcm_pool::release(bcm, &spec, None).await?;
            }
        }
        if matches!(spec.sharing, Sharing::TimeSlicing(_))
            && let Some(home) = home_to_clean(api, setting.as_deref()).await
        {
            api.set_config_key(&home.namespace, CONFIG_MAP, &pool, None)
                .await?;
        }
        Ok(())
    })
    .await;
    match result {
        Ok(()) => ApplyResponse::done(Value::Null),
        Err(e) => {
            let state = if still.is_empty() {
                prior.clone()
            } else {
                state_of(prior, &spec, &still, "degraded")
            };
            let doing = release
                .doing()
                .unwrap_or_else(|| "draining and releasing the pool's nodes".to_owned());
            failed("GPU Node Pool Delete Failed", &spec.name, &doing, &e, state)
        }
    }
}
