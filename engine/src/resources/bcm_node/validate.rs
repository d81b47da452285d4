//! Validation of a `gpufleet_bcm_node` configuration beyond what the schema checks.

use crate::{backends::bcm::FREE_POOL, diag::Diagnostics, path::AttrPath, value::Value};

/// Names must be non-empty and without blanks; the schema's validators judge the rest.
pub(super) fn validate_node(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    for name in ["hostname", "category", "software_image", "tenant"] {
        let Some(s) = config.get(name).as_str() else {
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
    if config.get("category").as_str() == Some(FREE_POOL) {
        d.error_at(
            AttrPath::attr("category"),
            "Invalid Category",
            format!(
                "category: {FREE_POOL:?} is not a category a held node may join: it is the free \
                 pool, where released nodes go back; accepted: any other BCM category."
            ),
        );
    }
    d
}
