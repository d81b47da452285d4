//! Create, update and destroy: the allocation, subnet and V-Net, step by step.

use std::{collections::BTreeMap, time::Duration};

use async_trait::async_trait;
use tokio::time::Instant;

use super::{
    DEFAULT_TIMEOUTS, TYPE_NAME,
    config::{Attached, SegmentConfig},
    model::{Ids, Member, OWNER_TAG, Refs, Segment, attached_value, id_value, status_of},
    plan::REMOTE_ATTRIBUTES,
    schema::{ALLOCATION_ID, ATTACHED_PORTS, ID, STATUS, SUBNET_ID, VLAN_ID, VNI},
};
use crate::{
    apply::{self, KindError, Machine, Step, Stopped, bounded, failed, local_update, run_steps},
    backends::netris::{IpamNode, NetrisApi, NetrisError, VNet, cache},
    context::Context,
    kinds::ApplyResponse,
    timeouts::{self, Operation, Timeouts},
    value::Value,
};

/// A segment's own reason for a step of apply, read or import to stop.
#[derive(Debug, thiserror::Error)]
pub(super) enum SegmentError {
    /// A controller call failed.
    #[error(transparent)]
    Netris(NetrisError),
}

impl KindError for SegmentError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str = "The objects created so far are recorded in state.";

    fn timed_out(what: &str, _name: &str, doing: &str, op: Operation, waited: Duration) -> String {
        format!(
            "{what}: gave up after {} while {doing} (the {} timeout). Raise \
             timeouts.{} if the controller is slow; the objects created so far are \
             recorded in state.",
            timeouts::render(waited),
            op.name(),
            op.name()
        )
    }
}

/// Why a step of apply, read or import stopped.
pub(super) type StepError = apply::StepError<SegmentError>;

impl From<NetrisError> for StepError {
    fn from(e: NetrisError) -> StepError {
        StepError::Kind(SegmentError::Netris(e))
    }
}

/// The steps of a create, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CreateStep {
    /// Resolve tenant, VPC and site names to ids, and hostnames to switch ports.
    Resolve,
    /// Adopt or create the allocation.
    Allocation,
    /// Adopt or create the subnet.
    Subnet,
    /// Adopt (and converge) or create the V-Net.
    VNet,
    /// Wait until the V-Net is provisioned.
    Wait,
    /// Nothing left to do.
    Done,
}

/// The steps of an in-place update, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UpdateStep {
    /// Read the V-Net for the ids it refers to.
    Observe,
    /// Resolve hostnames to switch ports, when members changed.
    Resolve,
    /// Move the subnet's gateway, when it changed.
    Subnet,
    /// Replace the V-Net's settings.
    VNet,
    /// Wait until the V-Net is provisioned.
    Wait,
    /// Nothing left to do.
    Done,
}

impl Step for CreateStep {
    const DONE: Self = CreateStep::Done;
    fn doing(self) -> &'static str {
        match self {
            CreateStep::Wait => "waiting for the V-Net to finish provisioning",
            _ => "creating the segment's objects",
        }
    }
}

impl Step for UpdateStep {
    const DONE: Self = UpdateStep::Done;
    fn doing(self) -> &'static str {
        match self {
            UpdateStep::Wait => "waiting for the V-Net to finish provisioning",
            _ => "updating the segment",
        }
    }
}

/// What apply has achieved so far; becomes the (partial) state.
#[derive(Debug, Default)]
pub(super) struct Progress {
    pub(super) refs: Option<Refs>,
    pub(super) ipam: Option<Vec<IpamNode>>,
    pub(super) ids: Ids,
    pub(super) attached: Option<Vec<Attached>>,
    pub(super) observed: Option<VNet>,
}

impl Progress {
    /// The state to return: the planned value with what apply learned filled in.
    pub(super) fn state(&self, planned: &Value) -> Value {
        let mut s = planned.clone();
        s.set_attr(ID, id_value(self.ids.vnet));
        s.set_attr(ALLOCATION_ID, id_value(self.ids.allocation));
        s.set_attr(SUBNET_ID, id_value(self.ids.subnet));
        if let Some(a) = &self.attached {
            s.set_attr(ATTACHED_PORTS, attached_value(a));
        }
        let status = self.observed.as_ref().map_or("incomplete", status_of);
        s.set_attr(STATUS, Value::string(status));
        if let Some(v) = &self.observed {
            for (attr, n) in [(VLAN_ID, v.vlan), (VNI, v.vxlan_id)] {
                if s.get(attr).is_unknown()
                    && let Some(n) = n
                {
                    s.set_attr(attr, Value::int(n));
                }
            }
        }
        s.with_unknowns_nulled()
    }
}

pub(super) async fn resolve_refs(api: &dyn NetrisApi, seg: &Segment) -> Result<Refs, StepError> {
    let find = |items: Vec<crate::backends::netris::Named>, what: &str, name: &str| {
        items
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.id)
            .ok_or_else(|| {
                let known: Vec<&str> = items.iter().map(|n| n.name.as_str()).collect();
                StepError::Conflict(format!(
                    "the controller has no {what} named {name:?} (it has: {}).",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ))
            })
    };
    let tenant = find(api.tenants().await?, "tenant", &seg.tenant)?;
    let vpc = find(api.vpcs().await?, "VPC", &seg.vpc)?;
    let site = find(api.sites().await?, "site", &seg.site)?;
    Ok(Refs { tenant, vpc, site })
}

/// The switch ports of the members; hostnames are looked up in the server inventory (one
/// call, only when there are hostname members).
pub(super) async fn resolve_members(
    api: &dyn NetrisApi,
    members: &[Member],
) -> Result<Vec<Attached>, StepError> {
    let servers = if members.iter().any(|m| m.hostname.is_some()) {
        api.servers().await?
    } else {
        Vec::new()
    };
    let mut by_port: BTreeMap<String, Attached> = BTreeMap::new();
    for m in members {
        let ports: Vec<(String, Option<String>)> = match (&m.port, &m.hostname) {
            (Some(p), _) => vec![(p.trim().to_owned(), None)],
            (None, Some(h)) => {
                let server = servers
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(h))
                    .ok_or_else(|| {
                        StepError::Conflict(format!(
                            "member hostname {h:?} is not in the controller's server inventory \
                             (/api/v2/hw/server)."
                        ))
                    })?;
                let ports = server.switch_ports();
                if ports.is_empty() {
                    return Err(StepError::Conflict(format!(
                        "server {h:?} has no links to a switch port in the controller's \
                         inventory, so it cannot be a member."
                    )));
                }
                ports.into_iter().map(|p| (p, Some(h.clone()))).collect()
            }
            (None, None) => Vec::new(),
        };
        for (port, hostname) in ports {
            let new = Attached {
                port: port.clone(),
                hostname,
                untagged: m.untagged,
            };
            match by_port.get(&port) {
                Some(old) if old.untagged != new.untagged => {
                    return Err(StepError::Conflict(format!(
                        "switch port {port} is a member twice, once tagged and once untagged."
                    )));
                }
                // A port listed directly wins over the same port through a hostname.
                Some(old) if old.hostname.is_none() => {}
                _ => {
                    by_port.insert(port, new);
                }
            }
        }
    }
    Ok(by_port.into_values().collect())
}

/// Waits until the V-Net is no longer provisioning, keeping the last observation (also when
/// the wait is cut short, so the state says `provisioning`).
pub(super) async fn wait_provisioned(
    api: &dyn NetrisApi,
    refs: Refs,
    id: i64,
    name: &str,
    p: &mut Progress,
) -> Result<(), StepError> {
    match api.settled_vnet(refs.vpc, id, &mut p.observed).await? {
        Some(_) => Ok(()),
        None => Err(StepError::Conflict(format!(
            "V-Net {name} (id {id}) disappeared while it was being provisioned."
        ))),
    }
}

/// A create as a state machine: the segment to make and what is made so far.
struct Creating<'a> {
    api: &'a dyn NetrisApi,
    seg: &'a Segment,
    p: Progress,
}

#[async_trait]
impl Machine for Creating<'_> {
    type Step = CreateStep;
    type Error = SegmentError;
    async fn step(&mut self, step: CreateStep) -> Result<CreateStep, StepError> {
        create_step(self.api, self.seg, step, &mut self.p).await
    }
}

/// An update as a state machine: the settings to reach from `prior`, and what is done so far.
struct Updating<'a> {
    api: &'a dyn NetrisApi,
    seg: &'a Segment,
    prior: &'a SegmentConfig,
    p: Progress,
}

#[async_trait]
impl Machine for Updating<'_> {
    type Step = UpdateStep;
    type Error = SegmentError;
    async fn step(&mut self, step: UpdateStep) -> Result<UpdateStep, StepError> {
        update_step(self.api, self.seg, self.prior, step, &mut self.p).await
    }
}

pub(super) async fn create_step(
    api: &dyn NetrisApi,
    seg: &Segment,
    step: CreateStep,
    p: &mut Progress,
) -> Result<CreateStep, StepError> {
    let missing =
        || StepError::Conflict("internal error: a create step ran out of order.".to_owned());
    match step {
        CreateStep::Resolve => {
            p.refs = Some(resolve_refs(api, seg).await?);
            p.attached = Some(resolve_members(api, &seg.members).await?);
            Ok(CreateStep::Allocation)
        }
        CreateStep::Allocation => {
            let refs = p.refs.ok_or_else(missing)?;
            let tree = api.ipam(Some(refs.vpc)).await?;
            let name = seg.ipam_name();
            let found = tree
                .iter()
                .flat_map(IpamNode::walk)
                .find(|n| n.is_allocation() && n.name == name)
                .map(|n| (n.id, n.prefix.clone()));
            p.ids.allocation = Some(match found {
                Some((id, prefix)) if prefix == seg.cidr.to_string() => id,
                Some((_, prefix)) => {
                    return Err(StepError::Conflict(format!(
                        "IPAM allocation {name} already exists with prefix {prefix}, not {}. \
                         Delete it, or give the segment another name.",
                        seg.cidr
                    )));
                }
                None => api.create_allocation(&seg.allocation_body(refs)).await?,
            });
            p.ipam = Some(tree);
            Ok(CreateStep::Subnet)
        }
        CreateStep::Subnet => {
            let refs = p.refs.ok_or_else(missing)?;
            let name = seg.ipam_name();
            let found = p
                .ipam
                .iter()
                .flatten()
                .flat_map(IpamNode::walk)
                .find(|n| !n.is_allocation() && n.name == name)
                .map(|n| (n.id, n.prefix.clone()));
            p.ids.subnet = Some(match found {
                Some((id, prefix)) if prefix == seg.cidr.to_string() => id,
                Some((_, prefix)) => {
                    return Err(StepError::Conflict(format!(
                        "subnet {name} already exists with prefix {prefix}, not {}.",
                        seg.cidr
                    )));
                }
                None => api.create_subnet(&seg.subnet_body(refs)).await?,
            });
            Ok(CreateStep::VNet)
        }
        CreateStep::VNet => {
            let refs = p.refs.ok_or_else(missing)?;
            let attached = p.attached.clone().unwrap_or_default();
            let body = seg.vnet_body(refs, &attached);
            let existing = api
                .vnets(Some(refs.vpc))
                .await?
                .into_iter()
                .find(|v| v.name == seg.name);
            p.ids.vnet = Some(match existing {
                Some(v) if v.tag(OWNER_TAG) == Some(seg.name.as_str()) => {
                    // Ours, from an interrupted apply: adopt it and make it match the plan.
                    api.update_vnet(v.id, &body).await?;
                    v.id
                }
                Some(v) => {
                    return Err(StepError::Conflict(format!(
                        "a V-Net named {} (id {}) already exists and was not created for this \
                         segment (it has no tag {}). Import it with `terraform import`, or \
                         give the segment another name.",
                        seg.name,
                        v.id,
                        seg.owner_tag()
                    )));
                }
                None => api.create_vnet(&body).await?,
            });
            Ok(CreateStep::Wait)
        }
        CreateStep::Wait => {
            let id = p.ids.vnet.ok_or_else(missing)?;
            let refs = p.refs.ok_or_else(missing)?;
            wait_provisioned(api, refs, id, &seg.name, p).await?;
            Ok(CreateStep::Done)
        }
        CreateStep::Done => Ok(CreateStep::Done),
    }
}

pub(super) async fn update_step(
    api: &dyn NetrisApi,
    seg: &Segment,
    prior: &SegmentConfig,
    step: UpdateStep,
    p: &mut Progress,
) -> Result<UpdateStep, StepError> {
    let missing =
        || StepError::Conflict("internal error: an update step ran out of order.".to_owned());
    let id = p.ids.vnet.ok_or_else(missing)?;
    match step {
        UpdateStep::Observe => {
            let Some(v) = api.vnet(id).await? else {
                return Err(StepError::Conflict(format!(
                    "V-Net {} (id {id}) no longer exists. Run `terraform apply` again: the \
                     refresh will notice and create it anew.",
                    seg.name
                )));
            };
            p.refs = match (&v.tenant, &v.vpc, v.sites.first()) {
                (Some(t), Some(vpc), Some(site)) => Some(Refs {
                    tenant: t.id,
                    vpc: vpc.id,
                    site: site.id,
                }),
                _ => Some(resolve_refs(api, seg).await?),
            };
            p.observed = Some(v);
            Ok(UpdateStep::Resolve)
        }
        UpdateStep::Resolve => {
            if p.attached.is_none() {
                p.attached = Some(resolve_members(api, &seg.members).await?);
            }
            Ok(UpdateStep::Subnet)
        }
        UpdateStep::Subnet => {
            let refs = p.refs.ok_or_else(missing)?;
            let gateway_changed = prior.gateway.value() != Some(&seg.gateway);
            if gateway_changed && let Some(subnet) = p.ids.subnet {
                api.update_subnet(subnet, &seg.subnet_body(refs)).await?;
            }
            Ok(UpdateStep::VNet)
        }
        UpdateStep::VNet => {
            let refs = p.refs.ok_or_else(missing)?;
            let attached = p.attached.clone().unwrap_or_default();
            api.update_vnet(id, &seg.vnet_body(refs, &attached)).await?;
            Ok(UpdateStep::Wait)
        }
        UpdateStep::Wait => {
            let refs = p.refs.ok_or_else(missing)?;
            wait_provisioned(api, refs, id, &seg.name, p).await?;
            Ok(UpdateStep::Done)
        }
        UpdateStep::Done => Ok(UpdateStep::Done),
    }
}

pub(super) async fn apply_create(
    api: &dyn NetrisApi,
    ctx: &Context,
    planned: &Value,
    ids: Ids,
) -> ApplyResponse {
    let seg = match Segment::from_config(&SegmentConfig::decode(planned)) {
        Ok(s) => s,
        Err(d) => return ApplyResponse::refused(Value::Null, d),
    };
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let deadline = started + t.create;
    let mut creating = Creating {
        api,
        seg: &seg,
        p: Progress {
            ids,
            ..Progress::default()
        },
    };
    let steps = run_steps(
        ctx,
        Operation::Create,
        started,
        deadline,
        CreateStep::Resolve,
        &mut creating,
    )
    .await;
    if let Err(Stopped { error, doing }) = steps {
        let p = creating.p;
        let nothing = p.ids == Ids::default();
        let state = if nothing {
            Value::Null
        } else {
            p.state(planned)
        };
        return failed(
            "Network Segment Create Failed",
            &seg.name,
            doing,
            &error,
            state,
        );
    }
    ApplyResponse::done(creating.p.state(planned))
}

pub(super) async fn apply_update(
    api: &dyn NetrisApi,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let prior_config = SegmentConfig::decode(prior);
    let ids = Ids::of(&prior_config);
    if ids.vnet.is_none() {
        // A partial state without a V-Net: finish the create, adopting what exists.
        return apply_create(api, ctx, planned, ids).await;
    }
    let planned_config = SegmentConfig::decode(planned);
    let seg = match Segment::from_config(&planned_config) {
        Ok(s) => s,
        Err(d) => return ApplyResponse::refused(prior.clone(), d),
    };
    // Only local settings (timeouts) changed: nothing to tell the controller.
    if let Some(r) = local_update(prior, planned, REMOTE_ATTRIBUTES, &[STATUS, ATTACHED_PORTS]) {
        return r;
    }
    let t = Timeouts::of_resource(planned, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let deadline = started + t.update;
    let mut updating = Updating {
        api,
        seg: &seg,
        prior: &prior_config,
        p: Progress {
            ids,
            attached: planned_config.attached_ports.into_value(),
            ..Progress::default()
        },
    };
    let steps = run_steps(
        ctx,
        Operation::Update,
        started,
        deadline,
        UpdateStep::Observe,
        &mut updating,
    )
    .await;
    if let Err(Stopped { error, doing }) = steps {
        // The controller may hold the old or the new settings: keep the prior state with the
        // ids, so the next plan shows what is still to do.
        let mut state = prior.clone();
        if let Some(v) = &updating.p.observed {
            state.set_attr(STATUS, Value::string(status_of(v)));
        }
        return failed(
            "Network Segment Update Failed",
            &seg.name,
            doing,
            &error,
            state,
        );
    }
    ApplyResponse::done(updating.p.state(planned))
}

pub(super) async fn apply_delete(
    api: &dyn NetrisApi,
    ctx: &Context,
    prior: &Value,
) -> ApplyResponse {
    let config = SegmentConfig::decode(prior);
    let name = config.name.value().cloned().unwrap_or_default();
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let deadline = started + t.delete;
    let mut ids = Ids::of(&config);
    let result = bounded(ctx, Operation::Delete, started, deadline, async {
        if let Some(id) = ids.vnet {
            api.delete_vnet(id).await?;
            // The subnet can only go once no V-Net uses its gateway.
            let mut n = 0;
            while api.vnet(id).await?.is_some() {
                tokio::time::sleep(cache::poll_delay(n)).await;
                n += 1;
            }
            ids.vnet = None;
        }
        if let Some(id) = ids.subnet {
            api.delete_subnet(id).await?;
            ids.subnet = None;
        }
        if let Some(id) = ids.allocation {
            api.delete_allocation(id).await?;
            ids.allocation = None;
        }
        Ok(())
    })
    .await;
    match result {
        Ok(()) => ApplyResponse::done(Value::Null),
        Err(e) => {
            let mut state = prior.clone();
            state.set_attr(ID, id_value(ids.vnet));
            state.set_attr(SUBNET_ID, id_value(ids.subnet));
            state.set_attr(ALLOCATION_ID, id_value(ids.allocation));
            failed(
                "Network Segment Delete Failed",
                &name,
                "deleting the segment's objects",
                &e,
                state,
            )
        }
    }
}
