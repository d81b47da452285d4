//! Plans of `gpufleet_benchmark` without a cluster: what is known at plan time, what forces a
//! new run, thresholds re-checked in place, and bad input diagnosed on the right attribute.
//! Every plan is checked against Terraform's plan-validity rules.

#[path = "support/network_segment.rs"]
mod support;

use std::collections::BTreeMap;

use gpufleet_engine::{
    backends::kube::host::FromSettings, consistency::assert_object_compatible, context::Context,
    kinds::ResourceKind, path::AttrPath, resources::benchmark::Benchmark, value::Value,
};
use support::{Action, config, plan, show};

fn kind() -> Benchmark {
    Benchmark(FromSettings)
}

fn threshold(min: Option<i64>, max: Option<i64>) -> Value {
    Value::object([
        ("min", min.map_or(Value::Null, Value::int)),
        ("max", max.map_or(Value::Null, Value::int)),
    ])
}

fn thresholds(entries: &[(&str, Value)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

fn bench(extra: &[(&str, Value)]) -> Value {
    let mut attrs = vec![
        ("name", Value::string("allreduce")),
        ("virtual_cluster_id", Value::string("vc-team-a/team-a")),
        ("node_pool_id", Value::string("vc-team-a/team-a/train")),
        ("suite", Value::string("nccl-all-reduce")),
        (
            "image",
            Value::string("nvcr.io/nvidia/hpc-benchmarks:25.04"),
        ),
    ];
    attrs.extend(extra.iter().cloned());
    config(&kind(), &attrs)
}

/// What a run returns for `planned`: a passed nccl run with a bus bandwidth of 480.16.
fn applied(planned: &Value) -> Value {
    let mut s = planned.clone();
    let m = s.as_object_mut().expect("object");
    let fill = [
        ("status", Value::string("passed")),
        ("failures", Value::List(Vec::new())),
        (
            "results",
            Value::Map(BTreeMap::from([(
                "largest_size_bus_bandwidth".to_owned(),
                Value::Number("480.16".parse().expect("number")),
            )])),
        ),
        ("environment", Value::Map(BTreeMap::new())),
        ("environment_hash", Value::string("ab".repeat(32))),
        ("node_environments", Value::Map(Default::default())),
        ("node_results", Value::Map(Default::default())),
        ("unit_results", Value::Map(Default::default())),
        ("repeat_results", Value::List(Vec::new())),
        ("spread", Value::Map(Default::default())),
        ("archive", Value::Null),
        (
            "raw_output",
            Value::string("# Avg bus bandwidth    : 159.151\n"),
        ),
        ("started_at", Value::string("2026-03-02T10:00:00Z")),
        ("finished_at", Value::string("2026-03-02T10:05:00Z")),
    ];
    for (k, v) in fill {
        if m.get(k).is_some_and(Value::is_unknown) {
            m.insert(k.to_owned(), v);
        }
    }
    let errs = assert_object_compatible(&kind().schema().block, planned, &s);
    assert!(errs.is_empty(), "{errs:?}");
    s
}

async fn created(extra: &[(&str, Value)]) -> Value {
    let p = plan(&kind(), &Context::default(), &Value::Null, &bench(extra)).await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    applied(&p.planned)
}

#[tokio::test]
async fn create_knows_namespace_and_id_and_leaves_the_run_unknown() {
    let p = plan(&kind(), &Context::default(), &Value::Null, &bench(&[])).await;
    assert_eq!(p.action, Action::Create);
    assert_eq!(p.planned.get("namespace"), &Value::string("vc-team-a"));
    assert_eq!(p.planned.get("id"), &Value::string("vc-team-a/allreduce"));
    assert_eq!(p.planned.get("on_failure"), &Value::string("fail"));
    assert_eq!(p.planned.get("nodes"), &Value::int(1));
    for a in ["status", "results", "environment_hash", "raw_output"] {
        assert!(p.planned.get(a).is_unknown(), "{a}");
    }
}

#[tokio::test]
async fn the_same_configuration_plans_no_change() {
    let prior = created(&[]).await;
    let p = plan(&kind(), &Context::default(), &prior, &bench(&[])).await;
    assert_eq!(p.action, Action::NoOp);
}

#[tokio::test]
async fn a_trigger_or_parameter_change_runs_again() {
    let prior = created(&[]).await;
    let triggers = Value::Map(BTreeMap::from([("nodes".to_owned(), Value::string("a,b"))]));
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &bench(&[("triggers", triggers)]),
    )
    .await;
    assert_eq!(p.action, Action::Replace);
    assert!(p.requires_replace.contains(&AttrPath::attr("triggers")));
    let params = Value::Map(BTreeMap::from([(
        "max_bytes".to_owned(),
        Value::string("1G"),
    )]));
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &bench(&[("parameters", params)]),
    )
    .await;
    assert_eq!(p.action, Action::Replace);
}

#[tokio::test]
async fn a_stricter_threshold_is_re_checked_in_place_and_plans_failed() {
    let prior = created(&[]).await;
    let t = thresholds(&[("largest_size_bus_bandwidth", threshold(Some(500), None))]);
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &bench(&[("thresholds", t)]),
    )
    .await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(p.planned.get("status"), &Value::string("failed"));
    let failures = p.planned.get("failures").as_seq().expect("known failures");
    assert_eq!(failures.len(), 1);
    let text = failures[0].as_str().expect("string");
    assert!(
        text.contains("largest_size_bus_bandwidth = 480.16") && text.contains("min 500"),
        "{text}"
    );
    assert_eq!(p.planned.get("results"), prior.get("results"));
}

#[tokio::test]
async fn an_unknown_metric_is_an_error_on_thresholds_listing_the_suite_metrics() {
    let t = thresholds(&[("busbw", threshold(Some(400), None))]);
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &bench(&[("thresholds", t)]),
    )
    .await;
    let d = p.diagnostics.iter().next().expect("a diagnostic");
    assert_eq!(
        d.path.as_ref(),
        Some(&AttrPath::attr("thresholds").push_key("busbw"))
    );
    assert!(d.detail.contains("average_bus_bandwidth"), "{}", d.detail);
}

#[tokio::test]
async fn neither_virtual_cluster_nor_namespace_is_an_error() {
    let c = config(
        &kind(),
        &[
            ("name", Value::string("a")),
            ("suite", Value::string("gpu-burn")),
            ("image", Value::string("gpu-burn:latest")),
        ],
    );
    let p = plan(&kind(), &Context::default(), &Value::Null, &c).await;
    assert!(p.diagnostics.has_error());
}

#[tokio::test]
async fn custom_needs_a_command() {
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &bench(&[("suite", Value::string("custom"))]),
    )
    .await;
    let d = p.diagnostics.iter().next().expect("a diagnostic");
    assert_eq!(d.path.as_ref(), Some(&AttrPath::attr("command")));
}

#[tokio::test]
async fn a_pool_of_another_virtual_cluster_is_refused() {
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &bench(&[("node_pool_id", Value::string("vc-b/b/train"))]),
    )
    .await;
    let d = p.diagnostics.iter().next().expect("a diagnostic");
    assert_eq!(d.path.as_ref(), Some(&AttrPath::attr("node_pool_id")));
}

fn params(entries: &[(&str, &str)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::string(*v)))
            .collect(),
    )
}

/// The error diagnostics of planning a new benchmark with `extra`.
async fn errors(extra: &[(&str, Value)]) -> Vec<(Option<AttrPath>, String)> {
    let p = plan(&kind(), &Context::default(), &Value::Null, &bench(extra)).await;
    p.diagnostics
        .iter()
        .filter(|d| d.severity == gpufleet_engine::diag::Severity::Error)
        .map(|d| (d.path.clone(), d.detail.clone()))
        .collect()
}

#[tokio::test]
async fn aiperf_needs_a_model_and_an_url() {
    let e = errors(&[("suite", Value::string("aiperf"))]).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("parameters")));
    assert!(
        e[0].1.contains("set parameters.model (") && e[0].1.contains("and parameters.url ("),
        "names what to set: {}",
        e[0].1
    );
    let e = errors(&[
        ("suite", Value::string("aiperf")),
        ("parameters", params(&[("model", "llama")])),
    ])
    .await;
    assert!(
        e[0].1.contains("parameters.url") && !e[0].1.contains("parameters.model"),
        "{e:?}"
    );
    let ok = errors(&[
        ("suite", Value::string("aiperf")),
        (
            "parameters",
            params(&[("model", "llama"), ("url", "http://vllm:8000")]),
        ),
    ])
    .await;
    assert!(ok.is_empty(), "{ok:?}");
}

#[tokio::test]
async fn a_token_timing_threshold_needs_a_streaming_run() {
    let base = [("model", "llama"), ("url", "http://vllm:8000")];
    let ttft = thresholds(&[("time_to_first_token_p99", threshold(None, Some(500)))]);
    // Streaming is the default: the threshold stands.
    let e = errors(&[
        ("suite", Value::string("aiperf")),
        ("parameters", params(&base)),
        ("thresholds", ttft.clone()),
    ])
    .await;
    assert!(e.is_empty(), "{e:?}");

    let e = errors(&[
        ("suite", Value::string("aiperf")),
        (
            "parameters",
            params(&[base[0], base[1], ("streaming", "false")]),
        ),
        ("thresholds", ttft.clone()),
    ])
    .await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].0,
        Some(AttrPath::attr("thresholds").push_key("time_to_first_token_p99"))
    );
    assert!(
        e[0].1.contains("parameters.streaming = \"true\""),
        "{}",
        e[0].1
    );

    // An endpoint type that cannot stream turns streaming off as surely.
    let e = errors(&[
        ("suite", Value::string("aiperf")),
        (
            "parameters",
            params(&[base[0], base[1], ("endpoint_type", "embeddings")]),
        ),
        ("thresholds", ttft),
    ])
    .await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].1.contains("\"embeddings\" does not stream"),
        "{}",
        e[0].1
    );

    // request latency exists either way.
    let e = errors(&[
        ("suite", Value::string("aiperf")),
        (
            "parameters",
            params(&[base[0], base[1], ("streaming", "false")]),
        ),
        (
            "thresholds",
            thresholds(&[("request_latency_p99", threshold(None, Some(9000)))]),
        ),
    ])
    .await;
    assert!(e.is_empty(), "{e:?}");
}

#[tokio::test]
async fn suite_parameters_are_checked_on_their_own_key() {
    for (suite, key, value, hint) in [
        ("aiperf", "streaming", "yes", "\"true\""),
        (
            "dcgm-diag",
            "host_engine",
            "localhost:99999",
            "<host>[:<port>]",
        ),
        ("dcgm-diag", "level", "5", "level 1"),
        ("gpu-burn", "seconds", "1m", "whole number"),
        ("gpu-burn", "memory", "150%", "90%"),
        ("nvbandwidth", "testcases", "h2d;rm -rf", "nvbandwidth -l"),
    ] {
        let mut p = vec![(key, value)];
        if suite == "aiperf" {
            p.extend([("model", "m"), ("url", "http://u")]);
        }
        let e = errors(&[("suite", Value::string(suite)), ("parameters", params(&p))]).await;
        assert_eq!(e.len(), 1, "{suite}.{key}: {e:?}");
        assert_eq!(
            e[0].0,
            Some(AttrPath::attr("parameters").push_key(key)),
            "{suite}.{key}"
        );
        assert!(e[0].1.contains(hint), "{suite}.{key}: {}", e[0].1);
    }
    // A configured command reads the parameters its own way.
    let e = errors(&[
        ("suite", Value::string("dcgm-diag")),
        ("command", Value::List(vec![Value::string("/bin/diag")])),
        ("parameters", params(&[("level", "5")])),
    ])
    .await;
    assert!(e.is_empty(), "{e:?}");
    let e = errors(&[
        ("suite", Value::string("dcgm-diag")),
        (
            "parameters",
            params(&[("host_engine", "nvidia-dcgm.gpu-operator.svc:5555")]),
        ),
    ])
    .await;
    assert!(e.is_empty(), "{e:?}");
}

/// An aiperf run's base configuration with `extra`.
fn aiperf(extra: &[(&'static str, Value)]) -> Vec<(&'static str, Value)> {
    let mut attrs = vec![
        ("suite", Value::string("aiperf")),
        (
            "parameters",
            params(&[("model", "llama"), ("url", "http://vllm:8000")]),
        ),
    ];
    attrs.extend_from_slice(extra);
    attrs
}

#[tokio::test]
async fn the_endpoint_key_is_never_planned_and_its_version_updates_in_place() {
    let key = ("endpoint_api_key_wo", Value::string("sk-plan-1"));
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &bench(&aiperf(&[
            key.clone(),
            ("endpoint_api_key_wo_version", Value::int(1)),
        ])),
    )
    .await;
    assert!(!p.diagnostics.has_error(), "{}", show(&p.diagnostics));
    assert!(p.planned.get("endpoint_api_key_wo").is_null());
    let prior = applied(&p.planned);
    let rotated = bench(&aiperf(&[
        ("endpoint_api_key_wo", Value::string("sk-plan-2")),
        ("endpoint_api_key_wo_version", Value::int(2)),
    ]));
    let p = plan(&kind(), &Context::default(), &prior, &rotated).await;
    assert_eq!(p.action, Action::Update, "a new key does not run again");
    assert!(p.planned.get("endpoint_api_key_wo").is_null());
}

#[tokio::test]
async fn the_endpoint_key_is_refused_where_no_endpoint_is_reached() {
    let key = ("endpoint_api_key_wo", Value::string("sk-1"));
    let e = errors(std::slice::from_ref(&key)).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("endpoint_api_key_wo")));
    assert!(
        e[0].1.contains("nccl-all-reduce suite reaches no endpoint"),
        "{}",
        e[0].1
    );

    let e = errors(&aiperf(&[("endpoint_api_key_wo_version", Value::int(3))])).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("endpoint_api_key_wo_version")));
    assert!(errors(&aiperf(&[key])).await.is_empty());
}

#[tokio::test]
async fn a_secret_in_parameters_is_pointed_at_the_write_only_key() {
    let e = errors(&[
        ("suite", Value::string("aiperf")),
        (
            "parameters",
            params(&[
                ("model", "llama"),
                ("url", "http://vllm:8000"),
                ("api_key", "sk-1"),
            ]),
        ),
    ])
    .await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].0,
        Some(AttrPath::attr("parameters").push_key("api_key"))
    );
    assert!(e[0].1.contains("endpoint_api_key_wo"), "{}", e[0].1);

    // The custom suite takes any parameter, so a secret-looking one is only a warning.
    let p = plan(
        &kind(),
        &Context::default(),
        &Value::Null,
        &bench(&[
            ("suite", Value::string("custom")),
            ("command", Value::List(vec![Value::string("run.sh")])),
            (
                "parameters",
                params(&[("hf_token", "hf_x"), ("tokens", "512")]),
            ),
        ]),
    )
    .await;
    let warned: Vec<_> = p
        .diagnostics
        .iter()
        .filter(|d| d.summary == "Secret In Parameters")
        .map(|d| d.path.clone())
        .collect();
    assert_eq!(
        warned,
        [Some(AttrPath::attr("parameters").push_key("hf_token"))]
    );
}

#[tokio::test]
async fn an_endpoint_run_on_several_nodes_is_refused_on_nodes() {
    let e = errors(&aiperf(&[("nodes", Value::int(2))])).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("nodes")));
    assert!(e[0].1.contains("Set nodes = 1"), "{}", e[0].1);
    // Every suite that runs on each node on its own may take several.
    for suite in ["nvbandwidth", "dcgm-diag", "gpu-burn"] {
        let e = errors(&[
            ("suite", Value::string(suite)),
            ("command", Value::Null),
            ("nodes", Value::int(2)),
        ])
        .await;
        assert!(e.is_empty(), "{suite}: {e:?}");
    }
}

#[tokio::test]
async fn a_baseline_is_checked_on_its_own_attributes() {
    let base = Value::object([
        (
            "results",
            Value::Map(BTreeMap::from([(
                "bus_bandwidth_typo".to_owned(),
                Value::int(400),
            )])),
        ),
        ("environment", Value::Null),
        ("min_ratio", Value::Number("1.5".parse().expect("number"))),
        (
            "allow_differences",
            Value::List(vec![Value::string("started_at")]),
        ),
        ("source", Value::Null),
    ]);
    let e = errors(&[("baseline", base)]).await;
    let paths: Vec<String> = e
        .iter()
        .map(|(p, _)| p.as_ref().map(ToString::to_string).unwrap_or_default())
        .collect();
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(paths.iter().any(|p| p.contains("results")), "{paths:?}");
    assert!(paths.iter().any(|p| p.contains("min_ratio")), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.contains("allow_differences")),
        "{paths:?}"
    );
}

#[tokio::test]
async fn units_need_a_pool_and_a_tolerance_needs_units_and_a_share_below_one() {
    let block = ("per", Value::string("block"));
    let e = errors(&[block.clone(), ("node_pool_id", Value::Null)]).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("per")));
    assert!(e[0].1.contains("set node_pool_id"), "{}", e[0].1);

    let share = |s: &str| Value::Number(s.parse().expect("number"));
    let e = errors(&[("unit_tolerance", share("0.05"))]).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("unit_tolerance")));
    assert!(e[0].1.contains("set per"), "{}", e[0].1);

    let e = errors(&[block.clone(), ("unit_tolerance", share("5"))]).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].1.contains("unit_tolerance is 5;"), "{}", e[0].1);

    let e = errors(&[("per", Value::string("rack"))]).await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, Some(AttrPath::attr("per")));

    assert!(
        errors(&[block, ("unit_tolerance", share("0.1"))])
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_wider_unit_tolerance_is_re_checked_in_place() {
    // A run of two blocks, one 8% below the other.
    let per = ("per", Value::string("block"));
    let mut prior = created(std::slice::from_ref(&per)).await;
    let unit = |v: &str| {
        Value::Map(BTreeMap::from([(
            "largest_size_bus_bandwidth".to_owned(),
            Value::Number(v.parse().expect("number")),
        )]))
    };
    prior.set_attr(
        "unit_results",
        Value::Map(BTreeMap::from([
            ("b1".to_owned(), unit("480.16")),
            ("b2".to_owned(), unit("441.7")),
        ])),
    );
    let tolerance = |t: &str| ("unit_tolerance", Value::Number(t.parse().expect("number")));
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &bench(&[per.clone(), tolerance("0.05")]),
    )
    .await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(p.planned.get("status"), &Value::string("failed"));
    let f = p.planned.get("failures").as_seq().expect("known failures");
    assert!(
        f.iter().any(|f| f
            .as_str()
            .is_some_and(|t| t.contains("on block b2 = 441.7"))),
        "{f:?}"
    );
    let p = plan(
        &kind(),
        &Context::default(),
        &prior,
        &bench(&[per, tolerance("0.1")]),
    )
    .await;
    assert_eq!(p.action, Action::Update);
    assert_eq!(p.planned.get("status"), &Value::string("passed"));
}
