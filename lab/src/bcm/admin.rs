//! The admin plane under `/_admin/`: health, reset, a state dump, leaks, the journal,
//! call counts and fault injection. A pure function like the API; answers are plain
//! JSON, errors `{"error": "…"}` with 400 or 404. It needs no client certificate
//! (the lab binds loopback only) and the `down` fault does not affect it.
//!
//! | call | what it does |
//! |---|---|
//! | `GET /_admin/healthz` | `{"status": "ok"}` |
//! | `POST /_admin/reset` | state back to freshly seeded (same inventory); tokens, faults, journal and counts cleared |
//! | `GET /_admin/state` | `devices`, `categories`, `images`, `nodes` (uuid, hostname, status, power, closed, data_owner, disks `[{device, data_owner}]`, booting), `leaks`, `faults` |
//! | `GET /_admin/leaks` | the leaks: `[{hostname, devices, from, to, at}]` |
//! | `GET /_admin/journal` | every `/json` call: `[{at, service, call, args, profile}]`; `DELETE` clears it |
//! | `GET /_admin/stats` | `{"total": n, "calls": {"cmdevice.getDevice": n, …}}` |
//! | `GET /_admin/fault` | the faults in force |
//! | `POST /_admin/fault` | adds faults (below); answers the faults in force |
//! | `DELETE /_admin/fault` | clears every fault |
//!
//! `POST /_admin/fault` takes one object with any of:
//!
//! - `"call": "cmdevice.updateDevice"` (or `"cmdevice.*"`; none: every call) with
//!   `"errormessage": "…"` (answer HTTP 200 with it) and/or `"status": 503` (answer that
//!   status), and/or `"latency_ms": 2000` (delay the answer; the call takes effect), and
//!   optional `"count": n` (default: until cleared) and `"after": n` (let that many
//!   matching calls through first; the rule's state shows how many are still to pass).
//! - `"hostname": "gpu-rack-a1-01", "install": "installer_failed" | "installer_unreachable"`:
//!   that node's installs started from now on stop in that state (`"install": null`
//!   clears it for that node).
//! - `"down": true | false`: drop every `/json` connection without answering.

use serde::Deserialize;
use serde_json::{Value, json};

use super::dispatch::{Request, Response};
use super::model::{Db, InstallFault, str_field};
use super::store::{BcmStore, FaultRule};
use crate::emulator::Store as _;
use crate::emulator::admin::{check_count, check_status, error, healthz, no_route};

/// Handles one `/_admin/…` request.
pub fn handle(store: &BcmStore, req: &Request) -> Response {
    let path = req.path.trim_end_matches('/');
    match (req.method.as_str(), path) {
        ("GET", "/_admin/healthz") => healthz(),
        ("POST", "/_admin/reset") => {
            let inventory = store.snapshot().inventory;
            let db = Db::seeded(inventory);
            let devices = db.devices.len();
            match store.replace(db) {
                Ok(()) => Response::new(200, json!({"status": "reset", "devices": devices})),
                Err(e) => error(500, e.to_string()),
            }
        }
        ("GET", "/_admin/state") => Response::new(200, dump(store)),
        ("GET", "/_admin/leaks") => Response::new(200, json!(store.snapshot().leaks)),
        ("GET", "/_admin/journal") => Response::new(200, json!(store.journal())),
        ("DELETE", "/_admin/journal") => {
            store.clear_journal();
            Response::new(200, json!([]))
        }
        ("GET", "/_admin/stats") => {
            let calls = store.stats();
            let total: u64 = calls.values().sum();
            Response::new(200, json!({"total": total, "calls": calls}))
        }
        ("GET", "/_admin/fault") => Response::new(200, json!(store.faults())),
        ("POST", "/_admin/fault") => match add_fault(store, &req.body) {
            Ok(()) => Response::new(200, json!(store.faults())),
            Err(e) => error(400, e),
        },
        ("DELETE", "/_admin/fault") => {
            store.update_faults(&mut |f| *f = Default::default());
            Response::new(200, json!(store.faults()))
        }
        _ => no_route(&req.method, &req.path),
    }
}

fn add_fault(store: &BcmStore, bytes: &[u8]) -> Result<(), String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct FaultRequest {
        call: Option<String>,
        status: Option<u16>,
        errormessage: Option<String>,
        latency_ms: Option<u64>,
        count: Option<u32>,
        after: Option<u32>,
        hostname: Option<String>,
        #[serde(default, deserialize_with = "present")]
        #[expect(
            clippy::option_option,
            reason = "a missing `install`, `null` and a fault are three requests"
        )]
        install: Option<Option<InstallFault>>,
        down: Option<bool>,
    }
    /// Tells `"install": null` (clear) from a missing `install`.
    #[expect(
        clippy::option_option,
        reason = "a missing `install`, `null` and a fault are three requests"
    )]
    fn present<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<InstallFault>>, D::Error> {
        Option::<InstallFault>::deserialize(d).map(Some)
    }
    let f: FaultRequest =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid fault: {e}"))?;
    check_status(f.status)?;
    let is_rule = f.status.is_some() || f.errormessage.is_some() || f.latency_ms.is_some();
    if !is_rule && (f.call.is_some() || f.count.is_some() || f.after.is_some()) {
        return Err("call, count and after need errormessage, status or latency_ms".into());
    }
    check_count(f.count)?;
    if f.hostname.is_some() != f.install.is_some() {
        return Err("hostname and install go together".into());
    }
    if let Some(host) = &f.hostname {
        let known = store
            .snapshot()
            .devices
            .values()
            .any(|d| str_field(d, "hostname") == host);
        if !known {
            return Err(format!("no device with hostname {host}"));
        }
    }
    store.update_faults(&mut |faults| {
        if is_rule {
            faults.rules.push(FaultRule {
                call: f.call.clone(),
                status: f.status,
                errormessage: f.errormessage.clone(),
                latency_ms: f.latency_ms,
                remaining: f.count,
                after: f.after,
            });
        }
        if let (Some(host), Some(install)) = (&f.hostname, f.install) {
            match install {
                Some(fault) => {
                    faults.installs.insert(host.clone(), fault);
                }
                None => {
                    faults.installs.remove(host);
                }
            }
        }
        if let Some(down) = f.down {
            faults.down = down;
        }
    });
    Ok(())
}

fn dump(store: &BcmStore) -> Value {
    let db = store.snapshot();
    let nodes: Vec<Value> = db
        .nodes
        .iter()
        .map(|(uuid, n)| {
            let hostname = db
                .devices
                .get(uuid)
                .map(|d| str_field(d, "hostname"))
                .unwrap_or("");
            json!({
                "uuid": uuid,
                "hostname": hostname,
                "status": n.status,
                "power": n.power,
                "closed": n.closed,
                "data_owner": n.data_owner(),
                "disks": n.disks,
                "booting": n.boot.is_some(),
            })
        })
        .collect();
    json!({
        "revision": db.revision,
        "devices": db.devices.values().collect::<Vec<_>>(),
        "categories": db.categories.values().collect::<Vec<_>>(),
        "images": db.images.values().collect::<Vec<_>>(),
        "nodes": nodes,
        "leaks": db.leaks,
        "faults": store.faults(),
    })
}
