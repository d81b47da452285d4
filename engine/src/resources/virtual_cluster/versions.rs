//! The pinned vCluster release and the Kubernetes versions it runs.
//!
//! gpufleet renders what one vCluster chart version would create, so the virtual cluster's
//! Kubernetes version is chosen from the list that release supports; anything else is a
//! plan-time error on `kubernetes_version`.

use crate::{diag::Diagnostics, path::AttrPath, schema::Validator, value::Value};

/// The vCluster release whose chart gpufleet renders: the one place it is pinned.
/// `scripts/install-helm` reads it from here, and the chart defaults
/// (`chart_values.json`) are those of this release.
pub const VCLUSTER_VERSION: &str = "0.36.0";

/// The Kubernetes minor versions the pinned vCluster runs, oldest first, each with the tag of
/// vCluster's Kubernetes image for it (vCluster's own version map, `K8SVersionMap`). The last
/// is the default.
pub const KUBERNETES: &[(&str, &str)] = &[
    ("1.30", "v1.30.2"),
    ("1.31", "v1.31.1"),
    ("1.32", "v1.32.1"),
    ("1.33", "v1.33.4"),
    ("1.34", "v1.34.0"),
    ("1.35", "v1.35.0"),
    ("1.36", "v1.36.0"),
];

/// The minor versions of [`KUBERNETES`], oldest first.
pub const KUBERNETES_VERSIONS: &[&str] = &["1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36"];

/// The default Kubernetes version: the newest the pinned vCluster runs.
pub fn default_kubernetes_version() -> &'static str {
    KUBERNETES_VERSIONS.last().copied().unwrap_or("1.36")
}

/// The distro image tag for a supported minor version (`1.33` → `v1.33.4`), as
/// `controlPlane.distro.k8s.version` spells it; `v<minor>.0` for one gpufleet does not know
/// (validation refuses those before anything is rendered).
pub fn distro_tag(minor: &str) -> String {
    KUBERNETES
        .iter()
        .find(|(m, _)| *m == minor)
        .map_or_else(|| format!("v{minor}.0"), |(_, tag)| (*tag).to_owned())
}

/// The minor version of a distro tag (`v1.36.0` → `1.36`), when it is one gpufleet knows.
pub fn minor_of_tag(tag: &str) -> Option<&'static str> {
    let t = tag.trim().trim_start_matches('v');
    KUBERNETES_VERSIONS
        .iter()
        .copied()
        .find(|m| t == *m || t.strip_prefix(m).is_some_and(|rest| rest.starts_with('.')))
}

/// Orders two supported versions; `None` when either is unknown.
pub fn compare(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let pos = |v: &str| KUBERNETES_VERSIONS.iter().position(|k| *k == v);
    Some(pos(a)?.cmp(&pos(b)?))
}

/// `kubernetes_version` must be one the pinned vCluster supports.
#[derive(Debug, Clone, Copy, Default)]
pub struct SupportedKubernetesVersion;

impl Validator for SupportedKubernetesVersion {
    fn description(&self) -> String {
        format!(
            "One of {} (the versions vCluster {VCLUSTER_VERSION} runs).",
            list()
        )
    }

    fn validate(&self, path: &AttrPath, value: &Value, diags: &mut Diagnostics) {
        let Some(v) = value.as_str() else { return };
        if !KUBERNETES_VERSIONS.contains(&v) {
            diags.error_at(
                path.clone(),
                "Unsupported Kubernetes Version",
                format!(
                    "{path} is {v:?}; vCluster {VCLUSTER_VERSION} runs {}. Give the minor \
                     version only, such as \"{}\".",
                    list(),
                    default_kubernetes_version()
                ),
            );
        }
    }
}

fn list() -> String {
    KUBERNETES_VERSIONS
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_tables_agree() {
        let minors: Vec<&str> = KUBERNETES.iter().map(|(m, _)| *m).collect();
        assert_eq!(minors, KUBERNETES_VERSIONS);
        assert_eq!(distro_tag("1.33"), "v1.33.4");
    }

    #[test]
    fn tags_round_trip() {
        for v in KUBERNETES_VERSIONS {
            assert_eq!(minor_of_tag(&distro_tag(v)), Some(*v));
        }
        assert_eq!(minor_of_tag("v1.36.3"), Some("1.36"));
        assert_eq!(minor_of_tag("v1.361.0"), None);
        assert_eq!(minor_of_tag("v1.20.0"), None);
        assert_eq!(minor_of_tag("v1.29.0"), None);
    }

    #[test]
    fn validator_table() {
        for (input, ok) in [
            ("1.36", true),
            ("1.34", true),
            ("1.30", true),
            ("1.29", false),
            ("v1.36", false),
        ] {
            let mut d = Diagnostics::new();
            SupportedKubernetesVersion.validate(
                &AttrPath::attr("kubernetes_version"),
                &Value::string(input),
                &mut d,
            );
            assert_eq!(!d.has_error(), ok, "{input:?}");
        }
    }
}
