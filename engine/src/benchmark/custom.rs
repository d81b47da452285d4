//! `custom`: any command whose last line of output is a JSON object of metrics.
//!
//! ```text
//! … whatever the command prints …
//! {"tokens_per_second": 1832.5, "loss": 2.31}
//! ```
//!
//! # Metrics
//!
//! Whatever the object holds: each key is a metric name, each value must be a number.
//! Strings, booleans, nulls and nested values are refused, so a threshold never compares
//! against something that is not a figure.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Details, Direction, MetricSpec, ParseError, Parsed, Suite, numbers::json_decimal};

/// The suite's name.
pub const NAME: &str = "custom";

/// The `custom` suite.
#[derive(Debug, Clone, Copy)]
pub struct Custom;

impl Suite for Custom {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        vec![MetricSpec::new(
            "<key>",
            "as printed",
            Direction::Unspecified,
            "Each key of the JSON object on the command's last line of output; values must \
             be numbers.",
        )]
    }

    fn parse(&self, output: &str) -> Result<Parsed, ParseError> {
        let lines: Vec<&str> = output.lines().collect();
        let Some(index) = lines.iter().rposition(|l| !l.trim().is_empty()) else {
            return Err(ParseError::whole(NAME, "the log is empty"));
        };
        let last = lines[index];
        let line_no = index + 1;
        let fault = |message: String| ParseError::at(NAME, line_no, message);
        let value: Value = serde_json::from_str(last.trim()).map_err(|e| {
            fault(format!(
                "the last line must be a JSON object of metrics: {}",
                e.to_string().split(" at line ").next().unwrap_or_default()
            ))
        })?;
        let Value::Object(object) = value else {
            return Err(fault(
                "the last line must be a JSON object of metrics".to_owned(),
            ));
        };
        let mut metrics = BTreeMap::new();
        for (key, raw) in &object {
            if key.trim().is_empty() {
                return Err(fault("a metric has an empty name".to_owned()));
            }
            let number = json_decimal(raw)
                .ok_or_else(|| fault(format!("metric `{key}` is {}, not a number", kind(raw))))?;
            metrics.insert(key.clone(), number);
        }
        Ok(Parsed {
            metrics,
            failures: Vec::new(),
            details: Details::Custom,
            versions: BTreeMap::new(),
        })
    }
}

/// What a JSON value is, without repeating it (it could be anything the command printed).
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number out of range",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
