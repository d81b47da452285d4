//! The schema of `gpufleet_bcm_node`.

use crate::{
    schema::{Attribute, Block, Schema},
    timeouts,
    validate::OneOf,
    value::Type,
};

/// Attribute names, shared by the schema and [`super::config`].
pub(super) const ID: &str = "id";
pub(super) const HOSTNAME: &str = "hostname";
pub(super) const CATEGORY: &str = "category";
pub(super) const SOFTWARE_IMAGE: &str = "software_image";
pub(super) const INSTALL_MODE: &str = "install_mode";
pub(super) const POWER: &str = "power";
pub(super) const TENANT: &str = "tenant";
pub(super) const WIPE_ON_DESTROY: &str = "wipe_on_destroy";
pub(super) const STATUS: &str = "status";
pub(super) const MAC: &str = "mac";
pub(super) const IP: &str = "ip";
pub(super) const RACK: &str = "rack";
pub(super) const GPU_PRODUCT: &str = "gpu_product";
pub(super) const GPU_COUNT: &str = "gpu_count";

/// `install_mode` when left out.
pub(super) const DEFAULT_INSTALL_MODE: &str = "AUTO";
/// The `power` words; `on` is the default.
pub(super) const POWER_ON: &str = "on";
pub(super) const POWER_OFF: &str = "off";
/// `wipe_on_destroy` when left out.
pub(super) const DEFAULT_WIPE_ON_DESTROY: bool = true;

/// The install modes a node may be given.
pub(super) const INSTALL_MODES: &[&str] = &["AUTO", "FULL", "NOSYNC", "SKIP"];

pub(super) fn node_schema() -> Schema {
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
            Attribute::computed(ID, Type::String)
                .use_state_for_unknown()
                .describe("The node's BCM uuid."),
        )
        .attr(
            Attribute::required(HOSTNAME, Type::String)
                .requires_replace()
                .describe(
                    "The node's hostname in BCM (the same server's Kubernetes node name). The \
                     node must be free or already held by `tenant`. On a change the old node is \
                     released and the new one claimed.",
                ),
        )
        .attr(Attribute::required(CATEGORY, Type::String).describe(
            "Name of the BCM category the node joins while held, e.g. `gpu-compute`. Changes \
             in place, without a reboot.",
        ))
        .attr(Attribute::optional(SOFTWARE_IMAGE, Type::String).describe(
            "Name of the software image to provision, e.g. `ubuntu2404-cuda12.8`. When not \
             set, the node uses its category's image. Changing it reprovisions the node (a \
             reboot with an AUTO install, FULL when `install_mode` is FULL).",
        ))
        .attr(
            Attribute::optional(INSTALL_MODE, Type::String)
                .default(DEFAULT_INSTALL_MODE)
                .validate(OneOf::new(INSTALL_MODES))
                .describe(
                    "How the node's disks are provisioned at boot: `AUTO` (sync changes, \
                     repartition only when needed), `FULL` (repartition and sync everything), \
                     `NOSYNC` (keep the disks unless the layout is wrong) or `SKIP` (touch \
                     nothing). Changes in place; takes effect at the next boot.",
                ),
        )
        .attr(
            Attribute::optional(POWER, Type::String)
                .default(POWER_ON)
                .validate(OneOf::new(&[POWER_ON, POWER_OFF]))
                .describe(
                    "`on`: the node is powered on and provisioned, and apply waits until it is \
                     `UP`. `off`: the node is held but powered off.",
                ),
        )
        .attr(
            Attribute::required(TENANT, Type::String)
                .requires_replace()
                .describe(
                    "The tenant holding the node, recorded on the device. A node held by \
                     another tenant cannot be claimed. A node changing tenants is released \
                     first, and wiped unless `wipe_on_destroy` is `false`.",
                ),
        )
        .attr(
            Attribute::optional(WIPE_ON_DESTROY, Type::Bool)
                .default(DEFAULT_WIPE_ON_DESTROY)
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
        .attr(Attribute::computed(STATUS, Type::String).describe(
            "The node's status in BCM: `UP`, `DOWN`, `BOOTING`, `INSTALLING`, \
             `INSTALLER_CALLING_INIT`, `INSTALLER_FAILED`, `INSTALLER_UNREACHABLE`, …",
        ))
        .attr(
            Attribute::computed(MAC, Type::String)
                .use_state_for_unknown()
                .describe("The MAC address of the node's boot interface."),
        )
        .attr(
            Attribute::computed(IP, Type::String)
                .describe("The address of the node's boot interface; null while it has none."),
        )
        .attr(
            Attribute::computed(RACK, Type::String)
                .use_state_for_unknown()
                .describe("The rack the node sits in."),
        )
        .attr(
            Attribute::computed(GPU_PRODUCT, Type::String)
                .use_state_for_unknown()
                .describe(
                    "The node's GPU product as GPU feature discovery names it (the driver's \
                     name with blanks as dashes), from the GPUs BCM's system information \
                     reports for the node, e.g. `NVIDIA-B200`. Null while BCM has no system \
                     information for it.",
                ),
        )
        .attr(
            Attribute::computed(GPU_COUNT, Type::Number)
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
