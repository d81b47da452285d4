//! The figures taken against the lab: virtual clusters, network segments, and no-op plans
//! of many lab resources with the host API requests they make.

use std::{
    collections::BTreeMap,
    thread,
    time::{Duration, Instant},
};

use crate::measure::{NOOP_PLAN, median, median_secs, timed_noop_plan, with_provider_usage};
use crate::peer::{peer_binary, peer_workdir};

/// The `terraform` block and empty provider block of every lab configuration.
const LAB_HEADER: &str = "terraform {\n  required_providers {\n    gpufleet = { source = \"gpufleet/gpufleet\" }\n  }\n}\nprovider \"gpufleet\" {}\n";

/// The provider's host API requests the lab's audit log recorded from byte `from` on, by
/// verb and resource (most first).
fn audited(log: &std::path::Path, from: u64) -> Vec<(String, u64)> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    // The API server writes an event as its response completes: let the last ones land.
    thread::sleep(Duration::from_millis(500));
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        // A rotated log starts over.
        let start = if len < from { 0 } else { from };
        if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_string(&mut text).is_err() {
            text.clear();
        }
    }
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for event in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let resource = event["objectRef"]["resource"].as_str().unwrap_or("-");
        let verb = event["verb"].as_str().unwrap_or("-");
        *counts.entry(format!("{verb} {resource}")).or_default() += 1;
    }
    let mut counts: Vec<(String, u64)> = counts.into_iter().collect();
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
}

fn audit_offset(log: &std::path::Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// No-op plans of `n` paused virtual clusters and of `n` node pools (Karpenter-backed, on
/// one paused virtual cluster) beside `n` `terraform_data`: the median wall time of
/// `rounds` plans, the host API requests of one, and the provider's peak memory.
pub(crate) fn refresh(n: usize, rounds: usize) {
    let lab = gpufleet_lab::Lab::shared();
    let log = lab.paths().audit_log();
    let floor = gpufleet_acceptance::Session::new(
        &format!(
            "resource \"terraform_data\" \"x\" {{\n  count = {n}\n  input = count.index\n}}\n"
        ),
        Vec::new(),
    );
    floor.ok(&["apply", "-auto-approve", "-input=false", "-no-color"]);
    let floor_plan = timed_noop_plan(&floor, rounds, &[]);
    floor.destroy();
    println!(
        "refresh: no-op plan of {n} x terraform_data (floor): median {floor_plan:.2} s over {rounds} rounds"
    );
    let peer_plan = peer_records_plan(n, rounds);
    if let Some(p) = peer_plan {
        println!(
            "refresh: no-op plan of {n} x peer_record (a Go framework provider's resource that reads nothing): median {p:.2} s ({:.2}x the floor)",
            p / floor_plan
        );
    }

    let tenants: String = (0..n)
        .map(|i| {
            format!(
                "resource \"gpufleet_virtual_cluster\" \"t{i}\" {{\n  name   = \"bench-r{i}\"\n  paused = true\n}}\n"
            )
        })
        .collect();
    let pools: String = (0..n)
        .map(|i| {
            format!(
                "resource \"gpufleet_gpu_node_pool\" \"p{i}\" {{\n  name               = \"bench-p{i}\"\n  virtual_cluster_id = gpufleet_virtual_cluster.home.id\n  gpu_product        = \"NVIDIA-H100-80GB-HBM3\"\n  source             = \"auto\"\n  autoscaling        = {{ min_nodes = 0, max_nodes = 2 }}\n}}\n"
            )
        })
        .collect();
    let home = "resource \"gpufleet_virtual_cluster\" \"home\" {\n  name      = \"bench-pools\"\n  isolation = \"private\"\n  paused    = true\n}\n";
    for (what, body) in [
        ("paused virtual clusters", tenants),
        ("node pools", format!("{home}{pools}")),
    ] {
        let s =
            gpufleet_acceptance::Session::new(&format!("{LAB_HEADER}{body}"), lab.settings_env());
        let _guard = s.destroy_on_panic();
        let started = Instant::now();
        s.ok(&[
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-parallelism=10",
        ]);
        let applied = started.elapsed().as_secs_f64();
        let from = audit_offset(&log);
        s.ok(&NOOP_PLAN);
        let requests = audited(&log, from);
        let (plan, usage) = with_provider_usage(|| timed_noop_plan(&s, rounds, &[]));
        let peak = usage.peak_mib;
        let cpu = usage.cpu_s / rounds as f64;
        // The same plan without refresh: what Terraform and the provider's plan cost alone
        // for these schemas, the floor that reading the host adds to.
        let unrefreshed = timed_noop_plan(&s, rounds, &["-refresh=false"]);
        let total: u64 = requests.iter().map(|(_, c)| c).sum();
        let top: Vec<String> = requests
            .iter()
            .take(6)
            .map(|(k, c)| format!("{k} {c}"))
            .collect();
        let beside_peer = peer_plan
            .map(|p| format!(", {:.2}x the Go peer's", plan / p))
            .unwrap_or_default();
        println!(
            "refresh: no-op plan of {n} {what}: median {plan:.2} s over {rounds} rounds ({:.2}x the floor{beside_peer}), provider peak RSS {peak:.1} MiB (apply took {applied:.1} s)",
            plan / floor_plan
        );
        println!("  provider CPU time per plan: {cpu:.2} s (user and system)");
        println!(
            "  without refresh (-refresh=false): median {unrefreshed:.2} s ({:.2}x the floor)",
            unrefreshed / floor_plan
        );
        println!(
            "  host API requests in one plan: {total} ({:.2} per resource; {})",
            total as f64 / n as f64,
            top.join(", ")
        );
        s.ok(&[
            "destroy",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-parallelism=10",
        ]);
    }
}

/// The median no-op plan of `n` resources of the Go peer, which any plugin provider's
/// resources pay before reading anything (`None` when Go cannot build the peer).
fn peer_records_plan(n: usize, rounds: usize) -> Option<f64> {
    let binary = peer_binary()?;
    let records: String = (0..n)
        .map(|i| format!("resource \"peer_record\" \"r{i}\" {{\n  name = \"r{i}\"\n}}\n"))
        .collect();
    let peer = peer_workdir(
        &format!(
            "terraform {{\n  required_providers {{\n    peer = {{ source = \"gpufleet/peer\" }}\n  }}\n}}\n{records}"
        ),
        &binary,
    );
    peer.run_ok_with_env(
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-parallelism=10",
        ],
        &[],
    );
    Some(median_secs(rounds, || {
        peer.run_ok_with_env(&NOOP_PLAN, &[]);
    }))
}

/// Applies, updates and destroys `n` segments at parallelism 10, beside as many
/// `terraform_data`, with the controller requests each took per segment (the emulator
/// counts what it receives).
pub(crate) fn segments(counts: &[usize]) {
    use gpufleet_acceptance::emulators::netris_admin;
    let lab = gpufleet_lab::Lab::shared();
    let timed = |s: &gpufleet_acceptance::Session, verb: &str| {
        let started = Instant::now();
        s.ok(&[
            verb,
            "-auto-approve",
            "-input=false",
            "-no-color",
            "-parallelism=10",
        ]);
        started.elapsed().as_secs_f64()
    };
    // Requests per segment since the last call, and the routes that took most.
    let per_segment = |n: usize| {
        let counts = netris_admin("GET", "/_admin/requests", None);
        netris_admin("DELETE", "/_admin/requests", None);
        let mut routes: Vec<(String, u64)> = counts
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect();
        routes.sort_by_key(|r| std::cmp::Reverse(r.1));
        let total: u64 = routes.iter().map(|(_, c)| c).sum();
        let top: Vec<String> = routes
            .iter()
            .take(4)
            .map(|(k, c)| format!("{k} {c}"))
            .collect();
        format!(
            "{:.2} requests per segment ({total} in all; {})",
            total as f64 / n as f64,
            top.join(", ")
        )
    };
    let config = |n: usize, mtu: u32| {
        let mut config = String::from(LAB_HEADER);
        for i in 0..n {
            config.push_str(&format!(
                "resource \"gpufleet_network_segment\" \"s{i}\" {{\n  name   = \"bench-seg-{i}\"\n  tenant = \"tenant-a\"\n  vpc    = \"Default\"\n  site   = \"site-a\"\n  cidr   = \"10.{}.{}.0/24\"\n  mtu    = {mtu}\n}}\n",
                200 + i / 256,
                i % 256
            ));
        }
        config
    };
    for &n in counts {
        let floor = gpufleet_acceptance::Session::new(
            &format!(
                "resource \"terraform_data\" \"x\" {{\n  count = {n}\n  input = count.index\n}}\n"
            ),
            Vec::new(),
        );
        let floor_apply = timed(&floor, "apply");
        let floor_plan = timed_noop_plan(&floor, 3, &[]);
        let s = gpufleet_acceptance::Session::new(&config(n, 9000), lab.settings_env());
        netris_admin("DELETE", "/_admin/requests", None);
        let (apply, usage) = with_provider_usage(|| timed(&s, "apply"));
        let peak = usage.peak_mib;
        let created = per_segment(n);
        let plan = timed_noop_plan(&s, 3, &[]);
        netris_admin("DELETE", "/_admin/requests", None);
        s.write(&config(n, 1500));
        let update = timed(&s, "apply");
        let updated = per_segment(n);
        let destroy = timed(&s, "destroy");
        let destroyed = per_segment(n);
        floor.destroy();
        println!(
            "segments: {n} at parallelism 10: apply {apply:.1} s (terraform_data floor {floor_apply:.1} s), update {update:.1} s, destroy {destroy:.1} s, provider peak RSS {peak:.1} MiB"
        );
        println!(
            "segments: no-op plan of {n}: {plan:.2} s (terraform_data floor {floor_plan:.2} s)"
        );
        println!("  create: {created}");
        println!("  update: {updated}");
        println!("  delete: {destroyed}");
    }
}

/// Applies `n` virtual clusters at once (Terraform's parallelism raised to `n`) and prints
/// the apply's wall time and, per tenant, start to Ready and the memory of its sandbox;
/// then destroys them.
pub(crate) fn vcluster(counts: &[usize]) {
    let lab = gpufleet_lab::Lab::shared();
    for &n in counts {
        let mut config = String::from(LAB_HEADER);
        for i in 0..n {
            config.push_str(&format!(
                "resource \"gpufleet_virtual_cluster\" \"t{i}\" {{\n  name = \"bench-{n}-{i}\"\n}}\n"
            ));
        }
        let s = gpufleet_acceptance::Session::new(&config, lab.settings_env());
        let started = Instant::now();
        let ((), usage) = with_provider_usage(|| {
            s.ok(&[
                "apply",
                "-auto-approve",
                "-input=false",
                "-no-color",
                &format!("-parallelism={}", n.max(10)),
            ]);
        });
        let took = started.elapsed().as_secs_f64();
        println!(
            "vcluster: {n} at once: apply until Ready {took:.1} s, provider peak RSS {:.1} MiB",
            usage.peak_mib
        );
        let pods: Vec<serde_json::Value> = kubelet_status(lab.ports().vcluster)
            .into_iter()
            .filter(|p| {
                p["pod"]
                    .as_str()
                    .is_some_and(|k| k.starts_with(&format!("vc-bench-{n}-")))
            })
            .collect();
        let ready: Vec<f64> = pods
            .iter()
            .filter_map(|p| p["ready_after_ms"].as_f64())
            .map(|ms| ms / 1000.0)
            .collect();
        let mut rss: Vec<f64> = pods
            .iter()
            .filter_map(|p| p["rss_kib"].as_f64())
            .map(|k| k / 1024.0)
            .collect();
        println!(
            "vcluster: {n} at once: syncer start to Ready median {:.1} s, max {:.1} s",
            median(&mut ready.clone()),
            ready.iter().copied().fold(0.0, f64::max)
        );
        println!(
            "vcluster: {n} at once: RSS per tenant median {:.0} MiB (syncer, kine, kube-apiserver, kube-controller-manager)",
            median(&mut rss)
        );
        s.destroy();
    }
}

/// `/status` of the lab's vCluster kubelet.
fn kubelet_status(port: u16) -> Vec<serde_json::Value> {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return Vec::new();
    };
    let _ = write!(stream, "GET /status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text.split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or_default()
}
