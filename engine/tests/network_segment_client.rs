//! The Netris HTTP client against scripted in-process controllers: each test lists the
//! requests it expects with their answers; an unexpected or missing request fails the test.
//!
//! Covers the session (login, cookie, one re-login on 401), retries of idempotent calls on
//! server errors and dropped connections, creates that look up before posting again, typed
//! errors that carry the controller's message but never the password, request counting, and
//! TLS verification against a configured CA.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use gpufleet_engine::backends::netris::{
    IdRef, NetrisApi, NetrisClient, NetrisConfig, RetryPolicy, VNetWrite,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpListener,
};

const PASSWORD: &str = "s3cret-pass";

/// What the controller does with one request.
enum Reply {
    /// Answer with a status and a JSON body (and maybe a session cookie).
    Json(u16, Value, Option<&'static str>),
    /// Close the connection without answering.
    Drop,
}

struct Step {
    expect: &'static str,
    reply: Reply,
}

fn step(expect: &'static str, reply: Reply) -> Step {
    Step { expect, reply }
}

fn ok(data: Value) -> Reply {
    let body = json!({"data": null, "isSuccess": true, "message": "", "errors": null});
    Reply::Json(200, with(body, "data", data), None)
}

fn fail(status: u16, message: &str, errors: Value) -> Reply {
    let body = json!({"data": null, "isSuccess": false, "message": message, "errors": null});
    Reply::Json(status, with(body, "errors", errors), None)
}

/// `body` with `key` set to `value`.
fn with(mut body: Value, key: &str, value: Value) -> Value {
    if let Some(o) = body.as_object_mut() {
        o.insert(key.to_owned(), value);
    }
    body
}

fn login() -> Step {
    step(
        "POST /api/auth",
        Reply::Json(
            200,
            json!({"data": {"user": "netris"}, "isSuccess": true}),
            Some("connect.sid=s%3Asession-1; Path=/; HttpOnly; Secure"),
        ),
    )
}

/// A scripted controller: the requests it expects, in order, and what it saw.
#[derive(Default)]
struct Script {
    steps: Mutex<VecDeque<Step>>,
    problems: Mutex<Vec<String>>,
    bodies: Mutex<Vec<String>>,
}

impl Script {
    fn new(steps: Vec<Step>) -> Arc<Script> {
        Arc::new(Script {
            steps: Mutex::new(steps.into()),
            ..Script::default()
        })
    }

    fn next(&self, line: &str, cookie: Option<&str>, body: String) -> Reply {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(body);
        let mut problems = self.problems.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(s) = self
            .steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
        else {
            problems.push(format!("unexpected request {line}"));
            return Reply::Json(500, json!({}), None);
        };
        if s.expect != line {
            problems.push(format!("got {line}, expected {}", s.expect));
        }
        if line != "POST /api/auth" && cookie != Some("connect.sid=s%3Asession-1") {
            problems.push(format!("{line} without the session cookie: {cookie:?}"));
        }
        s.reply
    }

    /// Fails the test on an unexpected request or an expected one that never came.
    #[track_caller]
    fn finish(&self) {
        let problems = self.problems.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(problems.is_empty(), "{problems:#?}");
        let left: Vec<&str> = self
            .steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|s| s.expect)
            .collect();
        assert!(
            left.is_empty(),
            "expected requests that never came: {left:?}"
        );
    }

    fn bodies(&self) -> Vec<String> {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Reads one HTTP/1.1 request, answers it from the script and closes the connection.
async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, script: Arc<Script>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let line = format!(
        "{} {}",
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("")
    );
    let header = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    match script.next(&line, header("cookie").as_deref(), body) {
        Reply::Drop => {}
        Reply::Json(status, body, cookie) => {
            let body = body.to_string();
            let cookie = cookie
                .map(|c| format!("Set-Cookie: {c}\r\n"))
                .unwrap_or_default();
            let resp = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{cookie}Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = io.write_all(resp.as_bytes()).await;
            let _ = io.shutdown().await;
        }
    }
}

/// Serves `script` over plain HTTP on loopback; returns the base URL.
async fn http_controller(script: Arc<Script>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_one(sock, Arc::clone(&script)));
        }
    });
    format!("http://{addr}")
}

fn fast_retries(mut config: NetrisConfig) -> NetrisConfig {
    config.retry = RetryPolicy {
        attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
    };
    config.request_timeout = Duration::from_secs(5);
    config
}

async fn client(steps: Vec<Step>) -> (NetrisClient, Arc<Script>) {
    let script = Script::new(steps);
    let url = http_controller(Arc::clone(&script)).await;
    let config = fast_retries(NetrisConfig::new(&url, "netris", PASSWORD));
    (NetrisClient::new(config).expect("client"), script)
}

fn vnet_body(name: &str) -> VNetWrite {
    VNetWrite {
        name: name.to_owned(),
        tenant: IdRef { id: 2 },
        guest_tenants: Vec::new(),
        sites: vec![IdRef { id: 1 }],
        vpc: IdRef { id: 2 },
        state: "active".to_owned(),
        vlan: "auto".to_owned(),
        vxlan_id: 0,
        ip_family: "ipv4".to_owned(),
        tags: Vec::new(),
        mtu: 9000,
        gateways: Vec::new(),
        ports: Vec::new(),
    }
}

#[tokio::test]
async fn logs_in_once_and_sends_the_session_cookie() {
    let (c, script) = client(vec![
        login(),
        step(
            "GET /api/tenants",
            ok(json!([{"id": 2, "name": "tenant-a"}])),
        ),
        step("GET /api/v2/sites", ok(json!([{"id": 1, "name": "dc1"}]))),
    ])
    .await;
    assert_eq!(c.tenants().await.expect("tenants")[0].name, "tenant-a");
    assert_eq!(c.sites().await.expect("sites")[0].id, 1);
    script.finish();
    let login_body: Value = serde_json::from_str(&script.bodies()[0]).expect("json");
    assert_eq!(
        login_body,
        json!({"user": "netris", "password": PASSWORD, "auth_scheme_id": 1})
    );
    let stats = c.stats();
    assert_eq!(stats.get("POST /api/auth"), 1);
    assert_eq!(stats.get("GET /api/tenants"), 1);
    assert_eq!(stats.total(), 3);
}

#[tokio::test]
async fn an_expired_session_logs_in_again_once() {
    let (c, script) = client(vec![
        login(),
        step("GET /api/v2/vnet/7", fail(401, "Unauthorized", Value::Null)),
        login(),
        step(
            "GET /api/v2/vnet/7",
            ok(json!({"id": 7, "name": "a", "provisioning": false})),
        ),
    ])
    .await;
    let v = c.vnet(7).await.expect("read").expect("exists");
    assert_eq!(v.name, "a");
    script.finish();
}

#[tokio::test]
async fn idempotent_calls_retry_on_server_errors_and_dropped_connections() {
    let (c, script) = client(vec![
        login(),
        step(
            "GET /api/v2/vnet/7",
            fail(503, "Service Unavailable", Value::Null),
        ),
        step("GET /api/v2/vnet/7", Reply::Drop),
        step("GET /api/v2/vnet/7", ok(json!({"id": 7, "name": "a"}))),
    ])
    .await;
    assert!(c.vnet(7).await.expect("read").is_some());
    script.finish();
    assert_eq!(c.stats().get("GET /api/v2/vnet/{id}"), 3);
}

#[tokio::test]
async fn retries_are_bounded() {
    let (c, script) = client(vec![
        login(),
        step("PUT /api/v2/vnet/7", fail(500, "boom", Value::Null)),
        step("PUT /api/v2/vnet/7", fail(500, "boom", Value::Null)),
        step("PUT /api/v2/vnet/7", fail(500, "still boom", Value::Null)),
    ])
    .await;
    let err = c.update_vnet(7, &vnet_body("a")).await.expect_err("fails");
    assert_eq!(
        err.to_string(),
        "failed to update V-Net a: HTTP 500: still boom"
    );
    script.finish();
}

#[tokio::test]
async fn a_create_with_a_lost_answer_is_looked_up_before_posting_again() {
    let (c, script) = client(vec![
        login(),
        step(
            "POST /api/v2/vnet",
            fail(503, "Service Unavailable", Value::Null),
        ),
        // Not there: posting again is safe.
        step("GET /api/v2/vnet?filterByVpc=2", ok(json!([]))),
        step("POST /api/v2/vnet", Reply::Drop),
        // There now: adopt it, never post a third time.
        step(
            "GET /api/v2/vnet?filterByVpc=2",
            ok(json!([{"id": 9, "name": "seg"}])),
        ),
    ])
    .await;
    assert_eq!(c.create_vnet(&vnet_body("seg")).await.expect("created"), 9);
    script.finish();
}

#[tokio::test]
async fn a_refused_create_is_not_retried() {
    let (c, script) = client(vec![
        login(),
        step(
            "POST /api/v2/vnet",
            fail(
                400,
                "Vnet name 'seg' is already in use",
                json!({"name": "duplicate"}),
            ),
        ),
    ])
    .await;
    let err = c.create_vnet(&vnet_body("seg")).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "failed to create V-Net seg: HTTP 400: Vnet name 'seg' is already in use ({\"name\":\"duplicate\"})"
    );
    script.finish();
}

#[tokio::test]
async fn created_ids_come_from_data_or_a_flat_id() {
    let (c, script) = client(vec![
        login(),
        step("POST /api/v2/vnet", ok(json!({"id": 11}))),
        step(
            "POST /api/v2/vnet",
            Reply::Json(200, json!({"id": 12}), None),
        ),
    ])
    .await;
    assert_eq!(c.create_vnet(&vnet_body("a")).await.expect("a"), 11);
    assert_eq!(c.create_vnet(&vnet_body("b")).await.expect("b"), 12);
    script.finish();
}

#[tokio::test]
async fn gone_objects_read_as_none_and_delete_as_already_gone() {
    let (c, script) = client(vec![
        login(),
        step(
            "GET /api/v2/vnet/5",
            fail(404, "vnet 5 not found", Value::Null),
        ),
        step(
            "DELETE /api/v2/vnet/5",
            fail(404, "vnet 5 not found", Value::Null),
        ),
        step("DELETE /api/v2/ipam/subnet/6", ok(json!({"id": 6}))),
    ])
    .await;
    assert!(c.vnet(5).await.expect("read").is_none());
    assert!(!c.delete_vnet(5).await.expect("delete"));
    assert!(c.delete_subnet(6).await.expect("delete"));
    script.finish();
}

#[tokio::test]
async fn wrong_credentials_name_the_controller_but_never_the_password() {
    let (c, script) = client(vec![step(
        "POST /api/auth",
        fail(401, "Wrong username or password", Value::Null),
    )])
    .await;
    let err = c.vpcs().await.expect_err("refused");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("failed to log in to the Netris controller at http://127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("HTTP 401: Wrong username or password"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
    assert!(!format!("{c:?}").contains(PASSWORD));
    script.finish();
}

// ---------------------------------------------------------------------------------------------
// TLS

struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).expect("ca");
    let key = KeyPair::generate().expect("key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("params");
    let cert = params.signed_by(&key, &ca).expect("cert");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("server config");
    Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

async fn https_controller(script: Arc<Script>, tls: Arc<rustls::ServerConfig>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (acceptor, script) = (acceptor.clone(), Arc::clone(&script));
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(sock).await {
                    serve_one(tls, script).await;
                }
            });
        }
    });
    format!("https://{addr}")
}

#[tokio::test]
async fn https_is_verified_against_the_configured_ca() {
    let pki = pki();
    let script = Script::new(vec![
        login(),
        step("GET /api/v2/vpc", ok(json!([{"id": 1, "name": "Default"}]))),
    ]);
    let url = https_controller(Arc::clone(&script), Arc::clone(&pki.server)).await;

    // The CA as PEM text.
    let mut config = fast_retries(NetrisConfig::new(&url, "netris", PASSWORD));
    config.ca_pem = Some(pki.ca_pem.clone().into_bytes());
    let c = NetrisClient::new(config).expect("client");
    assert_eq!(c.vpcs().await.expect("vpcs")[0].name, "Default");
    script.finish();

    // Without it, the system roots do not know the controller's CA: refused, no retry storm
    // against a server that cannot be trusted (every attempt fails the handshake).
    let untrusted = NetrisClient::new(fast_retries(NetrisConfig::new(&url, "netris", PASSWORD)))
        .expect("client");
    let err = untrusted.vpcs().await.expect_err("untrusted");
    assert!(err.to_string().contains("failed to log in"), "{err}");
}

#[tokio::test]
async fn a_bad_ca_is_a_settings_error() {
    let mut config = NetrisConfig::new("https://127.0.0.1:1", "netris", PASSWORD);
    config.ca_pem =
        Some(b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".to_vec());
    let err = NetrisClient::new(config).expect_err("bad CA");
    assert!(
        err.to_string()
            .starts_with("invalid netris settings: ca_certificate"),
        "{err}"
    );
}

#[tokio::test]
async fn plain_http_is_refused_off_loopback() {
    let err = NetrisClient::new(NetrisConfig::new(
        "http://netris.example",
        "netris",
        PASSWORD,
    ))
    .expect_err("plain http");
    assert!(err.to_string().contains("must be an https:// URL"), "{err}");
}

/// A controller nobody listens on: the error names the operation, the address and the cause.
#[tokio::test]
async fn an_unreachable_controller_is_named_with_the_cause() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let c = NetrisClient::new(fast_retries(NetrisConfig::new(&url, "netris", PASSWORD)))
        .expect("client");
    let text = c
        .vpcs()
        .await
        .expect_err("nothing listens there")
        .to_string();
    assert!(text.contains("failed to log in"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
}
