//! The API's JSON shapes, built from the stored objects ([`super::model`]).
//!
//! Field names and nesting follow the controller's public API (netriswebapi, the
//! Terraform provider and netris-operator): camelCase, references as `{id, name}`,
//! dates as epoch milliseconds, a V-Net's VLAN as a string (as it is written) and its
//! VNI as a number.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::model::{Allocation, Db, Port, Server, Site, Subnet, Switch, Tenant, Vnet, Vpc};

/// `{id, name}` for a tenant.
pub(crate) fn tenant_ref(db: &Db, id: u64) -> Value {
    json!({"id": id, "name": db.tenants.get(&id).map_or("", |t| t.name.as_str())})
}

/// `{id, name}` for a site.
pub(crate) fn site_ref(db: &Db, id: u64) -> Value {
    json!({"id": id, "name": db.sites.get(&id).map_or("", |s| s.name.as_str())})
}

/// `{id, name}` for a VPC.
pub(crate) fn vpc_ref(db: &Db, id: u64) -> Value {
    json!({"id": id, "name": db.vpcs.get(&id).map_or("", |v| v.name.as_str())})
}

/// A site.
pub(crate) fn site(s: &Site) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "vlanRange": format!("{}-{}", s.vlan_range.0, s.vlan_range.1),
        "vniRange": format!("{}-{}", s.vni_range.0, s.vni_range.1),
    })
}

/// A tenant.
pub(crate) fn tenant(t: &Tenant) -> Value {
    json!({"id": t.id, "name": t.name, "description": t.description})
}

/// A VPC.
pub(crate) fn vpc(db: &Db, v: &Vpc) -> Value {
    json!({
        "id": v.id,
        "name": v.name,
        "adminTenant": tenant_ref(db, v.admin_tenant),
        "guestTenant": v.guest_tenants.iter().map(|t| tenant_ref(db, *t)).collect::<Vec<_>>(),
        "tags": v.tags,
        "createdDate": v.created_ms,
        "modifiedDate": v.modified_ms,
    })
}

/// An allocation (without its subnets).
pub(crate) fn allocation(db: &Db, a: &Allocation) -> Value {
    json!({
        "id": a.id,
        "name": a.name,
        "prefix": a.prefix.to_string(),
        "type": "allocation",
        "tenant": tenant_ref(db, a.tenant),
        "vpc": vpc_ref(db, a.vpc),
        "description": a.description,
        "tags": a.tags,
        "createdDate": a.created_ms,
        "modifiedDate": a.modified_ms,
    })
}

/// The allocation a subnet sits in (allocations of one VPC never overlap, so there is
/// at most one).
pub(crate) fn parent_allocation<'a>(db: &'a Db, s: &Subnet) -> Option<&'a Allocation> {
    db.allocations
        .values()
        .find(|a| a.vpc == s.vpc && a.prefix.contains(&s.prefix))
}

/// A subnet.
pub(crate) fn subnet(db: &Db, s: &Subnet) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "prefix": s.prefix.to_string(),
        "type": "subnet",
        "purpose": s.purpose.as_str(),
        "tenant": tenant_ref(db, s.tenant),
        "vpc": vpc_ref(db, s.vpc),
        "sites": s.sites.iter().map(|id| site_ref(db, *id)).collect::<Vec<_>>(),
        "defaultGateway": s.default_gateway.map(|g| g.to_string()).unwrap_or_default(),
        "tags": s.tags,
        "globalRouting": s.global_routing,
        "allocation": parent_allocation(db, s).map(|a| json!({"id": a.id, "name": a.name})),
        "createdDate": s.created_ms,
        "modifiedDate": s.modified_ms,
    })
}

/// A V-Net as `GET /api/v2/vnet[/id]` shows it at `now_ms`.
pub(crate) fn vnet(db: &Db, v: &Vnet, now_ms: u64) -> Value {
    let provisioning = v.provisioning(now_ms);
    let (label, value) = match (provisioning, v.state) {
        (true, _) => ("Provisioning", "provisioning"),
        (false, super::model::AdminState::Active) => ("Active", "active"),
        (false, super::model::AdminState::Disabled) => ("Disabled", "disabled"),
    };
    let ports: Vec<Value> = v
        .ports
        .iter()
        .map(|vp| {
            let port = db.ports.get(&vp.port);
            let switch = port.map(|p| p.switch).and_then(|s| db.switches.get(&s));
            let state = vp.state.as_str();
            json!({
                "id": vp.port,
                "name": port.map(|p| db.port_name(p)).unwrap_or_default(),
                "switchName": switch.map(|s| s.name.as_str()).unwrap_or_default(),
                "switch": switch.map(|s| json!({"id": s.id, "name": s.name})),
                "port": port.map(|p| p.port.as_str()).unwrap_or_default(),
                "site": switch.map(|s| site_ref(db, s.site)),
                "vlan": vp.vlan.unwrap_or(v.vlan).to_string(),
                "untagged": vp.untagged,
                "state": {"id": state, "label": capitalize(state), "value": state},
                "status": {"label": label, "value": value},
            })
        })
        .collect();
    json!({
        "id": v.id,
        "name": v.name,
        "tenant": tenant_ref(db, v.tenant),
        "guestTenants": v.guest_tenants.iter().map(|t| tenant_ref(db, *t)).collect::<Vec<_>>(),
        "sites": v.sites.iter().map(|s| site_ref(db, *s)).collect::<Vec<_>>(),
        "vpc": vpc_ref(db, v.vpc),
        "state": v.state.as_str(),
        "provisioning": provisioning,
        "status": {"label": label, "value": value},
        "vlan": v.vlan.to_string(),
        "vxlanID": v.vxlan_id,
        "gateways": v.gateways.iter().map(|g| json!({
            "prefix": g.prefix.to_string(),
            "ipFamily": "ipv4",
            "dhcpEnabled": g.dhcp_enabled,
            "dhcp": g.dhcp.map(|(start, end)| json!({"start": start.to_string(), "end": end.to_string()})),
        })).collect::<Vec<_>>(),
        "ports": ports,
        "portsCount": v.ports.len(),
        "tags": v.tags,
        "mtu": v.mtu,
        "createdDate": v.created_ms,
        "modifiedDate": v.modified_ms,
    })
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A switch.
pub(crate) fn switch(db: &Db, s: &Switch) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "type": "switch",
        "site": site_ref(db, s.site),
        "tenant": tenant_ref(db, super::model::ADMIN_TENANT_ID),
        "rack": s.rack,
        "portsCount": db.ports.values().filter(|p| p.switch == s.id).count(),
    })
}

/// A server with its links (NIC → switch port), so a client can resolve a hostname to
/// its switch ports.
pub(crate) fn server(db: &Db, s: &Server) -> Value {
    let links: Vec<Value> = s
        .links
        .iter()
        .map(|(nic, port_id)| {
            let port = db.ports.get(port_id);
            json!({
                "local": {"name": nic},
                "remote": {
                    "id": port_id,
                    "name": port.map(|p| db.port_name(p)).unwrap_or_default(),
                    "switchName": port.map(|p| db.switch_name(p.switch)).unwrap_or_default(),
                    "port": port.map(|p| p.port.as_str()).unwrap_or_default(),
                },
            })
        })
        .collect();
    json!({
        "id": s.id,
        "name": s.name,
        "type": "server",
        "site": site_ref(db, s.site),
        "tenant": tenant_ref(db, super::model::ADMIN_TENANT_ID),
        "rack": s.rack,
        "links": links,
    })
}

/// A switch port, with the server cabled to it and the V-Net using it (if any).
pub(crate) fn port(db: &Db, p: &Port, owners: &BTreeMap<u64, u64>) -> Value {
    let switch = db.switches.get(&p.switch);
    let vnet = owners.get(&p.id).and_then(|id| db.vnets.get(id));
    let server = p
        .server
        .as_ref()
        .and_then(|(id, nic)| db.servers.get(id).map(|s| (s, nic)));
    json!({
        "id": p.id,
        "name": db.port_name(p),
        "switchName": switch.map(|s| s.name.as_str()).unwrap_or_default(),
        "switch": switch.map(|s| json!({"id": s.id, "name": s.name})),
        "port": p.port,
        "site": switch.map(|s| site_ref(db, s.site)),
        "description": server.map(|(s, nic)| format!("{} {nic}", s.name)).unwrap_or_default(),
        "server": server.map(|(s, nic)| json!({"id": s.id, "name": s.name, "nic": nic})),
        "vnet": vnet.map(|v| json!({"id": v.id, "name": v.name})),
        "used": vnet.is_some(),
    })
}
