//! `gpufleet-lab`: start, inspect and stop a lab (see `gpufleet-lab --help` and
//! `lab/README.md`).

use std::process::ExitCode;

use clap::Parser as _;
use gpufleet_lab::cli::{Cli, run};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_env("GPUFLEET_LAB_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,kube_client=off")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gpufleet-lab: failed to start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}
