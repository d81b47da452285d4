//! The reconcile loop: once a second, list the host's StatefulSets labelled
//! `app=vcluster` and make the virtual clusters match them.
//!
//! Each virtual cluster goes through an explicit `Phase`:
//!
//! - `Stopped`: no API server runs (replicas 0, or not started yet). With replicas ≥ 1
//!   the next pass adopts a running API server with the right command line, or starts one
//!   → `Starting`.
//! - `Starting`: the process runs; each pass asks `/readyz` once (never blocking the
//!   others) → `Ready`, or back to `Stopped` when the process died.
//! - `Ready`: the Secret `vc-<name>` is written and kept current, and nodes and pods are
//!   synced on every pass. A dead process → `Stopped` (restarted on the same port).
//!
//! A StatefulSet that is gone (or came back with another uid) is forgotten: API server
//! stopped, its synced host pods deleted, its etcd prefix and directory removed. A failed
//! listing forgets nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

use super::apiserver::{self, ApiServerFiles};
use super::config::{NodeSync, SyncConfig};
use super::health::{ClusterStatus, Status};
use super::record::{self, Record};
use super::secret::{self, Credentials};
use super::{nodes, pods};
use crate::process::{self, PidRecord};

/// How the stand-in is run.
#[derive(Debug, Clone)]
pub struct StandInConfig {
    /// Its state directory (`<lab>/vcluster`).
    pub dir: PathBuf,
    /// The `gpufleet-kube` binary the API servers run from.
    pub kube_bin: PathBuf,
    /// The lab's etcd client port.
    pub etcd_port: u16,
    /// Time between passes.
    pub interval: Duration,
}

/// Where one virtual cluster is in its life.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No API server runs.
    Stopped,
    /// The API server runs and is not ready yet.
    Starting {
        /// Its process.
        pid: PidRecord,
        /// When it was started (or adopted).
        since: Instant,
        /// It was already running when this stand-in found it.
        adopted: bool,
    },
    /// The API server is ready and its Secret written.
    Ready {
        /// Its process.
        pid: PidRecord,
        /// How long it took from start to ready (`None` when adopted ready).
        took: Option<Duration>,
    },
}

/// One virtual cluster the stand-in knows.
struct Tracked {
    record: Record,
    phase: Phase,
    /// A client of the virtual API, once it is ready.
    client: Option<Client>,
    /// The last problem, logged once until it changes.
    last_problem: Option<String>,
    /// No start before this (a crashing API server is not restarted in a tight loop).
    not_before: Option<Instant>,
    nodes: usize,
}

/// The stand-in: the host client, what it tracks, and the status it publishes.
pub struct StandIn {
    config: StandInConfig,
    host: Client,
    clusters: BTreeMap<String, Tracked>,
    status: Arc<Mutex<Status>>,
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn")
            .field("config", &self.config)
            .field("clusters", &self.clusters.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl StandIn {
    /// A stand-in over the host cluster behind `host`, picking up the virtual clusters
    /// recorded in its directory (their API servers are adopted on the first pass).
    #[must_use]
    pub fn new(config: StandInConfig, host: Client) -> Self {
        let clusters = record::load_all(&config.dir)
            .into_iter()
            .map(|(_, r)| {
                (
                    r.key(),
                    Tracked {
                        record: r,
                        phase: Phase::Stopped,
                        client: None,
                        last_problem: None,
                        not_before: None,
                        nodes: 0,
                    },
                )
            })
            .collect();
        Self {
            config,
            host,
            clusters,
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
        loop {
            let outcome = self.pass().await;
            self.publish(outcome);
            tokio::time::sleep(self.config.interval).await;
        }
    }

    fn publish(&self, outcome: Result<(), kube::Error>) {
        let clusters = self
            .clusters
            .values()
            .map(|t| {
                let (phase, pid, took) = match t.phase {
                    Phase::Stopped => ("stopped", None, None),
                    Phase::Starting { pid, .. } => ("starting", Some(pid.pid), None),
                    Phase::Ready { pid, took } => ("ready", Some(pid.pid), took),
                };
                ClusterStatus {
                    key: t.record.key(),
                    port: t.record.port,
                    phase: phase.into(),
                    pid,
                    ready_after_ms: took.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                    rss_kib: pid.and_then(process::rss_kib),
                    nodes: t.nodes,
                    problem: t.last_problem.clone(),
                }
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
            status.clusters = clusters;
        }
    }

    /// One pass over every StatefulSet.
    ///
    /// # Errors
    /// When the StatefulSets cannot be listed.
    pub async fn pass(&mut self) -> Result<(), kube::Error> {
        let sets: Api<StatefulSet> = Api::all(self.host.clone());
        let list = sets
            .list(&ListParams::default().labels(super::STATEFULSET_SELECTOR))
            .await?;
        let mut seen = BTreeSet::new();
        let mut host_nodes: Option<Vec<Node>> = None;
        for set in &list.items {
            let (Some(namespace), Some(name), Some(uid)) = (
                set.metadata.namespace.as_deref(),
                set.metadata.name.as_deref(),
                set.metadata.uid.as_deref(),
            ) else {
                continue;
            };
            let key = record::key(namespace, name);
            seen.insert(key.clone());
            if set.metadata.deletion_timestamp.is_some() {
                continue; // forgotten once it is gone
            }
            let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            if let Err(problem) = self
                .reconcile(namespace, name, uid, replicas, &mut host_nodes)
                .await
                && let Some(t) = self.clusters.get_mut(&key)
                && t.last_problem.as_deref() != Some(problem.as_str())
            {
                tracing::warn!("virtual cluster {key}: {problem}");
                t.last_problem = Some(problem);
            }
        }
        let gone: Vec<String> = self
            .clusters
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(t) = self.clusters.remove(&key) {
                self.forget(t).await;
            }
        }
        Ok(())
    }

    /// Brings one virtual cluster one step closer to what its StatefulSet says.
    async fn reconcile(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        replicas: i32,
        host_nodes: &mut Option<Vec<Node>>,
    ) -> Result<(), String> {
        let key = record::key(namespace, name);
        if let Some(old) = self.clusters.get(&key)
            && old.record.uid != uid
        {
            tracing::info!("virtual cluster {key} was deleted and created again; starting afresh");
            if let Some(old) = self.clusters.remove(&key) {
                self.forget(old).await;
            }
        }
        if replicas < 1 {
            if let Some(t) = self.clusters.get_mut(&key) {
                pause(&self.host, &self.config.dir, t).await;
            }
            return Ok(());
        }
        if !self.clusters.contains_key(&key) {
            let taken: Vec<u16> = self.clusters.values().map(|t| t.record.port).collect();
            let port = apiserver::pick_port(&taken).map_err(|e| e.to_string())?;
            let record = Record::new(namespace, name, uid, port);
            record
                .save(&record.dir(&self.config.dir))
                .map_err(|e| format!("failed to save its record: {e}"))?;
            tracing::info!("virtual cluster {key}: new, API server port {port}");
            self.clusters.insert(
                key.clone(),
                Tracked {
                    record,
                    phase: Phase::Stopped,
                    client: None,
                    last_problem: None,
                    not_before: None,
                    nodes: 0,
                },
            );
        }
        let taken: Vec<u16> = self
            .clusters
            .iter()
            .filter(|(k, _)| **k != key)
            .map(|(_, t)| t.record.port)
            .collect();
        let Some(t) = self.clusters.get_mut(&key) else {
            return Ok(());
        };
        step(&self.config, t, &taken)?;
        notice_ready(&self.config, t).await;
        if let Phase::Ready { .. } = t.phase {
            serve(&self.config, &self.host, t, host_nodes).await?;
            t.last_problem = None;
        }
        Ok(())
    }

    /// Stops and removes everything of a virtual cluster whose StatefulSet is gone.
    async fn forget(&self, t: Tracked) {
        let key = t.record.key();
        let dir = t.record.dir(&self.config.dir);
        if let Err(e) = apiserver::stop(&ApiServerFiles::new(&dir)) {
            tracing::warn!("virtual cluster {key}: failed to stop its API server: {e}");
            return; // keep its directory, so `down` still finds the process
        }
        if let Err(e) = pods::remove_all(&self.host, &t.record).await {
            tracing::warn!("virtual cluster {key}: failed to delete its host pods: {e}");
        }
        if let Err(e) =
            apiserver::wipe_etcd_prefix(self.config.etcd_port, &t.record.etcd_prefix).await
        {
            tracing::warn!("virtual cluster {key}: failed to delete its data from etcd: {e}");
        }
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(
                "virtual cluster {key}: failed to remove {}: {e}",
                dir.display()
            );
        }
        tracing::info!("virtual cluster {key}: deleted, and forgotten");
    }
}

/// Replicas 0: stops the API server (keeping its port, certificates and data) and deletes
/// the pods it synced to the host, as `vcluster pause` does.
async fn pause(host: &Client, root: &Path, t: &mut Tracked) {
    if matches!(t.phase, Phase::Stopped) {
        return;
    }
    let key = t.record.key();
    match apiserver::stop(&ApiServerFiles::new(&t.record.dir(root))) {
        Ok(_) => {
            t.phase = Phase::Stopped;
            t.client = None;
            tracing::info!("virtual cluster {key}: paused (API server stopped)");
        }
        Err(e) => tracing::warn!("virtual cluster {key}: failed to stop its API server: {e}"),
    }
    if let Err(e) = pods::remove_all(host, &t.record).await {
        tracing::warn!("virtual cluster {key}: failed to delete its host pods: {e}");
    }
}

/// Moves the API server of `t` along its phases (without waiting for anything).
fn step(config: &StandInConfig, t: &mut Tracked, taken: &[u16]) -> Result<(), String> {
    let key = t.record.key();
    let files = ApiServerFiles::new(&t.record.dir(&config.dir));
    match t.phase {
        Phase::Stopped => {
            if t.not_before.is_some_and(|at| Instant::now() < at) {
                return Ok(());
            }
            let r = &t.record;
            let sans = [
                r.name.clone(),
                format!("{}.{}", r.name, r.namespace),
                format!("{}.{}.svc", r.name, r.namespace),
                format!("{}.{}.svc.cluster.local", r.name, r.namespace),
            ];
            files
                .pki()
                .ensure(&sans)
                .map_err(|e| format!("failed to create its certificates: {e}"))?;
            let etcd = format!("http://127.0.0.1:{}", config.etcd_port);
            let mut command = apiserver::command_line(r, &files, &config.kube_bin, &etcd);
            let adopted = apiserver::adopt(&files, &command)
                .map_err(|e| format!("failed to stop its outdated API server: {e}"))?;
            let pid = if let Some(pid) = adopted {
                tracing::info!(
                    "virtual cluster {key}: adopted its running API server (pid {})",
                    pid.pid
                );
                pid
            } else {
                if !apiserver::port_free(t.record.port) {
                    // Someone else took the port while the cluster was stopped: move.
                    let port = apiserver::pick_port(taken).map_err(|e| e.to_string())?;
                    tracing::info!(
                        "virtual cluster {key}: port {} is taken; moving to {port}",
                        t.record.port
                    );
                    t.record.port = port;
                    t.record
                        .save(&files.dir)
                        .map_err(|e| format!("failed to save its record: {e}"))?;
                    command = apiserver::command_line(&t.record, &files, &config.kube_bin, &etcd);
                }
                let pid = apiserver::start(&files, &command)
                    .map_err(|e| format!("failed to start its API server: {e}"))?;
                tracing::info!(
                    "virtual cluster {key}: started its API server (pid {}) on 127.0.0.1:{}",
                    pid.pid,
                    t.record.port
                );
                pid
            };
            t.phase = Phase::Starting {
                pid,
                since: Instant::now(),
                adopted: adopted.is_some(),
            };
            t.client = None;
            Ok(())
        }
        Phase::Starting { pid, .. } | Phase::Ready { pid, .. } if !pid.is_alive() => {
            let tail = process::tail(&files.log(), 5)
                .map(|l| l.join(" | "))
                .unwrap_or_default();
            t.phase = Phase::Stopped;
            t.client = None;
            t.not_before = Some(Instant::now() + Duration::from_secs(5));
            Err(format!(
                "its API server exited; restarting it in 5s; last lines of {}: {tail}",
                files.log().display()
            ))
        }
        Phase::Starting { .. } | Phase::Ready { .. } => Ok(()),
    }
}

/// Asks a starting API server whether it is ready yet, once.
async fn notice_ready(config: &StandInConfig, t: &mut Tracked) {
    let Phase::Starting {
        pid,
        since,
        adopted,
    } = t.phase
    else {
        return;
    };
    let files = ApiServerFiles::new(&t.record.dir(&config.dir));
    if apiserver::check_ready(t.record.port, &files).await.is_ok() {
        if adopted {
            t.phase = Phase::Ready { pid, took: None };
            return;
        }
        let took = since.elapsed();
        let rss = process::rss_kib(pid.pid).map_or_else(|| "?".into(), |k| (k / 1024).to_string());
        tracing::info!(
            "virtual cluster {}: API server ready after {:.1}s (RSS {rss} MiB)",
            t.record.key(),
            took.as_secs_f64()
        );
        t.phase = Phase::Ready {
            pid,
            took: Some(took),
        };
    }
}

/// For a cluster whose API server is ready: keeps the Secret current and syncs nodes and
/// pods.
async fn serve(
    config: &StandInConfig,
    host: &Client,
    t: &mut Tracked,
    host_nodes: &mut Option<Vec<Node>>,
) -> Result<(), String> {
    let files = ApiServerFiles::new(&t.record.dir(&config.dir));
    let pki = files.pki();
    let read =
        |p: PathBuf| std::fs::read(&p).map_err(|e| format!("failed to read {}: {e}", p.display()));
    let creds = Credentials {
        ca: read(pki.ca_cert())?,
        cert: read(pki.admin_cert())?,
        key: read(pki.admin_key())?,
    };
    ensure_secret(host, &t.record, &creds).await?;
    let client = match &t.client {
        Some(c) => c.clone(),
        None => {
            let c = virtual_client(&t.record, &creds).await?;
            t.client = Some(c.clone());
            c
        }
    };
    let sync = read_config(host, &t.record).await?;
    let selected: Vec<Node> = if sync.nodes == NodeSync::Off {
        Vec::new()
    } else {
        if host_nodes.is_none() {
            let list = Api::<Node>::all(host.clone())
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("failed to list the host's nodes: {e}"))?;
            *host_nodes = Some(list.items);
        }
        host_nodes.clone().unwrap_or_default()
    };
    let virtual_nodes: Api<Node> = Api::all(client.clone());
    let report = nodes::sync(&selected, &sync.nodes, &virtual_nodes)
        .await
        .map_err(|e| format!("failed to sync nodes: {e}"))?;
    if report.applied + report.deleted > 0 {
        tracing::info!(
            "virtual cluster {}: nodes synced ({} applied, {} removed, {} unchanged)",
            t.record.key(),
            report.applied,
            report.deleted,
            report.unchanged
        );
    }
    t.nodes = report.applied + report.unchanged;
    if sync.pods.enabled {
        pods::sync(host, &t.record, &sync.pods, &client)
            .await
            .map_err(|e| format!("failed to sync pods: {e}"))?;
    }
    Ok(())
}

/// Writes Secret `vc-<name>` unless it is already current.
async fn ensure_secret(host: &Client, record: &Record, creds: &Credentials) -> Result<(), String> {
    let secrets: Api<Secret> = Api::namespaced(host.clone(), &record.namespace);
    let name = super::kubeconfig_secret_name(&record.name);
    let existing = secrets
        .get_opt(&name)
        .await
        .map_err(|e| format!("failed to read Secret {name}: {e}"))?;
    if existing.is_some_and(|s| secret::is_current(&s, record, creds)) {
        return Ok(());
    }
    let mut body = serde_json::to_value(secret::secret(record, creds))
        .map_err(|e| format!("failed to encode Secret {name}: {e}"))?;
    body["apiVersion"] = "v1".into();
    body["kind"] = "Secret".into();
    secrets
        .patch(
            &name,
            &PatchParams::apply(nodes::FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(|e| format!("failed to write Secret {name}: {e}"))?;
    tracing::info!(
        "virtual cluster {}: wrote Secret {name} (server {})",
        record.key(),
        secret::server_url(record.port)
    );
    Ok(())
}

/// The virtual cluster's sync settings from Secret `vc-config-<name>`; vCluster's
/// defaults when there is none.
async fn read_config(host: &Client, record: &Record) -> Result<SyncConfig, String> {
    let secrets: Api<Secret> = Api::namespaced(host.clone(), &record.namespace);
    let name = super::config_secret_name(&record.name);
    let Some(s) = secrets
        .get_opt(&name)
        .await
        .map_err(|e| format!("failed to read Secret {name}: {e}"))?
    else {
        return Ok(SyncConfig::defaults());
    };
    let Some(bytes) = s.data.and_then(|d| d.get(super::CONFIG_KEY).cloned()) else {
        return Ok(SyncConfig::defaults());
    };
    let text = String::from_utf8(bytes.0)
        .map_err(|_| format!("Secret {name}: {} is not UTF-8", super::CONFIG_KEY))?;
    SyncConfig::parse(&text).map_err(|e| format!("Secret {name}: {e}"))
}

/// A client of the virtual cluster, from the same kubeconfig the Secret holds.
async fn virtual_client(record: &Record, creds: &Credentials) -> Result<Client, String> {
    let text = secret::render_kubeconfig(&record.name, record.port, creds);
    let kc = Kubeconfig::from_yaml(&text).map_err(|e| e.to_string())?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(30));
    Client::try_from(config).map_err(|e| e.to_string())
}
