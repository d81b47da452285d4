//! One component's steps: start it in the background, wait until it is healthy, and tell
//! whether a running one is current or must restart.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::components::{self, Component};
use crate::error::LabError;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::process::{self, PidRecord};

/// Why a running component should be restarted rather than adopted: its binary was
/// rebuilt since it started, or this version of the lab starts it from another binary
/// or with other flags.
/// `None` when it is current.
pub(crate) fn outdated(
    paths: &LabPaths,
    bin: &Path,
    ports: &Ports,
    component: Component,
) -> Option<String> {
    let record = PidRecord::read(&paths.pid_file(component))?;
    if process::executable_replaced(record.pid) {
        return Some("its binary was rebuilt".into());
    }
    let mut expected = vec![bin.display().to_string()];
    expected.extend(component.args(paths, ports));
    match process::cmdline(record.pid) {
        Some(actual) if actual == expected => None,
        Some(_) => Some("it runs with other flags than this gpufleet-lab would give it".into()),
        None => Some("its command line cannot be read".into()),
    }
}

/// Starts one component in the background, logging where it listens.
pub(crate) fn spawn_component(
    bin: &Path,
    c: Component,
    paths: &LabPaths,
    ports: &Ports,
) -> Result<PidRecord, LabError> {
    let record = process::spawn(
        bin,
        &c.args(paths, ports),
        paths.root(),
        &paths.log_file(c),
        &paths.pid_file(c),
    )
    .map_err(|source| LabError::Spawn {
        component: c,
        source,
    })?;
    tracing::info!(
        "started {c} (pid {}) on 127.0.0.1:{}",
        record.pid,
        c.port(ports)
    );
    Ok(record)
}

/// Polls a component's health until it is healthy, it exits, or `timeout` passes.
pub(crate) async fn wait_healthy(
    component: Component,
    record: PidRecord,
    paths: &LabPaths,
    ports: &Ports,
    pki: &Pki,
    timeout: Duration,
) -> Result<(), LabError> {
    let started = Instant::now();
    let log = paths.log_file(component);
    let tail = || {
        process::tail(&log, 25)
            .map(|l| l.join("\n"))
            .unwrap_or_else(|e| format!("(no log: {e})"))
    };
    loop {
        let result = components::check(component, ports, pki).await;
        match result {
            Ok(()) => {
                tracing::info!(
                    "{component} healthy after {:.1}s",
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            Err(last) => {
                if !record.is_alive() {
                    return Err(LabError::Exited {
                        component,
                        log: log.clone(),
                        tail: tail(),
                    });
                }
                if started.elapsed() >= timeout {
                    return Err(LabError::Unhealthy {
                        component,
                        waited: timeout,
                        last,
                        log: log.clone(),
                        tail: tail(),
                    });
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
