//! The container's command ([`command`]): as configured, `mpirun` across the gang for a
//! multi-node `nccl-all-reduce` ([`mpirun`]), or the suite's own invocation. The
//! single-node suites' commands are each as its tool's project documents it, shaped by the
//! parameters. Pure.
//!
//! | suite | command |
//! |---|---|
//! | `nvbandwidth` | `nvbandwidth -j [-t <testcase>…] [-b <MiB>] [-i <samples>]` |
//! | `dcgm-diag` | embedded host engine: `sh -c` starting `nv-hostengine`, waiting for it, then `dcgmi diag -r <level> -j`; remote: `dcgmi diag -r <level> -j --host <host[:port]>` |
//! | `aiperf` | `sh -c 'aiperf profile --model … --url … [--api-key "$GPUFLEET_ENDPOINT_API_KEY"] --endpoint-type … [--streaming] --concurrency … --artifact-dir /tmp/aiperf && cat /tmp/aiperf/profile_export_aiperf.json'` |
//! | `gpu-burn` | `./gpu_burn [-d] [-tc] [-m <X|N%>] <seconds>` |
//!
//! Values that go through `sh -c` are read from the `GPUFLEET_PARAM_*` environment inside
//! the script, never spliced into it, so a parameter cannot change the script.

use super::model::BenchmarkSpec;

/// The variable a run's container reads the endpoint's API key from.
pub const ENDPOINT_API_KEY_ENV: &str = "GPUFLEET_ENDPOINT_API_KEY";

/// `parameters.host_engine` value that starts a host engine inside the container.
pub const EMBEDDED_HOST_ENGINE: &str = "embedded";

/// The default DCGM diagnostic level.
pub const DEFAULT_DCGM_LEVEL: &str = "2";

/// The default AIPerf endpoint type.
pub const DEFAULT_ENDPOINT_TYPE: &str = "chat";

/// Where AIPerf writes its artifacts inside the container.
pub const AIPERF_ARTIFACT_DIR: &str = "/tmp/aiperf";

/// Seconds nv-hostengine gets to start answering before the run gives up.
const HOST_ENGINE_WAIT_SECONDS: u32 = 30;

fn param<'a>(spec: &'a BenchmarkSpec, key: &str) -> Option<&'a str> {
    spec.parameters.get(key).map(String::as_str)
}

/// `"true"` → true; anything else → false (plan refuses values other than true/false).
fn flag(spec: &BenchmarkSpec, key: &str, default: bool) -> bool {
    param(spec, key).map_or(default, |v| v == "true")
}

/// Whether an AIPerf run streams, as configured (`parameters.streaming`, default `"true"`).
pub fn aiperf_streaming(spec: &BenchmarkSpec) -> bool {
    flag(spec, "streaming", true)
}

/// The command of `spec`'s suite when it is one of the single-node suites, else `None`.
pub fn suite_command(spec: &BenchmarkSpec) -> Option<Vec<String>> {
    match spec.suite.name() {
        "nvbandwidth" => Some(nvbandwidth(spec)),
        "dcgm-diag" => Some(dcgm_diag(spec)),
        "aiperf" => Some(aiperf(spec)),
        "gpu-burn" => Some(gpu_burn(spec)),
        _ => None,
    }
}

fn nvbandwidth(spec: &BenchmarkSpec) -> Vec<String> {
    let mut c = vec!["nvbandwidth".to_owned(), "-j".to_owned()];
    if let Some(list) = param(spec, "testcases") {
        let names: Vec<&str> = list
            .split(|ch: char| ch == ',' || ch.is_whitespace())
            .filter(|n| !n.is_empty())
            .collect();
        if !names.is_empty() {
            // `-t` takes several testcases after one flag.
            c.push("-t".to_owned());
            c.extend(names.into_iter().map(str::to_owned));
        }
    }
    for (key, option) in [("buffer_size", "-b"), ("samples", "-i")] {
        if let Some(v) = param(spec, key) {
            c.extend([option.to_owned(), v.to_owned()]);
        }
    }
    c
}

fn dcgm_diag(spec: &BenchmarkSpec) -> Vec<String> {
    let level = param(spec, "level").unwrap_or(DEFAULT_DCGM_LEVEL);
    match param(spec, "host_engine").unwrap_or(EMBEDDED_HOST_ENGINE) {
        EMBEDDED_HOST_ENGINE => {
            // nv-hostengine daemonizes and listens on 127.0.0.1:5555; dcgmi's default host.
            // `exec` keeps dcgmi's exit code (226: the diagnostic found a failure).
            let script = format!(
                "nv-hostengine || exit 1\n\
                 i=0\n\
                 until dcgmi discovery -l >/dev/null 2>&1; do\n  \
                   i=$((i+1))\n  \
                   if [ \"$i\" -ge {HOST_ENGINE_WAIT_SECONDS} ]; then echo 'nv-hostengine did not start' >&2; exit 1; fi\n  \
                   sleep 1\n\
                 done\n\
                 exec dcgmi diag -r \"${{GPUFLEET_PARAM_LEVEL:-{DEFAULT_DCGM_LEVEL}}}\" -j\n"
            );
            vec!["sh".to_owned(), "-c".to_owned(), script]
        }
        host => ["dcgmi", "diag", "-r", level, "-j", "--host", host]
            .map(str::to_owned)
            .to_vec(),
    }
}

fn aiperf(spec: &BenchmarkSpec) -> Vec<String> {
    let streaming = if aiperf_streaming(spec) {
        " --streaming"
    } else {
        ""
    };
    let api_key = if spec.endpoint_api_key {
        format!(" --api-key \"${ENDPOINT_API_KEY_ENV}\"")
    } else {
        String::new()
    };
    let script = format!(
        "aiperf profile --model \"$GPUFLEET_PARAM_MODEL\" --url \"$GPUFLEET_PARAM_URL\"{api_key} \
         --endpoint-type \"${{GPUFLEET_PARAM_ENDPOINT_TYPE:-{DEFAULT_ENDPOINT_TYPE}}}\"{streaming} \
         --concurrency \"${{GPUFLEET_PARAM_CONCURRENCY:-1}}\" --artifact-dir {AIPERF_ARTIFACT_DIR} \
         && cat {AIPERF_ARTIFACT_DIR}/profile_export_aiperf.json"
    );
    vec!["sh".to_owned(), "-c".to_owned(), script]
}

fn gpu_burn(spec: &BenchmarkSpec) -> Vec<String> {
    // The project's image keeps gpu_burn and its compare.ptx in the working directory.
    let mut c = vec!["./gpu_burn".to_owned()];
    if flag(spec, "doubles", false) {
        c.push("-d".to_owned());
    }
    if flag(spec, "tensor_cores", false) {
        c.push("-tc".to_owned());
    }
    if let Some(m) = param(spec, "memory") {
        c.extend(["-m".to_owned(), m.to_owned()]);
    }
    c.push(param(spec, "seconds").unwrap_or("60").to_owned());
    c
}

/// The container command: as configured, or the suite's usual invocation.
pub fn command(spec: &BenchmarkSpec) -> Vec<String> {
    if let Some(c) = &spec.command {
        return c.clone();
    }
    let gpus = spec.gpus_per_node.to_string();
    let v = |xs: &[&str]| xs.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    match spec.suite.name() {
        // Across nodes: the launcher's mpirun, one rank per GPU.
        "nccl-all-reduce" if spec.nodes > 1 => mpirun(spec, None),
        "nccl-all-reduce" => v(&[
            "all_reduce_perf",
            "-b",
            param_or(spec, "min_bytes", "8"),
            "-e",
            param_or(spec, "max_bytes", "8G"),
            "-f",
            param_or(spec, "step_factor", "2"),
            "-g",
            &gpus,
        ]),
        // The single-node suites, as their projects document them.
        _ => suite_command(spec).unwrap_or_default(),
    }
}

fn param_or<'a>(spec: &'a BenchmarkSpec, key: &str, default: &'a str) -> &'a str {
    spec.parameters.get(key).map_or(default, String::as_str)
}

/// MPI ranks: one per GPU of the gang.
pub fn ranks(spec: &BenchmarkSpec) -> u32 {
    spec.nodes * spec.gpus_per_node
}

/// The `mpirun` command of a multi-node run: `nodes × gpus_per_node` ranks, `gpus_per_node`
/// per node, each driving one GPU; `hostfile` when the launcher writes its own (the MPI
/// Operator's comes in `OMPI_MCA_orte_default_hostfile`). A configured `command` is the
/// launcher's command as it is.
pub fn mpirun(spec: &BenchmarkSpec, hostfile: Option<&str>) -> Vec<String> {
    if let Some(c) = &spec.command {
        return c.clone();
    }
    let param = |key: &str, default: &str| {
        spec.parameters
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    };
    let mut argv: Vec<String> = vec!["mpirun".into(), "--allow-run-as-root".into()];
    if let Some(h) = hostfile {
        argv.extend(["--hostfile".into(), h.to_owned()]);
    }
    argv.extend([
        "-np".into(),
        ranks(spec).to_string(),
        "--map-by".into(),
        format!("ppr:{}:node", spec.gpus_per_node),
        "--bind-to".into(),
        "none".into(),
        // NCCL_DEBUG=INFO makes NCCL print its version, which the record keeps.
        "-x".into(),
        "NCCL_DEBUG=INFO".into(),
        "-x".into(),
        "LD_LIBRARY_PATH".into(),
        "-x".into(),
        "PATH".into(),
        "all_reduce_perf_mpi".into(),
        "-b".into(),
        param("min_bytes", "8"),
        "-e".into(),
        param("max_bytes", "8G"),
        "-f".into(),
        param("step_factor", "2"),
        "-g".into(),
        "1".into(),
    ]);
    argv
}
