//! Starting (or adopting) a lab, the shared one of the tests, stopping it, resetting it,
//! and its status.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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
use crate::status::{ComponentStatus, Health, LabStatus, NodeCounts};

use crate::{
    components, crds, gobuild, karpenter, kubeconfig, mpi_operator, nodes, pod_logs, process,
    service_accounts, vcluster,
};

use super::{Lab, LabOptions, LabState, UpReport};

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
                        "running, but not healthy or not current".to_owned()
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
}
