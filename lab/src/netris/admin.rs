//! The admin plane under `/_admin/`: health, seeding, reset, a full state dump and
//! fault injection. Like the API it is a pure function from [`Request`] to
//! [`Response`]; answers are plain JSON (no Netris envelope) and errors are
//! `{"error": "…"}` with status 400 or 404.
//!
//! It needs no login and is served on the same listener as the API (loopback only:
//! the emulator binds 127.0.0.1 by default). The `down` fault does not affect it, so a
//! test can always bring the emulator back.
//!
//! | call | what it does |
//! |---|---|
//! | `GET /_admin/healthz` | `{"status": "ok"}` |
//! | `POST /_admin/reset` | every object, counter, session and fault back to the freshly seeded state (same inventory) |
//! | `POST /_admin/seed` | like reset, with a new inventory: a [`NetrisInventory`] JSON, or `{"nodes": [["site", "rack", "hostname"], …]}` |
//! | `GET /_admin/state` | every object in its API shape, grouped by kind, plus `counters`, `sessions` and `faults` |
//! | `GET /_admin/fault` | the faults in force |
//! | `POST /_admin/fault` | adds faults (below); answers the faults in force |
//! | `DELETE /_admin/fault` | clears every fault; stuck V-Nets then finish provisioning after the usual delay |
//!
//! `POST /_admin/fault` takes one JSON object with any of:
//!
//! - `"route": "POST /api/v2/vnet"` with `"status": 503` and/or `"latency_ms": 2000`,
//!   optional `"count": 3` (default: until cleared), `"after": 5` (let that many calls
//!   of the route through first; the rule's state shows how many are still to pass) and
//!   `"message"`: the next `count` calls of the route answer that status with a Netris-shaped error envelope (the call
//!   is not carried out), and/or their answer is delayed (the call is carried out at
//!   once). Without `route`, every `/api` call. Route syntax: `"METHOD /path"` or
//!   `"/path"`; `*` or `{id}` matches one path segment, a trailing `/**` the rest.
//! - `"provisioning_stuck": true|false`: V-Nets created or updated while set never
//!   finish provisioning; `false` lets them finish after the usual delay.
//! - `"expire_sessions": true`: every session ends now; the next call answers 401.
//! - `"down": true|false`: drop every `/api` connection without an answer.

use serde::Deserialize;
use serde_json::{Value, json};

use super::dispatch::{ApiConfig, ApiError, Request, Response};
use super::inventory::NetrisInventory;
use super::model::Db;
use super::store::{FaultRule, NetrisStore};
use super::{vnet, wire};
use crate::emulator::admin::{check_count, check_status, error, healthz, no_route};

/// Handles one `/_admin/…` request.
pub fn handle(store: &dyn NetrisStore, config: &ApiConfig, req: &Request) -> Response {
    let path = req.path.trim_end_matches('/');
    match (req.method.as_str(), path) {
        ("GET", "/_admin/healthz") => healthz(),
        ("POST", "/_admin/reset") => {
            let inventory = store.snapshot().inventory;
            reseed(store, inventory, "reset")
        }
        ("POST", "/_admin/seed") => match parse_inventory(&req.body) {
            Ok(inv) => reseed(store, inv, "seeded"),
            Err(e) => error(400, e),
        },
        ("GET", "/_admin/state") => Response::new(200, dump(store)),
        ("GET", "/_admin/fault") => Response::new(200, faults_json(store)),
        ("POST", "/_admin/fault") => match add_fault(store, config, &req.body) {
            Ok(()) => Response::new(200, faults_json(store)),
            Err(e) => error(400, e),
        },
        ("DELETE", "/_admin/fault") => {
            let was_stuck = store.faults().provisioning_stuck;
            store.update_faults(&mut |f| *f = Default::default());
            if was_stuck && let Err(e) = unstick(store, config) {
                return error(500, e.message);
            }
            Response::new(200, faults_json(store))
        }
        _ => no_route(&req.method, &req.path),
    }
}

fn reseed(store: &dyn NetrisStore, inventory: NetrisInventory, what: &str) -> Response {
    if let Err(e) = inventory.validate() {
        return error(400, format!("invalid inventory: {e}"));
    }
    let db = Db::seeded(inventory, store.now_ms());
    let counts = json!({
        "status": what,
        "sites": db.sites.len(),
        "switches": db.switches.len(),
        "ports": db.ports.len(),
        "servers": db.servers.len(),
    });
    match store.replace(db) {
        Ok(()) => Response::new(200, counts),
        Err(e) => error(500, e.to_string()),
    }
}

/// A seed body: an inventory, or `{"nodes": [[site, rack, hostname], …]}`.
fn parse_inventory(bytes: &[u8]) -> Result<NetrisInventory, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Nodes {
        nodes: Vec<(String, String, String)>,
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the body is not JSON: {e}"))?;
    if value.get("nodes").is_some() {
        let nodes: Nodes =
            serde_json::from_value(value).map_err(|e| format!("invalid nodes list: {e}"))?;
        let triples: Vec<(&str, &str, &str)> = nodes
            .nodes
            .iter()
            .map(|(s, r, h)| (s.as_str(), r.as_str(), h.as_str()))
            .collect();
        return Ok(NetrisInventory::from_nodes(&triples));
    }
    serde_json::from_value(value).map_err(|e| format!("invalid inventory: {e}"))
}

fn faults_json(store: &dyn NetrisStore) -> Value {
    serde_json::to_value(store.faults()).unwrap_or(Value::Null)
}

fn unstick(store: &dyn NetrisStore, config: &ApiConfig) -> Result<Value, ApiError> {
    let now = store.now_ms();
    let delay = u64::try_from(config.provisioning_delay.as_millis()).unwrap_or(u64::MAX);
    store.transact(&mut |db, _| {
        vnet::unstick(db, now, delay);
        Ok(Value::Null)
    })
}

fn add_fault(store: &dyn NetrisStore, config: &ApiConfig, bytes: &[u8]) -> Result<(), String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct FaultRequest {
        route: Option<String>,
        status: Option<u16>,
        message: Option<String>,
        latency_ms: Option<u64>,
        count: Option<u32>,
        after: Option<u32>,
        provisioning_stuck: Option<bool>,
        expire_sessions: Option<bool>,
        down: Option<bool>,
    }
    let f: FaultRequest =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid fault: {e}"))?;
    check_status(f.status)?;
    let is_rule = f.status.is_some() || f.latency_ms.is_some();
    if !is_rule
        && (f.route.is_some() || f.count.is_some() || f.after.is_some() || f.message.is_some())
    {
        return Err("route, count, after and message need a status or latency_ms".into());
    }
    check_count(f.count)?;
    if is_rule {
        let rule = FaultRule {
            route: f.route,
            status: f.status,
            message: f.message,
            latency_ms: f.latency_ms,
            remaining: f.count,
            after: f.after,
        };
        store.update_faults(&mut |faults| faults.rules.push(rule.clone()));
    }
    if let Some(stuck) = f.provisioning_stuck {
        let was = store.faults().provisioning_stuck;
        store.update_faults(&mut |faults| faults.provisioning_stuck = stuck);
        if was && !stuck {
            unstick(store, config).map_err(|e| e.message)?;
        }
    }
    if f.expire_sessions == Some(true) {
        store.expire_sessions();
    }
    if let Some(down) = f.down {
        store.update_faults(&mut |faults| faults.down = down);
    }
    Ok(())
}

/// Every object in its API shape, grouped by kind.
fn dump(store: &dyn NetrisStore) -> Value {
    let db = store.snapshot();
    let now = store.now_ms();
    let owners = db.port_owners();
    json!({
        "counters": db.counters,
        "sites": db.sites.values().map(wire::site).collect::<Vec<_>>(),
        "tenants": db.tenants.values().map(wire::tenant).collect::<Vec<_>>(),
        "vpcs": db.vpcs.values().map(|v| wire::vpc(&db, v)).collect::<Vec<_>>(),
        "allocations": db.allocations.values().map(|a| wire::allocation(&db, a)).collect::<Vec<_>>(),
        "subnets": db.subnets.values().map(|s| wire::subnet(&db, s)).collect::<Vec<_>>(),
        "vnets": db.vnets.values().map(|v| wire::vnet(&db, v, now)).collect::<Vec<_>>(),
        "switches": db.switches.values().map(|s| wire::switch(&db, s)).collect::<Vec<_>>(),
        "servers": db.servers.values().map(|s| wire::server(&db, s)).collect::<Vec<_>>(),
        "ports": db.ports.values().map(|p| wire::port(&db, p, &owners)).collect::<Vec<_>>(),
        "sessions": store.session_count(),
        "faults": store.faults(),
    })
}
