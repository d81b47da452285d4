//! Raw configurations of `auto` pools for the tests of the NodePool and its checks.

use crate::value::Value;

pub(super) fn config(product: &str, karpenter: Value, class: Option<&str>) -> Value {
    Value::object([
        ("name", Value::string("infer")),
        ("virtual_cluster_id", Value::string("vc-a/a")),
        ("gpu_product", Value::string(product)),
        ("source", Value::string("auto")),
        (
            "autoscaling",
            Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(4))]),
        ),
        ("karpenter", karpenter),
        ("karpenter_node_class", class.map(Value::string).into()),
    ])
}

pub(super) fn karpenter(provider: Option<&str>, gpus: Option<i64>, reqs: Vec<Value>) -> Value {
    Value::object([
        ("provider", provider.map(Value::string).into()),
        ("gpus_per_node", gpus.map(Value::int).into()),
        (
            "requirements",
            if reqs.is_empty() {
                Value::Null
            } else {
                Value::List(reqs)
            },
        ),
    ])
}

pub(super) fn req(key: &str, op: &str, values: &[&str]) -> Value {
    Value::object([
        ("key", Value::string(key)),
        ("operator", Value::string(op)),
        (
            "values",
            Value::List(values.iter().map(|v| Value::string(*v)).collect()),
        ),
        ("min_values", Value::Null),
    ])
}
