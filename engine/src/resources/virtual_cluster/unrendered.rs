//! The chart settings whose host objects gpufleet does not render, and the description of
//! `values_override` that names them. A leaf: the schema describes the attribute with it, and
//! [`super::chart_schema`] refuses the settings at plan.

use std::sync::OnceLock;

/// A chart setting under which the chart renders host objects that gpufleet does not.
#[derive(Debug, Clone, Copy)]
pub struct Unrendered {
    /// The dotted vcluster.yaml key; refused when its value is set (Helm's truth: not
    /// `false`, `0`, empty or null).
    pub key: &'static str,
    /// What the chart would render for it.
    pub objects: &'static str,
}

/// The chart settings whose objects gpufleet does not render (read from the chart's
/// templates: each of these guards a template gpufleet has no counterpart of).
pub const UNRENDERED: &[Unrendered] = &[
    Unrendered {
        key: "controlPlane.ingress.enabled",
        objects: "an Ingress for the API server",
    },
    Unrendered {
        key: "controlPlane.tlsRoute.enabled",
        objects: "a Gateway API TLSRoute for the API server",
    },
    Unrendered {
        key: "controlPlane.serviceMonitor.enabled",
        objects: "a Prometheus Operator ServiceMonitor",
    },
    Unrendered {
        key: "controlPlane.advanced.podDisruptionBudget.enabled",
        objects: "a PodDisruptionBudget for the control plane",
    },
    Unrendered {
        key: "controlPlane.backingStore.etcd.deploy.enabled",
        objects: "an external etcd StatefulSet and its two Services",
    },
    Unrendered {
        key: "experimental.deploy.host.manifests",
        objects: "the given manifests, applied to the host cluster",
    },
    Unrendered {
        key: "experimental.deploy.host.manifestsTemplate",
        objects: "the given manifest template, applied to the host cluster",
    },
    Unrendered {
        key: "platform.apiKey.namespace",
        objects: "a Role and RoleBinding reading the vCluster Platform secret in that namespace",
    },
];

/// The `values_override` attribute's description: the behaviour, then [`UNRENDERED`].
pub fn override_description() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let refused: Vec<String> = UNRENDERED
            .iter()
            .map(|u| format!("`{}` ({})", u.key, u.objects))
            .collect();
        format!(
            "{OVERRIDE_DESCRIPTION} Checked at plan time against the pinned chart's \
             `values.schema.json`, naming the offending key. Refused because gpufleet does not \
             render what the chart would make of them: {}.",
            refused.join(", ")
        )
    })
}

/// The behaviour of `values_override`, before the refusals drawn from [`UNRENDERED`].
const OVERRIDE_DESCRIPTION: &str = "YAML (or JSON, e.g. from `yamlencode` or `jsonencode`) \
     merged into vcluster.yaml as one more Helm value file: mappings merge key by key, \
     anything else replaces, and `null` removes a chart default. The host objects follow, as \
     the chart would render them (enabling ingress sync adds its Role rule, say). Refused at \
     plan time, naming the key: keys gpufleet manages from other attributes \
     (`controlPlane.distro`: `kubernetes_version`; `sync.fromHost.nodes` and \
     `sync.toHost.pods.enforceTolerations`: `isolation`; `policies.resourceQuota`: `quota`; \
     `policies.limitRange`: `limit_range`; `policies.networkPolicy`: `network_isolation`; \
     `policies.podSecurityStandard`: `pod_security`; \
     `controlPlane.statefulSet.persistence.volumeClaim.size` and `storageClass`: \
     `persistence`; `controlPlane.service.spec.type` and `controlPlane.proxy.extraSANs`: \
     `expose`), keys gpufleet decides itself (`controlPlane.backingStore`, the rest of the \
     volume claim, `volumeClaimTemplates` and `dataVolume`, the image repository and tag, the \
     names of the ServiceAccounts, the Service, Role and ClusterRole switches), and vCluster \
     Pro or Platform features, which open-source vCluster refuses (`privateNodes`, `sleep`, \
     `sync.toHost.namespaces`, custom resource sync, …). A fixed node port \
     (`controlPlane.service.httpsNodePort`, `kubeletNodePort`) needs `expose.type` `NodePort` \
     or `LoadBalancer`. An import recovers it from the stored vcluster.yaml: the keys that \
     differ from what the other attributes render, those gpufleet decides left out.";
