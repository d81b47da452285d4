//! The BCM emulator over real HTTPS on 127.0.0.1:0 with a lab PKI: the admin client
//! certificate may write, the read-only one may not, no certificate means 401 until a
//! login cookie, a client that trusts another CA (or presents another CA's certificate)
//! cannot connect, a boot runs on the real clock, and state survives a restart.

use std::path::Path;
use std::time::{Duration, Instant};

use gpufleet_lab::bcm::inventory::InventoryNode;
use gpufleet_lab::bcm::{BcmConfig, BcmEmulator, BcmInventory};
use gpufleet_lab::pki::{BCM_CLIENTS, Pki};
use reqwest::StatusCode;
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn config(dir: &Path, pki: &Pki) -> BcmConfig {
    let mut config = BcmConfig::new(dir.join("bcm"));
    config.ca = Some((pki.ca_cert(), pki.key("ca")));
    config.inventory = BcmInventory {
        nodes: ["gpu-a-01", "gpu-a-02"]
            .iter()
            .enumerate()
            .map(|(i, h)| InventoryNode {
                hostname: (*h).into(),
                mac: format!("02:00:00:00:00:{i:02x}"),
                ip: format!("10.240.0.{}", 10 + i),
                rack: "rack-a".into(),
                position: u32::try_from(i + 1).unwrap_or(1),
                gpu_product: "NVIDIA-H100-80GB-HBM3".into(),
                gpu_count: 8,
                idle_power: "on".into(),
                disks: Vec::new(),
            })
            .collect(),
    };
    config.api.boot_step = Duration::from_millis(50);
    config
}

fn ca(pki: &Pki) -> Result<reqwest::Certificate, Box<dyn std::error::Error>> {
    Ok(reqwest::Certificate::from_pem(&std::fs::read(
        pki.ca_cert(),
    )?)?)
}

fn client(pki: &Pki, stem: Option<&str>) -> Result<reqwest::Client, Box<dyn std::error::Error>> {
    let mut b = reqwest::Client::builder()
        .tls_certs_only([ca(pki)?])
        .timeout(Duration::from_secs(10));
    if let Some(stem) = stem {
        let mut pem = std::fs::read(pki.cert(stem))?;
        pem.extend(std::fs::read(pki.key(stem))?);
        b = b.identity(reqwest::Identity::from_pem(&pem)?);
    }
    Ok(b.build()?)
}

async fn call(
    http: &reqwest::Client,
    url: &str,
    cookie: Option<&str>,
    service: &str,
    name: &str,
    args: Value,
) -> reqwest::Result<(StatusCode, Value)> {
    let mut body = json!({"service": service, "call": name});
    body["args"] = args;
    let mut req = http.post(format!("{url}/json")).json(&body);
    if let Some(c) = cookie {
        req = req.header(reqwest::header::COOKIE, c);
    }
    let r = req.send().await?;
    let status = r.status();
    Ok((status, r.json().await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_profiles_login_boot_and_restart() -> TestResult {
    gpufleet_lab::install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let pki = Pki::new(&dir.path().join("pki"));
    pki.generate()?;
    assert!(pki.ensure_bcm_clients()?);
    assert!(!pki.ensure_bcm_clients()?, "issued once");
    let (admin_stem, _) = BCM_CLIENTS[0];
    let (readonly_stem, _) = BCM_CLIENTS[1];

    let emu = BcmEmulator::start(config(dir.path(), &pki)).await?;
    let url = emu.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let admin = client(&pki, Some(admin_stem))?;
    // Names are resolved from the list, as pythoncm does; getDevice takes a uuid.
    let (_, all) = call(&admin, &url, None, "cmdevice", "getDevices", json!([])).await?;
    let uuid = all
        .as_array()
        .and_then(|a| a.iter().find(|d| d["hostname"] == "gpu-a-01"))
        .map(|d| d["uuid"].clone())
        .ok_or("gpu-a-01 is not listed")?;
    let (status, d) = call(&admin, &url, None, "cmdevice", "getDevice", json!([uuid])).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(d["hostname"], "gpu-a-01");
    let (_, missing) = call(&admin, &url, None, "cmdevice", "getDevice", json!(["nope"])).await?;
    assert_eq!(missing, Value::Null);

    let mut changed = d.clone();
    changed["extra_values"]["gpufleet_tenant"] = json!("acme");
    let (_, r) = call(
        &admin,
        &url,
        None,
        "cmdevice",
        "updateDevice",
        json!([changed, 0]),
    )
    .await?;
    assert_eq!(r["success"], true, "{r}");

    // The read-only profile reads and is refused writes.
    let readonly = client(&pki, Some(readonly_stem))?;
    let (_, got) = call(
        &readonly,
        &url,
        None,
        "cmdevice",
        "getDevice",
        json!([uuid]),
    )
    .await?;
    assert_eq!(got["extra_values"]["gpufleet_tenant"], "acme");
    let (status, r) = call(
        &readonly,
        &url,
        None,
        "cmdevice",
        "updateDevice",
        json!([got, 0]),
    )
    .await?;
    // cmdaemon's "call restricted" status (pythoncm's rpc.py).
    assert_eq!(status.as_u16(), 640);
    assert_eq!(
        r["errormessage"],
        "Profile readonly does not allow access to cmdevice.updateDevice"
    );

    // No certificate: 401, until a login.
    let anonymous = client(&pki, None)?;
    let (status, _) = call(&anonymous, &url, None, "cmdevice", "getDevices", json!([])).await?;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let r = anonymous
        .post(format!("{url}/json"))
        .json(&json!({"service": "login", "username": "root", "password": "cmdaemon"}))
        .send()
        .await?;
    assert_eq!(r.status(), StatusCode::OK);
    let set_cookie = r
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .ok_or("no Set-Cookie")?
        .to_str()?
        .to_owned();
    assert!(set_cookie.starts_with("cm-login-token="), "{set_cookie}");
    assert_eq!(r.json::<Value>().await?, json!(true));
    let cookie = set_cookie.split(';').next().unwrap_or_default().to_owned();
    let (status, all) = call(
        &anonymous,
        &url,
        Some(&cookie),
        "cmdevice",
        "getDevices",
        json!([]),
    )
    .await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(all.as_array().map(Vec::len), Some(2));

    // The admin plane needs no certificate.
    let health: Value = anonymous
        .get(format!("{url}/_admin/healthz"))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(health["status"], "ok");

    // TLS verification is real both ways.
    let other = tempfile::tempdir()?;
    let other_pki = Pki::new(other.path());
    other_pki.generate()?;
    other_pki.ensure_bcm_clients()?;
    let stranger = reqwest::Client::builder()
        .tls_certs_only([ca(&other_pki)?])
        .build()?;
    assert!(
        stranger
            .get(format!("{url}/_admin/healthz"))
            .send()
            .await
            .is_err()
    );
    let mut pem = std::fs::read(other_pki.cert(admin_stem))?;
    pem.extend(std::fs::read(other_pki.key(admin_stem))?);
    let impostor = reqwest::Client::builder()
        .tls_certs_only([ca(&pki)?])
        .identity(reqwest::Identity::from_pem(&pem)?)
        .build()?;
    assert!(
        call(&impostor, &url, None, "cmdevice", "getDevices", json!([]))
            .await
            .is_err(),
        "a certificate from another CA is refused"
    );

    // A reset on the real clock reaches UP.
    let (_, p) = call(
        &admin,
        &url,
        None,
        "cmdevice",
        "powerOperation",
        json!([{"devices": [uuid], "operation": "RESET", "force": false}]),
    )
    .await?;
    assert_eq!(p["count"], 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, s) = call(&admin, &url, None, "cmstatus", "getStatus", json!([uuid])).await?;
        if s["status"] == "UP" {
            break;
        }
        assert!(Instant::now() < deadline, "never came up: {s}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let journal: Value = anonymous
        .get(format!("{url}/_admin/journal"))
        .send()
        .await?
        .json()
        .await?;
    assert!(journal.as_array().is_some_and(|j| {
        j.iter()
            .any(|e| e["call"] == "powerOperation" && e["profile"] == "admin")
    }));

    // Restart from the same directory: the state survives.
    emu.shutdown().await;
    let emu = BcmEmulator::start(config(dir.path(), &pki)).await?;
    let (_, got) = call(
        &admin,
        &emu.url(),
        None,
        "cmdevice",
        "getDevice",
        json!([uuid]),
    )
    .await?;
    assert_eq!(got["extra_values"]["gpufleet_tenant"], "acme");
    emu.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_its_own_it_makes_a_ca_and_client_certificates() -> TestResult {
    gpufleet_lab::install_crypto_provider();
    let dir = tempfile::tempdir()?;
    let mut config = BcmConfig::new(dir.path());
    config.inventory = BcmInventory::default();
    let emu = BcmEmulator::start(config).await?;
    let ca = reqwest::Certificate::from_pem(&std::fs::read(emu.ca_pem_path())?)?;
    let (crt, key) = gpufleet_lab::bcm::tls::OWN_ADMIN;
    let mut pem = std::fs::read(dir.path().join(crt))?;
    pem.extend(std::fs::read(dir.path().join(key))?);
    let http = reqwest::Client::builder()
        .tls_certs_only([ca])
        .identity(reqwest::Identity::from_pem(&pem)?)
        .build()?;
    let (status, v) = call(&http, &emu.url(), None, "cmmain", "getVersion", json!([])).await?;
    assert_eq!(status, StatusCode::OK);
    assert!(v["cmVersion"].is_string(), "{v}");
    emu.shutdown().await;
    Ok(())
}
