//! `vcluster-standin`: the lab's stand-in for vCluster's control-plane container. Runs
//! until interrupted; see [`gpufleet_lab::vcluster`].
//!
//! ```sh
//! vcluster-standin --dir .lab/vcluster --kubeconfig .lab/kubeconfig \
//!     --lab-state .lab/state.json --etcd-port 2379 --listen 127.0.0.1:0
//! ```
//!
//! `gpufleet-lab up` runs it as the lab's `vcluster` component.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gpufleet_lab::LabState;
use gpufleet_lab::vcluster::{StandIn, StandInConfig, health};
use tracing_subscriber::EnvFilter;

/// Runs the vCluster stand-in.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// State directory (one directory per virtual cluster).
    #[arg(long)]
    dir: PathBuf,
    /// The host cluster's kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The lab's state file, for the `gpufleet-kube` binary the API servers run from.
    #[arg(long)]
    lab_state: Option<PathBuf>,
    /// The `gpufleet-kube` binary (default: the one in the lab's state file).
    #[arg(long)]
    kube_bin: Option<PathBuf>,
    /// The lab's etcd client port (plain HTTP on 127.0.0.1).
    #[arg(long)]
    etcd_port: u16,
    /// Where `/healthz` and `/status` are served.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Milliseconds between passes over the StatefulSets.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("VCLUSTER_STANDIN_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    gpufleet_lab::install_crypto_provider();
    let args = Args::parse();
    let kube_bin = match (args.kube_bin, &args.lab_state) {
        (Some(bin), _) => bin,
        (None, Some(state)) => {
            let text = std::fs::read_to_string(state)?;
            serde_json::from_str::<LabState>(&text)?.kube_bin
        }
        (None, None) => gpufleet_lab::gobuild::default_binary(),
    };
    std::fs::create_dir_all(&args.dir)?;
    let host = kube::Client::try_from(gpufleet_lab::kubeconfig::load(&args.kubeconfig).await?)?;
    let stand_in = StandIn::new(
        StandInConfig {
            dir: args.dir,
            kube_bin,
            etcd_port: args.etcd_port,
            interval: Duration::from_millis(args.interval_ms),
        },
        host,
    );
    let status = stand_in.status();
    tracing::info!("serving /healthz and /status on {}", args.listen);
    tokio::select! {
        served = health::serve(args.listen, status) => served?,
        () = stand_in.run() => {}
        signal = tokio::signal::ctrl_c() => {
            signal?;
            tracing::info!("stopping; the virtual clusters' API servers keep running");
        }
    }
    Ok(())
}
