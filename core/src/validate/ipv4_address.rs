//! A string must be an IPv4 address in dotted-quad notation (`10.20.0.1`).

use std::net::Ipv4Addr;

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// Accepts IPv4 addresses such as `10.20.0.1` (no prefix length, no leading zeros).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ipv4Address;

impl Ipv4Address {
    /// A validator for IPv4 addresses.
    pub fn new() -> Ipv4Address {
        Ipv4Address
    }
}

impl Validator for Ipv4Address {
    fn description(&self) -> String {
        "An IPv4 address, such as `10.20.0.1`.".to_owned()
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if s.parse::<Ipv4Addr>().is_err() {
            diags.error_at(
                path.clone(),
                "Invalid IP Address",
                format!("{path} is {s:?}; it must be an IPv4 address such as \"10.20.0.1\"."),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        for (input, ok) in [
            ("10.20.0.1", true),
            ("255.255.255.255", true),
            ("10.20.0.1/24", false),
            ("10.20.0", false),
            ("010.20.0.1", false),
            ("fd00::1", false),
            ("", false),
        ] {
            let mut d = Diagnostics::new();
            Ipv4Address.validate(&AttrPath::attr("gateway"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
    }
}
