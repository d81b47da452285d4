//! The differences between the objects read and the rendered ones, one sentence each.

use serde_json::Value as Json;

use super::observe::Observed;
use crate::backends::kube::{host::ObjectKind, json::str_at};
use crate::resources::virtual_cluster::{
    compare,
    objects::{Names, ObjectRef},
    pause, render,
};

/// Differences between the observed objects and `rendered`, one sentence each: every object
/// of [`HOST_OBJECTS`](crate::resources::virtual_cluster::objects::HOST_OBJECTS) that is
/// rendered, missing or compared field by field ([`compare`]), and every one present that
/// the configuration does not have.
pub(super) fn drift(
    observed: &Observed,
    rendered: &render::Rendered,
    names: &Names,
) -> Vec<String> {
    let mut out = Vec::new();
    let compare = |out: &mut Vec<String>, what: String, have: &Json, want: &Json, kind| {
        out.extend(
            compare::differences(kind, have, want)
                .into_iter()
                .map(|d| format!("{what}: {d}")),
        );
    };
    if let Some(ns) = &observed.namespace {
        let name = str_at(ns, "/metadata/name").unwrap_or_default();
        compare(
            &mut out,
            format!("Namespace {name}"),
            ns,
            &rendered.namespace,
            ObjectKind::Namespace,
        );
    }
    for (r, want) in &rendered.objects {
        match observed.objects.get(r) {
            None => out.push(format!("{r}: missing")),
            Some(have) => compare(&mut out, r.to_string(), have, want, r.kind),
        }
    }
    for r in &rendered.absent {
        if observed.objects.contains_key(r) {
            out.push(format!(
                "{r}: present, but not in the configuration (apply deletes it)"
            ));
        }
    }
    let sts_ref = ObjectRef {
        kind: ObjectKind::StatefulSet,
        name: names.name.clone(),
    };
    if let (Some(have), Some(want)) = (observed.objects.get(&sts_ref), rendered.object(&sts_ref)) {
        // Pause marks the rendering lacks (the vCluster CLI's) are drift too: apply removes
        // them. Not the date: it records when the pause happened, which no rendering knows.
        let annotation = |o: &Json, k: &str| {
            o.pointer(&format!("/metadata/annotations/{}", k.replace('/', "~1")))
                .cloned()
        };
        if [pause::PAUSED, pause::PAUSED_REPLICAS]
            .iter()
            .any(|k| annotation(have, k).is_some() && annotation(want, k).is_none())
        {
            out.push(format!(
                "StatefulSet {}: pause annotations differ from the rendered ones",
                names.name
            ));
        }
    }
    out
}
