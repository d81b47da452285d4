//! The settings a lab hands to the provider, its tests and the user's shell.
//!
//! `gpufleet-lab up` (and `gpufleet-lab env`) print them to stdout as `export NAME='value'`
//! lines, ready for `eval "$(gpufleet-lab env)"`; everything else the CLI says goes to
//! stderr. Emulators added to the lab later (BCM, Netris) append their settings here.

use std::path::Path;

use crate::components::{NETRIS_PASSWORD, NETRIS_USER};
use crate::paths::LabPaths;
use crate::ports::Ports;

/// One environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Variable name.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it is for.
    pub help: &'static str,
}

/// The settings of the lab whose admin kubeconfig is `kubeconfig`, and whose provider's
/// ServiceAccount has `provider_kubeconfig`.
#[must_use]
pub fn settings(kubeconfig: &Path, provider_kubeconfig: &Path) -> Vec<Setting> {
    vec![
        Setting {
            name: "KUBECONFIG",
            value: kubeconfig.display().to_string(),
            help: "kubectl and other Kubernetes clients (the lab's admin)",
        },
        Setting {
            name: "GPUFLEET_KUBE_CONFIG_PATH",
            value: provider_kubeconfig.display().to_string(),
            help: "the gpufleet provider's kubernetes.config_path (its ServiceAccount, bound to deploy/rbac/clusterrole.yaml)",
        },
    ]
}

/// The settings of the Netris emulator at `endpoint` whose CA certificate is `ca_file`.
#[must_use]
pub fn netris_settings(endpoint: &str, ca_file: &Path) -> Vec<Setting> {
    vec![
        Setting {
            name: "GPUFLEET_NETRIS_ENDPOINT",
            value: endpoint.to_owned(),
            help: "the gpufleet provider's netris.endpoint (the lab's Netris emulator)",
        },
        Setting {
            name: "GPUFLEET_NETRIS_USERNAME",
            value: NETRIS_USER.to_owned(),
            help: "the gpufleet provider's netris.username",
        },
        Setting {
            name: "GPUFLEET_NETRIS_PASSWORD",
            value: NETRIS_PASSWORD.to_owned(),
            help: "the gpufleet provider's netris.password",
        },
        Setting {
            name: "GPUFLEET_NETRIS_CA_CERTIFICATE",
            value: ca_file.display().to_string(),
            help: "the gpufleet provider's netris.ca_certificate (the emulator's CA, PEM file)",
        },
    ]
}

/// The settings of the BCM emulator at `endpoint`: the admin profile's client
/// certificate and key, and the CA that signed the emulator's certificate (file paths).
#[must_use]
pub fn bcm_settings(endpoint: &str, cert: &Path, key: &Path, ca_file: &Path) -> Vec<Setting> {
    vec![
        Setting {
            name: "GPUFLEET_BCM_ENDPOINT",
            value: endpoint.to_owned(),
            help: "the gpufleet provider's bcm.endpoint (the lab's BCM emulator)",
        },
        Setting {
            name: "GPUFLEET_BCM_CLIENT_CERTIFICATE",
            value: cert.display().to_string(),
            help: "the gpufleet provider's bcm.client_certificate (admin profile, PEM file)",
        },
        Setting {
            name: "GPUFLEET_BCM_CLIENT_KEY",
            value: key.display().to_string(),
            help: "the gpufleet provider's bcm.client_key (PEM file)",
        },
        Setting {
            name: "GPUFLEET_BCM_CA_CERTIFICATE",
            value: ca_file.display().to_string(),
            help: "the gpufleet provider's bcm.ca_certificate (the lab CA, PEM file)",
        },
    ]
}

/// Every setting of the lab at `paths` on `ports`: Kubernetes, and the Netris and BCM
/// emulators when the lab has ports for them.
#[must_use]
pub fn lab_settings(paths: &LabPaths, ports: &Ports) -> Vec<Setting> {
    let mut all = settings(&paths.kubeconfig(), &paths.provider_kubeconfig());
    if ports.netris != 0 {
        all.extend(netris_settings(
            &format!("https://127.0.0.1:{}", ports.netris),
            &paths.netris_ca(),
        ));
    }
    if ports.bcm != 0 {
        let pki = crate::pki::Pki::new(&paths.pki());
        let (stem, _) = crate::pki::BCM_CLIENTS[0];
        all.extend(bcm_settings(
            &format!("https://127.0.0.1:{}", ports.bcm),
            &pki.cert(stem),
            &pki.key(stem),
            &pki.ca_cert(),
        ));
    }
    all
}

/// Shell `export` lines, with a comment before each.
#[must_use]
pub fn render_exports(settings: &[Setting]) -> String {
    settings
        .iter()
        .map(|s| {
            format!(
                "# {}\nexport {}={}\n",
                s.help,
                s.name,
                shell_quote(&s.value)
            )
        })
        .collect()
}

/// Single-quotes a value for POSIX shells.
#[must_use]
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_survive_a_shell() {
        let s = settings(
            Path::new("/tmp/it's a lab/kubeconfig"),
            Path::new("/tmp/it's a lab/provider.kubeconfig"),
        );
        let script = format!(
            "{}printf '%s|%s' \"$KUBECONFIG\" \"$GPUFLEET_KUBE_CONFIG_PATH\"",
            render_exports(&s)
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/tmp/it's a lab/kubeconfig|/tmp/it's a lab/provider.kubeconfig"
        );
    }

    #[test]
    fn a_lab_with_netris_adds_its_settings() {
        let paths = LabPaths::new(Path::new("/tmp/lab")).expect("paths");
        let mut ports = Ports::allocate().expect("ports");
        let names = |s: Vec<Setting>| s.into_iter().map(|s| s.name).collect::<Vec<_>>();
        let all = lab_settings(&paths, &ports);
        assert!(all.iter().any(|s| s.name == "GPUFLEET_NETRIS_ENDPOINT"
            && s.value == format!("https://127.0.0.1:{}", ports.netris)));
        assert!(
            all.iter()
                .any(|s| s.name == "GPUFLEET_NETRIS_CA_CERTIFICATE"
                    && s.value == "/tmp/lab/netris/netris-ca.pem")
        );
        assert!(
            all.iter()
                .any(|s| s.name == "GPUFLEET_BCM_CLIENT_CERTIFICATE"
                    && s.value == "/tmp/lab/pki/bcm-admin.crt")
        );
        ports.netris = 0;
        ports.bcm = 0;
        assert_eq!(
            names(lab_settings(&paths, &ports)),
            ["KUBECONFIG", "GPUFLEET_KUBE_CONFIG_PATH"]
        );
    }
}
