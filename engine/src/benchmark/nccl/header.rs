//! What nccl-tests and NCCL print before the results: the versions and the rank → GPU map.
//!
//! ```text
//! # nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902
//! #  Rank  0 Group  0 Pid  29262 on bm-h100-01 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
//! #   Rank  0 Pid   1320 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB
//! NCCL version 2.26.2+cuda12.8
//! ```
//!
//! The rank lines come in two forms: with `Group` (nccl-tests 2.10 and later) and without,
//! and with an old one-byte bus id (`[0x18]`) or a full `[domain:bus:device]` one
//! (`[0000:18:00]`). `mpirun --tag-output` puts a `[1,0]<stdout>:` tag before each line; the
//! text before the first `#` is skipped. The NCCL library announces its version when
//! `NCCL_DEBUG` is `VERSION` or `INFO` (then after a `host:pid:tid [dev] NCCL INFO` prefix).

use std::collections::BTreeMap;

use serde::Serialize;

/// One rank of the run, as nccl-tests lists it under `# Using devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankInfo {
    /// The MPI rank (or thread × GPU index within one process).
    pub rank: u32,
    /// The host the rank ran on, as the process saw its hostname.
    pub host: String,
    /// The CUDA device index on that host.
    pub device: u32,
    /// The PCI bus id as printed, without brackets: `0x18` or `0000:18:00`.
    pub bus_id: String,
    /// The GPU's name (`NVIDIA H100 80GB HBM3`).
    pub gpu: String,
}

/// Versions and ranks read from the log.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Header {
    pub(super) ranks: Vec<RankInfo>,
    pub(super) versions: BTreeMap<String, String>,
}

/// Reads every rank line and version statement of the log.
pub(super) fn read(output: &str) -> Header {
    let mut header = Header::default();
    let mut library_code = None;
    let mut runtime_version = None;
    for line in output.lines() {
        if let Some(rank) = rank_line(line)
            && !header.ranks.contains(&rank)
        {
            header.ranks.push(rank);
        } else if let Some((tests, library)) = tests_version_line(line) {
            header
                .versions
                .entry("nccl_tests_version".to_owned())
                .or_insert(tests);
            library_code = library_code.or(library);
        } else if runtime_version.is_none() {
            runtime_version = nccl_version_line(line);
        }
    }
    let nccl = runtime_version.or_else(|| library_code.and_then(decode_version_code));
    if let Some(v) = nccl {
        header.versions.insert("nccl_version".to_owned(), v);
    }
    header
}

/// `#  Rank  3 Group  0 Pid  29265 on bm-h100-01 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3`.
fn rank_line(line: &str) -> Option<RankInfo> {
    let (_, rest) = line.split_once('#')?;
    let mut words = rest.split_whitespace().peekable();
    (words.next()? == "Rank").then_some(())?;
    let rank = words.next()?.parse().ok()?;
    if words.peek() == Some(&"Group") {
        words.next();
        words.next()?;
    }
    (words.next()? == "Pid").then_some(())?;
    words.next()?;
    (words.next()? == "on").then_some(())?;
    let host = words.next()?.to_owned();
    (words.next()? == "device").then_some(())?;
    let device = words.next()?.parse().ok()?;
    let bus_id = words
        .next()?
        .strip_prefix('[')?
        .strip_suffix(']')?
        .to_owned();
    let gpu = words.collect::<Vec<_>>().join(" ");
    Some(RankInfo {
        rank,
        host,
        device,
        bus_id,
        gpu,
    })
}

/// `# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902` → the tests' version
/// and the library's version code.
fn tests_version_line(line: &str) -> Option<(String, Option<u32>)> {
    let (_, rest) = line.split_once('#')?;
    let rest = rest.trim_start().strip_prefix("nccl-tests version ")?;
    let mut words = rest.split_whitespace();
    let version = words.next().filter(|v| is_version(v))?.to_owned();
    let library = words
        .find_map(|w| w.strip_prefix("nccl-library="))
        .and_then(|code| code.parse().ok());
    Some((version, library))
}

/// `NCCL version 2.26.2+cuda12.8`, alone or after NCCL's `NCCL INFO` prefix → `2.26.2`.
fn nccl_version_line(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("NCCL version ")?;
    let word = rest.split_whitespace().next()?;
    let version = word.split('+').next()?;
    is_version(version).then(|| version.to_owned())
}

fn is_version(text: &str) -> bool {
    let parts: Vec<&str> = text.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// NCCL's `NCCL_VERSION_CODE`: `major*10000 + minor*100 + patch` since 2.9 (`22705` →
/// `2.27.5`), `major*1000 + minor*100 + patch` before (`2708` → `2.7.8`).
fn decode_version_code(code: u32) -> Option<String> {
    match code {
        0 => None,
        c if c >= 10_000 => Some(format!("{}.{}.{}", c / 10_000, c % 10_000 / 100, c % 100)),
        c => Some(format!("{}.{}.{}", c / 1000, c % 1000 / 100, c % 100)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_rank_line_forms_and_tagged_lines_are_read() {
        let new = rank_line(
            "#  Rank 13 Group  0 Pid  26638 on bm-h100-02 device  5 [0000:bb:00] NVIDIA H100 80GB HBM3",
        )
        .expect("rank");
        assert_eq!(
            new,
            RankInfo {
                rank: 13,
                host: "bm-h100-02".into(),
                device: 5,
                bus_id: "0000:bb:00".into(),
                gpu: "NVIDIA H100 80GB HBM3".into(),
            }
        );
        let old = rank_line(
            "#   Rank  0 Pid   1320 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB",
        )
        .expect("old rank");
        assert_eq!(old.bus_id, "0x00");
        assert_eq!(old.host, "ip-172-31-20-228");
        let tagged = rank_line(
            "[1,0]<stdout>:#  Rank  1 Group  0 Pid 9 on worker-1 device  1 [0x91] NVIDIA H100 80GB HBM3",
        )
        .expect("tagged rank");
        assert_eq!((tagged.rank, tagged.host.as_str()), (1, "worker-1"));
        assert_eq!(rank_line("#  Rank  x Group"), None);
        assert_eq!(rank_line("# Using devices"), None);
    }

    #[test]
    fn versions_come_from_the_library_line_before_the_version_code() {
        let log = "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902\n";
        let h = read(log);
        assert_eq!(h.versions["nccl_tests_version"], "2.17.8");
        assert_eq!(h.versions["nccl_version"], "2.29.2");

        let log = "# nccl-tests version 2.17.6 nccl-headers=22707 nccl-library=22705\n\
                   node-1:41230:41230 [0] NCCL INFO NCCL version 2.27.5+cuda12.9\n";
        assert_eq!(read(log).versions["nccl_version"], "2.27.5");
        assert_eq!(decode_version_code(2708).as_deref(), Some("2.7.8"));
        assert_eq!(decode_version_code(0), None);
        assert!(read("NCCL version garbage\n").versions.is_empty());
    }
}
