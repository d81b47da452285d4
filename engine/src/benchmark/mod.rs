//! Result parsers for the benchmark suites behind `gpufleet_benchmark`.
//!
//! A benchmark runs as a Kubernetes Job; its pod log is the only thing the engine reads back.
//! Each suite knows how its tool prints results and turns a log into [`Parsed`]: a map of
//! metrics that thresholds are written against, the tool's own verdict ([`Parsed::failures`])
//! and suite-specific details (per-test statuses, per-GPU results, the size sweep).
//!
//! Everything here is pure: no I/O, no clocks. Parsers never panic on malformed input; they
//! return a [`ParseError`] naming the suite and, when it helps, the line of the log.
//!
//! Metric values are exact decimals ([`BigDecimal`]) taken from the digits the tool printed,
//! so a threshold of `480.16` compares with what the log says, not with a float rounding of it.
//! Metric names are stable snake_case identifiers listed by [`Suite::metrics`].

pub mod aiperf;
pub mod custom;
pub mod dcgm;
mod error;
pub mod gpu_burn;
mod json_block;
pub mod nccl;
mod numbers;
pub mod nvbandwidth;

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;
use serde::Serialize;

pub use error::ParseError;

/// One benchmark suite: its name, the metrics it produces and its log parser.
pub trait Suite: Sync {
    /// The suite's name as written in `suite = "…"`.
    fn name(&self) -> &'static str;

    /// The metrics this suite can report. For suites whose metric names come from the run
    /// (nvbandwidth testcases, custom commands) the entries describe the naming pattern.
    fn metrics(&self) -> Vec<MetricSpec>;

    /// Parses the pod log of one run.
    fn parse(&self, output: &str) -> Result<Parsed, ParseError>;

    /// What a container exit code says about the run, `None` when it says nothing the
    /// report does not. By default any non-zero code is a failure of its own; suites whose
    /// tools use exit codes to mean "ran and found a problem" say so instead.
    fn exit_failure(&self, code: i64) -> Option<String> {
        (code != 0).then(|| format!("exited with code {code}"))
    }
}

/// Every suite, in the order the documentation lists them.
pub const SUITES: &[&dyn Suite] = &[
    &nccl::NcclAllReduce,
    &nvbandwidth::Nvbandwidth,
    &dcgm::DcgmDiag,
    &aiperf::Aiperf,
    &gpu_burn::GpuBurn,
    &custom::Custom,
];

/// The suite called `name`, if there is one.
pub fn suite(name: &str) -> Option<&'static dyn Suite> {
    SUITES.iter().copied().find(|s| s.name() == name)
}

/// Which way a metric improves, so documentation and thresholds can say "at least" or
/// "at most".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Bigger is better (bandwidth, throughput): thresholds are usually minimums.
    HigherIsBetter,
    /// Smaller is better (latency, error counts): thresholds are usually maximums.
    LowerIsBetter,
    /// Neither: the meaning depends on the command (custom metrics).
    Unspecified,
}

/// A metric a suite reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetricSpec {
    /// The metric's name in `results` and `thresholds`, or a pattern such as `<testcase>`.
    pub name: String,
    /// The unit of its values (`GB/s`, `ms`, `count`, …).
    pub unit: &'static str,
    /// Which way it improves.
    pub direction: Direction,
    /// What it measures, in a sentence or two of markdown.
    pub description: String,
}

impl MetricSpec {
    fn new(
        name: impl Into<String>,
        unit: &'static str,
        direction: Direction,
        description: impl Into<String>,
    ) -> MetricSpec {
        MetricSpec {
            name: name.into(),
            unit,
            direction,
            description: description.into(),
        }
    }
}

/// What a suite's parser read from one log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parsed {
    /// Metric name → exact value, as the tool printed it.
    pub metrics: BTreeMap<String, BigDecimal>,
    /// The tool's own verdict: why the run failed by the tool's standards (a FAULTY GPU, a
    /// failed diagnostic, wrong values in a collective). Empty when the tool found nothing
    /// wrong; thresholds are checked separately.
    pub failures: Vec<String>,
    /// Per-suite details worth recording.
    pub details: Details,
    /// Versions the tool stated in its own output, by name: `nccl_tests_version` and
    /// `nccl_version` (nccl-tests), `dcgm_version` and `driver_version` (DCGM),
    /// `nvbandwidth_version`, `driver_version` and `cuda_runtime_version` (nvbandwidth),
    /// `aiperf_version` (AIPerf). Empty when the output states none.
    pub versions: BTreeMap<String, String>,
}

impl Parsed {
    /// Whether the tool itself reported the run as good.
    pub fn tool_passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Per-suite details of a parsed run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "suite", rename_all = "kebab-case")]
pub enum Details {
    /// nccl-tests: the size sweep and where the numbers came from.
    NcclAllReduce(nccl::NcclDetails),
    /// nvbandwidth: every testcase with its status.
    Nvbandwidth(nvbandwidth::NvbandwidthDetails),
    /// DCGM diagnostics: every test with its status and per-GPU results.
    DcgmDiag(dcgm::DiagDetails),
    /// AIPerf: run-level facts of the aggregate export.
    Aiperf(aiperf::AiperfDetails),
    /// gpu-burn: every GPU with its verdict.
    GpuBurn(gpu_burn::GpuBurnDetails),
    /// A custom command: nothing beyond its metrics.
    Custom,
}
