//! The host objects of one virtual cluster, each read once.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::backends::kube::{
    ObjectError,
    host::{HostObjects, ObjectKind},
};
use crate::resources::virtual_cluster::{
    adopt::{self, owned_by},
    expose::Expose,
    objects::{Names, ObjectRef},
    readiness::{self, Readiness},
    render,
};

/// The host objects of one virtual cluster, as read.
#[derive(Debug, Default)]
pub struct Observed {
    /// The namespace, if it exists and is not terminating.
    pub namespace: Option<Json>,
    /// The objects gpufleet writes, by reference; absent ones are missing.
    pub objects: BTreeMap<ObjectRef, Json>,
    /// The namespace is ours and terminating.
    pub terminating: bool,
    /// The control plane's readiness.
    pub readiness: Option<Readiness>,
    /// How the control plane is reached, as found.
    pub expose: Expose,
    /// The vcluster.yaml in the config Secret, parsed once (it is the size of the chart's
    /// values, and a refresh of many tenants parses one per tenant).
    pub config: Option<Json>,
}

impl Observed {
    pub(super) fn get(&self, kind: ObjectKind, name: &str) -> Option<&Json> {
        self.objects.get(&ObjectRef {
            kind,
            name: name.to_owned(),
        })
    }
}

/// Reads everything; `namespace: None` when the namespace is gone or terminating (then only
/// the objects outside it are read: a delete interrupted after the namespace went leaves
/// them behind). `expected` is what the state renders, if known: a stored vcluster.yaml of
/// the same text is taken as its values rather than parsed.
pub async fn observe(
    host: &dyn HostObjects,
    namespace: &str,
    names: &Names,
    expected: Option<&render::Rendered>,
) -> Result<Observed, ObjectError> {
    let ns = host.get(ObjectKind::Namespace, None, namespace).await?;
    let deleting = |n: &Json| n.pointer("/metadata/deletionTimestamp").is_some();
    let terminating = ns
        .as_ref()
        .is_some_and(|n| deleting(n) && owned_by(n, &names.name));
    let Some(ns) = ns.filter(|n| !deleting(n)) else {
        let mut objects = BTreeMap::new();
        for r in names.all().into_iter().filter(|r| r.kind.cluster_scoped()) {
            if let Some(o) = host.get(r.kind, None, &r.name).await? {
                objects.insert(r, o);
            }
        }
        return Ok(Observed {
            objects,
            terminating,
            ..Observed::default()
        });
    };
    let mut objects = BTreeMap::new();
    for r in names.all() {
        if let Some(o) = host.get(r.kind, r.namespace(namespace), &r.name).await? {
            objects.insert(r, o);
        }
    }
    let config = objects
        .get(&ObjectRef {
            kind: ObjectKind::Secret,
            name: names.config(),
        })
        .and_then(|secret| stored_config(secret, expected));
    let mut observed = Observed {
        namespace: Some(ns),
        terminating: false,
        objects,
        readiness: None,
        expose: Expose::default(),
        config,
    };
    observed.expose = Expose::observed(
        observed.get(ObjectKind::Service, &names.name),
        observed.config.as_ref(),
    );
    observed.readiness = Some(readiness::observe(host, namespace, names, &observed.expose).await?);
    Ok(observed)
}

/// The vcluster.yaml in config Secret `secret`, as a value: `expected`'s values when the
/// text is what it renders (parsing a document the size of the chart's values costs a
/// refresh of many tenants more than all its other work), else parsed.
fn stored_config(secret: &Json, expected: Option<&render::Rendered>) -> Option<Json> {
    if let Some(expected) = expected
        && adopt::config_text(secret).as_deref() == Some(expected.vcluster_yaml.as_str())
    {
        return Some(expected.values.clone());
    }
    adopt::config_of(secret).map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{resources::virtual_cluster::model::Spec, value::Value};

    /// The shortcut [`stored_config`] takes holds only if the rendered text reads back as
    /// the rendered values.
    #[test]
    fn a_stored_vcluster_yaml_of_the_rendered_text_is_the_rendered_values() {
        use base64::Engine as _;
        let other = render::render(
            &Spec::from_value(&Value::object([
                ("name", Value::string("team-b")),
                ("namespace", Value::string("vc-team-b")),
            ]))
            .expect("a valid spec"),
        );
        let overrides = "controlPlane:\n  statefulSet:\n    resources:\n      limits:\n        cpu: \"1.5\"\n        memory: 2Gi\n  proxy:\n    extraSANs: [\"10.0.0.1\", \"true\"]\nsync:\n  toHost:\n    pods:\n      enabled: true\nexperimental:\n  deploy:\n    host:\n      manifests: \"a: 1.0\"\n";
        for extra in [
            vec![],
            vec![("isolation", Value::string("private"))],
            vec![("values_override", Value::string(overrides))],
        ] {
            let mut attrs = vec![
                ("name", Value::string("team-a")),
                ("namespace", Value::string("vc-team-a")),
            ];
            attrs.extend(extra);
            let spec = Spec::from_value(&Value::object(attrs)).expect("a valid spec");
            let rendered = render::render(&spec);
            let secret = serde_json::json!({ "data": {
                render::CONFIG_KEY: base64::engine::general_purpose::STANDARD
                    .encode(&rendered.vcluster_yaml),
            } });
            let (_, parsed) = adopt::config_of(&secret).expect("a vcluster.yaml");
            assert_eq!(parsed, rendered.values);
            assert_eq!(stored_config(&secret, Some(&rendered)), Some(parsed));
            // Another tenant's rendering is another text: the stored one is parsed.
            assert_eq!(
                stored_config(&secret, Some(&other)),
                Some(rendered.values.clone())
            );
        }
    }
}
