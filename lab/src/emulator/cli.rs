//! What the emulator binaries (`bcm-emulator`, `netris-emulator`) set up alike.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use tracing_subscriber::EnvFilter;

use crate::fleet::{Fleet, FleetSpec};

/// The options both emulator binaries take: where to listen and what hardware to seed with.
#[derive(Debug, Clone, clap::Args)]
pub struct SeedArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Fleet spec (TOML) to take the inventory from; default: the lab's default fleet.
    #[arg(long)]
    pub fleet: Option<PathBuf>,
    /// Replicate racks until the fleet has at least this many nodes.
    #[arg(long)]
    pub scale: Option<usize>,
    /// Inventory (the emulator's inventory JSON, as `POST /_admin/seed` takes) to seed
    /// with; overrides `--fleet`.
    #[arg(long)]
    pub inventory: Option<PathBuf>,
    /// When the saved state was seeded from another inventory, start over from this one
    /// (instead of keeping the saved state).
    #[arg(long)]
    pub reseed_if_changed: bool,
}

impl SeedArgs {
    /// The inventory to seed with: `--inventory`, else the emulator's view (`from_fleet`)
    /// of `--fleet` (or the default fleet) scaled by `--scale`.
    ///
    /// # Errors
    /// When a file cannot be read or parsed, or the fleet is inconsistent.
    pub fn inventory<I: DeserializeOwned>(
        &self,
        from_fleet: impl FnOnce(&Fleet) -> I,
    ) -> Result<I, Box<dyn std::error::Error>> {
        if let Some(path) = &self.inventory {
            return Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?);
        }
        let spec = match &self.fleet {
            Some(path) => FleetSpec::from_file(path)?,
            None => FleetSpec::default_fleet(),
        };
        Ok(from_fleet(&Fleet::new(spec, self.scale)?))
    }
}

/// Logs to stderr (stdout carries the `export` lines), at the level `$env_var` says
/// (default `info`), in colour only on a terminal.
pub fn init_logging(env_var: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env(env_var).unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
