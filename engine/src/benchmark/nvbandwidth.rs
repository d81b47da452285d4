//! `nvbandwidth`: NVIDIA's copy-bandwidth matrix tool.
//!
//! Reads the `-j` JSON report (root key `nvbandwidth`, one entry per testcase with `status`
//! `Passed`, `Waived`, `Not Found` or `Error`, a `bandwidth_matrix` of strings and its `sum`).
//! Without a report, the text output is read: its `SUM <testcase> <value>` lines, and the
//! header nvbandwidth prints before the testcases (`nvbandwidth Version: v0.6`,
//! `CUDA Runtime Version: 12040`, `Driver Version: 550.54.15`, `Device 0: NVIDIA GH200 480GB
//! (00000009:01:00)`).
//!
//! # Metrics
//!
//! | name | unit | better | meaning |
//! |---|---|---|---|
//! | `<testcase>` | GB/s | higher | the testcase's `sum`: total bandwidth over its matrix, e.g. `host_to_device_memcpy_ce`, `device_to_device_memcpy_read_ce` |
//!
//! Latency testcases (`host_device_latency_sm`, `device_to_device_latency_sm`) sum
//! nanoseconds instead, and lower is better.
//!
//! Only testcases that passed have a metric; the others are in the details with their status.
//! A testcase with status `Error`, or a report-level `error`, fails the run.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{
    Details, Direction, MetricSpec, ParseError, Parsed, Suite, json_block,
    numbers::{decimal, json_decimal_lenient},
};
use bigdecimal::BigDecimal;

/// The suite's name.
pub const NAME: &str = "nvbandwidth";

/// The `nvbandwidth` suite.
#[derive(Debug, Clone, Copy)]
pub struct Nvbandwidth;

impl Suite for Nvbandwidth {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        vec![MetricSpec::new(
            "<testcase>",
            "GB/s",
            Direction::HigherIsBetter,
            "Sum of the testcase's bandwidth matrix, named after the testcase \
             (`nvbandwidth -l` lists them), e.g. `host_to_device_memcpy_ce`. Only passed \
             testcases report one.",
        )]
    }

    fn parse(&self, output: &str) -> Result<Parsed, ParseError> {
        match json_block::find(output, |v| v.get("nvbandwidth").is_some()) {
            json_block::Found::Document { line, value } => read_report(&value, line),
            json_block::Found::Broken { line, message } => Err(ParseError::at(NAME, line, message)),
            json_block::Found::Absent => read_sum_lines(output),
        }
    }
}

/// A testcase's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Testcase {
    /// The testcase's name.
    pub name: String,
    /// `Passed`, `Waived`, `Not Found`, `Error` (as nvbandwidth writes it).
    pub status: String,
    /// Sum of the bandwidth matrix, GB/s.
    pub sum: Option<BigDecimal>,
    /// What the matrix measures (`memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)`).
    pub description: Option<String>,
    /// The testcase's error message, if it failed.
    pub error: Option<String>,
}

/// Details of an nvbandwidth run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvbandwidthDetails {
    /// nvbandwidth's version.
    pub version: Option<String>,
    /// The driver version it saw.
    pub driver_version: Option<String>,
    /// The CUDA runtime version it saw (as nvbandwidth prints it, e.g. `12040`).
    pub cuda_runtime_version: Option<String>,
    /// The GPUs it listed.
    pub devices: Vec<String>,
    /// Every testcase, in run order.
    pub testcases: Vec<Testcase>,
    /// A report-level error.
    pub error: Option<String>,
    /// A report-level warning.
    pub warning: Option<String>,
}

fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn read_report(doc: &Value, line: usize) -> Result<Parsed, ParseError> {
    let root = &doc["nvbandwidth"];
    let fault = |message: String| ParseError::at(NAME, line, message);
    let testcases = match root.get("testcases") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, t)| read_testcase(t, i).map_err(&fault))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(fault("`nvbandwidth.testcases` is not a list".into())),
    };
    let details = NvbandwidthDetails {
        version: text(root.get("version")),
        driver_version: text(root.get("Driver Version")),
        cuda_runtime_version: text(root.get("CUDA Runtime Version")),
        devices: root
            .get("GPU Device list")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(|d| text(Some(d))).collect())
            .unwrap_or_default(),
        testcases,
        error: text(root.get("error")),
        warning: text(root.get("warning")),
    };
    if details.testcases.is_empty() && details.error.is_none() {
        return Err(fault("the report has no testcases".into()));
    }
    Ok(finish(details))
}

fn read_testcase(t: &Value, index: usize) -> Result<Testcase, String> {
    let name = t
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`testcases[{index}].name` is missing"))?
        .to_owned();
    let status = t
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("testcase {name}: `status` is missing"))?
        .to_owned();
    let sum = match t.get("sum") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            json_decimal_lenient(v)
                .ok_or_else(|| format!("testcase {name}: `sum` is not a number"))?,
        ),
    };
    if status == "Passed" && sum.is_none() {
        return Err(format!("testcase {name} passed but has no `sum`"));
    }
    Ok(Testcase {
        name,
        status,
        sum,
        description: text(t.get("bandwidth_description")),
        error: text(t.get("error")),
    })
}

/// Text output: the header, then `SUM <testcase> <value>` after each matrix.
fn read_sum_lines(output: &str) -> Result<Parsed, ParseError> {
    let mut details = NvbandwidthDetails {
        version: None,
        driver_version: None,
        cuda_runtime_version: None,
        devices: Vec::new(),
        testcases: Vec::new(),
        error: None,
        warning: None,
    };
    for (index, line) in output.lines().enumerate() {
        let line = line.trim();
        let mut words = line.split_whitespace();
        if words.next() == Some("SUM") {
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                return Err(ParseError::at(NAME, index + 1, "incomplete `SUM` line"));
            };
            let sum = decimal(value).ok_or_else(|| {
                ParseError::at(NAME, index + 1, format!("sum `{value}` is not a number"))
            })?;
            details.testcases.push(Testcase {
                name: name.to_owned(),
                status: "Passed".to_owned(),
                sum: Some(sum),
                description: None,
                error: None,
            });
        } else {
            read_header_line(line, &mut details);
        }
    }
    if details.testcases.is_empty() {
        return Err(ParseError::whole(
            NAME,
            "no JSON report (`-j`) and no `SUM` lines in the log",
        ));
    }
    Ok(finish(details))
}

/// One line of the text header; the first statement of each fact wins (a log of several
/// runs repeats the header).
fn read_header_line(line: &str, details: &mut NvbandwidthDetails) {
    let value = |label: &str| {
        line.strip_prefix(label)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if let Some(v) = value("nvbandwidth Version:") {
        details.version.get_or_insert(v);
    } else if let Some(v) = value("CUDA Runtime Version:") {
        details.cuda_runtime_version.get_or_insert(v);
    } else if let Some(v) = value("Driver Version:") {
        details.driver_version.get_or_insert(v);
    } else if let Some(device) = line.strip_prefix("Device ")
        && device
            .split_once(':')
            .is_some_and(|(i, _)| i.parse::<u32>().is_ok())
        && !details.devices.iter().any(|d| d == device)
    {
        details.devices.push(device.to_owned());
    }
}

fn finish(details: NvbandwidthDetails) -> Parsed {
    let mut metrics = BTreeMap::new();
    let mut failures = Vec::new();
    for t in &details.testcases {
        match (t.status.as_str(), &t.sum) {
            ("Passed", Some(sum)) => {
                metrics.insert(t.name.clone(), sum.clone());
            }
            ("Error", _) => failures.push(match &t.error {
                Some(e) => format!("testcase {} failed: {e}", t.name),
                None => format!("testcase {} failed", t.name),
            }),
            _ => {}
        }
    }
    if let Some(e) = &details.error {
        failures.push(format!("nvbandwidth reported an error: {e}"));
    }
    let versions = [
        ("nvbandwidth_version", &details.version),
        ("driver_version", &details.driver_version),
        ("cuda_runtime_version", &details.cuda_runtime_version),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v.clone()?)))
    .collect();
    Parsed {
        metrics,
        failures,
        details: Details::Nvbandwidth(details),
        versions,
    }
}
