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
    let out = Command::new("curl")
        .args(["-sS", "-f", "-X", "POST", "--cacert"])
        .arg(get("GPUFLEET_BCM_CA_CERTIFICATE"))
        .arg("--cert")
        .arg(get("GPUFLEET_BCM_CLIENT_CERTIFICATE"))
        .arg("--key")
        .arg(get("GPUFLEET_BCM_CLIENT_KEY"))
        .args(["-H", "Content-Type: application/json", "--data"])
        .arg(body.to_string())
        .arg(format!("{}/json", get("GPUFLEET_BCM_ENDPOINT")))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "{service}.{call}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The BCM device named `hostname`, found as clients resolve names: among all devices
/// (cmdaemon fetches single devices by uuid only).
pub fn bcm_device(hostname: &str) -> Value {
    bcm_call("cmdevice", "getDevices", &json!([]))
        .as_array()
        .and_then(|all| all.iter().find(|d| d["hostname"] == hostname).cloned())
        .unwrap_or_else(|| panic!("BCM has no device named {hostname}"))
}

/// `method path` on the shared lab's Netris emulator's admin plane (`curl`); the JSON answer.
pub fn netris_admin(method: &str, path: &str) -> Value {
    let lab = Lab::shared();
    let ca = lab
        .settings_env()
        .into_iter()
        .find(|(k, _)| k == "GPUFLEET_NETRIS_CA_CERTIFICATE")
        .map(|(_, v)| v)
        .expect("the lab sets GPUFLEET_NETRIS_CA_CERTIFICATE");
    let out = Command::new("curl")
        .args(["-sS", "-f", "-X", method, "--cacert"])
        .arg(ca)
        .arg(format!("{}{path}", lab.netris_url()))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "{method} {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}
