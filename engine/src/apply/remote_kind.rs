//! Resource kinds whose objects live behind one backend client.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    context::Context,
    diag::Diagnostics,
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    schema::Schema,
    value::Value,
};

/// A resource kind whose objects live behind a backend client (a BCM head node, a Netris
/// controller, the host cluster): what differs between kinds. Implementing it gives the kind
/// its [`ResourceKind`], which answers what needs no backend first (an id that is no id, an
/// update of local settings, a record that never changes remotely), then connects, reports a
/// failed connection (settings missing or invalid) with the state unchanged, and hands
/// create, update, delete and refresh to the kind. A plan's backend checks are bounded and
/// best-effort: apply checks again.
#[async_trait]
pub trait RemoteKind: Send + Sync {
    /// The client the kind's steps run against, e.g. `dyn BcmApi`.
    type Api: ?Sized + Send + Sync;

    /// The full type name, e.g. `gpufleet_network_segment`.
    const TYPE_NAME: &'static str;

    /// [`ResourceKind::identity_attributes`].
    const IDENTITY: &'static [&'static str];

    /// The schema, the single source of truth for this type's attributes.
    fn schema() -> Schema;

    /// [`ResourceKind::validate`].
    fn validate(config: &Value) -> Diagnostics;

    /// [`ResourceKind::plan`]: the planned value, from the configuration and what this run
    /// has already planned (`ctx`), without the backend.
    fn plan(ctx: &Context, req: &PlanRequest) -> PlanResponse;

    /// Whether this plan has anything to ask the backend ([`RemoteKind::check_plan`]); when
    /// not, the plan does not connect at all. Always, by default.
    fn checks_backend_at_plan(_req: &PlanRequest) -> bool {
        true
    }

    /// What the backend already knows that refuses the `planned` value (a name it does not
    /// have, a node another tenant holds). Runs after [`RemoteKind::plan`] found no error,
    /// when the backend is configured; a backend that cannot be asked is no finding, since
    /// apply checks again (the fleet can change between plan and apply anyway).
    async fn check_plan(
        _api: &Self::Api,
        _ctx: &Context,
        _req: &PlanRequest,
        _planned: &Value,
    ) -> Diagnostics {
        Diagnostics::new()
    }

    /// The state skeleton an import by `id` starts from, for [`RemoteKind::refresh`] to fill,
    /// or why `id` is refused. Checked before connecting: a malformed id is refused offline.
    fn import_skeleton(id: &str) -> Result<Value, Diagnostics>;

    /// The client for this operation, or the diagnostic that says which settings are missing.
    async fn connect(&self, ctx: &Context) -> Result<Arc<Self::Api>, Diagnostics>;

    /// The client a refresh of `state` reads through; [`RemoteKind::connect`]'s by default. A
    /// kind whose reads the run's read cache can answer returns that reader.
    async fn connect_reader(
        &self,
        ctx: &Context,
        _state: &Value,
    ) -> Result<Arc<Self::Api>, Diagnostics> {
        self.connect(ctx).await
    }

    /// The response to an update the backend need not see (only local settings change, such
    /// as timeouts), answered without connecting; `None` (the default) when it must.
    fn update_locally(_prior: &Value, _planned: &Value) -> Option<ApplyResponse> {
        None
    }

    /// The response to a refresh the state alone answers (a record nothing changes
    /// remotely), without connecting; `None` (the default) when the backend must be read.
    fn read_locally(_state: &Value) -> Option<ReadResponse> {
        None
    }

    /// Creates the remote objects for `req.planned`.
    async fn create(api: &Self::Api, ctx: &Context, req: &ApplyRequest) -> ApplyResponse;

    /// Changes the remote objects of `req.prior` to match `req.planned`.
    async fn update(api: &Self::Api, ctx: &Context, req: &ApplyRequest) -> ApplyResponse;

    /// Deletes the remote objects of `prior`.
    async fn delete(api: &Self::Api, ctx: &Context, prior: &Value) -> ApplyResponse;

    /// Observes the remote objects behind `state`.
    async fn refresh(api: &Self::Api, ctx: &Context, state: &Value) -> ReadResponse;

    /// [`ResourceKind::docs_sections`].
    fn docs_sections() -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

#[async_trait]
impl<K: RemoteKind> ResourceKind for K {
    fn type_name(&self) -> &'static str {
        K::TYPE_NAME
    }

    fn schema(&self) -> Schema {
        K::schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        K::validate(config)
    }

    async fn plan(&self, ctx: &Context, req: PlanRequest) -> PlanResponse {
        let mut resp = K::plan(ctx, &req);
        if resp.planned.is_null()
            || resp.diagnostics.has_error()
            || !K::checks_backend_at_plan(&req)
        {
            return resp;
        }
        if let Ok(api) = self.connect(ctx).await {
            // A backend that does not answer in time is no finding: apply checks again.
            resp.diagnostics.extend(
                crate::plan::backend_facts::bounded(K::check_plan(&api, ctx, &req, &resp.planned))
                    .await,
            );
        }
        resp
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        if !req.prior.is_null()
            && !req.planned.is_null()
            && let Some(resp) = K::update_locally(&req.prior, &req.planned)
        {
            return resp;
        }
        let api = match self.connect(ctx).await {
            Ok(api) => api,
            Err(diagnostics) => return ApplyResponse::refused(req.prior, diagnostics),
        };
        if req.planned.is_null() {
            K::delete(&api, ctx, &req.prior).await
        } else if req.prior.is_null() {
            K::create(&api, ctx, &req).await
        } else {
            K::update(&api, ctx, &req).await
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        if let Some(resp) = K::read_locally(&state) {
            return resp;
        }
        match self.connect_reader(ctx, &state).await {
            Ok(api) => K::refresh(&api, ctx, &state).await,
            Err(diagnostics) => ReadResponse::refused(state, diagnostics),
        }
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        let skeleton = K::import_skeleton(id)?;
        // Fail early, with the settings diagnostic, when there is no backend to read from.
        self.connect(ctx).await?;
        Ok(skeleton)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        K::IDENTITY
    }

    fn docs_sections(&self) -> Vec<(&'static str, String)> {
        K::docs_sections()
    }
}
