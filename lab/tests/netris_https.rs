//! The Netris emulator over real HTTPS on 127.0.0.1:0, with reqwest trusting only the
//! emulator's CA (verification on): login, VPC → allocation → subnet → V-Net on a
//! server's switch ports, provisioning finishing, session expiry → 401, the `down`
//! fault as a transport error, and a restart from the same state directory.

use std::time::{Duration, Instant};

use gpufleet_lab::netris::{NetrisConfig, NetrisEmulator, NetrisInventory, RunningEmulator};
use reqwest::StatusCode;
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

struct Client {
    http: reqwest::Client,
    base: String,
    cookie: String,
}

impl Client {
    fn new(emu: &RunningEmulator) -> Result<Self, Box<dyn std::error::Error>> {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(emu.ca_pem_path())?)?;
        let http = reqwest::Client::builder()
            .tls_certs_only([ca])
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            http,
            base: emu.url(),
            cookie: String::new(),
        })
    }

    async fn login(&mut self) -> TestResult {
        let r = self
            .http
            .post(format!("{}/api/auth", self.base))
            .json(&json!({"user": "netris", "password": "newNet0ps", "auth_scheme_id": 1}))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::OK);
        let cookie = r
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .ok_or("no Set-Cookie")?
            .to_str()?;
        assert!(cookie.starts_with("connect.sid="), "{cookie}");
        self.cookie = cookie.split(';').next().unwrap_or_default().to_owned();
        Ok(())
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> reqwest::Result<(StatusCode, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header(reqwest::header::COOKIE, &self.cookie);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await?;
        let status = r.status();
        Ok((status, r.json().await?))
    }

    async fn ok(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Box<dyn std::error::Error>> {
        let (status, body) = self.call(method.clone(), path, body).await?;
        assert_eq!(status, StatusCode::OK, "{method} {path}: {body}");
        assert_eq!(body["isSuccess"], true);
        assert_eq!(body["meta"]["statusCode"].as_u64(), Some(200));
        Ok(body["data"].clone())
    }

    async fn create(&self, path: &str, body: Value) -> Result<u64, Box<dyn std::error::Error>> {
        let data = self.ok(reqwest::Method::POST, path, Some(body)).await?;
        Ok(data["id"].as_u64().ok_or("no data.id")?)
    }

    async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Box<dyn std::error::Error>> {
        let mut req = self
            .http
            .request(method, format!("{}/_admin/{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await?;
        assert!(r.status().is_success(), "admin {path}: {}", r.status());
        Ok(r.json().await?)
    }
}

fn config(dir: &std::path::Path) -> NetrisConfig {
    let mut config = NetrisConfig::new(dir.join("netris"));
    config.inventory = NetrisInventory::from_nodes(&[
        ("site-a", "rack-a1", "gpu-a1-01"),
        ("site-a", "rack-a1", "gpu-a1-02"),
        ("site-b", "rack-b1", "gpu-b1-01"),
    ]);
    config.api.provisioning_delay = Duration::from_millis(300);
    config.ca_pem_path = Some(dir.join("ca.pem"));
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_round_trip_with_provisioning_expiry_faults_and_restart() -> TestResult {
    use reqwest::Method;
    let dir = tempfile::tempdir()?;
    let emu = NetrisEmulator::start(config(dir.path())).await?;
    assert!(emu.url().starts_with("https://127.0.0.1:"), "{}", emu.url());
    assert_eq!(emu.ca_pem_path(), dir.path().join("ca.pem"));

    // Verification is really on: a client that does not trust the CA cannot connect.
    let stranger = reqwest::Client::builder()
        .tls_certs_only(Vec::<reqwest::Certificate>::new())
        .build()?;
    assert!(
        stranger
            .get(format!("{}/_admin/healthz", emu.url()))
            .send()
            .await
            .is_err()
    );

    let mut c = Client::new(&emu)?;
    assert_eq!(c.admin(Method::GET, "healthz", None).await?["status"], "ok");
    let (status, body) = c.call(Method::GET, "/api/v2/vnet", None).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["isSuccess"], false);
    c.login().await?;
    assert_eq!(
        c.call(Method::GET, "/api/auth", None).await?.0,
        StatusCode::OK
    );

    let tenant = c
        .create(
            "/api/tenants",
            json!({"name": "acme", "description": "a tenant"}),
        )
        .await?;
    let vpc = c
        .create("/api/v2/vpc", json!({"name": "acme-vpc", "adminTenant": {"id": tenant}, "guestTenant": [], "tags": []}))
        .await?;
    let alloc = c
        .create(
            "/api/v2/ipam/allocation",
            json!({"name": "acme-10", "prefix": "10.10.0.0/16", "tenant": {"id": tenant}, "vpc": {"id": vpc}}),
        )
        .await?;
    let subnet = c
        .create(
            "/api/v2/ipam/subnet",
            json!({"name": "acme-10-1", "prefix": "10.10.1.0/24", "tenant": {"id": tenant}, "vpc": {"id": vpc},
                   "purpose": "common", "sites": []}),
        )
        .await?;
    assert_eq!((alloc, subnet), (1, 1), "separate counters");

    // Resolve a BCM hostname to its switch ports through the inventory.
    let servers = c.ok(Method::GET, "/api/v2/hw/server", None).await?;
    let host = servers
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "gpu-a1-02"))
        .ok_or("no server gpu-a1-02")?;
    let ports: Vec<Value> = host["links"]
        .as_array()
        .ok_or("no links")?
        .iter()
        .map(|l| json!({"name": l["remote"]["name"], "vlan": "auto", "untagged": true, "state": "active"}))
        .collect();
    let site = host["site"]["id"].clone();
    let vnet = c
        .create(
            "/api/v2/vnet",
            json!({"name": "acme-net", "tenant": {"id": tenant}, "guestTenants": [], "sites": [{"id": site}],
                   "vpc": {"id": vpc}, "state": "active", "vlan": "auto", "vxlanID": 0,
                   "gateways": [{"prefix": "10.10.1.1/24", "dhcpEnabled": false}], "ports": ports, "tags": []}),
        )
        .await?;
    let got = c
        .ok(Method::GET, &format!("/api/v2/vnet/{vnet}"), None)
        .await?;
    assert_eq!(got["provisioning"], true);
    assert_eq!(got["ports"].as_array().map(Vec::len), Some(2));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = c
            .ok(Method::GET, &format!("/api/v2/vnet/{vnet}"), None)
            .await?;
        if v["provisioning"] == false {
            assert_eq!(v["status"]["label"], "Active");
            break;
        }
        assert!(Instant::now() < deadline, "provisioning never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A 503 fault answers with the envelope over the wire, once.
    c.admin(
        Method::POST,
        "fault",
        Some(json!({"route": "GET /api/v2/vpc", "status": 503, "count": 1})),
    )
    .await?;
    let (status, body) = c.call(Method::GET, "/api/v2/vpc", None).await?;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["meta"]["statusCode"].as_u64(), Some(503));
    c.ok(Method::GET, "/api/v2/vpc", None).await?;

    // down: the connection is dropped (a transport error), the admin plane still works.
    c.admin(Method::POST, "fault", Some(json!({"down": true})))
        .await?;
    assert!(
        c.call(Method::GET, "/api/v2/vpc", None).await.is_err(),
        "down drops the connection"
    );
    c.admin(Method::DELETE, "fault", None).await?;
    c.ok(Method::GET, "/api/v2/vpc", None).await?;

    // Sessions expire: the next call is a 401.
    c.admin(
        Method::POST,
        "fault",
        Some(json!({"expire_sessions": true})),
    )
    .await?;
    let (status, _) = c.call(Method::GET, "/api/v2/vnet", None).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        c.call(Method::GET, "/api/auth", None).await?.0,
        StatusCode::UNAUTHORIZED
    );

    // Restart from the same state directory: objects, ids and the CA survive.
    emu.shutdown().await;
    let emu = NetrisEmulator::start(config(dir.path())).await?;
    let mut c = Client::new(&emu)?;
    c.login().await?;
    let got = c
        .ok(Method::GET, &format!("/api/v2/vnet/{vnet}"), None)
        .await?;
    assert_eq!(got["name"], "acme-net");
    assert_eq!(got["gateways"][0]["prefix"], "10.10.1.1/24");
    let tree = c
        .ok(
            Method::GET,
            &format!("/api/v2/ipam?filterByVpc={vpc}"),
            None,
        )
        .await?;
    assert_eq!(tree[0]["children"][0]["prefix"], "10.10.1.0/24");
    let next = c
        .create("/api/v2/ipam/subnet", json!({"name": "n", "prefix": "10.10.2.0/24", "tenant": {"id": tenant}, "vpc": {"id": vpc}}))
        .await?;
    assert_eq!(next, 2, "counters survive the restart");
    let state = c.admin(Method::GET, "state", None).await?;
    assert_eq!(state["vnets"].as_array().map(Vec::len), Some(1));
    emu.shutdown().await;
    Ok(())
}
