//! The provider block: its schema, and its resolution against `GPUFLEET_*` variables.
//!
//! Nothing connects here. A backend block that is set is checked when the provider is
//! configured, and what is wrong with it is kept and reported on the resources and data
//! sources that need that backend when they are planned ([`ProviderSettings::check_needed`]).
//! So a configuration that uses only the GPU catalog needs no settings at all, a broken `bcm`
//! block fails the plan of a `gpufleet_bcm_node` rather than its apply, and a block whose values
//! are unknown at plan time (a host cluster created in the same run) does not fail plan.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::{
    backends::kube::host::ReadCache,
    diag::Diagnostics,
    gpu_products::{self, Declared},
    path::AttrPath,
    schema::{Attribute, Block, NestedBlock, Schema},
    value::{Type, Value},
};

/// One setting of a backend block: the attribute, the variable that can supply it, and whether
/// it is secret.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Attribute name inside the block.
    pub name: &'static str,
    /// Environment variable read when the attribute is not set.
    pub env: &'static str,
    /// Never logged or shown.
    pub sensitive: bool,
    /// Markdown description.
    pub description: &'static str,
}

const fn setting(name: &'static str, env: &'static str, description: &'static str) -> Setting {
    Setting {
        name,
        env,
        sensitive: false,
        description,
    }
}

const fn secret(name: &'static str, env: &'static str, description: &'static str) -> Setting {
    Setting {
        name,
        env,
        sensitive: true,
        description,
    }
}

/// The provider block that reaches the host cluster.
pub const KUBERNETES_BLOCK: &str = "kubernetes";

/// The backend blocks of the provider, each with its settings.
pub const BACKENDS: &[(&str, &str, &[Setting])] = &[
    (
        KUBERNETES_BLOCK,
        "The host cluster that runs virtual control planes and GPU nodes. Without this block, `KUBECONFIG` or `~/.kube/config` is used.",
        &[
            setting(
                "config_path",
                "GPUFLEET_KUBE_CONFIG_PATH",
                "Path to a kubeconfig file. Defaults to `KUBECONFIG`, then `~/.kube/config`.",
            ),
            setting(
                "context",
                "GPUFLEET_KUBE_CONTEXT",
                "Context in the kubeconfig to use. Defaults to its current context.",
            ),
            setting(
                "host",
                "GPUFLEET_KUBE_HOST",
                "API server URL, instead of a kubeconfig.",
            ),
            setting(
                "cluster_ca_certificate",
                "GPUFLEET_KUBE_CLUSTER_CA_CERTIFICATE",
                "PEM CA bundle that the API server's certificate is verified against: the PEM text itself (`file(\"ca.pem\")`), not a path.",
            ),
            secret(
                "token",
                "GPUFLEET_KUBE_TOKEN",
                "Bearer token for the API server.",
            ),
            setting(
                "client_certificate",
                "GPUFLEET_KUBE_CLIENT_CERTIFICATE",
                "PEM client certificate for the API server: the PEM text itself, not a path.",
            ),
            secret(
                "client_key",
                "GPUFLEET_KUBE_CLIENT_KEY",
                "PEM private key of `client_certificate`: the PEM text itself, not a path.",
            ),
            setting(
                "device_plugin_namespace",
                "GPUFLEET_KUBE_DEVICE_PLUGIN_NAMESPACE",
                "Namespace of the NVIDIA device plugin, where time-slicing pools write their config (ConfigMap `gpufleet-device-plugin-config`). Defaults to the namespace the GPU Operator reports in its ClusterPolicy (`status.namespace`); must match it when both are known. Needed for a device plugin deployed without the GPU Operator.",
            ),
            setting(
                DEFAULT_MIG_CONFIG,
                "GPUFLEET_KUBE_DEFAULT_MIG_CONFIG",
                "The MIG config (`nvidia.com/mig.config`, a name of the MIG manager's mig-parted config) a MIG node gets back when a pool lets it go: destroy, scale-in, replacement. The node counts as free only once the MIG manager reports `nvidia.com/mig.config.state=success` for it. Defaults to `all-disabled` (whole GPUs).",
            ),
        ],
    ),
    (
        "bcm",
        "NVIDIA Base Command Manager head node (cmdaemon JSON API). Needed by `gpufleet_bcm_node`, `gpufleet_bcm_nodes` and pools with `source = \"bcm\"`.",
        &[
            setting(
                "endpoint",
                "GPUFLEET_BCM_ENDPOINT",
                "Base URL of the head node, e.g. `https://bcm-head:8081`.",
            ),
            setting(
                "client_certificate",
                "GPUFLEET_BCM_CLIENT_CERTIFICATE",
                "PEM client certificate of a BCM profile: the PEM text, or the path of a file that holds it.",
            ),
            secret(
                "client_key",
                "GPUFLEET_BCM_CLIENT_KEY",
                "PEM private key of `client_certificate`: the PEM text, or the path of a file that holds it.",
            ),
            setting(
                "ca_certificate",
                "GPUFLEET_BCM_CA_CERTIFICATE",
                "PEM CA that the head node's certificate is verified against: the PEM text, or the path of a file that holds it.",
            ),
            setting(
                "username",
                "GPUFLEET_BCM_USERNAME",
                "User for password login, instead of a client certificate.",
            ),
            secret(
                "password",
                "GPUFLEET_BCM_PASSWORD",
                "Password of `username`.",
            ),
        ],
    ),
    (
        "netris",
        "Netris-style network controller. Needed by `gpufleet_network_segment`.",
        &[
            setting(
                "endpoint",
                "GPUFLEET_NETRIS_ENDPOINT",
                "Base URL of the controller, e.g. `https://netris.example`.",
            ),
            setting("username", "GPUFLEET_NETRIS_USERNAME", "Controller user."),
            secret(
                "password",
                "GPUFLEET_NETRIS_PASSWORD",
                "Password of `username`.",
            ),
            setting(
                "ca_certificate",
                "GPUFLEET_NETRIS_CA_CERTIFICATE",
                "PEM CA that the controller's certificate is verified against: the PEM text, or the path of a file that holds it. Defaults to the system roots.",
            ),
        ],
    ),
];

/// The provider block's schema.
pub fn schema() -> Schema {
    let mut block = Block::new(
        "The gpufleet provider turns a shared GPU fleet into a governed multi-tenant service. \
         Every setting can also come from a `GPUFLEET_*` environment variable.",
    );
    for (name, description, settings) in BACKENDS {
        let mut inner = Block::new(description);
        for s in *settings {
            let mut a = Attribute::optional(s.name, Type::String).describe(s.description);
            if s.sensitive {
                a = a.sensitive();
            }
            inner = inner.attr(a);
        }
        block = block.block(NestedBlock::single(name, inner));
    }
    block = block.block(gpu_products::provider_block());
    Schema::new(block)
}

/// The `kubernetes` setting naming the MIG config released nodes get back.
pub const DEFAULT_MIG_CONFIG: &str = "default_mig_config";

/// The MIG config released nodes get back when the provider names none: MIG off.
pub const FALLBACK_MIG_CONFIG: &str = "all-disabled";

/// Why a [`DEFAULT_MIG_CONFIG`] value cannot be a MIG config name, if it cannot: it is
/// written as the value of the node label `nvidia.com/mig.config`.
pub fn mig_config_name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| {
        format!(
            "{name:?} cannot be a MIG config name: it becomes the value of the node label \
             nvidia.com/mig.config, so it needs 1 to 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit (for example {FALLBACK_MIG_CONFIG})."
        )
    })
}

/// The provider block's offline checks beyond its attribute validators.
pub fn check(config: &Value) -> Diagnostics {
    let mut d = gpu_products::check(config.get(gpu_products::BLOCK));
    if let Some(name) = config.get("kubernetes").get(DEFAULT_MIG_CONFIG).as_str()
        && let Some(problem) = mig_config_name_problem(name)
    {
        d.error_at(
            AttrPath::attr("kubernetes").push_attr(DEFAULT_MIG_CONFIG),
            "Invalid Default MIG Config",
            problem,
        );
    }
    d
}

/// A setting's resolved value.
#[derive(Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Set in the block or the environment.
    Known(String),
    /// Set in the block to a value Terraform does not know yet.
    Unknown,
}

impl std::fmt::Debug for Resolved {
    /// Never prints the value: settings may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resolved::Known(_) => f.write_str("Known(..)"),
            Resolved::Unknown => f.write_str("Unknown"),
        }
    }
}

/// The provider configuration after merging the block with the environment.
#[derive(Debug, Clone, Default)]
pub struct ProviderSettings {
    /// `block name -> setting name -> value`; absent settings are not in the map.
    pub values: BTreeMap<&'static str, BTreeMap<&'static str, Resolved>>,
    /// The Terraform version that configured the provider.
    pub terraform_version: String,
    /// GPU products the provider block declares beside the catalog.
    pub gpu_products: Declared,
    /// What is wrong with each backend block that is set, found when the provider was
    /// configured; reported by [`ProviderSettings::check_needed`].
    pub problems: BTreeMap<&'static str, Diagnostics>,
    /// Which configuration of this process these settings come from: a number no other
    /// [`ProviderSettings::resolve`] in the process gives. What is kept for one run (one plan
    /// or apply) is kept per configuration, so a provider that serves several runs
    /// (`-debug`, reattached) starts each afresh.
    pub configuration: u64,
    /// The host-cluster lists this configuration's refreshes and plans share: every
    /// operation of the run holds these settings, so each reads and drops the same lists.
    pub host_reads: Arc<ReadCache>,
}

impl ProviderSettings {
    /// Resolves a provider configuration value against an environment lookup.
    pub fn resolve(config: &Value, env: impl Fn(&str) -> Option<String>) -> ProviderSettings {
        let mut values = BTreeMap::new();
        for (block, _, settings) in BACKENDS {
            let body = config.get(block);
            let mut resolved = BTreeMap::new();
            for s in *settings {
                let v = match body.get(s.name) {
                    Value::Unknown(_) => Some(Resolved::Unknown),
                    Value::String(v) => Some(Resolved::Known(v.clone())),
                    _ if body.is_unknown() => Some(Resolved::Unknown),
                    _ => env(s.env).filter(|v| !v.is_empty()).map(Resolved::Known),
                };
                if let Some(v) = v {
                    resolved.insert(s.name, v);
                }
            }
            values.insert(*block, resolved);
        }
        static CONFIGURATIONS: AtomicU64 = AtomicU64::new(1);
        ProviderSettings {
            values,
            terraform_version: String::new(),
            gpu_products: Declared::from_config(config.get(gpu_products::BLOCK)),
            problems: BTreeMap::new(),
            configuration: CONFIGURATIONS.fetch_add(1, Ordering::Relaxed),
            host_reads: Arc::default(),
        }
    }

    /// Whether a block has at least one known setting (from the block or the environment).
    /// A block that is not set at all is not checked when the provider is configured: it is
    /// an error only for what needs it, when that connects.
    pub fn is_configured(&self, block: &str) -> bool {
        self.values
            .get(block)
            .is_some_and(|m| m.values().any(|v| matches!(v, Resolved::Known(_))))
    }

    /// The problems found at configure time with the backend blocks that `type_name` needs for
    /// this configuration, as errors that say which block and what is wrong with it.
    pub fn check_needed(&self, type_name: &str, config: &Value) -> Diagnostics {
        let mut diags = Diagnostics::new();
        for block in backends_needed(type_name, config) {
            let Some(problems) = self.problems.get(block) else {
                continue;
            };
            for p in &problems.0 {
                let mut p = p.clone();
                p.detail = format!(
                    "{type_name} needs the provider's `{block}` block, which cannot be used: {}",
                    p.detail
                );
                diags.push(p);
            }
        }
        diags
    }

    /// A setting's value, if known.
    pub fn get(&self, block: &str, name: &str) -> Option<&str> {
        match self.values.get(block)?.get(name)? {
            Resolved::Known(v) => Some(v),
            Resolved::Unknown => None,
        }
    }

    /// Whether any setting of a block is unknown (configuration depends on other resources).
    pub fn is_pending(&self, block: &str) -> bool {
        self.values
            .get(block)
            .is_some_and(|m| m.values().any(|v| *v == Resolved::Unknown))
    }

    /// Checks that a block has what a resource needs, saying which attribute or variable to set.
    pub fn require(
        &self,
        block: &'static str,
        names: &[&'static str],
        needed_by: &str,
    ) -> Diagnostics {
        let mut diags = Diagnostics::new();
        for name in names {
            if self.get(block, name).is_none() && !self.is_pending(block) {
                let env = BACKENDS
                    .iter()
                    .find(|(b, _, _)| *b == block)
                    .and_then(|(_, _, ss)| ss.iter().find(|s| s.name == *name))
                    .map_or("", |s| s.env);
                diags.error_at(
                    AttrPath::root(),
                    format!("Missing Provider Setting {block}.{name}"),
                    format!(
                        "{needed_by} needs the provider's `{block}` block. Set `{name}` in the \
                         `{block}` block of the provider configuration, or the environment \
                         variable {env}."
                    ),
                );
            }
        }
        diags
    }
}

/// The backend blocks a resource or data source type needs for a configuration. A node pool
/// needs `bcm` only when its nodes come from BCM.
pub fn backends_needed(type_name: &str, config: &Value) -> Vec<&'static str> {
    match type_name {
        "gpufleet_bcm_node"
        | "gpufleet_bcm_nodes"
        | "gpufleet_bcm_node_power"
        | "gpufleet_bcm_node_reprovision" => vec!["bcm"],
        "gpufleet_network_segment" => vec!["netris"],
        "gpufleet_gpu_node_pool" if config.get("source").as_str() == Some("bcm") => {
            vec!["kubernetes", "bcm"]
        }
        "gpufleet_gpu_node_pool"
        | "gpufleet_gpu_node_pool_drain"
        | "gpufleet_virtual_cluster"
        | "gpufleet_benchmark"
        | "gpufleet_benchmark_run"
        | "gpufleet_fleet_inventory"
        | "gpufleet_host_preflight" => vec!["kubernetes"],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_mig_config_must_be_a_label_value() {
        let with = |name: &str| {
            check(&Value::object([(
                "kubernetes",
                Value::object([(DEFAULT_MIG_CONFIG, Value::string(name))]),
            )]))
        };
        assert!(!with("all-disabled").has_error());
        assert!(!with("custom-1g.10gb").has_error());
        let d = with("all disabled");
        assert!(d.has_error());
        let text = format!("{d:?}");
        assert!(text.contains(DEFAULT_MIG_CONFIG), "{text}");
        assert!(mig_config_name_problem("-x").is_some());
        assert!(mig_config_name_problem("").is_some());
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn block_wins_over_environment() {
        let config = Value::object([(
            "netris",
            Value::object([("endpoint", Value::string("https://from-block"))]),
        )]);
        let s = ProviderSettings::resolve(
            &config,
            env(&[
                ("GPUFLEET_NETRIS_ENDPOINT", "https://from-env"),
                ("GPUFLEET_NETRIS_USERNAME", "admin"),
            ]),
        );
        assert_eq!(s.get("netris", "endpoint"), Some("https://from-block"));
        assert_eq!(s.get("netris", "username"), Some("admin"));
    }

    #[test]
    fn unknown_block_is_pending_not_missing() {
        let config = Value::object([("bcm", Value::unknown())]);
        let s = ProviderSettings::resolve(&config, env(&[]));
        assert!(s.is_pending("bcm"));
        assert!(
            !s.require("bcm", &["endpoint"], "gpufleet_bcm_node")
                .has_error()
        );
    }

    #[test]
    fn missing_setting_names_block_and_variable() {
        let s = ProviderSettings::resolve(&Value::Null, env(&[]));
        let d = s.require("netris", &["endpoint"], "gpufleet_network_segment");
        let detail = &d.0[0].detail;
        assert!(detail.contains("`netris` block"), "{detail}");
        assert!(detail.contains("GPUFLEET_NETRIS_ENDPOINT"), "{detail}");
    }

    #[test]
    fn debug_never_shows_secrets() {
        let config = Value::object([(
            "netris",
            Value::object([("password", Value::string("hunter2"))]),
        )]);
        let s = ProviderSettings::resolve(&config, env(&[]));
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
