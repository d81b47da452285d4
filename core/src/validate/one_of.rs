//! A string must be one of a fixed set of values.

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// Accepts only the listed strings.
#[derive(Debug, Clone)]
pub struct OneOf {
    allowed: &'static [&'static str],
}

impl OneOf {
    /// Accepts exactly `allowed`.
    pub fn new(allowed: &'static [&'static str]) -> OneOf {
        OneOf { allowed }
    }

    fn list(&self) -> String {
        self.allowed
            .iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Validator for OneOf {
    fn description(&self) -> String {
        format!("Must be one of {}.", self.list())
    }

    /// Prose that names every allowed value as code (usually while saying what each does)
    /// needs no list after it.
    fn stated_in(&self, prose: &str) -> bool {
        self.allowed
            .iter()
            .all(|a| prose.contains(&format!("`{a}`")))
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        // Only strings are judged; the type was checked by Terraform.
        let Some(s) = value.as_str() else { return };
        if !self.allowed.contains(&s) {
            diags.error_at(
                path.clone(),
                "Invalid Value",
                format!("{path} is {s:?}; it must be one of {}.", self.list()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let v = OneOf::new(&["on", "off"]);
        for (input, ok) in [("on", true), ("off", true), ("On", false), ("", false)] {
            let mut d = Diagnostics::new();
            v.validate(&AttrPath::attr("power"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
    }

    #[test]
    fn prose_naming_every_value_states_it() {
        let v = OneOf::new(&["on", "off"]);
        assert!(v.stated_in("`on`: powered. `off`: held, powered off."));
        assert!(!v.stated_in("`on` powers the node."));
        assert!(!v.stated_in("Power state."));
    }
}
