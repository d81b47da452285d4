//! `gpufleet_host_preflight`: what the host cluster offers of what gpufleet's features rely
//! on, read through the API before a first apply: the GPU Operator and its parts, GPU
//! Feature Discovery's labels, topology labels, a default StorageClass, a load balancer, a
//! network plugin that enforces NetworkPolicy, Karpenter and the MPI Operator.
//!
//! Each check says `ok`, `missing` (the feature it serves will not work) or `unknown` (the
//! API cannot tell: there is no standard object that says a load balancer or a policy engine
//! works). Nothing is written.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::Value as Json;

use crate::{
    backends::kube::{
        ACCELERATOR_LABEL, BLOCK_LABEL, CLIQUE_LABEL, ObjectError, ZONE_LABEL,
        host::{FromSettings, HostObjects, ObjectKind, ObjectsBackend},
        json::{labels_of, str_at},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{DataSourceKind, ReadResponse},
    schema::{Attribute, Block, FieldDocs, Schema},
    value::{Type, Value},
};

/// The data source type name.
pub const TYPE_NAME: &str = "gpufleet_host_preflight";

/// The label GPU Feature Discovery puts on every GPU node.
const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// The annotation that makes a StorageClass the cluster's default.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The agents (DaemonSet names) of network plugins that enforce NetworkPolicy.
const POLICY_ENGINES: &[&str] = &[
    "calico-node",
    "cilium",
    "antrea-agent",
    "kube-router",
    "weave-net",
    "canal",
    "ovnkube-node",
    "kube-ovn-cni",
    "azure-npm",
];

/// The `gpufleet_host_preflight` data source over a host [`ObjectsBackend`].
#[derive(Debug, Clone, Copy, Default)]
pub struct HostPreflight<B = FromSettings>(pub B);

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Check {
    name: &'static str,
    status: Status,
    detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Missing,
    Unknown,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "missing",
            Status::Unknown => "unknown",
        }
    }
}

fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
    }
}

fn data_schema() -> Schema {
    Schema::new(
        Block::new(
            "Checks, before a first apply, what the host cluster offers of what gpufleet's \
             features rely on, through the API only, writing nothing: `gpu_operator` (a \
             ready ClusterPolicy), `gpu_feature_discovery` (nodes labelled \
             `nvidia.com/gpu.product`), `mig_manager` (enabled in the ClusterPolicy; MIG \
             pools), `topology_labels` (a label `placement` groups by, GFD's NVLink clique, \
             topograph's accelerator or block, or the zone, on every GPU node), `default_storage_class` (`persistence` without a class), \
             `load_balancer` (a LoadBalancer Service with an address; `expose`), \
             `network_policy` (a known enforcing network plugin's agent; `network_isolation`), \
             `karpenter` (`source = \"auto\"` pools) and `mpi_operator` (multi-node \
             `nccl-all-reduce` through the MPI Operator). Each check is `ok`, `missing` or \
             `unknown` (the API cannot tell, such as a device plugin installed without the GPU \
             Operator). `missing` lists the missing checks for postconditions; a missing \
             `gpu_feature_discovery`, which every pool needs, is also a warning in the plan. \
             Needs the provider's `kubernetes` block.",
        )
        .attr(
            Attribute::computed(
                "checks",
                Type::list(Type::object([
                    ("name", Type::String),
                    ("status", Type::String),
                    ("detail", Type::String),
                ])),
            )
            .describe("Every check, in the order above.")
            .describe_fields(FieldDocs::new().fields(
                "",
                &[
                    ("name", "The check, e.g. `gpu_operator`."),
                    (
                        "status",
                        "`ok`, `missing` (the feature it serves will not work), or `unknown` \
                         (the API cannot tell).",
                    ),
                    (
                        "detail",
                        "What was found, and which feature needs it.",
                    ),
                ],
            )),
        )
        .attr(
            Attribute::computed("missing", Type::list(Type::String)).describe(
                "The names of the checks whose status is `missing`, for a postcondition: \
                 `condition = !contains(self.missing, \"mig_manager\")`.",
            ),
        ),
    )
}

/// The GPU Operator's ClusterPolicy, or why there is none.
async fn cluster_policy(host: &dyn HostObjects) -> Result<Result<Json, String>, ObjectError> {
    if !host.serves(ObjectKind::ClusterPolicy).await? {
        return Ok(Err(
            "the API server does not serve nvidia.com/v1 ClusterPolicy: the \
                       GPU Operator is not installed"
                .to_owned(),
        ));
    }
    let mut policies = host.list(ObjectKind::ClusterPolicy, None, "").await?;
    match policies.len() {
        0 => Ok(Err(
            "no ClusterPolicy exists: the GPU Operator deploys nothing".to_owned(),
        )),
        _ => {
            // The operator acts on the oldest and ignores the others.
            policies.sort_by(|a, b| {
                str_at(a, "/metadata/creationTimestamp")
                    .cmp(&str_at(b, "/metadata/creationTimestamp"))
            });
            Ok(Ok(policies.swap_remove(0)))
        }
    }
}

/// Whether a ClusterPolicy component is on: the operator's default is on.
fn enabled(policy: &Json, component: &str) -> bool {
    policy
        .pointer(&format!("/spec/{component}/enabled"))
        .and_then(Json::as_bool)
        .unwrap_or(true)
}

fn operator_checks(policy: &Result<Json, String>) -> [Check; 2] {
    let p = match policy {
        Ok(p) => p,
        Err(why) => {
            // A device plugin (and a MIG manager) installed without the operator is a
            // supported setup that no object announces.
            return [
                check(
                    "gpu_operator",
                    Status::Unknown,
                    format!(
                        "{why}. A device plugin installed on its own also works (set \
                         `kubernetes.device_plugin_namespace`), but nothing in the API shows \
                         one: `gpu_feature_discovery` tells whether GPUs are offered."
                    ),
                ),
                check(
                    "mig_manager",
                    Status::Unknown,
                    "no GPU Operator to say whether a MIG manager runs; MIG pools wait for \
                     `nvidia.com/mig.config.state=success`, which only a MIG manager writes.",
                ),
            ];
        }
    };
    let name = str_at(p, "/metadata/name").unwrap_or("?");
    let version = labels_of(p)
        .get("app.kubernetes.io/version")
        .cloned()
        .unwrap_or_else(|| "of an unknown release".to_owned());
    let state = str_at(p, "/status/state").unwrap_or("unknown");
    let plugin = str_at(p, "/spec/devicePlugin/version").unwrap_or("its default");
    let operator = if !enabled(p, "devicePlugin") {
        check(
            "gpu_operator",
            Status::Missing,
            format!(
                "ClusterPolicy {name} turns the device plugin off: no node offers \
                 nvidia.com/gpu, and time-slicing pools have nothing to configure."
            ),
        )
    } else if state == "ready" {
        check(
            "gpu_operator",
            Status::Ok,
            format!(
                "GPU Operator {version} (ClusterPolicy {name}, ready), device plugin {plugin}."
            ),
        )
    } else {
        check(
            "gpu_operator",
            Status::Missing,
            format!(
                "ClusterPolicy {name} (GPU Operator {version}) is {state}, not ready: pools \
                 wait for GPUs its parts have not made available."
            ),
        )
    };
    let mig = if enabled(p, "migManager") {
        check(
            "mig_manager",
            Status::Ok,
            format!("enabled in ClusterPolicy {name}."),
        )
    } else {
        check(
            "mig_manager",
            Status::Missing,
            format!(
                "ClusterPolicy {name} turns the MIG manager off: MIG pools never get their \
                 layout."
            ),
        )
    };
    [operator, mig]
}

fn node_checks(policy: &Result<Json, String>, gpu_nodes: &[Json]) -> [Check; 2] {
    let gfd_off = policy.as_ref().is_ok_and(|p| !enabled(p, "gfd"));
    let gfd = if gpu_nodes.is_empty() {
        check(
            "gpu_feature_discovery",
            Status::Missing,
            format!(
                "no node carries {GPU_PRODUCT_LABEL}{}: pools find GPU nodes by GPU Feature \
                 Discovery's labels.",
                if gfd_off {
                    " (the ClusterPolicy turns GFD off)"
                } else {
                    ""
                }
            ),
        )
    } else {
        let mut products: BTreeMap<String, usize> = BTreeMap::new();
        for n in gpu_nodes {
            if let Some(p) = labels_of(n).get(GPU_PRODUCT_LABEL) {
                *products.entry(p.clone()).or_default() += 1;
            }
        }
        let by_product: Vec<String> = products.iter().map(|(p, c)| format!("{c} {p}")).collect();
        check(
            "gpu_feature_discovery",
            Status::Ok,
            format!(
                "{} GPU node(s): {}.",
                gpu_nodes.len(),
                by_product.join(", ")
            ),
        )
    };
    let total = gpu_nodes.len();
    // Placement groups nodes by the first of these labels that every candidate carries.
    let counts: Vec<(&str, usize)> = [CLIQUE_LABEL, ACCELERATOR_LABEL, BLOCK_LABEL, ZONE_LABEL]
        .into_iter()
        .map(|label| {
            let n = gpu_nodes
                .iter()
                .filter(|n| labels_of(n).contains_key(label))
                .count();
            (label, n)
        })
        .collect();
    let described: Vec<String> = counts
        .iter()
        .map(|(l, n)| format!("{n} carry {l}"))
        .collect();
    let counted = format!("of {total} GPU node(s), {}", described.join(", "));
    let topology = match counts.iter().find(|(_, n)| total > 0 && *n == total) {
        Some((label, _)) => check(
            "topology_labels",
            Status::Ok,
            format!("{counted}; placement can group every GPU node by {label}."),
        ),
        None if counts.iter().all(|(_, n)| *n == 0) => check(
            "topology_labels",
            Status::Missing,
            format!(
                "{counted}: pools get nodes without grouping them, and a `placement` that \
                 names a topology key finds no domain."
            ),
        ),
        None => check(
            "topology_labels",
            Status::Missing,
            format!(
                "{counted}: no topology label is on every GPU node, so a pool's placement \
                 refuses to choose among nodes labelled differently."
            ),
        ),
    };
    [gfd, topology]
}

fn storage_check(classes: &[Json]) -> Check {
    let default = classes.iter().find(|c| {
        c.pointer("/metadata/annotations")
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .and_then(Json::as_str)
            == Some("true")
    });
    match default {
        Some(c) => check(
            "default_storage_class",
            Status::Ok,
            format!(
                "{} (provisioner {}).",
                str_at(c, "/metadata/name").unwrap_or("?"),
                str_at(c, "/provisioner").unwrap_or("?")
            ),
        ),
        None => check(
            "default_storage_class",
            Status::Missing,
            format!(
                "none of {} StorageClass(es) is the default: `persistence` without \
                 `storage_class` leaves the control plane's volume claim pending.",
                classes.len()
            ),
        ),
    }
}

fn load_balancer_check(services: &[Json]) -> Check {
    let balanced: Vec<&Json> = services
        .iter()
        .filter(|s| str_at(s, "/spec/type") == Some("LoadBalancer"))
        .collect();
    let served = balanced.iter().find_map(|s| {
        let ingress = s.pointer("/status/loadBalancer/ingress/0")?;
        let address = str_at(ingress, "/ip").or_else(|| str_at(ingress, "/hostname"))?;
        Some(format!(
            "{}/{} has {address}",
            str_at(s, "/metadata/namespace").unwrap_or("?"),
            str_at(s, "/metadata/name").unwrap_or("?")
        ))
    });
    match (served, balanced.len()) {
        (Some(found), _) => check(
            "load_balancer",
            Status::Ok,
            format!("a controller gives LoadBalancer Services addresses: {found}."),
        ),
        (None, 0) => check(
            "load_balancer",
            Status::Unknown,
            "no LoadBalancer Service to judge by; `expose = { type = \"LoadBalancer\" }` \
             waits for an address a controller (the cloud's, MetalLB, …) gives.",
        ),
        (None, n) => check(
            "load_balancer",
            Status::Missing,
            format!(
                "{n} LoadBalancer Service(s), none with an address: `expose = {{ type = \
                 \"LoadBalancer\" }}` would wait for one."
            ),
        ),
    }
}

fn network_policy_check(daemon_sets: &[Json]) -> Check {
    let engine = daemon_sets.iter().find_map(|d| {
        let name = str_at(d, "/metadata/name")?;
        POLICY_ENGINES
            .contains(&name)
            .then(|| format!("{}/{name}", str_at(d, "/metadata/namespace").unwrap_or("?")))
    });
    match engine {
        Some(found) => check(
            "network_policy",
            Status::Ok,
            format!("{found} runs: its network plugin enforces NetworkPolicy."),
        ),
        None => check(
            "network_policy",
            Status::Unknown,
            format!(
                "no agent of a known enforcing network plugin runs ({}); `network_isolation` \
                 writes NetworkPolicies that only such a plugin enforces.",
                POLICY_ENGINES.join(", ")
            ),
        ),
    }
}

fn served_check(name: &'static str, served: bool, ok: &str, missing: &str) -> Check {
    if served {
        check(name, Status::Ok, ok)
    } else {
        check(name, Status::Missing, missing)
    }
}

/// Karpenter: its NodePool kind served, and how many NodePools exist.
async fn karpenter_check(host: &dyn HostObjects) -> Result<Check, ObjectError> {
    if !host.serves(ObjectKind::KarpenterNodePool).await? {
        return Ok(check(
            "karpenter",
            Status::Missing,
            "karpenter.sh/v1 NodePool is not served: `source = \"auto\"` pools need Karpenter.",
        ));
    }
    let pools = host.list(ObjectKind::KarpenterNodePool, None, "").await?;
    Ok(check(
        "karpenter",
        Status::Ok,
        format!(
            "karpenter.sh/v1 NodePools are served ({} exist).",
            pools.len()
        ),
    ))
}

/// Every check, in the documented order.
async fn run_checks(host: &dyn HostObjects) -> Result<Vec<Check>, ObjectError> {
    let policy = cluster_policy(host).await?;
    let gpu_nodes = host.list(ObjectKind::Node, None, GPU_PRODUCT_LABEL).await?;
    let [operator, mig] = operator_checks(&policy);
    let [gfd, topology] = node_checks(&policy, &gpu_nodes);
    let classes = host.list(ObjectKind::StorageClass, None, "").await?;
    let services = host.list(ObjectKind::Service, None, "").await?;
    let daemon_sets = host.list(ObjectKind::DaemonSet, None, "").await?;
    Ok(vec![
        operator,
        gfd,
        mig,
        topology,
        storage_check(&classes),
        load_balancer_check(&services),
        network_policy_check(&daemon_sets),
        karpenter_check(host).await?,
        served_check(
            "mpi_operator",
            host.serves(ObjectKind::MpiJob).await?,
            "kubeflow.org/v2beta1 MPIJobs are served.",
            "kubeflow.org/v2beta1 MPIJob is not served: a multi-node `nccl-all-reduce` with \
             `launcher = \"auto\"` runs with gpufleet's own launcher, and `launcher = \
             \"mpi-operator\"` is refused.",
        ),
    ])
}

fn state_of(checks: &[Check]) -> Value {
    Value::object([
        (
            "checks",
            Value::List(
                checks
                    .iter()
                    .map(|c| {
                        Value::object([
                            ("name", Value::string(c.name)),
                            ("status", Value::string(c.status.as_str())),
                            ("detail", Value::string(&c.detail)),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "missing",
            Value::List(
                checks
                    .iter()
                    .filter(|c| c.status == Status::Missing)
                    .map(|c| Value::string(c.name))
                    .collect(),
            ),
        ),
    ])
}

#[async_trait]
impl<B: ObjectsBackend> DataSourceKind for HostPreflight<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        data_schema()
    }

    async fn read(&self, ctx: &Context, _config: Value) -> ReadResponse {
        let host = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(host) => host,
            Err(diagnostics) => return ReadResponse::refused(Value::Null, diagnostics),
        };
        match run_checks(host.as_ref()).await {
            Ok(checks) => {
                let mut diagnostics = Diagnostics::new();
                // Every pool needs GFD's labels; the rest serve features a fleet may not use,
                // so they are for postconditions, not a warning in every plan.
                for c in checks
                    .iter()
                    .filter(|c| c.status == Status::Missing && c.name == "gpu_feature_discovery")
                {
                    diagnostics.push(Diagnostic::warning(
                        "Host Cluster Lacks A Prerequisite",
                        format!("{TYPE_NAME}: {}: {}", c.name, c.detail),
                    ));
                }
                ReadResponse {
                    new_state: state_of(&checks),
                    diagnostics,
                }
            }
            Err(e) => ReadResponse::refused(
                Value::Null,
                Diagnostic::error("Host Preflight Failed", format!("{TYPE_NAME}: {e}.")).into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(labels: &Json) -> Json {
        json!({ "metadata": { "name": "n", "labels": labels } })
    }

    #[test]
    fn components_are_on_unless_the_cluster_policy_turns_them_off() {
        let policy = json!({
            "metadata": { "name": "cluster-policy", "labels": { "app.kubernetes.io/version": "v25.10.0" } },
            "spec": { "devicePlugin": { "version": "v0.18.0" }, "migManager": { "enabled": false } },
            "status": { "state": "ready" },
        });
        let [operator, mig] = operator_checks(&Ok(policy));
        assert_eq!(operator.status, Status::Ok, "{operator:?}");
        assert!(operator.detail.contains("v25.10.0") && operator.detail.contains("v0.18.0"));
        assert_eq!(mig.status, Status::Missing, "{mig:?}");
        let [operator, mig] = operator_checks(&Err("not installed".into()));
        assert_eq!(
            (operator.status, mig.status),
            (Status::Unknown, Status::Unknown)
        );
    }

    #[test]
    fn topology_is_missing_while_no_label_is_on_every_gpu_node() {
        let product = |zone: Option<&str>| {
            let mut l = json!({ GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3" });
            if let Some(z) = zone {
                l[ZONE_LABEL] = json!(z);
            }
            node(&l)
        };
        let [gfd, topology] =
            node_checks(&Err(String::new()), &[product(Some("a")), product(None)]);
        assert_eq!(gfd.status, Status::Ok);
        assert!(gfd.detail.contains("2 NVIDIA-H100-80GB-HBM3"), "{gfd:?}");
        assert_eq!(topology.status, Status::Missing);
        assert!(
            topology
                .detail
                .contains(&format!("of 2 GPU node(s), 0 carry {CLIQUE_LABEL}")),
            "{topology:?}"
        );
        assert!(
            topology.detail.contains(&format!("1 carry {ZONE_LABEL}")),
            "{topology:?}"
        );
        let [_, topology] = node_checks(&Err(String::new()), &[product(Some("a"))]);
        assert_eq!(topology.status, Status::Ok);
    }

    #[test]
    fn a_load_balancer_is_judged_only_by_services_that_ask_for_one() {
        let svc = |ty: &str, ip: Option<&str>| {
            json!({
                "metadata": { "name": "s", "namespace": "ns" },
                "spec": { "type": ty },
                "status": { "loadBalancer": { "ingress": ip.map(|i| json!([{ "ip": i }])) } },
            })
        };
        assert_eq!(
            load_balancer_check(&[svc("ClusterIP", None)]).status,
            Status::Unknown
        );
        assert_eq!(
            load_balancer_check(&[svc("LoadBalancer", None)]).status,
            Status::Missing
        );
        let ok = load_balancer_check(&[
            svc("LoadBalancer", None),
            svc("LoadBalancer", Some("10.0.0.9")),
        ]);
        assert_eq!(ok.status, Status::Ok);
        assert!(ok.detail.contains("ns/s has 10.0.0.9"), "{ok:?}");
    }

    #[test]
    fn the_default_class_is_the_annotated_one() {
        let class = |name: &str, default: bool| {
            json!({
                "metadata": { "name": name, "annotations": { DEFAULT_CLASS_ANNOTATION: default.to_string() } },
                "provisioner": "example.com/disk",
            })
        };
        assert_eq!(
            storage_check(&[class("slow", false)]).status,
            Status::Missing
        );
        let ok = storage_check(&[class("slow", false), class("fast", true)]);
        assert_eq!(ok.status, Status::Ok);
        assert!(ok.detail.starts_with("fast"), "{ok:?}");
        let engines = [json!({ "metadata": { "name": "cilium", "namespace": "kube-system" } })];
        assert_eq!(network_policy_check(&engines).status, Status::Ok);
        assert_eq!(network_policy_check(&[]).status, Status::Unknown);
    }
}
