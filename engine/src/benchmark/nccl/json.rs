//! The `-J` JSON report: `results[]` rows with `out_of_place`/`in_place` objects
//! (`time` or `cpu_time`, `alg_bw`, `bus_bw`, `nwrong`), then `out_of_bounds` and
//! `average_bus_bandwidth` objects whose `okay` is written as a string (`"true"`, `"false"`,
//! `"unchecked"`).

use serde_json::Value;

use super::{Measurement, NAME, Report, SizeResult, Source};
use crate::benchmark::{
    ParseError,
    numbers::{count, json_decimal, json_decimal_lenient},
};

/// Reads the report that starts on `line` of the log.
pub(super) fn read(doc: &Value, line: usize) -> Result<Report, ParseError> {
    let fault = |message: String| ParseError::at(NAME, line, message);
    let rows = doc
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| fault("`results` is not a list".into()))?;
    let rows = rows
        .iter()
        .enumerate()
        .map(|(i, row)| read_row(row, i).map_err(&fault))
        .collect::<Result<Vec<_>, _>>()?;

    let out_of_bounds = doc
        .pointer("/out_of_bounds/count")
        .and_then(json_decimal)
        .as_ref()
        .and_then(count)
        .ok_or_else(|| fault("`out_of_bounds.count` is missing or not a count".into()))?;
    let average = doc
        .pointer("/average_bus_bandwidth/bandwidth")
        .and_then(json_decimal)
        .ok_or_else(|| {
            fault("`average_bus_bandwidth.bandwidth` is missing or not a number".into())
        })?;
    let average_okay = doc.pointer("/average_bus_bandwidth/okay").and_then(okay);
    let errors = doc
        .get("errors")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();

    Ok(Report {
        source: Source::Json,
        rows,
        out_of_bounds,
        average_bus_bandwidth: average,
        average_okay,
        errors,
    })
}

/// `"true"`/`"false"` (as nccl-tests writes booleans) or a JSON boolean; `"unchecked"` is
/// no verdict.
fn okay(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" => Some(true),
        Value::String(s) if s == "false" => Some(false),
        _ => None,
    }
}

fn read_row(row: &Value, index: usize) -> Result<SizeResult, String> {
    let size_bytes = row
        .get("size")
        .and_then(json_decimal)
        .as_ref()
        .and_then(count)
        .ok_or_else(|| format!("`results[{index}].size` is missing or not a size"))?;
    let data_type = row
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let half = |key: &str| -> Result<Option<Measurement>, String> {
        match row.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(m) => read_measurement(m)
                .map(Some)
                .map_err(|field| format!("`results[{index}].{key}.{field}` is not a number")),
        }
    };
    Ok(SizeResult {
        size_bytes,
        data_type,
        out_of_place: half("out_of_place")?,
        in_place: half("in_place")?,
    })
}

/// A measurement, or the name of the field that is missing or not a number.
fn read_measurement(m: &Value) -> Result<Measurement, &'static str> {
    let time_key = if m.get("cpu_time").is_some() {
        "cpu_time"
    } else {
        "time"
    };
    let number = |key: &'static str| m.get(key).and_then(json_decimal_lenient).ok_or(key);
    let wrong = match m.get("nwrong") {
        None | Some(Value::Null) => None,
        Some(n) => Some(json_decimal(n).as_ref().and_then(count).ok_or("nwrong")?),
    };
    Ok(Measurement {
        time_us: number(time_key)?,
        alg_bandwidth: number("alg_bw")?,
        bus_bandwidth: number("bus_bw")?,
        wrong,
    })
}
