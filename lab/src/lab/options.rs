//! How a lab is started, what it saved of its start, and how long its start took.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::fleet::FleetSpec;
use crate::paths::LabPaths;
use crate::ports::Ports;
use crate::{gobuild, nodes};

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
    /// Whether the lab runs the MPI Operator (see [`mpi_operator`](crate::mpi_operator)); on by default.
    pub mpi_operator: bool,
    /// Whether the lab runs Karpenter's controller (see [`karpenter`](crate::karpenter)); on by default. Its
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

    pub(super) fn save(&self, paths: &LabPaths) -> Result<(), LabError> {
        let path = paths.state_file();
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::StateDir {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&path, text).map_err(|source| LabError::StateDir { path, source })
    }
}

/// How long the steps of [`Lab::up`](crate::Lab::up) took.
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
