//! A string must name a host: a DNS name (a DNS-1123 subdomain, as Kubernetes spells them)
//! or an IP address, as it may appear in a URL and in a certificate's subject alternative
//! names.

use std::net::IpAddr;

use super::DnsSubdomain;
use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// Accepts `vc.example.com`, `203.0.113.10` or `fd00::10`; refuses ports, schemes, paths,
/// wildcards and upper case.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostAddress;

impl Validator for HostAddress {
    fn description(&self) -> String {
        "A DNS name (lowercase letters, digits, `-` and `.`, at most 253 characters) or an IPv4 \
         or IPv6 address, without a scheme or port."
            .to_owned()
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if s.parse::<IpAddr>().is_ok() {
            return;
        }
        if let Some(problem) = DnsSubdomain::problem(s) {
            diags.error_at(
                path.clone(),
                "Invalid Host",
                format!(
                    "{path} is {s:?}, which is neither an IP address nor a DNS name: it {problem}. \
                     Give only the host, such as \"vc.example.com\" or \"203.0.113.10\", \
                     without `https://` or a port."
                ),
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
            ("vc.example.com", true),
            ("localhost", true),
            ("203.0.113.10", true),
            ("fd00::10", true),
            ("", false),
            ("VC.example.com", false),
            ("https://vc.example.com", false),
            ("vc.example.com:6443", false),
            ("*.example.com", false),
            ("vc_example", false),
            ("[fd00::10]", false),
        ] {
            let mut d = Diagnostics::new();
            HostAddress.validate(&AttrPath::attr("host"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
    }
}
