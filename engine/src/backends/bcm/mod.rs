//! The NVIDIA Base Command Manager backend: the [`BcmApi`] trait that resources use, and
//! [`BcmClient`], its implementation over cmdaemon's JSON API (`POST /json`).
//!
//! # Connection
//!
//! Settings come from the provider's `bcm` block or `GPUFLEET_BCM_*` variables
//! ([`BcmConfig::from_settings`]). The endpoint must be `https://` (plain `http://` only on
//! loopback). TLS is always verified: against `ca_certificate` when it is set, and then
//! *only* against it, otherwise against the system roots. `client_certificate`,
//! `client_key` and `ca_certificate` each take the PEM text itself or the path of a PEM file
//! (a value starting with `-----BEGIN` is PEM).
//!
//! # Authentication
//!
//! With a client certificate, cmdaemon derives the profile (admin, readonly, …) from it.
//! Without one, the client logs in with `username`/`password` and keeps the
//! `cm-login-token` cookie; a 401 triggers one new login and one retry.
//!
//! # Retries, writes and revisions
//!
//! Reads (`get*`) and status polls (`cmstatus.*`) are retried with exponential backoff and
//! jitter on server errors, broken connections and timeouts. Writes (`updateDevice`,
//! `powerOperation`) are never retried blindly; callers re-read and decide. Updates send the
//! whole object as read, with its `revision`, so an object changed by someone else in between
//! is refused ([`BcmError::RevisionConflict`]) instead of silently overwritten.
//!
//! # Counting
//!
//! Every call is counted per `service.call` ([`BcmApi::stats`]), so tests and benchmarks can
//! report calls per resource.

mod client;
pub mod disk_setup;
mod error;
pub mod lifecycle;
mod types;

use std::{fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
pub use client::BcmClient;
pub use error::{ApiError, BcmError};
pub use lifecycle::{FREE_POOL, POOL_KEY};
pub use types::{
    Category, CommitResult, Device, DeviceStatus, DiskInfo, GpuInfo, ImageProxy, Interface,
    PowerOp, PowerResult, RELEASING_KEY, RackPosition, SoftwareImage, SysInfo, TENANT_KEY,
    Validation, ZERO_UUID, same_block_device,
};

pub use crate::backends::connect::FromSettings;
pub use crate::backends::netris::{CallStats, RetryPolicy, Secret};
use crate::{
    backends::connect::Connect,
    backends::shared::{ClientCache, check_endpoint, invalid_setting, read_pem},
    context::Context,
    diag::{Diagnostic, Diagnostics},
    provider_config::ProviderSettings,
};

/// What resources need from a BCM head node. Each method is one logical call; the
/// implementation may make more requests (login, retries).
#[async_trait]
pub trait BcmApi: Send + Sync + fmt::Debug {
    /// One device by uuid (`cmdevice.getDevice`); `None` when there is none.
    async fn device(&self, uuid: &str) -> Result<Option<Device>, BcmError>;

    /// The device named `hostname`. BCM fetches devices by uuid only, so this reads them all
    /// (`cmdevice.getDevices`) and picks by name, as pythoncm resolves names.
    async fn device_named(&self, hostname: &str) -> Result<Option<Device>, BcmError> {
        Ok(self
            .devices()
            .await?
            .into_iter()
            .find(|d| d.hostname == hostname))
    }

    /// Every device (`cmdevice.getDevices`).
    async fn devices(&self) -> Result<Vec<Device>, BcmError>;

    /// Replaces a device with `device` (`cmdevice.updateDevice`), refused when its
    /// `revision` is stale.
    async fn update_device(&self, device: &Device) -> Result<(), BcmError>;

    /// One category by uuid (`cmdevice.getCategory`).
    async fn category(&self, uuid: &str) -> Result<Option<Category>, BcmError>;

    /// The category named `name`, picked from all of them (`cmdevice.getCategories`).
    async fn category_named(&self, name: &str) -> Result<Option<Category>, BcmError> {
        Ok(self
            .categories()
            .await?
            .into_iter()
            .find(|c| c.name == name))
    }

    /// Every category (`cmdevice.getCategories`).
    async fn categories(&self) -> Result<Vec<Category>, BcmError>;

    /// One software image by uuid (`cmpart.getSoftwareImage`).
    async fn software_image(&self, uuid: &str) -> Result<Option<SoftwareImage>, BcmError>;

    /// The software image named `name`, picked from all of them (`cmpart.getSoftwareImages`).
    async fn software_image_named(&self, name: &str) -> Result<Option<SoftwareImage>, BcmError> {
        Ok(self
            .software_images()
            .await?
            .into_iter()
            .find(|i| i.name == name))
    }

    /// Every software image (`cmpart.getSoftwareImages`).
    async fn software_images(&self) -> Result<Vec<SoftwareImage>, BcmError>;

    /// The status of one device (`cmstatus.getStatus`); `None` when there is none.
    async fn status(&self, uuid: &str) -> Result<Option<DeviceStatus>, BcmError>;

    /// The status of several devices (`cmstatus.getStatusForDevices`).
    async fn statuses(&self, uuids: &[String]) -> Result<Vec<DeviceStatus>, BcmError>;

    /// The system information cmdaemon collected from several nodes (GPUs, disks), in one
    /// call (`cmdevice.getSysInfoCollectors` with pythoncm's `basic` and `add_empty` both
    /// false); a node that never reported any is missing.
    async fn sysinfo(&self, uuids: &[String]) -> Result<Vec<SysInfo>, BcmError>;

    /// Powers devices on, off or cycles them (`cmdevice.powerOperation`). `what` names them
    /// in errors.
    async fn power(
        &self,
        uuids: &[String],
        op: PowerOp,
        what: &str,
    ) -> Result<PowerResult, BcmError>;

    /// Calls made so far, per `service.call`.
    fn stats(&self) -> CallStats;
}

/// How the client proves who it is.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Auth {
    /// A client certificate and its key (PEM); cmdaemon takes the profile from it.
    Certificate {
        /// The certificate chain.
        cert_pem: Vec<u8>,
        /// The private key.
        key_pem: Secret,
    },
    /// Username and password login (cookie `cm-login-token`).
    Password {
        /// The user.
        username: String,
        /// The password.
        password: Secret,
    },
}

impl fmt::Debug for Auth {
    /// Says which kind, never the key or the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Certificate { .. } => f.write_str("Certificate(..)"),
            Auth::Password { username, .. } => f
                .debug_struct("Password")
                .field("username", username)
                .finish_non_exhaustive(),
        }
    }
}

/// Everything needed to talk to one head node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BcmConfig {
    /// Base URL, e.g. `https://bcm-head:8081`.
    pub endpoint: String,
    /// How the client authenticates.
    pub auth: Auth,
    /// PEM CA bundle to trust instead of the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Bound on one HTTP request.
    pub request_timeout: Duration,
    /// How reads are retried.
    pub retry: RetryPolicy,
}

/// The type names that need the `bcm` block, for diagnostics.
const NEEDED_BY: &str = "gpufleet_bcm_node and gpufleet_bcm_nodes";

impl BcmConfig {
    /// A configuration with the default request timeout (60 s) and retry policy.
    pub fn new(endpoint: &str, auth: Auth) -> BcmConfig {
        BcmConfig {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            auth,
            ca_pem: None,
            request_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
        }
    }

    /// Reads the `bcm` settings. Missing settings give the diagnostic that names the block
    /// attribute and the `GPUFLEET_BCM_*` variable; settings still unknown are an error too,
    /// since only apply, read and import get here.
    pub fn from_settings(settings: &ProviderSettings) -> Result<BcmConfig, Diagnostics> {
        let diags = settings.require("bcm", &["endpoint"], NEEDED_BY);
        if diags.has_error() {
            return Err(diags);
        }
        let get = |name| settings.get("bcm", name);
        let Some(endpoint) = get("endpoint") else {
            return Err(settings_error(
                "endpoint",
                "is not known yet (it depends on resources that are not applied). Apply \
                 those first, for example with -target.",
            ));
        };
        let auth = match (
            get("client_certificate"),
            get("client_key"),
            get("username"),
            get("password"),
        ) {
            (Some(cert), Some(key), _, _) => Auth::Certificate {
                cert_pem: read_pem(cert, "CERTIFICATE")
                    .map_err(|e| settings_error("client_certificate", &e))?,
                key_pem: Secret::new(
                    String::from_utf8_lossy(
                        &read_pem(key, "PRIVATE KEY")
                            .map_err(|e| settings_error("client_key", &e))?,
                    )
                    .into_owned(),
                ),
            },
            (Some(_), None, _, _) => {
                return Err(settings_error(
                    "client_key",
                    "is missing: client_certificate needs its key (or set \
                     GPUFLEET_BCM_CLIENT_KEY).",
                ));
            }
            (None, _, Some(user), Some(password)) => Auth::Password {
                username: user.to_owned(),
                password: Secret::new(password),
            },
            _ => {
                return Err(settings_error(
                    "client_certificate",
                    "is missing: set client_certificate and client_key \
                     (GPUFLEET_BCM_CLIENT_CERTIFICATE, GPUFLEET_BCM_CLIENT_KEY), or username \
                     and password (GPUFLEET_BCM_USERNAME, GPUFLEET_BCM_PASSWORD).",
                ));
            }
        };
        let mut config = BcmConfig::new(endpoint, auth);
        if let Some(ca) = get("ca_certificate") {
            config.ca_pem = Some(
                read_pem(ca, "CERTIFICATE").map_err(|e| settings_error("ca_certificate", &e))?,
            );
        }
        check_endpoint(&config.endpoint).map_err(|e| settings_error("endpoint", &e))?;
        Ok(config)
    }
}

fn settings_error(name: &str, problem: &str) -> Diagnostics {
    invalid_setting("bcm", name, problem)
}

/// Where a BCM resource or data source gets its client from: [`Connect`] of a BCM client.
pub trait BcmBackend: Connect<dyn BcmApi> {}

impl<T: Connect<dyn BcmApi>> BcmBackend for T {}

/// The client of the provider's `bcm` settings, shared by every operation with the same
/// settings, or the diagnostic that says which settings are missing.
pub fn connect_from_settings(ctx: &Context) -> Result<Arc<dyn BcmApi>, Diagnostics> {
    let config = BcmConfig::from_settings(&ctx.settings)?;
    match shared_client(&config) {
        Ok(client) => Ok(client),
        Err(e) => Err(Diagnostic::error("Invalid BCM Settings", e.to_string()).into()),
    }
}

#[async_trait]
impl Connect<dyn BcmApi> for FromSettings {
    async fn connect(
        &self,
        ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        connect_from_settings(ctx)
    }
}

/// A given client, for tests and tools that bring their own.
#[async_trait]
impl<A: BcmApi + 'static> Connect<dyn BcmApi> for Arc<A> {
    async fn connect(
        &self,
        _ctx: &Context,
        _needed_by: &str,
    ) -> Result<Arc<dyn BcmApi>, Diagnostics> {
        Ok(Arc::clone(self) as Arc<dyn BcmApi>)
    }
}

/// A client for `config`, shared with every other operation that uses the same settings, so
/// connections and the login are reused across resources.
pub fn shared_client(config: &BcmConfig) -> Result<Arc<BcmClient>, BcmError> {
    static CLIENTS: ClientCache<BcmConfig, BcmClient> = ClientCache::new();
    CLIENTS.get_or_make(config, || BcmClient::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn settings(bcm: Value) -> ProviderSettings {
        ProviderSettings::resolve(&Value::object([("bcm", bcm)]), |_| None)
    }

    #[test]
    fn missing_endpoint_names_the_variable() {
        let Err(d) = BcmConfig::from_settings(&settings(Value::Null)) else {
            panic!("expected an error");
        };
        assert!(d.0[0].detail.contains("GPUFLEET_BCM_ENDPOINT"), "{d:?}");
    }

    #[test]
    fn no_credentials_names_both_ways_to_authenticate() {
        let s = settings(Value::object([(
            "endpoint",
            Value::string("https://h:8081"),
        )]));
        let Err(d) = BcmConfig::from_settings(&s) else {
            panic!("expected an error");
        };
        assert!(
            d.0[0].detail.contains("GPUFLEET_BCM_CLIENT_CERTIFICATE"),
            "{d:?}"
        );
        assert!(d.0[0].detail.contains("GPUFLEET_BCM_USERNAME"), "{d:?}");
    }

    #[test]
    fn password_login_when_no_certificate() {
        let s = settings(Value::object([
            ("endpoint", Value::string("https://h:8081/")),
            ("username", Value::string("root")),
            ("password", Value::string("hunter2")),
        ]));
        let c = BcmConfig::from_settings(&s).expect("config");
        assert_eq!(c.endpoint, "https://h:8081");
        assert!(matches!(c.auth, Auth::Password { .. }));
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let auth = Auth::Certificate {
            cert_pem: b"cert".to_vec(),
            key_pem: Secret::new("-----BEGIN PRIVATE KEY-----secret"),
        };
        assert!(!format!("{auth:?}").contains("secret"));
    }
}
