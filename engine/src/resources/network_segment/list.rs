//! The `gpufleet_network_segment` list resource: the controller's V-Nets, for `terraform
//! query`.
//!
//! Every V-Net with an IPv4 gateway is listed, whoever made it: an import takes over a V-Net by
//! name, and its allocation and subnet when they carry the segment's names (`gf-<name>`).
//! A V-Net without a gateway is not listed, since a segment always has one.

use super::{
    TYPE_NAME,
    read::import_skeleton,
    schema::{SITE, TENANT, VPC},
};
use crate::{
    apply::Found,
    backends::netris::NetrisApi,
    diag::{Diagnostic, Diagnostics},
    schema::{Attribute, Block, Schema},
    value::{Type, Value},
};

pub(super) fn list_schema() -> Schema {
    Schema::new(
        Block::new(
            "Finds the V-Nets of the Netris controller, so that `terraform query \
             -generate-config-out` writes an import and a resource block for each, as one \
             segment with its allocation and subnet. V-Nets without a gateway are not listed. \
             Filters combine; without any, every V-Net is listed.",
        )
        .attr(
            Attribute::optional(TENANT, Type::String)
                .describe("Only V-Nets this Netris tenant owns."),
        )
        .attr(Attribute::optional(VPC, Type::String).describe("Only V-Nets in this VPC."))
        .attr(Attribute::optional(SITE, Type::String).describe("Only V-Nets at this site.")),
    )
}

/// The V-Nets matching the filters, by name: one listing of V-Nets.
pub(super) async fn find(api: &dyn NetrisApi, config: &Value) -> Result<Vec<Found>, Diagnostics> {
    let vnets = api.vnets(None).await.map_err(|e| {
        Diagnostics::from(Diagnostic::error(
            "Network Segment Listing Failed",
            format!("{TYPE_NAME}: listing the V-Nets: {e}."),
        ))
    })?;
    let named = |want: Option<&str>, have: Option<&str>| want.is_none_or(|w| have == Some(w));
    let (tenant, vpc, site) = (
        config.get(TENANT).as_str(),
        config.get(VPC).as_str(),
        config.get(SITE).as_str(),
    );
    let mut kept: Vec<_> = vnets
        .into_iter()
        .filter(|v| !v.gateways.is_empty())
        .filter(|v| named(tenant, v.tenant.as_ref().map(|t| t.name.as_str())))
        .filter(|v| named(vpc, v.vpc.as_ref().map(|t| t.name.as_str())))
        .filter(|v| site.is_none_or(|s| v.sites.iter().any(|x| x.name == s)))
        .collect();
    kept.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(kept
        .into_iter()
        .filter_map(|v| {
            let skeleton = import_skeleton(&v.name).ok()?;
            let owner = v.tenant.as_ref().map_or("no tenant", |t| t.name.as_str());
            let prefix = v.gateways.first().map_or("", |g| g.prefix.as_str());
            Some(Found {
                display_name: format!("{} (tenant {owner}, {prefix})", v.name),
                skeleton,
            })
        })
        .collect())
}
