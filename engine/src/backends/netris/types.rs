//! The Netris controller's wire shapes: the response envelope and the objects a network
//! segment is built from, as the v2 REST API reads and writes them.
//!
//! Read types are lenient (every field defaults) because controller versions differ in which
//! fields they send; write types send exactly what the API documents. Field names follow the
//! API's camelCase.

use serde::{Deserialize, Deserializer, Serialize};

/// The envelope every answer comes in: `{data, errors, message, isSuccess, meta}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Envelope {
    /// The payload.
    pub data: serde_json::Value,
    /// Per-field errors; their shape is not stable, so they are kept opaque.
    pub errors: serde_json::Value,
    /// A human-readable message, set when something went wrong.
    pub message: Option<String>,
    /// `false` when the controller refused the request.
    #[serde(rename = "isSuccess")]
    pub is_success: Option<bool>,
    /// A flat `id` that some versions send on create instead of `data.id`.
    pub id: Option<i64>,
}

/// A reference to another object by id, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IdRef {
    /// The object's id.
    pub id: i64,
}

/// An object as referenced in answers: id and name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Named {
    /// The object's id.
    pub id: i64,
    /// The object's name.
    pub name: String,
}

/// A tenant (`GET /api/tenants`), a site (`GET /api/v2/sites`) or a VPC (`GET /api/v2/vpc`):
/// only id and name are needed.
pub type Tenant = Named;
/// A site.
pub type Site = Named;
/// A VPC.
pub type Vpc = Named;

/// A server of the hardware inventory (`GET /api/v2/hw/server`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Server {
    /// The server's id.
    pub id: i64,
    /// Its hostname.
    pub name: String,
    /// Its cables: one end is a server NIC, the other a switch port (`swp5@sw01`).
    pub links: Vec<Link>,
}

/// A cable between two ports.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Link {
    /// The end on this device.
    pub local: PortRef,
    /// The far end.
    pub remote: PortRef,
}

/// One end of a link, as `name@device`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PortRef {
    /// The port's id.
    pub id: Option<i64>,
    /// The port's name, `port@device`.
    pub name: Option<String>,
}

impl Server {
    /// The switch ports this server is cabled to: the end of each link that is not one of the
    /// server's own ports, in `port@switch` form, sorted and deduplicated.
    pub fn switch_ports(&self) -> Vec<String> {
        let own = |n: &str| {
            n.rsplit_once('@')
                .is_some_and(|(_, dev)| dev.eq_ignore_ascii_case(&self.name))
        };
        let mut ports: Vec<String> = self
            .links
            .iter()
            .flat_map(|l| [&l.local, &l.remote])
            .filter_map(|p| p.name.as_deref())
            .map(str::trim)
            .filter(|n| n.contains('@') && !own(n))
            .map(str::to_owned)
            .collect();
        ports.sort();
        ports.dedup();
        ports
    }
}

/// A node of the IPAM tree (`GET /api/v2/ipam`): an allocation with its subnets as children.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IpamNode {
    /// The allocation's or subnet's id (allocations and subnets have separate counters).
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Its prefix, `10.20.0.0/24`.
    pub prefix: String,
    /// `allocation` or `subnet`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A subnet's purpose (`common`, …).
    pub purpose: String,
    /// A subnet's default gateway.
    #[serde(rename = "defaultGateway")]
    pub default_gateway: String,
    /// Free text; gpufleet writes its owner marker here on allocations.
    pub description: String,
    /// A subnet's tags.
    pub tags: Vec<String>,
    /// The subnets inside an allocation (and subnets inside subnets).
    pub children: Vec<IpamNode>,
}

impl IpamNode {
    /// Whether this node is an allocation.
    pub fn is_allocation(&self) -> bool {
        self.kind.eq_ignore_ascii_case("allocation")
    }

    /// This node and all its descendants, depth first.
    pub fn walk(&self) -> Vec<&IpamNode> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.walk());
        }
        out
    }
}

/// `POST /api/v2/ipam/allocation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocationWrite {
    /// Deterministic name, `gf-<segment>`.
    pub name: String,
    /// The segment's CIDR.
    pub prefix: String,
    /// The owner tenant.
    pub tenant: IdRef,
    /// The VPC.
    pub vpc: IdRef,
    /// Owner marker, `gpufleet:owner=<segment>`.
    pub description: String,
}

/// `POST /api/v2/ipam/subnet` and `PUT /api/v2/ipam/subnet/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubnetWrite {
    /// Deterministic name, `gf-<segment>`.
    pub name: String,
    /// The segment's CIDR.
    pub prefix: String,
    /// Always `common`: the purpose a V-Net gateway needs.
    pub purpose: String,
    /// The owner tenant.
    pub tenant: IdRef,
    /// The site the V-Net lives at.
    pub sites: Vec<IdRef>,
    /// The VPC.
    pub vpc: IdRef,
    /// The gateway address.
    #[serde(rename = "defaultGateway")]
    pub default_gateway: String,
    /// Owner tags.
    pub tags: Vec<String>,
    /// Never routed globally.
    #[serde(rename = "globalRouting")]
    pub global_routing: bool,
    /// Owner marker.
    pub description: String,
}

/// A DHCP range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpRange {
    /// First address handed out.
    pub start: String,
    /// Last address handed out.
    pub end: String,
}

/// A V-Net gateway as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayWrite {
    /// Gateway address with the subnet's prefix length, `10.20.0.1/24`.
    pub prefix: String,
    /// Whether the controller runs DHCP on the segment.
    #[serde(rename = "dhcpEnabled")]
    pub dhcp_enabled: bool,
    /// The DHCP range, when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<DhcpRange>,
}

/// A V-Net switch port as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortWrite {
    /// `swp5@sw01`.
    pub name: String,
    /// Untagged (access) port.
    #[serde(rename = "accessMode")]
    pub access_mode: bool,
    /// Always `active`.
    pub state: String,
    /// Always `off`.
    pub lacp: String,
}

/// `POST /api/v2/vnet` and `PUT /api/v2/vnet/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VNetWrite {
    /// The segment name (V-Net names are globally unique).
    pub name: String,
    /// The owner tenant.
    pub tenant: IdRef,
    /// No guest tenants.
    #[serde(rename = "guestTenants")]
    pub guest_tenants: Vec<IdRef>,
    /// The site.
    pub sites: Vec<IdRef>,
    /// The VPC.
    pub vpc: IdRef,
    /// `active` or `disabled`.
    pub state: String,
    /// A VLAN number, or `auto` to let the controller allocate one.
    pub vlan: String,
    /// A VXLAN id, or 0 to let the controller allocate one.
    #[serde(rename = "vxlanID")]
    pub vxlan_id: u32,
    /// Always `ipv4`.
    #[serde(rename = "ipFamily")]
    pub ip_family: String,
    /// Owner and MTU tags.
    pub tags: Vec<String>,
    /// The MTU. Not every controller version has this field; gpufleet also records the MTU
    /// in a tag.
    pub mtu: i64,
    /// One gateway.
    pub gateways: Vec<GatewayWrite>,
    /// Member switch ports.
    pub ports: Vec<PortWrite>,
}

/// A V-Net's status label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StatusLabel {
    /// Display label.
    pub label: String,
    /// Machine value.
    pub value: String,
}

/// A V-Net gateway as read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct GatewayRead {
    /// `10.20.0.1/24`.
    pub prefix: String,
    /// Whether DHCP is on.
    #[serde(rename = "dhcpEnabled")]
    pub dhcp_enabled: Option<bool>,
    /// The DHCP range.
    pub dhcp: Option<DhcpRange>,
}

/// A V-Net port as read; versions differ in whether they send `name` or `port` plus
/// `switchName`, and `untagged` or `accessMode`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PortRead {
    /// `swp5@sw01`, when sent.
    pub name: Option<String>,
    /// `swp5`, when sent.
    pub port: Option<String>,
    /// `sw01`, when sent.
    #[serde(rename = "switchName")]
    pub switch_name: Option<String>,
    /// Untagged.
    pub untagged: Option<bool>,
    /// Untagged, in the write shape.
    #[serde(rename = "accessMode")]
    pub access_mode: Option<bool>,
}

impl PortRead {
    /// The port as `port@switch`, or `None` when the answer names no port.
    pub fn full_name(&self) -> Option<String> {
        match (&self.port, &self.switch_name, &self.name) {
            (Some(p), Some(s), _) if !p.contains('@') && !s.is_empty() => {
                Some(format!("{}@{}", p.trim(), s.trim()))
            }
            (_, _, Some(n)) if n.contains('@') => Some(n.trim().to_owned()),
            (Some(p), _, _) if p.contains('@') => Some(p.trim().to_owned()),
            _ => None,
        }
    }

    /// Whether the port is untagged.
    pub fn is_untagged(&self) -> bool {
        self.untagged.or(self.access_mode).unwrap_or(false)
    }
}

/// A V-Net as read (`GET /api/v2/vnet/{id}`, and the elements of `GET /api/v2/vnet`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct VNet {
    /// The V-Net id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// The owner tenant.
    pub tenant: Option<Named>,
    /// Its sites.
    pub sites: Vec<Named>,
    /// Its VPC.
    pub vpc: Option<Named>,
    /// `active` or `disabled`.
    pub state: String,
    /// True while the controller is still pushing the configuration to the switches.
    pub provisioning: bool,
    /// Status label.
    pub status: Option<StatusLabel>,
    /// The VLAN: a number once allocated (`"auto"` and `"disabled"` read as none).
    #[serde(deserialize_with = "lenient_number")]
    pub vlan: Option<i64>,
    /// The VXLAN id; 0 reads as none.
    #[serde(rename = "vxlanID", deserialize_with = "lenient_number")]
    pub vxlan_id: Option<i64>,
    /// Tags.
    pub tags: Vec<String>,
    /// The MTU, on versions that have the field.
    pub mtu: Option<i64>,
    /// Gateways.
    pub gateways: Vec<GatewayRead>,
    /// Member ports.
    pub ports: Vec<PortRead>,
}

impl VNet {
    /// The value of tag `key=value`, if the V-Net has it.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find_map(|t| t.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
    }
}

/// A number sent as a number, a numeric string, or a word (`"auto"`, `"disabled"`) or 0
/// meaning "none".
fn lenient_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    let n = match &v {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    Ok(n.filter(|n| *n > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnet_reads_both_port_shapes_and_lenient_numbers() {
        let v: VNet = serde_json::from_str(
            r#"{"id": 7, "name": "a", "vlan": "auto", "vxlanID": 0, "provisioning": true,
                "ports": [{"name": "swp1@sw01", "untagged": true},
                          {"port": "swp2", "switchName": "sw02", "accessMode": false}],
                "tags": ["gpufleet:owner=a", "gpufleet:mtu=9000"]}"#,
        )
        .expect("vnet");
        assert_eq!((v.vlan, v.vxlan_id), (None, None));
        let names: Vec<Option<String>> = v.ports.iter().map(PortRead::full_name).collect();
        assert_eq!(
            names,
            [Some("swp1@sw01".to_owned()), Some("swp2@sw02".to_owned())]
        );
        assert!(v.ports[0].is_untagged());
        assert_eq!(v.tag("gpufleet:mtu"), Some("9000"));
        let v: VNet = serde_json::from_str(r#"{"vlan": "210", "vxlanID": 5000}"#).expect("vnet");
        assert_eq!((v.vlan, v.vxlan_id), (Some(210), Some(5000)));
    }

    #[test]
    fn server_switch_ports_skip_its_own_nics() {
        let s: Server = serde_json::from_str(
            r#"{"id": 1, "name": "gpu-001", "links": [
                {"local": {"name": "eth0@gpu-001"}, "remote": {"name": "swp5@sw01"}},
                {"local": {"name": "swp6@sw02"}, "remote": {"name": "eth1@gpu-001"}}]}"#,
        )
        .expect("server");
        assert_eq!(s.switch_ports(), ["swp5@sw01", "swp6@sw02"]);
    }
}
