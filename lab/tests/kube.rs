//! The lab behaves like a real Kubernetes cluster with a GPU fleet: the real scheduler
//! places GPU pods by resources, selectors and taints; controllers run Deployments, Jobs
//! and namespace deletion; kwok runs (and completes) the pods; the real API server
//! validates what it is sent.
//!
//! Every test uses the lab shared by the whole run ([`Lab::shared`]), each in a namespace
//! of its own. Starting it needs the Go toolchain the first time (to build the control
//! plane); without Go these tests fail and say how to install it.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpufleet_lab::Lab;
use gpufleet_lab::fleet::{GPU_PRODUCT_LABEL, GPU_RESOURCE, MANAGED_BY, MANAGED_BY_LABEL};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Generous: these are waits for the cluster to converge, not timing assertions.
const WAIT: Duration = Duration::from_secs(120);

/// Polls `check` until it returns `Some`, or panics after `timeout` with `what` and the
/// last state `check` described.
async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(state) if started.elapsed() >= timeout => {
                panic!("timed out after {timeout:?} waiting for {what}; last state: {state}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// A fresh namespace whose `default` service account exists (pods need it).
async fn namespace(client: &kube::Client, prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!("{prefix}-{}-{nanos}", std::process::id());
    let ns: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": name } })).expect("namespace object");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    wait_for("the default service account", WAIT, || async {
        match sas.get_opt("default").await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    name
}

/// Starts deleting a namespace (tests do not wait for it, except the one about deletion).
async fn delete_namespace(client: &kube::Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The PodScheduled condition's (status, reason, message).
fn scheduled_condition(pod: &Pod) -> Option<(String, String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

fn pod(name: &str, spec: &serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": spec,
    }))
    .expect("pod object")
}

/// Waits until the scheduler has given up on a pod: PodScheduled=False, Unschedulable.
/// Returns the scheduler's message.
async fn wait_unschedulable(pods: &Api<Pod>, name: &str) -> String {
    let message = wait_for(
        &format!("pod {name} to be reported Unschedulable"),
        WAIT,
        || async {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            match scheduled_condition(&p) {
                Some((status, reason, message))
                    if status == "False" && reason == "Unschedulable" =>
                {
                    Ok(message)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let p = pods.get(name).await.expect("get pod");
    assert_eq!(pod_phase(&p), "Pending");
    assert!(
        p.spec.and_then(|s| s.node_name).is_none(),
        "{name} was bound"
    );
    message
}

#[tokio::test]
async fn gpu_deployment_runs_on_nodes_of_the_requested_product() {
    let lab = Lab::shared();
    let client = lab.client();
    let ns = namespace(&client, "deploy").await;
    let product = "NVIDIA-L40S";
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "inference" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "inference" } },
            "template": {
                "metadata": { "labels": { "app": "inference" } },
                "spec": {
                    "nodeSelector": { GPU_PRODUCT_LABEL: product },
                    "containers": [{
                        "name": "server",
                        "image": "nvcr.io/nvidia/tritonserver:24.01-py3",
                        "resources": { "limits": { GPU_RESOURCE: "1" } }
                    }]
                }
            }
        }
    }))
    .expect("deployment object");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running = wait_for("2 running inference pods", WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels("app=inference"))
            .await
            .map_err(|e| e.to_string())?;
        let running: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| pod_phase(p) == "Running")
            .collect();
        if running.len() == 2 {
            Ok(running)
        } else {
            Err(format!("{} running", running.len()))
        }
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    for p in &running {
        let node_name = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .expect("a running pod is bound to a node");
        let node = nodes.get(&node_name).await.expect("get node");
        let labels = node.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get(GPU_PRODUCT_LABEL).map(String::as_str),
            Some(product),
            "pod {:?} ran on {node_name}",
            p.metadata.name
        );
    }
    wait_for("deployment 2/2 ready", WAIT, || async {
        let d = deployments
            .get("inference")
            .await
            .map_err(|e| e.to_string())?;
        let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
        if ready == 2 {
            Ok(())
        } else {
            Err(format!("{ready} ready"))
        }
    })
    .await;
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_tainted_node_takes_only_pods_that_tolerate_the_taint() {
    let lab = Lab::shared();
    let client = lab.client();
    let ns = namespace(&client, "taint").await;
    // One specific node of the fleet; the test taints it itself.
    let node = lab
        .fleet()
        .nodes()
        .iter()
        .rev()
        .find(|n| n.model.product == "NVIDIA-B200")
        .expect("a B200 node")
        .name
        .clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let taint = json!({ "spec": { "taints": [
        { "key": "gpufleet.dev/tenant", "value": "a", "effect": "NoSchedule" }
    ] } });
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .expect("taint the node");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pinned = |tolerate: bool| {
        let mut spec = json!({
            "nodeSelector": { "kubernetes.io/hostname": node },
            "containers": [{ "name": "c", "image": "busybox" }]
        });
        if tolerate {
            spec["tolerations"] = json!([{
                "key": "gpufleet.dev/tenant", "operator": "Equal", "value": "a", "effect": "NoSchedule"
            }]);
        }
        spec
    };
    pods.create(&PostParams::default(), &pod("tolerates", &pinned(true)))
        .await
        .expect("create tolerating pod");
    pods.create(&PostParams::default(), &pod("intolerant", &pinned(false)))
        .await
        .expect("create intolerant pod");

    let bound = wait_for("the tolerating pod to run", WAIT, || async {
        let p = pods.get("tolerates").await.map_err(|e| e.to_string())?;
        if pod_phase(&p) == "Running" {
            Ok(p.spec.and_then(|s| s.node_name))
        } else {
            Err(pod_phase(&p).to_owned())
        }
    })
    .await;
    assert_eq!(bound.as_deref(), Some(node.as_str()));

    let message = wait_unschedulable(&pods, "intolerant").await;
    assert!(message.contains("untolerated taint"), "{message}");

    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "taints": null } })),
        )
        .await
        .expect("untaint the node");
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_pod_asking_for_more_gpus_than_any_node_has_stays_pending() {
    let lab = Lab::shared();
    let client = lab.client();
    let ns = namespace(&client, "toobig").await;
    let most = lab
        .fleet()
        .nodes()
        .iter()
        .map(|n| n.gpus)
        .max()
        .expect("nodes");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let spec = json!({ "containers": [{
        "name": "train",
        "image": "pytorch",
        "resources": { "limits": { GPU_RESOURCE: (most + 1).to_string() } }
    }]});
    pods.create(&PostParams::default(), &pod("greedy", &spec))
        .await
        .expect("create pod");
    let message = wait_unschedulable(&pods, "greedy").await;
    assert!(message.contains("Insufficient nvidia.com/gpu"), "{message}");
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_job_runs_to_completion() {
    let lab = Lab::shared();
    let client = lab.client();
    let ns = namespace(&client, "job").await;
    let job: Job = serde_json::from_value(json!({
        "metadata": { "name": "finetune" },
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": 0,
            "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "train",
                    "image": "pytorch",
                    "resources": { "limits": { GPU_RESOURCE: "1" } }
                }]
            }}
        }
    }))
    .expect("job object");
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    wait_for("the job to complete", WAIT, || async {
        let j = jobs.get("finetune").await.map_err(|e| e.to_string())?;
        let status = j.status.unwrap_or_default();
        let complete = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True");
        if complete && status.succeeded == Some(2) {
            Ok(())
        } else {
            Err(format!(
                "succeeded {:?}, active {:?}, failed {:?}",
                status.succeeded, status.active, status.failed
            ))
        }
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let list = pods
        .list(&ListParams::default().labels("job-name=finetune"))
        .await
        .expect("list job pods");
    assert_eq!(list.items.len(), 2);
    assert!(list.items.iter().all(|p| pod_phase(p) == "Succeeded"));
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn deleting_a_namespace_with_workloads_finishes() {
    let lab = Lab::shared();
    let client = lab.client();
    let ns = namespace(&client, "gone").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods.create(
        &PostParams::default(),
        &pod(
            "worker",
            &json!({ "containers": [{ "name": "c", "image": "busybox" }] }),
        ),
    )
    .await
    .expect("create pod");
    wait_for("the pod to run", WAIT, || async {
        let p = pods.get("worker").await.map_err(|e| e.to_string())?;
        if pod_phase(&p) == "Running" {
            Ok(())
        } else {
            Err(pod_phase(&p).to_owned())
        }
    })
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    // The namespace controller deletes the pod (kwok removes it from its node) and then
    // the namespace itself.
    wait_for("the namespace to disappear", WAIT, || async {
        match namespaces.get_opt(&ns).await {
            Ok(None) => Ok(()),
            Ok(Some(n)) => Err(format!("{:?}", n.status.and_then(|s| s.phase))),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
}

#[tokio::test]
async fn the_api_server_rejects_objects_that_break_the_schema() {
    let lab = Lab::shared();
    let client = lab.client();
    let ns = namespace(&client, "schema").await;

    // A Deployment whose replicas is a string: the server cannot decode it.
    let body = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": "bad" },
        "spec": {
            "replicas": "two",
            "selector": { "matchLabels": { "app": "bad" } },
            "template": {
                "metadata": { "labels": { "app": "bad" } },
                "spec": { "containers": [{ "name": "c", "image": "busybox" }] }
            }
        }
    });
    let request = http::Request::post(format!("/apis/apps/v1/namespaces/{ns}/deployments"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("json"))
        .expect("request");
    match client.request::<serde_json::Value>(request).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 400, "{status:?}");
            assert!(status.message.contains("replicas"), "{}", status.message);
        }
        other => panic!("a Deployment with replicas \"two\" was not rejected: {other:?}"),
    }

    // A Pod whose container name is not a DNS label: decoded, then refused by validation.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let bad = pod(
        "bad-name",
        &json!({ "containers": [{ "name": "Not_A_DNS_Label", "image": "busybox" }] }),
    );
    match pods.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(status.reason, "Invalid");
            assert!(
                status.message.contains("spec.containers[0].name"),
                "{}",
                status.message
            );
        }
        other => panic!("a Pod with an invalid container name was not rejected: {other:?}"),
    }
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn every_fleet_node_is_registered_with_its_labels_and_ready() {
    let lab = Lab::shared();
    let client = lab.client();
    let fleet = lab.fleet();
    assert!(fleet.nodes().len() >= 64);
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}")))
        .await
        .expect("list nodes");
    assert_eq!(list.items.len(), fleet.nodes().len());
    let by_name: BTreeMap<String, Node> = list
        .items
        .into_iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, n)))
        .collect();
    for want in fleet.nodes() {
        let node = by_name
            .get(&want.name)
            .unwrap_or_else(|| panic!("node {} is not registered", want.name));
        let labels = node.metadata.labels.clone().unwrap_or_default();
        for (k, v) in want.labels() {
            assert_eq!(labels.get(&k), Some(&v), "{}: label {k}", want.name);
        }
        let status = node.status.clone().unwrap_or_default();
        let allocatable = status.allocatable.unwrap_or_default();
        assert_eq!(
            allocatable.get(GPU_RESOURCE).map(|q| q.0.clone()),
            Some(want.gpus.to_string()),
            "{}",
            want.name
        );
        assert!(
            gpufleet_lab::nodes::is_ready(node),
            "{} is not Ready",
            want.name
        );
    }
}
