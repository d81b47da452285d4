//! Benchmarks that print figures (tests never assert on time):
//!
//! - `handshake`: provider start to handshake line with Terraform's client certificate,
//!   median of 50 launches, beside the same for a Go provider on terraform-plugin-framework
//!   (`bench/peer`, built with `go build`);
//! - `plan`: `terraform plan` of 1,000 `gpufleet_gpu_catalog` instances beside Terraform's
//!   own 1,000 `terraform_data` resources and the peer's 1,000 data sources in the same
//!   run, their ratio, the providers' peak memory, and the provider-side latency of each
//!   RPC.
//!
//! - `vcluster`: `terraform apply` of one virtual cluster until it is ready (vCluster's own
//!   syncer, in the lab), then of ten at once, with each tenant's start-up time and memory
//!   as the lab's vCluster kubelet measured them.
//!
//! - `segments`: `terraform apply -parallelism=10` of 50 and 200 network segments against the
//!   lab's Netris emulator (which takes 500 ms to provision a V-Net), beside as many
//!   `terraform_data` resources, then an in-place update of each and their destroy, with the
//!   controller requests per segment of each (as the emulator counted them, plan included),
//!   and a no-op plan of them beside one of the `terraform_data`.
//!
//! - `refresh`: no-op `terraform plan` of 200 paused virtual clusters, and of 200 node
//!   pools, beside 200 `terraform_data` and 200 resources of the Go peer that read nothing,
//!   with the host API requests each plan made (the lab API server's audit log of the
//!   provider's account) by verb and resource.
//!
//! Every section that runs the provider prints its peak memory (VmHWM); the plans print its
//! CPU time too, so that a plan's wall time splits into the provider's part and the rest.
//!
//! Run with `scripts/bench [handshake|plan|vcluster|segments|refresh|all]`, which measures
//! the release build.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use gpufleet_acceptance::{Workdir, provider_binary};

const COOKIE: (&str, &str) = (
    "TF_PLUGIN_MAGIC_COOKIE",
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
);

fn main() {
    if std::env::var_os(gpufleet_acceptance::RELEASE_ENV).is_none() {
        eprintln!(
            "note: measuring a debug build of the provider; scripts/bench measures the release build"
        );
    }
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".to_owned());
    if what == "handshake" || what == "all" {
        handshake(50);
    }
    if what == "plan" || what == "all" {
        plan(1000, 5);
    }
    if what == "vcluster" || what == "all" {
        vcluster(&[1, 10]);
    }
    if what == "segments" || what == "all" {
        segments(&[50, 200]);
    }
    if what == "refresh" || what == "all" {
        // A second argument sets the count (`refresh 20` for a quick look).
        let n = std::env::args()
            .nth(2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(200);
        refresh(n, 3);
    }
}

/// A Go provider on terraform-plugin-framework (`bench/peer`), built with `go build` into
/// `target/peer`: the peer every start-up and plan figure stands beside. `None`, with the
/// reason printed, when Go cannot build it here.
fn peer_binary() -> Option<std::path::PathBuf> {
    static PEER: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    PEER.get_or_init(|| {
        let root = gpufleet_acceptance::workspace_root();
        let dir = root.join("target").join("peer");
        let binary = dir.join("terraform-provider-peer");
        let out = Command::new("go")
            .current_dir(root.join("bench").join("peer"))
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .output();
        match out {
            Ok(o) if o.status.success() => Some(binary),
            Ok(o) => {
                println!(
                    "peer: not built: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!("peer: not built: cannot run go: {e}");
                None
            }
        }
    })
    .clone()
}

/// A work directory for the peer provider on `main_tf`.
fn peer_workdir(main_tf: &str, binary: &std::path::Path) -> Workdir {
    let wd = Workdir::without_provider(main_tf);
    let dir = binary.parent().expect("the peer binary has a directory");
    let config = format!(
        "provider_installation {{\n  dev_overrides {{\n    \"gpufleet/peer\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
        dir.display()
    );
    std::fs::write(wd.cli_config_path(), config).expect("write the peer's CLI configuration");
    wd
}

/// The `terraform` block and empty provider block of every lab configuration.
const LAB_HEADER: &str = "terraform {\n  required_providers {\n    gpufleet = { source = \"gpufleet/gpufleet\" }\n  }\n}\nprovider \"gpufleet\" {}\n";

/// The median wall time of `rounds` no-op plans with `extra` arguments (`-detailed-exitcode`
/// fails a plan with changes).
fn timed_noop_plan(s: &gpufleet_acceptance::Session, rounds: usize, extra: &[&str]) -> f64 {
    let args = [&NOOP_PLAN[..], extra].concat();
    median_secs(rounds, || {
        s.ok(&args);
    })
}

/// A no-op plan as the refresh figures run it (`-detailed-exitcode` fails one with changes).
const NOOP_PLAN: [&str; 5] = [
    "plan",
    "-detailed-exitcode",
    "-input=false",
    "-no-color",
    "-parallelism=10",
];

/// The median wall time of `rounds` runs of `run`, in seconds.
fn median_secs(rounds: usize, mut run: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed().as_secs_f64()
        })
        .collect();
    median(&mut times)
}

/// What the provider processes started while `f` ran used: the highest peak memory of one,
/// and the CPU time of all of them.
#[derive(Debug, Clone, Copy)]
struct Usage {
    peak_mib: f64,
    cpu_s: f64,
}

fn with_provider_usage<T>(f: impl FnOnce() -> T) -> (T, Usage) {
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let watcher = watch_providers(Arc::clone(&stop), Arc::clone(&peak));
    let out = f();
    stop.store(true, Ordering::Relaxed);
    let ticks: u64 = watcher.join().map(|t| t.values().sum()).unwrap_or(0);
    let usage = Usage {
        peak_mib: peak.load(Ordering::Relaxed) as f64 / 1024.0,
        cpu_s: ticks as f64 / USER_HZ,
    };
    (out, usage)
}

/// The unit of `/proc/<pid>/stat`'s CPU times (`USER_HZ`, 100 on Linux's 64-bit targets).
const USER_HZ: f64 = 100.0;

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
fn refresh(n: usize, rounds: usize) {
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
fn segments(counts: &[usize]) {
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
fn vcluster(counts: &[usize]) {
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A P-521 client certificate like the one Terraform generates, made with openssl.
fn client_cert_pem() -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-521",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-keyout",
        ])
        .arg(dir.path().join("key.pem"))
        .arg("-out")
        .arg(dir.path().join("cert.pem"))
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl failed");
    std::fs::read_to_string(dir.path().join("cert.pem")).expect("read cert")
}

fn handshake(runs: usize) {
    let cert = client_cert_pem();
    let (median, min, max) = launches(&provider_binary(), &cert, runs);
    println!(
        "handshake: start to handshake line over {runs} launches: median {median:.2} ms (min {min:.2}, max {max:.2})"
    );
    if let Some(peer) = peer_binary() {
        let (median, min, max) = launches(&peer, &cert, runs);
        println!(
            "handshake: the Go framework peer: median {median:.2} ms (min {min:.2}, max {max:.2})"
        );
    }
}

/// Launch to handshake line of `binary` with Terraform's client certificate, `runs` times:
/// median, min and max in milliseconds.
fn launches(binary: &std::path::Path, cert: &str, runs: usize) -> (f64, f64, f64) {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let mut child = Command::new(binary)
            .env(COOKIE.0, COOKIE.1)
            .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
            .env("PLUGIN_CLIENT_CERT", cert)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start provider");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("handshake");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(line.starts_with("1|6|"), "bad handshake {line:?}");
        let _ = child.kill();
        let _ = child.wait();
    }
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    let max = times.iter().copied().fold(0.0, f64::max);
    (median(&mut times), min, max)
}

/// Watches for provider processes and records the highest VmHWM (peak RSS) seen; returns
/// the last CPU time (user and system, in ticks) seen of each, by pid.
fn watch_providers(
    stop: Arc<AtomicBool>,
    peak_kib: Arc<AtomicU64>,
) -> thread::JoinHandle<BTreeMap<u32, u64>> {
    thread::spawn(move || {
        let mut cpu = BTreeMap::new();
        while !stop.load(Ordering::Relaxed) {
            if let Ok(entries) = std::fs::read_dir("/proc") {
                for e in entries.flatten() {
                    let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                    // comm is cut to 15 characters.
                    if !comm.starts_with("terraform-provi") {
                        continue;
                    }
                    let status =
                        std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
                    let hwm = status
                        .lines()
                        .find_map(|l| l.strip_prefix("VmHWM:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
                    if let Some(kib) = hwm {
                        peak_kib.fetch_max(kib, Ordering::Relaxed);
                    }
                    let pid = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok());
                    let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                    // utime and stime: the 12th and 13th fields after the parenthesised comm.
                    let ticks = stat.rsplit_once(')').map(|(_, rest)| {
                        rest.split_whitespace()
                            .skip(11)
                            .take(2)
                            .filter_map(|t| t.parse::<u64>().ok())
                            .sum::<u64>()
                    });
                    if let (Some(pid), Some(ticks)) = (pid, ticks) {
                        cpu.insert(pid, ticks);
                    }
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
        cpu
    })
}

fn timed_plan(wd: &Workdir, env: &[(&str, &str)]) -> (f64, String) {
    let started = Instant::now();
    let out = wd.run_ok_with_env(&["plan", "-input=false", "-no-color", "-refresh=true"], env);
    (started.elapsed().as_secs_f64(), out.combined())
}

fn plan(n: usize, rounds: usize) {
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
