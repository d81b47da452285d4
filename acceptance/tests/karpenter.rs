//! `auto` pools against the real Karpenter controller, which the lab runs from its release
//! with the KWOK cloud provider (`lab/src/karpenter`), and against the release's NodePool
//! CRD:
//!
//! - a tenant's GPU pod, created through its virtual cluster, makes Karpenter launch a node
//!   of the pool's product for the pool's NodePool, on-demand, labelled and tainted for the
//!   tenant's private tier; the pod lands on it, a stale copy of the node's launch taint in
//!   the virtual cluster does not evict it, and destroying the pool returns only once the
//!   node is gone;
//! - what Karpenter's NodePool CRD refuses (its schema and CEL rules) is refused at plan,
//!   naming the attribute, with nothing written; and the API server does refuse each of
//!   them in a NodePool, so the checks mirror the release's rules, not a guess.

use gpufleet_acceptance::{
    Session,
    tenant::{eventually, gpu_pod, tenant_client},
};
use gpufleet_lab::{Lab, karpenter::NODE_CLASS_REF, rest::KubeRest};
use serde_json::{Value, json};

const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";

/// The host's nodes that Karpenter launched for NodePool `pool`.
fn launched(host: &KubeRest, pool: &str) -> Vec<Value> {
    host.list(&format!(
        "/api/v1/nodes?labelSelector=karpenter.sh/nodepool%3D{pool}"
    ))
    .expect("list nodes")
}

#[test]
fn a_tenant_gpu_pod_makes_karpenter_launch_a_node_of_the_pool() {
    let lab = Lab::shared();
    let host = KubeRest::from_kubeconfig(&lab.kubeconfig_path()).expect("host client");
    let tf = Session::on_shared_lab(&format!(
        r#"
resource "gpufleet_virtual_cluster" "kp" {{
  name      = "kp"
  isolation = "private"
}}

resource "gpufleet_gpu_node_pool" "h100" {{
  name                 = "h100"
  virtual_cluster_id   = gpufleet_virtual_cluster.kp.id
  isolation            = gpufleet_virtual_cluster.kp.isolation
  gpu_product          = "NVIDIA-H100-80GB-HBM3"
  source               = "auto"
  autoscaling          = {{ min_nodes = 0, max_nodes = 2 }}
  karpenter_node_class = "{NODE_CLASS_REF}"
  # The lab's KWOK instance types carry the AWS provider's GPU labels.
  karpenter = {{ provider = "aws" }}
}}

output "kubeconfig" {{
  value     = gpufleet_virtual_cluster.kp.kubeconfig
  sensitive = true
}}
"#
    ));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    tf.assert_plan_empty();
    let pool = "gpufleet-kp-h100";

    // A private tenant's own pods run only on its nodes, CoreDNS of its virtual cluster
    // among them: with no node yet, that pod is what makes Karpenter launch the first one,
    // as it would on a GPU cloud.
    let dir = tempfile::tempdir().expect("tempdir");
    let (tenant, _forward) = tenant_client(dir.path(), "vc-kp", "kp", &tf.output_raw("kubeconfig"));
    tenant
        .create("/api/v1/namespaces/default/pods", &gpu_pod("train"))
        .expect("the tenant creates a GPU pod");

    // Karpenter sees the pending pods, launches a node, kwok makes it Ready, and the
    // scheduler places the GPU pod there; the tenant sees it through its own API.
    let node_name = eventually("the tenant's pod to be placed on a launched node", || {
        let pod = tenant
            .get("/api/v1/namespaces/default/pods/train")
            .map_err(|e| e.to_string())?;
        pod["spec"]["nodeName"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("not placed: {}", pod["status"]))
    });
    let nodes = launched(&host, pool);
    // One 8-GPU node holds CoreDNS and the GPU pod; a second would mean Karpenter launched
    // for a pod that already fit.
    assert_eq!(nodes.len(), 1, "{nodes:#?}");
    let node = &nodes[0];
    assert_eq!(node["metadata"]["name"], node_name.as_str());
    let labels = &node["metadata"]["labels"];
    for (key, value) in [
        // The instance the AWS labels of an 8-GPU H100 choose, on-demand by default.
        ("node.kubernetes.io/instance-type", "p5.48xlarge"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
        ("karpenter.k8s.aws/instance-gpu-count", "8"),
        // The private tier's marks, which the virtual cluster's pods select and tolerate.
        ("gpufleet.dev/tenant", "kp"),
        ("gpufleet.dev/pool", "kp.h100"),
    ] {
        assert_eq!(labels[key], value, "{key} on {node:#}");
    }
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        taints.iter().any(|t| t["key"] == "gpufleet.dev/tenant"
            && t["value"] == "kp"
            && t["effect"] == "NoSchedule"),
        "{taints:#?}"
    );
    assert_eq!(node["status"]["allocatable"]["nvidia.com/gpu"], "8");

    // vCluster copies the node into the virtual cluster with the taint Karpenter launched it
    // with (`karpenter.sh/unregistered:NoExecute`), and a busy syncer can bind the pod there
    // before the copy loses it. Taints act on the host only: a NoExecute taint that only the
    // virtual node carries evicts nothing.
    let virtual_node = format!("/api/v1/nodes/{node_name}");
    let mut taints = tenant.get(&virtual_node).expect("the virtual node")["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    taints.push(json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"}));
    tenant
        .merge_patch(&virtual_node, &json!({"spec": {"taints": taints}}))
        .expect("the tenant taints its virtual node");
    // Kubernetes' taint eviction acts on a node update at once; give it ample time.
    std::thread::sleep(std::time::Duration::from_secs(10));
    let pod = tenant
        .get("/api/v1/namespaces/default/pods/train")
        .expect("the tenant's pod outlives a taint only its virtual node has");
    assert_eq!(pod["spec"]["nodeName"], node_name.as_str(), "{pod:#}");
    assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod:#}");

    // The pool reads the node Karpenter launched as its own; the configuration still holds.
    tf.ok(&[
        "apply",
        "-refresh-only",
        "-auto-approve",
        "-input=false",
        "-no-color",
    ]);
    let state = tf.resource("gpufleet_gpu_node_pool.h100");
    assert_eq!(state["nodes"], json!([node_name]), "{state:#}");
    tf.assert_plan_empty();

    // Destroy returns once Karpenter has drained and removed the node.
    tf.destroy();
    assert!(
        launched(&host, pool).is_empty(),
        "the launched node is gone"
    );
    let claims = host
        .list("/apis/karpenter.sh/v1/nodeclaims")
        .expect("list nodeclaims");
    assert!(
        !claims
            .iter()
            .any(|c| c["metadata"]["labels"]["karpenter.sh/nodepool"] == pool),
        "{claims:#?}"
    );
}

/// One configuration Karpenter's CRD would refuse: the pool's attribute lines, the summary
/// the plan must give, and how the same mistake looks in a NodePool.
struct Refused {
    what: &'static str,
    attributes: &'static str,
    summary: &'static str,
    mutate: fn(&mut Value),
    crd_says: &'static str,
}

fn requirements(np: &mut Value) -> &mut Vec<Value> {
    np["spec"]["template"]["spec"]["requirements"]
        .as_array_mut()
        .expect("requirements")
}

const REFUSED: &[Refused] = &[
    Refused {
        what: "an operator the release does not have",
        attributes: r#"karpenter = {
    provider     = "generic"
    requirements = [{ key = "example.com/gpu-gen", operator = "Gte", values = ["9"] }]
  }"#,
        summary: "Invalid Value",
        mutate: |np| {
            requirements(np)
                .push(json!({"key": "example.com/gpu-gen", "operator": "Gte", "values": ["9"]}));
        },
        crd_says: "Unsupported value: \"Gte\"",
    },
    Refused {
        what: "a negative bound",
        attributes: r#"karpenter = {
    provider     = "generic"
    requirements = [{ key = "example.com/gpu-gen", operator = "Gt", values = ["-1"] }]
  }"#,
        summary: "Invalid Requirement",
        mutate: |np| {
            requirements(np)
                .push(json!({"key": "example.com/gpu-gen", "operator": "Gt", "values": ["-1"]}));
        },
        crd_says: "must have a single positive integer value",
    },
    Refused {
        what: "min_values above the number of values",
        attributes: r#"karpenter = {
    provider     = "generic"
    requirements = [{ key = "node.kubernetes.io/instance-type", operator = "In", values = ["p5.48xlarge"], min_values = 2 }]
  }"#,
        summary: "Invalid Requirement",
        mutate: |np| {
            requirements(np).push(json!({"key": "node.kubernetes.io/instance-type",
                "operator": "In", "values": ["p5.48xlarge"], "minValues": 2}));
        },
        crd_says: "must have at least that many values",
    },
    Refused {
        what: "a requirement on a restricted label",
        attributes: r#"karpenter = {
    provider     = "generic"
    requirements = [{ key = "kubernetes.io/hostname", operator = "In", values = ["gpu-1"] }]
  }"#,
        summary: "Restricted Requirement Key",
        mutate: |np| {
            requirements(np).push(
                json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1"]}),
            );
        },
        crd_says: "label \"kubernetes.io/hostname\" is restricted",
    },
    Refused {
        what: "a node label in a restricted domain",
        attributes: r#"node_labels = { "node-role.kubernetes.io/gpu" = "true" }"#,
        summary: "Restricted Node Label",
        mutate: |np| {
            np["spec"]["template"]["metadata"]["labels"]["node-role.kubernetes.io/gpu"] =
                json!("true");
        },
        crd_says: "label domain \"kubernetes.io\" is restricted",
    },
];

#[test]
fn what_karpenters_crd_refuses_is_refused_at_plan() {
    let lab = Lab::shared();
    let host = KubeRest::from_kubeconfig(&lab.kubeconfig_path()).expect("host client");
    let pool = |extra: &str| {
        format!(
            r#"
resource "gpufleet_virtual_cluster" "kr" {{
  name      = "kr"
  isolation = "private"
}}

resource "gpufleet_gpu_node_pool" "l40s" {{
  name                 = "l40s"
  virtual_cluster_id   = gpufleet_virtual_cluster.kr.id
  gpu_product          = "NVIDIA-L40S"
  source               = "auto"
  node_count           = 1
  karpenter_node_class = "{NODE_CLASS_REF}"
  {extra}
}}
"#
        )
    };

    let mut failures = Vec::new();
    for row in REFUSED {
        let tf = Session::on_shared_lab(&pool(row.attributes));
        let out = tf.run(&["plan", "-input=false", "-no-color"]);
        let flat = out
            .combined()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if out.success() || !flat.contains(row.summary) {
            failures.push(format!(
                "{}: expected the plan to fail with {:?}:\n{out}",
                row.what, row.summary
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        host.get(&format!("{NODEPOOLS}/gpufleet-kr-l40s")).is_err(),
        "a refused plan writes nothing"
    );

    // The NodePool of a valid pool, as gpufleet writes it, with each mistake in turn: the
    // release's CRD refuses every one (a server-side dry run writes nothing).
    let tf = Session::on_shared_lab(&pool(""));
    let _cleanup = tf.destroy_on_panic();
    tf.apply();
    let mut written = host
        .get(&format!("{NODEPOOLS}/gpufleet-kr-l40s"))
        .expect("the valid pool's NodePool");
    let meta = json!({"name": "gpufleet-kr-dry-run"});
    written["metadata"] = meta;
    if let Some(spec) = written.as_object_mut() {
        spec.remove("status");
    }
    for row in REFUSED {
        let mut np = written.clone();
        (row.mutate)(&mut np);
        match host.create(&format!("{NODEPOOLS}?dryRun=All"), &np) {
            Ok(_) => failures.push(format!("{}: the API server took {np:#}", row.what)),
            Err(e) if !e.to_string().contains(row.crd_says) => failures.push(format!(
                "{}: refused, but not for {:?}: {e}",
                row.what, row.crd_says
            )),
            Err(_) => {}
        }
    }
    tf.destroy();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
