//! Benchmark pods on kwok nodes have logs: the API server asks kwok (the nodes' kubelet) and
//! kwok answers with the recorded sample of the suite the container is named after. A Job's
//! pods go Succeeded, so a benchmark Job completes.
//!
//! Uses the lab shared by the run ([`Lab::shared`]; set `GPUFLEET_LAB_TEST_DIR` to use a lab
//! of another directory), in a namespace of its own.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpufleet_lab::{Lab, pod_logs};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, LogParams, PostParams};
use serde_json::json;

/// Generous: waits for the cluster to converge, not timing assertions.
const WAIT: Duration = Duration::from_secs(120);

async fn fresh_namespace(client: &kube::Client) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!("pod-logs-{}-{nanos}", std::process::id());
    let ns: Namespace =
        serde_json::from_value(json!({ "metadata": { "name": name } })).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    let started = Instant::now();
    while !matches!(sas.get_opt("default").await, Ok(Some(_))) {
        assert!(
            started.elapsed() < WAIT,
            "no default service account in {name}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    name
}

/// A pod spec with one container named `container` asking for one GPU.
fn gpu_pod_spec(container: &str) -> serde_json::Value {
    json!({
        "restartPolicy": "Never",
        "nodeSelector": { "type": "kwok" },
        "containers": [{
            "name": container,
            "image": "nvcr.io/nvidia/pytorch:24.08-py3",
            "resources": { "limits": { "nvidia.com/gpu": "1" } },
        }],
    })
}

fn sample(suite: &str) -> &'static str {
    pod_logs::SAMPLES
        .iter()
        .find(|(s, _)| *s == suite)
        .map(|(_, text)| *text)
        .expect("a sample for the suite")
}

#[tokio::test]
async fn a_pod_named_after_a_suite_returns_its_sample_log() {
    let client = Lab::shared().client();
    let ns = fresh_namespace(&client).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "nccl" },
        "spec": gpu_pod_spec("nccl-all-reduce"),
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");

    // The log is served once the pod is bound and running on its kwok node.
    let started = Instant::now();
    let log = loop {
        let last = match pods.logs("nccl", &LogParams::default()).await {
            Ok(text) if !text.is_empty() => break text,
            Ok(_) => "empty log".to_owned(),
            Err(e) => e.to_string(),
        };
        assert!(
            started.elapsed() < WAIT,
            "no log for the nccl-all-reduce pod: {last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(log.trim_end(), sample("nccl-all-reduce").trim_end());
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn a_benchmark_job_completes() {
    let client = Lab::shared().client();
    let ns = fresh_namespace(&client).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let job: Job = serde_json::from_value(json!({
        "metadata": { "name": "dcgm" },
        "spec": {
            "backoffLimit": 0,
            "template": { "spec": gpu_pod_spec("dcgm-diag") },
        },
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    let started = Instant::now();
    loop {
        let job = jobs.get("dcgm").await.expect("read job");
        let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
        if succeeded == 1 {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the Job did not complete: {:?}",
            job.status
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
}
