//! The vCluster kubelet as a lab component: its command line, and starting it from
//! `Lab::up` (kept when running, current and healthy; restarted otherwise, on a new port
//! when its old one is taken). Its sandboxes are not stopped with it: a restarted kubelet
//! adopts them. `gpufleet-lab down` stops them through [`stop_sandboxes`].

use std::time::Duration;

use crate::components::{self, Component};
use crate::error::LabError;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::process::{self, PidRecord};

/// The kubelet's flags (after the program).
#[must_use]
pub fn args(paths: &LabPaths, ports: &Ports) -> Vec<String> {
    vec![
        format!("--dir={}", paths.vcluster_dir().display()),
        format!("--kubeconfig={}", paths.kubeconfig().display()),
        format!("--lab-state={}", paths.state_file().display()),
        format!(
            "--vcluster-dir={}",
            crate::gobuild::vcluster_dir().display()
        ),
        format!("--listen=127.0.0.1:{}", ports.vcluster),
    ]
}

/// Makes the kubelet run, current and healthy. Returns `ports` with its port.
///
/// # Errors
/// When its binary cannot be found or built, or it does not become healthy.
pub(crate) async fn ensure(paths: &LabPaths, mut ports: Ports) -> Result<Ports, LabError> {
    let c = Component::Vcluster;
    let spawn_error = |e: String| LabError::Spawn {
        component: c,
        source: std::io::Error::other(e),
    };
    let bin = tokio::task::spawn_blocking(components::vcluster_binary)
        .await
        .map_err(|e| spawn_error(e.to_string()))?
        .map_err(spawn_error)?;
    let pki = Pki::new(&paths.pki());
    let running = PidRecord::read(&paths.pid_file(c)).filter(PidRecord::is_alive);
    if running.is_some() && ports.vcluster != 0 {
        let why = match crate::outdated(paths, &bin, &ports, c) {
            Some(why) => Some(why),
            None => components::check(c, &ports, &pki).await.err(),
        };
        match why {
            None => return Ok(ports),
            Some(why) => tracing::info!("{c} is running but must restart: {why}"),
        }
    }
    if running.is_some() {
        process::stop(&paths.pid_file(c), crate::STOP_GRACE).map_err(|source| LabError::Stop {
            component: c,
            source,
        })?;
    }
    let others: Vec<u16> = ports
        .all()
        .into_iter()
        .filter(|p| *p != ports.vcluster)
        .collect();
    let mut tries = 0;
    while ports.vcluster == 0
        || others.contains(&ports.vcluster)
        || std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, ports.vcluster)).is_err()
    {
        tries += 1;
        if tries > 20 {
            return Err(spawn_error("no free loopback port for it".into()));
        }
        ports.vcluster = Ports::allocate().map_err(LabError::Ports)?.vcluster;
    }
    let record = crate::spawn_component(&bin, c, paths, &ports)?;
    let healthy =
        crate::wait_healthy(c, record, paths, &ports, &pki, Duration::from_secs(60)).await;
    if let Err(e) = healthy {
        let _ = process::stop(&paths.pid_file(c), crate::STOP_GRACE);
        return Err(e);
    }
    Ok(ports)
}

/// Stops every vCluster sandbox of the lab at `paths` (the kubelet itself is stopped as a
/// component). Returns how many were running.
pub(crate) fn stop_sandboxes(paths: &LabPaths) -> usize {
    let stopped = super::kubelet::stop_all(&paths.vcluster_dir());
    if stopped > 0 {
        tracing::info!("stopped {stopped} vCluster pod sandbox(es)");
    }
    stopped
}
