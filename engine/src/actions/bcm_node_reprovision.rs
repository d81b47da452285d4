//! `gpufleet_bcm_node_reprovision`: reinstall a BCM node's software image, as an operator
//! would with `cmsh -c "device; use <node>; set nextinstallmode full; commit; power reset"`,
//! with the same guard for nodes tenants hold as the power action.
//!
//! The node's one-shot `nextBootInstallMode` is set (FULL by default: repartition and sync
//! everything; AUTO syncs changes only), then the node is reset (switched on when off) and
//! waited for until `UP`. BCM clears the one-shot mode only when the node-installer ran, so a
//! node that comes up with it still set did not reinstall, and the action says so.

use async_trait::async_trait;

use super::bcm_node_steps::{
    find, force_attribute, guard, hostname_attribute, plan_check, wait_until_up,
};
use crate::{
    backends::bcm::{BcmApi, BcmBackend, FromSettings, PowerOp},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ActionKind, ProgressSink},
    schema::{Attribute, Block, Schema},
    validate::OneOf,
    value::{Type, Value},
};

/// The action type name.
pub const TYPE_NAME: &str = "gpufleet_bcm_node_reprovision";

/// The summary of this action's errors.
const FAILED: &str = "BCM Node Reprovision Failed";

/// The install modes a reprovision may use.
const MODES: &[&str] = &["FULL", "AUTO"];

/// What the guard says a reprovision would do to a tenant's node.
const REFUSAL: &str = "reinstalling it reboots it and may erase what the tenant keeps on it";

/// The `gpufleet_bcm_node_reprovision` action over a [`BcmBackend`]. The registry uses
/// `BcmNodeReprovision(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BcmNodeReprovision<B = FromSettings>(pub B);

fn action_schema() -> Schema {
    Schema::new(
        Block::new(
            "Reinstalls a BCM node's software image at its next boot, reboots it into the \
             node-installer and waits until it is `UP`, then checks that the installer ran. A \
             node a tenant holds is refused unless `force` is set. The node keeps its \
             category, image and tenant; only its disks are provisioned again.",
        )
        .attr(hostname_attribute())
        .attr(
            Attribute::optional("install_mode", Type::String)
                .default("FULL")
                .validate(OneOf::new(MODES))
                .describe(
                    "`FULL` repartitions the disks and syncs the whole image; `AUTO` syncs \
                     only what differs from the image.",
                ),
        )
        .attr(force_attribute()),
    )
}

/// Marks the node for a reinstall, boots it and waits until it is `UP` with the installer
/// run.
async fn run(
    api: &dyn BcmApi,
    ctx: &Context,
    config: &Value,
    progress: ProgressSink<'_>,
) -> Diagnostics {
    let hostname = config.get("hostname").as_str().unwrap_or_default();
    let mode = config.get("install_mode").as_str().unwrap_or("FULL");
    let failed = |detail: String| Diagnostics::from(Diagnostic::error(FAILED, detail));
    let d = match find(api, TYPE_NAME, FAILED, hostname).await {
        Ok(d) => d,
        Err(diags) => return diags,
    };
    let refused = guard(&d, config, REFUSAL);
    if refused.has_error() {
        return refused;
    }
    let mut marked = d.clone();
    marked.next_boot_install_mode = Some(mode.to_owned());
    if let Err(e) = api.update_device(&marked).await {
        return failed(format!(
            "{TYPE_NAME}: node {hostname}: setting the next install mode to {mode}: {e}."
        ));
    }
    progress(format!("node {hostname}: next boot installs {mode}"));
    let status = match api.status(&d.uuid).await {
        Ok(s) => s,
        Err(e) => {
            return failed(format!(
                "{TYPE_NAME}: node {hostname}: reading its status: {e}."
            ));
        }
    };
    let (op, word) = if status.as_ref().is_some_and(|s| s.is_on()) {
        (PowerOp::Reset, "reset")
    } else {
        (PowerOp::On, "on")
    };
    progress(format!("node {hostname}: power {word}"));
    let what = format!("node {hostname}");
    if let Err(e) = api.power(std::slice::from_ref(&d.uuid), op, &what).await {
        return failed(format!("{TYPE_NAME}: node {hostname}: power {word}: {e}."));
    }
    let waited = wait_until_up(
        api,
        ctx,
        (TYPE_NAME, FAILED),
        &d,
        ("reprovision", true),
        progress,
    )
    .await;
    if waited.has_error() {
        return waited;
    }
    // BCM clears the one-shot mode only when the node-installer ran.
    match api.device(&d.uuid).await {
        Ok(Some(now)) if now.next_boot_install_mode.is_some() => failed(format!(
            "{TYPE_NAME}: node {hostname} came up without running the node-installer (its \
             next install mode is still {}): check its boot order and PXE setup, then run \
             the action again.",
            now.next_boot_install_mode.unwrap_or_default()
        )),
        Ok(_) => {
            progress(format!("node {hostname}: reinstalled ({mode})"));
            Diagnostics::new()
        }
        Err(e) => failed(format!(
            "{TYPE_NAME}: node {hostname}: reading it back: {e}."
        )),
    }
}

#[async_trait]
impl<B: BcmBackend> ActionKind for BcmNodeReprovision<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        action_schema()
    }

    async fn plan(&self, ctx: &Context, config: &Value) -> Diagnostics {
        plan_check(&self.0, ctx, config, (TYPE_NAME, FAILED), REFUSAL).await
    }

    async fn invoke(
        &self,
        ctx: &Context,
        config: Value,
        progress: ProgressSink<'_>,
    ) -> Diagnostics {
        match self.0.connect(ctx, TYPE_NAME).await {
            Ok(api) => run(api.as_ref(), ctx, &config, progress).await,
            Err(diagnostics) => diagnostics,
        }
    }
}
