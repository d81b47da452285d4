//! `aiperf`: NVIDIA AIPerf's aggregate export, `profile_export_aiperf.json`, printed into the
//! log (the command `cat`s it after the run).
//!
//! The export has one top-level object per metric tag, `{"unit", "avg", "p1" … "p99", "min",
//! "max", "std"}`; derived metrics (throughputs) carry only `unit` and `avg`. Unknown fields
//! and tags are ignored, so newer exports (`count`, `sum`, `run_info`) still read.
//!
//! # Metrics
//!
//! | name | unit | better |
//! |---|---|---|
//! | `time_to_first_token_{avg,min,max,p50,p90,p95,p99}` | ms | lower |
//! | `inter_token_latency_{avg,min,max,p50,p90,p95,p99}` | ms | lower |
//! | `request_latency_{avg,min,max,p50,p90,p95,p99}` | ms | lower |
//! | `output_token_throughput_per_user_{avg,min,max,p50,p90,p95,p99}` | tokens/sec/user | higher |
//! | `request_throughput` | requests/sec | higher |
//! | `output_token_throughput` | tokens/sec | higher |
//! | `error_request_count` | requests | lower |
//!
//! Token timings exist only for streaming endpoints; `request_latency` and
//! `request_throughput` are always there, except in the export of a run where every request
//! failed, which holds only `error_request_count` and `error_summary` (read as a failed run).
//! A metric whose `unit` is not the one above is refused rather than compared in the wrong
//! unit.
//!
//! Releases differ in layout: some export the metric objects at the top level, others under
//! `records` (each with its `tag` and `header`), where time to first token is tagged `ttft`.
//! Both are read.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Details, Direction, MetricSpec, ParseError, Parsed, Suite, json_block, numbers};

/// The suite's name.
pub const NAME: &str = "aiperf";

/// The `aiperf` suite.
#[derive(Debug, Clone, Copy)]
pub struct Aiperf;

/// Statistics read from per-request metrics, in the order they are documented.
const STATS: &[&str] = &["avg", "min", "max", "p50", "p90", "p95", "p99"];

/// A metric tag of the export and how it is reported.
struct Tag {
    name: &'static str,
    unit: &'static str,
    direction: Direction,
    /// Per-request distribution (one metric per statistic) or a single derived value (`avg`).
    distribution: bool,
    required: bool,
    description: &'static str,
}

const TAGS: &[Tag] = &[
    Tag {
        name: "time_to_first_token",
        unit: "ms",
        direction: Direction::LowerIsBetter,
        distribution: true,
        required: false,
        description: "Time from sending a request to its first response token (streaming only).",
    },
    Tag {
        name: "inter_token_latency",
        unit: "ms",
        direction: Direction::LowerIsBetter,
        distribution: true,
        required: false,
        description: "Mean time between output tokens of a request (streaming only).",
    },
    Tag {
        name: "request_latency",
        unit: "ms",
        direction: Direction::LowerIsBetter,
        distribution: true,
        required: true,
        description: "Time from sending a request to its last response.",
    },
    Tag {
        name: "output_token_throughput_per_user",
        unit: "tokens/sec/user",
        direction: Direction::HigherIsBetter,
        distribution: true,
        required: false,
        description: "Output tokens per second seen by one request (streaming only).",
    },
    Tag {
        name: "request_throughput",
        unit: "requests/sec",
        direction: Direction::HigherIsBetter,
        distribution: false,
        required: true,
        description: "Completed requests per second over the benchmark.",
    },
    Tag {
        name: "output_token_throughput",
        unit: "tokens/sec",
        direction: Direction::HigherIsBetter,
        distribution: false,
        required: false,
        description: "Output tokens per second over the benchmark, all requests together.",
    },
    Tag {
        name: "error_request_count",
        unit: "requests",
        direction: Direction::LowerIsBetter,
        distribution: false,
        required: false,
        description: "Requests that ended in an error.",
    },
];

/// Tags whose metrics exist only when responses stream token by token.
const STREAMING_ONLY: &[&str] = &[
    "time_to_first_token",
    "inter_token_latency",
    "output_token_throughput_per_user",
];

/// Whether `metric` (a name of [`Aiperf`]'s metrics, such as `time_to_first_token_p99`) is
/// measured only on streaming runs: time to first token, inter-token latency and per-user
/// token throughput need the tokens' arrival times.
pub fn is_streaming_only(metric: &str) -> bool {
    STREAMING_ONLY.iter().any(|tag| {
        metric
            .strip_prefix(tag)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|stat| STATS.contains(&stat))
    })
}

/// Details of an AIPerf run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AiperfDetails {
    /// When the benchmark started, as exported.
    pub start_time: Option<String>,
    /// When it ended.
    pub end_time: Option<String>,
    /// Whether it was cancelled before finishing.
    pub was_cancelled: bool,
    /// Error groups of `error_summary`, rendered as compact JSON.
    pub errors: Vec<String>,
}

impl Suite for Aiperf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        let mut specs = Vec::new();
        for tag in TAGS {
            if tag.distribution {
                for stat in STATS {
                    specs.push(MetricSpec::new(
                        format!("{}_{stat}", tag.name),
                        tag.unit,
                        tag.direction,
                        format!("{} Statistic: `{stat}`.", tag.description),
                    ));
                }
            } else {
                specs.push(MetricSpec::new(
                    tag.name,
                    tag.unit,
                    tag.direction,
                    tag.description,
                ));
            }
        }
        specs
    }

    fn parse(&self, output: &str) -> Result<Parsed, ParseError> {
        let accept = |v: &Value| {
            let table = metric_table(v);
            table.get("request_latency").is_some()
                || table.get("request_throughput").is_some()
                || table.get("error_request_count").is_some()
        };
        match json_block::find(output, accept) {
            json_block::Found::Document { line, value } => {
                read(&value).map_err(|m| ParseError::at(NAME, line, m))
            }
            json_block::Found::Broken { line, message } => Err(ParseError::at(NAME, line, message)),
            json_block::Found::Absent => Err(ParseError::whole(
                NAME,
                "no aggregate export (profile_export_aiperf.json) in the log",
            )),
        }
    }
}

/// The object holding the metric entries: `records` when the export nests them there.
fn metric_table(doc: &Value) -> &Value {
    match doc.get("records") {
        Some(records) if records.is_object() => records,
        _ => doc,
    }
}

/// Other tags a metric has had in some releases.
const ALIASES: &[(&str, &str)] = &[("time_to_first_token", "ttft")];

fn entry<'a>(table: &'a Value, tag: &str) -> Option<&'a Value> {
    let alias = ALIASES.iter().find(|(t, _)| *t == tag).map(|(_, a)| *a);
    table
        .get(tag)
        .or_else(|| alias.and_then(|a| table.get(a)))
        .filter(|v| !v.is_null())
}

fn read(doc: &Value) -> Result<Parsed, String> {
    let table = metric_table(doc);
    let errors: Vec<String> = doc
        .get("error_summary")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect();
    // Every request failed: the export has error counts and nothing to measure.
    let all_failed = entry(table, "request_latency").is_none()
        && entry(table, "request_throughput").is_none()
        && entry(table, "error_request_count").is_some()
        && !errors.is_empty();
    let mut metrics = BTreeMap::new();
    for tag in TAGS {
        let Some(entry) = entry(table, tag.name) else {
            if tag.required && !all_failed {
                return Err(format!("`{}` is missing", tag.name));
            }
            continue;
        };
        if let Some(unit) = entry.get("unit").and_then(Value::as_str)
            && unit != tag.unit
            && tag.name != "error_request_count"
        {
            return Err(format!(
                "`{}` is in {unit}, expected {}",
                tag.name, tag.unit
            ));
        }
        let stats: &[&str] = if tag.distribution { STATS } else { &["avg"] };
        for stat in stats {
            let Some(raw) = entry.get(*stat).filter(|v| !v.is_null()) else {
                continue;
            };
            let value = numbers::json_decimal(raw)
                .ok_or_else(|| format!("`{}.{stat}` is not a number", tag.name))?;
            let name = if tag.distribution {
                format!("{}_{stat}", tag.name)
            } else {
                tag.name.to_owned()
            };
            metrics.insert(name, value);
        }
        if tag.required && !all_failed && !metrics.keys().any(|k| k.starts_with(tag.name)) {
            return Err(format!("`{}` has no values", tag.name));
        }
    }

    let details = AiperfDetails {
        start_time: doc
            .get("start_time")
            .and_then(Value::as_str)
            .map(str::to_owned),
        end_time: doc
            .get("end_time")
            .and_then(Value::as_str)
            .map(str::to_owned),
        was_cancelled: doc
            .get("was_cancelled")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        errors,
    };
    let mut failures = Vec::new();
    if details.was_cancelled {
        failures.push("the benchmark was cancelled before it finished".to_owned());
    }
    if all_failed {
        let count = metrics
            .get("error_request_count")
            .map_or_else(|| "all".to_owned(), ToString::to_string);
        failures.push(format!(
            "every request failed ({count} errors), so nothing was measured"
        ));
    }
    let versions = doc
        .get("aiperf_version")
        .and_then(Value::as_str)
        .map(|v| BTreeMap::from([("aiperf_version".to_owned(), v.to_owned())]))
        .unwrap_or_default();
    Ok(Parsed {
        metrics,
        failures,
        details: Details::Aiperf(details),
        versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_timings_are_streaming_only() {
        assert!(is_streaming_only("time_to_first_token_p99"));
        assert!(is_streaming_only("inter_token_latency_avg"));
        assert!(is_streaming_only("output_token_throughput_per_user_p50"));
        assert!(!is_streaming_only("output_token_throughput"));
        assert!(!is_streaming_only("request_latency_p99"));
        assert!(!is_streaming_only("time_to_first_token"));
    }
}
