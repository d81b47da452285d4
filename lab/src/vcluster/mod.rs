//! The lab's stand-in for vCluster's control-plane container (`vcluster-standin`).
//!
//! A real vCluster runs its own API server inside the StatefulSet's pod. kwok only pretends
//! to run pods, so the lab runs that API server next to the host's instead: for every
//! StatefulSet labelled `app=vcluster` with at least one replica, the stand-in starts a
//! real kube-apiserver (the lab's `gpufleet-kube` binary) on a loopback port of its own,
//! on the lab's etcd under an etcd prefix of its own, with a CA and certificates of its
//! own, and writes Secret `vc-<name>` (a kubeconfig and its parts) once it is ready.
//! Replicas 0 stops the API server (its data and port are kept for the resume); deleting
//! the StatefulSet stops it and forgets it.
//!
//! Like vCluster's syncer it also copies host nodes into the virtual cluster
//! (`sync.fromHost.nodes`) and pods from the virtual cluster to the host
//! (`sync.toHost.pods`), as the StatefulSet's Secret `vc-config-<name>` (key
//! `config.yaml`) configures.
//!
//! # Layers
//!
//! - [`config`]: the parts of vcluster.yaml the stand-in acts on (pure).
//! - [`certs`]: one virtual cluster's CA, serving and admin certificates.
//! - [`record`]: what is kept on disk per virtual cluster (port, etcd prefix, owner uid),
//!   so a restarted stand-in brings back (or adopts) the same API servers.
//! - [`apiserver`]: the per-cluster kube-apiserver: flags, start, adopt, stop, readiness.
//! - [`secret`]: the `vc-<name>` Secret and its kubeconfig.
//! - [`nodes`] and [`pods`]: the two syncers.
//! - [`controller`]: the reconcile loop over the host's StatefulSets.
//! - [`health`]: the stand-in's own `/healthz` and `/status` (plain HTTP, loopback).
//!
//! Everything lives under `<lab>/vcluster/`, one directory per virtual cluster
//! (`<namespace>_<name>/`: `record.json`, `pki/`, `apiserver.log`, `apiserver.pid`).

pub mod apiserver;
pub mod certs;
pub mod component;
pub mod config;
pub mod controller;
pub mod health;
pub mod nodes;
pub mod pods;
pub mod record;
pub mod secret;

pub use controller::{StandIn, StandInConfig};

/// The file name of the stand-in's binary.
pub const BIN_NAME: &str = "vcluster-standin";

/// The label selector of the StatefulSets the stand-in serves.
pub const STATEFULSET_SELECTOR: &str = "app=vcluster";

/// The Secret key holding vcluster.yaml in `vc-config-<name>`.
pub const CONFIG_KEY: &str = "config.yaml";

/// The name of the config Secret of virtual cluster `name`.
#[must_use]
pub fn config_secret_name(name: &str) -> String {
    format!("vc-config-{name}")
}

/// The name of the kubeconfig Secret of virtual cluster `name`.
#[must_use]
pub fn kubeconfig_secret_name(name: &str) -> String {
    format!("vc-{name}")
}
