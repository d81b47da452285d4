//! The host cluster as a virtual cluster sees it: a handful of object operations on JSON
//! values, behind [`HostApi`] so apply and read can be tested against an in-memory fake.
//!
//! [`KubeHost`] is the real one, on the shared `kube::Client`: every write is a server-side
//! apply under the field manager `gpufleet`, forced, so an object left by an interrupted
//! apply (or edited by hand) is adopted and corrected rather than duplicated.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use async_trait::async_trait;
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    },
};
use serde_json::Value as Json;

use super::objects::ObjectKind;
use crate::{backends::kube::FIELD_MANAGER, context::Context, diag::Diagnostics};

/// Why a host call failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The API server refused or the connection failed.
    #[error("failed to {what}: {source}")]
    Call {
        /// The operation, e.g. `apply StatefulSet a in vc-a`.
        what: String,
        /// kube's error (status code and the server's message).
        #[source]
        source: Box<kube::Error>,
    },
    /// An answer did not decode.
    #[error("failed to decode {what}: {source}")]
    Decode {
        /// What was being decoded.
        what: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A failure reported by a test double.
    #[error("{0}")]
    Other(String),
}

/// Object operations on the host cluster. `namespace` is `None` only for namespaces.
#[async_trait]
pub trait HostApi: Send + Sync {
    /// Server-side applies `object` (which names its kind, name and namespace).
    async fn apply(&self, object: &Json) -> Result<(), HostError>;
    /// Reads one object; `None` when it does not exist.
    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, HostError>;
    /// Deletes one object (in the background); a missing object is not an error.
    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), HostError>;
    /// Lists objects of `kind` in `namespace` matching a label selector.
    async fn list(
        &self,
        kind: ObjectKind,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Json>, HostError>;
    /// How many API calls this client made so far (for the operation's debug log).
    fn calls(&self) -> u64 {
        0
    }
}

/// Where the virtual cluster kind gets its host client from.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The client for this operation, or the diagnostic naming the settings to fix.
    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics>;
}

/// The production backend: the provider's `kubernetes` settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;

#[async_trait]
impl Backend for FromSettings {
    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics> {
        let client = crate::backends::kube::client(&ctx.settings, super::TYPE_NAME).await?;
        Ok(Arc::new(KubeHost::new(client)))
    }
}

/// A given client, for tests and tools that bring their own.
#[async_trait]
impl<A: HostApi + 'static> Backend for Arc<A> {
    async fn connect(&self, _ctx: &Context) -> Result<Arc<dyn HostApi>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn HostApi>)
    }
}

/// [`HostApi`] on a `kube::Client`, counting its calls.
#[derive(Clone)]
pub struct KubeHost {
    client: kube::Client,
    calls: Arc<AtomicU64>,
}

impl fmt::Debug for KubeHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeHost")
            .field("calls", &self.calls.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl KubeHost {
    /// A host over `client`.
    pub fn new(client: kube::Client) -> KubeHost {
        KubeHost {
            client,
            calls: Arc::default(),
        }
    }

    fn api(&self, kind: ObjectKind, namespace: Option<&str>) -> Api<DynamicObject> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let (group, version, k, plural) = kind.gvk();
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, k), plural);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }
}

fn call_err(what: String) -> impl FnOnce(kube::Error) -> HostError {
    move |source| HostError::Call {
        what,
        source: Box::new(source),
    }
}

fn to_json(o: &DynamicObject, what: &str) -> Result<Json, HostError> {
    serde_json::to_value(o).map_err(|source| HostError::Decode {
        what: what.to_owned(),
        source,
    })
}

fn describe(kind: ObjectKind, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{} {name} in {ns}", kind.kind()),
        None => format!("{} {name}", kind.kind()),
    }
}

#[async_trait]
impl HostApi for KubeHost {
    async fn apply(&self, object: &Json) -> Result<(), HostError> {
        let kind_name = object["kind"].as_str().unwrap_or_default();
        let kind = ObjectKind::from_kind(kind_name).ok_or_else(|| {
            HostError::Other(format!("cannot apply an object of kind {kind_name:?}"))
        })?;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str();
        let what = format!("apply {}", describe(kind, namespace, name));
        tracing::debug!(target: "gpufleet::virtual_cluster", "{what}");
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api(kind, namespace)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .map(|_| ())
            .map_err(call_err(what))
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, HostError> {
        let what = format!("read {}", describe(kind, namespace, name));
        let found = self
            .api(kind, namespace)
            .get_opt(name)
            .await
            .map_err(call_err(what.clone()))?;
        found.map(|o| to_json(&o, &what)).transpose()
    }

    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), HostError> {
        let what = format!("delete {}", describe(kind, namespace, name));
        tracing::debug!(target: "gpufleet::virtual_cluster", "{what}");
        match self
            .api(kind, namespace)
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(call_err(what)(e)),
        }
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Json>, HostError> {
        let what = format!("list {} in {namespace} ({selector})", kind.gvk().3);
        let list = self
            .api(kind, Some(namespace))
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(call_err(what.clone()))?;
        list.items.iter().map(|o| to_json(o, &what)).collect()
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}
