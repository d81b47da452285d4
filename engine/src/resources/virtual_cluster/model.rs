//! The virtual cluster as gpufleet understands it, decoded once from a configuration or
//! state value: the [`Spec`] that apply renders, the [`Address`] that read and delete look
//! for, and how the credentials are written back to state.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::{expose::Expose, persistence::Persistence, readiness::Access, versions};
use crate::{diag::Diagnostics, path::AttrPath, value::Value};

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

/// Where a virtual cluster lives: what read and delete need of a stored state, which may
/// hold nothing else (an import's skeleton) or be from an older schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// `name`; empty when the state has none.
    pub name: String,
    /// The host namespace: `namespace`, or the default for `name`.
    pub namespace: String,
}

impl Address {
    /// The address recorded in `state`.
    pub fn of_state(state: &Value) -> Address {
        let name = text(state.get("name")).unwrap_or_default();
        let namespace = text(state.get("namespace")).unwrap_or_else(|| default_namespace(&name));
        Address { name, namespace }
    }
}

/// Computed attributes read from Secret `vc-<name>` and the address `expose` gives.
pub(super) const ACCESS: &[&str] = &[
    "kubeconfig",
    "endpoint",
    "host",
    "cluster_ca_certificate",
    "client_certificate",
    "client_key",
];

/// The admin credentials among [`ACCESS`]: what `admin_credentials_in_state = false` keeps
/// out of state.
pub(super) const CREDENTIALS: &[&str] = &["kubeconfig", "client_certificate", "client_key"];

/// Whether `v` (a configuration, plan or state) records the admin credentials in state; null
/// (the default, and states from before the setting) means yes, `None` that it is unknown.
pub(super) fn credentials_in_state(v: &Value) -> Option<bool> {
    let setting = v.get("admin_credentials_in_state");
    (!setting.is_unknown()).then(|| setting.as_bool() != Some(false))
}

/// The [`ACCESS`] attributes of `access`, null without one; the [`CREDENTIALS`] also null
/// unless `credentials` says they go into state.
pub(super) fn access_values(
    access: Option<&Access>,
    credentials: bool,
) -> [(&'static str, Value); 6] {
    let text = |f: fn(&Access) -> Option<String>| -> Value { access.and_then(f).into() };
    let secret = |f: fn(&Access) -> Option<String>| -> Value {
        if credentials { text(f) } else { Value::Null }
    };
    [
        ("kubeconfig", secret(|a| Some(a.kubeconfig.clone()))),
        ("endpoint", text(|a| a.endpoint.clone())),
        ("host", text(|a| a.endpoint.clone())),
        ("cluster_ca_certificate", text(|a| a.ca.clone())),
        (
            "client_certificate",
            secret(|a| a.client_certificate.clone()),
        ),
        ("client_key", secret(|a| a.client_key.clone())),
    ]
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
