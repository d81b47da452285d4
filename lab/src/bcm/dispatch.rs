//! The JSON API as a pure function: [`handle`] takes a [`Request`] value and the store
//! and returns an [`Outcome`] value. No sockets, no TLS, no sleeping: the transport
//! turns the outcome into bytes, a dropped connection or a delayed answer, and tests
//! call [`handle`] directly.
//!
//! # The wire
//!
//! `POST /json` with `{"service": "cmdevice", "call": "getDevice", "args": [...]}`
//! (service names in any case; `"arg": x` means `"args": [x]`; missing, `[]` or `{}`
//! args mean none). Success results are bare JSON; a missing device is `null`. A
//! failed call answers HTTP 200 `{"errormessage": "…"}`; commits answer
//! `{"success", "validation", "task_uuid"}`. A body that is not a call at all answers
//! 400 `{"errormessage": "…"}`.
//!
//! # Authentication
//!
//! The transport passes the client certificate's common name: `admin` may call
//! everything, `readonly` only `get*` calls and `cmstatus.*`, any other name nothing.
//! Without a certificate, `{"service": "login", "username", "password"}` answers `true`
//! and sets a `cm-login-token` cookie that acts as `admin`. No certificate and no valid
//! token: HTTP 401.
//!
//! # Order of checks
//!
//! `down` fault (drop) → body → login → journal → authentication → unknown call →
//! profile → call fault → the call.

use std::time::Duration;

use serde_json::{Value, json};

use super::boot;
use super::entities::{self, Kind};
use super::model::Db;
use super::store::{BcmStore, CallError, FaultHit, JournalEntry};
use super::uuid::random_uuid;
use crate::emulator::Store as _;
pub use crate::emulator::{Outcome, Request, Response};

/// The login cookie's name.
pub const TOKEN_COOKIE: &str = "cm-login-token";

/// What `cmmain.getVersion` reports.
pub const CM_VERSION: &str = "11.0-gpufleet-emulator";

/// What the dispatcher needs besides the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    /// The login user.
    pub user: String,
    /// The login password.
    pub password: String,
    /// The length of one boot step (`DOWN → BOOTING → INSTALLING →
    /// INSTALLER_CALLING_INIT → UP` takes four).
    pub boot_step: Duration,
}

impl Default for ApiConfig {
    /// `root` / `cmdaemon`, 1 s steps.
    fn default() -> Self {
        Self {
            user: "root".into(),
            password: "cmdaemon".into(),
            boot_step: Duration::from_secs(1),
        }
    }
}

/// BCM's calls on the emulators' shared request.
impl Request {
    /// A `POST /json` request with this body, as client `cn` (`None`: no certificate).
    #[must_use]
    pub fn json_call(cn: Option<&str>, body: &Value) -> Self {
        Request::new("POST", "/json").client_cn(cn).json(body)
    }
}

/// BCM's body shapes on the emulators' shared answer.
impl Response {
    /// `{"errormessage": message}` with `status`.
    #[must_use]
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::new(status, json!({"errormessage": message.into()}))
    }

    /// The in-band error message, if the answer is one.
    #[must_use]
    pub fn errormessage(&self) -> Option<&str> {
        self.body.get("errormessage").and_then(Value::as_str)
    }

    /// The login token in `set_cookie`, as a `Cookie` header value.
    #[must_use]
    pub fn token_cookie(&self) -> Option<String> {
        self.cookie(TOKEN_COOKIE)
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    /// Everything.
    Admin,
    /// `get*` calls and `cmstatus.*`.
    ReadOnly,
    /// A certificate with another common name: nothing.
    Other(String),
}

impl Profile {
    /// The profile of a certificate with common name `cn`.
    #[must_use]
    pub fn from_cn(cn: &str) -> Self {
        match cn {
            "admin" => Self::Admin,
            "readonly" => Self::ReadOnly,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Admin => "admin",
            Self::ReadOnly => "readonly",
            Self::Other(n) => n,
        }
    }

    fn allows(&self, service: &str, call: &str) -> bool {
        match self {
            Self::Admin => true,
            Self::ReadOnly => call.starts_with("get") || service == "cmstatus",
            Self::Other(_) => false,
        }
    }
}

/// A parsed `/json` body.
#[derive(Debug, Clone, PartialEq)]
enum Body {
    Login { username: String, password: String },
    Call(Call),
}

/// One RPC.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    /// Lower case.
    service: String,
    call: String,
    args: Vec<Value>,
}

/// Every call the emulator knows, `(service, call, arguments)`, each as NVIDIA's pythoncm
/// client makes it (its `rpc/service.py` getters, `Entity.commit`/`remove`, `parallel.py`):
/// getters take a uuid (devices, categories and images are fetched by uuid only; names are
/// resolved from the full lists), commits take the entity and `force`, removals the uuids
/// and `force`, `getSysInfoCollectors` the uuids, `basic` and `add_empty`.
pub const CALLS: &[(&str, &str, usize)] = &[
    ("cmdevice", "getDevice", 1),
    ("cmdevice", "getDevices", 0),
    ("cmdevice", "getCategory", 1),
    ("cmdevice", "getCategories", 0),
    ("cmdevice", "addDevice", 2),
    ("cmdevice", "updateDevice", 2),
    ("cmdevice", "removeDevice", 2),
    ("cmdevice", "addCategory", 2),
    ("cmdevice", "updateCategory", 2),
    ("cmdevice", "removeCategory", 2),
    ("cmdevice", "powerOperation", 1),
    ("cmdevice", "getSysInfoCollectors", 3),
    ("cmpart", "getSoftwareImage", 1),
    ("cmpart", "getSoftwareImages", 0),
    ("cmpart", "addSoftwareImage", 2),
    ("cmpart", "updateSoftwareImage", 2),
    ("cmpart", "removeSoftwareImage", 2),
    ("cmstatus", "getStatus", 1),
    ("cmstatus", "getStatusForDevices", 1),
    ("cmmain", "getVersion", 0),
];

/// HTTP status of a call a profile may not make (pythoncm's `rpc.py`: 635 for a restricted
/// service, 640 for a restricted call).
pub const RPC_RESTRICTED: u16 = 640;

fn parse(bytes: &[u8]) -> Result<Body, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the body is not valid JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err("the body must be a JSON object {\"service\", \"call\", \"args\"}".into());
    };
    let service = match obj.get("service") {
        Some(Value::String(s)) if !s.is_empty() => s.to_ascii_lowercase(),
        _ => return Err("the body has no \"service\" (a non-empty string)".into()),
    };
    if service == "login" {
        let field = |k: &str| match obj.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(format!("login needs \"{k}\" (a string)")),
        };
        return Ok(Body::Login {
            username: field("username")?,
            password: field("password")?,
        });
    }
    let call = match obj.get("call") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err("the body has no \"call\" (a non-empty string)".into()),
    };
    let args = match (obj.get("args"), obj.get("arg")) {
        (Some(Value::Array(a)), _) => a.clone(),
        (Some(Value::Object(m)), _) if !m.is_empty() => vec![Value::Object(m.clone())],
        (Some(Value::Object(_) | Value::Null) | None, Some(arg)) => vec![arg.clone()],
        (Some(Value::Object(_) | Value::Null) | None, None) => Vec::new(),
        (Some(other), _) => vec![other.clone()],
    };
    Ok(Body::Call(Call {
        service,
        call,
        args,
    }))
}

/// The login token in a `Cookie` header.
fn token(cookie: Option<&str>) -> Option<&str> {
    cookie?
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == TOKEN_COOKIE)
        .map(|(_, v)| v)
}

/// Handles one request that is not for the admin plane.
pub fn handle(store: &BcmStore, config: &ApiConfig, req: &Request) -> Outcome {
    if store.faults().down {
        return Outcome::Drop;
    }
    if req.path.trim_end_matches('/') != "/json" {
        return Outcome::Reply(Response::error(
            404,
            format!("{} is not served here; use POST /json", req.path),
        ));
    }
    if req.method != "POST" {
        return Outcome::Reply(Response::error(
            405,
            format!("{} /json: use POST", req.method),
        ));
    }
    let call = match parse(&req.body) {
        Ok(Body::Call(c)) => c,
        Ok(Body::Login { username, password }) => {
            return Outcome::Reply(login(store, config, req, &username, &password));
        }
        Err(e) => return Outcome::Reply(Response::error(400, e)),
    };
    let profile = match (&req.client_cn, token(req.cookie.as_deref())) {
        (Some(cn), _) => Some(Profile::from_cn(cn)),
        (None, Some(t)) if store.has_token(t) => Some(Profile::Admin),
        _ => None,
    };
    store.record(JournalEntry {
        at: store.now_ms(),
        service: call.service.clone(),
        call: call.call.clone(),
        args: call.args.clone(),
        profile: profile.as_ref().map_or("none", Profile::name).to_owned(),
    });
    let Some(profile) = profile else {
        return Outcome::Reply(Response::error(
            401,
            "authentication required: present a client certificate or log in",
        ));
    };
    let name = format!("{}.{}", call.service, call.call);
    // cmdaemon since 8.2 answers an unknown call, and a call with the wrong number of
    // arguments, with HTTP 400 (older ones said so in-band with HTTP 200).
    let Some(&(_, _, arity)) = CALLS
        .iter()
        .find(|(s, c, _)| *s == call.service && *c == call.call)
    else {
        return Outcome::Reply(Response::error(400, format!("no such call: {name}")));
    };
    if call.args.len() != arity {
        return Outcome::Reply(Response::error(
            400,
            format!(
                "{name} takes {arity} argument(s), {} given",
                call.args.len()
            ),
        ));
    }
    if !profile.allows(&call.service, &call.call) {
        return Outcome::Reply(Response::error(
            RPC_RESTRICTED,
            format!("Profile {} does not allow access to {name}", profile.name()),
        ));
    }
    let mut hit = FaultHit::default();
    store.update_faults(&mut |f| {
        if !f.rules.is_empty() {
            hit = f.take(&call.service, &call.call);
        }
    });
    let mut response = match hit.error {
        Some((status, message)) => Response::error(status, message),
        None => run(store, config, &call),
    };
    response.delay = hit.delay;
    Outcome::Reply(response)
}

fn login(
    store: &BcmStore,
    config: &ApiConfig,
    req: &Request,
    username: &str,
    password: &str,
) -> Response {
    store.record(JournalEntry {
        at: store.now_ms(),
        service: "login".into(),
        call: String::new(),
        args: vec![json!(username)],
        profile: req.client_cn.as_deref().map_or_else(
            || "none".into(),
            |cn| Profile::from_cn(cn).name().to_owned(),
        ),
    });
    if username != config.user || password != config.password {
        return Response::error(401, "login failed: wrong username or password");
    }
    let token = store.new_token();
    let mut r = Response::new(200, Value::Bool(true));
    r.set_cookie = Some(format!("{TOKEN_COOKIE}={token}; path=/; Secure; HttpOnly"));
    r
}

/// The `i`-th argument (`null` when missing).
fn arg(args: &[Value], i: usize) -> &Value {
    args.get(i).unwrap_or(&Value::Null)
}

/// The `i`-th argument as a string.
fn arg_str<'a>(args: &'a [Value], i: usize, name: &str) -> Result<&'a str, CallError> {
    arg(args, i)
        .as_str()
        .ok_or_else(|| CallError::Message(format!("{name}: argument {} must be a string", i + 1)))
}

fn read(store: &BcmStore, f: impl Fn(&Db) -> Result<Value, CallError>) -> Result<Value, CallError> {
    store.transact(&mut |db, _| f(db))
}

fn commit(
    store: &BcmStore,
    mut f: impl FnMut(&mut Db) -> Result<(), CallError>,
) -> Result<Value, CallError> {
    store.transact(&mut |db, _| {
        f(db)?;
        Ok(json!({"success": true, "validation": [], "task_uuid": random_uuid()}))
    })
}

fn lookup(map: Option<(&String, &super::model::Obj)>) -> Value {
    map.map_or(Value::Null, |(_, o)| Value::Object(o.clone()))
}

fn run(store: &BcmStore, config: &ApiConfig, call: &Call) -> Response {
    let args = &call.args;
    let step_ms = u64::try_from(config.boot_step.as_millis()).unwrap_or(u64::MAX);
    let result = match (call.service.as_str(), call.call.as_str()) {
        ("cmdevice", "getDevice") => arg_str(args, 0, &call.call)
            .and_then(|key| read(store, |db| Ok(lookup(db.find_device(key))))),
        ("cmdevice", "getDevices") => read(store, |db| {
            Ok(Value::Array(
                db.devices.values().cloned().map(Value::Object).collect(),
            ))
        }),
        ("cmdevice", "getCategory") => arg_str(args, 0, "getCategory")
            .and_then(|key| read(store, |db| Ok(lookup(db.find_category(key))))),
        ("cmdevice", "getCategories") => read(store, |db| {
            Ok(Value::Array(
                db.categories.values().cloned().map(Value::Object).collect(),
            ))
        }),
        ("cmpart", "getSoftwareImage") => arg_str(args, 0, "getSoftwareImage")
            .and_then(|key| read(store, |db| Ok(lookup(db.find_image(key))))),
        ("cmpart", "getSoftwareImages") => read(store, |db| {
            Ok(Value::Array(
                db.images.values().cloned().map(Value::Object).collect(),
            ))
        }),
        ("cmdevice", "addDevice") => commit(store, |db| {
            entities::commit(db, Kind::Device, arg(args, 0), true)
        }),
        ("cmdevice", "updateDevice") => commit(store, |db| {
            entities::commit(db, Kind::Device, arg(args, 0), false)
        }),
        ("cmdevice", "removeDevice") => {
            commit(store, |db| entities::remove(db, Kind::Device, arg(args, 0)))
        }
        ("cmdevice", "addCategory") => commit(store, |db| {
            entities::commit(db, Kind::Category, arg(args, 0), true)
        }),
        ("cmdevice", "updateCategory") => commit(store, |db| {
            entities::commit(db, Kind::Category, arg(args, 0), false)
        }),
        ("cmdevice", "removeCategory") => commit(store, |db| {
            entities::remove(db, Kind::Category, arg(args, 0))
        }),
        ("cmpart", "addSoftwareImage") => commit(store, |db| {
            entities::commit(db, Kind::Image, arg(args, 0), true)
        }),
        ("cmpart", "updateSoftwareImage") => commit(store, |db| {
            entities::commit(db, Kind::Image, arg(args, 0), false)
        }),
        ("cmpart", "removeSoftwareImage") => {
            commit(store, |db| entities::remove(db, Kind::Image, arg(args, 0)))
        }
        ("cmdevice", "powerOperation") => {
            let faults = store.faults();
            store.transact(&mut |db, now| {
                boot::power_operation(db, arg(args, 0), now, step_ms, &faults)
            })
        }
        ("cmdevice", "getSysInfoCollectors") => match (arg(args, 0), arg(args, 1), arg(args, 2)) {
            (Value::Array(keys), Value::Bool(_), Value::Bool(_)) => read(store, |db| {
                Ok(Value::Array(
                    keys.iter()
                        .filter_map(Value::as_str)
                        .filter_map(|k| db.find_device(k))
                        .filter_map(|(u, _)| boot::sysinfo_json(db, u))
                        .collect(),
                ))
            }),
            _ => Err(CallError::Message(
                "getSysInfoCollectors: the arguments are a list of device uuids, then basic \
                 and add_empty (booleans)"
                    .into(),
            )),
        },
        ("cmstatus", "getStatus") => arg_str(args, 0, "getStatus").and_then(|key| {
            read(store, |db| {
                Ok(db
                    .find_device(key)
                    .and_then(|(u, _)| db.nodes.get(u).map(|n| boot::status_json(u, n)))
                    .unwrap_or(Value::Null))
            })
        }),
        ("cmstatus", "getStatusForDevices") => match arg(args, 0) {
            Value::Array(keys) => read(store, |db| {
                Ok(Value::Array(
                    keys.iter()
                        .filter_map(Value::as_str)
                        .filter_map(|k| db.find_device(k))
                        .filter_map(|(u, _)| db.nodes.get(u).map(|n| boot::status_json(u, n)))
                        .collect(),
                ))
            }),
            _ => Err(CallError::Message(
                "getStatusForDevices: argument 1 must be a list of device uuids".into(),
            )),
        },
        ("cmmain", "getVersion") => Ok(json!({
            "baseType": "VersionInfo",
            "cmVersion": CM_VERSION,
            "cmdaemonVersion": CM_VERSION,
            "cmdaemonBuildIndex": 0,
            "cmdaemonBuildHash": "gpufleet",
            "databaseVersion": 0,
        })),
        _ => Err(CallError::Message(format!(
            "no such call: {}.{}",
            call.service, call.call
        ))),
    };
    match result {
        Ok(v) => Response::new(200, v),
        Err(CallError::Message(m)) => Response::error(400, m),
        Err(CallError::Refused(validation)) => Response::new(
            200,
            json!({"success": false, "validation": validation, "task_uuid": random_uuid()}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_in_every_accepted_shape() {
        let args = |b: &str| match parse(b.as_bytes()) {
            Ok(Body::Call(c)) => c.args,
            other => panic!("{b}: {other:?}"),
        };
        assert_eq!(
            args(r#"{"service":"cmdevice","call":"x","args":[1,2]}"#),
            [json!(1), json!(2)]
        );
        assert_eq!(
            args(r#"{"service":"cmdevice","call":"x","arg":"a"}"#),
            [json!("a")]
        );
        assert!(args(r#"{"service":"cmdevice","call":"x","args":{}}"#).is_empty());
        assert!(args(r#"{"service":"cmdevice","call":"x"}"#).is_empty());
        assert_eq!(
            args(r#"{"service":"cmdevice","call":"x","args":{"a":1}}"#),
            [json!({"a": 1})]
        );
        assert!(parse(b"[]").is_err());
        assert!(parse(br#"{"service":1}"#).is_err());
        assert!(matches!(
            parse(br#"{"service":"LOGIN","username":"u","password":"p"}"#),
            Ok(Body::Login { .. })
        ));
    }

    #[test]
    fn tokens_come_from_the_cookie_header() {
        assert_eq!(token(Some("a=b; cm-login-token=xyz")), Some("xyz"));
        assert_eq!(token(Some("a=b")), None);
        assert_eq!(token(None), None);
    }
}
