//! How the vCluster kubelet is run, where each pod's files live, and how it names a pod.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

/// The port the virtual API server serves inside the pod.
pub const SYNCER_PORT: u16 = 8443;

/// How the vCluster kubelet is run.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Its state directory (`<lab>/vcluster`).
    pub dir: PathBuf,
    /// This program, run again inside each sandbox as `sandbox-init`.
    pub kubelet_bin: PathBuf,
    /// vCluster's syncer, built from the Go module proxy.
    pub syncer_bin: PathBuf,
    /// kine, the syncer's datastore.
    pub kine_bin: PathBuf,
    /// The virtual clusters' Kubernetes programs, by minor (`1.36`: `gpufleet-kube`; older
    /// minors: their `lab/kube-<minor>` builds).
    pub kube_bins: BTreeMap<String, PathBuf>,
    /// The vCluster release `syncer_bin` is.
    pub version: String,
    /// The host API server's loopback port.
    pub api_port: u16,
    /// Time between passes.
    pub interval: Duration,
}

impl KubeletConfig {
    pub(super) fn pods_dir(&self) -> PathBuf {
        self.dir.join("pods")
    }

    pub(super) fn claims_dir(&self) -> PathBuf {
        self.dir.join("claims")
    }

    pub(super) fn pod_dir(&self, uid: &str) -> PathBuf {
        self.pods_dir().join(uid)
    }
}

pub(super) fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

pub(super) fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// The main container of a vCluster pod.
pub(super) fn syncer_container(pod: &Pod) -> Option<&Container> {
    let containers = &pod.spec.as_ref()?.containers;
    containers
        .iter()
        .find(|c| c.name == "syncer")
        .or_else(|| containers.first())
}
