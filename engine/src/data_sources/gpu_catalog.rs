//! `gpufleet_gpu_catalog`: the GPU products gpufleet knows, with memory, MIG profiles and
//! NVLink domain size. Needs no backend, so modules can use it anywhere, even at plan time.

use async_trait::async_trait;

use crate::{
    catalog::{self, GpuModel},
    context::Context,
    diag::Diagnostics,
    functions::{mig_profile_type, mig_profile_value},
    kinds::{DataSourceKind, ReadResponse},
    path::AttrPath,
    schema::{Attribute, Block, Schema},
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
    ])
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
    ])
}

fn unknown_product(product: &str) -> Diagnostics {
    let mut d = Diagnostics::new();
    d.error_at(
        AttrPath::attr("product"),
        "Unknown GPU Product",
        format!(
            "{product:?} is not a GPU product gpufleet knows. Use the name GPU feature \
             discovery puts in the nvidia.com/gpu.product label. Known products are: {}.",
            catalog::product_names().join(", ")
        ),
    );
    d
}

#[async_trait]
impl DataSourceKind for GpuCatalog {
    fn type_name(&self) -> &'static str {
        "gpufleet_gpu_catalog"
    }

    fn schema(&self) -> Schema {
        Schema::new(
            Block::new(
                "The GPU products gpufleet knows: memory, MIG profiles and NVLink domain size, \
                 named as GPU feature discovery names them. Needs no backend.",
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
                    .describe("The product named by `product`, or null when `product` is not set."),
            )
            .attr(
                Attribute::computed("gpus", Type::list(gpu_type())).describe(
                    "Every known product that matches the filters (`product` and \
                     `mig_capable`), sorted by name.",
                ),
            )
            .attr(
                Attribute::computed("products", Type::list(Type::String)).describe(
                    "The product names in `gpus`, for `contains()` checks in variable validation.",
                ),
            ),
        )
    }

    fn validate(&self, config: &Value) -> Diagnostics {
        match config.get("product").as_str() {
            Some(p) if catalog::lookup(p).is_none() => unknown_product(p),
            _ => Diagnostics::new(),
        }
    }

    async fn read(&self, _ctx: &Context, config: Value) -> ReadResponse {
        let product = config.get("product").as_str();
        let gpu = match product.map(|p| (p, catalog::lookup(p))) {
            None => Value::Null,
            Some((_, Some(m))) => gpu_value(m),
            Some((p, None)) => {
                return ReadResponse {
                    new_state: Value::Null,
                    diagnostics: unknown_product(p),
                };
            }
        };
        // Filters combine: `product` narrows the list to that product, so a module that looks
        // up one GPU per tenant does not carry the whole catalog in every instance's state.
        let wanted = product.and_then(catalog::lookup).map(|m| m.product);
        let filter = config.get("mig_capable").as_bool();
        let mut models: Vec<&GpuModel> = catalog::models()
            .iter()
            .filter(|m| wanted.is_none_or(|p| m.product == p))
            .filter(|m| filter.is_none_or(|f| m.mig_capable() == f))
            .collect();
        models.sort_by_key(|m| m.product);

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
        ReadResponse {
            new_state: Value::Object(state),
            diagnostics: Diagnostics::new(),
        }
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

    #[test]
    fn unknown_product_points_at_attribute() {
        let d = GpuCatalog.validate(&config(Value::string("RTX-9999"), Value::Null));
        assert!(d.has_error());
        assert_eq!(d.0[0].path, Some(AttrPath::attr("product")));
        assert!(d.0[0].detail.contains("NVIDIA-B200"));
    }
}
