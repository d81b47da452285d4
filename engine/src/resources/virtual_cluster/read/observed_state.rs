//! The state a refresh or an import reads: normalised against the prior state, with what
//! the objects do not say in `drift`; and the state of a virtual cluster half deleted.

use std::collections::BTreeMap;

use super::drift::drift;
use super::observe::Observed;
use super::reflected::{limit_range_value, quota_value, reflected_expose};
use crate::backends::kube::{
    ISOLATION,
    host::ObjectKind,
    json::{labels_of, str_at},
};
use crate::resources::virtual_cluster::{
    adopt,
    config::ClusterConfig,
    model::{ACCESS, Spec, access_values},
    objects::Names,
    persistence,
    readiness::Readiness,
    render::{self, POD_SECURITY_ENFORCE},
    schema::{
        self as attrs, AFTER_INACTIVITY, DRIFT, EXPOSE, ID, ISOLATIONS, KUBERNETES_VERSION, LABELS,
        LIMIT_RANGE, NAMESPACE, NETWORK_ISOLATION, PAUSED, PERSISTENCE, POD_SECURITY,
        POD_SECURITY_LEVELS, QUOTA, SLEEP, STATUS, VALUES_OVERRIDE, persistence_value,
    },
    values,
    versions::{self, VCLUSTER_VERSION},
};
use crate::value::Value;

/// The state of a virtual cluster whose namespace is terminating, or gone while objects
/// outside it remain, as a delete interrupted half way leaves it: still there, so that
/// destroy removes the rest, `Pending`, and with what is missing in `drift`, so that an
/// apply puts the virtual cluster back.
pub fn half_deleted(prior: &Value, observed: &Observed, names: &Names) -> Value {
    let ns = if observed.terminating {
        "terminating"
    } else {
        "missing"
    };
    let mut found = vec![format!("Namespace {}: {ns}", names.namespace)];
    found.extend(
        observed
            .objects
            .keys()
            .map(|r| format!("{r}: left by an unfinished delete")),
    );
    let mut s = prior.clone();
    s.set_attr(STATUS, Value::string("Pending"));
    s.set_attr(
        DRIFT,
        Value::List(found.into_iter().map(Value::string).collect()),
    );
    s
}

/// The state of the virtual cluster as observed, normalised against `prior`; null when the
/// namespace is gone. An import (a `prior` without `isolation`) takes every configurable
/// attribute from the cluster; a refresh keeps the configured ones and reports differences
/// in `drift`, except those users can see directly (quota, limit range, network isolation,
/// paused, the volume claim), which are reflected in their attributes. `expected` is what
/// `prior` renders, when the caller has it.
pub fn observed_state(
    prior: &Value,
    observed: &Observed,
    names: &Names,
    expected: Option<render::Rendered>,
) -> Value {
    let Some(ns) = &observed.namespace else {
        return Value::Null;
    };
    let was = ClusterConfig::decode(prior);
    let importing = was.isolation.is_null();
    let mut s = prior.clone();
    let namespace = str_at(ns, "/metadata/name").unwrap_or_default().to_owned();
    s.set_attr(NAMESPACE, Value::string(namespace.clone()));
    s.set_attr(ID, Value::string(format!("{namespace}/{}", names.name)));
    let ns_labels = labels_of(ns);
    let config = observed.config.as_ref();
    if importing {
        // A release Helm installed has none of gpufleet's namespace labels: its tier and
        // pod security level are read from what its vcluster.yaml and namespace do.
        let isolation = ns_labels
            .get(ISOLATION)
            .filter(|i| ISOLATIONS.contains(&i.as_str()))
            .cloned()
            .unwrap_or_else(|| adopt::isolation_of(config).to_owned());
        s.set_attr(attrs::ISOLATION, Value::string(isolation));
        let pod_security = ns_labels
            .get(POD_SECURITY_ENFORCE)
            .filter(|p| POD_SECURITY_LEVELS.contains(&p.as_str()))
            .cloned()
            .unwrap_or_else(|| adopt::pod_security_of(config).to_owned());
        s.set_attr(POD_SECURITY, Value::string(pod_security));
        let version = config
            .and_then(adopt::distro_tag)
            .and_then(versions::minor_of_tag);
        if let Some(v) = version {
            s.set_attr(KUBERNETES_VERSION, Value::string(v));
        }
        let sleep = config.and_then(|c| {
            c.pointer("/sleep/auto/afterInactivity")?
                .as_str()
                .map(str::to_owned)
        });
        s.set_attr(
            SLEEP,
            sleep.map_or(Value::Null, |a| {
                Value::object([(AFTER_INACTIVITY, Value::string(a))])
            }),
        );
        let config_secret = observed.get(ObjectKind::Secret, &names.config());
        let user: BTreeMap<String, Value> = config_secret
            .map(adopt::user_labels)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, Value::string(v)))
            .collect();
        s.set_attr(
            LABELS,
            if user.is_empty() {
                Value::Null
            } else {
                Value::Map(user)
            },
        );
    }
    s.set_attr(
        QUOTA,
        quota_value(
            observed.get(ObjectKind::ResourceQuota, &names.vc()),
            was.quota.value(),
        ),
    );
    s.set_attr(
        LIMIT_RANGE,
        limit_range_value(
            observed.get(ObjectKind::LimitRange, &names.vc()),
            was.limit_range.value(),
        ),
    );
    // Isolated when both the tenant's pods and the control plane are: with either policy
    // gone, the tenant is not, whatever else is left.
    let [workloads_policy, control_plane_policy, ..] = names.network_policies();
    s.set_attr(
        NETWORK_ISOLATION,
        Value::Bool(
            [workloads_policy, control_plane_policy]
                .iter()
                .all(|p| observed.get(ObjectKind::NetworkPolicy, p).is_some()),
        ),
    );
    let sts = observed.get(ObjectKind::StatefulSet, &names.name);
    if let Some(replicas) = sts.and_then(|o| o.pointer("/spec/replicas")?.as_i64()) {
        s.set_attr(PAUSED, Value::Bool(replicas == 0));
    }
    // The claim the StatefulSet has, which a plan can only keep or replace; a missing
    // StatefulSet keeps what the state says (apply creates it with that claim, and a claim
    // retained from before is used again).
    if let Some(o) = sts {
        let prior_size = was.persistence.value().and_then(|p| p.size.value());
        let claim = persistence::observed(o, prior_size.map(String::as_str));
        s.set_attr(
            PERSISTENCE,
            claim.map_or(Value::Null, |c| persistence_value(&c)),
        );
    }
    if let Some(v) = reflected_expose(&was.expose, &observed.expose, importing) {
        s.set_attr(EXPOSE, v);
    }
    let image_version = sts
        .and_then(|o| str_at(o, "/spec/template/spec/containers/0/image"))
        .and_then(|i| i.rsplit_once(':').map(|(_, tag)| tag.to_owned()));
    let version = image_version
        .or_else(|| was.vcluster_version.value().cloned())
        .unwrap_or_else(|| VCLUSTER_VERSION.to_owned());
    s.set_attr(attrs::VCLUSTER_VERSION, Value::string(version));
    let (status, access) = match &observed.readiness {
        Some(Readiness::Ready(a)) => ("Running", Some(a.clone())),
        Some(Readiness::Paused(a)) => ("Paused", a.clone()),
        _ => ("Pending", None),
    };
    s.set_attr(STATUS, Value::string(status));
    if access.is_some() {
        let credentials = was.credentials_in_state().unwrap_or(true);
        for (k, v) in access_values(access.as_ref(), credentials) {
            s.set_attr(k, v);
        }
    } else if status != "Running" {
        // Keep what was recorded: a restarting control plane keeps its kubeconfig, and a
        // load balancer between addresses its last one.
        for k in ACCESS {
            if s.get(k).is_unknown() {
                s.set_attr(k, Value::Null);
            }
        }
    }
    // What no attribute says comes back through `values_override`: a release's own
    // settings, or an override gpufleet wrote. What cannot come back is named in `drift`.
    let mut left_out = Vec::new();
    if importing && let (Some(stored), Ok(spec)) = (config, Spec::from_value(&s)) {
        let recovered = adopt::recover_override(&spec, stored, adopt::version_of(sts).as_deref());
        if let Some(over) = recovered.over {
            s.set_attr(VALUES_OVERRIDE, Value::string(values::to_yaml(&over)));
        }
        left_out = recovered
            .left_out
            .into_iter()
            .map(|(key, why)| {
                format!("vcluster.yaml: {key} is not carried over ({why}); apply writes gpufleet's")
            })
            .collect();
    }
    // Drift is measured against what gpufleet last wrote (the prior state); an import has no
    // prior, so against what the observed attributes would render.
    let basis = if importing { &s } else { prior };
    let rendered = match expected.filter(|_| !importing) {
        Some(rendered) => Ok(rendered),
        None => Spec::from_value(basis).map(|spec| render::render(&spec)),
    };
    let found: Vec<Value> = match rendered {
        Ok(mut rendered) => {
            adopt::keep_running_template(
                &mut rendered,
                sts,
                observed.get(ObjectKind::Secret, &names.config()),
            );
            left_out
                .into_iter()
                .chain(drift(observed, &rendered, names))
                .map(Value::string)
                .collect()
        }
        Err(_) => Vec::new(),
    };
    s.set_attr(DRIFT, Value::List(found));
    s.with_unknowns_nulled()
}
