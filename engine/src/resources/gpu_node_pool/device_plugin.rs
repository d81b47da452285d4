//! Time-slicing as the NVIDIA device plugin consumes it: the config a pool writes, the
//! namespace it goes in, and the GPU Operator's ClusterPolicy that makes the device plugin
//! read it.
//!
//! Each time-slicing pool writes its config under its own key of the ConfigMap
//! [`CONFIG_MAP`] and labels its nodes `nvidia.com/device-plugin.config=<key>`; the device
//! plugin's config manager follows the label. The ConfigMap has to be in the namespace the
//! device plugin runs in, and the device plugin has to be told its name:
//!
//! - **Namespace.** The GPU Operator records where it is installed in its ClusterPolicy's
//!   `status.namespace`; that is used. The provider setting `kubernetes.device_plugin_namespace`
//!   names it explicitly, for a device plugin deployed without the operator, or before the
//!   operator has reported; when both are known they must agree.
//! - **ClusterPolicy.** `spec.devicePlugin.config.name` is set to [`CONFIG_MAP`] when unset
//!   (server-side apply of that one field, not forced, so a value another manager holds is
//!   never overwritten), left alone when it already names it, and an error when it names
//!   another ConfigMap. It is left set when the last pool goes: nodes without the label get
//!   the device plugin's defaults, as before.
//! - **No ClusterPolicy** (no GPU Operator, or a plain device plugin install): with the
//!   namespace set, the config is written and a warning says that the device plugin must be
//!   deployed with `config.name` naming the ConfigMap; without it, the apply fails saying so.

use serde_json::Value as Json;

use crate::{
    backends::kube::host::nodes::{HostError, HostNodes},
    diag::{Diagnostic, Diagnostics},
    path::AttrPath,
};

/// Name of the ConfigMap time-slicing pools write their keys into.
pub const CONFIG_MAP: &str = "gpufleet-device-plugin-config";

/// The setting of the provider's `kubernetes` block that names the device plugin's namespace.
pub const NAMESPACE_SETTING: &str = "device_plugin_namespace";

/// The namespace the GPU Operator is installed in by its documented Helm command; only used
/// in messages.
const USUAL_NAMESPACE: &str = "gpu-operator";

/// The device plugin's config for time-slicing with `replicas`, in the `v1` format of
/// `github.com/NVIDIA/k8s-device-plugin/api/config/v1`.
pub fn time_slicing_config(replicas: u32) -> String {
    format!(
        "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    \
         renameByDefault: false\n    failRequestsGreaterThanOne: false\n    resources:\n    \
         - name: nvidia.com/gpu\n      replicas: {replicas}\n"
    )
}

/// The replicas of a config [`time_slicing_config`] wrote.
pub fn replicas_in(config: &str) -> Option<i64> {
    config
        .lines()
        .find_map(|l| l.trim().strip_prefix("replicas:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The parts of a GPU Operator ClusterPolicy (`nvidia.com/v1`) a pool reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterPolicy {
    /// `metadata.name`.
    pub name: String,
    /// `status.state`: `ready`, `notReady`, `ignored` (the operator acts on one ClusterPolicy
    /// and ignores the others), or empty before the operator has looked at it.
    pub state: String,
    /// `status.namespace`: where the operator is installed; empty until it reports.
    pub namespace: String,
    /// `spec.devicePlugin.config.name`.
    pub config_name: String,
    /// `spec.devicePlugin.config.default`.
    pub config_default: String,
}

impl ClusterPolicy {
    /// Decodes a ClusterPolicy object; missing fields read as empty.
    pub fn from_json(o: &Json) -> ClusterPolicy {
        let text = |v: &Json| v.as_str().unwrap_or_default().to_owned();
        let config = &o["spec"]["devicePlugin"]["config"];
        ClusterPolicy {
            name: text(&o["metadata"]["name"]),
            state: text(&o["status"]["state"]),
            namespace: text(&o["status"]["namespace"]),
            config_name: text(&config["name"]),
            config_default: text(&config["default"]),
        }
    }
}

/// Where a pool's time-slicing config goes, and how the device plugin learns of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigHome {
    /// Namespace of [`CONFIG_MAP`].
    pub namespace: String,
    /// The ClusterPolicy the GPU Operator acts on; `None` without the operator.
    pub policy: Option<ClusterPolicy>,
}

impl ConfigHome {
    /// What the user must do by hand, when the device plugin is not deployed by the GPU
    /// Operator (so nothing gpufleet writes tells it to read the ConfigMap).
    pub fn warning(&self) -> Option<String> {
        self.policy.is_none().then(|| {
            format!(
                "the cluster has no NVIDIA GPU Operator ClusterPolicy (nvidia.com/v1), so \
                 gpufleet wrote the time-slicing config to ConfigMap {ns}/{CONFIG_MAP} but \
                 cannot tell the device plugin to read it. Deploy the NVIDIA device plugin in \
                 {ns} with its Helm value config.name={CONFIG_MAP} (its config manager then \
                 follows the node label nvidia.com/device-plugin.config); until then the \
                 pool's nodes advertise whole GPUs.",
                ns = self.namespace
            )
        })
    }
}

/// Why time-slicing cannot be set up on this cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DevicePluginError {
    /// A host-cluster call failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// No ClusterPolicy, and no namespace set.
    #[error(
        "time-slicing needs the NVIDIA device plugin, but the cluster has no GPU Operator \
         (no ClusterPolicy of nvidia.com/v1) and the provider setting \
         kubernetes.{NAMESPACE_SETTING} (GPUFLEET_KUBE_DEVICE_PLUGIN_NAMESPACE) is not set. \
         Install the GPU Operator, or, for a device plugin deployed on its own, set \
         {NAMESPACE_SETTING} to its namespace and deploy it with the Helm value \
         config.name={CONFIG_MAP}."
    )]
    NoOperator,
    /// The operator has not said where it runs, and no namespace is set.
    #[error(
        "the GPU Operator has not reported its namespace yet (status.namespace of \
         ClusterPolicy {policy} is empty; is the operator running?). Apply again once it has \
         reconciled, or set the provider setting kubernetes.{NAMESPACE_SETTING} to the \
         operator's namespace (usually {USUAL_NAMESPACE})."
    )]
    NamespaceUnknown {
        /// The ClusterPolicy.
        policy: String,
    },
    /// The setting names another namespace than the operator's.
    #[error(
        "the provider setting kubernetes.{NAMESPACE_SETTING} is {setting:?}, but the GPU \
         Operator runs in {operator:?} (status.namespace of ClusterPolicy {policy}) and its \
         device plugin reads ConfigMaps there only. Set {NAMESPACE_SETTING} to {operator:?} \
         or leave it out."
    )]
    NamespaceMismatch {
        /// The ClusterPolicy.
        policy: String,
        /// The operator's namespace.
        operator: String,
        /// The setting.
        setting: String,
    },
    /// Several ClusterPolicies, none of them marked as the one the operator acts on.
    #[error(
        "the cluster has several GPU Operator ClusterPolicies ({names}) and none is marked as \
         the one the operator acts on; the operator supports one. Delete the extra ones."
    )]
    SeveralPolicies {
        /// Their names, comma-separated.
        names: String,
    },
    /// The ClusterPolicy points the device plugin at another ConfigMap.
    #[error(
        "ClusterPolicy {policy} points the device plugin at ConfigMap {other:?} \
         (spec.devicePlugin.config.name), so it would never read the time-slicing configs \
         gpufleet writes to {namespace}/{CONFIG_MAP}. gpufleet does not take the field over. \
         Move the configurations of {other:?} into {CONFIG_MAP} as keys of their own (set \
         spec.devicePlugin.config.default to the key nodes without a label should use) and \
         point the ClusterPolicy at it: kubectl patch clusterpolicies.nvidia.com/{policy} \
         --type merge -p '{{\"spec\":{{\"devicePlugin\":{{\"config\":{{\"name\":\"{CONFIG_MAP}\"}}}}}}}}'"
    )]
    OtherConfigMap {
        /// The ClusterPolicy.
        policy: String,
        /// The ConfigMap it names.
        other: String,
        /// The namespace of gpufleet's ConfigMap.
        namespace: String,
    },
    /// The ClusterPolicy has a default config key but no ConfigMap.
    #[error(
        "ClusterPolicy {policy} sets spec.devicePlugin.config.default to {default:?} without \
         a ConfigMap. Pointing it at {CONFIG_MAP}, which has no key {default:?}, would leave \
         every GPU node without a gpufleet label with a config its device plugin cannot \
         find. Remove spec.devicePlugin.config.default, or add the key {default:?} to \
         ConfigMap {namespace}/{CONFIG_MAP} and set spec.devicePlugin.config.name to \
         {CONFIG_MAP} yourself."
    )]
    DefaultWithoutConfigMap {
        /// The ClusterPolicy.
        policy: String,
        /// Its default key.
        default: String,
        /// The namespace of gpufleet's ConfigMap.
        namespace: String,
    },
}

/// The ClusterPolicy the operator acts on, if any: the only one, or the only one not
/// `ignored`.
fn active_policy(policies: Vec<ClusterPolicy>) -> Result<Option<ClusterPolicy>, DevicePluginError> {
    let mut active: Vec<ClusterPolicy> = policies
        .into_iter()
        .filter(|p| p.state != "ignored")
        .collect();
    match active.len() {
        0 => Ok(None),
        1 => Ok(active.pop()),
        _ => Err(DevicePluginError::SeveralPolicies {
            names: active
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Decides the config's home from the cluster's ClusterPolicies (`None`: no such kind) and the
/// provider setting. Pure, so every combination is tested without a cluster.
pub fn decide(
    policies: Option<Vec<ClusterPolicy>>,
    setting: Option<&str>,
) -> Result<ConfigHome, DevicePluginError> {
    let setting = setting.map(str::trim).filter(|s| !s.is_empty());
    let policy = active_policy(policies.unwrap_or_default())?;
    let namespace = match (&policy, setting) {
        (Some(p), Some(s)) if !p.namespace.is_empty() && p.namespace != s => {
            return Err(DevicePluginError::NamespaceMismatch {
                policy: p.name.clone(),
                operator: p.namespace.clone(),
                setting: s.to_owned(),
            });
        }
        (Some(p), _) if !p.namespace.is_empty() => p.namespace.clone(),
        (_, Some(s)) => s.to_owned(),
        (Some(p), None) => {
            return Err(DevicePluginError::NamespaceUnknown {
                policy: p.name.clone(),
            });
        }
        (None, None) => return Err(DevicePluginError::NoOperator),
    };
    Ok(ConfigHome { namespace, policy })
}

/// What has to change on the ClusterPolicy for the device plugin to read [`CONFIG_MAP`]:
/// `Ok(true)` when its config name must be set, `Ok(false)` when nothing.
pub fn needs_wiring(home: &ConfigHome) -> Result<bool, DevicePluginError> {
    let Some(p) = &home.policy else {
        return Ok(false);
    };
    match p.config_name.as_str() {
        CONFIG_MAP => Ok(false),
        "" if !p.config_default.is_empty() => Err(DevicePluginError::DefaultWithoutConfigMap {
            policy: p.name.clone(),
            default: p.config_default.clone(),
            namespace: home.namespace.clone(),
        }),
        "" => Ok(true),
        other => Err(DevicePluginError::OtherConfigMap {
            policy: p.name.clone(),
            other: other.to_owned(),
            namespace: home.namespace.clone(),
        }),
    }
}

/// Finds where the config goes, without changing anything.
pub async fn locate(
    api: &dyn HostNodes,
    setting: Option<&str>,
) -> Result<ConfigHome, DevicePluginError> {
    let policies = api
        .cluster_policies()
        .await?
        .map(|ps| ps.iter().map(ClusterPolicy::from_json).collect());
    decide(policies, setting)
}

/// Finds where the config goes and points the GPU Operator's device plugin at it; fails
/// before anything is written when the ClusterPolicy is set up for something else.
pub async fn prepare(
    api: &dyn HostNodes,
    setting: Option<&str>,
) -> Result<ConfigHome, DevicePluginError> {
    let home = locate(api, setting).await?;
    if needs_wiring(&home)?
        && let Some(p) = &home.policy
    {
        api.set_device_plugin_config(&p.name, CONFIG_MAP).await?;
        tracing::info!(
            target: "gpufleet::gpu_node_pool",
            "pointed ClusterPolicy {}'s device plugin at ConfigMap {}/{CONFIG_MAP}",
            p.name,
            home.namespace
        );
    }
    Ok(home)
}

/// The plan-time check of a pool that starts time-slicing: what [`prepare`] would fail on,
/// as an error on `sharing.strategy`. Skipped when the cluster cannot be asked (apply checks
/// again).
pub async fn plan_check(api: &dyn HostNodes, setting: Option<&str>) -> Diagnostics {
    let mut d = Diagnostics::new();
    let ready = match locate(api, setting).await {
        Ok(home) => needs_wiring(&home).map(|_| ()),
        Err(e) => Err(e),
    };
    match ready {
        Ok(()) | Err(DevicePluginError::Host(_)) => {}
        Err(e) => d.push(
            Diagnostic::error("Device Plugin Not Set Up For Time-Slicing", e.to_string())
                .with_path(AttrPath::attr("sharing").push_attr("strategy")),
        ),
    }
    d
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(namespace: &str, config: &Json) -> ClusterPolicy {
        ClusterPolicy::from_json(&json!({
            "metadata": {"name": "cluster-policy"},
            "spec": {"devicePlugin": {"config": config}},
            "status": {"state": "ready", "namespace": namespace},
        }))
    }

    #[test]
    fn time_slicing_config_round_trips_replicas() {
        assert_eq!(replicas_in(&time_slicing_config(4)), Some(4));
        assert_eq!(replicas_in(&time_slicing_config(16)), Some(16));
    }

    #[test]
    fn the_operator_namespace_comes_from_the_cluster_policy() {
        let home =
            decide(Some(vec![policy("nvidia-gpu-operator", &json!({}))]), None).expect("found");
        assert_eq!(home.namespace, "nvidia-gpu-operator");
        assert_eq!(home.warning(), None);
        // The setting may repeat it, not contradict it.
        let same = decide(
            Some(vec![policy("nvidia-gpu-operator", &json!({}))]),
            Some("nvidia-gpu-operator"),
        );
        assert!(same.is_ok());
        let other = decide(
            Some(vec![policy("nvidia-gpu-operator", &json!({}))]),
            Some("gpu-operator"),
        );
        assert!(
            matches!(other, Err(DevicePluginError::NamespaceMismatch { .. })),
            "{other:?}"
        );
    }

    #[test]
    fn an_unreported_namespace_needs_the_setting() {
        let p = || Some(vec![policy("", &json!({}))]);
        let e = decide(p(), None).expect_err("not known");
        assert!(e.to_string().contains("status.namespace"), "{e}");
        assert_eq!(decide(p(), Some("ops")).expect("set").namespace, "ops");
    }

    #[test]
    fn without_the_operator_the_setting_is_required_and_warned_about() {
        let e = decide(None, None).expect_err("no operator");
        assert!(e.to_string().contains(NAMESPACE_SETTING), "{e}");
        assert!(
            e.to_string()
                .contains("config.name=gpufleet-device-plugin-config")
        );
        assert!(decide(Some(Vec::new()), Some("  ")).is_err());
        let home = decide(Some(Vec::new()), Some("nvdp")).expect("set");
        assert_eq!(home.namespace, "nvdp");
        let w = home.warning().expect("a warning");
        assert!(w.contains("nvdp/gpufleet-device-plugin-config"), "{w}");
        assert!(
            w.contains("config.name=gpufleet-device-plugin-config"),
            "{w}"
        );
    }

    #[test]
    fn ignored_policies_do_not_count() {
        let mut ignored = policy("", &json!({}));
        ignored.name = "old".into();
        ignored.state = "ignored".into();
        let home = decide(
            Some(vec![ignored.clone(), policy("gpu-operator", &json!({}))]),
            None,
        )
        .expect("the active one");
        assert_eq!(home.namespace, "gpu-operator");
        let mut twin = policy("gpu-operator", &json!({}));
        twin.name = "twin".into();
        let e = decide(Some(vec![twin, policy("gpu-operator", &json!({}))]), None)
            .expect_err("ambiguous");
        assert!(e.to_string().contains("twin, cluster-policy"), "{e}");
    }

    #[test]
    fn the_cluster_policy_is_set_when_unset_and_kept_when_ours() {
        let home = |config: Json| ConfigHome {
            namespace: "gpu-operator".into(),
            policy: Some(policy("gpu-operator", &config)),
        };
        assert_eq!(needs_wiring(&home(json!({}))), Ok(true));
        assert_eq!(needs_wiring(&home(json!({"name": ""}))), Ok(true));
        assert_eq!(needs_wiring(&home(json!({"name": CONFIG_MAP}))), Ok(false));
        assert_eq!(
            needs_wiring(&home(json!({"name": CONFIG_MAP, "default": "any"}))),
            Ok(false)
        );
        let e = needs_wiring(&home(json!({"name": "time-slicing-config"}))).expect_err("other");
        let msg = e.to_string();
        assert!(msg.contains("\"time-slicing-config\""), "{msg}");
        assert!(msg.contains("kubectl patch clusterpolicies.nvidia.com/cluster-policy"));
        let e = needs_wiring(&home(json!({"default": "any"}))).expect_err("default alone");
        assert!(e.to_string().contains("default"), "{e}");
        let standalone = ConfigHome {
            namespace: "nvdp".into(),
            policy: None,
        };
        assert_eq!(needs_wiring(&standalone), Ok(false));
    }
}
