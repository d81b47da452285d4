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

mod draft;
mod settle;

use serde_json::{Value, json};

use super::body::Obj;
use super::dispatch::ApiError;
use super::model::{Db, Kind, Vnet};
use super::wire;

use self::draft::Draft;
pub(crate) use self::settle::recheck_gateways;

/// When a write happens and when its provisioning finishes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Now, epoch ms.
    pub(crate) now: u64,
    /// When provisioning of this write finishes; `None`: stuck.
    pub(crate) done: Option<u64>,
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
