//! Provider-defined functions, one file each.

pub mod mig_profiles;

use crate::{catalog::MigProfile, value::Type, value::Value};

/// The object type of one MIG profile, shared by the catalog data source and functions.
pub(crate) fn mig_profile_type() -> Type {
    Type::object([
        ("name", Type::String),
        ("resource_name", Type::String),
        ("compute_slices", Type::Number),
        ("memory_slices", Type::Number),
        ("memory_gb", Type::Number),
        ("max_instances", Type::Number),
    ])
}

/// A MIG profile as a value of [`mig_profile_type`].
pub(crate) fn mig_profile_value(p: &MigProfile) -> Value {
    Value::object([
        ("name", Value::string(p.name)),
        ("resource_name", Value::string(p.resource_name())),
        ("compute_slices", Value::int(p.compute_slices.into())),
        ("memory_slices", Value::int(p.memory_slices.into())),
        ("memory_gb", Value::int(p.memory_gb.into())),
        ("max_instances", Value::int(p.max_instances.into())),
    ])
}
