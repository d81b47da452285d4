//! The virtual cluster as gpufleet understands it, decoded once from a configuration or
//! state value: the [`Spec`] that apply renders, the [`Address`] that read and delete look
//! for, and how the credentials are written back to state.

use std::collections::BTreeMap;

use serde_json::Value as Json;

pub use super::choices::Isolation;
use super::{
    config::ClusterConfig,
    expose::Expose,
    persistence::Persistence,
    readiness::Access,
    schema::{
        CLIENT_CERTIFICATE, CLIENT_KEY, CLUSTER_CA_CERTIFICATE, ENDPOINT, HOST, KUBECONFIG, NAME,
        VALUES_OVERRIDE,
    },
    versions,
};
use crate::{diag::Diagnostics, path::AttrPath, value::Value};

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
        Address::of_config(&ClusterConfig::decode(state))
    }

    /// The address `c` gives.
    pub(super) fn of_config(c: &ClusterConfig) -> Address {
        let name = c.name.value().cloned().unwrap_or_default();
        let namespace = c
            .namespace
            .value()
            .cloned()
            .unwrap_or_else(|| default_namespace(&name));
        Address { name, namespace }
    }
}

/// Computed attributes read from Secret `vc-<name>` and the address `expose` gives.
pub(super) const ACCESS: &[&str] = &[
    KUBECONFIG,
    ENDPOINT,
    HOST,
    CLUSTER_CA_CERTIFICATE,
    CLIENT_CERTIFICATE,
    CLIENT_KEY,
];

/// The admin credentials among [`ACCESS`]: what `admin_credentials_in_state = false` keeps
/// out of state.
pub(super) const CREDENTIALS: &[&str] = &[KUBECONFIG, CLIENT_CERTIFICATE, CLIENT_KEY];

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
        (KUBECONFIG, secret(|a| Some(a.kubeconfig.clone()))),
        (ENDPOINT, text(|a| a.endpoint.clone())),
        (HOST, text(|a| a.endpoint.clone())),
        (CLUSTER_CA_CERTIFICATE, text(|a| a.ca.clone())),
        (CLIENT_CERTIFICATE, secret(|a| a.client_certificate.clone())),
        (CLIENT_KEY, secret(|a| a.client_key.clone())),
    ]
}

impl Spec {
    /// The spec of a planned or stored value. Fails, naming the attribute, when something
    /// needed is unknown or invalid (validation stops that before apply).
    pub fn from_value(v: &Value) -> Result<Spec, Diagnostics> {
        Spec::from_config(&ClusterConfig::decode(v))
    }

    /// The spec of a decoded planned or stored value, failing as [`Spec::from_value`] does.
    pub(super) fn from_config(c: &ClusterConfig) -> Result<Spec, Diagnostics> {
        let mut d = Diagnostics::new();
        let Address { name, namespace } = Address::of_config(c);
        if name.is_empty() {
            d.error_at(
                AttrPath::attr(NAME),
                "Value Not Known At Apply",
                "name must be known to apply a virtual cluster.",
            );
        }
        let isolation = c.isolation.value().copied().unwrap_or(Isolation::Shared);
        let quota = c.quota.value().map(|q| Quota {
            gpus: q.gpus.value().copied(),
            cpu: q.cpu.value().cloned(),
            memory: q.memory.value().cloned(),
            pods: q.pods.value().copied(),
        });
        let limits = c.limit_range.value().map(|l| Limits {
            default_cpu: l.default_cpu.value().cloned(),
            default_memory: l.default_memory.value().cloned(),
            default_request_cpu: l.default_request_cpu.value().cloned(),
            default_request_memory: l.default_request_memory.value().cloned(),
        });
        let labels = c
            .labels
            .value()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, x)| Some((k.clone(), x.value()?.clone())))
                    .collect()
            })
            .unwrap_or_default();
        let values_override = match c.values_override.value() {
            Some(s) => match parse_override(s) {
                Ok(o) => o,
                Err(why) => {
                    d.error_at(
                        AttrPath::attr(VALUES_OVERRIDE),
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
            kubernetes_version: c
                .kubernetes_version
                .value()
                .cloned()
                .unwrap_or_else(|| versions::default_kubernetes_version().to_owned()),
            isolation,
            quota,
            limits,
            network_isolation: c.network_isolation.value().copied().unwrap_or(true),
            pod_security: c
                .pod_security
                .value()
                .cloned()
                .unwrap_or_else(|| "baseline".to_owned()),
            sleep_after: c
                .sleep
                .value()
                .and_then(|s| s.after_inactivity.value().cloned()),
            paused: c.paused.value().copied().unwrap_or(false),
            persistence: c.persistence.value().map(|p| p.claim()).unwrap_or_default(),
            expose: c
                .expose
                .value()
                .map(|e| e.or_defaults())
                .unwrap_or_default(),
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
