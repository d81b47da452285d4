//! The host cluster as a benchmark sees it: a few object operations on JSON values, behind
//! [`Cluster`] so the run can be driven against the API server or a test double.
//!
//! [`KubeCluster`] is the real one, on the shared `kube::Client`. Writes are server-side
//! applies under the field manager `gpufleet`, forced, so a Job or Service left by an
//! interrupted apply is adopted rather than duplicated.

use std::{fmt, sync::Arc};

use async_trait::async_trait;
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, LogParams, Patch,
        PatchParams,
    },
};
use serde_json::Value as Json;

use crate::{backends::kube::FIELD_MANAGER, context::Context, diag::Diagnostics};

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
}

impl Kind {
    fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Kind::Job => ("batch", "v1", "Job", "jobs"),
            Kind::Service => ("", "v1", "Service", "services"),
            Kind::Pod => ("", "v1", "Pod", "pods"),
            Kind::Node => ("", "v1", "Node", "nodes"),
            Kind::Namespace => ("", "v1", "Namespace", "namespaces"),
            Kind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
        }
    }

    /// The kind's name, e.g. `Job`.
    pub fn name(self) -> &'static str {
        self.gvk().2
    }

    fn from_name(name: &str) -> Option<Kind> {
        [Kind::Job, Kind::Service, Kind::Pod]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// Why a cluster call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The API server refused or the connection failed.
    #[error("failed to {what}: {source}")]
    Call {
        /// The operation, e.g. `apply Job gfb-a in vc-a`.
        what: String,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// An answer did not decode.
    #[error("failed to decode {what}: {source}")]
    Decode {
        /// What was decoded.
        what: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A failure reported by a test double, or an object gpufleet cannot write.
    #[error("{0}")]
    Other(String),
}

/// Object operations on the host cluster. `namespace` is `None` for cluster-scoped kinds.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// The API server's version (`v1.36.0`).
    async fn server_version(&self) -> Result<String, ClusterError>;
    /// Server-side applies `object` (a Job or a Service).
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
        Ok(Arc::new(KubeCluster { client }))
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
#[derive(Clone)]
pub struct KubeCluster {
    client: kube::Client,
}

impl fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeCluster").finish_non_exhaustive()
    }
}

impl KubeCluster {
    /// A cluster over `client`.
    pub fn new(client: kube::Client) -> KubeCluster {
        KubeCluster { client }
    }

    fn api(&self, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        let (group, version, k, plural) = kind.gvk();
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, k), plural);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }
}

fn call_err(what: String) -> impl FnOnce(kube::Error) -> ClusterError {
    move |source| ClusterError::Call {
        what,
        source: Box::new(source),
    }
}

fn to_json(o: &DynamicObject, what: &str) -> Result<Json, ClusterError> {
    serde_json::to_value(o).map_err(|source| ClusterError::Decode {
        what: what.to_owned(),
        source,
    })
}

fn describe(kind: Kind, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{} {name} in {ns}", kind.name()),
        None => format!("{} {name}", kind.name()),
    }
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn server_version(&self) -> Result<String, ClusterError> {
        self.client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .map_err(call_err("read the server version".to_owned()))
    }

    async fn apply(&self, object: &Json) -> Result<(), ClusterError> {
        let kind_name = object["kind"].as_str().unwrap_or_default();
        let kind = Kind::from_name(kind_name).ok_or_else(|| {
            ClusterError::Other(format!("cannot apply an object of kind {kind_name:?}"))
        })?;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str();
        let what = format!("apply {}", describe(kind, namespace, name));
        tracing::debug!(target: "gpufleet::benchmark", "{what}");
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api(kind, namespace)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .map(|_| ())
            .map_err(call_err(what))
    }

    async fn get(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ClusterError> {
        let what = format!("read {}", describe(kind, namespace, name));
        let found = self
            .api(kind, namespace)
            .get_opt(name)
            .await
            .map_err(call_err(what.clone()))?;
        found.map(|o| to_json(&o, &what)).transpose()
    }

    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ClusterError> {
        let what = format!(
            "list {} ({selector})",
            describe(kind, namespace, "").replace("  ", " ")
        );
        let list = self
            .api(kind, namespace)
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(call_err(what.clone()))?;
        list.items.iter().map(|o| to_json(o, &what)).collect()
    }

    async fn delete(&self, kind: Kind, namespace: &str, name: &str) -> Result<(), ClusterError> {
        let what = format!("delete {}", describe(kind, Some(namespace), name));
        tracing::debug!(target: "gpufleet::benchmark", "{what}");
        match self
            .api(kind, Some(namespace))
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(call_err(what)(e)),
        }
    }

    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ClusterError> {
        let what = format!("read the log of pod {pod} in {namespace}");
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), namespace);
        pods.logs(
            pod,
            &LogParams {
                container: Some(container.to_owned()),
                ..LogParams::default()
            },
        )
        .await
        .map_err(call_err(what))
    }
}
