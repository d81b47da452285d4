//! Rules of a configuration alone, across every kind: each row is an input plan once accepted
//! (it failed only at apply, or never), and must now be refused on its attribute, quoting the
//! value and saying what is accepted.

use std::collections::BTreeMap;

use crate::{registry, validate::validate_block, value::Value};

fn map(entries: &[(&str, &str)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::string(*v)))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn taint(key: &str, value: &str) -> Value {
    Value::List(vec![Value::object([
        ("key", Value::string(key)),
        ("value", Value::string(value)),
        ("effect", Value::string("NoSchedule")),
    ])])
}

/// The offline diagnostics of a resource or data source: validators, then its own checks.
fn validate(type_name: &str, config: &Value) -> crate::diag::Diagnostics {
    if let Some(kind) = registry::resource(type_name) {
        let mut d = validate_block(&kind.schema().block, config);
        d.extend(kind.validate(config));
        return d;
    }
    let kind = registry::data_source(type_name).expect("a registered type");
    let mut d = validate_block(&kind.schema().block, config);
    d.extend(kind.validate(config));
    d
}

#[test]
fn rules_of_the_configuration_alone_stop_plan_on_their_attribute() {
    let vc = "gpufleet_virtual_cluster";
    let pool = "gpufleet_gpu_node_pool";
    let bench = "gpufleet_benchmark";
    // (type, configuration, attribute path, the value quoted, what is accepted)
    let rows: Vec<(&str, Value, &str, &str, &str)> = vec![
        (
            vc,
            Value::object([("namespace", Value::string("kube-system"))]),
            "namespace",
            "\"kube-system\"",
            "Not accepted: default, kube-system",
        ),
        (
            vc,
            Value::object([("namespace", Value::string("default"))]),
            "namespace",
            "\"default\"",
            "Not accepted",
        ),
        (
            vc,
            Value::object([("namespace", Value::string("kube-node-lease"))]),
            "namespace",
            "\"kube-node-lease\"",
            "Not accepted",
        ),
        (
            vc,
            Value::object([("namespace", Value::string("gpu-operator"))]),
            "namespace",
            "\"gpu-operator\"",
            "Not accepted",
        ),
        (
            vc,
            Value::object([("namespace", Value::string("karpenter"))]),
            "namespace",
            "\"karpenter\"",
            "Not accepted",
        ),
        (
            vc,
            Value::object([(
                "limit_range",
                Value::object([
                    ("default_cpu", Value::string("1")),
                    ("default_request_cpu", Value::string("1500m")),
                ]),
            )]),
            "limit_range.default_request_cpu",
            "\"1500m\"",
            "accepted: a request no larger than the limit",
        ),
        (
            vc,
            Value::object([(
                "limit_range",
                Value::object([
                    ("default_memory", Value::string("1Gi")),
                    ("default_request_memory", Value::string("2Gi")),
                ]),
            )]),
            "limit_range.default_request_memory",
            "\"2Gi\"",
            "accepted: a request no larger than the limit",
        ),
        (
            vc,
            Value::object([("labels", map(&[("cost center", "ml")]))]),
            "labels[\"cost center\"]",
            "\"cost center\"",
            "accepted: [prefix/]name",
        ),
        (
            vc,
            Value::object([("labels", map(&[("Example.com/team", "ml")]))]),
            "labels[\"Example.com/team\"]",
            "\"Example.com/team\"",
            "accepted: [prefix/]name",
        ),
        (
            vc,
            Value::object([("labels", map(&[("team", "-ml-")]))]),
            "labels[\"team\"]",
            "\"-ml-\"",
            "accepted: empty, or at most 63",
        ),
        (
            pool,
            Value::object([("node_taints", taint("bad key", "x"))]),
            "node_taints[0].key",
            "\"bad key\"",
            "accepted: [prefix/]name",
        ),
        (
            pool,
            Value::object([("node_taints", taint("dedicated", "a b"))]),
            "node_taints[0].value",
            "\"a b\"",
            "accepted: empty, or at most 63",
        ),
        (
            pool,
            Value::object([("node_labels", map(&[("team", "-ml")]))]),
            "node_labels[\"team\"]",
            "\"-ml\"",
            "accepted: empty, or at most 63",
        ),
        (
            pool,
            Value::object([(
                "sharing",
                Value::object([
                    ("strategy", Value::string("time-slicing")),
                    ("replicas", Value::int(1000)),
                ]),
            )]),
            "sharing.replicas",
            "1000",
            "accepted: 2",
        ),
        (
            bench,
            Value::object([
                ("suite", Value::string("dcgm-diag")),
                ("parameters", map(&[("levle", "3")])),
            ]),
            "parameters[\"levle\"]",
            "\"levle\"",
            "accepted: level, host_engine",
        ),
        (
            bench,
            Value::object([
                ("suite", Value::string("gpu-burn")),
                ("parameters", map(&[("second", "30")])),
            ]),
            "parameters[\"second\"]",
            "\"second\"",
            "accepted: seconds, doubles, tensor_cores, memory",
        ),
        (
            bench,
            Value::object([
                ("suite", Value::string("nccl-all-reduce")),
                ("parameters", map(&[("max_bytes", "8GB")])),
            ]),
            "parameters[\"max_bytes\"]",
            "\"8GB\"",
            "accepted: a whole number of bytes",
        ),
        (
            bench,
            Value::object([
                ("suite", Value::string("gpu-burn")),
                ("image", Value::string("")),
            ]),
            "image",
            "\"\"",
            "accepted: an image reference",
        ),
        (
            "gpufleet_bcm_node",
            Value::object([("category", Value::string("free-pool"))]),
            "category",
            "\"free-pool\"",
            "accepted: any other BCM category",
        ),
        (
            "gpufleet_bcm_nodes",
            Value::object([("status", Value::string("RUNNING"))]),
            "status",
            "\"RUNNING\"",
            "accepted (case is ignored): UP, DOWN",
        ),
    ];
    let mut failures = Vec::new();
    for (type_name, config, path, value, accepted) in &rows {
        let diags = validate(type_name, config);
        let hit = diags.0.iter().find(|d| {
            d.path.as_ref().is_some_and(|p| p.to_string() == *path)
                && d.detail.contains(value)
                && d.detail.contains(accepted)
        });
        if hit.is_none() {
            failures.push(format!(
                "{type_name} {path}: no error quoting {value} and {accepted:?}; got {:#?}",
                diags.0
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn what_the_rules_accept_still_passes() {
    let rows: Vec<(&str, Value)> = vec![
        (
            "gpufleet_virtual_cluster",
            Value::object([
                ("namespace", Value::string("vc-team-a")),
                (
                    "labels",
                    map(&[("example.com/cost-center", "ml-research"), ("empty", "")]),
                ),
            ]),
        ),
        (
            "gpufleet_virtual_cluster",
            Value::object([(
                "limit_range",
                Value::object([
                    ("default_cpu", Value::string("2")),
                    ("default_request_cpu", Value::string("2000m")),
                    ("default_memory", Value::string("8Gi")),
                    ("default_request_memory", Value::string("1Gi")),
                ]),
            )]),
        ),
        (
            "gpufleet_gpu_node_pool",
            Value::object([
                ("node_taints", taint("example.com/dedicated", "")),
                (
                    "sharing",
                    Value::object([
                        ("strategy", Value::string("time-slicing")),
                        ("replicas", Value::int(48)),
                    ]),
                ),
            ]),
        ),
        (
            "gpufleet_benchmark",
            Value::object([
                ("suite", Value::string("dcgm-diag")),
                ("parameters", map(&[("level", "3")])),
            ]),
        ),
        (
            "gpufleet_benchmark",
            Value::object([
                ("suite", Value::string("nccl-all-reduce")),
                (
                    "parameters",
                    map(&[
                        ("min_bytes", "8"),
                        ("max_bytes", "8G"),
                        ("step_factor", "2"),
                    ]),
                ),
            ]),
        ),
        (
            "gpufleet_benchmark",
            Value::object([
                ("suite", Value::string("custom")),
                ("command", Value::List(vec![Value::string("true")])),
                ("parameters", map(&[("anything", "x")])),
            ]),
        ),
        (
            "gpufleet_bcm_nodes",
            Value::object([("status", Value::string("up"))]),
        ),
        (
            "gpufleet_bcm_node",
            Value::object([("category", Value::string("gpu-compute"))]),
        ),
    ];
    for (type_name, config) in &rows {
        let diags = validate(type_name, config);
        let judged: Vec<_> = diags
            .0
            .iter()
            .filter(|d| {
                d.path.as_ref().is_some_and(|p| {
                    let p = p.to_string();
                    [
                        "namespace",
                        "labels",
                        "limit_range",
                        "node_taints",
                        "sharing",
                        "parameters",
                        "status",
                        "category",
                    ]
                    .iter()
                    .any(|a| p.starts_with(a))
                })
            })
            .collect();
        assert!(judged.is_empty(), "{type_name}: {judged:#?}");
    }
}
