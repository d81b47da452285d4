//! Reaching a tenant's virtual cluster the way a user outside the host cluster reaches a
//! ClusterIP-only one: a port-forward through the host API server, with the kubeconfig
//! Terraform gave pointed at its local end.

use std::path::Path;
use std::time::{Duration, Instant};

use gpufleet_lab::{Lab, rest::KubeRest, tenant_forward::TenantForward};
use serde_json::{Value, json};

/// A client of virtual cluster `name` (its control plane runs in host namespace `namespace`)
/// from `kubeconfig`, the text Terraform gave. The kubeconfig file is written into `dir`;
/// keep the returned forward alive as long as the client is used.
pub fn tenant_client(
    dir: &Path,
    namespace: &str,
    name: &str,
    kubeconfig: &str,
) -> (KubeRest, TenantForward) {
    let forward = TenantForward::open(
        Lab::shared().kube_config(),
        namespace,
        name,
        Duration::from_secs(300),
    )
    .expect("port-forward to the control plane");
    // The forward's port keeps files of several forwards to one tenant apart.
    let port = forward
        .server()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    let path = dir.join(format!("{name}-{port}.kubeconfig"));
    let text = forward.kubeconfig(kubeconfig).expect("a kubeconfig");
    std::fs::write(&path, text).expect("write the tenant's kubeconfig");
    let client = KubeRest::from_kubeconfig(&path).expect("tenant client");
    (client, forward)
}

/// Retries `f` every half second until it succeeds, for at most two minutes, then fails the
/// test with `what` and the last error.
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// A pod that asks for one GPU and passes the `restricted` pod security standard.
pub fn gpu_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04",
                // Requests too: a tenant's ResourceQuota counts CPU and memory requests.
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                              "limits": {"nvidia.com/gpu": "1"}},
                "securityContext": {"allowPrivilegeEscalation": false,
                                    "capabilities": {"drop": ["ALL"]}}
            }]
        }
    })
}
