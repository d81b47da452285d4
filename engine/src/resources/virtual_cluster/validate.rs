//! The plan-time checks of a virtual cluster's configuration that its schema's validators
//! cannot make: across attributes, and inside `labels` and `values_override`.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::{
    chart_schema,
    config::{ClusterConfig, LimitRangeConfig},
    expose::ServiceType,
    model::parse_override,
    quantity,
    schema::{
        DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_REQUEST_CPU, DEFAULT_REQUEST_MEMORY, EXPOSE,
        ISOLATION, KUBERNETES_VERSION, LABELS, LIMIT_RANGE, NAMESPACE, NETWORK_ISOLATION,
        PERSISTENCE, POD_SECURITY, QUOTA, VALUES_OVERRIDE,
    },
    values, versions,
};
use crate::{
    backends::kube::reserved_label,
    diag::Diagnostics,
    path::AttrPath,
    validate::k8s_label,
    value::{Known, Value},
};

/// Namespaces a virtual cluster may not take, since something else lives there: the
/// Kubernetes system namespaces, and those of the operators a GPU fleet runs beside gpufleet.
pub(super) const RESERVED_NAMESPACES: &[&str] = &[
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "gpu-operator",
    "nvidia-gpu-operator",
    "network-operator",
    "nvidia-network-operator",
    "karpenter",
    "mpi-operator",
    "kwok-system",
];

/// A default request above the default limit makes every container that sets neither invalid:
/// the API server refuses its pods.
fn limit_range_order(limit_range: &Known<LimitRangeConfig>, d: &mut Diagnostics) {
    let Some(l) = limit_range.value() else {
        return;
    };
    for (request, r, limit, lim) in [
        (
            DEFAULT_REQUEST_CPU,
            &l.default_request_cpu,
            DEFAULT_CPU,
            &l.default_cpu,
        ),
        (
            DEFAULT_REQUEST_MEMORY,
            &l.default_request_memory,
            DEFAULT_MEMORY,
            &l.default_memory,
        ),
    ] {
        let (Some(r), Some(l)) = (r.value(), lim.value()) else {
            continue;
        };
        if let (Ok(rq), Ok(lq)) = (quantity::parse(r), quantity::parse(l))
            && rq > lq
        {
            let path = AttrPath::attr(LIMIT_RANGE).push_attr(request);
            d.error_at(
                path.clone(),
                "Default Request Above Default Limit",
                format!(
                    "{path}: {r:?} is not at most {LIMIT_RANGE}.{limit} ({l:?}); accepted: a \
                     request no larger than the limit."
                ),
            );
        }
    }
}

/// Who decides a vcluster.yaml key that `values_override` may not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Managed {
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
const MANAGED_KEYS: &[(&str, Managed)] = &[
    (
        "controlPlane.distro",
        Managed::Attribute(KUBERNETES_VERSION),
    ),
    ("sync.fromHost.nodes", Managed::Attribute(ISOLATION)),
    (
        "sync.toHost.pods.enforceTolerations",
        Managed::Attribute(ISOLATION),
    ),
    ("policies.resourceQuota", Managed::Attribute(QUOTA)),
    ("policies.limitRange", Managed::Attribute(LIMIT_RANGE)),
    (
        "policies.networkPolicy",
        Managed::Attribute(NETWORK_ISOLATION),
    ),
    (
        "policies.podSecurityStandard",
        Managed::Attribute(POD_SECURITY),
    ),
    (
        "controlPlane.backingStore",
        Managed::Fixed("gpufleet runs the embedded database (SQLite through kine)"),
    ),
    (
        "controlPlane.statefulSet.persistence.volumeClaim.size",
        Managed::Attribute(PERSISTENCE),
    ),
    (
        "controlPlane.statefulSet.persistence.volumeClaim.storageClass",
        Managed::Attribute(PERSISTENCE),
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
    ("controlPlane.service.spec.type", Managed::Attribute(EXPOSE)),
    ("controlPlane.proxy.extraSANs", Managed::Attribute(EXPOSE)),
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
/// `(dotted key, who manages it)`. Keys under `refused` (already refused for another
/// reason) are left out.
fn override_conflicts(over: &Json, refused: &[&str]) -> Vec<(String, Managed)> {
    let mut leaves = Vec::new();
    collect_leaves(over, &mut Vec::new(), &mut leaves);
    let mut out = Vec::new();
    for leaf in leaves {
        let dotted = leaf.join(".");
        if refused
            .iter()
            .any(|r| dotted == *r || dotted.starts_with(&format!("{r}.")))
        {
            continue;
        }
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

/// The dotted vcluster.yaml keys gpufleet decides (an attribute or gpufleet itself), which
/// `values_override` may not set.
pub(super) fn managed_keys() -> impl Iterator<Item = &'static str> {
    MANAGED_KEYS.iter().map(|(key, _)| *key)
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
    config: &ClusterConfig,
    over: &Json,
    path: &AttrPath,
    d: &mut Diagnostics,
) {
    if config.service_type() != Some(ServiceType::ClusterIp) {
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

/// Refuses a label gpufleet sets itself, and keys and values that are no Kubernetes labels.
fn validate_labels(labels: &Known<BTreeMap<String, Known<String>>>, d: &mut Diagnostics) {
    for (k, v) in labels.value().into_iter().flatten() {
        let path = AttrPath::attr(LABELS).push_key(k.clone());
        if reserved_label(k) {
            d.error_at(
                path,
                "Reserved Label",
                format!("labels[{k:?}] is a label gpufleet sets itself; choose another key."),
            );
        } else if k8s_label::valid_key(k) {
            if let Some(v) = v.value() {
                k8s_label::check_value(&path, &Value::string(v.as_str()), d);
            }
        } else {
            k8s_label::check_key(&path, k, d);
        }
    }
}

/// Checks across attributes and inside strings that the schema's validators cannot see.
/// Unknown values are skipped.
pub(super) fn validate_virtual_cluster(config: &Value) -> Diagnostics {
    let config = ClusterConfig::decode(config);
    let mut d = Diagnostics::new();
    validate_labels(&config.labels, &mut d);
    if let Some(ns) = config.namespace.value()
        && RESERVED_NAMESPACES.contains(&ns.as_str())
    {
        let path = AttrPath::attr(NAMESPACE);
        d.error_at(
            path.clone(),
            "Reserved Namespace",
            format!(
                "{path}: {ns:?} is not a namespace a virtual cluster may own: gpufleet creates \
                 the namespace and deletes it with the virtual cluster. Not accepted: {}.",
                RESERVED_NAMESPACES.join(", ")
            ),
        );
    }
    limit_range_order(&config.limit_range, &mut d);
    if let Some(s) = config.values_override.value() {
        let path = AttrPath::attr(VALUES_OVERRIDE);
        match parse_override(s) {
            Err(why) => d.error_at(path, "Invalid values_override", why),
            Ok(Some(over)) => {
                for e in chart_schema::schema_errors(&over) {
                    let at = if e.key.is_empty() {
                        "the top level".to_owned()
                    } else {
                        e.key.clone()
                    };
                    d.error_at(
                        path.clone(),
                        "values_override Fails The vCluster Chart's Schema",
                        format!(
                            "values_override at {at}: {message}. vCluster {version}'s chart \
                             (values.schema.json) refuses it.",
                            message = e.message,
                            version = versions::VCLUSTER_VERSION,
                        ),
                    );
                }
                let unrendered = chart_schema::unrendered_settings(&over);
                for u in &unrendered {
                    d.error_at(
                        path.clone(),
                        "values_override Sets What gpufleet Does Not Render",
                        format!(
                            "values_override sets {key}, for which the vCluster chart renders \
                             {objects}. gpufleet does not render that, so it would not exist. \
                             Remove {key} from values_override and manage such objects \
                             beside the virtual cluster.",
                            key = u.key,
                            objects = u.objects,
                        ),
                    );
                }
                let refused: Vec<&str> = unrendered.iter().map(|u| u.key).collect();
                for (key, managed) in override_conflicts(&over, &refused) {
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
                node_ports_need_a_node_port_service(&config, &over, &path, &mut d);
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
