//! Validation of a `gpufleet_network_segment` configuration beyond what the schema checks.

use std::{collections::BTreeSet, net::Ipv4Addr};

use super::{
    config::{DhcpConfig, SegmentConfig},
    schema::{DHCP, DHCP_END, DHCP_START, GATEWAY, MEMBERS, SITE, TENANT, VPC},
};
use crate::{diag::Diagnostics, path::AttrPath, validate::Ipv4Net, value::Value};

/// The cross-attribute checks; per-attribute rules are validators in the schema.
pub(super) fn validate_segment(config: &Value) -> Diagnostics {
    let seg = SegmentConfig::decode(config);
    let mut d = Diagnostics::new();
    for (name, value) in [(TENANT, &seg.tenant), (VPC, &seg.vpc), (SITE, &seg.site)] {
        if value.value().is_some_and(|s| s.trim().is_empty()) {
            d.error_at(
                AttrPath::attr(name),
                "Empty Name",
                format!("{name} must name an existing {name} on the controller."),
            );
        }
    }
    let addressing = seg.addressing();
    let cidr = addressing.cidr;
    if let (Some(net), Some(gw)) = (cidr, addressing.gateway)
        && !net.is_host(gw)
    {
        let why = if !net.contains(gw) {
            format!("is outside cidr {net}")
        } else if gw == net.network() {
            "is the network address of cidr".to_owned()
        } else {
            "is the broadcast address of cidr".to_owned()
        };
        d.error_at(
            AttrPath::attr(GATEWAY),
            "Gateway Outside Network",
            format!("gateway {gw} {why}; it must be a host address of {net}."),
        );
    }
    if let Some(dhcp) = seg.dhcp.value() {
        validate_dhcp(dhcp, cidr, addressing.effective_gateway(), &mut d);
    }
    validate_members(&seg, &mut d);
    d
}

fn validate_dhcp(
    dhcp: &DhcpConfig,
    cidr: Option<Ipv4Net>,
    gw: Option<Ipv4Addr>,
    d: &mut Diagnostics,
) {
    let path = AttrPath::attr(DHCP);
    let (start, end) = (dhcp.start.value().copied(), dhcp.end.value().copied());
    if let Some(net) = cidr {
        for (n, a) in [(DHCP_START, start), (DHCP_END, end)] {
            if let Some(a) = a
                && !net.is_host(a)
            {
                d.error_at(
                    path.push_attr(n),
                    "DHCP Range Outside Network",
                    format!("dhcp.{n} {a} is not a host address of cidr {net}."),
                );
            }
        }
    }
    if let (Some(s), Some(e)) = (start, end) {
        if s > e {
            d.error_at(
                path.push_attr(DHCP_END),
                "Invalid DHCP Range",
                format!("dhcp.end {e} comes before dhcp.start {s}."),
            );
        } else if let Some(g) = gw
            && (s..=e).contains(&g)
        {
            d.error_at(
                path.clone(),
                "DHCP Range Includes Gateway",
                format!(
                    "the DHCP range {s}–{e} includes the gateway {g}; start it after or end it \
                     before the gateway."
                ),
            );
        }
    }
}

fn validate_members(seg: &SegmentConfig, d: &mut Diagnostics) {
    let path = AttrPath::attr(MEMBERS);
    let mut ports = BTreeSet::new();
    for m in seg.known_members() {
        if m.port.is_unknown() || m.hostname.is_unknown() {
            continue;
        }
        match (m.port.value(), m.hostname.value()) {
            (Some(_), Some(_)) | (None, None) => d.error_at(
                path.clone(),
                "Invalid Member",
                format!(
                    "a member must set exactly one of port and hostname; this one sets {}.",
                    match m.port.value() {
                        None => "neither".to_owned(),
                        Some(p) => format!("both (port {p:?})"),
                    }
                ),
            ),
            (Some(p), None) => {
                let ok = p
                    .split_once('@')
                    .is_some_and(|(a, b)| is_port_word(a) && is_port_word(b));
                if !ok {
                    d.error_at(
                        path.clone(),
                        "Invalid Switch Port",
                        format!(
                            "member port {p:?} must be written port@switch, such as \
                             \"swp5@leaf-01\"."
                        ),
                    );
                } else if !ports.insert(p) {
                    d.error_at(
                        path.clone(),
                        "Duplicate Member",
                        format!("port {p:?} is listed more than once."),
                    );
                }
            }
            (None, Some(h)) => {
                if h.trim().is_empty() || h.contains(char::is_whitespace) {
                    d.error_at(
                        path.clone(),
                        "Invalid Hostname",
                        format!("member hostname {h:?} must be a server's hostname."),
                    );
                }
            }
        }
    }
}

pub(super) fn is_port_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':'))
}
