//! Planning a virtual cluster: the computed values known before apply, the attributes that
//! force a replacement, and the warnings and refusals a plan carries (see the kind's docs).

use super::{
    expose,
    model::{ACCESS, CREDENTIALS, credentials_in_state, default_namespace},
    persistence, versions,
};
use crate::{
    diag::{Diagnostic, Diagnostics},
    kinds::{PlanRequest, PlanResponse},
    path::AttrPath,
    value::Value,
};

/// Attributes whose change restarts the control plane (and may rewrite its kubeconfig);
/// `expose` too, compared by what it means ([`expose_changes`]).
const RESTARTING: &[&str] = &[
    "paused",
    "kubernetes_version",
    "values_override",
    "vcluster_version",
    "persistence",
];

/// Whether `planned` may reach the control plane differently from `prior` (a null `expose`,
/// from a state older than the attribute, means the default; an unknown one may differ).
fn expose_changes(prior: &Value, planned: &Value) -> bool {
    !planned.is_wholly_known()
        || expose::Expose::from_value(prior) != expose::Expose::from_value(planned)
}

/// When the plan creates a virtual cluster, or changes `expose`, so that its outputs name
/// an address only pods of the host cluster reach (a ClusterIP Service without `host`):
/// says so, and how to reach it from outside.
fn in_cluster_only_warning(req: &PlanRequest, planned: &Value) -> Option<Diagnostic> {
    let now = planned.get("expose");
    if !now.is_wholly_known() || !expose::Expose::from_value(now).in_cluster_only() {
        return None;
    }
    if !req.prior.is_null() && !expose_changes(req.prior.get("expose"), now) {
        return None;
    }
    let address = match (
        planned.get("name").as_str(),
        planned.get("namespace").as_str(),
    ) {
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
        .with_path(AttrPath::attr("expose")),
    )
}

/// The kind's part of planning; see the kind's docs.
pub(super) fn plan_virtual_cluster(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    let mut diagnostics = Diagnostics::new();
    let mut requires_replace = Vec::new();
    let name = planned.get("name").as_str().map(str::to_owned);
    if req.config.get("namespace").is_null() {
        let ns = name
            .as_deref()
            .map_or_else(Value::unknown, |n| Value::string(default_namespace(n)));
        planned.set_attr("namespace", ns);
    }
    let id = match (planned.get("namespace").as_str(), name.as_deref()) {
        (Some(ns), Some(n)) => Value::string(format!("{ns}/{n}")),
        _ => Value::unknown(),
    };
    planned.set_attr("id", id);
    planned.set_attr(
        "vcluster_version",
        Value::string(versions::VCLUSTER_VERSION),
    );
    planned.set_attr("drift", Value::List(Vec::new()));
    let status = match planned.get("paused").as_bool() {
        Some(true) => Value::string("Paused"),
        Some(false) => Value::string("Running"),
        None => Value::unknown(),
    };
    planned.set_attr("status", status);
    if !planned.get("sleep").is_null() {
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
            .with_path(AttrPath::attr("sleep")),
        );
    }
    if let Some(d) = in_cluster_only_warning(req, &planned) {
        diagnostics.push(d);
    }
    if !req.prior.is_null() {
        let (was, now) = (
            req.prior.get("kubernetes_version").as_str(),
            planned.get("kubernetes_version").as_str(),
        );
        if let (Some(was), Some(now)) = (was, now)
            && versions::compare(now, was) == Some(std::cmp::Ordering::Less)
        {
            diagnostics.error_at(
                AttrPath::attr("kubernetes_version"),
                "Kubernetes Downgrade Refused",
                format!(
                    "kubernetes_version would go from {was} to {now}; a control plane cannot be \
                     downgraded. Keep {was}, or replace the virtual cluster to start afresh."
                ),
            );
        }
        let (was, now) = (req.prior.get("isolation"), planned.get("isolation"));
        if !was.is_null() && !now.is_unknown() && was != now {
            diagnostics.push(
                Diagnostic::warning(
                    "Isolation Change Replaces The Virtual Cluster",
                    format!(
                        "isolation is fixed at creation: changing it from {} to {} destroys the \
                         virtual cluster (its API server, data and kubeconfig) and creates a new \
                         one. GPU node pools that set isolation from this virtual cluster are \
                         checked against the new tier in this plan; pools that leave it out \
                         keep their nodes until their next plan.",
                        was.as_str().unwrap_or("?"),
                        now.as_str().unwrap_or("?"),
                    ),
                )
                .with_path(AttrPath::attr("isolation")),
            );
        }
        let (paths, warnings) =
            persistence::replacements(req.prior.get("persistence"), planned.get("persistence"));
        requires_replace.extend(paths);
        diagnostics.extend(warnings);
        let restarts = RESTARTING
            .iter()
            .any(|a| planned.get(a) != req.prior.get(a))
            || expose_changes(req.prior.get("expose"), planned.get("expose"));
        // Credentials that start going into state are read from the Secret at apply.
        let credentials_added = credentials_in_state(&req.prior) == Some(false)
            && credentials_in_state(&planned) != Some(false);
        for a in ACCESS {
            let v = if restarts || (credentials_added && CREDENTIALS.contains(a)) {
                Value::unknown()
            } else {
                req.prior.get(a).clone()
            };
            planned.set_attr(a, v);
        }
    }
    if credentials_in_state(&planned) == Some(false) {
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
