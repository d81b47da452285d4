//! Tests of the provider binary as a process, playing Terraform's part: the cookie check,
//! the handshake line, mutual TLS with a pinned client certificate, health, interrupts and
//! shutdown. A client with the wrong certificate must be refused while the right one works.

use std::{
    io::{BufRead, BufReader, Read},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use base64::Engine;
use hyper_util::rt::TokioIo;
use rustls::{
    ClientConfig, DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::aws_lc_rs,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime},
};
use terraform_provider_gpufleet::{
    plugin::handshake::{MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE},
    proto::{
        plugin::grpc_controller_client::GrpcControllerClient,
        tfplugin6::provider_client::ProviderClient,
    },
};
use tokio::net::UnixStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

const BINARY: &str = env!("CARGO_BIN_EXE_terraform-provider-gpufleet");

/// A client identity like the one Terraform makes for each run: self-signed ECDSA P-521,
/// marked as a CA, SAN localhost.
struct ClientIdentity {
    pem: String,
    der: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

fn terraform_like_client_cert() -> ClientIdentity {
    // The openssl CLI, because the crypto the provider links for key generation (ring) cannot
    // make P-521 keys.
    let dir = tempfile::tempdir().expect("temp dir");
    let (key_path, cert_path) = (dir.path().join("key.pem"), dir.path().join("cert.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-521",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "extendedKeyUsage=clientAuth,serverAuth"])
        .arg("-keyout")
        .arg(&key_path)
        .arg("-out")
        .arg(&cert_path)
        .stderr(Stdio::null())
        .status()
        .expect("run openssl (Debian package openssl)");
    assert!(
        status.success(),
        "openssl could not make a P-521 certificate"
    );
    let pem = std::fs::read_to_string(&cert_path).expect("read certificate");
    let der = rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("valid PEM");
    let key_pem = std::fs::read(&key_path).expect("read key");
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .expect("valid key PEM")
        .expect("a private key");
    ClientIdentity { pem, der, key }
}

/// The provider process with its parsed handshake.
struct Plugin {
    child: Child,
    socket: PathBuf,
    server_cert: CertificateDer<'static>,
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn launch(client_cert_pem: &str) -> Plugin {
    let mut child = Command::new(BINARY)
        .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
        .env("PLUGIN_CLIENT_CERT", client_cert_pem)
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start provider");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read handshake");
    let parts: Vec<&str> = line.trim_end().split('|').collect();
    assert_eq!(parts.len(), 6, "handshake line {line:?}");
    assert_eq!(&parts[..3], ["1", "6", "unix"], "handshake line {line:?}");
    assert_eq!(parts[4], "grpc");
    assert!(
        !parts[5].ends_with('='),
        "certificate must be unpadded base64"
    );
    let der = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(parts[5])
        .expect("base64 certificate");
    Plugin {
        child,
        socket: PathBuf::from(parts[3]),
        server_cert: CertificateDer::from(der),
    }
}

/// Trusts exactly the certificate from the handshake, as Terraform does (it makes it the only
/// root and checks the name "localhost").
#[derive(Debug)]
struct PinnedServer(CertificateDer<'static>);

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.0.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "unexpected server certificate".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &aws_lc_rs::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &aws_lc_rs::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn tls_config(plugin: &Plugin, client: Option<&ClientIdentity>) -> Arc<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedServer(plugin.server_cert.clone())));
    let mut config = match client {
        Some(id) => builder
            .with_client_auth_cert(vec![id.der.clone()], id.key.clone_key())
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

async fn connect(
    plugin: &Plugin,
    client: Option<&ClientIdentity>,
) -> Result<Channel, tonic::transport::Error> {
    let socket = plugin.socket.clone();
    let connector = TlsConnector::from(tls_config(plugin, client));
    Endpoint::try_from("http://localhost")?
        .connect_timeout(Duration::from_secs(10))
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            let connector = connector.clone();
            async move {
                let stream = UnixStream::connect(socket).await?;
                let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
                let tls = connector.connect(name, stream).await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        }))
        .await
}

async fn plugin_is_serving(channel: Channel) -> bool {
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "plugin".to_owned(),
        })
        .await;
    matches!(reply, Ok(r) if r.get_ref().status == ServingStatus::Serving as i32)
}

/// Waits for the process to exit, failing the test if it is still alive after a generous
/// bound (this checks that it exits at all, not how fast).
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "provider did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn terraforms_certificate_is_accepted_and_serves_health_and_schema() {
    let id = terraform_like_client_cert();
    let plugin = launch(&id.pem);
    let channel = connect(&plugin, Some(&id))
        .await
        .expect("connect with the right certificate");
    assert!(plugin_is_serving(channel.clone()).await);
    let schema = ProviderClient::new(channel)
        .get_provider_schema(
            terraform_provider_gpufleet::proto::tfplugin6::get_provider_schema::Request {},
        )
        .await
        .expect("schema");
    assert!(
        schema
            .get_ref()
            .data_source_schemas
            .contains_key("gpufleet_gpu_catalog")
    );
}

#[tokio::test]
async fn a_different_client_certificate_is_refused() {
    let terraform = terraform_like_client_cert();
    let intruder = terraform_like_client_cert();
    let plugin = launch(&terraform.pem);

    let refused = match connect(&plugin, Some(&intruder)).await {
        Err(_) => true,
        // With TLS 1.3 the server's verdict on the client certificate can arrive after the
        // client thinks the handshake is done; the first call then fails instead.
        Ok(channel) => !plugin_is_serving(channel).await,
    };
    assert!(refused, "a client with another certificate was served");

    // The refusal does not take the server down for Terraform itself.
    let channel = connect(&plugin, Some(&terraform)).await.expect("connect");
    assert!(plugin_is_serving(channel).await);
}

#[tokio::test]
async fn a_client_without_certificate_is_refused() {
    let terraform = terraform_like_client_cert();
    let plugin = launch(&terraform.pem);
    let refused = match connect(&plugin, None).await {
        Err(_) => true,
        Ok(channel) => !plugin_is_serving(channel).await,
    };
    assert!(refused, "a client without a certificate was served");
}

#[tokio::test]
async fn interrupt_is_ignored_and_shutdown_exits() {
    let id = terraform_like_client_cert();
    let mut plugin = launch(&id.pem);
    let channel = connect(&plugin, Some(&id)).await.expect("connect");

    // Ctrl-C in Terraform's terminal reaches the provider too; it must keep serving so that
    // Terraform can still record what was done (cancellation arrives as StopProvider).
    let pid = plugin.child.id().to_string();
    let sent = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        plugin.child.try_wait().expect("wait").is_none(),
        "SIGINT killed the provider"
    );
    assert!(plugin_is_serving(channel.clone()).await);

    // Terraform keeps its connection open until the provider has gone.
    let held = channel.clone();
    assert!(plugin_is_serving(held.clone()).await);
    GrpcControllerClient::new(channel)
        .shutdown(terraform_provider_gpufleet::proto::plugin::Empty {})
        .await
        .expect("shutdown");
    let status = wait_exit(&mut plugin.child);
    drop(held);
    assert!(status.success(), "exit status {status}");
    // Every run would otherwise leave a directory behind in the temp dir.
    let dir = plugin.socket.parent().expect("the socket has a directory");
    assert!(
        !dir.exists(),
        "the socket directory {} outlived the provider",
        dir.display()
    );
}

#[test]
fn run_by_hand_it_explains_itself_and_fails() {
    let out = Command::new(BINARY)
        .env_remove(MAGIC_COOKIE_KEY)
        .output()
        .expect("run provider");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing may be printed on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Terraform provider plugin"), "{stderr}");
}

#[test]
fn protocol_five_only_is_refused() {
    let out = Command::new(BINARY)
        .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "5")
        .output()
        .expect("run provider");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("version 6"));
}

#[test]
fn debug_mode_prints_reattach_configuration() {
    let mut child = Command::new(BINARY)
        .arg("--debug")
        .env_remove(MAGIC_COOKIE_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start provider");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("Ctrl-C") {
        let n = stdout.read(&mut buf).expect("read");
        assert!(n > 0, "debug output ended early: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let json = text
        .split("TF_REATTACH_PROVIDERS='")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .expect("reattach value");
    let v: serde_json::Value = serde_json::from_str(json).expect("reattach JSON");
    let p = &v["registry.terraform.io/gpufleet/gpufleet"];
    assert_eq!(p["ProtocolVersion"], 6);
    assert_eq!(p["Test"], true);
    assert_eq!(p["Pid"], child.id());
    assert_eq!(p["Addr"]["Network"], "unix");
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = wait_exit(&mut child);
    assert!(status.success(), "debug server exit status {status}");
}
