//! Which tenant a host-cluster object belongs to, as more than one kind names it: the
//! virtual cluster of an id, and the value of `gpufleet.dev/pool` that marks a pool's nodes.
//! Node pools write these and benchmarks read them, so they live outside both kinds.

/// A virtual cluster, from its id (`<host namespace>/<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualClusterRef {
    /// Host namespace.
    pub namespace: String,
    /// Virtual cluster name.
    pub name: String,
}

impl VirtualClusterRef {
    /// Parses `<namespace>/<name>`.
    pub fn parse(id: &str) -> Option<VirtualClusterRef> {
        let (ns, name) = id.split_once('/')?;
        let ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        (ok(ns) && ok(name)).then(|| VirtualClusterRef {
            namespace: ns.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// `gpufleet.dev/pool` for a pool of a virtual cluster.
pub fn pool_label(vc: &str, pool: &str) -> String {
    let full = format!("{vc}.{pool}");
    if full.len() <= 63 {
        return full;
    }
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let head: String = full.chars().take(54).collect();
    format!("{}-{:08x}", head.trim_end_matches(['-', '.']), hash as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_labels_fit_in_a_label_value() {
        assert_eq!(pool_label("team-a", "train"), "team-a.train");
        let long = pool_label(&"a".repeat(52), &"b".repeat(40));
        assert!(long.len() <= 63, "{long}");
        assert_eq!(long, pool_label(&"a".repeat(52), &"b".repeat(40)));
        assert_ne!(long, pool_label(&"a".repeat(52), &"c".repeat(40)));
    }

    #[test]
    fn virtual_cluster_ids_parse() {
        assert_eq!(
            VirtualClusterRef::parse("vc-a/a"),
            Some(VirtualClusterRef {
                namespace: "vc-a".into(),
                name: "a".into()
            })
        );
        assert_eq!(VirtualClusterRef::parse("a"), None);
        assert_eq!(VirtualClusterRef::parse("a/b/c"), None);
    }
}
