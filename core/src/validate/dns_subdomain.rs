//! A name must be a DNS-1123 subdomain, as Kubernetes requires of most object names (a
//! StorageClass's, say).

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// The longest DNS-1123 subdomain.
const MAX_LEN: usize = 253;

/// Dot-separated parts of lowercase letters, digits and `-`, each starting and ending with a
/// letter or digit, at most 253 characters in all.
#[derive(Debug, Clone, Copy, Default)]
pub struct DnsSubdomain;

impl DnsSubdomain {
    /// What is wrong with `s` as a DNS-1123 subdomain, if anything.
    pub(crate) fn problem(s: &str) -> Option<String> {
        if s.is_empty() {
            return Some("must not be empty".to_owned());
        }
        if s.len() > MAX_LEN {
            return Some(format!(
                "is {} characters long; the limit is {MAX_LEN}",
                s.len()
            ));
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.')))
        {
            return Some(format!(
                "contains {c:?}; only lowercase letters, digits, '-' and '.' are allowed"
            ));
        }
        let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        if s.split('.')
            .any(|part| !part.starts_with(alphanumeric) || !part.ends_with(alphanumeric))
        {
            return Some(
                "must start and end with a letter or digit, also around each '.'".to_owned(),
            );
        }
        None
    }
}

impl Validator for DnsSubdomain {
    fn description(&self) -> String {
        "A Kubernetes object name: lowercase letters, digits, `-` and `.`, starting and ending \
         with a letter or digit, at most 253 characters."
            .to_owned()
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if let Some(problem) = DnsSubdomain::problem(s) {
            diags.error_at(
                path.clone(),
                "Invalid Name",
                format!("{path} {s:?} {problem}."),
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
            ("standard", true),
            ("fast-ssd", true),
            ("ebs.csi.aws.com", true),
            ("1st", true),
            ("", false),
            ("Fast", false),
            ("fast_ssd", false),
            ("-fast", false),
            ("fast.", false),
            ("a..b", false),
            ("a.-b", false),
        ] {
            let mut d = Diagnostics::new();
            DnsSubdomain.validate(&AttrPath::attr("c"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
        let mut d = Diagnostics::new();
        let long = "a".repeat(254);
        DnsSubdomain.validate(&AttrPath::attr("c"), &Value::string(long), &mut d);
        assert!(d.has_error());
    }
}
