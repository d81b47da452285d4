//! The Netris controller backend: the [`NetrisApi`] trait that resources use, and
//! [`NetrisClient`], its implementation over the controller's REST API.
//!
//! # Connection
//!
//! Settings come from the provider's `netris` block or `GPUFLEET_NETRIS_*` variables
//! ([`NetrisConfig::from_settings`]). The endpoint must be `https://`; plain `http://` is
//! accepted only for loopback addresses (local emulators in tests). TLS is always verified:
//! against `ca_certificate` when it is set, otherwise against the system's trusted roots.
//! `ca_certificate` may hold the PEM text itself (what `file("ca.pem")` gives) or the path of a
//! PEM file; a value that starts with `-----BEGIN` is PEM, anything else is a path. With a CA
//! configured, *only* that CA is trusted.
//!
//! # Session
//!
//! The client logs in with `POST /api/auth` and keeps the `connect.sid` cookie. An expired
//! session (HTTP 401) triggers one new login and one retry of the call. Clients are shared per
//! settings ([`shared_client`]), so a plan or refresh of many segments logs in once.
//!
//! # Retries and creates
//!
//! Idempotent calls (GET, PUT, DELETE) are retried with exponential backoff and jitter on
//! server errors (5xx), connection failures and timeouts. A create (POST) is never retried
//! blindly: when it fails in a way that leaves its outcome unknown, the client first looks the
//! object up by its name and adopts it if it exists, and only posts again when it does not.
//! Every object gpufleet creates has a deterministic name, so this lookup is exact.
//!
//! # One run, one list
//!
//! [`shared_client`] wraps the client in [`Cached`]: within one provider configuration (one
//! plan or one apply), tenants, VPCs, sites and servers are listed once, the IPAM tree and V-Net
//! list of a VPC once until the process deletes something, and every segment waiting for
//! provisioning reads one shared list of its VPC per poll. Refreshes always read afresh.
//!
//! # Counting
//!
//! Every HTTP request is counted per method and route ([`NetrisApi::stats`]), so tests and
//! benchmarks can report API calls per resource.

pub mod cache;
mod client;
mod error;
mod types;

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
pub use cache::Cached;
pub use client::NetrisClient;
pub use error::{ApiError, NetrisError};
pub use types::{
    AllocationWrite, DhcpRange, Envelope, GatewayRead, GatewayWrite, IdRef, IpamNode, Link, Named,
    PortRead, PortRef, PortWrite, Server, Site, StatusLabel, SubnetWrite, Tenant, VNet, VNetWrite,
    Vpc,
};

pub use crate::backends::{
    connect::FromSettings,
    shared::{RetryPolicy, Secret},
};
use crate::{
    backends::connect::Connect,
    backends::shared::{ClientCache, check_endpoint, invalid_setting, read_pem},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    path::AttrPath,
    provider_config::ProviderSettings,
};

/// What resources need from a Netris controller. Each method is one logical call; the
/// implementation may make more HTTP requests (login, retries, a lookup after an ambiguous
/// create).
#[async_trait]
pub trait NetrisApi: Send + Sync + fmt::Debug {
    /// All tenants (`GET /api/tenants`).
    async fn tenants(&self) -> Result<Vec<Tenant>, NetrisError>;

    /// All sites (`GET /api/v2/sites`).
    async fn sites(&self) -> Result<Vec<Site>, NetrisError>;

    /// All VPCs (`GET /api/v2/vpc`).
    async fn vpcs(&self) -> Result<Vec<Vpc>, NetrisError>;

    /// The server inventory (`GET /api/v2/hw/server`), with each server's links.
    async fn servers(&self) -> Result<Vec<Server>, NetrisError>;

    /// The IPAM tree of one VPC (`GET /api/v2/ipam?filterByVpc=`); without a VPC, the
    /// controller returns the default VPC's tree.
    async fn ipam(&self, vpc_id: Option<i64>) -> Result<Vec<IpamNode>, NetrisError>;

    /// Creates an allocation and returns its id, adopting one of the same name when the
    /// outcome of the create was ambiguous.
    async fn create_allocation(&self, body: &AllocationWrite) -> Result<i64, NetrisError>;

    /// Deletes an allocation (which cascades to its subnets). `Ok(false)` when it was
    /// already gone.
    async fn delete_allocation(&self, id: i64) -> Result<bool, NetrisError>;

    /// Creates a subnet and returns its id, adopting one of the same name when the outcome
    /// of the create was ambiguous.
    async fn create_subnet(&self, body: &SubnetWrite) -> Result<i64, NetrisError>;

    /// Replaces a subnet's settings.
    async fn update_subnet(&self, id: i64, body: &SubnetWrite) -> Result<(), NetrisError>;

    /// Deletes a subnet. `Ok(false)` when it was already gone.
    async fn delete_subnet(&self, id: i64) -> Result<bool, NetrisError>;

    /// The V-Nets, of one VPC when given (`GET /api/v2/vnet?filterByVpc=`).
    async fn vnets(&self, vpc_id: Option<i64>) -> Result<Vec<VNet>, NetrisError>;

    /// One V-Net with its ports and gateways; `None` when it does not exist.
    async fn vnet(&self, id: i64) -> Result<Option<VNet>, NetrisError>;

    /// Waits until V-Net `id` (of VPC `vpc_id`) is no longer provisioning and returns it;
    /// `None` when it disappeared. `last` holds the newest observation, also when the wait is
    /// cut short. This default polls the V-Net itself, from at once to every
    /// [`cache::POLL_MAX`]; [`Cached`] serves every waiter of a VPC with one list per poll.
    async fn settled_vnet(
        &self,
        vpc_id: i64,
        id: i64,
        last: &mut Option<VNet>,
    ) -> Result<Option<VNet>, NetrisError> {
        let _ = vpc_id;
        for n in 0.. {
            let Some(v) = self.vnet(id).await? else {
                return Ok(None);
            };
            let done = !v.provisioning;
            *last = Some(v);
            if done {
                break;
            }
            tokio::time::sleep(cache::poll_delay(n)).await;
        }
        Ok(last.clone())
    }

    /// Creates a V-Net and returns its id, adopting one of the same name when the outcome
    /// of the create was ambiguous.
    async fn create_vnet(&self, body: &VNetWrite) -> Result<i64, NetrisError>;

    /// Replaces a V-Net's settings (the controller ignores VPC changes).
    async fn update_vnet(&self, id: i64, body: &VNetWrite) -> Result<(), NetrisError>;

    /// Deletes a V-Net. `Ok(false)` when it was already gone.
    async fn delete_vnet(&self, id: i64) -> Result<bool, NetrisError>;

    /// HTTP requests made so far, per method and route.
    fn stats(&self) -> CallStats;
}

/// HTTP requests made, by `"METHOD /route"` (ids shown as `{id}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Count per route; routes never called are absent.
    pub calls: BTreeMap<String, u64>,
}

impl CallStats {
    /// All requests.
    pub fn total(&self) -> u64 {
        self.calls.values().sum()
    }

    /// Requests to one route, e.g. `"GET /api/v2/vnet/{id}"`.
    pub fn get(&self, route: &str) -> u64 {
        self.calls.get(route).copied().unwrap_or(0)
    }

    /// The requests made since `earlier` was taken.
    #[must_use]
    pub fn since(&self, earlier: &CallStats) -> CallStats {
        CallStats {
            calls: self
                .calls
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(earlier.get(k))))
                .filter(|(_, v)| *v > 0)
                .collect(),
        }
    }
}

/// Everything needed to talk to one controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetrisConfig {
    /// Base URL, e.g. `https://netris.example`.
    pub endpoint: String,
    /// Controller user.
    pub username: String,
    /// Its password.
    pub password: Secret,
    /// PEM CA bundle to trust instead of the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Bound on one HTTP request.
    pub request_timeout: Duration,
    /// How idempotent calls are retried.
    pub retry: RetryPolicy,
}

/// The type name that needs the `netris` block, for diagnostics.
const NEEDED_BY: &str = "gpufleet_network_segment";

impl NetrisConfig {
    /// A configuration with the default request timeout (60 s, as the Netris Terraform
    /// provider uses) and retry policy.
    pub fn new(endpoint: &str, username: &str, password: &str) -> NetrisConfig {
        NetrisConfig {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            username: username.to_owned(),
            password: Secret::new(password),
            ca_pem: None,
            request_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
        }
    }

    /// Reads the `netris` settings. Missing settings give the diagnostic that names the block
    /// attribute and the `GPUFLEET_NETRIS_*` variable; settings that are still unknown (the
    /// provider block depends on other resources) give an error too, since only apply, read
    /// and import get here.
    pub fn from_settings(settings: &ProviderSettings) -> Result<NetrisConfig, Diagnostics> {
        let diags = settings.require("netris", &["endpoint", "username", "password"], NEEDED_BY);
        if diags.has_error() {
            return Err(diags);
        }
        let (Some(endpoint), Some(username), Some(password)) = (
            settings.get("netris", "endpoint"),
            settings.get("netris", "username"),
            settings.get("netris", "password"),
        ) else {
            let mut d = Diagnostics::new();
            d.error_at(
                AttrPath::root(),
                "Provider Settings Not Known",
                format!(
                    "{NEEDED_BY} needs the provider's `netris` block, but its values are not \
                     known yet (they depend on resources that are not applied). Apply those \
                     first, for example with -target."
                ),
            );
            return Err(d);
        };
        let mut config = NetrisConfig::new(endpoint, username, password);
        if let Some(ca) = settings.get("netris", "ca_certificate") {
            config.ca_pem = Some(
                read_pem(ca, "CERTIFICATE").map_err(|e| settings_error("ca_certificate", &e))?,
            );
        }
        check_endpoint(&config.endpoint).map_err(|e| settings_error("endpoint", &e))?;
        Ok(config)
    }
}

fn settings_error(name: &str, problem: &str) -> Diagnostics {
    invalid_setting("netris", name, problem)
}

/// Where a Netris resource gets its client from: [`Connect`] of a Netris client.
pub trait NetrisBackend: Connect<dyn NetrisApi> {}

impl<T: Connect<dyn NetrisApi>> NetrisBackend for T {}

/// The client of the provider's `netris` settings, shared by every operation with the same
/// settings, or the diagnostic that says which settings are missing.
pub fn connect_from_settings(ctx: &Context) -> Result<Arc<dyn NetrisApi>, Diagnostics> {
    let config = NetrisConfig::from_settings(&ctx.settings)?;
    match shared_client(&config, ctx.settings.configuration) {
        Ok(client) => Ok(client),
        Err(e) => Err(Diagnostic::error("Invalid Netris Settings", e.to_string()).into()),
    }
}

#[async_trait]
impl Connect<dyn NetrisApi> for FromSettings {
    async fn connect(
        &self,
        ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn NetrisApi>, Diagnostics> {
        connect_from_settings(ctx)
    }
}

/// A given client, for tests and tools that bring their own.
#[async_trait]
impl<A: NetrisApi + 'static> Connect<dyn NetrisApi> for Arc<A> {
    async fn connect(
        &self,
        _ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn NetrisApi>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn NetrisApi>)
    }
}

/// A client for `config`, shared with every other operation that uses the same settings, so
/// sessions are reused across resources; with the lists of provider configuration
/// `configuration` ([`Cached`]: one run), so the next configuration lists afresh.
pub fn shared_client(
    config: &NetrisConfig,
    configuration: u64,
) -> Result<Arc<Cached<NetrisClient>>, NetrisError> {
    static CLIENTS: ClientCache<NetrisConfig, NetrisClient> = ClientCache::new();
    /// The lists of a run: the settings, the provider configuration, the cache.
    type Run = (NetrisConfig, u64, Arc<Cached<NetrisClient>>);
    static RUNS: std::sync::Mutex<Vec<Run>> = std::sync::Mutex::new(Vec::new());
    let client = CLIENTS.get_or_make(config, || NetrisClient::new(config.clone()))?;
    let mut runs = RUNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, _, cached)) = runs
        .iter()
        .find(|(c, n, _)| c == config && *n == configuration)
    {
        return Ok(Arc::clone(cached));
    }
    // Only the newest configuration's lists are kept: an older run has ended.
    runs.retain(|(c, _, _)| c != config);
    let cached = Arc::new(Cached::new(client));
    runs.push((config.clone(), configuration, Arc::clone(&cached)));
    Ok(cached)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn settings(netris: Value) -> ProviderSettings {
        ProviderSettings::resolve(&Value::object([("netris", netris)]), |_| None)
    }

    #[test]
    fn missing_settings_name_the_variable() {
        let Err(d) = NetrisConfig::from_settings(&settings(Value::Null)) else {
            panic!("expected an error");
        };
        assert!(d.0[0].detail.contains("GPUFLEET_NETRIS_ENDPOINT"), "{d:?}");
    }

    #[test]
    fn unknown_settings_are_an_error_at_apply() {
        let Err(d) = NetrisConfig::from_settings(&settings(Value::unknown())) else {
            panic!("expected an error");
        };
        assert_eq!(d.0[0].summary, "Provider Settings Not Known");
    }

    #[test]
    fn each_provider_configuration_gets_its_own_lists_over_one_session() {
        let config = NetrisConfig::new("http://127.0.0.1:9", "admin", "pw");
        let (Ok(first), Ok(again), Ok(next)) = (
            shared_client(&config, 1),
            shared_client(&config, 1),
            shared_client(&config, 2),
        ) else {
            panic!("a client");
        };
        assert!(Arc::ptr_eq(&first, &again));
        // A provider configured again (a reattached `-debug` provider's next run) lists
        // afresh, over the same logged-in client.
        assert!(!Arc::ptr_eq(&first, &next));
        assert!(std::ptr::eq(first.inner(), next.inner()));
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = NetrisConfig::new("https://n", "admin", "hunter2");
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
