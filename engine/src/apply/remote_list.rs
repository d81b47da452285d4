//! List resources for kinds whose objects live behind one backend client.

use std::future::Future;

use async_trait::async_trait;

use super::RemoteKind;
use crate::{
    context::Context,
    diag::Diagnostics,
    kinds::{ListKind, ListRequest, ListResponse, Listed, ReadResponse},
    schema::Schema,
    value::Value,
};

/// One object a backend listing found, before it is read.
#[derive(Debug, Clone)]
pub struct Found {
    /// The state an import of it starts from: its identifying attributes set (every other
    /// attribute null, once listed).
    pub skeleton: Value,
    /// What Terraform shows for it.
    pub display_name: String,
}

/// A [`RemoteKind`] whose objects can be found with one listing of the backend.
#[async_trait]
pub trait ListableKind: RemoteKind {
    /// The list block's filters.
    fn list_schema() -> Schema;

    /// Offline checks of the filters, beyond the per-attribute validators.
    fn validate_list(_config: &Value) -> Diagnostics {
        Diagnostics::new()
    }

    /// Every object matching the filters in `config`, in a stable order.
    async fn find(api: &Self::Api, config: &Value) -> Result<Vec<Found>, Diagnostics>;
}

/// The [`ListKind`] of a listable remote kind. Finding costs the kind's listing; each result
/// is then read exactly as a refresh after an import would read it (only when the resource
/// itself is asked for), so what `terraform query -generate-config-out` writes is what an
/// import would record.
#[derive(Debug, Clone, Copy, Default)]
pub struct Listing<K>(pub K);

#[async_trait]
impl<K: ListableKind> ListKind for Listing<K> {
    fn type_name(&self) -> &'static str {
        K::TYPE_NAME
    }

    fn schema(&self) -> Schema {
        K::list_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        K::validate_list(config)
    }

    async fn list(&self, ctx: &Context, req: ListRequest) -> ListResponse {
        let mut resp = ListResponse::default();
        let api = match self.0.connect(ctx).await {
            Ok(api) => api,
            Err(diagnostics) => {
                resp.diagnostics = diagnostics;
                return resp;
            }
        };
        let found = match K::find(&api, &req.config).await {
            Ok(found) => found,
            Err(diagnostics) => {
                resp.diagnostics = diagnostics;
                return resp;
            }
        };
        let schema = K::schema();
        let found = found.into_iter().map(|f| Found {
            skeleton: schema.block.complete(&f.skeleton),
            ..f
        });
        let api = &api;
        read_found(ctx, &req, found, |skeleton| async move {
            K::refresh(api, ctx, &skeleton).await
        })
        .await
    }
}

/// What a list found, as Terraform gets it: each object up to the limit, read with `read` as
/// a refresh after an import reads it when the resource itself is asked for (an object gone
/// by then is left out, a failed read ends the listing), else only its skeleton.
pub async fn read_found<F, Fut>(
    ctx: &Context,
    req: &ListRequest,
    found: impl IntoIterator<Item = Found>,
    read: F,
) -> ListResponse
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = ReadResponse>,
{
    let mut resp = ListResponse::default();
    for f in found.into_iter().take(req.limit) {
        if ctx.cancel.is_cancelled() {
            break;
        }
        let state = if req.include_resource {
            let read = read(f.skeleton).await;
            let failed = read.diagnostics.has_error();
            resp.diagnostics.extend(read.diagnostics);
            if failed {
                break;
            }
            if read.new_state.is_null() {
                continue;
            }
            read.new_state
        } else {
            f.skeleton
        };
        resp.results.push(Listed {
            display_name: f.display_name,
            state,
        });
    }
    resp
}
