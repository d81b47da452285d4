//! GPU products the operator declares in the provider block (`gpu_product { ... }`) for
//! hardware the static catalog ([`crate::catalog`]) lacks, and the context-aware lookup that
//! puts them beside the catalog.
//!
//! What a configuration may use is decided from its context: [`resolve`] looks in the static
//! catalog, then in the products the provider block declared ([`Declared`], part of the
//! provider settings). Only plan and read have the settings, so a product the catalog lacks
//! is never refused at validate (`terraform validate` runs on an unconfigured provider), and
//! while the blocks are unknown it is undecided, not refused.
//!
//! Declared products are also registered for this process with the catalog, so that code
//! without a context finds them through [`crate::catalog::lookup`].

use crate::{
    catalog::{self, GpuModel, MigDecl, ProductDecl},
    diag::Diagnostics,
    path::AttrPath,
    schema::{AttrMode, Attribute, Block, NestedBlock, Nesting},
    validate::IntBetween,
    value::{Type, Value},
};

/// The provider block's repeated block name.
pub const BLOCK: &str = "gpu_product";

/// GPUs per node of the catalog's products whose node is not an 8-GPU HGX baseboard: the
/// GB200 and GB300 compute trays of an NVL72 rack hold 4 GPUs each.
const TRAY_GPUS: &[(&str, u32)] = &[("NVIDIA-GB200", 4), ("NVIDIA-GB300", 4)];

/// The provider's `gpu_product` block.
pub fn provider_block() -> NestedBlock {
    NestedBlock::list(
        BLOCK,
        Block::new(
            "A GPU product the built-in catalog lacks, so that pools, `gpufleet_gpu_catalog` \
             and `gpufleet_fleet_inventory` accept it instead of refusing it at plan. Repeat \
             the block for each product. A name the catalog already has is refused.",
        )
        .attr(Attribute::required("name", Type::String).describe(
            "The value GPU feature discovery writes in the `nvidia.com/gpu.product` label of \
             the nodes, e.g. `NVIDIA-L20` (`nvidia-smi --query-gpu=name` with spaces turned \
             into dashes).",
        ))
        .attr(
            Attribute::optional("aliases", Type::list(Type::String))
                .describe("Other spellings pools may use for the product, e.g. `L20`."),
        )
        .attr(
            Attribute::optional("display_name", Type::String)
                .describe("Name for humans. Defaults to `name`."),
        )
        .attr(
            Attribute::optional("architecture", Type::String)
                .describe("GPU architecture, e.g. `hopper` or `blackwell`. Defaults to `unknown`."),
        )
        .attr(
            Attribute::required("memory_mib", Type::Number)
                .validate(IntBetween::new(1, 16 * 1024 * 1024))
                .describe(
                    "Framebuffer per GPU in MiB, as GPU feature discovery reports it in \
                     `nvidia.com/gpu.memory`.",
                ),
        )
        .attr(
            Attribute::optional("gpus_per_node", Type::Number)
                .validate(IntBetween::new(1, 64))
                .describe(
                    "GPUs in one node of this product, used by `source = \"auto\"` pools for \
                     the Karpenter GPU limit. Leave it out when servers differ.",
                ),
        )
        .attr(
            Attribute::optional("nvlink_domain_size", Type::Number)
                .validate(IntBetween::new(1, 1024))
                .describe("GPUs sharing one NVLink fabric; leave it out for PCIe cards."),
        )
        .attr(
            Attribute::nested(
                "mig_profiles",
                Nesting::List,
                AttrMode::Optional,
                vec![
                    Attribute::required("name", Type::String).describe(
                        "Profile name as `<compute slices>g.<memory GB>gb`, e.g. `1g.12gb`, \
                         as `nvidia-smi mig -lgip` lists it.",
                    ),
                    Attribute::required("memory_slices", Type::Number)
                        .validate(IntBetween::new(1, 8))
                        .describe(
                            "Memory slices the profile takes (the size in `nvidia-smi mig \
                             -lgipp`'s placements), out of the GPU's 8 (4 on A30-class parts).",
                        ),
                    Attribute::required("max_instances", Type::Number)
                        .validate(IntBetween::new(1, 7))
                        .describe("Most instances of the profile on one GPU."),
                ],
            )
            .describe(
                "MIG profiles of the product; leave it out when it does not support MIG. \
                 The whole-GPU profile decides the slices one GPU has.",
            ),
        ),
    )
}

/// `<g>g.<n>gb` as (compute slices, memory GB).
fn parse_mig_name(name: &str) -> Option<(u8, u16)> {
    let (g, rest) = name.split_once("g.")?;
    let gb = rest.strip_suffix("gb")?;
    let g: u8 = g.parse().ok()?;
    let gb: u16 = gb.parse().ok()?;
    (1..=7).contains(&g).then_some((g, gb))
}

/// Whether `s` can be a Kubernetes label value GFD writes.
fn label_value(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn small<T: TryFrom<i64>>(v: &Value) -> Option<T> {
    v.as_i64().and_then(|n| T::try_from(n).ok())
}

/// Decodes one wholly known block, reporting what is wrong at `path`.
fn decode(v: &Value, path: &AttrPath, d: &mut Diagnostics) -> Option<ProductDecl> {
    let name = v.get("name").as_str()?.trim().to_owned();
    let mut ok = true;
    if !label_value(&name) {
        d.error_at(
            path.push_attr("name"),
            "Invalid GPU Product Name",
            format!(
                "{name:?} is not a value GPU feature discovery can write in the \
                 nvidia.com/gpu.product label: at most 63 letters, digits, '-', '_' and '.', \
                 starting and ending with a letter or digit."
            ),
        );
        ok = false;
    }
    let mut mig_profiles = Vec::new();
    for (i, p) in v
        .get("mig_profiles")
        .as_seq()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = path.push_attr("mig_profiles").push_index(i);
        let pname = p
            .get("name")
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_lowercase();
        let Some((compute_slices, memory_gb)) = parse_mig_name(&pname) else {
            d.error_at(
                at.push_attr("name"),
                "Invalid MIG Profile Name",
                format!(
                    "{pname:?} is not a MIG profile name: write <compute slices>g.<memory \
                     GB>gb with 1 to 7 compute slices, e.g. \"1g.12gb\" or \"7g.96gb\"."
                ),
            );
            ok = false;
            continue;
        };
        if mig_profiles.iter().any(|m: &MigDecl| m.name == pname) {
            d.error_at(
                at.push_attr("name"),
                "Duplicate MIG Profile",
                format!("{pname} is declared twice for {name}."),
            );
            ok = false;
        }
        mig_profiles.push(MigDecl {
            name: pname,
            compute_slices,
            memory_gb,
            memory_slices: small(p.get("memory_slices")).unwrap_or(1),
            max_instances: small(p.get("max_instances")).unwrap_or(1),
        });
    }
    ok.then(|| ProductDecl {
        display_name: v.get("display_name").as_str().unwrap_or(&name).to_owned(),
        architecture: v
            .get("architecture")
            .as_str()
            .unwrap_or("unknown")
            .to_owned(),
        aliases: v.get("aliases").strings(),
        memory_mib: small(v.get("memory_mib")).unwrap_or(0),
        gpus_per_node: small(v.get("gpus_per_node")),
        nvlink_domain_size: small(v.get("nvlink_domain_size")),
        mig_profiles,
        name,
    })
}

/// The provider block's offline checks of its `gpu_product` blocks: names GFD can write, no
/// name the catalog or another block already has, well-formed MIG profiles.
pub fn check(blocks: &Value) -> Diagnostics {
    let mut d = Diagnostics::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for (i, b) in blocks.as_seq().unwrap_or_default().iter().enumerate() {
        let path = AttrPath::attr(BLOCK).push_index(i);
        if !b.is_wholly_known() {
            continue;
        }
        let Some(decl) = decode(b, &path, &mut d) else {
            continue;
        };
        for (n, spelling) in std::iter::once(&decl.name).chain(&decl.aliases).enumerate() {
            let at = if n == 0 {
                path.push_attr("name")
            } else {
                path.push_attr("aliases").push_index(n - 1)
            };
            if let Some(m) = catalog::catalog_model(spelling) {
                d.error_at(
                    at,
                    "GPU Product Already In Catalog",
                    format!(
                        "{spelling:?} is the catalog's {}; declare only products the catalog \
                         lacks (see gpufleet_gpu_catalog).",
                        m.product
                    ),
                );
                continue;
            }
            let key = catalog::product_key(spelling);
            if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
                d.error_at(
                    at,
                    "Duplicate GPU Product",
                    format!("{spelling:?} is already declared by the gpu_product {other:?}."),
                );
            } else {
                seen.push((key, decl.name.clone()));
            }
        }
    }
    d
}

/// The products a provider configuration declared.
#[derive(Debug, Clone)]
pub enum Declared {
    /// Not known: the `gpu_product` blocks depend on values Terraform does not know yet.
    /// Products the catalog lacks are then not refused.
    NotKnown,
    /// The declared products (possibly none).
    Known(Vec<&'static GpuModel>),
}

impl Default for Declared {
    /// None declared.
    fn default() -> Declared {
        Declared::Known(Vec::new())
    }
}

impl Declared {
    /// Decodes the provider block's `gpu_product` value and registers its products for this
    /// process. Blocks [`check`] refuses are left out.
    pub fn from_config(blocks: &Value) -> Declared {
        if !blocks.is_wholly_known() {
            return Declared::NotKnown;
        }
        let mut ignored = Diagnostics::new();
        if check(blocks).has_error() {
            tracing::warn!("gpu_product blocks with errors are ignored");
        }
        let mut models: Vec<&'static GpuModel> = Vec::new();
        for (i, b) in blocks.as_seq().unwrap_or_default().iter().enumerate() {
            let path = AttrPath::attr(BLOCK).push_index(i);
            let Some(decl) = decode(b, &path, &mut ignored) else {
                continue;
            };
            let shadows = std::iter::once(&decl.name)
                .chain(&decl.aliases)
                .any(|s| catalog::catalog_model(s).is_some());
            let again = models
                .iter()
                .any(|m| catalog::product_key(m.product) == catalog::product_key(&decl.name));
            if !shadows && !again {
                models.push(catalog::register(decl));
            }
        }
        Declared::Known(models)
    }

    /// The declared products, none when not known.
    pub fn models(&self) -> &[&'static GpuModel] {
        match self {
            Declared::NotKnown => &[],
            Declared::Known(m) => m,
        }
    }
}

/// What a product name is in a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// In the catalog or declared.
    Found(&'static GpuModel),
    /// Not in the catalog, and the provider's declarations are not known yet.
    Undecided,
    /// Neither in the catalog nor declared.
    Unknown,
}

/// Resolves a product name against the catalog and the declared products.
pub fn resolve(declared: &Declared, name: &str) -> Resolution {
    if let Some(m) = catalog::catalog_model(name) {
        return Resolution::Found(m);
    }
    let key = catalog::product_key(name);
    let found = declared.models().iter().copied().find(|m| {
        std::iter::once(m.product)
            .chain(m.aliases.iter().copied())
            .any(|s| catalog::product_key(s) == key)
    });
    match (found, declared) {
        (Some(m), _) => Resolution::Found(m),
        (None, Declared::NotKnown) => Resolution::Undecided,
        (None, Declared::Known(_)) => Resolution::Unknown,
    }
}

/// Every product a context knows: the catalog's, then the declared ones, sorted by name.
pub fn all_models(declared: &Declared) -> Vec<&'static GpuModel> {
    let mut all: Vec<&'static GpuModel> = catalog::models().iter().collect();
    all.extend(declared.models().iter().copied());
    all.sort_by_key(|m| m.product);
    all
}

/// The "Unknown GPU Product" diagnostic, on `path`, listing what the context knows.
pub fn unknown_product(declared: &Declared, path: AttrPath, name: &str) -> Diagnostics {
    let names: Vec<&str> = all_models(declared).iter().map(|m| m.product).collect();
    let mut d = Diagnostics::new();
    d.error_at(
        path,
        "Unknown GPU Product",
        format!(
            "{name:?} is not a GPU product gpufleet knows. Use the name GPU feature discovery \
             writes in the nvidia.com/gpu.product label, or declare the product in a \
             gpu_product block of the provider configuration. Known products are: {}.",
            names.join(", ")
        ),
    );
    d
}

/// The plan-time check of a product attribute: refused only when known and neither in the
/// catalog nor declared.
pub fn check_product(declared: &Declared, path: AttrPath, value: &Value) -> Diagnostics {
    match value.as_str() {
        Some(name) if resolve(declared, name) == Resolution::Unknown => {
            unknown_product(declared, path, name)
        }
        _ => Diagnostics::new(),
    }
}

/// GPUs in one node of a product, when its nodes all have the same number: declared, 4 for
/// the NVL72 compute trays, 8 for products on an 8-GPU HGX baseboard; `None` for PCIe cards,
/// whose servers hold 1 to 8.
pub fn gpus_per_node(model: &GpuModel) -> Option<u32> {
    if let Some(declared) = catalog::declaration_of(model) {
        return declared.gpus_per_node;
    }
    if let Some((_, n)) = TRAY_GPUS.iter().find(|(p, _)| *p == model.product) {
        return Some(*n);
    }
    (model.nvlink_domain_size == Some(8)).then_some(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(name: &str, extra: &[(&str, Value)]) -> Value {
        let mut attrs = vec![
            ("name", Value::string(name)),
            ("aliases", Value::Null),
            ("display_name", Value::Null),
            ("architecture", Value::Null),
            ("memory_mib", Value::int(97_871)),
            ("gpus_per_node", Value::Null),
            ("nvlink_domain_size", Value::Null),
            ("mig_profiles", Value::Null),
        ];
        for (k, v) in extra {
            attrs.retain(|(a, _)| a != k);
            attrs.push((k, v.clone()));
        }
        Value::object(attrs)
    }

    fn mig(name: &str, memory_slices: i64, max: i64) -> Value {
        Value::object([
            ("name", Value::string(name)),
            ("memory_slices", Value::int(memory_slices)),
            ("max_instances", Value::int(max)),
        ])
    }

    #[test]
    fn declared_products_resolve_in_their_context_and_by_label() {
        let blocks = Value::List(vec![block(
            "NVIDIA-Test-H20X",
            &[
                ("aliases", Value::List(vec![Value::string("H20X")])),
                ("gpus_per_node", Value::int(8)),
                (
                    "mig_profiles",
                    Value::List(vec![mig("1g.12gb", 1, 7), mig("7g.96gb", 8, 1)]),
                ),
            ],
        )]);
        assert!(check(&blocks).is_empty());
        let declared = Declared::from_config(&blocks);
        let Resolution::Found(m) = resolve(&declared, "h20x") else {
            panic!("alias resolves");
        };
        assert_eq!(m.product, "NVIDIA-Test-H20X");
        assert_eq!(m.compute_slices(), 7);
        assert_eq!(gpus_per_node(m), Some(8));
        // Node labels GFD rewrote under sharing find it without a context.
        assert_eq!(
            catalog::lookup("NVIDIA-Test-H20X-SHARED").map(|m| m.product),
            Some("NVIDIA-Test-H20X")
        );
        // Another context that does not declare it refuses it; an unconfigured one waits.
        assert_eq!(
            resolve(&Declared::Known(Vec::new()), "H20X"),
            Resolution::Unknown
        );
        assert_eq!(resolve(&Declared::NotKnown, "H20X"), Resolution::Undecided);
        // Declaring it again leaks nothing new.
        let again = Declared::from_config(&blocks);
        assert!(std::ptr::eq(again.models()[0], m));
    }

    #[test]
    fn catalog_products_win_and_cannot_be_declared() {
        let blocks = Value::List(vec![
            block("NVIDIA-H100-80GB-HBM3", &[]),
            block("NVIDIA-Test-Dup", &[]),
            block("NVIDIA-Test-Dup", &[]),
            block("bad name", &[]),
            block(
                "NVIDIA-Test-Mig",
                &[("mig_profiles", Value::List(vec![mig("big", 1, 1)]))],
            ),
        ]);
        let d = check(&blocks);
        let at: Vec<String> = d
            .iter()
            .filter_map(|x| x.path.as_ref().map(ToString::to_string))
            .collect();
        assert_eq!(
            at,
            [
                "gpu_product[0].name",
                "gpu_product[2].name",
                "gpu_product[3].name",
                "gpu_product[4].mig_profiles[0].name"
            ],
            "{d:?}"
        );
        let declared = Declared::from_config(&blocks);
        assert!(
            declared
                .models()
                .iter()
                .all(|m| m.product != "NVIDIA-H100-80GB-HBM3")
        );
    }

    #[test]
    fn unknown_blocks_leave_products_undecided() {
        let declared = Declared::from_config(&Value::unknown());
        assert_eq!(resolve(&declared, "RTX-9090"), Resolution::Undecided);
        assert!(
            check_product(&declared, AttrPath::attr("p"), &Value::string("RTX-9090")).is_empty()
        );
        let known = Declared::Known(Vec::new());
        let d = check_product(&known, AttrPath::attr("p"), &Value::string("RTX-9090"));
        assert!(d.0[0].detail.contains("gpu_product block"), "{d:?}");
    }

    #[test]
    fn gpus_per_node_follows_the_reference_platform() {
        let get = |p: &str| catalog::lookup(p).and_then(gpus_per_node);
        assert_eq!(get("NVIDIA-H100-80GB-HBM3"), Some(8));
        assert_eq!(get("NVIDIA-GB200"), Some(4));
        assert_eq!(get("NVIDIA-L4"), None);
    }
}
