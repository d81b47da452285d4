//! The labels, annotations and metadata every rendered object is written with, and the two
//! readers of chart settings the templates share.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use crate::backends::kube::{
    ISOLATION, MANAGED_BY, MANAGED_BY_VALUE, VIRTUAL_CLUSTER, host::ObjectKind,
};
use crate::resources::virtual_cluster::{
    model::Spec,
    values::{at, truthy},
};

/// Label keys of the pod security admission.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// Warn at the same level as enforced, so users see why a pod is refused.
pub const POD_SECURITY_WARN: &str = "pod-security.kubernetes.io/warn";

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
pub(super) fn chart_labels(spec: &Spec, extra: Option<&Json>) -> BTreeMap<String, String> {
    let mut l = common_labels(spec);
    l.insert("app".to_owned(), "vcluster".to_owned());
    l.insert("release".to_owned(), spec.name.clone());
    l.extend(string_map(extra));
    l.insert(MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned());
    l.insert(VIRTUAL_CLUSTER.to_owned(), spec.name.clone());
    l
}

/// A mapping setting as strings (labels and annotations).
pub(super) fn string_map(v: Option<&Json>) -> BTreeMap<String, String> {
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
pub(super) fn scalar_text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The chart's `merge dict a b`: keys of `a` win.
pub(super) fn annotations(values: &Json, first: &str, second: &str) -> BTreeMap<String, String> {
    let mut out = string_map(at(values, second));
    out.extend(string_map(at(values, first)));
    out
}

pub(super) fn meta(
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

pub(super) fn object(kind: ObjectKind, metadata: Json, body: Json) -> Json {
    let mut o = Map::new();
    o.insert("apiVersion".to_owned(), Json::String(kind.api_version()));
    o.insert("kind".to_owned(), Json::String(kind.kind().to_owned()));
    o.insert("metadata".to_owned(), metadata);
    if let Json::Object(b) = body {
        o.extend(b);
    }
    Json::Object(o)
}

pub(super) fn selector(spec: &Spec) -> Json {
    json!({ "app": "vcluster", "release": spec.name })
}

/// The value at `dotted` when it is set (not null, not empty).
pub(super) fn set<'a>(values: &'a Json, dotted: &str) -> Option<&'a Json> {
    truthy(values, dotted).then(|| at(values, dotted)).flatten()
}

/// The list at `dotted`, or none.
pub(super) fn list(values: &Json, dotted: &str) -> Vec<Json> {
    at(values, dotted)
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default()
}
