//! Planning a `gpufleet_network_segment`: what a change keeps of what the controller showed,
//! and what the controller already knows that refuses it.

use super::{
    config::SegmentConfig,
    model::{IPAM_PREFIX, members_of},
    schema::{
        ALLOCATION_ID, ATTACHED_PORTS, DHCP, GATEWAY, ID, MEMBERS, MTU, STATE, STATUS, SUBNET_ID,
        TENANT, VLAN_ID, VNI, VPC,
    },
};
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
pub(super) const REMOTE_ATTRIBUTES: &[&str] = &[GATEWAY, VLAN_ID, VNI, DHCP, MEMBERS, MTU, STATE];

pub(super) fn plan_segment(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    let config = SegmentConfig::decode(&req.config);
    // The gateway defaults to the first host address, whatever state says: it is a function
    // of the configuration, known as soon as cidr is.
    if config.gateway.is_null() {
        let gateway = SegmentConfig::decode(&planned)
            .cidr
            .value()
            .map_or_else(Value::unknown, |net| {
                Value::string(net.first_host().to_string())
            });
        planned.set_attr(GATEWAY, gateway);
    }
    if !req.prior.is_null() {
        let prior = SegmentConfig::decode(&req.prior);
        // Unchanged members keep their resolved ports: apply resolves hostnames only when
        // members change.
        if SegmentConfig::decode(&planned).members == prior.members
            && prior.attached_ports.value().is_some()
        {
            planned.set_attr(ATTACHED_PORTS, req.prior.get(ATTACHED_PORTS).clone());
        }
        // A change the controller never sees (only timeouts) keeps the status.
        if planned.same_attrs(&req.prior, REMOTE_ATTRIBUTES) {
            planned.keep_from(&req.prior, &[STATUS]);
        }
        if prior.id.is_null() {
            // A partial state: the V-Net is gone (or was never made). Apply finishes the
            // create, so what it will record is not known yet.
            for attr in [ID, STATUS, ALLOCATION_ID, SUBNET_ID, ATTACHED_PORTS] {
                planned.set_attr(attr, Value::unknown());
            }
            for (attr, set) in [(VLAN_ID, &config.vlan_id), (VNI, &config.vni)] {
                if set.is_null() {
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
    let (config, prior) = (
        SegmentConfig::decode(&req.config),
        SegmentConfig::decode(&req.prior),
    );
    let creating = req.prior.is_null();
    let (name_changed, cidr_changed) = (config.name != prior.name, config.cidr != prior.cidr);
    // These attributes replace the segment: its destroy deletes its allocation first.
    let replacing = name_changed
        || config.tenant != prior.tenant
        || config.vpc != prior.vpc
        || config.site != prior.site
        || cidr_changed;
    if !creating
        && replacing
        && let (Some(new), Some(old)) = (config.name.value(), prior.name.value())
    {
        ctx.releases
            .replacing(&format!("segment:{new}"), &format!("{IPAM_PREFIX}{old}"));
    }
    let mut vpc_id = None;
    for (fact, what, named, was) in [
        (
            facts::UNKNOWN_NETRIS_TENANT,
            "tenant",
            &config.tenant,
            &prior.tenant,
        ),
        (facts::UNKNOWN_NETRIS_VPC, "VPC", &config.vpc, &prior.vpc),
        (
            facts::UNKNOWN_NETRIS_SITE,
            "site",
            &config.site,
            &prior.site,
        ),
    ] {
        let attr = fact.attribute;
        // The VPC is read whenever the cidr check needs its id.
        let needed = creating || named != was || (attr == VPC && cidr_changed);
        let Some(name) = named.value().filter(|_| needed) else {
            continue;
        };
        let listed = match attr {
            TENANT => api.tenants().await,
            VPC => api.vpcs().await,
            _ => api.sites().await,
        };
        let Ok(items) = listed else { continue };
        match items.iter().find(|n| &n.name == name) {
            Some(n) => {
                if attr == VPC {
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
    if creating || config.members != prior.members {
        d.extend(unknown_member_hosts(api, &config).await);
    }
    if let (Some(vpc), Some(cidr), Some(name)) = (vpc_id, config.cidr.value(), config.name.value())
        && let Ok(tree) = api.ipam(Some(vpc)).await
    {
        // The segment's own allocation, and the one a replacement (a new name) deletes first.
        let mut own: Vec<String> = [Some(name), prior.name.value()]
            .into_iter()
            .flatten()
            .map(|n| format!("{IPAM_PREFIX}{n}"))
            .collect();
        own.extend(ctx.releases.released_for(&format!("segment:{name}")));
        let clash = tree
            .iter()
            .flat_map(IpamNode::walk)
            .filter(|n| n.is_allocation() && !own.contains(&n.name))
            .find(|n| n.prefix.parse::<Ipv4Net>().is_ok_and(|p| p.overlaps(cidr)));
        if let Some(n) = clash {
            d.push(facts::CIDR_OVERLAP.refuse(format!(
                "{cidr} overlaps the IPAM allocation {:?} ({}) in VPC {:?}; allocations of one \
                 VPC may not overlap. Choose a range outside it.",
                n.name,
                n.prefix,
                config.vpc.value().map_or("", String::as_str)
            )));
        }
    }
    d
}

/// The member hostnames that the controller's server inventory does not have.
async fn unknown_member_hosts(api: &dyn NetrisApi, config: &SegmentConfig) -> Diagnostics {
    let mut d = Diagnostics::new();
    let members = members_of(config);
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
