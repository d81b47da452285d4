//! How a live host object differs from its rendering, for `drift`. Pure.
//!
//! Only what gpufleet renders is compared, so that what the API server adds (defaults,
//! status, managed fields) is never drift:
//!
//! - every field of the rendering must be there with the same value; fields the live object
//!   has beyond it are not looked at, except inside label selectors (`selector`,
//!   `podSelector`, `namespaceSelector`), which the API server keeps whole: a label added to
//!   a NetworkPolicy's pod selector narrows the pods it isolates, and apply takes it out;
//! - a list must have as many entries as rendered (an added ingress rule or RoleBinding
//!   subject is drift), each compared the same way;
//! - an empty or null rendered value asks for nothing (the API server drops empty maps and
//!   lists), and quantities compare by amount (`1Gi` is `1024Mi`);
//! - a replica count, label or annotation another controller keeps is not drift, because
//!   apply leaves it to that controller ([`ownership`]).
//!
//! A Secret's values are never shown, only where they differ.

use serde_json::Value as Json;

use super::quantity;
use crate::backends::kube::{host::ObjectKind, ownership};

/// At most this many differences are listed per object; the rest are counted.
const MAX_PER_OBJECT: usize = 5;

/// Values longer than this are not shown, only where they differ.
const MAX_SHOWN: usize = 60;

/// Keys whose value the API server keeps whole (label selectors).
const WHOLE: &[&str] = &["selector", "podSelector", "namespaceSelector"];

/// The differences of the live object `have` (of `kind`) from its rendering `want`, one
/// phrase each, e.g. `spec.ingress has 3 entries, want 2` or `label team is missing`.
pub fn differences(kind: ObjectKind, have: &Json, want: &Json) -> Vec<String> {
    let mut walk = Walk {
        root: have,
        secret: kind == ObjectKind::Secret,
        out: Vec::new(),
    };
    walk.value(&mut Vec::new(), Some(have), want, false);
    let mut out = walk.out;
    if out.len() > MAX_PER_OBJECT {
        let more = out.len() - (MAX_PER_OBJECT - 1);
        out.truncate(MAX_PER_OBJECT - 1);
        out.push(format!("and {more} more differences"));
    }
    out
}

/// One step of a path into an object.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// A path as messages show it: `spec.ingress[0].from`.
fn display(path: &[Step]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The key at `path` when it is `metadata.<map>.<key>`.
fn metadata_key<'a>(path: &'a [Step], map: &str) -> Option<&'a str> {
    match path {
        [Step::Key(m), Step::Key(l), Step::Key(k)] if m == "metadata" && l == map => Some(k),
        _ => None,
    }
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Object(m) => m.is_empty(),
        Json::Array(a) => a.is_empty(),
        _ => false,
    }
}

struct Walk<'a> {
    /// The whole live object, for its managed fields.
    root: &'a Json,
    /// Values are not shown.
    secret: bool,
    out: Vec<String>,
}

impl Walk<'_> {
    /// Compares `have` (absent: `None`) with `want` at `path`; `whole`: inside a value the
    /// API server keeps whole, where extra keys are drift too.
    fn value(&mut self, path: &mut Vec<Step>, have: Option<&Json>, want: &Json, whole: bool) {
        if self.left_to_others(path) {
            return;
        }
        let have = have.filter(|h| !h.is_null());
        match want {
            Json::Object(_) | Json::Array(_) | Json::Null if is_empty(want) => {
                if whole && have.is_some_and(|h| !is_empty(h)) {
                    self.differs(path, have, want);
                }
            }
            Json::Object(w) => {
                let Some(h) = have else {
                    return self.missing(path);
                };
                let Some(h) = h.as_object() else {
                    return self.differs(path, Some(h), want);
                };
                for (k, wv) in w {
                    path.push(Step::Key(k.clone()));
                    let inner = whole || WHOLE.contains(&k.as_str());
                    self.value(path, h.get(k), wv, inner);
                    path.pop();
                }
                if whole && let Some(extra) = h.keys().find(|k| !w.contains_key(*k)) {
                    path.push(Step::Key(extra.clone()));
                    let shown = display(path);
                    path.pop();
                    self.out.push(format!("{shown} is not in the rendered one"));
                }
            }
            Json::Array(w) => {
                let Some(h) = have else {
                    return self.missing(path);
                };
                let Some(h) = h.as_array() else {
                    return self.differs(path, Some(h), want);
                };
                if h.len() != w.len() {
                    let entries = if h.len() == 1 { "entry" } else { "entries" };
                    self.out.push(format!(
                        "{} has {} {entries}, want {}",
                        display(path),
                        h.len(),
                        w.len()
                    ));
                    return;
                }
                for (i, (hv, wv)) in h.iter().zip(w).enumerate() {
                    path.push(Step::Index(i));
                    self.value(path, Some(hv), wv, whole);
                    path.pop();
                }
            }
            scalar => match have {
                None => self.missing(path),
                Some(h) if same_scalar(path, h, scalar, self.secret) => {}
                Some(h) => self.differs(path, Some(h), want),
            },
        }
    }

    /// A label, annotation or replica count that another controller keeps.
    fn left_to_others(&self, path: &[Step]) -> bool {
        let field = if let Some(k) = metadata_key(path, "labels") {
            format!(".metadata.labels.{k}")
        } else if let Some(k) = metadata_key(path, "annotations") {
            format!(".metadata.annotations.{k}")
        } else if matches!(path, [Step::Key(s), Step::Key(r)] if s == "spec" && r == "replicas") {
            ".spec.replicas".to_owned()
        } else {
            return false;
        };
        ownership::kept_by(self.root, &field).is_some()
    }

    fn missing(&mut self, path: &[Step]) {
        let line = match metadata_key(path, "labels") {
            Some(k) => format!("label {k} is missing"),
            None => format!("{} is missing", display(path)),
        };
        self.out.push(line);
    }

    fn differs(&mut self, path: &[Step], have: Option<&Json>, want: &Json) {
        let shown = |v: &Json| {
            let text = v.to_string();
            (!self.secret && !v.is_object() && !v.is_array() && text.len() <= MAX_SHOWN)
                .then_some(text)
        };
        let line = match (have.and_then(shown), shown(want)) {
            (Some(h), Some(w)) => match metadata_key(path, "labels") {
                Some(k) => format!("label {k} is {h}, want {w}"),
                None => format!("{} is {h}, want {w}", display(path)),
            },
            _ => format!("{} differs from the rendered one", display(path)),
        };
        self.out.push(line);
    }
}

/// Equal scalars; numbers by value, and outside metadata and Secrets, quantities by amount,
/// since the API server stores them in canonical form.
fn same_scalar(path: &[Step], have: &Json, want: &Json, secret: bool) -> bool {
    if have == want {
        return true;
    }
    match (have, want) {
        (Json::Number(h), Json::Number(w)) => h.as_f64() == w.as_f64(),
        (Json::String(h), Json::String(w)) => {
            let in_metadata = matches!(path.first(), Some(Step::Key(k)) if k == "metadata");
            !secret && !in_metadata && quantity::same(h, w)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(ingress: &Json) -> Json {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "vc-work-a", "labels": {"app": "vcluster", "team": "ml"}},
            "spec": {
                "podSelector": {"matchLabels": {"vcluster.loft.sh/managed-by": "a"}},
                "policyTypes": ["Egress", "Ingress"],
                "ingress": ingress,
            },
        })
    }

    fn rules() -> Json {
        json!([{"from": [{"podSelector": {"matchLabels": {"release": "a"}}}]}])
    }

    #[test]
    fn what_the_api_server_adds_is_not_drift() {
        let want = policy(&rules());
        let mut have = want.clone();
        have["metadata"]["uid"] = json!("1234");
        have["metadata"]["managedFields"] = json!([]);
        have["metadata"]["labels"]["added-by-someone"] = json!("x");
        have["spec"]["ingress"][0]["ports"] = json!([{"port": 80, "protocol": "TCP"}]);
        have["status"] = json!({});
        assert_eq!(
            differences(ObjectKind::NetworkPolicy, &have, &want),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_edited_rule_an_added_rule_and_a_narrowed_selector_are_drift() {
        let want = policy(&rules());
        let mut have = want.clone();
        have["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["release"] = json!("b");
        assert_eq!(
            differences(ObjectKind::NetworkPolicy, &have, &want),
            ["spec.ingress[0].from[0].podSelector.matchLabels.release is \"b\", want \"a\""]
        );
        let mut have = want.clone();
        have["spec"]["ingress"] =
            json!([rules()[0], {"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]);
        assert_eq!(
            differences(ObjectKind::NetworkPolicy, &have, &want),
            ["spec.ingress has 2 entries, want 1"]
        );
        let mut have = want.clone();
        have["spec"]["podSelector"]["matchLabels"]["only"] = json!("these");
        assert_eq!(
            differences(ObjectKind::NetworkPolicy, &have, &want),
            ["spec.podSelector.matchLabels.only is not in the rendered one"]
        );
        let mut have = want.clone();
        have["spec"].as_object_mut().map(|s| s.remove("ingress"));
        have["metadata"]["labels"]["team"] = json!("ops");
        assert_eq!(
            differences(ObjectKind::NetworkPolicy, &have, &want),
            [
                "label team is \"ops\", want \"ml\"",
                "spec.ingress is missing"
            ]
        );
    }

    #[test]
    fn a_rolebinding_with_another_subject_is_drift() {
        let want =
            json!({"subjects": [{"kind": "ServiceAccount", "name": "vc-a", "namespace": "vc-a"}]});
        let mut have = want.clone();
        have["subjects"][0]["name"] = json!("intruder");
        have["subjects"][0]["apiGroup"] = json!("");
        assert_eq!(
            differences(ObjectKind::RoleBinding, &have, &want),
            ["subjects[0].name is \"intruder\", want \"vc-a\""]
        );
    }

    #[test]
    fn quantities_compare_by_amount_and_empty_renderings_ask_for_nothing() {
        let want = json!({"spec": {"hard": {"requests.memory": "1024Mi", "count/pods": "50"},
                                   "scopes": [], "extra": {}, "gone": null}});
        let have = json!({"spec": {"hard": {"requests.memory": "1Gi", "count/pods": "50"}}});
        assert!(differences(ObjectKind::ResourceQuota, &have, &want).is_empty());
        let have = json!({"spec": {"hard": {"requests.memory": "2Gi", "count/pods": "50"}}});
        assert_eq!(
            differences(ObjectKind::ResourceQuota, &have, &want),
            ["spec.hard.requests.memory is \"2Gi\", want \"1024Mi\""]
        );
    }

    #[test]
    fn a_secrets_values_are_never_shown() {
        let want = json!({"data": {"config.yaml": "c2VjcmV0"}});
        let have = json!({"data": {"config.yaml": "b3RoZXI="}});
        assert_eq!(
            differences(ObjectKind::Secret, &have, &want),
            ["data.config.yaml differs from the rendered one"]
        );
    }

    #[test]
    fn what_another_controller_keeps_is_not_drift_but_a_hand_edit_is() {
        let want = json!({"kind": "StatefulSet", "metadata": {"labels": {"team": "ml"}},
                          "spec": {"replicas": 1}});
        let mut have = want.clone();
        have["spec"]["replicas"] = json!(3);
        have["metadata"]["labels"]["team"] = json!("research");
        have["metadata"]["managedFields"] = json!([
            {"manager": "autoscaler", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "label-sync", "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}},
        ]);
        assert!(differences(ObjectKind::StatefulSet, &have, &want).is_empty());
        have["metadata"]["managedFields"] = json!([
            {"manager": "kubectl-scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        ]);
        assert_eq!(
            differences(ObjectKind::StatefulSet, &have, &want),
            [
                "label team is \"research\", want \"ml\"",
                "spec.replicas is 3, want 1"
            ]
        );
    }

    #[test]
    fn many_differences_are_counted() {
        let want = json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6});
        let have = json!({});
        let d = differences(ObjectKind::Role, &have, &want);
        assert_eq!(d.len(), MAX_PER_OBJECT);
        assert_eq!(d[MAX_PER_OBJECT - 1], "and 2 more differences");
    }
}
