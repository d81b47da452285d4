//! The host objects behind a virtual cluster, and their names. Pure: the host client maps
//! their kinds to API resources.

use crate::backends::kube::host::ObjectKind;

/// One object by kind and name, in the virtual cluster's namespace (cluster-scoped kinds have
/// none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: ObjectKind,
    /// Its name.
    pub name: String,
}

impl ObjectRef {
    /// The namespace of this object when the virtual cluster lives in `namespace`.
    pub fn namespace<'a>(&self, namespace: &'a str) -> Option<&'a str> {
        (!self.kind.cluster_scoped()).then_some(namespace)
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.kind(), self.name)
    }
}

/// Names derived from the virtual cluster's name and namespace, as the vCluster chart names
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The virtual cluster's name (StatefulSet, Service, Helm release).
    pub name: String,
    /// The host namespace (the Helm release's namespace).
    pub namespace: String,
}

impl Names {
    /// The names of virtual cluster `name` in host namespace `namespace`.
    pub fn new(name: &str, namespace: &str) -> Names {
        Names {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// `<name>-headless`.
    pub fn headless(&self) -> String {
        format!("{}-headless", self.name)
    }

    /// `vc-<name>`: ServiceAccount, Role, RoleBinding, ResourceQuota, LimitRange, and the
    /// kubeconfig Secret the control plane writes.
    pub fn vc(&self) -> String {
        format!("vc-{}", self.name)
    }

    /// `vc-workload-<name>`: the ServiceAccount of synced workloads.
    pub fn workload(&self) -> String {
        format!("vc-workload-{}", self.name)
    }

    /// `vc-config-<name>`: the Secret holding vcluster.yaml.
    pub fn config(&self) -> String {
        format!("vc-config-{}", self.name)
    }

    /// The Secret with the kubeconfig (`vc-<name>`).
    pub fn kubeconfig(&self) -> String {
        self.vc()
    }

    /// `vc-<name>-v-<namespace>`, cut to 63 characters without a trailing `-`: the
    /// ClusterRole and ClusterRoleBinding that let the control plane read host nodes.
    pub fn cluster_role(&self) -> String {
        let full = format!("vc-{}-v-{}", self.name, self.namespace);
        let cut: String = full.chars().take(63).collect();
        cut.trim_end_matches('-').to_owned()
    }

    /// The chart's NetworkPolicies, in the order it renders them: workloads
    /// (`vc-work-<name>`), control plane (`vc-cp-<name>`), CoreDNS (`vc-kube-dns-<name>`)
    /// and snapshots (`vc-snapshot-<name>`).
    pub fn network_policies(&self) -> [String; 4] {
        [
            format!("vc-work-{}", self.name),
            format!("vc-cp-{}", self.name),
            format!("vc-kube-dns-{}", self.name),
            format!("vc-snapshot-{}", self.name),
        ]
    }

    /// Objects earlier gpufleet releases wrote and this one does not: the NetworkPolicy
    /// `vc-<name>`. Every apply removes them.
    pub fn retired(&self) -> Vec<ObjectRef> {
        vec![ObjectRef {
            kind: ObjectKind::NetworkPolicy,
            name: self.vc(),
        }]
    }

    /// Every object gpufleet may write for the virtual cluster, whether or not the current
    /// configuration renders it, in apply order.
    pub fn all(&self) -> Vec<ObjectRef> {
        let r = |kind, name: String| ObjectRef { kind, name };
        let mut all = vec![
            r(ObjectKind::ServiceAccount, self.vc()),
            r(ObjectKind::ServiceAccount, self.workload()),
            r(ObjectKind::Role, self.vc()),
            r(ObjectKind::RoleBinding, self.vc()),
            r(ObjectKind::ClusterRole, self.cluster_role()),
            r(ObjectKind::ClusterRoleBinding, self.cluster_role()),
            r(ObjectKind::Secret, self.config()),
            r(ObjectKind::Service, self.name.clone()),
            r(ObjectKind::Service, self.headless()),
            r(ObjectKind::ResourceQuota, self.vc()),
            r(ObjectKind::LimitRange, self.vc()),
        ];
        all.extend(
            self.network_policies()
                .into_iter()
                .map(|n| r(ObjectKind::NetworkPolicy, n)),
        );
        all.push(r(ObjectKind::StatefulSet, self.name.clone()));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_role_name_is_cut_like_the_charts() {
        let n = Names::new("team-a", "vc-team-a");
        assert_eq!(n.cluster_role(), "vc-team-a-v-vc-team-a");
        // "vc-" + 52 + "-v-" is 58 characters; the namespace gets the 5 left.
        let long = "a".repeat(52);
        assert_eq!(
            Names::new(&long, "abcdef").cluster_role(),
            format!("vc-{long}-v-abcde")
        );
        // A cut that ends in '-' loses it.
        assert_eq!(
            Names::new(&long, "ns-x-y").cluster_role(),
            format!("vc-{long}-v-ns-x")
        );
    }
}
