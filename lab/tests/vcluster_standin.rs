//! The lab's vCluster stand-in behaves like vCluster's control-plane container towards the
//! host: a StatefulSet labelled `app=vcluster` gets a real, isolated Kubernetes API whose
//! kubeconfig appears in Secret `vc-<name>`; scaling to 0 pauses it without losing data;
//! deleting it removes it; host nodes and pods sync as vcluster.yaml says.
//!
//! Each test creates what the virtual cluster resource would (namespace, StatefulSet,
//! config Secret) by hand, on the lab shared by the whole run.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpufleet_lab::Lab;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;

/// Generous: waits for convergence, not timing assertions.
const WAIT: Duration = Duration::from_secs(180);

async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(state) if started.elapsed() >= WAIT => {
                panic!("timed out after {WAIT:?} waiting for {what}; last state: {state}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// A name no other test run uses (a DNS label well under 52 characters).
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id() % 100_000)
}

/// What the virtual cluster resource creates in the host: namespace `vc-<name>`, the
/// config Secret and the StatefulSet.
async fn create_virtual_cluster(host: &Client, name: &str, vcluster_yaml: &str) -> String {
    let ns = format!("vc-{name}");
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": { "name": ns, "labels": {
            "app.kubernetes.io/managed-by": "gpufleet",
            "gpufleet.dev/virtual-cluster": name,
            "gpufleet.dev/isolation": "dedicated",
        } }
    }))
    .expect("namespace");
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let config = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("vc-config-{name}")),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "config.yaml".to_string(),
            ByteString(vcluster_yaml.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.clone(), &ns)
        .create(&PostParams::default(), &config)
        .await
        .expect("create config secret");
    let labels = json!({ "app": "vcluster", "release": name });
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "replicas": 1,
            "serviceName": format!("{name}-headless"),
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": { "containers": [{
                    "name": "syncer",
                    "image": "ghcr.io/loft-sh/vcluster-oss:0.26.0",
                    "volumeMounts": [{ "name": "data", "mountPath": "/data" }]
                }],
                "volumes": [{ "name": "data", "emptyDir": {} }] }
            }
        }
    }))
    .expect("statefulset");
    Api::<StatefulSet>::namespaced(host.clone(), &ns)
        .create(&PostParams::default(), &set)
        .await
        .expect("create statefulset");
    ns
}

async fn scale(host: &Client, ns: &str, name: &str, replicas: i32) {
    Api::<StatefulSet>::namespaced(host.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": replicas } })),
        )
        .await
        .expect("scale statefulset");
}

/// Waits for Secret `vc-<name>` and returns it.
async fn wait_kubeconfig_secret(host: &Client, ns: &str, name: &str) -> Secret {
    let secrets: Api<Secret> = Api::namespaced(host.clone(), ns);
    let secret_name = format!("vc-{name}");
    wait_for(&format!("Secret {ns}/{secret_name}"), || async {
        secrets
            .get_opt(&secret_name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_string())
    })
    .await
}

/// A client of the virtual cluster from the Secret's kubeconfig.
async fn virtual_client(secret: &Secret) -> Client {
    let data = secret.data.clone().expect("secret data");
    let text = String::from_utf8(data["config"].0.clone()).expect("kubeconfig is text");
    let kc = Kubeconfig::from_yaml(&text).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(10));
    Client::try_from(config).expect("client")
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "data": { "owner": value }
    }))
    .expect("configmap")
}

/// Waits until the virtual API answers (a fresh API server may need a moment after the
/// Secret for its first requests).
async fn wait_answers(client: &Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_for("the virtual API to answer", || async {
        namespaces
            .get("default")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

#[tokio::test]
async fn a_virtual_cluster_gets_an_isolated_api_that_pauses_resumes_and_goes_away() {
    let lab = Lab::shared();
    let host = lab.client();
    let a = unique("vca");
    let b = unique("vcb");
    let ns_a = create_virtual_cluster(&host, &a, "sync: {}\n").await;
    let ns_b = create_virtual_cluster(&host, &b, "sync: {}\n").await;

    let secret = wait_kubeconfig_secret(&host, &ns_a, &a).await;
    // vCluster's shape: Opaque, labelled, owned by the StatefulSet, four keys.
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("vcluster"));
    assert_eq!(labels.get("vcluster-name"), Some(&a));
    let owners = secret.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("StatefulSet", a.as_str())
    );
    let data = secret.data.clone().expect("data");
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "certificate-authority",
            "client-certificate",
            "client-key",
            "config"
        ]
    );
    let kubeconfig = String::from_utf8(data["config"].0.clone()).expect("text");
    assert!(
        kubeconfig.contains("server: https://127.0.0.1:"),
        "{kubeconfig}"
    );
    assert_ne!(
        data["certificate-authority"].0,
        std::fs::read(lab.paths().pki().join("ca.crt")).expect("lab CA"),
        "a virtual cluster has a CA of its own"
    );

    let vc_a = virtual_client(&secret).await;
    wait_answers(&vc_a).await;
    let maps_a: Api<ConfigMap> = Api::namespaced(vc_a.clone(), "default");
    maps_a
        .create(&PostParams::default(), &config_map("tenant-data", &a))
        .await
        .expect("create a ConfigMap in the virtual cluster");

    // Not in the host, not in the other virtual cluster.
    let host_maps: Api<ConfigMap> = Api::namespaced(host.clone(), "default");
    assert!(
        host_maps
            .get_opt("tenant-data")
            .await
            .expect("host get")
            .is_none(),
        "the tenant's ConfigMap leaked into the host"
    );
    let secret_b = wait_kubeconfig_secret(&host, &ns_b, &b).await;
    let vc_b = virtual_client(&secret_b).await;
    wait_answers(&vc_b).await;
    let maps_b: Api<ConfigMap> = Api::namespaced(vc_b.clone(), "default");
    assert!(
        maps_b
            .get_opt("tenant-data")
            .await
            .expect("b get")
            .is_none(),
        "one tenant sees another's ConfigMap"
    );
    // One tenant's credentials open nothing of the other's.
    let data_b = secret_b.data.clone().expect("data");
    assert_ne!(data["client-certificate"].0, data_b["client-certificate"].0);

    // Paused: the API goes away.
    scale(&host, &ns_a, &a, 0).await;
    wait_for("the paused API server to stop answering", || async {
        match maps_a.get("tenant-data").await {
            Err(kube::Error::Api(s)) => Err(format!("answered {}", s.code)),
            Err(_) => Ok(()),
            Ok(_) => Err("still answering".into()),
        }
    })
    .await;
    // Resumed: the same kubeconfig works again and the data is still there.
    scale(&host, &ns_a, &a, 1).await;
    let back = wait_for("the resumed API server to serve the old data", || async {
        maps_a.get("tenant-data").await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(back.data.unwrap_or_default().get("owner"), Some(&a));
    let after = wait_kubeconfig_secret(&host, &ns_a, &a).await;
    assert_eq!(after.data, secret.data, "resuming changed the kubeconfig");

    // Deleted: the API goes away and the Secret with it.
    Api::<StatefulSet>::namespaced(host.clone(), &ns_a)
        .delete(&a, &DeleteParams::default())
        .await
        .expect("delete statefulset");
    wait_for(
        "the deleted cluster's API server to stop answering",
        || async {
            match maps_a.get("tenant-data").await {
                Err(kube::Error::Api(s)) => Err(format!("answered {}", s.code)),
                Err(_) => Ok(()),
                Ok(_) => Err("still answering".into()),
            }
        },
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(host.clone(), &ns_a);
    wait_for(
        "Secret vc-<name> to be removed with its StatefulSet",
        || async {
            match secrets.get_opt(&format!("vc-{a}")).await {
                Ok(None) => Ok(()),
                other => Err(format!("{:?}", other.map(|s| s.is_some()))),
            }
        },
    )
    .await;
    for ns in [ns_a, ns_b] {
        let _ = Api::<Namespace>::all(host.clone())
            .delete(&ns, &DeleteParams::default())
            .await;
    }
}

/// Sets (or, with `None`, removes) label `key` on host node `node`.
async fn label_node(nodes: &Api<Node>, node: &str, key: &str, value: Option<&str>) {
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { key: value } } })),
        )
        .await
        .expect("label node");
}

/// Adds or removes the tenant taint `key=value:NoSchedule` on a host node, leaving other
/// taints alone.
async fn taint_node(nodes: &Api<Node>, node: &str, key: &str, value: &str, on: bool) {
    let current = nodes.get(node).await.expect("get node");
    let mut taints: Vec<serde_json::Value> = current
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !(t.key == key && t.value.as_deref() == Some(value)))
        .map(|t| serde_json::to_value(t).expect("taint"))
        .collect();
    if on {
        taints.push(json!({ "key": key, "value": value, "effect": "NoSchedule" }));
    }
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "taints": taints } })),
        )
        .await
        .expect("taint node");
}

async fn virtual_node_names(nodes: &Api<Node>) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn a_dedicated_tenant_sees_only_its_nodes_and_its_gpu_pods_land_there() {
    let lab = Lab::shared();
    let host = lab.client();
    let name = unique("vcn");
    let tenant_key = "gpufleet.dev/tenant";
    // Two L40S nodes for this tenant alone; the test labels them itself, as a node pool
    // would, with a tenant name no other test uses.
    let mine: Vec<String> = lab
        .fleet()
        .nodes()
        .iter()
        .filter(|n| n.model.product == "NVIDIA-L40S")
        .rev()
        .take(2)
        .map(|n| n.name.clone())
        .collect();
    let host_nodes: Api<Node> = Api::all(host.clone());
    for n in &mine {
        label_node(&host_nodes, n, tenant_key, Some(&name)).await;
    }
    taint_node(&host_nodes, &mine[0], tenant_key, &name, true).await;
    let yaml = format!(
        "sync:
  fromHost:
    nodes:
      enabled: true
      selector:
        labels:
          {tenant_key}: {name}
  toHost:
    pods:
      enabled: true
      enforceTolerations:
      - {tenant_key}={name}:NoSchedule
"
    );
    let ns = create_virtual_cluster(&host, &name, &yaml).await;
    let secret = wait_kubeconfig_secret(&host, &ns, &name).await;
    let vc = virtual_client(&secret).await;
    wait_answers(&vc).await;

    let virtual_nodes: Api<Node> = Api::all(vc.clone());
    let mut want = mine.clone();
    want.sort();
    wait_for("the tenant's two nodes in the virtual cluster", || async {
        let names = virtual_node_names(&virtual_nodes).await?;
        if names == want {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    let copy = virtual_nodes.get(&mine[1]).await.expect("node copy");
    let labels = copy.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(tenant_key), Some(&name));
    assert_eq!(
        labels.get("nvidia.com/gpu.product").map(String::as_str),
        Some("NVIDIA-L40S")
    );
    let status = copy.status.clone().unwrap_or_default();
    assert!(
        status
            .allocatable
            .unwrap_or_default()
            .contains_key("nvidia.com/gpu"),
        "the copy shows its GPUs"
    );
    assert!(
        gpufleet_lab::nodes::is_ready(&copy),
        "the copy is Ready like its host node"
    );

    // A GPU pod created in the virtual cluster runs on the host, on one of the tenant's
    // nodes (one of them tainted for the tenant), and the virtual pod shows where.
    let pods: Api<Pod> = Api::namespaced(vc.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "train" },
        "spec": { "containers": [{
            "name": "train",
            "image": "pytorch",
            "resources": { "limits": { "nvidia.com/gpu": "4" } }
        }] }
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod in the virtual cluster");
    let node = wait_for("the virtual pod to run on a host node", || async {
        let p = pods.get("train").await.map_err(|e| e.to_string())?;
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        match p.spec.and_then(|s| s.node_name) {
            Some(node) if phase == "Running" => Ok(node),
            other => Err(format!("{phase} on {other:?}")),
        }
    })
    .await;
    assert!(
        mine.contains(&node),
        "the pod ran on {node}, not on the tenant's nodes"
    );
    let host_pods: Api<Pod> = Api::namespaced(host.clone(), &ns);
    let host_pod = host_pods
        .get(&format!("train-x-default-x-{name}"))
        .await
        .expect("the host pod is named <pod>-x-<namespace>-x-<vcluster>");
    assert_eq!(host_pod.spec.and_then(|s| s.node_name), Some(node));

    // A node that leaves the tenant's pool leaves its virtual cluster.
    label_node(&host_nodes, &mine[1], tenant_key, None).await;
    wait_for(
        "the unlabelled node to leave the virtual cluster",
        || async {
            let names = virtual_node_names(&virtual_nodes).await?;
            if names == [mine[0].clone()] {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        },
    )
    .await;

    // Deleting the virtual pod deletes its host pod.
    pods.delete("train", &DeleteParams::default())
        .await
        .expect("delete virtual pod");
    wait_for("the host pod to go with the virtual pod", || async {
        match host_pods
            .get_opt(&format!("train-x-default-x-{name}"))
            .await
        {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.is_some()))),
        }
    })
    .await;

    taint_node(&host_nodes, &mine[0], tenant_key, &name, false).await;
    label_node(&host_nodes, &mine[0], tenant_key, None).await;
    let _ = Api::<Namespace>::all(host.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
}
