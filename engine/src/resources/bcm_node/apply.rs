//! Create, update and destroy: claiming, provisioning, wiping and releasing the node.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    config::NodeConfig,
    model::{Desired, fill_observed},
    plan::REMOTE_ATTRIBUTES,
    schema::{DEFAULT_WIPE_ON_DESTROY, GPU_COUNT, GPU_PRODUCT, IP, MAC, RACK, STATUS},
};
use crate::{
    apply::{self, KindError, Machine, Step, Stopped, bounded, failed, local_update, run_steps},
    backends::bcm::{
        BcmApi, BcmError, Device, DeviceStatus, PowerOp,
        lifecycle::{LifecycleError, Progress, boot, release_node, sysinfo_of, wait_up},
    },
    context::Context,
    kinds::ApplyResponse,
    timeouts::{self, Operation, Timeouts},
    value::Value,
};

/// A BCM node's own reasons for a step of apply, read or import to stop.
#[derive(Debug, thiserror::Error)]
pub(super) enum NodeError {
    /// A BCM call failed.
    #[error(transparent)]
    Bcm(BcmError),
    /// The install stopped in a failure state.
    #[error("node stopped in {}", .0.status)]
    InstallFailed(DeviceStatus),
}

impl KindError for NodeError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str = "The node stays recorded in state.";

    fn detail(&self, what: &str, hostname: &str, doing: &str) -> String {
        match self {
            NodeError::Bcm(e) if e.is_permission_denied() => format!(
                "{what}: {e}. The BCM profile in use may not make this change; use a client \
                 certificate of a profile that may (for example admin)."
            ),
            NodeError::Bcm(e) => format!("{what}: {e}."),
            NodeError::InstallFailed(s) => format!(
                "{what}: node {hostname} stopped in {} while {doing}{}. The node stays \
                 recorded in state; fix the cause (see the node's provisioning log on the head \
                 node) and apply again.",
                s.status,
                if s.message.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.message)
                }
            ),
        }
    }

    fn timed_out(
        what: &str,
        hostname: &str,
        doing: &str,
        op: Operation,
        waited: Duration,
    ) -> String {
        format!(
            "{what}: node {hostname} was not UP after {} while {doing} (the {} timeout). \
             Raise timeouts.{} if installs take longer; the node stays recorded in state.",
            timeouts::render(waited),
            op.name(),
            op.name()
        )
    }
}

/// Why a step of apply, read or import stopped.
pub(super) type StepError = apply::StepError<NodeError>;

impl From<BcmError> for StepError {
    fn from(e: BcmError) -> StepError {
        StepError::Kind(NodeError::Bcm(e))
    }
}

impl From<LifecycleError> for StepError {
    fn from(e: LifecycleError) -> StepError {
        match e {
            LifecycleError::Bcm(e) => StepError::Kind(NodeError::Bcm(e)),
            LifecycleError::InstallFailed { status, .. } => {
                StepError::Kind(NodeError::InstallFailed(status))
            }
            LifecycleError::Conflict(m) => StepError::Conflict(m),
        }
    }
}

/// The uuids of the category and image a node should have.
#[derive(Debug, Clone)]
pub(super) struct Refs {
    pub(super) category: String,
    pub(super) image: Option<String>,
}

pub(super) async fn resolve_refs(api: &dyn BcmApi, want: &Desired) -> Result<Refs, StepError> {
    let category = api.category_named(&want.category).await?.ok_or_else(|| {
        StepError::Conflict(format!(
            "BCM has no category named {:?}. List them with `cmsh -c \"category list\"`.",
            want.category
        ))
    })?;
    let image = match &want.software_image {
        None => None,
        Some(name) => Some(
            api.software_image_named(name)
                .await?
                .ok_or_else(|| {
                    StepError::Conflict(format!(
                        "BCM has no software image named {name:?}. List them with `cmsh -c \
                         \"softwareimage list\"`."
                    ))
                })?
                .uuid,
        ),
    };
    Ok(Refs {
        category: category.uuid,
        image,
    })
}

/// The state for what apply has learned so far (`p`): the planned state with what BCM showed.
pub(super) fn state_of(p: &Progress, planned: &Value) -> Value {
    let mut s = planned.clone();
    if let Some(d) = &p.device {
        fill_observed(&mut s, d, p.status.as_ref(), p.sysinfo.as_ref());
    }
    s.with_unknowns_nulled()
}

/// The state to keep when an update or destroy stopped: `prior`, with the last status seen.
fn prior_with_status(prior: &Value, p: &Progress) -> Value {
    let mut state = prior.clone();
    if let Some(s) = &p.status {
        state.set_attr(STATUS, Value::string(s.status.clone()));
    }
    state
}

/// The create's steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CreateStep {
    /// Read the node, resolve names, claim (or adopt) it.
    Claim,
    /// Power it on (or off).
    Power,
    /// Wait for UP.
    Wait { booting: bool },
    /// Nothing left to do.
    Done,
}

impl Step for CreateStep {
    const DONE: Self = CreateStep::Done;
    fn doing(self) -> &'static str {
        match self {
            CreateStep::Claim => "claiming the node",
            CreateStep::Power => "powering the node",
            CreateStep::Wait { .. } => "waiting for the node to be provisioned and UP",
            CreateStep::Done => "finishing",
        }
    }
}

/// A create as a state machine: the node to reach, what is done so far, and whether the
/// claim changed the node (which then boots into its new settings).
struct Creating<'a> {
    api: &'a dyn BcmApi,
    want: &'a Desired,
    p: Progress,
    changed: bool,
}

#[async_trait]
impl Machine for Creating<'_> {
    type Step = CreateStep;
    type Error = NodeError;
    async fn step(&mut self, step: CreateStep) -> Result<CreateStep, StepError> {
        create_step(self.api, self.want, step, &mut self.p, &mut self.changed).await
    }
}

/// The node as `want` has it, from `d` as read (whole object, same revision).
pub(super) fn desired_device(d: &Device, want: &Desired, refs: &Refs) -> Device {
    let mut n = d.clone();
    n.category = Some(refs.category.clone());
    n.set_image(refs.image.as_deref());
    n.install_mode = Some(want.install_mode.clone());
    n.set_tenant(Some(&want.tenant));
    n
}

pub(super) async fn create_step(
    api: &dyn BcmApi,
    want: &Desired,
    step: CreateStep,
    p: &mut Progress,
    changed: &mut bool,
) -> Result<CreateStep, StepError> {
    match step {
        CreateStep::Claim => {
            let refs = resolve_refs(api, want).await?;
            let Some(d) = api.device_named(&want.hostname).await? else {
                return Err(StepError::Conflict(format!(
                    "BCM has no node named {:?}.",
                    want.hostname
                )));
            };
            if let Some(t) = d.releasing() {
                return Err(StepError::Conflict(format!(
                    "node {} is still being wiped after tenant {t:?} released it; it can be \
                     claimed once the wipe has finished.",
                    want.hostname
                )));
            }
            match d.tenant() {
                Some(t) if t != want.tenant => {
                    return Err(StepError::Conflict(format!(
                        "node {} is held by tenant {t:?}, not {:?}; it cannot be claimed until \
                         that tenant releases it.",
                        want.hostname, want.tenant
                    )));
                }
                _ => {}
            }
            let n = desired_device(&d, want, &refs);
            if n != d {
                api.update_device(&n).await?;
                *changed = true;
            } else {
                tracing::info!(hostname = %want.hostname, "adopting a node this tenant already holds");
            }
            let uuid = n.uuid.clone();
            // Held from here on (in state whatever happens next); then its GPUs.
            p.device = Some(n);
            p.sysinfo = sysinfo_of(api, &uuid).await?;
            Ok(CreateStep::Power)
        }
        CreateStep::Power => {
            let Some(d) = p.device.clone() else {
                return Ok(CreateStep::Claim);
            };
            let Some(s) = api.status(&d.uuid).await? else {
                return Err(StepError::Conflict(format!(
                    "node {} has no status in BCM.",
                    d.hostname
                )));
            };
            p.status = Some(s.clone());
            if !want.power_on {
                if s.is_on() {
                    api.power(
                        std::slice::from_ref(&d.uuid),
                        PowerOp::Off,
                        &format!("node {}", d.hostname),
                    )
                    .await?;
                    p.status = api.status(&d.uuid).await?;
                }
                return Ok(CreateStep::Done);
            }
            // A node that already held this tenant's settings and is up needs no boot; one
            // just claimed does, to come up with its new image.
            let booting = boot(api, &d, &s, *changed || s.is_failed()).await?;
            Ok(CreateStep::Wait { booting })
        }
        CreateStep::Wait { booting } => {
            let Some(d) = p.device.clone() else {
                return Ok(CreateStep::Claim);
            };
            wait_up(api, &d.uuid, &d.hostname, booting, p).await?;
            // The address is assigned while provisioning.
            if let Some(fresh) = api.device(&d.uuid).await? {
                p.device = Some(fresh);
            }
            Ok(CreateStep::Done)
        }
        CreateStep::Done => Ok(CreateStep::Done),
    }
}

pub(super) async fn apply_create(
    api: &dyn BcmApi,
    ctx: &Context,
    planned: &Value,
) -> ApplyResponse {
    let want = match Desired::from_config(&NodeConfig::decode(planned)) {
        Ok(w) => w,
        Err(d) => return ApplyResponse::refused(Value::Null, d),
    };
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut creating = Creating {
        api,
        want: &want,
        p: Progress::default(),
        changed: false,
    };
    let steps = run_steps(
        ctx,
        Operation::Create,
        started,
        started + t.create,
        CreateStep::Claim,
        &mut creating,
    )
    .await;
    let p = creating.p;
    if let Err(Stopped { error, doing }) = steps {
        let state = if p.device.is_some() {
            state_of(&p, planned)
        } else {
            Value::Null
        };
        return failed(
            "BCM Node Create Failed",
            &want.hostname,
            doing,
            &error,
            state,
        );
    }
    ApplyResponse::done(state_of(&p, planned))
}

/// Reads the node in `prior` and checks it is still held by the tenant.
pub(super) async fn held_node(
    api: &dyn BcmApi,
    uuid: &str,
    want: &Desired,
) -> Result<Device, StepError> {
    let d = api.device(uuid).await?;
    match d {
        Some(d) if d.tenant() == Some(want.tenant.as_str()) => Ok(d),
        Some(d) => Err(StepError::Conflict(format!(
            "node {} is no longer held by tenant {:?} (it is {}). Run `terraform apply` \
             again: the refresh will notice and claim it anew.",
            d.hostname,
            want.tenant,
            d.tenant()
                .map_or_else(|| "free".to_owned(), |t| format!("held by {t:?}"))
        ))),
        None => Err(StepError::Conflict(format!(
            "node {} ({uuid}) no longer exists in BCM.",
            want.hostname
        ))),
    }
}

pub(super) async fn update_node(
    api: &dyn BcmApi,
    prior: &NodeConfig,
    want: &Desired,
    p: &mut Progress,
) -> Result<(), StepError> {
    let uuid = prior.id.value().cloned().unwrap_or_default();
    let d = held_node(api, &uuid, want).await?;
    let image_changed = prior.software_image.value() != want.software_image.as_ref();
    let settings_changed = image_changed
        || prior.category.value() != Some(&want.category)
        || prior.install_mode.value() != Some(&want.install_mode);
    let mut n = d.clone();
    if settings_changed {
        let refs = resolve_refs(api, want).await?;
        n = desired_device(&d, want, &refs);
        if image_changed && want.power_on {
            // Reprovision: the next boot syncs the new image.
            let mode = if want.install_mode == "FULL" {
                "FULL"
            } else {
                "AUTO"
            };
            n.next_boot_install_mode = Some(mode.to_owned());
        }
        if n != d {
            api.update_device(&n).await?;
        }
    }
    p.device = Some(n.clone());
    let Some(s) = api.status(&uuid).await? else {
        return Err(StepError::Conflict(format!(
            "node {} has no status in BCM.",
            want.hostname
        )));
    };
    p.status = Some(s.clone());
    let what = format!("node {}", want.hostname);
    if !want.power_on {
        if s.is_on() {
            api.power(std::slice::from_ref(&uuid), PowerOp::Off, &what)
                .await?;
            p.status = api.status(&uuid).await?;
        }
        return Ok(());
    }
    let booting = boot(api, &n, &s, image_changed || s.is_failed()).await?;
    wait_up(api, &uuid, &want.hostname, booting, p).await?;
    if booting && let Some(fresh) = api.device(&uuid).await? {
        p.device = Some(fresh);
    }
    Ok(())
}

pub(super) async fn apply_update(
    api: &dyn BcmApi,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let recorded = NodeConfig::decode(prior);
    if recorded.id.value().is_none() {
        return apply_create(api, ctx, planned).await;
    }
    let want = match Desired::from_config(&NodeConfig::decode(planned)) {
        Ok(w) => w,
        Err(d) => return ApplyResponse::refused(prior.clone(), d),
    };
    // Only local settings changed (wipe_on_destroy, timeouts): nothing to tell BCM.
    if let Some(r) = local_update(prior, planned, REMOTE_ATTRIBUTES, &[STATUS, IP]) {
        return r;
    }
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut p = Progress::default();
    let r = bounded(
        ctx,
        Operation::Update,
        started,
        started + t.update,
        update_node(api, &recorded, &want, &mut p),
    )
    .await;
    match r {
        Ok(()) => {
            let mut s = state_of(&p, planned);
            // Hardware facts were promised as they were.
            for a in [MAC, RACK, GPU_PRODUCT, GPU_COUNT] {
                s.set_attr(a, prior.get(a).clone());
            }
            ApplyResponse::done(s)
        }
        Err(e) => {
            // BCM may hold the old or the new settings: keep the prior state, so the next plan
            // shows what is still to do.
            failed(
                "BCM Node Update Failed",
                &want.hostname,
                "updating the node",
                &e,
                prior_with_status(prior, &p),
            )
        }
    }
}

pub(super) async fn apply_delete(api: &dyn BcmApi, ctx: &Context, prior: &Value) -> ApplyResponse {
    let recorded = NodeConfig::decode(prior);
    let hostname = recorded.hostname.value().cloned().unwrap_or_default();
    let Some(uuid) = recorded.id.value() else {
        return ApplyResponse::done(Value::Null);
    };
    let tenant = recorded.tenant.value().cloned().unwrap_or_default();
    let wipe = recorded
        .wipe_on_destroy
        .into_value()
        .unwrap_or(DEFAULT_WIPE_ON_DESTROY);
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut p = Progress::default();
    let r = bounded(ctx, Operation::Delete, started, started + t.delete, async {
        Ok::<_, StepError>(release_node(api, uuid, &tenant, wipe, &mut p).await?)
    })
    .await;
    match r {
        Ok(()) => ApplyResponse::done(Value::Null),
        Err(e) => failed(
            "BCM Node Destroy Failed",
            &hostname,
            if wipe {
                "wiping and releasing the node"
            } else {
                "releasing the node"
            },
            &e,
            prior_with_status(prior, &p),
        ),
    }
}
