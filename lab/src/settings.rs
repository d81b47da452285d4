//! The settings a lab hands to the provider, its tests and the user's shell.
//!
//! `gpufleet-lab up` (and `gpufleet-lab env`) print them to stdout as `export NAME='value'`
//! lines, ready for `eval "$(gpufleet-lab env)"`; everything else the CLI says goes to
//! stderr. Emulators added to the lab later (BCM, Netris) append their settings here.

use std::path::Path;

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

/// The settings of the lab whose admin kubeconfig is `kubeconfig`.
#[must_use]
pub fn settings(kubeconfig: &Path) -> Vec<Setting> {
    let kubeconfig = kubeconfig.display().to_string();
    vec![
        Setting {
            name: "KUBECONFIG",
            value: kubeconfig.clone(),
            help: "kubectl and other Kubernetes clients",
        },
        Setting {
            name: "GPUFLEET_KUBE_CONFIG_PATH",
            value: kubeconfig,
            help: "the gpufleet provider's kube.config_path",
        },
    ]
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
        let s = settings(Path::new("/tmp/it's a lab/kubeconfig"));
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
            "/tmp/it's a lab/kubeconfig|/tmp/it's a lab/kubeconfig"
        );
    }
}
