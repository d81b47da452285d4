//! The host loopback port each virtual cluster's API is forwarded to, kept in
//! `<dir>/ports.json` by `<namespace>/<name>`, so a restarted or replaced pod exports the
//! same server as before (Secret `vc-<name>`, the provider's `endpoint`).

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use tokio::net::TcpListener;

fn load(file: &Path) -> BTreeMap<String, u16> {
    std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// A listener on the port of `release`: the recorded one when it is free (waiting a
/// moment for a stopped forwarder to let go of it), else a new one, which is recorded.
///
/// # Errors
/// When no loopback port can be bound or the record cannot be written.
pub async fn listener(dir: &Path, release: &str) -> io::Result<TcpListener> {
    let file = dir.join("ports.json");
    let mut ports = load(&file);
    if let Some(port) = ports.get(release).copied() {
        for _ in 0..20 {
            if let Ok(l) = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await {
                return Ok(l);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::info!("{release}: port {port} is taken; moving its API to another");
    }
    let l = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
    ports.insert(release.to_owned(), l.local_addr()?.port());
    let text = serde_json::to_vec_pretty(&ports).map_err(io::Error::other)?;
    std::fs::write(&file, text)?;
    Ok(l)
}
