//! The layout of a lab's state directory.
//!
//! Everything one lab owns lives under one directory (`--dir`, default `.lab/`):
//!
//! ```text
//! <dir>/
//!   lab.lock              held while `up`, `down` or `reset` change the lab
//!   state.json            the fleet the lab was started with, and its ports
//!   kubeconfig            admin kubeconfig (embedded certificates): give this to kubectl
//!   kwok-stages.yaml      the kwok Stages (node and pod lifecycles) kwok runs with
//!   pki/                  CA, serving and client certificates, service-account keys,
//!                         and one kubeconfig per control-plane component
//!   etcd/                 etcd's data directory (kept by `down`, deleted by `reset`)
//!   logs/<component>.log  stdout and stderr of each component (previous run: .log.1)
//!   run/<component>.pid   pid and start time of each running component
//!   netris/               the Netris emulator's state, CA (netris-ca.pem) and inventory
//!   bcm/                  the BCM emulator's state and inventory (it uses the lab CA;
//!                         its client certificates are pki/bcm-admin.* and pki/bcm-readonly.*)
//!   vcluster/             the vCluster kubelet: pods/<uid>/ per vCluster pod (volumes,
//!                         sandbox root, spec, pid and syncer.log), claims/<uid>/ per
//!                         volume claim, ports.json (each virtual cluster's host port)
//! ```
//!
//! The Go binary is not in here: it is shared by every lab (see [`crate::gobuild`]).
//! Two labs in two directories share nothing but that binary, and pick their own ports.

use std::io;
use std::path::{Path, PathBuf};

use crate::components::Component;

/// The paths of one lab's state directory. The root is always absolute, so the paths
/// can be handed to processes that run in another working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabPaths {
    root: PathBuf,
}

impl LabPaths {
    /// The layout under `dir`. A relative `dir` is taken from the current working
    /// directory; `.` and `..` components are resolved lexically (the directory need
    /// not exist yet).
    ///
    /// # Errors
    /// When `dir` is relative and the current directory cannot be read.
    pub fn new(dir: &Path) -> io::Result<Self> {
        let abs = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()?.join(dir)
        };
        let mut root = PathBuf::new();
        for part in abs.components() {
            match part {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    root.pop();
                }
                other => root.push(other.as_os_str()),
            }
        }
        Ok(Self { root })
    }

    /// Creates the directories a running lab needs.
    ///
    /// # Errors
    /// When a directory cannot be created.
    pub fn create(&self) -> io::Result<()> {
        for dir in [
            self.root.clone(),
            self.pki(),
            self.logs(),
            self.run(),
            self.netris_dir(),
            self.bcm_dir(),
            self.vcluster_dir(),
            self.mpi_operator_dir(),
            self.karpenter_dir(),
        ] {
            std::fs::create_dir_all(&dir)?;
        }
        Ok(())
    }

    /// The state directory itself.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root followed by a `/`: a string that appears in the command line of every
    /// process of this lab and of no other lab's (`/tmp/lab1/` is no prefix of
    /// `/tmp/lab10/...`).
    #[must_use]
    pub fn marker(&self) -> String {
        format!("{}/", self.root.display())
    }

    /// Certificates, keys and component kubeconfigs.
    #[must_use]
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    /// One log file per component.
    #[must_use]
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// One pid file per running component.
    #[must_use]
    pub fn run(&self) -> PathBuf {
        self.root.join("run")
    }

    /// etcd's data directory.
    #[must_use]
    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }

    /// The Netris emulator's state directory.
    #[must_use]
    pub fn netris_dir(&self) -> PathBuf {
        self.root.join("netris")
    }

    /// The CA certificate of the Netris emulator (PEM): what clients trust.
    #[must_use]
    pub fn netris_ca(&self) -> PathBuf {
        self.netris_dir().join(crate::netris::CA_CERT_FILE)
    }

    /// The inventory the Netris emulator is seeded with (JSON, from the fleet).
    #[must_use]
    pub fn netris_inventory(&self) -> PathBuf {
        self.netris_dir().join("inventory.json")
    }

    /// The BCM emulator's state directory.
    #[must_use]
    pub fn bcm_dir(&self) -> PathBuf {
        self.root.join("bcm")
    }

    /// The inventory the BCM emulator is seeded with (JSON, from the fleet).
    #[must_use]
    pub fn bcm_inventory(&self) -> PathBuf {
        self.bcm_dir().join("inventory.json")
    }

    /// The vCluster kubelet's state directory.
    #[must_use]
    pub fn vcluster_dir(&self) -> PathBuf {
        self.root.join("vcluster")
    }

    /// The kubeconfig of the provider's ServiceAccount (what `GPUFLEET_KUBE_CONFIG_PATH`
    /// points at).
    #[must_use]
    pub fn provider_kubeconfig(&self) -> PathBuf {
        self.root.join("provider.kubeconfig")
    }

    /// The MPI Operator's state: its sandbox's spec, and the kubeconfig of its service
    /// account.
    #[must_use]
    pub fn mpi_operator_dir(&self) -> PathBuf {
        self.root.join("mpi-operator")
    }

    /// Karpenter's state: its sandbox's spec, its instance types, and the kubeconfig of its
    /// service account.
    #[must_use]
    pub fn karpenter_dir(&self) -> PathBuf {
        self.root.join("karpenter")
    }

    /// The lock file that serialises `up`, `down` and `reset` on this directory, across
    /// processes.
    #[must_use]
    pub fn lock_file(&self) -> PathBuf {
        self.root.join("lab.lock")
    }

    /// What the lab was started with: its ports and fleet (see [`crate::LabState`]).
    #[must_use]
    pub fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }

    /// The admin kubeconfig, with the certificates embedded.
    #[must_use]
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }

    /// The API server's audit policy.
    #[must_use]
    pub fn audit_policy(&self) -> PathBuf {
        self.root.join("audit-policy.yaml")
    }

    /// The API server's audit log: one JSON event per request of the provider's account.
    #[must_use]
    pub fn audit_log(&self) -> PathBuf {
        self.logs().join("audit.log")
    }

    /// The kwok Stages file kwok runs with.
    #[must_use]
    pub fn stages_file(&self) -> PathBuf {
        self.root.join("kwok-stages.yaml")
    }

    /// The kubeconfig a component uses to reach the API server.
    #[must_use]
    pub fn component_kubeconfig(&self, component: Component) -> PathBuf {
        self.pki().join(format!("{}.kubeconfig", component.name()))
    }

    /// A component's log file.
    #[must_use]
    pub fn log_file(&self, component: Component) -> PathBuf {
        self.logs().join(format!("{}.log", component.name()))
    }

    /// A component's pid file.
    #[must_use]
    pub fn pid_file(&self, component: Component) -> PathBuf {
        self.run().join(format!("{}.pid", component.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_dirs_become_absolute_and_normalised() {
        let p = LabPaths::new(Path::new("a/./b/../c")).expect("cwd");
        assert!(p.root().is_absolute());
        assert!(p.root().ends_with("a/c"), "{}", p.root().display());
    }

    #[test]
    fn marker_tells_sibling_labs_apart() {
        let one = LabPaths::new(Path::new("/tmp/lab1")).expect("abs");
        let ten = LabPaths::new(Path::new("/tmp/lab10")).expect("abs");
        let etcd_of_ten = ten.etcd_data().display().to_string();
        assert!(etcd_of_ten.contains(&ten.marker()));
        assert!(!etcd_of_ten.contains(&one.marker()));
    }

    #[test]
    fn component_files_are_named_after_the_component() {
        let p = LabPaths::new(Path::new("/x")).expect("abs");
        assert_eq!(
            p.log_file(Component::KubeApiserver),
            Path::new("/x/logs/kube-apiserver.log")
        );
        assert_eq!(p.pid_file(Component::Kwok), Path::new("/x/run/kwok.pid"));
    }
}
