//! vcluster.yaml as `helm install` of the pinned chart would write it into Secret
//! `vc-config-<name>`: the chart's own values (`chart_values.json`, generated from the
//! release's `chart/values.yaml`), then gpufleet's settings for the virtual cluster, then
//! `values_override`.
//!
//! vCluster's syncer reads that file with a strict decoder into an empty configuration and
//! adds no defaults of its own, so the file must be complete: without the chart's values the
//! API server, controller manager, CoreDNS and most syncers would stay off.
//!
//! The merge follows Helm. The value files given to `helm install` merge first, in order
//! (mappings key by key, anything else replaces, a `null` is kept); the result is then laid
//! over the chart's values, where a `null` removes the key. gpufleet uses that to drop chart
//! defaults it does not want (the chart's default quota keys, say) exactly as a Helm user
//! would.
//!
//! gpufleet's settings ([`settings`]) are plain chart values, so the conformance test can hand
//! the same file to `helm template` and compare.

use std::sync::OnceLock;

use serde_json::{Map, Value as Json, json};

use super::{
    controller_manager::{self, Switches},
    expose,
    model::{Isolation, Limits, Quota, Spec},
    persistence::Persistence,
    versions::{self, VCLUSTER_VERSION},
};

pub use super::yaml::to_yaml;
use crate::backends::kube::{ISOLATION, TENANT, VIRTUAL_CLUSTER};

/// The chart's `values.yaml` of the pinned release, as JSON (a fact file: regenerate it with
/// the conformance test when the release changes).
const CHART_VALUES: &str = include_str!("chart_values.json");

/// The image repository of vCluster's open-source syncer. The chart defaults to
/// `loft-sh/vcluster-pro`, whose optional modules need a licence; gpufleet renders OSS
/// vCluster.
pub const OSS_IMAGE_REPOSITORY: &str = "loft-sh/vcluster-oss";

/// The user and group the control plane runs as, so that it is admitted under every pod
/// security level, `restricted` included (the chart's default is root).
pub const CONTROL_PLANE_UID: i64 = 12345;

/// The chart's values of the pinned release.
pub fn chart_defaults() -> &'static Json {
    static DEFAULTS: OnceLock<Json> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        // The file is part of the source and checked by the tests; it cannot be invalid.
        serde_json::from_str(CHART_VALUES).expect("chart_values.json is valid JSON")
    })
}

/// Merges value file `over` into `base` as Helm merges several `-f` files: mappings key by
/// key, anything else (a `null` too) replaces.
pub fn merge_value_files(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge_value_files(slot, v),
                    Some(slot) => *slot = v.clone(),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// Lays user values over the chart's `defaults` as Helm does: the user's value wins, mappings
/// merge key by key, and a `null` removes the key (at the top level only where the chart has
/// the key, as Helm does).
pub fn coalesce(user: &Json, defaults: &Json) -> Json {
    let (Json::Object(u), Json::Object(d)) = (user, defaults) else {
        return user.clone();
    };
    let mut out = u.clone();
    for (k, dv) in d {
        match u.get(k) {
            Some(Json::Null) => {
                out.shift_remove(k);
            }
            Some(uv @ Json::Object(_)) if dv.is_object() => {
                out.insert(k.clone(), coalesce_tables(uv, dv));
            }
            Some(_) => {}
            None => {
                out.insert(k.clone(), dv.clone());
            }
        }
    }
    Json::Object(out)
}

/// Helm's table coalescing below the top level: a `null` always removes its key.
fn coalesce_tables(dst: &Json, src: &Json) -> Json {
    let (Json::Object(dm), Json::Object(sm)) = (dst, src) else {
        return dst.clone();
    };
    let mut out: Map<String, Json> = dm
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, sv) in sm {
        match dm.get(k) {
            Some(Json::Null) => {}
            Some(dv) if dv.is_object() && sv.is_object() => {
                out.insert(k.clone(), coalesce_tables(dv, sv));
            }
            Some(_) => {}
            None => {
                out.insert(k.clone(), sv.clone());
            }
        }
    }
    Json::Object(out)
}

/// The keys of `table` in `defaults` that `keep` lacks, each set to `null`, plus `keep`: the
/// way to say "exactly these keys" in a value file.
fn exactly(defaults: Option<&Json>, keep: Map<String, Json>) -> Json {
    let mut out = Map::new();
    if let Some(Json::Object(d)) = defaults {
        for k in d.keys() {
            if !keep.contains_key(k) {
                out.insert(k.clone(), Json::Null);
            }
        }
    }
    out.extend(keep);
    Json::Object(out)
}

fn quota_hard(q: &Quota) -> Map<String, Json> {
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
    hard
}

fn limit_pair(cpu: Option<&String>, memory: Option<&String>) -> Map<String, Json> {
    let mut m = Map::new();
    if let Some(c) = cpu {
        m.insert("cpu".to_owned(), json!(c));
    }
    if let Some(x) = memory {
        m.insert("memory".to_owned(), json!(x));
    }
    m
}

fn limit_range(l: &Limits, defaults: &Json) -> Json {
    let lr = defaults.pointer("/policies/limitRange");
    json!({
        "enabled": true,
        "default": exactly(
            lr.and_then(|x| x.get("default")),
            limit_pair(l.default_cpu.as_ref(), l.default_memory.as_ref()),
        ),
        "defaultRequest": exactly(
            lr.and_then(|x| x.get("defaultRequest")),
            limit_pair(l.default_request_cpu.as_ref(), l.default_request_memory.as_ref()),
        ),
    })
}

/// `controlPlane.statefulSet.persistence.volumeClaim` of `p`: the size, and the StorageClass
/// when one is named (the chart's `""` leaves the class to the cluster's default).
fn volume_claim(p: &Persistence) -> Json {
    let mut claim = json!({ "size": p.size });
    if let Some(class) = &p.storage_class {
        claim["storageClass"] = json!(class);
    }
    claim
}

/// gpufleet's settings for `spec`: the chart values it sets, as a value file for
/// `helm install` (a `null` removes a chart default).
///
/// - The Kubernetes distro at the chosen version, with the embedded database (SQLite through
///   kine), and vCluster's OSS image of the pinned release. The chart's default volume claim
///   (`persistence.volumeClaim.enabled: auto`, which the embedded database turns on) keeps the
///   data, with the size and StorageClass of `persistence`.
/// - The control plane runs as user and group 12345 with no privileges, so that it is
///   admitted under every pod security level, and requests no ephemeral storage (nodes that
///   do not report any, such as kwok's, could not schedule it).
/// - Node sync: host nodes labelled `gpufleet.dev/isolation=shared` on the shared tier; on
///   the dedicated and private tiers the nodes labelled `gpufleet.dev/tenant=<name>`, whose
///   taint every synced pod tolerates (vCluster then also pins pods to those nodes).
/// - Policies from `quota`, `limit_range`, `network_isolation` and `pod_security`, each
///   explicitly on or off (the chart's `auto` would render a LimitRange whenever there is a
///   quota), with exactly the quota and limit keys the attributes give.
/// - The type of the API server's Service from `expose.type`, and `expose.host` as the one
///   extra name of the serving certificate (`controlPlane.proxy.extraSANs`). Without a way
///   in from outside (a ClusterIP Service, no host), the exported kubeconfig names the
///   Service's cluster DNS name instead, which the certificate then covers.
pub fn settings(spec: &Spec) -> Json {
    let defaults = chart_defaults();
    let mut nodes = json!({ "enabled": true });
    let mut pods = Map::new();
    match spec.isolation {
        Isolation::Shared => {
            nodes["selector"] = json!({ "labels": { ISOLATION: "shared" } });
        }
        Isolation::Dedicated | Isolation::Private => {
            nodes["selector"] = json!({ "labels": { TENANT: spec.name } });
            pods.insert(
                "enforceTolerations".to_owned(),
                json!([format!("{TENANT}={}:NoSchedule", spec.name)]),
            );
        }
    }
    let mut policies = json!({
        "podSecurityStandard": spec.pod_security,
        "networkPolicy": { "enabled": spec.network_isolation },
    });
    policies["resourceQuota"] = match &spec.quota {
        Some(q) => json!({
            "enabled": true,
            "quota": exactly(defaults.pointer("/policies/resourceQuota/quota"), quota_hard(q)),
        }),
        None => json!({ "enabled": false }),
    };
    policies["limitRange"] = match &spec.limits {
        Some(l) => limit_range(l, defaults),
        None => json!({ "enabled": false }),
    };
    let no_privileges = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": { "drop": ["ALL"] },
        "runAsNonRoot": true,
    });
    let mut container_security = no_privileges.clone();
    container_security["runAsUser"] = json!(CONTROL_PLANE_UID);
    container_security["runAsGroup"] = json!(CONTROL_PLANE_UID);
    let mut sync = json!({ "fromHost": { "nodes": nodes } });
    if !pods.is_empty() {
        sync["toHost"] = json!({ "pods": pods });
    }
    let mut out = json!({
        "controlPlane": {
            "distro": { "k8s": {
                "enabled": true,
                "version": versions::distro_tag(&spec.kubernetes_version),
                "securityContext": no_privileges,
            } },
            "backingStore": { "database": { "embedded": { "enabled": true } } },
            "service": { "spec": { "type": spec.expose.service_type.as_str() } },
            "statefulSet": {
                "image": { "repository": OSS_IMAGE_REPOSITORY, "tag": VCLUSTER_VERSION },
                "persistence": { "volumeClaim": volume_claim(&spec.persistence) },
                "pods": { "labels": { VIRTUAL_CLUSTER: spec.name } },
                "resources": {
                    "limits": { "ephemeral-storage": null },
                    "requests": { "ephemeral-storage": null },
                },
                "security": {
                    "podSecurityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": CONTROL_PLANE_UID,
                        "runAsGroup": CONTROL_PLANE_UID,
                        "fsGroup": CONTROL_PLANE_UID,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "containerSecurityContext": container_security,
                },
            },
        },
        "sync": sync,
        "policies": policies,
    });
    if let Some(host) = &spec.expose.host {
        out["controlPlane"]["proxy"] = json!({ "extraSANs": [host] });
    } else if spec.expose.in_cluster_only() {
        let service = expose::in_cluster_name(&spec.name, &spec.namespace);
        out["controlPlane"]["proxy"] = json!({ "extraSANs": [service] });
        out["exportKubeConfig"] = json!({ "server": expose::url(&service, expose::HTTPS_PORT) });
    }
    out
}

/// The user's value files for `spec`: gpufleet's settings, then `values_override`, then the
/// controller manager's controllers, which depend on both (no taint eviction).
pub fn user_values(spec: &Spec) -> Json {
    let mut user = settings(spec);
    if let Some(over) = &spec.values_override {
        merge_value_files(&mut user, over);
    }
    let args = controller_manager::extra_args(Switches {
        virtual_scheduler: is_true(&user, "controlPlane.advanced.virtualScheduler.enabled"),
        resource_claim_templates: is_true(&user, "sync.toHost.resourceClaimTemplates.enabled"),
    });
    // `settings` wrote this mapping, and `values_override` may not replace it.
    if let Some(k8s) = user
        .pointer_mut("/controlPlane/distro/k8s")
        .and_then(Json::as_object_mut)
    {
        k8s.insert("controllerManager".to_owned(), json!({ "extraArgs": args }));
    }
    user
}

/// The complete vcluster.yaml of `spec`, as a value.
pub fn values(spec: &Spec) -> Json {
    coalesce(&user_values(spec), chart_defaults())
}

/// The value at a dotted path (`a.b.c`), if any.
pub fn at<'a>(values: &'a Json, dotted: &str) -> Option<&'a Json> {
    dotted
        .split('.')
        .try_fold(values, |v, k| v.as_object().and_then(|m| m.get(k)))
}

/// Go template truthiness, as the chart's `if` sees the value at `dotted`: false, 0, "",
/// null, an empty list or mapping, and a missing key are false.
pub fn truthy(values: &Json, dotted: &str) -> bool {
    match at(values, dotted) {
        None | Some(Json::Null) => false,
        Some(Json::Bool(b)) => *b,
        Some(Json::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Json::String(s)) => !s.is_empty(),
        Some(Json::Array(xs)) => !xs.is_empty(),
        Some(Json::Object(m)) => !m.is_empty(),
    }
}

/// Whether the value at `dotted` prints as `true` (the chart's `eq (toString …) "true"`, for
/// settings that may also be `auto`).
pub fn is_true(values: &Json, dotted: &str) -> bool {
    match at(values, dotted) {
        Some(Json::Bool(b)) => *b,
        Some(Json::String(s)) => s == "true",
        _ => false,
    }
}

/// The string at `dotted`, or "".
pub fn text<'a>(values: &'a Json, dotted: &str) -> &'a str {
    at(values, dotted)
        .and_then(Json::as_str)
        .unwrap_or_default()
}

/// A vCluster feature that OSS vCluster does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProFeature {
    /// The dotted key that turns it on.
    pub key: &'static str,
    /// What it needs: `vCluster Pro` or `vCluster Platform`.
    pub needs: &'static str,
}

/// The settings that make vCluster refuse to run without a licence (vCluster's own
/// `IsProFeatureEnabled`), with what each needs.
const PRO_FEATURES: &[(&str, Presence, &str)] = &[
    ("networking.resolveDNS", Presence::NonEmpty, PRO),
    ("controlPlane.coredns.embedded", Presence::True, PRO),
    (
        "controlPlane.backingStore.database.external.enabled",
        Presence::True,
        PRO,
    ),
    (
        "controlPlane.backingStore.etcd.embedded.enabled",
        Presence::True,
        PRO,
    ),
    (
        "policies.centralAdmission.validatingWebhooks",
        Presence::NonEmpty,
        PRO,
    ),
    (
        "policies.centralAdmission.mutatingWebhooks",
        Presence::NonEmpty,
        PRO,
    ),
    ("controlPlane.hostPathMapper.central", Presence::True, PRO),
    ("experimental.denyProxyRequests", Presence::NonEmpty, PRO),
    ("sync.toHost.customResources", Presence::NonEmpty, PRO),
    ("sync.fromHost.customResources", Presence::NonEmpty, PRO),
    ("sync.toHost.namespaces.enabled", Presence::True, PRO),
    (
        "sync.toHost.pods.hybridScheduling.enabled",
        Presence::True,
        PRO,
    ),
    ("privateNodes.enabled", Presence::True, PRO),
    (
        "sync.toHost.resourceClaimTemplates.enabled",
        Presence::True,
        PRO,
    ),
    ("sync.toHost.resourceClaims.enabled", Presence::True, PRO),
    ("sync.fromHost.deviceClasses.enabled", Presence::True, PRO),
    ("sleep", Presence::Set, PLATFORM),
    ("snapshots", Presence::Set, PLATFORM),
    ("deletion", Presence::Set, PLATFORM),
    ("platform", Presence::Set, PLATFORM),
];

const PRO: &str = "vCluster Pro";
const PLATFORM: &str = "vCluster Platform";

#[derive(Debug, Clone, Copy)]
enum Presence {
    True,
    NonEmpty,
    Set,
}

/// The licensed features `values` turns on.
pub fn pro_features(values: &Json) -> Vec<ProFeature> {
    PRO_FEATURES
        .iter()
        .filter(|(key, presence, _)| match presence {
            Presence::True => at(values, key) == Some(&Json::Bool(true)),
            Presence::NonEmpty => truthy(values, key),
            Presence::Set => at(values, key).is_some_and(|v| !v.is_null()),
        })
        .map(|(key, _, needs)| ProFeature { key, needs })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_files_merge_like_helm() {
        let mut base = json!({ "a": { "b": 1, "c": [1] }, "d": true, "e": { "f": 1 } });
        merge_value_files(
            &mut base,
            &json!({ "a": { "c": [2], "x": "y" }, "d": null, "e": 3 }),
        );
        assert_eq!(
            base,
            json!({ "a": { "b": 1, "c": [2], "x": "y" }, "d": null, "e": 3 })
        );
    }

    #[test]
    fn nulls_remove_chart_defaults() {
        let defaults = json!({
            "q": { "cpu": 10, "pods": 20, "deep": { "x": 1 } },
            "keep": { "a": 1 },
            "gone": 1,
        });
        let user = json!({
            "q": { "cpu": null, "pods": "5", "deep": { "x": null, "y": null }, "new": null },
            "gone": null,
            "extra": null,
        });
        assert_eq!(
            coalesce(&user, &defaults),
            // Helm keeps a top-level null the chart does not know.
            json!({ "q": { "pods": "5", "deep": {} }, "keep": { "a": 1 }, "extra": null })
        );
    }

    #[test]
    fn user_values_win_over_tables_and_scalars() {
        let defaults = json!({ "t": { "a": 1 }, "s": 1 });
        let user = json!({ "t": 5, "s": { "b": 2 } });
        assert_eq!(
            coalesce(&user, &defaults),
            json!({ "t": 5, "s": { "b": 2 } })
        );
    }

    #[test]
    fn yaml_round_trips_with_sorted_keys() {
        let v =
            json!({ "b": [1, "1", "true", "0.0.0.0", 2.5, null], "a": { "z": false, "y": "" } });
        let text = to_yaml(&v);
        assert!(text.find("a:") < text.find("b:"), "{text}");
        let back: Json = serde_saphyr::from_str(&text).expect("parse");
        assert_eq!(back, v);
        let chart = chart_defaults();
        let back: Json = serde_saphyr::from_str(&to_yaml(chart)).expect("parse");
        assert_eq!(&back, chart);
    }

    #[test]
    fn truthiness_follows_go_templates() {
        let v = json!({ "a": { "t": true, "f": false, "auto": "auto", "l": [], "m": {"k": 1}, "z": 0 } });
        assert!(truthy(&v, "a.t"));
        assert!(!truthy(&v, "a.f"));
        assert!(truthy(&v, "a.auto"));
        assert!(!is_true(&v, "a.auto"));
        assert!(!truthy(&v, "a.l"));
        assert!(truthy(&v, "a.m"));
        assert!(!truthy(&v, "a.z"));
        assert!(!truthy(&v, "a.missing.deeper"));
    }

    #[test]
    fn pro_features_are_found() {
        let mut v = chart_defaults().clone();
        assert_eq!(pro_features(&v), Vec::new());
        merge_value_files(
            &mut v,
            &json!({ "privateNodes": { "enabled": true }, "sleep": { "auto": {} } }),
        );
        let keys: Vec<&str> = pro_features(&v).iter().map(|f| f.key).collect();
        assert_eq!(keys, ["privateNodes.enabled", "sleep"]);
    }
}
