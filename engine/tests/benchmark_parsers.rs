//! The benchmark suites' parsers against outputs of the real tools (each fixture folder's
//! SOURCES.md says where every file comes from; `handmade-*` files are edge cases written by
//! hand): exact metric values, versions and ranks, the tools' own verdicts, the errors users
//! see for broken logs, and a property test that no input makes a parser panic.

use std::{fs, path::PathBuf};

use gpufleet_engine::benchmark::{
    self, Details, ParseError, Parsed, SUITES, Suite,
    dcgm::{self, ExitOutcome},
};
use insta::assert_snapshot;
use proptest::prelude::*;

fn fixture(suite: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/benchmark")
        .join(suite)
        .join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn suite(name: &str) -> &'static dyn Suite {
    benchmark::suite(name).expect("known suite")
}

fn parse(suite_name: &str, file: &str) -> Parsed {
    suite(suite_name)
        .parse(&fixture(suite_name, file))
        .unwrap_or_else(|e| panic!("{suite_name}/{file}: {e}"))
}

fn parse_err(suite_name: &str, file: &str) -> ParseError {
    match suite(suite_name).parse(&fixture(suite_name, file)) {
        Ok(parsed) => panic!("{suite_name}/{file} parsed: {parsed:?}"),
        Err(e) => e,
    }
}

/// Metrics and failures, one per line, as a user would read them in `results`.
fn render(parsed: &Parsed) -> String {
    let mut out = String::new();
    for (name, value) in &parsed.metrics {
        out.push_str(&format!("{name} = {value}\n"));
    }
    for failure in &parsed.failures {
        out.push_str(&format!("FAILED: {failure}\n"));
    }
    out
}

fn metric(parsed: &Parsed, name: &str) -> String {
    parsed
        .metrics
        .get(name)
        .unwrap_or_else(|| panic!("no metric {name} in {:?}", parsed.metrics.keys()))
        .to_string()
}

// ---- nccl-all-reduce -------------------------------------------------------------------

fn nccl_details(parsed: &Parsed) -> &benchmark::nccl::NcclDetails {
    let Details::NcclAllReduce(details) = &parsed.details else {
        panic!("nccl details");
    };
    details
}

#[test]
fn nccl_two_hosts_under_mpirun_report_sixteen_ranks_and_the_library_version() {
    // all_reduce_perf_mpi, mpirun --np 16 -H bm-h100-01:8,bm-h100-02:8 (nccl-tests#309).
    let parsed = parse("nccl-all-reduce", "mpirun-2x8-h100-issue-309.log");
    // 16 GiB row: out-of-place 469.21, in-place 469.10; the lower one counts.
    assert_eq!(metric(&parsed, "largest_size_bus_bandwidth"), "469.10");
    assert_eq!(metric(&parsed, "average_bus_bandwidth"), "139.56");
    assert_eq!(metric(&parsed, "wrong_count"), "0");
    assert_eq!(metric(&parsed, "out_of_bounds_count"), "0");
    assert!(parsed.tool_passed());
    let details = nccl_details(&parsed);
    assert_eq!(details.largest_size_bytes, 17_179_869_184);
    assert_eq!(details.sizes.len(), 32);
    assert_eq!(details.ranks.len(), 16);
    assert_eq!(details.hosts(), ["bm-h100-01", "bm-h100-02"]);
    assert_eq!(
        details.ranks[13],
        benchmark::nccl::RankInfo {
            rank: 13,
            host: "bm-h100-02".into(),
            device: 5,
            bus_id: "0000:bb:00".into(),
            gpu: "NVIDIA H100 80GB HBM3".into(),
        }
    );
    // NCCL_DEBUG=VERSION prints the library version; this build predates the tests' own line.
    assert_eq!(
        parsed.versions.get("nccl_version").map(String::as_str),
        Some("2.26.2")
    );
    assert!(!parsed.versions.contains_key("nccl_tests_version"));
    assert_snapshot!(render(&parsed));
}

#[test]
fn nccl_mpijob_launcher_log_with_old_bus_ids() {
    // The MPI launcher pod's log of a 2-worker MPIJob on OKE (A100, one-byte bus ids).
    let parsed = parse("nccl-all-reduce", "mpijob-2x8-a100-oci-hpc-oke.log");
    assert_eq!(metric(&parsed, "largest_size_bus_bandwidth"), "237.52");
    assert_eq!(metric(&parsed, "average_bus_bandwidth"), "66.4834");
    let details = nccl_details(&parsed);
    assert_eq!(details.sizes.len(), 31);
    assert_eq!(
        details.hosts(),
        [
            "nccl-allreduce-job0-mpiworker-0",
            "nccl-allreduce-job0-mpiworker-1"
        ]
    );
    assert_eq!(details.ranks[8].bus_id, "0x0f");
    assert_eq!(details.ranks[8].device, 0);
    assert_eq!(details.ranks[15].gpu, "NVIDIA A100-SXM4-40GB");
    assert!(parsed.versions.is_empty(), "{:?}", parsed.versions);
}

#[test]
fn nccl_wrong_values_and_out_of_bounds_fail_the_run() {
    // nccl-tests 2.17.8 over libfabric on GH200 (nccl-tests#369): 96 + 32 wrong elements.
    let parsed = parse("nccl-all-reduce", "wrong-values-gh200-issue-369.log");
    assert_eq!(metric(&parsed, "wrong_count"), "128");
    assert_eq!(metric(&parsed, "out_of_bounds_count"), "4");
    assert_eq!(metric(&parsed, "average_bus_bandwidth"), "4.79995");
    assert_eq!(
        parsed.failures,
        [
            "128 wrong elements in the results",
            "4 out-of-bounds values in the results",
        ]
    );
    assert_eq!(parsed.versions["nccl_tests_version"], "2.17.8");
    // No NCCL_DEBUG line: decoded from nccl-library=22902.
    assert_eq!(parsed.versions["nccl_version"], "2.29.2");
    let details = nccl_details(&parsed);
    assert_eq!(details.hosts(), ["gpu-1-1", "gpu-1-7"]);
    assert_eq!(details.ranks[1].bus_id, "0009:01:00");
    assert_eq!(details.min_bandwidth_check, None);
}

#[test]
fn nccl_run_that_died_before_the_table_is_an_error() {
    let err = parse_err("nccl-all-reduce", "gpus-busy-no-table-issue-369.log");
    assert_eq!(err.line, None);
    assert_eq!(
        err.to_string(),
        "cannot read nccl-all-reduce output: no result table (no `#  size  count  type …` \
         header) in the log"
    );
}

#[test]
fn nccl_prefers_the_json_report_over_the_table() {
    let parsed = parse("nccl-all-reduce", "handmade-json-report.log");
    let details = nccl_details(&parsed);
    assert_eq!(format!("{:?}", details.source), "Json");
    assert_eq!(details.sizes.len(), 31);
    assert_eq!(details.min_bandwidth_check, None, "okay is \"unchecked\"");
    assert_eq!(details.ranks.len(), 16);
    assert_eq!(parsed.versions["nccl_tests_version"], "2.17.6");
    assert_eq!(parsed.versions["nccl_version"], "2.27.7");
    // The report keeps the unrounded figures the table shows to two decimals.
    let table = parse("nccl-all-reduce", "handmade-truncated-json-after-table.log");
    let rounded = |p: &Parsed| {
        p.metrics["largest_size_bus_bandwidth"]
            .with_scale_round(2, bigdecimal::RoundingMode::HalfEven)
            .to_string()
    };
    assert_eq!(rounded(&parsed), rounded(&table));
    assert_snapshot!(render(&parsed));
}

#[test]
fn nccl_truncated_json_falls_back_to_the_table() {
    let parsed = parse("nccl-all-reduce", "handmade-truncated-json-after-table.log");
    assert_eq!(format!("{:?}", nccl_details(&parsed).source), "Table");
    assert_eq!(metric(&parsed, "largest_size_bus_bandwidth"), "367.03");
}

#[test]
fn nccl_truncated_json_without_a_table_names_the_line() {
    let err = parse_err("nccl-all-reduce", "handmade-truncated-json.log");
    assert_eq!(err.suite, "nccl-all-reduce");
    assert_eq!(err.line, Some(2));
    assert!(err.message.contains("truncated"), "{err}");
    assert!(
        err.to_string().starts_with(
            "cannot read nccl-all-reduce output (line 2): the JSON document is truncated"
        ),
        "{err}"
    );
}

#[test]
fn nccl_unfinished_run_is_an_error() {
    let log = fixture("nccl-all-reduce", "mpirun-2x8-h100-issue-309.log");
    let cut: String = log.lines().take(50).map(|l| format!("{l}\n")).collect();
    let err = suite("nccl-all-reduce").parse(&cut).expect_err("no footer");
    assert!(err.message.contains("did not finish"), "{err}");

    // A row cut in the middle is named by its line.
    let mut broken = cut.clone();
    broken.push_str("  1073741824     268435456     float     sum      -1  5511.28  194.83\n");
    broken.push_str("# Avg bus bandwidth    : 126.746 \n");
    let err = suite("nccl-all-reduce")
        .parse(&broken)
        .expect_err("short row");
    assert_eq!(err.line, Some(51));
    assert!(
        err.message
            .contains("expected at least 13 columns, found 7"),
        "{err}"
    );
}

// ---- nvbandwidth -------------------------------------------------------------------------

#[test]
fn nvbandwidth_text_output_reports_each_sum_and_the_header() {
    // nvbandwidth v0.6 on a GH200, text output with `Waived:` lines.
    let parsed = parse("nvbandwidth", "gh200-text-v0.6-superbench.log");
    assert_eq!(metric(&parsed, "host_to_device_memcpy_ce"), "1985.60");
    assert_eq!(
        metric(&parsed, "host_to_all_bidirectional_memcpy_sm"),
        "247.56"
    );
    assert_eq!(metric(&parsed, "host_device_latency_sm"), "772.58");
    assert_eq!(parsed.metrics.len(), 15);
    assert!(parsed.tool_passed());
    let Details::Nvbandwidth(details) = &parsed.details else {
        panic!("nvbandwidth details");
    };
    assert_eq!(details.devices, ["0: NVIDIA GH200 480GB (00000009:01:00)"]);
    assert_eq!(parsed.versions["nvbandwidth_version"], "v0.6");
    assert_eq!(parsed.versions["driver_version"], "550.54.15");
    assert_eq!(parsed.versions["cuda_runtime_version"], "12040");
    assert_snapshot!(render(&parsed));
}

#[test]
fn nvbandwidth_json_report_reports_each_testcase_sum() {
    let parsed = parse("nvbandwidth", "handmade-h100-8gpu-json.log");
    assert_eq!(
        metric(&parsed, "host_to_device_memcpy_ce"),
        "444.90999999999997"
    );
    assert_eq!(
        metric(&parsed, "device_to_device_memcpy_read_ce"),
        "21804.629999999994"
    );
    assert_eq!(parsed.metrics.len(), 4);
    assert!(parsed.tool_passed());
    let Details::Nvbandwidth(details) = &parsed.details else {
        panic!("nvbandwidth details");
    };
    assert_eq!(details.driver_version.as_deref(), Some("570.133.20"));
    assert_eq!(details.devices.len(), 8);
    assert_eq!(parsed.versions["driver_version"], "570.133.20");
}

#[test]
fn nvbandwidth_testcase_error_fails_and_waived_is_recorded() {
    let parsed = parse("nvbandwidth", "handmade-testcase-error-json.log");
    assert_eq!(
        parsed.metrics.keys().collect::<Vec<_>>(),
        ["device_to_host_memcpy_ce", "host_to_device_memcpy_ce"]
    );
    assert_eq!(
        parsed.failures,
        [
            "testcase device_to_device_memcpy_read_ce failed: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: \
          peer access is not supported between these two devices"
        ]
    );
    let Details::Nvbandwidth(details) = &parsed.details else {
        panic!("nvbandwidth details");
    };
    assert_eq!(details.testcases[3].status, "Waived");
}

#[test]
fn nvbandwidth_truncated_report_is_an_error() {
    let err = parse_err("nvbandwidth", "handmade-truncated-json.log");
    assert!(err.message.contains("truncated"), "{err}");
    assert!(err.line.is_some());
}

// ---- dcgm-diag ---------------------------------------------------------------------------

fn dcgm_details(parsed: &Parsed) -> &dcgm::DiagDetails {
    let Details::DcgmDiag(details) = &parsed.details else {
        panic!("dcgm details");
    };
    details
}

#[test]
fn dcgm_3_report_with_null_entries_and_no_summaries() {
    // DCGM 3.1.0, 8 GPUs, every test PASS; `null` between tests, statuses in results only.
    let parsed = parse("dcgm-diag", "dcgm-3.1.0-8gpu-pass.json");
    assert!(parsed.tool_passed(), "{:?}", parsed.failures);
    assert_eq!(metric(&parsed, "tests_passed"), "10");
    assert_eq!(metric(&parsed, "tests_failed"), "0");
    assert_eq!(metric(&parsed, "gpus_failed"), "0");
    let details = dcgm_details(&parsed);
    assert_eq!(details.tests[0].name, "Denylist");
    // "gpu_ids": "0,1,2,3,4,5,6,7" is one result per GPU.
    assert_eq!(details.tests[0].results.len(), 8);
    assert_eq!(details.tests[9].category, "Custom");
    assert_eq!(parsed.versions["dcgm_version"], "3.1.0");
    assert_snapshot!(render(&parsed));
}

#[test]
fn dcgm_4_failed_software_test_names_the_gpu_and_the_versions() {
    // `dcgmi diag -r 1 -j` on a GB10, DCGM 4.2.3: persistence mode off fails `software`.
    let parsed = parse("dcgm-diag", "gb10-level1-4.2.3-software-fail.json");
    assert_eq!(metric(&parsed, "tests_failed"), "1");
    assert_eq!(metric(&parsed, "gpus_failed"), "1");
    assert_eq!(
        parsed.failures,
        [
            "test software failed (GPU 0: Persistence Mode: Persistence mode for GPU 0 is \
             disabled. Enable persistence mode by running \"nvidia-smi -i <gpuId> -pm 1 \" as \
             root.)"
        ]
    );
    assert_eq!(parsed.versions["dcgm_version"], "4.2.3");
    assert_eq!(parsed.versions["driver_version"], "580.82.09");
    // DCGM writes <<<NOT_SUPPORTED>>> for a GPU without a serial; that is no serial.
    assert!(dcgm_details(&parsed).gpu_serials.is_empty());
}

#[test]
fn dcgm_runtime_error_fails_the_run() {
    let parsed = parse("dcgm-diag", "handmade-runtime-error.json");
    assert_eq!(
        parsed.failures,
        [
            "the diagnostic stopped: Unable to run diagnostics: the NVIDIA host engine is not \
          running (DCGM_ST_CONNECTION_NOT_VALID)."
        ]
    );
}

#[test]
fn dcgm_truncated_and_missing_reports() {
    let report = fixture("dcgm-diag", "dcgm-3.1.0-8gpu-pass.json");
    let cut: String = report.lines().take(40).map(|l| format!("{l}\n")).collect();
    let err = suite("dcgm-diag").parse(&cut).expect_err("truncated");
    assert!(err.message.contains("truncated"), "{err}");
    let err = suite("dcgm-diag")
        .parse("Error: unable to connect to host engine\n")
        .expect_err("no report");
    assert!(err.message.contains("-j"), "{err}");
}

#[test]
fn dcgm_exit_226_is_a_failed_diagnostic_not_a_crash() {
    assert_eq!(dcgm::exit_outcome(226), ExitOutcome::DiagnosticFailed);
    assert_eq!(dcgm::exit_outcome(205), ExitOutcome::IsolationRequired);
    assert_eq!(dcgm::exit_outcome(0), ExitOutcome::Passed);
    assert_eq!(dcgm::exit_outcome(1), ExitOutcome::Crashed(1));
    assert_eq!(
        dcgm::DiagLevel::Long.command(),
        ["dcgmi", "diag", "-r", "3", "-j"]
    );
}

// ---- aiperf ------------------------------------------------------------------------------

#[test]
fn aiperf_export_with_records_and_the_ttft_tag() {
    // AIPerf's example artifact: gpt-oss-20b, streaming chat, 100 requests, 11 cancelled.
    let parsed = parse("aiperf", "gpt-oss-20b-streaming-records-export.json");
    assert_eq!(metric(&parsed, "request_throughput"), "9.551622221540914");
    assert_eq!(
        metric(&parsed, "time_to_first_token_p99"),
        "3833.3894000399996"
    );
    assert_eq!(
        metric(&parsed, "inter_token_latency_avg"),
        "27.763065454471807"
    );
    assert_eq!(metric(&parsed, "request_latency_p50"), "9097.345014999999");
    assert_eq!(
        metric(&parsed, "output_token_throughput"),
        "2320.7222350404572"
    );
    assert_eq!(metric(&parsed, "error_request_count"), "11.0");
    assert!(parsed.tool_passed());
    let Details::Aiperf(details) = &parsed.details else {
        panic!("aiperf details");
    };
    assert_eq!(details.errors.len(), 1);
    assert_eq!(
        details.start_time.as_deref(),
        Some("2025-10-03T13:13:39.146443")
    );
    assert_snapshot!(render(&parsed));
}

#[test]
fn aiperf_flat_streaming_export() {
    let parsed = parse("aiperf", "handmade-flat-streaming-export.log");
    assert_eq!(metric(&parsed, "time_to_first_token_p99"), "431.77603");
    assert_eq!(metric(&parsed, "inter_token_latency_avg"), "22.05508");
    assert_eq!(metric(&parsed, "request_throughput"), "5.713482071945137");
    assert!(!parsed.metrics.contains_key("time_to_first_token_p1"));
    assert!(parsed.tool_passed());
}

#[test]
fn aiperf_non_streaming_run_has_no_token_timings() {
    let parsed = parse("aiperf", "handmade-flat-non-streaming-errors.log");
    assert!(
        !parsed
            .metrics
            .keys()
            .any(|k| k.starts_with("time_to_first_token"))
    );
    assert_eq!(metric(&parsed, "error_request_count"), "3");
}

#[test]
fn aiperf_run_whose_every_request_failed_is_a_failed_run() {
    // The export AIPerf writes when every request times out: errors and nothing else.
    let export = r#"{
  "records": {
    "error_request_count": {
      "tag": "error_request_count",
      "unit": "requests",
      "header": "Error Request Count",
      "avg": 5.0,
      "count": 1
    }
  },
  "was_cancelled": false,
  "error_summary": [
    { "error_details": { "code": null, "type": "TimeoutError", "message": "" }, "count": 5 }
  ]
}"#;
    let parsed = suite("aiperf").parse(export).expect("a failed run reads");
    assert_eq!(
        parsed.failures,
        ["every request failed (5.0 errors), so nothing was measured"]
    );
    assert!(!parsed.metrics.contains_key("request_throughput"));
}

#[test]
fn aiperf_bad_exports() {
    assert_eq!(
        parse("aiperf", "handmade-cancelled.log").failures,
        ["the benchmark was cancelled before it finished"]
    );
    let err = parse_err("aiperf", "handmade-wrong-unit.log");
    assert_eq!(
        err.to_string(),
        "cannot read aiperf output (line 1): `request_latency` is in ns, expected ms"
    );
    let err = parse_err("aiperf", "handmade-missing-request-latency.log");
    assert_eq!(err.message, "`request_latency` is missing");
}

// ---- gpu-burn ------------------------------------------------------------------------------

#[test]
fn gpu_burn_all_ok_with_run_together_progress_records() {
    // 8×A100; the captured log lost its `\r`, so one line holds many progress records.
    let parsed = parse("gpu-burn", "a100-8gpu-superbench.log");
    assert_eq!(metric(&parsed, "gpus_tested"), "8");
    assert_eq!(metric(&parsed, "gpus_faulty"), "0");
    // The last record's slowest GPU, not the 0 Gflop/s of the line's first records.
    assert_eq!(metric(&parsed, "gflops_min"), "16890");
    assert!(parsed.tool_passed());
    let Details::GpuBurn(details) = &parsed.details else {
        panic!("gpu-burn details");
    };
    assert_eq!(details.gpu_uuids.len(), 8);
    assert_eq!(
        details.gpu_uuids[0],
        "GPU-b876c63f-396c-f826-5cd0-6b8409990352"
    );
    assert_eq!(details.gflops.len(), 8);
    assert_snapshot!(render(&parsed));
}

#[test]
fn gpu_burn_faulty_gpus_fail_although_the_exit_code_is_zero() {
    // 16 GPUs, every one FAULTY (wilicc/gpu-burn#12: gpu_burn still exited 0).
    let parsed = parse("gpu-burn", "faulty-16gpu-issue-12.log");
    assert_eq!(metric(&parsed, "gpus_tested"), "16");
    assert_eq!(metric(&parsed, "gpus_faulty"), "16");
    assert_eq!(metric(&parsed, "gflops_min"), "6311");
    assert_eq!(parsed.failures.len(), 16);
    assert_eq!(parsed.failures[15], "GPU 15 is FAULTY (calculation errors)");
}

#[test]
fn gpu_burn_unfinished_run() {
    let log = fixture("gpu-burn", "a100-8gpu-superbench.log");
    let (before, _) = log.split_once("Tested 8 GPUs").expect("summary");
    let err = suite("gpu-burn").parse(before).expect_err("no summary");
    assert_eq!(
        err.to_string(),
        "cannot read gpu-burn output: no `Tested N GPUs:` summary: the run did not finish"
    );
    let err = suite("gpu-burn")
        .parse("Tested 2 GPUs:\n\tGPU 0: OK\n")
        .expect_err("short summary");
    assert_eq!(err.line, Some(1));
}

// ---- custom --------------------------------------------------------------------------------

#[test]
fn custom_last_line_metrics() {
    let parsed = parse("custom", "handmade-ok.log");
    assert_snapshot!(render(&parsed), @r"
    loss = 2.3125
    steps = 500
    tokens_per_second = 1832.5
    ");
}

#[test]
fn custom_rejects_non_numbers_empty_and_truncated_logs() {
    let err = parse_err("custom", "handmade-string-value.log");
    assert_eq!(
        err.to_string(),
        "cannot read custom output (line 2): metric `tokens_per_second` is a string, not a number"
    );
    let err = parse_err("custom", "handmade-empty.log");
    assert_eq!(
        err.to_string(),
        "cannot read custom output: the log is empty"
    );
    let err = parse_err("custom", "handmade-truncated.log");
    assert_eq!(err.line, Some(2));
}

// ---- every suite ---------------------------------------------------------------------------

#[test]
fn suites_have_unique_names_and_snake_case_metrics() {
    let mut names: Vec<&str> = SUITES.iter().map(|s| s.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SUITES.len());
    for s in SUITES {
        for m in s.metrics() {
            let pattern = m.name.starts_with('<') && m.name.ends_with('>');
            let snake = m
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            assert!(pattern || snake, "{}: {}", s.name(), m.name);
            assert!(!m.description.is_empty());
        }
    }
    // What each parser reports is what its suite documents.
    for (suite_name, file) in [
        ("nccl-all-reduce", "mpirun-2x8-h100-issue-309.log"),
        ("dcgm-diag", "dcgm-3.1.0-8gpu-pass.json"),
        ("aiperf", "gpt-oss-20b-streaming-records-export.json"),
        ("gpu-burn", "a100-8gpu-superbench.log"),
    ] {
        let documented: Vec<String> = suite(suite_name)
            .metrics()
            .into_iter()
            .map(|m| m.name)
            .collect();
        for name in parse(suite_name, file).metrics.keys() {
            assert!(
                documented.contains(name),
                "{suite_name}: undocumented {name}"
            );
        }
    }
}

#[test]
fn every_fixture_states_its_source() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/benchmark");
    for s in SUITES {
        let dir = root.join(s.name());
        let sources = fs::read_to_string(dir.join("SOURCES.md"))
            .unwrap_or_else(|e| panic!("{}/SOURCES.md: {e}", s.name()));
        for entry in fs::read_dir(&dir).expect("fixture dir") {
            let name = entry.expect("dir entry").file_name();
            let name = name.to_string_lossy();
            if name == "SOURCES.md" {
                continue;
            }
            assert!(
                sources.contains(&format!("`{name}`")),
                "{}/SOURCES.md does not list {name}",
                s.name()
            );
        }
    }
}

#[test]
fn empty_log_is_an_error_for_every_suite() {
    for s in SUITES {
        let err = s.parse("").expect_err("empty log");
        assert_eq!(err.suite, s.name());
    }
}

/// Every fixture, with its suite.
fn all_fixtures() -> Vec<(&'static dyn Suite, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/benchmark");
    let mut out = Vec::new();
    for s in SUITES {
        let dir = root.join(s.name());
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        files.sort();
        for f in files {
            if f.file_name().is_some_and(|n| n == "SOURCES.md") {
                continue;
            }
            out.push((*s, fs::read_to_string(&f).expect("fixture")));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_input_never_panics(input in ".{0,400}", suite_index in 0..SUITES.len()) {
        let _ = SUITES[suite_index].parse(&input);
    }

    #[test]
    fn truncated_or_mutated_fixtures_never_panic(
        pick in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        junk in "[0-9a-zA-Z#{}\\[\\]\":,. \\n\\r-]{0,12}",
    ) {
        let fixtures = all_fixtures();
        let (s, text) = &fixtures[pick.index(fixtures.len())];
        let bytes = text.as_bytes();
        let end = cut.index(bytes.len() + 1);
        let truncated = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let _ = s.parse(&truncated);
        let pos = at.index(bytes.len() + 1);
        let mut mutated = String::from_utf8_lossy(&bytes[..pos]).into_owned();
        mutated.push_str(&junk);
        mutated.push_str(&String::from_utf8_lossy(&bytes[(pos + junk.len()).min(bytes.len())..]));
        // Every suite reads every fixture: cross-suite input must not panic either.
        for other in SUITES {
            let _ = other.parse(&mutated);
        }
        let _ = s.parse(&mutated);
    }
}

#[test]
fn exit_codes_are_read_per_suite() {
    let dcgm = suite("dcgm-diag");
    assert_eq!(dcgm.exit_failure(0), None);
    // The report names the failed tests; the code is not a failure of its own.
    assert_eq!(dcgm.exit_failure(226), None);
    assert!(
        dcgm.exit_failure(205)
            .is_some_and(|m| m.contains("isolated"))
    );
    assert_eq!(
        dcgm.exit_failure(1).as_deref(),
        Some("dcgmi failed (exit code 1)")
    );
    // Other tools: any non-zero code is a failure.
    assert_eq!(
        suite("custom").exit_failure(3).as_deref(),
        Some("exited with code 3")
    );
    assert_eq!(suite("custom").exit_failure(0), None);
}

/// The lab serves `lab/benchmarks/<suite>.log` as the benchmark pods' logs; what it is
/// served for needs these facts of the real outputs there.
#[test]
fn lab_samples_are_what_the_lab_serves_them_for() {
    let lab = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../lab/benchmarks");
    let read = |suite_name: &str| {
        let path = lab.join(format!("{suite_name}.log"));
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        suite(suite_name)
            .parse(&text)
            .unwrap_or_else(|e| panic!("{suite_name}: {e}"))
    };
    let positive = |p: &Parsed, m: &str| p.metrics[m] > 0;

    // The launcher log of a 2-node × 8-GPU MPI run: 16 ranks over two hosts.
    let nccl = read("nccl-all-reduce");
    assert_eq!(metric(&nccl, "wrong_count"), "0");
    assert!(positive(&nccl, "largest_size_bus_bandwidth"));
    let details = nccl_details(&nccl);
    assert_eq!(details.ranks.len(), 16);
    assert_eq!(details.hosts().len(), 2);
    for host in details.hosts() {
        assert_eq!(details.ranks.iter().filter(|r| r.host == host).count(), 8);
    }

    assert_eq!(metric(&read("dcgm-diag"), "tests_failed"), "0");
    assert!(positive(&read("aiperf"), "request_throughput"));
    assert_eq!(metric(&read("gpu-burn"), "gpus_faulty"), "0");
    assert!(!read("nvbandwidth").metrics.is_empty());
    assert_eq!(metric(&read("custom"), "tokens_per_second"), "1832.5");
    for s in SUITES {
        assert!(read(s.name()).tool_passed(), "{}", s.name());
    }
}
