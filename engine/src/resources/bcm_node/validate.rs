//! Validation of a `gpufleet_bcm_node` configuration beyond what the schema checks.

use super::{config::NodeConfig, schema::CATEGORY};
use crate::{backends::bcm::FREE_POOL, diag::Diagnostics, path::AttrPath, value::Value};

/// Names must be non-empty and without blanks; the schema's validators judge the rest.
pub(super) fn validate_node(config: &Value) -> Diagnostics {
    let node = NodeConfig::decode(config);
    let mut d = Diagnostics::new();
    for (name, value) in node.names() {
        let Some(s) = value.value() else {
            continue;
        };
        if s.trim().is_empty() || s.contains(char::is_whitespace) {
            d.error_at(
                AttrPath::attr(name),
                "Invalid Name",
                format!("{name} is {s:?}; it must be a non-empty name without blanks."),
            );
        }
    }
    if node.category.value().is_some_and(|c| c == FREE_POOL) {
        d.error_at(
            AttrPath::attr(CATEGORY),
            "Invalid Category",
            format!(
                "category: {FREE_POOL:?} is not a category a held node may join: it is the free \
                 pool, where released nodes go back; accepted: any other BCM category."
            ),
        );
    }
    d
}
