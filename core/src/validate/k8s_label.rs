//! Kubernetes label keys and values, as the API server accepts them: one validator for every
//! attribute that ends up as a label (or a taint, whose key and value follow the same rules).

use crate::{diag::Diagnostics, path::AttrPath, value::Value};

/// What a label key may be, for messages.
pub const KEY_FORM: &str = "[prefix/]name: name at most 63 letters, digits, '-', '_' and '.', \
                            starting and ending with a letter or digit; prefix a DNS subdomain";

/// What a label value may be, for messages.
pub const VALUE_FORM: &str = "empty, or at most 63 letters, digits, '-', '_' and '.', starting \
                              and ending with a letter or digit";

/// Whether `v` is a label value.
pub fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// Whether `k` is a label key (`[prefix/]name`).
pub fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    prefix_ok && !name.is_empty() && valid_value(name)
}

/// Refuses a key that is not a label key, on `path`.
pub fn check_key(path: &AttrPath, key: &str, d: &mut Diagnostics) {
    if !valid_key(key) {
        d.error_at(
            path.clone(),
            "Invalid Label Key",
            format!("{path}: {key:?} is not a Kubernetes label key; accepted: {KEY_FORM}."),
        );
    }
}

/// Refuses a known string that is not a label value, on `path`.
pub fn check_value(path: &AttrPath, value: &Value, d: &mut Diagnostics) {
    if let Some(v) = value.as_str()
        && !valid_value(v)
    {
        d.error_at(
            path.clone(),
            "Invalid Label Value",
            format!("{path}: {v:?} is not a Kubernetes label value; accepted: {VALUE_FORM}."),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values() {
        for (key, ok) in [
            ("team", true),
            ("example.com/team", true),
            ("a/b/c", false),
            ("Example.com/team", false),
            ("-team", false),
            ("team-", false),
            ("", false),
            ("example.com/", false),
            ("x".repeat(64).as_str(), false),
            ("has space", false),
        ] {
            assert_eq!(valid_key(key), ok, "{key:?}");
        }
        for (value, ok) in [
            ("", true),
            ("ml-research", true),
            ("-x", false),
            ("a b", false),
        ] {
            assert_eq!(valid_value(value), ok, "{value:?}");
        }
    }
}
