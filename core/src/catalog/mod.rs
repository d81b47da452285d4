//! Static catalog of NVIDIA data-centre GPUs, keyed by the product name that
//! GPU Feature Discovery (GFD) writes into the `nvidia.com/gpu.product` node
//! label.
//!
//! Each entry records how the GPU shows up on a Kubernetes node and what it
//! can be partitioned into:
//!
//! * **Product label.** GFD takes the NVML device name (the same string
//!   `nvidia-smi` prints), replaces every space with a dash and uses that as
//!   the label value, so `NVIDIA A100-SXM4-80GB` becomes
//!   `NVIDIA-A100-SXM4-80GB` and `NVIDIA H100 80GB HBM3` becomes
//!   `NVIDIA-H100-80GB-HBM3`. GFD adds suffixes in two cases. With the MIG
//!   `single` strategy it appends `-MIG-<profile>`, for example
//!   `NVIDIA-A100-80GB-PCIe-MIG-1g.10gb`. When time-slicing replicas are on
//!   and the resource is not renamed, it appends `-SHARED`. Older drivers
//!   left out the `NVIDIA ` prefix (`A100-SXM4-40GB`), so [`lookup`] accepts
//!   names with or without it. Sources: the product
//!   labeler in `NVIDIA/k8s-device-plugin` (`internal/lm/resource.go`) and
//!   label dumps from real nodes.
//! * **Memory.** The value of `nvidia.com/gpu.memory`: NVML's total
//!   framebuffer in MiB, the same number `nvidia-smi` shows as the
//!   denominator of "Memory-Usage". The figures here come from real machines.
//!   They are smaller than the marketing capacity (an "80GB" H100 reports
//!   81559 MiB).
//! * **MIG profiles.** Names, slice counts and per-GPU instance limits come
//!   from the "Supported MIG Profiles" tables in NVIDIA's MIG User Guide. They
//!   were cross-checked against the default mig-parted configuration that the
//!   GPU Operator ships to the MIG manager (`default-mig-parted-config`).
//!   These are the names users write in `mig-devices` and that the device
//!   plugin advertises as `nvidia.com/mig-<profile>`. Only plain profiles are
//!   listed. The media-extension (`+me`) variants are omitted.
//! * **NVLink domain.** The number of GPUs that share one NVLink fabric in the
//!   product's reference platform: the 8-GPU HGX baseboards for SXM parts, the
//!   bridged pair for H100 NVL, and `None` for PCIe cards without a
//!   guaranteed NVLink.
//!
//! Most MIG-capable GPUs divide into 7 compute slices and 8 memory slices; the
//! A30 and the RTX PRO 6000 into 4 and 4 ([`GpuModel::compute_slices`],
//! [`GpuModel::memory_slices`]).
//!
//! Products, memory and profiles of the Hopper and Blackwell parts follow the
//! MIG User Guide's supported-GPU list and the layouts of the GPU Operator's
//! v25.10 `default-mig-parted-config` (which names the B300, GB300 and GB200
//! profiles the guide does not yet table); memory figures are what
//! `nvidia-smi` reports with ECC on.

mod declared;
mod mig_configs;
mod mig_layout;
mod models;

pub(crate) use declared::{MigDecl, ProductDecl, declaration_of, register};
pub use mig_configs::{MigConfig, MigConfigError, mig_config, mig_config_names};
pub use mig_layout::{MigLayoutError, check_mig_layout};
use models::MODELS;

/// One MIG GPU-instance profile (for example `1g.10gb`) on a particular GPU
/// model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MigProfile {
    /// Profile name as mig-parted, the MIG manager and the device plugin spell
    /// it, for example `3g.40gb`.
    pub name: &'static str,
    /// Compute slices the profile occupies (the `<g>` in `<g>g.<mem>gb`),
    /// out of the GPU's [`GpuModel::compute_slices`].
    pub compute_slices: u8,
    /// Memory in GB as written in the profile name (the `<mem>` in
    /// `<g>g.<mem>gb`).
    pub memory_gb: u16,
    /// Memory slices the profile occupies, out of the GPU's
    /// [`GpuModel::memory_slices`] (the "Fraction of Memory" column of the MIG
    /// User Guide: eighths, or quarters on the 4-slice GPUs).
    pub memory_slices: u8,
    /// Maximum number of instances of this profile on one GPU when no other
    /// profile is present.
    pub max_instances: u8,
}

impl MigProfile {
    /// Kubernetes extended-resource name under which the NVIDIA device plugin
    /// (MIG `mixed` strategy) advertises this profile, for example
    /// `nvidia.com/mig-1g.10gb`.
    #[must_use]
    pub fn resource_name(&self) -> String {
        format!("nvidia.com/mig-{}", self.name)
    }
}

/// Static facts about one GPU product as GFD reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuModel {
    /// Canonical `nvidia.com/gpu.product` label value, for example
    /// `NVIDIA-A100-SXM4-80GB`.
    pub product: &'static str,
    /// Other spellings users write for the same product, for example
    /// `A100-SXM4-80GB` or `a100-80gb`. [`lookup`] matches them
    /// case-insensitively.
    pub aliases: &'static [&'static str],
    /// Name for humans, for example `NVIDIA A100 80GB SXM4`.
    pub display_name: &'static str,
    /// GPU architecture: `ampere`, `hopper`, `blackwell` or `ada-lovelace`.
    pub architecture: &'static str,
    /// Framebuffer size in MiB, as GFD reports it in `nvidia.com/gpu.memory`.
    pub memory_mib: u32,
    /// MIG profiles the GPU supports. Empty when the GPU is not MIG-capable.
    pub mig_profiles: &'static [MigProfile],
    /// Number of GPUs in one NVLink domain on the product's reference
    /// platform, for example 8 on an HGX baseboard or 72 in an NVL72 rack.
    /// `None` when the product has no NVLink or only an optional bridge.
    pub nvlink_domain_size: Option<u16>,
}

impl GpuModel {
    /// Whether the GPU supports Multi-Instance GPU partitioning.
    #[must_use]
    pub fn mig_capable(&self) -> bool {
        !self.mig_profiles.is_empty()
    }

    /// Compute slices one GPU divides into under MIG (7, or 4 on the A30 and
    /// RTX PRO 6000): those of its whole-GPU profile; 0 when it is not
    /// MIG-capable.
    #[must_use]
    pub fn compute_slices(&self) -> u8 {
        self.mig_profiles
            .iter()
            .map(|p| p.compute_slices)
            .max()
            .unwrap_or(0)
    }

    /// Memory slices one GPU divides into under MIG (8, or 4 on the A30 and
    /// RTX PRO 6000): those of its whole-GPU profile; 0 when it is not
    /// MIG-capable.
    #[must_use]
    pub fn memory_slices(&self) -> u8 {
        self.mig_profiles
            .iter()
            .map(|p| p.memory_slices)
            .max()
            .unwrap_or(0)
    }

    /// Finds one of this GPU's MIG profiles by name.
    ///
    /// The match ignores case and surrounding whitespace. It also accepts the
    /// resource-name forms `mig-1g.10gb` and `nvidia.com/mig-1g.10gb`.
    #[must_use]
    pub fn mig_profile(&self, name: &str) -> Option<&'static MigProfile> {
        let wanted = name.trim().to_ascii_lowercase();
        let wanted = wanted.strip_prefix("nvidia.com/").unwrap_or(&wanted);
        let wanted = wanted.strip_prefix("mig-").unwrap_or(wanted);
        let profiles: &'static [MigProfile] = self.mig_profiles;
        profiles.iter().find(|p| p.name == wanted)
    }

    /// Framebuffer size in whole GiB, rounded up from [`GpuModel::memory_mib`].
    ///
    /// Rounding up makes the result match the size in the full-GPU MIG
    /// profile name: 81559 MiB becomes 80 (`7g.80gb`) and 143771 MiB becomes
    /// 141 (`7g.141gb`).
    #[must_use]
    pub fn memory_gb(&self) -> u32 {
        self.memory_mib.div_ceil(1024)
    }
}

/// Every GPU model in the catalog.
#[must_use]
pub fn models() -> &'static [GpuModel] {
    MODELS
}

/// Finds a GPU model by its product label or one of its aliases.
///
/// The match ignores case and surrounding whitespace. Spaces and underscores
/// count as dashes, so the `nvidia-smi` spelling (`NVIDIA H100 80GB HBM3`)
/// also works. The `NVIDIA-` prefix is optional. Suffixes that GFD adds are
/// stripped first: `-SHARED` (time-slicing) and `-MIG-<profile>` (MIG
/// `single` strategy), so `NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED` finds the
/// A100 40GB. The MIG profile in the suffix is not checked against the model.
/// Products declared in the provider configuration are found after the catalog's.
#[must_use]
pub fn lookup(product: &str) -> Option<&'static GpuModel> {
    let key = product_key(product);
    if key.is_empty() {
        return None;
    }
    static_lookup(&key).or_else(|| declared::registered(&key))
}

/// The catalog's own model of `product`, ignoring declared products; matched as [`lookup`]
/// matches.
#[must_use]
pub fn catalog_model(product: &str) -> Option<&'static GpuModel> {
    let key = product_key(product);
    if key.is_empty() {
        return None;
    }
    static_lookup(&key)
}

/// The catalog model whose name or alias has [`product_key`] `key`.
fn static_lookup(key: &str) -> Option<&'static GpuModel> {
    MODELS.iter().find(|m| {
        match_key(&normalize(m.product)) == key
            || m.aliases.iter().any(|a| match_key(&normalize(a)) == key)
    })
}

/// The key [`lookup`] compares: the name normalized, without GFD's suffixes and the optional
/// `NVIDIA-` prefix. Declared products ([`crate::gpu_products`]) are matched by it too.
#[must_use]
pub fn product_key(product: &str) -> String {
    match_key(&strip_gfd_suffixes(&normalize(product))).to_owned()
}

/// The MIG profile named in a product label of the MIG `single` strategy, for
/// example `1g.10gb` in `NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED`.
///
/// Under that strategy GFD counts MIG devices, not GPUs, in
/// `nvidia.com/gpu.count`, so callers need the profile to get back to GPUs.
/// `None` when the label has no MIG suffix, the product is unknown, or the
/// profile does not exist on the product.
#[must_use]
pub fn label_mig_profile(product: &str) -> Option<&'static MigProfile> {
    let normalized = normalize(product);
    let profile = split_gfd_suffixes(&normalized).1?;
    lookup(product)?.mig_profile(profile)
}

/// Canonical product names of every model, sorted. Intended for diagnostics
/// such as "known products are: …".
#[must_use]
pub fn product_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = MODELS.iter().map(|m| m.product).collect();
    names.sort_unstable();
    names
}

/// Lowercases and trims a name, and turns runs of whitespace or underscores
/// into single dashes.
fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_dash = false;
    for c in s.trim().chars() {
        if c.is_whitespace() || c == '_' {
            pending_dash = true;
            continue;
        }
        if pending_dash && !out.is_empty() && !out.ends_with('-') && c != '-' {
            out.push('-');
        }
        pending_dash = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Removes the `-shared` and `-mig-<profile>` suffixes GFD appends to a
/// normalized product label.
fn strip_gfd_suffixes(normalized: &str) -> String {
    split_gfd_suffixes(normalized).0.to_owned()
}

/// Splits a normalized product label into the product and the MIG profile of
/// a `-mig-<profile>` suffix. GFD writes MIG first and SHARED last. Both
/// orders are accepted.
fn split_gfd_suffixes(normalized: &str) -> (&str, Option<&str>) {
    let mut s = normalized;
    let mut profile = None;
    for _ in 0..2 {
        if let Some(rest) = s.strip_suffix("-shared") {
            s = rest;
        }
        if let Some(idx) = s.rfind("-mig-") {
            let tail = &s[idx + "-mig-".len()..];
            if looks_like_mig_profile(tail) {
                profile = Some(tail);
                s = &s[..idx];
            }
        }
    }
    (s, profile)
}

/// Whether `s` starts like a MIG profile name: digits followed by `g`, as in
/// `1g.10gb` or `7g.80gb`. Anything after the digits and `g` is not checked.
fn looks_like_mig_profile(s: &str) -> bool {
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && s[digits..].starts_with('g')
}

/// The comparison key: a normalized name without the optional `nvidia-`
/// prefix.
fn match_key(normalized: &str) -> &str {
    normalized.strip_prefix("nvidia-").unwrap_or(normalized)
}

#[cfg(test)]
mod tests {
    use super::mig_configs::BALANCED_LAYOUTS;
    use super::*;

    fn model(product: &str) -> &'static GpuModel {
        match lookup(product) {
            Some(m) => m,
            None => panic!("{product} should be in the catalog"),
        }
    }

    #[test]
    fn required_models_are_present() {
        for product in [
            "NVIDIA-A100-SXM4-40GB",
            "NVIDIA-A100-SXM4-80GB",
            "NVIDIA-H100-80GB-HBM3",
            "NVIDIA-H200",
            "NVIDIA-B200",
            "NVIDIA-L40S",
        ] {
            assert_eq!(model(product).product, product);
        }
    }

    #[test]
    fn lookup_by_alias_and_case() {
        assert_eq!(model("a100-80gb").product, "NVIDIA-A100-SXM4-80GB");
        assert_eq!(model("A100-SXM4-80GB").product, "NVIDIA-A100-SXM4-80GB");
        // Older drivers left out the NVIDIA- prefix.
        assert_eq!(model("A100-SXM4-40GB").product, "NVIDIA-A100-SXM4-40GB");
        assert_eq!(
            model("nvidia-h100-80gb-hbm3").product,
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(model("h100-sxm5-80gb").product, "NVIDIA-H100-80GB-HBM3");
        assert_eq!(model("  NVIDIA-L40S \n").product, "NVIDIA-L40S");
        assert_eq!(model("l40s").product, "NVIDIA-L40S");
        assert_eq!(model("H200").product, "NVIDIA-H200");
        assert_eq!(model("b200").product, "NVIDIA-B200");
        assert_eq!(
            model("NVIDIA-A100-80GB-PCIe").product,
            "NVIDIA-A100-80GB-PCIe"
        );
        assert_eq!(model("a100-pcie-80gb").product, "NVIDIA-A100-80GB-PCIe");
        assert_eq!(model("H100 NVL").product, "NVIDIA-H100-NVL");
    }

    #[test]
    fn lookup_accepts_nvidia_smi_spelling() {
        assert_eq!(
            model("NVIDIA H100 80GB HBM3").product,
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(
            model("NVIDIA A100 80GB PCIe").product,
            "NVIDIA-A100-80GB-PCIe"
        );
        assert_eq!(
            model("NVIDIA A100-SXM4-40GB").product,
            "NVIDIA-A100-SXM4-40GB"
        );
    }

    #[test]
    fn lookup_strips_shared_and_mig_suffixes() {
        assert_eq!(
            model("NVIDIA-A100-SXM4-80GB-SHARED").product,
            "NVIDIA-A100-SXM4-80GB"
        );
        assert_eq!(
            model("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb").product,
            "NVIDIA-A100-SXM4-40GB"
        );
        assert_eq!(
            model("A100-SXM4-40GB-MIG-1g.5gb").product,
            "NVIDIA-A100-SXM4-40GB"
        );
        assert_eq!(
            model("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb").product,
            "NVIDIA-A100-80GB-PCIe"
        );
        assert_eq!(
            model("nvidia-h100-80gb-hbm3-mig-3g.40gb-shared").product,
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(model("NVIDIA-L40S-SHARED").product, "NVIDIA-L40S");
        assert_eq!(model("NVIDIA-H200-MIG-7g.141gb").product, "NVIDIA-H200");
    }

    #[test]
    fn label_mig_profile_reads_the_single_strategy_suffix() {
        let profile = |label: &str| label_mig_profile(label).map(|p| p.name);
        assert_eq!(
            profile("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"),
            Some("1g.10gb")
        );
        assert_eq!(
            profile("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED"),
            Some("3g.40gb")
        );
        // No MIG suffix: whole GPUs, shared or not.
        assert_eq!(profile("NVIDIA-H100-80GB-HBM3"), None);
        assert_eq!(profile("NVIDIA-H100-80GB-HBM3-SHARED"), None);
        // A profile the product does not have, an unknown product, GFD's
        // invalid-configuration marker.
        assert_eq!(profile("NVIDIA-A100-SXM4-80GB-MIG-1g.5gb"), None);
        assert_eq!(profile("Tesla-T4-MIG-1g.5gb"), None);
        assert_eq!(profile("NVIDIA-A100-SXM4-80GB-MIG-INVALID"), None);
    }

    #[test]
    fn lookup_rejects_unknown_and_empty() {
        assert!(lookup("").is_none());
        assert!(lookup("   ").is_none());
        assert!(lookup("NVIDIA").is_none());
        assert!(lookup("NVIDIA-").is_none());
        assert!(lookup("-SHARED").is_none());
        assert!(lookup("Tesla-V100-SXM2-16GB").is_none());
        // "A100" alone is ambiguous and must not resolve.
        assert!(lookup("A100").is_none());
        assert!(lookup("H100").is_none());
        // A "-MIG-" that is not followed by a profile is not stripped.
        assert!(lookup("NVIDIA-H200-MIG-foo").is_none());
    }

    #[test]
    fn names_and_aliases_are_unambiguous() {
        // No spelling may belong to two models. Within one model, aliases may
        // repeat the product without its NVIDIA- prefix.
        let mut seen: Vec<(String, &str)> = Vec::new();
        for m in models() {
            for name in std::iter::once(&m.product).chain(m.aliases.iter()) {
                let key = match_key(&normalize(name)).to_owned();
                if let Some((_, owner)) = seen.iter().find(|(k, _)| *k == key) {
                    assert_eq!(*owner, m.product, "{name} belongs to two models");
                }
                seen.push((key, m.product));
                // Every alias must resolve back to its own model.
                assert_eq!(model(name).product, m.product);
            }
        }
    }

    #[test]
    fn product_names_sorted_and_complete() {
        let names = product_names();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), models().len());
        assert!(names.contains(&"NVIDIA-B200"));
    }

    #[test]
    fn every_profile_fits_on_one_gpu() {
        for m in models() {
            for p in m.mig_profiles {
                assert!(
                    u32::from(p.max_instances) * u32::from(p.compute_slices)
                        <= u32::from(m.compute_slices()),
                    "{} {}",
                    m.product,
                    p.name
                );
                assert!(
                    u32::from(p.max_instances) * u32::from(p.memory_slices)
                        <= u32::from(m.memory_slices()),
                    "{} {}",
                    m.product,
                    p.name
                );
                assert!(p.max_instances >= 1);
                // The name must say what the fields say.
                assert_eq!(p.name, format!("{}g.{}gb", p.compute_slices, p.memory_gb));
                // One instance of every profile is valid on its own.
                assert_eq!(check_mig_layout(m, &[(p.name, 1)]), Ok(()));
                // Filling the GPU with one profile is valid too.
                assert_eq!(
                    check_mig_layout(m, &[(p.name, u32::from(p.max_instances))]),
                    Ok(())
                );
            }
        }
    }

    #[test]
    fn full_gpu_profile_matches_memory() {
        for m in models().iter().filter(|m| m.mig_capable()) {
            let full = m
                .mig_profiles
                .iter()
                .find(|p| p.compute_slices == m.compute_slices());
            let Some(full) = full else {
                panic!("{} has no whole-GPU profile", m.product);
            };
            assert_eq!(full.memory_slices, m.memory_slices());
            assert_eq!(u32::from(full.memory_gb), m.memory_gb(), "{}", m.product);
        }
    }

    #[test]
    fn model_facts() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        assert!(a100.mig_capable());
        assert_eq!(a100.memory_gb(), 80);
        assert_eq!(a100.architecture, "ampere");
        assert_eq!(a100.nvlink_domain_size, Some(8));

        let l40s = model("NVIDIA-L40S");
        assert!(!l40s.mig_capable());
        assert_eq!(l40s.nvlink_domain_size, None);
        assert_eq!(l40s.architecture, "ada-lovelace");
        assert!(l40s.mig_profile("1g.10gb").is_none());

        assert_eq!(model("NVIDIA-B200").architecture, "blackwell");
        assert_eq!(model("NVIDIA-H200").memory_gb(), 141);
        assert_eq!(model("NVIDIA-H100-NVL").nvlink_domain_size, Some(2));
    }

    #[test]
    fn the_current_data_centre_line_is_known_by_its_nvidia_smi_names() {
        for (smi, product, gb) in [
            ("NVIDIA H100 PCIe", "NVIDIA-H100-PCIe", 80),
            ("NVIDIA H200 NVL", "NVIDIA-H200-NVL", 141),
            ("NVIDIA GH200 480GB", "NVIDIA-GH200-480GB", 96),
            ("NVIDIA GH200 144G HBM3e", "NVIDIA-GH200-144G-HBM3e", 144),
            ("NVIDIA GB200", "NVIDIA-GB200", 186),
            ("NVIDIA B300 SXM6 AC", "NVIDIA-B300-SXM6-AC", 269),
            ("NVIDIA GB300", "NVIDIA-GB300", 278),
            ("NVIDIA A30", "NVIDIA-A30", 24),
            ("NVIDIA L4", "NVIDIA-L4", 23),
            ("NVIDIA L40", "NVIDIA-L40", 45),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
                96,
            ),
        ] {
            let m = model(smi);
            assert_eq!((m.product, m.memory_gb()), (product, gb), "{smi}");
        }
        // NVL72 trays: 4 GPUs each, one NVLink domain of 72.
        assert_eq!(model("GB200").nvlink_domain_size, Some(72));
        assert_eq!(model("GB300").nvlink_domain_size, Some(72));
        // The A30 splits into 4 slices, so a 4g instance fills it.
        let a30 = model("NVIDIA-A30");
        assert_eq!((a30.compute_slices(), a30.memory_slices()), (4, 4));
        assert_eq!(
            check_mig_layout(a30, &[("1g.6gb", 2), ("2g.12gb", 1)]),
            Ok(())
        );
        assert!(matches!(
            check_mig_layout(a30, &[("4g.24gb", 1), ("1g.6gb", 1)]),
            Err(MigLayoutError::ExceedsGpu { has: (4, 4), .. })
        ));
        assert!(!model("NVIDIA-L4").mig_capable());
    }

    #[test]
    fn a100_80gb_profile_table() {
        let m = model("NVIDIA-A100-SXM4-80GB");
        let table: Vec<(&str, u8)> = m
            .mig_profiles
            .iter()
            .map(|p| (p.name, p.max_instances))
            .collect();
        assert_eq!(
            table,
            vec![
                ("1g.10gb", 7),
                ("1g.20gb", 4),
                ("2g.20gb", 3),
                ("3g.40gb", 2),
                ("4g.40gb", 1),
                ("7g.80gb", 1),
            ]
        );
    }

    #[test]
    fn mig_profile_lookup_forms() {
        let m = model("NVIDIA-H100-80GB-HBM3");
        for name in [
            "3g.40gb",
            " 3G.40GB ",
            "mig-3g.40gb",
            "nvidia.com/mig-3g.40gb",
        ] {
            let Some(p) = m.mig_profile(name) else {
                panic!("{name} should resolve");
            };
            assert_eq!(p.name, "3g.40gb");
            assert_eq!(p.compute_slices, 3);
            assert_eq!(p.memory_slices, 4);
        }
        assert!(m.mig_profile("2g.10gb").is_none());
    }

    #[test]
    fn resource_names() {
        let m = model("NVIDIA-A100-SXM4-80GB");
        let Some(p) = m.mig_profile("1g.10gb") else {
            panic!("1g.10gb should exist on A100 80GB");
        };
        assert_eq!(p.resource_name(), "nvidia.com/mig-1g.10gb");
        let Some(p) = model("NVIDIA-B200").mig_profile("7g.180gb") else {
            panic!("7g.180gb should exist on B200");
        };
        assert_eq!(p.resource_name(), "nvidia.com/mig-7g.180gb");
    }

    #[test]
    fn valid_layouts() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        assert_eq!(check_mig_layout(a100, &[("1g.10gb", 7)]), Ok(()));
        assert_eq!(
            check_mig_layout(a100, &[("3g.40gb", 1), ("4g.40gb", 1)]),
            Ok(())
        );
        assert_eq!(
            check_mig_layout(a100, &[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)]),
            Ok(())
        );
        assert_eq!(check_mig_layout(a100, &[]), Ok(()));
        assert_eq!(
            check_mig_layout(a100, &[("7g.80gb", 1), ("1g.10gb", 0)]),
            Ok(())
        );
        // Repeated entries are added together.
        assert_eq!(
            check_mig_layout(a100, &[("1g.10gb", 3), ("1g.10gb", 4)]),
            Ok(())
        );

        let a100_40 = model("NVIDIA-A100-SXM4-40GB");
        assert_eq!(
            check_mig_layout(a100_40, &[("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)]),
            Ok(())
        );
        assert_eq!(check_mig_layout(a100_40, &[("1g.10gb", 4)]), Ok(()));

        let h200 = model("NVIDIA-H200");
        assert_eq!(
            check_mig_layout(h200, &[("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)]),
            Ok(())
        );
        let b200 = model("NVIDIA-B200");
        assert_eq!(
            check_mig_layout(b200, &[("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)]),
            Ok(())
        );
    }

    #[test]
    fn layout_not_mig_capable() {
        let l40s = model("NVIDIA-L40S");
        let err = check_mig_layout(l40s, &[("1g.10gb", 1)]);
        assert_eq!(
            err,
            Err(MigLayoutError::NotMigCapable {
                product: "NVIDIA-L40S"
            })
        );
        if let Err(e) = err {
            assert_eq!(
                e.to_string(),
                "NVIDIA-L40S does not support MIG partitioning"
            );
        }
    }

    #[test]
    fn layout_unknown_profile() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        let err = check_mig_layout(a100, &[("1g.10gb", 1), ("2g.10gb", 1)]);
        let Err(e) = err else {
            panic!("2g.10gb does not exist on A100 80GB");
        };
        assert_eq!(
            e,
            MigLayoutError::UnknownProfile {
                profile: "2g.10gb".to_owned(),
                product: "NVIDIA-A100-SXM4-80GB",
                known: vec![
                    "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"
                ],
            }
        );
        assert_eq!(
            e.to_string(),
            "MIG profile \"2g.10gb\" is not available on NVIDIA-A100-SXM4-80GB; \
             known profiles: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
        );
    }

    #[test]
    fn layout_too_many_instances() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        let err = check_mig_layout(a100, &[("3g.40gb", 3)]);
        assert_eq!(
            err,
            Err(MigLayoutError::TooManyInstances {
                profile: "3g.40gb".to_owned(),
                requested: 3,
                max: 2,
            })
        );
        // Split across entries, and with a huge count that must not overflow.
        let err = check_mig_layout(a100, &[("1g.10gb", 4), ("1g.10gb", 4)]);
        assert!(matches!(
            err,
            Err(MigLayoutError::TooManyInstances {
                requested: 8,
                max: 7,
                ..
            })
        ));
        let err = check_mig_layout(a100, &[("1g.10gb", u32::MAX), ("1g.10gb", u32::MAX)]);
        assert!(matches!(
            err,
            Err(MigLayoutError::TooManyInstances {
                requested: u32::MAX,
                max: 7,
                ..
            })
        ));
        if let Err(e) = check_mig_layout(a100, &[("3g.40gb", 3)]) {
            assert_eq!(
                e.to_string(),
                "MIG profile \"3g.40gb\" requested 3 times, but at most 2 fit on one GPU"
            );
        }
    }

    #[test]
    fn layout_exceeds_gpu() {
        let a100 = model("NVIDIA-A100-SXM4-80GB");
        // Too much compute: 4 + 4 slices.
        let err = check_mig_layout(a100, &[("4g.40gb", 1), ("3g.40gb", 1), ("1g.10gb", 1)]);
        assert_eq!(
            err,
            Err(MigLayoutError::ExceedsGpu {
                compute_slices: 8,
                memory_gb: 90,
                product: "NVIDIA-A100-SXM4-80GB",
                has: (7, 8),
            })
        );
        // Compute fits (7) but memory does not: 4 + 2 + 2 + 1 = 9 slices.
        let err = check_mig_layout(a100, &[("4g.40gb", 1), ("1g.20gb", 2), ("1g.10gb", 1)]);
        assert_eq!(
            err,
            Err(MigLayoutError::ExceedsGpu {
                compute_slices: 7,
                memory_gb: 90,
                product: "NVIDIA-A100-SXM4-80GB",
                has: (7, 8),
            })
        );
        if let Err(e) = err {
            assert_eq!(
                e.to_string(),
                "MIG layout needs 7 compute slices and 90 GB of memory, more than one \
                 NVIDIA-A100-SXM4-80GB provides (7 compute slices, 8 memory slices)"
            );
        }
        // The whole-GPU profile leaves room for nothing else.
        let b200 = model("NVIDIA-B200");
        assert!(matches!(
            check_mig_layout(b200, &[("7g.180gb", 1), ("1g.23gb", 1)]),
            Err(MigLayoutError::ExceedsGpu {
                compute_slices: 8,
                ..
            })
        ));
    }

    #[test]
    fn error_is_std_error() {
        let e: Box<dyn std::error::Error> = Box::new(MigLayoutError::NotMigCapable {
            product: "NVIDIA-L40S",
        });
        assert!(e.to_string().contains("NVIDIA-L40S"));
    }
    #[test]
    fn named_mig_configs_follow_the_gpu_operators_default_config() {
        let layout = |product: &str, name: &str| -> Vec<(&str, u32)> {
            match mig_config(model(product), name) {
                Ok(c) => c.devices.iter().map(|(p, n)| (p.name, *n)).collect(),
                Err(e) => panic!("{product} {name}: {e}"),
            }
        };
        // all-balanced, per product, as the default config's device filters say.
        for (product, want) in [
            (
                "NVIDIA-A100-SXM4-40GB",
                vec![("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
            ),
            (
                "NVIDIA-A100-PCIE-40GB",
                vec![("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
            ),
            (
                "NVIDIA-H100-80GB-HBM3",
                vec![("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)],
            ),
            (
                "NVIDIA-H100-NVL",
                vec![("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)],
            ),
            (
                "NVIDIA-GH200-480GB",
                vec![("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1)],
            ),
            (
                "NVIDIA-H200-NVL",
                vec![("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)],
            ),
            (
                "NVIDIA-B200",
                vec![("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)],
            ),
            (
                "NVIDIA-GB200",
                vec![("1g.23gb", 2), ("2g.47gb", 1), ("3g.93gb", 1)],
            ),
            (
                "NVIDIA-B300-SXM6-AC",
                vec![("1g.34gb", 2), ("2g.67gb", 1), ("3g.135gb", 1)],
            ),
            ("NVIDIA-A30", vec![("1g.6gb", 2), ("2g.12gb", 1)]),
            (
                "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
                vec![("1g.24gb", 2), ("2g.48gb", 1)],
            ),
        ] {
            assert_eq!(layout(product, "all-balanced"), want, "{product}");
        }
        // all-<profile> fills the GPU: the default config's counts are the
        // profile's maximum (4 of 1g.10gb on a 40GB A100, 7 on an 80GB one).
        assert_eq!(
            layout("NVIDIA-A100-SXM4-40GB", "all-1g.10gb"),
            vec![("1g.10gb", 4)]
        );
        assert_eq!(
            layout("NVIDIA-A100-SXM4-80GB", "all-1g.10gb"),
            vec![("1g.10gb", 7)]
        );
        assert_eq!(layout("NVIDIA-GB300", "all-1g.35gb"), vec![("1g.35gb", 7)]);
        assert_eq!(layout("NVIDIA-H200", " ALL-3G.71GB "), vec![("3g.71gb", 2)]);
        assert_eq!(layout("NVIDIA-H200", "3g.71gb"), vec![("3g.71gb", 2)]);
        let Ok(off) = mig_config(model("NVIDIA-H200"), "all-disabled") else {
            panic!("all-disabled is a config");
        };
        assert!(!off.enabled && off.devices.is_empty());
        let Ok(on) = mig_config(model("NVIDIA-H200"), "all-enabled") else {
            panic!("all-enabled is a config");
        };
        assert!(on.enabled && on.devices.is_empty() && on.is_uniform());
    }

    #[test]
    fn every_mig_product_has_one_balanced_layout_that_fits() {
        for m in models().iter().filter(|m| m.mig_capable()) {
            let matching = BALANCED_LAYOUTS
                .iter()
                .filter(|l| l.iter().all(|(p, _)| m.mig_profile(p).is_some()))
                .count();
            assert_eq!(matching, 1, "{}", m.product);
            let Ok(c) = mig_config(m, "all-balanced") else {
                panic!("{} has all-balanced", m.product);
            };
            let layout: Vec<(&str, u32)> = c.devices.iter().map(|(p, n)| (p.name, *n)).collect();
            assert_eq!(check_mig_layout(m, &layout), Ok(()), "{}", m.product);
            assert!(!c.is_uniform());
        }
    }

    #[test]
    fn unknown_mig_config_names_list_the_known_ones() {
        let a100 = model("NVIDIA-A100-SXM4-40GB");
        let Err(e) = mig_config(a100, "all-1g.5gb.me") else {
            panic!("media-extension configs are not accepted");
        };
        let text = e.to_string();
        assert!(
            text.contains("all-balanced") && text.contains("all-1g.5gb"),
            "{text}"
        );
        assert!(mig_config(a100, "all-1g.10gb.me").is_err());
        assert!(mig_config(a100, "custom-layout").is_err());
        assert_eq!(
            mig_config(model("NVIDIA-L40S"), "all-disabled"),
            Err(MigConfigError::NotMigCapable {
                product: "NVIDIA-L40S"
            })
        );
    }
}
