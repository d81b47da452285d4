//! `gpufleet_benchmark` with the real Terraform CLI against the shared lab: every suite runs
//! as a Job on a dedicated pool's nodes, its log (the lab's recorded sample, served by kwok)
//! is read through the API and parsed; environments hash the same in fresh workdirs;
//! thresholds fail the apply (and the next apply runs again) or only record; a gang larger
//! than its pool fails within its deadline; and nothing the runs made is left behind.
//!
//! The tests share one lab and run at once, so each has its own tenant and takes A100 nodes
//! (16 in the lab; these tests hold at most 8 at a time).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::{Engine, engine::general_purpose::STANDARD};

use gpufleet_acceptance::Session;
use gpufleet_lab::{Lab, rest::KubeRest};
use serde_json::Value;

const A100: &str = "NVIDIA-A100-SXM4-80GB";

/// A dedicated tenant `tenant` with a pool of `nodes` A100 nodes, plus `benchmarks`.
fn config(tenant: &str, nodes: u32, benchmarks: &str) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}

provider "gpufleet" {{}}

resource "gpufleet_virtual_cluster" "t" {{
  name      = "{tenant}"
  isolation = "dedicated"
}}

resource "gpufleet_gpu_node_pool" "p" {{
  name               = "a100"
  virtual_cluster_id = gpufleet_virtual_cluster.t.id
  gpu_product        = "{A100}"
  node_count         = {nodes}
}}
{benchmarks}
"#
    )
}

/// One benchmark on the tenant's pool; `extra` is more attribute lines.
fn benchmark(name: &str, suite: &str, extra: &str) -> String {
    format!(
        r#"
resource "gpufleet_benchmark" "{name}" {{
  name               = "{name}"
  virtual_cluster_id = gpufleet_virtual_cluster.t.id
  node_pool_id       = gpufleet_gpu_node_pool.p.id
  suite              = "{suite}"
  image              = "nvcr.io/nvidia/pytorch:25.04-py3"
  {extra}
}}
"#
    )
}

fn host(lab: &Lab) -> KubeRest {
    KubeRest::from_kubeconfig(&lab.kubeconfig_path()).expect("host client")
}

/// Names of the Jobs, Services, pods, Secrets and MPIJobs a benchmark made (`gfb-…`) in
/// `namespace`.
fn benchmark_objects(host: &KubeRest, namespace: &str) -> Vec<String> {
    let mut left = Vec::new();
    for (kind, path) in [
        ("job", format!("/apis/batch/v1/namespaces/{namespace}/jobs")),
        (
            "service",
            format!("/api/v1/namespaces/{namespace}/services"),
        ),
        ("pod", format!("/api/v1/namespaces/{namespace}/pods")),
        ("secret", format!("/api/v1/namespaces/{namespace}/secrets")),
        (
            "mpijob",
            format!("/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"),
        ),
    ] {
        for o in host.list(&path).expect("list") {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            if name.starts_with("gfb-") {
                left.push(format!("{kind}/{name}"));
            }
        }
    }
    left
}

/// The tenant's host namespace, from the virtual cluster in `s`'s state.
fn host_namespace(s: &Session) -> String {
    s.resource("gpufleet_virtual_cluster.t")["namespace"]
        .as_str()
        .expect("the host namespace")
        .to_owned()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

fn number(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(f64::NAN)
}

#[test]
fn every_suite_runs_on_its_pool_and_leaves_nothing() {
    let lab = Lab::shared();
    let host = host(lab);
    let runs = [
        benchmark(
            "nccl",
            "nccl-all-reduce",
            r#"nodes = 2
  gpus_per_node = 8
  parameters = { min_bytes = "8", max_bytes = "16G" }
  thresholds = { largest_size_bus_bandwidth = { min = 100 }, wrong_count = { max = 0 } }"#,
        ),
        benchmark(
            "nvbw",
            "nvbandwidth",
            "nodes = 2\n  thresholds = { host_to_device_memcpy_ce = { min = 1000 } }",
        ),
        benchmark(
            "dcgm",
            "dcgm-diag",
            r#"parameters = { level = "2" }
  thresholds = { tests_failed = { max = 0 } }"#,
        ),
        benchmark(
            "aiperf",
            "aiperf",
            r#"parameters = { model = "meta-llama/Llama-3.1-8B-Instruct", url = "http://vllm.inference.svc:8000" }"#,
        ),
        benchmark(
            "burn",
            "gpu-burn",
            "thresholds = { gpus_faulty = { max = 0 } }",
        ),
        benchmark(
            "custom",
            "custom",
            r#"command = ["python", "/bench/step.py"]
  repeats = 3
  thresholds = { tokens_per_second = { min = 1500 } }"#,
        ),
    ]
    .concat();
    let s = Session::new(&config("bench-suites", 2, &runs), lab.settings_env());
    // A failed check must not leave the pool holding its nodes for the other tests.
    let _destroy = s.destroy_on_panic();
    s.apply();
    s.assert_plan_empty();

    let pool = s.resource("gpufleet_gpu_node_pool.p");
    let pool_nodes = strings(&pool["nodes"]);
    assert_eq!(pool_nodes.len(), 2, "{pool}");
    let namespace = host_namespace(&s);

    for (name, metric, expected) in [
        ("nccl", "wrong_count", Some(0.0)),
        ("nccl", "largest_size_bus_bandwidth", None),
        ("nvbw", "host_to_device_memcpy_ce", Some(1985.6)),
        ("dcgm", "tests_failed", Some(0.0)),
        ("aiperf", "request_throughput", None),
        ("burn", "gpus_faulty", Some(0.0)),
        ("custom", "tokens_per_second", Some(1832.5)),
    ] {
        let r = s.resource(&format!("gpufleet_benchmark.{name}"));
        assert_eq!(r["status"], "passed", "{name}: {r:#}");
        assert_eq!(r["failures"], serde_json::json!([]), "{name}");
        let value = number(&r["results"][metric]);
        match expected {
            Some(e) => assert_eq!(value, e, "{name}.{metric}: {:#}", r["results"]),
            None => assert!(value > 0.0, "{name}.{metric}: {:#}", r["results"]),
        }
        assert!(
            !r["raw_output"].as_str().unwrap_or_default().is_empty(),
            "{name} keeps its output"
        );
        // Each repeat is recorded, and `results` is their median: the lab's tools print the
        // same numbers every time, so the spread is nil.
        let repeats = if name == "custom" { 3 } else { 1 };
        let each = r["repeat_results"].as_array().cloned().unwrap_or_default();
        assert_eq!(each.len(), repeats, "{name}: {each:?}");
        assert!(
            each.iter().all(|m| number(&m[metric]) == value),
            "{name}: {each:?}"
        );
        assert_eq!(
            number(&r["spread"][metric]),
            0.0,
            "{name}: {:#}",
            r["spread"]
        );
        let env = &r["environment"];
        let ran_on: BTreeSet<String> = env["nodes"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .map(str::to_owned)
            .collect();
        assert!(
            ran_on.is_subset(&pool_nodes) && !ran_on.is_empty(),
            "{name} ran on {ran_on:?}, outside the pool's {pool_nodes:?}"
        );
        // Each node that ran the tool on its own has its numbers (the repeats of a one-node
        // run may each take another node of the pool); one MPI world has none.
        let by_node = r["node_results"].as_object().cloned().unwrap_or_default();
        let alone: BTreeSet<String> = by_node.keys().cloned().collect();
        if name == "nccl" {
            assert!(alone.is_empty(), "{name}: {by_node:?}");
        } else {
            assert_eq!(alone, ran_on, "{name}: {by_node:?}");
        }
        if name == "nvbw" {
            assert_eq!(alone.len(), 2, "{name}: {by_node:?}");
        }
        for (node, metrics) in &by_node {
            assert_eq!(number(&metrics[metric]), value, "{name} on {node}");
        }
        assert_eq!(env["gpu_product"], A100, "{name}");
        assert_eq!(env["driver_version"], "570.133.20", "{name}");
        assert_eq!(env["cuda_version"], "12.8", "{name}");
        assert_eq!(env["suite"], r["suite"], "{name}");
        assert!(
            env["kubernetes_version"]
                .as_str()
                .is_some_and(|v| v.starts_with("v1.")),
            "{name}: {env:#}"
        );
        assert_eq!(
            r["environment_hash"].as_str().map(str::len),
            Some(64),
            "{name}"
        );
    }
    // The gang ran one pod on each of the pool's two nodes.
    let nccl = s.resource("gpufleet_benchmark.nccl");
    assert_eq!(
        nccl["environment"]["nodes"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .collect::<BTreeSet<_>>()
            .len(),
        2
    );

    // The resources are the record: no Job, Service or pod outlives a run.
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());

    // Removing the benchmarks removes them from state and touches nothing else.
    s.write(&config("bench-suites", 2, ""));
    s.apply();
    assert!(
        s.addresses().iter().all(|a| !a.contains("benchmark")),
        "{:?}",
        s.addresses()
    );
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());
    s.destroy();
}

/// An endpoint's key, written only to the write-only attribute from an ephemeral variable:
/// the run's container gets it through a Secret that leaves with the run, and neither the
/// state, `terraform show -json` nor a plan ever holds it. Rotating it (a new version) updates
/// the record in place without running again.
#[test]
fn an_endpoint_key_reaches_the_run_and_is_never_stored() {
    const KEY: &str = "sk-gpufleet-acceptance-4c1e9b";
    let lab = Lab::shared();
    let main_tf = |version: u32| {
        let run = benchmark(
            "keyed",
            "aiperf",
            &format!(
                r#"parameters = {{ model = "meta-llama/Llama-3.1-8B-Instruct", url = "http://vllm.inference.svc:8000" }}
  endpoint_api_key_wo         = var.endpoint_api_key
  endpoint_api_key_wo_version = {version}"#
            ),
        );
        let variable = r#"
variable "endpoint_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}
"#;
        config("bench-key", 1, &format!("{variable}{run}"))
    };
    let mut env = lab.settings_env();
    env.push(("TF_VAR_endpoint_api_key".to_owned(), KEY.to_owned()));
    let s = Session::new(&main_tf(1), env);
    let _cleanup = s.destroy_on_panic();

    // The Secret lives only while the run does: watch for it during the apply.
    let secret = "/api/v1/namespaces/vc-bench-key/secrets/gfb-keyed-endpoint";
    let applying = AtomicBool::new(true);
    let seen = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let host = host(lab);
            while applying.load(Ordering::Relaxed) {
                if let Ok(found) = host.get(secret) {
                    return Some(found);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            None
        });
        let applied = s.apply();
        applying.store(false, Ordering::Relaxed);
        assert!(!applied.combined().contains(KEY), "{applied}");
        watcher.join().expect("the watcher")
    });
    let seen = seen.expect("the run's Secret existed while it ran");
    let stored = seen["data"]["api-key"].as_str().unwrap_or_default();
    assert_eq!(
        STANDARD.decode(stored).ok().as_deref(),
        Some(KEY.as_bytes())
    );
    let r = s.resource("gpufleet_benchmark.keyed");
    assert_eq!(r["status"], "passed", "{r:#}");
    assert!(
        r["environment"]["image"].is_string(),
        "the run is recorded: {r:#}"
    );

    let namespace = host_namespace(&s);
    assert_eq!(
        benchmark_objects(&host(lab), &namespace),
        Vec::<String>::new()
    );
    for (what, text) in [
        ("the state", s.ok(&["state", "pull"]).stdout),
        (
            "terraform show -json",
            s.ok(&["show", "-json", "-no-color"]).stdout,
        ),
        ("a plan", s.plan().combined()),
    ] {
        assert!(!text.contains(KEY), "{what} holds the key");
    }
    s.assert_plan_empty();

    // A rotated key: an update in place, and no second run.
    s.write(&main_tf(2));
    s.ok(&["plan", "-input=false", "-no-color", "-out=tfplan"]);
    let plan = s.ok(&["show", "-json", "-no-color", "tfplan"]);
    assert!(!plan.stdout.contains(KEY), "the saved plan holds the key");
    let change = plan.json()["resource_changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["address"] == "gpufleet_benchmark.keyed")
        .cloned()
        .expect("the benchmark's change");
    assert_eq!(
        change["change"]["actions"],
        serde_json::json!(["update"]),
        "{change:#}"
    );
    s.ok(&["apply", "-input=false", "-no-color", "tfplan"]);
    let after = s.resource("gpufleet_benchmark.keyed");
    assert_eq!(
        after["started_at"], r["started_at"],
        "the run was not repeated"
    );
    assert_eq!(after["endpoint_api_key_wo_version"], 2);
    s.assert_plan_empty();
    s.destroy();
}

/// The records `gpufleet_benchmark_run` kept for benchmark `name` in `namespace`, oldest
/// first, as their `record.json`.
fn run_records(host: &KubeRest, namespace: &str, name: &str) -> Vec<Value> {
    host.list(&format!(
        "/api/v1/namespaces/{namespace}/configmaps?labelSelector=gpufleet.dev/benchmark%3D{name}%2Cgpufleet.dev/record%3Drun"
    ))
    .expect("list ConfigMaps")
    .iter()
    .map(|cm| {
        serde_json::from_str(cm["data"]["record.json"].as_str().unwrap_or("null"))
            .expect("record.json is JSON")
    })
    .collect()
}

#[test]
fn the_run_action_smoke_tests_a_new_pool_reruns_a_benchmark_and_refuses_what_the_pool_cannot_hold()
{
    let lab = Lab::shared();
    let on_demand = |name: &str, definition: &str| {
        format!(
            r#"
action "gpufleet_benchmark_run" "{name}" {{
  config {{
    benchmark = {definition}
  }}
}}
"#
        )
    };
    let definition = |name: &str, extra: &str| {
        format!(
            r#"{{
      name               = "{name}"
      virtual_cluster_id = gpufleet_virtual_cluster.t.id
      node_pool_id       = gpufleet_gpu_node_pool.p.id
      suite              = "gpu-burn"
      image              = "nvcr.io/nvidia/pytorch:25.04-py3"
      {extra}
    }}"#
        )
    };
    // The pool runs a smoke test when it is created.
    let main_tf = config("bench-act", 1, "").replace(
        "  node_count         = 1\n}",
        "  node_count         = 1\n\n  lifecycle {\n    action_trigger {\n      \
             events  = [after_create]\n      actions = [action.gpufleet_benchmark_run.smoke]\n    \
             }\n  }\n}",
    ) + &benchmark("burn", "gpu-burn", "")
        + &on_demand("smoke", &definition("smoke", ""))
        + &on_demand("again", "gpufleet_benchmark.burn")
        + &on_demand("too_big", &definition("too-big", "nodes = 3"));
    assert!(main_tf.contains("action_trigger"), "{main_tf}");
    let s = Session::new(&main_tf, lab.settings_env());
    let _cleanup = s.destroy_on_panic();

    let applied = s.apply();
    let out = applied.combined();
    assert!(out.contains("status passed"), "{out}");
    assert!(
        out.contains("record kept in ConfigMap vc-bench-act/gfb-smoke-run-"),
        "{out}"
    );
    let host = host(lab);
    let namespace = host_namespace(&s);
    let smoke = run_records(&host, &namespace, "smoke");
    assert_eq!(smoke.len(), 1, "{smoke:#?}");
    assert_eq!(smoke[0]["status"], "passed", "{:#}", smoke[0]);
    assert_eq!(smoke[0]["environment"]["suite"], "gpu-burn");
    assert_eq!(
        smoke[0]["environment_hash"].as_str().map(str::len),
        Some(64)
    );
    // An action is no change: the next plan is empty, and runs nothing.
    s.assert_plan_empty();
    assert_eq!(run_records(&host, &namespace, "smoke").len(), 1);

    // The resource's definition again, on demand: a record beside it, the state untouched.
    let burn = s.resource("gpufleet_benchmark.burn");
    let invoke = |action: &str| {
        s.run(&[
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            &format!("-invoke=action.gpufleet_benchmark_run.{action}"),
        ])
    };
    let again = invoke("again");
    assert!(again.success(), "{again}");
    assert!(
        again.contains("created Job gfb-burn") && again.contains("running on "),
        "each phase is shown: {again}"
    );
    let records = run_records(&host, &namespace, "burn");
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["status"], "passed");
    assert_eq!(
        records[0]["environment_hash"], burn["environment_hash"],
        "the same definition on the same nodes hashes the same"
    );
    assert_eq!(
        s.resource("gpufleet_benchmark.burn")["started_at"],
        burn["started_at"],
        "the resource's own record is untouched"
    );
    s.assert_plan_empty();

    // More nodes than the pool has: refused at plan, on the attribute, before anything runs.
    let refused = invoke("too_big");
    assert!(!refused.success(), "{refused}");
    assert!(
        refused.contains("nodes = 3") && refused.contains("has 1 node(s)"),
        "{refused}"
    );
    assert!(run_records(&host, &namespace, "too-big").is_empty());
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());
    s.destroy();
}

#[test]
fn same_configuration_hashes_the_same_in_fresh_workdirs() {
    let lab = Lab::shared();
    let run = |tenant: &str, max_bytes: &str| {
        let b = benchmark(
            "allreduce",
            "nccl-all-reduce",
            &format!(r#"parameters = {{ min_bytes = "8", max_bytes = "{max_bytes}" }}"#),
        );
        let s = Session::new(&config(tenant, 1, &b), lab.settings_env());
        s.apply();
        let r = s.resource("gpufleet_benchmark.allreduce");
        s.destroy();
        (
            r["environment_hash"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            r["environment"].clone(),
        )
    };
    let (first, first_env) = run("bench-hash-a", "16G");
    let (second, second_env) = run("bench-hash-b", "16G");
    assert_eq!(first.len(), 64, "{first}");
    assert_eq!(
        first, second,
        "another tenant, pool and workdir ran the same experiment:\n{first_env:#}\n{second_env:#}"
    );
    // A different sweep is a different experiment.
    let (other, _) = run("bench-hash-c", "8G");
    assert_ne!(first, other);
}

#[test]
fn a_threshold_above_the_result_fails_names_the_metric_and_runs_again() {
    let lab = Lab::shared();
    let host = host(lab);
    let strict = |on_failure: &str| {
        config(
            "bench-threshold",
            1,
            &benchmark(
                "step",
                "custom",
                &format!(
                    r#"command = ["python", "/bench/step.py"]
  thresholds = {{ tokens_per_second = {{ min = 2000 }} }}
  {on_failure}"#
                ),
            ),
        )
    };
    let s = Session::new(&strict(""), lab.settings_env());
    let out = s.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(!out.success(), "a broken threshold fails the apply:\n{out}");
    let text = out.combined();
    assert!(
        text.contains("tokens_per_second") && text.contains("1832.5") && text.contains("2000"),
        "the error names the metric, its value and its bound:\n{text}"
    );
    // The run is in state, tainted, so the next plan replaces (reruns) it.
    let r = s.resource("gpufleet_benchmark.step");
    assert_eq!(r["status"], "failed", "{r:#}");
    let first_start = r["started_at"].clone();
    let show = s.ok(&["show", "-json", "-no-color"]).json();
    let tainted = show["values"]["root_module"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["address"] == "gpufleet_benchmark.step" && r["tainted"] == true);
    assert!(tainted, "the failed run is tainted in state");
    let plan = s.plan();
    assert_eq!(plan.status_code, 2, "{plan}");
    assert!(plan.contains("is tainted, so must be replaced"), "{plan}");

    // Only recording: the same failing run applies without an error.
    std::thread::sleep(Duration::from_millis(1100));
    s.write(&strict(r#"on_failure = "record""#));
    s.apply();
    let r = s.resource("gpufleet_benchmark.step");
    assert_eq!(r["status"], "failed", "{r:#}");
    assert_ne!(r["started_at"], first_start, "the benchmark ran again");
    assert!(
        strings(&r["failures"])
            .iter()
            .any(|f| f.contains("tokens_per_second") && f.contains("2000")),
        "{:#}",
        r["failures"]
    );
    s.assert_plan_empty();
    let namespace = "vc-bench-threshold";
    assert_eq!(benchmark_objects(&host, namespace), Vec::<String>::new());
    s.destroy();
}

/// A pod on `node` that takes all eight of its GPUs, as another team's job would.
fn busy(host: &KubeRest, node: &str) {
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bench-busy", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "job",
                "image": "nvcr.io/nvidia/pytorch:25.04-py3",
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }],
        },
    });
    host.create("/api/v1/namespaces/default/pods", &pod)
        .expect("create the busy pod");
}

/// A gang whose second node is busy with another job cannot start together: the run fails
/// within its start timeout and leaves no pod. (A gang larger than the pool itself is
/// refused at plan.)
#[test]
fn a_gang_that_cannot_start_together_fails_within_its_deadline_and_leaves_no_pod() {
    let lab = Lab::shared();
    let host = host(lab);
    let gang = benchmark(
        "gang",
        "nccl-all-reduce",
        r#"nodes = 2
  start_timeout = "20s""#,
    );
    let s = Session::new(&config("bench-gang", 2, ""), lab.settings_env());
    let _cleanup = s.destroy_on_panic();
    s.apply();
    let held = s.resource("gpufleet_gpu_node_pool.p")["nodes"][0]
        .as_str()
        .expect("the pool holds a node")
        .to_owned();
    let _ = host.delete("/api/v1/namespaces/default/pods/bench-busy");
    busy(&host, &held);
    s.write(&config("bench-gang", 2, &gang));
    let started = Instant::now();
    let out = s.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let took = started.elapsed();
    let _ = host.delete("/api/v1/namespaces/default/pods/bench-busy");
    assert!(!out.success(), "{out}");
    assert!(
        out.contains("did not run together") || out.contains("start_timeout"),
        "the error says the gang did not start together:\n{out}"
    );
    assert!(
        out.contains("Everything the run created was removed"),
        "{out}"
    );
    assert!(
        took < Duration::from_secs(90),
        "the run gave up after its 20 s deadline, not its create timeout ({took:?})"
    );
    assert_eq!(
        benchmark_objects(&host, "vc-bench-gang"),
        Vec::<String>::new()
    );
    s.destroy();
}

/// What a watcher saw of an MPIJob's pods while a run went on.
#[derive(Debug, Default)]
struct SeenMpi {
    /// Launcher pod → its command.
    launchers: std::collections::BTreeMap<String, Vec<String>>,
    /// Worker pod → its node.
    workers: std::collections::BTreeMap<String, String>,
    /// Whether the MPIJob itself was seen.
    mpijob: bool,
}

/// Polls the pods the MPI Operator makes for MPIJob `job` in `namespace` until `stop`.
fn watch_mpijob(
    kubeconfig: std::path::PathBuf,
    namespace: String,
    job: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<SeenMpi> {
    std::thread::spawn(move || {
        let host = KubeRest::from_kubeconfig(&kubeconfig).expect("host client");
        let mut seen = SeenMpi::default();
        let pods = format!(
            "/api/v1/namespaces/{namespace}/pods?labelSelector=training.kubeflow.org/job-name={job}"
        );
        let mpijob = format!("/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{job}");
        while !stop.load(Ordering::Relaxed) {
            seen.mpijob |= host.get(&mpijob).is_ok();
            for p in host.list(&pods).unwrap_or_default() {
                let name = p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let role = p["metadata"]["labels"]["training.kubeflow.org/job-role"].as_str();
                let node = p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                match role {
                    Some("launcher") => {
                        let command = p["spec"]["containers"][0]["command"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|a| a.as_str().map(str::to_owned))
                            .collect();
                        seen.launchers.insert(name, command);
                    }
                    Some("worker") if !node.is_empty() => {
                        seen.workers.insert(name, node);
                    }
                    _ => {}
                }
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        seen
    })
}

#[test]
fn a_two_node_all_reduce_is_one_mpi_world_that_the_mpi_operator_launches() {
    let lab = Lab::shared();
    let host = host(lab);
    let run = benchmark(
        "allreduce",
        "nccl-all-reduce",
        r#"nodes = 2
  gpus_per_node = 8
  thresholds = { wrong_count = { max = 0 } }"#,
    );
    let s = Session::new(&config("bench-mpi", 2, ""), lab.settings_env());
    s.apply();
    let namespace = host_namespace(&s);
    let pool_nodes = strings(&s.resource("gpufleet_gpu_node_pool.p")["nodes"]);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_mpijob(
        lab.kubeconfig_path(),
        namespace.clone(),
        "gfb-allreduce".to_owned(),
        stop.clone(),
    );
    s.write(&config("bench-mpi", 2, &run));
    s.apply();
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().expect("watcher");

    // The real MPI Operator expanded the MPIJob: one launcher running mpirun with 16 ranks,
    // and two workers that the scheduler put on two distinct nodes of the pool.
    assert!(seen.mpijob, "{seen:?}");
    assert_eq!(seen.launchers.len(), 1, "{seen:?}");
    let command = seen.launchers.values().next().expect("launcher").join(" ");
    assert!(
        command.starts_with("mpirun ") && command.contains("-np 16") && command.contains("-g 1"),
        "{command}"
    );
    let worker_nodes: BTreeSet<String> = seen.workers.values().cloned().collect();
    assert_eq!(seen.workers.len(), 2, "{seen:?}");
    assert_eq!(worker_nodes.len(), 2, "one worker per node: {seen:?}");
    assert!(
        worker_nodes.is_subset(&pool_nodes),
        "{worker_nodes:?} in {pool_nodes:?}"
    );

    // The result is the launcher's log: one world of 16 ranks; the record names both nodes.
    let r = s.resource("gpufleet_benchmark.allreduce");
    assert_eq!(r["status"], "passed", "{r:#}");
    let env = &r["environment"];
    assert_eq!(
        env["ranks"], "16",
        "the log shows one world of 16 ranks: {env:#}"
    );
    assert_eq!(env["launcher"], "mpi-operator", "{env:#}");
    assert_eq!(
        env["nodes"]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .map(str::to_owned)
            .collect::<BTreeSet<_>>(),
        worker_nodes
    );
    for node in &worker_nodes {
        let n = &r["node_environments"][node];
        assert_eq!(n["driver_version"], "570.133.20", "{node}: {n:#}");
        assert_eq!(n["cuda_version"], "12.8", "{node}: {n:#}");
        assert_eq!(n["gpu_product"], A100, "{node}: {n:#}");
    }
    assert_eq!(env["gpu_operator_version"], "v25.10.0", "{env:#}");
    assert_eq!(env["device_plugin_version"], "v0.18.0", "{env:#}");

    // The archive holds the world's log (every rank's output reaches the launcher's; the
    // MPI Operator removes the workers, which run only sshd, as the launcher ends) and the
    // record, under the digest the state names; destroy removes it.
    let files = archive_files(&host, &namespace, &r);
    let launcher_log = &files[&format!(
        "repeat-1.{}.log",
        seen.launchers.keys().next().expect("launcher")
    )];
    assert!(launcher_log.contains("Avg bus bandwidth"), "{launcher_log}");
    let index: Value = serde_json::from_str(&files["index.json"]).expect("index.json");
    assert_eq!(index["sha256"], r["archive"]["sha256"], "{index:#}");
    let record: Value = serde_json::from_str(&files["record.json"]).expect("record.json");
    assert_eq!(record["environment_hash"], r["environment_hash"]);
    s.assert_plan_empty();
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());
    s.destroy();
    for name in strings(&r["archive"]["configmaps"]) {
        let gone = host.get(&format!("/api/v1/namespaces/{namespace}/configmaps/{name}"));
        assert!(
            gone.is_err_and(|e| e.is_not_found()),
            "{name} outlived destroy"
        );
    }
}

/// The files of the archive the benchmark state `r` names, which must exist.
fn archive_files(host: &KubeRest, namespace: &str, r: &Value) -> BTreeMap<String, String> {
    let names = strings(&r["archive"]["configmaps"]);
    assert!(!names.is_empty(), "no archive: {r:#}");
    names
        .iter()
        .map(|name| {
            host.get(&format!("/api/v1/namespaces/{namespace}/configmaps/{name}"))
                .unwrap_or_else(|e| panic!("archive part {name}: {e}"))
        })
        .flat_map(|p| p["data"].as_object().cloned().unwrap_or_default())
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Restores a node's driver labels when dropped, so a failed test leaves the lab as it was.
/// Labels of a node put back as they were when the test ends, passed or not.
struct DriverLabels<'a> {
    host: &'a KubeRest,
    node: String,
    original: Value,
}

impl Drop for DriverLabels<'_> {
    fn drop(&mut self) {
        let _ = self.host.merge_patch(
            &format!("/api/v1/nodes/{}", self.node),
            &serde_json::json!({ "metadata": { "labels": self.original } }),
        );
    }
}

/// Labels `node` with driver `version` (`575.57.08`) as GPU feature discovery would; the
/// labels are put back when the returned guard goes.
fn relabel_driver<'a>(host: &'a KubeRest, node: &str, version: &str) -> DriverLabels<'a> {
    const KEYS: [&str; 3] = [
        "nvidia.com/cuda.driver.major",
        "nvidia.com/cuda.driver.minor",
        "nvidia.com/cuda.driver.rev",
    ];
    let path = format!("/api/v1/nodes/{node}");
    let labels = host.get(&path).expect("node")["metadata"]["labels"].clone();
    let original: serde_json::Map<String, Value> = KEYS
        .iter()
        .map(|k| ((*k).to_owned(), labels[*k].clone()))
        .collect();
    let wanted: serde_json::Map<String, Value> = KEYS
        .iter()
        .zip(version.split('.'))
        .map(|(k, v)| ((*k).to_owned(), Value::from(v)))
        .collect();
    let guard = DriverLabels {
        host,
        node: node.to_owned(),
        original: Value::Object(original),
    };
    host.merge_patch(
        &path,
        &serde_json::json!({ "metadata": { "labels": wanted } }),
    )
    .expect("relabel");
    guard
}

#[test]
fn a_node_relabelled_with_another_driver_fails_the_next_run_naming_the_field_and_the_nodes() {
    let lab = Lab::shared();
    let host = host(lab);
    let run = |trigger: &str, extra: &str| {
        config(
            "bench-drivers",
            2,
            &benchmark(
                "allreduce",
                "nccl-all-reduce",
                &format!(
                    r#"nodes = 2
  gpus_per_node = 8
  triggers = {{ n = "{trigger}" }}
  {extra}"#
                ),
            ),
        )
    };
    let s = Session::new(&run("1", ""), lab.settings_env());
    s.apply();
    let r = s.resource("gpufleet_benchmark.allreduce");
    assert_eq!(r["environment"]["driver_version"], "570.133.20", "{r:#}");
    let nodes: Vec<String> = strings(&s.resource("gpufleet_gpu_node_pool.p")["nodes"])
        .into_iter()
        .collect();

    // One node of the pool gets another driver.
    let node = nodes[0].clone();
    let _restore = relabel_driver(&host, &node, "575.57.08");

    s.write(&run("2", ""));
    let out = s.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(!out.success(), "{out}");
    let text = out.combined().replace('\n', " ");
    assert!(text.contains("driver_version"), "{text}");
    assert!(
        text.contains("575.57.08") && text.contains("570.133.20"),
        "{text}"
    );
    for n in &nodes {
        assert!(text.contains(n.as_str()), "names {n}: {text}");
    }

    // Allowed, the same gang runs and records both drivers.
    s.write(&run("3", r#"allow_node_differences = ["driver_version"]"#));
    s.apply();
    let r = s.resource("gpufleet_benchmark.allreduce");
    assert_eq!(r["status"], "passed", "{r:#}");
    assert_eq!(r["node_environments"][&node]["driver_version"], "575.57.08");
    assert_eq!(
        r["environment"]["driver_version"], "570.133.20,575.57.08",
        "{r:#}"
    );
    s.destroy();
}

#[test]
fn without_the_mpi_operator_pod_zero_runs_mpirun_over_ssh_to_its_peers() {
    let lab = Lab::shared();
    let host = host(lab);
    let run = benchmark(
        "allreduce",
        "nccl-all-reduce",
        r#"nodes = 2
  gpus_per_node = 8
  launcher = "gpufleet""#,
    );
    let s = Session::new(&config("bench-sshmpi", 2, &run), lab.settings_env());
    s.apply();
    s.assert_plan_empty();
    let r = s.resource("gpufleet_benchmark.allreduce");
    assert_eq!(r["status"], "passed", "{r:#}");
    let env = &r["environment"];
    assert_eq!(env["launcher"], "gpufleet", "{env:#}");
    assert_eq!(env["ranks"], "16", "{env:#}");
    let nodes: BTreeSet<&str> = env["nodes"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .collect();
    assert_eq!(nodes.len(), 2, "{env:#}");
    // The Job, its pods, the Service and the key pair's Secret are gone; the archive keeps
    // both pods' logs, pod 0's mpirun and its peer's sshd.
    let namespace = host_namespace(&s);
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());
    let files = archive_files(&host, &namespace, &r);
    let logs: Vec<&String> = files
        .keys()
        .filter(|k| k.starts_with("repeat-1.gfb-allreduce-") && k.ends_with(".log"))
        .collect();
    assert_eq!(logs.len(), 2, "{:?}", files.keys());
    s.destroy();
}

/// A run judged against a reference run: it passes at the same numbers, a stricter baseline
/// is re-checked at plan without running again and fails naming the metric and both values,
/// and a reference from another driver is refused naming the field.
#[test]
fn a_run_is_judged_against_its_baseline_and_refused_when_the_setups_differ() {
    let lab = Lab::shared();
    let with_baseline = |baseline: &str| {
        let reference = benchmark(
            "reference",
            "custom",
            r#"command = ["python", "/bench/step.py"]"#,
        );
        let candidate = benchmark(
            "candidate",
            "custom",
            &format!(
                r#"command = ["python", "/bench/step.py"]
  on_failure = "record"
  baseline = {baseline}"#
            ),
        );
        config("bench-baseline", 1, &(reference + &candidate))
    };
    let s = Session::new(
        &with_baseline(
            "{ results = gpufleet_benchmark.reference.results, environment = gpufleet_benchmark.reference.environment }",
        ),
        lab.settings_env(),
    );
    s.apply();
    let r = s.resource("gpufleet_benchmark.candidate");
    assert_eq!(r["status"], "passed", "{r:#}");
    let started = r["started_at"].clone();
    s.assert_plan_empty();

    // A published figure it misses: re-checked at plan, recorded at apply, no new run.
    s.write(&with_baseline(
        r#"{ results = { tokens_per_second = 2000 }, source = "vendor sheet v2" }"#,
    ));
    let plan = s.plan();
    assert_eq!(plan.status_code, 2, "{plan}");
    assert!(plan.contains("~ status"), "{plan}");
    s.apply();
    let r = s.resource("gpufleet_benchmark.candidate");
    assert_eq!(r["status"], "failed", "{r:#}");
    assert_eq!(r["started_at"], started, "the baseline changed in place");
    assert_eq!(
        strings(&r["failures"]),
        BTreeSet::from([
            "baseline: tokens_per_second = 1832.5 is below 0.95 of the baseline: baseline 2000 (vendor sheet v2)"
                .to_owned()
        ])
    );

    // A reference that ran on another driver is not compared.
    s.write(&with_baseline(
        r#"{ results = gpufleet_benchmark.reference.results, environment = merge(gpufleet_benchmark.reference.environment, { driver_version = "550.54.15" }) }"#,
    ));
    s.apply();
    let r = s.resource("gpufleet_benchmark.candidate");
    assert_eq!(r["status"], "failed", "{r:#}");
    let f = strings(&r["failures"]);
    assert!(
        f.iter()
            .any(|f| f.contains("driver_version (run \"570.133.20\", baseline \"550.54.15\")")),
        "{f:?}"
    );
    s.destroy();
}

#[test]
fn a_run_per_block_runs_on_each_block_of_the_pool_and_records_each() {
    let lab = Lab::shared();
    let host = host(lab);
    let run = |per: &str| {
        config(
            "bench-blocks",
            2,
            &benchmark("bw", "nvbandwidth", &format!("per = \"{per}\"")),
        )
    };
    // The lab gives each rack one switch block, and the pool's two nodes share a rack: one
    // of them moves to a block of its own, as topograph labels a rack split across leaves.
    let s = Session::new(&run("block"), lab.settings_env());
    let _destroy = s.destroy_on_panic();
    s.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-target=gpufleet_gpu_node_pool.p",
    ]);
    let nodes = strings(&s.resource("gpufleet_gpu_node_pool.p")["nodes"]);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    let node = nodes.iter().nth(1).cloned().unwrap_or_default();
    let block = "network.topology.nvidia.com/block";
    let labels =
        host.get(&format!("/api/v1/nodes/{node}")).expect("node")["metadata"]["labels"].clone();
    let first_block = labels[block].as_str().unwrap_or_default().to_owned();
    assert!(!first_block.is_empty(), "{labels:#}");
    let _restore = DriverLabels {
        host: &host,
        node: node.clone(),
        original: serde_json::json!({ block: labels[block] }),
    };
    let second_block = format!("{first_block}-east");
    host.merge_patch(
        &format!("/api/v1/nodes/{node}"),
        &serde_json::json!({ "metadata": { "labels": { block: second_block } } }),
    )
    .expect("relabel");

    s.apply();
    s.assert_plan_empty();
    let r = s.resource("gpufleet_benchmark.bw");
    assert_eq!(r["status"], "passed", "{r:#}");
    let units: BTreeSet<&str> = r["unit_results"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        units,
        BTreeSet::from([first_block.as_str(), second_block.as_str()]),
        "{r:#}"
    );
    for unit in &units {
        assert!(
            r["unit_results"][*unit]
                .as_object()
                .is_some_and(|m| !m.is_empty()),
            "{unit} has results: {r:#}"
        );
    }
    // Each block's run ran on a node of that block, and the archive keeps both logs.
    assert_eq!(
        r["node_environments"][&node]["block"],
        second_block.as_str(),
        "{r:#}"
    );
    let ran: BTreeSet<&str> = r["environment"]["nodes"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .collect();
    assert_eq!(ran.len(), 2, "{r:#}");
    let namespace = host_namespace(&s);
    let files = archive_files(&host, &namespace, &r);
    let logs: Vec<&String> = files.keys().filter(|k| k.ends_with(".log")).collect();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());
    s.destroy();
}

#[test]
fn a_prescreen_stops_a_run_on_a_stale_driver_label_and_pins_a_passing_one_to_its_nodes() {
    let lab = Lab::shared();
    let host = host(lab);
    let run = |suite: &str, extra: &str| {
        config(
            "bench-screen",
            2,
            &benchmark(
                "screened",
                suite,
                &format!("prescreen = true\n  gpus_per_node = 1\n  {extra}"),
            ),
        )
    };
    let s = Session::new(&run("nvbandwidth", ""), lab.settings_env());
    let _destroy = s.destroy_on_panic();
    s.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-target=gpufleet_gpu_node_pool.p",
    ]);
    let namespace = host_namespace(&s);

    // The recorded report's driver (545.23.08) is not the one the lab's labels claim: the
    // prescreen stops the run, and no benchmark pod ever starts.
    let out = s.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(!out.success(), "{out}");
    let text = out
        .combined()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("prescreen stopped the run")
            && text.contains("the driver is 545.23.08, but the node's labels say 570.133.20"),
        "{text}"
    );
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());

    // GPU feature discovery catches up with the driver: the prescreen passes, and the run
    // records what it found.
    let nodes = strings(&s.resource("gpufleet_gpu_node_pool.p")["nodes"]);
    let restore: Vec<DriverLabels> = nodes
        .iter()
        .map(|node| relabel_driver(&host, node, "545.23.08"))
        .collect();
    s.apply();
    s.assert_plan_empty();
    let r = s.resource("gpufleet_benchmark.screened");
    assert_eq!(r["status"], "passed", "{r:#}");
    let node = r["environment"]["nodes"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let env = &r["node_environments"][&node];
    assert_eq!(
        env["gpu_uuids"], "GPU-10f35015-e921-bfab-2eb8-4e9b6664d5f1",
        "{r:#}"
    );
    assert_eq!(env["gpu_serials"], "1654123038646", "{r:#}");
    assert_eq!(
        env["hcas"], "mlx5_5/1 InfiniBand Active 400 Gb/s fw 28.41.1000",
        "{r:#}"
    );
    let files = archive_files(&host, &namespace, &r);
    assert!(
        files.keys().any(|k| k.starts_with("prescreen.")),
        "{:?}",
        files.keys().collect::<Vec<_>>()
    );
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());

    // An NCCL run on a node with InfiniBand and no NCCL_IB_HCA would let NCCL pick the HCAs:
    // stopped before it starts.
    s.write(&run("nccl-all-reduce", "nodes = 2"));
    let out = s.run(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    assert!(!out.success(), "{out}");
    let text = out
        .combined()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("InfiniBand HCAs (mlx5_5) but neither NCCL_IB_HCA nor"),
        "{text}"
    );
    assert_eq!(benchmark_objects(&host, &namespace), Vec::<String>::new());
    drop(restore);
    s.destroy();
}
