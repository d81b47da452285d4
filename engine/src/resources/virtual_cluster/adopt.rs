//! Taking over a vCluster that Helm or the vCluster CLI installed from the pinned chart.
//!
//! Such a release has no gpufleet namespace. An import recognises it by the chart's
//! StatefulSet as Helm labels it (`app=vcluster`, `release=<name>`, `heritage=Helm`) when it
//! is the only one in a namespace no virtual cluster of gpufleet's claims ([`recognised`]);
//! a refresh never does, so a namespace someone else took over is not taken back. The
//! import reads the release's vcluster.yaml (its config Secret) back into the attributes
//! and, for what no attribute says, into `values_override` ([`recover_override`]), leaving
//! out what gpufleet decides and what it refuses: those differences stay in `drift`. A
//! release whose data gpufleet could not keep (another backing store or distro) is refused
//! ([`refusal`]).
//!
//! The first apply marks the namespace as adopted (destroy then leaves it, as it was there
//! before), labels it and the objects as gpufleet's, and writes the config in gpufleet's
//! spelling. It restarts nothing while the values are the ones the control plane started
//! with ([`keep_running_template`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value as Json};

use super::{
    chart_schema,
    model::Spec,
    render::{CONFIG_DIGEST, CONFIG_KEY, Rendered, config_digest},
    schema::POD_SECURITY_LEVELS,
    validate::managed_keys,
    values,
    versions::VCLUSTER_VERSION,
};
use crate::backends::kube::{
    ISOLATION, MANAGED_BY, MANAGED_BY_VALUE, TENANT, VIRTUAL_CLUSTER,
    host::ObjectKind,
    json::{labels_of, str_at},
    reserved_label,
};

/// StatefulSet annotation: the digest of the vcluster.yaml the control plane was running
/// when gpufleet took it over without restarting it. While the rendered vcluster.yaml has
/// that digest, the pod template stays as it runs.
pub(super) const ADOPTED_CONFIG: &str = "gpufleet.dev/adopted-config-digest";

/// Namespace annotation: the namespace was there before gpufleet took over the vCluster in
/// it, so destroy removes the virtual cluster's objects and leaves the namespace.
pub(super) const ADOPTED_NAMESPACE: &str = "gpufleet.dev/adopted-namespace";

/// The labels Helm puts on what it installs (besides the chart's `app` and `release`): its
/// bookkeeping, not the user's.
const HELM_LABELS: [&str; 2] = ["chart", "heritage"];

/// vcluster.yaml keys an import never recovers into `values_override` although
/// `values_override` may set them: gpufleet's hardening of the control plane and its label
/// on the control plane's pods. A release without them gets them, with one restart.
const HARDENING: &[&str] = &[
    "controlPlane.statefulSet.security",
    "controlPlane.statefulSet.pods.labels.gpufleet.dev/virtual-cluster",
];

/// Whether the namespace is ours: labelled for this virtual cluster by gpufleet.
pub(super) fn owned_by(ns: &Json, name: &str) -> bool {
    let labels = labels_of(ns);
    labels.get(MANAGED_BY).map(String::as_str) == Some(MANAGED_BY_VALUE)
        && labels.get(VIRTUAL_CLUSTER).map(String::as_str) == Some(name)
}

/// Whether `o` carries gpufleet's ownership label.
fn written_by_gpufleet(o: &Json) -> bool {
    labels_of(o).get(MANAGED_BY).map(String::as_str) == Some(MANAGED_BY_VALUE)
}

/// Whether the namespace was there before gpufleet took over the vCluster in it.
pub(super) fn adopted_namespace(ns: &Json) -> bool {
    ns.pointer(&format!(
        "/metadata/annotations/{}",
        ADOPTED_NAMESPACE.replace('/', "~1")
    ))
    .is_some()
}

/// The merge patch that hands an adopted namespace back on destroy: without gpufleet's
/// ownership and tier labels and its adoption mark (the pod security labels stay: removing
/// them would loosen what the namespace admits).
pub(super) fn release_namespace_patch() -> Json {
    serde_json::json!({ "metadata": {
        "labels": { MANAGED_BY: null, VIRTUAL_CLUSTER: null, ISOLATION: null },
        "annotations": { ADOPTED_NAMESPACE: null },
    } })
}

/// Whether `sts` is the chart's StatefulSet of release `name` as Helm installed it, untouched
/// by gpufleet.
pub(super) fn chart_release(sts: &Json, name: &str) -> bool {
    let labels = labels_of(sts);
    let is = |k: &str, v: &str| labels.get(k).map(String::as_str) == Some(v);
    str_at(sts, "/metadata/name") == Some(name)
        && is("app", "vcluster")
        && is("release", name)
        && is("heritage", "Helm")
        && !written_by_gpufleet(sts)
}

/// Whether namespace `ns`, not gpufleet's, holds release `name` that an import may adopt:
/// the chart's StatefulSet `sts` of that release, in a namespace no virtual cluster of
/// gpufleet's claims.
pub(super) fn recognised(ns: &Json, sts: Option<&Json>, name: &str) -> bool {
    !labels_of(ns).contains_key(VIRTUAL_CLUSTER) && sts.is_some_and(|s| chart_release(s, name))
}

/// The vcluster.yaml in config Secret `secret`, as text and as a value.
pub(super) fn config_of(secret: &Json) -> Option<(String, Json)> {
    let text = config_text(secret)?;
    let parsed = serde_saphyr::from_str::<Json>(&text).ok()?;
    Some((text, parsed))
}

/// The vcluster.yaml in config Secret `secret`, as text.
pub(super) fn config_text(secret: &Json) -> Option<String> {
    let data = str_at(secret, &format!("/data/{}", CONFIG_KEY.replace('/', "~1")))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Why a release with vcluster.yaml `config` cannot be adopted, if it cannot: gpufleet runs
/// the Kubernetes distro on the embedded database, so a release on another backing store or
/// distro would come back without its data.
pub(super) fn refusal(config: &Json) -> Option<String> {
    let on = |key: &str| values::at(config, key) == Some(&Json::Bool(true));
    let other = [
        (
            "controlPlane.backingStore.database.external.enabled",
            "an external database",
        ),
        (
            "controlPlane.backingStore.etcd.embedded.enabled",
            "embedded etcd",
        ),
        (
            "controlPlane.backingStore.etcd.deploy.enabled",
            "a deployed etcd",
        ),
        ("controlPlane.distro.k3s.enabled", "the k3s distro"),
        ("controlPlane.distro.k0s.enabled", "the k0s distro"),
    ]
    .into_iter()
    .find(|(key, _)| on(key))?;
    Some(format!(
        "it runs on {} ({} is true), and gpufleet runs the Kubernetes distro on its embedded \
         database: the virtual cluster would come back without its data. Migrate it first \
         (vCluster's snapshot and restore), or keep it under Helm",
        other.1, other.0
    ))
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
/// vcluster.yaml enforces inside, else the attribute's default, `baseline`.
pub(super) fn pod_security_of(config: Option<&Json>) -> &'static str {
    config
        .and_then(|c| values::at(c, "policies.podSecurityStandard"))
        .and_then(Json::as_str)
        .and_then(|p| POD_SECURITY_LEVELS.iter().find(|l| **l == p))
        .copied()
        .unwrap_or("baseline")
}

/// The Kubernetes distro tag a vcluster.yaml runs: `controlPlane.distro.k8s.version`, else
/// the image tag the chart uses when that is empty.
pub(super) fn distro_tag(config: &Json) -> Option<&str> {
    [
        "controlPlane.distro.k8s.version",
        "controlPlane.distro.k8s.image.tag",
    ]
    .into_iter()
    .filter_map(|k| values::at(config, k)?.as_str())
    .find(|t| !t.is_empty())
}

/// The vCluster release a StatefulSet runs: its syncer image's tag, else Helm's chart label
/// (`vcluster-0.36.0`; a chart built from source says `0.0.1`, which its release pipeline
/// replaces).
fn release_version(sts: &Json) -> Option<String> {
    let image = str_at(sts, "/spec/template/spec/containers/0/image");
    image
        .and_then(|i| i.rsplit_once(':'))
        .map(|(_, tag)| tag.to_owned())
        .or_else(|| {
            labels_of(sts)
                .get("chart")?
                .strip_prefix("vcluster-")
                .map(str::to_owned)
        })
}

fn under(dotted: &str, key: &str) -> bool {
    dotted == key || dotted.starts_with(&format!("{key}."))
}

/// Keys `difference` leaves alone, with the reason for each.
struct Skipped<'a> {
    refused: &'a [(String, String)],
}

impl Skipped<'_> {
    fn managed(&self, dotted: &str) -> bool {
        managed_keys()
            .chain(HARDENING.iter().copied())
            .any(|k| under(dotted, k))
            || self.refused.iter().any(|(k, _)| under(dotted, k))
    }

    fn holds_managed(&self, dotted: &str) -> bool {
        let prefix = format!("{dotted}.");
        managed_keys()
            .chain(HARDENING.iter().copied())
            .any(|k| k.starts_with(&prefix))
            || self.refused.iter().any(|(k, _)| k.starts_with(&prefix))
    }
}

/// Adds to `out` what `values_override` needs so that `base` becomes `target`, leaving out
/// the keys `skip` names: those stay differences, which the plan shows.
fn difference(
    base: &Map<String, Json>,
    target: &Map<String, Json>,
    path: &str,
    skip: &Skipped<'_>,
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
        let b = base.get(k);
        if skip.managed(&at) || b == Some(t) {
            continue;
        }
        let nested = match (b, t) {
            (Some(Json::Object(b)), Json::Object(t)) => Some((b, t)),
            (None, Json::Object(t)) if skip.holds_managed(&at) => Some((&empty, t)),
            _ => None,
        };
        match nested {
            Some((b, t)) => {
                let mut sub = Map::new();
                difference(b, t, &at, skip, &mut sub);
                if !sub.is_empty() {
                    out.insert(k.clone(), Json::Object(sub));
                }
            }
            None if skip.holds_managed(&at) => {}
            None => {
                out.insert(k.clone(), t.clone());
            }
        }
    }
    for k in base.keys().filter(|k| !target.contains_key(*k)) {
        let at = dotted(k);
        if !skip.managed(&at) && !skip.holds_managed(&at) {
            out.insert(k.clone(), Json::Null);
        }
    }
}

/// What an import recovers of a release's own settings.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Recovered {
    /// The `values_override` to set, if any.
    pub over: Option<Json>,
    /// Settings of the release not carried over, with why: the apply writes gpufleet's.
    pub left_out: Vec<(String, String)>,
}

/// The `values_override` under which `spec` (read from a release, without an override)
/// renders the release's own vcluster.yaml `stored`: the keys that differ from what the other
/// attributes render, none when nothing does. Keys gpufleet decides are not recovered, nor
/// what `values_override` may not set (objects gpufleet does not render, licensed features,
/// what the chart's schema refuses); where they differ, the plan shows it. A release of
/// another vCluster version (`version`) recovers nothing, since its defaults are not the
/// pinned chart's.
pub(super) fn recover_override(spec: &Spec, stored: &Json, version: Option<&str>) -> Recovered {
    if let Some(v) = version.filter(|v| v.trim_start_matches('v') != VCLUSTER_VERSION) {
        return Recovered {
            over: None,
            left_out: vec![(
                "vcluster.yaml".to_owned(),
                format!(
                    "it is vCluster {v}'s, whose defaults differ from those of {VCLUSTER_VERSION}, \
                     which gpufleet renders; set values_override by hand"
                ),
            )],
        };
    }
    let base = values::values(&Spec {
        values_override: None,
        ..spec.clone()
    });
    let (Json::Object(base), Json::Object(target)) = (&base, stored) else {
        return Recovered::default();
    };
    let mut refused: Vec<(String, String)> = vec![(
        "sleep".to_owned(),
        "the `sleep` attribute carries it".to_owned(),
    )];
    // Each round leaves out what values_override may not set, until nothing is refused.
    for _ in 0..8 {
        let mut out = Map::new();
        difference(base, target, "", &Skipped { refused: &refused }, &mut out);
        let over = Json::Object(out);
        let merged = values::coalesce(&over, values::chart_defaults());
        let mut more: Vec<(String, String)> = chart_schema::unrendered_settings(&over)
            .into_iter()
            .map(|u| {
                (
                    u.key.to_owned(),
                    format!("gpufleet does not render {}", u.objects),
                )
            })
            .chain(
                values::pro_features(&merged)
                    .into_iter()
                    .map(|f| (f.key.to_owned(), format!("it is a {} feature", f.needs))),
            )
            .chain(
                chart_schema::schema_errors(&over)
                    .into_iter()
                    .filter(|e| !e.key.is_empty())
                    .map(|e| {
                        (
                            e.key,
                            format!("the chart's schema refuses it: {}", e.message),
                        )
                    }),
            )
            .filter(|(k, _)| !refused.iter().any(|(r, _)| under(k, r)))
            .collect();
        if more.is_empty() {
            let over = over
                .as_object()
                .is_some_and(|m| !m.is_empty())
                .then_some(over);
            refused.retain(|(k, _)| values::at(stored, k).is_some() && k != "sleep");
            return Recovered {
                over,
                left_out: refused,
            };
        }
        more.dedup();
        refused.append(&mut more);
    }
    Recovered {
        over: None,
        left_out: vec![(
            "vcluster.yaml".to_owned(),
            "its settings could not be expressed as a values_override gpufleet accepts".to_owned(),
        )],
    }
}

/// The vCluster release of the StatefulSet being imported, when known.
pub(super) fn version_of(sts: Option<&Json>) -> Option<String> {
    sts.and_then(release_version)
}

/// Whether [`keep_running_template`] needs the config Secret for the live StatefulSet `sts`:
/// only when it has neither gpufleet's restart annotation nor its record of a takeover.
pub(super) fn reads_running_config(sts: &Json) -> bool {
    let has = |at: &str, key: &str| {
        sts.pointer(&format!("{at}/{}", key.replace('/', "~1")))
            .is_some()
    };
    !has("/spec/template/metadata/annotations", CONFIG_DIGEST)
        && !has("/metadata/annotations", ADOPTED_CONFIG)
}

/// Leaves the control plane's pod template as it runs when gpufleet takes over a release,
/// so that labelling it does not restart it:
///
/// - at the takeover, when the config Secret is still the release's and holds the rendered
///   values, the template gets no restart annotation, and the StatefulSet records the
///   digest of that configuration ([`ADOPTED_CONFIG`]);
/// - afterwards, while the rendered configuration has that digest, the same;
/// - once it changes, the restart annotation is rendered as always, and the control plane
///   restarts with the new configuration.
///
/// A StatefulSet that gpufleet made (it has the restart annotation) is left as rendered.
pub(super) fn keep_running_template(
    rendered: &mut Rendered,
    live_sts: Option<&Json>,
    live_secret: Option<&Json>,
) {
    let Some(live) = live_sts else { return };
    let annotation = |o: &Json, at: &str, key: &str| {
        o.pointer(&format!("{at}/{}", key.replace('/', "~1")))
            .and_then(Json::as_str)
            .map(str::to_owned)
    };
    if annotation(live, "/spec/template/metadata/annotations", CONFIG_DIGEST).is_some() {
        return;
    }
    let digest = config_digest(&rendered.vcluster_yaml);
    let keep = match annotation(live, "/metadata/annotations", ADOPTED_CONFIG) {
        Some(adopted) => adopted == digest,
        None => live_secret.is_some_and(|s| {
            !written_by_gpufleet(s) && config_of(s).is_some_and(|(_, v)| v == rendered.values)
        }),
    };
    if !keep {
        return;
    }
    let Some((_, sts)) = rendered
        .objects
        .iter_mut()
        .find(|(r, _)| r.kind == ObjectKind::StatefulSet)
    else {
        return;
    };
    if let Some(Json::Object(pod)) = sts.pointer_mut("/spec/template/metadata/annotations") {
        pod.remove(CONFIG_DIGEST);
    }
    let metadata = &mut sts["metadata"];
    if !metadata["annotations"].is_object() {
        metadata["annotations"] = Json::Object(Map::new());
    }
    metadata["annotations"][ADOPTED_CONFIG] = Json::String(digest);
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

    fn config_secret(values: &Json, by_gpufleet: bool) -> Json {
        let text = values::to_yaml(values);
        let mut labels = json!({ "app": "vcluster", "heritage": "Helm" });
        if by_gpufleet {
            labels[MANAGED_BY] = json!(MANAGED_BY_VALUE);
        }
        json!({
            "metadata": { "labels": labels },
            "data": { CONFIG_KEY: base64::engine::general_purpose::STANDARD.encode(text) },
        })
    }

    fn template_digest(r: &Rendered) -> bool {
        r.objects
            .iter()
            .find(|(o, _)| o.kind == ObjectKind::StatefulSet)
            .and_then(|(_, o)| o.pointer("/spec/template/metadata/annotations"))
            .and_then(|a| a.get(CONFIG_DIGEST))
            .is_some()
    }

    fn sts_of(r: &Rendered) -> Json {
        r.objects
            .iter()
            .find(|(o, _)| o.kind == ObjectKind::StatefulSet)
            .map(|(_, o)| o.clone())
            .expect("a StatefulSet")
    }

    #[test]
    fn a_release_values_come_back_through_the_override_except_what_gpufleet_decides() {
        let spec = spec();
        let mut stored = values::values(&spec);
        // What a team set with Helm: a label on the StatefulSet, a chart default removed,
        // a node selector gpufleet's tier does not render, and an ingress for the API server.
        stored["controlPlane"]["statefulSet"]["labels"] = json!({ "team": "ml" });
        stored["controlPlane"]["coredns"]
            .as_object_mut()
            .expect("the chart configures CoreDNS")
            .remove("overwriteConfig");
        stored["sync"]["fromHost"]["nodes"]["selector"] = json!({ "labels": { "pool": "a" } });
        stored["controlPlane"]["ingress"]["enabled"] = json!(true);
        let r = recover_override(&spec, &stored, Some(VCLUSTER_VERSION));
        let over = r.over.expect("differences");
        assert_eq!(
            over["controlPlane"]["statefulSet"]["labels"],
            json!({ "team": "ml" })
        );
        assert_eq!(
            over["controlPlane"]["coredns"]["overwriteConfig"],
            Json::Null
        );
        assert!(over["sync"].get("fromHost").is_none(), "{over}");
        assert!(over["controlPlane"].get("ingress").is_none(), "{over}");
        assert_eq!(
            r.left_out
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>(),
            ["controlPlane.ingress.enabled"]
        );
        let with = Spec {
            values_override: Some(over),
            ..spec.clone()
        };
        let mut expected = stored.clone();
        expected["sync"]["fromHost"] = values::values(&spec)["sync"]["fromHost"].clone();
        expected["controlPlane"]["ingress"]["enabled"] = json!(false);
        assert_eq!(values::values(&with), expected);
    }

    #[test]
    fn a_chart_default_release_recovers_an_override_gpufleet_accepts() {
        let spec = spec();
        let stored = values::coalesce(&json!({}), values::chart_defaults());
        let r = recover_override(&spec, &stored, Some(VCLUSTER_VERSION));
        let over = r.over.expect("the chart's defaults differ from gpufleet's");
        // Neither the hardening nor gpufleet's pod label is undone.
        assert!(
            values::at(&over, "controlPlane.statefulSet.security").is_none(),
            "{over}"
        );
        assert!(
            values::at(&over, "controlPlane.statefulSet.pods").is_none(),
            "{over}"
        );
        let config = Value::object([
            ("name", Value::string("team-a")),
            ("namespace", Value::string("team-a")),
            ("values_override", Value::string(values::to_yaml(&over))),
        ]);
        let d = super::super::validate::validate_virtual_cluster(&config);
        assert!(!d.has_error(), "{d:?}\n{over}");
    }

    #[test]
    fn a_release_that_renders_the_same_needs_no_override() {
        let spec = spec();
        let r = recover_override(&spec, &values::values(&spec), Some(VCLUSTER_VERSION));
        assert_eq!(r, Recovered::default());
        let other = recover_override(&spec, &values::values(&spec), Some("0.30.1"));
        assert!(other.over.is_none() && !other.left_out.is_empty());
    }

    #[test]
    fn the_restart_annotation_is_left_out_only_for_the_configuration_the_pod_started_with() {
        let spec = spec();
        let helm_sts = json!({ "metadata": {}, "spec": { "template": { "metadata": {
            "annotations": { "vClusterConfigHash": "abc" }
        } } } });
        // The takeover: the release's own Secret holds the rendered values.
        let mut same = render::render(&spec);
        let helm_secret = config_secret(&same.values, false);
        keep_running_template(&mut same, Some(&helm_sts), Some(&helm_secret));
        assert!(!template_digest(&same));
        let adopted = sts_of(&same);
        // Afterwards the Secret is gpufleet's; the StatefulSet's record keeps it so.
        let mut again = render::render(&spec);
        let ours = config_secret(&again.values, true);
        keep_running_template(&mut again, Some(&adopted), Some(&ours));
        assert!(!template_digest(&again));
        // A changed configuration restarts, whether before or after the takeover.
        let changed_spec = Spec {
            values_override: Some(
                json!({ "sync": { "toHost": { "ingresses": { "enabled": true } } } }),
            ),
            ..spec.clone()
        };
        for live in [&helm_sts, &adopted] {
            let mut changed = render::render(&changed_spec);
            keep_running_template(&mut changed, Some(live), Some(&helm_secret));
            assert!(template_digest(&changed));
        }
        // A Secret gpufleet wrote before a failed takeover does not count as what runs.
        let mut failed = render::render(&spec);
        keep_running_template(&mut failed, Some(&helm_sts), Some(&ours));
        assert!(template_digest(&failed));
        // A StatefulSet gpufleet made keeps its restart annotation.
        let mut made = render::render(&spec);
        keep_running_template(
            &mut made,
            Some(&sts_of(&render::render(&spec))),
            Some(&ours),
        );
        assert!(template_digest(&made));
    }

    #[test]
    fn only_helm_releases_in_unclaimed_namespaces_are_recognised() {
        let sts = |labels: Json| json!({ "metadata": { "name": "a", "labels": labels } });
        let helm = sts(json!({ "app": "vcluster", "release": "a", "heritage": "Helm" }));
        let ns = json!({ "metadata": { "name": "team" } });
        assert!(recognised(&ns, Some(&helm), "a"));
        let ours = sts(json!({ "app": "vcluster", "release": "a", MANAGED_BY: MANAGED_BY_VALUE }));
        assert!(!recognised(&ns, Some(&ours), "a"));
        let claimed = json!({ "metadata": { "labels": { VIRTUAL_CLUSTER: "b" } } });
        assert!(!recognised(&claimed, Some(&helm), "a"));
        assert!(!recognised(&ns, Some(&helm), "b"));
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
        assert_eq!(pod_security_of(None), "baseline");
        let restricted = json!({ "policies": { "podSecurityStandard": "restricted" } });
        assert_eq!(pod_security_of(Some(&restricted)), "restricted");
    }

    #[test]
    fn a_release_whose_data_gpufleet_could_not_keep_is_refused() {
        let defaults = values::chart_defaults().clone();
        assert_eq!(refusal(&defaults), None);
        let mut etcd = defaults.clone();
        etcd["controlPlane"]["backingStore"]["etcd"]["embedded"]["enabled"] = json!(true);
        assert!(refusal(&etcd).is_some_and(|r| r.contains("embedded etcd")));
        let mut pinned = defaults;
        pinned["controlPlane"]["distro"]["k8s"]["image"]["tag"] = json!("v1.33.4");
        assert_eq!(distro_tag(&pinned), Some("v1.33.4"));
    }
}
