//! Host-cluster objects as the virtual cluster and benchmark kinds use them: a handful of
//! operations on JSON values behind [`HostObjects`], so the kinds can be driven against the
//! API server ([`KubeHost`]) or an in-memory test double.
//!
//! Every write is a server-side apply under the field manager `gpufleet`, so an object left
//! by an interrupted apply (or edited by hand) is adopted and corrected rather than
//! duplicated, while replica counts and labels other controllers own stay theirs.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, LogParams},
};
use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;

use super::{KubeHost, ObjectKind};
use crate::backends::kube::{
    ObjectError,
    lease::{LeaseRef, TurnGuard, TurnLease, holder_identity},
    status_code,
};

/// A turn on a pool, held until released; a holder that dies without releasing stops
/// renewing it, and the turn passes on once it expires.
#[async_trait]
pub trait HeldTurn: Send + Sync {
    /// Hands the turn on at once.
    async fn release(self: Box<Self>);
}

/// How long a turn lasts without renewal: a killed provider's turn passes on after this.
pub const TURN_DURATION: Duration = Duration::from_secs(15);

/// Object operations on the host cluster. `namespace` is `None` for cluster-scoped kinds
/// (and, for [`Self::list`], for every namespace).
#[async_trait]
pub trait HostObjects: Send + Sync {
    /// The API server's version (`v1.36.0`).
    async fn server_version(&self) -> Result<String, ObjectError>;
    /// Whether the API server serves `kind` (its group and version are discovered).
    async fn serves(&self, kind: ObjectKind) -> Result<bool, ObjectError>;
    /// Server-side applies `object` (which names its kind, name and namespace).
    async fn apply(&self, object: &Json) -> Result<(), ObjectError>;
    /// Reads one object; `None` when it does not exist.
    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError>;
    /// Reads one object whose absence is no news (a paused control plane's kubeconfig, which
    /// one created paused never wrote): a host that answers reads from a run's lists answers
    /// from the list alone, without reading a missing object again by name.
    async fn peek(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        self.get(kind, namespace, name).await
    }
    /// Lists objects of `kind` matching a label selector.
    async fn list(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ObjectError>;
    /// Deletes one object with its dependents (the pods of a Job) in the background; a
    /// missing object is not an error.
    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ObjectError>;
    /// JSON merge-patches one object (`null` removes a field), for fields another client
    /// wrote, which a server-side apply leaves alone; a missing object is an error.
    async fn merge_patch(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), ObjectError>;
    /// The log of one container of a pod.
    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ObjectError>;
    /// Waits for this process's turn on `lease`, across processes and pipelines.
    async fn take_turn(
        &self,
        lease: LeaseRef,
        cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ObjectError>;
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

#[async_trait]
impl HostObjects for KubeHost {
    async fn server_version(&self) -> Result<String, ObjectError> {
        self.objects().count();
        self.objects()
            .client()
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .map_err(ObjectError::call("read the server version"))
    }

    async fn serves(&self, kind: ObjectKind) -> Result<bool, ObjectError> {
        let group_version = kind.api_version();
        self.objects().count();
        match self
            .objects()
            .client()
            .list_api_group_resources(&group_version)
            .await
        {
            Ok(list) => Ok(list.resources.iter().any(|r| r.name == kind.gvk().plural)),
            Err(e) if status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(ObjectError::call(format!("discover {group_version}"))(e)),
        }
    }

    async fn apply(&self, object: &Json) -> Result<(), ObjectError> {
        let kind_name = object["kind"].as_str().unwrap_or_default();
        let kind = ObjectKind::from_kind(kind_name).ok_or_else(|| {
            ObjectError::Other(format!("cannot apply an object of kind {kind_name:?}"))
        })?;
        self.objects().apply(&kind.gvk(), object).await
    }

    async fn get(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Json>, ObjectError> {
        self.objects().get(&kind.gvk(), namespace, name).await
    }

    async fn list(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Json>, ObjectError> {
        let gvk = kind.gvk();
        let what = match namespace {
            Some(ns) => format!("list {} in {ns} ({selector})", gvk.plural),
            None => format!("list {} ({selector})", gvk.plural),
        };
        self.objects().list(&gvk, namespace, selector, what).await
    }

    async fn delete(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ObjectError> {
        // Background propagation: a Job's pods go with it.
        let params = DeleteParams::background();
        self.objects()
            .delete(&kind.gvk(), namespace, name, &params)
            .await
    }

    async fn merge_patch(
        &self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
        patch: &Json,
    ) -> Result<(), ObjectError> {
        self.objects()
            .merge_patch(&kind.gvk(), namespace, name, patch)
            .await
    }

    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<String, ObjectError> {
        let what = format!("read the log of pod {pod} in {namespace}");
        self.objects().count();
        let pods: Api<Pod> = Api::namespaced(self.objects().client().clone(), namespace);
        let params = LogParams {
            container: Some(container.to_owned()),
            ..LogParams::default()
        };
        pods.logs(pod, &params)
            .await
            .map_err(ObjectError::call(what))
    }

    async fn take_turn(
        &self,
        lease: LeaseRef,
        cancel: &CancellationToken,
    ) -> Result<Box<dyn HeldTurn>, ObjectError> {
        let what = lease.to_string();
        let holder = holder_identity();
        tracing::debug!(target: "gpufleet::benchmark", "taking the turn on {what} as {holder}");
        let client = self.objects().client().clone();
        let guard = TurnLease::new(client, lease, holder, TURN_DURATION)
            .acquire(cancel, |h| {
                tracing::info!(
                    target: "gpufleet::benchmark",
                    "waiting for the run of {} to finish its turn on {what}",
                    h.identity
                );
            })
            .await
            .map_err(ObjectError::Lease)?;
        Ok(Box::new(guard))
    }

    fn calls(&self) -> u64 {
        KubeHost::calls(self)
    }

    fn left_to_others(&self) -> Vec<String> {
        self.objects().take_left()
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
