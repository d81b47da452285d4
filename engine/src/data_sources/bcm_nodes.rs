//! `gpufleet_bcm_nodes`: the nodes BCM knows, with who holds them, for capacity planning.
//!
//! One read is five calls whatever the fleet's size: every device, the status and the system
//! information (GPUs) of all of them in one call each, every category and every software
//! image (to name them).

use std::{collections::HashMap, sync::Arc};

use async_trait::async_trait;

use crate::{
    backends::bcm::{BcmApi, BcmBackend, BcmError, Device, DeviceStatus, FromSettings, SysInfo},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    kinds::{DataSourceKind, ReadResponse},
    path::AttrPath,
    schema::{Attribute, Block, FieldDocs, Schema},
    value::{Type, Value},
};

/// The data source type name.
pub const TYPE_NAME: &str = "gpufleet_bcm_nodes";

/// The device statuses cmdaemon reports; a `status` filter outside them would match nothing.
pub const STATUSES: &[&str] = &[
    "UP",
    "DOWN",
    "CLOSED",
    "BOOTING",
    "INSTALLING",
    "INSTALLER_FAILED",
    "INSTALLER_REBOOTING",
    "INSTALLER_CALLING_INIT",
    "INSTALLER_UNREACHABLE",
    "INSTALLER_BURNING",
    "BURNING",
    "UNKNOWN",
    "OPENING",
    "GOING_DOWN",
    "PENDING",
];

/// A `status` filter must be a status cmdaemon reports (case is ignored).
pub(crate) fn validate_filters(config: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    if let Some(s) = config.get("status").as_str()
        && !STATUSES.iter().any(|known| known.eq_ignore_ascii_case(s))
    {
        d.error_at(
            AttrPath::attr("status"),
            "Unknown Status",
            format!(
                "status: {s:?} is not a BCM device status, so no node would match; accepted \
                 (case is ignored): {}.",
                STATUSES.join(", ")
            ),
        );
    }
    d
}

/// The `gpufleet_bcm_nodes` data source, over a [`BcmBackend`]. The registry uses
/// `BcmNodes(FromSettings)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BcmNodes<B = FromSettings>(pub B);

fn node_type() -> Type {
    Type::object([
        ("hostname", Type::String),
        ("id", Type::String),
        ("status", Type::String),
        ("power", Type::String),
        ("category", Type::String),
        ("software_image", Type::String),
        ("tenant", Type::String),
        ("rack", Type::String),
        ("gpu_product", Type::String),
        ("gpu_count", Type::Number),
        ("mac", Type::String),
        ("ip", Type::String),
    ])
}

/// Descriptions of the fields of [`node_type`].
fn node_docs() -> FieldDocs {
    FieldDocs::new().fields(
        "",
        &[
            ("hostname", "The node's hostname in BCM."),
            ("id", "The node's BCM uuid."),
            (
                "status",
                "BCM's status of the node, e.g. `UP`; null when BCM reports none.",
            ),
            (
                "power",
                "`on`, or `off` when BCM reports the node `DOWN` (BCM's API reports no power \
                 state of its own).",
            ),
            ("category", "The node's category."),
            (
                "software_image",
                "The node's software image, else its category's.",
            ),
            (
                "tenant",
                "The tenant holding the node; null when it is free.",
            ),
            (
                "rack",
                "The rack the node is in; null when BCM records none.",
            ),
            (
                "gpu_product",
                "The node's GPU product as GPU feature discovery would label it, from the \
                 GPUs BCM's system information reports; null without GPUs or with mixed \
                 products.",
            ),
            ("gpu_count", "GPUs the node reports; null when none."),
            (
                "mac",
                "The node's MAC address, else its boot interface's; null when unassigned.",
            ),
            ("ip", "The boot interface's IP address; null when unset."),
        ],
    )
}

fn nodes_schema() -> Schema {
    Schema::new(
        Block::new(
            "The physical nodes of NVIDIA Base Command Manager, with their status, category, \
             image, GPUs and the tenant holding them (null when free), for capacity planning. \
             Filters combine; without any, every node is listed. Needs the provider's `bcm` \
             block.",
        )
        .attr(
            Attribute::optional("category", Type::String)
                .describe("Only nodes in this category, e.g. `free-pool`."),
        )
        .attr(Attribute::optional("status", Type::String).describe(
            "Only nodes with this status, e.g. `UP` (case is ignored): one of `UP`, \
                     `DOWN`, `CLOSED`, `BOOTING`, `INSTALLING`, `INSTALLER_FAILED`, \
                     `INSTALLER_REBOOTING`, `INSTALLER_CALLING_INIT`, `INSTALLER_UNREACHABLE`, \
                     `INSTALLER_BURNING`, `BURNING`, `UNKNOWN`, `OPENING`, `GOING_DOWN`, \
                     `PENDING`; plan refuses others.",
        ))
        .attr(Attribute::optional("gpu_product", Type::String).describe(
            "Only nodes with this GPU product as GPU feature discovery names it, from the \
                 GPUs BCM's system information reports, e.g. `NVIDIA-B200` (case is ignored).",
        ))
        .attr(Attribute::optional("rack", Type::String).describe("Only nodes in this rack."))
        .attr(
            Attribute::optional("free_only", Type::Bool)
                .describe("When `true`, only nodes no tenant holds."),
        )
        .attr(
            Attribute::computed("nodes", Type::list(node_type()))
                .describe("The matching nodes, sorted by hostname.")
                .describe_fields(node_docs()),
        )
        .attr(
            Attribute::computed("hostnames", Type::list(Type::String))
                .describe("The hostnames in `nodes`, for `slice()` and `contains()`."),
        )
        .attr(
            Attribute::computed("gpus", Type::Number)
                .describe("The sum of `gpu_count` over `nodes`."),
        ),
    )
}

/// The filters of a read.
struct Filters<'a> {
    category: Option<&'a str>,
    status: Option<&'a str>,
    gpu_product: Option<&'a str>,
    rack: Option<&'a str>,
    free_only: bool,
}

impl Filters<'_> {
    fn keep(
        &self,
        d: &Device,
        category: Option<&str>,
        status: Option<&DeviceStatus>,
        product: Option<&str>,
    ) -> bool {
        let eq = |want: Option<&str>, have: Option<&str>, fold: bool| match want {
            None => true,
            Some(w) => have.is_some_and(|h| {
                if fold {
                    h.eq_ignore_ascii_case(w)
                } else {
                    h == w
                }
            }),
        };
        eq(self.category, category, false)
            && eq(self.status, status.map(|s| s.status.as_str()), true)
            && eq(self.gpu_product, product, true)
            && eq(self.rack, d.rack(), false)
            && (!self.free_only || (d.tenant().is_none() && d.releasing().is_none()))
    }
}

fn opt(s: Option<&str>) -> Value {
    s.map_or(Value::Null, Value::string)
}

async fn list_nodes(api: &dyn BcmApi, config: &Value) -> Result<Value, BcmError> {
    let devices: Vec<Device> = api
        .devices()
        .await?
        .into_iter()
        .filter(Device::is_compute_node)
        .collect();
    let uuids: Vec<String> = devices.iter().map(|d| d.uuid.clone()).collect();
    let (statuses, infos): (HashMap<String, DeviceStatus>, HashMap<String, SysInfo>) =
        if uuids.is_empty() {
            (HashMap::new(), HashMap::new())
        } else {
            let statuses = api
                .statuses(&uuids)
                .await?
                .into_iter()
                .map(|s| (s.uuid.clone(), s))
                .collect();
            let infos = api
                .sysinfo(&uuids)
                .await?
                .into_iter()
                .map(|i| (i.device.clone(), i))
                .collect();
            (statuses, infos)
        };
    let categories = api.categories().await?;
    let images: HashMap<String, String> = api
        .software_images()
        .await?
        .into_iter()
        .map(|i| (i.uuid, i.name))
        .collect();
    let filters = Filters {
        category: config.get("category").as_str(),
        status: config.get("status").as_str(),
        gpu_product: config.get("gpu_product").as_str(),
        rack: config.get("rack").as_str(),
        free_only: config.get("free_only").as_bool().unwrap_or(false),
    };
    let mut rows: Vec<(String, Value, i64)> = Vec::new();
    for d in &devices {
        let category = categories
            .iter()
            .find(|c| Some(c.uuid.as_str()) == d.category.as_deref());
        let status = statuses.get(&d.uuid);
        let info = infos.get(&d.uuid);
        let product = info.and_then(SysInfo::gpu_product);
        let gpus = info.map_or(0, SysInfo::gpu_count);
        let gpus = i64::try_from(gpus).unwrap_or(i64::MAX);
        if !filters.keep(
            d,
            category.map(|c| c.name.as_str()),
            status,
            product.as_deref(),
        ) {
            continue;
        }
        let image_uuid = d.image().or_else(|| category.and_then(|c| c.image()));
        let image = image_uuid.map(|u| images.get(u).map_or(u, String::as_str));
        let row = Value::object([
            ("hostname", Value::string(d.hostname.clone())),
            ("id", Value::string(d.uuid.clone())),
            ("status", opt(status.map(|s| s.status.as_str()))),
            (
                "power",
                opt(status.map(|s| if s.is_on() { "on" } else { "off" })),
            ),
            ("category", opt(category.map(|c| c.name.as_str()))),
            ("software_image", opt(image)),
            ("tenant", opt(d.tenant())),
            ("rack", opt(d.rack())),
            ("gpu_product", opt(product.as_deref())),
            (
                "gpu_count",
                if gpus > 0 {
                    Value::int(gpus)
                } else {
                    Value::Null
                },
            ),
            ("mac", opt(d.mac_address())),
            ("ip", opt(d.ip())),
        ]);
        rows.push((d.hostname.clone(), row, gpus));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut state = config.as_object().cloned().unwrap_or_default();
    state.insert(
        "hostnames".to_owned(),
        Value::List(rows.iter().map(|r| Value::string(r.0.clone())).collect()),
    );
    state.insert(
        "gpus".to_owned(),
        Value::int(rows.iter().map(|r| r.2).sum()),
    );
    state.insert(
        "nodes".to_owned(),
        Value::List(rows.into_iter().map(|r| r.1).collect()),
    );
    Ok(Value::Object(state))
}

#[async_trait]
impl<B: BcmBackend> DataSourceKind for BcmNodes<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        nodes_schema()
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        validate_filters(config)
    }

    async fn read(&self, ctx: &Context, config: Value) -> ReadResponse {
        let api: Arc<dyn BcmApi> = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(api) => api,
            Err(diagnostics) => {
                return ReadResponse::refused(Value::Null, diagnostics);
            }
        };
        match list_nodes(api.as_ref(), &config).await {
            Ok(new_state) => ReadResponse::observed(new_state),
            Err(e) => ReadResponse {
                new_state: Value::Null,
                diagnostics: Diagnostic::error(
                    "BCM Nodes Read Failed",
                    format!("{TYPE_NAME}: {e}."),
                )
                .into(),
            },
        }
    }
}
