//! The Karpenter `NodePool` (`karpenter.sh/v1`) an `auto` pool emits, and the checks of its
//! `karpenter` settings. Pure.
//!
//! The NodePool's requirements constrain what Karpenter may launch to the pool's product.
//! Karpenter itself stamps every requirement's value on the nodes it launches, so the GFD
//! product label (`nvidia.com/gpu.product`) alone would let it launch any instance and label
//! it as the product. The instance-type labels of the cloud's Karpenter provider say what
//! GPUs an instance really has (`cloud_gpus`), so with `provider = "aws"` or `"azure"` the
//! NodePool also requires the GPU's manufacturer, name and count (and, on AWS, memory where
//! one name covers two memory sizes); with `"generic"` the user's `requirements` choose the
//! instances.
//!
//! The NodePool is capped with `limits` on `nodes` and, when GPUs per node are known (the
//! pool's `karpenter.gpus_per_node`, else the product's, see
//! [`crate::gpu_products::gpus_per_node`]), on `nvidia.com/gpu`.
//!
//! [`node_pool()`] writes the object, `checks` refuses at validate and plan what Karpenter
//! would refuse, and `label_keys` holds the label keys its CRD restricts.

mod checks;
mod cloud_gpus;
#[cfg(test)]
mod fixtures;
mod label_keys;
mod node_pool;

pub(super) use checks::{check_model, check_template_labels, validate};
pub use label_keys::restricted_key;
pub use node_pool::{cloud, gpus_per_node, node_pool, requirements};

pub use crate::backends::kube::NODEPOOL_LABEL;
