//! IPAM: allocations and the subnets carved from them, and the rules that tie them
//! together.
//!
//! Rules, as on a real controller:
//!
//! - Prefixes are IPv4 network addresses (`10.0.0.0/8`, not `10.0.0.1/8`).
//! - Allocations of one VPC never overlap.
//! - A subnet must sit inside an allocation of the *same* VPC, else 400
//!   `{"prefix": "IP prefix is out of any allocation"}`; subnets of one VPC never
//!   overlap.
//! - `purpose` is one of `common`, `loopback`, `management`, `load-balancer`, `nat`,
//!   `inactive` (default `common`); `tenant` is required.
//! - Deleting an allocation deletes its subnets too (cascade).
//! - A PUT that changes `vpc` is answered 200 and the change ignored.
//! - Allocation and subnet ids come from separate counters.
//!
//! Added by the emulator so that state never holds orphans: a subnet used by a V-Net
//! gateway cannot be deleted (directly or by cascade) or changed so that the gateway no
//! longer fits; the answer is a 400 naming the V-Net.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::body::{self, Obj};
use super::dispatch::ApiError;
use super::model::{Allocation, DEFAULT_VPC_ID, Db, Kind, Purpose, Subnet};
use super::prefix::Cidr;
use super::{vnet, wire};

/// Parses a prefix field that must be an IPv4 network address.
pub(crate) fn network_prefix(field: &str, s: &str) -> Result<Cidr, ApiError> {
    let cidr: Cidr = s.parse().map_err(|e| {
        ApiError::bad_request(
            field,
            format!("{field} {s:?} is not an IPv4 prefix ({e}); only IPv4 is supported"),
        )
    })?;
    if !cidr.is_network() {
        return Err(ApiError::bad_request(
            field,
            format!(
                "{cidr} is not a network address; did you mean {}?",
                cidr.network()
            ),
        ));
    }
    Ok(cidr)
}

fn tenant_exists(db: &Db, field: &str, id: u64) -> Result<u64, ApiError> {
    if db.tenants.contains_key(&id) {
        Ok(id)
    } else {
        Err(ApiError::bad_request(
            field,
            format!("tenant {id} does not exist"),
        ))
    }
}

fn vpc_exists(db: &Db, id: u64) -> Result<u64, ApiError> {
    if db.vpcs.contains_key(&id) {
        Ok(id)
    } else {
        Err(ApiError::bad_request(
            "vpc",
            format!("vpc {id} does not exist"),
        ))
    }
}

fn check_allocation_overlap(
    db: &Db,
    vpc: u64,
    prefix: Cidr,
    except: Option<u64>,
) -> Result<(), ApiError> {
    if let Some(other) = db
        .allocations
        .values()
        .find(|a| Some(a.id) != except && a.vpc == vpc && a.prefix.overlaps(&prefix))
    {
        return Err(ApiError::bad_request(
            "prefix",
            format!(
                "{prefix} overlaps allocation '{}' ({}) in the same vpc",
                other.name, other.prefix
            ),
        ));
    }
    Ok(())
}

fn check_subnet_placement(
    db: &Db,
    vpc: u64,
    prefix: Cidr,
    except: Option<u64>,
) -> Result<(), ApiError> {
    if !db
        .allocations
        .values()
        .any(|a| a.vpc == vpc && a.prefix.contains(&prefix))
    {
        return Err(ApiError::bad_request(
            "prefix",
            "IP prefix is out of any allocation",
        ));
    }
    if let Some(other) = db
        .subnets
        .values()
        .find(|s| Some(s.id) != except && s.vpc == vpc && s.prefix.overlaps(&prefix))
    {
        return Err(ApiError::bad_request(
            "prefix",
            format!(
                "{prefix} overlaps subnet '{}' ({}) in the same vpc",
                other.name, other.prefix
            ),
        ));
    }
    Ok(())
}

/// `POST /api/v2/ipam/allocation`.
pub(crate) fn create_allocation(db: &mut Db, b: &Obj, now: u64) -> Result<Value, ApiError> {
    let name = body::req_str(b, "name")?.to_owned();
    let prefix = network_prefix("prefix", body::req_str(b, "prefix")?)?;
    let tenant = tenant_exists(db, "tenant", body::req_ref(b, "tenant")?)?;
    let vpc = vpc_exists(db, body::opt_ref(b, "vpc")?.unwrap_or(DEFAULT_VPC_ID))?;
    let description = body::opt_str(b, "description")?.unwrap_or("").to_owned();
    let tags = body::opt_strings(b, "tags")?.unwrap_or_default();
    check_allocation_overlap(db, vpc, prefix, None)?;
    let id = db.next_id(Kind::Allocation);
    db.allocations.insert(
        id,
        Allocation {
            id,
            name,
            prefix,
            tenant,
            vpc,
            description,
            tags,
            created_ms: now,
            modified_ms: now,
        },
    );
    Ok(json!({"id": id}))
}

/// `PUT /api/v2/ipam/allocation/{id}`: changes what the body sets; `vpc` is ignored.
pub(crate) fn update_allocation(
    db: &mut Db,
    id: u64,
    b: &Obj,
    now: u64,
) -> Result<Value, ApiError> {
    let mut a = db
        .allocations
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("allocation {id} not found")))?;
    if body::has(b, "name") {
        a.name = body::req_str(b, "name")?.to_owned();
    }
    if let Some(t) = body::opt_ref(b, "tenant")? {
        a.tenant = tenant_exists(db, "tenant", t)?;
    }
    if let Some(d) = body::opt_str(b, "description")? {
        a.description = d.to_owned();
    }
    if let Some(tags) = body::opt_strings(b, "tags")? {
        a.tags = tags;
    }
    if let Some(p) = body::opt_str(b, "prefix")? {
        let prefix = network_prefix("prefix", p)?;
        if prefix != a.prefix {
            check_allocation_overlap(db, a.vpc, prefix, Some(id))?;
            if let Some(s) = db.subnets.values().find(|s| {
                s.vpc == a.vpc && a.prefix.contains(&s.prefix) && !prefix.contains(&s.prefix)
            }) {
                return Err(ApiError::bad_request(
                    "prefix",
                    format!(
                        "subnet '{}' ({}) would fall outside {prefix}",
                        s.name, s.prefix
                    ),
                ));
            }
            a.prefix = prefix;
        }
    }
    // `vpc` in the body is deliberately not read: the controller answers 200 and keeps
    // the allocation where it is.
    a.modified_ms = now;
    db.allocations.insert(id, a);
    Ok(json!({"id": id}))
}

/// Finds an allocation or subnet by the path's `{id|prefix}`.
fn lookup<'a, T>(
    items: impl Iterator<Item = &'a T>,
    key: &str,
    what: &str,
    id_of: fn(&T) -> u64,
    prefix_of: fn(&T) -> Cidr,
) -> Result<u64, ApiError>
where
    T: 'a,
{
    if let Ok(id) = key.parse::<u64>() {
        return Ok(id);
    }
    let prefix: Cidr = key
        .parse()
        .map_err(|_| ApiError::not_found(format!("{what} {key} not found")))?;
    let found: Vec<u64> = items
        .filter(|t| prefix_of(t) == prefix)
        .map(id_of)
        .collect();
    match found.as_slice() {
        [id] => Ok(*id),
        [] => Err(ApiError::not_found(format!("{what} {key} not found"))),
        _ => Err(ApiError::bad_request(
            "prefix",
            format!("{key} names a {what} in several vpcs; delete by id"),
        )),
    }
}

/// The V-Net whose gateway lies in `subnet`, if any.
fn gateway_user<'a>(db: &'a Db, subnet: &Subnet) -> Option<&'a super::model::Vnet> {
    db.vnets.values().find(|v| {
        v.vpc == subnet.vpc
            && v.gateways
                .iter()
                .any(|g| subnet.prefix.contains(&g.prefix.network()))
    })
}

/// `DELETE /api/v2/ipam/allocation/{id|prefix}`: deletes its subnets too.
pub(crate) fn delete_allocation(db: &mut Db, key: &str) -> Result<Value, ApiError> {
    let id = lookup(
        db.allocations.values(),
        key,
        "allocation",
        |a| a.id,
        |a| a.prefix,
    )?;
    let a = db
        .allocations
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("allocation {key} not found")))?;
    let children: Vec<u64> = db
        .subnets
        .values()
        .filter(|s| s.vpc == a.vpc && a.prefix.contains(&s.prefix))
        .map(|s| s.id)
        .collect();
    for sid in &children {
        if let Some(s) = db.subnets.get(sid)
            && let Some(v) = gateway_user(db, s)
        {
            return Err(ApiError::bad_request(
                "id",
                format!(
                    "allocation {} cannot be deleted: its subnet {} is in use by vnet '{}'",
                    a.prefix, s.prefix, v.name
                ),
            ));
        }
    }
    for sid in &children {
        db.subnets.remove(sid);
    }
    db.allocations.remove(&id);
    Ok(json!({"id": id, "deletedSubnets": children}))
}

/// `GET /api/v2/ipam/allocation/{id}`.
pub(crate) fn get_allocation(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.allocations
        .get(&id)
        .map(|a| wire::allocation(db, a))
        .ok_or_else(|| ApiError::not_found(format!("allocation {id} not found")))
}

/// `GET /api/v2/ipam/allocations`: every allocation (of the given VPCs).
pub(crate) fn list_allocations(db: &Db, vpcs: Option<&[u64]>) -> Value {
    Value::Array(
        db.allocations
            .values()
            .filter(|a| vpcs.is_none_or(|v| v.contains(&a.vpc)))
            .map(|a| wire::allocation(db, a))
            .collect(),
    )
}

fn parse_purpose(b: &Obj) -> Result<Option<Purpose>, ApiError> {
    match body::opt_str(b, "purpose")? {
        None => Ok(None),
        Some(p) => Purpose::parse(p).map(Some).ok_or_else(|| {
            let all: Vec<&str> = Purpose::ALL.iter().map(|p| p.as_str()).collect();
            ApiError::bad_request(
                "purpose",
                format!("purpose must be one of {}", all.join(", ")),
            )
        }),
    }
}

fn parse_sites(db: &Db, b: &Obj) -> Result<Option<Vec<u64>>, ApiError> {
    let Some(sites) = body::opt_refs(b, "sites")? else {
        return Ok(None);
    };
    for s in &sites {
        if !db.sites.contains_key(s) {
            return Err(ApiError::bad_request(
                "sites",
                format!("site {s} does not exist"),
            ));
        }
    }
    Ok(Some(body::dedup(sites)))
}

#[expect(
    clippy::option_option,
    reason = "no gateway given, an empty one and an address are three answers"
)]
fn parse_gateway(b: &Obj, prefix: Cidr) -> Result<Option<Option<Ipv4Addr>>, ApiError> {
    let Some(g) = body::opt_str(b, "defaultGateway")? else {
        return Ok(None);
    };
    if g.trim().is_empty() {
        return Ok(Some(None));
    }
    let ip: Ipv4Addr = g.trim().parse().map_err(|_| {
        ApiError::bad_request("defaultGateway", format!("{g:?} is not an IPv4 address"))
    })?;
    if !prefix.contains_addr(ip) {
        return Err(ApiError::bad_request(
            "defaultGateway",
            format!("default gateway {ip} is not inside {prefix}"),
        ));
    }
    Ok(Some(Some(ip)))
}

/// `POST /api/v2/ipam/subnet`.
pub(crate) fn create_subnet(db: &mut Db, b: &Obj, now: u64) -> Result<Value, ApiError> {
    let name = body::req_str(b, "name")?.to_owned();
    let prefix = network_prefix("prefix", body::req_str(b, "prefix")?)?;
    let purpose = parse_purpose(b)?.unwrap_or(Purpose::Common);
    let tenant = tenant_exists(db, "tenant", body::req_ref(b, "tenant")?)?;
    let vpc = vpc_exists(db, body::opt_ref(b, "vpc")?.unwrap_or(DEFAULT_VPC_ID))?;
    let sites = parse_sites(db, b)?.unwrap_or_default();
    let default_gateway = parse_gateway(b, prefix)?.flatten();
    let tags = body::opt_strings(b, "tags")?.unwrap_or_default();
    let global_routing = body::opt_bool(b, "globalRouting")?.unwrap_or(false);
    check_subnet_placement(db, vpc, prefix, None)?;
    let id = db.next_id(Kind::Subnet);
    db.subnets.insert(
        id,
        Subnet {
            id,
            name,
            prefix,
            purpose,
            tenant,
            vpc,
            sites,
            default_gateway,
            tags,
            global_routing,
            created_ms: now,
            modified_ms: now,
        },
    );
    Ok(json!({"id": id}))
}

/// `PUT /api/v2/ipam/subnet/{id}`: changes what the body sets; `vpc` is ignored.
pub(crate) fn update_subnet(db: &mut Db, id: u64, b: &Obj, now: u64) -> Result<Value, ApiError> {
    let mut s = db
        .subnets
        .get(&id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("subnet {id} not found")))?;
    if body::has(b, "name") {
        s.name = body::req_str(b, "name")?.to_owned();
    }
    if let Some(p) = body::opt_str(b, "prefix")? {
        let prefix = network_prefix("prefix", p)?;
        if prefix != s.prefix {
            check_subnet_placement(db, s.vpc, prefix, Some(id))?;
            s.prefix = prefix;
            if s.default_gateway.is_some_and(|g| !prefix.contains_addr(g)) {
                s.default_gateway = None;
            }
        }
    }
    if let Some(p) = parse_purpose(b)? {
        s.purpose = p;
    }
    if let Some(t) = body::opt_ref(b, "tenant")? {
        s.tenant = tenant_exists(db, "tenant", t)?;
    }
    if let Some(sites) = parse_sites(db, b)? {
        s.sites = sites;
    }
    if let Some(g) = parse_gateway(b, s.prefix)? {
        s.default_gateway = g;
    }
    if let Some(tags) = body::opt_strings(b, "tags")? {
        s.tags = tags;
    }
    if let Some(g) = body::opt_bool(b, "globalRouting")? {
        s.global_routing = g;
    }
    // `vpc` is deliberately not read (quirk: 200, ignored).
    s.modified_ms = now;
    db.subnets.insert(id, s);
    vnet::recheck_gateways(db)?;
    Ok(json!({"id": id}))
}

/// `DELETE /api/v2/ipam/subnet/{id|prefix}`.
pub(crate) fn delete_subnet(db: &mut Db, key: &str) -> Result<Value, ApiError> {
    let id = lookup(db.subnets.values(), key, "subnet", |s| s.id, |s| s.prefix)?;
    let s = db
        .subnets
        .get(&id)
        .ok_or_else(|| ApiError::not_found(format!("subnet {key} not found")))?;
    if let Some(v) = gateway_user(db, s) {
        return Err(ApiError::bad_request(
            "id",
            format!("subnet {} is in use by vnet '{}'", s.prefix, v.name),
        ));
    }
    db.subnets.remove(&id);
    Ok(json!({"id": id}))
}

/// `GET /api/v2/ipam/subnet/{id}`.
pub(crate) fn get_subnet(db: &Db, id: u64) -> Result<Value, ApiError> {
    db.subnets
        .get(&id)
        .map(|s| wire::subnet(db, s))
        .ok_or_else(|| ApiError::not_found(format!("subnet {id} not found")))
}

/// `GET /api/v2/ipam/subnets`: every subnet (of the given VPCs).
pub(crate) fn list_subnets(db: &Db, vpcs: Option<&[u64]>) -> Value {
    Value::Array(
        db.subnets
            .values()
            .filter(|s| vpcs.is_none_or(|v| v.contains(&s.vpc)))
            .map(|s| wire::subnet(db, s))
            .collect(),
    )
}

/// `GET /api/v2/ipam[?filterByVpc=1,2]`: allocations with their subnets as `children`.
/// Without the filter only the default VPC is shown (quirk of the real controller).
pub(crate) fn tree(db: &Db, vpcs: Option<&[u64]>) -> Value {
    let default = [DEFAULT_VPC_ID];
    let vpcs = vpcs.unwrap_or(&default);
    Value::Array(
        db.allocations
            .values()
            .filter(|a| vpcs.contains(&a.vpc))
            .map(|a| {
                let mut v = wire::allocation(db, a);
                let children: Vec<Value> = db
                    .subnets
                    .values()
                    .filter(|s| s.vpc == a.vpc && a.prefix.contains(&s.prefix))
                    .map(|s| wire::subnet(db, s))
                    .collect();
                if let Some(o) = v.as_object_mut() {
                    o.insert("children".into(), Value::Array(children));
                }
                v
            })
            .collect(),
    )
}
