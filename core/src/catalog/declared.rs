//! Products declared in the provider block, registered for this process, so that code
//! without the provider's settings (reading a node's `nvidia.com/gpu.product` label, decoding
//! a planned value at apply) finds them through [`super::lookup`]. Terraform runs one provider
//! process per provider configuration, so the registry holds exactly the products of that
//! configuration; models are kept for the process's life (a few hundred bytes each, one per
//! distinct declaration).

use std::sync::{OnceLock, RwLock};

use super::{GpuModel, MigProfile};

/// One declared MIG profile, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MigDecl {
    pub(crate) name: String,
    pub(crate) compute_slices: u8,
    pub(crate) memory_gb: u16,
    pub(crate) memory_slices: u8,
    pub(crate) max_instances: u8,
}

/// One declared product, owned: what the registry compares to avoid leaking a model twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProductDecl {
    pub(crate) name: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) display_name: String,
    pub(crate) architecture: String,
    pub(crate) memory_mib: u32,
    pub(crate) gpus_per_node: Option<u32>,
    pub(crate) nvlink_domain_size: Option<u16>,
    pub(crate) mig_profiles: Vec<MigDecl>,
}

struct Entry {
    decl: ProductDecl,
    keys: Vec<String>,
    model: &'static GpuModel,
}

fn registry() -> &'static RwLock<Vec<Entry>> {
    static REGISTRY: OnceLock<RwLock<Vec<Entry>>> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(Vec::new()))
}

fn registry_read() -> std::sync::RwLockReadGuard<'static, Vec<Entry>> {
    // A panic while holding the lock leaves whole entries behind.
    registry()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// Registers a declared product for this process, reusing the model of an identical earlier
/// declaration; a changed declaration of the same name replaces it.
pub(crate) fn register(decl: ProductDecl) -> &'static GpuModel {
    let mut entries = registry()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(e) = entries.iter().find(|e| e.decl == decl) {
        return e.model;
    }
    let mig: Vec<MigProfile> = decl
        .mig_profiles
        .iter()
        .map(|p| MigProfile {
            name: leak(&p.name),
            compute_slices: p.compute_slices,
            memory_gb: p.memory_gb,
            memory_slices: p.memory_slices,
            max_instances: p.max_instances,
        })
        .collect();
    let aliases: Vec<&'static str> = decl.aliases.iter().map(|a| leak(a)).collect();
    let model: &'static GpuModel = Box::leak(Box::new(GpuModel {
        product: leak(&decl.name),
        aliases: Box::leak(aliases.into_boxed_slice()),
        display_name: leak(&decl.display_name),
        architecture: leak(&decl.architecture),
        memory_mib: decl.memory_mib,
        mig_profiles: Box::leak(mig.into_boxed_slice()),
        nvlink_domain_size: decl.nvlink_domain_size,
    }));
    let keys = std::iter::once(&decl.name)
        .chain(&decl.aliases)
        .map(|s| super::product_key(s))
        .collect();
    entries.retain(|e| super::product_key(&e.decl.name) != super::product_key(&decl.name));
    entries.push(Entry { decl, keys, model });
    model
}

/// The registered product with this comparison key ([`super::product_key`]); the fallback
/// of [`catalog::lookup`].
pub(crate) fn registered(key: &str) -> Option<&'static GpuModel> {
    registry_read()
        .iter()
        .find(|e| e.keys.iter().any(|k| k == key))
        .map(|e| e.model)
}

/// The declaration `model` was registered from; `None` for a catalog model.
pub(crate) fn declaration_of(model: &GpuModel) -> Option<ProductDecl> {
    registry_read()
        .iter()
        .find(|e| std::ptr::eq(e.model, model) || e.model.product == model.product)
        .map(|e| e.decl.clone())
}
