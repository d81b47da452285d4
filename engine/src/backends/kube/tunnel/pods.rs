//! Which control-plane pod a tunnel reaches: a ready one of the virtual cluster's StatefulSet.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::TunnelError;
use crate::backends::kube::host::KubeHost;

/// How long opening waits for a control-plane pod to become Ready (one that is starting, or
/// restarting after a change): about what the chart's readiness probe allows a fresh start.
pub const READY_WAIT: Duration = Duration::from_secs(180);

/// The first Ready, not terminating control-plane pod of the virtual cluster, waiting up to
/// [`READY_WAIT`] while its StatefulSet is there to start one. With no StatefulSet (no such
/// virtual cluster) or none asked to run (paused), it answers at once.
pub(super) async fn ready_pod(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<String, TunnelError> {
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    loop {
        let pods = control_plane_pods(host, client, namespace, name).await?;
        let count = pods.len();
        if let Some(pod) = pods
            .into_iter()
            .find(is_ready)
            .and_then(|p| p.metadata.name)
        {
            return Ok(pod);
        }
        let not_ready = |detail: String| TunnelError::NotReady {
            namespace: namespace.into(),
            name: name.into(),
            detail,
        };
        let replicas = desired_replicas(host, client, namespace, name).await?;
        match replicas {
            None => {
                return Err(not_ready(format!(
                    "there is no StatefulSet {name} in {namespace}: no such virtual cluster"
                )));
            }
            Some(0) => {
                return Err(not_ready(
                    "its StatefulSet asks for no replicas: the virtual cluster is paused".into(),
                ));
            }
            Some(_) if tokio::time::Instant::now() >= deadline => {
                return Err(not_ready(match count {
                    0 => format!("none exists after {}s", READY_WAIT.as_secs()),
                    n => format!("{n} exist, none became Ready in {}s", READY_WAIT.as_secs()),
                }));
            }
            Some(_) => tokio::time::sleep(Duration::from_secs(2)).await,
        }
    }
}

pub(super) async fn control_plane_pods(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<Pod>, TunnelError> {
    let selector = format!("app=vcluster,release={name}");
    host.count();
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| TunnelError::Host {
            endpoint: format!("/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"),
            operation: "listing the control-plane pods".into(),
            source: Box::new(e),
        })?;
    Ok(pods.items)
}

/// `spec.replicas` of the control plane's StatefulSet, `None` when there is none.
pub(super) async fn desired_replicas(
    host: &KubeHost,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<i32>, TunnelError> {
    host.count();
    let found = Api::<StatefulSet>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| TunnelError::Host {
            endpoint: format!("/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}"),
            operation: format!("reading StatefulSet {name}"),
            source: Box::new(e),
        })?;
    Ok(found.map(|s| s.spec.and_then(|spec| spec.replicas).unwrap_or(1)))
}

pub(super) fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
