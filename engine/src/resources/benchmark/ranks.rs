//! The MPI world an `nccl-all-reduce` log shows: how many ranks, on which hosts, and which
//! node each host was. Pure.
//!
//! nccl-tests print one `#  Rank N … on <host>` line per rank. A run of `nodes` ×
//! `gpus_per_node` must show that many ranks on `nodes` hosts; fewer means the ranks did not
//! join one world (each pod ran alone), and the numbers are one node's.

use std::collections::BTreeMap;

use crate::benchmark::nccl::NcclDetails;

use super::{launch::Launcher, model::BenchmarkSpec, render};

/// `0-7`, `0-3,8-11`: sorted ranks as ranges.
pub fn ranges(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// Host as printed → its ranks, in the order the hosts first appear.
pub fn by_host(details: &NcclDetails) -> Vec<(String, Vec<u32>)> {
    let mut hosts: Vec<(String, Vec<u32>)> = Vec::new();
    for r in &details.ranks {
        match hosts.iter_mut().find(|(h, _)| *h == r.host) {
            Some((_, ranks)) => ranks.push(r.rank),
            None => hosts.push((r.host.clone(), vec![r.rank])),
        }
    }
    hosts
}

/// The node a rank's host was: the host is a worker pod's hostname (`gfb-x-worker-1` under
/// the MPI Operator, `gfb-x-1` under gpufleet's launcher), and `gang` lists the workers'
/// nodes in index order. `None` for a host that is no worker of this run.
pub fn node_of<'a>(
    host: &str,
    benchmark: &str,
    launcher: Launcher,
    gang: &'a [String],
) -> Option<&'a str> {
    let short = host.split('.').next().unwrap_or(host);
    let job = render::job_name(benchmark);
    let prefix = match launcher {
        Launcher::MpiOperator => format!("{job}-worker-"),
        Launcher::Gpufleet => format!("{job}-"),
        Launcher::Pods => return None,
    };
    let index: usize = short.strip_prefix(&prefix)?.parse().ok()?;
    gang.get(index).map(String::as_str)
}

/// Why the log's world is not the run's, when it is not.
pub fn world_problem(spec: &BenchmarkSpec, details: &NcclDetails) -> Option<String> {
    let expected = super::commands::ranks(spec) as usize;
    let hosts = by_host(details).len();
    if details.ranks.len() != expected {
        return Some(format!(
            "the log shows {} rank(s) on {hosts} host(s); a run of {} node(s) × {} GPU(s) is one \
             MPI world of {expected} ranks",
            details.ranks.len(),
            spec.nodes,
            spec.gpus_per_node
        ));
    }
    (hosts != spec.nodes as usize).then(|| {
        format!(
            "the log shows its {expected} ranks on {hosts} host(s), not on the run's {} nodes",
            spec.nodes
        )
    })
}

/// The ranks of each node of the gang, for the hosts that map to one.
pub fn per_node(
    details: &NcclDetails,
    benchmark: &str,
    launcher: Launcher,
    gang: &[String],
) -> BTreeMap<String, String> {
    by_host(details)
        .into_iter()
        .filter_map(|(host, ranks)| {
            Some((
                node_of(&host, benchmark, launcher, gang)?.to_owned(),
                ranges(&ranks),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_read_as_ranges() {
        assert_eq!(ranges(&[3, 0, 1, 2, 8, 9, 11]), "0-3,8-9,11");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn a_worker_host_is_its_gang_node() {
        let gang = vec!["gpu-a".to_owned(), "gpu-b".to_owned()];
        let node = |h| node_of(h, "x", Launcher::MpiOperator, &gang);
        assert_eq!(node("gfb-x-worker-1"), Some("gpu-b"));
        assert_eq!(node("gfb-x-worker-0.gfb-x.vc-a.svc"), Some("gpu-a"));
        assert_eq!(node("gfb-x-worker-2"), None);
        assert_eq!(node("bm-h100-01"), None);
        assert_eq!(
            node_of("gfb-x-1", "x", Launcher::Gpufleet, &gang),
            Some("gpu-b")
        );
    }
}
