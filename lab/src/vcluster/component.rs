//! The stand-in as a lab component: its command line, and starting it from `Lab::up`
//! (kept when running, current and healthy; restarted otherwise, on a new port when its
//! old one is taken). Its API servers are not stopped with it: a restarted stand-in
//! adopts them. `gpufleet-lab down` stops them through `stop_api_servers`.

use std::time::Duration;

use crate::components::{self, Component};
use crate::error::LabError;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::process::{self, PidRecord};

/// The stand-in's flags (after the program).
#[must_use]
pub fn args(paths: &LabPaths, ports: &Ports) -> Vec<String> {
    vec![
        format!("--dir={}", paths.vcluster_dir().display()),
        format!("--kubeconfig={}", paths.kubeconfig().display()),
        format!("--lab-state={}", paths.state_file().display()),
        format!("--etcd-port={}", ports.etcd_client),
        format!("--listen=127.0.0.1:{}", ports.vcluster),
    ]
}

/// Makes the stand-in run, current and healthy. Returns `ports` with its port.
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
        || !super::apiserver::port_free(ports.vcluster)
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

/// Stops every virtual cluster's API server of the lab at `paths` (the stand-in itself is
/// stopped as a component). Returns how many were running.
///
/// # Errors
/// When one survives SIGKILL.
pub(crate) fn stop_api_servers(paths: &LabPaths) -> Result<usize, LabError> {
    let (stopped, failed) = super::apiserver::stop_all(&paths.vcluster_dir());
    for dir in &stopped {
        tracing::info!(
            "stopped the virtual cluster API server of {}",
            dir.display()
        );
    }
    match failed.into_iter().next() {
        Some((_, source)) => Err(LabError::Stop {
            component: Component::Vcluster,
            source,
        }),
        None => Ok(stopped.len()),
    }
}
