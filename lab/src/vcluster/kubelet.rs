//! The reconcile loop of the lab's vCluster kubelet: once a second it lists the host's
//! pods labelled `app=vcluster` and makes the sandboxes match them, as a kubelet does for
//! the pods bound to its node.
//!
//! For each pod that kwok has moved to Running (it has an IP), not being deleted:
//!
//! - **start**: lay out its volumes ([`super::volumes`]), play its `kubernetes` init container
//!   (the binaries it would copy are bound in: `gpufleet-kube` as `kube-apiserver`,
//!   `kube-controller-manager` and `kube-scheduler`, and the lab's `kine`), start the
//!   sandbox ([`sandbox`]) and its two forwarders ([`super::forward`]), and declare to kwok that
//!   the pod's port 8443 is that host loopback port ([`super::port_forward`]), so
//!   `pods/portforward` through the host API server reaches the syncer;
//! - **probe**: `/readyz` on that port, with the CA the syncer wrote to its data volume;
//!   the pod's Ready condition follows ([`super::status`]), turning false only after the
//!   container's `readinessProbe.failureThreshold` failures in a row, as a kubelet's does;
//! - **restart**: a syncer that exits is started again after a back-off (10s, doubling to
//!   five minutes, reset after ten minutes of running), with `CrashLoopBackOff` and its
//!   exit code in the pod's status meanwhile;
//! - **renew** the projected token before it expires.
//!
//! A pod that is gone, being deleted or replaced by another uid is stopped (SIGTERM, then
//! SIGKILL after its grace period) and its own volumes are removed; claims stay.
//! Each pass also provisions volumes for pending claims ([`storage`]) and makes the
//! `NodePort` and `LoadBalancer` Services of these pods reachable ([`super::services`]).
//!
//! Everything lives under `<lab>/vcluster/`: `pods/<uid>/` (volumes, `root/`, the
//! sandbox's spec, pid and log `syncer.log`), `claims/<claim uid>/` and `ports.json`.

mod config;
mod launch;
mod pod;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};

use self::config::{key, uid};
use self::launch::{adopt, stop_running};
use self::pod::{Tracked, report, step};
use super::health::{PodStatus, Status};
use super::sandbox;
use super::services::{Backend, ServiceProxy};
use super::{port_forward, storage};
use crate::process::PidRecord;

pub use self::config::{KubeletConfig, SYNCER_PORT};

/// The kubelet: the host client, the pods it runs, and the status it publishes.
pub struct VclusterKubelet {
    config: KubeletConfig,
    host: Client,
    pods: BTreeMap<String, Tracked>,
    services: ServiceProxy,
    status: Arc<Mutex<Status>>,
}

impl std::fmt::Debug for VclusterKubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VclusterKubelet")
            .field("config", &self.config)
            .field("pods", &self.pods.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl VclusterKubelet {
    /// A kubelet for the vCluster pods of the host cluster behind `host`.
    #[must_use]
    pub fn new(config: KubeletConfig, host: Client) -> Self {
        Self {
            config,
            host,
            pods: BTreeMap::new(),
            services: ServiceProxy::default(),
            status: Arc::new(Mutex::new(Status::default())),
        }
    }

    /// The status the health endpoint serves.
    #[must_use]
    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    /// Runs passes forever.
    pub async fn run(mut self) {
        let mut class_ready = false;
        loop {
            if !class_ready {
                match storage::ensure_class(&self.host).await {
                    Ok(()) => class_ready = true,
                    Err(e) => tracing::warn!(
                        "failed to create StorageClass {}: {e}",
                        storage::STORAGE_CLASS
                    ),
                }
            }
            if let Err(e) = storage::pass(&self.host, &self.config.claims_dir()).await {
                tracing::warn!("volume provisioning: {e}");
            }
            let outcome = self.pass().await;
            self.publish(outcome);
            tokio::time::sleep(self.config.interval).await;
        }
    }

    fn publish(&self, outcome: Result<(), kube::Error>) {
        let pods = self
            .pods
            .values()
            .map(|t| PodStatus {
                pod: t.key(),
                uid: uid(&t.pod),
                phase: match &t.run {
                    Some(r) if r.ready => "ready",
                    Some(_) => "starting",
                    None => "stopped",
                }
                .into(),
                pid: t.run.as_ref().map(|r| r.pid.pid),
                port: t.run.as_ref().map(|r| r.port),
                restarts: t.restarts,
                ready_after_ms: t
                    .ready_after
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                // Measured when /status is asked, not on every pass.
                rss_kib: None,
                problem: t.problem.clone(),
            })
            .collect();
        if let Ok(mut status) = self.status.lock() {
            match outcome {
                Ok(()) => {
                    status.last_pass = Some(Instant::now());
                    status.last_error = None;
                }
                Err(e) => status.last_error = Some(e.to_string()),
            }
            status.pods = pods;
        }
    }

    /// One pass over the vCluster pods.
    ///
    /// # Errors
    /// When the pods cannot be listed (nothing is stopped then).
    pub async fn pass(&mut self) -> Result<(), kube::Error> {
        let list = Api::<Pod>::all(self.host.clone())
            .list(&ListParams::default().labels(super::POD_SELECTOR))
            .await?;
        let wanted: BTreeMap<String, Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (uid(&p), p))
            .collect();
        // Stop what is gone first: a replaced pod's data must be let go before its
        // successor starts on the same claim and port.
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|u| !wanted.contains_key(*u))
            .cloned()
            .collect();
        for u in gone {
            if let Some(t) = self.pods.remove(&u) {
                self.remove(u, t).await;
            }
        }
        self.remove_strays(&wanted).await;
        for (u, pod) in wanted {
            let scheduled = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_ref())
                .is_some();
            if !scheduled {
                continue;
            }
            let t = self
                .pods
                .entry(u)
                .or_insert_with(|| Tracked::new(pod.clone()));
            t.pod = pod;
            let outcome = step(&self.config, &self.host, t).await;
            report(&self.host, t, outcome).await;
            if let Some(run) = t.run.as_mut().filter(|r| !r.declared) {
                // Retried on the next pass: kwok's CRD may not be installed yet.
                match port_forward::declare(&self.host, &t.pod, SYNCER_PORT, run.port).await {
                    Ok(()) => run.declared = true,
                    Err(e) => tracing::debug!("{}: {e}", t.key()),
                }
            }
        }
        let backends: Vec<Backend> = self
            .pods
            .iter()
            .filter_map(|(u, t)| {
                let run = t.run.as_ref().filter(|r| r.ready)?;
                Some(Backend {
                    namespace: t.pod.metadata.namespace.clone().unwrap_or_default(),
                    labels: t.pod.metadata.labels.clone().unwrap_or_default(),
                    uid: u.clone(),
                    pid: run.pid.pid,
                })
            })
            .collect();
        if let Err(e) = self
            .services
            .pass(&self.host, &self.config.dir, &backends)
            .await
        {
            tracing::warn!("Services: {e}");
        }
        Ok(())
    }

    /// Stops a pod's sandbox and removes its own volumes.
    async fn remove(&self, u: String, mut t: Tracked) {
        let k = t.key();
        if let Some(run) = t.run.take() {
            let grace = grace_period(&t.pod);
            let killed = stop_running(run, grace).await;
            tracing::info!(
                "{k}: pod gone; syncer stopped{}",
                if killed {
                    " (killed after its grace period)"
                } else {
                    ""
                }
            );
        }
        let dir = self.config.pod_dir(&u);
        if let Err(e) = tokio::task::spawn_blocking(move || remove_pod_dir(&dir)).await {
            tracing::warn!("{k}: failed to remove its volumes: {e}");
        }
    }

    /// Sandboxes of pods this process does not know (left by an earlier run, or from before
    /// the pod went): adopted when their pod is still wanted, else stopped and removed.
    async fn remove_strays(&mut self, wanted: &BTreeMap<String, Pod>) {
        let Ok(entries) = std::fs::read_dir(self.config.pods_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let u = entry.file_name().to_string_lossy().into_owned();
            if self.pods.contains_key(&u) {
                continue;
            }
            let dir = entry.path();
            let pid = PidRecord::read(&dir.join("sandbox.pid")).filter(PidRecord::is_alive);
            if let (Some(pid), Some(pod)) = (pid, wanted.get(&u)) {
                match adopt(&self.config, &self.host, pod, pid, &dir).await {
                    Ok(run) => {
                        tracing::info!(
                            "{}: adopted its running syncer (pid {})",
                            key(pod),
                            pid.pid
                        );
                        let mut t = Tracked::new(pod.clone());
                        t.run = Some(run);
                        self.pods.insert(u, t);
                        continue;
                    }
                    Err(e) => tracing::warn!("{}: failed to adopt its syncer: {e}", key(pod)),
                }
            }
            if wanted.contains_key(&u) && pid.is_none() {
                continue; // not started yet: the pass starts it
            }
            if let Some(pid) = pid {
                let grace = wanted.get(&u).map_or(Duration::from_secs(15), grace_period);
                tokio::task::spawn_blocking(move || {
                    sandbox::stop(pid.pid, grace, || pid.is_alive())
                })
                .await
                .ok();
            }
            if !wanted.contains_key(&u) {
                let _ = tokio::task::spawn_blocking(move || remove_pod_dir(&dir)).await;
            }
        }
    }
}

fn remove_pod_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("failed to remove {}: {e}", dir.display());
    }
}

fn grace_period(pod: &Pod) -> Duration {
    let s = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(u64::try_from(s).unwrap_or(30))
}

/// Every sandbox recorded under `dir` (a kubelet's state directory), stopped: for `down`.
/// Returns how many ran.
#[must_use]
pub fn stop_all(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.join("pods")) else {
        return 0;
    };
    let mut stopped = 0;
    for entry in entries.flatten() {
        if let Some(pid) =
            PidRecord::read(&entry.path().join("sandbox.pid")).filter(PidRecord::is_alive)
        {
            sandbox::stop(pid.pid, Duration::from_secs(15), || pid.is_alive());
            stopped += 1;
        }
    }
    stopped
}
