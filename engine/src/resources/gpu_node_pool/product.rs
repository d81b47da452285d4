//! The pool's GPU product at plan, where the provider's declared products are known.

use super::{config::PoolConfig, karpenter, schema::GPU_PRODUCT};
use crate::{
    diag::Diagnostics,
    gpu_products::{self, Declared, Resolution},
    path::AttrPath,
    value::Value,
};

/// Refuses a `gpu_product` that is neither in the catalog nor declared, and checks that an
/// `auto` pool's Karpenter provider can launch the product.
pub(super) fn check(declared: &Declared, config: &Value, pool: &PoolConfig) -> Diagnostics {
    // The product check is shared with the other kinds that name a product: it reads the
    // attribute as written.
    let mut d = gpu_products::check_product(
        declared,
        AttrPath::attr(GPU_PRODUCT),
        config.get(GPU_PRODUCT),
    );
    if let Some(Resolution::Found(model)) = pool
        .gpu_product
        .value()
        .map(|p| gpu_products::resolve(declared, p))
    {
        d.extend(karpenter::check_model(pool, model));
    }
    d
}
