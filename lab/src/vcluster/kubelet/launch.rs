//! Starting a pod's sandbox (its files, the chart's init container, its forwarders),
//! adopting one an earlier kubelet left, probing it and stopping it.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Client;

use super::config::{KubeletConfig, SYNCER_PORT, syncer_container, uid};
use crate::process::PidRecord;
use crate::vcluster::forward::{self, Forwarder};
use crate::vcluster::sandbox::{self, Mount, MountKind, SandboxSpec};
use crate::vcluster::status;
use crate::vcluster::volumes::{self, TokenFile};
use crate::vcluster::{etc, podspec, ports};

/// A sandbox that runs.
pub(super) struct Running {
    /// Its `unshare`, when this process started it (so it can be reaped).
    pub(super) child: Option<Child>,
    pub(super) pid: PidRecord,
    pub(super) since: Instant,
    pub(super) started_at: String,
    /// The host port its virtual API server is forwarded to.
    pub(super) port: u16,
    /// The CA the syncer writes, for the probe.
    pub(super) ca: PathBuf,
    pub(super) tokens: Vec<TokenFile>,
    pub(super) ready: bool,
    pub(super) next_probe: Instant,
    pub(super) readiness: ReadinessRule,
    /// Probes failed in a row since the last success.
    pub(super) failures: u32,
    /// Whether kwok has been told where the pod's port 8443 leads.
    pub(super) declared: bool,
    pub(super) _forwarders: Vec<Forwarder>,
}

/// When a ready syncer stops being ready: the container's `readinessProbe`, as the kubelet
/// reads it. One slow answer from a busy API server does not make the pod unready; the
/// chart allows 60 failures two seconds apart.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadinessRule {
    pub(super) period: Duration,
    pub(super) failure_threshold: u32,
}

impl ReadinessRule {
    /// The rule of `container`, with the kubelet's defaults (every 10s, 3 failures).
    pub(super) fn of(container: &Container) -> ReadinessRule {
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
    pub(super) fn alive(&mut self) -> Option<i32> {
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

/// Stops a running sandbox off the async runtime; returns whether it had to kill.
pub(super) async fn stop_running(run: Running, grace: Duration) -> bool {
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

/// Asks `/readyz` through the forwarded port, trusting the CA that signs the syncer's
/// serving certificate (`pki/server-ca.crt` of its data volume; `pki/ca.crt` before
/// vCluster split them).
pub(super) async fn probe(run: &Running) -> bool {
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
pub(super) async fn start(
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
pub(super) async fn adopt(
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
pub(super) fn kubernetes_init(pod: &Pod) -> Option<(String, String)> {
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
