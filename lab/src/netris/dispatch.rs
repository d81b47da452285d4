//! The controller API as a pure function: [`handle`] takes a [`Request`] value and a
//! [`NetrisStore`] and returns an [`Outcome`] value. No sockets, no TLS, no sleeping: the
//! transport (`server`) turns the outcome into bytes (or a dropped connection,
//! or a delayed answer), and tests call [`handle`] directly.
//!
//! # Envelope
//!
//! Every answer under `/api` is
//! `{"data": …, "isSuccess": bool, "message": "…", "errors": …, "meta": {"apiVersion": "v2", "statusCode": N}}`.
//! Creates answer 200 with `data.id`. Failures have `data: null`, `isSuccess: false`,
//! a human `message`, and `errors` an object keyed by the offending field
//! (`{"prefix": "IP prefix is out of any allocation"}`) or `null`.
//!
//! # Auth
//!
//! `POST /api/auth {"user", "password", "auth_scheme_id": 1}` answers 200 with
//! `Set-Cookie: connect.sid=…`; `GET /api/auth` answers 200 while that session is valid.
//! Every other `/api` call without a valid session gets 401. Sessions last the
//! configured TTL from login (calls do not extend them).
//!
//! # Order of checks
//!
//! `down` fault (drop) → route fault (error status, the call is not carried out) →
//! auth → the call. A route fault's latency delays whatever the answer is; the call
//! itself has already taken effect, like a controller that commits and then answers
//! slowly.

use std::time::Duration;

use serde_json::{Value, json};

use super::body;
use super::model::Db;
use super::store::{FaultHit, NetrisStore};
use super::vnet::Timing;
use super::{ipam, objects, vnet};
pub use crate::emulator::{Outcome, Request, Response};

/// The API version every envelope reports.
pub const API_VERSION: &str = "v2";

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "connect.sid";

/// The build version `GET /api/users/permissions` reports.
pub const BUILD_VERSION: &str = "4.4.0-gpufleet-emulator";

/// What the dispatcher needs besides the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// The login user.
    pub user: String,
    /// The login password.
    pub password: String,
    /// How long a session lasts from login.
    pub session_ttl: Duration,
    /// How long a created or updated V-Net stays `provisioning`.
    pub provisioning_delay: Duration,
}

impl Default for ApiConfig {
    /// `netris` / `newNet0ps`, 30-minute sessions, 1 s provisioning.
    fn default() -> Self {
        Self {
            user: "netris".into(),
            password: "newNet0ps".into(),
            session_ttl: Duration::from_secs(30 * 60),
            provisioning_delay: Duration::from_secs(1),
        }
    }
}

/// Netris' body shapes on the emulators' shared answer.
impl Response {
    /// The envelope's `data`.
    #[must_use]
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    /// The session id in `set_cookie`, as a `Cookie` header value for the next request.
    #[must_use]
    pub fn session_cookie(&self) -> Option<String> {
        self.cookie(SESSION_COOKIE)
    }
}

/// An in-band API error: status, message and the `errors` object of the envelope.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The envelope's `message`.
    pub message: String,
    /// The envelope's `errors`: `{field: message}` or `null`.
    pub errors: Value,
}

impl ApiError {
    /// A 400 about one field.
    #[must_use]
    pub fn bad_request(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            status: 400,
            errors: json!({ field: message }),
            message,
        }
    }

    /// A 404.
    #[must_use]
    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: 404,
            message: message.into(),
            errors: Value::Null,
        }
    }

    /// A 401.
    #[must_use]
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self {
            status: 401,
            message: message.into(),
            errors: Value::Null,
        }
    }

    /// A 500.
    #[must_use]
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: 500,
            message: message.into(),
            errors: Value::Null,
        }
    }

    /// The same error, reported under another field (a nested field's error reported
    /// at its list: `ports`, `gateways`).
    #[must_use]
    pub fn in_field(self, field: &str) -> Self {
        Self {
            errors: json!({ field: self.message }),
            ..self
        }
    }

    /// The error as an answer.
    #[must_use]
    pub fn response(&self) -> Response {
        Response::new(
            self.status,
            envelope(self.status, Value::Null, &self.message, self.errors.clone()),
        )
    }
}

/// The envelope every `/api` answer is wrapped in.
#[must_use]
pub fn envelope(status: u16, data: Value, message: &str, errors: Value) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("data".into(), data);
    m.insert(
        "isSuccess".into(),
        Value::Bool((200..300).contains(&status)),
    );
    m.insert("message".into(), Value::String(message.to_owned()));
    m.insert("errors".into(), errors);
    m.insert(
        "meta".into(),
        json!({"apiVersion": API_VERSION, "statusCode": status}),
    );
    Value::Object(m)
}

fn ok(data: Value, message: &str) -> Response {
    Response::new(200, envelope(200, data, message, Value::Null))
}

/// The standard reason phrase of a status, for injected errors.
fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// Handles one `/api` request. See the module docs for the order of checks.
pub fn handle(store: &dyn NetrisStore, config: &ApiConfig, req: &Request) -> Outcome {
    let faults = store.faults();
    if faults.down {
        return Outcome::Drop;
    }
    let path = percent_decode(&req.path);
    let mut hit = FaultHit::default();
    if !faults.rules.is_empty() {
        store.update_faults(&mut |f| hit = f.take(&req.method, &path));
    }
    let mut response = match hit.error {
        Some((status, message)) => {
            let message = message.unwrap_or_else(|| format!("{} (injected fault)", reason(status)));
            Response::new(
                status,
                envelope(status, Value::Null, &message, json!({"fault": message})),
            )
        }
        None => route(store, config, req, &path),
    };
    response.delay = hit.delay;
    Outcome::Reply(response)
}

/// The session id in a `Cookie` header (`connect.sid=s%3A<id>`, or without the `s:`).
fn session_id(cookie: Option<&str>) -> Option<&str> {
    cookie?
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| {
            v.strip_prefix("s%3A")
                .or_else(|| v.strip_prefix("s:"))
                .unwrap_or(v)
        })
}

fn login(store: &dyn NetrisStore, config: &ApiConfig, req: &Request) -> Result<Response, ApiError> {
    let b = body::object(&req.body)?;
    let user = body::req_str(&b, "user")?;
    let password = body::opt_str(&b, "password")?.unwrap_or("");
    if let Some(scheme) = body::opt_u64(&b, "auth_scheme_id")?
        && scheme != 1
    {
        return Err(ApiError::bad_request(
            "auth_scheme_id",
            format!("auth scheme {scheme} is not configured; use 1 (local)"),
        ));
    }
    if user != config.user || password != config.password {
        return Err(ApiError::unauthorized("Wrong username or password"));
    }
    let ttl = u64::try_from(config.session_ttl.as_millis()).unwrap_or(u64::MAX);
    let expires = store.now_ms().saturating_add(ttl);
    let sid = store.new_session(user, expires);
    let mut r = ok(
        json!({"user": user, "auth_scheme_id": 1}),
        "Login successful",
    );
    r.set_cookie = Some(format!(
        "{SESSION_COOKIE}=s%3A{sid}; Path=/; Max-Age={}; HttpOnly; Secure",
        ttl / 1000
    ));
    Ok(r)
}

fn parse_vpc_filter(query: &str) -> Result<Option<Vec<u64>>, ApiError> {
    let Some(raw) = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "filterByVpc")
        .map(|(_, v)| percent_decode(v))
    else {
        return Ok(None);
    };
    raw.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim().parse::<u64>().map_err(|_| {
                ApiError::bad_request(
                    "filterByVpc",
                    format!("filterByVpc {raw:?} must be ids separated by commas"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn id(seg: &str, what: &str) -> Result<u64, ApiError> {
    seg.parse()
        .map_err(|_| ApiError::not_found(format!("{what} {seg} not found")))
}

fn route(store: &dyn NetrisStore, config: &ApiConfig, req: &Request, path: &str) -> Response {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let m = req.method.as_str();
    if segs.as_slice() == ["api", "auth"] {
        let r = match m {
            "POST" => login(store, config, req),
            "GET" => match session_id(req.cookie.as_deref()).and_then(|s| store.session(s)) {
                Some(s) => Ok(ok(json!({"user": s.user, "expires": s.expires_ms}), "")),
                None => Err(ApiError::unauthorized("Unauthorized")),
            },
            _ => Err(ApiError::not_found(format!("{m} {path} is not a route"))),
        };
        return r.unwrap_or_else(|e| e.response());
    }
    if segs.first() != Some(&"api") {
        return ApiError::not_found(format!("{m} {path} is not a route")).response();
    }
    if session_id(req.cookie.as_deref())
        .and_then(|s| store.session(s))
        .is_none()
    {
        return ApiError::unauthorized("Unauthorized").response();
    }
    let result = authenticated(store, config, req, m, &segs);
    match result {
        Ok(data) => {
            let message = match m {
                "POST" => "Created",
                "PUT" => "Updated",
                "DELETE" => "Deleted",
                _ => "",
            };
            ok(data, message)
        }
        Err(e) => e.response(),
    }
}

/// Runs a read against a snapshot.
fn read(
    store: &dyn NetrisStore,
    f: impl FnOnce(&Db) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    f(&store.snapshot())
}

/// Runs a write in a transaction with the request body.
fn write(
    store: &dyn NetrisStore,
    req: &Request,
    mut f: impl FnMut(&mut Db, &body::Obj) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let b = body::object(&req.body)?;
    store.transact(&mut |db, _| f(db, &b))
}

/// Runs a write that takes no body (DELETE).
fn delete(
    store: &dyn NetrisStore,
    mut f: impl FnMut(&mut Db) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    store.transact(&mut |db, _| f(db))
}

fn timing(store: &dyn NetrisStore, config: &ApiConfig) -> Timing {
    let now = store.now_ms();
    let delay = u64::try_from(config.provisioning_delay.as_millis()).unwrap_or(u64::MAX);
    let done = (!store.faults().provisioning_stuck).then(|| now.saturating_add(delay));
    Timing { now, done }
}

fn authenticated(
    store: &dyn NetrisStore,
    config: &ApiConfig,
    req: &Request,
    m: &str,
    segs: &[&str],
) -> Result<Value, ApiError> {
    let now = store.now_ms();
    let vpcs = || parse_vpc_filter(&req.query);
    match (m, segs) {
        ("GET", ["api", "users", "permissions"]) => Ok(json!({"buildVersion": BUILD_VERSION})),

        ("GET", ["api", "v2", "sites"]) => read(store, |db| Ok(objects::list_sites(db))),
        ("GET", ["api", "v2", "sites", i]) => {
            read(store, |db| objects::get_site(db, id(i, "site")?))
        }
        ("POST", ["api", "v2", "sites"]) => write(store, req, objects::create_site),
        ("PUT", ["api", "v2", "sites", i]) => {
            let i = id(i, "site")?;
            write(store, req, |db, b| objects::update_site(db, i, b))
        }
        ("DELETE", ["api", "v2", "sites", i]) => {
            let i = id(i, "site")?;
            delete(store, |db| objects::delete_site(db, i))
        }

        ("GET", ["api", "tenants"]) => read(store, |db| Ok(objects::list_tenants(db))),
        ("GET", ["api", "tenants", i]) => {
            read(store, |db| objects::get_tenant(db, id(i, "tenant")?))
        }
        ("POST", ["api", "tenants"]) => write(store, req, objects::create_tenant),
        ("PUT", ["api", "tenants"]) => {
            write(store, req, |db, b| objects::update_tenant(db, None, b))
        }
        ("PUT", ["api", "tenants", i]) => {
            let i = id(i, "tenant")?;
            write(store, req, |db, b| objects::update_tenant(db, Some(i), b))
        }
        ("DELETE", ["api", "tenants", i]) => {
            let i = id(i, "tenant")?;
            delete(store, |db| objects::delete_tenant(db, i))
        }

        ("GET", ["api", "v2", "vpc"]) => read(store, |db| Ok(objects::list_vpcs(db))),
        ("GET", ["api", "v2", "vpc", i]) => read(store, |db| objects::get_vpc(db, id(i, "vpc")?)),
        ("POST", ["api", "v2", "vpc"]) => {
            write(store, req, |db, b| objects::create_vpc(db, b, now))
        }
        ("PUT", ["api", "v2", "vpc", i]) => {
            let i = id(i, "vpc")?;
            write(store, req, |db, b| objects::update_vpc(db, i, b, now))
        }
        ("DELETE", ["api", "v2", "vpc", i]) => {
            let i = id(i, "vpc")?;
            delete(store, |db| objects::delete_vpc(db, i))
        }

        ("GET", ["api", "v2", "ipam"]) => {
            let f = vpcs()?;
            read(store, |db| Ok(ipam::tree(db, f.as_deref())))
        }
        ("GET", ["api", "v2", "ipam", "subnets"]) => {
            let f = vpcs()?;
            read(store, |db| Ok(ipam::list_subnets(db, f.as_deref())))
        }
        ("GET", ["api", "v2", "ipam", "allocations"]) => {
            let f = vpcs()?;
            read(store, |db| Ok(ipam::list_allocations(db, f.as_deref())))
        }
        ("POST", ["api", "v2", "ipam", "allocation"]) => {
            write(store, req, |db, b| ipam::create_allocation(db, b, now))
        }
        ("GET", ["api", "v2", "ipam", "allocation", i]) => {
            read(store, |db| ipam::get_allocation(db, id(i, "allocation")?))
        }
        ("PUT", ["api", "v2", "ipam", "allocation", i]) => {
            let i = id(i, "allocation")?;
            write(store, req, |db, b| ipam::update_allocation(db, i, b, now))
        }
        ("DELETE", ["api", "v2", "ipam", "allocation", rest @ ..]) if !rest.is_empty() => {
            let key = rest.join("/");
            delete(store, |db| ipam::delete_allocation(db, &key))
        }
        ("POST", ["api", "v2", "ipam", "subnet"]) => {
            write(store, req, |db, b| ipam::create_subnet(db, b, now))
        }
        ("GET", ["api", "v2", "ipam", "subnet", i]) => {
            read(store, |db| ipam::get_subnet(db, id(i, "subnet")?))
        }
        ("PUT", ["api", "v2", "ipam", "subnet", i]) => {
            let i = id(i, "subnet")?;
            write(store, req, |db, b| ipam::update_subnet(db, i, b, now))
        }
        ("DELETE", ["api", "v2", "ipam", "subnet", rest @ ..]) if !rest.is_empty() => {
            let key = rest.join("/");
            delete(store, |db| ipam::delete_subnet(db, &key))
        }

        ("GET", ["api", "v2", "vnet"]) => {
            let f = vpcs()?;
            read(store, |db| Ok(vnet::list(db, f.as_deref(), now)))
        }
        ("GET", ["api", "v2", "vnet", i]) => read(store, |db| vnet::get(db, id(i, "vnet")?, now)),
        ("POST", ["api", "v2", "vnet"]) => {
            let t = timing(store, config);
            write(store, req, |db, b| vnet::create(db, b, t))
        }
        ("PUT", ["api", "v2", "vnet", i]) => {
            let i = id(i, "vnet")?;
            let t = timing(store, config);
            write(store, req, |db, b| vnet::update(db, i, b, t))
        }
        ("DELETE", ["api", "v2", "vnet", i]) => {
            let i = id(i, "vnet")?;
            delete(store, |db| vnet::delete(db, i))
        }

        ("GET", ["api", "v2", "hw"]) => read(store, |db| Ok(objects::list_hw(db))),
        ("GET", ["api", "v2", "hw", "switch"]) => read(store, |db| Ok(objects::list_switches(db))),
        ("GET", ["api", "v2", "hw", "switch", i]) => {
            read(store, |db| objects::get_switch(db, id(i, "switch")?))
        }
        ("GET", ["api", "v2", "hw", "server"]) => read(store, |db| Ok(objects::list_servers(db))),
        ("GET", ["api", "v2", "hw", "server", i]) => {
            read(store, |db| objects::get_server(db, id(i, "server")?))
        }
        ("GET", ["api", "v2", "ports"]) => read(store, |db| Ok(objects::list_ports(db))),
        ("GET", ["api", "v2", "ports", i]) => {
            read(store, |db| objects::get_port(db, id(i, "port")?))
        }

        _ => Err(ApiError::not_found(format!(
            "{m} /{} is not a route",
            segs.join("/")
        ))),
    }
}

/// Decodes `%XX` escapes (invalid ones are kept as written).
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The list of routes, for documentation and the fuzz test: `(method, path)` with `{id}`
/// and `{key}` placeholders.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/auth"),
    ("GET", "/api/auth"),
    ("GET", "/api/users/permissions"),
    ("GET", "/api/v2/sites"),
    ("GET", "/api/v2/sites/{id}"),
    ("POST", "/api/v2/sites"),
    ("PUT", "/api/v2/sites/{id}"),
    ("DELETE", "/api/v2/sites/{id}"),
    ("GET", "/api/tenants"),
    ("GET", "/api/tenants/{id}"),
    ("POST", "/api/tenants"),
    ("PUT", "/api/tenants"),
    ("PUT", "/api/tenants/{id}"),
    ("DELETE", "/api/tenants/{id}"),
    ("GET", "/api/v2/vpc"),
    ("GET", "/api/v2/vpc/{id}"),
    ("POST", "/api/v2/vpc"),
    ("PUT", "/api/v2/vpc/{id}"),
    ("DELETE", "/api/v2/vpc/{id}"),
    ("GET", "/api/v2/ipam"),
    ("GET", "/api/v2/ipam/subnets"),
    ("GET", "/api/v2/ipam/allocations"),
    ("POST", "/api/v2/ipam/allocation"),
    ("GET", "/api/v2/ipam/allocation/{id}"),
    ("PUT", "/api/v2/ipam/allocation/{id}"),
    ("DELETE", "/api/v2/ipam/allocation/{key}"),
    ("POST", "/api/v2/ipam/subnet"),
    ("GET", "/api/v2/ipam/subnet/{id}"),
    ("PUT", "/api/v2/ipam/subnet/{id}"),
    ("DELETE", "/api/v2/ipam/subnet/{key}"),
    ("GET", "/api/v2/vnet"),
    ("GET", "/api/v2/vnet/{id}"),
    ("POST", "/api/v2/vnet"),
    ("PUT", "/api/v2/vnet/{id}"),
    ("DELETE", "/api/v2/vnet/{id}"),
    ("GET", "/api/v2/hw"),
    ("GET", "/api/v2/hw/switch"),
    ("GET", "/api/v2/hw/switch/{id}"),
    ("GET", "/api/v2/hw/server"),
    ("GET", "/api/v2/hw/server/{id}"),
    ("GET", "/api/v2/ports"),
    ("GET", "/api/v2/ports/{id}"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_percent_decoding() {
        assert_eq!(session_id(Some("a=b; connect.sid=s%3Aabc")), Some("abc"));
        assert_eq!(session_id(Some("connect.sid=s:abc")), Some("abc"));
        assert_eq!(session_id(Some("connect.sid=abc")), Some("abc"));
        assert_eq!(session_id(Some("other=1")), None);
        assert_eq!(session_id(None), None);
        assert_eq!(percent_decode("10.0.0.0%2F8"), "10.0.0.0/8");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%C3%A9"), "é");
    }

    #[test]
    fn vpc_filters() {
        assert_eq!(
            parse_vpc_filter("filterByVpc=1,2").expect("ok"),
            Some(vec![1, 2])
        );
        assert_eq!(
            parse_vpc_filter("filterByVpc=1%2C3").expect("ok"),
            Some(vec![1, 3])
        );
        assert_eq!(parse_vpc_filter("x=1").expect("ok"), None);
        assert!(parse_vpc_filter("filterByVpc=a").is_err());
    }
}
