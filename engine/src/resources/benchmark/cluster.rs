//! The host cluster as a benchmark sees it: a few object operations on JSON values, behind
//! [`Cluster`] so the run can be driven against the API server or a test double.
//!
//! [`KubeCluster`] is the real one, on the shared `kube::Client`. Writes are server-side
//! applies under the field manager `gpufleet`, forced, so a Job or Service left by an
//! interrupted apply is adopted rather than duplicated.

use std::sync::Arc;

use async_trait::async_trait;
use kube::{
    Api,
    api::{DeleteParams, LogParams},
};
use serde_json::Value as Json;

use tokio_util::sync::CancellationToken;

use crate::{
    backends::kube::{
        DynamicClient, Gvk, ObjectError, describe,
        lease::{LeaseRef, TurnGuard, TurnLease, holder_identity},
    },
    context::Context,
    diag::Diagnostics,
};

/// The kinds of objects a benchmark reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `batch/v1` Job.
    Job,
    /// `v1` Service.
    Service,
    /// `v1` Pod.
    Pod,
    /// `v1` Node.
    Node,
    /// `v1` Namespace.
    Namespace,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `v1` Secret.
    Secret,
    /// `kubeflow.org/v2beta1` MPIJob (the Kubeflow MPI Operator).
    MpiJob,
    /// `nvidia.com/v1` ClusterPolicy (the GPU Operator).
    ClusterPolicy,
}

impl Kind {
    fn gvk(self) -> Gvk {
        match self {
            Kind::Job => Gvk::new("batch", "v1", "Job", "jobs"),
            Kind::Service => Gvk::new("", "v1", "Service", "services"),
            Kind::Pod => Gvk::new("", "v1", "Pod", "pods"),
            Kind::Node => Gvk::new("", "v1", "Node", "nodes"),
            Kind::Namespace => Gvk::new("", "v1", "Namespace", "namespaces"),
            Kind::StatefulSet => Gvk::new("apps", "v1", "StatefulSet", "statefulsets"),
            Kind::Secret => Gvk::new("", "v1", "Secret", "secrets"),
            Kind::MpiJob => Gvk::new("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
            Kind::ClusterPolicy => Gvk::new("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies"),
        }
    }

    /// The kind's name, e.g. `Job`.
    pub fn name(self) -> &'static str {
        self.gvk().kind
    }

    fn from_name(name: &str) -> Option<Kind> {
        [
            Kind::Job,
            Kind::Service,
            Kind::Pod,
            Kind::Secret,
            Kind::MpiJob,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// Why a cluster call failed: the host-cluster module's object error, shared with the other
/// resources that write host objects.
pub type ClusterError = ObjectError;

/// A run's turn on its pool, held until released; a holder that dies without releasing stops
/// renewing it, and the turn passes on once it expires.
#[async_trait]
pub trait HeldTurn: Send + Sync {
    /// Hands the turn on at once.
    async fn release(self: Box<Self>);
}

/// How long a turn lasts without renewal: a killed provider's turn passes on after this.
pub const TURN_DURATION: std::time::Duration = std::time::Duration::from_secs(15);

/// Object operations on the host cluster. `namespace` is `None` for cluster-scoped kinds.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// The API server's version (`v1.36.0`).
    async fn server_version(&self) -> Result<String, ClusterError>;
    /// Whether the API server serves `kind` (its group and version are discovered).
    async fn serves(&self, kind: Kind) -> Result<bool, ClusterError>;
    /// Server-side applies `object` (a Job, MPIJob, Service or Secret).
    async fn apply(&self, object: &Json) -> Result<(), ClusterError>;
    /// Reads one object; `None` when it does not exist.
    async fn get(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ClusterError>;
    /// Lists objects of `kind` matching a label selector.
    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ClusterError>;
    /// Deletes one object with its dependents (pods of a Job) in the background; a missing
    /// object is not an error.
    async fn delete(&self, kind: Kind, namespace: &str, name: &str) -> Result<(), ClusterError>;
    /// The log of one container of a pod.
    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ClusterError>;
    /// Waits for this process's turn on `lease`, across processes and pipelines.
    async fn take_turn(
        &self,
        lease: LeaseRef,
        cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ClusterError>;
}

/// Where the benchmark kind gets its cluster from.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The cluster for this operation, or the diagnostic naming the settings to fix.
    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn Cluster>, Diagnostics>;
}

/// The production backend: the provider's `kubernetes` settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;

#[async_trait]
impl Backend for FromSettings {
    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn Cluster>, Diagnostics> {
        let client = crate::backends::kube::client(&ctx.settings, super::TYPE_NAME).await?;
        Ok(Arc::new(KubeCluster::new(client)))
    }
}

/// A given cluster, for tests and tools that bring their own.
#[async_trait]
impl<A: Cluster + 'static> Backend for Arc<A> {
    async fn connect(&self, _ctx: &Context) -> Result<Arc<dyn Cluster>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn Cluster>)
    }
}

/// [`Cluster`] on a `kube::Client`.
#[derive(Debug, Clone)]
pub struct KubeCluster {
    objects: Arc<DynamicClient>,
}

impl KubeCluster {
    /// A cluster over `client`.
    pub fn new(client: kube::Client) -> KubeCluster {
        KubeCluster {
            objects: Arc::new(DynamicClient::new(client)),
        }
    }
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn server_version(&self) -> Result<String, ClusterError> {
        self.objects.count();
        self.objects
            .client()
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .map_err(ObjectError::call("read the server version"))
    }

    async fn serves(&self, kind: Kind) -> Result<bool, ClusterError> {
        let gvk = kind.gvk();
        let group_version = if gvk.group.is_empty() {
            gvk.version.to_owned()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        };
        self.objects.count();
        match self
            .objects
            .client()
            .list_api_group_resources(&group_version)
            .await
        {
            Ok(list) => Ok(list.resources.iter().any(|r| r.name == gvk.plural)),
            Err(e) if crate::backends::kube::status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(ObjectError::call(format!("discover {group_version}"))(e)),
        }
    }

    async fn apply(&self, object: &Json) -> Result<(), ClusterError> {
        let kind_name = object["kind"].as_str().unwrap_or_default();
        let kind = Kind::from_name(kind_name).ok_or_else(|| {
            ClusterError::Other(format!("cannot apply an object of kind {kind_name:?}"))
        })?;
        self.objects.apply(&kind.gvk(), object).await
    }

    async fn get(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ClusterError> {
        self.objects.get(&kind.gvk(), namespace, name).await
    }

    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ClusterError> {
        let what = format!(
            "list {} ({selector})",
            describe(kind.name(), namespace, "").replace("  ", " ")
        );
        self.objects
            .list(&kind.gvk(), namespace, selector, what)
            .await
    }

    async fn delete(&self, kind: Kind, namespace: &str, name: &str) -> Result<(), ClusterError> {
        // Background propagation: a Job's pods go with it.
        let params = DeleteParams::background();
        self.objects
            .delete(&kind.gvk(), Some(namespace), name, &params)
            .await
    }

    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ClusterError> {
        let what = format!("read the log of pod {pod} in {namespace}");
        self.objects.count();
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.objects.client().clone(), namespace);
        pods.logs(
            pod,
            &LogParams {
                container: Some(container.to_owned()),
                ..LogParams::default()
            },
        )
        .await
        .map_err(ObjectError::call(what))
    }

    async fn take_turn(
        &self,
        lease: LeaseRef,
        cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ClusterError> {
        let what = lease.to_string();
        let holder = holder_identity();
        tracing::debug!(target: "gpufleet::benchmark", "taking the turn on {what} as {holder}");
        let guard = TurnLease::new(self.objects.client().clone(), lease, holder, TURN_DURATION)
            .acquire(cancel, |h| {
                tracing::info!(
                    target: "gpufleet::benchmark",
                    "waiting for the run of {} to finish its turn on {what}",
                    h.identity
                );
            })
            .await
            .map_err(|e| ClusterError::Other(e.to_string()))?;
        Ok(Box::new(guard))
    }
}

#[async_trait]
impl HeldTurn for TurnGuard {
    async fn release(self: Box<Self>) {
        let lease = self.lease().to_string();
        if let Err(e) = (*self).release().await {
            // It expires on its own: the next run waits out the rest of its duration.
            tracing::warn!(target: "gpufleet::benchmark", "could not hand on the turn on {lease}: {e}");
        }
    }
}
