//! The time-slicing configs gpufleet writes, read by NVIDIA's own parser: the device plugin
//! v0.18.0's `api/config/v1` (`NewConfig` with `--config-file`, then
//! `DisableResourceNamingInConfig`, as the plugin loads its config), run by the small Go
//! program in `device_plugin_config/` (its go.mod pins the module, its go.sum the hashes).
//!
//! Every config a pool can write must be accepted with the replicas it asked for, and a config
//! the parser refuses must fail the check, so the check can fail. gpufleet's plan-time rule
//! for `replicas` is held to the parser's too.
//!
//! Needs Go and the module in Go's module cache; `scripts/setup` downloads it (and warms the
//! build). The program is built offline (`GOPROXY=off`), so the suite never reaches the
//! network; without Go or the module the test fails, saying so. It never skips.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use gpufleet_engine::{
    resources::gpu_node_pool::{time_slicing_config, validate_pool},
    value::Value,
};
use serde_json::Value as Json;

const SETUP: &str = "run scripts/setup: it downloads the Go modules of \
                     engine/tests/device_plugin_config (github.com/NVIDIA/k8s-device-plugin \
                     v0.18.0) from the Go module proxy";

fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/device_plugin_config")
}

/// `go` on PATH, else where the Go tarball installs it (as scripts/setup looks).
fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("go"))
            .find(|g| g.is_file())
    });
    let fallback = PathBuf::from("/usr/local/go/bin/go");
    on_path
        .or_else(|| fallback.is_file().then_some(fallback))
        .unwrap_or_else(|| {
            panic!(
                "this test needs Go 1.26 or newer to run NVIDIA's device plugin config \
                 parser: install it from your distribution or https://go.dev/dl and put `go` \
                 on PATH, then {SETUP}."
            )
        })
}

/// Builds the checker once per test run, offline.
fn checker() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("device-plugin-config-check");
        let out = Command::new(go())
            .current_dir(module_dir())
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            // The module cache only: a missing module is an error, never a download.
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=readonly -buildvcs=false")
            .env("GOTOOLCHAIN", "local")
            .output()
            .expect("run go build");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "building the device plugin config checker failed: {}\n{stderr}",
            if stderr.contains("GOPROXY=off") || stderr.contains("module lookup disabled") {
                format!("a Go module is not in the module cache; {SETUP}")
            } else {
                "see Go's output".to_owned()
            }
        );
        bin
    })
}

/// What the plugin made of one file.
#[derive(Debug)]
struct Verdict {
    accepted: bool,
    json: Json,
}

/// Writes each config to a file of its own and has NVIDIA's parser read them all.
fn parse_all(configs: &[String]) -> Vec<Verdict> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let files: Vec<PathBuf> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = dir.path().join(format!("config-{i}.yaml"));
            std::fs::write(&f, c).expect("write config");
            f
        })
        .collect();
    let out = Command::new(checker())
        .args(&files)
        .output()
        .expect("run the checker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdicts: Vec<Verdict> = stdout
        .lines()
        .map(|l| {
            let json: Json =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("checker printed {l:?}: {e}"));
            Verdict {
                accepted: json["accepted"] == Json::Bool(true),
                json,
            }
        })
        .collect();
    assert_eq!(
        verdicts.len(),
        configs.len(),
        "one verdict per file; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The exit status says the same as the verdicts.
    assert_eq!(
        out.status.success(),
        verdicts.iter().all(|v| v.accepted),
        "{stdout}"
    );
    verdicts
}

#[test]
fn nvidias_parser_accepts_every_time_slicing_config_gpufleet_writes() {
    let replicas = [2_u32, 3, 4, 7, 8, 10, 16, 48, 100];
    let configs: Vec<String> = replicas.iter().map(|r| time_slicing_config(*r)).collect();
    for (r, v) in replicas.iter().zip(parse_all(&configs)) {
        let j = &v.json;
        assert!(v.accepted, "replicas {r}: refused: {j}");
        // Read as gpufleet means it: time-slicing of every whole GPU, r replicas, under the
        // resource name tenants request, nothing renamed, requests above one allowed.
        assert_eq!(j["strategy"], "time-slicing", "{j}");
        assert_eq!(j["migStrategy"], "none", "{j}");
        assert_eq!(j["renameByDefault"], false, "{j}");
        assert_eq!(j["failRequestsGreaterThanOne"], false, "{j}");
        let resources = j["resources"].as_array().expect("resources");
        assert_eq!(resources.len(), 1, "{j}");
        assert_eq!(resources[0]["name"], "nvidia.com/gpu", "{j}");
        assert_eq!(resources[0]["rename"], "", "{j}");
        assert_eq!(resources[0]["devices"], "all", "{j}");
        assert_eq!(resources[0]["replicas"], u64::from(*r), "{j}");
    }
}

#[test]
fn the_check_fails_on_configs_nvidias_parser_refuses() {
    let configs = [
        // What a pool would write with one replica: the plugin refuses it.
        time_slicing_config(1),
        // Not YAML.
        "version: v1\nsharing: [\n".to_owned(),
        // A version the plugin does not know.
        time_slicing_config(4).replace("version: v1", "version: v2"),
        // Time-slicing without resources.
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: false\n".to_owned(),
    ];
    let verdicts = parse_all(&configs);
    for (c, v) in configs.iter().zip(&verdicts) {
        assert!(!v.accepted, "accepted:\n{c}\n{}", v.json);
    }
    let error = |i: usize| {
        verdicts[i].json["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        error(0).contains("number of replicas must be >= 2"),
        "{}",
        error(0)
    );
    assert!(error(2).contains("unknown version"), "{}", error(2));
    assert!(error(3).contains("no resources specified"), "{}", error(3));
}

/// A pool's configuration with time-slicing `replicas`, as Terraform would send it.
fn pool_with_replicas(replicas: i64) -> Value {
    Value::object([
        ("name", Value::string("infer")),
        ("virtual_cluster_id", Value::string("vc-a/a")),
        ("gpu_product", Value::string("NVIDIA-H100-80GB-HBM3")),
        ("node_count", Value::int(1)),
        ("source", Value::string("host")),
        (
            "sharing",
            Value::object([
                ("strategy", Value::string("time-slicing")),
                ("replicas", Value::int(replicas)),
                ("mig_config", Value::Null),
            ]),
        ),
    ])
}

#[test]
fn plan_refuses_exactly_the_replicas_nvidias_parser_refuses() {
    let counts: Vec<i64> = (0..=4).collect();
    let configs: Vec<String> = counts
        .iter()
        .map(|r| time_slicing_config(u32::try_from(*r).expect("small")))
        .collect();
    for (r, v) in counts.iter().zip(parse_all(&configs)) {
        let planned_ok = !validate_pool(&pool_with_replicas(*r)).has_error();
        assert_eq!(
            planned_ok, v.accepted,
            "replicas = {r}: gpufleet's plan says {planned_ok}, NVIDIA's parser {}",
            v.json
        );
    }
}
