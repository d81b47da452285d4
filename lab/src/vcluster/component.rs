//! The vCluster kubelet as a lab component: its command line, and starting it from
//! `Lab::up` (kept when running, current and healthy; restarted otherwise, on a new port
//! when its old one is taken). Its sandboxes are not stopped with it: a restarted kubelet
//! adopts them. `gpufleet-lab down` stops them through `stop_sandboxes`.

use crate::components::Component;
use crate::error::LabError;
use crate::paths::LabPaths;
use crate::ports::Ports;

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
pub(crate) async fn ensure(paths: &LabPaths, ports: Ports) -> Result<Ports, LabError> {
    crate::kubelet_component::ensure(paths, ports, Component::Vcluster, |p| &mut p.vcluster, None)
        .await
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
