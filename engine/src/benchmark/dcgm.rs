//! `dcgm-diag`: DCGM diagnostics (`dcgmi diag -r <level> -j`).
//!
//! Reads the JSON report: `DCGM Diagnostic.test_categories[].tests[]`, each with a
//! `test_summary.status` and per-entity `results[]` (status and warnings), plus an optional
//! `runtime_error`, `entity_groups` (serials) and `metadata` (versions).
//!
//! DCGM 3.x writes the older shape, which is read too: the root is `DCGM GPU Diagnostic`,
//! the version sits beside `test_categories`, tests have no `test_summary` (their status is
//! the worst of their results), results name GPUs by `gpu_ids` (a number, or a string such
//! as `"0,1,2,3"` for a result that covers several), statuses are upper case (`PASS`) and
//! the `tests` lists hold `null` entries between tests.
//!
//! `dcgmi` exits with 226 when the diagnostic ran and found a problem (and 205 when it asks
//! for the GPU to be isolated): see [`exit_outcome`]. The verdict comes from the report's
//! statuses either way.
//!
//! # Metrics
//!
//! | name | unit | better | meaning |
//! |---|---|---|---|
//! | `tests_passed` | count | higher | tests whose summary is `Pass` |
//! | `tests_failed` | count | lower | tests whose summary is `Fail` |
//! | `tests_warned` | count | lower | tests whose summary is `Warn` |
//! | `gpus_failed` | count | lower | distinct GPUs with at least one `Fail` result |

use std::collections::{BTreeMap, BTreeSet};

use bigdecimal::BigDecimal;
use serde::Serialize;
use serde_json::Value;

use super::{Details, Direction, MetricSpec, ParseError, Parsed, Suite, json_block};

/// The suite's name.
pub const NAME: &str = "dcgm-diag";

/// The `dcgm-diag` suite.
#[derive(Debug, Clone, Copy)]
pub struct DcgmDiag;

/// A diagnostic level (`dcgmi diag -r`): each runs the tests of the ones below it and more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagLevel {
    /// Level 1 (seconds): software and deployment checks only.
    Quick,
    /// Level 2 (about 2 minutes): adds `memory` and `pcie`.
    Medium,
    /// Level 3 (about 15 minutes): adds stress, power, bandwidth and NCCL tests.
    Long,
    /// Level 4 (longer): adds `memtest` and `pulse_test`.
    Extended,
}

impl DiagLevel {
    /// The level number `dcgmi diag -r` takes.
    pub fn number(self) -> u8 {
        match self {
            DiagLevel::Quick => 1,
            DiagLevel::Medium => 2,
            DiagLevel::Long => 3,
            DiagLevel::Extended => 4,
        }
    }

    /// The command that runs the diagnostic at this level with a JSON report.
    pub fn command(self) -> Vec<String> {
        ["dcgmi", "diag", "-r", &self.number().to_string(), "-j"]
            .map(str::to_owned)
            .to_vec()
    }
}

/// What `dcgmi diag`'s exit status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitOutcome {
    /// 0: the diagnostic ran and passed.
    Passed,
    /// 226 (`DCGM_ST_NVVS_ERROR`): the diagnostic ran and reported a failure. Not a crash:
    /// the report says which test failed.
    DiagnosticFailed,
    /// 205 (`DCGM_ST_NVVS_ISOLATE_ERROR`): the diagnostic ran and asks for the GPU to be
    /// isolated.
    IsolationRequired,
    /// Anything else: `dcgmi` itself failed; the report may be missing.
    Crashed(i32),
}

/// Reads `dcgmi diag`'s exit status: 226 means "diagnostic failed", not "tool crashed".
pub fn exit_outcome(code: i32) -> ExitOutcome {
    match code {
        0 => ExitOutcome::Passed,
        226 => ExitOutcome::DiagnosticFailed,
        205 => ExitOutcome::IsolationRequired,
        other => ExitOutcome::Crashed(other),
    }
}

/// A result status as DCGM prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// `Pass`.
    Pass,
    /// `Fail`.
    Fail,
    /// `Warn`.
    Warn,
    /// `Skip`.
    Skip,
    /// `Not Run`.
    NotRun,
    /// A status this parser does not know, kept verbatim.
    Other(String),
}

impl Status {
    fn parse(text: &str) -> Status {
        match text.trim().to_ascii_lowercase().as_str() {
            "pass" => Status::Pass,
            "fail" => Status::Fail,
            "warn" => Status::Warn,
            "skip" => Status::Skip,
            "not run" => Status::NotRun,
            _ => Status::Other(text.to_owned()),
        }
    }
}

/// One entity's result in one test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityResult {
    /// `GPU`, `CPU`, …
    pub entity_group: String,
    /// The entity's index within its group (`entity_id`, or `gpu_id`/`gpu_ids` in older
    /// reports); `None` when a result covers GPUs it does not name.
    pub entity_id: Option<u64>,
    /// The entity's status.
    pub status: Status,
    /// Warning texts.
    pub warnings: Vec<String>,
}

/// One test of the diagnostic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagTest {
    /// Its category (`Deployment`, `Hardware`, `Integration`, `Stress`, …).
    pub category: String,
    /// Its name (`Denylist`, `memory`, `pcie`, …).
    pub name: String,
    /// Its summary status.
    pub status: Status,
    /// Per-entity results.
    pub results: Vec<EntityResult>,
}

/// Details of a DCGM diagnostic run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagDetails {
    /// DCGM's version (`metadata.version`).
    pub dcgm_version: Option<String>,
    /// The driver version DCGM detected.
    pub driver_version: Option<String>,
    /// GPU index → serial number, from `entity_groups` (GPUs that expose none, which DCGM
    /// writes as `<<<NOT_SUPPORTED>>>`, are left out).
    pub gpu_serials: BTreeMap<u64, String>,
    /// Every test, in report order.
    pub tests: Vec<DiagTest>,
    /// An error that stopped the diagnostic.
    pub runtime_error: Option<String>,
}

impl Suite for DcgmDiag {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::new(
                "tests_passed",
                "count",
                Direction::HigherIsBetter,
                "Tests whose summary status is `Pass`.",
            ),
            MetricSpec::new(
                "tests_failed",
                "count",
                Direction::LowerIsBetter,
                "Tests whose summary status is `Fail`.",
            ),
            MetricSpec::new(
                "tests_warned",
                "count",
                Direction::LowerIsBetter,
                "Tests whose summary status is `Warn`.",
            ),
            MetricSpec::new(
                "gpus_failed",
                "count",
                Direction::LowerIsBetter,
                "Distinct GPUs with at least one `Fail` result.",
            ),
        ]
    }

    fn parse(&self, output: &str) -> Result<Parsed, ParseError> {
        match json_block::find(output, |v| root_of(v).is_some()) {
            json_block::Found::Document { line, value } => {
                read(&value).map_err(|m| ParseError::at(NAME, line, m))
            }
            json_block::Found::Broken { line, message } => Err(ParseError::at(NAME, line, message)),
            json_block::Found::Absent => Err(ParseError::whole(
                NAME,
                "no JSON report in the log (run `dcgmi diag` with `-j`)",
            )),
        }
    }

    fn exit_failure(&self, code: i64) -> Option<String> {
        let code = i32::try_from(code).unwrap_or(i32::MAX);
        match exit_outcome(code) {
            ExitOutcome::Passed => None,
            // The report's failed tests say what failed; the code adds nothing.
            ExitOutcome::DiagnosticFailed => None,
            ExitOutcome::IsolationRequired => Some(format!(
                "the diagnostic asks for the GPU to be isolated (exit code {code})"
            )),
            ExitOutcome::Crashed(c) => Some(format!("dcgmi failed (exit code {c})")),
        }
    }
}

fn string(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

/// The diagnostic object: `DCGM Diagnostic` (DCGM 4) or `DCGM GPU Diagnostic` (DCGM 3).
fn root_of(doc: &Value) -> Option<&Value> {
    doc.get("DCGM Diagnostic")
        .or_else(|| doc.get("DCGM GPU Diagnostic"))
        .filter(|v| v.is_object())
}

/// What DCGM writes for a serial number the GPU does not expose.
const NOT_SUPPORTED: &str = "<<<NOT_SUPPORTED>>>";

fn read(doc: &Value) -> Result<Parsed, String> {
    let diag = root_of(doc).ok_or("the report has no diagnostic object")?;
    let mut tests = Vec::new();
    let categories = match diag.get("test_categories") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => list.as_slice(),
        Some(_) => return Err("`test_categories` is not a list".into()),
    };
    for (c, category) in categories.iter().enumerate() {
        let category_name = string(category.get("category"))
            .ok_or_else(|| format!("`test_categories[{c}].category` is missing"))?;
        let list = category
            .get("tests")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("category {category_name}: `tests` is not a list"))?;
        // DCGM 3 leaves `null` between the tests of a category.
        for test in list.iter().filter(|t| !t.is_null()) {
            tests.push(read_test(&category_name, test)?);
        }
    }
    let runtime_error = string(diag.get("runtime_error")).filter(|e| !e.is_empty());
    if tests.is_empty() && runtime_error.is_none() {
        return Err("the report has no tests".into());
    }

    let gpu_serials = doc
        .get("entity_groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|g| g.get("entity_group").and_then(Value::as_str) == Some("GPU"))
        .filter_map(|g| g.get("entities").and_then(Value::as_array))
        .flatten()
        .filter_map(|e| {
            Some((
                e.get("entity_id")?.as_u64()?,
                e.get("serial_num")?.as_str()?.to_owned(),
            ))
        })
        .filter(|(_, serial)| serial != NOT_SUPPORTED && !serial.is_empty())
        .collect();
    let details = DiagDetails {
        dcgm_version: string(doc.pointer("/metadata/version"))
            .or_else(|| string(diag.get("version"))),
        driver_version: string(doc.pointer("/metadata/Driver Version Detected"))
            .or_else(|| string(diag.get("Driver Version Detected"))),
        gpu_serials,
        tests,
        runtime_error,
    };
    let overall_failed = doc
        .get("Overall Result")
        .and_then(Value::as_str)
        .is_some_and(|s| Status::parse(s) == Status::Fail);
    Ok(finish(details, overall_failed))
}

fn read_test(category: &str, test: &Value) -> Result<DiagTest, String> {
    let name = string(test.get("name"))
        .ok_or_else(|| format!("a test in category {category} has no `name`"))?;
    let results: Vec<EntityResult> = test
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(read_result)
        .collect();
    let status = match test.pointer("/test_summary/status").and_then(Value::as_str) {
        Some(s) => Status::parse(s),
        // DCGM 3 has no summary: the test is as bad as its worst result.
        None => worst(&results)
            .ok_or_else(|| format!("test {name}: `test_summary.status` is missing"))?,
    };
    Ok(DiagTest {
        category: category.to_owned(),
        name,
        status,
        results,
    })
}

/// One result of a test; a DCGM 3 result whose `gpu_ids` lists several GPUs becomes one
/// result per GPU.
fn read_result(r: &Value) -> Vec<EntityResult> {
    let status = r
        .get("status")
        .and_then(Value::as_str)
        .map_or(Status::Other(String::new()), Status::parse);
    let warnings: Vec<String> = r
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|w| string(w.get("warning")))
        .collect();
    let entity_group = string(r.get("entity_group")).unwrap_or_else(|| "GPU".to_owned());
    let ids: Vec<Option<u64>> = match r
        .get("entity_id")
        .or_else(|| r.get("gpu_id"))
        .or_else(|| r.get("gpu_ids"))
    {
        Some(Value::Number(n)) => vec![n.as_u64()],
        Some(Value::String(list)) => {
            let ids: Vec<Option<u64>> = list.split(',').map(|i| i.trim().parse().ok()).collect();
            if ids.iter().all(Option::is_some) {
                ids
            } else {
                vec![None]
            }
        }
        _ => vec![None],
    };
    ids.into_iter()
        .map(|entity_id| EntityResult {
            entity_group: entity_group.clone(),
            entity_id,
            status: status.clone(),
            warnings: warnings.clone(),
        })
        .collect()
}

/// The worst status among results: Fail, then Warn, then anything but Pass, then Pass.
fn worst(results: &[EntityResult]) -> Option<Status> {
    let rank = |s: &Status| match s {
        Status::Fail => 0,
        Status::Warn => 1,
        Status::Pass => 4,
        Status::Skip | Status::NotRun => 3,
        Status::Other(_) => 2,
    };
    results
        .iter()
        .map(|r| &r.status)
        .min_by_key(|s| rank(s))
        .cloned()
}

fn finish(details: DiagDetails, overall_failed: bool) -> Parsed {
    let count = |wanted: Status| details.tests.iter().filter(|t| t.status == wanted).count();
    let failed_gpus: BTreeSet<u64> = details
        .tests
        .iter()
        .flat_map(|t| &t.results)
        .filter(|r| r.entity_group == "GPU" && r.status == Status::Fail)
        .filter_map(|r| r.entity_id)
        .collect();

    let mut failures = Vec::new();
    for test in details.tests.iter().filter(|t| t.status == Status::Fail) {
        let parts: Vec<String> = test
            .results
            .iter()
            .filter(|r| r.status == Status::Fail)
            .map(|r| {
                let who = match r.entity_id {
                    Some(id) => format!("{} {id}", r.entity_group),
                    None => r.entity_group.clone(),
                };
                match r.warnings.first() {
                    Some(w) => format!("{who}: {w}"),
                    None => who,
                }
            })
            .collect();
        failures.push(if parts.is_empty() {
            format!("test {} failed", test.name)
        } else {
            format!("test {} failed ({})", test.name, parts.join("; "))
        });
    }
    if let Some(e) = &details.runtime_error {
        failures.push(format!("the diagnostic stopped: {e}"));
    }
    if overall_failed && failures.is_empty() {
        failures.push("the diagnostic's overall result is Fail".to_owned());
    }

    let mut metrics = BTreeMap::new();
    for (name, n) in [
        ("tests_passed", count(Status::Pass)),
        ("tests_failed", count(Status::Fail)),
        ("tests_warned", count(Status::Warn)),
        ("gpus_failed", failed_gpus.len()),
    ] {
        metrics.insert(name.to_owned(), BigDecimal::from(n as u64));
    }
    let versions = [
        ("dcgm_version", &details.dcgm_version),
        ("driver_version", &details.driver_version),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v.clone()?)))
    .collect();
    Parsed {
        metrics,
        failures,
        details: Details::DcgmDiag(details),
        versions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dcgm_3_test_is_as_bad_as_its_worst_result_and_its_gpu_lists_name_each_gpu() {
        let report = r#"{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware",
            "tests": [null, {"name": "GPU Memory", "results": [
                {"gpu_ids": "0,1", "status": "PASS"},
                {"gpu_ids": "2,3", "status": "FAIL", "warnings": [{"warning": "ECC"}]}]}]}],
            "version": "3.3.1"}}"#;
        let parsed = DcgmDiag.parse(report).expect("report");
        assert_eq!(parsed.metrics["tests_failed"], BigDecimal::from(1));
        assert_eq!(parsed.metrics["gpus_failed"], BigDecimal::from(2));
        assert_eq!(
            parsed.failures,
            ["test GPU Memory failed (GPU 2: ECC; GPU 3: ECC)"]
        );
        assert_eq!(parsed.versions["dcgm_version"], "3.3.1");
    }
}
