//! The two TCP paths between a sandbox's network namespace and the host's: the host API
//! server made reachable inside (as the `kubernetes` Service would be), and the virtual
//! API server's port made reachable on a host loopback port (as `vcluster connect`'s
//! port-forward would). Each runs as a task until it is dropped.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::netns::NetNs;

/// A running forwarder; dropping it stops accepting (open connections end with their
/// peers).
#[derive(Debug)]
pub struct Forwarder(JoinHandle<()>);

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

async fn pipe(mut a: TcpStream, mut b: TcpStream) {
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

/// Inside `ns`, `127.0.0.1:<port>` leads to the host's `127.0.0.1:<port>` (the host API
/// server).
///
/// # Errors
/// When the port cannot be bound inside the namespace.
pub fn host_into_pod(ns: &NetNs, port: u16) -> std::io::Result<Forwarder> {
    let listener = ns.listen(loopback(port))?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    Ok(Forwarder(tokio::spawn(async move {
        loop {
            let Ok((inside, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            tokio::spawn(async move {
                // Opened on a runtime thread, so in the host's namespace.
                match TcpStream::connect(loopback(port)).await {
                    Ok(outside) => pipe(inside, outside).await,
                    Err(e) => tracing::debug!("forwarding to the host API server: {e}"),
                }
            });
        }
    })))
}

/// The host's `listener` leads to `127.0.0.1:<pod_port>` inside `ns`.
#[must_use]
pub fn pod_to_host(ns: NetNs, listener: TcpListener, pod_port: u16) -> Forwarder {
    Forwarder(tokio::spawn(async move {
        loop {
            let Ok((outside, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            let ns = ns.clone();
            tokio::spawn(async move {
                let inside = tokio::task::spawn_blocking(move || {
                    let s = ns.connect(loopback(pod_port))?;
                    s.set_nonblocking(true)?;
                    Ok::<_, std::io::Error>(s)
                })
                .await;
                match inside {
                    Ok(Ok(s)) => match TcpStream::from_std(s) {
                        Ok(inside) => pipe(outside, inside).await,
                        Err(e) => tracing::debug!("forwarding into the pod: {e}"),
                    },
                    Ok(Err(e)) => tracing::debug!("forwarding into the pod: {e}"),
                    Err(e) => tracing::debug!("forwarding into the pod: {e}"),
                }
            });
        }
    }))
}

/// The two forwarders of the sandbox whose `unshare` is `pid`: the host API server at
/// `127.0.0.1:<api_port>` inside, and the host's `listener` to `127.0.0.1:<inner_port>`
/// inside. Its network namespace exists as soon as `unshare` has made it, which may take a
/// moment after the spawn.
///
/// # Errors
/// When the sandbox does not start, or the API port cannot be bound inside it.
pub async fn sandbox(
    pid: i32,
    api_port: u16,
    listener: TcpListener,
    inner_port: u16,
) -> Result<Vec<Forwarder>, String> {
    let ns = NetNs::of_pid(pid);
    let mut last = String::new();
    for _ in 0..50 {
        if super::sandbox::first_process(pid).is_some() {
            let ns2 = ns.clone();
            match tokio::task::spawn_blocking(move || host_into_pod(&ns2, api_port)).await {
                Ok(Ok(into)) => return Ok(vec![into, pod_to_host(ns, listener, inner_port)]),
                Ok(Err(e)) => last = e.to_string(),
                Err(e) => last = e.to_string(),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    if last.is_empty() {
        last = "its sandbox did not start".into();
    }
    Err(format!(
        "failed to forward the host API server into its network namespace: {last}"
    ))
}
