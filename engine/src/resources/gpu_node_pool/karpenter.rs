//! The Karpenter `NodePool` (`karpenter.sh/v1`) an `auto` pool emits. Pure.
//!
//! The NodePool asks for nodes of the pool's GPU product (a requirement on
//! `nvidia.com/gpu.product`), gives them the pool's labels and taints through its template,
//! and caps the pool with `limits` on `nodes` and `nvidia.com/gpu`. The GPU limit assumes the
//! product's usual 8 GPUs per node (4 for PCIe cards without NVLink), since the instance type
//! is Karpenter's choice.

use serde_json::{Value as Json, json};

use super::{
    node_config::Desired,
    spec::{GPU_PRODUCT_LABEL, PoolSpec},
};
use crate::backends::kube::{MANAGED_BY, MANAGED_BY_VALUE, POOL};

/// The label Karpenter puts on the nodes it launches for a NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// GPUs per node assumed for the NodePool's GPU limit.
pub fn gpus_per_node(spec: &PoolSpec) -> u32 {
    match spec.model.nvlink_domain_size {
        Some(n) => u32::from(n).clamp(1, 8),
        None => 4,
    }
}

/// The NodePool object.
pub fn node_pool(spec: &PoolSpec, want: &Desired) -> Json {
    let max = spec
        .autoscaling
        .map(|(_, max)| max)
        .or(spec.node_count)
        .unwrap_or(1);
    let taints: Vec<Json> = want
        .taints
        .iter()
        .map(|t| match &t.value {
            Some(v) => json!({"key": t.key, "value": v, "effect": t.effect}),
            None => json!({"key": t.key, "effect": t.effect}),
        })
        .collect();
    let (group, kind, name) = &spec.node_class;
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": spec.node_pool_name(),
            "labels": {
                MANAGED_BY: MANAGED_BY_VALUE,
                POOL: spec.pool_label(),
            },
        },
        "spec": {
            "template": {
                "metadata": { "labels": want.labels },
                "spec": {
                    "requirements": [{
                        "key": GPU_PRODUCT_LABEL,
                        "operator": "In",
                        "values": [spec.model.product],
                    }],
                    "taints": taints,
                    "nodeClassRef": { "group": group, "kind": kind, "name": name },
                },
            },
            "limits": {
                "nodes": max.to_string(),
                "nvidia.com/gpu": (max * gpus_per_node(spec)).to_string(),
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "5m",
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        resources::gpu_node_pool::{
            node_config::{Tier, desired},
            spec::PoolSpec,
        },
        value::Value,
    };

    #[test]
    fn node_pool_carries_product_limits_labels_and_tenant_taint() {
        let v = Value::object([
            ("name", Value::string("infer")),
            ("virtual_cluster_id", Value::string("vc-a/a")),
            ("gpu_product", Value::string("H100-SXM")),
            ("source", Value::string("auto")),
            (
                "autoscaling",
                Value::object([("min_nodes", Value::int(0)), ("max_nodes", Value::int(4))]),
            ),
        ]);
        let spec = PoolSpec::from_value(&v).expect("spec");
        let np = node_pool(&spec, &desired(&spec, Tier::Private));
        assert_eq!(np["metadata"]["name"], "gpufleet-a-infer");
        assert_eq!(np["spec"]["limits"]["nodes"], "4");
        assert_eq!(np["spec"]["limits"]["nvidia.com/gpu"], "32");
        assert_eq!(
            np["spec"]["template"]["spec"]["requirements"][0]["values"][0],
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(
            np["spec"]["template"]["spec"]["taints"][0]["key"],
            "gpufleet.dev/tenant"
        );
        assert_eq!(
            np["spec"]["template"]["metadata"]["labels"]["gpufleet.dev/pool"],
            "a.infer"
        );
    }
}
