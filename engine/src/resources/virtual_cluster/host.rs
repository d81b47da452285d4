//! The host cluster as a virtual cluster sees it: a handful of object operations on JSON
//! values, behind [`HostApi`] so apply and read can be tested against an in-memory fake.
//!
//! [`KubeHost`] is the real one, on the shared `kube::Client`: every write is a server-side
//! apply under the field manager `gpufleet`, so an object left by an interrupted apply (or
//! edited by hand) is adopted and corrected rather than duplicated, while replica counts and
//! labels other controllers own stay theirs.

use std::sync::Arc;

use async_trait::async_trait;
use kube::api::DeleteParams;
use serde_json::Value as Json;

use super::objects::ObjectKind;
use crate::{
    backends::kube::{DynamicClient, Gvk, ObjectError},
    context::Context,
    diag::Diagnostics,
};

/// Why a host call failed: the host-cluster module's object error, shared with the other
/// resources that write host objects.
pub type HostError = ObjectError;

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
    /// JSON merge-patches one object (`null` removes a field), for fields another client
    /// wrote, which a server-side apply leaves alone; a missing object is an error.
    async fn merge_patch(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), HostError>;
    /// How many API calls this client made so far (for the operation's debug log).
    fn calls(&self) -> u64 {
        0
    }
    /// The fields that applies since the last call left to the controllers that own them
    /// (see [`crate::backends::kube::ownership`]), one sentence each.
    fn left_to_others(&self) -> Vec<String> {
        Vec::new()
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
#[derive(Debug, Clone)]
pub struct KubeHost {
    objects: Arc<DynamicClient>,
}

impl KubeHost {
    /// A host over `client`.
    pub fn new(client: kube::Client) -> KubeHost {
        KubeHost {
            objects: Arc::new(DynamicClient::new(client)),
        }
    }
}

fn gvk(kind: ObjectKind) -> Gvk {
    let (group, version, kind, plural) = kind.gvk();
    Gvk::new(group, version, kind, plural)
}

#[async_trait]
impl HostApi for KubeHost {
    async fn apply(&self, object: &Json) -> Result<(), HostError> {
        let kind_name = object["kind"].as_str().unwrap_or_default();
        let kind = ObjectKind::from_kind(kind_name).ok_or_else(|| {
            HostError::Other(format!("cannot apply an object of kind {kind_name:?}"))
        })?;
        self.objects.apply(&gvk(kind), object).await
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, HostError> {
        self.objects.get(&gvk(kind), namespace, name).await
    }

    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), HostError> {
        let params = DeleteParams::background();
        self.objects
            .delete(&gvk(kind), namespace, name, &params)
            .await
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Json>, HostError> {
        let kind = gvk(kind);
        let what = format!("list {} in {namespace} ({selector})", kind.plural);
        self.objects
            .list(&kind, Some(namespace), selector, what)
            .await
    }

    async fn merge_patch(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), HostError> {
        self.objects
            .merge_patch(&gvk(kind), namespace, name, patch)
            .await
    }

    fn calls(&self) -> u64 {
        self.objects.calls()
    }

    fn left_to_others(&self) -> Vec<String> {
        self.objects.take_left()
    }
}
