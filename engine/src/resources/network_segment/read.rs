//! Refresh and import: reading the V-Net back from the controller.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    apply::StepError,
    config::{Attached, SegmentConfig},
    model::{
        IPAM_PREFIX, Ids, MTU_TAG, Member, OWNER_TAG, attached_value, hostname_members_in,
        id_value, member_value, members_of, normalise_state, status_of,
    },
    schema::{
        ALLOCATION_ID, ATTACHED_PORTS, CIDR, DEFAULT_MTU, DEFAULT_STATE, DHCP, DHCP_END,
        DHCP_START, GATEWAY, ID, MEMBERS, MTU, NAME, SITE, STATE, STATUS, SUBNET_ID, TENANT,
        VLAN_ID, VNI, VPC, segment_schema,
    },
};
use crate::{
    apply::{bounded, read_outcome},
    backends::netris::{IpamNode, NetrisApi, VNet},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ReadResponse,
    timeouts::{Operation, Timeouts},
    validate::Ipv4Net,
    value::Value,
};

/// The members as the controller has them, expressed against the prior members so that
/// hostname members survive a refresh (see the module docs).
pub(super) fn observed_members(
    prior: &Value,
    remote: &BTreeMap<String, bool>,
) -> (Value, Vec<Attached>) {
    let recorded = SegmentConfig::decode(prior);
    let prior_members = members_of(&recorded);
    let prior_attached = recorded.attached_ports.into_value().unwrap_or_default();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut members: Vec<Member> = Vec::new();
    let mut attached: Vec<Attached> = Vec::new();
    let port_member = |port: &str, untagged: bool, members: &mut Vec<Member>| {
        members.push(Member {
            port: Some(port.to_owned()),
            hostname: None,
            untagged,
        });
    };
    for m in &prior_members {
        match (&m.port, &m.hostname) {
            (Some(p), _) => {
                if let Some(&untagged) = remote.get(p.trim())
                    && used.insert(p.trim().to_owned())
                {
                    port_member(p.trim(), untagged, &mut members);
                    attached.push(Attached {
                        port: p.trim().to_owned(),
                        hostname: None,
                        untagged,
                    });
                }
            }
            (None, Some(h)) => {
                let ports: Vec<&Attached> = prior_attached
                    .iter()
                    .filter(|a| a.hostname.as_deref() == Some(h.as_str()))
                    .collect();
                let present: Vec<(&str, bool)> = ports
                    .iter()
                    .filter_map(|a| remote.get(&a.port).map(|u| (a.port.as_str(), *u)))
                    .filter(|(p, _)| !used.contains(*p))
                    .collect();
                let same_mode = present.windows(2).all(|w| w[0].1 == w[1].1);
                if !ports.is_empty() && present.len() == ports.len() && same_mode {
                    members.push(Member {
                        port: None,
                        hostname: Some(h.clone()),
                        untagged: present.first().is_some_and(|(_, u)| *u),
                    });
                    for (p, u) in present {
                        used.insert(p.to_owned());
                        attached.push(Attached {
                            port: p.to_owned(),
                            hostname: Some(h.clone()),
                            untagged: u,
                        });
                    }
                } else {
                    // Some of the server's ports left: what remains are plain ports.
                    for (p, u) in present {
                        used.insert(p.to_owned());
                        port_member(p, u, &mut members);
                        attached.push(Attached {
                            port: p.to_owned(),
                            hostname: None,
                            untagged: u,
                        });
                    }
                }
            }
            (None, None) => {}
        }
    }
    for (p, &u) in remote {
        if !used.contains(p) {
            port_member(p, u, &mut members);
            attached.push(Attached {
                port: p.clone(),
                hostname: None,
                untagged: u,
            });
        }
    }
    let value = if members.is_empty() && recorded.members.is_null() {
        Value::Null
    } else {
        Value::set(members.iter().map(member_value).collect())
    };
    (value, attached)
}

/// The state of a segment as the controller shows it, normalised against `prior`.
pub(super) fn observed_state(prior: &Value, v: &VNet) -> Value {
    let mut s = prior.clone();
    s.set_attr(ID, Value::string(v.id.to_string()));
    s.set_attr(NAME, Value::string(v.name.clone()));
    if let Some(t) = &v.tenant {
        s.set_attr(TENANT, Value::string(t.name.clone()));
    }
    if let Some(vpc) = &v.vpc {
        s.set_attr(VPC, Value::string(vpc.name.clone()));
    }
    if let Some(site) = v.sites.first() {
        s.set_attr(SITE, Value::string(site.name.clone()));
    }
    let gw = v.gateways.first();
    let parsed = gw.and_then(|g| {
        let (addr, len) = g.prefix.split_once('/')?;
        let addr: Ipv4Addr = addr.trim().parse().ok()?;
        let len: u8 = len.trim().parse().ok()?;
        let net = Ipv4Net::new(
            Ipv4Addr::from(
                u32::from(addr) & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0),
            ),
            len,
        )?;
        Some((addr, net))
    });
    match parsed {
        Some((addr, net)) => {
            s.set_attr(GATEWAY, Value::string(addr.to_string()));
            s.set_attr(CIDR, Value::string(net.to_string()));
        }
        None => s.set_attr(GATEWAY, Value::Null),
    }
    let dhcp = gw
        .filter(|g| g.dhcp_enabled.unwrap_or(g.dhcp.is_some()))
        .and_then(|g| g.dhcp.as_ref())
        .map_or(Value::Null, |r| {
            Value::object([
                (DHCP_START, Value::string(r.start.clone())),
                (DHCP_END, Value::string(r.end.clone())),
            ])
        });
    s.set_attr(DHCP, dhcp);
    // `auto` and 0 read as none: keep what state recorded.
    if let Some(n) = v.vlan {
        s.set_attr(VLAN_ID, Value::int(n));
    }
    if let Some(n) = v.vxlan_id {
        s.set_attr(VNI, Value::int(n));
    }
    let mtu = v
        .mtu
        .filter(|m| *m > 0)
        .or_else(|| v.tag(MTU_TAG).and_then(|m| m.trim().parse::<i64>().ok()));
    if let Some(mtu) = mtu {
        s.set_attr(MTU, Value::int(mtu));
    } else if s.get(MTU).is_null() {
        s.set_attr(MTU, Value::int(DEFAULT_MTU));
    }
    if let Some(state) = normalise_state(&v.state) {
        s.set_attr(STATE, Value::string(state));
    } else if s.get(STATE).is_null() {
        s.set_attr(STATE, Value::string(DEFAULT_STATE));
    }
    s.set_attr(STATUS, Value::string(status_of(v)));
    let remote: BTreeMap<String, bool> = v
        .ports
        .iter()
        .filter_map(|p| Some((p.full_name()?, p.is_untagged())))
        .collect();
    // An import (or a state from before `attached_ports`) knows no hostname members: the
    // V-Net's tags say which ports came from which server.
    let tagged;
    let recorded = SegmentConfig::decode(prior);
    let prior = match hostname_members_in(&v.tags) {
        Some((members, attached)) if recorded.attached_ports.is_null() => {
            let mut p = prior.clone();
            // Port members the prior state lists stay; the tags add the hostname members.
            let ports = members_of(&recorded)
                .into_iter()
                .filter(|m| m.port.is_some())
                .map(|m| member_value(&m));
            let hosts = members.as_seq().unwrap_or_default().to_vec();
            p.set_attr(MEMBERS, Value::set(ports.chain(hosts).collect()));
            p.set_attr(ATTACHED_PORTS, attached);
            tagged = p;
            &tagged
        }
        _ => prior,
    };
    let (members, attached) = observed_members(prior, &remote);
    s.set_attr(MEMBERS, members);
    s.set_attr(ATTACHED_PORTS, attached_value(&attached));
    s.with_unknowns_nulled()
}

/// Finds a segment whose V-Net id is not in state (import, or a create that stopped before
/// the V-Net was recorded) by name; fills the ids of its IPAM objects when they carry the
/// segment's names. `None` when there is no such V-Net.
pub(super) async fn find_by_name(
    api: &dyn NetrisApi,
    state: &Value,
    name: &str,
) -> Result<Option<Value>, StepError> {
    // An import takes over whatever V-Net has the name; a partial state only finds the V-Net
    // its own interrupted apply created (with the owner tag).
    let recorded = SegmentConfig::decode(state);
    let importing = recorded.tenant.is_null();
    let Some(found) = api
        .vnets(None)
        .await?
        .into_iter()
        .find(|v| v.name == name && (importing || v.tag(OWNER_TAG) == Some(name)))
    else {
        return Ok(None);
    };
    let Some(v) = api.vnet(found.id).await? else {
        return Ok(None);
    };
    let mut s = observed_state(state, &v);
    let ipam_name = format!("{IPAM_PREFIX}{name}");
    let tree = api.ipam(v.vpc.as_ref().map(|vpc| vpc.id)).await?;
    let nodes: Vec<&IpamNode> = tree.iter().flat_map(IpamNode::walk).collect();
    let mut ids = Ids::of(&recorded);
    let find = |alloc: bool| {
        nodes
            .iter()
            .find(|n| n.name == ipam_name && n.is_allocation() == alloc)
            .map(|n| n.id)
    };
    ids.allocation = ids.allocation.or_else(|| find(true));
    ids.subnet = ids.subnet.or_else(|| find(false));
    s.set_attr(ALLOCATION_ID, id_value(ids.allocation));
    s.set_attr(SUBNET_ID, id_value(ids.subnet));
    Ok(Some(s))
}

/// The state of a segment whose V-Net is gone: null when its recorded allocation and subnet
/// are gone as well, else a partial state (no V-Net id) that keeps the ones still on the
/// controller, so a destroy removes them and an apply recreates the V-Net, adopting them.
/// Costs two reads (the VPCs, then that VPC's IPAM tree), and only when the V-Net has gone.
pub(super) async fn leftover_ipam(
    api: &dyn NetrisApi,
    state: &Value,
    ids: Ids,
) -> Result<Value, StepError> {
    if ids.allocation.is_none() && ids.subnet.is_none() {
        return Ok(Value::Null);
    }
    // The IPAM listing is per VPC (the default VPC when unfiltered).
    let recorded = SegmentConfig::decode(state);
    let vpc_name = recorded.vpc.value().map_or("", String::as_str);
    let vpc = api.vpcs().await?.into_iter().find(|v| v.name == vpc_name);
    let tree = api.ipam(vpc.map(|v| v.id)).await?;
    let present = |id: Option<i64>, alloc: bool| {
        id.filter(|id| {
            tree.iter()
                .flat_map(IpamNode::walk)
                .any(|n| n.id == *id && n.is_allocation() == alloc)
        })
    };
    let (allocation, subnet) = (present(ids.allocation, true), present(ids.subnet, false));
    if allocation.is_none() && subnet.is_none() {
        return Ok(Value::Null);
    }
    let mut partial = state.with_unknowns_nulled();
    partial.set_attr(ID, Value::Null);
    partial.set_attr(ALLOCATION_ID, id_value(allocation));
    partial.set_attr(SUBNET_ID, id_value(subnet));
    Ok(partial)
}

pub(super) async fn read_segment(
    api: &dyn NetrisApi,
    ctx: &Context,
    state: &Value,
) -> ReadResponse {
    let recorded = SegmentConfig::decode(state);
    let name = recorded.name.value().cloned().unwrap_or_default();
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let ids = Ids::of(&recorded);
    let result = bounded(ctx, Operation::Read, started, started + t.read, async {
        match ids.vnet {
            Some(id) => match api.vnet(id).await? {
                Some(v) if v.name == name => Ok(observed_state(state, &v)),
                // Gone, or a V-Net of another name under the same id (not ours): the segment
                // is gone only when its IPAM objects are gone too.
                _ => leftover_ipam(api, state, ids).await,
            },
            None => match find_by_name(api, state, &name).await? {
                Some(s) => Ok(s),
                // A partial state still records IPAM objects: keep it so they are deleted.
                None if ids.allocation.is_some() || ids.subnet.is_some() => {
                    Ok(state.with_unknowns_nulled())
                }
                None => Ok(Value::Null),
            },
        }
    })
    .await;
    read_outcome(
        result,
        state,
        "Network Segment Read Failed",
        &name,
        "reading the segment",
    )
}

/// The state skeleton for an import by name: every attribute null but `name`; read finds the
/// V-Net by name and fills the rest.
pub(super) fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let name = id.trim();
    if name.is_empty() {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by its name, e.g. `terraform import \
                 gpufleet_network_segment.a tenant-a-net`."
            ),
        )
        .into());
    }
    Ok(segment_schema()
        .block
        .complete(&Value::object([(NAME, Value::string(name))])))
}
