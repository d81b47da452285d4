//! Where the plugin listens: a unix socket in a private temporary directory, or a loopback
//! TCP port within Terraform's range when unix sockets are unavailable (always on Windows,
//! as go-plugin does there); and the stream of accepted (optionally TLS-wrapped) connections
//! tonic serves.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use rustls::ServerConfig;
#[cfg(unix)]
use std::path::{Path, PathBuf};

#[cfg(unix)]
use tokio::net::{UnixListener, UnixStream};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

/// A bound listening socket.
#[derive(Debug)]
pub enum Bound {
    /// A unix socket; its directory is removed when the directory guard is dropped (see
    /// [`Bound::take_dir`]).
    #[cfg(unix)]
    Unix {
        /// The listener.
        listener: UnixListener,
        /// The socket path, as announced in the handshake.
        path: PathBuf,
        /// The private directory, until [`Bound::take_dir`] takes it.
        dir: Option<tempfile::TempDir>,
    },
    /// A loopback TCP port.
    Tcp {
        /// The listener.
        listener: TcpListener,
        /// The address, as announced in the handshake.
        addr: SocketAddr,
    },
}

impl Bound {
    /// `unix` or `tcp`, as go-plugin names them.
    pub fn network(&self) -> &'static str {
        match self {
            #[cfg(unix)]
            Bound::Unix { .. } => "unix",
            Bound::Tcp { .. } => "tcp",
        }
    }

    /// Takes the guard of the socket's private directory. The server task owns the listener,
    /// and the runtime is shut down without waiting for its tasks, so whoever serves keeps
    /// the guard in its own scope: the directory is then removed when serving ends.
    pub fn take_dir(&mut self) -> Option<tempfile::TempDir> {
        match self {
            #[cfg(unix)]
            Bound::Unix { dir, .. } => dir.take(),
            Bound::Tcp { .. } => None,
        }
    }

    /// The address string for the handshake line and reattach configuration.
    pub fn address(&self) -> String {
        match self {
            #[cfg(unix)]
            Bound::Unix { path, .. } => path.display().to_string(),
            Bound::Tcp { addr, .. } => addr.to_string(),
        }
    }
}

/// Binds a unix socket under `PLUGIN_UNIX_SOCKET_DIR` or the temp dir, falling back to TCP on
/// 127.0.0.1 within `PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT`.
pub fn bind(env: &dyn Fn(&str) -> Option<String>) -> io::Result<Bound> {
    #[cfg(unix)]
    {
        let dir = env("PLUGIN_UNIX_SOCKET_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        match bind_unix(&dir) {
            Ok(b) => return Ok(b),
            Err(e) => tracing::warn!(error = %e, "unix socket unavailable, falling back to tcp"),
        }
    }
    let min = port(env, "PLUGIN_MIN_PORT", 10000);
    let max = port(env, "PLUGIN_MAX_PORT", 25000);
    bind_tcp(min, max)
}

fn port(env: &dyn Fn(&str) -> Option<String>, name: &str, default: u16) -> u16 {
    env(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[cfg(unix)]
fn bind_unix(dir: &Path) -> io::Result<Bound> {
    // A private directory keeps the socket out of reach of other users' processes.
    let tmp = tempfile::Builder::new().prefix("plugin").tempdir_in(dir)?;
    let path = tmp.path().join("gpufleet.sock");
    let listener = UnixListener::bind(&path)?;
    Ok(Bound::Unix {
        listener,
        path,
        dir: Some(tmp),
    })
}

fn bind_tcp(min: u16, max: u16) -> io::Result<Bound> {
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "no free port in range");
    for p in min..=max {
        let std_listener = match std::net::TcpListener::bind(("127.0.0.1", p)) {
            Ok(l) => l,
            Err(e) => {
                last = e;
                continue;
            }
        };
        std_listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(std_listener)?;
        let addr = listener.local_addr()?;
        return Ok(Bound::Tcp { listener, addr });
    }
    Err(last)
}

/// One accepted connection, with or without TLS.
#[derive(Debug)]
pub enum Conn {
    /// Plain unix socket (debug mode).
    #[cfg(unix)]
    Unix(UnixStream),
    /// Plain TCP (debug mode).
    Tcp(TcpStream),
    /// Mutual TLS over a unix socket.
    #[cfg(unix)]
    UnixTls(Box<TlsStream<UnixStream>>),
    /// Mutual TLS over TCP.
    TcpTls(Box<TlsStream<TcpStream>>),
}

impl Connected for Conn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

macro_rules! delegate {
    ($self:ident, $inner:ident => $e:expr) => {
        match $self.get_mut() {
            #[cfg(unix)]
            Conn::Unix($inner) => {
                let $inner = Pin::new($inner);
                $e
            }
            Conn::Tcp($inner) => {
                let $inner = Pin::new($inner);
                $e
            }
            #[cfg(unix)]
            Conn::UnixTls($inner) => {
                let $inner = Pin::new($inner.as_mut());
                $e
            }
            Conn::TcpTls($inner) => {
                let $inner = Pin::new($inner.as_mut());
                $e
            }
        }
    };
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => s.poll_write(cx, buf))
    }

    // h2 writes a frame's header and body as separate buffers; without vectored writes each
    // becomes its own syscall (and, under TLS, its own record), which adds latency to every RPC.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            #[cfg(unix)]
            Conn::Unix(s) => s.is_write_vectored(),
            Conn::Tcp(s) => s.is_write_vectored(),
            #[cfg(unix)]
            Conn::UnixTls(s) => s.is_write_vectored(),
            Conn::TcpTls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => s.poll_shutdown(cx))
    }
}

/// Accepts connections in the background and yields them, TLS handshakes done, to tonic.
///
/// Each handshake runs in its own task so that a peer that stalls or fails verification
/// never blocks Terraform's own connection.
pub fn incoming(bound: Bound, tls: Option<Arc<ServerConfig>>) -> ReceiverStream<io::Result<Conn>> {
    let (tx, rx) = mpsc::channel(16);
    let acceptor = tls.map(TlsAcceptor::from);
    tokio::spawn(async move {
        // Keep the temp dir (in `bound`) alive for as long as we accept.
        let bound = bound;
        loop {
            let accepted = match &bound {
                #[cfg(unix)]
                Bound::Unix { listener, .. } => listener.accept().await.map(|(s, _)| Raw::Unix(s)),
                Bound::Tcp { listener, .. } => listener.accept().await.map(|(s, _)| Raw::Tcp(s)),
            };
            let raw = match accepted {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to accept a connection");
                    continue;
                }
            };
            let tx = tx.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                match wrap(raw, acceptor).await {
                    Ok(conn) => {
                        let _ = tx.send(Ok(conn)).await;
                    }
                    // A refused peer is logged, never fatal: the server keeps serving.
                    Err(e) => tracing::warn!(error = %e, "refused a connection"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

enum Raw {
    #[cfg(unix)]
    Unix(UnixStream),
    Tcp(TcpStream),
}

async fn wrap(raw: Raw, acceptor: Option<TlsAcceptor>) -> io::Result<Conn> {
    Ok(match (raw, acceptor) {
        #[cfg(unix)]
        (Raw::Unix(s), None) => Conn::Unix(s),
        (Raw::Tcp(s), None) => Conn::Tcp(s),
        #[cfg(unix)]
        (Raw::Unix(s), Some(a)) => Conn::UnixTls(Box::new(a.accept(s).await?)),
        (Raw::Tcp(s), Some(a)) => Conn::TcpTls(Box::new(a.accept(s).await?)),
    })
}
