//! The virtual cluster as gpufleet understands it: the model read from a configuration or
//! state value, and the offline checks across attributes.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::{
    expose::{Expose, ServiceType},
    persistence::Persistence,
    values, versions,
};
use crate::{backends::kube::reserved_label, diag::Diagnostics, path::AttrPath, value::Value};

/// The tenancy tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Tenant pods share the host's shared nodes.
    Shared,
    /// Tenant pods run only on nodes dedicated to the tenant.
    Dedicated,
    /// Dedicated nodes that only pools holding whole servers for the tenant (BCM or
    /// Karpenter) may provide, never shared host nodes. Rendered like `Dedicated`: vCluster's
    /// own private-nodes mode is a vCluster Pro feature.
    Private,
}

impl Isolation {
    /// Parses the attribute's spelling.
    pub fn parse(s: &str) -> Option<Isolation> {
        match s {
            "shared" => Some(Isolation::Shared),
            "dedicated" => Some(Isolation::Dedicated),
            "private" => Some(Isolation::Private),
            _ => None,
        }
    }

    /// The attribute's (and the namespace label's) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Shared => "shared",
            Isolation::Dedicated => "dedicated",
            Isolation::Private => "private",
        }
    }
}

/// `quota`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    /// `requests.nvidia.com/gpu`.
    pub gpus: Option<i64>,
    /// `requests.cpu`.
    pub cpu: Option<String>,
    /// `requests.memory`.
    pub memory: Option<String>,
    /// `count/pods`.
    pub pods: Option<i64>,
}

/// `limit_range`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Default CPU limit.
    pub default_cpu: Option<String>,
    /// Default memory limit.
    pub default_memory: Option<String>,
    /// Default CPU request.
    pub default_request_cpu: Option<String>,
    /// Default memory request.
    pub default_request_memory: Option<String>,
}

/// A virtual cluster's desired configuration, from a value whose attributes are known.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// `name`.
    pub name: String,
    /// The host namespace.
    pub namespace: String,
    /// Kubernetes minor version, e.g. `1.36`.
    pub kubernetes_version: String,
    /// The tier.
    pub isolation: Isolation,
    /// The ResourceQuota, if any.
    pub quota: Option<Quota>,
    /// The LimitRange, if any.
    pub limits: Option<Limits>,
    /// Whether to write the NetworkPolicy.
    pub network_isolation: bool,
    /// Pod Security Standard level.
    pub pod_security: String,
    /// `sleep.after_inactivity`.
    pub sleep_after: Option<String>,
    /// Scaled to zero.
    pub paused: bool,
    /// The control plane's volume claim.
    pub persistence: Persistence,
    /// How the control plane is reached from outside the host cluster.
    pub expose: Expose,
    /// User labels for every object.
    pub labels: BTreeMap<String, String>,
    /// The parsed `values_override`, a mapping.
    pub values_override: Option<Json>,
}

/// The namespace a virtual cluster called `name` lives in by default.
pub fn default_namespace(name: &str) -> String {
    format!("vc-{name}")
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

impl Spec {
    /// The spec of a planned or stored value. Fails, naming the attribute, when something
    /// needed is unknown or invalid (validation stops that before apply).
    pub fn from_value(v: &Value) -> Result<Spec, Diagnostics> {
        let mut d = Diagnostics::new();
        let name = text(v.get("name")).unwrap_or_default();
        if name.is_empty() {
            d.error_at(
                AttrPath::attr("name"),
                "Value Not Known At Apply",
                "name must be known to apply a virtual cluster.",
            );
        }
        let namespace = text(v.get("namespace")).unwrap_or_else(|| default_namespace(&name));
        let isolation = v
            .get("isolation")
            .as_str()
            .map_or(Some(Isolation::Shared), Isolation::parse)
            .unwrap_or(Isolation::Shared);
        let q = v.get("quota");
        let quota = q.as_object().map(|_| Quota {
            gpus: q.get("gpus").as_i64(),
            cpu: text(q.get("cpu")),
            memory: text(q.get("memory")),
            pods: q.get("pods").as_i64(),
        });
        let l = v.get("limit_range");
        let limits = l.as_object().map(|_| Limits {
            default_cpu: text(l.get("default_cpu")),
            default_memory: text(l.get("default_memory")),
            default_request_cpu: text(l.get("default_request_cpu")),
            default_request_memory: text(l.get("default_request_memory")),
        });
        let labels = v
            .get("labels")
            .as_map()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let values_override = match v.get("values_override").as_str() {
            Some(s) => match parse_override(s) {
                Ok(o) => o,
                Err(why) => {
                    d.error_at(
                        AttrPath::attr("values_override"),
                        "Invalid values_override",
                        why,
                    );
                    None
                }
            },
            None => None,
        };
        if d.has_error() {
            return Err(d);
        }
        Ok(Spec {
            name,
            namespace,
            kubernetes_version: text(v.get("kubernetes_version"))
                .unwrap_or_else(|| versions::default_kubernetes_version().to_owned()),
            isolation,
            quota,
            limits,
            network_isolation: v.get("network_isolation").as_bool().unwrap_or(true),
            pod_security: text(v.get("pod_security")).unwrap_or_else(|| "baseline".to_owned()),
            sleep_after: text(v.get("sleep").get("after_inactivity")),
            paused: v.get("paused").as_bool().unwrap_or(false),
            persistence: Persistence::from_value(v.get("persistence")),
            expose: Expose::from_value(v.get("expose")),
            labels,
            values_override,
        })
    }
}

/// Parses `values_override`: YAML (JSON is YAML too) whose top level is a mapping; empty
/// means none.
pub fn parse_override(s: &str) -> Result<Option<Json>, String> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    let parsed: Json = serde_saphyr::from_str(s)
        .map_err(|e| format!("values_override is not valid YAML or JSON: {e}"))?;
    match parsed {
        Json::Null => Ok(None),
        Json::Object(_) => Ok(Some(parsed)),
        _ => Err(
            "values_override must be a mapping of vcluster.yaml keys, such as \
             `yamlencode({ sync = { toHost = { ingresses = { enabled = true } } } })`."
                .to_owned(),
        ),
    }
}

/// Who decides a vcluster.yaml key that `values_override` may not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    /// An attribute of the resource.
    Attribute(&'static str),
    /// gpufleet itself, for the reason given.
    Fixed(&'static str),
}

/// Why `values_override` cannot change the control plane's volume claim.
const CLAIM_FIXED: &str = "gpufleet keeps the control plane's data on the chart's volume claim \
                           `data` (ReadWriteOnce, retained when the StatefulSet goes); set its \
                           size and StorageClass with the `persistence` attribute";

/// The vcluster.yaml keys gpufleet decides, with who decides each (the first match counts).
pub const MANAGED_KEYS: &[(&str, Managed)] = &[
    (
        "controlPlane.distro",
        Managed::Attribute("kubernetes_version"),
    ),
    ("sync.fromHost.nodes", Managed::Attribute("isolation")),
    (
        "sync.toHost.pods.enforceTolerations",
        Managed::Attribute("isolation"),
    ),
    ("policies.resourceQuota", Managed::Attribute("quota")),
    ("policies.limitRange", Managed::Attribute("limit_range")),
    (
        "policies.networkPolicy",
        Managed::Attribute("network_isolation"),
    ),
    (
        "policies.podSecurityStandard",
        Managed::Attribute("pod_security"),
    ),
    (
        "controlPlane.backingStore",
        Managed::Fixed("gpufleet runs the embedded database (SQLite through kine)"),
    ),
    (
        "controlPlane.statefulSet.persistence.volumeClaim.size",
        Managed::Attribute("persistence"),
    ),
    (
        "controlPlane.statefulSet.persistence.volumeClaim.storageClass",
        Managed::Attribute("persistence"),
    ),
    (
        "controlPlane.statefulSet.persistence.volumeClaim",
        Managed::Fixed(CLAIM_FIXED),
    ),
    (
        "controlPlane.statefulSet.persistence.volumeClaimTemplates",
        Managed::Fixed(CLAIM_FIXED),
    ),
    (
        "controlPlane.statefulSet.persistence.dataVolume",
        Managed::Fixed(
            "the control plane's data is on the volume claim `data` (set its size and class \
             with the `persistence` attribute); the chart uses dataVolume only without a claim",
        ),
    ),
    (
        "controlPlane.statefulSet.image.repository",
        Managed::Fixed("gpufleet runs vCluster's OSS image of the release it pins"),
    ),
    (
        "controlPlane.statefulSet.image.tag",
        Managed::Fixed("gpufleet runs vCluster's OSS image of the release it pins"),
    ),
    (
        "controlPlane.advanced.serviceAccount.enabled",
        Managed::Fixed("gpufleet names and owns the ServiceAccount vc-<name>"),
    ),
    (
        "controlPlane.advanced.serviceAccount.name",
        Managed::Fixed("gpufleet names and owns the ServiceAccount vc-<name>"),
    ),
    (
        "controlPlane.advanced.workloadServiceAccount.enabled",
        Managed::Fixed("gpufleet names and owns the ServiceAccount vc-workload-<name>"),
    ),
    (
        "controlPlane.advanced.workloadServiceAccount.name",
        Managed::Fixed("gpufleet names and owns the ServiceAccount vc-workload-<name>"),
    ),
    (
        "controlPlane.service.spec.type",
        Managed::Attribute("expose"),
    ),
    ("controlPlane.proxy.extraSANs", Managed::Attribute("expose")),
    (
        "controlPlane.service.enabled",
        Managed::Fixed("gpufleet always writes the Service <name> of the API server"),
    ),
    (
        "rbac.role.enabled",
        Managed::Fixed("the control plane needs its Role vc-<name>"),
    ),
    (
        "rbac.clusterRole.enabled",
        Managed::Fixed("the control plane needs its ClusterRole to read the host's nodes"),
    ),
    (
        "sleepMode",
        Managed::Fixed(
            "sleepMode is no vcluster.yaml key of this vCluster release; its successor, \
             sleep, is a vCluster Platform feature",
        ),
    ),
];

/// The keys of `override` that reach into what gpufleet manages, as
/// `(dotted key, who manages it)`.
pub fn override_conflicts(over: &Json) -> Vec<(String, Managed)> {
    let mut leaves = Vec::new();
    collect_leaves(over, &mut Vec::new(), &mut leaves);
    let mut out = Vec::new();
    for leaf in leaves {
        let dotted = leaf.join(".");
        for (key, managed) in MANAGED_KEYS {
            let managed_path: Vec<&str> = key.split('.').collect();
            let n = managed_path.len().min(leaf.len());
            if managed_path[..n] == leaf.iter().map(String::as_str).collect::<Vec<_>>()[..n] {
                out.push((dotted.clone(), *managed));
                break;
            }
        }
    }
    out
}

/// Paths of the values that an override would put in place: non-mappings and empty mappings.
fn collect_leaves(v: &Json, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Json::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                path.push(k.clone());
                collect_leaves(x, path, out);
                path.pop();
            }
        }
        _ if !path.is_empty() => out.push(path.clone()),
        _ => {}
    }
}

/// The chart's settings that put a fixed node port on the Service's ports.
const NODE_PORT_SETTINGS: &[&str] = &[
    "controlPlane.service.httpsNodePort",
    "controlPlane.service.kubeletNodePort",
];

/// Refuses a fixed node port in `over` unless `expose.type` makes the Service one that has
/// node ports: Kubernetes refuses `nodePort` on a ClusterIP Service (the chart would render it
/// regardless), so every apply would fail.
fn node_ports_need_a_node_port_service(
    config: &Value,
    over: &Json,
    path: &AttrPath,
    d: &mut Diagnostics,
) {
    let expose = config.get("expose");
    if expose.is_unknown() || expose.get("type").is_unknown() {
        return;
    }
    if Expose::from_value(expose).service_type != ServiceType::ClusterIp {
        return;
    }
    for key in NODE_PORT_SETTINGS {
        let set = values::at(over, key).is_some_and(|n| !n.is_null() && n.as_i64() != Some(0));
        if set {
            d.error_at(
                path.clone(),
                "Node Port Needs expose.type NodePort Or LoadBalancer",
                format!(
                    "values_override sets {key}, a fixed node port, but the Service of the API \
                     server is a ClusterIP Service, which Kubernetes refuses node ports on. Set \
                     expose = {{ type = \"NodePort\" }} (or \"LoadBalancer\"), or remove {key} \
                     from values_override."
                ),
            );
        }
    }
}

/// Checks across attributes and inside strings that the schema's validators cannot see.
/// Unknown values are skipped.
pub fn validate(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    if let Some(labels) = config.get("labels").as_map() {
        for (k, v) in labels {
            let path = AttrPath::attr("labels").push_key(k.clone());
            if reserved_label(k) {
                d.error_at(
                    path,
                    "Reserved Label",
                    format!("labels[{k:?}] is a label gpufleet sets itself; choose another key."),
                );
            } else if let Some(s) = v.as_str()
                && (s.len() > 63
                    || !s
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            {
                d.error_at(
                    path,
                    "Invalid Label Value",
                    format!(
                        "labels[{k:?}] = {s:?} is not a Kubernetes label value: at most 63 \
                         letters, digits, '-', '_' and '.'."
                    ),
                );
            }
        }
    }
    if let Some(s) = config.get("values_override").as_str() {
        let path = AttrPath::attr("values_override");
        match parse_override(s) {
            Err(why) => d.error_at(path, "Invalid values_override", why),
            Ok(Some(over)) => {
                for (key, managed) in override_conflicts(&over) {
                    let detail = match managed {
                        Managed::Attribute(attr) => format!(
                            "values_override sets {key}, which gpufleet manages from the \
                             `{attr}` attribute. Remove {key} from values_override and set \
                             `{attr}` instead."
                        ),
                        Managed::Fixed(why) => format!(
                            "values_override sets {key}, which gpufleet decides itself: \
                             {why}. Remove {key} from values_override."
                        ),
                    };
                    d.error_at(
                        path.clone(),
                        "values_override Conflicts With gpufleet",
                        detail,
                    );
                }
                node_ports_need_a_node_port_service(config, &over, &path, &mut d);
                let merged = values::coalesce(&over, values::chart_defaults());
                for feature in values::pro_features(&merged) {
                    d.error_at(
                        path.clone(),
                        "values_override Needs A vCluster Licence",
                        format!(
                            "values_override turns on {key}, a {needs} feature. gpufleet \
                             renders open-source vCluster {version}, whose control plane \
                             refuses to start with it. Remove {key} from values_override.",
                            key = feature.key,
                            needs = feature.needs,
                            version = versions::VCLUSTER_VERSION,
                        ),
                    );
                }
            }
            Ok(None) => {}
        }
    }
    d
}
