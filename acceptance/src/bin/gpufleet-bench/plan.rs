//! A plan of many data sources beside `terraform_data` and the Go peer, and the provider's
//! latency per RPC.

use std::{collections::BTreeMap, time::Instant};

use gpufleet_acceptance::Workdir;

use crate::measure::{median, with_provider_usage};
use crate::peer::{peer_binary, peer_workdir};

fn timed_plan(wd: &Workdir, env: &[(&str, &str)]) -> (f64, String) {
    let started = Instant::now();
    let out = wd.run_ok_with_env(&["plan", "-input=false", "-no-color", "-refresh=true"], env);
    (started.elapsed().as_secs_f64(), out.combined())
}

pub(crate) fn plan(n: usize, rounds: usize) {
    let gpufleet = Workdir::new(&format!(
        r#"
terraform {{
  required_providers {{
    gpufleet = {{ source = "gpufleet/gpufleet" }}
  }}
}}
data "gpufleet_gpu_catalog" "gpu" {{
  count   = {n}
  product = "NVIDIA-H100-80GB-HBM3"
}}
"#
    ));
    let floor = Workdir::without_provider(&format!(
        "resource \"terraform_data\" \"x\" {{\n  count = {n}\n  input = count.index\n}}\n"
    ));
    gpufleet.init();
    floor.init();
    // Warm caches (page cache, Terraform's schema cache) before measuring.
    timed_plan(&gpufleet, &[]);
    timed_plan(&floor, &[]);

    let ((mut ours, mut theirs), usage) = with_provider_usage(|| {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            ours.push(timed_plan(&gpufleet, &[]).0);
            theirs.push(timed_plan(&floor, &[]).0);
        }
        (ours, theirs)
    });

    let (ours, theirs) = (median(&mut ours), median(&mut theirs));
    println!("plan: {n} x gpufleet_gpu_catalog: median {ours:.2} s over {rounds} rounds");
    println!("plan: {n} x terraform_data (floor): median {theirs:.2} s over {rounds} rounds");
    println!("plan: ratio {:.2}x (target <= 1.5x)", ours / theirs);
    println!(
        "plan: provider peak RSS {:.1} MiB, CPU time {:.2} s per plan",
        usage.peak_mib,
        usage.cpu_s / rounds as f64
    );
    if let Some(binary) = peer_binary() {
        let peer = peer_workdir(
            &format!(
                "terraform {{\n  required_providers {{\n    peer = {{ source = \"gpufleet/peer\" }}\n  }}\n}}\ndata \"peer_gpu_catalog\" \"gpu\" {{\n  count   = {n}\n  product = \"NVIDIA-H100-80GB-HBM3\"\n}}\n"
            ),
            &binary,
        );
        timed_plan(&peer, &[]);
        let (mut times, usage) = with_provider_usage(|| {
            (0..rounds)
                .map(|_| timed_plan(&peer, &[]).0)
                .collect::<Vec<f64>>()
        });
        println!(
            "plan: {n} x peer_gpu_catalog (the Go framework peer): median {:.2} s over {rounds} rounds, peak RSS {:.1} MiB, CPU time {:.2} s per plan",
            median(&mut times),
            usage.peak_mib,
            usage.cpu_s / rounds as f64
        );
    }
    rpc_latency(&gpufleet);
}

/// Per-RPC latency as the provider measured it, from its debug log during one plan.
fn rpc_latency(wd: &Workdir) {
    let (_, log) = timed_plan(wd, &[("TF_LOG_PROVIDER", "debug")]);
    let mut per_rpc: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("rpc served")) {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .map(|v| v.trim_matches('"').to_owned())
        };
        if let (Some(rpc), Some(Ok(us))) = (field("rpc"), field("elapsed_us").map(|u| u.parse())) {
            per_rpc.entry(rpc).or_default().push(us);
        }
    }
    for (rpc, mut us) in per_rpc {
        let count = us.len();
        println!(
            "rpc: {rpc:<32} calls {count:>5}  median {:>8.1} us",
            median(&mut us)
        );
    }
}
