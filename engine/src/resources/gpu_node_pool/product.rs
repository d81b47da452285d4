//! The pool's GPU product at plan, where the provider's declared products are known.

use crate::{
    diag::Diagnostics,
    gpu_products::{self, Declared, Resolution},
    path::AttrPath,
    value::Value,
};

use super::karpenter;

/// Refuses a `gpu_product` that is neither in the catalog nor declared, and checks that an
/// `auto` pool's Karpenter provider can launch the product.
pub(super) fn check(declared: &Declared, config: &Value) -> Diagnostics {
    let product = config.get("gpu_product");
    let mut d = gpu_products::check_product(declared, AttrPath::attr("gpu_product"), product);
    if let Some(Resolution::Found(model)) =
        product.as_str().map(|p| gpu_products::resolve(declared, p))
    {
        d.extend(karpenter::check_model(config, model));
    }
    d
}
