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

/// A resource kind whose objects live behind one backend client (a BCM head node, a Netris
/// controller): what differs between such kinds. Implementing it gives the kind its
/// [`ResourceKind`], which connects first, reports a failed connection (settings missing or
/// invalid) with the state unchanged, and hands create, update and delete to the kind.
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

    /// [`ResourceKind::plan`]: the planned value, from the configuration alone.
    fn plan(req: &PlanRequest) -> PlanResponse;

    /// What the backend already knows that refuses the plan (a name it does not have, a
    /// node another tenant holds). Runs after [`RemoteKind::plan`] found no error, when the
    /// backend is configured; a backend that cannot be asked is no finding, since apply
    /// checks again (the fleet can change between plan and apply anyway).
    async fn check_plan(_api: &Self::Api, _ctx: &Context, _req: &PlanRequest) -> Diagnostics {
        Diagnostics::new()
    }

    /// The state skeleton an import by `id` starts from, for [`RemoteKind::refresh`] to fill.
    fn import_skeleton(id: &str) -> Result<Value, Diagnostics>;

    /// The client for this operation, or the diagnostic that says which settings are missing.
    async fn connect(&self, ctx: &Context) -> Result<Arc<Self::Api>, Diagnostics>;

    /// Creates the remote objects for `planned`.
    async fn create(api: &Self::Api, ctx: &Context, planned: &Value) -> ApplyResponse;

    /// Changes the remote objects of `prior` to match `planned`.
    async fn update(
        api: &Self::Api,
        ctx: &Context,
        prior: &Value,
        planned: &Value,
    ) -> ApplyResponse;

    /// Deletes the remote objects of `prior`.
    async fn delete(api: &Self::Api, ctx: &Context, prior: &Value) -> ApplyResponse;

    /// Observes the remote objects behind `state`.
    async fn refresh(api: &Self::Api, ctx: &Context, state: &Value) -> ReadResponse;
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
        let mut resp = K::plan(&req);
        if resp.planned.is_null() || resp.diagnostics.has_error() {
            return resp;
        }
        if let Ok(api) = self.connect(ctx).await {
            // A backend that does not answer in time is no finding: apply checks again.
            resp.diagnostics
                .extend(crate::plan::backend_facts::bounded(K::check_plan(&api, ctx, &req)).await);
        }
        resp
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        let api = match self.connect(ctx).await {
            Ok(api) => api,
            Err(diagnostics) => return ApplyResponse::refused(req.prior, diagnostics),
        };
        if req.planned.is_null() {
            K::delete(&api, ctx, &req.prior).await
        } else if req.prior.is_null() {
            K::create(&api, ctx, &req.planned).await
        } else {
            K::update(&api, ctx, &req.prior, &req.planned).await
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        match self.connect(ctx).await {
            Ok(api) => K::refresh(&api, ctx, &state).await,
            Err(diagnostics) => ReadResponse::refused(state, diagnostics),
        }
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        // Fail early, with the settings diagnostic, when there is no backend to read from.
        self.connect(ctx).await?;
        K::import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        K::IDENTITY
    }
}
