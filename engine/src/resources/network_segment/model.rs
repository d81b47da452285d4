//! The segment a configuration asks for, decoded from its value, and how its parts are written
//! back to state.

use std::net::Ipv4Addr;

use crate::{
    backends::netris::{
        AllocationWrite, DhcpRange, GatewayWrite, IdRef, PortWrite, SubnetWrite, VNet, VNetWrite,
    },
    diag::Diagnostics,
    path::AttrPath,
    validate::Ipv4Net,
    value::Value,
};

/// Prefix of the IPAM objects' names (`gf-<segment>`).
pub(super) const IPAM_PREFIX: &str = "gf-";

/// Tag key that marks the segment owning a V-Net or subnet.
pub(super) const OWNER_TAG: &str = "gpufleet:owner";

/// Tag key that records the segment's MTU on its V-Net.
pub(super) const MTU_TAG: &str = "gpufleet:mtu";

/// A member as configured: exactly one of `port` and `hostname`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Member {
    pub(super) port: Option<String>,
    pub(super) hostname: Option<String>,
    pub(super) untagged: bool,
}

/// A switch port attached to the V-Net, with the hostname member it came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Attached {
    pub(super) port: String,
    pub(super) hostname: Option<String>,
    pub(super) untagged: bool,
}

/// The desired segment, from a planned value whose configuration is known.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub(super) name: String,
    pub(super) tenant: String,
    pub(super) vpc: String,
    pub(super) site: String,
    pub(super) cidr: Ipv4Net,
    pub(super) gateway: Ipv4Addr,
    pub(super) vlan_id: Option<i64>,
    pub(super) vni: Option<i64>,
    pub(super) dhcp: Option<DhcpRange>,
    pub(super) members: Vec<Member>,
    pub(super) mtu: i64,
    pub(super) state: String,
}

/// The controller ids the segment's objects were given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Ids {
    pub(super) allocation: Option<i64>,
    pub(super) subnet: Option<i64>,
    pub(super) vnet: Option<i64>,
}

/// The ids of the objects a segment refers to by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refs {
    pub(super) tenant: i64,
    pub(super) vpc: i64,
    pub(super) site: i64,
}

/// The segment's addresses as far as a configuration, plan or state gives them (any of them
/// may be unknown or invalid yet): the one place `cidr` and `gateway` are parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Addressing {
    /// `cidr`, when known and valid.
    pub(super) cidr: Option<Ipv4Net>,
    /// `gateway` as set, when known and valid.
    pub(super) gateway: Option<Ipv4Addr>,
    /// Whether `gateway` is null (left to its default) rather than set or unknown.
    pub(super) gateway_default: bool,
}

impl Addressing {
    /// Reads `cidr` and `gateway` of `v`.
    pub(super) fn of(v: &Value) -> Addressing {
        Addressing {
            cidr: v.get("cidr").as_str().and_then(|s| s.parse().ok()),
            gateway: v.get("gateway").as_str().and_then(|s| s.parse().ok()),
            gateway_default: v.get("gateway").is_null(),
        }
    }

    /// The gateway apply uses: the one set, or else the first host address of `cidr`.
    pub(super) fn effective_gateway(&self) -> Option<Ipv4Addr> {
        if self.gateway_default {
            self.cidr.map(|n| n.first_host())
        } else {
            self.gateway
        }
    }
}

impl Segment {
    pub(super) fn from_value(v: &Value) -> Result<Segment, Diagnostics> {
        let mut d = Diagnostics::new();
        let mut text = |name: &str| -> String {
            match v.get(name).as_str() {
                Some(s) => s.to_owned(),
                None => {
                    d.error_at(
                        AttrPath::attr(name),
                        "Value Not Known At Apply",
                        format!("{name} must be known to apply a network segment."),
                    );
                    String::new()
                }
            }
        };
        let (name, tenant, vpc, site) = (text("name"), text("tenant"), text("vpc"), text("site"));
        let state = text("state");
        let addressing = Addressing::of(v);
        let (Some(cidr), Some(gateway)) = (addressing.cidr, addressing.gateway) else {
            d.error_at(
                AttrPath::attr("cidr"),
                "Invalid Network",
                "cidr and gateway must be a valid IPv4 network and address.",
            );
            return Err(d);
        };
        if d.has_error() {
            return Err(d);
        }
        let dhcp = match (
            v.get("dhcp").get("start").as_str(),
            v.get("dhcp").get("end").as_str(),
        ) {
            (Some(start), Some(end)) => Some(DhcpRange {
                start: start.to_owned(),
                end: end.to_owned(),
            }),
            _ => None,
        };
        Ok(Segment {
            name,
            tenant,
            vpc,
            site,
            cidr,
            gateway,
            vlan_id: v.get("vlan_id").as_i64(),
            vni: v.get("vni").as_i64(),
            dhcp,
            members: members_of(v.get("members")),
            mtu: v.get("mtu").as_i64().unwrap_or(9000),
            state,
        })
    }

    pub(super) fn ipam_name(&self) -> String {
        format!("{IPAM_PREFIX}{}", self.name)
    }

    pub(super) fn owner_tag(&self) -> String {
        format!("{OWNER_TAG}={}", self.name)
    }

    pub(super) fn allocation_body(&self, refs: Refs) -> AllocationWrite {
        AllocationWrite {
            name: self.ipam_name(),
            prefix: self.cidr.to_string(),
            tenant: IdRef { id: refs.tenant },
            vpc: IdRef { id: refs.vpc },
            description: self.owner_tag(),
        }
    }

    pub(super) fn subnet_body(&self, refs: Refs) -> SubnetWrite {
        SubnetWrite {
            name: self.ipam_name(),
            prefix: self.cidr.to_string(),
            purpose: "common".to_owned(),
            tenant: IdRef { id: refs.tenant },
            sites: vec![IdRef { id: refs.site }],
            vpc: IdRef { id: refs.vpc },
            default_gateway: self.gateway.to_string(),
            tags: vec![self.owner_tag()],
            global_routing: false,
            description: self.owner_tag(),
        }
    }

    pub(super) fn vnet_body(&self, refs: Refs, attached: &[Attached]) -> VNetWrite {
        VNetWrite {
            name: self.name.clone(),
            tenant: IdRef { id: refs.tenant },
            guest_tenants: Vec::new(),
            sites: vec![IdRef { id: refs.site }],
            vpc: IdRef { id: refs.vpc },
            state: self.state.clone(),
            vlan: self
                .vlan_id
                .map_or_else(|| "auto".to_owned(), |v| v.to_string()),
            vxlan_id: self.vni.and_then(|v| u32::try_from(v).ok()).unwrap_or(0),
            ip_family: "ipv4".to_owned(),
            tags: [self.owner_tag(), format!("{MTU_TAG}={}", self.mtu)]
                .into_iter()
                .chain(attached.iter().filter_map(host_port_tag))
                .collect(),
            mtu: self.mtu,
            gateways: vec![GatewayWrite {
                prefix: format!("{}/{}", self.gateway, self.cidr.prefix_len()),
                dhcp_enabled: self.dhcp.is_some(),
                dhcp: self.dhcp.clone(),
            }],
            ports: attached
                .iter()
                .map(|a| PortWrite {
                    name: a.port.clone(),
                    access_mode: a.untagged,
                    state: "active".to_owned(),
                    lacp: "off".to_owned(),
                })
                .collect(),
        }
    }
}

pub(super) fn members_of(v: &Value) -> Vec<Member> {
    v.as_seq()
        .unwrap_or_default()
        .iter()
        .map(|m| Member {
            port: m.get("port").as_str().map(str::to_owned),
            hostname: m.get("hostname").as_str().map(str::to_owned),
            untagged: m.get("untagged").as_bool().unwrap_or(false),
        })
        .collect()
}

/// The tag that says an attached port came from a hostname member, `<hostname>/<port>`:
/// the controller keeps only the ports, and an import needs the hostname back.
pub(super) const HOST_PORT_TAG: &str = "gpufleet:host-port";

fn host_port_tag(a: &Attached) -> Option<String> {
    let host = a.hostname.as_deref()?;
    Some(format!("{HOST_PORT_TAG}={host}/{}", a.port))
}

/// The hostname members and their attached ports that the V-Net's tags record
/// ([`HOST_PORT_TAG`]), as a prior state carries them (`members`, `attached_ports`); `None`
/// when there are none.
pub(super) fn hostname_members_in(tags: &[String]) -> Option<(Value, Value)> {
    let attached: Vec<Attached> = tags
        .iter()
        .filter_map(|t| t.strip_prefix(HOST_PORT_TAG)?.strip_prefix('='))
        .filter_map(|v| v.split_once('/'))
        .map(|(host, port)| Attached {
            port: port.to_owned(),
            hostname: Some(host.to_owned()),
            untagged: false,
        })
        .collect();
    if attached.is_empty() {
        return None;
    }
    let hosts: std::collections::BTreeSet<&str> = attached
        .iter()
        .filter_map(|a| a.hostname.as_deref())
        .collect();
    let members = Value::set(
        hosts
            .into_iter()
            .map(|h| {
                member_value(&Member {
                    port: None,
                    hostname: Some(h.to_owned()),
                    untagged: false,
                })
            })
            .collect(),
    );
    Some((members, attached_value(&attached)))
}

pub(super) fn member_value(m: &Member) -> Value {
    Value::object([
        ("port", m.port.clone().into()),
        ("hostname", m.hostname.clone().into()),
        ("untagged", Value::Bool(m.untagged)),
    ])
}

pub(super) fn attached_of(v: &Value) -> Option<Vec<Attached>> {
    if !v.is_wholly_known() {
        return None;
    }
    let items = v.as_seq()?;
    Some(
        items
            .iter()
            .filter_map(|a| {
                Some(Attached {
                    port: a.get("port").as_str()?.to_owned(),
                    hostname: a.get("hostname").as_str().map(str::to_owned),
                    untagged: a.get("untagged").as_bool().unwrap_or(false),
                })
            })
            .collect(),
    )
}

pub(super) fn attached_value(ports: &[Attached]) -> Value {
    Value::set(
        ports
            .iter()
            .map(|a| {
                Value::object([
                    ("port", Value::string(a.port.clone())),
                    ("hostname", a.hostname.clone().into()),
                    ("untagged", Value::Bool(a.untagged)),
                ])
            })
            .collect(),
    )
}

pub(super) fn ids_of(v: &Value) -> Ids {
    let id = |name| v.get(name).as_str().and_then(|s| s.parse::<i64>().ok());
    Ids {
        allocation: id("allocation_id"),
        subnet: id("subnet_id"),
        vnet: id("id"),
    }
}

/// `status` of an observed V-Net.
pub(super) fn status_of(v: &VNet) -> &'static str {
    if v.provisioning {
        "provisioning"
    } else if normalise_state(&v.state) == Some("disabled") {
        "disabled"
    } else {
        "active"
    }
}

/// The controller's state word as the schema spells it (`disable` is an older spelling).
pub(super) fn normalise_state(s: &str) -> Option<&'static str> {
    match s.trim().to_ascii_lowercase().as_str() {
        "active" | "enabled" => Some("active"),
        "disabled" | "disable" => Some("disabled"),
        _ => None,
    }
}

pub(super) fn id_value(id: Option<i64>) -> Value {
    id.map(|i| i.to_string()).into()
}
