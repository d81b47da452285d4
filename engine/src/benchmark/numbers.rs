//! Exact numbers from log text and JSON.
//!
//! Values stay exact decimals of what the tool printed. Numbers with absurd exponents are
//! refused: a mutated `1e999999999` would otherwise make later sums allocate without bound.

use bigdecimal::BigDecimal;
use serde_json::Value;

/// Largest decimal exponent (either sign) accepted; GPU metrics live far inside it.
const MAX_EXPONENT: i64 = 60;

/// Most significant digits accepted.
const MAX_DIGITS: u64 = 60;

/// Parses a decimal token such as `480.16`, `8589934592`, `1.5e3`; `None` if it is not one
/// (including `nan`, `inf`, `N/A`).
pub(crate) fn decimal(token: &str) -> Option<BigDecimal> {
    let token = token.trim();
    // BigDecimal also accepts forms no tool prints (a leading '+', '_'); keep to plain ones.
    let plain = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'e' | b'E' | b'+'));
    if !plain {
        return None;
    }
    let value: BigDecimal = token.parse().ok()?;
    let (_, scale) = value.as_bigint_and_exponent();
    (scale.abs() <= MAX_EXPONENT && value.digits() <= MAX_DIGITS).then_some(value)
}

/// A JSON number as an exact decimal (serde_json keeps the literal digits here).
pub(crate) fn json_decimal(value: &Value) -> Option<BigDecimal> {
    match value {
        Value::Number(n) => decimal(&n.to_string()),
        _ => None,
    }
}

/// A JSON number, or a string holding one (some tools quote their numbers).
pub(crate) fn json_decimal_lenient(value: &Value) -> Option<BigDecimal> {
    match value {
        Value::String(s) => decimal(s),
        other => json_decimal(other),
    }
}

/// A non-negative integer (a count, a size) from a decimal token such as `0`, `0.000000` or
/// `8589934592`.
pub(crate) fn count(value: &BigDecimal) -> Option<u64> {
    use bigdecimal::ToPrimitive;
    if value.is_integer() && value >= &BigDecimal::from(0) {
        value.to_u64()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_printed_digits() {
        assert_eq!(
            decimal("480.16").map(|d| d.to_string()),
            Some("480.16".into())
        );
        assert_eq!(decimal("nan"), None);
        assert_eq!(decimal("N/A"), None);
        assert_eq!(decimal("1e999999999"), None);
        assert_eq!(decimal(""), None);
    }

    #[test]
    fn counts_are_whole_and_non_negative() {
        let zero = decimal("0.000000").expect("decimal");
        assert_eq!(count(&zero), Some(0));
        assert_eq!(count(&decimal("-1").expect("decimal")), None);
        assert_eq!(count(&decimal("1.5").expect("decimal")), None);
    }
}
