//! [`BcmClient`]: cmdaemon's JSON API over HTTPS with reqwest.
//!
//! Every call goes through [`BcmClient::call`], which owns the login (password auth only;
//! one re-login on 401), the retry policy (reads only) and the call counters.

use std::{
    collections::BTreeMap,
    sync::{Mutex as StdMutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use reqwest::{StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::backends::shared::{
    LoginSession, Outcome, exchange, https_client_builder, no_answer, with_retries,
};

use super::{
    Auth, BcmApi, BcmConfig, CallStats, RetryPolicy, Secret,
    error::{ApiError, BcmError},
    types::{
        Category, CommitResult, Device, DeviceStatus, PowerOp, PowerResult, SoftwareImage, SysInfo,
    },
};

/// The login cookie's name.
const TOKEN_COOKIE: &str = "cm-login-token";

/// A BCM head node client. Cheap to share (`Arc`); calls may run concurrently.
pub struct BcmClient {
    http: reqwest::Client,
    base: String,
    login: Option<(String, Secret)>,
    request_timeout: Duration,
    retry: RetryPolicy,
    session: LoginSession,
    counters: StdMutex<BTreeMap<String, u64>>,
}

impl std::fmt::Debug for BcmClient {
    /// Shows where; never keys, passwords or tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BcmClient")
            .field("endpoint", &self.base)
            .field("password_login", &self.login.is_some())
            .finish_non_exhaustive()
    }
}

impl BcmClient {
    /// A client for `config`; connects lazily, on the first call.
    pub fn new(config: &BcmConfig) -> Result<BcmClient, BcmError> {
        let mut builder = https_client_builder(
            &config.endpoint,
            config.request_timeout,
            config.ca_pem.as_deref(),
        )
        .map_err(BcmError::Settings)?;
        let login = match &config.auth {
            Auth::Certificate { cert_pem, key_pem } => {
                let mut pem = cert_pem.clone();
                pem.push(b'\n');
                pem.extend_from_slice(key_pem.expose().as_bytes());
                let identity = reqwest::Identity::from_pem(&pem).map_err(|_| {
                    BcmError::Settings(
                        "client_certificate and client_key do not form a PEM certificate and \
                         private key"
                            .to_owned(),
                    )
                })?;
                builder = builder.identity(identity);
                None
            }
            Auth::Password { username, password } => Some((username.clone(), password.clone())),
        };
        let http = builder.build().map_err(BcmError::Https)?;
        Ok(BcmClient {
            http,
            base: config.endpoint.trim_end_matches('/').to_owned(),
            login,
            request_timeout: config.request_timeout,
            retry: config.retry,
            session: LoginSession::default(),
            counters: StdMutex::default(),
        })
    }

    fn count(&self, key: String) {
        let mut c = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        *c.entry(key).or_default() += 1;
    }

    fn transport_error(&self, e: reqwest::Error) -> ApiError {
        let after = self.request_timeout;
        no_answer(
            e,
            |url| ApiError::Timeout { url, after },
            ApiError::Transport,
        )
    }

    /// Sends one request and sorts its outcome.
    async fn send(&self, body: &Value, token: Option<&Secret>) -> Outcome<Value, ApiError> {
        let mut req = self
            .http
            .post(format!("{}/json", self.base))
            .header(header::ACCEPT, "application/json")
            .json(body);
        if let Some(t) = token {
            req = req.header(header::COOKIE, format!("{TOKEN_COOKIE}={}", t.expose()));
        }
        exchange(req, true, |e| self.transport_error(e), parse_answer).await
    }

    /// The login token and its generation, logging in first when there is none; `None`
    /// with certificate authentication.
    async fn session(&self) -> Result<Option<(Secret, u64)>, BcmError> {
        let Some((username, password)) = &self.login else {
            return Ok(None);
        };
        let session = self.session.get_or_log_in(self.log_in(username, password));
        session.await.map(Some)
    }

    /// `{"service": "login", …}`; returns the `cm-login-token` cookie. Retried like a
    /// read, since logging in twice does no harm.
    async fn log_in(&self, username: &str, password: &Secret) -> Result<Secret, BcmError> {
        let body =
            &json!({"service": "login", "username": username, "password": password.expose()});
        let answered = with_retries(&self.retry, ApiError::is_transient, move || async move {
            self.count("login".to_owned());
            let resp = self
                .http
                .post(format!("{}/json", self.base))
                .json(body)
                .send()
                .await
                .map_err(|e| self.transport_error(e))?;
            if !resp.status().is_success() {
                return Err(ApiError::Status {
                    status: resp.status().as_u16(),
                    message: "login refused".to_owned(),
                });
            }
            // The answer is final: a refusal will not turn into a token with another try.
            let token = login_token(resp.headers());
            let text = resp.text().await.unwrap_or_default();
            Ok(match (parse_answer(StatusCode::OK, &text), token) {
                (Err(e), _) => Err(e),
                (Ok(Value::Bool(true)), Some(t)) => Ok(t),
                (Ok(_), _) => Err(ApiError::Refused(
                    "login refused (wrong username or password)".to_owned(),
                )),
            })
        })
        .await;
        answered
            .and_then(|token| token)
            .map_err(|source| BcmError::Login {
                endpoint: self.base.clone(),
                source,
            })
    }

    /// One logical call: logs in when needed (once more on 401), retries reads on
    /// transient failures, counts every request under `service.call`.
    async fn call(&self, service: &str, call: &str, args: Value) -> Result<Value, ApiError> {
        let retried = call.starts_with("get") || service.eq_ignore_ascii_case("cmstatus");
        let body = json!({"service": service, "call": call, "args": args});
        let key = format!("{service}.{call}");
        let mut attempt = 1;
        let mut logged_in_again = false;
        loop {
            let session = self.session().await.map_err(|e| match e {
                BcmError::Login { source, .. } => source,
                other => ApiError::Decode(other.to_string()),
            })?;
            self.count(key.clone());
            let outcome = self.send(&body, session.as_ref().map(|(t, _)| t)).await;
            match outcome {
                Outcome::Ok(v) => return Ok(v),
                Outcome::Unauthorized => match session {
                    Some((_, generation)) if !logged_in_again => {
                        logged_in_again = true;
                        self.session.expire(generation).await;
                    }
                    _ => {
                        return Err(ApiError::Status {
                            status: 401,
                            message: "the head node did not accept the credentials (client \
                                      certificate or login)"
                                .to_owned(),
                        });
                    }
                },
                Outcome::Failed(e)
                    if retried && e.is_transient() && attempt < self.retry.attempts =>
                {
                    tracing::debug!(call = %key, attempt, error = %e, "retrying");
                    tokio::time::sleep(self.retry.delay(attempt)).await;
                    attempt += 1;
                }
                Outcome::Failed(e) => return Err(e),
            }
        }
    }

    /// A read whose answer is `T` or `null`.
    async fn get_one<T: DeserializeOwned>(
        &self,
        service: &str,
        call: &str,
        key: &str,
        what: impl Fn() -> String,
    ) -> Result<Option<T>, BcmError> {
        let step = |source| BcmError::Read {
            what: what(),
            source,
        };
        match self.call(service, call, json!([key])).await.map_err(step)? {
            Value::Null => Ok(None),
            v => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| step(ApiError::Shape(e))),
        }
    }

    /// A read whose answer is a list (`null` reads as empty).
    async fn get_all<T: DeserializeOwned>(
        &self,
        service: &str,
        call: &str,
        args: Value,
        what: &str,
    ) -> Result<Vec<T>, BcmError> {
        let step = |source| BcmError::Read {
            what: what.to_owned(),
            source,
        };
        match self.call(service, call, args).await.map_err(step)? {
            Value::Null => Ok(Vec::new()),
            v => serde_json::from_value(v).map_err(|e| step(ApiError::Shape(e))),
        }
    }
}

/// The `cm-login-token` value among the `Set-Cookie` headers.
fn login_token(headers: &header::HeaderMap) -> Option<Secret> {
    headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            let first = v.split(';').next()?.trim();
            let value = first.strip_prefix(TOKEN_COOKIE)?.strip_prefix('=')?;
            (!value.is_empty()).then(|| Secret::new(value))
        })
}

/// The result of an answer, or the error it reports: an HTTP error status, or an in-band
/// `{"errormessage": …}`.
fn parse_answer(status: StatusCode, text: &str) -> Result<Value, ApiError> {
    if !status.is_success() {
        let message = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| {
                v.get("errormessage")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .or_else(|| {
                let t = text.trim();
                (!t.is_empty() && t.len() < 500).then(|| t.to_owned())
            })
            .or_else(|| status.canonical_reason().map(str::to_owned))
            .unwrap_or_else(|| "request failed".to_owned());
        return Err(ApiError::Status {
            status: status.as_u16(),
            message,
        });
    }
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    let v: Value =
        serde_json::from_str(text).map_err(|e| ApiError::json("the answer is not JSON", e))?;
    if let Some(m) = v.get("errormessage") {
        let m = m.as_str().map_or_else(|| m.to_string(), str::to_owned);
        return Err(ApiError::Refused(m));
    }
    Ok(v)
}

#[async_trait]
impl BcmApi for BcmClient {
    async fn device(&self, uuid: &str) -> Result<Option<Device>, BcmError> {
        self.get_one("cmdevice", "getDevice", uuid, || format!("node {uuid}"))
            .await
    }

    async fn devices(&self) -> Result<Vec<Device>, BcmError> {
        self.get_all("cmdevice", "getDevices", json!([]), "devices")
            .await
    }

    async fn update_device(&self, device: &Device) -> Result<(), BcmError> {
        let what = format!("node {}", device.hostname);
        let body = serde_json::to_value(device).map_err(|e| BcmError::Update {
            what: what.clone(),
            source: ApiError::json("cannot encode the device", e),
        })?;
        let answer = self
            // pythoncm's commit: the entity, then `force` (0: BCM's validation applies).
            .call("cmdevice", "updateDevice", json!([body, 0]))
            .await
            .map_err(|source| BcmError::Update {
                what: what.clone(),
                source,
            })?;
        let result: CommitResult =
            serde_json::from_value(answer).map_err(|e| BcmError::Update {
                what: what.clone(),
                source: ApiError::json("not a commit result", e),
            })?;
        if result.success {
            return Ok(());
        }
        if let Some(v) = result.validation.iter().find(|v| v.is_revision_mismatch()) {
            return Err(BcmError::RevisionConflict {
                what,
                detail: v.message.clone(),
            });
        }
        Err(BcmError::Rejected {
            what,
            validation: result.validation,
        })
    }

    async fn category(&self, uuid: &str) -> Result<Option<Category>, BcmError> {
        self.get_one("cmdevice", "getCategory", uuid, || {
            format!("category {uuid}")
        })
        .await
    }

    async fn categories(&self) -> Result<Vec<Category>, BcmError> {
        self.get_all("cmdevice", "getCategories", json!([]), "categories")
            .await
    }

    async fn software_image(&self, uuid: &str) -> Result<Option<SoftwareImage>, BcmError> {
        self.get_one("cmpart", "getSoftwareImage", uuid, || {
            format!("software image {uuid}")
        })
        .await
    }

    async fn software_images(&self) -> Result<Vec<SoftwareImage>, BcmError> {
        self.get_all("cmpart", "getSoftwareImages", json!([]), "software images")
            .await
    }

    async fn status(&self, uuid: &str) -> Result<Option<DeviceStatus>, BcmError> {
        self.get_one("cmstatus", "getStatus", uuid, || {
            format!("the status of {uuid}")
        })
        .await
    }

    async fn statuses(&self, uuids: &[String]) -> Result<Vec<DeviceStatus>, BcmError> {
        self.get_all(
            "cmstatus",
            "getStatusForDevices",
            json!([uuids]),
            "device status",
        )
        .await
    }

    async fn sysinfo(&self, uuids: &[String]) -> Result<Vec<SysInfo>, BcmError> {
        self.get_all(
            "cmdevice",
            "getSysInfoCollectors",
            // pythoncm's `system_information(nodes, basic=False, add_empty=False)`.
            json!([uuids, false, false]),
            "system information",
        )
        .await
    }

    async fn power(
        &self,
        uuids: &[String],
        op: PowerOp,
        what: &str,
    ) -> Result<PowerResult, BcmError> {
        let step = |source| BcmError::Power {
            operation: op.as_str(),
            what: what.to_owned(),
            source,
        };
        let args = json!([{"devices": uuids, "operation": op.as_str(), "force": false}]);
        let answer = self
            .call("cmdevice", "powerOperation", args)
            .await
            .map_err(step)?;
        serde_json::from_value(answer).map_err(|e| step(ApiError::Shape(e)))
    }

    fn stats(&self) -> CallStats {
        CallStats {
            calls: self
                .counters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_band_errors_are_refusals() {
        let e = parse_answer(
            StatusCode::OK,
            r#"{"errormessage": "no such call: cmdevice.bogus"}"#,
        )
        .expect_err("refused");
        assert!(matches!(e, ApiError::Refused(ref m) if m == "no such call: cmdevice.bogus"));
        assert_eq!(parse_answer(StatusCode::OK, "null").ok(), Some(Value::Null));
        let e = parse_answer(StatusCode::SERVICE_UNAVAILABLE, "").expect_err("5xx");
        assert!(e.is_transient());
    }

    #[test]
    fn an_answer_that_is_not_json_keeps_serdes_error() {
        let e = parse_answer(StatusCode::OK, "<html>").expect_err("not JSON");
        assert!(
            e.to_string()
                .starts_with("unexpected answer from the head node: the answer is not JSON: "),
            "{e}"
        );
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.is::<serde_json::Error>());
        assert!(!e.is_transient());
    }

    #[test]
    fn login_token_is_read_from_set_cookie() {
        let mut h = header::HeaderMap::new();
        h.append(
            header::SET_COOKIE,
            header::HeaderValue::from_static("other=1; path=/"),
        );
        h.append(
            header::SET_COOKIE,
            header::HeaderValue::from_static("cm-login-token=abc; path=/; Secure; HttpOnly"),
        );
        assert_eq!(
            login_token(&h).map(|s| s.expose().to_owned()),
            Some("abc".to_owned())
        );
    }
}
