//! The emulator's hardware inventory: sites, switches, switch ports and servers with
//! their links, built from the lab's fleet.
//!
//! The fleet ([`crate::fleet`]) knows sites, racks and node hostnames, not cabling, so
//! [`NetrisInventory::from_nodes`] invents a plausible, deterministic topology: every
//! rack gets two leaf switches (`<rack>-leaf1`, `<rack>-leaf2`) with
//! `max(32, servers in the rack)` ports named `swp1`, `swp2`, …, and the n-th server of
//! a rack is cabled `eth0 → swp<n>@<rack>-leaf1` and `eth1 → swp<n>@<rack>-leaf2`. A
//! client resolves a BCM hostname to its switch ports through `GET /api/v2/hw/server`
//! (the server's `links`) or `GET /api/v2/ports` (each port's `server`).
//!
//! The inventory is also the body of `POST /_admin/seed`, so a test can seed any
//! topology it likes; [`NetrisInventory::validate`] checks it first.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::fleet::Fleet;

/// The default VLAN range of a site (IEEE 802.1Q usable ids, like Netris' own default
/// `vlanRange`).
pub const DEFAULT_VLAN_RANGE: (u16, u16) = (2, 4094);

/// The default VXLAN VNI range of a site: auto-assigned VNIs start at 10000 so they
/// never look like VLAN ids; the top is the 24-bit VNI limit.
pub const DEFAULT_VNI_RANGE: (u32, u32) = (10_000, 16_777_215);

/// Switch ports per leaf switch at least (more when a rack has more servers).
pub const MIN_PORTS_PER_SWITCH: usize = 32;

/// Hardware to seed the emulator with. Body of `POST /_admin/seed` (snake_case JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetrisInventory {
    /// Sites, in id order.
    #[serde(default)]
    pub sites: Vec<InventorySite>,
    /// Switches, in id order.
    #[serde(default)]
    pub switches: Vec<InventorySwitch>,
    /// Switch ports, in id order.
    #[serde(default)]
    pub ports: Vec<InventoryPort>,
    /// Servers, in id order.
    #[serde(default)]
    pub servers: Vec<InventoryServer>,
}

/// A site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventorySite {
    /// Its name, unique.
    pub name: String,
    /// The VLAN ids V-Nets at this site may use, inclusive.
    #[serde(default = "default_vlan_range")]
    pub vlan_range: (u16, u16),
    /// The VXLAN VNIs V-Nets at this site may use, inclusive.
    #[serde(default = "default_vni_range")]
    pub vni_range: (u32, u32),
}

fn default_vlan_range() -> (u16, u16) {
    DEFAULT_VLAN_RANGE
}

fn default_vni_range() -> (u32, u32) {
    DEFAULT_VNI_RANGE
}

/// A switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventorySwitch {
    /// Its name, unique (`rack-a1-leaf1`).
    pub name: String,
    /// The name of its site.
    pub site: String,
    /// The rack it sits in, if known.
    #[serde(default)]
    pub rack: Option<String>,
}

/// A switch port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryPort {
    /// The name of its switch.
    pub switch: String,
    /// The port's name on the switch (`swp5`); `swp5@<switch>` is its full name.
    pub port: String,
}

/// A server and its cabling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryServer {
    /// Its name: the BCM hostname, unique.
    pub name: String,
    /// The name of its site.
    pub site: String,
    /// The rack it sits in, if known.
    #[serde(default)]
    pub rack: Option<String>,
    /// Its NICs' cables to switch ports.
    #[serde(default)]
    pub links: Vec<InventoryLink>,
}

/// One cable from a server NIC to a switch port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryLink {
    /// The server's interface (`eth0`).
    pub nic: String,
    /// The switch.
    pub switch: String,
    /// The port on the switch (`swp5`).
    pub port: String,
}

/// Why an inventory cannot be seeded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// Two objects of one kind share a name.
    #[error("{kind} {name:?} appears twice")]
    Duplicate {
        /// `site`, `switch`, `port` or `server`.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// An object names a site, switch or port that is not in the inventory.
    #[error("{from} refers to {kind} {name:?}, which is not in the inventory")]
    Dangling {
        /// The object that refers.
        from: String,
        /// What it refers to.
        kind: &'static str,
        /// The missing name.
        name: String,
    },
    /// A range whose start is after its end, or outside the protocol's limits.
    #[error("site {site:?}: {what} range {from}-{to} is empty or out of bounds")]
    Range {
        /// The site.
        site: String,
        /// `vlan` or `vni`.
        what: &'static str,
        /// The start.
        from: u32,
        /// The end.
        to: u32,
    },
    /// An empty name.
    #[error("a {0} has an empty name")]
    EmptyName(&'static str),
    /// Two servers are cabled to the same switch port.
    #[error("port {port} is cabled to both {first} and {second}")]
    PortCabledTwice {
        /// The port's full name.
        port: String,
        /// The first server.
        first: String,
        /// The second server.
        second: String,
    },
}

impl NetrisInventory {
    /// The inventory of the lab's fleet: one site per fleet site, two leaf switches per
    /// rack, two links per node (see the module docs).
    #[must_use]
    pub fn from_fleet(fleet: &Fleet) -> Self {
        let nodes: Vec<(&str, &str, &str)> = fleet
            .nodes()
            .iter()
            .map(|n| (n.site.as_str(), n.rack.as_str(), n.hostname()))
            .collect();
        Self::from_nodes(&nodes)
    }

    /// The inventory of the lab's default fleet ([`Fleet::default_fleet`]); empty in the
    /// (never expected) case that the built-in fleet spec does not expand.
    #[must_use]
    pub fn default_lab() -> Self {
        Fleet::default_fleet(None)
            .map(|f| Self::from_fleet(&f))
            .unwrap_or_default()
    }

    /// An inventory from `(site, rack, hostname)` triples, in order: sites in the order
    /// they first appear, racks likewise, servers in the given order within their rack.
    #[must_use]
    pub fn from_nodes(nodes: &[(&str, &str, &str)]) -> Self {
        let mut inv = Self::default();
        let mut racks: Vec<(String, String)> = Vec::new(); // (site, rack) in first-seen order
        let mut in_rack: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (site, rack, host) in nodes {
            if !inv.sites.iter().any(|s| s.name == *site) {
                inv.sites.push(InventorySite {
                    name: (*site).to_owned(),
                    vlan_range: DEFAULT_VLAN_RANGE,
                    vni_range: DEFAULT_VNI_RANGE,
                });
            }
            if !racks.iter().any(|(_, r)| r == rack) {
                racks.push(((*site).to_owned(), (*rack).to_owned()));
            }
            in_rack
                .entry((*rack).to_owned())
                .or_default()
                .push((*host).to_owned());
        }
        for (site, rack) in &racks {
            let hosts = in_rack.get(rack).map(Vec::as_slice).unwrap_or_default();
            let port_count = hosts.len().max(MIN_PORTS_PER_SWITCH);
            let leaves = [format!("{rack}-leaf1"), format!("{rack}-leaf2")];
            for leaf in &leaves {
                inv.switches.push(InventorySwitch {
                    name: leaf.clone(),
                    site: site.clone(),
                    rack: Some(rack.clone()),
                });
                for n in 1..=port_count {
                    inv.ports.push(InventoryPort {
                        switch: leaf.clone(),
                        port: format!("swp{n}"),
                    });
                }
            }
            for (i, host) in hosts.iter().enumerate() {
                let port = format!("swp{}", i + 1);
                inv.servers.push(InventoryServer {
                    name: host.clone(),
                    site: site.clone(),
                    rack: Some(rack.clone()),
                    links: leaves
                        .iter()
                        .enumerate()
                        .map(|(nic, leaf)| InventoryLink {
                            nic: format!("eth{nic}"),
                            switch: leaf.clone(),
                            port: port.clone(),
                        })
                        .collect(),
                });
            }
        }
        inv
    }

    /// Checks names are unique and non-empty, every reference resolves, ranges are sane
    /// and no port is cabled twice.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), InventoryError> {
        let mut sites = HashSet::new();
        for s in &self.sites {
            nonempty("site", &s.name)?;
            unique("site", &s.name, &mut sites)?;
            let (from, to) = s.vlan_range;
            if from == 0 || from > to || to > 4094 {
                return Err(InventoryError::Range {
                    site: s.name.clone(),
                    what: "vlan",
                    from: from.into(),
                    to: to.into(),
                });
            }
            let (from, to) = s.vni_range;
            if from == 0 || from > to || to > 16_777_215 {
                return Err(InventoryError::Range {
                    site: s.name.clone(),
                    what: "vni",
                    from,
                    to,
                });
            }
        }
        let mut switches = HashSet::new();
        for sw in &self.switches {
            nonempty("switch", &sw.name)?;
            unique("switch", &sw.name, &mut switches)?;
            exists(&sw.name, "site", &sw.site, &sites)?;
        }
        let mut ports = HashSet::new();
        for p in &self.ports {
            nonempty("port", &p.port)?;
            exists(&p.port, "switch", &p.switch, &switches)?;
            unique("port", &format!("{}@{}", p.port, p.switch), &mut ports)?;
        }
        let mut servers = HashSet::new();
        let mut cabled: BTreeMap<String, String> = BTreeMap::new();
        for srv in &self.servers {
            nonempty("server", &srv.name)?;
            unique("server", &srv.name, &mut servers)?;
            exists(&srv.name, "site", &srv.site, &sites)?;
            for link in &srv.links {
                let full = format!("{}@{}", link.port, link.switch);
                exists(&srv.name, "port", &full, &ports)?;
                if let Some(first) = cabled.insert(full.clone(), srv.name.clone()) {
                    return Err(InventoryError::PortCabledTwice {
                        port: full,
                        first,
                        second: srv.name.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

fn nonempty(kind: &'static str, name: &str) -> Result<(), InventoryError> {
    if name.trim().is_empty() {
        Err(InventoryError::EmptyName(kind))
    } else {
        Ok(())
    }
}

fn unique(
    kind: &'static str,
    name: &str,
    seen: &mut HashSet<String>,
) -> Result<(), InventoryError> {
    if seen.insert(name.to_owned()) {
        Ok(())
    } else {
        Err(InventoryError::Duplicate {
            kind,
            name: name.to_owned(),
        })
    }
}

fn exists(
    from: &str,
    kind: &'static str,
    name: &str,
    known: &HashSet<String>,
) -> Result<(), InventoryError> {
    if known.contains(name) {
        Ok(())
    } else {
        Err(InventoryError::Dangling {
            from: from.to_owned(),
            kind,
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triples_become_sites_leaves_ports_and_cabled_servers() {
        let inv = NetrisInventory::from_nodes(&[
            ("site-a", "r1", "gpu-r1-01"),
            ("site-a", "r1", "gpu-r1-02"),
            ("site-b", "r2", "gpu-r2-01"),
        ]);
        inv.validate().expect("valid");
        let sites: Vec<&str> = inv.sites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(sites, ["site-a", "site-b"]);
        let switches: Vec<&str> = inv.switches.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(switches, ["r1-leaf1", "r1-leaf2", "r2-leaf1", "r2-leaf2"]);
        assert_eq!(inv.ports.len(), 4 * MIN_PORTS_PER_SWITCH);
        let second = &inv.servers[1];
        assert_eq!(second.name, "gpu-r1-02");
        assert_eq!(second.links[0].nic, "eth0");
        assert_eq!(second.links[0].switch, "r1-leaf1");
        assert_eq!(second.links[1].switch, "r1-leaf2");
        assert_eq!(second.links[1].port, "swp2");
        assert_eq!(inv.servers[2].site, "site-b");
    }

    #[test]
    fn the_default_fleet_expands_and_validates() {
        let inv = NetrisInventory::default_lab();
        inv.validate().expect("valid");
        assert!(inv.servers.len() >= 64, "{}", inv.servers.len());
        assert_eq!(inv.sites.len(), 2);
        assert!(inv.servers.iter().all(|s| s.links.len() == 2));
    }

    #[test]
    fn bad_inventories_name_the_problem() {
        let mut inv = NetrisInventory::from_nodes(&[("s", "r", "h1"), ("s", "r", "h2")]);
        inv.servers[1].links[0].port = "swp1".into();
        assert!(matches!(
            inv.validate(),
            Err(InventoryError::PortCabledTwice { .. })
        ));
        let mut inv = NetrisInventory::from_nodes(&[("s", "r", "h1")]);
        inv.switches[0].site = "nowhere".into();
        assert!(
            inv.validate()
                .expect_err("dangling")
                .to_string()
                .contains("nowhere")
        );
        let mut inv = NetrisInventory::from_nodes(&[("s", "r", "h1")]);
        inv.sites[0].vlan_range = (100, 10);
        assert!(matches!(inv.validate(), Err(InventoryError::Range { .. })));
        let mut inv = NetrisInventory::from_nodes(&[("s", "r", "h1")]);
        inv.servers.push(inv.servers[0].clone());
        assert!(matches!(
            inv.validate(),
            Err(InventoryError::Duplicate { .. })
        ));
    }
}
