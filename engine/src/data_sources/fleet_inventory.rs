//! `gpufleet_fleet_inventory`: the host cluster's GPU nodes, who holds them and what is free.
//!
//! One list of the nodes that carry `nvidia.com/gpu.product` (one API call per read), grouped
//! by product; a node is held when it carries `gpufleet.dev/pool`, and free when it is also
//! Ready and not cordoned, the same rule `gpufleet_gpu_node_pool` claims by.
//!
//! Where a node sits comes from the labels production fleets carry: topograph's switch block
//! (`network.topology.nvidia.com/block`), the well-known zone, and the NVLink domain as GFD's
//! clique (`nvidia.com/gpu.clique`) or, without one, topograph's accelerator label.
//!
//! Products are matched and grouped through the catalog, because GFD suffixes the label of
//! shared nodes (`-SHARED` under time-slicing, `-MIG-<profile>` under the MIG `single`
//! strategy). GPUs are physical GPUs ([`HostNode::physical_gpus`]), not the capacity the
//! device plugin advertises, which sharing multiplies or empties.

use std::{collections::BTreeMap, sync::Arc};

use async_trait::async_trait;

use crate::{
    backends::kube::{
        ACCELERATOR_LABEL, BLOCK_LABEL, CLIQUE_LABEL, GPU_PRODUCT_LABEL, NODE_ISOLATION, POOL,
        TENANT, ZONE_LABEL,
        host::nodes::{HostNode, HostNodes},
    },
    catalog,
    context::Context,
    diag::Diagnostic,
    kinds::{DataSourceKind, ReadResponse},
    path::AttrPath,
    resources::gpu_node_pool::{Backend, FromSettings, node_config::is_free},
    schema::{Attribute, Block, FieldDocs, Schema},
    value::{Type, Value},
};

/// The data source type name.
pub const TYPE_NAME: &str = "gpufleet_fleet_inventory";

/// The `gpufleet_fleet_inventory` data source over a node-pool [`Backend`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetInventory<B = FromSettings>(pub B);

fn node_type() -> Type {
    Type::object([
        ("name", Type::String),
        ("gpu_product", Type::String),
        ("gpus", Type::Number),
        ("block", Type::String),
        ("zone", Type::String),
        ("nvlink_domain", Type::String),
        ("ready", Type::Bool),
        ("pool", Type::String),
        ("tenant", Type::String),
        ("isolation", Type::String),
        ("free", Type::Bool),
    ])
}

/// Descriptions of the fields of [`node_type`].
fn node_docs() -> FieldDocs {
    FieldDocs::new().fields(
        "",
        &[
            ("name", "The host-cluster node's name."),
            (
                "gpu_product",
                "Its GPU product: the catalog's name for its `nvidia.com/gpu.product` label, \
                 or the label itself when the catalog does not know it.",
            ),
            (
                "gpus",
                "Its physical GPUs, whatever sharing does to the advertised capacity \
                 (`nvidia.com/gpu.count`, else the capacity over `nvidia.com/gpu.replicas`).",
            ),
            (
                "block",
                "Its switch block: topograph's `network.topology.nvidia.com/block` label.",
            ),
            ("zone", "Its `topology.kubernetes.io/zone` label."),
            (
                "nvlink_domain",
                "Its NVLink domain: GPU feature discovery's `nvidia.com/gpu.clique`, else \
                 topograph's `network.topology.nvidia.com/accelerator`; null with neither \
                 (such as an HGX server whose NVLink ends at the node).",
            ),
            ("ready", "Whether the node is Ready."),
            (
                "pool",
                "The pool holding it, `<virtual cluster>.<pool>` (its `gpufleet.dev/pool` \
                 label); null when no pool does.",
            ),
            (
                "tenant",
                "The virtual cluster a dedicated or private pool holds it for (its \
                 `gpufleet.dev/tenant` label); null otherwise.",
            ),
            (
                "isolation",
                "The tier of the virtual cluster whose pool holds it (its \
                 `gpufleet.dev/isolation` label); null when no pool holds it.",
            ),
            (
                "free",
                "Whether it is free: Ready, not cordoned and held by no pool.",
            ),
        ],
    )
}

fn product_type() -> Type {
    Type::object([
        ("gpu_product", Type::String),
        ("nodes", Type::Number),
        ("free_nodes", Type::Number),
        ("gpus", Type::Number),
        ("free_gpus", Type::Number),
        ("held_gpus", Type::Number),
    ])
}

/// Descriptions of the fields of [`product_type`].
fn product_docs() -> FieldDocs {
    FieldDocs::new().fields(
        "",
        &[
            ("gpu_product", "The GPU product, as in `nodes`."),
            ("nodes", "Matching nodes of the product."),
            ("free_nodes", "How many of them are free."),
            ("gpus", "Physical GPUs on those nodes."),
            ("free_gpus", "GPUs on the free nodes."),
            ("held_gpus", "GPUs on nodes a pool holds."),
        ],
    )
}

fn inventory_schema() -> Schema {
    Schema::new(
        Block::new(
            "The host cluster's GPU nodes (those with the `nvidia.com/gpu.product` label of GPU \
             feature discovery), by product, switch block and zone, with the pool and tenant holding each, \
             the free capacity per product and the fraction of GPUs held. A node is free when \
             it is Ready, not cordoned and held by no `gpufleet_gpu_node_pool`. Needs the \
             provider's `kubernetes` block.",
        )
        .attr(Attribute::optional("gpu_product", Type::String).describe(
            "Only nodes of this product (catalog aliases work). Unknown products are an error.",
        ))
        .attr(Attribute::optional("block", Type::String).describe(
            "Only nodes in this switch block (NVIDIA topograph's \
             `network.topology.nvidia.com/block` label: the leaf switches a node hangs off, \
             a rack or a few).",
        ))
        .attr(Attribute::optional("zone", Type::String).describe(
            "Only nodes in this zone (the `topology.kubernetes.io/zone` label).",
        ))
        .attr(Attribute::optional("holder", Type::String).describe(
            "Only nodes held by this pool (`<virtual cluster>.<pool>`, the \
             `gpufleet.dev/pool` label) or, when it has no dot, by this tenant (virtual \
             cluster).",
        ))
        .attr(Attribute::optional("free_only", Type::Bool).describe("Only free nodes."))
        .attr(
            Attribute::computed("nodes", Type::list(node_type()))
                .describe("The matching nodes, sorted by name.")
                .describe_fields(node_docs()),
        )
        .attr(
            Attribute::computed("products", Type::list(product_type())).describe(
                "Per GPU product among the matching nodes, sorted by product: nodes, free \
                 nodes, GPUs, free and held GPUs.",
            )
            .describe_fields(product_docs()),
        )
        .attr(
            Attribute::computed("total_gpus", Type::Number).describe("GPUs on the matching nodes."),
        )
        .attr(
            Attribute::computed("held_gpus", Type::Number)
                .describe("GPUs on matching nodes held by a pool."),
        )
        .attr(
            Attribute::computed("held_fraction", Type::Number).describe(
                "`held_gpus / total_gpus`, rounded half up to 4 decimal places, between \
                 0 and 1 (0 when there are no GPUs).",
            ),
        ),
    )
}

fn text(v: Option<&str>) -> Value {
    v.map_or(Value::Null, Value::string)
}

/// The catalog's name for the node's product; the label as it is when the catalog does not
/// know it.
fn product_of(n: &HostNode) -> Option<&str> {
    n.gpu_model()
        .map(|m| m.product)
        .or_else(|| n.label(GPU_PRODUCT_LABEL))
}

fn node_value(n: &HostNode) -> Value {
    Value::object([
        ("name", Value::string(n.name.clone())),
        ("gpu_product", text(product_of(n))),
        ("gpus", Value::int(n.physical_gpus().into())),
        ("block", text(n.label(BLOCK_LABEL))),
        ("zone", text(n.label(ZONE_LABEL))),
        (
            "nvlink_domain",
            text(n.label(CLIQUE_LABEL).or_else(|| n.label(ACCELERATOR_LABEL))),
        ),
        ("ready", Value::Bool(n.ready)),
        ("pool", text(n.label(POOL))),
        ("tenant", text(n.label(TENANT))),
        ("isolation", text(n.label(NODE_ISOLATION))),
        ("free", Value::Bool(is_free(n))),
    ])
}

fn held_by(n: &HostNode, holder: &str) -> bool {
    match n.label(POOL) {
        Some(p) if holder.contains('.') => p == holder,
        Some(p) => n.label(TENANT) == Some(holder) || p.split('.').next() == Some(holder),
        None => false,
    }
}

/// `held / total` rounded half up to 4 decimal places (0 when `total` is 0). Explicit about
/// the rounding: `BigDecimal::round` follows a default that a build setting can change.
fn held_fraction(held: i64, total: i64) -> bigdecimal::BigDecimal {
    if total == 0 {
        return bigdecimal::BigDecimal::from(0);
    }
    (bigdecimal::BigDecimal::from(held) / bigdecimal::BigDecimal::from(total))
        .with_scale_round(4, bigdecimal::RoundingMode::HalfUp)
}

/// The data source's value for the listed `nodes` and the filters in `config`.
pub fn inventory(config: &Value, nodes: &[HostNode]) -> Value {
    let product = config.get("gpu_product").as_str().and_then(catalog::lookup);
    let block = config.get("block").as_str();
    let zone = config.get("zone").as_str();
    let holder = config.get("holder").as_str();
    let free_only = config.get("free_only").as_bool().unwrap_or(false);
    let mut picked: Vec<&HostNode> = nodes
        .iter()
        .filter(|n| product.is_none_or(|m| n.is_product(m)))
        .filter(|n| block.is_none_or(|b| n.label(BLOCK_LABEL) == Some(b)))
        .filter(|n| zone.is_none_or(|z| n.label(ZONE_LABEL) == Some(z)))
        .filter(|n| holder.is_none_or(|h| held_by(n, h)))
        .filter(|n| !free_only || is_free(n))
        .collect();
    picked.sort_by(|a, b| a.name.cmp(&b.name));
    // product -> (nodes, free nodes, gpus, free gpus, held gpus)
    let mut per: BTreeMap<String, [i64; 5]> = BTreeMap::new();
    for n in &picked {
        let e = per
            .entry(product_of(n).unwrap_or_default().to_owned())
            .or_default();
        let g = i64::from(n.physical_gpus());
        e[0] += 1;
        e[2] += g;
        if is_free(n) {
            e[1] += 1;
            e[3] += g;
        }
        if n.label(POOL).is_some() {
            e[4] += g;
        }
    }
    let total: i64 = per.values().map(|e| e[2]).sum();
    let held: i64 = per.values().map(|e| e[4]).sum();
    let fraction = held_fraction(held, total);
    let mut out = config.clone();
    let set = |out: &mut Value, k: &str, v: Value| {
        if let Some(m) = out.as_object_mut() {
            m.insert(k.to_owned(), v);
        }
    };
    set(
        &mut out,
        "nodes",
        Value::List(picked.iter().map(|n| node_value(n)).collect()),
    );
    set(
        &mut out,
        "products",
        Value::List(
            per.iter()
                .map(|(p, e)| {
                    Value::object([
                        ("gpu_product", Value::string(p.clone())),
                        ("nodes", Value::int(e[0])),
                        ("free_nodes", Value::int(e[1])),
                        ("gpus", Value::int(e[2])),
                        ("free_gpus", Value::int(e[3])),
                        ("held_gpus", Value::int(e[4])),
                    ])
                })
                .collect(),
        ),
    );
    set(&mut out, "total_gpus", Value::int(total));
    set(&mut out, "held_gpus", Value::int(held));
    set(&mut out, "held_fraction", Value::Number(fraction));
    out
}

#[async_trait]
impl<B: Backend> DataSourceKind for FleetInventory<B> {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        inventory_schema()
    }

    async fn read(&self, ctx: &Context, config: Value) -> ReadResponse {
        // Checked here, not at validate: the product may be declared in the provider block.
        let unknown = crate::gpu_products::check_product(
            &ctx.settings.gpu_products,
            AttrPath::attr("gpu_product"),
            config.get("gpu_product"),
        );
        if unknown.has_error() {
            return ReadResponse {
                new_state: Value::Null,
                diagnostics: unknown,
            };
        }
        let host = match self.0.connect(ctx, TYPE_NAME).await {
            Ok(h) => h,
            Err(diagnostics) => {
                return ReadResponse::refused(Value::Null, diagnostics);
            }
        };
        // The product filter cannot go into the selector, which matches labels exactly while
        // GFD suffixes those of shared nodes: `inventory` filters through the catalog.
        match host.list_nodes(GPU_PRODUCT_LABEL).await {
            Ok(nodes) => ReadResponse::observed(inventory(&config, &nodes)),
            Err(e) => ReadResponse {
                new_state: Value::Null,
                diagnostics: Diagnostic::error(
                    "Fleet Inventory Read Failed",
                    format!("{TYPE_NAME}: {e}."),
                )
                .into(),
            },
        }
    }
}

/// A host given directly, for tests.
pub fn with_host<A: HostNodes + 'static>(host: Arc<A>) -> FleetInventory<Arc<A>> {
    FleetInventory(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::kube::host::memory::MemoryHost;

    #[test]
    fn inventory_counts_free_and_held_capacity() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 3)]);
        host.add_nodes("NVIDIA-H200", "r2", 1, 8);
        host.claim_behind_the_back("gpu-r1-00", "team-a.infer");
        let cfg = Value::object([
            ("gpu_product", Value::Null),
            ("block", Value::Null),
            ("zone", Value::Null),
            ("holder", Value::Null),
            ("free_only", Value::Null),
        ]);
        let v = inventory(&cfg, &host.nodes_now());
        assert_eq!(v.get("total_gpus"), &Value::int(32));
        assert_eq!(v.get("held_gpus"), &Value::int(8));
        assert_eq!(
            v.get("held_fraction")
                .as_number()
                .map(ToString::to_string)
                .as_deref(),
            Some("0.2500")
        );
        let l40s = &v.get("products").as_seq().expect("products")[1];
        assert_eq!(l40s.get("free_nodes"), &Value::int(2));
        let mut by_tenant = cfg.clone();
        set_holder(&mut by_tenant, "team-a");
        let v = inventory(&by_tenant, &host.nodes_now());
        assert_eq!(v.get("nodes").as_seq().map(<[Value]>::len), Some(1));
    }

    /// What the GPU operator does to a node once time-slicing with 4 replicas is applied:
    /// GFD suffixes the product and records the replicas; the device plugin advertises 4×.
    fn time_slice(host: &MemoryHost, name: &str) {
        host.edit_node(name, |n| {
            n.labels.insert(
                GPU_PRODUCT_LABEL.to_owned(),
                "NVIDIA-L40S-SHARED".to_owned(),
            );
            n.labels
                .insert("nvidia.com/gpu.replicas".to_owned(), "4".to_owned());
            n.gpu_capacity *= 4;
        });
    }

    fn unfiltered() -> Value {
        Value::object([
            ("gpu_product", Value::Null),
            ("block", Value::Null),
            ("zone", Value::Null),
            ("holder", Value::Null),
            ("free_only", Value::Null),
        ])
    }

    #[test]
    fn shared_nodes_count_physical_gpus_under_their_catalog_product() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 2)]);
        host.claim_behind_the_back("gpu-r1-00", "team-a.infer");
        time_slice(&host, "gpu-r1-00");
        let v = inventory(&unfiltered(), &host.nodes_now());
        assert_eq!(v.get("total_gpus"), &Value::int(16), "not 8 × 4 + 8");
        assert_eq!(v.get("held_gpus"), &Value::int(8));
        let products = v.get("products").as_seq().expect("products");
        assert_eq!(products.len(), 1, "one product, shared or not");
        assert_eq!(
            products[0].get("gpu_product"),
            &Value::string("NVIDIA-L40S")
        );
        let nodes = v.get("nodes").as_seq().expect("nodes");
        assert_eq!(nodes[0].get("gpu_product"), &Value::string("NVIDIA-L40S"));
        assert_eq!(nodes[0].get("gpus"), &Value::int(8));
    }

    #[tokio::test]
    async fn the_product_filter_finds_shared_nodes() {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[("r1", 2)]);
        host.add_nodes("NVIDIA-H200", "r2", 1, 8);
        time_slice(&host, "gpu-r1-01");
        let mut cfg = unfiltered();
        if let Some(m) = cfg.as_object_mut() {
            m.insert("gpu_product".into(), Value::string("l40s"));
        }
        let ds = with_host(Arc::clone(&host));
        let got = ds.read(&Context::default(), cfg).await;
        assert!(!got.diagnostics.has_error(), "{:?}", got.diagnostics);
        let names: Vec<&Value> = got
            .new_state
            .get("nodes")
            .as_seq()
            .unwrap_or_default()
            .iter()
            .map(|n| n.get("name"))
            .collect();
        assert_eq!(
            names,
            [&Value::string("gpu-r1-00"), &Value::string("gpu-r1-01")]
        );
        assert_eq!(got.new_state.get("total_gpus"), &Value::int(16));
    }

    fn fraction_of(held: u32, total: u32) -> String {
        let host = MemoryHost::with_nodes("NVIDIA-L40S", &[]);
        host.add_node("held", "NVIDIA-L40S", "r1", held);
        host.add_node("free", "NVIDIA-L40S", "r1", total - held);
        host.claim_behind_the_back("held", "team-a.infer");
        let v = inventory(&unfiltered(), &host.nodes_now());
        v.get("held_fraction")
            .as_number()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    #[test]
    fn held_fraction_is_held_over_total_rounded_half_up_to_four_places() {
        assert_eq!(fraction_of(1, 3), "0.3333");
        assert_eq!(fraction_of(2, 3), "0.6667");
        // Exactly halfway at the fifth place: half up, as "rounded to 4 places" reads.
        assert_eq!(fraction_of(1, 32), "0.0313");
        assert_eq!(fraction_of(3, 32), "0.0938");
        let empty = inventory(&unfiltered(), &[]);
        assert_eq!(
            empty
                .get("held_fraction")
                .as_number()
                .map(ToString::to_string)
                .as_deref(),
            Some("0")
        );
    }

    /// A node labelled only as production fleets label them: GFD, topograph and the zone,
    /// none of the lab's own labels.
    fn production_node(
        host: &MemoryHost,
        name: &str,
        block: &str,
        zone: &str,
        clique: Option<&str>,
    ) {
        host.add_node(name, "NVIDIA-GB200", "unused", 4);
        host.edit_node(name, |n| {
            n.labels
                .retain(|k, _| !k.starts_with("gpufleet.dev/") && k != BLOCK_LABEL);
            n.labels.insert(BLOCK_LABEL.to_owned(), block.to_owned());
            n.labels.insert(ZONE_LABEL.to_owned(), zone.to_owned());
            if let Some(c) = clique {
                n.labels.insert(CLIQUE_LABEL.to_owned(), c.to_owned());
            }
        });
    }

    #[test]
    fn nodes_are_placed_by_the_labels_production_fleets_carry() {
        let host = MemoryHost::with_nodes("NVIDIA-GB200", &[]);
        production_node(&host, "a", "block-1", "zone-a", Some("c0ffee.1"));
        production_node(&host, "b", "block-2", "zone-b", None);
        host.edit_node("b", |n| {
            n.labels
                .insert(ACCELERATOR_LABEL.to_owned(), "nvl-7".to_owned());
        });
        production_node(&host, "c", "block-2", "zone-a", None);
        let all = inventory(&unfiltered(), &host.nodes_now());
        let nodes = all.get("nodes").as_seq().expect("nodes");
        assert_eq!(nodes[0].get("block"), &Value::string("block-1"));
        assert_eq!(nodes[0].get("zone"), &Value::string("zone-a"));
        assert_eq!(nodes[0].get("nvlink_domain"), &Value::string("c0ffee.1"));
        assert_eq!(nodes[1].get("nvlink_domain"), &Value::string("nvl-7"));
        assert_eq!(nodes[2].get("nvlink_domain"), &Value::Null);
        let names = |cfg: &Value| -> Vec<Value> {
            inventory(cfg, &host.nodes_now())
                .get("nodes")
                .as_seq()
                .unwrap_or_default()
                .iter()
                .map(|n| n.get("name").clone())
                .collect()
        };
        let mut by_block = unfiltered();
        if let Some(m) = by_block.as_object_mut() {
            m.insert("block".into(), Value::string("block-2"));
        }
        assert_eq!(names(&by_block), [Value::string("b"), Value::string("c")]);
        let mut by_zone = by_block.clone();
        if let Some(m) = by_zone.as_object_mut() {
            m.insert("zone".into(), Value::string("zone-a"));
        }
        assert_eq!(names(&by_zone), [Value::string("c")]);
    }

    fn set_holder(v: &mut Value, h: &str) {
        if let Some(m) = v.as_object_mut() {
            m.insert("holder".into(), Value::string(h));
        }
    }
}
