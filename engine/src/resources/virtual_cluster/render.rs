//! What a virtual cluster is made of in the host cluster, rendered from its [`Spec`]. Pure:
//! no I/O, so every tier's objects are pinned by snapshot tests, and the conformance test
//! compares them with what `helm template` makes of the pinned chart.
//!
//! First the complete vcluster.yaml ([`values`]: the chart's values, gpufleet's settings,
//! `values_override`); then every object from those values, as the chart's templates would:
//!
//! - ServiceAccounts `vc-<name>` and `vc-workload-<name>`, Role and RoleBinding `vc-<name>`,
//!   and, when the control plane reads cluster-scoped objects (host nodes, on every tier), the
//!   ClusterRole and ClusterRoleBinding `vc-<name>-v-<namespace>` ([`rbac`]);
//! - the Secret `vc-config-<name>`, whose `config.yaml` is the vcluster.yaml;
//! - the Service `<name>`; the ResourceQuota and LimitRange `vc-<name>` and the
//!   NetworkPolicies `vc-work-`, `vc-cp-`, `vc-kube-dns-` and `vc-snapshot-<name>` when the
//!   tenant's policy asks for them;
//! - the control plane itself: the StatefulSet `<name>` with its headless Service
//!   `<name>-headless` and the volume claim template `data` that keeps its data
//!   ([`persistence`](super::persistence)), scaled to zero and annotated as `vcluster pause`
//!   leaves it when paused ([`pause`]).
//!
//! Where gpufleet differs from the chart, on purpose (the conformance test's allow-list says
//! why, entry by entry): the namespace is gpufleet's and carries the tier and pod security
//! labels; objects carry gpufleet's ownership labels instead of Helm's; and the pod template's
//! restart annotation is gpufleet's digest of the config. The chart would make the control
//! plane a Deployment were there no volume claim; gpufleet, which always has one, always makes
//! a StatefulSet.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value as Json, json};

use super::{
    model::Spec,
    objects::{Names, ObjectRef},
    pause, rbac,
    values::{self, at, is_true, text, truthy},
};
use crate::backends::kube::{
    ISOLATION, MANAGED_BY, MANAGED_BY_VALUE, VIRTUAL_CLUSTER, host::ObjectKind,
};

/// Label keys of the pod security admission.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// Warn at the same level as enforced, so users see why a pod is refused.
pub const POD_SECURITY_WARN: &str = "pod-security.kubernetes.io/warn";
/// Pod template annotation with a digest of vcluster.yaml: a changed config restarts the
/// control plane, as the chart's `vClusterConfigHash` annotation does.
pub const CONFIG_DIGEST: &str = "gpufleet.dev/config-digest";
/// Key of the config Secret that holds vcluster.yaml.
pub const CONFIG_KEY: &str = "config.yaml";

/// The host objects of a virtual cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The namespace object.
    pub namespace: Json,
    /// The other objects, in apply order.
    pub objects: Vec<(ObjectRef, Json)>,
    /// Objects this configuration does not have (a policy turned off, or one an earlier
    /// release wrote), to delete if present.
    pub absent: Vec<ObjectRef>,
    /// The complete vcluster.yaml, as a value.
    pub values: Json,
    /// The same, as the text stored in the config Secret.
    pub vcluster_yaml: String,
}

impl Rendered {
    /// The desired object for `r`, if rendered.
    pub fn object(&self, r: &ObjectRef) -> Option<&Json> {
        self.objects.iter().find(|(o, _)| o == r).map(|(_, v)| v)
    }

    /// Stamps the StatefulSet of a paused virtual cluster with `date`
    /// ([`pause::PAUSED_DATE`]); does nothing when it is not paused. Kept out of [`render`],
    /// which is pure; refresh does not compare it, so it causes no drift.
    pub fn set_paused_date(&mut self, date: &str) {
        let sts = self
            .objects
            .iter_mut()
            .find(|(r, _)| r.kind == ObjectKind::StatefulSet)
            .map(|(_, o)| o);
        let key = pause::PAUSED.replace('/', "~1");
        if let Some(o) = sts
            && o.pointer(&format!("/metadata/annotations/{key}")) == Some(&json!("true"))
        {
            o["metadata"]["annotations"][pause::PAUSED_DATE] = json!(date);
        }
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

/// The chart's labels (`app`, `release`) plus the common ones and those a chart setting
/// adds, which cannot replace gpufleet's ownership labels: refresh finds the objects by them.
fn chart_labels(spec: &Spec, extra: Option<&Json>) -> BTreeMap<String, String> {
    let mut l = common_labels(spec);
    l.insert("app".to_owned(), "vcluster".to_owned());
    l.insert("release".to_owned(), spec.name.clone());
    l.extend(string_map(extra));
    l.insert(MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned());
    l.insert(VIRTUAL_CLUSTER.to_owned(), spec.name.clone());
    l
}

/// A mapping setting as strings (labels and annotations).
fn string_map(v: Option<&Json>) -> BTreeMap<String, String> {
    v.and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), scalar_text(x)))
                .collect()
        })
        .unwrap_or_default()
}

/// A scalar as the chart's `quote` prints it.
fn scalar_text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The chart's `merge dict a b`: keys of `a` win.
fn annotations(values: &Json, first: &str, second: &str) -> BTreeMap<String, String> {
    let mut out = string_map(at(values, second));
    out.extend(string_map(at(values, first)));
    out
}

fn meta(
    name: &str,
    namespace: Option<&str>,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Json {
    let mut m = json!({ "name": name });
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m["labels"] = json!(labels);
    if !annotations.is_empty() {
        m["annotations"] = json!(annotations);
    }
    m
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

fn selector(spec: &Spec) -> Json {
    json!({ "app": "vcluster", "release": spec.name })
}

/// The value at `dotted` when it is set (not null, not empty).
fn set<'a>(values: &'a Json, dotted: &str) -> Option<&'a Json> {
    truthy(values, dotted).then(|| at(values, dotted)).flatten()
}

/// The list at `dotted`, or none.
fn list(values: &Json, dotted: &str) -> Vec<Json> {
    at(values, dotted)
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The final vcluster.yaml of `spec`, as text.
pub fn vcluster_yaml(spec: &Spec) -> String {
    values::to_yaml(&values::values(spec))
}

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

/// The `kubernetes` init container (`_init-containers.tpl`), which copies the Kubernetes
/// binaries for the syncer to run.
fn init_containers(v: &Json) -> Vec<Json> {
    let tag = {
        let version = text(v, "controlPlane.distro.k8s.version");
        let base = if version.is_empty() {
            text(v, "controlPlane.distro.k8s.image.tag")
        } else {
            version
        };
        if truthy(v, "privateNodes.enabled") {
            format!("{base}-full")
        } else {
            base.to_owned()
        }
    };
    let mut c = json!({
        "name": "kubernetes",
        "image": image(
            v,
            "controlPlane.distro.k8s.image.registry",
            "controlPlane.distro.k8s.image.repository",
            &tag,
        ),
        "volumeMounts": [{ "mountPath": "/binaries", "name": "binaries" }],
        "command": ["cp"],
        "args": ["-r", "/kubernetes/.", "/binaries/"],
    });
    if let Some(p) = set(v, "controlPlane.distro.k8s.imagePullPolicy") {
        c["imagePullPolicy"] = p.clone();
    }
    c["securityContext"] = at(v, "controlPlane.distro.k8s.securityContext")
        .cloned()
        .unwrap_or(json!({}));
    c["resources"] = at(v, "controlPlane.distro.k8s.resources")
        .cloned()
        .unwrap_or(json!({}));
    let mut out = vec![c];
    out.extend(list(v, "controlPlane.statefulSet.initContainers"));
    out
}

/// `vcluster.image`: the default registry, else the image's, then repository and tag.
fn image(v: &Json, registry: &str, repository: &str, tag: &str) -> String {
    let default = text(v, "controlPlane.advanced.defaultImageRegistry");
    let registry = if default.is_empty() {
        text(v, registry)
    } else {
        default
    };
    let repository = text(v, repository);
    if registry.is_empty() {
        format!("{repository}:{tag}")
    } else {
        format!("{registry}/{repository}:{tag}")
    }
}

fn probe(v: &Json, which: &str, path: &str, initial_delay: bool) -> Option<Json> {
    let base = format!("controlPlane.statefulSet.probes.{which}");
    if !truthy(v, &format!("{base}.enabled")) {
        return None;
    }
    let num = |k: &str| at(v, &format!("{base}.{k}")).cloned().unwrap_or(Json::Null);
    let mut p = json!({ "httpGet": { "path": path, "port": 8443, "scheme": "HTTPS" } });
    if initial_delay {
        p["initialDelaySeconds"] = num("initialDelaySeconds");
    }
    p["periodSeconds"] = num("periodSeconds");
    p["timeoutSeconds"] = num("timeoutSeconds");
    p["failureThreshold"] = num("failureThreshold");
    Some(p)
}

/// The syncer container (`statefulset.yaml`).
fn syncer(v: &Json, spec: &Spec) -> Json {
    let sts = "controlPlane.statefulSet";
    // The chart falls back to its own version, which is the pinned release.
    let tag = text(v, "controlPlane.statefulSet.image.tag");
    let tag = if tag.is_empty() {
        super::versions::VCLUSTER_VERSION
    } else {
        tag
    };
    let mut c = json!({
        "name": "syncer",
        "image": image(
            v,
            "controlPlane.statefulSet.image.registry",
            "controlPlane.statefulSet.image.repository",
            tag,
        ),
    });
    for (setting, field) in [
        ("imagePullPolicy", "imagePullPolicy"),
        ("workingDir", "workingDir"),
        ("command", "command"),
        ("args", "args"),
    ] {
        if let Some(x) = set(v, &format!("{sts}.{setting}")) {
            c[field] = x.clone();
        }
    }
    if let Some(p) = probe(v, "livenessProbe", "/healthz", true) {
        c["livenessProbe"] = p;
    }
    if let Some(p) = probe(v, "readinessProbe", "/readyz", false) {
        c["readinessProbe"] = p;
    }
    if let Some(p) = probe(v, "startupProbe", "/readyz", false) {
        c["startupProbe"] = p;
    }
    let kube_vip = truthy(v, "controlPlane.advanced.kubeVip.enabled");
    if truthy(
        v,
        "controlPlane.statefulSet.security.containerSecurityContext",
    ) || kube_vip
    {
        let mut sc = at(
            v,
            "controlPlane.statefulSet.security.containerSecurityContext",
        )
        .cloned()
        .unwrap_or(json!({}));
        if kube_vip {
            let mut caps: Vec<Json> = sc
                .pointer("/capabilities/add")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default();
            for cap in ["NET_ADMIN", "NET_RAW"] {
                if !caps.iter().any(|c| c == cap) {
                    caps.push(json!(cap));
                }
            }
            if !sc["capabilities"].is_object() {
                sc["capabilities"] = json!({});
            }
            sc["capabilities"]["add"] = json!(caps);
        }
        c["securityContext"] = sc;
    }
    c["resources"] = at(v, "controlPlane.statefulSet.resources")
        .cloned()
        .unwrap_or(json!({}));
    let field = |name: &str, path: &str| json!({ "name": name, "valueFrom": { "fieldRef": { "fieldPath": path } } });
    let mut env = vec![json!({ "name": "VCLUSTER_NAME", "value": spec.name })];
    if truthy(v, "logging") {
        let encoding = text(v, "logging.encoding");
        env.push(json!({
            "name": "LOFT_LOG_ENCODING",
            "value": if encoding.is_empty() { "console" } else { encoding },
        }));
    }
    env.push(field("POD_NAME", "metadata.name"));
    env.push(field("POD_IP", "status.podIP"));
    env.push(field("NODE_NAME", "spec.nodeName"));
    env.push(field("NODE_IP", "status.hostIP"));
    env.extend(list(v, "controlPlane.statefulSet.env"));
    env.extend(list(v, "controlPlane.distro.k8s.env"));
    c["env"] = json!(env);
    let mount = |name: &str, path: &str| json!({ "name": name, "mountPath": path });
    let mut mounts = vec![
        mount("data", "/data"),
        mount("binaries", "/binaries"),
        mount("certs", "/pki"),
        mount("helm-cache", "/.cache/helm"),
        mount("vcluster-config", "/var/lib/vcluster"),
        mount("tmp", "/tmp"),
    ];
    mounts.extend(list(
        v,
        "controlPlane.statefulSet.persistence.addVolumeMounts",
    ));
    c["volumeMounts"] = json!(mounts);
    c
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
    Some(json!([{ "metadata": { "name": super::persistence::CLAIM }, "spec": spec }]))
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

fn statefulset(v: &Json, spec: &Spec, names: &Names, config_yaml: &str) -> Json {
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

fn service(v: &Json, spec: &Spec) -> Json {
    let mut labels = chart_labels(spec, None);
    labels.insert("vcluster.loft.sh/service".to_owned(), "true".to_owned());
    labels.extend(string_map(at(v, "controlPlane.service.labels")));
    let ann = annotations(
        v,
        "controlPlane.advanced.globalMetadata.annotations",
        "controlPlane.service.annotations",
    );
    let mut body = at(v, "controlPlane.service.spec")
        .cloned()
        .filter(Json::is_object)
        .unwrap_or(json!({}));
    let node_port = |setting: &str, port: &mut Json| {
        if let Some(n) = at(v, setting).filter(|n| n.as_i64() != Some(0) && !n.is_null()) {
            port["nodePort"] = n.clone();
        }
    };
    if !truthy(v, "controlPlane.service.spec.ports") {
        let mut ports = Vec::new();
        let mut https =
            json!({ "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" });
        node_port("controlPlane.service.httpsNodePort", &mut https);
        ports.push(https);
        if truthy(v, "integrations.istio.enabled") {
            let mut wake = json!({ "name": "wake-http", "port": 9090, "protocol": "TCP" });
            node_port("controlPlane.service.httpsNodePort", &mut wake);
            ports.push(wake);
        }
        if truthy(v, "networking.advanced.proxyKubelets.byHostname")
            && text(v, "controlPlane.service.spec.type") != "LoadBalancer"
        {
            let mut kubelet =
                json!({ "name": "kubelet", "port": 10250, "targetPort": 8443, "protocol": "TCP" });
            node_port("controlPlane.service.kubeletNodePort", &mut kubelet);
            ports.push(kubelet);
        }
        body["ports"] = json!(ports);
    }
    if !truthy(v, "controlPlane.service.spec.selector") {
        body["selector"] = selector(spec);
    }
    object(
        ObjectKind::Service,
        meta(&spec.name, Some(&spec.namespace), &labels, &ann),
        json!({ "spec": body }),
    )
}

fn headless_service(v: &Json, spec: &Spec, names: &Names) -> Json {
    let labels = chart_labels(spec, at(v, "controlPlane.advanced.headlessService.labels"));
    let ann = annotations(
        v,
        "controlPlane.advanced.headlessService.annotations",
        "controlPlane.advanced.globalMetadata.annotations",
    );
    let mut ports =
        vec![json!({ "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" })];
    if truthy(v, "controlPlane.backingStore.etcd.embedded.enabled") {
        ports.push(json!({ "name": "etcd", "port": 2379, "targetPort": 2379, "protocol": "TCP" }));
        ports.push(json!({ "name": "peer", "port": 2380, "targetPort": 2380, "protocol": "TCP" }));
    }
    object(
        ObjectKind::Service,
        meta(&names.headless(), Some(&spec.namespace), &labels, &ann),
        json!({ "spec": {
            "publishNotReadyAddresses": true,
            "ports": ports,
            "clusterIP": "None",
            "selector": selector(spec),
        } }),
    )
}

fn service_account(v: &Json, spec: &Spec, name: &str, setting: &str, pull: &[Json]) -> Json {
    let labels = chart_labels(spec, at(v, &format!("{setting}.labels")));
    let ann = annotations(
        v,
        &format!("{setting}.annotations"),
        "controlPlane.advanced.globalMetadata.annotations",
    );
    let mut body = json!({});
    if !pull.is_empty() {
        body["imagePullSecrets"] = json!(pull);
    }
    object(
        ObjectKind::ServiceAccount,
        meta(name, Some(&spec.namespace), &labels, &ann),
        body,
    )
}

/// A policy's quoted values (`{{ $val | quote }}`).
fn quoted(v: Option<&Json>) -> Map<String, Json> {
    string_map(v)
        .into_iter()
        .map(|(k, x)| (k, Json::String(x)))
        .collect()
}

fn resource_quota(v: &Json) -> Json {
    let mut spec = Map::new();
    let hard = quoted(at(v, "policies.resourceQuota.quota"));
    if !hard.is_empty() {
        spec.insert("hard".to_owned(), Json::Object(hard));
    }
    if let Some(x) = set(v, "policies.resourceQuota.scopeSelector.matchExpressions") {
        spec.insert("scopeSelector".to_owned(), json!({ "matchExpressions": x }));
    }
    if let Some(x) = set(v, "policies.resourceQuota.scopes") {
        spec.insert("scopes".to_owned(), x.clone());
    }
    json!({ "spec": spec })
}

fn limit_range(v: &Json) -> Json {
    let mut limit = Map::new();
    for key in ["default", "defaultRequest", "min", "max"] {
        let m = quoted(at(v, &format!("policies.limitRange.{key}")));
        if !m.is_empty() {
            limit.insert(key.to_owned(), Json::Object(m));
        }
    }
    limit.insert("type".to_owned(), json!("Container"));
    json!({ "spec": { "limits": [limit] } })
}

/// The chart's NetworkPolicies (`networkpolicy.yaml`), by name, when the policy is on.
fn network_policies(v: &Json, spec: &Spec, names: &Names) -> Vec<(String, Json)> {
    let release = || json!({ "podSelector": { "matchLabels": { "release": spec.name } } });
    let workloads = || json!({ "podSelector": { "matchLabels": { "vcluster.loft.sh/managed-by": spec.name } } });
    let host_dns = || {
        json!({
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "kube-system" } },
            "podSelector": { "matchLabels": { "k8s-app": "kube-dns" } },
        })
    };
    let platform =
        || json!({ "podSelector": { "matchLabels": { "app": "loft" } }, "namespaceSelector": {} });
    let port = |p: i64, proto: &str| json!({ "port": p, "protocol": proto });
    let dns_and_api = || json!([port(1053, "UDP"), port(1053, "TCP"), port(8443, "TCP")]);
    let host_api = || json!([port(443, "TCP"), port(8443, "TCP"), port(6443, "TCP")]);
    let private = truthy(v, "privateNodes.enabled");
    let [work, cp, dns, snapshot] = names.network_policies();
    let mut out = Vec::new();
    if !private {
        let mut egress = vec![
            json!({ "ports": dns_and_api(), "to": [release()] }),
            json!({ "to": [workloads()] }),
        ];
        if truthy(v, "policies.networkPolicy.workload.publicEgress.enabled") {
            egress.push(json!({ "to": [{ "ipBlock": {
                "cidr": at(v, "policies.networkPolicy.workload.publicEgress.cidr"),
                "except": at(v, "policies.networkPolicy.workload.publicEgress.except"),
            } }] }));
        }
        egress.extend(list(v, "policies.networkPolicy.workload.egress"));
        let mut ingress = vec![
            json!({ "from": [release()] }),
            json!({ "from": [workloads()] }),
        ];
        ingress.extend(list(v, "policies.networkPolicy.workload.ingress"));
        out.push((
            work,
            json!({ "spec": {
                "podSelector": { "matchLabels": { "vcluster.loft.sh/managed-by": spec.name } },
                "policyTypes": ["Egress", "Ingress"],
                "egress": egress,
                "ingress": ingress,
            } }),
        ));
    }
    let mut egress = vec![
        json!({ "to": [host_dns()] }),
        json!({ "ports": host_api() }),
        json!({ "to": [release()] }),
        json!({ "to": [workloads()] }),
        json!({ "to": [platform()] }),
    ];
    egress.extend(list(v, "policies.networkPolicy.controlPlane.egress"));
    let mut ingress = vec![
        json!({ "ports": [port(8443, "TCP")] }),
        json!({ "from": [release()] }),
        json!({ "ports": dns_and_api(), "from": [workloads()] }),
        json!({ "from": [{ "podSelector": { "matchLabels": { "app": "vcluster-snapshot" } } }] }),
        json!({ "from": [platform()] }),
    ];
    ingress.extend(list(v, "policies.networkPolicy.controlPlane.ingress"));
    out.push((
        cp,
        json!({ "spec": {
            "podSelector": { "matchLabels": { "release": spec.name } },
            "policyTypes": ["Egress", "Ingress"],
            "egress": egress,
            "ingress": ingress,
        } }),
    ));
    if truthy(v, "controlPlane.coredns.enabled")
        && !truthy(v, "controlPlane.coredns.embedded")
        && !private
    {
        out.push((
            dns,
            json!({ "spec": {
                "podSelector": { "matchLabels": {
                    "k8s-app": "vcluster-kube-dns",
                    "vcluster.loft.sh/managed-by": spec.name,
                } },
                "policyTypes": ["Egress", "Ingress"],
                "egress": [
                    { "to": [host_dns()] },
                    { "ports": [port(8443, "TCP")], "to": [release()] },
                ],
                "ingress": [
                    { "ports": [port(1053, "TCP"), port(1053, "UDP")], "from": [workloads()] },
                ],
            } }),
        ));
    }
    out.push((
        snapshot,
        json!({ "spec": {
            "podSelector": { "matchLabels": { "app": "vcluster-snapshot" } },
            "policyTypes": ["Egress", "Ingress"],
            "egress": [
                { "to": [release()] },
                { "to": [host_dns()] },
                { "ports": host_api() },
            ],
        } }),
    ));
    out
}

/// Renders every host object of `spec`.
pub fn render(spec: &Spec) -> Rendered {
    let names = Names::new(&spec.name, &spec.namespace);
    let v = values::values(spec);
    let yaml = values::to_yaml(&v);
    let global = string_map(at(&v, "controlPlane.advanced.globalMetadata.annotations"));
    let plain = chart_labels(spec, None);
    let ns = Some(spec.namespace.as_str());
    let namespace = object(
        ObjectKind::Namespace,
        json!({ "name": spec.namespace, "labels": namespace_labels(spec) }),
        json!({}),
    );
    let r = |kind, name: String| ObjectRef { kind, name };
    let mut objects = Vec::new();
    let mut absent = names.retired();
    let mut add = |kind: ObjectKind, name: String, body: Option<Json>| match body {
        Some(b) => objects.push((r(kind, name), b)),
        None => absent.push(r(kind, name)),
    };
    let sa = rbac::service_account(&v, &spec.name);
    let pull = list(&v, "controlPlane.advanced.serviceAccount.imagePullSecrets");
    add(
        ObjectKind::ServiceAccount,
        names.vc(),
        Some(service_account(
            &v,
            spec,
            &names.vc(),
            "controlPlane.advanced.serviceAccount",
            &pull,
        )),
    );
    let mut workload_pull = pull.clone();
    workload_pull.extend(list(
        &v,
        "controlPlane.advanced.workloadServiceAccount.imagePullSecrets",
    ));
    add(
        ObjectKind::ServiceAccount,
        names.workload(),
        Some(service_account(
            &v,
            spec,
            &names.workload(),
            "controlPlane.advanced.workloadServiceAccount",
            &workload_pull,
        )),
    );
    let subject = json!([{ "kind": "ServiceAccount", "name": sa, "namespace": spec.namespace }]);
    add(
        ObjectKind::Role,
        names.vc(),
        Some(object(
            ObjectKind::Role,
            meta(&names.vc(), ns, &plain, &global),
            json!({ "rules": rbac::role_rules(&v) }),
        )),
    );
    add(
        ObjectKind::RoleBinding,
        names.vc(),
        Some(object(
            ObjectKind::RoleBinding,
            meta(&names.vc(), ns, &plain, &global),
            json!({
                "subjects": subject,
                "roleRef": { "kind": "Role", "name": names.vc(), "apiGroup": "rbac.authorization.k8s.io" },
            }),
        )),
    );
    let cluster_role = rbac::cluster_role_enabled(&v);
    add(
        ObjectKind::ClusterRole,
        names.cluster_role(),
        cluster_role.then(|| {
            object(
                ObjectKind::ClusterRole,
                meta(&names.cluster_role(), None, &plain, &global),
                json!({ "rules": rbac::cluster_role_rules(&v, &spec.namespace) }),
            )
        }),
    );
    add(
        ObjectKind::ClusterRoleBinding,
        names.cluster_role(),
        cluster_role.then(|| {
            object(
                ObjectKind::ClusterRoleBinding,
                meta(&names.cluster_role(), None, &plain, &global),
                json!({
                    "subjects": subject,
                    "roleRef": {
                        "kind": "ClusterRole",
                        "name": names.cluster_role(),
                        "apiGroup": "rbac.authorization.k8s.io",
                    },
                }),
            )
        }),
    );
    add(
        ObjectKind::Secret,
        names.config(),
        Some(object(
            ObjectKind::Secret,
            meta(&names.config(), ns, &plain, &global),
            json!({
                "type": "Opaque",
                "data": { CONFIG_KEY: base64::engine::general_purpose::STANDARD.encode(&yaml) },
            }),
        )),
    );
    add(
        ObjectKind::Service,
        spec.name.clone(),
        Some(service(&v, spec)),
    );
    add(
        ObjectKind::Service,
        names.headless(),
        Some(headless_service(&v, spec, &names)),
    );
    let quota_on = is_true(&v, "policies.resourceQuota.enabled");
    let limits_on = is_true(&v, "policies.limitRange.enabled");
    let off = |k: &str| at(&v, k).map(scalar_text).as_deref() == Some("false");
    let policy_meta = |name: &str, setting: &str| {
        meta(
            name,
            ns,
            &chart_labels(spec, at(&v, &format!("{setting}.labels"))),
            &annotations(
                &v,
                &format!("{setting}.annotations"),
                "controlPlane.advanced.globalMetadata.annotations",
            ),
        )
    };
    add(
        ObjectKind::ResourceQuota,
        names.vc(),
        ((quota_on || limits_on) && !off("policies.resourceQuota.enabled")).then(|| {
            object(
                ObjectKind::ResourceQuota,
                policy_meta(&names.vc(), "policies.resourceQuota"),
                resource_quota(&v),
            )
        }),
    );
    add(
        ObjectKind::LimitRange,
        names.vc(),
        ((quota_on || limits_on) && !off("policies.limitRange.enabled")).then(|| {
            object(
                ObjectKind::LimitRange,
                policy_meta(&names.vc(), "policies.limitRange"),
                limit_range(&v),
            )
        }),
    );
    let mut policies: BTreeMap<String, Json> = if truthy(&v, "policies.networkPolicy.enabled") {
        network_policies(&v, spec, &names).into_iter().collect()
    } else {
        BTreeMap::new()
    };
    for name in names.network_policies() {
        let body = policies.remove(&name).map(|b| {
            object(
                ObjectKind::NetworkPolicy,
                policy_meta(&name, "policies.networkPolicy"),
                b,
            )
        });
        add(ObjectKind::NetworkPolicy, name, body);
    }
    add(
        ObjectKind::StatefulSet,
        spec.name.clone(),
        Some(statefulset(&v, spec, &names, &yaml)),
    );
    Rendered {
        namespace,
        objects,
        absent,
        values: v,
        vcluster_yaml: yaml,
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

    #[test]
    fn quoted_values_are_strings() {
        let m = quoted(Some(&json!({ "cpu": 10, "memory": "1Gi", "x": null })));
        assert_eq!(Json::Object(m), json!({ "cpu": "10", "memory": "1Gi" }));
    }
}
