//! The host objects behind a virtual cluster, and their names. Pure: the host client maps
//! their kinds to API resources.
//!
//! [`HOST_OBJECTS`] is the one list of them: refresh reads each one and compares it with its
//! rendering, apply and delete go through it, and the resource's docs print it.

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

    /// The label selector of the control plane's pods and volume claims (the chart's
    /// StatefulSet selector): `app=vcluster,release=<name>`.
    pub fn control_plane_pods(&self) -> String {
        format!("app=vcluster,release={}", self.name)
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

    /// Every object gpufleet may write for the virtual cluster in its namespace or outside
    /// it (the namespace itself aside), whether or not the current configuration renders it,
    /// in apply order: the rows of [`HOST_OBJECTS`].
    pub fn all(&self) -> Vec<ObjectRef> {
        HOST_OBJECTS
            .iter()
            .filter(|o| o.kind != ObjectKind::Namespace)
            .map(|o| o.of(self))
            .collect()
    }
}

/// One host object of a virtual cluster: a row of [`HOST_OBJECTS`].
#[derive(Debug, Clone, Copy)]
pub struct HostObject {
    /// Its kind.
    pub kind: ObjectKind,
    /// Its name, from the virtual cluster's names.
    pub name: fn(&Names) -> String,
    /// Its name as the docs show it, e.g. `vc-work-<name>`.
    pub pattern: &'static str,
    /// When gpufleet renders it (markdown).
    pub when: &'static str,
    /// What it is for (markdown).
    pub role: &'static str,
}

impl HostObject {
    /// This object of the virtual cluster with `names`.
    pub fn of(&self, names: &Names) -> ObjectRef {
        ObjectRef {
            kind: self.kind,
            name: (self.name)(names),
        }
    }
}

const ALWAYS: &str = "always";
const WITH_POLICIES: &str = "`network_isolation`";

/// Every object gpufleet renders for a virtual cluster, in apply order. Refresh reads each
/// one; a missing one, or one whose rendered fields were changed, is listed in `drift`, and
/// the next apply writes it back.
pub const HOST_OBJECTS: &[HostObject] = &[
    HostObject {
        kind: ObjectKind::Namespace,
        name: |n| n.namespace.clone(),
        pattern: "`namespace` (`vc-<name>`)",
        when: ALWAYS,
        role: "Holds the rest. Its labels carry the tier (`gpufleet.dev/isolation`), the pod \
               security level enforced on the tenant's pods (`pod-security.kubernetes.io/enforce` \
               and `warn`) and gpufleet's ownership.",
    },
    HostObject {
        kind: ObjectKind::ServiceAccount,
        name: Names::vc,
        pattern: "`vc-<name>`",
        when: ALWAYS,
        role: "The control plane's identity on the host cluster.",
    },
    HostObject {
        kind: ObjectKind::ServiceAccount,
        name: Names::workload,
        pattern: "`vc-workload-<name>`",
        when: ALWAYS,
        role: "The identity of the tenant's pods synced to the host.",
    },
    HostObject {
        kind: ObjectKind::Role,
        name: Names::vc,
        pattern: "`vc-<name>`",
        when: ALWAYS,
        role: "What the control plane may do in the namespace (the chart's rules).",
    },
    HostObject {
        kind: ObjectKind::RoleBinding,
        name: Names::vc,
        pattern: "`vc-<name>`",
        when: ALWAYS,
        role: "Grants the Role to ServiceAccount `vc-<name>`, and to nobody else.",
    },
    HostObject {
        kind: ObjectKind::ClusterRole,
        name: Names::cluster_role,
        pattern: "`vc-<name>-v-<namespace>`",
        when: "when the control plane reads cluster-scoped objects (host nodes, on every tier)",
        role: "What the control plane may read outside its namespace.",
    },
    HostObject {
        kind: ObjectKind::ClusterRoleBinding,
        name: Names::cluster_role,
        pattern: "`vc-<name>-v-<namespace>`",
        when: "with the ClusterRole",
        role: "Grants the ClusterRole to ServiceAccount `vc-<name>`, and to nobody else.",
    },
    HostObject {
        kind: ObjectKind::Secret,
        name: Names::config,
        pattern: "`vc-config-<name>`",
        when: ALWAYS,
        role: "The complete vcluster.yaml the control plane runs with (`config.yaml`).",
    },
    HostObject {
        kind: ObjectKind::Service,
        name: |n| n.name.clone(),
        pattern: "`<name>`",
        when: ALWAYS,
        role: "The API server's Service, of the type `expose` sets.",
    },
    HostObject {
        kind: ObjectKind::Service,
        name: Names::headless,
        pattern: "`<name>-headless`",
        when: ALWAYS,
        role: "The StatefulSet's headless Service.",
    },
    HostObject {
        kind: ObjectKind::ResourceQuota,
        name: Names::vc,
        pattern: "`vc-<name>`",
        when: "`quota` or `limit_range`",
        role: "Bounds what the tenant runs in the namespace.",
    },
    HostObject {
        kind: ObjectKind::LimitRange,
        name: Names::vc,
        pattern: "`vc-<name>`",
        when: "`quota` or `limit_range`",
        role: "Container defaults, so pods without requests count against the quota.",
    },
    HostObject {
        kind: ObjectKind::NetworkPolicy,
        name: |n| n.network_policies()[0].clone(),
        pattern: "`vc-work-<name>`",
        when: WITH_POLICIES,
        role: "Isolates the tenant's pods: reached only by each other and the control plane.",
    },
    HostObject {
        kind: ObjectKind::NetworkPolicy,
        name: |n| n.network_policies()[1].clone(),
        pattern: "`vc-cp-<name>`",
        when: WITH_POLICIES,
        role: "Isolates the control plane (its API server port stays open).",
    },
    HostObject {
        kind: ObjectKind::NetworkPolicy,
        name: |n| n.network_policies()[2].clone(),
        pattern: "`vc-kube-dns-<name>`",
        when: "`network_isolation`, while the tenant's CoreDNS runs as its own pod (the default)",
        role: "Isolates the tenant's CoreDNS.",
    },
    HostObject {
        kind: ObjectKind::NetworkPolicy,
        name: |n| n.network_policies()[3].clone(),
        pattern: "`vc-snapshot-<name>`",
        when: WITH_POLICIES,
        role: "Isolates the control plane's snapshot pods.",
    },
    HostObject {
        kind: ObjectKind::StatefulSet,
        name: |n| n.name.clone(),
        pattern: "`<name>`",
        when: ALWAYS,
        role: "The control plane, with its volume claim template `data`; scaled to zero and \
               annotated when `paused`.",
    },
];

/// [`HOST_OBJECTS`] as a markdown table, for the resource's docs.
pub fn docs_table() -> String {
    let mut s = String::from(
        "Refresh reads every object below and compares it with what gpufleet renders for the \
         configuration: a missing object, or one whose rendered fields were changed outside \
         Terraform (a NetworkPolicy's rules, a RoleBinding's subjects, a namespace label, the \
         stored vcluster.yaml, ...), is listed in `drift`, which makes the plan show a change, \
         and the next apply writes it back as rendered. Only what gpufleet renders is compared, \
         so fields the API server fills in are not drift; neither are a replica count, label or \
         annotation that another controller keeps (apply leaves those to it too). An object \
         the configuration does not render (a policy turned off) that is present is drift as \
         well: apply deletes it. Refresh reads each kind with one list for every virtual \
         cluster, by gpufleet's label `app.kubernetes.io/managed-by=gpufleet` (Secrets by the \
         chart's `app=vcluster`): an object that lost that label reads as missing, except a \
         Secret, which is then read by name.\n\n\
         | Kind | Name | Rendered | Purpose |\n\
         |------|------|----------|---------|\n",
    );
    for o in HOST_OBJECTS {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            o.kind.kind(),
            o.pattern,
            o.when,
            o.role
        ));
    }
    s
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
