//! Validation of a `gpufleet_bcm_node` configuration beyond what the schema checks.

use crate::{diag::Diagnostics, path::AttrPath, value::Value};

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
    d
}
