//! Timings, medians, and the memory and CPU time of the provider processes.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

/// The median wall time of `rounds` no-op plans with `extra` arguments (`-detailed-exitcode`
/// fails a plan with changes).
pub(crate) fn timed_noop_plan(
    s: &gpufleet_acceptance::Session,
    rounds: usize,
    extra: &[&str],
) -> f64 {
    let args = [&NOOP_PLAN[..], extra].concat();
    median_secs(rounds, || {
        s.ok(&args);
    })
}

/// A no-op plan as the refresh figures run it (`-detailed-exitcode` fails one with changes).
pub(crate) const NOOP_PLAN: [&str; 5] = [
    "plan",
    "-detailed-exitcode",
    "-input=false",
    "-no-color",
    "-parallelism=10",
];

/// The median wall time of `rounds` runs of `run`, in seconds.
pub(crate) fn median_secs(rounds: usize, mut run: impl FnMut()) -> f64 {
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
pub(crate) struct Usage {
    pub(crate) peak_mib: f64,
    pub(crate) cpu_s: f64,
}

pub(crate) fn with_provider_usage<T>(f: impl FnOnce() -> T) -> (T, Usage) {
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

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
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
