//! The `gpufleet-lab` command line.
//!
//! ```text
//! gpufleet-lab [--dir DIR] up [--fleet FILE] [--scale N] [--bin PATH]
//! gpufleet-lab [--dir DIR] status
//! gpufleet-lab [--dir DIR] logs COMPONENT [-n LINES] [-f]
//! gpufleet-lab [--dir DIR] env
//! gpufleet-lab [--dir DIR] down
//! gpufleet-lab [--dir DIR] reset
//! gpufleet-lab build [--bin PATH]
//! gpufleet-lab fleet [--fleet FILE] [--scale N] [--nodes]
//! ```
//!
//! Settings (`export …` lines) go to stdout, so `eval "$(gpufleet-lab up)"` works;
//! progress and tables go to stderr, except for `status`, `logs` and `fleet`, whose
//! output is the point and goes to stdout.

use std::fmt::Write as _;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::components::Component;
use crate::error::LabError;
use crate::fleet::{Fleet, FleetSpec};
use crate::lab::{Lab, LabOptions, LabState};
use crate::paths::LabPaths;
use crate::{gobuild, process, settings};

/// A real Kubernetes control plane with a simulated GPU fleet, on this machine.
#[derive(Debug, Parser)]
#[command(name = "gpufleet-lab", version, about, long_about = None)]
pub struct Cli {
    /// The lab's state directory (certificates, etcd data, logs, kubeconfig).
    #[arg(long, global = true, default_value = ".lab", env = "GPUFLEET_LAB_DIR")]
    pub dir: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the lab (or adopt the running one), register the fleet's nodes, and print
    /// the settings as `export` lines.
    Up {
        /// Fleet spec (TOML; see lab/fleets/README.md). Default: the lab's current fleet,
        /// or lab/fleets/default.toml.
        #[arg(long)]
        fleet: Option<PathBuf>,
        /// Replicate racks until the fleet has at least this many nodes.
        #[arg(long)]
        scale: Option<usize>,
        /// The gpufleet-kube binary (built there if missing or stale).
        #[arg(long, env = "GPUFLEET_LAB_BIN")]
        bin: Option<PathBuf>,
        /// Node create requests in flight at once.
        #[arg(long, default_value_t = 64)]
        node_concurrency: usize,
    },
    /// Show each component's process, memory and health, and the nodes. Exits 0 when
    /// everything is healthy, 1 otherwise.
    Status,
    /// Print a component's log (etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler, kwok, netris, bcm; or `build` for the Go build).
    Logs {
        /// The component.
        component: String,
        /// How many lines from the end.
        #[arg(short = 'n', long, default_value_t = 200)]
        lines: usize,
        /// Keep printing what is appended.
        #[arg(short, long)]
        follow: bool,
    },
    /// Print the settings again, as `export` lines: `eval "$(gpufleet-lab env)"`.
    Env,
    /// Stop every process of the lab (the state stays: `up` brings the same cluster back).
    Down,
    /// Stop the lab and delete its state directory (the built Go binary is kept).
    Reset,
    /// Build gpufleet-kube and vCluster's syncer and kine if missing or stale, and print
    /// where they are.
    Build {
        /// The binary.
        #[arg(long, env = "GPUFLEET_LAB_BIN")]
        bin: Option<PathBuf>,
    },
    /// Check a fleet spec and show what it expands to, without starting anything.
    Fleet {
        /// Fleet spec (TOML). Default: lab/fleets/default.toml.
        #[arg(long)]
        fleet: Option<PathBuf>,
        /// Replicate racks until the fleet has at least this many nodes.
        #[arg(long)]
        scale: Option<usize>,
        /// List every node with its identity (IP, MAC, NVLink domain).
        #[arg(long)]
        nodes: bool,
    },
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> ExitCode {
    match dispatch(cli).await {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "gpufleet-lab: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli) -> Result<ExitCode, LabError> {
    let dir = cli.dir;
    match cli.command {
        Command::Up {
            fleet,
            scale,
            bin,
            node_concurrency,
        } => {
            let mut options = LabOptions::new(&dir);
            if let Some(path) = fleet {
                options.fleet = Some(FleetSpec::from_file(&path).map_err(LabError::Fleet)?);
            }
            options.scale = scale;
            if let Some(bin) = bin {
                options.kube_bin = bin;
            }
            options.node_concurrency = node_concurrency;
            let lab = Lab::up(options).await?;
            let r = lab.report();
            let mut summary = String::new();
            if r.adopted {
                let _ = write!(summary, "lab already running in {}", lab.dir().display());
            } else {
                let _ = write!(
                    summary,
                    "lab up in {:.1}s: control plane ready in {:.1}s",
                    r.total.as_secs_f64(),
                    r.control_plane.as_secs_f64()
                );
                if let Some(b) = r.build {
                    let _ = write!(summary, " (after a {:.0}s Go build)", b.as_secs_f64());
                }
            }
            let _ = write!(
                summary,
                "; {} GPU nodes ({} GPUs, {}) Ready; API server {}; Netris emulator {}; BCM emulator {}",
                lab.fleet().nodes().len(),
                lab.fleet().gpu_count(),
                lab.fleet().products().join(", "),
                lab.server_url(),
                lab.netris_url(),
                lab.bcm_url()
            );
            eprintln!("{summary}");
            // kubectl of the lab's own Kubernetes release, so trying a tenant needs nothing
            // installed on the machine.
            let kubectl = lab.kubectl()?;
            eprintln!("kubectl of the same release: {}", kubectl.display());
            eprintln!(
                "use it from a shell with: eval \"$(gpufleet-lab --dir {} env)\"",
                settings::shell_quote(&lab.dir().display().to_string())
            );
            print!("{}", settings::render_exports(&lab.settings()));
            Ok(ExitCode::SUCCESS)
        }
        Command::Status => {
            let status = Lab::status(&dir).await?;
            print!("{}", status.render());
            Ok(if status.is_healthy() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Logs {
            component,
            lines,
            follow,
        } => {
            let path = log_path(&dir, &component)?;
            print_log(&path, lines, follow).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Env => {
            let paths = paths(&dir)?;
            let Some(state) = LabState::load(&paths) else {
                return Err(LabError::NotStarted {
                    dir: paths.root().to_path_buf(),
                });
            };
            print!(
                "{}",
                settings::render_exports(&settings::lab_settings(&paths, &state.ports))
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Down => {
            let report = Lab::down(&dir)?;
            let root = paths(&dir)?.root().display().to_string();
            if report.stopped.is_empty() && report.strays.is_empty() {
                eprintln!("nothing of a lab was running in {root}");
            } else {
                eprintln!(
                    "lab in {root} stopped: {} components{}; no lab process is left",
                    report.stopped.len(),
                    if report.strays.is_empty() {
                        String::new()
                    } else {
                        format!(" and {} stray processes", report.strays.len())
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Reset => {
            Lab::reset(&dir)?;
            eprintln!(
                "lab in {} stopped and its state deleted",
                paths(&dir)?.root().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Build { bin } => {
            let bin = bin.unwrap_or_else(gobuild::default_binary);
            let src = gobuild::source_dir();
            let built = crate::control_plane::build::ensure_built(bin.clone(), src.clone()).await?;
            match built {
                Some(took) => eprintln!("built in {:.1}s", took.as_secs_f64()),
                None => eprintln!("up to date"),
            }
            println!("{}", bin.display());
            let vcluster = gobuild::vcluster_dir();
            match crate::control_plane::build::ensure_vcluster_built().await? {
                Some(took) => eprintln!(
                    "built vCluster {} in {:.1}s",
                    gobuild::VCLUSTER_VERSION,
                    took.as_secs_f64()
                ),
                None => eprintln!("vCluster {} up to date", gobuild::VCLUSTER_VERSION),
            }
            println!("{}", vcluster.display());
            let older = gobuild::OLDER_KUBE_MINORS.join(", ");
            match crate::control_plane::build::ensure_older_kubes_built().await? {
                Some(took) => eprintln!(
                    "built Kubernetes {older} for virtual clusters in {:.1}s",
                    took.as_secs_f64()
                ),
                None => eprintln!("Kubernetes {older} for virtual clusters up to date"),
            }
            for minor in gobuild::OLDER_KUBE_MINORS {
                println!("{}", gobuild::older_kube_binary(minor).display());
            }
            match crate::control_plane::build::ensure_mpi_operator_built().await? {
                Some(took) => eprintln!(
                    "built the MPI Operator {} in {:.1}s",
                    gobuild::MPI_OPERATOR_VERSION,
                    took.as_secs_f64()
                ),
                None => eprintln!(
                    "the MPI Operator {} is up to date",
                    gobuild::MPI_OPERATOR_VERSION
                ),
            }
            println!("{}", gobuild::mpi_operator_dir().display());
            match crate::control_plane::build::ensure_karpenter_built().await? {
                Some(took) => eprintln!(
                    "built Karpenter {} in {:.1}s",
                    gobuild::KARPENTER_VERSION,
                    took.as_secs_f64()
                ),
                None => eprintln!("Karpenter {} is up to date", gobuild::KARPENTER_VERSION),
            }
            println!("{}", gobuild::karpenter_dir().display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Fleet {
            fleet,
            scale,
            nodes,
        } => {
            let spec = match fleet {
                Some(path) => FleetSpec::from_file(&path).map_err(LabError::Fleet)?,
                None => FleetSpec::default_fleet(),
            };
            let fleet = Fleet::new(spec, scale).map_err(LabError::Fleet)?;
            print!("{}", render_fleet(&fleet, nodes));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn paths(dir: &Path) -> Result<LabPaths, LabError> {
    LabPaths::new(dir).map_err(|source| LabError::StateDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// The log file of `component` (or of the Go build).
fn log_path(dir: &Path, component: &str) -> Result<PathBuf, LabError> {
    if component == "build" {
        let paths = paths(dir)?;
        let bin = LabState::load(&paths).map_or_else(gobuild::default_binary, |s| s.kube_bin);
        return Ok(gobuild::build_log(&bin));
    }
    let c = Component::from_name(component)
        .ok_or_else(|| LabError::UnknownComponent(component.to_owned()))?;
    Ok(paths(dir)?.log_file(c))
}

/// Prints the last `lines` of a log, then (with `follow`) what is appended, across
/// restarts of the component (which move the log aside and start a new one).
async fn print_log(path: &Path, lines: usize, follow: bool) -> Result<(), LabError> {
    let io_err = |source| LabError::ReadLog {
        path: path.to_path_buf(),
        source,
    };
    let mut stdout = std::io::stdout();
    for line in process::tail(path, lines).map_err(io_err)? {
        let _ = writeln!(stdout, "{line}");
    }
    if !follow {
        return Ok(());
    }
    let mut pos = std::fs::metadata(path).map_err(io_err)?.len();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let Ok(mut file) = std::fs::File::open(path) else {
            continue;
        };
        let len = file.metadata().map_err(io_err)?.len();
        if len < pos {
            pos = 0; // a new log after a restart
        }
        if len > pos {
            file.seek(SeekFrom::Start(pos)).map_err(io_err)?;
            let mut buf = Vec::new();
            file.read_to_end(&mut buf).map_err(io_err)?;
            pos += buf.len() as u64;
            let _ = stdout.write_all(&buf);
            let _ = stdout.flush();
        }
    }
}

/// The fleet, rack by rack (and node by node with `nodes`).
fn render_fleet(fleet: &Fleet, nodes: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "fleet {:?}: {} nodes, {} GPUs, {} racks; products: {}",
        fleet.spec().name,
        fleet.nodes().len(),
        fleet.gpu_count(),
        fleet.racks().len(),
        fleet.products().join(", ")
    );
    let _ = writeln!(
        out,
        "{:<16} {:<8} {:<8} {:<24} {:>5} {:>5}  IDLE",
        "RACK", "SITE", "ZONE", "PRODUCT", "NODES", "GPUS"
    );
    let mut rows: Vec<(String, String, String, String, usize, u64, String)> = Vec::new();
    for n in fleet.nodes() {
        match rows.last_mut() {
            Some(r) if r.0 == n.rack && r.3 == n.model.product => {
                r.4 += 1;
                r.5 += u64::from(n.gpus);
            }
            _ => rows.push((
                n.rack.clone(),
                n.site.clone(),
                n.zone.clone(),
                n.model.product.to_owned(),
                1,
                u64::from(n.gpus),
                n.idle_power.to_string(),
            )),
        }
    }
    for (rack, site, zone, product, count, gpus, idle) in rows {
        let _ = writeln!(
            out,
            "{rack:<16} {site:<8} {zone:<8} {product:<24} {count:>5} {gpus:>5}  {idle}"
        );
    }
    if nodes {
        let _ = writeln!(
            out,
            "\n{:<22} {:<24} {:>4} {:<15} {:<17} NVLINK-DOMAIN",
            "NODE", "PRODUCT", "GPUS", "IP", "MAC"
        );
        for n in fleet.nodes() {
            let _ = writeln!(
                out,
                "{:<22} {:<24} {:>4} {:<15} {:<17} {}",
                n.name,
                n.model.product,
                n.gpus,
                n.ip,
                n.mac,
                n.nvlink_domain.as_deref().unwrap_or("-")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_parses() {
        let cli = Cli::try_parse_from(["gpufleet-lab", "up", "--scale", "1000", "--dir", "/tmp/x"])
            .expect("parse");
        assert_eq!(cli.dir, Path::new("/tmp/x"));
        assert!(matches!(
            cli.command,
            Command::Up {
                scale: Some(1000),
                ..
            }
        ));
        let cli = Cli::try_parse_from(["gpufleet-lab", "logs", "kwok", "-f"]).expect("parse");
        assert!(matches!(
            cli.command,
            Command::Logs {
                follow: true,
                lines: 200,
                ..
            }
        ));
    }

    #[test]
    fn unknown_components_are_named_in_the_error() {
        let err = log_path(Path::new("/tmp/x"), "kubelet").expect_err("unknown");
        assert!(err.to_string().contains("kube-apiserver"), "{err}");
    }

    #[test]
    fn fleet_table_sums_racks() {
        let fleet = Fleet::default_fleet(None).expect("fleet");
        let table = render_fleet(&fleet, true);
        assert!(table.contains("rack-a1"), "{table}");
        assert!(table.contains("gpu-rack-a1-01"), "{table}");
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("rack-b3") && l.ends_with("off"))
        );
    }
}
