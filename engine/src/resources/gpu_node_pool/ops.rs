//! Apply, read and import: the steps against the host cluster.

use std::{collections::BTreeMap, time::Duration};

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    api::{HostApi, HostError, HostNode},
    bcm as bcm_pool,
    claim::{self, ClaimError, ClaimRequest},
    device_plugin::{self, CONFIG_MAP, ConfigHome, DevicePluginError},
    karpenter::{self, NODEPOOL_LABEL},
    mig,
    node_config::{
        Desired, Tier, cordon_write, desired, held_write, is_configured, is_free, release_write,
    },
    spec::{
        DEVICE_PLUGIN_CONFIG_LABEL, GPU_PRODUCT_LABEL, GPU_REPLICAS_LABEL, MIG_CONFIG_LABEL,
        PoolSpec, Sharing, Source, VirtualClusterRef, pool_label,
    },
};
use crate::{
    apply::{self, KindError, bounded, failed},
    backends::{
        bcm::{BcmApi, BcmError},
        kube::{ISOLATION, POOL, VIRTUAL_CLUSTER},
    },
    catalog::GpuModel,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyResponse, ReadResponse},
    provider_config::ProviderSettings,
    resources::bcm_node::apply::{self as bcm_node, NodeError},
    timeouts::{self, Operation, Timeouts},
    value::Value,
};

/// How often a drain looks at a node's pods again.
const DRAIN_POLL: Duration = Duration::from_millis(500);

/// A pool's own reasons for a step to stop.
#[derive(Debug)]
pub(super) enum PoolError {
    /// A host-cluster call failed.
    Host(HostError),
    /// A claim or release failed.
    Claim(ClaimError),
    /// A Base Command Manager call failed.
    Bcm(BcmError),
}

impl KindError for PoolError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str = "The nodes held so far are recorded in state.";

    fn detail(&self, what: &str, _name: &str, _doing: &str) -> String {
        match self {
            PoolError::Host(e) => format!("{what}: {e}."),
            PoolError::Claim(e) => format!("{what}: {e}."),
            PoolError::Bcm(e) => format!("{what}: {e}."),
        }
    }
}

/// Why a step stopped.
pub(super) type StepError = apply::StepError<PoolError>;

impl From<HostError> for StepError {
    fn from(e: HostError) -> StepError {
        StepError::Kind(PoolError::Host(e))
    }
}

impl From<bcm_node::StepError> for StepError {
    fn from(e: bcm_node::StepError) -> StepError {
        match e {
            bcm_node::StepError::Kind(NodeError::Bcm(e)) => StepError::Kind(PoolError::Bcm(e)),
            bcm_node::StepError::Conflict(m) => StepError::Conflict(m),
            bcm_node::StepError::Kind(NodeError::InstallFailed(s)) => StepError::Conflict(format!(
                "BCM node {} stopped in {}{} while being provisioned. It stays held by the \
                     pool; fix the cause (see its provisioning log on the head node) and apply \
                     again.",
                s.hostname,
                s.status,
                if s.message.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.message)
                }
            )),
            bcm_node::StepError::TimedOut { op, waited } => StepError::TimedOut { op, waited },
            bcm_node::StepError::Cancelled => StepError::Cancelled,
        }
    }
}

impl From<DevicePluginError> for StepError {
    fn from(e: DevicePluginError) -> StepError {
        match e {
            DevicePluginError::Host(e) => StepError::Kind(PoolError::Host(e)),
            other => StepError::Conflict(other.to_string()),
        }
    }
}

impl From<ClaimError> for StepError {
    fn from(e: ClaimError) -> StepError {
        StepError::Kind(PoolError::Claim(e))
    }
}

/// What the tenant can request from `gpus` physical GPUs shared as `sharing`.
pub fn allocatable(sharing: &Sharing, gpus: u64) -> BTreeMap<String, u64> {
    match sharing {
        Sharing::None => [("nvidia.com/gpu".to_owned(), gpus)].into(),
        Sharing::TimeSlicing(r) => [("nvidia.com/gpu".to_owned(), gpus * u64::from(*r))].into(),
        // Without the nodes to ask, the device plugin's default MIG strategy.
        Sharing::Mig(c) => mig::resources(c, mig::Strategy::Mixed, gpus),
    }
}

/// The state for `held` nodes, from a planned (or prior) value.
fn state_of(v: &Value, spec: &PoolSpec, held: &[HostNode], status: &str) -> Value {
    let mut s = v.clone();
    let mut names: Vec<String> = held.iter().map(|n| n.name.clone()).collect();
    names.sort();
    // Physical GPUs: capacity would count time-slicing replicas that `allocatable` adds.
    let gpus: u64 = held.iter().map(|n| u64::from(n.physical_gpus())).sum();
    s.set_attr("id", Value::string(spec.id()));
    s.set_attr(
        "nodes",
        Value::List(names.into_iter().map(Value::string).collect()),
    );
    s.set_attr("gpus", Value::int(i64::try_from(gpus).unwrap_or(i64::MAX)));
    // MIG resources depend on each node's strategy.
    let alloc = match &spec.sharing {
        Sharing::Mig(c) => mig::allocatable(c, held),
        other => allocatable(other, gpus),
    };
    s.set_attr(
        "allocatable",
        Value::Map(
            alloc
                .into_iter()
                .map(|(k, n)| (k, Value::int(i64::try_from(n).unwrap_or(i64::MAX))))
                .collect(),
        ),
    );
    s.set_attr("status", Value::string(status));
    s.with_unknowns_nulled()
}

fn status_for(spec: &PoolSpec, held: usize) -> &'static str {
    match spec.source {
        Source::Auto if held == 0 => "pending",
        Source::Auto => "ready",
        Source::Host | Source::Bcm if held == spec.target() as usize => "ready",
        Source::Host | Source::Bcm => "degraded",
    }
}

/// The tier of the pool's virtual cluster, from its namespace.
async fn tier_of(api: &dyn HostApi, vc: &VirtualClusterRef) -> Result<Tier, StepError> {
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

/// The private-tier check plan and apply share.
pub(super) fn refuse_private_host(tier: Tier, source: Source) -> Option<String> {
    (tier == Tier::Private && source == Source::Host).then(|| {
        "the virtual cluster is `private`: its tenants get nodes of their own, never \
         host-cluster nodes. Use source = \"bcm\" or \"auto\"."
            .to_owned()
    })
}

/// The provider setting naming the device plugin's namespace, if set.
fn namespace_setting(settings: &ProviderSettings) -> Option<String> {
    settings
        .get("kubernetes", device_plugin::NAMESPACE_SETTING)
        .map(str::to_owned)
}

/// Where the pool's time-slicing config goes: prepared (the GPU Operator pointed at it) when
/// the pool time-slices, found when it stops doing so (to remove its key), `None` otherwise.
async fn config_home(
    api: &dyn HostApi,
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
async fn home_to_clean(api: &dyn HostApi, setting: Option<&str>) -> Option<ConfigHome> {
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
    api: &dyn HostApi,
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

/// Cordons `nodes`, evicts their pods until none is left or `timeout` passes, then releases
/// them exactly as found. Returns the nodes still held when it stops.
async fn drain_and_release(
    api: &dyn HostApi,
    pool: &str,
    nodes: Vec<HostNode>,
    timeout: Duration,
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
    for n in &cordoned {
        claim::rewrite(api, &n.name, pool, release_write)
            .await
            .map_err(|e| (nodes.clone(), e.into()))?;
    }
    Ok(())
}

/// Brings the pool to `spec` on the cluster; returns the nodes it holds. On failure, also the
/// nodes held at that point.
async fn converge(
    api: &dyn HostApi,
    bcm: Option<&dyn BcmApi>,
    spec: &PoolSpec,
    prefer: &[String],
    plugin: Option<&ConfigHome>,
    bcm_held: &mut usize,
) -> Result<Vec<HostNode>, (Vec<HostNode>, StepError)> {
    let tier = tier_of(api, &spec.vc).await.map_err(|e| (Vec::new(), e))?;
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
    let mut held = list_held(api, &pool)
        .await
        .map_err(|e| (Vec::new(), e.into()))?;
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
        let (release, keep): (Vec<HostNode>, Vec<HostNode>) =
            held.into_iter().partition(|n| going.contains(&n.name));
        if let Err((mut still, e)) =
            drain_and_release(api, &pool, release, spec.drain_timeout).await
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
    api: &dyn HostApi,
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

/// The nodes holding the pool label now, for a state after a failure (empty when the cluster
/// cannot say).
async fn held_now(api: &dyn HostApi, pool: &str) -> Vec<HostNode> {
    list_held(api, pool).await.unwrap_or_default()
}

/// The nodes the pool holds, found by its label alone: GFD rewrites the product label of
/// shared nodes (`-SHARED`, `-MIG-<profile>`) and removes it while it restarts.
async fn list_held(api: &dyn HostApi, pool: &str) -> Result<Vec<HostNode>, HostError> {
    api.list_nodes(&format!("{POOL}={pool}")).await
}

/// The nodes of `model`, held or free. A selector only matches the product label exactly, so
/// every GPU node is listed (one call) and matched through the catalog, which ignores the
/// suffixes GFD adds to shared nodes.
async fn list_product(api: &dyn HostApi, model: &GpuModel) -> Result<Vec<HostNode>, HostError> {
    let nodes = api.list_nodes(GPU_PRODUCT_LABEL).await?;
    Ok(nodes.into_iter().filter(|n| n.is_product(model)).collect())
}

/// How often the host nodes of freshly provisioned BCM nodes are looked for.
const JOIN_POLL: Duration = Duration::from_secs(2);

/// Provisions the pool's BCM nodes, then waits until each has a host node that is Ready and
/// free (or already the pool's). Returns their hostnames.
async fn provision_bcm(
    api: &dyn HostApi,
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

fn spec_or_fail(v: &Value, state: &Value) -> Result<PoolSpec, ApplyResponse> {
    PoolSpec::from_value(v).map_err(|diagnostics| ApplyResponse {
        new_state: state.clone(),
        diagnostics,
    })
}

/// Create or update.
pub(super) async fn apply_upsert(
    api: &dyn HostApi,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let spec = match spec_or_fail(planned, prior) {
        Ok(s) => s,
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
    let prefer = prior.get("nodes").strings();
    let had_ts = prior.get("sharing").get("strategy").as_str() == Some("time-slicing");
    let setting = namespace_setting(&ctx.settings);
    let mut held_at_failure: Vec<HostNode> = Vec::new();
    let mut bcm_held = 0;
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
        let held = match converge(api, bcm, &spec, &prefer, home.as_ref(), &mut bcm_held).await {
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
    let mut response = match result {
        Ok(held) => {
            let status = status_for(&spec, held.len());
            ApplyResponse {
                new_state: state_of(planned, &spec, &held, status),
                diagnostics: Diagnostics::new(),
            }
        }
        Err(e) => {
            // A create that holds nothing, in the cluster or in BCM, leaves no state.
            let holds_nothing = held_at_failure.is_empty()
                && (spec.source == Source::Host || (spec.source == Source::Bcm && bcm_held == 0));
            let state = if creating && holds_nothing {
                Value::Null
            } else if creating {
                state_of(planned, &spec, &held_at_failure, "degraded")
            } else {
                // Keep the prior configuration, with what is held now.
                match PoolSpec::from_value(prior) {
                    Ok(p) => state_of(prior, &p, &held_at_failure, "degraded"),
                    Err(_) => prior.clone(),
                }
            };
            let doing = if mig_waiting.is_empty() {
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
    api: &dyn HostApi,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    prior: &Value,
) -> ApplyResponse {
    let spec = match spec_or_fail(prior, prior) {
        Ok(s) => s,
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
        } else {
            let held = list_held(api, &pool).await?;
            if let Err((left, e)) = drain_and_release(api, &pool, held, spec.drain_timeout).await {
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
        Ok(()) => ApplyResponse {
            new_state: Value::Null,
            diagnostics: Diagnostics::new(),
        },
        Err(e) => {
            let state = if still.is_empty() {
                prior.clone()
            } else {
                state_of(prior, &spec, &still, "degraded")
            };
            failed(
                "GPU Node Pool Delete Failed",
                &spec.name,
                "draining and releasing the pool's nodes",
                &e,
                state,
            )
        }
    }
}

/// Refresh: the nodes that hold the pool label, checked against what the pool wants.
pub(super) async fn read(
    api: &dyn HostApi,
    bcm: Option<&dyn BcmApi>,
    ctx: &Context,
    state: &Value,
) -> ReadResponse {
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut mig_problems: Vec<mig::MigError> = Vec::new();
    let result = bounded(ctx, Operation::Read, started, started + t.read, async {
        if state.get("gpu_product").is_null() {
            return read_imported(api, state, namespace_setting(&ctx.settings).as_deref()).await;
        }
        let spec = PoolSpec::from_value(state)
            .map_err(|_| StepError::Conflict("the state does not describe a pool".to_owned()))?;
        if spec.source == Source::Auto {
            if api.get_node_pool(&spec.node_pool_name()).await?.is_none() {
                return Ok(Value::Null);
            }
            let launched = api
                .list_nodes(&format!("{NODEPOOL_LABEL}={}", spec.node_pool_name()))
                .await?;
            return Ok(state_of(
                state,
                &spec,
                &launched,
                status_for(&spec, launched.len()),
            ));
        }
        let held = list_held(api, &spec.pool_label()).await?;
        // A bcm pool's servers still being wiped count as the pool's (its tenant's data is
        // on them), so the next apply or destroy finishes the wipe.
        let (bcm_held, wiping) = match (spec.source, bcm) {
            (Source::Bcm, Some(bcm)) => bcm_pool::census(bcm, &spec).await?,
            _ => (0, 0),
        };
        if held.is_empty() {
            if bcm_held + wiping > 0 {
                let mut s = state_of(state, &spec, &[], "degraded");
                s.set_attr("node_count", Value::int(wiping as i64));
                return Ok(s);
            }
            return Ok(Value::Null);
        }
        let tier = match api.namespace_labels(&spec.vc.namespace).await? {
            Some(l) => l.get(ISOLATION).and_then(|t| Tier::parse(t)),
            None => None,
        }
        // Without its namespace, judge by what the nodes say.
        .or_else(|| {
            held.iter()
                .find_map(|n| n.label(ISOLATION).and_then(Tier::parse))
        })
        .unwrap_or(Tier::Shared);
        let want: Desired = desired(&spec, tier);
        // Nodes the MIG manager failed on are not configured: the next plan shows them.
        let mig_failed = match &spec.sharing {
            Sharing::Mig(_) => mig::failed_nodes(&held),
            _ => Vec::new(),
        };
        let mig_waiting = matches!(spec.sharing, Sharing::Mig(_))
            && held
                .iter()
                .any(|n| matches!(mig::NodeState::of(n), mig::NodeState::Waiting(_)));
        if let Sharing::Mig(c) = &spec.sharing {
            if !mig_failed.is_empty() {
                mig_problems.push(mig::MigError::Failed {
                    config: c.name.clone(),
                    nodes: mig_failed.clone(),
                });
            }
            if let Err(e) = mig::check_strategy(c, &held) {
                mig_problems.push(e);
            }
        }
        let configured = held
            .iter()
            .filter(|n| is_configured(n, &want) && !mig_failed.contains(&n.name))
            .count();
        let mut s = state_of(state, &spec, &held, "ready");
        let count = if configured == held.len() {
            held.len()
        } else {
            configured
        } + wiping;
        if !state.get("node_count").is_null() {
            s.set_attr("node_count", Value::int(count as i64));
        }
        if count != spec.target() as usize || configured != held.len() {
            s.set_attr("status", Value::string("degraded"));
        } else if mig_waiting {
            s.set_attr("status", Value::string("pending"));
        }
        Ok(s)
    })
    .await;
    match result {
        Ok(new_state) => ReadResponse {
            new_state,
            diagnostics: mig_problems
                .iter()
                .map(|e| {
                    Diagnostic::warning(
                        "GPU Node Pool MIG Not Applied",
                        format!("{TYPE_NAME} {name:?}: {e}"),
                    )
                })
                .fold(Diagnostics::new(), |mut d, x| {
                    d.push(x);
                    d
                }),
        },
        Err(e) => ReadResponse {
            new_state: state.clone(),
            diagnostics: e
                .diagnostic(
                    "GPU Node Pool Read Failed",
                    &name,
                    "reading the pool's nodes",
                )
                .into(),
        },
    }
}

/// Fills an import skeleton (name, virtual cluster) from the cluster.
async fn read_imported(
    api: &dyn HostApi,
    state: &Value,
    setting: Option<&str>,
) -> Result<Value, StepError> {
    let name = state.get("name").as_str().unwrap_or_default();
    let vc_id = state.get("virtual_cluster_id").as_str().unwrap_or_default();
    let Some(vc) = VirtualClusterRef::parse(vc_id) else {
        return Ok(Value::Null);
    };
    let label = pool_label(&vc.name, name);
    let mut s = state.clone();
    s.set_attr(
        "drain_timeout",
        Value::string(super::schema::DEFAULT_DRAIN_TIMEOUT),
    );
    let np_name = format!("gpufleet-{}-{name}", vc.name);
    if let Some(np) = api.get_node_pool(&np_name).await? {
        let product = np["spec"]["template"]["spec"]["requirements"][0]["values"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        s.set_attr("gpu_product", Value::string(product));
        s.set_attr("source", Value::string("auto"));
        let max = np["spec"]["limits"]["nodes"]
            .as_str()
            .and_then(|n| n.parse::<i64>().ok());
        s.set_attr(
            "autoscaling",
            Value::object([
                ("min_nodes", Value::int(0)),
                ("max_nodes", Value::int(max.unwrap_or(1))),
            ]),
        );
    } else {
        let held = list_held(api, &label).await?;
        let Some(first) = held.first() else {
            return Ok(Value::Null);
        };
        // Any node GFD labels right now tells the product.
        let product = held
            .iter()
            .find_map(HostNode::gpu_model)
            .map(|m| m.product)
            .unwrap_or_default();
        s.set_attr("gpu_product", Value::string(product));
        s.set_attr("source", Value::string("host"));
        s.set_attr("node_count", Value::int(held.len() as i64));
        let sharing = if let Some(m) = first.label(MIG_CONFIG_LABEL) {
            Some(("mig", Value::Null, Value::string(m)))
        } else if first.label(DEVICE_PLUGIN_CONFIG_LABEL).is_some() {
            // The pool's key, else what GFD reports the device plugin applied.
            let cfg = match device_plugin::locate(api, setting).await {
                Ok(home) => api.config_key(&home.namespace, CONFIG_MAP, &label).await?,
                Err(_) => None,
            };
            let r = cfg
                .as_deref()
                .and_then(device_plugin::replicas_in)
                .or_else(|| first.label(GPU_REPLICAS_LABEL)?.parse().ok())
                .unwrap_or(1);
            Some(("time-slicing", Value::int(r), Value::Null))
        } else {
            None
        };
        if let Some((strategy, replicas, mig)) = sharing {
            s.set_attr(
                "sharing",
                Value::object([
                    ("strategy", Value::string(strategy)),
                    ("replicas", replicas),
                    ("mig_config", mig),
                ]),
            );
        }
    }
    let spec = PoolSpec::from_value(&s).map_err(|_| {
        StepError::Conflict(format!("no pool {name} of virtual cluster {vc_id} found"))
    })?;
    // Fill the computed attributes the way a refresh does.
    Box::pin(read_spec(api, &s, &spec)).await
}

async fn read_spec(api: &dyn HostApi, s: &Value, spec: &PoolSpec) -> Result<Value, StepError> {
    let held = if spec.source == Source::Auto {
        api.list_nodes(&format!("{NODEPOOL_LABEL}={}", spec.node_pool_name()))
            .await?
    } else {
        list_held(api, &spec.pool_label()).await?
    };
    Ok(state_of(s, spec, &held, status_for(spec, held.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_counts_what_the_tenant_can_request() {
        assert_eq!(allocatable(&Sharing::None, 8)["nvidia.com/gpu"], 8);
        assert_eq!(
            allocatable(&Sharing::TimeSlicing(4), 8)["nvidia.com/gpu"],
            32
        );
        let a100 = crate::catalog::lookup("NVIDIA-A100-SXM4-80GB").expect("catalog");
        let c = crate::catalog::mig_config(a100, "all-1g.10gb").expect("config");
        assert_eq!(
            allocatable(&Sharing::Mig(c), 16)["nvidia.com/mig-1g.10gb"],
            16 * 7
        );
    }
}
