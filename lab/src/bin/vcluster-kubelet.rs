//! `vcluster-kubelet`: the lab's kubelet for vCluster control-plane pods. Runs vCluster's
//! real syncer as the process of every pod labelled `app=vcluster`, until interrupted; see
//! [`gpufleet_lab::vcluster`].
//!
//! ```sh
//! vcluster-kubelet --dir .lab/vcluster --kubeconfig .lab/kubeconfig \
//!     --lab-state .lab/state.json --vcluster-dir target/vcluster/vcluster-build --listen 127.0.0.1:0
//! ```
//!
//! `gpufleet-lab up` runs it as the lab's `vcluster` component. It also runs itself inside
//! each pod's sandbox, as `vcluster-kubelet sandbox-init --spec <file>`, and supervises the
//! lab's MPI Operator in a network namespace of its own (`vcluster-kubelet isolated`). Beside the pods, it
//! plays the MIG manager of the lab's nodes ([`gpufleet_lab::mig_manager`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use gpufleet_lab::LabState;
use gpufleet_lab::vcluster::isolated::{self, Isolated};
use gpufleet_lab::vcluster::sandbox::{self, SandboxSpec};
use gpufleet_lab::vcluster::{KubeletConfig, VclusterKubelet, health};
use tracing_subscriber::EnvFilter;

/// Runs the lab's kubelet for vCluster pods.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// What to do (default: run the kubelet).
    #[command(subcommand)]
    command: Option<Sub>,
    /// State directory (pods, claims, ports).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The host cluster's kubeconfig.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The lab's state file, for the `gpufleet-kube` binary.
    #[arg(long)]
    lab_state: Option<PathBuf>,
    /// The `gpufleet-kube` binary (default: the one in the lab's state file).
    #[arg(long)]
    kube_bin: Option<PathBuf>,
    /// The directory with vCluster's `vcluster` and `kine` (lab/vcluster/build.sh).
    #[arg(long)]
    vcluster_dir: Option<PathBuf>,
    /// Where `/healthz` and `/status` are served.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Milliseconds between passes over the pods.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Inside a new set of namespaces (started by `unshare`): set up a pod's sandbox and
    /// become its container's command.
    SandboxInit {
        /// The sandbox's spec.
        #[arg(long)]
        spec: PathBuf,
    },
    /// Runs a program in a network namespace of its own, with the host API server
    /// reachable inside and one port inside reachable from the host (the lab's MPI
    /// Operator).
    Isolated {
        /// Where the sandbox's spec is written.
        #[arg(long)]
        dir: PathBuf,
        /// The host API server's port on 127.0.0.1 (the same inside).
        #[arg(long)]
        api_port: u16,
        /// The host address that leads to `--inner-port` inside.
        #[arg(long)]
        expose: SocketAddr,
        /// The port inside.
        #[arg(long)]
        inner_port: u16,
        /// `NAME=VALUE`: set in the program's environment (repeatable), for programs that
        /// take settings only from there.
        #[arg(long = "env", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

/// `NAME=VALUE` of `--env`.
fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    if let Some(Sub::SandboxInit { spec }) = &args.command {
        // Single-threaded and without a runtime: it changes root and execs.
        let spec: SandboxSpec = match std::fs::read(spec)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "vcluster-kubelet sandbox-init: failed to read {}: {e}",
                    spec.display()
                );
                return ExitCode::from(126);
            }
        };
        let err = sandbox::init(&spec);
        eprintln!("vcluster-kubelet sandbox-init: {err}");
        return ExitCode::from(127);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("VCLUSTER_KUBELET_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vcluster-kubelet: failed to start its runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Sub::Isolated {
        dir,
        api_port,
        expose,
        inner_port,
        env,
        argv,
    }) = args.command.take()
    {
        let what = Isolated {
            dir,
            api_port,
            expose,
            inner_port,
            env,
            argv,
        };
        let run = async {
            let bin = std::env::current_exe().map_err(|e| e.to_string())?;
            isolated::run(&bin, what).await
        };
        return match runtime.block_on(run) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    gpufleet_lab::install_crypto_provider();
    let (Some(dir), Some(kubeconfig)) = (args.dir, args.kubeconfig) else {
        return Err("--dir and --kubeconfig are required".into());
    };
    sandbox::check_namespaces()?;
    let kube_bin = match (args.kube_bin, &args.lab_state) {
        (Some(bin), _) => bin,
        (None, Some(state)) => {
            let text = std::fs::read_to_string(state)?;
            serde_json::from_str::<LabState>(&text)?.kube_bin
        }
        (None, None) => gpufleet_lab::gobuild::default_binary(),
    };
    let vcluster_dir = args
        .vcluster_dir
        .unwrap_or_else(gpufleet_lab::gobuild::vcluster_dir);
    let (syncer_bin, kine_bin) = (vcluster_dir.join("vcluster"), vcluster_dir.join("kine"));
    for bin in [&syncer_bin, &kine_bin, &kube_bin] {
        if !bin.is_file() {
            return Err(format!(
                "{} is missing: run `gpufleet-lab build` (it builds vCluster from the Go module proxy)",
                bin.display()
            )
            .into());
        }
    }
    std::fs::create_dir_all(&dir)?;
    gpufleet_lab::vcluster::limits::raise_inotify();
    let config = gpufleet_lab::kubeconfig::load(&kubeconfig).await?;
    let api_port = config
        .cluster_url
        .port_u16()
        .ok_or("the kubeconfig's server has no port")?;
    let host = kube::Client::try_from(config)?;
    let mig_manager =
        gpufleet_lab::mig_manager::run(host.clone(), Duration::from_millis(args.interval_ms));
    // The lab's own minor, and the older ones built for virtual clusters only; a pod that
    // asks for a minor missing here is refused, as an image pull would fail.
    let kube_bins = std::iter::once((gpufleet_lab::gobuild::KUBE_MINOR.to_owned(), kube_bin))
        .chain(
            gpufleet_lab::gobuild::OLDER_KUBE_MINORS
                .iter()
                .map(|m| ((*m).to_owned(), gpufleet_lab::gobuild::older_kube_binary(m))),
        )
        .collect();
    let kubelet = VclusterKubelet::new(
        KubeletConfig {
            dir,
            kubelet_bin: std::env::current_exe()?,
            syncer_bin,
            kine_bin,
            kube_bins,
            version: gpufleet_lab::gobuild::VCLUSTER_VERSION.to_owned(),
            api_port,
            interval: Duration::from_millis(args.interval_ms),
        },
        host,
    );
    let status = kubelet.status();
    tracing::info!(
        "running vCluster {} pods; serving /healthz and /status on {}",
        gpufleet_lab::gobuild::VCLUSTER_VERSION,
        args.listen
    );
    tokio::select! {
        served = health::serve(args.listen, status) => served?,
        () = kubelet.run() => {}
        () = mig_manager => {}
        signal = tokio::signal::ctrl_c() => {
            signal?;
            tracing::info!("stopping; the pods' sandboxes keep running");
        }
    }
    Ok(())
}
