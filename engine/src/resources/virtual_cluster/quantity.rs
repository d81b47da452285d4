//! Kubernetes resource quantities (`500m`, `64Gi`, `1.5`), parsed to exact decimals so that
//! a quota the API server stores in canonical form (`1Gi` for `1024Mi`) is not drift.

use bigdecimal::BigDecimal;

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// The value of a quantity string, or why it is not one. Only non-negative quantities are
/// accepted: quotas and limits cannot be negative.
pub fn parse(s: &str) -> Result<BigDecimal, String> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(digits_end);
    let number = number.strip_prefix('+').unwrap_or(number);
    let valid_number = !number.is_empty()
        && number.chars().filter(|c| *c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit())
        && number.chars().all(|c| c.is_ascii_digit() || c == '.');
    if !valid_number {
        return Err(format!(
            "{s:?} is not a quantity: it must start with a non-negative number, such as \
             \"500m\", \"4\" or \"64Gi\""
        ));
    }
    let base: BigDecimal = number
        .parse()
        .map_err(|_| format!("{s:?} is not a quantity"))?;
    let factor = multiplier(suffix).ok_or_else(|| {
        format!(
            "{s:?} has the unknown suffix {suffix:?}; use one of Ki, Mi, Gi, Ti, Pi, Ei, n, u, \
             m, k, M, G, T, P, E or an exponent such as e3"
        )
    })?;
    Ok(base * factor)
}

fn multiplier(suffix: &str) -> Option<BigDecimal> {
    let binary = |p: u32| BigDecimal::from(1024u64.pow(p));
    let decimal = |e: i64| BigDecimal::new(1.into(), -e);
    Some(match suffix {
        "" => BigDecimal::from(1),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        exp => {
            let e = exp.strip_prefix(['e', 'E'])?;
            let e: i64 = e.parse().ok()?;
            if !(-30..=30).contains(&e) {
                return None;
            }
            decimal(e)
        }
    })
}

/// Whether two quantity strings mean the same amount.
pub fn same(a: &str, b: &str) -> bool {
    matches!((parse(a), parse(b)), (Ok(x), Ok(y)) if x == y)
}

/// A string attribute must be a non-negative Kubernetes quantity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quantity;

impl Validator for Quantity {
    fn description(&self) -> String {
        "A Kubernetes quantity, such as `\"500m\"`, `\"8\"` or `\"64Gi\"`.".to_owned()
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        if let Err(why) = parse(s) {
            diags.error_at(path.clone(), "Invalid Quantity", format!("{path}: {why}."));
        }
    }
}

/// A string attribute must be a Kubernetes quantity greater than zero (a volume's size).
#[derive(Debug, Clone, Copy, Default)]
pub struct PositiveQuantity;

impl Validator for PositiveQuantity {
    fn description(&self) -> String {
        "A Kubernetes quantity greater than zero, such as `\"5Gi\"` or `\"500M\"`.".to_owned()
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(s) = value.as_str() else { return };
        // `parse` takes no negative amounts, so anything but zero is more.
        let why = match parse(s) {
            Ok(n) if !bigdecimal::Zero::is_zero(&n) => return,
            Ok(_) => format!("{s:?} is zero; it must be more"),
            Err(why) => why,
        };
        diags.error_at(path.clone(), "Invalid Quantity", format!("{path}: {why}."));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        for (input, ok) in [
            ("500m", true),
            ("4", true),
            ("1.5", true),
            ("64Gi", true),
            ("1e3", true),
            ("+2", true),
            ("", false),
            ("-1", false),
            ("Gi", false),
            ("4 cores", false),
            ("1.2.3", false),
            ("64GB", false),
        ] {
            assert_eq!(parse(input).is_ok(), ok, "{input:?}");
        }
    }

    #[test]
    fn sizes_must_be_more_than_zero() {
        for (input, ok) in [
            ("5Gi", true),
            ("1", true),
            ("0", false),
            ("0Gi", false),
            ("5GB", false),
        ] {
            let mut d = Diagnostics::new();
            PositiveQuantity.validate(&AttrPath::attr("size"), &Value::string(input), &mut d);
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
    }

    #[test]
    fn canonical_forms_are_the_same_amount() {
        assert!(same("1024Mi", "1Gi"));
        assert!(same("1000m", "1"));
        assert!(same("1e3", "1k"));
        assert!(!same("1G", "1Gi"));
    }
}
