//! The objects of one run, rendered from the configuration and the pool's placement. Pure.
//!
//! Every run is an Indexed Job `gfb-<name>` with `parallelism = completions = nodes` and no
//! retries: one pod per node (required anti-affinity on the hostname), each requesting
//! `gpus_per_node` GPUs, with the pool's node selector and tolerations. With more than one
//! node a headless Service of the same name gives the pods stable DNS names
//! (`gfb-<name>-<index>.gfb-<name>`) to rendezvous on. The container is named after the suite.
//! Every object carries the owner labels, so an interrupted run is found again by name and
//! label, and destroy removes exactly what the benchmark made.

use std::collections::BTreeMap;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value as Json, json};

use crate::backends::kube::{MANAGED_BY, MANAGED_BY_VALUE, POOL};

use super::{
    commands::{ENDPOINT_API_KEY_ENV, command},
    model::BenchmarkSpec,
};

/// On every object of a benchmark: the benchmark's name.
pub const BENCHMARK_LABEL: &str = "gpufleet.dev/benchmark";

/// On the Job: a hash of its rendered spec, so a leftover Job of another configuration is
/// replaced rather than adopted.
pub const SPEC_HASH_ANNOTATION: &str = "gpufleet.dev/spec-hash";

/// The label the Job controller puts on its pods.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// The annotation the Job controller puts on the pods of an Indexed Job.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// A toleration of a node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Toleration {
    /// Taint key.
    pub key: String,
    /// Taint value; `None` tolerates any value.
    pub value: Option<String>,
    /// Taint effect.
    pub effect: String,
}

/// Where the pods go: the pool's node selector and the tolerations of its nodes' taints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Node labels every pod requires.
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pods tolerate.
    pub tolerations: Vec<Toleration>,
    /// The only nodes the pods may take (those a prescreen passed); empty: any that match.
    pub hosts: Vec<String>,
}

impl Placement {
    /// The placement on a pool: its label, and the tenant taint of dedicated and private
    /// tiers plus any `extra` taints found on its nodes.
    pub fn on_pool(pool_label: &str, tenant: &str, extra: &[Toleration]) -> Placement {
        let mut tolerations = vec![Toleration {
            key: crate::backends::kube::TENANT.to_owned(),
            value: Some(tenant.to_owned()),
            effect: "NoSchedule".to_owned(),
        }];
        tolerations.extend(extra.iter().cloned());
        tolerations.sort();
        tolerations.dedup();
        Placement {
            node_selector: BTreeMap::from([(POOL.to_owned(), pool_label.to_owned())]),
            tolerations,
            hosts: Vec::new(),
        }
    }
}

/// The name of the Job and the Service.
pub fn job_name(benchmark: &str) -> String {
    format!("gfb-{benchmark}")
}

/// The name of the Secret that holds the endpoint's API key while a run lasts.
pub fn endpoint_secret_name(benchmark: &str) -> String {
    format!("{}-endpoint", job_name(benchmark))
}

/// The Secret of the endpoint's API key, which [`env()`] refers to.
pub fn endpoint_secret(spec: &BenchmarkSpec, api_key: &str) -> Json {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": endpoint_secret_name(&spec.name),
            "namespace": spec.namespace,
            "labels": labels(spec),
        },
        // `data`, not `stringData`: a server-side apply of the latter is not read back.
        "data": { "api-key": STANDARD.encode(api_key) },
    })
}

/// The label selector of everything a benchmark made.
pub fn owner_selector(benchmark: &str) -> String {
    format!("{MANAGED_BY}={MANAGED_BY_VALUE},{BENCHMARK_LABEL}={benchmark}")
}

/// The labels of every object and pod of a run.
pub fn labels(spec: &BenchmarkSpec) -> Json {
    json!({
        MANAGED_BY: MANAGED_BY_VALUE,
        BENCHMARK_LABEL: spec.name,
        "gpufleet.dev/suite": spec.suite.name(),
    })
}

/// `GPUFLEET_PARAM_<KEY>` for a parameter key.
pub fn param_env_name(key: &str) -> String {
    let upper: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("GPUFLEET_PARAM_{upper}")
}

/// The environment every container of a run gets.
pub fn env(spec: &BenchmarkSpec) -> Vec<Json> {
    let mut env = vec![
        json!({ "name": "GPUFLEET_NODES", "value": spec.nodes.to_string() }),
        json!({ "name": "GPUFLEET_GPUS_PER_NODE", "value": spec.gpus_per_node.to_string() }),
    ];
    if spec.nodes > 1 {
        env.push(json!({
            "name": "GPUFLEET_RENDEZVOUS",
            "value": format!("{}-0.{}", job_name(&spec.name), job_name(&spec.name)),
        }));
    }
    for (k, v) in &spec.parameters {
        env.push(json!({ "name": param_env_name(k), "value": v }));
    }
    // By reference: the pod spec, and so the Job's spec hash, never holds the key.
    if spec.endpoint_api_key {
        env.push(json!({
            "name": ENDPOINT_API_KEY_ENV,
            "valueFrom": { "secretKeyRef": {
                "name": endpoint_secret_name(&spec.name),
                "key": "api-key",
            } },
        }));
    }
    env
}

/// The tolerations of a placement, as a pod spec lists them.
pub fn tolerations(placement: &Placement) -> Vec<Json> {
    placement
        .tolerations
        .iter()
        .map(|t| {
            let mut x = json!({ "key": t.key, "effect": t.effect });
            match &t.value {
                Some(v) => {
                    x["operator"] = json!("Equal");
                    x["value"] = json!(v);
                }
                None => x["operator"] = json!("Exists"),
            }
            x
        })
        .collect()
}

/// The required anti-affinity that keeps the run's pods (those also labelled `also`, when
/// given) on distinct nodes.
pub fn one_pod_per_node(spec: &BenchmarkSpec, also: Option<(&str, &str)>) -> Json {
    let mut match_labels = json!({ BENCHMARK_LABEL: spec.name });
    if let Some((k, v)) = also {
        match_labels[k] = json!(v);
    }
    json!({
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": { "matchLabels": match_labels },
            }],
        },
    })
}

/// Holds the pod `pod_spec` to the placement's `hosts`, when it names any: a required node
/// affinity on the hostname, beside whatever affinity the pod has.
pub fn pin(pod_spec: &mut Json, placement: &Placement) {
    if placement.hosts.is_empty() {
        return;
    }
    pod_spec["affinity"]["nodeAffinity"] = json!({
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{
                "matchExpressions": [{
                    "key": "kubernetes.io/hostname",
                    "operator": "In",
                    "values": placement.hosts,
                }],
            }],
        },
    });
}

/// The Job of a run, without its spec-hash annotation; `deadline_seconds` bounds the whole
/// run on the cluster side too, so a run whose provider died still ends.
pub fn job(spec: &BenchmarkSpec, placement: &Placement, deadline_seconds: u64) -> Json {
    let name = job_name(&spec.name);
    let gpus = spec.gpus_per_node.to_string();
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 10,
        "nodeSelector": placement.node_selector,
        "tolerations": tolerations(placement),
        "containers": [{
            "name": spec.suite.name(),
            "image": spec.image,
            "command": command(spec),
            "env": env(spec),
            "resources": {
                "limits": { "nvidia.com/gpu": gpus },
                "requests": { "nvidia.com/gpu": gpus },
            },
            // When the log is gone, the end of it is still in the pod's status.
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }],
    });
    if spec.nodes > 1 {
        pod_spec["subdomain"] = json!(name);
        pod_spec["affinity"] = one_pod_per_node(spec, None);
    }
    pin(&mut pod_spec, placement);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": labels(spec),
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.nodes,
            "parallelism": spec.nodes,
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds,
            "template": {
                "metadata": { "labels": labels(spec) },
                "spec": pod_spec,
            },
        },
    })
}

/// The headless Service the pods of a gang find each other through; `None` for one node.
pub fn service(spec: &BenchmarkSpec) -> Option<Json> {
    (spec.nodes > 1).then(|| {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": job_name(&spec.name),
                "namespace": spec.namespace,
                "labels": labels(spec),
            },
            "spec": {
                "clusterIP": "None",
                // Pods must be resolvable before they are ready: they wait for each other.
                "publishNotReadyAddresses": true,
                "selector": { BENCHMARK_LABEL: spec.name, JOB_NAME_LABEL: job_name(&spec.name) },
            },
        })
    })
}
