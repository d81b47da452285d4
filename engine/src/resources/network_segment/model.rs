//! The segment a wholly known plan asks for, built from its [`SegmentConfig`], and how its
//! parts are written back to state.

use std::net::Ipv4Addr;

use super::{
    config::{Attached, SegmentConfig},
    schema::{CIDR, DEFAULT_MTU, HOSTNAME, NAME, PORT, SITE, STATE, TENANT, UNTAGGED, VPC},
};
use crate::{
    backends::netris::{
        AllocationWrite, DhcpRange, GatewayWrite, IdRef, PortWrite, SubnetWrite, VNet, VNetWrite,
    },
    diag::Diagnostics,
    path::AttrPath,
    validate::Ipv4Net,
    value::{Known, Value},
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

impl Segment {
    /// The segment a wholly known plan asks for; a diagnostic for each attribute that is not
    /// known yet.
    pub(super) fn from_config(c: &SegmentConfig) -> Result<Segment, Diagnostics> {
        let mut d = Diagnostics::new();
        let mut text = |name: &str, v: &Known<String>| -> String {
            match v.value() {
                Some(s) => s.clone(),
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
        let (name, tenant, vpc, site) = (
            text(NAME, &c.name),
            text(TENANT, &c.tenant),
            text(VPC, &c.vpc),
            text(SITE, &c.site),
        );
        let state = text(STATE, &c.state);
        let addressing = c.addressing();
        let (Some(cidr), Some(gateway)) = (addressing.cidr, addressing.gateway) else {
            d.error_at(
                AttrPath::attr(CIDR),
                "Invalid Network",
                "cidr and gateway must be a valid IPv4 network and address.",
            );
            return Err(d);
        };
        if d.has_error() {
            return Err(d);
        }
        let dhcp = c.dhcp.value().and_then(|r| {
            Some(DhcpRange {
                start: r.start.value()?.to_string(),
                end: r.end.value()?.to_string(),
            })
        });
        Ok(Segment {
            name,
            tenant,
            vpc,
            site,
            cidr,
            gateway,
            vlan_id: c.vlan_id.into_value(),
            vni: c.vni.into_value(),
            dhcp,
            members: members_of(c),
            mtu: c.mtu.into_value().unwrap_or(DEFAULT_MTU),
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

/// The members whose attributes are known, as apply attaches them.
pub(super) fn members_of(c: &SegmentConfig) -> Vec<Member> {
    c.known_members()
        .map(|m| Member {
            port: m.port.value().cloned(),
            hostname: m.hostname.value().cloned(),
            untagged: m.untagged.value().copied().unwrap_or(false),
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
        (PORT, m.port.clone().into()),
        (HOSTNAME, m.hostname.clone().into()),
        (UNTAGGED, Value::Bool(m.untagged)),
    ])
}

pub(super) fn attached_value(ports: &[Attached]) -> Value {
    Value::set(
        ports
            .iter()
            .map(|a| {
                Value::object([
                    (PORT, Value::string(a.port.clone())),
                    (HOSTNAME, a.hostname.clone().into()),
                    (UNTAGGED, Value::Bool(a.untagged)),
                ])
            })
            .collect(),
    )
}

impl Ids {
    /// The ids a plan or state records.
    pub(super) fn of(c: &SegmentConfig) -> Ids {
        let id = |v: &Known<String>| v.value().and_then(|s| s.parse::<i64>().ok());
        Ids {
            allocation: id(&c.allocation_id),
            subnet: id(&c.subnet_id),
            vnet: id(&c.id),
        }
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
