//! `gpufleet-lab`: a real Kubernetes control plane with a simulated GPU fleet, on one
//! machine.
//!
//! A lab is etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (all
//! from one Go binary built from `lab/kube/`), listening on loopback ports of their own,
//! with GPU nodes from a fleet spec ([`fleet`]) that kwok keeps Ready and whose pods it
//! runs (and completes, for Jobs). Everything it owns lives in one state directory
//! ([`paths`]); two labs in two directories do not collide.
//!
//! # For tests
//!
//! ```no_run
//! use gpufleet_lab::Lab;
//! use k8s_openapi::api::core::v1::Node;
//!
//! # async fn demo() {
//! // One lab for the whole test run, shared by every test and every test binary: the
//! // first caller starts it (building the Go binary if needed), the others reuse it.
//! let lab = Lab::shared();
//! let client = lab.client(); // inside a tokio runtime
//! let nodes: kube::Api<Node> = kube::Api::all(client);
//! assert!(nodes.list(&Default::default()).await.unwrap().items.len() >= 64);
//! # }
//! ```
//!
//! [`Lab::shared`] uses `<target>/lab-tests` (or `$GPUFLEET_LAB_TEST_DIR`) and leaves the
//! lab running when the tests end, so the next test binary (and the next `cargo test`)
//! finds it; `gpufleet-lab down --dir target/lab-tests` stops it. When the Go toolchain
//! is needed and missing, it panics with how to install it: a test that needs the lab
//! fails, it is never skipped.
//!
//! For a lab of its own, a test calls [`Lab::up`] with [`LabOptions`] and
//! [`Lab::down`] when done.

pub mod bcm;
pub mod cli;
pub mod components;
pub mod control_plane;
pub mod crds;
pub mod crypto;
pub mod emulator;
pub mod error;
pub mod fleet;
pub mod gobuild;
pub mod karpenter;
pub mod kubeconfig;
pub mod kubelet_component;
pub mod lab;
pub mod lock;
pub mod mig_manager;
pub mod mig_parted;
pub mod mpi_operator;
pub mod netris;
pub mod nodes;
pub mod paths;
pub mod pki;
pub mod pod_logs;
pub mod ports;
pub mod process;
pub mod rest;
pub mod service_accounts;
pub mod settings;
pub mod status;
pub mod tenant_forward;
pub mod vcluster;

pub use crate::components::Component;
pub use crate::control_plane::build::{
    ensure_built, ensure_karpenter_built, ensure_mpi_operator_built, ensure_older_kubes_built,
    ensure_vcluster_built,
};
pub use crate::control_plane::stop::DownReport;
pub use crate::crypto::install_crypto_provider;
pub use crate::error::LabError;
pub use crate::fleet::{Fleet, FleetNode, FleetSpec};
pub use crate::lab::{Lab, LabOptions, LabState, UpReport};
pub use crate::paths::LabPaths;
pub use crate::ports::Ports;
pub use crate::settings::Setting;
