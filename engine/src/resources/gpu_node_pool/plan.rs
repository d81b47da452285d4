//! Planning a pool: what a change keeps of what the cluster showed, and the checks that ask
//! the cluster (the tier of the virtual cluster, the device plugin's set-up, MIG, free host
//! and BCM nodes). A check whose system cannot be asked is skipped: apply checks again.
//!
//! The tier rules are checked on every plan, not only when the pool is created: the tier is
//! the pool's `isolation` when the configuration sets it, else the tier this run plans for
//! its virtual cluster (so a tier about to change in the same run is seen either way), else
//! the virtual cluster's namespace label. A planned tier other than
//! the one the pool was applied with replaces the pool ([`plan_tier`]).

use super::{
    Backend, TYPE_NAME,
    apply::{list_held, list_product},
    bcm,
    choices::{Source, Tier},
    config::{PoolConfig, Strategy},
    device_plugin, mig,
    model::parse_node_class,
    node_config::is_free,
    product,
    schema::{
        self, ALLOCATABLE, AUTOSCALING, DEFAULT_NODE_CLASS, GPU_PRODUCT, GPUS, ID, KARPENTER,
        KARPENTER_NODE_CLASS, NAME, NODE_COUNT, NODE_LABELS, NODE_TAINTS, NODES, PLACEMENT,
        SHARING, SOURCE, STATUS, VIRTUAL_CLUSTER_ID,
    },
    validate::refuse_private_host,
};
use crate::{
    backends::{
        bcm::BcmApi,
        kube::{ISOLATION, host::nodes::HostNodes},
    },
    catalog,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{PlanRequest, PlanResponse},
    path::AttrPath,
    plan::backend_facts as facts,
    provider_config::KUBERNETES_BLOCK,
    tenancy::{VirtualClusterRef, pool_label},
    value::{Known, Value},
};

/// Plans a pool: its values, then the checks against the host cluster and BCM.
pub(super) async fn plan_pool<B: Backend + ?Sized>(
    backend: &B,
    ctx: &Context,
    req: &PlanRequest,
) -> PlanResponse {
    let config = PoolConfig::decode(&req.config);
    let prior = PoolConfig::decode(&req.prior);
    let mut resp = plan_values(req);
    resp.diagnostics.extend(product::check(
        &ctx.settings.gpu_products,
        &req.config,
        &config,
    ));
    // The tier rules hold on every change, whatever else the plan changes.
    let host = backend.connect_reader(ctx, TYPE_NAME).await.ok();
    let cluster_tier = match planned_tier(ctx, &config) {
        Some(tier) => Some((tier, TierFrom::VirtualClusterPlan)),
        None => match &host {
            Some(host) => namespace_tier(host.as_ref(), &config)
                .await
                .map(|tier| (tier, TierFrom::Namespace)),
            None => None,
        },
    };
    let tier = plan_tier(req, &config, &prior, cluster_tier, &mut resp);
    if let Some(tier) = tier {
        resp.diagnostics.extend(check_tier_rules(&config, tier));
    }
    // A pool that starts time-slicing needs the device plugin set up for it.
    let time_slicing = |p: &PoolConfig| p.strategy() == Some(&Strategy::TimeSlicing);
    if time_slicing(&config)
        && !time_slicing(&prior)
        && let Ok(host) = backend.connect(ctx, TYPE_NAME).await
    {
        let setting = ctx
            .settings
            .get(KUBERNETES_BLOCK, device_plugin::NAMESPACE_SETTING);
        resp.diagnostics
            .extend(device_plugin::plan_check(host.as_ref(), setting).await);
    }
    if config.strategy() == Some(&Strategy::Mig)
        && let Ok(host) = backend.connect(ctx, TYPE_NAME).await
    {
        resp.diagnostics
            .extend(mig::check_plan(host.as_ref(), &prior, &config).await);
    }
    // Nodes of a MIG product go back to the fleet's default MIG config when they are let go.
    let mig_product = product_of(&config).is_some_and(|m| m.mig_capable());
    if mig_product && let Err(why) = mig::release_config(&ctx.settings) {
        resp.diagnostics.push(crate::diag::Diagnostic::error(
            "Invalid Default MIG Config",
            why,
        ));
    }
    // Only a change that takes more nodes asks: a no-op plan of many pools makes no calls.
    let takes_nodes = req.prior.is_null()
        || !resp.planned.same_attrs(
            &req.prior,
            &[NODE_COUNT, GPU_PRODUCT, SOURCE, VIRTUAL_CLUSTER_ID, NAME],
        );
    // `host`, or left out.
    if config.source_is(Source::Host)
        && takes_nodes
        && let Some(host) = &host
    {
        resp.diagnostics
            .extend(facts::bounded(check_host_free(host.as_ref(), ctx, &config, &prior)).await);
    }
    if config.source_is(Source::Bcm)
        && let Ok(bcm) = backend.bcm(ctx)
    {
        resp.diagnostics
            .extend(facts::bounded(check_bcm_free(bcm.as_ref(), &prior, &config)).await);
    }
    resp
}

/// Attributes whose change needs the cluster to be told.
const REMOTE_ATTRIBUTES: &[&str] = &[
    NODE_COUNT,
    AUTOSCALING,
    SHARING,
    PLACEMENT,
    NODE_LABELS,
    NODE_TAINTS,
    KARPENTER_NODE_CLASS,
    KARPENTER,
];

/// Attributes whose change changes which nodes the pool holds.
const COUNT_ATTRIBUTES: &[&str] = &[NODE_COUNT, AUTOSCALING];

/// What a change keeps of what the cluster showed, and the id.
fn plan_values(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    let proposed = PoolConfig::decode(&req.proposed);
    if let (Some(vc), Some(name)) = (proposed.virtual_cluster_id.value(), proposed.name.value()) {
        let id = format!("{vc}/{name}");
        planned.set_attr(ID, Value::string(id));
    }
    let prior = &req.prior;
    if !prior.is_null() {
        if planned.same_attrs(prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(prior, &[NODES, GPUS, ALLOCATABLE, STATUS]);
        } else if planned.same_attrs(prior, COUNT_ATTRIBUTES) {
            planned.keep_from(prior, &[NODES, GPUS]);
            if planned.same_attrs(prior, &[SHARING]) {
                planned.keep_from(prior, &[ALLOCATABLE]);
            }
        }
    }
    PlanResponse {
        requires_replace: node_class_kind_changes(&PoolConfig::decode(prior), &proposed),
        planned,
        diagnostics: Diagnostics::new(),
    }
}

/// Karpenter's NodePool CRD refuses a change of `nodeClassRef`'s group or kind, so an `auto`
/// pool that moves to another kind of node class is replaced (its NodePool deleted, its
/// nodes drained, and a new one written); a new name of the same kind is changed in place.
fn node_class_kind_changes(prior: &PoolConfig, planned: &PoolConfig) -> Vec<AttrPath> {
    let replace = vec![AttrPath::attr(KARPENTER_NODE_CLASS)];
    // A null prior (a create) decodes with the default source, which is not `auto`.
    if !prior.source_is(Source::Auto) {
        return Vec::new();
    }
    // Not known until apply: it may turn out another kind, and apply cannot then replace.
    if planned.karpenter_node_class.is_unknown() || planned.source.is_unknown() {
        return replace;
    }
    if !planned.source_is(Source::Auto) {
        return Vec::new();
    }
    let class = |p: &PoolConfig| {
        let text = p.karpenter_node_class.value().map(String::as_str);
        let (group, kind, _) = parse_node_class(text.unwrap_or(DEFAULT_NODE_CLASS))?;
        Some((group, kind))
    };
    match (class(prior), class(planned)) {
        (Some(before), Some(after)) if before != after => replace,
        _ => Vec::new(),
    }
}

/// Where a tier the plan checks comes from, for the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TierFrom {
    /// The pool's `isolation`.
    Config,
    /// The `gpufleet.dev/isolation` label of the virtual cluster's namespace.
    Namespace,
    /// The virtual cluster's `isolation`, as this run plans it.
    VirtualClusterPlan,
}

/// The tier the plan checks the rules against, and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlannedTier {
    tier: Tier,
    from: TierFrom,
}

/// The tier this run plans for the virtual cluster, when the same run plans it (see
/// [`crate::planned_virtual_clusters`]): newer than what its namespace carries.
fn planned_tier(ctx: &Context, config: &PoolConfig) -> Option<Tier> {
    let id = config.virtual_cluster_id.value()?;
    Tier::parse(&ctx.virtual_clusters.isolation(id)?)
}

/// The tier the virtual cluster's namespace carries now; `None` when the id is unknown, the
/// namespace does not exist yet or cannot be read, or its label is not a tier.
async fn namespace_tier(host: &dyn HostNodes, config: &PoolConfig) -> Option<Tier> {
    let vc = config
        .virtual_cluster_id
        .value()
        .map(String::as_str)
        .and_then(VirtualClusterRef::parse)?;
    match host.namespace_labels(&vc.namespace).await {
        Ok(Some(labels)) => labels.get(ISOLATION).and_then(|t| Tier::parse(t)),
        _ => None,
    }
}

/// Plans `isolation` and returns the tier the rules are checked against (`None` when it is
/// not known at plan: apply checks). A configured tier wins; otherwise the namespace's, else
/// what the state recorded. A tier other than the one the pool was applied with replaces the
/// pool, so its nodes are released and taken again labelled and tainted for the new tier. A
/// configured tier that the namespace contradicts, with no change of tier or virtual cluster
/// in the plan, means the virtual cluster was replaced behind the configuration's back:
/// refused on `isolation`.
fn plan_tier(
    req: &PlanRequest,
    config: &PoolConfig,
    prior_pool: &PoolConfig,
    cluster: Option<(Tier, TierFrom)>,
    resp: &mut PlanResponse,
) -> Option<PlannedTier> {
    let configured = config.isolation;
    let prior = prior_pool.isolation;
    let (planned, checked) = match configured {
        Known::Unknown => (Known::Unknown, None),
        Known::Value(tier) => (
            configured,
            Some(PlannedTier {
                tier,
                from: TierFrom::Config,
            }),
        ),
        Known::Null => {
            let planned = match cluster {
                Some((t, _)) => Known::Value(t),
                None if prior.value().is_some() => prior,
                None => Known::Unknown,
            };
            let checked = cluster.map(|(tier, from)| PlannedTier { tier, from });
            (planned, checked)
        }
    };
    let planned_value = match planned {
        Known::Value(t) => Value::string(t.as_str()),
        Known::Null => Value::Null,
        Known::Unknown => Value::unknown(),
    };
    if req.prior.is_null() {
        resp.planned.set_attr(schema::ISOLATION, planned_value);
        return checked;
    }
    // A state written before `isolation` existed has none: that is not a change of tier.
    if prior.value().is_some() && planned != prior {
        resp.requires_replace
            .push(AttrPath::attr(schema::ISOLATION));
    }
    let same_cluster = prior_pool.virtual_cluster_id == config.virtual_cluster_id;
    let changing = prior.value().is_some() && configured != prior;
    if let (Some(c), Some((ns, from))) = (checked.filter(|c| c.from == TierFrom::Config), cluster)
        && c.tier != ns
        && same_cluster
        && !changing
    {
        let vc = config.virtual_cluster_id.value().map_or("", String::as_str);
        let what = match from {
            TierFrom::VirtualClusterPlan => format!(
                "this plan replaces the virtual cluster {vc} with isolation = \"{}\"",
                ns.as_str()
            ),
            _ => format!(
                "the virtual cluster {vc} is now {} (its namespace's {ISOLATION} label): it \
                 was replaced with another tier since this pool was applied",
                ns.as_str()
            ),
        };
        resp.diagnostics.push(
            Diagnostic::error(
                "Virtual Cluster Tier Changed",
                format!(
                    "isolation is {}, but {what}. Set isolation to {} (the virtual cluster's \
                     isolation); the pool is then replaced and takes nodes for that tier.",
                    c.tier.as_str(),
                    ns.as_str(),
                ),
            )
            .with_path(AttrPath::attr(schema::ISOLATION)),
        );
    }
    resp.planned.set_attr(schema::ISOLATION, planned_value);
    checked
}

/// The rules that tie a pool to its tier and that a plan can decide: which sources a tier
/// allows. Labels, taints and who else may run on the nodes follow from the tier when the
/// pool takes its nodes, which a change of tier makes it do again ([`plan_tier`]).
fn check_tier_rules(config: &PoolConfig, planned: PlannedTier) -> Diagnostics {
    let mut d = Diagnostics::new();
    let Known::Value(source) = config.source else {
        return d;
    };
    if let Some(why) = refuse_private_host(planned.tier, source) {
        let vc = config
            .virtual_cluster_id
            .value()
            .map_or("the virtual cluster", String::as_str);
        let said = match planned.from {
            TierFrom::Config => format!("isolation = \"{}\"", planned.tier.as_str()),
            TierFrom::Namespace => format!(
                "{vc} carries {ISOLATION}={} on its namespace",
                planned.tier.as_str()
            ),
            TierFrom::VirtualClusterPlan => format!(
                "this plan gives {vc} isolation = \"{}\"",
                planned.tier.as_str()
            ),
        };
        d.push(
            Diagnostic::error(
                "Host Nodes Not Allowed For Private Tier",
                format!("{said}: {why}"),
            )
            .with_path(AttrPath::attr(SOURCE)),
        );
    }
    d
}

/// The plan-time host check: a `host` pool that needs more free nodes of its product than the
/// host cluster has is refused on `node_count`. The nodes it holds already count as its own.
/// Skipped when the cluster cannot be asked: apply checks again.
async fn check_host_free(
    host: &dyn HostNodes,
    ctx: &Context,
    config: &PoolConfig,
    prior: &PoolConfig,
) -> Diagnostics {
    let mut d = Diagnostics::new();
    let label_of = |p: &PoolConfig| {
        let vc = p
            .virtual_cluster_id
            .value()
            .map(String::as_str)
            .and_then(VirtualClusterRef::parse)?;
        Some(pool_label(&vc.name, p.name.value()?))
    };
    let (Some(&want), Some(model), Some(label)) = (
        config.node_count.value(),
        product_of(config),
        label_of(config),
    ) else {
        return d;
    };
    // What the pool holds, and what the pool it replaces (another name) releases first: seen
    // in the prior state, or recorded by the first plan of the replacement.
    let replaced = label_of(prior);
    if let Some(old) = replaced.as_ref().filter(|old| **old != label) {
        ctx.releases.replacing(&format!("pool:{label}"), old);
    }
    let mut labels = vec![label.clone()];
    for old in replaced
        .into_iter()
        .chain(ctx.releases.released_for(&format!("pool:{label}")))
    {
        if !labels.contains(&old) {
            labels.push(old);
        }
    }
    let mut held = 0;
    for label in &labels {
        let Ok(nodes) = list_held(host, label).await else {
            return d;
        };
        held += nodes.len();
    }
    let need = usize::try_from(want).unwrap_or(0).saturating_sub(held);
    if need == 0 {
        return d;
    }
    let Ok(nodes) = list_product(host, model).await else {
        return d;
    };
    let free = nodes.iter().filter(|n| is_free(n)).count();
    if free < need {
        d.push(facts::NOT_ENOUGH_HOST_NODES.refuse(format!(
            "the pool needs {need} more node(s) of {}, but the host cluster has only {free} free \
             (of its {} nodes of that product; free means Ready, not cordoned and held by no \
             pool). Lower node_count, or release nodes held by other pools; a pool that \
             releases them in the same run must be applied first (depends_on).",
            model.product,
            nodes.len(),
        )));
    }
    d
}

/// The plan-time BCM check: a `bcm` pool that needs more free BCM nodes than there are is
/// refused on `node_count`. Skipped when BCM cannot be asked: apply checks again.
async fn check_bcm_free(bcm: &dyn BcmApi, prior: &PoolConfig, config: &PoolConfig) -> Diagnostics {
    let mut d = Diagnostics::new();
    if !config.source_is(Source::Bcm) {
        return d;
    }
    let (Some(&want), Some(model)) = (config.node_count.value(), product_of(config)) else {
        return d;
    };
    let had = if prior.source_is(Source::Bcm) {
        prior.node_count.value().copied().unwrap_or(0)
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
        d.push(facts::NOT_ENOUGH_BCM_NODES.refuse(format!(
            "the pool needs {need} more BCM node(s) of {}, but only {free} {} free in Base \
             Command Manager (held by no tenant and not being wiped). Lower node_count, or \
             release nodes held by other tenants.",
            model.product,
            if free == 1 { "is" } else { "are" }
        )));
    }
    d
}

/// The catalog's model of the pool's `gpu_product`, when it has one.
fn product_of(config: &PoolConfig) -> Option<&'static catalog::GpuModel> {
    config
        .gpu_product
        .value()
        .map(String::as_str)
        .and_then(catalog::lookup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(source: &str, class: Option<&str>) -> Value {
        Value::object([
            ("source", Value::string(source)),
            ("karpenter_node_class", class.map(Value::string).into()),
        ])
    }

    fn node_class_kind_changes(prior: &Value, planned: &Value) -> Vec<AttrPath> {
        super::node_class_kind_changes(&PoolConfig::decode(prior), &PoolConfig::decode(planned))
    }

    #[test]
    fn a_node_class_of_another_kind_replaces_the_pool() {
        let aws = pool("auto", None);
        let kwok = pool("auto", Some("karpenter.kwok.sh/KWOKNodeClass/default"));
        let other_name = pool("auto", Some("karpenter.k8s.aws/EC2NodeClass/gpu"));
        assert_eq!(
            node_class_kind_changes(&aws, &kwok),
            [AttrPath::attr("karpenter_node_class")]
        );
        // The same kind under another name is a change in place.
        assert!(node_class_kind_changes(&aws, &other_name).is_empty());
        // Creates, and pools without a NodePool, replace nothing.
        assert!(node_class_kind_changes(&Value::Null, &kwok).is_empty());
        assert!(node_class_kind_changes(&pool("host", None), &kwok).is_empty());
        let unknown = Value::object([
            ("source", Value::string("auto")),
            ("karpenter_node_class", Value::unknown()),
        ]);
        // A class not known until apply may be of another kind: replaced, as apply could not.
        assert_eq!(
            node_class_kind_changes(&aws, &unknown),
            [AttrPath::attr("karpenter_node_class")]
        );
    }
}
