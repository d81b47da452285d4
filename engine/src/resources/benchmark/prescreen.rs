//! The prescreen (`prescreen = true`): before a run measures anything, one short pod on each
//! node of the gang prints what NVIDIA's Exemplar prescreen looks at (the GPUs as
//! `nvidia-smi -q` reports them, their topology, the InfiniBand HCAs, the kernel command line
//! and the NCCL environment); gpufleet reads it into `node_environments`, and a node that
//! fails it stops the run before the benchmark's pods start. The run then takes exactly the
//! nodes that passed. The script only prints; every judgement is here, where it is tested.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use serde_json::{Value as Json, json};
use tokio::time::Instant;

use super::{
    commands::ENDPOINT_API_KEY_ENV,
    error::{RunError, StepError},
    launch::Launcher,
    model::BenchmarkSpec,
    render::{self, Placement},
    shape::Shape,
    wait::{run_pods, wait_done, wait_gang, wait_pods_gone},
};
use crate::backends::kube::{
    ObjectError,
    host::{HostObjects, ObjectKind},
    json::str_at,
};

/// The container of a prescreen pod, whose log is the report.
pub const CONTAINER: &str = "prescreen";

/// How each section of the report starts: `==> gpufleet prescreen: <section> <==`.
const MARK: &str = "==> gpufleet prescreen: ";

/// The sections, in the order the script prints them, with the command behind each.
const SECTIONS: &[(&str, &str)] = &[
    ("nvidia-smi -q", "nvidia-smi -q"),
    ("nvidia-smi topo -m", "nvidia-smi topo -m"),
    ("ibstat", "ibstat"),
    ("kernel command line", "cat /proc/cmdline"),
    (
        "nccl environment",
        "env | grep -E '^(NCCL_|NVSHMEM_HCA_LIST=|MELLANOX_VISIBLE_DEVICES=)' | sort",
    ),
];

/// The Job's name: `gfb-<name>-prescreen`.
pub fn job_name(benchmark: &str) -> String {
    format!("{}-prescreen", render::job_name(benchmark))
}

/// The shell script a prescreen pod runs: each section's command under its mark, a missing
/// tool said as such, and exit 0 whatever it found (gpufleet judges the report).
pub fn script() -> String {
    SECTIONS
        .iter()
        .map(|(section, command)| {
            let tool = command.split_whitespace().next().unwrap_or_default();
            format!(
                "echo '{MARK}{section} <=='; if command -v {tool} >/dev/null 2>&1; then \
                 {command} 2>&1; else echo '{tool}: not found'; fi"
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The prescreen Job of a run placed by `placement`: the run's own pod shape (its image, its
/// GPUs, one pod per node), running [`script`]. It gets the run's environment but never the
/// endpoint key.
pub fn job(spec: &BenchmarkSpec, placement: &Placement, deadline_seconds: u64) -> Json {
    let mut job = render::job(spec, placement, deadline_seconds);
    job["metadata"]["name"] = json!(job_name(&spec.name));
    let pod = &mut job["spec"]["template"]["spec"];
    if let Some(p) = pod.as_object_mut() {
        p.remove("subdomain");
    }
    let container = &mut pod["containers"][0];
    container["name"] = json!(CONTAINER);
    container["command"] = json!(["sh", "-c", script()]);
    if let Some(env) = container["env"].as_array_mut() {
        env.retain(|e| e["name"] != ENDPOINT_API_KEY_ENV);
    }
    job
}

/// One GPU as `nvidia-smi -q` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gpu {
    /// `GPU 00000000:18:00.0`: its PCI bus id.
    pub bus_id: String,
    /// `Product Name`.
    pub product: String,
    /// `Serial Number`.
    pub serial: String,
    /// `GPU UUID`.
    pub uuid: String,
    /// `VBIOS Version`.
    pub vbios: String,
    /// Uncorrectable ECC errors since the driver loaded (`ECC Errors` → `Volatile`).
    pub uncorrectable_errors: u64,
    /// Uncorrectable ECC errors over the GPU's life (`ECC Errors` → `Aggregate`): recorded,
    /// not judged, since rows remapped after them are healthy again.
    pub uncorrectable_lifetime: u64,
    /// Why the GPU's memory needs service: a row remapping pending or failed, a page
    /// retirement pending.
    pub memory_service: Vec<String>,
}

/// One port of an InfiniBand HCA as `ibstat` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HcaPort {
    /// The HCA (`mlx5_0`).
    pub hca: String,
    /// The port number.
    pub port: String,
    /// `State` (`Active`, `Down`, …).
    pub state: String,
    /// `Rate` in Gb/s.
    pub rate: String,
    /// `Link layer` (`InfiniBand` or `Ethernet`).
    pub link_layer: String,
    /// The HCA's `Firmware version`.
    pub firmware: String,
}

/// What one node's prescreen printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Each section's text, by name; a section the log does not have is missing.
    pub sections: BTreeMap<String, String>,
    /// `Driver Version`.
    pub driver_version: String,
    /// `CUDA Version`.
    pub cuda_version: String,
    /// `Attached GPUs`.
    pub attached_gpus: Option<u32>,
    /// The GPUs, in bus order.
    pub gpus: Vec<Gpu>,
    /// The HCAs' ports.
    pub hca_ports: Vec<HcaPort>,
    /// `NCCL_*` variables of the container, and the two that choose its HCAs otherwise
    /// (`MELLANOX_VISIBLE_DEVICES`, `NVSHMEM_HCA_LIST`).
    pub nccl_env: BTreeMap<String, String>,
    /// The kernel command line.
    pub kernel_cmdline: String,
}

/// A `Key : Value` line of `nvidia-smi -q`, with its indentation.
fn key_value(line: &str) -> Option<(usize, &str, &str)> {
    let indent = line.len() - line.trim_start().len();
    let (k, v) = line.split_once(':')?;
    Some((indent, k.trim(), v.trim()))
}

/// The GPUs of an `nvidia-smi -q` report: each `GPU <bus id>` block, its keys read by their
/// path of section headings (`ECC Errors` → `Volatile` → `DRAM Uncorrectable`), so that
/// keys of the same name in other sections are not mistaken for them.
fn gpus_of(text: &str) -> Vec<Gpu> {
    let mut gpus: Vec<Gpu> = Vec::new();
    // Headings above the current line, by indentation.
    let mut path: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 0 {
            path.clear();
            if let Some(bus) = line.trim().strip_prefix("GPU ") {
                gpus.push(Gpu {
                    bus_id: bus.trim().to_owned(),
                    ..Gpu::default()
                });
            }
            continue;
        }
        let Some(gpu) = gpus.last_mut() else {
            continue;
        };
        while path.last().is_some_and(|(i, _)| *i >= indent) {
            path.pop();
        }
        let Some((_, key, value)) = key_value(line).filter(|(_, _, v)| !v.is_empty()) else {
            path.push((indent, line.trim().trim_end_matches(':').to_owned()));
            continue;
        };
        let under: Vec<&str> = path.iter().map(|(_, h)| h.as_str()).collect();
        match (under.as_slice(), key) {
            ([], "Product Name") => gpu.product = value.to_owned(),
            ([], "Serial Number") => gpu.serial = value.to_owned(),
            ([], "GPU UUID") => gpu.uuid = value.to_owned(),
            ([], "VBIOS Version") => gpu.vbios = value.to_owned(),
            (["ECC Errors", when, ..], k) if k.contains("Uncorrectable") || k == "Total" => {
                // Older drivers nest `Double Bit` → `Total`; newer ones list
                // `SRAM Uncorrectable …` and `DRAM Uncorrectable` directly.
                let double_bit = under.contains(&"Double Bit");
                if (k.contains("Uncorrectable") || (double_bit && k == "Total"))
                    && let Ok(n) = value.parse::<u64>()
                {
                    match *when {
                        "Volatile" => gpu.uncorrectable_errors += n,
                        "Aggregate" => gpu.uncorrectable_lifetime += n,
                        _ => {}
                    }
                }
            }
            (["Remapped Rows", ..], "Pending") if value == "Yes" => {
                gpu.memory_service
                    .push("a row remapping is pending".to_owned());
            }
            (["Remapped Rows", ..], "Remapping Failure Occurred") if value == "Yes" => {
                gpu.memory_service.push("a row remapping failed".to_owned());
            }
            (["Retired Pages", ..], k) if k.starts_with("Pending") && value == "Yes" => {
                gpu.memory_service
                    .push("a page retirement is pending".to_owned());
            }
            _ => {}
        }
    }
    gpus
}

/// The ports of an `ibstat` report.
fn hca_ports_of(text: &str) -> Vec<HcaPort> {
    let mut ports = Vec::new();
    let (mut hca, mut firmware) = (String::new(), String::new());
    let mut port: Option<HcaPort> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("CA '").and_then(|r| r.strip_suffix('\'')) {
            ports.extend(port.take());
            (hca, firmware) = (name.to_owned(), String::new());
        } else if let Some(n) = t.strip_prefix("Port ").and_then(|r| r.strip_suffix(':')) {
            ports.extend(port.take());
            port = Some(HcaPort {
                hca: hca.clone(),
                port: n.to_owned(),
                firmware: firmware.clone(),
                ..HcaPort::default()
            });
        } else if let Some((k, v)) = t.split_once(':') {
            let v = v.trim().to_owned();
            match (k.trim(), port.as_mut()) {
                ("Firmware version", _) => firmware = v,
                ("State", Some(p)) => p.state = v,
                ("Rate", Some(p)) => p.rate = v,
                ("Link layer", Some(p)) => p.link_layer = v,
                _ => {}
            }
        }
    }
    ports.extend(port);
    ports
}

/// Reads a prescreen pod's log.
pub fn parse(log: &str) -> Report {
    let mut sections: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(name) = line.strip_prefix(MARK).and_then(|r| r.strip_suffix(" <==")) {
            current = Some(name.to_owned());
            sections.entry(name.to_owned()).or_default();
        } else if let Some(name) = &current {
            let text = sections.entry(name.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    let smi = sections.get("nvidia-smi -q").cloned().unwrap_or_default();
    let top = |key: &str| {
        smi.lines()
            .filter_map(key_value)
            .find(|(indent, k, _)| *indent == 0 && *k == key)
            .map(|(_, _, v)| v.to_owned())
            .unwrap_or_default()
    };
    let nccl_env = sections
        .get("nccl environment")
        .into_iter()
        .flat_map(|t| t.lines())
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| {
            k.starts_with("NCCL_") || *k == "NVSHMEM_HCA_LIST" || *k == "MELLANOX_VISIBLE_DEVICES"
        })
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    Report {
        driver_version: top("Driver Version"),
        cuda_version: top("CUDA Version"),
        attached_gpus: top("Attached GPUs").parse().ok(),
        gpus: gpus_of(&smi),
        hca_ports: sections
            .get("ibstat")
            .map(|t| hca_ports_of(t))
            .unwrap_or_default(),
        nccl_env,
        kernel_cmdline: sections
            .get("kernel command line")
            .map(|t| t.trim().to_owned())
            .unwrap_or_default(),
        sections,
    }
}

impl Report {
    /// What `node_environments` records of the node.
    pub fn facts(&self) -> BTreeMap<String, String> {
        let join = |f: fn(&Gpu) -> &str| self.gpus.iter().map(f).collect::<Vec<_>>().join(",");
        let vbios: BTreeSet<&str> = self.gpus.iter().map(|g| g.vbios.as_str()).collect();
        let hcas: Vec<String> = self
            .hca_ports
            .iter()
            .map(|p| {
                format!(
                    "{}/{} {} {} {} Gb/s fw {}",
                    p.hca, p.port, p.link_layer, p.state, p.rate, p.firmware
                )
            })
            .collect();
        let nccl: Vec<String> = self
            .nccl_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        BTreeMap::from([
            (
                "reported_driver_version".into(),
                self.driver_version.clone(),
            ),
            ("reported_cuda_version".into(), self.cuda_version.clone()),
            ("gpu_uuids".into(), join(|g| &g.uuid)),
            ("gpu_serials".into(), join(|g| &g.serial)),
            ("gpu_bus_ids".into(), join(|g| &g.bus_id)),
            (
                "uncorrectable_ecc_lifetime".into(),
                self.gpus
                    .iter()
                    .map(|g| g.uncorrectable_lifetime.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "vbios_version".into(),
                vbios.into_iter().collect::<Vec<_>>().join(","),
            ),
            ("hcas".into(), hcas.join("; ")),
            ("kernel_cmdline".into(), self.kernel_cmdline.clone()),
            ("nccl_env".into(), nccl.join(" ")),
        ])
    }

    /// Why the node fails the prescreen, each reason a sentence; empty when it passes.
    /// `gpus` is what the run asks of each node, `labelled_driver` the driver the node's
    /// labels claim, and `nccl` whether the run is an NCCL one (whose fabric settings count).
    pub fn problems(&self, gpus: u32, labelled_driver: &str, nccl: bool) -> Vec<String> {
        let mut out = Vec::new();
        if self.gpus.is_empty() {
            let said = self
                .sections
                .get("nvidia-smi -q")
                .and_then(|t| t.lines().find(|l| !l.trim().is_empty()))
                .unwrap_or("no output");
            out.push(format!("nvidia-smi -q reported no GPU ({})", said.trim()));
            return out;
        }
        if let Some(n) = self.attached_gpus.filter(|n| *n != gpus) {
            out.push(format!(
                "the pod sees {n} GPU(s), not the {gpus} it asked for"
            ));
        }
        for g in &self.gpus {
            let which = format!("GPU {} ({})", g.uuid, g.bus_id);
            if g.uncorrectable_errors > 0 {
                out.push(format!(
                    "{which} has {} uncorrectable ECC error(s) since the driver loaded",
                    g.uncorrectable_errors
                ));
            }
            for why in &g.memory_service {
                out.push(format!("{which}: {why}"));
            }
        }
        if !labelled_driver.is_empty()
            && !self.driver_version.is_empty()
            && self.driver_version != labelled_driver
        {
            out.push(format!(
                "the driver is {}, but the node's labels say {labelled_driver} (GPU feature \
                 discovery has not caught up with a driver change)",
                self.driver_version
            ));
        }
        let infiniband: Vec<&HcaPort> = self
            .hca_ports
            .iter()
            .filter(|p| p.link_layer == "InfiniBand")
            .collect();
        for p in infiniband.iter().filter(|p| p.state != "Active") {
            out.push(format!(
                "InfiniBand port {}/{} is {}, not Active",
                p.hca, p.port, p.state
            ));
        }
        // As NVIDIA's prescreen reads a container's settings: the HCAs are chosen when the
        // container sees only some (`MELLANOX_VISIBLE_DEVICES`) or NCCL is told which.
        let chosen = ["NCCL_IB_HCA", "MELLANOX_VISIBLE_DEVICES"]
            .iter()
            .any(|k| self.nccl_env.contains_key(*k));
        if nccl && !infiniband.is_empty() && !chosen {
            let hcas: BTreeSet<&str> = infiniband.iter().map(|p| p.hca.as_str()).collect();
            out.push(format!(
                "the node has InfiniBand HCAs ({}) but neither NCCL_IB_HCA nor \
                 MELLANOX_VISIBLE_DEVICES is set, so NCCL picks the HCAs itself and the run may \
                 not use the fabric it is meant to measure",
                hcas.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        out
    }
}

/// Nodes whose prescreens report different drivers, as `node (driver)`: one run must not
/// mix them, unless `driver_version` may differ.
pub fn mixed_drivers(reports: &BTreeMap<String, Report>) -> Option<String> {
    let drivers: BTreeSet<&str> = reports
        .values()
        .map(|r| r.driver_version.as_str())
        .collect();
    (drivers.len() > 1).then(|| {
        reports
            .iter()
            .map(|(n, r)| format!("{n} ({})", r.driver_version))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// What a passed prescreen hands the run: the nodes it may take, each node's report, and
/// each pod's log for the archive.
#[derive(Debug, Default)]
pub(super) struct Screened {
    /// The nodes that passed, in index order: the run's pods are pinned to them.
    pub(super) nodes: Vec<String>,
    /// Each node's report.
    pub(super) reports: BTreeMap<String, Report>,
    /// Each prescreen pod's log, by pod name.
    pub(super) logs: Vec<(String, String)>,
}

/// Runs the prescreen of `spec` on `placement`'s nodes, once the caller has deleted what the
/// run left: the Job, its gang, its end, the reports, and the Job's removal (its pods gone, so their GPUs are free for the run). A node
/// that fails stops the run ([`RunError::Prescreen`]), before any benchmark pod exists.
pub(super) async fn screen(
    cluster: &dyn HostObjects,
    spec: &BenchmarkSpec,
    placement: &Placement,
    labelled_drivers: &BTreeMap<String, String>,
    window: (Instant, Instant, Duration),
) -> Result<Screened, StepError> {
    let (started, deadline, limit) = window;
    let shape = Shape {
        launcher: Launcher::Pods,
        name: job_name(&spec.name),
    };
    // What the run left (a prescreen a killed provider left included) was removed by the
    // caller; its pods hold the nodes until they are gone.
    wait_pods_gone(cluster, &spec.namespace, &spec.name, limit).await?;
    cluster
        .apply(&job(spec, placement, limit.as_secs().max(1)))
        .await?;
    let gang_deadline = (started + spec.start_timeout).min(deadline);
    let outcome = async {
        wait_gang(cluster, spec, &shape, started, gang_deadline, None).await?;
        wait_done(cluster, spec, &shape, deadline, limit).await
    }
    .await;
    let mut logs = Vec::new();
    let mut reports = BTreeMap::new();
    let mut nodes = Vec::new();
    let read = async {
        for pod in run_pods(cluster, spec, &shape.gang_selector()).await? {
            let (Some(name), Some(node)) = (
                str_at(&pod, "/metadata/name"),
                str_at(&pod, "/spec/nodeName"),
            ) else {
                continue;
            };
            let log = cluster
                .logs(&spec.namespace, name, CONTAINER)
                .await
                .unwrap_or_else(|e| format!("(the log could not be read: {e})"));
            reports.insert(node.to_owned(), parse(&log));
            nodes.push(node.to_owned());
            logs.push((name.to_owned(), log));
        }
        Ok::<(), ObjectError>(())
    };
    let read = read.await;
    // Gone before the run's pods need the GPUs, whatever the prescreen found.
    cluster
        .delete(ObjectKind::Job, Some(&spec.namespace), &shape.name)
        .await?;
    wait_pods_gone(cluster, &spec.namespace, &spec.name, limit).await?;
    read?;
    if !outcome? {
        let said: Vec<String> = logs
            .iter()
            .map(|(pod, log)| format!("{pod}: {}", log.lines().last().unwrap_or("no output")))
            .collect();
        return Err(RunError::Prescreen(format!("its Job failed ({})", said.join("; "))).into());
    }
    let nccl = spec.suite.name() == "nccl-all-reduce";
    let mut problems: Vec<String> = reports
        .iter()
        .flat_map(|(node, r)| {
            let labelled = labelled_drivers.get(node).map_or("", String::as_str);
            r.problems(spec.gpus_per_node, labelled, nccl)
                .into_iter()
                .map(move |p| format!("node {node}: {p}"))
        })
        .collect();
    if !spec.allow_node_differences.contains("driver_version")
        && let Some(mixed) = mixed_drivers(&reports)
    {
        problems.push(format!("the nodes run different drivers: {mixed}"));
    }
    if !problems.is_empty() {
        return Err(RunError::Prescreen(problems.join("; ")).into());
    }
    Ok(Screened {
        nodes,
        reports,
        logs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of `smi` (an `nvidia-smi -q` text), `ibstat` and `nccl` under the script's
    /// marks.
    fn report(smi: &str, ibstat: &str, nccl: &str) -> Report {
        parse(&format!(
            "{MARK}nvidia-smi -q <==\n{smi}{MARK}ibstat <==\n{ibstat}{MARK}nccl environment <==\n{nccl}"
        ))
    }

    const ONE_GPU: &str = "Driver Version                            : 570.124.06
CUDA Version                              : 12.8

Attached GPUs                             : 1
GPU 00000000:19:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Serial Number                         : 1654123038646
    GPU UUID                              : GPU-10f35015
    VBIOS Version                         : 96.00.74.00.0D
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            DRAM Uncorrectable            : 7
    Remapped Rows
        Pending                           : No
        Remapping Failure Occurred        : No
";

    const IB_PORT: &str = "CA 'mlx5_0'
        CA type: MT4129
        Firmware version: 28.41.1000
        Port 1:
                State: Active
                Rate: 400
                Link layer: InfiniBand
";

    #[test]
    fn a_healthy_node_passes_and_says_what_it_is() {
        let r = report(ONE_GPU, IB_PORT, "NCCL_IB_HCA=mlx5_0\n");
        assert_eq!(r.problems(1, "570.124.06", true), Vec::<String>::new());
        let facts = r.facts();
        assert_eq!(facts["gpu_uuids"], "GPU-10f35015");
        assert_eq!(facts["gpu_serials"], "1654123038646");
        assert_eq!(
            facts["hcas"],
            "mlx5_0/1 InfiniBand Active 400 Gb/s fw 28.41.1000"
        );
        assert_eq!(facts["nccl_env"], "NCCL_IB_HCA=mlx5_0");
    }

    #[test]
    fn only_volatile_uncorrectable_errors_and_pending_service_fail_a_gpu() {
        // Aggregate errors are history, recorded; volatile ones happened since the driver
        // loaded.
        let old = report(ONE_GPU, "", "");
        assert!(old.problems(1, "", false).is_empty());
        assert_eq!(old.facts()["uncorrectable_ecc_lifetime"], "7");
        let bad = ONE_GPU
            .replace(
                "SRAM Uncorrectable            : 0",
                "SRAM Uncorrectable            : 1",
            )
            .replace(
                "Pending                           : No",
                "Pending                           : Yes",
            );
        let p = report(&bad, "", "").problems(1, "", false);
        assert_eq!(
            p,
            [
                "GPU GPU-10f35015 (00000000:19:00.0) has 1 uncorrectable ECC error(s) since the \
                 driver loaded",
                "GPU GPU-10f35015 (00000000:19:00.0): a row remapping is pending",
            ]
        );
    }

    #[test]
    fn older_drivers_count_double_bit_errors() {
        let smi = "Attached GPUs : 1
GPU 00000000:04:00.0
    GPU UUID : GPU-old
    ECC Errors
        Volatile
            Single Bit
                Total : 9
            Double Bit
                Device Memory : 2
                Total : 2
";
        assert_eq!(report(smi, "", "").gpus[0].uncorrectable_errors, 2);
    }

    #[test]
    fn a_stale_driver_label_a_port_down_and_no_hca_list_fail_an_nccl_run() {
        let down = IB_PORT.replace("State: Active", "State: Down");
        let p = report(
            ONE_GPU,
            &format!("{IB_PORT}{}", down.replace("mlx5_0", "mlx5_1")),
            "",
        )
        .problems(1, "550.54.15", true);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("the driver is 570.124.06, but the node's labels say 550.54.15"));
        assert_eq!(p[1], "InfiniBand port mlx5_1/1 is Down, not Active");
        assert!(p[2].contains("InfiniBand HCAs (mlx5_0, mlx5_1) but neither NCCL_IB_HCA nor"));
        // A container that sees only its HCAs has them chosen.
        let seen = report(ONE_GPU, IB_PORT, "MELLANOX_VISIBLE_DEVICES=0,3\n");
        assert_eq!(seen.problems(1, "", true), Vec::<String>::new());
        // Other suites do not read NCCL's settings.
        assert_eq!(
            report(ONE_GPU, IB_PORT, "").problems(1, "", false),
            Vec::<String>::new()
        );
    }

    #[test]
    fn no_gpu_or_fewer_than_asked_fail() {
        let none = parse(&format!("{MARK}nvidia-smi -q <==\nnvidia-smi: not found\n"));
        assert_eq!(
            none.problems(8, "", false),
            ["nvidia-smi -q reported no GPU (nvidia-smi: not found)"]
        );
        assert_eq!(
            report(ONE_GPU, "", "").problems(8, "", false),
            ["the pod sees 1 GPU(s), not the 8 it asked for"]
        );
    }

    #[test]
    fn nodes_on_different_drivers_are_named() {
        let a = report(ONE_GPU, "", "");
        let b = report(&ONE_GPU.replace("570.124.06", "575.57.08"), "", "");
        let reports = BTreeMap::from([("n1".to_owned(), a.clone()), ("n2".to_owned(), b)]);
        assert_eq!(
            mixed_drivers(&reports).as_deref(),
            Some("n1 (570.124.06), n2 (575.57.08)")
        );
        let same = BTreeMap::from([("n1".to_owned(), a.clone()), ("n2".to_owned(), a)]);
        assert_eq!(mixed_drivers(&same), None);
    }

    #[test]
    fn the_script_prints_every_section_under_its_mark() {
        let s = script();
        for (section, command) in SECTIONS {
            assert!(s.contains(&format!("{MARK}{section} <==")), "{s}");
            assert!(s.contains(command), "{s}");
        }
    }
}
