//! Taking over a vCluster that Helm or the vCluster CLI installed from the pinned chart.
//!
//! Such a release has no gpufleet namespace: it is recognised by the chart's StatefulSet
//! (`app=vcluster`, `release=<name>`) in a namespace no other virtual cluster of gpufleet's
//! claims. Its vcluster.yaml is the chart's config Secret, which an import reads back into
//! the attributes and, for what no attribute says, into `values_override`
//! ([`recover_override`]). The first apply then labels the namespace and the objects as
//! gpufleet's and writes the config in gpufleet's spelling; it restarts nothing as long as
//! the values are the same ([`keep_running_template`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use super::{
    model::Spec,
    read::owned_by,
    render::{CONFIG_DIGEST, Rendered},
    schema::POD_SECURITY_LEVELS,
    validate::managed_keys,
    values,
};
use crate::backends::kube::{
    TENANT, VIRTUAL_CLUSTER, host::ObjectKind, json::labels_of, reserved_label,
};

/// The labels Helm puts on what it installs (besides the chart's `app` and `release`): its
/// bookkeeping, not the user's.
const HELM_LABELS: [&str; 2] = ["chart", "heritage"];

/// Whether `sts` is the chart's StatefulSet of release `name`.
pub(super) fn chart_release(sts: &Json, name: &str) -> bool {
    let labels = labels_of(sts);
    labels.get("app").map(String::as_str) == Some("vcluster")
        && labels.get("release").map(String::as_str) == Some(name)
}

/// Whether namespace `ns` holds virtual cluster `name`: gpufleet's labels say so, or the
/// chart's StatefulSet `sts` of that release is there and no other virtual cluster of
/// gpufleet's claims the namespace.
pub(super) fn recognised(ns: &Json, sts: Option<&Json>, name: &str) -> bool {
    let claimed_by_other = labels_of(ns)
        .get(VIRTUAL_CLUSTER)
        .is_some_and(|other| other != name);
    owned_by(ns, name) || (!claimed_by_other && sts.is_some_and(|s| chart_release(s, name)))
}

/// The user's labels among those of the config Secret: gpufleet's own and the chart's are
/// left out, and so is Helm's bookkeeping on a Secret Helm installed.
pub(super) fn user_labels(secret: &Json) -> BTreeMap<String, String> {
    let labels = labels_of(secret);
    let by_helm = labels.get("heritage").map(String::as_str) == Some("Helm");
    labels
        .into_iter()
        .filter(|(k, _)| !reserved_label(k))
        .filter(|(k, _)| !(by_helm && HELM_LABELS.contains(&k.as_str())))
        .collect()
}

/// The tier of a release without gpufleet's namespace label: `dedicated` when it syncs the
/// nodes of a tenant label (what gpufleet's dedicated tier renders), else `shared`.
pub(super) fn isolation_of(config: Option<&Json>) -> &'static str {
    let tenant_nodes = config
        .and_then(|c| values::at(c, "sync.fromHost.nodes.selector.labels"))
        .and_then(Json::as_object)
        .is_some_and(|l| l.contains_key(TENANT));
    if tenant_nodes { "dedicated" } else { "shared" }
}

/// The pod security level of a release without gpufleet's namespace label: the one its
/// vcluster.yaml enforces inside, else `privileged`, which is what a namespace without the
/// label admits.
pub(super) fn pod_security_of(config: Option<&Json>) -> &'static str {
    config
        .and_then(|c| values::at(c, "policies.podSecurityStandard"))
        .and_then(Json::as_str)
        .and_then(|p| POD_SECURITY_LEVELS.iter().find(|l| **l == p))
        .copied()
        .unwrap_or("privileged")
}

fn under(dotted: &str, key: &str) -> bool {
    dotted == key || dotted.starts_with(&format!("{key}."))
}

/// Whether the value at `dotted` is one gpufleet decides, or lies below one.
fn managed(dotted: &str) -> bool {
    managed_keys().any(|k| under(dotted, k))
}

/// Whether the value at `dotted` holds keys gpufleet decides below it.
fn holds_managed(dotted: &str) -> bool {
    managed_keys().any(|k| k.starts_with(&format!("{dotted}.")))
}

/// Adds to `out` what `values_override` needs so that `base` becomes `target`, leaving out
/// the keys gpufleet decides: those stay differences, which the plan shows.
fn difference(
    base: &Map<String, Json>,
    target: &Map<String, Json>,
    path: &str,
    out: &mut Map<String, Json>,
) {
    let dotted = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    let empty = Map::new();
    for (k, t) in target {
        let at = dotted(k);
        if managed(&at) {
            continue;
        }
        let b = base.get(k);
        if b == Some(t) {
            continue;
        }
        match (b, t) {
            (Some(Json::Object(b)), Json::Object(t)) => {
                let mut sub = Map::new();
                difference(b, t, &at, &mut sub);
                if !sub.is_empty() {
                    out.insert(k.clone(), Json::Object(sub));
                }
            }
            (None, Json::Object(t)) if holds_managed(&at) => {
                let mut sub = Map::new();
                difference(&empty, t, &at, &mut sub);
                if !sub.is_empty() {
                    out.insert(k.clone(), Json::Object(sub));
                }
            }
            _ if holds_managed(&at) => {}
            _ => {
                out.insert(k.clone(), t.clone());
            }
        }
    }
    for k in base.keys().filter(|k| !target.contains_key(*k)) {
        let at = dotted(k);
        if !managed(&at) && !holds_managed(&at) {
            out.insert(k.clone(), Json::Null);
        }
    }
}

/// The `values_override` under which `spec` (read from a release, without an override)
/// renders the release's own vcluster.yaml `stored`: the keys that differ from what the other
/// attributes render, none when nothing does. Keys gpufleet decides are not recovered; where
/// they differ, the plan shows it.
pub(super) fn recover_override(spec: &Spec, stored: &Json) -> Option<Json> {
    let base = values::values(&Spec {
        values_override: None,
        ..spec.clone()
    });
    let (Json::Object(base), Json::Object(target)) = (&base, stored) else {
        return None;
    };
    let mut out = Map::new();
    difference(base, target, "", &mut out);
    (!out.is_empty()).then_some(Json::Object(out))
}

/// Leaves the control plane's pod template as it runs when gpufleet takes over a release:
/// without gpufleet's restart annotation while the running vcluster.yaml (`live_values`)
/// is the rendered one, since adding the annotation alone would restart the control plane
/// for nothing. A changed configuration keeps the annotation, and the restart it causes.
pub(super) fn keep_running_template(
    rendered: &mut Rendered,
    live_sts: Option<&Json>,
    live_values: Option<&Json>,
) {
    let Some(live) = live_sts else { return };
    let digest_pointer = format!(
        "/spec/template/metadata/annotations/{}",
        CONFIG_DIGEST.replace('/', "~1")
    );
    if live.pointer(&digest_pointer).is_some() || live_values != Some(&rendered.values) {
        return;
    }
    let sts = rendered
        .objects
        .iter_mut()
        .find(|(r, _)| r.kind == ObjectKind::StatefulSet);
    if let Some(Json::Object(annotations)) =
        sts.and_then(|(_, o)| o.pointer_mut("/spec/template/metadata/annotations"))
    {
        annotations.remove(CONFIG_DIGEST);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{resources::virtual_cluster::render, value::Value};

    fn spec() -> Spec {
        Spec::from_value(&Value::object([
            ("name", Value::string("team-a")),
            ("namespace", Value::string("team-a")),
        ]))
        .expect("a valid spec")
    }

    #[test]
    fn a_release_values_come_back_through_the_override_except_what_gpufleet_decides() {
        let spec = spec();
        let mut stored = values::values(&spec);
        // What a team set with Helm: a label on the StatefulSet, ingress sync, a chart
        // default removed, and a node selector gpufleet's tier does not render.
        stored["controlPlane"]["statefulSet"]["labels"] = json!({ "team": "ml" });
        stored["sync"]["toHost"]["ingresses"] = json!({ "enabled": true });
        stored["controlPlane"]["coredns"]
            .as_object_mut()
            .expect("the chart configures CoreDNS")
            .remove("overwriteConfig");
        stored["sync"]["fromHost"]["nodes"]["selector"] = json!({ "labels": { "pool": "a" } });
        let over = recover_override(&spec, &stored).expect("differences");
        assert_eq!(
            over["controlPlane"]["statefulSet"]["labels"],
            json!({ "team": "ml" })
        );
        assert_eq!(
            over["controlPlane"]["coredns"]["overwriteConfig"],
            Json::Null
        );
        assert!(over["sync"].get("fromHost").is_none(), "{over}");
        let with = Spec {
            values_override: Some(over),
            ..spec.clone()
        };
        let mut expected = stored.clone();
        expected["sync"]["fromHost"] = values::values(&spec)["sync"]["fromHost"].clone();
        assert_eq!(values::values(&with), expected);
    }

    #[test]
    fn a_release_that_renders_the_same_needs_no_override() {
        let spec = spec();
        assert_eq!(recover_override(&spec, &values::values(&spec)), None);
    }

    #[test]
    fn the_restart_annotation_is_added_only_with_a_changed_configuration() {
        let spec = spec();
        let helm_sts = json!({ "spec": { "template": { "metadata": {
            "annotations": { "vClusterConfigHash": "abc" }
        } } } });
        let digest = |r: &Rendered| {
            r.objects
                .iter()
                .find(|(o, _)| o.kind == ObjectKind::StatefulSet)
                .and_then(|(_, o)| o.pointer("/spec/template/metadata/annotations"))
                .and_then(|a| a.get(CONFIG_DIGEST))
                .is_some()
        };
        let mut same = render::render(&spec);
        let running = same.values.clone();
        keep_running_template(&mut same, Some(&helm_sts), Some(&running));
        assert!(!digest(&same));
        let mut changed = render::render(&spec);
        let mut other = running.clone();
        other["sync"]["toHost"]["ingresses"] = json!({ "enabled": true });
        keep_running_template(&mut changed, Some(&helm_sts), Some(&other));
        assert!(digest(&changed));
        let ours = render::render(&spec);
        let ours_sts = ours
            .objects
            .iter()
            .find(|(o, _)| o.kind == ObjectKind::StatefulSet)
            .map(|(_, o)| o.clone());
        let mut again = render::render(&spec);
        keep_running_template(&mut again, ours_sts.as_ref(), Some(&running));
        assert!(digest(&again));
    }

    #[test]
    fn helm_bookkeeping_is_no_user_label_and_the_tier_is_read_from_node_sync() {
        let secret = json!({ "metadata": { "labels": {
            "app": "vcluster", "release": "a", "chart": "vcluster-0.36.0", "heritage": "Helm",
            "team": "ml",
        } } });
        assert_eq!(
            user_labels(&secret),
            BTreeMap::from([("team".to_owned(), "ml".to_owned())])
        );
        let dedicated = json!({ "sync": { "fromHost": { "nodes": { "selector": {
            "labels": { TENANT: "a" } } } } } });
        assert_eq!(isolation_of(Some(&dedicated)), "dedicated");
        assert_eq!(isolation_of(None), "shared");
        assert_eq!(pod_security_of(None), "privileged");
        let baseline = json!({ "policies": { "podSecurityStandard": "baseline" } });
        assert_eq!(pod_security_of(Some(&baseline)), "baseline");
    }
}
