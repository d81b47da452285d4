//! What the emulators' `/_admin/` planes share: where the plane is, its plain JSON
//! answers (no API envelope: the plane is the lab's, not the product's), and the checks
//! of a fault rule's status and count. Each emulator keeps its own routes and faults.

use serde_json::json;

use super::Response;

/// Whether a request path is on the admin plane rather than the API.
pub(crate) fn is_admin_path(path: &str) -> bool {
    path == "/_admin" || path.starts_with("/_admin/")
}

/// `{"error": message}` with `status`.
pub(crate) fn error(status: u16, message: impl Into<String>) -> Response {
    Response::new(status, json!({"error": message.into()}))
}

/// The answer of `GET /_admin/healthz`.
pub(crate) fn healthz() -> Response {
    Response::new(200, json!({"status": "ok"}))
}

/// The answer to an admin request no route takes.
pub(crate) fn no_route(method: &str, path: &str) -> Response {
    error(404, format!("{method} {path} is not an admin route"))
}

/// A fault rule's `status`, when given, must be an HTTP status.
pub(crate) fn check_status(status: Option<u16>) -> Result<(), String> {
    match status {
        Some(s) if !(100..=599).contains(&s) => Err(format!("status {s} is not an HTTP status")),
        _ => Ok(()),
    }
}

/// A fault rule's `count`, when given, must be at least 1.
pub(crate) fn check_count(count: Option<u32>) -> Result<(), String> {
    if count == Some(0) {
        return Err("count must be at least 1 (leave it out for \"until cleared\")".into());
    }
    Ok(())
}
