//! The control plane's StatefulSet: its pod, volumes and volume claim, and the pause
//! annotations.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use super::containers::{init_containers, syncer};
use super::metadata::{annotations, chart_labels, list, meta, object, selector, set, string_map};
use crate::backends::kube::host::ObjectKind;
use crate::resources::virtual_cluster::{
    model::Spec,
    objects::Names,
    pause, persistence, rbac,
    values::{at, is_true, text, truthy},
};

/// Pod template annotation with a digest of vcluster.yaml: a changed config restarts the
/// control plane, as the chart's `vClusterConfigHash` annotation does.
pub const CONFIG_DIGEST: &str = "gpufleet.dev/config-digest";

/// FNV-1a, 64 bits: a stable digest of the config for the restart annotation (not a
/// security measure).
pub fn config_digest(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The chart's `vcluster.database.embedded.enabled`: the embedded database is the backing
/// store when it is turned on, or when no backing store is (the chart fails on more than one;
/// gpufleet's settings turn on exactly this one).
fn embedded_database(v: &Json) -> bool {
    let stores = [
        "controlPlane.backingStore.etcd.embedded.enabled",
        "controlPlane.backingStore.etcd.deploy.enabled",
        "controlPlane.backingStore.etcd.external.enabled",
        "controlPlane.backingStore.database.embedded.enabled",
        "controlPlane.backingStore.database.external.enabled",
    ];
    !stores.iter().any(|s| truthy(v, s))
        || truthy(v, "controlPlane.backingStore.database.embedded.enabled")
}

/// The chart's `vcluster.persistence.volumeClaim.enabled`: claim templates of the user's,
/// `volumeClaim.enabled: true`, or `auto` (the default) with a backing store that keeps its
/// data in the pod (the embedded database or embedded etcd).
fn volume_claim_enabled(v: &Json) -> bool {
    let persistence = "controlPlane.statefulSet.persistence";
    truthy(v, &format!("{persistence}.volumeClaimTemplates"))
        || is_true(v, &format!("{persistence}.volumeClaim.enabled"))
        || (text(v, &format!("{persistence}.volumeClaim.enabled")) == "auto"
            && (embedded_database(v)
                || truthy(v, "controlPlane.backingStore.etcd.embedded.enabled")))
}

/// The chart's `vcluster.persistence`: the StatefulSet's `volumeClaimTemplates`, if any. The
/// one it makes is the claim `data` with `volumeClaim`'s access modes (the chart prints the
/// list with Go's `[a b]`, which reads back as this list for the single mode gpufleet allows:
/// `values_override` cannot set it), StorageClass (only when named) and size.
fn volume_claim_templates(v: &Json) -> Option<Json> {
    let persistence = "controlPlane.statefulSet.persistence";
    if let Some(t) = set(v, &format!("{persistence}.volumeClaimTemplates")) {
        return Some(t.clone());
    }
    if !volume_claim_enabled(v) {
        return None;
    }
    let claim = |k: &str| at(v, &format!("{persistence}.volumeClaim.{k}")).cloned();
    let mut spec = json!({ "accessModes": claim("accessModes").unwrap_or(Json::Null) });
    if let Some(class) = set(v, &format!("{persistence}.volumeClaim.storageClass")) {
        spec["storageClassName"] = class.clone();
    }
    spec["resources"] = json!({ "requests": { "storage": claim("size").unwrap_or(Json::Null) } });
    Some(json!([{ "metadata": { "name": persistence::CLAIM }, "spec": spec }]))
}

fn volumes(v: &Json, names: &Names) -> Vec<Json> {
    let empty = |name: &str| json!({ "name": name, "emptyDir": {} });
    let mut out = vec![empty("helm-cache")];
    out.extend(list(
        v,
        "controlPlane.statefulSet.persistence.binariesVolume",
    ));
    out.push(empty("tmp"));
    out.push(empty("certs"));
    out.push(json!({ "name": "vcluster-config", "secret": { "secretName": names.config() } }));
    let data = list(v, "controlPlane.statefulSet.persistence.dataVolume");
    if !data.is_empty() {
        out.extend(data);
    } else if !volume_claim_enabled(v) {
        // Without a claim the data lives as long as the pod.
        out.push(empty("data"));
    }
    out.extend(list(v, "controlPlane.statefulSet.persistence.addVolumes"));
    out
}

pub(super) fn statefulset(v: &Json, spec: &Spec, names: &Names, config_yaml: &str) -> Json {
    let sts = "controlPlane.statefulSet";
    let labels = chart_labels(spec, at(v, "controlPlane.statefulSet.labels"));
    let mut ann = annotations(
        v,
        "controlPlane.statefulSet.annotations",
        "controlPlane.advanced.globalMetadata.annotations",
    );
    let mut pod_labels = string_map(Some(&selector(spec)));
    pod_labels.extend(string_map(at(v, "controlPlane.statefulSet.pods.labels")));
    let mut pod_annotations = BTreeMap::new();
    pod_annotations.insert(CONFIG_DIGEST.to_owned(), config_digest(config_yaml));
    pod_annotations.extend(string_map(at(
        v,
        "controlPlane.statefulSet.pods.annotations",
    )));
    let mut pod = Map::new();
    let mut put = |k: &str, x: Json| {
        pod.insert(k.to_owned(), x);
    };
    if let Some(x) = set(v, "controlPlane.statefulSet.hostAliases") {
        put("hostAliases", x.clone());
    }
    if let Some(x) = set(v, "controlPlane.statefulSet.runtimeClassName") {
        put("runtimeClassName", x.clone());
    }
    put("terminationGracePeriodSeconds", json!(15));
    for (setting, field) in [
        ("scheduling.priorityClassName", "priorityClassName"),
        ("security.podSecurityContext", "securityContext"),
        ("scheduling.nodeSelector", "nodeSelector"),
        ("scheduling.affinity", "affinity"),
        (
            "scheduling.topologySpreadConstraints",
            "topologySpreadConstraints",
        ),
        ("scheduling.tolerations", "tolerations"),
        ("dnsPolicy", "dnsPolicy"),
        ("dnsConfig", "dnsConfig"),
    ] {
        if let Some(x) = set(v, &format!("{sts}.{setting}")) {
            put(field, x.clone());
        }
    }
    put(
        "serviceAccountName",
        json!(rbac::service_account(v, &spec.name)),
    );
    put("volumes", json!(volumes(v, names)));
    if !truthy(v, "experimental.syncSettings.disableSync") {
        put("initContainers", json!(init_containers(v)));
    }
    put(
        "enableServiceLinks",
        at(v, "controlPlane.statefulSet.enableServiceLinks")
            .cloned()
            .unwrap_or(json!(true)),
    );
    let mut containers = vec![syncer(v, spec)];
    containers.extend(list(v, "controlPlane.statefulSet.sidecarContainers"));
    put("containers", json!(containers));
    let running = at(v, "controlPlane.statefulSet.highAvailability.replicas")
        .cloned()
        .unwrap_or(json!(1));
    let replicas = if spec.paused {
        // As `vcluster pause` leaves it, so that `vcluster resume` would scale back to what
        // gpufleet runs; the date is stamped by apply ([`Rendered::set_paused_date`]).
        ann.insert(pause::PAUSED.to_owned(), "true".to_owned());
        ann.insert(pause::PAUSED_REPLICAS.to_owned(), replica_count(&running));
        json!(0)
    } else {
        running
    };
    let policy = at(v, "controlPlane.statefulSet.scheduling.podManagementPolicy")
        .cloned()
        .unwrap_or(json!("Parallel"));
    let mut body = json!({
        "selector": { "matchLabels": selector(spec) },
        "serviceName": names.headless(),
        "podManagementPolicy": policy,
        "replicas": replicas,
        "template": {
            "metadata": { "annotations": pod_annotations, "labels": pod_labels },
            "spec": pod,
        },
    });
    // The chart writes the retention policy into every StatefulSet it makes, on Kubernetes
    // 1.27 and later (older API servers, where the field is off by default, drop it).
    if volume_claim_enabled(v) || truthy(v, "controlPlane.backingStore.etcd.embedded.enabled") {
        body["persistentVolumeClaimRetentionPolicy"] = json!({
            "whenDeleted": at(v, "controlPlane.statefulSet.persistence.volumeClaim.retentionPolicy"),
        });
    }
    if let Some(templates) = volume_claim_templates(v) {
        body["volumeClaimTemplates"] = templates;
    }
    object(
        ObjectKind::StatefulSet,
        meta(&spec.name, Some(&spec.namespace), &labels, &ann),
        json!({ "spec": body }),
    )
}

/// A replica count as the annotation's text (`1` when it is no number).
fn replica_count(replicas: &Json) -> String {
    match replicas {
        Json::Number(n) => n.to_string(),
        Json::String(s) => s.clone(),
        _ => "1".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_stable() {
        assert_eq!(config_digest(""), "cbf29ce484222325");
        assert_ne!(config_digest("a"), config_digest("b"));
    }
}
