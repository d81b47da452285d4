//! The library's error type: one variant per step of bringing a lab up or down.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::components::Component;
use crate::fleet::FleetError;
use crate::gobuild::BuildError;
use crate::kubeconfig::KubeconfigError;
use crate::pki::PkiError;

/// Why a lab operation failed. Each message starts with "failed to …" and says what to
/// look at (a log file, an install step).
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The state directory (or a file in it) could not be created, read or written.
    #[error("failed to prepare the state directory {path}: {source}")]
    StateDir {
        /// The directory or file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The directory's lock could not be taken.
    #[error("failed to lock the lab directory: {0}")]
    Lock(#[source] io::Error),
    /// The fleet spec could not be read or is invalid.
    #[error("failed to load the fleet: {0}")]
    Fleet(#[source] FleetError),
    /// The Go binary is missing or stale and could not be built (this includes "Go is not
    /// installed", with how to install it).
    #[error("failed to get gpufleet-kube: {0}")]
    Build(#[source] BuildError),
    /// The certificates could not be generated.
    #[error("failed to generate the PKI: {0}")]
    Pki(#[source] PkiError),
    /// No free loopback ports.
    #[error("failed to pick loopback ports: {0}")]
    Ports(#[source] io::Error),
    /// A kubeconfig could not be written or loaded.
    #[error("failed to set up the kubeconfig: {0}")]
    Kubeconfig(#[source] KubeconfigError),
    /// A component could not be started at all.
    #[error("failed to start {component}: {source}")]
    Spawn {
        /// The component.
        component: Component,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A component exited while the lab waited for it to become healthy.
    #[error("failed to start {component}: it exited; last lines of {log}:\n{tail}")]
    Exited {
        /// The component.
        component: Component,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A component kept running but did not become healthy in time.
    #[error(
        "failed to wait for {component} to become healthy within {}s ({last}); last lines of {log}:\n{tail}",
        waited.as_secs()
    )]
    Unhealthy {
        /// The component.
        component: Component,
        /// How long the lab waited.
        waited: Duration,
        /// The last answer (or error) of its health endpoint.
        last: String,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A Kubernetes client could not be built from the kubeconfig.
    #[error("failed to create a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// A request to the API server failed.
    #[error("failed to {what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// Something the lab waits for through the API (a service account, node readiness)
    /// did not happen in time.
    #[error("failed to wait for {what} within {}s: {state}", waited.as_secs())]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
        /// How far it got.
        state: String,
    },
    /// A component could not be stopped.
    #[error("failed to stop {component}: {source}")]
    Stop {
        /// The component.
        component: Component,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A process of the lab that had no pid file could not be stopped.
    #[error("failed to stop stray lab process {pid}: {source}")]
    StopStray {
        /// Its pid.
        pid: i32,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Processes of the lab were still running after `down`.
    #[error("failed to stop every lab process: still running: {pids:?}")]
    Leftovers {
        /// Their pids.
        pids: Vec<i32>,
    },
    /// A manifest the lab applies as published (the provider's ClusterRole) does not read.
    #[error("failed to read {what}: {why}")]
    Manifest {
        /// The manifest.
        what: &'static str,
        /// Why.
        why: String,
    },
    /// There is no lab in the directory.
    #[error(
        "failed to find a lab in {dir}: none was started there (start one with `gpufleet-lab up --dir {dir}`)"
    )]
    NotStarted {
        /// The directory.
        dir: PathBuf,
    },
    /// A log file could not be read (the component may never have run in this lab).
    #[error("failed to read the log {path}: {source}")]
    ReadLog {
        /// The log file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A component name that is not one of the five.
    #[error(
        "failed to find component {0:?}: the components are etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (or `build` for the Go build log)"
    )]
    UnknownComponent(String),
}
