//! Starting a lab component run from the `vcluster-kubelet` binary: the vCluster kubelet
//! itself, and the host programs it runs in a network namespace of their own
//! ([`crate::vcluster::isolated`]), the MPI Operator and Karpenter, which listen on ports they
//! fix on every interface. Each gets a loopback port of the lab's for its health check, and
//! is kept when running, current and healthy, restarted otherwise (on a new port when its old
//! one is taken).

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::components::{self, Component};
use crate::error::LabError;
use crate::paths::LabPaths;
use crate::pki::Pki;
use crate::ports::Ports;
use crate::process::{self, PidRecord};

/// Makes component `c` run, current and healthy; `port` is its health port's slot in
/// [`Ports`], allocated when empty or taken. `restart` says why a running one must start
/// again although its command line is the same (say, a file it reads at start changed).
/// Returns `ports` with its health port.
///
/// # Errors
/// When its supervisor cannot be found, no loopback port is free, or it does not become
/// healthy within a minute.
pub(crate) async fn ensure(
    paths: &LabPaths,
    mut ports: Ports,
    c: Component,
    port: fn(&mut Ports) -> &mut u16,
    restart: Option<String>,
) -> Result<Ports, LabError> {
    let spawn_error = |e: String| LabError::Spawn {
        component: c,
        source: std::io::Error::other(e),
    };
    let bin = tokio::task::spawn_blocking(components::vcluster_binary)
        .await
        .map_err(|e| spawn_error(e.to_string()))?
        .map_err(spawn_error)?;
    let pki = Pki::new(&paths.pki());
    let running = PidRecord::read(&paths.pid_file(c)).filter(PidRecord::is_alive);
    if running.is_some() && *port(&mut ports) != 0 {
        let why = match restart
            .or_else(|| crate::control_plane::steps::outdated(paths, &bin, &ports, c))
        {
            Some(why) => Some(why),
            None => components::check(c, &ports, &pki).await.err(),
        };
        match why {
            None => return Ok(ports),
            Some(why) => tracing::info!("{c} is running but must restart: {why}"),
        }
    }
    if running.is_some() {
        process::stop(&paths.pid_file(c), crate::control_plane::STOP_GRACE).map_err(|source| {
            LabError::Stop {
                component: c,
                source,
            }
        })?;
    }
    let mut tries = 0;
    loop {
        let mine = *port(&mut ports);
        let others = ports.all().into_iter().filter(|p| *p == mine).count() > 1;
        let free = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, mine)).is_ok();
        if mine != 0 && !others && free {
            break;
        }
        tries += 1;
        if tries > 20 {
            return Err(spawn_error("no free loopback port for it".into()));
        }
        let mut fresh = Ports::allocate().map_err(LabError::Ports)?;
        *port(&mut ports) = *port(&mut fresh);
    }
    let record = crate::control_plane::steps::spawn_component(&bin, c, paths, &ports)?;
    let healthy = crate::control_plane::steps::wait_healthy(
        c,
        record,
        paths,
        &ports,
        &pki,
        Duration::from_secs(60),
    )
    .await;
    if let Err(e) = healthy {
        let _ = process::stop(&paths.pid_file(c), crate::control_plane::STOP_GRACE);
        return Err(e);
    }
    Ok(ports)
}
