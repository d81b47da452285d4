//! A Netris-style network controller emulator: the controller's REST API (sites,
//! tenants, VPCs, IPAM, V-Nets, inventory) over HTTPS with cookie sessions, with the
//! real controller's rules and quirks, asynchronous V-Net provisioning, fault injection
//! and state that survives a restart. Its hardware inventory comes from the lab's fleet.
//!
//! # Layers
//!
//! - [`dispatch`]: the API as a pure function, `handle(store, config, request) -> outcome`;
//!   rules in [`ipam`], [`vnet`] and `objects`, JSON shapes in `wire`.
//! - [`admin`]: the `/_admin/` plane (healthz, reset, seed, state, fault), also pure; the
//!   controller itself answers `/_admin/requests`, the `/api` requests it received per route.
//! - [`store`]: the [`store::NetrisStore`] trait, the emulators' shared
//!   [`crate::emulator::Store`] with login sessions, and [`store::MemStore`] (in memory,
//!   copies out, all-or-nothing transactions, optional write-through to
//!   `netris-state.json`).
//! - [`model`]: the stored objects; [`inventory`]: the hardware, from the fleet.
//! - `tls`: a CA of the emulator's own; the transport around [`Controller`] is the
//!   emulators' shared one ([`crate::emulator`]).
//!
//! # Starting it
//!
//! ```no_run
//! use gpufleet_lab::netris::{NetrisConfig, NetrisEmulator, NetrisInventory};
//!
//! # async fn demo(fleet: &gpufleet_lab::Fleet) -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = NetrisConfig::new("/tmp/lab/netris");
//! config.inventory = NetrisInventory::from_fleet(fleet);
//! let netris = NetrisEmulator::start(config).await?;
//! println!("NETRIS_ADDRESS={} (trust {})", netris.url(), netris.ca_pem_path().display());
//! // … clients log in with netris / newNet0ps …
//! netris.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! For tests without a network, [`Controller::in_memory`] gives the same API as a
//! function call.

pub mod admin;
mod body;
pub mod dispatch;
pub mod inventory;
pub mod ipam;
pub mod model;
mod objects;
pub mod prefix;
pub mod store;
mod tls;
pub mod vnet;
mod wire;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

pub use self::dispatch::{ApiConfig, ApiError, Outcome, Request, Response};
pub use self::inventory::NetrisInventory;
pub use self::store::{Clock, ManualClock, MemStore, NetrisStore, StoreError, SystemClock};
pub use self::tls::{CA_CERT_FILE, CA_KEY_FILE, TlsError};
use crate::emulator::start::{create_state_dir, serve};
use crate::emulator::{Running, Service, StartError, Store as _};

/// The API and the admin plane over one store: what the HTTPS server serves, callable
/// in-process. Cheap to clone (the store is shared).
#[derive(Debug, Clone)]
pub struct Controller {
    store: Arc<dyn NetrisStore>,
    api: ApiConfig,
    requests: Arc<RequestCounts>,
}

impl Controller {
    /// A controller over `store`.
    #[must_use]
    pub fn new(store: Arc<dyn NetrisStore>, api: ApiConfig) -> Self {
        Self {
            store,
            api,
            requests: Arc::default(),
        }
    }

    /// A controller with an in-memory store seeded with `inventory`, on `clock`.
    #[must_use]
    pub fn in_memory(inventory: NetrisInventory, clock: Arc<dyn Clock>, api: ApiConfig) -> Self {
        Self::new(Arc::new(MemStore::in_memory(inventory, clock)), api)
    }

    /// Handles one request: `/_admin/…` goes to [`admin::handle`], everything else to
    /// [`dispatch::handle`].
    #[must_use]
    pub fn handle(&self, req: &Request) -> Outcome {
        if crate::emulator::admin::is_admin_path(&req.path) {
            if let Some(r) = self.requests.admin(req) {
                return Outcome::Reply(r);
            }
            Outcome::Reply(admin::handle(self.store.as_ref(), &self.api, req))
        } else {
            self.requests.count(req);
            dispatch::handle(self.store.as_ref(), &self.api, req)
        }
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn NetrisStore> {
        &self.store
    }

    /// The API settings.
    #[must_use]
    pub fn api(&self) -> &ApiConfig {
        &self.api
    }
}

/// The `/api` requests received, by `METHOD /route` with ids as `{id}`, for benchmarks that
/// report calls per resource. `GET /_admin/requests` reads them, `DELETE` starts again.
#[derive(Debug, Default)]
struct RequestCounts(Mutex<BTreeMap<String, u64>>);

impl RequestCounts {
    fn count(&self, req: &Request) {
        let path = req.path.split('?').next().unwrap_or_default();
        let route: Vec<&str> = path
            .split('/')
            .map(|seg| {
                if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                    "{id}"
                } else {
                    seg
                }
            })
            .collect();
        let key = format!("{} {}", req.method, route.join("/"));
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.entry(key).or_default() += 1;
    }

    fn admin(&self, req: &Request) -> Option<Response> {
        if req.path.trim_end_matches('/') != "/_admin/requests" {
            return None;
        }
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match req.method.as_str() {
            "GET" => Some(Response::new(200, serde_json::json!(*counts))),
            "DELETE" => {
                counts.clear();
                Some(Response::new(200, serde_json::json!({})))
            }
            _ => None,
        }
    }
}

/// How the shared HTTPS transport reaches the controller.
impl Service for Controller {
    /// A seed of a very large fleet fits.
    const BODY_LIMIT: usize = 64 << 20;

    fn answer(&self, request: Request) -> Outcome {
        // Netris asks for no client certificate: sessions are cookies.
        self.handle(&request)
    }

    fn internal_error() -> Response {
        ApiError::internal("internal error").response()
    }
}

/// How to start the emulator.
#[derive(Debug, Clone)]
pub struct NetrisConfig {
    /// Where to listen; default `127.0.0.1:0` (a free port; see [`RunningEmulator::url`]).
    pub bind: SocketAddr,
    /// The state directory: `netris-state.json`, `netris-ca.pem`, `netris-ca.key`.
    /// Created if missing. A state file there is loaded (and `inventory` ignored).
    pub state_dir: PathBuf,
    /// Also write the CA certificate here (it is always in `state_dir` too).
    pub ca_pem_path: Option<PathBuf>,
    /// Credentials, session TTL, provisioning delay.
    pub api: ApiConfig,
    /// The hardware to seed a new state with; default: the lab's default fleet.
    pub inventory: NetrisInventory,
    /// Extra DNS names or IPs for the server certificate (loopback is always in it).
    pub extra_names: Vec<String>,
    /// The clock (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// Discard a saved state and seed afresh from `inventory` (default `false`: a saved
    /// state wins, and a warning is logged when its inventory differs from `inventory`).
    pub reset_state: bool,
}

impl NetrisConfig {
    /// Defaults, with state in `state_dir`: `127.0.0.1:0`, `netris` / `newNet0ps`,
    /// 30-minute sessions, 1 s provisioning, the default fleet's inventory.
    #[must_use]
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            state_dir: state_dir.into(),
            ca_pem_path: None,
            api: ApiConfig::default(),
            inventory: NetrisInventory::default_lab(),
            extra_names: Vec::new(),
            clock: Arc::new(SystemClock),
            reset_state: false,
        }
    }
}

/// Why the emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum NetrisError {
    /// The state directory or the listener failed.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The inventory in the config is inconsistent.
    #[error("failed to seed: {0}")]
    Inventory(#[from] inventory::InventoryError),
    /// The state file could not be loaded or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The CA or server certificate could not be made or loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Starts emulators.
#[derive(Debug, Clone, Copy)]
pub struct NetrisEmulator;

impl NetrisEmulator {
    /// Loads (or seeds) the state in `config.state_dir`, sets up TLS and starts serving
    /// on `config.bind`, in a task of the current tokio runtime.
    ///
    /// # Errors
    /// When the state directory, state file, certificates or listener fail.
    pub async fn start(config: NetrisConfig) -> Result<RunningEmulator, NetrisError> {
        let dir = config.state_dir.clone();
        create_state_dir(&dir)?;
        config.inventory.validate()?;
        let state_file = dir.join(store::STATE_FILE);
        if config.reset_state && state_file.exists() {
            std::fs::remove_file(&state_file).map_err(|source| StoreError::Write {
                path: state_file.clone(),
                source,
            })?;
        }
        let store = MemStore::open(&dir, config.inventory.clone(), config.clock.clone())?;
        if store.snapshot().inventory != config.inventory {
            tracing::warn!(
                "{} was seeded from another inventory than the one configured; keeping the saved \
                 state (set reset_state or POST /_admin/seed to start over)",
                state_file.display()
            );
        }
        let tls = tls::setup(&dir, &config.extra_names)?;
        let ca_path = match &config.ca_pem_path {
            Some(p) => {
                tls::write_file(p, &tls.ca_pem, false)?;
                p.clone()
            }
            None => tls.ca_path.clone(),
        };
        let controller = Controller::new(Arc::new(store), config.api.clone());
        Ok(serve(
            "netris",
            config.bind,
            tls.server_config,
            controller,
            ca_path,
            dir,
        )
        .await?)
    }
}

/// A running Netris emulator.
pub type RunningEmulator = Running<Controller>;

impl RunningEmulator {
    /// Sets the `down` fault (same as `POST /_admin/fault {"down": …}`).
    pub fn set_down(&self, down: bool) {
        self.controller()
            .store()
            .update_faults(&mut |f| f.down = down);
    }
}
