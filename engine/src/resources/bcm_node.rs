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
use tokio::time::Instant;

use crate::{
    apply::{self, KindError, bounded, failed},
    backends::bcm::{
        BcmApi, BcmBackend, BcmError, Category, Device, DeviceStatus, FromSettings, PowerOp,
        SysInfo, disk_setup, same_block_device,
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    path::AttrPath,
    resources::gpu_node_pool::bcm::POOL_KEY,
    schema::{Attribute, Block, Schema},
    timeouts::{self, Operation, Timeouts},
    validate::OneOf,
    value::{Type, Value},
};

/// The resource type name.
pub const TYPE_NAME: &str = "gpufleet_bcm_node";

/// Default timeouts: a full install of a GPU server takes 5–10 minutes on real hardware.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(30 * 60),
    read: Duration::from_secs(2 * 60),
    update: Duration::from_secs(30 * 60),
    delete: Duration::from_secs(30 * 60),
};

/// The category released nodes go back to.
pub const FREE_POOL: &str = "free-pool";

/// The install modes a node may be given.
const INSTALL_MODES: &[&str] = &["AUTO", "FULL", "NOSYNC", "SKIP"];

/// The first wait between status polls; it grows to [`POLL_MAX`].
const POLL_FIRST: Duration = Duration::from_millis(200);

/// The longest wait between status polls.
const POLL_MAX: Duration = Duration::from_secs(3);

/// After a boot was started, this many `UP` answers in a row count as up even without
/// seeing the node go down first (the boot may have finished between two polls).
const UP_CONFIRMATIONS: u32 = 3;

/// The wait after poll number `n` (0-based): ×1.5 each time, capped.
fn poll_delay(n: u32) -> Duration {
    let grown = POLL_FIRST.as_secs_f64() * 1.5f64.powi(i32::try_from(n.min(20)).unwrap_or(20));
    Duration::from_secs_f64(grown).min(POLL_MAX)
}

// =============================================================================================
// Model

/// The `gpufleet_bcm_node` resource kind, over a [`BcmBackend`]. The registry uses
/// `BcmNode(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BcmNode<B = FromSettings>(pub B);

/// The desired node, from a planned value whose configuration is known.
#[derive(Debug, Clone)]
struct Desired {
    hostname: String,
    category: String,
    software_image: Option<String>,
    install_mode: String,
    power_on: bool,
    tenant: String,
}

impl Desired {
    fn from_value(v: &Value) -> Result<Desired, Diagnostics> {
        let mut d = Diagnostics::new();
        let mut text = |name: &str| -> String {
            if let Some(s) = v.get(name).as_str() {
                return s.to_owned();
            }
            d.error_at(
                AttrPath::attr(name),
                "Value Not Known At Apply",
                format!("{name} must be known to apply a {TYPE_NAME}."),
            );
            String::new()
        };
        let (hostname, category, tenant) = (text("hostname"), text("category"), text("tenant"));
        if d.has_error() {
            return Err(d);
        }
        Ok(Desired {
            hostname,
            category,
            tenant,
            software_image: v.get("software_image").as_str().map(str::to_owned),
            install_mode: v.get("install_mode").as_str().unwrap_or("AUTO").to_owned(),
            power_on: v.get("power").as_str() != Some("off"),
        })
    }
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

fn opt(s: Option<&str>) -> Value {
    s.map_or(Value::Null, Value::string)
}

/// The schema's spelling of a status record's power.
fn power_word(s: &DeviceStatus) -> &'static str {
    if s.is_on() { "on" } else { "off" }
}

/// The GPU product and count of a node's system information, as attribute values.
fn gpu_facts(info: Option<&SysInfo>) -> [(&'static str, Value); 2] {
    let product = info.and_then(SysInfo::gpu_product);
    let count = info
        .filter(|i| i.gpu_count() > 0)
        .and_then(|i| i64::try_from(i.gpu_count()).ok());
    [
        ("gpu_product", product.map_or(Value::Null, Value::string)),
        ("gpu_count", count.map_or(Value::Null, Value::int)),
    ]
}

/// The system information of node `uuid`, if cmdaemon has any.
async fn sysinfo_of(api: &dyn BcmApi, uuid: &str) -> Result<Option<SysInfo>, BcmError> {
    let all = api.sysinfo(&[uuid.to_owned()]).await?;
    Ok(all.into_iter().find(|i| i.device == uuid))
}

/// Fills the computed attributes from what BCM shows; hardware facts already recorded are
/// kept, as the plan promised them.
fn fill_observed(
    s: &mut Value,
    device: &Device,
    status: Option<&DeviceStatus>,
    info: Option<&SysInfo>,
) {
    s.set_attr("id", Value::string(device.uuid.clone()));
    let [product, count] = gpu_facts(info);
    let facts = [
        ("mac", opt(device.mac_address())),
        ("rack", opt(device.rack())),
        product,
        count,
    ];
    for (name, value) in facts {
        if s.get(name).is_unknown() || s.get(name).is_null() {
            s.set_attr(name, value);
        }
    }
    if s.get("ip").is_unknown() {
        s.set_attr("ip", opt(device.ip()));
    }
    if let Some(st) = status
        && s.get("status").is_unknown()
    {
        s.set_attr("status", Value::string(st.status.clone()));
    }
}

// =============================================================================================
// schema()

fn node_schema() -> Schema {
    Schema::new(
        Block::new(
            "A bare-metal GPU server in NVIDIA Base Command Manager, held by one tenant: \
             claimed from the free pool by hostname, given a category, a software image and an \
             install mode, powered on and provisioned until it is `UP`. On destroy the node's \
             disks are wiped by a FULL reinstall before it returns to the `free-pool` \
             category (see `wipe_on_destroy`). The holder is recorded on the device as \
             `extra_values.gpufleet_tenant`. Needs the provider's `bcm` block.",
        )
        .attr(
            Attribute::computed("id", Type::String)
                .use_state_for_unknown()
                .describe("The node's BCM uuid."),
        )
        .attr(
            Attribute::required("hostname", Type::String)
                .requires_replace()
                .describe(
                    "The node's hostname in BCM (the same server's Kubernetes node name). The \
                     node must be free or already held by `tenant`. Changing it replaces the \
                     resource: the old node is released and the new one claimed.",
                ),
        )
        .attr(Attribute::required("category", Type::String).describe(
            "Name of the BCM category the node joins while held, e.g. `gpu-compute`. Changes \
             in place, without a reboot.",
        ))
        .attr(
            Attribute::optional("software_image", Type::String).describe(
                "Name of the software image to provision, e.g. `ubuntu2404-cuda12.8`. When not \
             set, the node uses its category's image. Changing it reprovisions the node (a \
             reboot with an AUTO install, FULL when `install_mode` is FULL).",
            ),
        )
        .attr(
            Attribute::optional("install_mode", Type::String)
                .default("AUTO")
                .validate(OneOf::new(INSTALL_MODES))
                .describe(
                    "How the node's disks are provisioned at boot: `AUTO` (sync changes, \
                     repartition only when needed), `FULL` (repartition and sync everything), \
                     `NOSYNC` (keep the disks unless the layout is wrong) or `SKIP` (touch \
                     nothing). Changes in place; takes effect at the next boot.",
                ),
        )
        .attr(
            Attribute::optional("power", Type::String)
                .default("on")
                .validate(OneOf::new(&["on", "off"]))
                .describe(
                    "`on`: the node is powered on and provisioned, and apply waits until it is \
                     `UP`. `off`: the node is held but powered off.",
                ),
        )
        .attr(
            Attribute::required("tenant", Type::String)
                .requires_replace()
                .describe(
                    "The tenant holding the node, recorded on the device. A node held by \
                     another tenant cannot be claimed. Changing it replaces the resource, so \
                     the node is wiped between tenants.",
                ),
        )
        .attr(
            Attribute::optional("wipe_on_destroy", Type::Bool)
                .default(true)
                .describe(
                    "On destroy, clear every block device of the node's disk setup (its own, \
                     else its category's) with a FULL reinstall, and verify it (the installer \
                     ran, and every disk BCM reports for the node was cleared) before it \
                     returns to the free pool, so the next tenant finds none of this tenant's \
                     data. A wipe that fails the check fails the destroy and keeps the node \
                     out of the free pool. `false` only releases the node (faster, but the \
                     data stays on its disks).",
                ),
        )
        .attr(Attribute::computed("status", Type::String).describe(
            "The node's status in BCM: `UP`, `DOWN`, `BOOTING`, `INSTALLING`, \
             `INSTALLER_CALLINGINIT`, `INSTALLER_FAILED`, `INSTALLER_UNREACHABLE`, …",
        ))
        .attr(
            Attribute::computed("mac", Type::String)
                .use_state_for_unknown()
                .describe("The MAC address of the node's boot interface."),
        )
        .attr(
            Attribute::computed("ip", Type::String)
                .describe("The address of the node's boot interface; null while it has none."),
        )
        .attr(
            Attribute::computed("rack", Type::String)
                .use_state_for_unknown()
                .describe("The rack the node sits in."),
        )
        .attr(
            Attribute::computed("gpu_product", Type::String)
                .use_state_for_unknown()
                .describe(
                    "The node's GPU product as GPU feature discovery names it (the driver's \
                     name with blanks as dashes), from the GPUs BCM's system information \
                     reports for the node, e.g. `NVIDIA-B200`. Null while BCM has no system \
                     information for it.",
                ),
        )
        .attr(
            Attribute::computed("gpu_count", Type::Number)
                .use_state_for_unknown()
                .describe("The number of GPUs in the node, from BCM's system information for it."),
        )
        .block(timeouts::block(
            "How long operations may take. Defaults: create 30m, update 30m, delete 30m, \
             read 2m. Create, image changes and a wiping destroy include waiting for the node \
             to be `UP`.",
        )),
    )
}

// =============================================================================================
// validate()

/// Names must be non-empty and without blanks; the schema's validators judge the rest.
fn validate_node(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    for name in ["hostname", "category", "software_image", "tenant"] {
        let Some(s) = config.get(name).as_str() else {
            continue;
        };
        if s.trim().is_empty() || s.contains(char::is_whitespace) {
            d.error_at(
                AttrPath::attr(name),
                "Invalid Name",
                format!("{name} is {s:?}; it must be a non-empty name without blanks."),
            );
        }
    }
    d
}

// =============================================================================================
// plan()

/// The attributes whose change needs BCM to be told.
const REMOTE_ATTRIBUTES: &[&str] = &["category", "software_image", "install_mode", "power"];

fn plan_node(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    if !req.prior.is_null() {
        // A change BCM never sees (wipe_on_destroy, timeouts) keeps what was observed.
        let remote_same = REMOTE_ATTRIBUTES
            .iter()
            .all(|a| planned.get(a) == req.prior.get(a));
        if remote_same {
            for a in ["status", "ip"] {
                if planned.get(a).is_unknown() {
                    planned.set_attr(a, req.prior.get(a).clone());
                }
            }
        }
    }
    PlanResponse {
        planned,
        requires_replace: Vec::new(),
        diagnostics: Diagnostics::new(),
    }
}

// =============================================================================================
// apply()

/// The uuids of the category and image a node should have.
#[derive(Debug, Clone)]
struct Refs {
    category: String,
    image: Option<String>,
}

async fn resolve_refs(api: &dyn BcmApi, want: &Desired) -> Result<Refs, StepError> {
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
    fn state(&self, planned: &Value) -> Value {
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
enum CreateStep {
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
fn desired_device(d: &Device, want: &Desired, refs: &Refs) -> Device {
    let mut n = d.clone();
    n.category = Some(refs.category.clone());
    n.set_image(refs.image.as_deref());
    n.install_mode = Some(want.install_mode.clone());
    n.set_tenant(Some(&want.tenant));
    n
}

async fn create_step(
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

async fn apply_create(api: &dyn BcmApi, ctx: &Context, planned: &Value) -> ApplyResponse {
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
async fn held_node(api: &dyn BcmApi, uuid: &str, want: &Desired) -> Result<Device, StepError> {
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

async fn update_node(
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

async fn apply_update(
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
async fn wipe_devices(
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
fn check_wiped(
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

async fn apply_delete(api: &dyn BcmApi, ctx: &Context, prior: &Value) -> ApplyResponse {
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

// =============================================================================================
// read()

/// The state of a held node as BCM shows it, normalised against `prior`.
async fn observe(api: &dyn BcmApi, prior: &Value, d: &Device) -> Result<Value, StepError> {
    let mut s = prior.clone();
    s.set_attr("id", Value::string(d.uuid.clone()));
    s.set_attr("hostname", Value::string(d.hostname.clone()));
    s.set_attr("tenant", opt(d.tenant().or(d.releasing())));
    let category = match d.category.as_deref().filter(|c| !c.is_empty()) {
        Some(uuid) => match api.category(uuid).await? {
            Some(c) => Value::string(c.name),
            None => Value::string(uuid),
        },
        None => Value::Null,
    };
    s.set_attr("category", category);
    let image = match d.image() {
        Some(uuid) => match api.software_image(uuid).await? {
            Some(i) => Value::string(i.name),
            None => Value::string(uuid),
        },
        None => Value::Null,
    };
    s.set_attr("software_image", image);
    s.set_attr("install_mode", opt(d.install_mode.as_deref()));
    let status = api.status(&d.uuid).await?;
    if let Some(st) = &status {
        s.set_attr("status", Value::string(st.status.clone()));
        s.set_attr("power", Value::string(power_word(st)));
    }
    if s.get("wipe_on_destroy").is_null() {
        s.set_attr("wipe_on_destroy", Value::Bool(true));
    }
    for (name, value) in [
        ("mac", opt(d.mac_address())),
        ("ip", opt(d.ip())),
        ("rack", opt(d.rack())),
    ] {
        s.set_attr(name, value);
    }
    // The GPUs are hardware: once known they are kept, so a refresh costs no extra call.
    let known = ["gpu_product", "gpu_count"]
        .iter()
        .all(|a| !s.get(a).is_null() && !s.get(a).is_unknown());
    if !known {
        let info = sysinfo_of(api, &d.uuid).await?;
        for (name, value) in gpu_facts(info.as_ref()) {
            s.set_attr(name, value);
        }
    }
    Ok(s.with_unknowns_nulled())
}

async fn read_node(api: &dyn BcmApi, ctx: &Context, state: &Value) -> ReadResponse {
    let hostname = state
        .get("hostname")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let result = bounded(ctx, Operation::Read, started, started + t.read, async {
        // Imports know only the hostname; the tenant then comes from the node.
        let key = state.get("id").as_str().unwrap_or(&hostname);
        let Some(d) = api.device(key).await? else {
            return Ok(Value::Null);
        };
        // A node whose wipe was interrupted is still this tenant's until the wipe finishes.
        let holder = d.tenant().or(d.releasing());
        let ours = match state.get("tenant").as_str() {
            Some(t) => holder == Some(t),
            None => holder.is_some(),
        };
        if !ours {
            return Ok(Value::Null);
        }
        observe(api, state, &d).await
    })
    .await;
    match result {
        Ok(new_state) => ReadResponse {
            new_state,
            diagnostics: Diagnostics::new(),
        },
        Err(e) => ReadResponse {
            new_state: state.clone(),
            diagnostics: e
                .diagnostic("BCM Node Read Failed", &hostname, "reading the node")
                .into(),
        },
    }
}

// =============================================================================================
// import()

/// The state skeleton for an import by hostname: every attribute null but `hostname`; read
/// fills the rest from the node, which must be held by some tenant.
fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let hostname = id.trim();
    if hostname.is_empty() || hostname.contains(char::is_whitespace) {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by its hostname, e.g. `terraform import \
                 {TYPE_NAME}.a gpu-b3-001`."
            ),
        )
        .into());
    }
    Ok(node_schema()
        .block
        .complete(&Value::object([("hostname", Value::string(hostname))])))
}

#[async_trait]
impl<B: BcmBackend> ResourceKind for BcmNode<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        node_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_node(config)
    }

    async fn plan(&self, _ctx: &Context, req: PlanRequest) -> PlanResponse {
        plan_node(&req)
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        let api: Arc<dyn BcmApi> = match self.0.connect(ctx) {
            Ok(api) => api,
            Err(diagnostics) => {
                return ApplyResponse {
                    new_state: req.prior,
                    diagnostics,
                };
            }
        };
        if req.planned.is_null() {
            apply_delete(api.as_ref(), ctx, &req.prior).await
        } else if req.prior.is_null() {
            apply_create(api.as_ref(), ctx, &req.planned).await
        } else {
            apply_update(api.as_ref(), ctx, &req.prior, &req.planned).await
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        match self.0.connect(ctx) {
            Ok(api) => read_node(api.as_ref(), ctx, &state).await,
            Err(diagnostics) => ReadResponse {
                new_state: state,
                diagnostics,
            },
        }
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        // Fail early, with the settings diagnostic, when there is no head node to read from.
        self.0.connect(ctx)?;
        import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["hostname"]
    }
}

// =============================================================================================
// tests

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate_block;

    fn config(overrides: &[(&str, Value)]) -> Value {
        let mut v = node_schema().block.complete(&Value::object([
            ("hostname", Value::string("gpu-001")),
            ("category", Value::string("gpu-compute")),
            ("tenant", Value::string("tenant-a")),
        ]));
        for (k, x) in overrides {
            v.set_attr(k, x.clone());
        }
        v
    }

    fn error_paths(config: &Value) -> Vec<String> {
        let mut d = validate_block(&node_schema().block, config);
        d.extend(validate_node(config));
        d.iter()
            .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
            .collect()
    }

    #[test]
    fn bad_input_is_diagnosed_on_its_attribute() {
        let cases: &[(&str, Value, &str)] = &[
            ("install_mode", Value::string("MAIN"), "install_mode"),
            ("install_mode", Value::string("auto"), "install_mode"),
            ("power", Value::string("reboot"), "power"),
            ("hostname", Value::string("gpu 001"), "hostname"),
            ("tenant", Value::string(""), "tenant"),
            ("software_image", Value::string(" "), "software_image"),
        ];
        for (attr, v, want) in cases {
            assert_eq!(
                error_paths(&config(&[(attr, v.clone())])),
                [*want],
                "{attr}"
            );
        }
        assert!(error_paths(&config(&[])).is_empty());
        assert!(error_paths(&config(&[("install_mode", Value::unknown())])).is_empty());
    }

    #[test]
    fn import_skeleton_names_every_attribute() {
        let s = import_skeleton(" gpu-001 ").expect("skeleton");
        assert!(s.conforms_to(&node_schema().value_type()));
        assert_eq!(s.get("hostname"), &Value::string("gpu-001"));
        assert!(import_skeleton("").is_err());
    }

    #[test]
    fn a_wipe_counts_only_when_the_installer_consumed_it_and_every_disk_was_cleared() {
        use crate::backends::bcm::DiskInfo;
        let cleared = vec!["/dev/sda".to_owned(), "/dev/nvme0n1".to_owned()];
        let info = SysInfo {
            disks: vec![
                DiskInfo { name: "sda".into() },
                DiskInfo {
                    name: "/dev/nvme0n1".into(),
                },
            ],
            ..SysInfo::default()
        };
        let done = Device {
            hostname: "gpu-001".into(),
            ..Device::default()
        };
        assert!(check_wiped(&done, &cleared, Some(&info), "t").is_ok());

        let mut pending = done.clone();
        pending.next_boot_install_mode = Some("FULL".into());
        pending
            .block_devices_cleared_on_next_boot
            .clone_from(&cleared);
        let Err(m) = check_wiped(&pending, &cleared, Some(&info), "t") else {
            panic!("a pending wipe is not a wipe");
        };
        assert!(m.contains("did not run"), "{m}");

        let Err(m) = check_wiped(&done, &cleared, None, "t") else {
            panic!("unknown disks are not verified");
        };
        assert!(m.contains("no system information"), "{m}");

        let mut more = info.clone();
        more.disks.push(DiskInfo {
            name: "/dev/nvme1n1".into(),
        });
        let Err(m) = check_wiped(&done, &cleared, Some(&more), "t") else {
            panic!("an uncleared disk fails the check");
        };
        assert!(
            m.contains("/dev/nvme1n1") && m.contains("stays out of the free pool"),
            "{m}"
        );
    }

    #[test]
    fn polls_grow_and_are_capped() {
        assert_eq!(poll_delay(0), POLL_FIRST);
        assert!(poll_delay(1) > poll_delay(0));
        assert_eq!(poll_delay(40), POLL_MAX);
    }
}
