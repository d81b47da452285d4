//! `gpufleet_gpu_catalog`: the GPU products gpufleet knows, with memory, MIG profiles and
//! NVLink domain size: the built-in catalog and the products the provider block declares.
//! Needs no backend, so modules can use it anywhere, even at plan time.

use async_trait::async_trait;

use crate::{
    catalog::GpuModel,
    context::Context,
    diag::Diagnostics,
    functions::{mig_profile_docs, mig_profile_type, mig_profile_value},
    gpu_products::{self, Declared, Resolution},
    kinds::{DataSourceKind, ReadResponse},
    path::AttrPath,
    schema::{Attribute, Block, FieldDocs, Schema},
    value::{Type, Value},
};

/// The `gpufleet_gpu_catalog` data source.
#[derive(Debug, Clone, Copy)]
pub struct GpuCatalog;

fn gpu_type() -> Type {
    Type::object([
        ("product", Type::String),
        ("display_name", Type::String),
        ("architecture", Type::String),
        ("memory_mib", Type::Number),
        ("memory_gb", Type::Number),
        ("mig_capable", Type::Bool),
        ("mig_profiles", Type::list(mig_profile_type())),
        ("nvlink_domain_size", Type::Number),
        ("gpus_per_node", Type::Number),
    ])
}

/// Descriptions of the fields of [`gpu_type`].
fn gpu_docs() -> FieldDocs {
    let docs = FieldDocs::new().fields(
        "",
        &[
            (
                "product",
                "The `nvidia.com/gpu.product` label value GPU feature discovery writes, e.g. \
                 `NVIDIA-A100-SXM4-80GB`.",
            ),
            (
                "display_name",
                "Name for people, e.g. `NVIDIA A100 80GB SXM4`.",
            ),
            (
                "architecture",
                "GPU architecture, e.g. `hopper` or `blackwell`; `unknown` for a declared \
                 product that names none.",
            ),
            (
                "memory_mib",
                "Memory per GPU in MiB, as GPU feature discovery reports it in \
                 `nvidia.com/gpu.memory`.",
            ),
            (
                "memory_gb",
                "Memory per GPU in GB, rounded up, as the whole-GPU MIG profile names it \
                 (`80` for 81559 MiB).",
            ),
            (
                "mig_capable",
                "Whether the GPU can be partitioned with Multi-Instance GPU.",
            ),
            (
                "mig_profiles",
                "The MIG profiles it supports, smallest first; empty without MIG.",
            ),
            (
                "nvlink_domain_size",
                "GPUs in one NVLink domain on the product's reference platform (8 on an HGX \
                 baseboard, 72 in an NVL72 rack); null without NVLink.",
            ),
            (
                "gpus_per_node",
                "GPUs in one node when all its nodes have the same number (declared, or 4 for \
                 NVL72 compute trays and 8 on HGX baseboards); null for PCIe cards.",
            ),
        ],
    );
    mig_profile_docs(docs, "mig_profiles")
}

fn gpu_value(m: &GpuModel) -> Value {
    Value::object([
        ("product", Value::string(m.product)),
        ("display_name", Value::string(m.display_name)),
        ("architecture", Value::string(m.architecture)),
        ("memory_mib", Value::int(m.memory_mib.into())),
        ("memory_gb", Value::int(m.memory_gb().into())),
        ("mig_capable", Value::Bool(m.mig_capable())),
        (
            "mig_profiles",
            Value::List(m.mig_profiles.iter().map(mig_profile_value).collect()),
        ),
        (
            "nvlink_domain_size",
            m.nvlink_domain_size.map(|n| Value::int(n.into())).into(),
        ),
        (
            "gpus_per_node",
            gpu_products::gpus_per_node(m)
                .map(|n| Value::int(n.into()))
                .into(),
        ),
    ])
}

fn unknown_product(declared: &Declared, product: &str) -> Diagnostics {
    gpu_products::unknown_product(declared, AttrPath::attr("product"), product)
}

#[async_trait]
impl DataSourceKind for GpuCatalog {
    fn type_name(&self) -> &'static str {
        "gpufleet_gpu_catalog"
    }

    fn schema(&self) -> Schema {
        Schema::new(
            Block::new(
                "The GPU products gpufleet knows: memory, MIG profiles, NVLink domain size and \
                 GPUs per node, named as GPU feature discovery names them. Lists the built-in \
                 catalog and the products declared in `gpu_product` blocks of the provider \
                 configuration. Needs no backend.",
            )
            .attr(Attribute::optional("product", Type::String).describe(
                "Look up one product (as in the `nvidia.com/gpu.product` label; case and a \
                 `-SHARED` suffix are ignored). Fills `gpu`. An unknown product is an error \
                 that lists the known ones.",
            ))
            .attr(Attribute::optional("mig_capable", Type::Bool).describe(
                "When set, `gpus` holds only products that do (`true`) or do not (`false`) \
                 support MIG.",
            ))
            .attr(
                Attribute::computed("gpu", gpu_type())
                    .describe("The product named by `product`, or null when `product` is not set.")
                    .describe_fields(gpu_docs()),
            )
            .attr(
                Attribute::computed("gpus", Type::list(gpu_type()))
                    .describe(
                        "Every known product that matches the filters (`product` and \
                     `mig_capable`), sorted by name.",
                    )
                    .describe_fields(gpu_docs()),
            )
            .attr(
                Attribute::computed("products", Type::list(Type::String)).describe(
                    "The product names in `gpus`, for `contains()` checks in variable validation.",
                ),
            ),
        )
    }

    async fn read(&self, ctx: &Context, config: Value) -> ReadResponse {
        // The product is checked here, not at validate: the provider block may declare it.
        let declared = &ctx.settings.gpu_products;
        let product = config.get("product").as_str();
        let model = match product.map(|p| (p, gpu_products::resolve(declared, p))) {
            None => None,
            Some((_, Resolution::Found(m))) => Some(m),
            Some((p, _)) => {
                return ReadResponse {
                    new_state: Value::Null,
                    diagnostics: unknown_product(declared, p),
                };
            }
        };
        let gpu = model.map_or(Value::Null, gpu_value);
        // Filters combine: `product` narrows the list to that product, so a module that looks
        // up one GPU per tenant does not carry the whole catalog in every instance's state.
        let wanted = model.map(|m| m.product);
        let filter = config.get("mig_capable").as_bool();
        let models: Vec<&GpuModel> = gpu_products::all_models(declared)
            .into_iter()
            .filter(|m| wanted.is_none_or(|p| m.product == p))
            .filter(|m| filter.is_none_or(|f| m.mig_capable() == f))
            .collect();

        let mut state = config.as_object().cloned().unwrap_or_default();
        state.insert("gpu".to_owned(), gpu);
        state.insert(
            "gpus".to_owned(),
            Value::List(models.iter().map(|m| gpu_value(m)).collect()),
        );
        state.insert(
            "products".to_owned(),
            Value::List(models.iter().map(|m| Value::string(m.product)).collect()),
        );
        ReadResponse::observed(Value::Object(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(product: Value, mig: Value) -> Value {
        Value::object([
            ("product", product),
            ("mig_capable", mig),
            ("gpu", Value::Null),
            ("gpus", Value::Null),
            ("products", Value::Null),
        ])
    }

    #[tokio::test]
    async fn reads_one_product_and_conforms() {
        let r = GpuCatalog
            .read(
                &Context::default(),
                config(Value::string("nvidia-h100-80gb-hbm3"), Value::Null),
            )
            .await;
        assert!(r.diagnostics.is_empty());
        let schema = GpuCatalog.schema();
        assert!(r.new_state.conforms_to(&schema.value_type()));
        assert!(r.new_state.is_wholly_known());
        assert_eq!(
            r.new_state.get("gpu").get("product"),
            &Value::string("NVIDIA-H100-80GB-HBM3")
        );
    }

    #[tokio::test]
    async fn filters_by_mig() {
        let r = GpuCatalog
            .read(&Context::default(), config(Value::Null, Value::Bool(false)))
            .await;
        let products = r.new_state.get("products");
        assert!(
            products
                .as_seq()
                .unwrap_or_default()
                .contains(&Value::string("NVIDIA-L40S"))
        );
        assert!(
            !products
                .as_seq()
                .unwrap_or_default()
                .contains(&Value::string("NVIDIA-A100-SXM4-80GB"))
        );
    }

    #[tokio::test]
    async fn unknown_product_points_at_attribute() {
        let r = GpuCatalog
            .read(
                &Context::default(),
                config(Value::string("RTX-9999"), Value::Null),
            )
            .await;
        let d = r.diagnostics;
        assert!(d.has_error());
        assert_eq!(d.0[0].path, Some(AttrPath::attr("product")));
        assert!(d.0[0].detail.contains("NVIDIA-B200"));
    }

    #[tokio::test]
    async fn declared_products_are_listed_and_looked_up() {
        let blocks = Value::List(vec![Value::object([
            ("name", Value::string("NVIDIA-Catalog-Test-X1")),
            ("aliases", Value::Null),
            ("display_name", Value::Null),
            ("architecture", Value::string("hopper")),
            ("memory_mib", Value::int(97_871)),
            ("gpus_per_node", Value::int(8)),
            ("nvlink_domain_size", Value::int(8)),
            ("mig_profiles", Value::Null),
        ])]);
        let settings = crate::provider_config::ProviderSettings {
            gpu_products: Declared::from_config(&blocks),
            ..Default::default()
        };
        let ctx = Context {
            settings: std::sync::Arc::new(settings),
            ..Default::default()
        };
        let r = GpuCatalog
            .read(&ctx, config(Value::string("catalog-test-x1"), Value::Null))
            .await;
        assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
        let gpu = r.new_state.get("gpu");
        assert_eq!(gpu.get("product"), &Value::string("NVIDIA-Catalog-Test-X1"));
        assert_eq!(gpu.get("gpus_per_node"), &Value::int(8));
        assert_eq!(gpu.get("mig_capable"), &Value::Bool(false));
        let all = GpuCatalog
            .read(&ctx, config(Value::Null, Value::Null))
            .await;
        let products = all.new_state.get("products").strings();
        assert!(products.contains(&"NVIDIA-Catalog-Test-X1".to_owned()));
        assert!(products.contains(&"NVIDIA-H100-80GB-HBM3".to_owned()));
        // A context that does not declare it refuses it.
        let other = GpuCatalog
            .read(
                &Context::default(),
                config(Value::string("NVIDIA-Catalog-Test-X1"), Value::Null),
            )
            .await;
        assert!(other.diagnostics.has_error());
    }
}
