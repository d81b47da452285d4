//! The fleet spec: sites, racks and GPU nodes, and the Kubernetes Node objects made from it.
//!
//! The spec is TOML (format in `lab/fleets/README.md`, default in
//! `lab/fleets/default.toml`). Products are named by their GPU feature discovery names
//! (`NVIDIA-H100-80GB-HBM3`, …) and resolved in the engine's catalog
//! ([`gpufleet_core::catalog::lookup`]), which supplies the memory, MIG capability,
//! architecture and NVLink domain size of each.
//!
//! [`Fleet::new`] expands a spec into [`FleetNode`]s: one per node, with a deterministic
//! name (`gpu-<rack>-<nn>`), a BMC-like identity (hostname, MAC address, IP address,
//! rack, idle power state) for the BCM and Netris emulators, and the labels, taints and
//! capacity its Kubernetes Node carries ([`FleetNode::to_node`]). A scale asks for at
//! least N nodes: the racks are replicated (`<rack>-r2`, `<rack>-r3`, …) round-robin over
//! the sites until there are.

mod labels;
mod node;
mod spec;

use std::collections::HashSet;
use std::net::Ipv4Addr;

use gpufleet_core::catalog;

pub use self::labels::{
    BLOCK_LABEL, CLIQUE_LABEL, DRIVER_LABELS, GPU_COUNT_LABEL, GPU_FAMILY_LABEL, GPU_MEMORY_LABEL,
    GPU_PRESENT_LABEL, GPU_PRODUCT_LABEL, GPU_RESOURCE, HARDWARE_ANNOTATION, KWOK_ANNOTATION,
    MAC_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, MIG_CAPABLE_LABEL, NVLINK_DOMAIN_LABEL,
    PODS_PER_NODE, RACK_LABEL, REGION_LABEL, SITE_LABEL, ZONE_LABEL,
};
pub use self::node::FleetNode;
pub use self::spec::{
    DEFAULT_FLEET_TOML, FleetError, FleetSpec, NodeGroupSpec, NodeTaint, PowerState, RackSpec,
    SiteSpec,
};
use self::spec::{rack_size, validate};

/// A fleet: the spec it came from, the scale asked for, and its nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    spec: FleetSpec,
    scale: Option<usize>,
    racks: Vec<String>,
    nodes: Vec<FleetNode>,
}

/// A rack with its place in the address plan, during expansion.
struct PlacedRack<'a> {
    site: &'a SiteSpec,
    rack: &'a RackSpec,
    name: String,
    block: u32,
}

impl Fleet {
    /// Expands `spec` into nodes; with `scale`, replicates racks until there are at least
    /// that many.
    ///
    /// # Errors
    /// When a product is unknown or the spec breaks a rule.
    pub fn new(spec: FleetSpec, scale: Option<usize>) -> Result<Self, FleetError> {
        validate(&spec)?;
        let mut per_site: Vec<Vec<PlacedRack<'_>>> = Vec::new();
        let mut block = 0u32;
        let mut total = 0usize;
        for site in &spec.sites {
            let mut racks = Vec::new();
            for rack in &site.racks {
                racks.push(PlacedRack {
                    site,
                    rack,
                    name: rack.name.clone(),
                    block,
                });
                block += 1;
                total += rack_size(rack);
            }
            per_site.push(racks);
        }
        if let Some(want) = scale {
            let mut round = 2u32;
            'grow: while total < want {
                for (site_idx, site) in spec.sites.iter().enumerate() {
                    for rack in &site.racks {
                        if total >= want {
                            break 'grow;
                        }
                        per_site[site_idx].push(PlacedRack {
                            site,
                            rack,
                            name: format!("{}-r{round}", rack.name),
                            block,
                        });
                        block += 1;
                        total += rack_size(rack);
                    }
                }
                round += 1;
            }
        }

        let node_net = parse_cidr(&spec.node_network)?;
        let pod_net = parse_cidr(&spec.pod_network)?;
        let mut nodes = Vec::with_capacity(total);
        let mut rack_names = Vec::new();
        for placed in per_site.iter().flatten() {
            rack_names.push(placed.name.clone());
            expand_rack(placed, node_net, pod_net, nodes.len(), &mut nodes)?;
        }
        let mut macs = HashSet::new();
        for n in &nodes {
            if !macs.insert(n.mac.clone()) {
                return Err(FleetError::Invalid(format!(
                    "two nodes hash to MAC address {}; rename a rack",
                    n.mac
                )));
            }
        }
        Ok(Self {
            spec,
            scale,
            racks: rack_names,
            nodes,
        })
    }

    /// The default fleet, optionally scaled.
    ///
    /// # Errors
    /// Only when `scale` asks for more nodes than the address plan holds.
    pub fn default_fleet(scale: Option<usize>) -> Result<Self, FleetError> {
        Self::new(FleetSpec::default_fleet(), scale)
    }

    /// The spec.
    #[must_use]
    pub fn spec(&self) -> &FleetSpec {
        &self.spec
    }

    /// The scale asked for.
    #[must_use]
    pub fn scale(&self) -> Option<usize> {
        self.scale
    }

    /// Every node, by site, then rack (replicas after the originals), then number.
    #[must_use]
    pub fn nodes(&self) -> &[FleetNode] {
        &self.nodes
    }

    /// The racks' names, including replicas, in node order.
    #[must_use]
    pub fn racks(&self) -> &[String] {
        &self.racks
    }

    /// Total GPUs.
    #[must_use]
    pub fn gpu_count(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.gpus)).sum()
    }

    /// The distinct GPU products, sorted.
    #[must_use]
    pub fn products(&self) -> Vec<&'static str> {
        let mut p: Vec<&'static str> = self.nodes.iter().map(|n| n.model.product).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// A node by name.
    #[must_use]
    pub fn node(&self, name: &str) -> Option<&FleetNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// Appends the nodes of one placed rack.
fn expand_rack(
    placed: &PlacedRack<'_>,
    node_net: (u32, u8),
    pod_net: (u32, u8),
    first_index: usize,
    out: &mut Vec<FleetNode>,
) -> Result<(), FleetError> {
    let size = rack_size(placed.rack);
    let width = size.to_string().len().max(2);
    let mut number = 0usize;
    let mut nvl_domain = 0usize;
    for group in &placed.rack.nodes {
        let model = catalog::lookup(&group.product).ok_or_else(|| FleetError::UnknownProduct {
            product: group.product.clone(),
            rack: placed.rack.name.clone(),
            known: catalog::product_names().join(", "),
        })?;
        let taints = group
            .taints
            .iter()
            .map(|t| NodeTaint::parse(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(FleetError::Invalid)?;
        // Nodes per NVLink domain: a domain of D GPUs spans D / G nodes of G GPUs each.
        let nodes_per_domain = model
            .nvlink_domain_size
            .map(|d| (u32::from(d) / group.gpus_per_node).max(1) as usize);
        for i in 0..group.count as usize {
            number += 1;
            let name = format!("gpu-{}-{number:0width$}", placed.name);
            let domain = nodes_per_domain.map(|per| nvl_domain + i / per);
            let nvlink_domain = domain.map(|k| format!("{}-nvl{k}", placed.name));
            let spans_nodes = model
                .nvlink_domain_size
                .is_some_and(|d| u32::from(d) > group.gpus_per_node);
            let nvlink_clique = domain
                .filter(|_| spans_nodes)
                .map(|k| clique_for(&placed.name, k));
            let ip = host_in(node_net, u64::from(placed.block) * 256 + 9 + number as u64)
                .ok_or_else(|| {
                    FleetError::Invalid(format!(
                        "node_network has no room for rack {} (rack number {}, a /24 each)",
                        placed.name, placed.block
                    ))
                })?;
            let index = first_index + number - 1;
            let pod_base = host_in(pod_net, index as u64 * 256).ok_or_else(|| {
                FleetError::Invalid(format!(
                    "pod_network has no room for {} nodes (a /24 each)",
                    index + 1
                ))
            })?;
            out.push(FleetNode {
                mac: mac_for(&name),
                name,
                site: placed.site.name.clone(),
                zone: placed.site.zone.clone(),
                region: placed
                    .site
                    .region
                    .clone()
                    .unwrap_or_else(|| placed.site.name.clone()),
                rack: placed.name.clone(),
                model,
                gpus: group.gpus_per_node,
                cpu: group.cpu.clone(),
                memory: group.memory.clone(),
                ip,
                pod_cidr: format!("{pod_base}/24"),
                idle_power: placed.rack.idle_power,
                nvlink_domain,
                nvlink_clique,
                extra_labels: group.labels.clone(),
                taints: taints.clone(),
            });
        }
        if let Some(per) = nodes_per_domain {
            nvl_domain += (group.count as usize).div_ceil(per);
        }
    }
    Ok(())
}

/// A SHA-256 of `name`: the lab's stable, made-up identities come from it.
fn digest_of(name: &str) -> aws_lc_rs::digest::Digest {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, name.as_bytes())
}

/// GPU feature discovery's clique value for NVLink domain `k` of `rack`:
/// `<cluster UUID>.<k>`, the UUID derived from the rack.
fn clique_for(rack: &str, k: usize) -> String {
    let hex: String = digest_of(rack).as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}.{k}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A locally administered unicast MAC address derived from a SHA-256 of the name.
fn mac_for(name: &str) -> String {
    let digest = digest_of(name);
    let b = digest.as_ref();
    format!(
        "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3], b[4]
    )
}

/// Parses `a.b.c.d/len` into (network address, prefix length).
fn parse_cidr(s: &str) -> Result<(u32, u8), FleetError> {
    let bad = || FleetError::Invalid(format!("{s:?} is not an IPv4 CIDR like 10.240.0.0/12"));
    let (addr, len) = s.split_once('/').ok_or_else(bad)?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    if len > 24 {
        return Err(bad());
    }
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    Ok((u32::from(addr) & mask, len))
}

/// The `offset`-th address of a network, if it is inside it.
fn host_in((base, len): (u32, u8), offset: u64) -> Option<Ipv4Addr> {
    let size = 1u64 << (32 - u32::from(len));
    (offset < size).then(|| Ipv4Addr::from(base + offset as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(extra: &str) -> String {
        format!(
            r#"
[[site]]
name = "s1"
zone = "z1"
[[site.rack]]
name = "r1"
[[site.rack.nodes]]
product = "NVIDIA-H100-80GB-HBM3"
count = 3
gpus_per_node = 8
cpu = "96"
memory = "1Ti"
{extra}
"#
        )
    }

    #[test]
    fn default_fleet_meets_the_minimums() {
        let fleet = Fleet::default_fleet(None).expect("default fleet");
        assert!(fleet.nodes().len() >= 64, "{}", fleet.nodes().len());
        assert!(fleet.racks().len() >= 4);
        assert!(fleet.products().len() >= 3);
        let zones: HashSet<&str> = fleet.nodes().iter().map(|n| n.zone.as_str()).collect();
        assert!(zones.len() >= 2);
        let names: HashSet<&str> = fleet.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names.len(), fleet.nodes().len(), "names are unique");
        assert!(
            fleet
                .nodes()
                .iter()
                .any(|n| n.idle_power == PowerState::Off)
        );
    }

    #[test]
    fn every_node_carries_the_gfd_and_topology_labels() {
        let fleet = Fleet::default_fleet(None).expect("default fleet");
        for node in fleet.nodes() {
            let l = node.labels();
            for key in [
                GPU_PRODUCT_LABEL,
                GPU_COUNT_LABEL,
                GPU_MEMORY_LABEL,
                MIG_CAPABLE_LABEL,
                ZONE_LABEL,
                RACK_LABEL,
                "kubernetes.io/hostname",
            ] {
                assert!(l.contains_key(key), "{} lacks {key}", node.name);
            }
            assert_eq!(
                l.contains_key(NVLINK_DOMAIN_LABEL),
                node.model.nvlink_domain_size.is_some(),
                "{}",
                node.name
            );
        }
        let h100 = fleet.node("gpu-rack-a1-01").expect("first H100 node");
        let l = h100.labels();
        assert_eq!(l[GPU_PRODUCT_LABEL], "NVIDIA-H100-80GB-HBM3");
        assert_eq!(l[GPU_COUNT_LABEL], "8");
        assert_eq!(l[GPU_MEMORY_LABEL], "81559");
        assert_eq!(l[MIG_CAPABLE_LABEL], "true");
        assert_eq!(l[GPU_FAMILY_LABEL], "hopper");
        assert_eq!(l[ZONE_LABEL], "zone-a");
        assert_eq!(l[RACK_LABEL], "rack-a1");
        assert_eq!(l[NVLINK_DOMAIN_LABEL], "rack-a1-nvl0");
        assert_eq!(l[BLOCK_LABEL], "rack-a1");
        // An HGX board is its own NVLink domain: no clique, as GFD sets none there.
        assert!(!l.contains_key(CLIQUE_LABEL));
        assert_eq!(l["nvidia.com/cuda.driver.major"], "570");
        assert_eq!(l["nvidia.com/cuda.runtime.minor"], "8");
        let l40s = fleet
            .nodes()
            .iter()
            .find(|n| n.model.product == "NVIDIA-L40S")
            .expect("an L40S node");
        assert_eq!(l40s.labels()[MIG_CAPABLE_LABEL], "false");
        assert!(!l40s.labels().contains_key(NVLINK_DOMAIN_LABEL));
    }

    #[test]
    fn node_objects_have_capacity_and_the_kwok_annotation_but_no_kwok_taint() {
        let fleet = Fleet::default_fleet(None).expect("default fleet");
        let node = fleet.nodes()[0].to_node();
        let status = node.status.expect("status");
        let cap = status.capacity.expect("capacity");
        assert_eq!(cap[GPU_RESOURCE].0, "8");
        assert_eq!(cap["cpu"].0, "224");
        assert_eq!(cap["memory"].0, "2Ti");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(status.allocatable.expect("allocatable"), cap);
        let ann = node.metadata.annotations.expect("annotations");
        assert_eq!(ann[KWOK_ANNOTATION], "fake");
        assert!(node.spec.expect("spec").taints.is_none());
    }

    #[test]
    fn identities_are_deterministic_and_distinct() {
        let a = Fleet::default_fleet(None).expect("a");
        let b = Fleet::default_fleet(None).expect("b");
        assert_eq!(a, b);
        let n = &a.nodes()[0];
        assert!(n.mac.starts_with("02:"), "{}", n.mac);
        assert_eq!(n.mac.len(), 17);
        assert_eq!(n.ip, Ipv4Addr::new(10, 240, 0, 10));
        assert_eq!(n.pod_cidr, "100.64.0.0/24");
        let second_rack = a.nodes().iter().find(|n| n.rack == "rack-a2").expect("a2");
        assert_eq!(second_rack.ip, Ipv4Addr::new(10, 240, 1, 10));
        let ips: HashSet<Ipv4Addr> = a.nodes().iter().map(|n| n.ip).collect();
        assert_eq!(ips.len(), a.nodes().len());
        let cidrs: HashSet<&str> = a.nodes().iter().map(|n| n.pod_cidr.as_str()).collect();
        assert_eq!(cidrs.len(), a.nodes().len());
    }

    #[test]
    fn scale_replicates_racks_to_reach_at_least_n_nodes() {
        let base = Fleet::default_fleet(None).expect("base");
        let big = Fleet::default_fleet(Some(1000)).expect("scaled");
        assert!(big.nodes().len() >= 1000, "{}", big.nodes().len());
        // At most one rack of overshoot.
        assert!(big.nodes().len() < 1000 + 16, "{}", big.nodes().len());
        assert!(big.racks().iter().any(|r| r == "rack-b2-r2"));
        // The original racks keep their nodes and addresses.
        for n in base.nodes() {
            assert_eq!(big.node(&n.name).map(|b| b.ip), Some(n.ip), "{}", n.name);
        }
        let names: HashSet<&str> = big.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names.len(), big.nodes().len());
        let ips: HashSet<Ipv4Addr> = big.nodes().iter().map(|n| n.ip).collect();
        assert_eq!(ips.len(), big.nodes().len());
        let replica = big.node("gpu-rack-a1-r2-01").expect("replica node");
        assert_eq!(replica.labels()[RACK_LABEL], "rack-a1-r2");
        assert_eq!(replica.zone, "zone-a");
        // A scale below the spec's size changes nothing.
        assert_eq!(
            Fleet::default_fleet(Some(10)).expect("small").nodes().len(),
            base.nodes().len()
        );
    }

    /// The fleet of a spec that the test writes out.
    fn fleet_of(toml: &str) -> Fleet {
        Fleet::new(FleetSpec::from_toml(toml).expect("spec"), None).expect("fleet")
    }

    #[test]
    fn nvl72_trays_carry_the_clique_of_their_rack() {
        // 36 GB200 trays of 4 GPUs: two NVL72 domains in one rack.
        let fleet = fleet_of(
            r#"
[[site]]
name = "s"
zone = "z"
[[site.rack]]
name = "nvl"
[[site.rack.nodes]]
product = "NVIDIA-GB200"
count = 36
gpus_per_node = 4
cpu = "144"
memory = "960Gi"
"#,
        );
        let cliques: Vec<String> = fleet
            .nodes()
            .iter()
            .map(|n| n.labels()[CLIQUE_LABEL].clone())
            .collect();
        let (uuid, first) = cliques[0].rsplit_once('.').expect("<uuid>.<id>");
        assert_eq!(uuid.len(), 36, "{uuid}");
        assert_eq!(uuid.matches('-').count(), 4, "{uuid}");
        assert!(cliques[..18].iter().all(|c| c == &cliques[0]));
        assert!(cliques[18..].iter().all(|c| c == &cliques[18]));
        assert_ne!(cliques[0], cliques[18]);
        assert_eq!(
            cliques[18],
            format!("{uuid}.{}", first.parse::<u32>().expect("id") + 1)
        );
    }

    #[test]
    fn nvlink_domains_group_nodes_by_the_products_domain_size() {
        // H100 NVL: 2-GPU domains, so every 2-GPU node is one domain; 1-GPU nodes pair up.
        let fleet = fleet_of(
            r#"
[[site]]
name = "s"
zone = "z"
[[site.rack]]
name = "r"
[[site.rack.nodes]]
product = "NVIDIA-H100-NVL"
count = 4
gpus_per_node = 1
cpu = "32"
memory = "256Gi"
[[site.rack.nodes]]
product = "H100-SXM"
count = 2
gpus_per_node = 8
cpu = "32"
memory = "256Gi"
"#,
        );
        let domains: Vec<String> = fleet
            .nodes()
            .iter()
            .map(|n| n.nvlink_domain.clone().expect("domain"))
            .collect();
        assert_eq!(
            domains,
            ["r-nvl0", "r-nvl0", "r-nvl1", "r-nvl1", "r-nvl2", "r-nvl3"]
        );
        // The alias resolved to the catalog's canonical product name.
        assert_eq!(fleet.nodes()[4].model.product, "NVIDIA-H100-80GB-HBM3");
        assert_eq!(fleet.nodes()[4].name, "gpu-r-05");
    }

    #[test]
    fn unknown_products_list_the_known_ones() {
        let text = tiny("").replace("NVIDIA-H100-80GB-HBM3", "NVIDIA-GTX-1080");
        let err = Fleet::new(FleetSpec::from_toml(&text).expect("parse"), None)
            .expect_err("unknown product");
        let msg = err.to_string();
        assert!(msg.contains("NVIDIA-GTX-1080"), "{msg}");
        assert!(
            msg.contains("NVIDIA-L40S") && msg.contains("NVIDIA-B200"),
            "{msg}"
        );
    }

    #[test]
    fn typos_and_bad_values_are_rejected_with_a_reason() {
        let typo = tiny("").replace("gpus_per_node", "gpu_per_node");
        assert!(matches!(
            FleetSpec::from_toml(&typo),
            Err(FleetError::Parse(_))
        ));
        let cases = [
            (tiny("").replace("\"1Ti\"", "\"lots\""), "quantity"),
            (
                tiny("").replace("name = \"r1\"", "name = \"Rack_1\""),
                "DNS label",
            ),
            (tiny("").replace("count = 3", "count = 0"), "at least 1"),
            (tiny("taints = [\"dedicated\"]"), "key=value:Effect"),
            (tiny("taints = [\"a=b:Sometimes\"]"), "effect"),
        ];
        for (text, want) in cases {
            let err = FleetSpec::from_toml(&text)
                .and_then(|s| Fleet::new(s, None))
                .expect_err(want);
            assert!(
                err.to_string().contains(want),
                "{err} should mention {want}"
            );
        }
        let dup = format!(
            "{}\n[[site.rack]]\nname = \"r1\"\n[[site.rack.nodes]]\nproduct = \"NVIDIA-L40S\"\ncount = 1\ngpus_per_node = 1\ncpu = \"1\"\nmemory = \"1Gi\"\n",
            tiny("")
        );
        let err = Fleet::new(FleetSpec::from_toml(&dup).expect("parse"), None).expect_err("dup");
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn labels_and_taints_from_the_spec_reach_the_node() {
        let text = tiny(
            "taints = [\"dedicated=tenant-a:NoSchedule\", \"maintenance:NoExecute\"]\nlabels = { \"example.com/pool\" = \"a\" }",
        );
        let fleet = Fleet::new(FleetSpec::from_toml(&text).expect("parse"), None).expect("fleet");
        let node = fleet.nodes()[0].to_node();
        assert_eq!(
            node.metadata.labels.expect("labels")["example.com/pool"],
            "a"
        );
        let taints = node.spec.expect("spec").taints.expect("taints");
        assert_eq!(taints[0].key, "dedicated");
        assert_eq!(taints[0].value.as_deref(), Some("tenant-a"));
        assert_eq!(taints[1].value, None);
        assert_eq!(taints[1].effect, "NoExecute");
    }
}
