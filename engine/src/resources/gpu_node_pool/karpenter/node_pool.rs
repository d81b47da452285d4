//! The NodePool object and the requirements it is written with.

use serde_json::{Value as Json, json};

use super::{cloud_gpus::cloud_gpu, label_keys::CAPACITY_TYPE};
use crate::{
    backends::kube::{GPU_PRODUCT_LABEL, MANAGED_BY, MANAGED_BY_VALUE, POOL},
    gpu_products,
    resources::gpu_node_pool::{
        choices::Cloud, config::Requirement, model::PoolSpec, node_config::Desired,
    },
};

/// The capacity type an `auto` pool launches when its requirements name none: Karpenter
/// itself would take the cheapest offering, spot where the cloud has it, whose nodes the
/// cloud may reclaim under a training run.
const DEFAULT_CAPACITY_TYPE: &str = "on-demand";

// How a requirement is written in the NodePool.
impl Requirement {
    fn is_in(key: &str, values: Vec<String>) -> Requirement {
        Requirement {
            key: key.to_owned(),
            operator: "In".to_owned(),
            values,
            min_values: None,
        }
    }

    fn json(&self) -> Json {
        let mut r = json!({"key": self.key, "operator": self.operator});
        if !self.values.is_empty() {
            r["values"] = json!(self.values);
        }
        if let Some(n) = self.min_values {
            r["minValues"] = json!(n);
        }
        r
    }
}

/// The provider a pool's NodePool is written for: `karpenter.provider`, else the one of the
/// node class group.
pub fn cloud(spec: &PoolSpec) -> Cloud {
    spec.karpenter
        .cloud
        .or_else(|| Cloud::of_group(&spec.node_class.0))
        .unwrap_or(Cloud::Generic)
}

/// GPUs per node: `karpenter.gpus_per_node`, else the product's; `None` when servers differ.
pub fn gpus_per_node(spec: &PoolSpec) -> Option<u32> {
    spec.karpenter
        .gpus_per_node
        .or_else(|| gpu_products::gpus_per_node(spec.model))
}

/// The requirements gpufleet writes: the product label, then the cloud's GPU keys.
fn product_requirements(spec: &PoolSpec) -> Vec<Requirement> {
    let mut reqs = vec![Requirement::is_in(
        GPU_PRODUCT_LABEL,
        vec![spec.model.product.to_owned()],
    )];
    let cloud = cloud(spec);
    let (Some(keys), Some(g)) = (cloud.keys(), cloud_gpu(cloud, spec.model)) else {
        return reqs;
    };
    let counts: Vec<String> = match gpus_per_node(spec) {
        Some(n) => vec![n.to_string()],
        None => g.counts.iter().map(u32::to_string).collect(),
    };
    reqs.push(Requirement::is_in(keys.manufacturer, vec!["nvidia".into()]));
    reqs.push(Requirement::is_in(keys.name, vec![g.name.to_owned()]));
    reqs.push(Requirement::is_in(keys.count, counts));
    if let (Some(key), Some(mib)) = (keys.memory, g.memory_mib) {
        reqs.push(Requirement::is_in(key, vec![mib.to_string()]));
    }
    reqs
}

/// Every requirement of the NodePool: gpufleet's, on-demand capacity unless the user's
/// requirements or node labels name a capacity type, then the user's.
pub fn requirements(spec: &PoolSpec) -> Vec<Requirement> {
    let mut reqs = product_requirements(spec);
    let user = &spec.karpenter.requirements;
    // A capacity-type node label is a requirement to Karpenter too.
    let labelled = spec.node_labels.contains_key(CAPACITY_TYPE);
    if !labelled && !user.iter().any(|r| r.key == CAPACITY_TYPE) {
        reqs.push(Requirement::is_in(
            CAPACITY_TYPE,
            vec![DEFAULT_CAPACITY_TYPE.to_owned()],
        ));
    }
    reqs.extend(user.iter().cloned());
    reqs
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
    let mut limits = json!({ "nodes": max.to_string() });
    if let Some(n) = gpus_per_node(spec) {
        limits["nvidia.com/gpu"] = json!((max * n).to_string());
    }
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
                    "requirements": requirements(spec).iter().map(Requirement::json).collect::<Vec<_>>(),
                    "taints": taints,
                    "nodeClassRef": { "group": group, "kind": kind, "name": name },
                },
            },
            "limits": limits,
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "5m",
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::{
        super::fixtures::{config, karpenter, req},
        *,
    };
    use crate::{
        resources::gpu_node_pool::{choices::Tier, node_config::desired},
        value::Value,
    };

    fn node_pool_of(v: &Value) -> Json {
        let spec = PoolSpec::from_value(v).expect("spec");
        node_pool(&spec, &desired(&spec, Tier::Private))
    }

    fn requirement<'a>(np: &'a Json, key: &str) -> Option<&'a Json> {
        np["spec"]["template"]["spec"]["requirements"]
            .as_array()?
            .iter()
            .find(|r| r["key"] == key)
    }

    #[test]
    fn aws_node_pool_asks_for_the_gpu_by_its_instance_labels() {
        let np = node_pool_of(&config("H100-SXM", Value::Null, None));
        assert_eq!(np["metadata"]["name"], "gpufleet-a-infer");
        assert_eq!(np["spec"]["limits"]["nodes"], "4");
        assert_eq!(np["spec"]["limits"]["nvidia.com/gpu"], "32");
        let values = |k: &str| requirement(&np, k).map(|r| r["values"].clone());
        assert_eq!(
            values(GPU_PRODUCT_LABEL),
            Some(json!(["NVIDIA-H100-80GB-HBM3"]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-gpu-name"),
            Some(json!(["h100"]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-gpu-count"),
            Some(json!(["8"]))
        );
        assert_eq!(
            values("karpenter.k8s.aws/instance-gpu-manufacturer"),
            Some(json!(["nvidia"]))
        );
        assert_eq!(
            np["spec"]["template"]["spec"]["taints"][0]["key"],
            "gpufleet.dev/tenant"
        );
        assert_eq!(
            np["spec"]["template"]["metadata"]["labels"]["gpufleet.dev/pool"],
            "a.infer"
        );
        // The two A100s share a name on EC2 and differ by memory.
        let a100 = node_pool_of(&config("NVIDIA-A100-SXM4-40GB", Value::Null, None));
        assert_eq!(
            requirement(&a100, "karpenter.k8s.aws/instance-gpu-memory").map(|r| &r["values"]),
            Some(&json!(["40960"]))
        );
    }

    #[test]
    fn azure_and_generic_node_pools() {
        let az = node_pool_of(&config(
            "NVIDIA-H100-NVL",
            Value::Null,
            Some("karpenter.azure.com/AKSNodeClass/gpu"),
        ));
        assert_eq!(
            requirement(&az, "karpenter.azure.com/sku-gpu-name").map(|r| &r["values"]),
            Some(&json!(["H100"]))
        );
        // GPUs per node differ between H100 NVL sizes: every offered count, no GPU limit.
        assert_eq!(
            requirement(&az, "karpenter.azure.com/sku-gpu-count").map(|r| &r["values"]),
            Some(&json!(["1", "2"]))
        );
        assert!(az["spec"]["limits"].get("nvidia.com/gpu").is_none());
        let generic = node_pool_of(&config(
            "NVIDIA-L40S",
            karpenter(
                Some("generic"),
                Some(4),
                vec![req("node.kubernetes.io/instance-type", "In", &["x.4gpu"])],
            ),
            None,
        ));
        let keys: Vec<&Json> = generic["spec"]["template"]["spec"]["requirements"]
            .as_array()
            .expect("requirements")
            .iter()
            .map(|r| &r["key"])
            .collect();
        assert_eq!(
            keys,
            [
                GPU_PRODUCT_LABEL,
                CAPACITY_TYPE,
                "node.kubernetes.io/instance-type"
            ]
        );
        // On-demand unless the user names a capacity type.
        assert_eq!(
            requirement(&generic, CAPACITY_TYPE).map(|r| &r["values"]),
            Some(&json!(["on-demand"]))
        );
        let spot = node_pool_of(&config(
            "NVIDIA-L40S",
            karpenter(None, None, vec![req(CAPACITY_TYPE, "In", &["spot"])]),
            None,
        ));
        let capacity: Vec<&Json> = spot["spec"]["template"]["spec"]["requirements"]
            .as_array()
            .expect("requirements")
            .iter()
            .filter(|r| r["key"] == CAPACITY_TYPE)
            .collect();
        assert_eq!(
            capacity,
            [&json!({"key": CAPACITY_TYPE, "operator": "In", "values": ["spot"]})]
        );
        assert_eq!(generic["spec"]["limits"]["nvidia.com/gpu"], "16");
    }
}
