//! The kinds of host objects behind a virtual cluster, and their names. Pure: the host
//! client maps these to API resources.

/// A kind of host-cluster object gpufleet reads or writes for a virtual cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// `v1/Namespace` (cluster-scoped).
    Namespace,
    /// `v1/ServiceAccount`.
    ServiceAccount,
    /// `rbac.authorization.k8s.io/v1/Role`.
    Role,
    /// `rbac.authorization.k8s.io/v1/RoleBinding`.
    RoleBinding,
    /// `v1/Secret`.
    Secret,
    /// `v1/Service`.
    Service,
    /// `v1/ResourceQuota`.
    ResourceQuota,
    /// `v1/LimitRange`.
    LimitRange,
    /// `networking.k8s.io/v1/NetworkPolicy`.
    NetworkPolicy,
    /// `apps/v1/StatefulSet`.
    StatefulSet,
    /// `v1/Pod` (read only).
    Pod,
}

impl ObjectKind {
    /// `(group, version, kind, plural)`.
    pub fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            ObjectKind::Namespace => ("", "v1", "Namespace", "namespaces"),
            ObjectKind::ServiceAccount => ("", "v1", "ServiceAccount", "serviceaccounts"),
            ObjectKind::Role => ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
            ObjectKind::RoleBinding => (
                "rbac.authorization.k8s.io",
                "v1",
                "RoleBinding",
                "rolebindings",
            ),
            ObjectKind::Secret => ("", "v1", "Secret", "secrets"),
            ObjectKind::Service => ("", "v1", "Service", "services"),
            ObjectKind::ResourceQuota => ("", "v1", "ResourceQuota", "resourcequotas"),
            ObjectKind::LimitRange => ("", "v1", "LimitRange", "limitranges"),
            ObjectKind::NetworkPolicy => (
                "networking.k8s.io",
                "v1",
                "NetworkPolicy",
                "networkpolicies",
            ),
            ObjectKind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
            ObjectKind::Pod => ("", "v1", "Pod", "pods"),
        }
    }

    /// `apiVersion` as objects spell it.
    pub fn api_version(self) -> String {
        let (group, version, _, _) = self.gvk();
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    }

    /// The kind name.
    pub fn kind(self) -> &'static str {
        self.gvk().2
    }

    /// The kind for an object's `kind` field.
    pub fn from_kind(kind: &str) -> Option<ObjectKind> {
        ALL.iter().copied().find(|k| k.kind() == kind)
    }
}

/// Every kind, for lookups.
const ALL: &[ObjectKind] = &[
    ObjectKind::Namespace,
    ObjectKind::ServiceAccount,
    ObjectKind::Role,
    ObjectKind::RoleBinding,
    ObjectKind::Secret,
    ObjectKind::Service,
    ObjectKind::ResourceQuota,
    ObjectKind::LimitRange,
    ObjectKind::NetworkPolicy,
    ObjectKind::StatefulSet,
    ObjectKind::Pod,
];

/// One object by kind and name, in the virtual cluster's namespace (the namespace itself
/// has no namespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: ObjectKind,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.kind(), self.name)
    }
}

/// Names derived from the virtual cluster's name, as the vCluster chart names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The virtual cluster's name (StatefulSet, Service, Helm release).
    pub name: String,
}

impl Names {
    /// `<name>-headless`.
    pub fn headless(&self) -> String {
        format!("{}-headless", self.name)
    }

    /// `vc-<name>`: ServiceAccount, Role, RoleBinding, ResourceQuota, LimitRange,
    /// NetworkPolicy, and the kubeconfig Secret the control plane writes.
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

    /// Every object gpufleet may write in the namespace, whether or not the current
    /// configuration renders it, in apply order.
    pub fn all(&self) -> Vec<ObjectRef> {
        let r = |kind, name: String| ObjectRef { kind, name };
        vec![
            r(ObjectKind::ServiceAccount, self.vc()),
            r(ObjectKind::ServiceAccount, self.workload()),
            r(ObjectKind::Role, self.vc()),
            r(ObjectKind::RoleBinding, self.vc()),
            r(ObjectKind::Secret, self.config()),
            r(ObjectKind::Service, self.name.clone()),
            r(ObjectKind::Service, self.headless()),
            r(ObjectKind::ResourceQuota, self.vc()),
            r(ObjectKind::LimitRange, self.vc()),
            r(ObjectKind::NetworkPolicy, self.vc()),
            r(ObjectKind::StatefulSet, self.name.clone()),
        ]
    }
}
