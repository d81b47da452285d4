//! A lab: starting (or adopting) one in a state directory, the shared one of the tests,
//! stopping it, and what it reports.

mod lifecycle;
mod options;

use std::path::{Path, PathBuf};

use crate::crypto::install_crypto_provider;
use crate::error::LabError;
use crate::fleet::Fleet;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::settings::Setting;
use crate::{kubeconfig, pki, rest, settings};

pub use self::options::{LabOptions, LabState, UpReport};

/// A running lab.
#[derive(Debug, Clone)]
pub struct Lab {
    paths: LabPaths,
    ports: Ports,
    fleet: Fleet,
    kube_config: kube::Config,
    report: UpReport,
}

impl Lab {
    /// A kube client configuration for the admin user (TLS verified against the lab CA).
    #[must_use]
    pub fn kube_config(&self) -> kube::Config {
        self.kube_config.clone()
    }

    /// A new admin client. Call it inside the tokio runtime that will use it (each
    /// `#[tokio::test]` has a runtime of its own, so take a client per test).
    ///
    /// # Panics
    /// When no client can be built from the configuration that worked during `up`,
    /// or when called outside a tokio runtime.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        match self.try_client() {
            Ok(client) => client,
            Err(e) => panic!("{e}"),
        }
    }

    /// A new admin client.
    ///
    /// # Errors
    /// When the client cannot be built.
    pub fn try_client(&self) -> Result<kube::Client, LabError> {
        install_crypto_provider();
        kube::Client::try_from(self.kube_config()).map_err(LabError::Client)
    }

    /// Labels, taints and cordon of every node, by name: what tests compare before and after
    /// to show that every node was left as it was found.
    ///
    /// # Errors
    /// When the API server cannot be reached or the nodes cannot be listed.
    pub fn node_marks(
        &self,
    ) -> Result<std::collections::BTreeMap<String, String>, rest::RestError> {
        rest::KubeRest::from_kubeconfig(&self.kubeconfig_path())?.node_marks()
    }

    /// The admin kubeconfig (certificates embedded): for kubectl, Terraform and tests.
    #[must_use]
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.paths.kubeconfig()
    }

    /// `kubectl` of the same Kubernetes release as the lab's control plane: a link named
    /// `kubectl` (in `<lab>/bin/`) to the multi-call `gpufleet-kube` the lab runs, which
    /// acts as kubectl when called by that name. Give it `--kubeconfig`.
    ///
    /// # Errors
    /// When the lab's state names no binary, or the link cannot be made.
    pub fn kubectl(&self) -> Result<PathBuf, LabError> {
        let state = LabState::load(&self.paths).ok_or_else(|| LabError::StateDir {
            path: self.paths.root().to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the lab's state names no gpufleet-kube",
            ),
        })?;
        let dir = self.paths.root().join("bin");
        let link = dir.join("kubectl");
        let io = |source| LabError::StateDir {
            path: link.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        if std::fs::read_link(&link).ok().as_deref() != Some(state.kube_bin.as_path()) {
            // A fresh link under a temporary name, renamed over the old one: tests of
            // several binaries may ask at once.
            let tmp = dir.join(format!(".kubectl.{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            std::os::unix::fs::symlink(&state.kube_bin, &tmp).map_err(io)?;
            std::fs::rename(&tmp, &link).map_err(io)?;
        }
        Ok(link)
    }

    /// The fleet the lab runs.
    #[must_use]
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// The lab's state directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.paths.root()
    }

    /// The lab's paths.
    #[must_use]
    pub fn paths(&self) -> &LabPaths {
        &self.paths
    }

    /// The lab's ports.
    #[must_use]
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The API server's URL.
    #[must_use]
    pub fn server_url(&self) -> String {
        kubeconfig::server_url(self.ports.apiserver)
    }

    /// How long `up` took, step by step.
    #[must_use]
    pub fn report(&self) -> UpReport {
        self.report
    }

    /// The settings for the provider and clients ([`settings::lab_settings`]).
    #[must_use]
    pub fn settings(&self) -> Vec<Setting> {
        settings::lab_settings(&self.paths, &self.ports)
    }

    /// The Netris emulator's base URL (`https://127.0.0.1:<port>`; its admin plane is
    /// under `/_admin/`, its CA in [`LabPaths::netris_ca`]).
    #[must_use]
    pub fn netris_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.netris)
    }

    /// The BCM emulator's base URL (`https://127.0.0.1:<port>`; its JSON API is
    /// `POST /json`, its admin plane under `/_admin/`, its CA [`Lab::bcm_ca`]).
    #[must_use]
    pub fn bcm_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.bcm)
    }

    /// The BCM emulator's admin-profile client certificate and key (PEM files).
    #[must_use]
    pub fn bcm_admin_identity(&self) -> (PathBuf, PathBuf) {
        let pki = Pki::new(&self.paths.pki());
        let (stem, _) = pki::BCM_CLIENTS[0];
        (pki.cert(stem), pki.key(stem))
    }

    /// The BCM emulator's read-only-profile client certificate and key (PEM files).
    #[must_use]
    pub fn bcm_readonly_identity(&self) -> (PathBuf, PathBuf) {
        let pki = Pki::new(&self.paths.pki());
        let (stem, _) = pki::BCM_CLIENTS[1];
        (pki.cert(stem), pki.key(stem))
    }

    /// The CA that signed the BCM emulator's certificate and its client certificates
    /// (the lab CA, PEM file).
    #[must_use]
    pub fn bcm_ca(&self) -> PathBuf {
        Pki::new(&self.paths.pki()).ca_cert()
    }

    /// The settings as environment variables: `KUBECONFIG`, `GPUFLEET_KUBE_CONFIG_PATH`,
    /// `GPUFLEET_NETRIS_ENDPOINT`, `GPUFLEET_NETRIS_USERNAME`, `GPUFLEET_NETRIS_PASSWORD`,
    /// `GPUFLEET_NETRIS_CA_CERTIFICATE` (the path of the emulator's CA),
    /// `GPUFLEET_BCM_ENDPOINT`, `GPUFLEET_BCM_CLIENT_CERTIFICATE`, `GPUFLEET_BCM_CLIENT_KEY`
    /// and `GPUFLEET_BCM_CA_CERTIFICATE` (paths). Set them on a `Command` that runs
    /// Terraform.
    #[must_use]
    pub fn settings_env(&self) -> Vec<(String, String)> {
        self.settings()
            .into_iter()
            .map(|s| (s.name.to_owned(), s.value))
            .collect()
    }
}
