//! The schema of `gpufleet_network_segment`.

use crate::{
    schema::{AttrMode, Attribute, Block, Nesting, Schema},
    timeouts,
    validate::{DnsLabel, IntBetween, Ipv4Address, Ipv4Cidr, OneOf},
    value::Type,
};

/// Attribute names, shared by the schema and [`super::config`].
pub(super) const ID: &str = "id";
pub(super) const NAME: &str = "name";
pub(super) const TENANT: &str = "tenant";
pub(super) const VPC: &str = "vpc";
pub(super) const SITE: &str = "site";
pub(super) const CIDR: &str = "cidr";
pub(super) const GATEWAY: &str = "gateway";
pub(super) const VLAN_ID: &str = "vlan_id";
pub(super) const VNI: &str = "vni";
pub(super) const DHCP: &str = "dhcp";
pub(super) const DHCP_START: &str = "start";
pub(super) const DHCP_END: &str = "end";
pub(super) const MEMBERS: &str = "members";
pub(super) const PORT: &str = "port";
pub(super) const HOSTNAME: &str = "hostname";
pub(super) const UNTAGGED: &str = "untagged";
pub(super) const MTU: &str = "mtu";
pub(super) const STATE: &str = "state";
pub(super) const STATUS: &str = "status";
pub(super) const ALLOCATION_ID: &str = "allocation_id";
pub(super) const SUBNET_ID: &str = "subnet_id";
pub(super) const ATTACHED_PORTS: &str = "attached_ports";

/// `mtu` when left out.
pub(super) const DEFAULT_MTU: i64 = 9000;
/// `state` when left out.
pub(super) const DEFAULT_STATE: &str = "active";

pub(super) fn member_attributes() -> Vec<Attribute> {
    vec![
        Attribute::optional(PORT, Type::String).describe(
            "A switch port as `port@switch`, e.g. `swp5@leaf-01`. Exactly one of `port` and \
             `hostname` must be set.",
        ),
        Attribute::optional(HOSTNAME, Type::String).describe(
            "A server's hostname (as in BCM and the controller's server inventory); every \
             switch port the server is cabled to becomes a member.",
        ),
        Attribute::optional(UNTAGGED, Type::Bool)
            .default(false)
            .describe("Attach the port(s) untagged (access mode) instead of tagged."),
    ]
}

pub(super) fn attached_attributes() -> Vec<Attribute> {
    vec![
        Attribute::computed(PORT, Type::String).describe("The switch port, `port@switch`."),
        Attribute::computed(HOSTNAME, Type::String)
            .describe("The `hostname` member the port was resolved from; null for `port` members."),
        Attribute::computed(UNTAGGED, Type::Bool).describe("Whether the port is untagged."),
    ]
}

pub(super) fn segment_schema() -> Schema {
    Schema::new(
        Block::new(
            "A tenant network segment on a Netris controller: an IPAM allocation, a `common` \
             subnet and a V-Net (VLAN/VXLAN with gateway, DHCP and switch ports), created, \
             changed and removed as one unit. Every controller object is named after the \
             segment (`gf-<name>` for the IPAM objects), so an interrupted apply adopts what it \
             created instead of duplicating it. Needs the provider's `netris` block.",
        )
        .attr(
            Attribute::computed(ID, Type::String)
                .use_state_for_unknown()
                .describe("The V-Net's id on the controller."),
        )
        .attr(
            Attribute::required(NAME, Type::String)
                .requires_replace()
                .validate(DnsLabel::new(60))
                .describe(
                    "Name of the segment and its V-Net; unique on the controller. The IPAM \
                     objects are named `gf-<name>`.",
                ),
        )
        .attr(
            Attribute::required(TENANT, Type::String)
                .requires_replace()
                .describe("Name of the controller tenant that owns the segment."),
        )
        .attr(
            Attribute::required(VPC, Type::String)
                .requires_replace()
                .describe(
                    "Name of the VPC the segment lives in (the controller's default VPC is \
                     `Default`).",
                ),
        )
        .attr(
            Attribute::required(SITE, Type::String)
                .requires_replace()
                .describe("Name of the site whose switches carry the segment."),
        )
        .attr(
            Attribute::required(CIDR, Type::String)
                .requires_replace()
                .validate(Ipv4Cidr::new(8, 30))
                .describe(
                    "The segment's network; host bits must be clear. Becomes the prefix \
                     of the allocation and the subnet.",
                ),
        )
        .attr(
            Attribute::optional_computed(GATEWAY, Type::String)
                .validate(Ipv4Address::new())
                .describe(
                    "The gateway address inside `cidr`, neither its network nor its broadcast \
                     address; when unset, the first host address of `cidr`. Changes in place.",
                ),
        )
        .attr(
            Attribute::optional_computed(VLAN_ID, Type::Number)
                .use_state_for_unknown()
                .validate(IntBetween::new(1, 4094))
                .describe(
                    "The VLAN. When not set, the controller allocates one, and it stays \
                     the same for the life of the segment.",
                ),
        )
        .attr(
            Attribute::optional_computed(VNI, Type::Number)
                .use_state_for_unknown()
                .validate(IntBetween::new(1, 16_777_215))
                .describe(
                    "The VXLAN network identifier. When not set, the controller \
                     allocates one, and it stays the same for the life of the segment.",
                ),
        )
        .attr(
            Attribute::nested(
                DHCP,
                Nesting::Single,
                AttrMode::Optional,
                vec![
                    Attribute::required(DHCP_START, Type::String)
                        .validate(Ipv4Address::new())
                        .describe("First address handed out."),
                    Attribute::required(DHCP_END, Type::String)
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
                MEMBERS,
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
            Attribute::optional(MTU, Type::Number)
                .default(DEFAULT_MTU)
                .validate(IntBetween::new(1280, 9216))
                .describe(
                    "MTU of the segment. Also recorded on the V-Net as the tag `gpufleet:mtu`.",
                ),
        )
        .attr(
            Attribute::optional(STATE, Type::String)
                .default(DEFAULT_STATE)
                .validate(OneOf::new(&["active", "disabled"]))
                .describe(
                    "`active`, or `disabled` to withdraw the segment's configuration from the \
                     switches while keeping its objects.",
                ),
        )
        .attr(Attribute::computed(STATUS, Type::String).describe(
            "What the controller reports: `provisioning` while it pushes the configuration to \
             the switches, then `active` or `disabled`; `incomplete` when an apply stopped \
             before the V-Net existed.",
        ))
        .attr(
            Attribute::computed(ALLOCATION_ID, Type::String)
                .use_state_for_unknown()
                .describe(
                    "The id of the IPAM allocation `gf-<name>`; null when the segment does not \
                     manage one (imported).",
                ),
        )
        .attr(
            Attribute::computed(SUBNET_ID, Type::String)
                .use_state_for_unknown()
                .describe(
                    "The id of the IPAM subnet `gf-<name>`; null when the segment does not \
                     manage one (imported).",
                ),
        )
        .attr(
            Attribute::nested(
                ATTACHED_PORTS,
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
