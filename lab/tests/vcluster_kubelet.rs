//! The lab runs vCluster's real syncer for the objects gpufleet renders: a virtual cluster
//! rendered by the engine and applied to the lab's host becomes a pod that the lab's
//! vcluster-kubelet runs, whose syncer writes Secret `vc-<name>` with a kubeconfig naming
//! the server gpufleet rendered (the Service's cluster DNS name, not rewritten by the lab),
//! is reached from this machine as from outside a real cluster (a port-forward through the
//! host API server), reports Ready, survives a crash of its process (restarted, same data),
//! is stopped and cleaned up when its pod goes, and fails as an image pull would when it
//! asks for a vCluster release the lab does not have.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gpufleet_engine::backends::kube::host::{KubeHost, ObjectKind};
use gpufleet_engine::backends::kube::{DynamicClient, TenantTunnel, open_tenant_tunnel};
use gpufleet_engine::resources::virtual_cluster::model::Spec;
use gpufleet_engine::resources::virtual_cluster::render::render;
use gpufleet_engine::value::Value;
use gpufleet_lab::Lab;
use gpufleet_lab::process::PidRecord;
use gpufleet_lab::vcluster::sandbox;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::{Value as Json, json};

/// Generous: waits for convergence, not timing assertions.
const WAIT: Duration = Duration::from_secs(240);

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
    format!(
        "{prefix}-{}-{}",
        std::process::id() % 100_000,
        nanos % 100_000
    )
}

/// Applies what the engine renders for a virtual cluster `name` (with `extra` attributes)
/// to the lab's host, as the provider would. Returns the host namespace.
async fn apply_virtual_cluster(host: &Client, name: &str, extra: &[(&str, Value)]) -> String {
    let mut attrs = vec![
        ("name", Value::string(name)),
        ("isolation", Value::string("shared")),
        ("kubernetes_version", Value::string("1.36")),
        ("paused", Value::Bool(false)),
    ];
    attrs.extend(extra.iter().cloned());
    let spec = Spec::from_value(&Value::object(attrs)).expect("spec");
    let rendered = render(&spec);
    let dynamic = DynamicClient::new(host.clone());
    let apply = |kind: ObjectKind, mut object: Json| {
        let dynamic = &dynamic;
        let ns = spec.namespace.clone();
        async move {
            if !kind.cluster_scoped() {
                object["metadata"]["namespace"] = json!(ns);
            }
            dynamic
                .apply(&kind.gvk(), &object)
                .await
                .unwrap_or_else(|e| panic!("apply {}: {e}", kind.kind()));
        }
    };
    apply(ObjectKind::Namespace, rendered.namespace.clone()).await;
    for (r, object) in &rendered.objects {
        apply(r.kind, object.clone()).await;
    }
    spec.namespace.clone()
}

async fn pod_of(host: &Client, ns: &str, name: &str) -> Result<Pod, String> {
    Api::<Pod>::namespaced(host.clone(), ns)
        .get_opt(&format!("{name}-0"))
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no pod yet".into())
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count)
}

/// Waits for Secret `vc-<name>` (written by the syncer once its API is up) and returns it.
async fn wait_kubeconfig_secret(host: &Client, ns: &str, name: &str) -> Secret {
    let secrets: Api<Secret> = Api::namespaced(host.clone(), ns);
    let secret_name = format!("vc-{name}");
    wait_for(&format!("Secret {ns}/{secret_name}"), || async {
        secrets
            .get_opt(&secret_name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_owned())
    })
    .await
}

/// A client of the virtual cluster as a user outside the host cluster has one: through a
/// tunnel over the host API server's `pods/portforward`, with a token.
async fn virtual_client(host: &Client, ns: &str, name: &str) -> (Client, TenantTunnel) {
    let tunnel = wait_for("a tunnel to the virtual API server", || async {
        open_tenant_tunnel(
            &KubeHost::new(host.clone()),
            ns,
            name,
            Duration::from_secs(600),
        )
        .await
        .map_err(|e| e.to_string())
    })
    .await;
    let kc = Kubeconfig::from_yaml(&tunnel.access().kubeconfig).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(10));
    (Client::try_from(config).expect("client"), tunnel)
}

fn pod_dir(uid: &str) -> PathBuf {
    Lab::shared().paths().vcluster_dir().join("pods").join(uid)
}

async fn delete_namespace(host: &Client, ns: &str) {
    let _ = Api::<Namespace>::all(host.clone())
        .delete(ns, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn the_real_syncer_serves_restarts_and_goes_with_its_pod() {
    let lab = Lab::shared();
    let host = lab.client();
    let name = unique("vck");
    let ns = apply_virtual_cluster(&host, &name, &[]).await;

    // vCluster's own Secret: its kubeconfig names the in-cluster address gpufleet rendered.
    let secret = wait_kubeconfig_secret(&host, &ns, &name).await;
    let data = secret.data.clone().expect("data");
    for key in [
        "config",
        "certificate-authority",
        "client-certificate",
        "client-key",
    ] {
        assert!(data.contains_key(key), "Secret vc-{name} has no {key}");
    }
    let kubeconfig = String::from_utf8(data["config"].0.clone()).expect("text");
    assert!(
        kubeconfig.contains(&format!("server: https://{name}.{ns}.svc:443")),
        "{kubeconfig}"
    );
    let (vc, _tunnel) = virtual_client(&host, &ns, &name).await;
    let maps: Api<ConfigMap> = Api::namespaced(vc.clone(), "default");
    let created = wait_for("the virtual API to take a ConfigMap", || async {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "tenant-data" }, "data": { "owner": name },
        }))
        .map_err(|e| e.to_string())?;
        maps.create(&PostParams::default(), &cm)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(created.metadata.name.as_deref(), Some("tenant-data"));
    // Not a host object.
    assert!(
        Api::<ConfigMap>::namespaced(host.clone(), &ns)
            .get_opt("tenant-data")
            .await
            .expect("host get")
            .is_none(),
        "the tenant's ConfigMap is in the host namespace"
    );
    // The pod's readiness is the syncer's.
    let pod = wait_for("the pod to be Ready", || async {
        let p = pod_of(&host, &ns, &name).await?;
        if ready(&p) {
            Ok(p)
        } else {
            Err("not ready".into())
        }
    })
    .await;
    let uid = pod.metadata.uid.clone().expect("uid");
    assert_eq!(restarts(&pod), 0);

    // A pod created in the virtual cluster is synced to the host namespace by vCluster.
    let vpods: Api<Pod> = Api::namespaced(vc.clone(), "default");
    let p: Pod = serde_json::from_value(json!({
        "metadata": { "name": "hello" },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] },
    }))
    .expect("pod");
    vpods
        .create(&PostParams::default(), &p)
        .await
        .expect("create a virtual pod");
    let synced = format!("hello-x-default-x-{name}");
    let host_pod = wait_for("the pod to be synced to the host", || async {
        Api::<Pod>::namespaced(host.clone(), &ns)
            .get_opt(&synced)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    assert_eq!(
        host_pod
            .metadata
            .labels
            .unwrap_or_default()
            .get("vcluster.loft.sh/managed-by"),
        Some(&name)
    );

    // The syncer's process dies: the kubelet restarts it, and the data (an emptyDir that
    // lives as long as the pod) is still there.
    let sandbox_pid = PidRecord::read(&pod_dir(&uid).join("sandbox.pid")).expect("sandbox pid");
    let init = sandbox::first_process(sandbox_pid.pid).expect("the syncer's pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(init),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the syncer");
    let after = wait_for("the restarted syncer to be Ready", || async {
        let p = pod_of(&host, &ns, &name).await?;
        if restarts(&p) >= 1 && ready(&p) {
            Ok(p)
        } else {
            Err(format!("restarts {}, ready {}", restarts(&p), ready(&p)))
        }
    })
    .await;
    assert_eq!(after.metadata.uid.as_deref(), Some(uid.as_str()));
    let kept = wait_for("the ConfigMap after the restart", || async {
        maps.get("tenant-data").await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(kept.data.unwrap_or_default().get("owner"), Some(&name));

    // The StatefulSet goes: the sandbox stops and the pod's own files are removed.
    Api::<StatefulSet>::namespaced(host.clone(), &ns)
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the StatefulSet");
    wait_for("the sandbox to stop and its files to go", || async {
        let alive = PidRecord::read(&pod_dir(&uid).join("sandbox.pid"))
            .is_some_and(|p| p.is_alive())
            || sandbox_pid.is_alive();
        if alive || pod_dir(&uid).exists() {
            Err(format!("alive {alive}, dir {}", pod_dir(&uid).exists()))
        } else {
            Ok(())
        }
    })
    .await;
    delete_namespace(&host, &ns).await;
}

#[tokio::test]
async fn another_vcluster_release_fails_as_an_image_pull_would() {
    let lab = Lab::shared();
    let host = lab.client();
    let name = unique("vcimg");
    let ns = apply_virtual_cluster(
        &host,
        &name,
        &[(
            "values_override",
            Value::string("controlPlane:\n  statefulSet:\n    image:\n      tag: \"0.35.1\"\n"),
        )],
    )
    .await;
    let (reason, message) = wait_for("the pod to report the image", || async {
        let p = pod_of(&host, &ns, &name).await?;
        let state = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .ok_or("no waiting state")?;
        match state.reason.as_deref() {
            Some("ErrImagePull") => Ok((
                state.reason.clone().unwrap_or_default(),
                state.message.clone().unwrap_or_default(),
            )),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(reason, "ErrImagePull");
    assert!(message.contains("0.35.1"), "{message}");
    assert!(!ready(&pod_of(&host, &ns, &name).await.expect("pod")));
    let pods = Api::<Pod>::namespaced(host.clone(), &ns)
        .list(&ListParams::default().labels("app=vcluster"))
        .await
        .expect("list");
    assert_eq!(pods.items.len(), 1);
    Api::<StatefulSet>::namespaced(host.clone(), &ns)
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
        )
        .await
        .expect("scale down");
    delete_namespace(&host, &ns).await;
}

/// Waits until the control-plane pod of `name` is Ready.
async fn wait_ready(host: &Client, ns: &str, name: &str) -> Pod {
    wait_for("the pod to be Ready", || async {
        let p = pod_of(host, ns, name).await?;
        if ready(&p) {
            Ok(p)
        } else {
            Err("not ready".into())
        }
    })
    .await
}

#[tokio::test]
async fn a_tenant_is_reached_through_the_host_api_servers_port_forward_with_a_token() {
    let lab = Lab::shared();
    let host = lab.client();
    let name = unique("vct");
    let ns = apply_virtual_cluster(&host, &name, &[]).await;
    wait_ready(&host, &ns, &name).await;
    let asked_at = SystemTime::now();
    let (vc, tunnel) = virtual_client(&host, &ns, &name).await;
    let access = tunnel.access();

    // A local end, verified against the virtual cluster's CA, with a token of the
    // ServiceAccount gpufleet keeps in it, valid for what was asked.
    assert!(
        access.host.starts_with("https://127.0.0.1:"),
        "{}",
        access.host
    );
    assert!(access.cluster_ca_certificate.contains("BEGIN CERTIFICATE"));
    let lifetime = access
        .expires_at
        .duration_since(asked_at)
        .expect("expires after it was asked for");
    assert!(
        lifetime > Duration::from_secs(500) && lifetime <= Duration::from_secs(700),
        "{lifetime:?}"
    );
    assert!(!access.kubeconfig.contains("client-key"));
    let namespaces = Api::<Namespace>::all(vc.clone())
        .list(&ListParams::default())
        .await
        .expect("list namespaces with the token");
    let names: Vec<_> = namespaces
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert!(names.iter().any(|n| n == "kube-system"), "{names:?}");
    // The tenant's namespaces, not the host's.
    assert!(!names.contains(&ns), "{names:?}");

    // kubectl of the lab's Kubernetes release, with the same kubeconfig.
    let kubectl = lab.kubectl().expect("kubectl");
    let file = std::env::temp_dir().join(format!("{name}.kubeconfig"));
    std::fs::write(&file, &access.kubeconfig).expect("write the kubeconfig");
    let out = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&file)
        .args(["get", "namespaces", "-o", "name"])
        .output()
        .await
        .expect("run kubectl");
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("namespace/kube-system"),
        "kubectl: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A second tunnel finds the ServiceAccount in place and works as well.
    let (again, _second) = virtual_client(&host, &ns, &name).await;
    Api::<Namespace>::all(again)
        .get("default")
        .await
        .expect("the second tunnel's token");

    // Dropping the tunnel closes its listener.
    let local = tunnel.local_addr();
    drop(tunnel);
    wait_for("the tunnel's listener to close", || async {
        match tokio::net::TcpStream::connect(local).await {
            Ok(_) => Err("still accepting".to_owned()),
            Err(_) => Ok(()),
        }
    })
    .await;
    delete_namespace(&host, &ns).await;
}
