//! Reaching a virtual cluster from this machine as a user outside a real host cluster does:
//! `kubectl port-forward` to its control-plane pod through the host API server, and the
//! tenant's kubeconfig pointed at the local end.
//!
//! [`TenantForward::open`] listens on a loopback port and turns each connection into a
//! `pods/portforward` stream to port 8443 of the virtual cluster's Ready control-plane pod
//! (labels `app=vcluster,release=<name>`); [`TenantForward::kubeconfig`] is a kubeconfig
//! (from Terraform's output or Secret `vc-<name>`) with its server set to that end. The
//! serving certificate vCluster makes covers `127.0.0.1`, so TLS is verified as it is.
//! Blocking, for synchronous tests: the forward runs on a thread of its own until dropped.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use tokio::net::TcpListener;

/// The virtual API server's port inside its pod.
pub const TENANT_API_PORT: u16 = 8443;

/// A running port-forward to one virtual cluster's API server; dropping it stops it.
#[derive(Debug)]
pub struct TenantForward {
    local: SocketAddr,
    pod: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TenantForward {
    /// Forwards a loopback port to the API server of virtual cluster `namespace/name` in the
    /// host cluster `host` (e.g. [`crate::Lab::kube_config`]), waiting (up to `wait`) for its
    /// control-plane pod to be Ready.
    ///
    /// # Errors
    /// When no pod is Ready in time, or the host cannot be asked.
    pub fn open(
        host: kube::Config,
        namespace: &str,
        name: &str,
        wait: Duration,
    ) -> Result<TenantForward, String> {
        crate::crypto::install_crypto_provider();
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            runtime.block_on(async move {
                let host = match kube::Client::try_from(host) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let pods: Api<Pod> = Api::namespaced(host, &namespace);
                let started = Instant::now();
                let pod = loop {
                    match ready_pod(&pods, &name).await {
                        Ok(Some(p)) => break p,
                        Ok(None) if started.elapsed() < wait => {}
                        Ok(None) => {
                            let _ = ready_tx.send(Err(format!(
                                "no Ready control-plane pod of {namespace}/{name} after {wait:?}"
                            )));
                            return;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                };
                let listener =
                    match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                let local = listener.local_addr().map_err(|e| e.to_string());
                let _ = ready_tx.send(local.map(|a| (a, pod.clone())));
                tokio::select! {
                    () = serve(listener, pods, pod) => {}
                    _ = stop_rx => {}
                }
            });
        });
        let (local, pod) = ready_rx
            .recv()
            .map_err(|_| "the forwarding thread ended".to_owned())??;
        Ok(TenantForward {
            local,
            pod,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:<port>`.
    #[must_use]
    pub fn server(&self) -> String {
        format!("https://{}", self.local)
    }

    /// The control-plane pod it forwards to.
    #[must_use]
    pub fn pod(&self) -> &str {
        &self.pod
    }

    /// `kubeconfig` (YAML) with every cluster's `server` set to [`TenantForward::server`].
    ///
    /// # Errors
    /// When it is not a kubeconfig with clusters.
    pub fn kubeconfig(&self, kubeconfig: &str) -> Result<String, String> {
        let mut parsed: serde_json::Value =
            serde_saphyr::from_str(kubeconfig).map_err(|e| format!("not YAML: {e}"))?;
        let clusters = parsed
            .get_mut("clusters")
            .and_then(serde_json::Value::as_array_mut)
            .filter(|c| !c.is_empty())
            .ok_or("the kubeconfig has no clusters")?;
        for c in clusters {
            if let Some(cluster) = c.get_mut("cluster").and_then(|v| v.as_object_mut()) {
                cluster.insert("server".into(), self.server().into());
            }
        }
        // JSON is YAML.
        serde_json::to_string_pretty(&parsed).map_err(|e| e.to_string())
    }
}

impl Drop for TenantForward {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn ready_pod(pods: &Api<Pod>, name: &str) -> Result<Option<String>, String> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app=vcluster,release={name}")))
        .await
        .map_err(|e| format!("listing the control-plane pods: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .and_then(|p| p.metadata.name))
}

async fn serve(listener: TcpListener, pods: Api<Pod>, pod: String) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut conn, _)) = accepted else { continue };
                let (pods, pod) = (pods.clone(), pod.clone());
                connections.spawn(async move {
                    let Ok(mut forwarder) = pods.portforward(&pod, &[TENANT_API_PORT]).await
                    else {
                        return;
                    };
                    if let Some(mut upstream) = forwarder.take_stream(TENANT_API_PORT) {
                        let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
                    }
                    let _ = forwarder.join().await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
