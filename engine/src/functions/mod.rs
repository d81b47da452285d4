//! Provider-defined functions, one file each.

pub mod mig_profiles;

use crate::{catalog::MigProfile, schema::FieldDocs, value::Type, value::Value};

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

/// Descriptions of the fields of [`mig_profile_type`].
pub(crate) const MIG_PROFILE_FIELDS: &[(&str, &str)] = &[
    (
        "name",
        "Profile name as the MIG manager and device plugin spell it, e.g. `1g.10gb`.",
    ),
    (
        "resource_name",
        "Extended resource the device plugin advertises it as (MIG `mixed` strategy), e.g. \
         `nvidia.com/mig-1g.10gb`.",
    ),
    (
        "compute_slices",
        "Compute slices one instance occupies (the `<g>` in `<g>g.<mem>gb`).",
    ),
    (
        "memory_slices",
        "Memory slices one instance occupies: eighths of the GPU's memory, or quarters on \
         4-slice GPUs.",
    ),
    (
        "memory_gb",
        "Memory of one instance in GB, as written in the profile name.",
    ),
    (
        "max_instances",
        "Most instances of this profile that fit on one GPU when no other profile is present.",
    ),
];

/// The descriptions of one MIG profile's fields, for values of [`mig_profile_type`] at
/// `under` (`""`: the value itself).
pub(crate) fn mig_profile_docs(docs: FieldDocs, under: &str) -> FieldDocs {
    docs.fields(under, MIG_PROFILE_FIELDS)
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
