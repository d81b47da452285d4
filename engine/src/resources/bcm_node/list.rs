//! The `gpufleet_bcm_node` list resource: the nodes some tenant holds, for `terraform query`.
//!
//! A free node is not listed: it is not yet a `gpufleet_bcm_node` of anyone, and adopting it
//! would mean claiming it, which is what a resource block's create does. A node whose wipe was
//! interrupted is listed under the tenant it is being released from, as a refresh reads it.

use std::collections::HashMap;

use super::{
    TYPE_NAME,
    read::import_skeleton,
    schema::{CATEGORY, RACK, STATUS, TENANT},
};
use crate::{
    apply::Found,
    backends::bcm::{BcmApi, BcmError, Device},
    data_sources::bcm_nodes::validate_filters,
    diag::{Diagnostic, Diagnostics},
    schema::{Attribute, Block, Schema},
    value::{Type, Value},
};

pub(super) fn list_schema() -> Schema {
    Schema::new(
        Block::new(
            "Finds the BCM nodes that a tenant holds (`extra_values.gpufleet_tenant`), so that \
             `terraform query -generate-config-out` writes an import and a resource block for \
             each. Free nodes are not listed: claim one with a resource block instead. Filters \
             combine; without any, every held node is listed.",
        )
        .attr(Attribute::optional(TENANT, Type::String).describe("Only nodes this tenant holds."))
        .attr(
            Attribute::optional(CATEGORY, Type::String)
                .describe("Only nodes in this BCM category, e.g. `dgx-b200`."),
        )
        .attr(Attribute::optional(RACK, Type::String).describe("Only nodes in this rack."))
        .attr(Attribute::optional(STATUS, Type::String).describe(
            "Only nodes with this device status, e.g. `UP` (case is ignored). Plan refuses a \
             status BCM does not report.",
        )),
    )
}

pub(super) fn validate_list(config: &Value) -> Diagnostics {
    validate_filters(config)
}

/// The held nodes matching the filters, by hostname. One listing of devices, plus the
/// categories when filtered by category and the statuses when filtered by status.
pub(super) async fn find(api: &dyn BcmApi, config: &Value) -> Result<Vec<Found>, Diagnostics> {
    find_nodes(api, config).await.map_err(|e| {
        Diagnostic::error(
            "BCM Node Listing Failed",
            format!("{TYPE_NAME}: listing the nodes: {e}."),
        )
        .into()
    })
}

async fn find_nodes(api: &dyn BcmApi, config: &Value) -> Result<Vec<Found>, BcmError> {
    let tenant = config.get(TENANT).as_str();
    let rack = config.get(RACK).as_str();
    let mut held: Vec<Device> = api
        .devices()
        .await?
        .into_iter()
        .filter(|d| d.is_compute_node())
        .filter(|d| {
            let holder = d.tenant().or(d.releasing());
            holder.is_some() && tenant.is_none_or(|t| holder == Some(t))
        })
        .filter(|d| rack.is_none_or(|r| d.rack() == Some(r)))
        .collect();
    if let Some(name) = config.get(CATEGORY).as_str() {
        let wanted = api.category_named(name).await?.map(|c| c.uuid);
        held.retain(|d| wanted.is_some() && d.category == wanted);
    }
    if let Some(status) = config.get(STATUS).as_str()
        && !held.is_empty()
    {
        let uuids: Vec<String> = held.iter().map(|d| d.uuid.clone()).collect();
        let statuses: HashMap<String, String> = api
            .statuses(&uuids)
            .await?
            .into_iter()
            .map(|s| (s.uuid, s.status))
            .collect();
        held.retain(|d| {
            statuses
                .get(&d.uuid)
                .is_some_and(|s| s.eq_ignore_ascii_case(status))
        });
    }
    held.sort_by(|a, b| a.hostname.cmp(&b.hostname));
    let mut found = Vec::with_capacity(held.len());
    for d in held {
        let Ok(skeleton) = import_skeleton(&d.hostname) else {
            // A hostname no import could name (empty, with spaces) cannot be adopted.
            continue;
        };
        let holder = d.tenant().or(d.releasing()).unwrap_or_default();
        found.push(Found {
            display_name: format!("{} (tenant {holder})", d.hostname),
            skeleton,
        });
    }
    Ok(found)
}
