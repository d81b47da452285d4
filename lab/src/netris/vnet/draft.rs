//! Reading a V-Net request body into a draft, before ids are checked and allocated.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::netris::body::{self, Obj};
use crate::netris::dispatch::ApiError;
use crate::netris::model::{AdminState, DEFAULT_VPC_ID, Db, Gateway, Vnet, VnetPort};
use crate::netris::prefix::Cidr;

/// What a request asks for, before ids are checked and allocated.
pub(super) struct Draft {
    pub(super) name: String,
    pub(super) tenant: u64,
    pub(super) guest_tenants: Vec<u64>,
    pub(super) sites: Vec<u64>,
    pub(super) vpc: u64,
    pub(super) state: AdminState,
    /// `Some(id)`: this id; `None`: allocate one.
    pub(super) vlan: Option<u16>,
    pub(super) vlan_auto: bool,
    pub(super) vxlan: Option<u32>,
    pub(super) vxlan_auto: bool,
    pub(super) gateways: Vec<Gateway>,
    pub(super) ports: Vec<VnetPort>,
    pub(super) tags: Vec<String>,
    pub(super) mtu: Option<u32>,
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
    pub(super) fn read(db: &Db, b: &Obj, base: Option<&Vnet>) -> Result<Self, ApiError> {
        let name = match (base, body::has(b, "name")) {
            (Some(v), false) => v.name.clone(),
            _ => body::req_str(b, "name")?.trim().to_owned(),
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
}
