//! What a virtual cluster is made of in the host cluster, rendered from its [`Spec`]. Pure:
//! no I/O, so every tier's objects are pinned by snapshot tests.
//!
//! The objects follow the vCluster chart of the pinned release (see `versions`): the
//! StatefulSet `<name>` (no volume claim template: the data lives in an `emptyDir`), the
//! Services `<name>` and `<name>-headless`, the ServiceAccounts `vc-<name>` and
//! `vc-workload-<name>`, the Role and RoleBinding `vc-<name>`, and the Secret
//! `vc-config-<name>` whose `config.yaml` is the rendered vcluster.yaml. The tenant's
//! policy adds the ResourceQuota, LimitRange and NetworkPolicy `vc-<name>` and the pod
//! security labels of the namespace.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value as Json, json};

use super::{
    objects::{Names, ObjectKind, ObjectRef},
    spec::{Isolation, Spec},
    versions::{self, VCLUSTER_VERSION},
};
use crate::backends::kube::{ISOLATION, MANAGED_BY, MANAGED_BY_VALUE, TENANT, VIRTUAL_CLUSTER};

/// Label keys of the pod security admission.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// Warn at the same level as enforced, so users see why a pod is refused.
pub const POD_SECURITY_WARN: &str = "pod-security.kubernetes.io/warn";
/// Pod template annotation with a digest of vcluster.yaml: a changed config restarts the
/// control plane, as the chart's checksum annotation does.
pub const CONFIG_DIGEST: &str = "gpufleet.dev/config-digest";
/// Key of the config Secret that holds vcluster.yaml.
pub const CONFIG_KEY: &str = "config.yaml";

/// The host objects of a virtual cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The namespace object.
    pub namespace: Json,
    /// The objects in the namespace, in apply order.
    pub objects: Vec<(ObjectRef, Json)>,
    /// Objects this configuration does not have (a policy turned off), to delete if present.
    pub absent: Vec<ObjectRef>,
    /// The rendered vcluster.yaml (with `values_override` merged in).
    pub vcluster_yaml: String,
}

impl Rendered {
    /// The desired object for `r`, if rendered.
    pub fn object(&self, r: &ObjectRef) -> Option<&Json> {
        self.objects.iter().find(|(o, _)| o == r).map(|(_, v)| v)
    }
}

/// The labels on every object: ownership plus the user's labels.
pub fn common_labels(spec: &Spec) -> BTreeMap<String, String> {
    let mut l = spec.labels.clone();
    l.insert(MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned());
    l.insert(VIRTUAL_CLUSTER.to_owned(), spec.name.clone());
    l
}

/// The labels of the namespace: common labels, the tier and the pod security level.
pub fn namespace_labels(spec: &Spec) -> BTreeMap<String, String> {
    let mut l = common_labels(spec);
    l.insert(ISOLATION.to_owned(), spec.isolation.as_str().to_owned());
    l.insert(POD_SECURITY_ENFORCE.to_owned(), spec.pod_security.clone());
    l.insert(POD_SECURITY_WARN.to_owned(), spec.pod_security.clone());
    l
}

/// The labels the chart puts on its objects, plus the common ones.
fn chart_labels(spec: &Spec) -> BTreeMap<String, String> {
    let mut l = common_labels(spec);
    l.insert("app".to_owned(), "vcluster".to_owned());
    l.insert("release".to_owned(), spec.name.clone());
    l
}

fn selector(spec: &Spec) -> Json {
    json!({ "app": "vcluster", "release": spec.name })
}

fn meta(name: &str, spec: &Spec, labels: &BTreeMap<String, String>) -> Json {
    json!({ "name": name, "namespace": spec.namespace, "labels": labels })
}

fn object(kind: ObjectKind, metadata: Json, body: Json) -> Json {
    let mut o = Map::new();
    o.insert("apiVersion".to_owned(), Json::String(kind.api_version()));
    o.insert("kind".to_owned(), Json::String(kind.kind().to_owned()));
    o.insert("metadata".to_owned(), metadata);
    if let Json::Object(b) = body {
        o.extend(b);
    }
    Json::Object(o)
}

/// The vcluster.yaml gpufleet renders for `spec`, before `values_override`.
pub fn base_config(spec: &Spec) -> Json {
    let mut nodes = json!({ "enabled": true });
    let mut to_host_pods = json!({ "enabled": true });
    match spec.isolation {
        Isolation::Shared => {
            nodes["selector"] = json!({ "labels": { ISOLATION: "shared" } });
        }
        Isolation::Dedicated | Isolation::Private => {
            nodes["selector"] = json!({ "labels": { TENANT: spec.name } });
            to_host_pods["enforceTolerations"] =
                json!([format!("{TENANT}={}:NoSchedule", spec.name)]);
        }
    }
    let mut policies = json!({ "podSecurityStandard": spec.pod_security });
    if let Some(q) = &spec.quota {
        policies["resourceQuota"] = json!({ "enabled": true, "quota": quota_hard(q) });
    }
    if let Some(l) = &spec.limits {
        let (default, request) = limit_defaults(l);
        policies["limitRange"] = json!({
            "enabled": true, "default": default, "defaultRequest": request,
        });
    }
    if spec.network_isolation {
        policies["networkPolicy"] = json!({ "enabled": true });
    }
    let mut config = json!({
        "controlPlane": {
            "distro": { "k8s": {
                "enabled": true,
                "version": versions::distro_tag(&spec.kubernetes_version),
            } },
            "backingStore": { "database": { "embedded": { "enabled": true } } },
            "statefulSet": { "persistence": { "volumeClaim": { "enabled": false } } },
        },
        "sync": {
            "fromHost": { "nodes": nodes },
            "toHost": { "pods": to_host_pods },
        },
        "policies": policies,
    });
    if spec.isolation == Isolation::Private {
        config["privateNodes"] = json!({ "enabled": true });
    }
    if let Some(after) = &spec.sleep_after {
        config["sleep"] = json!({ "auto": { "afterInactivity": after } });
    }
    config
}

/// `over` deep-merged into `base`: mappings merge key by key, anything else replaces.
pub fn deep_merge(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => deep_merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// The final vcluster.yaml, as text.
pub fn vcluster_yaml(spec: &Spec) -> String {
    let mut config = base_config(spec);
    if let Some(over) = &spec.values_override {
        deep_merge(&mut config, over);
    }
    // Serialising a JSON value cannot fail; fall back to JSON (which is YAML) regardless.
    serde_saphyr::to_string(&config).unwrap_or_else(|_| config.to_string())
}

fn quota_hard(q: &super::spec::Quota) -> Json {
    let mut hard = Map::new();
    if let Some(c) = &q.cpu {
        hard.insert("requests.cpu".to_owned(), json!(c));
    }
    if let Some(m) = &q.memory {
        hard.insert("requests.memory".to_owned(), json!(m));
    }
    if let Some(g) = q.gpus {
        hard.insert("requests.nvidia.com/gpu".to_owned(), json!(g.to_string()));
    }
    if let Some(p) = q.pods {
        hard.insert("count/pods".to_owned(), json!(p.to_string()));
    }
    Json::Object(hard)
}

fn limit_defaults(l: &super::spec::Limits) -> (Json, Json) {
    let pair = |cpu: &Option<String>, memory: &Option<String>| {
        let mut m = Map::new();
        if let Some(c) = cpu {
            m.insert("cpu".to_owned(), json!(c));
        }
        if let Some(x) = memory {
            m.insert("memory".to_owned(), json!(x));
        }
        Json::Object(m)
    };
    (
        pair(&l.default_cpu, &l.default_memory),
        pair(&l.default_request_cpu, &l.default_request_memory),
    )
}

/// FNV-1a, 64 bits: a stable digest of the config for the restart annotation (not a
/// security measure).
fn digest(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn statefulset(spec: &Spec, names: &Names, config_yaml: &str) -> Json {
    let labels = chart_labels(spec);
    let mut pod_labels = BTreeMap::new();
    pod_labels.insert("app".to_owned(), "vcluster".to_owned());
    pod_labels.insert("release".to_owned(), spec.name.clone());
    pod_labels.insert(VIRTUAL_CLUSTER.to_owned(), spec.name.clone());
    let probe = |path: &str| {
        json!({
            "httpGet": { "path": path, "port": 8443, "scheme": "HTTPS" },
            "initialDelaySeconds": 0, "periodSeconds": 2, "failureThreshold": 60,
        })
    };
    // The control plane runs as an unprivileged user with nothing to escalate, so it is
    // admitted under every pod security level the tenant's namespace may enforce,
    // `restricted` included.
    let container_security = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": { "drop": ["ALL"] },
        "runAsNonRoot": true,
    });
    object(
        ObjectKind::StatefulSet,
        meta(&spec.name, spec, &labels),
        json!({ "spec": {
            "replicas": if spec.paused { 0 } else { 1 },
            "serviceName": names.headless(),
            "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": selector(spec) },
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": { CONFIG_DIGEST: digest(config_yaml) },
                },
                "spec": {
                    "serviceAccountName": names.vc(),
                    "terminationGracePeriodSeconds": 10,
                    "enableServiceLinks": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 12345,
                        "runAsGroup": 12345,
                        "fsGroup": 12345,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "initContainers": [{
                        "name": "kubernetes",
                        "image": format!(
                            "ghcr.io/loft-sh/kubernetes:{}",
                            versions::distro_tag(&spec.kubernetes_version)
                        ),
                        "command": ["cp"],
                        "args": ["-r", "/kubernetes/.", "/binaries/"],
                        "volumeMounts": [{ "name": "binaries", "mountPath": "/binaries" }],
                        "resources": { "requests": { "cpu": "10m", "memory": "64Mi" } },
                        "securityContext": container_security,
                    }],
                    "containers": [{
                        "name": "syncer",
                        "image": format!("ghcr.io/loft-sh/vcluster-oss:{VCLUSTER_VERSION}"),
                        "ports": [{ "name": "https", "containerPort": 8443, "protocol": "TCP" }],
                        "env": [
                            { "name": "VCLUSTER_NAME", "value": spec.name },
                            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                        ],
                        "securityContext": container_security,
                        "readinessProbe": probe("/readyz"),
                        "livenessProbe": probe("/healthz"),
                        "resources": {
                            "requests": { "cpu": "200m", "memory": "256Mi" },
                            "limits": { "memory": "2Gi" },
                        },
                        "volumeMounts": [
                            { "name": "data", "mountPath": "/data" },
                            { "name": "binaries", "mountPath": "/binaries" },
                            { "name": "vcluster-config", "mountPath": "/var/lib/vcluster", "readOnly": true },
                        ],
                    }],
                    "volumes": [
                        { "name": "data", "emptyDir": {} },
                        { "name": "binaries", "emptyDir": {} },
                        { "name": "vcluster-config", "secret": { "secretName": names.config() } },
                    ],
                },
            },
        } }),
    )
}

fn role_rules() -> Json {
    let all = [
        "create", "delete", "patch", "update", "get", "list", "watch",
    ];
    json!([
        {
            "apiGroups": [""],
            "resources": ["configmaps", "secrets", "services", "pods", "pods/attach",
                          "pods/portforward", "pods/exec", "persistentvolumeclaims"],
            "verbs": all,
        },
        { "apiGroups": [""], "resources": ["pods/status", "pods/ephemeralcontainers"], "verbs": ["patch", "update"] },
        { "apiGroups": [""], "resources": ["endpoints", "events", "pods/log"], "verbs": ["get", "list", "watch", "create"] },
        { "apiGroups": ["apps"], "resources": ["statefulsets", "replicasets", "deployments"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": all },
    ])
}

/// Renders every host object of `spec`.
pub fn render(spec: &Spec) -> Rendered {
    let names = Names {
        name: spec.name.clone(),
    };
    let yaml = vcluster_yaml(spec);
    let labels = common_labels(spec);
    let chart = chart_labels(spec);
    let namespace = object(
        ObjectKind::Namespace,
        json!({ "name": spec.namespace, "labels": namespace_labels(spec) }),
        json!({}),
    );
    let r = |kind, name: String| ObjectRef { kind, name };
    let mut objects = vec![
        (
            r(ObjectKind::ServiceAccount, names.vc()),
            object(
                ObjectKind::ServiceAccount,
                meta(&names.vc(), spec, &chart),
                json!({}),
            ),
        ),
        (
            r(ObjectKind::ServiceAccount, names.workload()),
            object(
                ObjectKind::ServiceAccount,
                meta(&names.workload(), spec, &chart),
                json!({}),
            ),
        ),
        (
            r(ObjectKind::Role, names.vc()),
            object(
                ObjectKind::Role,
                meta(&names.vc(), spec, &chart),
                json!({ "rules": role_rules() }),
            ),
        ),
        (
            r(ObjectKind::RoleBinding, names.vc()),
            object(
                ObjectKind::RoleBinding,
                meta(&names.vc(), spec, &chart),
                json!({
                    "subjects": [{ "kind": "ServiceAccount", "name": names.vc(), "namespace": spec.namespace }],
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.vc() },
                }),
            ),
        ),
        (
            r(ObjectKind::Secret, names.config()),
            object(
                ObjectKind::Secret,
                meta(&names.config(), spec, &chart),
                json!({
                    "type": "Opaque",
                    "data": { CONFIG_KEY: base64::engine::general_purpose::STANDARD.encode(&yaml) },
                }),
            ),
        ),
        (
            r(ObjectKind::Service, spec.name.clone()),
            object(
                ObjectKind::Service,
                {
                    let mut l = chart.clone();
                    l.insert("vcluster.loft.sh/service".to_owned(), "true".to_owned());
                    meta(&spec.name, spec, &l)
                },
                json!({ "spec": {
                "type": "ClusterIP",
                "ports": [{ "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" }],
                "selector": selector(spec),
            } }),
            ),
        ),
        (
            r(ObjectKind::Service, names.headless()),
            object(
                ObjectKind::Service,
                meta(&names.headless(), spec, &chart),
                json!({ "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "ports": [
                    { "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" },
                    { "name": "etcd", "port": 2379, "targetPort": 2379, "protocol": "TCP" },
                    { "name": "peer", "port": 2380, "targetPort": 2380, "protocol": "TCP" },
                ],
                "selector": selector(spec),
            } }),
            ),
        ),
    ];
    let mut absent = Vec::new();
    let mut optional = |kind: ObjectKind, body: Option<Json>| match body {
        Some(b) => objects.push((
            r(kind, names.vc()),
            object(kind, meta(&names.vc(), spec, &labels), b),
        )),
        None => absent.push(r(kind, names.vc())),
    };
    optional(
        ObjectKind::ResourceQuota,
        spec.quota
            .as_ref()
            .map(|q| json!({ "spec": { "hard": quota_hard(q) } })),
    );
    optional(
        ObjectKind::LimitRange,
        spec.limits.as_ref().map(|l| {
            let (default, request) = limit_defaults(l);
            let mut limit = json!({ "type": "Container" });
            if default.as_object().is_some_and(|m| !m.is_empty()) {
                limit["default"] = default;
            }
            if request.as_object().is_some_and(|m| !m.is_empty()) {
                limit["defaultRequest"] = request;
            }
            json!({ "spec": { "limits": [limit] } })
        }),
    );
    optional(
        ObjectKind::NetworkPolicy,
        spec.network_isolation.then(|| {
            json!({ "spec": {
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [
                    { "from": [{ "podSelector": {} }] },
                    { "ports": [{ "port": 8443, "protocol": "TCP" }] },
                ],
            } })
        }),
    );
    objects.push((
        r(ObjectKind::StatefulSet, spec.name.clone()),
        statefulset(spec, &names, &yaml),
    ));
    Rendered {
        namespace,
        objects,
        absent,
        vcluster_yaml: yaml,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_replaces_leaves_and_merges_mappings() {
        let mut base = json!({ "a": { "b": 1, "c": [1] }, "d": true });
        deep_merge(
            &mut base,
            &json!({ "a": { "c": [2], "e": "x" }, "f": null }),
        );
        assert_eq!(
            base,
            json!({ "a": { "b": 1, "c": [2], "e": "x" }, "d": true, "f": null })
        );
    }

    #[test]
    fn digest_is_stable() {
        assert_eq!(digest(""), "cbf29ce484222325");
        assert_ne!(digest("a"), digest("b"));
    }
}
