//! The instance types the lab's Karpenter may launch: GPU instances named and labelled as
//! Karpenter's AWS provider names and labels EC2's, in the file format of the KWOK
//! provider's `INSTANCE_TYPES_FILE_PATH` (`kwok/cloudprovider/helpers.go`:
//! `InstanceTypeOptions`).
//!
//! The KWOK provider has no GPU instance types of its own and no place for an instance
//! type's labels but its offerings' requirements, which it writes on the nodes it launches.
//! So every offering carries the `karpenter.k8s.aws/instance-gpu-*` labels the AWS provider
//! puts on that instance type, and a NodePool that asks for an H100 by those labels gets the
//! instance an EC2 cluster would give it. Sizes, GPU counts and GPU memory are EC2's; the
//! prices only order the offerings (spot below on-demand, larger above smaller).

use serde_json::{Value as Json, json};

/// The zones the lab's fleet spreads over (`fleet.rs`'s default sites).
pub const ZONES: &[&str] = &["zone-a", "zone-b"];

/// One GPU instance type.
struct GpuInstance {
    name: &'static str,
    cpus: u32,
    memory_gib: u32,
    gpus: u32,
    /// The AWS provider's `instance-gpu-name`.
    gpu_name: &'static str,
    /// The AWS provider's `instance-gpu-memory` (MiB per GPU).
    gpu_memory_mib: u32,
    /// On-demand price per hour, for ordering.
    price: f64,
}

const INSTANCES: &[GpuInstance] = &[
    GpuInstance {
        name: "p4d.24xlarge",
        cpus: 96,
        memory_gib: 1152,
        gpus: 8,
        gpu_name: "a100",
        gpu_memory_mib: 40_960,
        price: 21.96,
    },
    GpuInstance {
        name: "p4de.24xlarge",
        cpus: 96,
        memory_gib: 1152,
        gpus: 8,
        gpu_name: "a100",
        gpu_memory_mib: 81_920,
        price: 27.45,
    },
    GpuInstance {
        name: "p5.4xlarge",
        cpus: 16,
        memory_gib: 256,
        gpus: 1,
        gpu_name: "h100",
        gpu_memory_mib: 81_920,
        price: 6.88,
    },
    GpuInstance {
        name: "p5.48xlarge",
        cpus: 192,
        memory_gib: 2048,
        gpus: 8,
        gpu_name: "h100",
        gpu_memory_mib: 81_920,
        price: 55.04,
    },
    GpuInstance {
        name: "g6e.xlarge",
        cpus: 4,
        memory_gib: 32,
        gpus: 1,
        gpu_name: "l40s",
        gpu_memory_mib: 45_776,
        price: 1.86,
    },
    GpuInstance {
        name: "g6e.12xlarge",
        cpus: 48,
        memory_gib: 384,
        gpus: 4,
        gpu_name: "l40s",
        gpu_memory_mib: 45_776,
        price: 10.49,
    },
];

/// What spot costs, as a share of on-demand.
const SPOT_SHARE: f64 = 0.4;

fn requirement(key: &str, value: &str) -> Json {
    json!({ "key": key, "operator": "In", "values": [value] })
}

fn instance(it: &GpuInstance) -> Json {
    let gpu_labels = [
        (
            "karpenter.k8s.aws/instance-gpu-name",
            it.gpu_name.to_owned(),
        ),
        (
            "karpenter.k8s.aws/instance-gpu-manufacturer",
            "nvidia".into(),
        ),
        ("karpenter.k8s.aws/instance-gpu-count", it.gpus.to_string()),
        (
            "karpenter.k8s.aws/instance-gpu-memory",
            it.gpu_memory_mib.to_string(),
        ),
    ];
    let mut offerings = Vec::new();
    for zone in ZONES {
        for (capacity, share) in [("on-demand", 1.0), ("spot", SPOT_SHARE)] {
            let mut reqs = vec![
                requirement("karpenter.sh/capacity-type", capacity),
                requirement("topology.kubernetes.io/zone", zone),
            ];
            reqs.extend(gpu_labels.iter().map(|(k, v)| requirement(k, v)));
            offerings.push(json!({
                "Price": it.price * share,
                "Available": true,
                "Requirements": reqs,
            }));
        }
    }
    json!({
        "name": it.name,
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {
            "cpu": it.cpus.to_string(),
            "memory": format!("{}Gi", it.memory_gib),
            "pods": "110",
            "nvidia.com/gpu": it.gpus.to_string(),
        },
        "offerings": offerings,
    })
}

/// The instance-types file's contents.
#[must_use]
pub fn file() -> String {
    let all: Vec<Json> = INSTANCES.iter().map(instance).collect();
    serde_json::to_string_pretty(&all).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offering_carries_the_gpu_labels_of_its_instance() {
        let all: Vec<Json> = serde_json::from_str(&file()).expect("json");
        assert_eq!(all.len(), INSTANCES.len());
        let p5 = all
            .iter()
            .find(|i| i["name"] == "p5.48xlarge")
            .expect("p5.48xlarge");
        assert_eq!(p5["resources"]["nvidia.com/gpu"], "8");
        let offerings = p5["offerings"].as_array().expect("offerings");
        assert_eq!(offerings.len(), ZONES.len() * 2);
        for o in offerings {
            let has = |k: &str, v: &str| {
                o["Requirements"]
                    .as_array()
                    .expect("requirements")
                    .iter()
                    .any(|r| r["key"] == k && r["values"][0] == v)
            };
            assert!(has("karpenter.k8s.aws/instance-gpu-name", "h100"), "{o}");
            assert!(has("karpenter.k8s.aws/instance-gpu-count", "8"), "{o}");
        }
    }
}
