//! The fleet spec as written: its TOML shape, its parsing and its validation.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The default fleet spec (`lab/fleets/default.toml`), built into the binary.
pub const DEFAULT_FLEET_TOML: &str = include_str!("../../fleets/default.toml");

/// Why a fleet spec could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The spec file could not be read.
    #[error("failed to read the fleet spec {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The spec is not valid TOML or does not have the documented shape.
    #[error("failed to parse the fleet spec: {0}")]
    Parse(#[source] toml::de::Error),
    /// A product is not in the GPU catalog.
    #[error(
        "failed to resolve GPU product {product:?} (rack {rack}): not in the catalog; known products: {known}"
    )]
    UnknownProduct {
        /// The product as written.
        product: String,
        /// The rack it was written in.
        rack: String,
        /// The catalog's products, comma-separated.
        known: String,
    },
    /// The spec parsed but breaks a rule (names, counts, quantities, address space).
    #[error("failed to validate the fleet spec: {0}")]
    Invalid(String),
}

/// Whether a rack's nodes are powered while no workload needs them (for the BCM emulator).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// Powered on (the default).
    #[default]
    On,
    /// Powered off until a node pool needs the node.
    Off,
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

/// A fleet spec as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// A name for the fleet (informational).
    #[serde(default = "default_name")]
    pub name: String,
    /// The network node (BMC) addresses come from: rack `k` gets `<base> + k*256`, its nodes
    /// `.10`, `.11`, … Addresses are data only: nothing connects to them.
    #[serde(default = "default_node_network")]
    pub node_network: String,
    /// The network node pod CIDRs (`spec.podCIDR`, a /24 each) come from.
    #[serde(default = "default_pod_network")]
    pub pod_network: String,
    /// The sites (data centres).
    #[serde(rename = "site")]
    pub sites: Vec<SiteSpec>,
}

/// One site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSpec {
    /// Site name (DNS label).
    pub name: String,
    /// Its zone: `topology.kubernetes.io/zone`.
    pub zone: String,
    /// Its region: `topology.kubernetes.io/region`; the site name when left out.
    #[serde(default)]
    pub region: Option<String>,
    /// Its racks.
    #[serde(rename = "rack")]
    pub racks: Vec<RackSpec>,
}

/// One rack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RackSpec {
    /// Rack name (DNS label), unique in the fleet.
    pub name: String,
    /// Power state of its nodes while idle.
    #[serde(default)]
    pub idle_power: PowerState,
    /// Groups of identical nodes, numbered on within the rack.
    pub nodes: Vec<NodeGroupSpec>,
}

/// A group of identical nodes in a rack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroupSpec {
    /// GPU product, by its GFD name (`NVIDIA-H100-80GB-HBM3`); catalog aliases work too.
    pub product: String,
    /// How many nodes.
    pub count: u32,
    /// GPUs per node: the `nvidia.com/gpu` capacity.
    pub gpus_per_node: u32,
    /// CPU capacity, a Kubernetes quantity (`"224"`).
    pub cpu: String,
    /// Memory capacity, a Kubernetes quantity (`"2Ti"`).
    pub memory: String,
    /// Extra node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node taints, as kubectl writes them: `key=value:Effect` or `key:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
}

fn default_name() -> String {
    "fleet".to_owned()
}

fn default_node_network() -> String {
    "10.240.0.0/12".to_owned()
}

fn default_pod_network() -> String {
    "100.64.0.0/10".to_owned()
}

impl FleetSpec {
    /// Parses a spec from TOML.
    ///
    /// # Errors
    /// [`FleetError::Parse`] when the text is not a spec.
    pub fn from_toml(text: &str) -> Result<Self, FleetError> {
        toml::from_str(text).map_err(FleetError::Parse)
    }

    /// Reads and parses a spec file.
    ///
    /// # Errors
    /// When the file cannot be read or parsed.
    pub fn from_file(path: &Path) -> Result<Self, FleetError> {
        let text = std::fs::read_to_string(path).map_err(|source| FleetError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// The default fleet (`lab/fleets/default.toml`).
    ///
    /// # Panics
    /// Never: the built-in spec is checked by the unit tests.
    #[must_use]
    pub fn default_fleet() -> Self {
        #[allow(clippy::expect_used)]
        Self::from_toml(DEFAULT_FLEET_TOML).expect("the built-in default fleet parses")
    }

    /// The spec as TOML.
    ///
    /// # Errors
    /// Never in practice (every field serialises).
    pub fn to_toml(&self) -> Result<String, FleetError> {
        toml::to_string(self).map_err(|e| FleetError::Invalid(e.to_string()))
    }
}

/// A taint on a fleet node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl NodeTaint {
    /// Parses `key=value:Effect` or `key:Effect`.
    ///
    /// # Errors
    /// A message when the syntax or effect is wrong.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("taint {s:?}: expected key=value:Effect"))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(format!(
                "taint {s:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if key.is_empty() {
            return Err(format!("taint {s:?}: empty key"));
        }
        Ok(Self {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: effect.to_owned(),
        })
    }
}

/// How many nodes a rack holds.
pub(super) fn rack_size(rack: &RackSpec) -> usize {
    rack.nodes.iter().map(|g| g.count as usize).sum()
}

/// Checks names, counts and quantities.
pub(super) fn validate(spec: &FleetSpec) -> Result<(), FleetError> {
    let invalid = |m: String| Err(FleetError::Invalid(m));
    if spec.sites.is_empty() {
        return invalid("the spec has no [[site]]".into());
    }
    let mut racks = HashSet::new();
    let mut sites = HashSet::new();
    for site in &spec.sites {
        check_dns_label("site", &site.name)?;
        if !sites.insert(&site.name) {
            return invalid(format!("site {:?} appears twice", site.name));
        }
        if site.zone.is_empty() {
            return invalid(format!("site {:?} has an empty zone", site.name));
        }
        if site.racks.is_empty() {
            return invalid(format!("site {:?} has no [[site.rack]]", site.name));
        }
        for rack in &site.racks {
            check_dns_label("rack", &rack.name)?;
            // gpu-<rack>-<nn>, and room for a replica suffix, must stay a DNS label.
            if rack.name.len() > 40 {
                return invalid(format!(
                    "rack name {:?} is longer than 40 characters",
                    rack.name
                ));
            }
            if !racks.insert(&rack.name) {
                return invalid(format!("rack {:?} appears twice", rack.name));
            }
            if rack.nodes.is_empty() {
                return invalid(format!("rack {:?} has no [[site.rack.nodes]]", rack.name));
            }
            if rack_size(rack) > 240 {
                return invalid(format!(
                    "rack {:?} has more than 240 nodes (one /24 of addresses per rack)",
                    rack.name
                ));
            }
            for group in &rack.nodes {
                if group.count == 0 {
                    return invalid(format!("rack {:?}: count must be at least 1", rack.name));
                }
                if group.gpus_per_node == 0 || group.gpus_per_node > 64 {
                    return invalid(format!(
                        "rack {:?}: gpus_per_node must be between 1 and 64",
                        rack.name
                    ));
                }
                for (what, q) in [("cpu", &group.cpu), ("memory", &group.memory)] {
                    if !is_quantity(q) {
                        return invalid(format!(
                            "rack {:?}: {what} {q:?} is not a Kubernetes quantity (like \"96\" or \"1Ti\")",
                            rack.name
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// RFC 1123 label: lowercase alphanumerics and `-`, starting and ending alphanumeric.
fn check_dns_label(what: &str, name: &str) -> Result<(), FleetError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(FleetError::Invalid(format!(
            "{what} name {name:?} must be a DNS label: lowercase letters, digits and '-'"
        )))
    }
}

/// A plain Kubernetes quantity: a decimal number with an optional suffix.
fn is_quantity(s: &str) -> bool {
    const SUFFIXES: &[&str] = &[
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "k", "M", "G", "T", "P", "E", "",
    ];
    SUFFIXES.iter().any(|suffix| {
        s.strip_suffix(suffix).is_some_and(|num| {
            let mut parts = num.splitn(2, '.');
            let int = parts.next().unwrap_or("");
            let frac = parts.next();
            !int.is_empty()
                && int.chars().all(|c| c.is_ascii_digit())
                && frac.is_none_or(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_through_toml() {
        let spec = FleetSpec::default_fleet();
        let again = FleetSpec::from_toml(&spec.to_toml().expect("to toml")).expect("parse");
        assert_eq!(spec, again);
    }

    #[test]
    fn quantities() {
        for ok in ["1", "96", "0.5", "500m", "1Ti", "512Gi", "2T"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "1.", "1 Gi", "-1", "lots", "1GB"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
