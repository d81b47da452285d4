//! Planning a virtual cluster: the computed values known before apply, the attributes that
//! force a replacement, and the warnings and refusals a plan carries (see the kind's docs).
//! It reads the configuration, the proposed value and the prior state as [`ClusterConfig`]
//! decodes them.

use super::{
    claim_change,
    config::ClusterConfig,
    expose,
    model::{ACCESS, CREDENTIALS, Isolation, default_namespace},
    schema::{
        DRIFT, EXPOSE, ID, ISOLATION, KUBERNETES_VERSION, NAMESPACE, SLEEP, STATUS,
        VCLUSTER_VERSION,
    },
    versions,
};
use crate::{
    diag::{Diagnostic, Diagnostics},
    kinds::{PlanRequest, PlanResponse},
    path::AttrPath,
    value::{Known, Value},
};

/// Whether the control plane restarts (and may rewrite its kubeconfig) going from `prior` to
/// `planned`: a change of `paused`, `kubernetes_version`, `values_override`, the pinned
/// release or `persistence`, or of `expose` by what it means ([`expose_changes`]).
fn restarts_control_plane(prior: &ClusterConfig, planned: &ClusterConfig) -> bool {
    prior.paused != planned.paused
        || prior.kubernetes_version != planned.kubernetes_version
        || prior.values_override != planned.values_override
        || prior.vcluster_version != Known::Value(versions::VCLUSTER_VERSION.to_owned())
        || prior.persistence != planned.persistence
        || expose_changes(prior, planned)
}

/// Whether `planned` may reach the control plane differently from `prior` (a null `expose`,
/// from a state older than the attribute, means the default; an unknown one may differ).
fn expose_changes(prior: &ClusterConfig, planned: &ClusterConfig) -> bool {
    match planned.exposed() {
        None => true,
        now => prior.exposed() != now,
    }
}

/// When the plan creates a virtual cluster, or changes `expose`, so that its outputs name
/// an address only pods of the host cluster reach (a ClusterIP Service without `host`):
/// says so, and how to reach it from outside.
fn in_cluster_only_warning(
    prior: Option<&ClusterConfig>,
    planned: &ClusterConfig,
    name: Option<&str>,
    namespace: Option<&str>,
) -> Option<Diagnostic> {
    if !planned.exposed()?.in_cluster_only() {
        return None;
    }
    if prior.is_some_and(|prior| !expose_changes(prior, planned)) {
        return None;
    }
    let address = match (name, namespace) {
        (Some(n), Some(ns)) => expose::url(&expose::in_cluster_name(n, ns), expose::HTTPS_PORT),
        _ => "https://<name>.<namespace>.svc:443".to_owned(),
    };
    Some(
        Diagnostic::warning(
            "API Server Reachable Inside The Host Cluster Only",
            format!(
                "expose is a ClusterIP Service without host, so host, endpoint and kubeconfig \
                 name {address}, which only pods of the host cluster can reach. To use the \
                 virtual cluster from outside (for example to configure a kubernetes or helm \
                 provider), open it with the ephemeral resource \
                 gpufleet_virtual_cluster_connection, which port-forwards through the host API \
                 server; or set expose.type to NodePort or LoadBalancer, or expose.host to a \
                 name that leads to the Service."
            ),
        )
        .with_path(AttrPath::attr(EXPOSE)),
    )
}

/// The kind's part of planning; see the kind's docs.
pub(super) fn plan_virtual_cluster(req: &PlanRequest) -> PlanResponse {
    let config = ClusterConfig::decode(&req.config);
    let proposed = ClusterConfig::decode(&req.proposed);
    let prior = (!req.prior.is_null()).then(|| ClusterConfig::decode(&req.prior));
    let mut planned = req.proposed.clone();
    let mut diagnostics = Diagnostics::new();
    let mut requires_replace = Vec::new();
    let name = proposed.name.value().map(String::as_str);
    let namespace = if config.namespace.is_null() {
        let ns = name.map(default_namespace);
        planned.set_attr(
            NAMESPACE,
            ns.clone().map_or_else(Value::unknown, Value::string),
        );
        ns
    } else {
        proposed.namespace.value().cloned()
    };
    let id = match (namespace.as_deref(), name) {
        (Some(ns), Some(n)) => Value::string(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    planned.set_attr(ID, id);
    planned.set_attr(VCLUSTER_VERSION, Value::string(versions::VCLUSTER_VERSION));
    planned.set_attr(DRIFT, Value::List(Vec::new()));
    let status = match proposed.paused.value() {
        Some(true) => Value::string("Paused"),
        Some(false) => Value::string("Running"),
        None => Value::unknown(),
    };
    planned.set_attr(STATUS, status);
    if !proposed.sleep.is_null() {
        diagnostics.push(
            Diagnostic::warning(
                "Sleep Is Not Applied",
                format!(
                    "sleep.after_inactivity is vCluster's sleep mode (sleep.auto), a vCluster \
                     Platform feature that open-source vCluster {} does not implement. gpufleet \
                     leaves it out of vcluster.yaml, also where vCluster Platform runs, so this \
                     virtual cluster never goes to sleep. Set paused = true to scale it to zero \
                     instead, and remove sleep.",
                    versions::VCLUSTER_VERSION
                ),
            )
            .with_path(AttrPath::attr(SLEEP)),
        );
    }
    if let Some(d) = in_cluster_only_warning(prior.as_ref(), &proposed, name, namespace.as_deref())
    {
        diagnostics.push(d);
    }
    if let Some(prior) = &prior {
        if let (Some(was), Some(now)) = (
            prior.kubernetes_version.value(),
            proposed.kubernetes_version.value(),
        ) && versions::compare(now, was) == Some(std::cmp::Ordering::Less)
        {
            diagnostics.error_at(
                AttrPath::attr(KUBERNETES_VERSION),
                "Kubernetes Downgrade Refused",
                format!(
                    "kubernetes_version would go from {was} to {now}; a control plane cannot be \
                     downgraded. Keep {was}, or replace the virtual cluster to start afresh."
                ),
            );
        }
        let (was, now) = (prior.isolation, proposed.isolation);
        if !was.is_null() && !now.is_unknown() && was != now {
            let tier = |t: Known<Isolation>| t.value().map_or("?", |t| t.as_str());
            diagnostics.push(
                Diagnostic::warning(
                    "Isolation Change Replaces The Virtual Cluster",
                    format!(
                        "isolation is fixed at creation: changing it from {} to {} destroys the \
                         virtual cluster (its API server, data and kubeconfig) and creates a new \
                         one. GPU node pools that set isolation from this virtual cluster are \
                         checked against the new tier in this plan; pools that leave it out \
                         keep their nodes until their next plan.",
                        tier(was),
                        tier(now),
                    ),
                )
                .with_path(AttrPath::attr(ISOLATION)),
            );
        }
        let (paths, warnings) =
            claim_change::replacements(&prior.persistence, &proposed.persistence);
        requires_replace.extend(paths);
        diagnostics.extend(warnings);
        let restarts = restarts_control_plane(prior, &proposed);
        // Credentials that start going into state are read from the Secret at apply.
        let credentials_added = prior.credentials_in_state() == Some(false)
            && proposed.credentials_in_state() != Some(false);
        for a in ACCESS {
            let v = if restarts || (credentials_added && CREDENTIALS.contains(a)) {
                Value::unknown()
            } else {
                req.prior.get(a).clone()
            };
            planned.set_attr(a, v);
        }
    }
    if proposed.credentials_in_state() == Some(false) {
        for a in CREDENTIALS {
            planned.set_attr(a, Value::Null);
        }
    }
    PlanResponse {
        planned,
        requires_replace,
        diagnostics,
    }
}
