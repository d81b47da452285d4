//! Checking a V-Net draft against the rest of the controller and allocating its ids;
//! checking gateways against IPAM.

use std::collections::BTreeSet;

use crate::netris::dispatch::ApiError;
use crate::netris::model::{Db, Gateway, Purpose, Vnet};

use super::draft::Draft;

impl Draft {
    /// Checks every rule against the rest of the controller and allocates the ids the
    /// draft leaves to the controller. `me` is the V-Net being updated.
    pub(super) fn settle(mut self, db: &Db, me: Option<u64>) -> Result<Self, ApiError> {
        let others = || db.vnets.values().filter(move |v| Some(v.id) != me);
        if let Some(v) = others().find(|v| v.name == self.name) {
            return Err(ApiError::bad_request(
                "name",
                format!(
                    "Vnet name '{}' is already in use (vnet {})",
                    self.name, v.id
                ),
            ));
        }
        if !db.tenants.contains_key(&self.tenant) {
            return Err(ApiError::bad_request(
                "tenant",
                format!("tenant {} does not exist", self.tenant),
            ));
        }
        if let Some(t) = self
            .guest_tenants
            .iter()
            .find(|t| !db.tenants.contains_key(t))
        {
            return Err(ApiError::bad_request(
                "guestTenants",
                format!("tenant {t} does not exist"),
            ));
        }
        if !db.vpcs.contains_key(&self.vpc) {
            return Err(ApiError::bad_request(
                "vpc",
                format!("vpc {} does not exist", self.vpc),
            ));
        }
        if self.sites.is_empty() {
            return Err(ApiError::bad_request(
                "sites",
                "Must have required property 'sites' (at least one site)",
            ));
        }
        if let Some(s) = self.sites.iter().find(|s| !db.sites.contains_key(s)) {
            return Err(ApiError::bad_request(
                "sites",
                format!("site {s} does not exist"),
            ));
        }
        // Gateways: inside a suitable subnet, not clashing with each other or with other
        // V-Nets of the VPC.
        for (i, g) in self.gateways.iter().enumerate() {
            check_gateway(db, self.tenant, self.vpc, &self.sites, g)
                .map_err(|m| ApiError::bad_request("gateways", m))?;
            let net = g.prefix.network();
            if self.gateways[..i]
                .iter()
                .any(|o| o.prefix.network().overlaps(&net))
            {
                return Err(ApiError::bad_request(
                    "gateways",
                    format!("gateway {} overlaps another gateway of this vnet", g.prefix),
                ));
            }
            if let Some(v) = others().find(|v| {
                v.vpc == self.vpc && v.gateways.iter().any(|o| o.prefix.network().overlaps(&net))
            }) {
                return Err(ApiError::bad_request(
                    "gateways",
                    format!(
                        "gateway {} overlaps a gateway of vnet '{}'",
                        g.prefix, v.name
                    ),
                ));
            }
        }
        // Ports: at one of our sites, not serving another V-Net.
        let owners = db.port_owners();
        for vp in &self.ports {
            let Some(port) = db.ports.get(&vp.port) else {
                return Err(ApiError::bad_request(
                    "ports",
                    format!("port {} does not exist", vp.port),
                ));
            };
            let name = db.port_name(port);
            if !db.port_site(port).is_some_and(|s| self.sites.contains(&s)) {
                return Err(ApiError::bad_request(
                    "ports",
                    format!("port {name} is not at any site of the vnet"),
                ));
            }
            if let Some(owner) = owners.get(&vp.port).filter(|o| Some(**o) != me)
                && let Some(v) = db.vnets.get(owner)
            {
                return Err(ApiError::bad_request(
                    "ports",
                    format!("port {name} is in use by vnet '{}'", v.name),
                ));
            }
        }
        // VLAN and VNI: inside every site's range, free at every site.
        let sharing: Vec<&Vnet> = others()
            .filter(|v| v.sites.iter().any(|s| self.sites.contains(s)))
            .collect();
        let ranges: Vec<_> = self.sites.iter().filter_map(|s| db.sites.get(s)).collect();
        let vlan_lo = ranges.iter().map(|s| s.vlan_range.0).max().unwrap_or(1);
        let vlan_hi = ranges.iter().map(|s| s.vlan_range.1).min().unwrap_or(4094);
        let used_vlans: BTreeSet<u16> = sharing.iter().map(|v| v.vlan).collect();
        self.vlan = settle_id(
            "vlan",
            self.vlan,
            self.vlan_auto,
            vlan_lo,
            vlan_hi,
            |n| used_vlans.contains(&n),
            |n| sharing.iter().find(|v| v.vlan == n).map(|v| v.name.clone()),
        )?;
        let vni_lo = ranges.iter().map(|s| s.vni_range.0).max().unwrap_or(1);
        let vni_hi = ranges
            .iter()
            .map(|s| s.vni_range.1)
            .min()
            .unwrap_or(16_777_215);
        let used_vnis: BTreeSet<u32> = sharing.iter().map(|v| v.vxlan_id).collect();
        self.vxlan = settle_id(
            "vxlanID",
            self.vxlan,
            self.vxlan_auto,
            vni_lo,
            vni_hi,
            |n| used_vnis.contains(&n),
            |n| {
                sharing
                    .iter()
                    .find(|v| v.vxlan_id == n)
                    .map(|v| v.name.clone())
            },
        )?;
        Ok(self)
    }
}

/// Keeps a wanted id (checking range and conflicts) or allocates the lowest free one.
/// An auto-assigned id that no longer fits (the sites changed) is re-allocated; a
/// given one is an error.
fn settle_id<T>(
    field: &str,
    want: Option<T>,
    auto: bool,
    lo: T,
    hi: T,
    used: impl Fn(T) -> bool,
    owner: impl Fn(T) -> Option<String>,
) -> Result<Option<T>, ApiError>
where
    T: Copy + Ord + std::fmt::Display + TryFrom<u64> + Into<u64>,
{
    if let Some(n) = want {
        if n < lo || n > hi {
            if !auto {
                return Err(ApiError::bad_request(
                    field,
                    format!("{field} {n} is outside the sites' range {lo}-{hi}"),
                ));
            }
        } else if let Some(other) = owner(n) {
            if !auto {
                return Err(ApiError::bad_request(
                    field,
                    format!("{field} {n} is in use by vnet '{other}'"),
                ));
            }
        } else {
            return Ok(Some(n));
        }
    }
    let (lo, hi): (u64, u64) = (lo.into(), hi.into());
    (lo..=hi)
        .filter_map(|n| T::try_from(n).ok())
        .find(|n| !used(*n))
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(
                field,
                format!("no free {field} left in the sites' range {lo}-{hi}"),
            )
        })
}

/// Checks one gateway against IPAM; the error is a sentence naming the gateway.
pub(crate) fn check_gateway(
    db: &Db,
    tenant: u64,
    vpc: u64,
    sites: &[u64],
    g: &Gateway,
) -> Result<(), String> {
    let net = g.prefix.network();
    if g.prefix.prefix_len() < 31
        && (g.prefix.addr() == net.addr() || g.prefix.addr() == g.prefix.broadcast())
    {
        return Err(format!(
            "gateway {} is the network or broadcast address of {net}",
            g.prefix
        ));
    }
    let vpc_name = db.vpcs.get(&vpc).map_or("", |v| v.name.as_str());
    let Some(subnet) = db
        .subnets
        .values()
        .find(|s| s.vpc == vpc && s.prefix.contains(&net))
    else {
        return Err(format!(
            "gateway {} is not inside any subnet of vpc '{vpc_name}'; add a common subnet for it to IPAM first",
            g.prefix
        ));
    };
    if subnet.purpose != Purpose::Common {
        return Err(format!(
            "gateway {} is in subnet {} whose purpose is {}, not common",
            g.prefix,
            subnet.prefix,
            subnet.purpose.as_str()
        ));
    }
    if subnet.tenant != tenant {
        return Err(format!(
            "gateway {} is in subnet {} of tenant {}, not of the vnet's tenant {tenant}",
            g.prefix, subnet.prefix, subnet.tenant
        ));
    }
    if !subnet.sites.is_empty()
        && let Some(s) = sites.iter().find(|s| !subnet.sites.contains(s))
    {
        let site = db.sites.get(s).map_or("", |s| s.name.as_str());
        return Err(format!(
            "gateway {}: subnet {} is not available at site '{site}'",
            g.prefix, subnet.prefix
        ));
    }
    if let Some((start, end)) = g.dhcp
        && (!net.contains_addr(start) || !net.contains_addr(end) || start > end)
    {
        return Err(format!(
            "gateway {}: dhcp range {start}-{end} must be an ordered range inside {net}",
            g.prefix
        ));
    }
    Ok(())
}

/// Re-checks every V-Net's gateways after an IPAM change.
pub(crate) fn recheck_gateways(db: &Db) -> Result<(), ApiError> {
    for v in db.vnets.values() {
        for g in &v.gateways {
            check_gateway(db, v.tenant, v.vpc, &v.sites, g).map_err(|m| {
                ApiError::bad_request(
                    "vnet",
                    format!("the change would break vnet '{}': {m}", v.name),
                )
            })?;
        }
    }
    Ok(())
}
