//! A number must be a whole number within inclusive bounds.

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// Accepts whole numbers from `min` to `max`, inclusive.
#[derive(Debug, Clone, Copy)]
pub struct IntBetween {
    min: i64,
    max: i64,
}

impl IntBetween {
    /// Accepts `min..=max`.
    pub fn new(min: i64, max: i64) -> IntBetween {
        IntBetween { min, max }
    }

    /// Accepts `min` and above.
    pub fn at_least(min: i64) -> IntBetween {
        IntBetween { min, max: i64::MAX }
    }
}

impl Validator for IntBetween {
    fn description(&self) -> String {
        if self.max == i64::MAX {
            format!("Must be a whole number of at least {}.", self.min)
        } else {
            format!("Must be a whole number from {} to {}.", self.min, self.max)
        }
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(n) = value.as_number() else { return };
        let in_range = value
            .as_i64()
            .is_some_and(|i| (self.min..=self.max).contains(&i));
        if !in_range {
            diags.error_at(
                path.clone(),
                "Value Out Of Range",
                format!("{path} is {n}; it {}", self.description().to_lowercase()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let v = IntBetween::new(1, 4094);
        for (input, ok) in [
            ("1", true),
            ("4094", true),
            ("0", false),
            ("4095", false),
            ("1.5", false),
            ("100000000000000000000000", false),
        ] {
            let mut d = Diagnostics::new();
            let n = Value::Number(input.parse().expect("number"));
            v.validate(&AttrPath::attr("vlan_id"), &n, &mut d);
            assert_eq!(!d.has_error(), ok, "{input}");
        }
    }
}
