//! Sites, tenants, VPCs and the read-only inventory (switches, servers, ports).
//!
//! Names of sites, tenants and VPCs are unique. Nothing that is referenced can be
//! deleted (400 naming the user), and the `Admin` tenant and the `Default` VPC cannot
//! be deleted at all, so the state never holds dangling references. A VPC PUT may
//! change its name, tenants and tags.

use serde_json::{Value, json};

use super::body::{self, Obj};
use super::dispatch::ApiError;
use super::model::{ADMIN_TENANT_ID, DEFAULT_VPC_ID, Db, Kind, Site, Tenant, Vpc};
use super::wire;

fn not_found(what: &str, id: u64) -> ApiError {
    ApiError::not_found(format!("{what} {id} not found"))
}

// --- sites -------------------------------------------------------------------------

/// Parses `"2-4094"`.
fn parse_range(field: &str, s: &str, max: u64) -> Result<(u64, u64), ApiError> {
    let bad = || {
        ApiError::bad_request(
            field,
            format!("{field} must look like \"from-to\" within 1-{max}"),
        )
    };
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    if a == 0 || a > b || b > max {
        return Err(bad());
    }
    Ok((a, b))
}

fn read_site_ranges(b: &Obj, site: &mut Site) -> Result<(), ApiError> {
    if let Some(r) = body::opt_str(b, "vlanRange")? {
        let (lo, hi) = parse_range("vlanRange", r, 4094)?;
        site.vlan_range = (
            u16::try_from(lo).unwrap_or(u16::MAX),
            u16::try_from(hi).unwrap_or(u16::MAX),
        );
    }
    if let Some(r) = body::opt_str(b, "vniRange")? {
        let (lo, hi) = parse_range("vniRange", r, 16_777_215)?;
        site.vni_range = (
            u32::try_from(lo).unwrap_or(u32::MAX),
            u32::try_from(hi).unwrap_or(u32::MAX),
        );
    }
    Ok(())
}

fn unique_site_name(db: &Db, name: &str, me: Option<u64>) -> Result<(), ApiError> {
    if db
        .sites
        .values()
        .any(|s| s.name == name && Some(s.id) != me)
    {
        return Err(ApiError::bad_request(
            "name",
            format!("site name '{name}' is already in use"),
        ));
    }
    Ok(())
}

/// `GET /api/v2/sites`.
pub(crate) fn list_sites(db: &Db) -> Value {
    Value::Array(db.sites.values().map(wire::site).collect())
}

/// `GET /api/v2/sites/{id}`.
pub(crate) fn get_site(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.sites
        .get(&id)
        .map(wire::site)
        .ok_or_else(|| not_found("site", id))
}

/// `POST /api/v2/sites`.
pub(crate) fn create_site(db: &mut Db, b: &Obj) -> Result<Value, ApiError> {
    let name = body::req_str(b, "name")?.trim().to_owned();
    unique_site_name(db, &name, None)?;
    let mut site = Site {
        id: 0,
        name,
        vlan_range: super::inventory::DEFAULT_VLAN_RANGE,
        vni_range: super::inventory::DEFAULT_VNI_RANGE,
    };
    read_site_ranges(b, &mut site)?;
    site.id = db.next_id(Kind::Site);
    let id = site.id;
    db.sites.insert(id, site);
    Ok(json!({"id": id}))
}

/// `PUT /api/v2/sites/{id}`: name and ranges; the ranges must still hold the VLANs and
/// VNIs of the site's V-Nets.
pub(crate) fn update_site(db: &mut Db, id: u64, b: &Obj) -> Result<Value, ApiError> {
    let mut site = db
        .sites
        .get(&id)
        .cloned()
        .ok_or_else(|| not_found("site", id))?;
    if body::has(b, "name") {
        site.name = body::req_str(b, "name")?.trim().to_owned();
        unique_site_name(db, &site.name, Some(id))?;
    }
    read_site_ranges(b, &mut site)?;
    for v in db.vnets.values().filter(|v| v.sites.contains(&id)) {
        let (lo, hi) = site.vlan_range;
        if v.vlan < lo || v.vlan > hi {
            return Err(ApiError::bad_request(
                "vlanRange",
                format!("vnet '{}' uses vlan {}, outside {lo}-{hi}", v.name, v.vlan),
            ));
        }
        let (lo, hi) = site.vni_range;
        if v.vxlan_id < lo || v.vxlan_id > hi {
            return Err(ApiError::bad_request(
                "vniRange",
                format!(
                    "vnet '{}' uses vxlanID {}, outside {lo}-{hi}",
                    v.name, v.vxlan_id
                ),
            ));
        }
    }
    db.sites.insert(id, site);
    Ok(json!({"id": id}))
}

/// `DELETE /api/v2/sites/{id}`: only a site nothing uses.
pub(crate) fn delete_site(db: &mut Db, id: u64) -> Result<Value, ApiError> {
    if !db.sites.contains_key(&id) {
        return Err(not_found("site", id));
    }
    let user = db
        .switches
        .values()
        .find(|s| s.site == id)
        .map(|s| format!("switch '{}'", s.name))
        .or_else(|| {
            db.servers
                .values()
                .find(|s| s.site == id)
                .map(|s| format!("server '{}'", s.name))
        })
        .or_else(|| {
            db.vnets
                .values()
                .find(|v| v.sites.contains(&id))
                .map(|v| format!("vnet '{}'", v.name))
        })
        .or_else(|| {
            db.subnets
                .values()
                .find(|s| s.sites.contains(&id))
                .map(|s| format!("subnet {}", s.prefix))
        });
    if let Some(user) = user {
        return Err(ApiError::bad_request(
            "id",
            format!("site {id} is in use by {user}"),
        ));
    }
    db.sites.remove(&id);
    Ok(json!({"id": id}))
}

// --- tenants (v1) ------------------------------------------------------------------

fn unique_tenant_name(db: &Db, name: &str, me: Option<u64>) -> Result<(), ApiError> {
    if db
        .tenants
        .values()
        .any(|t| t.name == name && Some(t.id) != me)
    {
        return Err(ApiError::bad_request(
            "name",
            format!("tenant name '{name}' is already in use"),
        ));
    }
    Ok(())
}

/// `GET /api/tenants`.
pub(crate) fn list_tenants(db: &Db) -> Value {
    Value::Array(db.tenants.values().map(wire::tenant).collect())
}

/// `GET /api/tenants/{id}`.
pub(crate) fn get_tenant(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.tenants
        .get(&id)
        .map(wire::tenant)
        .ok_or_else(|| not_found("tenant", id))
}

/// `POST /api/tenants`.
pub(crate) fn create_tenant(db: &mut Db, b: &Obj) -> Result<Value, ApiError> {
    let name = body::req_str(b, "name")?.trim().to_owned();
    unique_tenant_name(db, &name, None)?;
    let description = body::opt_str(b, "description")?.unwrap_or("").to_owned();
    let id = db.next_id(Kind::Tenant);
    db.tenants.insert(
        id,
        Tenant {
            id,
            name,
            description,
        },
    );
    Ok(json!({"id": id}))
}

/// `PUT /api/tenants` (id in the body, v1 style) or `PUT /api/tenants/{id}`.
pub(crate) fn update_tenant(db: &mut Db, id: Option<u64>, b: &Obj) -> Result<Value, ApiError> {
    let id = match id {
        Some(id) => id,
        None => body::opt_u64(b, "id")?
            .ok_or_else(|| ApiError::bad_request("id", "Must have required property 'id'"))?,
    };
    let mut t = db
        .tenants
        .get(&id)
        .cloned()
        .ok_or_else(|| not_found("tenant", id))?;
    if body::has(b, "name") {
        t.name = body::req_str(b, "name")?.trim().to_owned();
        unique_tenant_name(db, &t.name, Some(id))?;
    }
    if let Some(d) = body::opt_str(b, "description")? {
        t.description = d.to_owned();
    }
    db.tenants.insert(id, t);
    Ok(json!({"id": id}))
}

/// `DELETE /api/tenants/{id}`: not `Admin`, and only a tenant nothing uses.
pub(crate) fn delete_tenant(db: &mut Db, id: u64) -> Result<Value, ApiError> {
    if !db.tenants.contains_key(&id) {
        return Err(not_found("tenant", id));
    }
    if id == ADMIN_TENANT_ID {
        return Err(ApiError::bad_request(
            "id",
            "the Admin tenant cannot be deleted",
        ));
    }
    let user = db
        .vpcs
        .values()
        .find(|v| v.admin_tenant == id || v.guest_tenants.contains(&id))
        .map(|v| format!("vpc '{}'", v.name))
        .or_else(|| {
            db.allocations
                .values()
                .find(|a| a.tenant == id)
                .map(|a| format!("allocation {}", a.prefix))
        })
        .or_else(|| {
            db.subnets
                .values()
                .find(|s| s.tenant == id)
                .map(|s| format!("subnet {}", s.prefix))
        })
        .or_else(|| {
            db.vnets
                .values()
                .find(|v| v.tenant == id || v.guest_tenants.contains(&id))
                .map(|v| format!("vnet '{}'", v.name))
        });
    if let Some(user) = user {
        return Err(ApiError::bad_request(
            "id",
            format!("tenant {id} is in use by {user}"),
        ));
    }
    db.tenants.remove(&id);
    Ok(json!({"id": id}))
}

// --- VPCs --------------------------------------------------------------------------

fn read_vpc_tenants(db: &Db, b: &Obj) -> Result<Option<Vec<u64>>, ApiError> {
    let guests = match body::opt_refs(b, "guestTenant")? {
        Some(g) => Some(g),
        None => body::opt_refs(b, "guestTenants")?,
    };
    if let Some(g) = &guests
        && let Some(t) = g.iter().find(|t| !db.tenants.contains_key(t))
    {
        return Err(ApiError::bad_request(
            "guestTenant",
            format!("tenant {t} does not exist"),
        ));
    }
    Ok(guests.map(body::dedup))
}

fn unique_vpc_name(db: &Db, name: &str, me: Option<u64>) -> Result<(), ApiError> {
    if db.vpcs.values().any(|v| v.name == name && Some(v.id) != me) {
        return Err(ApiError::bad_request(
            "name",
            format!("vpc name '{name}' is already in use"),
        ));
    }
    Ok(())
}

/// `GET /api/v2/vpc`.
pub(crate) fn list_vpcs(db: &Db) -> Value {
    Value::Array(db.vpcs.values().map(|v| wire::vpc(db, v)).collect())
}

/// `GET /api/v2/vpc/{id}`.
pub(crate) fn get_vpc(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.vpcs
        .get(&id)
        .map(|v| wire::vpc(db, v))
        .ok_or_else(|| not_found("vpc", id))
}

/// `POST /api/v2/vpc`.
pub(crate) fn create_vpc(db: &mut Db, b: &Obj, now: u64) -> Result<Value, ApiError> {
    let name = body::req_str(b, "name")?.trim().to_owned();
    unique_vpc_name(db, &name, None)?;
    let admin_tenant = body::req_ref(b, "adminTenant")?;
    if !db.tenants.contains_key(&admin_tenant) {
        return Err(ApiError::bad_request(
            "adminTenant",
            format!("tenant {admin_tenant} does not exist"),
        ));
    }
    let guest_tenants = read_vpc_tenants(db, b)?.unwrap_or_default();
    let tags = body::opt_strings(b, "tags")?.unwrap_or_default();
    let id = db.next_id(Kind::Vpc);
    db.vpcs.insert(
        id,
        Vpc {
            id,
            name,
            admin_tenant,
            guest_tenants,
            tags,
            created_ms: now,
            modified_ms: now,
        },
    );
    Ok(json!({"id": id}))
}

/// `PUT /api/v2/vpc/{id}`.
pub(crate) fn update_vpc(db: &mut Db, id: u64, b: &Obj, now: u64) -> Result<Value, ApiError> {
    let mut v = db
        .vpcs
        .get(&id)
        .cloned()
        .ok_or_else(|| not_found("vpc", id))?;
    if body::has(b, "name") {
        v.name = body::req_str(b, "name")?.trim().to_owned();
        unique_vpc_name(db, &v.name, Some(id))?;
    }
    if let Some(t) = body::opt_ref(b, "adminTenant")? {
        if !db.tenants.contains_key(&t) {
            return Err(ApiError::bad_request(
                "adminTenant",
                format!("tenant {t} does not exist"),
            ));
        }
        v.admin_tenant = t;
    }
    if let Some(g) = read_vpc_tenants(db, b)? {
        v.guest_tenants = g;
    }
    if let Some(tags) = body::opt_strings(b, "tags")? {
        v.tags = tags;
    }
    v.modified_ms = now;
    db.vpcs.insert(id, v);
    Ok(json!({"id": id}))
}

/// `DELETE /api/v2/vpc/{id}`: not the default VPC, and only a VPC nothing uses.
pub(crate) fn delete_vpc(db: &mut Db, id: u64) -> Result<Value, ApiError> {
    if !db.vpcs.contains_key(&id) {
        return Err(not_found("vpc", id));
    }
    if id == DEFAULT_VPC_ID {
        return Err(ApiError::bad_request(
            "id",
            "the default vpc cannot be deleted",
        ));
    }
    let user = db
        .vnets
        .values()
        .find(|v| v.vpc == id)
        .map(|v| format!("vnet '{}'", v.name))
        .or_else(|| {
            db.allocations
                .values()
                .find(|a| a.vpc == id)
                .map(|a| format!("allocation {}", a.prefix))
        })
        .or_else(|| {
            db.subnets
                .values()
                .find(|s| s.vpc == id)
                .map(|s| format!("subnet {}", s.prefix))
        });
    if let Some(user) = user {
        return Err(ApiError::bad_request(
            "id",
            format!("vpc {id} is in use by {user}"),
        ));
    }
    db.vpcs.remove(&id);
    Ok(json!({"id": id}))
}

// --- inventory (read-only) ---------------------------------------------------------

/// `GET /api/v2/hw`: switches and servers, in id order.
pub(crate) fn list_hw(db: &Db) -> Value {
    let mut all: Vec<(u64, Value)> = db
        .switches
        .values()
        .map(|s| (s.id, wire::switch(db, s)))
        .chain(db.servers.values().map(|s| (s.id, wire::server(db, s))))
        .collect();
    all.sort_by_key(|(id, _)| *id);
    Value::Array(all.into_iter().map(|(_, v)| v).collect())
}

/// `GET /api/v2/hw/switch`.
pub(crate) fn list_switches(db: &Db) -> Value {
    Value::Array(db.switches.values().map(|s| wire::switch(db, s)).collect())
}

/// `GET /api/v2/hw/switch/{id}`.
pub(crate) fn get_switch(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.switches
        .get(&id)
        .map(|s| wire::switch(db, s))
        .ok_or_else(|| not_found("switch", id))
}

/// `GET /api/v2/hw/server`.
pub(crate) fn list_servers(db: &Db) -> Value {
    Value::Array(db.servers.values().map(|s| wire::server(db, s)).collect())
}

/// `GET /api/v2/hw/server/{id}`.
pub(crate) fn get_server(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.servers
        .get(&id)
        .map(|s| wire::server(db, s))
        .ok_or_else(|| not_found("server", id))
}

/// `GET /api/v2/ports`.
pub(crate) fn list_ports(db: &Db) -> Value {
    let owners = db.port_owners();
    Value::Array(
        db.ports
            .values()
            .map(|p| wire::port(db, p, &owners))
            .collect(),
    )
}

/// `GET /api/v2/ports/{id}`.
pub(crate) fn get_port(db: &Db, id: u64) -> Result<Value, ApiError> {
    let owners = db.port_owners();
    db.ports
        .get(&id)
        .map(|p| wire::port(db, p, &owners))
        .ok_or_else(|| not_found("port", id))
}
