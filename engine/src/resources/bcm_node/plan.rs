//! Planning a `gpufleet_bcm_node`: what a change keeps of what BCM showed, and what BCM
//! already knows that refuses it.

use crate::{
    backends::bcm::BcmApi,
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{PlanRequest, PlanResponse},
    plan::backend_facts::{self as facts, BackendFact},
};

/// The attributes whose change needs BCM to be told.
pub(super) const REMOTE_ATTRIBUTES: &[&str] =
    &["category", "software_image", "install_mode", "power"];

pub(super) fn plan_node(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if !req.prior.is_null() {
        // A change BCM never sees (wipe_on_destroy, timeouts) keeps what was observed.
        if planned.same_attrs(&req.prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(&req.prior, &["status", "ip"]);
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
    let changed = |attr: &str| req.prior.is_null() || req.config.get(attr) != req.prior.get(attr);
    // A new tenant or hostname replaces the node: its destroy releases the node it holds.
    if !req.prior.is_null()
        && (changed("tenant") || changed("hostname"))
        && let (Some(h), Some(t)) = (
            req.prior.get("hostname").as_str(),
            req.prior.get("tenant").as_str(),
        )
    {
        ctx.releases.replacing(&format!("bcm_node:{h}"), t);
    }
    let known = |attr: &str| req.config.get(attr).as_str().map(str::to_owned);
    // BCM resolves names from its lists, so one list answers both whether the name exists
    // and which names it has.
    if changed("category")
        && let Some(name) = known("category")
        && let Ok(all) = api.categories().await
        && !all.iter().any(|c| c.name == name)
    {
        let have = all.into_iter().map(|c| c.name).collect();
        d.push(unknown_name(
            &facts::UNKNOWN_BCM_CATEGORY,
            &name,
            "category list",
            have,
        ));
    }
    if changed("software_image")
        && let Some(name) = known("software_image")
        && let Ok(all) = api.software_images().await
        && !all.iter().any(|i| i.name == name)
    {
        let have = all.into_iter().map(|i| i.name).collect();
        d.push(unknown_name(
            &facts::UNKNOWN_BCM_IMAGE,
            &name,
            "softwareimage list",
            have,
        ));
    }
    if (changed("hostname") || changed("tenant"))
        && let (Some(hostname), Some(tenant)) = (known("hostname"), known("tenant"))
    {
        match api.device_named(&hostname).await {
            Ok(None) => d.push(facts::UNKNOWN_BCM_NODE.refuse(format!(
                "Base Command Manager has no node named {hostname:?}. List the free ones with \
                 the gpufleet_bcm_nodes data source (free_only = true), or `cmsh -c \"device \
                 list\"`."
            ))),
            Ok(Some(device)) => {
                // A node this resource holds is released by the replacement's destroy first.
                let released = ctx.releases.released_for(&format!("bcm_node:{hostname}"));
                let ours = (req.prior.get("hostname").as_str() == Some(hostname.as_str())
                    && device.tenant() == req.prior.get("tenant").as_str())
                    || (released.is_some() && device.tenant() == released.as_deref());
                if let Some(holder) = device.tenant().filter(|t| *t != tenant && !ours) {
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
