//! `gpufleet_bcm_node`: one bare-metal GPU server, held by a tenant, through NVIDIA Base
//! Command Manager.
//!
//! # Holding a node
//!
//! BCM has no notion of tenants, so gpufleet records the holder on the device itself, as
//! `extra_values.gpufleet_tenant`. A node without it is free. Create claims a free node by
//! hostname; a node another tenant holds is refused with an error that names that tenant. A
//! node the *same* tenant already holds is adopted: that is what an apply re-run after the
//! provider was killed mid-provisioning finds, and it must not claim (or reboot) a second time.
//!
//! # Create
//!
//! 1. Resolve the category and software image names, read the node by hostname.
//! 2. Claim: one whole-object `updateDevice` that sets the category, the node's own software
//!    image (none: inherit the category's), the install mode and the tenant. From here on the
//!    node is recorded in state, whatever happens next.
//! 3. Power: a powered-off node is switched on, a running one is reset, so it boots into the
//!    chosen image. A node already booting for this tenant is left alone.
//! 4. Wait for `UP` within the `create` timeout. `INSTALLER_FAILED` or
//!    `INSTALLER_UNREACHABLE`, or the timeout, is an error that names the node; the state is
//!    still returned, so the node is never orphaned.
//!
//! With `power = "off"` the node is claimed and switched off instead, without waiting.
//!
//! # Update
//!
//! Category, image and install mode change in place with one `updateDevice`. Only an image
//! change reprovisions: the node is rebooted with a one-shot `nextBootInstallMode` (FULL when
//! the install mode is FULL, else AUTO) and waited for. Power changes switch the node on (and
//! wait for `UP`) or off. `hostname` and `tenant` force a replacement.
//!
//! # Destroy
//!
//! With `wipe_on_destroy` (the default), one `updateDevice` sets
//! `blockDevicesClearedOnNextBoot` to every block device of the node's disk setup (its own
//! `disksetup`, else its category's and the free pool's; a node with none is refused) and
//! `nextBootInstallMode = FULL`, moves the node to the `free-pool` category (its image and
//! install mode back to the category's) and moves the tenant to
//! `extra_values.gpufleet_releasing`; the node is then rebooted (reset, or switched on when
//! off) and waited for. The wipe is then verified before the node may count as free: the
//! node-installer must have consumed both one-shot fields (BCM clears them only when it ran),
//! and every block device BCM's system information reports for the node must have been
//! among those cleared. A wipe that fails the check fails the destroy and the node keeps its
//! mark. A verified node is switched off again when its rack idles powered off
//! (`extra_values.idle_power = "off"`), and unmarked. While the mark is on, the node is
//! neither held (the wiping boot comes up as nobody's, so the erased disks never count as a
//! tenant's data) nor free: no one can claim it, and a wipe that fails or is interrupted
//! leaves the node in this tenant's state until a later destroy finishes it. Without
//! `wipe_on_destroy`, the node is only released (free pool, no tenant).
//!
//! # Refresh
//!
//! A refresh reads the device, its status and its category (and its own image when it has one).
//! The GPU product and count come from BCM's system information for the node (the GPUs its
//! driver reports), read at create and import; they are hardware, so a refresh keeps them.
//! Status, power, category, image and install mode drift show up as changes. A node released
//! by someone else (no tenant, or another one) reads as gone.
//!
//! # Concurrency
//!
//! Updates carry the `revision` the node was read with, so a change made by someone else in
//! between fails with an error instead of being overwritten.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;

use self::{
    apply::{apply_create, apply_delete, apply_update},
    plan::plan_node,
    read::{import_skeleton, read_node},
    schema::node_schema,
    validate::validate_node,
};
use crate::{
    apply::{Found, ListableKind, RemoteKind},
    backends::bcm::{BcmApi, BcmBackend, FromSettings},
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
pub const TYPE_NAME: &str = "gpufleet_bcm_node";

/// Default timeouts: a full install of a GPU server takes 5–10 minutes on real hardware.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(30 * 60),
    read: Duration::from_secs(2 * 60),
    update: Duration::from_secs(30 * 60),
    delete: Duration::from_secs(30 * 60),
};

/// The `gpufleet_bcm_node` resource kind, over a [`BcmBackend`]. The registry uses
/// `BcmNode(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BcmNode<B = FromSettings>(pub B);

#[async_trait]
impl<B: BcmBackend> RemoteKind for BcmNode<B> {
    type Api = dyn BcmApi;
    const TYPE_NAME: &'static str = TYPE_NAME;
    const IDENTITY: &'static [&'static str] = &["hostname"];

    fn schema() -> Schema {
        node_schema()
    }

    fn validate(config: &Value) -> Diagnostics {
        validate_node(config)
    }

    fn plan(_ctx: &Context, req: &PlanRequest) -> PlanResponse {
        plan_node(req)
    }

    async fn check_plan(
        api: &dyn BcmApi,
        ctx: &Context,
        req: &PlanRequest,
        _planned: &Value,
    ) -> Diagnostics {
        plan::check_plan(api, ctx, req).await
    }

    fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
        import_skeleton(id)
    }

    async fn connect(&self, ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        self.0.connect(ctx, TYPE_NAME).await
    }

    async fn create(api: &dyn BcmApi, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        apply_create(api, ctx, &req.planned).await
    }

    async fn update(api: &dyn BcmApi, ctx: &Context, req: &ApplyRequest) -> ApplyResponse {
        apply_update(api, ctx, &req.prior, &req.planned).await
    }

    async fn delete(api: &dyn BcmApi, ctx: &Context, prior: &Value) -> ApplyResponse {
        apply_delete(api, ctx, prior).await
    }

    async fn refresh(api: &dyn BcmApi, ctx: &Context, state: &Value) -> ReadResponse {
        read_node(api, ctx, state).await
    }
}

#[async_trait]
impl<B: BcmBackend> ListableKind for BcmNode<B> {
    fn list_schema() -> Schema {
        list::list_schema()
    }

    fn validate_list(config: &Value) -> Diagnostics {
        list::validate_list(config)
    }

    async fn find(api: &dyn BcmApi, config: &Value) -> Result<Vec<Found>, Diagnostics> {
        list::find(api, config).await
    }
}
