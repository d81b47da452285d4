//! The plugin server: handshake, listener, mutual TLS and the gRPC services Terraform
//! expects, wired around the provider service.
//!
//! # Expected flow (launched by Terraform)
//! 1. Check the magic cookie and pick protocol 6.
//! 2. Generate our certificate and pin Terraform's from `PLUGIN_CLIENT_CERT`.
//! 3. Bind a unix socket (TCP as fallback) and start serving.
//! 4. Print the handshake line on stdout; nothing is printed there before it.
//! 5. Serve until `GRPCController.Shutdown`, then exit promptly.
//!
//! In debug mode the server is started by hand without TLS, prints the
//! `TF_REATTACH_PROVIDERS` value instead, and runs until interrupted.

pub mod handshake;
pub mod listener;
pub mod services;
pub mod tls;

use std::{io::Write, time::Duration};

use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::{
    proto::{
        plugin::{
            grpc_broker_server::GrpcBrokerServer, grpc_controller_server::GrpcControllerServer,
            grpc_stdio_server::GrpcStdioServer,
        },
        tfplugin6::provider_server::ProviderServer,
    },
    server::ProviderService,
};

/// Terraform's registry address of this provider, used for reattaching.
pub const PROVIDER_ADDRESS: &str = "registry.terraform.io/gpufleet/gpufleet";

/// Largest gRPC message accepted or sent; Terraform allows far more than tonic's 4 MiB, and
/// schemas and plans of large fleets can exceed that.
const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The handshake could not be made.
    #[error(transparent)]
    Handshake(#[from] handshake::HandshakeError),
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] tls::TlsSetupError),
    /// No socket could be bound.
    #[error("failed to listen for terraform: {0}")]
    Listen(#[source] std::io::Error),
    /// The handshake line could not be written.
    #[error("failed to write the handshake to stdout: {0}")]
    Stdout(#[source] std::io::Error),
    /// The interrupt could not be listened for (debug mode).
    #[error("failed to listen for the interrupt signal: {0}")]
    Signal(#[source] std::io::Error),
    /// The gRPC server failed.
    #[error("failed to serve grpc: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves as a plugin launched by Terraform.
pub async fn serve_managed(env: &dyn Fn(&str) -> Option<String>) -> Result<(), ServeError> {
    handshake::negotiate(env)?;
    ignore_interrupts();

    // Terraform sets no client certificate only when told to run without TLS
    // (TF_DISABLE_PLUGIN_TLS); go-plugin then serves in the clear, and so do we.
    let client_cert = env("PLUGIN_CLIENT_CERT").filter(|c| !c.trim().is_empty());
    let (tls, server_cert) = match client_cert {
        Some(pem) => {
            let identity = tls::generate_server_identity()?;
            let config = tls::server_config(&identity, tls::parse_client_cert(&pem)?)?;
            (Some(config), Some(identity.cert))
        }
        None => {
            tracing::warn!("PLUGIN_CLIENT_CERT not set; serving without TLS");
            (None, None)
        }
    };

    let mut bound = listener::bind(env).map_err(ServeError::Listen)?;
    // Removed when this function returns, before the runtime is abandoned.
    let _socket_dir = bound.take_dir();
    let line = handshake::line(
        bound.network(),
        &bound.address(),
        server_cert.as_ref().map(AsRef::as_ref),
    );
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(run(bound, tls, shutdown.clone()));

    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").map_err(ServeError::Stdout)?;
    stdout.flush().map_err(ServeError::Stdout)?;
    drop(stdout);
    tracing::debug!(handshake = %line, "plugin server started");

    shutdown.cancelled().await;
    // Give in-flight replies (the Shutdown reply itself) a moment, but never hold Terraform
    // up: it kills providers that linger.
    let _ = tokio::time::timeout(Duration::from_millis(500), server).await;
    Ok(())
}

/// Serves without being launched, for debuggers: prints the reattach configuration and runs
/// until interrupted.
pub async fn serve_debug(env: &dyn Fn(&str) -> Option<String>) -> Result<(), ServeError> {
    let mut bound = listener::bind(env).map_err(ServeError::Listen)?;
    let _socket_dir = bound.take_dir();
    let reattach = reattach_json(bound.network(), &bound.address(), std::process::id());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(run(bound, None, shutdown.clone()));
    // Listen for the interrupt before saying how to send it: an interrupt that arrives right
    // after the reattach line must stop the server, not kill the process.
    #[cfg(unix)]
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(ServeError::Signal)?;

    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "gpufleet provider started in debug mode. To use it, set in the shell that runs \
         terraform:\n\n\tTF_REATTACH_PROVIDERS='{reattach}'\n\nPress Ctrl-C to stop."
    )
    .map_err(ServeError::Stdout)?;
    stdout.flush().map_err(ServeError::Stdout)?;
    drop(stdout);

    #[cfg(unix)]
    let interrupted = interrupt.recv();
    #[cfg(not(unix))]
    let interrupted = tokio::signal::ctrl_c();
    tokio::select! {
        _ = interrupted => shutdown.cancel(),
        () = shutdown.cancelled() => {}
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), server).await;
    Ok(())
}

/// The value of `TF_REATTACH_PROVIDERS` for a server at `address`. `Test: true` is what makes
/// Terraform speak protocol 6 to a reattached provider and leave it running afterwards.
pub fn reattach_json(network: &str, address: &str, pid: u32) -> String {
    serde_json::json!({
        PROVIDER_ADDRESS: {
            "Protocol": "grpc",
            "ProtocolVersion": handshake::APP_PROTOCOL_VERSION,
            "Pid": pid,
            "Test": true,
            "Addr": { "Network": network, "String": address },
        }
    })
    .to_string()
}

async fn run(
    bound: listener::Bound,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("plugin", tonic_health::ServingStatus::Serving)
        .await;
    let provider = ProviderService::new(shutdown.clone());
    let incoming = listener::incoming(bound, tls);
    let stop = shutdown.clone();
    Server::builder()
        .add_service(health_service)
        .add_service(
            ProviderServer::new(provider)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(GrpcControllerServer::new(services::Controller {
            shutdown: shutdown.clone(),
        }))
        .add_service(GrpcStdioServer::new(services::Stdio {
            shutdown: shutdown.clone(),
        }))
        .add_service(GrpcBrokerServer::new(services::Broker { shutdown }))
        .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await })
        .await?;
    Ok(())
}

/// Terraform forwards Ctrl-C as `StopProvider`; the signal itself must not kill us mid-apply,
/// or the objects being created would be orphaned.
fn ignore_interrupts() {
    tokio::spawn(async {
        while tokio::signal::ctrl_c().await.is_ok() {
            tracing::debug!("ignoring SIGINT; terraform sends StopProvider instead");
        }
    });
}
