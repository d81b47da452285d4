//! The Job and Service of a run, rendered from configuration and placement without a cluster.

use std::collections::BTreeMap;

use gpufleet_engine::{
    resources::benchmark::{
        commands,
        launch::{self, Launcher},
        model::BenchmarkSpec,
        render::{self, Placement, Toleration},
    },
    value::Value,
};

fn spec(nodes: i64, extra: &[(&str, Value)]) -> BenchmarkSpec {
    let mut attrs: BTreeMap<String, Value> = BTreeMap::from([
        ("name".to_owned(), Value::string("allreduce")),
        (
            "virtual_cluster_id".to_owned(),
            Value::string("vc-team-a/team-a"),
        ),
        (
            "node_pool_id".to_owned(),
            Value::string("vc-team-a/team-a/train"),
        ),
        ("suite".to_owned(), Value::string("nccl-all-reduce")),
        (
            "image".to_owned(),
            Value::string("nvcr.io/nvidia/hpc-benchmarks:25.04"),
        ),
        ("nodes".to_owned(), Value::int(nodes)),
        ("gpus_per_node".to_owned(), Value::int(8)),
        (
            "parameters".to_owned(),
            Value::Map(BTreeMap::from([(
                "max_bytes".to_owned(),
                Value::string("16G"),
            )])),
        ),
    ]);
    for (k, v) in extra {
        attrs.insert((*k).to_owned(), v.clone());
    }
    BenchmarkSpec::from_value(&Value::Object(attrs)).expect("spec")
}

fn placement() -> Placement {
    Placement::on_pool(
        "team-a.train",
        "team-a",
        &[Toleration {
            key: "example.com/maintenance".into(),
            value: None,
            effect: "NoExecute".into(),
        }],
    )
}

#[test]
fn gang_job_has_one_pod_per_node_on_the_pool() {
    // A suite that is no MPI program: every pod runs the tool on its node.
    let s = spec(
        2,
        &[
            ("suite", Value::string("gpu-burn")),
            ("parameters", Value::Map(BTreeMap::new())),
        ],
    );
    assert_eq!(launch::choose(&s, true), Ok(Launcher::Pods));
    let job = render::job(&s, &placement(), 1800);
    insta::assert_snapshot!(
        "gang_job",
        serde_json::to_string_pretty(&job).expect("json")
    );
    let svc = render::service(&s).expect("a gang has a service");
    insta::assert_snapshot!(
        "gang_service",
        serde_json::to_string_pretty(&svc).expect("json")
    );
}

#[test]
fn a_multi_node_all_reduce_is_one_mpijob_of_sixteen_ranks() {
    let s = spec(2, &[]);
    assert_eq!(launch::choose(&s, true), Ok(Launcher::MpiOperator));
    let job = launch::mpijob(&s, &placement(), 1800);
    // The launcher runs mpirun over all 16 GPUs, 8 per node; each worker asks for 8 GPUs on a
    // node of its own.
    let launcher = &job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"];
    let argv: Vec<&str> = launcher["containers"][0]["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(
        argv[..5],
        ["mpirun", "--allow-run-as-root", "-np", "16", "--map-by"]
    );
    assert!(
        launcher["containers"][0].get("resources").is_none(),
        "no GPU for mpirun"
    );
    let worker = &job["spec"]["mpiReplicaSpecs"]["Worker"];
    assert_eq!(worker["replicas"], 2);
    assert_eq!(
        worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "8"
    );
    insta::assert_snapshot!("mpijob", serde_json::to_string_pretty(&job).expect("json"));
}

#[test]
fn without_the_mpi_operator_pod_zero_launches_over_ssh() {
    let s = spec(2, &[]);
    assert_eq!(launch::choose(&s, false), Ok(Launcher::Gpufleet));
    let forced = spec(2, &[("launcher", Value::string("mpi-operator"))]);
    let why = launch::choose(&forced, false).expect_err("no MPIJob API");
    assert!(why.contains("does not serve MPIJob"), "{why}");
    let job = launch::gpufleet_job(&s, &placement(), 1800);
    assert_eq!(
        job["spec"]["successPolicy"]["rules"][0]["succeededIndexes"],
        "0"
    );
    insta::assert_snapshot!(
        "gpufleet_launcher_job",
        serde_json::to_string_pretty(&job).expect("json")
    );
}

#[test]
fn single_node_job_has_no_service_and_no_anti_affinity() {
    let s = spec(
        1,
        &[
            ("suite", Value::string("dcgm-diag")),
            (
                "parameters",
                Value::Map(BTreeMap::from([
                    ("level".to_owned(), Value::string("3")),
                    (
                        "host_engine".to_owned(),
                        Value::string("nvidia-dcgm.gpu-operator.svc:5555"),
                    ),
                ])),
            ),
        ],
    );
    assert!(render::service(&s).is_none());
    let job = render::job(&s, &placement(), 600);
    insta::assert_snapshot!(
        "single_job",
        serde_json::to_string_pretty(&job).expect("json")
    );
    let pod = &job["spec"]["template"]["spec"];
    assert!(pod.get("affinity").is_none());
    assert_eq!(pod["containers"][0]["name"], "dcgm-diag");
    assert_eq!(
        pod["containers"][0]["command"],
        serde_json::json!([
            "dcgmi",
            "diag",
            "-r",
            "3",
            "-j",
            "--host",
            "nvidia-dcgm.gpu-operator.svc:5555"
        ])
    );
}

#[test]
fn a_configured_command_wins_over_the_suite_default() {
    let cmd = Value::List(vec![
        Value::string("python"),
        Value::string("/bench/step.py"),
    ]);
    let s = spec(1, &[("suite", Value::string("custom")), ("command", cmd)]);
    assert_eq!(commands::command(&s), ["python", "/bench/step.py"]);
}

/// A one-node run of `suite` with `params`.
fn suite_spec(suite: &str, params: &[(&str, &str)]) -> BenchmarkSpec {
    let params = Value::Map(
        params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::string(*v)))
            .collect(),
    );
    spec(
        1,
        &[("suite", Value::string(suite)), ("parameters", params)],
    )
}

#[test]
fn dcgm_starts_its_own_host_engine_unless_one_is_named() {
    let embedded = commands::command(&suite_spec("dcgm-diag", &[("level", "3")]));
    assert_eq!(embedded[..2], ["sh", "-c"]);
    let script = &embedded[2];
    // The engine first, dcgmi once it answers, and dcgmi's own exit code (226) kept.
    let start = script.find("nv-hostengine").expect("starts nv-hostengine");
    let wait = script.find("dcgmi discovery -l").expect("waits for it");
    let diag = script
        .find("exec dcgmi diag -r \"${GPUFLEET_PARAM_LEVEL:-2}\" -j")
        .expect("runs the diagnostic from the level parameter");
    assert!(start < wait && wait < diag, "{script}");

    let remote = commands::command(&suite_spec(
        "dcgm-diag",
        &[("host_engine", "10.0.3.7:5555"), ("level", "1")],
    ));
    assert_eq!(
        remote,
        ["dcgmi", "diag", "-r", "1", "-j", "--host", "10.0.3.7:5555"]
    );
}

#[test]
fn aiperf_streams_by_default_and_names_its_endpoint_type() {
    let base = [("model", "llama"), ("url", "http://vllm:8000")];
    let streaming = commands::command(&suite_spec("aiperf", &base));
    let script = &streaming[2];
    assert!(
        script.contains("--endpoint-type \"${GPUFLEET_PARAM_ENDPOINT_TYPE:-chat}\" --streaming"),
        "{script}"
    );
    assert!(
        script.contains("--model \"$GPUFLEET_PARAM_MODEL\""),
        "{script}"
    );
    assert!(
        script.ends_with("&& cat /tmp/aiperf/profile_export_aiperf.json"),
        "{script}"
    );

    let off = commands::command(&suite_spec(
        "aiperf",
        &[
            base[0],
            base[1],
            ("streaming", "false"),
            ("endpoint_type", "completions"),
        ],
    ));
    assert!(!off[2].contains("--streaming"), "{}", off[2]);
    // Values reach the script through the environment, never spliced into it.
    assert!(!off[2].contains("completions"), "{}", off[2]);
    let s = suite_spec("aiperf", &[("endpoint_type", "completions")]);
    let job = render::job(&s, &placement(), 600);
    let env = &job["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "GPUFLEET_PARAM_ENDPOINT_TYPE" && e["value"] == "completions"),
        "{env}"
    );
}

#[test]
fn gpu_burn_and_nvbandwidth_take_their_documented_options() {
    assert_eq!(
        commands::command(&suite_spec("gpu-burn", &[])),
        ["./gpu_burn", "60"]
    );
    assert_eq!(
        commands::command(&suite_spec(
            "gpu-burn",
            &[
                ("seconds", "3600"),
                ("doubles", "true"),
                ("tensor_cores", "true"),
                ("memory", "90%"),
            ]
        )),
        ["./gpu_burn", "-d", "-tc", "-m", "90%", "3600"]
    );
    assert_eq!(
        commands::command(&suite_spec("nvbandwidth", &[])),
        ["nvbandwidth", "-j"]
    );
    assert_eq!(
        commands::command(&suite_spec(
            "nvbandwidth",
            &[
                (
                    "testcases",
                    "host_to_device_memcpy_ce, device_to_device_memcpy_read_ce"
                ),
                ("samples", "5"),
            ]
        )),
        [
            "nvbandwidth",
            "-j",
            "-t",
            "host_to_device_memcpy_ce",
            "device_to_device_memcpy_read_ce",
            "-i",
            "5"
        ]
    );
}
