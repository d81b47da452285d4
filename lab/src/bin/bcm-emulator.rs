//! `bcm-emulator`: runs the lab's Base Command Manager emulator on its own, until
//! interrupted.
//!
//! ```sh
//! cargo run -p gpufleet-lab --bin bcm-emulator -- --dir .lab/bcm
//! ```
//!
//! Without `--ca-cert`/`--ca-key` it makes a CA of its own in `--dir`, with an `admin`
//! and a `readonly` client certificate next to it. Prints `BCM_ENDPOINT=…` and
//! `BCM_CA_CERT=…` as `export` lines on stdout (logs go to stderr).
//!
//! `gpufleet-lab up` runs it as the lab's `bcm` component with the lab's CA,
//! `--inventory` (the fleet's nodes as JSON, written by the lab) and
//! `--reseed-if-changed`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gpufleet_lab::bcm::{BcmConfig, BcmEmulator, BcmInventory};
use gpufleet_lab::emulator::cli::SeedArgs;

/// Runs the BCM (cmdaemon) emulator.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// State directory (state file; the CA when it has its own).
    #[arg(long, env = "BCM_EMULATOR_DIR", default_value = ".lab/bcm")]
    dir: PathBuf,
    #[command(flatten)]
    seed: SeedArgs,
    /// The CA certificate (PEM) that issues the server certificate and verifies client
    /// certificates; needs `--ca-key`.
    #[arg(long, requires = "ca_key")]
    ca_cert: Option<PathBuf>,
    /// The CA's private key (PEM).
    #[arg(long, requires = "ca_cert")]
    ca_key: Option<PathBuf>,
    /// Login user (for clients without a certificate).
    #[arg(long, default_value = "root")]
    user: String,
    /// Login password.
    #[arg(long, env = "BCM_EMULATOR_PASSWORD", default_value = "cmdaemon")]
    password: String,
    /// The length of one boot step in milliseconds (a boot takes four).
    #[arg(long, default_value_t = 1000)]
    step_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    gpufleet_lab::emulator::cli::init_logging("BCM_EMULATOR_LOG");
    let args = Args::parse();
    let inventory = args.seed.inventory(BcmInventory::from_fleet)?;
    let mut config = BcmConfig::new(&args.dir);
    config.bind = args.seed.listen;
    config.inventory = inventory;
    config.reseed_if_changed = args.seed.reseed_if_changed;
    config.ca = args.ca_cert.clone().zip(args.ca_key.clone());
    config.api.user = args.user.clone();
    config.api.password = args.password.clone();
    config.api.boot_step = Duration::from_millis(args.step_ms);
    let emu = BcmEmulator::start(config).await?;
    println!("export BCM_ENDPOINT='{}'", emu.url());
    println!("export BCM_CA_CERT='{}'", emu.ca_pem_path().display());
    tokio::signal::ctrl_c().await?;
    tracing::info!("stopping");
    emu.shutdown().await;
    Ok(())
}
