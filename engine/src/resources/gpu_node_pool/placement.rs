//! Which free nodes a pool claims: pure, deterministic, and aware of the topology domains
//! (racks, NVLink domains) named by a node label.
//!
//! * `pack` fills as few domains as possible. Domains where the pool already holds nodes come
//!   first (a scale-up stays local); then, while some domain can take all that is still
//!   needed, the smallest such domain (best fit, so big domains stay whole for big pools);
//!   otherwise the largest domain entirely.
//! * `spread` takes one node at a time from the domain where the pool holds the fewest nodes
//!   (ties: the domain with the most free nodes, then the name).
//!
//! Nodes without the label form one domain of their own (the empty name). Within a domain,
//! nodes that run fewer pods a claim would move come first (a claim evicts as little as it
//! can: another tenant's control plane on a free node stays up), then by name.

use std::collections::BTreeMap;

use super::choices::Policy;
use crate::backends::kube::{
    ACCELERATOR_LABEL, BLOCK_LABEL, CLIQUE_LABEL, ZONE_LABEL, host::nodes::HostNode,
};

/// The node labels that name a topology domain on production GPU clusters, tried in this
/// order when `placement.topology_key` is not set; the first one every candidate node
/// carries is used.
pub const AUTO_TOPOLOGY_KEYS: &[&str] = &[
    // GPU feature discovery: the NVLink domain of multi-node NVLink systems (GB200 NVL72),
    // `<cluster UUID>.<clique id>`.
    CLIQUE_LABEL,
    // NVIDIA topograph: the NVLink domain, then the switch block (a rack or a few).
    ACCELERATOR_LABEL,
    BLOCK_LABEL,
    // Kubernetes' well-known zone.
    ZONE_LABEL,
];

/// The label that names the candidate `nodes`' topology domains: `explicit` when every node
/// carries it, else the first of [`AUTO_TOPOLOGY_KEYS`] that every node carries. `None` when
/// no node carries any of them (there is nothing to place by). A key some nodes lack is an
/// error that names them, rather than a silent single domain.
pub fn topology_key(nodes: &[&HostNode], explicit: Option<&str>) -> Result<Option<String>, String> {
    let lacking = |key: &str| -> Vec<&str> {
        nodes
            .iter()
            .filter(|n| n.label(key).is_none())
            .map(|n| n.name.as_str())
            .collect()
    };
    let describe = |key: &str, missing: &[&str]| {
        let shown: Vec<&str> = missing.iter().take(5).copied().collect();
        let more = missing.len().saturating_sub(shown.len());
        format!(
            "{key} is missing on {} of {} candidate nodes ({}{})",
            missing.len(),
            nodes.len(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    };
    if let Some(key) = explicit {
        let missing = lacking(key);
        return if missing.is_empty() {
            Ok(Some(key.to_owned()))
        } else {
            Err(format!(
                "{}: label those nodes, or set placement.topology_key to a label they all carry",
                describe(key, &missing)
            ))
        };
    }
    let missing: Vec<(&str, Vec<&str>)> = AUTO_TOPOLOGY_KEYS
        .iter()
        .map(|k| (*k, lacking(k)))
        .collect();
    if let Some((key, _)) = missing.iter().find(|(_, m)| m.is_empty()) {
        return Ok(Some((*key).to_owned()));
    }
    match missing.iter().find(|(_, m)| m.len() < nodes.len()) {
        Some((key, m)) => Err(format!(
            "no topology label is on every candidate node; {}: label them, or set \
             placement.topology_key",
            describe(key, m)
        )),
        None => Ok(None),
    }
}

/// The domain of `node` under `key`.
pub fn domain_of<'a>(node: &'a HostNode, key: &str) -> &'a str {
    node.label(key).unwrap_or("")
}

/// Up to `need` of the `free` nodes, in the order they should be claimed.
pub fn choose(
    free: &[&HostNode],
    held: &[&HostNode],
    need: usize,
    key: &str,
    policy: Policy,
) -> Vec<String> {
    let mut ordered: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    for n in free {
        ordered
            .entry(domain_of(n, key))
            .or_default()
            .push((n.movable_pods, &n.name));
    }
    let mut domains: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (d, mut nodes) in ordered {
        nodes.sort_unstable();
        // Claimed from the back: keep the idlest, then the lowest names, first.
        domains.insert(d, nodes.into_iter().rev().map(|(_, n)| n).collect());
    }
    let mut held_in: BTreeMap<&str, usize> = BTreeMap::new();
    for n in held {
        *held_in.entry(domain_of(n, key)).or_default() += 1;
    }
    let mut chosen: Vec<String> = Vec::new();
    let take =
        |d: &str, k: usize, domains: &mut BTreeMap<&str, Vec<&str>>, out: &mut Vec<String>| {
            if let Some(names) = domains.get_mut(d) {
                for _ in 0..k {
                    match names.pop() {
                        Some(n) => out.push(n.to_owned()),
                        None => break,
                    }
                }
            }
        };
    match policy {
        Policy::Pack => {
            let mut local: Vec<(&str, usize)> = held_in
                .iter()
                .filter(|(d, _)| domains.contains_key(**d))
                .map(|(d, n)| (*d, *n))
                .collect();
            local.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (d, _) in local {
                let left = need - chosen.len();
                take(d, left, &mut domains, &mut chosen);
            }
            while chosen.len() < need {
                let left = need - chosen.len();
                let sizes: Vec<(&str, usize)> = domains
                    .iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(d, v)| (*d, v.len()))
                    .collect();
                let fit = sizes
                    .iter()
                    .filter(|(_, n)| *n >= left)
                    .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
                let largest = sizes.iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)));
                match fit.or(largest) {
                    Some((d, _)) => {
                        let d = *d;
                        take(d, left, &mut domains, &mut chosen);
                    }
                    None => break,
                }
            }
        }
        Policy::Spread => {
            while chosen.len() < need {
                let next = domains
                    .iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(d, v)| (*d, held_in.get(d).copied().unwrap_or(0), v.len()))
                    .min_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)).then(a.0.cmp(b.0)));
                let Some((d, _, _)) = next else { break };
                take(d, 1, &mut domains, &mut chosen);
                *held_in.entry(d).or_default() += 1;
            }
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, rack: &str) -> HostNode {
        HostNode {
            name: name.to_owned(),
            labels: [("rack".to_owned(), rack.to_owned())].into(),
            ..HostNode::default()
        }
    }

    fn racks(nodes: &[HostNode], chosen: &[String]) -> Vec<String> {
        chosen
            .iter()
            .map(|c| {
                nodes
                    .iter()
                    .find(|n| &n.name == c)
                    .map(|n| domain_of(n, "rack").to_owned())
                    .unwrap_or_default()
            })
            .collect()
    }

    fn fleet() -> Vec<HostNode> {
        // r1: 4 free, r2: 2 free, r3: 3 free
        let mut v = Vec::new();
        for i in 0..4 {
            v.push(node(&format!("a{i}"), "r1"));
        }
        for i in 0..2 {
            v.push(node(&format!("b{i}"), "r2"));
        }
        for i in 0..3 {
            v.push(node(&format!("c{i}"), "r3"));
        }
        v
    }

    #[test]
    fn pack_best_fits_into_one_domain() {
        let f = fleet();
        let free: Vec<&HostNode> = f.iter().collect();
        let got = choose(&free, &[], 3, "rack", Policy::Pack);
        assert_eq!(racks(&f, &got), ["r3", "r3", "r3"]);
        let got = choose(&free, &[], 2, "rack", Policy::Pack);
        assert_eq!(racks(&f, &got), ["r2", "r2"]);
    }

    #[test]
    fn pack_uses_the_fewest_domains_when_none_fits() {
        let f = fleet();
        let free: Vec<&HostNode> = f.iter().collect();
        let got = choose(&free, &[], 6, "rack", Policy::Pack);
        let mut r = racks(&f, &got);
        r.dedup();
        assert_eq!(r, ["r1", "r2"], "4 from r1 then best fit 2 from r2");
    }

    #[test]
    fn pack_grows_where_the_pool_already_is() {
        let f = fleet();
        let held = node("c9", "r3");
        let free: Vec<&HostNode> = f.iter().collect();
        let got = choose(&free, &[&held], 2, "rack", Policy::Pack);
        assert_eq!(racks(&f, &got), ["r3", "r3"]);
    }

    #[test]
    fn spread_uses_the_most_domains() {
        let f = fleet();
        let free: Vec<&HostNode> = f.iter().collect();
        let got = choose(&free, &[], 3, "rack", Policy::Spread);
        let mut r = racks(&f, &got);
        r.sort();
        assert_eq!(r, ["r1", "r2", "r3"]);
        let got = choose(&free, &[], 9, "rack", Policy::Spread);
        assert_eq!(got.len(), 9);
    }

    #[test]
    fn within_a_domain_nodes_without_pods_to_move_go_first() {
        let mut f = fleet();
        // a0 and a1 run another tenant's control plane; r2's b0 too.
        for n in f
            .iter_mut()
            .filter(|n| ["a0", "a1", "b0"].contains(&n.name.as_str()))
        {
            n.movable_pods = 1;
        }
        let free: Vec<&HostNode> = f.iter().collect();
        // The domain is chosen as before (best fit r2), then its idle node.
        assert_eq!(choose(&free, &[], 1, "rack", Policy::Pack), ["b1"]);
        assert_eq!(
            choose(&free, &[], 4, "rack", Policy::Pack),
            ["a2", "a3", "a0", "a1"],
            "a busy node is taken only when the domain needs it"
        );
    }

    #[test]
    fn the_topology_key_is_the_first_real_label_every_candidate_carries() {
        let labelled = HostNode::labelled;
        let block = "network.topology.nvidia.com/block";
        let zone = "topology.kubernetes.io/zone";
        let clique = "nvidia.com/gpu.clique";
        let hgx = [
            labelled("a", &[(block, "s1"), (zone, "z")]),
            labelled("b", &[(block, "s2"), (zone, "z")]),
        ];
        let nodes: Vec<&HostNode> = hgx.iter().collect();
        assert_eq!(topology_key(&nodes, None), Ok(Some(block.to_owned())));
        let nvl72 = [
            labelled("t1", &[(clique, "7b96.1"), (block, "s1"), (zone, "z")]),
            labelled("t2", &[(clique, "7b96.2"), (block, "s1"), (zone, "z")]),
        ];
        let nodes: Vec<&HostNode> = nvl72.iter().collect();
        assert_eq!(topology_key(&nodes, None), Ok(Some(clique.to_owned())));
        // An explicit key must be on every candidate.
        let Err(why) = topology_key(&nodes, Some("example.com/rack")) else {
            panic!("a key no node carries is an error");
        };
        assert!(
            why.starts_with("example.com/rack is missing on 2 of 2 candidate nodes (t1, t2)"),
            "{why}"
        );
        // Labels on some nodes only are an error, not one silent domain.
        let mixed = [labelled("x", &[(zone, "z")]), labelled("y", &[])];
        let nodes: Vec<&HostNode> = mixed.iter().collect();
        let Err(why) = topology_key(&nodes, None) else {
            panic!("a label some candidates lack is an error");
        };
        assert!(
            why.contains("topology.kubernetes.io/zone is missing on 1 of 2 candidate nodes (y)"),
            "{why}"
        );
        // No topology labels at all: nothing to place by.
        let bare = [labelled("x", &[]), labelled("y", &[])];
        let nodes: Vec<&HostNode> = bare.iter().collect();
        assert_eq!(topology_key(&nodes, None), Ok(None));
    }

    #[test]
    fn asks_beyond_the_free_nodes_get_what_there_is() {
        let f = fleet();
        let free: Vec<&HostNode> = f.iter().collect();
        assert_eq!(choose(&free, &[], 20, "rack", Policy::Pack).len(), 9);
        assert!(choose(&[], &[], 1, "rack", Policy::Spread).is_empty());
    }
}
