//! `netris-emulator`: runs the lab's Netris controller emulator on its own, until
//! interrupted.
//!
//! ```sh
//! cargo run -p gpufleet-lab --bin netris-emulator -- --dir .lab/netris
//! ```
//!
//! Prints `NETRIS_ADDRESS=…`, `NETRIS_LOGIN=…`, `NETRIS_PASSWORD=…` and
//! `NETRIS_CA_CERT=…` as `export` lines on stdout (logs go to stderr), so
//! `eval "$(netris-emulator … &)"`-style wrappers and humans alike can use it.
//!
//! `gpufleet-lab up` runs it as the lab's `netris` component with `--inventory` (the
//! fleet's inventory as JSON, written by the lab), `--reseed-if-changed` and one
//! `--tenant` per tenant the lab provides.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gpufleet_lab::emulator::cli::SeedArgs;
use gpufleet_lab::netris::model::{Db, Kind, Tenant};
use gpufleet_lab::netris::{NetrisConfig, NetrisEmulator, NetrisInventory, NetrisStore};

/// Runs the Netris controller emulator.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// State directory (state file and CA).
    #[arg(long, env = "NETRIS_EMULATOR_DIR", default_value = ".lab/netris")]
    dir: PathBuf,
    #[command(flatten)]
    seed: SeedArgs,
    /// A tenant to create at start when missing (repeatable).
    #[arg(long = "tenant")]
    tenants: Vec<String>,
    /// Login user.
    #[arg(long, default_value = "netris")]
    user: String,
    /// Login password.
    #[arg(long, default_value = "newNet0ps")]
    password: String,
    /// How long a V-Net stays provisioning, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    provisioning_delay_ms: u64,
    /// How long a session lasts, in seconds.
    #[arg(long, default_value_t = 1800)]
    session_ttl_s: u64,
    /// Also write the CA certificate here.
    #[arg(long)]
    ca_out: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    gpufleet_lab::emulator::cli::init_logging("NETRIS_EMULATOR_LOG");
    let args = Args::parse();
    let inventory = args.seed.inventory(NetrisInventory::from_fleet)?;
    let mut config = NetrisConfig::new(&args.dir);
    config.bind = args.seed.listen;
    config.inventory = inventory;
    config.api.user = args.user.clone();
    config.api.password = args.password.clone();
    config.api.provisioning_delay = Duration::from_millis(args.provisioning_delay_ms);
    config.api.session_ttl = Duration::from_secs(args.session_ttl_s);
    config.ca_pem_path = args.ca_out.clone();
    let inventory = config.inventory.clone();
    let emu = NetrisEmulator::start(config).await?;
    let store = emu.controller().store();
    if args.seed.reseed_if_changed && store.snapshot().inventory != inventory {
        tracing::info!("the inventory changed; seeding afresh");
        store.replace(Db::seeded(inventory, store.now_ms()))?;
    }
    ensure_tenants(store.as_ref(), &args.tenants)?;
    println!("export NETRIS_ADDRESS='{}'", emu.url());
    println!("export NETRIS_LOGIN='{}'", args.user);
    println!("export NETRIS_PASSWORD='{}'", args.password);
    println!("export NETRIS_CA_CERT='{}'", emu.ca_pem_path().display());
    tokio::signal::ctrl_c().await?;
    tracing::info!("stopping");
    emu.shutdown().await;
    Ok(())
}

/// Creates the tenants of `names` that do not exist yet.
fn ensure_tenants(
    store: &dyn NetrisStore,
    names: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    store
        .transact(&mut |db, _| {
            for name in names {
                if db.tenants.values().any(|t| &t.name == name) {
                    continue;
                }
                let id = db.next_id(Kind::Tenant);
                db.tenants.insert(
                    id,
                    Tenant {
                        id,
                        name: name.clone(),
                        description: "seeded by gpufleet-lab".into(),
                    },
                );
                tracing::info!("created tenant {name} (id {id})");
            }
            Ok(serde_json::Value::Null)
        })
        .map_err(|e| e.message)?;
    Ok(())
}
