//! The reconcile loop of the lab's vCluster kubelet: once a second it lists the host's
//! pods labelled `app=vcluster` and makes the sandboxes match them, as a kubelet does for
//! the pods bound to its node.
//!
//! For each pod that kwok has moved to Running (it has an IP), not being deleted:
//!
//! - **start**: lay out its volumes ([`volumes`]), play its `kubernetes` init container
//!   (the binaries it would copy are bound in: `gpufleet-kube` as `kube-apiserver`,
//!   `kube-controller-manager` and `kube-scheduler`, and the lab's `kine`), start the
//!   sandbox ([`sandbox`]) and its two forwarders ([`forward`]), and declare to kwok that
//!   the pod's port 8443 is that host loopback port ([`super::port_forward`]), so
//!   `pods/portforward` through the host API server reaches the syncer;
//! - **probe**: `/readyz` on that port, with the CA the syncer wrote to its data volume;
//!   the pod's Ready condition follows ([`status`]), turning false only after the
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::ListParams;
use kube::{Api, Client};

use super::forward::{self, Forwarder};
use super::health::{PodStatus, Status};
use super::sandbox::{self, Mount, MountKind, SandboxSpec};
use super::services::{Backend, ServiceProxy};
use super::status::{self, ContainerState, LastExit};
use super::volumes::{self, TokenFile};
use super::{etc, podspec, port_forward, ports, storage};
use crate::process::PidRecord;

/// The port the virtual API server serves inside the pod.
pub const SYNCER_PORT: u16 = 8443;

/// The first back-off after a crash, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(300));

/// How the vCluster kubelet is run.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Its state directory (`<lab>/vcluster`).
    pub dir: PathBuf,
    /// This program, run again inside each sandbox as `sandbox-init`.
    pub kubelet_bin: PathBuf,
    /// vCluster's syncer, built from the Go module proxy.
    pub syncer_bin: PathBuf,
    /// kine, the syncer's datastore.
    pub kine_bin: PathBuf,
    /// The virtual clusters' Kubernetes programs, by minor (`1.36`: `gpufleet-kube`; older
    /// minors: their `lab/kube-<minor>` builds).
    pub kube_bins: BTreeMap<String, PathBuf>,
    /// The vCluster release `syncer_bin` is.
    pub version: String,
    /// The host API server's loopback port.
    pub api_port: u16,
    /// Time between passes.
    pub interval: Duration,
}

impl KubeletConfig {
    fn pods_dir(&self) -> PathBuf {
        self.dir.join("pods")
    }

    fn claims_dir(&self) -> PathBuf {
        self.dir.join("claims")
    }

    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.pods_dir().join(uid)
    }
}

/// A sandbox that runs.
struct Running {
    /// Its `unshare`, when this process started it (so it can be reaped).
    child: Option<Child>,
    pid: PidRecord,
    since: Instant,
    started_at: String,
    /// The host port its virtual API server is forwarded to.
    port: u16,
    /// The CA the syncer writes, for the probe.
    ca: PathBuf,
    tokens: Vec<TokenFile>,
    ready: bool,
    next_probe: Instant,
    readiness: ReadinessRule,
    /// Probes failed in a row since the last success.
    failures: u32,
    /// Whether kwok has been told where the pod's port 8443 leads.
    declared: bool,
    _forwarders: Vec<Forwarder>,
}

/// When a ready syncer stops being ready: the container's `readinessProbe`, as the kubelet
/// reads it. One slow answer from a busy API server does not make the pod unready; the
/// chart allows 60 failures two seconds apart.
#[derive(Debug, Clone, Copy)]
struct ReadinessRule {
    period: Duration,
    failure_threshold: u32,
}

impl ReadinessRule {
    /// The rule of `container`, with the kubelet's defaults (every 10s, 3 failures).
    fn of(container: &Container) -> ReadinessRule {
        let probe = container.readiness_probe.as_ref();
        let positive = |v: Option<i32>, default: u32| {
            v.and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        ReadinessRule {
            period: Duration::from_secs(u64::from(positive(
                probe.and_then(|p| p.period_seconds),
                10,
            ))),
            failure_threshold: positive(probe.and_then(|p| p.failure_threshold), 3),
        }
    }
}

impl Running {
    /// Whether its `unshare` still runs; reaps it when this process is its parent.
    fn alive(&mut self) -> Option<i32> {
        match &mut self.child {
            Some(c) => match c.try_wait() {
                Ok(None) => None,
                Ok(Some(s)) => Some(exit_code(s)),
                Err(_) => Some(-1),
            },
            None if self.pid.is_alive() => None,
            None => Some(-1),
        }
    }
}

fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// One pod the kubelet knows.
struct Tracked {
    pod: Pod,
    run: Option<Running>,
    restarts: u32,
    last_exit: Option<LastExit>,
    not_before: Option<Instant>,
    backoff: Duration,
    /// What the pod's status was last set to (without timestamps), so it is written once.
    reported: Option<String>,
    problem: Option<String>,
    ready_after: Option<Duration>,
}

impl Tracked {
    fn new(pod: Pod) -> Self {
        Self {
            pod,
            run: None,
            restarts: 0,
            last_exit: None,
            not_before: None,
            backoff: BACKOFF.0,
            reported: None,
            problem: None,
            ready_after: None,
        }
    }

    fn key(&self) -> String {
        key(&self.pod)
    }
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

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

/// The main container of a vCluster pod.
fn syncer_container(pod: &Pod) -> Option<&Container> {
    let containers = &pod.spec.as_ref()?.containers;
    containers
        .iter()
        .find(|c| c.name == "syncer")
        .or_else(|| containers.first())
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

/// Stops a running sandbox off the async runtime; returns whether it had to kill.
async fn stop_running(run: Running, grace: Duration) -> bool {
    let Running { child, pid, .. } = run;
    tokio::task::spawn_blocking(move || {
        let mut child = child;
        let killed = sandbox::stop(pid.pid, grace, || match &mut child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => pid.is_alive(),
        });
        if let Some(c) = &mut child {
            let _ = c.wait();
        }
        killed
    })
    .await
    .unwrap_or(true)
}

/// What one step did to a pod, for its status.
enum Outcome {
    /// Nothing to report beyond the current state.
    Steady,
    /// The container cannot be started, and why (`ErrImagePull`, `CreateContainerError`).
    CannotStart(&'static str, String),
}

/// Moves one pod's sandbox along: start, notice an exit, probe, renew tokens.
async fn step(config: &KubeletConfig, host: &Client, t: &mut Tracked) -> Outcome {
    let k = t.key();
    if let Some(run) = &mut t.run
        && let Some(code) = run.alive()
    {
        let ran = run.since.elapsed();
        t.run = None;
        t.restarts += 1;
        t.last_exit = Some(LastExit {
            exit_code: code,
            finished_at: status::now(),
        });
        if ran > Duration::from_secs(600) {
            t.backoff = BACKOFF.0;
        }
        t.not_before = Some(Instant::now() + t.backoff);
        tracing::warn!(
            "{k}: the syncer exited with {code} after {}s; restarting it in {}s (log: {})",
            ran.as_secs(),
            t.backoff.as_secs(),
            config.pod_dir(&uid(&t.pod)).join("syncer.log").display()
        );
        t.backoff = (t.backoff * 2).min(BACKOFF.1);
        return Outcome::Steady;
    }
    if let Some(run) = &mut t.run {
        if Instant::now() >= run.next_probe {
            if probe(run).await {
                if !run.ready {
                    let took = run.since.elapsed();
                    t.ready_after = Some(took);
                    tracing::info!("{k}: ready after {:.1}s", took.as_secs_f64());
                }
                run.ready = true;
                run.failures = 0;
            } else {
                run.failures += 1;
                if run.ready && run.failures >= run.readiness.failure_threshold {
                    tracing::warn!("{k}: not ready after {} failed probes", run.failures);
                    run.ready = false;
                }
            }
            // Until the first success it is asked often, so a start is noticed at once.
            run.next_probe = Instant::now()
                + if run.ready {
                    run.readiness.period
                } else {
                    Duration::from_millis(500)
                };
        }
        if let Err(e) = volumes::renew_tokens(host, &t.pod, &mut run.tokens).await {
            tracing::warn!("{k}: {e}");
        }
        return Outcome::Steady;
    }
    if t.not_before.is_some_and(|at| Instant::now() < at) {
        return Outcome::Steady;
    }
    let Some(container) = syncer_container(&t.pod).cloned() else {
        return Outcome::CannotStart("CreateContainerError", "the pod has no container".into());
    };
    let image = container.image.clone().unwrap_or_default();
    if let Err(why) = podspec::check_image(&image, &config.version) {
        return Outcome::CannotStart("ErrImagePull", why);
    }
    if let Some((_, init)) = kubernetes_init(&t.pod)
        && let Err(why) = podspec::kubernetes_binaries(&init, &config.kube_bins)
    {
        return Outcome::CannotStart("ErrImagePull", why);
    }
    match start(config, host, &t.pod, &container).await {
        Ok(run) => {
            tracing::info!(
                "{k}: started the syncer (pid {}), its API on 127.0.0.1:{}",
                run.pid.pid,
                run.port
            );
            t.run = Some(run);
            t.not_before = None;
            Outcome::Steady
        }
        Err(why) => {
            // Most causes pass (a Secret not written yet, a port in use): try again soon,
            // and say so in a reason that callers wait on rather than fail on.
            t.not_before = Some(Instant::now() + Duration::from_secs(5));
            Outcome::CannotStart("ContainerCreating", why)
        }
    }
}

/// Writes the pod's status when it changed.
async fn report(host: &Client, t: &mut Tracked, outcome: Outcome) {
    let Some(container) = syncer_container(&t.pod).cloned() else {
        return;
    };
    let image = container.image.clone().unwrap_or_default();
    let state = match (&outcome, &t.run) {
        (Outcome::CannotStart(reason, message), _) => ContainerState::Waiting {
            reason: (*reason).to_owned(),
            message: message.clone(),
        },
        (Outcome::Steady, Some(run)) => ContainerState::Running {
            started_at: run.started_at.clone(),
            ready: run.ready,
        },
        (Outcome::Steady, None) if t.restarts > 0 => ContainerState::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: format!(
                "back-off {}s restarting failed container={} pod={}",
                t.backoff.as_secs() / 2,
                container.name,
                t.pod.metadata.name.as_deref().unwrap_or_default()
            ),
        },
        (Outcome::Steady, None) => return, // about to start
    };
    let problem = match &state {
        ContainerState::Waiting { reason, message } => Some(format!("{reason}: {message}")),
        ContainerState::Running { .. } => None,
    };
    if problem.is_some() && problem != t.problem {
        tracing::warn!("{}: {}", t.key(), problem.as_deref().unwrap_or_default());
    }
    t.problem = problem;
    let summary = format!("{state:?}/{}", t.restarts);
    // Written when it changed, or when kwok or anyone else set Ready otherwise.
    let ready = matches!(state, ContainerState::Running { ready: true, .. });
    if t.reported.as_deref() == Some(summary.as_str()) && status::says_ready(&t.pod) == ready {
        return;
    }
    let body = status::patch_body(
        &container.name,
        &image,
        &state,
        t.restarts,
        t.last_exit.as_ref(),
        &uid(&t.pod),
    );
    match status::write(host, &t.pod, body).await {
        Ok(()) => t.reported = Some(summary),
        Err(e) => tracing::warn!("{}: failed to write its status: {e}", t.key()),
    }
}

/// Asks `/readyz` through the forwarded port, trusting the CA that signs the syncer's
/// serving certificate (`pki/server-ca.crt` of its data volume; `pki/ca.crt` before
/// vCluster split them).
async fn probe(run: &Running) -> bool {
    let server_ca = run.ca.with_file_name("server-ca.crt");
    let ca = if server_ca.is_file() {
        server_ca
    } else {
        run.ca.clone()
    };
    if !ca.is_file() {
        return false;
    }
    crate::components::https_get(run.port, "/readyz", &ca)
        .await
        .is_ok_and(|body| body.trim() == "ok")
}

/// Lays out the pod's files and starts its sandbox and forwarders.
async fn start(
    config: &KubeletConfig,
    host: &Client,
    pod: &Pod,
    container: &Container,
) -> Result<Running, String> {
    let u = uid(pod);
    let dir = config.pod_dir(&u);
    let prepared = prepare(config, host, pod, container, &dir).await?;
    let release = release(pod);
    let listener = ports::listener(&config.dir, &release)
        .await
        .map_err(|e| format!("failed to get a host port for its API: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let spec = SandboxSpec {
        root: dir.join("root"),
        hostname: pod.metadata.name.clone().unwrap_or_default(),
        mounts: prepared.mounts.clone(),
        argv: podspec::argv(container),
        env: podspec::environment(host, pod, container, config.api_port).await?,
        workdir: container.working_dir.clone().unwrap_or_else(|| "/".into()),
        wait_for_port: Some(config.api_port),
    };
    let (kubelet_bin, spec_file, log) = (
        config.kubelet_bin.clone(),
        dir.join("sandbox.json"),
        dir.join("syncer.log"),
    );
    std::fs::create_dir_all(&spec.root).map_err(|e| format!("failed to create its root: {e}"))?;
    let child = sandbox::start(&kubelet_bin, &spec, &spec_file, &log)
        .map_err(|e| format!("failed to start its sandbox: {e}"))?;
    let pid = i32::try_from(child.id()).map_err(|e| e.to_string())?;
    let record = PidRecord::of(pid).ok_or("its sandbox exited at once")?;
    record
        .write(&dir.join("sandbox.pid"))
        .map_err(|e| format!("failed to write its pid file: {e}"))?;
    let mut run = Running {
        child: Some(child),
        pid: record,
        since: Instant::now(),
        started_at: status::now(),
        port,
        ca: prepared.ca.clone(),
        tokens: prepared.tokens,
        ready: false,
        next_probe: Instant::now() + Duration::from_secs(1),
        readiness: ReadinessRule::of(container),
        failures: 0,
        declared: false,
        _forwarders: Vec::new(),
    };
    match forward::sandbox(pid, config.api_port, listener, SYNCER_PORT).await {
        Ok(f) => run._forwarders = f,
        Err(e) => {
            stop_running(run, Duration::from_secs(1)).await;
            // A sandbox that failed to start says why in its log.
            return Err(match last_line(&log) {
                Some(said) => format!("{e} (its sandbox said: {said})"),
                None => e,
            });
        }
    }
    Ok(run)
}

/// Takes over a sandbox an earlier kubelet started.
async fn adopt(
    config: &KubeletConfig,
    host: &Client,
    pod: &Pod,
    pid: PidRecord,
    dir: &Path,
) -> Result<Running, String> {
    let container = syncer_container(pod).ok_or("the pod has no container")?;
    let prepared = prepare(config, host, pod, container, dir).await?;
    let listener = ports::listener(&config.dir, &release(pod))
        .await
        .map_err(|e| format!("failed to get a host port for its API: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let forwarders = forward::sandbox(pid.pid, config.api_port, listener, SYNCER_PORT).await?;
    Ok(Running {
        child: None,
        pid,
        since: Instant::now(),
        started_at: status::now(),
        port,
        ca: prepared.ca,
        tokens: prepared.tokens,
        ready: false,
        next_probe: Instant::now(),
        readiness: ReadinessRule::of(container),
        failures: 0,
        declared: false,
        _forwarders: forwarders,
    })
}

/// The last line a sandbox wrote to its log, if any.
fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    Some(line.trim().to_owned())
}

/// The name of the virtual cluster a pod belongs to (its `release` label, else the pod's
/// StatefulSet name).
fn release(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("release").cloned())
        .unwrap_or_else(|| {
            let n = pod.metadata.name.clone().unwrap_or_default();
            n.rsplit_once('-')
                .map_or(n.clone(), |(base, _)| base.to_owned())
        });
    format!("{ns}/{name}")
}

/// What the sandbox mounts, and where the syncer's CA will be.
struct PodFiles {
    mounts: Vec<Mount>,
    tokens: Vec<TokenFile>,
    ca: PathBuf,
}

async fn prepare(
    config: &KubeletConfig,
    host: &Client,
    pod: &Pod,
    container: &Container,
    dir: &Path,
) -> Result<PodFiles, String> {
    let prepared = volumes::prepare(host, pod, container, dir)
        .await
        .map_err(|e| e.to_string())?;
    let source_of = |target: &str| {
        prepared
            .mounts
            .iter()
            .find(|m| m.target.trim_end_matches('/') == target)
            .map(|m| m.source.clone())
    };
    let ca = source_of("/data")
        .unwrap_or_else(|| dir.join("no-data-volume"))
        .join("pki")
        .join("ca.crt");
    // The image's root: only what a static syncer needs from the host.
    let mut mounts = vec![
        Mount {
            source: PathBuf::new(),
            target: "/proc".into(),
            kind: MountKind::Proc,
        },
        Mount::bind("/dev", "/dev", false),
        Mount::bind(&config.syncer_bin, "/vcluster", true),
    ];
    let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
    let hostname = pod.metadata.name.as_deref().unwrap_or_default();
    mounts.extend(
        etc::prepare(dir, hostname, pod_ip, Path::new("/etc"))
            .map_err(|e| format!("failed to write its /etc files: {e}"))?,
    );
    mounts.extend(prepared.mounts);
    mounts.extend(init_container_binaries(config, pod, container));
    Ok(PodFiles {
        mounts,
        tokens: prepared.tokens,
        ca,
    })
}

/// The chart's `kubernetes` init container: the volume it copies the Kubernetes programs
/// into, and its image.
fn kubernetes_init(pod: &Pod) -> Option<(String, String)> {
    pod.spec
        .as_ref()?
        .init_containers
        .as_ref()?
        .iter()
        .filter_map(|c| Some((c, c.image.as_deref()?)))
        .filter(|(_, i)| {
            i.rsplit_once(':')
                .map_or(*i, |(r, _)| r)
                .ends_with("/kubernetes")
        })
        .find_map(|(c, i)| {
            let volume = c.volume_mounts.as_ref()?.first()?.name.clone();
            Some((volume, i.to_owned()))
        })
}

/// What the chart's `kubernetes` init container copies into the binaries volume, bound in
/// from the lab's builds of the minor its image names: the same programs, at the paths the
/// syncer runs them from.
fn init_container_binaries(config: &KubeletConfig, pod: &Pod, container: &Container) -> Vec<Mount> {
    let Some((volume, image)) = kubernetes_init(pod) else {
        return Vec::new();
    };
    // An image of a minor the lab has not built was refused before the start.
    let Ok(kube_bin) = podspec::kubernetes_binaries(&image, &config.kube_bins) else {
        return Vec::new();
    };
    let Some(at) = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume)
        .map(|m| m.mount_path.trim_end_matches('/').to_owned())
    else {
        return Vec::new();
    };
    let mut out: Vec<Mount> = [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .iter()
    .map(|name| Mount::bind(kube_bin, &format!("{at}/{name}"), true))
    .collect();
    out.push(Mount::bind(&config.kine_bin, &format!("{at}/kine"), true));
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_containers_probe_or_the_kubelets_defaults() {
        let chart: Container = serde_json::from_value(serde_json::json!({
            "name": "syncer",
            "readinessProbe": {"periodSeconds": 2, "failureThreshold": 60,
                               "httpGet": {"path": "/readyz", "port": 8443}}
        }))
        .expect("container");
        let rule = ReadinessRule::of(&chart);
        assert_eq!(
            (rule.period, rule.failure_threshold),
            (Duration::from_secs(2), 60)
        );
        let bare: Container =
            serde_json::from_value(serde_json::json!({"name": "syncer"})).expect("container");
        let rule = ReadinessRule::of(&bare);
        assert_eq!(
            (rule.period, rule.failure_threshold),
            (Duration::from_secs(10), 3)
        );
    }
}
