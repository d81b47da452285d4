//! `gpufleet_bcm_node_power`: switch a BCM node on or off, or reset it, as an operator would
//! with `cmsh -c "device; power reset <node>"`, with a guard for nodes tenants hold.
//!
//! A node a tenant holds (or one being wiped after a release) is refused unless `force` is
//! set, and the refusal names the tenant: switching off a tenant's node stops its work.
//! The check runs when the plan is made, so a refused action costs nothing, and again just
//! before the power call, since the fleet can change between the two. `on` and `reset`
//! then wait until BCM reports the node `UP`; `off` is done when BCM takes the call.

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
pub const TYPE_NAME: &str = "gpufleet_bcm_node_power";

/// The operations, as `operation` takes them.
const OPERATIONS: &[&str] = &["on", "off", "reset"];

/// The `gpufleet_bcm_node_power` action over a [`BcmBackend`]. The registry uses
/// `BcmNodePower(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BcmNodePower<B = FromSettings>(pub B);

fn action_schema() -> Schema {
    Schema::new(
        Block::new(
            "Switches a BCM node on or off, or resets it, and waits for it to be `UP` after \
             `on` and `reset`. A node a tenant holds is refused unless `force` is set. The \
             action changes no Terraform state: a `gpufleet_bcm_node` whose `power` differs \
             afterwards shows it at its next plan.",
        )
        .attr(hostname_attribute())
        .attr(
            Attribute::required("operation", Type::String)
                .validate(OneOf::new(OPERATIONS))
                .describe("What to do: `on`, `off` or `reset` (a power cycle)."),
        )
        .attr(force_attribute()),
    )
}

/// The operation `config` asks for, if known.
fn operation(config: &Value) -> Option<PowerOp> {
    match config.get("operation").as_str()? {
        "on" => Some(PowerOp::On),
        "off" => Some(PowerOp::Off),
        "reset" => Some(PowerOp::Reset),
        _ => None,
    }
}

/// The summary of this action's errors.
const FAILED: &str = "BCM Node Power Failed";

/// Switches the node and, for `on` and `reset`, waits until it is `UP`.
async fn run(
    api: &dyn BcmApi,
    ctx: &Context,
    config: &Value,
    progress: ProgressSink<'_>,
) -> Diagnostics {
    let hostname = config.get("hostname").as_str().unwrap_or_default();
    let Some(op) = operation(config) else {
        return Diagnostics::new();
    };
    let word = config.get("operation").as_str().unwrap_or_default();
    let d = match find(api, TYPE_NAME, FAILED, hostname).await {
        Ok(d) => d,
        Err(diags) => return diags,
    };
    let refused = guard(&d, config, &refusal(config));
    if refused.has_error() {
        return refused;
    }
    progress(format!("node {hostname}: power {word}"));
    let what = format!("node {hostname}");
    let done = match api.power(std::slice::from_ref(&d.uuid), op, &what).await {
        Ok(r) => r,
        Err(e) => {
            return Diagnostic::error(
                FAILED,
                format!("{TYPE_NAME}: node {hostname}: power {word}: {e}."),
            )
            .into();
        }
    };
    if op == PowerOp::Off {
        progress(if done.count == 0 {
            format!("node {hostname} was already off")
        } else {
            format!("node {hostname} is off")
        });
        return Diagnostics::new();
    }
    let booting = done.count > 0 || op == PowerOp::Reset;
    wait_until_up(api, ctx, (TYPE_NAME, FAILED), &d, (word, booting), progress).await
}

/// What the guard says this action would do to a tenant's node.
fn refusal(config: &Value) -> String {
    let op = config.get("operation").as_str().unwrap_or("power");
    format!("`{op}` would stop what runs on it")
}

#[async_trait]
impl<B: BcmBackend> ActionKind for BcmNodePower<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        action_schema()
    }

    async fn plan(&self, ctx: &Context, config: &Value) -> Diagnostics {
        plan_check(&self.0, ctx, config, (TYPE_NAME, FAILED), &refusal(config)).await
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
