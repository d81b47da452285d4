//! The emulator's state: every object the controller knows, with serde, as the store
//! keeps it and writes it to disk.
//!
//! These are the *stored* shapes (ids as numbers, references as ids); the wire shapes
//! the API answers with are built from them in `wire`. Objects live in
//! `BTreeMap`s keyed by id, so ids are unique by construction and listings come out in
//! id order. Every kind has its own id counter in [`Counters`]: allocation and subnet
//! ids in particular come from separate counters, as on a real controller, so the same
//! number can name both.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::inventory::NetrisInventory;
use super::prefix::Cidr;

/// The version of the on-disk format ([`Db::version`]).
pub const DB_VERSION: u32 = 1;

/// The id of the tenant every controller starts with (`Admin`).
pub const ADMIN_TENANT_ID: u64 = 1;

/// The id of the VPC every controller starts with (`Default`). `GET /api/v2/ipam`
/// without `filterByVpc` shows only this VPC.
pub const DEFAULT_VPC_ID: u64 = 1;

/// The whole controller state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Db {
    /// [`DB_VERSION`] when written.
    pub version: u32,
    /// The last id handed out, per kind.
    pub counters: Counters,
    /// What the hardware objects were seeded from (kept so `/_admin/reset` can seed again).
    pub inventory: NetrisInventory,
    /// Sites.
    pub sites: BTreeMap<u64, Site>,
    /// Tenants.
    pub tenants: BTreeMap<u64, Tenant>,
    /// VPCs.
    pub vpcs: BTreeMap<u64, Vpc>,
    /// IPAM allocations.
    pub allocations: BTreeMap<u64, Allocation>,
    /// IPAM subnets.
    pub subnets: BTreeMap<u64, Subnet>,
    /// V-Nets.
    pub vnets: BTreeMap<u64, Vnet>,
    /// Switches (inventory).
    pub switches: BTreeMap<u64, Switch>,
    /// Servers (inventory).
    pub servers: BTreeMap<u64, Server>,
    /// Switch ports (inventory).
    pub ports: BTreeMap<u64, Port>,
}

/// The last id handed out, per kind (0: none yet). Ids are never reused, not even after
/// a delete; `/_admin/reset` and `/_admin/seed` start them over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Sites.
    pub site: u64,
    /// Tenants.
    pub tenant: u64,
    /// VPCs.
    pub vpc: u64,
    /// Allocations (separate from subnets).
    pub allocation: u64,
    /// Subnets (separate from allocations).
    pub subnet: u64,
    /// V-Nets.
    pub vnet: u64,
    /// Inventory hardware: switches and servers share one counter, as they share one
    /// `/api/v2/hw` table.
    pub hw: u64,
    /// Switch ports.
    pub port: u64,
}

/// Which counter [`Db::next_id`] advances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Sites.
    Site,
    /// Tenants.
    Tenant,
    /// VPCs.
    Vpc,
    /// Allocations.
    Allocation,
    /// Subnets.
    Subnet,
    /// V-Nets.
    Vnet,
    /// Switches and servers.
    Hw,
    /// Switch ports.
    Port,
}

/// A site, with the id ranges its V-Nets draw from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    /// Id.
    pub id: u64,
    /// Name, unique.
    pub name: String,
    /// VLAN ids, inclusive.
    pub vlan_range: (u16, u16),
    /// VXLAN VNIs, inclusive.
    pub vni_range: (u32, u32),
}

/// A tenant (v1 API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// Id.
    pub id: u64,
    /// Name, unique.
    pub name: String,
    /// Free text.
    pub description: String,
}

/// A VPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vpc {
    /// Id.
    pub id: u64,
    /// Name, unique.
    pub name: String,
    /// The owning tenant.
    pub admin_tenant: u64,
    /// Tenants that may use it too.
    pub guest_tenants: Vec<u64>,
    /// Tags.
    pub tags: Vec<String>,
    /// Creation time, epoch ms.
    pub created_ms: u64,
    /// Last change, epoch ms.
    pub modified_ms: u64,
}

/// An IPAM allocation: a block a tenant may carve subnets from, in one VPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// Id (allocation counter).
    pub id: u64,
    /// Name.
    pub name: String,
    /// The block (a network address).
    pub prefix: Cidr,
    /// The owning tenant.
    pub tenant: u64,
    /// The VPC (never changes: a PUT that changes it is ignored).
    pub vpc: u64,
    /// Free text.
    pub description: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Creation time, epoch ms.
    pub created_ms: u64,
    /// Last change, epoch ms.
    pub modified_ms: u64,
}

/// What a subnet is for. V-Net gateways need [`Purpose::Common`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// General use; the only purpose V-Net gateways accept.
    Common,
    /// Switch loopbacks.
    Loopback,
    /// Management network.
    Management,
    /// Load-balancer VIPs.
    LoadBalancer,
    /// NAT pools.
    Nat,
    /// Reserved, unused.
    Inactive,
}

impl Purpose {
    /// Every purpose, in the order the API lists them.
    pub const ALL: [Purpose; 6] = [
        Purpose::Common,
        Purpose::Loopback,
        Purpose::Management,
        Purpose::LoadBalancer,
        Purpose::Nat,
        Purpose::Inactive,
    ];

    /// The wire name (`load-balancer`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Common => "common",
            Purpose::Loopback => "loopback",
            Purpose::Management => "management",
            Purpose::LoadBalancer => "load-balancer",
            Purpose::Nat => "nat",
            Purpose::Inactive => "inactive",
        }
    }

    /// The purpose with this wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// An IPAM subnet: a prefix inside an allocation of the same VPC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// Id (subnet counter).
    pub id: u64,
    /// Name.
    pub name: String,
    /// The prefix (a network address).
    pub prefix: Cidr,
    /// What it is for.
    pub purpose: Purpose,
    /// The owning tenant.
    pub tenant: u64,
    /// The VPC (never changes).
    pub vpc: u64,
    /// The sites it is available at; empty: every site.
    pub sites: Vec<u64>,
    /// The default gateway, when set.
    pub default_gateway: Option<Ipv4Addr>,
    /// Tags.
    pub tags: Vec<String>,
    /// Whether it is routed outside its VPC.
    pub global_routing: bool,
    /// Creation time, epoch ms.
    pub created_ms: u64,
    /// Last change, epoch ms.
    pub modified_ms: u64,
}

/// Whether a V-Net (or one of its ports) is configured on the switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdminState {
    /// Configured.
    Active,
    /// Withdrawn from the switches (the V-Net keeps its VLAN, VNI and ports).
    Disabled,
}

impl AdminState {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AdminState::Active => "active",
            AdminState::Disabled => "disabled",
        }
    }

    /// The state with this wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(AdminState::Active),
            "disabled" => Some(AdminState::Disabled),
            _ => None,
        }
    }
}

/// A V-Net gateway: an address of a `common` subnet, with optional DHCP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    /// The gateway address with the subnet's length (`10.0.0.1/24`).
    pub prefix: Cidr,
    /// Whether the switches serve DHCP on it.
    pub dhcp_enabled: bool,
    /// The DHCP pool, inclusive.
    pub dhcp: Option<(Ipv4Addr, Ipv4Addr)>,
}

/// A switch port a V-Net is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VnetPort {
    /// The port's id.
    pub port: u64,
    /// A VLAN id for this port other than the V-Net's (VLAN translation), if any.
    pub vlan: Option<u16>,
    /// Untagged (access) rather than tagged.
    pub untagged: bool,
    /// Whether the port's membership is configured.
    pub state: AdminState,
}

/// A V-Net: an L2 segment (VLAN + VXLAN VNI) over switch ports at one or more sites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vnet {
    /// Id.
    pub id: u64,
    /// Name, unique across the controller.
    pub name: String,
    /// The owning tenant.
    pub tenant: u64,
    /// Tenants that may use it too.
    pub guest_tenants: Vec<u64>,
    /// Its sites, at least one.
    pub sites: Vec<u64>,
    /// The VPC (never changes: a PUT that changes it is answered 200 and ignored).
    pub vpc: u64,
    /// Configured or withdrawn.
    pub state: AdminState,
    /// The VLAN id.
    pub vlan: u16,
    /// Whether the VLAN id was auto-assigned.
    pub vlan_auto: bool,
    /// The VXLAN VNI.
    pub vxlan_id: u32,
    /// Whether the VNI was auto-assigned.
    pub vxlan_auto: bool,
    /// Gateways.
    pub gateways: Vec<Gateway>,
    /// Switch ports.
    pub ports: Vec<VnetPort>,
    /// Tags.
    pub tags: Vec<String>,
    /// MTU, when set.
    pub mtu: Option<u32>,
    /// Creation time, epoch ms.
    pub created_ms: u64,
    /// Last change, epoch ms.
    pub modified_ms: u64,
    /// When provisioning finishes, epoch ms; `None`: stuck (never, until the
    /// `provisioning_stuck` fault is cleared).
    pub provisioning_done_ms: Option<u64>,
}

impl Vnet {
    /// Whether the switches are still being configured at `now_ms`.
    #[must_use]
    pub fn provisioning(&self, now_ms: u64) -> bool {
        self.provisioning_done_ms.is_none_or(|done| now_ms < done)
    }
}

/// A switch (inventory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// Id (hw counter).
    pub id: u64,
    /// Name, unique.
    pub name: String,
    /// Its site.
    pub site: u64,
    /// Its rack, if known.
    pub rack: Option<String>,
}

/// A server (inventory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Server {
    /// Id (hw counter).
    pub id: u64,
    /// Name: the BCM hostname.
    pub name: String,
    /// Its site.
    pub site: u64,
    /// Its rack, if known.
    pub rack: Option<String>,
    /// Its cables: NIC name and switch port id.
    pub links: Vec<(String, u64)>,
}

/// A switch port (inventory). Which V-Net uses it is derived from the V-Nets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    /// Id (port counter).
    pub id: u64,
    /// Its switch.
    pub switch: u64,
    /// The name on the switch (`swp5`).
    pub port: String,
    /// The server and NIC cabled to it, if any.
    pub server: Option<(u64, String)>,
}

impl Db {
    /// A fresh controller: the `Admin` tenant, the `Default` VPC, and the hardware of
    /// `inventory` (assumed valid: see [`NetrisInventory::validate`]; dangling
    /// references in an invalid one are skipped).
    #[must_use]
    pub fn seeded(inventory: NetrisInventory, now_ms: u64) -> Self {
        let mut db = Db {
            version: DB_VERSION,
            counters: Counters::default(),
            inventory: NetrisInventory::default(),
            sites: BTreeMap::new(),
            tenants: BTreeMap::new(),
            vpcs: BTreeMap::new(),
            allocations: BTreeMap::new(),
            subnets: BTreeMap::new(),
            vnets: BTreeMap::new(),
            switches: BTreeMap::new(),
            servers: BTreeMap::new(),
            ports: BTreeMap::new(),
        };
        let tenant = db.next_id(Kind::Tenant);
        db.tenants.insert(
            tenant,
            Tenant {
                id: tenant,
                name: "Admin".into(),
                description: "Default tenant".into(),
            },
        );
        let vpc = db.next_id(Kind::Vpc);
        db.vpcs.insert(
            vpc,
            Vpc {
                id: vpc,
                name: "Default".into(),
                admin_tenant: tenant,
                guest_tenants: Vec::new(),
                tags: Vec::new(),
                created_ms: now_ms,
                modified_ms: now_ms,
            },
        );
        let mut site_ids = BTreeMap::new();
        for s in &inventory.sites {
            let id = db.next_id(Kind::Site);
            site_ids.insert(s.name.clone(), id);
            db.sites.insert(
                id,
                Site {
                    id,
                    name: s.name.clone(),
                    vlan_range: s.vlan_range,
                    vni_range: s.vni_range,
                },
            );
        }
        let mut switch_ids = BTreeMap::new();
        for sw in &inventory.switches {
            let Some(&site) = site_ids.get(&sw.site) else {
                continue;
            };
            let id = db.next_id(Kind::Hw);
            switch_ids.insert(sw.name.clone(), id);
            db.switches.insert(
                id,
                Switch {
                    id,
                    name: sw.name.clone(),
                    site,
                    rack: sw.rack.clone(),
                },
            );
        }
        let mut port_ids = BTreeMap::new();
        for p in &inventory.ports {
            let Some(&switch) = switch_ids.get(&p.switch) else {
                continue;
            };
            let id = db.next_id(Kind::Port);
            port_ids.insert((p.switch.clone(), p.port.clone()), id);
            db.ports.insert(
                id,
                Port {
                    id,
                    switch,
                    port: p.port.clone(),
                    server: None,
                },
            );
        }
        for srv in &inventory.servers {
            let Some(&site) = site_ids.get(&srv.site) else {
                continue;
            };
            let id = db.next_id(Kind::Hw);
            let mut links = Vec::new();
            for l in &srv.links {
                if let Some(&port) = port_ids.get(&(l.switch.clone(), l.port.clone())) {
                    links.push((l.nic.clone(), port));
                    if let Some(p) = db.ports.get_mut(&port) {
                        p.server = Some((id, l.nic.clone()));
                    }
                }
            }
            db.servers.insert(
                id,
                Server {
                    id,
                    name: srv.name.clone(),
                    site,
                    rack: srv.rack.clone(),
                    links,
                },
            );
        }
        db.inventory = inventory;
        db
    }

    /// Advances the counter of `kind` and returns the new id.
    pub fn next_id(&mut self, kind: Kind) -> u64 {
        let c = &mut self.counters;
        let slot = match kind {
            Kind::Site => &mut c.site,
            Kind::Tenant => &mut c.tenant,
            Kind::Vpc => &mut c.vpc,
            Kind::Allocation => &mut c.allocation,
            Kind::Subnet => &mut c.subnet,
            Kind::Vnet => &mut c.vnet,
            Kind::Hw => &mut c.hw,
            Kind::Port => &mut c.port,
        };
        *slot = slot.saturating_add(1);
        *slot
    }

    /// The full name of a port (`swp5@rack-a1-leaf1`).
    #[must_use]
    pub fn port_name(&self, port: &Port) -> String {
        format!("{}@{}", port.port, self.switch_name(port.switch))
    }

    /// The name of a switch, or `""` when there is none with this id.
    #[must_use]
    pub fn switch_name(&self, id: u64) -> &str {
        self.switches.get(&id).map_or("", |s| s.name.as_str())
    }

    /// The site of a port (through its switch).
    #[must_use]
    pub fn port_site(&self, port: &Port) -> Option<u64> {
        self.switches.get(&port.switch).map(|s| s.site)
    }

    /// The V-Net each used port belongs to.
    #[must_use]
    pub fn port_owners(&self) -> BTreeMap<u64, u64> {
        self.vnets
            .values()
            .flat_map(|v| v.ports.iter().map(|p| (p.port, v.id)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeding_makes_defaults_and_hardware_with_their_own_counters() {
        let inv = NetrisInventory::from_nodes(&[("s1", "r1", "h1"), ("s1", "r1", "h2")]);
        let db = Db::seeded(inv, 5);
        assert_eq!(db.tenants[&ADMIN_TENANT_ID].name, "Admin");
        assert_eq!(db.vpcs[&DEFAULT_VPC_ID].name, "Default");
        assert_eq!(db.sites.len(), 1);
        assert_eq!(db.switches.len(), 2);
        assert_eq!(db.servers.len(), 2);
        // Two switches then two servers from the shared hw counter.
        assert_eq!(db.counters.hw, 4);
        let h2 = db.servers.values().find(|s| s.name == "h2").expect("h2");
        let (nic, port) = &h2.links[0];
        assert_eq!(nic, "eth0");
        assert_eq!(db.port_name(&db.ports[port]), "swp2@r1-leaf1");
        assert_eq!(db.ports[port].server, Some((h2.id, "eth0".into())));
    }

    #[test]
    fn the_db_round_trips_through_json() {
        let db = Db::seeded(NetrisInventory::from_nodes(&[("s", "r", "h")]), 1);
        let text = serde_json::to_string(&db).expect("ser");
        let back: Db = serde_json::from_str(&text).expect("de");
        assert_eq!(db, back);
    }

    #[test]
    fn purposes_round_trip() {
        for p in Purpose::ALL {
            assert_eq!(Purpose::parse(p.as_str()), Some(p));
            let json = serde_json::to_string(&p).expect("ser");
            assert_eq!(json, format!("\"{}\"", p.as_str()));
        }
        assert_eq!(Purpose::parse("public"), None);
    }
}
