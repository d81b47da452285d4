//! `gpu-burn`: a GPU stress test that ends with one verdict line per GPU.
//!
//! gpu-burn always exits 0, so the verdict comes from its summary:
//!
//! ```text
//! Tested 8 GPUs:
//!     GPU 0: OK
//!     GPU 1: FAULTY
//! ```
//!
//! Progress lines are rewritten with `\r` (`100.0%  proc'd: 1920 (51234 Gflop/s) - … errors:
//! 0 - …  temps: 61 C - …`), so the log is split on both `\r` and `\n`; the last one gives
//! the per-GPU throughput. Captured logs often lose the `\r` and run hundreds of progress
//! records together on one line, so only the last record of a line counts.
//!
//! Before burning, gpu-burn lists the GPUs with their UUIDs
//! (`GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-b876c63f-…)`); they are kept in the details.
//!
//! # Metrics
//!
//! | name | unit | better | meaning |
//! |---|---|---|---|
//! | `gpus_tested` | count | higher | GPUs in the summary |
//! | `gpus_faulty` | count | lower | GPUs the summary calls FAULTY |
//! | `gflops_min` | Gflop/s | higher | the slowest GPU's throughput in the last progress line (absent without one) |

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;
use serde::Serialize;

use super::{Details, Direction, MetricSpec, ParseError, Parsed, Suite, numbers::decimal};

/// The suite's name.
pub const NAME: &str = "gpu-burn";

/// The `gpu-burn` suite.
#[derive(Debug, Clone, Copy)]
pub struct GpuBurn;

/// One GPU's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuVerdict {
    /// The GPU's index.
    pub gpu: u32,
    /// Whether gpu-burn called it OK (false: FAULTY).
    pub ok: bool,
}

/// Details of a gpu-burn run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuBurnDetails {
    /// Every GPU's verdict, in summary order.
    pub gpus: Vec<GpuVerdict>,
    /// Per-GPU Gflop/s from the last progress record.
    pub gflops: Vec<BigDecimal>,
    /// The UUIDs gpu-burn listed before it started, in GPU order.
    pub gpu_uuids: Vec<String>,
}

impl Suite for GpuBurn {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metrics(&self) -> Vec<MetricSpec> {
        vec![
            MetricSpec::new(
                "gpus_tested",
                "count",
                Direction::HigherIsBetter,
                "GPUs listed in gpu-burn's summary.",
            ),
            MetricSpec::new(
                "gpus_faulty",
                "count",
                Direction::LowerIsBetter,
                "GPUs gpu-burn calls FAULTY (it found calculation errors on them).",
            ),
            MetricSpec::new(
                "gflops_min",
                "Gflop/s",
                Direction::HigherIsBetter,
                "Throughput of the slowest GPU in the last progress line.",
            ),
        ]
    }

    fn parse(&self, output: &str) -> Result<Parsed, ParseError> {
        let mut expected: Option<(usize, usize)> = None;
        let mut gpus = Vec::new();
        let mut gflops = Vec::new();
        let mut gpu_uuids = Vec::new();
        for (index, line) in output.split('\n').enumerate() {
            let line_no = index + 1;
            for segment in line.split('\r') {
                let segment = segment.trim();
                if let Some((_, last)) = segment.rsplit_once("proc'd:") {
                    let figures = progress_gflops(last);
                    if !figures.is_empty() {
                        gflops = figures;
                    }
                } else if expected.is_none()
                    && let Some(uuid) = listed_uuid(segment)
                {
                    gpu_uuids.push(uuid);
                } else if let Some(n) = tested_count(segment) {
                    expected = Some((line_no, n));
                    gpus.clear();
                } else if expected.is_some()
                    && let Some(verdict) = verdict(segment, line_no)?
                {
                    gpus.push(verdict);
                }
            }
        }
        let Some((tested_line, count)) = expected else {
            return Err(ParseError::whole(
                NAME,
                "no `Tested N GPUs:` summary: the run did not finish",
            ));
        };
        if gpus.len() != count {
            return Err(ParseError::at(
                NAME,
                tested_line,
                format!(
                    "the summary announces {count} GPUs but lists {}",
                    gpus.len()
                ),
            ));
        }

        let faulty: Vec<u32> = gpus.iter().filter(|g| !g.ok).map(|g| g.gpu).collect();
        let mut metrics = BTreeMap::new();
        metrics.insert("gpus_tested".to_owned(), BigDecimal::from(count as u64));
        metrics.insert(
            "gpus_faulty".to_owned(),
            BigDecimal::from(faulty.len() as u64),
        );
        if let Some(min) = gflops.iter().min() {
            metrics.insert("gflops_min".to_owned(), min.clone());
        }
        Ok(Parsed {
            metrics,
            failures: faulty
                .iter()
                .map(|g| format!("GPU {g} is FAULTY (calculation errors)"))
                .collect(),
            details: Details::GpuBurn(GpuBurnDetails {
                gpus,
                gflops,
                gpu_uuids,
            }),
            versions: BTreeMap::new(),
        })
    }
}

/// `GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-b876c63f-…)` → the UUID.
fn listed_uuid(segment: &str) -> Option<String> {
    segment.strip_prefix("GPU ")?;
    let (_, rest) = segment.split_once("(UUID: ")?;
    let (uuid, _) = rest.split_once(')')?;
    let uuid = uuid.trim();
    (!uuid.is_empty()).then(|| uuid.to_owned())
}

/// `Tested 8 GPUs:` → 8.
fn tested_count(segment: &str) -> Option<usize> {
    let rest = segment.strip_prefix("Tested ")?;
    let (n, tail) = rest.split_once(' ')?;
    matches!(tail, "GPUs:" | "GPU:").then_some(())?;
    n.parse().ok()
}

/// `GPU 3: OK` / `GPU 3: FAULTY`; `Ok(None)` for lines that are not verdicts.
fn verdict(segment: &str, line_no: usize) -> Result<Option<GpuVerdict>, ParseError> {
    let Some(rest) = segment.strip_prefix("GPU ") else {
        return Ok(None);
    };
    let Some((index, word)) = rest.split_once(':') else {
        return Ok(None);
    };
    let Ok(gpu) = index.trim().parse::<u32>() else {
        return Ok(None);
    };
    let ok = match word.trim() {
        "OK" => true,
        "FAULTY" => false,
        other => {
            return Err(ParseError::at(
                NAME,
                line_no,
                format!("GPU {gpu}: unknown verdict `{other}`"),
            ));
        }
    };
    Ok(Some(GpuVerdict { gpu, ok }))
}

/// Every `(N Gflop/s)` figure of one progress record.
fn progress_gflops(segment: &str) -> Vec<BigDecimal> {
    segment
        .split('(')
        .skip(1)
        .filter_map(|part| part.split_once(" Gflop/s)"))
        .filter_map(|(number, _)| decimal(number))
        .collect()
}
