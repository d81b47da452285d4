//! A name must be a DNS-1123 label: Kubernetes, BCM and Netris all accept those.

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// Lowercase letters, digits and `-`, starting with a letter, ending with a letter or digit,
/// at most `max_len` characters.
#[derive(Debug, Clone, Copy)]
pub struct DnsLabel {
    max_len: usize,
}

impl DnsLabel {
    /// At most `max_len` characters (63 is the DNS limit; derived names need less).
    pub fn new(max_len: usize) -> DnsLabel {
        DnsLabel { max_len }
    }

    fn problem(&self, s: &str) -> Option<String> {
        if s.is_empty() {
            return Some("must not be empty".to_owned());
        }
        if s.len() > self.max_len {
            return Some(format!(
                "is {} characters long; the limit is {}",
                s.len(),
                self.max_len
            ));
        }
        if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Some("must start with a lowercase letter".to_owned());
        }
        if !s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            return Some("must end with a lowercase letter or digit".to_owned());
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Some(format!(
                "contains {c:?}; only lowercase letters, digits and '-' are allowed"
            ));
        }
        None
    }
}

impl Validator for DnsLabel {
    fn description(&self) -> String {
        format!(
            "Lowercase letters, digits and `-`, starting with a letter, at most {} characters.",
            self.max_len
        )
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if let Some(problem) = self.problem(s) {
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
        let v = DnsLabel::new(10);
        for (input, ok) in [
            ("tenant-a", true),
            ("a1", true),
            ("", false),
            ("1abc", false),
            ("abc-", false),
            ("Tenant", false),
            ("ten_ant", false),
            ("abcdefghijk", false),
        ] {
            let mut d = Diagnostics::new();
            v.validate(&AttrPath::attr("name"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
    }
}
