//! Pod logs for benchmark pods on kwok nodes.
//!
//! kwok plays the kubelet, so `kubectl logs` of a pod on a fake node is answered by kwok's
//! server from a file named in a `ClusterLogs` object (`kwok.x-k8s.io/v1alpha1`). kwok reads
//! that file with the CRI log reader, so every line must be in CRI form
//! (`<RFC 3339 time> stdout F <text>`). kwok's selector matches pods by namespace and name
//! only, so the sample is chosen by container name: a container named after a suite
//! (`nccl-all-reduce`, `dcgm-diag`, …) gets that suite's recorded output from
//! `lab/benchmarks/`, and a benchmark's prescreen container (`prescreen`) the recorded
//! outputs of the tools it runs.
//!
//! [`write()`] puts the CRI files and the kwok config (a `ClusterLogs` object, passed to kwok as
//! a second `--config`) into a lab directory.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

/// Suite name → recorded output, as the tools print it.
pub const SAMPLES: &[(&str, &str)] = &[
    (
        "nccl-all-reduce",
        include_str!("../benchmarks/nccl-all-reduce.log"),
    ),
    ("nvbandwidth", include_str!("../benchmarks/nvbandwidth.log")),
    ("dcgm-diag", include_str!("../benchmarks/dcgm-diag.log")),
    ("aiperf", include_str!("../benchmarks/aiperf.log")),
    ("gpu-burn", include_str!("../benchmarks/gpu-burn.log")),
    ("custom", include_str!("../benchmarks/custom.log")),
];

/// The container name of a benchmark's prescreen, and what it prints: recorded outputs of
/// `nvidia-smi -q`, `nvidia-smi topo -m` and `ibstat` under gpufleet's section marks.
pub const PRESCREEN: (&str, &str) = ("prescreen", include_str!("../benchmarks/prescreen.log"));

/// Every log served, by container name: the suites' and the prescreen's.
fn served() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    SAMPLES.iter().chain(std::iter::once(&PRESCREEN))
}

/// The kwok config's file name, which carries a digest of what is served: kwok reads its
/// config only when it starts, and a lab adopts a running kwok whose flags are unchanged, so
/// a lab whose samples changed must see a changed flag to restart kwok.
#[must_use]
pub fn config_file_name() -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    for (name, text) in served() {
        name.hash(&mut h);
        text.hash(&mut h);
    }
    format!("kwok-logs-{:016x}.yaml", h.finish())
}

/// The time stamped on every served line (kwok's reader needs one; `--since` filters on it).
const STAMP: &str = "2026-03-02T10:00:00.000000000Z";

/// The name of the `ClusterLogs` object.
pub const CLUSTER_LOGS_NAME: &str = "gpufleet-benchmark-samples";

/// `text` as a CRI container log: one full (`F`) stdout record per line.
#[must_use]
pub fn cri_log(text: &str) -> String {
    text.lines()
        .map(|line| format!("{STAMP} stdout F {line}\n"))
        .collect()
}

/// The kwok config document: one `ClusterLogs` for all pods, one log per suite keyed by
/// container name, files under `dir`.
#[must_use]
pub fn cluster_logs_config(dir: &Path) -> String {
    let logs: Vec<serde_json::Value> = served()
        .map(|(suite, _)| {
            serde_json::json!({
                "containers": [suite],
                "logsFile": dir.join(format!("{suite}.log")),
            })
        })
        .collect();
    // JSON is YAML, and kwok's config loader reads YAML documents.
    let doc = serde_json::json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": { "name": CLUSTER_LOGS_NAME },
        "spec": { "logs": logs },
    });
    format!("{doc}\n")
}

/// Writes the CRI sample files and the kwok config into `dir`; returns the config's path.
///
/// # Errors
///
/// When `dir` cannot be created or written.
pub fn write(dir: &Path) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    for (suite, text) in served() {
        fs::write(dir.join(format!("{suite}.log")), cri_log(text))?;
    }
    let config = dir.join(config_file_name());
    fs::write(&config, cluster_logs_config(dir))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_becomes_a_cri_record() {
        let log = cri_log("a\n\nb\r100%\n");
        assert_eq!(
            log,
            format!("{STAMP} stdout F a\n{STAMP} stdout F \n{STAMP} stdout F b\r100%\n")
        );
    }

    #[test]
    fn samples_parse_with_their_suites() {
        for (name, text) in SAMPLES {
            let suite = gpufleet_engine::benchmark::suite(name).expect("known suite");
            let parsed = suite.parse(text).expect("sample parses");
            assert!(parsed.tool_passed(), "{name}: {:?}", parsed.failures);
        }
    }

    #[test]
    fn the_prescreen_sample_passes_the_prescreen_of_a_one_gpu_pod() {
        let report = gpufleet_engine::resources::benchmark::prescreen::parse(PRESCREEN.1);
        assert_eq!(report.gpus.len(), 1, "{report:?}");
        assert!(!report.gpus[0].uuid.is_empty(), "{report:?}");
        assert_eq!(report.problems(1, "", false), Vec::<String>::new());
    }

    #[test]
    fn config_names_one_file_per_suite() {
        let config = cluster_logs_config(Path::new("/tmp/lab/benchmarks"));
        let doc: serde_json::Value = serde_json::from_str(&config).expect("json");
        assert_eq!(doc["kind"], "ClusterLogs");
        assert_eq!(doc["spec"]["logs"][0]["containers"][0], "nccl-all-reduce");
        assert_eq!(
            doc["spec"]["logs"][0]["logsFile"],
            "/tmp/lab/benchmarks/nccl-all-reduce.log"
        );
        assert_eq!(
            doc["spec"]["logs"].as_array().map(Vec::len),
            Some(SAMPLES.len() + 1)
        );
    }
}
