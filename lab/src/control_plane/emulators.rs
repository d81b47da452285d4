//! The API emulators (BCM, Netris) as lab components: each seeded from the fleet, kept
//! when current and healthy, else (re)started on a free port.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::STOP_GRACE;
use super::steps::{outdated, spawn_component, wait_healthy};
use crate::components::{self, Component};
use crate::error::LabError;
use crate::fleet::Fleet;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::process::{self, PidRecord};
use crate::{bcm, netris};

/// What tells the API emulators apart as lab components (see [`ensure_emulator`]).
struct EmulatorComponent<'a, I> {
    component: Component,
    /// Locates (or builds) its binary.
    binary: fn() -> Result<PathBuf, String>,
    /// What it seeds from, from the fleet.
    inventory: &'a I,
    /// Where the lab writes `inventory` for it (JSON).
    inventory_file: PathBuf,
    /// Why a running one restarts when `inventory` changed.
    inventory_changed: &'static str,
    /// Its port.
    port: fn(&mut Ports) -> &mut u16,
}

/// Makes the Netris emulator run, current and healthy ([`ensure_emulator`]). Returns
/// `ports` with the emulator's port.
pub(crate) async fn ensure_netris(
    paths: &LabPaths,
    ports: Ports,
    fleet: &Fleet,
) -> Result<Ports, LabError> {
    let emulator = EmulatorComponent {
        component: Component::Netris,
        binary: components::netris_binary,
        inventory: &netris::NetrisInventory::from_fleet(fleet),
        inventory_file: paths.netris_inventory(),
        inventory_changed: "the fleet's inventory changed",
        port: |p| &mut p.netris,
    };
    ensure_emulator(paths, ports, emulator).await
}

/// Makes the BCM emulator run, current and healthy ([`ensure_emulator`]), after issuing
/// its client certificates from the lab CA when missing. Returns `ports` with the
/// emulator's port.
pub(crate) async fn ensure_bcm(
    paths: &LabPaths,
    ports: Ports,
    fleet: &Fleet,
) -> Result<Ports, LabError> {
    let pki = Pki::new(&paths.pki());
    if pki.ensure_bcm_clients().map_err(LabError::Pki)? {
        tracing::info!(
            "issued the BCM emulator's client certificates in {}",
            pki.dir().display()
        );
    }
    let emulator = EmulatorComponent {
        component: Component::Bcm,
        binary: components::bcm_binary,
        inventory: &bcm::BcmInventory::from_fleet(fleet),
        inventory_file: paths.bcm_inventory(),
        inventory_changed: "the fleet's nodes changed",
        port: |p| &mut p.bcm,
    };
    ensure_emulator(paths, ports, emulator).await
}

/// Makes an API emulator run, current and healthy: locates (or builds) its binary,
/// writes the fleet's inventory for it, keeps a running one that is current and
/// healthy, and otherwise (re)starts it on its port (a new free one when it has none or
/// the old one is taken). Returns `ports` with the emulator's port.
async fn ensure_emulator<I: Serialize>(
    paths: &LabPaths,
    mut ports: Ports,
    emulator: EmulatorComponent<'_, I>,
) -> Result<Ports, LabError> {
    let c = emulator.component;
    let port = emulator.port;
    let spawn_error = |e: String| LabError::Spawn {
        component: c,
        source: std::io::Error::other(e),
    };
    let bin = tokio::task::spawn_blocking(emulator.binary)
        .await
        .map_err(|e| spawn_error(e.to_string()))?
        .map_err(spawn_error)?;
    let text =
        serde_json::to_string_pretty(emulator.inventory).map_err(|e| spawn_error(e.to_string()))?;
    let inventory_file = emulator.inventory_file;
    let changed = std::fs::read_to_string(&inventory_file).ok().as_deref() != Some(text.as_str());
    if changed {
        std::fs::write(&inventory_file, &text).map_err(|source| LabError::StateDir {
            path: inventory_file.clone(),
            source,
        })?;
    }
    let pki = Pki::new(&paths.pki());
    let running = PidRecord::read(&paths.pid_file(c)).filter(PidRecord::is_alive);
    if running.is_some() && c.port(&ports) != 0 {
        let why = if changed {
            Some(emulator.inventory_changed.to_owned())
        } else if let Some(why) = outdated(paths, &bin, &ports, c) {
            Some(why)
        } else {
            components::check(c, &ports, &pki).await.err()
        };
        match why {
            None => return Ok(ports),
            Some(why) => tracing::info!("{c} is running but must restart: {why}"),
        }
    }
    if running.is_some() {
        process::stop(&paths.pid_file(c), STOP_GRACE).map_err(|source| LabError::Stop {
            component: c,
            source,
        })?;
    }
    let own = c.port(&ports);
    let others: Vec<u16> = ports.all().into_iter().filter(|p| *p != own).collect();
    let bindable = |p: u16| {
        p != 0
            && !others.contains(&p)
            && std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, p)).is_ok()
    };
    let mut tries = 0;
    while !bindable(c.port(&ports)) {
        tries += 1;
        if tries > 20 {
            return Err(spawn_error("no free loopback port for it".into()));
        }
        let mut fresh = Ports::allocate().map_err(LabError::Ports)?;
        *port(&mut ports) = *port(&mut fresh);
    }
    let record = spawn_component(&bin, c, paths, &ports)?;
    if let Err(e) = wait_healthy(c, record, paths, &ports, &pki, Duration::from_secs(60)).await {
        let _ = process::stop(&paths.pid_file(c), STOP_GRACE);
        return Err(e);
    }
    Ok(ports)
}
