//! Create, update and destroy: claiming, provisioning, wiping and releasing the node.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, FREE_POOL, TYPE_NAME,
    model::{Desired, fill_observed, sysinfo_of},
    plan::REMOTE_ATTRIBUTES,
};
use crate::{
    apply::{self, KindError, bounded, failed},
    backends::bcm::{
        BcmApi, BcmError, Category, Device, DeviceStatus, PowerOp, SysInfo, disk_setup,
        same_block_device,
    },
    context::Context,
    diag::Diagnostics,
    kinds::ApplyResponse,
    resources::gpu_node_pool::bcm::POOL_KEY,
    timeouts::{self, Operation, Timeouts},
    value::Value,
};

/// The first wait between status polls; it grows to [`POLL_MAX`].
pub(super) const POLL_FIRST: Duration = Duration::from_millis(200);

/// The longest wait between status polls.
pub(super) const POLL_MAX: Duration = Duration::from_secs(3);

/// After a boot was started, this many `UP` answers in a row count as up even without
/// seeing the node go down first (the boot may have finished between two polls).
pub(super) const UP_CONFIRMATIONS: u32 = 3;

/// The wait after poll number `n` (0-based): ×1.5 each time, capped.
pub(super) fn poll_delay(n: u32) -> Duration {
    let grown = POLL_FIRST.as_secs_f64() * 1.5f64.powi(i32::try_from(n.min(20)).unwrap_or(20));
    Duration::from_secs_f64(grown).min(POLL_MAX)
}

/// A BCM node's own reasons for a step of apply, read or import to stop.
#[derive(Debug)]
pub(crate) enum NodeError {
    /// A BCM call failed.
    Bcm(BcmError),
    /// The install stopped in a failure state.
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
pub(crate) type StepError = apply::StepError<NodeError>;

impl From<BcmError> for StepError {
    fn from(e: BcmError) -> StepError {
        StepError::Kind(NodeError::Bcm(e))
    }
}

/// The uuids of the category and image a node should have.
#[derive(Debug, Clone)]
pub(super) struct Refs {
    pub(super) category: String,
    pub(super) image: Option<String>,
}

pub(super) async fn resolve_refs(api: &dyn BcmApi, want: &Desired) -> Result<Refs, StepError> {
    let category = api.category(&want.category).await?.ok_or_else(|| {
        StepError::Conflict(format!(
            "BCM has no category named {:?}. List them with `cmsh -c \"category list\"`.",
            want.category
        ))
    })?;
    let image = match &want.software_image {
        None => None,
        Some(name) => Some(
            api.software_image(name)
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

/// What apply has learned so far; becomes the (partial) state.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The node, once it is held (claimed or adopted).
    pub(crate) device: Option<Device>,
    /// The last status seen.
    pub(crate) status: Option<DeviceStatus>,
    /// The node's system information (GPUs, disks), once read.
    pub(crate) sysinfo: Option<SysInfo>,
}

impl Progress {
    pub(super) fn state(&self, planned: &Value) -> Value {
        let mut s = planned.clone();
        if let Some(d) = &self.device {
            fill_observed(&mut s, d, self.status.as_ref(), self.sysinfo.as_ref());
        }
        s.with_unknowns_nulled()
    }
}

/// Polls the node's status until it is `UP`. After a boot was started (`booting`), an `UP`
/// counts only once the node was seen down, or after [`UP_CONFIRMATIONS`] in a row.
pub(crate) async fn wait_up(
    api: &dyn BcmApi,
    uuid: &str,
    hostname: &str,
    booting: bool,
    p: &mut Progress,
) -> Result<(), StepError> {
    let mut seen_down = !booting;
    let mut ups = 0;
    for n in 0.. {
        let Some(s) = api.status(uuid).await? else {
            return Err(StepError::Conflict(format!(
                "node {hostname} ({uuid}) has no status in BCM: was it removed?"
            )));
        };
        let (up, failed) = (s.is_up(), s.is_failed());
        p.status = Some(s.clone());
        if failed {
            return Err(StepError::Kind(NodeError::InstallFailed(s)));
        }
        if up {
            ups += 1;
            if seen_down || ups >= UP_CONFIRMATIONS {
                return Ok(());
            }
        } else {
            seen_down = true;
            ups = 0;
        }
        tokio::time::sleep(poll_delay(n)).await;
    }
    Ok(())
}

/// Switches the node on (or resets it when it already runs) so it boots; returns whether a
/// boot was started. A node already on its way up is left alone.
pub(crate) async fn boot(
    api: &dyn BcmApi,
    device: &Device,
    status: &DeviceStatus,
    fresh: bool,
) -> Result<bool, StepError> {
    let uuids = [device.uuid.clone()];
    let what = format!("node {}", device.hostname);
    let op = if !status.is_on() {
        PowerOp::On
    } else if status.is_booting() {
        return Ok(true);
    } else if status.is_up() && !fresh {
        return Ok(false);
    } else {
        PowerOp::Reset
    };
    let r = api.power(&uuids, op, &what).await?;
    Ok(r.count > 0 || op == PowerOp::Reset)
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
            let Some(d) = api.device(&want.hostname).await? else {
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
    let want = match Desired::from_value(planned) {
        Ok(w) => w,
        Err(d) => {
            return ApplyResponse {
                new_state: Value::Null,
                diagnostics: d,
            };
        }
    };
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let deadline = started + t.create;
    let mut p = Progress::default();
    let mut changed = false;
    let mut step = CreateStep::Claim;
    while step != CreateStep::Done {
        let doing = match step {
            CreateStep::Claim => "claiming the node",
            CreateStep::Power => "powering the node",
            CreateStep::Wait { .. } => "waiting for the node to be provisioned and UP",
            CreateStep::Done => "finishing",
        };
        let r = bounded(
            ctx,
            Operation::Create,
            started,
            deadline,
            create_step(api, &want, step, &mut p, &mut changed),
        )
        .await;
        match r {
            Ok(next) => step = next,
            Err(e) => {
                let state = if p.device.is_some() {
                    p.state(planned)
                } else {
                    Value::Null
                };
                return failed("BCM Node Create Failed", &want.hostname, doing, &e, state);
            }
        }
    }
    ApplyResponse {
        new_state: p.state(planned),
        diagnostics: Diagnostics::new(),
    }
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
    prior: &Value,
    want: &Desired,
    p: &mut Progress,
) -> Result<(), StepError> {
    let uuid = prior.get("id").as_str().unwrap_or_default().to_owned();
    let d = held_node(api, &uuid, want).await?;
    let image_changed = prior.get("software_image").as_str() != want.software_image.as_deref();
    let settings_changed = image_changed
        || prior.get("category").as_str() != Some(want.category.as_str())
        || prior.get("install_mode").as_str() != Some(want.install_mode.as_str());
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
    if prior.get("id").as_str().is_none() {
        return apply_create(api, ctx, planned).await;
    }
    let want = match Desired::from_value(planned) {
        Ok(w) => w,
        Err(d) => {
            return ApplyResponse {
                new_state: prior.clone(),
                diagnostics: d,
            };
        }
    };
    let remote_same = REMOTE_ATTRIBUTES
        .iter()
        .all(|a| planned.get(a) == prior.get(a));
    if remote_same {
        // Only local settings changed (wipe_on_destroy, timeouts): nothing to tell BCM.
        let mut s = planned.clone();
        for a in ["status", "ip"] {
            if s.get(a).is_unknown() {
                s.set_attr(a, prior.get(a).clone());
            }
        }
        return ApplyResponse {
            new_state: s.with_unknowns_nulled(),
            diagnostics: Diagnostics::new(),
        };
    }
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut p = Progress::default();
    let r = bounded(
        ctx,
        Operation::Update,
        started,
        started + t.update,
        update_node(api, prior, &want, &mut p),
    )
    .await;
    match r {
        Ok(()) => {
            let mut s = p.state(planned);
            // Hardware facts were promised as they were.
            for a in ["mac", "rack", "gpu_product", "gpu_count"] {
                s.set_attr(a, prior.get(a).clone());
            }
            ApplyResponse {
                new_state: s,
                diagnostics: Diagnostics::new(),
            }
        }
        Err(e) => {
            // BCM may hold the old or the new settings: keep the prior state, so the next plan
            // shows what is still to do.
            let mut state = prior.clone();
            if let Some(s) = &p.status {
                state.set_attr("status", Value::string(s.status.clone()));
            }
            failed(
                "BCM Node Update Failed",
                &want.hostname,
                "updating the node",
                &e,
                state,
            )
        }
    }
}

/// The block devices a wipe of `d` clears: every device of the node's own disk setup, or,
/// when it has none, of its category's and of the free pool's (the layouts the tenant's data
/// was laid out with, and the one the wiping install lays out).
pub(super) async fn wipe_devices(
    api: &dyn BcmApi,
    d: &Device,
    pool: &Category,
) -> Result<Vec<String>, StepError> {
    let mut layouts: Vec<(String, String)> = Vec::new();
    if let Some(xml) = d.disk_setup() {
        layouts.push((format!("node {}", d.hostname), xml.to_owned()));
    } else {
        let current = match d.category.as_deref() {
            Some(c) if c != pool.uuid => api.category(c).await?,
            _ => None,
        };
        for c in current.iter().chain(std::iter::once(pool)) {
            if let Some(xml) = c.disk_setup() {
                layouts.push((format!("category {}", c.name), xml.to_owned()));
            }
        }
    }
    let mut devices: Vec<String> = Vec::new();
    for (whose, xml) in &layouts {
        let named = disk_setup::block_devices(xml).map_err(|e| {
            StepError::Conflict(format!(
                "cannot read the disk setup of {whose}: {e}. The node was not released; fix \
                 the disk setup and destroy again."
            ))
        })?;
        for dev in named {
            if !devices.iter().any(|x| same_block_device(x, &dev)) {
                devices.push(dev);
            }
        }
    }
    if devices.is_empty() {
        return Err(StepError::Conflict(format!(
            "BCM has no disk setup naming a block device for node {} (neither the node nor \
             its category has one), so gpufleet cannot tell which disks hold the tenant's \
             data. The node was not released; give the node or its category a disk setup and \
             destroy again.",
            d.hostname
        )));
    }
    Ok(devices)
}

/// Checks that the wiping boot of `done` cleared `cleared` (see the module's Destroy section):
/// the node-installer consumed the one-shot FULL install and device list, and every block
/// device the node reports was among those cleared.
pub(super) fn check_wiped(
    done: &Device,
    cleared: &[String],
    info: Option<&SysInfo>,
    tenant: &str,
) -> Result<(), String> {
    let kept = format!(
        "The node stays out of the free pool (still marked as being wiped after tenant \
         {tenant:?}) and in state"
    );
    if done.next_boot_install_mode.is_some() || !done.block_devices_cleared_on_next_boot.is_empty()
    {
        return Err(format!(
            "node {} came back up, but BCM still has its one-shot FULL install and block \
             devices to clear pending (nextBootInstallMode {:?}, blockDevicesClearedOnNextBoot \
             {:?}): the node-installer did not run, so its disks were not cleared. {kept}; \
             destroy again to repeat the wipe.",
            done.hostname,
            done.next_boot_install_mode.as_deref().unwrap_or(""),
            done.block_devices_cleared_on_next_boot,
        ));
    }
    let Some(info) = info else {
        return Err(format!(
            "BCM has no system information for node {}, so gpufleet cannot check that the \
             wipe cleared all of its disks. {kept}; destroy again once the node reports its \
             hardware.",
            done.hostname
        ));
    };
    let missed: Vec<&str> = info
        .disks
        .iter()
        .map(|disk| disk.name.as_str())
        .filter(|disk| !cleared.iter().any(|c| same_block_device(c, disk)))
        .collect();
    if !missed.is_empty() {
        return Err(format!(
            "node {} has block devices that its disk setup does not name, so the wipe did not \
             clear them and they may still hold tenant {tenant:?}'s data: {}. {kept}; add them \
             to the disk setup (of the node or its category) and destroy again.",
            done.hostname,
            missed.join(", ")
        ));
    }
    Ok(())
}

/// Releases a node `tenant` holds back to the free pool; with `wipe`, through a wiping FULL
/// reinstall that is then verified (see the module's Destroy section). Resumes a wipe an
/// earlier call left unfinished.
pub(crate) async fn release_node(
    api: &dyn BcmApi,
    uuid: &str,
    tenant: &str,
    wipe: bool,
    p: &mut Progress,
) -> Result<(), StepError> {
    let Some(d) = api.device(uuid).await? else {
        return Ok(());
    };
    let resuming = wipe && d.releasing() == Some(tenant);
    if d.tenant() != Some(tenant) && !resuming {
        // Released already (by an earlier, interrupted destroy or by someone else).
        return Ok(());
    }
    let what = format!("node {}", d.hostname);
    let pool = api.category(FREE_POOL).await?.ok_or_else(|| {
        StepError::Conflict(format!(
            "BCM has no category {FREE_POOL:?} to return the node to."
        ))
    })?;
    // Known before anything changes, so a node whose disks cannot be told stays held.
    let devices = if wipe {
        wipe_devices(api, &d, &pool).await?
    } else {
        Vec::new()
    };
    let mut n = d.clone();
    if !resuming {
        n.category = Some(pool.uuid.clone());
        n.set_image(None);
        n.install_mode = None;
        n.set_tenant(None);
        if !wipe {
            n.extra_values.remove(POOL_KEY);
        }
    }
    if wipe {
        // Until the wiping boot has finished, the node carries the tenant whose data is on
        // it, so a failed or interrupted wipe never leaves it looking free.
        n.set_releasing(Some(tenant));
        n.block_devices_cleared_on_next_boot.clone_from(&devices);
        n.next_boot_install_mode = Some("FULL".to_owned());
    }
    if n != d {
        api.update_device(&n).await?;
    }
    p.device = Some(n.clone());
    if !wipe {
        return Ok(());
    }
    let Some(s) = api.status(uuid).await? else {
        return Err(StepError::Conflict(format!(
            "node {} has no status in BCM.",
            d.hostname
        )));
    };
    let op = if s.is_on() {
        PowerOp::Reset
    } else {
        PowerOp::On
    };
    api.power(&[uuid.to_owned()], op, &what).await?;
    wait_up(api, uuid, &d.hostname, true, p).await?;
    // Re-read for what the boot consumed (and the revision it left behind), then check the
    // disks against what the node reports before it may count as free.
    let Some(mut done) = api.device(uuid).await? else {
        return Ok(());
    };
    let info = sysinfo_of(api, uuid).await?;
    check_wiped(&done, &devices, info.as_ref(), tenant).map_err(StepError::Conflict)?;
    // Idle power goes back before the mark comes off: once unmarked the node is free and no
    // later destroy would touch it, so an interruption in between would leave it running.
    if d.idles_off() {
        api.power(&[uuid.to_owned()], PowerOp::Off, &what).await?;
    }
    done.set_releasing(None);
    // A node pool's mark stays until the wipe is done, so the pool can resume it.
    done.extra_values.remove(POOL_KEY);
    api.update_device(&done).await?;
    p.device = Some(done);
    Ok(())
}

pub(super) async fn apply_delete(api: &dyn BcmApi, ctx: &Context, prior: &Value) -> ApplyResponse {
    let hostname = prior
        .get("hostname")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Some(uuid) = prior.get("id").as_str().map(str::to_owned) else {
        return ApplyResponse {
            new_state: Value::Null,
            diagnostics: Diagnostics::new(),
        };
    };
    let tenant = prior.get("tenant").as_str().unwrap_or_default().to_owned();
    let wipe = prior.get("wipe_on_destroy").as_bool().unwrap_or(true);
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let mut p = Progress::default();
    let r = bounded(
        ctx,
        Operation::Delete,
        started,
        started + t.delete,
        release_node(api, &uuid, &tenant, wipe, &mut p),
    )
    .await;
    match r {
        Ok(()) => ApplyResponse {
            new_state: Value::Null,
            diagnostics: Diagnostics::new(),
        },
        Err(e) => {
            let mut state = prior.clone();
            if let Some(s) = &p.status {
                state.set_attr("status", Value::string(s.status.clone()));
            }
            failed(
                "BCM Node Destroy Failed",
                &hostname,
                if wipe {
                    "wiping and releasing the node"
                } else {
                    "releasing the node"
                },
                &e,
                state,
            )
        }
    }
}
