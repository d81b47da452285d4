//! `gpufleet_bcm_node_power`: switch a BCM node on or off, or reset it, as an operator would
//! with `cmsh -c "device; power reset <node>"`, with a guard for nodes tenants hold.
//!
//! A node a tenant holds (or one being wiped after a release) is refused unless `force` is
//! set, and the refusal names the tenant: switching off a tenant's node stops its work.
//! The check runs when the plan is made, so a refused action costs nothing, and again just
//! before the power call, since the fleet can change between the two. `on` and `reset`
//! then wait until BCM reports the node `UP`; `off` is done when BCM takes the call.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use tokio::time::Instant;

use crate::{
    backends::bcm::{
        BcmApi, BcmBackend, Device, FromSettings, PowerOp,
        lifecycle::{LifecycleError, Progress, wait_up},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ActionKind, ProgressSink},
    path::AttrPath,
    schema::{Attribute, Block, Schema},
    validate::OneOf,
    value::{Type, Value},
};

/// The action type name.
pub const TYPE_NAME: &str = "gpufleet_bcm_node_power";

/// The operations, as `operation` takes them.
const OPERATIONS: &[&str] = &["on", "off", "reset"];

/// How long `on` and `reset` wait for the node to come up: a full install of a GPU server
/// takes 5–10 minutes on real hardware.
const UP_WITHIN: Duration = Duration::from_secs(30 * 60);

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
        .attr(
            Attribute::required("hostname", Type::String)
                .describe("The node's hostname in BCM, e.g. `gpu-a1-01`."),
        )
        .attr(
            Attribute::required("operation", Type::String)
                .validate(OneOf::new(OPERATIONS))
                .describe("What to do: `on`, `off` or `reset` (a power cycle)."),
        )
        .attr(Attribute::optional("force", Type::Bool).describe(
            "Act also on a node a tenant holds, or one being wiped after a release; without \
             it such a node is refused, naming the tenant.",
        )),
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

/// The node, or the diagnostic on `hostname` that says BCM has none of that name.
async fn find(api: &dyn BcmApi, hostname: &str) -> Result<Device, Diagnostics> {
    match api.device_named(hostname).await {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(Diagnostic::error(
            "Unknown BCM Node",
            format!("hostname: BCM has no node named {hostname:?}."),
        )
        .with_path(AttrPath::attr("hostname"))
        .into()),
        Err(e) => Err(Diagnostic::error(
            "BCM Node Power Failed",
            format!("{TYPE_NAME}: reading node {hostname}: {e}."),
        )
        .into()),
    }
}

/// The refusal for a node someone holds, unless `force` is set (or not yet known).
fn guard(d: &Device, config: &Value) -> Diagnostics {
    let force = config.get("force");
    if force.as_bool() == Some(true) || force.is_unknown() {
        return Diagnostics::new();
    }
    let (tenant, how) = match (d.tenant(), d.releasing()) {
        (Some(t), _) => (t, "holds it"),
        (None, Some(t)) => (t, "released it and its wipe has not finished"),
        (None, None) => return Diagnostics::new(),
    };
    let op = config.get("operation").as_str().unwrap_or("power");
    Diagnostic::error(
        "BCM Node Held By A Tenant",
        format!(
            "hostname: node {} is not free: tenant {tenant:?} {how}, and `{op}` would stop \
             what runs on it. Set `force = true` to act anyway, or change the tenant's \
             gpufleet_bcm_node instead.",
            d.hostname
        ),
    )
    .with_path(AttrPath::attr("hostname"))
    .into()
}

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
    let d = match find(api, hostname).await {
        Ok(d) => d,
        Err(diags) => return diags,
    };
    let refused = guard(&d, config);
    if refused.has_error() {
        return refused;
    }
    let started = Instant::now();
    progress(format!("node {hostname}: power {word}"));
    let what = format!("node {hostname}");
    let done = match api.power(std::slice::from_ref(&d.uuid), op, &what).await {
        Ok(r) => r,
        Err(e) => {
            return Diagnostic::error(
                "BCM Node Power Failed",
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
    progress(format!("node {hostname}: waiting for UP"));
    let booting = done.count > 0 || op == PowerOp::Reset;
    let mut seen = Progress::default();
    let waited = tokio::time::timeout(
        UP_WITHIN,
        ctx.cancel
            .run_until_cancelled(wait_up(api, &d.uuid, hostname, booting, &mut seen)),
    )
    .await;
    let last = seen
        .status
        .as_ref()
        .map_or_else(|| "no status yet".to_owned(), |s| s.status.clone());
    let failed = |detail: String| Diagnostic::error("BCM Node Power Failed", detail).into();
    match waited {
        Ok(Some(Ok(()))) => {
            progress(format!(
                "node {hostname} is UP after {}s",
                started.elapsed().as_secs()
            ));
            Diagnostics::new()
        }
        Ok(Some(Err(LifecycleError::InstallFailed { status, .. }))) => failed(format!(
            "{TYPE_NAME}: node {hostname} stopped in {} after `{word}`: {}",
            status.status, status.message
        )),
        Ok(Some(Err(e))) => failed(format!("{TYPE_NAME}: node {hostname}: {e}.")),
        Ok(None) => failed(format!(
            "{TYPE_NAME}: stopped by Terraform while node {hostname} came up ({last}); the \
             power operation was sent, so the node goes on booting."
        )),
        Err(_) => failed(format!(
            "{TYPE_NAME}: node {hostname} was not UP within {} minutes of `{word}` (last \
             seen {last}).",
            UP_WITHIN.as_secs() / 60
        )),
    }
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
        let Some(hostname) = config.get("hostname").as_str() else {
            return Diagnostics::new();
        };
        let api: Arc<dyn BcmApi> = match self.0.connect(ctx) {
            Ok(api) => api,
            Err(diagnostics) => return diagnostics,
        };
        match find(api.as_ref(), hostname).await {
            Ok(d) => guard(&d, config),
            Err(diags) => diags,
        }
    }

    async fn invoke(
        &self,
        ctx: &Context,
        config: Value,
        progress: ProgressSink<'_>,
    ) -> Diagnostics {
        match self.0.connect(ctx) {
            Ok(api) => run(api.as_ref(), ctx, &config, progress).await,
            Err(diagnostics) => diagnostics,
        }
    }
}
