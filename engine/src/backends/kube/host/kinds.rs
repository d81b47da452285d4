//! The kinds of host-cluster objects the kinds read or write, and where each one's API
//! lives, so every kind names an object the same way.

use super::super::Gvk;

/// A kind of host-cluster object gpufleet reads or writes.
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
    /// `rbac.authorization.k8s.io/v1/ClusterRole` (cluster-scoped).
    ClusterRole,
    /// `rbac.authorization.k8s.io/v1/ClusterRoleBinding` (cluster-scoped).
    ClusterRoleBinding,
    /// `v1/Secret`.
    Secret,
    /// `v1/ConfigMap`.
    ConfigMap,
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
    /// `v1/Pod`.
    Pod,
    /// `v1/PersistentVolumeClaim`.
    PersistentVolumeClaim,
    /// `batch/v1/Job`.
    Job,
    /// `v1/Node` (cluster-scoped).
    Node,
    /// `kubeflow.org/v2beta1/MPIJob` (the Kubeflow MPI Operator).
    MpiJob,
    /// `nvidia.com/v1/ClusterPolicy` (the GPU Operator; cluster-scoped).
    ClusterPolicy,
    /// `storage.k8s.io/v1/StorageClass` (cluster-scoped).
    StorageClass,
    /// `apps/v1/DaemonSet`.
    DaemonSet,
    /// `karpenter.sh/v1/NodePool` (Karpenter; cluster-scoped).
    KarpenterNodePool,
}

/// What gpufleet does with objects of a kind through [`super::HostObjects`]. Each kind
/// lists its own ([`ObjectKind::access`]), and the provider's ClusterRole
/// ([`crate::backends::kube::rbac`]) grants exactly their verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Access {
    /// [`super::HostObjects::apply`].
    Apply,
    /// [`super::HostObjects::get`].
    Get,
    /// [`super::HostObjects::list`].
    List,
    /// [`super::HostObjects::delete`].
    Delete,
    /// [`super::HostObjects::merge_patch`].
    MergePatch,
    /// [`super::HostObjects::logs`] (pods only).
    Logs,
}

impl Access {
    /// The API verbs it needs, on the kind's resource or [`Access::subresource`].
    pub const fn verbs(self) -> &'static [&'static str] {
        match self {
            // A server-side apply of an object that does not exist yet is authorised as a
            // create as well as a patch.
            Access::Apply => &["create", "patch"],
            Access::Get | Access::Logs => &["get"],
            Access::List => &["list"],
            Access::Delete => &["delete"],
            Access::MergePatch => &["patch"],
        }
    }

    /// The subresource it goes through, if any.
    pub const fn subresource(self) -> Option<&'static str> {
        match self {
            Access::Logs => Some("log"),
            _ => None,
        }
    }
}

/// Every kind, for lookups by name.
const ALL: &[ObjectKind] = &[
    ObjectKind::Namespace,
    ObjectKind::ServiceAccount,
    ObjectKind::Role,
    ObjectKind::RoleBinding,
    ObjectKind::ClusterRole,
    ObjectKind::ClusterRoleBinding,
    ObjectKind::Secret,
    ObjectKind::ConfigMap,
    ObjectKind::Service,
    ObjectKind::ResourceQuota,
    ObjectKind::LimitRange,
    ObjectKind::NetworkPolicy,
    ObjectKind::StatefulSet,
    ObjectKind::Pod,
    ObjectKind::PersistentVolumeClaim,
    ObjectKind::Job,
    ObjectKind::Node,
    ObjectKind::MpiJob,
    ObjectKind::ClusterPolicy,
    ObjectKind::StorageClass,
    ObjectKind::DaemonSet,
    ObjectKind::KarpenterNodePool,
];

const RBAC: &str = "rbac.authorization.k8s.io";

impl ObjectKind {
    /// The kind's group, version, name and the plural its API is served at.
    pub const fn gvk(self) -> Gvk {
        match self {
            ObjectKind::Namespace => Gvk::new("", "v1", "Namespace", "namespaces"),
            ObjectKind::ServiceAccount => Gvk::new("", "v1", "ServiceAccount", "serviceaccounts"),
            ObjectKind::Role => Gvk::new(RBAC, "v1", "Role", "roles"),
            ObjectKind::RoleBinding => Gvk::new(RBAC, "v1", "RoleBinding", "rolebindings"),
            ObjectKind::ClusterRole => Gvk::new(RBAC, "v1", "ClusterRole", "clusterroles"),
            ObjectKind::ClusterRoleBinding => {
                Gvk::new(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings")
            }
            ObjectKind::Secret => Gvk::new("", "v1", "Secret", "secrets"),
            ObjectKind::ConfigMap => Gvk::new("", "v1", "ConfigMap", "configmaps"),
            ObjectKind::Service => Gvk::new("", "v1", "Service", "services"),
            ObjectKind::ResourceQuota => Gvk::new("", "v1", "ResourceQuota", "resourcequotas"),
            ObjectKind::LimitRange => Gvk::new("", "v1", "LimitRange", "limitranges"),
            ObjectKind::NetworkPolicy => Gvk::new(
                "networking.k8s.io",
                "v1",
                "NetworkPolicy",
                "networkpolicies",
            ),
            ObjectKind::StatefulSet => Gvk::new("apps", "v1", "StatefulSet", "statefulsets"),
            ObjectKind::Pod => Gvk::new("", "v1", "Pod", "pods"),
            ObjectKind::PersistentVolumeClaim => {
                Gvk::new("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
            }
            ObjectKind::Job => Gvk::new("batch", "v1", "Job", "jobs"),
            ObjectKind::Node => Gvk::new("", "v1", "Node", "nodes"),
            ObjectKind::MpiJob => Gvk::new("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
            ObjectKind::ClusterPolicy => {
                Gvk::new("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies")
            }
            ObjectKind::StorageClass => {
                Gvk::new("storage.k8s.io", "v1", "StorageClass", "storageclasses")
            }
            ObjectKind::DaemonSet => Gvk::new("apps", "v1", "DaemonSet", "daemonsets"),
            ObjectKind::KarpenterNodePool => {
                Gvk::new("karpenter.sh", "v1", "NodePool", "nodepools")
            }
        }
    }

    /// `apiVersion` as objects spell it.
    pub fn api_version(self) -> String {
        let gvk = self.gvk();
        if gvk.group.is_empty() {
            gvk.version.to_owned()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        }
    }

    /// The kind's name, as an object's `kind` field spells it, e.g. `StatefulSet`.
    pub fn kind(self) -> &'static str {
        self.gvk().kind
    }

    /// Whether objects of this kind live outside namespaces.
    pub fn cluster_scoped(self) -> bool {
        matches!(
            self,
            ObjectKind::Namespace
                | ObjectKind::ClusterRole
                | ObjectKind::ClusterRoleBinding
                | ObjectKind::Node
                | ObjectKind::ClusterPolicy
                | ObjectKind::StorageClass
                | ObjectKind::KarpenterNodePool
        )
    }

    /// What gpufleet does with objects of this kind: the provider's ClusterRole grants
    /// these and nothing else, and the host test doubles refuse anything else.
    pub const fn access(self) -> &'static [Access] {
        use Access::{Apply, Delete, Get, List, Logs, MergePatch};
        match self {
            // A virtual cluster's namespace: applied, read back, removed, and listed (by
            // gpufleet's labels) to find the virtual clusters `terraform query` can adopt.
            // A namespace gpufleet adopts with the vCluster Helm installed in it is marked,
            // and handed back on destroy, by patches.
            ObjectKind::Namespace => &[Apply, Get, Delete, List, MergePatch],
            // Written by virtual clusters: applied, read back, removed when turned off or
            // destroyed; listed (by gpufleet's label) so that a refresh reads each kind once
            // for every tenant.
            ObjectKind::ServiceAccount
            | ObjectKind::Role
            | ObjectKind::RoleBinding
            | ObjectKind::ClusterRole
            | ObjectKind::ClusterRoleBinding
            | ObjectKind::ResourceQuota
            | ObjectKind::LimitRange
            | ObjectKind::NetworkPolicy => &[Apply, Get, Delete, List],
            // Written by virtual clusters; listed (by the chart's `app=vcluster`) for
            // refreshes, which otherwise read two per tenant.
            ObjectKind::Secret => &[Apply, Get, Delete, List],
            // Written by virtual clusters; listed for refreshes and by the preflight, which
            // looks for a LoadBalancer Service with an address.
            ObjectKind::Service => &[Apply, Get, Delete, List],
            // Its replica count is patched to pause a virtual cluster; listed for refreshes
            // and (by the chart's labels) to find vClusters that Helm or the vCluster CLI
            // installed.
            ObjectKind::StatefulSet => &[Apply, Get, Delete, MergePatch, List],
            // Benchmarks' runs: applied, watched by reading, removed.
            ObjectKind::Job | ObjectKind::MpiJob => &[Apply, Get, Delete],
            // Made by controllers: listed (readiness, a benchmark's results), removed when
            // a virtual cluster is paused or its data is dropped; a run's logs read.
            ObjectKind::Pod => &[List, Delete, Logs],
            // The records of benchmark runs on demand, kept beside the runs, and the
            // archives of runs, read before destroy removes them (another run may have
            // replaced them) and removed with the benchmark that made them.
            ObjectKind::ConfigMap => &[Apply, Get, Delete],
            ObjectKind::PersistentVolumeClaim => &[List, Delete],
            // Benchmarks read the nodes they run on and the GPU Operator's settings.
            ObjectKind::Node => &[Get, List],
            ObjectKind::ClusterPolicy => &[List],
            // The preflight looks for a default StorageClass and a network plugin's agents.
            ObjectKind::StorageClass | ObjectKind::DaemonSet => &[List],
            // Counted by the preflight; node pools reach NodePools through their own calls.
            ObjectKind::KarpenterNodePool => &[List],
        }
    }

    /// Whether gpufleet does `access` with objects of this kind ([`ObjectKind::access`]).
    pub fn permits(self, access: Access) -> bool {
        self.access().contains(&access)
    }

    /// Every kind.
    pub fn all() -> &'static [ObjectKind] {
        ALL
    }

    /// The kind for an object's `kind` field.
    pub fn from_kind(kind: &str) -> Option<ObjectKind> {
        ALL.iter().copied().find(|k| k.kind() == kind)
    }
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use k8s_openapi::{ClusterResourceScope, Resource, api};

    use super::*;

    /// Where k8s-openapi, generated from the API server's own OpenAPI document, says a
    /// built-in kind is served, and whether it is cluster-scoped.
    fn served<R: Resource>() -> (Gvk, bool)
    where
        R::Scope: 'static,
    {
        let gvk = Gvk::new(R::GROUP, R::VERSION, R::KIND, R::URL_PATH_SEGMENT);
        (
            gvk,
            TypeId::of::<R::Scope>() == TypeId::of::<ClusterResourceScope>(),
        )
    }

    fn expected(kind: ObjectKind) -> (Gvk, bool) {
        use api::{apps, batch, core, networking, rbac};
        match kind {
            ObjectKind::Namespace => served::<core::v1::Namespace>(),
            ObjectKind::ServiceAccount => served::<core::v1::ServiceAccount>(),
            ObjectKind::Role => served::<rbac::v1::Role>(),
            ObjectKind::RoleBinding => served::<rbac::v1::RoleBinding>(),
            ObjectKind::ClusterRole => served::<rbac::v1::ClusterRole>(),
            ObjectKind::ClusterRoleBinding => served::<rbac::v1::ClusterRoleBinding>(),
            ObjectKind::Secret => served::<core::v1::Secret>(),
            ObjectKind::ConfigMap => served::<core::v1::ConfigMap>(),
            ObjectKind::Service => served::<core::v1::Service>(),
            ObjectKind::ResourceQuota => served::<core::v1::ResourceQuota>(),
            ObjectKind::LimitRange => served::<core::v1::LimitRange>(),
            ObjectKind::NetworkPolicy => served::<networking::v1::NetworkPolicy>(),
            ObjectKind::StatefulSet => served::<apps::v1::StatefulSet>(),
            ObjectKind::Pod => served::<core::v1::Pod>(),
            ObjectKind::PersistentVolumeClaim => served::<core::v1::PersistentVolumeClaim>(),
            ObjectKind::Job => served::<batch::v1::Job>(),
            ObjectKind::Node => served::<core::v1::Node>(),
            // Custom resources: as their operators' CRDs define them.
            ObjectKind::MpiJob => (
                Gvk::new("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
                false,
            ),
            ObjectKind::ClusterPolicy => (
                Gvk::new("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies"),
                true,
            ),
            ObjectKind::StorageClass => served::<api::storage::v1::StorageClass>(),
            ObjectKind::DaemonSet => served::<apps::v1::DaemonSet>(),
            ObjectKind::KarpenterNodePool => (
                Gvk::new("karpenter.sh", "v1", "NodePool", "nodepools"),
                true,
            ),
        }
    }

    #[test]
    fn every_kind_is_where_the_api_server_serves_it() {
        // ALL lists every variant once, in declaration order.
        for (i, &kind) in ALL.iter().enumerate() {
            assert_eq!(kind as usize, i, "{kind:?}");
        }
        assert_eq!(ALL.len(), ObjectKind::KarpenterNodePool as usize + 1);
        for &kind in ALL {
            let (gvk, cluster_scoped) = expected(kind);
            assert_eq!(kind.gvk(), gvk, "{kind:?}");
            assert_eq!(kind.cluster_scoped(), cluster_scoped, "{kind:?} scope");
        }
    }

    #[test]
    fn api_version_and_kind_are_as_objects_spell_them() {
        assert_eq!(ObjectKind::Pod.api_version(), "v1");
        assert_eq!(
            ObjectKind::RoleBinding.api_version(),
            "rbac.authorization.k8s.io/v1"
        );
        assert_eq!(ObjectKind::MpiJob.api_version(), "kubeflow.org/v2beta1");
        assert_eq!(ObjectKind::MpiJob.kind(), "MPIJob");
    }

    #[test]
    fn every_kind_is_found_by_its_name() {
        for &kind in ALL {
            assert_eq!(ObjectKind::from_kind(kind.kind()), Some(kind));
        }
        assert_eq!(ObjectKind::from_kind("Deployment"), None);
    }
}
