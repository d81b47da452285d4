//! The Go builds the lab needs, each when missing or stale, off the async runtime (a build
//! takes minutes).

use std::path::PathBuf;
use std::time::Duration;

use crate::error::LabError;
use crate::gobuild;

/// Builds the control-plane binary if it is missing or stale, off the async runtime (the Go
/// build takes minutes); returns how long a build took, or `None` when none was needed.
pub async fn ensure_built(bin: PathBuf, src: PathBuf) -> Result<Option<Duration>, LabError> {
    off_runtime(move || gobuild::ensure(&bin, &src)).await
}

/// Builds vCluster's syncer and kine if missing or stale (see [`gobuild::ensure_vcluster`]).
pub async fn ensure_vcluster_built() -> Result<Option<Duration>, LabError> {
    off_runtime(|| gobuild::ensure_vcluster(&gobuild::vcluster_dir())).await
}

/// Builds the control planes of older Kubernetes minors for virtual clusters if missing or
/// stale (see [`gobuild::ensure_older_kubes`]).
pub async fn ensure_older_kubes_built() -> Result<Option<Duration>, LabError> {
    off_runtime(gobuild::ensure_older_kubes).await
}

/// Builds the MPI Operator's controller if missing or stale (see
/// [`gobuild::ensure_mpi_operator`]).
pub async fn ensure_mpi_operator_built() -> Result<Option<Duration>, LabError> {
    off_runtime(|| gobuild::ensure_mpi_operator(&gobuild::mpi_operator_dir())).await
}

/// Builds Karpenter's KWOK controller and takes its CRDs when missing or stale (see
/// [`gobuild::ensure_karpenter`]).
///
/// # Errors
/// When Go is missing or the build fails.
pub async fn ensure_karpenter_built() -> Result<Option<Duration>, LabError> {
    off_runtime(|| gobuild::ensure_karpenter(&gobuild::karpenter_dir())).await
}

/// Runs a Go build on a blocking thread.
async fn off_runtime(
    build: impl FnOnce() -> Result<Option<Duration>, gobuild::BuildError> + Send + 'static,
) -> Result<Option<Duration>, LabError> {
    tokio::task::spawn_blocking(build)
        .await
        .map_err(|e| {
            LabError::Build(gobuild::BuildError::Io {
                what: "run the build".into(),
                source: std::io::Error::other(e),
            })
        })?
        .map_err(LabError::Build)
}
