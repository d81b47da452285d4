//! The permissions of the control plane on the host, computed from the final vcluster.yaml
//! with the pinned chart's rules (its `role.yaml`, `clusterrole.yaml` and `_rbac.tpl`), in
//! the chart's order: whatever `values_override` turns on (ingress sync, say) comes with the
//! rights the syncer needs for it.
//!
//! One deliberate difference: the chart grants `pods/resize` only when the host runs
//! Kubernetes 1.35 or newer, which a pure render cannot know. gpufleet always grants it; a
//! rule naming a resource an older API server lacks grants nothing there.

use serde_json::{Value as Json, json};

use super::values::{at, is_true, text, truthy};

/// Every verb the syncer uses on what it owns.
const ALL: &[&str] = &[
    "create", "delete", "patch", "update", "get", "list", "watch",
];
/// Reading.
const READ: &[&str] = &["get", "list", "watch"];
/// Reading, in the order the chart's cluster role spells it.
const READ_GWL: &[&str] = &["get", "watch", "list"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Json {
    json!({ "apiGroups": groups, "resources": resources, "verbs": verbs })
}

/// The rules of a list-valued setting, as given.
fn listed(values: &Json, dotted: &str) -> Vec<Json> {
    at(values, dotted)
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default()
}

/// `_rbac.tpl`'s rules for custom resources: `<plural>.<group>[/<version>]` keys whose
/// setting is enabled, with `verbs`.
fn custom_resource_rules(values: &Json, dotted: &str, verbs: &[&str]) -> Vec<Json> {
    let Some(Json::Object(m)) = at(values, dotted) else {
        return Vec::new();
    };
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys.into_iter()
        .filter(|k| truthy(&m[*k], "enabled"))
        .map(|k| {
            let crd = k.split('/').next().unwrap_or_default();
            let (plural, group) = crd.split_once('.').unwrap_or((crd, ""));
            json!({ "resources": [plural], "apiGroups": [group], "verbs": verbs })
        })
        .collect()
}

/// The extra rules plugins ask for (`plugin` and `plugins`, by name), at `which` (`role` or
/// `clusterRole`).
fn plugin_rules(values: &Json, which: &str) -> Vec<Json> {
    let mut out = Vec::new();
    for key in ["plugin", "plugins"] {
        let Some(Json::Object(m)) = at(values, key) else {
            continue;
        };
        let mut names: Vec<&String> = m.keys().collect();
        names.sort();
        for n in names {
            out.extend(listed(&m[n], &format!("rbac.{which}.extraRules")));
        }
    }
    out
}

/// `vcluster.rbac.rulesForFromHostSyncerForGivenCoreResource`: reading the mapped host
/// objects of `kind` (`configmaps` or `secrets`) and their namespaces.
fn from_host_mapping_rules(values: &Json, setting: &str, kind: &str, namespace: &str) -> Vec<Json> {
    let mappings = at(values, &format!("{setting}.mappings.byName"));
    let Some(Json::Object(m)) = mappings else {
        return Vec::new();
    };
    if !truthy(values, &format!("{setting}.enabled")) || m.is_empty() {
        return Vec::new();
    }
    let mut namespaces = Vec::new();
    let mut names = Vec::new();
    let mut by_name = true;
    for key in m.keys() {
        let source_ns = key.split('/').next().unwrap_or_default();
        let source_name = key.rsplit('/').next().unwrap_or_default();
        namespaces.push(if source_ns.is_empty() {
            namespace.to_owned()
        } else {
            source_ns.to_owned()
        });
        if source_name == "*" {
            by_name = false;
        } else {
            names.push(source_name.to_owned());
        }
    }
    namespaces.sort();
    namespaces.dedup();
    names.sort();
    names.dedup();
    let mut get = json!({ "apiGroups": [""], "resources": [kind], "verbs": ["get"] });
    if by_name {
        get["resourceNames"] = json!(names);
    }
    vec![
        json!({
            "apiGroups": [""], "resources": ["namespaces"],
            "resourceNames": namespaces, "verbs": READ,
        }),
        rule(&[""], &[kind], &["list", "watch"]),
        get,
    ]
}

/// Whether the Role (or, in multi-namespace mode, its ClusterRole) exists.
pub fn role_enabled(values: &Json) -> bool {
    truthy(values, "rbac.role.enabled")
}

/// The rules of Role `vc-<name>`.
pub fn role_rules(values: &Json) -> Vec<Json> {
    let overwrite = listed(values, "rbac.role.overwriteRules");
    if !overwrite.is_empty() {
        return overwrite;
    }
    let t = |p: &str| truthy(values, p);
    let mut r = Vec::new();
    if t("privateNodes.enabled") {
        r.push(rule(&[""], &["secrets", "configmaps"], ALL));
        r.push(rule(
            &[""],
            &["services", "pods", "persistentvolumeclaims"],
            READ,
        ));
    } else {
        r.push(rule(
            &[""],
            &[
                "configmaps",
                "secrets",
                "services",
                "pods",
                "pods/attach",
                "pods/portforward",
                "pods/exec",
                "persistentvolumeclaims",
            ],
            ALL,
        ));
        r.push(rule(
            &[""],
            &["pods/status", "pods/ephemeralcontainers"],
            &["patch", "update"],
        ));
    }
    r.push(rule(&[""], &["pods/resize"], &["patch", "update"]));
    r.push(rule(
        &["apps"],
        &["statefulsets", "replicasets", "deployments"],
        &["get", "list", "watch", "patch", "update"],
    ));
    r.push(rule(&[""], &["endpoints", "pods/log"], READ));
    r.push(rule(
        &[""],
        &["events"],
        &["create", "get", "list", "watch"],
    ));
    r.push(rule(
        &["events.k8s.io"],
        &["events"],
        &["create", "get", "list", "watch"],
    ));
    if t("sync.toHost.endpoints.enabled") {
        r.push(rule(
            &[""],
            &["endpoints"],
            &["create", "delete", "patch", "update"],
        ));
    }
    if t("sync.toHost.endpointSlices.enabled") {
        r.push(rule(
            &["discovery.k8s.io"],
            &["endpointslices"],
            &[
                "create", "list", "get", "delete", "patch", "update", "watch",
            ],
        ));
    }
    let replicas = at(values, "controlPlane.statefulSet.highAvailability.replicas")
        .and_then(Json::as_i64)
        .unwrap_or(1);
    if t("privateNodes.enabled")
        || replicas > 1
        || t("controlPlane.backingStore.etcd.embedded.enabled")
    {
        r.push(rule(&["coordination.k8s.io"], &["leases"], ALL));
    }
    if t("integrations.metricsServer.enabled") && t("integrations.metricsServer.pods") {
        r.push(rule(&["metrics.k8s.io"], &["pods"], &["get", "list"]));
    }
    if t("sync.toHost.ingresses.enabled") {
        r.push(rule(&["networking.k8s.io"], &["ingresses"], ALL));
    }
    let gw = "gateway.networking.k8s.io";
    let gateway_api = t("sync.toHost.gatewayApi.enabled");
    if gateway_api || t("sync.toHost.gatewayApi.gateways.enabled") {
        r.push(rule(&[gw], &["gateways"], ALL));
    }
    if gateway_api || t("sync.toHost.gatewayApi.httpRoutes.enabled") {
        r.push(rule(&[gw], &["httproutes"], ALL));
    }
    if t("sync.toHost.gatewayApi.tlsRoutes.enabled") {
        r.push(rule(&[gw], &["tlsroutes"], ALL));
    }
    if t("sync.toHost.gatewayApi.backendTLSPolicies.enabled") {
        r.push(rule(&[gw], &["backendtlspolicies"], ALL));
    }
    let routes = gateway_api
        || t("sync.toHost.gatewayApi.httpRoutes.enabled")
        || t("sync.toHost.gatewayApi.tlsRoutes.enabled")
        || t("sync.toHost.gatewayApi.backendTLSPolicies.enabled");
    if (routes && t("sync.toHost.namespaces.enabled"))
        || t("integrations.istio.enabled")
        || is_true(values, "sync.toHost.gatewayApi.referenceGrants.enabled")
    {
        r.push(rule(&[gw], &["referencegrants"], ALL));
    } else if routes {
        r.push(rule(&[gw], &["referencegrants"], READ));
    }
    if t("sync.toHost.networkPolicies.enabled") {
        r.push(rule(&["networking.k8s.io"], &["networkpolicies"], ALL));
    }
    if t("sync.toHost.resourceClaims.enabled") {
        r.push(rule(&["resource.k8s.io"], &["resourceclaims"], ALL));
        r.push(rule(
            &["resource.k8s.io"],
            &["resourceclaims/status"],
            &["patch", "update"],
        ));
    }
    if t("sync.toHost.resourceClaimTemplates.enabled") {
        r.push(rule(&["resource.k8s.io"], &["resourceclaimtemplates"], ALL));
    }
    if t("sync.toHost.serviceAccounts.enabled") {
        r.push(rule(&[""], &["serviceaccounts"], ALL));
    }
    if t("sync.toHost.podDisruptionBudgets.enabled") {
        r.push(rule(&["policy"], &["poddisruptionbudgets"], ALL));
    }
    if t("integrations.kubeVirt.enabled") {
        r.push(rule(&["subresources.kubevirt.io"], &["*"], ALL));
        r.push(rule(
            &["pool.kubevirt.io"],
            &["virtualmachinepools", "virtualmachinepools/status"],
            ALL,
        ));
        r.push(rule(
            &["clone.kubevirt.io"],
            &["virtualmachineclones", "virtualmachineclones/status"],
            ALL,
        ));
        r.push(rule(
            &["cdi.kubevirt.io"],
            &["datavolumes", "datavolumes/status"],
            ALL,
        ));
        r.push(rule(
            &["kubevirt.io"],
            &[
                "virtualmachines",
                "virtualmachines/status",
                "virtualmachineinstances",
                "virtualmachineinstances/status",
                "virtualmachineinstancemigrations",
                "virtualmachineinstancemigrations/status",
            ],
            ALL,
        ));
    }
    if t("integrations.externalSecrets.enabled") {
        r.push(rule(&["external-secrets.io"], &["externalsecrets"], ALL));
        if t("integrations.externalSecrets.sync.toHost.stores.enabled") {
            r.push(rule(&["external-secrets.io"], &["secretstores"], ALL));
        }
    }
    if t("integrations.certManager.enabled") {
        if t("integrations.certManager.sync.toHost.certificates.enabled") {
            r.push(rule(&["cert-manager.io"], &["certificates"], ALL));
        }
        if t("integrations.certManager.sync.toHost.issuers.enabled") {
            r.push(rule(&["cert-manager.io"], &["issuers"], ALL));
        }
    }
    if t("integrations.istio.enabled") {
        r.push(rule(
            &["networking.istio.io"],
            &[
                "destinationrules",
                "gateways",
                "serviceentries",
                "virtualservices",
            ],
            ALL,
        ));
    }
    if t("experimental.nodeMonitors") {
        r.push(rule(&["monitoring.coreos.com"], &["servicemonitors"], ALL));
    }
    r.extend(custom_resource_rules(
        values,
        "sync.toHost.customResources",
        ALL,
    ));
    r.extend(plugin_rules(values, "role"));
    r.extend(listed(values, "rbac.role.extraRules"));
    r
}

/// Whether the chart renders the ClusterRole and its binding (`vcluster.createClusterRole`).
pub fn cluster_role_enabled(values: &Json) -> bool {
    let setting = at(values, "rbac.clusterRole.enabled");
    if is_true(values, "rbac.clusterRole.enabled") {
        return true;
    }
    if setting.and_then(Json::as_str) != Some("auto") {
        return false;
    }
    let t = |p: &str| truthy(values, p);
    let tt = |p: &str| is_true(values, p);
    t("rbac.clusterRole.overwriteRules")
        || !listed(values, "rbac.clusterRole.extraRules").is_empty()
        || !plugin_rules(values, "clusterRole").is_empty()
        || [
            "networking.replicateServices.fromHost",
            "pro",
            "sync.toHost.storageClasses.enabled",
            "sync.toHost.persistentVolumes.enabled",
            "sync.toHost.priorityClasses.enabled",
            "sync.toHost.resourceClaims.enabled",
            "sync.toHost.resourceClaimTemplates.enabled",
            "sync.fromHost.priorityClasses.enabled",
            "sync.fromHost.deviceClasses.enabled",
            "controlPlane.distro.k8s.scheduler.enabled",
            "controlPlane.advanced.virtualScheduler.enabled",
            "sync.toHost.pods.hybridScheduling.enabled",
            "sync.fromHost.ingressClasses.enabled",
            "sync.fromHost.runtimeClasses.enabled",
            "sync.fromHost.nodes.enabled",
            "sync.toHost.customResources",
            "sync.fromHost.customResources",
            "integrations.kubeVirt.enabled",
            "integrations.externalSecrets.enabled",
            "sync.fromHost.configMaps.enabled",
            "sync.fromHost.secrets.enabled",
            "integrations.istio.enabled",
            "sync.toHost.namespaces.enabled",
            "sync.fromHost.gatewayClasses.enabled",
            "sync.fromHost.gateways.enabled",
            "sync.toHost.gatewayApi.enabled",
            "sync.toHost.gatewayApi.gateways.enabled",
            "sync.toHost.gatewayApi.httpRoutes.enabled",
            "sync.toHost.gatewayApi.tlsRoutes.enabled",
            "sync.toHost.gatewayApi.backendTLSPolicies.enabled",
        ]
        .iter()
        .any(|p| t(p))
        || [
            "sync.fromHost.storageClasses.enabled",
            "sync.fromHost.csiNodes.enabled",
            "sync.fromHost.csiDrivers.enabled",
            "sync.fromHost.csiStorageCapacities.enabled",
        ]
        .iter()
        .any(|p| tt(p))
        || (t("integrations.certManager.enabled")
            && t("integrations.certManager.sync.fromHost.clusterIssuers.enabled"))
        || (t("integrations.metricsServer.enabled") && t("integrations.metricsServer.nodes"))
}

/// The rules of the ClusterRole `vc-<name>-v-<namespace>`; `namespace` is the host
/// namespace (for mappings of host objects that name none).
pub fn cluster_role_rules(values: &Json, namespace: &str) -> Vec<Json> {
    let overwrite = listed(values, "rbac.clusterRole.overwriteRules");
    if !overwrite.is_empty() {
        return overwrite;
    }
    let t = |p: &str| truthy(values, p);
    let tt = |p: &str| is_true(values, p);
    let storage = "storage.k8s.io";
    let gw = "gateway.networking.k8s.io";
    let nodes = t("sync.fromHost.nodes.enabled");
    let mut r = Vec::new();
    if t("pro") {
        r.push(rule(
            &["cluster.loft.sh", "storage.loft.sh"],
            &["features", "virtualclusters"],
            READ,
        ));
        r.push(rule(
            &["management.loft.sh"],
            &["virtualclusterinstances"],
            &["get"],
        ));
    }
    if t("pro") || nodes {
        r.push(rule(&[""], &["pods", "nodes", "nodes/status"], READ_GWL));
    }
    if nodes
        && (t("networking.advanced.proxyKubelets.byIP")
            || t("networking.advanced.proxyKubelets.byHostname"))
    {
        r.push(rule(
            &[""],
            &["nodes/metrics", "nodes/stats", "nodes/proxy"],
            &["get"],
        ));
    }
    if nodes && t("sync.fromHost.nodes.syncBackChanges") {
        r.push(rule(
            &[""],
            &["nodes", "nodes/status"],
            &["update", "patch"],
        ));
    }
    if t("controlPlane.distro.k8s.scheduler.enabled")
        || t("controlPlane.advanced.virtualScheduler.enabled")
        || t("sync.toHost.pods.hybridScheduling.enabled")
    {
        r.push(rule(
            &[storage],
            &[
                "storageclasses",
                "csinodes",
                "csidrivers",
                "csistoragecapacities",
            ],
            READ_GWL,
        ));
    }
    for (setting, resource) in [
        ("sync.fromHost.storageClasses.enabled", "storageclasses"),
        ("sync.fromHost.csiNodes.enabled", "csinodes"),
        ("sync.fromHost.csiDrivers.enabled", "csidrivers"),
        (
            "sync.fromHost.csiStorageCapacities.enabled",
            "csistoragecapacities",
        ),
    ] {
        if tt(setting) {
            r.push(rule(&[storage], &[resource], READ_GWL));
        }
    }
    if t("sync.toHost.persistentVolumes.enabled") {
        r.push(rule(&[""], &["persistentvolumes"], &["get", "list"]));
        r.push(rule(
            &[""],
            &["persistentvolumes"],
            &["create", "delete", "patch", "update", "watch"],
        ));
    }
    if t("sync.fromHost.ingressClasses.enabled") {
        r.push(rule(&["networking.k8s.io"], &["ingressclasses"], READ_GWL));
    }
    if t("sync.fromHost.gatewayClasses.enabled")
        || t("sync.fromHost.gateways.enabled")
        || t("sync.toHost.gatewayApi.enabled")
    {
        r.push(rule(&[gw], &["gatewayclasses"], READ_GWL));
    }
    if t("sync.fromHost.gateways.enabled") {
        r.push(rule(&[gw], &["gateways"], READ_GWL));
    }
    if t("sync.fromHost.runtimeClasses.enabled") {
        r.push(rule(&["node.k8s.io"], &["runtimeclasses"], READ_GWL));
    }
    if t("sync.toHost.storageClasses.enabled") {
        r.push(rule(
            &[storage],
            &["storageclasses"],
            &[
                "create", "delete", "patch", "update", "get", "watch", "list",
            ],
        ));
    }
    if t("sync.toHost.priorityClasses.enabled") || t("sync.fromHost.priorityClasses.enabled") {
        r.push(rule(&["scheduling.k8s.io"], &["priorityclasses"], ALL));
    }
    if t("sync.toHost.resourceClaims.enabled")
        || t("sync.toHost.resourceClaimTemplates.enabled")
        || t("sync.fromHost.deviceClasses.enabled")
    {
        r.push(rule(&["resource.k8s.io"], &["deviceclasses"], READ_GWL));
    }
    if t("networking.replicateServices.fromHost") {
        r.push(rule(&[""], &["services", "endpoints"], READ_GWL));
    }
    if t("sync.toHost.namespaces.enabled") {
        r.push(rule(
            &[""],
            &["namespaces", "serviceaccounts"],
            &[
                "create", "delete", "patch", "update", "get", "watch", "list",
            ],
        ));
    }
    if t("integrations.metricsServer.enabled") && t("integrations.metricsServer.nodes") {
        r.push(rule(&["metrics.k8s.io"], &["nodes"], &["get", "list"]));
    }
    if (t("integrations.kubeVirt.enabled") && t("integrations.kubeVirt.webhook.enabled"))
        || (t("integrations.externalSecrets.enabled")
            && t("integrations.externalSecrets.webhook.enabled"))
    {
        r.push(rule(
            &["admissionregistration.k8s.io"],
            &[
                "validatingwebhookconfigurations",
                "mutatingwebhookconfigurations",
            ],
            READ,
        ));
    }
    if [
        "integrations.kubeVirt.enabled",
        "integrations.externalSecrets.enabled",
        "integrations.certManager.enabled",
        "sync.toHost.customResources",
        "sync.fromHost.customResources",
        "integrations.istio.enabled",
        "sync.fromHost.gateways.enabled",
        "sync.fromHost.gatewayClasses.enabled",
        "sync.toHost.gatewayApi.enabled",
        "sync.toHost.gatewayApi.gateways.enabled",
        "sync.toHost.gatewayApi.httpRoutes.enabled",
        "sync.toHost.gatewayApi.tlsRoutes.enabled",
        "sync.toHost.gatewayApi.backendTLSPolicies.enabled",
    ]
    .iter()
    .any(|p| t(p))
    {
        r.push(rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            READ,
        ));
    }
    if t("integrations.externalSecrets.enabled")
        && t("integrations.externalSecrets.sync.fromHost.clusterStores.enabled")
    {
        r.push(rule(
            &["external-secrets.io"],
            &["clustersecretstores"],
            READ,
        ));
    }
    if t("integrations.certManager.enabled")
        && t("integrations.certManager.sync.fromHost.clusterIssuers.enabled")
    {
        r.push(rule(&["cert-manager.io"], &["clusterissuers"], READ));
    }
    r.extend(from_host_mapping_rules(
        values,
        "sync.fromHost.configMaps",
        "configmaps",
        namespace,
    ));
    r.extend(from_host_mapping_rules(
        values,
        "sync.fromHost.secrets",
        "secrets",
        namespace,
    ));
    r.extend(custom_resource_rules(
        values,
        "sync.fromHost.customResources",
        READ,
    ));
    r.extend(plugin_rules(values, "clusterRole"));
    r.extend(listed(values, "rbac.clusterRole.extraRules"));
    r
}

/// The name of the control plane's ServiceAccount: the chart's setting, or `vc-<name>`.
pub fn service_account(values: &Json, name: &str) -> String {
    let set = text(values, "controlPlane.advanced.serviceAccount.name");
    if set.is_empty() {
        format!("vc-{name}")
    } else {
        set.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::virtual_cluster::values::{chart_defaults, merge_value_files};

    fn with(over: &Json) -> Json {
        let mut v = chart_defaults().clone();
        merge_value_files(&mut v, over);
        v
    }

    #[test]
    fn node_sync_needs_the_cluster_role() {
        let off = chart_defaults();
        assert!(!cluster_role_enabled(off));
        let on = with(&json!({ "sync": { "fromHost": { "nodes": { "enabled": true } } } }));
        assert!(cluster_role_enabled(&on));
        let rules = cluster_role_rules(&on, "ns");
        assert_eq!(rules.len(), 2, "{rules:#?}");
        assert_eq!(
            rules[0]["resources"],
            json!(["pods", "nodes", "nodes/status"])
        );
    }

    #[test]
    fn features_bring_their_rules() {
        let v = with(&json!({ "sync": { "toHost": { "ingresses": { "enabled": true } } } }));
        assert!(
            role_rules(&v)
                .iter()
                .any(|r| r["resources"] == json!(["ingresses"]))
        );
        let v = with(&json!({ "sync": { "fromHost": { "secrets": {
            "enabled": true,
            "mappings": { "byName": { "certs/*": "x", "/token": "y" } },
        } } } }));
        let rules = cluster_role_rules(&v, "vc-a");
        assert_eq!(rules[0]["resourceNames"], json!(["certs", "vc-a"]));
        // A wildcard drops the names from the get rule.
        assert!(rules[2].get("resourceNames").is_none(), "{rules:#?}");
        let v = with(&json!({ "rbac": { "clusterRole": { "enabled": false } },
                             "sync": { "fromHost": { "nodes": { "enabled": true } } } }));
        assert!(!cluster_role_enabled(&v));
    }
}
