//! The segment's attributes decoded once into types: from a configuration, a proposed or
//! planned value, or a prior state alike. Validate, plan, apply and refresh read a
//! [`SegmentConfig`] instead of the raw value; [`Segment`](super::model::Segment) is the
//! segment apply builds from a wholly known plan. Pure: no I/O.

use std::net::Ipv4Addr;

use super::schema::{
    ALLOCATION_ID, ATTACHED_PORTS, CIDR, DHCP, DHCP_END, DHCP_START, GATEWAY, HOSTNAME, ID,
    MEMBERS, MTU, NAME, PORT, SITE, STATE, SUBNET_ID, TENANT, UNTAGGED, VLAN_ID, VNI, VPC,
};
use crate::{
    validate::Ipv4Net,
    value::{
        Known, Value,
        known::{flag, object, text, whole},
    },
};

/// One of `members`, as written: validation names one that sets both or neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MemberConfig {
    pub(super) port: Known<String>,
    pub(super) hostname: Known<String>,
    pub(super) untagged: Known<bool>,
}

/// `dhcp`, when set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DhcpConfig {
    pub(super) start: Known<Ipv4Addr>,
    pub(super) end: Known<Ipv4Addr>,
}

/// A switch port attached to the V-Net, with the hostname member it came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Attached {
    pub(super) port: String,
    pub(super) hostname: Option<String>,
    pub(super) untagged: bool,
}

/// A segment's attributes as far as a value gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SegmentConfig {
    pub(super) id: Known<String>,
    pub(super) name: Known<String>,
    pub(super) tenant: Known<String>,
    pub(super) vpc: Known<String>,
    pub(super) site: Known<String>,
    pub(super) cidr: Known<Ipv4Net>,
    pub(super) gateway: Known<Ipv4Addr>,
    pub(super) vlan_id: Known<i64>,
    pub(super) vni: Known<i64>,
    pub(super) dhcp: Known<DhcpConfig>,
    /// A member that is itself unknown stays [`Known::Unknown`] in its place.
    pub(super) members: Known<Vec<Known<MemberConfig>>>,
    pub(super) mtu: Known<i64>,
    pub(super) state: Known<String>,
    pub(super) allocation_id: Known<String>,
    pub(super) subnet_id: Known<String>,
    /// Known only when every port in it is.
    pub(super) attached_ports: Known<Vec<Attached>>,
}

/// The segment's addresses as far as a configuration, plan or state gives them (any of them
/// may be unknown or invalid yet).
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
    /// The gateway apply uses: the one set, or else the first host address of `cidr`.
    pub(super) fn effective_gateway(&self) -> Option<Ipv4Addr> {
        if self.gateway_default {
            self.cidr.map(|n| n.first_host())
        } else {
            self.gateway
        }
    }
}

fn parsed<T: std::str::FromStr>(v: &Value) -> Known<T> {
    Known::decode(v, |x| x.as_str().and_then(|s| s.parse().ok()))
}

fn attached(v: &Value) -> Option<Vec<Attached>> {
    if !v.is_wholly_known() {
        return None;
    }
    Some(
        v.as_seq()?
            .iter()
            .filter_map(|a| {
                Some(Attached {
                    port: a.get(PORT).as_str()?.to_owned(),
                    hostname: a.get(HOSTNAME).as_str().map(str::to_owned),
                    untagged: a.get(UNTAGGED).as_bool().unwrap_or(false),
                })
            })
            .collect(),
    )
}

impl SegmentConfig {
    /// Decodes `v`; a null `v` (no prior state, a destroy plan) has every attribute null.
    pub(super) fn decode(v: &Value) -> SegmentConfig {
        SegmentConfig {
            id: text(v.get(ID)),
            name: text(v.get(NAME)),
            tenant: text(v.get(TENANT)),
            vpc: text(v.get(VPC)),
            site: text(v.get(SITE)),
            cidr: parsed(v.get(CIDR)),
            gateway: parsed(v.get(GATEWAY)),
            vlan_id: whole(v.get(VLAN_ID)),
            vni: whole(v.get(VNI)),
            dhcp: object(v.get(DHCP), |d| DhcpConfig {
                start: parsed(d.get(DHCP_START)),
                end: parsed(d.get(DHCP_END)),
            }),
            members: Known::decode(v.get(MEMBERS), |l| {
                l.as_seq().map(|ms| {
                    ms.iter()
                        .map(|m| {
                            object(m, |m| MemberConfig {
                                port: text(m.get(PORT)),
                                hostname: text(m.get(HOSTNAME)),
                                untagged: flag(m.get(UNTAGGED)),
                            })
                        })
                        .collect()
                })
            }),
            mtu: whole(v.get(MTU)),
            state: text(v.get(STATE)),
            allocation_id: text(v.get(ALLOCATION_ID)),
            subnet_id: text(v.get(SUBNET_ID)),
            attached_ports: Known::decode(v.get(ATTACHED_PORTS), attached),
        }
    }

    /// `cidr` and `gateway`: the one place the gateway's default is decided.
    pub(super) fn addressing(&self) -> Addressing {
        Addressing {
            cidr: self.cidr.value().copied(),
            gateway: self.gateway.value().copied(),
            gateway_default: self.gateway.is_null(),
        }
    }

    /// The members whose every attribute is known, in order.
    pub(super) fn known_members(&self) -> impl Iterator<Item = &MemberConfig> {
        self.members
            .value()
            .into_iter()
            .flatten()
            .filter_map(Known::value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_value_decodes_to_nulls() {
        let seg = SegmentConfig::decode(&Value::Null);
        assert!(seg.name.is_null() && seg.members.is_null() && seg.attached_ports.is_null());
        assert_eq!(seg.addressing().effective_gateway(), None);
        assert!(seg.addressing().gateway_default);
    }

    #[test]
    fn a_left_out_gateway_is_the_first_host_and_an_unknown_one_is_not() {
        let seg = |gateway: Value| {
            SegmentConfig::decode(&Value::object([
                ("cidr", Value::string("10.1.0.0/24")),
                ("gateway", gateway),
            ]))
        };
        let first = Some(Ipv4Addr::new(10, 1, 0, 1));
        assert_eq!(seg(Value::Null).addressing().effective_gateway(), first);
        assert_eq!(seg(Value::unknown()).addressing().effective_gateway(), None);
        let set = seg(Value::string("10.1.0.9")).addressing();
        assert_eq!(set.effective_gateway(), Some(Ipv4Addr::new(10, 1, 0, 9)));
    }

    #[test]
    fn a_cidr_the_parse_refuses_reads_as_unknown() {
        let seg = SegmentConfig::decode(&Value::object([("cidr", Value::string("10.1.0.1/24"))]));
        assert_eq!(seg.cidr, Known::Unknown);
    }

    #[test]
    fn attached_ports_are_known_only_when_every_port_is() {
        let port = |p: Value| {
            Value::object([
                ("port", p),
                ("hostname", Value::Null),
                ("untagged", Value::Bool(false)),
            ])
        };
        let seg = |ports: Vec<Value>| {
            SegmentConfig::decode(&Value::object([("attached_ports", Value::set(ports))]))
        };
        let known = seg(vec![port(Value::string("swp1@leaf-01"))]);
        assert_eq!(
            known.attached_ports.value().map(Vec::len),
            Some(1),
            "{known:?}"
        );
        assert!(
            seg(vec![port(Value::unknown())])
                .attached_ports
                .is_unknown()
        );
    }
}
