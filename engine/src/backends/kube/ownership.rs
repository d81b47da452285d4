//! Which fields of an object gpufleet shares with other field managers.
//!
//! Server-side apply reports a conflict when another manager owns a field gpufleet sets to
//! a different value. gpufleet then decides field by field:
//!
//! - **Hand edits are drift.** A field last written by `kubectl` (`kubectl edit`, `label`,
//!   `scale`, `patch`, client-side `apply`: every manager whose name starts with `kubectl`)
//!   is taken back, as Terraform restores any attribute edited out of band.
//! - **Other controllers keep what they run.** A replica count (`spec.replicas` of a
//!   StatefulSet or Deployment, which an autoscaler drives) and the labels and annotations
//!   gpufleet does not reserve for itself stay with the controller that owns them. gpufleet
//!   leaves them out of its apply and says so.
//! - **Everything else is held.** The tenancy and pod security labels, the pause
//!   annotations, the configuration, the pod template and the isolation policies are what
//!   the tiers rest on, so gpufleet takes them back whoever wrote them.
//!
//! Reads follow the same rule: a field another controller keeps is not drift.

use kube::core::Status;
use serde_json::Value as Json;

use super::{FIELD_MANAGER, reserved_label};

/// The `reason` of a status cause that names one apply conflict.
const CONFLICT_CAUSE: &str = "FieldManagerConflict";

/// The pause marks, which vCluster's CLI reads and writes too.
const PAUSE_PREFIX: &str = "loft.sh/";

/// Kinds whose replica count an autoscaler may drive.
const SCALED_KINDS: &[&str] = &["StatefulSet", "Deployment"];

/// One field another manager owns, as the API server reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The field path, e.g. `.metadata.labels.team` or `.spec.replicas`.
    pub field: String,
    /// The manager that owns it, e.g. `kubectl-edit` or `kube-controller-manager`.
    pub manager: String,
}

impl Conflict {
    /// The conflicts of a refused apply; empty when the refusal is not a field conflict.
    pub fn all_in(status: &Status) -> Vec<Conflict> {
        let Some(details) = &status.details else {
            return Vec::new();
        };
        details
            .causes
            .iter()
            .filter(|c| c.reason == CONFLICT_CAUSE)
            .map(|c| Conflict {
                field: c.field.clone(),
                manager: quoted(&c.message).unwrap_or_default().to_owned(),
            })
            .collect()
    }
}

/// The first double-quoted part of `message`: the API server names the manager as
/// `conflict with "kubectl-edit" using apps/v1`.
fn quoted(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once('"')?;
    rest.split_once('"').map(|(q, _)| q)
}

/// Whether `manager` is a person editing by hand rather than a controller.
pub fn is_hand_edit(manager: &str) -> bool {
    manager.starts_with("kubectl")
}

/// Label and annotation keys gpufleet holds whoever wrote them: the reserved labels and
/// the pause marks.
fn held_key(key: &str) -> bool {
    reserved_label(key) || key.starts_with(PAUSE_PREFIX)
}

/// Where a field gpufleet may leave to another controller sits in an object.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shared<'a> {
    Label(&'a str),
    Annotation(&'a str),
    Replicas,
}

fn shared_field<'a>(kind: &str, field: &'a str) -> Option<Shared<'a>> {
    if let Some(key) = field.strip_prefix(".metadata.labels.") {
        return (!held_key(key)).then_some(Shared::Label(key));
    }
    if let Some(key) = field.strip_prefix(".metadata.annotations.") {
        return (!held_key(key)).then_some(Shared::Annotation(key));
    }
    (field == ".spec.replicas" && SCALED_KINDS.contains(&kind)).then_some(Shared::Replicas)
}

/// Whether gpufleet leaves `conflict` to its owner rather than taking it back.
pub fn leaves(kind: &str, conflict: &Conflict) -> bool {
    !is_hand_edit(&conflict.manager) && shared_field(kind, &conflict.field).is_some()
}

/// When gpufleet [`leaves`] `conflict` to its owner, removes its field from `object`, an
/// apply body of `kind`, so the apply neither sets nor claims it. Returns whether it did.
pub fn leave_out(kind: &str, object: &mut Json, conflict: &Conflict) -> bool {
    if !leaves(kind, conflict) {
        return false;
    }
    match shared_field(kind, &conflict.field) {
        Some(Shared::Label(key)) => remove(object, &["metadata", "labels"], key),
        Some(Shared::Annotation(key)) => remove(object, &["metadata", "annotations"], key),
        Some(Shared::Replicas) => remove(object, &["spec"], "replicas"),
        None => false,
    }
}

fn remove(object: &mut Json, parents: &[&str], key: &str) -> bool {
    let mut at = object;
    for p in parents {
        match at.get_mut(*p) {
            Some(next) => at = next,
            None => return false,
        }
    }
    at.as_object_mut().is_some_and(|m| m.remove(key).is_some())
}

/// The controller (not gpufleet, not a hand edit) that keeps label `key` of a live
/// `object`, read from its managed fields; `None` when gpufleet holds the key or nobody
/// else owns it.
pub fn label_kept_by<'a>(object: &'a Json, key: &str) -> Option<&'a str> {
    kept_by(object, &format!(".metadata.labels.{key}"))
}

/// The controller (not gpufleet, not a hand edit) that keeps `field` of a live `object`
/// (`.metadata.labels.<key>`, `.metadata.annotations.<key>` or `.spec.replicas`, as
/// conflicts name them), read from its managed fields; `None` when gpufleet does not leave
/// that field to others, or nobody else owns it. A refresh skips such fields, as apply does.
pub fn kept_by<'a>(object: &'a Json, field: &str) -> Option<&'a str> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let path: Vec<String> = match shared_field(kind, field)? {
        Shared::Label(key) => vec!["f:metadata".into(), "f:labels".into(), format!("f:{key}")],
        Shared::Annotation(key) => vec![
            "f:metadata".into(),
            "f:annotations".into(),
            format!("f:{key}"),
        ],
        Shared::Replicas => vec!["f:spec".into(), "f:replicas".into()],
    };
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .filter(|entry| {
            path.iter()
                .try_fold(&entry["fieldsV1"], |at, step| at.get(step))
                .is_some()
        })
        .filter_map(|entry| entry["manager"].as_str())
        .find(|m| *m != FIELD_MANAGER && !is_hand_edit(m))
}

#[cfg(test)]
mod tests {
    use kube::core::{Status, response::StatusCause, response::StatusDetails};
    use serde_json::json;

    use super::*;

    fn conflict(field: &str, manager: &str) -> Conflict {
        Conflict {
            field: field.into(),
            manager: manager.into(),
        }
    }

    #[test]
    fn conflicts_are_read_from_the_status_causes() {
        let mut status = Status::failure("Apply failed with 2 conflicts", "Conflict");
        status.details = Some(StatusDetails {
            name: "a".into(),
            group: "apps".into(),
            kind: "statefulsets".into(),
            uid: String::new(),
            causes: vec![
                StatusCause {
                    reason: "FieldManagerConflict".into(),
                    message: r#"conflict with "kube-controller-manager" using apps/v1"#.into(),
                    field: ".spec.replicas".into(),
                },
                StatusCause {
                    reason: "FieldManagerConflict".into(),
                    message: r#"conflict with "label-sync""#.into(),
                    field: ".metadata.labels.team".into(),
                },
                StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: "not a conflict".into(),
                    field: ".spec".into(),
                },
            ],
            retry_after_seconds: 0,
        });
        assert_eq!(
            Conflict::all_in(&status),
            vec![
                conflict(".spec.replicas", "kube-controller-manager"),
                conflict(".metadata.labels.team", "label-sync"),
            ]
        );
        assert!(Conflict::all_in(&Status::failure("gone", "NotFound")).is_empty());
    }

    #[test]
    fn controllers_keep_replicas_and_their_own_labels_but_not_what_the_tiers_rest_on() {
        let sts = "StatefulSet";
        assert!(leaves(
            sts,
            &conflict(".spec.replicas", "kube-controller-manager")
        ));
        assert!(leaves(
            sts,
            &conflict(".metadata.labels.team", "label-sync")
        ));
        assert!(leaves(
            sts,
            &conflict(".metadata.annotations.note", "argocd")
        ));
        // Hand edits are drift, whatever the field.
        assert!(!leaves(sts, &conflict(".spec.replicas", "kubectl-scale")));
        assert!(!leaves(
            sts,
            &conflict(".metadata.labels.team", "kubectl-label")
        ));
        // Held whoever wrote them.
        for held in [
            ".metadata.labels.gpufleet.dev/isolation",
            ".metadata.labels.pod-security.kubernetes.io/enforce",
            ".metadata.labels.app.kubernetes.io/managed-by",
            ".metadata.labels.app",
            ".metadata.annotations.loft.sh/paused",
            ".spec.template.spec.containers[name=\"syncer\"].image",
            ".data.config.yaml",
        ] {
            assert!(!leaves(sts, &conflict(held, "some-operator")), "{held}");
        }
        // Only workloads have an autoscaled replica count.
        assert!(!leaves(
            "NodePool",
            &conflict(".spec.replicas", "some-operator")
        ));
    }

    #[test]
    fn a_left_field_is_removed_from_the_apply_body() {
        let mut body = json!({
            "metadata": {"name": "a", "labels": {"team": "ml", "gpufleet.dev/tenant": "a"},
                         "annotations": {"note": "x"}},
            "spec": {"replicas": 1, "serviceName": "a"}
        });
        let sts = "StatefulSet";
        assert!(leave_out(
            sts,
            &mut body,
            &conflict(".metadata.labels.team", "c")
        ));
        assert!(leave_out(
            sts,
            &mut body,
            &conflict(".metadata.annotations.note", "c")
        ));
        assert!(leave_out(
            sts,
            &mut body,
            &conflict(".spec.replicas", "hpa")
        ));
        assert!(!leave_out(
            sts,
            &mut body,
            &conflict(".spec.replicas", "hpa")
        ));
        assert_eq!(
            body,
            json!({
                "metadata": {"name": "a", "labels": {"gpufleet.dev/tenant": "a"},
                             "annotations": {}},
                "spec": {"serviceName": "a"}
            })
        );
    }

    #[test]
    fn a_label_is_kept_by_the_controller_that_owns_it_in_managed_fields() {
        let ns = json!({"metadata": {"managedFields": [
            {"manager": "gpufleet", "operation": "Apply",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:tier": {}, "f:gpufleet.dev/isolation": {}}}}},
            {"manager": "label-sync", "operation": "Apply",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}, "f:gpufleet.dev/isolation": {}}}}},
            {"manager": "kubectl-label", "operation": "Update",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:owner": {}}}}}
        ]}});
        assert_eq!(label_kept_by(&ns, "team"), Some("label-sync"));
        assert_eq!(label_kept_by(&ns, "tier"), None);
        assert_eq!(label_kept_by(&ns, "owner"), None, "hand edits are drift");
        assert_eq!(label_kept_by(&ns, "gpufleet.dev/isolation"), None, "held");
    }

    #[test]
    fn a_replica_count_or_annotation_is_kept_by_the_controller_that_owns_it() {
        let sts = json!({"kind": "StatefulSet", "metadata": {"managedFields": [
            {"manager": "gpufleet", "operation": "Apply",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:serviceName": {}}}},
            {"manager": "autoscaler", "operation": "Update",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "argocd", "operation": "Apply",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:note": {}, "f:loft.sh/paused": {}}},
                          "f:spec": {"f:serviceName": {}}}}
        ]}});
        assert_eq!(kept_by(&sts, ".spec.replicas"), Some("autoscaler"));
        assert_eq!(kept_by(&sts, ".metadata.annotations.note"), Some("argocd"));
        assert_eq!(kept_by(&sts, ".metadata.annotations.loft.sh/paused"), None);
        assert_eq!(
            kept_by(&sts, ".spec.serviceName"),
            None,
            "not left to others"
        );
        let mut pool = sts.clone();
        pool["kind"] = json!("NodePool");
        assert_eq!(kept_by(&pool, ".spec.replicas"), None);
    }
}
