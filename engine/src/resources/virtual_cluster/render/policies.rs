//! The tenant's policies: the ResourceQuota, the LimitRange and the NetworkPolicies.

use serde_json::{Map, Value as Json, json};

use super::metadata::{list, set, string_map};
use crate::resources::virtual_cluster::{
    model::Spec,
    objects::Names,
    values::{at, truthy},
};

/// A policy's quoted values (`{{ $val | quote }}`).
fn quoted(v: Option<&Json>) -> Map<String, Json> {
    string_map(v)
        .into_iter()
        .map(|(k, x)| (k, Json::String(x)))
        .collect()
}

pub(super) fn resource_quota(v: &Json) -> Json {
    let mut spec = Map::new();
    let hard = quoted(at(v, "policies.resourceQuota.quota"));
    if !hard.is_empty() {
        spec.insert("hard".to_owned(), Json::Object(hard));
    }
    if let Some(x) = set(v, "policies.resourceQuota.scopeSelector.matchExpressions") {
        spec.insert("scopeSelector".to_owned(), json!({ "matchExpressions": x }));
    }
    if let Some(x) = set(v, "policies.resourceQuota.scopes") {
        spec.insert("scopes".to_owned(), x.clone());
    }
    json!({ "spec": spec })
}

pub(super) fn limit_range(v: &Json) -> Json {
    let mut limit = Map::new();
    for key in ["default", "defaultRequest", "min", "max"] {
        let m = quoted(at(v, &format!("policies.limitRange.{key}")));
        if !m.is_empty() {
            limit.insert(key.to_owned(), Json::Object(m));
        }
    }
    limit.insert("type".to_owned(), json!("Container"));
    json!({ "spec": { "limits": [limit] } })
}

/// The chart's NetworkPolicies (`networkpolicy.yaml`), by name, when the policy is on.
pub(super) fn network_policies(v: &Json, spec: &Spec, names: &Names) -> Vec<(String, Json)> {
    let release = || json!({ "podSelector": { "matchLabels": { "release": spec.name } } });
    let workloads = || json!({ "podSelector": { "matchLabels": { "vcluster.loft.sh/managed-by": spec.name } } });
    let host_dns = || {
        json!({
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "kube-system" } },
            "podSelector": { "matchLabels": { "k8s-app": "kube-dns" } },
        })
    };
    let platform =
        || json!({ "podSelector": { "matchLabels": { "app": "loft" } }, "namespaceSelector": {} });
    let port = |p: i64, proto: &str| json!({ "port": p, "protocol": proto });
    let dns_and_api = || json!([port(1053, "UDP"), port(1053, "TCP"), port(8443, "TCP")]);
    let host_api = || json!([port(443, "TCP"), port(8443, "TCP"), port(6443, "TCP")]);
    let private = truthy(v, "privateNodes.enabled");
    let [work, cp, dns, snapshot] = names.network_policies();
    let mut out = Vec::new();
    if !private {
        let mut egress = vec![
            json!({ "ports": dns_and_api(), "to": [release()] }),
            json!({ "to": [workloads()] }),
        ];
        if truthy(v, "policies.networkPolicy.workload.publicEgress.enabled") {
            egress.push(json!({ "to": [{ "ipBlock": {
                "cidr": at(v, "policies.networkPolicy.workload.publicEgress.cidr"),
                "except": at(v, "policies.networkPolicy.workload.publicEgress.except"),
            } }] }));
        }
        egress.extend(list(v, "policies.networkPolicy.workload.egress"));
        let mut ingress = vec![
            json!({ "from": [release()] }),
            json!({ "from": [workloads()] }),
        ];
        ingress.extend(list(v, "policies.networkPolicy.workload.ingress"));
        out.push((
            work,
            json!({ "spec": {
                "podSelector": { "matchLabels": { "vcluster.loft.sh/managed-by": spec.name } },
                "policyTypes": ["Egress", "Ingress"],
                "egress": egress,
                "ingress": ingress,
            } }),
        ));
    }
    let mut egress = vec![
        json!({ "to": [host_dns()] }),
        json!({ "ports": host_api() }),
        json!({ "to": [release()] }),
        json!({ "to": [workloads()] }),
        json!({ "to": [platform()] }),
    ];
    egress.extend(list(v, "policies.networkPolicy.controlPlane.egress"));
    let mut ingress = vec![
        json!({ "ports": [port(8443, "TCP")] }),
        json!({ "from": [release()] }),
        json!({ "ports": dns_and_api(), "from": [workloads()] }),
        json!({ "from": [{ "podSelector": { "matchLabels": { "app": "vcluster-snapshot" } } }] }),
        json!({ "from": [platform()] }),
    ];
    ingress.extend(list(v, "policies.networkPolicy.controlPlane.ingress"));
    out.push((
        cp,
        json!({ "spec": {
            "podSelector": { "matchLabels": { "release": spec.name } },
            "policyTypes": ["Egress", "Ingress"],
            "egress": egress,
            "ingress": ingress,
        } }),
    ));
    if truthy(v, "controlPlane.coredns.enabled")
        && !truthy(v, "controlPlane.coredns.embedded")
        && !private
    {
        out.push((
            dns,
            json!({ "spec": {
                "podSelector": { "matchLabels": {
                    "k8s-app": "vcluster-kube-dns",
                    "vcluster.loft.sh/managed-by": spec.name,
                } },
                "policyTypes": ["Egress", "Ingress"],
                "egress": [
                    { "to": [host_dns()] },
                    { "ports": [port(8443, "TCP")], "to": [release()] },
                ],
                "ingress": [
                    { "ports": [port(1053, "TCP"), port(1053, "UDP")], "from": [workloads()] },
                ],
            } }),
        ));
    }
    out.push((
        snapshot,
        json!({ "spec": {
            "podSelector": { "matchLabels": { "app": "vcluster-snapshot" } },
            "policyTypes": ["Egress", "Ingress"],
            "egress": [
                { "to": [release()] },
                { "to": [host_dns()] },
                { "ports": host_api() },
            ],
        } }),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_strings() {
        let m = quoted(Some(&json!({ "cpu": 10, "memory": "1Gi", "x": null })));
        assert_eq!(Json::Object(m), json!({ "cpu": "10", "memory": "1Gi" }));
    }
}
