//! V-Nets: L2 segments with a VLAN id and a VXLAN VNI, gateways from IPAM, and switch
//! ports, provisioned asynchronously.
//!
//! # Rules
//!
//! - `name` is unique across the controller: a duplicate is a 400 whose `errors` names
//!   `name`.
//! - `tenant` and at least one of `sites` are required; `vpc` defaults to the default
//!   VPC and must exist. A PUT that changes `vpc` is answered 200 and the change is
//!   **ignored** (quirk of the real controller); everything else the PUT sets is
//!   applied, and fields it leaves out keep their values.
//! - `vlan`: `"auto"` (or `0`, or absent) takes the lowest id that is free at every site
//!   of the V-Net, within the intersection of the sites' `vlanRange` (default 2-4094);
//!   a number (or numeric string) must lie in that range and not be used by another
//!   V-Net sharing a site, else 400 `vlan 100 is in use by vnet X`.
//! - `vxlanID`: `0` (or absent) takes the lowest free VNI of the sites' `vniRange`
//!   (default 10000-16777215); a given VNI is checked like a VLAN id.
//! - Every gateway (`"10.0.0.1/24"`) must lie in a `common` subnet of the V-Net's VPC,
//!   owned by the V-Net's tenant and available at each of its sites (a subnet with no
//!   sites is available everywhere); it may not be the network or broadcast address,
//!   nor overlap another gateway of the same VPC; a DHCP pool must lie inside it.
//! - A port (`{"name": "swp5@leaf1"}` or `{"id": n}`) must exist, sit on a switch at one
//!   of the V-Net's sites, and not serve another V-Net, else 400 naming the port and
//!   its owner.
//! - `state` is `active` or `disabled`; a disabled V-Net keeps its ids and ports.
//!
//! # Provisioning
//!
//! A created or updated V-Net answers `provisioning: true`, status `Provisioning`, until
//! the configured delay has passed on the store's clock; then `provisioning: false` and
//! status `Active` (or `Disabled`). With the `provisioning_stuck` fault set, V-Nets
//! created or updated meanwhile stay provisioning until the fault is cleared.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::body::{self, Obj};
use super::dispatch::ApiError;
use super::model::{AdminState, DEFAULT_VPC_ID, Db, Gateway, Kind, Purpose, Vnet, VnetPort};
use super::prefix::Cidr;
use super::wire;

/// When a write happens and when its provisioning finishes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Now, epoch ms.
    pub(crate) now: u64,
    /// When provisioning of this write finishes; `None`: stuck.
    pub(crate) done: Option<u64>,
}

/// What a request asks for, before ids are checked and allocated.
struct Draft {
    name: String,
    tenant: u64,
    guest_tenants: Vec<u64>,
    sites: Vec<u64>,
    vpc: u64,
    state: AdminState,
    /// `Some(id)`: this id; `None`: allocate one.
    vlan: Option<u16>,
    vlan_auto: bool,
    vxlan: Option<u32>,
    vxlan_auto: bool,
    gateways: Vec<Gateway>,
    ports: Vec<VnetPort>,
    tags: Vec<String>,
    mtu: Option<u32>,
}

/// `"auto"`, `0`, a number, or a numeric string.
enum IdWant {
    Auto,
    Id(u64),
}

fn id_want(b: &Obj, key: &str) -> Result<Option<IdWant>, ApiError> {
    match b.get(key).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("auto") => Ok(Some(IdWant::Auto)),
        Some(v) => match body::as_u64(v) {
            Some(0) => Ok(Some(IdWant::Auto)),
            Some(n) => Ok(Some(IdWant::Id(n))),
            None => Err(ApiError::bad_request(
                key,
                format!("{key} must be \"auto\" or a number"),
            )),
        },
    }
}

fn parse_vlan(b: &Obj) -> Result<Option<IdWant>, ApiError> {
    let want = id_want(b, "vlan")?;
    if let Some(IdWant::Id(n)) = want
        && !(1..=4094).contains(&n)
    {
        return Err(ApiError::bad_request(
            "vlan",
            format!("vlan {n} is not from 1 to 4094"),
        ));
    }
    Ok(want)
}

fn parse_vxlan(b: &Obj) -> Result<Option<IdWant>, ApiError> {
    let want = id_want(b, "vxlanID")?;
    if let Some(IdWant::Id(n)) = want
        && n > 16_777_215
    {
        return Err(ApiError::bad_request(
            "vxlanID",
            format!("vxlanID {n} is not from 1 to 16777215"),
        ));
    }
    Ok(want)
}

fn parse_gateways(b: &Obj) -> Result<Option<Vec<Gateway>>, ApiError> {
    let Some(items) = body::opt_objects(b, "gateways")? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(items.len());
    for g in items {
        let text = body::req_str(g, "prefix").map_err(|_| {
            ApiError::bad_request(
                "gateways",
                "every gateway needs a prefix like \"10.0.0.1/24\"",
            )
        })?;
        let prefix: Cidr = text.parse().map_err(|e| {
            ApiError::bad_request(
                "gateways",
                format!("gateway {text:?}: {e}; only IPv4 is supported"),
            )
        })?;
        let dhcp_enabled = body::opt_bool(g, "dhcpEnabled")
            .map_err(|e| e.in_field("gateways"))?
            .unwrap_or(false);
        let dhcp = match g.get("dhcp").filter(|v| !v.is_null()) {
            None => None,
            Some(Value::Object(d)) => {
                let addr = |key: &str| -> Result<Ipv4Addr, ApiError> {
                    body::req_str(d, key)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .ok_or_else(|| {
                            ApiError::bad_request(
                                "gateways",
                                format!("gateway {prefix}: dhcp.{key} must be an IPv4 address"),
                            )
                        })
                };
                Some((addr("start")?, addr("end")?))
            }
            Some(_) => {
                return Err(ApiError::bad_request(
                    "gateways",
                    format!("gateway {prefix}: dhcp must be {{\"start\", \"end\"}}"),
                ));
            }
        };
        out.push(Gateway {
            prefix,
            dhcp_enabled,
            dhcp,
        });
    }
    Ok(Some(out))
}

fn parse_ports(db: &Db, b: &Obj) -> Result<Option<Vec<VnetPort>>, ApiError> {
    let Some(items) = body::opt_objects(b, "ports")? else {
        return Ok(None);
    };
    let mut out: Vec<VnetPort> = Vec::with_capacity(items.len());
    for p in items {
        let by_id = body::opt_u64(p, "id").map_err(|e| e.in_field("ports"))?;
        let by_name = body::opt_str(p, "name").map_err(|e| e.in_field("ports"))?;
        let port = match (by_id, by_name) {
            (Some(id), _) => db.ports.get(&id).ok_or_else(|| {
                ApiError::bad_request("ports", format!("port {id} does not exist"))
            })?,
            (None, Some(name)) => db
                .ports
                .values()
                .find(|p| db.port_name(p) == name)
                .ok_or_else(|| {
                    ApiError::bad_request("ports", format!("port {name} does not exist"))
                })?,
            (None, None) => {
                return Err(ApiError::bad_request(
                    "ports",
                    "every port needs an id or a name like \"swp5@leaf1\"",
                ));
            }
        };
        let vlan = match p.get("vlan").filter(|v| !v.is_null()) {
            None => None,
            Some(Value::String(s))
                if s.trim().is_empty() || s.trim().eq_ignore_ascii_case("auto") =>
            {
                None
            }
            Some(v) => match body::as_u64(v) {
                Some(0) => None,
                Some(n) if n <= 4094 => u16::try_from(n).ok(),
                _ => {
                    return Err(ApiError::bad_request(
                        "ports",
                        format!(
                            "port {}: vlan must be a number from 1 to 4094",
                            db.port_name(port)
                        ),
                    ));
                }
            },
        };
        let untagged = ["untagged", "accessMode", "access"]
            .iter()
            .map(|k| body::opt_bool(p, k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.in_field("ports"))?
            .into_iter()
            .flatten()
            .next()
            .unwrap_or(false);
        let state = match body::opt_str(p, "state").map_err(|e| e.in_field("ports"))? {
            None => AdminState::Active,
            Some(s) => AdminState::parse(s).ok_or_else(|| {
                ApiError::bad_request(
                    "ports",
                    format!(
                        "port {}: state must be active or disabled",
                        db.port_name(port)
                    ),
                )
            })?,
        };
        if out.iter().any(|o| o.port == port.id) {
            return Err(ApiError::bad_request(
                "ports",
                format!("port {} is listed twice", db.port_name(port)),
            ));
        }
        out.push(VnetPort {
            port: port.id,
            vlan,
            untagged,
            state,
        });
    }
    Ok(Some(out))
}

impl Draft {
    /// Reads a create body (`base` `None`) or a PUT body over an existing V-Net.
    fn read(db: &Db, b: &Obj, base: Option<&Vnet>) -> Result<Self, ApiError> {
        let name = match (base, body::has(b, "name")) {
            (Some(v), false) => v.name.clone(),
            _ => body::req_str(b, "name")?.trim().to_string(),
        };
        let tenant = match (base, body::opt_ref(b, "tenant")?) {
            (_, Some(t)) => t,
            (Some(v), None) => v.tenant,
            (None, None) => body::req_ref(b, "tenant")?,
        };
        let guest_tenants = match body::opt_refs(b, "guestTenants")? {
            Some(g) => body::dedup(g),
            None => base.map(|v| v.guest_tenants.clone()).unwrap_or_default(),
        };
        let sites = match (body::opt_refs(b, "sites")?, base) {
            (Some(s), _) => body::dedup(s),
            (None, Some(v)) => v.sites.clone(),
            (None, None) => Vec::new(),
        };
        let vpc = match base {
            // Quirk: a PUT's `vpc` is accepted and ignored.
            Some(v) => v.vpc,
            None => body::opt_ref(b, "vpc")?.unwrap_or(DEFAULT_VPC_ID),
        };
        let state = match body::opt_str(b, "state")? {
            Some(s) => AdminState::parse(s).ok_or_else(|| {
                ApiError::bad_request("state", "state must be active or disabled")
            })?,
            None => base.map_or(AdminState::Active, |v| v.state),
        };
        let (vlan, vlan_auto) = match (parse_vlan(b)?, base) {
            (Some(IdWant::Id(n)), _) => (u16::try_from(n).ok(), false),
            // "auto" on a PUT keeps the current id while it stays valid.
            (Some(IdWant::Auto), Some(v)) => (Some(v.vlan), true),
            (None, Some(v)) => (Some(v.vlan), v.vlan_auto),
            (Some(IdWant::Auto) | None, None) => (None, true),
        };
        let (vxlan, vxlan_auto) = match (parse_vxlan(b)?, base) {
            (Some(IdWant::Id(n)), _) => (u32::try_from(n).ok(), false),
            (Some(IdWant::Auto), Some(v)) => (Some(v.vxlan_id), true),
            (None, Some(v)) => (Some(v.vxlan_id), v.vxlan_auto),
            (Some(IdWant::Auto) | None, None) => (None, true),
        };
        let gateways = match parse_gateways(b)? {
            Some(g) => g,
            None => base.map(|v| v.gateways.clone()).unwrap_or_default(),
        };
        let ports = match parse_ports(db, b)? {
            Some(p) => p,
            None => base.map(|v| v.ports.clone()).unwrap_or_default(),
        };
        let tags = match body::opt_strings(b, "tags")? {
            Some(t) => t,
            None => base.map(|v| v.tags.clone()).unwrap_or_default(),
        };
        let mtu = match body::opt_u64(b, "mtu")? {
            Some(m) if (68..=9216).contains(&m) => u32::try_from(m).ok(),
            Some(m) => {
                return Err(ApiError::bad_request(
                    "mtu",
                    format!("mtu {m} is not from 68 to 9216"),
                ));
            }
            None => base.and_then(|v| v.mtu),
        };
        Ok(Self {
            name,
            tenant,
            guest_tenants,
            sites,
            vpc,
            state,
            vlan,
            vlan_auto,
            vxlan,
            vxlan_auto,
            gateways,
            ports,
            tags,
            mtu,
        })
    }

    /// Checks every rule against the rest of the controller and allocates the ids the
    /// draft leaves to the controller. `me` is the V-Net being updated.
    fn settle(mut self, db: &Db, me: Option<u64>) -> Result<Self, ApiError> {
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

fn build(d: Draft, id: u64, created_ms: u64, t: Timing) -> Vnet {
    Vnet {
        id,
        name: d.name,
        tenant: d.tenant,
        guest_tenants: d.guest_tenants,
        sites: d.sites,
        vpc: d.vpc,
        state: d.state,
        vlan: d.vlan.unwrap_or_default(),
        vlan_auto: d.vlan_auto,
        vxlan_id: d.vxlan.unwrap_or_default(),
        vxlan_auto: d.vxlan_auto,
        gateways: d.gateways,
        ports: d.ports,
        tags: d.tags,
        mtu: d.mtu,
        created_ms,
        modified_ms: t.now,
        provisioning_done_ms: t.done,
    }
}

/// `POST /api/v2/vnet`.
pub(crate) fn create(db: &mut Db, b: &Obj, t: Timing) -> Result<Value, ApiError> {
    let draft = Draft::read(db, b, None)?.settle(db, None)?;
    let id = db.next_id(Kind::Vnet);
    db.vnets.insert(id, build(draft, id, t.now, t));
    Ok(json!({"id": id}))
}

/// `PUT /api/v2/vnet/{id}`.
pub(crate) fn update(db: &mut Db, id: u64, b: &Obj, t: Timing) -> Result<Value, ApiError> {
    let base = db
        .vnets
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("vnet {id} not found")))?;
    let draft = Draft::read(db, b, Some(&base))?.settle(db, Some(id))?;
    db.vnets.insert(id, build(draft, id, base.created_ms, t));
    Ok(json!({"id": id}))
}

/// `DELETE /api/v2/vnet/{id}`: frees its ports, VLAN and VNI.
pub(crate) fn delete(db: &mut Db, id: u64) -> Result<Value, ApiError> {
    db.vnets
        .remove(&id)
        .map(|_| json!({"id": id}))
        .ok_or_else(|| ApiError::not_found(format!("vnet {id} not found")))
}

/// `GET /api/v2/vnet/{id}`.
pub(crate) fn get(db: &Db, id: u64, now: u64) -> Result<Value, ApiError> {
    db.vnets
        .get(&id)
        .map(|v| wire::vnet(db, v, now))
        .ok_or_else(|| ApiError::not_found(format!("vnet {id} not found")))
}

/// `GET /api/v2/vnet[?filterByVpc=…]`.
pub(crate) fn list(db: &Db, vpcs: Option<&[u64]>, now: u64) -> Value {
    Value::Array(
        db.vnets
            .values()
            .filter(|v| vpcs.is_none_or(|f| f.contains(&v.vpc)))
            .map(|v| wire::vnet(db, v, now))
            .collect(),
    )
}

/// Lets V-Nets stuck in provisioning finish `delay_ms` after `now` (the
/// `provisioning_stuck` fault was cleared).
pub(crate) fn unstick(db: &mut Db, now: u64, delay_ms: u64) {
    for v in db.vnets.values_mut() {
        if v.provisioning_done_ms.is_none() {
            v.provisioning_done_ms = Some(now.saturating_add(delay_ms));
        }
    }
}
