//! The steps of starting an emulator that do not depend on which one it is: its state
//! directory, its listener, the server task, and the handle ([`Running`]) that stops it.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::server::{self, Service};

/// Why the state directory or the listener failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The state directory could not be created.
    #[error("failed to create the state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The listener could not be bound.
    #[error("failed to listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Creates the state directory when missing.
pub(crate) fn create_state_dir(dir: &Path) -> Result<(), StartError> {
    std::fs::create_dir_all(dir).map_err(|source| StartError::StateDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// A server task answering HTTPS on a bound address. Dropping it stops it too (without
/// waiting).
#[derive(Debug)]
pub(crate) struct RunningServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl RunningServer {
    /// Listens on `bind` and serves `service` with `tls` in a task of the current tokio
    /// runtime.
    pub(crate) async fn start<S: Service>(
        bind: SocketAddr,
        tls: Arc<ServerConfig>,
        service: S,
    ) -> Result<Self, StartError> {
        let bind_error = |source| StartError::Bind { addr: bind, source };
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(server::serve(
            listener,
            tokio_rustls::TlsAcceptor::from(tls),
            server::router(service),
            stopped,
        ));
        Ok(Self {
            addr,
            stop,
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `https://127.0.0.1:<port>` (a wildcard bind is reported as
    /// loopback).
    pub(crate) fn url(&self) -> String {
        match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                format!("https://127.0.0.1:{}", self.addr.port())
            }
            IpAddr::V6(ip) if ip.is_unspecified() => format!("https://[::1]:{}", self.addr.port()),
            IpAddr::V4(ip) => format!("https://{ip}:{}", self.addr.port()),
            IpAddr::V6(ip) => format!("https://[{ip}]:{}", self.addr.port()),
        }
    }

    /// Stops accepting, closes every connection and waits for the server task.
    pub(crate) async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A running emulator: its server, its CA and state, and the controller it serves.
/// Dropping it stops it too (without waiting).
#[derive(Debug)]
pub struct Running<C> {
    server: RunningServer,
    ca_path: PathBuf,
    state_dir: PathBuf,
    controller: C,
}

impl<C> Running<C> {
    /// The handle of `server`, which serves `controller` with the CA at `ca_path`.
    pub(crate) fn new(
        server: RunningServer,
        ca_path: PathBuf,
        state_dir: PathBuf,
        controller: C,
    ) -> Self {
        Self {
            server,
            ca_path,
            state_dir,
            controller,
        }
    }

    /// The base URL, `https://127.0.0.1:<port>` (a wildcard bind is reported as
    /// loopback).
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The address it listens on.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The CA certificate clients should trust (PEM file).
    #[must_use]
    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_path
    }

    /// The state directory.
    #[must_use]
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The controller it serves, for in-process access to the store and admin plane.
    #[must_use]
    pub fn controller(&self) -> &C {
        &self.controller
    }

    /// Stops accepting, closes every connection and waits for the server task.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}
