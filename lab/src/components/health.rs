//! Asking a component's health endpoint: plain HTTP on loopback, or HTTPS trusting only
//! the lab CA.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use super::Component;
use crate::pki::Pki;
use crate::ports::Ports;

/// Asks a component's health endpoint once. `Ok` when it says it is healthy; otherwise
/// what it said (or why it could not be asked).
///
/// # Errors
/// A one-line reason.
pub async fn check(component: Component, ports: &Ports, pki: &Pki) -> Result<(), String> {
    let port = component.port(ports);
    match component {
        Component::Etcd => {
            let body = tokio::task::spawn_blocking(move || http_get(port, "/health"))
                .await
                .map_err(|e| e.to_string())??;
            if body.contains(r#""health":"true""#) {
                Ok(())
            } else {
                Err(format!("etcd /health says {}", body.trim()))
            }
        }
        Component::Kwok | Component::Vcluster | Component::MpiOperator | Component::Karpenter => {
            let body = tokio::task::spawn_blocking(move || http_get(port, "/healthz"))
                .await
                .map_err(|e| e.to_string())??;
            if body.trim() == "ok" {
                Ok(())
            } else {
                Err(format!("{component} /healthz says {}", body.trim()))
            }
        }
        Component::Netris => {
            // Its CA is its own, in <dir>/netris next to <dir>/pki.
            let ca = pki
                .dir()
                .parent()
                .unwrap_or_else(|| pki.dir())
                .join("netris")
                .join(crate::netris::CA_CERT_FILE);
            let body = https_get(port, "/_admin/healthz", &ca).await?;
            if body.contains(r#""ok""#) {
                Ok(())
            } else {
                Err(format!("netris /_admin/healthz says {}", body.trim()))
            }
        }
        Component::Bcm => {
            // Served with a certificate from the lab CA; the admin plane needs no client
            // certificate.
            let body = https_get(port, "/_admin/healthz", &pki.ca_cert()).await?;
            if body.contains(r#""ok""#) {
                Ok(())
            } else {
                Err(format!("bcm /_admin/healthz says {}", body.trim()))
            }
        }
        Component::KubeApiserver | Component::KubeControllerManager | Component::KubeScheduler => {
            let path = if component == Component::KubeApiserver {
                "/readyz"
            } else {
                "/healthz"
            };
            let body = https_get(port, path, &pki.ca_cert()).await?;
            if body.trim() == "ok" {
                Ok(())
            } else {
                Err(format!("{component} {path} says {}", body.trim()))
            }
        }
    }
}

/// GET over HTTPS on loopback, trusting only the CA in `ca_file`, with no client
/// certificate (the health endpoints are public).
pub(crate) async fn https_get(port: u16, path: &str, ca_file: &Path) -> Result<String, String> {
    let ca_pem = std::fs::read(ca_file).map_err(|e| format!("read CA: {e}"))?;
    let ca_der = pem_to_der(&ca_pem).ok_or("the CA file holds no certificate")?;
    let url: http::Uri = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut config = kube::Config::new(url);
    config.root_cert = Some(vec![ca_der]);
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    config.default_retry = false;
    crate::crypto::install_crypto_provider();
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(request)
        .await
        .map_err(|e| e.to_string())
}

/// The DER of the first certificate in a PEM file.
pub(crate) fn pem_to_der(pem: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = start + text[start..].find("-----END CERTIFICATE-----")?;
    let b64: String = text[start..end].split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// A minimal HTTP/1.0 GET on 127.0.0.1 for the plain-HTTP endpoints (etcd, kwok). Returns
/// the body of a 200 response.
pub(super) fn http_get(port: u16, path: &str) -> Result<String, String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let request =
        format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| format!("read {addr}{path}: {e}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}{path}: malformed response"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(body.to_owned())
    } else {
        Err(format!("{addr}{path}: {status}: {}", body.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_health_of_a_tiny_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = std::thread::spawn(move || {
            for body in ["ok", "nope"] {
                let (mut s, _) = listener.accept().expect("accept");
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") {
                    let n = s.read(&mut buf).expect("read");
                    assert!(n > 0, "request ended early");
                    request.extend_from_slice(&buf[..n]);
                }
                let status = if body == "ok" { "200 OK" } else { "500 Oops" };
                write!(
                    s,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .expect("write");
            }
        });
        assert_eq!(http_get(port, "/healthz").as_deref(), Ok("ok"));
        let err = http_get(port, "/healthz").expect_err("500");
        assert!(err.contains("500 Oops"), "{err}");
        server.join().expect("server");
    }

    #[test]
    fn pem_to_der_reads_the_first_certificate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki::new(dir.path());
        pki.generate().expect("pki");
        let der = pem_to_der(&std::fs::read(pki.ca_cert()).expect("ca")).expect("der");
        assert_eq!(der[0], 0x30, "a DER SEQUENCE");
    }
}
