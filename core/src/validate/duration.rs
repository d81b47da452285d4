//! A string must be a positive duration such as `"10m"`, `"90s"` or `"1h30m"`.

use std::time::Duration;

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// Accepts durations in the `humantime` syntax that Terraform users write for timeouts: a
/// number and a unit (`ms`, `s`, `m`, `h`, `d`), repeated (`"1h30m"`); zero is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct PositiveDuration;

impl PositiveDuration {
    /// A validator for positive durations.
    pub fn new() -> PositiveDuration {
        PositiveDuration
    }

    /// Parses `s`, or says in a sentence fragment what is wrong with it.
    pub fn parse(s: &str) -> Result<Duration, String> {
        match humantime::parse_duration(s.trim()) {
            Ok(d) if d.is_zero() => Err("must be longer than zero".to_owned()),
            Ok(d) => Ok(d),
            Err(e) => Err(format!(
                "is not a duration ({e}); write a number and a unit, such as \"90s\", \"10m\" \
                 or \"1h30m\""
            )),
        }
    }
}

impl Validator for PositiveDuration {
    fn description(&self) -> String {
        "A duration such as `\"90s\"`, `\"10m\"` or `\"1h30m\"`.".to_owned()
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if let Err(problem) = PositiveDuration::parse(s) {
            diags.error_at(
                path.clone(),
                "Invalid Duration",
                format!("{path} is {s:?}; it {problem}."),
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
            ("10m", true),
            ("90s", true),
            ("1h30m", true),
            (" 2h ", true),
            ("0s", false),
            ("", false),
            ("10", false),
            ("ten minutes", false),
            ("-5m", false),
        ] {
            let mut d = Diagnostics::new();
            PositiveDuration.validate(&AttrPath::attr("create"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}: {d:?}");
        }
    }

    #[test]
    fn parses_compound_durations() {
        assert_eq!(
            PositiveDuration::parse("1h30m"),
            Ok(Duration::from_secs(5400))
        );
    }
}
