//! `nccl-all-reduce`: NVIDIA nccl-tests' `all_reduce_perf` (and its MPI build).
//!
//! The JSON report (`-J file`, nccl-tests 2.17.4 and later, printed into the log with `cat`)
//! is preferred; without it, or when it is cut short, the text table on stdout is read.
//!
//! Whatever the source, the log's header gives every rank's host, device, bus id and GPU
//! ([`NcclDetails::ranks`]) and the versions ([`Parsed::versions`]): `nccl_tests_version`
//! from `# nccl-tests version …`, and `nccl_version` from NCCL's own `NCCL version …` line
//! (printed with `NCCL_DEBUG=VERSION` or `INFO`), else decoded from `nccl-library=<code>`.
//!
//! # Metrics
//!
//! | name | unit | better | meaning |
//! |---|---|---|---|
//! | `largest_size_bus_bandwidth` | GB/s | higher | bus bandwidth at the largest message size of the sweep, the lower of out-of-place and in-place |
//! | `average_bus_bandwidth` | GB/s | higher | nccl-tests' `Avg bus bandwidth`: the mean over **every size swept**, in-place and out-of-place |
//! | `wrong_count` | count | lower | wrong elements over all rows (absent when validation is off, `-c 0`) |
//! | `out_of_bounds_count` | count | lower | nccl-tests' `Out of bounds values` |
//!
//! `average_bus_bandwidth` depends on the sweep (`-b`, `-e`, `-f`): small messages are
//! latency-bound, so an 8 B–8 GB sweep on 8×H100 averages near 160 GB/s while large messages
//! reach 480 GB/s. A threshold on it only means something with the sweep pinned; a threshold
//! on `largest_size_bus_bandwidth` with a fixed `-e` is the robust choice.

mod header;
mod json;
mod table;

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;
use serde::Serialize;

use super::{Details, Direction, MetricSpec, ParseError, Parsed, Suite, json_block};

pub use header::RankInfo;

/// The suite's name.
pub const NAME: &str = "nccl-all-reduce";

/// The `nccl-all-reduce` suite.
#[derive(Debug, Clone, Copy)]
pub struct NcclAllReduce;

impl Suite for NcclAllReduce {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::new(
                "largest_size_bus_bandwidth",
                "GB/s",
                Direction::HigherIsBetter,
                "Bus bandwidth at the largest message size swept (the lower of the \
                 out-of-place and in-place runs). Independent of the rest of the sweep.",
            ),
            MetricSpec::new(
                "average_bus_bandwidth",
                "GB/s",
                Direction::HigherIsBetter,
                "nccl-tests' `Avg bus bandwidth`: the mean bus bandwidth over every message \
                 size swept, in-place and out-of-place. It depends on the sweep (`-b`, `-e`, \
                 `-f`), so pin the sweep before setting a threshold on it.",
            ),
            MetricSpec::new(
                "wrong_count",
                "count",
                Direction::LowerIsBetter,
                "Elements with wrong values over all rows; absent when validation is off \
                 (`-c 0`).",
            ),
            MetricSpec::new(
                "out_of_bounds_count",
                "count",
                Direction::LowerIsBetter,
                "nccl-tests' `Out of bounds values`.",
            ),
        ]
    }

    fn parse(&self, output: &str) -> Result<Parsed, ParseError> {
        let report = match json_block::find(output, |v| v.get("results").is_some()) {
            json_block::Found::Document { line, value } => json::read(&value, line)?,
            json_block::Found::Absent => table::read(output)?,
            json_block::Found::Broken { line, message } => match table::read(output) {
                Ok(report) => {
                    tracing::warn!(line, %message, "nccl-tests JSON report unreadable, using the text table");
                    report
                }
                Err(_) => return Err(ParseError::at(NAME, line, message)),
            },
        };
        summarise(report, header::read(output))
    }
}

/// Where the numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The `-J` JSON report.
    Json,
    /// The text table on stdout.
    Table,
}

/// One half of a row: the out-of-place or the in-place run of one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// Time per operation, in microseconds.
    pub time_us: BigDecimal,
    /// Algorithm bandwidth, GB/s.
    pub alg_bandwidth: BigDecimal,
    /// Bus bandwidth, GB/s.
    pub bus_bandwidth: BigDecimal,
    /// Wrong elements; `None` when validation is off.
    pub wrong: Option<u64>,
}

/// One row of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeResult {
    /// Message size in bytes.
    pub size_bytes: u64,
    /// Element type (`float`, `half`, …), when printed.
    pub data_type: String,
    /// The out-of-place run; absent in trace replays.
    pub out_of_place: Option<Measurement>,
    /// The in-place run.
    pub in_place: Option<Measurement>,
}

/// What both readers produce.
#[derive(Debug, Clone, PartialEq)]
struct Report {
    source: Source,
    rows: Vec<SizeResult>,
    out_of_bounds: u64,
    average_bus_bandwidth: BigDecimal,
    /// `Some(false)` when `NCCL_TESTS_MIN_BW` was set and the average fell short.
    average_okay: Option<bool>,
    errors: Vec<String>,
}

/// Details of an nccl-tests run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclDetails {
    /// JSON report or text table.
    pub source: Source,
    /// The largest message size swept, in bytes.
    pub largest_size_bytes: u64,
    /// Every row of the sweep, in order.
    pub sizes: Vec<SizeResult>,
    /// nccl-tests' own check of the average against `NCCL_TESTS_MIN_BW`: `None` when unset.
    pub min_bandwidth_check: Option<bool>,
    /// NCCL's last error, if it printed one.
    pub errors: Vec<String>,
    /// Every rank with its host, device, bus id and GPU, in the order nccl-tests listed
    /// them under `# Using devices`.
    pub ranks: Vec<RankInfo>,
}

impl NcclDetails {
    /// The distinct hosts of the ranks, in rank order.
    pub fn hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = Vec::new();
        for r in &self.ranks {
            if !hosts.contains(&r.host.as_str()) {
                hosts.push(&r.host);
            }
        }
        hosts
    }
}

fn summarise(report: Report, header: header::Header) -> Result<Parsed, ParseError> {
    let Some(largest) = report.rows.iter().map(|r| r.size_bytes).max() else {
        return Err(ParseError::whole(NAME, "the result table has no rows"));
    };
    let largest_bw = report
        .rows
        .iter()
        .filter(|r| r.size_bytes == largest)
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .flatten()
        .map(|m| &m.bus_bandwidth)
        .min()
        .cloned()
        .ok_or_else(|| {
            ParseError::whole(NAME, "the largest message size has no bandwidth figures")
        })?;
    let wrong: Vec<u64> = report
        .rows
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .flatten()
        .filter_map(|m| m.wrong)
        .collect();
    let wrong_total = wrong.iter().fold(0u64, |sum, w| sum.saturating_add(*w));

    let mut metrics = BTreeMap::new();
    metrics.insert("largest_size_bus_bandwidth".to_owned(), largest_bw);
    metrics.insert(
        "average_bus_bandwidth".to_owned(),
        report.average_bus_bandwidth,
    );
    if !wrong.is_empty() {
        metrics.insert("wrong_count".to_owned(), BigDecimal::from(wrong_total));
    }
    metrics.insert(
        "out_of_bounds_count".to_owned(),
        BigDecimal::from(report.out_of_bounds),
    );

    let mut failures = Vec::new();
    if wrong_total > 0 {
        failures.push(format!("{wrong_total} wrong elements in the results"));
    }
    if report.out_of_bounds > 0 {
        failures.push(format!(
            "{} out-of-bounds values in the results",
            report.out_of_bounds
        ));
    }
    if report.average_okay == Some(false) {
        failures.push("average bus bandwidth below NCCL_TESTS_MIN_BW".to_owned());
    }

    Ok(Parsed {
        metrics,
        failures,
        details: Details::NcclAllReduce(NcclDetails {
            source: report.source,
            largest_size_bytes: largest,
            sizes: report.rows,
            min_bandwidth_check: report.average_okay,
            errors: report.errors,
            ranks: header.ranks,
        }),
        versions: header.versions,
    })
}
