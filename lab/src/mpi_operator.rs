//! The Kubeflow MPI Operator as a lab component: its `MPIJob` CRD and its controller, both
//! from the release `lab/mpi-operator/build.sh` builds ([`gobuild::MPI_OPERATOR_VERSION`]).
//!
//! gpufleet runs a multi-node benchmark as an `MPIJob` (`kubeflow.org/v2beta1`) when the
//! host cluster serves that API. In the lab the real controller expands it, as on a GPU
//! cloud: a launcher Job whose pod runs `mpirun`, worker pods, the hostfile ConfigMap, the
//! SSH key Secret and the workers' headless Service; the real scheduler places the pods and
//! kwok runs them.
//!
//! The controller runs from the lab's vCluster kubelet binary as `vcluster-kubelet isolated`
//! ([`crate::vcluster::isolated`]): in a network namespace of its own, with the host API
//! server forwarded in. It serves its health check on port 8080 of every interface, a port
//! the operator fixes; inside its own namespace that port is its own, so every lab on a
//! machine runs one, and the lab reaches the health check through a loopback port of its
//! own ([`Ports::mpi_operator`]). It talks to the API server as the ServiceAccount
//! `mpi-operator/mpi-operator`, bound to the ClusterRole of the release's own manifests
//! ([`crate::service_accounts`]), as its install would. A lab started with
//! [`crate::LabOptions::mpi_operator`] off goes without.

use std::net::{Ipv4Addr, SocketAddr};

use crate::components::Component;
use crate::error::LabError;
use crate::gobuild;
use crate::kubelet_component;
use crate::paths::LabPaths;
use crate::ports::Ports;

/// The port of the controller's `/healthz` inside its network namespace (a constant of the
/// operator, not a flag).
pub const HEALTH_PORT: u16 = 8080;

/// The name of the MPIJob CRD.
pub const CRD_NAME: &str = "mpijobs.kubeflow.org";

/// Where the controller keeps its leader-election Lease: its own namespace.
const LOCK_NAMESPACE: &str = crate::service_accounts::MPI_OPERATOR_NAMESPACE;

/// The controller's binary in the build directory.
#[must_use]
pub fn binary() -> std::path::PathBuf {
    gobuild::mpi_operator_dir().join("mpi-operator")
}

/// The supervisor's flags (after `vcluster-kubelet`), then the controller and its flags.
#[must_use]
pub fn args(paths: &LabPaths, ports: &Ports) -> Vec<String> {
    vec![
        "isolated".into(),
        format!("--dir={}", paths.mpi_operator_dir().display()),
        format!("--api-port={}", ports.apiserver),
        format!(
            "--expose={}",
            SocketAddr::from((Ipv4Addr::LOCALHOST, ports.mpi_operator))
        ),
        format!("--inner-port={HEALTH_PORT}"),
        "--".into(),
        binary().display().to_string(),
        format!(
            "--kubeConfig={}",
            crate::service_accounts::mpi_operator_kubeconfig(paths).display()
        ),
        format!("--lock-namespace={LOCK_NAMESPACE}"),
        // Its defaults (5 queries a second, burst 10) are for a shared production API
        // server; benchmarks in the tests should not wait on the client's throttle.
        "--kube-api-qps=50".into(),
        "--kube-api-burst=100".into(),
        "--logtostderr".into(),
    ]
}

/// Installs the release's MPIJob CRD (server-side apply) and waits until it is served.
///
/// # Errors
/// When the build's CRD cannot be read or parsed, or the API server refuses it.
pub async fn install_crd(client: &kube::Client) -> Result<(), LabError> {
    let path = gobuild::mpi_operator_dir().join("mpijobs-crd.yaml");
    crate::crds::install_file(client, &path).await.map(drop)
}

/// Makes the controller run, current and healthy (after its CRD exists: without it the
/// controller exits). Returns `ports` with its health port.
///
/// # Errors
/// When its supervisor cannot be found, no loopback port is free, or it does not become
/// healthy.
pub(crate) async fn ensure(paths: &LabPaths, ports: Ports) -> Result<Ports, LabError> {
    kubelet_component::ensure(
        paths,
        ports,
        Component::MpiOperator,
        |p| &mut p.mpi_operator,
        None,
    )
    .await
}
