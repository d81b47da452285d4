//! Calls to the shared lab's emulators that tests use to set up a fleet as a user's could be.

use std::process::Command;

use gpufleet_lab::Lab;
use serde_json::{Value, json};

/// A cmdaemon call as the lab's admin client certificate (`curl` to `POST /json`).
pub fn bcm_call(service: &str, call: &str, args: &Value) -> Value {
    let env = Lab::shared().settings_env();
    let get = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{name} is not set by the lab"))
    };
    let body = json!({"service": service, "call": call, "args": args});
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-f", "-X", "POST", "--cacert"])
        .arg(get("GPUFLEET_BCM_CA_CERTIFICATE"))
        .arg("--cert")
        .arg(get("GPUFLEET_BCM_CLIENT_CERTIFICATE"))
        .arg("--key")
        .arg(get("GPUFLEET_BCM_CLIENT_KEY"))
        .args(["-H", "Content-Type: application/json", "--data"])
        .arg(body.to_string())
        .arg(format!("{}/json", get("GPUFLEET_BCM_ENDPOINT")));
    json_of(cmd, &format!("{service}.{call}"))
}

/// Adds `body`, if any, to a `curl` as its JSON request body.
fn with_json_body(cmd: &mut Command, body: Option<&Value>) {
    if let Some(b) = body {
        cmd.args([
            "-H",
            "Content-Type: application/json",
            "--data",
            &b.to_string(),
        ]);
    }
}

/// Runs a `curl` that must succeed; its JSON answer (null when it is none).
fn json_of(mut cmd: Command, what: &str) -> Value {
    let out = cmd.output().expect("run curl");
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `method path` on the shared lab's BCM emulator's admin plane (trusting the lab CA), which
/// must succeed; the JSON answer.
pub fn bcm_admin(method: &str, path: &str, body: Option<&Value>) -> Value {
    let lab = Lab::shared();
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-f", "-X", method, "--cacert"])
        .arg(lab.bcm_ca())
        .arg(format!("{}{path}", lab.bcm_url()));
    with_json_body(&mut cmd, body);
    json_of(cmd, &format!("curl {method} {path}"))
}

/// How many power operations BCM's journal holds for the device of `hostname`.
pub fn bcm_power_calls(hostname: &str) -> usize {
    let uuid = bcm_device(hostname)["uuid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    bcm_admin("GET", "/_admin/journal", None)
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["call"] == "powerOperation" && e["args"].to_string().contains(&uuid))
        .count()
}

/// The BCM device named `hostname`, found as clients resolve names: among all devices
/// (cmdaemon fetches single devices by uuid only).
pub fn bcm_device(hostname: &str) -> Value {
    bcm_call("cmdevice", "getDevices", &json!([]))
        .as_array()
        .and_then(|all| all.iter().find(|d| d["hostname"] == hostname).cloned())
        .unwrap_or_else(|| panic!("BCM has no device named {hostname}"))
}

/// `curl` against the shared lab's Netris emulator (trusting its CA), with an optional JSON
/// body and cookie jar; the HTTP status and the JSON body.
pub fn netris_curl(
    method: &str,
    path: &str,
    body: Option<&Value>,
    jar: Option<&std::path::Path>,
) -> (u16, Value) {
    let lab = Lab::shared();
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-X", method, "-w", "\n%{http_code}", "--cacert"])
        .arg(lab.paths().netris_ca())
        .arg(format!("{}{path}", lab.netris_url()));
    with_json_body(&mut cmd, body);
    if let Some(jar) = jar {
        cmd.arg("-b").arg(jar).arg("-c").arg(jar);
    }
    let out = cmd.output().expect("run curl");
    assert!(
        out.status.success(),
        "curl {method} {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').expect("status line");
    let value = serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()));
    (code.trim().parse().expect("status"), value)
}

/// `method path` on the shared lab's Netris emulator's admin plane, which must answer 200;
/// the JSON answer.
pub fn netris_admin(method: &str, path: &str, body: Option<&Value>) -> Value {
    let (status, value) = netris_curl(method, path, body, None);
    assert_eq!(status, 200, "{method} {path}: {value}");
    value
}

/// A cookie jar logged in to the shared lab's Netris emulator as its admin user, for calls
/// made through the controller's own API the way an operator's script makes them.
pub fn netris_login() -> tempfile::NamedTempFile {
    let jar = tempfile::NamedTempFile::new().expect("jar");
    let (status, body) = netris_curl(
        "POST",
        "/api/auth",
        Some(&json!({"user": "netris", "password": "newNet0ps", "auth_scheme_id": 1})),
        Some(jar.path()),
    );
    assert_eq!(status, 200, "{body}");
    jar
}
