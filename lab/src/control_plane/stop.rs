//! Stopping the lab: every component, newest first, then any stray process of it.

use std::path::Path;

use super::STOP_GRACE;
use crate::components::{self, Component};
use crate::error::LabError;
use crate::paths::LabPaths;
use crate::process::{self, Stopped};
use crate::vcluster;

/// What [`Lab::down`](crate::Lab::down) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    /// The components that were running, and how they stopped.
    pub stopped: Vec<(Component, Stopped)>,
    /// Processes of the lab found without a pid file, and stopped.
    pub strays: Vec<i32>,
}

/// Stops the components (newest first), then any stray process of the lab, and checks
/// that none is left.
pub(crate) fn stop_components(
    paths: &LabPaths,
    bin: Option<&Path>,
) -> Result<DownReport, LabError> {
    let mut report = DownReport::default();
    for c in Component::ALL.into_iter().rev() {
        let outcome =
            process::stop(&paths.pid_file(c), STOP_GRACE).map_err(|source| LabError::Stop {
                component: c,
                source,
            })?;
        if outcome != Stopped::WasNotRunning {
            tracing::info!("stopped {c} ({outcome:?})");
            report.stopped.push((c, outcome));
        }
        if c == Component::Vcluster {
            // The sandboxes of its pods run detached from it.
            vcluster::component::stop_sandboxes(paths);
        }
    }
    // Anything still running with this lab's directory in its arguments (a lost pid
    // file, a crashed `up`): the binary's name and the directory identify it.
    let bin_name = bin
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("gpufleet-kube")
        .to_owned();
    let marker = paths.marker();
    let mut strays = process::find_by_cmdline(&[&bin_name, &marker]);
    strays.extend(process::find_by_cmdline(&[
        components::NETRIS_BIN_NAME,
        &marker,
    ]));
    strays.extend(process::find_by_cmdline(&[
        components::BCM_BIN_NAME,
        &marker,
    ]));
    strays.extend(process::find_by_cmdline(&[
        components::VCLUSTER_BIN_NAME,
        &marker,
    ]));
    for stray in strays {
        tracing::warn!("stopping stray lab process {}", stray.pid);
        process::kill_stray(&stray, STOP_GRACE).map_err(|source| LabError::StopStray {
            pid: stray.pid,
            source,
        })?;
        report.strays.push(stray.pid);
    }
    let left: Vec<i32> = process::find_by_cmdline(&[&bin_name, &marker])
        .into_iter()
        .chain(process::find_by_cmdline(&[
            components::NETRIS_BIN_NAME,
            &marker,
        ]))
        .chain(process::find_by_cmdline(&[
            components::BCM_BIN_NAME,
            &marker,
        ]))
        .chain(process::find_by_cmdline(&[
            components::VCLUSTER_BIN_NAME,
            &marker,
        ]))
        .map(|r| r.pid)
        .collect();
    if !left.is_empty() {
        return Err(LabError::Leftovers { pids: left });
    }
    Ok(report)
}
