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
//! `create` / `update` timeout; a timeout is an error that names the segment and how long it
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

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
    sync::Arc,
    time::Duration,
};

use async_trait::async_trait;
use tokio::time::Instant;

use crate::{
    apply::{self, KindError, bounded, failed},
    backends::netris::{
        AllocationWrite, DhcpRange, GatewayWrite, IdRef, IpamNode, NetrisApi, NetrisConfig,
        NetrisError, PortWrite, SubnetWrite, VNet, VNetWrite, shared_client,
    },
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{ApplyRequest, ApplyResponse, PlanRequest, PlanResponse, ReadResponse, ResourceKind},
    path::AttrPath,
    schema::{AttrMode, Attribute, Block, Nesting, Schema},
    timeouts::{self, Operation, Timeouts},
    validate::{DnsLabel, IntBetween, Ipv4Address, Ipv4Cidr, Ipv4Net, OneOf},
    value::{Type, Value},
};

/// The resource type name.
pub const TYPE_NAME: &str = "gpufleet_network_segment";

/// Default timeouts: provisioning a V-Net pushes configuration to every switch of the site.
pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    create: Duration::from_secs(10 * 60),
    read: Duration::from_secs(2 * 60),
    update: Duration::from_secs(10 * 60),
    delete: Duration::from_secs(10 * 60),
};

/// How long apply first waits between polls of a V-Net that provisions or disappears; the wait
/// doubles up to [`POLL_MAX`], so quick controllers are seen quickly and slow ones are not
/// flooded.
const POLL_FIRST: Duration = Duration::from_millis(500);

/// The longest wait between polls.
const POLL_MAX: Duration = Duration::from_secs(5);

/// The wait after poll number `n` (0-based).
fn poll_delay(n: u32) -> Duration {
    POLL_FIRST
        .saturating_mul(2u32.saturating_pow(n.min(8)))
        .min(POLL_MAX)
}

/// Prefix of the IPAM objects' names (`gf-<segment>`).
const IPAM_PREFIX: &str = "gf-";

/// Tag key that marks the segment owning a V-Net or subnet.
const OWNER_TAG: &str = "gpufleet:owner";

/// Tag key that records the segment's MTU on its V-Net.
const MTU_TAG: &str = "gpufleet:mtu";

// =============================================================================================
// Model

/// Where a segment's kind gets its Netris client from.
pub trait Backend: Send + Sync {
    /// The client for this operation, or the diagnostic that says which settings are missing.
    fn connect(&self, ctx: &Context) -> Result<Arc<dyn NetrisApi>, Diagnostics>;
}

/// The production backend: a client built from the provider's `netris` settings, shared by
/// every operation with the same settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromSettings;

impl Backend for FromSettings {
    fn connect(&self, ctx: &Context) -> Result<Arc<dyn NetrisApi>, Diagnostics> {
        let config = NetrisConfig::from_settings(&ctx.settings)?;
        match shared_client(&config) {
            Ok(client) => Ok(client),
            Err(e) => Err(Diagnostic::error("Invalid Netris Settings", e.to_string()).into()),
        }
    }
}

/// A given client, for tests and tools that bring their own.
impl<A: NetrisApi + 'static> Backend for Arc<A> {
    fn connect(&self, _ctx: &Context) -> Result<Arc<dyn NetrisApi>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn NetrisApi>)
    }
}

/// The `gpufleet_network_segment` resource kind, over a [`Backend`]. The registry uses
/// `NetworkSegment(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetworkSegment<B = FromSettings>(pub B);

/// A member as configured: exactly one of `port` and `hostname`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Member {
    port: Option<String>,
    hostname: Option<String>,
    untagged: bool,
}

/// A switch port attached to the V-Net, with the hostname member it came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Attached {
    port: String,
    hostname: Option<String>,
    untagged: bool,
}

/// The desired segment, from a planned value whose configuration is known.
#[derive(Debug, Clone)]
struct Segment {
    name: String,
    tenant: String,
    vpc: String,
    site: String,
    cidr: Ipv4Net,
    gateway: Ipv4Addr,
    vlan_id: Option<i64>,
    vni: Option<i64>,
    dhcp: Option<DhcpRange>,
    members: Vec<Member>,
    mtu: i64,
    state: String,
}

/// The controller ids the segment's objects were given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ids {
    allocation: Option<i64>,
    subnet: Option<i64>,
    vnet: Option<i64>,
}

/// The ids of the objects a segment refers to by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refs {
    tenant: i64,
    vpc: i64,
    site: i64,
}

impl Segment {
    fn from_value(v: &Value) -> Result<Segment, Diagnostics> {
        let mut d = Diagnostics::new();
        let mut text = |name: &str| -> String {
            match v.get(name).as_str() {
                Some(s) => s.to_owned(),
                None => {
                    d.error_at(
                        AttrPath::attr(name),
                        "Value Not Known At Apply",
                        format!("{name} must be known to apply a network segment."),
                    );
                    String::new()
                }
            }
        };
        let (name, tenant, vpc, site) = (text("name"), text("tenant"), text("vpc"), text("site"));
        let (cidr, gateway, state) = (text("cidr"), text("gateway"), text("state"));
        let cidr = cidr.parse::<Ipv4Net>().ok();
        let gateway = gateway.parse::<Ipv4Addr>().ok();
        let (Some(cidr), Some(gateway)) = (cidr, gateway) else {
            d.error_at(
                AttrPath::attr("cidr"),
                "Invalid Network",
                "cidr and gateway must be a valid IPv4 network and address.",
            );
            return Err(d);
        };
        if d.has_error() {
            return Err(d);
        }
        let dhcp = match (
            v.get("dhcp").get("start").as_str(),
            v.get("dhcp").get("end").as_str(),
        ) {
            (Some(start), Some(end)) => Some(DhcpRange {
                start: start.to_owned(),
                end: end.to_owned(),
            }),
            _ => None,
        };
        Ok(Segment {
            name,
            tenant,
            vpc,
            site,
            cidr,
            gateway,
            vlan_id: v.get("vlan_id").as_i64(),
            vni: v.get("vni").as_i64(),
            dhcp,
            members: members_of(v.get("members")),
            mtu: v.get("mtu").as_i64().unwrap_or(9000),
            state,
        })
    }

    fn ipam_name(&self) -> String {
        format!("{IPAM_PREFIX}{}", self.name)
    }

    fn owner_tag(&self) -> String {
        format!("{OWNER_TAG}={}", self.name)
    }

    fn allocation_body(&self, refs: Refs) -> AllocationWrite {
        AllocationWrite {
            name: self.ipam_name(),
            prefix: self.cidr.to_string(),
            tenant: IdRef { id: refs.tenant },
            vpc: IdRef { id: refs.vpc },
            description: self.owner_tag(),
        }
    }

    fn subnet_body(&self, refs: Refs) -> SubnetWrite {
        SubnetWrite {
            name: self.ipam_name(),
            prefix: self.cidr.to_string(),
            purpose: "common".to_owned(),
            tenant: IdRef { id: refs.tenant },
            sites: vec![IdRef { id: refs.site }],
            vpc: IdRef { id: refs.vpc },
            default_gateway: self.gateway.to_string(),
            tags: vec![self.owner_tag()],
            global_routing: false,
            description: self.owner_tag(),
        }
    }

    fn vnet_body(&self, refs: Refs, attached: &[Attached]) -> VNetWrite {
        VNetWrite {
            name: self.name.clone(),
            tenant: IdRef { id: refs.tenant },
            guest_tenants: Vec::new(),
            sites: vec![IdRef { id: refs.site }],
            vpc: IdRef { id: refs.vpc },
            state: self.state.clone(),
            vlan: self
                .vlan_id
                .map_or_else(|| "auto".to_owned(), |v| v.to_string()),
            vxlan_id: self.vni.and_then(|v| u32::try_from(v).ok()).unwrap_or(0),
            ip_family: "ipv4".to_owned(),
            tags: vec![self.owner_tag(), format!("{MTU_TAG}={}", self.mtu)],
            mtu: self.mtu,
            gateways: vec![GatewayWrite {
                prefix: format!("{}/{}", self.gateway, self.cidr.prefix_len()),
                dhcp_enabled: self.dhcp.is_some(),
                dhcp: self.dhcp.clone(),
            }],
            ports: attached
                .iter()
                .map(|a| PortWrite {
                    name: a.port.clone(),
                    access_mode: a.untagged,
                    state: "active".to_owned(),
                    lacp: "off".to_owned(),
                })
                .collect(),
        }
    }
}

fn members_of(v: &Value) -> Vec<Member> {
    v.as_seq()
        .unwrap_or_default()
        .iter()
        .map(|m| Member {
            port: m.get("port").as_str().map(str::to_owned),
            hostname: m.get("hostname").as_str().map(str::to_owned),
            untagged: m.get("untagged").as_bool().unwrap_or(false),
        })
        .collect()
}

fn member_value(m: &Member) -> Value {
    Value::object([
        ("port", m.port.clone().into()),
        ("hostname", m.hostname.clone().into()),
        ("untagged", Value::Bool(m.untagged)),
    ])
}

fn attached_of(v: &Value) -> Option<Vec<Attached>> {
    if !v.is_wholly_known() {
        return None;
    }
    let items = v.as_seq()?;
    Some(
        items
            .iter()
            .filter_map(|a| {
                Some(Attached {
                    port: a.get("port").as_str()?.to_owned(),
                    hostname: a.get("hostname").as_str().map(str::to_owned),
                    untagged: a.get("untagged").as_bool().unwrap_or(false),
                })
            })
            .collect(),
    )
}

fn attached_value(ports: &[Attached]) -> Value {
    Value::set(
        ports
            .iter()
            .map(|a| {
                Value::object([
                    ("port", Value::string(a.port.clone())),
                    ("hostname", a.hostname.clone().into()),
                    ("untagged", Value::Bool(a.untagged)),
                ])
            })
            .collect(),
    )
}

fn ids_of(v: &Value) -> Ids {
    let id = |name| v.get(name).as_str().and_then(|s| s.parse::<i64>().ok());
    Ids {
        allocation: id("allocation_id"),
        subnet: id("subnet_id"),
        vnet: id("id"),
    }
}

/// `status` of an observed V-Net.
fn status_of(v: &VNet) -> &'static str {
    if v.provisioning {
        "provisioning"
    } else if normalise_state(&v.state) == Some("disabled") {
        "disabled"
    } else {
        "active"
    }
}

/// The controller's state word as the schema spells it (`disable` is an older spelling).
fn normalise_state(s: &str) -> Option<&'static str> {
    match s.trim().to_ascii_lowercase().as_str() {
        "active" | "enabled" => Some("active"),
        "disabled" | "disable" => Some("disabled"),
        _ => None,
    }
}

fn id_value(id: Option<i64>) -> Value {
    id.map(|i| i.to_string()).into()
}

/// A segment's own reason for a step of apply, read or import to stop.
#[derive(Debug)]
enum SegmentError {
    /// A controller call failed.
    Netris(NetrisError),
}

impl KindError for SegmentError {
    const TYPE_NAME: &'static str = TYPE_NAME;
    const KEPT_IN_STATE: &'static str = "The objects created so far are recorded in state.";

    fn detail(&self, what: &str, _name: &str, _doing: &str) -> String {
        match self {
            SegmentError::Netris(e) => format!("{what}: {e}."),
        }
    }

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
type StepError = apply::StepError<SegmentError>;

impl From<NetrisError> for StepError {
    fn from(e: NetrisError) -> StepError {
        StepError::Kind(SegmentError::Netris(e))
    }
}

// =============================================================================================
// schema()

fn member_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional("port", Type::String).describe(
            "A switch port as `port@switch`, e.g. `swp5@leaf-01`. Exactly one of `port` and \
             `hostname` must be set.",
        ),
        Attribute::optional("hostname", Type::String).describe(
            "A server's hostname (as in BCM and the controller's server inventory); every \
             switch port the server is cabled to becomes a member.",
        ),
        Attribute::optional("untagged", Type::Bool)
            .default(false)
            .describe("Attach the port(s) untagged (access mode) instead of tagged."),
    ]
}

fn attached_attributes() -> Vec<Attribute> {
    vec![
        Attribute::computed("port", Type::String).describe("The switch port, `port@switch`."),
        Attribute::computed("hostname", Type::String)
            .describe("The `hostname` member the port was resolved from; null for `port` members."),
        Attribute::computed("untagged", Type::Bool).describe("Whether the port is untagged."),
    ]
}

fn segment_schema() -> Schema {
    Schema::new(
        Block::new(
            "A tenant network segment on a Netris controller: an IPAM allocation, a `common` \
             subnet and a V-Net (VLAN/VXLAN with gateway, DHCP and switch ports), created, \
             changed and removed as one unit. Every controller object is named after the \
             segment (`gf-<name>` for the IPAM objects), so an interrupted apply adopts what it \
             created instead of duplicating it. Needs the provider's `netris` block.",
        )
        .attr(
            Attribute::computed("id", Type::String)
                .use_state_for_unknown()
                .describe("The V-Net's id on the controller."),
        )
        .attr(
            Attribute::required("name", Type::String)
                .requires_replace()
                .validate(DnsLabel::new(60))
                .describe(
                    "Name of the segment and its V-Net; unique on the controller. Lowercase \
                     letters, digits and `-`, at most 60 characters (the IPAM objects are named \
                     `gf-<name>`). Changing it replaces the segment.",
                ),
        )
        .attr(
            Attribute::required("tenant", Type::String)
                .requires_replace()
                .describe(
                    "Name of the controller tenant that owns the segment. Changing it replaces \
                     the segment.",
                ),
        )
        .attr(
            Attribute::required("vpc", Type::String)
                .requires_replace()
                .describe(
                    "Name of the VPC the segment lives in (the controller's default VPC is \
                     `Default`). Changing it replaces the segment.",
                ),
        )
        .attr(
            Attribute::required("site", Type::String)
                .requires_replace()
                .describe(
                    "Name of the site whose switches carry the segment. Changing it replaces \
                     the segment.",
                ),
        )
        .attr(
            Attribute::required("cidr", Type::String)
                .requires_replace()
                .validate(Ipv4Cidr::new(8, 30))
                .describe(
                    "The segment's IPv4 network, e.g. `10.20.0.0/24`; host bits must be clear. \
                     Becomes the prefix of the allocation and the subnet. Changing it replaces \
                     the segment.",
                ),
        )
        .attr(
            Attribute::optional_computed("gateway", Type::String)
                .validate(Ipv4Address::new())
                .describe(
                    "The gateway address inside `cidr`, neither its network nor its broadcast \
                     address. Defaults to the first host address (`10.20.0.1` for \
                     `10.20.0.0/24`). Changes in place.",
                ),
        )
        .attr(
            Attribute::optional_computed("vlan_id", Type::Number)
                .use_state_for_unknown()
                .validate(IntBetween::new(1, 4094))
                .describe(
                    "The VLAN, 1–4094. When not set, the controller allocates one, and it stays \
                     the same for the life of the segment.",
                ),
        )
        .attr(
            Attribute::optional_computed("vni", Type::Number)
                .use_state_for_unknown()
                .validate(IntBetween::new(1, 16_777_215))
                .describe(
                    "The VXLAN network identifier, 1–16777215. When not set, the controller \
                     allocates one, and it stays the same for the life of the segment.",
                ),
        )
        .attr(
            Attribute::nested(
                "dhcp",
                Nesting::Single,
                AttrMode::Optional,
                vec![
                    Attribute::required("start", Type::String)
                        .validate(Ipv4Address::new())
                        .describe("First address handed out."),
                    Attribute::required("end", Type::String)
                        .validate(Ipv4Address::new())
                        .describe("Last address handed out."),
                ],
            )
            .describe(
                "DHCP on the segment, served by the controller: a range of host addresses inside \
                 `cidr` that excludes the gateway. Without it, DHCP is off.",
            ),
        )
        .attr(
            Attribute::nested(
                "members",
                Nesting::Set,
                AttrMode::Optional,
                member_attributes(),
            )
            .describe(
                "Switch ports on the segment, each given as a `port` or as a server `hostname` \
                 (resolved to the ports the server is cabled to), tagged or untagged. Ports \
                 added or removed outside Terraform show up here on refresh.",
            ),
        )
        .attr(
            Attribute::optional("mtu", Type::Number)
                .default(9000)
                .validate(IntBetween::new(1280, 9216))
                .describe(
                    "MTU of the segment, 1280–9216. Also recorded on the V-Net as the tag \
                     `gpufleet:mtu`.",
                ),
        )
        .attr(
            Attribute::optional("state", Type::String)
                .default("active")
                .validate(OneOf::new(&["active", "disabled"]))
                .describe(
                    "`active`, or `disabled` to withdraw the segment's configuration from the \
                     switches while keeping its objects.",
                ),
        )
        .attr(Attribute::computed("status", Type::String).describe(
            "What the controller reports: `provisioning` while it pushes the configuration to \
             the switches, then `active` or `disabled`; `incomplete` when an apply stopped \
             before the V-Net existed.",
        ))
        .attr(
            Attribute::computed("allocation_id", Type::String)
                .use_state_for_unknown()
                .describe(
                    "The id of the IPAM allocation `gf-<name>`; null when the segment does not \
                     manage one (imported).",
                ),
        )
        .attr(
            Attribute::computed("subnet_id", Type::String)
                .use_state_for_unknown()
                .describe(
                    "The id of the IPAM subnet `gf-<name>`; null when the segment does not \
                     manage one (imported).",
                ),
        )
        .attr(
            Attribute::nested(
                "attached_ports",
                Nesting::Set,
                AttrMode::Computed,
                attached_attributes(),
            )
            .describe(
                "The switch ports attached to the V-Net, with the `hostname` member each was \
                 resolved from.",
            ),
        )
        .block(timeouts::block(
            "How long operations may take. Defaults: create 10m, update 10m, delete 10m, \
             read 2m. Create and update include waiting for the controller to finish \
             provisioning the switches.",
        )),
    )
}

// =============================================================================================
// validate()

/// The cross-attribute checks; per-attribute rules are validators in the schema.
fn validate_segment(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    for name in ["tenant", "vpc", "site"] {
        if config
            .get(name)
            .as_str()
            .is_some_and(|s| s.trim().is_empty())
        {
            d.error_at(
                AttrPath::attr(name),
                "Empty Name",
                format!("{name} must name an existing {name} on the controller."),
            );
        }
    }
    let cidr = config
        .get("cidr")
        .as_str()
        .and_then(|s| s.parse::<Ipv4Net>().ok());
    let gateway_set = config.get("gateway").as_str();
    let gateway = gateway_set.and_then(|s| s.parse::<Ipv4Addr>().ok());
    if let (Some(net), Some(gw)) = (cidr, gateway)
        && !net.is_host(gw)
    {
        let why = if !net.contains(gw) {
            format!("is outside cidr {net}")
        } else if gw == net.network() {
            "is the network address of cidr".to_owned()
        } else {
            "is the broadcast address of cidr".to_owned()
        };
        d.error_at(
            AttrPath::attr("gateway"),
            "Gateway Outside Network",
            format!("gateway {gw} {why}; it must be a host address of {net}."),
        );
    }
    // The gateway that apply will use: configured, or the default.
    let effective_gw = match gateway_set {
        Some(_) => gateway,
        None if config.get("gateway").is_null() => cidr.map(|n| n.first_host()),
        None => None,
    };
    validate_dhcp(config.get("dhcp"), cidr, effective_gw, &mut d);
    validate_members(config.get("members"), &mut d);
    d
}

fn validate_dhcp(dhcp: &Value, cidr: Option<Ipv4Net>, gw: Option<Ipv4Addr>, d: &mut Diagnostics) {
    let path = AttrPath::attr("dhcp");
    let addr = |n: &str| {
        dhcp.get(n)
            .as_str()
            .and_then(|s| s.parse::<Ipv4Addr>().ok())
    };
    let (start, end) = (addr("start"), addr("end"));
    if let Some(net) = cidr {
        for (n, a) in [("start", start), ("end", end)] {
            if let Some(a) = a
                && !net.is_host(a)
            {
                d.error_at(
                    path.push_attr(n),
                    "DHCP Range Outside Network",
                    format!("dhcp.{n} {a} is not a host address of cidr {net}."),
                );
            }
        }
    }
    if let (Some(s), Some(e)) = (start, end) {
        if s > e {
            d.error_at(
                path.push_attr("end"),
                "Invalid DHCP Range",
                format!("dhcp.end {e} comes before dhcp.start {s}."),
            );
        } else if let Some(g) = gw
            && (s..=e).contains(&g)
        {
            d.error_at(
                path.clone(),
                "DHCP Range Includes Gateway",
                format!(
                    "the DHCP range {s}–{e} includes the gateway {g}; start it after or end it \
                     before the gateway."
                ),
            );
        }
    }
}

fn validate_members(members: &Value, d: &mut Diagnostics) {
    let path = AttrPath::attr("members");
    let mut ports = BTreeSet::new();
    for m in members.as_seq().unwrap_or_default() {
        if m.as_object().is_none() {
            continue;
        }
        let (port, host) = (m.get("port"), m.get("hostname"));
        if port.is_unknown() || host.is_unknown() {
            continue;
        }
        match (port.as_str(), host.as_str()) {
            (Some(_), Some(_)) | (None, None) => d.error_at(
                path.clone(),
                "Invalid Member",
                format!(
                    "a member must set exactly one of port and hostname; this one sets {}.",
                    if port.is_null() {
                        "neither".to_owned()
                    } else {
                        format!("both (port {:?})", port.as_str().unwrap_or_default())
                    }
                ),
            ),
            (Some(p), None) => {
                let ok = p
                    .split_once('@')
                    .is_some_and(|(a, b)| is_port_word(a) && is_port_word(b));
                if !ok {
                    d.error_at(
                        path.clone(),
                        "Invalid Switch Port",
                        format!(
                            "member port {p:?} must be written port@switch, such as \
                             \"swp5@leaf-01\"."
                        ),
                    );
                } else if !ports.insert(p) {
                    d.error_at(
                        path.clone(),
                        "Duplicate Member",
                        format!("port {p:?} is listed more than once."),
                    );
                }
            }
            (None, Some(h)) => {
                if h.trim().is_empty() || h.contains(char::is_whitespace) {
                    d.error_at(
                        path.clone(),
                        "Invalid Hostname",
                        format!("member hostname {h:?} must be a server's hostname."),
                    );
                }
            }
        }
    }
}

fn is_port_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':'))
}

// =============================================================================================
// plan()

/// The attributes whose change needs the controller to be told.
const REMOTE_ATTRIBUTES: &[&str] = &[
    "gateway", "vlan_id", "vni", "dhcp", "members", "mtu", "state",
];

fn plan_segment(req: &PlanRequest) -> PlanResponse {
    let mut planned = req.proposed.clone();
    // The gateway defaults to the first host address, whatever state says: it is a function
    // of the configuration, known as soon as cidr is.
    if req.config.get("gateway").is_null() {
        let gateway = planned
            .get("cidr")
            .as_str()
            .and_then(|s| s.parse::<Ipv4Net>().ok())
            .map_or_else(Value::unknown, |net| {
                Value::string(net.first_host().to_string())
            });
        planned.set_attr("gateway", gateway);
    }
    if !req.prior.is_null() {
        // Unchanged members keep their resolved ports: apply resolves hostnames only when
        // members change.
        let prior_ports = req.prior.get("attached_ports");
        if planned.get("members") == req.prior.get("members")
            && prior_ports.is_wholly_known()
            && !prior_ports.is_null()
        {
            planned.set_attr("attached_ports", prior_ports.clone());
        }
        // A change the controller never sees (only timeouts) keeps the status.
        let remote_same = REMOTE_ATTRIBUTES
            .iter()
            .all(|a| planned.get(a) == req.prior.get(a));
        if remote_same && planned.get("status").is_unknown() {
            planned.set_attr("status", req.prior.get("status").clone());
        }
        if req.prior.get("id").is_null() {
            // A partial state: the V-Net is gone (or was never made). Apply finishes the
            // create, so what it will record is not known yet.
            for attr in [
                "id",
                "status",
                "allocation_id",
                "subnet_id",
                "attached_ports",
            ] {
                planned.set_attr(attr, Value::unknown());
            }
            for attr in ["vlan_id", "vni"] {
                if req.config.get(attr).is_null() {
                    planned.set_attr(attr, Value::unknown());
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

/// The steps of a create, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CreateStep {
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
enum UpdateStep {
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

/// What apply has achieved so far; becomes the (partial) state.
#[derive(Debug, Default)]
struct Progress {
    refs: Option<Refs>,
    ipam: Option<Vec<IpamNode>>,
    ids: Ids,
    attached: Option<Vec<Attached>>,
    observed: Option<VNet>,
}

impl Progress {
    /// The state to return: the planned value with what apply learned filled in.
    fn state(&self, planned: &Value) -> Value {
        let mut s = planned.clone();
        s.set_attr("id", id_value(self.ids.vnet));
        s.set_attr("allocation_id", id_value(self.ids.allocation));
        s.set_attr("subnet_id", id_value(self.ids.subnet));
        if let Some(a) = &self.attached {
            s.set_attr("attached_ports", attached_value(a));
        }
        let status = self.observed.as_ref().map_or("incomplete", status_of);
        s.set_attr("status", Value::string(status));
        if let Some(v) = &self.observed {
            for (attr, n) in [("vlan_id", v.vlan), ("vni", v.vxlan_id)] {
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

async fn resolve_refs(api: &dyn NetrisApi, seg: &Segment) -> Result<Refs, StepError> {
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
async fn resolve_members(
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

/// Waits until the V-Net is no longer provisioning, keeping the last observation.
async fn wait_provisioned(
    api: &dyn NetrisApi,
    id: i64,
    name: &str,
    p: &mut Progress,
) -> Result<(), StepError> {
    for n in 0.. {
        let Some(v) = api.vnet(id).await? else {
            return Err(StepError::Conflict(format!(
                "V-Net {name} (id {id}) disappeared while it was being provisioned."
            )));
        };
        let done = !v.provisioning;
        p.observed = Some(v);
        if done {
            return Ok(());
        }
        tokio::time::sleep(poll_delay(n)).await;
    }
    Ok(())
}

async fn create_step(
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
            wait_provisioned(api, id, &seg.name, p).await?;
            Ok(CreateStep::Done)
        }
        CreateStep::Done => Ok(CreateStep::Done),
    }
}

async fn update_step(
    api: &dyn NetrisApi,
    seg: &Segment,
    prior: &Value,
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
            let gateway_changed = prior.get("gateway").as_str() != Some(&*seg.gateway.to_string());
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
            wait_provisioned(api, id, &seg.name, p).await?;
            Ok(UpdateStep::Done)
        }
        UpdateStep::Done => Ok(UpdateStep::Done),
    }
}

async fn apply_create(
    api: &dyn NetrisApi,
    ctx: &Context,
    planned: &Value,
    ids: Ids,
) -> ApplyResponse {
    let seg = match Segment::from_value(planned) {
        Ok(s) => s,
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
    let mut p = Progress {
        ids,
        ..Progress::default()
    };
    let mut step = CreateStep::Resolve;
    while step != CreateStep::Done {
        let doing = match step {
            CreateStep::Wait => "waiting for the V-Net to finish provisioning",
            _ => "creating the segment's objects",
        };
        match bounded(
            ctx,
            Operation::Create,
            started,
            deadline,
            create_step(api, &seg, step, &mut p),
        )
        .await
        {
            Ok(next) => step = next,
            Err(e) => {
                let nothing = p.ids == Ids::default();
                let state = if nothing {
                    Value::Null
                } else {
                    p.state(planned)
                };
                return failed("Network Segment Create Failed", &seg.name, doing, &e, state);
            }
        }
    }
    ApplyResponse {
        new_state: p.state(planned),
        diagnostics: Diagnostics::new(),
    }
}

async fn apply_update(
    api: &dyn NetrisApi,
    ctx: &Context,
    prior: &Value,
    planned: &Value,
) -> ApplyResponse {
    let ids = ids_of(prior);
    if ids.vnet.is_none() {
        // A partial state without a V-Net: finish the create, adopting what exists.
        return apply_create(api, ctx, planned, ids).await;
    }
    let seg = match Segment::from_value(planned) {
        Ok(s) => s,
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
        // Only local settings (timeouts) changed: nothing to tell the controller.
        let mut s = planned.clone();
        for a in ["status", "attached_ports"] {
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
    let deadline = started + t.update;
    let mut p = Progress {
        ids,
        attached: attached_of(planned.get("attached_ports")),
        ..Progress::default()
    };
    let mut step = UpdateStep::Observe;
    while step != UpdateStep::Done {
        let doing = match step {
            UpdateStep::Wait => "waiting for the V-Net to finish provisioning",
            _ => "updating the segment",
        };
        match bounded(
            ctx,
            Operation::Update,
            started,
            deadline,
            update_step(api, &seg, prior, step, &mut p),
        )
        .await
        {
            Ok(next) => step = next,
            Err(e) => {
                // The controller may hold the old or the new settings: keep the prior state
                // with the ids, so the next plan shows what is still to do.
                let mut state = prior.clone();
                if let Some(v) = &p.observed {
                    state.set_attr("status", Value::string(status_of(v)));
                }
                return failed("Network Segment Update Failed", &seg.name, doing, &e, state);
            }
        }
    }
    ApplyResponse {
        new_state: p.state(planned),
        diagnostics: Diagnostics::new(),
    }
}

async fn apply_delete(api: &dyn NetrisApi, ctx: &Context, prior: &Value) -> ApplyResponse {
    let name = prior.get("name").as_str().unwrap_or_default().to_owned();
    let t = Timeouts::of_resource(prior, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let deadline = started + t.delete;
    let mut ids = ids_of(prior);
    let result = bounded(ctx, Operation::Delete, started, deadline, async {
        if let Some(id) = ids.vnet {
            api.delete_vnet(id).await?;
            // The subnet can only go once no V-Net uses its gateway.
            let mut n = 0;
            while api.vnet(id).await?.is_some() {
                tokio::time::sleep(poll_delay(n)).await;
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
        Ok(()) => ApplyResponse {
            new_state: Value::Null,
            diagnostics: Diagnostics::new(),
        },
        Err(e) => {
            let mut state = prior.clone();
            state.set_attr("id", id_value(ids.vnet));
            state.set_attr("subnet_id", id_value(ids.subnet));
            state.set_attr("allocation_id", id_value(ids.allocation));
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

// =============================================================================================
// read()

/// The members as the controller has them, expressed against the prior members so that
/// hostname members survive a refresh (see the module docs).
fn observed_members(prior: &Value, remote: &BTreeMap<String, bool>) -> (Value, Vec<Attached>) {
    let prior_members = members_of(prior.get("members"));
    let prior_attached = attached_of(prior.get("attached_ports")).unwrap_or_default();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut members: Vec<Member> = Vec::new();
    let mut attached: Vec<Attached> = Vec::new();
    let port_member = |port: &str, untagged: bool, members: &mut Vec<Member>| {
        members.push(Member {
            port: Some(port.to_owned()),
            hostname: None,
            untagged,
        });
    };
    for m in &prior_members {
        match (&m.port, &m.hostname) {
            (Some(p), _) => {
                if let Some(&untagged) = remote.get(p.trim())
                    && used.insert(p.trim().to_owned())
                {
                    port_member(p.trim(), untagged, &mut members);
                    attached.push(Attached {
                        port: p.trim().to_owned(),
                        hostname: None,
                        untagged,
                    });
                }
            }
            (None, Some(h)) => {
                let ports: Vec<&Attached> = prior_attached
                    .iter()
                    .filter(|a| a.hostname.as_deref() == Some(h.as_str()))
                    .collect();
                let present: Vec<(&str, bool)> = ports
                    .iter()
                    .filter_map(|a| remote.get(&a.port).map(|u| (a.port.as_str(), *u)))
                    .filter(|(p, _)| !used.contains(*p))
                    .collect();
                let same_mode = present.windows(2).all(|w| w[0].1 == w[1].1);
                if !ports.is_empty() && present.len() == ports.len() && same_mode {
                    members.push(Member {
                        port: None,
                        hostname: Some(h.clone()),
                        untagged: present.first().is_some_and(|(_, u)| *u),
                    });
                    for (p, u) in present {
                        used.insert(p.to_owned());
                        attached.push(Attached {
                            port: p.to_owned(),
                            hostname: Some(h.clone()),
                            untagged: u,
                        });
                    }
                } else {
                    // Some of the server's ports left: what remains are plain ports.
                    for (p, u) in present {
                        used.insert(p.to_owned());
                        port_member(p, u, &mut members);
                        attached.push(Attached {
                            port: p.to_owned(),
                            hostname: None,
                            untagged: u,
                        });
                    }
                }
            }
            (None, None) => {}
        }
    }
    for (p, &u) in remote {
        if !used.contains(p) {
            port_member(p, u, &mut members);
            attached.push(Attached {
                port: p.clone(),
                hostname: None,
                untagged: u,
            });
        }
    }
    let value = if members.is_empty() && prior.get("members").is_null() {
        Value::Null
    } else {
        Value::set(members.iter().map(member_value).collect())
    };
    (value, attached)
}

/// The state of a segment as the controller shows it, normalised against `prior`.
fn observed_state(prior: &Value, v: &VNet) -> Value {
    let mut s = prior.clone();
    s.set_attr("id", Value::string(v.id.to_string()));
    s.set_attr("name", Value::string(v.name.clone()));
    if let Some(t) = &v.tenant {
        s.set_attr("tenant", Value::string(t.name.clone()));
    }
    if let Some(vpc) = &v.vpc {
        s.set_attr("vpc", Value::string(vpc.name.clone()));
    }
    if let Some(site) = v.sites.first() {
        s.set_attr("site", Value::string(site.name.clone()));
    }
    let gw = v.gateways.first();
    let parsed = gw.and_then(|g| {
        let (addr, len) = g.prefix.split_once('/')?;
        let addr: Ipv4Addr = addr.trim().parse().ok()?;
        let len: u8 = len.trim().parse().ok()?;
        let net = Ipv4Net::new(
            Ipv4Addr::from(
                u32::from(addr) & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0),
            ),
            len,
        )?;
        Some((addr, net))
    });
    match parsed {
        Some((addr, net)) => {
            s.set_attr("gateway", Value::string(addr.to_string()));
            s.set_attr("cidr", Value::string(net.to_string()));
        }
        None => s.set_attr("gateway", Value::Null),
    }
    let dhcp = gw
        .filter(|g| g.dhcp_enabled.unwrap_or(g.dhcp.is_some()))
        .and_then(|g| g.dhcp.as_ref())
        .map_or(Value::Null, |r| {
            Value::object([
                ("start", Value::string(r.start.clone())),
                ("end", Value::string(r.end.clone())),
            ])
        });
    s.set_attr("dhcp", dhcp);
    // `auto` and 0 read as none: keep what state recorded.
    if let Some(n) = v.vlan {
        s.set_attr("vlan_id", Value::int(n));
    }
    if let Some(n) = v.vxlan_id {
        s.set_attr("vni", Value::int(n));
    }
    let mtu = v
        .mtu
        .filter(|m| *m > 0)
        .or_else(|| v.tag(MTU_TAG).and_then(|m| m.trim().parse::<i64>().ok()));
    if let Some(mtu) = mtu {
        s.set_attr("mtu", Value::int(mtu));
    } else if s.get("mtu").is_null() {
        s.set_attr("mtu", Value::int(9000));
    }
    if let Some(state) = normalise_state(&v.state) {
        s.set_attr("state", Value::string(state));
    } else if s.get("state").is_null() {
        s.set_attr("state", Value::string("active"));
    }
    s.set_attr("status", Value::string(status_of(v)));
    let remote: BTreeMap<String, bool> = v
        .ports
        .iter()
        .filter_map(|p| Some((p.full_name()?, p.is_untagged())))
        .collect();
    let (members, attached) = observed_members(prior, &remote);
    s.set_attr("members", members);
    s.set_attr("attached_ports", attached_value(&attached));
    s.with_unknowns_nulled()
}

/// Finds a segment whose V-Net id is not in state (import, or a create that stopped before
/// the V-Net was recorded) by name; fills the ids of its IPAM objects when they carry the
/// segment's names. `None` when there is no such V-Net.
async fn find_by_name(
    api: &dyn NetrisApi,
    state: &Value,
    name: &str,
) -> Result<Option<Value>, StepError> {
    // An import takes over whatever V-Net has the name; a partial state only finds the V-Net
    // its own interrupted apply created (with the owner tag).
    let importing = state.get("tenant").is_null();
    let Some(found) = api
        .vnets(None)
        .await?
        .into_iter()
        .find(|v| v.name == name && (importing || v.tag(OWNER_TAG) == Some(name)))
    else {
        return Ok(None);
    };
    let Some(v) = api.vnet(found.id).await? else {
        return Ok(None);
    };
    let mut s = observed_state(state, &v);
    let ipam_name = format!("{IPAM_PREFIX}{name}");
    let tree = api.ipam(v.vpc.as_ref().map(|vpc| vpc.id)).await?;
    let nodes: Vec<&IpamNode> = tree.iter().flat_map(IpamNode::walk).collect();
    let mut ids = ids_of(state);
    let find = |alloc: bool| {
        nodes
            .iter()
            .find(|n| n.name == ipam_name && n.is_allocation() == alloc)
            .map(|n| n.id)
    };
    ids.allocation = ids.allocation.or_else(|| find(true));
    ids.subnet = ids.subnet.or_else(|| find(false));
    s.set_attr("allocation_id", id_value(ids.allocation));
    s.set_attr("subnet_id", id_value(ids.subnet));
    Ok(Some(s))
}

/// The state of a segment whose V-Net is gone: null when its recorded allocation and subnet
/// are gone as well, else a partial state (no V-Net id) that keeps the ones still on the
/// controller, so a destroy removes them and an apply recreates the V-Net, adopting them.
/// Costs two reads (the VPCs, then that VPC's IPAM tree), and only when the V-Net has gone.
async fn leftover_ipam(api: &dyn NetrisApi, state: &Value, ids: Ids) -> Result<Value, StepError> {
    if ids.allocation.is_none() && ids.subnet.is_none() {
        return Ok(Value::Null);
    }
    // The IPAM listing is per VPC (the default VPC when unfiltered).
    let vpc_name = state.get("vpc").as_str().unwrap_or_default();
    let vpc = api.vpcs().await?.into_iter().find(|v| v.name == vpc_name);
    let tree = api.ipam(vpc.map(|v| v.id)).await?;
    let present = |id: Option<i64>, alloc: bool| {
        id.filter(|id| {
            tree.iter()
                .flat_map(IpamNode::walk)
                .any(|n| n.id == *id && n.is_allocation() == alloc)
        })
    };
    let (allocation, subnet) = (present(ids.allocation, true), present(ids.subnet, false));
    if allocation.is_none() && subnet.is_none() {
        return Ok(Value::Null);
    }
    let mut partial = state.with_unknowns_nulled();
    partial.set_attr("id", Value::Null);
    partial.set_attr("allocation_id", id_value(allocation));
    partial.set_attr("subnet_id", id_value(subnet));
    Ok(partial)
}

async fn read_segment(api: &dyn NetrisApi, ctx: &Context, state: &Value) -> ReadResponse {
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let t = Timeouts::of_resource(state, DEFAULT_TIMEOUTS);
    let started = Instant::now();
    let ids = ids_of(state);
    let result = bounded(ctx, Operation::Read, started, started + t.read, async {
        match ids.vnet {
            Some(id) => match api.vnet(id).await? {
                Some(v) if v.name == name => Ok(observed_state(state, &v)),
                // Gone, or a V-Net of another name under the same id (not ours): the segment
                // is gone only when its IPAM objects are gone too.
                _ => leftover_ipam(api, state, ids).await,
            },
            None => match find_by_name(api, state, &name).await? {
                Some(s) => Ok(s),
                // A partial state still records IPAM objects: keep it so they are deleted.
                None if ids.allocation.is_some() || ids.subnet.is_some() => {
                    Ok(state.with_unknowns_nulled())
                }
                None => Ok(Value::Null),
            },
        }
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
                .diagnostic("Network Segment Read Failed", &name, "reading the segment")
                .into(),
        },
    }
}

// =============================================================================================
// import()

/// The state skeleton for an import by name: every attribute null but `name`; read finds the
/// V-Net by name and fills the rest.
fn import_skeleton(id: &str) -> Result<Value, Diagnostics> {
    let name = id.trim();
    if name.is_empty() {
        return Err(Diagnostic::error(
            "Invalid Import ID",
            format!(
                "import a {TYPE_NAME} by its name, e.g. `terraform import \
                 gpufleet_network_segment.a tenant-a-net`."
            ),
        )
        .into());
    }
    Ok(segment_schema()
        .block
        .complete(&Value::object([("name", Value::string(name))])))
}

#[async_trait]
impl<B: Backend> ResourceKind for NetworkSegment<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        segment_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_segment(config)
    }

    async fn plan(&self, _ctx: &Context, req: PlanRequest) -> PlanResponse {
        plan_segment(&req)
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest) -> ApplyResponse {
        let api = match self.0.connect(ctx) {
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
            apply_create(api.as_ref(), ctx, &req.planned, Ids::default()).await
        } else {
            apply_update(api.as_ref(), ctx, &req.prior, &req.planned).await
        }
    }

    async fn read(&self, ctx: &Context, state: Value) -> ReadResponse {
        match self.0.connect(ctx) {
            Ok(api) => read_segment(api.as_ref(), ctx, &state).await,
            Err(diagnostics) => ReadResponse {
                new_state: state,
                diagnostics,
            },
        }
    }

    async fn import(&self, ctx: &Context, id: &str) -> Result<Value, Diagnostics> {
        // Fail early, with the settings diagnostic, when there is no controller to read from.
        self.0.connect(ctx)?;
        import_skeleton(id)
    }

    fn identity_attributes(&self) -> &'static [&'static str] {
        &["name"]
    }
}

// =============================================================================================
// tests

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{consistency::assert_plan_valid, plan::plan_resource, validate::validate_block};

    fn config(overrides: &[(&str, Value)]) -> Value {
        let mut base: BTreeMap<String, Value> = segment_schema()
            .block
            .attributes
            .iter()
            .map(|a| (a.name.to_owned(), Value::Null))
            .collect();
        base.insert("timeouts".to_owned(), Value::Null);
        for (k, v) in [
            ("name", Value::string("tenant-a-net")),
            ("tenant", Value::string("tenant-a")),
            ("vpc", Value::string("vpc-a")),
            ("site", Value::string("dc1")),
            ("cidr", Value::string("10.20.0.0/24")),
        ] {
            base.insert(k.to_owned(), v);
        }
        for (k, v) in overrides {
            base.insert((*k).to_owned(), v.clone());
        }
        Value::Object(base)
    }

    fn member(port: Option<&str>, hostname: Option<&str>) -> Value {
        Value::object([
            ("port", port.map(Value::string).into()),
            ("hostname", hostname.map(Value::string).into()),
            ("untagged", Value::Null),
        ])
    }

    fn dhcp(start: &str, end: &str) -> Value {
        Value::object([("start", Value::string(start)), ("end", Value::string(end))])
    }

    /// The paths of every error that validation (schema validators plus the kind's checks)
    /// reports.
    fn error_paths(config: &Value) -> Vec<String> {
        let mut d = validate_block(&segment_schema().block, config);
        d.extend(validate_segment(config));
        d.iter()
            .map(|d| d.path.as_ref().map(ToString::to_string).unwrap_or_default())
            .collect()
    }

    #[test]
    fn valid_configuration_has_no_diagnostics() {
        let c = config(&[
            ("gateway", Value::string("10.20.0.1")),
            ("dhcp", dhcp("10.20.0.100", "10.20.0.200")),
            ("vlan_id", Value::int(210)),
            ("vni", Value::int(16_777_215)),
            (
                "members",
                Value::set(vec![
                    member(Some("swp5@leaf-01"), None),
                    member(None, Some("gpu-001")),
                ]),
            ),
        ]);
        assert_eq!(error_paths(&c), Vec::<String>::new());
    }

    #[test]
    fn each_bad_input_is_diagnosed_on_its_attribute() {
        /// (case, attributes set, paths of the expected errors)
        type Case<'a> = (&'a str, &'a [(&'a str, Value)], &'a [&'a str]);
        let cases: &[Case<'_>] = &[
            (
                "cidr syntax",
                &[("cidr", Value::string("10.20.0.0"))],
                &["cidr"],
            ),
            (
                "cidr host bits",
                &[("cidr", Value::string("10.20.0.1/24"))],
                &["cidr"],
            ),
            (
                "cidr too small",
                &[("cidr", Value::string("10.20.0.0/31"))],
                &["cidr"],
            ),
            (
                "gateway syntax",
                &[("gateway", Value::string("10.20.0"))],
                &["gateway"],
            ),
            (
                "gateway outside",
                &[("gateway", Value::string("10.21.0.1"))],
                &["gateway"],
            ),
            (
                "gateway network",
                &[("gateway", Value::string("10.20.0.0"))],
                &["gateway"],
            ),
            (
                "gateway broadcast",
                &[("gateway", Value::string("10.20.0.255"))],
                &["gateway"],
            ),
            (
                "dhcp outside",
                &[("dhcp", dhcp("10.20.0.100", "10.20.1.10"))],
                &["dhcp.end"],
            ),
            (
                "dhcp reversed",
                &[("dhcp", dhcp("10.20.0.50", "10.20.0.20"))],
                &["dhcp.end"],
            ),
            (
                "dhcp covers default gateway",
                &[("dhcp", dhcp("10.20.0.1", "10.20.0.20"))],
                &["dhcp"],
            ),
            (
                "dhcp covers set gateway",
                &[
                    ("gateway", Value::string("10.20.0.30")),
                    ("dhcp", dhcp("10.20.0.2", "10.20.0.99")),
                ],
                &["dhcp"],
            ),
            (
                "dhcp address syntax",
                &[("dhcp", dhcp("x", "10.20.0.20"))],
                &["dhcp.start"],
            ),
            ("vlan low", &[("vlan_id", Value::int(0))], &["vlan_id"]),
            ("vlan high", &[("vlan_id", Value::int(4095))], &["vlan_id"]),
            ("vni low", &[("vni", Value::int(0))], &["vni"]),
            ("vni high", &[("vni", Value::int(16_777_216))], &["vni"]),
            ("mtu low", &[("mtu", Value::int(1279))], &["mtu"]),
            ("mtu high", &[("mtu", Value::int(9217))], &["mtu"]),
            (
                "name upper",
                &[("name", Value::string("Tenant-A"))],
                &["name"],
            ),
            (
                "name long",
                &[("name", Value::string("a".repeat(61)))],
                &["name"],
            ),
            ("state", &[("state", Value::string("paused"))], &["state"]),
            (
                "tenant empty",
                &[("tenant", Value::string(" "))],
                &["tenant"],
            ),
            (
                "member both",
                &[(
                    "members",
                    Value::set(vec![member(Some("swp1@sw1"), Some("gpu-001"))]),
                )],
                &["members"],
            ),
            (
                "member neither",
                &[("members", Value::set(vec![member(None, None)]))],
                &["members"],
            ),
            (
                "member port format",
                &[("members", Value::set(vec![member(Some("swp1"), None)]))],
                &["members"],
            ),
            (
                "timeouts",
                &[(
                    "timeouts",
                    Value::object([
                        ("create", Value::string("soon")),
                        ("update", Value::Null),
                        ("delete", Value::Null),
                        ("read", Value::Null),
                    ]),
                )],
                &["timeouts.create"],
            ),
        ];
        for (case, overrides, want) in cases {
            let got = error_paths(&config(overrides));
            assert_eq!(&got, want, "{case}");
        }
    }

    #[test]
    fn unknowns_are_tolerated() {
        let c = config(&[
            ("cidr", Value::unknown()),
            ("gateway", Value::string("10.20.0.1")),
            ("dhcp", Value::unknown()),
            (
                "members",
                Value::set(vec![member(Some("swp1@sw1"), None), Value::unknown()]),
            ),
            ("vlan_id", Value::unknown()),
        ]);
        assert_eq!(error_paths(&c), Vec::<String>::new());
        let c = config(&[(
            "dhcp",
            Value::object([
                ("start", Value::unknown()),
                ("end", Value::string("10.20.0.9")),
            ]),
        )]);
        assert_eq!(error_paths(&c), Vec::<String>::new());
    }

    async fn plan(prior: &Value, config: &Value) -> crate::plan::Planned {
        // Terraform's proposed new state, for the attributes this test uses: config values,
        // prior values for computed attributes the config leaves null.
        let schema = segment_schema();
        let mut proposed = config.clone();
        if !prior.is_null() {
            for a in &schema.block.attributes {
                if a.mode.is_computed() && config.get(a.name).is_null() {
                    proposed.set_attr(a.name, prior.get(a.name).clone());
                }
            }
        }
        let p = plan_resource(
            &NetworkSegment(FromSettings),
            &Context::default(),
            prior.clone(),
            proposed,
            config.clone(),
        )
        .await;
        let errs = assert_plan_valid(&schema.block, prior, config, &p.planned);
        assert!(errs.is_empty(), "invalid plan: {errs:?}");
        p
    }

    fn applied(planned: &Value) -> Value {
        let mut s = planned.clone();
        for (k, v) in [
            ("id", Value::string("7")),
            ("allocation_id", Value::string("3")),
            ("subnet_id", Value::string("4")),
            ("status", Value::string("active")),
            ("vlan_id", Value::int(210)),
            ("vni", Value::int(5210)),
            ("attached_ports", Value::set(Vec::new())),
        ] {
            if s.get(k).is_unknown() {
                s.set_attr(k, v);
            }
        }
        s
    }

    #[tokio::test]
    async fn create_plans_unknown_computed_values_and_the_default_gateway() {
        let p = plan(&Value::Null, &config(&[])).await;
        for a in [
            "id",
            "status",
            "vlan_id",
            "vni",
            "allocation_id",
            "subnet_id",
            "attached_ports",
        ] {
            assert!(p.planned.get(a).is_unknown(), "{a}");
        }
        assert_eq!(p.planned.get("gateway"), &Value::string("10.20.0.1"));
        assert_eq!(p.planned.get("mtu"), &Value::int(9000));
        assert_eq!(p.planned.get("state"), &Value::string("active"));
        assert!(p.requires_replace.is_empty());
        assert!(p.diagnostics.is_empty());
    }

    #[tokio::test]
    async fn plan_works_with_unknown_provider_configuration() {
        // No settings at all: plan never needs the controller.
        let p = plan(&Value::Null, &config(&[("cidr", Value::unknown())])).await;
        assert!(p.planned.get("gateway").is_unknown());
        assert!(!p.diagnostics.has_error());
    }

    #[tokio::test]
    async fn update_keeps_stable_values_and_members_change_in_place() {
        let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
        let c = config(&[("members", Value::set(vec![member(Some("swp1@sw1"), None)]))]);
        let p = plan(&prior, &c).await;
        for a in [
            "id",
            "vlan_id",
            "vni",
            "allocation_id",
            "subnet_id",
            "gateway",
        ] {
            assert_eq!(p.planned.get(a), prior.get(a), "{a}");
        }
        assert!(p.planned.get("status").is_unknown());
        assert!(p.planned.get("attached_ports").is_unknown());
        assert!(p.requires_replace.is_empty(), "{:?}", p.requires_replace);
    }

    #[tokio::test]
    async fn no_change_is_a_no_op_plan() {
        let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
        let p = plan(&prior, &config(&[])).await;
        assert_eq!(p.planned, prior);
    }

    #[tokio::test]
    async fn identity_changes_require_replacement() {
        let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
        for (attr, v) in [
            ("cidr", Value::string("10.30.0.0/24")),
            ("vpc", Value::string("vpc-b")),
            ("site", Value::string("dc2")),
            ("tenant", Value::string("tenant-b")),
            ("name", Value::string("other")),
        ] {
            let p = plan(&prior, &config(&[(attr, v)])).await;
            assert_eq!(p.requires_replace, [AttrPath::attr(attr)], "{attr}");
        }
    }

    #[tokio::test]
    async fn gateway_follows_a_new_default_in_place() {
        let prior = applied(
            &plan(
                &Value::Null,
                &config(&[("gateway", Value::string("10.20.0.254"))]),
            )
            .await
            .planned,
        );
        let p = plan(&prior, &config(&[])).await;
        assert_eq!(p.planned.get("gateway"), &Value::string("10.20.0.1"));
        assert!(p.requires_replace.is_empty());
    }

    #[tokio::test]
    async fn timeouts_only_change_keeps_status() {
        let prior = applied(&plan(&Value::Null, &config(&[])).await.planned);
        let t = Value::object([
            ("create", Value::string("20m")),
            ("update", Value::Null),
            ("delete", Value::Null),
            ("read", Value::Null),
        ]);
        let p = plan(&prior, &config(&[("timeouts", t)])).await;
        assert_eq!(p.planned.get("status"), prior.get("status"));
        assert_eq!(p.planned.get("attached_ports"), prior.get("attached_ports"));
    }

    #[test]
    fn members_keep_hostnames_while_all_their_ports_are_attached() {
        let prior = Value::object([
            (
                "members",
                Value::set(vec![member_value(&Member {
                    port: None,
                    hostname: Some("gpu-001".into()),
                    untagged: true,
                })]),
            ),
            (
                "attached_ports",
                attached_value(&[
                    Attached {
                        port: "swp1@sw1".into(),
                        hostname: Some("gpu-001".into()),
                        untagged: true,
                    },
                    Attached {
                        port: "swp1@sw2".into(),
                        hostname: Some("gpu-001".into()),
                        untagged: true,
                    },
                ]),
            ),
        ]);
        let both: BTreeMap<String, bool> =
            [("swp1@sw1".to_owned(), true), ("swp1@sw2".to_owned(), true)].into();
        let (m, _) = observed_members(&prior, &both);
        assert_eq!(m, prior.get("members").clone());

        // One port detached and a stranger attached out of band.
        let drifted: BTreeMap<String, bool> = [
            ("swp1@sw1".to_owned(), true),
            ("swp9@sw9".to_owned(), false),
        ]
        .into();
        let (m, a) = observed_members(&prior, &drifted);
        let want = Value::set(vec![
            member_value(&Member {
                port: Some("swp1@sw1".into()),
                hostname: None,
                untagged: true,
            }),
            member_value(&Member {
                port: Some("swp9@sw9".into()),
                hostname: None,
                untagged: false,
            }),
        ]);
        assert_eq!(m, want);
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn import_skeleton_names_every_attribute() {
        let s = import_skeleton(" tenant-a-net ").expect("skeleton");
        assert!(s.conforms_to(&segment_schema().value_type()));
        assert_eq!(s.get("name"), &Value::string("tenant-a-net"));
        assert!(import_skeleton("").is_err());
    }

    #[test]
    fn vnet_body_spells_auto_allocation_and_tags() {
        let seg = Segment::from_value(&applied(&config(&[
            ("gateway", Value::string("10.20.0.1")),
            ("mtu", Value::int(9000)),
            ("state", Value::string("active")),
            ("vlan_id", Value::Null),
            ("vni", Value::Null),
        ])))
        .expect("segment");
        let body = seg.vnet_body(
            Refs {
                tenant: 1,
                vpc: 2,
                site: 3,
            },
            &[],
        );
        assert_eq!(body.vlan, "auto");
        assert_eq!(body.vxlan_id, 0);
        assert_eq!(body.gateways[0].prefix, "10.20.0.1/24");
        assert_eq!(
            body.tags,
            ["gpufleet:owner=tenant-a-net", "gpufleet:mtu=9000"]
        );
    }
}
