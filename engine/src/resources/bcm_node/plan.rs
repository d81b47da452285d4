//! Planning a `gpufleet_bcm_node`: what a change keeps of what BCM showed, and what BCM
//! already knows that refuses it.

use super::{
    config::NodeConfig,
    schema::{CATEGORY, INSTALL_MODE, IP, POWER, SOFTWARE_IMAGE, STATUS},
};
use crate::{
    backends::bcm::BcmApi,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{PlanRequest, PlanResponse},
    plan::backend_facts::{self as facts, BackendFact},
    value::Known,
};

/// The attributes whose change needs BCM to be told.
pub(super) const REMOTE_ATTRIBUTES: &[&str] = &[CATEGORY, SOFTWARE_IMAGE, INSTALL_MODE, POWER];

pub(super) fn plan_node(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if !req.prior.is_null() {
        // A change BCM never sees (wipe_on_destroy, timeouts) keeps what was observed.
        if planned.same_attrs(&req.prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(&req.prior, &[STATUS, IP]);
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

/// What BCM already knows that refuses the plan: a hostname, category or software image it
/// does not have, and a node another tenant holds. Asked only for what the plan changes; a
/// call that fails is no finding (apply checks again).
pub(super) async fn check_plan(api: &dyn BcmApi, ctx: &Context, req: &PlanRequest) -> Diagnostics {
    let mut d = Diagnostics::new();
    let (config, prior) = (
        NodeConfig::decode(&req.config),
        NodeConfig::decode(&req.prior),
    );
    let creating = req.prior.is_null();
    let changed = |now: &Known<String>, was: &Known<String>| creating || now != was;
    let holder_changed =
        changed(&config.tenant, &prior.tenant) || changed(&config.hostname, &prior.hostname);
    // A new tenant or hostname replaces the node: its destroy releases the node it holds.
    if !creating
        && holder_changed
        && let (Some(h), Some(t)) = (prior.hostname.value(), prior.tenant.value())
    {
        ctx.releases.replacing(&format!("bcm_node:{h}"), t);
    }
    // BCM resolves names from its lists, so one list answers both whether the name exists
    // and which names it has.
    if changed(&config.category, &prior.category)
        && let Some(name) = config.category.value()
        && let Ok(all) = api.categories().await
        && !all.iter().any(|c| &c.name == name)
    {
        let have = all.into_iter().map(|c| c.name).collect();
        d.push(unknown_name(
            &facts::UNKNOWN_BCM_CATEGORY,
            name,
            "category list",
            have,
        ));
    }
    if changed(&config.software_image, &prior.software_image)
        && let Some(name) = config.software_image.value()
        && let Ok(all) = api.software_images().await
        && !all.iter().any(|i| &i.name == name)
    {
        let have = all.into_iter().map(|i| i.name).collect();
        d.push(unknown_name(
            &facts::UNKNOWN_BCM_IMAGE,
            name,
            "softwareimage list",
            have,
        ));
    }
    if holder_changed
        && let (Some(hostname), Some(tenant)) = (config.hostname.value(), config.tenant.value())
    {
        match api.device_named(hostname).await {
            Ok(None) => d.push(facts::UNKNOWN_BCM_NODE.refuse(format!(
                "Base Command Manager has no node named {hostname:?}. List the free ones with \
                 the gpufleet_bcm_nodes data source (free_only = true), or `cmsh -c \"device \
                 list\"`."
            ))),
            Ok(Some(device)) => {
                // A node this resource holds is released by the replacement's destroy first.
                let released = ctx.releases.released_for(&format!("bcm_node:{hostname}"));
                let ours = (prior.hostname.value() == Some(hostname)
                    && device.tenant() == prior.tenant.value().map(String::as_str))
                    || (released.is_some() && device.tenant() == released.as_deref());
                if let Some(holder) = device.tenant().filter(|t| t != tenant && !ours) {
                    d.push(facts::BCM_NODE_HELD.refuse(format!(
                        "node {hostname} is held by tenant {holder:?}, not {tenant:?}: it \
                         cannot be claimed until that tenant releases it. Pick a free node \
                         (gpufleet_bcm_nodes with free_only = true)."
                    )));
                }
            }
            Err(_) => {}
        }
    }
    d
}

/// "BCM has no <what> named <name>", with the names it has (when they could be read).
fn unknown_name(fact: &BackendFact, name: &str, cmsh: &str, mut have: Vec<String>) -> Diagnostic {
    let what = fact.attribute.replace('_', " ");
    have.sort();
    let have = if have.is_empty() {
        " (it has none)".to_owned()
    } else {
        format!(" (it has: {})", have.join(", "))
    };
    fact.refuse(format!(
        "Base Command Manager has no {what} named {name:?}{have}. List them with `cmsh -c \
         \"{cmsh}\"`."
    ))
}
