//! The containers of the control plane's pod: the `kubernetes` init container and the
//! syncer.

use serde_json::{Value as Json, json};

use super::metadata::{list, set};
use crate::resources::virtual_cluster::{
    model::Spec,
    values::{at, text, truthy},
    versions,
};

/// The `kubernetes` init container (`_init-containers.tpl`), which copies the Kubernetes
/// binaries for the syncer to run.
pub(super) fn init_containers(v: &Json) -> Vec<Json> {
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
pub(super) fn syncer(v: &Json, spec: &Spec) -> Json {
    let sts = "controlPlane.statefulSet";
    // The chart falls back to its own version, which is the pinned release.
    let tag = text(v, "controlPlane.statefulSet.image.tag");
    let tag = if tag.is_empty() {
        versions::VCLUSTER_VERSION
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
