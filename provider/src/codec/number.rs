//! Numbers, shared by both value codecs: parsing and rendering them as go-cty does, and
//! converting them to the integers and floats msgpack carries.

use bigdecimal::{
    BigDecimal, ToPrimitive, Zero,
    num_bigint::{BigInt, Sign},
};

/// The largest decimal exponent (in either direction) and the most significant digits a
/// decoded number may have. go-cty keeps 512-bit mantissas (about 155 digits), and the
/// smallest float64 needs 1074 decimal places, so these leave room for every real number
/// while keeping `1e999999999` from turning into a billion-digit string later.
pub(crate) const MAX_NUMBER_EXPONENT: i64 = 10_000;
/// See [`MAX_NUMBER_EXPONENT`].
pub(crate) const MAX_NUMBER_DIGITS: usize = 10_000;

/// Parses a decimal number the way go-cty's `ParseNumberVal` accepts it (`[+-]digits[.digits]`
/// with an optional `e` exponent), exactly, within the size limits above.
///
/// Infinities, NaN and go's binary `p` exponents are rejected: a [`BigDecimal`] cannot hold
/// the first two and Terraform never writes the third.
pub(crate) fn parse_number(text: &str) -> Result<BigDecimal, String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut digits: Vec<u8> = Vec::new();
    let mut int_digits = 0usize;
    let mut frac_digits = 0usize;
    while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
        digits.push(b);
        int_digits += 1;
        i += 1;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
            digits.push(b);
            frac_digits += 1;
            i += 1;
        }
    }
    if int_digits + frac_digits == 0 {
        return Err(format!("{text:?} is not a number"));
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_negative = match bytes.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(&b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
            // Saturate: anything this large is rejected by the range check below anyway.
            exponent = exponent
                .saturating_mul(10)
                .saturating_add(i64::from(b - b'0'));
            i += 1;
        }
        if i == start {
            return Err(format!("{text:?} is not a number"));
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != bytes.len() {
        return Err(format!("{text:?} is not a number"));
    }

    // Normalise: drop leading zeros (they carry nothing) and trailing zeros (into the exponent).
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Ok(BigDecimal::zero());
    };
    let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(first);
    let significant = digits.get(first..=last).unwrap_or_default();
    if significant.len() > MAX_NUMBER_DIGITS {
        return Err(format!(
            "more than {MAX_NUMBER_DIGITS} significant digits are not supported"
        ));
    }
    let trailing_zeros = digits.len() - 1 - last;
    // value = significant * 10^(exponent - frac_digits + trailing_zeros)
    let exp10 = exponent
        .saturating_sub(i64::try_from(frac_digits).unwrap_or(i64::MAX))
        .saturating_add(i64::try_from(trailing_zeros).unwrap_or(i64::MAX));
    check_exponent(exp10, significant.len())?;
    let mut mantissa =
        BigInt::parse_bytes(significant, 10).ok_or_else(|| format!("{text:?} is not a number"))?;
    if negative {
        mantissa = -mantissa;
    }
    Ok(BigDecimal::new(mantissa, -exp10))
}

/// Rejects numbers whose decimal exponent is outside the supported range.
fn check_exponent(exp10: i64, digit_count: usize) -> Result<(), String> {
    let adjusted = exp10.saturating_add(i64::try_from(digit_count).unwrap_or(i64::MAX));
    if exp10 < -MAX_NUMBER_EXPONENT || adjusted > MAX_NUMBER_EXPONENT {
        return Err(format!(
            "numbers beyond 1e±{MAX_NUMBER_EXPONENT} are not supported"
        ));
    }
    Ok(())
}

/// A number as a sign-carrying mantissa without trailing zeros and a power of ten, so that
/// the value is `mantissa * 10^exp10`. Zero is `(0, 0)`.
fn decompose(n: &BigDecimal) -> (BigInt, i64) {
    let (mantissa, scale) = n.normalized().into_bigint_and_exponent();
    if mantissa.is_zero() {
        return (mantissa, 0);
    }
    (mantissa, scale.saturating_neg())
}

/// The number as an `i64`, if it is an integer in range.
pub(crate) fn number_to_i64(n: &BigDecimal) -> Option<i64> {
    let (mantissa, exp10) = decompose(n);
    if exp10 < 0 {
        return None;
    }
    if exp10 > 18 {
        // Any non-zero mantissa times 10^19 is out of range; zero was normalised to exp 0.
        return None;
    }
    let scaled = mantissa * BigInt::from(10u64.pow(u32::try_from(exp10).ok()?));
    scaled.to_i64()
}

/// The number as an `f64`, if that `f64` is exactly the same number.
pub(crate) fn number_to_exact_f64(n: &BigDecimal) -> Option<f64> {
    let (mantissa, exp10) = decompose(n);
    if mantissa.is_zero() {
        return Some(0.0);
    }
    let digits = i64::try_from(mantissa.magnitude().to_string().len()).ok()?;
    let adjusted = exp10.saturating_add(digits);
    // Outside float64's range (about 4.9e-324 ..= 1.8e308) no value can match.
    if !(-330..=310).contains(&adjusted) {
        return None;
    }
    // Rust's float parser rounds correctly, so this is the nearest f64; keep it only if it is
    // the very same number, not merely the shortest representation that rounds to it.
    let f: f64 = format!("{mantissa}e{exp10}").parse().ok()?;
    if !f.is_finite() {
        return None;
    }
    (exact_f64(f)? == *n).then_some(f)
}

/// The exact decimal value of a finite `f64` (every binary fraction is a finite decimal).
pub(crate) fn exact_f64(f: f64) -> Option<BigDecimal> {
    if !f.is_finite() {
        return None;
    }
    if f == 0.0 {
        return Some(BigDecimal::zero());
    }
    let bits = f.to_bits();
    let negative = bits >> 63 == 1;
    let biased = i64::try_from((bits >> 52) & 0x7ff).ok()?;
    let fraction = bits & ((1u64 << 52) - 1);
    // value = mantissa * 2^exp2
    let (mantissa, exp2) = if biased == 0 {
        (fraction, -1074i64)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    let sign = if negative { Sign::Minus } else { Sign::Plus };
    let m = BigInt::from_biguint(sign, mantissa.into());
    if exp2 >= 0 {
        Some(BigDecimal::new(m << usize::try_from(exp2).ok()?, 0))
    } else {
        // m / 2^k == m * 5^k / 10^k
        let k = u32::try_from(-exp2).ok()?;
        Some(BigDecimal::new(m * BigInt::from(5u8).pow(k), i64::from(k)))
    }
}

/// Renders a number as go-cty does (`big.Float.Text('f', -1)`): plain decimal notation with no
/// exponent and no trailing fractional zeros. Numbers too long for that (only ever built
/// in-process, never decoded) use `e` notation, which go-cty and JSON read just as well.
pub(crate) fn format_number(n: &BigDecimal) -> String {
    let (mantissa, exp10) = decompose(n);
    let negative = mantissa.sign() == Sign::Minus;
    let digits = mantissa.magnitude().to_string();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if exp10.unsigned_abs() > MAX_NUMBER_EXPONENT.unsigned_abs() * 2 {
        let (head, tail) = digits.split_at(1);
        out.push_str(head);
        if !tail.is_empty() {
            out.push('.');
            out.push_str(tail);
        }
        out.push('e');
        out.push_str(&exp10.saturating_add(len - 1).to_string());
        return out;
    }
    if exp10 >= 0 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n(
            '0',
            usize::try_from(exp10).unwrap_or(0),
        ));
    } else {
        let frac = usize::try_from(-exp10).unwrap_or(0);
        if digits.len() > frac {
            let (int_part, frac_part) = digits.split_at(digits.len() - frac);
            out.push_str(int_part);
            out.push('.');
            out.push_str(frac_part);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', frac - digits.len()));
            out.push_str(&digits);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> BigDecimal {
        parse_number(s).expect("number")
    }

    #[test]
    fn parses_go_number_syntax() {
        assert_eq!(num("1.50"), num("1.5"));
        assert_eq!(num("-0.8e1"), BigDecimal::from(-8));
        assert_eq!(num(".5"), num("0.5"));
        assert_eq!(num("5."), BigDecimal::from(5));
        assert_eq!(num("+7"), BigDecimal::from(7));
        assert_eq!(num("0e999999999999999999999"), BigDecimal::zero());
        for bad in [
            "", "-", ".", "e5", "1e", "1e+", "Inf", "NaN", "1_000", " 1", "1 ", "0x10",
        ] {
            assert!(parse_number(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse_number("1e999999999").is_err());
        assert!(parse_number("1e-999999999").is_err());
    }

    #[test]
    fn formats_like_go_text_f() {
        for (input, want) in [
            ("0", "0"),
            ("1.50", "1.5"),
            ("-0.001", "-0.001"),
            ("1e30", "1000000000000000000000000000000"),
            ("123.456", "123.456"),
            ("-1200", "-1200"),
        ] {
            assert_eq!(format_number(&num(input)), want);
        }
        let tiny = BigDecimal::new(BigInt::from(15), 30_000);
        assert_eq!(format_number(&tiny), "1.5e-29999");
    }

    #[test]
    fn exact_floats() {
        assert_eq!(number_to_exact_f64(&num("0.5")), Some(0.5));
        assert_eq!(number_to_exact_f64(&num("0.1")), None);
        assert_eq!(number_to_exact_f64(&num("1e300")), None);
        let max = exact_f64(f64::MAX).expect("finite");
        assert_eq!(number_to_exact_f64(&max), Some(f64::MAX));
        let tiny = exact_f64(f64::from_bits(1)).expect("finite");
        assert_eq!(number_to_exact_f64(&tiny), Some(f64::from_bits(1)));
        assert_eq!(number_to_i64(&num("9223372036854775807")), Some(i64::MAX));
        assert_eq!(number_to_i64(&num("9223372036854775808")), None);
        assert_eq!(number_to_i64(&num("1.5")), None);
        assert_eq!(number_to_i64(&num("12e2")), Some(1200));
    }
}
