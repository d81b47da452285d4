//! The parts of vcluster.yaml the stand-in acts on: `sync.fromHost.nodes` and
//! `sync.toHost.pods`. Everything else in the file (gpufleet writes the complete
//! vcluster.yaml, the chart's defaults included) is the virtual cluster resource's business
//! and is ignored here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use serde_json::Value;

/// Why vcluster.yaml could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The text is not YAML.
    #[error("failed to parse vcluster.yaml: {0}")]
    Parse(String),
    /// A field has the wrong type.
    #[error("failed to read {path} from vcluster.yaml: {why}")]
    Field {
        /// The dotted path of the field.
        path: &'static str,
        /// What is wrong with it.
        why: String,
    },
}

/// Which host nodes appear in the virtual cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NodeSync {
    /// `sync.fromHost.nodes.enabled` is false: no host node is copied.
    #[default]
    Off,
    /// Every host node (`selector.all: true`).
    All,
    /// The host nodes carrying every one of these labels.
    Matching(BTreeMap<String, String>),
}

impl NodeSync {
    /// Whether a host node with `labels` belongs in the virtual cluster.
    #[must_use]
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Off => false,
            Self::All => true,
            Self::Matching(want) => want.iter().all(|(k, v)| labels.get(k) == Some(v)),
        }
    }
}

/// How pods of the virtual cluster are copied to the host.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodSync {
    /// `sync.toHost.pods.enabled` (vCluster's default: true).
    pub enabled: bool,
    /// `sync.toHost.pods.enforceTolerations`, parsed.
    pub enforce_tolerations: Vec<Toleration>,
    /// The node selector added to host pods: `sync.fromHost.nodes.selector.labels` when
    /// node sync is on, as vCluster does.
    pub node_selector: BTreeMap<String, String>,
}

/// What the stand-in does for one virtual cluster.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncConfig {
    /// Node sync from the host.
    pub nodes: NodeSync,
    /// Pod sync to the host.
    pub pods: PodSync,
}

impl SyncConfig {
    /// vCluster's defaults, for a virtual cluster without a config Secret: no node sync,
    /// pod sync on.
    #[must_use]
    pub fn defaults() -> Self {
        Self {
            nodes: NodeSync::Off,
            pods: PodSync {
                enabled: true,
                ..PodSync::default()
            },
        }
    }

    /// Parses vcluster.yaml.
    ///
    /// # Errors
    /// When the text is not YAML or a field the stand-in reads has the wrong type.
    pub fn parse(yaml: &str) -> Result<Self, ConfigError> {
        let doc: Value =
            serde_saphyr::from_str(yaml).map_err(|e| ConfigError::Parse(e.to_string()))?;
        let nodes_cfg = pointer(&doc, "/sync/fromHost/nodes");
        let enabled = bool_at(nodes_cfg, "/enabled", "sync.fromHost.nodes.enabled")?;
        let all = bool_at(
            nodes_cfg,
            "/selector/all",
            "sync.fromHost.nodes.selector.all",
        )?;
        let labels = string_map(
            nodes_cfg.and_then(|n| n.pointer("/selector/labels")),
            "sync.fromHost.nodes.selector.labels",
        )?;
        let nodes = match (enabled.unwrap_or(false), all.unwrap_or(false)) {
            (false, _) => NodeSync::Off,
            (true, true) => NodeSync::All,
            (true, false) => NodeSync::Matching(labels.clone()),
        };
        let pods_cfg = pointer(&doc, "/sync/toHost/pods");
        let pods_enabled =
            bool_at(pods_cfg, "/enabled", "sync.toHost.pods.enabled")?.unwrap_or(true);
        let enforce = match pods_cfg.and_then(|p| p.get("enforceTolerations")) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => parse_toleration(s),
                    other => Err(ConfigError::Field {
                        path: "sync.toHost.pods.enforceTolerations",
                        why: format!("expected strings, found {other}"),
                    }),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(ConfigError::Field {
                    path: "sync.toHost.pods.enforceTolerations",
                    why: format!("expected a list, found {other}"),
                });
            }
        };
        let node_selector = if matches!(nodes, NodeSync::Matching(_)) {
            labels
        } else {
            BTreeMap::new()
        };
        Ok(Self {
            nodes,
            pods: PodSync {
                enabled: pods_enabled,
                enforce_tolerations: enforce,
                node_selector,
            },
        })
    }
}

fn pointer<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    doc.pointer(path).filter(|v| !v.is_null())
}

fn bool_at(
    parent: Option<&Value>,
    path: &str,
    name: &'static str,
) -> Result<Option<bool>, ConfigError> {
    match parent.and_then(|p| p.pointer(path)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ConfigError::Field {
            path: name,
            why: format!("expected true or false, found {other}"),
        }),
    }
}

fn string_map(
    value: Option<&Value>,
    name: &'static str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                // YAML turns `true` or `1` into non-strings; labels are strings.
                Value::Bool(_) | Value::Number(_) => Ok((k.clone(), v.to_string())),
                other => Err(ConfigError::Field {
                    path: name,
                    why: format!("{k}: expected a string, found {other}"),
                }),
            })
            .collect(),
        Some(other) => Err(ConfigError::Field {
            path: name,
            why: format!("expected a mapping, found {other}"),
        }),
    }
}

/// Parses vCluster's toleration shorthand: `key=value:Effect` (operator Equal),
/// `key:Effect` (Exists), `key=value` or `key` (any effect).
///
/// # Errors
/// When the key is empty.
pub fn parse_toleration(text: &str) -> Result<Toleration, ConfigError> {
    let (rest, effect) = match text.rsplit_once(':') {
        Some((rest, effect)) if !effect.is_empty() => (rest, Some(effect.to_string())),
        _ => (text, None),
    };
    let (key, value) = match rest.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (rest, None),
    };
    if key.is_empty() {
        return Err(ConfigError::Field {
            path: "sync.toHost.pods.enforceTolerations",
            why: format!("{text:?} has no key"),
        });
    }
    Ok(Toleration {
        key: Some(key.to_string()),
        operator: Some(if value.is_some() { "Equal" } else { "Exists" }.to_string()),
        value,
        effect,
        ..Toleration::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedicated_config_selects_the_tenants_nodes_and_tolerates_its_taint() {
        let yaml = "
controlPlane:
  distro:
    k8s:
      version: v1.36.0
sync:
  fromHost:
    nodes:
      enabled: true
      selector:
        labels:
          gpufleet.dev/tenant: acme
  toHost:
    pods:
      enabled: true
      enforceTolerations:
      - gpufleet.dev/tenant=acme:NoSchedule
";
        let c = SyncConfig::parse(yaml).expect("parse");
        let want: BTreeMap<String, String> =
            [("gpufleet.dev/tenant".to_string(), "acme".to_string())].into();
        assert_eq!(c.nodes, NodeSync::Matching(want.clone()));
        assert_eq!(c.pods.node_selector, want);
        let t = &c.pods.enforce_tolerations[0];
        assert_eq!(t.key.as_deref(), Some("gpufleet.dev/tenant"));
        assert_eq!(t.operator.as_deref(), Some("Equal"));
        assert_eq!(t.value.as_deref(), Some("acme"));
        assert_eq!(t.effect.as_deref(), Some("NoSchedule"));

        let mut other = want.clone();
        other.insert("gpufleet.dev/tenant".into(), "globex".into());
        assert!(c.nodes.selects(&want));
        assert!(!c.nodes.selects(&other));
        assert!(!c.nodes.selects(&BTreeMap::new()));
    }

    #[test]
    fn missing_sections_mean_vclusters_defaults() {
        let c = SyncConfig::parse("controlPlane: {}\n").expect("parse");
        assert_eq!(c, SyncConfig::defaults());
        let all =
            SyncConfig::parse("sync: {fromHost: {nodes: {enabled: true, selector: {all: true}}}}")
                .expect("parse");
        assert_eq!(all.nodes, NodeSync::All);
        assert!(all.pods.node_selector.is_empty());
    }

    #[test]
    fn wrong_types_are_reported_with_their_path() {
        let err = SyncConfig::parse("sync: {fromHost: {nodes: {enabled: [1]}}}")
            .expect_err("a list is no bool");
        assert!(
            err.to_string().contains("sync.fromHost.nodes.enabled"),
            "{err}"
        );
        assert!(SyncConfig::parse("sync: [").is_err());
    }

    /// The complete vcluster.yaml gpufleet writes (the chart's defaults, `selector.all: false`
    /// and an empty `enforceTolerations` among them) reads as the tier says.
    #[test]
    fn gpufleets_complete_config_reads_as_its_tier() {
        use gpufleet_engine::{
            resources::virtual_cluster::{render::vcluster_yaml, spec::Spec},
            value::Value,
        };
        let yaml = |isolation: &str| {
            let spec = Spec::from_value(&Value::object([
                ("name", Value::string("acme")),
                ("isolation", Value::string(isolation)),
            ]))
            .expect("spec");
            vcluster_yaml(&spec)
        };
        let shared = SyncConfig::parse(&yaml("shared")).expect("parse");
        let want: BTreeMap<String, String> =
            [("gpufleet.dev/isolation".to_string(), "shared".to_string())].into();
        assert_eq!(shared.nodes, NodeSync::Matching(want.clone()));
        assert!(shared.pods.enabled);
        assert!(shared.pods.enforce_tolerations.is_empty());
        assert_eq!(shared.pods.node_selector, want);
        for tier in ["dedicated", "private"] {
            let c = SyncConfig::parse(&yaml(tier)).expect("parse");
            let want: BTreeMap<String, String> =
                [("gpufleet.dev/tenant".to_string(), "acme".to_string())].into();
            assert_eq!(c.nodes, NodeSync::Matching(want), "{tier}");
            assert_eq!(c.pods.enforce_tolerations.len(), 1, "{tier}");
            assert_eq!(c.pods.enforce_tolerations[0].value.as_deref(), Some("acme"));
        }
    }

    #[test]
    fn toleration_shorthands() {
        let exists = parse_toleration("dedicated:NoExecute").expect("parse");
        assert_eq!(exists.operator.as_deref(), Some("Exists"));
        assert_eq!(exists.value, None);
        assert_eq!(exists.effect.as_deref(), Some("NoExecute"));
        let any_effect = parse_toleration("k=v").expect("parse");
        assert_eq!(any_effect.effect, None);
        assert_eq!(any_effect.value.as_deref(), Some("v"));
        assert!(parse_toleration("=v:NoSchedule").is_err());
    }
}
