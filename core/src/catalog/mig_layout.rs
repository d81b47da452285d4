//! Whether a layout of MIG instances fits one GPU.

use std::collections::BTreeMap;
use std::fmt;

use super::{GpuModel, MigProfile};

/// Why a MIG layout cannot be applied to a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigLayoutError {
    /// The GPU model does not support MIG.
    NotMigCapable {
        /// Product label of the GPU.
        product: &'static str,
    },
    /// The layout names a profile that this GPU model does not offer.
    UnknownProfile {
        /// The profile name as the user wrote it.
        profile: String,
        /// Product label of the GPU.
        product: &'static str,
        /// Profiles the GPU does offer, in catalog order.
        known: Vec<&'static str>,
    },
    /// More instances of one profile than fit on a single GPU.
    TooManyInstances {
        /// Canonical profile name.
        profile: String,
        /// Total instances requested across the layout.
        requested: u32,
        /// Maximum instances of this profile per GPU.
        max: u8,
    },
    /// Together the instances need more compute or memory than one GPU has.
    ExceedsGpu {
        /// Compute slices the layout needs in total.
        compute_slices: u32,
        /// Memory the layout needs in total, in GB, summed from the profile
        /// names.
        memory_gb: u32,
        /// Product label of the GPU.
        product: &'static str,
        /// Compute and memory slices the GPU has.
        has: (u8, u8),
    },
}

impl fmt::Display for MigLayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigLayoutError::NotMigCapable { product } => {
                write!(f, "{product} does not support MIG partitioning")
            }
            MigLayoutError::UnknownProfile {
                profile,
                product,
                known,
            } => write!(
                f,
                "MIG profile \"{profile}\" is not available on {product}; known profiles: {}",
                known.join(", ")
            ),
            MigLayoutError::TooManyInstances {
                profile,
                requested,
                max,
            } => write!(
                f,
                "MIG profile \"{profile}\" requested {requested} times, but at most {max} fit on one GPU"
            ),
            MigLayoutError::ExceedsGpu {
                compute_slices,
                memory_gb,
                product,
                has: (compute, memory),
            } => write!(
                f,
                "MIG layout needs {compute_slices} compute slices and {memory_gb} GB of memory, \
                 more than one {product} provides ({compute} compute slices, {memory} memory \
                 slices)"
            ),
        }
    }
}

impl std::error::Error for MigLayoutError {}

/// Checks that a layout of MIG instances could be applied to a single GPU of
/// `model`.
///
/// `layout` pairs profile names with instance counts, the same way as a
/// mig-parted `mig-devices` map: `[("1g.10gb", 7)]` or
/// `[("3g.40gb", 1), ("4g.40gb", 1)]`. A profile listed more than once has
/// its counts added together. Zero counts are allowed, and an empty layout is
/// valid (MIG enabled with no instances).
///
/// The check is a simplification. It requires that:
/// * each profile exists on the model,
/// * each profile's total count is at most its `max_instances`,
/// * the compute and memory slices add up to at most the model's
///   [`GpuModel::compute_slices`] and [`GpuModel::memory_slices`].
///
/// Real MIG placement has extra rules: instances sit at fixed start offsets,
/// a 3g instance uses four memory slices, and some mixes are refused by the
/// placement table even though the sums fit. A layout that passes here can
/// therefore still be rejected by the driver. Every layout this function
/// rejects is impossible on real hardware.
///
/// # Errors
///
/// * [`MigLayoutError::NotMigCapable`] if `model` has no MIG profiles.
/// * [`MigLayoutError::UnknownProfile`] for the first name that is not one of
///   the model's profiles.
/// * [`MigLayoutError::TooManyInstances`] if one profile's total count is
///   above its `max_instances`.
/// * [`MigLayoutError::ExceedsGpu`] if the instances together need more than
///   the model's compute or memory slices.
pub fn check_mig_layout(model: &GpuModel, layout: &[(&str, u32)]) -> Result<(), MigLayoutError> {
    if !model.mig_capable() {
        return Err(MigLayoutError::NotMigCapable {
            product: model.product,
        });
    }

    // Resolve every name first so that an unknown name is reported before
    // any count problem.
    let mut totals: BTreeMap<&'static str, (&'static MigProfile, u32)> = BTreeMap::new();
    for &(name, count) in layout {
        let Some(profile) = model.mig_profile(name) else {
            return Err(MigLayoutError::UnknownProfile {
                profile: name.trim().to_owned(),
                product: model.product,
                known: model.mig_profiles.iter().map(|p| p.name).collect(),
            });
        };
        let entry = totals.entry(profile.name).or_insert((profile, 0));
        entry.1 = entry.1.saturating_add(count);
    }

    // Check counts in catalog order so the first error reported is stable.
    for profile in model.mig_profiles {
        let requested = totals.get(profile.name).map_or(0, |&(_, n)| n);
        if requested > u32::from(profile.max_instances) {
            return Err(MigLayoutError::TooManyInstances {
                profile: profile.name.to_owned(),
                requested,
                max: profile.max_instances,
            });
        }
    }

    // Every count is now at most 7, so none of these sums can overflow.
    let mut compute_slices: u32 = 0;
    let mut memory_slices: u32 = 0;
    let mut memory_gb: u32 = 0;
    for &(profile, count) in totals.values() {
        compute_slices += u32::from(profile.compute_slices) * count;
        memory_slices += u32::from(profile.memory_slices) * count;
        memory_gb += u32::from(profile.memory_gb) * count;
    }
    if compute_slices > u32::from(model.compute_slices())
        || memory_slices > u32::from(model.memory_slices())
    {
        return Err(MigLayoutError::ExceedsGpu {
            compute_slices,
            memory_gb,
            product: model.product,
            has: (model.compute_slices(), model.memory_slices()),
        });
    }
    Ok(())
}
