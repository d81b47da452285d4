//! Planning a `gpufleet_network_segment`: what a change keeps of what the controller showed,
//! and what the controller already knows that refuses it.

use super::model::{Addressing, IPAM_PREFIX, members_of};
use crate::{
    backends::netris::{IpamNode, NetrisApi},
    context::Context,
    diag::Diagnostics,
    kinds::{PlanRequest, PlanResponse},
    plan::backend_facts as facts,
    validate::Ipv4Net,
    value::Value,
};

/// The attributes whose change needs the controller to be told.
pub(super) const REMOTE_ATTRIBUTES: &[&str] = &[
    "gateway", "vlan_id", "vni", "dhcp", "members", "mtu", "state",
];

pub(super) fn plan_segment(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    // The gateway defaults to the first host address, whatever state says: it is a function
    // of the configuration, known as soon as cidr is.
    if req.config.get("gateway").is_null() {
        let gateway = Addressing::of(&planned)
            .cidr
            .map_or_else(Value::unknown, |net| {
                Value::string(net.first_host().to_string())
            });
        planned.set_attr("gateway", gateway);
    }
    if !req.prior.is_null() {
        // Unchanged members keep their resolved ports: apply resolves hostnames only when
        // members change.
        let prior_ports = req.prior.get("attached_ports");
        if planned.get("members") == req.prior.get("members")
            && prior_ports.is_wholly_known()
            && !prior_ports.is_null()
        {
            planned.set_attr("attached_ports", prior_ports.clone());
        }
        // A change the controller never sees (only timeouts) keeps the status.
        if planned.same_attrs(&req.prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(&req.prior, &["status"]);
        }
        if req.prior.get("id").is_null() {
            // A partial state: the V-Net is gone (or was never made). Apply finishes the
            // create, so what it will record is not known yet.
            for attr in [
                "id",
                "status",
                "allocation_id",
                "subnet_id",
                "attached_ports",
            ] {
                planned.set_attr(attr, Value::unknown());
            }
            for attr in ["vlan_id", "vni"] {
                if req.config.get(attr).is_null() {
                    planned.set_attr(attr, Value::unknown());
                }
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

/// What the controller already knows that refuses the plan: a tenant, VPC or site it does not
/// have, a member hostname missing from its server inventory, and a `cidr` that overlaps an
/// allocation of another owner in the VPC. Asked only for what the plan changes; a call that
/// fails is no finding (apply checks again).
pub(super) async fn check_plan(
    api: &dyn NetrisApi,
    ctx: &Context,
    req: &PlanRequest,
) -> Diagnostics {
    let mut d = Diagnostics::new();
    let changed = |attr: &str| req.prior.is_null() || req.config.get(attr) != req.prior.get(attr);
    // These attributes replace the segment: its destroy deletes its allocation first.
    let replacing = ["name", "tenant", "vpc", "site", "cidr"]
        .iter()
        .any(|a| changed(a));
    if !req.prior.is_null()
        && replacing
        && let (Some(new), Some(old)) = (
            req.config.get("name").as_str(),
            req.prior.get("name").as_str(),
        )
    {
        ctx.releases
            .replacing(&format!("segment:{new}"), &format!("{IPAM_PREFIX}{old}"));
    }
    let mut vpc_id = None;
    for (fact, what) in [
        (facts::UNKNOWN_NETRIS_TENANT, "tenant"),
        (facts::UNKNOWN_NETRIS_VPC, "VPC"),
        (facts::UNKNOWN_NETRIS_SITE, "site"),
    ] {
        let attr = fact.attribute;
        // The VPC is read whenever the cidr check needs its id.
        let needed = changed(attr) || (attr == "vpc" && changed("cidr"));
        let Some(name) = req.config.get(attr).as_str().filter(|_| needed) else {
            continue;
        };
        let listed = match attr {
            "tenant" => api.tenants().await,
            "vpc" => api.vpcs().await,
            _ => api.sites().await,
        };
        let Ok(items) = listed else { continue };
        match items.iter().find(|n| n.name == name) {
            Some(n) => {
                if attr == "vpc" {
                    vpc_id = Some(n.id);
                }
            }
            None => {
                let mut have: Vec<&str> = items.iter().map(|n| n.name.as_str()).collect();
                have.sort_unstable();
                let have = if have.is_empty() {
                    "none".to_owned()
                } else {
                    have.join(", ")
                };
                d.push(fact.refuse(format!(
                    "the Netris controller has no {what} named {name:?} (it has: {have})."
                )));
            }
        }
    }
    if changed("members") {
        d.extend(unknown_member_hosts(api, &req.config).await);
    }
    if let (Some(vpc), Some(cidr), Some(name)) = (
        vpc_id,
        Addressing::of(&req.config).cidr,
        req.config.get("name").as_str(),
    ) && let Ok(tree) = api.ipam(Some(vpc)).await
    {
        // The segment's own allocation, and the one a replacement (a new name) deletes first.
        let mut own: Vec<String> = [Some(name), req.prior.get("name").as_str()]
            .into_iter()
            .flatten()
            .map(|n| format!("{IPAM_PREFIX}{n}"))
            .collect();
        own.extend(ctx.releases.released_for(&format!("segment:{name}")));
        let clash = tree
            .iter()
            .flat_map(IpamNode::walk)
            .filter(|n| n.is_allocation() && !own.contains(&n.name))
            .find(|n| n.prefix.parse::<Ipv4Net>().is_ok_and(|p| p.overlaps(&cidr)));
        if let Some(n) = clash {
            d.push(facts::CIDR_OVERLAP.refuse(format!(
                "{cidr} overlaps the IPAM allocation {:?} ({}) in VPC {:?}; allocations of one \
                 VPC may not overlap. Choose a range outside it.",
                n.name,
                n.prefix,
                req.config.get("vpc").as_str().unwrap_or_default()
            )));
        }
    }
    d
}

/// The member hostnames that the controller's server inventory does not have.
async fn unknown_member_hosts(api: &dyn NetrisApi, config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let members = members_of(config.get("members"));
    let hostnames: Vec<&str> = members
        .iter()
        .filter_map(|m| m.hostname.as_deref())
        .collect();
    if hostnames.is_empty() {
        return d;
    }
    let Ok(servers) = api.servers().await else {
        return d;
    };
    for h in hostnames {
        if !servers.iter().any(|s| s.name.eq_ignore_ascii_case(h)) {
            d.push(facts::UNKNOWN_MEMBER_HOST.refuse(format!(
                "member hostname {h:?} is not in the Netris controller's server inventory \
                 (/api/v2/hw/server). Add the server there, or name its switch ports as port \
                 members."
            )));
        }
    }
    d
}
