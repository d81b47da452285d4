//! An NVIDIA Base Command Manager (cmdaemon) emulator: the JSON API (`POST /json`) over
//! HTTPS with client-certificate profiles and cookie login, devices, categories and
//! software images with BCM's commit and validation shapes, power operations and an
//! asynchronous status clock, install faults, per-node system information (GPUs and
//! block devices), tracking of the tenant data left on each disk (a DGX-like node has an
//! OS disk and four NVMe data disks, all in its disk setup), a journal of calls, and
//! state that survives a restart. Its nodes come from the lab's fleet.
//!
//! # Layers
//!
//! - [`dispatch`]: the API as a pure function `handle(store, config, request) -> outcome`;
//!   commits in [`entities`], power and the status clock in [`boot`].
//! - [`admin`]: the `/_admin/` plane (healthz, reset, state, leaks, journal, stats,
//!   fault), also pure.
//! - [`store`]: [`BcmStore`], the emulators' shared [`crate::emulator::Store`] (in
//!   memory, all-or-nothing transactions, optional write-through to `bcm-state.json`)
//!   with login tokens, the journal and call counts; [`model`]: what it stores; [`inventory`]: the
//!   hardware, from the fleet.
//! - [`tls`]: client certificates verified against the CA the emulator is given; the
//!   transport around [`Controller`] is the emulators' shared one ([`crate::emulator`]).
//!
//! # Starting it
//!
//! ```no_run
//! use gpufleet_lab::bcm::{BcmConfig, BcmEmulator, BcmInventory};
//!
//! # async fn demo(fleet: &gpufleet_lab::Fleet) -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = BcmConfig::new("/tmp/lab/bcm");
//! config.inventory = BcmInventory::from_fleet(fleet);
//! let bcm = BcmEmulator::start(config).await?; // a CA of its own in /tmp/lab/bcm
//! println!("BCM at {} (trust {})", bcm.url(), bcm.ca_pem_path().display());
//! bcm.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! For tests without a network, [`Controller::in_memory`] gives the same API as a
//! function call.

pub mod admin;
pub mod boot;
pub mod dispatch;
pub mod entities;
pub mod inventory;
pub mod model;
pub mod store;
pub mod tls;
pub mod uuid;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

pub use self::dispatch::{ApiConfig, Outcome, Profile, Request, Response};
pub use self::inventory::BcmInventory;
pub use self::store::{BcmStore, StoreError};
pub use self::tls::TlsError;
use crate::emulator::start::{create_state_dir, serve};
pub use crate::emulator::{Clock, ManualClock, SystemClock};
use crate::emulator::{Running, Service, StartError, Store as _};

/// The API and the admin plane over one store: what the HTTPS server serves, callable
/// in-process. Cheap to clone (the store is shared).
#[derive(Debug, Clone)]
pub struct Controller {
    store: Arc<BcmStore>,
    api: ApiConfig,
}

impl Controller {
    /// A controller over `store`.
    #[must_use]
    pub fn new(store: Arc<BcmStore>, api: ApiConfig) -> Self {
        Self { store, api }
    }

    /// A controller with an in-memory store seeded with `inventory`, on `clock`.
    #[must_use]
    pub fn in_memory(inventory: BcmInventory, clock: Arc<dyn Clock>, api: ApiConfig) -> Self {
        Self::new(Arc::new(BcmStore::in_memory(inventory, clock)), api)
    }

    /// Handles one request: `/_admin/…` goes to [`admin::handle`], everything else to
    /// [`dispatch::handle`].
    #[must_use]
    pub fn handle(&self, req: &Request) -> Outcome {
        if crate::emulator::admin::is_admin_path(&req.path) {
            Outcome::Reply(admin::handle(&self.store, req))
        } else {
            dispatch::handle(&self.store, &self.api, req)
        }
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<BcmStore> {
        &self.store
    }

    /// The API settings.
    #[must_use]
    pub fn api(&self) -> &ApiConfig {
        &self.api
    }
}

/// How the shared HTTPS transport reaches the controller.
impl Service for Controller {
    const BODY_LIMIT: usize = 16 << 20;

    fn answer(&self, request: Request) -> Outcome {
        // BCM has no query parameters; the certificate's name picks the profile.
        self.handle(&request)
    }

    fn internal_error() -> Response {
        Response::error(500, "internal error")
    }
}

/// How to start the emulator.
#[derive(Debug, Clone)]
pub struct BcmConfig {
    /// Where to listen; default `127.0.0.1:0` (a free port; see [`RunningBcm::url`]).
    pub bind: SocketAddr,
    /// The state directory (`bcm-state.json`; the CA when it has its own). Created if
    /// missing. A state file there is loaded (and `inventory` ignored).
    pub state_dir: PathBuf,
    /// The CA (certificate, key) that issues the server certificate and verifies
    /// client certificates. `None`: a CA of its own in `state_dir`, with `admin` and
    /// `readonly` client certificates ([`tls::ensure_own_ca`]).
    pub ca: Option<(PathBuf, PathBuf)>,
    /// Login credentials and the boot step.
    pub api: ApiConfig,
    /// The hardware to seed a new state with; default: the lab's default fleet.
    pub inventory: BcmInventory,
    /// Extra DNS names or IPs for the server certificate (loopback is always in it).
    pub extra_names: Vec<String>,
    /// The clock (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// Discard a saved state whose inventory differs from `inventory` and seed afresh
    /// (default `false`: a saved state wins).
    pub reseed_if_changed: bool,
}

impl BcmConfig {
    /// Defaults with state in `state_dir`: `127.0.0.1:0`, its own CA, `root` /
    /// `cmdaemon`, 1 s boot steps, the default fleet.
    #[must_use]
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            state_dir: state_dir.into(),
            ca: None,
            api: ApiConfig::default(),
            inventory: BcmInventory::default_lab(),
            extra_names: Vec::new(),
            clock: Arc::new(SystemClock),
            reseed_if_changed: false,
        }
    }
}

/// Why the emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum BcmError {
    /// The state directory or the listener failed.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The inventory is inconsistent.
    #[error("failed to seed: {0}")]
    Inventory(#[from] inventory::InventoryError),
    /// The state file could not be loaded or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The certificates could not be made or loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Starts emulators.
#[derive(Debug, Clone, Copy)]
pub struct BcmEmulator;

impl BcmEmulator {
    /// Loads (or seeds) the state in `config.state_dir`, sets up TLS and serves on
    /// `config.bind` in a task of the current tokio runtime.
    ///
    /// # Errors
    /// When the state directory, state file, certificates or listener fail.
    pub async fn start(config: BcmConfig) -> Result<RunningBcm, BcmError> {
        let dir = config.state_dir.clone();
        create_state_dir(&dir)?;
        config.inventory.validate()?;
        let store = BcmStore::open(&dir, config.inventory.clone(), config.clock.clone())?;
        if store.snapshot().inventory != config.inventory {
            if config.reseed_if_changed {
                tracing::info!("the inventory changed; seeding afresh");
                store.replace(model::Db::seeded(config.inventory.clone()))?;
            } else {
                tracing::warn!(
                    "{} was seeded from another inventory than the one configured; keeping it",
                    dir.join(store::STATE_FILE).display()
                );
            }
        }
        let (ca_cert, ca_key) = match &config.ca {
            Some(pair) => pair.clone(),
            None => tls::ensure_own_ca(&dir)?,
        };
        let server_config = tls::server_config(&ca_cert, &ca_key, &config.extra_names)?;
        let controller = Controller::new(Arc::new(store), config.api.clone());
        Ok(serve("bcm", config.bind, server_config, controller, ca_cert, dir).await?)
    }
}

/// A running BCM emulator.
pub type RunningBcm = Running<Controller>;
