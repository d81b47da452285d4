//! What the BCM node actions share: finding the node, refusing a node a tenant holds unless
//! forced, and waiting for a boot to come `UP` while saying so.

use std::time::Duration;

use tokio::time::Instant;

use crate::{
    backends::bcm::{
        BcmApi, BcmBackend, Device,
        lifecycle::{LifecycleError, Progress, wait_up},
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::ProgressSink,
    path::AttrPath,
    schema::Attribute,
    value::{Type, Value},
};

/// How long a boot may take to come up: a full install of a GPU server takes 5–10 minutes
/// on real hardware.
pub(super) const UP_WITHIN: Duration = Duration::from_secs(30 * 60);

/// The node named by `config`'s `hostname`, or the diagnostic on `hostname` that says BCM
/// has none of that name. `failed` is the summary of the action's errors.
pub(super) async fn find(
    api: &dyn BcmApi,
    action: &str,
    failed: &str,
    hostname: &str,
) -> Result<Device, Diagnostics> {
    match api.device_named(hostname).await {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(Diagnostic::error(
            "Unknown BCM Node",
            format!("hostname: BCM has no node named {hostname:?}."),
        )
        .with_path(AttrPath::attr("hostname"))
        .into()),
        Err(e) => Err(Diagnostic::error(
            failed,
            format!("{action}: reading node {hostname}: {e}."),
        )
        .into()),
    }
}

/// The `hostname` attribute every BCM node action takes.
pub(super) fn hostname_attribute() -> Attribute {
    Attribute::required("hostname", Type::String)
        .describe("The node's hostname in BCM, e.g. `gpu-a1-01`.")
}

/// The `force` attribute that lets a BCM node action act on a node a tenant holds.
pub(super) fn force_attribute() -> Attribute {
    Attribute::optional("force", Type::Bool).describe(
        "Act also on a node a tenant holds, or one being wiped after a release; without it \
         such a node is refused, naming the tenant.",
    )
}

/// What the BCM node actions check when the plan is made: the node exists and, unless
/// forced, no tenant holds it (`what` as for [`guard`]). Nothing is checked before the
/// hostname is known.
pub(super) async fn plan_check(
    backend: &dyn BcmBackend,
    ctx: &Context,
    config: &Value,
    (action, failed): (&str, &str),
    what: &str,
) -> Diagnostics {
    let Some(hostname) = config.get("hostname").as_str() else {
        return Diagnostics::new();
    };
    let api = match backend.connect(ctx, action).await {
        Ok(api) => api,
        Err(diagnostics) => return diagnostics,
    };
    match find(api.as_ref(), action, failed, hostname).await {
        Ok(d) => guard(&d, config, what),
        Err(diags) => diags,
    }
}

/// The refusal for a node someone holds, unless `force` is set (or not yet known). `what`
/// says what the action would do, e.g. "`reset` would stop what runs on it".
pub(super) fn guard(d: &Device, config: &Value, what: &str) -> Diagnostics {
    let force = config.get("force");
    if force.as_bool() == Some(true) || force.is_unknown() {
        return Diagnostics::new();
    }
    let (tenant, how) = match (d.tenant(), d.releasing()) {
        (Some(t), _) => (t, "holds it"),
        (None, Some(t)) => (t, "released it and its wipe has not finished"),
        (None, None) => return Diagnostics::new(),
    };
    Diagnostic::error(
        "BCM Node Held By A Tenant",
        format!(
            "hostname: node {} is not free: tenant {tenant:?} {how}, and {what}. Set \
             `force = true` to act anyway, or change the tenant's gpufleet_bcm_node instead.",
            d.hostname
        ),
    )
    .with_path(AttrPath::attr("hostname"))
    .into()
}

/// Waits until node `d` is `UP` after `step` (a boot was started when `booting`), within
/// [`UP_WITHIN`] and Terraform's stop request, reporting the wait and its end.
pub(super) async fn wait_until_up(
    api: &dyn BcmApi,
    ctx: &Context,
    (action, failed): (&str, &str),
    d: &Device,
    (step, booting): (&str, bool),
    progress: ProgressSink<'_>,
) -> Diagnostics {
    let hostname = d.hostname.as_str();
    let started = Instant::now();
    progress(format!("node {hostname}: waiting for UP"));
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
    let error = |detail: String| Diagnostic::error(failed, detail).into();
    match waited {
        Ok(Some(Ok(()))) => {
            progress(format!(
                "node {hostname} is UP after {}s",
                started.elapsed().as_secs()
            ));
            Diagnostics::new()
        }
        Ok(Some(Err(LifecycleError::InstallFailed { status, .. }))) => error(format!(
            "{action}: node {hostname} stopped in {} after `{step}`: {}",
            status.status, status.message
        )),
        Ok(Some(Err(e))) => error(format!("{action}: node {hostname}: {e}.")),
        Ok(None) => error(format!(
            "{action}: stopped by Terraform while node {hostname} came up ({last}); the \
             `{step}` was sent, so the node goes on booting."
        )),
        Err(_) => error(format!(
            "{action}: node {hostname} was not UP within {} minutes of `{step}` (last seen \
             {last}).",
            UP_WITHIN.as_secs() / 60
        )),
    }
}
