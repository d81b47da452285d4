//! `provider::gpufleet::mig_profiles(product)`: the MIG profiles a GPU product offers.

use super::{mig_profile_docs, mig_profile_type, mig_profile_value};
use crate::{
    catalog,
    kinds::{FunctionError, FunctionKind},
    schema::{FieldDocs, FunctionSignature, Parameter},
    value::{Type, Value},
};

/// The `mig_profiles` function.
#[derive(Debug, Clone, Copy)]
pub struct MigProfiles;

impl FunctionKind for MigProfiles {
    fn name(&self) -> &'static str {
        "mig_profiles"
    }

    fn signature(&self) -> FunctionSignature {
        FunctionSignature {
            parameters: vec![Parameter::new(
                "product",
                Type::String,
                "GPU product as GPU feature discovery names it in `nvidia.com/gpu.product`, \
                 e.g. `NVIDIA-A100-SXM4-80GB`. Case and the `-SHARED` suffix are ignored.",
            )],
            variadic: None,
            return_type: Type::list(mig_profile_type()),
            return_docs: mig_profile_docs(FieldDocs::new(), ""),
            summary: "MIG profiles of a GPU product",
            description: "Returns the Multi-Instance GPU profiles that `product` supports, \
                          smallest first, each with its compute and memory slices, memory in \
                          GB, the most instances that fit on one GPU, and the Kubernetes \
                          resource name it is scheduled as. The list is empty for GPUs without \
                          MIG.",
        }
    }

    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let product = args.first().and_then(Value::as_str).ok_or(FunctionError {
            text: "product must be a string".to_owned(),
            argument: Some(0),
        })?;
        let model = catalog::lookup(product).ok_or_else(|| FunctionError {
            text: format!(
                "unknown GPU product {product:?}; known products are: {}",
                catalog::product_names().join(", ")
            ),
            argument: Some(0),
        })?;
        Ok(Value::List(
            model.mig_profiles.iter().map(mig_profile_value).collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a100_profiles() {
        let v = MigProfiles
            .call(&[Value::string("NVIDIA-A100-SXM4-80GB")])
            .expect("known product");
        let names: Vec<&str> = v
            .as_seq()
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.get("name").as_str())
            .collect();
        assert!(names.contains(&"1g.10gb"), "{names:?}");
        assert!(names.contains(&"7g.80gb"), "{names:?}");
        for p in v.as_seq().unwrap_or_default() {
            assert!(p.conforms_to(&mig_profile_type()));
        }
    }

    #[test]
    fn no_mig_is_empty() {
        let v = MigProfiles
            .call(&[Value::string("NVIDIA-L40S")])
            .expect("known product");
        assert_eq!(v, Value::List(vec![]));
    }

    #[test]
    fn unknown_product_lists_known_ones() {
        let e = MigProfiles
            .call(&[Value::string("NVIDIA-Z9000")])
            .expect_err("unknown product");
        assert_eq!(e.argument, Some(0));
        assert!(e.text.contains("NVIDIA-H100-80GB-HBM3"), "{}", e.text);
    }
}
