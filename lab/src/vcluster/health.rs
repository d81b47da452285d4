//! The vCluster kubelet's own endpoints, plain HTTP on loopback (as kwok's): `GET /healthz`
//! answers `ok` while passes succeed, and `GET /status` lists the vCluster pods with their
//! phase, sandbox pid, forwarded port, restarts, start-up time and memory.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Serialize;

/// A pass older than this makes the kubelet unhealthy.
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// One vCluster pod in `/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodStatus {
    /// `<namespace>/<pod>`.
    pub pod: String,
    /// The pod's uid.
    pub uid: String,
    /// `stopped`, `starting` or `ready`.
    pub phase: String,
    /// The sandbox's pid (its `unshare`), when running.
    pub pid: Option<i32>,
    /// The host port its virtual API server is forwarded to, when running.
    pub port: Option<u16>,
    /// How often the syncer was restarted.
    pub restarts: u32,
    /// From start to ready, when this kubelet started it.
    pub ready_after_ms: Option<u64>,
    /// Resident memory of every process in the sandbox.
    pub rss_kib: Option<u64>,
    /// The last problem, if it has one.
    pub problem: Option<String>,
}

/// What the loop publishes after each pass.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// When the last successful pass ended.
    pub last_pass: Option<Instant>,
    /// Why the last pass failed, if it did.
    pub last_error: Option<String>,
    /// The vCluster pods.
    pub pods: Vec<PodStatus>,
}

impl Status {
    /// `Ok` when a pass succeeded within [`STALE_AFTER`]; otherwise why not.
    ///
    /// # Errors
    /// The reason, in one line.
    pub fn healthy(&self) -> Result<(), String> {
        match (self.last_pass, &self.last_error) {
            (_, Some(e)) => Err(format!("the last pass failed: {e}")),
            (None, None) => Err("no pass has completed yet".into()),
            (Some(at), None) if at.elapsed() > STALE_AFTER => {
                Err(format!("no pass for {}s", at.elapsed().as_secs()))
            }
            (Some(_), None) => Ok(()),
        }
    }
}

type Shared = Arc<Mutex<Status>>;

async fn healthz(State(status): State<Shared>) -> (StatusCode, String) {
    let verdict = status
        .lock()
        .map_or_else(|_| Err("status lock poisoned".into()), |s| s.healthy());
    match verdict {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn status(State(status): State<Shared>) -> (StatusCode, String) {
    let mut pods = status.lock().map(|s| s.pods.clone()).unwrap_or_default();
    for pod in &mut pods {
        pod.rss_kib = pod
            .pid
            .and_then(super::sandbox::first_process)
            .map(crate::process::tree_rss_kib);
    }
    let body = serde_json::to_string_pretty(&pods).unwrap_or_else(|_| "[]".into());
    (StatusCode::OK, body)
}

/// Serves the endpoints on `listen` until the process ends.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(listen: SocketAddr, shared: Shared) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/status", get(status))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_follows_the_passes() {
        let mut s = Status::default();
        assert!(s.healthy().is_err());
        s.last_pass = Some(Instant::now());
        assert!(s.healthy().is_ok());
        s.last_error = Some("connection refused".into());
        assert!(
            s.healthy()
                .expect_err("failing")
                .contains("connection refused")
        );
    }
}
