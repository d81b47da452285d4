//! The label keys Karpenter's NodePool restricts in its requirements and node labels.

/// The capacity-type label.
pub(super) const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";

/// Label keys of the `kubernetes.io` domains a NodePool may use (the CRD's list).
const ALLOWED_KUBERNETES_IO: &[&str] = &[
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/windows-build",
];

/// Why Karpenter's NodePool CRD refuses `key` as a requirement key or a template label, if
/// it does: the `x-kubernetes-validations` rules of `karpenter.sh_nodepools.yaml`, which the
/// API server applies to every NodePool gpufleet writes.
pub fn restricted_key(key: &str) -> Option<String> {
    let domain = key.split('/').next().unwrap_or(key);
    let why = if key == "kubernetes.io/hostname" || key == "karpenter.sh/nodepool" {
        format!("label {key:?} is set by Karpenter on each node it launches")
    } else if domain.ends_with("kubernetes.io")
        && !ALLOWED_KUBERNETES_IO.contains(&key)
        && !domain.ends_with("node.kubernetes.io")
        && !domain.ends_with("node-restriction.kubernetes.io")
    {
        "label domain \"kubernetes.io\" is restricted".to_owned()
    } else if domain.ends_with("k8s.io") && !domain.ends_with("kops.k8s.io") {
        "label domain \"k8s.io\" is restricted".to_owned()
    } else if domain.ends_with("karpenter.sh") && key != CAPACITY_TYPE {
        "label domain \"karpenter.sh\" is restricted".to_owned()
    } else {
        return None;
    };
    Some(format!(
        "{why}: Karpenter's NodePool refuses {key:?} in its requirements and its node labels."
    ))
}

/// The `kubernetes.io` labels the CRD lets a NodePool name that Karpenter's own validation of
/// its node labels refuses (`IsRestrictedLabel`, which knows them only by their current
/// names), leaving the NodePool not Ready: the deprecated beta names.
pub(super) fn restricted_label(key: &str) -> Option<String> {
    let deprecated = key.starts_with("beta.kubernetes.io/")
        || key.starts_with("failure-domain.beta.kubernetes.io/");
    deprecated.then(|| {
        format!(
            "Karpenter refuses the deprecated label {key:?} among a NodePool's node labels; use \
             its current name (kubernetes.io/arch, kubernetes.io/os, \
             node.kubernetes.io/instance-type, topology.kubernetes.io/zone or /region)."
        )
    })
}
