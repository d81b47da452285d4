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

mod containers;
mod metadata;
mod policies;
mod services;
mod statefulset;

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Value as Json, json};

pub use metadata::{POD_SECURITY_ENFORCE, POD_SECURITY_WARN, common_labels, namespace_labels};
use metadata::{annotations, chart_labels, list, meta, object, scalar_text, string_map};
use policies::{limit_range, network_policies, resource_quota};
use services::{headless_service, service};
use statefulset::statefulset;
pub use statefulset::{CONFIG_DIGEST, config_digest};

use super::{
    model::Spec,
    objects::{Names, ObjectRef},
    pause, rbac,
    values::{self, at, is_true, truthy},
};
use crate::backends::kube::host::ObjectKind;

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

/// The final vcluster.yaml of `spec`, as text.
pub fn vcluster_yaml(spec: &Spec) -> String {
    values::to_yaml(&values::values(spec))
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
