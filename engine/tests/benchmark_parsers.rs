//! The benchmark suites' parsers against recorded sample logs (8×H100 nodes, 2 nodes for
//! nccl-tests): exact metric values, the tools' own verdicts, the errors users see for broken
//! logs, and a property test that no input makes a parser panic.

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

#[test]
fn nccl_table_reports_the_largest_size_and_the_average() {
    let parsed = parse("nccl-all-reduce", "table-2node.log");
    // 8 GiB row: out-of-place 368.73, in-place 367.03; the lower one counts.
    assert_eq!(metric(&parsed, "largest_size_bus_bandwidth"), "367.03");
    assert_eq!(metric(&parsed, "average_bus_bandwidth"), "126.746");
    assert_eq!(metric(&parsed, "wrong_count"), "0");
    assert_eq!(metric(&parsed, "out_of_bounds_count"), "0");
    assert!(parsed.tool_passed());
    let Details::NcclAllReduce(details) = &parsed.details else {
        panic!("nccl details");
    };
    assert_eq!(details.largest_size_bytes, 8_589_934_592);
    assert_eq!(details.sizes.len(), 31);
    assert_snapshot!(render(&parsed));
}

#[test]
fn nccl_prefers_the_json_report_over_the_table() {
    let parsed = parse("nccl-all-reduce", "json-2node.log");
    let Details::NcclAllReduce(details) = &parsed.details else {
        panic!("nccl details");
    };
    assert_eq!(format!("{:?}", details.source), "Json");
    assert_eq!(details.sizes.len(), 31);
    assert_eq!(details.min_bandwidth_check, None, "okay is \"unchecked\"");
    // The report keeps the unrounded figures the table shows to two decimals.
    let table = parse("nccl-all-reduce", "table-2node.log");
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
    let parsed = parse("nccl-all-reduce", "truncated-json-after-table.log");
    let Details::NcclAllReduce(details) = &parsed.details else {
        panic!("nccl details");
    };
    assert_eq!(format!("{:?}", details.source), "Table");
    assert_eq!(metric(&parsed, "largest_size_bus_bandwidth"), "367.03");
}

#[test]
fn nccl_truncated_json_without_a_table_names_the_line() {
    let err = parse_err("nccl-all-reduce", "truncated-json.log");
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
fn nccl_missing_table_is_an_error() {
    let err = parse_err("nccl-all-reduce", "missing-table.log");
    assert_eq!(err.line, None);
    assert_eq!(
        err.to_string(),
        "cannot read nccl-all-reduce output: no result table (no `#  size  count  type …` \
         header) in the log"
    );
}

#[test]
fn nccl_wrong_values_and_min_bandwidth_fail_the_run() {
    let parsed = parse("nccl-all-reduce", "wrong-values.log");
    assert_eq!(metric(&parsed, "wrong_count"), "1200006");
    assert_eq!(metric(&parsed, "out_of_bounds_count"), "3");
    assert_eq!(
        parsed.failures,
        [
            "1200006 wrong elements in the results",
            "3 out-of-bounds values in the results",
            "average bus bandwidth below NCCL_TESTS_MIN_BW",
        ]
    );
}

#[test]
fn nccl_unfinished_run_is_an_error() {
    let log = fixture("nccl-all-reduce", "table-2node.log");
    let cut: String = log.lines().take(40).map(|l| format!("{l}\n")).collect();
    let err = suite("nccl-all-reduce").parse(&cut).expect_err("no footer");
    assert!(err.message.contains("did not finish"), "{err}");

    // A row cut in the middle is named by its line.
    let mut broken: String = log.lines().take(40).map(|l| format!("{l}\n")).collect();
    broken.push_str("  1073741824     268435456     float     sum      -1  5511.28  194.83\n");
    broken.push_str("# Avg bus bandwidth    : 126.746 \n");
    let err = suite("nccl-all-reduce")
        .parse(&broken)
        .expect_err("short row");
    assert_eq!(err.line, Some(41));
    assert!(
        err.message
            .contains("expected at least 13 columns, found 7"),
        "{err}"
    );
}

// ---- nvbandwidth -------------------------------------------------------------------------

#[test]
fn nvbandwidth_reports_each_testcase_sum() {
    let parsed = parse("nvbandwidth", "h100-8gpu.log");
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
    assert_snapshot!(render(&parsed));
}

#[test]
fn nvbandwidth_testcase_error_fails_and_waived_is_recorded() {
    let parsed = parse("nvbandwidth", "testcase-error.log");
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
fn nvbandwidth_truncated_report_and_text_fallback() {
    let err = parse_err("nvbandwidth", "truncated.log");
    assert!(err.message.contains("truncated"), "{err}");
    assert!(err.line.is_some());

    let text = "Running host_to_device_memcpy_ce.\n\
                memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n\
                \x20          0         1\n\
                \x200     55.57     55.64\n\
                \n\
                SUM host_to_device_memcpy_ce 111.21\n";
    let parsed = suite("nvbandwidth").parse(text).expect("text output");
    assert_eq!(metric(&parsed, "host_to_device_memcpy_ce"), "111.21");
}

// ---- dcgm-diag ---------------------------------------------------------------------------

#[test]
fn dcgm_level3_pass() {
    let parsed = parse("dcgm-diag", "level3-pass.json");
    assert!(parsed.tool_passed(), "{:?}", parsed.failures);
    assert_eq!(metric(&parsed, "tests_passed"), "17");
    assert_eq!(metric(&parsed, "tests_failed"), "0");
    let Details::DcgmDiag(details) = &parsed.details else {
        panic!("dcgm details");
    };
    assert_eq!(details.tests.len(), 18);
    assert_eq!(details.dcgm_version.as_deref(), Some("4.2.3"));
    assert_eq!(details.gpu_serials.len(), 8);
    assert_snapshot!(render(&parsed));
}

#[test]
fn dcgm_memory_failure_names_the_gpu() {
    let parsed = parse("dcgm-diag", "level3-memory-fail.json");
    assert_eq!(metric(&parsed, "tests_failed"), "1");
    assert_eq!(metric(&parsed, "gpus_failed"), "1");
    assert_eq!(parsed.failures.len(), 1);
    assert!(
        parsed.failures[0].starts_with("test memory failed (GPU 5: "),
        "{:?}",
        parsed.failures
    );
    assert_snapshot!(render(&parsed));
}

#[test]
fn dcgm_runtime_error_fails_the_run() {
    let parsed = parse("dcgm-diag", "runtime-error.json");
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
    let err = parse_err("dcgm-diag", "truncated.json");
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
fn aiperf_streaming_run() {
    let parsed = parse("aiperf", "streaming-70b.log");
    assert_eq!(metric(&parsed, "time_to_first_token_p99"), "431.77603");
    assert_eq!(metric(&parsed, "inter_token_latency_avg"), "22.05508");
    assert_eq!(metric(&parsed, "request_latency_p50"), "11163.95517");
    assert_eq!(metric(&parsed, "request_throughput"), "5.713482071945137");
    assert_eq!(
        metric(&parsed, "output_token_throughput"),
        "2856.7410359725686"
    );
    assert!(!parsed.metrics.contains_key("time_to_first_token_p1"));
    assert!(parsed.tool_passed());
    assert_snapshot!(render(&parsed));
}

#[test]
fn aiperf_non_streaming_run_has_no_token_timings() {
    let parsed = parse("aiperf", "non-streaming-errors.log");
    assert!(
        !parsed
            .metrics
            .keys()
            .any(|k| k.starts_with("time_to_first_token"))
    );
    assert_eq!(metric(&parsed, "error_request_count"), "3");
    let Details::Aiperf(details) = &parsed.details else {
        panic!("aiperf details");
    };
    assert_eq!(details.errors.len(), 1);
}

#[test]
fn aiperf_bad_exports() {
    assert_eq!(
        parse("aiperf", "cancelled.log").failures,
        ["the benchmark was cancelled before it finished"]
    );
    let err = parse_err("aiperf", "wrong-unit.log");
    assert_eq!(
        err.to_string(),
        "cannot read aiperf output (line 1): `request_latency` is in ns, expected ms"
    );
    let err = parse_err("aiperf", "missing-request-latency.log");
    assert_eq!(err.message, "`request_latency` is missing");
}

// ---- gpu-burn ------------------------------------------------------------------------------

#[test]
fn gpu_burn_all_ok() {
    let parsed = parse("gpu-burn", "all-ok.log");
    assert_eq!(metric(&parsed, "gpus_tested"), "8");
    assert_eq!(metric(&parsed, "gpus_faulty"), "0");
    assert!(parsed.tool_passed());
    assert_snapshot!(render(&parsed));
}

#[test]
fn gpu_burn_faulty_gpu_fails_although_the_exit_code_is_zero() {
    let parsed = parse("gpu-burn", "gpu3-faulty.log");
    assert_eq!(metric(&parsed, "gpus_faulty"), "1");
    assert_eq!(metric(&parsed, "gflops_min"), "47689");
    assert_eq!(parsed.failures, ["GPU 3 is FAULTY (calculation errors)"]);
}

#[test]
fn gpu_burn_unfinished_run() {
    let err = parse_err("gpu-burn", "unfinished.log");
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
    let parsed = parse("custom", "ok.log");
    assert_snapshot!(render(&parsed), @r"
    loss = 2.3125
    steps = 500
    tokens_per_second = 1832.5
    ");
}

#[test]
fn custom_rejects_non_numbers_empty_and_truncated_logs() {
    let err = parse_err("custom", "string-value.log");
    assert_eq!(
        err.to_string(),
        "cannot read custom output (line 2): metric `tokens_per_second` is a string, not a number"
    );
    let err = parse_err("custom", "empty.log");
    assert_eq!(
        err.to_string(),
        "cannot read custom output: the log is empty"
    );
    let err = parse_err("custom", "truncated.log");
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
        ("nccl-all-reduce", "table-2node.log"),
        ("dcgm-diag", "level3-pass.json"),
        ("aiperf", "streaming-70b.log"),
        ("gpu-burn", "all-ok.log"),
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
