//! [`NetrisClient`]: the Netris REST API over HTTPS with reqwest.
//!
//! One method per logical call. Each goes through [`NetrisClient::call`], which owns the
//! session (login, one re-login on 401), the retry policy (idempotent calls only) and the
//! request counters. Creates go through [`NetrisClient::create`], which never re-posts before
//! it has looked the object up by name.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use async_trait::async_trait;
use reqwest::header;
use serde::{Serialize, de::DeserializeOwned};

use crate::backends::shared::{
    LoginSession, Outcome, exchange, https_client_builder, no_answer, with_retries,
};

use super::{
    CallStats, NetrisApi, NetrisConfig, RetryPolicy, Secret,
    error::{ApiError, NetrisError},
    types::{
        AllocationWrite, Envelope, IpamNode, Server, Site, SubnetWrite, Tenant, VNet, VNetWrite,
        Vpc,
    },
};

mod route;
mod wire;

use route::{Lookup, Route};
use wire::{created_id, encode, parse_envelope, session_cookie};

/// A Netris controller client. Cheap to share (`Arc`); calls may run concurrently.
pub struct NetrisClient {
    http: reqwest::Client,
    base: String,
    username: String,
    password: Secret,
    request_timeout: Duration,
    retry: RetryPolicy,
    session: LoginSession,
    counters: [AtomicU64; Route::ALL.len()],
}

impl std::fmt::Debug for NetrisClient {
    /// Shows where and as whom; never the password or the session.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetrisClient")
            .field("endpoint", &self.base)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl NetrisClient {
    /// A client for `config`; connects lazily, on the first call.
    pub fn new(config: NetrisConfig) -> Result<NetrisClient, NetrisError> {
        let builder = https_client_builder(
            &config.endpoint,
            config.request_timeout,
            config.ca_pem.as_deref(),
        )
        .map_err(NetrisError::Settings)?;
        let http = builder.build().map_err(NetrisError::Https)?;
        Ok(NetrisClient {
            http,
            base: config.endpoint.trim_end_matches('/').to_owned(),
            username: config.username,
            password: config.password,
            request_timeout: config.request_timeout,
            retry: config.retry,
            session: LoginSession::default(),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    /// Sends one request and sorts its outcome. Counts the request.
    async fn send(
        &self,
        route: Route,
        path: &str,
        body: Option<&serde_json::Value>,
        cookie: Option<&Secret>,
    ) -> Outcome<Envelope, ApiError> {
        self.counters[route.index()].fetch_add(1, Ordering::Relaxed);
        let mut req = self
            .http
            .request(route.method(), format!("{}{path}", self.base))
            .header(header::ACCEPT, "application/json");
        if let Some(c) = cookie {
            req = req.header(header::COOKIE, format!("connect.sid={}", c.expose()));
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let has_session = route != Route::Login;
        exchange(
            req,
            has_session,
            |e| self.transport_error(e),
            parse_envelope,
        )
        .await
    }

    fn transport_error(&self, e: reqwest::Error) -> ApiError {
        let after = self.request_timeout;
        no_answer(
            e,
            |url| ApiError::Timeout { url, after },
            ApiError::Transport,
        )
    }

    /// The session cookie and its generation, logging in first when there is none.
    async fn session(&self) -> Result<(Secret, u64), NetrisError> {
        self.session.get_or_log_in(self.login()).await
    }

    /// `POST /api/auth`; returns the `connect.sid` cookie. Retried like an idempotent call,
    /// since logging in twice does no harm.
    async fn login(&self) -> Result<Secret, NetrisError> {
        let body = &serde_json::json!({
            "user": self.username,
            "password": self.password.expose(),
            "auth_scheme_id": 1,
        });
        let answered = with_retries(&self.retry, ApiError::is_transient, move || async move {
            self.counters[Route::Login.index()].fetch_add(1, Ordering::Relaxed);
            let resp = self
                .http
                .post(format!("{}/api/auth", self.base))
                .json(body)
                .send()
                .await
                .map_err(|e| self.transport_error(e))?;
            let status = resp.status();
            if status.is_success() {
                // The answer is final: a missing cookie will not come with another try.
                return Ok(session_cookie(resp.headers()).ok_or_else(|| {
                    ApiError::Decode("the login answer set no connect.sid cookie".to_owned())
                }));
            }
            let text = resp.text().await.unwrap_or_default();
            Err(match parse_envelope(status, &text) {
                Err(e) => e,
                Ok(_) => ApiError::Status {
                    status: status.as_u16(),
                    message: "login refused".to_owned(),
                    errors: String::new(),
                },
            })
        })
        .await;
        answered
            .and_then(|cookie| cookie)
            .map_err(|source| NetrisError::Login {
                endpoint: self.base.clone(),
                source,
            })
    }

    /// One logical call: logs in when needed, logs in again once on 401, retries idempotent
    /// calls on transient failures. `step` names the failure.
    async fn call(
        &self,
        route: Route,
        path: &str,
        body: Option<&serde_json::Value>,
        step: impl Fn(ApiError) -> NetrisError,
    ) -> Result<Envelope, NetrisError> {
        let mut attempt = 1;
        let mut logged_in_again = false;
        loop {
            let (cookie, generation) = self.session().await?;
            match self.send(route, path, body, Some(&cookie)).await {
                Outcome::Ok(env) => return Ok(env),
                Outcome::Unauthorized if !logged_in_again => {
                    logged_in_again = true;
                    self.session.expire(generation).await;
                }
                Outcome::Unauthorized => {
                    return Err(step(ApiError::Status {
                        status: 401,
                        message: "the controller refused the session right after logging in"
                            .to_owned(),
                        errors: String::new(),
                    }));
                }
                Outcome::Failed(e)
                    if route.idempotent() && e.is_transient() && attempt < self.retry.attempts =>
                {
                    tracing::debug!(route = route.label(), attempt, error = %e, "retrying");
                    tokio::time::sleep(self.retry.delay(attempt)).await;
                    attempt += 1;
                }
                Outcome::Failed(e) => return Err(step(e)),
            }
        }
    }

    /// A GET whose `data` is a list.
    async fn list<T: DeserializeOwned>(
        &self,
        route: Route,
        path: &str,
        what: &'static str,
    ) -> Result<Vec<T>, NetrisError> {
        let step = |source| NetrisError::List { what, source };
        let env = self.call(route, path, None, step).await?;
        match env.data {
            serde_json::Value::Null => Ok(Vec::new()),
            data => serde_json::from_value(data).map_err(|e| step(ApiError::json(what, e))),
        }
    }

    /// A create that never posts twice blindly: after a failure that leaves the outcome
    /// unknown, it looks the object up by name, adopts it if it is there, and only then posts
    /// again (within the retry policy).
    async fn create(
        &self,
        route: Route,
        path: &str,
        body: &impl Serialize,
        name: &str,
        lookup: Lookup,
        step: impl Fn(ApiError) -> NetrisError,
    ) -> Result<i64, NetrisError> {
        let body = encode(body).map_err(&step)?;
        let mut attempt = 1;
        loop {
            let err = match self.call(route, path, Some(&body), &step).await {
                Ok(env) => {
                    return created_id(&env).ok_or_else(|| {
                        step(ApiError::Decode(
                            "the create answer carried no id".to_owned(),
                        ))
                    });
                }
                Err(e) => e,
            };
            if !err.api().is_some_and(ApiError::is_transient) {
                return Err(err);
            }
            // The create may have happened even though its answer was lost. When even the
            // lookup fails, posting again is not safe: report the create's own failure.
            match self.lookup(lookup, name).await {
                Ok(Some(id)) => {
                    tracing::info!(
                        route = route.label(),
                        name,
                        id,
                        "adopted after an ambiguous create"
                    );
                    return Ok(id);
                }
                Ok(None) => {}
                Err(_) => return Err(err),
            }
            if attempt >= self.retry.attempts {
                return Err(err);
            }
            tokio::time::sleep(self.retry.delay(attempt)).await;
            attempt += 1;
        }
    }

    /// The id of the object named `name`, if it exists.
    async fn lookup(&self, lookup: Lookup, name: &str) -> Result<Option<i64>, NetrisError> {
        Ok(match lookup {
            Lookup::Allocation { vpc_id } | Lookup::Subnet { vpc_id } => {
                let want_allocation = matches!(lookup, Lookup::Allocation { .. });
                self.ipam(Some(vpc_id))
                    .await?
                    .iter()
                    .flat_map(IpamNode::walk)
                    .find(|n| n.name == name && n.is_allocation() == want_allocation)
                    .map(|n| n.id)
            }
            Lookup::VNet { vpc_id } => self
                .vnets(Some(vpc_id))
                .await?
                .into_iter()
                .find(|v| v.name == name)
                .map(|v| v.id),
        })
    }

    /// A PUT of `body`, whose answer carries nothing gpufleet reads.
    async fn update(
        &self,
        route: Route,
        path: &str,
        body: &impl Serialize,
        step: impl Fn(ApiError) -> NetrisError,
    ) -> Result<(), NetrisError> {
        let body = encode(body).map_err(&step)?;
        self.call(route, path, Some(&body), step).await.map(drop)
    }

    /// A DELETE that reports an object already gone as `Ok(false)`.
    async fn delete(
        &self,
        route: Route,
        path: &str,
        step: impl Fn(ApiError) -> NetrisError,
    ) -> Result<bool, NetrisError> {
        match self.call(route, path, None, step).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl NetrisApi for NetrisClient {
    async fn tenants(&self) -> Result<Vec<Tenant>, NetrisError> {
        self.list(Route::Tenants, "/api/tenants", "tenants").await
    }

    async fn sites(&self) -> Result<Vec<Site>, NetrisError> {
        self.list(Route::Sites, "/api/v2/sites", "sites").await
    }

    async fn vpcs(&self) -> Result<Vec<Vpc>, NetrisError> {
        self.list(Route::Vpcs, "/api/v2/vpc", "VPCs").await
    }

    async fn servers(&self) -> Result<Vec<Server>, NetrisError> {
        self.list(Route::Servers, "/api/v2/hw/server", "servers")
            .await
    }

    async fn ipam(&self, vpc_id: Option<i64>) -> Result<Vec<IpamNode>, NetrisError> {
        let path = match vpc_id {
            Some(id) => format!("/api/v2/ipam?filterByVpc={id}"),
            None => "/api/v2/ipam".to_owned(),
        };
        self.list(Route::Ipam, &path, "IPAM allocations and subnets")
            .await
    }

    async fn create_allocation(&self, body: &AllocationWrite) -> Result<i64, NetrisError> {
        let name = body.name.clone();
        self.create(
            Route::CreateAllocation,
            "/api/v2/ipam/allocation",
            body,
            &body.name,
            Lookup::Allocation {
                vpc_id: body.vpc.id,
            },
            |source| NetrisError::CreateAllocation {
                name: name.clone(),
                source,
            },
        )
        .await
    }

    async fn delete_allocation(&self, id: i64) -> Result<bool, NetrisError> {
        self.delete(
            Route::DeleteAllocation,
            &format!("/api/v2/ipam/allocation/{id}"),
            |source| NetrisError::DeleteAllocation { id, source },
        )
        .await
    }

    async fn create_subnet(&self, body: &SubnetWrite) -> Result<i64, NetrisError> {
        let name = body.name.clone();
        self.create(
            Route::CreateSubnet,
            "/api/v2/ipam/subnet",
            body,
            &body.name,
            Lookup::Subnet {
                vpc_id: body.vpc.id,
            },
            |source| NetrisError::CreateSubnet {
                name: name.clone(),
                source,
            },
        )
        .await
    }

    async fn update_subnet(&self, id: i64, body: &SubnetWrite) -> Result<(), NetrisError> {
        let path = format!("/api/v2/ipam/subnet/{id}");
        self.update(Route::UpdateSubnet, &path, body, |source| {
            NetrisError::UpdateSubnet {
                name: body.name.clone(),
                source,
            }
        })
        .await
    }

    async fn delete_subnet(&self, id: i64) -> Result<bool, NetrisError> {
        self.delete(
            Route::DeleteSubnet,
            &format!("/api/v2/ipam/subnet/{id}"),
            |source| NetrisError::DeleteSubnet { id, source },
        )
        .await
    }

    async fn vnets(&self, vpc_id: Option<i64>) -> Result<Vec<VNet>, NetrisError> {
        let path = match vpc_id {
            Some(id) => format!("/api/v2/vnet?filterByVpc={id}"),
            None => "/api/v2/vnet".to_owned(),
        };
        self.list(Route::ListVNets, &path, "V-Nets").await
    }

    async fn vnet(&self, id: i64) -> Result<Option<VNet>, NetrisError> {
        let step = |source| NetrisError::GetVNet { id, source };
        let env = match self
            .call(Route::GetVNet, &format!("/api/v2/vnet/{id}"), None, step)
            .await
        {
            Ok(env) => env,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        // Some versions answer a get by id with a one-element list.
        let data = match env.data {
            serde_json::Value::Array(mut items) if items.len() <= 1 => match items.pop() {
                Some(item) => item,
                None => return Ok(None),
            },
            serde_json::Value::Null => return Ok(None),
            other => other,
        };
        serde_json::from_value(data)
            .map(Some)
            .map_err(|e| step(ApiError::json(format!("V-Net {id}"), e)))
    }

    async fn create_vnet(&self, body: &VNetWrite) -> Result<i64, NetrisError> {
        let name = body.name.clone();
        self.create(
            Route::CreateVNet,
            "/api/v2/vnet",
            body,
            &body.name,
            Lookup::VNet {
                vpc_id: body.vpc.id,
            },
            |source| NetrisError::CreateVNet {
                name: name.clone(),
                source,
            },
        )
        .await
    }

    async fn update_vnet(&self, id: i64, body: &VNetWrite) -> Result<(), NetrisError> {
        let path = format!("/api/v2/vnet/{id}");
        self.update(Route::UpdateVNet, &path, body, |source| {
            NetrisError::UpdateVNet {
                name: body.name.clone(),
                source,
            }
        })
        .await
    }

    async fn delete_vnet(&self, id: i64) -> Result<bool, NetrisError> {
        self.delete(Route::DeleteVNet, &format!("/api/v2/vnet/{id}"), |source| {
            NetrisError::DeleteVNet { id, source }
        })
        .await
    }

    fn stats(&self) -> CallStats {
        CallStats {
            calls: Route::ALL
                .iter()
                .map(|r| {
                    (
                        r.label().to_owned(),
                        self.counters[r.index()].load(Ordering::Relaxed),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }
}
