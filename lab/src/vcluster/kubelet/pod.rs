//! One pod the kubelet knows, and each pass's step on it: start its sandbox, notice an
//! exit and back off, probe it, renew its tokens, and write its status.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use super::config::{KubeletConfig, key, syncer_container, uid};
use super::launch::{Running, kubernetes_init, probe, start};
use crate::vcluster::podspec;
use crate::vcluster::status::{self, ContainerState, LastExit};
use crate::vcluster::volumes;

/// The first back-off after a crash, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(300));

/// One pod the kubelet knows.
pub(super) struct Tracked {
    pub(super) pod: Pod,
    pub(super) run: Option<Running>,
    pub(super) restarts: u32,
    pub(super) last_exit: Option<LastExit>,
    pub(super) not_before: Option<Instant>,
    pub(super) backoff: Duration,
    /// What the pod's status was last set to (without timestamps), so it is written once.
    pub(super) reported: Option<String>,
    pub(super) problem: Option<String>,
    pub(super) ready_after: Option<Duration>,
}

impl Tracked {
    pub(super) fn new(pod: Pod) -> Self {
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

    pub(super) fn key(&self) -> String {
        key(&self.pod)
    }
}

/// What one step did to a pod, for its status.
pub(super) enum Outcome {
    /// Nothing to report beyond the current state.
    Steady,
    /// The container cannot be started, and why (`ErrImagePull`, `CreateContainerError`).
    CannotStart(&'static str, String),
}

/// Moves one pod's sandbox along: start, notice an exit, probe, renew tokens.
pub(super) async fn step(config: &KubeletConfig, host: &Client, t: &mut Tracked) -> Outcome {
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
pub(super) async fn report(host: &Client, t: &mut Tracked, outcome: Outcome) {
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
