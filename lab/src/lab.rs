//! A lab: starting (or adopting) one in a state directory, the shared one of the tests,
//! stopping it, and what it reports.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::components::Component;
use crate::control_plane::build::{
    ensure_built, ensure_karpenter_built, ensure_mpi_operator_built, ensure_older_kubes_built,
    ensure_vcluster_built,
};
use crate::control_plane::emulators::{ensure_bcm, ensure_netris};
use crate::control_plane::start::{
    e_step, lock_dir, start_control_plane, wait_default_service_account, write_kubeconfigs,
};
use crate::control_plane::steps::outdated;
use crate::control_plane::stop::DownReport;
use crate::control_plane::stop::stop_components;
use crate::crypto::install_crypto_provider;
use crate::error::LabError;
use crate::fleet::{Fleet, FleetSpec};
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::process::PidRecord;
use crate::settings::Setting;
use crate::status::{ComponentStatus, Health, LabStatus, NodeCounts};

use crate::{
    components, crds, gobuild, karpenter, kubeconfig, mpi_operator, nodes, pki, pod_logs, process,
    rest, service_accounts, settings, vcluster,
};

/// How to start (or adopt) a lab.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The state directory.
    pub dir: PathBuf,
    /// The fleet. `None`: the fleet the lab in `dir` already has, else the default fleet.
    pub fleet: Option<FleetSpec>,
    /// Replicate racks until there are at least this many nodes. `None` with `fleet`
    /// `None`: the scale the lab already has.
    pub scale: Option<usize>,
    /// The `gpufleet-kube` binary (built here when missing or stale).
    pub kube_bin: PathBuf,
    /// The Go source it is built from (`lab/kube`).
    pub kube_src: PathBuf,
    /// Node create requests in flight at once.
    pub node_concurrency: usize,
    /// Whether the lab runs the MPI Operator (see [`mpi_operator`]); on by default.
    pub mpi_operator: bool,
    /// Whether the lab runs Karpenter's controller (see [`karpenter`]); on by default. Its
    /// CRDs are installed either way.
    pub karpenter: bool,
}

impl LabOptions {
    /// Defaults for a lab in `dir`: its current (or the default) fleet, the shared binary
    /// ([`gobuild::default_binary`]), 64 node creates in flight.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            fleet: None,
            scale: None,
            kube_bin: gobuild::default_binary(),
            kube_src: gobuild::source_dir(),
            node_concurrency: 64,
            mpi_operator: true,
            karpenter: true,
        }
    }
}

/// What a lab was started with, saved as `state.json` in its directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// Its ports.
    pub ports: Ports,
    /// Its fleet spec.
    pub fleet: FleetSpec,
    /// Its scale.
    pub scale: Option<usize>,
    /// The binary its components run.
    pub kube_bin: PathBuf,
}

impl LabState {
    /// Reads the state of the lab at `paths`; `None` when there is none (or it is unreadable).
    #[must_use]
    pub fn load(paths: &LabPaths) -> Option<Self> {
        let text = std::fs::read_to_string(paths.state_file()).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn save(&self, paths: &LabPaths) -> Result<(), LabError> {
        let path = paths.state_file();
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::StateDir {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&path, text).map_err(|source| LabError::StateDir { path, source })
    }
}

/// How long the steps of [`Lab::up`] took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UpReport {
    /// The lab was already running and healthy, and was adopted as it was.
    pub adopted: bool,
    /// The Go build, when one was needed.
    pub build: Option<Duration>,
    /// From starting etcd to every component healthy (zero when adopted).
    pub control_plane: Duration,
    /// What node registration did.
    pub nodes: nodes::SyncReport,
    /// From the first node create to every node Ready.
    pub nodes_ready: Duration,
    /// The whole `up`.
    pub total: Duration,
}

/// A running lab.
#[derive(Debug, Clone)]
pub struct Lab {
    paths: LabPaths,
    ports: Ports,
    fleet: Fleet,
    kube_config: kube::Config,
    report: UpReport,
}

impl Lab {
    /// Starts the lab in `options.dir`, or adopts it when it is already running, healthy
    /// and current; a lab that is partly running, unhealthy, or running an older binary
    /// or other flags is stopped and started again (its etcd data, certificates and ports
    /// are kept). Then makes the nodes match the fleet and waits
    /// for all of them to be Ready.
    ///
    /// Builds `gpufleet-kube` first if it is missing or stale (this needs Go).
    /// Concurrent calls for the same directory, from any process, are serialised; the
    /// second one adopts what the first started.
    ///
    /// # Errors
    /// When any step fails; the error names the step and, for a component, the end of
    /// its log. Components started by a failed `up` are stopped again.
    pub async fn up(options: LabOptions) -> Result<Self, LabError> {
        install_crypto_provider();
        let started = Instant::now();
        let paths = LabPaths::new(&options.dir).map_err(|source| LabError::StateDir {
            path: options.dir.clone(),
            source,
        })?;
        paths.create().map_err(|source| LabError::StateDir {
            path: paths.root().to_path_buf(),
            source,
        })?;
        let _lock = lock_dir(&paths)?;
        let previous = LabState::load(&paths);
        // kwok reads the benchmark pods' sample logs from here; it must exist before kwok starts.
        let logs_dir = paths.root().join("benchmarks");
        pod_logs::write(&logs_dir).map_err(|source| LabError::StateDir {
            path: logs_dir.clone(),
            source,
        })?;

        let (spec, scale) = match (&options.fleet, &previous) {
            (Some(spec), _) => (spec.clone(), options.scale),
            (None, Some(prev)) => (prev.fleet.clone(), options.scale.or(prev.scale)),
            (None, None) => (FleetSpec::default_fleet(), options.scale),
        };
        let fleet = Fleet::new(spec, scale).map_err(LabError::Fleet)?;
        // What `down` and the next `up` read: the ports as they stand after each step.
        let save_state = |ports: Ports| {
            LabState {
                ports,
                fleet: fleet.spec().clone(),
                scale: fleet.scale(),
                kube_bin: options.kube_bin.clone(),
            }
            .save(&paths)
        };

        let build = ensure_built(options.kube_bin.clone(), options.kube_src.clone()).await?;
        ensure_vcluster_built().await?;
        ensure_older_kubes_built().await?;
        if options.mpi_operator {
            ensure_mpi_operator_built().await?;
        }
        ensure_karpenter_built().await?;

        let running: Vec<Component> = Component::CONTROL_PLANE
            .into_iter()
            .filter(|c| PidRecord::read(&paths.pid_file(*c)).is_some_and(|r| r.is_alive()))
            .collect();
        let pki = Pki::new(&paths.pki());
        let mut adopted = false;
        if let Some(prev) = &previous
            && running.len() == Component::CONTROL_PLANE.len()
        {
            let mut healthy = true;
            for c in Component::CONTROL_PLANE {
                if let Some(why) = outdated(&paths, &options.kube_bin, &prev.ports, c) {
                    tracing::info!("{c} is running but outdated: {why}");
                    healthy = false;
                } else if let Err(why) = components::check(c, &prev.ports, &pki).await {
                    tracing::info!("{c} is running but not healthy: {why}");
                    healthy = false;
                }
            }
            adopted = healthy;
        }

        let mut control_plane = Duration::ZERO;
        let ports = match (&previous, adopted) {
            (Some(prev), true) => {
                tracing::info!(
                    "the lab in {} is already running and healthy",
                    paths.root().display()
                );
                prev.ports
            }
            _ => {
                if !running.is_empty() {
                    let how = if running.len() == Component::CONTROL_PLANE.len() {
                        "running, but not healthy or not current".to_string()
                    } else {
                        let names: Vec<&str> = running.iter().map(|c| c.name()).collect();
                        format!("partly running ({})", names.join(", "))
                    };
                    tracing::info!(
                        "the lab in {} is {how}; restarting it",
                        paths.root().display()
                    );
                    stop_components(&paths, previous.as_ref().map(|p| p.kube_bin.as_path()))?;
                }
                let ports = match &previous {
                    Some(prev) if prev.ports.all_free() => prev.ports,
                    _ => Ports::allocate().map_err(LabError::Ports)?,
                };
                save_state(ports)?;
                let t = Instant::now();
                if let Err(e) = start_control_plane(&paths, &ports, &options.kube_bin).await {
                    tracing::info!("{} failed; stopping what was started", e_step(&e));
                    let _ = stop_components(&paths, Some(&options.kube_bin));
                    return Err(e);
                }
                control_plane = t.elapsed();
                tracing::info!("control plane ready in {:.1}s", control_plane.as_secs_f64());
                ports
            }
        };
        // The Netris emulator: started when missing (a lab from before it joined is
        // adopted and gets it now), restarted when outdated or unhealthy.
        let ports = ensure_netris(&paths, ports, &fleet).await?;
        // The BCM emulator likewise.
        let ports = ensure_bcm(&paths, ports, &fleet).await?;
        save_state(ports)?;
        write_kubeconfigs(&paths, &ports, &pki)?;
        // The vCluster kubelet reads the state and the kubeconfig written just above.
        let ports = vcluster::component::ensure(&paths, ports).await?;
        save_state(ports)?;

        let kube_config = kubeconfig::load(&paths.kubeconfig())
            .await
            .map_err(LabError::Kubeconfig)?;
        let client = kube::Client::try_from(kube_config.clone()).map_err(LabError::Client)?;

        let sync = nodes::sync(&client, &fleet, options.node_concurrency, ports.kwok).await?;
        if sync != nodes::SyncReport::default() {
            tracing::info!(
                "nodes: {} created, {} unchanged, {} updated, {} deleted in {:.1}s",
                sync.created,
                sync.unchanged,
                sync.updated,
                sync.deleted,
                sync.took.as_secs_f64()
            );
        }
        let timeout =
            Duration::from_secs(120) + Duration::from_millis(100) * fleet.nodes().len() as u32;
        let ready_after = nodes::wait_ready(&client, &fleet, timeout).await?;
        crds::install(&client).await?;
        karpenter::install_crds(&client).await?;
        karpenter::install_node_class(&client).await?;
        // The provider runs as its own ServiceAccount, with only the rights it ships with.
        let server = kubeconfig::server_url(ports.apiserver);
        service_accounts::provider(&client, &paths, &server).await?;
        let before = ports;
        let mut ports = ports;
        if options.mpi_operator {
            mpi_operator::install_crd(&client).await?;
            service_accounts::mpi_operator(&client, &paths, &server).await?;
            ports = mpi_operator::ensure(&paths, ports).await?;
        }
        if options.karpenter {
            service_accounts::karpenter(&client, &paths, &server).await?;
            ports = karpenter::ensure(&paths, ports).await?;
        }
        if ports != before {
            save_state(ports)?;
        }
        // Last, so it overlaps with node registration: kube-controller-manager's
        // service-account controller must have made default/default before pods can run.
        wait_default_service_account(&client).await?;
        let nodes_ready = sync.took + ready_after;
        tracing::info!(
            "{} GPU nodes ({} GPUs) Ready {:.1}s after registration began",
            fleet.nodes().len(),
            fleet.gpu_count(),
            nodes_ready.as_secs_f64()
        );
        let report = UpReport {
            adopted,
            build,
            control_plane,
            nodes: sync,
            nodes_ready,
            total: started.elapsed(),
        };
        Ok(Self {
            paths,
            ports,
            fleet,
            kube_config,
            report,
        })
    }

    /// The lab shared by every test of the run, across test binaries: started on first
    /// use in `<target>/lab-tests` (or `$GPUFLEET_LAB_TEST_DIR`), with the default fleet,
    /// or adopted when it is already running. It is left running at the end; stop it with
    /// `gpufleet-lab down --dir target/lab-tests`.
    ///
    /// Works from synchronous and asynchronous tests alike (it starts the lab on a thread
    /// of its own).
    ///
    /// # Panics
    /// When the lab cannot be started, with the reason: for example that Go is needed to
    /// build the control plane and how to install it. Tests that need the lab fail then;
    /// they are never skipped.
    pub fn shared() -> &'static Lab {
        static SHARED: OnceLock<Lab> = OnceLock::new();
        SHARED.get_or_init(|| {
            let dir = std::env::var_os("GPUFLEET_LAB_TEST_DIR")
                .map_or_else(|| gobuild::target_dir().join("lab-tests"), PathBuf::from);
            let options = LabOptions::new(dir.clone());
            let started = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                runtime
                    .block_on(Lab::up(options))
                    .map_err(|e| e.to_string())
            })
            .join();
            match started {
                Ok(Ok(lab)) => lab,
                Ok(Err(e)) => panic!(
                    "the shared test lab in {} could not start: {e}",
                    dir.display()
                ),
                Err(_) => panic!(
                    "the shared test lab in {} panicked while starting",
                    dir.display()
                ),
            }
        })
    }

    /// Stops every process of the lab in `dir` (SIGTERM, then SIGKILL after 15 s), then
    /// looks for any process still running with the lab's directory on its command line,
    /// stops those too, and checks that none is left. The state (etcd data, certificates,
    /// ports, logs) stays, so `up` brings the same cluster back.
    ///
    /// # Errors
    /// When a process cannot be stopped, or one survives.
    pub fn down(dir: &Path) -> Result<DownReport, LabError> {
        let paths = LabPaths::new(dir).map_err(|source| LabError::StateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        if !paths.root().is_dir() {
            return Ok(DownReport::default());
        }
        let _lock = lock_dir(&paths)?;
        let bin = LabState::load(&paths).map(|s| s.kube_bin);
        stop_components(&paths, bin.as_deref())
    }

    /// [`Lab::down`], then deletes the state directory. The shared Go binary stays.
    ///
    /// # Errors
    /// When `down` fails or the directory cannot be removed.
    pub fn reset(dir: &Path) -> Result<DownReport, LabError> {
        let report = Self::down(dir)?;
        let paths = LabPaths::new(dir).map_err(|source| LabError::StateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        if paths.root().is_dir() {
            let _lock = lock_dir(&paths)?;
            std::fs::remove_dir_all(paths.root()).map_err(|source| LabError::StateDir {
                path: paths.root().to_path_buf(),
                source,
            })?;
        }
        Ok(report)
    }

    /// The status of the lab in `dir`: each component's process, memory and health, and
    /// the nodes.
    ///
    /// # Errors
    /// [`LabError::NotStarted`] when no lab was ever started there.
    pub async fn status(dir: &Path) -> Result<LabStatus, LabError> {
        install_crypto_provider();
        let paths = LabPaths::new(dir).map_err(|source| LabError::StateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let state = LabState::load(&paths).ok_or_else(|| LabError::NotStarted {
            dir: paths.root().to_path_buf(),
        })?;
        let fleet = Fleet::new(state.fleet.clone(), state.scale).map_err(LabError::Fleet)?;
        let pki = Pki::new(&paths.pki());
        let mut components = Vec::new();
        for c in Component::ALL {
            let record = PidRecord::read(&paths.pid_file(c)).filter(PidRecord::is_alive);
            let health = match record {
                None => Health::NotRunning,
                Some(_) => match components::check(c, &state.ports, &pki).await {
                    Ok(()) => Health::Healthy,
                    Err(why) => Health::Unhealthy(why),
                },
            };
            components.push(ComponentStatus {
                component: c,
                pid: record.map(|r| r.pid),
                port: c.port(&state.ports),
                rss_kib: record.and_then(|r| process::rss_kib(r.pid)),
                health,
            });
        }
        let api_ok = components
            .iter()
            .any(|c| c.component == Component::KubeApiserver && c.health == Health::Healthy);
        let mut node_counts = None;
        if api_ok
            && let Ok(config) = kubeconfig::load(&paths.kubeconfig()).await
            && let Ok(client) = kube::Client::try_from(config)
            && let Ok((ready, registered)) = nodes::count_ready(&client, &fleet).await
        {
            node_counts = Some(NodeCounts {
                expected: fleet.nodes().len(),
                registered,
                ready,
            });
        }
        Ok(LabStatus {
            dir: paths.root().to_path_buf(),
            kubeconfig: paths.kubeconfig(),
            ports: state.ports,
            fleet,
            components,
            nodes: node_counts,
        })
    }

    /// A kube client configuration for the admin user (TLS verified against the lab CA).
    #[must_use]
    pub fn kube_config(&self) -> kube::Config {
        self.kube_config.clone()
    }

    /// A new admin client. Call it inside the tokio runtime that will use it (each
    /// `#[tokio::test]` has a runtime of its own, so take a client per test).
    ///
    /// # Panics
    /// When no client can be built from the configuration that worked during `up`,
    /// or when called outside a tokio runtime.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        match self.try_client() {
            Ok(client) => client,
            Err(e) => panic!("{e}"),
        }
    }

    /// A new admin client.
    ///
    /// # Errors
    /// When the client cannot be built.
    pub fn try_client(&self) -> Result<kube::Client, LabError> {
        install_crypto_provider();
        kube::Client::try_from(self.kube_config()).map_err(LabError::Client)
    }

    /// Labels, taints and cordon of every node, by name: what tests compare before and after
    /// to show that every node was left as it was found.
    ///
    /// # Errors
    /// When the API server cannot be reached or the nodes cannot be listed.
    pub fn node_marks(
        &self,
    ) -> Result<std::collections::BTreeMap<String, String>, rest::RestError> {
        rest::KubeRest::from_kubeconfig(&self.kubeconfig_path())?.node_marks()
    }

    /// The admin kubeconfig (certificates embedded): for kubectl, Terraform and tests.
    #[must_use]
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.paths.kubeconfig()
    }

    /// `kubectl` of the same Kubernetes release as the lab's control plane: a link named
    /// `kubectl` (in `<lab>/bin/`) to the multi-call `gpufleet-kube` the lab runs, which
    /// acts as kubectl when called by that name. Give it `--kubeconfig`.
    ///
    /// # Errors
    /// When the lab's state names no binary, or the link cannot be made.
    pub fn kubectl(&self) -> Result<PathBuf, LabError> {
        let state = LabState::load(&self.paths).ok_or_else(|| LabError::StateDir {
            path: self.paths.root().to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the lab's state names no gpufleet-kube",
            ),
        })?;
        let dir = self.paths.root().join("bin");
        let link = dir.join("kubectl");
        let io = |source| LabError::StateDir {
            path: link.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        if std::fs::read_link(&link).ok().as_deref() != Some(state.kube_bin.as_path()) {
            // A fresh link under a temporary name, renamed over the old one: tests of
            // several binaries may ask at once.
            let tmp = dir.join(format!(".kubectl.{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            std::os::unix::fs::symlink(&state.kube_bin, &tmp).map_err(io)?;
            std::fs::rename(&tmp, &link).map_err(io)?;
        }
        Ok(link)
    }

    /// The fleet the lab runs.
    #[must_use]
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// The lab's state directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.paths.root()
    }

    /// The lab's paths.
    #[must_use]
    pub fn paths(&self) -> &LabPaths {
        &self.paths
    }

    /// The lab's ports.
    #[must_use]
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The API server's URL.
    #[must_use]
    pub fn server_url(&self) -> String {
        kubeconfig::server_url(self.ports.apiserver)
    }

    /// How long `up` took, step by step.
    #[must_use]
    pub fn report(&self) -> UpReport {
        self.report
    }

    /// The settings for the provider and clients ([`settings::lab_settings`]).
    #[must_use]
    pub fn settings(&self) -> Vec<Setting> {
        settings::lab_settings(&self.paths, &self.ports)
    }

    /// The Netris emulator's base URL (`https://127.0.0.1:<port>`; its admin plane is
    /// under `/_admin/`, its CA in [`LabPaths::netris_ca`]).
    #[must_use]
    pub fn netris_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.netris)
    }

    /// The BCM emulator's base URL (`https://127.0.0.1:<port>`; its JSON API is
    /// `POST /json`, its admin plane under `/_admin/`, its CA [`Lab::bcm_ca`]).
    #[must_use]
    pub fn bcm_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.bcm)
    }

    /// The BCM emulator's admin-profile client certificate and key (PEM files).
    #[must_use]
    pub fn bcm_admin_identity(&self) -> (PathBuf, PathBuf) {
        let pki = Pki::new(&self.paths.pki());
        let (stem, _) = pki::BCM_CLIENTS[0];
        (pki.cert(stem), pki.key(stem))
    }

    /// The BCM emulator's read-only-profile client certificate and key (PEM files).
    #[must_use]
    pub fn bcm_readonly_identity(&self) -> (PathBuf, PathBuf) {
        let pki = Pki::new(&self.paths.pki());
        let (stem, _) = pki::BCM_CLIENTS[1];
        (pki.cert(stem), pki.key(stem))
    }

    /// The CA that signed the BCM emulator's certificate and its client certificates
    /// (the lab CA, PEM file).
    #[must_use]
    pub fn bcm_ca(&self) -> PathBuf {
        Pki::new(&self.paths.pki()).ca_cert()
    }

    /// The settings as environment variables: `KUBECONFIG`, `GPUFLEET_KUBE_CONFIG_PATH`,
    /// `GPUFLEET_NETRIS_ENDPOINT`, `GPUFLEET_NETRIS_USERNAME`, `GPUFLEET_NETRIS_PASSWORD`,
    /// `GPUFLEET_NETRIS_CA_CERTIFICATE` (the path of the emulator's CA),
    /// `GPUFLEET_BCM_ENDPOINT`, `GPUFLEET_BCM_CLIENT_CERTIFICATE`, `GPUFLEET_BCM_CLIENT_KEY`
    /// and `GPUFLEET_BCM_CA_CERTIFICATE` (paths). Set them on a `Command` that runs
    /// Terraform.
    #[must_use]
    pub fn settings_env(&self) -> Vec<(String, String)> {
        self.settings()
            .into_iter()
            .map(|s| (s.name.to_string(), s.value))
            .collect()
    }
}
