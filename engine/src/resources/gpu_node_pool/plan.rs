//! Planning a pool: what a change keeps of what the cluster showed, and the checks that ask
//! the cluster (the tier of the virtual cluster, the device plugin's set-up, MIG, free BCM
//! nodes). A check whose system cannot be asked is skipped: apply checks again.

use super::{
    Backend, bcm, device_plugin, mig, model::Source, node_config::Tier, product,
    validate::refuse_private_host,
};
use crate::{
    backends::{bcm::BcmApi, kube::host::nodes::HostNodes},
    catalog,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{PlanRequest, PlanResponse},
    path::AttrPath,
    tenancy::VirtualClusterRef,
    value::Value,
};

/// Plans a pool: its values, then the checks against the host cluster and BCM.
pub(super) async fn plan_pool<B: Backend + ?Sized>(
    backend: &B,
    ctx: &Context,
    req: &PlanRequest,
) -> PlanResponse {
    let mut resp = plan_values(req);
    resp.diagnostics
        .extend(product::check(&ctx.settings.gpu_products, &req.config));
    // The tier only matters when the pool is created or its virtual cluster changes.
    let vc_changed = req.prior.get("virtual_cluster_id") != req.config.get("virtual_cluster_id");
    if (req.prior.is_null() || vc_changed)
        && let Ok(host) = backend.connect(ctx).await
    {
        resp.diagnostics
            .extend(check_tier(host.as_ref(), &req.config).await);
    }
    // A pool that starts time-slicing needs the device plugin set up for it.
    let time_slicing =
        |v: &Value| v.get("sharing").get("strategy").as_str() == Some("time-slicing");
    if time_slicing(&req.config)
        && !time_slicing(&req.prior)
        && let Ok(host) = backend.connect(ctx).await
    {
        let setting = ctx
            .settings
            .get("kubernetes", device_plugin::NAMESPACE_SETTING);
        resp.diagnostics
            .extend(device_plugin::plan_check(host.as_ref(), setting).await);
    }
    if req.config.get("sharing").get("strategy").as_str() == Some("mig")
        && let Ok(host) = backend.connect(ctx).await
    {
        resp.diagnostics
            .extend(mig::check_plan(host.as_ref(), &req.prior, &req.config).await);
    }
    // Nodes of a MIG product go back to the fleet's default MIG config when they are let go.
    let mig_product = req
        .config
        .get("gpu_product")
        .as_str()
        .and_then(crate::catalog::lookup)
        .is_some_and(|m| m.mig_capable());
    if mig_product && let Err(why) = mig::release_config(&ctx.settings) {
        resp.diagnostics.push(crate::diag::Diagnostic::error(
            "Invalid Default MIG Config",
            why,
        ));
    }
    if req.config.get("source").as_str() == Some("bcm")
        && let Ok(bcm) = backend.bcm(ctx)
    {
        resp.diagnostics
            .extend(check_bcm_free(bcm.as_ref(), &req.prior, &req.config).await);
    }
    resp
}

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

/// What a change keeps of what the cluster showed, and the id.
fn plan_values(req: &PlanRequest) -> PlanResponse {
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
        if planned.same_attrs(prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(prior, &["nodes", "gpus", "allocatable", "status"]);
        } else if planned.same_attrs(prior, COUNT_ATTRIBUTES) {
            planned.keep_from(prior, &["nodes", "gpus"]);
            if planned.get("sharing") == prior.get("sharing") {
                planned.keep_from(prior, &["allocatable"]);
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
async fn check_tier(host: &dyn HostNodes, config: &Value) -> Diagnostics {
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
