//! `gpufleet_network_segment`: a tenant network on a Netris controller.
//!
//! # The objects behind one segment
//!
//! A segment is three controller objects, created in this order and removed in reverse:
//!
//! 1. an IPAM **allocation** `gf-<name>` with prefix `cidr`, owned by `tenant`, in `vpc`;
//! 2. a `common` **subnet** `gf-<name>` with the same prefix and `gateway`, at `site`;
//! 3. a **V-Net** `<name>` with the gateway (and DHCP range), the member switch ports, the MTU,
//!    and the tags `gpufleet:owner=<name>` and `gpufleet:mtu=<mtu>` (not every controller
//!    version has an MTU field on V-Nets, so the MTU is also recorded as a tag, which a
//!    refresh falls back to).
//!
//! Every name is derived from the segment name, so an apply that was interrupted (provider
//! killed, controller timeout, lost answer) is re-run safely: each step first looks for its
//! object by name and **adopts** it instead of creating a duplicate. An existing V-Net is only
//! adopted when it carries this segment's owner tag; anything else is a conflict that names
//! `terraform import` as the way to take it over.
//!
//! # Failures leave a partial state, not a rollback
//!
//! When a step fails, apply does not delete what the earlier steps created. It returns the
//! error *and* a state that records every object created so far (`allocation_id`,
//! `subnet_id`, `id`), so nothing is orphaned: Terraform keeps that state (a failed create is
//! tainted and replaced on the next apply, which deletes what is recorded and creates afresh,
//! adopting leftovers by name). A rollback was rejected because it can itself fail half-way,
//! and then leaves objects that no state mentions. When no object was created yet, the state
//! is null.
//!
//! # Waiting
//!
//! Create and update wait until the controller reports `provisioning: false`, within the
//! `create` / `update` timeout. The provider process polls the V-Nets of a VPC with one list
//! for every segment that waits: first at once, then after a quarter of the newest wait's
//! age (from 100 ms to 5 s); a timeout is an error that names the segment and how long it
//! waited, and the returned state still records the V-Net. Delete waits until the V-Net is gone
//! before it removes the subnet and the allocation. Terraform's stop request (Ctrl-C) ends any
//! wait at once, also with the partial state.
//!
//! # Updates in place
//!
//! `members`, `dhcp`, `state`, `mtu`, `gateway`, `vlan_id` and `vni` change in place with one
//! `PUT` of the V-Net. A gateway change also updates the subnet's default gateway first, as
//! the controller requires the V-Net gateway to match its subnet (the Netris Terraform provider
//! handles gateway changes in place too). `name`, `tenant`, `vpc`, `site` and `cidr` force a
//! replacement: the controller ignores VPC changes on update, and the allocation's prefix is
//! its identity.
//!
//! # Refresh and drift
//!
//! A refresh reads only the V-Net (one call). A segment is gone only when every object it owns
//! is gone: a V-Net deleted out of band (or by a destroy that was interrupted) reads as a
//! partial state that keeps the allocation and subnet still on the controller, so a destroy
//! removes them and an apply creates the V-Net again, adopting them. Everything the V-Net carries is taken from the controller: ports added or removed
//! out of band show up in `members`. Server-side defaults are normalised away: an allocated
//! VLAN or VNI stays as recorded when the controller reports `auto`, port names are compared
//! as `port@switch`, and members are a set, so order never matters.
//!
//! Members given by `hostname` are resolved at apply through the controller's server inventory
//! to the switch ports the server is cabled to; `attached_ports` records the result, and a
//! refresh maps the V-Net's ports back to the hostnames through it. A hostname member whose
//! ports are all still attached stays a hostname member; when only some are, it turns into port
//! members for those, so the next plan re-attaches the missing ones.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

use self::{
    apply::{apply_create, apply_delete, apply_update},
    model::Ids,
    plan::plan_segment,
    read::{import_skeleton, read_segment},
    schema::segment_schema,
    validate::validate_segment,
};
use crate::{
    apply::{Found, ListableKind, RemoteKind},
    backends::netris::{FromSettings, NetrisApi, NetrisBackend},
    context::Context,
    diag::Diagnostics,
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse},
    schema::Schema,
    timeouts::Timeouts,
    value::Value,
};

mod apply;
mod config;
mod list;
mod model;
mod plan;
mod read;
mod schema;
#[cfg(test)]
mod tests;
mod validate;

/// The resource type name.
pub const TYPE_NAME: &str = "gpufleet_network_segment";

/// Default timeouts: provisioning a V-Net pushes configuration to every switch of the site.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(10 * 60),
    read: Duration::from_secs(2 * 60),
    update: Duration::from_secs(10 * 60),
    delete: Duration::from_secs(10 * 60),
};

/// The `gpufleet_network_segment` resource kind, over a [`NetrisBackend`]. The registry uses
/// `NetworkSegment(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetworkSegment<B = FromSettings>(pub B);

#[async_trait]
impl<B: NetrisBackend> RemoteKind for NetworkSegment<B> {
    type Api = dyn NetrisApi;
    const TYPE_NAME: &'static str = TYPE_NAME;
    const IDENTITY: &'static [&'static str] = &["name"];

    fn schema() -> Schema {
        segment_schema()
    }

    fn validate(config: &Value) -> Diagnostics {
        validate_segment(config)
    }

    fn plan(_ctx: &Context, req: &PlanRequest) -> PlanResponse {
        plan_segment(req)
    }

    async fn check_plan(
        api: &dyn NetrisApi,
        ctx: &Context,
        req: &PlanRequest,
        _planned: &Value,
    ) -> Diagnostics {
        plan::check_plan(api, ctx, req).await
    }

    fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
        import_skeleton(id)
    }

    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn NetrisApi>, Diagnostics> {
        self.0.connect(ctx, TYPE_NAME).await
    }

    async fn create(api: &dyn NetrisApi, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        apply_create(api, ctx, &req.planned, Ids::default()).await
    }

    async fn update(api: &dyn NetrisApi, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        apply_update(api, ctx, &req.prior, &req.planned).await
    }

    async fn delete(api: &dyn NetrisApi, ctx: &Context, prior: &Value) -> ApplyResponse {
        apply_delete(api, ctx, prior).await
    }

    async fn refresh(api: &dyn NetrisApi, ctx: &Context, state: &Value) -> ReadResponse {
        read_segment(api, ctx, state).await
    }
}

#[async_trait]
impl<B: NetrisBackend> ListableKind for NetworkSegment<B> {
    fn list_schema() -> Schema {
        list::list_schema()
    }

    async fn find(api: &dyn NetrisApi, config: &Value) -> Result<Vec<Found>, Diagnostics> {
        list::find(api, config).await
    }
}
